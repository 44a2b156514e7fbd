// e4m3_encoder_sweep: one grid over all 2^32 fp32 bit patterns, each thread a strided share.
#include <cuda_runtime.h>

#include <cstring>

#include "kernels/common/formats.h"
#include "testing/cuda_fail.h"
#include "testing/format_sweep.h"

namespace mla::testing {
namespace {

struct SweepCounters {
  unsigned long long mismatches;  // (e4m3_one_kernel: the GPU's byte)
  unsigned first;                 // smallest mismatching pattern, 0xFFFFFFFF while none
};

__device__ __forceinline__ std::uint8_t gpu_e4m3(float x) {
  unsigned short pair;  // both bytes from x
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;\n" : "=h"(pair) : "f"(x));
  return std::uint8_t(pair & 0xFFu);
}

__global__ void e4m3_sweep_kernel(SweepCounters* c) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  unsigned long long count = 0;
  unsigned first = 0xFFFFFFFFu;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    const float x = __uint_as_float(unsigned(i));
    if (gpu_e4m3(x) != encode_e4m3_rne_satfinite(x)) {
      ++count;
      first = min(first, unsigned(i));
    }
  }
  if (count > 0) {
    atomicAdd(&c->mismatches, count);
    atomicMin(&c->first, first);
  }
}

__global__ void e4m3_one_kernel(unsigned bits, SweepCounters* c) {
  c->mismatches = gpu_e4m3(__uint_as_float(bits));
}

}  // namespace

Status e4m3_encoder_sweep(SweepResult* out) {
  *out = SweepResult{};
  if (!cuda_available()) return {StatusCode::no_device, "no usable sm_90 CUDA device"};
  SweepCounters* c = nullptr;
  cudaError_t e = cudaMalloc(&c, sizeof(SweepCounters));
  if (e != cudaSuccess) return fail("cudaMalloc", e);
  const SweepCounters init{0, 0xFFFFFFFFu};
  SweepCounters got{};
  e = cudaMemcpy(c, &init, sizeof(init), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    e4m3_sweep_kernel<<<1024, 256>>>(c);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(&got, c, sizeof(got), cudaMemcpyDeviceToHost);
  if (e == cudaSuccess && got.mismatches > 0) {  // the first mismatch's GPU byte, for the report
    out->mismatches = got.mismatches;
    out->first = got.first;
    float x;
    std::memcpy(&x, &got.first, sizeof(x));
    out->ours = encode_e4m3_rne_satfinite(x);
    e4m3_one_kernel<<<1, 1>>>(got.first, c);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(&got, c, sizeof(got), cudaMemcpyDeviceToHost);
    out->gpu = std::uint8_t(got.mismatches);
  }
  cudaFree(c);
  if (e != cudaSuccess) return fail("the e4m3 sweep", e);
  return Status::success();
}

}  // namespace mla::testing
