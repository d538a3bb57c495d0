#!/usr/bin/env bash
# e2e_ladder.sh INVENTORYD INVENTORY_LOAD
#
# The contract's requirement, end to end: "Under 200 concurrent clients on
# two instances (and three Redlock masters), every strategy from setnx-spin up sells exactly the stock:
# zero oversold, zero violations."
#
# One throwaway redis-server, two inventoryd instances behind a real nginx
# (upstream weights 1 and 2, rendered by scripts/nginx-conf.sh), every port a
# free one picked here, everything started stopped by its pid on the way out.
# The instances run with lock.wait-ms=20000 and lock.ttl-ms=10000, so that no
# sale waits out its lock even with the spinning strategies on two cores.
#
# For each of setnx-spin expiring owner-check owner-lua reentrant watchdog
# redisson redlock fenced handoff batched atomic: reset the stock to 200, fire 600 sales from 200
# concurrent clients through nginx, then require
#   clients: sold == 200, lock_timeout == 0, backend_unavailable == 0,
#            other == 0, errors == 0;
#   audit:   sold == 200, stock == 0, oversold false, sold_twice 0,
#            oversold_units 0, violations 0.
# setnx-retry is run too, for safety only (its recursion cap may legitimately
# answer lock_timeout): audit not oversold, nothing sold twice, no violation,
# and the audit agrees with what the clients saw sold.
#
# One line per strategy with sales/s and latency p99. Exit status 0 on pass,
# 1 on the first failed assertion (strategy and assertion named on stderr).
# E2E_CLIENTS (200) and E2E_REQUESTS (600) override the load.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=e2e-ladder

take_binaries "$@"
clients=${E2E_CLIENTS:-200}
requests=${E2E_REQUESTS:-600}
stock=200
wait_ms=20000
ttl_ms=10000
exact=(setnx-spin expiring owner-check owner-lua reentrant watchdog redisson redlock fenced handoff batched atomic)
safe_only=(setnx-retry)

require_tools redis-server redis-cli nginx curl jq

# The instances must see only what this test sets.
clear_env '^INVENTORYD_'

setup_work ladder
t0=$SECONDS

# What the current round saw, printed with a failure.
round=
on_fail() {
    [ -n "$round" ] && echo "$round" >&2
    show_logs
}

# ---- start the stack -------------------------------------------------------
pick_stack_ports
start_redis
nodes=""
for m in 1 2 3; do   # three independent Redlock masters
    pick_port
    start_redis "$port" "master-$m"
    nodes="$nodes${nodes:+,}127.0.0.1:$port"
done
start_instance "$port1" --set lock.wait-ms="$wait_ms" --set lock.ttl-ms="$ttl_ms" \
    --set redlock.nodes="$nodes"; pid1=$inst_pid
start_instance "$port2" --set lock.wait-ms="$wait_ms" --set lock.ttl-ms="$ttl_ms" \
    --set redlock.nodes="$nodes"; pid2=$inst_pid
wait_http "$pid1" "$port1" /healthz "inventoryd on $port1"
wait_http "$pid2" "$port2" /healthz "inventoryd on $port2"

render_nginx
check_nginx
start_nginx

# Every strategy this test names must exist in this build.
known=" $("$inventoryd" --list-strategies 2>/dev/null | tr '\n' ' ') "
for s in "${exact[@]}" "${safe_only[@]}"; do
    case "$known" in *" $s "*) ;; *) fail "$s: not in 'inventoryd --list-strategies' ($known)" ;; esac
done

# ---- helpers for one round -------------------------------------------------
base="http://127.0.0.1:$nginx_port"

# run_load STRATEGY: fills the associative array L from --format kv.
run_load() {
    local f
    load_kv "$1"
    [ "$load_rc" -eq 0 ] || fail "$1: inventory-load exited with $load_rc: $(cat "$work/load-$1.log")"
    for f in requests sold sold_out lock_timeout backend_unavailable other errors sales_per_s p99_ms; do
        [ -n "${L[$f]:-}" ] || fail "$1: inventory-load printed no $f= in: $load_out"
    done
    round="e2e-ladder: $1: clients saw: $load_out"
    [ "${L[requests]}" = "$requests" ] || fail "$1: inventory-load made ${L[requests]} requests, not $requests"
}

audit() {
    fetch_audit "$1"
    round="$round
e2e-ladder: $1: audit: $(cat "$work/audit-$1.json")"
}

# Transport and protocol cleanliness, and the audit's safety: both kinds.
check_safe() {
    local s=$1
    expect "$s: transport errors seen by clients (errors=)" "${L[errors]}" 0
    expect "$s: answers neither sold, sold_out nor lock_timeout (other=)" "${L[other]}" 0
    expect "$s: backend_unavailable answers" "${L[backend_unavailable]}" 0
    expect "$s: audit.oversold" "$(jqv "$s" .oversold)" false
    expect "$s: audit.sold_twice" "$(jqv "$s" .sold_twice)" 0
    expect "$s: audit.oversold_units" "$(jqv "$s" .oversold_units)" 0
    expect "$s: audit.violations (overlapping holders seen by the probe)" "$(jqv "$s" .violations)" 0
    expect "$s: audit.sold vs units clients saw sold" "$(jqv "$s" .sold)" "${L[sold]}"
    expect "$s: audit.stock vs $stock - units clients saw sold" "$(jqv "$s" .stock)" "$((stock - L[sold]))"
}

summary() {  # summary STRATEGY SECONDS VERDICT
    printf 'e2e-ladder: %-12s %4s sold %3s sold_out %3s lock_timeout  %8s sales/s  p99 %8s ms  (%ss)  %s\n' \
        "$1" "${L[sold]}" "${L[sold_out]}" "${L[lock_timeout]}" "${L[sales_per_s]}" "${L[p99_ms]}" "$2" "$3"
}

log "$requests sales from $clients clients per strategy, stock $stock, lock.wait-ms $wait_ms, lock.ttl-ms $ttl_ms"

# ---- every strategy from setnx-spin up: exactly the stock ------------------
for s in "${exact[@]}"; do
    t=$SECONDS
    round=
    [ "$s" = redlock ] && wait_voting "$ttl_ms" $(tr , '\n' <<<"$nodes" | sed 's/.*://')
    reset_stock "$s"
    run_load "$s"
    audit "$s"
    check_safe "$s"
    expect "$s: lock_timeout answers (lock.wait-ms $wait_ms)" "${L[lock_timeout]}" 0
    expect "$s: units clients saw sold" "${L[sold]}" "$stock"
    expect "$s: sold_out answers" "${L[sold_out]}" "$((requests - stock))"
    expect "$s: audit.sold" "$(jqv "$s" .sold)" "$stock"
    expect "$s: audit.stock" "$(jqv "$s" .stock)" 0
    summary "$s" "$((SECONDS - t))" "PASS exactly $stock sold"
done

# ---- setnx-retry: safety only (its recursion cap may time out) -------------
for s in "${safe_only[@]}"; do
    t=$SECONDS
    round=
    reset_stock "$s"
    run_load "$s"
    audit "$s"
    check_safe "$s"
    [ "${L[sold]}" -le "$stock" ] || fail "$s: clients saw ${L[sold]} sold of $stock"
    summary "$s" "$((SECONDS - t))" "PASS safe (not oversold, no violation)"
done

# ---- both instances stop cleanly -------------------------------------------
stop_stack_cleanly
log "PASS the ladder: every strategy from setnx-spin up sold exactly $stock, none oversold, no violation ($((SECONDS - t0)) s)"
exit 0
