// sm90 MLA decode from MXFP4 KV with wgmma, the tokens in M, every element decoded once.
//
// Grid: one CTA per work item (q row v = b·s_q + i, KV range [kv_begin, kv_end)); one warpgroup
// (128 threads), two CTAs per SM. Warp w owns tokens 16w..16w+15 of each 64-token tile (its 16 rows
// of every wgmma M = 64). Per tile t:
//
//   raw      tile t as stored (E2M1 codes; 16-byte chunks swizzled, raw_swizzle) and its factors
//            (from the E8M0 bytes) in shared memory; tile t + 1 in registers (global loads issued an iteration
//            ahead, after P·V's issue: a proxy fence waits for every load in flight), stored into
//            the one raw stage once S(t) has read it.
//   Sᵀ = K·Qᵀ   wgmma m64n16k16 bf16 RS, fp32 accumulation. A = K in registers: an ldmatrix of the
//            raw tile gives 8 codes per register; codes j and j + 4 go to a bf16 pair by bit
//            placement (value · 2^-126, exact) and one bf16x2 multiply by 2^(s − R_w + 126), where
//            R_w is the largest E8M0 byte of the warp's 16 tokens (2^(R_w − 127) goes to the logits).
//            B = Q in bf16 as given, dims permuted to the fragments' k order. The fragments of dims
//            0..511 are also stored to Vt: the decoded V, bf16, in no-swizzle core matrices of
//            8 tokens × 8 "value rows" (a fixed permutation of the dims, undone at the output).
//   softmax  per head over the tile (tile_maxima): a block vote whether any logit exceeds its head's
//            running max by more than the slack (8); only then, or on the item's first tile, the exact
//            max by warp butterflies and one shared-memory step. P·2^(R_w − A) in bf16, A = the
//            largest R_w so far (never decreasing).
//   Oᵀ += Vt·Pᵀ  wgmma m64n16k16 bf16 SS, A = Vt read MN-major (value rows in M, tokens in K), B = P:
//            straight into the fp32 Oᵀ, kept in units of 2^(A − 127) and rescaled only when a head's
//            max or A moved. Under it, the next tile's head start: the rope batch of S (steps
//            32..35, which do not touch Vt).
//
// K is decoded once per tile, into registers for S and (its first 512 dims) into Vt for P·V: no V
// fragments, no second decode. Shared memory per CTA ≈ 107 KB (Vt 64 KB).
//
// Row pairs (kRows = 2; the plan's for an even s_q, WorkItem::pair_end): one CTA takes q rows v and
// v + 1 of a request, which share their keys (the first sees all but the last). Two warpgroups, one
// CTA per SM (~218 KB), tiles of 128 tokens: warpgroup g loads, decodes and stores Vt for tokens
// 64g..64g+63 as above, and runs Sᵀ for both rows at once (N = 32: columns 16r + head of row v + r);
// the maxima and P span both warpgroups (8 warps); Oᵀ += Vt·Pᵀ, N = 32, splits the value rows:
// warpgroup g owns m-tiles 4g..4g+3 over all 128 tokens. Every KV element is decoded once for both
// rows, and each wgmma carries both rows' heads. Vt serves both rows, so the pair's last key (the
// second row's only) is taken as zero bytes where it has a NaN scale, and the second row gets its NaN
// in the epilogue (store_factors): a NaN stored there reaches the second row only.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/bf16.h"
#include "kernels/common/formats.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/launch.h"
#include "kernels/sm90/primitives.h"
#include "kernels/sm90/wgmma.h"
#include "mla/mla.h"

