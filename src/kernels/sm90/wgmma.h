// wgmma building blocks shared by the sm90 wgmma decode kernels (decode_fp8.cu, decode_mxfp4.cu,
// decode_bf16_pairs.cu): shared-memory descriptors of the canonical layouts (no swizzle, 128-byte swizzle), the
// warpgroup-level MMA wrappers, register fences, Q's global loads and the output epilogue. One warpgroup per CTA
// (kThreads), or two for row pairs: fp8's and MXFP4's share one item's columns (the maxima and the
// epilogue then take kRows = 2), bf16's split each tile's k steps and dims (CtaSyncWarpgroupWarps).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/partial.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/cluster_merge.h"
#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/primitives.h"
#include "mla/mla.h"

namespace mla::sm90::wg {

constexpr int kThreads = 128;  // one warpgroup
constexpr int kWarps = kThreads / 32;
// Split partials as fp16 · scale (kernels/common/partial.h): half the bytes (perf-notes v67).
constexpr bool kPartialsF16 = true;
constexpr int kTile = 64;                // tokens per tile: the wgmma M
constexpr int kSteps = kHeadDim / 16;    // k16 steps of S (36)
constexpr int kMTiles = kValueDim / 64;  // m64 tiles of Oᵀ (8)
// An m64n16 accumulator (Sᵀ, Oᵀ: heads in N) gives the thread of column pair c = lane % 4 the heads
// acc_head(i, c) = 2c, 2c+1, 8+2c, 9+2c (i = 0..3); head i sits in register acc_reg(i) at row g and
// acc_reg(i) + 2 at row g + 8. An m64n32 one (a row pair: columns 16r + head of row r) continues
// with i = 4..7: columns 16 + 2c, …, registers 8.. .
constexpr int acc_head(int i, int c) {
  return 8 * (i / 2) + 2 * c + (i % 2);
}
constexpr int acc_reg(int i) {
  return (i / 2) * 4 + (i % 2);
}
static_assert(kTile == 16 * kWarps, "each warp owns 16 tokens of the tile (wgmma M rows)");

// Canonical K-major, no-swizzle wgmma layout: core matrices of 8 rows × 16 bytes (128 B,
// contiguous); core matrices adjacent in K 128 B apart (LBO), 8-row groups one row-block apart (SBO).
template <int kRows, int kKBytes>
struct CoreTile {
  static constexpr int kChunks = kKBytes / 16;
  static constexpr int sbo() { return kChunks * 128; }  // bytes between 8-row groups
  alignas(128) std::uint8_t bytes[kRows / 8][kChunks][8][16];
};

// ── wgmma ───────────────────────────────────────────────────────────────────────────────────────
// Descriptor of a no-swizzle canonical layout: core matrices (8 × 16 bytes, contiguous) `lbo` bytes
// apart along the leading dimension and `sbo` bytes apart along the strided one. K-major: LBO steps
// K, SBO steps M/N by 8 rows. MN-major: LBO steps K by 8, SBO steps M/N by 8 elements.
__device__ __forceinline__ std::uint64_t desc(const void* smem, int sbo, int lbo = 128) {
  const std::uint32_t a = smem_addr(smem);
  return std::uint64_t((a & 0x3FFFF) >> 4) | (std::uint64_t(lbo >> 4) << 16) | (std::uint64_t(sbo >> 4) << 32);
}
// Descriptor of a 128-byte-swizzle layout (rows of 128 bytes, the 16-byte chunks of row r XOR r % 8,
// 8-row atoms of 1,024 bytes at 1,024-byte aligned addresses: what a TMA copy with the 128-byte
// swizzle writes, bf16_stage::boxes). K-major: a row is an M/N row, `sbo` steps 8 of them, a k16
// step within the 128 bytes advances the start address by 32 bytes. MN-major (bf16, M or N ≤ 64):
// a row is one K index holding 64 M/N elements, `sbo` steps 8 K rows.
__device__ __forceinline__ std::uint64_t desc_sw128(const void* smem, int sbo) {
  return desc(smem, sbo, 16) | (std::uint64_t(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Keeps the compiler from moving accumulator reads/writes across the asynchronous wgmma.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void fence_regs(std::uint32_t (&a)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// D[64×N] (+)= A · Bᵀ, N = 16 or 32, with A in registers (this warp's 16 rows of the 64) and B[N × K] in shared
// memory. kAccumulate = false starts a fresh accumulator (D's old contents ignored).
// e4m3, K = 32:
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_rs(float (&d)[8], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, acc, 1, "
      "1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int(kAccumulate)));
}
// e4m3, K = 32, N = 32 (a row pair's heads: decode_fp8.cu's pair kernel):
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_rs(float (&d)[16], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "{%16,%17,%18,%19}, %20, acc, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int(kAccumulate)));
}
// fp16, K = 16:
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_rs_f16(float (&d)[8], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, acc, 1, 1, "
      "0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int(kAccumulate)));
}
// fp16, K = 16, N = 32 (decode_fp8.cu's pair kernel):
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_rs_f16(float (&d)[16], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "{%16,%17,%18,%19}, %20, acc, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int(kAccumulate)));
}
// bf16, K = 16:
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_rs_bf16(float (&d)[8], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, acc, 1, "
      "1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int(kAccumulate)));
}
// bf16, K = 16, N = 32 (a row pair's heads: decode_mxfp4.cu's pair kernel):
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_rs_bf16(float (&d)[16], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "{%16,%17,%18,%19}, %20, acc, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(int(kAccumulate)));
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// bf16, K = 16, both operands in shared memory and K-major.
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_ss_bf16(float (&d)[8], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, acc, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "n"(int(kAccumulate)));
}
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_ss_bf16(float (&d)[16], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "%16, %17, acc, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "n"(int(kAccumulate)));
}
// bf16, K = 16, both operands in shared memory: A MN-major (transposed), B K-major.
template <bool kAccumulate = true>
__device__ __forceinline__ void wgmma_ss_bf16_mn(float (&d)[8], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, acc, 1, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "n"(int(kAccumulate)));
}
__device__ __forceinline__ void wgmma_ss_bf16_mn(float (&d)[16], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n.reg .pred acc;\nsetp.ne.b32 acc, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
      "%16, %17, acc, 1, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b));
}

// ── Q ───────────────────────────────────────────────────────────────────────────────────────────
// fetch_q issues Q's loads of q row `v` (first thing in a kernel: they need only the work item);
// each kernel's store_q converts and stores them in its own layout. Piece j of a thread (8 bf16
// dims, q_piece): warp w holds heads 4w..4w+3, lane l head 4w + l/8, dims 8·(l%8 + 8j) .. + 7 — the
// 8 lanes of a head can reduce over it by shuffles, and a warp load is 4 runs of 128 bytes.
constexpr int kQPieces = kNumHeads * kHeadDim / 8;  // 8 bf16 each
constexpr int kQPerThread = kQPieces / kThreads;
static_assert(kQPieces % kThreads == 0, "whole Q pieces per thread");
static_assert(kNumHeads == 4 * kWarps && kHeadDim == 64 * kQPerThread, "q_piece: 4 heads per warp, 8 lanes per head");
struct QPiece {
  int h, d0;  // head, first dim
};
__device__ __forceinline__ QPiece q_piece(int j) {
  const int lane = threadIdx.x % 32;
  return {4 * (int(threadIdx.x) / 32) + lane / 8, 8 * (lane % 8 + 8 * j)};
}
struct QRegs {
  uint4 x[kQPerThread];
};
__device__ __forceinline__ QRegs fetch_q(const DecodeParams& p, int v) {
  const std::uint16_t* row = p.q + std::int64_t(v) * kNumHeads * kHeadDim;
  QRegs q;
#pragma unroll
  for (int j = 0; j < kQPerThread; ++j) {
    const QPiece pc = q_piece(j);
    q.x[j] = __ldg(reinterpret_cast<const uint4*>(row + pc.h * kHeadDim + pc.d0));
  }
  return q;
}

// ── warpgroups and rows ──────────────────────────────────────────────────────────────────────────
// The thread's warpgroup (0 unless row pairs) and its index in it.
template <int kRows>
__device__ __forceinline__ int wg_of() {
  // (Through a shuffle from lane 0: the compiler then knows it is warp-uniform.)
  return kRows == 1 ? 0 : __shfl_sync(0xffffffffu, int(threadIdx.x) / kThreads, 0);
}
template <int kRows>
__device__ __forceinline__ unsigned wg_tid() {
  return kRows == 1 ? threadIdx.x : threadIdx.x % kThreads;
}
// Row r of a work item of kRows q rows sees its keys [kv_begin, row_end): a row pair's first row all
// but the pair's last (WorkItem::pair_end).
template <int kRows>
__device__ __forceinline__ int row_end(const WorkItem& item, int r) {
  return kRows == 2 && r == 0 ? item.pair_end : item.kv_end;
}

// ── barriers ────────────────────────────────────────────────────────────────────────────────────
// The threads that meet in tile_maxima and write_output, and the warp's index among them: the CTA
// (one warpgroup, or a row pair's two), or the CTA's barrier with each warpgroup's warps indexed on
// their own (bf16 row pairs: each warpgroup reduces the maxima of the whole Sᵀ over its own 4 warps
// in its own `red`; both warpgroups take every barrier, the vote deciding for both).
struct CtaSync {
  __device__ int warp() const { return int(threadIdx.x / 32); }
  __device__ void sync() const { __syncthreads(); }
  __device__ bool any(bool b) const { return __syncthreads_or(b); }
};
struct CtaSyncWarpgroupWarps : CtaSync {
  __device__ int warp() const { return int(threadIdx.x / 32) % kWarps; }
};

// ── the tile's maxima ───────────────────────────────────────────────────────────────────────────
// The largest, or the sum, of column `col` over the kW warps' rows of `red` (a pairwise tree; the
// sum in warp order).
template <int kW, int kC>
__device__ __forceinline__ float max_over_warps(const float (&red)[kW][kC], int col) {
  if constexpr (kW == 4) {
    return fmaxf(fmaxf(red[0][col], red[1][col]), fmaxf(red[2][col], red[3][col]));
  } else {
    static_assert(kW == 8, "one or two warpgroups");
    return fmaxf(fmaxf(fmaxf(red[0][col], red[1][col]), fmaxf(red[2][col], red[3][col])),
                 fmaxf(fmaxf(red[4][col], red[5][col]), fmaxf(red[6][col], red[7][col])));
  }
}
template <int kW, int kC>
__device__ __forceinline__ float sum_over_warps(const float (&red)[kW][kC], int col) {
  float s = red[0][col];
#pragma unroll
  for (int w = 1; w < kW; ++w) s += red[w][col];
  return s;
}

// x[i][k]: this thread's logits of column acc_head(i, c) (i < kI: 4 per 16 columns of N) at its
// tokens g and g + 8 (−inf where masked). A column's running max moves only when some logit of the
// tile exceeds it by more than `slack`, so the tile's weights exp(x − m) stay ≤ e^slack — the kernel
// picks a slack its P format holds. The common case costs one block-wide vote, which is also the
// barrier the caller needs here. Rare jumps, and the item's first tile (`first`, uniform; m = −inf:
// no vote), take the exact path: each column's tile max over the CTA's kW warps (warp butterflies,
// one step through `red` and its barrier, which then serves the caller) and SoftmaxState::rescale_to.
// f[i]: the factor for what column i has accumulated (1 on the common path). Every thread takes the
// same path. `red` is free on entry and may be rewritten after the caller's next barrier.
template <int kI, int kW, class Sync = CtaSync>
__device__ __forceinline__ void tile_maxima(const float (&x)[kI][2], SoftmaxState<float> (&st)[kI], float slack,
                                            bool first, float (&red)[kW][4 * kI], float (&f)[kI], Sync bar = Sync{}) {
  const int warp = bar.warp(), lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  bool jump = false;
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    jump |= fmaxf(x[i][0], x[i][1]) > st[i].m + slack;
    f[i] = 1.f;
  }
  // The vote's result is the same in every thread; passing it through a warp vote tells the compiler
  // so (a branch it must treat as divergent moves the wgmma descriptors out of uniform registers).
  if (!first && !__any_sync(0xffffffffu, bar.any(jump))) return;
  float mx[kI];
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    mx[i] = fmaxf(x[i][0], x[i][1]);
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], off));
  }
  if (g == 0) {
#pragma unroll
    for (int i = 0; i < kI; ++i) red[warp][acc_head(i, c)] = mx[i];
  }
  bar.sync();  // red complete
