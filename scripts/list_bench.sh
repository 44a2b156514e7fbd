#!/usr/bin/env bash
# Builds mla_list_bench (bench/pace/list_bench.cpp) and measures every work list the CUDA planner
# weighs for each case, on the GPU (carry [".deps"]).
#   usage: scripts/list_bench.sh OUTFILE FORMAT ROUNDS REPS CASE...
#   e.g.   scripts/list_bench.sh $OUT/fp8.txt fp8 3 10 256x8192 200x8192r1
set -euo pipefail
out=${1:?usage: scripts/list_bench.sh OUTFILE FORMAT ROUNDS REPS CASE...}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLA_GTEST_SOURCE="$root/.deps/googletest" >/dev/null
cmake --build build-gpu --target mla_list_bench -j"$(nproc)" >/dev/null
# Per case: the plan's list (K = 0) against the fastest list measured (means over the rounds).
build-gpu/mla_list_bench "$@" | tee "$out" | awk '$1 == "M" {
  split($2, a, "/"); s = 0; for (i = 10; i <= NF; ++i) s += $i; us = s / (NF - 9)
  if (a[2] == 0) { chosen[a[1]] = us; order[++n] = a[1] }
  if (!(a[1] in best) || us < best[a[1]]) { best[a[1]] = us; which[a[1]] = a[2] }
  if ($9 > 0.05) print "BAD DIFF", $0
} END { for (i = 1; i <= n; ++i) { c = order[i]
  printf "%-14s plan %8.1f  best %8.1f (list %s)  %+.1f %%\n", c, chosen[c], best[c], which[c], 100 * (best[c] / chosen[c] - 1) } }'
