#!/usr/bin/env bash
# e2e_nginx.sh INVENTORYD INVENTORY_LOAD
#
# End to end, as in the demo: a throwaway redis-server, two inventoryd
# instances behind a real nginx (upstream weights 1 and 2, rendered from
# nginx/nginx.conf.in by scripts/nginx-conf.sh), 200 concurrent clients and
# 3000 sales through nginx. Every port is a free one picked here; everything
# started is stopped by its pid on the way out.
#
#   (a) atomic never oversells: clients see exactly 200 sold and the audit
#       agrees (sold 200, stock 0, not oversold, nothing sold twice).
#   (b) local is safe only inside one process: across two instances the
#       audit must agree with what the clients saw, oversold or not; both
#       instances must have taken traffic.
#   (c) both instances stop cleanly (exit 0) on SIGTERM, which under the
#       sanitizer build also means no leak was reported.
#   Also: nginx/nginx.conf is exactly the template rendered for 8080 3786 3787.
#
# Exit status 0 on pass, 1 on the first failed assertion (named on stderr).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tag=e2e

take_binaries "$@"
clients=${E2E_CLIENTS:-200}
requests=${E2E_REQUESTS:-3000}
stock=200

require_tools redis-server redis-cli nginx curl jq

# The instances must see only what this test sets.
clear_env '^INVENTORYD_'

setup_work e2e

# ---- start the stack -------------------------------------------------------
pick_stack_ports
start_redis
start_instance "$port1" --set lock.wait-ms=10000; pid1=$inst_pid
start_instance "$port2" --set lock.wait-ms=10000; pid2=$inst_pid
wait_http "$pid1" "$port1" /healthz "inventoryd on $port1"
wait_http "$pid2" "$port2" /healthz "inventoryd on $port2"

render_nginx
check_nginx
# nginx/nginx.conf is the template rendered for the demo's ports: no drift.
bash "$root/scripts/nginx-conf.sh" 8080 3786 3787 "$work/nginx-demo" &&
    cmp -s "$work/nginx-demo/nginx.conf" "$root/nginx/nginx.conf" ||
    fail "nginx/nginx.conf differs from nginx/nginx.conf.in rendered for 8080 3786 3787 (run scripts/nginx-conf.sh 8080 3786 3787 nginx/)"
start_nginx

# ---- helpers for one round -------------------------------------------------
base="http://127.0.0.1:$nginx_port"

# run_load STRATEGY: fills the associative array L from --format kv.
run_load() {
    load_kv "$1"
    [ "$load_rc" -eq 0 ] || fail "inventory-load for $1 exited with $load_rc: $(cat "$work/load-$1.log")"
    log "$1: $load_out"
    [ "${L[requests]:-}" = "$requests" ] || fail "$1: inventory-load made ${L[requests]:-?} requests, not $requests"
}

audit() {
    fetch_audit "$1"
    log "$1: audit $(cat "$work/audit-$1.json")"
}

# ---- (a) atomic never oversells --------------------------------------------
reset_stock
run_load atomic
expect "atomic: transport errors seen by clients" "${L[errors]}" 0
expect "atomic: answers that were neither sold nor sold_out" "${L[other]}" 0
expect "atomic: units clients saw sold" "${L[sold]}" "$stock"
audit atomic
expect "atomic: audit.sold" "$(jqv atomic .sold)" "$stock"
expect "atomic: audit.stock" "$(jqv atomic .stock)" 0
expect "atomic: audit.oversold" "$(jqv atomic .oversold)" false
expect "atomic: audit.sold_twice" "$(jqv atomic .sold_twice)" 0
expect "atomic: audit.oversold_units" "$(jqv atomic .oversold_units)" 0
log "PASS atomic: 200 sold through two instances, none oversold"

# ---- (b) local: the audit agrees with what the clients saw -----------------
reset_stock
lines_before=$(wc -l <"$work/nginx/access.log")
run_load local
expect "local: transport errors seen by clients" "${L[errors]}" 0
expect "local: answers that were neither sold nor sold_out" "${L[other]}" 0
audit local
sold=${L[sold]}
expect "local: audit.sold vs units clients saw sold" "$(jqv local .sold)" "$sold"
if [ "$sold" -gt "$stock" ]; then want=true; else want=false; fi
expect "local: audit.oversold vs clients sold $sold of $stock" "$(jqv local .oversold)" "$want"
log "local oversold $(( sold > stock ? sold - stock : 0 )) units across two instances" \
    "(clients saw $sold sold of $stock; audit: sold_twice $(jqv local .sold_twice)," \
    "oversold_units $(jqv local .oversold_units), stock $(jqv local .stock))"

# Both instances took part: nginx's log names the upstream of every request.
hits1=$(tail -n +"$((lines_before + 1))" "$work/nginx/access.log" |
    grep -c "/inventory/sale/local .*upstream=127.0.0.1:$port1 " || true)
hits2=$(tail -n +"$((lines_before + 1))" "$work/nginx/access.log" |
    grep -c "/inventory/sale/local .*upstream=127.0.0.1:$port2 " || true)
log "local: nginx sent $hits1 sales to $port1 (weight 1), $hits2 to $port2 (weight 2)"
[ "$hits1" -gt 0 ] || fail "local: instance $port1 got no sale through nginx"
[ "$hits2" -gt 0 ] || fail "local: instance $port2 got no sale through nginx"
# And each instance counted them itself (Prometheus text of GET /metrics):
# its series summed by inventory-stats.
for p in "$port1" "$port2"; do
    counts=$(curl -sf --max-time 5 "http://127.0.0.1:$p/metrics" |
        awk '$1 ~ /^inventoryd_http_requests_total/ { print $2 }')
    [ -n "$counts" ] || fail "instance $p: no inventoryd_http_requests_total in GET /metrics"
    n=$("$stats" sum <<<"$counts")
    [ "$n" -gt 0 ] || fail "instance $p: inventoryd_http_requests_total is $n after the load"
done
log "PASS local: audit agrees with the clients; both instances served sales"

# ---- (c) graceful stop -----------------------------------------------------
stop_stack_cleanly
log "PASS both instances stopped cleanly on SIGTERM"
exit 0
