// sm90 split combine: merges the partials of requests whose KV was split over several work items
// (fp32 from the bf16 kernel; fp16 × a scale per (piece, head) from fp8 and MXFP4, partial.h: the
// kF16 instantiations), by LSE, through the shared SoftmaxState merge rule. Two kernels:
//
// combine_few_kernel<G, S, kF16> (rows of at most S·G pieces: G = 1 with S = 4, 8 or 16, and S = 16
// with G = 2 or 4): grid (q row, head), G groups of one thread per 4 value dims. Group g's thread
// loads the LSEs (and scales) of partials g, g + G, … (at most S: the code is no longer than the row) and
// its 4 dims of them, all at once (one round trip to L2), and forms in registers the group's
// state — m = the largest LSE, l = Σ exp(LSE − m): SoftmaxState's definition with every partial's
// l = 1, what a chain of merge() calls gives — and Σ exp(LSE − m) · partial. With G = 1 that is the
// row (no shared memory, no barrier); else group 0 merges the other groups' states in group order
// through shared memory and SoftmaxState::merge (one barrier). Warp 0 runs this code once more
// before griddepcontrol.wait, with every load and store switched off, so that the real pass finds
// its instructions in the caches (perf-notes v70c).
//
// combine_kernel (longer splits): grid (q row, head, dim chunk) — CTAs of rows the decode kernel
// wrote directly return at once.
// A CTA owns kValueDim / C value dims (C = 1, 2 or 4 chunks: more CTAs where few rows would leave
// most SMs idle) as L = 128 / C dim lanes of 4 dims × G partial groups (G from the longest split:
// more loads in flight where few CTAs stream many partials). The CTA first merges the partial LSEs
// (each thread a strided subset, then warp butterflies and one shared-memory step of
// SoftmaxState::merge; a thread keeps its first LSE for its weight), puts every partial's weight in
// shared memory, then group g sums partials g, g + G, … with 8 independent 16-byte loads in flight
// per thread, and group 0 adds the group sums in a fixed order (deterministic). Partials are finite
// (an empty one is zeros), so a zero weight needs no branch.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/common/partial.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/launch.h"
#include "kernels/sm90/primitives.h"

