// sm90 MLA decode: 16 heads against one shared 576-wide latent row per token.
//
// Grid: one CTA per work item (q row v = b·s_q + i, KV range [kv_begin, kv_end), the range already
// cut to query token i's causal length); 8 warps. One CTA owns all 16 heads of its q row and
// streams its KV range once (once per query token when s_q > 1), in tiles of 64 or 128 tokens:
//
//   global ──cp.async 16 B──▶ raw stage (S stages deep) [──dequant──▶ bf16 tile: MXFP4 only]
//   S  = Q·Kᵀ   mma.sync m16n8k16, M = the 16 heads exactly; warp (tg, kh) = (w % 4, w / 4)
//               owns tokens [tg·T/4, (tg+1)·T/4) × dims [288kh, 288kh+288), its Q fragments held
//               in registers for the whole item; the two dim halves meet in shared memory
//   softmax     half-warp per head (SoftmaxState), P → shared memory
//   O += P·V    mma.sync m16n8k16: warp w owns value dims [64w, 64w+64), V = the same rows
//
// No padding rows: M = 16 = the heads. bf16 KV is consumed straight from its stage. fp8 is read
// from its raw stage with ldmatrix and converted in registers (one exact cvt per pair) for both
// matmuls, which run in fp16 against Q scaled per head by a power of two. MXFP4 is dequantized
// once per tile into a bf16 tile shared by all 16 heads and both matmuls.
// Finished items write bf16 O and LSE; split items write normalised fp32 partials that
// combine.cu merges by LSE.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/formats.h"
#include "kernels/common/softmax_state.h"
#include "kernels/sm90/decode_params.h"
#include "kernels/sm90/launch.h"
#include "mla/mla.h"

