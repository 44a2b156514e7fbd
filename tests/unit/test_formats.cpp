// Element decoders of the KV formats (src/kernels/common/formats.h, bf16.h) against independent
// formulas: every e4m3 byte, every E2M1 code × every E8M0 byte, nibble order, bf16 rounding.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/formats.h"
#include "mla/mla.h"

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// e4m3fn by its definition: sign, 4-bit exponent (bias 7), 3-bit mantissa; exponent 0 subnormal;
// S.1111.111 NaN; no infinity.
double e4m3_reference(std::uint8_t b) {
  const int sign = b >> 7;
  const int e = (b >> 3) & 0xF;
  const int m = b & 0x7;
  if (e == 15 && m == 7) return std::nan("");
  const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(double(8 + m), e - 10);
  return sign ? -mag : mag;
}

// E2M1 by its definition: sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0.
double e2m1_reference(std::uint8_t code) {
  const int sign = (code >> 3) & 1;
  const int e = (code >> 1) & 0x3;
  const int m = code & 1;
  const double mag = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
  return sign ? -mag : mag;
}

// The fp32 a double rounds to, with overflow made explicit (no reliance on out-of-range casts).
float to_float_checked(double v) {
  // Every value passed here is exactly representable or at least 2^128 (which rounds to inf).
  if (std::fabs(v) > double(FLT_MAX)) return v < 0 ? -INFINITY : INFINITY;
  return float(v);
}

