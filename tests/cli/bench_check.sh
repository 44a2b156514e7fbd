#!/usr/bin/env bash
# CLI test: `mla check` and a tiny `mla bench` on the cpu backend, the bench JSON's keys, and the
# exit status and message of bad invocations. $1: the mla binary.
set -euo pipefail

MLA="${1:?usage: bench_check.sh path/to/mla}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

"$MLA" --version | grep -q "mla-decode" || fail "--version"
"$MLA" --help | grep -q "bench" || fail "--help"
"$MLA" bench --help | grep -q -- "--json" || fail "bench --help"
"$MLA" check --help | grep -q -- "--backend" || fail "check --help"

# The correctness sweep on the cpu backend.
if ! "$MLA" check --backend cpu >"$tmp/check.txt" 2>&1; then
  cat "$tmp/check.txt"
  fail "mla check --backend cpu"
fi
grep -q "^OK: " "$tmp/check.txt" || fail "mla check printed no OK summary"
grep -q "PASS" "$tmp/check.txt" || fail "mla check printed no PASS line"
tail -n 1 "$tmp/check.txt"

# Random cases: the same seed draws the same cases, each passes, and the plans run are summed up.
"$MLA" check --backend cpu --random 25 --seed 5 >"$tmp/random.txt" 2>&1 || {
  cat "$tmp/random.txt"
  fail "mla check --random 25"
}
grep -q "^OK: 25 passed" "$tmp/random.txt" || fail "mla check --random 25: no OK summary of 25 cases"
grep -q "^plans run: [1-9][0-9]* with split requests" "$tmp/random.txt" ||
  fail "mla check --random 25: no summary of the plans run, or none of 25 split a request"
random_cases() { sed -n 's/.* \(#[0-9][0-9]* .*\) relerr .*/\1/p' "$1"; }
[ "$(random_cases "$tmp/random.txt" | wc -l)" -eq 25 ] || fail "mla check --random 25: not 25 named cases"
"$MLA" check --backend cpu --random 25 --seed 5 >"$tmp/random2.txt" 2>&1
[ "$(random_cases "$tmp/random.txt")" = "$(random_cases "$tmp/random2.txt")" ] ||
  fail "mla check --random: the same seed drew other cases"
"$MLA" check --backend cpu --random 25 --seed 6 >"$tmp/random3.txt" 2>&1
[ "$(random_cases "$tmp/random.txt")" != "$(random_cases "$tmp/random3.txt")" ] ||
  fail "mla check --random: another seed drew the same cases"

# A tiny bench with JSON output.
if ! "$MLA" bench --backend cpu --shapes 1x256 --reps 2 --json "$tmp/out.json" >"$tmp/bench.txt" 2>&1; then
  cat "$tmp/bench.txt"
  fail "mla bench --backend cpu --shapes 1x256 --reps 2"
fi
grep -q "geomean" "$tmp/bench.txt" || fail "bench printed no geomean"
grep -q "plan() host time per call" "$tmp/bench.txt" || fail "bench printed no plan() host time"
[ -s "$tmp/out.json" ] || fail "bench wrote no JSON"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$tmp/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
top = ["gpu", "commit", "date", "backend", "driver", "cases", "geomean"]
case = ["format", "batch", "kv_len", "call_us", "call_us_median", "device_us", "device_us_median",
        "floor_call_us", "floor_call_us_median", "floor_device_us", "floor_device_us_median", "kv_bytes",
        "gbps", "ratio_to_floor", "relerr", "relerr_requests_checked", "lse_max_abs", "sm_mhz", "floor_sm_mhz",
        "plan", "plan_us", "redone_reps", "unhidden_reps", "floor_redone_reps", "floor_unhidden_reps"]
missing = [k for k in top if k not in d]
assert not missing, f"top-level keys missing: {missing}"
assert d["backend"] == "cpu" and d["gpu"] == "cpu", d["backend"]
assert len(d["cases"]) == 3, f"expected 3 cases (one per format), got {len(d['cases'])}"
for c in d["cases"]:
    missing = [k for k in case if k not in c]
    assert not missing, f"case keys missing: {missing}"
    assert c["batch"] == 1 and c["kv_len"] == 256, c
    assert c["call_us"] > 0 and c["relerr"] <= 4e-3 and c["relerr_requests_checked"] == 1, c
    assert c["plan"].startswith("plan[cpu]"), c["plan"]
    assert c["plan_us"] > 0, c["plan_us"]
