#!/usr/bin/env python3
"""Summarise `ncu --page source --csv --print-source sass`: the SASS instructions with the most
warp-state samples, the samples per opcode and per stall reason, and the executed instructions per
opcode. usage: ncu_hot.py FILE.csv [TOP]"""
import collections
import csv
import re
import sys


def num(x):
    try:
        return float(x.replace(',', ''))
    except ValueError:
        return None


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 45
    with open(path, newline='') as f:
        lines = [l for l in f if l.strip()]
    start = next(i for i, l in enumerate(lines) if 'Source' in l and ',' in l)
    rows = list(csv.reader(lines[start:]))
    head, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    print('columns:', ' | '.join(head))
    src = head.index('Source')
    samp = next(i for i, h in enumerate(head) if 'Sampling (All' in h)
    nis = next((i for i, h in enumerate(head) if 'Sampling (Not' in h), None)
    reasons = [i for i, h in enumerate(head) if h.startswith('stall_') or 'issue_stalled' in h]
    total = sum(num(r[samp]) or 0 for r in body)
    print(f'total samples {total:.0f}')
    by_op = collections.Counter()
    for r in body:
        m = re.match(r'\s*(?:@!?U?P[T0-9]+\s+)?([A-Z0-9_]+)', r[src])
        if m:
            by_op[m.group(1)] += num(r[samp]) or 0
    print('samples by opcode:', ', '.join(f'{k} {100 * v / total:.1f}%' for k, v in by_op.most_common(20)))
    by_reason = collections.Counter()
    for r in body:
        for i in reasons:
            if 'Not Issued' not in head[i]:
                by_reason[head[i].replace('stall_', '')] += num(r[i]) or 0
    print('samples by reason:', ', '.join(f'{k} {100 * v / total:.1f}%' for k, v in by_reason.most_common(12)))
    ex = next((i for i, h in enumerate(head) if h.strip() == 'Instructions Executed'), None)
    if ex is not None:  # warp-level instructions executed, per opcode (what the issue slots went to)
        by_ex = collections.Counter()
        for r in body:
            m = re.match(r'\s*(?:@!?U?P[T0-9]+\s+)?([A-Z0-9_.]+)', r[src])
            if m:
                by_ex[m.group(1)] += num(r[ex]) or 0
        total_ex = sum(by_ex.values())
        print(f'instructions executed (warp-level) {total_ex:.0f}; by opcode:')
        print(', '.join(f'{k} {v:.0f}' for k, v in by_ex.most_common(60)))
    print(f'top {top} instructions (samples %, not-issued %, reasons):')
    for idx, r in sorted(enumerate(body), key=lambda e: -(num(e[1][samp]) or 0))[:top]:
        s = num(r[samp]) or 0
        ni = (num(r[nis]) or 0) if nis is not None else 0
        rs = sorted(((num(r[i]) or 0, head[i]) for i in reasons), reverse=True)[:3]
        rtxt = ' '.join(f'{h.replace("stall_", "")}={v:.0f}' for v, h in rs if v > 0)
        print(f'{idx:5d} {100 * s / total:5.2f} {100 * ni / total:5.2f}  {r[src].strip()[:70]:70s} {rtxt}')


if __name__ == '__main__':
    main()
