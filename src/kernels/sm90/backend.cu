// The CUDA backend's host side: plan (copies lengths and page table to the host, validates them,
// builds the work list into the caller's device workspace — may synchronize) and run (two
// asynchronous launches at most, no allocation, no synchronization: graph-capturable). Split rows
// are merged in thread-block clusters when every cluster fits at once (one launch), else by the
// combine kernel.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "host/cuda_backend.h"
#include "host/planner.h"
#include "host/problem_access.h"
#include "host/validate.h"
#include "kernels/sm90/bf16_stage.h"
#include "kernels/sm90/fp8_stage.h"
#include "kernels/sm90/launch.h"

namespace mla::cuda {
namespace {

Status cuda_fail(const char* what, cudaError_t e) {
  return {StatusCode::cuda_error, std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
}

// The current device's multiprocessors (and, when asked, its L2 bytes and ordinal), or why it cannot
// run the kernels.
Status device_sms(int* sms, std::int64_t* l2_bytes = nullptr, int* ordinal = nullptr) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) {
    return {StatusCode::no_device,
            std::string("no usable CUDA device (no GPU, or no driver that serves this CUDA runtime): ") +
                cudaGetErrorString(e)};
  }
  cudaDeviceProp prop{};
  e = cudaGetDeviceProperties(&prop, dev);
  if (e != cudaSuccess) return cuda_fail("cudaGetDeviceProperties", e);
  if (prop.major != 9) {
    return {StatusCode::no_device, std::string("the cuda backend needs an sm_90 GPU (H100/H200); device is ") +
                                       prop.name + " sm_" + std::to_string(prop.major * 10 + prop.minor)};
  }
  *sms = prop.multiProcessorCount;
  if (l2_bytes != nullptr) *l2_bytes = prop.l2CacheSize;
  if (ordinal != nullptr) *ordinal = dev;
  return Status::success();
}

int page_shift(int page_size) {
  switch (page_size) {
    case 16:
      return 4;
    case 64:
      return 6;
    default:
      return 0;
  }
}

// cuTensorMapEncodeTiled is a driver function: its address comes from the runtime once per process
// (null when the driver does not offer it: plan() then keeps fp8's copies on cp.async).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // not sticky: clear it
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// The KV's tensor map for the TMA kernel of p's format (DecodeParams::kv_map): fp8, row pairs of
// unpadded rows (fp8_stage.h, namespace pairs); bf16, rows at any stride (bf16_stage.h, namespace
// boxes). False when the format has no TMA kernel or the cache does not fit a map: the TMA's
// coordinates are 32-bit ints and its strides below 2^40 bytes, and a cache of fewer rows than one
// tile holds no whole tile (every tile then goes by cp.async in any case).
bool kv_map_shape(const Problem& p, sm90::TensorMapShape* shape) {
  constexpr std::int64_t kMaxCoordinate = std::numeric_limits<std::int32_t>::max();
  constexpr std::int64_t kTileRows = 64;
  static_assert(sm90::fp8_stage::kRows == kTileRows && sm90::bf16_stage::kRows == kTileRows, "tiles of 64 rows");
  if (p.kv.rows < kTileRows) return false;
  switch (p.kv.format) {
    case KvFormat::fp8:
      static_assert(sm90::fp8_stage::kRowBytes == kHeadDim, "fp8 rows are kHeadDim bytes");
      if (p.kv.row_stride_bytes != kHeadDim || p.kv.rows / 2 > kMaxCoordinate) return false;
      *shape = sm90::fp8_stage::pairs::map_shape(p.kv.rows);
      return true;
    case KvFormat::bf16:
      static_assert(sm90::bf16_stage::kRowBytes == 2 * kHeadDim, "bf16 rows are 2 · kHeadDim bytes");
      if (p.kv.rows > kMaxCoordinate || p.kv.row_stride_bytes >= (std::int64_t(1) << 40)) return false;
      *shape = sm90::bf16_stage::boxes::map_shape(p.kv.rows, p.kv.row_stride_bytes);
      return true;
    case KvFormat::mxfp4:
      return false;
  }
  return false;
}

// Encodes `shape` over p's cache: bytes, 128-byte swizzle, one copy a whole tile. Host work only (no
// device call), so run() stays asynchronous and capturable.
Status encode_kv_map(const Problem& p, const sm90::TensorMapShape& shape, sm90::TensorMap* map) {
  static_assert(sizeof(CUtensorMap) == sizeof(sm90::TensorMap) && alignof(sm90::TensorMap) >= alignof(CUtensorMap),
                "TensorMap holds a CUtensorMap");
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return {StatusCode::cuda_error, "cuTensorMapEncodeTiled is not available from the driver"};
  const cuuint64_t dims[3] = {shape.dims[0], shape.dims[1], shape.dims[2]};
  const cuuint64_t strides[2] = {shape.strides[0], shape.strides[1]};
  const cuuint32_t box[3] = {shape.box[0], shape.box[1], shape.box[2]};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  CUtensorMap m;
  const CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(p.kv.data), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return {StatusCode::cuda_error, "cuTensorMapEncodeTiled failed for the " + std::string(to_string(p.kv.format)) +
                                        " cache: error " + std::to_string(int(r))};
  }
  std::memcpy(map, &m, sizeof(m));
  return Status::success();
}

