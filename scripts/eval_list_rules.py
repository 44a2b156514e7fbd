#!/usr/bin/env python3
"""Looks up each rule's list (mla_list_rules) among the lists mla_list_bench measured (bench/pace/*.txt:
L lines, a CTA per item) and prints, per rule, the geomean against each case's list 0 (the plan of the
run), the worst case, and the fastest list measured — over the ragged cases (BxLrS, BxLhS, BxLqS), or
with --uniform over the others. perf-notes v134 chose bf16's ragged rule ("sim") this way.

usage: scripts/eval_list_rules.py BUILD_DIR FILE... [--uniform] [--show RULE]
"""
import argparse
import collections
import math
import os
import statistics
import subprocess

import list_bench_files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--uniform", action="store_true")
    ap.add_argument("--show", default="")
    a = ap.parse_args()
    measured, plan, best = collections.defaultdict(dict), {}, {}
    for path in a.files:
        measured_here, list_lines, _ = list_bench_files.read(path)
        for k, m in measured_here.items():
            us, case = statistics.mean(m["rounds"]), list_bench_files.case_of(k)
            best[case] = min(best.get(case, math.inf), us)
            if k.endswith("/0"):
                plan[case] = us
            if k in list_lines:
                f = list_lines[k]
                key = (int(f[1]), int(f[2]), " ".join(f[3:]))
                measured[case][key] = min(measured[case].get(key, math.inf), us)
    cases = [c for c in plan if any(k in c.split("x")[1] for k in "rhq") != a.uniform]
    out = subprocess.run([os.path.join(a.build_dir, "mla_list_rules")] + cases, capture_output=True, text=True,
                         check=True).stdout
    rules = collections.defaultdict(dict)
    for line in out.strip().split("\n"):
        f = line.split()
        rules[f[2]][f[1]] = (int(f[3]), int(f[4]), " ".join(f[5:]))
    for name, lists in rules.items():
        logs = [(math.log(measured[c][lists[c]] / plan[c]), c) for c in cases if lists[c] in measured[c]]
        if not logs:
            continue
        g = math.exp(sum(v for v, _ in logs) / len(logs)) - 1
        w = max(logs)
        print("%-6s %2d of %2d cases measured: %+5.2f %% geomean against list 0, worst %+5.1f %% (%s)" %
              (name, len(logs), len(cases), 100 * g, 100 * (math.exp(w[0]) - 1), w[1]))
        if name == a.show:
            for v, c in sorted(logs):
                print("    %-14s %+5.1f %%  (fastest measured %+5.1f %%)" % (c, 100 * (math.exp(v) - 1),
                                                                           100 * (best[c] / plan[c] - 1)))
    b = [math.log(best[c] / plan[c]) for c in cases]
    print("fastest measured: %+.2f %% geomean over %d cases" % (100 * (math.exp(sum(b) / len(b)) - 1), len(b)))


if __name__ == "__main__":
    main()