#pragma unroll
  for (int i = 0; i < kI; ++i) f[i] = st[i].rescale_to(max_over_warps(red, acc_head(i, c)));
}

// ── epilogue ────────────────────────────────────────────────────────────────────────────────────
// The end of a work item of kRows q rows (1, or 2 for a row pair: two warpgroups, columns 16r + h
// the heads of q row item.request + r, each warpgroup holding Oᵀ for its kMTiles / kRows m-tiles of
// value rows over all the item's tokens): each column's l summed over the thread's rows (g) and the
// CTA's warps (through `red`, free on entry), the LSE written (partial or final), and Oᵀ scaled by
// 1/l · value_scale · `o_scale` (the kernel's own unit of O) stored as bf16 (direct), fp32 (partial,
// cluster mode: the exchange) or fp16 with a scale per head (partial, workspace: partial.h) to
// part[r]. The scale is set by `amax_bound` when the kernel knows a bound on |value| (kBounded),
// else by the column's |O| max, which meets through `omax` (shared memory, free on entry) in the
// same two barriers as l. st[i] is column acc_head(i, c) (same m in every thread: the partial l's
// add). o[mt][j]: j = 0/1 columns 2c/2c+1 at M row R = 64mt' + 16w + g (mt' this warpgroup's mt),
// 2/3 the same at R + 8, 4..7 columns 8+2c, 9+2c, and so on by 8 columns (acc_reg); dim_of(mt) is
// the dim D of row R, and row R + 8 holds dim D + kRowStep (1: one 32-bit store per pair of dims).
// `bar`: the threads that hold the item (CtaSync, or a warpgroup of its own, whose warps index red).
template <bool kBounded, int kRows, int kRowStep = 1, class DimOf, class Sync = CtaSync>
__device__ __forceinline__ void write_output(const DecodeParams& p, const WorkItem& item,
                                             const PartialDst (&part)[kRows],
                                             float (&red)[kWarps * kRows][kNumHeads * kRows],
                                             float (&omax)[kWarps * kRows][kNumHeads * kRows],
                                             SoftmaxState<float> (&st)[4 * kRows],
                                             const float (&o)[kMTiles / kRows][8 * kRows], float o_scale,
                                             float amax_bound, DimOf dim_of, Sync bar = Sync{}) {
  constexpr int kI = 4 * kRows, kMt = kMTiles / kRows;
  const int warp = bar.warp(), lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const bool to_workspace = item.partial >= 0 && part[0].o16 != nullptr;
  const bool reduce = to_workspace && !kBounded;
  bar.sync();  // red[] and omax[] free
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    float l = st[i].l;
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (g == 0) red[warp][acc_head(i, c)] = l;
  }
  if (reduce) {
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      const int j0 = acc_reg(i);
      float m = 0.f;
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) m = fmaxf(m, fmaxf(fabsf(o[mt][j0]), fabsf(o[mt][j0 + 2])));
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
      if (g == 0) omax[warp][acc_head(i, c)] = m;
    }
  }
  bar.sync();
  float inv[kI];
