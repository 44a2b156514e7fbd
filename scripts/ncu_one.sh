#!/usr/bin/env bash
# One decode launch under ncu (speed of light, stall reasons, pipes, memory) plus the SASS
# instruction mix of the decode kernels (sass-mix.txt). scripts/profile.sh runs it per format.
#   usage: scripts/ncu_one.sh OUTDIR FORMAT SHAPE KERNEL_REGEX [BENCH_ARGS]    (on the H200 machine)
# BENCH_ARGS: further `mla bench` options, e.g. "--s-q 2".
set -uo pipefail
out=${1:?usage: scripts/ncu_one.sh OUTDIR FORMAT SHAPE KERNEL_REGEX}
fmt=${2:-fp8}
shape=${3:-256x8192}
kre=${4:-decode}
read -r -a extra <<<"${5:-}"
mkdir -p "$out"
cd "$(dirname "$0")/.."
if [ ! -x build-gpu/mla ]; then
  cmake -S . -B build-gpu -G Ninja -DMLA_GTEST_SOURCE="$PWD/.deps/googletest" >/dev/null &&
    cmake --build build-gpu -j"$(nproc)" --target mla_cli >/dev/null || exit 1
fi
for obj in $(find build-gpu -name 'decode*.cu.o'); do cuobjdump -sass "$obj"; done >"$out/decode.sass"
awk '/Function :/{name=$3} /^ +\/\*[0-9a-f]+\*\/ +[A-Z@]/{op=$2; if (op ~ /^@/) op=$3; sub(/\..*/,"",op); sub(/;$/,"",op); n[name" "op]++}
     END{for (k in n) print n[k], k}' "$out/decode.sass" | sort -k2,2 -k1,1nr | awk '{c[$2]++; if (c[$2] <= 16) print}' >"$out/sass-mix.txt"
stalls=$(for r in barrier long_scoreboard short_scoreboard math_pipe_throttle mio_throttle wait not_selected \
  dispatch_stall lg_throttle selected membar sleeping misc branch_resolving no_instruction drain tex_throttle; do
  printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' "$r"; done)
ncu --clock-control none -k "regex:$kre" -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --metrics "${stalls}sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__issue_active.avg.pct_of_peak_sustained_active" \
  ./build-gpu/mla bench --format "$fmt" --shapes "$shape" --reps 2 --check-requests 1 "${extra[@]}" >"$out/ncu-$fmt-$shape.txt" 2>&1
