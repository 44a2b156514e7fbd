// plan() and run() when the host heap runs out: a Status (StatusCode::out_of_memory), not an
// exception through the API, and no output written. This binary's global operator new is replaced
// by one that can be told to fail, and operator delete by its match.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "mla/mla.h"

namespace {
std::atomic<bool> g_fail_new{false};
}  // namespace

void* operator new(std::size_t n) {
  if (g_fail_new.load(std::memory_order_relaxed)) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace {

using mla::Backend;
using mla::StatusCode;

// Every host allocation fails while one of these lives.
struct HeapExhausted {
  HeapExhausted() { g_fail_new = true; }
  ~HeapExhausted() { g_fail_new = false; }
  HeapExhausted(const HeapExhausted&) = delete;
  HeapExhausted& operator=(const HeapExhausted&) = delete;
};

TEST(OutOfMemory, PlanAndRunReturnAStatusAndWriteNothing) {
  // Two bf16 requests of 70 and 200 tokens (the second split on any core count: several items).
  const std::vector<std::uint16_t> q(2 * 16 * 576, 0x3C00);
  const std::vector<std::int32_t> qo{0, 1, 2}, kv{0, 70, 270};
  const std::vector<std::uint16_t> cache(270 * 576, 0x3C00);
  std::vector<std::uint16_t> out(2 * 16 * 512, 0x1234);
  std::vector<float> lse(2 * 16, 7.0f);
  mla::Problem p;
  p.batch = 2;
  p.total_q = 2;
  p.q = q.data();
  p.qo_indptr = qo.data();
  p.kv_indptr = kv.data();
  p.kv.data = cache.data();
  p.kv.rows = 270;
  p.kv.row_stride_bytes = 1152;
  p.out = out.data();
  p.lse = lse.data();
  std::size_t bytes = 0;
  ASSERT_TRUE(mla::workspace_size(p, Backend::cpu, &bytes).ok());
  std::vector<unsigned char> ws(bytes);
  const auto untouched = [&] {
    for (std::uint16_t v : out) {
      if (v != 0x1234) return false;
    }
    for (float v : lse) {
      if (v != 7.0f) return false;
    }
    return true;
  };

  mla::Plan plan;
  mla::Status s;
  {
    HeapExhausted oom;
    s = mla::plan(p, Backend::cpu, ws.data(), ws.size(), &plan);
  }
  EXPECT_EQ(s.code, StatusCode::out_of_memory) << s.message;
  EXPECT_TRUE(untouched());

  ASSERT_TRUE(mla::plan(p, Backend::cpu, ws.data(), ws.size(), &plan).ok());
  {
    HeapExhausted oom;
    s = mla::run(p, plan);
  }
  EXPECT_EQ(s.code, StatusCode::out_of_memory) << s.message;
  EXPECT_TRUE(untouched());

  // With memory, the same plan runs: the failure above was the heap's, not the problem's.
  s = mla::run(p, plan);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_FALSE(untouched());
}

}  // namespace
