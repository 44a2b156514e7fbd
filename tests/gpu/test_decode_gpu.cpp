// GPU tests of the cuda backend against the float64 reference (label `gpu`). Without a usable
// sm_90 device every test is skipped with the reason — never reported as passed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "host/cuda_backend.h"
#include "host/planner.h"
#include "host/problem_access.h"
#include "kernels/common/bf16.h"
#include "mla/mla.h"
#include "testing/compare.h"
#include "testing/device_inputs.h"
#include "testing/inputs.h"

namespace mla::testing {
namespace {

constexpr const char* kNoGpu = "no usable sm_90 CUDA device: GPU test skipped";

struct GpuResult {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
  Comparison cmp;
  bool guards_ok = false;
  Plan plan;
};

// A batch whose rows the plan splits in exactly two pieces, merged in clusters of 2: about one
// row per two decode slots (bf16: one CTA per SM; fp8, MXFP4: two).
int two_piece_rows(KvFormat f) {
  return f == KvFormat::bf16 ? 64 : 128;
}

// A case on the GPU with its workspace, ready to plan.
struct GpuCase {
  std::unique_ptr<DeviceCase> dc;
  DeviceMemory ws;
  const Problem& problem() const { return dc->problem(); }
};

// guard: NaN bytes around every input buffer (0: none, so that compute-sanitizer's memcheck sees a read
// past a buffer's end).
void prepare(const HostInputs& in, GpuCase* c, bool with_lse = true, std::size_t guard = 4096) {
  ASSERT_TRUE(upload(in, with_lse, &c->dc, guard).ok());
  std::size_t bytes = 0;
  const Status s = workspace_size(c->problem(), Backend::cuda, &bytes);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_TRUE(c->ws.allocate(bytes).ok());
  ASSERT_TRUE(c->ws.fill(0xFF).ok());  // NaN: a partial read before it is written poisons the result
}

// prepare, then plan into the case's workspace.
void prepare_planned(const HostInputs& in, GpuCase* c, Plan* pl, bool with_lse = true, std::size_t guard = 4096) {
  ASSERT_NO_FATAL_FAILURE(prepare(in, c, with_lse, guard));
  const Status s = plan(c->problem(), Backend::cuda, c->ws.get(), c->ws.size(), pl);
  ASSERT_TRUE(s.ok()) << s.message;
}

// prepare, then a bf16 walking plan of the case whatever plan() picks (since v134 plan() runs ragged
// batches a CTA per item): the tile model's list through bf16_walking_path on walking_grid's CTAs —
// the list plan() walked before v134 — by cuda::plan_with_list. So the walking kernel stays covered
// on ragged items.
void prepare_walking(const HostInputs& in, GpuCase* c, Plan* pl, bool with_lse = true) {
  ASSERT_NO_FATAL_FAILURE(prepare(in, c, with_lse));
  const Problem& p = c->problem();
  cuda::ListSetting set;
  Status s = cuda::list_setting(p, &set);
  ASSERT_TRUE(s.ok()) << s.message;
  const std::vector<std::int32_t> rows = query_row_lengths(in.spec.kv_lens, in.spec.s_q);  // (plan()'s rows)
  WorkList wl = balanced_work_list(rows, set.slots, set.tile, set.max_items, false, kDramBound);
  int grid = walking_grid(wl.items, set.slots, std::int64_t(kWalkMaxMeanTiles) * set.tile);
  grid = bf16_walking_path(rows, set.slots, set.tile, set.max_items, grid, &wl);
  ASSERT_LT(grid, int(wl.items.size())) << "the case's walking path does not walk";
  s = cuda::plan_with_list(p, wl, rows, grid, c->ws.get(), c->ws.size(), pl);
  ASSERT_TRUE(s.ok()) << s.message;
}

// Outputs of `in`'s problem against its float64 reference.
Comparison against_reference(const HostInputs& in, const std::vector<std::uint16_t>& out,
                             const std::vector<float>& lse) {
  return compare(out, lse, reference_decode(in.problem(nullptr, nullptr)));
}

// Uploads, plans, poisons the outputs with NaN, runs once and checks against the reference.
void run_inputs(const HostInputs& in, GpuResult* r, bool with_lse = true, bool walking = false,
                std::size_t guard = 4096) {
  GpuCase gc;
  if (walking) {
    ASSERT_NO_FATAL_FAILURE(prepare_walking(in, &gc, &r->plan, with_lse));
  } else {
    ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &r->plan, with_lse, guard));
  }
  const std::unique_ptr<DeviceCase>& dc = gc.dc;
  const Problem& p = gc.problem();
  ASSERT_TRUE(dc->poison_outputs().ok());
  Status s = run(p, r->plan, nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  s = device_synchronize();
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_TRUE(dc->download(&r->out, &r->lse).ok());
  ASSERT_TRUE(dc->guards_intact(&r->guards_ok).ok());
  r->cmp = against_reference(in, r->out, r->lse);
}
void run_case(const CaseSpec& spec, GpuResult* r, bool with_lse = true, bool walking = false) {
  run_inputs(make_inputs(spec), r, with_lse, walking);
}

void expect_correct_inputs(const HostInputs& in, const std::string& name, bool with_lse = true, Plan* plan = nullptr) {
  GpuResult r;
  ASSERT_NO_FATAL_FAILURE(run_inputs(in, &r, with_lse));
  if (plan != nullptr) *plan = r.plan;
  EXPECT_TRUE(r.cmp.ok()) << name << ": " << r.cmp.summary() << " | " << describe(r.plan);
  std::printf("  %-48s %s\n", name.c_str(), r.cmp.summary().c_str());
  EXPECT_EQ(r.cmp.nonfinite, 0) << name;
  EXPECT_TRUE(r.guards_ok) << name << ": a write landed outside out/lse (or a guard changed)";
}
void expect_correct(const CaseSpec& spec, bool with_lse = true, Plan* plan = nullptr) {
  expect_correct_inputs(make_inputs(spec), spec.name(), with_lse, plan);
}

// expect_correct of peaked inputs of these lengths in `format`: pages of `page` rows (0: contiguous),
// `s_q` query tokens per request, 64 NaN rows past the last request; the plan in *plan (for the
// tests that check the planner's lists as well as the results).
void expect_correct_peaked(std::vector<std::int32_t> lens, KvFormat format, int page, int s_q, std::uint64_t seed,
                           Plan* plan) {
  CaseSpec spec;
  spec.kv_lens = std::move(lens);
  spec.format = format;
  spec.dist = Distribution::peaked;
  spec.page_size = page;
  spec.s_q = s_q;
  spec.spare_rows = 64;
  spec.seed = seed;
  expect_correct(spec, true, plan);
}

// Outputs of one run of `pl` into NaN-poisoned outputs, or of `graph_replays` replays of a CUDA graph
// that captured it; and the check that two such runs are bit-identical.
struct Outputs {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};
void run_outputs(GpuCase& gc, const Plan& pl, Outputs* r, int graph_replays = 0) {
  ASSERT_TRUE(gc.dc->poison_outputs().ok());
  const Problem& p = gc.problem();
  const Status s = graph_replays > 0 ? run_in_graph(p, pl, graph_replays) : run(p, pl, nullptr);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_TRUE(gc.dc->download(&r->out, &r->lse).ok());
}
void expect_identical(const Outputs& a, const Outputs& b, const std::string& what) {
  EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2)) << what;
  EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4)) << what;
}

// Two plans of the same case that may differ only in speed: their outputs are bit-identical and
// match the reference.
void expect_plans_agree(GpuCase& gc, const HostInputs& in, const Plan& a, const Plan& b, const std::string& what) {
  Outputs r1, r2;
  ASSERT_NO_FATAL_FAILURE(run_outputs(gc, a, &r1));
  ASSERT_NO_FATAL_FAILURE(run_outputs(gc, b, &r2));
  expect_identical(r1, r2, what);
  const Comparison cmp = against_reference(in, r1.out, r1.lse);
  EXPECT_TRUE(cmp.ok()) << what << ": " << cmp.summary();
  EXPECT_EQ(cmp.nonfinite, 0) << what;
}

// cuda::plan_with_list's plan of `wl` over an s_q = 1 case's requests (on `grid` walking CTAs, 0: one
// per item), its copy path forced when `kv_tma` is set, run and checked against the reference.
void expect_list_matches(GpuCase& gc, const HostInputs& in, const WorkList& wl, int grid, std::optional<bool> kv_tma,
                         const std::string& what) {
  Plan pl;
  const Status st = cuda::plan_with_list(gc.problem(), wl, in.spec.kv_lens, grid, gc.ws.get(), gc.ws.size(), &pl);
  ASSERT_TRUE(st.ok()) << what << ": " << st.message;
  if (kv_tma) pl.kv_tma = *kv_tma;
  Outputs r;
  ASSERT_NO_FATAL_FAILURE(run_outputs(gc, pl, &r));
  const Comparison cmp = against_reference(in, r.out, r.lse);
  EXPECT_TRUE(cmp.ok()) << what << ": " << cmp.summary() << " | " << describe(pl);
  EXPECT_EQ(cmp.nonfinite, 0) << what;
}

const KvFormat kFormats[] = {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4};

TEST(GpuDecode, UniformChallengeAndPeakedAllFormats) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (Distribution d : {Distribution::challenge, Distribution::peaked}) {
      for (auto [b, l] : {std::pair{4, 1024}, std::pair{32, 8192}, std::pair{1, 5000}}) {
        CaseSpec spec = CaseSpec::uniform(b, l, f);
        spec.dist = d;
        spec.seed = 11 + b + l;
        expect_correct(spec);
      }
    }
  }
}

