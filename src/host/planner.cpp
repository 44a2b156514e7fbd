#include "host/planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <queue>

namespace mla {
namespace {

std::size_t align256(std::size_t x) {
  return (x + 255) / 256 * 256;
}

// Items a request of `len` tokens becomes with pieces of at most `chunk` tokens (an empty one: 1).
std::int64_t pieces(std::int64_t len, std::int64_t chunk) {
  return std::max<std::int64_t>(1, (len + chunk - 1) / chunk);
}

// The tokens of each of a request's `n` pieces of `len` tokens but the last (the rest): nearly
// equal, each a multiple of the tile.
std::int64_t piece_tokens(std::int64_t len, std::int64_t n, int tile) {
  return ((len + n - 1) / n + tile - 1) / tile * tile;
}

// An item's cost in a model of the schedule, in tiles: its tiles plus `overhead` (its start, end
// and partial).
std::int64_t item_cost(std::int64_t tokens, int tile, int overhead) {
  return (tokens + tile - 1) / tile + overhead;
}

// The indices of `key` in ascending order of key, stably: an LSD radix sort, a byte per pass; passes
// whose byte is the same for every key are skipped.
std::vector<std::uint32_t> stable_order(std::span<const std::uint64_t> key) {
  const std::size_t n = key.size();
  std::vector<std::uint32_t> order(n), next(n);
  std::uint64_t any = 0, all = ~std::uint64_t(0);  // bits set in some key; in every key
  for (std::size_t i = 0; i < n; ++i) {
    order[i] = std::uint32_t(i);
    any |= key[i];
    all &= key[i];
  }
  for (int shift = 0; shift < 64; shift += 8) {
    if (((any ^ all) >> shift & 0xff) == 0) continue;  // the same byte in every key: no change
    std::size_t count[257] = {};
    for (std::uint64_t k : key) ++count[((k >> shift) & 0xff) + 1];
    for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
    for (std::uint32_t i : order) next[count[(key[i] >> shift) & 0xff]++] = i;
    order.swap(next);
  }
  return order;
}

// Every request b cut into pieces of at most chunks[b] tokens (a multiple of the tile; at least its
// length keeps it whole), items longest first by whole tiles (what they cost), in request order among
// equals: the query rows of a request with s_q > 1 (lengths L − s_q + 1 … L) stay side by side, so
// that their CTAs run together and the later reads of their shared KV hit the L2.
WorkList work_list_from_chunks(std::span<const std::int32_t> kv_lengths, std::span<const std::int64_t> chunks,
                               int tile) {
  WorkList wl;
  const int batch = int(kv_lengths.size());
  wl.splits.assign(std::size_t(batch), RequestSplit{0, 0});
  for (int b = 0; b < batch; ++b) {
    const std::int64_t len = kv_lengths[std::size_t(b)], chunk = chunks[std::size_t(b)];
    const std::int64_t n = pieces(len, chunk);
    if (n == 1) {
      wl.items.push_back({b, 0, std::int32_t(len), -1});
      continue;
    }
    const std::int64_t per = piece_tokens(len, n, tile);
    wl.splits[std::size_t(b)] = {wl.num_partials, 0};
    for (std::int64_t begin = 0; begin < len; begin += per) {
      const std::int64_t end = std::min(len, begin + per);
      wl.items.push_back({b, std::int32_t(begin), std::int32_t(end), wl.num_partials++});
      ++wl.splits[std::size_t(b)].num_partials;
    }
    wl.max_request_partials = std::max(wl.max_request_partials, wl.splits[std::size_t(b)].num_partials);
    ++wl.num_split_requests;
  }
  // Most tiles first, stably.
  const std::size_t n = wl.items.size();
  std::vector<std::uint64_t> key(n);
  for (std::size_t i = 0; i < n; ++i) {
    key[i] = ~std::uint32_t(item_cost(std::int64_t(wl.items[i].kv_end) - wl.items[i].kv_begin, tile, 0));
  }
  const std::vector<std::uint32_t> order = stable_order(key);
  std::vector<WorkItem> sorted(n);
  for (std::size_t i = 0; i < n; ++i) sorted[i] = wl.items[order[i]];
  wl.items = std::move(sorted);
  return wl;
}

// The least x in lo .. hi with fits(x) (hi when none is); fits is false, then true, as x grows.
template <class Fits>
std::int64_t least_fitting(std::int64_t lo, std::int64_t hi, const Fits& fits) {
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (fits(mid))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// The smallest chunk, in tiles of 1 .. max_tiles, whose items(chunk in tokens) are at most `cap`
// (max_tiles when none is); items(chunk) falls as the chunk grows.
template <class Items>
std::int64_t smallest_chunk_tiles(std::int64_t max_tiles, int tile, std::int64_t cap, const Items& items) {
  return least_fitting(1, std::max<std::int64_t>(1, max_tiles),
                       [&](std::int64_t ct) { return items(ct * tile) <= cap; });
}

// What splitting costs a list in the models, in tiles: kCombineTiles for the combine's launch when
// anything is split.
std::int64_t split_cost(std::int64_t partials) {
  return partials > 0 ? kCombineTiles : 0;
}

// What a timeline list's partials cost beyond that, in tiles: one per partial spread over the slots
// (a partial's write and the combine's read move about a tile's bytes). Timelines cut nearly every
// request; with short ones that counts (ragged 256 × 1024 on 264 slots: ~500 partials, 2 tiles
// beside a makespan of 15, and fp8 +7 %, MXFP4 +15 % without this term; perf-notes v121).
std::int64_t partial_traffic(std::int64_t partials, int slots) {
  return (partials + slots - 1) / slots;
}

// Every request whole, as items costing item_cost: the least total any list of them can cost.
std::int64_t total_cost(std::span<const std::int32_t> kv_lengths, int tile, int overhead) {
  std::int64_t total = 0;
  for (std::int32_t len : kv_lengths) total += item_cost(len, tile, overhead);
  return total;
}

// The costliest chain of a walking grid of `grid` CTAs: CTA c's items from item c by `next`, each at
// item_cost. (A chain longer than the list is a broken one: it stops there.)
std::int64_t costliest_chain(std::span<const WorkItem> items, int grid, int tile, int overhead) {
  std::int64_t costliest = 0;
  const std::int64_t n = std::int64_t(items.size());
  for (std::int64_t c = 0; c < std::min<std::int64_t>(grid, n); ++c) {
    std::int64_t cost = 0, steps = 0;
    for (std::int64_t i = c; i >= 0 && i < n && steps <= n; i = items[std::size_t(i)].next, ++steps) {
      cost += item_cost(std::int64_t(items[std::size_t(i)].kv_end) - items[std::size_t(i)].kv_begin, tile, overhead);
    }
    costliest = std::max(costliest, cost);
  }
  return costliest;
}

std::vector<std::int64_t> item_costs(std::span<const WorkItem> items, int tile, int overhead) {
  std::vector<std::int64_t> costs;
  costs.reserve(items.size());
  for (const WorkItem& it : items) costs.push_back(item_cost(std::int64_t(it.kv_end) - it.kv_begin, tile, overhead));
  return costs;
}

// chunk_costs' buffers, kept by its caller across chunks: each request's cut, and the counts per cost.
struct ChunkScratch {
  struct Cut {
    std::int64_t n, per_cost, last_cost;  // pieces; the cost of each but the last; the last's
  };
  std::vector<Cut> cuts;
  std::vector<std::int64_t> counts;
};

// The costs of every request cut at `chunk` tokens (work_list_from_chunks' pieces), costliest
// first: the list that work_list_from_chunks would make, without making it. A request's pieces but
// its last cost the same; where the costs are small integers beside the number of pieces (the costliest
// at most kCountingSortSpan more than the pieces), they are counted per cost and written out costliest
// first (a counting sort), else listed and sorted — the same list either way. (Counting alone made
// lengths near 2^31 cost gigabytes.)
void chunk_costs(std::span<const std::int32_t> kv_lengths, std::int64_t chunk, int tile, int overhead,
                 std::vector<std::int64_t>* costs, ChunkScratch* scratch) {
  constexpr std::int64_t kCountingSortSpan = 4096;
  std::vector<ChunkScratch::Cut>& cuts = scratch->cuts;
  cuts.clear();
  std::int64_t total = 0, costliest = 0;
  for (std::int32_t len : kv_lengths) {
    const std::int64_t n = pieces(len, chunk);
    const std::int64_t per = n == 1 ? len : piece_tokens(len, n, tile);
    // Pieces 0 .. n − 2 hold `per` tokens each (each begins before len); the last holds the rest.
    const ChunkScratch::Cut c{n, item_cost(per, tile, overhead), item_cost(len - (n - 1) * per, tile, overhead)};
    cuts.push_back(c);
    total += c.n;
    costliest = std::max({costliest, c.n > 1 ? c.per_cost : 0, c.last_cost});
  }
  costs->clear();
  if (costliest > total + kCountingSortSpan) {
    for (const ChunkScratch::Cut& c : cuts) {
      costs->insert(costs->end(), std::size_t(c.n - 1), c.per_cost);
      costs->push_back(c.last_cost);
    }
    std::sort(costs->begin(), costs->end(), std::greater<>());
    return;
  }
  std::vector<std::int64_t>& counts = scratch->counts;
  counts.assign(std::size_t(costliest) + 1, 0);
  for (const ChunkScratch::Cut& c : cuts) {
    if (c.n > 1) counts[std::size_t(c.per_cost)] += c.n - 1;
    ++counts[std::size_t(c.last_cost)];
  }
  for (std::size_t k = counts.size(); k-- > 0;) costs->insert(costs->end(), std::size_t(counts[k]), std::int64_t(k));
}

// list_makespan of items of these costs, in this order: a slot takes the next item when it frees.
// `free_at` (a buffer): the slots' finish times. Every item starts by the mean of the costs before it
// (the least finish time is at most their mean), so none ends after sum / slots + the costliest;
// where that bound is small beside the items and no cost is negative (a caller's negative overhead),
// the finish times are counted per time (the least one never falls: a bucket queue), else kept in a
// min-heap (the top replaced: one sift). The same makespan either way.
std::int64_t makespan_of(std::span<const std::int64_t> costs, int slots, std::vector<std::int64_t>* free_at) {
  constexpr std::int64_t kBucketSpan = 4096;
  free_at->clear();
  std::int64_t end = 0, sum = 0, costliest = 0, cheapest = 0;
  for (std::int64_t cost : costs) {
    sum += cost;
    costliest = std::max(costliest, cost);
    cheapest = std::min(cheapest, cost);
  }
  const std::int64_t bound = sum / slots + costliest;
  if (cheapest >= 0 && bound <= 4 * std::int64_t(costs.size()) + kBucketSpan) {
    free_at->assign(std::size_t(bound) + 1, 0);  // slots free at each time
    std::int64_t* count = free_at->data();
    count[0] = slots;
    std::int64_t least = 0;
    for (std::int64_t cost : costs) {
      while (count[least] == 0) ++least;
      --count[least];
      ++count[least + cost];
      end = std::max(end, least + cost);
    }
    return end;
  }
  for (std::int64_t cost : costs) {
    if (int(free_at->size()) < slots) {
      free_at->push_back(cost);
      std::push_heap(free_at->begin(), free_at->end(), std::greater<>());
      end = std::max(end, cost);
      continue;
    }
    std::int64_t* h = free_at->data();
    const std::size_t size = free_at->size();
    const std::int64_t e = h[0] + cost;
    end = std::max(end, e);
    std::size_t i = 0;
    for (std::size_t child = 1; child < size; child = 2 * i + 1) {
      if (child + 1 < size && h[child + 1] < h[child]) ++child;
      if (!(h[child] < e)) break;
      h[i] = h[child];
      i = child;
    }
    h[i] = e;
  }
  return end;
}
std::int64_t makespan_of(std::span<const std::int64_t> costs, int slots) {
  std::vector<std::int64_t> free_at;
  return makespan_of(costs, slots, &free_at);
}

// The chunk, in tiles, at which every request cut (work_list_from_chunks with one chunk) makes a
// list of more than `min_items` and at most `max_items` items that costs least by
// `cost(costs costliest first, partials)`, if that is at most `limit`. Scanned from the longest
// request down in steps of at most 1/kChunkScanSteps until the items exceed `max_items` or their
// mean per slot exceeds `limit` (both only grow as the chunk shrinks), then every distinct list
// between the coarse points on either side of the best. Chunks that give every request the same
// number of pieces give the same list, so the scan jumps from one such breakpoint to the next. A
// list is scored only when neither bound of any schedule on `slots` — its costliest item, its
// items' mean per slot — exceeds `limit` or the best so far. 0 when no chunk qualifies.
template <class Cost>
std::int64_t cheapest_chunk_tiles(std::span<const std::int32_t> kv_lengths, int tile, int overhead, int slots,
                                  std::int64_t min_items, std::int64_t max_items, std::int64_t limit, const Cost& cost,
                                  std::int64_t* best_cost) {
  constexpr int kChunkScanSteps = 16;
  std::int64_t max_tiles = 0, tiles = 0;
  for (std::int32_t len : kv_lengths) {
    max_tiles = std::max(max_tiles, (std::int64_t(len) + tile - 1) / tile);
    tiles += (std::int64_t(len) + tile - 1) / tile;
  }
  // The largest chunk below `ct` at which some request takes more pieces (0: none).
  const auto next_breakpoint = [&](std::int64_t ct) {
    std::int64_t next = 0;
    for (std::int32_t len : kv_lengths) {
      if (len == 0) continue;
      const std::int64_t k = pieces(len, ct * tile);
      next = std::max(next, ((len + k - 1) / k - 1) / tile);  // the largest chunk with k + 1 pieces
    }
    return next;
  };
  std::vector<std::int64_t> costs;
  ChunkScratch scratch;
  std::int64_t best = 0;
  const auto try_chunk = [&](std::int64_t ct) {  // false: nothing finer can qualify
    std::int64_t n = 0, partials = 0, costliest = 0;
    for (std::int32_t len : kv_lengths) {
      const std::int64_t k = pieces(len, ct * tile);
      n += k;
      partials += k > 1 ? k : 0;
      costliest = std::max(costliest, item_cost((len + k - 1) / k, tile, overhead));
    }
    const std::int64_t mean = (tiles + n * overhead + slots - 1) / slots;
    if (n > max_items || mean > limit) return false;
    const std::int64_t bar = best == 0 ? limit : std::min(limit, *best_cost - 1);
    if (n <= min_items || costliest > bar || mean > bar) return true;
    chunk_costs(kv_lengths, ct * tile, tile, overhead, &costs, &scratch);
    const std::int64_t c = cost(std::span<const std::int64_t>(costs), partials);
    if (c <= bar) {
      *best_cost = c;
      best = ct;
    }
    return true;
  };
  std::int64_t above = 0, below = 0;  // the coarse points on either side of the best
  for (std::int64_t ct = max_tiles, prev = 0; ct >= 1;
       prev = ct, ct = std::min(ct - std::max<std::int64_t>(1, ct / kChunkScanSteps), next_breakpoint(ct))) {
    const std::int64_t had = best;
    if (!try_chunk(ct)) break;
    if (best != had) {
      above = prev;
      below = 0;
    } else if (best != 0 && below == 0) {
      below = ct;
    }
  }
  if (best == 0) return 0;
  const std::int64_t around = best;
  for (std::int64_t ct = above > 0 ? above - 1 : max_tiles; ct > below; ct = next_breakpoint(ct)) {
    if (ct != around && !try_chunk(ct)) break;
  }
  return best;
}

// Whether a timeline with `room` tiles left cannot take the next piece of a request with `left`
// tiles to go: a piece needs a tile of room, and an empty request's one item needs room ≥ 0.
bool timeline_full(std::int64_t left, std::int64_t room) {
  return left == 0 ? room < 0 : room < 1;
}

// Whether timeline_work_list(…, cap, …) succeeds, for requests of these lengths in tiles: the same
// walk in whole tiles (a piece ends where its timeline fills, so every piece but a request's last
// is a whole number of tiles), with the timelines a request fills past its first counted at once
// instead of piece by piece. No list is built; the capacity search probes this. Needs overhead ≥ 0
// (every caller's: the models charge 1 tile or more), so that a timeline's room never exceeds an
// empty one's.
bool timelines_fit(std::span<const std::int64_t> request_tiles, int slots, int overhead, std::int64_t cap) {
  const std::int64_t fresh = cap - overhead;  // tiles an empty timeline can take
  int timeline = 0;
  std::int64_t load = 0;
  for (std::int64_t left : request_tiles) {
    std::int64_t room = cap - load - overhead;
    if (timeline_full(left, room)) {  // the next timeline, or none
      if (timeline_full(left, fresh) || ++timeline == slots) return false;
      load = 0;
      room = fresh;
    }
    if (left <= room) {
      load += left + overhead;
      continue;
    }
    // This timeline fills; then `more` empty ones of `fresh` tiles each (fresh ≥ room ≥ 1).
    left -= room;
    const std::int64_t more = (left + fresh - 1) / fresh;
    if (more >= slots - timeline) return false;
    timeline += int(more);
    load = left - (more - 1) * fresh + overhead;
  }
  return true;
}

// Every one of `slots` timelines filled to `cap` tiles (each item's tiles plus `overhead`), the
// requests in order, each cut where a timeline fills (at least one tile per piece): FlashMLA's
// scheduler. Items are listed by their planned start: all timelines' first items (timeline t's at
// index t), then the rest as their timelines reach them. Without `walked` the block scheduler is
// the walker: it starts the next item on whichever slot frees first, so each runs on a timeline's
// slot. With `walked` a CTA per timeline walks it: every item's `next` is its timeline's next item.
// A request's pieces take consecutive partial slots in KV order. *used: the timelines that hold
// an item. False when `cap` is too small (timelines_fit).
bool timeline_work_list(std::span<const std::int32_t> kv_lengths, int slots, int tile, int overhead, std::int64_t cap,
                        bool walked, WorkList* out, int* used) {
  struct Planned {
    WorkItem item;
    std::int64_t start;
    int timeline;
  };
  std::vector<Planned> planned;
  WorkList wl;
  wl.splits.assign(kv_lengths.size(), RequestSplit{0, 0});
  int timeline = 0;
  std::int64_t load = 0;
  for (std::size_t b = 0; b < kv_lengths.size(); ++b) {
    const std::int64_t len = kv_lengths[b];
    const std::size_t first = planned.size();
    // In tiles: a piece ends where its timeline fills, so every piece but the last is whole tiles.
    const std::int64_t tiles = item_cost(len, tile, 0);
    for (std::int64_t done = 0;;) {
      const std::int64_t room = cap - load - overhead;  // tiles this timeline can still take
      const std::int64_t left = tiles - done;
      if (timeline_full(left, room)) {
        if (++timeline == slots) return false;
        load = 0;
        continue;
      }
      const std::int64_t take = std::min(left, room);
      const std::int64_t end = take == left ? len : (done + take) * tile;
      planned.push_back({{int(b), std::int32_t(done * tile), std::int32_t(end), -1}, load, timeline});
      load += take + overhead;  // item_cost of the piece
      done += take;
      if (done >= tiles) break;
    }
    const int n = int(planned.size() - first);
    if (n > 1) {
      wl.splits[b] = {wl.num_partials, n};
      for (int k = 0; k < n; ++k) planned[first + std::size_t(k)].item.partial = wl.num_partials++;
      wl.max_request_partials = std::max(wl.max_request_partials, n);
      ++wl.num_split_requests;
    }
  }
  // (Every first item starts at 0 and every other later, item costs being ≥ 1 — overhead ≥ 1, or an
  // item of at least one tile — so the timelines' first items come first, in timeline order.)
  std::vector<std::uint64_t> start(planned.size());
  for (std::size_t k = 0; k < planned.size(); ++k) start[k] = std::uint64_t(planned[k].start);
  std::vector<int> last(planned.empty() ? 0 : std::size_t(timeline) + 1, -1);  // per timeline: its last item so far
  for (std::uint32_t k : stable_order(start)) {
    const Planned& p = planned[k];
    const int i = int(wl.items.size());
    wl.items.push_back(p.item);
    if (walked && last[std::size_t(p.timeline)] >= 0) wl.items[std::size_t(last[std::size_t(p.timeline)])].next = i;
    last[std::size_t(p.timeline)] = i;
  }
  *used = int(last.size());
  *out = std::move(wl);
  return true;
}

// timeline_work_list at the least capacity that holds every request, from the slots' mean of
// `least_load` tiles up (*used as there): the capacity searched without building lists, the list
// built once.
WorkList least_timeline_list(std::span<const std::int32_t> kv_lengths, int slots, int tile, int overhead,
                             std::int64_t least_load, bool walked, int* used) {
  std::vector<std::int64_t> request_tiles(kv_lengths.size());
  for (std::size_t b = 0; b < kv_lengths.size(); ++b) request_tiles[b] = item_cost(kv_lengths[b], tile, 0);
  const auto fits = [&](std::int64_t cap) { return timelines_fit(request_tiles, slots, overhead, cap); };
  std::int64_t lo = std::max<std::int64_t>(1, (least_load + slots - 1) / slots), hi = lo;
  while (!fits(hi)) hi *= 2;
  WorkList tl;
  timeline_work_list(kv_lengths, slots, tile, overhead, least_fitting(lo, hi, fits), walked, &tl, used);
  return tl;
}

}  // namespace

void set_tokens_per_split(WorkList* wl, int tile) {
  tile = std::max(tile, 1);
  std::int64_t longest = 0;
  for (const WorkItem& it : wl->items) longest = std::max<std::int64_t>(longest, it.kv_end - it.kv_begin);
  wl->tokens_per_split = int(std::min<std::int64_t>((longest + tile - 1) / tile * tile, 1 << 30));
}

WorkspaceLayout workspace_layout(int requests, int rows_per_item, int target_items) {
  WorkspaceLayout w;
  w.max_items = requests + std::max(target_items, 1);
  w.max_partials = w.max_items;
  w.rows_per_partial = rows_per_item * 16;
  std::size_t at = 0;
  w.items_offset = at;
  at = align256(at + sizeof(WorkItem) * std::size_t(w.max_items));
  w.splits_offset = at;
  at = align256(at + sizeof(RequestSplit) * std::size_t(requests));
  const std::size_t rows = std::size_t(w.max_partials) * std::size_t(w.rows_per_partial);
  w.partial_o_offset = at;
  at = align256(at + sizeof(float) * rows * 512);  // fp32, or fp16 in its first half
  w.partial_scale_offset = at;
  at = align256(at + sizeof(float) * rows);
  w.partial_lse_offset = at;
  at = align256(at + sizeof(float) * rows);
  w.total_bytes = at;
  return w;
}

WorkspaceLayout cuda_workspace_layout(int batch, int s_q, int sms, int ctas_per_sm) {
  return workspace_layout(batch * s_q, 1, sms * ctas_per_sm);
}

WorkList build_work_list(std::span<const std::int32_t> kv_lengths, int target_items, int tile) {
  const int batch = int(kv_lengths.size());
  std::int64_t total = 0;
  for (std::int32_t len : kv_lengths) total += len;
  target_items = std::max(target_items, 1);
  tile = std::max(tile, 1);
  // Smallest chunk (a multiple of the tile) whose items fit in one wave of `target_items`; when
  // the requests alone outnumber the wave, an even share of all tokens per item.
  std::int64_t max_len = 0;
  for (std::int32_t len : kv_lengths) max_len = std::max<std::int64_t>(max_len, len);
  const auto items_for = [&](std::int64_t chunk) {
    std::int64_t n = 0;
    for (std::int32_t len : kv_lengths) n += pieces(len, chunk);
    return n;
  };
  std::int64_t chunk;
  if (batch <= target_items) {
    chunk = smallest_chunk_tiles((max_len + tile - 1) / tile, tile, target_items, items_for) * tile;
  } else {
    chunk = (total + target_items - 1) / target_items;
    chunk = std::max<std::int64_t>((chunk + tile - 1) / tile * tile, tile);
  }
  std::vector<std::int64_t> chunks(std::size_t(batch), chunk);
  WorkList wl = work_list_from_chunks(kv_lengths, chunks, tile);
  wl.tokens_per_split = int(std::min<std::int64_t>(chunk, 1 << 30));
  return wl;
}

namespace {

// cluster_work_list's cluster size for `wl`: its rows' most pieces rounded up to a power of two, or
// 0 when no row is split, that exceeds `max_cluster`, or rows · n items exceed one wave of `slots`.
int cluster_size(const WorkList& wl, int rows, int max_cluster, int slots) {
  if (wl.max_request_partials < 2) return 0;
  int n = 2;
  while (n < wl.max_request_partials) n *= 2;
  return n > max_cluster || std::int64_t(rows) * n > slots ? 0 : n;
}

// The simulated merge of split requests (simulated_launch_us).
double merge_us(bool clustered, int partials, int split_requests, const LaunchPace& pace) {
  if (clustered) return pace.cluster_merge_us;
  return partials > 0 ? pace.partial_us * partials + pace.split_request_us * split_requests : 0.0;
}

// The least simulated_launch_us can return for `items` items of `work_tiles` tiles in all (their
// tiles plus item_tiles each) on `sms` SMs, then `merge`: every tile at the paired pace (the most
// tiles an SM runs per µs), and each item's latency, during which its SM runs one CTA's pace at most;
// or, with a DRAM bound, every tile at its pace, whichever is longer.
double least_launch_us(double work_tiles, std::int64_t items, int sms, double merge, const LaunchPace& pace) {
  const double latency = pace.item_latency_us * std::max(0.0, 1 - pace.paired_tile_us / (2 * pace.lone_tile_us));
  const double sm_bound = (work_tiles * pace.paired_tile_us / 2 + double(items) * latency) / std::max(sms, 1);
  const double dram_bound = pace.dram_tiles_per_us > 0 ? work_tiles / pace.dram_tiles_per_us : 0.0;
  return pace.launch_us + std::max(sm_bound, dram_bound) + merge;
}

// A bound under simulated_launch_us of `items` with this merge: least_launch_us of them, or their
// longest item alone (its latency, then its tiles at one CTA's pace), whichever is longer.
double list_least_us(std::span<const WorkItem> items, int sms, int tile, double merge, const LaunchPace& pace) {
  double work = 0, longest = 0;
  for (const WorkItem& it : items) {
    const double tiles = double(item_cost(std::int64_t(it.kv_end) - it.kv_begin, tile, 0));
    work += tiles;
    longest = std::max(longest, tiles);
  }
  work += double(items.size()) * pace.item_tiles;
  const double alone =
      items.empty() ? 0.0 : pace.launch_us + pace.item_latency_us + (longest + pace.item_tiles) * pace.lone_tile_us;
  return std::max(least_launch_us(work, std::int64_t(items.size()), sms, merge, pace), alone + merge);
}

// Work lists' simulated launches (simulated_launch_us) on slots / 2 SMs of two slots, rows split in
// two merged in clusters where every cluster fits one wave, as the CUDA plan does (cluster_work_list).
struct ListSimulation {
  int batch;
  int slots;
  int tile;
  const LaunchPace& pace;