namespace mla::sm90 {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

constexpr int kPitch = kHeadDim * 2 + 16;  // bytes per bf16 row in shared memory (bank-conflict-free ldmatrix)

constexpr int kHalfDims = kHeadDim / 2;  // dims per S warp
constexpr int kKSteps = kHalfDims / 16;  // k16 steps per S warp (18)
static_assert(kWarps == 8, "S warps: 4 token groups × 2 dim halves");
static_assert(kNumHeads == 2 * kWarps, "softmax: a half-warp per head");
static_assert(kValueDim == kWarps * 64, "each warp owns 64 value dims in O = P·V");
static_assert(kPitch % 128 == 16, "row pitch must rotate banks by 16 B");

template <KvFormat F>
struct Traits;

template <>
struct Traits<KvFormat::bf16> {
  static constexpr int kTile = 64;  // tokens per tile
  static constexpr int kStages = 2;
  static constexpr int kRawPitch = kPitch;  // the stage is the bf16 tile
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr bool kDequant = false;
  static constexpr bool kFp16 = false;  // matmul operand type: bf16
};
template <>
struct Traits<KvFormat::fp8> {
  static constexpr int kTile = 128;  // twice the work per barrier (bought ~8 %; fp8 is bound by its conversions)
  static constexpr int kStages = 2;
  static constexpr int kRawPitch = kHeadDim + 16;  // 592: 8 rows hit 8 distinct 16-byte bank groups
  static constexpr int kRowBytes = kHeadDim;
  static constexpr bool kDequant = false;  // converted in registers, straight from the raw stage
  static constexpr bool kFp16 = true;      // e4m3 ⊂ fp16: K, V and P are fp16 operands
};
template <>
struct Traits<KvFormat::mxfp4> {
  static constexpr int kTile = 64;
  static constexpr int kStages = 4;
  static constexpr int kRawPitch = kHeadDim / 2 + 16;
  static constexpr int kRowBytes = kHeadDim / 2;
  static constexpr bool kDequant = true;
  static constexpr bool kFp16 = false;
};

// Work split of one tile of T tokens over the 8 warps.
template <int kTile>
struct TileShape {
  static constexpr int kTokensS = kTile / 4;           // tokens per S warp (token group)
  static constexpr int kNTiles = kTokensS / 8;         // n8 tiles per S warp
  static constexpr int kTokensLane = kTile / 16;       // softmax: tokens per lane (a half-warp per head)
  static constexpr int kRowsPerWarp = kTile / kWarps;  // rows each warp copies
  static constexpr int kSPitch = kTile + 8;            // floats per S-partial row (conflict-free float2 stores)
  static constexpr int kPPitch = kTile * 2 + 16;       // bytes per P row
  static_assert(kTokensS % 16 == 0 && kTokensLane % 4 == 0, "tile must be a multiple of 64 tokens");
  static_assert(kPPitch % 128 == 16 && kSPitch % 32 == 8, "P and S-partial pitches must rotate banks");
};

template <KvFormat F>
struct alignas(128) Smem {
  using T = Traits<F>;
  using Sh = TileShape<T::kTile>;
  static constexpr int kTile = T::kTile;
  alignas(16) std::uint8_t q[kNumHeads][kPitch];                                      // Q, bf16
  alignas(16) std::uint8_t raw[T::kStages][kTile][T::kRawPitch];                      // KV as stored
  alignas(16) std::uint8_t scales[F == KvFormat::mxfp4 ? T::kStages : 1][kTile][32];  // E8M0
  alignas(16) std::uint8_t tile[T::kDequant ? kTile : 1][kPitch];                     // dequantized 16-bit tile
  alignas(16) float s_part[2][kNumHeads][Sh::kSPitch];  // S partials of the two dim halves
  alignas(16) std::uint8_t p[kNumHeads][Sh::kPPitch];   // P, 16-bit
  float factor[kNumHeads];                              // this tile's rescale of O per head
  float inv_l[kNumHeads];                               // final 1/l (× value scale) per head
  int q_exp[kNumHeads];                                 // fp16 path: Q of head h scaled by 2^q_exp[h]
};
static_assert(sizeof(Smem<KvFormat::bf16>) <= 227 * 1024, "bf16 shared memory over the 227 KB limit");
static_assert(sizeof(Smem<KvFormat::fp8>) <= 227 * 1024, "fp8 shared memory over the 227 KB limit");
static_assert(sizeof(Smem<KvFormat::mxfp4>) <= 227 * 1024, "mxfp4 shared memory over the 227 KB limit");

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes = 0 writes zeros without reading (masked rows).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
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

// D += A·B, m16n8k16, bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                        std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ std::uint32_t pack_f16x2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// A bf16 pair times a power of two, rounded to an fp16 pair.
__device__ __forceinline__ std::uint32_t bf16x2_to_f16x2_scaled(std::uint32_t x, float scale) {
  return pack_f16x2(bits_to_float(x << 16) * scale, bits_to_float(x & 0xFFFF0000u) * scale);
}

// The matmul operand type: bf16 (bf16 and MXFP4 KV) or fp16 (fp8 KV).
template <bool kFp16>
struct MmaOps {
  static __device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
    if constexpr (kFp16)
      mma_f16(d, a, b0, b1);
    else
      mma_bf16(d, a, b0, b1);
  }
  static __device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
    if constexpr (kFp16)
      return pack_f16x2(lo, hi);
    else
      return pack_bf16x2(lo, hi);
  }
};

// fp8 e4m3 pair → fp16 pair, exact (every e4m3 value, subnormals included, is an fp16 value).
__device__ __forceinline__ std::uint32_t e4m3x2_to_f16x2(std::uint16_t two) {
  std::uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(two));
  return h2;
}

// Two E2M1 codes (one byte, low nibble first) times 2^(s−127) → bf16 pair. Exact whenever the
// product is a normal bf16 (any scale the quantizer makes for finite bf16 input).
// E2M1 code c placed in fp32 bits as ((c & 7) << 22) | ((c & 8) << 28) is its value · 2^-126
// exactly (code 1 becomes the subnormal 2^-127); two exact power-of-two multiplies by 2^126 and by
// the E8M0 value 2^(s−127) give value · 2^(s−127), rounded once to bf16 (exact unless the result
// leaves bf16's normal range, which no scale made from finite bf16 input does).
__device__ __forceinline__ std::uint32_t e2m1x2_to_bf16x2(std::uint32_t byte, float e8m0) {
  const float lo = bits_to_float(((byte & 7u) << 22) | ((byte & 8u) << 28)) * 0x1p126f * e8m0;
  const float hi = bits_to_float(((byte & 0x70u) << 18) | ((byte & 0x80u) << 24)) * 0x1p126f * e8m0;
  return pack_bf16x2(lo, hi);
}