// Both ways of merging split rows: inside thread-block clusters of 2 (rows split in two: 64 or 128
// rows of 1000 tokens, 512 + 488) and by the combine kernels (more pieces: 32 × 1024 in 4 or 8 by
// combine_few_kernel<1, 4> or <1, 8>, 4 × 1024 in 16 and 2 × 700 in 11 by combine_few_kernel<1, 16>,
// 4 × 4096 in 32 or 64 by combine_few_kernel<2, 16> or <4, 16>, 2 × 8192 in 64 by
// combine_few_kernel<4, 16> for bf16 and in 128 by combine_kernel otherwise, 1 × 16384 in 128 or 256
// by combine_kernel; each on bf16's fp32 partials and the others' fp16 ones), checked against the
// reference with the plan's choice asserted (the piece counts on a 132-SM H200). Peaked inputs: with
// the challenge ones (logits of std ~4e-4) equal weights, or no Q at all, would pass the bound.
TEST(GpuDecode, SplitRowsMergedInClustersAndByTheCombine) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    const bool bf16 = f == KvFormat::bf16;
    struct Split {
      int b, l;
      bool clustered;
      int pieces;  // on 132 SMs
    };
    for (const Split& sp : {Split{two_piece_rows(f), 1000, true, 2}, Split{32, 1024, false, bf16 ? 4 : 8},
                            Split{4, 1024, false, 16}, Split{2, 700, false, 11}, Split{4, 4096, false, bf16 ? 32 : 64},
                            Split{2, 8192, false, bf16 ? 64 : 128}, Split{1, 16384, false, bf16 ? 128 : 256}}) {
      const auto [b, l, clustered, pieces] = sp;
      CaseSpec spec = CaseSpec::uniform(b, l, f);
      spec.seed = 5 + b + l;
      spec.dist = Distribution::peaked;
      GpuResult r;
      ASSERT_NO_FATAL_FAILURE(run_case(spec, &r));
      EXPECT_TRUE(r.cmp.ok()) << spec.name() << ": " << r.cmp.summary() << " | " << describe(r.plan);
      EXPECT_EQ(r.cmp.nonfinite, 0) << spec.name();
      EXPECT_TRUE(r.guards_ok) << spec.name();
      EXPECT_GT(r.plan.num_split_requests, 0) << describe(r.plan);
      EXPECT_EQ(r.plan.cluster_size, clustered ? 2 : 0) << describe(r.plan);
      if (r.plan.device_sms == 132) {
        EXPECT_EQ(r.plan.max_request_partials, pieces) << describe(r.plan);
      }
      std::printf("  %-48s %s | cluster %d\n", spec.name().c_str(), r.cmp.summary().c_str(), r.plan.cluster_size);
    }
  }
}

// fp8 and MXFP4 run a kernel with no code for a next tile when every work item is one tile
// (DecodeParams::max_item_tokens ≤ 64, perf-notes v76, v77), and the general kernel otherwise. Both
// are checked against the reference, with the plan's item length asserted: contiguous, paged (pages
// of 16 and 64, a ragged tail), rows split in two and merged in clusters, and two-tile items.
TEST(GpuDecode, OneTileItemsAndLongerOnes) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  struct Shape {
    std::vector<std::int32_t> lens;
    int page, tokens_per_split, cluster;
  };
  const Shape shapes[] = {{std::vector<std::int32_t>(4, 1024), 0, 64, 0},
                          {{700, 5, 64, 0, 129}, 16, 64, 0},
                          {{1, 63, 64, 65, 300}, 64, 64, 0},
                          {std::vector<std::int32_t>(128, 128), 0, 64, 2},
                          {std::vector<std::int32_t>(32, 1024), 0, 128, 0}};
  for (KvFormat f : {KvFormat::fp8, KvFormat::mxfp4}) {
    for (const Shape& sh : shapes) {
      CaseSpec spec;
      spec.kv_lens = sh.lens;
      spec.format = f;
      spec.page_size = sh.page;
      spec.spare_rows = sh.page > 0 ? 128 : 0;
      spec.seed = 71 + int(sh.lens.size()) + sh.page;
      spec.dist = Distribution::peaked;
      GpuResult r;
      ASSERT_NO_FATAL_FAILURE(run_case(spec, &r));
      EXPECT_TRUE(r.cmp.ok()) << spec.name() << ": " << r.cmp.summary() << " | " << describe(r.plan);
      EXPECT_EQ(r.cmp.nonfinite, 0) << spec.name();
      EXPECT_TRUE(r.guards_ok) << spec.name();
      EXPECT_EQ(r.plan.tokens_per_split, sh.tokens_per_split) << describe(r.plan);
      EXPECT_EQ(r.plan.cluster_size, sh.cluster) << describe(r.plan);
      std::printf("  %-48s %s | %d tokens per item\n", spec.name().c_str(), r.cmp.summary().c_str(),
                  r.plan.tokens_per_split);
    }
  }
}

TEST(GpuDecode, RaggedLengthsIncludingEdgesInOneBatch) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (Distribution d : {Distribution::challenge, Distribution::peaked}) {
      CaseSpec spec;
      spec.kv_lens = {0, 1, 63, 64, 65, 127, 128, 129, 2, 3, 5, 7, 13, 97, 1009, 8191, 0, 4099};
      spec.format = f;
      spec.dist = d;
      spec.seed = 5;
      spec.spare_rows = 64;  // NaN rows no request owns
      expect_correct(spec);
    }
  }
}

TEST(GpuDecode, PaddedKvRowsContiguousAndPaged) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (int page : {0, 16}) {
      CaseSpec spec;
      spec.kv_lens = {256, 100, 1, 64, 1000};  // full and partial tiles
      spec.format = f;
      spec.page_size = page;
      spec.row_padding = 32;  // stride = row bytes + 32, the padding NaN bytes
      spec.seed = 23 + page;
      expect_correct(spec);
    }
  }
}

TEST(GpuDecode, BatchesOneTo512) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  const int batches[] = {1, 2, 3, 17, 64, 133, 256, 512};
  for (int i = 0; i < int(std::size(batches)); ++i) {
    const int batch = batches[i];
    CaseSpec spec;
    spec.kv_lens = ragged_lengths(batch, 100 + batch, batch >= 256 ? 700 : 3000);
    spec.format = kFormats[i % 3];  // every format sees a batch of 256 or more
    spec.dist = Distribution::peaked;
    spec.seed = 7 + batch;
    expect_correct(spec);
  }
}

// bf16 launches one CTA per SM; more items than that are walked by each CTA in turn (items c,
// c + grid, …), the copies of an item's first tiles streaming under the previous item's last ones.
// Mixed lengths (empty, one token, partial tiles, long rows that the plan splits), contiguous and
// paged, one and two query tokens, every case checked against the reference. (Since v134 plan() runs
// such ragged batches a CTA per item: the walking plan here is prepare_walking's.)
TEST(GpuDecode, Bf16CtasWalkSeveralItems) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (int page : {0, 16}) {
    for (int s_q : {1, 2}) {
      CaseSpec spec;
      spec.kv_lens = ragged_lengths(300, 41 + page + s_q, 1500);
      for (int i = 0; i < 300; i += 23) spec.kv_lens[std::size_t(i)] = 0;
      for (int i = 5; i < 300; i += 37) spec.kv_lens[std::size_t(i)] = 1 + i % 3;
      spec.kv_lens[7] = 20000;  // longer than a CTA's even share: split, merged by the combine
      spec.kv_lens[8] = 64;
      spec.kv_lens[9] = 65;
      spec.s_q = s_q;
      spec.format = KvFormat::bf16;
      spec.dist = Distribution::peaked;
      spec.page_size = page;
      spec.seed = 61 + page + s_q;
      spec.spare_rows = 64;
      GpuResult r;
      ASSERT_NO_FATAL_FAILURE(run_case(spec, &r, true, /*walking=*/true));
      EXPECT_TRUE(r.cmp.ok()) << spec.name() << ": " << r.cmp.summary() << " | " << describe(r.plan);
      EXPECT_EQ(r.cmp.nonfinite, 0) << spec.name();
      EXPECT_TRUE(r.guards_ok) << spec.name();
      EXPECT_LT(r.plan.grid, r.plan.num_work_items) << "each CTA should walk several items | " << describe(r.plan);
      EXPECT_GT(r.plan.num_split_requests, 0) << describe(r.plan);
      std::printf("  %-48s %s | %d items on %d CTAs\n", spec.name().c_str(), r.cmp.summary().c_str(),
                  r.plan.num_work_items, r.plan.grid);
    }
  }
}

// A walking grid whose even-share list leaves the CTAs uneven (perf-notes v119): ragged requests of up
// to 8192 tokens, 200 of them (as `mla bench --ragged` draws them), cut at 92 tiles they make 249
// items in two rounds; bf16's walking path cuts them finer, into more items, more of them split (v119's
// walking_work_list, and since v120 balanced_work_list's own scan, pick the same 67-tile cut). Since
// v134 plan() runs ragged batches a CTA per item, so the walking plan here is prepare_walking's (the
// walking path, plan()'s before). Contiguous and pages of 16, 1 and 2 query tokens per request,
// peaked inputs, against the reference.
TEST(GpuDecode, Bf16WalkingListCutForEvenCtas) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  struct Shape {
    int page, s_q;
  };
  for (Shape sh : {Shape{0, 1}, Shape{16, 1}, Shape{0, 2}}) {
    const std::vector<std::int32_t> lens = ragged_lengths(200 / sh.s_q, 1, 8192);
    CaseSpec spec;
    spec.kv_lens = lens;
    spec.format = KvFormat::bf16;
    spec.dist = Distribution::peaked;
    spec.page_size = sh.page;
    spec.s_q = sh.s_q;
    spec.spare_rows = 64;
    spec.seed = 71 + sh.page + sh.s_q;
    GpuResult r;
    ASSERT_NO_FATAL_FAILURE(run_case(spec, &r, true, /*walking=*/true));
    const Plan& pl = r.plan;
    EXPECT_TRUE(r.cmp.ok()) << spec.name() << ": " << r.cmp.summary() << " | " << describe(pl);
    EXPECT_EQ(r.cmp.nonfinite, 0) << spec.name();
    EXPECT_TRUE(r.guards_ok) << spec.name();
    const std::vector<std::int32_t> rows = query_row_lengths(lens, sh.s_q);  // the plan's virtual requests
    const WorkList even = build_work_list(rows, pl.device_sms, 64);          // the even share per item
    EXPECT_LT(pl.grid, pl.num_work_items) << describe(pl);
    EXPECT_GT(pl.num_work_items, int(even.items.size())) << "the finer cut | " << describe(pl);
    EXPECT_LT(pl.tokens_per_split, even.tokens_per_split) << describe(pl);
  }
}

