#!/usr/bin/env bash
# resilience_kill.sh INVENTORYD INVENTORY_LOAD
#
# Hardening: "An instance killed with SIGKILL in the middle of the load
# behind nginx: nothing oversold. The watchdog-based locks expire, and the
# other instance carries on."
#
# A throwaway redis-server, two inventoryd instances (strategy redisson,
# lock.ttl-ms=1500 so that a dead holder's lock expires quickly,
# lock.wait-ms=10000) behind a real nginx rendered by scripts/nginx-conf.sh,
# every port a free one, everything stopped by its pid on the way out.
# 200 clients make 8000 sales through nginx of a stock of 5000 (units are
# still selling when the kill comes, and the stock runs out after it).
#
# The kill (RESILIENCE_KILL_MODE):
#   held (default): the weight-2 instance, started with faults.enabled, gets
#       one extra sale ?hold_ms=5000 0.2 s into the load; once that sale
#       holds the lock inside the critical section (one probe holder listed
#       and the ledger stops growing), the instance gets SIGKILL. The test
#       then proves that the killed instance was the holder: the probe's
#       holder (its order id) and the lock's owner (its uuid) at the kill
#       are the killed instance's, as its holds in the history name it. So
#       the dead instance holds the lock: the survivor can only carry on once
#       the lock's TTL (1500 ms, no longer renewed) has run out, and the time
#       it took is measured and bounded.
#   random: SIGKILL RESILIENCE_KILL_AFTER (0.5) s into the load, wherever the
#       instance is (it holds the lock about half the time).
# Then:
#   clients: only sold, sold_out, lock_timeout, and nginx's 502s for the
#            requests that were on (or sent to) the dead instance; no
#            backend_unavailable, no transport error; the 502s are counted
#            from nginx's access log and reported, not failed on;
#   audit:   oversold false, sold_twice 0, oversold_units 0, violations 0,
#            stock + sold = initial, and clients' sold <= ledger <= clients'
#            sold + 502s (a 502 may hide a sale the dead instance made);
#   survivor: sold after the kill (held: within TTL + 2 s of it); the lock
#            RedisDistributedLock is gone or has a TTL after the load; still
#            healthy; reset to 200 and one sale sells unit 200; it stops
#            cleanly (exit 0) on SIGTERM.
# RESILIENCE_CLIENTS (200), RESILIENCE_REQUESTS (8000), RESILIENCE_STOCK
# (5000) override the load. Exit 0 on pass, 1 on the first failed assertion
# (named on stderr).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=resilience-kill

take_binaries "$@"
clients=${RESILIENCE_CLIENTS:-200}
requests=${RESILIENCE_REQUESTS:-8000}
stock=${RESILIENCE_STOCK:-5000}
mode=${RESILIENCE_KILL_MODE:-held}
kill_after=${RESILIENCE_KILL_AFTER:-0.5}
hold_ms=5000
ttl_ms=1500
wait_ms=10000
strategy=redisson
case "$mode" in held|random) ;; *) echo "$0: RESILIENCE_KILL_MODE is held or random" >&2; exit 2 ;; esac

require_tools redis-server redis-cli nginx curl jq
clear_env '^INVENTORYD_'
setup_work resilience-kill
hold_pid=
on_fail() {
    [ -n "$hold_pid" ] && kill -0 "$hold_pid" 2>/dev/null && stop_pid "$hold_pid"
    show_logs
}

# ---- the stack --------------------------------------------------------------
pick_stack_ports
log "mode $mode; $port2 (weight 2) is the instance to be killed"
start_redis
start_instance "$port1" --set lock.ttl-ms=$ttl_ms --set lock.wait-ms=$wait_ms; pid1=$inst_pid
start_instance "$port2" --set lock.ttl-ms=$ttl_ms --set lock.wait-ms=$wait_ms \
    --set faults.enabled=true; pid2=$inst_pid
start_front

code=$(curl -s -o "$work/reset.json" -w '%{http_code}' --max-time 10 -X POST \
    -H 'Content-Type: application/json' -d "{\"stock\":$stock}" "$base/inventory/reset")
