// sm90 MLA decode from fp8 (e4m3) KV with wgmma, the tokens in M: Sᵀ = K·Qᵀ, Oᵀ = Vᵀ·Pᵀ.
//
// Grid: one CTA per work item (q row v = b·s_q + i, KV range [kv_begin, kv_end)); one warpgroup
// (128 threads), two CTAs per SM. Tiles of 64 tokens copied as stored by cp.async (whole 128-byte
// lines for dense tiles, else row by row) into unpadded rows with 16-byte chunks XOR-swizzled
// (fp8_stage.h: conflict-free copies and ldmatrix); 2 stages on mbarriers; the next tile's copies go
// out among the S batches. The TMA kernel (kTma, plans of long items: Plan::kv_tma) instead copies a
// whole tile from an even row by one tensor-map copy of thread 0, into fp8_stage.h's `pairs` layout,
// issued at the top of the tile before S (perf-notes v113, v114).
// Warp w owns tokens 16w..16w+15 of a tile (its 16 rows of every wgmma M = 64) and copies them: a
// group of 16 rows in one run (contiguous, or pages of ≥ 16 rows) as 16-byte pieces 576w + lane + 32k
// of the tile, else row by row. Pages of 1 and 16 rows run a kernel of their own (kTable): from tile 1
// on, the rows' byte offsets come from a table in shared memory that threads 0..63 fill a tile ahead,
// one page-table lookup each (SmemWithRowTable), instead of lookups at the copies.
//
//   Sᵀ = K·Qᵀ    wgmma m64n16k16, fp32 accumulation, A = K in registers from an ldmatrix of the raw
//                tile, one exact cvt.f16x2.e4m3x2 per pair; B = Q·2^e in fp16 (exact) in shared
//                memory with its dims permuted to the fragments' k order.
//                (fp8 wgmma accumulates in ~14-bit precision: too coarse for the logits.)
//   softmax      per head over the tile (tile_maxima): a block vote whether any logit exceeds its
//                head's running max by more than the slack (0.5); only then, or on the item's first
//                tile, the exact max by warp butterflies and one shared-memory step. Each thread
//                keeps its partial l. P·2^8 = P_hi + P_lo, two e4m3 terms.
//   Oᵀ += Vᵀ·Pᵀ  A = Vᵀ in registers from ldmatrix.trans of the same raw tile (4 bytes of one dim
//                from 4 tokens) by byte permutes, no conversion, wgmma m64n16k32 e4m3 against P_hi
//                then P_lo. Each tile's product goes to fresh accumulators that are added to the
//                fp32 O (fp8 wgmma accumulates in ~14 bits).
//
// K and V are never expanded in shared or global memory; the fp8 tensor scale and 2^-8 of P are
// folded into the logit scale and the output. MXFP4 is decode_mxfp4.cu's.
//
// Row pairs (kRows = 2; the plan's for an even s_q, WorkItem::pair_end): one CTA takes q rows v and
// v + 1 of a request, which share their keys (the first sees all but the last). Two warpgroups, one
// CTA per SM (~190 KB), tiles of 128 tokens in two stages: warpgroup g copies (cp.async only) and
// converts tokens 64g..64g+63 on its own mbarriers as above and runs Sᵀ for both rows at once
// (N = 32: columns 16r + head of row v + r; two accumulator chains); the maxima and P span both
// warpgroups (8 warps); Oᵀ += Vᵀ·Pᵀ, N = 32, splits the dims: warpgroup g owns m-tiles 4g..4g+3 over
// both halves of the tile (a fresh accumulator per half). Every K fragment is converted once for
// both rows, and each wgmma carries both rows' heads. One Vᵀ fragment serves both rows, so on the
// tile of the pair's last key (the second row's only) that key's NaN V bytes become +0 after Sᵀ
// (last_key_v_nan_to_zero): a NaN stored there reaches the second row only.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/bf16.h"
#include "kernels/common/formats.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/fp8_stage.h"
#include "kernels/sm90/launch.h"
#include "kernels/sm90/primitives.h"
#include "kernels/sm90/wgmma.h"
#include "mla/mla.h"

