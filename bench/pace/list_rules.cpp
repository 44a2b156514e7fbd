// mla_list_rules: the bf16 lists several planning rules make for each case (CPU only), in
// mla_list_bench's list format, so that scripts/eval_list_rules.py can look each up among the lists
// mla_list_bench measured (perf-notes v134: how bf16's ragged rule was chosen).
//
//   usage: mla_list_rules CASE...     CASE: as mla_list_bench's (list_format.h's parse_case)
//   prints per case and rule: R CASE RULE partials split_requests TILES*COUNT ...
//   rules: tile (the tile model's list, kDramBound), tl (the same with timelines), tl_oO / nt_oO (timelines
//   on / off at an item overhead of O tiles, a 2 % margin), sim (simulated_work_list with kFp8Pace: v134's
//   choice for ragged batches); all a CTA per item, 132 SMs, one CTA each.
#include <cstdio>
#include <string>
#include <vector>

#include "host/planner.h"
#include "list_format.h"

int main(int argc, char** argv) {
  using namespace mla;
  constexpr int kSlots = 132, kTile = 64;
  for (int a = 1; a < argc; ++a) {
    const std::string c = argv[a];
    std::vector<std::int32_t> lens;
    if (!pace::parse_case(c, &lens)) {
      std::fprintf(stderr, "mla_list_rules: bad case '%s' (BxL, BxLrS, BxLhS or BxLqS)\n", c.c_str());
      return 2;
    }
    const int batch = int(lens.size());
    const int max_items = cuda_workspace_layout(batch, 1, kSlots, 2).max_items;
    const auto print = [&](const std::string& rule, const WorkList& wl) {
      std::printf("R %s %s %d %d%s\n", c.c_str(), rule.c_str(), wl.num_partials, wl.num_split_requests,
                  pace::list_runs(wl.items, kTile).c_str());
    };
    print("tile", balanced_work_list(lens, kSlots, kTile, max_items, false, kDramBound));
    print("tl", balanced_work_list(lens, kSlots, kTile, max_items, true, kDramBound));
    for (int o : {1, 2, 3, 4, 6}) {
      print("tl_o" + std::to_string(o), balanced_work_list(lens, kSlots, kTile, max_items, true, ListModel{o, 2}));
      print("nt_o" + std::to_string(o), balanced_work_list(lens, kSlots, kTile, max_items, false, ListModel{o, 2}));
    }
    print("sim", simulated_work_list(lens, kSlots, kTile, max_items, kFp8Pace));
  }
  return 0;
}
