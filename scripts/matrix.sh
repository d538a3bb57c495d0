#!/usr/bin/env bash
# matrix.sh -- the safety matrix: every strategy under every fault.
#
# For each nemesis (a fault injected while real load runs) and each
# strategy, one cell: two inventoryd instances (A and B) on throwaway
# redis-servers, each driven by inventory-load with --record (what every
# client was told); the nemesis strikes about a second in (the holder
# nemeses put a holder of A inside the critical section on an idle lock,
# start the loads, and strike 0.2 s later); then
# inventory-check judges the cell from the recorded history, the ledger, the
# stock and the clients' answers (tools/checker.h). The verdict is unsafe
# (any safety finding: holds valid at once, a unit sold twice, a write past
# its lease, a sale answered but not in the ledger, stock and ledger that
# disagree), inconclusive (nothing unsafe, but the fault missed its window:
# see coverage below; or the history lost events), unavailable (no sale
# was served, sold or sold_out, in the second half of the time from the
# fault to the last answer: it did not recover), or safe. The share of
# requests served after the fault is shown. Each cell is then set against
# the expected file (loadtest/matrix-expected.tsv), which names the one
# verdict each cell must have: safe, unsafe or unavailable.
#
# Coverage. Every nemesis records the events that prove it reached its
# window (matrix/<cell>/coverage, and the covered and coverage columns of
# matrix.csv): a holder inside when the fault struck (holder_inside), its
# hold outliving the TTL (hold_past_ttl), a reply that was lost
# (reply_lost), a lock held when Redis restarted (lock_held_at_restart), a
# lock absent on the promoted replica (lock_lost_in_failover), a Redlock
# master holding the lock when it was killed (master_held_lock), another
# lock selling on the key while the holder was stopped inside
# (other_lock_sold), a hold that spanned a reset (reset_inside), the lock's
# own store down while the holder was inside (store_down_while_held) and
# back, under a new ZooKeeper leader (leader_elected_while_held) or a
# restarted MariaDB (store_back_while_held), the holder still inside. A cell
# whose window was not reached is never safe: it is inconclusive.
#
#   scripts/matrix.sh            every strategy under every nemesis (about 17 min)
#   scripts/matrix.sh --short    the cells named "short" in the expected file
#
# The nemeses (each bounded in time, each stopping what it started):
#   kill      a holder on A killed inside the critical section (SIGKILL); A restarted
#   pause     a holder on A paused past its lease (SIGSTOP for 2 TTL, then SIGCONT)
#   latency   Redis sleeps through replies: DEBUG SLEEP 0.45 s three times,
#             the instances' redis.timeout being 300 ms
#   restart   the data Redis restarted without persistence; the stock is set
#             again in Redis, and the cell is judged from then on
#   failover  the Redis holding the lock fails over before the lock reached its
#             replica: for the single-master strategies the data Redis (lock
#             and stock live together, as in the demo) with A on the master and
#             B on the replica; for redlock one of the three masters
#   redlock-restart  one Redlock master killed and restarted empty (redlock only)
#   pool      A's pool has 2 connections, a holder on A works 1.3 TTL, and A's
#             other clients wait behind it
#   drift     A runs under libfaketime at a fifth of real speed, and a holder
#             on A works 270 ms by its own clock (1.35 s real, past the TTL);
#             A dates its events by that clock, so overlapping holds are not
#             judged in this column (units sold twice and the ledger are);
#             B's load starts once that holder is inside
#   mixed-key A's holder (1.5 s) is paused past its lease (as pause) while B's load
#             sells on the same lock key under another lock of the family:
#             handoff (owner-lua when the cell is handoff), which takes an
#             expired key without bumping fenced's fence
#   reset     POST /inventory/reset with a new stock (twice the old) while a
#             holder of A is inside (TTL 3 s, hold 2 s: its lease still
#             running when it writes): the cell sells
#             inventory002 under the global lock, so the reset frees no lock
#             and only the write's own check of the stock it read stands
#             between the holder and the reset; judged from the reset on
#   store-failover  the lock's own store fails while a holder of A is inside
#             (zookeeper and mysql strategies only; TTL and session 5 s, hold
#             4 s: the lease outlasts the hold, so only the fault can end
#             the lock): for zookeeper*, the leader of a 3-server ZooKeeper
#             ensemble (their store in this column) is killed (SIGKILL) and,
#             once another member leads, started again; for mysql*, MariaDB
#             is killed (SIGKILL) and started again on its datadir and port,
#             which drops every GET_LOCK
#   session-end  the lock's store session ends under a holder of A (zookeeper
#             and mysql strategies only; TTL and session 5 s, hold 2 s): the
#             holder's sale carries the lab's end_session=1, which, once it
#             is inside, expires its ZooKeeper session through a second
#             handle, or KILLs its MariaDB connection from another; the
#             holder is not told and writes after its hold
#
# Environment: MATRIX_STRATEGIES, MATRIX_NEMESES (all), MATRIX_TTL_MS (1000),
# MATRIX_CLIENTS (6 per instance), MATRIX_REQUESTS (100000 per instance: in
# practice the time bound ends every load), MATRIX_MAX_S (5: a load begins no
# request after this), MATRIX_HOLD_MS (10: each sale's hold_ms),
# MATRIX_ERROR_PAUSE_MS (20: after a request with no answer or a 5xx, its
# client waits this long, so that a dead instance's refusals do not make up
# most of the requests), MATRIX_STRIKE_LATE_MS (0: the holder nemeses strike
# this much later, past the holder's hold; the test that a missed window is
# inconclusive, tests/matrix_missed.sh), MATRIX_STORE_SESSION_MS (5000: the
# ZooKeeper session timeout of the store-failover column, whose holder holds
# 4 s; 1000 to 10000), MATRIX_RESULTS_DIR (results), MATRIX_EXPECTED
# (loadtest/matrix-expected.tsv), MATRIX_BUILD_DIR (build).
# Writes $MATRIX_RESULTS_DIR/matrix.md, matrix.csv, matrix.png, and per cell
# matrix/<strategy>-<nemesis>/ (the answers, the checker's JSON, logs).
# Exit status: 0 when every cell agrees with the expected file, 1 when one
# contradicts it, 2 when the stack could not be set up.
set -uo pipefail
# shellcheck disable=SC2317  # the nemesis_* functions are called by name

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=matrix
. "$root/scripts/lib.sh"

short=0
case "${1:-}" in
    '') ;;
    --short) short=1 ;;
    -h | --help) sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "usage: scripts/matrix.sh [--short]   (--help: what it runs)" >&2; exit 2 ;;
esac
ttl=${MATRIX_TTL_MS:-1000}
clients=${MATRIX_CLIENTS:-6}
requests=${MATRIX_REQUESTS:-100000}
max_s=${MATRIX_MAX_S:-5}
hold=${MATRIX_HOLD_MS:-10}
pause=${MATRIX_ERROR_PAUSE_MS:-20}
strike_late_ms=${MATRIX_STRIKE_LATE_MS:-0}
results=${MATRIX_RESULTS_DIR:-$root/results}
expected=${MATRIX_EXPECTED:-$root/loadtest/matrix-expected.tsv}
build=${MATRIX_BUILD_DIR:-$root/build}
all_nemeses="kill pause latency restart failover redlock-restart pool drift mixed-key reset store-failover session-end"
read -r -a nemeses <<<"${MATRIX_NEMESES:-$all_nemeses}"
faketime_lib=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
stock=100000
item=inventory001   # the cell's item: inventory002 under the reset nemesis
item_q=             # its query string ("&item=inventory002"), "" for the configured item
reset_ttl=3000      # the reset column's TTL, and its holder's hold, well within it
reset_hold=2000
store_ttl=5000      # the store-failover column's TTL (MariaDB's wait_timeout: 5 s),
store_hold=4000     # its holder's hold, within it: only the fault can end that lock,
store_session=${MATRIX_STORE_SESSION_MS:-$store_ttl}   # and its ZooKeeper sessions
session_hold=2000   # the session-end column's hold (its TTL and session: store_ttl's)
special_q=          # more of the holder's query string ("&end_session=1" under session-end)

