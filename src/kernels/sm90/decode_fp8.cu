// sm90 MLA decode from fp8 (e4m3) KV with wgmma, the tokens in M (Sᵀ = K·Qᵀ, Oᵀ = Vᵀ·Pᵀ).
//
// Grid: one CTA per work item (q row v = b·s_q + i, KV range [kv_begin, kv_end)); one warpgroup
// (128 threads), two CTAs per SM. Tiles of 64 tokens, copied as stored (576 B a row) with
// cp.async into rows padded to 592 B (conflict-free ldmatrix), two stages deep:
//
//   Sᵀ = K·Qᵀ    wgmma m64n16k16 f16 (fp32 accumulation): A = K in registers — ldmatrix of the
//                raw tile, one exact cvt per e4m3 pair; B = Q·2^e in fp16 (exact), shared memory,
//                its dims permuted within each 16 to match the fragments. Warp w owns tokens
//                16w..16w+15. (fp8 wgmma accumulates in ~14-bit precision: too coarse for logits.)
//   softmax      per head over the tile: warp butterflies + one shared-memory step for the max;
//                each thread keeps its partial l; P·2^8 split into two e4m3 terms → shared memory
//   Oᵀ += Vᵀ·Pᵀ  wgmma m64n16k32 e4m3: A = Vᵀ in registers — ldmatrix.trans of the same raw tile
//                plus byte permutes (4 tokens of one dim per register), no conversion; B = P_hi and
//                P_lo, token slots permuted to match. Each tile's product is accumulated fresh and
//                added to the fp32 O (precision stays fp32 across tiles). 8 m-tiles: 512 dims.
//
// V is never converted and K once; the fp8 tensor scale and 2^-8 of P are folded into the logit
// scale and the output.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/launch.h"
#include "kernels/sm90/primitives.h"
#include "mla/mla.h"

