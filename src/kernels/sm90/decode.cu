// sm90 MLA decode from bf16 KV (fp8: decode_fp8.cu, MXFP4: decode_mxfp4.cu), and the per-format dispatch.
//
// Grid: one CTA per work item (q row v = b·s_q + i, KV range [kv_begin, kv_end), the range already
// cut to query token i's causal length), or, with more short items than one wave, one wave of CTAs
// each walking a chain of items (item c, then WorkItem::next, …); 8 warps. One CTA owns all 16
// heads of its q row and streams its KV range once, in tiles of 64 tokens:
//
//   global ──cp.async 16 B──▶ bf16 stage (3 stages deep; rows of 1152 B, 16-byte chunks XOR-swizzled
//                             by row % 8 so that ldmatrix rows hit distinct banks; Q rides in stage 2
//                             until its fragments are in registers)
//               the copies of tile t + 2 are issued in three parts among tile t's S steps; every
//               kernel comes in two instantiations, the KV copies under an L2 evict-first policy
//               or without one (DecodeParams::kv_evict_first; fp8 and MXFP4 alike)
//   or, in the TMA kernels (plans of long items or chains, Plan::kv_tma; general and walking):
//   global ──one TMA per whole tile──▶ bf16 stage in the box layout (bf16_stage.h: 9 boxes of 64 rows
//                             × 128 B, the TMA's 128-byte swizzle = the same XOR by row % 8), issued
//                             by thread 0 at the top of tile t for tile t + 2; stages complete on
//                             mbarriers; partial tiles and pages of < 64 rows go row by row
//   S  = Q·Kᵀ   mma.sync m16n8k16, M = the 16 heads exactly; warp (tg, kh) = (w % 4, w / 4)
//               owns tokens [16tg, 16tg+16) × dims [288kh, 288kh+288), its Q fragments held
//               in registers for the whole item; the two dim halves meet in shared memory
//   softmax     half-warp per head (SoftmaxState), P → the tile's rope chunks (dims 512..575, dead
//               once S is done)
//   O += P·V    mma.sync m16n8k16: warp w owns value dims [64w, 64w+64), V = the same rows
//
// No padding rows: M = 16 = the heads. Finished items write bf16 O and LSE; split items write
// normalised fp32 partials that combine.cu merges by LSE (fp32: fp16 measured slower here, perf-notes v67).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <span>

#include "kernels/common/softmax_state.h"
#include "kernels/sm90/bf16_stage.h"
#include "kernels/sm90/cluster_merge.h"
#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/launch.h"
#include "kernels/sm90/primitives.h"
#include "kernels/sm90/wgmma.h"
#include "mla/mla.h"

namespace mla::sm90 {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
// Split partials in fp32: fp16 with a scale (partial.h) measured slower here, with a scale per head
// (perf-notes v67) and per 64 value dims (v71).
constexpr bool kPartialsF16 = false;

constexpr int kTileTokens = 64;       // tokens per tile
constexpr int kPitch = kHeadDim * 2;  // bytes per bf16 row in shared memory (chunks swizzled, no padding)

constexpr int kHalfDims = kHeadDim / 2;  // dims per S warp
constexpr int kKSteps = kHalfDims / 16;  // k16 steps per S warp (18)
static_assert(kWarps == 8, "S warps: 4 token groups × 2 dim halves");
static_assert(kNumHeads == 2 * kWarps, "softmax: a half-warp per head");
static_assert(kValueDim == kWarps * 64, "each warp owns 64 value dims in O = P·V");
static_assert(kPitch % 128 == 0, "rows are whole 128-byte lines: the chunk swizzle spreads them over the banks");

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile row: chunk ^ (row % 8), so
// that the 8 rows of an ldmatrix matrix (same logical chunk) land in 8 distinct bank groups.
__device__ __forceinline__ int swz(int row, int chunk) {
  return (chunk ^ (row & 7)) * 16;
}

template <KvFormat F>
struct Traits;

template <>
struct Traits<KvFormat::bf16> {
  static constexpr int kTile = kTileTokens;
  static constexpr int kStages = 3;
  static constexpr int kRawPitch = kPitch;  // the stage is the bf16 tile
  static constexpr int kRowBytes = kHeadDim * 2;
};
// Work split of one tile of T tokens over the 8 warps.
template <int kTile>
struct TileShape {
  static constexpr int kTokensS = kTile / 4;           // tokens per S warp (token group)
  static constexpr int kNTiles = kTokensS / 8;         // n8 tiles per S warp
  static constexpr int kTokensLane = kTile / 16;       // softmax: tokens per lane (a half-warp per head)
  static constexpr int kRowsPerWarp = kTile / kWarps;  // rows each warp copies
  static constexpr int kSPitch = kTile + 8;            // floats per S-partial row (conflict-free float2 stores)
  static_assert(kTokensS % 16 == 0 && kTokensLane % 4 == 0, "tile must be a multiple of 64 tokens");
  static_assert(kSPitch % 32 == 8, "S-partial rows must rotate banks (conflict-free float2 stores)");
};

template <KvFormat F>
struct alignas(128) Smem {
  using T = Traits<F>;
  using Sh = TileShape<T::kTile>;
  static constexpr int kTile = T::kTile;
  alignas(128) std::uint8_t raw[T::kStages][kTile][T::kRawPitch];  // KV as stored (stage 2 first holds Q)
  alignas(16) float s_part[2][kNumHeads][Sh::kSPitch];             // S partials of the two dim halves
  float factor[kNumHeads];                                         // this tile's rescale of O per head
  float inv_l[kNumHeads];                                          // final 1/l (× value scale) per head
  float cluster_lse[kNumHeads];    // cluster mode: this CTA's partial LSE, written before stage 0 is free
  std::uint64_t full[T::kStages];  // TMA kernel: stage s holds tile j (j ≡ s mod 3): phase j / kStages
};
// The general and walking kernels of pages of 1 row (kTable) add a row table (KvRowMap::table_offset):
// the byte offsets of the 64 rows of the tile whose copies go out next, two buffers. The TMA kernel
// aligns its stages to the 128-byte swizzle's 1,024-byte period at run time.
template <KvFormat F, bool kTable>
using SmemOf = SmemWithRowTable<Smem<F>, 1, kTileTokens, kTable>;
template <bool kTma, bool kTable = false>
constexpr std::size_t kSmemBytes = sizeof(SmemOf<KvFormat::bf16, kTable>) + (kTma ? kSwizzleAlign : 0);
static_assert(kSmemBytes<true> <= 227 * 1024 && kSmemBytes<false, true> <= 227 * 1024,
              "bf16 shared memory over the 227 KB limit");
static_assert(sizeof(Smem<KvFormat::bf16>::raw[0]) == bf16_stage::kBytes && kPitch == bf16_stage::kRowBytes &&
                  Traits<KvFormat::bf16>::kTile == bf16_stage::kRows,
              "bf16_stage.h describes this stage");
static_assert(sizeof(Smem<KvFormat::bf16>::raw[0]) >= sizeof(ClusterExchange),
              "cluster mode: the exchange fits stage 0");
// P (bf16, 16 heads × 64 tokens) lives in the tile's own stage: row h's last 128 bytes hold the
// rope dims 512..575, dead once S is done (P·V reads dims < 512); byte `b` of P row h, swizzled.
constexpr int kPChunk0 = kValueDim * 2 / 16;  // first rope chunk (64)
static_assert(kPChunk0 + Traits<KvFormat::bf16>::kTile * 2 / 16 == kPitch / 16, "P rows fill the rope chunks");
__device__ __forceinline__ std::uint8_t* p_at(std::uint8_t (*kv)[kPitch], int h, int b) {
  return kv[h] + swz(h, kPChunk0 + b / 16) + b % 16;
}
// The same byte in the TMA kernel's box layout (bf16_stage.h, namespace boxes): P is box 8.
__device__ __forceinline__ std::uint8_t* p_at_boxes(std::uint8_t (*kv)[kPitch], int h, int b) {
  return &kv[0][0] + bf16_stage::boxes::kv_offset(h, kPChunk0 + b / 16) + b % 16;
}
template <bool kTma>
__device__ __forceinline__ std::uint8_t* p_byte(std::uint8_t (*kv)[kPitch], int h, int b) {
  return kTma ? p_at_boxes(kv, h, b) : p_at(kv, h, b);
}

// D += A·B, m16n8k16, bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// kEvictFirst: the KV copies go under the L2 evict-first policy (DecodeParams::kv_evict_first), else
// without a policy. kTma: the TMA kernel's decoder (stages in the box layout; copy_tile_tma).
// kSmallPages: the decoder of a cache of pages of 1 or 16 rows (sources()).
template <KvFormat F, bool kEvictFirst, bool kTma = false, bool kSmallPages = false>
struct Decoder {
  using T = Traits<F>;
  using Sh = TileShape<T::kTile>;
  static_assert(!(kTma && kSmallPages), "no tensor map describes a cache of pages under 64 rows");
  const DecodeParams& p;
  KvRowMap physical_row;

