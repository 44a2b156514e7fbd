// Microbenchmark: cycles per wgmma for the shapes the decode kernels use (tokens in M = 64, the 16
// heads in N), A from registers (RS) or shared memory (SS), with 1 or 2 warpgroups per SM.
// Not part of the library build; on the H200:
//   nvcc -std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a bench/micro/wgmma_rate.cu -o /tmp/wgmma_rate
//   /tmp/wgmma_rate
// Each CTA (one warpgroup) issues kIters groups of 8 wgmmas into kAcc independent accumulators and
// times them with clock64; the SM-level rate is cycles / (wgmmas × CTAs per SM).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace {

constexpr int kIters = 256;

__device__ __forceinline__ std::uint64_t desc(const void* smem) {
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  return std::uint64_t((a & 0x3FFFF) >> 4) | (std::uint64_t(128 >> 4) << 16) | (std::uint64_t(1024 >> 4) << 32);
}

enum class Kind { rs_bf16_n16, ss_bf16_n16, rs_bf16_n32, rs_e4m3_n16_k32, ss_bf16_n16_tA };

template <Kind K>
__device__ __forceinline__ void mma(float (&d)[16], const std::uint32_t (&a)[4], std::uint64_t da, std::uint64_t db) {
  if constexpr (K == Kind::rs_bf16_n16) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, 1, 1, "
        "1, "
        "0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  } else if constexpr (K == Kind::ss_bf16_n16) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(da), "l"(db));
  } else if constexpr (K == Kind::ss_bf16_n16_tA) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1, 1, 1, 1, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(da), "l"(db));
  } else if constexpr (K == Kind::rs_bf16_n32) {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
        "{%16,%17,%18,%19}, %20, 1, 1, 1, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  } else {
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, 1, 1, "
        "1;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  }
}

template <Kind K, int kAcc>
__global__ void __launch_bounds__(128) rate_kernel(float* out, unsigned long long* cycles) {
  __shared__ alignas(1024) std::uint8_t smem[2][16384];
  for (int i = threadIdx.x; i < 2 * 16384 / 4; i += 128) reinterpret_cast<std::uint32_t*>(smem)[i] = 0x3F803F80u;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  std::uint32_t a[4] = {0x3F803F80u + threadIdx.x, 0x3F803F80u, 0x3F803F80u, 0x3F803F80u};
  float d[kAcc][16] = {};
  const std::uint64_t da = desc(smem[0]), db = desc(smem[1]);
  const long long t0 = clock64();
  for (int it = 0; it < kIters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int j = 0; j < 8; ++j) mma<K>(d[j % kAcc], a, da + 2 * j, db + 2 * j);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  const long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kAcc; ++k) {
#pragma unroll
    for (int i = 0; i < 16; ++i) s += d[k][i];
  }
  out[blockIdx.x * 128 + threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = static_cast<unsigned long long>(t1 - t0);
}

template <Kind K, int kAcc>
void run(const char* name, int sms) {
  float* out;
  unsigned long long* cyc;
  cudaMalloc(&out, sizeof(float) * 128 * sms * 2);
  cudaMalloc(&cyc, sizeof(unsigned long long) * sms * 2);
  for (int per_sm = 1; per_sm <= 2; ++per_sm) {
    const int grid = sms * per_sm;
    rate_kernel<K, kAcc><<<grid, 128>>>(out, cyc);  // warm-up
    rate_kernel<K, kAcc><<<grid, 128>>>(out, cyc);
    cudaDeviceSynchronize();
    unsigned long long h[1024];
    cudaMemcpy(h, cyc, sizeof(unsigned long long) * grid, cudaMemcpyDeviceToHost);
    double mean = 0;
    for (int i = 0; i < grid; ++i) mean += double(h[i]) / grid;
    const double per = mean / (kIters * 8.0);
    std::printf("%-22s acc=%d  CTAs/SM=%d  %6.1f cycles per wgmma per CTA, %6.1f per SM\n", name, kAcc, per_sm, per,
                per / per_sm);
  }
  cudaFree(out);
  cudaFree(cyc);
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  run<Kind::rs_bf16_n16, 1>("RS bf16 m64n16k16", sms);
  run<Kind::rs_bf16_n16, 4>("RS bf16 m64n16k16", sms);
  run<Kind::ss_bf16_n16, 4>("SS bf16 m64n16k16", sms);
  run<Kind::ss_bf16_n16_tA, 4>("SS bf16 m64n16k16 A^T", sms);
  run<Kind::rs_bf16_n32, 4>("RS bf16 m64n32k16", sms);
  run<Kind::rs_e4m3_n16_k32, 4>("RS e4m3 m64n16k32", sms);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) std::printf("CUDA error: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
