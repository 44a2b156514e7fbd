// Microbenchmark: how fast the H200 streams a read in the access patterns of the decode kernels,
// against the pattern of `mla bench`'s floor, all from the same cold and dirty L2 (a 256 MiB memset
// before every rep, as SPEC §4's protocol does). Two sizes: 2.42 GB (bf16 256×8192's KV) and
// 151 MB (fp8 32×8192's, where the L2 evict-first policy wins in the kernels).
// Not part of the library build; on the H200:
//   nvcc -std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a -Isrc bench/micro/stream_pattern.cu -o
//   /tmp/stream_pattern /tmp/stream_pattern [reps]
// Patterns:
//   window     the floor's own kernel (src/testing/stream_read.h): block k reads 16 KiB chunk k, so the
//              resident blocks sweep one window of addresses through the buffer.
//   ldg S×T    S CTAs of T threads, CTA c reading its own contiguous 1/S of the buffer (the
//              decode's one stream per work item), 8 loads of 16 bytes per thread, then their use.
//   ring …     the same streams copied by cp.async into a ring of shared-memory stages, each
//              waited for and read once (the decode kernels' copy pipeline without their math):
//              bf16-like (256 threads, 3 stages of 72 KiB, one CTA per SM) and fp8-like (128
//              threads, 2 stages of 36 KiB, two CTAs per SM); plain, or under an L2 policy from
//              createpolicy: ef = evict_first (ef 0.5: for half the lines), en = evict_normal,
//              eu = evict_unchanged; "ef first N": a CTA's first N tiles under evict_first, the rest plain.
// Prints per size and pattern the mean and best time over the reps (cudaEvent) and the bandwidth
// against the window's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "testing/stream_read.h"

