// sm90 MLA decode from fp8 (e4m3) and MXFP4 KV with wgmma, the tokens in M: Sᵀ = K·Qᵀ, Oᵀ = Vᵀ·Pᵀ.
//
// Grid: one CTA per work item (q row v = b·s_q + i, KV range [kv_begin, kv_end)); one warpgroup
// (128 threads), two CTAs per SM. Tiles of 64 tokens copied as stored with cp.async into rows
// padded by 16 bytes (conflict-free ldmatrix); 2 stages (fp8) or 4 (MXFP4, with its E8M0 rows); the
// copies of the next tile go out in parts between the S register batches.
// Warp w copies and owns tokens 16w..16w+15 of a tile (its 16 rows of every wgmma M = 64).
//
//   Sᵀ = K·Qᵀ    wgmma m64n16k16, fp32 accumulation, A = K in registers from an ldmatrix of the raw
//                tile, B = Q in shared memory with its dims permuted to the fragments' k order:
//                  fp8:   one exact cvt.f16x2.e4m3x2 per pair; Q·2^e in fp16 (exact)
//                  MXFP4: bit placement of two E2M1 codes into a bf16 pair, times 2^(s − R_w + 126)
//                         (one exact bf16x2 multiply); Q in bf16 as given. R_w: the largest E8M0
//                         byte of the warp's 16 tokens, its 2^(R_w − 127) applied to the logits.
//                (fp8 wgmma accumulates in ~14-bit precision: too coarse for the logits.)
//   softmax      per head over the tile: warp butterflies + one shared-memory step for the max;
//                each thread keeps its partial l. fp8: P·2^8 = P_hi + P_lo, two e4m3 terms;
//                MXFP4: P·2^(R_w − A) in bf16 (A = the largest R_w so far, never decreasing).
//   Oᵀ += Vᵀ·Pᵀ  A = Vᵀ in registers from ldmatrix.trans of the same raw tile (4 bytes of one dim
//                from 4 tokens, or 8 codes of 2 tokens): fp8 by byte permutes, no conversion,
//                wgmma m64n16k32 e4m3 against P_hi then P_lo; MXFP4 by the same bit placement and
//                a per-token bf16 factor pair, wgmma m64n16k16 bf16. fp8: each tile's product goes
//                to fresh accumulators that are added to the fp32 O (fp8 wgmma accumulates in ~14
//                bits); MXFP4 accumulates in O itself, O kept in units of 2^(A − 127) and rescaled
//                only when a head's max or A moved.
//
// K and V are never expanded in shared or global memory; the fp8 tensor scale and 2^-8 of P are
// folded into the logit scale and the output.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/formats.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/launch.h"
#include "kernels/sm90/primitives.h"
#include "mla/mla.h"