for f in ("bf16", "fp8", "mxfp4"):
    assert f in d["geomean"], f"geomean of {f} missing"
print("JSON ok:", len(d["cases"]), "cases")
PY
else
  for k in '"gpu"' '"commit"' '"date"' '"backend"' '"driver"' '"cases"' '"geomean"' '"relerr_requests_checked"' \
    '"floor_device_us"' '"ratio_to_floor"' '"plan"'; do
    grep -q "$k" "$tmp/out.json" || fail "JSON lacks $k"
  done
fi

# A forced KV L2 policy and a forced fp8 copy path run (they only matter on cuda) and show in the
# table's header.
"$MLA" bench --backend cpu --format bf16 --shapes 1x256 --reps 1 --kv-l2 normal >"$tmp/l2.txt" 2>&1 ||
  fail "bench --kv-l2 normal: $(cat "$tmp/l2.txt")"
grep -q "kv-l2 normal" "$tmp/l2.txt" || fail "bench --kv-l2 normal: not in the header"
"$MLA" bench --backend cpu --format fp8 --shapes 1x256 --reps 1 --kv-copy tma >"$tmp/copy.txt" 2>&1 ||
  fail "bench --kv-copy tma: $(cat "$tmp/copy.txt")"
grep -q "kv-copy tma" "$tmp/copy.txt" || fail "bench --kv-copy tma: not in the header"
# Pages laid out in order: the case runs and passes, and the header says so.
"$MLA" bench --backend cpu --format fp8 --shapes 2x300 --reps 1 --paged 16 --page-order in-order >"$tmp/po.txt" 2>&1 ||
  fail "bench --paged 16 --page-order in-order: $(cat "$tmp/po.txt")"
grep -q "paged16 in-order" "$tmp/po.txt" || fail "bench --page-order in-order: not in the header"

# s_q > 1 (multi-token queries): the header, the plan and the JSON say so; the KV bytes count once.
"$MLA" bench --backend cpu --format mxfp4 --shapes 2x300 --reps 1 --s-q 3 --json "$tmp/sq.json" >"$tmp/sq.txt" 2>&1 ||
  fail "bench --s-q 3: $(cat "$tmp/sq.txt")"
grep -q "s_q 3" "$tmp/sq.txt" || fail "bench --s-q 3: not in the header"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$tmp/sq.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["s_q"] == 3, d["s_q"]
c = d["cases"][0]
assert " s_q=3 " in c["plan"], c["plan"]
assert c["kv_bytes"] == 2 * 300 * 306, c["kv_bytes"]  # 2 requests of 300 tokens, 306 bytes each (E2M1 + E8M0)
assert c["passed"] and c["relerr"] <= 4e-3, c
PY
fi

# Bad invocations: usage errors exit 2 with a message on stderr naming the problem.
expect_usage_error() {
  local want="$1"
  shift
  local rc=0
  "$MLA" "$@" >"$tmp/o.txt" 2>"$tmp/e.txt" || rc=$?
  [ "$rc" -eq 2 ] || fail "'mla $*' exited $rc, expected 2"
  grep -q -- "$want" "$tmp/e.txt" || fail "'mla $*' message lacks '$want': $(cat "$tmp/e.txt")"
}
expect_usage_error "unknown command" frobnicate
expect_usage_error "usage" # no command at all
expect_usage_error "unknown option" bench --bogus
expect_usage_error "unknown format" bench --format fp16
expect_usage_error "--random" check --random 0
expect_usage_error "BATCHxKV" bench --shapes 4by1024
expect_usage_error "page size" bench --paged 32
expect_usage_error "--page-order" bench --page-order random
expect_usage_error "needs --paged" bench --page-order in-order
expect_usage_error "out of range" bench --reps 0
expect_usage_error "needs a value" bench --reps
expect_usage_error "not an integer" bench --seed abc
expect_usage_error "unknown backend" bench --backend tpu
expect_usage_error "unknown distribution" bench --dist uniform
expect_usage_error "unknown policy" bench --kv-l2 evict_last
expect_usage_error "unknown copy" bench --kv-copy bulk
expect_usage_error "out of range" check --sq 5
expect_usage_error "out of range" bench --s-q 0
expect_usage_error "unknown option" check --shapes 4x1024
expect_usage_error "out of range" bench --seed 99999999999999999999
expect_usage_error "takes no value" bench --help=1
expect_usage_error "takes no value" check --help=1

