// mla::validate and the entry points that validate: every malformed input is invalid_argument with
// a message naming the culprit; a valid problem passes on both backends; plan() and run() return
// the error without writing any output. Backend::cuda problems use fake, never dereferenced,
// device pointer values (validate only checks them for null and alignment).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "mla/mla.h"

namespace {

using mla::Backend;
using mla::KvFormat;
using mla::Problem;
using mla::StatusCode;

constexpr int kB = 2;
constexpr std::int64_t kRows = 64;          // physical KV rows (4 pages of 16)
constexpr std::uint16_t kOutFill = 0x1234;  // outputs start as this and must stay so on errors

// A valid host problem: 2 requests of s_q 1 with 3 and 5 keys, over 64 KV rows in any format.
struct Host {
  std::vector<std::uint16_t> q = std::vector<std::uint16_t>(kB * 16 * 576, 0x3C00);  // 0.0078125
  std::vector<std::int32_t> qo{0, 1, 2};
  std::vector<std::int32_t> kv{0, 3, 8};
  std::vector<std::uint8_t> data = std::vector<std::uint8_t>(kRows * 1152, 0x38);  // small, finite everywhere
  std::vector<std::uint8_t> scales = std::vector<std::uint8_t>(kRows * 24, 127);   // E8M0 1.0
  std::vector<std::int32_t> pages{3, 1, 0, 2};                                     // [batch × stride 2]
  std::vector<std::uint16_t> out = std::vector<std::uint16_t>(kB * 16 * 512, kOutFill);
  std::vector<float> lse = std::vector<float>(kB * 16, 7.0f);
  Problem p;

  explicit Host(KvFormat format = KvFormat::bf16) {
    p.batch = kB;
    p.s_q = 1;
    p.q = q.data();
    p.total_q = kB;
    p.qo_indptr = qo.data();
    p.kv_indptr = kv.data();
    p.kv.format = format;
    p.kv.data = data.data();
    p.kv.rows = kRows;
    p.kv.row_stride_bytes = mla::kv_row_bytes(format);
    p.kv.fp8_scale = 0.5f;
    p.kv.scales = format == KvFormat::mxfp4 ? scales.data() : nullptr;
    p.kv.scale_stride = 18;
    p.out = out.data();
    p.lse = lse.data();
  }

  // FlashMLA-style block table: page size 16, 2 entries per request (request 0 needs 1 page here).
  void make_paged() {
    kv = {0, 20, 25};  // lengths 20 (2 pages) and 5 (1 page)
    p.kv_indptr = kv.data();
    p.paging.page_size = 16;
    p.paging.page_table = pages.data();
    p.paging.page_table_entries = std::int64_t(pages.size());
    p.paging.page_table_stride = 2;
  }

  bool outputs_untouched() const {
    for (std::uint16_t v : out) {
      if (v != kOutFill) return false;
    }
    for (float v : lse) {
      if (v != 7.0f) return false;
    }
    return true;
  }
};

template <typename T>
T* fake_device_ptr(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// A valid Backend::cuda problem over fake, 256-aligned device addresses.
Problem cuda_problem(KvFormat format) {
  Problem p;
  p.batch = 4;
  p.s_q = 1;
  p.total_q = 4;
  p.q = fake_device_ptr<const std::uint16_t>(0x7f0000100000);
  p.qo_indptr = fake_device_ptr<const std::int32_t>(0x7f0000200000);
  p.kv_indptr = fake_device_ptr<const std::int32_t>(0x7f0000200100);
  p.kv.format = format;
  p.kv.data = fake_device_ptr<const void>(0x7f0001000000);
  p.kv.rows = 1 << 20;
  p.kv.row_stride_bytes = format == KvFormat::mxfp4 ? 288 : mla::kv_row_bytes(format);
  p.kv.fp8_scale = 0.01f;
  p.kv.scales = format == KvFormat::mxfp4 ? fake_device_ptr<const std::uint8_t>(0x7f0100000000) : nullptr;
  p.kv.scale_stride = 18;
  p.out = fake_device_ptr<std::uint16_t>(0x7f0000300000);
  p.lse = fake_device_ptr<float>(0x7f0000400000);
  return p;
}

void expect_invalid(const Problem& p, Backend backend, const std::string& culprit) {
  const mla::Status s = mla::validate(p, backend);
  EXPECT_EQ(s.code, StatusCode::invalid_argument) << "backend " << mla::to_string(backend) << ": " << s.message;
  EXPECT_NE(s.message.find(culprit), std::string::npos)
      << "message does not mention '" << culprit << "': " << s.message;
}

// Description errors: the same for both backends (host pointers are fine for a cuda validate, which
// never dereferences; alignment of std::vector data is ≥ 16).
void expect_invalid_both(const Problem& p, const std::string& culprit) {
  expect_invalid(p, Backend::cpu, culprit);
  expect_invalid(p, Backend::cuda, culprit);
}

// ---- valid problems ----

TEST(Validate, ValidProblemPassesCpuEveryFormat) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4}) {
    Host h(f);
    const mla::Status s = mla::validate(h.p, Backend::cpu);
    EXPECT_TRUE(s.ok()) << mla::to_string(f) << ": " << s.message;
  }
}

