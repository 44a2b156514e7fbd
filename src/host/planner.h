// The planner: turns request lengths into a work list. Plain C++, shared by both backends.
//
// A work item is one request's KV range [kv_begin, kv_end) (logical tokens, exclusive end) for
// the q rows that request stands for (cpu: a request and its s_q rows; cuda: one virtual request
// per q row). A request whose KV fits one item writes its output directly (partial = -1); a longer
// one is split into `num_partials` items that each write a partial (normalised O, fp32 or fp16 ×
// a scale, and its LSE) which the combine step merges by LSE.
//
// Workspace layout (byte offsets, each 256-aligned), the same shape for both backends:
//   [WorkItem × max_items][RequestSplit × requests][partial O fp32 × max_partials × rows_per_partial × 512]
//   [partial scale fp32 × max_partials × rows_per_partial][partial LSE fp32 × max_partials × rows_per_partial]
// The CPU backend plans one item per request covering its s_q query rows (requests = batch, partial
// slots of s_q × 16 rows); the CUDA backend plans one item per query token — a virtual request
// b·s_q + i with its causal length (requests = batch·s_q, slots of 16 rows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mla {

struct WorkItem {
  std::int32_t request;      // b
  std::int32_t kv_begin;     // first logical token (inclusive)
  std::int32_t kv_end;       // last logical token (exclusive); kv_begin == kv_end only for L_b = 0
  std::int32_t partial;      // slot in the partial buffers, or -1: write out/lse directly
  std::int32_t kv_base = 0;  // kv_indptr[request's b] (set_kv_bases): so that a kernel starts its
                             // copies without loading it (a plan is for fixed lengths, hence bases)
  std::int32_t next = -1;    // walking grids: the index of the item this item's CTA takes next, or
                             // -1 for its last (CTA c starts at item c); unused otherwise
  // Row pairs (the CUDA plan's pair kernels, even s_q; row_pair_work_list): the item covers q rows
  // `request` and request + 1, which see the same keys but the last: [kv_begin, kv_end) is the second
  // row's range, [kv_begin, pair_end) the first's (kv_end − 1 on the pair's last piece, else kv_end).
  // The second row's partial goes to slot pair_partial (when partial ≥ 0). Unused otherwise.
  std::int32_t pair_end = 0;
  std::int32_t pair_partial = -1;
};

struct RequestSplit {
  std::int32_t first_partial;  // slot of the request's first partial
  std::int32_t num_partials;   // 0 when the request is written directly
};

struct WorkspaceLayout {
  int max_items = 0;
  int max_partials = 0;
  int rows_per_partial = 0;  // 16 heads × the q rows of an item
  std::size_t items_offset = 0;
  std::size_t splits_offset = 0;
  std::size_t partial_o_offset = 0;      // fp32 or fp16 [max_partials · rows_per_partial × 512] (the writer's choice)
  std::size_t partial_scale_offset = 0;  // fp32 [max_partials · rows_per_partial]: value = fp16 · scale (partial.h)
  std::size_t partial_lse_offset = 0;    // fp32 [max_partials · rows_per_partial]
  std::size_t total_bytes = 0;
  // Whether a work list of `num_items` items and `num_partials` partials fits (both plans check it).
  bool holds(int num_items, int num_partials) const { return num_items <= max_items && num_partials <= max_partials; }
};

// `requests`: the work list's requests (cpu: batch; cuda: batch · s_q virtual requests);
// `rows_per_item`: the q rows one item covers (cpu: s_q; cuda: 1); `target_items`: how many work
// items would fill the machine (e.g. 132 SMs × CTAs per SM). Room for requests + target_items items,
// each with a partial slot (build_work_list makes at most that many).
WorkspaceLayout workspace_layout(int requests, int rows_per_item, int target_items);
// The CUDA backend's: one item per q row (batch · s_q virtual requests), room for `ctas_per_sm`
// items per SM on top.
WorkspaceLayout cuda_workspace_layout(int batch, int s_q, int sms, int ctas_per_sm);