namespace mla::sm90 {
namespace {

using namespace wg;

// kRows: 1, or 2 for row pairs (an even s_q: q rows v, v + 1 of a request per CTA; the header).
template <int kRows>
struct Traits {
  static_assert(kRows == 1 || kRows == 2, "one q row, or a row pair");
  static constexpr int kRowBytes = kHeadDim;  // e4m3
  static constexpr int kCtasPerSm = kRows == 1 ? 2 : 1;
  static constexpr int kCtaThreads = kThreads * kRows;  // a warpgroup per 64 tokens of the tile
  static constexpr int kCtaWarps = kWarps * kRows;
  static constexpr int kCols = kNumHeads * kRows;    // N of Sᵀ and Oᵀ: every row's heads
  static constexpr int kCtaTile = kTile * kRows;     // tokens per tile; warpgroup g: 64g..64g+63
  static constexpr int kWgMTiles = kMTiles / kRows;  // Oᵀ m-tiles per warpgroup
  static constexpr int kStages = 2;
  static constexpr int kBatch = 6;                    // S k16 steps per register batch (3 ldmatrix of 2 steps)
  static constexpr int kChains = kRows == 1 ? 4 : 2;  // Sᵀ accumulator chains (N = 32 ones: two fit)
  static constexpr int kPTerms = 2;                   // P·2^8 = P_hi + P_lo
  static constexpr int kPBytes = kCtaTile;            // bytes per P row
  static constexpr int kPvSteps = 2;                  // k32 steps of P·V per 64 tokens
  static constexpr float kOutScale = 1.f / 256.f;
  // A head's running max moves only when a tile's logits exceed it by more than this (tile_maxima):
  // P ≤ e^0.5 keeps P·2^8 ≤ 423 within e4m3's 448.
  static constexpr float kSlack = 0.5f;
};
using T1 = Traits<1>;  // the row-independent constants

template <int kRows>
struct Smem {
  using T = Traits<kRows>;
  // Stage s, warpgroup g's 64 tokens: the KV as stored, swizzled (kv_offset).
  alignas(128) std::uint8_t kv[T::kStages][kRows][kTile * T::kRowBytes];
  CoreTile<T::kCols, 2 * kHeadDim> q;            // Q, fp16 · 2^e, dims permuted; rows 16r + head
  CoreTile<T::kCols, T::kPBytes> p[T::kPTerms];  // P, token slots in fragment order
  float red[T::kCtaWarps][T::kCols];             // per-warp tile max (then l) per column
  float logit_scale[T::kCols];                   // per column (× 2^-e)
  std::uint64_t full[T::kStages][kRows];  // stage s, warpgroup g's half holds tile t (t ≡ s): phase t / kStages
};
// kTable (the kernels of pages of 1 and 16 rows): Smem plus the row table that tile_source_table reads,
// written in the iteration before the tile's copies.
template <int kRows, bool kTable>
using SmemOf = SmemWithRowTable<Smem<kRows>, kRows, kTile, kTable>;
// The TMA kernel (one row) asks for kSwizzleAlign more and aligns the stages to it (the 128-byte
// swizzle follows address bits 7..9).
template <int kRows, bool kTma, bool kTable = false>
constexpr std::size_t kSmemBytes = sizeof(SmemOf<kRows, kTable>) + (kTma ? kSwizzleAlign : 0);
static_assert(T1::kCtasPerSm * (kSmemBytes<1, true> + 1024) <= 228 * 1024,
              "fp8: kCtasPerSm CTAs must fit one SM's shared memory");
static_assert(T1::kCtasPerSm * (kSmemBytes<1, false, true> + 1024) <= 228 * 1024,
              "fp8 (row tables): kCtasPerSm CTAs must fit one SM's shared memory");
static_assert(kSmemBytes<2, false, true> + 1024 <= 228 * 1024 && kSmemBytes<2, false, true> <= 227 * 1024,
              "fp8 row pairs: one CTA must fit one SM's shared memory");
static_assert(offsetof(Smem<1>, kv) == 0 && sizeof(Smem<1>::kv[0]) % kSwizzleAlign == 0,
              "aligning the Smem aligns every stage");
static_assert(sizeof(Smem<1>::kv[0]) >= sizeof(ClusterExchange), "cluster mode: the exchange fits stage 0");
static_assert(sizeof(Smem<2>::kv[0]) >= sizeof(ClusterExchange), "a row pair's epilogue scratch fits stage 0");
static_assert(T1::kCtasPerSm <= kMaxDecodeCtasPerSm, "the workspace is sized for kMaxDecodeCtasPerSm CTAs per SM");

// ── e4m3 helpers ────────────────────────────────────────────────────────────────────────────────
// Two floats → e4m3x2 (round to nearest even, saturating): `lo` in the low byte.
__device__ __forceinline__ std::uint16_t to_e4m3x2(float lo, float hi) {
  std::uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ std::uint32_t e4m3x2_to_f16x2(std::uint16_t v) {  // exact
  std::uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(v));
  return h2;
}
// Four e4m3 bytes → fp16 pairs of bytes 0, 1 (lo) and bytes 2, 3 (hi), exact; the halves are
// split by register aliasing rather than a shift.
__device__ __forceinline__ void e4m3x4_to_f16x2x2(std::uint32_t r, std::uint32_t& lo, std::uint32_t& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(r));
}
__device__ __forceinline__ float2 from_e4m3x2(std::uint16_t v) {
  const std::uint32_t h2 = e4m3x2_to_f16x2(v);
  return __half22float2(*reinterpret_cast<const __half2*>(&h2));
}
// x ≈ hi + lo, both e4m3: exact for |x| < 448 with 8 significant bits down to 2^-6, and to within
// 2^-10 below (e4m3's subnormal step).
struct SplitE4m3x2 {
  std::uint16_t hi, lo;
};
__device__ __forceinline__ SplitE4m3x2 split_e4m3x2(float a, float b) {
  const std::uint16_t hi = to_e4m3x2(a, b);
  const float2 h = from_e4m3x2(hi);
  return {hi, to_e4m3x2(a - h.x, b - h.y)};
}

// The k order of P·V: inside each 16-token chunk of P (one warp's tokens), token 8h + g (g < 8) sits
// in slot 2g + h. So k slots 4c..4c+3 of a Vᵀ register fragment hold tokens 2c, 8+2c, 2c+1, 9+2c
// (v_fragments), and a thread's P pair (tokens g, g + 8) is one 16-bit element of P's rows: the
// accumulator's 8 × 8 blocks of such pairs go to P by stmatrix.trans.

// ── copies ──────────────────────────────────────────────────────────────────────────────────────
// A stage holds the tile's rows unpadded and swizzled: fp8_stage.h (kv_offset and the offsets the
// copies and ldmatrix use, checked by tests/unit/test_fp8_stage.cpp; the TMA kernel's in namespace
// pairs).
template <bool kTma>
__device__ __forceinline__ int kv_offset(int r, int c) {
  return kTma ? fp8_stage::pairs::kv_offset(r, c) : fp8_stage::kv_offset(r, c);
}
static_assert(fp8_stage::kRowBytes == T1::kRowBytes && fp8_stage::kRows == kTile, "fp8_stage.h describes this tile");

// A warpgroup's tokens [t0, t0 + 64) ∩ [.., end) — the tile, or with row pairs its warpgroup's half —
// into `stage` by cp.async, thread `tid` of the warpgroup; every thread then arrives on the stage's
// barrier `full` once its copies landed (128 arrivals per phase). Two ways:
// * a full tile of unpadded rows (stride 576) whose group of 16 rows is one run of rows (a
//   contiguous cache, or in one page of ≥ 16 rows: 9,216 contiguous bytes): warp w copies its group,
//   rows 16w..16w+15, as 16-byte pieces n = 576w + lane + 32k (k < 18) at byte 16n − 9216w of the
//   group, 512 contiguous bytes a copy, to stage offset 16n ^ (f(n / 36) << 4) (= kv_offset(n / 36,
//   n % 36));
// * any other tile row by row: warp w copies rows 16w..16w+15, four at a time, lanes 8i..8i+7 take
//   128 bytes of one row per request; rows past `end` are zero-filled (they point at token `first`,
//   the CTA tile's first, which exists, and copy 0 bytes).
// The TMA kernel (kTma) takes a dense tile from an even row by one tensor-map copy instead: thread 0
// announces 36,864 bytes and copies the tile's 32 row pairs as 9 boxes of 32 pairs × 128 bytes (a
// dense tile from an odd row goes row by row).
// tile_source resolves the thread's sources (paged: its page-table loads go out here, well before
// the copies need them); copy_tile<part> issues a third of them (parts 0, 1, 2), the last part
// arrives. Dense and TMA copies go under the evict-first policy when the call asks for it
// (DecodeParams::kv_evict_first); row-by-row copies never do: with a policy, ptxas 13.0 encodes them
// as illegal instructions (primitives.h). The TMA kernel has no dense cp.async: next to the TMA code
// ptxas mis-encoded their policy (perf-notes v110c).
struct TileSource {
  const std::uint8_t* src[4];  // dense: src[0] = this lane's first piece of its warp's 16-row group
                               // (tile byte 9216w + 16·lane); else this lane's rows
  unsigned valid;              // rows: bit i = row i holds a token (< end)
  bool dense;
  int pair;  // kTma: the tile's first row pair in DecodeParams::kv_map when it goes by TMA, else −1
};
constexpr int kGroupRows = kTile / (kThreads / 32);                 // rows a warp copies (16)
constexpr int kDensePieces = kGroupRows * T1::kRowBytes / 16 / 32;  // 18 per lane
static_assert(kGroupRows * T1::kRowBytes % (16 * 32) == 0 && kDensePieces % 3 == 0,
              "whole 16-byte pieces per lane of a group, in three parts");
template <bool kTma>
__device__ __forceinline__ TileSource tile_source(const DecodeParams& p, const KvRowMap& rows, int t0, int first,
                                                  int end, unsigned tid) {
  TileSource ts{};
  ts.pair = -1;
  const int warp = int(tid / 32), lane = int(tid % 32);
  const int g0 = t0 + kGroupRows * warp;  // the warp's group: the tile's rows 16w .. 16w + 15
  if (p.kv_row_stride == T1::kRowBytes && t0 + kTile <= end) {
    if constexpr (kTma) {
      // Pages of ≥ 64 rows: the tile is in one page, since tiles start at multiples of 64 (work items
      // are cut on tile boundaries: Planner.CoversEveryTokenOnce; one_run checks it).
      if (rows.one_run(t0, kTile)) {
        const std::int64_t row = rows(t0);
        if ((row & 1) == 0) {
          ts.pair = int(row >> 1);  // fits: run() takes the TMA only when rows / 2 fits the map's int32
          return ts;
        }
      }
    } else if (rows.one_run(g0, kGroupRows)) {  // a contiguous cache, or pages of ≥ 16 rows
      // The lane's 16·lane is added here, once: piece k is then src[0] plus the constant 512k, which
      // the copies take as immediates (perf-notes v99: no 64-bit address arithmetic per piece).
      ts.src[0] = p.kv + rows(g0) * T1::kRowBytes + 16 * lane;
      ts.dense = true;
      return ts;
    }
  }
  const int n0 = g0 + lane / 8;  // row i: token n0 + 4i
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int n = n0 + 4 * i;
    ts.valid |= (n < end ? 1u : 0u) << i;
    ts.src[i] = p.kv + rows.row_or_first(n, first, end) * p.kv_row_stride + (lane % 8) * 16;
  }
  return ts;
}
// kTable: a tile's sources from its row table (`row_off`, the warpgroup's 64 rows) rather than
// page-table lookups at the copies (perf-notes v150, v152): with kGroups (pages of 16 rows), a whole
// group of 16 rows in one page from its first row's offset, as tile_source's dense groups; any other
// group row by row. (Without kGroups, the kernel of pages of 1 row: the branch alone cost it 1.5 %.)
template <bool kGroups>
__device__ __forceinline__ TileSource tile_source_table(const DecodeParams& p, const KvRowMap& rows,
                                                        const std::int64_t (&row_off)[kTile], int t0, int end,
                                                        unsigned tid) {
  TileSource ts{};
  ts.pair = -1;
  const int warp = int(tid / 32);
  if (kGroups && p.kv_row_stride == T1::kRowBytes && t0 + kTile <= end &&
      rows.one_run(t0 + kGroupRows * warp, kGroupRows)) {
    ts.src[0] = p.kv + row_off[kGroupRows * warp] + 16 * (tid % 32);
    ts.dense = true;
    return ts;
  }
  const int r0 = kGroupRows * warp + int(tid % 32) / 8;  // row i: r0 + 4i
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + 4 * i;
    ts.valid |= (t0 + r < end ? 1u : 0u) << i;
    ts.src[i] = p.kv + row_off[r] + (tid % 8) * 16;
  }
  return ts;
}
template <int kPart, bool kEvictFirst, bool kTma>
__device__ __forceinline__ void copy_tile(std::uint8_t* stage, std::uint64_t* full, const DecodeParams& p,
                                          const TileSource& ts, unsigned tid) {
  if (kTma && ts.pair >= 0) {
    if (tid == 0) {
      if (kPart == 0) tma_tile_copy<kEvictFirst>(stage, &p.kv_map, ts.pair, fp8_stage::kBytes, full);  // 9 boxes
    } else if (kPart == 2) {
      mbar_arrive(full);
    }
    return;
  }
  if (!kTma && ts.dense) {
    constexpr int k0 = kPart * kDensePieces / 3, k1 = (kPart + 1) * kDensePieces / 3;
    const int n0 = kGroupRows * (T1::kRowBytes / 16) * int(tid / 32) + int(tid % 32);
#pragma unroll
    for (int k = k0; k < k1; ++k) {
      const int n = n0 + 32 * k;  // piece n of the tile (row n / 36): the warp's group, 512 bytes a copy
      cp_async16_kv<kEvictFirst>(stage + fp8_stage::dense_offset(n), ts.src[0] + 16 * 32 * k, 16);
    }
  } else {
    constexpr int i0 = kPart, i1 = kPart == 2 ? 4 : kPart + 1;  // rows: a quarter, a quarter, a half
    constexpr int kChunks = T1::kRowBytes / 16;
    const int warp = int(tid / 32), lane = int(tid % 32);
    // Without the TMA layout, chunk c = lane % 8 + 8q of row r = r0 + 4i (r0 = 16w + lane / 8) sits at
    // kv_offset(r0, lane % 8) + 2304i + 128q, bit 5 flipped for odd i (f(r0 + 4i) = f(r0) ^ 2i): two
    // registers and immediates, not a swizzle per copy (fp8_stage.h; tests/unit/test_fp8_stage.cpp).
#pragma unroll
    for (int i = i0; i < i1; ++i) {
      const int r = 16 * warp + lane / 8 + 4 * i, bytes = (ts.valid >> i) & 1u ? 16 : 0;
#pragma unroll
      for (int q = 0; q < (kChunks + 7) / 8; ++q) {
        const int c = lane % 8 + 8 * q;
        if constexpr (kTma) {
          if (c < kChunks)
            cp_async16(stage + kv_offset<kTma>(r, c), ts.src[i] + 128 * q, bytes);  // no policy: see above
        } else {
          const int off0 = fp8_stage::kv_offset(16 * warp + lane / 8, lane % 8);
          if (c < kChunks) cp_async16(stage + fp8_stage::row_copy_offset(off0, i, q), ts.src[i] + 128 * q, bytes);
        }
      }
    }
  }
  if (kPart == 2) cp_async_arrive(full);
}
// ── Q ───────────────────────────────────────────────────────────────────────────────────────────
// Q of q row `v` → shared memory in the wgmma K-major layout: fp16, head h scaled by 2^e_h (max
// |Q·2^e| in [2^13, 2^14): exact for every element down to 2^-27 of the head's largest); within each
// 16 dims, dim 4c + r sits in k slot 2c + r (r < 2) or 8 + 2c + r − 2. Called once the first tiles'
// copies are out (fetch_q issued the loads first thing). Row pairs: fetch_q(p, v) on two warpgroups
// loads rows v and v + 1 (the second warpgroup's q_piece heads 16..31, of the next row), stored as
// columns 16r + head.
template <int kRows>
__device__ __forceinline__ void store_q(Smem<kRows>& sm, const DecodeParams& p, const QRegs& q) {
  constexpr int kPerThread = kQPerThread;
  const uint4(&x)[kPerThread] = q.x;
  // |Q| max of this thread's head: its own pieces, then the head's 8 lanes (q_piece).
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const std::uint32_t w[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      m = fmaxf(m, fabsf(bits_to_float(w[i] << 16)));
      m = fmaxf(m, fabsf(bits_to_float(w[i] & 0xFFFF0000u)));
    }
  }
