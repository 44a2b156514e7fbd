#!/usr/bin/env bash
# CUDA compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER): runs the compile, passes its output on, and
# fails it when ptxas reports serialized wgmma (C7514, C7515, …: "wgmma.mma_async instructions are
# serialized"). ptxas prints that as info, so -Werror does not catch it, yet it slows every wgmma of
# the kernel (perf-notes v22, v88).
out=$("$@" 2>&1)
rc=$?
[ -n "$out" ] && printf '%s\n' "$out" >&2
[ $rc -ne 0 ] && exit $rc
if grep -q "wgmma.mma_async instructions are serialized" <<<"$out"; then
  echo "error: ptxas serialized wgmma instructions (the C75xx line above); see perf-notes v88" >&2
  exit 1
fi
exit 0
