// sm90 MLA decode from bf16 KV for row pairs (an even s_q): one CTA takes q rows v and v + 1 of a
// request, which share their keys (the first sees all but the pair's last), and streams each KV tile
// once for both. wgmma, tokens in M, heads in N.
//
// Grid: one CTA per work item over row pairs (WorkItem::pair_end, row_pair_work_list); two
// warpgroups, one CTA per SM (~185 KB). Warpgroup g owns q row v + g — its Sᵀ, softmax and Oᵀ, as
// the one-row wgmma kernels own theirs — and the two share the KV stages. Per 64-token tile t:
//
//   copy     tile t + 2 into the stage tile t leaves (2 stages; cp.async 16 B by all 256 threads, rows
//            unpadded, 16-byte chunks XOR-swizzled by row % 8: bf16_stage::row_offset), issued once
//            every warp's ldmatrix of tile t is done
//   Sᵀ = K·Qᵀ   wgmma m64n16k16 bf16 RS: A = K by ldmatrix from the stage (warp w: tokens
//            16w..16w+15), B = Q of the warpgroup's row (K-major, no swizzle); batches of 4 k16 steps,
//            two in flight
//   softmax  tile_maxima of the warpgroup's row (slack 8, P in bf16) on CTA barriers: a jump in either
//            row takes both warpgroups down the exact path, each for its own row
//   Oᵀ += Vᵀ·Pᵀ wgmma m64n16k16 bf16 RS: A = Vᵀ by ldmatrix.trans of the same stage (M = value dims:
//            warp w rows 16w..16w+15 of each 64-dim m-tile, row R + 8 dim D + 8), B = P; m-tiles in
//            groups, two in flight
//
// Split pairs write fp32 partials (the bf16 kernel's kind, which the combine reads for bf16).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/softmax_state.h"
#include "kernels/sm90/bf16_stage.h"
#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/launch.h"
#include "kernels/sm90/primitives.h"
#include "kernels/sm90/wgmma.h"
#include "mla/mla.h"