namespace mla::sm90 {
namespace {

constexpr int kThreads = 128;  // one warpgroup
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 64;                // tokens per tile: the wgmma M
constexpr int kSteps = kHeadDim / 16;    // k16 steps of S (36)
constexpr int kMTiles = kValueDim / 64;  // m64 tiles of Oᵀ (8)
constexpr int kBlocks = kHeadDim / 32;   // MXFP4 scale blocks per row (18)
static_assert(kTile == 16 * kWarps, "each warp owns 16 tokens of the tile (wgmma M rows)");

template <KvFormat F>
struct Wg;
template <>
struct Wg<KvFormat::fp8> {
  static constexpr int kRowBytes = kHeadDim;  // e4m3
  static constexpr int kCtasPerSm = 2;
  static constexpr int kStages = 2;
  static constexpr int kBatch = 12;      // S k16 steps per register batch (6 ldmatrix of 2 steps)
  static constexpr int kPTerms = 2;      // P·2^8 = P_hi + P_lo
  static constexpr int kPBytes = kTile;  // bytes per P row
  static constexpr int kPvSteps = 2;     // k32 steps of P·V per tile
  static constexpr float kOutScale = 1.f / 256.f;
};
template <>
struct Wg<KvFormat::mxfp4> {
  static constexpr int kRowBytes = kHeadDim / 2;  // two E2M1 codes per byte
  static constexpr int kCtasPerSm = 2;
  static constexpr int kStages = 4;
  static constexpr int kBatch = 12;          // k16 steps per register batch (3 ldmatrix of two blocks = 4 steps)
  static constexpr int kPTerms = 1;          // P in bf16
  static constexpr int kPBytes = 2 * kTile;  // bytes per P row
  static constexpr int kPvSteps = 4;         // k16 steps of P·V per tile
  static constexpr float kOutScale = 1.f;
};

// Canonical K-major, no-swizzle wgmma layout: core matrices of 8 rows × 16 bytes (128 B,
// contiguous); core matrices adjacent in K 128 B apart (LBO), 8-row groups one row-block apart (SBO).
template <int kRows, int kKBytes>
struct CoreTile {
  static constexpr int kChunks = kKBytes / 16;
  static constexpr int sbo() { return kChunks * 128; }  // bytes between 8-row groups
  alignas(128) std::uint8_t bytes[kRows / 8][kChunks][8][16];
};

template <KvFormat F>
struct Smem {
  using T = Wg<F>;
  static constexpr bool kMx = F == KvFormat::mxfp4;
  static constexpr int kPitch = T::kRowBytes + 16;                              // bytes per KV row in shared memory
  alignas(128) std::uint8_t kv[T::kStages][kTile][kPitch];                      // the KV as stored
  CoreTile<kNumHeads, 2 * kHeadDim> q;                                          // Q, 16-bit, dims permuted
  CoreTile<kNumHeads, T::kPBytes> p[T::kPTerms];                                // P, token slots in fragment order
  alignas(16) std::uint8_t sc[kMx ? T::kStages : 1][kMx ? kBlocks : 1][kTile];  // E8M0 [block][token]
  alignas(16) std::uint16_t fac[kMx ? kBlocks : 1][kTile];   // bf16 2^(s − R_w + 126) [block][token]
  alignas(16) std::uint32_t fac2[kMx ? kBlocks : 1][kTile];  // the same, duplicated into a bf16 pair (K side)
  float red[kWarps][kNumHeads];                              // per-warp tile max (then l) per head
  float logit_scale[kNumHeads];                              // fp8, per head (× 2^-e); MXFP4 uses p's
  unsigned amax[kNumHeads];                                  // fp8: |Q| max per head (float bits)
  int rw[kWarps];                                            // MXFP4: R_w of this tile per warp
  static_assert((kPitch / 16) % 2 == 1, "row pitch must rotate the 16-byte bank groups (ldmatrix rows)");
};
static_assert(Wg<KvFormat::fp8>::kCtasPerSm * (sizeof(Smem<KvFormat::fp8>) + 1024) <= 228 * 1024,
              "fp8: kCtasPerSm CTAs must fit one SM's shared memory");
static_assert(Wg<KvFormat::mxfp4>::kCtasPerSm * (sizeof(Smem<KvFormat::mxfp4>) + 1024) <= 228 * 1024,
              "MXFP4: kCtasPerSm CTAs must fit one SM's shared memory");
static_assert(Wg<KvFormat::fp8>::kCtasPerSm <= kMaxDecodeCtasPerSm &&
                  Wg<KvFormat::mxfp4>::kCtasPerSm <= kMaxDecodeCtasPerSm,
              "the workspace is sized for kMaxDecodeCtasPerSm CTAs per SM");

// ── wgmma ───────────────────────────────────────────────────────────────────────────────────────
__device__ __forceinline__ std::uint64_t desc(const void* smem, int sbo) {
  const std::uint32_t a = smem_addr(smem);
  return std::uint64_t((a & 0x3FFFF) >> 4) | (std::uint64_t(128 >> 4) << 16) | (std::uint64_t(sbo >> 4) << 32);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Keeps the compiler from moving accumulator reads/writes across the asynchronous wgmma.
__device__ __forceinline__ void fence_regs(float (&d)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void fence_regs(std::uint32_t (&a)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[i])::"memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// D[64×16] (+)= A · Bᵀ with A in registers (this warp's 16 rows of the 64) and B[16 × K] in shared
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
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// ── e4m3 helpers ────────────────────────────────────────────────────────────────────────────────
// Two floats → e4m3x2 (round to nearest even, saturating): `lo` in the low byte.
__device__ __forceinline__ std::uint16_t to_e4m3x2(float lo, float hi) {
  std::uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ std::uint32_t e4m3x2_to_f16x2(std::uint16_t v) {  // exact
  std::uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(v));
  return h2;
}
// Four e4m3 bytes → fp16 pairs of bytes 0, 1 (lo) and bytes 2, 3 (hi), exact; the halves are
// split by register aliasing rather than a shift.
__device__ __forceinline__ void e4m3x4_to_f16x2x2(std::uint32_t r, std::uint32_t& lo, std::uint32_t& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(r));
}
__device__ __forceinline__ float2 from_e4m3x2(std::uint16_t v) {
  const std::uint32_t h2 = e4m3x2_to_f16x2(v);
  return __half22float2(*reinterpret_cast<const __half2*>(&h2));
}
__device__ __forceinline__ std::uint32_t pack_f16x2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// x ≈ hi + lo, both e4m3: exact for |x| < 448 with 8 significant bits down to 2^-6, and to within
// 2^-10 below (e4m3's subnormal step).
struct SplitE4m3x2 {
  std::uint16_t hi, lo;
};
__device__ __forceinline__ SplitE4m3x2 split_e4m3x2(float a, float b) {
  const std::uint16_t hi = to_e4m3x2(a, b);
  const float2 h = from_e4m3x2(hi);
  return {hi, to_e4m3x2(a - h.x, b - h.y)};
}

// The S wgmma of format F: fp16 (fp8 KV) or bf16 (MXFP4).
template <KvFormat F, bool kAccumulate = true>
__device__ __forceinline__ void wgmma_s(float (&d)[8], const std::uint32_t (&a)[4], std::uint64_t b) {
  if constexpr (F == KvFormat::fp8) {
    wgmma_rs_f16<kAccumulate>(d, a, b);
  } else {
    wgmma_rs_bf16<kAccumulate>(d, a, b);
  }
}

// ── MXFP4 helpers ───────────────────────────────────────────────────────────────────────────────
// Codes J and J + 4 of a word of 8 E2M1 codes (bits 4J.. and 16 + 4J..) → a bf16 pair worth
// value · 2^-126 each, exactly: magnitude bits to 6..8 (exponent 0..3, mantissa msb), sign to 15.
// Code 1 (0.5) becomes the subnormal 2^-127. J = 0, 1: the two codes alone, shifted twice at once
// by one multiply (the shifted copies do not overlap), then masked. e2m1_pairs gives all four.
template <int J>
__device__ __forceinline__ std::uint32_t e2m1_pair(std::uint32_t w) {
  static_assert(J == 0 || J == 1, "codes 2/6 and 3/7: shift the word right by 8 first");
  constexpr std::uint32_t kShifts = (1u << (6 - 4 * J)) + (1u << (12 - 4 * J));
  return ((w & (0x000F000Fu << (4 * J))) * kShifts) & 0x81C081C0u;
}
struct Pairs4 {
  std::uint32_t p[4];  // codes 0/4, 1/5, 2/6, 3/7
};
__device__ __forceinline__ Pairs4 e2m1_pairs(std::uint32_t w) {
  const std::uint32_t hi = w >> 8;
  return {{e2m1_pair<0>(w), e2m1_pair<1>(w), e2m1_pair<0>(hi), e2m1_pair<1>(hi)}};
}
__device__ __forceinline__ std::uint32_t mul_bf16x2(std::uint32_t a, std::uint32_t b) {  // exact for 2^k
  std::uint32_t r;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// fp8: token slot of tile token u inside its 16-token chunk of P — the k order of the Vᵀ register
// fragments (k slots 4c..4c+3 of a k32 half hold tokens 2c, 2c+1, 8+2c, 9+2c).
__device__ __forceinline__ int p_slot(int u) {
  return 4 * ((u % 8) / 2) + 2 * ((u % 16) / 8) + u % 2;
}

// ── copies ──────────────────────────────────────────────────────────────────────────────────────
// Tokens [t0, t0 + 64) ∩ [.., end) into stage `s`, rows past `end` zero-filled. Warp w copies rows
// 16w..16w+15, four at a time: lanes 8i..8i+7 take 128 contiguous bytes of one row per request
// (whole lines from global memory, one bank sweep per quarter-warp in shared memory). Two steps:
// tile_sources resolves the thread's four rows (paged: its page-table loads go out here, well
// before the copies need them; rows past `end` point at token t0, which exists, and copy 0 bytes),
// copy_rows<i0, i1> issues rows [i0, i1) — each copy its row's base plus a constant, no branch.
struct TileSources {
  const std::uint8_t* src[4];  // this lane's first byte of each of its rows
  unsigned valid;              // bit i: row i holds a token (< end)
};
template <KvFormat F>
__device__ __forceinline__ TileSources tile_sources(const DecodeParams& p, const KvRowMap& rows, int t0, int end) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  TileSources ts;
  ts.valid = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int n = t0 + 16 * warp + 4 * i + lane / 8;
    ts.valid |= (n < end ? 1u : 0u) << i;
    ts.src[i] = p.kv + rows.row_or_first(n, t0, end) * p.kv_row_stride + (lane % 8) * 16;
  }
  return ts;
}
template <KvFormat F, int kRow0 = 0, int kRow1 = 4>
__device__ __forceinline__ void copy_rows(Smem<F>& sm, int s, const TileSources& ts) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kChunks = Wg<F>::kRowBytes / 16;
  constexpr int kSweeps = (kChunks + 7) / 8;
  std::uint8_t* dst = &sm.kv[s][16 * warp + lane / 8][(lane % 8) * 16];
#pragma unroll
  for (int i = kRow0; i < kRow1; ++i) {
    const int bytes = (ts.valid >> i) & 1u ? 16 : 0;
#pragma unroll
    for (int q = 0; q < kSweeps; ++q) {
      if (lane % 8 + 8 * q < kChunks) cp_async16(dst + 4 * i * Smem<F>::kPitch + 128 * q, ts.src[i] + 128 * q, bytes);
    }
  }
}
template <KvFormat F>
__device__ __forceinline__ void load_tile(Smem<F>& sm, int s, const DecodeParams& p, const KvRowMap& rows, int t0,
                                          int end) {
  copy_rows<F>(sm, s, tile_sources<F>(p, rows, t0, end));
}

// MXFP4 E8M0 rows (18 bytes, 2-byte aligned) of the same tokens: thread → token tid/2, five or
// four of its nine byte pairs, loaded into registers now (each pair zero-extended into its own
// register: nothing touches them until the store) and stored, transposed, by store_scales at the end
// of the iteration, so that no thread waits on them. Rows past `end` load token t0's row and
// store zeros.
struct ScaleRegs {
  std::uint32_t v[5];
};
__device__ __forceinline__ const unsigned short* scale_source(const DecodeParams& p, const KvRowMap& rows, int t0,
                                                              int end) {
  const int r = threadIdx.x / 2, half = threadIdx.x % 2;
  const int n = t0 + r;
  return reinterpret_cast<const unsigned short*>(p.kv_scales + rows.row_or_first(n, t0, end) * p.scale_stride) +
         5 * half;
}
__device__ __forceinline__ ScaleRegs load_scales(const unsigned short* src) {
  const int half = threadIdx.x % 2;
  ScaleRegs sr;
#pragma unroll
  for (int i = 0; i < 5; ++i) sr.v[i] = (half == 0 || i < 4) ? __ldg(src + i) : 0u;
  return sr;
}
__device__ __forceinline__ void store_scales(Smem<KvFormat::mxfp4>& sm, int s, const ScaleRegs& sr, int t0, int end) {
  const int r = threadIdx.x / 2, half = threadIdx.x % 2;
  const std::uint32_t keep = t0 + r < end ? 0xFFFFu : 0u;
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    if (half == 0 || i < 4) {
      const int b = 2 * (5 * half + i);
      const std::uint32_t v = sr.v[i] & keep;
      sm.sc[s][b][r] = std::uint8_t(v);
      sm.sc[s][b + 1][r] = std::uint8_t(v >> 8);
    }
  }
}