#pragma unroll
  for (int off = 1; off < 8; off <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  const std::uint32_t am = float_to_bits(m);  // non-negative: its bits order as the floats
  const int e = am == 0 ? 0 : min(max(13 - (int((am >> 23) & 0xFF) - 127), -100), 100);
  const float scale = bits_to_float(std::uint32_t(127 + e) << 23);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const QPiece pc = q_piece(j);
    const int h = pc.h, d0 = pc.d0;
    std::uint32_t f[4];  // dims d0 + 2i, d0 + 2i + 1
    const std::uint32_t w[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[i] = f16x2_rn(bits_to_float(w[i] << 16) * scale, bits_to_float(w[i] & 0xFFFF0000u) * scale);
    }
    // dims d0..d0+7 are 4c0..4c0+7 of their 16-group (c0 = 0 or 2): slots 2c0..2c0+3 take dims
    // 4c0, 4c0+1, 4c0+4, 4c0+5 and slots 8+2c0..11+2c0 take 4c0+2, 4c0+3, 4c0+6, 4c0+7.
    const int group = d0 / 16, byte = (d0 % 16) == 0 ? 0 : 8;
    *reinterpret_cast<uint2*>(&sm.q.bytes[h / 8][2 * group][h % 8][byte]) = make_uint2(f[0], f[2]);
    *reinterpret_cast<uint2*>(&sm.q.bytes[h / 8][2 * group + 1][h % 8][byte]) = make_uint2(f[1], f[3]);
    if (d0 == 0) sm.logit_scale[h] = p.logit_scale * bits_to_float(std::uint32_t(127 - e) << 23);
  }
}