#pragma unroll
  for (int i = 0; i < kI; ++i) {
    const int col = acc_head(i, c), r = i / 4, h = col - kNumHeads * r;
    st[i].l = sum_over_warps(red, col);
    inv[i] = st[i].inv_l() * p.value_scale * o_scale;
    if (to_workspace) {
      const float amax = reduce ? max_over_warps(omax, col) * fabsf(inv[i]) : amax_bound;
      const PartialScale ps = partial_scale(amax);
      inv[i] *= ps.to_half;
      if (warp == 0 && g == 0) part[r].scale[h] = ps.scale;
    }
    if (warp == 0 && g == 0) {
      if (item.partial >= 0) {
        part[r].lse[h] = st[i].lse();
      } else if (p.lse != nullptr) {
        p.lse[(std::int64_t(item.request) + r) * kNumHeads + h] = st[i].lse();
      }
    }
  }
  // One unrolled store loop per destination (the branch taken once, not per store).
  const auto store_all = [&](auto store) {
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      const int dim = dim_of(mt);
#pragma unroll
      for (int i = 0; i < kI; ++i) {
        const int j0 = acc_reg(i), r = i / 4;
        store(r, (acc_head(i, c) - kNumHeads * r) * kValueDim + dim, o[mt][j0] * inv[i], o[mt][j0 + 2] * inv[i]);
      }
    }
  };
  // Two values of rows R and R + 8: one 32-bit store where they are adjacent dims, else two.
  const auto put = [](auto* d, std::uint32_t ab) {
    using E = std::remove_pointer_t<decltype(d)>;
    if constexpr (kRowStep == 1) {
      *reinterpret_cast<std::uint32_t*>(d) = ab;
    } else {
      d[0] = E(ab & 0xFFFFu);
      d[kRowStep] = E(ab >> 16);
    }
  };
  if (item.partial < 0) {
    std::uint16_t* out = p.out + std::int64_t(item.request) * kNumHeads * kValueDim;
    store_all([&](int r, int at, float a, float b) { put(out + r * kNumHeads * kValueDim + at, bf16x2_rn(a, b)); });
  } else if (to_workspace) {
    store_all([&](int r, int at, float a, float b) { put(part[r].o16 + at, f16x2_rn(a, b)); });
  } else {
    store_all([&](int r, int at, float a, float b) {
      if constexpr (kRowStep == 1) {
        *reinterpret_cast<float2*>(part[r].o + at) = make_float2(a, b);
      } else {
        part[r].o[at] = a;
        part[r].o[at + kRowStep] = b;
      }
    });
  }
}

