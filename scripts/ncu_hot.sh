#!/usr/bin/env bash
# Where a decode kernel's warps stall, per SASS instruction: ncu's warp-state sampling for one
# launch at the shortest sampling interval (2^5 cycles: enough samples for a 20 µs kernel),
# summarised by scripts/ncu_hot.py (top instructions by samples, samples by opcode and reason).
#   usage: scripts/ncu_hot.sh OUTDIR FORMAT SHAPE     (on the H200 machine, after a build in build-gpu)
set -uo pipefail
out=${1:?usage: scripts/ncu_hot.sh OUTDIR FORMAT SHAPE}
fmt=${2:-mxfp4}
shape=${3:-256x8192}
mkdir -p "$out"
cd "$(dirname "$0")/.."
rep="$out/hot-$fmt-$shape"
ncu --clock-control none --warp-sampling-interval 0 -k regex:decode -c 1 --section SourceCounters --section WarpStateStats -f -o "$rep" \
  ./build-gpu/mla bench --format "$fmt" --shapes "$shape" --reps 2 --check-requests 1 >"$rep.log" 2>&1
ncu -i "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>>"$rep.log"
python3 scripts/ncu_hot.py "$rep.csv" | tee "$rep.txt"
