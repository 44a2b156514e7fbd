#!/usr/bin/env python3
"""Renders an `mla bench --json` result as the Markdown table the README carries.

usage: scripts/bench_table.py bench/results/FILE.json [--readme README.md]
With --readme, replaces the block between the README's bench-table markers in place.
"""
import json
import math
import sys

BEGIN = "<!-- bench-table:begin -->"
END = "<!-- bench-table:end -->"


def render(path):
    d = json.load(open(path))
    lines = [
        f"`{path}` — {d['gpu']}, driver {d.get('driver', '?')}, commit `{d['commit']}`, {d['date']}; "
        f"{d.get('reps', '?')} reps per mode, cold L2, {d.get('dist', 'challenge')} inputs"
        f"{'' if d.get('s_q', 1) == 1 else ', s_q %d (not the suite)' % d['s_q']}, means in µs.",
        "",
        "| format | batch | kv | call µs | device µs | floor call µs | floor device µs | GB/s | × floor (device) | relerr |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in d["cases"]:
        lines.append(
            f"| {c['format']} | {c['batch']} | {c['kv_len']} | {c['call_us']:.1f} | {c['device_us']:.1f} | "
            f"{c['floor_call_us']:.1f} | {c['floor_device_us']:.1f} | {c['gbps']:.0f} | "
            f"{c['ratio_to_floor']:.2f} | {c['relerr']:.2e} |")
    lines += ["", "| format | geomean device µs | geomean floor µs | × floor |", "|---|---:|---:|---:|"]
    for fmt in ("bf16", "fp8", "mxfp4"):
        cs = [c for c in d["cases"] if c["format"] == fmt]
        if not cs:
            continue
        g = lambda k: math.exp(sum(math.log(c[k]) for c in cs) / len(cs))
        lines.append(f"| {fmt} | {g('device_us'):.1f} | {g('floor_device_us'):.1f} | "
                     f"{g('device_us') / g('floor_device_us'):.2f} |")
    return "\n".join(lines)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    table = render(argv[1])
    if len(argv) == 4 and argv[2] == "--readme":
        text = open(argv[3]).read()
        if BEGIN not in text or END not in text:
            sys.exit(f"{argv[3]}: bench-table markers not found")
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        open(argv[3], "w").write(f"{head}{BEGIN}\n{table}\n{END}{tail}")
    else:
        print(table)


if __name__ == "__main__":
    main(sys.argv)