  int sms() const { return std::max(1, slots / 2); }
  bool clustered(const WorkList& wl) const { return cluster_size(wl, batch, 2, slots) == 2; }
  double merge(const WorkList& wl) const {
    return merge_us(clustered(wl), wl.num_partials, wl.num_split_requests, pace);
  }
  double us(const WorkList& wl) const {
    return simulated_launch_us(wl.items, sms(), tile, clustered(wl), wl.num_partials, wl.num_split_requests, pace);
  }
  double least_us(const WorkList& wl) const { return list_least_us(wl.items, sms(), tile, merge(wl), pace); }
  // What no list of these requests beats: least_launch_us of every request whole.
  double whole_least_us(std::span<const std::int32_t> kv_lengths) const {
    const double work = double(total_cost(kv_lengths, tile, 0)) + double(batch) * pace.item_tiles;
    return least_launch_us(work, batch, sms(), 0, pace);
  }
};

}  // namespace

double simulated_launch_us(std::span<const WorkItem> items, int sms, int tile, bool clustered, int partials,
                           int split_requests, const LaunchPace& pace) {
  sms = std::max(sms, 1);
  tile = std::max(tile, 1);
  // Per SM its (up to) two CTAs: the item's end of latency, or its work left (in tiles) as of `at`.
  struct Cta {
    double ready = 0;  // when its latency ends
    double left = 0;   // tiles (plus item_tiles) still to compute
    bool busy = false;
  };
  struct Sm {
    Cta cta[2];
    double at = 0;  // time `left` refers to
  };
  std::vector<Sm> sm(std::size_t(sms), Sm{});
  const std::size_t n = items.size();
  std::size_t next = 0;
  const auto work_of = [&](std::size_t i) {
    return double(item_cost(std::int64_t(items[i].kv_end) - items[i].kv_begin, tile, 0)) + pace.item_tiles;
  };
  const auto start = [&](Sm& s, double now) {
    for (Cta& c : s.cta) {
      if (c.busy || next >= n) continue;
      c = {now + pace.item_latency_us, work_of(next++), true};
    }
  };
  // µs per tile of SM s's computing CTAs as of s.at: paired while both compute, else lone.
  const auto computing = [&](const Sm& s) {
    int k = 0;
    for (const Cta& c : s.cta) k += c.busy && c.ready <= s.at ? 1 : 0;
    return k;
  };
  const auto pace_of = [&](int k) { return k == 2 ? pace.paired_tile_us : pace.lone_tile_us; };
  // Tiles per µs an SM of k computing CTAs asks of the DRAM.
  const double demand[3] = {0.0, 1 / pace_of(1), 2 / pace_of(2)};
  // Moves SM s, k of its CTAs computing, from s.at to `now` (no event of s lies between).
  const auto advance = [&](Sm& s, int k, double now) {
    const double per_tile = pace_of(k);
    for (Cta& c : s.cta) {
      if (c.busy && c.ready <= s.at) c.left -= (now - s.at) / per_tile;
    }
    s.at = now;
  };
  // SM s's next event, k of its CTAs computing: a latency's end or a CTA's last tile.
  const auto next_event = [&](const Sm& s, int k) {
    const double per_tile = pace_of(k);
    double t = INFINITY;
    for (const Cta& c : s.cta) {
      if (!c.busy) continue;
      t = std::min(t, c.ready > s.at ? c.ready : s.at + std::max(0.0, c.left) * per_tile);
    }
    return t;
  };
  // Every SM has one pending event at most (its CTAs change only at its own events): a min-heap of
  // (time, SM), whose top is replaced by the same SM's next event (one sift instead of a pop and a
  // push). Keys are distinct (one per SM), so the order of events is the keys' order.
  struct Event {
    double time;
    int sm;
  };
  // Times are finite (an SM without an event leaves the heap), so this is a strict total order.
  const auto before = [](const Event& a, const Event& b) {
    return a.time < b.time || (a.time == b.time && a.sm < b.sm);
  };
  std::vector<Event> heap;
  heap.reserve(std::size_t(sms));
  const auto sift_down = [&](std::size_t i) {
    const std::size_t size = heap.size();
    const Event e = heap[i];
    for (std::size_t child = 2 * i + 1; child < size; child = 2 * i + 1) {
      if (child + 1 < size && before(heap[child + 1], heap[child])) ++child;
      if (!before(heap[child], e)) break;
      heap[i] = heap[child];
      i = child;
    }
    heap[i] = e;
  };
  // The first wave: one CTA per SM, then a second on each.
  for (int k = 0; k < 2 && next < n; ++k) {
    for (int i = 0; i < sms && next < n; ++i) sm[std::size_t(i)].cta[k] = {pace.item_latency_us, work_of(next++), true};
  }
  for (int i = 0; i < sms; ++i) {
    const double t = next_event(sm[std::size_t(i)], computing(sm[std::size_t(i)]));
    if (t != INFINITY) heap.push_back({t, i});
  }
  for (std::size_t i = heap.size() / 2; i-- > 0;) sift_down(i);  // a min-heap by `before`
  // Events are timed at the SMs' own paces (pace time). With a DRAM bound, each stretch of pace time
  // takes max(1, demand / dram_tiles_per_us) times as long (the computing CTAs' share): `real`.
  const bool dram = pace.dram_tiles_per_us > 0;
  double total_demand = 0, real = 0, last = 0;
  if (dram) {
    for (const Sm& s : sm) total_demand += demand[computing(s)];
  }
  double end = 0;
  constexpr double kDone = 1e-9;
  while (!heap.empty()) {
    const auto [now, i] = heap.front();
    Sm& s = sm[std::size_t(i)];
    const int was_computing = computing(s);
    if (dram) {
      real += (now - last) * std::max(1.0, total_demand / pace.dram_tiles_per_us);
      last = now;
      total_demand -= demand[was_computing];
    } else {
      real = now;
    }
    advance(s, was_computing, now);
    // Done: no work left, or so little that it cannot move the clock (at ~10^7 µs a residue of rounding
    // above kDone would otherwise schedule its end at `now` again and again).
    const double per_tile_now = pace_of(computing(s));
    for (Cta& c : s.cta) {
      if (c.busy && c.ready <= now && (c.left <= kDone || now + c.left * per_tile_now == now)) {
        c.busy = false;
        end = std::max(end, real);
      }
    }
    start(s, now);
    const int now_computing = computing(s);
    if (dram) total_demand += demand[now_computing];
    const double t = next_event(s, now_computing);
    if (t != INFINITY) {
      heap.front() = {t, i};
    } else {
      heap.front() = heap.back();
      heap.pop_back();
    }
    if (!heap.empty()) sift_down(0);
  }
  return pace.launch_us + end + merge_us(clustered, partials, split_requests, pace);
}

std::int64_t list_makespan(std::span<const WorkItem> items, int slots, int tile, int item_overhead_tiles) {
  return makespan_of(item_costs(items, std::max(tile, 1), item_overhead_tiles), std::max(slots, 1));
}

WorkList balanced_work_list(std::span<const std::int32_t> kv_lengths, int slots, int tile, int max_items,
                            bool timelines, ListModel model, std::vector<WorkList>* considered) {
  const int item_overhead_tiles = model.item_overhead_tiles, min_gain_percent = model.min_gain_percent;
  WorkList best = build_work_list(kv_lengths, slots, tile);
  if (considered != nullptr) considered->push_back(best);
  const int batch = int(kv_lengths.size());
  slots = std::max(slots, 1);
  tile = std::max(tile, 1);
  const auto tile_cost = [&](const WorkList& wl) {
    return list_makespan(wl.items, slots, tile, item_overhead_tiles) + split_cost(wl.num_partials);
  };
  // With a pace, lists are compared by their simulated launch (ListSimulation), in ns.
  const LaunchPace* pace = model.pace;
  std::optional<ListSimulation> sim;
  if (pace != nullptr) sim.emplace(ListSimulation{batch, slots, tile, *pace});
  const auto cost = [&](const WorkList& wl) {
    if (pace == nullptr) return tile_cost(wl);
    return std::int64_t(std::llround(1000 * sim->us(wl)));
  };
  // A bound under cost(wl), simulated (list_least_us): lists it puts past the bar go unsimulated.
  const auto least_cost = [&](const WorkList& wl) { return std::int64_t(1000 * sim->least_us(wl)); };
  const std::int64_t tile_base = tile_cost(best);
  const std::int64_t base = pace == nullptr ? tile_base : cost(best);
  std::int64_t best_cost = base;
  // No list beats the slots' mean load (every request is at least one item; simulated,
  // least_launch_us of every request as one item): when that is within the margin, nothing is worth
  // trying (many full waves; plan() stays as cheap as build_work_list).
  const std::int64_t least_load = total_cost(kv_lengths, tile, item_overhead_tiles);
  if (std::int64_t(100) * (least_load / slots) > std::int64_t(100 - min_gain_percent) * tile_base) return best;
  if (pace != nullptr) {
    const std::int64_t least = std::int64_t(1000 * sim->whole_least_us(kv_lengths));
    if (std::int64_t(100) * least > std::int64_t(100 - min_gain_percent) * base) return best;
  }
  // Only a clear gain replaces the even-share list (the model ignores DRAM's share of the time).
  // (`against`: the list the margin is taken from; build_work_list's unless said otherwise.)
  const auto consider = [&](WorkList wl, std::int64_t extra, std::int64_t against = -1) {
    if (considered != nullptr) {
      considered->push_back(wl);
      set_tokens_per_split(&considered->back(), tile);
    }
    against = against < 0 ? base : against;
    const auto passes = [&](std::int64_t c) {
      return c < best_cost && std::int64_t(100) * c <= std::int64_t(100 - min_gain_percent) * against;
    };
    if (pace != nullptr && !passes(least_cost(wl))) return;
    const std::int64_t c = cost(wl) + (pace == nullptr ? extra : 0);
    if (!passes(c)) return;
    set_tokens_per_split(&wl, tile);
    best = std::move(wl);
    best_cost = c;
  };
  if (batch > slots) {  // the tail of a partly empty last wave
    // Requests longest first (stably): the head keeps the longest whole.
    std::vector<int> order(static_cast<std::size_t>(batch));
    for (int b = 0; b < batch; ++b) order[std::size_t(b)] = b;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return kv_lengths[std::size_t(a)] > kv_lengths[std::size_t(b)]; });
    constexpr std::int64_t kWhole = std::int64_t(1) << 40;
    const int full_waves = batch / slots;
    std::vector<std::vector<std::int64_t>> tried;  // pieces per request of the tail lists tried
    for (int waves = full_waves; waves >= std::max(0, full_waves - 1); --waves) {
      const int head = waves * slots;
      std::int64_t tail_tiles = 0;
      for (int i = head; i < batch; ++i) {
        tail_tiles = std::max<std::int64_t>(
            tail_tiles, (std::int64_t(kv_lengths[std::size_t(order[std::size_t(i)])]) + tile - 1) / tile);
      }
      const auto tail_items = [&](std::int64_t chunk) {
        std::int64_t n = 0;
        for (int i = head; i < batch; ++i) n += pieces(kv_lengths[std::size_t(order[std::size_t(i)])], chunk);
        return n;
      };
      for (int fill = 1; fill <= kTailWaves; ++fill) {
        const std::int64_t cap = std::min<std::int64_t>(std::int64_t(fill) * slots, std::int64_t(max_items) - head);
        if (tail_tiles < 2 || tail_items(tail_tiles * tile) > cap) continue;  // nothing to cut, or no room
        // Smallest chunk (in tiles) whose tail pieces fit `fill` waves and the workspace.
        const std::int64_t lo = smallest_chunk_tiles(tail_tiles, tile, cap, tail_items);
        // The tail at chunk `lo`; then, when a finer chunk would overflow the cap, the longest tail
        // requests at that finer chunk as far as the cap allows (e.g. 136 requests of 128 tiles,
        // room for 400 pieces: 128 in thirds and 8 in halves, rather than all 136 in halves).
        for (int mixed = 0; mixed <= (lo > 1 ? 1 : 0); ++mixed) {
          std::vector<std::int64_t> chunks(std::size_t(batch), kWhole);
          std::int64_t room = cap - tail_items(lo * tile);
          for (int i = head; i < batch; ++i) {
            const std::int32_t len = kv_lengths[std::size_t(order[std::size_t(i)])];
            const std::int64_t extra = mixed == 1 ? pieces(len, (lo - 1) * tile) - pieces(len, lo * tile) : 0;
            const bool finer = mixed == 1 && extra <= room;
            if (finer) room -= extra;
            chunks[std::size_t(order[std::size_t(i)])] = (finer ? lo - 1 : lo) * tile;
          }
          // (Different chunks often cut every request into as many pieces: the same list, tried once.)
          std::vector<std::int64_t> cuts(static_cast<std::size_t>(batch));
          for (int b = 0; b < batch; ++b)
            cuts[std::size_t(b)] = pieces(kv_lengths[std::size_t(b)], chunks[std::size_t(b)]);
          if (std::find(tried.begin(), tried.end(), cuts) != tried.end()) continue;
          tried.push_back(std::move(cuts));
          consider(work_list_from_chunks(kv_lengths, chunks, tile), 0);
        }
      }
    }
  }
  // Then every request cut at one chunk into more items than a wave, as far as the workspace holds: the
  // block scheduler starts them longest first as slots free. (A one-wave list of a ragged batch
  // near a wave's size keeps its longest requests nearly whole: 256 requests of up to 8192 tokens
  // on 264 slots run 124-tile items beside a mean of 60.)
  std::int64_t chunk_cost = 0;
  std::vector<std::int64_t> free_at;
  const std::int64_t chunk_tiles = cheapest_chunk_tiles(
      kv_lengths, tile, item_overhead_tiles, slots, slots, max_items, (100 - min_gain_percent) * tile_base / 100,
      [&](std::span<const std::int64_t> costs, std::int64_t partials) {
        return makespan_of(costs, slots, &free_at) + split_cost(partials);
      },
      &chunk_cost);
  if (chunk_tiles > 0) {
    consider(work_list_from_chunks(kv_lengths, std::vector<std::int64_t>(std::size_t(batch), chunk_tiles * tile), tile),
             0);
  }
  // Last the timelines (timeline_work_list) at the least capacity that holds every request (on a tie
  // the lists above stand: they were measured first).
  if (timelines) {
    int used = 0;
    WorkList tl = least_timeline_list(kv_lengths, slots, tile, item_overhead_tiles, least_load, false, &used);
    const std::int64_t traffic = partial_traffic(tl.num_partials, slots);
    if (int(tl.items.size()) <= max_items) consider(std::move(tl), traffic);
    // Simulated, also the timelines filled at a tile more and a tile less per item, where they beat
    // the best list so far by the margin (perf-notes v131: the capacity that fits one list's pieces
    // best is not always the model's).
    for (const int other : {item_overhead_tiles - 1, item_overhead_tiles + 1}) {
      if (pace == nullptr || other < 1) continue;
      WorkList more =
          least_timeline_list(kv_lengths, slots, tile, other, total_cost(kv_lengths, tile, other), false, &used);
      if (int(more.items.size()) <= max_items) consider(std::move(more), 0, best_cost);
    }
  }
  return best;
}