[ "$code" = 200 ] || fail "POST /inventory/reset through nginx answered $code: $(cat "$work/reset.json")"
lines_before=$(wc -l <"$work/nginx/access.log")

# ---- the load, and the kill in its middle ------------------------------------
"$load" --host 127.0.0.1 --port "$nginx_port" --path "/inventory/sale/$strategy" \
    --clients "$clients" --requests "$requests" --timeout-ms 30000 --format kv \
    >"$work/load.out" 2>"$work/load.log" &
load_pid=$!
load_t0=$(now_ms)

if [ "$mode" = held ]; then
    sleep 0.2
    curl -s -o "$work/hold.json" --max-time 30 \
        "http://127.0.0.1:$port2/inventory/sale/$strategy?hold_ms=$hold_ms" 2>/dev/null &
    hold_pid=$!
    pids+=("$hold_pid")
    # Held: one holder inside and the ledger does not move for 8 polls (~160 ms).
    still=0 last=-1 deadline=$(( $(now_ms) + 10000 ))
    while [ "$still" -lt 8 ]; do
        [ "$(now_ms)" -lt "$deadline" ] || fail "the hold_ms sale did not get the lock within 10 s"
        kill -0 "$load_pid" 2>/dev/null ||
            fail "the load ended before the hold_ms sale held the lock ($(cat "$work/load.out"))"
        kill -0 "$hold_pid" 2>/dev/null ||
            fail "the hold_ms sale on $port2 ended before it was seen holding the lock: $(cat "$work/hold.json")"
        g=$(rcli HLEN inventory001:holders)
        n=$(rcli LLEN inventory001:sold)
        if [ "$g" = 1 ] && [ "$n" = "$last" ]; then still=$((still + 1)); else still=0; fi
        last=$n
        sleep 0.02
    done
else
    sleep "$kill_after"
    kill -0 "$load_pid" 2>/dev/null ||
        fail "the load ended before the kill at ${kill_after}s: raise RESILIENCE_REQUESTS ($(cat "$work/load.out"))"
fi
sold_at_kill=$(rcli LLEN inventory001:sold)
stock_at_kill=$(rcli GET inventory001)
# Who is inside: the probe's holder (its order id, "<instance>-<n>") and the
# lock's owner field ("<process uuid>:<n>"), judged after the kill.
probe_holder=$(rcli HKEYS inventory001:holders | tr '\n' ' ')
lock_owner=$(rcli HKEYS RedisDistributedLock | tr '\n' ' ')
kill_t=$(now_ms)
kill -KILL "$pid2" || fail "kill -KILL $pid2 (inventoryd on $port2) failed"
wait "$pid2" 2>/dev/null
st=$?
forget_pid "$pid2"
[ "$st" = 137 ] || fail "inventoryd on $port2 exited with $st, not 137 (SIGKILL): it was not running at the kill"
lock_at_kill="$(rcli HGETALL RedisDistributedLock | tr '\n' ' ')pttl $(rcli PTTL RedisDistributedLock)"
log "SIGKILL to inventoryd on $port2 (pid $pid2) $((kill_t - load_t0)) ms into the load;" \
    "$sold_at_kill units sold by then, $stock_at_kill left; the lock right after: $lock_at_kill"
[ "${stock_at_kill:-0}" -gt 0 ] ||
    fail "the stock had run out before the kill: raise RESILIENCE_STOCK (the survivor must be seen selling)"

