#!/usr/bin/env bash
# Test of cmake/cuda_compile_check.sh, the CUDA compiler launcher (argument: its path). Fake
# compilers stand in for nvcc: the launcher must pass their output and exit status on, and fail a
# compile that succeeded but whose ptxas output reports serialized wgmma instructions.
set -uo pipefail

CHECK=${1:?usage: cuda_compile_check.sh /path/to/cmake/cuda_compile_check.sh}
[[ -x "$CHECK" ]] || { echo "FAIL: $CHECK is not executable" >&2; exit 1; }
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }

# expect NAME STATUS PATTERN -- COMMAND...: the launcher's exit status is STATUS and its output
# (stdout and stderr) matches PATTERN (grep -E; empty: no check).
expect() {
  local name=$1 status=$2 pattern=$3
  shift 4
  local out rc
  out=$("$CHECK" "$@" 2>&1)
  rc=$?
  [[ $rc -eq $status ]] || fail "$name: exit $rc, expected $status (output: $out)"
  if [[ -n "$pattern" ]] && ! grep -qE "$pattern" <<<"$out"; then fail "$name: output lacks /$pattern/: $out"; fi
}

SERIALIZED="ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function 'k'"

expect "silent success" 0 "" -- true
expect "resource report passes" 0 "Used 240 registers" -- echo "ptxas info    : Used 240 registers, used 1 barriers"
expect "failure keeps its status" 3 "error: bad" -- bash -c 'echo "error: bad" >&2; exit 3'
expect "serialized wgmma fails" 1 "serialized wgmma instructions" -- echo "$SERIALIZED"
expect "the ptxas line is shown" 1 "C7514" -- bash -c "echo \"$SERIALIZED\" >&2"
expect "other ptxas info passes" 0 "Compile time" -- echo "ptxas info    : Compile time = 488.561 ms"

if [[ $FAILS -ne 0 ]]; then
  echo "$FAILS check(s) failed"
  exit 1
fi
echo "cuda_compile_check.sh: all checks passed"