// ── register fragments ──────────────────────────────────────────────────────────────────────────
// S: the K fragments of k16 steps k0 .. k0 + kBatch − 1 (rows g / g+8 = tokens 16w + g, + 8), in two
// steps so that the ldmatrix results are in flight across the wgmma wait: k_raw (an ldmatrix per two
// steps, 4 e4m3 bytes per register) and k_convert (one exact cvt per pair).
// `tile`: the warpgroup's 64 tokens of the stage; `warp`: of the warpgroup.
struct KRaw {
  std::uint32_t r[T1::kBatch / 2][4];
};
template <bool kTma, int kRows>
__device__ __forceinline__ KRaw k_raw(const Smem<kRows>& sm, int stage, int half, int warp, int k0) {
  const std::uint8_t* tile = sm.kv[stage][half];  // (taken here, not passed: ptxas then folds the k offsets)
  const int lane = threadIdx.x % 32;
  KRaw x;
  if constexpr (kTma) {
    // Row k_row, chunks k + lane / 16: offset 4096·(k / 8) + k_base(k % 8), four bases per thread.
    namespace fs = fp8_stage::pairs;
    const std::uint8_t* base[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) base[j] = tile + fs::k_base(lane, warp, 2 * j);
#pragma unroll
    for (int jj = 0; jj < T1::kBatch / 2; ++jj) {
      const int k = k0 + 2 * jj;                                           // k16 steps k, k + 1: chunks k, k + 1
      ldmatrix_x4(x.r[jj], base[(k % 8) / 2] + fs::kBoxStride * (k / 8));  // = k_offset(lane, warp, k)
    }
  } else {
    // Row 16w + lane % 8 + 8·((lane / 8) % 2), chunks k + lane / 16: two offsets per thread (k & 2).
    const std::uint8_t* row = tile + (16 * warp + lane % 8 + 8 * ((lane / 8) % 2)) * T1::kRowBytes;
    const std::uint8_t* row0 = row + fp8_stage::k_chunk_offset(lane, 0);
    const std::uint8_t* row2 = row + fp8_stage::k_chunk_offset(lane, 2);
#pragma unroll
    for (int jj = 0; jj < T1::kBatch / 2; ++jj) {
      const int k = k0 + 2 * jj;                                      // k16 steps k, k + 1: chunks k, k + 1
      ldmatrix_x4(x.r[jj], ((k & 2) ? row2 : row0) + 16 * (k & ~3));  // = row + k_chunk_offset(lane, k)
    }
  }
  return x;
}
__device__ __forceinline__ void k_convert(const KRaw& x, std::uint32_t (&a)[T1::kBatch][4]) {
#pragma unroll
  for (int jj = 0; jj < T1::kBatch / 2; ++jj) {
    e4m3x4_to_f16x2x2(x.r[jj][0], a[2 * jj][0], a[2 * jj][2]);  // row g: dims 4c, 4c+1 | 4c+2, 4c+3
    e4m3x4_to_f16x2x2(x.r[jj][1], a[2 * jj][1], a[2 * jj][3]);  // row g+8
    e4m3x4_to_f16x2x2(x.r[jj][2], a[2 * jj + 1][0], a[2 * jj + 1][2]);
    e4m3x4_to_f16x2x2(x.r[jj][3], a[2 * jj + 1][1], a[2 * jj + 1][3]);
  }
#pragma unroll
  for (int i = 0; i < T1::kBatch; ++i) fence_regs(a[i]);
}