namespace mla::sm90 {
namespace {

struct Fp8Traits {
  static constexpr int kThreads = 128;  // one warpgroup
  static constexpr int kCtasPerSm = 2;
  static constexpr int kTile = 64;  // tokens per tile: the wgmma M
  static constexpr int kStages = 2;
  static constexpr int kChunks = kHeadDim / 16;         // 16-byte chunks per KV row (36)
  static constexpr int kPitch = kHeadDim + 16;          // bytes per KV row in shared memory (592)
  static constexpr int kSteps = kHeadDim / 16;          // k16 steps of S (36)
  static constexpr int kBatch = 6;                      // S k-steps per register batch (3 ldmatrix)
  static constexpr int kMTiles = kValueDim / 64;        // m64 tiles of Oᵀ (8)
  static constexpr int kPvSteps = kTile / 32;           // k32 steps of O per tile (2)
  static constexpr float kPScale = 256.f;               // P·2^8 ∈ [0, 256] ⊂ e4m3's normal range
};
using Tr = Fp8Traits;

// Canonical K-major, no-swizzle wgmma layout: core matrices of 8 rows × 16 bytes (128 B,
// contiguous); core matrices adjacent in K 128 B apart (LBO), 8-row groups one row-block apart (SBO).
template <int kRows, int kKBytes>
struct CoreTile {
  static constexpr int kChunks = kKBytes / 16;
  static constexpr int sbo() { return kChunks * 128; }  // bytes between 8-row groups
  alignas(128) std::uint8_t bytes[kRows / 8][kChunks][8][16];
};

struct Fp8Smem {
  alignas(128) std::uint8_t kv[Tr::kStages][Tr::kTile][Tr::kPitch];  // raw e4m3 tokens
  CoreTile<kNumHeads, 2 * kHeadDim> q;            // Q·2^e, fp16, dims permuted within each 16
  CoreTile<kNumHeads, Tr::kTile> p[2];            // P·2^8 = p[0] + p[1], e4m3, token slots permuted
  float red[4][kNumHeads];                        // per-warp tile max (then per-warp l) per head
  float logit_scale[kNumHeads];                   // sm_scale · kv scale · 2^-e per head
  unsigned amax[kNumHeads];                       // |Q| max per head (float bits)
};
static_assert(Tr::kCtasPerSm * (sizeof(Fp8Smem) + 1024) <= 228 * 1024, "two CTAs per SM must fit in shared memory");
static_assert(Tr::kTile == 16 * (Tr::kThreads / 32), "each warp owns 16 tokens of the tile (wgmma M rows)");
static_assert((Tr::kPitch / 16) % 2 == 1, "row pitch must rotate the 16-byte bank groups (ldmatrix rows)");

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

// Token slot of tile token u inside its 16-token chunk of P: the k order of the Vᵀ register
// fragments (k slots 4c..4c+3 of a k32 half hold tokens 2c, 2c+1, 8+2c, 9+2c).
__device__ __forceinline__ int p_slot(int u) {
  return 4 * ((u % 8) / 2) + 2 * ((u % 16) / 8) + u % 2;
}

// ── the kernel ──────────────────────────────────────────────────────────────────────────────────
__device__ __forceinline__ void load_tile(Fp8Smem& sm, int s, const DecodeParams& p, const KvRowMap& rows, int t0,
                                          int end) {
  // Warp w copies rows 16w..16w+15, four at a time: lanes 8i..8i+7 take 128 contiguous bytes of one
  // row per request (whole lines from global memory, one bank sweep per quarter-warp in shared
  // memory); each thread maps 4 rows, its chunks are constant offsets from them.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kSweeps = (Tr::kChunks + 7) / 8;  // 5: 8 chunks per sweep, the last one half
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 16 * warp + 4 * i + lane / 8;
    const int n = t0 + r;
    const bool valid = n < end;
    const std::uint8_t* src = p.kv + (valid ? rows(n) : 0) * p.kv_row_stride;
#pragma unroll
    for (int q = 0; q < kSweeps; ++q) {
      const int ch = lane % 8 + 8 * q;
      if (ch < Tr::kChunks) cp_async16(&sm.kv[s][r][ch * 16], src + ch * 16, valid ? 16 : 0);
    }
  }
}

// Q of q row `v` → fp16 in shared memory, head h scaled by 2^e_h (max |Q·2^e| in [2^13, 2^14):
// exact for every element down to 2^-27 of the head's largest). Within each 16 dims, dim 4c + r
// sits in k slot 2c + r (r < 2) or 8 + 2c + r − 2: the k order of the K register fragments.
__device__ __forceinline__ void load_q(Fp8Smem& sm, const DecodeParams& p, int v) {
  constexpr int kPieces = kNumHeads * kHeadDim / 8;  // 8 bf16 each
  constexpr int kPerThread = kPieces / Tr::kThreads;
  static_assert(kPieces % Tr::kThreads == 0, "whole Q pieces per thread");
  const uint4* src = reinterpret_cast<const uint4*>(p.q + std::int64_t(v) * kNumHeads * kHeadDim);
  uint4 x[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) x[j] = __ldg(src + threadIdx.x + j * Tr::kThreads);
  if (threadIdx.x < kNumHeads) sm.amax[threadIdx.x] = 0;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int h = (threadIdx.x + j * Tr::kThreads) / (kHeadDim / 8);
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
    const int piece = threadIdx.x + j * Tr::kThreads;
    const int h = piece / (kHeadDim / 8), d0 = (piece % (kHeadDim / 8)) * 8;
    const std::uint32_t am = sm.amax[h];
    const int e = am == 0 ? 0 : min(max(13 - (int((am >> 23) & 0xFF) - 127), -100), 100);
    const float scale = bits_to_float(std::uint32_t(127 + e) << 23);
    std::uint32_t f[4];  // dims d0 + 2i, d0 + 2i + 1
    const std::uint32_t w[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) f[i] = pack_f16x2(bits_to_float(w[i] << 16) * scale, bits_to_float(w[i] & 0xFFFF0000u) * scale);
    // dims d0..d0+7 are 4c0..4c0+7 of their 16-group (c0 = 0 or 2): slots 2c0..2c0+3 take dims
    // 4c0, 4c0+1, 4c0+4, 4c0+5 and slots 8+2c0..11+2c0 take 4c0+2, 4c0+3, 4c0+6, 4c0+7.
    const int group = d0 / 16, byte = (d0 % 16) == 0 ? 0 : 8;
    *reinterpret_cast<uint2*>(&sm.q.bytes[h / 8][2 * group][h % 8][byte]) = make_uint2(f[0], f[2]);
    *reinterpret_cast<uint2*>(&sm.q.bytes[h / 8][2 * group + 1][h % 8][byte]) = make_uint2(f[1], f[3]);
    if (d0 == 0) sm.logit_scale[h] = p.logit_scale * bits_to_float(std::uint32_t(127 - e) << 23);
  }
}

