// sm90 MLA decode from bf16 KV for row pairs (an even s_q): one CTA takes q rows v and v + 1 of a
// request, which share their keys (the first sees all but the pair's last), and streams each KV tile
// once for both. wgmma, tokens in M, both rows' heads in N (32 columns: 16r + head of row v + r), both
// operands in shared memory.
//
// Grid: one CTA per work item over row pairs (WorkItem::pair_end, row_pair_work_list); two
// warpgroups, one CTA per SM (~226 KB). The two split each tile's work (perf-notes v142):
// Sᵀ's k16 steps (warpgroup g the steps 2i + g), exchanged through shared memory so that both hold the
// whole Sᵀ and run the same softmax; Oᵀ's m-tiles (warpgroup g the dims 256g..256g+255, both rows).
// Per 64-token tile t:
//
//   wait     tile t: its 9 boxes of 64 tokens × 128 bytes (dims 64b..64b+63) in slots of a ring of box
//            slots (bf16_stage::ring), each in the 128-byte-swizzle layout; proxy fence, CTA barrier
//   Sᵀ = K·Qᵀ   wgmma m64n32k16 bf16 SS over the warpgroup's 18 k16 steps: A = K from the ring
//            (K-major), B = Q of both rows; the partial to shared memory, CTA barrier, the other
//            warpgroup's added (in one order for both: bit-identical Sᵀ)
//   softmax  tile_maxima over the warpgroup's 4 warps (both warpgroups the same), P of row g by
//            warpgroup g; CTA barrier
//   Oᵀ += Vᵀ·Pᵀ wgmma m64n32k16 bf16 SS: A = Vᵀ from the ring (MN-major, box mt = dims 64mt..), B = P;
//            on the tile with the pair's last key, row 0's half through registers (ldmatrix.trans, that
//            key's V zeroed) and row 1's by N = 16
//   retire, CTA barrier, then the ring's next boxes into the slots tile t leaves
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
  static constexpr int kCtaThreads = 2 * kThreads;          // two warpgroups, splitting each tile's work
  static constexpr int kBoxes = bf16_stage::boxes::kBoxes;  // 128-byte boxes per tile (9): dims 64b..64b+63
  // The KV ring (bf16_stage::ring): 21 box slots, 2.3 tiles.
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

constexpr int kCols = 2 * kNumHeads;  // both rows' heads
struct PairSmem {
  alignas(1024) std::uint8_t kv[PT::kSlots][bf16_stage::boxes::kBoxStride];  // box slots: 64 rows × 128 B, swizzled
  CoreTile<kCols, 2 * kHeadDim> q;                                           // Q of rows v, v + 1: rows 16r + head
  CoreTile<kCols, 2 * kTile> p;                                              // P, bf16 [column][token]
  float xs[2][2 * kCols / 4][kThreads];  // Sᵀ partials: warpgroup g's register j of thread tid (then omax)
  float red[2][kWarps][kCols];           // per warpgroup: tile max; as [8][32], write_output's l
};
static_assert(sizeof(PairSmem::xs) >= sizeof(float[2 * kWarps][kCols]), "write_output's omax fits the exchange");
static_assert(sizeof(PairSmem) + kSwizzleAlign <= 227 * 1024, "bf16 row pairs: over the 227 KB shared-memory limit");

using bf16_stage::ring::box_slot;
using bf16_stage::ring::first_slot;
// Boxes [b0, b1) of the item's tile u (tokens [t0, t0 + 64) ∩ [.., end), t0 = kv_begin + 64u) into
// their slots, if the tile exists: thread tid copies chunk tid % 8 of rows tid / 8 and tid / 8 + 32 of
// each box (a warp: 4 whole 128-byte lines), rows past `end` zero-filled (their source is token t0's
// row, which exists).
template <int kB0, int kB1>
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
    for (int i = 0; i < 2; ++i) cp_async16(box + at[i], src[i] + 128 * b, bytes[i]);
  }
}
// Q of rows v, v + 1 (32 columns × 72 chunks, contiguous in q) into the K-major core matrices.
__device__ __forceinline__ void copy_q(PairSmem& sm, const DecodeParams& p, int v) {
  const auto* q = reinterpret_cast<const std::uint8_t*>(p.q + std::int64_t(v) * kNumHeads * kHeadDim);
#pragma unroll
  for (int i = 0; i < PT::kQCopiesPerThread; ++i) {
    const int idx = int(threadIdx.x) + PT::kCtaThreads * i;
    const int col = idx / PT::kChunks, c = idx % PT::kChunks;
    cp_async16(&sm.q.bytes[col / 8][c][col % 8][0], q + 16 * std::int64_t(idx), 16);
  }
}