die() { echo "$tag: $*" >&2; exit 2; }
case "$strike_late_ms" in ''|*[!0-9]*) die "MATRIX_STRIKE_LATE_MS must be a whole number of ms" ;; esac
case "$store_session" in
    '' | *[!0-9]*) die "MATRIX_STORE_SESSION_MS must be a whole number of ms" ;;
    *) if [ "$store_session" -lt 1000 ] || [ "$store_session" -gt 10000 ]; then
           die "MATRIX_STORE_SESSION_MS must be 1000 to 10000 (the sessions a tickTime of 500 ms allows)"
       fi ;;
esac
find_builds "$build"
require_tools redis-server redis-cli curl jq gnuplot
[ -f "$expected" ] || die "no expected file $expected"
mapfile -t listed < <("$inventoryd" --list-strategies)
read -r -a strategies <<<"${MATRIX_STRATEGIES:-${listed[*]}}"

# expect_of S N: the expected file's word for a cell ("safe", "unsafe",
# "unavailable"), "n/a", or "" when the file does not name it.
expect_of() { awk -F'\t' -v s="$1" -v n="$2" '$1 == s && $2 == n { print $3; exit }' "$expected"; }
# short_cell S N: true when the expected file marks the cell for --short.
short_cell() { awk -F'\t' -v s="$1" -v n="$2" '$1 == s && $2 == n && $5 == "short" { f = 1 } END { exit !f }' "$expected"; }

setup_work matrix
mkdir -p "$results/matrix"
now_us() { echo "${EPOCHREALTIME/./}"; }   # no process: the strike path must be quick under load

# ---- the stack ------------------------------------------------------------
pick_port; redis_port=$port
start_redis "$redis_port" data --enable-debug-command local
data_pid=$redis_pid
masters=()
master_pids=()
for i in 0 1 2; do
    pick_port
    start_redis "$port" "master-$i"
    masters+=("$port")
    master_pids+=("$redis_pid")
done
nodes="127.0.0.1:${masters[0]},127.0.0.1:${masters[1]},127.0.0.1:${masters[2]}"
pick_port; port_a=$port
pick_port; port_b=$port
a_pid=; b_pid=

common=(--set lock.ttl-ms="$ttl" --set lock.wait-ms=2000 --set faults.enabled=true
        --set faults.max-hold-ms=5000 --set redis.timeout=500 --set redlock.node-timeout-ms=50
        --set history.enabled=true)

# store_of S: where strategy S keeps its lock when that is not Redis
# (zookeeper, mysql); fails for the others.
store_of() {
    case $1 in
        zookeeper | zookeeper-fenced) echo zookeeper ;;
        mysql | mysql-fenced) echo mysql ;;
        *) return 1 ;;
    esac
}

# store_wanted STORE [ensemble]: some cell this run will judge has its lock
# in STORE; with "ensemble", some store-failover cell of STORE (whose
# ZooKeeper is the 3-server ensemble), without it some cell of another
# column (zookeeper: the standalone server).
store_wanted() {
    local s n e
    for s in "${strategies[@]}"; do
        [ "$(store_of "$s")" = "$1" ] || continue
        for n in "${nemeses[@]}"; do
            if [ "$1" = zookeeper ]; then
                [ "${2:-}" = ensemble ] && [ "$n" != store-failover ] && continue
                [ "${2:-}" != ensemble ] && [ "$n" = store-failover ] && continue
            fi
            e=$(expect_of "$s" "$n")
            [ "$e" = n/a ] && continue
            [ "$short" = 1 ] && ! short_cell "$s" "$n" && continue
            return 0
        done
    done
    return 1
}

# The lock stores, one server each, started only when a cell needs them.
# ZooKeeper's session is the zookeeper locks' lease: it times out after the
# matrix TTL (start_zookeeper's tickTime of 500 ms allows 1 s to 10 s).
# MariaDB's is the mysql locks': each session's wait_timeout is lock.ttl-ms
# rounded up to whole seconds (src/lock_mysql.c), 1 s at the matrix TTL.
# The store-failover column's zookeeper cells keep their lock in an
# ensemble of three instead (started with that column, its connect string
# in that column's instances only), whose leader the nemesis kills: one
# ZooKeeper has no failover.
zk_port=; mysql_port=
if store_wanted zookeeper; then
    pick_port; zk_port=$port
    start_zookeeper "$zk_port"
    common+=(--set zookeeper.connect="127.0.0.1:$zk_port" --set zookeeper.session-timeout-ms="$ttl")
fi
if store_wanted mysql; then
    pick_port; mysql_port=$port
    start_mariadb "$mysql_port"
    common+=(--set mysql.host=127.0.0.1 --set mysql.port="$mysql_port")
fi

# instance PORT REDIS_PORT NODES [--faketime] [ARG...]: starts inventoryd,
# waits until it answers; sets inst_pid.
instance() {
    local port=$1 rport=$2 rnodes=$3 pre=()
    shift 3
    if [ "${1:-}" = --faketime ]; then
        pre=(env LD_PRELOAD="$faketime_lib" FAKETIME="+0 x0.2" FAKETIME_NO_CACHE=1)
        shift
    fi
    (cd "$work" && exec "${pre[@]}" "$inventoryd" --set server.port="$port" \
        --set server.bind=127.0.0.1 --set redis.port="$rport" --set redlock.nodes="$rnodes" \
        "${common[@]}" "${extra_both[@]}" "$@" >>"$work/inventoryd-$port.log" 2>&1) &
    inst_pid=$!
    pids+=("$inst_pid")
    wait_http "$inst_pid" "$port" /strategies "inventoryd on $port"
}
extra_both=()

stop_instances() {
    local p
    for p in $a_pid $b_pid; do stop_pid "$p"; forget_pid "$p"; done
    a_pid=; b_pid=
}

# the instance id of the inventoryd on PORT (its order ids' prefix), from a
# sale of a throwaway item, so that the cell's own stock is not touched
instance_id() {
    curl -s -XPOST "http://127.0.0.1:$1/inventory/reset" -d '{"stock":1000000,"item":"matrix-id"}' >/dev/null
    curl -s "http://127.0.0.1:$1/inventory/sale/atomic?item=matrix-id" | jq -r '.order // "" | split("-")[0]'
}

# reset PORT: the cell's stock set again; the configured item's reset also
# frees the global lock, which the reset of another item never does.
reset() {
    curl -sf -XPOST "http://127.0.0.1:$1/inventory/reset" -d "{\"stock\":$stock}" >/dev/null || return 1
    [ "$item" = inventory001 ] ||
        curl -sf -XPOST "http://127.0.0.1:$1/inventory/reset" -d "{\"stock\":$stock,\"item\":\"$item\"}" >/dev/null
}

# ---- a cell -------------------------------------------------------------------
# loads_start S: both loads, in the background, recording what clients saw.
loads_start() {
    local s=$1 path="/inventory/sale/$1?hold_ms=$hold$item_q"
    "$load" --port "$port_a" --path "$path" --clients "$clients" --requests "$requests" \
        --max-s "$max_s" --timeout-ms 10000 --error-pause-ms "$pause" --record "$cell/told-a" --format kv \
        >"$cell/load-a.kv" 2>"$cell/load-a.log" &
    load_a=$!
    [ "${b_late:-0}" = 1 ] || load_b_start "${b_strategy:-$s}"
}

# load_b_start S: B's load, in the background (started late by the nemeses
# that need A's holder inside before B contends).
load_b_start() {
    "$load" --port "$port_b" --path "/inventory/sale/$1?hold_ms=$hold$item_q" --clients "$clients" \
        --requests "$requests" --max-s "$max_s" --timeout-ms 10000 --error-pause-ms "$pause" \
        --record "$cell/told-b" --format kv >"$cell/load-b.kv" 2>"$cell/load-b.log" &
    load_b=$!
}

loads_wait() {
    local p
    for p in $load_a $load_b; do wait "$p" 2>/dev/null; done
    load_a=; load_b=
}