TEST(Validate, ValidPagedProblemsPassCpu) {
  Host h;
  h.make_paged();
  EXPECT_TRUE(mla::validate(h.p, Backend::cpu).ok()) << mla::validate(h.p, Backend::cpu).message;
  h.p.paging.page_size = 64;  // 1 page each; the cache has exactly 1 page of 64
  h.pages = {0, 0, 0, 0};
  EXPECT_TRUE(mla::validate(h.p, Backend::cpu).ok()) << mla::validate(h.p, Backend::cpu).message;

  Host flat;  // FlashInfer kv_indices: page size 1, stride 0, one entry per token
  std::vector<std::int32_t> indices{9, 3, 5, 60, 61, 62, 63, 0};
  flat.p.paging.page_size = 1;
  flat.p.paging.page_table = indices.data();
  flat.p.paging.page_table_entries = std::int64_t(indices.size());
  flat.p.paging.page_table_stride = 0;
  EXPECT_TRUE(mla::validate(flat.p, Backend::cpu).ok()) << mla::validate(flat.p, Backend::cpu).message;
}

TEST(Validate, ValidProblemPassesCuda) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4}) {
    const Problem p = cuda_problem(f);
    const mla::Status s = mla::validate(p, Backend::cuda);
    EXPECT_TRUE(s.ok()) << mla::to_string(f) << ": " << s.message;
  }
  Problem no_lse = cuda_problem(KvFormat::bf16);
  no_lse.lse = nullptr;  // LSE is optional
  EXPECT_TRUE(mla::validate(no_lse, Backend::cuda).ok());
}

TEST(Validate, EmptyRequestsAreValid) {
  Host h;
  h.kv = {0, 0, 0};
  EXPECT_TRUE(mla::validate(h.p, Backend::cpu).ok());
}

// ---- required pointers ----

TEST(Validate, NullQ) {
  Host h;
  h.p.q = nullptr;
  expect_invalid_both(h.p, "q is null");
}

TEST(Validate, NullQoIndptr) {
  Host h;
  h.p.qo_indptr = nullptr;
  expect_invalid_both(h.p, "qo_indptr");
}

TEST(Validate, NullKvIndptr) {
  Host h;
  h.p.kv_indptr = nullptr;
  expect_invalid_both(h.p, "kv_indptr");
}

TEST(Validate, NullOut) {
  Host h;
  h.p.out = nullptr;
  expect_invalid_both(h.p, "out is null");
}

TEST(Validate, NullKvData) {
  Host h;
  h.p.kv.data = nullptr;
  expect_invalid_both(h.p, "kv.data");
}

TEST(Validate, NullScalesForMxfp4) {
  Host h(KvFormat::mxfp4);
  h.p.kv.scales = nullptr;
  expect_invalid_both(h.p, "kv.scales");
}

TEST(Validate, NullPageTableWhenPaged) {
  Host h;
  h.make_paged();
  h.p.paging.page_table = nullptr;
  expect_invalid_both(h.p, "page_table");
}

// ---- batch and indptr ----

TEST(Validate, BatchZero) {
  Host h;
  h.p.batch = 0;
  expect_invalid_both(h.p, "batch");
}

TEST(Validate, BatchNegative) {
  Host h;
  h.p.batch = -3;
  expect_invalid_both(h.p, "batch");
}