__global__ void __launch_bounds__(PT::kCtaThreads, 1) decode_bf16_pairs_kernel(const __grid_constant__ DecodeParams p) {
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  PairSmem& sm = *reinterpret_cast<PairSmem*>(smem_raw + swizzle_align_bytes(smem_raw));  // slots at 1,024 B
  launch_dependents();  // the combine grid's launch latency hides behind this kernel

  const WorkItem item = work_item(p, int(blockIdx.x));
  const int g = wg_of<2>();         // warpgroup: k steps, m-tiles
  const CtaSyncWarpgroupWarps bar;  // CTA barriers; warp w of the warpgroup indexes its own red
  const int warp = bar.warp(), lane = int(threadIdx.x % 32), gr = lane / 4, tid = int(threadIdx.x % kThreads);
  const KvRowMap rows(p, item);
  const int num_tiles = (item.kv_end - item.kv_begin + kTile - 1) / kTile;
  constexpr int kI = 8, kMt = kMTiles / 2;  // columns per thread (acc_head), the warpgroup's m-tiles

  // The ring's first kSlots boxes, in two groups: tile 0 (and Q), then tile 1 and tile 2's head.
  copy_q(sm, p, item.request);
  copy_boxes<0, PT::kBoxes>(sm, p, rows, item, num_tiles, 0);
  cp_async_commit();
  copy_boxes<0, PT::kBoxes>(sm, p, rows, item, num_tiles, 1);
  copy_boxes<0, PT::kHead>(sm, p, rows, item, num_tiles, 2);
  cp_async_commit();
  rows.prefetch_pages(item.kv_begin, item.kv_end, int(threadIdx.x), int(blockDim.x));  // paged: into L2

  SoftmaxState<float> st[kI];
#pragma unroll
  for (int i = 0; i < kI; ++i) st[i] = SoftmaxState<float>::empty();
  float o[kMt][2 * kI];  // Oᵀ: m-tile 4g + mt, rows = dims 64(4g + mt) + 16w + gr (+8), cols (acc_head)
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int i = 0; i < 2 * kI; ++i) o[mt][i] = 0.f;
  }
  const std::uint64_t desc_q = desc(sm.q.bytes[0][0][0], CoreTile<kCols, 2 * kHeadDim>::sbo());
  const std::uint64_t desc_p = desc(sm.p.bytes[0][0][0], CoreTile<kCols, 2 * kTile>::sbo());
  constexpr int kRow1 = 2 * CoreTile<kCols, 2 * kTile>::sbo() / 16;  // P's rows 16..31 (row 1's heads)
  // The masked tile's Vᵀ fragments by ldmatrix.trans: tokens 16kk + lane % 8 + 8·(lane / 16), chunk
  // (64mt + 16w) / 8 + (lane / 8) % 2.
  const int v_row = lane % 8 + 8 * (lane / 16), v_chunk = 2 * warp + (lane / 8) % 2;

  float sacc[2 * kI];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) fence_regs(o[mt]);

  for (int t = 0; t < num_tiles; ++t) {
    const int t0 = item.kv_begin + t * kTile;
    const int slot0 = first_slot(t);  // box b of tile t: slot box_slot(slot0, b)
    cp_async_wait<1>();               // this thread's copies of tile t (and Q) landed: all groups but the last
    fence_proxy_async();              // ... cp.async writes → wgmma reads
    __syncthreads();                  // ... every thread's

    // Sᵀ = K · Qᵀ, the warpgroup's k16 steps 2i + g (box i / 2, 32 bytes per step), one chain.
    fence_regs(sacc);
    wgmma_fence();
#pragma unroll
    for (int i = 0; i < kSteps / 2; ++i) {
      const int k = 2 * i + g;
      const std::uint64_t a =
          desc_sw128(sm.kv[box_slot(slot0, i / 2)], 8 * bf16_stage::boxes::kBoxBytes) + 2 * (2 * (i % 2) + g);
      if (i == 0) {
        wgmma_ss_bf16<false>(sacc, a, desc_q + 16 * k);
      } else {
        wgmma_ss_bf16(sacc, a, desc_q + 16 * k);  // + 256 bytes of Q per k16 step
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(sacc);
    // The partials meet: thread tid of each warpgroup holds the same (token, column) elements.
#pragma unroll
    for (int j = 0; j < 2 * kI; ++j) sm.xs[g][j][tid] = sacc[j];
    __syncthreads();
    float s[2 * kI];
#pragma unroll
    for (int j = 0; j < 2 * kI; ++j) s[j] = sm.xs[0][j][tid] + sm.xs[1][j][tid];  // one order: the same Sᵀ in both

    // Online softmax of both rows, the same in both warpgroups: s[j0] / s[j0 + 2] at tokens u0 / u0 + 8,
    // column i (acc_head; row i / 4).
    const int u0 = 16 * warp + gr;
    float x[kI][2];
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      const int j0 = acc_reg(i), end = row_end<2>(item, i / 4);
      x[i][0] = t0 + u0 < end ? s[j0] * p.logit_scale : -INFINITY;
      x[i][1] = t0 + u0 + 8 < end ? s[j0 + 2] * p.logit_scale : -INFINITY;
    }
    float f[kI];
    tile_maxima(x, st, PT::kSlack, t == 0, sm.red[g], f, bar);
    float pw[kI][2];
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      // (The first row may see no token of a tile, or of the whole item so far: shift().)
      const float m = st[i].shift();
      pw[i][0] = SoftmaxState<float>::exp(x[i][0] - m);
      pw[i][1] = SoftmaxState<float>::exp(x[i][1] - m);
      st[i].add(pw[i][0] + pw[i][1]);
    }
    // P of row g in bf16 by one stmatrix.trans: the warp's four 8 × 8 accumulator blocks, (tokens
    // 16w..+7 | +8..+15) × (columns 16g..16g+7 | +8..+15), each transposed into its core matrix.
    {
      float q[4][2];  // row g's columns (selected, not indexed: g is not a constant)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        q[i][0] = g == 0 ? pw[i][0] : pw[4 + i][0];
        q[i][1] = g == 0 ? pw[i][1] : pw[4 + i][1];
      }
      stmatrix_x4_trans(&sm.p.bytes[2 * g + lane / 16][2 * warp + (lane / 8) % 2][lane % 8][0],
                        bf16x2_rn(q[0][0], q[1][0]), bf16x2_rn(q[0][1], q[1][1]), bf16x2_rn(q[2][0], q[3][0]),
                        bf16x2_rn(q[2][1], q[3][1]));
    }
    bool rescale = false;
