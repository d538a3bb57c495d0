#!/usr/bin/env bash
# matrix_missed.sh: a matrix fault that misses its window gives no verdict.
#
# The holder nemeses first see a sale of A inside its critical section, then
# start the loads and strike 0.2 s later. Seeing it inside was taken as the
# proof that the fault met a holder; but a holder seen inside may have left
# by the strike. Now the proof is taken at the strike (scripts/matrix.sh,
# inside_at_strike): A stopped, its sale's entry still in the probe's
# holders.
#
# Two runs of the cell fenced x kill (its one need: holder_inside):
#   1. at the shipped timing the kill meets the holder: covered, safe;
#   2. with the strike 1.5 s late (MATRIX_STRIKE_LATE_MS), past the
#      holder's 0.8 s hold, the kill meets nobody inside: the cell says it
#      missed, holder_inside is not covered, and the verdict is
#      inconclusive (matrix.sh exits 1: the expected file wants safe).
# Before the proof moved to the strike, run 2 was covered and safe.
set -uo pipefail
tag=matrix-missed
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath "${1:?usage: matrix_missed.sh BUILD_DIR}")
out=$(mktemp -d /tmp/inventoryd-matrix-missed.XXXXXX)
failed=0
trap '[ "$failed" = 1 ] && echo "$tag: kept $out" >&2 || rm -rf "$out"' EXIT
fail() { echo "$tag: FAIL: $*" >&2; failed=1; exit 1; }
log() { echo "$tag: $*"; }

# cell LATE_MS DIR: the cell fenced x kill; its exit status.
cell() {
    MATRIX_BUILD_DIR=$build MATRIX_STRATEGIES=fenced MATRIX_NEMESES=kill MATRIX_STRIKE_LATE_MS=$1 \
        MATRIX_RESULTS_DIR=$2 bash "$root/scripts/matrix.sh" >"$2.log" 2>&1
}
# field DIR NAME: the cell's column NAME in matrix.csv.
field() {
    awk -F, -v k="$2" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $1 == "fenced" && $2 == "kill" { print $c[k] }' "$1/matrix.csv"
}

cell 0 "$out/on-time"
rc=$?
[ -f "$out/on-time/matrix.csv" ] || fail "the on-time run wrote no matrix.csv (exit $rc): $(tail -5 "$out/on-time.log")"
v=$(field "$out/on-time" verdict)
cov=$(field "$out/on-time" coverage)
[ "$rc" = 0 ] && [ "$v" = safe ] && [[ $cov == *holder_inside* ]] ||
    fail "on time, the kill should meet the holder (covered, safe): exit $rc, verdict $v, coverage '$cov'; $(cat "$out/on-time/matrix/fenced-kill/nemesis" 2>/dev/null)"
grep -q "kill met A's sale" "$out/on-time/matrix/fenced-kill/coverage" ||
    fail "the on-time coverage does not say the kill met the sale: $(cat "$out/on-time/matrix/fenced-kill/coverage")"
log "on time: the kill met A's sale inside; covered, $v"

cell 1500 "$out/late"
rc=$?
[ -f "$out/late/matrix.csv" ] || fail "the late run wrote no matrix.csv (exit $rc): $(tail -5 "$out/late.log")"
v=$(field "$out/late" verdict)
cov=$(field "$out/late" coverage)
grep -q "missed: A's sale .* had left the section when the kill struck" "$out/late/matrix/fenced-kill/nemesis" ||
    fail "the late kill did not say it missed: $(cat "$out/late/matrix/fenced-kill/nemesis" 2>/dev/null)"
[[ $cov != *holder_inside* ]] || fail "the late kill met nobody inside, yet holder_inside is covered: '$cov'"
[ "$v" = inconclusive ] || fail "the late kill's verdict is $v, not inconclusive"
[ "$rc" = 1 ] || fail "matrix.sh exited $rc on an inconclusive cell the expected file wants safe, not 1"
log "1.5 s late: the kill missed the sale, nothing covered, verdict $v (matrix.sh exit $rc)"
log PASS