// Row pairs, on the tile that holds the pair's last key (seen by the second row only): that key's V as
// stored in its half of the stage (`half`, tile row r) with every NaN byte (e4m3 S.1111.111) set to +0,
// by the 128 threads of the warpgroup that owns the half, after its Sᵀ has read the row. P·V then
// multiplies the first row's P of 0 at that key by a finite V, not by NaN; the second row still gets
// the reference's NaN, through its logit at that key (K is the same bytes, read before).
__device__ __forceinline__ void last_key_v_nan_to_zero(std::uint8_t* half, int r, unsigned tid) {
  std::uint32_t* w = reinterpret_cast<std::uint32_t*>(half + fp8_stage::kv_offset(r, int(tid / 4)) + 4 * (tid % 4));
  const std::uint32_t v = *w;  // dims 4·tid .. 4·tid + 3
  if (fp8_stage::e4m3x4_nan_bits(v) != 0) *w = fp8_stage::e4m3x4_nan_to_zero(v);
}

// P·V: the Vᵀ fragments of the m-tiles mt0 and mt0 + 1 for every P·V k step of 64 tokens (`tile`,
// the stage's or a row pair's half of it): m-tile mt, rows g / g+8 = dims 64mt + 16w + 2g, + 1; k32
// step ks: tokens 32ks + [0, 32).
__device__ __forceinline__ int v_row_dim(int mt, int warp, int g) {
  return 64 * mt + 16 * warp + 2 * g;
}
// In two steps, so that a group's loads can be in flight across the wgmma wait that frees its
// registers: v_raw (the ldmatrix.trans results) and v_permute (the byte permutes into the fragments).
struct VRaw {
  std::uint32_t r[2][T1::kPvSteps][4];  // matrix i: tokens 32ks + 8i + [0, 8) × the 16 dims (one core matrix)
};
template <bool kTma>
__device__ __forceinline__ VRaw v_raw(const std::uint8_t* tile, int warp, int mt0) {
  const int lane = threadIdx.x % 32;
  VRaw x;
  if constexpr (kTma) {
    // v_offset(lane, warp, ks, mt) = 4096·(mt / 2) + 2048·ks + v_base(mt % 2): two bases per thread.
    namespace fs = fp8_stage::pairs;
    const std::uint8_t* base[2] = {tile + fs::v_base(lane, warp, 0), tile + fs::v_base(lane, warp, 1)};
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int ks = 0; ks < T1::kPvSteps; ++ks) {
        const int mt = mt0 + m;
        ldmatrix_x4_trans(x.r[m][ks], base[mt % 2] + fs::kBoxStride * (mt / 2) + fs::kVStepBytes * ks);
      }
    }
  } else {
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int ks = 0; ks < T1::kPvSteps; ++ks) {
        ldmatrix_x4_trans(x.r[m][ks], tile + fp8_stage::v_offset(lane, warp, ks, mt0 + m));
      }
    }
  }
  return x;
}
__device__ __forceinline__ void v_permute(const VRaw& x, std::uint32_t (&a)[2][T1::kPvSteps][4]) {
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int ks = 0; ks < T1::kPvSteps; ++ks) {
      // r[i] bytes: (token 2c, dim 2g), (2c, 2g+1), (2c+1, 2g), (2c+1, 2g+1) of matrix i; a register's
      // bytes are tokens 2c, 8+2c, 2c+1, 9+2c (P's slot order, above).
      const std::uint32_t(&r)[4] = x.r[m][ks];
      a[m][ks][0] = __byte_perm(r[0], r[1], 0x6240);  // row g   = dim 2g
      a[m][ks][1] = __byte_perm(r[0], r[1], 0x7351);  // row g+8 = dim 2g+1
      a[m][ks][2] = __byte_perm(r[2], r[3], 0x6240);
      a[m][ks][3] = __byte_perm(r[2], r[3], 0x7351);
    }
  }
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int ks = 0; ks < T1::kPvSteps; ++ks) fence_regs(a[m][ks]);
  }
}
template <bool kTma>
__device__ __forceinline__ void v_fragments(const std::uint8_t* tile, int warp, int mt0,
                                            std::uint32_t (&a)[2][T1::kPvSteps][4]) {
  v_permute(v_raw<kTma>(tile, warp, mt0), a);
}

// ── the kernel ──────────────────────────────────────────────────────────────────────────────────
// kShort: every item has at most one tile (launch_decode checks DecodeParams::max_item_tokens): the
// prologue's copy is the only one, and the tile loop holds no copy code (perf-notes v76).
// kTma: whole tiles by TMA into the pairs layout (Plan::kv_tma: launched only with DecodeParams::kv_map).
// kRows: 1, or 2 for row pairs (the header).
template <int N>
using Part = std::integral_constant<int, N>;  // copy_tile's part, as a value
static_assert(kShortItemTokens == (T1::kStages - 1) * kTile && 2 * kShortItemTokens == Traits<2>::kCtaTile,
              "short items: the tiles the prologue copies (a row pair's: one 128-token tile)");
