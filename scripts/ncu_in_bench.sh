#!/usr/bin/env bash
# Decode-kernel durations inside `mla bench`'s own protocol (each timed rep after the cold-L2 memset),
# which ncu's default replay does not reproduce: it flushes and invalidates L2 before each pass, and
# that hid a 3-µs pages-of-1 cost in perf-notes "Session 44 run". One pass per launch, no cache
# control, one metric unless NCU_SECTIONS adds sections (e.g. "--section WarpStateStats", which costs
# replay passes: then every pass after the first sees that launch's own L2 state).
#   usage: scripts/ncu_in_bench.sh OUTDIR FORMAT SHAPE [BENCH_ARGS] [KERNEL_REGEX]   (on the H200 machine)
#   e.g.   scripts/ncu_in_bench.sh $OUT fp8 256x1024 "--paged 1 --page-order in-order"
# Prints the durations of launches 3..18 (µs) and their mean after the first two.
set -uo pipefail
out=${1:?usage: scripts/ncu_in_bench.sh OUTDIR FORMAT SHAPE [BENCH_ARGS] [KERNEL_REGEX]}
fmt=${2:?format}
shape=${3:?shape}
read -r -a extra <<<"${4:-}"
kre=${5:-decode}
read -r -a sections <<<"${NCU_SECTIONS:-}"
mkdir -p "$out"
cd "$(dirname "$0")/.."
if [ ! -x build-gpu/mla ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLA_GTEST_SOURCE="$PWD/.deps/googletest" >/dev/null &&
    cmake --build build-gpu -j"$(nproc)" --target mla_cli >/dev/null || exit 1
fi
tag=$(printf '%s' "$fmt-$shape-${4:-}" | tr -c 'A-Za-z0-9_-' '_')
ncu --cache-control none --clock-control none -k "regex:$kre" --launch-skip 2 --launch-count 16 \
  --metrics gpu__time_duration.sum "${sections[@]}" \
  ./build-gpu/mla bench --format "$fmt" --shapes "$shape" --reps 8 --check-requests 1 "${extra[@]}" \
  >"$out/ncu-in-bench-$tag.txt" 2>&1 || { tail -20 "$out/ncu-in-bench-$tag.txt"; exit 1; }
grep -E 'gpu__time_duration' "$out/ncu-in-bench-$tag.txt" | awk '{v[NR] = $NF} END {
  s = 0; for (i = 1; i <= NR; ++i) { printf "%s ", v[i]; if (i > 2) s += v[i] }
  printf "\nmean of launches 3.. : %.2f us\n", (NR > 2 ? s / (NR - 2) : 0) }'
