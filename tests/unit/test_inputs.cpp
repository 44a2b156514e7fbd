// The seeded input generator (src/testing/inputs.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "host/problem_access.h"
#include "kernels/common/bf16.h"
#include "mla/mla.h"
#include "mla/quantize.h"
#include "testing/inputs.h"

namespace mla::testing {
namespace {

void expect_same_bytes(const HostInputs& a, const HostInputs& b) {
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.qo_indptr, b.qo_indptr);
  EXPECT_EQ(a.kv_indptr, b.kv_indptr);
  EXPECT_EQ(a.kv_rows, b.kv_rows);
  EXPECT_EQ(a.kv_bf16, b.kv_bf16);
  EXPECT_EQ(a.kv_data, b.kv_data);
  EXPECT_EQ(a.kv_scales, b.kv_scales);
  EXPECT_EQ(a.fp8_scale, b.fp8_scale);
  EXPECT_EQ(a.page_table, b.page_table);
  EXPECT_EQ(a.page_table_stride, b.page_table_stride);
}

CaseSpec ragged_spec(KvFormat f, int page_size, bool flat = false) {
  CaseSpec s;
  s.kv_lens = ragged_lengths(9, 5, 700);
  s.format = f;
  s.page_size = page_size;
  s.flat_page_table = flat;
  s.s_q = 2;
  s.spare_rows = 70;
  return s;
}

TEST(Inputs, SameSeedSameBytesWhateverTheThreadCount) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4}) {
    for (int ps : {0, 16}) {
      const CaseSpec spec = ragged_spec(f, ps);
      SCOPED_TRACE(spec.name());
      const HostInputs one = make_inputs(spec, 1);
      for (int threads : {0, 3, 8}) expect_same_bytes(one, make_inputs(spec, threads));
      CaseSpec other = spec;
      other.seed = 2;
      const HostInputs two = make_inputs(other);
      EXPECT_NE(one.q, two.q);
      EXPECT_NE(one.kv_bf16, two.kv_bf16);
    }
  }
}

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}
double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size()));
}

std::vector<double> to_double(const std::vector<std::uint16_t>& bits) {
  std::vector<double> v(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) v[i] = bf16_to_float(bits[i]);
  return v;
}

TEST(Inputs, Distributions) {
  CaseSpec spec = CaseSpec::uniform(4, 512, KvFormat::bf16);
  const HostInputs challenge = make_inputs(spec);
  spec.dist = Distribution::peaked;
  const HostInputs peaked = make_inputs(spec);
  const std::vector<double> qc = to_double(challenge.q), qp = to_double(peaked.q), kv = to_double(challenge.kv_bf16);
  EXPECT_NEAR(mean_of(qc), 0.0, 0.001);
  EXPECT_NEAR(std_of(qc), 0.02, 0.0004);
  EXPECT_NEAR(mean_of(qp), 0.0, 5.0);
  EXPECT_NEAR(std_of(qp), 150.0, 3.0);
  EXPECT_NEAR(mean_of(kv), 0.0, 0.0005);
  EXPECT_NEAR(std_of(kv), 0.02, 0.0004);
  // The KV is the same in both (only q depends on the distribution).
  EXPECT_EQ(challenge.kv_bf16, peaked.kv_bf16);
  // Gaussian shape: about 68.3% within one sigma, 95.4% within two.
  const double within1 =
      double(std::count_if(kv.begin(), kv.end(), [](double x) { return std::abs(x) < 0.02; })) / double(kv.size());
  const double within2 =
      double(std::count_if(kv.begin(), kv.end(), [](double x) { return std::abs(x) < 0.04; })) / double(kv.size());
  EXPECT_NEAR(within1, 0.683, 0.01);
  EXPECT_NEAR(within2, 0.954, 0.005);
  // Peaked logits: std ≈ 3 (SPEC §3).
  std::vector<double> logits;
  for (int h = 0; h < kNumHeads; ++h) {
    for (int n = 0; n < 512; ++n) {
      double s = 0;
      for (int d = 0; d < kHeadDim; ++d) s += qp[std::size_t(h * kHeadDim + d)] * kv[std::size_t(n * kHeadDim + d)];
      logits.push_back(s / 24.0);
    }
  }
  EXPECT_NEAR(std_of(logits), 3.0, 0.3);
}