struct WorkList {
  std::vector<WorkItem> items;
  std::vector<RequestSplit> splits;  // [requests]: one per request of the list
  int tokens_per_split = 0;
  int num_partials = 0;
  int num_split_requests = 0;
  int max_request_partials = 0;  // most partials of one request (0 when nothing is split)
};

// Sets a list's tokens_per_split to its longest item, rounded up to `tile` (saturating at 2^30).
void set_tokens_per_split(WorkList* wl, int tile);

// Splits every request into ceil(L_b / chunk) items of at most `chunk` tokens, chunk a multiple
// of `tile`: the smallest one whose items fit in one wave of `target_items` (SMs × resident CTAs)
// when batch <= target_items, else an even share of all tokens per item. Empty requests get one
// empty item. Items are ordered longest first (by whole tiles, in request order among equals) so that
// stragglers start early.
WorkList build_work_list(std::span<const std::int32_t> kv_lengths, int target_items, int tile);

// How long `items`, in their order, keep `slots` slots busy when each slot takes the next item as
// it frees (the block scheduler's order for a grid of one CTA per item) and an item costs its tiles
// of `tile` tokens plus `item_overhead_tiles` (its start, end and partial). In tiles.
std::int64_t list_makespan(std::span<const WorkItem> items, int slots, int tile, int item_overhead_tiles);

