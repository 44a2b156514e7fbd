// mla_pace_sim: the planner's simulated launches over stored work lists, for scripts/fit_pace.py and
// scripts/fit_lists.py. Lists come from stdin, one per line.
//
//   mla_pace_sim P1 … P8 [DRAM] < lists           simulated_launch_us (LaunchPace's numbers), lines
//       "label clustered partials split_requests" then each item's tiles in launch order, runs as TILES*COUNT;
//   mla_pace_sim --one-cta P1 … P11 < lists       simulated_one_cta_us below (bf16; OneCtaPace), lines
//       "label tma clustered partials split_requests grid" then the items: with grid 0 in launch order,
//       else each CTA's chain after a '|' (CTA c's chain starts at item c).
// Prints "label µs" per list.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <queue>
#include <sstream>
#include <string>
#include <vector>

#include "host/planner.h"

namespace {

using mla::WorkItem;

constexpr int kTile = 64, kSms = 132;

// A launch of one CTA per SM (bf16), simulated (an experiment: perf-notes, session 32 — not used by the planner):
// `grid` CTAs, one per SM; below the items, each CTA walks its chain (CTA c from item c by `next`), else the CTAs take
// the items in list order as SMs free (the block scheduler). A CTA's first item waits `item_latency_us`, then computes
// its tiles plus `item_tiles`; a walking CTA's later items cost their tiles plus `walk_item_tiles` (their copies went
// out under the item before). A tile takes `tile_us`, × `tma_factor` when the launch copies by TMA, × `walk_factor` on
// a walking grid; while the computing CTAs ask for more than `dram_tiles_per_us`, all slow alike (as
// simulated_launch_us). The call adds `launch_us` and the merge as LaunchPace's.
struct OneCtaPace {
  double tile_us;
  double tma_factor;
  double walk_factor;
  double item_latency_us;
  double item_tiles;
  double walk_item_tiles;
  double launch_us;
  double cluster_merge_us;
  double partial_us;
  double split_request_us;
  double dram_tiles_per_us;
};
double simulated_one_cta_us(std::span<const WorkItem> items, int sms, int grid, int tile, bool tma, bool clustered,
                            int partials, int split_requests, const OneCtaPace& pace) {
  sms = std::max(sms, 1);
  tile = std::max(tile, 1);
  const std::int64_t n = std::int64_t(items.size());
  const bool walks = grid > 0 && grid < n;
  const int ctas = walks ? std::min(grid, sms) : sms;
  const double tile_us = pace.tile_us * (tma ? pace.tma_factor : 1.0) * (walks ? pace.walk_factor : 1.0);
  const auto tiles_of = [&](std::int64_t i) {
    return double(((std::int64_t(items[std::size_t(i)].kv_end) - items[std::size_t(i)].kv_begin + tile - 1) / tile));
  };
  // Events in pace time: a CTA's latency ends (it starts computing) or its item ends. Every computing
  // CTA runs at tile_us, so an item's end is fixed when it starts computing; real time runs slower by
  // demand / dram_tiles_per_us while that exceeds 1.
  using Event = std::pair<double, int>;  // time, CTA
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::vector<std::int64_t> item(std::size_t(ctas), -1);  // each CTA's item
  std::vector<double> work(std::size_t(ctas), 0.0);       // its tiles to compute
  std::vector<char> busy(std::size_t(ctas), 0);           // computing (not waiting out its latency)
  int computing = 0;
  std::int64_t next = 0;  // the block scheduler's next item
  const auto take = [&](int k, std::int64_t i, double now, bool first) {
    item[std::size_t(k)] = i;
    work[std::size_t(k)] = tiles_of(i) + (first ? pace.item_tiles : pace.walk_item_tiles);
    if (first && pace.item_latency_us > 0) {
      events.push({now + pace.item_latency_us, k});
    } else {
      busy[std::size_t(k)] = 1;
      ++computing;
      events.push({now + work[std::size_t(k)] * tile_us, k});
    }
  };
  for (int k = 0; k < ctas; ++k) {
    const std::int64_t i = walks ? k : next++;
    if (i >= n) break;
    take(k, i, 0.0, true);
  }
  double now = 0, real = 0, end = 0;
  while (!events.empty()) {
    const auto [t, k] = events.top();
    events.pop();
    const double demand = computing / tile_us;
    real += (t - now) * (pace.dram_tiles_per_us > 0 ? std::max(1.0, demand / pace.dram_tiles_per_us) : 1.0);
    now = t;
    if (busy[std::size_t(k)] == 0) {  // its latency ended
      busy[std::size_t(k)] = 1;
      ++computing;
      events.push({now + work[std::size_t(k)] * tile_us, k});
      continue;
    }
    busy[std::size_t(k)] = 0;  // its item ended: the next of its chain, or of the list
    --computing;
    end = real;
    const std::int64_t following = walks ? items[std::size_t(item[std::size_t(k)])].next : next < n ? next++ : -1;
    if (following >= 0 && following < n) take(k, following, now, !walks);
  }
  return pace.launch_us + end +
         (clustered      ? pace.cluster_merge_us
          : partials > 0 ? pace.partial_us * partials + pace.split_request_us * split_requests
                         : 0.0);
}

// Appends the items of `run` (TILES or TILES*COUNT) to `tiles`.
void add_run(const std::string& run, std::vector<int>* tiles) {
  const std::size_t star = run.find('*');
  const int t = std::atoi(run.c_str());
  const int count = star == std::string::npos ? 1 : std::atoi(run.c_str() + star + 1);
  for (int k = 0; k < count; ++k) tiles->push_back(t);
}

mla::WorkItem item_of(int tiles) {
  return {0, 0, tiles * kTile, -1};
}

}  // namespace

