// mla-decode public API: the decode step of DeepSeek-R1 multi-head latent attention.
//
//   S[h,n] = sm_scale · Σ_d Q[h,d]·KV[n,d]   (d < 576),   P = softmax_n(S)
//   O[h,:] = Σ_n P[h,n] · KV[n, 0:512],      LSE[h] = ln Σ_n exp(S[h,n])
//
// Usage (both backends):
//   mla::Problem p = ...;                               // describe the call
//   mla::Status s = mla::validate(p, backend);          // optional: plan() validates too
//   size_t bytes = 0; mla::workspace_size(p, backend, &bytes);
//   mla::Plan plan; mla::plan(p, backend, workspace, bytes, &plan);   // once per shape/lengths
//   mla::run(p, plan, stream);                          // every step; no allocation, no sync
//
// Pointers are host pointers for Backend::cpu and device pointers for Backend::cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mla {

inline constexpr int kNumHeads = 16;                               // query heads
inline constexpr int kHeadDim = 576;                               // query/key width (latent + rope)
inline constexpr int kValueDim = 512;                              // value/output width (the latent part)
inline constexpr int kMaxSq = 4;                                   // query tokens per request (decode + MTP)
inline constexpr std::int64_t kMaxTotalQ = 1 << 30;                // query rows B · s_q per call (int work lists)
inline constexpr int kMxfp4Block = 32;                             // elements per E8M0 scale
inline constexpr int kMxfp4ScalesPerRow = kHeadDim / kMxfp4Block;  // 18

enum class KvFormat : int { bf16 = 0, fp8 = 1, mxfp4 = 2 };
enum class Backend : int { cpu = 0, cuda = 1 };

// Bytes of one packed KV row (scales of MXFP4 excluded): 1152, 576, 288.
std::int64_t kv_row_bytes(KvFormat format);
const char* to_string(KvFormat format);
const char* to_string(Backend backend);

enum class StatusCode : int {
  ok = 0,
  invalid_argument,     // malformed problem description
  unsupported,          // well formed, but this backend does not do it (yet)
  workspace_too_small,  // caller's workspace smaller than workspace_size()
  cuda_error,           // a CUDA runtime call failed
  no_device,            // Backend::cuda asked for, no usable GPU
  out_of_memory,        // host memory ran out in plan() or run() (device memory: cuda_error)
};

struct Status {
  StatusCode code = StatusCode::ok;
  std::string message;
  bool ok() const { return code == StatusCode::ok; }
  static Status success() { return {}; }
};

// The KV cache: `rows` physical rows of 576 elements in `format`.
struct KvCache {
  KvFormat format = KvFormat::bf16;
  const void* data = nullptr;            // [rows × row_stride_bytes]; first kv_row_bytes(format) bytes of a row used
  std::int64_t rows = 0;                 // physical rows in `data` (bounds every access)
  std::int64_t row_stride_bytes = 0;     // ≥ kv_row_bytes(format); a multiple of 16 for cuda
  float fp8_scale = 1.0f;                // fp8 only: value = e4m3 · fp8_scale (finite, > 0)
  const std::uint8_t* scales = nullptr;  // mxfp4 only: [rows × scale_stride] E8M0, first 18 columns used
  std::int64_t scale_stride = kMxfp4ScalesPerRow;  // mxfp4 only: ≥ 18 (aiter: 18 or 24); even for cuda
};