// MXFP4, per tile and warp: R_w = the largest E8M0 byte of the warp's 16 tokens (≤ 253), and the
// bf16 factors 2^(s − R_w + 126) of those tokens in fac[block][token] (exact powers of two: s ≤ R_w),
// and as duplicated pairs in fac2 (the K fragments multiply both halves of a pair by one factor).
// Two steps, so that the shared-memory loads (fetch) go out before the tile copies are issued and
// the arithmetic (tile_factors) finds them landed.
constexpr int kFactorPairs = (kBlocks * 8 + 31) / 32;  // per lane: 144 token pairs of the warp by 32 lanes
struct ScaleTile {
  uint4 row;                        // lane < 18: E8M0 bytes of block `lane`, the warp's 16 tokens
  std::uint32_t two[kFactorPairs];  // E8M0 bytes of the lane's token pairs
};
__device__ __forceinline__ ScaleTile fetch_scales(const Smem<KvFormat::mxfp4>& sm, int stage, int warp, int lane) {
  ScaleTile x;
  x.row = lane < kBlocks ? *reinterpret_cast<const uint4*>(&sm.sc[stage][lane][16 * warp]) : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int i = 0; i < kFactorPairs; ++i) {
    const int pi = lane + 32 * i;
    const int b = pi / 8, t = 16 * warp + 2 * (pi % 8);
    x.two[i] = pi < kBlocks * 8 ? *reinterpret_cast<const std::uint16_t*>(&sm.sc[stage][b][t]) : 0u;
  }
  return x;
}
__device__ __forceinline__ int tile_factors(Smem<KvFormat::mxfp4>& sm, const ScaleTile& x, int warp, int lane) {
  unsigned m = __vmaxu4(__vmaxu4(x.row.x, x.row.y), __vmaxu4(x.row.z, x.row.w));
  m = max(max(m & 0xFF, (m >> 8) & 0xFF), max((m >> 16) & 0xFF, m >> 24));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  const int r = min(int(m), 253);
  const std::uint32_t k = std::uint32_t(253 - r) * 0x00010001u;
#pragma unroll
  for (int i = 0; i < kFactorPairs; ++i) {
    const int pi = lane + 32 * i;
    if (pi < kBlocks * 8) {
      const int b = pi / 8, t = 16 * warp + 2 * (pi % 8);
      const std::uint32_t f2 = (__byte_perm(x.two[i], 0, 0x4140) + k) << 7;  // tokens t, t + 1
      *reinterpret_cast<std::uint32_t*>(&sm.fac[b][t]) = f2;
      *reinterpret_cast<uint2*>(&sm.fac2[b][t]) = make_uint2(__byte_perm(f2, 0, 0x1010), __byte_perm(f2, 0, 0x3232));
    }
  }
  __syncwarp();
  return r;
}

