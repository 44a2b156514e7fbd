// Host quantizers of SPEC §2 (include/mla/quantize.h); behaviour on NaN/Inf inputs is described
// in docs/formats.md.
//
// fp8:   one pass for amax (integer max over the bf16 magnitude bits), then a 65536-entry table
//        bf16 bits → e4m3 byte for the tensor's scale (each entry computed exactly as SPEC §2
//        says), then one lookup pass. Small inputs skip the table.
// mxfp4: per row and block of 32, in fp32 with integer amax.
// Large inputs are split over std::threads by contiguous ranges; every output element depends
// only on its input (and the tensor/block amax), so results do not depend on the thread count.
#include "mla/quantize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/formats.h"

namespace mla {
namespace {

constexpr std::int64_t kMinElementsPerThread = std::int64_t(1) << 20;
constexpr unsigned kMaxThreads = 64;
constexpr std::uint16_t kBf16MagnitudeMask = 0x7FFF;
constexpr std::uint16_t kBf16Inf = 0x7F80;  // magnitudes above this are NaN

// Runs fn(begin, end) over [0, n) split into contiguous chunks of at least min_per_thread items,
// one per thread (the caller runs the first). A thread that cannot be started runs inline.
template <class Fn>
void parallel_ranges(std::int64_t n, std::int64_t min_per_thread, const Fn& fn) {
  if (n <= 0) return;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t by_size = std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, min_per_thread));
  const auto workers = static_cast<std::int64_t>(std::min<std::int64_t>({by_size, hw, kMaxThreads}));
  if (workers <= 1) {
    fn(std::int64_t(0), n);
    return;
  }
  const std::int64_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(workers - 1));
  for (std::int64_t w = 1; w < workers; ++w) {
    const std::int64_t begin = w * chunk;
    const std::int64_t end = std::min(n, begin + chunk);
    if (begin >= end) break;
    try {
      threads.emplace_back([&fn, begin, end] { fn(begin, end); });
    } catch (const std::system_error&) {
      fn(begin, end);
    }
  }
  fn(std::int64_t(0), std::min(n, chunk));
  for (auto& t : threads) t.join();
}

// ---------------------------------------------------------------------------------------------
// fp8

// One element of the fp8 quantizer for a given (bf16-valued) scale: SPEC §2 steps 3 and 4.
// A NaN quotient becomes 0x7F: PyTorch's float→bf16 rounding turns every NaN into +NaN (0x7FC0).
std::uint8_t encode_fp8_element(std::uint16_t x_bits, float scale) {
  const float q = bf16_to_float(x_bits) / scale;  // IEEE fp32 divide
  if (std::isnan(q)) return kE4m3Nan;
  float y = round_bf16(q);
  y = std::min(std::max(y, -kE4m3Max), kE4m3Max);  // keeps −0
  return float_to_e4m3_rne_satfinite(y);
}

// Largest bf16 magnitude bits (|x| ordered as integers; > 0x7F80 means a NaN is present).
std::uint16_t max_magnitude_bits(const std::uint16_t* x, std::int64_t n) {
  std::uint16_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) m = std::max<std::uint16_t>(m, x[i] & kBf16MagnitudeMask);
  return m;
}

// ---------------------------------------------------------------------------------------------
// mxfp4

// E8M0 scale byte of a block from its largest magnitude (bf16 bits, no NaN): SPEC §2 steps 1–2.
std::uint8_t mxfp4_scale_byte(std::uint16_t amax_bits) {
  const std::uint32_t u = std::uint32_t(amax_bits) << 16;  // ≤ 0x7F800000: no overflow below
  const std::uint32_t rounded = (u + 0x200000u) & 0xFF800000u;
  const std::uint32_t e = (rounded >> 23) & 0xFFu;
  if (e == 255) return 254;
  return static_cast<std::uint8_t>(e > 2 ? e - 2 : 0);
}

// 2^(127 − s) as an fp32 (s ≤ 254): 2^127 … 2^-127 (the last one subnormal, still exact).
float mxfp4_quant_multiplier(std::uint8_t s) {
  const int k = 127 - int(s);
  if (k >= -126) return bits_to_float(std::uint32_t(k + 127) << 23);
  return bits_to_float(0x00400000u);  // 2^-127
}