WorkList simulated_work_list(std::span<const std::int32_t> kv_lengths, int slots, int tile, int max_items,
                             const LaunchPace& pace) {
  slots = std::max(slots, 1);
  tile = std::max(tile, 1);
  std::vector<WorkList> weighed;
  WorkList best = balanced_work_list(kv_lengths, slots, tile, max_items, true, kDramBound, &weighed);
  const ListSimulation sim{int(kv_lengths.size()), slots, tile, pace};
  const double bar = sim.us(best) * (100 - kSimulatedMinGainPercent) / 100;
  // No list does better than every request whole (many waves: nothing to try).
  if (sim.whole_least_us(kv_lengths) >= bar) return best;
  // Every list weighed and the timelines at each overhead, each once (the tile model's own list too).
  for (int overhead = 1; overhead <= kSimulatedTimelineOverheads; ++overhead) {
    int used = 0;
    WorkList tl =
        least_timeline_list(kv_lengths, slots, tile, overhead, total_cost(kv_lengths, tile, overhead), false, &used);
    if (int(tl.items.size()) <= max_items) weighed.push_back(std::move(tl));
  }
  // Simulated in the order of their bounds (list_least_us), so that the bar falls early and later
  // lists go unsimulated; the fastest wins, on a tie the one weighed first.
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t i = 0; i < weighed.size(); ++i) {
    order.push_back({sim.least_us(weighed[i]), i});
  }
  std::sort(order.begin(), order.end());
  double best_us = bar;
  std::size_t pick = weighed.size();
  // A list that simulates as one simulated before (the same item lengths in the same order, partials,
  // split requests and clusters: weighed lists often repeat) has its time and a later place: it
  // cannot win, and is skipped.
  const auto same_launch = [&](const WorkList& a, const WorkList& b) {
    if (a.items.size() != b.items.size() || a.num_partials != b.num_partials ||
        a.num_split_requests != b.num_split_requests || sim.clustered(a) != sim.clustered(b)) {
      return false;
    }
    for (std::size_t k = 0; k < a.items.size(); ++k) {
      if (a.items[k].kv_end - a.items[k].kv_begin != b.items[k].kv_end - b.items[k].kv_begin) return false;
    }
    return true;
  };
  std::vector<std::size_t> simulated;
  for (const auto& [least, i] : order) {
    if (least >= best_us) break;
    if (std::any_of(simulated.begin(), simulated.end(),
                    [&](std::size_t j) { return same_launch(weighed[j], weighed[i]); })) {
      continue;
    }
    simulated.push_back(i);
    const double us = sim.us(weighed[i]);
    if (us < best_us || (us == best_us && pick < weighed.size() && i < pick)) {
      best_us = us;
      pick = i;
    }
  }
  if (pick == weighed.size()) return best;
  WorkList out = weighed[pick];
  set_tokens_per_split(&out, tile);
  return out;
}

