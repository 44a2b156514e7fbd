// The CPU backend: float32 math, one online softmax (SoftmaxState<float>) per query row and head,
// std::thread over the planner's work items, then a combine pass over split requests.
//
// Per work item all s_q × 16 query rows are processed together: the KV range is walked in tiles
// of 64 tokens, each token's row dequantized once into floats, logits computed for every row
// (causal limit per query token), and the tile folded into each row's state and fp32 accumulator.
#include "cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "host/planner.h"
#include "host/problem_access.h"
#include "host/validate.h"
#include "kernels/common/bf16.h"
#include "kernels/common/formats.h"
#include "kernels/common/partial.h"
#include "kernels/common/softmax_state.h"

namespace mla::cpu {
namespace {

constexpr int kTile = 64;
using State = SoftmaxState<float>;

int hardware_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}

int target_items() {
  return 4 * hardware_threads();
}

// Runs worker(t) for t = 0 .. n − 1, worker 0 on the calling thread. The workers share their work
// through an atomic counter, so a thread the system refuses (std::system_error) is simply not
// started: fewer workers do the same work, and no joinable thread is left to terminate the process.
template <typename Worker>
void run_workers(int n, const Worker& worker) {
  std::vector<std::thread> pool;
  pool.reserve(std::size_t(std::max(n - 1, 0)));
  for (int t = 1; t < n; ++t) {
    try {
      pool.emplace_back(worker, t);
    } catch (const std::system_error&) {
      break;
    }
  }
  worker(0);
  for (auto& th : pool) th.join();
}

template <typename Fn>
void parallel_for(int count, int threads, Fn&& fn) {
  std::atomic<int> next{0};
  run_workers(std::min(count, threads), [&](int) {
    for (int i = next.fetch_add(1); i < count; i = next.fetch_add(1)) fn(i);
  });
}

// Dequantizes KV rows into floats (bf16 and MXFP4 exactly; fp8 as e4m3 × tensor scale rounded once to fp32).
class RowDecoder {
 public:
  explicit RowDecoder(const KvCache& kv) : kv_(kv) {
    if (kv.format == KvFormat::fp8) {
      for (int b = 0; b < 256; ++b) fp8_[b] = decode_e4m3(std::uint8_t(b)) * kv.fp8_scale;
    }
    for (int c = 0; c < 16; ++c) e2m1_[c] = decode_e2m1(std::uint8_t(c));
  }

  void decode(std::int64_t row, float* dst) const {
    const auto* src = static_cast<const std::uint8_t*>(kv_.data) + row * kv_.row_stride_bytes;
    switch (kv_.format) {
      case KvFormat::bf16:
        for (int d = 0; d < kHeadDim; ++d) {
          std::uint16_t bits;
          std::memcpy(&bits, src + 2 * d, 2);
          dst[d] = bf16_to_float(bits);
        }
        break;
      case KvFormat::fp8:
        for (int d = 0; d < kHeadDim; ++d) dst[d] = fp8_[src[d]];
        break;
      case KvFormat::mxfp4: {
        const std::uint8_t* scales = kv_.scales + row * kv_.scale_stride;
        for (int k = 0; k < kMxfp4ScalesPerRow; ++k) {
          const float s = decode_e8m0(scales[k]);
          const std::uint8_t* bytes = src + k * (kMxfp4Block / 2);
          float* out = dst + k * kMxfp4Block;
          for (int j = 0; j < kMxfp4Block / 2; ++j) {
            out[2 * j] = e2m1_[bytes[j] & 0xF] * s;
            out[2 * j + 1] = e2m1_[bytes[j] >> 4] * s;
          }
        }
        break;
      }
    }
  }

