// sm90 MLA decode from bf16 KV for row pairs (an even s_q): one CTA takes q rows v and v + 1 of a
// request, which share their keys (the first sees all but the pair's last), and streams each KV tile
// once for both. wgmma, tokens in M, heads in N, both operands in shared memory.
//
// Grid: one CTA per work item over row pairs (WorkItem::pair_end, row_pair_work_list); two
// warpgroups, one CTA per SM (~226 KB). Warpgroup g owns q row v + g — its Sᵀ, softmax and Oᵀ, as
// the one-row wgmma kernels own theirs — and the two share the KV stages. Per 64-token tile t:
//
//   wait     tile t: its 9 boxes of 64 tokens × 128 bytes (dims 64b..64b+63) in slots (9t + b) % 23 of
//            a ring of box slots, each in the 128-byte-swizzle layout (bf16_stage::boxes; cp.async 16 B
//            by all 256 threads); proxy fence, CTA barrier
//   Sᵀ = K·Qᵀ   wgmma m64n16k16 bf16 SS: A = K straight from the stage (K-major, 128-byte swizzle),
//            B = Q of the warpgroup's row (K-major, no swizzle); 36 k16 steps, one group
//   softmax  tile_maxima of the warpgroup's row (slack 8, P in bf16) on CTA barriers: a jump in either
//            row takes both warpgroups down the exact path, each for its own row
//   Oᵀ += Vᵀ·Pᵀ wgmma m64n16k16 bf16 SS: A = Vᵀ straight from the stage (MN-major: box mt holds dims
//            64mt.. of every token), B = P; the first row's tile with the pair's last key through
//            registers instead (ldmatrix.trans, that key's V zeroed)
//   retire, CTA barrier, then the boxes 23 ahead into the slots tile t leaves: the rest of tile t + 2
//            and the first 5 of tile t + 3 (2.6 tiles in flight; two stages of whole tiles held 2)
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
  static constexpr int kCtaThreads = 2 * kThreads;          // a warpgroup per q row
  static constexpr int kBoxes = bf16_stage::boxes::kBoxes;  // 128-byte boxes per tile (9): dims 64b..64b+63
  // The KV ring (bf16_stage::ring): 23 box slots, 2.6 tiles in flight where two stages held 2.
  static constexpr int kSlots = bf16_stage::ring::kSlots;
  static constexpr int kHead = bf16_stage::ring::kHead;
  static constexpr int kChunks = bf16_stage::kChunks;                              // 16-byte chunks per row (72)
  static constexpr int kQCopiesPerThread = 2 * kNumHeads * kChunks / kCtaThreads;  // 9
  static constexpr int kPvSteps = kTile / 16;                                      // 4
  static constexpr float kSlack = 8.f;                                             // P ≤ e^8 in bf16 (tile_maxima)
  static constexpr bool kPartialsF16 = false;
};
using PT = PairTraits;
static_assert(bf16_stage::kRows == kTile, "a stage holds one wgmma M of tokens");
static_assert(2 * kNumHeads * PT::kChunks % PT::kCtaThreads == 0, "whole Q copies per thread");
static_assert(kTile * 8 == 2 * PT::kCtaThreads, "a box's 64 rows × 8 chunks: two per thread");
static_assert(bf16_stage::boxes::kBoxBytes == 128 && bf16_stage::boxes::kBoxStride % kSwizzleAlign == 0,
              "every box is whole 128-byte-swizzle atoms (desc_sw128)");

struct PairSmem {
  alignas(1024) std::uint8_t kv[PT::kSlots][bf16_stage::boxes::kBoxStride];  // box slots: 64 rows × 128 B, swizzled
  CoreTile<kNumHeads, 2 * kHeadDim> q[2];                                    // Q of rows v, v + 1, bf16 as given
  CoreTile<kNumHeads, 2 * kTile> p[2];                                       // P of each row, bf16 [head][token]
  float red[2][kWarps][kNumHeads];                                           // per warpgroup: tile max, then l
  float omax[2][kWarps][kNumHeads];                                          // per warpgroup: write_output's |O| max
};
static_assert(sizeof(PairSmem) + kSwizzleAlign <= 227 * 1024, "bf16 row pairs: over the 227 KB shared-memory limit");