// write_output, or in cluster mode (one q row per item only) write_output into `x` (this CTA's
// exchange) and cluster_merge; kBounded / amax_bound: write_output's. A row pair's second row goes
// to partial slot item.pair_partial.
// Out of cluster mode x.scratch is free (the tile loop is done with the memory under x) and holds
// write_output's omax.
template <bool kBounded, int kRows = 1, class DimOf>
__device__ __forceinline__ void finish_item(const DecodeParams& p, const WorkItem& item, ClusterExchange& x,
                                            float (&red)[kWarps * kRows][kNumHeads * kRows],
                                            SoftmaxState<float> (&st)[4 * kRows],
                                            const float (&o)[kMTiles / kRows][8 * kRows], float o_scale,
                                            float amax_bound, DimOf dim_of) {
  using Omax = float[kWarps * kRows][kNumHeads * kRows];
  static_assert(sizeof(x.scratch) >= sizeof(Omax), "omax fits the exchange's scratch");
  if constexpr (kRows == 1) {
    const PartialDst part[1] = {partial_dst<kPartialsF16>(p, item, &x.o[0][0], x.lse)};
    write_output<kBounded, 1>(p, item, part, red, *reinterpret_cast<Omax*>(x.scratch), st, o, o_scale, amax_bound,
                              dim_of);
    if (p.cluster > 0) cluster_merge<kThreads>(p, item.request, &x.o[0][0], x.lse, x.scratch);
  } else {
    static_assert(kRows == 2, "one q row or a row pair");
    WorkItem second = item;  // (cluster mode never takes row pairs: the plan's)
    second.partial = item.pair_partial;
    const PartialDst part[2] = {partial_dst<kPartialsF16>(p, item, nullptr, nullptr),
                                partial_dst<kPartialsF16>(p, second, nullptr, nullptr)};
    write_output<kBounded, 2>(p, item, part, red, *reinterpret_cast<Omax*>(x.scratch), st, o, o_scale, amax_bound,
                              dim_of);
  }
}

}  // namespace mla::sm90::wg
