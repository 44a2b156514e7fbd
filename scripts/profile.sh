#!/usr/bin/env bash
# Profiling helper for the H200 machine: SASS instruction mix of the decode kernels and ncu
# metrics (stall reasons, pipe use) of one launch per format at the largest suite shape.
#   usage: scripts/profile.sh OUTDIR [SHAPE]      (after scripts/gpu_run.sh built build-gpu, or builds it)
set -uo pipefail
out=${1:?usage: scripts/profile.sh OUTDIR [SHAPE]}
shape=${2:-256x8192}
mkdir -p "$out"
cd "$(dirname "$0")/.."
if [ ! -x build-gpu/mla ]; then
  cmake -S . -B build-gpu -G Ninja -DMLA_GTEST_SOURCE="$PWD/.deps/googletest" >/dev/null &&
    cmake --build build-gpu -j"$(nproc)" --target mla_cli >/dev/null || exit 1
fi
for obj in $(find build-gpu -name 'decode*.cu.o'); do cuobjdump -sass "$obj"; done >"$out/decode.sass"
awk '/Function :/{name=$3} /^ +\/\*[0-9a-f]+\*\/ +[A-Z]/{op=$2; sub(/\..*/,"",op); sub(/;$/,"",op); n[name" "op]++}
     END{for (k in n) print n[k], k}' "$out/decode.sass" | sort -k2,2 -k1,1nr | awk '{c[$2]++; if (c[$2] <= 14) print}' >"$out/sass-mix.txt"
metrics=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,\
sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
for f in bf16 fp8 mxfp4; do
  ncu --clock-control none -k regex:decode -c 1 --metrics "$metrics" \
    ./build-gpu/mla bench --format "$f" --shapes "$shape" --reps 2 --check-requests 1 >"$out/ncu-$f.txt" 2>&1
done
for f in bf16 fp8 mxfp4; do echo "== $f"; grep -E "^\s+(sm|smsp|l1tex|dram|gpu)__" "$out/ncu-$f.txt" | awk '{print $1, $(NF)}'; done
echo "== SASS mix"; cat "$out/sass-mix.txt"
