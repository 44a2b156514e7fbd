// The float64 reference (SPEC §3) and the comparison of a backend's output against it.
#include "testing/compare.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include "host/problem_access.h"
#include "kernels/common/bf16.h"
#include "kernels/common/formats.h"

namespace mla::testing {
namespace {

// Physical row `row` of the cache, dequantized exactly (every format's value is exact in double).
void dequantize_row(const KvCache& kv, std::int64_t row, double* dst) {
  const auto* base = static_cast<const std::uint8_t*>(kv.data) + row * kv.row_stride_bytes;
  switch (kv.format) {
    case KvFormat::bf16:
      for (int d = 0; d < kHeadDim; ++d) {
        std::uint16_t bits;
        std::memcpy(&bits, base + 2 * d, 2);
        dst[d] = bf16_to_float(bits);
      }
      break;
    case KvFormat::fp8:
      for (int d = 0; d < kHeadDim; ++d) dst[d] = double(decode_e4m3(base[d])) * double(kv.fp8_scale);
      break;
    case KvFormat::mxfp4: {
      // decode_mxfp4_element, with each block's scale and the 16 codes decoded once.
      static const struct Codes {
        double v[16];
        Codes() {
          for (int c = 0; c < 16; ++c) v[c] = decode_e2m1(std::uint8_t(c));
        }
      } codes;
      const std::uint8_t* scales = kv.scales + row * kv.scale_stride;
      for (int k = 0; k < kMxfp4ScalesPerRow; ++k) {
        const double s = decode_e8m0(scales[k]);
        for (int j = 0; j < kMxfp4Block / 2; ++j) {
          const std::uint8_t byte = base[k * kMxfp4Block / 2 + j];
          dst[k * kMxfp4Block + 2 * j] = codes.v[byte & 0xF] * s;
          dst[k * kMxfp4Block + 2 * j + 1] = codes.v[byte >> 4] * s;
        }
      }
      break;
    }
  }
}

// Query rows [r0, r1) of request b (row r = query token r / 16, head r % 16), r1 − r0 ≤ kGroup.
constexpr int kGroup = 8;

struct RefScratch {
  std::vector<double> logits;  // [kGroup][end]: logits, then unnormalised weights
  double qt[kHeadDim][kGroup];
  double acc[kGroup][kValueDim];
  double kv[kHeadDim];
};

void reference_rows(const Problem& p, int b, int r0, int r1, RefScratch& sc, Reference* ref) {
  const int nr = r1 - r0;
  const std::int64_t len = kv_length(p, b);
  const std::int64_t qrow0 = std::int64_t(p.qo_indptr[b]) * kNumHeads;
  std::int64_t visible[kGroup] = {};
  std::int64_t end = 0;
  for (int r = 0; r < kGroup; ++r) {
    for (int d = 0; d < kHeadDim; ++d) {
      sc.qt[d][r] = r < nr ? double(bf16_to_float(p.q[(qrow0 + r0 + r) * kHeadDim + d])) : 0.0;
    }
    std::fill(sc.acc[r], sc.acc[r] + kValueDim, 0.0);
    if (r < nr) {
      visible[r] = visible_keys(len, p.s_q, (r0 + r) / kNumHeads);
      end = std::max(end, visible[r]);
    }
  }
  sc.logits.resize(std::size_t(kGroup * std::max<std::int64_t>(end, 1)));
  const double sm_scale = p.sm_scale;
  // Logits: each row's dot product summed in order over d (the loop over rows vectorizes).
  for (std::int64_t n = 0; n < end; ++n) {
    dequantize_row(p.kv, physical_row(p, b, n), sc.kv);
    double s[kGroup] = {};
    for (int d = 0; d < kHeadDim; ++d) {
      for (int r = 0; r < kGroup; ++r) s[r] += sc.qt[d][r] * sc.kv[d];
    }
    for (int r = 0; r < kGroup; ++r) sc.logits[std::size_t(r * end + n)] = s[r] * sm_scale;
  }
  double m[kGroup], l[kGroup];
  for (int r = 0; r < nr; ++r) {
    m[r] = -std::numeric_limits<double>::infinity();
    for (std::int64_t n = 0; n < visible[r]; ++n) m[r] = std::max(m[r], sc.logits[std::size_t(r * end + n)]);
    l[r] = 0;
    for (std::int64_t n = 0; n < visible[r]; ++n) {
      double& x = sc.logits[std::size_t(r * end + n)];
      x = std::exp(x - m[r]);
      l[r] += x;
    }
  }
  for (std::int64_t n = 0; n < end; ++n) {
    dequantize_row(p.kv, physical_row(p, b, n), sc.kv);
    for (int r = 0; r < nr; ++r) {
      if (n >= visible[r]) continue;
      const double w = sc.logits[std::size_t(r * end + n)];
      for (int d = 0; d < kValueDim; ++d) sc.acc[r][d] += w * sc.kv[d];
    }
  }
  for (int r = 0; r < nr; ++r) {
    const std::int64_t row = qrow0 + r0 + r;
    double* out = ref->out.data() + row * kValueDim;
    if (visible[r] == 0) {
      std::fill(out, out + kValueDim, 0.0);
      ref->lse[std::size_t(row)] = -std::numeric_limits<double>::infinity();
      continue;
    }
    for (int d = 0; d < kValueDim; ++d) out[d] = sc.acc[r][d] / l[r];
    ref->lse[std::size_t(row)] = m[r] + std::log(l[r]);
  }
}

}  // namespace

Reference reference_decode(const Problem& p) {
  Reference ref;
  ref.out.assign(std::size_t(p.total_q * kNumHeads * kValueDim), 0.0);
  ref.lse.assign(std::size_t(p.total_q * kNumHeads), -std::numeric_limits<double>::infinity());
  // Units of work: (request, group of kGroup query rows), longest requests first.
  const int rows = p.s_q * kNumHeads;
  const int groups = (rows + kGroup - 1) / kGroup;
  std::vector<int> order(static_cast<std::size_t>(p.batch));
  for (int b = 0; b < p.batch; ++b) order[std::size_t(b)] = b;
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return kv_length(p, a) > kv_length(p, c); });
  const int units = p.batch * groups;
  const unsigned hw = std::thread::hardware_concurrency();
  const int threads = std::max(1, std::min(int(hw == 0 ? 1 : hw), units));
  std::atomic<int> next{0};
  auto worker = [&] {
    auto sc = std::make_unique<RefScratch>();
    for (int u = next.fetch_add(1); u < units; u = next.fetch_add(1)) {
      const int b = order[std::size_t(u / groups)];
      const int r0 = (u % groups) * kGroup;
      reference_rows(p, b, r0, std::min(rows, r0 + kGroup), *sc, &ref);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  return ref;
}

bool Comparison::ok(double relerr_bound, double lse_bound) const {
  return nonfinite == 0 && relerr <= relerr_bound && lse_max_abs <= lse_bound;
}

std::string Comparison::summary() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "relerr %.3e, lse max abs err %.3e, nonfinite %lld", relerr, lse_max_abs,
                static_cast<long long>(nonfinite));
  return buf;
}

