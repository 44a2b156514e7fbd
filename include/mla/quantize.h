// Host quantizers producing the bit-exact KV formats of SPEC §2 from bf16 rows of 576.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "mla/mla.h"

namespace mla {

enum class Mxfp4Rounding : int {
  rne = 0,     // ties to even (aiter >= 0.1.12, torchao, MI355X's convert) — the default
  legacy = 1,  // ties away from zero (aiter <= 0.1.11)
};

// sglang scaled_fp8_quant with bf16 intermediates: one fp32 scale for the whole tensor.
// `bf16` holds any number of bf16 values (bit patterns); bytes gets one e4m3fn byte per value.
// NaN inputs: see docs/formats.md (behaviour documented and tested).
struct Fp8Quantized {
  std::vector<std::uint8_t> bytes;
  float scale = 0.0f;
};
Fp8Quantized quantize_fp8(std::span<const std::uint16_t> bf16);

// aiter dynamic_mxfp4_quant per row and block of 32: `rows` rows of 576 bf16 → `data`
// [rows × 288] packed E2M1 (low nibble = even element) and `scales` [rows × scale_stride] E8M0,
// padding columns 0x00. scale_stride must be >= 18.
struct Mxfp4Quantized {
  std::vector<std::uint8_t> data;
  std::vector<std::uint8_t> scales;
  std::int64_t scale_stride = kMxfp4ScalesPerRow;
};
Status quantize_mxfp4(std::span<const std::uint16_t> bf16, std::int64_t rows, Mxfp4Rounding rounding,
                      std::int64_t scale_stride, Mxfp4Quantized* out);

// Single-element helpers (exposed for tests and tools).
std::uint8_t float_to_e4m3_rne_satfinite(float x);             // __nv_cvt_float_to_fp8(x, SATFINITE, E4M3)
std::uint8_t float_to_e2m1(float qx, Mxfp4Rounding rounding);  // nearest magnitude, saturating at 6

}  // namespace mla