namespace mla::sm90 {
namespace {

using namespace wg;

template <int kRows>
struct Traits {
  static_assert(kRows == 1 || kRows == 2, "one q row, or a row pair");
  static constexpr int kCtasPerSm = kRows == 1 ? 2 : 1;
  static constexpr int kCtaThreads = kThreads * kRows;  // a warpgroup per row
  static constexpr int kCtaWarps = kWarps * kRows;
  static constexpr int kCols = kNumHeads * kRows;    // N of Sᵀ and Oᵀ: every row's heads
  static constexpr int kCtaTile = kTile * kRows;     // tokens per tile; warpgroup g: 64g..64g+63
  static constexpr int kWgMTiles = kMTiles / kRows;  // Oᵀ m-tiles per warpgroup
  static constexpr int kRowBytes = kHeadDim / 2;     // two E2M1 codes per byte (288)
  static constexpr int kChunks = kRowBytes / 16;     // 16-byte chunks per row = 32-element blocks (18)
  static constexpr int kBlocks = kHeadDim / 32;      // E8M0 scale blocks per row (18)
  static constexpr int kBatch = 4;                   // S k16 steps per register batch (one ldmatrix)
  static constexpr int kBatches = kSteps / kBatch;   // 9
  static constexpr int kPvSteps = kCtaTile / 16;     // k16 steps of P·V per tile
  static_assert(kChunks == kBlocks, "one 16-byte chunk holds exactly one scale block");
  static_assert(kSteps % kBatch == 0, "whole register batches");
  static_assert(kTile * kChunks % kThreads == 0, "whole raw chunks per thread");
  static_assert(kBatch % 4 == 0 && kBlocks % 2 == 0,
                "every batch starts at an even block, every fac2 row at 8 bytes: k_factors' 8-byte loads");
  static_assert(kChunks % 2 == 0, "raw_swizzle flips chunks within pairs: a pair must not straddle rows");
};
using T1 = Traits<1>;                                          // the row-independent constants
constexpr int kVSteps = kValueDim / 16;                        // S steps whose fragments are V (32)
constexpr int kRawPerThread = kTile * T1::kChunks / kThreads;  // 16-byte raw chunks per warpgroup thread (9)

template <int kRows>
struct Smem {
  using T = Traits<kRows>;
  // Raw tile per warpgroup: [token][E2M1 bytes], chunks swizzled.
  alignas(128) std::uint8_t kv[kRows][kTile][T::kRowBytes];
  // Vt: core matrix (value rows 8r..8r+7, tokens 8j..8j+7) = vt[r][j], 8 tokens × 16 bytes.
  alignas(128) std::uint8_t vt[kValueDim / 8][T::kCtaTile / 8][8][16];
  CoreTile<T::kCols, 2 * kHeadDim> q;                        // Q, bf16, dims permuted; rows 16r + head
  CoreTile<T::kCols, 2 * T::kCtaTile> p;                     // P, bf16 [column][token]
  alignas(16) std::uint32_t fac2[kRows][kTile][T::kBlocks];  // bf16 2^(s − R_w + 126), duplicated pair
  float red[T::kCtaWarps][T::kCols];                         // per-warp tile max (then l) per column
  int rw[T::kCtaWarps];                                      // R_w of this tile per warp
  int last_key_nan;  // row pairs: the pair's last key has a NaN scale (store_factors; its one writer)
};
// kTable (the kernels of pages of 1 row, the header): Smem plus the row table, written a barrier before
// the tile's loads and read once per 16-byte chunk (load_raw_table).
template <int kRows, bool kTable>
using SmemOf = SmemWithRowTable<Smem<kRows>, kRows, kTile, kTable>;
template <int kRows, bool kTable>
constexpr bool smem_fits() {
  return Traits<kRows>::kCtasPerSm * (sizeof(SmemOf<kRows, kTable>) + 1024) <= 228 * 1024 &&
         sizeof(SmemOf<kRows, kTable>) <= 227 * 1024;
}
static_assert(smem_fits<1, false>() && smem_fits<2, false>() && smem_fits<1, true>() && smem_fits<2, true>(),
              "MXFP4: kCtasPerSm CTAs must fit one SM's shared memory");
static_assert(sizeof(Smem<1>::vt) >= sizeof(ClusterExchange), "cluster mode: the exchange fits in Vt");
static_assert(sizeof(Smem<2>::vt) >= sizeof(ClusterExchange), "a row pair's epilogue scratch fits in Vt");
static_assert(T1::kCtasPerSm <= kMaxDecodeCtasPerSm, "the workspace is sized for kMaxDecodeCtasPerSm CTAs per SM");
template <int kRows>
constexpr int kVtSbo = Traits<kRows>::kCtaTile / 8 * 128;  // bytes between value-row groups of Vt (1024, 2048)
// A head's running max moves only when a tile's logits exceed it by more than this (tile_maxima):
// P then reaches e^8 ≈ 3000, which its bf16 and the fp32 O take.
constexpr float kSlack = 8.f;

// ── E2M1 → bf16 ─────────────────────────────────────────────────────────────────────────────────
// Codes J and J + 4 of a word of 8 E2M1 codes (bits 4J.. and 16 + 4J..) → a bf16 pair worth
// value · 2^-126 each, exactly: magnitude bits to 6..8 (exponent 0..3, mantissa msb), sign to 15.
// Code 1 (0.5) becomes the subnormal 2^-127. J = 0, 1: the two codes alone, shifted twice at once
// by one multiply (the shifted copies do not overlap), then masked. e2m1_pairs gives all four.
template <int J>
__device__ __forceinline__ std::uint32_t e2m1_pair(std::uint32_t w) {
  static_assert(J == 0 || J == 1, "codes 2/6 and 3/7: shift the word right by 8 first");
  constexpr std::uint32_t kShifts = (1u << (6 - 4 * J)) + (1u << (12 - 4 * J));
  return ((w & (0x000F000Fu << (4 * J))) * kShifts) & 0x81C081C0u;
}
struct Pairs4 {
  std::uint32_t p[4];  // codes 0/4, 1/5, 2/6, 3/7
};
__device__ __forceinline__ Pairs4 e2m1_pairs(std::uint32_t w) {
  const std::uint32_t hi = w >> 8;
  return {{e2m1_pair<0>(w), e2m1_pair<1>(w), e2m1_pair<0>(hi), e2m1_pair<1>(hi)}};
}
__device__ __forceinline__ std::uint32_t mul_bf16x2(std::uint32_t a, std::uint32_t b) {  // exact for 2^k
  std::uint32_t r;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// The dim of value row `r` (the M row of Vt and Oᵀ): row 16·st + slot holds fragment slot `slot` of
// S step st, i.e. dim 32·(st / 2) + 8c + 4i + 2·(st % 2) + slot / 8 with c = (slot % 8) / 2, i = slot %
// 2 (the K fragments' order, see store_q). Rows r and r + 8 (r % 16 < 8) are dims D and D + 1.
__device__ __forceinline__ int value_row_dim(int r) {
  const int st = r / 16, slot = r % 16;
  return 32 * (st / 2) + 8 * ((slot % 8) / 2) + 4 * (slot % 2) + 2 * (st % 2) + slot / 8;
}

// ── raw tile: global → registers → shared memory ───────────────────────────────────────────────
// A warpgroup's 64 tokens [t0, t0 + 64) — the CTA's tile, or with row pairs warpgroup g's half of it —
// as 1152 chunks of 16 bytes (row = chunk / 18), 9 per thread, in load units: the whole tile, or with
// kGroups (the kernel of pages of 16 rows) warp w's group, rows 16w .. 16w + 15.
// * Whole tiles: thread tid → chunks tid + 128i (i < 9): every warp load is 512 contiguous bytes of a
//   dense tile, the warpgroup's 2 KB.
// * Groups: lane l of warp w → chunks 288w + l + 32i: 512 contiguous bytes of a dense group. (Whole
//   tiles keep the first order: on a contiguous cache the groups' cost MXFP4 256×8192 4.7 %, perf-notes
//   v145.)
// A unit of whole, unpadded rows (stride 288) in one run of rows (a contiguous cache, or one page:
// KvRowMap::one_run) is one base row (unit_row) plus constants; otherwise (pages of 1 row, padded
// rows, the request's last tile, or a unit straddling two pages: an item of a cut list may start off
// a 16-row boundary) each chunk's row is looked up, rows past `end` loading token
// `first`'s row (the CTA tile's first token, which exists; their values meet P = 0 and masked logits
// only). A paged unit's base row costs a page-table load, so the kernel resolves it a tile before the
// loads that use it (the loads would otherwise wait for it in the middle of the tile). The scales of a
// group's tokens (load_scales) are the same warp's.
// The raw tile's rows are unpadded (288 bytes); chunk c of row r sits at chunk c ^ raw_swizzle(r).
// The 8 rows of an ldmatrix matrix (r0 .. r0 + 7, r0 a multiple of 8, one chunk) then hit 8 distinct
// bank groups (rows r and r + 4 are 72 chunks ≡ 0 groups apart; their swizzles differ), and the flip
// stays inside chunk pairs, which never straddle rows: a store of 8 consecutive chunks still hits
// 8 distinct groups (a padded row of 304 bytes made the quarter-warps that cross a row conflict).
__device__ __forceinline__ int raw_swizzle(int row) {
  return (row >> 2) & 1;
}
struct RawRegs {
  uint4 x[kRawPerThread];
};
constexpr int kGroupRows = kTile / (kThreads / 32);  // rows of a warp's group (16)
static_assert(kGroupRows == 16 && kGroupRows * T1::kChunks == 32 * kRawPerThread,
              "a warp's group: 16 rows, whole chunks per lane");
template <bool kGroups>
struct LoadUnit {
  static constexpr int kRows = kGroups ? kGroupRows : kTile;
  static constexpr int kStep = kGroups ? 32 : kThreads;  // chunks between a thread's loads
  // The unit's first token, of the tile at t0, for thread tid of the warpgroup.
  __device__ static int t0_of(int t0, unsigned tid) { return kGroups ? t0 + kGroupRows * int(tid / 32) : t0; }
  // The thread's first chunk, counted from its unit's first.
  __device__ static unsigned lane_chunk(unsigned tid) { return kGroups ? tid % 32 : tid; }
  // Chunk i of the thread's: its index in the tile's 64 × 18.
  __device__ static int index(int i, unsigned tid) {
    return int((kGroups ? kGroupRows * T1::kChunks * (tid / 32) : 0) + lane_chunk(tid) + kStep * i);
  }
};
// The page of the thread's unit when the tile is whole, of unpadded rows and paged, and one page holds
// the unit (KvRowMap::one_run), loaded a tile before its loads (an int, where the pair kernel has no
// two registers to spare); else −1 (and always −1 for a contiguous cache, whose whole tiles need no
// lookup).
template <bool kGroups>
__device__ __forceinline__ int unit_page(const DecodeParams& p, const KvRowMap& rows, int t0, int end, unsigned tid) {
  using U = LoadUnit<kGroups>;
  const int u0 = U::t0_of(t0, tid);
  return !rows.contiguous() && t0 + kTile <= end && p.kv_row_stride == T1::kRowBytes && rows.one_run(u0, U::kRows)
             ? rows.page_of(u0)
             : -1;
}
// The unit's base row when its loads take one (a whole tile of unpadded rows of a contiguous cache, or
// a unit in one page: `page`, unit_page's), else −1.
template <bool kGroups>
__device__ __forceinline__ std::int64_t unit_row(const DecodeParams& p, const KvRowMap& rows, int page, int t0, int end,
                                                 unsigned tid) {
  const int u0 = LoadUnit<kGroups>::t0_of(t0, tid);
  if (rows.contiguous() && t0 + kTile <= end && p.kv_row_stride == T1::kRowBytes) return rows.row_base + u0;
  return page >= 0 ? rows.row_in(page, u0) : std::int64_t(-1);
}
template <bool kEvictFirst, bool kGroups>
__device__ __forceinline__ RawRegs load_raw(const DecodeParams& p, const KvRowMap& rows, std::int64_t base, int t0,
                                            int first, int end, unsigned tid) {
  using U = LoadUnit<kGroups>;
  RawRegs r;
  if (base >= 0) {  // unit_row's
    const std::uint8_t* src = p.kv + base * T1::kRowBytes + 16 * U::lane_chunk(tid);
#pragma unroll
    for (int i = 0; i < kRawPerThread; ++i) r.x[i] = ldg_kv16<kEvictFirst>(src + 16 * U::kStep * i);
  } else {
#pragma unroll
    for (int i = 0; i < kRawPerThread; ++i) {
      const int idx = U::index(i, tid), row = idx / T1::kChunks, chunk = idx % T1::kChunks;
      r.x[i] = ldg_kv16<kEvictFirst>(p.kv + rows.row_or_first(t0 + row, first, end) * p.kv_row_stride + chunk * 16);
    }
  }
  return r;
}
// kTable: a whole tile's loads (LoadUnit<false>'s order) through the row table, one shared-memory load
// per chunk where load_raw's row path looks each chunk's page up (perf-notes v149).
template <bool kEvictFirst>
__device__ __forceinline__ RawRegs load_raw_table(const DecodeParams& p, const std::int64_t (&row_off)[kTile],
                                                  unsigned tid) {
  RawRegs r;
#pragma unroll
  for (int i = 0; i < kRawPerThread; ++i) {
    const int idx = LoadUnit<false>::index(i, tid), row = idx / T1::kChunks, chunk = idx % T1::kChunks;
    r.x[i] = ldg_kv16<kEvictFirst>(p.kv + row_off[row] + chunk * 16);
  }
  return r;
}
template <bool kGroups>
__device__ __forceinline__ void store_raw(std::uint8_t (&kv)[kTile][T1::kRowBytes], const RawRegs& r, unsigned tid) {
#pragma unroll
  for (int i = 0; i < kRawPerThread; ++i) {
    const int idx = LoadUnit<kGroups>::index(i, tid), row = idx / T1::kChunks, chunk = idx % T1::kChunks;
    *reinterpret_cast<uint4*>(&kv[row][(chunk ^ raw_swizzle(row)) * 16]) = r.x[i];
  }
}

// E8M0 rows (18 bytes, 2-byte aligned) of the same tokens: lane l of warp w → token 16w + l % 16,
// five (half = l / 16 = 0) or four (half 1) of its nine byte pairs (blocks 10·half ..), each
// zero-extended into its own register (w, l: of the warpgroup's thread tid). Rows past `end` load token
// `first`'s row; store_factors treats them as all-zero bytes.
__device__ __forceinline__ int scale_token(unsigned tid) {
  return 16 * int(tid / 32) + int(tid % 16);
}
__device__ __forceinline__ int scale_half(unsigned tid) {
  return int(tid % 32) / 16;
}
// Row pairs keep two byte pairs per register (the pair kernel has no register to spare).
template <int kRows>
struct ScaleRegs {
  static constexpr bool kPacked = kRows == 2;
  std::uint32_t v[kPacked ? 3 : 5];
  __device__ void set(int i, std::uint32_t pair) {
    if constexpr (kPacked) {
      v[i / 2] = i % 2 == 0 ? pair : v[i / 2] | pair << 16;
    } else {
      v[i] = pair;
    }
  }
  __device__ std::uint32_t get(int i) const {
    if constexpr (kPacked) return i % 2 == 0 ? v[i / 2] & 0xFFFFu : v[i / 2] >> 16;
    return v[i];
  }
};
template <bool kEvictFirst, int kRows, bool kGroups>
__device__ __forceinline__ ScaleRegs<kRows> load_scales(const DecodeParams& p, const KvRowMap& rows, std::int64_t base,
                                                        int t0, int first, int end, unsigned tid) {
  const int r = scale_token(tid), half = scale_half(tid);
  // unit_row's base: token r of the tile is row r of a whole tile's unit, row r % 16 of a group
  const std::int64_t row = base >= 0 ? base + (kGroups ? r % kGroupRows : r) : rows.row_or_first(t0 + r, first, end);
  const unsigned short* src = reinterpret_cast<const unsigned short*>(p.kv_scales + row * p.scale_stride) + 5 * half;
  ScaleRegs<kRows> sr;
#pragma unroll
  for (int i = 0; i < 5; ++i) sr.set(i, (half == 0 || i < 4) ? ldg_kv2<kEvictFirst>(src + i) : 0u);
  return sr;
}

// A tile's factors, straight from its scale registers: R_w = the largest E8M0 byte of the warp's
// 16 tokens (its lanes hold exactly those, two per token; ≤ 253), and each token's factors
// 2^(s − R_w + 126) as duplicated bf16 pairs in fac2[token][block] (exact powers of two: s ≤ R_w),
// a block pair per 8-byte store. Rows are 72 bytes (18 banks apart, so the 16 tokens of a half-warp
// hit 16 distinct bank pairs): the stores (2 wavefronts a warp) and k_factors' 8-byte loads (8
// tokens a warp) are conflict-free.
// Only the warp itself reads its tokens' factors (hence __syncwarp, no block barrier).
// Row pairs: `pair_end` is the pair's last key (seen by the second row only) where it is below `end`.
// If a scale of it is NaN (E8M0 0xFF), its whole row is taken as zero bytes, as rows past `end` are:
// the first row's P of 0 there then meets finite K and V (shared by both rows) rather than NaN, and
// *last_key_nan (written by that token's half-0 lane, whatever it finds) tells the epilogue to give
// the second row the reference's NaN. R_w then ignores that row, so it does not cost the other
// tokens of its warp their precision.
template <int kRows>
__device__ __forceinline__ int store_factors(std::uint32_t (&fac2)[kTile][T1::kBlocks], const ScaleRegs<kRows>& sr,
                                             int t0, int end, unsigned tid, int pair_end = 0,
                                             int* last_key_nan = nullptr) {
  const int r = scale_token(tid), half = scale_half(tid);
  std::uint32_t keep = t0 + r < end ? 0xFFFFu : 0u;
  if constexpr (kRows == 2) {
    if (pair_end < end && unsigned(pair_end - t0 - 16 * int(tid / 32)) < 16u) {  // warp-uniform: the warp holds it
      bool nan = false;
      if (t0 + r == pair_end) {
#pragma unroll
        for (int i = 0; i < 5; ++i) nan |= (sr.get(i) & 0xFFu) == 0xFFu || (sr.get(i) >> 8) == 0xFFu;
      }
      nan |= __shfl_xor_sync(0xffffffffu, int(nan), 16) != 0;  // the token's other half of its blocks
      if (nan) keep = 0u;
      if (t0 + r == pair_end && half == 0) *last_key_nan = int(nan);
    }
  }
  std::uint32_t v[5], m = 0;
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    v[i] = sr.get(i) & keep;
    m = max(m, max(v[i] & 0xFFu, v[i] >> 8));
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  const int rw = min(int(m), 253);
  // bf16 bits of 2^(s − R_w + 126), duplicated: exponent field s + 253 − R_w, times 2^7 + 2^23.
  constexpr std::uint32_t kDup = (1u << 7) | (1u << 23);
  constexpr std::uint32_t kNanDup = 0x7FC07FC0u;  // bf16 quiet NaN, duplicated
  const std::uint32_t base = std::uint32_t(253 - rw) * kDup;
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    if (half == 0 || i < 4) {
      const int b = 2 * (5 * half + i);
      // E8M0 0xFF is NaN (SPEC §2): its factor is a NaN pair, not the exponent arithmetic's Inf.
      const std::uint32_t lo = v[i] & 0xFFu, hi = v[i] >> 8;
      *reinterpret_cast<uint2*>(&fac2[r][b]) =
          make_uint2(lo == 0xFFu ? kNanDup : lo * kDup + base, hi == 0xFFu ? kNanDup : hi * kDup + base);
    }
  }
  __syncwarp();
  return rw;
}

// The row-table kernel of one q row (pages of 1 row) loads each lane's scale pairs as three aligned
// 4-byte words where load_scales takes five 2-byte loads (perf-notes v158). A scale row of 18 bytes at
// an even offset a: lane half h takes the three words from a − 2·odd + 8h (odd: a ≡ 2 mod 4), whose six
// halfwords hold its pairs from halfword odd + h on (half 0: pairs 0..4, half 1: pairs 5..8). Each load
// still touches the warp's 16 rows, but three loads instead of five: in a shuffled cache of pages of
// 1 row each of those is 16 rows in 16 places, the L1 work that costs MXFP4 most there (perf-notes
// "Where MXFP4's shuffled pages of 1 go"). Half 1 of an even row would read 2 bytes past the row in
// its third word: for the buffer's last row (p.scale_bytes) that word is a 2-byte load instead.
// The words stay as loaded until the tile's factors are stored (pairs()): work on them at the loads
// would wait there for the loads, an iteration early (perf-notes v158a: +10 %).
struct ScaleWords {
  std::uint32_t w[3];
  int start;  // the lane's first pair, in halfwords of w[0..2]: odd + half
  __device__ ScaleRegs<1> pairs(unsigned tid) const {
    std::uint32_t w0 = w[0], w1 = w[1], w2 = w[2];
    if (start >= 2) {
      w0 = w1;
      w1 = w2;
      w2 = 0;
    }
    const unsigned shift = 16u * unsigned(start & 1);
    w0 = __funnelshift_r(w0, w1, shift);
    w1 = __funnelshift_r(w1, w2, shift);
    w2 >>= shift;
    ScaleRegs<1> sr;
    sr.set(0, w0 & 0xFFFFu);
    sr.set(1, w0 >> 16);
    sr.set(2, w1 & 0xFFFFu);
    sr.set(3, w1 >> 16);
    sr.set(4, scale_half(tid) == 0 ? w2 & 0xFFFFu : 0u);
    return sr;
  }
};
template <bool kEvictFirst>
__device__ __forceinline__ ScaleWords load_scale_words(const DecodeParams& p, const KvRowMap& rows, int t0, int first,
                                                       int end, unsigned tid) {
  const int r = scale_token(tid), half = scale_half(tid), n = t0 + r;
  const int row = rows.page_of(n < end ? n : first);             // pages of 1 row (row_path): the row is the page
  const bool odd = (p.scale_stride & 2) != 0 && (row & 1) != 0;  // p.kv_scales 16-byte aligned, stride even
  const std::int64_t at = std::int64_t(row) * p.scale_stride - 2 * int(odd) + 8 * half;  // ≥ 0: odd rows are ≥ 1
  const std::uint32_t* src = reinterpret_cast<const std::uint32_t*>(p.kv_scales + at);
  ScaleWords sw;
  sw.w[0] = ldg_kv4<kEvictFirst>(src);
  sw.w[1] = ldg_kv4<kEvictFirst>(src + 1);
  if (at + 12 <= p.scale_bytes) {
    sw.w[2] = ldg_kv4<kEvictFirst>(src + 2);
  } else {
    sw.w[2] = ldg_kv2<kEvictFirst>(reinterpret_cast<const unsigned short*>(src + 2));
  }
  sw.start = int(odd) + half;
  return sw;
}

// 2^k for k ≤ 0 as a float, exact for k ≥ −126 and 0 below (a product that small is negligible
// beside the one that set A).
__device__ __forceinline__ float pow2_nonpositive(int k) {
  return __int_as_float(max(k + 127, 0) << 23);
}

// Q of q row `v` (and, with row pairs, v + 1: fetch_q's heads 16..31 of a CTA of 8 warps, rows 16..31
// of the tile) → shared memory in the wgmma K-major layout, bf16 as given, its dims permuted to the k
// order of the K register fragments: within each 32-dim block (k16 steps 2j, 2j + 1), dim
// 8c + 4i + r sits in step 2j + r / 2, slot 2c + i (r even) or 8 + 2c + i (r odd).
template <class QTile>
__device__ __forceinline__ void store_q(QTile& qt, const QRegs& q) {
#pragma unroll
  for (int j = 0; j < kQPerThread; ++j) {
    const QPiece pc = q_piece(j);
    const int h = pc.h, d0 = pc.d0;
    const int blk = d0 / 32, c = (d0 % 32) / 8;
    std::uint8_t* row = &qt.bytes[h / 8][0][h % 8][0];  // chunk k of this row: row + 128k
    const auto put = [&](int chunk, std::uint32_t pair) {
      *reinterpret_cast<std::uint32_t*>(row + chunk * 128 + 4 * c) = pair;
    };
    put(4 * blk, __byte_perm(q.x[j].x, q.x[j].z, 0x5410));      // step 2j, slots 2c, 2c+1: dims +0, +4
    put(4 * blk + 1, __byte_perm(q.x[j].x, q.x[j].z, 0x7632));  // step 2j, slots 8+2c..: dims +1, +5
    put(4 * blk + 2, __byte_perm(q.x[j].y, q.x[j].w, 0x5410));  // step 2j+1: dims +2, +6
    put(4 * blk + 3, __byte_perm(q.x[j].y, q.x[j].w, 0x7632));  // step 2j+1: dims +3, +7
  }
}

// S: the K fragments of k16 steps k0 .. k0 + 3 (blocks k0/2, k0/2 + 1; rows g / g+8 = tokens 16w + g,
// + 8 of the warpgroup's 64, w its warp in the warpgroup). Two steps, so that a batch's shared-memory loads go out
// before the batch before it is converted: k_load (an ldmatrix of 8 codes per register, the four factor pairs),
// k_convert (the fragments, and for steps < 32 the same fragments into Vt by one stmatrix per step: matrix i = a[i] =
// tokens (16w..16w+7 | +8) × slots (0..7 | 8..15), each a whole core matrix, conflict-free).
struct KLoad {
  std::uint32_t r[4];  // 8 codes of dims 32·blk' + 8c .. + 7: (t, blk), (t + 8, blk), (t, blk + 1), (t + 8, blk + 1)
  std::uint32_t f[4];  // factor pairs (dup) of the same (token, block)
};
template <int kRows>
__device__ __forceinline__ void k_codes(const Smem<kRows>& sm, int k0, KLoad& x) {
  const int warp = int(wg_tid<kRows>() / 32), lane = threadIdx.x % 32;
  const int r = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
  ldmatrix_x4(x.r, sm.kv[wg_of<kRows>()][r] + (k0 / 2 + ((lane / 16) ^ raw_swizzle(r))) * 16);  // k0 / 2 even
}
template <int kRows>
__device__ __forceinline__ void k_factors(const Smem<kRows>& sm, int k0, KLoad& x) {
  const int t = 16 * int(wg_tid<kRows>() / 32) + int(threadIdx.x % 32) / 4, blk = k0 / 2;  // blk even
  const auto& fac2 = sm.fac2[wg_of<kRows>()];
  const uint2 f0 = *reinterpret_cast<const uint2*>(&fac2[t][blk]);
  const uint2 f1 = *reinterpret_cast<const uint2*>(&fac2[t + 8][blk]);
  x.f[0] = f0.x;
  x.f[1] = f1.x;
  x.f[2] = f0.y;
  x.f[3] = f1.y;
}
// (Row pairs load a batch's factors only as it is converted: four registers fewer in flight.)
template <int kRows>
__device__ __forceinline__ KLoad k_load(const Smem<kRows>& sm, int k0) {
  KLoad x;
  k_codes(sm, k0, x);
  if constexpr (kRows == 1) k_factors(sm, k0, x);
  return x;
}
template <int kRows>
__device__ __forceinline__ void k_convert(Smem<kRows>& sm, int k0, const KLoad& x, std::uint32_t (&a)[T1::kBatch][4]) {
  const int warp = int(wg_tid<kRows>() / 32), lane = threadIdx.x % 32;
  const int group = 8 * wg_of<kRows>() + 2 * warp;  // the warp's first 8-token group of the CTA tile
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // block k0/2 + h: steps 2h (codes 0/4, 1/5) and 2h + 1 (2/6, 3/7)
    const Pairs4 q0 = e2m1_pairs(x.r[2 * h]), q1 = e2m1_pairs(x.r[2 * h + 1]);  // rows g, g + 8
    const std::uint32_t f0 = x.f[2 * h], f1 = x.f[2 * h + 1];
#pragma unroll
    for (int st = 0; st < 2; ++st) {
      std::uint32_t(&d)[4] = a[2 * h + st];
      d[0] = mul_bf16x2(q0.p[2 * st], f0);
      d[1] = mul_bf16x2(q1.p[2 * st], f1);
      d[2] = mul_bf16x2(q0.p[2 * st + 1], f0);
      d[3] = mul_bf16x2(q1.p[2 * st + 1], f1);
      const int step = k0 + 2 * h + st;
      if (step < kVSteps)
        stmatrix_x4(sm.vt[2 * step + lane / 16][group + (lane / 8) % 2][lane % 8], d[0], d[1], d[2], d[3]);
    }
  }
#pragma unroll
  for (int i = 0; i < T1::kBatch; ++i) fence_regs(a[i]);
}

// ── the kernel ──────────────────────────────────────────────────────────────────────────────────
// kShort: every item has at most one tile (launch_decode checks DecodeParams::max_item_tokens): no
// next tile's loads, stores or head start in the kernel (perf-notes v77). kRows: 1, or 2 for row
// pairs (the header). kGroups: the raw tile loads by groups of 16 rows (pages of 16 rows: LoadUnit).
// kTable: tiles after the first load through the row table (pages of 1 row: SmemWithRowTable).
template <bool kShort, bool kEvictFirst, int kRows, bool kGroups, bool kTable>
__global__ void __launch_bounds__(Traits<kRows>::kCtaThreads, Traits<kRows>::kCtasPerSm)
    decode_mxfp4_kernel(const __grid_constant__ DecodeParams p) {
  using T = Traits<kRows>;
  static_assert(!kTable || !(kShort || kGroups), "the row table serves tiles after the first, loaded whole");
  constexpr int kI = 4 * kRows;  // columns of Sᵀ / Oᵀ per thread (acc_head)
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  SmemOf<kRows, kTable>& sm = *reinterpret_cast<SmemOf<kRows, kTable>*>(smem_raw);
  launch_dependents();  // the combine grid's launch latency hides behind this kernel

  const WorkItem item = work_item(p, int(blockIdx.x));
  const int wg = wg_of<kRows>();
  const unsigned tid = wg_tid<kRows>();
  const int warp = int(tid / 32), lane = threadIdx.x % 32;  // warp: of the warpgroup
  const int g = lane / 4;                                   // accumulator row group
  const QRegs q_regs = fetch_q(p, item.request);            // in flight while the first tile's loads go out
  const KvRowMap rows(p, item);
  // Paged: the item's page table into L2 (not the kGroups kernels', which look a unit's page up a tile
  // before its loads; in the pair kernel the loop moved ptxas to spill).
  if constexpr (!kShort && !kGroups) rows.prefetch_pages(item.kv_begin, item.kv_end, int(threadIdx.x), int(blockDim.x));
  const int num_tiles = (item.kv_end - item.kv_begin + T::kCtaTile - 1) / T::kCtaTile;
  // The warpgroup's first token of tile t (its half of a row pair's tile).
  const auto wg_t0 = [&](int t) { return item.kv_begin + t * T::kCtaTile + kTile * wg; };
  const auto cta_t0 = [&](int t) { return item.kv_begin + t * T::kCtaTile; };

  // Tile 0 is loaded and stored at once; tile 1's loads go out after the barrier below, whose
  // fence would otherwise wait for them too. (An empty item reads nothing: its first row need not
  // exist.)
  RawRegs raw{}, raw_next{};
  ScaleRegs<kRows> scales{};
  // The next tile's scales: as words in the row-table kernel of one q row (ScaleWords).
  constexpr bool kWords = kTable && kRows == 1;
  std::conditional_t<kWords, ScaleWords, ScaleRegs<kRows>> scales_next{};
  // unit_page of the tile whose loads go out next (tile 1's, then in the loop tile t + 2's); with kTable
  // the page of the thread's token of the tile whose row table is stored next (threads < 64).
  int page_next = -1;
  // kTable: the row table of tile u ≥ 1, from page_next (a barrier before tile u's loads).
  const auto table_store = [&](int u) {
    if constexpr (kTable) {
      if (tid < kTile)
        sm.row_off[u % 2][wg][tid] = rows.table_offset(page_next, wg_t0(u), cta_t0(u), item.kv_end, int(tid));
    }
  };
  const auto table_page = [&](int u) {
    if (tid < kTile) page_next = rows.table_page(wg_t0(u), cta_t0(u), item.kv_end, int(tid));
  };
  // kTable: tile u ≥ 1's loads through its row table (u ≥ 2: in the loop), and the lookups of the next.
  const auto table_load = [&](int u) {
    if constexpr (kTable) {
      raw_next = load_raw_table<kEvictFirst>(p, sm.row_off[u % 2][wg], tid);
      if constexpr (kWords) {
        scales_next = load_scale_words<kEvictFirst>(p, rows, wg_t0(u), cta_t0(u), item.kv_end, tid);
      } else {
        scales_next = load_scales<kEvictFirst, kRows, false>(p, rows, -1, wg_t0(u), cta_t0(u), item.kv_end, tid);
      }
      if (u + 1 < num_tiles) table_page(u + 1);
    }
  };
  if (num_tiles > 0) {
    const std::int64_t base =
        unit_row<kGroups>(p, rows, unit_page<kGroups>(p, rows, wg_t0(0), item.kv_end, tid), wg_t0(0), item.kv_end, tid);
    if (!kShort && num_tiles > 1) {
      if constexpr (kTable) {
        table_page(1);
      } else {
        page_next = unit_page<kGroups>(p, rows, wg_t0(1), item.kv_end, tid);
      }
    }
    raw = load_raw<kEvictFirst, kGroups>(p, rows, base, wg_t0(0), cta_t0(0), item.kv_end, tid);
    scales = load_scales<kEvictFirst, kRows, kGroups>(p, rows, base, wg_t0(0), cta_t0(0), item.kv_end, tid);
  }
  store_q(sm.q, q_regs);
  int r_w = 127;       // R_w of the tile whose S is under way
  int r_w_next = 127;  // ... of the next tile (its factors stored)
  if (num_tiles > 0) {
    store_raw<kGroups>(sm.kv[wg], raw, tid);
    r_w_next = store_factors(sm.fac2[wg], scales, wg_t0(0), item.kv_end, tid, item.pair_end, &sm.last_key_nan);
  }
  if (!kShort && num_tiles > 1) table_store(1);
  fence_proxy_async();  // Q stores (generic proxy) → wgmma reads (async proxy)
  __syncthreads();      // Q and tile 0 stored (and tile 1's row table)
  if (!kShort && num_tiles > 1) {
    if constexpr (kTable) {
      table_load(1);
    } else {
      const std::int64_t base = unit_row<kGroups>(p, rows, page_next, wg_t0(1), item.kv_end, tid);
      raw_next = load_raw<kEvictFirst, kGroups>(p, rows, base, wg_t0(1), cta_t0(1), item.kv_end, tid);
      scales_next = load_scales<kEvictFirst, kRows, kGroups>(p, rows, base, wg_t0(1), cta_t0(1), item.kv_end, tid);
      if (num_tiles > 2) page_next = unit_page<kGroups>(p, rows, wg_t0(2), item.kv_end, tid);
    }
  }

  SoftmaxState<float> st[kI];
#pragma unroll
  for (int i = 0; i < kI; ++i) st[i] = SoftmaxState<float>::empty();
  float o[T::kWgMTiles][2 * kI];  // Oᵀ: m-tile mt of the warpgroup's, rows = value rows 64mt' + 16w + g (+8), cols
#pragma unroll
  for (int mt = 0; mt < T::kWgMTiles; ++mt) {
#pragma unroll
    for (int i = 0; i < 2 * kI; ++i) o[mt][i] = 0.f;
  }
  int a_run = -1;  // the largest R_w so far (−1 before the first tile)
  // Descriptors; a k step advances the start address (bits 0–13, in 16-byte units) without
  // carrying out of the field (shared memory < 256 KB).
  const std::uint64_t desc_q = desc(sm.q.bytes[0][0][0], CoreTile<T::kCols, 2 * kHeadDim>::sbo());
  const std::uint64_t desc_p = desc(sm.p.bytes[0][0][0], CoreTile<T::kCols, 2 * T::kCtaTile>::sbo());
  // MN-major: LBO steps 8 tokens; the warpgroup's first m-tile
  const std::uint64_t desc_vt = desc(sm.vt[0][0][0], kVtSbo<kRows>, 128) + (8 * kVtSbo<kRows> / 16) * T::kWgMTiles * wg;

  // Sᵀ (tokens × columns) = K · Qᵀ in register batches of 4 k16 steps, two in flight (even and odd
  // batches: two accumulator chains, each started fresh; one chain for row pairs, whose N = 32
  // accumulators would not fit twice). Batch 0 is the rope (steps 32..35: no Vt), issued at the end
  // of the iteration before, under that iteration's P·V; batches 1..8 (steps 0..31) also fill Vt,
  // once P·V of the tile before has retired.
  constexpr int kChains = kRows == 1 ? 2 : 1;
  float sacc[kChains][2 * kI];
  std::uint32_t ka[2][T::kBatch][4];
  const auto s_batch = [&](int bt, const KLoad& x, bool convert = true) {
    const int k0 = bt == 0 ? kSteps - T::kBatch : (bt - 1) * T::kBatch;
    if (convert) {
      if constexpr (kRows == 1) {
        k_convert(sm, k0, x, ka[bt % 2]);
      } else {
        KLoad xf = x;
        if (bt != 0) k_factors(sm, k0, xf);  // (the rope batch's came with its codes: head_start)
        k_convert(sm, k0, xf, ka[bt % 2]);
      }
    }
    fence_regs(sacc[bt % kChains]);
    wgmma_fence();
#pragma unroll
    for (int i = 0; i < T::kBatch; ++i) {
      const std::uint64_t b = desc_q + 16 * (k0 + i);  // + 256 bytes per k16 step
      if (bt < kChains && i == 0) {
        wgmma_rs_bf16<false>(sacc[bt % kChains], ka[bt % 2][i], b);
      } else {
        wgmma_rs_bf16(sacc[bt % kChains], ka[bt % 2][i], b);
      }
    }
    wgmma_commit();
  };
  // The head start of a tile's S (its raw tile and factors stored and visible): the rope batch's
  // codes and factors, then batch 1's loads go out before the rope batch is converted. After the
  // last tile (`real` false) only the wgmmas go out, on stale registers, and are discarded: one
  // wgmma group per iteration whatever the path. (Made conditional, the group is legal, but ptxas
  // schedules the loop worse: +2 to +4 % for long items, perf-notes v91.)
  KLoad next{};  // the loads of the next S batch
  const auto head_start = [&](bool real) {
    KLoad rope{};
    if (real) {
      k_codes(sm, kSteps - T::kBatch, rope);
      r_w = r_w_next;
      k_factors(sm, kSteps - T::kBatch, rope);
      next = k_load(sm, 0);
    }
    s_batch(0, rope, real);
  };
#pragma unroll
  for (int mt = 0; mt < T::kWgMTiles; ++mt) fence_regs(o[mt]);  // O defined before any wgmma is in flight
  if (num_tiles > 0) head_start(true);

  for (int t = 0; t < num_tiles; ++t) {
    const int t0 = wg_t0(t);
    wgmma_wait<0>();  // P·V of tile t − 1 and the rope batch of tile t retired
    // ... in every warp: Vt and P are free. (Before tile 0 they are: the prologue's barrier made Q,
    // the raw tile and the factors visible, and nothing has read Vt or P yet.)
    if (!kShort && t > 0) __syncthreads();

#pragma unroll
    for (int bt = 1; bt < T::kBatches; ++bt) {
      const KLoad x = next;
      // The next batch's loads go out before the wait (after it, ptxas sinks each ldmatrix to a few
      // instructions ahead of its first use: perf-notes v56).
      if (bt + 1 < T::kBatches) next = k_load(sm, bt * T::kBatch);
      if (bt >= 3) wgmma_wait<1>();  // batch bt − 2 retired: its registers are free
      s_batch(bt, x);
    }
    wgmma_wait<0>();
#pragma unroll
    for (int ch = 0; ch < kChains; ++ch) fence_regs(sacc[ch]);
    float s[2 * kI];
#pragma unroll
    for (int i = 0; i < 2 * kI; ++i) s[i] = kChains == 2 ? sacc[0][i] + sacc[kChains - 1][i] : sacc[0][i];
#pragma unroll
    for (int b2 = 0; b2 < 2; ++b2) {
#pragma unroll
      for (int i = 0; i < T::kBatch; ++i) fence_regs(ka[b2][i]);
    }

    // Online softmax. s[j0] / s[j0 + 2]: tokens g / g+8 of the warp, column i (acc_head; row i / 4).
    const int u0 = 16 * warp + g;                                     // the warpgroup's tokens u0 and u0 + 8
    const float ls = p.logit_scale * decode_e8m0(std::uint8_t(r_w));  // K = K' · 2^(R_w − 127)
    float x[kI][2];
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      const int j0 = acc_reg(i), end = row_end<kRows>(item, i / 4);
      x[i][0] = t0 + u0 < end ? s[j0] * ls : -INFINITY;
      x[i][1] = t0 + u0 + 8 < end ? s[j0 + 2] * ls : -INFINITY;
    }
    if (lane == 0) sm.rw[threadIdx.x / 32] = r_w;
    float f[kI];
    tile_maxima(x, st, kSlack, t == 0, sm.red, f);  // its barrier: rw complete; every warp has read the raw tile

    // The raw stage is free: tile t + 1 goes in from registers. (The scales of a warp's tokens are
    // stored and read by that warp alone.)
    if (!kShort && t + 1 < num_tiles) {
      store_raw<kGroups>(sm.kv[wg], raw_next, tid);
      if constexpr (kWords) {
        r_w_next = store_factors(sm.fac2[wg], scales_next.pairs(tid), wg_t0(t + 1), item.kv_end, tid);
      } else {
        r_w_next = store_factors(sm.fac2[wg], scales_next, wg_t0(t + 1), item.kv_end, tid, item.pair_end,
                                 &sm.last_key_nan);  // S(t) has read fac2
      }
    }
    // Tile t + 2's row table (its buffer's last reader, tile t's loads, went out two iterations ago).
    if (!kShort && t + 2 < num_tiles) table_store(t + 2);

    // A = the largest R_w seen so far (never decreasing, so O only ever shrinks by 2^(A − A'));
    // Oᵀ is kept in units of 2^(A − 127).
    int a_new = a_run;
#pragma unroll
    for (int w = 0; w < T::kCtaWarps; w += 4) {
      a_new = max(a_new, max(max(sm.rw[w], sm.rw[w + 1]), max(sm.rw[w + 2], sm.rw[w + 3])));
    }
    const float a_shift = a_run < 0 ? 1.f : pow2_nonpositive(a_run - a_new);
    a_run = a_new;
    const float pscale = pow2_nonpositive(r_w - a_new);
    float pw[kI][2];  // P·2^(R_w − A) of column acc_head(i, c) at tokens u0, u0 + 8
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      // (A row pair's first row may see no token of a tile, or of the whole item so far: shift().)
      const float m = kRows == 1 ? st[i].m : st[i].shift();
      const float p0 = SoftmaxState<float>::exp(x[i][0] - m), p1 = SoftmaxState<float>::exp(x[i][1] - m);
      st[i].add(p0 + p1);
      pw[i][0] = p0 * pscale;
      pw[i][1] = p1 * pscale;
    }
    // P in bf16 by one stmatrix.trans per 16 columns: the warp's four 8 × 8 accumulator blocks,
    // (tokens 16w..+7 | +8..+15) × (columns 16r..16r+7 | +8..+15), each transposed into its core
    // matrix of P [column][token].
    const int group = 8 * wg + 2 * warp;  // the warp's first 8-token group of the CTA tile
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = 4 * r;
      stmatrix_x4_trans(&sm.p.bytes[2 * r + lane / 16][group + (lane / 8) % 2][lane % 8][0],
                        bf16x2_rn(pw[i][0], pw[i + 1][0]), bf16x2_rn(pw[i][1], pw[i + 1][1]),
                        bf16x2_rn(pw[i + 2][0], pw[i + 3][0]), bf16x2_rn(pw[i + 2][1], pw[i + 3][1]));
    }
    // P·V accumulates straight into Oᵀ, so Oᵀ takes its rescale first — skipped when no column's max
    // moved and A stayed (every factor exactly 1: the common case).
    bool rescale = false;
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      f[i] *= a_shift;
      rescale |= f[i] != 1.f;
    }
    if (rescale) {
#pragma unroll
      for (int mt = 0; mt < T::kWgMTiles; ++mt) {
#pragma unroll
        for (int i = 0; i < 2 * kI; ++i) o[mt][i] *= f[(i / 4) * 2 + (i % 2)];
      }
    }
    fence_proxy_async();  // Vt and P (generic stores) → wgmma reads
    __syncthreads();      // P, Vt and tile t + 1 complete

    // Oᵀ += Vt · Pᵀ: the warpgroup's m-tiles × the tile's k16 steps, both operands in shared memory.