// bf16 batches whose lists leave SMs idle walk timelines (perf-notes v122): every CTA takes the end
// of one request and the start of the next through WorkItem::next. 72 requests of 1024 tokens,
// contiguous, 1 and 2 query tokens per request, and 68 of 1536 in pages of 16 (whole requests would
// have no TMA there: v133); 200 requests of 1024 (two walking rounds before); 68 of 4096, whose chains
// are long enough for the walking kernel's TMA copies (contiguous, pages of 64); peaked inputs, against
// the reference. The plan's list is checked to be chains from CTAs 0 .. grid − 1 that hold every item
// once.
TEST(GpuDecode, Bf16CtasWalkTheirTimelines) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  struct Shape {
    int batch, len, page, s_q;
  };
  for (Shape sh : {Shape{72, 1024, 0, 1}, Shape{68, 1536, 16, 1}, Shape{36, 1024, 0, 2}, Shape{200, 1024, 0, 1},
                   Shape{68, 4096, 0, 1}, Shape{68, 4096, 64, 1}}) {
    Plan pl;
    ASSERT_NO_FATAL_FAILURE(expect_correct_peaked(std::vector<std::int32_t>(std::size_t(sh.batch), sh.len),
                                                  KvFormat::bf16, sh.page, sh.s_q, 113 + sh.page + sh.s_q, &pl));
    EXPECT_LT(pl.grid, pl.num_work_items) << describe(pl);
    EXPECT_GT(pl.num_split_requests, 0) << describe(pl);
    ASSERT_TRUE(pl.host_work_list != nullptr);  // (the CUDA backend's: a std::vector<WorkItem>)
    const auto& items = *static_cast<const std::vector<WorkItem>*>(pl.host_work_list.get());
    std::vector<int> seen(items.size(), 0);
    bool linked = false;  // a chain that is not c, c + grid, …: the timelines' layout
    for (int c = 0; c < pl.grid; ++c) {
      for (int i = c; i >= 0; i = items[std::size_t(i)].next) {
        ASSERT_LT(std::size_t(i), items.size()) << describe(pl);
        ASSERT_EQ(seen[std::size_t(i)]++, 0) << "item " << i << " on two chains | " << describe(pl);
        if (i != c) {
          ASSERT_GE(i, pl.grid) << "a chain runs into another CTA's first item | " << describe(pl);
        }
        linked |= items[std::size_t(i)].next >= 0 && items[std::size_t(i)].next != i + pl.grid;
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), std::ptrdiff_t(items.size())) << describe(pl);
    EXPECT_TRUE(linked) << describe(pl);
    // A longest chain of at least kTmaMinChainTilesBf16 tiles (200 × 1024: 25; 68 × 4096: ~34) copies
    // whole tiles by TMA (v123), contiguous or in pages of 64 rows; 72 × 1024's and 68 × 1536's (≤ 13)
    // by cp.async.
    EXPECT_EQ(pl.kv_tma, sh.len == 4096 || sh.batch == 200) << describe(pl);
  }
}

// bf16 batches of more requests than half the SMs but at most 64 % of them, each of 24 tiles or more,
// run every request whole on a CTA of its own, copied by TMA, where the measured model says so
// (perf-notes v133): 68 and 70 requests of 1536 tokens, contiguous and in pages of 64, and 34 of 1600
// with 2 query tokens each (68 rows of 1599 and 1600 keys); peaked inputs, against the reference.
TEST(GpuDecode, Bf16WholeRequestsByTma) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  struct Shape {
    int batch, len, page, s_q;
  };
  for (Shape sh : {Shape{68, 1536, 0, 1}, Shape{70, 1536, 64, 1}, Shape{34, 1600, 0, 2}}) {
    Plan pl;
    ASSERT_NO_FATAL_FAILURE(expect_correct_peaked(std::vector<std::int32_t>(std::size_t(sh.batch), sh.len),
                                                  KvFormat::bf16, sh.page, sh.s_q, 131 + sh.page + sh.s_q, &pl));
    const int rows = sh.batch * sh.s_q;
    EXPECT_EQ(pl.num_work_items, rows) << describe(pl);
    EXPECT_EQ(pl.grid, rows) << describe(pl);
    EXPECT_EQ(pl.num_split_requests, 0) << describe(pl);
    EXPECT_TRUE(pl.kv_tma) << describe(pl);
  }
}

TEST(GpuDecode, PagedShuffledPages) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (int page : {1, 16, 64}) {
      for (bool flat : {false, true}) {
        if (flat && page != 1) continue;
        CaseSpec spec;
        spec.kv_lens = {300, 0, 1, 64, 65, 1500, 17};
        spec.format = f;
        spec.dist = Distribution::peaked;
        spec.page_size = page;
        spec.flat_page_table = flat;
        spec.seed = 31 + page;
        spec.spare_rows = 128;
        expect_correct(spec);
      }
    }
  }
}

// Pages laid out in order (`mla bench --page-order in-order`): request b's pages follow one another and
// request b + 1's follow them, so a tile's rows are consecutive rows of the cache, as a contiguous
// cache's, yet reach the kernels through the page table. A kernel that took such rows as one run must
// stop at the request's end (the next rows are the next request's keys: peaked inputs tell them
// apart) and at the cache's end (NaN spare rows).
TEST(GpuDecode, PagedPagesInOrder) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (int page : {1, 16, 64}) {
      CaseSpec spec;
      spec.kv_lens = {300, 0, 1, 64, 65, 1500, 17, 4100};
      spec.format = f;
      spec.dist = Distribution::peaked;
      spec.page_size = page;
      spec.pages_in_order = true;
      spec.seed = 41 + page;
      spec.spare_rows = 128;
      expect_correct(spec);
    }
  }
}

TEST(GpuDecode, Mxfp4ScaleStrides18And24BothRoundings) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (std::int64_t stride : {18, 24}) {
    for (Mxfp4Rounding rnd : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
      CaseSpec spec;
      spec.kv_lens = {777, 64, 4000};
      spec.format = KvFormat::mxfp4;
      spec.dist = Distribution::peaked;
      spec.scale_stride = stride;
      spec.rounding = rnd;
      spec.seed = 3 + stride;
      spec.spare_rows = 64;  // NaN spare rows, and 0xFF (NaN) in scale columns 18..23 for stride 24
      expect_correct(spec);
    }
  }
}

// MXFP4 scales far apart inside one warp's 16 tokens and inside one row (the quantizer never
// makes these from smooth data): the kernel expresses every block scale relative to the largest
// E8M0 byte of the warp's tokens. Blocks 2^27 apart, and some at 2^-127 (byte 0), must still
// match the reference over exactly these bytes.
TEST(GpuDecode, Mxfp4WideScaleSpread) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (std::int64_t stride : {18, 24}) {
    CaseSpec spec;
    spec.kv_lens = {1500, 64, 777, 4096};
    spec.format = KvFormat::mxfp4;
    spec.scale_stride = stride;
    spec.seed = 91 + stride;
    spec.spare_rows = 64;  // the padding scale columns stay 0xFF (NaN): only blocks 0..17 are rewritten
    HostInputs in = make_inputs(spec);
    std::uint64_t x = 0x9E3779B97F4A7C15ull + std::uint64_t(stride);
    for (std::int64_t row = 0; row < in.kv_indptr.back(); ++row) {  // the spare rows keep their NaN scales
      for (int b = 0; b < kHeadDim / 32; ++b) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const std::uint8_t byte = (x >> 58) == 0 ? 0 : std::uint8_t(100 + (x >> 33) % 28);  // 2^-27 .. 2^0
        in.kv_scales[std::size_t(row * stride + b)] = byte;
      }
    }
    expect_correct_inputs(in, spec.name() + " wide scales");
  }
}

// Logits whose maximum climbs through the request (climb_kv: KV rows scaled by up to 2^16): the
// running max moves a little (within the wgmma kernels' slack: weights above 1) or a lot (past it:
// the exact path) from tile to tile; one request falls instead (the first tile holds the max).
TEST(GpuDecode, ClimbingLogitsMoveTheRunningMax) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    const HostInputs in = climbing_inputs(f);
    expect_correct_inputs(in, in.spec.name() + " climbing logits");
  }
}

TEST(GpuDecode, WithoutLse) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (int b : {8, 2, two_piece_rows(f)}) {  // split rows by the combine (8, 2) and in clusters of 2
      CaseSpec spec = CaseSpec::uniform(b, b == two_piece_rows(f) ? 1000 : 3000, f);
      spec.dist = Distribution::peaked;
      Plan plan;
      ASSERT_NO_FATAL_FAILURE(expect_correct(spec, /*with_lse=*/false, &plan));
      EXPECT_GT(plan.num_split_requests, 0) << describe(plan);
      EXPECT_EQ(plan.cluster_size, b == two_piece_rows(f) ? 2 : 0) << describe(plan);
    }
  }
}

// MXFP4's wider scale stride in the paged layouts and with several query tokens (the stride's own
// test runs contiguous caches).
TEST(GpuDecode, Mxfp4Stride24PagedAndMultiToken) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (int ps : {1, 16, 64}) {
    for (int s_q : {1, 2}) {
      CaseSpec spec;
      spec.kv_lens = ragged_lengths(6, 71 + std::uint64_t(ps), 900);
      spec.format = KvFormat::mxfp4;
      spec.scale_stride = 24;
      spec.page_size = ps;
      spec.flat_page_table = ps == 1;
      spec.s_q = s_q;
      spec.dist = Distribution::peaked;
      spec.spare_rows = 20;  // NaN rows, page tails and scale columns 18..23
      expect_correct(spec);
    }
  }
}

// A NaN in a KV row that a request reads reaches that request's output or LSE (what makes the NaN
// rows, padding and guards of the other tests catch a stray read), and no other request's.
TEST(GpuDecode, NanInAReadRowReachesItsRequestOnly) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    CaseSpec spec;
    spec.kv_lens = {300, 300};
    spec.format = f;
    HostInputs in = make_inputs(spec);
    GpuResult clean;
    ASSERT_NO_FATAL_FAILURE(run_inputs(in, &clean));
    plant_read_nan(&in, 10);  // request 0's token 10 (contiguous: physical row 10)
    GpuResult poisoned;
    ASSERT_NO_FATAL_FAILURE(run_inputs(in, &poisoned));
    const std::size_t per_request = std::size_t(kNumHeads) * kValueDim;
    std::int64_t nan0 = 0;
    for (std::size_t i = 0; i < per_request; ++i) nan0 += std::isnan(bf16_to_float(poisoned.out[i])) ? 1 : 0;
    for (int h = 0; h < kNumHeads; ++h) nan0 += std::isnan(poisoned.lse[std::size_t(h)]) ? 1 : 0;
    EXPECT_GT(nan0, 0) << to_string(f) << ": request 0 read a NaN and neither its output nor its LSE has one";
    EXPECT_EQ(0, std::memcmp(clean.out.data() + per_request, poisoned.out.data() + per_request, per_request * 2))
        << to_string(f) << ": request 1 changed";
    EXPECT_EQ(0, std::memcmp(clean.lse.data() + kNumHeads, poisoned.lse.data() + kNumHeads, kNumHeads * sizeof(float)))
        << to_string(f) << ": request 1's LSE changed";
  }
}

