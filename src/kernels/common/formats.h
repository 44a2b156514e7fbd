// Element decoders of the KV-cache formats (SPEC §2), and the e4m3 encoder of the fp8 quantizer,
// identical on host and device.
//   fp8:   e4m3fn, bias 7, no inf, 0x7F/0xFF NaN; value = e4m3 · tensor scale
//   mxfp4: E2M1 codes (bit 3 sign; magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6), two per byte, low nibble
//          = even element; E8M0 scale byte s → 2^(s−127), 0xFF NaN, unsigned, bias 127.
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/host_device.h"

namespace mla {

inline constexpr float kE4m3Max = 448.0f;  // the largest finite |e4m3fn| value (0x7E: 1.75 · 2^8)

// e4m3fn byte → float (exact).
MLA_HD float decode_e4m3(std::uint8_t byte) {
  const std::uint32_t sign = std::uint32_t(byte & 0x80u) << 24;
  const std::uint32_t exp = (byte >> 3) & 0xFu;
  const std::uint32_t man = byte & 0x7u;
  if (exp == 0xFu && man == 0x7u) return bits_to_float(sign | 0x7FC00000u);  // NaN
  float mag;
  if (exp == 0) {
    mag = float(man) * (1.0f / 512.0f);  // subnormal: m/8 · 2^-6
  } else {
    mag = bits_to_float(((exp + 120u) << 23) | (man << 20));  // 2^(e-7) · 1.m
  }
  return bits_to_float(float_to_bits(mag) | sign);
}

inline constexpr std::uint8_t kE4m3Nan = 0x7F;  // the canonical NaN the e4m3 conversion produces

// float → e4m3fn byte: round to nearest even, saturating (±448 for anything larger, infinities
// included), NaN → 0x7F. Bit for bit CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3),
// i.e. `cvt.rn.satfinite.e4m3x2.f32`: GpuFormats.E4m3EncoderMatchesTheHardwareOnEveryFloat compares
// all 2^32 inputs on the GPU.
MLA_HD std::uint8_t encode_e4m3_rne_satfinite(float x) {
  const std::uint32_t u = float_to_bits(x);
  const std::uint8_t sign = std::uint8_t((u >> 24) & 0x80u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return kE4m3Nan;                               // NaN
  if (a > 0x43E00000u) return std::uint8_t(sign | 0x7Eu);             // > 448 (incl. inf): satfinite
  if (a >= 0x3C800000u) {                                             // ≥ 2^-6: normal e4m3
    const std::uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;  // RNE to 3 mantissa bits
    return std::uint8_t(sign | (r - (120u << 3)));                    // rebias 127 → 7
  }
  if (a <= 0x3A800000u) return sign;  // ≤ 2^-10: 0 (2^-10 ties to 0)
  // Subnormal e4m3: multiples of 2^-9. a's exponent E ∈ [-10, -7]; value/2^-9 = sig · 2^(E-14).
  const int e = int(a >> 23) - 127;
  const std::uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = 14 - e;  // 21..24
  const std::uint32_t half = 1u << (shift - 1);
  const std::uint32_t r = (sig + half - 1u + ((sig >> shift) & 1u)) >> shift;  // 1..8 (8 = 2^-6)
  return std::uint8_t(sign | r);
}

// E2M1 code (low 4 bits used) → float (exact).
MLA_HD float decode_e2m1(std::uint8_t code) {
  // Magnitude in halves: 0,1,2,3,4,6,8,12.
  const std::uint32_t m = code & 0x7u;
  const float halves = m < 4 ? float(m) : float((m == 4) ? 4 : (m == 5) ? 6 : (m == 6) ? 8 : 12);
  const float v = halves * 0.5f;
  return (code & 0x8u) ? -v : v;
}

// E8M0 byte → 2^(s−127); 0xFF → NaN; 0x00 → 2^-127 (an fp32 subnormal, exact).
MLA_HD float decode_e8m0(std::uint8_t s) {
  if (s == 0xFFu) return bits_to_float(0x7FC00000u);
  if (s == 0) return bits_to_float(0x00400000u);  // 2^-127
  return bits_to_float(std::uint32_t(s) << 23);
}

// Element `i` (0..575) of a packed MXFP4 row with its row of E8M0 scales.
MLA_HD float decode_mxfp4_element(const std::uint8_t* row, const std::uint8_t* scale_row, int i) {
  const std::uint8_t byte = row[i >> 1];
  const std::uint8_t code = (i & 1) ? std::uint8_t(byte >> 4) : std::uint8_t(byte & 0xFu);
  return decode_e2m1(code) * decode_e8m0(scale_row[i >> 5]);
}

}  // namespace mla
