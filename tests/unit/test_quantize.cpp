// Host quantizers (include/mla/quantize.h) against SPEC §2: the worked examples, every e4m3 value
// and midpoint, every E2M1 tie in both roundings, error bounds, edge blocks, NaN/Inf behaviour
// (docs/formats.md), scale strides and padding, and independent reference quantizers written
// here in double precision with nearest-value searches (no bit tricks shared with the library).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/formats.h"
#include "mla/mla.h"
#include "mla/quantize.h"

namespace {

using mla::Mxfp4Rounding;

constexpr int kRow = mla::kHeadDim;  // 576
constexpr int kBlock = mla::kMxfp4Block;

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint16_t bf(float f) {
  return mla::float_to_bf16(f);
}
float bf_val(std::uint16_t b) {
  return mla::bf16_to_float(b);
}
bool bf_is_nan(std::uint16_t b) {
  return (b & 0x7FFF) > 0x7F80;
}

// ----------------------------------------------------------------------------------------------
// Independent references.

// Positive finite e4m3 values by byte (0x00..0x7E), from the definition.
const std::vector<double>& e4m3_positive_values() {
  static const std::vector<double> v = [] {
    std::vector<double> t;
    for (int b = 0; b <= 0x7E; ++b) {
      const int e = b >> 3, m = b & 7;
      t.push_back(e == 0 ? std::ldexp(double(m), -9) : std::ldexp(double(8 + m), e - 10));
    }
    return t;
  }();
  return v;
}

// Nearest e4m3 byte by search; ties to the even byte; saturating at 448; NaN → 0x7F.
std::uint8_t ref_e4m3(double y) {
  if (std::isnan(y)) return 0x7F;
  const std::uint8_t sign = std::signbit(y) ? 0x80 : 0x00;
  const double a = std::fabs(y);
  const auto& t = e4m3_positive_values();
  int best = 0;
  double best_d = INFINITY;
  for (int b = 0; b < int(t.size()); ++b) {
    const double d = std::fabs(t[b] - a);
    if (d < best_d || (d == best_d && b % 2 == 0)) {
      best = b;
      best_d = d;
    }
  }
  if (a >= 448.0) best = 0x7E;
  return std::uint8_t(sign | best);
}

// The fp8 quantizer of SPEC §2, with the NaN/Inf behaviour of docs/formats.md.
mla::Fp8Quantized ref_quantize_fp8(const std::vector<std::uint16_t>& x) {
  mla::Fp8Quantized r;
  r.bytes.resize(x.size());
  bool nan = false;
  double amax = 0.0;
  for (auto b : x) {
    nan = nan || bf_is_nan(b);
    if (!bf_is_nan(b)) amax = std::max(amax, std::fabs(double(bf_val(b))));
  }
  if (nan) {
    r.scale = std::nanf("");
    std::fill(r.bytes.begin(), r.bytes.end(), std::uint8_t(0x7F));
    return r;
  }
  if (amax < 1e-12) amax = bf_val(bf(1e-12f));
  // f32(amax) · f32(1/448): the double product of two floats is exact; then fp32, then bf16.
  const float scale = mla::round_bf16(float(amax * double(1.0f / 448.0f)));
  r.scale = scale;
  std::vector<int> memo(65536, -1);  // by input bits: the search is slow
  for (std::size_t i = 0; i < x.size(); ++i) {
    int& m = memo[x[i]];
    if (m < 0) {
      const double qd = double(bf_val(x[i])) / double(scale);  // fp32 divide = double divide rounded
      if (std::isnan(qd)) {
        m = 0x7F;
      } else {
        m = ref_e4m3(std::clamp(double(mla::round_bf16(float(qd))), -448.0, 448.0));
      }
    }
    r.bytes[i] = std::uint8_t(m);
  }
  return r;
}

// E2M1 code of qx by nearest magnitude; ties to the even code (rne) or the larger magnitude
// (legacy); saturating at 6; sign from the sign bit.
std::uint8_t ref_e2m1(double qx, Mxfp4Rounding rounding) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const std::uint8_t sign = std::signbit(qx) ? 8 : 0;
  const double a = std::fabs(qx);
  if (std::isnan(a)) return sign;
  int best = 7;
  if (a < 6) {
    double best_d = INFINITY;
    for (int c = 0; c < 8; ++c) {
      const double d = std::fabs(mag[c] - a);
      const bool tie_wins = rounding == Mxfp4Rounding::rne ? c % 2 == 0 : true;  // later c = larger
      if (d < best_d || (d == best_d && tie_wins)) {
        best = c;
        best_d = d;
      }
    }
  }
  return std::uint8_t(sign | best);
}

