// The float64 reference (src/testing/compare.h) against a naive, independent computation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/common/bf16.h"
#include "mla/mla.h"
#include "testing/compare.h"
#include "testing/inputs.h"

namespace mla {
namespace {

using testing::Reference;

const double kScale = double(Problem{}.sm_scale);  // the float 1/24 the reference multiplies by

// A hand-built contiguous problem: logical values are given as doubles (already representable in
// the format), the KV cache bytes are built from them below.
struct Tiny {
  int s_q = 1;
  std::vector<std::int32_t> lens;
  std::vector<double> q;   // [B·s_q × 16 × 576]
  std::vector<double> kv;  // [ΣL × 576]
  std::vector<std::uint16_t> q_bits, kv_bits;
  std::vector<std::int32_t> qo, kvp;
  std::vector<std::uint16_t> out;
  std::vector<float> lse;

  Problem problem() {
    const int batch = int(lens.size());
    qo.assign(std::size_t(batch) + 1, 0);
    kvp.assign(std::size_t(batch) + 1, 0);
    for (int b = 0; b < batch; ++b) {
      qo[std::size_t(b) + 1] = qo[std::size_t(b)] + s_q;
      kvp[std::size_t(b) + 1] = kvp[std::size_t(b)] + lens[std::size_t(b)];
    }
    q_bits.resize(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) q_bits[i] = float_to_bf16(float(q[i]));
    kv_bits.resize(std::max<std::size_t>(kv.size(), kHeadDim));
    for (std::size_t i = 0; i < kv.size(); ++i) kv_bits[i] = float_to_bf16(float(kv[i]));
    out.assign(q.size() / kHeadDim * kValueDim, 0);
    lse.assign(q.size() / kHeadDim, 0.0f);
    Problem p;
    p.batch = batch;
    p.s_q = s_q;
    p.total_q = std::int64_t(batch) * s_q;
    p.q = q_bits.data();
    p.qo_indptr = qo.data();
    p.kv_indptr = kvp.data();
    p.kv.format = KvFormat::bf16;
    p.kv.data = kv_bits.data();
    p.kv.rows = std::int64_t(kv_bits.size() / kHeadDim);
    p.kv.row_stride_bytes = 2 * kHeadDim;
    p.out = out.data();
    p.lse = lse.data();
    return p;
  }
};

// Values exactly representable in bf16: small integers times a power of two.
double bf16_value(std::mt19937_64& rng, double unit) {
  return double(std::int64_t(rng() % 255) - 127) * unit;
}

// Naive: all logits, LSE by direct summation, O = Σ exp(s − lse)·v.
void naive(const Tiny& t, int b, int i, int h, std::int64_t visible, std::vector<double>* out, double* lse) {
  const std::int64_t kv0 = std::accumulate(t.lens.begin(), t.lens.begin() + b, std::int64_t(0));
  const std::int64_t qrow = (std::int64_t(b) * t.s_q + i) * kNumHeads + h;
  std::vector<double> s(static_cast<std::size_t>(visible));
  double big = -INFINITY;
  for (std::int64_t n = 0; n < visible; ++n) {
    long double dot = 0;
    for (int d = 0; d < kHeadDim; ++d)
      dot += (long double)t.q[std::size_t(qrow * kHeadDim + d)] * t.kv[std::size_t((kv0 + n) * kHeadDim + d)];
    s[std::size_t(n)] = double(dot) * kScale;
    big = std::max(big, s[std::size_t(n)]);
  }
  out->assign(kValueDim, 0.0);
  if (visible == 0) {
    *lse = -INFINITY;
    return;
  }
  double sum = 0;
  for (double x : s) sum += std::exp(x - big);
  *lse = big + std::log(sum);
  for (std::int64_t n = 0; n < visible; ++n) {
    const double w = std::exp(s[std::size_t(n)] - *lse);
    for (int d = 0; d < kValueDim; ++d) (*out)[std::size_t(d)] += w * t.kv[std::size_t((kv0 + n) * kHeadDim + d)];
  }
}

void expect_matches_naive(Tiny& t, double q_unit, double kv_unit, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::int64_t total_kv = std::accumulate(t.lens.begin(), t.lens.end(), std::int64_t(0));
  t.q.resize(t.lens.size() * std::size_t(t.s_q) * kNumHeads * kHeadDim);
  for (double& x : t.q) x = bf16_value(rng, q_unit);
  t.kv.resize(std::size_t(total_kv) * kHeadDim);
  for (double& x : t.kv) x = bf16_value(rng, kv_unit);
  const Problem p = t.problem();
  ASSERT_TRUE(validate(p, Backend::cpu).ok()) << validate(p, Backend::cpu).message;
  const Reference ref = testing::reference_decode(p);
  ASSERT_EQ(ref.out.size(), std::size_t(p.total_q) * kNumHeads * kValueDim);
  ASSERT_EQ(ref.lse.size(), std::size_t(p.total_q) * kNumHeads);
  std::vector<double> want;
  for (int b = 0; b < p.batch; ++b) {
    for (int i = 0; i < t.s_q; ++i) {
      const std::int64_t visible = std::max<std::int64_t>(0, t.lens[std::size_t(b)] - t.s_q + i + 1);
      for (int h = 0; h < kNumHeads; ++h) {
        double lse = 0;
        naive(t, b, i, h, visible, &want, &lse);
        const std::size_t row = std::size_t((b * t.s_q + i) * kNumHeads + h);
        if (std::isinf(lse)) {
          EXPECT_EQ(ref.lse[row], -INFINITY);
        } else {
          EXPECT_NEAR(ref.lse[row], lse, 1e-12 * (1 + std::abs(lse))) << "b " << b << " i " << i << " h " << h;
        }
        for (int d = 0; d < kValueDim; ++d) {
          ASSERT_NEAR(ref.out[row * kValueDim + std::size_t(d)], want[std::size_t(d)], 1e-12)
              << "b " << b << " i " << i << " h " << h << " d " << d;
        }
      }
    }
  }
}

TEST(Reference, MatchesNaiveChallengeScale) {
  Tiny t;
  t.lens = {3, 5, 1};
  expect_matches_naive(t, 1.0 / 4096, 1.0 / 4096, 1);
}

TEST(Reference, MatchesNaivePeaked) {
  Tiny t;
  t.lens = {7, 2};
  expect_matches_naive(t, 1.0 / 16, 1.0 / 256, 2);  // logits of about one unit
}

TEST(Reference, CausalRuleForSeveralQueryTokens) {
  for (int s_q = 2; s_q <= kMaxSq; ++s_q) {
    Tiny t;
    t.s_q = s_q;
    t.lens = {0, 1, 2, 6};  // L < s_q: early query tokens see no key at all
    expect_matches_naive(t, 1.0 / 16, 1.0 / 64, 10 + std::uint64_t(s_q));
  }
}

TEST(Reference, EmptyRequestGivesZerosAndMinusInfinity) {
  Tiny t;
  t.lens = {0, 4, 0};
  t.q.assign(3 * kNumHeads * kHeadDim, 0.5);
  t.kv.assign(4 * kHeadDim, 0.25);
  const Problem p = t.problem();
  const Reference ref = testing::reference_decode(p);
  for (int b : {0, 2}) {
    for (int h = 0; h < kNumHeads; ++h) {
      const std::size_t row = std::size_t(b * kNumHeads + h);
      EXPECT_EQ(ref.lse[row], -INFINITY);
      for (int d = 0; d < kValueDim; ++d) EXPECT_EQ(ref.out[row * kValueDim + std::size_t(d)], 0.0);
    }
  }
  // Request 1: four identical keys → uniform softmax, O = the value row, LSE = s + ln 4.
  const double s = 576 * 0.5 * 0.25 * kScale;
  for (int h = 0; h < kNumHeads; ++h) {
    const std::size_t row = std::size_t(kNumHeads + h);
    EXPECT_NEAR(ref.lse[row], s + std::log(4.0), 1e-12);
    for (int d = 0; d < kValueDim; ++d) EXPECT_NEAR(ref.out[row * kValueDim + std::size_t(d)], 0.25, 1e-15);
  }
}

TEST(Reference, LseOfKnownLogits) {
  // One request, two keys with logits 0 and ln 3 for every head: LSE = ln 4, O = (v0 + 3 v1) / 4.
  Tiny t;
  t.lens = {2};
  t.q.assign(kNumHeads * kHeadDim, 0.0);
  t.kv.assign(2 * kHeadDim, 0.0);
  // q[h, 575] = 1 for all heads; kv[1, 575] chosen so that logit = ln 3 (not bf16-exact: use what is stored).
  for (int h = 0; h < kNumHeads; ++h) t.q[std::size_t(h * kHeadDim + 575)] = 1.0;
  const double k = double(round_bf16(float(24.0 * std::log(3.0))));
  t.kv[kHeadDim + 575] = k;
  for (int d = 0; d < kValueDim; ++d) {
    t.kv[std::size_t(d)] = 1.0;
    t.kv[std::size_t(kHeadDim + d)] = 2.0;
  }
  const Problem p = t.problem();
  const Reference ref = testing::reference_decode(p);
  const double w1 = std::exp(k * kScale);
  for (int h = 0; h < kNumHeads; ++h) {
    EXPECT_NEAR(ref.lse[std::size_t(h)], std::log(1.0 + w1), 1e-13);
    EXPECT_NEAR(ref.out[std::size_t(h) * kValueDim], (1.0 + 2.0 * w1) / (1.0 + w1), 1e-13);
  }
}

TEST(Reference, DequantizesFp8AndMxfp4) {
  // One key, so O = the dequantized value row exactly; check a few elements by hand.
  for (KvFormat f : {KvFormat::fp8, KvFormat::mxfp4}) {
    std::vector<std::uint16_t> q(kNumHeads * kHeadDim, 0), out(kNumHeads * kValueDim);
    std::vector<std::int32_t> qo = {0, 1}, kvp = {0, 1};
    std::vector<std::uint8_t> data(kHeadDim, 0), scales(24, 0x7F);
    Problem p;
    p.batch = 1;
    p.total_q = 1;
    p.q = q.data();
    p.qo_indptr = qo.data();
    p.kv_indptr = kvp.data();
    p.kv.format = f;
    p.kv.data = data.data();
    p.kv.rows = 1;
    p.kv.row_stride_bytes = kv_row_bytes(f);
    p.out = out.data();
    std::vector<double> want(kValueDim, 0.0);
    if (f == KvFormat::fp8) {
      p.kv.fp8_scale = 0.5f;
      data[0] = 0x38;  // 1.0
      data[1] = 0xC0;  // -2.0
      data[2] = 0x01;  // 2^-9 (subnormal)
      data[3] = 0x7E;  // 448
      want[0] = 0.5;
      want[1] = -1.0;
      want[2] = std::ldexp(1.0, -10);
      want[3] = 224.0;
    } else {
      p.kv.scales = scales.data();
      p.kv.scale_stride = 24;
      scales[0] = 0x7E;   // 2^-1
      scales[1] = 0x81;   // 2^2
      scales[18] = 0xFF;  // padding column: never read
      data[0] = 0x97;     // elements 0, 1: codes 7 (6), 9 (−0.5)
      data[16] = 0x0B;    // element 32: code B (−1.5)
      want[0] = 3.0;
      want[1] = -0.25;
      want[32] = -6.0;
    }
    const Reference ref = testing::reference_decode(p);
    for (int d = 0; d < kValueDim; ++d)
      ASSERT_EQ(ref.out[std::size_t(d)], want[std::size_t(d)]) << to_string(f) << " " << d;
    EXPECT_EQ(ref.lse[0], 0.0);
  }
}

TEST(Reference, PagedEqualsContiguous) {
  const std::vector<std::int32_t> lens = {70, 0, 129, 1, 16};
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4}) {
    testing::CaseSpec spec;
    spec.kv_lens = lens;
    spec.format = f;
    spec.dist = testing::Distribution::peaked;
    spec.s_q = 2;
    const testing::HostInputs contiguous = testing::make_inputs(spec);
    std::vector<std::uint16_t> out(std::size_t(contiguous.total_q) * kNumHeads * kValueDim);
    std::vector<float> lse(std::size_t(contiguous.total_q) * kNumHeads);
    const Reference want = testing::reference_decode(contiguous.problem(out.data(), lse.data()));
    for (int ps : {1, 16, 64}) {
      for (bool flat : {false, true}) {
        if (flat && ps != 1) continue;
        testing::CaseSpec ps_spec = spec;
        ps_spec.page_size = ps;
        ps_spec.flat_page_table = flat;
        ps_spec.spare_rows = 40;
        const testing::HostInputs paged = testing::make_inputs(ps_spec);
        const Problem p = paged.problem(out.data(), lse.data());
        ASSERT_TRUE(validate(p, Backend::cpu).ok()) << validate(p, Backend::cpu).message;
        const Reference got = testing::reference_decode(p);
        EXPECT_EQ(got.out, want.out) << ps_spec.name();
        EXPECT_EQ(got.lse, want.lse) << ps_spec.name();
      }
    }
  }
}

