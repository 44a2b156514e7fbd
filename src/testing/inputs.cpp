// Seeded test and benchmark inputs (see inputs.h).
//
// Every random value is a pure function of (seed, stream, counter): a splitmix64 hash of the
// counter gives two uniforms, Box–Muller turns them into two normals. KV values are keyed by the
// *logical* token (kv_indptr[b] + n), q values by their flat index, so the data never depends on
// the thread count, and a paged case holds exactly the same logical data as the contiguous case
// of the same seed (only the physical placement differs).
#include "testing/inputs.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>
#include <stdexcept>
#include <thread>

namespace mla::testing {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr std::uint64_t kStreamQ = 0x51;
constexpr std::uint64_t kStreamKv = 0x4B56;
constexpr std::uint64_t kStreamPages = 0x5047;
constexpr std::uint64_t kStreamRagged = 0x5247;
constexpr std::uint16_t kBf16NaN = 0xFFFF;
constexpr std::int64_t kNotUsed = -1;  // physical row: unused slot of a used page (or filler row)
constexpr std::int64_t kSpare = -2;    // physical row: spare row / page

std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t stream_key(std::uint64_t seed, std::uint64_t stream) {
  return mix64(mix64(seed + kGolden) ^ (stream * kGolden));
}

// Sequential splitmix64 generator (page permutation, ragged lengths: small, single-threaded).
struct SplitMix {
  std::uint64_t state;
  std::uint64_t next() { return mix64(state += kGolden); }
  // Uniform in [0, n).
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }  // bias < n / 2^64
};

// `count` (even, ≤ 576) values scale·N(0,1) rounded to bf16 (nearest even), from counter pairs
// first_pair, first_pair+1, ...: Box–Muller with u1 = (a + ½)/2²⁴ ∈ (0,1) and angle 2π·b/2²⁴.
// ln, √ and sin/cos are branch-free polynomial/Newton forms (relative error ~1e-7, far below bf16's
// 4e-3) so that GCC vectorizes the loop; the 64-bit hash runs in a scalar loop before it.
void fill_normal_bf16(std::uint64_t key, std::uint64_t first_pair, std::int64_t count, float scale,
                      std::uint16_t* dst) {
  constexpr int kMaxPairs = kHeadDim / 2;
  std::int32_t a[kMaxPairs], b[kMaxPairs];
  const int pairs = int(std::min<std::int64_t>(count / 2, kMaxPairs));
  for (int j = 0; j < pairs; ++j) {
    const std::uint64_t h = mix64(key + (first_pair + std::uint64_t(j) + 1) * kGolden);
    a[j] = std::int32_t(h >> 40);
    b[j] = std::int32_t((h >> 8) & 0xFFFFFFu);
  }
  for (int j = 0; j < pairs; ++j) {
    // ln u: u = 2^e · m, m ∈ [√½, √2); ln m = 2·atanh((m−1)/(m+1)) by its series.
    const float u = (float(a[j]) + 0.5f) * (1.0f / 16777216.0f);
    const std::uint32_t ui = std::bit_cast<std::uint32_t>(u);
    const std::uint32_t mant = ui & 0x7FFFFFu;
    const std::uint32_t big = mant > 0x3504F3u ? 1u : 0u;  // m > √2: use m/2 and e+1
    const float m = std::bit_cast<float>((mant | 0x3F800000u) - (big << 23));
    const float e = float(std::int32_t(ui >> 23) - 127 + std::int32_t(big));
    const float s = (m - 1.0f) / (m + 1.0f);
    const float s2 = s * s;
    const float ln_m = 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9)))));
    const float x = -2.0f * (e * 0.693147180559945f + ln_m);  // −2 ln u > 0
    // √x = x · rsqrt(x), rsqrt by three Newton steps from the classic initial guess.
    float y = std::bit_cast<float>(0x5F3759DFu - (std::bit_cast<std::uint32_t>(x) >> 1));
    y = y * (1.5f - 0.5f * x * y * y);
    y = y * (1.5f - 0.5f * x * y * y);
    y = y * (1.5f - 0.5f * x * y * y);
    const float r = scale * x * y;
    // Angle: quadrant q (top 2 bits) + π/4 + t, t ∈ [−π/4, π/4); Taylor sin/cos of t.
    const std::uint32_t q = std::uint32_t(b[j]) >> 22;
    const float t = (float(b[j] & 0x3FFFFF) * (1.0f / 4194304.0f) - 0.5f) * 1.5707963267948966f;
    const float t2 = t * t;
    const float sin_t = t * (1.0f - t2 * (1.0f / 6 - t2 * (1.0f / 120 - t2 * (1.0f / 5040))));
    const float cos_t = 1.0f - t2 * (0.5f - t2 * (1.0f / 24 - t2 * (1.0f / 720 - t2 * (1.0f / 40320))));
    const float c0 = (cos_t - sin_t) * 0.70710678118654752f;  // cos(π/4 + t)
    const float s0 = (cos_t + sin_t) * 0.70710678118654752f;  // sin(π/4 + t)
    // Rotate by q·π/2: swap on odd q, then signs (−,+), (−,−), (+,−) for q = 1, 2, 3.
    const std::uint32_t swap = q & 1u;
    const float cs = swap ? s0 : c0;
    const float ss = swap ? c0 : s0;
    std::uint32_t uc = std::bit_cast<std::uint32_t>(r * cs) ^ ((((q + 1u) >> 1) & 1u) << 31);
    std::uint32_t us = std::bit_cast<std::uint32_t>(r * ss) ^ ((q >> 1) << 31);
    uc += 0x7FFFu + ((uc >> 16) & 1u);  // round to nearest even (values are finite)
    us += 0x7FFFu + ((us >> 16) & 1u);
    dst[2 * j] = std::uint16_t(uc >> 16);
    dst[2 * j + 1] = std::uint16_t(us >> 16);
  }
}

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}