// One block of 32 bf16 values → scale byte and 32 codes (SPEC §2 + documented NaN rule).
void ref_mxfp4_block(const std::uint16_t* x, Mxfp4Rounding rounding, std::uint8_t* scale, std::uint8_t* codes) {
  double amax = 0.0;
  for (int j = 0; j < kBlock; ++j) {
    if (bf_is_nan(x[j])) {
      *scale = 0xFF;
      std::fill(codes, codes + kBlock, std::uint8_t(0));
      return;
    }
    amax = std::max(amax, std::fabs(double(bf_val(x[j]))));
  }
  int s = 0;
  if (std::isinf(amax)) {
    s = 254;
  } else if (amax >= std::ldexp(1.0, -126)) {  // normal: amax = m · 2^E, m ∈ [1, 2)
    int E;
    const double m = 2.0 * std::frexp(amax, &E);
    E -= 1;
    const int e = E + (m >= 1.75 ? 1 : 0) + 127;  // biased exponent of amax rounded to 2^k
    s = e >= 255 ? 254 : std::max(e - 2, 0);
  }  // subnormal or zero amax: rounded exponent ≤ 1, s = 0
  *scale = std::uint8_t(s);
  for (int j = 0; j < kBlock; ++j) codes[j] = ref_e2m1(std::ldexp(double(bf_val(x[j])), 127 - s), rounding);
}

void ref_quantize_mxfp4(const std::vector<std::uint16_t>& x, std::int64_t rows, Mxfp4Rounding rounding,
                        std::int64_t stride, std::vector<std::uint8_t>* data, std::vector<std::uint8_t>* scales) {
  data->assign(std::size_t(rows) * (kRow / 2), 0);
  scales->assign(std::size_t(rows * stride), 0);
  std::uint8_t codes[kBlock];
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int k = 0; k < kRow / kBlock; ++k) {
      ref_mxfp4_block(&x[std::size_t(r * kRow + k * kBlock)], rounding, &(*scales)[std::size_t(r * stride + k)], codes);
      for (int j = 0; j < kBlock / 2; ++j) {
        (*data)[std::size_t(r * (kRow / 2) + k * 16 + j)] = std::uint8_t(codes[2 * j] | (codes[2 * j + 1] << 4));
      }
    }
  }
}

// Random bf16 rows: Gaussian values times 2^k, k drawn per block from [lo, hi], some exact zeros.
std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed, int lo = -12, int hi = 6) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exp(lo, hi);
  std::vector<std::uint16_t> v(n);
  int k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % kBlock == 0) k = exp(rng);
    v[i] = bf(std::ldexp(normal(rng), k));
    if (rng() % 97 == 0) v[i] = (rng() & 1) ? 0x8000 : 0x0000;
  }
  return v;
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out;
  for (float f : v) out.push_back(bf(f));
  return out;
}

// ----------------------------------------------------------------------------------------------
// float_to_e4m3_rne_satfinite

TEST(QuantizeE4m3, EveryValueRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const float v = mla::decode_e4m3(std::uint8_t(b));
    const std::uint8_t back = mla::float_to_e4m3_rne_satfinite(v);
    if ((b & 0x7F) == 0x7F) {
      EXPECT_EQ(back, 0x7F) << b;  // NaN → canonical 0x7F (as CUDA)
    } else {
      EXPECT_EQ(back, b) << b;  // includes 0x80 (−0)
    }
  }
}

TEST(QuantizeE4m3, EveryMidpointTiesToEven) {
  for (int b = 0; b < 0x7E; ++b) {
    for (int sign : {0, 0x80}) {
      const float lo = mla::decode_e4m3(std::uint8_t(b | sign));
      const float hi = mla::decode_e4m3(std::uint8_t((b + 1) | sign));
      const float mid = 0.5f * (lo + hi);  // exact
      ASSERT_EQ(double(mid), 0.5 * (double(lo) + double(hi)));
      const int even = (b % 2 == 0) ? b : b + 1;
      EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(mid), even | sign) << "midpoint after byte " << b;
      const float toward_hi = std::nextafter(mid, hi);
      const float toward_lo = std::nextafter(mid, lo);
      EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(toward_hi), (b + 1) | sign) << b;
      EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(toward_lo), b | sign) << b;
    }
  }
}

TEST(QuantizeE4m3, SaturationUnderflowAndNaN) {
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(448.0f), 0x7E);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(460.0f), 0x7E);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(464.0f), 0x7E);  // the would-be tie with 480
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(465.0f), 0x7E);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(1e6f), 0x7E);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(FLT_MAX), 0x7E);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(INFINITY), 0x7E);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(-448.0f), 0xFE);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(-1e30f), 0xFE);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(-INFINITY), 0xFE);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(std::nanf("")), 0x7F);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(-std::nanf("")), 0x7F);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(from_bits(0x7F800001u)), 0x7F);  // signalling NaN
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(0.0f), 0x00);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(-0.0f), 0x80);
  const float half_min = std::ldexp(1.0f, -10);  // half the smallest subnormal: tie → 0
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(half_min), 0x00);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(-half_min), 0x80);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(std::nextafter(half_min, 1.0f)), 0x01);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(1e-30f), 0x00);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(-1e-30f), 0x80);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(from_bits(1u)), 0x00);  // fp32 subnormal
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(std::nextafter(std::ldexp(1.0f, -6), 0.0f)), 0x08);
}

TEST(QuantizeE4m3, MatchesNearestSearchOnRandomFloats) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> mant(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-14, 10);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mant(rng), exp(rng));
    ASSERT_EQ(mla::float_to_e4m3_rne_satfinite(x), ref_e4m3(x)) << x;
  }
}

// ----------------------------------------------------------------------------------------------
// float_to_e2m1

TEST(QuantizeE2m1, ExactValuesBothRoundings) {
  const float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (auto r : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(mla::float_to_e2m1(mag[c], r), c);
      EXPECT_EQ(mla::float_to_e2m1(-mag[c], r), c | 8);
    }
  }
}

