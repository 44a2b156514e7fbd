#!/usr/bin/env python3
"""How far ahead of its first use each shared-memory load of a kernel's main loop issues.

ptxas places loads where its register budget lets it, not where the source puts them: a load read
a few instructions later stalls its warp for the whole load latency (~30 cycles for ldmatrix), and
with two warps per scheduler nothing hides it (perf-notes v56, v58). This reads SASS as printed by
`nvdisasm -c` or `cuobjdump -sass`, takes the longest backward branch as the main loop (or the range
given) and prints, per load, the distance in instructions to the first instruction that reads one of
its destination registers, and the loop's size and opcode counts.

  usage: sass_loads.py FILE.sass [--pattern REGEX] [--range FIRST LAST]
  SASS here (no GPU): nvcc -cubin ... -o k.cubin, then nvdisasm -c k.cubin (the nvdisasm binary is
  in the PyPI wheel nvidia-cuda-nvdisasm); on the H200 machine: cuobjdump -sass build-gpu/...
"""
import argparse
import collections
import re

ap = argparse.ArgumentParser()
ap.add_argument("sass")
ap.add_argument("--pattern", default=r"^(LDSM|LDS)\b", help="opcodes to follow (regex on the opcode)")
ap.add_argument("--range", nargs=2, type=int, metavar=("FIRST", "LAST"), help="instruction indices")
ap.add_argument("--near", type=int, default=1000, help="only print loads read within this many instructions")
args = ap.parse_args()

ins, labels = [], {}
for line in open(args.sass):
    m = re.match(r"\s*(\.L_x_\d+):", line)
    if m:
        labels[m.group(1)] = len(ins)
        continue
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m:
        ins.append(m.group(2).strip())


def opcode(t):
    parts = t.split()
    return parts[1] if parts[0].startswith("@") else parts[0]


def regs(text):  # general registers only (not UR, not predicates)
    return re.findall(r"(?<![A-Za-z])R(\d+)", text)


if args.range:
    first, last = args.range
else:  # the backward branch around the most matrix instructions (the smallest such range on a tie)
    first, last = 0, len(ins) - 1
    best = (-1, 0)
    for i, t in enumerate(ins):
        m = re.search(r"BRA.*?(\.L_x_\d+)", t)
        if m and labels.get(m.group(1), 1 << 30) < i:
            a = labels[m.group(1)]
            mma = sum(1 for u in ins[a : i + 1] if re.match(r"(@\S+\s+)?(HGMMA|QGMMA|HMMA)", u))
            if (mma, -(i - a)) > best:
                best, first, last = (mma, -(i - a)), a, i
print(f"loop: instructions {first}..{last} ({last - first + 1})")

for i in range(first, last + 1):
    t = ins[i]
    op = opcode(t)
    if not re.search(args.pattern, op):
        continue
    dst = regs(t.split(",")[0])
    if not dst:
        continue
    width = 4 if ("LDSM" in op and ".4" in op) or ".128" in op else 2 if ("LDSM" in op and ".2" in op) or ".64" in op else 1
    live = {int(dst[0]) + k for k in range(width)}
    for j in range(i + 1, min(last + 1, i + 1 + args.near)):
        body = ins[j].split(None, 1)
        if ins[j].startswith("@"):
            body = ins[j].split(None, 2)[1:]
        srcs = body[1].split(",", 1)[1] if len(body) > 1 and "," in body[1] else (body[1] if len(body) > 1 else "")
        if opcode(ins[j]).startswith(("HGMMA", "STSM", "STS", "ST.", "STG")):
            srcs = body[1] if len(body) > 1 else ""  # stores and wgmma read their first operands too
        if live & {int(r) for r in regs(srcs)}:
            print(f"{i:6d} {t[:56]:56s} first read +{j - i}: {ins[j][:48]}")
            break

counts = collections.Counter(opcode(t).split(".")[0] for t in ins[first : last + 1])
print("opcodes:", ", ".join(f"{k} {v}" for k, v in counts.most_common(12)))
