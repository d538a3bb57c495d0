#!/usr/bin/env bash
# matrix_store_faults.sh BUILD_DIR: the lock stores' own faults, in the
# safety matrix's store-failover and session-end columns (issue 35):
#   store-failover, for the two fenced store locks:
#     zookeeper-fenced: the leader of a 3-server ZooKeeper ensemble is
#       killed while a holder of A is inside; another member is elected;
#       the holder's session moves to it and lives, so its node does too:
#       the cell is safe and the holder sold.
#     mysql-fenced: MariaDB is killed while a holder of A is inside and
#       started again on its datadir; the restart dropped the holder's
#       GET_LOCK, the next holder is granted under it, and the fence (or
#       the stock check) refuses the holder's stale write: nothing sold
#       twice, no stock/ledger gap, the holder answered 409; the checker
#       still counts the two holds inside at once (overlap): unsafe, as the
#       expected file says.
#   session-end, for all four: the holder's store session is ended from
#     outside once it is inside (end_session=1); the next holder is
#     granted under it. zookeeper and mysql, not told, write their stale
#     read: units sold twice (their flaw). zookeeper-fenced and
#     mysql-fenced have their write refused (409 stale_token): nothing
#     sold twice, no oversold unit, no stock/ledger gap (the fix), though
#     the holds overlapped.
# Each cell must first show that its fault happened (the coverage events:
# the holder inside at the strike, the store down with it inside, and the
# store back, a new leader or MariaDB answering, with it inside still; the
# session ended while held, and another granted before the holder's write)
# before its outcome is judged. Exits 77 (skipped) without ZooKeeper or
# MariaDB.
set -uo pipefail
tag=matrix-store-faults
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath "${1:?usage: matrix_store_faults.sh BUILD_DIR}")
out=$(mktemp -d /tmp/inventoryd-matrix-store-faults.XXXXXX)
failed=0
trap '[ "$failed" = 1 ] && echo "$tag: kept $out" >&2 || rm -rf "$out"' EXIT
fail() { echo "$tag: FAIL: $*" >&2; failed=1; exit 1; }
log() { echo "$tag: $*"; }

if [ ! -x /usr/share/zookeeper/bin/zkServer.sh ] || ! command -v mariadbd >/dev/null; then
    log "skipped: ZooKeeper (zkServer.sh) or MariaDB (mariadbd) is not installed (scripts/deps.sh)"
    exit 77
fi

MATRIX_BUILD_DIR=$build MATRIX_STRATEGIES="zookeeper zookeeper-fenced mysql mysql-fenced" \
    MATRIX_NEMESES="store-failover session-end" \
    MATRIX_RESULTS_DIR=$out bash "$root/scripts/matrix.sh" >"$out/matrix.log" 2>&1
rc=$?
[ -f "$out/matrix.csv" ] || fail "matrix.sh wrote no matrix.csv (exit $rc): $(tail -5 "$out/matrix.log")"

# field S N NAME: the cell S x N's column NAME in matrix.csv.
field() {
    awk -F, -v s="$1" -v n="$2" -v k="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $1 == s && $2 == n { print $c[k] }' "$out/matrix.csv"
}

# covered S N EVENT...: the cell S x N's coverage lists every EVENT, or the
# test fails saying what the nemesis saw.
covered() {
    local s=$1 n=$2 e cov
    shift 2
    cov=$(field "$s" "$n" coverage)
    for e in "$@"; do
        [[ ";$cov;" == *";$e;"* ]] ||
            fail "$s under $n: the fault did not show $e (coverage '$cov'): $(cat "$out/matrix/$s-$n/nemesis" 2>/dev/null)"
    done
}

# no_damage S N: the cell sold nothing twice, oversold nothing, and its
# stock and ledger agree.
no_damage() {
    local k
    for k in sold_twice oversold_units stock_ledger late_writes lost_sales; do
        [ "$(field "$1" "$2" "$k")" = 0 ] || fail "$1 under $2: $k $(field "$1" "$2" "$k"), not 0"
    done
}

# holder_said S N WORD: the holder's answer has status WORD.
holder_said() {
    grep -qE "\"status\":\"($3)\"" "$out/matrix/$1-$2/special-answers" ||
        fail "$1 under $2: the holder did not answer $3: $(cat "$out/matrix/$1-$2/special-answers")"
}

# The faults happened, first.
sf=store-failover
covered zookeeper-fenced $sf holder_inside store_down_while_held leader_elected_while_held
grep -q "killed; member [123] leader [0-9]* ms later" "$out/matrix/zookeeper-fenced-$sf/nemesis" ||
    fail "zookeeper-fenced: the nemesis does not name the new leader: $(cat "$out/matrix/zookeeper-fenced-$sf/nemesis")"
covered mysql-fenced $sf holder_inside store_down_while_held store_back_while_held
grep -q "MariaDB killed and started again" "$out/matrix/mysql-fenced-$sf/nemesis" ||
    fail "mysql-fenced: the nemesis does not say MariaDB restarted: $(cat "$out/matrix/mysql-fenced-$sf/nemesis")"
for s in zookeeper zookeeper-fenced mysql mysql-fenced; do
    covered "$s" session-end holder_inside session_ended_while_held granted_after_session_end
done
log "the faults happened: $(head -n 1 "$out/matrix/zookeeper-fenced-$sf/nemesis"); $(head -n 1 "$out/matrix/mysql-fenced-$sf/nemesis"); each session-end holder's session ended and another was granted before its write"

# Then the outcomes: the store's failover.
v=$(field zookeeper-fenced $sf verdict)
[ "$v" = safe ] || fail "zookeeper-fenced under the leader's kill: $v, not safe ($(grep 'zookeeper-fenced' "$out/matrix.log" | tail -n 1))"
holder_said zookeeper-fenced $sf sold
log "zookeeper-fenced: safe, the holder's node outlived the election and it sold"

v=$(field mysql-fenced $sf verdict)
no_damage mysql-fenced $sf
[ "$(field mysql-fenced $sf overlapping_holds)" -gt 0 ] 2>/dev/null ||
    fail "mysql-fenced: no overlapping holds, yet the restart freed the holder's lock inside its lease ($v)"
holder_said mysql-fenced $sf 'stale_token|stock_changed'
[ "$v" = unsafe ] || fail "mysql-fenced: verdict $v, not unsafe (overlap)"
log "mysql-fenced: nothing sold twice, the holder's write refused, $(field mysql-fenced $sf overlapping_holds) overlapping holds"

# The session ended under the holder: the unfenced rungs' flaw, the
# fenced rungs' fix.
for s in zookeeper mysql; do
    [ "$(field "$s" session-end sold_twice)" -gt 0 ] 2>/dev/null ||
        fail "$s under session-end: nothing sold twice, yet the holder wrote after another was granted"
    holder_said "$s" session-end sold
    log "$s: its session ended, the holder, not told, sold: $(field "$s" session-end sold_twice) unit(s) sold twice"
done
for s in zookeeper-fenced mysql-fenced; do
    no_damage "$s" session-end
    holder_said "$s" session-end stale_token
    log "$s: its session ended, the holder's write refused (stale_token): nothing sold twice"
done
[ "$rc" = 0 ] || fail "matrix.sh exited $rc: a cell contradicts the expected file"
log PASS