// ── Q ───────────────────────────────────────────────────────────────────────────────────────────
// Q of q row `v` → shared memory in the wgmma K-major layout, its dims permuted to the k order of
// the K register fragments.
//  fp8: fp16, head h scaled by 2^e_h (max |Q·2^e| in [2^13, 2^14): exact for every element down to
//       2^-27 of the head's largest); within each 16 dims, dim 4c + r sits in k slot 2c + r (r < 2)
//       or 8 + 2c + r − 2.
//  MXFP4: bf16 as given; within each 32-dim block (k16 steps 2j, 2j + 1), dim 8c + 4i + r sits in
//       step 2j + r / 2, slot 2c + i (r even) or 8 + 2c + i (r odd).
// fetch_q issues the loads (first thing in the kernel: they need only the work item), store_q
// converts and stores once the first tiles' copies are out.
constexpr int kQPieces = kNumHeads * kHeadDim / 8;  // 8 bf16 each
constexpr int kQPerThread = kQPieces / kThreads;
static_assert(kQPieces % kThreads == 0, "whole Q pieces per thread");
struct QRegs {
  uint4 x[kQPerThread];
};
__device__ __forceinline__ QRegs fetch_q(const DecodeParams& p, int v) {
  const uint4* src = reinterpret_cast<const uint4*>(p.q + std::int64_t(v) * kNumHeads * kHeadDim);
  QRegs q;
#pragma unroll
  for (int j = 0; j < kQPerThread; ++j) q.x[j] = __ldg(src + threadIdx.x + j * kThreads);
  return q;
}
template <KvFormat F>
__device__ __forceinline__ void store_q(Smem<F>& sm, const DecodeParams& p, const QRegs& q) {
  constexpr int kPerThread = kQPerThread;
  const uint4(&x)[kPerThread] = q.x;
  if constexpr (F == KvFormat::mxfp4) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int piece = threadIdx.x + j * kThreads;
      const int h = piece / (kHeadDim / 8), d0 = (piece % (kHeadDim / 8)) * 8;
      const int blk = d0 / 32, c = (d0 % 32) / 8;
      std::uint8_t* row = &sm.q.bytes[h / 8][0][h % 8][0];  // chunk k of this row: row + 128k
      const auto put = [&](int chunk, std::uint32_t pair) {
        *reinterpret_cast<std::uint32_t*>(row + chunk * 128 + 4 * c) = pair;
      };
      put(4 * blk, __byte_perm(x[j].x, x[j].z, 0x5410));      // step 2j, slots 2c, 2c+1: dims +0, +4
      put(4 * blk + 1, __byte_perm(x[j].x, x[j].z, 0x7632));  // step 2j, slots 8+2c..: dims +1, +5
      put(4 * blk + 2, __byte_perm(x[j].y, x[j].w, 0x5410));  // step 2j+1: dims +2, +6
      put(4 * blk + 3, __byte_perm(x[j].y, x[j].w, 0x7632));  // step 2j+1: dims +3, +7
    }
  } else {
    if (threadIdx.x < kNumHeads) sm.amax[threadIdx.x] = 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int h = (threadIdx.x + j * kThreads) / (kHeadDim / 8);
      const std::uint32_t w[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
      float m = 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        m = fmaxf(m, fabsf(bits_to_float(w[i] << 16)));
        m = fmaxf(m, fabsf(bits_to_float(w[i] & 0xFFFF0000u)));
      }
      atomicMax(&sm.amax[h], float_to_bits(m));  // non-negative floats order as their bits
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int piece = threadIdx.x + j * kThreads;
      const int h = piece / (kHeadDim / 8), d0 = (piece % (kHeadDim / 8)) * 8;
      const std::uint32_t am = sm.amax[h];
      const int e = am == 0 ? 0 : min(max(13 - (int((am >> 23) & 0xFF) - 127), -100), 100);
      const float scale = bits_to_float(std::uint32_t(127 + e) << 23);
      std::uint32_t f[4];  // dims d0 + 2i, d0 + 2i + 1
      const std::uint32_t w[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        f[i] = pack_f16x2(bits_to_float(w[i] << 16) * scale, bits_to_float(w[i] & 0xFFFF0000u) * scale);
      }
      // dims d0..d0+7 are 4c0..4c0+7 of their 16-group (c0 = 0 or 2): slots 2c0..2c0+3 take dims
      // 4c0, 4c0+1, 4c0+4, 4c0+5 and slots 8+2c0..11+2c0 take 4c0+2, 4c0+3, 4c0+6, 4c0+7.
      const int group = d0 / 16, byte = (d0 % 16) == 0 ? 0 : 8;
      *reinterpret_cast<uint2*>(&sm.q.bytes[h / 8][2 * group][h % 8][byte]) = make_uint2(f[0], f[2]);
      *reinterpret_cast<uint2*>(&sm.q.bytes[h / 8][2 * group + 1][h % 8][byte]) = make_uint2(f[1], f[3]);
      if (d0 == 0) sm.logit_scale[h] = p.logit_scale * bits_to_float(std::uint32_t(127 - e) << 23);
    }
  }
}

