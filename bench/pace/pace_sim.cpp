// mla_pace_sim: the planner's simulated launch (mla::simulated_launch_us) over stored work lists, for
// scripts/fit_pace.py. Reads the eight or nine LaunchPace numbers as arguments and lists from
// stdin, one per line: "label clustered partials split_requests" then each item's tiles, runs as
// TILES*COUNT. Prints "label µs" per list.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "host/planner.h"

int main(int argc, char** argv) {
  if (argc != 9 && argc != 10) {
    std::fprintf(
        stderr,
        "usage: mla_pace_sim PAIRED LONE ITEM_TILES LATENCY LAUNCH CLUSTER_MERGE PARTIAL SPLIT [DRAM] < lists\n");
    return 2;
  }
  double v[9] = {};
  for (int i = 0; i + 1 < argc; ++i) v[i] = std::atof(argv[i + 1]);
  const mla::LaunchPace pace{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
  constexpr int kTile = 64, kSms = 132;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string label, run;
    int clustered = 0, partials = 0, splits = 0;
    if (!(in >> label >> clustered >> partials >> splits)) continue;
    std::vector<mla::WorkItem> items;
    while (in >> run) {
      const std::size_t star = run.find('*');
      const int tiles = std::atoi(run.c_str());
      const int count = star == std::string::npos ? 1 : std::atoi(run.c_str() + star + 1);
      for (int k = 0; k < count; ++k) items.push_back({int(items.size()), 0, tiles * kTile, -1});
    }
    std::printf("%s %.3f\n", label.c_str(),
                mla::simulated_launch_us(items, kSms, kTile, clustered > 0, partials, splits, pace));
  }
  return 0;
}