int cluster_work_list(const WorkList& wl, int rows, int max_cluster, int slots, std::vector<WorkItem>* items) {
  const int n = cluster_size(wl, rows, max_cluster, slots);
  if (n == 0) return 0;
  std::vector<WorkItem> out(std::size_t(rows) * std::size_t(n));
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < n; ++k) out[std::size_t(r) * n + std::size_t(k)] = {r, 0, 0, k};
  }
  // A row's pieces in list order: KV order for the chunked lists (sorted by length, stably); a
  // timeline list may list a later piece first. The merge by LSE does not depend on the order.
  std::vector<int> next(std::size_t(rows), 0);
  for (const WorkItem& it : wl.items) {
    const int k = next[std::size_t(it.request)]++;
    out[std::size_t(it.request) * n + std::size_t(k)] = {it.request, it.kv_begin, it.kv_end, k};
  }
  *items = std::move(out);
  return n;
}

bool is_work_list_of(const WorkList& wl, std::span<const std::int32_t> kv_lengths) {
  const std::size_t rows = kv_lengths.size();
  if (wl.splits.size() != rows) return false;
  // The splits' slot ranges: within the list's slots, none overlapping.
  std::int64_t slots = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (const RequestSplit& sp : wl.splits) {
    if (sp.num_partials < 0 || sp.first_partial < 0) return false;
    slots += sp.num_partials;
    if (sp.num_partials > 0) ranges.push_back({sp.first_partial, std::int64_t(sp.first_partial) + sp.num_partials});
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t k = 0; k < ranges.size(); ++k) {
    if (ranges[k].second > slots || (k > 0 && ranges[k].first < ranges[k - 1].second)) return false;
  }
  // Items by request and start: each request's items tile [0, L); slots used once.
  std::vector<const WorkItem*> by(wl.items.size());
  for (std::size_t i = 0; i < wl.items.size(); ++i) {
    const WorkItem& it = wl.items[i];
    if (it.request < 0 || std::size_t(it.request) >= rows || it.kv_begin < 0 || it.kv_end < it.kv_begin ||
        it.kv_end > kv_lengths[std::size_t(it.request)]) {
      return false;
    }
    const RequestSplit& sp = wl.splits[std::size_t(it.request)];
    if (sp.num_partials == 0 ? it.partial != -1
                             : it.partial < sp.first_partial || it.partial >= sp.first_partial + sp.num_partials) {
      return false;
    }
    by[i] = &it;
  }
  std::sort(by.begin(), by.end(), [](const WorkItem* a, const WorkItem* b) {
    return a->request != b->request ? a->request < b->request : a->kv_begin < b->kv_begin;
  });
  std::vector<char> used(std::size_t(slots), 0);
  std::size_t i = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    std::int64_t at = 0, pieces = 0;
    for (; i < by.size() && std::size_t(by[i]->request) == r; ++i, ++pieces) {
      const WorkItem& it = *by[i];
      if (it.kv_begin != at || (it.kv_end == it.kv_begin && kv_lengths[r] != 0))
        return false;  // a gap, overlap or empty piece
      at = it.kv_end;
      if (it.partial >= 0) {
        if (used[std::size_t(it.partial)] != 0) return false;
        used[std::size_t(it.partial)] = 1;
      }
    }
    if (at != kv_lengths[r] || pieces == 0 || (kv_lengths[r] == 0 && pieces != 1)) return false;
    if (wl.splits[r].num_partials != 0 && wl.splits[r].num_partials != pieces) return false;
  }
  return true;
}