namespace mla::sm90 {
namespace {

constexpr int kLanes = kValueDim / 4;  // 128 dim lanes of 4 dims over all chunks
constexpr int kMaxChunks = 4;          // value-dim chunks (grid z)
constexpr int kMaxThreads = 512;
constexpr int kMaxWarps = kMaxThreads / 32;
constexpr int kUnroll = 8;         // partial loads in flight per thread
constexpr int kWeightChunk = 256;  // partial weights held in shared memory at a time

constexpr int kFewPerThread = 16;  // most partials one thread of combine_few_kernel loads at once
constexpr int kFewMaxGroups = 4;   // combine_few_kernel takes rows of up to 16 · 4 pieces

// 4 consecutive values of a partial: fp32 (16 bytes) or fp16 (8 bytes, times the partial's scale
// by the caller). `at` counts values from the start of the partials.
template <bool kF16>
using PartialBits = std::conditional_t<kF16, uint2, float4>;
template <bool kF16>
__device__ __forceinline__ PartialBits<kF16> load_bits(const void* partials, std::int64_t at) {
  if constexpr (kF16) {
    return *reinterpret_cast<const uint2*>(static_cast<const std::uint16_t*>(partials) + at);
  } else {
    return *reinterpret_cast<const float4*>(static_cast<const float*>(partials) + at);
  }
}
__device__ __forceinline__ float4 to_float4(const float4& v) {
  return v;
}
__device__ __forceinline__ float4 to_float4(const uint2& u) {
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

template <int kGroups, int kSlots, bool kF16>
__global__ void __launch_bounds__(kLanes* kGroups) combine_few_kernel(const __grid_constant__ CombineParams p) {
  static_assert(kSlots <= kFewPerThread && (kGroups == 1 || kSlots == kFewPerThread), "the launches below");
  static_assert(kLanes % 32 == 0, "warp 0, the only warp in the warm pass, lies in group 0");
  const int b = blockIdx.x, h = blockIdx.y;  // b: q row (virtual request)
  const RequestSplit split = p.splits[b];    // written by plan(), not by the decode grid
  if (split.num_partials == 0) return;
  const int lane = int(threadIdx.x) % kLanes, grp = int(threadIdx.x) / kLanes;
  const int dim = 4 * lane;
  const float* lse_of = p.partial_lse + std::int64_t(split.first_partial) * kNumHeads + h;  // stride kNumHeads
  const float* scale_of = p.partial_scale + std::int64_t(split.first_partial) * kNumHeads + h;
  const std::int64_t o_of = (std::int64_t(split.first_partial) * kNumHeads + h) * kValueDim + dim;  // in values
  // Launched early (programmatic dependent launch), warp 0 runs this code twice: pass 0 while the
  // decode grid may still run, every load and store switched off (n = 0, no stores, no shared
  // memory, no barrier), only so that pass 1 of every warp — after griddepcontrol.wait, with the
  // decode grid's partials — finds its instructions in the caches instead of fetching them cold.
  // One warp is enough to fill the SM's instruction cache and costs the SM little (v70c).
#pragma unroll 1
  for (int pass = opaque(threadIdx.x < 32 ? 0 : 1); pass < 2; ++pass) {
    const bool real = pass == 1;
    if (real) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int n = real ? split.num_partials : 0;
    // Group grp: partials grp, grp + G, … — all of its loads in flight at once.
    float lse[kSlots], sc[kSlots];
    PartialBits<kF16> raw[kSlots];
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      const int j = grp + kGroups * i;
      lse[i] = j < n ? lse_of[j * kNumHeads] : -INFINITY;
      sc[i] = kF16 && j < n ? scale_of[j * kNumHeads] : 1.f;
      raw[i] =
          j < n ? load_bits<kF16>(p.partial_o, o_of + std::int64_t(j) * kNumHeads * kValueDim) : PartialBits<kF16>{};
    }
    // The group's state (m = its largest LSE, l = Σ exp(LSE − m)) and Σ exp(LSE − m) · partial.
    // fmaxf drops a NaN LSE: `any` keeps a group whose partials are all NaN from reading as empty
    // (its exp(NaN − m) then makes l NaN, as SoftmaxState wants).
    float m = -INFINITY;
    bool any = false;
#pragma unroll
    for (int i = 0; i < kSlots; ++i) {
      m = fmaxf(m, lse[i]);
      any |= lse[i] != -INFINITY;
    }
    SoftmaxState<float> st = SoftmaxState<float>::empty();
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (any || !real) {  // pass 0: the same instructions, on values it discards (m = −inf: l NaN)
      st = {m, 0.f};
#pragma unroll
      for (int i = 0; i < kSlots; ++i) {
        const float e = SoftmaxState<float>::exp(lse[i] - m);  // 0 for an empty partial or past n
        st.add(e);
        const float w = e * sc[i];
        const float4 v = to_float4(raw[i]);
        acc.x += w * v.x, acc.y += w * v.y, acc.z += w * v.z, acc.w += w * v.w;
      }
    }
    if constexpr (kGroups > 1) {  // group 0 merges the others' states and sums in group order
      __shared__ float4 group_acc[kGroups - 1][kLanes];
      __shared__ SoftmaxState<float> group_st[kGroups - 1];
      if (grp > 0) {  // pass 1 only: warp 0, the one warp in pass 0, is in group 0
        group_acc[grp - 1][lane] = acc;
        if (lane == 0) group_st[grp - 1] = st;
      }
      if (real) __syncthreads();
      if (grp > 0) continue;
      if (real) {
#pragma unroll
        for (int g = 0; g < kGroups - 1; ++g) {
          float wa, wb;
          st = SoftmaxState<float>::merge(st, group_st[g], &wa, &wb);
          const float4 x = group_acc[g][lane];
          acc.x = wa * acc.x + wb * x.x, acc.y = wa * acc.y + wb * x.y;
          acc.z = wa * acc.z + wb * x.z, acc.w = wa * acc.w + wb * x.w;
        }
      }
    }
    const float inv = st.inv_l();
    if (real) {
      std::uint16_t* out = p.out + (std::int64_t(b) * kNumHeads + h) * kValueDim + dim;
      *reinterpret_cast<uint2*>(out) =
          make_uint2(bf16x2_rn(acc.x * inv, acc.y * inv), bf16x2_rn(acc.z * inv, acc.w * inv));
      if (p.lse != nullptr && threadIdx.x == 0) p.lse[std::int64_t(b) * kNumHeads + h] = st.lse();
    }
  }
}

__device__ __forceinline__ SoftmaxState<float> merge(const SoftmaxState<float>& a, const SoftmaxState<float>& b) {
  float wa, wb;
  return SoftmaxState<float>::merge(a, b, &wa, &wb);
}

template <bool kF16>
__global__ void __launch_bounds__(kMaxThreads) combine_kernel(const __grid_constant__ CombineParams p) {
  const int b = blockIdx.x, h = blockIdx.y;   // b: q row (virtual request)
  const int lanes = kLanes / int(gridDim.z);  // dim lanes of this CTA's chunk
  const RequestSplit split = p.splits[b];     // written by plan(), not by the decode grid
  if (split.num_partials == 0) return;
  // Launched early (programmatic dependent launch): wait for the decode grid's partials.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* lse = p.partial_lse + std::int64_t(split.first_partial) * kNumHeads + h;  // stride kNumHeads

  const int threads = int(blockDim.x), warps = threads / 32, groups = threads / lanes;
  const int dl = threadIdx.x % lanes, grp = threadIdx.x / lanes;
  const int dim = int(blockIdx.z) * 4 * lanes + 4 * dl;  // this thread's first value dim
  const float* scale = p.partial_scale + std::int64_t(split.first_partial) * kNumHeads + h;      // stride kNumHeads
  const std::int64_t o = (std::int64_t(split.first_partial) * kNumHeads + h) * kValueDim + dim;  // in values
  // kUnroll partials in flight per thread; the first batch is issued before the LSE merge so that
  // its latency overlaps the merge's.
  float4 v[kUnroll];
  const auto load_batch = [&](int base, int i, int n) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = i + groups * u;
      v[u] = j < n ? to_float4(load_bits<kF16>(p.partial_o, o + std::int64_t(base + j) * kNumHeads * kValueDim))
                   : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  load_batch(0, grp, min(kWeightChunk, split.num_partials));
  SoftmaxState<float> st = SoftmaxState<float>::empty();
  float first_lse = 0.f;  // this thread's first partial LSE, kept for its weight (no second load)
  for (int i = threadIdx.x; i < split.num_partials; i += threads) {
    const float x = lse[std::int64_t(i) * kNumHeads];
    if (i == int(threadIdx.x)) first_lse = x;
    st = merge(st, SoftmaxState<float>::from_lse(x));
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    st = merge(st, {__shfl_xor_sync(0xffffffffu, st.m, off), __shfl_xor_sync(0xffffffffu, st.l, off)});
  }
  __shared__ SoftmaxState<float> warp_state[kMaxWarps];
  if (lane == 0) warp_state[warp] = st;
  __syncthreads();
  st = warp_state[0];
  for (int w = 1; w < warps; ++w) st = merge(st, warp_state[w]);

  // Weights of all partials first (shared memory), then the weighted sum with kUnroll
  // independent 16-byte loads in flight per thread — no load waits on a weight or a branch.
  __shared__ float weight[kWeightChunk];
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int base = 0; base < split.num_partials; base += kWeightChunk) {
    const int n = min(kWeightChunk, split.num_partials - base);
    __syncthreads();  // the previous chunk's weights are consumed
    for (int i = threadIdx.x; i < n; i += threads) {
      weight[i] =
          st.weight_of(base == 0 && i == int(threadIdx.x) ? first_lse : lse[std::int64_t(base + i) * kNumHeads]) *
          (kF16 ? scale[std::int64_t(base + i) * kNumHeads] : 1.f);
    }
    __syncthreads();
    for (int i = grp; i < n; i += groups * kUnroll) {
      if (base > 0 || i > grp) load_batch(base, i, n);  // the first batch is already in flight
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = i + groups * u;
        const float w = j < n ? weight[j] : 0.f;
        acc.x += w * v[u].x;
        acc.y += w * v[u].y;
        acc.z += w * v[u].z;
        acc.w += w * v[u].w;
      }
    }
  }
  __shared__ float4 group_sum[kMaxThreads];  // [group − 1][lane]
  if (grp > 0) group_sum[(grp - 1) * lanes + dl] = acc;
  __syncthreads();
  if (grp > 0) return;
  for (int g2 = 0; g2 < groups - 1; ++g2) {
    const float4 x = group_sum[g2 * lanes + dl];
    acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
  }
  std::uint16_t* out = p.out + (std::int64_t(b) * kNumHeads + h) * kValueDim + dim;
  *reinterpret_cast<uint2*>(out) = make_uint2(bf16x2_rn(acc.x, acc.y), bf16x2_rn(acc.z, acc.w));
  if (p.lse != nullptr && threadIdx.x == 0 && blockIdx.z == 0) p.lse[std::int64_t(b) * kNumHeads + h] = st.lse();
}