TEST(QuantizeE2m1, EveryTieBothRoundings) {
  struct Tie {
    float x;
    int rne, legacy;
  };
  // SPEC: RNE 0.25→0, 0.75→1, 1.25→1, 1.75→2, 2.5→2, 3.5→4, 5→4; legacy rounds every tie up.
  const Tie ties[] = {{0.25f, 0, 1}, {0.75f, 2, 2}, {1.25f, 2, 3}, {1.75f, 4, 4},
                      {2.5f, 4, 5},  {3.5f, 6, 6},  {5.0f, 6, 7}};
  for (const auto& t : ties) {
    EXPECT_EQ(mla::float_to_e2m1(t.x, Mxfp4Rounding::rne), t.rne) << t.x;
    EXPECT_EQ(mla::float_to_e2m1(t.x, Mxfp4Rounding::legacy), t.legacy) << t.x;
    EXPECT_EQ(mla::float_to_e2m1(-t.x, Mxfp4Rounding::rne), t.rne | 8) << t.x;
    EXPECT_EQ(mla::float_to_e2m1(-t.x, Mxfp4Rounding::legacy), t.legacy | 8) << t.x;
    // Off the tie both roundings agree on the nearest value.
    for (auto r : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
      EXPECT_EQ(mla::float_to_e2m1(std::nextafter(t.x, 0.0f), r), ref_e2m1(std::nextafter(t.x, 0.0f), r));
      EXPECT_EQ(mla::float_to_e2m1(std::nextafter(t.x, 10.0f), r), ref_e2m1(std::nextafter(t.x, 10.0f), r));
    }
    for (float off : {std::nextafter(t.x, 0.0f), std::nextafter(t.x, 10.0f)}) {
      EXPECT_EQ(mla::float_to_e2m1(off, Mxfp4Rounding::rne), mla::float_to_e2m1(off, Mxfp4Rounding::legacy)) << off;
    }
    EXPECT_EQ(ref_e2m1(t.x, Mxfp4Rounding::rne), t.rne);
    EXPECT_EQ(ref_e2m1(t.x, Mxfp4Rounding::legacy), t.legacy);
  }
}

TEST(QuantizeE2m1, SaturationSignAndNaN) {
  for (auto r : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
    EXPECT_EQ(mla::float_to_e2m1(6.5f, r), 7);
    EXPECT_EQ(mla::float_to_e2m1(7.0f, r), 7);
    EXPECT_EQ(mla::float_to_e2m1(1e30f, r), 7);
    EXPECT_EQ(mla::float_to_e2m1(INFINITY, r), 7);
    EXPECT_EQ(mla::float_to_e2m1(-INFINITY, r), 0xF);
    EXPECT_EQ(mla::float_to_e2m1(-0.0f, r), 8);
    EXPECT_EQ(mla::float_to_e2m1(-0.1f, r), 8);  // negative, rounds to zero: code 8
    EXPECT_EQ(mla::float_to_e2m1(0.1f, r), 0);
    EXPECT_EQ(mla::float_to_e2m1(std::nanf(""), r), 0);  // documented: NaN → ±0 code
    EXPECT_EQ(mla::float_to_e2m1(-std::nanf(""), r), 8);
  }
}

TEST(QuantizeE2m1, MatchesNearestSearch) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-7.0f, 7.0f);
  for (int i = 0; i < 100000; ++i) {
    // Quarter steps hit every tie; the rest are arbitrary.
    const float x = (i % 4 == 0) ? std::round(u(rng) * 4.0f) / 4.0f : u(rng);
    for (auto r : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) ASSERT_EQ(mla::float_to_e2m1(x, r), ref_e2m1(x, r)) << x;
  }
}

// ----------------------------------------------------------------------------------------------
// quantize_fp8

TEST(QuantizeFp8, SpecWorkedExample) {
  const std::vector<float> values = {1.0f, -2.0f, 0.30078125f, 3.0f, 0.010009765625f, -0.0f, 2.90625f};
  const auto x = to_bf16(values);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(bf_val(x[i]), values[i]) << "not exact in bf16: " << values[i];
  const auto q = mla::quantize_fp8(x);
  EXPECT_EQ(bits_of(q.scale), 0x3BDB0000u);
  EXPECT_EQ(q.scale, 0.006683349609375f);
  const std::vector<std::uint8_t> want = {0x71, 0xF9, 0x63, 0x7E, 0x3C, 0x80, 0x7E};
  EXPECT_EQ(q.bytes, want);
}

TEST(QuantizeFp8, DoubleRoundingExample) {
  // amax 2.421875 gives scale bf16 0x3BB1; −0.9921875 / scale = −183.68… → bf16 −184 (a tie
  // between e4m3 176 and 192) → 192 → 0xF4; the fp32 quotient cast directly would give 0xF3.
  const auto x = to_bf16({2.421875f, -0.9921875f});
  const auto q = mla::quantize_fp8(x);
  EXPECT_EQ(bits_of(q.scale), 0x3BB10000u);
  ASSERT_EQ(q.bytes.size(), 2u);
  EXPECT_EQ(q.bytes[1], 0xF4);
  EXPECT_EQ(mla::float_to_e4m3_rne_satfinite(-0.9921875f / q.scale), 0xF3);
  EXPECT_EQ(q.bytes[0], 0x7E);  // 448.36… → bf16 448
}