bool walks_every_item_once(std::span<const WorkItem> items, int grid) {
  const std::int64_t n = std::int64_t(items.size());
  std::vector<char> seen(items.size(), 0);
  std::int64_t taken = 0;
  for (std::int64_t c = 0; c < std::min<std::int64_t>(grid, n); ++c) {
    for (std::int64_t i = c; i >= 0; i = items[std::size_t(i)].next) {
      if (i >= n || seen[std::size_t(i)] != 0) return false;  // out of the list, or a second visit (a cycle)
      seen[std::size_t(i)] = 1;
      ++taken;
    }
  }
  return taken == n;
}

// (The rows' whole tiles: total_cost without an item charge.)
bool row_pairs_pay(std::span<const std::int32_t> row_lengths, int slots, int tile) {
  return total_cost(row_lengths, tile, 0) >= std::int64_t(kRowPairsMinTilesPerSlot) * slots;
}

bool bf16_row_pairs_pay(std::span<const std::int32_t> row_lengths, int sms, int tile) {
  const std::int64_t tiles = total_cost(row_lengths, tile, 0), rows = std::int64_t(row_lengths.size());
  if (tiles >= std::int64_t(kBf16RowPairsMinTilesPerSm) * sms) return true;
  // Pairs no more than the SMs where the rows, one per CTA, overflow them (by 20 % and more).
  return (rows + 1) / 2 <= sms && 100 * rows >= std::int64_t(kBf16RowPairsWaveMinRowsPercent) * sms &&
         tiles >= std::int64_t(kBf16RowPairsWaveMinTilesPerSm) * sms;
}