// make_inputs quantizes in row blocks, in parallel; climb_kv re-encodes its rescaled source the same
// way. Both must give the bytes of one whole-tensor call.
TEST(Inputs, QuantizedCachesMatchWholeTensorQuantizers) {
  for (KvFormat f : {KvFormat::fp8, KvFormat::mxfp4}) {
    for (std::int64_t stride : {18, 24}) {
      if (f == KvFormat::fp8 && stride == 24) continue;
      CaseSpec spec = CaseSpec::uniform(4, 300, f);  // several 256-row generator blocks
      spec.scale_stride = stride;
      spec.dist = Distribution::peaked;
      HostInputs in = make_inputs(spec);
      for (bool climbed : {false, true}) {
        if (climbed) climb_kv(&in, 16);
        SCOPED_TRACE(spec.name() + (climbed ? " climbed" : ""));
        ASSERT_EQ(in.kv_rows, 1200);
        ASSERT_EQ(in.kv_bf16.size(), std::size_t(1200 * kHeadDim));
        if (f == KvFormat::fp8) {
          const Fp8Quantized whole = quantize_fp8(in.kv_bf16);
          EXPECT_EQ(in.kv_data, whole.bytes);
          EXPECT_EQ(in.fp8_scale, whole.scale);
          EXPECT_GT(in.fp8_scale, 0.0f);
        } else {
          Mxfp4Quantized whole;
          ASSERT_TRUE(quantize_mxfp4(in.kv_bf16, in.kv_rows, Mxfp4Rounding::rne, stride, &whole).ok());
          EXPECT_EQ(in.kv_data, whole.data);
          EXPECT_EQ(in.kv_scales, whole.scales);
        }
      }
    }
  }
  // bf16: the cache is the source.
  const HostInputs in = make_inputs(CaseSpec::uniform(2, 10, KvFormat::bf16));
  ASSERT_EQ(in.kv_data.size(), in.kv_bf16.size() * 2);
  EXPECT_EQ(std::memcmp(in.kv_bf16.data(), in.kv_data.data(), in.kv_data.size()), 0);
}