#pragma unroll
    for (int mt = 0; mt < T::kWgMTiles; ++mt) fence_regs(o[mt]);
    wgmma_fence();
#pragma unroll
    for (int mt = 0; mt < T::kWgMTiles; ++mt) {
#pragma unroll
      for (int kk = 0; kk < T::kPvSteps; ++kk) {
        // m-tile: 8 value-row groups (8 × kVtSbo bytes); k step: two token groups (256 B).
        wgmma_ss_bf16_mn(o[mt], desc_vt + (8 * kVtSbo<kRows> / 16) * mt + 16 * kk, desc_p + 16 * kk);
      }
    }
    wgmma_commit();
    // Tile t + 2's loads go out here, after the P barrier's fence (which would wait for them).
    if (!kShort && t + 2 < num_tiles) {
      if constexpr (kTable) {
        table_load(t + 2);
      } else {
        const std::int64_t base = unit_row<kGroups>(p, rows, page_next, wg_t0(t + 2), item.kv_end, tid);
        raw_next = load_raw<kEvictFirst, kGroups>(p, rows, base, wg_t0(t + 2), cta_t0(t + 2), item.kv_end, tid);
        scales_next =
            load_scales<kEvictFirst, kRows, kGroups>(p, rows, base, wg_t0(t + 2), cta_t0(t + 2), item.kv_end, tid);
        if (t + 3 < num_tiles) page_next = unit_page<kGroups>(p, rows, wg_t0(t + 3), item.kv_end, tid);  // a tile ahead
      }
    }
    // Under P·V: the next tile's rope batch of S (it touches neither Vt, P nor O). The short kernel
    // has no next tile, and no group on stale registers for the epilogue's wait.
    if (!kShort) head_start(t + 1 < num_tiles);
  }
  wgmma_wait<0>();