WorkList row_pair_work_list(const WorkList& pair_list, std::span<const std::int32_t> pair_lengths) {
  WorkList wl;
  wl.tokens_per_split = pair_list.tokens_per_split;
  wl.num_partials = 2 * pair_list.num_partials;
  wl.num_split_requests = 2 * pair_list.num_split_requests;
  wl.max_request_partials = pair_list.max_request_partials;
  wl.splits.reserve(2 * pair_list.splits.size());
  for (const RequestSplit& sp : pair_list.splits) {
    wl.splits.push_back({2 * sp.first_partial, sp.num_partials});
    wl.splits.push_back({2 * sp.first_partial + sp.num_partials, sp.num_partials});
  }
  wl.items.reserve(pair_list.items.size());
  for (const WorkItem& it : pair_list.items) {
    const std::size_t pair = std::size_t(it.request);
    const std::int32_t len = pair_lengths[pair];
    WorkItem w = it;
    w.request = 2 * it.request;
    w.pair_end = it.kv_end == len && len > 0 ? it.kv_end - 1 : it.kv_end;
    if (it.partial >= 0) {
      const RequestSplit& sp = pair_list.splits[pair];
      w.partial = sp.first_partial + it.partial;  // 2F + j, j = it.partial − F
      w.pair_partial = w.partial + sp.num_partials;
    }
    wl.items.push_back(w);
  }
  return wl;
}

