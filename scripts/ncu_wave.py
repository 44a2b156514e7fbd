#!/usr/bin/env python3
"""Summarise shared-memory wavefronts (and their ideal) per SASS opcode from
`ncu --section SourceCounters ... ; ncu -i REP --page source --csv --print-source sass`, plus the
instructions with the most excess (bank-conflict) wavefronts. usage: ncu_wave.py FILE.csv"""
import csv,sys,collections,re
lines=[l for l in open(sys.argv[1],newline='') if l.strip()]
start=next(i for i,l in enumerate(lines) if 'Source' in l and ',' in l)
rows=list(csv.reader(lines[start:])); head=rows[0]; body=[r for r in rows[1:] if len(r)==len(head)]
def col(name): return head.index(name)
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
src=col('Source'); w=col('L1 Wavefronts Shared'); wi=col('L1 Wavefronts Shared Ideal'); ex=col('L1 Wavefronts Shared Excessive'); ie=col('Instructions Executed'); tg=col('L1 Tag Requests Global')
by=collections.Counter(); byi=collections.Counter(); byt=collections.Counter(); byn=collections.Counter()
for r in body:
    op=re.sub(r'^@!?U?P[T0-9]+\s+','',r[src]).split()[0] if r[src].strip() else '?'
    by[op]+=num(r[w]); byi[op]+=num(r[wi]); byt[op]+=num(r[tg]); byn[op]+=num(r[ie])
tot=sum(by.values())
print('shared wavefronts total %.3g'%tot)
for op,v in by.most_common(12): print('%-28s wav %.3g (ideal %.3g) inst %.3g gtag %.3g'%(op,v,byi[op],byn[op],byt[op]))
print('global tag requests by op:'); 
for op,v in byt.most_common(6): print(op,'%.3g'%v)
top=sorted(body,key=lambda r:-num(r[ex]))[:12]
for r in top: print('excess %.3g wav %.3g  %s'%(num(r[ex]),num(r[w]),r[src][:90]))
