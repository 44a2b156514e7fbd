// `mla bench`: SPEC §4's speed suite (or a short CPU suite), correctness first, then timing.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli_case.h"
#include "cli_util.h"
#include "commands.h"
#include "testing/gpu_timing.h"
#include "testing/inputs.h"

namespace mla::tools {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kPlanReps = 20;  // plan() calls timed per case (their median is plan_us)
static_assert(kPlanReps == 20, "the help text and README say 20 plan() calls");

const char* kBenchHelp = R"HELP(usage: mla bench [options]

Runs the speed suite: per case a correctness check against the float64 reference, then timing.
Default: on a GPU (sm_90) SPEC §4's 24 cases, batch {4,32,64,256} x kv {1024,8192} x
{bf16,fp8,mxfp4} on the cuda backend; without one a short cpu-backend suite
(batch {1,4} x kv {512,2048} x 3 formats).

GPU timing (SPEC §4), per rep from a cold L2 (256 MiB memset, then synchronize):
  call     event A, mla::run (host work included), event B
  device   the same behind a short spin kernel, so A->B is GPU time only
  floor    a plain streaming read of the case's KV bytes, timed both ways
CPU timing: wall time per mla::run call.
Both: the host time of mla::plan, the median of 20 calls (plan_us in the JSON; on the GPU its
copies included), printed under the table.

options:
  --backend cpu|cuda     backend (default: cuda when a GPU is usable, else cpu)
  --format LIST          formats, comma separated: bf16,fp8,mxfp4 (default all)
  --shapes LIST          BATCHxKV list, e.g. 4x1024,32x8192 (default: the suite of the backend)
  --ragged               ragged lengths up to KV (seeded) instead of uniform KV
  --s-q N                query tokens per request, 1..4 (default 1; SPEC §4's suite is s_q 1):
                         token i of a request sees its first L - N + i + 1 keys; the floor and
                         GB/s count the KV bytes once
  --paged N              paged KV cache, page size 1, 16 or 64 (0 or absent: contiguous)
  --page-order shuffled|in-order
                         paged: the pages' physical order (default shuffled; in-order lays each
                         request's pages out one after another, so only the page size differs
                         from a contiguous cache; in-order needs --paged)
  --dist challenge|peaked  input distribution (default challenge)
  --reps N               timed reps per mode (default 100 on cuda, >= 50 per SPEC; 10 on cpu)
  --check-requests N     requests checked against the reference per case (default 8, spread
                         over the batch; all of them when the batch is smaller)
  --seed N               input seed (default 1)
  --kv-l2 auto|evict_first|normal
                         cuda: the L2 policy of the KV reads (Plan::kv_evict_first): plan()'s
                         choice (default), or forced either way
  --kv-copy auto|tma|cp.async
                         cuda, bf16 and fp8: how whole KV tiles are copied (Plan::kv_tma):
                         plan()'s choice (default: the TMA when every work item holds >= 64
                         tiles for fp8, >= 24 for bf16, or when a bf16 walking CTA's longest
                         chain of items holds >= 16; see README), or forced
                         Kernels without the forced form (bf16's row pairs: no evict-first;
                         MXFP4, one-tile and row-pair kernels, caches no tensor map describes: no
                         TMA) run their own; such a case's row says so, and its JSON "layout"
                         names what ran
  --json FILE            also write the results as JSON (checked for writing before the suite runs)
  --help                 this text
Lists run each entry once (repeats are dropped).

Exit status: 0 when every case ran and passed (relerr <= 4e-3, LSE within 1e-4, no NaN),
1 otherwise, 2 on a usage error.
)HELP";

struct Options {
  std::optional<Backend> backend;
  std::vector<KvFormat> formats{KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4};
  std::vector<std::pair<int, int>> shapes;
  bool ragged = false;
  int page_size = 0;
  bool pages_in_order = false;
  int s_q = 1;
  testing::Distribution dist = testing::Distribution::challenge;
  int reps = 0;
  int check_requests = 8;
  std::uint64_t seed = 1;
  std::optional<bool> kv_evict_first;  // --kv-l2: unset = plan()'s choice
  std::optional<bool> kv_tma;          // --kv-copy: unset = plan()'s choice
  std::string json;
  bool help = false;
};