#pragma unroll
  for (int mt = 0; mt < T::kWgMTiles; ++mt) fence_regs(o[mt]);

  if constexpr (kRows == 2) {
    if (item.pair_end < item.kv_end && num_tiles > 0 &&
        sm.last_key_nan != 0) {  // (read after the tile loop's barriers)
#pragma unroll
      for (int i = kI / 2; i < kI; ++i) {  // the second row: its logit at that key is NaN in the reference
        st[i].l = __int_as_float(0x7FC00000);
#pragma unroll
        for (int mt = 0; mt < T::kWgMTiles; ++mt) {
          o[mt][acc_reg(i)] = __int_as_float(0x7FC00000);
          o[mt][acc_reg(i) + 2] = __int_as_float(0x7FC00000);
        }
      }
    }
  }
  // Oᵀ is in units of 2^(A − 127); value rows map to dims by value_row_dim.
  const float o_scale = a_run < 0 ? 1.f : decode_e8m0(std::uint8_t(a_run));
  // Cluster mode (one row per item): the exchange is Vt. With row pairs, Vt's start holds write_output's omax.
  // The partial's fp16 scale from the |O| max (a bound from the scales could sit far above the
  // values when the softmax favours tokens of small scales).
  finish_item<false, kRows>(p, item, *reinterpret_cast<ClusterExchange*>(sm.vt), sm.red, st, o, o_scale, 0.f,
                            [&](int mt) { return value_row_dim(64 * (mt + T::kWgMTiles * wg) + 16 * warp + g); });
}

}  // namespace

