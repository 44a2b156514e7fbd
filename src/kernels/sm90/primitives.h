// Device primitives shared by the sm90 decode kernels: asynchronous copies, ldmatrix, and the
// logical-token → physical-KV-row map of one request (contiguous or paged).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/tensor_map_shape.h"

namespace mla::sm90 {

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes = 0 writes zeros without reading (masked rows).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}
// The L2 policy of the KV reads in the kernels launched for DecodeParams::kv_evict_first (the
// others read without a policy): evict-first makes the KV lines, read once per call, the first
// victims, so that a stream of KV replaces earlier KV instead of what else the L2 holds — dirty lines
// among them, whose eviction costs a DRAM write-back (perf-notes v94). (Copies under an evict_normal
// policy instead of none measured 8 % slower for bf16 at 256 × 8192: v94b.)
__device__ __forceinline__ std::uint64_t kv_evict_first_policy() {
  std::uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
// 16 (or 2) read-only bytes into registers under an L2 policy (MXFP4's raw and scale loads).
__device__ __forceinline__ uint4 ldg16(const void* src, std::uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(src), "l"(policy));
  return v;
}
__device__ __forceinline__ std::uint32_t ldg2(const unsigned short* src, std::uint64_t policy) {
  unsigned short v;
  asm volatile("ld.global.nc.L2::cache_hint.u16 %0, [%1], %2;\n" : "=h"(v) : "l"(src), "l"(policy));
  return v;
}
__device__ __forceinline__ std::uint32_t ldg4(const std::uint32_t* src, std::uint64_t policy) {
  std::uint32_t v;
  asm volatile("ld.global.nc.L2::cache_hint.u32 %0, [%1], %2;\n" : "=r"(v) : "l"(src), "l"(policy));
  return v;
}
// cp_async16 under an L2 policy. CUDA 13.0's ptxas can encode this copy wrongly (an odd uniform
// register as its descriptor, next to a uniform shared-memory offset: an illegal instruction at run
// time; seen in fp8's row-by-row copies, caught by the GPU tests, and in bf16's row-pair kernel, which
// no test ran): every kernel path that uses it must run in tests/gpu, and the build rejects such an
// encoding where nvdisasm is at hand (cmake/cuda_compile_check.sh).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes, std::uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes), "l"(policy)
               : "memory");
}
// The KV reads of a kernel instantiated for DecodeParams::kv_evict_first (kEvictFirst) or not:
// under kv_evict_first_policy, or plain (cp_async16, __ldg).
template <bool kEvictFirst>
__device__ __forceinline__ void cp_async16_kv(void* dst, const void* src, int src_bytes) {
  if constexpr (kEvictFirst) {
    cp_async16(dst, src, src_bytes, kv_evict_first_policy());
  } else {
    cp_async16(dst, src, src_bytes);
  }
}
template <bool kEvictFirst>
__device__ __forceinline__ uint4 ldg_kv16(const void* src) {
  if constexpr (kEvictFirst) return ldg16(src, kv_evict_first_policy());
  return __ldg(reinterpret_cast<const uint4*>(src));
}
template <bool kEvictFirst>
__device__ __forceinline__ std::uint32_t ldg_kv2(const unsigned short* src) {
  if constexpr (kEvictFirst) return ldg2(src, kv_evict_first_policy());
  return __ldg(src);
}
template <bool kEvictFirst>
__device__ __forceinline__ std::uint32_t ldg_kv4(const std::uint32_t* src) {
  if constexpr (kEvictFirst) return ldg4(src, kv_evict_first_policy());
  return __ldg(src);
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// mbarriers (8 bytes of shared memory each) completed by cp.async copies: each thread arrives
// (cp_async_arrive) once its copies landed; threads waiting on the phase then see the bytes.
__device__ __forceinline__ void mbar_init(std::uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Publishes initialised barriers (then a CTA barrier before their first use).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Arrives once all of this thread's earlier cp.async copies have landed (.noinc: the arrival is one
// of those the phase expects).
__device__ __forceinline__ void cp_async_arrive(std::uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Orders this thread's earlier shared-memory accesses (generic proxy) before its later async-proxy
// ones (TMA copies, wgmma operand reads).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// One 3-D tensor-map copy (TMA) global → shared: the box at element coordinates (x, y, z) of `map` (a
// __grid_constant__ parameter) to `dst`, counted on `bar` as transaction bytes; under the KV's L2
// policy when kEvictFirst.
template <bool kEvictFirst>
__device__ __forceinline__ void tma_load_3d(void* dst, const void* map, int x, int y, int z, std::uint64_t* bar) {
  const auto m = reinterpret_cast<std::uint64_t>(map);
  if constexpr (kEvictFirst) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(smem_addr(dst)),
        "l"(m), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar)), "l"(kv_evict_first_policy())
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_addr(dst)),
        "l"(m), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar))
        : "memory");
  }
}
// This thread's arrival, announcing `bytes` of transactions (bulk copies) the phase also waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// A whole tile by one tensor-map copy, issued by one thread (the TMA kernels' thread 0): the box at
// (0, y, 0) of `map` to the stage `dst`, its `bytes` announced on the stage's barrier `bar` with this
// thread's arrival (the others arrive plainly). The stage's last generic-proxy accesses (ldmatrix
// reads, P's stores) are ordered before the copy by the CTA barrier every thread passed since, and
// the proxy fence here.
template <bool kEvictFirst>
__device__ __forceinline__ void tma_tile_copy(void* dst, const void* map, int y, std::uint32_t bytes,
                                              std::uint64_t* bar) {
  fence_proxy_async();
  mbar_arrive_expect_tx(bar, bytes);
  tma_load_3d<kEvictFirst>(dst, map, 0, y, 0, bar);
}
// Bytes from `smem` (dynamic shared memory) to its first multiple of kSwizzleAlign, where stages
// written with the 128-byte swizzle start (the TMA kernels ask for kSwizzleAlign more).
__device__ __forceinline__ std::uint32_t swizzle_align_bytes(const void* smem) {
  return -smem_addr(smem) & (kSwizzleAlign - 1);
}
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Waits until the phase of parity `parity` (0 for the first phase, 1 for the second, …) completed.
// The caller must know the barrier is no more than one phase ahead of it.
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, std::uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// Four 8×8 b16 matrices from mma fragments (lane 4g + c holds row g, columns 2c, 2c + 1 of each)
// to shared memory: lane l gives the address of row l % 8 of matrix l / 8 (16 contiguous bytes).
__device__ __forceinline__ void stmatrix_x4(void* p, std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                            std::uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr(p)), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// The same, each matrix transposed on the way: lane 4g + c's row g, columns 2c, 2c + 1 land in rows 2c,
// 2c + 1 at column g (lane l still gives the address of stored row l % 8 of matrix l / 8).
__device__ __forceinline__ void stmatrix_x4_trans(void* p, std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                                  std::uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(smem_addr(p)), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// Lets a dependent grid launched with programmatic stream serialization (the combine) start now;
// it waits in griddepcontrol.wait until this grid has finished and its writes are visible.
__device__ __forceinline__ void launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// ── conversions ─────────────────────────────────────────────────────────────────────────────────
// fp32 → bf16 pair (round to nearest even), one instruction, `lo` in the low half. (bf16.h's
// float_to_bf16 is the host recipe; they differ only in a NaN's payload.)
__device__ __forceinline__ std::uint32_t bf16x2_rn(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// fp32 → fp16 pair (round to nearest even, as partial.h's float_to_half), `lo` in the low half.
__device__ __forceinline__ std::uint32_t f16x2_rn(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// x, hidden from the optimizer: a loop over passes that starts at opaque(0) is neither peeled nor
// unrolled, so its body (one copy of the code) runs in every pass. Used to run code once with its
// memory accesses switched off, so that the real pass finds it in the instruction caches (perf-notes v70c).
__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}

// Work item i: from the launch parameters when run() put the work list there (the constant bank,
// no memory round trip before a CTA's first loads), else from the workspace.
__device__ __forceinline__ WorkItem work_item(const DecodeParams& p, int i) {
  return i < p.num_param_items ? p.param_items[i] : p.items[i];
}

// The 128-byte line holding `ptr` into L2 (no registers written, nothing waited for).
__device__ __forceinline__ void prefetch_l2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(ptr));
}

