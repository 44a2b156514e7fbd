// The CPU backend against the float64 reference (SPEC §3): every format, both distributions,
// ragged and paged batches, s_q 1..4, NaN-poisoned outputs and spare rows, every host buffer
// between NaN guards, a caller's sm_scale, and a NaN in a read row reaching its request.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/common/bf16.h"
#include "mla/mla.h"
#include "testing/compare.h"
#include "testing/inputs.h"

namespace mla {
namespace {

using testing::CaseSpec;
using testing::Distribution;
using testing::HostInputs;

constexpr KvFormat kFormats[] = {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4};

struct CpuRun {
  Status status;
  Plan plan;
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
  bool guards_intact = true;
};

// How a case runs: with or without an LSE buffer, the logits' scale, and whether every host buffer
// (inputs, outputs and workspace) sits between 0xFF guard bytes: a write outside a buffer breaks a
// guard; a read outside one gets NaN (bf16 Q and KV, e4m3, E8M0 scales) or a wrong value (an MXFP4
// code byte is −6, an index −1) that the comparison with the reference catches.
struct RunOptions {
  bool with_lse = true;
  float sm_scale = Problem{}.sm_scale;
  bool guarded = false;
};

// Copies of buffers, each between kGuard bytes of 0xFF (payloads stay 16-byte aligned).
class Guards {
 public:
  template <typename T>
  T* copy(const T* src, std::size_t count) {
    std::vector<std::uint8_t>& block = blocks_.emplace_back(2 * kGuard + count * sizeof(T), 0xFF);
    if (src != nullptr && count > 0) std::memcpy(block.data() + kGuard, src, count * sizeof(T));
    return reinterpret_cast<T*>(block.data() + kGuard);
  }
  bool intact() const {
    for (const std::vector<std::uint8_t>& block : blocks_) {
      for (std::size_t i = 0; i < kGuard; ++i) {
        if (block[i] != 0xFF || block[block.size() - 1 - i] != 0xFF) return false;
      }
    }
    return true;
  }