// Runs fn(block) for block in [0, blocks) on up to `threads` threads (dynamic assignment; the
// result must not depend on which thread runs which block).
template <typename Fn>
void parallel_for(std::int64_t blocks, int threads, Fn&& fn) {
  const int n = int(std::min<std::int64_t>(threads, blocks));
  if (n <= 1) {
    for (std::int64_t i = 0; i < blocks; ++i) fn(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    for (std::int64_t i = next.fetch_add(1); i < blocks; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(std::size_t(n - 1));
  for (int t = 0; t + 1 < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

float q_scale(Distribution d) {
  return d == Distribution::peaked ? 150.0f : 0.02f;
}
constexpr float kKvScale = 0.02f;
constexpr std::int64_t kRowsPerBlock = 256;

}  // namespace

CaseSpec CaseSpec::uniform(int batch, int kv_len, KvFormat format) {
  CaseSpec s;
  s.kv_lens.assign(std::size_t(std::max(batch, 0)), kv_len);
  s.format = format;
  return s;
}

std::string CaseSpec::name() const {
  std::string n = to_string(format);
  n += " b" + std::to_string(kv_lens.size());
  const bool uniform_lens =
      !kv_lens.empty() && std::all_of(kv_lens.begin(), kv_lens.end(), [&](std::int32_t l) { return l == kv_lens[0]; });
  if (uniform_lens) {
    n += " kv" + std::to_string(kv_lens[0]);
  } else {
    const std::int64_t total = std::accumulate(kv_lens.begin(), kv_lens.end(), std::int64_t(0));
    n += " kvragged" + std::to_string(total);
  }
  if (s_q != 1) n += " sq" + std::to_string(s_q);
  if (page_size > 0) n += flat_page_table ? " kvindices" : " paged" + std::to_string(page_size);
  if (page_size > 0 && pages_in_order) n += " in-order";
  if (format == KvFormat::mxfp4) {
    if (scale_stride != kMxfp4ScalesPerRow) n += " stride" + std::to_string(scale_stride);
    if (rounding == Mxfp4Rounding::legacy) n += " legacy";
  }
  if (dist == Distribution::peaked) n += " peaked";
  if (spare_rows > 0) n += " spare" + std::to_string(spare_rows);
  if (row_padding > 0) n += " pad" + std::to_string(row_padding);
  if (seed != 1) n += " seed" + std::to_string(seed);
  return n;
}

Problem HostInputs::problem(std::uint16_t* out, float* lse) const {
  Problem p;
  p.batch = batch;
  p.s_q = spec.s_q;
  p.q = q.data();
  p.total_q = total_q;
  p.qo_indptr = qo_indptr.data();
  p.kv_indptr = kv_indptr.data();
  p.kv.format = spec.format;
  p.kv.data = kv_data.data();
  p.kv.rows = kv_rows;
  p.kv.row_stride_bytes = kv_row_stride;
  p.kv.fp8_scale = fp8_scale;
  if (spec.format == KvFormat::mxfp4) {
    p.kv.scales = kv_scales.data();
    p.kv.scale_stride = spec.scale_stride;
  }
  p.paging.page_size = spec.page_size;
  if (spec.page_size > 0) {
    p.paging.page_table = page_table.data();
    p.paging.page_table_entries = std::int64_t(page_table.size());
    p.paging.page_table_stride = page_table_stride;
  }
  p.out = out;
  p.lse = lse;
  return p;
}

Problem HostInputs::problem_bf16_source(std::uint16_t* out, float* lse) const {
  Problem p = problem(out, lse);
  p.kv.format = KvFormat::bf16;
  p.kv.data = kv_bf16.data();
  p.kv.row_stride_bytes = kv_row_bytes(KvFormat::bf16);
  p.kv.fp8_scale = 1.0f;
  p.kv.scales = nullptr;
  p.kv.scale_stride = kMxfp4ScalesPerRow;
  return p;
}

std::int64_t HostInputs::kv_bytes_read() const {
  const std::int64_t total = kv_indptr.empty() ? 0 : kv_indptr.back();
  std::int64_t per_row = kv_row_bytes(spec.format);
  if (spec.format == KvFormat::mxfp4) per_row += kMxfp4ScalesPerRow;
  return total * per_row;
}

namespace {

// The cache in the case's format from in->kv_bf16, row blocks in parallel, bit-identical to
// quantizing the whole tensor at once. Rows for which spare(r) holds get the NaN pattern of their
// format and stay out of the fp8 scale; with `poison`, so do the MXFP4 scale padding columns.
template <class Spare>
void encode_kv(HostInputs* in, Spare spare, bool poison, int threads) {
  const std::int64_t rows = in->kv_rows;
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  switch (in->spec.format) {
    case KvFormat::bf16: {
      in->kv_data.resize(std::size_t(rows * kHeadDim * 2));
      parallel_for(blocks, threads, [&](std::int64_t blk) {
        const std::int64_t begin = blk * kRowsPerBlock, end = std::min(rows, begin + kRowsPerBlock);
        std::memcpy(in->kv_data.data() + begin * kHeadDim * 2, in->kv_bf16.data() + begin * kHeadDim,
                    std::size_t((end - begin) * kHeadDim * 2));
      });
      break;
    }
    case KvFormat::fp8: {
      // One scale over every row that holds data. quantize_fp8 is elementwise once the scale is
      // known, and the scale depends only on amax: quantizing each block with the tensor's amax
      // element prepended gives exactly the bytes of one call over the whole tensor.
      std::vector<std::uint16_t> block_amax(std::size_t(blocks), 0);
      parallel_for(blocks, threads, [&](std::int64_t blk) {
        const std::int64_t end = std::min(rows, (blk + 1) * kRowsPerBlock);
        std::uint16_t m = 0;
        for (std::int64_t r = blk * kRowsPerBlock; r < end; ++r) {
          if (spare(r)) continue;
          const std::uint16_t* src = in->kv_bf16.data() + r * kHeadDim;
          for (int d = 0; d < kHeadDim; ++d) m = std::max<std::uint16_t>(m, src[d] & 0x7FFFu);
        }
        block_amax[std::size_t(blk)] = m;
      });
      const std::uint16_t amax = *std::max_element(block_amax.begin(), block_amax.end());
      in->kv_data.resize(std::size_t(rows * kHeadDim));
      std::vector<float> block_scale(std::size_t(blocks), 0.0f);
      parallel_for(blocks, threads, [&](std::int64_t blk) {
        const std::int64_t begin = blk * kRowsPerBlock, end = std::min(rows, begin + kRowsPerBlock);
        std::vector<std::uint16_t> tmp(std::size_t(1 + (end - begin) * kHeadDim));
        tmp[0] = amax;
        for (std::int64_t r = begin; r < end; ++r) {
          std::uint16_t* dst = tmp.data() + 1 + (r - begin) * kHeadDim;
          if (spare(r)) {
            std::fill(dst, dst + kHeadDim, std::uint16_t(0));
          } else {
            std::memcpy(dst, in->kv_bf16.data() + r * kHeadDim, kHeadDim * 2);
          }
        }
        const Fp8Quantized qz = quantize_fp8(tmp);
        block_scale[std::size_t(blk)] = qz.scale;
        std::uint8_t* out = in->kv_data.data() + begin * kHeadDim;
        std::memcpy(out, qz.bytes.data() + 1, std::size_t((end - begin) * kHeadDim));
        for (std::int64_t r = begin; r < end; ++r) {
          if (spare(r)) std::memset(out + (r - begin) * kHeadDim, 0xFF, kHeadDim);
        }
      });
      in->fp8_scale = block_scale[0];
      for (float s : block_scale) {
        if (s != in->fp8_scale) throw std::logic_error("encode_kv: fp8 block scales differ");
      }
      break;
    }
    case KvFormat::mxfp4: {
      const std::int64_t stride = in->spec.scale_stride;
      constexpr std::int64_t kData = kHeadDim / 2;
      in->kv_data.resize(std::size_t(rows * kData));
      in->kv_scales.resize(std::size_t(rows * stride));
      std::atomic<bool> failed{false};
      std::string failure;
      parallel_for(blocks, threads, [&](std::int64_t blk) {
        const std::int64_t begin = blk * kRowsPerBlock, end = std::min(rows, begin + kRowsPerBlock);
        const std::int64_t n = end - begin;
        std::vector<std::uint16_t> tmp(std::size_t(n * kHeadDim));
        for (std::int64_t r = begin; r < end; ++r) {
          std::uint16_t* dst = tmp.data() + (r - begin) * kHeadDim;
          if (spare(r)) {
            std::fill(dst, dst + kHeadDim, std::uint16_t(0));
          } else {
            std::memcpy(dst, in->kv_bf16.data() + r * kHeadDim, kHeadDim * 2);
          }
        }
        Mxfp4Quantized qz;
        const Status s = quantize_mxfp4(tmp, n, in->spec.rounding, stride, &qz);
        if (!s.ok() || qz.data.size() != std::size_t(n * kData) || qz.scales.size() != std::size_t(n * stride)) {
          if (!failed.exchange(true)) failure = s.ok() ? "unexpected output size" : s.message;
          return;
        }
        std::uint8_t* data = in->kv_data.data() + begin * kData;
        std::uint8_t* scales = in->kv_scales.data() + begin * stride;
        std::memcpy(data, qz.data.data(), qz.data.size());
        std::memcpy(scales, qz.scales.data(), qz.scales.size());
        for (std::int64_t r = 0; r < n; ++r) {
          if (spare(begin + r)) {
            std::memset(data + r * kData, 0xFF, kData);
            std::memset(scales + r * stride, 0xFF, std::size_t(stride));
          } else if (poison && stride > kMxfp4ScalesPerRow) {
            std::memset(scales + r * stride + kMxfp4ScalesPerRow, 0xFF, std::size_t(stride - kMxfp4ScalesPerRow));
          }
        }
      });
      if (failed) throw std::runtime_error("encode_kv: quantize_mxfp4 failed: " + failure);
      break;
    }
  }
}

}  // namespace

HostInputs make_inputs(const CaseSpec& spec, int threads) {
  threads = resolve_threads(threads);
  const int batch = int(spec.kv_lens.size());
  if (batch < 1) throw std::invalid_argument("make_inputs: kv_lens is empty");
  if (spec.s_q < 1 || spec.s_q > kMaxSq) throw std::invalid_argument("make_inputs: s_q must be 1..4");
  if (spec.page_size != 0 && spec.page_size != 1 && spec.page_size != 16 && spec.page_size != 64) {
    throw std::invalid_argument("make_inputs: page_size must be 0, 1, 16 or 64");
  }
  if (spec.flat_page_table && spec.page_size != 1) {
    throw std::invalid_argument("make_inputs: flat_page_table needs page_size 1");
  }
  if (spec.format == KvFormat::mxfp4 && spec.scale_stride < kMxfp4ScalesPerRow) {
    throw std::invalid_argument("make_inputs: scale_stride must be >= 18");
  }
  if (spec.spare_rows < 0) throw std::invalid_argument("make_inputs: spare_rows must be >= 0");
  if (spec.row_padding < 0 || spec.row_padding % 16 != 0) {
    throw std::invalid_argument("make_inputs: row_padding must be a non-negative multiple of 16");
  }

  HostInputs in;
  in.spec = spec;
  in.batch = batch;
  in.total_q = std::int64_t(batch) * spec.s_q;
  in.qo_indptr.resize(std::size_t(batch) + 1);
  in.kv_indptr.resize(std::size_t(batch) + 1);
  std::int64_t total_kv = 0;
  for (int b = 0; b <= batch; ++b) {
    in.qo_indptr[std::size_t(b)] = b * spec.s_q;
    in.kv_indptr[std::size_t(b)] = std::int32_t(total_kv);
    if (b == batch) break;
    const std::int32_t len = spec.kv_lens[std::size_t(b)];
    if (len < 0) throw std::invalid_argument("make_inputs: negative kv length");
    total_kv += len;
    if (total_kv > INT32_MAX) throw std::invalid_argument("make_inputs: total kv length exceeds int32");
  }
  // Poison mode (spare_rows > 0): every row no request reads holds NaN bytes, including the unused
  // tail slots of partly filled pages and the mxfp4 scale padding columns.
  const bool poison = spec.spare_rows > 0;
  const std::int64_t filler = poison ? kSpare : kNotUsed;

  // Physical layout: logical_of[r] = the logical (global) token stored in physical row r, or a marker.
  std::vector<std::int64_t> logical_of;
  if (spec.page_size == 0) {
    in.kv_rows = std::max<std::int64_t>(1, total_kv + spec.spare_rows);
    logical_of.resize(std::size_t(in.kv_rows));
    for (std::int64_t r = 0; r < in.kv_rows; ++r)
      logical_of[std::size_t(r)] = r < total_kv ? r : (r < total_kv + spec.spare_rows ? kSpare : kNotUsed);
  } else {
    const std::int64_t ps = spec.page_size;
    std::int64_t used_pages = 0, max_pages = 0;
    for (int b = 0; b < batch; ++b) {
      const std::int64_t n = (std::int64_t(spec.kv_lens[std::size_t(b)]) + ps - 1) / ps;
      used_pages += n;
      max_pages = std::max(max_pages, n);
    }
    const std::int64_t spare_pages = (spec.spare_rows + ps - 1) / ps;
    const std::int64_t num_pages = std::max<std::int64_t>(1, used_pages + spare_pages);
    if (num_pages > INT32_MAX) throw std::invalid_argument("make_inputs: too many pages");
    std::vector<std::int32_t> perm(static_cast<std::size_t>(num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    SplitMix rng{stream_key(spec.seed, kStreamPages)};
    for (std::int64_t i = spec.pages_in_order ? 0 : num_pages - 1; i > 0; --i) {
      std::swap(perm[std::size_t(i)], perm[std::size_t(rng.below(std::uint64_t(i) + 1))]);
    }
    in.kv_rows = num_pages * ps;
    logical_of.assign(std::size_t(in.kv_rows), kSpare);
    if (spec.flat_page_table) {
      in.page_table_stride = 0;
      in.page_table.assign(std::size_t(std::max<std::int64_t>(1, total_kv)), -1);
    } else {
      in.page_table_stride = std::max<std::int64_t>(1, max_pages);
      in.page_table.assign(std::size_t(batch * in.page_table_stride), -1);
    }
    std::int64_t k = 0;
    for (int b = 0; b < batch; ++b) {
      const std::int64_t len = spec.kv_lens[std::size_t(b)];
      const std::int64_t n = (len + ps - 1) / ps;
      const std::int64_t base =
          spec.flat_page_table ? std::int64_t(in.kv_indptr[std::size_t(b)]) : b * in.page_table_stride;
      for (std::int64_t j = 0; j < n; ++j) {
        const std::int32_t page = perm[std::size_t(k++)];
        in.page_table[std::size_t(base + j)] = page;
        for (std::int64_t t = 0; t < ps; ++t) {
          const std::int64_t token = j * ps + t;
          logical_of[std::size_t(page * ps + t)] = token < len ? in.kv_indptr[std::size_t(b)] + token : filler;
        }
      }
    }
    if (used_pages == 0 && spare_pages == 0) std::fill(logical_of.begin(), logical_of.end(), kNotUsed);
  }

  // q.
  const std::int64_t q_vals = in.total_q * kNumHeads * kHeadDim;
  in.q.resize(std::size_t(q_vals));
  {
    const std::uint64_t key = stream_key(spec.seed, kStreamQ);
    const float scale = q_scale(spec.dist);
    const std::int64_t q_rows = in.total_q * kNumHeads;
    parallel_for((q_rows + kRowsPerBlock - 1) / kRowsPerBlock, threads, [&](std::int64_t blk) {
      const std::int64_t end = std::min(q_rows, (blk + 1) * kRowsPerBlock);
      for (std::int64_t r = blk * kRowsPerBlock; r < end; ++r) {
        fill_normal_bf16(key, std::uint64_t(r) * (kHeadDim / 2), kHeadDim, scale, in.q.data() + r * kHeadDim);
      }
    });
  }

  // bf16 source (and the bf16 cache).
  const std::int64_t rows = in.kv_rows;
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  in.kv_bf16.resize(std::size_t(rows * kHeadDim));
  const std::uint64_t kv_key = stream_key(spec.seed, kStreamKv);
  parallel_for(blocks, threads, [&](std::int64_t blk) {
    const std::int64_t end = std::min(rows, (blk + 1) * kRowsPerBlock);
    for (std::int64_t r = blk * kRowsPerBlock; r < end; ++r) {
      std::uint16_t* dst = in.kv_bf16.data() + r * kHeadDim;
      const std::int64_t g = logical_of[std::size_t(r)];
      if (g >= 0) {
        fill_normal_bf16(kv_key, std::uint64_t(g) * (kHeadDim / 2), kHeadDim, kKvScale, dst);
      } else {
        std::fill(dst, dst + kHeadDim, g == kSpare ? kBf16NaN : std::uint16_t(0));
      }
    }
  });

  encode_kv(
      &in, [&](std::int64_t r) { return logical_of[std::size_t(r)] == kSpare; }, poison, threads);
  // Padded rows: the dense rows spread to the row stride, the padding 0xFF.
  const std::int64_t row_bytes = kv_row_bytes(spec.format);
  in.kv_row_stride = row_bytes + spec.row_padding;
  if (spec.row_padding > 0) {
    std::vector<std::uint8_t> padded(std::size_t(in.kv_rows * in.kv_row_stride), 0xFF);
    for (std::int64_t r = 0; r < in.kv_rows; ++r) {
      std::memcpy(padded.data() + r * in.kv_row_stride, in.kv_data.data() + r * row_bytes, std::size_t(row_bytes));
    }
    in.kv_data = std::move(padded);
  }
  return in;
}

std::vector<std::int32_t> ragged_lengths(int batch, std::uint64_t seed, int max_len) {
  static constexpr std::int32_t kSpecial[] = {0, 1, 63, 64, 65, 8191, 127, 257, 521, 1031, 2053, 4099};
  max_len = std::max(max_len, 0);
  std::vector<std::int32_t> lens;
  SplitMix rng{stream_key(seed, kStreamRagged)};
  for (int b = 0; b < batch; ++b) {
    if (std::size_t(b) < std::size(kSpecial)) {
      lens.push_back(std::min(kSpecial[b], std::int32_t(max_len)));
    } else {
      lens.push_back(std::int32_t(rng.below(std::uint64_t(max_len) + 1)));
    }
  }
  for (std::size_t i = lens.size(); i > 1; --i) std::swap(lens[i - 1], lens[std::size_t(rng.below(i))]);
  return lens;
}

void climb_kv(HostInputs* in, int max_exponent) {
  const CaseSpec& spec = in->spec;
  if (spec.page_size != 0 || spec.spare_rows != 0 || spec.row_padding != 0) {
    throw std::logic_error("climb_kv: contiguous cases without spare rows or padding only");
  }
  for (int b = 0; b < in->batch; ++b) {
    const std::int32_t first = in->kv_indptr[std::size_t(b)], len = in->kv_indptr[std::size_t(b) + 1] - first;
    for (std::int32_t n = 0; n < len; ++n) {
      const int e = b == 3 ? max_exponent - max_exponent * n / len : max_exponent * n / len;
      std::uint16_t* row = in->kv_bf16.data() + std::int64_t(first + n) * kHeadDim;
      for (int d = 0; d < kHeadDim; ++d) {
        if ((row[d] & 0x7F80u) != 0) row[d] = std::uint16_t(row[d] + (e << 7));  // × 2^e
      }
    }
  }
  encode_kv(
      in, [](std::int64_t) { return false; }, false, resolve_threads(0));  // no spare rows
}

HostInputs climbing_inputs(KvFormat format) {
  CaseSpec spec;
  spec.kv_lens = {4096, 3000, 700, 1500};
  spec.format = format;
  spec.seed = 123;
  HostInputs in = make_inputs(spec);
  climb_kv(&in, 16);
  return in;
}

void plant_read_nan(HostInputs* in, std::int64_t row) {
  std::uint8_t* r = in->kv_data.data() + std::size_t(row * in->kv_row_stride);
  switch (in->spec.format) {
    case KvFormat::bf16:
      r[10] = 0xFF;  // element 5: bf16 0xFFFF
      r[11] = 0xFF;
      break;
    case KvFormat::fp8:
      r[5] = 0x7F;  // e4m3 NaN
      break;
    case KvFormat::mxfp4: {
      constexpr int kBlock = 17;
      constexpr std::uint16_t kMinusOne = 0xBF80;                               // bf16 −1
      in->kv_scales[std::size_t(row * in->spec.scale_stride + kBlock)] = 0xFF;  // E8M0 NaN
      std::memset(r + 16 * kBlock, 0x22, 16);                                   // 32 codes of +1
      for (int h = 0; h < kNumHeads; ++h) {
        std::fill_n(in->q.begin() + std::ptrdiff_t(h) * kHeadDim + 32 * kBlock, 32, kMinusOne);
      }
      break;
    }
  }
}

}  // namespace mla::testing