void set_kv_bases(std::span<WorkItem> items, std::span<const std::int32_t> kv_indptr, int s_q) {
  for (WorkItem& it : items) it.kv_base = kv_indptr[std::size_t(it.request / s_q)];
}

namespace {

// A walking grid's assignment: the CTA and the round (its position among the CTA's items) of every
// item, and the CTAs' loads (walk cost sums).
struct WalkAssignment {
  std::vector<int> cta_of;
  std::vector<std::int64_t> round_of;
  std::vector<std::int64_t> load;
  std::int64_t makespan() const { return load.empty() ? 0 : *std::max_element(load.begin(), load.end()); }
};

// Round by round (`grid` items each, in list order), the round's costliest item to the CTA with the
// least load so far.
WalkAssignment assign_rounds(std::span<const std::int64_t> costs, int grid) {
  const std::int64_t n = std::int64_t(costs.size());
  WalkAssignment a{std::vector<int>(std::size_t(n)), std::vector<std::int64_t>(std::size_t(n)),
                   std::vector<std::int64_t>(std::size_t(grid), 0)};
  // Sort keys: load · grid + CTA (least load first, ties the lower CTA); the round's items by
  // cost, costliest first (ties in list order), as cost · n + (n − 1 − i) in descending order.
  std::vector<std::int64_t> by_load(static_cast<std::size_t>(grid)), round;
  for (std::int64_t first = 0; first < n; first += grid) {
    for (int c = 0; c < grid; ++c) by_load[std::size_t(c)] = a.load[std::size_t(c)] * grid + c;
    std::sort(by_load.begin(), by_load.end());
    round.clear();
    for (std::int64_t i = first; i < std::min(n, first + grid); ++i)
      round.push_back(costs[std::size_t(i)] * n + (n - 1 - i));
    if (!std::is_sorted(round.begin(), round.end(), std::greater<>()))
      std::sort(round.begin(), round.end(), std::greater<>());
    for (std::size_t j = 0; j < round.size(); ++j) {
      const int c = int(by_load[j] % grid);
      const std::int64_t i = n - 1 - round[j] % n;
      a.cta_of[std::size_t(i)] = c;
      a.round_of[std::size_t(i)] = first / grid;
      a.load[std::size_t(c)] += costs[std::size_t(i)];
    }
  }
  return a;
}

// Swaps of two items between the busiest CTA and one of the kSwapPartners least loaded that lower
// the pair's larger load, best first, until none does. The two items swap CTAs and rounds (each
// takes the other's place in the layout, so every CTA keeps its rounds). At most `grid` swaps, each
// a scan of the busiest CTA's items against the partners'.
void even_by_swaps(std::span<const std::int64_t> costs, int grid, WalkAssignment* a) {
  constexpr int kSwapPartners = 8;
  std::vector<std::vector<std::int64_t>> of(static_cast<std::size_t>(grid));
  for (std::size_t i = 0; i < a->cta_of.size(); ++i) of[std::size_t(a->cta_of[i])].push_back(std::int64_t(i));
  std::vector<int> by_load(static_cast<std::size_t>(grid));
  for (int c = 0; c < grid; ++c) by_load[std::size_t(c)] = c;
  for (int step = 0; step < grid; ++step) {
    std::sort(by_load.begin(), by_load.end(), [&](int x, int y) {
      return a->load[std::size_t(x)] != a->load[std::size_t(y)] ? a->load[std::size_t(x)] < a->load[std::size_t(y)]
                                                                : x < y;
    });
    const int c = by_load.back();
    std::int64_t best = a->load[std::size_t(c)];
    std::int64_t* bx = nullptr;
    std::int64_t* by = nullptr;
    int bd = -1;
    // (No swap with partner d ends below the pair's mean, ceil((load c + load d) / 2); the partners come
    // least loaded first, so once that is not below the best, no later pair can be either, and the scan
    // stops: the first best pair in scan order, as a full scan finds it.)
    const auto floor_with = [&](int d) { return (a->load[std::size_t(c)] + a->load[std::size_t(d)] + 1) / 2; };
    for (int k = 0; k < std::min(kSwapPartners, grid - 1) && floor_with(by_load[std::size_t(k)]) < best; ++k) {
      const int d = by_load[std::size_t(k)];
      const std::int64_t reach = floor_with(d);
      for (std::int64_t& x : of[std::size_t(c)]) {
        for (std::int64_t& y : of[std::size_t(d)]) {
          const std::int64_t dx = costs[std::size_t(x)] - costs[std::size_t(y)];
          if (dx <= 0) continue;
          const std::int64_t m = std::max(a->load[std::size_t(c)] - dx, a->load[std::size_t(d)] + dx);
          if (m < best) {
            best = m;
            bx = &x;
            by = &y;
            bd = d;
          }
        }
        if (best == reach) break;
      }
      if (best == reach) break;
    }
    if (bd < 0) return;
    const std::int64_t dx = costs[std::size_t(*bx)] - costs[std::size_t(*by)];
    a->load[std::size_t(c)] -= dx;
    a->load[std::size_t(bd)] += dx;
    a->cta_of[std::size_t(*bx)] = bd;
    a->cta_of[std::size_t(*by)] = c;
    std::swap(a->round_of[std::size_t(*bx)], a->round_of[std::size_t(*by)]);
    std::swap(*bx, *by);
  }
}

WalkAssignment assign_walk(std::span<const std::int64_t> costs, int grid) {
  WalkAssignment a = assign_rounds(costs, grid);
  even_by_swaps(costs, grid, &a);
  return a;
}

// Lays `items` out for their assignment: the kernel's CTA c walks positions c, c + grid, … (`next`), so the
// CTAs that hold an item of the last, partial round are numbered first.
void lay_out_walk(std::span<WorkItem> items, const WalkAssignment& a, int grid) {
  const std::int64_t n = std::int64_t(items.size());
  const std::int64_t last = (n - 1) / grid * grid;
  std::vector<int> label(std::size_t(grid), -1);
  int next = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (a.round_of[std::size_t(i)] * grid == last) label[std::size_t(a.cta_of[std::size_t(i)])] = -2;
  }
  for (int c = 0; c < grid; ++c) {
    if (label[std::size_t(c)] == -2) label[std::size_t(c)] = next++;
  }
  for (int c = 0; c < grid; ++c) {
    if (label[std::size_t(c)] == -1) label[std::size_t(c)] = next++;
  }
  std::vector<WorkItem> out(items.size());
  for (std::int64_t i = 0; i < n; ++i) {
    out[std::size_t(a.round_of[std::size_t(i)] * grid + label[std::size_t(a.cta_of[std::size_t(i)])])] =
        items[std::size_t(i)];
  }
  for (std::int64_t i = 0; i < n; ++i) out[std::size_t(i)].next = i + grid < n ? std::int32_t(i + grid) : -1;
  std::copy(out.begin(), out.end(), items.begin());
}

}  // namespace

void walk_order(std::span<WorkItem> items, int grid, int tile) {
  if (grid < 1 || std::int64_t(items.size()) <= grid) return;
  lay_out_walk(items, assign_walk(item_costs(items, std::max(tile, 1), kWalkItemTiles), grid), grid);
}