// Optional paging. page_size == 0: contiguous, request b reads physical rows
// [kv_indptr[b], kv_indptr[b+1]) (exclusive end). page_size ∈ {1, 16, 64}: kv_indptr only gives
// lengths L_b = kv_indptr[b+1] − kv_indptr[b]; logical token n of request b is physical row
//   page_table[page_base(b) + n / page_size] · page_size + n % page_size
// with page_base(b) = b · page_table_stride (a FlashMLA block table, stride ≥ ceil(L_b / page_size)),
// or, when page_table_stride == 0 (page_size 1 only; FlashInfer/aiter kv_indices),
// page_base(b) = kv_indptr[b].
struct Paging {
  int page_size = 0;                         // 0 (contiguous), 1, 16 or 64
  const std::int32_t* page_table = nullptr;  // [page_table_entries] int32 page indices
  std::int64_t page_table_entries = 0;       // length of page_table (bounds every access)
  std::int64_t page_table_stride = 0;        // entries per request; 0 = flat kv_indices (page_size 1)
};

struct Problem {
  int batch = 0;                            // B ≥ 1 requests
  int s_q = 1;                              // query tokens per request, 1..4
  const std::uint16_t* q = nullptr;         // [total_q × 16 × 576] bf16 bits, total_q = B · s_q
  std::int64_t total_q = 0;                 // rows of q / out / lse, ≤ kMaxTotalQ
  const std::int32_t* qo_indptr = nullptr;  // [B+1], qo_indptr[0] = 0, steps of exactly s_q
  const std::int32_t* kv_indptr = nullptr;  // [B+1], non-decreasing, starts at 0
  KvCache kv;
  Paging paging;
  std::uint16_t* out = nullptr;            // [total_q × 16 × 512] bf16 bits, written in full
  float* lse = nullptr;                    // optional [total_q × 16] fp32, natural log; −inf for L = 0
  float sm_scale = 0.041666666666666664f;  // 1/sqrt(576)
};

// Checks everything about `p` that can be checked on the host. For Backend::cpu all arrays are
// host memory and their contents (indptr, page table) are checked too. For Backend::cuda the
// pointers are device pointers: validate checks shapes, nulls, alignment and 64-bit offsets;
// plan() copies indptr and the page table to the host (it may synchronize) and checks contents.
Status validate(const Problem& p, Backend backend);

// How the work is split: filled by plan(), read by run(). Printable with describe().
struct Plan {
  Backend backend = Backend::cpu;
  int batch = 0;
  int s_q = 1;
  std::int64_t total_q = 0;
  // The KV format planned for: run() refuses a problem of another format.
  KvFormat kv_format = KvFormat::bf16;
  // The paging planned for (Paging::page_size; 0: contiguous). describe() prints how the cuda kernel
  // finds the rows of such a cache (kv_rows=); run() takes the problem's paging as it is.
  int page_size = 0;
  std::int64_t total_kv = 0;  // Σ L_b
  // A bound on every work item's KV tokens, a multiple of the tile: the chunk the requests were cut
  // at, or, where cuda re-cut them to balance the SMs (docs/design.md, the planner paragraph), the
  // longest item rounded up (saturating at 2^30: items can be longer only where a request itself is,
  // or on a plan of very few slots). Items of one list may be shorter and differ.
  int tokens_per_split = 0;
  int num_work_items = 0;        // (request, KV range) pairs
  int num_split_requests = 0;    // requests whose KV is split over several work items
  int max_request_partials = 0;  // most work items of one split request (0: none split)
  int grid = 0;                  // CTAs (cuda) or worker threads (cpu)
  std::size_t workspace_bytes = 0;
  void* workspace = nullptr;  // caller-owned; holds the work list and split partials
  int device = -1;            // cuda: the ordinal of the device plan() ran on (current then); run() refuses another
  int device_sms = 0;         // cuda: multiprocessors of the planned device
  int cluster_size = 0;       // cuda: split rows merged in clusters of this many CTAs (0: by a combine kernel)
  // cuda: 2 when each work item (CTA) takes two q rows of a request, which share their keys, so the
  // KV is read (and converted) once for both — with an even s_q, fp8 and MXFP4 where the rows hold at
  // least 6 tiles of 64 tokens per slot, bf16 where they hold at least 32 tiles per SM or where the
  // pairs number at most the SMs and the rows at least 1.2 per SM (docs/design.md, "Row pairs");
  // else 1. As with one row per CTA, a NaN stored in a key reaches only the rows that see it: the
  // pair's last key, the second row's only, is kept out of the first row's shared V operand.
  int rows_per_item = 1;
  // cuda: the KV is read under an L2 evict-first policy. plan() sets it when s_q = 1 and the call
  // reads at most 4 × the L2 (faster there on the H200; slower above); a caller may change it before
  // run(). It changes only speed, never results. bf16's row-pair plans (rows_per_item 2) read without
  // the policy whatever it says.
  bool kv_evict_first = false;
  // cuda, bf16 and fp8: whole KV tiles are copied by the TMA (tensor-map copies) instead of by
  // cp.async, in the general kernel and bf16's walking kernel (not in either format's one-tile
  // kernel). plan() sets it when every work item streams at least 64 tiles of unpadded rows starting
  // at even cache rows (fp8), or at least 24 tiles unless the launch's last of several waves is
  // nearly full (bf16), or, where bf16's CTAs walk several items, when the longest CTA's items hold
  // at least 16 tiles: where it measured faster on the H200; slower for short items. A caller may
  // change it before run(); tiles the TMA cannot take whole go by cp.async either way. It changes
  // only speed, never results.
  bool kv_tma = false;
  // cuda: whether a tensor map can describe the planned KV cache at all (at least 64 rows; fp8:
  // unpadded rows; never MXFP4). Where it cannot, run() copies by cp.async whatever kv_tma says.
  bool kv_map_fits = false;
  // cuda: the work list, also on the host (backend-private): run() passes short lists in the launch
  // parameters. Shared by copies of the plan; null for cpu.
  std::shared_ptr<const void> host_work_list;
};

