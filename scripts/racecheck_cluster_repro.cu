// Racecheck reproducer for perf-notes "An intermittent racecheck report on fp8 clusters". Not part of
// the build. On the H200:
//   nvcc -std=c++20 -lineinfo -gencode arch=compute_90a,code=sm_90a scripts/racecheck_cluster_repro.cu -o /tmp/r
//   compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/r
// Clusters of 2 CTAs. Each CTA initialises CTA-local mbarriers, fills a stage by cp.async with a
// cp.async.mbarrier.arrive, writes a small array next to the barriers, waits on the barrier, then
// runs __syncthreads. After that it reads the peer's stage through distributed shared memory
// between two cluster barriers. This is the shape of decode_fp8_kernel's cluster mode. Each
// remote read is ordered after the peer's copies: the peer's mbarrier completion makes the copies
// visible to the peer's threads, and the cluster barrier (release/acquire, cumulative) orders them
// before this CTA's reads. Measured 2026-11-30: racecheck reports "Potential RAW hazard detected
// (invalid memcpy_async synchronization)" between a cp.async of rank 1 and the DSMEM read of
// rank 0 in 15 of 15 runs. Without the __syncthreads after the wait, it also reports the real
// race on logit_scale, so it does model the mbarrier inside one CTA.
#include <cooperative_groups.h>

#include <cstdint>
#include <cstdio>
namespace cg = cooperative_groups;
struct Smem {
  alignas(128) std::uint8_t kv[2][36864];
  std::uint8_t q[18432];
  std::uint8_t p[2048];
  float red[4][16];
  float logit_scale[16];
  std::uint64_t full[2];
};
__device__ unsigned smem_addr(const void* p) {
  return unsigned(__cvta_generic_to_shared(p));
}
__global__ void __cluster_dims__(2, 1, 1) k(const std::uint8_t* src, float* out) {
  extern __shared__ __align__(128) std::uint8_t raw[];
  Smem& sm = *reinterpret_cast<Smem*>(raw);
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x < 2)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(&sm.full[threadIdx.x])), "r"(128)
                 : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  for (int i = threadIdx.x; i < 36864 / 16; i += 128)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(sm.kv[0] + 16 * i)), "l"(src + 16 * i)
                 : "memory");
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(&sm.full[0])) : "memory");
  if (threadIdx.x % 8 == 0 && threadIdx.x / 8 < 16) sm.logit_scale[threadIdx.x / 8] = float(blockIdx.x + threadIdx.x);
  asm volatile("{\n.reg .pred d;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 d, [%0], 0;\n@!d bra W;\n}" ::"r"(
                   smem_addr(&sm.full[0]))
               : "memory");
  __syncthreads();  // as decode_fp8_kernel: the tile and every thread's earlier stores, everywhere
  float acc = sm.logit_scale[threadIdx.x % 16] + sm.kv[0][threadIdx.x];
  cluster.sync();
  const std::uint8_t* peer = cluster.map_shared_rank(sm.kv[0], int(cluster.block_rank()) ^ 1);
  acc += peer[threadIdx.x * 7];
  cluster.sync();
  out[blockIdx.x * 128 + threadIdx.x] = acc;
}
int main() {
  std::uint8_t* src;
  float* out;
  cudaMalloc(&src, 36864);
  cudaMemset(src, 1, 36864);
  cudaMalloc(&out, 512 * 128 * 4);
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sizeof(Smem)));
  for (int rep = 0; rep < 20; ++rep) k<<<512, 128, sizeof(Smem)>>>(src, out);
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("%s smem %zu\n", cudaGetErrorString(e), sizeof(Smem));
  return e == cudaSuccess ? 0 : 1;
}