TEST(QuantizeFp8, MatchesReferenceOnRandomInputs) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const int lo = seed % 2 ? -20 : -4;
    const auto x = random_bf16(5000 + seed * 37, seed, lo, int(seed));
    const auto q = mla::quantize_fp8(x);
    const auto r = ref_quantize_fp8(x);
    ASSERT_EQ(bits_of(q.scale), bits_of(r.scale)) << seed;
    ASSERT_EQ(q.bytes, r.bytes) << seed;
  }
}

// Above the threading threshold: parallel amax and the table path must give the same bytes.
TEST(QuantizeFp8, LargeInputMatchesReference) {
  const auto x = random_bf16(std::size_t(3) << 20, 11, -30, 20);
  const auto q = mla::quantize_fp8(x);
  // Reference per distinct bf16 value (65536 at most), then mapped.
  const auto r = ref_quantize_fp8(x);
  ASSERT_EQ(bits_of(q.scale), bits_of(r.scale));
  ASSERT_EQ(q.bytes.size(), x.size());
  EXPECT_TRUE(q.bytes == r.bytes);
}

TEST(QuantizeFp8, ErrorBound) {
  const auto x = random_bf16(100000, 5, -16, 8);
  const auto q = mla::quantize_fp8(x);
  // 3 mantissa bits: ≤ half an ulp = 2^-4 of the element (the bf16 intermediate rounding stays
  // inside that, SPEC's ties included), plus a subnormal floor of one e4m3 subnormal step.
  const double floor = std::ldexp(double(q.scale), -9);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = bf_val(x[i]);
    const double d = double(mla::decode_e4m3(q.bytes[i])) * double(q.scale);
    ASSERT_LE(std::fabs(d - v), std::ldexp(std::fabs(v), -4) + floor) << i << " " << v;
    if (v != 0.0) {
      ASSERT_EQ(std::signbit(d), std::signbit(v));
    }
  }
}

TEST(QuantizeFp8, ZerosAndSignedZeros) {
  const std::vector<std::uint16_t> x = {0x0000, 0x8000, 0x0000, 0x8000};
  const auto q = mla::quantize_fp8(x);
  const std::vector<std::uint8_t> want = {0x00, 0x80, 0x00, 0x80};
  EXPECT_EQ(q.bytes, want);
  // amax clamped to bf16(1e-12), then · 1/448 rounded to bf16: finite and positive.
  EXPECT_EQ(q.scale, mla::round_bf16(bf_val(bf(1e-12f)) * (1.0f / 448.0f)));
  EXPECT_GT(q.scale, 0.0f);
  const auto e = mla::quantize_fp8({});
  EXPECT_TRUE(e.bytes.empty());
  EXPECT_EQ(e.scale, q.scale);
}

TEST(QuantizeFp8, TinyAndSubnormalInputs) {
  // amax below the 1e-12 clamp: the scale is the clamp's (≈ 2.2e-15), bf16 subnormals go to ±0,
  // values near 1e-12 still use the e4m3 range.
  const std::vector<std::uint16_t> x = {0x0001, 0x8001, 0x007F, bf(1e-13f), bf(-5e-13f)};
  const auto q = mla::quantize_fp8(x);
  EXPECT_EQ(q.scale, mla::round_bf16(bf_val(bf(1e-12f)) * (1.0f / 448.0f)));
  EXPECT_EQ(q.bytes[0], 0x00);
  EXPECT_EQ(q.bytes[1], 0x80);
  EXPECT_EQ(q.bytes[2], 0x00);
  EXPECT_EQ(q.bytes[4], 0xF6);  // −5e-13 / 2.23e-15 = −224.x → −224
  EXPECT_EQ(q.bytes, ref_quantize_fp8(x).bytes);
  // Just above the clamp: the amax element maps to 448.
  const auto y = to_bf16({2e-12f, -1e-12f, 3e-14f});
  const auto qy = mla::quantize_fp8(y);
  const auto ry = ref_quantize_fp8(y);
  EXPECT_EQ(bits_of(qy.scale), bits_of(ry.scale));
  EXPECT_EQ(qy.bytes, ry.bytes);
}

TEST(QuantizeFp8, HugeInputs) {
  // Near the bf16 maximum the scale stays finite.
  const std::vector<std::uint16_t> x = {0x7F7F, 0xFF7F, 0x7F00, 0x3F80, 0xFE80};
  const auto q = mla::quantize_fp8(x);
  const auto r = ref_quantize_fp8(x);
  EXPECT_TRUE(std::isfinite(q.scale));
  EXPECT_EQ(bits_of(q.scale), bits_of(r.scale));
  EXPECT_EQ(q.bytes, r.bytes);
  EXPECT_EQ(q.bytes[0], 0x7E);
  EXPECT_EQ(q.bytes[1], 0xFE);
  EXPECT_EQ(q.bytes[3], 0x00);  // 1 / 7.6e35 → 0
}

