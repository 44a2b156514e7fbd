#!/usr/bin/env bash
# CLI test of `mla quantize` (argument: path of the mla binary). Generates bf16 inputs with
# python3 (standard library only), runs the quantizer for fp8 and for MXFP4 in both roundings and
# both scale strides, and compares every output byte with an independent Python implementation of
# SPEC §2 (plus the NaN/Inf rules of docs/formats.md). Then checks that bad invocations fail with a
# message and leave no output file behind.
set -euo pipefail

MLA=${1:?usage: quantize.sh /path/to/mla}
[[ -x "$MLA" ]] || { echo "FAIL: $MLA is not executable" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }

cat >"$TMP/ref.py" <<'PY'
import math, random, struct, sys

COLS = 576

def f32(x):
    """Round a double to fp32 (RNE); overflow gives inf."""
    try:
        return struct.unpack('<f', struct.pack('<f', x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)

def f32_bits(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]

def bf16_bits(x):
    """Round to bf16 (RNE) via fp32; NaN -> 0x7FC0 (as PyTorch)."""
    x = f32(x)
    if math.isnan(x):
        return 0x7FC0
    u = f32_bits(x)
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF

def bf16_value(b):
    return struct.unpack('<f', struct.pack('<I', b << 16))[0]

def is_nan_bits(b):
    return (b & 0x7FFF) > 0x7F80

# e4m3fn positive finite values by byte 0x00..0x7E.
E4M3 = [math.ldexp(b & 7, -9) if (b >> 3) == 0 else math.ldexp(8 + (b & 7), (b >> 3) - 10) for b in range(0x7F)]

def e4m3(y):
    if math.isnan(y):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, y) < 0 else 0
    a = abs(y)
    if a >= 448:
        return sign | 0x7E
    best, best_d = 0, math.inf
    for b, v in enumerate(E4M3):
        d = abs(v - a)
        if d < best_d or (d == best_d and b % 2 == 0):
            best, best_d = b, d
    return sign | best

def quantize_fp8(xb):
    """sglang scaled_fp8_quant with bf16 intermediates (SPEC §2). Returns (bytes, scale bits)."""
    if any(is_nan_bits(b) for b in xb):
        return bytes([0x7F] * len(xb)), 0x7FC00000
    amax = max([abs(bf16_value(b)) for b in xb] + [0.0])
    if amax < 1e-12:
        amax = bf16_value(bf16_bits(1e-12))
    # f32(amax) * f32(1/448): exact in double, then fp32, then bf16.
    scale = bf16_value(bf16_bits(f32(amax * f32(1.0 / 448.0))))
    memo = {}
    out = bytearray()
    for b in xb:
        if b not in memo:
            x = bf16_value(b)
            if math.isinf(scale) and math.isinf(x):
                q = math.nan
            elif math.isinf(scale):
                q = math.copysign(0.0, x)
            else:
                q = f32(x / scale)  # IEEE fp32 divide (double divide then fp32 rounds the same)
            if math.isnan(q):
                memo[b] = 0x7F
            else:
                y = bf16_value(bf16_bits(q))
                y = max(-448.0, min(448.0, y)) if y != 0 else y
                memo[b] = e4m3(y)
        out.append(memo[b])
    return bytes(out), f32_bits(scale)

MAG = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]

def e2m1(q, legacy):
    sign = 8 if math.copysign(1.0, q) < 0 else 0
    a = abs(q)
    if a >= 6:
        return sign | 7
    best, best_d = 0, math.inf
    for c, v in enumerate(MAG):
        d = abs(v - a)
        if d < best_d or (d == best_d and (legacy or c % 2 == 0)):
            best, best_d = c, d
    return sign | best

def mxfp4_block(xb, legacy):
    """aiter dynamic_mxfp4_quant for one block of 32 bf16 bit patterns -> (scale byte, codes)."""
    if any(is_nan_bits(b) for b in xb):
        return 0xFF, [0] * 32
    amax = max(abs(bf16_value(b)) for b in xb)
    u = 0x7F800000 if math.isinf(amax) else f32_bits(amax)
    e = (((u + 0x200000) & 0xFF800000) >> 23) & 0xFF
    s = 254 if e == 255 else max(e - 2, 0)
    codes = []
    for b in xb:
        x = bf16_value(b)
        q = x if math.isinf(x) else math.ldexp(x, 127 - s)
        c = e2m1(q, legacy)
        if b & 0x8000:
            c |= 8
        codes.append(c)
    return s, codes

