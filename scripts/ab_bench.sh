#!/usr/bin/env bash
# In-run A/B on the H200: builds the working tree (B) and an older tree (A, from a tarball made
# with `git archive <commit> > ab_old.tar` in the repository root; ignored, so carry it), runs the new tree's
# GPU tests once, then alternates `mla bench` between A and B so that both see the same machine
# (whole-suite runs on different machines differ by ±3 % at the large shapes; see perf-notes v26).
#   usage: scripts/ab_bench.sh OUTDIR FORMATS [ROUNDS] [REPS] [SHAPES]
#   e.g.   scripts/ab_bench.sh $OUT fp8 2 30      (on the device; carry [".deps", "ab_old.tar"])
# Prints, per round and tree, each case's device µs (column 5 of the bench table), then a summary
# per case (scripts/ab_table.py: A and B over the rounds, B's change against A).
set -uo pipefail
out=${1:?usage: scripts/ab_bench.sh OUTDIR FORMATS [ROUNDS] [REPS] [SHAPES]}
formats=${2:?formats, e.g. fp8 or bf16,fp8,mxfp4}
rounds=${3:-2}
reps=${4:-30}
shapes=${5:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p "$out"
gtest="-DMLA_GTEST_SOURCE=$root/.deps/googletest"
[ -f ab_old.tar ] || { echo "no ab_old.tar in $root"; exit 1; }

rm -rf ab_old && mkdir ab_old && tar -xf ab_old.tar -C ab_old
(cd ab_old && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$gtest" >"$out/build-a.log" 2>&1 &&
  cmake --build build -j8 >>"$out/build-a.log" 2>&1) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release "$gtest" >"$out/build-b.log" 2>&1 &&
  cmake --build build-gpu -j8 >>"$out/build-b.log" 2>&1 || { tail -40 "$out/build-b.log"; echo "B BUILD FAILED"; exit 1; }
wait
[ -x ab_old/build/mla ] || { tail -40 "$out/build-a.log"; echo "A BUILD FAILED"; exit 1; }
grep -E -A2 "entry function.*(decode_kernel|decode_fp8_kernel|decode_mxfp4_kernel)" "$out/build-b.log" |
  grep -E "entry|Used|spill" | sed -E "s/.*entry function '[^']*(decode_[a-z0-9_]*kernel)[^']*'.*/B \1/"

echo "=== B: GPU tests"
timeout 300 build-gpu/mla_gpu_tests >"$out/gtest-b.log" 2>&1
echo "gtest exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$out/gtest-b.log" | head -20

args=(bench --format "$formats" --reps "$reps" --check-requests 1)
[ -n "$shapes" ] && args+=(--shapes "$shapes")
for r in $(seq "$rounds"); do
  for v in A B; do
    bin=build-gpu/mla
    [ "$v" = A ] && bin=ab_old/build/mla
    timeout 240 "$bin" "${args[@]}" >"$out/bench-$v-$r.txt" 2>/dev/null
    echo "--- round $r $v: $(awk '$1 ~ /^(bf16|fp8|mxfp4)$/ {printf "%s %sx%s %s | ", $1, $2, $3, $5}' "$out/bench-$v-$r.txt")"
    awk "f && NF>3; /^format  cases/{f=1}" "$out/bench-$v-$r.txt"
  done
done
echo "=== A vs B (device µs over the rounds)"
python3 "$root/scripts/ab_table.py" "$out"