TEST(Inputs, PagedLayoutsAreValidPermutationsOfTheSameLogicalData) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4}) {
    CaseSpec cspec = ragged_spec(f, 0);
    cspec.spare_rows = 0;
    const HostInputs contiguous = make_inputs(cspec);
    for (int ps : {1, 16, 64}) {
      for (bool flat : {false, true}) {
        if (flat && ps != 1) continue;
        const CaseSpec spec = ragged_spec(f, ps, flat);
        SCOPED_TRACE(spec.name());
        const HostInputs in = make_inputs(spec);
        std::vector<std::uint16_t> out(std::size_t(in.total_q) * kNumHeads * kValueDim);
        const Problem p = in.problem(out.data(), nullptr);
        ASSERT_TRUE(validate(p, Backend::cpu).ok()) << validate(p, Backend::cpu).message;
        EXPECT_EQ(in.q, contiguous.q);
        EXPECT_EQ(in.fp8_scale, contiguous.fp8_scale);
        EXPECT_EQ(in.kv_rows % ps, 0);
        const std::int64_t num_pages = in.kv_rows / ps;
        const std::int64_t total = in.kv_indptr.back();
        if (flat) {
          EXPECT_EQ(in.page_table_stride, 0);
          EXPECT_EQ(std::int64_t(in.page_table.size()), total);
        } else {
          std::int64_t max_pages = 0;
          for (std::int32_t len : spec.kv_lens) max_pages = std::max<std::int64_t>(max_pages, (len + ps - 1) / ps);
          EXPECT_EQ(in.page_table_stride, max_pages);
          EXPECT_EQ(std::int64_t(in.page_table.size()), in.batch * max_pages);
        }
        // Used entries: distinct pages in range; every other entry -1.
        std::set<std::int32_t> used;
        std::vector<bool> row_used(std::size_t(in.kv_rows), false);
        std::int64_t used_entries = 0;
        for (int b = 0; b < in.batch; ++b) {
          const std::int64_t len = kv_length(p, b);
          const std::int64_t pages = (len + ps - 1) / ps;
          used_entries += pages;
          const std::int64_t base = flat ? in.kv_indptr[std::size_t(b)] : b * in.page_table_stride;
          for (std::int64_t j = 0; j < pages; ++j) {
            const std::int32_t e = in.page_table[std::size_t(base + j)];
            ASSERT_GE(e, 0);
            ASSERT_LT(e, num_pages);
            EXPECT_TRUE(used.insert(e).second) << "page " << e << " used twice";
          }
          if (!flat) {
            for (std::int64_t j = pages; j < in.page_table_stride; ++j)
              EXPECT_EQ(in.page_table[std::size_t(base + j)], -1);
          }
          // Logical token n holds the contiguous case's row kv_indptr[b] + n, in every format.
          for (std::int64_t n = 0; n < len; ++n) {
            const std::int64_t r = physical_row(p, b, n);
            const std::int64_t c = in.kv_indptr[std::size_t(b)] + n;
            row_used[std::size_t(r)] = true;
            ASSERT_TRUE(std::equal(in.kv_bf16.begin() + r * kHeadDim, in.kv_bf16.begin() + (r + 1) * kHeadDim,
                                   contiguous.kv_bf16.begin() + c * kHeadDim));
            const std::int64_t rb = kv_row_bytes(f);
            ASSERT_TRUE(std::equal(in.kv_data.begin() + r * rb, in.kv_data.begin() + (r + 1) * rb,
                                   contiguous.kv_data.begin() + c * rb));
            if (f == KvFormat::mxfp4) {
              ASSERT_TRUE(std::equal(in.kv_scales.begin() + r * 18, in.kv_scales.begin() + r * 18 + 18,
                                     contiguous.kv_scales.begin() + c * 18));
            }
          }
        }
        EXPECT_EQ(std::int64_t(used.size()), used_entries);
        // Spare rows (≥ 70, whole pages) exist and every unread row is poisoned.
        const std::int64_t unused_rows = std::count(row_used.begin(), row_used.end(), false);
        EXPECT_GE(unused_rows, spec.spare_rows);
        EXPECT_GE(num_pages - used_entries, (spec.spare_rows + ps - 1) / ps);
        for (std::int64_t r = 0; r < in.kv_rows; ++r) {
          if (row_used[std::size_t(r)]) continue;
          EXPECT_TRUE(std::isnan(bf16_to_float(in.kv_bf16[std::size_t(r * kHeadDim)])));
          EXPECT_EQ(in.kv_data[std::size_t(r * kv_row_bytes(f))], 0xFF);
          if (f == KvFormat::mxfp4) {
            EXPECT_EQ(in.kv_scales[std::size_t(r * 18)], 0xFF);
          }
        }
      }
    }
  }
}