// The kernel and its shape for rows of at most `max_partials` pieces, partials of type kF16.
template <bool kF16>
cudaError_t launch_combine_as(cudaLaunchConfig_t& cfg, const CombineParams& p, int max_partials, int sms) {
  if (max_partials <= kFewPerThread * kFewMaxGroups) {
    const int groups = max_partials <= kFewPerThread ? 1 : (max_partials <= 2 * kFewPerThread ? 2 : 4);
    static_assert(kFewMaxGroups == 4 && kFewPerThread == 16, "groups: 1, 2 or 4; slots 4, 8 or 16");
    cfg.gridDim = dim3(p.rows, kNumHeads);
    cfg.blockDim = dim3(kLanes * groups);
    switch (groups) {
      case 1:
        if (max_partials <= 4) return cudaLaunchKernelEx(&cfg, combine_few_kernel<1, 4, kF16>, p);
        if (max_partials <= 8) return cudaLaunchKernelEx(&cfg, combine_few_kernel<1, 8, kF16>, p);
        return cudaLaunchKernelEx(&cfg, combine_few_kernel<1, 16, kF16>, p);
      case 2:
        return cudaLaunchKernelEx(&cfg, combine_few_kernel<2, 16, kF16>, p);
      default:
        return cudaLaunchKernelEx(&cfg, combine_few_kernel<4, 16, kF16>, p);
    }
  }
  // Dim chunks: up to 4 while (rows × heads) CTAs would not give every SM two.
  int chunks = 1;
  while (chunks < kMaxChunks && std::int64_t(p.rows) * kNumHeads * chunks < 2 * sms) chunks *= 2;
  cfg.gridDim = dim3(p.rows, kNumHeads, chunks);
  // One group per 16 partials (two rounds of 8 loads in flight) per 128 dim lanes, at most 512 threads.
  const int lanes = kLanes / chunks;
  cfg.blockDim = dim3(lanes * std::clamp(chunks * ((max_partials + 15) / 16), 1, kMaxThreads / lanes));
  return cudaLaunchKernelEx(&cfg, combine_kernel<kF16>, p);
}

}  // namespace

cudaError_t launch_combine(const CombineParams& p, int max_partials, int sms, cudaStream_t stream) {
  // Programmatic dependent launch: the grid may start while the decode grid still runs.
  cudaLaunchConfig_t cfg{};
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return p.partial_f16 ? launch_combine_as<true>(cfg, p, max_partials, sms)
                       : launch_combine_as<false>(cfg, p, max_partials, sms);
}

}  // namespace mla::sm90