# special PORT S HOLD: one sale holding HOLD ms, in the background; its
# answer goes to told-special.
special() {
    local port=$1 s=$2 h=$3
    (
        body=$(curl -s --max-time 20 -w '\n%{http_code} %{time_total}' "http://127.0.0.1:$port/inventory/sale/$s?hold_ms=$h$item_q$special_q")
        code=${body##*$'\n'}
        body=${body%$'\n'*}
        # the holder's answer and its real time, for the coverage
        echo "${code#* } $body" >>"$cell/special-answers"
        code=${code% *}
        st=$(jq -r '.status // "error"' <<<"$body" 2>/dev/null || echo error)
        [ -n "$st" ] || st=error
        echo "$(now_us) ${code:-0} $st $(jq -r '.order // "-"' <<<"$body" 2>/dev/null || echo -) $(jq -r '.unit // 0' <<<"$body" 2>/dev/null || echo 0)"
    ) >>"$cell/told-special" &
    special_pid=$!
}

# a_inside: sets inside_now to the orders of A's sales in the probe's
# holders now, each followed by a space. Asked on the connection hit_inside opened to the data Redis
# (look_fd, RESP by hand), so that a look starts no process: on a machine
# where one takes 50 ms, three looks of redis-cli did not fit in a hold.
a_inside() {
    local line n i len field value
    inside_now=
    printf 'HGETALL %s\r\n' "$item:holders" >&"$look_fd" || return 1
    IFS= read -r -t 2 -u "$look_fd" line || return 1
    line=${line%$'\r'}
    [ "${line:0:1}" = '*' ] || return 1
    n=${line:1}
    for ((i = 0; i < n; i += 2)); do
        IFS= read -r -t 2 -u "$look_fd" len && IFS= read -r -t 2 -u "$look_fd" field &&
            IFS= read -r -t 2 -u "$look_fd" len && IFS= read -r -t 2 -u "$look_fd" value || return 1
        [[ ${value%$'\r'} == *":alive:$id_a" ]] && inside_now+="${field%$'\r'} "
    done
    return 0
}
# nap_fd: a pipe nobody writes to; read -t on it waits without a process.
exec {nap_fd}<> <(:)
# nap SECONDS: sleep without starting a process (the loads keep both cores
# busy, and a sleep's fork and exec can take longer than the wait itself).
nap() { read -r -t "$1" -u "$nap_fd" _ || true; }

# hit_inside S HOLD: sends A a sale of S holding HOLD ms, again (at most 4
# sales) when it is refused in the lock's wait, until one of A's sales stays
# inside the critical section: the probe lists the same sale of A in three
# looks 60 ms apart (a long hold, not a passing 10 ms one); sets
# inside_order. Returns 1, and says so in the cell, when none ever did.
# Seeing it inside is not the coverage: the fault strikes later, and
# inside_at_strike says whether the sale was still inside then.
hit_inside() {
    local s=$1 h=$2 i tries=0 now p1=" " p2=" " o
    exec {look_fd}<>"/dev/tcp/127.0.0.1/$redis_port" || fail "no connection to the data Redis"
    for i in $(seq 1 120); do
        if [ -z "${special_pid:-}" ] || ! kill -0 "$special_pid" 2>/dev/null; then
            [ "$tries" -ge 4 ] && break
            special "$port_a" "$s" "$h"
            tries=$((tries + 1))
        fi
        a_inside
        now=" $inside_now"
        for o in $now; do
            case "$p1$p2" in *" $o "*" $o "*) inside_order=$o; exec {look_fd}>&-; return 0 ;; esac
        done
        p2=$p1
        p1=$now
        nap 0.06
    done
    exec {look_fd}>&-
    echo "missed: no sale of A stayed inside" >>"$cell/nemesis"
    return 1
}

# inside_at_strike WHAT: the sale of A that hit_inside saw inside is inside
# still (its entry in the probe's holders, which its exit deletes): the
# fault WHAT met it, and holder_inside is covered. Else the cell says that
# the fault missed it, and nothing is covered: a holder seen inside 0.3 s
# earlier may have left. Called at the strike (after A is stopped, for the
# faults that stop it: a command it sent just before is applied within
# the 50 ms they wait).
inside_at_strike() {
    if [ -n "${inside_order:-}" ] && [ "$(rcli HEXISTS "$item:holders" "$inside_order")" = 1 ]; then
        covered holder_inside "$1 met A's sale $inside_order inside"
    else
        echo "missed: A's sale ${inside_order:-?} had left the section when the $1 struck" >>"$cell/nemesis"
    fi
}

# covered EVENT [DETAIL]: the nemesis reached this part of its window. Kept
# in the cell until it is judged, then written into the item's history as a
# coverage event (a restart or a failover would have lost it), where
# inventory-check reads it.
covered() { printf '%s %s %s\n' "$1" "$(now_us)" "${2:-}" >>"$cell/coverage"; }

# record_coverage PORT N: the cell's coverage events into the history of the
# Redis on PORT, the one the checker reads.
record_coverage() {
    local ev at detail
    [ -f "$cell/coverage" ] || return 0
    while read -r ev at detail; do
        redis-cli -p "$1" XADD "$item:history" '*' outcome coverage event "$ev" \
            source "matrix/$2" at_us "$at" detail "${detail:-}" >/dev/null
    done <"$cell/coverage"
}

# needs N S: the coverage events nemesis N must show for a cell to be judged
# safe (the events that make its fault dangerous), comma-separated for
# inventory-check --need.
needs() {
    if lock_free "$2"; then
        case $1 in latency | restart) echo reply_lost; return ;; esac
    fi
    case $1 in
        kill) echo holder_inside ;;
        pause | pool | drift) echo holder_inside,hold_past_ttl ;;
        latency) echo holder_inside,reply_lost ;;
        restart)
            if no_redis_lock "$2"; then echo holder_inside; else echo holder_inside,lock_held_at_restart; fi ;;
        failover)
            # Redlock: one master of three loses the lock; the others: the
            # data Redis loses the last sales (and the lock when held).
            if [ "$2" = redlock ]; then echo lock_lost_in_failover; else echo sales_lost_in_failover; fi ;;
        redlock-restart) echo master_held_lock ;;
        mixed-key) echo holder_inside,hold_past_ttl,other_lock_sold ;;
        reset) echo reset_inside ;;
        store-failover)
            # the store down with the holder inside, and back (a new leader,
            # a restarted MariaDB) with the holder inside still
            if [ "$(store_of "$2")" = zookeeper ]; then echo holder_inside,store_down_while_held,leader_elected_while_held
            else echo holder_inside,store_down_while_held,store_back_while_held; fi ;;
        session-end) echo holder_inside,session_ended_while_held,granted_after_session_end ;;
    esac
}

# holder_outlived_ttl: the holder put inside by hit_inside held its lock
# past the TTL by the real clock (a hold read from the history, dated by
# Redis as its write or event applied, else by the special sale's time).
holder_outlived_ttl() {
    local ev granted=0 written=0
    if [ -n "${inside_order:-}" ]; then
        ev=$(curl -s "http://127.0.0.1:$port_b/inventory/history?limit=5000" |
            jq -c --arg o "$inside_order" '.events[] | select(.order == $o)' 2>/dev/null | head -n 1)
        granted=$(jq -r '.granted_us // 0' <<<"$ev" 2>/dev/null || echo 0)
        written=$(jq -r '.written_us // 0' <<<"$ev" 2>/dev/null || echo 0)
    fi
    if [ "${granted:-0}" -gt 0 ] && [ "${written:-0}" -gt 0 ]; then
        [ $((written - granted)) -gt $((ttl * 1000)) ] && covered hold_past_ttl
        return 0
    fi
    # No event (the holder was killed, or its clock drifts): how long its
    # sale stayed inside, by what the nemesis measured.
    [ "${held_for_ms:-0}" -gt "$ttl" ] && covered hold_past_ttl
    return 0
}

# lock_key S: the key of strategy S's lock (lock.scope global).
lock_key() { echo RedisDistributedLock; }

# lock_exists S: S's lock is held now, where it lives: on the first Redlock
# master for redlock; in ZooKeeper, a node of some session under
# /locks/<key> (the lowest one holds, and a waiter's node is there only
# behind it); in MariaDB, the named lock in use by some session; else on
# the data Redis.
lock_exists() {
    local p=$redis_port
    case $(store_of "$1") in
        zookeeper) zk_word "$(zk_port_now)" dump | grep -q "^[[:space:]]*/locks/$(lock_key "$1")/"; return ;;
        mysql) [ "$(mysql_query "SELECT IS_USED_LOCK('$(lock_key "$1")') IS NOT NULL")" = 1 ]; return ;;
    esac
    [ "$1" = redlock ] && p=${masters[0]}
    [ "$(redis-cli -p "$p" EXISTS "$(lock_key "$1")" 2>/dev/null)" = 1 ]
}

