#!/usr/bin/env bash
# One command for the H200 machine (bare, no network): builds for sm_90a, runs the GPU and unit
# tests, 300 random cases (mla check --random), compute-sanitizer memcheck + racecheck on a small suite, `mla bench` on SPEC §4's 24 cases,
# and `mla bench --s-q 2` at four shapes. Writes bench.json, bench.txt, summary.txt (to commit next to
# the JSON) and logs.tgz (build, test, sanitizer and bench-progress logs, the s_q 2 JSON) into OUTDIR
# and prints a short table last. Fails
# when the GPU tests did not run (no usable GPU).
#   usage: MLA_COMMIT=<hash> scripts/gpu_run.sh OUTDIR
# GoogleTest sources are carried in .deps/googletest (cp -r /usr/src/googletest .deps/). The device
# machine gets the working tree without .git, so pass the commit being measured in MLA_COMMIT
# (e.g. the device command `MLA_COMMIT=c46b244 bash scripts/gpu_run.sh $OUT`): it lands in the JSON.
set -uo pipefail
out=${1:?usage: scripts/gpu_run.sh OUTDIR}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export MLA_COMMIT=${MLA_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
status=0
step() { echo; echo "=== $* ($(date +%T))"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"

step "build"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMLA_GTEST_SOURCE="$root/.deps/googletest" \
  >"$out/build.log" 2>&1 && cmake --build build-gpu -j"$(nproc)" >>"$out/build.log" 2>&1
if [ $? -ne 0 ]; then tail -50 "$out/build.log"; echo "BUILD FAILED"; exit 1; fi
grep -E "Compiling entry function|Used [0-9]+ registers|spill stores" "$out/build.log" |
  grep -E -A2 "entry function.*(decode_kernel|decode_fp8_kernel|decode_mxfp4_kernel|combine_kernel)" |
  sed -E -e "s/.*entry function '[^']*(decode_kernel|decode_fp8_kernel|decode_mxfp4_kernel|combine_kernel)[^']*'.*/\1/" | head -24
# ptxas notes wgmma serialization (C7510–C7515) and injected waits/arrives (C7517/C7519) as info only;
# the build itself fails on serialization (cmake/cuda_compile_check.sh), so any count here is the rest.
echo "ptxas wgmma notes (C751x): $(grep -c -E 'C751[0-9]' "$out/build.log")"

step "tests (unit + gpu)"
ctest --test-dir build-gpu --output-on-failure -j4 -E "cli\." >"$out/ctest.log" 2>&1 || status=1
tail -15 "$out/ctest.log"
# GPU tests skip where no sm_90 GPU is usable, and ctest still exits 0 (it lists them as Skipped): here that is a failure.
gpu_skipped=$(grep -c -E "Gpu[A-Za-z]+\.[A-Za-z0-9_]+ .*Skipped" "$out/ctest.log")
gpu_passed=$(grep -c -E "Gpu[A-Za-z]+\.[A-Za-z0-9_]+ .*Passed" "$out/ctest.log")
echo "GPU tests: $gpu_passed passed, $gpu_skipped skipped"
if [ "$gpu_skipped" -ne 0 ] || [ "$gpu_passed" -eq 0 ]; then
  echo "GPU TESTS DID NOT RUN"
  status=1
fi

# Random cases (mla check --random): 300 problems of random shape, layout, s_q and plan flags against
# the float64 reference; the seed follows the commit, so every commit draws other cases and each is
# reproducible (`mla check --random 300 --seed S` on that commit).
step "random cases"
random_seed=$(( 16#$(printf '%s' "$MLA_COMMIT" | tr -cd '0-9a-f' | cut -c1-7)0 / 16 ))
./build-gpu/mla check --backend cuda --random 300 --seed "$random_seed" >"$out/random.txt" 2>&1 || status=1
random_line="random cases (seed $random_seed): $(grep -E "^(OK|FAILED):" "$out/random.txt")"
grep -E " FAIL " "$out/random.txt" | head -10
echo "$random_line"
tail -n 1 "$out/random.txt"

step "compute-sanitizer"
san_status="ok"
for tool in memcheck racecheck; do
  timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 9 build-gpu/mla_gpu_tests --gtest_filter='GpuSanitizer.*' \
    >"$out/sanitizer-$tool.log" 2>&1 || { san_status="FAILED"; status=1; }
  tail -3 "$out/sanitizer-$tool.log"
done

step "bench"
./build-gpu/mla bench --backend cuda --json "$out/bench.json" 2>"$out/bench-progress.log" | tee "$out/bench.txt" ||
  status=1

# Multi-token queries (not SPEC §4's suite): s_q 2 at four shapes, to follow what a second query
# token costs (README, "Multi-token queries"; perf-notes v135).
step "bench s_q 2"
./build-gpu/mla bench --backend cuda --s-q 2 --shapes 4x8192,64x8192,256x1024,256x8192 --reps 30 \
  --json "$out/bench-sq2.json" 2>"$out/bench-sq2-progress.log" >"$out/bench-sq2.txt" || status=1
# Its table rows (not the geomeans): format, shape, device µs.
sq2_rows=$(awk '/^(bf16|fp8|mxfp4) / && NF >= 9 {print "  " $1, $2 "x" $3, $5 ($0 ~ /FAIL/ ? "  FAIL" : "")}' \
  "$out/bench-sq2.txt")
echo "$sq2_rows"

step "summary"
{
  echo "commit $MLA_COMMIT, $(date -u +%Y-%m-%dT%H:%M:%SZ), $SECONDS s"
  cat "$out/gpu.txt"
  grep -E "tests passed|tests failed" "$out/ctest.log"
  echo "GPU tests: $gpu_passed passed, $gpu_skipped skipped"
  echo "$random_line"
  echo "compute-sanitizer: $san_status"
  for tool in memcheck racecheck; do tail -n 1 "$out/sanitizer-$tool.log"; done
  echo "s_q 2 (device µs, 30 reps; bench-sq2.json in logs.tgz):"
  echo "$sq2_rows"
  tail -40 "$out/bench.txt"
} | tee "$out/summary.txt"
# The logs go into one archive, so that OUTDIR holds four files (bench.json, bench.txt, summary.txt,
# logs.tgz): machines that return only a few files return all of them.
logs=(gpu.txt build.log ctest.log random.txt sanitizer-memcheck.log sanitizer-racecheck.log bench-progress.log bench-sq2.json
  bench-sq2.txt bench-sq2-progress.log)
(cd "$out" && tar czf logs.tgz "${logs[@]}" 2>/dev/null && rm -f "${logs[@]}")
exit $status