TEST(Validate, QoIndptrNotStartingAtZero) {
  Host h;
  h.qo = {1, 2, 3};
  expect_invalid(h.p, Backend::cpu, "qo_indptr[0]");
}

TEST(Validate, KvIndptrNotStartingAtZero) {
  Host h;
  h.kv = {2, 3, 8};
  expect_invalid(h.p, Backend::cpu, "kv_indptr[0]");
}

TEST(Validate, KvIndptrDecreasing) {
  Host h;
  h.kv = {0, 5, 3};
  expect_invalid(h.p, Backend::cpu, "kv_indptr decreases");
}

TEST(Validate, KvIndptrPastKvRows) {
  Host h;
  h.kv = {0, 3, int(kRows) + 1};
  expect_invalid(h.p, Backend::cpu, "kv_indptr[B]");
}

TEST(Validate, QueryLengthsDifferFromSq) {
  Host h;
  h.qo = {0, 2, 2};
  expect_invalid(h.p, Backend::cpu, "expected s_q");
}

TEST(Validate, TotalQNotBatchTimesSq) {
  Host h;
  h.p.total_q = 3;
  expect_invalid_both(h.p, "total_q");
}

// batch · s_q past kMaxTotalQ: the work lists and the workspace layout count rows in int, so a
// larger batch must be refused, not sized by an overflowed product (INT_MAX requests, and 2^29 − 1
// of s_q 4, once came back ok with ~1.8e19 workspace bytes).
TEST(Validate, TooManyQueryRows) {
  for (const auto& [batch, s_q] :
       {std::pair{std::numeric_limits<int>::max(), 1}, std::pair{(1 << 29) - 1, 4}, std::pair{(1 << 30) + 1, 1}}) {
    Host h;
    h.p.batch = batch;
    h.p.s_q = s_q;
    h.p.total_q = std::int64_t(batch) * s_q;
    expect_invalid_both(h.p, "kMaxTotalQ");
    std::size_t bytes = 12345;
    EXPECT_EQ(mla::workspace_size(h.p, Backend::cpu, &bytes).code, StatusCode::invalid_argument);
    EXPECT_EQ(bytes, 12345u) << "workspace_size wrote a size for an invalid problem";
  }
}

// The largest batch a call takes is described as valid, and its workspace size is what the
// layout's 64-bit sums give (no overflow in the row count).
TEST(Validate, LargestQueryRowCountIsSized) {
  Host h;
  h.p.batch = 1 << 28;
  h.p.s_q = 4;
  h.p.total_q = mla::kMaxTotalQ;
  std::size_t bytes = 0;
  const mla::Status s = mla::workspace_size(h.p, Backend::cpu, &bytes);
  ASSERT_TRUE(s.ok()) << s.message;
  // At least one fp32 partial per q row (16 heads × 512 dims × 4 bytes).
  EXPECT_GE(bytes, std::size_t(mla::kMaxTotalQ) * 16 * 512 * 4);
  EXPECT_LT(bytes, std::size_t(1) << 50);
}

TEST(Validate, SqZero) {
  Host h;
  h.p.s_q = 0;
  expect_invalid_both(h.p, "s_q");
}

TEST(Validate, SqFive) {
  Host h;
  h.p.s_q = 5;
  expect_invalid_both(h.p, "s_q");
}

// ---- formats and strides ----

TEST(Validate, UnknownFormat) {
  Host h;
  h.p.kv.format = static_cast<KvFormat>(7);
  expect_invalid_both(h.p, "format");
}

TEST(Validate, RowStrideTooSmall) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::mxfp4}) {
    Host h(f);
    h.p.kv.row_stride_bytes = mla::kv_row_bytes(f) - 1;
    expect_invalid_both(h.p, "row_stride_bytes");
  }
}

TEST(Validate, ScaleStride17) {
  Host h(KvFormat::mxfp4);
  h.p.kv.scale_stride = 17;
  expect_invalid_both(h.p, "scale_stride");
}

TEST(Validate, Fp8ScaleZero) {
  Host h(KvFormat::fp8);
  h.p.kv.fp8_scale = 0.0f;
  expect_invalid_both(h.p, "fp8_scale");
}