# Lists run each entry once; s_q > 1 with a single distribution runs that distribution.
"$MLA" check --backend cpu --format fp8,fp8 --sq 1,1 --dist peaked,peaked >"$tmp/dup.txt" 2>&1 ||
  fail "check with repeated list entries: $(cat "$tmp/dup.txt")"
n=$(grep -c "PASS" "$tmp/dup.txt" || true)
[ "$n" -eq 6 ] || fail "check --format fp8,fp8 --sq 1,1 --dist peaked,peaked ran $n cases, expected 6 (one per layout)"
"$MLA" check --backend cpu --format bf16 --sq 2 --dist challenge,challenge >"$tmp/sq2.txt" 2>&1 ||
  fail "check --sq 2 --dist challenge: $(cat "$tmp/sq2.txt")"
grep -q "bf16 challenge uniform .* s_q2" "$tmp/sq2.txt" || fail "check --sq 2 --dist challenge ran no challenge case"

# An unwritable --json path fails before the suite runs (no case progress), with exit 1.
rc=0
"$MLA" bench --backend cpu --format bf16 --shapes 1x64 --reps 1 --json "$tmp/no/such/dir/x.json" \
  >"$tmp/o.txt" 2>"$tmp/e.txt" || rc=$?
[ "$rc" -eq 1 ] || fail "bench --json into a missing directory exited $rc, expected 1"
grep -q "cannot write" "$tmp/e.txt" || fail "bench --json unwritable: $(cat "$tmp/e.txt")"
grep -q "\[1/" "$tmp/e.txt" && fail "bench --json unwritable: the suite ran before the error"

# The JSON's commit is the mla-decode source tree's, not that of the directory bench runs in.
src="$(cd "$(dirname "$0")/../.." && pwd)"
if command -v git >/dev/null 2>&1 && want=$(git -C "$src" rev-parse --short HEAD 2>/dev/null); then
  git -C "$src" diff --quiet HEAD -- || want="$want-dirty"
  mkdir "$tmp/other" && git -C "$tmp/other" init -q &&
    git -C "$tmp/other" -c user.email=t@t -c user.name=t commit -q --allow-empty -m other
  (cd "$tmp/other" && env -u MLA_COMMIT "$MLA" bench --backend cpu --format bf16 --shapes 1x64 --reps 1 \
    --json "$tmp/c.json" >/dev/null 2>&1) || fail "bench from another repository"
  grep -q "\"commit\": \"$want\"" "$tmp/c.json" ||
    fail "bench JSON commit is $(grep '"commit"' "$tmp/c.json"), expected the source tree's $want"
fi

# Asking for the cuda backend where there is none is an error too (exit 1), with the reason.
if ! "$MLA" --version | grep -q "GPU usable"; then
  rc=0
  "$MLA" bench --backend cuda --shapes 1x256 >"$tmp/o.txt" 2>"$tmp/e.txt" || rc=$?
  [ "$rc" -ne 0 ] || fail "bench --backend cuda without a GPU exited 0"
  grep -q "GPU" "$tmp/e.txt" || fail "bench --backend cuda without a GPU: no reason given"
  # The --json probe before that failure leaves an existing file as it was and creates none.
  echo keep >"$tmp/keep.json"
  "$MLA" bench --backend cuda --json "$tmp/keep.json" >/dev/null 2>&1 && fail "bench --backend cuda exited 0"
  [ "$(cat "$tmp/keep.json")" = keep ] || fail "a failed bench changed the existing --json file"
  "$MLA" bench --backend cuda --json "$tmp/new.json" >/dev/null 2>&1 && fail "bench --backend cuda exited 0"
  [ ! -e "$tmp/new.json" ] || fail "a failed bench left a --json file behind"
fi

echo "bench_check: all passed"