// Midpoints between neighbouring E2M1 magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6. The code is the count
// of midpoints below the magnitude; at a midpoint RNE goes to the even code (up at 0.75, 1.75, 3.5,
// down at 0.25, 1.25, 2.5, 5), legacy always goes up.
template <Mxfp4Rounding R>
std::uint8_t e2m1_magnitude_code(float m) {
  if constexpr (R == Mxfp4Rounding::rne) {
    return std::uint8_t((m > 0.25f) + (m >= 0.75f) + (m > 1.25f) + (m >= 1.75f) + (m > 2.5f) + (m >= 3.5f) +
                        (m > 5.0f));
  } else {
    return std::uint8_t((m >= 0.25f) + (m >= 0.75f) + (m >= 1.25f) + (m >= 1.75f) + (m >= 2.5f) + (m >= 3.5f) +
                        (m >= 5.0f));
  }
}

template <Mxfp4Rounding R>
void quantize_mxfp4_rows(const std::uint16_t* in, std::int64_t row_begin, std::int64_t row_end,
                         std::int64_t scale_stride, std::uint8_t* data, std::uint8_t* scales) {
  constexpr int kBytesPerBlock = kMxfp4Block / 2;
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const std::uint16_t* row = in + r * kHeadDim;
    std::uint8_t* out_row = data + r * (kHeadDim / 2);
    std::uint8_t* scale_row = scales + r * scale_stride;
    for (int k = 0; k < kMxfp4ScalesPerRow; ++k) {
      const std::uint16_t* x = row + k * kMxfp4Block;
      std::uint8_t* out = out_row + k * kBytesPerBlock;
      const std::uint16_t amax = max_magnitude_bits(x, kMxfp4Block);
      if (amax > kBf16Inf) {  // a NaN in the block: NaN scale, codes 0
        scale_row[k] = 0xFF;
        std::fill(out, out + kBytesPerBlock, std::uint8_t(0));
        continue;
      }
      const std::uint8_t s = mxfp4_scale_byte(amax);
      scale_row[k] = s;
      const float mul = mxfp4_quant_multiplier(s);
      std::array<std::uint8_t, kMxfp4Block> codes;
      for (int j = 0; j < kMxfp4Block; ++j) {
        const float qx = bf16_to_float(x[j]) * mul;  // exact wherever it matters (|qx| ≥ 2^-126)
        const std::uint8_t sign = std::uint8_t((x[j] >> 12) & 0x8u);
        codes[j] = std::uint8_t(e2m1_magnitude_code<R>(std::fabs(qx)) | sign);
      }
      for (int j = 0; j < kBytesPerBlock; ++j) out[j] = std::uint8_t(codes[2 * j] | (codes[2 * j + 1] << 4));
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::uint8_t float_to_e4m3_rne_satfinite(float x) {
  return encode_e4m3_rne_satfinite(x);
}

std::uint8_t float_to_e2m1(float qx, Mxfp4Rounding rounding) {
  const std::uint8_t sign = std::uint8_t((float_to_bits(qx) >> 28) & 0x8u);
  const float m = std::fabs(qx);  // NaN: every comparison false → magnitude code 0
  const std::uint8_t code = rounding == Mxfp4Rounding::legacy ? e2m1_magnitude_code<Mxfp4Rounding::legacy>(m)
                                                              : e2m1_magnitude_code<Mxfp4Rounding::rne>(m);
  return std::uint8_t(code | sign);
}

Fp8Quantized quantize_fp8(std::span<const std::uint16_t> bf16) {
  Fp8Quantized out;
  const auto n = static_cast<std::int64_t>(bf16.size());
  out.bytes.resize(bf16.size());
  const std::uint16_t* x = bf16.data();
  std::uint8_t* y = out.bytes.data();

  // 1. amax over the whole tensor.
  std::uint16_t amax_bits = 0;
  if (n < 2 * kMinElementsPerThread) {
    amax_bits = max_magnitude_bits(x, n);
  } else {
    const unsigned hw = std::max(1u, std::min(std::thread::hardware_concurrency(), kMaxThreads));
    const std::int64_t parts = std::max<std::int64_t>(1, std::min<std::int64_t>(hw, n / kMinElementsPerThread));
    const std::int64_t chunk = (n + parts - 1) / parts;
    std::vector<std::uint16_t> partial(static_cast<std::size_t>(parts), 0);
    parallel_ranges(parts, 1, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        const std::int64_t b = p * chunk;
        const std::int64_t e = std::min(n, b + chunk);
        partial[static_cast<std::size_t>(p)] = b < e ? max_magnitude_bits(x + b, e - b) : 0;
      }
    });
    amax_bits = *std::max_element(partial.begin(), partial.end());
  }

  if (amax_bits > kBf16Inf) {
    // NaN anywhere: PyTorch's amax propagates it, the scale is NaN and every x / scale is NaN.
    out.scale = bits_to_float(0x7FC00000u);
    parallel_ranges(n, kMinElementsPerThread,
                    [&](std::int64_t b, std::int64_t e) { std::fill(y + b, y + e, kE4m3Nan); });
    return out;
  }

  // 2. scale = round_bf16(f32(max(amax, 1e-12)) · f32(1/448)); with amax = inf it is inf.
  float amax = bf16_to_float(amax_bits);
  if (!(amax >= 1e-12f)) amax = round_bf16(1e-12f);  // the clamp runs in bf16
  const float scale = round_bf16(amax * (1.0f / 448.0f));
  out.scale = scale;

  // 3–4. y = e4m3(clamp(round_bf16(x / scale), ±448)).
  if (n <= 4096) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = encode_fp8_element(x[i], scale);
    return out;
  }
  std::vector<std::uint8_t> table(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) table[b] = encode_fp8_element(std::uint16_t(b), scale);
  const std::uint8_t* t = table.data();
  parallel_ranges(n, kMinElementsPerThread, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) y[i] = t[x[i]];
  });
  return out;
}