TEST(Validate, Fp8ScaleNaN) {
  Host h(KvFormat::fp8);
  h.p.kv.fp8_scale = std::numeric_limits<float>::quiet_NaN();
  expect_invalid_both(h.p, "fp8_scale");
}

TEST(Validate, Fp8ScaleNegativeOrInfinite) {
  Host h(KvFormat::fp8);
  h.p.kv.fp8_scale = -1.0f;
  expect_invalid_both(h.p, "fp8_scale");
  h.p.kv.fp8_scale = std::numeric_limits<float>::infinity();
  expect_invalid_both(h.p, "fp8_scale");
}

TEST(Validate, RowsTimesStrideOverflows64Bits) {
  Host h;
  h.p.kv.rows = std::int64_t(1) << 62;
  h.p.kv.row_stride_bytes = 1152;
  expect_invalid_both(h.p, "overflows");
  Problem c = cuda_problem(KvFormat::bf16);
  c.kv.rows = std::numeric_limits<std::int64_t>::max() / 1000;
  c.kv.row_stride_bytes = 1152 * 16;
  expect_invalid(c, Backend::cuda, "overflows");
}

TEST(Validate, RowsTimesScaleStrideOverflows64Bits) {
  Problem c = cuda_problem(KvFormat::mxfp4);
  c.kv.rows = std::int64_t(1) << 54;          // × 288 bytes per row < 2^63: the data is fine
  c.kv.scale_stride = std::int64_t(1) << 10;  // × 2^10 = 2^64: the scale matrix overflows
  expect_invalid(c, Backend::cuda, "scale_stride overflows");
}

TEST(Validate, PageTableSizeOverflows64Bits) {
  Problem c = cuda_problem(KvFormat::bf16);
  c.paging.page_size = 64;
  c.paging.page_table = fake_device_ptr<const std::int32_t>(0x7f0000500000);
  c.paging.page_table_entries = 1;
  c.paging.page_table_stride = std::int64_t(1) << 62;  // × batch 4 = 2^64 entries
  expect_invalid(c, Backend::cuda, "page table size overflows");
}

// ---- paging ----

TEST(Validate, PageSizesOtherThan1_16_64) {
  for (int ps : {2, 32, 128, -1}) {
    Host h;
    h.make_paged();
    h.p.paging.page_size = ps;
    expect_invalid_both(h.p, "page_size");
  }
}

TEST(Validate, PageTableEntryNegative) {
  Host h;
  h.make_paged();
  h.pages[1] = -1;
  expect_invalid(h.p, Backend::cpu, "page-table entry 1 = -1");
}

TEST(Validate, PageTableEntryPastPages) {
  Host h;
  h.make_paged();
  h.pages[0] = 4;  // the cache has 64 / 16 = 4 pages
  expect_invalid(h.p, Backend::cpu, "page-table entry 0 = 4");
}

TEST(Validate, PageTableRunPastEntries) {
  Host h;
  h.make_paged();
  h.p.paging.page_table_entries = 2;  // request 1 starts at entry 2
  expect_invalid(h.p, Backend::cpu, "page table");

  Host flat;  // flat kv_indices one entry short
  std::vector<std::int32_t> indices{0, 1, 2, 3, 4, 5, 6};
  flat.p.paging.page_size = 1;
  flat.p.paging.page_table = indices.data();
  flat.p.paging.page_table_entries = std::int64_t(indices.size());
  flat.p.paging.page_table_stride = 0;
  expect_invalid(flat.p, Backend::cpu, "page table");
}

TEST(Validate, RequestNeedsMorePagesThanStride) {
  Host h;
  h.make_paged();
  h.p.paging.page_table_stride = 1;  // request 0 needs 2 pages
  h.p.paging.page_table_entries = 2;
  expect_invalid(h.p, Backend::cpu, "page_table_stride");
}

TEST(Validate, StrideZeroWithPageSize16) {
  Host h;
  h.make_paged();
  h.p.paging.page_table_stride = 0;
  expect_invalid_both(h.p, "page_table_stride");
}

TEST(Validate, PageTableStrideNegative) {
  Host h;
  h.make_paged();
  h.p.paging.page_table_stride = -2;
  expect_invalid_both(h.p, "page_table_stride");
}

// ---- cuda alignment (fake pointers, never dereferenced) ----