__global__ void __launch_bounds__(Tr::kThreads, Tr::kCtasPerSm) decode_fp8_kernel(const __grid_constant__ DecodeParams p) {
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  Fp8Smem& sm = *reinterpret_cast<Fp8Smem*>(smem_raw);
  launch_dependents();  // the combine grid's launch latency hides behind this kernel

  const WorkItem item = p.items[blockIdx.x];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;  // accumulator row group / column pair
  const KvRowMap rows(p, item.request / p.s_q);
  const int num_tiles = (item.kv_end - item.kv_begin + Tr::kTile - 1) / Tr::kTile;

  if (num_tiles > 0) load_tile(sm, 0, p, rows, item.kv_begin, item.kv_end);
  cp_async_commit();
  load_q(sm, p, item.request);  // overlaps tile 0's flight

  // This thread's 4 heads, in accumulator column order: 2c, 2c+1, 8+2c, 9+2c.
  const int head[4] = {2 * c, 2 * c + 1, 8 + 2 * c, 9 + 2 * c};
  SoftmaxState<float> st[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) st[i] = SoftmaxState<float>::empty();
  float o[Tr::kMTiles][8];  // Oᵀ: m-tile mt, rows = dims 64mt + 16w + 2g (+1), cols = heads
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt) {
#pragma unroll
    for (int i = 0; i < 8; ++i) o[mt][i] = 0.f;
  }
  float lscale[4] = {0.f, 0.f, 0.f, 0.f};
  // Descriptors of the wgmma B operands; a k step advances the start address (bits 0–13, in
  // 16-byte units) by whole chunks without carrying out of the field (shared memory < 256 KB).
  const std::uint64_t desc_q = desc(sm.q.bytes[0][0][0], CoreTile<kNumHeads, 2 * kHeadDim>::sbo());
  const std::uint64_t desc_p[2] = {desc(sm.p[0].bytes[0][0][0], CoreTile<kNumHeads, Tr::kTile>::sbo()),
                                   desc(sm.p[1].bytes[0][0][0], CoreTile<kNumHeads, Tr::kTile>::sbo())};

  for (int t = 0; t < num_tiles; ++t) {
    const int stage = t % Tr::kStages;
    const int t0 = item.kv_begin + t * Tr::kTile;
    cp_async_wait<0>();
    if (t == 0) fence_proxy_async();  // Q stores (generic proxy) → wgmma reads (async proxy)
    __syncthreads();                  // tile t landed everywhere; iteration t−1 finished everywhere
    if (t == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) lscale[i] = sm.logit_scale[head[i]];
    }
    if (t + 1 < num_tiles) load_tile(sm, (t + 1) % Tr::kStages, p, rows, t0 + Tr::kTile, item.kv_end);
    cp_async_commit();

    // Sᵀ (tokens × heads) = K · Qᵀ: K converted in registers in batches of kBatch k16 steps,
    // two batches in flight (a batch's registers are reused once the batch before it retired).
    float sacc[2][8];  // even and odd batches: two independent chains, each started fresh
    std::uint32_t ka[2][Tr::kBatch][4];
    constexpr int kBatches = Tr::kSteps / Tr::kBatch;
    static_assert(Tr::kSteps % Tr::kBatch == 0 && Tr::kBatch % 2 == 0, "whole batches of ldmatrix pairs");