TEST(Inputs, PagesInOrderFollowOneAnotherAndHoldTheSameTokens) {
  for (int ps : {1, 16, 64}) {
    CaseSpec spec = ragged_spec(KvFormat::fp8, ps);
    const HostInputs shuffled = make_inputs(spec);
    spec.pages_in_order = true;
    SCOPED_TRACE(spec.name());
    const HostInputs in = make_inputs(spec);
    std::vector<std::uint16_t> out(std::size_t(in.total_q) * kNumHeads * kValueDim);
    const Problem p = in.problem(out.data(), nullptr);
    const Problem ps_p = shuffled.problem(out.data(), nullptr);
    ASSERT_TRUE(validate(p, Backend::cpu).ok()) << validate(p, Backend::cpu).message;
    EXPECT_NE(in.page_table, shuffled.page_table);
    std::int32_t next = 0;  // request 0's pages first, each request's pages one after another
    for (int b = 0; b < in.batch; ++b) {
      const std::int64_t len = kv_length(p, b);
      for (std::int64_t j = 0; j < (len + ps - 1) / ps; ++j)
        EXPECT_EQ(in.page_table[std::size_t(b * in.page_table_stride + j)], next++);
      for (std::int64_t n = 0; n < len; ++n) {
        const std::int64_t r = physical_row(p, b, n), rs = physical_row(ps_p, b, n);
        ASSERT_TRUE(std::equal(in.kv_data.begin() + r * 576, in.kv_data.begin() + (r + 1) * 576,
                               shuffled.kv_data.begin() + rs * 576));
      }
    }
  }
}

TEST(Inputs, SpareRowsAndScalePaddingArePoisoned) {
  CaseSpec spec = CaseSpec::uniform(2, 40, KvFormat::mxfp4);
  spec.scale_stride = 24;
  spec.spare_rows = 5;
  const HostInputs in = make_inputs(spec);
  ASSERT_EQ(in.kv_rows, 85);
  for (std::int64_t r = 0; r < 85; ++r) {
    const bool spare = r >= 80;
    for (int c = 0; c < 24; ++c) {
      const std::uint8_t s = in.kv_scales[std::size_t(r * 24 + c)];
      if (spare || c >= 18) {
        EXPECT_EQ(s, 0xFF) << r << " " << c;
      } else {
        EXPECT_NE(s, 0xFF) << r << " " << c;
      }
    }
    EXPECT_EQ(std::isnan(bf16_to_float(in.kv_bf16[std::size_t(r * kHeadDim + 7)])), spare);
  }
  // Without spare rows the padding is the quantizer's zeros.
  spec.spare_rows = 0;
  const HostInputs plain = make_inputs(spec);
  for (std::int64_t r = 0; r < plain.kv_rows; ++r) {
    for (int c = 18; c < 24; ++c) EXPECT_EQ(plain.kv_scales[std::size_t(r * 24 + c)], 0x00);
  }
  // The fp8 scale ignores the NaN rows.
  CaseSpec f8 = CaseSpec::uniform(2, 40, KvFormat::fp8);
  const HostInputs a = make_inputs(f8);
  f8.spare_rows = 33;
  const HostInputs b = make_inputs(f8);
  EXPECT_EQ(a.fp8_scale, b.fp8_scale);
  EXPECT_TRUE(std::equal(a.kv_data.begin(), a.kv_data.end(), b.kv_data.begin()));
  EXPECT_TRUE(std::all_of(b.kv_data.begin() + std::ptrdiff_t(a.kv_data.size()), b.kv_data.end(),
                          [](std::uint8_t x) { return x == 0xFF; }));
}

TEST(Inputs, RaggedLengths) {
  const std::vector<std::int32_t> a = ragged_lengths(16, 7);
  EXPECT_EQ(a, ragged_lengths(16, 7));
  EXPECT_NE(a, ragged_lengths(16, 8));
  ASSERT_EQ(a.size(), 16u);
  for (std::int32_t want : {0, 1, 63, 64, 65, 8191, 127, 257, 521, 1031, 2053, 4099}) {
    EXPECT_NE(std::find(a.begin(), a.end(), want), a.end()) << want;
  }
  for (std::int32_t len : a) {
    EXPECT_GE(len, 0);
    EXPECT_LE(len, 8191);
  }
  const std::vector<std::int32_t> small = ragged_lengths(6, 1, 100);
  ASSERT_EQ(small.size(), 6u);
  for (std::int32_t want : {0, 1, 63, 64, 65, 100})
    EXPECT_NE(std::find(small.begin(), small.end(), want), small.end()) << want;
  for (std::int32_t len : ragged_lengths(64, 3, 500)) EXPECT_LE(len, 500);
  EXPECT_EQ(ragged_lengths(1, 1).size(), 1u);
}

