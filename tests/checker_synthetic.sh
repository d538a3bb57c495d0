#!/usr/bin/env bash
# checker_synthetic.sh INVENTORY_CHECK N MAX_S [MAX_MB]: inventory-check
# --synthetic N must find the one unit sold twice that it planted (and the
# overlap of its two holds, and nothing else), answer unsafe (exit 1), and
# judge the N events in under MAX_S seconds with a peak RSS under MAX_MB
# (not bounded when MAX_MB is absent: a sanitizer's shadow memory is not
# the checker's).
set -uo pipefail
tag=checker-synthetic
check=$1 n=$2 max_s=$3 max_mb=${4:-}
out=$(mktemp /tmp/inventoryd-synthetic.XXXXXX)
trap 'rm -f "$out"' EXIT
fail() { echo "$tag: FAIL: $*" >&2; cat "$out" >&2; exit 1; }

"$check" --synthetic "$n" --max-findings 10 >"$out"
rc=$?
[ "$rc" = 1 ] || fail "exit status $rc, expected 1 (unsafe)"
[ "$(jq -r .verdict "$out")" = unsafe ] || fail "verdict is not unsafe"
[ "$(jq -r .events "$out")" = "$n" ] || fail "it judged $(jq -r .events "$out") events, not $n"
for k in overlap:1 sold_twice:1 late_write:0 lost_sale:0 untold_sale:0 stock_ledger:0 stale_token_write:0; do
    got=$(jq -r ".counts.${k%%:*}" "$out")
    [ "$got" = "${k#*:}" ] || fail "${k%%:*}: $got, expected ${k#*:}"
done
[ "$(jq -r '.counterexample.kind' "$out")" = sold_twice ] || fail "the counterexample is not the double sale"
[ "$(jq -r '.counterexample.events | length' "$out")" = 2 ] || fail "the counterexample is not the two holds"
secs=$(jq -r .synthetic.check_s "$out")
mb=$(jq -r .synthetic.max_rss_mb "$out")
awk -v s="$secs" -v m="$max_s" 'BEGIN { exit !(s < m) }' || fail "checking took $secs s, more than $max_s s"
if [ -n "$max_mb" ]; then
    awk -v s="$mb" -v m="$max_mb" 'BEGIN { exit !(s < m) }' || fail "peak RSS $mb MB, more than $max_mb MB"
fi
echo "$tag: $n events: made in $(jq -r .synthetic.make_s "$out") s, checked in $secs s, peak RSS $mb MB"
