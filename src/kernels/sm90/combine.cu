// sm90 split combine: merges the fp32 partials of requests whose KV was split over several
// work items, by LSE, through the shared SoftmaxState merge rule.
//
// Grid: one CTA per request (requests the decode kernel wrote directly return at once).
// 16 warps, warp h owns head h: its lanes first merge the partial LSEs (each lane a strided
// subset, then a butterfly of SoftmaxState::merge), then each lane owns 16 value dims and sums
// the weighted partials with independent 16-byte loads.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/launch.h"

namespace mla::sm90 {
namespace {

constexpr int kThreads = kNumHeads * 32;
constexpr int kDimsPerLane = kValueDim / 32;  // 16
static_assert(kDimsPerLane % 4 == 0, "lanes load float4");

__global__ void __launch_bounds__(kThreads) combine_kernel(const __grid_constant__ CombineParams p) {
  const int b = blockIdx.x;
  const RequestSplit split = p.splits[b];
  if (split.num_partials == 0) return;
  const int h = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* lse = p.partial_lse + std::int64_t(split.first_partial) * kNumHeads + h;

  SoftmaxState<float> st = SoftmaxState<float>::empty();
  for (int i = lane; i < split.num_partials; i += 32) {
    float wa, wb;
    st = SoftmaxState<float>::merge(st, SoftmaxState<float>::from_lse(lse[std::int64_t(i) * kNumHeads]), &wa, &wb);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const SoftmaxState<float> other{__shfl_xor_sync(0xffffffffu, st.m, off), __shfl_xor_sync(0xffffffffu, st.l, off)};
    float wa, wb;
    st = SoftmaxState<float>::merge(st, other, &wa, &wb);
  }

  float acc[kDimsPerLane] = {};
  const float* o = p.partial_o + (std::int64_t(split.first_partial) * kNumHeads + h) * kValueDim + lane * kDimsPerLane;
#pragma unroll 4
  for (int i = 0; i < split.num_partials; ++i) {
    const float w = st.weight_of(lse[std::int64_t(i) * kNumHeads]);
    const float4* src = reinterpret_cast<const float4*>(o + std::int64_t(i) * kNumHeads * kValueDim);
#pragma unroll
    for (int j = 0; j < kDimsPerLane / 4; ++j) {
      const float4 v = src[j];
      if (w != 0.f) {
        acc[4 * j] += w * v.x;
        acc[4 * j + 1] += w * v.y;
        acc[4 * j + 2] += w * v.z;
        acc[4 * j + 3] += w * v.w;
      }
    }
  }
  std::uint16_t* out = p.out + (std::int64_t(b) * kNumHeads + h) * kValueDim + lane * kDimsPerLane;
  std::uint32_t packed[kDimsPerLane / 2];
#pragma unroll
  for (int j = 0; j < kDimsPerLane / 2; ++j) {
    packed[j] = std::uint32_t(float_to_bf16(acc[2 * j])) | (std::uint32_t(float_to_bf16(acc[2 * j + 1])) << 16);
  }
  reinterpret_cast<uint4*>(out)[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  reinterpret_cast<uint4*>(out)[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  if (p.lse != nullptr && lane == 0) p.lse[std::int64_t(b) * kNumHeads + h] = st.lse();
}

}  // namespace

cudaError_t launch_combine(const CombineParams& p, cudaStream_t stream) {
  combine_kernel<<<p.batch, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mla::sm90