TEST(Validate, CudaMisalignedQ) {
  Problem p = cuda_problem(KvFormat::bf16);
  p.q = fake_device_ptr<const std::uint16_t>(0x7f0000100002);
  expect_invalid(p, Backend::cuda, "q must be 16-byte aligned");
}

TEST(Validate, CudaMisalignedOut) {
  Problem p = cuda_problem(KvFormat::bf16);
  p.out = fake_device_ptr<std::uint16_t>(0x7f0000300008);
  expect_invalid(p, Backend::cuda, "out must be 16-byte aligned");
}

TEST(Validate, CudaMisalignedKvData) {
  Problem p = cuda_problem(KvFormat::fp8);
  p.kv.data = fake_device_ptr<const void>(0x7f0001000001);
  expect_invalid(p, Backend::cuda, "kv.data must be 16-byte aligned");
}

TEST(Validate, CudaMisalignedScales) {
  Problem p = cuda_problem(KvFormat::mxfp4);
  p.kv.scales = fake_device_ptr<const std::uint8_t>(0x7f0100000004);
  expect_invalid(p, Backend::cuda, "kv.scales must be 16-byte aligned");
}

TEST(Validate, CudaOddScaleStride) {
  Problem p = cuda_problem(KvFormat::mxfp4);
  p.kv.scale_stride = 19;  // the cpu backend reads bytes; the kernel reads 2-byte scale pairs
  expect_invalid(p, Backend::cuda, "scale_stride must be even");
  p.kv.scale_stride = 24;
  EXPECT_TRUE(mla::validate(p, Backend::cuda).ok()) << mla::validate(p, Backend::cuda).message;
}

TEST(Validate, CudaMisalignedLse) {
  Problem p = cuda_problem(KvFormat::bf16);
  p.lse = fake_device_ptr<float>(0x7f0000400004);
  expect_invalid(p, Backend::cuda, "lse must be 16-byte aligned");
}

TEST(Validate, CudaRowStrideNotMultipleOf16) {
  Problem p = cuda_problem(KvFormat::bf16);
  p.kv.row_stride_bytes = 1160;
  expect_invalid(p, Backend::cuda, "row_stride_bytes");
}

TEST(Validate, CpuAcceptsUnalignedPointers) {
  // The cpu backend has no 16-byte alignment rule: a q view starting one element in is fine.
  Host h;
  h.q.resize(h.q.size() + 1);
  h.p.q = h.q.data() + 1;
  EXPECT_TRUE(mla::validate(h.p, Backend::cpu).ok()) << mla::validate(h.p, Backend::cpu).message;
}

// ---- the entry points return the error and write nothing ----

TEST(Validate, WorkspaceSizeReturnsTheError) {
  Host h;
  h.p.s_q = 5;
  std::size_t bytes = 12345;
  const mla::Status s = mla::workspace_size(h.p, Backend::cpu, &bytes);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("s_q"), std::string::npos) << s.message;
}

// plan() writes only its workspace (and *out): on an error, neither the workspace nor the outputs.
TEST(Validate, PlanReturnsTheErrorWithoutWritingAnything) {
  Host h;
  std::size_t bytes = 0;
  ASSERT_TRUE(mla::workspace_size(h.p, Backend::cpu, &bytes).ok());
  std::vector<unsigned char> ws(bytes + 256, 0xA5);
  const auto workspace_untouched = [&] {
    for (unsigned char c : ws) {
      if (c != 0xA5) return false;
    }
    return true;
  };

  struct Case {
    const char* culprit;
    void (*mutate)(Host&);
  };
  const Case cases[] = {
      {"kv_indptr decreases",
       [](Host& x) {
         x.kv = {0, 5, 3};
       }},
      {"kv_indptr[0]",
       [](Host& x) {
         x.kv = {1, 3, 8};
       }},
      {"q is null", [](Host& x) { x.p.q = nullptr; }},
      {"row_stride_bytes", [](Host& x) { x.p.kv.row_stride_bytes = 100; }},
      {"page-table entry",
       [](Host& x) {
         x.make_paged();
         x.pages[2] = 99;
       }},
  };
  for (const Case& c : cases) {
    Host bad;
    c.mutate(bad);
    mla::Plan plan;
    const mla::Status s = mla::plan(bad.p, Backend::cpu, ws.data(), ws.size(), &plan);
    EXPECT_EQ(s.code, StatusCode::invalid_argument) << c.culprit << ": " << s.message;
    EXPECT_NE(s.message.find(c.culprit), std::string::npos) << s.message;
    EXPECT_TRUE(bad.outputs_untouched()) << c.culprit;
    EXPECT_TRUE(workspace_untouched()) << c.culprit;
  }
  // The same buffer takes a valid plan, which does write it: the check above can fail.
  mla::Plan plan;
  ASSERT_TRUE(mla::plan(h.p, Backend::cpu, ws.data(), ws.size(), &plan).ok());
  EXPECT_FALSE(workspace_untouched());
}