// ── register fragments ──────────────────────────────────────────────────────────────────────────
// S: the K fragments of k16 steps k0 .. k0 + kBatch − 1 (rows g / g+8 = tokens 16w + g, + 8).
template <KvFormat F>
__device__ __forceinline__ void k_fragments(const Smem<F>& sm, int stage, int k0,
                                            std::uint32_t (&a)[Wg<F>::kBatch][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const std::uint8_t* row = sm.kv[stage][16 * warp + lane % 8 + 8 * ((lane / 8) % 2)];
  if constexpr (F == KvFormat::fp8) {
#pragma unroll
    for (int jj = 0; jj < Wg<F>::kBatch / 2; ++jj) {
      const int k = k0 + 2 * jj;  // k16 steps k, k + 1: chunks k, k + 1, bytes 4c..4c+3 of each
      std::uint32_t r[4];
      ldmatrix_x4(r, row + (k + lane / 16) * 16);
      e4m3x4_to_f16x2x2(r[0], a[2 * jj][0], a[2 * jj][2]);  // row g: dims 4c, 4c+1 | 4c+2, 4c+3
      e4m3x4_to_f16x2x2(r[1], a[2 * jj][1], a[2 * jj][3]);  // row g+8
      e4m3x4_to_f16x2x2(r[2], a[2 * jj + 1][0], a[2 * jj + 1][2]);
      e4m3x4_to_f16x2x2(r[3], a[2 * jj + 1][1], a[2 * jj + 1][3]);
    }
  } else {
    static_assert(Wg<F>::kBatch % 4 == 0, "MXFP4: whole ldmatrix (two 32-dim blocks, 4 k16 steps) per batch");
    const int t = 16 * warp + g;
#pragma unroll
    for (int q = 0; q < Wg<F>::kBatch / 4; ++q) {
      const int blk = k0 / 2 + 2 * q;  // blocks blk, blk + 1 = chunks; r[i] = 8 codes: dims 32·blk' + 8c .. + 7
      std::uint32_t r[4];
      ldmatrix_x4(r, row + (blk + lane / 16) * 16);
      std::uint32_t f[4];  // factor pairs (dup) of (t, blk), (t + 8, blk), (t, blk + 1), (t + 8, blk + 1)
#pragma unroll
      for (int i = 0; i < 4; ++i) f[i] = sm.fac2[blk + i / 2][t + 8 * (i % 2)];
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // block blk + h: steps 2h (codes 0/4, 1/5) and 2h + 1 (2/6, 3/7)
        const Pairs4 q0 = e2m1_pairs(r[2 * h]), q1 = e2m1_pairs(r[2 * h + 1]);  // rows g, g + 8
        const std::uint32_t f0 = f[2 * h], f1 = f[2 * h + 1];
#pragma unroll
        for (int st = 0; st < 2; ++st) {
          std::uint32_t(&d)[4] = a[4 * q + 2 * h + st];
          d[0] = mul_bf16x2(q0.p[2 * st], f0);
          d[1] = mul_bf16x2(q1.p[2 * st], f1);
          d[2] = mul_bf16x2(q0.p[2 * st + 1], f0);
          d[3] = mul_bf16x2(q1.p[2 * st + 1], f1);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < Wg<F>::kBatch; ++i) fence_regs(a[i]);
}

// P·V: the Vᵀ fragments of the m-tiles 2·grp and 2·grp + 1 for every P·V k step of the tile.
//  fp8: m-tile mt, rows g / g+8 = dims 64mt + 16w + 2g, + 1; k32 step ks: tokens 32ks + [0, 32).
//  MXFP4: warp w takes block 4·grp + w (32 dims) for both m-tiles: rows g / g+8 = dims 4g, 4g + 1
//  of the block in m-tile 2·grp and 4g + 2, 4g + 3 in m-tile 2·grp + 1, so that every code an
//  ldmatrix.trans brings is used; k16 step kk: tokens 16kk + [0, 16).
template <KvFormat F>
__device__ __forceinline__ int v_row_dim(int mt, int warp, int g) {
  if constexpr (F == KvFormat::fp8) {
    return 64 * mt + 16 * warp + 2 * g;
  } else {
    return 128 * (mt / 2) + 32 * warp + 4 * g + 2 * (mt % 2);
  }
}
template <KvFormat F>
__device__ __forceinline__ void v_fragments(const Smem<F>& sm, int stage, int grp,
                                            std::uint32_t (&a)[2][Wg<F>::kPvSteps][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, c = lane % 4;
  if constexpr (F == KvFormat::fp8) {
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      const int mt = 2 * grp + m;
#pragma unroll
      for (int ks = 0; ks < Wg<F>::kPvSteps; ++ks) {
        std::uint32_t r[4];  // matrix i: tokens 32ks + 8i + [0, 8) × the 16 dims (one core matrix)
        ldmatrix_x4_trans(r, &sm.kv[stage][32 * ks + lane][(4 * mt + warp) * 16]);
        // r[i] bytes: (token 2c, dim 2g), (2c, 2g+1), (2c+1, 2g), (2c+1, 2g+1) of matrix i.
        a[m][ks][0] = __byte_perm(r[0], r[1], 0x6420);  // row g   = dim 2g
        a[m][ks][1] = __byte_perm(r[0], r[1], 0x7531);  // row g+8 = dim 2g+1
        a[m][ks][2] = __byte_perm(r[2], r[3], 0x6420);
        a[m][ks][3] = __byte_perm(r[2], r[3], 0x7531);
      }
    }
  } else {
    const int blk = 4 * grp + warp;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // tokens 32h + [0, 32): k16 steps 2h, 2h + 1
      std::uint32_t r[4];          // matrix i: tokens 32h + 8i + [0, 8) × the block's 16 bytes
      ldmatrix_x4_trans(r, &sm.kv[stage][32 * h + lane][blk * 16]);
      // r[i]: codes of dims 4g..4g+3 for token 2c (bits 0..15) and token 2c + 1 (bits 16..31).
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const Pairs4 q = e2m1_pairs(r[i]);  // dims 4g + j, tokens (2c, 2c + 1)
        const std::uint32_t f = *reinterpret_cast<const std::uint32_t*>(&sm.fac[blk][32 * h + 8 * i + 2 * c]);
        const int kk = 2 * h + i / 2, hi = i % 2;  // k16 step, token half (slots 8+2c..)
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          a[m][kk][2 * hi] = mul_bf16x2(q.p[2 * m], f);          // row g:   dim 4g + 2m
          a[m][kk][2 * hi + 1] = mul_bf16x2(q.p[2 * m + 1], f);  // row g+8: dim 4g + 2m + 1
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int ks = 0; ks < Wg<F>::kPvSteps; ++ks) fence_regs(a[m][ks]);
  }
}

// ── the kernel ──────────────────────────────────────────────────────────────────────────────────
template <KvFormat F>
__global__ void __launch_bounds__(kThreads, Wg<F>::kCtasPerSm)
    decode_wgmma_kernel(const __grid_constant__ DecodeParams p) {
  using T = Wg<F>;
  constexpr bool kMx = F == KvFormat::mxfp4;
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  Smem<F>& sm = *reinterpret_cast<Smem<F>*>(smem_raw);
  launch_dependents();  // the combine grid's launch latency hides behind this kernel

  const WorkItem item = p.items[blockIdx.x];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;           // accumulator row group / column pair
  const QRegs q_regs = fetch_q(p, item.request);  // before the row map's kv_indptr load: both in flight
  const KvRowMap rows(p, item.request / p.s_q);
  const int num_tiles = (item.kv_end - item.kv_begin + kTile - 1) / kTile;

  ScaleRegs first_scales[T::kStages - 1];  // MXFP4: stored after Q, so that no load waits on another
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < num_tiles) {
      load_tile(sm, s, p, rows, item.kv_begin + s * kTile, item.kv_end);
      if constexpr (kMx) first_scales[s] = load_scales(scale_source(p, rows, item.kv_begin + s * kTile, item.kv_end));
    }
    cp_async_commit();
  }
  store_q(sm, p, q_regs);  // Q's loads have been in flight since the start
  if constexpr (kMx) {
#pragma unroll
    for (int s = 0; s < T::kStages - 1; ++s) {
      if (s < num_tiles) store_scales(sm, s, first_scales[s], item.kv_begin + s * kTile, item.kv_end);
    }
  }

  // This thread's 4 heads, in accumulator column order: 2c, 2c+1, 8+2c, 9+2c.
  const int head[4] = {2 * c, 2 * c + 1, 8 + 2 * c, 9 + 2 * c};
  SoftmaxState<float> st[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) st[i] = SoftmaxState<float>::empty();
  float o[kMTiles][8];  // Oᵀ: m-tile mt, rows = dims v_row_dim(mt) (+1), cols = heads
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int i = 0; i < 8; ++i) o[mt][i] = 0.f;
  }
  float lscale[4] = {0.f, 0.f, 0.f, 0.f};
  int a_run = -1;  // MXFP4: the largest R_w so far (−1 before the first tile)
  // Descriptors of the wgmma B operands; a k step advances the start address (bits 0–13, in
  // 16-byte units) by whole chunks without carrying out of the field (shared memory < 256 KB).
  const std::uint64_t desc_q = desc(sm.q.bytes[0][0][0], CoreTile<kNumHeads, 2 * kHeadDim>::sbo());
  std::uint64_t desc_p[T::kPTerms];