  // The async copy of tokens [t0, t0 + kTile) ∩ [.., end) into stage `s`, rows past `end` zero-filled
  // (they point at token t0, which exists, and copy 0 bytes). Warp w copies rows w, w+8, …; lanes
  // stride over the row's 16-byte chunks. sources() resolves the rows (paged: the page-table loads
  // go out here, long before the copies need them); copy_rows<i0, i1>() issues rows [i0, i1), each
  // copy its row's base plus a constant.
  struct Sources {
    const std::uint8_t* src[Sh::kRowsPerWarp];  // this lane's first byte of each row
    unsigned valid;                             // bit i: row i holds a token (< end)
  };
  __device__ Sources sources(int t0, int end) const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    Sources ts;
    ts.valid = 0;
    // A whole tile in one page: one page-table load, not one per row (a contiguous cache's rows need none).
    if (!physical_row.contiguous() && t0 + T::kTile <= end && physical_row.one_run(t0, T::kTile)) {
      const std::uint8_t* base = p.kv + (physical_row(t0) + warp) * p.kv_row_stride + lane * 16;
#pragma unroll
      for (int i = 0; i < Sh::kRowsPerWarp; ++i) ts.src[i] = base + std::int64_t(i * kWarps) * p.kv_row_stride;
      ts.valid = (1u << Sh::kRowsPerWarp) - 1;
      return ts;
    }
    // Pages of 16 rows (a kernel of their own, so that the others' code stays as it was: perf-notes
    // v145b, v146), a whole tile on their boundaries: rows 16k + w and 16k + w + 8 (i = 2k, 2k + 1) share
    // a page, four page-table loads rather than eight (pages of 1 row: row by row, below).
    if constexpr (kSmallPages) {
      if (t0 + T::kTile <= end && (t0 & 15) == 0 && physical_row.one_run(t0, 16)) {
        static_assert(kWarps == 8 && Sh::kRowsPerWarp == 8, "rows 16k + w and 16k + w + 8 are rows 2k and 2k + 1");
#pragma unroll
        for (int k = 0; k < Sh::kRowsPerWarp / 2; ++k) {
          ts.src[2 * k] = p.kv + (physical_row(t0 + 16 * k) + warp) * p.kv_row_stride + lane * 16;
          ts.src[2 * k + 1] = ts.src[2 * k] + std::int64_t(kWarps) * p.kv_row_stride;
        }
        ts.valid = (1u << Sh::kRowsPerWarp) - 1;
        return ts;
      }
    }
#pragma unroll
    for (int i = 0; i < Sh::kRowsPerWarp; ++i) {
      const int n = t0 + warp + i * kWarps;
      ts.valid |= (n < end ? 1u : 0u) << i;
      ts.src[i] = p.kv + physical_row.row_or_first(n, t0, end) * p.kv_row_stride + lane * 16;
    }
    return ts;
  }
  // sources() of the row-table kernels (pages of 1 row): row r's byte offset into p.kv from the table
  // the kernel filled a tile ahead (row_off[r], KvRowMap::table_offset: rows past `end` hold token
  // t0's), no page-table load.
  __device__ Sources sources_from_table(int t0, int end, const std::int64_t* row_off) const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    Sources ts;
    ts.valid = 0;
#pragma unroll
    for (int i = 0; i < Sh::kRowsPerWarp; ++i) {
      ts.valid |= (t0 + warp + i * kWarps < end ? 1u : 0u) << i;
      ts.src[i] = p.kv + row_off[warp + i * kWarps] + lane * 16;
    }
    return ts;
  }
  template <int kRow0 = 0, int kRow1 = Sh::kRowsPerWarp>
  __device__ void copy_rows(Smem<F>& sm, int s, const Sources& ts) const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int kChunks = T::kRowBytes / 16;