# zk_port_now: the port of the ZooKeeper the cell's lock is in: the
# standalone server's, or under store-failover the ensemble's leader's
# (any member lists every ephemeral node; the leader is sure to serve).
zk_port_now() {
    local l
    if [ "$n" = store-failover ]; then
        l=$(zk_leader)
        echo "${zk_ens_ports[${l:-0}]}"
    else
        echo "$zk_port"
    fi
}

# mysql_query SQL: the matrix's MariaDB's one-value answer to SQL.
mysql_query() {
    mariadb --no-defaults -h 127.0.0.1 -P "$mysql_port" -u root -N -B -e "$1" 2>/dev/null
}

# store_settled S: no lock of S is left in its store from an earlier cell
# (the ZooKeeper node of a killed holder lives until its session expires,
# the session timeout rounded up to a tick; a MariaDB lock dies with its
# session at once), waited for up to 4 TTL; the cell fails when one is left.
store_settled() {
    local i
    store_of "$1" >/dev/null || return 0
    # the ensemble is not up before its column's first cell (nothing of an
    # earlier cell there); after, an earlier cell's killed leader must be
    # back: one leader, two followers
    if [ "$n" = store-failover ] && [ "$(store_of "$1")" = zookeeper ]; then
        [ -n "$zk_ens_connect" ] || return 0
        zk_ensemble_wait 60 || fail "$1: the ZooKeeper ensemble did not settle again in 60 s"
    fi
    for i in $(seq 1 $((4 * ttl / 100))); do
        lock_exists "$1" || return 0
        sleep 0.1
    done
    fail "$1: a lock of an earlier cell is still held in $(store_of "$1") after $((4 * ttl)) ms"
}

# lock_free S: S takes no lock (one script per sale): no holder to strike.
lock_free() { [ "$1" = atomic ]; }

# no_redis_lock S: S keeps no lock in any store (none, local, atomic); the
# zookeeper and mysql locks live in their stores, where lock_exists looks.
no_redis_lock() { case $1 in none | local | atomic) return 0 ;; esac; return 1; }

# ---- the nemeses ------------------------------------------------------------------

# The holder nemeses (kill, pause, pool, drift) put their holder inside first,
# on an idle lock, and only then start the loads, which contend through the
# fault: a holder that had to win the lock against the loads could lose it
# for seconds (a slow spin, a slowed clock) and strike after the loads ended.
holder_first() { case $1 in kill | pause | pool | drift | latency | restart | mixed-key | reset | store-failover | session-end) return 0 ;; esac; return 1; }

# loads_then_strike S: the loads, in flight for 0.2 s (and
# MATRIX_STRIKE_LATE_MS more); sets struck.
loads_then_strike() {
    loads_start "$1"
    nap 0.2
    [ "$strike_late_ms" -gt 0 ] && sleep "$(awk -v t="$strike_late_ms" 'BEGIN { print t / 1000 }')"
    struck=${EPOCHREALTIME/./}
}

nemesis_kill() {
    hit_inside "$1" 800 || return 0
    loads_then_strike "$1"
    kill -STOP "$a_pid"
    nap 0.05
    inside_at_strike kill
    kill_pid "$a_pid"
    echo "A killed" >>"$cell/nemesis"
    sleep "$(awk -v t="$ttl" 'BEGIN { print 1.5 * t / 1000 }')"
    instance "$port_a" "$redis_port" "$nodes"; a_pid=$inst_pid
    id_a=$(instance_id "$port_a")
}

nemesis_pause() {
    hit_inside "$1" 800 || return 0
    loads_then_strike "$1"
    kill -STOP "$a_pid"
    nap 0.05
    inside_at_strike pause
    echo "A paused for $((2 * ttl)) ms" >>"$cell/nemesis"
    sleep "$(awk -v t="$ttl" 'BEGIN { print 2 * t / 1000 }')"
    kill -CONT "$a_pid"
    wait "$special_pid" 2>/dev/null
    held_for_ms=$((2 * ttl))   # paused inside, at the least
    holder_outlived_ttl
}

# answers_lost: some answer since the strike was backend_unavailable (a
# command whose reply timed out or whose connection died).
answers_lost() {
    cat "$cell"/told-* 2>/dev/null |
        awk -v t="$struck" '$1 >= t && $3 == "backend_unavailable" { f = 1 } END { exit !f }'
}

# Latency: Redis sleeps 2 TTL (DEBUG SLEEP) while a holder of A is inside,
# the instances' redis.timeout being 300 ms: the holder's write goes out
# during the sleep, its reply is lost, and Redis applies it only after the
# lock's TTL has passed. A lock-free sale has no holder: its window is a
# script whose reply was lost.
nemesis_latency() {
    local s=$1 secs
    secs=$(awk -v t="$ttl" 'BEGIN { print 2 * t / 1000 }')
    if lock_free "$s"; then
        loads_start "$s"
        sleep 0.5
        struck=$(now_us)
    else
        hit_inside "$s" 900 || return 0
        loads_then_strike "$s"
        inside_at_strike "Redis's sleep"
    fi
    local said fd
    # on a connection of its own, opened by the shell: no process between
    # the check that the holder is inside and the sleep
    exec {fd}<>"/dev/tcp/127.0.0.1/$redis_port" && printf 'DEBUG SLEEP %s\r\n' "$secs" >&"$fd" &&
        IFS= read -r -u "$fd" said
    exec {fd}>&-
    said=${said%$'\r'}
    said=${said#+}
    echo "DEBUG SLEEP $secs s: $said" >>"$cell/nemesis"
    if lock_free "$s"; then
        loads_wait
        answers_lost && covered reply_lost "a sale's reply timed out while Redis slept"
        return 0
    fi
    wait "$special_pid" 2>/dev/null
    # The holder's own reply was lost: it answered backend_unavailable.
    case $(tail -n 1 "$cell/special-answers") in
        *'"backend_unavailable"'*) covered reply_lost "the holder's write timed out while Redis slept" ;;
    esac
    return 0
}

# Restart: the data Redis restarted without persistence while a holder of A
# is inside (a lock-free sale: while the loads run).
nemesis_restart() {
    if lock_free "$1"; then
        loads_start "$1"
        sleep 0.5
        struck=$(now_us)
    else
        hit_inside "$1" 800 || return 0
        loads_then_strike "$1"
        inside_at_strike restart
        lock_exists "$1" && covered lock_held_at_restart
    fi
    stop_pid "$data_pid"
    forget_pid "$data_pid"
    sleep 0.3
    start_redis "$redis_port" data --enable-debug-command local
    data_pid=$redis_pid
    # The stock is set again in Redis itself: the service's reset would also
    # free the lock of a sale in progress, an overlap the restart did not make.
    since=$(now_us)
    rcli MSET "$item" "$stock" "$item:initial" "$stock" >/dev/null
    echo "the data Redis restarted empty; stock set again" >>"$cell/nemesis"
    if lock_free "$1"; then
        loads_wait
        answers_lost && covered reply_lost "a sale in flight lost its connection in the restart"
    fi
    return 0
}

nemesis_redlock_restart() {
    [ "$(redis-cli -p "${masters[1]}" EXISTS "$(lock_key "$1")")" = 1 ] && covered master_held_lock
    kill_pid "${master_pids[1]}"
    sleep 0.3
    start_redis "${masters[1]}" master-1
    master_pids[1]=$redis_pid
    echo "master 1 killed and restarted empty" >>"$cell/nemesis"
}

nemesis_pool() {
    hit_inside "$1" "$((ttl * 13 / 10))" || return 0
    loads_then_strike "$1"
    inside_at_strike "loads' contention"
    echo "a holder on A (pool of 2) works $((ttl * 13 / 10)) ms" >>"$cell/nemesis"
    wait "$special_pid" 2>/dev/null
    held_for_ms=0
    holder_outlived_ttl
}