 private:
  const KvCache& kv_;
  float fp8_[256] = {};
  float e2m1_[16] = {};
};

struct Workspace {
  WorkspaceLayout layout;
  std::uint8_t* base = nullptr;
  WorkItem* items() const { return reinterpret_cast<WorkItem*>(base + layout.items_offset); }
  RequestSplit* splits() const { return reinterpret_cast<RequestSplit*>(base + layout.splits_offset); }
  std::uint16_t* partial_o() const { return reinterpret_cast<std::uint16_t*>(base + layout.partial_o_offset); }
  float* partial_scale() const { return reinterpret_cast<float*>(base + layout.partial_scale_offset); }
  float* partial_lse() const { return reinterpret_cast<float*>(base + layout.partial_lse_offset); }
};

Workspace workspace_of(const Problem& p, void* ptr) {
  return {workspace_layout(p.batch, p.s_q, target_items()), static_cast<std::uint8_t*>(ptr)};
}

// Per-thread scratch, sized for s_q = kMaxSq.
struct Scratch {
  std::vector<float> qt = std::vector<float>(std::size_t(kHeadDim) * kMaxSq * kNumHeads);    // [576][rows]
  std::vector<float> tile = std::vector<float>(std::size_t(kTile) * kHeadDim);               // [64][576]
  std::vector<float> logits = std::vector<float>(std::size_t(kMaxSq) * kNumHeads * kTile);   // [rows][64]
  std::vector<float> acc = std::vector<float>(std::size_t(kMaxSq) * kNumHeads * kValueDim);  // [rows][512]
  std::vector<State> state = std::vector<State>(std::size_t(kMaxSq) * kNumHeads);
};

template <int SQ>
void process_item(const Problem& p, const RowDecoder& dec, const Workspace& ws, const WorkItem& item, Scratch& sc) {
  constexpr int kRows = SQ * kNumHeads;
  const int b = item.request;
  const std::int64_t len = kv_length(p, b);
  const std::int64_t qrow0 = std::int64_t(p.qo_indptr[b]) * kNumHeads;  // first (token, head) row
  float* qt = sc.qt.data();
  for (int r = 0; r < kRows; ++r) {
    const std::uint16_t* q = p.q + (qrow0 + r) * kHeadDim;
    for (int d = 0; d < kHeadDim; ++d) qt[d * kRows + r] = bf16_to_float(q[d]);
  }
  std::int64_t visible[SQ];
  std::int64_t end_all = item.kv_begin;
  for (int i = 0; i < SQ; ++i) {
    visible[i] = std::min<std::int64_t>(item.kv_end, visible_keys(len, SQ, i));
    end_all = std::max(end_all, visible[i]);
  }
  float* acc = sc.acc.data();
  State* st = sc.state.data();
  std::fill(acc, acc + std::size_t(kRows) * kValueDim, 0.0f);
  for (int r = 0; r < kRows; ++r) st[r] = State::empty();
  float* tile = sc.tile.data();
  float* logits = sc.logits.data();
  const float sm_scale = p.sm_scale;

  for (std::int64_t t0 = item.kv_begin; t0 < end_all; t0 += kTile) {
    const int nt = int(std::min<std::int64_t>(kTile, end_all - t0));
    for (int n = 0; n < nt; ++n) dec.decode(physical_row(p, b, t0 + n), tile + n * kHeadDim);
    for (int n = 0; n < nt; ++n) {
      const float* k = tile + n * kHeadDim;
      float s[kRows] = {};
      for (int d = 0; d < kHeadDim; ++d) {
        const float kd = k[d];
        const float* qd = qt + d * kRows;
        for (int r = 0; r < kRows; ++r) s[r] += qd[r] * kd;
      }
      for (int r = 0; r < kRows; ++r) logits[r * kTile + n] = s[r] * sm_scale;
    }
    for (int r = 0; r < kRows; ++r) {
      const int nv = int(std::clamp<std::int64_t>(visible[r / kNumHeads] - t0, 0, nt));
      if (nv == 0) continue;
      const float* lg = logits + r * kTile;
      float block_max = lg[0];
      for (int n = 1; n < nv; ++n) block_max = std::max(block_max, lg[n]);
      const float factor = st[r].rescale_to(block_max);
      float* a = acc + std::size_t(r) * kValueDim;
      if (factor != 1.0f) {
        for (int d = 0; d < kValueDim; ++d) a[d] *= factor;
      }
      const float m = st[r].m;
      float tile_l = 0.0f;  // the tile's terms summed first: a shorter float sum chain for l
      for (int n = 0; n < nv; ++n) {
        const float pn = std::exp(lg[n] - m);
        tile_l += pn;
        const float* v = tile + n * kHeadDim;
        for (int d = 0; d < kValueDim; ++d) a[d] += pn * v[d];
      }
      st[r].add(tile_l);
    }
  }

  if (item.partial < 0) {
    for (int r = 0; r < kRows; ++r) {
      const float inv = st[r].inv_l();
      const float* a = acc + std::size_t(r) * kValueDim;
      std::uint16_t* out = p.out + (qrow0 + r) * kValueDim;
      for (int d = 0; d < kValueDim; ++d) out[d] = float_to_bf16(a[d] * inv);
      if (p.lse) p.lse[qrow0 + r] = st[r].lse();
    }
  } else {
    const std::int64_t prow0 = std::int64_t(item.partial) * kRows;
    for (int r = 0; r < kRows; ++r) {
      const float inv = st[r].inv_l();
      const float* a = acc + std::size_t(r) * kValueDim;
      float amax = 0.0f;
      for (int d = 0; d < kValueDim; ++d) amax = std::max(amax, std::fabs(a[d] * inv));
      const PartialScale ps = partial_scale(amax);
      std::uint16_t* o = ws.partial_o() + (prow0 + r) * kValueDim;
      for (int d = 0; d < kValueDim; ++d) o[d] = float_to_half(a[d] * inv * ps.to_half);
      ws.partial_scale()[prow0 + r] = ps.scale;
      ws.partial_lse()[prow0 + r] = st[r].lse();
    }
  }
}

// Merges the partials of split request b into out/lse.
void combine_request(const Problem& p, const Workspace& ws, int b) {
  const RequestSplit split = ws.splits()[b];
  const int rows = p.s_q * kNumHeads;
  const std::int64_t qrow0 = std::int64_t(p.qo_indptr[b]) * kNumHeads;
  float acc[kValueDim];
  for (int r = 0; r < rows; ++r) {
    State st = State::empty();
    std::fill(acc, acc + kValueDim, 0.0f);
    for (int j = 0; j < split.num_partials; ++j) {
      const std::int64_t prow = std::int64_t(split.first_partial + j) * rows + r;
      float wa = 0, wb = 0;
      const State merged = State::merge(st, State::from_lse(ws.partial_lse()[prow]), &wa, &wb);
      const std::uint16_t* o = ws.partial_o() + prow * kValueDim;
      if (wb == 0.0f) {
        for (int d = 0; d < kValueDim; ++d) acc[d] *= wa;
      } else {
        const float w = wb * ws.partial_scale()[prow];
        for (int d = 0; d < kValueDim; ++d) acc[d] = wa * acc[d] + w * half_to_float(o[d]);
      }
      st = merged;
    }
    const float inv = st.inv_l();
    std::uint16_t* out = p.out + (qrow0 + r) * kValueDim;
    for (int d = 0; d < kValueDim; ++d) out[d] = float_to_bf16(acc[d] * inv);
    if (p.lse) p.lse[qrow0 + r] = st.lse();
  }
}

bool aligned_for_workspace(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % alignof(float) == 0;
}

}  // namespace