// A plan choice forced by `option`: `on` or `off` sets *out; `auto` leaves it as it is (plan()'s
// choice unless an earlier occurrence forced it); anything else is a usage error naming the `what`.
void parse_forced(const std::string& option, const std::string& v, const char* what, const char* on, const char* off,
                  std::optional<bool>* out) {
  if (v == on) {
    *out = true;
  } else if (v == off) {
    *out = false;
  } else if (v != "auto") {
    throw UsageError{option + ": unknown " + what + " '" + v + "' (auto, " + on + " or " + off + ")"};
  }
}

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
    } else if (k == "--shapes" || k == "--shape") {
      o.shapes = parse_shapes(a.value());
    } else if (k == "--ragged") {
      a.no_value();
      o.ragged = true;
    } else if (k == "--s-q" || k == "--sq" || k == "--s_q") {
      o.s_q = int(parse_int("--s-q", a.value(), 1, kMaxSq));
    } else if (k == "--paged") {
      o.page_size = int(parse_int("--paged", a.value(), 0, 64));
      if (o.page_size != 0 && o.page_size != 1 && o.page_size != 16 && o.page_size != 64) {
        throw UsageError{"--paged: page size must be 1, 16 or 64"};
      }
    } else if (k == "--page-order") {
      const std::string v = a.value();
      if (v != "shuffled" && v != "in-order") throw UsageError{"--page-order: shuffled or in-order"};
      o.pages_in_order = v == "in-order";
    } else if (k == "--dist") {
      o.dist = parse_dist(a.value());
    } else if (k == "--reps") {
      o.reps = int(parse_int("--reps", a.value(), 1, 100000));
    } else if (k == "--check-requests") {
      o.check_requests = int(parse_int("--check-requests", a.value(), 1, 1 << 20));
    } else if (k == "--seed") {
      o.seed = std::uint64_t(parse_int("--seed", a.value(), 0, std::numeric_limits<long long>::max()));
    } else if (k == "--kv-l2") {
      parse_forced(k, a.value(), "policy", "evict_first", "normal", &o.kv_evict_first);
    } else if (k == "--kv-copy") {
      parse_forced(k, a.value(), "copy", "tma", "cp.async", &o.kv_tma);
    } else if (k == "--json") {
      o.json = a.value();
      if (o.json.empty()) throw UsageError{"--json: empty file name"};
    } else {
      throw UsageError{"unknown option '" + k + "' (see mla bench --help)"};
    }
  }
  if (o.pages_in_order && o.page_size == 0) throw UsageError{"--page-order in-order: needs --paged"};
  return o;
}

struct Row {
  KvFormat format = KvFormat::bf16;
  int batch = 0;
  int kv_len = 0;
  std::string layout;     // as asked, the forced L2 policy and copy path as this case's plan runs them
  std::string not_taken;  // the forced options this case's plan does not run ("" when none)
  bool ran = false;       // correctness check and timing completed
  bool passed = false;    // ran and correct
  std::string error;      // why not
  testing::Stats call;
  testing::Stats device;
  testing::GpuTiming floor;
  bool has_floor = false;
  double spin_us = kNaN;
  double sm_mhz = kNaN;   // SM clock before the device-time reps of the call (the floor's: floor.spin_sm_mhz)
  int redone_reps = 0;    // device-time reps redone because the spin had not hidden their host work
  int unhidden_reps = 0;  // ... and those it never hid (their A→B includes host time)
  std::int64_t kv_bytes = 0;
  double relerr = kNaN;
  double relerr_worst_request = kNaN;
  double lse_max_abs = kNaN;
  int requests_checked = 0;
  std::string plan;
  double plan_us = kNaN;  // host time of one plan() call, the median of kPlanReps

  double time_us() const { return device.reps ? device.mean_us : call.mean_us; }
  double gbps() const { return ran ? double(kv_bytes) / time_us() / 1e3 : kNaN; }
  double ratio() const { return ran && has_floor ? device.mean_us / floor.device.mean_us : kNaN; }
};

std::string layout_name(const Options& o) {
  std::string s = o.ragged ? "ragged" : "uniform";
  if (o.page_size) s += " paged" + std::to_string(o.page_size);
  if (o.page_size && o.pages_in_order) s += " in-order";
  if (o.kv_evict_first) s += *o.kv_evict_first ? " kv-l2 evict_first" : " kv-l2 normal";
  if (o.kv_tma) s += *o.kv_tma ? " kv-copy tma" : " kv-copy cp.async";
  return s;
}

