#include "cli_case.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "host/problem_access.h"
#include "kernels/common/bf16.h"

namespace mla::tools {
namespace {

constexpr std::int64_t kOutRow = std::int64_t(kNumHeads) * kValueDim;  // bf16 per q row of out
constexpr std::int64_t kQRow = std::int64_t(kNumHeads) * kHeadDim;     // bf16 per q row of q

bool bf16_nonfinite(std::uint16_t b) {
  return (b & 0x7F80u) == 0x7F80u;
}

// The reference for `requests` of the host problem `p`, and the backend's rows for them.
// When every request is checked the problem is used as is; otherwise a sub-problem over the same
// KV cache holds just those requests, their tokens mapped through a flat page-size-1 table.
Status reference_for(const Problem& p, const std::vector<int>& requests, const std::vector<std::uint16_t>& out,
                     const std::vector<float>& lse, testing::Reference* ref, std::vector<std::uint16_t>* sub_out,
                     std::vector<float>* sub_lse) {
  const int k = int(requests.size());
  if (k == p.batch) {
    *ref = testing::reference_decode(p);
    *sub_out = out;
    *sub_lse = lse;
    return Status::success();
  }
  std::vector<std::uint16_t> q;
  std::vector<std::int32_t> qo(1, 0), kv(1, 0), table;
  sub_out->clear();
  sub_lse->clear();
  for (int b : requests) {
    const std::int64_t q0 = p.qo_indptr[b];
    q.insert(q.end(), p.q + q0 * kQRow, p.q + (q0 + p.s_q) * kQRow);
    sub_out->insert(sub_out->end(), out.begin() + q0 * kOutRow, out.begin() + (q0 + p.s_q) * kOutRow);
    if (!lse.empty()) {
      sub_lse->insert(sub_lse->end(), lse.begin() + q0 * kNumHeads, lse.begin() + (q0 + p.s_q) * kNumHeads);
    }
    const std::int32_t len = kv_length(p, b);
    for (std::int32_t n = 0; n < len; ++n) {
      const std::int64_t row = physical_row(p, b, n);
      if (row > std::numeric_limits<std::int32_t>::max()) {
        return {StatusCode::invalid_argument, "sampled reference: KV row index past int32"};
      }
      table.push_back(std::int32_t(row));
    }
    qo.push_back(qo.back() + p.s_q);
    kv.push_back(kv.back() + len);
  }
  Problem s = p;
  s.batch = k;
  s.total_q = std::int64_t(k) * p.s_q;
  s.q = q.data();
  s.qo_indptr = qo.data();
  s.kv_indptr = kv.data();
  if (table.empty()) {
    s.paging = Paging{};  // no tokens at all: contiguous, every length 0
  } else {
    s.paging.page_size = 1;
    s.paging.page_table = table.data();
    s.paging.page_table_entries = std::int64_t(table.size());
    s.paging.page_table_stride = 0;
  }
  std::vector<std::uint16_t> scratch(std::size_t(s.total_q * kOutRow));
  s.out = scratch.data();
  s.lse = nullptr;
  const Status v = validate(s, Backend::cpu);
  if (!v.ok()) return {v.code, "sampled reference problem: " + v.message};
  *ref = testing::reference_decode(s);
  return Status::success();
}

}  // namespace

bool CheckResult::passed() const {
  return status.ok() && cmp.ok(relerr_bound, lse_bound) && nonfinite_out == 0 && nan_lse == 0 && guards_intact &&
         !(bound_per_request && !(worst_request_relerr <= relerr_bound));
}

std::string CheckResult::failure() const {
  if (!status.ok()) return status.message;
  std::ostringstream os;
  if (!cmp.ok(relerr_bound, lse_bound)) os << cmp.summary() << "; ";
  if (nonfinite_out) os << nonfinite_out << " non-finite output elements; ";
  if (nan_lse) os << nan_lse << " NaN LSE entries; ";
  if (!guards_intact) os << "guard bytes around a device buffer changed; ";
  if (bound_per_request && !(worst_request_relerr <= relerr_bound)) {
    os << "request " << worst_request << " has relerr " << worst_request_relerr << "; ";
  }
  std::string s = os.str();
  if (s.size() >= 2) s.resize(s.size() - 2);
  return s;
}

std::vector<int> sample_requests(int batch, int max_requests) {
  std::vector<int> r;
  if (batch <= max_requests || max_requests < 2) {
    const int n = batch <= max_requests ? batch : 1;
    for (int b = 0; b < n; ++b) r.push_back(b);
    return r;
  }
  for (int i = 0; i < max_requests; ++i) {
    const int b = int((std::int64_t(i) * (batch - 1) + (max_requests - 1) / 2) / (max_requests - 1));
    if (r.empty() || r.back() != b) r.push_back(b);
  }
  return r;
}

Status PreparedCase::prepare(const testing::HostInputs& in, Backend backend, testing::GpuTimer* gpu,
                             std::unique_ptr<PreparedCase>* out) {
  std::unique_ptr<PreparedCase> c(new PreparedCase());
  c->in_ = &in;
  c->backend_ = backend;
  c->gpu_ = gpu;
  void* workspace = nullptr;
  std::size_t bytes = 0;
  if (backend == Backend::cpu) {
    c->out_.assign(std::size_t(in.total_q * kOutRow), 0xFFFFu);
    c->lse_.assign(std::size_t(in.total_q * kNumHeads), std::numeric_limits<float>::quiet_NaN());
    c->host_problem_ = in.problem(c->out_.data(), c->lse_.data());
    c->problem_ = &c->host_problem_;
    Status s = workspace_size(*c->problem_, backend, &bytes);
    if (!s.ok()) return s;
    c->workspace_.resize((bytes + sizeof(Block) - 1) / sizeof(Block) + 1);
    workspace = c->workspace_.data();
  } else {
    if (!gpu) return {StatusCode::no_device, "the cuda backend needs a GPU timer (no GPU?)"};
    Status s = testing::upload(in, /*with_lse=*/true, &c->device_);
    if (!s.ok()) return s;
    c->problem_ = &c->device_->problem();
    s = workspace_size(*c->problem_, backend, &bytes);
    if (!s.ok()) return s;
    s = c->device_workspace_.allocate(bytes ? bytes : 256);
    if (!s.ok()) return s;
    workspace = c->device_workspace_.get();
  }
  c->plan_workspace_ = workspace;
  c->plan_workspace_bytes_ = bytes;
  Status s = mla::plan(*c->problem_, backend, workspace, bytes, &c->plan_);
  if (!s.ok()) return s;
  *out = std::move(c);
  return Status::success();
}

Status PreparedCase::time_plan(int reps, std::vector<double>* us) const {
  us->clear();
  for (int i = 0; i < reps; ++i) {
    Plan p;
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = mla::plan(*problem_, backend_, plan_workspace_, plan_workspace_bytes_, &p);
    us->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!s.ok()) return s;
  }
  return Status::success();
}