std::size_t workspace_size(const Problem& p) {
  return workspace_of(p, nullptr).layout.total_bytes;
}

Status plan(const Problem& p, void* workspace, std::size_t bytes, Plan* out) {
  const Workspace ws = workspace_of(p, workspace);
  if (bytes < ws.layout.total_bytes) {
    return {StatusCode::workspace_too_small, "cpu workspace of " + std::to_string(bytes) +
                                                 " bytes is smaller than the " + std::to_string(ws.layout.total_bytes) +
                                                 " bytes workspace_size() asks for"};
  }
  if (!aligned_for_workspace(workspace)) return {StatusCode::invalid_argument, "cpu workspace must be 4-byte aligned"};
  std::vector<std::int32_t> lengths(std::size_t(p.batch));
  for (int b = 0; b < p.batch; ++b) lengths[std::size_t(b)] = kv_length(p, b);
  WorkList wl = build_work_list(lengths, target_items(), kTile);
  set_kv_bases(wl.items, std::span<const std::int32_t>(p.kv_indptr, std::size_t(p.batch) + 1), 1);
  if (!ws.layout.holds(int(wl.items.size()), wl.num_partials)) {
    return {StatusCode::invalid_argument, "internal: work list larger than the workspace layout allows"};
  }
  std::memcpy(ws.items(), wl.items.data(), wl.items.size() * sizeof(WorkItem));
  std::memcpy(ws.splits(), wl.splits.data(), wl.splits.size() * sizeof(RequestSplit));
  Plan pl;
  pl.backend = Backend::cpu;
  pl.batch = p.batch;
  pl.s_q = p.s_q;
  pl.total_q = p.total_q;
  pl.kv_format = p.kv.format;
  pl.total_kv = p.kv_indptr[p.batch];
  pl.tokens_per_split = wl.tokens_per_split;
  pl.num_work_items = int(wl.items.size());
  pl.num_split_requests = wl.num_split_requests;
  pl.max_request_partials = wl.max_request_partials;
  pl.grid = std::min(hardware_threads(), pl.num_work_items);
  pl.workspace_bytes = ws.layout.total_bytes;
  pl.workspace = workspace;
  pl.device_sms = 0;
  *out = pl;
  return Status::success();
}

