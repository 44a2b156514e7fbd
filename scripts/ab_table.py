#!/usr/bin/env python3
"""Summarises an in-run A/B of scripts/ab_bench.sh: per case the device µs of every tree over the
rounds (min–max), each tree's change of its mean against the baseline's, and each tree's geomean.
The baseline is tree A (ab_old.tar) where it was measured, otherwise B (the working tree).

usage: scripts/ab_table.py OUTDIR      (reads OUTDIR/bench-<tree>-<round>.txt)
"""
import glob
import math
import os
import re
import sys


def read_tree(out, tree):
    """{(format, batch, kv): [device µs per round]} from the bench tables of one tree."""
    cases = {}
    for path in sorted(glob.glob(os.path.join(out, f"bench-{tree}-*.txt"))):
        with open(path) as f:
            for line in f:
                cols = line.split()
                if len(cols) < 5 or cols[0] not in ("bf16", "fp8", "mxfp4"):
                    continue
                try:
                    key, device = (cols[0], int(cols[1]), int(cols[2])), float(cols[4])
                except ValueError:  # the geomean table's rows ("fp8 8 …") have no kv column
                    continue
                cases.setdefault(key, []).append(device)
    return cases


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def mean(xs):
    return sum(xs) / len(xs)


def span(v):
    return f"{min(v):.1f}–{max(v):.1f}" if len(v) > 1 else f"{v[0]:.1f}"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    names = sorted({m.group(1) for p in glob.glob(os.path.join(out, "bench-*-*.txt"))
                    if (m := re.match(r"bench-(.+)-\d+\.txt$", os.path.basename(p)))})
    if not names:
        sys.exit(f"no bench-<tree>-<round>.txt in {out}")
    base = next((n for n in ("A", "B") if n in names), names[0])
    others = [n for n in names if n != base]
    trees = {n: read_tree(out, n) for n in names}
    keys = [k for k in trees[base] if all(k in trees[n] for n in others)]
    if not keys:
        sys.exit(f"no case measured by every tree in {out}")
    head = f"{'case':<18} {base + ' µs':>12}" + "".join(f" {n + ' µs':>12} {'vs ' + base:>7}" for n in others)
    print(head)
    for fmt in ("bf16", "fp8", "mxfp4"):
        rows = [k for k in keys if k[0] == fmt]
        if not rows:
            continue
        for k in rows:
            mb = mean(trees[base][k])
            line = f"{fmt + ' ' + str(k[1]) + 'x' + str(k[2]):<18} {span(trees[base][k]):>12}"
            for n in others:
                line += f" {span(trees[n][k]):>12} {100 * (mean(trees[n][k]) / mb - 1):+6.1f}%"
            print(line)
        gb = geomean([mean(trees[base][k]) for k in rows])
        line = f"{fmt + ' geomean':<18} {gb:>12.1f}"
        for n in others:
            g = geomean([mean(trees[n][k]) for k in rows])
            line += f" {g:>12.1f} {100 * (g / gb - 1):+6.1f}%"
        print(line)


if __name__ == "__main__":
    main()