#pragma unroll
    for (int bt = 0; bt < kBatches; ++bt) {
      if (bt >= 2) wgmma_wait<1>();  // batch bt − 2 retired: its registers are free
      std::uint32_t(&a)[Tr::kBatch][4] = ka[bt % 2];
#pragma unroll
      for (int jj = 0; jj < Tr::kBatch / 2; ++jj) {
        const int k = bt * Tr::kBatch + 2 * jj;  // k16 steps k, k + 1: dims 16k .. 16k + 31
        std::uint32_t r[4];  // rows g / g+8 (tokens 16w + g, + 8) × chunks k, k + 1: bytes 4c..4c+3
        ldmatrix_x4(r, &sm.kv[stage][16 * warp + lane % 8 + 8 * ((lane / 8) % 2)][(k + lane / 16) * 16]);
        a[2 * jj][0] = e4m3x2_to_f16x2(std::uint16_t(r[0]));
        a[2 * jj][1] = e4m3x2_to_f16x2(std::uint16_t(r[1]));
        a[2 * jj][2] = e4m3x2_to_f16x2(std::uint16_t(r[0] >> 16));
        a[2 * jj][3] = e4m3x2_to_f16x2(std::uint16_t(r[1] >> 16));
        a[2 * jj + 1][0] = e4m3x2_to_f16x2(std::uint16_t(r[2]));
        a[2 * jj + 1][1] = e4m3x2_to_f16x2(std::uint16_t(r[3]));
        a[2 * jj + 1][2] = e4m3x2_to_f16x2(std::uint16_t(r[2] >> 16));
        a[2 * jj + 1][3] = e4m3x2_to_f16x2(std::uint16_t(r[3] >> 16));
        fence_regs(a[2 * jj]);
        fence_regs(a[2 * jj + 1]);
      }
      fence_regs(sacc[bt % 2]);
      wgmma_fence();
#pragma unroll
      for (int i = 0; i < Tr::kBatch; ++i) {
        const int k = bt * Tr::kBatch + i;
        const std::uint64_t b = desc_q + 16 * k;  // + 256 bytes (two chunks) per k16 step
        if (bt < 2 && i == 0) {
          wgmma_rs_f16<false>(sacc[bt % 2], a[i], b);
        } else {
          wgmma_rs_f16(sacc[bt % 2], a[i], b);
        }
      }
      wgmma_commit();
    }
    wgmma_wait<0>();
    fence_regs(sacc[0]);
    fence_regs(sacc[1]);
    float s[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = sacc[0][i] + sacc[1][i];
#pragma unroll
    for (int b2 = 0; b2 < 2; ++b2) {
#pragma unroll
      for (int i = 0; i < Tr::kBatch; ++i) fence_regs(ka[b2][i]);
    }

    // Online softmax. s[2i + r]: r = 0/1 → token g / g+8, i → head column (see head[]).
    const int u0 = 16 * warp + g;  // tile tokens u0 and u0 + 8
    const bool v0 = t0 + u0 < item.kv_end, v1 = t0 + u0 + 8 < item.kv_end;
    float x[4][2], mx[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j0 = (i / 2) * 4 + (i % 2);  // accumulator index: token g; token g+8 is j0 + 2
      x[i][0] = v0 ? s[j0] * lscale[i] : -INFINITY;
      x[i][1] = v1 ? s[j0 + 2] * lscale[i] : -INFINITY;
      mx[i] = fmaxf(x[i][0], x[i][1]);
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], off));
    }
    if (g == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) sm.red[warp][head[i]] = mx[i];
    }
    __syncthreads();
    float f[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = head[i];
      f[i] = st[i].rescale_to(fmaxf(fmaxf(sm.red[0][h], sm.red[1][h]), fmaxf(sm.red[2][h], sm.red[3][h])));
      const float p0 = __expf(x[i][0] - st[i].m), p1 = __expf(x[i][1] - st[i].m);
      st[i].add(p0 + p1);
      const SplitE4m3x2 q = split_e4m3x2(p0 * Tr::kPScale, p1 * Tr::kPScale);
      const int slot = p_slot(u0);  // token u0 + 8 sits two slots later
      std::uint8_t* hi = &sm.p[0].bytes[h / 8][warp][h % 8][slot];
      std::uint8_t* lo = &sm.p[1].bytes[h / 8][warp][h % 8][slot];
      hi[0] = std::uint8_t(q.hi), hi[2] = std::uint8_t(q.hi >> 8);
      lo[0] = std::uint8_t(q.lo), lo[2] = std::uint8_t(q.lo >> 8);
    }
    fence_proxy_async();
    __syncthreads();  // P complete

    // Oᵀ = f·Oᵀ + Vᵀ·Pᵀ, two m-tiles per group, two groups in flight: a group's Vᵀ fragments (dims
    // 64mt + 16w + [0, 16) × tokens 32ks + [0, 32)) come from the raw tile while the group before
    // runs; each group's product goes to fresh accumulators that are then added to the fp32 O.
    constexpr int kGroupTiles = 2, kGroups = Tr::kMTiles / kGroupTiles;
    std::uint32_t va[2][kGroupTiles][Tr::kPvSteps][4];
    float acc[2][kGroupTiles][8];
    auto fold = [&](int grp) {
#pragma unroll
      for (int m = 0; m < kGroupTiles; ++m) {
        fence_regs(acc[grp % 2][m]);
#pragma unroll
        for (int ks = 0; ks < Tr::kPvSteps; ++ks) fence_regs(va[grp % 2][m][ks]);
        const int mt = grp * kGroupTiles + m;
#pragma unroll
        for (int i = 0; i < 8; ++i) o[mt][i] = o[mt][i] * f[(i / 4) * 2 + (i % 2)] + acc[grp % 2][m][i];
      }
    };
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      if (grp >= 2) {
        wgmma_wait<1>();  // group grp − 2 retired
        fold(grp - 2);
      }