nemesis_drift() {
    hit_inside "$1" 270 || return 0
    loads_then_strike "$1"
    inside_at_strike "loads' contention"
    echo "a holder on A (clock at x0.2) works 270 ms by its clock" >>"$cell/nemesis"
    wait "$special_pid" 2>/dev/null
    # A's clock is slowed: its events cannot be compared with Redis's, so the
    # holder's real time inside is bounded by its sale's, as curl timed it.
    held_for_ms=$(tail -n 1 "$cell/special-answers" | awk '{ printf "%d", $1 * 1000 }')
    inside_order=
    holder_outlived_ttl
}

# partner S: the other lock of S's family that B sells with under
# mixed-key, on the same key: handoff (the review's recipe: it takes an
# expired key without bumping fenced's fence), owner-lua for handoff itself.
partner() { if [ "$1" = handoff ]; then echo owner-lua; else echo handoff; fi; }

# history_from MS: the cell item's recorded holds from Redis's millisecond
# MS on (a stream id), as JSON lines, read from B (A may be stopped).
history_from() {
    curl -s "http://127.0.0.1:$port_b/inventory/history?item=$item&since=$1-0&limit=5000" |
        jq -c '.events[]?' 2>/dev/null
}

# Mixed key: as pause, but B's load sells with another lock of the family
# on the same key (partner), and the holder works 1.5 s (a lease that is not
# renewed runs out inside it, as in the review's recipe; a renewed one runs
# out in the pause). The window: A's holder inside at the stop, its
# hold past the TTL, and B selling under the other lock while A is stopped
# (its sold events, dated by Redis, between the stop and the continue).
nemesis_mixed_key() {
    local s=$1 p stopped cont n
    p=$(partner "$s")
    hit_inside "$s" 1500 || return 0
    loads_then_strike "$s"
    kill -STOP "$a_pid"
    stopped=$(now_us)
    nap 0.05
    inside_at_strike pause
    echo "A paused for $((2 * ttl)) ms; B sells under $p on the same key" >>"$cell/nemesis"
    sleep "$(awk -v t="$ttl" 'BEGIN { print 2 * t / 1000 }')"
    cont=$(now_us)
    kill -CONT "$a_pid"
    n=$(history_from $((stopped / 1000)) | jq -s --arg p "$p" --argjson hi "$cont" \
        '[.[] | select(.strategy == $p and .outcome == "sold" and .written_us > 0 and .written_us < $hi)] | length')
    [ "${n:-0}" -gt 0 ] 2>/dev/null &&
        covered other_lock_sold "B sold $n unit(s) under $p on the key while A's $s holder was stopped inside"
    wait "$special_pid" 2>/dev/null
    held_for_ms=$((2 * ttl))   # paused inside, at the least
    holder_outlived_ttl
}

# Reset: a holder of A inside (2 s, within the column's 3 s lease: the
# lease is not what this fault is about, and cannot be what refuses the
# write), the loads waiting for the lock; then POST /inventory/reset of the cell's item with
# a new stock. The cell sells inventory002 under the global lock: the reset
# frees no lock, so the holder still holds when its write arrives, and only
# the write's check of the stock it read can refuse it. The reset empties
# the ledger and the history, so the cell is judged from the reset on
# (answers given before it are not judged), against the new stock. The
# window: a hold granted before the reset whose event is in the history the
# reset began (its write reached Redis after the reset).
nemesis_reset() {
    local s=$1 new=$((stock * 2)) at ev said
    hit_inside "$s" "$reset_hold" || return 0
    loads_then_strike "$s"
    since=$(now_us)
    at=$since
    said=$(curl -s -XPOST "http://127.0.0.1:$port_b/inventory/reset" -d "{\"stock\":$new,\"item\":\"$item\"}")
    echo "POST /inventory/reset {\"stock\":$new,\"item\":\"$item\"} with A's sale $inside_order seen inside: $said" >>"$cell/nemesis"
    wait "$special_pid" 2>/dev/null
    ev=$(history_from $((at / 1000)) | jq -r --argjson t "$at" \
        'select(.granted_us > 0 and .granted_us < $t) | "\(.instance) \(.owner) granted \(.granted_us), \(.outcome)"' | head -n 1)
    [ -n "$ev" ] && covered reset_inside "a hold spanned the reset at $at: $ev"
    return 0
}

# still_inside: A's sale that hit_inside saw inside is in the probe's
# holders now (its exit deletes its entry).
still_inside() { [ -n "${inside_order:-}" ] && [ "$(rcli HEXISTS "$item:holders" "$inside_order")" = 1 ]; }

# Session end: the holder of A (session_hold ms, within the column's
# store_ttl lease and session) ends its own store session once inside (the
# lab's end_session=1: a second ZooKeeper handle on its session, closed;
# KILL CONNECTION of its MariaDB session from another), and goes on, not
# told. The window: the holder inside as the loads start (holder_inside),
# its session ended, as its answer says (session_ended_while_held), and
# another hold granted after the session was gone and before the holder's
# write (granted_after_session_end): the lock freed under a holder that
# still writes.
nemesis_session_end() {
    local s=$1 ans gone end ev
    special_q="&end_session=1"
    hit_inside "$s" "$session_hold"
    local inside=$?
    special_q=
    [ "$inside" = 0 ] || return 0
    loads_then_strike "$s"
    inside_at_strike "session's end"
    wait "$special_pid" 2>/dev/null
    ans=$(tail -n 1 "$cell/special-answers" | cut -d' ' -f2-)
    echo "A's holder with end_session=1 answered: $ans" >>"$cell/nemesis"
    [ "$(jq -r '.session_ended // false' <<<"$ans" 2>/dev/null)" = true ] || {
        echo "missed: the holder's session was not ended: $(jq -r '.session_error // "no word"' <<<"$ans" 2>/dev/null)" >>"$cell/nemesis"
        return 0
    }
    gone=$(jq -r '.session_gone_us' <<<"$ans")
    covered session_ended_while_held "A's sale $inside_order: its session gone at $gone, inside its hold"
    # the holder's write as Redis applied it; else (refused, or no event)
    # its answer's time, just after it
    end=$(history_from $((gone / 1000 - 5000)) |
        jq -r --arg o "$inside_order" 'select(.order == $o) | .written_us // 0' | head -n 1)
    [ "${end:-0}" -gt 0 ] 2>/dev/null || end=$(tail -n 1 "$cell/told-special" | cut -d' ' -f1)
    ev=$(history_from $((gone / 1000)) | jq -r --arg o "$inside_order" --argjson lo "$gone" --argjson hi "$end" \
        'select(.order != $o and .granted_us > $lo and .granted_us < $hi) | "\(.instance) \(.owner) granted \(.granted_us), \(.outcome)"' |
        head -n 1)
    [ -n "$ev" ] && covered granted_after_session_end "after the session's end, before the holder's write at $end: $ev"
    return 0
}

# Store failover: the lock's own store fails while a holder of A is inside
# (store_hold ms, within the column's store_ttl lease and session: only the
# fault can end its lock). The window: the holder inside at the strike
# (holder_inside), still inside once the store is down
# (store_down_while_held), and still inside once it is back
# (leader_elected_while_held, store_back_while_held): a lock the failover
# lost could then be granted to another under it.
nemesis_store_failover() {
    local s=$1
    # the leader, found before the holder goes in: nothing elects another
    # until the strike, and its hold must not wait for the looks
    [ "$(store_of "$s")" = zookeeper ] && zk_old_leader=$(zk_leader)
    hit_inside "$s" "$store_hold" || return 0
    loads_then_strike "$s"
    inside_at_strike "store's failure"
    case $(store_of "$s") in
        zookeeper)
            local expired
            expired=$(zk_expired)
            store_fail_zookeeper
            wait "$special_pid" 2>/dev/null
            # what the failover did to the sessions, for the record: a
            # session the new leader expired lost its nodes
            echo "sessions the ensemble expired from the strike to the holder's answer: $(( $(zk_expired) - expired ))" >>"$cell/nemesis" ;;
        mysql) store_fail_mysql ;;
    esac
    wait "$special_pid" 2>/dev/null
    return 0
}

# zk_expired: how many sessions the ensemble's members have expired so far
# (their logs' "Expiring session" lines), on stdout.
zk_expired() { cat "$work"/zk-ensemble-*.log 2>/dev/null | grep -c 'Expiring session' || true; }

