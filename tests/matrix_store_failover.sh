#!/usr/bin/env bash
# matrix_store_failover.sh BUILD_DIR: the lock stores' own failover, in the
# safety matrix's store-failover column (issue 35), for the two fenced
# store locks:
#   zookeeper-fenced: the leader of a 3-server ZooKeeper ensemble is killed
#     while a holder of A is inside; another member is elected; the
#     holder's session moves to it and lives, so its node does too: the
#     cell is safe and the holder sold.
#   mysql-fenced: MariaDB is killed while a holder of A is inside and
#     started again on its datadir; the restart dropped the holder's
#     GET_LOCK, the next holder is granted under it, and the fence (or
#     the stock check) refuses the holder's stale write: nothing sold
#     twice, no stock/ledger gap, the holder answered 409; the checker
#     still counts the two holds inside at once (overlap): unsafe, as the
#     expected file says.
# Each cell must first show that its fault happened (the coverage events:
# the holder inside at the strike, the store down with it inside, and the
# store back, a new leader or MariaDB answering, with it inside still)
# before its outcome is judged. Exits 77 (skipped) without ZooKeeper or
# MariaDB.
set -uo pipefail
tag=matrix-store-failover
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath "${1:?usage: matrix_store_failover.sh BUILD_DIR}")
out=$(mktemp -d /tmp/inventoryd-matrix-store-failover.XXXXXX)
failed=0
trap '[ "$failed" = 1 ] && echo "$tag: kept $out" >&2 || rm -rf "$out"' EXIT
fail() { echo "$tag: FAIL: $*" >&2; failed=1; exit 1; }
log() { echo "$tag: $*"; }

if [ ! -x /usr/share/zookeeper/bin/zkServer.sh ] || ! command -v mariadbd >/dev/null; then
    log "skipped: ZooKeeper (zkServer.sh) or MariaDB (mariadbd) is not installed (scripts/deps.sh)"
    exit 77
fi

MATRIX_BUILD_DIR=$build MATRIX_STRATEGIES="zookeeper-fenced mysql-fenced" MATRIX_NEMESES=store-failover \
    MATRIX_RESULTS_DIR=$out bash "$root/scripts/matrix.sh" >"$out/matrix.log" 2>&1
rc=$?
[ -f "$out/matrix.csv" ] || fail "matrix.sh wrote no matrix.csv (exit $rc): $(tail -5 "$out/matrix.log")"

# field S NAME: the cell S x store-failover's column NAME in matrix.csv.
field() {
    awk -F, -v s="$1" -v k="$2" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        $1 == s && $2 == "store-failover" { print $c[k] }' "$out/matrix.csv"
}

# covered S EVENT...: the cell's coverage lists every EVENT, or the test fails
# saying what the nemesis saw.
covered() {
    local s=$1 e cov
    shift
    cov=$(field "$s" coverage)
    for e in "$@"; do
        [[ ";$cov;" == *";$e;"* ]] ||
            fail "$s: the fault did not show $e (coverage '$cov'): $(cat "$out/matrix/$s-store-failover/nemesis" 2>/dev/null)"
    done
}

# The faults happened, first.
covered zookeeper-fenced holder_inside store_down_while_held leader_elected_while_held
grep -q "killed; member [123] leader [0-9]* ms later" "$out/matrix/zookeeper-fenced-store-failover/nemesis" ||
    fail "zookeeper-fenced: the nemesis does not name the new leader: $(cat "$out/matrix/zookeeper-fenced-store-failover/nemesis")"
covered mysql-fenced holder_inside store_down_while_held store_back_while_held
grep -q "MariaDB killed and started again" "$out/matrix/mysql-fenced-store-failover/nemesis" ||
    fail "mysql-fenced: the nemesis does not say MariaDB restarted: $(cat "$out/matrix/mysql-fenced-store-failover/nemesis")"
log "the faults happened: $(head -n 1 "$out/matrix/zookeeper-fenced-store-failover/nemesis"); $(head -n 1 "$out/matrix/mysql-fenced-store-failover/nemesis")"

# Then the outcomes.
v=$(field zookeeper-fenced verdict)
[ "$v" = safe ] || fail "zookeeper-fenced under the leader's kill: $v, not safe ($(grep 'zookeeper-fenced' "$out/matrix.log" | tail -n 1))"
grep -q '"status":"sold"' "$out/matrix/zookeeper-fenced-store-failover/special-answers" ||
    fail "zookeeper-fenced: the holder did not sell through the election: $(cat "$out/matrix/zookeeper-fenced-store-failover/special-answers")"
log "zookeeper-fenced: safe, the holder's node outlived the election and it sold"

v=$(field mysql-fenced verdict)
for k in sold_twice oversold_units stock_ledger late_writes lost_sales; do
    [ "$(field mysql-fenced "$k")" = 0 ] || fail "mysql-fenced under MariaDB's restart: $k $(field mysql-fenced "$k"), not 0"
done
[ "$(field mysql-fenced overlapping_holds)" -gt 0 ] 2>/dev/null ||
    fail "mysql-fenced: no overlapping holds, yet the restart freed the holder's lock inside its lease ($v)"
grep -qE '"status":"(stale_token|stock_changed)"' "$out/matrix/mysql-fenced-store-failover/special-answers" ||
    fail "mysql-fenced: the holder's stale write was not refused: $(cat "$out/matrix/mysql-fenced-store-failover/special-answers")"
[ "$v" = unsafe ] || fail "mysql-fenced: verdict $v, not unsafe (overlap)"
log "mysql-fenced: nothing sold twice, the holder's write refused ($(grep -oE '"status":"[a-z_]*"' "$out/matrix/mysql-fenced-store-failover/special-answers")), $(field mysql-fenced overlapping_holds) overlapping holds"
[ "$rc" = 0 ] || fail "matrix.sh exited $rc: a cell contradicts the expected file"
log PASS