Comparison compare(const std::vector<std::uint16_t>& out_bf16, const std::vector<float>& lse, const Reference& ref) {
  Comparison c;
  const double inf = std::numeric_limits<double>::infinity();
  if (out_bf16.size() != ref.out.size() || (!lse.empty() && lse.size() != ref.lse.size())) {
    c.relerr = inf;
    c.lse_max_abs = inf;
    c.nonfinite = std::int64_t(std::max(out_bf16.size(), ref.out.size()));
    return c;
  }
  double num = 0, den = 0;
  for (std::size_t i = 0; i < out_bf16.size(); ++i) {
    const double o = bf16_to_float(out_bf16[i]);
    if (!std::isfinite(o)) ++c.nonfinite;
    const double d = o - ref.out[i];
    num += d * d;
    den += ref.out[i] * ref.out[i];
  }
  c.relerr = den > 0 ? std::sqrt(num / den) : (num == 0 ? 0.0 : inf);
  for (std::size_t i = 0; i < lse.size(); ++i) {
    const double got = lse[i], want = ref.lse[i];
    if (std::isfinite(want)) {
      if (std::isfinite(got)) {
        c.lse_max_abs = std::max(c.lse_max_abs, std::abs(got - want));
      } else {
        ++c.nonfinite;
      }
    } else if (got != want) {  // want −inf (no visible key): exactly −inf expected
      ++c.nonfinite;
    }
  }
  return c;
}

double relerr(const std::vector<double>& a, const std::vector<double>& ref) {
  if (a.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (den > 0) return std::sqrt(num / den);
  return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
}

}  // namespace mla::testing