std::int64_t walk_makespan(std::span<const WorkItem> items, int grid, int tile) {
  return costliest_chain(items, grid, std::max(tile, 1), kWalkItemTiles);
}

WorkList walking_work_list(std::span<const std::int32_t> kv_lengths, WorkList wl, int grid, int tile, int max_items) {
  tile = std::max(tile, 1);
  if (grid < 1 || std::int64_t(wl.items.size()) <= grid) return wl;
  WalkAssignment best = assign_walk(item_costs(wl.items, tile, kWalkItemTiles), grid);
  const std::int64_t base = best.makespan() + split_cost(wl.num_partials);
  const auto gains = [&](std::int64_t cost) {
    return std::int64_t(100) * cost <= std::int64_t(100 - kWalkMinGainPercent) * base;
  };
  // Every request cut at one chunk, from whole requests down to what the workspace holds: each list
  // scored in rounds (assign_rounds alone, on costs only); the cheapest then with swaps too. (The
  // scan stops at once when the CTAs' mean load with every request whole leaves no room for the
  // margin: many rounds of short items.)
  std::int64_t cand_cost = 0;
  const std::int64_t cand_tiles = cheapest_chunk_tiles(
      kv_lengths, tile, kWalkItemTiles, grid, grid, max_items, (100 - kWalkMinGainPercent) * base / 100,
      [&](std::span<const std::int64_t> costs, std::int64_t partials) {
        return assign_rounds(costs, grid).makespan() + split_cost(partials);
      },
      &cand_cost);
  if (cand_tiles > 0) {
    const std::vector<std::int64_t> chunks(kv_lengths.size(), cand_tiles * tile);
    WorkList l = work_list_from_chunks(kv_lengths, chunks, tile);
    WalkAssignment a = assign_walk(item_costs(l.items, tile, kWalkItemTiles), grid);
    if (gains(a.makespan() + split_cost(l.num_partials))) {
      l.tokens_per_split = int(std::min<std::int64_t>(cand_tiles * tile, 1 << 30));
      wl = std::move(l);
      best = std::move(a);
    }
  }
  lay_out_walk(wl.items, best, grid);
  return wl;
}

WorkList walked_timeline_list(std::span<const std::int32_t> kv_lengths, int slots, int tile, int overhead, int* used) {
  tile = std::max(tile, 1);
  overhead = std::max(overhead, 1);  // (every item costs ≥ 1: the timelines' first items start them)
  WorkList tl = least_timeline_list(kv_lengths, std::max(slots, 1), tile, overhead,
                                    total_cost(kv_lengths, tile, overhead), true, used);
  set_tokens_per_split(&tl, tile);
  return tl;
}

int walked_timelines(std::span<const std::int32_t> kv_lengths, int slots, int tile, int max_items, int grid,
                     WorkList* wl) {
  tile = std::max(tile, 1);
  slots = std::max(slots, 1);
  const std::int64_t n = std::int64_t(wl->items.size());
  const bool walks = grid < n;
  if (!walks && n > slots) return grid;  // several waves of one CTA per item: kept (v122's 200 × 8192)
  const std::int64_t base =
      (walks ? walk_makespan(wl->items, grid, tile) : list_makespan(wl->items, slots, tile, kItemOverheadTiles)) +
      split_cost(wl->num_partials);
  const std::int64_t least_load = total_cost(kv_lengths, tile, kWalkItemTiles);
  const auto priced = [&](std::int64_t load, std::int64_t partials, int ctas) {
    const std::int64_t c = load + split_cost(partials) + partial_traffic(partials, ctas);
    return c + c * kWalkPacePercent / 100 + (walks ? 0 : kWalkedStartTiles);
  };
  const auto gains = [&](std::int64_t cost) {
    return std::int64_t(100) * cost <= std::int64_t(100 - kMinGainPercent) * base;
  };
  // Nothing to try when even every CTA at the mean leaves no room for the margin.
  if (!gains(priced(least_load / slots, 0, slots))) return grid;
  static_assert(kWalkItemTiles >= 1,
                "every item costs ≥ 1: the timelines' first items start them (timeline_work_list)");
  int used = 0;
  WorkList tl = walked_timeline_list(kv_lengths, slots, tile, kWalkItemTiles, &used);
  if (int(tl.items.size()) > max_items || std::int64_t(tl.items.size()) <= used) return grid;
  if (!gains(priced(walk_makespan(tl.items, used, tile), tl.num_partials, used))) return grid;
  set_tokens_per_split(&tl, tile);
  *wl = std::move(tl);
  return used;
}

bool ragged_batch(std::span<const std::int32_t> request_lengths, int rows) {
  if (request_lengths.size() < 2 || rows > kRaggedMaxRows) return false;
  double sum = 0, sq = 0;
  for (std::int32_t len : request_lengths) {
    sum += double(len);
    sq += double(len) * double(len);
  }
  const double n = double(request_lengths.size()), mean = sum / n;
  if (mean <= 0) return false;
  const double var = std::max(0.0, sq / n - mean * mean);
  return std::sqrt(var) >= kRaggedMinCv * mean;
}

int bf16_walking_path(std::span<const std::int32_t> kv_lengths, int slots, int tile, int max_items, int grid,
                      WorkList* wl) {
  *wl = walking_work_list(kv_lengths, std::move(*wl), grid, tile, max_items);
  return walked_timelines(kv_lengths, slots, tile, max_items, grid, wl);
}

bool whole_requests_pay(std::span<const std::int32_t> kv_lengths, int slots, int tile) {
  tile = std::max(tile, 1);
  const std::int64_t n = std::int64_t(kv_lengths.size());
  if (slots < 2 || 2 * n <= slots || 100 * n > std::int64_t(kWholeMaxSlotPercent) * slots) return false;
  std::int64_t longest = 0, total = 0;
  for (std::int32_t len : kv_lengths) {
    if (len < std::int64_t(kTmaMinTilesBf16) * tile) return false;  // (kv_tma's test: whole tiles)
    const std::int64_t tiles = (std::int64_t(len) + tile - 1) / tile;
    longest = std::max(longest, tiles);
    total += tiles;
  }
  const WholeRequestsModel& m = kWholeRequests;
  const double whole = m.fixed_us + m.tile_us * double(longest) + m.request_us * double(n);
  const double walked = m.walked_fixed_us + double(total) / (m.walked_tiles_per_slot_us * slots);
  return 100 * whole <= (100 - kWholeMinGainPercent) * walked;
}

int walking_grid(std::span<const WorkItem> items, int slots, std::int64_t max_mean_tokens) {
  const int n = int(items.size());
  if (slots <= 0 || n <= slots) return n;
  std::int64_t tokens = 0;
  for (const WorkItem& it : items) tokens += it.kv_end - it.kv_begin;
  return tokens <= max_mean_tokens * n ? slots : n;
}

bool kv_evict_first(std::int64_t kv_bytes, std::int64_t l2_bytes, int s_q) {
  constexpr std::int64_t kMaxL2s = 4;
  return s_q == 1 && l2_bytes > 0 && kv_bytes <= kMaxL2s * l2_bytes;
}

bool kv_tma_waves(int ctas, int slots) {
  if (slots < 1) return false;
  if (ctas <= slots) return true;
  const int last = ctas - (ctas - 1) / slots * slots;  // CTAs in the last wave: 1 .. slots
  return std::int64_t(100) * last < std::int64_t(kTmaFullWavePercent) * slots;
}

bool kv_tma(std::span<const WorkItem> items, int grid, int tile_tokens, int min_tiles, int min_chain_tiles,
            int unit_rows, bool map_fits, int page_size) {
  if (items.empty() || !map_fits || unit_rows < 1 || tile_tokens < 1 || (page_size != 0 && page_size < 64)) {
    return false;
  }
  for (const WorkItem& it : items) {
    if (page_size == 0 && (std::int64_t(it.kv_base) + it.kv_begin) % unit_rows != 0) return false;
  }
  const std::int64_t least = std::int64_t(min_tiles) * tile_tokens, n = std::int64_t(items.size());
  if (grid < 1 || grid >= n) {  // a CTA per item
    for (const WorkItem& it : items) {
      if (it.kv_end - it.kv_begin < least) return false;
    }
    return true;
  }
  return costliest_chain(items, grid, tile_tokens, 0) >= min_chain_tiles;  // a walking grid: its longest chain
}

}  // namespace mla
