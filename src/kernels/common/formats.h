// Element decoders of the KV-cache formats (SPEC §2), identical on host and device.
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
