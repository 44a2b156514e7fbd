// `mla check`: a correctness sweep against the float64 reference (SPEC §3) on one backend.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <limits>
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
          cases.push_back({name, spec});
        }
      }
    }
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

  const std::vector<CheckCase> cases = build_sweep(o, backend, s_qs);
  int passed = 0, failed = 0, skipped = 0;
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
        CheckResult r = pc->check(std::numeric_limits<int>::max());
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
  return failed ? 1 : 0;
}

}  // namespace mla::tools
