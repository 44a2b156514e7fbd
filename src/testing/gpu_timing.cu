// GPU measurement harness (SPEC §4); see gpu_timing.h for the protocol.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/gpu_timing.h"
#include "testing/stream_read.h"

namespace mla::testing {
namespace {

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::success();
  return {StatusCode::cuda_error, std::string(what) + ": " + cudaGetErrorString(e)};
}

#define MLA_TIMING_TRY(expr)                           \
  do {                                                 \
    const ::mla::Status mla_try_status_ = (expr);      \
    if (!mla_try_status_.ok()) return mla_try_status_; \
  } while (0)

#define MLA_TIMING_CUDA(call) MLA_TIMING_TRY(cuda_status((call), #call))

// Busy-waits `ns` nanoseconds of the global timer on one thread. With `clocks` set, adds the SM
// cycles and the nanoseconds it spun to clocks[0] and clocks[1]: their ratio is the SM clock right
// before the call under test (small calls are latency at SM speed, so their times follow it).
__global__ void spin_kernel(unsigned long long ns, unsigned long long* clocks) {
  unsigned long long start = 0, now = 0;
  const long long c0 = clock64();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
  }
  const long long c1 = clock64();
  if (clocks != nullptr) {
    atomicAdd(clocks, static_cast<unsigned long long>(c1 - c0));
    atomicAdd(clocks + 1, now - start);
  }
}

// An empty launch: shifts where the next rep's work lands in the command stream (see one_rep).
__global__ void noop_kernel() {}

constexpr int kPhases = 4;  // command-stream positions a case's reps rotate through

std::string read_driver_release() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!f || !std::getline(f, line)) return "";
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..." → first token with
  // a dot after "Module".
  std::istringstream is(line);
  std::string tok;
  bool after_module = false;
  while (is >> tok) {
    if (after_module && tok.find('.') != std::string::npos) return tok;
    if (tok == "Module") after_module = true;
  }
  return "";
}