TEST(Inputs, UniformNameAndBytes) {
  const CaseSpec spec = CaseSpec::uniform(4, 1024, KvFormat::fp8);
  EXPECT_EQ(spec.kv_lens, std::vector<std::int32_t>(4, 1024));
  EXPECT_EQ(spec.name(), "fp8 b4 kv1024");
  CaseSpec p = spec;
  p.page_size = 64;
  p.dist = Distribution::peaked;
  EXPECT_EQ(p.name(), "fp8 b4 kv1024 paged64 peaked");
  CaseSpec m = CaseSpec::uniform(2, 5, KvFormat::mxfp4);
  m.kv_lens[1] = 7;
  m.scale_stride = 24;
  m.page_size = 1;
  m.flat_page_table = true;
  m.s_q = 2;
  EXPECT_EQ(m.name(), "mxfp4 b2 kvragged12 sq2 kvindices stride24");

  EXPECT_EQ(make_inputs(CaseSpec::uniform(4, 100, KvFormat::bf16)).kv_bytes_read(), 400 * 1152);
  EXPECT_EQ(make_inputs(CaseSpec::uniform(4, 100, KvFormat::fp8)).kv_bytes_read(), 400 * 576);
  CaseSpec mx = CaseSpec::uniform(4, 100, KvFormat::mxfp4);
  mx.scale_stride = 24;
  mx.spare_rows = 9;
  EXPECT_EQ(make_inputs(mx).kv_bytes_read(), 400 * (288 + 18));
}

TEST(Inputs, AllEmptyRequestsStillFormAValidProblem) {
  for (int ps : {0, 1, 16}) {
    CaseSpec spec = CaseSpec::uniform(3, 0, KvFormat::mxfp4);
    spec.page_size = ps;
    spec.flat_page_table = ps == 1;
    const HostInputs in = make_inputs(spec);
    std::vector<std::uint16_t> out(std::size_t(in.total_q) * kNumHeads * kValueDim);
    const Problem p = in.problem(out.data(), nullptr);
    EXPECT_TRUE(validate(p, Backend::cpu).ok()) << validate(p, Backend::cpu).message;
    EXPECT_EQ(in.kv_bytes_read(), 0);
  }
}

TEST(Inputs, RowPaddingSpreadsTheRowsAndPoisonsThePadding) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4}) {
    CaseSpec spec = CaseSpec::uniform(2, 70, f);
    const HostInputs dense = make_inputs(spec);
    spec.row_padding = 48;
    const HostInputs padded = make_inputs(spec);
    const std::int64_t rb = kv_row_bytes(f);
    ASSERT_EQ(dense.kv_row_stride, rb);
    ASSERT_EQ(padded.kv_row_stride, rb + 48);
    ASSERT_EQ(padded.kv_rows, dense.kv_rows);
    ASSERT_EQ(padded.kv_data.size(), std::size_t(padded.kv_rows * (rb + 48)));
    for (std::int64_t r = 0; r < padded.kv_rows; ++r) {
      const auto row = padded.kv_data.begin() + r * (rb + 48);
      EXPECT_TRUE(std::equal(row, row + rb, dense.kv_data.begin() + r * rb)) << "row " << r;
      EXPECT_TRUE(std::all_of(row + rb, row + rb + 48, [](std::uint8_t b) { return b == 0xFF; })) << "row " << r;
    }
    EXPECT_EQ(padded.problem(nullptr, nullptr).kv.row_stride_bytes, rb + 48);
  }
  CaseSpec bad = CaseSpec::uniform(1, 8, KvFormat::fp8);
  bad.row_padding = 8;
  EXPECT_THROW(make_inputs(bad), std::invalid_argument);
}

}  // namespace
}  // namespace mla::testing
