// bench/pace's cases and list format, shared by mla_list_bench and mla_list_rules.
#pragma once

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "host/planner.h"
#include "testing/inputs.h"

namespace mla::pace {

// A case's request lengths: BxL (B requests of L tokens), BxLrS (ragged_lengths(B, S, L): up to L
// tokens, some edge lengths), BxLhS / BxLqS (uniform in [L/2, L] / [L/4, L], seed S: spreads of about
// 0.19 and 0.35 of the mean; drawn by std::uniform_int_distribution over std::mt19937, whose mapping is
// the standard library's own: the committed data (bench/pace/bf16_g, bf16_h) are libstdc++'s, g++ 12).
// False when `s` is none of these.
inline bool parse_case(const std::string& s, std::vector<std::int32_t>* lengths) {
  int b = 0, len = 0, seed = 0;
  char kind = 0, tail = 0;
  if (std::sscanf(s.c_str(), "%dx%d%c%d%c", &b, &len, &kind, &seed, &tail) == 4 && b > 0 && len > 0) {
    if (kind == 'r') {
      *lengths = testing::ragged_lengths(b, std::uint64_t(seed), len);
      return true;
    }
    if (kind != 'h' && kind != 'q') return false;
    std::mt19937 rng{std::uint32_t(seed)};
    std::uniform_int_distribution<int> pick(kind == 'h' ? len / 2 : len / 4, len);
    lengths->resize(std::size_t(b));
    for (std::int32_t& l : *lengths) l = pick(rng);
    return true;
  }
  if (std::sscanf(s.c_str(), "%dx%d%c", &b, &len, &tail) == 2 && b > 0 && len > 0) {
    lengths->assign(std::size_t(b), len);
    return true;
  }
  return false;
}

// A list as bench/pace writes it: each item's tiles of `tile` tokens in launch order, runs of equal
// items written TILES*COUNT (" 13*2 12 13*2 3 …").
inline std::string list_runs(const std::vector<WorkItem>& items, int tile) {
  std::string out;
  for (std::size_t i = 0; i < items.size();) {
    const auto tiles = [&](std::size_t k) { return (items[k].kv_end - items[k].kv_begin + tile - 1) / tile; };
    std::size_t j = i;
    while (j < items.size() && tiles(j) == tiles(i)) ++j;
    char run[48];
    if (j - i > 1) {
      std::snprintf(run, sizeof(run), " %d*%zu", int(tiles(i)), j - i);
    } else {
      std::snprintf(run, sizeof(run), " %d", int(tiles(i)));
    }
    out.append(run);
    i = j;
  }
  return out;
}

}  // namespace mla::pace