#pragma unroll
      for (int m = 0; m < kGroupTiles; ++m) {
        const int mt = grp * kGroupTiles + m;
#pragma unroll
        for (int ks = 0; ks < Tr::kPvSteps; ++ks) {
          std::uint32_t r[4];  // matrix i: tokens 32ks + 8i + [0, 8) × the 16 dims
          ldmatrix_x4_trans(r, &sm.kv[stage][32 * ks + lane][(4 * mt + warp) * 16]);
          // r[i] bytes: (token 2c, dim 2g), (2c, 2g+1), (2c+1, 2g), (2c+1, 2g+1) of matrix i.
          std::uint32_t(&a)[4] = va[grp % 2][m][ks];
          a[0] = __byte_perm(r[0], r[1], 0x6420);  // row g   = dim 2g
          a[1] = __byte_perm(r[0], r[1], 0x7531);  // row g+8 = dim 2g+1
          a[2] = __byte_perm(r[2], r[3], 0x6420);
          a[3] = __byte_perm(r[2], r[3], 0x7531);
          fence_regs(a);
        }
      }
      wgmma_fence();
#pragma unroll
      for (int m = 0; m < kGroupTiles; ++m) {
#pragma unroll
        for (int ks = 0; ks < Tr::kPvSteps; ++ks) {
          if (ks == 0) {
            wgmma_rs<false>(acc[grp % 2][m], va[grp % 2][m][ks], desc_p[0]);  // fresh accumulator
          } else {
            wgmma_rs(acc[grp % 2][m], va[grp % 2][m][ks], desc_p[0] + 16 * ks);
          }
          wgmma_rs(acc[grp % 2][m], va[grp % 2][m][ks], desc_p[1] + 16 * ks);
        }
      }
      wgmma_commit();
    }
    wgmma_wait<1>();
    fold(kGroups - 2);
    wgmma_wait<0>();
    fold(kGroups - 1);
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
    inv[i] = st[i].inv_l() * p.value_scale * (1.f / Tr::kPScale);
    if (warp == 0 && g == 0) {
      if (item.partial >= 0) {
        p.partial_lse[std::int64_t(item.partial) * kNumHeads + h] = st[i].lse();
      } else if (p.lse != nullptr) {
        p.lse[std::int64_t(item.request) * kNumHeads + h] = st[i].lse();
      }
    }
  }
  // o[mt][j]: j = 0/1 head 2c/2c+1 at dim D, 2/3 the same heads at D+1, 4..7 heads 8+2c, 9+2c.
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt) {
    const int dim = 64 * mt + 16 * warp + 2 * g;
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

int decode_fp8_tile_tokens() {
  return Tr::kTile;
}
int decode_fp8_ctas_per_sm() {
  return Tr::kCtasPerSm;
}
cudaError_t prepare_decode_fp8() {
  return cudaFuncSetAttribute(decode_fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sizeof(Fp8Smem)));
}
cudaError_t launch_decode_fp8(const DecodeParams& p, cudaStream_t stream) {
  decode_fp8_kernel<<<p.num_items, Tr::kThreads, sizeof(Fp8Smem), stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mla::sm90