namespace {

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

constexpr std::int64_t kBytes = std::int64_t(256) * 8192 * 1152;  // bf16 256×8192
constexpr std::int64_t kFlushBytes = std::int64_t(256) << 20;

// ── ldg: one contiguous stream per CTA ──────────────────────────────────────────────────────────
template <int kThreads>
__global__ void __launch_bounds__(kThreads) ldg_kernel(const uint4* data, long long n16, unsigned* sink) {
  constexpr int kUnroll = 8;
  const long long per = (n16 + gridDim.x - 1) / gridDim.x;
  const long long begin = blockIdx.x * per, end = (begin + per < n16 ? begin + per : n16);
  unsigned acc = 0;
  for (long long i = begin + threadIdx.x; i < end; i += kThreads * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const long long k = i + static_cast<long long>(j) * kThreads;
      v[j] = k < end ? __ldg(data + k) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

// ── ring: cp.async into shared-memory stages ────────────────────────────────────────────────────
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
// The L2 policy of the ring's copies: none (plain cp.async), or one made by createpolicy.
enum Policy { kNone, kEvictFirst, kEvictFirstHalf, kEvictNormal, kEvictUnchanged };
template <int kPolicy>
__device__ __forceinline__ std::uint64_t make_policy() {
  std::uint64_t p = 0;
  if constexpr (kPolicy == kEvictFirst) asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  if constexpr (kPolicy == kEvictFirstHalf) asm("createpolicy.fractional.L2::evict_first.b64 %0, 0.5;\n" : "=l"(p));
  if constexpr (kPolicy == kEvictNormal) asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(p));
  if constexpr (kPolicy == kEvictUnchanged) asm("createpolicy.fractional.L2::evict_unchanged.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
template <int kPolicy>
__device__ __forceinline__ void cp16(void* dst, const void* src, int bytes, std::uint64_t policy) {
  if constexpr (kPolicy != kNone) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(bytes), "l"(policy)
                 : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(bytes)
                 : "memory");
  }
}
// kEfTiles > 0: a CTA's first kEfTiles tiles under evict-first, the rest plain (kPolicy kNone).
template <int kThreads, int kStageBytes, int kStages, int kPolicy, int kEfTiles = 0>
__global__ void __launch_bounds__(kThreads) ring_kernel(const std::uint8_t* data, long long nbytes, unsigned* sink) {
  extern __shared__ __align__(128) std::uint8_t smem[];
  const std::uint64_t policy = make_policy<(kEfTiles > 0 ? int(kEvictFirst) : kPolicy)>();
  const long long tiles_total = (nbytes + kStageBytes - 1) / kStageBytes;
  const long long per = (tiles_total + gridDim.x - 1) / gridDim.x;
  const long long t_begin = blockIdx.x * per, t_end = (t_begin + per < tiles_total ? t_begin + per : tiles_total);
  const long long n = (t_end > t_begin ? t_end - t_begin : 0LL);
  auto issue = [&](long long t) {
    if (t < n) {
      std::uint8_t* stage = smem + (t % kStages) * kStageBytes;
      const long long off = (t_begin + t) * kStageBytes;
      for (int i = threadIdx.x; i < kStageBytes / 16; i += kThreads) {
        const long long o = off + 16LL * i;
        const std::uint8_t* src = data + (o + 16 <= nbytes ? o : nbytes - 16);
        if (kEfTiles > 0 && t < kEfTiles) {
          cp16<kEvictFirst>(stage + 16 * i, src, o + 16 <= nbytes ? 16 : 0, policy);
        } else {
          cp16<kPolicy>(stage + 16 * i, src, o + 16 <= nbytes ? 16 : 0, policy);
        }
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  unsigned acc = 0;
  for (long long t = 0; t < n; ++t) {
    issue(t + kStages - 1);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1) : "memory");
    __syncthreads();
    const uint4 v = reinterpret_cast<const uint4*>(smem + (t % kStages) * kStageBytes)[threadIdx.x];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
    __syncthreads();
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

using Launch = void (*)(const std::uint8_t*, long long, unsigned*, cudaStream_t);
struct Pattern {
  std::string name;
  Launch launch;
  int (*prepare)();  // sets the shared-memory limit of a ring kernel (0: nothing to do)
};

void launch_window(const std::uint8_t* d, long long nbytes, unsigned* sink, cudaStream_t s) {
  namespace fr = mla::testing::floor_read;
  const long long n16 = nbytes / 16;
  fr::stream_read_kernel<<<unsigned(fr::blocks(n16)), fr::kThreads, 0, s>>>(reinterpret_cast<const uint4*>(d), n16,
                                                                            0x9E3779B9u, sink);
}
template <int kThreads, int kGrid>
void launch_ldg(const std::uint8_t* d, long long nbytes, unsigned* sink, cudaStream_t s) {
  ldg_kernel<kThreads><<<kGrid, kThreads, 0, s>>>(reinterpret_cast<const uint4*>(d), nbytes / 16, sink);
}
template <int kThreads, int kStageBytes, int kStages, int kPolicy, int kGrid, int kEfTiles = 0>
void launch_ring(const std::uint8_t* d, long long nbytes, unsigned* sink, cudaStream_t s) {
  ring_kernel<kThreads, kStageBytes, kStages, kPolicy, kEfTiles>
      <<<kGrid, kThreads, kStageBytes * kStages, s>>>(d, nbytes, sink);
}
template <int kThreads, int kStageBytes, int kStages, int kPolicy, int kEfTiles = 0>
int prepare_ring() {
  return cudaFuncSetAttribute(ring_kernel<kThreads, kStageBytes, kStages, kPolicy, kEfTiles>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, kStageBytes * kStages);
}
int prepare_none() {
  return 0;
}

constexpr int kBf16Stage = 64 * 1152, kFp8Stage = 64 * 576;
template <int kPolicy, int kGrid>
Pattern bf16_ring(const char* name) {
  return {name, launch_ring<256, kBf16Stage, 3, kPolicy, kGrid>, prepare_ring<256, kBf16Stage, 3, kPolicy>};
}
template <int kPolicy, int kGrid, int kEfTiles = 0>
Pattern fp8_ring(const char* name) {
  return {name, launch_ring<128, kFp8Stage, 2, kPolicy, kGrid, kEfTiles>,
          prepare_ring<128, kFp8Stage, 2, kPolicy, kEfTiles>};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  std::uint8_t* data = nullptr;
  std::uint8_t* flush = nullptr;
  unsigned* sink = nullptr;
  if (!ok(cudaMalloc(&data, kBytes), "cudaMalloc")) return 1;
  if (!ok(cudaMalloc(&flush, kFlushBytes), "cudaMalloc")) return 1;
  if (!ok(cudaMalloc(&sink, 16), "cudaMalloc")) return 1;
  if (!ok(cudaMemset(data, 0x5A, kBytes), "cudaMemset")) return 1;
  const std::vector<Pattern> pats = {
      {"window (the floor)", launch_window, prepare_none},
      {"ldg 132x512", launch_ldg<512, 132>, prepare_none},
      {"ldg 264x256", launch_ldg<256, 264>, prepare_none},
      bf16_ring<kNone, 256>("ring bf16-like, 256 CTAs"),
      bf16_ring<kEvictFirst, 256>("ring bf16-like, 256 CTAs, ef"),
      bf16_ring<kEvictUnchanged, 256>("ring bf16-like, 256 CTAs, eu"),
      bf16_ring<kNone, 132>("ring bf16-like, 132 CTAs"),
      fp8_ring<kNone, 256>("ring fp8-like, 256 CTAs"),
      fp8_ring<kEvictFirst, 256>("ring fp8-like, 256 CTAs, ef"),
      fp8_ring<kEvictFirstHalf, 256>("ring fp8-like, 256 CTAs, ef 0.5"),
      fp8_ring<kEvictNormal, 256>("ring fp8-like, 256 CTAs, en"),
      fp8_ring<kEvictUnchanged, 256>("ring fp8-like, 256 CTAs, eu"),
      fp8_ring<kNone, 264>("ring fp8-like, 264 CTAs"),
      fp8_ring<kNone, 256, 8>("ring fp8-like, 256, ef first 8"),
      fp8_ring<kNone, 256, 16>("ring fp8-like, 256, ef first 16"),
      fp8_ring<kNone, 256, 32>("ring fp8-like, 256, ef first 32"),
  };
  for (const auto& p : pats) {
    if (!ok(cudaError_t(p.prepare()), "cudaFuncSetAttribute")) return 1;
  }
  cudaStream_t stream;
  if (!ok(cudaStreamCreate(&stream), "cudaStreamCreate")) return 1;
  cudaEvent_t a, b;
  if (!ok(cudaEventCreate(&a), "cudaEventCreate")) return 1;
  if (!ok(cudaEventCreate(&b), "cudaEventCreate")) return 1;
  // Two reads: bf16 256×8192's KV (long: several L2s) and fp8 32×8192's (151 MB, 2.4 L2s).
  for (const long long nbytes : {kBytes, std::int64_t(32) * 8192 * 576}) {
    std::vector<std::vector<float>> ms(pats.size());
    for (const auto& p : pats) p.launch(data, nbytes, sink, stream);  // warm-up and launch check
    if (!ok(cudaGetLastError(), "launch")) return 1;
    if (!ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return 1;
    for (int r = 0; r < reps; ++r) {  // round-robin, so that every pattern sees the same machine
      for (std::size_t i = 0; i < pats.size(); ++i) {
        if (!ok(cudaMemsetAsync(flush, r & 0xFF, kFlushBytes, stream), "cudaMemsetAsync")) return 1;
        if (!ok(cudaEventRecord(a, stream), "cudaEventRecord")) return 1;
        pats[i].launch(data, nbytes, sink, stream);
        if (!ok(cudaEventRecord(b, stream), "cudaEventRecord")) return 1;
        if (!ok(cudaEventSynchronize(b), "cudaEventSynchronize")) return 1;
        float t = 0.f;
        if (!ok(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime")) return 1;
        ms[i].push_back(t);
      }
    }
    std::printf("%.3f GB read per rep, %d reps, cold dirty L2 (256 MiB memset before each)\n", nbytes / 1e9, reps);
    std::printf("%-32s %10s %10s %8s %10s\n", "pattern", "mean us", "best us", "GB/s", "vs window");
    double window_mean = 0.0;
    for (std::size_t i = 0; i < pats.size(); ++i) {
      double sum = 0.0;
      for (float m : ms[i]) sum += m;
      const double mean = 1e3 * sum / ms[i].size(), best = 1e3 * *std::min_element(ms[i].begin(), ms[i].end());
      if (i == 0) window_mean = mean;
      std::printf("%-32s %10.1f %10.1f %8.0f %9.1f%%\n", pats[i].name.c_str(), mean, best, nbytes / mean / 1e3,
                  100.0 * window_mean / mean);
    }
  }
  return 0;
}