// The CUDA plan's work list (perf-notes v117, v117b, v120, v121): build_work_list's, or the
// cheapest of these by list_makespan (`model`'s item overhead per item) plus kCombineTiles when requests
// are split (timeline lists also a tile per partial spread over the slots) — if it costs at least
// `model`'s margin less; on a tie the one listed first here stands:
// * when the requests outnumber one wave of `slots` (v117, v117b): the longest requests whole for
//   the full waves (all of them, or one fewer) and the rest — the tail — cut as finely as fits
//   1..kTailWaves waves (the smallest chunk whose pieces fit; or, where the next finer cut would
//   not fit, its longest requests cut finer as far as it fits). Example, 136 requests of 8192
//   tokens on 132 slots: 132 whole and 4 cut into 128 pieces of 256 tokens (makespan 140 tiles)
//   instead of 4 whole ones in a second wave (264);
// * every request cut at one chunk into more items than a wave (v120), scanned from whole requests
//   down to what `max_items` holds. Example, requests of 2, 26 and 7 tiles on 3 slots: the 26 in
//   halves, 17 tiles against 30 (timelines: 19);
// * with `timelines` (v121): every slot filled to the least capacity that holds every request,
//   the requests in order, each cut where a slot fills; items in planned start order, at most
//   requests + slots − 1. Example, 160 requests of 8192 tokens on 264 slots: 84 tiles against 132
//   for 160 whole items. The CUDA plan sets it for fp8 and MXFP4, whose two CTAs per SM run a
//   planned order well; bf16's one CTA per SM measured +1.5 % with it at 160 and 200 × 8192.
// (So a list that cuts nothing can win over an even-share list that does, by the combine it saves.)
// The model's two fitted numbers come as a ListModel, one per kind of bound:
// * kDramBound (bf16, fp8): an item costs kItemOverheadTiles beyond its tiles and only a 5 % model
//   gain replaces build_work_list's list. The model counts tiles per slot, not DRAM: it overstates
//   what idle slots and partial waves cost a format bound by DRAM, hence the wide margin (v126:
//   forced timelines at fp8 240 × 8192, a ~3 % model gain, measured +2.6 to +3.5 %).
// * kSmBound (MXFP4, bound by its SMs' issue): idle and lone slots cost about what the model says,
//   so a 2 % margin (v126: every list margins of 3 and 2 changed gained 4.3–12.7 %); and its slow
//   tile (~2.8 µs on a shared SM) makes an item's start and end worth about 2 tiles, not 4 (v128:
//   at 2, whole lists that left SMs half used became timelines, −3.5 to −17 %; ragged batches 0 to
//   −4.5 %; at 1, ragged batches of short requests cut finer lost 6–10 %). Its candidates are then
//   compared by a simulation of the launch (kMxfp4Pace below, v130), not by tiles per slot: the tile
//   model priced one-wave lists of fewer items than slots within a tile of the timelines that beat
//   them by 2–11 %, and no change of its terms separated those from ragged lists that lost.
// No list but build_work_list's exceeds `max_items` (the workspace layout's, which the CUDA plan
// sizes above build_work_list's).
constexpr int kItemOverheadTiles = 4;
constexpr int kCombineTiles = 2;
constexpr int kTailWaves = 3;
constexpr int kMinGainPercent = 5;
// A launch of two CTAs per SM bound by its SMs' issue (MXFP4), simulated (simulated_launch_us; perf-notes
// v130): the CTAs start in list order, the first `sms` one per SM, the next `sms` a second on each,
// every later one on the slot that frees first. An item first waits `item_latency_us` (its Q and
// first tiles in flight; its SM's other CTA computes alone meanwhile), then computes its tiles plus
// `item_tiles`, at `paired_tile_us` per tile while its SM's other CTA computes too, else at
// `lone_tile_us`. The call adds `launch_us` and the merge of split requests: `cluster_merge_us` for
// a list merged in clusters, else the combine's `partial_us` per partial and `split_request_us` per
// split request. kMxfp4Pace: least squares over 334 measured MXFP4 lists of five H200 A/B calls
// (v126–v129: uniform and ragged, 20–800 µs; the measured lone and paired paces of session 23's
// traces were 1.77 and 2.78 µs): mean error 1.5 %; it ranks 110 of 114 measured pairs that differ by
// 1.5 % or more as measured, and fitted on three of the calls it picks the same lists in the others.
// On the two calls measured after it (v130, v131) it ranked 32 of 34 such pairs as measured, mean
// error 1.5 % (bench/pace/: the lists, their µs, scripts/fit_pace.py).
struct LaunchPace {
  double paired_tile_us;
  double lone_tile_us;
  double item_tiles;
  double item_latency_us;
  double launch_us;
  double cluster_merge_us;
  double partial_us;
  double split_request_us;
  // The most tiles per µs all SMs together stream (0: no such bound). While the computing CTAs'
  // paces ask for more, every one of them slows by the same factor.
  double dram_tiles_per_us = 0;
};
constexpr LaunchPace kMxfp4Pace{2.81, 1.84, 1.16, 1.89, 6.67, 0.98, 0.0045, 0.0177};
// `items` in launch order on `sms` SMs of two slots; `clustered`: split requests merge in clusters.
double simulated_launch_us(std::span<const WorkItem> items, int sms, int tile, bool clustered, int partials,
                           int split_requests, const LaunchPace& pace);

struct ListModel {
  int item_overhead_tiles;  // an item's start, end and partial, in tiles
  int min_gain_percent;     // the least model gain, in %, for which a list replaces build_work_list's
  // When set, lists are compared by simulated_launch_us on slots / 2 SMs instead of tiles per slot
  // (the item overhead then only shapes the candidates: the chunk scan, and the timelines' capacity —
  // also at a tile more and less per item, taken only where they beat the best list by the margin).
  const LaunchPace* pace = nullptr;
};
constexpr ListModel kDramBound{kItemOverheadTiles, kMinGainPercent};
constexpr ListModel kSmBound{2, 2, &kMxfp4Pace};
// `considered`, when given, gets every list weighed, build_work_list's first (measurement tools:
// bench/pace/list_bench.cpp).
WorkList balanced_work_list(std::span<const std::int32_t> kv_lengths, int slots, int tile, int max_items,
                            bool timelines, ListModel model = kDramBound, std::vector<WorkList>* considered = nullptr);

