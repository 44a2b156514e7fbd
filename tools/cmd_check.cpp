// `mla check`: a correctness sweep against the float64 reference (SPEC §3) on one backend.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_case.h"
#include "cli_util.h"
#include "commands.h"
#include "testing/gpu_timing.h"
#include "testing/inputs.h"

namespace mla::tools {
namespace {

const char* kCheckHelp = R"HELP(usage: mla check [options]

Correctness sweep against the float64 reference over the dequantized KV (SPEC §3): every format
(mxfp4 with scale strides 18 and 24) x challenge/peaked inputs x layouts uniform, ragged (lengths
0, 1, 63, 64, 65, primes, 8191), paged with page size 1, 16, 64 and flat kv_indices x s_q.
Unused KV rows hold NaN, outputs start as NaN; a case passes with relerr <= 4e-3, LSE within 1e-4
and every output finite (and, on cuda, the guard bytes around every buffer untouched). The
relerr bound applies to the case and to every request on its own (a long request's error can
hide in the case's norm, which short requests dominate).
A backend that does not do a case (StatusCode::unsupported) reports it as
"unsupported (skipped)", which is not a failure.

options:
  --backend cpu|cuda     backend (default: cuda when a GPU is usable, else cpu)
  --format LIST          formats, comma separated: bf16,fp8,mxfp4 (default all)
  --dist LIST            challenge,peaked (default both)
  --sq LIST              query tokens per request, e.g. 1,2,4 (default 1,2,4 on cpu, 1,2,3,4 on
                         cuda); s_q > 1 runs on the uniform, ragged and paged64 layouts, with peaked
                         inputs only when both distributions are swept
  --seed N               input seed (default 1)
  --random N             instead of the sweep, N random cases drawn from --seed: a format of
                         --format (MXFP4 scale stride 18 or 24, either rounding), a distribution of
                         --dist, an s_q of --sq, 1-600 requests (cpu: 1-12) of uniform, ragged or
                         mostly-empty lengths up to 16384 tokens (cpu: 2048; requests x longest
                         capped at 262144 tokens, cpu 8192), contiguous or paged (1, 16, 64, flat
                         kv_indices), spare NaN rows and padded rows; on cuda also plan()'s L2
                         policy and copy path forced either way at random (Plan::kv_evict_first,
                         Plan::kv_tma; the case names them "forced-l2:", "forced-copy:").
                         Up to 24 requests per case are checked (spread over the batch). The
                         same --seed and N give the same cases; each line names its case
  --help                 this text
A list runs each entry once (repeats are dropped).

Exit status: 0 when no case failed, 1 otherwise, 2 on a usage error.
)HELP";

struct Options {
  std::optional<Backend> backend;
  std::vector<KvFormat> formats{KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4};
  std::vector<testing::Distribution> dists{testing::Distribution::challenge, testing::Distribution::peaked};
  std::vector<int> s_q;
  std::uint64_t seed = 1;
  int random = 0;  // --random: this many random cases instead of the sweep
  bool help = false;
};

Options parse(int argc, char** argv) {
  Options o;
  Args a(argc, argv, 1);
  while (!a.done()) {
    const std::string k = a.next();
    if (k == "--help" || k == "-h") {
      a.no_value();
      o.help = true;
    } else if (k == "--backend") {
      o.backend = parse_backend(a.value());
    } else if (k == "--format" || k == "--formats") {
      o.formats = parse_formats(a.value());
    } else if (k == "--dist") {
      o.dists.clear();
      for (const std::string& d : split(a.value(), ',')) append_unique(o.dists, parse_dist(d));
    } else if (k == "--sq" || k == "--s-q" || k == "--s_q") {
      o.s_q.clear();
      for (const std::string& s : split(a.value(), ',')) append_unique(o.s_q, int(parse_int("--sq", s, 1, kMaxSq)));
    } else if (k == "--random") {
      o.random = int(parse_int("--random", a.value(), 1, 1000000));
    } else if (k == "--seed") {
      o.seed = std::uint64_t(parse_int("--seed", a.value(), 0, std::numeric_limits<long long>::max()));
    } else {
      throw UsageError{"unknown option '" + k + "' (see mla check --help)"};
    }
  }
  return o;
}

struct Layout {
  const char* name;
  int page_size;
  bool flat;
  bool ragged;
};

constexpr Layout kLayouts[] = {
    {"uniform", 0, false, false}, {"ragged", 0, false, true},   {"paged1", 1, false, true},
    {"paged16", 16, false, true}, {"paged64", 64, false, true}, {"flat", 1, true, true},
};

struct CheckCase {
  std::string name;
  testing::CaseSpec spec;
  std::optional<bool> kv_evict_first;  // cuda: plan()'s choice forced (--random)
  std::optional<bool> kv_tma;
  int max_requests = std::numeric_limits<int>::max();  // requests checked
};

std::vector<CheckCase> build_sweep(const Options& o, Backend backend, const std::vector<int>& s_qs) {
  const bool cuda = backend == Backend::cuda;
  // Shapes: the cpu sweep stays small (seconds on two cores); the ragged layout always
  // holds the 0, 1, 63, 64, 65, prime and 8191 lengths.
  const int uniform_batch = cuda ? 16 : 3;
  const int uniform_len = cuda ? 1500 : 333;
  const int ragged_batch = cuda ? 40 : 8;
  const int paged_batch = cuda ? 24 : 6;
  const int paged_max = cuda ? 3000 : 700;

  struct Variant {
    KvFormat format;
    std::int64_t stride;
  };
  std::vector<Variant> variants;
  for (KvFormat f : o.formats) {
    if (f == KvFormat::mxfp4) {
      variants.push_back({f, 18});
      variants.push_back({f, 24});
    } else {
      variants.push_back({f, 18});
    }
  }
  std::vector<CheckCase> cases;
  std::uint64_t n = 0;
  for (int s_q : s_qs) {
    for (const Variant& v : variants) {
      for (testing::Distribution d : o.dists) {
        if (s_q > 1 && d != testing::Distribution::peaked && o.dists.size() > 1) continue;
        for (const Layout& l : kLayouts) {
          const std::string ln = l.name;
          if (s_q > 1 && ln != "uniform" && ln != "ragged" && ln != "paged64") continue;
          ++n;
          testing::CaseSpec spec;
          const std::uint64_t seed = o.seed * 1000003ull + n;
          if (!l.ragged) {
            spec.kv_lens.assign(std::size_t(uniform_batch), uniform_len);
          } else if (ln == "ragged") {
            spec.kv_lens = testing::ragged_lengths(ragged_batch, seed, 8191);
          } else {
            spec.kv_lens = testing::ragged_lengths(paged_batch, seed, paged_max);
          }
          spec.s_q = s_q;
          spec.format = v.format;
          spec.dist = d;
          spec.page_size = l.page_size;
          spec.flat_page_table = l.flat;
          spec.scale_stride = v.stride;
          spec.seed = seed;
          spec.spare_rows = 5;  // NaN rows no request uses
          std::string name = to_string(v.format);
          if (v.format == KvFormat::mxfp4) name += "/s" + std::to_string(v.stride);
          name += std::string(" ") + dist_name(d) + " " + ln + " b" + std::to_string(spec.kv_lens.size()) + " Lmax" +
                  std::to_string(*std::max_element(spec.kv_lens.begin(), spec.kv_lens.end())) + " s_q" +
                  std::to_string(s_q);
          CheckCase c;
          c.name = name;
          c.spec = spec;
          cases.push_back(std::move(c));
        }
      }
    }
  }
  return cases;
}

// --random: `count` cases drawn from `seed` (splitmix64), each named in full.
std::vector<CheckCase> build_random(const Options& o, Backend backend, const std::vector<int>& s_qs) {
  const bool cuda = backend == Backend::cuda;
  const int max_batch = cuda ? 600 : 12;
  const int max_len = cuda ? 16384 : 2048;
  const std::int64_t max_rows = cuda ? 262144 : 8192;  // requests × longest, in tokens (the reference's time)
  std::uint64_t state = o.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  const auto next = [&]() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const auto below = [&](std::uint64_t n) { return n ? next() % n : 0; };
  const auto log_uniform = [&](int hi) {  // 1..hi, every power of two about as likely
    const int bits = int(below(std::uint64_t(std::bit_width(unsigned(hi)))));
    return std::min(hi, (1 << bits) + int(below(std::uint64_t(1) << bits)));
  };
  const auto pick = [&](const auto& v) { return v[std::size_t(below(v.size()))]; };
  std::vector<CheckCase> cases;
  for (int i = 0; i < o.random; ++i) {
    CheckCase c;
    testing::CaseSpec& spec = c.spec;
    spec.format = pick(o.formats);
    spec.dist = pick(o.dists);
    spec.s_q = pick(s_qs);
    spec.seed = next() % 1000000007ull;
    if (spec.format == KvFormat::mxfp4) {
      spec.scale_stride = below(2) ? 24 : 18;
      spec.rounding = below(2) ? Mxfp4Rounding::legacy : Mxfp4Rounding::rne;
    }
    const int batch = log_uniform(max_batch);
    int longest = log_uniform(max_len);
    if (std::int64_t(batch) * longest > max_rows) longest = int(std::max<std::int64_t>(1, max_rows / batch));
    const int kind = int(below(3));  // uniform, ragged in [0, longest], mostly empty
    for (int b = 0; b < batch; ++b) {
      std::int32_t len = longest;
      if (kind == 1) len = std::int32_t(below(std::uint64_t(longest) + 1));
      if (kind == 2) len = below(4) == 0 ? std::int32_t(below(std::uint64_t(longest) + 1)) : 0;
      spec.kv_lens.push_back(len);
    }
    const int paging = int(below(5));  // contiguous, or page size 1, 16, 64, or flat kv_indices
    constexpr int kPageSizes[] = {0, 1, 16, 64, 1};
    spec.page_size = kPageSizes[paging];
    spec.flat_page_table = paging == 4;
    spec.spare_rows = below(2) ? std::int64_t(below(80)) : 0;
    spec.row_padding = below(4) == 0 ? 16 * std::int64_t(1 + below(4)) : 0;
    if (cuda) {
      const auto forced = [&]() { return below(3) == 0 ? std::optional<bool>(below(2) != 0) : std::nullopt; };
      c.kv_evict_first = forced();
      c.kv_tma = forced();
    }
    c.max_requests = 24;
    constexpr const char* kKinds[] = {"uniform", "ragged", "mostly-empty"};
    c.name = std::to_string(i + 1);
    c.name.insert(c.name.begin(), '#');
    c.name.append(1, ' ').append(spec.name()).append(1, ' ').append(kKinds[kind]);
    c.name.append(" longest").append(std::to_string(longest));
    // The flags as forced (the plan may not have the form: "plans run" counts what ran).
    if (c.kv_evict_first) c.name += *c.kv_evict_first ? " forced-l2:evict_first" : " forced-l2:normal";
    if (c.kv_tma) c.name += *c.kv_tma ? " forced-copy:tma" : " forced-copy:cp.async";
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

int cmd_check(int argc, char** argv) {
  Options o;
  if (const std::optional<int> done = parse_command("check", kCheckHelp, argc, argv, parse, &o)) return *done;
  Backend backend = Backend::cpu;
  testing::GpuInfo info;
  std::unique_ptr<testing::GpuTimer> gpu;  // supplies the stream
  if (!select_backend("check", o.backend, &backend, &gpu, &info)) return 1;
  if (backend == Backend::cuda) {
    std::printf("backend cuda: %s\n", info.name.c_str());
  } else {
    std::printf("backend cpu\n");
  }
  std::vector<int> s_qs = o.s_q;
  if (s_qs.empty()) s_qs = backend == Backend::cuda ? std::vector<int>{1, 2, 3, 4} : std::vector<int>{1, 2, 4};

  const std::vector<CheckCase> cases = o.random ? build_random(o, backend, s_qs) : build_sweep(o, backend, s_qs);
  int passed = 0, failed = 0, skipped = 0;
  // What the planned cases ran: describe()'s fields, counted per value (printed at the end).
  constexpr const char* kPlanKeys[] = {"kernel", "rows_per_item", "cluster", "items_from", "kv_copy", "kv_l2"};
  std::map<std::string, std::map<std::string, int>> ran;
  int split_cases = 0;
  const auto t_start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const CheckCase& c = cases[i];
    std::string verdict, detail;
    try {
      const testing::HostInputs in = testing::make_inputs(c.spec);
      std::unique_ptr<PreparedCase> pc;
      const Status s = PreparedCase::prepare(in, backend, gpu.get(), &pc);
      if (s.code == StatusCode::unsupported) {
        verdict = "SKIP";
        detail = "unsupported (skipped): " + s.message;
      } else if (!s.ok()) {
        verdict = "FAIL";
        detail = s.message;
      } else {
        if (c.kv_evict_first) pc->set_kv_evict_first(*c.kv_evict_first);
        if (c.kv_tma) pc->set_kv_tma(*c.kv_tma);
        const std::string plan = describe(pc->plan());
        for (const char* key : kPlanKeys) {
          const std::string v = plan_field(plan, key);
          if (!v.empty()) ++ran[key][v];
        }
        split_cases += pc->plan().num_split_requests > 0;
        CheckResult r = pc->check(c.max_requests);
        r.bound_per_request = true;
        if (r.status.code == StatusCode::unsupported) {
          verdict = "SKIP";
          detail = "unsupported (skipped): " + r.status.message;
        } else {
          char buf[96];
          std::snprintf(buf, sizeof buf, "relerr %.2e (worst request %.2e)  lse err %.1e", r.cmp.relerr,
                        r.worst_request_relerr, r.cmp.lse_max_abs);
          detail = buf;
          verdict = r.passed() ? "PASS" : "FAIL";
          if (!r.passed()) detail += "  " + r.failure();
        }
      }
    } catch (const std::exception& e) {
      verdict = "FAIL";
      detail = std::string("exception: ") + e.what();
    }
    if (verdict == "PASS") ++passed;
    if (verdict == "FAIL") ++failed;
    if (verdict == "SKIP") ++skipped;
    std::printf("[%3zu/%zu] %-4s %-44s %s\n", i + 1, cases.size(), verdict.c_str(), c.name.c_str(), detail.c_str());
    std::fflush(stdout);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("\n%s: %d passed, %d failed, %d unsupported (skipped) of %zu cases on %s in %.1f s\n",
              failed ? "FAILED" : "OK", passed, failed, skipped, cases.size(), to_string(backend), secs);
  std::printf("plans run: %d with split requests", split_cases);
  for (const char* key : kPlanKeys) {
    if (ran[key].empty()) continue;
    std::printf("; %s", key);
    for (const auto& [value, n] : ran[key]) std::printf(" %s %d", value.c_str(), n);
  }
  std::printf("\n");
  return failed ? 1 : 0;
}

}  // namespace mla::tools
