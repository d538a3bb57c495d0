#!/usr/bin/env bash
# resilience_redis_restart.sh INVENTORYD INVENTORY_LOAD
#
# Hardening: "Redis outage and restart in the middle of the load: 503s while
# it is down, recovery without a restart, and no lock key left behind by the
# service. Every key it creates has a TTL or is released: verify with SCAN
# after the run."
#
# A throwaway redis-server (no persistence: it restarts empty) and one
# inventoryd instance, free ports, everything stopped by its pid. For each of
# owner-lua, redisson and watchdog, against the instance directly:
#   1. reset the stock to 100000 (every request takes the lock), then 50
#      clients sell in bounded rounds of 1500 requests;
#   2. 0.5 s in, redis-server gets SIGTERM (by pid); while it is down GET
#      /healthz and a sale answer 503 backend_unavailable;
#   3. 1 s later redis-server starts again, empty, on the same port; the load
#      keeps going 0.3 s against it (sales answer bad_stock: no stock key),
#      then the rounds stop; the instance is never restarted;
#      SCAN: every key is stock data or has a TTL;
#   4. POST /inventory/reset succeeds (retried for up to 10 s: the time to
#      recover is reported), with no load running: a reset deletes the lock
#      and the probe's holders, so under load it would race a sale in progress;
#   5. 50 clients sell 200 units in rounds for 2 s (stock 10^6): only sold,
#      no lock_timeout, backend_unavailable, other answer or transport error;
#      the audit: oversold false, sold_twice 0, violations 0, ledger = sold;
#   6. SCAN the whole keyspace: inventory001, :sold, :initial, :violations,
#      :families and the capped :history are data; :holders must be empty or absent; every other key
#      (RedisDistributedLock in particular) must have a TTL (PTTL > 0);
#      the findings are printed;
#   7. reset to 200 and three sales sell units 200, 199, 198.
# Across steps 1-3, the clients must have seen backend_unavailable (> 0) and
# no transport error. At the end the instance stops cleanly (exit 0) on SIGTERM.
# RESILIENCE_STRATEGIES ("owner-lua redisson watchdog"), RESILIENCE_CLIENTS
# (50), RESILIENCE_REQUESTS (1500, per round) override. Exit 0 on pass, 1 on
# the first failed assertion (named on stderr).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=resilience-redis

take_binaries "$@"
strategies=${RESILIENCE_STRATEGIES:-owner-lua redisson watchdog}
clients=${RESILIENCE_CLIENTS:-50}
requests=${RESILIENCE_REQUESTS:-1500}
data_keys=" inventory001 inventory001:sold inventory001:initial inventory001:violations inventory001:holders inventory001:families inventory001:history "

require_tools redis-server redis-cli curl jq
clear_env '^INVENTORYD_'
setup_work resilience-redis

pick_port; redis_port=$port
pick_port; port1=$port
inst="http://127.0.0.1:$port1"
log "redis $redis_port, instance $port1, in $work"
start_redis
start_instance "$port1"; pid1=$inst_pid
wait_http "$pid1" "$port1" /healthz "inventoryd on $port1"

# reset N [LABEL]: POST /inventory/reset {"stock":N} on the instance, or fail.
reset() {
    local code
    code=$(curl -s -o "$work/reset.json" -w '%{http_code}' --max-time 10 -X POST \
        -H 'Content-Type: application/json' -d "{\"stock\":$1}" "$inst/inventory/reset")
    [ "$code" = 200 ] || fail "${2:+$2: }POST /inventory/reset answered $code: $(cat "$work/reset.json")"
}