TEST(QuantizeFp8, NaNInputPoisonsTensor) {
  // PyTorch parity: amax is NaN, so the scale is NaN and every x / scale is NaN → 0x7F.
  for (std::uint16_t nan : {std::uint16_t(0x7FC0), std::uint16_t(0xFFC0), std::uint16_t(0x7F81)}) {
    auto x = to_bf16({1.0f, -2.0f, 0.0f, 3.0f});
    x[2] = nan;
    const auto q = mla::quantize_fp8(x);
    EXPECT_EQ(bits_of(q.scale), 0x7FC00000u);
    EXPECT_EQ(q.bytes, std::vector<std::uint8_t>(4, 0x7F));
  }
  auto big = random_bf16(std::size_t(5) << 20, 2);
  big[big.size() - 3] = 0xFFC0;
  const auto q = mla::quantize_fp8(big);
  EXPECT_TRUE(std::isnan(q.scale));
  EXPECT_TRUE(std::all_of(q.bytes.begin(), q.bytes.end(), [](std::uint8_t b) { return b == 0x7F; }));
}

TEST(QuantizeFp8, InfInputGivesInfScale) {
  // PyTorch parity: amax = inf, scale = inf; ±inf / inf = NaN → 0x7F; finite / inf = ±0.
  std::vector<std::uint16_t> x = {0x7F80, 0x3F80, 0xC000, 0xFF80, 0x0000, 0x8000, 0x7F7F};
  const auto q = mla::quantize_fp8(x);
  EXPECT_EQ(bits_of(q.scale), 0x7F800000u);
  const std::vector<std::uint8_t> want = {0x7F, 0x00, 0x80, 0x7F, 0x00, 0x80, 0x00};
  EXPECT_EQ(q.bytes, want);
  EXPECT_EQ(q.bytes, ref_quantize_fp8(x).bytes);
}

// ----------------------------------------------------------------------------------------------
// quantize_mxfp4

struct BlockExample {
  std::vector<float> x;
  std::uint8_t scale;
  std::vector<std::uint8_t> rne_codes, legacy_codes, rne_bytes, legacy_bytes;
};

std::vector<BlockExample> spec_blocks() {
  return {
      {{1.75f, 1.25f, -.75f, .5f, .25f, .125f},
       0x7E,
       {6, 4, 0xB, 2, 1, 0},
       {6, 5, 0xB, 2, 1, 1},
       {0x46, 0x2B, 0x01},
       {0x56, 0x2B, 0x11}},
      {{6.5f, 5, -2.5f, .25f, 3, 1.25f, .75f, -6},
       0x7F,
       {7, 6, 0xC, 0, 5, 2, 2, 0xF},
       {7, 7, 0xD, 1, 5, 3, 2, 0xF},
       {0x67, 0x0C, 0x25, 0xF2},
       {0x77, 0x1D, 0x35, 0xF2}},
      {{.02001953125f, -.01300048828125f, .007110595703125f, .050048828125f},
       0x78,
       {5, 0xB, 2, 7},
       {5, 0xB, 2, 7},
       {0xB5, 0x72},
       {0xB5, 0x72}},
      {{}, 0x00, {}, {}, {0x00}, {0x00}},
  };
}

TEST(QuantizeMxfp4, SpecWorkedExamplesBothRoundings) {
  const auto examples = spec_blocks();
  for (auto rounding : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
    for (std::size_t ex = 0; ex < examples.size(); ++ex) {
      const auto& e = examples[ex];
      for (int block : {0, 7, 17}) {  // also checks where a block lands in the row
        std::vector<std::uint16_t> row(kRow, 0);
        for (std::size_t j = 0; j < e.x.size(); ++j) {
          row[std::size_t(block * kBlock) + j] = bf(e.x[j]);
          ASSERT_EQ(bf_val(bf(e.x[j])), e.x[j]);  // exact in bf16
        }
        mla::Mxfp4Quantized q;
        ASSERT_TRUE(mla::quantize_mxfp4(row, 1, rounding, 18, &q).ok());
        ASSERT_EQ(q.data.size(), 288u);
        ASSERT_EQ(q.scales.size(), 18u);
        const bool rne = rounding == Mxfp4Rounding::rne;
        for (int k = 0; k < 18; ++k) EXPECT_EQ(q.scales[k], k == block ? e.scale : 0x00) << ex << " " << k;
        const auto& codes = rne ? e.rne_codes : e.legacy_codes;
        for (std::size_t j = 0; j < codes.size(); ++j) {
          const std::size_t i = std::size_t(block * kBlock) + j;
          const std::uint8_t byte = q.data[i / 2];
          EXPECT_EQ((i % 2) ? (byte >> 4) : (byte & 0xF), codes[j]) << ex << " element " << j;
        }
        const auto& bytes = rne ? e.rne_bytes : e.legacy_bytes;
        for (std::size_t j = 0; j < 288; ++j) {
          const std::size_t first = std::size_t(block * 16);
          const std::uint8_t want = (j >= first && j < first + bytes.size()) ? bytes[j - first] : 0x00;
          EXPECT_EQ(q.data[j], want) << ex << " byte " << j;
        }
      }
    }
  }
}