#pragma unroll
  for (int i = 0; i < T::kPTerms; ++i) desc_p[i] = desc(sm.p[i].bytes[0][0][0], CoreTile<kNumHeads, T::kPBytes>::sbo());

  for (int t = 0; t < num_tiles; ++t) {
    const int stage = t % T::kStages;
    const int t0 = item.kv_begin + t * kTile;
    cp_async_wait<T::kStages - 2>();
    if (t == 0) fence_proxy_async();  // Q stores (generic proxy) → wgmma reads (async proxy)
    __syncthreads();                  // tile t landed everywhere; iteration t−1 finished everywhere
    if (t == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) lscale[i] = kMx ? 0.f : sm.logit_scale[head[i]];
    }
    ScaleTile scale_tile{};  // MXFP4: this tile's E8M0 bytes, fetched before the copies go out
    if constexpr (kMx) scale_tile = fetch_scales(sm, stage, warp, lane);
    const int next = t + T::kStages - 1;
    const bool load_next = next < num_tiles;
    TileSources next_src{};  // resolved now, copied after the S batches below
    const unsigned short* next_scale_src = nullptr;
    if (load_next) {
      next_src = tile_sources<F>(p, rows, item.kv_begin + next * kTile, item.kv_end);
      if constexpr (kMx) next_scale_src = scale_source(p, rows, item.kv_begin + next * kTile, item.kv_end);
    }
    ScaleRegs next_scales{};
    int r_w = 127;  // MXFP4: this warp's reference E8M0 exponent for the tile
    if constexpr (kMx) r_w = tile_factors(sm, scale_tile, warp, lane);

    // Sᵀ (tokens × heads) = K · Qᵀ: K in registers, batches of kBatch k16 steps, two batches in
    // flight (a batch's registers are reused once the batch before it retired).
    float sacc[2][8];  // even and odd batches: two independent chains, each started fresh
    std::uint32_t ka[2][T::kBatch][4];
    constexpr int kBatches = kSteps / T::kBatch;
    static_assert(kSteps % T::kBatch == 0 && kBatches == 3,
                  "whole register batches; three carry the next tile's copies");
