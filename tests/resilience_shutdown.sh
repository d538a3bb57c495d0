#!/usr/bin/env bash
# resilience_shutdown.sh -- a shutdown under load releases the locks it holds.
#
# Two instances behind nginx sell with redisson under 200 clients; the lease
# is 30 s, so a lock left behind by a stopping instance would block the
# other for 30 s. One instance, holding the lock inside a slow sale
# (hold_ms), gets SIGTERM mid-load. Passes when: it exits 0 after finishing
# that sale; the lock is free at once (the survivor sells in under 2 s, long
# before the lease would end); and the audit shows nothing oversold, no unit
# sold twice and no violation.
# Usage: resilience_shutdown.sh <inventoryd> <inventory-load>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
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
for _ in $(seq 1 200); do
    [ "$(rcli HLEN inventory001:holders)" = 1 ] && [ -n "$(rcli HKEYS RedisDistributedLock)" ] && break
    sleep 0.02
done
sleep 0.3   # well inside the slow sale
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

# The lock is free now, not in 30 s: the survivor sells at once.
t0=$(now_ms)
code=$(curl -s -o "$work/after.json" -w '%{http_code}' --max-time 10 \
    "http://127.0.0.1:$port1/inventory/sale/$strategy")
took=$(( $(now_ms) - t0 ))
log "a sale on the survivor right after the exit: $code in $took ms"
[ "$code" = 200 ] || fail "the survivor answered $code: $(cat "$work/after.json")"
[ "$took" -lt 2000 ] || fail "the survivor waited $took ms: the stopped instance left its lock behind"

wait "$load_pid"
load_pid=
base="http://127.0.0.1:$port1"   # the audit from the survivor, not via nginx
fetch_audit "$strategy"
expect "audit.oversold" "$(jqv "$strategy" .oversold)" false
expect "audit.sold_twice" "$(jqv "$strategy" .sold_twice)" 0
expect "audit.violations" "$(jqv "$strategy" .violations)" 0
log "PASS a shutdown under load finished its sale, released its lock and oversold nothing ($(cat "$work/load.out"))"
exit 0