#pragma unroll
    for (int i = kRow0; i < kRow1; ++i) {
      const int r = warp + i * kWarps;
      const int bytes = (ts.valid >> i) & 1u ? 16 : 0;
#pragma unroll
      for (int q = 0; q < (kChunks + 31) / 32; ++q) {
        if (lane + 32 * q < kChunks) {
          if constexpr (kTma) {  // no policy: ptxas 13.0 can mis-encode it next to TMA code (primitives.h)
            cp_async16(&sm.raw[s][0][0] + bf16_stage::boxes::kv_offset(r, lane + 32 * q), ts.src[i] + 512 * q, bytes);
          } else {
            cp_async16_kv<kEvictFirst>(&sm.raw[s][r][swz(r, lane + 32 * q)], ts.src[i] + 512 * q, bytes);
          }
        }
      }
    }
  }
  __device__ void load_tile(Smem<F>& sm, int s, int t0, int end) const {
    copy_rows(sm, s, sources(t0, end));
  }
  // The TMA kernel's copy of the same tile, counted on stage s's barrier (kThreads arrivals per
  // phase): a whole tile of a contiguous cache or of one page of 64 rows (tiles start at multiples
  // of 64 tokens: work items are cut on tile boundaries) by one tensor-map copy of thread 0, which
  // announces the tile's bytes (DecodeParams::kv_map: 9 boxes of 64 rows × 128 bytes); any other
  // tile row by row, each thread arriving once its copies landed.
  __device__ void copy_tile_tma(Smem<F>& sm, int s, int t0, int end) const {
    static_assert(kTma, "the TMA kernel's copy");
    if (t0 + T::kTile <= end && physical_row.one_run(t0, T::kTile)) {
      if (threadIdx.x == 0) {
        const int row = int(physical_row(t0));  // fits: run() takes the TMA only for rows ≤ INT32_MAX
        tma_tile_copy<kEvictFirst>(sm.raw[s], &p.kv_map, row, bf16_stage::kBytes, &sm.full[s]);  // all 9 boxes
      } else {
        mbar_arrive(&sm.full[s]);
      }
    } else {
      copy_rows(sm, s, sources(t0, end));
      cp_async_arrive(&sm.full[s]);
    }
  }
  // A whole tile as the kernel copies it outside the loop's split copies: copy_tile_tma in the TMA
  // kernel (completing on stage s's barrier), else load_tile (the caller commits the group).
  __device__ void copy_tile(Smem<F>& sm, int s, int t0, int end) const {
    if constexpr (kTma) {
      copy_tile_tma(sm, s, t0, end);
    } else {
      load_tile(sm, s, t0, end);
    }
  }
};

// The row base (KvRowMap::base()) of item w's request.
__device__ __forceinline__ std::int64_t row_base_of(const DecodeParams& p, const WorkItem& w) {
  return KvRowMap(p, w).base();
}
// The decoder of a request whose row base is `base` (row_base_of).
template <KvFormat F, bool kEvictFirst, bool kTma = false, bool kSmallPages = false>
__device__ __forceinline__ Decoder<F, kEvictFirst, kTma, kSmallPages> decoder_at(const DecodeParams& p,
                                                                                 std::int64_t base) {
  return {p, KvRowMap(p, KvRowMap::KnownBase{}, base)};
}
__device__ __forceinline__ int tiles_of(const WorkItem& w) {
  return (w.kv_end - w.kv_begin + kTileTokens - 1) / kTileTokens;
}

// Q of q row v (bf16 [16 × 576]) into a stage's first 16 rows, swizzled like a tile: by cp.async
// (the first item, with its first tile's group) or from registers loaded earlier (later items).
__device__ __forceinline__ const uint4* q_chunks(const DecodeParams& p, int v) {
  return reinterpret_cast<const uint4*>(p.q + std::int64_t(v) * kNumHeads * kHeadDim);
}
constexpr int kQChunks = kNumHeads * kHeadDim * 2 / 16;                  // 16-byte chunks of Q (1152)
constexpr int kQChunksPerThread = (kQChunks + kThreads - 1) / kThreads;  // 5
__device__ __forceinline__ std::uint8_t* q_chunk_at(std::uint8_t (*stage)[kPitch], int i) {
  const int h = i / (kHeadDim * 2 / 16), ch = i % (kHeadDim * 2 / 16);
  return stage[h] + swz(h, ch);
}
// A fragments of Q for the warp's 288 dims from the stage holding it.
__device__ __forceinline__ void q_fragments(std::uint32_t (&qa)[kKSteps][4], std::uint8_t (*stage)[kPitch], int kh,
                                            int lane) {
#pragma unroll
  for (int k = 0; k < kKSteps; ++k) {
    const int d0 = kh * kHalfDims + k * 16;
    ldmatrix_x4(qa[k], stage[lane % 16] + swz(lane % 16, (d0 + (lane / 16) * 8) / 8));
  }
}

