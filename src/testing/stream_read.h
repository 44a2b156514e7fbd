// The floor's kernel (SPEC §4's streaming read), shared by the timing harness (gpu_timing.cu) and
// bench/micro/stream_pattern.cu, which compares the kernels' copy patterns against it. CUDA only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mla::testing::floor_read {

constexpr int kThreads = 256;
constexpr int kLoads = 4;  // 16-byte loads per thread
constexpr std::int64_t kBlockBytes = std::int64_t(kThreads) * kLoads * 16;

// Blocks that cover n16 16-byte pieces.
constexpr long long blocks(long long n16) {
  return (n16 + kThreads * kLoads - 1) / (kThreads * kLoads);
}

// Block k reads the 16 KiB chunk k with four coalesced 16-byte loads per thread, all issued before
// any is used. The XOR of everything goes to a store that only a sentinel match (never, for the
// fill pattern) takes, so the loads cannot be dropped. (static: one copy per program that includes it.)
static __global__ void __launch_bounds__(kThreads)
    stream_read_kernel(const uint4* __restrict__ data, long long n16, unsigned sentinel, unsigned* __restrict__ sink) {
  const long long base = static_cast<long long>(blockIdx.x) * (kThreads * kLoads) + threadIdx.x;
  uint4 v[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; ++j) {
    const long long i = base + static_cast<long long>(j) * kThreads;
    v[j] = i < n16 ? data[i] : make_uint4(0u, 0u, 0u, 0u);
  }
  unsigned acc = 0;
#pragma unroll
  for (int j = 0; j < kLoads; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  if (acc == sentinel) *sink = acc;
}

}  // namespace mla::testing::floor_read