#pragma unroll
    for (int i = 0; i < kI; ++i) rescale |= f[i] != 1.f;
    if (rescale) {
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
        for (int i = 0; i < 2 * kI; ++i) o[mt][i] *= f[(i / 4) * 2 + (i % 2)];
      }
    }
    fence_proxy_async();  // P (generic stores) → wgmma reads
    __syncthreads();      // P complete

    // Oᵀ += Vᵀ · Pᵀ: the warpgroup's m-tiles (boxes 4g + mt) × 4 k16 steps, A = Vᵀ from the ring
    // (MN-major), N = 32. On the tile that holds keys the first row does not see — the pair's last, which
    // its P masks but the ring holds as stored — row 0's columns take Vᵀ through registers with those
    // keys' V zeroed (0 · NaN would still reach the row), row 1's go by N = 16. (The second row's masked
    // keys are past kv_end: zero-filled by the copy.)
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) fence_regs(o[mt]);
    if (t0 + kTile > item.pair_end) {
      // Fresh N = 16 accumulators per row and m-tile, added to Oᵀ's halves once all retired (an N = 32
      // accumulator used by halves, or defined between them, serializes the wgmma pipeline: C7511, C7515).
      float d[kMt][2][8];
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        fence_regs(d[mt][0]);
        fence_regs(d[mt][1]);
      }
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const std::uint8_t* box = sm.kv[box_slot(slot0, 4 * g + mt)];
        std::uint32_t va[PT::kPvSteps][4];
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) {
          ldmatrix_x4_trans(va[kk], box + bf16_stage::boxes::kv_offset(16 * kk + v_row, v_chunk));
          // Fragment k16 step kk: registers 0/1 tokens 16kk + 2c, + 1 (dims D, D + 8), 2/3 the same + 8.
          const int tok = t0 + 16 * kk + 2 * (lane % 4), end = item.pair_end;
          const std::uint32_t m0 = (tok < end ? 0xFFFFu : 0u) | (tok + 1 < end ? 0xFFFF0000u : 0u);
          const std::uint32_t m8 = (tok + 8 < end ? 0xFFFFu : 0u) | (tok + 9 < end ? 0xFFFF0000u : 0u);
          va[kk][0] &= m0;
          va[kk][1] &= m0;
          va[kk][2] &= m8;
          va[kk][3] &= m8;
        }
        const std::uint64_t a = desc_sw128(box, 8 * bf16_stage::boxes::kBoxBytes);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) {  // row 0: its masked keys' V zeroed
          if (kk == 0) {
            wgmma_rs_bf16<false>(d[mt][0], va[kk], desc_p);
          } else {
            wgmma_rs_bf16(d[mt][0], va[kk], desc_p + 16 * kk);
          }
        }
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) {  // row 1: Vᵀ from the ring
          if (kk == 0) {
            wgmma_ss_bf16_mn<false>(d[mt][1], a, desc_p + kRow1);
          } else {
            wgmma_ss_bf16_mn(d[mt][1], a + bf16_stage::boxes::kBoxBytes * kk, desc_p + kRow1 + 16 * kk);
          }
        }
        wgmma_commit();
        wgmma_wait<0>();  // (va is the next m-tile's)
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) fence_regs(va[kk]);
      }
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        fence_regs(d[mt][0]);
        fence_regs(d[mt][1]);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          o[mt][i] += d[mt][0][i];
          o[mt][8 + i] += d[mt][1][i];
        }
      }
    } else {
      wgmma_fence();
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const std::uint64_t a = desc_sw128(sm.kv[box_slot(slot0, 4 * g + mt)], 8 * bf16_stage::boxes::kBoxBytes);
#pragma unroll
        for (int kk = 0; kk < PT::kPvSteps; ++kk) {
          // A k16 step is 16 tokens: 16 rows of 128 B, in 16-byte units.
          wgmma_ss_bf16_mn(o[mt], a + bf16_stage::boxes::kBoxBytes * kk, desc_p + 16 * kk);
        }
      }
      wgmma_commit();
      wgmma_wait<0>();  // (in this branch: ptxas then sees the other branch's adds to O outside it)
    }
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) fence_regs(o[mt]);
    // Every warp's wgmmas of tile t retired: its slots take the boxes kSlots ahead.
    __syncthreads();
    copy_boxes<PT::kHead, PT::kBoxes>(sm, p, rows, item, num_tiles, t + 2);
    copy_boxes<0, PT::kHead>(sm, p, rows, item, num_tiles, t + 3);
    cp_async_commit();  // one group per iteration (empty past the end)
  }
  cp_async_wait<0>();

  // Both warpgroups hold the same softmax state: the l that write_output sums over the CTA's 8 warps
  // is warpgroup 0's alone. The second row's partial goes to pair_partial.
  if (g == 1) {
#pragma unroll
    for (int i = 0; i < kI; ++i) st[i].l = 0.f;
  }
  WorkItem second = item;
  second.partial = item.pair_partial;
  const PartialDst part[2] = {partial_dst<PT::kPartialsF16>(p, item, nullptr, nullptr),
                              partial_dst<PT::kPartialsF16>(p, second, nullptr, nullptr)};
  using Red = float[2 * kWarps][kCols];
  write_output<false, 2, 8>(
      p, item, part, *reinterpret_cast<Red*>(sm.red), *reinterpret_cast<Red*>(sm.xs), st, o, 1.f, 0.f,
      [&](int mt) { return 64 * (kMt * g + mt) + 16 * warp + gr; }, CtaSync{});
}

}  // namespace

DecodeKernel decode_bf16_pairs_kernel_info() {
  return {decode_bf16_pairs_kernel, PT::kCtaThreads, sizeof(PairSmem) + kSwizzleAlign, 1, PT::kPartialsF16};
}

}  // namespace mla::sm90