#pragma unroll
    for (int bt = 0; bt < kBatches; ++bt) {
      if (bt >= 2) wgmma_wait<1>();  // batch bt − 2 retired: its registers are free
      k_fragments(sm, stage, bt * T::kBatch, ka[bt % 2]);
      fence_regs(sacc[bt % 2]);
      wgmma_fence();
#pragma unroll
      for (int i = 0; i < T::kBatch; ++i) {
        const std::uint64_t b = desc_q + 16 * (bt * T::kBatch + i);  // + 256 bytes per k16 step
        if (bt < 2 && i == 0) {
          wgmma_s<F, false>(sacc[bt % 2], ka[bt % 2][i], b);
        } else {
          wgmma_s<F>(sacc[bt % 2], ka[bt % 2][i], b);
        }
      }
      wgmma_commit();
      // Tile t + stages − 1's copies go out a quarter, a quarter, then half after each batch of
      // S wgmmas, behind the batch's ldmatrix rather than ahead of it (one burst at the top of the
      // iteration measured 7 % slower at 256×8192: the S ldmatrix queued behind the copies).
      if (load_next) {
        if constexpr (kMx) {
          if (bt == 0) next_scales = load_scales(next_scale_src);
        }
        if (bt == 0) copy_rows<F, 0, 1>(sm, next % T::kStages, next_src);
        if (bt == 1) copy_rows<F, 1, 2>(sm, next % T::kStages, next_src);
        if (bt == 2) copy_rows<F, 2, 4>(sm, next % T::kStages, next_src);
      }
    }
    cp_async_commit();  // one copy group per iteration
    wgmma_wait<0>();
    fence_regs(sacc[0]);
    fence_regs(sacc[1]);
    float s[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = sacc[0][i] + sacc[1][i];
#pragma unroll
    for (int b2 = 0; b2 < 2; ++b2) {
#pragma unroll
      for (int i = 0; i < T::kBatch; ++i) fence_regs(ka[b2][i]);
    }
    // The Vᵀ fragments of the first two P·V groups need only the tile (and, MXFP4, every warp's
    // factors: after the softmax's first barrier): their loads and byte work go out under the
    // softmax's shuffle and barrier latency, while the K registers are free.
    constexpr int kGroupTiles = 2, kGroups = kMTiles / kGroupTiles;  // v_fragments fills two m-tiles
    std::uint32_t va[2][kGroupTiles][T::kPvSteps][4];
    if constexpr (!kMx) {
      v_fragments(sm, stage, 0, va[0]);
      v_fragments(sm, stage, 1, va[1]);
    }

    // Online softmax. s[j0] / s[j0 + 2]: tokens g / g+8 of the warp, head column i (see head[]).
    const int u0 = 16 * warp + g;  // tile tokens u0 and u0 + 8
    const bool v0 = t0 + u0 < item.kv_end, v1 = t0 + u0 + 8 < item.kv_end;
    const float kscale = kMx ? decode_e8m0(std::uint8_t(r_w)) : 1.f;  // MXFP4: K = K' · 2^(R_w − 127)
    float x[4][2], mx[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j0 = (i / 2) * 4 + (i % 2);
      const float ls = kMx ? p.logit_scale * kscale : lscale[i];  // MXFP4: one logit scale for all heads
      x[i][0] = v0 ? s[j0] * ls : -INFINITY;
      x[i][1] = v1 ? s[j0 + 2] * ls : -INFINITY;
      mx[i] = fmaxf(x[i][0], x[i][1]);
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], off));
    }
    if (g == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) sm.red[warp][head[i]] = mx[i];
    }
    if (kMx && lane == 0) sm.rw[warp] = r_w;
    __syncthreads();  // red, rw — and MXFP4's fac of all four warps (tile_factors) — complete
    if constexpr (kMx) {
      v_fragments(sm, stage, 0, va[0]);
      v_fragments(sm, stage, 1, va[1]);
    }
    // MXFP4: A = the largest R_w seen so far (never decreasing, so O only ever shrinks by 2^(A − A'));
    // Oᵀ is kept in units of 2^(A − 127).
    int a_new = 127;
    float a_shift = 1.f;
    if constexpr (kMx) {
      a_new = max(a_run, max(max(sm.rw[0], sm.rw[1]), max(sm.rw[2], sm.rw[3])));
      a_shift = a_run < 0 ? 1.f : ldexpf(1.f, a_run - a_new);
      a_run = a_new;
    }
    const float pscale = kMx ? ldexpf(1.f, r_w - a_new) : 1.f / T::kOutScale;  // fp8: P·2^8
    float f[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = head[i];
      f[i] = st[i].rescale_to(fmaxf(fmaxf(sm.red[0][h], sm.red[1][h]), fmaxf(sm.red[2][h], sm.red[3][h])));
      const float p0 = __expf(x[i][0] - st[i].m), p1 = __expf(x[i][1] - st[i].m);
      st[i].add(p0 + p1);
      if constexpr (kMx) {  // bf16 P·2^(R_w − A), tokens in natural order
        std::uint8_t* base = &sm.p[0].bytes[h / 8][0][h % 8][0];
        *reinterpret_cast<std::uint16_t*>(base + (u0 / 8) * 128 + (u0 % 8) * 2) = float_to_bf16(p0 * pscale);
        *reinterpret_cast<std::uint16_t*>(base + (u0 / 8 + 1) * 128 + (u0 % 8) * 2) = float_to_bf16(p1 * pscale);
      } else {  // P·2^8 = P_hi + P_lo (e4m3), token slots in the Vᵀ fragments' k order
        const SplitE4m3x2 q = split_e4m3x2(p0 * pscale, p1 * pscale);
        const int slot = p_slot(u0);  // token u0 + 8 sits two slots later
        std::uint8_t* hi = &sm.p[0].bytes[h / 8][warp][h % 8][slot];
        std::uint8_t* lo = &sm.p[1].bytes[h / 8][warp][h % 8][slot];
        hi[0] = std::uint8_t(q.hi), hi[2] = std::uint8_t(q.hi >> 8);
        lo[0] = std::uint8_t(q.lo), lo[2] = std::uint8_t(q.lo >> 8);
      }
    }
    if constexpr (kMx) {
      // MXFP4 accumulates P·V straight into Oᵀ (bf16 wgmma, fp32 accumulation), so Oᵀ takes its
      // rescale first — skipped when no head's max moved and A stayed (every factor exactly 1).
#pragma unroll
      for (int i = 0; i < 4; ++i) f[i] *= a_shift;
      if (f[0] != 1.f || f[1] != 1.f || f[2] != 1.f || f[3] != 1.f) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
          for (int i = 0; i < 8; ++i) o[mt][i] *= f[(i / 4) * 2 + (i % 2)];
        }
      }
    }
    fence_proxy_async();
    __syncthreads();  // P complete

    // Oᵀ = f·Oᵀ + Vᵀ·Pᵀ, two m-tiles per group, two groups in flight: a group's Vᵀ fragments come
    // from the raw tile while the group before runs. fp8 (whose wgmma accumulates in ~14 bits)
    // sends each group's product to fresh accumulators that are then added to the fp32 O; MXFP4
    // accumulates in O itself.
    float acc[kMx ? 1 : 2][kGroupTiles][8];
    auto retire = [&](int grp) {
#pragma unroll
      for (int m = 0; m < kGroupTiles; ++m) {
        const int mt = grp * kGroupTiles + m;
#pragma unroll
        for (int ks = 0; ks < T::kPvSteps; ++ks) fence_regs(va[grp % 2][m][ks]);
        if constexpr (kMx) {
          fence_regs(o[mt]);
        } else {
          fence_regs(acc[grp % 2][m]);
#pragma unroll
          for (int i = 0; i < 8; ++i) o[mt][i] = o[mt][i] * f[(i / 4) * 2 + (i % 2)] + acc[grp % 2][m][i];
        }
      }
    };
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      if (grp >= 2) {
        wgmma_wait<1>();  // group grp − 2 retired
        retire(grp - 2);
      }
      if (grp >= 2) v_fragments(sm, stage, grp, va[grp % 2]);  // groups 0, 1: during the softmax
      wgmma_fence();
