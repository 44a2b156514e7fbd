// GPU measurement harness of SPEC §4.
//
// Every rep starts with rep % 4 empty launches (they rotate the rep's position in the command
// stream, which moves small calls by ~0.9 µs), then a cold L2: a 256 MiB cudaMemsetAsync (≥ 2× the
// H200's 60 MB L2) on the timing stream, then a stream synchronize so the GPU is idle. Then
//   call latency: event A, the user's call (host work included), event B;
//   device time:  a short spin kernel, event A, the call, event B — the spin keeps the GPU busy
//                 while the host enqueues A and the call, so A→B is GPU time only.
// A→B is read with cudaEventElapsedTime after synchronizing B. The floor is a plain streaming
// read of N bytes (each thread four 16-byte loads, XOR-reduced into a conditional store so the
// loads stay), timed both ways with the same protocol.
//
// Built from gpu_timing.cu with CUDA; without it (no_cuda/gpu_stub.cpp) every entry point reports
// "no GPU".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mla/mla.h"

namespace mla::testing {

struct GpuInfo {
  bool available = false;
  std::string error;  // why not, when !available
  int device = 0;     // ordinal in use
  std::string name;   // e.g. "NVIDIA H200"
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t memory_bytes = 0;
  int driver_version = 0;      // cudaDriverGetVersion: CUDA version the driver supports, 13000 = 13.0
  int runtime_version = 0;     // cudaRuntimeGetVersion
  std::string driver_release;  // kernel driver from /proc/driver/nvidia/version ("580.65.06"), or ""
};

// Properties of the current device (never throws; available = false with the reason otherwise).
GpuInfo gpu_info();

// 13000 → "13.0", 12080 → "12.8".
inline std::string cuda_version_string(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// Summary of one series of timings in microseconds.
struct Stats {
  int reps = 0;
  double mean_us = 0;
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
};

inline Stats summarize(std::vector<double> us) {
  Stats s;
  s.reps = static_cast<int>(us.size());
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double x : us) sum += x;
  s.mean_us = sum / static_cast<double>(us.size());
  const std::size_t n = us.size();
  s.median_us = (n % 2) ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  s.min_us = us.front();
  s.max_us = us.back();
  return s;
}

struct GpuTiming {
  Stats call;                 // call latency: L2 flushed, GPU idle, host work included
  Stats device;               // device time: launch latency hidden behind the spin kernel
  double spin_us = 0;         // spin length used for the device-time reps
  double spin_sm_mhz = 0;     // mean SM clock (MHz) over those spins, measured right before each call
  double host_us_median = 0;  // host time to enqueue event A + the call (device-time reps)
  double host_us_max = 0;
  int redone_reps = 0;    // device-time reps redone because their host enqueue outlasted the spin
  int unhidden_reps = 0;  // device-time reps whose enqueue outlasted the spin in every attempt (then
                          // A→B includes some host time; 0 is expected)
};

inline constexpr std::size_t kDefaultFlushBytes = std::size_t(256) << 20;  // ≥ 2 × 60 MB L2
inline constexpr double kMinSpinUs = 30.0;
inline constexpr int kMaxRedos = 3;  // attempts beyond the first for a device-time rep whose host work showed

class GpuTimer {
 public:
  // The call under test; it must enqueue its GPU work on `stream` (a cudaStream_t).
  using Call = std::function<Status(void* stream)>;

  // Creates the timing stream (blocking with respect to the legacy default stream, so plain
  // cudaMemcpy/cudaMemset by other code orders with it), the events and the flush buffer.
  static Status create(std::unique_ptr<GpuTimer>* out, std::size_t flush_bytes = kDefaultFlushBytes);

  virtual ~GpuTimer() = default;
  virtual void* stream() const = 0;
  virtual Status synchronize() = 0;  // the timing stream

  // `warmup` untimed calls first (lazy module loading, clocks), then `reps` call-latency reps,
  // then `reps` device-time reps. The spin is max(kMinSpinUs, 3 × the slowest host enqueue seen in
  // the call-latency reps + 10 µs), capped at 2 ms. A failing call aborts with its status.
  virtual Status time_call(const Call& call, int reps, GpuTiming* out, int warmup = 3) = 0;

  // The streaming-read floor over `bytes` bytes (a device buffer kept between calls, grown as
  // needed, filled once), timed both ways.
  virtual Status time_floor(std::int64_t bytes, int reps, GpuTiming* out, int warmup = 3) = 0;

  // Frees the floor buffer (it can be as large as the largest case's KV).
  virtual void release_floor_buffer() = 0;
};

}  // namespace mla::testing