using bf16_stage::ring::box_slot;
using bf16_stage::ring::first_slot;
// Boxes [b0, b1) of the item's tile u (tokens [t0, t0 + 64) ∩ [.., end), t0 = kv_begin + 64u) into
// their slots, if the tile exists: thread tid copies chunk tid % 8 of rows tid / 8 and tid / 8 + 32 of
// each box (a warp: 4 whole 128-byte lines), rows past `end` zero-filled (their source is token t0's
// row, which exists).
template <int kB0, int kB1, bool kEvictFirst>
__device__ __forceinline__ void copy_boxes(PairSmem& sm, const DecodeParams& p, const KvRowMap& rows,
                                           const WorkItem& item, int num_tiles, int u) {
  if (u >= num_tiles) return;
  const int t0 = item.kv_begin + kTile * u, tid = int(threadIdx.x), c = tid % 8;
  const int slot0 = first_slot(u);
  const std::uint8_t* src[2];
  int bytes[2], at[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = tid / 8 + 32 * i;
    src[i] = p.kv + rows.row_or_first(t0 + r, t0, item.kv_end) * p.kv_row_stride + 16 * c;
    bytes[i] = t0 + r < item.kv_end ? 16 : 0;
    at[i] = bf16_stage::boxes::kv_offset(r, c);  // (box 0's: the slot adds the rest)
  }
#pragma unroll
  for (int b = kB0; b < kB1; ++b) {
    std::uint8_t* box = sm.kv[box_slot(slot0, b)];
#pragma unroll
    for (int i = 0; i < 2; ++i) cp_async16_kv<kEvictFirst>(box + at[i], src[i] + 128 * b, bytes[i]);
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
  PairSmem& sm = *reinterpret_cast<PairSmem*>(smem_raw + swizzle_align_bytes(smem_raw));  // stages at 1,024 B
  launch_dependents();  // the combine grid's launch latency hides behind this kernel

  const WorkItem item = work_item(p, int(blockIdx.x));
  const int g = wg_of<2>();         // warpgroup = row item.request + g
  const CtaSyncWarpgroupWarps bar;  // CTA barriers; warp w of the warpgroup indexes its own red
  const int warp = bar.warp(), lane = int(threadIdx.x % 32), gr = lane / 4;
  const KvRowMap rows(p, item);
  const int end = row_end<2>(item, g);  // this row's keys: [kv_begin, end)
  const int num_tiles = (item.kv_end - item.kv_begin + kTile - 1) / kTile;

  // The ring's first kSlots boxes, in two groups: tile 0 (and Q), then tile 1 and tile 2's head.
  copy_q(sm, p, item.request);
  copy_boxes<0, PT::kBoxes, kEvictFirst>(sm, p, rows, item, num_tiles, 0);
  cp_async_commit();
  copy_boxes<0, PT::kBoxes, kEvictFirst>(sm, p, rows, item, num_tiles, 1);
  copy_boxes<0, PT::kHead, kEvictFirst>(sm, p, rows, item, num_tiles, 2);
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
  // The masked tile's Vᵀ fragments by ldmatrix.trans: tokens 16kk + lane % 8 + 8·(lane / 16), chunk
  // (64mt + 16w) / 8 + (lane / 8) % 2.
  const int v_row = lane % 8 + 8 * (lane / 16), v_chunk = 2 * warp + (lane / 8) % 2;

  float sacc[8];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) fence_regs(o[mt]);

  for (int t = 0; t < num_tiles; ++t) {
    const int t0 = item.kv_begin + t * kTile;
    const int slot0 = first_slot(t);  // box b of tile t: slot box_slot(slot0, b)
    cp_async_wait<1>();               // this thread's copies of tile t (and Q) landed: all groups but the last
    fence_proxy_async();              // ... cp.async writes → wgmma reads
    __syncthreads();                  // ... every thread's

    // Sᵀ = K · Qᵀ: 36 k16 steps, both operands in shared memory, one chain.
    fence_regs(sacc);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      // Box k / 4 by its 128-byte-swizzle descriptor, K-major (rows = tokens): a k16 step is 32 bytes.
      const std::uint64_t a = desc_sw128(sm.kv[box_slot(slot0, k / 4)], 8 * bf16_stage::boxes::kBoxBytes) + 2 * (k % 4);
      if (k == 0) {
        wgmma_ss_bf16<false>(sacc, a, desc_q);
      } else {
        wgmma_ss_bf16(sacc, a, desc_q + 16 * k);  // + 256 bytes of Q per k16 step
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(sacc);

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

    // Oᵀ += Vᵀ · Pᵀ: 8 m-tiles × 4 k16 steps, A = Vᵀ straight from the stage (MN-major). The first
    // row's tile that holds keys it does not see — the pair's last, which its P masks but the stage
    // holds as stored — takes Vᵀ through registers instead, those keys' V zeroed: 0 · NaN would still
    // reach the row. (The second row's masked keys are past kv_end: zero-filled by the copy.)
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) fence_regs(o[mt]);
    if (g == 0 && t0 + kTile > end) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        std::uint32_t va[PT::kPvSteps][4];
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) {
          ldmatrix_x4_trans(va[kk],
                            sm.kv[box_slot(slot0, mt)] + bf16_stage::boxes::kv_offset(16 * kk + v_row, v_chunk));
          // Fragment k16 step kk: registers 0/1 tokens 16kk + 2c, + 1 (dims D, D + 8), 2/3 the same + 8.
          const int tok = t0 + 16 * kk + 2 * (lane % 4);
          const std::uint32_t m0 = (tok < end ? 0xFFFFu : 0u) | (tok + 1 < end ? 0xFFFF0000u : 0u);
          const std::uint32_t m8 = (tok + 8 < end ? 0xFFFFu : 0u) | (tok + 9 < end ? 0xFFFF0000u : 0u);
          va[kk][0] &= m0;
          va[kk][1] &= m0;
          va[kk][2] &= m8;
          va[kk][3] &= m8;
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) wgmma_rs_bf16(o[mt], va[kk], desc_p + 16 * kk);
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) fence_regs(va[kk]);
      }
    } else {
      wgmma_fence();
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) {
          // Box mt MN-major (a row = a token's dims 64mt..): a k16 step is 16 tokens, 2 KB.
          const std::uint64_t a = desc_sw128(sm.kv[box_slot(slot0, mt)], 8 * bf16_stage::boxes::kBoxBytes) +
                                  bf16_stage::boxes::kBoxBytes * kk;  // 16 rows of 128 B, in 16-byte units
          wgmma_ss_bf16_mn(o[mt], a, desc_p + 16 * kk);
        }
      }
      wgmma_commit();
    }
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) fence_regs(o[mt]);
    // Every warp's wgmmas of tile t retired: its slots take the boxes kSlots ahead.
    __syncthreads();
    copy_boxes<PT::kHead, PT::kBoxes, kEvictFirst>(sm, p, rows, item, num_tiles, t + 2);
    copy_boxes<0, PT::kHead, kEvictFirst>(sm, p, rows, item, num_tiles, t + 3);
    cp_async_commit();  // one group per iteration (empty past the end)
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
          sizeof(PairSmem) + kSwizzleAlign, 1, PT::kPartialsF16};
}

}  // namespace mla::sm90