std::string describe(const Plan& plan);

// Bytes of workspace plan() needs for this problem. Depends only on batch, s_q and the backend's
// machine (cuda: the current device's multiprocessor count; cpu: the host's hardware threads), never
// on lengths: size once for the largest batch, on the machine that runs it.
Status workspace_size(const Problem& p, Backend backend, std::size_t* bytes);

// Validates `p` and fills `workspace` (host memory for cpu, device memory for cuda) with the
// work list: each work item's request, KV range and kv_indptr offset (fixed by the lengths, as
// kv_indptr starts at 0). Call again whenever batch, lengths or page table change. Host cost
// (cuda, besides its copies): up to ~0.1 ms (bf16), ~0.2 ms (MXFP4) or ~0.45 ms (fp8) for uniform
// batches of up to 256 requests; for ragged ones of 64–600 requests, whose plan is re-cut to balance
// the SMs, up to ~0.9 ms (bf16), ~1.4 ms (MXFP4) or ~1.8 ms (fp8) (their candidate plans are
// simulated); up to ~2.4 ms at 20,000 requests (measured on a 2-core build machine; perf-notes
// v119–v122, v130, v132, v134, and "plan()'s host cost", sessions 33 and 34).
Status plan(const Problem& p, Backend backend, void* workspace, std::size_t workspace_bytes, Plan* out);

// Runs the decode. cuda: asynchronous on `stream` (a cudaStream_t, nullptr = default stream), no
// allocation, no synchronization — capturable in a CUDA graph. cpu: synchronous, `stream` ignored.
// Only host-checkable consistency with the plan is re-checked here; cuda: the current device must be
// the plan's (Plan::device: its workspace and kernel set-up live there). The plan's workspace serves one
// call at a time (cuda: the work list is read and split partials are written there): runs sharing a
// workspace must be ordered on the device, and a run still in flight must finish before plan()
// refills its workspace (plan's copies go through the default stream, which does not wait for
// non-blocking streams).
Status run(const Problem& p, const Plan& plan, void* stream = nullptr);

// True when a CUDA device of compute capability 9.0 is usable from this process.
bool cuda_available();

}  // namespace mla
