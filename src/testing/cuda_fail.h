// A CUDA runtime error as a Status, for the testing library's .cu files.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "mla/mla.h"

namespace mla::testing {

inline Status fail(const char* what, cudaError_t e) {
  return {StatusCode::cuda_error, std::string(what) + ": " + cudaGetErrorString(e)};
}

}  // namespace mla::testing
