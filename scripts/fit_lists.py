#!/usr/bin/env python3
"""Fits the planner's simulated launch (LaunchPace, src/host/planner.h) to lists measured by
mla_list_bench (bench/pace/list_bench.cpp: every list the planner weighs for a case, timed in one run).

Reads M (measurement) and L (list) lines from FILES, simulates every list with mla_pace_sim (the
library's simulated_launch_us, nine numbers: the eighth of LaunchPace and its DRAM bound), and
minimises by Nelder-Mead from START the squared log error of each list against its case's plan list
(list 0) plus 0.3 x that of the list itself. Prints the parameters, the mean and largest error, how
many pairs (a list against its case's list 0, differing by >= 1 % measured or simulated) the
simulation ranks as measured, and, choosing per case the list the simulation prices lowest, the
geomean change against list 0 (and the best any choice among the measured lists could do).
--train EVEN|ODD fits on every other case and reports on the rest too. Needs scipy.

usage: scripts/fit_lists.py BUILD_DIR FILE... [--start 9 numbers] [--eval] [--train even|odd] [--fixed i,j]
       scripts/fit_lists.py BUILD_DIR FILE... --one-cta --median [--start 11 numbers] …   (bf16)
"""
import argparse
import math
import os
import subprocess

import list_bench_files

from scipy.optimize import minimize

NAMES = ["paired_tile_us", "lone_tile_us", "item_tiles", "item_latency_us", "launch_us", "cluster_merge_us",
         "partial_us", "split_request_us", "dram_tiles_per_us"]
ONE_CTA_NAMES = ["tile_us", "tma_factor", "walk_factor", "item_latency_us", "item_tiles", "walk_item_tiles",
                 "launch_us", "cluster_merge_us", "partial_us", "split_request_us", "dram_tiles_per_us"]


def read(files, one_cta=False, median=False):
    """Measurements (the mean of the rounds, or their median), the lists in mla_pace_sim's input
    format (with one_cta: "label tma clustered partials splits grid" then the items or chains), the cases."""
    meas, lists, cases = {}, [], []
    for path in files:
        tag = os.path.basename(path).split(".")[0]
        measured, list_lines, walk_lines = list_bench_files.read(path)
        for k, m in measured.items():
            label = f"{tag}:{k}"
            us = sorted(m["rounds"])
            meas[label] = us[len(us) // 2] if median else sum(us) / len(us)
            if list_bench_files.case_of(label) not in cases:
                cases.append(list_bench_files.case_of(label))
            tma = str(m["tma"])
            if k in list_lines:
                f = list_lines[k]  # clustered partials splits runs…
                lists.append(" ".join([label] + f) if not one_cta else " ".join([label, tma] + f[:3] + ["0"] + f[3:]))
            elif k in walk_lines and one_cta:
                f = walk_lines[k]  # grid partials splits | runs…
                lists.append(" ".join([label, tma, "0", f[1], f[2], f[0]] + f[3:]))
    if not one_cta:  # (walking lists need --one-cta)
        keep = {l.split()[0] for l in lists}
        meas = {k: v for k, v in meas.items() if k in keep}
    return meas, "\n".join(lists) + "\n", cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--start", default="2.3,1.6,1,1.5,6,1,0.005,0.01,116")
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--train", default="", help="even or odd: fit on every other case")
    ap.add_argument("--fixed", default="", help="indices of parameters kept at START")
    ap.add_argument("--one-cta", action="store_true", help="bf16: simulated_one_cta_us (OneCtaPace), W lines too")
    ap.add_argument("--median", action="store_true", help="a list's µs: the median of its rounds, not the mean")
    a = ap.parse_args()
    meas, lists, cases = read(a.files, a.one_cta, a.median)
    sim_bin = os.path.join(a.build_dir, "mla_pace_sim")
    mode = ["--one-cta"] if a.one_cta else []
    names = ONE_CTA_NAMES if a.one_cta else NAMES
    x0 = [float(v) for v in a.start.split(",")]
    fixed = {int(i) for i in a.fixed.split(",") if i}
    free = [i for i in range(len(x0)) if i not in fixed]
    train = set(cases[0 if a.train == "even" else 1::2]) if a.train else set(cases)

    def full(y):
        x = list(x0)
        for i, v in zip(free, y):
            x[i] = v
        return x

    def simulate(x):
        out = subprocess.run([sim_bin] + mode + [f"{v:.6f}" for v in x], input=lists, capture_output=True, text=True,
                             check=True).stdout
        return {l.split()[0]: float(l.split()[1]) for l in out.strip().split("\n")}

    def loss(y):
        x = full(y)
        if min(x) < 0:
            return 1e9
        pr = simulate(x)
        err, n = 0.0, 0
        for k, v in meas.items():
            case = k.rsplit("/", 1)[0]
            if case not in train:
                continue
            b = case + "/0"
            e = math.log(pr[k] / v)
            e2 = math.log(pr[k] / pr[b]) - math.log(v / meas[b])
            err += 0.3 * e * e + e2 * e2
            n += 1
        return err / n

    if a.eval:
        x, fun = x0, loss([x0[i] for i in free])
    else:
        res = minimize(loss, [x0[i] for i in free], method="Nelder-Mead",
                       options={"maxiter": 3000, "xatol": 1e-3, "fatol": 1e-8})
        x, fun = full(res.x), res.fun
    print("%s (loss %.3g):" % ("at START" if a.eval else "fit", fun))
    print("  " + ",".join(f"{v:.4g}" for v in x))
    for n, v in zip(names, x):
        print(f"  {n:18s} {v:.4f}")
    pr = simulate(x)
    for part, keep in (("train", train), ("held out", set(cases) - train)):
        ks = [k for k in meas if k.rsplit("/", 1)[0] in keep]
        if not ks:
            continue
        errs = [abs(math.log(pr[k] / meas[k])) for k in ks]
        agree = total = 0
        for k in ks:
            b = k.rsplit("/", 1)[0] + "/0"
            if k == b:
                continue
            m, p = meas[k] / meas[b] - 1, pr[k] / pr[b] - 1
            if abs(m) >= 0.01 or abs(p) >= 0.01:
                total += 1
                agree += (m > 0) == (p > 0) or abs(m - p) < 0.01
        pick_gain = best_gain = 0.0
        worst = (0.0, "")
        cs = [c for c in cases if c in keep]
        for c in cs:
            mine = [k for k in ks if k.rsplit("/", 1)[0] == c]
            pick = min(mine, key=lambda k: pr[k])
            g = math.log(meas[pick] / meas[c + "/0"])
            pick_gain += g
            best_gain += math.log(min(meas[k] for k in mine) / meas[c + "/0"])
            worst = max(worst, (g, pick))
        print("%s: %d lists, mean error %.2f %%, largest %.1f %%; %d of %d pairs ranked as measured; choosing by the"
              " simulation %+.2f %% geomean against list 0 (best possible %+.2f %%; %d cases; worst pick %+.1f %% %s)"
              % (part, len(ks), 100 * sum(errs) / len(errs), 100 * max(errs), agree, total,
                 100 * (math.exp(pick_gain / len(cs)) - 1), 100 * (math.exp(best_gain / len(cs)) - 1), len(cs),
                 100 * (math.exp(worst[0]) - 1), worst[1]))


if __name__ == "__main__":
    main()
