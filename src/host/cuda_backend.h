// The CUDA backend's host entry points (src/kernels/sm90/backend.cu, or the no-CUDA stub).
#pragma once

#include <cstddef>

#include "mla/mla.h"

namespace mla::cuda {

bool available();
Status workspace_size(const Problem& p, std::size_t* bytes);
Status plan(const Problem& p, void* workspace, std::size_t bytes, Plan* out);  // description validated
Status run(const Problem& p, const Plan& plan, void* stream);

}  // namespace mla::cuda
