#!/usr/bin/env bash
# Profiling helper for the H200 machine: for every format, one decode launch at SHAPE under ncu
# (scripts/ncu_one.sh: speed of light, stall reasons per issue, pipe use, bank conflicts) and the
# SASS instruction mix of the decode kernels; prints the stall and pipe lines of each.
#   usage: scripts/profile.sh OUTDIR [SHAPE]      (after scripts/gpu_run.sh built build-gpu, or builds it)
set -uo pipefail
out=${1:?usage: scripts/profile.sh OUTDIR [SHAPE]}
shape=${2:-256x8192}
here=$(dirname "$0")
for f in bf16 fp8 mxfp4; do
  bash "$here/ncu_one.sh" "$out" "$f" "$shape" decode || exit 1
  echo "== $f $shape"
  grep -E "stalled_[a-z_]+_per_issue_active|pipe_(alu|fma|lsu)|issue_active|bank_conflicts|Duration|DRAM Throughput" \
    "$out/ncu-$f-$shape.txt" | awk '{print $1, $(NF)}'
done
echo "== SASS mix"; cat "$out/sass-mix.txt"
