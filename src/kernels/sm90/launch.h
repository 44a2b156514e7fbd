// Host-side launchers of the sm90 kernels (decode.cu, decode_fp8.cu, decode_mxfp4.cu, combine.cu).
#pragma once

#include <cuda_runtime.h>

#include "kernels/sm90/decode_params.h"
#include "mla/mla.h"

namespace mla::sm90 {

int decode_tile_tokens(KvFormat format);  // KV tokens per tile; work-item splits are multiples of it
int decode_ctas_per_sm(KvFormat format);  // resident decode CTAs per SM: the planner's wave is SMs × this
constexpr int kMaxDecodeCtasPerSm = 2;    // sizes the workspace for every format alike
// Once per process and format, before launch_decode (raises the dynamic shared-memory limit).
cudaError_t prepare_decode(KvFormat format);
cudaError_t launch_decode(KvFormat format, const DecodeParams& p, cudaStream_t stream);
// decode_fp8.cu and decode_mxfp4.cu: the wgmma kernels (tokens in M, 64-token tiles); bf16 is
// decode.cu's.
int decode_fp8_ctas_per_sm();
cudaError_t prepare_decode_fp8();
cudaError_t launch_decode_fp8(const DecodeParams& p, cudaStream_t stream);
int decode_mxfp4_ctas_per_sm();
cudaError_t prepare_decode_mxfp4();
cudaError_t launch_decode_mxfp4(const DecodeParams& p, cudaStream_t stream);
// `max_partials`: most partials of one row (sizes the CTA: more partial groups for long splits);
// `sms`: the device's SMs (few rows are spread over more CTAs, each a chunk of the value dims).
cudaError_t launch_combine(const CombineParams& p, int max_partials, int sms, cudaStream_t stream);

}  // namespace mla::sm90