namespace mla::sm90 {
namespace {

using namespace wg;

struct PairTraits {
  static constexpr int kCtaThreads = 2 * kThreads;  // a warpgroup per q row
  static constexpr int kStages = 2;
  static constexpr int kChunks = bf16_stage::kChunks;                              // 16-byte chunks per row (72)
  static constexpr int kCopiesPerThread = kTile * kChunks / kCtaThreads;           // 18
  static constexpr int kQCopiesPerThread = 2 * kNumHeads * kChunks / kCtaThreads;  // 9
  static constexpr int kBatch = 4;                                                 // S k16 steps per batch
  static constexpr int kBatches = kSteps / kBatch;                                 // 9
  static constexpr int kPvSteps = kTile / 16;                                      // 4
  static constexpr float kSlack = 8.f;                                             // P ≤ e^8 in bf16 (tile_maxima)
  static constexpr bool kPartialsF16 = false;
};
using PT = PairTraits;
static_assert(bf16_stage::kRows == kTile, "a stage holds one wgmma M of tokens");
static_assert(kTile * PT::kChunks % PT::kCtaThreads == 0 && 2 * kNumHeads * PT::kChunks % PT::kCtaThreads == 0,
              "whole copies per thread");
static_assert(kSteps % PT::kBatch == 0, "whole S batches");

struct PairSmem {
  alignas(128) std::uint8_t kv[PT::kStages][bf16_stage::kBytes];  // rows of 1152 B, chunks swizzled (row_offset)
  CoreTile<kNumHeads, 2 * kHeadDim> q[2];                         // Q of rows v, v + 1, bf16 as given
  CoreTile<kNumHeads, 2 * kTile> p[2];                            // P of each row, bf16 [head][token]
  float red[2][kWarps][kNumHeads];                                // per warpgroup: tile max, then l
  float omax[2][kWarps][kNumHeads];                               // per warpgroup: write_output's |O| max
};
static_assert(sizeof(PairSmem) <= 227 * 1024, "bf16 row pairs: over the 227 KB shared-memory limit");

// Tokens [t0, t0 + 64) ∩ [.., end) into stage s: chunk tid + 256i of the tile's 64 × 72 (row =
// chunk / 72), rows past `end` zero-filled (their source is token t0's row, which exists).
template <bool kEvictFirst>
__device__ __forceinline__ void copy_tile(PairSmem& sm, int s, const DecodeParams& p, const KvRowMap& rows, int t0,
                                          int end) {
#pragma unroll
  for (int i = 0; i < PT::kCopiesPerThread; ++i) {
    const int idx = int(threadIdx.x) + PT::kCtaThreads * i, r = idx / PT::kChunks, c = idx % PT::kChunks;
    const std::uint8_t* src = p.kv + rows.row_or_first(t0 + r, t0, end) * p.kv_row_stride + 16 * c;
    cp_async16_kv<kEvictFirst>(sm.kv[s] + bf16_stage::row_offset(r, c), src, t0 + r < end ? 16 : 0);
  }
}
// Q of rows v, v + 1 (2 × 16 heads × 72 chunks, contiguous in q) into the K-major core matrices.
__device__ __forceinline__ void copy_q(PairSmem& sm, const DecodeParams& p, int v) {
  const auto* q = reinterpret_cast<const std::uint8_t*>(p.q + std::int64_t(v) * kNumHeads * kHeadDim);
#pragma unroll
  for (int i = 0; i < PT::kQCopiesPerThread; ++i) {
    const int idx = int(threadIdx.x) + PT::kCtaThreads * i;
    const int r = idx / (kNumHeads * PT::kChunks), h = (idx / PT::kChunks) % kNumHeads, c = idx % PT::kChunks;
    cp_async16(&sm.q[r].bytes[h / 8][c][h % 8][0], q + 16 * std::int64_t(idx), 16);
  }
}

template <bool kEvictFirst>
__global__ void __launch_bounds__(PT::kCtaThreads, 1) decode_bf16_pairs_kernel(const __grid_constant__ DecodeParams p) {
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  PairSmem& sm = *reinterpret_cast<PairSmem*>(smem_raw);
  launch_dependents();  // the combine grid's launch latency hides behind this kernel

  const WorkItem item = work_item(p, int(blockIdx.x));
  const int g = __shfl_sync(0xffffffffu, int(threadIdx.x) / kThreads, 0);  // warpgroup = row item.request + g
  const CtaSyncWarpgroupWarps bar;  // CTA barriers; warp w of the warpgroup indexes its own red
  const int warp = bar.warp(), lane = int(threadIdx.x % 32), gr = lane / 4;
  const KvRowMap rows(p, item);
  const int end = g == 0 ? item.pair_end : item.kv_end;  // this row's keys: [kv_begin, end)
  const int num_tiles = (item.kv_end - item.kv_begin + kTile - 1) / kTile;

  copy_q(sm, p, item.request);
  if (num_tiles > 0) copy_tile<kEvictFirst>(sm, 0, p, rows, item.kv_begin, item.kv_end);
  cp_async_commit();
  if (num_tiles > 1) copy_tile<kEvictFirst>(sm, 1, p, rows, item.kv_begin + kTile, item.kv_end);
  cp_async_commit();

  SoftmaxState<float> st[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) st[i] = SoftmaxState<float>::empty();
  float o[kMTiles][8];  // Oᵀ: m-tile mt, rows = dims 64mt + 16w + gr (+8), cols = heads (acc_head)
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int i = 0; i < 8; ++i) o[mt][i] = 0.f;
  }
  const std::uint64_t desc_q = desc(sm.q[g].bytes[0][0][0], CoreTile<kNumHeads, 2 * kHeadDim>::sbo());
  const std::uint64_t desc_p = desc(sm.p[g].bytes[0][0][0], CoreTile<kNumHeads, 2 * kTile>::sbo());
  // ldmatrix rows: S's K fragments (tokens 16w + lane % 8 + 8·((lane / 8) % 2), chunk 2k + lane / 16);
  // P·V's Vᵀ fragments (tokens 16kk + lane % 8 + 8·(lane / 16), chunk (64mt + 16w) / 8 + (lane / 8) % 2).
  const int s_row = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2), s_chunk = lane / 16;
  const int v_row = lane % 8 + 8 * (lane / 16), v_chunk = 2 * warp + (lane / 8) % 2;

  float sacc[8];
  std::uint32_t ka[2][PT::kBatch][4];
  std::uint32_t va[2][PT::kPvSteps][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) fence_regs(o[mt]);

  for (int t = 0; t < num_tiles; ++t) {
    const int t0 = item.kv_begin + t * kTile;
    const std::uint8_t* kv = sm.kv[t % PT::kStages];
    cp_async_wait<1>();               // this thread's copies of tile t (and Q) landed
    if (t == 0) fence_proxy_async();  // Q (cp.async) → wgmma reads
    __syncthreads();                  // ... every thread's

    // Sᵀ = K · Qᵀ: 9 batches of 4 k16 steps, two in flight.
#pragma unroll
    for (int bt = 0; bt < PT::kBatches; ++bt) {
      if (bt >= 2) wgmma_wait<1>();  // batch bt − 2 retired: ka[bt % 2] is free
#pragma unroll
      for (int i = 0; i < PT::kBatch; ++i) {
        const int k = PT::kBatch * bt + i;
        ldmatrix_x4(ka[bt % 2][i], kv + bf16_stage::row_offset(s_row, 2 * k + s_chunk));
      }
      fence_regs(sacc);
      wgmma_fence();
#pragma unroll
      for (int i = 0; i < PT::kBatch; ++i) {
        const int k = PT::kBatch * bt + i;
        if (k == 0) {
          wgmma_rs_bf16<false>(sacc, ka[0][0], desc_q);
        } else {
          wgmma_rs_bf16(sacc, ka[bt % 2][i], desc_q + 16 * k);  // + 256 bytes per k16 step
        }
      }
      wgmma_commit();
    }
    wgmma_wait<0>();
    fence_regs(sacc);
#pragma unroll
    for (int b2 = 0; b2 < 2; ++b2) {
#pragma unroll
      for (int i = 0; i < PT::kBatch; ++i) fence_regs(ka[b2][i]);
    }

    // Online softmax of the warpgroup's row: sacc[j0] / sacc[j0 + 2] at tokens u0 / u0 + 8.
    const int u0 = 16 * warp + gr;
    float x[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j0 = acc_reg(i);
      x[i][0] = t0 + u0 < end ? sacc[j0] * p.logit_scale : -INFINITY;
      x[i][1] = t0 + u0 + 8 < end ? sacc[j0 + 2] * p.logit_scale : -INFINITY;
    }
    float f[4];
    tile_maxima(x, st, PT::kSlack, t == 0, sm.red[g], f, bar);
    float pw[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // (The first row may see no token of a tile, or of the whole item so far: shift().)
      const float m = st[i].shift();
      pw[i][0] = SoftmaxState<float>::exp(x[i][0] - m);
      pw[i][1] = SoftmaxState<float>::exp(x[i][1] - m);
      st[i].add(pw[i][0] + pw[i][1]);
    }
    // P in bf16 by one stmatrix.trans: the warp's four 8 × 8 accumulator blocks, (tokens 16w..+7 |
    // +8..+15) × (heads 0..7 | 8..15), each transposed into its core matrix of P [head][token].
    stmatrix_x4_trans(&sm.p[g].bytes[lane / 16][2 * warp + (lane / 8) % 2][lane % 8][0], bf16x2_rn(pw[0][0], pw[1][0]),
                      bf16x2_rn(pw[0][1], pw[1][1]), bf16x2_rn(pw[2][0], pw[3][0]), bf16x2_rn(pw[2][1], pw[3][1]));
    if (f[0] != 1.f || f[1] != 1.f || f[2] != 1.f || f[3] != 1.f) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int i = 0; i < 8; ++i) o[mt][i] *= f[(i / 4) * 2 + (i % 2)];
      }
    }
    fence_proxy_async();  // P (generic stores) → wgmma reads
    __syncthreads();      // P complete

    // Oᵀ += Vᵀ · Pᵀ: an m-tile's 4 k16 steps per group, two groups in flight.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      if (mt >= 2) wgmma_wait<1>();  // m-tile mt − 2 retired: va[mt % 2] is free