TEST(Validate, RunReturnsTheErrorWithoutWritingOutputs) {
  Host h;
  std::size_t bytes = 0;
  ASSERT_TRUE(mla::workspace_size(h.p, Backend::cpu, &bytes).ok());
  std::vector<unsigned char> ws(bytes + 256);
  mla::Plan plan;
  const mla::Status planned = mla::plan(h.p, Backend::cpu, ws.data(), ws.size(), &plan);
  ASSERT_TRUE(planned.ok()) << planned.message;

  Problem bad = h.p;
  bad.kv.row_stride_bytes = 100;
  mla::Status s = mla::run(bad, plan);
  EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
  EXPECT_NE(s.message.find("row_stride_bytes"), std::string::npos) << s.message;
  EXPECT_TRUE(h.outputs_untouched());

  bad = h.p;
  bad.kv.data = nullptr;
  s = mla::run(bad, plan);
  EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
  EXPECT_NE(s.message.find("kv.data"), std::string::npos) << s.message;
  EXPECT_TRUE(h.outputs_untouched());

  bad = h.p;
  bad.s_q = 0;
  s = mla::run(bad, plan);
  EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
  EXPECT_NE(s.message.find("s_q"), std::string::npos) << s.message;
  EXPECT_TRUE(h.outputs_untouched());

  // A plan made for another KV format is refused: the CUDA work list and kernel depend on it (a bf16
  // plan's walking grid has fewer CTAs than items; fp8's kernel would skip the rest).
  bad = h.p;
  bad.kv.format = h.p.kv.format == KvFormat::fp8 ? KvFormat::bf16 : KvFormat::fp8;
  bad.kv.fp8_scale = 1.0f;
  s = mla::run(bad, plan);
  EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
  EXPECT_NE(s.message.find("plan was made for"), std::string::npos) << s.message;
  EXPECT_TRUE(h.outputs_untouched());

  // A plan made for another batch is refused too.
  Host other;
  other.qo = {0, 1, 2, 3};
  other.kv = {0, 1, 2, 3};
  other.q.resize(3 * 16 * 576);
  other.out.resize(3 * 16 * 512, kOutFill);
  other.lse.resize(3 * 16, 7.0f);
  other.p.batch = 3;
  other.p.total_q = 3;
  other.p.q = other.q.data();
  other.p.qo_indptr = other.qo.data();
  other.p.kv_indptr = other.kv.data();
  other.p.out = other.out.data();
  other.p.lse = other.lse.data();
  s = mla::run(other.p, plan);
  EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
  EXPECT_NE(s.message.find("plan"), std::string::npos) << s.message;
  EXPECT_TRUE(other.outputs_untouched());
}

TEST(Validate, SmScaleNotFinite) {
  for (float scale : {NAN, INFINITY, -INFINITY}) {
    Host h;
    h.p.sm_scale = scale;
    expect_invalid_both(h.p, "sm_scale");
  }
}

TEST(Validate, KvRowsNegative) {
  Host h;
  h.p.kv.rows = -1;
  expect_invalid_both(h.p, "kv.rows");
}

TEST(Validate, PageTableEntriesZero) {
  Host h;
  h.make_paged();
  h.p.paging.page_table_entries = 0;
  expect_invalid_both(h.p, "page_table_entries");
}