template <KvFormat F>
struct Decoder {
  using T = Traits<F>;
  using Sh = TileShape<T::kTile>;
  const DecodeParams& p;
  std::int64_t row_base;   // contiguous: kv_indptr[b]
  std::int64_t page_base;  // paged: first page-table entry of the request

  __device__ std::int64_t physical_row(int n) const {
    if (p.page_table == nullptr) return row_base + n;
    const std::int64_t page = __ldg(p.page_table + page_base + (n >> p.page_shift));
    return (page << p.page_shift) + (n & ((1 << p.page_shift) - 1));
  }

  // Issues the async copy of tokens [t0, t0 + kTile) ∩ [.., end) into stage `s`; rows past `end`
  // are zero-filled. Warp w copies rows w, w+8, …; lanes stride over the row's 16-byte chunks.
  // MXFP4 scale rows (18 bytes, 2-byte aligned: the stride is even) are loaded into `sc` and
  // stored by store_scales.
  __device__ void load_tile(Smem<F>& sm, int s, int t0, int end, std::uint16_t (&sc)[Sh::kRowsPerWarp][1]) const {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int kChunks = T::kRowBytes / 16;
#pragma unroll
    for (int i = 0; i < Sh::kRowsPerWarp; ++i) {
      const int r = warp + i * kWarps;
      const int n = t0 + r;
      const bool valid = n < end;
      const std::int64_t row = valid ? physical_row(n) : 0;
      const std::uint8_t* src = p.kv + row * p.kv_row_stride;
#pragma unroll
      for (int c = lane; c < kChunks; c += 32) cp_async16(&sm.raw[s][r][c * 16], src + c * 16, valid ? 16 : 0);
      if constexpr (F == KvFormat::mxfp4) {
        // Lanes 0..8 each take 2 of the 18 scale bytes of this row.
        // One 2-byte load straight into the register store_scales() writes out at the end of
        // the iteration: nothing consumes it before then, so no warp waits on DRAM here.
        sc[i][0] = 0;
        if (valid && lane < 9) {
          sc[i][0] = __ldg(reinterpret_cast<const unsigned short*>(p.kv_scales + row * p.scale_stride) + lane);
        }
      }
    }
  }

  __device__ void store_scales(Smem<F>& sm, int s, const std::uint16_t (&sc)[Sh::kRowsPerWarp][1]) const {
    if constexpr (F == KvFormat::mxfp4) {
      const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
      for (int i = 0; i < Sh::kRowsPerWarp; ++i) {
        if (lane < 9) *reinterpret_cast<std::uint16_t*>(&sm.scales[s][warp + i * kWarps][2 * lane]) = sc[i][0];
      }
    }
  }

  // Raw MXFP4 stage `s` → bf16 tile. Each thread converts 16-byte chunks (one 32-element block).
  __device__ void dequant(Smem<F>& sm, int s) const {
    if constexpr (F == KvFormat::mxfp4) {
      // One 4-byte word (8 elements) per thread and step: consecutive lanes read consecutive
      // words and write consecutive 16-byte pieces of the tile (no bank conflicts).
      constexpr int kWordsPerRow = kHeadDim / 8;  // 72
      static_assert(T::kTile * kWordsPerRow % kThreads == 0, "whole dequant steps per thread");
#pragma unroll 6
      for (int i = 0; i < T::kTile * kWordsPerRow / kThreads; ++i) {
        const int c = threadIdx.x + i * kThreads;
        const int r = c / kWordsPerRow, wi = c % kWordsPerRow;
        const std::uint32_t w = *reinterpret_cast<const std::uint32_t*>(&sm.raw[s][r][wi * 4]);
        const float scale = decode_e8m0(sm.scales[s][r][wi / 4]);
        *reinterpret_cast<uint4*>(&sm.tile[r][wi * 16]) =
            make_uint4(e2m1x2_to_bf16x2(w & 0xFF, scale), e2m1x2_to_bf16x2((w >> 8) & 0xFF, scale),
                       e2m1x2_to_bf16x2((w >> 16) & 0xFF, scale), e2m1x2_to_bf16x2(w >> 24, scale));
      }
    }
  }
};

