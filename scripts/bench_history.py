#!/usr/bin/env python3
"""Writes bench/results/README.md: every committed H200 run of the suite (bench/results/h200-*.json),
newest first, against issue 4's lines (the constants of scripts/issue4_goals.py).

usage: scripts/bench_history.py [--check]
--check: exit 1 (and say so) when bench/results/README.md is not what this script writes, so that
the table cannot drift from the JSON files (ctest runs it: test `docs.bench_history`).
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from issue4_goals import (BANDWIDTH_FRACTION, GEOMEAN_RATIO, LARGE, ahead_of_flashmla,  # noqa: E402
                          bandwidth_fraction, geomean_ratio)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
FORMATS = ("bf16", "fp8", "mxfp4")
# The first run with the 256×8192 kernels and plans as they are now (perf-notes v114): the machine
# summary covers the runs from it on. Move it when a change moves those cases.
SINCE = "7074b03"

HEADER = """# Committed H200 runs

Each `h200-DATE-COMMIT.json` is one run of `scripts/gpu_run.sh` on an H200 (`mla bench --json`: SPEC §4's
24 cases, cold L2, the streaming-read floor measured in the same run); `.txt` is its printed table.
(`history/` keeps a few runs of 2026-11-29 in an older JSON layout, and `s_q/` runs at s_q 2 (`mla bench
--s-q`: the suite's shapes beside s_q 1, gpu_run.sh's four shapes) and in-run A/B logs of multi-token
changes; neither is listed here.) This
page is written by `scripts/bench_history.py` from the JSON files alone — do not edit it by hand;
ctest checks that it is current.

Columns: the floor's device time at bf16 256×8192 (the machine: H200s drawn so far come in two
groups, ~525 and ~533 µs, and the group decides bf16's and fp8's lines); the share of the floor's
bandwidth at 256×8192 (floor device µs / device µs; issue 4 asks for {bw}); the geomean device time
over the 8 shapes as a multiple of the floor's (issue 4: {gm}); how many of the 24 cases are faster
than FlashMLA's bf16 time (SPEC §4); whether every case passed its accuracy check. A figure in bold
meets its line.
"""


def load(path):
    d = json.load(open(path))
    if d.get("s_q", 1) != 1:  # not SPEC §4's suite (mla bench --s-q)
        return None
    cases = {(c["format"], c["batch"], c["kv_len"]): c for c in d["cases"]}
    if any((f,) + LARGE not in cases for f in FORMATS):
        return None
    row = {"date": d["date"], "commit": d["commit"], "file": os.path.basename(path),
           "floor": cases[("bf16",) + LARGE]["floor_device_us"], "passed": d.get("all_passed", False)}
    for f in FORMATS:
        row["bw_" + f] = bandwidth_fraction(cases[(f,) + LARGE])
        row["gm_" + f] = geomean_ratio(d["cases"], f)
    peers = [ahead_of_flashmla(c) for c in d["cases"]]
    row["ahead"] = sum(1 for a in peers if a)
    row["cases"] = sum(1 for a in peers if a is not None)
    return row


def bold(text, met):
    return "**%s**" % text if met else text


def render(rows):
    bw = " / ".join("%d %%" % round(100 * BANDWIDTH_FRACTION[f]) for f in FORMATS)
    gm = " / ".join("%.2f" % GEOMEAN_RATIO[f] for f in FORMATS)
    out = [HEADER.format(bw=bw + " for " + " / ".join(FORMATS), gm=gm)]
    by_date = sorted(rows, key=lambda r: r["date"])
    first = next((i for i, r in enumerate(by_date) if r["commit"] == SINCE), None)
    if first is None:
        raise SystemExit("bench_history.py: no run of commit %s (SINCE) among the results" % SINCE)
    recent = by_date[first:]
    groups, last = [], None  # runs whose floors lie within 2 µs of the next one: one kind of machine
    for r in sorted(recent, key=lambda r: r["floor"]):
        if last is None or r["floor"] - last > 2.0:
            groups.append([])
        groups[-1].append(r)
        last = r["floor"]
    out.append("The 256×8192 lines by machine, over the runs since `%s` (the 256×8192 kernels and plans as they are "
               "now): the range of each format's share of the floor's bandwidth, and in how many runs it met its line.\n"
               % SINCE)
    out.append("| floor (bf16 256×8192) | runs | " + " | ".join("%s (≥ %d %%)" % (f, round(100 * BANDWIDTH_FRACTION[f])) for f in FORMATS) + " |")
    out.append("|---|---:|" + "---|" * len(FORMATS))
    for g in groups:
        lo, hi = min(r["floor"] for r in g), max(r["floor"] for r in g)
        cells = []
        for f in FORMATS:
            v = [100 * r["bw_" + f] for r in g]
            met = sum(1 for r in g if r["bw_" + f] >= BANDWIDTH_FRACTION[f])
            cells.append("%.2f–%.2f %%, met in %d" % (min(v), max(v), met))
        out.append("| %.1f–%.1f µs | %d | %s |" % (lo, hi, len(g), " | ".join(cells)))
    out.append("")
    out.append("| date (UTC) | commit | floor µs | " + " | ".join("%s %% bw" % f for f in FORMATS) + " | " +
               " | ".join("%s × floor" % f for f in FORMATS) + " | ahead of FlashMLA | accuracy |")
    out.append("|---|---|---:|" + "---:|" * (2 * len(FORMATS)) + "---:|---|")
    for r in sorted(rows, key=lambda r: r["date"], reverse=True):
        cells = ["%s" % r["date"].replace("T", " ").rstrip("Z"), "[`%s`](%s)" % (r["commit"], r["file"]), "%.1f" % r["floor"]]
        cells += [bold("%.2f" % (100 * r["bw_" + f]), r["bw_" + f] >= BANDWIDTH_FRACTION[f]) for f in FORMATS]
        cells += [bold("%.2f" % r["gm_" + f], r["gm_" + f] <= GEOMEAN_RATIO[f]) for f in FORMATS]
        cells += [bold("%d / %d" % (r["ahead"], r["cases"]), r["ahead"] == r["cases"]),
                  "pass" if r["passed"] else "FAIL"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main():
    rows = [r for r in (load(p) for p in sorted(glob.glob(os.path.join(RESULTS, "h200-*.json")))) if r]
    text = render(rows)
    target = os.path.join(RESULTS, "README.md")
    if "--check" in sys.argv[1:]:
        current = open(target).read() if os.path.exists(target) else ""
        if current != text:
            print("bench/results/README.md is not current: run scripts/bench_history.py")
            return 1
        print("bench/results/README.md lists %d runs" % len(rows))
        return 0
    with open(target, "w") as f:
        f.write(text)
    print("wrote %s: %d runs" % (os.path.relpath(target, ROOT), len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