// Block with amax 6 (scale 2^0, byte 127): every tie and its neighbours, both signs.
TEST(QuantizeMxfp4, EveryTieInABlockBothRoundings) {
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const int rne[] = {0, 2, 2, 4, 4, 6, 6};
  const int legacy[] = {1, 2, 3, 4, 5, 6, 7};
  std::vector<std::uint16_t> row(kRow, 0);
  row[0] = bf(6.0f);
  for (int t = 0; t < 7; ++t) {
    row[std::size_t(1 + t)] = bf(ties[t]);
    row[std::size_t(8 + t)] = bf(-ties[t]);
  }
  for (auto rounding : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
    mla::Mxfp4Quantized q;
    ASSERT_TRUE(mla::quantize_mxfp4(row, 1, rounding, 18, &q).ok());
    EXPECT_EQ(q.scales[0], 127);
    auto code = [&](int i) { return (i % 2) ? (q.data[std::size_t(i / 2)] >> 4) : (q.data[std::size_t(i / 2)] & 0xF); };
    EXPECT_EQ(code(0), 7);
    for (int t = 0; t < 7; ++t) {
      const int want = rounding == Mxfp4Rounding::rne ? rne[t] : legacy[t];
      EXPECT_EQ(code(1 + t), want) << ties[t];
      EXPECT_EQ(code(8 + t), want | 8) << -ties[t];
    }
  }
}

TEST(QuantizeMxfp4, ZeroAndSignedZeroBlocks) {
  std::vector<std::uint16_t> row(kRow, 0);
  for (int j = 0; j < kBlock; ++j) row[std::size_t(kBlock + j)] = 0x8000;  // block 1: all −0
  row[2 * kBlock] = 0x8000;                                                // block 2: one −0
  mla::Mxfp4Quantized q;
  ASSERT_TRUE(mla::quantize_mxfp4(row, 1, Mxfp4Rounding::rne, 18, &q).ok());
  for (int k = 0; k < 18; ++k) EXPECT_EQ(q.scales[k], 0);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q.data[std::size_t(j)], 0x00);
  for (int j = 16; j < 32; ++j) EXPECT_EQ(q.data[std::size_t(j)], 0x88);
  EXPECT_EQ(q.data[32], 0x08);
  EXPECT_EQ(q.data[33], 0x00);
  for (int k = 0; k < 18; ++k) EXPECT_EQ(mla::decode_mxfp4_element(q.data.data(), q.scales.data(), k * kBlock), 0.0f);
}

TEST(QuantizeMxfp4, TinyAndSubnormalBlocks) {
  struct Case {
    std::uint16_t amax;
    std::uint8_t scale;
    int code;
  };
  const Case cases[] = {
      {0x0001, 0, 0},       // smallest bf16 subnormal 2^-133: qx = 2^-6 → 0
      {0x0040, 0, 2},       // 2^-127: qx = 1
      {0x007F, 0, 4},       // 0.9921875 · 2^-126: qx = 1.984375 → 2
      {0x0100, 0, 6},       // 2^-125: rounded exponent 2, s = 0, qx = 4
      {0x0180, 1, 6},       // 2^-124: s = 1, qx = 4
      {0x0160, 1, 6},       // 1.75 · 2^-125 rounds up to 2^-124: s = 1, qx = 3.5 → 4
      {0x015F, 0, 7},       // 1.7421875 · 2^-125: s = 0, qx = 6.97 → saturates at 6
      {bf(1e-30f), 25, 7},  // an ordinary tiny block: 1.265625·2^-100, s = 25, qx = 5.0625
  };
  for (const auto& c : cases) {
    for (auto rounding : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
      std::vector<std::uint16_t> row(kRow, 0);
      row[5] = c.amax;
      row[6] = std::uint16_t(c.amax | 0x8000);
      mla::Mxfp4Quantized q;
      ASSERT_TRUE(mla::quantize_mxfp4(row, 1, rounding, 18, &q).ok());
      std::uint8_t ref_scale;
      std::uint8_t ref_codes[kBlock];
      ref_mxfp4_block(row.data(), rounding, &ref_scale, ref_codes);
      EXPECT_EQ(ref_scale, q.scales[0]) << std::hex << c.amax;
      EXPECT_EQ(q.scales[0], c.scale) << std::hex << c.amax;
      EXPECT_EQ(q.data[2] >> 4, c.code) << std::hex << c.amax;       // element 5
      EXPECT_EQ(q.data[3] & 0xF, c.code | 8) << std::hex << c.amax;  // element 6
      EXPECT_EQ(q.data[2] >> 4, ref_codes[5]);
    }
  }
}