template <KvFormat F>
__global__ void __launch_bounds__(kThreads, 1) decode_kernel(const __grid_constant__ DecodeParams p) {
  using T = Traits<F>;
  using Sh = TileShape<T::kTile>;
  using Mma = MmaOps<T::kFp16>;
  constexpr int kTile = T::kTile;
  extern __shared__ __align__(128) std::uint8_t smem_raw[];
  Smem<F>& sm = *reinterpret_cast<Smem<F>*>(smem_raw);

  // Let the combine grid (if any) launch now; it waits in griddepcontrol.wait until this grid
  // has finished and its writes are visible, so its launch latency hides behind this kernel.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const WorkItem item = p.items[blockIdx.x];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;    // mma fragment row group / column pair
  const int tg = warp % 4, kh = warp / 4;  // S = Q·Kᵀ: tokens [tg·kTokensS, +kTokensS), dims [288kh, +288)
  const int sh = 2 * warp + lane / 16, si = lane % 16;  // softmax: head sh, tokens [si·kTokensLane, +kTokensLane)

  // item.request is a q row v = b · s_q + i (its KV range already cut to token i's causal length).
  const int b = item.request / p.s_q;
  Decoder<F> dec{p, 0, 0};
  if (p.page_table == nullptr) {
    dec.row_base = __ldg(p.kv_indptr + b);
  } else {
    dec.page_base =
        p.page_table_stride > 0 ? std::int64_t(b) * p.page_table_stride : std::int64_t(__ldg(p.kv_indptr + b));
  }

  // Q of this request (16 rows × 1152 bytes) joins the first stage's copy group.
  const std::uint8_t* qsrc =
      reinterpret_cast<const std::uint8_t*>(p.q) + std::int64_t(item.request) * kNumHeads * kHeadDim * 2;
  for (int i = threadIdx.x; i < kNumHeads * (kHeadDim * 2 / 16); i += kThreads) {
    const int h = i / (kHeadDim * 2 / 16), ch = i % (kHeadDim * 2 / 16);
    cp_async16(&sm.q[h][ch * 16], qsrc + std::int64_t(h) * kHeadDim * 2 + ch * 16, 16);
  }
  const int num_tiles = (item.kv_end - item.kv_begin + kTile - 1) / kTile;
  std::uint16_t sc[Sh::kRowsPerWarp][1];
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < num_tiles) {
      dec.load_tile(sm, s, item.kv_begin + s * kTile, item.kv_end, sc);
      dec.store_scales(sm, s, sc);
    }
    cp_async_commit();
  }
  cp_async_wait<T::kStages - 2>();
  __syncthreads();  // Q (and tile 0) landed

  // fp16 path: scale each head's Q by 2^e so that max|Q·2^e| < 2^14 — exact for every element
  // within 2^28 of the head's largest — and fold 2^-e into that head's logit scale.
  float logit_scale = p.logit_scale;
  if constexpr (T::kFp16) {
    float amax = 0.f;
    const std::uint16_t* qrow = reinterpret_cast<const std::uint16_t*>(sm.q[sh]);
    for (int d = si; d < kHeadDim; d += 16) amax = fmaxf(amax, fabsf(bf16_to_float(qrow[d])));
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const int e = amax > 0.f ? min(max(13 - (int((float_to_bits(amax) >> 23) & 0xFF) - 127), -100), 100) : 0;
    if (si == 0) sm.q_exp[sh] = e;
    logit_scale *= bits_to_float(std::uint32_t(127 - e) << 23);
    __syncthreads();
  }
  // A fragments of Q for this warp's 288 dims. fp8 uses the k order of a raw-fp8 ldmatrix
  // fragment (lane (g, c) holds dims 4c..4c+3 of its rows): k slots 2c, 2c+1 ← dims 4c, 4c+1 and
  // k slots 2c+8, 2c+9 ← dims 4c+2, 4c+3 — the same permutation on both operands.
  std::uint32_t qa[kKSteps][4];