// kTablePages (1 or 16; 0: none): tiles after the first copied through row tables, in the kernel of
// pages of that many rows (SmemWithRowTable, tile_source_table).
template <bool kShort, bool kEvictFirst, bool kTma, int kRows, int kTablePages>
__global__ void __launch_bounds__(Traits<kRows>::kCtaThreads, Traits<kRows>::kCtasPerSm)
    decode_fp8_kernel(const __grid_constant__ DecodeParams p) {
  static_assert(!(kShort && kTma), "the one-tile kernel copies its tile by cp.async");
  static_assert(!(kRows == 2 && kTma), "row pairs copy by cp.async");
  static_assert(kTablePages == 0 || kTablePages == 1 || kTablePages == 16, "row tables: pages of 1 or 16 rows");
  constexpr bool kTable = kTablePages != 0;
  static_assert(!kTable || !(kShort || kTma), "row tables serve the tiles after the first, copied by cp.async");
  using T = Traits<kRows>;
  static_assert(!kTable || T::kStages == 2,
                "row tables: tile t + 2's lookups in iteration t, its table a barrier ahead");
  constexpr int kI = 4 * kRows;  // columns of Sᵀ / Oᵀ per thread (acc_head)
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  SmemOf<kRows, kTable>& sm =
      *reinterpret_cast<SmemOf<kRows, kTable>*>(smem_raw + (kTma ? swizzle_align_bytes(smem_raw) : 0));
  launch_dependents();  // the combine grid's launch latency hides behind this kernel

  const WorkItem item = work_item(p, int(blockIdx.x));
  const int wg = wg_of<kRows>();
  const unsigned tid = wg_tid<kRows>();
  const int warp = int(tid / 32), lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;           // accumulator row group / column pair
  const QRegs q_regs = fetch_q(p, item.request);  // in flight while the first tile's loads go out
  const KvRowMap rows(p, item);
  const int num_tiles = (item.kv_end - item.kv_begin + T::kCtaTile - 1) / T::kCtaTile;
  // Tile t's first token, and the warpgroup's (its half of a row pair's tile).
  const auto cta_t0 = [&](int t) { return item.kv_begin + t * T::kCtaTile; };
  const auto wg_t0 = [&](int t) { return cta_t0(t) + kTile * wg; };
  // The warpgroup's 64 tokens of tile t: TileSource, and the copies into its stage's half.
  const auto source = [&](int t) { return tile_source<kTma>(p, rows, wg_t0(t), cta_t0(t), item.kv_end, tid); };
  const auto copy = [&](auto part, int t, const TileSource& ts) {
    copy_tile<decltype(part)::value, kEvictFirst, kTma>(sm.kv[t % T::kStages][wg], &sm.full[t % T::kStages][wg], p, ts,
                                                        tid);
  };

  if (threadIdx.x < T::kStages * kRows) mbar_init(&sm.full[0][0] + threadIdx.x, kThreads);
  mbar_init_fence();
  __syncthreads();
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < num_tiles) {
      const TileSource ts = source(s);
      copy(Part<0>{}, s, ts);
      copy(Part<1>{}, s, ts);
      copy(Part<2>{}, s, ts);
    }
  }
  if constexpr (!kShort)
    rows.prefetch_pages(item.kv_begin, item.kv_end, int(threadIdx.x), int(blockDim.x));  // paged: into L2
  // kTable: the page of the thread's token (threads < 64) of the tile whose row table is stored next:
  // tiles 1 and 2 here, then tile t + 3's in iteration t right after tile t + 2's store, so that each
  // lookup has a whole iteration to land (perf-notes v160).
  int page_next = 0;
  const auto table_page = [&](int u) {
    if (tid < kTile) page_next = rows.table_page(wg_t0(u), cta_t0(u), item.kv_end, int(tid));
  };
  const auto table_store = [&](int u) {
    if constexpr (kTable) {
      if (tid < kTile)
        sm.row_off[u % 2][wg][tid] = rows.table_offset(page_next, wg_t0(u), cta_t0(u), item.kv_end, int(tid));
    }
  };
  if (kTable && num_tiles > 1) table_page(1);
  store_q(sm, p, q_regs);                       // Q's loads have been in flight since the start
  if (kTable && num_tiles > 1) table_store(1);  // before the first iteration's barrier
  if (kTable && num_tiles > 2) table_page(2);   // stored in iteration 0

  SoftmaxState<float> st[kI];
#pragma unroll
  for (int i = 0; i < kI; ++i) st[i] = SoftmaxState<float>::empty();
  float o[T::kWgMTiles][2 * kI];  // Oᵀ: m-tile mt of the warpgroup's, rows = dims v_row_dim (+1), cols
#pragma unroll
  for (int mt = 0; mt < T::kWgMTiles; ++mt) {
#pragma unroll
    for (int i = 0; i < 2 * kI; ++i) o[mt][i] = 0.f;
  }
  float lscale[kI];
#pragma unroll
  for (int i = 0; i < kI; ++i) lscale[i] = 0.f;
  // Descriptors of the wgmma B operands; a k step advances the start address (bits 0–13, in
  // 16-byte units) by whole chunks without carrying out of the field (shared memory < 256 KB).
  const std::uint64_t desc_q = desc(sm.q.bytes[0][0][0], CoreTile<T::kCols, 2 * kHeadDim>::sbo());
  std::uint64_t desc_p[T::kPTerms];