// fp8's list (perf-notes v132): balanced_work_list's by the tile model (kDramBound), unless one of the
// lists it weighed, or of the timelines filled at 1..kSimulatedTimelineOverheads tiles per item,
// simulates (simulated_launch_us with `pace`, its DRAM bound included) at least
// kSimulatedMinGainPercent % faster — then the fastest such. kFp8Pace: least squares over 756 lists
// of 92 cases, every list the planner weighed for each, measured in two H200 runs by mla_list_bench
// (bench/pace/fp8_a.txt, fp8_b.txt; scripts/fit_lists.py): mean error 2.4 %; fitted on the first run's
// cases alone it picked −0.67 % (geomean) on the second's. Measured on 84 new cases after the fit
// (fp8_c.txt, fp8_d.txt): 28 lists changed, −5.9 to +0.7 % each (4 of them +0.3 to +0.7 %); −0.3 %
// and −1.0 % geomean over the two runs' 44 and 40 cases (the fastest list measured: −1.2 and −1.4 %). Its fitted
// numbers sit in a flat valley (latency ~0 here, the per-item tiles carrying it); refitted on all three runs they move
// by under 10 % and pick another list at 52 of 2,740 batches of a CPU sweep (1–600 requests).
constexpr int kSimulatedTimelineOverheads = 6;
constexpr int kSimulatedMinGainPercent = 1;
constexpr LaunchPace kFp8Pace{1.943, 1.572, 1.425, 0.01028, 10.34, 2.804, 0.008806, 6.329e-06, 114.8};
WorkList simulated_work_list(std::span<const std::int32_t> kv_lengths, int slots, int tile, int max_items,
                             const LaunchPace& pace);

// The CUDA backend's cluster mode (src/kernels/sm90/cluster_merge.h): every one of the `rows` q rows
// gets n items — n the most pieces of a row rounded up to a power of two — item k of row r at
// r·n + k with partial = k: the row's k-th piece in list order (timeline lists may put a later
// piece first), or an empty range [0, 0) past its last. A cluster
// of n CTAs per row then merges the row in shared memory. Returns n, or 0 (and leaves `items` alone)
// when no row is split, n > max_cluster, or rows · n items exceed one wave of `slots`.
int cluster_work_list(const WorkList& wl, int rows, int max_cluster, int slots, std::vector<WorkItem>* items);