Status run(const Problem& p, const Plan& plan) {
  const Workspace ws = workspace_of(p, plan.workspace);
  if (plan.workspace_bytes < ws.layout.total_bytes || plan.num_work_items < 1 ||
      plan.num_work_items > ws.layout.max_items || !aligned_for_workspace(plan.workspace)) {
    return {StatusCode::invalid_argument, "plan's workspace does not fit this problem: plan again"};
  }
  // The arrays are host memory: re-checking them is cheap next to the work and keeps a stale plan
  // or a changed page table from reading out of bounds.
  Status s = validate_contents(p, p.qo_indptr, p.kv_indptr, p.paging.page_size ? p.paging.page_table : nullptr);
  if (!s.ok()) return s;
  if (p.kv_indptr[p.batch] != plan.total_kv) {
    return {StatusCode::invalid_argument, "kv lengths changed since plan(): plan again"};
  }
  const WorkItem* items = ws.items();
  for (int i = 0; i < plan.num_work_items; ++i) {
    const WorkItem& it = items[i];
    if (it.request < 0 || it.request >= p.batch || it.kv_begin < 0 || it.kv_end < it.kv_begin ||
        it.kv_end > kv_length(p, it.request) || it.partial >= ws.layout.max_partials) {
      return {StatusCode::invalid_argument, "work list does not match this problem: plan again"};
    }
  }

  const RequestSplit* splits = ws.splits();
  for (int b = 0; b < p.batch; ++b) {
    if (splits[b].num_partials < 0 || splits[b].first_partial < 0 ||
        std::int64_t(splits[b].first_partial) + splits[b].num_partials > ws.layout.max_partials) {
      return {StatusCode::invalid_argument, "work list does not match this problem: plan again"};
    }
  }

  const RowDecoder dec(p.kv);
  const int threads = std::min(hardware_threads(), plan.num_work_items);
  std::vector<Scratch> scratch(static_cast<std::size_t>(threads));
  std::atomic<int> next{0};
  auto worker = [&](int t) {
    Scratch& sc = scratch[std::size_t(t)];
    for (int i = next.fetch_add(1); i < plan.num_work_items; i = next.fetch_add(1)) {
      switch (p.s_q) {
        case 1:
          process_item<1>(p, dec, ws, items[i], sc);
          break;
        case 2:
          process_item<2>(p, dec, ws, items[i], sc);
          break;
        case 3:
          process_item<3>(p, dec, ws, items[i], sc);
          break;
        default:
          process_item<4>(p, dec, ws, items[i], sc);
          break;
      }
    }
  };
  run_workers(threads, worker);

  std::vector<int> split_requests;
  for (int b = 0; b < p.batch; ++b) {
    if (splits[b].num_partials > 0) split_requests.push_back(b);
  }
  parallel_for(int(split_requests.size()), hardware_threads(),
               [&](int i) { combine_request(p, ws, split_requests[std::size_t(i)]); });
  return Status::success();
}

}  // namespace mla::cpu