// Row pairs: a NaN in a request's last key reaches its last q row only — the first row of the pair
// does not see that key, and its output and LSE are bit for bit those of a clean run. bf16's pair
// kernel takes that key's V out of the first row's P·V; fp8's zeroes the key's NaN V bytes after Sᵀ;
// MXFP4's takes a row with a NaN scale as zero bytes and gives the second row NaN itself
// (docs/design.md, "Row pairs"). The NaN: plant_read_nan's for bf16 (element 5) and fp8 (dim 5),
// for MXFP4 a NaN scale of block `mxfp4_block` alone (plant_read_nan's MXFP4 NaN also rewrites the
// first row's Q, which this test must leave alone).
void expect_last_key_hidden_from_first_row(KvFormat f, int len, int mxfp4_block = 0, int batch = 67) {
  CaseSpec spec = CaseSpec::uniform(batch, len, f);  // 134 rows of over 4,160 keys: pairs
  spec.s_q = 2;
  HostInputs in = make_inputs(spec);
  GpuResult clean;
  ASSERT_NO_FATAL_FAILURE(run_inputs(in, &clean));
  ASSERT_EQ(clean.plan.rows_per_item, 2) << describe(clean.plan);
  if (f == KvFormat::mxfp4) {  // request 0's last key (contiguous: physical row len − 1)
    in.kv_scales[std::size_t(std::int64_t(len - 1) * in.spec.scale_stride + mxfp4_block)] = 0xFF;
  } else {
    plant_read_nan(&in, len - 1);
  }
  GpuResult poisoned;
  ASSERT_NO_FATAL_FAILURE(run_inputs(in, &poisoned));
  const std::size_t per_row = std::size_t(kNumHeads) * kValueDim;
  EXPECT_EQ(0, std::memcmp(clean.out.data(), poisoned.out.data(), per_row * 2)) << "q row 0 changed";
  EXPECT_EQ(0, std::memcmp(clean.lse.data(), poisoned.lse.data(), kNumHeads * sizeof(float))) << "q row 0's LSE";
  std::int64_t nan1 = 0;
  for (std::size_t i = per_row; i < 2 * per_row; ++i) nan1 += std::isnan(bf16_to_float(poisoned.out[i])) ? 1 : 0;
  EXPECT_GT(nan1, 0) << "q row 1 sees the NaN key and its output has no NaN";
  EXPECT_EQ(0, std::memcmp(clean.out.data() + 2 * per_row, poisoned.out.data() + 2 * per_row,
                           (poisoned.out.size() - 2 * per_row) * 2))
      << "another request changed";
}
TEST(GpuDecode, Bf16RowPairsHideTheLastKeyFromTheFirstRow) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (int len : {4161, 4166, 4172}) {  // the last key at token 0, 5, 11 of its tile
    SCOPED_TRACE(len);
    ASSERT_NO_FATAL_FAILURE(expect_last_key_hidden_from_first_row(KvFormat::bf16, len));
  }
}
// fp8 and MXFP4 pairs: 128-token tiles, the last key in either warpgroup's half.
TEST(GpuDecode, Fp8AndMxfp4RowPairsHideTheLastKeyFromTheFirstRow) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (int len : {4161, 4166, 4230, 4288}) {
    SCOPED_TRACE(len);
    ASSERT_NO_FATAL_FAILURE(expect_last_key_hidden_from_first_row(KvFormat::fp8, len));
    ASSERT_NO_FATAL_FAILURE(expect_last_key_hidden_from_first_row(KvFormat::mxfp4, len, 3));   // a V block
    ASSERT_NO_FATAL_FAILURE(expect_last_key_hidden_from_first_row(KvFormat::mxfp4, len, 17));  // a rope block
  }
  // Items of one 128-token tile: the one-tile pair kernels.
  ASSERT_NO_FATAL_FAILURE(expect_last_key_hidden_from_first_row(KvFormat::fp8, 100, 0, 800));
  ASSERT_NO_FATAL_FAILURE(expect_last_key_hidden_from_first_row(KvFormat::mxfp4, 100, 3, 800));
}

// A NaN in Q makes every partial of its split row NaN: the merge (combine kernels, clusters) must
// pass it on rather than read the row as empty.
TEST(GpuDecode, NanInQReachesASplitRow) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (int b : {2, two_piece_rows(f)}) {  // rows split many times (combine) and in two (clusters)
      CaseSpec spec = CaseSpec::uniform(b, b == 2 ? 8192 : 1000, f);
      HostInputs in = make_inputs(spec);
      in.q[7] = 0xFFFF;  // request 0, head 0, dim 7: NaN
      GpuResult r;
      ASSERT_NO_FATAL_FAILURE(run_inputs(in, &r));
      ASSERT_GT(r.plan.num_split_requests, 0) << describe(r.plan);
      ASSERT_EQ(r.plan.cluster_size, b == 2 ? 0 : 2) << describe(r.plan);
      EXPECT_TRUE(std::isnan(r.lse[0])) << to_string(f) << " b" << b << ": " << describe(r.plan);
      EXPECT_TRUE(std::isnan(bf16_to_float(r.out[0]))) << to_string(f) << " b" << b;
      EXPECT_TRUE(std::isfinite(r.lse[kNumHeads])) << "request 1";
    }
  }
}

TEST(GpuDecode, AllRequestsEmpty) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  CaseSpec spec;
  spec.kv_lens = {0, 0, 0};
  spec.format = KvFormat::fp8;
  spec.spare_rows = 16;
  GpuResult r;
  ASSERT_NO_FATAL_FAILURE(run_case(spec, &r));
  for (std::uint16_t v : r.out) ASSERT_EQ(v & 0x7FFF, 0) << "empty request must output zeros";
  for (float l : r.lse) ASSERT_TRUE(std::isinf(l) && l < 0) << "empty request must have LSE -inf";
}

// Both merge paths: the ragged case splits rows many times (combine kernel), the uniform one in two
// (clusters of 2).
TEST(GpuDecode, TwoRunsBitIdenticalAndGraphReplayMatches) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (bool clustered : {false, true}) {
      CaseSpec spec = clustered ? CaseSpec::uniform(two_piece_rows(f), 128, f) : CaseSpec{};
      if (!clustered) spec.kv_lens = {8191, 1, 300, 4096, 65};
      spec.format = f;
      spec.dist = Distribution::peaked;
      const HostInputs in = make_inputs(spec);
      GpuCase gc;
      Plan pl;
      ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &pl));
      ASSERT_GT(pl.num_split_requests, 0) << "the case must split rows";
      ASSERT_EQ(pl.cluster_size, clustered ? 2 : 0) << describe(pl);
      Outputs r1, r2, r3;
      ASSERT_NO_FATAL_FAILURE(run_outputs(gc, pl, &r1));
      ASSERT_NO_FATAL_FAILURE(run_outputs(gc, pl, &r2));
      ASSERT_NO_FATAL_FAILURE(run_outputs(gc, pl, &r3, 3));
      expect_identical(r1, r2, std::string(to_string(f)) + ": two runs differ");
      expect_identical(r1, r3, std::string(to_string(f)) + ": graph replay differs");
      const Comparison cmp = against_reference(in, r1.out, r1.lse);
      EXPECT_TRUE(cmp.ok()) << cmp.summary();
    }
  }
}

// Work lists of up to 64 items travel in the launch parameters as well (DecodeParams::param_items,
// perf-notes v80). A copy of the plan without its host work list makes the kernels read the
// workspace instead, and the two runs must be bit-identical and match the reference. The shapes are
// 4 × 1024 (64 one-tile items) and a paged ragged batch (16 items), in every format.
TEST(GpuDecode, WorkListInParametersMatchesWorkspace) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (bool paged : {false, true}) {
      CaseSpec spec = CaseSpec::uniform(4, 1024, f);
      if (paged) {
        spec.kv_lens = {700, 5, 64, 0, 129};
        spec.page_size = 16;
        spec.spare_rows = 64;
      }
      spec.seed = 91 + int(paged);
      const HostInputs in = make_inputs(spec);
      GpuCase gc;
      Plan pl;
      ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &pl));
      ASSERT_LE(pl.num_work_items, 64) << describe(pl);
      ASSERT_NE(pl.host_work_list, nullptr);
      Plan from_workspace = pl;
      from_workspace.host_work_list.reset();
      expect_plans_agree(gc, in, pl, from_workspace, spec.name() + ": params vs workspace work list");
    }
  }
}

// The KV's L2 policy (Plan::kv_evict_first, perf-notes v94) changes speed only: plan() picks
// evict-first for these small calls, and runs with the flag flipped are bit-identical to it and
// match the reference. Contiguous and paged by 64 rows (whole-tile copies)
// and by 16 rows (row-by-row copies), through the general kernels and the one-tile ones.
TEST(GpuDecode, KvL2PolicyChangesNoResult) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (int page : {0, 64, 16}) {
      CaseSpec spec;
      spec.kv_lens = {3000, 700, 129, 64, 0};
      spec.format = f;
      spec.page_size = page;
      spec.spare_rows = page > 0 ? 64 : 0;
      spec.seed = 131 + page;
      const HostInputs in = make_inputs(spec);
      GpuCase gc;
      Plan pl;
      ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &pl));
      EXPECT_TRUE(pl.kv_evict_first) << describe(pl);
      Plan flipped = pl;
      flipped.kv_evict_first = !pl.kv_evict_first;
      expect_plans_agree(gc, in, pl, flipped, spec.name() + ": the two L2 policies");
    }
  }
}