// Row pairs (each format's pair kernel, even s_q; perf-notes v136–v138). `pair_list`, a list over row pairs
// (row_pair_lengths: pair k of request b as its request b·(s_q / 2) + k, of `pair_lengths`), becomes
// the list over q rows the kernel takes: each item names its pair's first q row (request = 2 · pair),
// that row's end (pair_end: kv_end − 1 on the pair's last piece, else kv_end) and, when split, both
// rows' partial slots (partial, pair_partial); one split per q row, in the order of the rows: a pair
// split into n pieces at slots [F, F + n) of `pair_list` puts its first row's partials at [2F, 2F + n)
// and its second row's at [2F + n, 2F + 2n), one 16-head slot each.
WorkList row_pair_work_list(const WorkList& pair_list, std::span<const std::int32_t> pair_lengths);
// Row pairs' list model, every format: MXFP4's tile model (kSmBound's item overhead and margin) on
// one CTA per SM, without its simulated launch (fitted to the one-row kernel's two CTAs per SM). Not
// fitted itself.
constexpr ListModel kRowPairs{2, 2};
// Whether the CUDA plan takes row pairs for q rows of these lengths (`row_lengths`, query_row_lengths)
// on `slots` slots of the one-row kernel: when their tiles of `tile` tokens number at least
// kRowPairsMinTilesPerSlot per slot. A pair's CTA (two warpgroups, one per SM) runs its phases in
// step, so a call of few tiles per SM, a chain of latencies, is faster a row per CTA; measured on
// the H200 at s_q 2 — MXFP4 (perf-notes v136): 4 × 1024 (0.5 tiles per slot) +32 %, 4 × 8192 and
// 32 × 1024 (3.9) +2.6 %, 64 × 1024 (7.8) −1.4 %, 256 × 1024 (15.5) −8.9 %, 32 × 8192 (31) −10.4 %,
// 64 × 8192 −15.4 %, 256 × 8192 −17.9 %; fp8 (v138): 4 × 1024 +23 %, 4 × 8192 +0.5 %, 32 × 1024
// +3.2 %, 64 × 1024 −10.2 %, 256 × 1024 −18.8 %, 32 × 8192 −21.0 %, 64–256 × 8192 −25 to −26 %.
constexpr int kRowPairsMinTilesPerSlot = 6;
bool row_pairs_pay(std::span<const std::int32_t> row_lengths, int slots, int tile);
// bf16's row pairs (decode_bf16_pairs.cu: two warpgroups splitting each tile's work, a ring of 2.3
// tiles where the one-row kernel has three stages) pay where the q rows hold at least
// kBf16RowPairsMinTilesPerSm tiles of `tile` tokens per SM (`sms`: the one-row kernel's one CTA per
// SM), or where the pairs number at most `sms` (the pair list may still split them) while the rows
// number at least kBf16RowPairsWaveMinRowsPercent % of the SMs and hold at least kBf16RowPairsWaveMinTilesPerSm tiles
// per SM. Measured on the H200 at s_q 2 (perf-notes v141, v143): from 32 tiles per SM, forced pairs
// −2.5 to −12.7 % at every shape; below it, the one-wave clause (fitted on 12 shapes, checked on 12
// more) −2.5 to −33.9 % at 16 of the 17 shapes it takes (128 × 512 +2.0 %); left to one row: 70 × 1024
// (1.06 rows per SM) +8.5 %, 100 × 64 (1.5 tiles per SM) +6.1 %, and where the pairs alone do not
// fill the SMs, forced pairs were erratic: 4 × 8192 +8.4 %, 16 × 8192 +4.7 %, 64 × 2048 +8.3 %,
// 8 × 8192 −7.6 %, 36 × 1024 −11.0 %, 32 × 4096 −2.9 %.
constexpr int kBf16RowPairsMinTilesPerSm = 32;
constexpr int kBf16RowPairsWaveMinRowsPercent = 120;
constexpr int kBf16RowPairsWaveMinTilesPerSm = 4;
bool bf16_row_pairs_pay(std::span<const std::int32_t> row_lengths, int sms, int tile);

// Whether `wl` is a well-formed list of requests of these lengths (what a plan may launch): one split
// per request; every item within its request; a request's items cover [0, L) exactly, without
// overlap (an empty request: one empty item, which writes its zeros); a whole request's item has
// partial -1, a split one's items distinct slots of its split's range, every range within the list's
// partial slots (the sum of the splits') and no two ranges overlapping.
bool is_work_list_of(const WorkList& wl, std::span<const std::int32_t> kv_lengths);

// Whether `grid` CTAs, CTA c from item c by `next`, take every item of `items` exactly once.
bool walks_every_item_once(std::span<const WorkItem> items, int grid);

// Sets every item's kv_base to kv_indptr[b] of its request b = item.request / s_q (the CUDA plan's
// items name virtual requests b·s_q + i; the CPU plan's, with s_q = 1 here, name b).
void set_kv_bases(std::span<WorkItem> items, std::span<const std::int32_t> kv_indptr, int s_q);

// How many CTAs a kernel that can walk several items per CTA (item c, then its `next` chain) should launch:
// `slots` (one wave) when the items outnumber it and average at most `max_mean_tokens` tokens —
// walking saves each extra item a pipeline restart and costs a little per tile, so it pays for short
// items only — else one CTA per item.
int walking_grid(std::span<const WorkItem> items, int slots, std::int64_t max_mean_tokens);
// bf16's walking_grid bound: CTAs walk when their items average at most this many tiles (with more
// items than SMs, walking saves each extra item a pipeline restart, ~2.5 µs, and costs ~1 % per tile;
// perf-notes v42b, v42c).
constexpr int kWalkMaxMeanTiles = 64;