#pragma unroll
  for (int k = 0; k < kKSteps; ++k) {
    const int d0 = kh * kHalfDims + k * 16;
    if constexpr (F == KvFormat::fp8) {
      const float s0 = bits_to_float(std::uint32_t(127 + sm.q_exp[g]) << 23);
      const float s1 = bits_to_float(std::uint32_t(127 + sm.q_exp[g + 8]) << 23);
      const uint2 r0 = *reinterpret_cast<const uint2*>(&sm.q[g][(d0 + 4 * c) * 2]);
      const uint2 r1 = *reinterpret_cast<const uint2*>(&sm.q[g + 8][(d0 + 4 * c) * 2]);
      qa[k][0] = bf16x2_to_f16x2_scaled(r0.x, s0);
      qa[k][1] = bf16x2_to_f16x2_scaled(r1.x, s1);
      qa[k][2] = bf16x2_to_f16x2_scaled(r0.y, s0);
      qa[k][3] = bf16x2_to_f16x2_scaled(r1.y, s1);
    } else {
      ldmatrix_x4(qa[k], &sm.q[lane % 16][(d0 + (lane / 16) * 8) * 2]);
    }
  }

  SoftmaxState<float> st = SoftmaxState<float>::empty();  // head sh
  float o[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;

  for (int t = 0; t < num_tiles; ++t) {
    const int stage = t % T::kStages;
    const int t0 = item.kv_begin + t * kTile;
    cp_async_wait<T::kStages - 2>();
    __syncthreads();  // tile t landed for every thread; iteration t−1 is finished everywhere

    const int next = t + T::kStages - 1;
    const bool load_next = next < num_tiles;
    if (load_next) dec.load_tile(sm, next % T::kStages, item.kv_begin + next * kTile, item.kv_end, sc);
    cp_async_commit();

    const std::uint8_t(*kv)[kPitch] = nullptr;  // 16-bit tile: the bf16 stage or dequantized MXFP4
    if constexpr (T::kDequant) {
      dec.dequant(sm, stage);
      __syncthreads();
      kv = sm.tile;
    } else if constexpr (F == KvFormat::bf16) {
      kv = reinterpret_cast<const std::uint8_t(*)[kPitch]>(sm.raw[stage]);
    }

    // S partial over this warp's dims for tokens [16tg, 16tg+16): four independent chains.
    {
      // Independent accumulator chains: fp8 pairs k steps (2), the 16-bit paths rotate over 4.
      constexpr int kChains = F == KvFormat::fp8 ? 2 : 4;
      float acc[kChains][Sh::kNTiles][4] = {};
      if constexpr (F == KvFormat::fp8) {
        // One x4 = 8 tokens × 16 fp8 bytes per matrix: (n-tile 2np, k), (2np+1, k), (2np, k+1), (2np+1, k+1).
        // Token pairs np inside the k loop: 2·kNTiles independent accumulator chains in flight.
        const std::uint8_t* b_ptr = &sm.raw[stage][Sh::kTokensS * tg + lane % 16][kh * kHalfDims + (lane / 16) * 16];
#pragma unroll
        for (int k = 0; k < kKSteps; k += 2) {
#pragma unroll
          for (int np = 0; np < Sh::kNTiles / 2; ++np) {
            std::uint32_t r[4];
            ldmatrix_x4(r, b_ptr + np * 16 * T::kRawPitch + k * 16);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
#pragma unroll
              for (int n = 0; n < 2; ++n) {
                const std::uint32_t x = r[2 * h + n];
                Mma::mma(acc[h][2 * np + n], qa[k + h], e4m3x2_to_f16x2(std::uint16_t(x)),
                         e4m3x2_to_f16x2(std::uint16_t(x >> 16)));
              }
            }
          }
        }
      } else {
#pragma unroll
        for (int k = 0; k < kKSteps; ++k) {
#pragma unroll
          for (int np = 0; np < Sh::kNTiles / 2; ++np) {
            std::uint32_t b[4];
            ldmatrix_x4(b, &kv[Sh::kTokensS * tg + 16 * np + lane % 8 + (lane / 16) * 8]
                              [(kh * kHalfDims + ((lane / 8) % 2) * 8) * 2 + k * 32]);
            Mma::mma(acc[k % kChains][2 * np], qa[k], b[0], b[1]);
            Mma::mma(acc[k % kChains][2 * np + 1], qa[k], b[2], b[3]);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < Sh::kNTiles; ++j) {
        const int col = Sh::kTokensS * tg + 8 * j + 2 * c;
        float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int ch = 0; ch < kChains; ++ch) {
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] += acc[ch][j][e];
        }
        *reinterpret_cast<float2*>(&sm.s_part[kh][g][col]) = make_float2(v[0], v[1]);
        *reinterpret_cast<float2*>(&sm.s_part[kh][g + 8][col]) = make_float2(v[2], v[3]);
      }
    }
    __syncthreads();

    // Online softmax: half-warp (warp, lane/16) owns head sh; each lane kTokensLane tokens.
    {
      constexpr int kN = Sh::kTokensLane;
      float sv[kN];
#pragma unroll
      for (int i = 0; i < kN; i += 4) {
        const float4 a = *reinterpret_cast<const float4*>(&sm.s_part[0][sh][kN * si + i]);
        const float4 b = *reinterpret_cast<const float4*>(&sm.s_part[1][sh][kN * si + i]);
        sv[i] = a.x + b.x, sv[i + 1] = a.y + b.y, sv[i + 2] = a.z + b.z, sv[i + 3] = a.w + b.w;
      }
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        sv[i] = (t0 + kN * si + i < item.kv_end) ? sv[i] * logit_scale : -INFINITY;
        mx = fmaxf(mx, sv[i]);
      }
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float f = st.rescale_to(mx);
      float pv[kN], sum = 0.f;
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        pv[i] = __expf(sv[i] - st.m);
        sum += pv[i];
      }
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      st.add(sum);
#pragma unroll
      for (int i = 0; i < kN; i += 4) {
        *reinterpret_cast<uint2*>(&sm.p[sh][2 * (kN * si + i)]) =
            make_uint2(Mma::pack(pv[i], pv[i + 1]), Mma::pack(pv[i + 2], pv[i + 3]));
      }
      if (si == 0) sm.factor[sh] = f;
    }
    __syncthreads();

    // O = f·O + P·V for value dims [64w, 64w+64).
    const float f0 = sm.factor[g], f1 = sm.factor[g + 8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      o[j][0] *= f0;
      o[j][1] *= f0;
      o[j][2] *= f1;
      o[j][3] *= f1;
    }
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      std::uint32_t a[4];
      ldmatrix_x4(a, &sm.p[lane % 16][kk * 32 + (lane / 16) * 16]);
      if constexpr (F == KvFormat::fp8) {
        // Transposed raw fp8: lane (g, c) gets tokens 2c, 2c+1 × bytes 2g, 2g+1 of a 16-dim block;
        // a byte permute pairs the tokens per dim → n-tiles of the block's even and odd dims.
        const std::uint8_t* vrow = sm.raw[stage][kk * 16 + lane % 16];
#pragma unroll
        for (int j = 0; j < 2; ++j) {  // 32 dims per ldmatrix: blocks 2j, 2j+1
          std::uint32_t r[4];
          ldmatrix_x4_trans(r, vrow + warp * 64 + j * 32 + (lane / 16) * 16);
#pragma unroll
          for (int bb = 0; bb < 2; ++bb) {
            const std::uint32_t lo = __byte_perm(r[2 * bb], 0, 0x3120);      // tokens 0..7 of the k16 step
            const std::uint32_t hi = __byte_perm(r[2 * bb + 1], 0, 0x3120);  // tokens 8..15
            const int blk = 2 * j + bb;
            Mma::mma(o[2 * blk], a, e4m3x2_to_f16x2(std::uint16_t(lo)), e4m3x2_to_f16x2(std::uint16_t(hi)));
            Mma::mma(o[2 * blk + 1], a, e4m3x2_to_f16x2(std::uint16_t(lo >> 16)),
                     e4m3x2_to_f16x2(std::uint16_t(hi >> 16)));
          }
        }
      } else {
        const std::uint8_t* vrow = kv[kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8];
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // two n8 tiles per ldmatrix
          std::uint32_t b[4];
          ldmatrix_x4_trans(b, vrow + (warp * 64 + j * 16 + (lane / 16) * 8) * 2);
          Mma::mma(o[2 * j], a, b[0], b[1]);
          Mma::mma(o[2 * j + 1], a, b[2], b[3]);
        }
      }
    }
    if (load_next) dec.store_scales(sm, next % T::kStages, sc);
  }
  cp_async_wait<0>();

  // LSE from the softmax owners; 1/l shared with every warp through shared memory.
  if (si == 0) {
    sm.inv_l[sh] = st.inv_l() * p.value_scale;
    const float lse = st.lse();
    if (item.partial >= 0) {
      p.partial_lse[std::int64_t(item.partial) * kNumHeads + sh] = lse;
    } else if (p.lse != nullptr) {
      p.lse[std::int64_t(item.request) * kNumHeads + sh] = lse;
    }
  }
  __syncthreads();
  // A lane's 4 values per 16-dim block and row: mma order puts dims 2c, 2c+1 in n-tile 2·blk and
  // 8+2c, 9+2c in n-tile 2·blk+1; fp8's transposed fragments interleave them: dims 4c..4c+3.
  const float inv[2] = {sm.inv_l[g], sm.inv_l[g + 8]};