// A case's layout: layout_name's, with --kv-l2 and --kv-copy as the case's plan runs them. Not every
// kernel has both forms (bf16's row pairs read without the policy; one-tile and pair kernels copy by
// cp.async), and describe() names the form that runs; *not_taken lists the options it overrides.
std::string case_layout(const Options& o, const std::string& description, std::string* not_taken) {
  Options ran = o;
  not_taken->clear();
  const auto note = [&](const std::string& why) { *not_taken += (not_taken->empty() ? "" : "; ") + why; };
  const auto take = [&](std::optional<bool>* forced, const char* option, const char* key, const char* on,
                        const char* off) {
    if (!forced->has_value()) return;
    const std::string runs = plan_field(description, key);
    if (runs.empty()) {
      // A cuda plan without the field has no such choice (MXFP4's copies: no kv_copy); cpu plans name neither.
      if (description.rfind("plan[cuda]", 0) != 0) return;
      note(std::string(option) + " not taken: the plan has no " + key);
      forced->reset();
      return;
    }
    if ((runs == on) == **forced) return;
    note(std::string(option) + " " + (**forced ? on : off) + " not taken: the plan runs " + key + "=" + runs);
    *forced = !**forced;
  };
  take(&ran.kv_evict_first, "--kv-l2", "kv_l2", "evict_first", "normal");
  take(&ran.kv_tma, "--kv-copy", "kv_copy", "tma", "cp.async");
  return layout_name(ran);
}

