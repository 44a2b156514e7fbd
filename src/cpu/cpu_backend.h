// The CPU backend: float32, online softmax through SoftmaxState, multithreaded over work items.
#pragma once

#include <cstddef>

#include "mla/mla.h"

namespace mla::cpu {

std::size_t workspace_size(const Problem& p);
Status plan(const Problem& p, void* workspace, std::size_t bytes, Plan* out);  // p validated
Status run(const Problem& p, const Plan& plan);

}  // namespace mla::cpu
