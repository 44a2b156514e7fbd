#!/usr/bin/env bash
# CUDA compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER): runs the compile, passes its output on, and
# fails it
# * when ptxas reports serialized wgmma (C7514, C7515, …: "wgmma.mma_async instructions are
#   serialized"). ptxas prints that as info, so -Werror does not catch it, yet it slows every wgmma of
#   the kernel (perf-notes v22, v88);
# * when the SASS holds a memory instruction whose 64-bit descriptor is an odd uniform register
#   (desc[UR1]): CUDA 13.0's ptxas emits that for some cp.async under an L2 policy, and it is an
#   illegal instruction at run time (primitives.h; perf-notes session 37). This check needs nvdisasm:
#   $MLA_NVDISASM, nvdisasm on the PATH, or .deps/nvdisasm (the PyPI package nvidia-cuda-nvdisasm,
#   which .ci/run installs); without one it is skipped.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
nvdisasm=${MLA_NVDISASM:-$(command -v nvdisasm || true)}
[ -z "$nvdisasm" ] && [ -x "$root/.deps/nvdisasm/nvidia/cu13/bin/nvdisasm" ] && nvdisasm=$root/.deps/nvdisasm/nvidia/cu13/bin/nvdisasm
keep=""
if [ -n "$nvdisasm" ] && [[ " $* " == *" -c "* ]]; then
  keep=$(mktemp -d)
  trap 'rm -rf "$keep"' EXIT
  set -- "$@" --keep --keep-dir "$keep"
fi
out=$("$@" 2>&1)
rc=$?
[ -n "$out" ] && printf '%s\n' "$out" >&2
[ $rc -ne 0 ] && exit $rc
if grep -q "wgmma.mma_async instructions are serialized" <<<"$out"; then
  echo "error: ptxas serialized wgmma instructions (the C75xx line above); see perf-notes v88" >&2
  exit 1
fi
if [ -n "$keep" ]; then
  cubins=("$keep"/*.cubin)
  if [ ! -f "${cubins[0]}" ]; then
    echo "error: the SASS check found no cubin in nvcc's --keep-dir (cmake/cuda_compile_check.sh)" >&2
    exit 1
  fi
  for cubin in "${cubins[@]}"; do
    if ! sass=$("$nvdisasm" -c "$cubin" 2>&1); then
      printf '%s\n' "$sass" | tail -5 >&2
      echo "error: $nvdisasm failed on $(basename "$cubin") (the SASS check; MLA_NVDISASM picks another)" >&2
      exit 1
    fi
    bad=$(grep -E 'desc\[UR[0-9]*[13579]\]' <<<"$sass")
    if [ -n "$bad" ]; then
      printf '%s\n' "$bad" | head -5 >&2
      echo "error: $(basename "$cubin"): $(wc -l <<<"$bad") instructions take an odd uniform register as their 64-bit" \
        "descriptor (above): an illegal instruction at run time (ptxas 13.0's cp.async under an L2 policy;" \
        "primitives.h)" >&2
      exit 1
    fi
  done
fi
exit 0