# store_fail_zookeeper: the ensemble's leader (srvr, zk_old_leader) killed
# (SIGKILL); once another member says leader (polled, at most 15 s), the
# killed one is started again on its data (it rejoins as a follower; the
# next cell waits until the ensemble has settled).
store_fail_zookeeper() {
    local old=$zk_old_leader new t0 i
    if [ -z "$old" ]; then
        echo "missed: no member of the ensemble said leader at the strike" >>"$cell/nemesis"
        return 0
    fi
    t0=$(now_us)
    zk_member_kill "$old"
    still_inside && covered store_down_while_held \
        "the leader, member $((old + 1)) (port ${zk_ens_ports[$old]}), killed with A's sale $inside_order inside"
    for i in $(seq 1 300); do
        new=$(zk_leader)
        [ -n "$new" ] && break
        nap 0.05
    done
    if [ -n "$new" ]; then
        echo "the leader, member $((old + 1)), killed; member $((new + 1)) leader $(( ($(now_us) - t0) / 1000 )) ms later (its log: $(grep -h 'LEADING - LEADER ELECTION TOOK' "$work/zk-ensemble-$((new + 1)).log" | tail -n 1 | sed 's/.*LEADING - //'))" >>"$cell/nemesis"
        if still_inside; then
            covered leader_elected_while_held "member $((new + 1)) leads, $(( ($(now_us) - t0) / 1000 )) ms after the kill, A's sale $inside_order still inside"
        else
            echo "missed: A's sale $inside_order had left the section when member $((new + 1)) led" >>"$cell/nemesis"
        fi
    else
        echo "missed: the leader, member $((old + 1)), killed, and no member led within 15 s" >>"$cell/nemesis"
    fi
    zk_member_start "$old" "$work/zk-ensemble-$((old + 1)).log"
}

# store_fail_mysql: MariaDB killed (SIGKILL), which frees every GET_LOCK
# with its sessions, and started again on the same datadir and port.
store_fail_mysql() {
    local t0
    t0=$(now_us)
    kill_pid "$mariadb_pid"
    still_inside && covered store_down_while_held "MariaDB killed with A's sale $inside_order inside"
    start_mariadb "$mysql_port"
    echo "MariaDB killed and started again on its datadir: answering $(( ($(now_us) - t0) / 1000 )) ms after the kill" >>"$cell/nemesis"
    if still_inside; then
        covered store_back_while_held "MariaDB answering again $(( ($(now_us) - t0) / 1000 )) ms after the kill, A's sale $inside_order still inside"
    else
        echo "missed: A's sale $inside_order had left the section when MariaDB answered again" >>"$cell/nemesis"
    fi
}

# replica_of MASTER_PORT NAME: a redis-server replicating MASTER_PORT, in
# sync; sets replica_port and replica_pid.
replica_of() {
    local i
    pick_port; replica_port=$port
    start_redis "$replica_port" "$2"
    replica_pid=$redis_pid
    # Redis 7 waits 5 s before a diskless full sync, for more replicas to come
    redis-cli -p "$1" CONFIG SET repl-diskless-sync-delay 0 >/dev/null
    redis-cli -p "$replica_port" REPLICAOF 127.0.0.1 "$1" >/dev/null
    for i in $(seq 1 200); do
        case $(redis-cli -p "$replica_port" INFO replication) in *master_link_status:up*) return 0 ;; esac
        sleep 0.05
    done
    fail "replica on $replica_port never synced with $1"
}

# promote MASTER_PID MASTER_PORT: freezes the replica, cuts it off, lets the
# master take writes it will never pass on (0.4 s, and until it has taken a
# sale, at most 5 s more), then fails over (promoted).
promote() {
    local at i
    cut_replica "$2"
    at=$(redis-cli -p "$2" LLEN "$item:sold" 2>/dev/null)
    sleep 0.4
    for i in $(seq 1 100); do
        [ "$(redis-cli -p "$2" LLEN "$item:sold" 2>/dev/null)" -gt "${at:-0}" ] 2>/dev/null && break
        sleep 0.05
    done
    promoted "$@"
}

# cut_replica MASTER_PORT: freezes the replica and cuts it off: from now on
# the master takes writes its replica will never see.
cut_replica() {
    kill -STOP "$replica_pid"
    redis-cli -p "$1" CLIENT KILL TYPE replica >/dev/null
}

# promoted MASTER_PID MASTER_PORT: kills the master, promotes the (cut off)
# replica, and records what the replica never saw.
promoted() {
    local held sold
    held=$(redis-cli -p "$2" EXISTS RedisDistributedLock 2>/dev/null)
    sold=$(redis-cli -p "$2" LLEN "$item:sold" 2>/dev/null)
    kill_pid "$1"
    kill -CONT "$replica_pid"
    redis-cli -p "$replica_port" REPLICAOF NO ONE >/dev/null
    # The window: the master held a lock, or sales, that the promoted
    # replica never saw.
    [ "$held" = 1 ] && [ "$(redis-cli -p "$replica_port" EXISTS RedisDistributedLock)" = 0 ] &&
        covered lock_lost_in_failover
    local kept
    kept=$(redis-cli -p "$replica_port" LLEN "$item:sold" 2>/dev/null)
    [ "${sold:-0}" -gt "${kept:-0}" ] &&
        covered sales_lost_in_failover "the master had $sold ledger entries, its replica $kept"
    return 0
}

# The failover cell builds its own stack. Single-master strategies: the data
# Redis fails over (A on the master, B on the replica, B's load starting once
# the replica is promoted); judged on the replica. Redlock: master 0 fails
# over (B counts on its replica instead); the data Redis is untouched.
cell_failover() {
    local s=$1
    if [ "$s" = redlock ]; then
        replica_of "${masters[0]}" "replica-$s"
        local nodes_b="127.0.0.1:$replica_port,127.0.0.1:${masters[1]},127.0.0.1:${masters[2]}"
        wait_voting "$ttl" "${masters[@]}"
        instance "$port_a" "$redis_port" "$nodes"; a_pid=$inst_pid
        instance "$port_b" "$redis_port" "$nodes_b"; b_pid=$inst_pid
        id_a=$(instance_id "$port_a")
        reset "$port_a" || fail "$s failover: reset"
        judge_port=$redis_port
        # A holder of A goes inside once master 0's replica is cut off, so
        # that its lock is on every master but not on that replica; then
        # master 0 fails over: B, counting on the replica, finds no lock
        # there.
        cut_replica "${masters[0]}"
        if hit_inside "$s" 1500; then
            loads_then_strike "$s"
            inside_at_strike failover
            echo "master 0 failed over to its replica before the lock reached it" >>"$cell/nemesis"
        else
            loads_start "$s"
        fi
        promoted "${master_pids[0]}" "${masters[0]}"
        loads_wait
        stop_instances
        stop_pid "$replica_pid"; forget_pid "$replica_pid"
        start_redis "${masters[0]}" master-0   # back, empty, for the next cells
        master_pids[0]=$redis_pid
        return
    fi
    local mport mpid
    pick_port; mport=$port
    start_redis "$mport" "failover-master-$s"
    mpid=$redis_pid
    replica_of "$mport" "failover-replica-$s"
    instance "$port_a" "$mport" "$nodes"; a_pid=$inst_pid
    instance "$port_b" "$replica_port" "$nodes"; b_pid=$inst_pid
    reset "$port_a" || fail "$s failover: reset"
    local i
    for i in $(seq 1 100); do
        [ "$(redis-cli -p "$replica_port" GET "$item")" = "$stock" ] && break
        sleep 0.05
    done
    judge_port=$replica_port
    b_late=1
    loads_start "$s"
    # the loads selling on the master: 0.8 s, and until a sale is in (at
    # most 10 s more), however slowly they started
    sleep 0.8
    for i in $(seq 1 200); do
        [ "$(redis-cli -p "$mport" LLEN "$item:sold" 2>/dev/null)" -gt 0 ] 2>/dev/null && break
        sleep 0.05
    done
    struck=$(now_us)
    promote "$mpid" "$mport"
    echo "the data Redis failed over before the lock and the last sales reached the replica" >>"$cell/nemesis"
    b_late=0
    load_b_start "$s"
    loads_wait
    stop_instances
    judge "$s" failover
    stop_pid "$replica_pid"; forget_pid "$replica_pid"
    judged=1
}

# ---- judging ---------------------------------------------------------------------

