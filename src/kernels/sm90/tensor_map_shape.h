// The geometry of a 3-D tensor map over the KV cache (backend.cu encodes it with
// cuTensorMapEncodeTiled): plain numbers, so that the unit tests check each format's map without a
// GPU (fp8_stage.h, bf16_stage.h).
#pragma once

#include <cstdint>

namespace mla::sm90 {

struct TensorMapShape {
  std::uint64_t dims[3];     // elements (bytes) of dims 0, 1, 2; dim 0 innermost
  std::uint64_t strides[2];  // bytes from one element of dim 1 (2) to the next
  std::uint32_t box[3];      // one copy: box[0] × box[1] × box[2] elements, box[0] bytes wide
};

}  // namespace mla::sm90