# Held: the fault is a holder killed inside, so first prove that the killed
# instance was the holder. The history's holds by port $port2 name its
# instance and its lock owners' uuid; the probe's one holder and the lock's
# one owner at the kill must be that instance's.
if [ "$mode" = held ]; then
    curl -sf --max-time 10 "http://127.0.0.1:$port1/inventory/history?limit=1000" >"$work/history.json" ||
        fail "GET /inventory/history on the survivor failed"
    killed_instance=$(jq -r --argjson p "$port2" '[.events[] | select(.port == $p) | .instance] | unique | .[]' \
        "$work/history.json")
    killed_uuid=$(jq -r --argjson p "$port2" '[.events[] | select(.port == $p) | .owner | sub(":.*"; "")] | unique | .[]' \
        "$work/history.json")
    [ "$(wc -w <<<"$killed_instance")" = 1 ] && [ "$(wc -w <<<"$killed_uuid")" = 1 ] ||
        fail "cannot tell the killed instance from the history: instance(s) '$killed_instance', owner uuid(s) '$killed_uuid' for port $port2"
    [ "$(wc -w <<<"$probe_holder")" = 1 ] && [ "${probe_holder%%-*}" = "$killed_instance" ] ||
        fail "fault missed its window: the probe's holder(s) at the kill ($probe_holder) are not instance $killed_instance on $port2"
    [ "$(wc -w <<<"$lock_owner")" = 1 ] && [ "${lock_owner%%:*}" = "$killed_uuid" ] ||
        fail "fault missed its window: the lock's owner(s) at the kill ($lock_owner) are not the killed instance's ($killed_uuid:*)"
    log "the killed instance was the holder: probe holder $probe_holder, lock owner $lock_owner (instance $killed_instance)"
fi

# The survivor carries on: the ledger grows again (held: once the dead
# holder's lock has expired).
resumed=
deadline=$((kill_t + 20000))
while [ "$(now_ms)" -lt "$deadline" ]; do
    if [ "$(rcli LLEN inventory001:sold)" -gt "$sold_at_kill" ]; then resumed=$(( $(now_ms) - kill_t )); break; fi
    kill -0 "$load_pid" 2>/dev/null || break
    sleep 0.02
done
# the load may have ended between the look and the check: one more look
if [ -z "$resumed" ] && [ "$(rcli LLEN inventory001:sold)" -gt "$sold_at_kill" ]; then
    resumed=$(( $(now_ms) - kill_t ))
fi
[ -n "$resumed" ] || fail "no sale after the kill: the survivor did not carry on (lock now: $(rcli HGETALL RedisDistributedLock | tr '\n' ' ')pttl $(rcli PTTL RedisDistributedLock))"
log "the survivor sold again $resumed ms after the kill"
if [ "$mode" = held ]; then
    [ "$resumed" -le $((ttl_ms + 2000)) ] ||
        fail "the survivor waited $resumed ms after the kill for the dead holder's lock, more than its TTL $ttl_ms ms + 2 s"
fi

# Bounded wait: the load stops by itself; 120 s is far past any lock wait.
deadline=$((SECONDS + 120))
while kill -0 "$load_pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.2
done
kill -0 "$load_pid" 2>/dev/null && fail "the load still runs 120 s after the kill: the survivor is stuck"
wait "$load_pid"
rc=$?
load_pid=
[ "$rc" -eq 0 ] || fail "inventory-load exited with $rc: $(cat "$work/load.log")"
kv_parse "$work/load.out"
log "clients: $(cat "$work/load.out")"
[ "${L[requests]:-}" = "$requests" ] || fail "inventory-load made ${L[requests]:-?} requests, not $requests"
if [ -n "$hold_pid" ]; then
    wait "$hold_pid" 2>/dev/null
    forget_pid "$hold_pid"
    hold_pid=
fi

# What nginx answered, by status, for this load's sales.
tail -n +"$((lines_before + 1))" "$work/nginx/access.log" | grep " /inventory/sale/$strategy " \
    >"$work/access-load.txt" || true
declare -A S=()
while read -r s n; do S[$s]=$n; done < <(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^HTTP\//) { print $(i + 1); break } }' \
    "$work/access-load.txt" | sort | uniq -c | awk '{ print $2, $1 }')
summary=""
for s in "${!S[@]}"; do summary="$summary $s:${S[$s]}"; done
n502=${S[502]:-0}
dead_up=$(grep -c "upstream=127.0.0.1:$port2 " "$work/access-load.txt" || true)
live_up=$(grep -c "upstream=127.0.0.1:$port1 " "$work/access-load.txt" || true)
log "nginx answered by status:$summary; upstream $port1 (survivor) $live_up, $port2 (killed) $dead_up"
for s in "${!S[@]}"; do
    case "$s" in 200|502|503) ;; *) fail "nginx answered ${S[$s]} sales with status $s (only 200, 502 and 503 are expected)" ;; esac