// kWalk: each CTA walks item blockIdx.x, then its chain of WorkItem::next (more items than CTAs);
// without it each CTA takes one item and the walking code compiles away.
// kOneTile: one item per CTA, of at most one tile (launch_decode checks
// DecodeParams::max_item_tokens): no copies after the prologue's (perf-notes v78).
// kTma: whole tiles by TMA into the box layout (Plan::kv_tma, perf-notes v115, v123; launched only
// with DecodeParams::kv_map), one item per CTA or walking: the stages complete on mbarriers instead
// of cp.async groups (phase j / kStages over the CTA's whole tile sequence), and the next tile's
// copy — the next item's first tiles too — goes out at the top of the tile. Q still arrives by
// cp.async. kSmallPages: the kernel of caches of pages of 1 or 16 rows (Decoder; page-table lines a
// tile ahead into L1, perf-notes v147). kTable (with kSmallPages, the general and walking kernels of
// pages of 1 row): threads 0..63 look the rows of the tile that tile j + 1 copies (this item's t + 3, or
// walking, the next item's) up at the top of tile j, one token each, and store their byte offsets into
// the row table (SmemOf) after S; tile j + 1 reads its copies' rows from there (sources_from_table)
// instead of eight page-table loads per thread (perf-notes v153, v156).
template <KvFormat F, bool kWalk, bool kOneTile, bool kEvictFirst, bool kTma = false, bool kSmallPages = false,
          bool kTable = false>
