// The split partials' encoding (kernels/common/partial.h): fp16 rounding against the compiler's
// _Float16, and the per-(piece, head) scale's range and exactness.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/common/partial.h"

namespace mla {
namespace {

std::uint16_t reference_half(float f) {  // IEEE binary16, round to nearest even (the compiler's)
  const _Float16 h = static_cast<_Float16>(f);
  std::uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

TEST(Partial, FloatToHalfRoundsLikeIeee) {
  // Every fp16 value, the midpoints around it (ties both ways) and its neighbours in fp32.
  for (std::uint32_t h = 0; h < 0x7C00u; ++h) {
    for (float sign : {1.f, -1.f}) {
      const float v = sign * half_to_float(std::uint16_t(h));
      const float next = sign * half_to_float(std::uint16_t(h + 1));
      const float mid = 0.5f * (v + next);  // exact: fp16 midpoints are fp32 values
      for (float x : {v, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 2.f * next)}) {
        ASSERT_EQ(float_to_half(x), reference_half(x)) << x;
      }
    }
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    const float x = bits_to_float(bits(rng));
    if (std::isnan(x)) continue;
    ASSERT_EQ(float_to_half(x), reference_half(x)) << x;
  }
  EXPECT_EQ(float_to_half(65504.f), 0x7BFFu);
  EXPECT_EQ(float_to_half(65520.f), 0x7C00u);  // the tie above the largest rounds to inf
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xFC00u);
  EXPECT_EQ(float_to_half(std::ldexp(1.f, -25)), 0u);  // half the smallest subnormal: a tie to 0
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 1u);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Partial, HalfToFloatIsExact) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = half_to_float(std::uint16_t(h));
    _Float16 r;
    const std::uint16_t u = std::uint16_t(h);
    std::memcpy(&r, &u, 2);
    if (std::isnan(float(r))) {
      EXPECT_TRUE(std::isnan(f));
    } else {
      ASSERT_EQ(float_to_bits(f), float_to_bits(float(r))) << h;
    }
  }
}

TEST(Partial, ScalePutsTheMaximumIn2To14And2To15) {
  for (int e = -149; e <= 127; ++e) {
    for (float m : {1.f, 1.5f, 1.99999988f}) {
      const float amax = std::ldexp(m, e);
      if (amax == 0.f || std::isinf(amax)) continue;
      const PartialScale ps = partial_scale(amax);
      ASSERT_EQ(ps.to_half * ps.scale, 1.f) << amax;  // powers of two, exact inverses
      ASSERT_TRUE(std::isnormal(ps.to_half) && std::isnormal(ps.scale)) << amax;
      const float top = amax * ps.to_half;
      if (e >= -112) {  // shift 14 − e within ±126
        EXPECT_GE(top, 16384.f) << amax;
        EXPECT_LT(top, 32768.f) << amax;
      } else {
        EXPECT_LT(top, 16384.f) << amax;  // the largest shift: tiny maxima stay tiny, never overflow
      }
      EXPECT_LT(float_to_half(top), 0x7C00u);  // finite
    }
  }
  EXPECT_EQ(partial_scale(0.f).to_half * partial_scale(0.f).scale, 1.f);
  EXPECT_TRUE(std::isnormal(partial_scale(std::numeric_limits<float>::infinity()).scale));
}

TEST(Partial, RoundTripKeepsElevenBitsDownTo2ToMinus28OfTheMaximum) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> exp(-40, 40), below(0, 28);
  for (int i = 0; i < 200000; ++i) {
    const float amax = std::ldexp(mant(rng), exp(rng));
    const PartialScale ps = partial_scale(amax);
    const float x = (i % 2 ? -1.f : 1.f) * std::min(amax, std::ldexp(mant(rng), std::ilogb(amax) - below(rng)));
    const float back = half_to_float(float_to_half(x * ps.to_half)) * ps.scale;
    ASSERT_LE(std::fabs(back - x), std::ldexp(std::fabs(x), -11)) << x << " of " << amax;
  }
}

}  // namespace
}  // namespace mla
