// Built instead of src/testing/gpu_timing.cu when no CUDA toolkit was found: the GPU timing
// harness reports "no GPU" for everything. (device_inputs_stub.cpp does the same for uploads.)
#include <cstddef>
#include <memory>

#include "testing/gpu_timing.h"

namespace mla::testing {
namespace {
constexpr const char* kNoGpu = "no GPU: mla was built without CUDA (no nvcc found at configure time)";
}  // namespace

GpuInfo gpu_info() {
  GpuInfo g;
  g.error = kNoGpu;
  return g;
}

Status GpuTimer::create(std::unique_ptr<GpuTimer>*, std::size_t) {
  return {StatusCode::no_device, kNoGpu};
}

}  // namespace mla::testing