#pragma unroll
  for (int i = 0; i < T::kPTerms; ++i) desc_p[i] = desc(sm.p[i].bytes[0][0][0], CoreTile<T::kCols, T::kPBytes>::sbo());

  for (int t = 0; t < num_tiles; ++t) {
    const int stage = t % T::kStages;
    const int t0 = wg_t0(t);
    // Both halves of a row pair's tile: P·V reads them all.
#pragma unroll
    for (int r = 0; r < kRows; ++r) mbar_wait(&sm.full[stage][r], (t / T::kStages) & 1);
    if (t == 0) fence_proxy_async();  // Q stores (generic proxy) → wgmma reads (async proxy)
    __syncthreads();                  // tile t landed everywhere; iteration t−1 finished everywhere
    if (t == 0) {
#pragma unroll
      for (int i = 0; i < kI; ++i) lscale[i] = sm.logit_scale[acc_head(i, c)];
    }
    const int next = t + T::kStages - 1;
    const bool load_next = !kShort && next < num_tiles;
    TileSource next_src{};   // resolved now, copied among the S batches
    if constexpr (kTable) {  // (next = t + 1: two stages, asserted above)
      if (load_next)
        next_src =
            tile_source_table<kTablePages == 16>(p, rows, sm.row_off[next % 2][wg], wg_t0(next), item.kv_end, tid);
    } else {
      if (load_next) next_src = source(next);
    }
    // A tile by TMA is one instruction of thread 0: it goes out here, a K batch earlier than the
    // cp.async parts (the CTA barrier above freed the stage).
    const bool early = kTma && load_next && next_src.pair >= 0;
    if (early) {
      copy(Part<0>{}, next, next_src);
      copy(Part<2>{}, next, next_src);
    }

    // Sᵀ (tokens × columns) = K · Qᵀ: K in registers, batches of kBatch k16 steps, two batches in
    // flight (a batch's registers are reused once the batch before it retired). One row: four
    // accumulator chains, batch bt's even and odd k steps to chains 2·(bt % 2) and 2·(bt % 2) + 1
    // (against two chains of 18 wgmmas: −0.4 to −0.5 %, perf-notes v105); row pairs (N = 32): two,
    // batch bt to chain bt % 2.
    float sacc[T::kChains][2 * kI];  // each started fresh by its first wgmma
    std::uint32_t ka[2][T::kBatch][4];
    constexpr int kBatches = kSteps / T::kBatch;
    static_assert(T::kBatch >= 2, "each batch starts two of the four chains");
    static_assert(kSteps % T::kBatch == 0 && kBatches == 6,
                  "whole register batches; every other one carries a third of the next tile's copies");
    KRaw raw = k_raw<kTma>(sm, stage, wg, warp, 0);
#pragma unroll
    for (int bt = 0; bt < kBatches; ++bt) {
      KRaw raw_next{};  // the next batch's ldmatrix results, in flight across the wait
      if (bt + 1 < kBatches) raw_next = k_raw<kTma>(sm, stage, wg, warp, (bt + 1) * T::kBatch);
      if (bt >= 2) wgmma_wait<1>();  // batch bt − 2 retired: its registers are free
      k_convert(raw, ka[bt % 2]);
#pragma unroll
      for (int ch = 0; ch < T::kChains / 2; ++ch) fence_regs(sacc[T::kChains / 2 * (bt % 2) + ch]);
      wgmma_fence();
#pragma unroll
      for (int i = 0; i < T::kBatch; ++i) {
        const std::uint64_t b = desc_q + 16 * (bt * T::kBatch + i);  // + 256 bytes per k16 step
        float(&acc)[2 * kI] = sacc[T::kChains / 2 * (bt % 2) + i % (T::kChains / 2)];
        if (bt < 2 && i < T::kChains / 2) {
          wgmma_rs_f16<false>(acc, ka[bt % 2][i], b);
        } else {
          wgmma_rs_f16(acc, ka[bt % 2][i], b);
        }
      }
      wgmma_commit();
      raw = raw_next;
      // Tile t + stages − 1's copies go out in three parts, behind batches 0, 2 and 4 (one burst at
      // the top of the iteration measured 7 % slower at 256×8192; issued later, after the P
      // barrier, they arrive late: +10 %, perf-notes v54).
      if (load_next && !early) {
        if (bt == 0) copy(Part<0>{}, next, next_src);
        if (bt == 2) copy(Part<1>{}, next, next_src);
        if (bt == 4) copy(Part<2>{}, next, next_src);
      }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int ch = 0; ch < T::kChains; ++ch) fence_regs(sacc[ch]);
    float s[2 * kI];
#pragma unroll
    for (int i = 0; i < 2 * kI; ++i) {
      s[i] = T::kChains == 4 ? (sacc[0][i] + sacc[1][i]) + (sacc[2][i] + sacc[T::kChains - 1][i])
                             : sacc[0][i] + sacc[T::kChains - 1][i];
    }
#pragma unroll
    for (int b2 = 0; b2 < 2; ++b2) {
#pragma unroll
      for (int i = 0; i < T::kBatch; ++i) fence_regs(ka[b2][i]);
    }
    // P·V in four groups of two m-tiles × 64 tokens: one row, m-tiles 2·grp, 2·grp + 1 of the tile; row
    // pairs, m-tiles 2·(grp % 2), + 1 of the warpgroup's over the tile's half grp / 2. The Vᵀ fragments
    // of the first two groups need only the tile: their loads and byte work go out under the
    // softmax's shuffle and barrier latency, while the K registers are free.
    constexpr int kGroupTiles = 2, kGroupsPerHalf = T::kWgMTiles / kGroupTiles, kGroups = kGroupsPerHalf * kRows;
    static_assert(kGroups == 4, "four P·V groups per tile, two in flight");
    const auto half_of = [](int grp) { return grp / kGroupsPerHalf; };
    const auto mt_of = [](int grp) {
      return kGroupTiles * (grp % kGroupsPerHalf);
    };  // the group's first, of the warpgroup's
    const auto v_tile = [&](int grp) -> const std::uint8_t* { return sm.kv[stage][half_of(grp)]; };
    std::uint32_t va[2][kGroupTiles][T::kPvSteps][4];
    if constexpr (kRows == 2) {
      if (t == num_tiles - 1 && item.pair_end < item.kv_end) {  // the tile of the pair's last key (CTA-uniform)
        const int u = item.pair_end - cta_t0(t);                // its token in the tile: half u / 64
        if (wg == u / kTile) last_key_v_nan_to_zero(sm.kv[stage][wg], u % kTile, tid);
        __syncthreads();  // before any warp's Vᵀ fragments of that half
      }
    }
    v_fragments<kTma>(v_tile(0), warp, T::kWgMTiles * wg + mt_of(0), va[0]);
    v_fragments<kTma>(v_tile(1), warp, T::kWgMTiles * wg + mt_of(1), va[1]);

    // Online softmax. s[j0] / s[j0 + 2]: the warpgroup's tokens g / g+8 of the warp, column i
    // (acc_head; row i / 4).
    const int u0 = 16 * warp + g;  // tile tokens u0 and u0 + 8
    float x[kI][2];
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      const int j0 = acc_reg(i), end = row_end<kRows>(item, i / 4);
      x[i][0] = t0 + u0 < end ? s[j0] * lscale[i] : -INFINITY;
      x[i][1] = t0 + u0 + 8 < end ? s[j0 + 2] * lscale[i] : -INFINITY;
    }
    float f[kI];
    tile_maxima(x, st, T::kSlack, t == 0, sm.red, f);
    const float pscale = 1.f / T::kOutScale;  // P·2^8
    SplitE4m3x2 q[kI];                        // P·2^8 = P_hi + P_lo (e4m3) of column acc_head(i, c), tokens u0, u0 + 8
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      // (A row pair's first row may see no token of a tile, or of the whole item so far: shift().)
      const float m = kRows == 1 ? st[i].m : st[i].shift();
      const float p0 = SoftmaxState<float>::exp(x[i][0] - m), p1 = SoftmaxState<float>::exp(x[i][1] - m);
      st[i].add(p0 + p1);
      q[i] = split_e4m3x2(p0 * pscale, p1 * pscale);
    }
    // Both terms by one stmatrix.trans per 16 columns: matrix (term, columns 16r..16r+7 | +8..+15) of
    // 8 columns × 8 token pairs, lane 4g + c holding row g (its pair), columns 2c, 2c + 1 of the block;
    // the warp's 16 tokens are chunk 4·wg + warp of P's rows.
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const SplitE4m3x2* qr = q + 4 * r;
      stmatrix_x4_trans(&sm.p[lane / 16].bytes[2 * r + (lane / 8) % 2][kWarps * wg + warp][lane % 8][0],
                        __byte_perm(qr[0].hi, qr[1].hi, 0x5410), __byte_perm(qr[2].hi, qr[3].hi, 0x5410),
                        __byte_perm(qr[0].lo, qr[1].lo, 0x5410), __byte_perm(qr[2].lo, qr[3].lo, 0x5410));
    }
    fence_proxy_async();
    __syncthreads();  // P complete
    // kTable: tile t + 2's row table (its buffer's last reader, tile t's sources, went before the top
    // barrier of this iteration; its readers come after the next one).
    if (kTable && t + 2 < num_tiles) table_store(t + 2);
    if (kTable && t + 3 < num_tiles) table_page(t + 3);  // stored in the next iteration

    // Oᵀ = f·Oᵀ + Vᵀ·Pᵀ, two groups in flight: a group's Vᵀ fragments come from the raw tile while
    // the group before runs. fp8 wgmma accumulates in ~14 bits, so each group's product (64 tokens)
    // goes to fresh accumulators that are then added to the fp32 O (which takes f at its first).
    float acc[2][kGroupTiles][2 * kI];
    auto retire = [&](int grp) {
#pragma unroll
      for (int m = 0; m < kGroupTiles; ++m) {
        const int mt = mt_of(grp) + m;
#pragma unroll
        for (int ks = 0; ks < T::kPvSteps; ++ks) fence_regs(va[grp % 2][m][ks]);
        fence_regs(acc[grp % 2][m]);
#pragma unroll
        for (int i = 0; i < 2 * kI; ++i) {
          o[mt][i] = (half_of(grp) == 0 ? o[mt][i] * f[(i / 4) * 2 + (i % 2)] : o[mt][i]) + acc[grp % 2][m][i];
        }
      }
    };
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      if (grp >= 2) {  // groups 0, 1: during the softmax
        const VRaw raw = v_raw<kTma>(v_tile(grp), warp, T::kWgMTiles * wg + mt_of(grp));  // in flight across the wait
        wgmma_wait<1>();  // group grp − 2 retired: its registers are free
        retire(grp - 2);
        v_permute(raw, va[grp % 2]);
      }
      wgmma_fence();
