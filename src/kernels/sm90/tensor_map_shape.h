// The geometry of a 3-D tensor map over the KV cache (backend.cu encodes it with
// cuTensorMapEncodeTiled), and where its copies land in shared memory: plain numbers, so that the
// unit tests check each format's map and stage layout without a GPU (fp8_stage.h, bf16_stage.h).
#pragma once

#include <cstdint>

#include "kernels/common/host_device.h"

namespace mla::sm90 {

// The 128-byte swizzle (CU_TENSOR_MAP_SWIZZLE_128B) of a copy into shared memory: byte `a` of the
// box image lands at a with its 16-byte chunk bits (4–6) XORed by bits 7–9, the 128-byte line's index
// mod 8 — a pattern that repeats every kSwizzleAlign bytes, so a stage written this way starts at a
// multiple of it (the kernels align their shared memory at run time).
constexpr int kSwizzleAlign = 1024;
MLA_HD constexpr int tma_swizzle_128b(int a) {
  return a ^ (((a >> 7) & 7) << 4);
}

struct TensorMapShape {
  std::uint64_t dims[3];     // elements (bytes) of dims 0, 1, 2; dim 0 innermost
  std::uint64_t strides[2];  // bytes from one element of dim 1 (2) to the next
  std::uint32_t box[3];      // one copy: box[0] × box[1] × box[2] elements, box[0] bytes wide
};

}  // namespace mla::sm90