 private:
  static constexpr std::size_t kGuard = 256;
  std::vector<std::vector<std::uint8_t>> blocks_;
};

// Plans and runs with NaN-filled out, lse and workspace (the workspace always guarded).
CpuRun run_cpu(const HostInputs& in, const RunOptions& opt) {
  CpuRun r;
  r.out.assign(std::size_t(in.total_q) * kNumHeads * kValueDim, 0xFFFF);
  if (opt.with_lse) r.lse.assign(std::size_t(in.total_q) * kNumHeads, NAN);
  Problem p = in.problem(r.out.data(), opt.with_lse ? r.lse.data() : nullptr);
  p.sm_scale = opt.sm_scale;
  Guards guards;
  if (opt.guarded) {
    p.q = guards.copy(in.q.data(), in.q.size());
    p.qo_indptr = guards.copy(in.qo_indptr.data(), in.qo_indptr.size());
    p.kv_indptr = guards.copy(in.kv_indptr.data(), in.kv_indptr.size());
    p.kv.data = guards.copy(in.kv_data.data(), in.kv_data.size());
    if (p.kv.scales != nullptr) p.kv.scales = guards.copy(in.kv_scales.data(), in.kv_scales.size());
    if (p.paging.page_table != nullptr) p.paging.page_table = guards.copy(in.page_table.data(), in.page_table.size());
    p.out = guards.copy(r.out.data(), r.out.size());
    if (opt.with_lse) p.lse = guards.copy(r.lse.data(), r.lse.size());
  }
  std::size_t bytes = 0;
  r.status = workspace_size(p, Backend::cpu, &bytes);
  if (!r.status.ok()) return r;
  // The workspace always sits between guards, NaN bytes throughout: partials are written before read.
  r.status = plan(p, Backend::cpu, guards.copy<std::uint8_t>(nullptr, bytes), bytes, &r.plan);
  if (!r.status.ok()) return r;
  r.status = run(p, r.plan);
  if (opt.guarded) {
    std::memcpy(r.out.data(), p.out, r.out.size() * sizeof(std::uint16_t));
    if (opt.with_lse) std::memcpy(r.lse.data(), p.lse, r.lse.size() * sizeof(float));
  }
  r.guards_intact = guards.intact();
  return r;
}

// Runs prepared inputs and checks them against the reference; returns the plan for further checks.
Plan check_inputs(const HostInputs& in, const RunOptions& opt) {
  SCOPED_TRACE(in.spec.name());
  const CpuRun r = run_cpu(in, opt);
  EXPECT_TRUE(r.status.ok()) << r.status.message;
  if (!r.status.ok()) return r.plan;
  EXPECT_TRUE(r.guards_intact) << "a write outside a buffer";
  std::vector<std::uint16_t> scratch(r.out.size());
  Problem ref_problem = in.problem(scratch.data(), nullptr);
  ref_problem.sm_scale = opt.sm_scale;
  const testing::Reference ref = testing::reference_decode(ref_problem);
  // Every element written and finite; rows with no visible key are exact zeros / −inf.
  std::int64_t nonfinite = 0, bad_empty = 0;
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    const bool empty = std::isinf(ref.lse[row]);
    for (int d = 0; d < kValueDim; ++d) {
      const std::uint16_t o = r.out[row * kValueDim + std::size_t(d)];
      if (!std::isfinite(bf16_to_float(o))) ++nonfinite;
      if (empty && (o & 0x7FFF) != 0) ++bad_empty;
    }
    if (opt.with_lse) {
      if (empty ? r.lse[row] != -INFINITY : !std::isfinite(r.lse[row])) ++bad_empty;
    }
  }
  EXPECT_EQ(nonfinite, 0);
  EXPECT_EQ(bad_empty, 0);
  const testing::Comparison c = testing::compare(r.out, r.lse, ref);
  EXPECT_TRUE(c.ok()) << c.summary() << " — " << describe(r.plan);
  return r.plan;
}
Plan check_inputs(const HostInputs& in, bool with_lse = true) {
  return check_inputs(in, RunOptions{.with_lse = with_lse});
}

// The same for the inputs of a case spec.
Plan check_case(const CaseSpec& spec, bool with_lse = true) {
  return check_inputs(testing::make_inputs(spec), with_lse);
}

TEST(CpuBackend, UniformAllFormatsBothDistributions) {
  for (KvFormat f : kFormats) {
    for (Distribution d : {Distribution::challenge, Distribution::peaked}) {
      CaseSpec spec = CaseSpec::uniform(3, 200, f);
      spec.dist = d;
      check_case(spec);
    }
  }
}

// The inputs of the GPU test of a climbing running max, on the CPU backend (checks the inputs too:
// their LSEs stay small enough for the 1e-4 bound in fp32).
TEST(CpuBackend, ClimbingLogits) {
  for (KvFormat f : kFormats) check_inputs(testing::climbing_inputs(f));
}

TEST(CpuBackend, RaggedWithSpareNanRows) {
  for (KvFormat f : kFormats) {
    for (Distribution d : {Distribution::challenge, Distribution::peaked}) {
      CaseSpec spec;
      spec.kv_lens = testing::ragged_lengths(8, 11, 700);  // 0, 1, 63, 64, 65, 127, 257, 700
      spec.format = f;
      spec.dist = d;
      spec.spare_rows = 50;
      check_case(spec);
    }
  }
}

TEST(CpuBackend, PaddedKvRows) {
  for (KvFormat f : kFormats) {
    for (int ps : {0, 16}) {
      CaseSpec spec;
      spec.kv_lens = {256, 100, 1, 64};
      spec.format = f;
      spec.page_size = ps;
      spec.row_padding = 32;  // NaN padding after every row: read it and the result is NaN
      spec.spare_rows = 16;   // and NaN rows (paged: NaN page tails)
      check_case(spec);
    }
  }
}

TEST(CpuBackend, LongRequest8191) {
  for (KvFormat f : kFormats) {
    for (Distribution d : {Distribution::challenge, Distribution::peaked}) {
      CaseSpec spec;
      spec.kv_lens = {8191, 65, 0};
      spec.format = f;
      spec.dist = d;
      spec.spare_rows = 16;
      const Plan pl = check_case(spec);
      EXPECT_GE(pl.num_split_requests, 1) << describe(pl);
    }
  }
}

TEST(CpuBackend, PagedLayouts) {
  for (KvFormat f : kFormats) {
    for (int ps : {1, 16, 64}) {
      for (int layout = 0; layout < 3; ++layout) {  // shuffled pages, a flat table (pages of 1), in order
        const bool flat = layout == 1, in_order = layout == 2;
        if (flat && ps != 1) continue;
        CaseSpec spec;
        spec.kv_lens = testing::ragged_lengths(6, 21 + std::uint64_t(ps), 300);
        spec.format = f;
        spec.dist = Distribution::peaked;
        spec.page_size = ps;
        spec.flat_page_table = flat;
        spec.pages_in_order = in_order;
        spec.spare_rows = 100;
        check_case(spec);
      }
    }
  }
}

TEST(CpuBackend, Mxfp4ScaleStridesAndRoundings) {
  for (std::int64_t stride : {18, 24}) {
    for (Mxfp4Rounding rounding : {Mxfp4Rounding::rne, Mxfp4Rounding::legacy}) {
      for (int ps : {0, 16}) {
        CaseSpec spec;
        spec.kv_lens = testing::ragged_lengths(6, 31, 400);
        spec.format = KvFormat::mxfp4;
        spec.scale_stride = stride;
        spec.rounding = rounding;
        spec.page_size = ps;
        spec.dist = Distribution::peaked;
        spec.spare_rows = 20;  // also poisons scale padding columns 18..23
        check_case(spec);
      }
    }
  }
}

TEST(CpuBackend, SeveralQueryTokensCausal) {
  for (int s_q = 1; s_q <= kMaxSq; ++s_q) {
    for (KvFormat f : kFormats) {
      CaseSpec spec;
      spec.kv_lens = {0, 1, 2, 3, 5, 64, 130};
      spec.s_q = s_q;
      spec.format = f;
      spec.dist = Distribution::peaked;
      spec.spare_rows = 10;
      spec.page_size = s_q == 3 ? 16 : 0;
      check_case(spec);
    }
  }
}

TEST(CpuBackend, WithoutLse) {
  CaseSpec spec;
  spec.kv_lens = {100, 0, 333};
  spec.format = KvFormat::fp8;
  spec.dist = Distribution::peaked;
  check_case(spec, /*with_lse=*/false);
}

TEST(CpuBackend, SplitAndDirectItemsBothUsed) {
  // One long request and many short ones: the long one is split (combine pass), short ones direct.
  CaseSpec spec;
  spec.kv_lens = {1500, 3, 70, 64, 0, 1};
  spec.dist = Distribution::peaked;
  const Plan pl = check_case(spec);
  EXPECT_GE(pl.num_split_requests, 1) << describe(pl);
  EXPECT_GT(pl.num_work_items, 6) << describe(pl);
}

// Every buffer between NaN guards (inputs, outputs, workspace): no read outside an input (the
// result would be NaN) and no write outside an output or the workspace, in every layout: contiguous,
// block tables of 16 and 64, flat kv_indices, s_q 1..3, both MXFP4 scale strides, with and
// without an LSE buffer.
TEST(CpuBackend, GuardBytesAroundEveryBuffer) {
  for (KvFormat f : kFormats) {
    for (int ps : {0, 1, 16, 64}) {
      CaseSpec spec;
      spec.kv_lens = testing::ragged_lengths(6, 51 + std::uint64_t(ps), 500);
      spec.format = f;
      spec.dist = Distribution::peaked;
      spec.page_size = ps;
      spec.flat_page_table = ps == 1;
      spec.s_q = ps == 1 ? 3 : ps == 16 ? 2 : 1;
      spec.scale_stride = ps == 64 ? 24 : 18;
      spec.spare_rows = 20;
      const HostInputs in = testing::make_inputs(spec);
      check_inputs(in, RunOptions{.guarded = true});
      if (ps == 0) check_inputs(in, RunOptions{.with_lse = false, .guarded = true});
    }
  }
}

// The logits' scale is the caller's, not a built-in 1/sqrt(576): a smaller and a larger one, both
// against the reference, and each changes the result.
TEST(CpuBackend, SmScaleIsTheCallers) {
  for (KvFormat f : kFormats) {
    CaseSpec spec = CaseSpec::uniform(3, 300, f);
    spec.dist = Distribution::peaked;
    const HostInputs in = testing::make_inputs(spec);
    for (float scale : {0.01f, 0.125f}) check_inputs(in, RunOptions{.sm_scale = scale});
    const CpuRun usual = run_cpu(in, RunOptions{});
    const CpuRun larger = run_cpu(in, RunOptions{.sm_scale = 0.125f});
    ASSERT_TRUE(usual.status.ok() && larger.status.ok());
    EXPECT_NE(usual.out, larger.out);
    EXPECT_NE(std::memcmp(usual.lse.data(), larger.lse.data(), usual.lse.size() * sizeof(float)), 0);
  }
}

// A NaN in a KV row that a request reads reaches that request's output (which is what makes the
// NaN rows, padding and guards of the other tests catch a stray read), and no other request's.
TEST(CpuBackend, NanInAReadRowReachesItsRequestOnly) {
  for (KvFormat f : kFormats) {
    CaseSpec spec;
    spec.kv_lens = {100, 100};
    spec.format = f;
    HostInputs in = testing::make_inputs(spec);
    const CpuRun clean = run_cpu(in, RunOptions{});
    testing::plant_read_nan(&in, 10);  // request 0's token 10 (contiguous: physical row 10)
    const CpuRun poisoned = run_cpu(in, RunOptions{});
    ASSERT_TRUE(clean.status.ok() && poisoned.status.ok());
    const std::size_t per_request = std::size_t(kNumHeads) * kValueDim;
    std::int64_t nan0 = 0;
    for (std::size_t i = 0; i < per_request; ++i) nan0 += std::isnan(bf16_to_float(poisoned.out[i])) ? 1 : 0;
    EXPECT_GT(nan0, 0) << "request 0 read a NaN and its output has none";
    // Its LSE too, whether the plan splits the request or not (a direct row's output turns NaN
    // through 0 · NaN even when its state reads as empty; its LSE does not).
    for (int h = 0; h < kNumHeads; ++h) EXPECT_TRUE(std::isnan(poisoned.lse[std::size_t(h)])) << "head " << h;
    EXPECT_TRUE(std::equal(clean.out.begin() + std::ptrdiff_t(per_request), clean.out.end(),
                           poisoned.out.begin() + std::ptrdiff_t(per_request)))
        << "request 1 changed";
    EXPECT_EQ(0, std::memcmp(clean.lse.data() + kNumHeads, poisoned.lse.data() + kNumHeads, kNumHeads * sizeof(float)))
        << "request 1's LSE changed";
  }
}

TEST(CpuBackend, PlanFields) {
  const HostInputs in = testing::make_inputs(CaseSpec::uniform(5, 130, KvFormat::bf16));
  const CpuRun r = run_cpu(in, RunOptions{});
  ASSERT_TRUE(r.status.ok()) << r.status.message;
  EXPECT_EQ(r.plan.backend, Backend::cpu);
  EXPECT_EQ(r.plan.batch, 5);
  EXPECT_EQ(r.plan.s_q, 1);
  EXPECT_EQ(r.plan.total_q, 5);
  EXPECT_EQ(r.plan.total_kv, 650);
  EXPECT_GE(r.plan.num_work_items, 5);
  EXPECT_GE(r.plan.grid, 1);
  EXPECT_GT(r.plan.tokens_per_split, 0);
  EXPECT_EQ(r.plan.tokens_per_split % 64, 0);
  EXPECT_NE(r.plan.workspace, nullptr);
  EXPECT_GT(r.plan.workspace_bytes, 0u);
  EXPECT_EQ(r.plan.kv_format, KvFormat::bf16);
  EXPECT_NE(describe(r.plan).find("cpu"), std::string::npos);
  EXPECT_NE(describe(r.plan).find("kv=bf16"), std::string::npos) << describe(r.plan);
}

TEST(CpuBackend, WorkspaceTooSmall) {
  const HostInputs in = testing::make_inputs(CaseSpec::uniform(4, 100, KvFormat::fp8));
  std::vector<std::uint16_t> out(std::size_t(in.total_q) * kNumHeads * kValueDim);
  const Problem p = in.problem(out.data(), nullptr);
  std::size_t bytes = 0;
  ASSERT_TRUE(workspace_size(p, Backend::cpu, &bytes).ok());
  ASSERT_GT(bytes, 0u);
  std::vector<std::uint8_t> ws(bytes);
  Plan pl;
  const Status s = plan(p, Backend::cpu, ws.data(), bytes - 1, &pl);
  EXPECT_EQ(s.code, StatusCode::workspace_too_small);
  EXPECT_FALSE(s.message.empty());
  EXPECT_EQ(plan(p, Backend::cpu, nullptr, bytes, &pl).code, StatusCode::invalid_argument);
  // Enough: works, and the size does not depend on lengths.
  EXPECT_TRUE(plan(p, Backend::cpu, ws.data(), bytes, &pl).ok());
  const HostInputs longer = testing::make_inputs(CaseSpec::uniform(4, 1000, KvFormat::fp8));
  std::size_t bytes2 = 0;
  ASSERT_TRUE(workspace_size(longer.problem(out.data(), nullptr), Backend::cpu, &bytes2).ok());
  EXPECT_EQ(bytes, bytes2);
}

TEST(CpuBackend, StalePlanIsRejected) {
  const HostInputs in = testing::make_inputs(CaseSpec::uniform(3, 100, KvFormat::bf16));
  std::vector<std::uint16_t> out(std::size_t(in.total_q) * kNumHeads * kValueDim);
  Problem p = in.problem(out.data(), nullptr);
  std::size_t bytes = 0;
  ASSERT_TRUE(workspace_size(p, Backend::cpu, &bytes).ok());
  std::vector<std::uint8_t> ws(bytes);
  Plan pl;
  ASSERT_TRUE(plan(p, Backend::cpu, ws.data(), bytes, &pl).ok());
  std::vector<std::int32_t> shorter = {0, 100, 200, 250};
  p.kv_indptr = shorter.data();
  Status s = run(p, pl);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("kv lengths changed"), std::string::npos) << s.message;
  // The same total over other lengths: the work list no longer fits the requests.
  std::vector<std::int32_t> moved = {0, 50, 200, 300};
  p.kv_indptr = moved.data();
  s = run(p, pl);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("work list does not match"), std::string::npos) << s.message;
  // A plan whose workspace is smaller than the problem's layout.
  p.kv_indptr = in.kv_indptr.data();
  Plan small = pl;
  small.workspace_bytes = 16;
  s = run(p, small);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("workspace does not fit"), std::string::npos) << s.message;
  EXPECT_TRUE(run(p, pl).ok());  // the plan itself still works for its own problem
}