done
expect "clients: transport errors" "${L[errors]}" 0
expect "clients: backend_unavailable (Redis never went away)" "${L[backend_unavailable]}" 0
expect "clients: answers neither sold, sold_out nor lock_timeout, vs nginx's 502s" "${L[other]}" "$n502"
expect "clients: 503s in nginx's log vs lock_timeout answers" "${S[503]:-0}" "${L[lock_timeout]}"
[ "$live_up" -gt 0 ] || fail "nginx sent no sale to the surviving instance $port1"

# ---- the audit ----------------------------------------------------------------
guard=$(rcli HLEN inventory001:holders)
curl -sf --max-time 10 "http://127.0.0.1:$port1/inventory/audit" >"$work/audit.json" ||
    fail "GET /inventory/audit on the survivor failed"
log "audit: $(cat "$work/audit.json"); probe holders now ${guard:-0} (no sale in flight)"
a() { jq -r "$1" "$work/audit.json"; }
expect "audit.oversold" "$(a .oversold)" false
expect "audit.sold_twice" "$(a .sold_twice)" 0
expect "audit.oversold_units" "$(a .oversold_units)" 0
asold=$(a .sold)
expect "audit: stock + sold vs the initial stock" $(( $(a .stock) + asold )) "$(a .initial)"
[ "${L[sold]}" -le "$asold" ] ||
    fail "clients saw ${L[sold]} sold but the ledger has only $asold sales"
[ "$asold" -le $(( L[sold] + n502 )) ] ||
    fail "the ledger has $asold sales: more than the $((L[sold])) clients saw plus the $n502 answered 502"
if [ "$(a .violations)" != 0 ]; then
    why=""
    [ "${guard:-0}" -gt 0 ] && why=" The probe still lists $guard holder(s) in inventory001:holders with no
sale in flight: the killed instance's entry was not dropped when its alive key expired."
    fail "audit.violations (overlapping holders seen by the probe): got $(a .violations), expected 0.$why"
fi
log "PASS nothing oversold: ledger $asold of $stock, clients saw ${L[sold]} sold, ${L[sold_out]} sold_out," \
    "${L[lock_timeout]} lock_timeout, $n502 nginx 502s"

# ---- no lock left, and the survivor carries on -------------------------------
lt=$(rcli TYPE RedisDistributedLock)
lp=$(rcli PTTL RedisDistributedLock)
log "after the load: RedisDistributedLock type $lt, PTTL $lp"
[ "$lp" = -2 ] || [ "$lp" -gt 0 ] || fail "RedisDistributedLock is left without a TTL (PTTL $lp, type $lt)"

kill -0 "$pid1" 2>/dev/null || fail "the surviving instance on $port1 died"
curl -sf -o /dev/null --max-time 5 "http://127.0.0.1:$port1/healthz" || fail "the survivor's /healthz failed"
code=$(curl -s -o "$work/reset2.json" -w '%{http_code}' --max-time 10 -X POST \
    -H 'Content-Type: application/json' -d '{"stock":200}' "http://127.0.0.1:$port1/inventory/reset")
[ "$code" = 200 ] || fail "the survivor's POST /inventory/reset answered $code: $(cat "$work/reset2.json")"
t_sale=$(now_ms)
code=$(curl -s -o "$work/sale.json" -w '%{http_code}' --max-time 15 "http://127.0.0.1:$port1/inventory/sale/$strategy")
ms=$(( $(now_ms) - t_sale ))
[ "$code" = 200 ] || fail "the survivor's sale after the load answered $code: $(cat "$work/sale.json")"
expect "the survivor's sale: status" "$(jq -r .status "$work/sale.json")" sold
expect "the survivor's sale: unit" "$(jq -r .unit "$work/sale.json")" 200
log "PASS the survivor sells after the load: unit 200 in $ms ms"

stop_pid "$nginx_pid"; forget_pid "$nginx_pid"
stop_pid "$pid1"; forget_pid "$pid1"
[ "$stop_status" = 0 ] || fail "the survivor exited with status $stop_status after SIGTERM"
log "PASS the survivor stopped cleanly on SIGTERM (${SECONDS} s in all)"
exit 0