// Whole tiles by TMA (Plan::kv_tma; fp8: perf-notes v113, bf16: v115, v116): plan() picks it when every
// work item streams at least 64 tiles (fp8) or 24 (bf16) (here 132 rows of 8192 tokens: fp8 splits each in two 64-tile
// items merged in clusters of 2, bf16 takes each whole), and the run matches the reference and is bit-identical to the
// cp.async kernel's.
TEST(GpuDecode, LongItemsCopyWholeTilesByTma) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : {KvFormat::fp8, KvFormat::bf16}) {
    CaseSpec spec = CaseSpec::uniform(132, 8192, f);
    spec.dist = Distribution::peaked;
    spec.spare_rows = 64;  // NaN rows past the last request: a tile read past its item poisons it
    spec.seed = 113;
    const HostInputs in = make_inputs(spec);
    GpuCase gc;
    Plan pl;
    ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &pl));
    EXPECT_TRUE(pl.kv_tma) << describe(pl);
    EXPECT_NE(describe(pl).find("kv_copy=tma"), std::string::npos) << describe(pl);
    EXPECT_GE(pl.tokens_per_split, 64 * (f == KvFormat::fp8 ? kTmaMinTilesFp8 : kTmaMinTilesBf16)) << describe(pl);
    Plan copies = pl;
    copies.kv_tma = false;
    expect_plans_agree(gc, in, pl, copies, spec.name() + ": TMA and cp.async copies");
  }
}

// More query rows than one wave of decode slots, of long requests: plan() keeps the longest whole
// for the full wave and cuts the rest (the tail) into pieces that fill the slots its second wave
// would leave idle (balanced_work_list, perf-notes v117), merged by the combine. Per format,
// contiguous and in pages of 16 rows, one and two query tokens, a few shorter requests among them
// (partial tiles); the reference checks every request.
// The SMs plan() counts on this device (Plan::device_sms).
void planned_sms(int* sms) {
  CaseSpec tiny = CaseSpec::uniform(1, 64, KvFormat::bf16);
  const HostInputs in = make_inputs(tiny);
  GpuCase gc;
  Plan pl;
  ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &pl));
  *sms = pl.device_sms;
}

// cuda::plan_and_list and plan_with_list (the measurement tool's entries, bench/pace/list_bench.cpp): the
// plan's own list on its grid gives plan()'s output bit for bit; other lists of the rows — every request
// whole on a CTA each, and for bf16 the same walked by 40 CTAs — match the reference; a list that misses
// a token or a row (an empty request's item), broken chains, and a walking grid for fp8 are refused.
TEST(GpuDecode, PlanWithListRunsTheGivenList) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    CaseSpec spec;
    spec.kv_lens = ragged_lengths(96, 5, 2048);
    spec.format = f;
    spec.spare_rows = 64;
    const HostInputs in = make_inputs(spec);
    GpuCase gc;
    ASSERT_NO_FATAL_FAILURE(prepare(in, &gc));
    const Problem& p = gc.problem();
    const std::vector<std::int32_t>& lens = spec.kv_lens;
    Plan own;
    WorkList mine;
    int mine_grid = -1;
    Status s = cuda::plan_and_list(p, gc.ws.get(), gc.ws.size(), &own, &mine, &mine_grid);
    ASSERT_TRUE(s.ok()) << s.message;
    Plan same;
    s = cuda::plan_with_list(p, mine, lens, mine_grid, gc.ws.get(), gc.ws.size(), &same);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(same.num_work_items, own.num_work_items) << describe(same);
    EXPECT_EQ(same.grid, own.grid) << describe(same);
    ASSERT_NO_FATAL_FAILURE(expect_plans_agree(gc, in, own, same, spec.name() + " own list"));
    WorkList whole = build_work_list(lens, int(lens.size()), 64);
    ASSERT_NO_FATAL_FAILURE(expect_list_matches(gc, in, whole, 0, std::nullopt, spec.name() + " whole"));
    WorkList walked = whole;
    walk_order(walked.items, 40, 64);
    Plan pl;
    if (f == KvFormat::bf16) {
      ASSERT_NO_FATAL_FAILURE(expect_list_matches(gc, in, walked, 40, std::nullopt, spec.name() + " walked by 40"));
      WorkList broken = walked;
      broken.items[50].next = 50;
      EXPECT_EQ(cuda::plan_with_list(p, broken, lens, 40, gc.ws.get(), gc.ws.size(), &pl).code,
                StatusCode::invalid_argument);
    } else {
      EXPECT_EQ(cuda::plan_with_list(p, walked, lens, 40, gc.ws.get(), gc.ws.size(), &pl).code,
                StatusCode::unsupported);
    }
    // A list that misses a request's last token, and one without an empty request's item.
    WorkList shorter = whole;
    shorter.items.front().kv_end -= 1;
    EXPECT_EQ(cuda::plan_with_list(p, shorter, lens, 0, gc.ws.get(), gc.ws.size(), &pl).code,
              StatusCode::invalid_argument);
    ASSERT_EQ(whole.items.back().kv_end, 0);  // (longest first: the empty requests' items last)
    whole.items.pop_back();
    EXPECT_EQ(cuda::plan_with_list(p, whole, lens, 0, gc.ws.get(), gc.ws.size(), &pl).code,
              StatusCode::invalid_argument);
  }
}

// plan_with_list takes any cut of the rows, not only the planner's tile boundaries. Cut 1001 tokens off
// them, every tile of a paged cache but the first straddles two pages of 64 rows, and every group of
// 16 rows that one warp loads on pages of 16 (fp8, MXFP4) two pages, so no copy may take one as a
// single run of rows (KvRowMap::one_run), and bf16's 16-row-page kernels must take such tiles row by
// row: every format, pages of 16 and 64 rows, the TMA kernels
// forced on and off, and bf16's walking kernel. Pages of 1 row: items of 16 tiles that start and end
// off tile boundaries in the kernels of 1-row pages (MXFP4's row table among them).
TEST(GpuDecode, ListCutOffTileBoundariesOnPagedCaches) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  constexpr int kPiece = 1001;  // odd: the later pieces start at 1001 and 2002, off every 8-row boundary
  for (KvFormat f : kFormats) {
    for (int page : {1, 16, 64}) {
      CaseSpec spec;
      spec.kv_lens.assign(12, 3000);
      spec.kv_lens[3] = 1000;  // one request whole: its tiles start on pages
      spec.format = f;
      spec.page_size = page;
      spec.spare_rows = 64;
      const HostInputs in = make_inputs(spec);
      GpuCase gc;
      ASSERT_NO_FATAL_FAILURE(prepare(in, &gc));
      const std::vector<std::int32_t>& lens = spec.kv_lens;
      WorkList cut;  // every request in pieces of kPiece tokens
      cut.splits.assign(lens.size(), RequestSplit{0, 0});
      for (int b = 0; b < int(lens.size()); ++b) {
        const int len = lens[std::size_t(b)], n = (len + kPiece - 1) / kPiece;
        if (n == 1) {
          cut.items.push_back({b, 0, len, -1});
          continue;
        }
        cut.splits[std::size_t(b)] = {cut.num_partials, n};
        for (int k = 0; k < n; ++k)
          cut.items.push_back({b, kPiece * k, std::min(len, kPiece * (k + 1)), cut.num_partials++});
      }
      ASSERT_TRUE(
          std::any_of(cut.items.begin(), cut.items.end(), [](const WorkItem& it) { return it.kv_begin % 8 != 0; }));
      for (bool tma : {false, true}) {
        const std::string what =
            spec.name() + " cut at " + std::to_string(kPiece) + " tokens, kv_tma " + (tma ? "on" : "off");
        ASSERT_NO_FATAL_FAILURE(expect_list_matches(gc, in, cut, 0, tma, what));
        if (f == KvFormat::bf16) {
          WorkList walked = cut;
          walk_order(walked.items, 8, 64);
          ASSERT_NO_FATAL_FAILURE(expect_list_matches(gc, in, walked, 8, tma, what + ", walked by 8"));
        }
      }
    }
  }
}

// bf16's walking kernel on pages of 1 row (a row table, perf-notes v156): each tile's copies take their
// rows from a table filled a tile ahead — this item's tile t + 3, or the next item's tiles 0..2 under this
// item's last three — and look them up directly where the tile is the item after next's (the next item
// holds ≤ 2 tiles). Pieces of 1, 64, 100, 129, 150, 700 and 1001 tokens, off tile boundaries, walked by
// `grid` CTAs, so that chains hold short items between long ones; peaked inputs. (GpuSanitizer.SmallSuite
// runs it too.)
void expect_walked_pieces_match(int grid) {
  CaseSpec spec;
  spec.kv_lens = {3000, 130, 64, 700, 1, 2000, 129, 65, 900, 200, 1500, 2};
  spec.format = KvFormat::bf16;
  spec.page_size = 1;
  spec.spare_rows = 64;
  spec.dist = Distribution::peaked;
  spec.seed = 91;
  const HostInputs in = make_inputs(spec);
  GpuCase gc;
  ASSERT_NO_FATAL_FAILURE(prepare(in, &gc));
  constexpr int kPieces[] = {1001, 100, 64, 150, 700, 1, 129};
  WorkList list;
  list.splits.assign(spec.kv_lens.size(), RequestSplit{0, 0});
  int next_piece = 0;
  for (int b = 0; b < int(spec.kv_lens.size()); ++b) {
    const int len = spec.kv_lens[std::size_t(b)];
    std::vector<std::pair<int, int>> ranges;
    for (int begin = 0; begin < len || ranges.empty();) {
      const int end = std::min(len, begin + kPieces[next_piece++ % std::size(kPieces)]);
      ranges.emplace_back(begin, end);
      begin = end;
    }
    if (ranges.size() == 1) {
      list.items.push_back({b, 0, len, -1});
      continue;
    }
    list.splits[std::size_t(b)] = {list.num_partials, int(ranges.size())};
    for (auto [begin, end] : ranges) list.items.push_back({b, begin, end, list.num_partials++});
  }
  ASSERT_TRUE(std::any_of(list.items.begin(), list.items.end(),
                          [](const WorkItem& it) { return it.kv_end - it.kv_begin <= 128; }));
  walk_order(list.items, grid, 64);
  ASSERT_NO_FATAL_FAILURE(expect_list_matches(
      gc, in, list, grid, false,
      spec.name() + ", " + std::to_string(list.items.size()) + " pieces walked by " + std::to_string(grid)));
}

TEST(GpuDecode, WalkingRowTableFollowsTheWalk) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (int grid : {4, 8}) ASSERT_NO_FATAL_FAILURE(expect_walked_pieces_match(grid));
}