int main(int argc, char** argv) {
  const bool one_cta = argc > 1 && std::strcmp(argv[1], "--one-cta") == 0;
  const int first = one_cta ? 2 : 1, count = argc - first;
  if (one_cta ? count != 11 : count != 8 && count != 9) {
    std::fprintf(
        stderr,
        "usage: mla_pace_sim PAIRED LONE ITEM_TILES LATENCY LAUNCH CLUSTER_MERGE PARTIAL SPLIT [DRAM] < lists\n"
        "       mla_pace_sim --one-cta TILE TMA WALK LATENCY ITEM_TILES WALK_ITEM_TILES LAUNCH CLUSTER_MERGE"
        " PARTIAL SPLIT DRAM < lists\n");
    return 2;
  }
  double v[11] = {};
  for (int i = 0; i < count; ++i) v[i] = std::atof(argv[first + i]);
  const mla::LaunchPace pace{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
  const OneCtaPace one{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]};
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string label, run;
    int tma = 0, clustered = 0, partials = 0, splits = 0, grid = 0;
    if (one_cta ? !(in >> label >> tma >> clustered >> partials >> splits >> grid)
                : !(in >> label >> clustered >> partials >> splits)) {
      continue;
    }
    std::vector<mla::WorkItem> items;
    if (!one_cta || grid == 0) {
      std::vector<int> tiles;
      while (in >> run) add_run(run, &tiles);
      for (int t : tiles) items.push_back(item_of(t));
    } else {
      // Chains: CTA c's first item at index c, its later ones after all first items, linked by next.
      std::vector<std::vector<int>> chains;
      while (in >> run) {
        if (run == "|") {
          chains.emplace_back();
        } else if (!chains.empty()) {
          add_run(run, &chains.back());
        }
      }
      for (const auto& chain : chains) items.push_back(item_of(chain.empty() ? 0 : chain[0]));
      for (std::size_t c = 0; c < chains.size(); ++c) {
        int at = int(c);
        for (std::size_t k = 1; k < chains[c].size(); ++k) {
          items[std::size_t(at)].next = int(items.size());
          at = int(items.size());
          items.push_back(item_of(chains[c][k]));
        }
      }
      grid = int(chains.size());
    }
    const double us =
        one_cta ? simulated_one_cta_us(items, kSms, grid, kTile, tma > 0, clustered > 0, partials, splits, one)
                : mla::simulated_launch_us(items, kSms, kTile, clustered > 0, partials, splits, pace);
    std::printf("%s %.3f\n", label.c_str(), us);
  }
  return 0;
}