// A walking CTA's cost of an item beyond its tiles, in tiles: the item's epilogue and the next one's
// start (its first tiles' copies already went out under the previous item: perf-notes v42c).
constexpr int kWalkItemTiles = 1;

// Orders `items` for a walking grid in rounds (CTA c takes items c, c + grid, c + 2·grid, …, each item's
// `next` set so) so that the CTAs'
// loads — each item's tiles of `tile` tokens plus kWalkItemTiles — come out even (perf-notes v118,
// v119): round by round (`grid` items each), the round's costliest item goes to the CTA with the
// least load so far (ties: the lower CTA); then, while a swap of two items between the busiest CTA
// and one of the 8 least loaded lowers the larger of their loads, the best such swap (the two items
// trade CTAs and rounds, so each CTA keeps its places in the layout; at most `grid` swaps); the
// CTAs that take an item of the last, partial round are numbered first. Kept longest first, a
// ragged list would give CTA 0 the longest item of every round (ragged bf16 256 × 8192 ran at
// 1.51 × the floor). Items of one length throughout keep their order; nothing happens when the
// items fit the grid.
void walk_order(std::span<WorkItem> items, int grid, int tile);

// The busiest CTA's load (walk_order's measure, in tiles) of a list laid out for a walking grid of
// `grid` CTAs: CTA c's chain from item c by `next`.
std::int64_t walk_makespan(std::span<const WorkItem> items, int grid, int tile);

// The work list of a walking grid (perf-notes v119), in walk_order: `wl` (the CUDA plan's list), or
// every request cut at one chunk into more items than `grid` — the one, from whole requests down
// to what `max_items` holds (balanced_work_list's scan), whose list in rounds leaves the least load on the busiest CTA
// (plus kCombineTiles when requests are split) — if walk_order leaves that list at least kWalkMinGainPercent % cheaper
// than `wl`. The chunks are searched only when the CTAs' mean load with every request whole is that much below `wl`'s
// busiest CTA. Example (ragged, 200 requests of up to 8192 tokens, 132 CTAs): build_work_list cuts at 92 tiles, 249
// items in two rounds, the busiest CTA at 105 tiles; a 67-tile cut gives 284 items and 96.
constexpr int kWalkMinGainPercent = 2;
WorkList walking_work_list(std::span<const std::int32_t> kv_lengths, WorkList wl, int grid, int tile, int max_items);

// One-CTA-per-SM kernels (bf16): timelines walked (perf-notes v122). Every one of `slots` CTAs walks
// a timeline of capacity C tiles (each item's tiles plus kWalkItemTiles), the requests in order,
// each cut where a timeline fills; C the least that holds every request. The walking kernel takes
// CTA t's items by their `next` chain, so the plan's order holds whatever the SMs' pace (the block
// scheduler, v121, ran bf16's timelines no faster). It competes with *wl on `grid` CTAs when *wl
// walks (walk_makespan) or fits one wave (list_makespan on `slots`), not with several waves of one
// CTA per item (measured slower: 200 × 8192 +2.1 %). Its model: the busiest CTA, kCombineTiles and
// a tile per partial spread over the CTAs, plus kWalkPacePercent % for the walking kernel, plus
// kWalkedStartTiles against a one-wave list, whose CTAs stream faster than the model's tile while
// SMs idle (fitted by A/B: 16 before the walking kernel had the TMA, v122; 4 since, v125, where 8
// and 4 gained −1.1 to −11 % on every list they changed, and 2 and 0 lost at as many). When that is
// at least kMinGainPercent % under *wl's, replaces *wl and returns the timelines used as the grid;
// else returns `grid`. Example, 92 requests of 8192 tokens on 132 SMs: 220 items on 132 walking
// CTAs, the busiest at 91 tiles against 132 for 92 whole requests (measured −9 %). Never more than
// `max_items` items.
// walked_timelines' list before its test: every one of up to `slots` CTAs walks a timeline filled to
// the least capacity that holds every request, each item costing its tiles plus `overhead` (its
// kWalkItemTiles; measurement tools try others). *used: the timelines that hold an item.
WorkList walked_timeline_list(std::span<const std::int32_t> kv_lengths, int slots, int tile, int overhead, int* used);
constexpr int kWalkPacePercent = 1;
constexpr int kWalkedStartTiles = 4;
int walked_timelines(std::span<const std::int32_t> kv_lengths, int slots, int tile, int max_items, int grid,
                     WorkList* wl);