declare -A V      # V[s|n] = verdict
declare -A D      # D[s|n] = the cell's figures, for the table
declare -A C      # C[s|n] = "yes|no event event...": covered, and the coverage seen
rows=()

# judge S N: runs the checker on the cell and records the verdict.
judge() {
    local s=$1 n=$2 told=() f
    for f in "$cell"/told-*; do [ -f "$f" ] && told+=(--told "$f"); done
    # Under drift, A dates its events by its own slowed clock: holds of A
    # and B cannot be compared in time, so overlaps are not judged there.
    local skew=()
    [ "$n" = drift ] && skew=(--no-overlaps)
    record_coverage "${judge_port:-$redis_port}" "$n"
    "$checker" --redis "127.0.0.1:${judge_port:-$redis_port}" --item "$item" --need "$(needs "$n" "$s")" \
        --since-us "${since:-0}" --max-findings 20 "${skew[@]}" "${told[@]}" >"$cell/check.json" 2>"$cell/check.log"
    local rc=$?
    [ "$rc" -le 1 ] || [ "$rc" -eq 3 ] || [ "$rc" -eq 4 ] || { log "$s/$n: the checker failed: $(cat "$cell/check.log")"; }
    # Served, from the moment the nemesis struck: a sale that got sold or
    # sold_out, a definite answer about the stock; lock_timeout, 503 and
    # transport errors are not.
    local total answered
    total=$(cat "$cell"/told-* 2>/dev/null | awk -v t="${struck:-0}" '$1 >= t' | wc -l)
    answered=$(cat "$cell"/told-* 2>/dev/null |
        awk -v t="${struck:-0}" '$1 >= t && ($3 == "sold" || $3 == "sold_out")' | wc -l)
    local share=0
    [ "$total" -gt 0 ] && share=$("$stats" -d 2 ratio "$answered" "$total" 2>/dev/null || echo 0)
    # Recovered: some sale was served in the second half of the time from the
    # fault to the last answer. Requests that fail fast (a refused
    # connection) outnumber the slow ones; time does not lie that way.
    local last recovered
    last=$(cat "$cell"/told-* 2>/dev/null | awk 'BEGIN { m = 0 } $1 > m { m = $1 } END { print m }')
    recovered=$(cat "$cell"/told-* 2>/dev/null | awk -v t="${struck:-0}" -v e="$last" \
        'BEGIN { h = t + (e - t) / 2; n = 0 } $1 >= h && ($3 == "sold" || $3 == "sold_out") { n++ } END { print (n > 0) ? 1 : 0 }')
    local c=$cell/check.json over twice overlap late lost untold mismatch verdict needs_list
    needs_list=$(needs "$n" "$s")
    over=$(jq -r '.oversold_units // 0' "$c" 2>/dev/null || echo 0)
    twice=$(jq -r '.counts.sold_twice // 0' "$c" 2>/dev/null || echo 0)
    overlap=$(jq -r '.counts.overlap // 0' "$c" 2>/dev/null || echo 0)
    late=$(jq -r '.counts.late_write // 0' "$c" 2>/dev/null || echo 0)
    lost=$(jq -r '.counts.lost_sale // 0' "$c" 2>/dev/null || echo 0)
    untold=$(jq -r '.counts.untold_sale // 0' "$c" 2>/dev/null || echo 0)
    mismatch=$(jq -r '.counts.stock_ledger // 0' "$c" 2>/dev/null || echo 0)
    # The window, as the checker counted it: every event the nemesis needs
    # (recorded, or derived from the holds: lease_expired_inside).
    local seen is_covered e
    seen=$(jq -r '.coverage // {} | keys | join(" ")' "$c" 2>/dev/null)
    is_covered=$(jq -r 'if .covered then "yes" else "no" end' "$c" 2>/dev/null || echo no)
    for e in ${needs_list//,/ }; do
        case " $seen " in *" $e "*) ;; *) echo "missed: $e" >>"$cell/nemesis" ;; esac
    done
    if [ "$rc" -eq 1 ]; then verdict=unsafe      # a violation is its own evidence
    elif [ "$rc" -eq 3 ]; then verdict=inconclusive   # the history lost events: no verdict
    elif [ "$rc" -eq 4 ]; then verdict=inconclusive   # the fault missed its window
    elif [ "$rc" -ne 0 ]; then verdict=error
    elif [ "$recovered" != 1 ]; then verdict=unavailable
    else verdict=safe
    fi
    V["$s|$n"]=$verdict
    C["$s|$n"]="$is_covered $seen"
    D["$s|$n"]="$over $twice $overlap $late $lost $untold $mismatch $share $answered $total"
}

# ---- the run ------------------------------------------------------------------------
t0=$SECONDS
ncells=0
for n in "${nemeses[@]}"; do
    case " $all_nemeses " in *" $n "*) ;; *) die "unknown nemesis '$n' (known: $all_nemeses)" ;; esac
    stack_up=0
    for s in "${strategies[@]}"; do
        e=$(expect_of "$s" "$n")
        [ -n "$e" ] || die "$expected has no line for $s under $n"
        if [ "$e" = n/a ]; then V["$s|$n"]=n/a; continue; fi
        [ "$short" = 1 ] && ! short_cell "$s" "$n" && continue
        cell=$results/matrix/$s-$n
        rm -rf "$cell"; mkdir -p "$cell"
        since=0; struck=0; judge_port=; judged=0; load_a=; load_b=; b_late=0
        inside_order=; held_for_ms=0; special_pid=
        b_strategy=
        [ "$n" = mixed-key ] && b_strategy=$(partner "$s")
        item=inventory001; item_q=
        [ "$n" = reset ] && { item=inventory002; item_q="&item=$item"; }
        store_settled "$s"
        if [ "$n" = failover ]; then
            cell_failover "$s"
        else
            if [ "$stack_up" = 0 ]; then
                extra_a=()
                extra_both=()
                case $n in
                    latency) extra_both=(--set redis.timeout=300) ;;
                    pool) extra_a=(--set redis.pool-size=2) ;;
                    drift) extra_a=(--faketime) ;;
                    reset) extra_both=(--set lock.ttl-ms="$reset_ttl"
                                       --set zookeeper.session-timeout-ms="$reset_ttl") ;;
                    session-end) extra_both=(--set lock.ttl-ms="$store_ttl"
                                             --set zookeeper.session-timeout-ms="$store_session") ;;
                    store-failover) extra_both=(--set lock.ttl-ms="$store_ttl"
                                                --set zookeeper.session-timeout-ms="$store_session")
                                    if store_wanted zookeeper ensemble; then
                                        [ -n "$zk_ens_connect" ] || start_zookeeper_ensemble
                                        extra_both+=(--set zookeeper.connect="$zk_ens_connect")
                                    fi ;;
                esac
                instance "$port_a" "$redis_port" "$nodes" "${extra_a[@]}"; a_pid=$inst_pid
                instance "$port_b" "$redis_port" "$nodes"; b_pid=$inst_pid
                id_a=$(instance_id "$port_a")
                stack_up=1
            fi
            [ "$s" = redlock ] && wait_voting "$ttl" "${masters[@]}"
            reset "$port_a" || reset "$port_b" || fail "$s/$n: the reset failed"
            if ! holder_first "$n"; then
                loads_start "$s"
                sleep 1
                struck=$(now_us)
            fi
            "nemesis_${n//-/_}" "$s"
            loads_wait
            [ -n "${special_pid:-}" ] && wait "$special_pid" 2>/dev/null
            special_pid=
        fi
        [ "$judged" = 1 ] || judge "$s" "$n"
        ncells=$((ncells + 1))
        read -r over twice overlap late lost untold mismatch share answered total <<<"${D["$s|$n"]}"
        printf '%s: %-11s %-15s %-11s oversold %s, twice %s, overlaps %s, late %s, lost %s; served %s of %s (%s s)\n' \
            "$tag" "$s" "$n" "${V["$s|$n"]}" "$over" "$twice" "$overlap" "$late" "$lost" \
            "$answered" "$total" "$((SECONDS - t0))"
    done
    [ "$stack_up" = 1 ] && stop_instances
    extra_both=()
done

