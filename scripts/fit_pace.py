#!/usr/bin/env python3
"""Fits the planner's simulated MXFP4 launch (LaunchPace, src/host/planner.h) to measured lists.

Reads bench/pace/mxfp4_lists.txt (the work lists of five H200 A/B calls, one per tree and case) and
bench/pace/mxfp4_measured.txt (their device µs; C7 and C8 measured after the fit of C1–C6), simulates every list with mla_pace_sim (the
library's simulated_launch_us), and minimises, by Nelder–Mead from START, the squared log error of
each list (weight 0.3) plus that of each tree's ratio to its call's baseline tree. Prints the
parameters, the mean and largest error, how many measured pairs (differing by >= 1.5 %) the
simulation ranks as measured, and, choosing per case the measured list the simulation prices
lowest, the geomean change against the planner in force when each call ran.
Needs numpy and scipy (pip install numpy scipy).

usage: scripts/fit_pace.py BUILD_DIR [--train C1,C3,C4] [--start p,q,item,lat,launch,merge,partial,split] [--eval]
"""
import argparse
import collections
import math
import os
import subprocess

from scipy.optimize import minimize

NAMES = ["paired_tile_us", "lone_tile_us", "item_tiles", "item_latency_us", "launch_us", "cluster_merge_us",
         "partial_us", "split_request_us"]
HEAD_TREE = {"C3": "2", "C4": "1", "C5": "0", "C6": "0", "C7": "0"}  # each call's tree that is v128's planner


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--train", default="", help="calls to fit on (default: all)")
    ap.add_argument("--start", default="2.78,1.77,1,1.5,8,1,0.005,0.01")
    ap.add_argument("--eval", action="store_true", help="report on START without fitting")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lists = open(os.path.join(root, "bench/pace/mxfp4_lists.txt")).read()
    meas = {}
    for line in open(os.path.join(root, "bench/pace/mxfp4_measured.txt")):
        if not line.startswith("C"):
            continue
        f = line.split()
        base = float(f[2])
        for t, v in enumerate([base] + [base * (1 + float(x) / 100) for x in f[3:]]):
            meas[f"{f[0]}/{f[1]}/{t}"] = v
    train = set(a.train.split(",")) if a.train else None
    sim_bin = os.path.join(a.build_dir, "mla_pace_sim")

    def simulate(x):
        out = subprocess.run([sim_bin] + [f"{v:.6f}" for v in x], input=lists, capture_output=True, text=True,
                             check=True).stdout
        return {l.split()[0]: float(l.split()[1]) for l in out.strip().split("\n")}

    def loss(x):
        if min(x) < 0:
            return 1e9
        pr = simulate(x)
        err, n = 0.0, 0
        for k, v in meas.items():
            call, case, t = k.split("/")
            if train and call not in train:
                continue
            e = math.log(pr[k] / v)
            err += 0.3 * e * e
            n += 1
            if t != "0":
                b = f"{call}/{case}/0"
                e2 = math.log(pr[k] / pr[b]) - math.log(v / meas[b])
                err += e2 * e2
        return err / n

    x0 = [float(v) for v in a.start.split(",")]
    if a.eval:
        x, fun = x0, loss(x0)
    else:
        res = minimize(loss, x0, method="Nelder-Mead", options={"maxiter": 1500, "xatol": 1e-3, "fatol": 1e-7})
        x, fun = res.x, res.fun
    print("%s (loss %.3g):" % ("at START" if a.eval else "fit", fun))
    for n, v in zip(NAMES, x):
        print(f"  {n:18s} {v:.4f}")
    pr = simulate(x)
    errs = [abs(math.log(pr[k] / v)) for k, v in meas.items()]
    agree = total = 0
    for k, v in meas.items():
        call, case, t = k.split("/")
        if t == "0":
            continue
        b = f"{call}/{case}/0"
        m, p = v / meas[b] - 1, pr[k] / pr[b] - 1
        if abs(m) >= 0.015 or abs(p) >= 0.015:
            total += 1
            agree += (m > 0) == (p > 0) or abs(m - p) < 0.015
    print("mean error %.2f %%, largest %.1f %%; %d of %d measured pairs ranked as measured"
          % (100 * sum(errs) / len(errs), 100 * max(errs), agree, total))
    groups = collections.defaultdict(list)
    for k in meas:
        call, case, t = k.split("/")
        groups[(call, case)].append(t)
    log_gain, n = 0.0, 0
    for (call, case), trees in groups.items():
        if call not in HEAD_TREE:
            continue
        pick = min(trees, key=lambda t: pr[f"{call}/{case}/{t}"])
        log_gain += math.log(meas[f"{call}/{case}/{pick}"] / meas[f"{call}/{case}/{HEAD_TREE[call]}"])
        n += 1
    print("choosing by the simulation among each case's measured lists: %+.2f %% geomean against v128's"
          " lists (%d cases)" % (100 * (math.exp(log_gain / n) - 1), n))


if __name__ == "__main__":
    main()
