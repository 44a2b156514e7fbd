// Parameters of the sm90 decode and combine kernels: plain structs passed as
// `__grid_constant__ const`. All pointers are device memory.
#pragma once

#include <cstdint>

#include "host/planner.h"
#include "mla/mla.h"

namespace mla::sm90 {

constexpr int kMaxCluster = 16;  // CTAs per cluster in cluster mode (non-portable above 8)
// Work lists of up to this many items also travel in the launch parameters (DecodeParams::
// param_items): a CTA then reads its item from the constant bank, without a round trip to memory
// before its first loads (perf-notes v80).
constexpr int kParamItems = 64;
constexpr bool items_in_params(int num_items) {
  return num_items <= kParamItems;
}
// Items of at most this many KV tokens (one tile) run each format's one-tile kernel, which has no
// code for a next tile (perf-notes v76–v78), unless the launch walks (decode_variant: walking first).
// The fp8 and MXFP4 row-pair kernels' tile is `rows_per_item` times this.
constexpr int kShortItemTokens = 64;

// The instantiation of a format's decode kernel that a launch takes (launch_decode; describe()
// prints it): CTAs walking several items each (only bf16 plans have fewer CTAs than items), the
// one-tile kernel, or the general one.
enum class DecodeVariant { general, walking, one_tile };
constexpr DecodeVariant decode_variant(int ctas, int num_items, int max_item_tokens, int rows_per_item = 1) {
  if (ctas < num_items) return DecodeVariant::walking;
  return max_item_tokens <= kShortItemTokens * rows_per_item ? DecodeVariant::one_tile : DecodeVariant::general;
}
// The variant `format`'s launch takes: decode_variant's, but bf16's row-pair kernel has one form.
constexpr DecodeVariant decode_variant_of(KvFormat format, int ctas, int num_items, int max_item_tokens,
                                          int rows_per_item) {
  if (format == KvFormat::bf16 && rows_per_item == 2) return DecodeVariant::general;
  return decode_variant(ctas, num_items, max_item_tokens, rows_per_item);
}

// Whether the kernel that `format` launches for variant v and `rows_per_item` has a TMA instantiation
// (Plan::kv_tma picks it): the one-row general kernels of bf16 and fp8, and bf16's walking kernel. The
// one-tile kernels, the row-pair kernels and MXFP4's copy by cp.async whatever the plan says.
constexpr bool has_tma_kernel(KvFormat format, DecodeVariant v, int rows_per_item) {
  if (rows_per_item != 1) return false;
  switch (format) {
    case KvFormat::bf16:
      return v != DecodeVariant::one_tile;
    case KvFormat::fp8:
      return v == DecodeVariant::general;
    case KvFormat::mxfp4:
      return false;
  }
  return false;
}

// How the kernel that `format` launches finds a tile's KV rows in pages of `page_size` rows (0:
// contiguous), with Plan::kv_tma's request `tma` (kernel_info picks the kernel by it; describe() prints
// it as kv_rows=):
// * runs: a whole tile (fp8: a warp's 16-row group) in one run of rows — contiguous, or inside one
//   page — from one base row, any other tile row by row (every kernel but the three below);
// * small_pages: bf16's kernels of pages of 16 rows and its one-tile one of pages of 1 (one page-table
//   load per two rows on 16-row pages, the next tile's page-table lines into L1; perf-notes v146, v147);
// * groups: MXFP4's kernels of pages of 16 rows (each warp loads its 16-row group from one page, v145);
// * table: fp8's kernels of pages of 1 and 16 rows, MXFP4's and bf16's of pages of 1 (not the one-tile
//   kernels): each token's row looked up a tile ahead into a table in shared memory (v149, v150, v152,
//   v153, v156).
enum class RowPath { runs, small_pages, groups, table };
constexpr RowPath row_path(KvFormat format, DecodeVariant v, int rows_per_item, int page_size, bool tma) {
  const bool small = page_size == 1 || page_size == 16;
  const bool tma_kernel = tma && has_tma_kernel(format, v, rows_per_item);
  switch (format) {
    case KvFormat::bf16:
      if (!small || rows_per_item != 1 || tma_kernel) return RowPath::runs;
      return page_size == 1 && v != DecodeVariant::one_tile ? RowPath::table : RowPath::small_pages;
    case KvFormat::fp8:
      return small && v != DecodeVariant::one_tile && !tma_kernel ? RowPath::table : RowPath::runs;
    case KvFormat::mxfp4:
      if (page_size == 16) return RowPath::groups;
      return page_size == 1 && v != DecodeVariant::one_tile ? RowPath::table : RowPath::runs;
  }
  return RowPath::runs;
}
constexpr const char* to_string(RowPath path) {
  switch (path) {
    case RowPath::runs:
      return "runs";
    case RowPath::small_pages:
      return "small_pages";
    case RowPath::groups:
      return "groups";
    case RowPath::table:
      return "table";
  }
  return "?";
}

// Whether the kernel that `format` launches for `rows_per_item` has an evict-first instantiation
// (Plan::kv_evict_first picks it): all but bf16's row-pair kernel. CUDA 13.0's ptxas encodes that
// kernel's policy cp.async with an odd uniform register as the descriptor, an illegal instruction at
// run time (primitives.h; perf-notes session 37), and plan() never asks for the policy at s_q > 1.
constexpr bool has_evict_first_kernel(KvFormat format, int rows_per_item) {
  return !(format == KvFormat::bf16 && rows_per_item == 2);
}

// A CUtensorMap's 128 bytes (cuda.h stays out of this header: the planner and its tests include it
// without the CUDA toolkit); backend.cu encodes it, the kernel passes its address to the TMA.
struct alignas(128) TensorMap {
  std::uint64_t words[16];
};

struct DecodeParams {
  const std::uint16_t* q;          // [total_q × 16 × 576] bf16; work items name a q row v = b · s_q + i
  int s_q;                         // query tokens per request: request b = v / s_q
  const std::uint8_t* kv;          // [kv_rows × kv_row_stride] bytes in the format's row layout
  std::int64_t kv_row_stride;      // bytes, multiple of 16
  const std::uint8_t* kv_scales;   // mxfp4: [kv_rows × scale_stride] E8M0; else null
  std::int64_t scale_stride;       // mxfp4: ≥ 18
  const std::int32_t* page_table;  // paged: page indices; null when contiguous
  std::int64_t page_table_stride;  // entries per request; 0 = flat kv_indices (page base: the item's kv_base)
  int page_shift;                  // log2(page_size) when paged (0, 4, 6); unused when contiguous
  const WorkItem* items;           // [num_items]
  int num_items;
  int ctas;  // CTAs launched: CTA c takes item c, then its chain of WorkItem::next (bf16); fp8 and MXFP4: ctas =
             // num_items
  float logit_scale;     // sm_scale · (fp8 tensor scale or 1)
  float value_scale;     // fp8 tensor scale or 1 (applied to O)
  std::uint16_t* out;    // [total_q × 16 × 512] bf16
  float* lse;            // [total_q × 16] fp32 or null
  void* partial_o;       // [max_partials × 16 × 512] normalised O: fp32 (bf16 kernel) or fp16 (fp8, MXFP4)
  float* partial_scale;  // [max_partials × 16] with fp16 partials: value = fp16 · scale (partial.h)
  float* partial_lse;    // [max_partials × 16] fp32
  int cluster;           // 0: partials to the workspace (combine.cu); n: clusters of n CTAs, one per q
                         // row, item k of the row on rank k, merged in the cluster (cluster_merge.h)
  int rows_per_item;     // 1, or 2: row pairs (each format's pair kernel, cluster 0; WorkItem::pair_end)
  bool kv_evict_first;   // the KV read under an L2 evict-first policy (Plan::kv_evict_first)
  bool kv_tma;           // the TMA kernel (has_tma_kernel), with kv_map (Plan::kv_tma; in kv_evict_first's padding)
  int max_item_tokens;   // ≥ every item's kv_end − kv_begin (tokens_per_split): picks the one-tile kernel
  int num_param_items;   // num_items when the items are in param_items too (≤ kParamItems), else 0
  WorkItem param_items[kParamItems];  // [num_param_items] = items[0, num_param_items)
  // mxfp4: bytes of kv_scales (kv_rows · scale_stride): the end that the scale-word loads of the row-table
  // kernel (decode_mxfp4.cu, load_scale_words) never read past. (In the padding before kv_map: the
  // fields above keep their places.)
  std::int64_t scale_bytes;
  // Last, so that the fields every kernel's start reads keep their places (perf-notes v110d).
  // With kv_tma, the cache as a 3-D tensor map whose one copy is a whole tile, landing in the TMA
  // kernel's stage layout (128-byte swizzle): fp8, [rows / 2 × 1152] bytes of row pairs, boxes of 32
  // pairs × 128 bytes (fp8_stage.h, namespace pairs); bf16, [rows × 1152] bytes, row_stride apart,
  // boxes of 64 rows × 128 bytes (bf16_stage.h, namespace boxes). The TMA kernel copies each whole
  // tile that starts at a multiple of the map's unit by one TMA, any other tile row by row.
  TensorMap kv_map;
};

struct CombineParams {
  const RequestSplit* splits;  // [rows] one per q row (virtual request b · s_q + i)
  int rows;                    // total_q
  const void* partial_o;       // [max_partials × 16 × 512] fp32, or fp16 (value = fp16 · partial_scale)
  const float* partial_scale;  // [max_partials × 16] (fp16 partials)
  bool partial_f16;            // the decode kernel's choice: fp16 (fp8, MXFP4) or fp32 (bf16)
  const float* partial_lse;    // [max_partials × 16]
  std::uint16_t* out;          // [total_q × 16 × 512] bf16
  float* lse;                  // [total_q × 16] or null
};

}  // namespace mla::sm90
