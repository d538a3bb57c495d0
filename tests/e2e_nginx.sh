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
#       audit must agree with what the clients saw, oversold or not; nginx
#       must have split the sales 1:2 by its weights (within 10%); and each
#       instance's /metrics must have counted, by value, the requests nginx
#       sent it and, summed, the sales and sold_out answers the clients saw.
#   (c) both instances stop cleanly (exit 0) on SIGTERM, which under the
#       sanitizer build also means no leak was reported.
#   Also: nginx/nginx.conf is exactly the template rendered for 8080 3786 3787.
#
# Exit status 0 on pass, 1 on the first failed assertion (named on stderr).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
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

# scrape PORT NAME: GET /metrics of the instance on PORT into $work/NAME.prom.
scrape() {
    curl -sf --max-time 5 -o "$work/$2.prom" "http://127.0.0.1:$1/metrics" ||
        fail "instance $1: GET /metrics failed"
}

# metric NAME REGEX: the sum of the series of $work/NAME.prom whose name and
# labels match REGEX (awk); fails when none does.
metric() {
    local v
    v=$(awk -v re="$2" '$1 ~ re { s += $2; seen = 1 } END { if (seen) printf "%d", s; else print "none" }' \
        "$work/$1.prom")
    [ "$v" != none ] || fail "$1: no series matching $2 in GET /metrics"
    echo "$v"
}

# ---- (b) local: the audit agrees with what the clients saw -----------------
reset_stock
lines_before=$(wc -l <"$work/nginx/access.log")
for p in "$port1" "$port2"; do scrape "$p" "before-$p"; done
run_load local
for p in "$port1" "$port2"; do scrape "$p" "after-$p"; done
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
expect "local: sales nginx logged vs requests made" $((hits1 + hits2)) "$requests"
[ $((hits2 * 10)) -ge $((hits1 * 18)) ] && [ $((hits2 * 10)) -le $((hits1 * 22)) ] ||
    fail "local: nginx split the sales $hits1:$hits2, not 1:2 (weights 1 and 2) within 10%"
# And each instance counted them itself (Prometheus text of GET /metrics,
# scraped just before and just after the load): its 2xx answers grew by what
# nginx sent it (plus the first scrape, counted once answered), and the two
# instances' sales and sold_out add up to what the clients saw.
declare -A hits=([$port1]=$hits1 [$port2]=$hits2)
sold_sum=0 out_sum=0
growth() { echo $(( $(metric "after-$1" "$2") - $(metric "before-$1" "$2") )); }
for p in "$port1" "$port2"; do
    n=$(( $(growth "$p" '^inventoryd_http_requests_total[{]code="2xx"[}]$') - 1 ))
    expect "instance $p: 2xx answers counted in /metrics during the load vs sales nginx sent it" "$n" "${hits[$p]}"
    sold_sum=$(( sold_sum + $(growth "$p" '^inventoryd_sales_total[{]strategy="local"[}]$') ))
    out_sum=$(( out_sum + $(growth "$p" '^inventoryd_sold_out_total[{]strategy="local"[}]$') ))
done
expect "local: inventoryd_sales_total of both instances vs units clients saw sold" "$sold_sum" "${L[sold]}"
expect "local: inventoryd_sold_out_total of both instances vs sold_out answers" "$out_sum" "${L[sold_out]}"
log "PASS local: audit agrees with the clients; nginx split the sales 1:2; /metrics counted them"

# ---- (c) graceful stop -----------------------------------------------------
stop_stack_cleanly
log "PASS both instances stopped cleanly on SIGTERM"
exit 0
