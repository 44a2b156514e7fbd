// The fp16 split partials in the workspace, written by the fp8 and MXFP4 kernels and the CPU backend
// and read by the combines (the bf16 kernel writes fp32: fp16 measured slower there, perf-notes v67):
// per (piece, head) the normalised O as 512 fp16 values and one power-of-two scale,
// value = fp16 · scale. The scale puts the head's largest |value| in [2^14, 2^15): every value down
// to 2^-28 of the largest keeps fp16's 11 significant bits (relative rounding ≤ 2^-11), nothing
// overflows, and a partial is half the bytes of fp32 — 256 partials of 32 KB are 8.4 MB of writes
// that evict the dirty lines of a cold L2 (perf-notes v67).
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/host_device.h"

namespace mla {

struct PartialScale {
  float to_half;  // value · to_half is what is stored as fp16
  float scale;    // fp16 · scale is the value again (1 / to_half, exactly)
};

// `amax`: the largest |value| of the (piece, head), ≥ 0. Zero and subnormal maxima take the largest
// shift, inf (inputs holding one) the smallest; both ends stay normal floats.
MLA_HD PartialScale partial_scale(float amax) {
  const int e = int((float_to_bits(amax) >> 23) & 0xFFu) - 127;  // amax in [2^e, 2^(e+1))
  int shift = 14 - e;
  shift = shift < -126 ? -126 : (shift > 126 ? 126 : shift);
  return {bits_to_float(std::uint32_t(127 + shift) << 23), bits_to_float(std::uint32_t(127 - shift) << 23)};
}

// fp16 ⇄ fp32 by bit manipulation (round to nearest even, subnormals kept, NaN quieted): the CPU
// backend's; the device converts with cvt.rn.f16x2.f32, which rounds the same way.
MLA_HD std::uint16_t float_to_half(float f) {
  const std::uint32_t x = float_to_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return std::uint16_t(sign | 0x7E00u);            // NaN
  if (ax >= 0x477FF000u) return std::uint16_t(sign | 0x7C00u);           // ≥ 65520 rounds to inf
  if (ax < 0x38800000u) {                                                // below 2^-14: subnormal steps of 2^-24
    const std::uint32_t e = ax >> 23;                                    // exponent field, ≤ 112
    if (e < 101) return std::uint16_t(sign);                             // below 2^-26: rounds to zero
    const std::uint32_t m = (ax & 0x7FFFFFu) | 0x800000u, rs = 126 - e;  // value = m · 2^(e − 150)
    const std::uint32_t q = m >> rs, rem = m & ((1u << rs) - 1u), half = 1u << (rs - 1);
    return std::uint16_t(sign | (q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u)));
  }
  const std::uint32_t r = ax - 0x38000000u;  // rebias 127 → 15
  return std::uint16_t(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
}

MLA_HD float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) {  // zero or subnormal: m · 2^-24, exact in fp32
    const float v = float(m) * bits_to_float(0x33800000u);
    return bits_to_float(float_to_bits(v) | sign);
  }
  if (e == 31) return bits_to_float(sign | 0x7F800000u | (m << 13));
  return bits_to_float(sign | ((e + 112) << 23) | (m << 13));
}

}  // namespace mla
