#!/usr/bin/env bash
# safety_backend_log.sh INVENTORYD INVENTORY_LOAD
#
# Issue 10, defect 9 (its second half): an instance that answers 503
# backend_unavailable says why in its log, rate-limited. A throwaway
# redis-server and one inventoryd instance on free ports; a first sale
# proves the stack works; then Redis is killed and for 3 s 10 clients make
# sales that all fail with 503 backend_unavailable. The instance's stderr
# must then have a line naming the cause given in the 503 answers (the
# text after the last ": " of their "error" sentence, e.g. "Connection
# refused"), and, rate-limited, far fewer such lines than failed sales (at
# most 50), at most one a second of the failures (and at least two), one
# of them saying how many more failures it stood for.
# Traffic to 127.0.0.1 only; everything started is stopped by its pid.
# Exit 0 on pass, 1 on failure (named on stderr).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=safety-log

take_binaries "$@"
require_tools redis-server redis-cli curl jq
clear_env '^INVENTORYD_'

setup_work safetylog
pick_port; redis_port=$port
pick_port; port1=$port
log "redis $redis_port, instance $port1, in $work"
start_redis
start_instance "$port1" --set redis.timeout=300 --set lock.wait-ms=300; pid1=$inst_pid
wait_http "$pid1" "$port1" /healthz "inventoryd on $port1"
url="http://127.0.0.1:$port1"

code=$(curl -s -o "$work/first.json" -w '%{http_code}' --max-time 10 "$url/inventory/sale/redisson")
[ "$code" = 200 ] || fail "the first sale answered $code: $(cat "$work/first.json")"
lines_before=$(wc -l <"$work/inventoryd-$port1.log")

# Redis goes away.
stop_pid "$redis_pid"
forget_pid "$redis_pid"

code=$(curl -s -o "$work/failed.json" -w '%{http_code}' --max-time 10 "$url/inventory/sale/redisson")
[ "$code" = 503 ] || fail "with Redis down a sale answered $code: $(cat "$work/failed.json")"
status=$(jq -r .status "$work/failed.json")
[ "$status" = backend_unavailable ] || fail "with Redis down a sale answered $status: $(cat "$work/failed.json")"
# Failing sales for 3 s at least (10 clients, as many as they can make).
"$load" --host 127.0.0.1 --port "$port1" --path /inventory/sale/redisson --clients 10 \
    --requests 100000000 --max-s 3 --timeout-ms 10000 --format kv >"$work/load.out" 2>"$work/load.log"
kv_parse "$work/load.out"
log "with Redis down: $(cat "$work/load.out")"
[ "${L[backend_unavailable]:-0}" -ge 300 ] && [ "${L[backend_unavailable]}" -ge $(( ${L[requests]:-0} * 9 / 10 )) ] ||
    fail "with Redis down only ${L[backend_unavailable]:-0} of ${L[requests]:-?} sales answered backend_unavailable"
code=$(curl -s -o "$work/last.json" -w '%{http_code}' --max-time 10 "$url/inventory/sale/redisson")

# The causes the answers gave: the last clause of each "error" sentence.
causes=()
for f in "$work/failed.json" "$work/last.json"; do
    e=$(jq -r '.error // empty' "$f" 2>/dev/null)
    [ -n "$e" ] || continue
    c=${e##*: }
    c=${c%)}
    causes+=("$c")
done
log "causes in the answers: $(printf '"%s" ' "${causes[@]}")"
[ ${#causes[@]} -gt 0 ] || fail "the 503 answers name no cause: $(cat "$work/failed.json")"

sleep 0.5
tail -n +"$((lines_before + 1))" "$work/inventoryd-$port1.log" >"$work/after.log"
named=0
for c in "${causes[@]}"; do
    n=$(grep -cF -- "$c" "$work/after.log" || true)
    [ "$n" -gt "$named" ] && named=$n
done
total=$(wc -l <"$work/after.log")
log "the instance logged $total lines after Redis went away, $named naming the cause"
[ "$named" -ge 1 ] ||
    fail "the instance answered $((L[backend_unavailable] + 2)) sales with 503 backend_unavailable and logged no line naming the cause ($(printf '"%s" ' "${causes[@]}")); its log after Redis went away: $(head -c 400 "$work/after.log")"
[ "$total" -le 50 ] ||
    fail "the instance logged $total lines for $((L[backend_unavailable] + 2)) failed sales: not rate-limited"
# The limit itself (src/log.h): at most one line a second per kind, and a
# line after dropped ones says how many it stood for. The failures lasted
# elapsed_s (3 s and more): the lines naming the cause may be one a second
# of that, plus the first one and the two single sales around the load.
elapsed=${L[elapsed_s]:-0}
most=$(awk -v e="$elapsed" 'BEGIN { printf "%d", e + 3.999 }')
[ "$named" -le "$most" ] ||
    fail "$named lines name the cause over ${elapsed} s of failures: more than one a second ($most at most)"
[ "$named" -ge 2 ] ||
    fail "only $named line names the cause over ${elapsed} s of failures: the log stopped, not limited"
more=$(grep -F -- "${causes[0]}" "$work/after.log" | sed -n 's/.*(and \([0-9]*\) more like it since the last line)$/\1/p' |
    sort -n | tail -n 1)
[ -n "$more" ] && [ "$more" -ge 1 ] ||
    fail "no line says how many failures it stood for ('(and N more like it since the last line)'): $(head -c 400 "$work/after.log")"
log "rate limit: $named lines over ${elapsed} s of $((L[backend_unavailable] + 2)) failed sales; one stood for $more more"
stop_pid "$pid1"
forget_pid "$pid1"
[ "$stop_status" = 0 ] || fail "inventoryd exited with status $stop_status after SIGTERM"
log "PASS backend errors are logged with their cause, rate-limited"
exit 0
