#!/usr/bin/env bash
# safety_nginx_3000.sh INVENTORYD INVENTORY_LOAD
#
# Issue 10, defect 9: at the seed's own load the safe strategies answer 503
# backend_unavailable. The stack of scripts/demo.sh on free ports: a
# throwaway redis-server, three Redlock masters, two inventoryd instances
# (lock.wait-ms=10000, as the demo) behind a real nginx rendered from
# nginx/nginx.conf.in. For redlock, watchdog, redisson and owner-check in
# turn: reset the stock to 200, then 3000 concurrent clients make 6000 sales
# through nginx (SAFETY_CLIENTS, SAFETY_REQUESTS override). Every answer
# must be sold, sold_out or lock_timeout: no backend_unavailable, no other
# answer, no transport error; some must be sold; and the audit shows
# nothing oversold, no unit sold twice, and as many units sold as the
# clients were told. Every
# strategy is run even after one fails; the failures are listed at the end.
# Traffic goes to 127.0.0.1 only; everything started is stopped by its pid.
# Exit 0 on pass, 1 on failure (named on stderr).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=safety-3000

take_binaries "$@"
clients=${SAFETY_CLIENTS:-3000}
requests=${SAFETY_REQUESTS:-6000}
stock=200
strategies=(watchdog redisson owner-check redlock)

# On failure, what the instances and nginx logged (the Redis logs say nothing).
on_fail() {
    local f
    for f in "$work"/inventoryd-*.log "$work"/nginx-error.log; do
        [ -s "$f" ] || continue
        echo "---- last lines of $f" >&2
        tail -n 10 "$f" >&2
    done
}

require_tools redis-server redis-cli nginx curl jq
clear_env '^INVENTORYD_'

# 3000 clients, each with a connection to nginx, nginx's to the instances
# and the instances' threads: well past the usual soft limit of 1024.
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $((clients + 200)) ] ||
    { echo "$tag: SKIP: ulimit -n is $(ulimit -n), fewer than $clients clients need" >&2; exit 77; }

setup_work safety3000
pick_stack_ports
start_redis
nodes=""
for i in 1 2 3; do
    pick_port
    start_redis "$port" "master-$i"
    nodes="${nodes:+$nodes,}127.0.0.1:$port"
done
start_instance "$port1" --set lock.wait-ms=10000 --set redlock.nodes="$nodes"; pid1=$inst_pid
start_instance "$port2" --set lock.wait-ms=10000 --set redlock.nodes="$nodes"; pid2=$inst_pid
start_front

failures=()
for s in "${strategies[@]}"; do
    # A Redlock master votes once up for lock.ttl-ms (10 s by default).
    [ "$s" = redlock ] && wait_voting 10000 $(tr , '\n' <<<"$nodes" | sed 's/.*://')
    reset_stock "$s"
    load_kv "$s"
    log "$s: $load_out"
    [ "$load_rc" -le 1 ] || fail "$s: inventory-load exited with $load_rc: $(cat "$work/load-$s.log")"
    fetch_audit "$s"
    bad=()
    [ "${L[requests]:-0}" = "$requests" ] || bad+=("made ${L[requests]:-?} requests, not $requests")
    [ "${L[backend_unavailable]:-0}" = 0 ] || bad+=("${L[backend_unavailable]} answered 503 backend_unavailable")
    [ "${L[other]:-0}" = 0 ] || bad+=("${L[other]} other answers")
    [ "${L[errors]:-0}" = 0 ] || bad+=("${L[errors]} transport errors")
    [ "$(jqv "$s" .oversold)" = false ] || bad+=("oversold: $(cat "$work/audit-$s.json")")
    # A run in which every answer was lock_timeout shows nothing: it must
    # sell, and the audit must count exactly the units the clients were told
    # they bought, none of them twice.
    [ "${L[sold]:-0}" -gt 0 ] || bad+=("sold nothing (${L[lock_timeout]:-0} lock_timeout)")
    [ "$(jqv "$s" .sold_twice)" = 0 ] || bad+=("sold_twice $(jqv "$s" .sold_twice)")
    [ "$(jqv "$s" .sold)" = "${L[sold]:-0}" ] ||
        bad+=("the audit counts $(jqv "$s" .sold) units sold, the clients were told ${L[sold]:-0}")
    if [ ${#bad[@]} -gt 0 ]; then
        failures+=("$s: $(IFS=';'; echo "${bad[*]}")")
        log "$s: FAILED: ${bad[*]}"
    else
        log "PASS $s: every answer sold, sold_out or lock_timeout; ${L[sold]} sold, none twice"
    fi
done

if [ ${#failures[@]} -gt 0 ]; then
    # The instances should have said why (issue 10): show what they logged.
    for p in "$port1" "$port2"; do
        log "inventoryd-$p.log: $(wc -l <"$work/inventoryd-$p.log") lines; last: $(tail -n 3 "$work/inventoryd-$p.log" | tr '\n' '|')"
    done
    fail "$clients clients, $requests sales each through nginx: $(printf '%s. ' "${failures[@]}")"
fi
stop_stack_cleanly
log "PASS $clients clients through nginx: no backend_unavailable for ${strategies[*]}"
exit 0