TEST(CpuBackend, RunsAreBitIdentical) {
  CaseSpec spec;
  spec.kv_lens = testing::ragged_lengths(7, 41, 900);
  spec.format = KvFormat::mxfp4;
  spec.dist = Distribution::peaked;
  spec.s_q = 2;
  spec.page_size = 64;
  spec.spare_rows = 64;
  const HostInputs in = testing::make_inputs(spec);
  check_inputs(in);  // s_q 2 on pages of 64, against the reference
  const CpuRun a = run_cpu(in, RunOptions{});
  const CpuRun b = run_cpu(in, RunOptions{});
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)), 0);
  // The same plan run twice into fresh NaN buffers.
  std::vector<std::uint16_t> out(a.out.size(), 0xFFFF);
  std::vector<float> lse(a.lse.size(), NAN);
  const Problem p = in.problem(out.data(), lse.data());
  std::size_t bytes = 0;
  ASSERT_TRUE(workspace_size(p, Backend::cpu, &bytes).ok());
  std::vector<std::uint8_t> ws(bytes, 0xFF);
  Plan pl;
  ASSERT_TRUE(plan(p, Backend::cpu, ws.data(), bytes, &pl).ok());
  for (int rep = 0; rep < 2; ++rep) {
    std::fill(out.begin(), out.end(), std::uint16_t(0xFFFF));
    std::fill(lse.begin(), lse.end(), NAN);
    ASSERT_TRUE(run(p, pl).ok());
    EXPECT_EQ(out, a.out);
    EXPECT_EQ(std::memcmp(lse.data(), a.lse.data(), lse.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace mla