#pragma unroll
      for (int kk = 0; kk < PT::kPvSteps; ++kk) {
        ldmatrix_x4_trans(va[mt % 2][kk], kv + bf16_stage::row_offset(16 * kk + v_row, 8 * mt + v_chunk));
      }
      // A tile with keys the row does not see — the pair's last, which the first row's P masks but the
      // stage holds as stored — takes their V out: 0 · NaN would still reach the row. Fragment k16
      // step kk: registers 0/1 tokens 16kk + 2c, + 1 (dims D, D + 8), 2/3 the same + 8.
      if (t0 + kTile > end) {
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) {
          const int tok = t0 + 16 * kk + 2 * (lane % 4);
          const std::uint32_t m0 = (tok < end ? 0xFFFFu : 0u) | (tok + 1 < end ? 0xFFFF0000u : 0u);
          const std::uint32_t m8 = (tok + 8 < end ? 0xFFFFu : 0u) | (tok + 9 < end ? 0xFFFF0000u : 0u);
          va[mt % 2][kk][0] &= m0;
          va[mt % 2][kk][1] &= m0;
          va[mt % 2][kk][2] &= m8;
          va[mt % 2][kk][3] &= m8;
        }
      }
      fence_regs(o[mt]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < PT::kPvSteps; ++kk) wgmma_rs_bf16(o[mt], va[mt % 2][kk], desc_p + 16 * kk);
      wgmma_commit();
    }
    // Every warp's ldmatrix of the stage are done: tile t + 2 may land in it.
    __syncthreads();
    if (t + 2 < num_tiles) {
      copy_tile<kEvictFirst>(sm, t % PT::kStages, p, rows, t0 + 2 * kTile, item.kv_end);
    }
    cp_async_commit();  // one group per iteration (empty past the end)
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) fence_regs(o[mt]);
#pragma unroll
    for (int b2 = 0; b2 < 2; ++b2) {
#pragma unroll
      for (int kk = 0; kk < PT::kPvSteps; ++kk) fence_regs(va[b2][kk]);
    }
  }
  cp_async_wait<0>();

  // The warpgroup's row: its output, or its partial (fp32, as the bf16 kernel's).
  WorkItem mine = item;
  mine.request = item.request + g;
  mine.partial = g == 0 || item.partial < 0 ? item.partial : item.pair_partial;
  const PartialDst part[1] = {partial_dst<PT::kPartialsF16>(p, mine, nullptr, nullptr)};
  write_output<false, 1, 8>(
      p, mine, part, sm.red[g], sm.omax[g], st, o, 1.f, 0.f, [&](int mt) { return 64 * mt + 16 * warp + gr; }, bar);
}

}  // namespace

DecodeKernel decode_bf16_pairs_kernel_info(bool evict_first) {
  return {evict_first ? decode_bf16_pairs_kernel<true> : decode_bf16_pairs_kernel<false>, PT::kCtaThreads,
          sizeof(PairSmem), 1, PT::kPartialsF16};
}

}  // namespace mla::sm90