# ---- the table, the CSV, the picture ------------------------------------------------
contradictions=()
csv=$results/matrix.csv
md=$results/matrix.md
echo "strategy,nemesis,verdict,expected,agrees,covered,coverage,oversold_units,sold_twice,overlapping_holds,late_writes,lost_sales,untold_sales,stock_ledger,served_share,served,requests" >"$csv"
{
    echo "# The safety matrix"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%MZ), ${#strategies[@]} strategies x ${#nemeses[@]} nemeses, TTL $ttl ms,"
    echo "$clients clients per instance for $max_s s (at most $requests requests), hold_ms $hold. A cell:"
    echo "verdict (oversold units / units sold twice / overlapping holds / share of the requests"
    echo "answered after the fault struck that were served, sold or sold_out), then any other"
    echo "finding: writes past their lease (late), sales a client was told of that the ledger"
    echo "lacks (lost), ledger entries no client was told of (untold), stock and ledger that"
    echo "disagree (stock/ledger)."
    echo
    printf '| strategy |'; for n in "${nemeses[@]}"; do printf ' %s |' "$n"; done; echo
    printf '|---|'; for n in "${nemeses[@]}"; do printf -- '---|'; done; echo
} >"$md"
for s in "${strategies[@]}"; do
    printf '| %s |' "$s" >>"$md"
    for n in "${nemeses[@]}"; do
        v=${V["$s|$n"]:-}
        e=$(expect_of "$s" "$n")
        if [ -z "$v" ]; then printf ' |' >>"$md"; continue; fi
        if [ "$v" = n/a ]; then
            printf ' n/a |' >>"$md"
            echo "$s,$n,n/a,n/a,yes,,,,,,,,,,,," >>"$csv"
            continue
        fi
        read -r over twice overlap late lost untold mismatch share answered total <<<"${D["$s|$n"]}"
        read -r cov cov_events <<<"${C["$s|$n"]}"
        agrees=yes
        [ "$v" = "$e" ] || agrees=no
        # Never safe without its window (the checker sees to it; this says so
        # loudly should the two ever disagree).
        [ "$v" = safe ] && [ "$cov" != yes ] && agrees=no
        [ "$agrees" = no ] && contradictions+=("$s under $n: $v (covered $cov), expected $e")
        mark=$v; [ "$agrees" = no ] && mark="**$v (expected $e)**"
        more=""
        [ "$late" != 0 ] && more+=", late $late"
        [ "$lost" != 0 ] && more+=", lost $lost"
        [ "$untold" != 0 ] && more+=", untold $untold"
        [ "$mismatch" != 0 ] && more+=", stock/ledger $mismatch"
        printf ' %s %s/%s/%s/%s%s |' "$mark" "$over" "$twice" "$overlap" "$share" "$more" >>"$md"
        echo "$s,$n,$v,$e,$agrees,$cov,${cov_events// /;},$over,$twice,$overlap,$late,$lost,$untold,$mismatch,$share,$answered,$total" >>"$csv"
    done
    echo >>"$md"
done
{
    echo
    echo "Expected (loadtest/matrix-expected.tsv): the one verdict each cell must have. A cell"
    echo "whose fault missed its window is inconclusive, and contradicts any expectation."
    echo "${#contradictions[@]} contradictions."
    for c in "${contradictions[@]}"; do echo "- $c"; done
} >>"$md"

# by_store: the same verdicts turned around: one row per nemesis, one column
# per lock store (each store shown by the strategy that keeps its lock
# there), for the stores whose strategy this run judged. Only measured
# cells: a store whose strategy did not run has no column.
by_store() {
    local cols=() heads=() pair s label n v over twice overlap rest
    for pair in "redisson|Redis, one master (redisson)" "handoff|Redis, one master (handoff)" \
        "fenced|Redis + fence (fenced)" "redlock|Redlock, 3 masters (redlock)" \
        "zookeeper|ZooKeeper (zookeeper)" "zookeeper-fenced|ZooKeeper + czxid fence (zookeeper-fenced)" \
        "mysql|MariaDB GET_LOCK (mysql)" "mysql-fenced|MariaDB + counter fence (mysql-fenced)"; do
        s=${pair%%|*}
        label=${pair#*|}
        for n in "${nemeses[@]}"; do
            [ -n "${V["$s|$n"]:-}" ] && { cols+=("$s"); heads+=("$label"); break; }
        done
    done
    [ ${#cols[@]} -gt 0 ] || return 0
    echo
    echo "## By lock store"
    echo
    echo "The verdicts above, one column per store that keeps the lock (the stock and the"
    echo "ledger are always in the data Redis): verdict, oversold / sold twice / overlapping holds."
    echo
    printf '| nemesis |'; printf ' %s |' "${heads[@]}"; echo
    printf '|---|'; for s in "${cols[@]}"; do printf -- '---|'; done; echo
    for n in "${nemeses[@]}"; do
        printf '| %s |' "$n"
        for s in "${cols[@]}"; do
            v=${V["$s|$n"]:-}
            case $v in
                '') printf ' not run |' ;;
                n/a) printf ' n/a |' ;;
                *) read -r over twice overlap rest <<<"${D["$s|$n"]}"
                   printf ' %s %s/%s/%s |' "$v" "$over" "$twice" "$overlap" ;;
            esac
        done
        echo
    done
}
by_store >>"$md"

# The heatmap: 0 safe (green), 1 unsafe (red), 2 unavailable (grey), 3 n/a
# or not run (near white), 4 inconclusive (orange); each cell also carries
# its word, for readers who do not tell the colours apart.
dat=$work/matrix.dat
labels=$work/labels.dat
colours=(0x4daf4a 0xe41a1c 0x9e9e9e 0xf2f2f2 0xff9f1a)
: >"$dat"; : >"$labels"
for ((yi = 0; yi < ${#strategies[@]}; yi++)); do
    s=${strategies[$yi]}
    for ((xi = 0; xi < ${#nemeses[@]}; xi++)); do
        n=${nemeses[$xi]}
        v=${V["$s|$n"]:-}
        case $v in safe) z=0; w=ok ;; unsafe) z=1; w=UNSAFE ;; unavailable) z=2; w=stuck ;;
            inconclusive) z=4; w="missed" ;; *) z=3; w=${v:--} ;; esac
        if [ "$v" = unsafe ]; then
            # the verdict and its first kind of finding, on a second line
            read -r over twice overlap late lost untold mismatch _ <<<"${D["$s|$n"]}"
            w="UNSAFE"
            for f in "twice $twice" "overlap $overlap" "late $late" "lost $lost" \
                     "untold $untold" "stock/ledger $mismatch"; do
                [ "${f##* }" != 0 ] && { w="UNSAFE\\n$f"; break; }
            done
        fi
        # the colour itself, as an integer: a palette would blend neighbours
        echo "$xi $yi $(( ${colours[$z]} ))" >>"$dat"
        echo "$xi $yi \"$w\"" >>"$labels"
    done
    echo >>"$dat"
done
xt=$(for ((i = 0; i < ${#nemeses[@]}; i++)); do printf '"%s" %d,' "${nemeses[$i]}" "$i"; done)
yt=$(for ((i = 0; i < ${#strategies[@]}; i++)); do printf '"%s" %d,' "${strategies[$i]}" "$i"; done)
gnuplot <<EOF || log "gnuplot failed: no matrix.png"
set terminal pngcairo size 1200,$((140 + 46 * ${#strategies[@]})) font "DejaVu Sans,11"
set output "$results/matrix.png"
set title "Safety matrix: every strategy under every fault (label: verdict, then its first kind of finding)"
set xrange [-0.5:${#nemeses[@]}-0.5]
set yrange [${#strategies[@]}-0.5:-0.5]
set xtics (${xt%,}) scale 0
set ytics (${yt%,}) scale 0
set x2tics (${xt%,}) scale 0
unset xtics
set style fill solid 1.0 border lc rgb "white"
plot "$dat" using 1:2:(0.5):(0.5):3 with boxxyerror lc rgb variable notitle, \
     "$labels" using 1:2:3 with labels font "DejaVu Sans Bold,10" notitle
EOF

echo
cat "$md"
log "$ncells cells in $((SECONDS - t0)) s; results in $results/matrix.md, matrix.csv, matrix.png"
stop_started
if [ ${#contradictions[@]} -gt 0 ]; then
    log "FAIL: ${#contradictions[@]} cells contradict $expected"
    failed=1
    exit 1
fi
log "PASS: every cell agrees with $expected"
exit 0
