// Split requests merged inside a thread-block cluster, shared by the sm90 decode kernels.
//
// When the plan sets DecodeParams::cluster = n, the grid is one cluster of n CTAs per q row: CTA
// rank k holds the row's k-th work item (or an empty one: kv_begin == kv_end). Each CTA leaves its
// normalised O (fp32 [16 × 512]) and its LSE per head in its own shared memory (partial_dst), then
// cluster_merge: after a cluster barrier, CTA rank k merges the n LSEs of every head
// (SoftmaxState::merge, then weight_of) and sums value dims [k·512/n, (k+1)·512/n) of all n partials
// through distributed shared memory, writing bf16 out (rank 0 also the LSE); a second cluster
// barrier keeps every CTA's shared memory alive until the others have read it. No partial goes
// through global memory and no combine kernel runs. Without clusters (cluster = 0) the partials go
// to the workspace for combine.cu.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/decode_params.h"
#include "mla/mla.h"

namespace mla::sm90 {

// A CTA's side of the merge, in shared memory it no longer needs once its tile loop is done.
struct ClusterExchange {
  float o[kNumHeads][kValueDim];               // the partial: normalised O (read by the cluster)
  float lse[kNumHeads];                        // its LSE per head (read by the cluster)
  float scratch[2 * kMaxCluster * kNumHeads];  // cluster_merge's: every partial's LSE, then weight
};

// Where an item's partial goes: in cluster mode fp32 rows of the CTA's exchange; else to the
// workspace, as fp32 rows (kF16 false: the bf16 kernel) or as fp16 rows and a scale per head (kF16:
// the wgmma kernels; kernels/common/partial.h). An LSE per head either way.
struct PartialDst {
  float* o;            // [16 × 512] fp32, normalised: the exchange, or the workspace (!kF16); else null
  std::uint16_t* o16;  // workspace (kF16): [16 × 512] fp16, normalised O · PartialScale::to_half; else null
  float* scale;        // with o16: [16] PartialScale::scale per head
  float* lse;          // [16]
};
// `exchange_o` and `exchange_lse` (shared memory, normally a ClusterExchange's o and lse) are the
// kernel's; used only in cluster mode.
template <bool kF16>
__device__ __forceinline__ PartialDst partial_dst(const DecodeParams& p, const WorkItem& item, float* exchange_o,
                                                  float* exchange_lse) {
  if (p.cluster > 0) return {exchange_o, nullptr, nullptr, exchange_lse};
  const std::int64_t row = std::int64_t(item.partial) * kNumHeads;
  if constexpr (kF16) {
    return {nullptr, static_cast<std::uint16_t*>(p.partial_o) + row * kValueDim, p.partial_scale + row,
            p.partial_lse + row};
  } else {
    return {static_cast<float*>(p.partial_o) + row * kValueDim, nullptr, nullptr, p.partial_lse + row};
  }
}

// Value dims [rank·512/N, (rank+1)·512/N) of every head: the N partials' 4-dim groups are loaded
// first (N distributed-shared-memory loads in flight per thread), then summed in rank order.
template <int kN, int kCtaThreads>
__device__ __forceinline__ void merge_slice(const DecodeParams& p, int row, int rank, const float* exchange_o,
                                            const float* weight) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  constexpr int kQuads = kValueDim / kN / 4;  // 4-dim groups of this CTA's slice, per head
  for (int idx = threadIdx.x; idx < kNumHeads * kQuads; idx += kCtaThreads) {
    const int h = idx / kQuads, dim = rank * (kValueDim / kN) + 4 * (idx % kQuads);
    float4 v[kN];
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      v[k] = *reinterpret_cast<const float4*>(cluster.map_shared_rank(exchange_o, k) + h * kValueDim + dim);
    }
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const float w = weight[k * kNumHeads + h];
      acc.x += w * v[k].x, acc.y += w * v[k].y, acc.z += w * v[k].z, acc.w += w * v[k].w;
    }
    std::uint16_t* out = p.out + (std::int64_t(row) * kNumHeads + h) * kValueDim + dim;
    // The host recipe in software, not bf16x2_rn's cvt: with the cvt here, ptxas allocates the bf16
    // kernel's tile loop differently, and bf16 256×8192 measured 1.3 % slower (perf-notes v74).
    *reinterpret_cast<uint2*>(out) = make_uint2(bf16x2_bits(acc.x, acc.y), bf16x2_bits(acc.z, acc.w));
  }
}

// The whole CTA (kCtaThreads threads) of every CTA in the cluster calls this after writing its
// partial to partial_dst; `scratch` is a ClusterExchange's (this CTA's shared memory).
template <int kCtaThreads>
__device__ __forceinline__ void cluster_merge(const DecodeParams& p, int row, const float* exchange_o,
                                              const float* exchange_lse,
                                              float (&scratch)[2 * kMaxCluster * kNumHeads]) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA's partial is in its shared memory
  const int n = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  float* lse = scratch;                                             // [n × 16]
  float* weight = scratch + kMaxCluster * kNumHeads;                // [n × 16]
  for (int i = threadIdx.x; i < n * kNumHeads; i += kCtaThreads) {  // LSE of partial i / 16, head i % 16
    lse[i] = cluster.map_shared_rank(exchange_lse, i / kNumHeads)[i % kNumHeads];
  }
  __syncthreads();
  if (threadIdx.x < kNumHeads) {
    const int h = threadIdx.x;
    SoftmaxState<float> st = SoftmaxState<float>::empty();
    for (int k = 0; k < n; ++k) {
      float wa, wb;
      st = SoftmaxState<float>::merge(st, SoftmaxState<float>::from_lse(lse[k * kNumHeads + h]), &wa, &wb);
    }
    for (int k = 0; k < n; ++k) weight[k * kNumHeads + h] = st.weight_of(lse[k * kNumHeads + h]);
    if (rank == 0 && p.lse != nullptr) p.lse[std::int64_t(row) * kNumHeads + h] = st.lse();
  }
  __syncthreads();  // weights ready
  switch (n) {
    case 2:
      merge_slice<2, kCtaThreads>(p, row, rank, exchange_o, weight);
      break;
    case 4:
      merge_slice<4, kCtaThreads>(p, row, rank, exchange_o, weight);
      break;
    case 8:
      merge_slice<8, kCtaThreads>(p, row, rank, exchange_o, weight);
      break;
    default:
      merge_slice<16, kCtaThreads>(p, row, rank, exchange_o, weight);
      break;
  }
  cluster.sync();  // the other CTAs are done reading this CTA's shared memory
}

}  // namespace mla::sm90
