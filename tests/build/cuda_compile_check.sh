#!/usr/bin/env bash
# Test of cmake/cuda_compile_check.sh, the CUDA compiler launcher (argument: its path). Fake
# compilers stand in for nvcc: the launcher must pass their output and exit status on, and fail a
# compile that succeeded but whose ptxas output reports serialized wgmma instructions, or whose SASS
# (a fake cubin in the launcher's --keep-dir, read by a fake nvdisasm) takes an odd uniform register as
# a 64-bit descriptor.
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

# The SASS check: a fake nvcc that writes its SASS line as the cubin into --keep-dir, and a fake
# nvdisasm that prints it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/nvcc" <<'FAKE'
#!/usr/bin/env bash
sass=$1
shift
dir=""
while [ $# -gt 0 ]; do
  [ "$1" = --keep-dir ] && dir=$2
  shift
done
[ -n "$dir" ] && printf '%s\n' "$sass" >"$dir/k.sm_90a.cubin"
exit 0
FAKE
printf '#!/usr/bin/env bash\ncat "$2"\n' >"$tmp/nvdisasm"
chmod +x "$tmp/nvcc" "$tmp/nvdisasm"
ODD="        /*16e0*/                   LDGSTS.E.BYPASS.128 [R27+UR0], desc[UR1][R24.64], !P4 ;"
EVEN="        /*16e0*/                   LDGSTS.E.BYPASS.128 [R27+UR0], desc[UR4][R24.64], !P4 ;"
export MLA_NVDISASM="$tmp/nvdisasm"
expect "odd descriptor register fails" 1 "odd uniform register" -- "$tmp/nvcc" "$ODD" -c k.cu
expect "the instruction is shown" 1 "desc\[UR1\]" -- "$tmp/nvcc" "$ODD" -c k.cu
expect "even descriptor register passes" 0 "" -- "$tmp/nvcc" "$EVEN" -c k.cu
expect "no SASS check without -c" 0 "" -- "$tmp/nvcc" "$ODD"
printf '#!/usr/bin/env bash\necho "nvdisasm: cannot read" >&2\nexit 3\n' >"$tmp/nvdisasm-broken"
chmod +x "$tmp/nvdisasm-broken"
MLA_NVDISASM="$tmp/nvdisasm-broken" expect "a failing nvdisasm fails" 1 "failed on k.sm_90a.cubin" -- "$tmp/nvcc" "$EVEN" -c k.cu
expect "no cubin fails" 1 "found no cubin" -- true -c k.cu
unset MLA_NVDISASM

if [[ $FAILS -ne 0 ]]; then
  echo "$FAILS check(s) failed"
  exit 1
fi
echo "cuda_compile_check.sh: all checks passed"