Status quantize_mxfp4(std::span<const std::uint16_t> bf16, std::int64_t rows, Mxfp4Rounding rounding,
                      std::int64_t scale_stride, Mxfp4Quantized* out) {
  auto invalid = [](std::string msg) { return Status{StatusCode::invalid_argument, "quantize_mxfp4: " + msg}; };
  if (out == nullptr) return invalid("out is null");
  if (rows < 0) return invalid("rows must be >= 0, got " + std::to_string(rows));
  if (scale_stride < kMxfp4ScalesPerRow) {
    return invalid("scale_stride must be >= " + std::to_string(kMxfp4ScalesPerRow) + ", got " +
                   std::to_string(scale_stride));
  }
  if (rounding != Mxfp4Rounding::rne && rounding != Mxfp4Rounding::legacy) return invalid("unknown rounding");
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (rows > kMax / kHeadDim || (rows > 0 && scale_stride > kMax / rows)) return invalid("size overflows int64");
  if (static_cast<std::uint64_t>(bf16.size()) != static_cast<std::uint64_t>(rows * kHeadDim)) {
    return invalid("input holds " + std::to_string(bf16.size()) +
                   " values, expected rows x 576 = " + std::to_string(rows * kHeadDim));
  }

  // The results go to `out` only when both buffers could be allocated: a scale matrix too large
  // for memory (a huge scale_stride) is an argument error, and `out` stays untouched.
  std::vector<std::uint8_t> data_buf, scales_buf;
  try {
    data_buf.assign(static_cast<std::size_t>(rows * (kHeadDim / 2)), 0);
    scales_buf.assign(static_cast<std::size_t>(rows * scale_stride), 0);  // padding columns stay 0x00
  } catch (const std::exception&) {                                       // std::bad_alloc, std::length_error
    return invalid("cannot allocate the outputs: " + std::to_string(rows * (kHeadDim / 2)) + " code bytes and " +
                   std::to_string(rows * scale_stride) + " scale bytes (rows " + std::to_string(rows) +
                   " x scale_stride " + std::to_string(scale_stride) + ")");
  }
  const std::uint16_t* in = bf16.data();
  std::uint8_t* data = data_buf.data();
  std::uint8_t* scales = scales_buf.data();
  const std::int64_t min_rows = std::max<std::int64_t>(1, kMinElementsPerThread / kHeadDim);
  parallel_ranges(rows, min_rows, [&](std::int64_t r0, std::int64_t r1) {
    if (rounding == Mxfp4Rounding::legacy) {
      quantize_mxfp4_rows<Mxfp4Rounding::legacy>(in, r0, r1, scale_stride, data, scales);
    } else {
      quantize_mxfp4_rows<Mxfp4Rounding::rne>(in, r0, r1, scale_stride, data, scales);
    }
  });
  out->scale_stride = scale_stride;
  out->data = std::move(data_buf);
  out->scales = std::move(scales_buf);
  return Status::success();
}

}  // namespace mla