// The 128-byte line holding `ptr` into L1.
__device__ __forceinline__ void prefetch_l1(const void* ptr) {
  asm volatile("prefetch.global.L1 [%0];\n" ::"l"(ptr));
}

// Logical token n of request b → its physical KV row (64-bit: the cache may exceed 2^31 bytes).
struct KvRowMap {
  const DecodeParams& p;
  std::int64_t row_base = 0;   // contiguous: kv_indptr[b]
  std::int64_t page_base = 0;  // paged: first page-table entry of the request

  // The map of work item w's request b = w.request / s_q: its base comes with the item (the planner's
  // kv_base = kv_indptr[b]), so no load stands between the item and its first copies.
  __device__ KvRowMap(const DecodeParams& params, const WorkItem& w) : p(params) {
    if (p.page_table == nullptr) {
      row_base = w.kv_base;
    } else {
      page_base =
          p.page_table_stride > 0 ? std::int64_t(w.request / p.s_q) * p.page_table_stride : std::int64_t(w.kv_base);
    }
  }
  // The map of a request whose base() is known already.
  struct KnownBase {};
  __device__ KvRowMap(const DecodeParams& params, KnownBase, std::int64_t base)
      : p(params), row_base(base), page_base(base) {}
  __device__ std::int64_t base() const { return p.page_table == nullptr ? row_base : page_base; }
  __device__ bool contiguous() const { return p.page_table == nullptr; }
  __device__ std::int64_t operator()(int n) const {
    return p.page_table == nullptr ? row_base + n : row_in(page_of(n), n);
  }
  // Paged: operator() in two steps, so that the page-table load can go out early — token n's page, and
  // token n's row given that page.
  __device__ int page_of(int n) const { return __ldg(entry_of(n)); }
  // Paged: token n's page-table entry.
  __device__ const std::int32_t* entry_of(int n) const { return p.page_table + page_base + (n >> p.page_shift); }
  // Prefetches of the page table's 128-byte lines from entry e on: line_start(e) is where e's line
  // starts, in_table(a, e) the address a prefetch of the line at `a` takes — e itself for e's own line,
  // whose start may lie before the table.
  static __device__ const char* line_start(const std::int32_t* e) {
    return reinterpret_cast<const char*>(e) - (reinterpret_cast<std::uintptr_t>(e) & 127);
  }
  static __device__ const void* in_table(const char* a, const std::int32_t* e) {
    return a < reinterpret_cast<const char*>(e) ? static_cast<const void*>(e) : a;
  }
  __device__ std::int64_t row_in(int page, int n) const {
    return (std::int64_t(page) << p.page_shift) + (n & ((1 << p.page_shift) - 1));
  }
  // Whether tokens [t0, t0 + n) sit in consecutive physical rows: always in a contiguous cache; paged,
  // when one page holds them all (a 64-row tile in pages of ≥ 64 rows, a warp's 16-row group in pages
  // of ≥ 16; usually so, since work items are cut on tile boundaries, but checked, not assumed: a cut
  // list may start an item anywhere). Then row (*this)(t0) + i holds token t0 + i.
  __device__ bool one_run(int t0, int n) const {
    return p.page_table == nullptr || (t0 >> p.page_shift) == ((t0 + n - 1) >> p.page_shift);
  }
  // Paged: the page-table entries of tokens [begin, end) into L2, thread `tid` of `threads` taking
  // every threads-th of their 128-byte lines (the first from the first entry on). The page table is
  // as cold in L2 as the KV, and the kernels look a tile's pages up right before its copies: without
  // this, tiles in new lines of the table (every tile in pages of 1 row) wait for DRAM (perf-notes
  // v147). Nothing for a contiguous cache.
  __device__ void prefetch_pages(int begin, int end, int tid, int threads) const {
    if (p.page_table == nullptr || end <= begin) return;
    const std::int32_t *first = entry_of(begin), *last = entry_of(end - 1);  // inclusive
    for (const char* a = line_start(first) + std::ptrdiff_t(128) * tid; a <= reinterpret_cast<const char*>(last);
         a += std::ptrdiff_t(128) * threads) {
      prefetch_l2(in_table(a, first));
    }
  }
  // Paged: the page-table lines of tokens [t0, min(t0 + n, end)) into L1, lane i the i-th line (at
  // most 32 lines). A kernel calls it a tile before that tile's lookups: under a full DRAM stream an
  // L1 miss waits behind the KV copies in flight, right before the copies it would address (perf-notes
  // v147). Nothing for a contiguous cache.
  __device__ void prefetch_table_l1(int t0, int n, int end, int lane) const {
    if (p.page_table == nullptr || t0 >= end) return;
    const std::int32_t *first = entry_of(t0), *last = entry_of(min(t0 + n, end) - 1);  // inclusive
    const char* a = line_start(first) + std::ptrdiff_t(128) * lane;
    if (a <= reinterpret_cast<const char*>(last)) prefetch_l1(in_table(a, first));
  }
  // The row of token n of a tile starting at token t0, or, for n past `end`, token t0's row: a row
  // that exists, for copies of 0 bytes (or loads whose values are masked) at the tile's tail.
  __device__ std::int64_t row_or_first(int n, int t0, int end) const { return (*this)(n < end ? n : t0); }
  // Row tables (fp8's kernels of pages of 1 and 16 rows, MXFP4's and bf16's of pages of 1; perf-notes
  // v149, v150, v152, v153; their shared memory: SmemWithRowTable): thread i < 64 of a
  // warpgroup owns token t0 + i of the warpgroup's tokens of a tile starting at `first` (past `end`:
  // token `first`, as row_or_first). table_page looks its page up a tile ahead; table_offset is then its
  // row's byte offset into p.kv, which the kernel stores into shared memory a barrier before the tile's
  // copies or loads read it.
  __device__ int table_token(int t0, int first, int end, int i) const { return t0 + i < end ? t0 + i : first; }
  __device__ int table_page(int t0, int first, int end, int i) const { return page_of(table_token(t0, first, end, i)); }
  __device__ std::int64_t table_offset(int page, int t0, int first, int end, int i) const {
    return row_in(page, table_token(t0, first, end, i)) * p.kv_row_stride;
  }
};

// A row-table kernel's shared memory (KvRowMap::table_offset): the kernel's own `S` plus the byte
// offsets into p.kv of each of its kRows warpgroups' kTokens rows of the tile whose copies or loads go
// out next, written a barrier before they are read; two buffers, for tiles of even and odd index.
// Without kTable, `S` alone.
template <class S, int kRows, int kTokens>
struct WithRowTable : S {
  std::int64_t row_off[2][kRows][kTokens];  // [tile % 2][warpgroup][token of its kTokens] bytes into p.kv
};
template <class S, int kRows, int kTokens, bool kTable>
using SmemWithRowTable = std::conditional_t<kTable, WithRowTable<S, kRows, kTokens>, S>;

}  // namespace mla::sm90
