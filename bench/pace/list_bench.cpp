// mla_list_bench: measures, on the GPU, every work list the CUDA planner weighs for a case — not only
// the one it picks — so that a cost model of the lists can be fitted to what they take (bench/pace/,
// scripts/fit_lists.py; perf-notes, session 32). All three formats; bf16's lists also as walking grids.
//
//   usage: mla_list_bench FORMAT ROUNDS REPS CASE...
//     CASE: BxL (B requests of L tokens), BxLrS (ragged_lengths(B, S, L): up to L tokens, seed S), or
//           BxLhS / BxLqS (uniform in [L/2, L] / [L/4, L], seed S; list_format.h's parse_case)
//
// One input (the largest case's tokens) serves every case: a case's requests are consecutive rows of
// it. Candidates: list 0 is the plan's (cuda::plan_and_list); then the lists balanced_work_list weighs
// with the format's model and at item overheads 1–6, 8 and 12 tiles with no margin (timelines on; bf16
// also off), and for bf16 each list of more items than SMs walked by one wave of CTAs (walk_order, and
// walking_work_list's cut), every request whole and in halves (a CTA per item), and the walked timelines
// at overheads 1–4. Each is checked against the
// plan's output (largest difference over the largest value, "diff"), then timed by the bench's
// protocol (cold L2, device time, `REPS` reps) in `ROUNDS` rounds, the candidates' order reversed every
// other round. Prints per candidate
//   M CASE/K which items partials split_requests cluster tma diff µs_round1 µs_round2 ...
// (which: 1 the plan's list, 2 balanced_work_list's by the format's model where that differs, 3 bf16's
// walking path's list (v134: what a ragged batch took before) where that differs, else 0)
//   L CASE/K clustered partials split_requests TILES*COUNT ...   (bench/pace's list format), or for a
//   walking list W CASE/K grid partials split_requests | CTA 0's items' TILES*COUNT | CTA 1's … | …
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "host/cuda_backend.h"
#include "host/planner.h"
#include "kernels/common/bf16.h"
#include "list_format.h"
#include "mla/mla.h"
#include "testing/device_inputs.h"
#include "testing/gpu_timing.h"
#include "testing/inputs.h"

namespace {

struct Case {
  std::string name;
  std::vector<std::int32_t> lengths;
};

bool parse_case(const std::string& s, Case* c) {
  if (!mla::pace::parse_case(s, &c->lengths)) return false;
  c->name = s;
  return true;
}

// A list to measure: its items, and the CTAs that walk them (0: one CTA per item).
struct Candidate {
  mla::WorkList wl;
  int grid = 0;
};

// The same items in the same order (and, with `chains`, the same walks).
bool same_items(const mla::WorkList& a, const mla::WorkList& b, bool chains) {
  if (a.items.size() != b.items.size()) return false;
  for (std::size_t i = 0; i < a.items.size(); ++i) {
    const mla::WorkItem &x = a.items[i], &y = b.items[i];
    if (x.request != y.request || x.kv_begin != y.kv_begin || x.kv_end != y.kv_end) return false;
    if (chains && x.next != y.next) return false;
  }
  return true;
}

// Largest |a − b| over the largest |b| (NaN anywhere: infinity).
double relative_diff(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = mla::bf16_to_float(a[i]), y = mla::bf16_to_float(b[i]);
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
    diff = std::max(diff, std::fabs(x - y));
    scale = std::max(scale, std::fabs(y));
  }
  return scale > 0 ? diff / scale : diff;
}

