#!/usr/bin/env python3
"""Checks an `mla bench --json` result against every line of the speed goal (issue 4).

usage: scripts/issue4_goals.py bench/results/FILE.json
Exit status 0 when every goal is met. FlashMLA's device times are SPEC §4's table (H200,
2026-11-29, bf16 KV, page 64, main + combine kernels).
"""
import json
import math
import sys

FLASHMLA_US = {(4, 1024): 12.1, (4, 8192): 25.5, (32, 1024): 24.8, (32, 8192): 89.8,
               (64, 1024): 37.9, (64, 8192): 157.5, (256, 1024): 91.9, (256, 8192): 573.9}
GEOMEAN_RATIO = {"bf16": 1.10, "fp8": 1.15, "mxfp4": 1.25}
BANDWIDTH_FRACTION = {"bf16": 0.97, "fp8": 0.95, "mxfp4": 0.90}
CALL_SLACK_US = 3.0
LARGE = (256, 8192)  # the shape of the bandwidth line


def geomean_ratio(cases, fmt):
    """A format's geomean device time over its cases, as a multiple of the floor's geomean."""
    cs = [c for c in cases if c["format"] == fmt]
    g = lambda k: math.exp(sum(math.log(c[k]) for c in cs) / len(cs))
    return g("device_us") / g("floor_device_us")


def bandwidth_fraction(case):
    """The floor's device time over the case's: its share of the floor's bandwidth."""
    return case["floor_device_us"] / case["device_us"]


def ahead_of_flashmla(case):
    """Whether the case beats FlashMLA's bf16 time at its shape (None: no peer time there)."""
    peer = FLASHMLA_US.get((case["batch"], case["kv_len"]))
    return None if peer is None else case["device_us"] < peer


def main(path):
    d = json.load(open(path))
    if d.get("s_q", 1) != 1:
        print(f"{path}: a run at s_q {d['s_q']} (mla bench --s-q); the goal is judged on SPEC §4's suite, s_q 1")
        return 2
    cases = d["cases"]
    ok = True

    def report(passed, text):
        nonlocal ok
        ok = ok and passed
        print(("PASS " if passed else "FAIL ") + text)

    for fmt, bound in GEOMEAN_RATIO.items():
        ratio = geomean_ratio(cases, fmt)
        report(ratio <= bound, f"{fmt}: geomean device / floor = {ratio:.3f} (goal <= {bound})")
    for c in cases:
        ahead = ahead_of_flashmla(c)
        if ahead is not None:
            key = (c["batch"], c["kv_len"])
            report(ahead, f"{c['format']} {key[0]}x{key[1]}: {c['device_us']:.1f} us vs FlashMLA {FLASHMLA_US[key]} us")
    for c in cases:
        if (c["batch"], c["kv_len"]) == LARGE:
            frac = bandwidth_fraction(c)
            bound = BANDWIDTH_FRACTION[c["format"]]
            report(frac >= bound, f"{c['format']} 256x8192: {100 * frac:.1f} % of the floor's bandwidth (goal >= {100 * bound:.0f} %)")
    for c in cases:
        over = c["call_us"] - c["floor_call_us"]
        report(over <= CALL_SLACK_US, f"{c['format']} {c['batch']}x{c['kv_len']}: call {c['call_us']:.1f} us, "
                                      f"floor call {c['floor_call_us']:.1f} us (+{over:.1f}, goal <= +{CALL_SLACK_US})")
    bad = [c for c in cases if not (c["relerr"] <= 4e-3)]
    report(not bad, f"relerr <= 4e-3 in every case ({len(cases) - len(bad)} of {len(cases)})")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