TEST(GpuDecode, TailRequestsCutToFillTheLastWave) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  int sms = 0;
  ASSERT_NO_FATAL_FAILURE(planned_sms(&sms));
  struct Shape {
    int page, s_q;
  };
  for (KvFormat f : kFormats) {
    const int slots = sms * (f == KvFormat::bf16 ? 1 : 2), rows = slots + slots / 6;
    for (Shape sh : {Shape{0, 1}, Shape{16, 1}, Shape{0, 2}}) {
      std::vector<std::int32_t> lens(std::size_t(rows / sh.s_q), 2048);
      for (std::size_t b = 5; b < lens.size(); b += 41) lens[b] = 1999 - int(b);
      Plan pl;
      ASSERT_NO_FATAL_FAILURE(expect_correct_peaked(lens, f, sh.page, sh.s_q, 331 + sh.page + sh.s_q, &pl));
      // The tail (about a sixth of the rows) is cut, the rest stays whole. (Row pairs, s_q 2: a
      // CTA per SM takes the pairs, timelines over them: every pair may be cut, but more items than pairs.)
      if (pl.rows_per_item == 2) {
        EXPECT_GT(pl.num_work_items, rows / 2) << describe(pl);
        continue;
      }
      EXPECT_GT(pl.num_split_requests, 0) << describe(pl);
      EXPECT_LE(pl.num_split_requests, rows - slots + 1) << describe(pl);
      EXPECT_GT(pl.num_work_items, rows) << describe(pl);
    }
  }
}

// A ragged batch of about a wave's size (perf-notes v120): a wave's worth of requests of up to 2048
// tokens (bf16: SMs − 4, fp8 and MXFP4: 2 × SMs − 8), every request cut into more items than one wave
// holds (bf16: a CTA per item since v134, walked before), contiguous and pages of 16, peaked inputs,
// against the reference.
TEST(GpuDecode, RaggedBatchOfAWaveCutBeyondOneWave) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  int sms = 0;
  ASSERT_NO_FATAL_FAILURE(planned_sms(&sms));
  for (KvFormat f : kFormats) {
    const int slots = sms * (f == KvFormat::bf16 ? 1 : 2), batch = slots - slots / 33;
    for (int page : {0, 16}) {
      Plan pl;
      ASSERT_NO_FATAL_FAILURE(expect_correct_peaked(ragged_lengths(batch, 1, 2048), f, page, 1, 97 + page, &pl));
      EXPECT_GT(pl.num_work_items, slots) << describe(pl);
      EXPECT_GT(pl.num_split_requests, 0) << describe(pl);
      EXPECT_EQ(pl.grid, pl.num_work_items) << describe(pl);
    }
  }
}

// bf16's ragged batches (perf-notes v134): fp8's simulated launch picks the list, a CTA per item, never
// walked — 96 requests of up to 4096 tokens, contiguous; 128 of up to 2048 in pages of 16; 48 of up
// to 8192 with 2 query tokens each (since v141 row pairs: their rows hold over 32 tiles per SM, and
// the pair list has a CTA per item too); peaked inputs, against the reference.
TEST(GpuDecode, Bf16RaggedBatchesRunACtaPerItem) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  struct Shape {
    int batch, max_len, seed, page, s_q;
  };
  for (Shape sh : {Shape{96, 4096, 4, 0, 1}, Shape{128, 2048, 8, 16, 1}, Shape{48, 8192, 5, 0, 2}}) {
    const std::vector<std::int32_t> lens = ragged_lengths(sh.batch, std::uint64_t(sh.seed), sh.max_len);
    ASSERT_TRUE(ragged_batch(lens, sh.batch * sh.s_q));
    Plan pl;
    ASSERT_NO_FATAL_FAILURE(expect_correct_peaked(lens, KvFormat::bf16, sh.page, sh.s_q, 151 + sh.page + sh.s_q, &pl));
    EXPECT_EQ(pl.grid, pl.num_work_items) << describe(pl);
    EXPECT_EQ(describe(pl).find("kernel=walking"), std::string::npos) << describe(pl);
    EXPECT_EQ(pl.rows_per_item, sh.s_q == 2 ? 2 : 1) << describe(pl);
  }
}

// The TMA kernel where plan() would not pick it (the flag set by the caller), in each format's
// general kernel and bf16's walking one: fp8 with 280 requests (more than its 264 slots, so items of
// up to 5 tiles, not one-tile ones), bf16 with 32 (general) and 300 (walking: chains of short items,
// the next item's first tiles by TMA under the previous item's last; where plan() takes the TMA
// itself, the flag is cleared instead);
// empty and one-token requests, partial last tiles, items that start at odd cache rows (fp8's go row
// by row, bf16's map is over rows), pages of 64 rows (whole tiles by TMA) and 16 rows (row by row),
// padded rows (fp8: the cp.async kernel; bf16: by TMA, the map's row stride), 2 and 3 query tokens
// per request (items cut to each token's causal length; fp8's 2 run row pairs, whose kernel copies by
// cp.async whatever the flag, so fp8's one-row TMA kernel with several query tokens is the 3's), and
// both L2 policies: every run bit-identical to plan()'s and matching the reference.
TEST(GpuDecode, KvTmaChangesNoResult) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  struct Shape {
    int page, padding, s_q;
  };
  struct Format {
    KvFormat f;
    int batch;
    const char* kernel;
  };
  for (Format fm : {Format{KvFormat::fp8, 280, "kernel=general"}, Format{KvFormat::bf16, 32, "kernel=general"},
                    Format{KvFormat::bf16, 300, "kernel=walking"}}) {
    const KvFormat f = fm.f;
    for (Shape sh :
         {Shape{0, 0, 1}, Shape{64, 0, 1}, Shape{16, 0, 1}, Shape{0, 32, 1}, Shape{0, 0, 2}, Shape{64, 0, 3}}) {
      CaseSpec spec;
      const std::int32_t lens[] = {1001, 700, 129, 320, 0, 200, 64, 1};  // from row 1001 on, starts odd and even
      for (int b = 0; b < fm.batch; ++b) spec.kv_lens.push_back(lens[b % 8]);
      spec.format = f;
      spec.dist = Distribution::peaked;
      spec.page_size = sh.page;
      spec.row_padding = sh.padding;
      spec.s_q = sh.s_q;
      spec.spare_rows = 64;
      spec.seed = 211 + sh.page + sh.padding + sh.s_q;
      const HostInputs in = make_inputs(spec);
      GpuCase gc;
      Plan pl;
      if (fm.batch == 300) {  // (ragged: since v134 plan() gives it a CTA per item; walked here)
        ASSERT_NO_FATAL_FAILURE(prepare_walking(in, &gc, &pl));
      } else {
        ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &pl));
      }
      EXPECT_NE(describe(pl).find(fm.kernel), std::string::npos) << describe(pl);
      // plan() copies the general kernels' short items by cp.async; the walking grid's longest chain
      // may reach kTmaMinChainTilesBf16 (3 query tokens per request: ~32 tiles per CTA), and then
      // the other copy path is cp.async.
      if (fm.batch != 300) {
        EXPECT_FALSE(pl.kv_tma) << describe(pl);
      }
      for (bool evict_first : {false, true}) {
        Plan other = pl;
        other.kv_tma = !pl.kv_tma;
        other.kv_evict_first = evict_first;
        const Plan& tma = pl.kv_tma ? pl : other;
        if (pl.rows_per_item == 2) {
          EXPECT_NE(describe(tma).find("kv_copy=cp.async"), std::string::npos) << describe(tma);
        } else if (f == KvFormat::bf16 || sh.padding == 0) {
          EXPECT_NE(describe(tma).find("kv_copy=tma"), std::string::npos) << describe(tma);
        }
        expect_plans_agree(gc, in, pl, other,
                           spec.name() + ": the other copy path, kv_l2 " + (evict_first ? "evict_first" : "normal"));
      }
    }
  }
}

// The TMA flag set where nothing can take it: a cache of fewer rows than a tile (run() encodes no map)
// whose items all fit one tile (the one-tile kernels have no TMA instantiation), in every format
// (MXFP4 has no TMA kernel at all): run() succeeds and the results are plan()'s.
TEST(GpuDecode, KvTmaOnTinyCachesAndMxfp4ChangesNoResult) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    CaseSpec spec;
    spec.kv_lens = {10, 33, 1};
    spec.format = f;
    spec.seed = 117;
    const HostInputs in = make_inputs(spec);
    ASSERT_LT(in.kv_rows, 64);
    GpuCase gc;
    Plan pl;
    ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &pl));
    EXPECT_FALSE(pl.kv_tma) << describe(pl);
    Plan tma = pl;
    tma.kv_tma = true;
    expect_plans_agree(gc, in, pl, tma, spec.name() + ": TMA flag on a tiny cache");
  }
}

// Malformed problems are rejected by plan() before anything is launched: the poisoned output
// stays NaN.
TEST(GpuDecode, MalformedInputsRejectedBeforeLaunch) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  CaseSpec spec;
  spec.kv_lens = {100, 200};
  spec.format = KvFormat::bf16;
  spec.page_size = 16;
  const HostInputs in = make_inputs(spec);
  HostInputs bad = in;
  bad.page_table[0] = std::int32_t(in.kv_rows / 16 + 5);  // a page outside the cache
  GpuCase gc;
  ASSERT_NO_FATAL_FAILURE(prepare(bad, &gc));
  const std::unique_ptr<DeviceCase>& dc = gc.dc;
  DeviceMemory& ws = gc.ws;
  ASSERT_TRUE(dc->poison_outputs().ok());
  Plan pl;
  Status s = plan(dc->problem(), Backend::cuda, ws.get(), ws.size(), &pl);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("page-table entry"), std::string::npos) << s.message;

  // Contents that only plan() sees (device memory): a decreasing kv_indptr; a request longer than
  // its page-table row (paged); a total past the cache's rows (contiguous).
  struct BadIndptr {
    int page_size;
    std::vector<std::int32_t> kv_indptr;
    const char* culprit;
  };
  for (const BadIndptr& c :
       {BadIndptr{16, {0, 150, 100}, "decreases"}, BadIndptr{16, {0, 100, 1 << 20}, "more than page_table_stride"},
        BadIndptr{0, {0, 100, 1 << 20}, "points past"}}) {
    CaseSpec layout = spec;
    layout.page_size = c.page_size;
    HostInputs worse = make_inputs(layout);
    worse.kv_indptr = c.kv_indptr;
    GpuCase gc2;
    ASSERT_NO_FATAL_FAILURE(prepare(worse, &gc2));
    s = plan(gc2.problem(), Backend::cuda, gc2.ws.get(), gc2.ws.size(), &pl);
    EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
    EXPECT_NE(s.message.find(c.culprit), std::string::npos) << s.message;
  }

  Problem p = dc->problem();
  p.kv_indptr = nullptr;
  EXPECT_EQ(plan(p, Backend::cuda, ws.get(), ws.size(), &pl).code, StatusCode::invalid_argument);
  p = dc->problem();
  p.q = reinterpret_cast<const std::uint16_t*>(reinterpret_cast<std::uintptr_t>(p.q) + 2);
  s = plan(p, Backend::cuda, ws.get(), ws.size(), &pl);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("16-byte"), std::string::npos) << s.message;

  std::vector<std::uint16_t> out;
  std::vector<float> lse;
  ASSERT_TRUE(dc->download(&out, &lse).ok());
  for (std::uint16_t v : out) ASSERT_EQ(v, 0xFFFF) << "an output was written although plan() failed";
}

