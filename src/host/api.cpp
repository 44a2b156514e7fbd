// Public entry points: validation, then a plain switch to the backend.
#include <new>
#include <sstream>
#include <string>

#include "cpu/cpu_backend.h"
#include "host/cuda_backend.h"
#include "host/validate.h"
#include "kernels/sm90/decode_params.h"
#include "mla/mla.h"

namespace mla {
namespace {

// plan() and run() allocate host memory (the work list, the CPU backend's scratch): an exhausted
// heap comes back as a status, not as an exception through the Status API. The message itself may
// not be allocatable then, so it falls back to none.
template <typename F>
Status without_exceptions(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    try {
      return {StatusCode::out_of_memory, "host memory ran out"};
    } catch (const std::bad_alloc&) {
      return {StatusCode::out_of_memory, std::string()};
    }
  }
}

}  // namespace

Status validate(const Problem& p, Backend backend) {
  Status s = validate_description(p, backend);
  if (!s.ok()) return s;
  switch (backend) {
    case Backend::cpu:
      return validate_contents(p, p.qo_indptr, p.kv_indptr, p.paging.page_size ? p.paging.page_table : nullptr);
    case Backend::cuda:
      return s;  // contents are device memory: plan() copies and checks them
  }
  return {StatusCode::invalid_argument, "unknown backend"};
}

Status workspace_size(const Problem& p, Backend backend, std::size_t* bytes) {
  if (!bytes) return {StatusCode::invalid_argument, "bytes is null"};
  Status s = validate_description(p, backend);
  if (!s.ok()) return s;
  switch (backend) {
    case Backend::cpu:
      *bytes = cpu::workspace_size(p);
      return Status::success();
    case Backend::cuda:
      return cuda::workspace_size(p, bytes);
  }
  return {StatusCode::invalid_argument, "unknown backend"};
}

namespace {

Status plan_checked(const Problem& p, Backend backend, void* workspace, std::size_t workspace_bytes, Plan* out) {
  if (!out) return {StatusCode::invalid_argument, "plan output is null"};
  Status s = validate(p, backend);
  if (!s.ok()) return s;
  if (!workspace) return {StatusCode::invalid_argument, "workspace is null"};
  switch (backend) {
    case Backend::cpu:
      s = cpu::plan(p, workspace, workspace_bytes, out);
      break;
    case Backend::cuda:
      s = cuda::plan(p, workspace, workspace_bytes, out);
      break;
    default:
      return {StatusCode::invalid_argument, "unknown backend"};
  }
  if (s.ok()) out->page_size = p.paging.page_size;
  return s;
}

Status run_checked(const Problem& p, const Plan& plan, void* stream) {
  Status s = validate_description(p, plan.backend);
  if (!s.ok()) return s;
  if (plan.workspace == nullptr || plan.batch != p.batch || plan.s_q != p.s_q || plan.total_q != p.total_q) {
    return {StatusCode::invalid_argument,
            "plan does not match this problem (batch, s_q or total_q differ, or plan is empty)"};
  }
  if (plan.kv_format != p.kv.format) {  // the work list (its tile, the CTAs' wave) and the kernel depend on it
    return {StatusCode::invalid_argument, std::string("plan was made for ") + to_string(plan.kv_format) +
                                              " KV, the problem's is " + to_string(p.kv.format)};
  }
  switch (plan.backend) {
    case Backend::cpu:
      return cpu::run(p, plan);
    case Backend::cuda:
      return cuda::run(p, plan, stream);
  }
  return {StatusCode::invalid_argument, "unknown backend"};
}

}  // namespace

Status plan(const Problem& p, Backend backend, void* workspace, std::size_t workspace_bytes, Plan* out) {
  return without_exceptions([&] { return plan_checked(p, backend, workspace, workspace_bytes, out); });
}

Status run(const Problem& p, const Plan& plan, void* stream) {
  return without_exceptions([&] { return run_checked(p, plan, stream); });
}

bool cuda_available() {
  return cuda::available();
}

std::string describe(const Plan& plan) {
  std::ostringstream os;
  os << "plan[" << to_string(plan.backend) << "] kv=" << to_string(plan.kv_format) << " batch=" << plan.batch
     << " s_q=" << plan.s_q << " total_kv=" << plan.total_kv << " work_items=" << plan.num_work_items
     << " tokens_per_split=" << plan.tokens_per_split << " split_requests=" << plan.num_split_requests
     << " max_partials=" << plan.max_request_partials << " grid=" << plan.grid << " workspace=" << plan.workspace_bytes
     << "B";
  if (plan.backend == Backend::cuda) {
    os << " device=" << plan.device << " sms=" << plan.device_sms << " cluster=" << plan.cluster_size
       << " rows_per_item=" << plan.rows_per_item;
    const sm90::DecodeVariant variant = sm90::decode_variant_of(plan.kv_format, plan.grid, plan.num_work_items,
                                                                plan.tokens_per_split, plan.rows_per_item);
    switch (variant) {
      case sm90::DecodeVariant::general:
        os << " kernel=general";
        break;
      case sm90::DecodeVariant::walking:
        os << " kernel=walking";
        break;
      case sm90::DecodeVariant::one_tile:
        os << " kernel=one-tile";
        break;
    }
    const bool in_params = plan.host_work_list != nullptr && sm90::items_in_params(plan.num_work_items);
    os << " items_from=" << (in_params ? "params" : "workspace");
    const bool evict_first =  // the L2 policy that runs
        plan.kv_evict_first && sm90::has_evict_first_kernel(plan.kv_format, plan.rows_per_item);
    os << " kv_l2=" << (evict_first ? "evict_first" : "normal");
    const bool tma_asked = plan.kv_tma && plan.kv_map_fits;  // run() takes the TMA where the kernel has it
    if (plan.kv_format != KvFormat::mxfp4) {                 // the formats with a TMA kernel: the copy path that runs
      const bool tma = tma_asked && sm90::has_tma_kernel(plan.kv_format, variant, plan.rows_per_item);
      os << " kv_copy=" << (tma ? "tma" : "cp.async");
    }
    os << " kv_rows="
       << sm90::to_string(sm90::row_path(plan.kv_format, variant, plan.rows_per_item, plan.page_size, tma_asked));
  }
  return os.str();
}

}  // namespace mla