TEST(QuantizeMxfp4, HugeBlocksExponent255Rule) {
  struct Case {
    std::vector<std::uint16_t> x;
    std::uint8_t scale;
    std::vector<int> codes;
  };
  const Case cases[] = {
      // bf16 max 1.9921875·2^127 rounds to 2^128 (exponent 255): s = 254, qx = 1.99 → code 4.
      {{0x7F7F, 0xFF7F, 0x3F80}, 254, {4, 0xC, 0}},
      // 1.75·2^127 rounds up to 2^128 too: s = 254, qx = 1.75 → 2 (tie: RNE and legacy agree).
      {{0x7F60, 0x7F00}, 254, {4, 2}},
      // 1.7421875·2^127 stays at 2^127: s = 252, qx = 6.97 → 6 (code 7, saturated); 2^126 → qx 2.
      {{0x7F5F, 0x7E80}, 252, {7, 4}},
      // inf: exponent 255 → s = 254, ±inf · 2^-127 = ±inf → ±6.
      {{0x7F80, 0xFF80, 0x3F80, 0x7F00}, 254, {7, 0xF, 0, 2}},
  };
  for (const auto& c : cases) {
    for (auto rounding : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
      std::vector<std::uint16_t> row(kRow, 0);
      std::copy(c.x.begin(), c.x.end(), row.begin() + 3 * kBlock);
      mla::Mxfp4Quantized q;
      ASSERT_TRUE(mla::quantize_mxfp4(row, 1, rounding, 18, &q).ok());
      EXPECT_EQ(q.scales[3], c.scale);
      for (std::size_t j = 0; j < c.codes.size(); ++j) {
        const std::size_t i = std::size_t(3 * kBlock) + j;
        EXPECT_EQ((i % 2) ? (q.data[i / 2] >> 4) : (q.data[i / 2] & 0xF), c.codes[j]) << j;
      }
      std::vector<std::uint8_t> rd, rs;
      ref_quantize_mxfp4(row, 1, rounding, 18, &rd, &rs);
      EXPECT_EQ(q.data, rd);
      EXPECT_EQ(q.scales, rs);
    }
  }
  // Decoded, ±inf comes back as ±inf (6 · 2^127 overflows fp32), as does 2 · 2^127.
  std::vector<std::uint16_t> row(kRow, 0);
  row[0] = 0x7F80;
  row[1] = 0xFF80;
  row[2] = 0x7F7F;
  mla::Mxfp4Quantized q;
  ASSERT_TRUE(mla::quantize_mxfp4(row, 1, Mxfp4Rounding::rne, 18, &q).ok());
  EXPECT_EQ(mla::decode_mxfp4_element(q.data.data(), q.scales.data(), 0), INFINITY);
  EXPECT_EQ(mla::decode_mxfp4_element(q.data.data(), q.scales.data(), 1), -INFINITY);
  EXPECT_EQ(mla::decode_mxfp4_element(q.data.data(), q.scales.data(), 2), INFINITY);
}

TEST(QuantizeMxfp4, NaNBlockGetsNaNScale) {
  for (std::uint16_t nan :
       {std::uint16_t(0x7FC0), std::uint16_t(0xFFC0), std::uint16_t(0x7F81), std::uint16_t(0x7FFF)}) {
    auto row = random_bf16(2 * kRow, 9);
    row[std::size_t(4 * kBlock + 9)] = nan;  // row 0, block 4
    for (auto rounding : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
      mla::Mxfp4Quantized q;
      ASSERT_TRUE(mla::quantize_mxfp4(row, 2, rounding, 24, &q).ok());
      EXPECT_EQ(q.scales[4], 0xFF);
      for (int j = 0; j < 16; ++j) EXPECT_EQ(q.data[std::size_t(4 * 16 + j)], 0x00);
      for (int j = 0; j < kBlock; ++j)
        EXPECT_TRUE(std::isnan(mla::decode_mxfp4_element(q.data.data(), q.scales.data(), 4 * kBlock + j)));
      // Every other block, and the other row, quantizes as usual.
      std::vector<std::uint8_t> rd, rs;
      ref_quantize_mxfp4(row, 2, rounding, 24, &rd, &rs);
      EXPECT_EQ(q.data, rd);
      EXPECT_EQ(q.scales, rs);
      for (int k = 0; k < 18; ++k) {
        if (k != 4) {
          EXPECT_NE(q.scales[std::size_t(k)], 0xFF);
        }
      }
    }
  }
}

TEST(QuantizeMxfp4, StridesAndPaddingMatchReference) {
  const std::int64_t rows = 37;
  const auto x = random_bf16(std::size_t(rows * kRow), 21, -40, 40);
  for (std::int64_t stride : {18, 24, 32}) {
    for (auto rounding : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
      mla::Mxfp4Quantized q;
      q.scales.assign(5, 0xAB);  // stale contents must be replaced
      ASSERT_TRUE(mla::quantize_mxfp4(x, rows, rounding, stride, &q).ok());
      EXPECT_EQ(q.scale_stride, stride);
      ASSERT_EQ(q.data.size(), std::size_t(rows * 288));
      ASSERT_EQ(q.scales.size(), std::size_t(rows * stride));
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 18; c < stride; ++c) ASSERT_EQ(q.scales[std::size_t(r * stride + c)], 0x00);
      std::vector<std::uint8_t> rd, rs;
      ref_quantize_mxfp4(x, rows, rounding, stride, &rd, &rs);
      EXPECT_EQ(q.data, rd);
      EXPECT_EQ(q.scales, rs);
    }
  }
}

TEST(QuantizeMxfp4, ErrorBound) {
  const std::int64_t rows = 64;
  const auto x = random_bf16(std::size_t(rows * kRow), 33, -30, 30);
  for (auto rounding : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
    mla::Mxfp4Quantized q;
    ASSERT_TRUE(mla::quantize_mxfp4(x, rows, rounding, 18, &q).ok());
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::uint8_t* data = &q.data[std::size_t(r * 288)];
      const std::uint8_t* sc = &q.scales[std::size_t(r * 18)];
      for (int i = 0; i < kRow; ++i) {
        const double v = bf_val(x[std::size_t(r * kRow + i)]);
        const double scale = mla::decode_e8m0(sc[i / kBlock]);
        const double qx = std::fabs(v) / scale;
        ASSERT_LT(qx, 7.0);  // the power-of-two scale leaves at most 7 (saturation error ≤ 1)
        // Half the E2M1 step around |qx|: 0.25 up to 2, 0.5 up to 4, 1 above.
        const double half_step = qx <= 2 ? 0.25 : qx <= 4 ? 0.5 : 1.0;
        const double d = mla::decode_mxfp4_element(data, sc, i);
        ASSERT_LE(std::fabs(d - v), half_step * scale) << r << " " << i << " " << v;
      }
    }
  }
}