__global__ void __launch_bounds__(kThreads, 1) decode_kernel(const __grid_constant__ DecodeParams p) {
  using T = Traits<F>;
  using Sh = TileShape<T::kTile>;
  constexpr int kTile = T::kTile;
  static_assert(kTile == kTileTokens, "the tile cursor counts tiles of kTileTokens");
  static_assert(T::kStages == 3 && kNumHeads <= kTile,
                "an item's Q rides in the stage of the tile before its first (stage 2 for the CTA's first item)");
  static_assert(!(kTma && kOneTile), "the TMA kernels are the general and the walking one");
  static_assert(!kTable || (kSmallPages && !kOneTile), "the row table: the general and walking kernels of small pages");
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  SmemOf<F, kTable>& sm = *reinterpret_cast<SmemOf<F, kTable>*>(smem_raw + (kTma ? swizzle_align_bytes(smem_raw) : 0));

  launch_dependents();  // the combine grid's launch latency hides behind this kernel
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;    // mma fragment row group / column pair
  const int tg = warp % 4, kh = warp / 4;  // S = Q·Kᵀ: tokens [tg·kTokensS, +kTokensS), dims [288kh, +288)
  const int sh = 2 * warp + lane / 16, si = lane % 16;  // softmax: head sh, tokens [si·kTokensLane, +kTokensLane)

  // item.request is a q row v = b · s_q + i (its KV range already cut to token i's causal length).
  WorkItem item = kWalk ? p.items[blockIdx.x] : work_item(p, int(blockIdx.x));  // (walking lists are long)
  std::int64_t base = row_base_of(p, item);                                     // rows of the item's request
  if constexpr (kTma) {
    if (threadIdx.x < T::kStages) mbar_init(&sm.full[threadIdx.x], kThreads);
    mbar_init_fence();
    __syncthreads();
  }
  // Q of the first item (16 rows × 1152 bytes) joins the first tile's copy group, in stage 2.
  {
    const uint4* q = q_chunks(p, item.request);
    for (int i = threadIdx.x; i < kQChunks; i += kThreads) cp_async16(q_chunk_at(sm.raw[2], i), q + i, 16);
  }
  // Tiles 0 and 1 of the first item; later items' first two tiles go out under the previous item's
  // last two (`issued` below), or, where that item was too short, when the item starts.
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if ((!kOneTile || s == 0) && s < tiles_of(item)) {
      decoder_at<F, kEvictFirst, kTma, kSmallPages>(p, base).copy_tile(sm, s, item.kv_begin + s * kTile, item.kv_end);
    }
    cp_async_commit();
  }
  // Paged: the first item's page table into L2 (a walking CTA's later items': as each item starts).
  if constexpr (!kOneTile)
    KvRowMap(p, KvRowMap::KnownBase{}, base).prefetch_pages(item.kv_begin, item.kv_end, threadIdx.x, kThreads);
  // The row table of tile 2 (read by tile 0's copies), looked up directly; tile 3's page-table lines
  // into L1 for tile 0's lookups. Walking: table_ok says whether the table holds the rows of the copy
  // that tile j issues (a first item of ≤ 2 tiles: tile 0 copies the next item's, not looked up yet).
  [[maybe_unused]] bool table_ok = kWalk && tiles_of(item) > 2;
  if constexpr (kTable) {
    const KvRowMap rows(p, KvRowMap::KnownBase{}, base);
    const int t2 = item.kv_begin + 2 * kTile, i = threadIdx.x;
    if (i < kTile && t2 < item.kv_end) {
      sm.row_off[0][0][i] = rows.table_offset(rows.table_page(t2, t2, item.kv_end, i), t2, t2, item.kv_end, i);
    }
    if (warp == 0) rows.prefetch_table_l1(t2 + kTile, kTile, item.kv_end, lane);
  }
  cp_async_wait<T::kStages - 2>();
  __syncthreads();  // Q (and, but for the TMA kernel, tile 0) landed

  const float logit_scale = p.logit_scale;
  std::uint32_t qa[kKSteps][4];  // A fragments of Q for this warp's 288 dims (the current item's)
  q_fragments(qa, sm.raw[2], kh, lane);
  // The TMA kernel's ldmatrix offsets in the box layout (bf16_stage.h): S's for k steps ≡ m mod 4,
  // P·V's for n-tile pair jj; the rest of each address is a constant of the unrolled loops.
  int s_off[4], v_off[4];
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    s_off[m] = kTma ? bf16_stage::boxes::s_base(lane, tg, kh, m) : 0;
    v_off[m] = kTma ? bf16_stage::boxes::v_base(lane, warp, m) : 0;
  }
  int j = 0;           // tile index in the CTA's sequence: stage j % kStages
  bool drain = false;  // the item's first tiles went out out of order: wait for every copy group

  for (;;) {
    const int num_tiles = tiles_of(item);
    const bool has_next = kWalk && item.next >= 0;  // this CTA's items: blockIdx.x, then the chain of `next`
    const WorkItem next = has_next ? p.items[item.next] : WorkItem{};
    const int next_tiles = has_next ? tiles_of(next) : 0;
    const std::int64_t next_base = has_next ? row_base_of(p, next) : 0;  // used from tile num_tiles − 2 on
    if (has_next)
      KvRowMap(p, KvRowMap::KnownBase{}, next_base).prefetch_pages(next.kv_begin, next.kv_end, threadIdx.x, kThreads);
    unsigned issued = 0;                                    // bit k: the next item's tile k went out under this item
    SoftmaxState<float> st = SoftmaxState<float>::empty();  // head sh
    float o[8][4];
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) o[jj][0] = o[jj][1] = o[jj][2] = o[jj][3] = 0.f;

    for (int t = 0; t < num_tiles; ++t, ++j) {
      const int stage = j % T::kStages;
      const int t0 = item.kv_begin + t * kTile;
      if constexpr (kTma) {
        mbar_wait(&sm.full[stage], (j / T::kStages) & 1);
      } else if (kWalk && drain) {
        cp_async_wait<0>();
        drain = false;
      } else {
        cp_async_wait<T::kStages - 2>();
      }
      __syncthreads();  // tile j landed for every thread; iteration j−1 is finished everywhere

      // Tile t + 2 of this item, or past its end tile t + 2 − num_tiles of the next item.
      const int ahead = t + T::kStages - 1, k_next = ahead - num_tiles;
      const bool own = ahead < num_tiles;
      const bool load_next = !kOneTile && (own || (kWalk && k_next < next_tiles));
      if (kWalk && !own && load_next) issued |= 1u << k_next;
      const bool mine = !kWalk || own;  // the copy's tile: this item's tile `ahead`, or the next item's k_next
      const Decoder<F, kEvictFirst, kTma, kSmallPages> dec =
          decoder_at<F, kEvictFirst, kTma, kSmallPages>(p, mine ? base : next_base);
      typename Decoder<F, kEvictFirst, kTma, kSmallPages>::Sources next_src{};
      const int next_stage = (j + T::kStages - 1) % T::kStages;
      if (load_next) {
        const int copy_t0 = mine ? item.kv_begin + ahead * kTile : next.kv_begin + k_next * kTile;
        const int copy_end = mine ? item.kv_end : next.kv_end;
        if constexpr (kTma) {  // the whole copy now: one instruction of thread 0 for a whole tile
          dec.copy_tile_tma(sm, next_stage, copy_t0, copy_end);
        } else if constexpr (kTable) {  // (tile j − 1 filled buffer j % 2 with this copy's rows)
          if (!kWalk || table_ok) {
            next_src = dec.sources_from_table(copy_t0, copy_end, sm.row_off[(kWalk ? j : t) & 1][0]);
          } else {
            next_src = dec.sources(copy_t0, copy_end);
          }
        } else {  // the sources now, the copies below (after S's first steps)
          next_src = dec.sources(copy_t0, copy_end);
        }
      }
      // Small pages: the page-table lines of the tile after into L1 (this item's; the next item's
      // first tiles look theirs up from L2). Not in the other kernels: the branch alone cost their
      // contiguous calls 0.8 % at 256×8192 (perf-notes v147). The row table: tile t + 3's pages now
      // (stored after S), tile t + 4's lines into L1.
      constexpr int kLookAhead = kTable ? 1 : 0;
      if (kSmallPages && !kOneTile && warp == 0 && ahead + 1 + kLookAhead < num_tiles) {
        KvRowMap(p, KvRowMap::KnownBase{}, base)
            .prefetch_table_l1(item.kv_begin + (ahead + 1 + kLookAhead) * kTile, kTile, item.kv_end, lane);
      }
      // kTable: the tile that tile j + 1 copies — this item's tile t + 3, or (walking) the next item's
      // tile t + 3 − num_tiles; none when that is the item after next, not known yet (the rule as
      // bf16_stage::table::fill_of, whose walks the unit tests check).
      int table_t0 = item.kv_begin + (ahead + 1) * kTile, table_end = item.kv_end;
      std::int64_t table_base = base;
      bool table_next = table_t0 < item.kv_end;  // a fill for tile j + 1
      if constexpr (kWalk && kTable) {
        const int kn = ahead + 1 - num_tiles;
        if (!table_next && kn < next_tiles) {
          table_t0 = next.kv_begin + kn * kTile, table_end = next.kv_end, table_base = next_base;
          table_next = true;
        }
      }
      const bool table_fill = kTable && threadIdx.x < kTile && table_next;
      const int table_page =
          table_fill
              ? KvRowMap(p, KvRowMap::KnownBase{}, table_base).table_page(table_t0, table_t0, table_end, threadIdx.x)
              : 0;
      std::uint8_t(*kv)[kPitch] = sm.raw[stage];  // the bf16 tile (its rope chunks then hold P)

      // S partial over this warp's dims for tokens [16tg, 16tg+16): four independent chains.
      {
        constexpr int kChains = 4;  // independent accumulator chains, rotating over the k steps
        float acc[kChains][Sh::kNTiles][4] = {};
#pragma unroll
        for (int k = 0; k < kKSteps; ++k) {
#pragma unroll
          for (int np = 0; np < Sh::kNTiles / 2; ++np) {
            std::uint32_t b[4];
            if constexpr (kTma) {
              ldmatrix_x4(b, &kv[0][0] + bf16_stage::boxes::kBoxStride * (k / 4) + bf16_stage::boxes::k16Rows * np +
                                 s_off[k % 4]);
            } else {
              const int r = Sh::kTokensS * tg + 16 * np + lane % 8 + (lane / 16) * 8;
              ldmatrix_x4(b, &kv[r][swz(r, (kh * kHalfDims + ((lane / 8) % 2) * 8) / 8 + 2 * k)]);
            }
            mma_bf16(acc[k % kChains][2 * np], qa[k], b[0], b[1]);
            mma_bf16(acc[k % kChains][2 * np + 1], qa[k], b[2], b[3]);
          }
          // Tile j + 2's copies go out in three parts among the S steps (behind their ldmatrix).
          static_assert(kKSteps > 12 && Sh::kRowsPerWarp == 8, "the copy split: rows 0-2, 3-5, 6-7 at k = 0, 6, 12");
          if (!kTma && load_next) {
            if (k == 0) dec.template copy_rows<0, 3>(sm, next_stage, next_src);
            if (k == 6) dec.template copy_rows<3, 6>(sm, next_stage, next_src);
            if (k == 12) dec.template copy_rows<6, 8>(sm, next_stage, next_src);
          }
        }
#pragma unroll
        for (int jj = 0; jj < Sh::kNTiles; ++jj) {
          const int col = Sh::kTokensS * tg + 8 * jj + 2 * c;
          float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
          for (int ch = 0; ch < kChains; ++ch) {
#pragma unroll
            for (int e = 0; e < 4; ++e) v[e] += acc[ch][jj][e];
          }
          *reinterpret_cast<float2*>(&sm.s_part[kh][g][col]) = make_float2(v[0], v[1]);
          *reinterpret_cast<float2*>(&sm.s_part[kh][g + 8][col]) = make_float2(v[2], v[3]);
        }
      }
      if constexpr (kTable) {  // buffer (j + 1) % 2, last read by tile j − 1's copies (before its barriers)
        if (table_fill) {
          sm.row_off[((kWalk ? j : t) + 1) & 1][0][threadIdx.x] =
              KvRowMap(p, KvRowMap::KnownBase{}, table_base)
                  .table_offset(table_page, table_t0, table_t0, table_end, threadIdx.x);
        }
        table_ok = table_next;
      }
      // The next item's Q into L2 (one line per thread), for its loads under this item's epilogue.
      if (t == 0 && has_next && threadIdx.x < kQChunks / 8) {
        prefetch_l2(q_chunks(p, next.request) + 8 * threadIdx.x);
      }
      cp_async_commit();  // tile j + 2's copies: one group per iteration
      __syncthreads();

      // Online softmax: half-warp (warp, lane/16) owns head sh; each lane kTokensLane tokens.
      {
        constexpr int kN = Sh::kTokensLane;
        float sv[kN];
#pragma unroll
        for (int i = 0; i < kN; i += 4) {
          const float4 a = *reinterpret_cast<const float4*>(&sm.s_part[0][sh][kN * si + i]);
          const float4 b = *reinterpret_cast<const float4*>(&sm.s_part[1][sh][kN * si + i]);
          sv[i] = a.x + b.x, sv[i + 1] = a.y + b.y, sv[i + 2] = a.z + b.z, sv[i + 3] = a.w + b.w;
        }
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          sv[i] = (t0 + kN * si + i < item.kv_end) ? sv[i] * logit_scale : -INFINITY;
          mx = fmaxf(mx, sv[i]);
        }
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        const float f = st.rescale_to(mx);
        float pv[kN], sum = 0.f;
#pragma unroll
        for (int i = 0; i < kN; ++i) {
          pv[i] = SoftmaxState<float>::exp(sv[i] - st.m);
          sum += pv[i];
        }
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        st.add(sum);
#pragma unroll
        for (int i = 0; i < kN; i += 4) {
          *reinterpret_cast<uint2*>(p_byte<kTma>(kv, sh, 2 * (kN * si + i))) =
              make_uint2(bf16x2_rn(pv[i], pv[i + 1]), bf16x2_rn(pv[i + 2], pv[i + 3]));
        }
        if (si == 0) sm.factor[sh] = f;
      }
      __syncthreads();

      // O = f·O + P·V for value dims [64w, 64w+64).
      const float f0 = sm.factor[g], f1 = sm.factor[g + 8];
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        o[jj][0] *= f0;
        o[jj][1] *= f0;
        o[jj][2] *= f1;
        o[jj][3] *= f1;
      }
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        std::uint32_t a[4];
        ldmatrix_x4(a, p_byte<kTma>(kv, lane % 16, kk * 32 + (lane / 16) * 16));
        const int vr = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {  // two n8 tiles per ldmatrix
          std::uint32_t b[4];
          if constexpr (kTma) {
            ldmatrix_x4_trans(b, &kv[0][0] + bf16_stage::boxes::k16Rows * kk + v_off[jj]);
          } else {
            ldmatrix_x4_trans(b, &kv[vr][swz(vr, warp * 8 + 2 * jj + lane / 16)]);
          }
          mma_bf16(o[2 * jj], a, b[0], b[1]);
          mma_bf16(o[2 * jj + 1], a, b[2], b[3]);
        }
      }
    }

    // The next item's Q: loads issued now (under this item's epilogue), stored below into the stage
    // of tile j − 1, which no copy in flight targets (tiles j, j + 1 are in stages j, j + 1).
    uint4 qnext[kQChunksPerThread];
    if (has_next) {
      const uint4* q = q_chunks(p, next.request);
#pragma unroll
      for (int u = 0; u < kQChunksPerThread; ++u) {
        const int i = threadIdx.x + u * kThreads;
        if (i < kQChunks) qnext[u] = __ldg(q + i);
      }
    }

    // Epilogue of the item (the copies of the next item's first tiles stay in flight). LSE from the
    // softmax owners; 1/l shared with every warp through shared memory. Partials go to the
    // workspace, or in cluster mode (one item per CTA, nothing in flight) stay here: O in stage 0
    // (free after the barrier below), the LSE in cluster_lse.
    if (p.cluster > 0) cp_async_wait<0>();
    ClusterExchange& exchange = *reinterpret_cast<ClusterExchange*>(sm.raw[0]);
    const PartialDst part = partial_dst<kPartialsF16>(p, item, &exchange.o[0][0], sm.cluster_lse);
    if (si == 0) {
      sm.inv_l[sh] = st.inv_l() * p.value_scale;
      const float lse = st.lse();
      if (item.partial >= 0) {
        part.lse[sh] = lse;
      } else if (p.lse != nullptr) {
        p.lse[std::int64_t(item.request) * kNumHeads + sh] = lse;
      }
    }
    __syncthreads();  // inv_l written; every warp is past its last P·V of the item
    // A lane's 4 values per 16-dim block and row: mma order puts dims 2c, 2c+1 in n-tile 2·blk and
    // 8+2c, 9+2c in n-tile 2·blk+1. One unrolled store loop per destination (the branch taken once,
    // as in wg::write_output); `at` = row·512 + dim, a constant offset from the thread's first.
    const float inv[2] = {sm.inv_l[g], sm.inv_l[g + 8]};
    const auto store_all = [&](auto store) {
#pragma unroll
      for (int blk = 0; blk < 4; ++blk) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // rows g, g+8
          const float x = inv[half];
          const float* e = o[2 * blk] + 2 * half;
          const float* f = o[2 * blk + 1] + 2 * half;
          const int at = (g + 8 * half) * kValueDim + warp * 64 + blk * 16 + 2 * c;
          store(at, e[0] * x, e[1] * x);
          store(at + 8, f[0] * x, f[1] * x);
        }
      }
    };
    if (item.partial < 0) {
      std::uint16_t* out = p.out + std::int64_t(item.request) * kNumHeads * kValueDim;
      store_all([&](int at, float a, float b) { *reinterpret_cast<std::uint32_t*>(out + at) = bf16x2_rn(a, b); });
    } else {
      store_all([&](int at, float a, float b) { *reinterpret_cast<float2*>(part.o + at) = make_float2(a, b); });
    }
    if (p.cluster > 0) {
      cluster_merge<kThreads>(p, item.request, &exchange.o[0][0], sm.cluster_lse, exchange.scratch);
    }
    if (!has_next) break;

    item = next;
    base = next_base;
    // Its tiles 0 and 1 that did not go out under this item (this item had fewer than two tiles).
