#!/usr/bin/env python3
"""Summarises an in-run A/B of scripts/ab_bench.sh: per case the device µs of tree A and tree B
over the rounds (min–max), the change of B's mean against A's, and each tree's geomean.

usage: scripts/ab_table.py OUTDIR      (reads OUTDIR/bench-A-<round>.txt and bench-B-<round>.txt)
"""
import glob
import math
import os
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    a, b = read_tree(out, "A"), read_tree(out, "B")
    keys = [k for k in a if k in b]
    if not keys:
        sys.exit(f"no case measured by both trees in {out}")
    print(f"{'case':<18} {'A device µs':>14} {'B device µs':>14} {'B vs A':>8}")
    for fmt in ("bf16", "fp8", "mxfp4"):
        rows = [k for k in keys if k[0] == fmt]
        if not rows:
            continue
        for k in rows:
            ma, mb = sum(a[k]) / len(a[k]), sum(b[k]) / len(b[k])
            span = lambda v: f"{min(v):.1f}–{max(v):.1f}" if len(v) > 1 else f"{v[0]:.1f}"
            case = f"{fmt} {k[1]}x{k[2]}"
            print(f"{case:<18} {span(a[k]):>14} {span(b[k]):>14} {100 * (mb / ma - 1):+7.1f}%")
        ga = geomean([sum(a[k]) / len(a[k]) for k in rows])
        gb = geomean([sum(b[k]) / len(b[k]) for k in rows])
        print(f"{fmt + ' geomean':<18} {ga:>14.1f} {gb:>14.1f} {100 * (gb / ga - 1):+7.1f}%")


if __name__ == "__main__":
    main()