// The layout plan() fills and run() reads: sized for the most resident decode CTAs per SM of
// any format, so that it depends on batch, s_q and the device only.
WorkspaceLayout cuda_layout(int batch, int s_q, int sms) {
  return cuda_workspace_layout(batch, s_q, sms, sm90::kMaxDecodeCtasPerSm);
}

}  // namespace

bool available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  int sms = 0;
  return device_sms(&sms).ok();
}

Status workspace_size(const Problem& p, std::size_t* bytes) {
  int sms = 0;
  Status s = device_sms(&sms);
  if (!s.ok()) return s;
  *bytes = cuda_layout(p.batch, p.s_q, sms).total_bytes;
  return Status::success();
}

namespace {

// plan() and plan_with_list(): `forced` (a measurement tool's list) replaces the planner's choice, on
// `forced_grid` CTAs walking its chains when that is below its items (bf16), else one CTA per item.
// *list_out, *grid_out (when given): the list launched, before any cluster layout, and its walking grid
// (0: one CTA per item), for plan_with_list.
Status plan_impl(const Problem& p, const WorkList* forced, int forced_grid, void* workspace, std::size_t bytes,
                 Plan* out, WorkList* list_out = nullptr, int* grid_out = nullptr) {
  int sms = 0, device = -1;
  std::int64_t l2_bytes = 0;
  Status s = device_sms(&sms, &l2_bytes, &device);
  if (!s.ok()) return s;

  // Contents live in device memory: copy them here and validate before anything is launched.
  std::vector<std::int32_t> qo(std::size_t(p.batch) + 1), kv(std::size_t(p.batch) + 1), pages;
  cudaError_t e = cudaMemcpy(qo.data(), p.qo_indptr, qo.size() * 4, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_fail("copying qo_indptr", e);
  e = cudaMemcpy(kv.data(), p.kv_indptr, kv.size() * 4, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_fail("copying kv_indptr", e);
  if (p.paging.page_size != 0) {
    pages.resize(std::size_t(p.paging.page_table_entries));
    e = cudaMemcpy(pages.data(), p.paging.page_table, pages.size() * 4, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return cuda_fail("copying the page table", e);
  }
  s = validate_contents(p, qo.data(), kv.data(), pages.empty() ? nullptr : pages.data());
  if (!s.ok()) return s;

  // One virtual request per query token: row b·s_q + i sees the first L_b − s_q + i + 1 keys.
  std::vector<std::int32_t> request_lengths(std::size_t(p.batch));
  for (int b = 0; b < p.batch; ++b) request_lengths[std::size_t(b)] = kv[std::size_t(b) + 1] - kv[std::size_t(b)];
  const std::vector<std::int32_t> lengths = query_row_lengths(request_lengths, p.s_q);
  const int rows = int(p.total_q), slots = sms * sm90::decode_ctas_per_sm(p.kv.format);
  const WorkspaceLayout layout = cuda_layout(p.batch, p.s_q, sms);
  const int tile = sm90::decode_tile_tokens(p.kv.format);
  WorkList wl;
  // bf16's ragged batches: fp8's simulated launch picks their list, a CTA per item, never walked
  // (perf-notes v134); its other batches: the tile model's list, then walking (below).
  const bool bf16_ragged =
      forced == nullptr && p.kv.format == KvFormat::bf16 && ragged_batch(request_lengths, int(p.total_q));
  // An even s_q: row pairs, each CTA both rows of a pair (the KV read, and for fp8 and MXFP4 converted,
  // once for two rows; perf-notes v136–v138), the tile model's timelines over the pairs on one CTA
  // per SM — where they measured faster (bf16_row_pairs_pay; fp8 and MXFP4: row_pairs_pay).
  const bool row_pairs =
      forced == nullptr && sm90::decode_row_pairs(p.kv.format, p.s_q) &&
      (p.kv.format == KvFormat::bf16 ? bf16_row_pairs_pay(lengths, sms, tile) : row_pairs_pay(lengths, slots, tile));
  const int rows_per_item = row_pairs ? 2 : 1;  // (Plan::rows_per_item)
  if (forced != nullptr) {
    wl = *forced;
  } else if (row_pairs) {
    const std::vector<std::int32_t> pair_lengths = row_pair_lengths(request_lengths, p.s_q);
    // At most half the layout's items: row_pair_work_list gives each split piece two partial slots.
    const WorkList pairs =
        balanced_work_list(pair_lengths, sms * sm90::decode_ctas_per_sm(p.kv.format, true),
                           sm90::decode_tile_tokens(p.kv.format, true), layout.max_items / 2, true, kRowPairs);
    wl = row_pair_work_list(pairs, pair_lengths);
  } else {
    switch (p.kv.format) {
      case KvFormat::bf16:  // one CTA per SM: the tile model's list without timelines (+1.5 % at 160 and
                            // 200 × 8192, perf-notes v121), or for a ragged batch fp8's simulated launch's
        wl = bf16_ragged ? simulated_work_list(lengths, slots, tile, layout.max_items, kFp8Pace)
                         : balanced_work_list(lengths, slots, tile, layout.max_items, false, kDramBound);
        break;
      case KvFormat::fp8:  // bound by DRAM: the tile model's list unless a simulated launch is clear (v132)
        wl = simulated_work_list(lengths, slots, tile, layout.max_items, kFp8Pace);
        break;
      case KvFormat::mxfp4:  // bound by its SMs: tiles per slot hold, candidates simulated (v126, v128, v130)
        wl = balanced_work_list(lengths, slots, tile, layout.max_items, true, kSmBound);
        break;
    }
  }
  e = sm90::prepare_decode(p.kv.format);
  if (e != cudaSuccess) return cuda_fail("configuring the decode kernel", e);
  // Rows split in two merge inside clusters of 2 when every cluster can be resident at once; more
  // pieces go to the combine kernel. (Measured on the H200, perf-notes v34: clusters of 2 beat the
  // combine by 2–3 µs, of 4 and 8 tie with it, of 16 lose 2 µs.)
  constexpr int kClusterLimit = 2;
  static_assert(kClusterLimit <= sm90::kMaxCluster, "the kernels merge clusters of up to kMaxCluster CTAs");
  // Whether the decode copies whole tiles of `items` (their kv_base set) by TMA on `grid` CTAs
  // (Plan::kv_tma; perf-notes v113, v115, v123b).
  sm90::TensorMapShape map{};
  const bool map_fits = kv_map_shape(p, &map);
  const auto tma_for = [&](std::span<const WorkItem> items, int grid, int tokens_per_split) {
    const bool fp8 = p.kv.format == KvFormat::fp8;  // (MXFP4 has no map: kv_map_shape)
    return kv_tma(items, grid, tile, fp8 ? kTmaMinTilesFp8 : kTmaMinTilesBf16, kTmaMinChainTilesBf16, fp8 ? 2 : 1,
                  map_fits, p.paging.page_size) &&
           sm90::has_tma_kernel(
               p.kv.format,
               sm90::decode_variant_of(p.kv.format, grid, int(items.size()), tokens_per_split, rows_per_item),
               rows_per_item) &&
           (p.kv.format != KvFormat::bf16 || kv_tma_waves(grid, slots)) && tensor_map_encoder() != nullptr;
  };
  std::vector<WorkItem> cluster_items;
  const bool forced_walk = forced != nullptr && forced_grid > 0 && forced_grid < int(wl.items.size());
  int cluster = forced_walk || row_pairs ? 0 : cluster_work_list(wl, rows, kClusterLimit, slots, &cluster_items);
  if (cluster > 0 && sm90::decode_max_active_clusters(p.kv.format, cluster) < rows) cluster = 0;
  const std::vector<WorkItem>& launched = cluster > 0 ? cluster_items : wl.items;
  int grid = forced_walk                                     ? forced_grid
             : forced != nullptr || bf16_ragged || row_pairs ? int(launched.size())
                                                             : sm90::decode_grid(p.kv.format, launched, cluster, sms);
  // bf16's walking grid: its list and order, or its walked timelines where they pay (perf-notes v122).
  // Only bf16's kernel walks (follows WorkItem::next); the other formats' grids have a CTA per item.
  if (p.kv.format == KvFormat::bf16 && cluster == 0 && forced == nullptr && !bf16_ragged && !row_pairs) {
    grid = bf16_walking_path(lengths, slots, tile, layout.max_items, grid, &wl);
    // A walking list against every request whole, a CTA each, where the model says whole ones copied
    // by TMA are faster (perf-notes v133) and the TMA can copy them.
    if (grid < int(wl.items.size()) && whole_requests_pay(lengths, slots, tile)) {
      WorkList whole = build_work_list(lengths, rows, tile);
      std::vector<WorkItem> bases = whole.items;
      set_kv_bases(bases, kv, p.s_q);
      if (int(whole.items.size()) == rows && tma_for(bases, rows, whole.tokens_per_split)) {
        wl = std::move(whole);
        grid = rows;
      }
    }
  }
  if (list_out != nullptr) *list_out = wl;
  if (grid_out != nullptr) *grid_out = cluster == 0 && grid < int(wl.items.size()) ? grid : 0;
  std::vector<WorkItem> items = cluster > 0 ? std::move(cluster_items) : wl.items;
  set_kv_bases(items, kv, p.s_q);
  if (bytes < layout.total_bytes) {
    return {StatusCode::workspace_too_small,
            "workspace of " + std::to_string(bytes) + " bytes, plan needs " + std::to_string(layout.total_bytes)};
  }
  if (!layout.holds(int(items.size()), wl.num_partials)) {
    return {StatusCode::invalid_argument, "internal: work list larger than the workspace layout allows"};
  }
  if (grid < int(items.size()) && p.kv.format != KvFormat::bf16) {  // fp8's and MXFP4's CTAs take one item
    return {StatusCode::invalid_argument, "internal: a walking grid for a format whose kernel does not walk"};
  }
  auto* base = static_cast<std::uint8_t*>(workspace);
  e = cudaMemcpy(base + layout.items_offset, items.data(), items.size() * sizeof(WorkItem), cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return cuda_fail("writing the work list", e);
  e = cudaMemcpy(base + layout.splits_offset, wl.splits.data(), wl.splits.size() * sizeof(RequestSplit),
                 cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return cuda_fail("writing the split table", e);

  Plan pl;
  pl.backend = Backend::cuda;
  pl.batch = p.batch;
  pl.s_q = p.s_q;
  pl.total_q = p.total_q;
  pl.kv_format = p.kv.format;
  pl.total_kv = kv[std::size_t(p.batch)];
  pl.tokens_per_split = wl.tokens_per_split;
  pl.num_work_items = int(items.size());
  pl.num_split_requests = wl.num_split_requests;
  pl.max_request_partials = wl.max_request_partials;
  pl.grid = grid;
  pl.workspace_bytes = layout.total_bytes;
  pl.workspace = workspace;
  pl.device = device;
  pl.device_sms = sms;
  pl.cluster_size = cluster;
  pl.rows_per_item = rows_per_item;
  pl.kv_evict_first = kv_evict_first(pl.total_kv * kv_row_bytes(p.kv.format), l2_bytes, p.s_q);
  pl.kv_tma = tma_for(items, pl.grid, pl.tokens_per_split);
  pl.kv_map_fits = map_fits;
  pl.host_work_list = std::make_shared<const std::vector<WorkItem>>(std::move(items));
  *out = pl;
  return Status::success();
}

}  // namespace

Status plan(const Problem& p, void* workspace, std::size_t bytes, Plan* out) {
  return plan_impl(p, nullptr, 0, workspace, bytes, out);
}

Status plan_and_list(const Problem& p, void* workspace, std::size_t bytes, Plan* out, WorkList* list, int* grid) {
  return plan_impl(p, nullptr, 0, workspace, bytes, out, list, grid);
}

Status list_setting(const Problem& p, ListSetting* out) {
  int sms = 0;
  const Status s = device_sms(&sms);
  if (!s.ok()) return s;
  out->sms = sms;
  out->slots = sms * sm90::decode_ctas_per_sm(p.kv.format);
  out->tile = sm90::decode_tile_tokens(p.kv.format);
  out->max_items = cuda_layout(p.batch, p.s_q, sms).max_items;
  return Status::success();
}

Status plan_with_list(const Problem& p, const WorkList& wl, std::span<const std::int32_t> lengths, int grid,
                      void* workspace, std::size_t bytes, Plan* out) {
  if (std::int64_t(lengths.size()) != p.total_q || !is_work_list_of(wl, lengths)) {
    return {StatusCode::invalid_argument, "plan_with_list: the list does not cover the problem's rows"};
  }
  const bool walks = grid > 0 && grid < int(wl.items.size());
  if (walks && p.kv.format != KvFormat::bf16) {
    return {StatusCode::unsupported, "plan_with_list: only bf16's CTAs walk several items"};
  }
  if (walks && !walks_every_item_once(wl.items, grid)) {
    return {StatusCode::invalid_argument, "plan_with_list: the CTAs' chains do not take every item once"};
  }
  // Its counts from the list itself, and tokens_per_split at least its longest item (the kernels size
  // their loops by them).
  WorkList own = wl;
  own.num_partials = own.num_split_requests = own.max_request_partials = 0;
  for (const RequestSplit& sp : own.splits) {
    own.num_partials += sp.num_partials;
    own.num_split_requests += sp.num_partials > 0 ? 1 : 0;
    own.max_request_partials = std::max(own.max_request_partials, sp.num_partials);
  }
  // (The planner's own value where it holds every item: build_work_list's chunk may exceed its longest item.)
  const int given = own.tokens_per_split;
  set_tokens_per_split(&own, sm90::decode_tile_tokens(p.kv.format));
  own.tokens_per_split = std::max(given, own.tokens_per_split);
  if (!walks) {
    for (WorkItem& it : own.items) it.next = -1;
  }
  return plan_impl(p, &own, walks ? grid : 0, workspace, bytes, out);
}

Status run(const Problem& p, const Plan& plan, void* stream) {
  // The workspace, the work list's device copy and the kernels' shared-memory attributes are the
  // plan's device's: launching on another would read them across devices, or fail to launch.
  int device = -1;
  cudaError_t current = cudaGetDevice(&device);
  if (current != cudaSuccess) return cuda_fail("cudaGetDevice", current);
  if (device != plan.device) {
    return {StatusCode::invalid_argument, "plan was made on CUDA device " + std::to_string(plan.device) +
                                              ", the current device is " + std::to_string(device) +
                                              ": plan() again on this device, or make device " +
                                              std::to_string(plan.device) + " current"};
  }
  const WorkspaceLayout layout = cuda_layout(plan.batch, plan.s_q, plan.device_sms);
  auto* base = static_cast<std::uint8_t*>(plan.workspace);
  auto* st = static_cast<cudaStream_t>(stream);

  sm90::DecodeParams d{};
  d.q = p.q;
  d.s_q = p.s_q;
  d.kv = static_cast<const std::uint8_t*>(p.kv.data);
  d.kv_row_stride = p.kv.row_stride_bytes;
  d.kv_scales = p.kv.format == KvFormat::mxfp4 ? p.kv.scales : nullptr;
  d.scale_stride = p.kv.scale_stride;
  d.scale_bytes = p.kv.format == KvFormat::mxfp4 ? p.kv.rows * p.kv.scale_stride : 0;  // validate(): no overflow
  d.page_table = p.paging.page_size != 0 ? p.paging.page_table : nullptr;
  d.page_table_stride = p.paging.page_table_stride;
  d.page_shift = page_shift(p.paging.page_size);
  d.items = reinterpret_cast<const WorkItem*>(base + layout.items_offset);
  d.num_items = plan.num_work_items;
  d.ctas = plan.grid;
  d.max_item_tokens = plan.tokens_per_split;
  d.kv_evict_first = plan.kv_evict_first && sm90::has_evict_first_kernel(p.kv.format, plan.rows_per_item);
  // Whole tiles by TMA when the plan says so and the kernel has a TMA instantiation (any other tile
  // goes by cp.async in that kernel too).
  sm90::TensorMapShape map{};
  const sm90::DecodeVariant variant =
      sm90::decode_variant_of(p.kv.format, d.ctas, d.num_items, d.max_item_tokens, plan.rows_per_item);
  d.kv_tma = plan.kv_tma && sm90::has_tma_kernel(p.kv.format, variant, plan.rows_per_item) && kv_map_shape(p, &map);
  if (d.kv_tma) {
    const Status s = encode_kv_map(p, map, &d.kv_map);
    if (!s.ok()) return s;
  }
  const auto* host_items = static_cast<const std::vector<WorkItem>*>(plan.host_work_list.get());
  if (host_items != nullptr && sm90::items_in_params(plan.num_work_items) &&
      host_items->size() == std::size_t(plan.num_work_items)) {
    std::copy(host_items->begin(), host_items->end(), d.param_items);
    d.num_param_items = plan.num_work_items;
  }
  const float kv_scale = p.kv.format == KvFormat::fp8 ? p.kv.fp8_scale : 1.0f;
  d.logit_scale = p.sm_scale * kv_scale;
  d.value_scale = kv_scale;
  d.out = p.out;
  d.lse = p.lse;
  d.partial_o = base + layout.partial_o_offset;
  d.partial_scale = reinterpret_cast<float*>(base + layout.partial_scale_offset);
  d.partial_lse = reinterpret_cast<float*>(base + layout.partial_lse_offset);
  d.cluster = plan.cluster_size;
  d.rows_per_item = plan.rows_per_item;
  cudaError_t e = sm90::launch_decode(p.kv.format, d, st);
  if (e != cudaSuccess) return cuda_fail("launching the decode kernel", e);
  if (plan.num_split_requests > 0 && plan.cluster_size == 0) {
    sm90::CombineParams c{};
    c.splits = reinterpret_cast<const RequestSplit*>(base + layout.splits_offset);
    c.rows = int(p.total_q);
    c.partial_o = d.partial_o;
    c.partial_scale = d.partial_scale;
    c.partial_f16 = sm90::decode_partials_f16(p.kv.format);
    c.partial_lse = d.partial_lse;
    c.out = p.out;
    c.lse = p.lse;
    e = sm90::launch_combine(c, plan.max_request_partials, plan.device_sms, st);
    if (e != cudaSuccess) return cuda_fail("launching the combine kernel", e);
  }
  return Status::success();
}

}  // namespace mla::cuda