#pragma unroll
  for (int blk = 0; blk < 4; ++blk) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // rows g, g+8
      const float x = inv[half];
      const float* e = o[2 * blk] + 2 * half;
      const float* f = o[2 * blk + 1] + 2 * half;
      const std::int64_t row = g + 8 * half;
      const int base = warp * 64 + blk * 16;
      if (item.partial < 0) {
        std::uint16_t* out = p.out + (std::int64_t(item.request) * kNumHeads + row) * kValueDim + base;
        if constexpr (F == KvFormat::fp8) {
          *reinterpret_cast<uint2*>(out + 4 * c) =
              make_uint2(pack_bf16x2(e[0] * x, f[0] * x), pack_bf16x2(e[1] * x, f[1] * x));
        } else {
          *reinterpret_cast<std::uint32_t*>(out + 2 * c) = pack_bf16x2(e[0] * x, e[1] * x);
          *reinterpret_cast<std::uint32_t*>(out + 8 + 2 * c) = pack_bf16x2(f[0] * x, f[1] * x);
        }
      } else {
        float* out = p.partial_o + (std::int64_t(item.partial) * kNumHeads + row) * kValueDim + base;
        if constexpr (F == KvFormat::fp8) {
          *reinterpret_cast<float4*>(out + 4 * c) = make_float4(e[0] * x, f[0] * x, e[1] * x, f[1] * x);
        } else {
          *reinterpret_cast<float2*>(out + 2 * c) = make_float2(e[0] * x, e[1] * x);
          *reinterpret_cast<float2*>(out + 8 + 2 * c) = make_float2(f[0] * x, f[1] * x);
        }
      }
    }
  }
}

