#!/usr/bin/env bash
# resilience_shutdown.sh -- a shutdown under load releases the locks it holds.
#
# Two instances behind nginx sell with redisson under 200 clients; the lease
# is 30 s, so a lock left behind by a stopping instance would block the
# other for 30 s. One instance, holding the lock inside a slow sale
# (hold_ms=1500), gets SIGTERM mid-load: the test waits until the probe
# lists that very sale inside the critical section (a holder of that
# instance, present across 200 ms, which no ordinary sale of this load
# lasts), and fails if it never is. Passes when: it exits 0 after finishing
# that sale, which answers sold with hold_ms >= 1500 and the order the probe
# listed; its hold is gone from the lock's hash once it has exited, and the
# survivor sells (in under 10 s, long before the 30 s lease would end); and
# the audit shows nothing oversold, no unit
# sold twice and no violation.
# Usage: resilience_shutdown.sh <inventoryd> <inventory-load>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=resilience-shutdown

take_binaries "$@"
clients=200
requests=6000
stock=4000
ttl_ms=30000
strategy=redisson

require_tools redis-server redis-cli nginx curl jq
clear_env '^INVENTORYD_'
setup_work resilience-shutdown

pick_stack_ports
start_redis
start_instance "$port1" --set lock.ttl-ms=$ttl_ms --set lock.wait-ms=20000; pid1=$inst_pid
start_instance "$port2" --set lock.ttl-ms=$ttl_ms --set lock.wait-ms=20000 \
    --set faults.enabled=true; pid2=$inst_pid
start_front
reset_stock "$strategy"
# The stopped instance's id: the prefix of its orders ("<id>-<n>"), which
# its probe entries use as field names.
curl -sf -o "$work/id.json" --max-time 10 "http://127.0.0.1:$port2/inventory/sale/atomic" ||
    fail "a first sale on $port2 failed"
id2=$(jq -r .order "$work/id.json"); id2=${id2%-*}
[ -n "$id2" ] || fail "no order in $(cat "$work/id.json")"

"$load" --host 127.0.0.1 --port "$nginx_port" --path "/inventory/sale/$strategy" \
    --clients "$clients" --requests "$requests" --timeout-ms 30000 --format kv \
    >"$work/load.out" 2>"$work/load.log" &
load_pid=$!
sleep 0.3
# A slow sale on the instance to be stopped: it holds the lock 1.5 s.
curl -s -o "$work/hold.json" -w '%{http_code}' --max-time 30 \
    "http://127.0.0.1:$port2/inventory/sale/$strategy?hold_ms=1500" >"$work/hold.code" 2>/dev/null &
hold_pid=$!
pids+=("$hold_pid")
# Inside: a holder of that instance, the same one 200 ms apart.
held= last= deadline=$(( $(now_ms) + 15000 ))
while [ -z "$held" ]; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "the hold_ms sale on $port2 was not seen holding the lock within 15 s"
    kill -0 "$hold_pid" 2>/dev/null ||
        fail "the hold_ms sale on $port2 ended before it was seen holding the lock: $(cat "$work/hold.json")"
    kill -0 "$load_pid" 2>/dev/null || fail "the load ended before the hold_ms sale held the lock"
    now=$(rcli HKEYS inventory001:holders | grep "^$id2-" | head -n 1)
    if [ -n "$now" ] && [ "$now" = "$last" ]; then held=$now; else last=$now; sleep 0.2; fi
done
log "the slow sale $held of $port2 is inside the critical section"
# Its lock: the one owner field of the lock's hash while it is inside.
owner=$(rcli HKEYS RedisDistributedLock)
[ "$(wc -w <<<"$owner")" = 1 ] || fail "the lock has $(wc -w <<<"$owner") owners while the slow sale is inside: $owner"
[ "$(rcli HEXISTS inventory001:holders "$held")" = 1 ] || fail "the slow sale left before the SIGTERM"
t_term=$(now_ms)
kill -TERM "$pid2"
wait "$pid2"
status=$?
forget_pid "$pid2"
t_exit=$(now_ms)
[ "$status" = 0 ] || fail "the stopped instance exited $status (wanted 0 after SIGTERM)"
wait "$hold_pid"
forget_pid "$hold_pid"
log "SIGTERM to exit: $((t_exit - t_term)) ms; the slow sale answered $(cat "$work/hold.code"): $(cat "$work/hold.json")"
[ "$(cat "$work/hold.code")" = 200 ] || fail "the sale in flight was not finished before the exit"
expect "the slow sale: status" "$(jq -r .status "$work/hold.json")" sold
expect "the slow sale: its order vs the holder the probe listed" "$(jq -r .order "$work/hold.json")" "$held"
hold_ms=$(jq -r .lock.hold_ms "$work/hold.json")
[ "$hold_ms" -ge 1500 ] || fail "the slow sale held the lock $hold_ms ms, not its hold_ms 1500"
[ $((t_exit - t_term)) -ge 200 ] || fail "the instance exited $((t_exit - t_term)) ms after SIGTERM: before its sale could finish"

# The lock was released before the exit, not left for its 30 s lease: the
# stopped instance's owner field is gone from the lock's hash (whoever
# holds it now is the survivor), and the survivor sells, long before the
# lease would have ended (10 s, a third of it, leaves a loaded machine room).
expect "the stopped instance's hold in the lock ($owner) after its exit" \
    "$(rcli HEXISTS RedisDistributedLock "$owner")" 0
t0=$(now_ms)
code=$(curl -s -o "$work/after.json" -w '%{http_code}' --max-time 15 \
    "http://127.0.0.1:$port1/inventory/sale/$strategy")
took=$(( $(now_ms) - t0 ))
log "a sale on the survivor right after the exit: $code in $took ms"
[ "$code" = 200 ] || fail "the survivor answered $code: $(cat "$work/after.json")"
[ "$took" -lt 10000 ] || fail "the survivor waited $took ms: the stopped instance left its lock behind"

wait "$load_pid"
load_pid=
base="http://127.0.0.1:$port1"   # the audit from the survivor, not via nginx
fetch_audit "$strategy"
expect "audit.oversold" "$(jqv "$strategy" .oversold)" false
expect "audit.sold_twice" "$(jqv "$strategy" .sold_twice)" 0
expect "audit.violations" "$(jqv "$strategy" .violations)" 0
log "PASS a shutdown under load finished its sale, released its lock and oversold nothing ($(cat "$work/load.out"))"
exit 0