class CudaGpuTimer final : public GpuTimer {
 public:
  ~CudaGpuTimer() override {
    if (stream_) cudaStreamSynchronize(stream_);
    release_floor_buffer();
    if (sink_) cudaFree(sink_);
    if (clocks_) cudaFree(clocks_);
    if (flush_) cudaFree(flush_);
    if (a_) cudaEventDestroy(a_);
    if (b_) cudaEventDestroy(b_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init(std::size_t flush_bytes) {
    flush_bytes_ = flush_bytes;
    MLA_TIMING_CUDA(cudaStreamCreate(&stream_));
    MLA_TIMING_CUDA(cudaEventCreate(&a_));
    MLA_TIMING_CUDA(cudaEventCreate(&b_));
    MLA_TIMING_CUDA(cudaMalloc(&flush_, flush_bytes_));
    MLA_TIMING_CUDA(cudaMalloc(reinterpret_cast<void**>(&sink_), sizeof(unsigned)));
    MLA_TIMING_CUDA(cudaMemset(sink_, 0, sizeof(unsigned)));
    MLA_TIMING_CUDA(cudaMalloc(reinterpret_cast<void**>(&clocks_), 2 * sizeof(unsigned long long)));
    spin_kernel<<<1, 1, 0, stream_>>>(1000, nullptr);  // loads the module now, not in a timed rep
    MLA_TIMING_CUDA(cudaGetLastError());
    MLA_TIMING_CUDA(cudaDeviceSynchronize());
    return Status::success();
  }

  void* stream() const override { return stream_; }

  Status synchronize() override { return cuda_status(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  Status time_call(const Call& call, int reps, GpuTiming* out, int warmup) override {
    if (!out) return {StatusCode::invalid_argument, "timing output is null"};
    if (reps < 1) return {StatusCode::invalid_argument, "reps must be >= 1"};
    *out = GpuTiming{};
    for (int i = 0; i < warmup; ++i) {
      MLA_TIMING_TRY(call(stream_));
    }
    MLA_TIMING_TRY(synchronize());

    std::vector<double> call_us;
    std::vector<double> host_us;
    call_us.reserve(std::size_t(reps));
    for (int r = 0; r < reps; ++r) {
      double gpu = 0;
      double host = 0;
      MLA_TIMING_TRY(one_rep(call, r, /*spin_ns=*/0, &gpu, &host));
      call_us.push_back(gpu);
      host_us.push_back(host);
    }
    out->call = summarize(call_us);

    const double slowest_host = *std::max_element(host_us.begin(), host_us.end());
    const double spin_us = std::min(2000.0, std::max(kMinSpinUs, 3.0 * slowest_host + 10.0));
    out->spin_us = spin_us;

    std::vector<double> device_us;
    host_us.clear();
    MLA_TIMING_CUDA(cudaMemsetAsync(clocks_, 0, 2 * sizeof(unsigned long long), stream_));
    for (int r = 0; r < reps; ++r) {
      double gpu = 0;
      double host = 0;
      // The spin starts once its launch reaches the GPU (a few µs after the host's launch call), so a
      // host enqueue shorter than the spin is hidden. A rep whose enqueue outlasted it (the process
      // descheduled, say) timed host work too: it is redone with a spin twice as long (at most
      // 2000 µs), up to kMaxRedos times; redone_reps counts such reps (not attempts), and
      // unhidden_reps those never hidden.
      double spin = spin_us;
      for (int attempt = 0;; ++attempt) {
        MLA_TIMING_TRY(one_rep(call, r, static_cast<unsigned long long>(spin * 1000.0), &gpu, &host));
        if (host < spin) break;
        if (attempt == kMaxRedos) {
          ++out->unhidden_reps;
          break;
        }
        if (attempt == 0) ++out->redone_reps;
        spin = std::min(2000.0, 2.0 * spin);
      }
      device_us.push_back(gpu);
      host_us.push_back(host);
    }
    out->device = summarize(device_us);
    unsigned long long clocks[2] = {0, 0};
    MLA_TIMING_CUDA(cudaMemcpy(clocks, clocks_, sizeof(clocks), cudaMemcpyDeviceToHost));
    if (clocks[1] > 0) out->spin_sm_mhz = 1000.0 * double(clocks[0]) / double(clocks[1]);
    const Stats h = summarize(host_us);
    out->host_us_median = h.median_us;
    out->host_us_max = h.max_us;
    return Status::success();
  }

  Status time_floor(std::int64_t bytes, int reps, GpuTiming* out, int warmup) override {
    if (bytes <= 0) return {StatusCode::invalid_argument, "floor bytes must be > 0"};
    const std::int64_t n16 = (bytes + 15) / 16;
    const std::int64_t padded =
        (bytes + floor_read::kBlockBytes - 1) / floor_read::kBlockBytes * floor_read::kBlockBytes;
    if (padded > floor_bytes_) {
      release_floor_buffer();
      MLA_TIMING_CUDA(cudaMalloc(&floor_, std::size_t(padded)));
      floor_bytes_ = padded;
      MLA_TIMING_CUDA(cudaMemset(floor_, 0x5A, std::size_t(padded)));
      MLA_TIMING_CUDA(cudaDeviceSynchronize());
    }
    const long long blocks = floor_read::blocks(n16);
    if (blocks > 0x7FFFFFFFLL) return {StatusCode::invalid_argument, "floor size too large for one grid"};
    const uint4* data = static_cast<const uint4*>(floor_);
    unsigned* sink = sink_;
    const Call launch = [data, n16, blocks, sink](void* s) -> Status {
      floor_read::
          stream_read_kernel<<<static_cast<unsigned>(blocks), floor_read::kThreads, 0, static_cast<cudaStream_t>(s)>>>(
              data, static_cast<long long>(n16), 0x9E3779B9u, sink);
      return cuda_status(cudaGetLastError(), "stream_read_kernel launch");
    };
    return time_call(launch, reps, out, warmup);
  }

  void release_floor_buffer() override {
    if (floor_) cudaFree(floor_);
    floor_ = nullptr;
    floor_bytes_ = 0;
  }

 private:
  // One rep: flush L2, idle the GPU, [spin], A, call, B; returns A→B and the host enqueue time.
  Status one_rep(const Call& call, int rep, unsigned long long spin_ns, double* gpu_us, double* host_us) {
    // Small calls (two kernels, ~12 µs) measured one of two levels ~0.9 µs apart depending on how
    // much work the process had submitted before them (period 4 in the submissions; perf-notes,
    // session 7): rep r first submits r % 4 empty launches (untimed), so that every case's reps
    // cover every position and its mean does not depend on what ran before it.
    for (int i = 0; i < rep % kPhases; ++i) noop_kernel<<<1, 1, 0, stream_>>>();
    MLA_TIMING_CUDA(cudaGetLastError());
    MLA_TIMING_CUDA(cudaMemsetAsync(flush_, rep & 0xFF, flush_bytes_, stream_));
    MLA_TIMING_CUDA(cudaStreamSynchronize(stream_));
    if (spin_ns) {
      spin_kernel<<<1, 1, 0, stream_>>>(spin_ns, clocks_);
      MLA_TIMING_CUDA(cudaGetLastError());
    }
    const auto t0 = std::chrono::steady_clock::now();
    MLA_TIMING_CUDA(cudaEventRecord(a_, stream_));
    const Status s = call(stream_);
    MLA_TIMING_CUDA(cudaEventRecord(b_, stream_));
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      cudaStreamSynchronize(stream_);
      return s;
    }
    MLA_TIMING_CUDA(cudaEventSynchronize(b_));
    float ms = 0;
    MLA_TIMING_CUDA(cudaEventElapsedTime(&ms, a_, b_));
    *gpu_us = double(ms) * 1000.0;
    *host_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    return Status::success();
  }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t a_ = nullptr;
  cudaEvent_t b_ = nullptr;
  void* flush_ = nullptr;
  std::size_t flush_bytes_ = 0;
  void* floor_ = nullptr;
  std::int64_t floor_bytes_ = 0;
  unsigned* sink_ = nullptr;
  unsigned long long* clocks_ = nullptr;  // [SM cycles, ns] summed over the device-time reps' spins
};

}  // namespace

GpuInfo gpu_info() {
  GpuInfo g;
  cudaRuntimeGetVersion(&g.runtime_version);
  cudaDriverGetVersion(&g.driver_version);
  g.driver_release = read_driver_release();
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    g.error = e == cudaErrorInsufficientDriver
                  ? std::string("no GPU driver, or one older than this CUDA runtime (") + cudaGetErrorString(e) + ")"
              : e != cudaSuccess ? std::string("no GPU: ") + cudaGetErrorString(e)
                                 : "no GPU: no CUDA device found";
    cudaGetLastError();
    return g;
  }
  if ((e = cudaGetDevice(&g.device)) != cudaSuccess) {
    g.error = std::string("no GPU: ") + cudaGetErrorString(e);
    return g;
  }
  cudaDeviceProp prop{};
  if ((e = cudaGetDeviceProperties(&prop, g.device)) != cudaSuccess) {
    g.error = std::string("no GPU: ") + cudaGetErrorString(e);
    return g;
  }
  g.name = prop.name;
  g.cc_major = prop.major;
  g.cc_minor = prop.minor;
  g.sm_count = prop.multiProcessorCount;
  g.l2_bytes = prop.l2CacheSize;
  g.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  g.available = true;
  return g;
}

Status GpuTimer::create(std::unique_ptr<GpuTimer>* out, std::size_t flush_bytes) {
  if (!out) return {StatusCode::invalid_argument, "timer output is null"};
  const GpuInfo info = gpu_info();
  if (!info.available) return {StatusCode::no_device, info.error};
  auto t = std::make_unique<CudaGpuTimer>();
  MLA_TIMING_TRY(t->init(flush_bytes));
  *out = std::move(t);
  return Status::success();
}

}  // namespace mla::testing