TEST(Validate, CudaMisalignedIndexArrays) {
  for (int which = 0; which < 3; ++which) {
    Problem p = cuda_problem(KvFormat::bf16);
    if (which == 2) {
      p.paging.page_size = 16;
      p.paging.page_table_entries = 1 << 16;
      p.paging.page_table_stride = 1 << 14;
      p.paging.page_table = fake_device_ptr<const std::int32_t>(0x7f0000500002);
    } else {
      (which == 0 ? p.qo_indptr : p.kv_indptr) = fake_device_ptr<const std::int32_t>(0x7f0000200202);
    }
    expect_invalid(p, Backend::cuda, "4-byte aligned");
  }
}

TEST(Validate, UnknownBackend) {
  Host h;
  const auto bad = static_cast<Backend>(7);
  expect_invalid(h.p, bad, "unknown backend");
  std::size_t bytes = 0;
  EXPECT_EQ(mla::workspace_size(h.p, bad, &bytes).code, StatusCode::invalid_argument);
  std::vector<std::uint8_t> ws(1 << 20);
  mla::Plan plan;
  EXPECT_EQ(mla::plan(h.p, bad, ws.data(), ws.size(), &plan).code, StatusCode::invalid_argument);
  plan.backend = bad;
  EXPECT_EQ(mla::run(h.p, plan).code, StatusCode::invalid_argument);
  EXPECT_TRUE(h.outputs_untouched());
}

TEST(Validate, NullResultPointersOfTheEntryPoints) {
  Host h;
  mla::Status s = mla::workspace_size(h.p, Backend::cpu, nullptr);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("bytes is null"), std::string::npos) << s.message;
  std::vector<std::uint8_t> ws(1 << 20);
  s = mla::plan(h.p, Backend::cpu, ws.data(), ws.size(), nullptr);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("plan output is null"), std::string::npos) << s.message;
}

TEST(Validate, CpuWorkspaceMisaligned) {
  Host h;
  std::size_t bytes = 0;
  ASSERT_TRUE(mla::workspace_size(h.p, Backend::cpu, &bytes).ok());
  std::vector<std::uint8_t> ws(bytes + 16, 0xA5);
  mla::Plan plan;
  const mla::Status s = mla::plan(h.p, Backend::cpu, ws.data() + 1, bytes, &plan);
  EXPECT_EQ(s.code, StatusCode::invalid_argument);
  EXPECT_NE(s.message.find("4-byte aligned"), std::string::npos) << s.message;
  EXPECT_TRUE(std::all_of(ws.begin(), ws.end(), [](std::uint8_t c) { return c == 0xA5; })) << "workspace written";
}

// Where the cuda backend cannot run (no CUDA build, no GPU, not sm_90), a valid problem gets
// no_device from every entry point, not a crash and not a description error.
TEST(Validate, CudaWithoutAUsableDeviceIsNoDevice) {
  if (mla::cuda_available()) GTEST_SKIP() << "this machine has a usable sm_90 GPU";
  const Problem p = cuda_problem(KvFormat::fp8);
  std::size_t bytes = 0;
  mla::Status s = mla::workspace_size(p, Backend::cuda, &bytes);
  EXPECT_EQ(s.code, StatusCode::no_device) << s.message;
  // The message says what is missing, not only the CUDA runtime's own words (which, without a
  // driver, speak of driver versions).
  EXPECT_TRUE(s.message.find("no usable CUDA device") != std::string::npos ||
              s.message.find("needs an sm_90 GPU") != std::string::npos ||
              s.message.find("without CUDA") != std::string::npos)
      << s.message;
  mla::Plan plan;
  s = mla::plan(p, Backend::cuda, fake_device_ptr<void>(0x7f0200000000), 1 << 20, &plan);
  EXPECT_EQ(s.code, StatusCode::no_device) << s.message;
}

TEST(Validate, CudaPlanReportsADescriptionErrorBeforeAnyDeviceWork) {
  // On fake device pointers, with or without a usable GPU: the description error (not no_device,
  // not a crash) comes first. CudaWithoutAUsableDeviceIsNoDevice covers a valid problem.
  Problem p = cuda_problem(KvFormat::bf16);
  p.q = nullptr;
  mla::Plan plan;
  const mla::Status s = mla::plan(p, Backend::cuda, fake_device_ptr<void>(0x7f0200000000), 1 << 20, &plan);
  EXPECT_EQ(s.code, StatusCode::invalid_argument) << s.message;
  EXPECT_NE(s.message.find("q is null"), std::string::npos) << s.message;
}

}  // namespace