#pragma unroll
    for (int k = 0; k < T::kStages - 1; ++k) {
      if (k < next_tiles && !((issued >> k) & 1u)) {
        decoder_at<F, kEvictFirst, kTma, kSmallPages>(p, base).copy_tile(sm, (j + k) % T::kStages,
                                                                         item.kv_begin + k * kTile, item.kv_end);
        if constexpr (!kTma) {  // (the TMA's copy completes on the stage's barrier: no drain)
          cp_async_commit();
          drain = true;
        }
      }
    }
    std::uint8_t(*qstage)[kPitch] = sm.raw[(j + T::kStages - 1) % T::kStages];
#pragma unroll
    for (int u = 0; u < kQChunksPerThread; ++u) {
      const int i = threadIdx.x + u * kThreads;
      if (i < kQChunks) *reinterpret_cast<uint4*>(q_chunk_at(qstage, i)) = qnext[u];
    }
    __syncthreads();  // Q stored; every warp has read this item's inv_l
    q_fragments(qa, qstage, kh, lane);
  }
  cp_async_wait<0>();
}

// The launch, preparation and cluster probe of any decode kernel.
cudaLaunchConfig_t decode_config(int grid, int threads, std::size_t smem, int cluster, cudaStream_t stream,
                                 cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(grid));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (cluster > 0) {
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = unsigned(cluster);
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cfg;
}