int fail(const std::string& what, const mla::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mla;
  if (argc < 5) {
    std::fprintf(stderr, "usage: mla_list_bench bf16|fp8|mxfp4 ROUNDS REPS CASE...  (CASE: BxL or BxLrS)\n");
    return 2;
  }
  const std::string fmt = argv[1];
  if (fmt != "bf16" && fmt != "fp8" && fmt != "mxfp4") {
    std::fprintf(stderr, "format: bf16, fp8 or mxfp4\n");
    return 2;
  }
  const KvFormat format = fmt == "bf16" ? KvFormat::bf16 : fmt == "fp8" ? KvFormat::fp8 : KvFormat::mxfp4;
  const int rounds = std::max(1, std::atoi(argv[2])), reps = std::max(1, std::atoi(argv[3]));
  std::vector<Case> cases;
  std::int64_t max_tokens = 0;
  int max_batch = 0;
  for (int i = 4; i < argc; ++i) {
    Case c;
    if (!parse_case(argv[i], &c)) {
      std::fprintf(stderr, "bad case %s\n", argv[i]);
      return 2;
    }
    std::int64_t tokens = 0;
    for (std::int32_t len : c.lengths) tokens += len;
    max_tokens = std::max(max_tokens, tokens);
    max_batch = std::max(max_batch, int(c.lengths.size()));
    cases.push_back(std::move(c));
  }
  // One input for all: max_batch requests holding at least max_tokens rows.
  const int row_len = int((max_tokens + max_batch - 1) / max_batch);
  const testing::HostInputs in = testing::make_inputs(testing::CaseSpec::uniform(max_batch, row_len, format));
  std::unique_ptr<testing::DeviceCase> dc;
  Status s = testing::upload(in, true, &dc);
  if (!s.ok()) return fail("upload", s);
  std::unique_ptr<testing::GpuTimer> timer;
  s = testing::GpuTimer::create(&timer);
  if (!s.ok()) return fail("timer", s);
  std::int32_t* kv_indptr = nullptr;
  if (cudaMalloc(&kv_indptr, (std::size_t(max_batch) + 1) * 4) != cudaSuccess) return 1;

  for (const Case& c : cases) {
    const int batch = int(c.lengths.size());
    std::vector<std::int32_t> indptr(std::size_t(batch) + 1, 0);
    for (int b = 0; b < batch; ++b) indptr[std::size_t(b) + 1] = indptr[std::size_t(b)] + c.lengths[std::size_t(b)];
    cudaMemcpy(kv_indptr, indptr.data(), indptr.size() * 4, cudaMemcpyHostToDevice);
    Problem p = dc->problem();  // the first `batch` q rows (qo_indptr 0, 1, 2, …), its KV rows from 0
    p.batch = batch;
    p.total_q = batch;
    p.kv_indptr = kv_indptr;

    cuda::ListSetting set;
    s = cuda::list_setting(p, &set);
    if (!s.ok()) return fail("list_setting", s);
    std::size_t ws_bytes = 0;
    s = workspace_size(p, Backend::cuda, &ws_bytes);
    if (!s.ok()) return fail("workspace_size", s);
    testing::DeviceMemory ws;
    s = ws.allocate(ws_bytes);
    if (!s.ok()) return fail("workspace", s);

    // List 0: the plan's (plan_and_list: its output is the plan's, diff 0), then balanced_work_list's by
    // the format's model (fp8: the tile model's list that simulated_work_list starts from; bf16: before its
    // walking), then every list weighed at other overheads, and for bf16 their walking layouts on one wave
    // of CTAs and the walked timelines at overheads 1–4.
    Plan chosen_plan;
    Candidate chosen;
    s = cuda::plan_and_list(p, ws.get(), ws_bytes, &chosen_plan, &chosen.wl, &chosen.grid);
    if (!s.ok()) return fail("plan", s);
    std::vector<std::uint16_t> ref, out;
    std::vector<float> lse;
    dc->poison_outputs();
    s = run(p, chosen_plan, timer->stream());
    if (s.ok()) s = timer->synchronize();
    if (s.ok()) s = dc->download(&ref, &lse);
    if (!s.ok()) return fail(c.name + " plan's run", s);
    ref.resize(std::size_t(batch) * kNumHeads * kValueDim);

    const bool bf16 = format == KvFormat::bf16;
    const ListModel own = format == KvFormat::mxfp4 ? kSmBound : kDramBound;
    std::vector<WorkList> weighed;
    const WorkList tiles = balanced_work_list(c.lengths, set.slots, set.tile, set.max_items, !bf16, own, &weighed);
    weighed.insert(weighed.begin(), tiles);
    for (int overhead : {1, 2, 3, 4, 5, 6, 8, 12}) {
      for (bool timelines : {true, false}) {
        if (timelines || bf16) {
          balanced_work_list(c.lengths, set.slots, set.tile, set.max_items, timelines, ListModel{overhead, 0},
                             &weighed);
        }
      }
    }
    std::vector<Candidate> lists{chosen};
    // Adds a candidate unless it is one already listed; its index either way (none past the room).
    constexpr std::size_t kNone = ~std::size_t(0);
    const auto add = [&](WorkList wl, int grid) {
      if (int(wl.items.size()) > set.max_items) return kNone;
      if (grid >= int(wl.items.size())) grid = 0;
      if (grid == 0) {
        for (WorkItem& it : wl.items) it.next = -1;
      }
      for (std::size_t k = 0; k < lists.size(); ++k) {
        if (lists[k].grid == grid && same_items(lists[k].wl, wl, grid > 0)) return k;
      }
      lists.push_back({std::move(wl), grid});
      return lists.size() - 1;
    };
    for (const WorkList& wl : weighed) {
      add(wl, 0);
      if (bf16 && int(wl.items.size()) > set.slots) {
        WorkList walked = wl;
        walk_order(walked.items, set.slots, set.tile);
        add(std::move(walked), set.slots);
        add(walking_work_list(c.lengths, wl, set.slots, set.tile, set.max_items), set.slots);
      }
    }
    // bf16: the list its uniform batches' path makes (the tile model's list, walked where walking_grid
    // says, walking_work_list's cut, walked timelines), which ragged ones take instead since v134.
    std::size_t walking_path = kNone;
    if (bf16) {
      WorkList path = tiles;
      int grid = walking_grid(path.items, set.slots, std::int64_t(kWalkMaxMeanTiles) * set.tile);
      grid = bf16_walking_path(c.lengths, set.slots, set.tile, set.max_items, grid, &path);
      walking_path = add(std::move(path), grid);
    }
    // bf16 also every request whole and in halves, a CTA per item (whether or not a model weighed them).
    for (int per_request = 1; bf16 && per_request <= 2; ++per_request) {
      add(build_work_list(c.lengths, per_request * int(c.lengths.size()), set.tile), 0);
    }
    for (int overhead = 1; bf16 && overhead <= 4; ++overhead) {
      int used = 0;
      WorkList tl = walked_timeline_list(c.lengths, set.slots, set.tile, overhead, &used);
      add(std::move(tl), used);
    }

    struct Measured {
      Plan plan;
      double diff = 0;
      std::vector<double> us;
    };
    std::vector<Measured> m(lists.size());
    for (std::size_t k = 0; k < lists.size(); ++k) {
      s = cuda::plan_with_list(p, lists[k].wl, c.lengths, lists[k].grid, ws.get(), ws_bytes, &m[k].plan);
      if (!s.ok()) return fail(c.name + " list " + std::to_string(k), s);
      dc->poison_outputs();
      s = run(p, m[k].plan, timer->stream());
      if (s.ok()) s = timer->synchronize();
      if (s.ok()) s = dc->download(&out, &lse);
      if (!s.ok()) return fail(c.name + " list " + std::to_string(k) + " run", s);
      out.resize(ref.size());
      m[k].diff = relative_diff(out, ref);
    }
    // (plan_with_list rewrote the workspace: each candidate is planned again before it is timed.)
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t j = 0; j < lists.size(); ++j) {
        const std::size_t k = r % 2 == 0 ? j : lists.size() - 1 - j;
        Plan pl;
        s = cuda::plan_with_list(p, lists[k].wl, c.lengths, lists[k].grid, ws.get(), ws_bytes, &pl);
        testing::GpuTiming t;
        if (s.ok()) s = timer->time_call([&](void* stream) { return run(p, pl, stream); }, reps, &t);
        if (!s.ok()) return fail(c.name + " timing", s);
        m[k].us.push_back(t.device.mean_us);
      }
    }
    for (std::size_t k = 0; k < lists.size(); ++k) {
      const Plan& pl = m[k].plan;
      const WorkList& wl = lists[k].wl;
      const int which = k == 0 ? 1 : lists[k].grid == 0 && same_items(wl, tiles, false) ? 2 : k == walking_path ? 3 : 0;
      std::printf("M %s/%zu %d %d %d %d %d %d %.2e", c.name.c_str(), k, which, pl.num_work_items, wl.num_partials,
                  wl.num_split_requests, pl.cluster_size, pl.kv_tma ? 1 : 0, m[k].diff);
      for (double us : m[k].us) std::printf(" %.2f", us);
      std::printf("\n");
    }
    for (std::size_t k = 0; k < lists.size(); ++k) {
      const WorkList& wl = lists[k].wl;
      if (lists[k].grid == 0) {
        std::printf("L %s/%zu %d %d %d%s\n", c.name.c_str(), k, m[k].plan.cluster_size > 0 ? 1 : 0, wl.num_partials,
                    wl.num_split_requests, mla::pace::list_runs(wl.items, set.tile).c_str());
        continue;
      }
      // A walking list: its CTAs' chains, one after another, each after a '|'.
      std::printf("W %s/%zu %d %d %d", c.name.c_str(), k, lists[k].grid, wl.num_partials, wl.num_split_requests);
      for (int cta = 0; cta < lists[k].grid; ++cta) {
        std::vector<WorkItem> chain;
        for (int i = cta; i >= 0; i = wl.items[std::size_t(i)].next) chain.push_back(wl.items[std::size_t(i)]);
        std::printf(" |%s", mla::pace::list_runs(chain, set.tile).c_str());
      }
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  cudaFree(kv_indptr);
  return 0;
}