// Threads split by rows: a big call equals per-row calls.
TEST(QuantizeMxfp4, LargeInputEqualsPerRowCalls) {
  const std::int64_t rows = 6000;  // 3.4M elements: several threads
  const auto x = random_bf16(std::size_t(rows * kRow), 44, -20, 20);
  mla::Mxfp4Quantized q;
  ASSERT_TRUE(mla::quantize_mxfp4(x, rows, Mxfp4Rounding::rne, 24, &q).ok());
  for (std::int64_t r = 0; r < rows; r += 7) {
    mla::Mxfp4Quantized one;
    const std::span<const std::uint16_t> row(x.data() + r * kRow, kRow);
    ASSERT_TRUE(mla::quantize_mxfp4(row, 1, Mxfp4Rounding::rne, 24, &one).ok());
    ASSERT_TRUE(std::equal(one.data.begin(), one.data.end(), q.data.begin() + r * 288)) << r;
    ASSERT_TRUE(std::equal(one.scales.begin(), one.scales.end(), q.scales.begin() + r * 24)) << r;
  }
  std::vector<std::uint8_t> rd, rs;
  ref_quantize_mxfp4(x, rows, Mxfp4Rounding::rne, 24, &rd, &rs);
  EXPECT_TRUE(q.data == rd);
  EXPECT_TRUE(q.scales == rs);
}

TEST(QuantizeMxfp4, InvalidArguments) {
  const std::vector<std::uint16_t> x(kRow * 2, 0);
  mla::Mxfp4Quantized q;
  EXPECT_EQ(mla::quantize_mxfp4(x, 2, Mxfp4Rounding::rne, 17, &q).code, mla::StatusCode::invalid_argument);
  EXPECT_EQ(mla::quantize_mxfp4(x, 3, Mxfp4Rounding::rne, 18, &q).code, mla::StatusCode::invalid_argument);
  EXPECT_EQ(mla::quantize_mxfp4(x, 1, Mxfp4Rounding::rne, 18, &q).code, mla::StatusCode::invalid_argument);
  EXPECT_EQ(mla::quantize_mxfp4(x, -1, Mxfp4Rounding::rne, 18, &q).code, mla::StatusCode::invalid_argument);
  EXPECT_EQ(mla::quantize_mxfp4(x, 2, Mxfp4Rounding::rne, 18, nullptr).code, mla::StatusCode::invalid_argument);
  EXPECT_EQ(mla::quantize_mxfp4(x, 2, static_cast<Mxfp4Rounding>(5), 18, &q).code, mla::StatusCode::invalid_argument);
  EXPECT_FALSE(mla::quantize_mxfp4(x, 2, Mxfp4Rounding::rne, 17, &q).message.empty());
  const auto ok = mla::quantize_mxfp4({}, 0, Mxfp4Rounding::rne, 18, &q);
  EXPECT_TRUE(ok.ok());
  EXPECT_TRUE(q.data.empty());
  EXPECT_TRUE(q.scales.empty());
}

// An argument error leaves `out` as it was (formats.md), also when the error is a scale matrix too
// large to allocate: a scale_stride of 2^62 once threw std::bad_alloc out of this Status API after
// setting out->scale_stride.
TEST(QuantizeMxfp4, ErrorsLeaveOutUntouched) {
  const std::vector<std::uint16_t> x(kRow, 0x3F80);  // 1.0
  mla::Mxfp4Quantized q;
  q.data = {1, 2, 3};
  q.scales = {4};
  q.scale_stride = 99;
  const auto expect_untouched = [&](const mla::Status& s, const char* what) {
    EXPECT_EQ(s.code, mla::StatusCode::invalid_argument) << what;
    EXPECT_FALSE(s.message.empty()) << what;
    EXPECT_EQ(q.data, (std::vector<std::uint8_t>{1, 2, 3})) << what;
    EXPECT_EQ(q.scales, std::vector<std::uint8_t>{4}) << what;
    EXPECT_EQ(q.scale_stride, 99) << what;
  };
  expect_untouched(mla::quantize_mxfp4(x, 1, Mxfp4Rounding::rne, 17, &q), "stride 17");
  expect_untouched(mla::quantize_mxfp4(x, 2, Mxfp4Rounding::rne, 18, &q), "rows mismatch");
  const mla::Status huge = mla::quantize_mxfp4(x, 1, Mxfp4Rounding::rne, std::int64_t(1) << 62, &q);
  expect_untouched(huge, "stride 2^62");
  EXPECT_NE(huge.message.find("scale_stride"), std::string::npos) << huge.message;
  // And a valid call replaces all three.
  ASSERT_TRUE(mla::quantize_mxfp4(x, 1, Mxfp4Rounding::rne, 24, &q).ok());
  EXPECT_EQ(q.data.size(), 288u);
  EXPECT_EQ(q.scales.size(), 24u);
  EXPECT_EQ(q.scale_stride, 24);
}

}  // namespace
