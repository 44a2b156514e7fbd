#!/usr/bin/env python3
"""Fits bf16's whole-requests model (kWholeRequests in src/host/planner.h; perf-notes v133) to lists
measured by mla_list_bench (bench/pace/bf16_*.txt), by least squares:

  a launch of N whole requests, a CTA each, copied by TMA (uniform cases of 66 < N <= 88 requests):
      whole_us  = fixed + tile_us * L + request_us * N        (L: a request's tiles of 64 tokens)
  the plan's walking list (uniform cases of 60 < N <= 100 requests whose plan walks):
      walked_us = walked_fixed + N * L / (tiles_per_slot_us * 132)

Prints both fits, each list's error, and for the uniform cases in the window the model's choice
(whole where whole_us <= 98 % of walked_us) against the plan's list, as measured.

usage: scripts/fit_whole_requests.py FILE...   (e.g. bench/pace/bf16_a.txt bf16_b.txt bf16_c.txt)
"""
import math
import statistics
import sys

import numpy as np

import list_bench_files

SLOTS = 132
TILE = 64


def cases(paths):
    """Per uniform case: (file, N, L tiles, best whole-by-TMA µs or None, plan µs, whether the plan walks)."""
    out = []
    for path in paths:
        meas, _, walking = list_bench_files.read(path)
        for m in meas.values():
            m["us"] = statistics.mean(m["rounds"])
        names = sorted({list_bench_files.case_of(k) for k in meas})
        for c in names:
            n, length = c.split("x")
            if not length.isdigit():
                continue  # ragged
            n, tiles = int(n), (int(length) + TILE - 1) // TILE
            ks = [k for k in meas if list_bench_files.case_of(k) == c]
            whole = [meas[k]["us"] for k in ks
                     if meas[k]["items"] == n and meas[k]["partials"] == 0 and meas[k]["tma"] and k not in walking]
            plan = c + "/0"
            out.append((path, n, tiles, min(whole) if whole else None, meas[plan]["us"], plan in walking))
    return out


def main():
    rows = cases(sys.argv[1:])
    w = [(n, t, us) for _, n, t, us, _, _ in rows if us and 66 < n <= 88]
    a = np.array([[1.0, t, n] for n, t, _ in w])
    cw = np.linalg.lstsq(a, np.array([us for *_, us in w]), rcond=None)[0]
    print("whole_us  = %.2f + %.3f L + %.3f N   (%d lists)" % (cw[0], cw[1], cw[2], len(w)))
    for (n, t, us), p in zip(w, a @ cw):
        print("  %3d x %3d tiles  measured %7.1f  model %7.1f  %+5.1f %%" % (n, t, us, p, 100 * (p / us - 1)))
    k = [(n, t, us) for _, n, t, _, us, walks in rows if walks and 60 < n <= 100]
    b = np.array([[1.0, n * t] for n, t, _ in k])
    ck = np.linalg.lstsq(b, np.array([us for *_, us in k]), rcond=None)[0]
    print("walked_us = %.2f + N L / (%.4f x %d)   (%d lists)" % (ck[0], 1 / (ck[1] * SLOTS), SLOTS, len(k)))
    for (n, t, us), p in zip(k, b @ ck):
        print("  %3d x %3d tiles  measured %7.1f  model %7.1f  %+5.1f %%" % (n, t, us, p, 100 * (p / us - 1)))
    print("window (%d < N <= %d, L >= 24 tiles): the model's choice against the plan's walking list" %
          (SLOTS // 2, SLOTS * 64 // 100))
    logs = []
    for path, n, t, whole, plan, walks in rows:
        if not (SLOTS < 2 * n and 100 * n <= 64 * SLOTS and t >= 24 and walks and whole):
            continue
        wm = cw[0] + cw[1] * t + cw[2] * n
        km = ck[0] + ck[1] * n * t
        pick = whole if wm <= 0.98 * km else plan
        logs.append(math.log(pick / plan))
        print("  %-22s %3d x %3d  %s  %+5.1f %%" % (path.split("/")[-1], n, t, "whole " if pick is whole else "walked",
                                                 100 * (pick / plan - 1)))
    if logs:
        print("  geomean %+.2f %% over %d cases" % (100 * (math.exp(sum(logs) / len(logs)) - 1), len(logs)))


if __name__ == "__main__":
    main()
