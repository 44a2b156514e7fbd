#!/usr/bin/env bash
# DRAM bytes read and written and the duration of decode launches as the benchmark runs them: after
# `mla bench`'s own L2 flush, which leaves the L2 full of dirty lines. ncu's default kernel replay
# (and its cache control) hides that state: every pass starts from restored memory and nothing is
# written back. Application replay reruns the whole command per pass instead (perf-notes v94b).
#   usage: scripts/ncu_dram.sh OUTDIR FORMAT SHAPE [BENCH OPTIONS…]   (on the H200 machine; the binary
#          is $MLA_BIN, default build-gpu/mla, built here if missing)
#   e.g.   scripts/ncu_dram.sh $OUT fp8 32x8192 --kv-l2 normal
# NCU_EXTRA="metric,…" adds metrics (each must exist: `ncu --query-metrics`), e.g. the L2's hit and
# miss sectors of the SMs' reads: lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum, …_miss.sum.
# NCU_LAUNCHES=N profiles N decode launches (default 2) and prints their durations' mean: timing a
# kernel in this state, where the default replay hides costs that need the dirty L2 (perf-notes
# session 44: fp8's pages of 1, 3.7 µs here against 0.55 under the default replay).
set -uo pipefail
out=${1:?usage: scripts/ncu_dram.sh OUTDIR FORMAT SHAPE [BENCH OPTIONS…]}
fmt=${2:?format}
shape=${3:?shape, e.g. 64x8192}
shift 3
cd "$(dirname "$0")/.."
mla=${MLA_BIN:-build-gpu/mla}
if [ ! -x "$mla" ]; then
  cmake -S . -B build-gpu -G Ninja -DMLA_GTEST_SOURCE="$PWD/.deps/googletest" >/dev/null &&
    cmake --build build-gpu -j"$(nproc)" --target mla_cli >/dev/null || exit 1
fi
mkdir -p "$out"
log="$out/ncu-dram-$fmt-$shape$(printf '%s' "$*" | tr -c 'A-Za-z0-9_-' '_').txt"
# Launches 5, 6, … of the decode kernel: past the correctness check and the warm-up.
launches=${NCU_LAUNCHES:-2}
reps=$((launches > 3 ? launches : 3))  # mla bench runs each case's decode ~2 × reps times
ncu --replay-mode application --cache-control none --clock-control none -k regex:decode -s 4 -c "$launches" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum${NCU_EXTRA:+,$NCU_EXTRA} \
  "$mla" bench --backend cuda --format "$fmt" --shapes "$shape" --reps "$reps" --check-requests 1 "$@" \
  >"$log" 2>&1
grep -E "decode|gpu__time|dram__|lts__" "$log" | sed -E 's/ +/ /g' | cut -c1-120
grep -E 'gpu__time_duration' "$log" | awk '{s += $NF; n++; unit = $(NF - 1)} END {
  if (n > 1) printf "gpu__time_duration mean over %d launches: %.2f %s\n", n, s / n, unit }'