template <KvFormat F>
cudaError_t prepare() {
  return cudaFuncSetAttribute(decode_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sizeof(Smem<F>)));
}

template <KvFormat F>
cudaError_t launch(const DecodeParams& p, cudaStream_t stream) {
  decode_kernel<F><<<p.num_items, kThreads, sizeof(Smem<F>), stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

int decode_tile_tokens(KvFormat format) {
  switch (format) {
    case KvFormat::bf16:
      return Traits<KvFormat::bf16>::kTile;
    case KvFormat::fp8:
      return Traits<KvFormat::fp8>::kTile;
    case KvFormat::mxfp4:
      return Traits<KvFormat::mxfp4>::kTile;
  }
  return 64;
}

cudaError_t prepare_decode(KvFormat format) {
  switch (format) {
    case KvFormat::bf16:
      return prepare<KvFormat::bf16>();
    case KvFormat::fp8:
      return prepare<KvFormat::fp8>();
    case KvFormat::mxfp4:
      return prepare<KvFormat::mxfp4>();
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_decode(KvFormat format, const DecodeParams& p, cudaStream_t stream) {
  switch (format) {
    case KvFormat::bf16:
      return launch<KvFormat::bf16>(p, stream);
    case KvFormat::fp8:
      return launch<KvFormat::fp8>(p, stream);
    case KvFormat::mxfp4:
      return launch<KvFormat::mxfp4>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace mla::sm90