// Whether the CUDA plan treats a batch as ragged: at most kRaggedMaxRows q rows (virtual requests),
// and its requests' lengths (`request_lengths`, one per request, not per q row) spread with a
// coefficient of variation (standard deviation over mean) of at least kRaggedMinCv. bf16's ragged
// batches take fp8's simulated launch (simulated_work_list with kFp8Pace), a CTA per item, instead of
// the tile model's list walked (perf-notes v134: over 33 ragged batches of 48–300 requests of up to
// 2048–16384 tokens, lengths uniform in [0, max], cv ≈ 0.58, measured in three runs, −0.1 to −8.0 %
// each against the plan before, −3.0 % geomean, none slower; the fastest list measured was −3.8 %;
// v134b: over 14 of lengths uniform in [max/2, max] or [max/4, max], cv ≈ 0.19 and 0.35, −0.1 to
// −8.7 %, −2.4 %). Uniform batches walk better (the same rule there: +0.2 % geomean, up to +9.5 %);
// spreads between 0 and 0.19 are not measured, and 0.15 splits them; nor are batches above 300 rows,
// where walking saves thousands of short items their restarts.
constexpr double kRaggedMinCv = 0.15;
constexpr int kRaggedMaxRows = 300;
bool ragged_batch(std::span<const std::int32_t> request_lengths, int rows);

// bf16's walking path, the CUDA plan's for batches that are not ragged: `wl` (the tile model's list)
// on `grid` CTAs (walking_grid's, or the items when nothing walks), cut and laid out by
// walking_work_list, then walked timelines where they pay (walked_timelines). Returns the grid. (The
// plan then may still take every request whole, whole_requests_pay, where the TMA can copy them.)
int bf16_walking_path(std::span<const std::int32_t> kv_lengths, int slots, int tile, int max_items, int grid,
                      WorkList* wl);

// bf16 (one CTA per SM): every request whole, a CTA each, instead of a walking list (perf-notes v133).
// Where the requests outnumber half the SMs but not kWholeMaxSlotPercent % of them, a one-wave launch
// of whole requests copied by TMA streams each SM's tiles faster than a full machine does, and pays no
// walking, partials or combine. Measured on the H200 (bench/pace/bf16_a … bf16_c.txt; the fit:
// scripts/fit_whole_requests.py), a launch of N whole requests took about
//   whole_us = fixed_us + tile_us · L + request_us · N     (L: its longest request's tiles; 27 lists of
//   68–88 requests, within −7…+9 %), and the plan's walking lists
//   walked_us = walked_fixed_us + T / (walked_tiles_per_slot_us · slots)   (T: all tiles; 38 lists of
//   68–100 requests, within −5…+12 %)
// (kWholeRequests' fields), and above 84 requests whole ones slowed sharply (88 × 8192: 218 µs against
// the fit's 203; 92 × 8192 242, ~1.2 × the per-tile time of 84). whole_requests_pay: true when
// slots / 2 < N ≤ kWholeMaxSlotPercent % of `slots`, every request holds at least kTmaMinTilesBf16 ·
// `tile` tokens (as kv_tma asks), and whole_us is at least kWholeMinGainPercent % under walked_us.
// (The caller checks that the TMA can copy them.)
struct WholeRequestsModel {
  double fixed_us;
  double tile_us;
  double request_us;
  double walked_fixed_us;
  double walked_tiles_per_slot_us;
};
constexpr WholeRequestsModel kWholeRequests{-64.01, 1.384, 1.021, 20.02, 0.4495};
constexpr int kWholeMaxSlotPercent = 64;
constexpr int kWholeMinGainPercent = 2;
bool whole_requests_pay(std::span<const std::int32_t> kv_lengths, int slots, int tile);