std::string fmt(const char* f, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void print_header() {
  std::printf("%-6s %6s %6s %10s %10s %10s %8s %7s %9s\n", "format", "batch", "kv", "call µs", "device µs", "floor µs",
              "GB/s", "×floor", "relerr");
}

void print_row(const Row& r) {
  std::printf("%-6s %6d %6d %10s %10s %10s %8s %7s %9s", to_string(r.format), r.batch, r.kv_len,
              fmt("%.1f", r.ran ? r.call.mean_us : kNaN).c_str(),
              fmt("%.1f", r.ran && r.device.reps ? r.device.mean_us : kNaN).c_str(),
              fmt("%.1f", r.has_floor ? r.floor.device.mean_us : kNaN).c_str(),
              fmt(r.gbps() < 10 ? "%.3f" : "%.0f", r.gbps()).c_str(), fmt("%.2f", r.ratio()).c_str(),
              fmt("%.2e", r.relerr).c_str());
  if (!r.passed) std::printf("  FAIL: %s", r.error.c_str());
  const int unhidden = r.unhidden_reps + r.floor.unhidden_reps;
  const int redone = r.redone_reps + r.floor.redone_reps;
  if (unhidden)
    std::printf("  (host work showed in %d device-time reps, the floor's included)", unhidden);
  else if (redone)
    std::printf("  (%d device-time reps redone: host work had outlasted the spin)", redone);
  if (!r.not_taken.empty()) std::printf("  (%s)", r.not_taken.c_str());
  std::printf("\n");
  std::fflush(stdout);
}

struct Geo {
  int cases = 0;
  double call_us = kNaN, device_us = kNaN, floor_device_us = kNaN, ratio = kNaN;
};

// The least and the most of a field over the rows that have it (positive; NaN, NaN when none does).
std::pair<double, double> spread(const std::vector<Row>& rows, double Row::*field) {
  double lo = kNaN, hi = kNaN;
  for (const Row& r : rows) {
    const double v = r.*field;
    if (!(v > 0)) continue;
    lo = std::isnan(lo) ? v : std::min(lo, v);
    hi = std::isnan(hi) ? v : std::max(hi, v);
  }
  return {lo, hi};
}

Geo geo_of(const std::vector<Row>& rows, KvFormat f) {
  std::vector<double> call, dev, floor, ratio;
  Geo g;
  for (const Row& r : rows) {
    if (r.format != f || !r.ran) continue;
    ++g.cases;
    call.push_back(r.call.mean_us);
    if (r.device.reps) dev.push_back(r.device.mean_us);
    if (r.has_floor) floor.push_back(r.floor.device.mean_us);
    ratio.push_back(r.ratio());
  }
  g.call_us = geomean(call);
  g.device_us = geomean(dev);
  g.floor_device_us = geomean(floor);
  g.ratio = geomean(ratio);
  return g;
}

Row run_case(const Options& o, Backend backend, testing::GpuTimer* timer, KvFormat format, int batch, int kv_len,
             int reps) {
  Row r;
  r.format = format;
  r.batch = batch;
  r.kv_len = kv_len;
  r.layout = layout_name(o);
  try {
    testing::CaseSpec spec = testing::CaseSpec::uniform(batch, kv_len, format);
    if (o.ragged) spec.kv_lens = testing::ragged_lengths(batch, o.seed, kv_len);
    spec.dist = o.dist;
    spec.page_size = o.page_size;
    spec.pages_in_order = o.pages_in_order;
    spec.s_q = o.s_q;
    spec.seed = o.seed;
    const testing::HostInputs in = testing::make_inputs(spec);
    r.kv_bytes = in.kv_bytes_read();

    std::unique_ptr<PreparedCase> pc;
    Status s = PreparedCase::prepare(in, backend, timer, &pc);
    if (!s.ok()) {
      r.error = s.message;
      return r;
    }
    if (o.kv_evict_first) pc->set_kv_evict_first(*o.kv_evict_first);
    if (o.kv_tma) pc->set_kv_tma(*o.kv_tma);
    r.plan = describe(pc->plan());
    r.layout = case_layout(o, r.plan, &r.not_taken);
    const CheckResult c = pc->check(o.check_requests);
    if (!c.status.ok()) {
      r.error = c.status.message;
      return r;
    }
    r.relerr = c.cmp.relerr;
    r.relerr_worst_request = c.worst_request_relerr;
    r.lse_max_abs = c.cmp.lse_max_abs;
    r.requests_checked = c.requests_checked;
    // plan()'s host time (after the check, whose run has finished: plan() refills the workspace).
    std::vector<double> plan_us;
    s = pc->time_plan(kPlanReps, &plan_us);
    if (!s.ok()) {
      r.error = s.message;
      return r;
    }
    r.plan_us = testing::summarize(plan_us).median_us;

    if (backend == Backend::cuda) {
      testing::GpuTiming t;
      s = timer->time_call([&pc](void* stream) { return pc->run(stream); }, reps, &t);
      if (s.ok()) s = timer->time_floor(r.kv_bytes, reps, &r.floor);
      if (!s.ok()) {
        r.error = s.message;
        return r;
      }
      r.call = t.call;
      r.device = t.device;
      r.spin_us = t.spin_us;
      r.sm_mhz = t.spin_sm_mhz;
      r.redone_reps = t.redone_reps;
      r.unhidden_reps = t.unhidden_reps;
      r.has_floor = true;
    } else {
      s = pc->run(nullptr);  // warm-up
      std::vector<double> us;
      for (int i = 0; i < reps && s.ok(); ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        s = pc->run(nullptr);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      if (!s.ok()) {
        r.error = s.message;
        return r;
      }
      r.call = testing::summarize(us);
    }
    r.ran = true;
    r.passed = c.passed();
    if (!r.passed) r.error = c.failure();
  } catch (const std::exception& e) {
    r.error = std::string("exception: ") + e.what();
  }
  return r;
}

// Whether `path` can be written, leaving the file system as it was: an existing entry (a file, or
// a link even to nothing) is opened for appending and kept; a new file is created exclusively and
// removed again (the only thing this ever removes).
bool can_write(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND);
    if (fd < 0) return false;
    close(fd);
    return true;
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
  if (fd < 0) return false;
  close(fd);
  unlink(path.c_str());
  return true;
}

void write_json(const std::string& path, const Options& o, Backend backend, const testing::GpuInfo& gpu, int reps,
                const std::vector<Row>& rows, bool all_passed) {
  std::ofstream f(path);
  if (!f) throw UsageError{"--json: cannot write '" + path + "'"};
  const bool cuda = backend == Backend::cuda;
  f << "{\n";
  f << "  \"gpu\": " << json_str(cuda ? gpu.name : "cpu") << ",\n";
  f << "  \"commit\": " << json_str(git_commit()) << ",\n";
  f << "  \"date\": " << json_str(iso_date_utc()) << ",\n";
  f << "  \"backend\": " << json_str(to_string(backend)) << ",\n";
  f << "  \"driver\": "
    << json_str(cuda ? (gpu.driver_release.empty()
                            ? "CUDA driver API " + testing::cuda_version_string(gpu.driver_version)
                            : gpu.driver_release)
                     : "none")
    << ",\n";
  f << "  \"cuda_driver\": " << json_str(cuda ? testing::cuda_version_string(gpu.driver_version) : "none") << ",\n";
  f << "  \"cuda_runtime\": " << json_str(cuda ? testing::cuda_version_string(gpu.runtime_version) : "none") << ",\n";
  f << "  \"sm_count\": " << (cuda ? json_int(gpu.sm_count) : "null") << ",\n";
  f << "  \"host_cpu\": " << json_str(host_cpu_name()) << ",\n";
  f << "  \"reps\": " << reps << ",\n";
  f << "  \"dist\": " << json_str(dist_name(o.dist)) << ",\n";
  f << "  \"layout\": " << json_str(layout_name(o)) << ",\n";
  f << "  \"s_q\": " << o.s_q << ",\n";
  f << "  \"seed\": " << o.seed << ",\n";
  f << "  \"timing\": "
    << json_str(cuda ? "cold L2 (256 MiB memset + sync) per rep; call: events around mla::run; device: same behind "
                       "a spin kernel; floor: 4x16B/thread streaming read of kv_bytes; times are means in us"
                     : "wall time per mla::run call in us")
    << ",\n";
  f << "  \"all_passed\": " << (all_passed ? "true" : "false") << ",\n";
  f << "  \"cases\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const auto num = [&](double v) { return r.ran ? json_num(v) : std::string("null"); };
    const auto gnum = [&](double v) { return r.ran && cuda ? json_num(v) : std::string("null"); };
    f << (i ? ",\n" : "\n") << "    {";
    f << "\"format\": " << json_str(to_string(r.format)) << ", \"batch\": " << r.batch << ", \"kv_len\": " << r.kv_len
      << ", \"layout\": " << json_str(r.layout) << ", \"options_not_taken\": " << json_str(r.not_taken);
    f << ", \"call_us\": " << num(r.call.mean_us) << ", \"call_us_median\": " << num(r.call.median_us);
    f << ", \"device_us\": " << gnum(r.device.mean_us) << ", \"device_us_median\": " << gnum(r.device.median_us);
    const auto fnum = [&](double v) { return r.has_floor ? json_num(v) : std::string("null"); };
    f << ", \"floor_call_us\": " << fnum(r.floor.call.mean_us)
      << ", \"floor_call_us_median\": " << fnum(r.floor.call.median_us)
      << ", \"floor_device_us\": " << fnum(r.floor.device.mean_us)
      << ", \"floor_device_us_median\": " << fnum(r.floor.device.median_us);
    f << ", \"kv_bytes\": " << r.kv_bytes << ", \"gbps\": " << json_num(r.gbps())
      << ", \"ratio_to_floor\": " << json_num(r.ratio());
    f << ", \"relerr\": " << json_num(r.relerr) << ", \"relerr_requests_checked\": " << r.requests_checked
      << ", \"relerr_worst_request\": " << json_num(r.relerr_worst_request)
      << ", \"lse_max_abs\": " << json_num(r.lse_max_abs);
    f << ", \"spin_us\": " << json_num(r.spin_us) << ", \"redone_reps\": " << r.redone_reps
      << ", \"unhidden_reps\": " << r.unhidden_reps << ", \"floor_redone_reps\": " << r.floor.redone_reps
      << ", \"floor_unhidden_reps\": " << r.floor.unhidden_reps;
    f << ", \"sm_mhz\": " << json_num(r.sm_mhz) << ", \"floor_sm_mhz\": " << fnum(r.floor.spin_sm_mhz);
    f << ", \"passed\": " << (r.passed ? "true" : "false") << ", \"error\": " << json_str(r.error);
    f << ", \"plan\": " << json_str(r.plan) << ", \"plan_us\": " << json_num(r.plan_us) << "}";
  }
  f << "\n  ],\n";
  f << "  \"geomean\": {";
  bool first = true;
  for (KvFormat fm : o.formats) {
    const Geo g = geo_of(rows, fm);
    f << (first ? "\n" : ",\n") << "    " << json_str(to_string(fm)) << ": {\"cases\": " << g.cases
      << ", \"call_us\": " << json_num(g.call_us) << ", \"device_us\": " << json_num(g.device_us)
      << ", \"floor_device_us\": " << json_num(g.floor_device_us) << ", \"ratio_to_floor\": " << json_num(g.ratio)
      << "}";
    first = false;
  }
  f << "\n  }\n}\n";
  if (!f) throw UsageError{"--json: error writing '" + path + "'"};
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Options o;
  if (const std::optional<int> done = parse_command("bench", kBenchHelp, argc, argv, parse, &o)) return *done;
  Backend backend = Backend::cpu;
  testing::GpuInfo gpu;
  std::unique_ptr<testing::GpuTimer> timer;
  if (!o.json.empty() && !can_write(o.json)) {  // before the suite: an unwritable path must not cost a run
    std::fprintf(stderr, "mla bench: --json: cannot write '%s'\n", o.json.c_str());
    return 1;
  }
  if (!select_backend("bench", o.backend, &backend, &timer, &gpu)) return 1;
  if (o.shapes.empty()) {
    if (backend == Backend::cuda) {
      for (int b : {4, 32, 64, 256}) {
        for (int kv : {1024, 8192}) o.shapes.emplace_back(b, kv);
      }
    } else {
      for (int b : {1, 4}) {
        for (int kv : {512, 2048}) o.shapes.emplace_back(b, kv);
      }
    }
  }
  const int reps = o.reps ? o.reps : (backend == Backend::cuda ? 100 : 10);
  if (backend == Backend::cuda && reps < 50) {
    std::fprintf(stderr, "mla bench: warning: --reps %d is below the 50 reps SPEC §4 asks for\n", reps);
  }

  if (backend == Backend::cuda) {
    std::printf("backend cuda: %s, %d SMs, L2 %.0f MB, driver %s, CUDA driver %s, runtime %s\n", gpu.name.c_str(),
                gpu.sm_count, double(gpu.l2_bytes) / 1e6, gpu.driver_release.empty() ? "?" : gpu.driver_release.c_str(),
                testing::cuda_version_string(gpu.driver_version).c_str(),
                testing::cuda_version_string(gpu.runtime_version).c_str());
  } else {
    std::printf("backend cpu: %s\n", host_cpu_name().c_str());
  }
  std::printf("%s, %s, s_q %d, %d reps%s; times are means\n", dist_name(o.dist), layout_name(o).c_str(), o.s_q, reps,
              backend == Backend::cuda ? ", cold L2" : "");
  print_header();

  std::vector<Row> rows;
  const int total = int(o.formats.size() * o.shapes.size());
  int index = 0;
  for (KvFormat f : o.formats) {
    for (const auto& [batch, kv] : o.shapes) {
      ++index;
      std::fprintf(stderr, "[%d/%d] %s b%d kv%d ...\n", index, total, to_string(f), batch, kv);
      rows.push_back(run_case(o, backend, timer.get(), f, batch, kv, reps));
      print_row(rows.back());
    }
  }

  bool all_passed = true;
  for (const Row& r : rows) all_passed = all_passed && r.passed;
  std::printf("\ngeomean per format (means, µs):\n");
  std::printf("%-6s %6s %10s %10s %10s %8s\n", "format", "cases", "call", "device", "floor", "×floor");
  for (KvFormat f : o.formats) {
    const Geo g = geo_of(rows, f);
    std::printf("%-6s %6d %10s %10s %10s %8s\n", to_string(f), g.cases, fmt("%.1f", g.call_us).c_str(),
                fmt("%.1f", g.device_us).c_str(), fmt("%.1f", g.floor_device_us).c_str(), fmt("%.2f", g.ratio).c_str());
  }
  int failed = 0;
  for (const Row& r : rows) failed += !r.passed;
  std::printf("\n%d of %zu cases passed%s\n", int(rows.size()) - failed, rows.size(), failed ? " — FAILED" : "");
  // The SM clock right before the timed calls: small cases are latency at SM speed, and the clock
  // is the machine's to choose (perf-notes, session 7), so show its spread.
  const auto [mhz_lo, mhz_hi] = spread(rows, &Row::sm_mhz);
  if (!std::isnan(mhz_lo)) {
    std::printf("SM clock before the timed calls: %.0f–%.0f MHz (sm_mhz per case in the JSON)\n", mhz_lo, mhz_hi);
  }
  const auto [plan_lo, plan_hi] = spread(rows, &Row::plan_us);
  if (!std::isnan(plan_lo)) {
    std::printf("plan() host time per call: %.0f–%.0f µs (median of %d per case%s; plan_us in the JSON)\n", plan_lo,
                plan_hi, kPlanReps, backend == Backend::cuda ? ", its copies included" : "");
  }
  bool sampled = false;
  for (const Row& r : rows) sampled = sampled || (r.requests_checked && r.requests_checked < r.batch);
  if (sampled) {
    std::printf(
        "relerr of batches above %d requests: over %d requests spread over the batch "
        "(relerr_requests_checked in the JSON)\n",
        o.check_requests, o.check_requests);
  }

  if (!o.json.empty()) {
    try {
      write_json(o.json, o, backend, gpu, reps, rows, all_passed);
      std::fprintf(stderr, "wrote %s\n", o.json.c_str());
    } catch (const UsageError& e) {
      std::fprintf(stderr, "mla bench: %s\n", e.message.c_str());
      return 1;
    }
  }
  return all_passed ? 0 : 1;
}

}  // namespace mla::tools
