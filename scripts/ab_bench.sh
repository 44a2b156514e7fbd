#!/usr/bin/env bash
# In-run A/B on the H200: builds the working tree (tree B) and older or alternative trees from
# tarballs in the repository root (ignored, so carry them): ab_old.tar gives tree A, any other
# ab_<name>.tar gives tree <name> (make them with `git archive <commit> > ab_old.tar`). Runs the
# trees' GPU tests, then alternates `mla bench` between all trees, round by round, so that every
# tree sees the same machine (whole-suite runs on different machines differ by ±3 % at the large
# shapes; see perf-notes v26). OUTDIR gets many files: on a machine that returns few, give it a
# scratch directory and keep the printed summary.
#   usage: scripts/ab_bench.sh OUTDIR FORMATS [ROUNDS] [REPS] [SHAPES]
#   e.g.   scripts/ab_bench.sh $OUT fp8 2 30      (on the device; carry [".deps", "ab_old.tar"])
# AB_TEST_TREES="B x" runs the GPU tests of those trees only (default: every tree); AB_SANITIZE=1 adds
# compute-sanitizer memcheck and racecheck of the small suite for each tested tree; AB_BENCH_ARGS
# adds `mla bench` options for every tree (e.g. AB_BENCH_ARGS="--ragged").
# Prints, per round and tree, each case's device µs (column 5 of the bench table), then a summary
# per case (scripts/ab_table.py: every tree over the rounds, each against the baseline A, or B
# where there is no ab_old.tar).
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
jobs=$(nproc)

# Trees: name → source directory, names sorted (A, the baseline when present, before B).
declare -A src=([B]=.)
names=()
for tar in ab_*.tar; do
  [ -f "$tar" ] || continue
  name=${tar#ab_}
  name=${name%.tar}
  [ "$name" = old ] && name=A
  case "$name" in B | *[!A-Za-z0-9_-]*) echo "tarball $tar: name must not be B and must be [A-Za-z0-9_-]"; exit 1 ;; esac
  # A tree already extracted from the same tarball keeps its build (a second run of this script
  # in the same device call, with other AB_BENCH_ARGS, then rebuilds nothing).
  sum=$(cksum <"$tar")
  if [ "$(cat "ab_tree_$name.cksum" 2>/dev/null)" != "$sum" ]; then
    rm -rf "ab_tree_$name" && mkdir "ab_tree_$name" && tar -xf "$tar" -C "ab_tree_$name" && echo "$sum" >"ab_tree_$name.cksum"
  fi
  src[$name]=ab_tree_$name
  names+=("$name")
done
[ ${#names[@]} -gt 0 ] || { echo "no ab_*.tar in $root"; exit 1; }
names=($(printf '%s\n' "${names[@]}" B | sort -u))

build_dir() { [ "$1" = B ] && echo build-gpu || echo "${src[$1]}/build"; }
for n in "${names[@]}"; do
  d=$(build_dir "$n")
  (cmake -S "${src[$n]}" -B "$d" -G Ninja -DCMAKE_BUILD_TYPE=Release "$gtest" >"$out/build-$n.log" 2>&1 &&
    cmake --build "$d" -j"$jobs" >>"$out/build-$n.log" 2>&1) &
done
wait
for n in "${names[@]}"; do
  [ -x "$(build_dir "$n")/mla" ] || { tail -40 "$out/build-$n.log"; echo "$n BUILD FAILED"; exit 1; }
  grep -E -A2 "entry function.*(decode_kernel|decode_fp8_kernel|decode_mxfp4_kernel)" "$out/build-$n.log" |
    grep -E "entry|Used|spill" | sed -E "s/.*entry function '[^']*(decode_[a-z0-9_]*kernel)[^']*'.*/$n \1/"
done

for n in ${AB_TEST_TREES:-${names[@]}}; do  # AB_TEST_TREES="A x": test only these trees
  echo "=== $n: GPU tests"
  timeout 300 "$(build_dir "$n")/mla_gpu_tests" >"$out/gtest-$n.log" 2>&1
  echo "gtest exit $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$out/gtest-$n.log" | head -20
  if [ -n "${AB_SANITIZE:-}" ]; then  # AB_SANITIZE=1: memcheck and racecheck of the small suite too
    for tool in memcheck racecheck; do
      timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$(build_dir "$n")/mla_gpu_tests" \
        --gtest_filter='GpuSanitizer.*' >"$out/sanitizer-$tool-$n.log" 2>&1
      echo "$tool exit $?: $(tail -n 1 "$out/sanitizer-$tool-$n.log")"
    done
  fi
done

args=(bench --backend cuda --format "$formats" --reps "$reps" --check-requests 1)
[ -n "$shapes" ] && args+=(--shapes "$shapes")
# AB_BENCH_ARGS: further `mla bench` options for every tree, e.g. "--ragged" or "--paged 16".
read -r -a extra <<<"${AB_BENCH_ARGS:-}"
args+=("${extra[@]}")
for r in $(seq "$rounds"); do
  for n in "${names[@]}"; do
    timeout 240 "$(build_dir "$n")/mla" "${args[@]}" >"$out/bench-$n-$r.txt" 2>/dev/null
    echo "--- round $r $n: $(awk '$1 ~ /^(bf16|fp8|mxfp4)$/ {printf "%s %sx%s %s | ", $1, $2, $3, $5}' "$out/bench-$n-$r.txt")"
    awk "f && NF>3; /^format  cases/{f=1}" "$out/bench-$n-$r.txt"
  done
done
echo "=== trees against the baseline (device µs over the rounds)"
python3 "$root/scripts/ab_table.py" "$out"
