// Host-side launchers of the sm90 kernels (decode.cu, decode_fp8.cu, decode_mxfp4.cu, combine.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/sm90/decode_params.h"
#include "mla/mla.h"

namespace mla::sm90 {

// Whether `format` has a row-pair kernel (two q rows of a request per CTA, DecodeParams::rows_per_item
// = 2) for `s_q` query tokens per request: every format, with an even s_q.
bool decode_row_pairs(KvFormat format, int s_q);
// KV tokens per tile (work-item splits are multiples of it) and resident decode CTAs per SM (the
// planner's wave is SMs × this), of the kernel that one q row per item, or row pairs, launch.
int decode_tile_tokens(KvFormat format, bool row_pairs = false);
int decode_ctas_per_sm(KvFormat format, bool row_pairs = false);
// CTAs of a decode launch (DecodeParams::ctas): bf16 CTAs walk several items each when there are more
// items than one wave and they are short (decode.cu); otherwise, and for fp8 and MXFP4, one CTA per item.
int decode_grid(KvFormat format, std::span<const WorkItem> items, int cluster, int sms);
constexpr int kMaxDecodeCtasPerSm = 2;  // sizes the workspace for every format alike
// Once per process and format, before launch_decode (raises the dynamic shared-memory limit, allows
// clusters of up to 16).
cudaError_t prepare_decode(KvFormat format);
cudaError_t launch_decode(KvFormat format, const DecodeParams& p, cudaStream_t stream);
// How many clusters of n decode CTAs can be resident at once (0: clusters of n cannot run).
int decode_max_active_clusters(KvFormat format, int n);
// The type of the split partials `format`'s kernel writes (CombineParams::partial_f16).
bool decode_partials_f16(KvFormat format);

// One decode kernel as the dispatch (decode.cu) sees it. decode_fp8.cu and decode_mxfp4.cu each
// describe their wgmma kernel (tokens in M, 64-token tiles); bf16's (general, walking, one-tile) are decode.cu's own.
struct DecodeKernel {
  void (*entry)(DecodeParams);  // the __global__ function
  int threads;                  // block size
  std::size_t smem;             // dynamic shared memory per CTA, bytes
  int ctas_per_sm;              // resident CTAs per SM (the planner's wave is SMs × this)
  bool partials_f16;            // split partials: fp16 · scale (kernels/common/partial.h), else fp32
};
// fp8's and MXFP4's kernels: general, or for one-tile items (decode_params.h, decode_variant); with
// the KV read under the L2 evict-first policy or without one (DecodeParams::kv_evict_first); fp8's
// general one-row kernel also with whole tiles by TMA (`tma`: DecodeParams::kv_tma; ignored for short
// items and row pairs); with `row_pairs`, the row-pair kernel (two warpgroups, 128-token tiles); with
// `table_pages` 1 or 16 (pages of that many rows; cp.async kernels of more than one tile), the kernel
// that copies tiles after the first through a row table in shared memory.
DecodeKernel decode_fp8_kernel_info(bool short_items, bool evict_first, bool tma, bool row_pairs, int table_pages);
// MXFP4's with `groups`: the kernel of pages of 16 rows, whose warps load groups of 16 rows (one page
// each) rather than the warpgroup whole tiles (decode_mxfp4.cu, LoadUnit); with `table` (pages of 1
// row), the kernel that looks a tile's rows up once into shared memory (SmemTable).
DecodeKernel decode_mxfp4_kernel_info(bool short_items, bool evict_first, bool row_pairs, bool groups, bool table);
// bf16's row-pair kernel (decode_bf16_pairs.cu): two warpgroups, one CTA per item; its KV copies
// take no L2 policy (has_evict_first_kernel).
DecodeKernel decode_bf16_pairs_kernel_info();

// `max_partials`: most partials of one row (sizes the CTA: more partial groups for long splits);
// `sms`: the device's SMs (few rows are spread over more CTAs, each a chunk of the value dims).
cudaError_t launch_combine(const CombineParams& p, int max_partials, int sms, cudaStream_t stream);

}  // namespace mla::sm90