TEST(FormatsDecode, EveryE4m3Byte) {
  for (int b = 0; b < 256; ++b) {
    const float got = mla::decode_e4m3(std::uint8_t(b));
    const double want = e4m3_reference(std::uint8_t(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "byte " << b;
      continue;
    }
    EXPECT_EQ(double(got), want) << "byte " << b;
    EXPECT_EQ(std::signbit(got), (b & 0x80) != 0) << "byte " << b;  // includes 0x80 = −0
  }
}

TEST(FormatsDecode, E4m3Landmarks) {
  EXPECT_EQ(mla::decode_e4m3(0x7E), 448.0f);
  EXPECT_EQ(mla::decode_e4m3(0xFE), -448.0f);
  EXPECT_EQ(mla::decode_e4m3(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(mla::decode_e4m3(0x07), 7.0f * std::ldexp(1.0f, -9));
  EXPECT_EQ(mla::decode_e4m3(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(mla::decode_e4m3(0x38), 1.0f);
  EXPECT_EQ(bits_of(mla::decode_e4m3(0x80)), 0x80000000u);
  EXPECT_TRUE(std::isnan(mla::decode_e4m3(0x7F)));
  EXPECT_TRUE(std::isnan(mla::decode_e4m3(0xFF)));
  EXPECT_FALSE(std::isinf(mla::decode_e4m3(0x78)));  // S.1111.000 is 256, not infinity
  EXPECT_EQ(mla::decode_e4m3(0x78), 256.0f);
}

TEST(FormatsDecode, EveryE2m1Code) {
  const float table[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 16; ++c) {
    const float got = mla::decode_e2m1(std::uint8_t(c));
    EXPECT_EQ(double(got), e2m1_reference(std::uint8_t(c))) << "code " << c;
    EXPECT_EQ(std::fabs(got), table[c & 7]) << "code " << c;
    EXPECT_EQ(std::signbit(got), (c & 8) != 0) << "code " << c;  // code 8 is −0
    EXPECT_FALSE(std::isnan(got) || std::isinf(got));
  }
  // Only the low nibble counts.
  EXPECT_EQ(mla::decode_e2m1(0xF7), 6.0f);
}

TEST(FormatsDecode, EveryE8m0Byte) {
  for (int s = 0; s < 256; ++s) {
    const float got = mla::decode_e8m0(std::uint8_t(s));
    if (s == 255) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    EXPECT_EQ(double(got), std::ldexp(1.0, s - 127)) << "byte " << s;
    EXPECT_GT(got, 0.0f);
  }
  EXPECT_EQ(mla::decode_e8m0(127), 1.0f);
  EXPECT_EQ(mla::decode_e8m0(0x7F + 3), 8.0f);
  EXPECT_EQ(mla::decode_e8m0(0x78), 1.0f / 128.0f);      // unsigned, bias 127 (not sign + bias 64)
  EXPECT_EQ(bits_of(mla::decode_e8m0(0)), 0x00400000u);  // 2^-127, an fp32 subnormal
  EXPECT_EQ(mla::decode_e8m0(254), std::ldexp(1.0f, 127));
}

// Every E2M1 code × every E8M0 byte through decode_mxfp4_element, at every element position of a
// row (both nibbles, all 18 blocks), with scale stride 24 whose padding columns would poison.
TEST(FormatsDecode, EveryMxfp4CodeTimesEveryScale) {
  constexpr int kStride = 24;
  std::vector<std::uint8_t> row(mla::kHeadDim / 2);
  std::vector<std::uint8_t> scales(kStride);
  for (int code = 0; code < 16; ++code) {
    std::fill(row.begin(), row.end(), std::uint8_t(code | (code << 4)));
    for (int s = 0; s < 256; ++s) {
      std::fill(scales.begin(), scales.end(), std::uint8_t(0xFF));
      std::fill(scales.begin(), scales.begin() + mla::kMxfp4ScalesPerRow, std::uint8_t(s));
      const double exact = e2m1_reference(std::uint8_t(code)) * std::ldexp(1.0, s - 127);
      for (int i = 0; i < mla::kHeadDim; ++i) {
        const float got = mla::decode_mxfp4_element(row.data(), scales.data(), i);
        if (s == 255) {
          ASSERT_TRUE(std::isnan(got)) << "code " << code << " scale " << s << " element " << i;
          continue;
        }
        const float want = to_float_checked(exact);  // 2·2^127 and up overflow to inf
        ASSERT_EQ(bits_of(got), bits_of(want)) << "code " << code << " scale " << s << " element " << i;
      }
    }
  }
}

TEST(FormatsDecode, Mxfp4NibbleOrderAndBlocks) {
  std::vector<std::uint8_t> row(mla::kHeadDim / 2, 0);
  std::vector<std::uint8_t> scales(18, 127);
  row[0] = 0x21;    // element 0: code 1 (0.5), element 1: code 2 (1.0)
  row[16] = 0xF7;   // block 1: element 32: code 7 (6), element 33: code F (−6)
  row[287] = 0x9A;  // element 574: code A (−1), element 575: code 9 (−0.5)
  scales[1] = 128;
  scales[17] = 126;
  EXPECT_EQ(mla::decode_mxfp4_element(row.data(), scales.data(), 0), 0.5f);
  EXPECT_EQ(mla::decode_mxfp4_element(row.data(), scales.data(), 1), 1.0f);
  EXPECT_EQ(mla::decode_mxfp4_element(row.data(), scales.data(), 2), 0.0f);
  EXPECT_EQ(mla::decode_mxfp4_element(row.data(), scales.data(), 32), 12.0f);
  EXPECT_EQ(mla::decode_mxfp4_element(row.data(), scales.data(), 33), -12.0f);
  EXPECT_EQ(mla::decode_mxfp4_element(row.data(), scales.data(), 574), -0.5f);
  EXPECT_EQ(mla::decode_mxfp4_element(row.data(), scales.data(), 575), -0.25f);
  EXPECT_EQ(mla::decode_mxfp4_element(row.data(), scales.data(), 31), 0.0f);
}

TEST(FormatsBf16, ConversionsAndRounding) {
  // Every bf16 pattern widens exactly and narrows back to itself (NaN: quieted, sign kept).
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = mla::bf16_to_float(std::uint16_t(b));
    EXPECT_EQ(bits_of(f), b << 16);
    const std::uint16_t back = mla::float_to_bf16(f);
    if ((b & 0x7FFFu) > 0x7F80u) {
      EXPECT_EQ(back, std::uint16_t(b | 0x0040u)) << b;
    } else {
      EXPECT_EQ(back, std::uint16_t(b)) << b;
    }
  }
  // Ties to even, in both directions, and overflow to inf.
  EXPECT_EQ(mla::float_to_bf16(mla::bits_to_float(0x3F808000u)), 0x3F80);  // tie, even below
  EXPECT_EQ(mla::float_to_bf16(mla::bits_to_float(0x3F818000u)), 0x3F82);  // tie, even above
  EXPECT_EQ(mla::float_to_bf16(mla::bits_to_float(0x3F808001u)), 0x3F81);
  EXPECT_EQ(mla::float_to_bf16(mla::bits_to_float(0xBF808000u)), 0xBF80);
  EXPECT_EQ(mla::float_to_bf16(FLT_MAX), 0x7F80);
  EXPECT_EQ(mla::float_to_bf16(-INFINITY), 0xFF80);
  EXPECT_EQ(mla::round_bf16(-0.0f), -0.0f);
  EXPECT_TRUE(std::signbit(mla::round_bf16(-0.0f)));
  EXPECT_EQ(mla::float_to_bf16(mla::bits_to_float(0x00008000u)), 0x0000);  // subnormal tie → even (0)
  EXPECT_EQ(mla::float_to_bf16(mla::bits_to_float(0x00018000u)), 0x0002);
}

}  // namespace