// Whether a call's KV copies should go under an L2 evict-first policy (Plan::kv_evict_first): when
// each KV row is read once (s_q = 1) and the call reads at most 4 × the L2 (`l2_bytes`). Evict-first
// keeps the KV from evicting the L2's other lines, dirty ones included, whose write-backs would
// share the DRAM with the KV: a fixed saving (~2.4 µs on the H200, the write-backs of about half
// the L2), which needs the policy to the call's end. It also streams ~3 % slower, even in a plain
// copy loop (bench/micro/stream_pattern.cu), so the two break even near 350 MB, ~5.5 × the L2
// (perf-notes v94, session 17).
bool kv_evict_first(std::int64_t kv_bytes, std::int64_t l2_bytes, int s_q);

// Whether the decode kernel copies whole tiles by TMA (Plan::kv_tma; fp8: perf-notes v113, bf16: v115,
// bf16's walking kernel: v123). A tensor-map copy per tile takes the copy instructions off the
// kernel's chain but lands a CTA's first tile later: for fp8 −1.1 to −1.5 % where every CTA streams
// 128 tiles, a loss at items of 2–16 tiles and break-even at 32 (v110, v111, v114's check); for bf16
// −1.5 to −2.0 % at items of 26–64 tiles, −0.4 % at 16, a loss at 4–8 (v115, v116). So, with one CTA
// per item, only when every item holds at least `min_tiles` tiles of `tile_tokens` (kTmaMinTilesFp8,
// kTmaMinTilesBf16). On a walking grid of `grid` < items CTAs (bf16), only the CTAs' first tiles
// land later, and the call ends with its longest chain: when that chain (CTA c's items from item c
// by `next`) holds at least `min_chain_tiles` tiles (kTmaMinChainTilesBf16; v123: −0.4 to −3.6 % at
// longest chains of 17–145 tiles, +2.3 % at 13). Further, the map must describe the cache
// (`map_fits`: fp8 needs unpadded rows), and every tile the copy takes whole must start at a multiple
// of `unit_rows` (the map's unit: fp8 row pairs, 2; bf16 rows, 1): a contiguous cache whose items
// start there, or pages of 64 rows (`page_size`; pages of 1 or 16 rows go row by row). Items carry
// their kv_base (set_kv_bases).
constexpr int kTmaMinTilesFp8 = 64;
constexpr int kTmaMinTilesBf16 = 24;
constexpr int kTmaMinChainTilesBf16 = 16;
bool kv_tma(std::span<const WorkItem> items, int grid, int tile_tokens, int min_tiles, int min_chain_tiles,
            int unit_rows, bool map_fits, int page_size);
// bf16's further condition (perf-notes v115): `ctas` CTAs on `slots` resident slots fit one wave, or
// their last wave fills less than kTmaFullWavePercent % of the slots. With the TMA, one wave and
// partly empty last waves measured 1–12 % faster; nearly full last waves measured between 0.9 %
// slower and 0.8 % faster (248, 256: slower; 260, 264: faster; requests of 8192 tokens on 132
// SMs), and 256 × 8192 is the suite's bandwidth line, so such plans keep cp.async. fp8 (2 CTAs per
// SM) gained at every wave count measured: no such condition.
constexpr int kTmaFullWavePercent = 85;
bool kv_tma_waves(int ctas, int slots);

}  // namespace mla