# scan_check LABEL: SCAN the whole keyspace; print every key with its type,
# PTTL and (for strings) value; fail on a key that is neither stock data nor
# has a TTL, and on a probe that still lists a holder.
scan_check() {
    local label=$1 k type pttl val bad=""
    rcli --scan | sort >"$work/keys-$label.txt"
    log "$label: SCAN found $(wc -l <"$work/keys-$label.txt") keys:"
    while read -r k; do
        [ -n "$k" ] || continue
        type=$(rcli TYPE "$k")
        pttl=$(rcli PTTL "$k")
        case "$type" in
            string) val=" value $(rcli GET "$k" | head -c 40)" ;;
            list) val=" length $(rcli LLEN "$k")" ;;
            hash) val=" fields $(rcli HGETALL "$k" | tr '\n' ' ' | head -c 120)" ;;
            *) val="" ;;
        esac
        echo "    $k  type $type  pttl $pttl$val"
        case "$data_keys" in
            *" $k "*)
                if [ "$k" = inventory001:holders ] && [ "$(rcli HLEN "$k")" != 0 ]; then
                    bad="$bad; $k lists $(rcli HLEN "$k") holder(s) with no sale in flight (the probe must be empty)"
                fi
                ;;
            *)
                [ "$pttl" -gt 0 ] 2>/dev/null || [ "$pttl" = -2 ] ||
                    bad="$bad; $k ($type) has no TTL (PTTL $pttl)"
                ;;
        esac
    done <"$work/keys-$label.txt"
    [ -z "$bad" ] || fail "$label: keys left behind by the service:${bad#;}"
    pttl=$(rcli PTTL RedisDistributedLock)
    log "$label: RedisDistributedLock PTTL $pttl ($( [ "$pttl" = -2 ] && echo absent || echo 'present, with a TTL'))"
}

