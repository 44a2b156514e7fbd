// Host-side launchers of the sm90 kernels (decode.cu, decode_fp8.cu, decode_mxfp4.cu, combine.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/sm90/decode_params.h"
#include "mla/mla.h"

namespace mla::sm90 {

int decode_tile_tokens(KvFormat format);  // KV tokens per tile; work-item splits are multiples of it
int decode_ctas_per_sm(KvFormat format);  // resident decode CTAs per SM: the planner's wave is SMs × this
// CTAs of a decode launch (DecodeParams::ctas): bf16 CTAs walk several items each when there are more
// items than one wave and they are short (decode.cu); otherwise, and for fp8 and MXFP4, one CTA per item.
int decode_grid(KvFormat format, std::span<const WorkItem> items, int cluster, int sms);
constexpr int kMaxDecodeCtasPerSm = 2;  // sizes the workspace for every format alike
// Once per process and format, before launch_decode (raises the dynamic shared-memory limit, allows
// clusters of up to 16).
cudaError_t prepare_decode(KvFormat format);
cudaError_t launch_decode(KvFormat format, const DecodeParams& p, cudaStream_t stream);
// How many clusters of n decode CTAs can be resident at once (0: clusters of n cannot run).
int decode_max_active_clusters(KvFormat format, int n);
// decode_fp8.cu and decode_mxfp4.cu: the wgmma kernels (tokens in M, 64-token tiles); bf16 is
// decode.cu's.
int decode_fp8_ctas_per_sm();
cudaError_t prepare_decode_fp8();
cudaError_t launch_decode_fp8(const DecodeParams& p, cudaStream_t stream);
int decode_fp8_max_active_clusters(int n);
int decode_mxfp4_ctas_per_sm();
cudaError_t prepare_decode_mxfp4();
cudaError_t launch_decode_mxfp4(const DecodeParams& p, cudaStream_t stream);
int decode_mxfp4_max_active_clusters(int n);

// The three decode kernels' launch, preparation and cluster probe, in one place.
inline cudaLaunchConfig_t decode_config(int grid, int threads, std::size_t smem, int cluster, cudaStream_t stream,
                                        cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(grid));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (cluster > 0) {
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = unsigned(cluster);
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cfg;
}
// p.ctas CTAs, in clusters of p.cluster when it is set.
template <class Kernel>
cudaError_t launch_decode_kernel(Kernel kernel, const DecodeParams& p, int threads, std::size_t smem,
                                 cudaStream_t stream) {
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t cfg = decode_config(p.ctas, threads, smem, p.cluster, stream, &attr);
  return cudaLaunchKernelEx(&cfg, kernel, p);
}
template <class Kernel>
cudaError_t prepare_decode_kernel(Kernel kernel, std::size_t smem) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}
template <class Kernel>
int max_active_decode_clusters(Kernel kernel, int threads, std::size_t smem, int n) {
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t cfg = decode_config(n, threads, smem, n, nullptr, &attr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it
    return 0;
  }
  return clusters;
}
// `max_partials`: most partials of one row (sizes the CTA: more partial groups for long splits);
// `sms`: the device's SMs (few rows are spread over more CTAs, each a chunk of the value dims).
cudaError_t launch_combine(const CombineParams& p, int max_partials, int sms, cudaStream_t stream);

}  // namespace mla::sm90