#pragma unroll
      for (int m = 0; m < kGroupTiles; ++m) {
#pragma unroll
        for (int ks = 0; ks < T::kPvSteps; ++ks) {
          const std::uint32_t(&a)[4] = va[grp % 2][m][ks];
          float(&d)[2 * kI] = acc[grp % 2][m];
          const int kp = T::kPvSteps * half_of(grp) + ks;  // P's k32 step: tokens 32kp.. of the CTA tile
          if (ks == 0) {
            wgmma_rs<false>(d, a, desc_p[0] + 16 * kp);  // fresh accumulator
          } else {
            wgmma_rs(d, a, desc_p[0] + 16 * kp);
          }
          wgmma_rs(d, a, desc_p[T::kPTerms - 1] + 16 * kp);
        }
      }
      wgmma_commit();
    }
    wgmma_wait<1>();
    retire(kGroups - 2);
    wgmma_wait<0>();
    retire(kGroups - 1);
  }
  // Cluster mode (one row): the exchange is stage 0. Row pairs: stage 0's start holds write_output's omax.
  // Each output value is a weighted mean of e4m3 codes (|code| ≤ 448) times the tensor scale: the
  // partial's fp16 scale needs no |O| reduction.
  finish_item<true, kRows>(p, item, *reinterpret_cast<ClusterExchange*>(sm.kv[0]), sm.red, st, o, T::kOutScale,
                           kE4m3Max * fabsf(p.value_scale),
                           [&](int mt) { return v_row_dim(T::kWgMTiles * wg + mt, warp, g); });
}

}  // namespace

// Pages of 1 or 16 rows (`table_pages`; 0 for others) take the row-table kernels of cp.async items of
// more than one tile.
template <int kRows, int kTablePages>
DecodeKernel fp8_table_kernel(bool evict_first) {
  return {evict_first ? decode_fp8_kernel<false, true, false, kRows, kTablePages>
                      : decode_fp8_kernel<false, false, false, kRows, kTablePages>,
          Traits<kRows>::kCtaThreads, kSmemBytes<kRows, false, true>, Traits<kRows>::kCtasPerSm, kPartialsF16};
}
DecodeKernel decode_fp8_kernel_info(bool short_items, bool evict_first, bool tma, bool row_pairs, int table_pages) {
  const bool table = !short_items && (table_pages == 1 || table_pages == 16);
  if (row_pairs) {  // (cp.async only)
    if (table) return table_pages == 1 ? fp8_table_kernel<2, 1>(evict_first) : fp8_table_kernel<2, 16>(evict_first);
    void (*const entry[2][2])(DecodeParams) = {
        {decode_fp8_kernel<false, false, false, 2, 0>, decode_fp8_kernel<false, true, false, 2, 0>},
        {decode_fp8_kernel<true, false, false, 2, 0>, decode_fp8_kernel<true, true, false, 2, 0>}};
    return {entry[short_items][evict_first], Traits<2>::kCtaThreads, kSmemBytes<2, false>, Traits<2>::kCtasPerSm,
            kPartialsF16};
  }
  if (tma && !short_items) {
    return {evict_first ? decode_fp8_kernel<false, true, true, 1, 0> : decode_fp8_kernel<false, false, true, 1, 0>,
            kThreads, kSmemBytes<1, true>, T1::kCtasPerSm, kPartialsF16};
  }
  if (table) return table_pages == 1 ? fp8_table_kernel<1, 1>(evict_first) : fp8_table_kernel<1, 16>(evict_first);
  void (*const entry[2][2])(DecodeParams) = {
      {decode_fp8_kernel<false, false, false, 1, 0>, decode_fp8_kernel<false, true, false, 1, 0>},
      {decode_fp8_kernel<true, false, false, 1, 0>, decode_fp8_kernel<true, true, false, 1, 0>}};
  return {entry[short_items][evict_first], kThreads, kSmemBytes<1, false>, T1::kCtasPerSm, kPartialsF16};
}

}  // namespace mla::sm90
