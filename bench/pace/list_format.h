// bench/pace's list format, shared by mla_list_bench and mla_list_rules: each item's tiles of `tile`
// tokens in launch order, runs of equal items written TILES*COUNT (" 13*2 12 13*2 3 …").
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "host/planner.h"

namespace mla::pace {

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