// The small suite scripts/gpu_run.sh runs under compute-sanitizer memcheck and racecheck.
TEST(GpuSanitizer, SmallSuite) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    // Pages of 16 rows in each format (their kernels: bf16's and MXFP4's own, fp8's groups); pages of
    // 1 row as a flat kv_indices table in bf16 (its small-page kernels' L1 page-table prefetch; every
    // loop kernel's L2 one reaches the table's last entry) and MXFP4; contiguous bf16, fp8 pages of 64.
    const std::vector<int> pages =
        f == KvFormat::bf16 ? std::vector<int>{0, 1, 16} : std::vector<int>{f == KvFormat::fp8 ? 64 : 1, 16};
    for (int page : pages) {
      CaseSpec spec;
      spec.kv_lens = {0, 1, 65, 200, 700};
      spec.format = f;
      spec.dist = Distribution::peaked;
      spec.page_size = page;
      spec.flat_page_table = page == 1;
      spec.spare_rows = 64;
      expect_correct(spec);
    }
    // Rows split in two: merged in clusters of 2 (distributed shared memory) under the sanitizers too.
    CaseSpec pairs = CaseSpec::uniform(two_piece_rows(f), 128, f);
    pairs.seed = 77;
    pairs.dist = Distribution::peaked;
    GpuResult r;
    ASSERT_NO_FATAL_FAILURE(run_case(pairs, &r));
    EXPECT_TRUE(r.cmp.ok()) << pairs.name() << ": " << r.cmp.summary();
    EXPECT_EQ(r.plan.cluster_size, 2) << describe(r.plan);
  }
  // The row tables (fp8's of pages of 1 and 16 rows, MXFP4's and bf16's of pages of 1) over items of
  // several tiles: a tile's table is written while the copies or loads of the tile before are in flight
  // from the other buffer; MXFP4 with scale rows of 18 and of 24 bytes.
  struct TableCase {
    KvFormat format;
    int scale_stride, page;
  };
  for (const TableCase& tc :
       {TableCase{KvFormat::mxfp4, 18, 1}, TableCase{KvFormat::mxfp4, 24, 1}, TableCase{KvFormat::fp8, 18, 1},
        TableCase{KvFormat::fp8, 18, 16}, TableCase{KvFormat::bf16, 18, 1}}) {
    CaseSpec spec = CaseSpec::uniform(16, 4500, tc.format);
    spec.scale_stride = tc.scale_stride;
    spec.page_size = tc.page;
    spec.dist = Distribution::peaked;
    spec.spare_rows = 64;
    spec.seed = 81;
    GpuResult r;
    ASSERT_NO_FATAL_FAILURE(run_case(spec, &r));
    EXPECT_TRUE(r.cmp.ok()) << spec.name() << ": " << r.cmp.summary();
    EXPECT_GE(r.plan.tokens_per_split, 4 * 64) << describe(r.plan);
    EXPECT_NE(describe(r.plan).find("kv_rows=table"), std::string::npos) << describe(r.plan);
  }
  // MXFP4's scale words (the row-table kernel's load_scale_words) at the very end of the scale buffer:
  // pages of 1, no spare rows, an odd number of scale rows of 18 bytes, so that the last row is even
  // (offset ≡ 0 mod 4: its third word for half 1 would hold 2 bytes past the buffer); that row is given
  // to request 0's token 100 (tile 1 of its first item, read through the row table); no guard bytes,
  // so that memcheck sees any read past the buffer.
  {
    CaseSpec spec = CaseSpec::uniform(15, 4501, KvFormat::mxfp4);
    spec.page_size = 1;
    spec.dist = Distribution::peaked;
    spec.seed = 85;
    HostInputs in = make_inputs(spec);
    ASSERT_EQ(in.kv_rows % 2, 1) << spec.name();
    const auto last = std::find(in.page_table.begin(), in.page_table.end(), std::int32_t(in.kv_rows - 1));
    ASSERT_NE(last, in.page_table.end()) << spec.name();
    std::swap(*last, in.page_table[100]);  // request 0's token 100
    GpuResult r;
    ASSERT_NO_FATAL_FAILURE(run_inputs(in, &r, /*with_lse=*/true, /*walking=*/false, /*guard=*/0));
    EXPECT_TRUE(r.cmp.ok()) << spec.name() << ": " << r.cmp.summary();
    EXPECT_NE(describe(r.plan).find("kv_rows=table"), std::string::npos) << describe(r.plan);
    EXPECT_GT(r.plan.tokens_per_split, 128) << describe(r.plan);  // token 100 in tile 1 of an item
  }
  // bf16's walking row table over a walk of short and long pieces (GpuDecode.WalkingRowTableFollowsTheWalk).
  ASSERT_NO_FATAL_FAILURE(expect_walked_pieces_match(4));
  // A row-pair case (s_q 2, peaked inputs) against the reference; its plan takes row pairs.
  const auto run_pairs = [](CaseSpec spec, std::uint64_t seed, GpuResult* r) {
    spec.s_q = 2;
    spec.dist = Distribution::peaked;
    spec.seed = seed;
    ASSERT_NO_FATAL_FAILURE(run_case(spec, r));
    EXPECT_TRUE(r->cmp.ok()) << spec.name() << ": " << r->cmp.summary();
    EXPECT_EQ(r->plan.rows_per_item, 2) << describe(r->plan);
  };
  // fp8's and MXFP4's row pairs: whole pairs, a first row of no key, and pairs split for the combine.
  for (KvFormat f : {KvFormat::mxfp4, KvFormat::fp8}) {
    CaseSpec rp;
    rp.kv_lens = std::vector<std::int32_t>(13, 4097);  // 1,689 tiles: row pairs on up to 140 SMs; split
                                                       // pairs, last pieces of one token
    rp.kv_lens.insert(rp.kv_lens.end(), {1, 65, 200});
    rp.format = f;
    rp.page_size = 16;
    rp.spare_rows = 64;
    GpuResult r;
    ASSERT_NO_FATAL_FAILURE(run_pairs(rp, 79, &r));
    EXPECT_GE(r.plan.num_split_requests, 2) << describe(r.plan);
    // Items of one 128-token tile: 99 and 100 keys, both warpgroups' halves, contiguous (fp8: the first
    // half's copies dense, the second's row by row; the general kernel, the split being 640 tokens);
    // 19 and 20 keys, the one-tile pair kernel.
    for (int len : {100, 20}) {
      GpuResult r1;
      ASSERT_NO_FATAL_FAILURE(run_pairs(CaseSpec::uniform(len == 100 ? 700 : 800, len, f), 83, &r1));
      if (len == 20) {
        EXPECT_NE(describe(r1.plan).find("kernel=one-tile"), std::string::npos) << describe(r1.plan);
      }
    }
  }
  // bf16's row pairs (134 rows of 4,160 keys and 4,161: over 32 tiles per SM; an empty pair and first
  // rows of no key or one).
  {
    CaseSpec rp = CaseSpec::uniform(67, 4161, KvFormat::bf16);
    rp.kv_lens.insert(rp.kv_lens.end(), {0, 1, 2, 65});
    GpuResult r;
    ASSERT_NO_FATAL_FAILURE(run_pairs(rp, 81, &r));
  }
  // Every combine kernel (the small suite's splits go to combine_few_kernel<1, S>): rows in 32 pieces
  // (combine_few_kernel<2, 16>), 64 (<4, 16>, with shared memory) and 128 or 256 (combine_kernel, on
  // fp32 and on fp16 partials).
  for (auto [b, l, f, pieces] : {std::tuple{4, 4096, KvFormat::bf16, 32}, std::tuple{2, 4096, KvFormat::fp8, 64},
                                 std::tuple{1, 16384, KvFormat::fp8, 256}, std::tuple{1, 16384, KvFormat::bf16, 128}}) {
    CaseSpec many = CaseSpec::uniform(b, l, f);
    many.seed = 80;
    many.dist = Distribution::peaked;
    GpuResult r;
    ASSERT_NO_FATAL_FAILURE(run_case(many, &r));
    EXPECT_TRUE(r.cmp.ok()) << many.name() << ": " << r.cmp.summary();
    EXPECT_EQ(r.plan.max_request_partials, pieces) << describe(r.plan);
  }
  // bf16 CTAs walking several items each (more items than SMs), under the sanitizers too (a ragged
  // batch: walked by prepare_walking's plan, since plan() gives it a CTA per item, v134).
  CaseSpec walk;
  walk.kv_lens = ragged_lengths(200, 9, 300);
  walk.kv_lens[3] = 0;
  walk.kv_lens[4] = 3000;
  walk.format = KvFormat::bf16;
  walk.page_size = 16;
  walk.spare_rows = 64;
  walk.seed = 78;
  walk.dist = Distribution::peaked;
  GpuResult r;
  ASSERT_NO_FATAL_FAILURE(run_case(walk, &r, true, /*walking=*/true));
  EXPECT_TRUE(r.cmp.ok()) << walk.name() << ": " << r.cmp.summary();
  EXPECT_LT(r.plan.grid, r.plan.num_work_items) << describe(r.plan);
}