// p.ctas CTAs of k, in clusters of p.cluster when it is set.
cudaError_t launch_decode_kernel(const DecodeKernel& k, const DecodeParams& p, cudaStream_t stream) {
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t cfg = decode_config(p.ctas, k.threads, k.smem, p.cluster, stream, &attr);
  return cudaLaunchKernelEx(&cfg, k.entry, p);
}

// Raises k's dynamic shared-memory limit and allows clusters of up to 16.
cudaError_t prepare_decode_kernel(const DecodeKernel& k) {
  cudaError_t e = cudaFuncSetAttribute(k.entry, cudaFuncAttributeMaxDynamicSharedMemorySize, int(k.smem));
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(k.entry, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

// How many clusters of n CTAs of k can be resident at once (0: clusters of n cannot run).
int max_active_decode_clusters(const DecodeKernel& k, int n) {
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t cfg = decode_config(n, k.threads, k.smem, n, nullptr, &attr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, k.entry, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it
    return 0;
  }
  return clusters;
}

// bf16's kernels: one item per CTA, walking several (kWalk), or one item of one tile (kOneTile); the
// first two also with whole tiles by TMA (kTma); the KV copies under the evict-first policy or
// without one; those without the TMA also for caches of pages of 1 or 16 rows (kSmallPages).
template <bool kWalk, bool kOneTile = false, bool kTma = false, bool kSmallPages = false, bool kTable = false>
DecodeKernel bf16_kernel_info(bool evict_first) {
  return {evict_first ? decode_kernel<KvFormat::bf16, kWalk, kOneTile, true, kTma, kSmallPages, kTable>
                      : decode_kernel<KvFormat::bf16, kWalk, kOneTile, false, kTma, kSmallPages, kTable>,
          kThreads, kSmemBytes<kTma, kTable>, 1, kPartialsF16};
}

using Variant = DecodeVariant;
constexpr Variant kVariants[] = {Variant::general, Variant::walking, Variant::one_tile};

// The kernel of `format` for variant v (fp8 and MXFP4 never walk: their general kernel) and the KV's
// L2 policy; with `row_pairs`, the format's row-pair kernel. page_rows (0: contiguous) picks, by
// row_path (decode_params.h, which describe() prints), bf16's kernels of pages of 1 or 16 rows, MXFP4's
// that load by groups of 16 rows, and fp8's and MXFP4's row-table kernels.
DecodeKernel kernel_info(KvFormat format, Variant v, bool evict_first = false, bool tma = false, bool row_pairs = false,
                         int page_rows = 0) {
  const RowPath path = row_path(format, v, row_pairs ? 2 : 1, page_rows, tma);
  const bool small_pages = path == RowPath::small_pages;
  switch (format) {
    case KvFormat::bf16:
      if (row_pairs) return decode_bf16_pairs_kernel_info();  // general and one-tile alike, no L2 policy
      switch (v) {
        case Variant::general:
          if (tma) return bf16_kernel_info<false, false, true>(evict_first);
          if (path == RowPath::table) return bf16_kernel_info<false, false, false, true, true>(evict_first);
          return small_pages ? bf16_kernel_info<false, false, false, true>(evict_first)
                             : bf16_kernel_info<false>(evict_first);
        case Variant::walking:
          if (tma) return bf16_kernel_info<true, false, true>(evict_first);
          if (path == RowPath::table) return bf16_kernel_info<true, false, false, true, true>(evict_first);
          return small_pages ? bf16_kernel_info<true, false, false, true>(evict_first)
                             : bf16_kernel_info<true>(evict_first);
        case Variant::one_tile:
          return small_pages ? bf16_kernel_info<false, true, false, true>(evict_first)
                             : bf16_kernel_info<false, true>(evict_first);
      }
      return bf16_kernel_info<false>(evict_first);
    case KvFormat::fp8:
      return decode_fp8_kernel_info(v == Variant::one_tile, evict_first, tma, row_pairs,
                                    path == RowPath::table ? page_rows : 0);
    case KvFormat::mxfp4:
      return decode_mxfp4_kernel_info(v == Variant::one_tile, evict_first, row_pairs, path == RowPath::groups,
                                      path == RowPath::table);
  }
  return bf16_kernel_info<false>(evict_first);
}

}  // namespace

bool decode_row_pairs(KvFormat format, int s_q) {
  (void)format;  // every format has one
  return s_q % 2 == 0;
}

int decode_tile_tokens(KvFormat format, bool row_pairs) {
  switch (format) {
    case KvFormat::bf16:
      return Traits<KvFormat::bf16>::kTile;
    case KvFormat::fp8:
    case KvFormat::mxfp4:
      return row_pairs ? 2 * wg::kTile : wg::kTile;  // row pairs: two warpgroups, 64 tokens each
  }
  return 64;
}

int decode_grid(KvFormat format, std::span<const WorkItem> items, int cluster, int sms) {
  switch (format) {
    case KvFormat::bf16: {
      // One CTA per SM; with more items than SMs, the CTAs walk them where they are short
      // (kWalkMaxMeanTiles, planner.h).
      return cluster > 0
                 ? int(items.size())
                 : walking_grid(items, sms * decode_ctas_per_sm(format), std::int64_t(kWalkMaxMeanTiles) * kTileTokens);
    }
    case KvFormat::fp8:
    case KvFormat::mxfp4:
      return int(items.size());
  }
  return int(items.size());
}

int decode_ctas_per_sm(KvFormat format, bool row_pairs) {
  return kernel_info(format, Variant::general, false, false, row_pairs).ctas_per_sm;
}

bool decode_partials_f16(KvFormat format) {
  return kernel_info(format, Variant::general).partials_f16;
}

cudaError_t prepare_decode(KvFormat format) {
  // Every (variant, L2 policy, TMA, row pairs, page rows) choice maps to one of a few kernels;
  // each is prepared once (plan() calls this on every plan, so repeats would cost plan time).
  void (*done[64])(DecodeParams) = {};
  int n_done = 0;
  for (Variant v : kVariants) {
    for (bool evict_first : {false, true}) {  // fp8, MXFP4: walking = general
      for (bool tma : {false, true}) {        // bf16's general and walking kernels, fp8's general one
        for (bool pairs : {false, true}) {    // the row-pair kernels (not walking)
          for (int page_rows : {0, 1, 16}) {  // bf16's kernels of small pages, MXFP4's of 1- and 16-row pages
            if (pairs && (tma || v == Variant::walking || !decode_row_pairs(format, 2))) continue;
            const DecodeKernel k = kernel_info(format, v, evict_first, tma, pairs, page_rows);
            if (std::find(done, done + n_done, k.entry) != done + n_done) continue;
            const cudaError_t e = prepare_decode_kernel(k);
            if (e != cudaSuccess) return e;
            if (n_done < int(std::size(done))) done[n_done++] = k.entry;
          }
        }
      }
    }
  }
  return cudaSuccess;
}
int decode_max_active_clusters(KvFormat format, int n) {
  return max_active_decode_clusters(kernel_info(format, Variant::general), n);  // the same resources either way
}

cudaError_t launch_decode(KvFormat format, const DecodeParams& p, cudaStream_t stream) {
  const bool pairs = p.rows_per_item == 2;
  // Row pairs: a CTA per item, merged by the combine kernel.
  if (pairs && (p.cluster != 0 || p.ctas != p.num_items)) return cudaErrorInvalidValue;
  if (p.rows_per_item != 1 && !pairs) return cudaErrorInvalidValue;
  const Variant v = decode_variant_of(format, p.ctas, p.num_items, p.max_item_tokens, p.rows_per_item);
  const int page_rows = p.page_table != nullptr ? 1 << p.page_shift : 0;
  return launch_decode_kernel(kernel_info(format, v, p.kv_evict_first, p.kv_tma, pairs, page_rows), p, stream);
}

}  // namespace mla::sm90