CheckResult PreparedCase::check(int max_requests) {
  CheckResult r;
  r.batch = in_->batch;
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
  if (backend_ == Backend::cpu) {
    std::fill(out_.begin(), out_.end(), std::uint16_t(0xFFFFu));
    std::fill(lse_.begin(), lse_.end(), std::numeric_limits<float>::quiet_NaN());
    r.status = run(nullptr);
    if (!r.status.ok()) return r;
    out = out_;
    lse = lse_;
  } else {
    r.status = device_->poison_outputs();
    if (r.status.ok()) r.status = gpu_->synchronize();
    if (r.status.ok()) r.status = run(gpu_->stream());
    if (r.status.ok()) r.status = gpu_->synchronize();
    if (r.status.ok()) r.status = device_->download(&out, &lse);
    if (r.status.ok()) r.status = device_->guards_intact(&r.guards_intact);
    if (!r.status.ok()) return r;
  }
  for (std::uint16_t v : out) r.nonfinite_out += bf16_nonfinite(v);
  for (float v : lse) r.nan_lse += std::isnan(v);

  // The reference reads the host copy of the inputs (same bytes as the device copy).
  std::vector<std::uint16_t> dummy_out(std::size_t(in_->total_q * kOutRow));
  const Problem host = in_->problem(dummy_out.data(), nullptr);
  const std::vector<int> requests = sample_requests(in_->batch, max_requests);
  testing::Reference ref;
  std::vector<std::uint16_t> sub_out;
  std::vector<float> sub_lse;
  r.status = reference_for(host, requests, out, lse, &ref, &sub_out, &sub_lse);
  if (!r.status.ok()) return r;
  r.requests_checked = int(requests.size());
  r.cmp = testing::compare(sub_out, sub_lse, ref);
  // Per request: rows [i·s_q, (i+1)·s_q) of the checked set.
  const std::size_t per = std::size_t(in_->spec.s_q * kOutRow);
  for (std::size_t i = 0; i < requests.size() && sub_out.size() == ref.out.size(); ++i) {
    double num = 0, den = 0;
    for (std::size_t j = i * per; j < (i + 1) * per; ++j) {
      const double d = double(bf16_to_float(sub_out[j])) - ref.out[j];
      num += d * d;
      den += ref.out[j] * ref.out[j];
    }
    const double e = den > 0 ? std::sqrt(num / den) : (num == 0 ? 0.0 : std::numeric_limits<double>::infinity());
    if (!std::isnan(r.worst_request_relerr) && (std::isnan(e) || e > r.worst_request_relerr)) {
      r.worst_request_relerr = e;
      r.worst_request = requests[i];
    }
  }
  return r;
}

bool select_backend(const char* command, std::optional<Backend> requested, Backend* backend,
                    std::unique_ptr<testing::GpuTimer>* timer, testing::GpuInfo* gpu) {
  const bool have_gpu = cuda_available();
  *backend = requested.value_or(have_gpu ? Backend::cuda : Backend::cpu);
  *gpu = testing::gpu_info();
  if (*backend != Backend::cuda) return true;
  if (!have_gpu) {
    std::fprintf(stderr, "mla %s: --backend cuda: no usable sm_90 GPU (%s)\n", command,
                 gpu->available ? (gpu->name + " is not compute capability 9.0").c_str() : gpu->error.c_str());
    return false;
  }
  const Status s = testing::GpuTimer::create(timer);
  if (!s.ok()) {
    std::fprintf(stderr, "mla %s: cannot set up the GPU: %s\n", command, s.message.c_str());
    return false;
  }
  return true;
}

}  // namespace mla::tools