// Page tables of 1 row (`table`) take the row-table kernels, except for one-tile items, whose kernel
// loads no tile after its first.
DecodeKernel decode_mxfp4_kernel_info(bool short_items, bool evict_first, bool row_pairs, bool groups, bool table) {
  void (*const entry[2][2][2][2])(DecodeParams) = {
      {{{decode_mxfp4_kernel<false, false, 1, false, false>, decode_mxfp4_kernel<false, true, 1, false, false>},
        {decode_mxfp4_kernel<true, false, 1, false, false>, decode_mxfp4_kernel<true, true, 1, false, false>}},
       {{decode_mxfp4_kernel<false, false, 2, false, false>, decode_mxfp4_kernel<false, true, 2, false, false>},
        {decode_mxfp4_kernel<true, false, 2, false, false>, decode_mxfp4_kernel<true, true, 2, false, false>}}},
      {{{decode_mxfp4_kernel<false, false, 1, true, false>, decode_mxfp4_kernel<false, true, 1, true, false>},
        {decode_mxfp4_kernel<true, false, 1, true, false>, decode_mxfp4_kernel<true, true, 1, true, false>}},
       {{decode_mxfp4_kernel<false, false, 2, true, false>, decode_mxfp4_kernel<false, true, 2, true, false>},
        {decode_mxfp4_kernel<true, false, 2, true, false>, decode_mxfp4_kernel<true, true, 2, true, false>}}}};
  void (*const table_entry[2][2])(DecodeParams) = {
      {decode_mxfp4_kernel<false, false, 1, false, true>, decode_mxfp4_kernel<false, true, 1, false, true>},
      {decode_mxfp4_kernel<false, false, 2, false, true>, decode_mxfp4_kernel<false, true, 2, false, true>}};
  const bool use_table = table && !short_items && !groups;
  const auto info = [&]<int kRows>() -> DecodeKernel {
    return {use_table ? table_entry[kRows - 1][evict_first] : entry[groups][kRows - 1][short_items][evict_first],
            Traits<kRows>::kCtaThreads, use_table ? sizeof(SmemOf<kRows, true>) : sizeof(SmemOf<kRows, false>),
            Traits<kRows>::kCtasPerSm, kPartialsF16};
  };
  return row_pairs ? info.template operator()<2>() : info.template operator()<1>();
}

}  // namespace mla::sm90