def quantize_mxfp4(xb, rows, legacy, stride):
    data, scales = bytearray(), bytearray()
    for r in range(rows):
        for k in range(COLS // 32):
            s, c = mxfp4_block(xb[r * COLS + 32 * k: r * COLS + 32 * k + 32], legacy)
            scales.append(s)
            data.extend(c[2 * j] | (c[2 * j + 1] << 4) for j in range(16))
        scales.extend([0] * (stride - COLS // 32))
    return bytes(data), bytes(scales)

def write_bf16(path, xb):
    with open(path, 'wb') as f:
        f.write(struct.pack('<%dH' % len(xb), *xb))

def read_bf16(path):
    raw = open(path, 'rb').read()
    return list(struct.unpack('<%dH' % (len(raw) // 2), raw))

def gen(kind, rows, seed):
    rnd = random.Random(seed)
    xb = []
    for r in range(rows):
        row = []
        for k in range(COLS // 32):
            style = rnd.randrange(8) if kind != 'plain' else 0
            e = rnd.randint(-9, 3) if kind == 'narrow' else rnd.randint(-24, 12)
            block = [bf16_bits(rnd.gauss(0, 1) * 2.0 ** e) for _ in range(32)]
            if style == 1:  # E2M1 ties and grid values at scale 2^e
                vals = [6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 0.5, 1, 1.5, 2, 3, 4]
                block = [bf16_bits(rnd.choice((1, -1)) * rnd.choice(vals) * 2.0 ** e) for _ in range(32)]
                block[0] = bf16_bits(6 * 2.0 ** e)
            elif style == 2:  # zeros and signed zeros
                block = [rnd.choice((0x0000, 0x8000)) for _ in range(32)]
            elif style == 3:  # bf16 subnormals and tiny normals
                block = [rnd.randrange(0x0000, 0x0200) | rnd.choice((0, 0x8000)) for _ in range(32)]
            elif style == 4:  # amax with significand >= 1.75 (rounds the exponent up)
                block[rnd.randrange(32)] = bf16_bits(rnd.choice((1.75, 1.875, 1.9921875)) * 2.0 ** e)
            elif style == 5 and kind == 'special':  # huge: exponent 255 -> s = 254
                block[rnd.randrange(32)] = rnd.choice((0x7F7F, 0xFF7F, 0x7F60, 0x7F5F))
            elif style == 6 and kind == 'special':  # inf
                block[rnd.randrange(32)] = rnd.choice((0x7F80, 0xFF80))
            elif style == 7 and kind == 'special':  # NaN
                block[rnd.randrange(32)] = rnd.choice((0x7FC0, 0xFFC0, 0x7F81, 0x7FFF))
            row.extend(block)
        xb.extend(row)
    return xb

def main():
    cmd = sys.argv[1]
    if cmd == 'gen':  # gen KIND ROWS SEED OUT
        write_bf16(sys.argv[5], gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    elif cmd == 'write':  # write OUT ROWS v0 v1 ... (floats; the rest of the rows 0)
        rows = int(sys.argv[3])
        xb = [bf16_bits(float(v)) for v in sys.argv[4:]]
        xb += [0] * (rows * COLS - len(xb))
        write_bf16(sys.argv[2], xb)
    elif cmd == 'fp8':  # fp8 IN DATA SCALES
        xb = read_bf16(sys.argv[2])
        want, want_scale = quantize_fp8(xb)
        got = open(sys.argv[3], 'rb').read()
        got_scale = struct.unpack('<I', open(sys.argv[4], 'rb').read())[0]
        bad = [i for i in range(max(len(want), len(got))) if i >= len(got) or i >= len(want) or got[i] != want[i]]
        if len(open(sys.argv[4], 'rb').read()) != 4 or got_scale != want_scale or bad:
            print('fp8 mismatch: scale got %08X want %08X; %d bytes differ, first %s' %
                  (got_scale, want_scale, len(bad), bad[:5]))
            sys.exit(1)
    elif cmd == 'mxfp4':  # mxfp4 IN DATA SCALES ROUNDING STRIDE
        xb = read_bf16(sys.argv[2])
        rows = len(xb) // COLS
        want_d, want_s = quantize_mxfp4(xb, rows, sys.argv[5] == 'legacy', int(sys.argv[6]))
        got_d, got_s = open(sys.argv[3], 'rb').read(), open(sys.argv[4], 'rb').read()
        if got_d != want_d or got_s != want_s:
            bd = [i for i in range(min(len(got_d), len(want_d))) if got_d[i] != want_d[i]]
            bs = [i for i in range(min(len(got_s), len(want_s))) if got_s[i] != want_s[i]]
            print('mxfp4 mismatch: sizes %d/%d %d/%d, data diffs %s, scale diffs %s' %
                  (len(got_d), len(want_d), len(got_s), len(want_s), bd[:5], bs[:5]))
            sys.exit(1)
    elif cmd == 'bytes':  # bytes FILE OFFSET COUNT -> hex
        raw = open(sys.argv[2], 'rb').read()
        o, n = int(sys.argv[3]), int(sys.argv[4])
        print(' '.join('%02X' % b for b in raw[o:o + n]))
    else:
        sys.exit('unknown command ' + cmd)

main()
PY
REF=(python3 "$TMP/ref.py")

# --- bit-exact runs -------------------------------------------------------------------------
ROWS=24
"${REF[@]}" gen mixed $ROWS 1 "$TMP/mixed.bf16"
"${REF[@]}" gen special $ROWS 2 "$TMP/special.bf16"
"${REF[@]}" gen plain 3 3 "$TMP/plain.bf16"
"${REF[@]}" gen narrow $ROWS 4 "$TMP/narrow.bf16"  # fp8: most values in e4m3's normal range

run_fp8() {  # IN ROWS
  local in=$1 rows=$2
  if ! "$MLA" quantize --format fp8 --rows "$rows" --in "$in" --out "$TMP/o.fp8" --scales "$TMP/o.scale" \
    >"$TMP/stdout" 2>"$TMP/stderr"; then
    fail "fp8 on $(basename "$in") exited non-zero: $(cat "$TMP/stderr")"
    return
  fi
  "${REF[@]}" fp8 "$in" "$TMP/o.fp8" "$TMP/o.scale" || fail "fp8 bytes differ on $(basename "$in")"
}
run_fp8 "$TMP/mixed.bf16" $ROWS
run_fp8 "$TMP/plain.bf16" 3
run_fp8 "$TMP/narrow.bf16" $ROWS

for input in mixed special plain; do
  rows=$ROWS
  [[ $input == plain ]] && rows=3
  for rounding in rne legacy; do
    for stride in 18 24; do
      if ! "$MLA" quantize --format mxfp4 --rounding $rounding --scale-stride $stride --rows $rows \
        --in "$TMP/$input.bf16" --out "$TMP/o.mx" --scales "$TMP/o.e8m0" >"$TMP/stdout" 2>"$TMP/stderr"; then
        fail "mxfp4 $rounding $stride on $input exited non-zero: $(cat "$TMP/stderr")"
        continue
      fi
      "${REF[@]}" mxfp4 "$TMP/$input.bf16" "$TMP/o.mx" "$TMP/o.e8m0" $rounding $stride ||
        fail "mxfp4 $rounding stride $stride differs on $input"
    done
  done
done

# A pipe as input (size known only by reading).
"$MLA" quantize --format fp8 --rows $ROWS --in <(cat "$TMP/narrow.bf16") --out "$TMP/p.fp8" --scales "$TMP/p.s" \
  >/dev/null || fail "fp8 from a pipe exited non-zero"
"${REF[@]}" fp8 "$TMP/narrow.bf16" "$TMP/p.fp8" "$TMP/p.s" || fail "fp8 from a pipe differs"

# Defaults: rne and stride 18; --key=value spelling.
"$MLA" quantize --format=mxfp4 --rows=$ROWS --in="$TMP/mixed.bf16" --out="$TMP/d.mx" --scales="$TMP/d.e8m0" >/dev/null
"${REF[@]}" mxfp4 "$TMP/mixed.bf16" "$TMP/d.mx" "$TMP/d.e8m0" rne 18 || fail "mxfp4 defaults are not rne/18"

# SPEC worked examples through the CLI.
"${REF[@]}" write "$TMP/ex1.bf16" 1 1 -2 0.30078125 3 0.010009765625 -0.0 2.90625
"$MLA" quantize --format fp8 --rows 1 --in "$TMP/ex1.bf16" --out "$TMP/ex1.fp8" --scales "$TMP/ex1.s" >/dev/null
[[ $("${REF[@]}" bytes "$TMP/ex1.fp8" 0 7) == "71 F9 63 7E 3C 80 7E" ]] || fail "SPEC fp8 example bytes"
[[ $("${REF[@]}" bytes "$TMP/ex1.s" 0 4) == "00 00 DB 3B" ]] || fail "SPEC fp8 example scale"
"${REF[@]}" write "$TMP/ex2.bf16" 1 2.421875 -0.9921875
"$MLA" quantize --format fp8 --rows 1 --in "$TMP/ex2.bf16" --out "$TMP/ex2.fp8" --scales "$TMP/ex2.s" >/dev/null
[[ $("${REF[@]}" bytes "$TMP/ex2.fp8" 1 1) == "F4" ]] || fail "SPEC fp8 double-rounding example"
[[ $("${REF[@]}" bytes "$TMP/ex2.s" 0 4) == "00 00 B1 3B" ]] || fail "SPEC fp8 double-rounding scale"
"${REF[@]}" write "$TMP/ex3.bf16" 1 6.5 5 -2.5 .25 3 1.25 .75 -6
for r in rne legacy; do
  "$MLA" quantize --format mxfp4 --rounding $r --scale-stride 24 --rows 1 --in "$TMP/ex3.bf16" \
    --out "$TMP/ex3.$r" --scales "$TMP/ex3.$r.s" >/dev/null
done
[[ $("${REF[@]}" bytes "$TMP/ex3.rne" 0 4) == "67 0C 25 F2" ]] || fail "SPEC mxfp4 example (rne)"
[[ $("${REF[@]}" bytes "$TMP/ex3.legacy" 0 4) == "77 1D 35 F2" ]] || fail "SPEC mxfp4 example (legacy)"
[[ $("${REF[@]}" bytes "$TMP/ex3.rne.s" 0 24) == "7F $(printf '00 %.0s' {1..22})00" ]] || fail "mxfp4 scales/padding"

# NaN and Inf in fp8 (docs/formats.md): NaN -> scale NaN and all 0x7F; inf -> scale inf.
"${REF[@]}" write "$TMP/nan.bf16" 1 1 nan -3
"$MLA" quantize --format fp8 --rows 1 --in "$TMP/nan.bf16" --out "$TMP/nan.fp8" --scales "$TMP/nan.s" \
  >/dev/null 2>"$TMP/stderr" || fail "fp8 with NaN input exited non-zero"
grep -q warning "$TMP/stderr" || fail "fp8 with NaN input printed no warning"
"${REF[@]}" fp8 "$TMP/nan.bf16" "$TMP/nan.fp8" "$TMP/nan.s" || fail "fp8 NaN behaviour"
[[ $("${REF[@]}" bytes "$TMP/nan.s" 0 4) == "00 00 C0 7F" ]] || fail "fp8 NaN scale"
"${REF[@]}" write "$TMP/inf.bf16" 1 1 -inf -3 inf
"$MLA" quantize --format fp8 --rows 1 --in "$TMP/inf.bf16" --out "$TMP/inf.fp8" --scales "$TMP/inf.s" \
  >/dev/null 2>&1 || fail "fp8 with inf input exited non-zero"
"${REF[@]}" fp8 "$TMP/inf.bf16" "$TMP/inf.fp8" "$TMP/inf.s" || fail "fp8 inf behaviour"
[[ $("${REF[@]}" bytes "$TMP/inf.fp8" 0 4) == "00 7F 80 7F" ]] || fail "fp8 inf bytes"

# --help
"$MLA" quantize --help >"$TMP/help" || fail "--help exited non-zero"
grep -q -- "--scale-stride" "$TMP/help" || fail "--help prints no usage"

# --- failures: non-zero exit, a message, no output left ------------------------------------
"${REF[@]}" write "$TMP/one.bf16" 1 1 2 3
head -c $((3 * 1152 - 2)) "$TMP/mixed.bf16" >"$TMP/short.bf16"
OUTDIR="$TMP/out"
expect_failure() {  # NAME ARGS... ; outputs go to $OUTDIR, which must stay empty
  local name=$1
  shift
  rm -rf "$OUTDIR"
  mkdir -p "$OUTDIR"
  local rc=0
  "$MLA" quantize "$@" >"$TMP/stdout" 2>"$TMP/stderr" || rc=$?
  if [[ $rc -eq 0 ]]; then
    fail "$name: exit status 0"
  fi
  [[ -s "$TMP/stderr" ]] || fail "$name: no error message"
  if [[ -n $(ls -A "$OUTDIR") ]]; then
    fail "$name: left files behind: $(ls -A "$OUTDIR" | tr '\n' ' ')"
  fi
}
O=(--out "$OUTDIR/d" --scales "$OUTDIR/s")
expect_failure "short file (fp8)" --format fp8 --rows 3 --in "$TMP/short.bf16" "${O[@]}"
expect_failure "short file (mxfp4)" --format mxfp4 --rows 3 --in "$TMP/short.bf16" "${O[@]}"
expect_failure "longer file" --format fp8 --rows 2 --in "$TMP/short.bf16" "${O[@]}"
expect_failure "longer file (mxfp4)" --format mxfp4 --rows 1 --in "$TMP/mixed.bf16" "${O[@]}"
expect_failure "empty file" --format fp8 --rows 1 --in /dev/null "${O[@]}"
expect_failure "huge --rows" --format fp8 --rows 1000000000000 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "longer pipe" --format mxfp4 --rows 2 --in <(cat "$TMP/short.bf16") "${O[@]}"
expect_failure "short pipe" --format fp8 --rows 4 --in <(cat "$TMP/short.bf16") "${O[@]}"
expect_failure "missing input" --format fp8 --rows 1 --in "$TMP/nope.bf16" "${O[@]}"
expect_failure "bad format" --format int4 --rows 1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "bf16 format" --format bf16 --rows 1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "bad rounding" --format mxfp4 --rounding up --rows 1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "rounding with fp8" --format fp8 --rounding rne --rows 1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "bad stride" --format mxfp4 --scale-stride 20 --rows 1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "stride 17" --format mxfp4 --scale-stride 17 --rows 1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "rows 0" --format fp8 --rows 0 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "rows -1" --format fp8 --rows -1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "rows abc" --format fp8 --rows abc --in "$TMP/one.bf16" "${O[@]}"
expect_failure "rows 1x" --format mxfp4 --rows 1x --in "$TMP/one.bf16" "${O[@]}"
expect_failure "missing --format" --rows 1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "missing --rows" --format fp8 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "missing --in" --format fp8 --rows 1 "${O[@]}"
expect_failure "missing --out" --format fp8 --rows 1 --in "$TMP/one.bf16" --scales "$OUTDIR/s"
expect_failure "missing --scales" --format mxfp4 --rows 1 --in "$TMP/one.bf16" --out "$OUTDIR/d"
expect_failure "missing value" --format fp8 --rows 1 --in "$TMP/one.bf16" --out "$OUTDIR/d" --scales
expect_failure "unknown option" --format fp8 --rows 1 --in "$TMP/one.bf16" "${O[@]}" --fast
expect_failure "stray argument" --format fp8 --rows 1 --in "$TMP/one.bf16" "${O[@]}" extra
expect_failure "repeated option" --format fp8 --format fp8 --rows 1 --in "$TMP/one.bf16" "${O[@]}"
expect_failure "same output twice" --format fp8 --rows 1 --in "$TMP/one.bf16" --out "$OUTDIR/d" --scales "$OUTDIR/d"
expect_failure "unwritable output" --format fp8 --rows 1 --in "$TMP/one.bf16" --out "$OUTDIR/no/such/dir/d" \
  --scales "$OUTDIR/s"
expect_failure "no arguments"

# A failing run leaves an existing destination untouched.
echo keep >"$TMP/keep.d"
echo keep >"$TMP/keep.s"
if "$MLA" quantize --format fp8 --rows 3 --in "$TMP/short.bf16" --out "$TMP/keep.d" --scales "$TMP/keep.s" \
  >/dev/null 2>&1; then
  fail "short file into existing outputs: exit status 0"
fi
[[ $(cat "$TMP/keep.d") == keep && $(cat "$TMP/keep.s") == keep ]] || fail "a failing run changed existing outputs"
# A destination that is a directory is refused before anything is written: the other output,
# already there, is left as it was. (A valid input, so that nothing else can make the run fail.)
mkdir -p "$TMP/adir"
if "$MLA" quantize --format mxfp4 --rows 1 --in "$TMP/one.bf16" --out "$TMP/keep.d" --scales "$TMP/adir" \
  >/dev/null 2>"$TMP/stderr"; then
  fail "--scales naming a directory: exit status 0"
fi
grep -q "is a directory" "$TMP/stderr" || fail "--scales naming a directory: no clear message"
if "$MLA" quantize --format fp8 --rows 1 --in "$TMP/one.bf16" --out "$TMP/adir" --scales "$TMP/keep.s" \
  >/dev/null 2>"$TMP/stderr"; then
  fail "--out naming a directory: exit status 0"
fi
grep -q "is a directory" "$TMP/stderr" || fail "--out naming a directory: no clear message"
[[ $(cat "$TMP/keep.d") == keep && $(cat "$TMP/keep.s") == keep ]] || fail "a directory destination changed the other output"
# ...and no temporary files were left beside them.
leftover=$(find "$TMP" -name '*.tmp*')
[[ -z $leftover ]] || fail "temporary files left: $leftover"

if [[ $FAILS -ne 0 ]]; then
  echo "quantize.sh: $FAILS failure(s)" >&2
  exit 1
fi
echo "quantize.sh: all checks passed"