#pragma unroll
      for (int m = 0; m < kGroupTiles; ++m) {
#pragma unroll
        for (int ks = 0; ks < T::kPvSteps; ++ks) {
          const std::uint32_t(&a)[4] = va[grp % 2][m][ks];
          if constexpr (kMx) {
            wgmma_rs_bf16(o[grp * kGroupTiles + m], a, desc_p[0] + 16 * ks);
          } else {
            float(&d)[8] = acc[grp % 2][m];
            if (ks == 0) {
              wgmma_rs<false>(d, a, desc_p[0]);  // fresh accumulator
            } else {
              wgmma_rs(d, a, desc_p[0] + 16 * ks);
            }
            wgmma_rs(d, a, desc_p[T::kPTerms - 1] + 16 * ks);
          }
        }
      }
      wgmma_commit();
    }
    wgmma_wait<1>();
    retire(kGroups - 2);
    wgmma_wait<0>();
    retire(kGroups - 1);
    if constexpr (kMx) {
      if (load_next) store_scales(sm, next % T::kStages, next_scales, item.kv_begin + next * kTile, item.kv_end);
    }
  }
  cp_async_wait<0>();

  // l: this thread's partial sums → warp (over g) → CTA (over warps). Every thread holds the same
  // m for a head, so the partial states add.
  __syncthreads();  // red[] free
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float l = st[i].l;
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (g == 0) sm.red[warp][head[i]] = l;
  }
  __syncthreads();
  float inv[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int h = head[i];
    st[i].l = sm.red[0][h] + sm.red[1][h] + sm.red[2][h] + sm.red[3][h];
    inv[i] = st[i].inv_l() * p.value_scale * T::kOutScale;
    if constexpr (kMx) inv[i] *= a_run < 0 ? 1.f : decode_e8m0(std::uint8_t(a_run));  // Oᵀ's 2^(A − 127)
    if (warp == 0 && g == 0) {
      if (item.partial >= 0) {
        p.partial_lse[std::int64_t(item.partial) * kNumHeads + h] = st[i].lse();
      } else if (p.lse != nullptr) {
        p.lse[std::int64_t(item.request) * kNumHeads + h] = st[i].lse();
      }
    }
  }
  // o[mt][j]: j = 0/1 heads 2c/2c+1 at dim D, 2/3 the same heads at D+1, 4..7 heads 8+2c, 9+2c.
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    const int dim = v_row_dim<F>(mt, warp, g);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j0 = (i / 2) * 4 + (i % 2);
      const float a = o[mt][j0] * inv[i], b = o[mt][j0 + 2] * inv[i];
      if (item.partial < 0) {
        std::uint16_t* out = p.out + (std::int64_t(item.request) * kNumHeads + head[i]) * kValueDim + dim;
        std::uint32_t packed;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(b), "f"(a));
        *reinterpret_cast<std::uint32_t*>(out) = packed;
      } else {
        float* out = p.partial_o + (std::int64_t(item.partial) * kNumHeads + head[i]) * kValueDim + dim;
        *reinterpret_cast<float2*>(out) = make_float2(a, b);
      }
    }
  }
}

}  // namespace

int decode_wgmma_ctas_per_sm(KvFormat format) {
  return format == KvFormat::mxfp4 ? Wg<KvFormat::mxfp4>::kCtasPerSm : Wg<KvFormat::fp8>::kCtasPerSm;
}
int decode_wgmma_tile_tokens() {
  return kTile;
}
cudaError_t prepare_decode_wgmma(KvFormat format) {
  switch (format) {
    case KvFormat::fp8:
      return cudaFuncSetAttribute(decode_wgmma_kernel<KvFormat::fp8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(sizeof(Smem<KvFormat::fp8>)));
    case KvFormat::mxfp4:
      return cudaFuncSetAttribute(decode_wgmma_kernel<KvFormat::mxfp4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(sizeof(Smem<KvFormat::mxfp4>)));
    case KvFormat::bf16:
      break;
  }
  return cudaErrorInvalidValue;
}
cudaError_t launch_decode_wgmma(KvFormat format, const DecodeParams& p, cudaStream_t stream) {
  switch (format) {
    case KvFormat::fp8:
      decode_wgmma_kernel<KvFormat::fp8><<<p.num_items, kThreads, sizeof(Smem<KvFormat::fp8>), stream>>>(p);
      return cudaGetLastError();
    case KvFormat::mxfp4:
      decode_wgmma_kernel<KvFormat::mxfp4><<<p.num_items, kThreads, sizeof(Smem<KvFormat::mxfp4>), stream>>>(p);
      return cudaGetLastError();
    case KvFormat::bf16:
      break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace mla::sm90
