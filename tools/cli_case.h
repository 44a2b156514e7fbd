// One benchmark/check case on one backend: the backend's buffers, workspace and plan, and the
// correctness check against the float64 reference (on a sample of requests for large batches).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mla/mla.h"
#include "testing/compare.h"
#include "testing/device_inputs.h"
#include "testing/gpu_timing.h"
#include "testing/inputs.h"

namespace mla::tools {

struct CheckResult {
  Status status;            // the pipeline's first error (ok when it ran to the end)
  testing::Comparison cmp;  // over the checked requests
  int requests_checked = 0;
  int batch = 0;
  // Worst per-request relerr among the checked requests: the case's relerr is dominated by the
  // requests with the largest outputs (short ones), so a long request's error can hide in it.
  double worst_request_relerr = 0;
  int worst_request = -1;
  bool bound_per_request = false;  // also require worst_request_relerr <= relerr_bound
  std::int64_t nonfinite_out = 0;  // NaN/Inf anywhere in the whole output (outputs start as NaN)
  std::int64_t nan_lse = 0;        // NaN anywhere in the whole LSE
  bool guards_intact = true;       // cuda: no byte around a device buffer changed
  double relerr_bound = 4e-3;
  double lse_bound = 1e-4;

  bool passed() const;
  std::string failure() const;  // why not passed ("" when passed)
};

// Requests to check: all of them when batch <= max_requests, else max_requests spread evenly
// over the batch (first and last included).
std::vector<int> sample_requests(int batch, int max_requests);

// The backend a command runs on: `requested`, else cuda when an sm_90 GPU is usable, else cpu.
// For cuda also creates the timer (which owns the stream the command runs on) and fills `gpu`.
// On failure prints "mla <command>: ..." to stderr and returns false.
bool select_backend(const char* command, std::optional<Backend> requested, Backend* backend,
                    std::unique_ptr<testing::GpuTimer>* timer, testing::GpuInfo* gpu);

class PreparedCase {
 public:
  // `in` must outlive the case. For Backend::cuda, `gpu` supplies the stream (and must be set).
  // Returns the first failing status of upload / workspace_size / plan (e.g. unsupported).
  static Status prepare(const testing::HostInputs& in, Backend backend, testing::GpuTimer* gpu,
                        std::unique_ptr<PreparedCase>* out);

  const Problem& problem() const { return *problem_; }
  const Plan& plan() const { return plan_; }
  // Overrides plan()'s choice of the KV's L2 policy (speed only; `mla bench --kv-l2`).
  void set_kv_evict_first(bool on) { plan_.kv_evict_first = on; }
  // Overrides plan()'s choice of bf16's and fp8's whole-tile copies (speed only; `mla bench --kv-copy`).
  void set_kv_tma(bool on) { plan_.kv_tma = on; }
  Backend backend() const { return backend_; }

  // The user's call: mla::run on `stream` (ignored by the cpu backend).
  Status run(void* stream) const { return mla::run(*problem_, plan_, stream); }

  // Fills the outputs with NaN, runs once, and compares with the reference.
  CheckResult check(int max_requests);

  // The host time of mla::plan for this case, `reps` calls (µs each; cuda: its copies of the
  // indptr, page table and work list included), each into a plan of its own: the workspace is
  // filled again with the same list, so no run may be in flight and plan() keeps its overrides.
  Status time_plan(int reps, std::vector<double>* us) const;

 private:
  PreparedCase() = default;

  const testing::HostInputs* in_ = nullptr;
  Backend backend_ = Backend::cpu;
  testing::GpuTimer* gpu_ = nullptr;
  // cpu
  struct alignas(256) Block {
    unsigned char bytes[256];
  };
  std::vector<std::uint16_t> out_;
  std::vector<float> lse_;
  std::vector<Block> workspace_;
  Problem host_problem_;
  // cuda
  std::unique_ptr<testing::DeviceCase> device_;
  testing::DeviceMemory device_workspace_;

  const Problem* problem_ = nullptr;
  void* plan_workspace_ = nullptr;  // plan()'s: workspace_ (cpu) or device_workspace_ (cuda)
  std::size_t plan_workspace_bytes_ = 0;
  Plan plan_;
};

}  // namespace mla::tools
