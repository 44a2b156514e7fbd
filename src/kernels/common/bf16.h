// bf16 ⇄ fp32 by bit manipulation, identical on host and device (round to nearest even;
// NaN stays NaN, quieted).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/host_device.h"

namespace mla {

MLA_HD float bits_to_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

MLA_HD std::uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

MLA_HD float bf16_to_float(std::uint16_t b) {
  return bits_to_float(std::uint32_t(b) << 16);
}

// Round to nearest even; NaN → quiet NaN with the sign kept.
MLA_HD std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = float_to_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

// Two floats → their bf16 pair as one word (`lo` in the low half), by float_to_bf16. Device code
// uses primitives.h's bf16x2_rn (one cvt; the same bits but a NaN's payload), except cluster_merge.h.
MLA_HD std::uint32_t bf16x2_bits(float lo, float hi) {
  return std::uint32_t(float_to_bf16(lo)) | (std::uint32_t(float_to_bf16(hi)) << 16);
}

MLA_HD float round_bf16(float f) {
  return bf16_to_float(float_to_bf16(f));
}

}  // namespace mla