// A plan belongs to the device it was made on (its workspace and kernel set-up live there): run()
// on another current device refuses it before launching anything. With one GPU the other device is
// a plan whose recorded ordinal is changed; with two, device 1 is made current for real.
TEST(GpuDecode, PlanOfAnotherDeviceRefused) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  CaseSpec spec;
  spec.kv_lens = {100, 200};
  spec.format = KvFormat::fp8;
  GpuCase gc;
  ASSERT_NO_FATAL_FAILURE(prepare(make_inputs(spec), &gc));
  ASSERT_TRUE(gc.dc->poison_outputs().ok());
  Plan pl;
  ASSERT_TRUE(plan(gc.problem(), Backend::cuda, gc.ws.get(), gc.ws.size(), &pl).ok());
  int current = -1, count = 0;
  ASSERT_TRUE(current_device(&current, &count).ok());
  EXPECT_EQ(pl.device, current);
  EXPECT_NE(describe(pl).find("device=" + std::to_string(current)), std::string::npos) << describe(pl);

  Plan other = pl;
  other.device = current + 1;
  Status s = run(gc.problem(), other);
  EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
  EXPECT_NE(s.message.find("made on CUDA device " + std::to_string(current + 1)), std::string::npos) << s.message;
  if (count >= 2) {
    ASSERT_TRUE(set_device(current == 0 ? 1 : 0).ok());
    s = run(gc.problem(), pl);
    ASSERT_TRUE(set_device(current).ok());
    EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
  }
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
  ASSERT_TRUE(gc.dc->download(&out, &lse).ok());
  for (std::uint16_t v : out) ASSERT_EQ(v, 0xFFFF) << "an output was written by a refused run";
  // The plan's own device runs it.
  ASSERT_TRUE(run(gc.problem(), pl).ok());
  ASSERT_TRUE(gc.dc->download(&out, &lse).ok());
  EXPECT_NE(std::count(out.begin(), out.end(), std::uint16_t(0xFFFF)), std::ptrdiff_t(out.size()));
}

TEST(GpuDecode, WorkspaceTooSmallRejected) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  CaseSpec spec;
  spec.kv_lens = {100, 200};
  GpuCase gc;
  ASSERT_NO_FATAL_FAILURE(prepare(make_inputs(spec), &gc));
  Plan pl;
  const Status s = plan(gc.problem(), Backend::cuda, gc.ws.get(), gc.ws.size() - 1, &pl);
  EXPECT_EQ(s.code, StatusCode::workspace_too_small) << s.message;
  // The size depends on batch, s_q and the SM count, not on the lengths (mla.h).
  CaseSpec longer = spec;
  longer.kv_lens = {5000, 1};
  const HostInputs in2 = make_inputs(longer);
  std::vector<std::uint16_t> out(std::size_t(in2.total_q) * kNumHeads * kValueDim);
  std::size_t bytes = 0;
  ASSERT_TRUE(workspace_size(gc.problem(), Backend::cuda, &bytes).ok());
  GpuCase gc2;
  ASSERT_NO_FATAL_FAILURE(prepare(in2, &gc2));
  EXPECT_EQ(gc2.ws.size(), bytes);
}

// s_q = 2..4 (multi-token prediction): query token i of a request sees its first L − s_q + i + 1
// keys; lengths below s_q give rows with no visible key (zeros, LSE −inf).
// fp8 and MXFP4 with an even s_q run row pairs (two q rows per CTA, docs/design.md) where the call has
// at least kRowPairsMinTilesPerSlot tiles per slot (every shape here, on 132 SMs): whole and split
// pairs, pieces whose last holds one token (the first row sees none of it), first rows that see no
// key, ragged and paged batches, s_q 2 and 4, and items of one 128-token tile (the one-tile pair kernel).
void expect_row_pairs_correct(KvFormat format, int seed) {
  struct Shape {
    std::vector<std::int32_t> lens;
    int s_q, page;
  };
  std::vector<std::int32_t> mixed(8, 8192);  // empty pairs, first rows of no key and of one; split requests
  mixed.insert(mixed.end(), {0, 1, 2, 3, 129, 130, 4098});
  const std::vector<Shape> shapes = {
      {mixed, 2, 16},
      {std::vector<std::int32_t>(26, 4097), 2, 0},     // split pairs (one-token last pieces: the sanitizer case)
      {std::vector<std::int32_t>(64, 1024), 4, 0},     // two pairs per request, whole
      {testing::ragged_lengths(150, 9, 3000), 2, 64},  // ragged, paged
      {std::vector<std::int32_t>(300, 200), 2, 1},     // more pairs than a wave
      {std::vector<std::int32_t>(64, 2000), 2, 1},     // pages of 1 row, items of many tiles (row tables)
      {std::vector<std::int32_t>(800, 20), 2, 0},      // items of one 128-token tile: the one-tile pair kernel
      {std::vector<std::int32_t>(700, 100), 2, 16},    // ... both warpgroups' halves, paged
  };
  int one_tile = 0;
  for (const Shape& sh : shapes) {
    Plan pl;
    ASSERT_NO_FATAL_FAILURE(expect_correct_peaked(sh.lens, format, sh.page, sh.s_q, seed + sh.s_q, &pl));
    EXPECT_EQ(pl.rows_per_item, 2) << describe(pl);
    EXPECT_EQ(pl.cluster_size, 0) << describe(pl);
    one_tile += describe(pl).find("kernel=one-tile") != std::string::npos ? 1 : 0;
  }
  EXPECT_GE(one_tile, 1) << "no shape ran the one-tile pair kernel";
}
TEST(GpuDecode, Mxfp4RowPairs) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  expect_row_pairs_correct(KvFormat::mxfp4, 301);
}
TEST(GpuDecode, Fp8RowPairs) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  expect_row_pairs_correct(KvFormat::fp8, 351);
}

// bf16 with an even s_q runs row pairs (decode_bf16_pairs.cu) where the q rows hold at least 32 tiles
// per SM (bf16_row_pairs_pay): every shape here, on 132 SMs. Whole and split
// pairs (the pieces end anywhere: first rows whose last piece is shorter by one token), first rows of
// no key, s_q 2 and 4, contiguous and in pages of 1, 16 and 64, a ragged batch.
TEST(GpuDecode, Bf16RowPairs) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  struct Shape {
    std::vector<std::int32_t> lens;
    int s_q, page;
  };
  std::vector<std::int32_t> mixed(68, 8193);
  mixed.insert(mixed.end(), {0, 1, 2, 65, 4161});  // an empty pair, first rows of no key
  std::vector<std::int32_t> ragged = testing::ragged_lengths(140, 11, 12000);
  for (std::int32_t& len : ragged) len = std::max(len, 4200);
  const std::vector<Shape> shapes = {
      {mixed, 2, 16},
      {std::vector<std::int32_t>(70, 5000), 2, 0},
      {std::vector<std::int32_t>(40, 4200), 4, 64},
      {ragged, 2, 1},
  };
  for (const Shape& sh : shapes) {
    Plan pl;
    ASSERT_NO_FATAL_FAILURE(expect_correct_peaked(sh.lens, KvFormat::bf16, sh.page, sh.s_q, 401 + sh.s_q, &pl));
    EXPECT_EQ(pl.rows_per_item, 2) << describe(pl);
    EXPECT_EQ(pl.cluster_size, 0) << describe(pl);
    EXPECT_EQ(pl.grid, pl.num_work_items) << describe(pl);
  }
}

// Every row-pair kernel under the flags a caller may set on its plan (Plan::kv_evict_first, kv_tma):
// the results are the plan's, bit for bit. bf16's pair kernel once had an evict-first form that
// CUDA 13.0's ptxas encoded as an illegal instruction, and no test ran it (perf-notes session 37);
// it now reads without the policy whatever the flag says, and fp8's and MXFP4's take it.
TEST(GpuDecode, RowPairPlansTakeTheCallersFlags) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  struct Shape {
    KvFormat f;
    std::vector<std::int32_t> lens;
    const char* kernel;
  };
  const std::vector<Shape> shapes = {
      {KvFormat::bf16, std::vector<std::int32_t>(70, 5000), "kernel=general"},
      {KvFormat::fp8, std::vector<std::int32_t>(26, 4097), "kernel=general"},
      {KvFormat::fp8, std::vector<std::int32_t>(800, 20), "kernel=one-tile"},
      {KvFormat::mxfp4, std::vector<std::int32_t>(26, 4097), "kernel=general"},
      {KvFormat::mxfp4, std::vector<std::int32_t>(800, 20), "kernel=one-tile"},
  };
  for (const Shape& sh : shapes) {
    CaseSpec spec;
    spec.kv_lens = sh.lens;
    spec.format = sh.f;
    spec.dist = Distribution::peaked;
    spec.s_q = 2;
    spec.spare_rows = 64;
    spec.seed = 431;
    const HostInputs in = make_inputs(spec);
    GpuCase gc;
    Plan pl;
    ASSERT_NO_FATAL_FAILURE(prepare_planned(in, &gc, &pl));
    ASSERT_EQ(pl.rows_per_item, 2) << describe(pl);
    EXPECT_NE(describe(pl).find(sh.kernel), std::string::npos) << describe(pl);
    for (bool evict_first : {false, true}) {
      for (bool tma : {false, true}) {
        Plan other = pl;
        other.kv_evict_first = evict_first;
        other.kv_tma = tma;
        expect_plans_agree(gc, in, pl, other,
                           spec.name() + (evict_first ? ": evict_first" : ": normal") + (tma ? ", tma" : ""));
      }
    }
  }
}

TEST(GpuDecode, MultiTokenQueriesCausal) {
  if (!cuda_available()) GTEST_SKIP() << kNoGpu;
  for (KvFormat f : kFormats) {
    for (int s_q : {2, 3, 4}) {
      CaseSpec spec;
      spec.kv_lens = {0, 1, 2, 3, 64, 65, 1000, 4099};
      spec.s_q = s_q;
      spec.format = f;
      spec.dist = Distribution::peaked;
      spec.page_size = s_q == 3 ? 16 : (s_q == 4 ? 1 : 0);
      spec.flat_page_table = s_q == 4;  // FlashInfer kv_indices: page base = kv_indptr[b]
      spec.spare_rows = 32;
      spec.seed = 40 + s_q;
      expect_correct(spec);
    }
  }
}

}  // namespace
}  // namespace mla::testing