for s in $strategies; do
    # ---- 1-3: load, outage, restart ------------------------------------------
    reset 100000 "$s"
    start_rounds "$s-outage" "$port1" "/inventory/sale/$s" "$clients" "$requests" 60
    sleep 0.5
    kill -0 "$rounds_pid" 2>/dev/null || fail "$s: the load ended before the outage: $(cat "$work/$s-outage-load.log")"
    sold_before=$(rcli LLEN inventory001:sold)
    kill -TERM "$redis_pid" || fail "$s: kill -TERM $redis_pid (redis-server) failed"
    wait "$redis_pid" 2>/dev/null
    forget_pid "$redis_pid"
    down_t=$(now_ms)
    log "$s: redis-server (pid $redis_pid) stopped by SIGTERM 0.5 s into the load, $sold_before sold by then"

    code=$(curl -s -o "$work/health-down.json" -w '%{http_code}' --max-time 5 "$inst/healthz")
    [ "$code" = 503 ] || fail "$s: GET /healthz with Redis down answered $code: $(cat "$work/health-down.json")"
    code=$(curl -s -o "$work/sale-down.json" -w '%{http_code}' --max-time 10 "$inst/inventory/sale/$s")
    [ "$code" = 503 ] || fail "$s: a sale with Redis down answered $code: $(cat "$work/sale-down.json")"
    expect "$s: a sale with Redis down: status" "$(jq -r .status "$work/sale-down.json")" backend_unavailable
    log "$s: while Redis is down: /healthz 503, a sale 503 backend_unavailable ($(jq -r .error "$work/sale-down.json"))"

    sleep "$(awk -v e=$(( $(now_ms) - down_t )) 'BEGIN { s = (1000 - e) / 1000; print (s > 0 ? s : 0) }')"
    kill -0 "$rounds_pid" 2>/dev/null || fail "$s: the load rounds ended during the outage: $(cat "$work/$s-outage-load.log")"
    start_redis "$redis_port" "redis-restarted-$s"
    up_t=$(now_ms)
    log "$s: redis-server restarted empty (pid $redis_pid) $((up_t - down_t)) ms after the stop"
    sleep 0.3
    stop_rounds "$s-outage"
    sum_rounds "$s-outage"
    log "$s: clients through the outage: $(kv_line)"
    # The rounds' first "other" answers, by kind (bad_stock is expected: the
    # restarted Redis has no stock key until the reset).
    others=$(grep -o 'other answers, first: HTTP [0-9]* {"status":"[a-z_]*"' "$work/$s-outage-load.log" |
        sed 's/.*first: //' | sort | uniq -c | awk '{ printf "%s%s %s %s x%s", sep, $2, $3, $4, $1; sep = ", " }')
    [ -n "$others" ] && log "$s: kinds of other answers (first per round): $others"
    [ "${L[backend_unavailable]}" -gt 0 ] ||
        fail "$s: no backend_unavailable answer while Redis was down ($(kv_line))"
    expect "$s: transport errors through the outage" "${L[errors]}" 0
    scan_check "$s-after-restart"

    # ---- 4: recovery without restarting the instance --------------------------
    rec=''
    tries=0
    first_t=$(now_ms)
    deadline=$((first_t + 10000))
    while [ "$(now_ms)" -lt "$deadline" ]; do
        tries=$((tries + 1))
        code=$(curl -s -o "$work/reset.json" -w '%{http_code}' --max-time 5 -X POST \
            -H 'Content-Type: application/json' -d '{"stock":200}' "$inst/inventory/reset")
        if [ "$code" = 200 ]; then rec=$(( $(now_ms) - first_t )); break; fi
        sleep 0.1
    done
    [ -n "$rec" ] || fail "$s: POST /inventory/reset still answers $code 10 s after the load stopped: $(cat "$work/reset.json")"
    kill -0 "$pid1" 2>/dev/null || fail "$s: the instance died"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$inst/healthz")
    [ "$code" = 200 ] || fail "$s: GET /healthz answers $code after the recovery"
    log "$s: recovered without a restart: the first reset (try $tries) answered 200 in $rec ms," \
        "$((first_t - up_t)) ms after Redis came back (the load ran 0.3 s of that against the empty Redis)"

    # ---- 5: sales under load again ------------------------------------------------
    reset 1000000 "$s"
    start_rounds "$s-after" "$port1" "/inventory/sale/$s" "$clients" "$requests" 2
    stop_rounds_at=$((SECONDS + 2))
    while [ "$SECONDS" -lt "$stop_rounds_at" ] && kill -0 "$rounds_pid" 2>/dev/null; do sleep 0.1; done
    stop_rounds "$s-after"
    sum_rounds "$s-after"
    log "$s: clients after the recovery: $(kv_line)"
    [ "${L[sold]}" -gt 0 ] || fail "$s: nothing sold after the recovery ($(kv_line))"
    for k in lock_timeout backend_unavailable other errors; do
        expect "$s: $k after the recovery" "${L[$k]}" 0
    done
    curl -sf --max-time 10 "$inst/inventory/audit" >"$work/audit-$s.json" || fail "$s: GET /inventory/audit failed"
    log "$s: audit $(cat "$work/audit-$s.json")"
    a() { jq -r "$1" "$work/audit-$s.json"; }
    expect "$s: audit.oversold" "$(a .oversold)" false
    expect "$s: audit.sold_twice" "$(a .sold_twice)" 0
    expect "$s: audit.violations" "$(a .violations)" 0
    expect "$s: audit.sold vs what the clients saw sold" "$(a .sold)" "${L[sold]}"

    # ---- 6: nothing left without a TTL ----------------------------------------------
    scan_check "$s-after-load"

    # ---- 7: a final reset and a few sales ----------------------------------------
    reset 200 "$s"
    for u in 200 199 198; do
        code=$(curl -s -o "$work/sale.json" -w '%{http_code}' --max-time 10 "$inst/inventory/sale/$s")
        [ "$code" = 200 ] || fail "$s: sale after the final reset answered $code: $(cat "$work/sale.json")"
        expect "$s: sale after the final reset: status" "$(jq -r .status "$work/sale.json")" sold
        expect "$s: sale after the final reset: unit" "$(jq -r .unit "$work/sale.json")" "$u"
    done
    log "PASS $s: 503 while Redis was down, recovered without a restart, no key left without a TTL"
done

stop_pid "$pid1"; forget_pid "$pid1"
[ "$stop_status" = 0 ] || fail "the instance exited with status $stop_status after SIGTERM"
log "PASS the instance stopped cleanly on SIGTERM (${SECONDS} s in all)"
exit 0