TEST(Compare, RelerrAndLseChecks) {
  Reference ref;
  ref.out = {1.0, -2.0, 0.5, 0.0};
  ref.lse = {0.25, -INFINITY};
  std::vector<std::uint16_t> out = {float_to_bf16(1.0f), float_to_bf16(-2.0f), float_to_bf16(0.5f), 0};
  std::vector<float> lse = {0.25f, -INFINITY};
  testing::Comparison c = testing::compare(out, lse, ref);
  EXPECT_EQ(c.relerr, 0.0);
  EXPECT_EQ(c.lse_max_abs, 0.0);
  EXPECT_EQ(c.nonfinite, 0);
  EXPECT_TRUE(c.ok());
  EXPECT_FALSE(c.summary().empty());

  out[3] = float_to_bf16(0.1f);
  c = testing::compare(out, {}, ref);
  EXPECT_NEAR(c.relerr, double(round_bf16(0.1f)) / std::sqrt(5.25), 1e-12);
  EXPECT_FALSE(c.ok());

  out[3] = 0x7FC0;  // NaN
  c = testing::compare(out, lse, ref);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_FALSE(c.ok());

  out[3] = 0;
  lse = {0.25f + 2e-4f, 0.0f};  // LSE off, and finite where −inf is expected
  c = testing::compare(out, lse, ref);
  EXPECT_NEAR(c.lse_max_abs, 2e-4, 1e-7);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_FALSE(c.ok());

  EXPECT_EQ(testing::relerr({0.0, 0.0}, {0.0, 0.0}), 0.0);
  EXPECT_NEAR(testing::relerr({3.0, 4.0}, {0.0, 5.0}), std::sqrt(10.0) / 5.0, 1e-15);
  EXPECT_TRUE(std::isinf(testing::relerr({1.0}, {0.0})));
}

}  // namespace
}  // namespace mla
