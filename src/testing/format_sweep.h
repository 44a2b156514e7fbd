// Exhaustive checks of the formats' encoders against the GPU's own conversions (GPU tests).
#pragma once

#include <cstdint>

#include "mla/mla.h"

namespace mla::testing {

struct SweepResult {
  std::uint64_t mismatches = 0;  // inputs whose bytes differ
  std::uint32_t first = 0;       // the smallest such fp32 bit pattern (when mismatches > 0)
  std::uint8_t ours = 0;         // ... its byte from encode_e4m3_rne_satfinite
  std::uint8_t gpu = 0;          // ... and from the GPU
};

// Every one of the 2^32 fp32 bit patterns through encode_e4m3_rne_satfinite (formats.h, the host
// quantizer's rounding) and through `cvt.rn.satfinite.e4m3x2.f32` on the current GPU. no_device
// where there is no CUDA build or no sm_90 device.
Status e4m3_encoder_sweep(SweepResult* out);

}  // namespace mla::testing
