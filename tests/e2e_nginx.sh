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

if [ $# -ne 2 ]; then
    echo "usage: $0 INVENTORYD INVENTORY_LOAD" >&2
    exit 2
fi
inventoryd=$(realpath "$1")
load=$(realpath "$2")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
clients=${E2E_CLIENTS:-200}
requests=${E2E_REQUESTS:-3000}
stock=200

for tool in redis-server redis-cli nginx curl jq; do
    command -v "$tool" >/dev/null 2>&1 || { echo "e2e: $tool not found (run scripts/deps.sh)" >&2; exit 1; }
done

# The instances must see only what this test sets.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^INVENTORYD_' || true)

work=$(mktemp -d /tmp/inventoryd-e2e.XXXXXX)
# nginx's workers run as nobody when the master is root: they must reach it.
chmod 755 "$work"
pids=()
load_pid=
failed=0

log() { echo "e2e: $*"; }

show_logs() {
    local f
    for f in "$work"/*.log; do
        [ -s "$f" ] || continue
        if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f"; then
            # A sanitizer report: its head says what and where.
            echo "---- sanitizer report in $f" >&2
            grep -m 1 -A 30 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f" >&2
            continue
        fi
        echo "---- last lines of $f" >&2
        tail -n 20 "$f" >&2
    done
}

fail() {
    echo "e2e: FAIL: $*" >&2
    failed=1
    show_logs
    exit 1
}

# Stops one of our children by pid: SIGTERM, SIGKILL after 10 s. Sets
# stop_status to its exit status. (Not in a subshell: only the parent can wait.)
stop_pid() {
    local pid=$1 i
    if ! kill -TERM "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null
        stop_status=$?
        return
    fi
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    stop_status=$?
}

cleanup() {
    local pid
    [ -n "$load_pid" ] && stop_pid "$load_pid"
    for pid in "${pids[@]}"; do
        stop_pid "$pid"
    done
    pids=()
    if [ "$failed" -eq 0 ]; then
        rm -rf "$work"
    else
        echo "e2e: logs kept in $work" >&2
    fi
}
trap cleanup EXIT
trap 'failed=1; exit 1' INT TERM

# A port below the ephemeral range that nothing listens on and that this
# test has not picked already.
picked=" "
pick_port() {
    local p i
    for i in $(seq 1 500); do
        p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 12000 ))
        case "$picked" in *" $p "*) continue ;; esac
        if command -v ss >/dev/null 2>&1 && [ -n "$(ss -Htln "sport = :$p" 2>/dev/null)" ]; then
            continue
        fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            continue
        fi
        picked="$picked$p "
        port=$p
        return 0
    done
    fail "no free TCP port found"
}

# wait_http PID PORT PATH NAME: until PATH on PORT answers 2xx, or PID died.
wait_http() {
    local pid=$1 port=$2 path=$3 name=$4 i
    for i in $(seq 1 200); do
        if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$port$path"; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || fail "$name exited during start-up"
        sleep 0.1
    done
    fail "$name not ready on port $port after 20 s"
}

# ---- start the stack -------------------------------------------------------
pick_port; redis_port=$port
pick_port; port1=$port
pick_port; port2=$port
pick_port; nginx_port=$port
log "redis $redis_port, instances $port1 and $port2, nginx $nginx_port, in $work"

redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
for i in $(seq 1 100); do
    [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ] && break
    kill -0 "$redis_pid" 2>/dev/null || fail "redis-server exited during start-up"
    [ "$i" -eq 100 ] && fail "redis-server not answering PING on $redis_port"
    sleep 0.1
done

start_instance() {
    local port=$1
    (cd "$work" && exec "$inventoryd" \
        --set server.port="$port" --set server.bind=127.0.0.1 \
        --set redis.host=127.0.0.1 --set redis.port="$redis_port" \
        --set lock.wait-ms=10000 \
        >"$work/inventoryd-$port.log" 2>&1) &
    inst_pid=$!
    pids+=("$inst_pid")
}
start_instance "$port1"; pid1=$inst_pid
start_instance "$port2"; pid2=$inst_pid
wait_http "$pid1" "$port1" /healthz "inventoryd on $port1"
wait_http "$pid2" "$port2" /healthz "inventoryd on $port2"

bash "$root/scripts/nginx-conf.sh" "$nginx_port" "$port1" "$port2" "$work/nginx" ||
    fail "scripts/nginx-conf.sh failed"
nginx -t -q -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx-error.log" ||
    fail "nginx -t rejected the rendered template"
# nginx/nginx.conf is the template rendered for the demo's ports: no drift.
bash "$root/scripts/nginx-conf.sh" 8080 3786 3787 "$work/nginx-demo" &&
    cmp -s "$work/nginx-demo/nginx.conf" "$root/nginx/nginx.conf" ||
    fail "nginx/nginx.conf differs from nginx/nginx.conf.in rendered for 8080 3786 3787 (run scripts/nginx-conf.sh 8080 3786 3787 nginx/)"
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx-error.log" \
    -g 'daemon off;' >"$work/nginx-stdout.log" 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")
wait_http "$nginx_pid" "$nginx_port" /healthz "nginx on $nginx_port"

# ---- helpers for one round -------------------------------------------------
base="http://127.0.0.1:$nginx_port"

reset_stock() {
    local code
    code=$(curl -s -o "$work/reset.json" -w '%{http_code}' --max-time 10 \
        -X POST -H 'Content-Type: application/json' \
        -d "{\"stock\":$stock}" "$base/inventory/reset")
    [ "$code" = 200 ] || fail "POST /inventory/reset answered $code: $(cat "$work/reset.json")"
}

# run_load STRATEGY: fills the associative array L from --format kv.
declare -A L
run_load() {
    local out f rc
    # In the background, so that a signal runs the trap at once.
    "$load" --host 127.0.0.1 --port "$nginx_port" \
        --path "/inventory/sale/$1" --clients "$clients" \
        --requests "$requests" --timeout-ms 60000 --format kv \
        >"$work/load-$1.out" 2>"$work/load-$1.log" &
    load_pid=$!
    wait "$load_pid"
    rc=$?
    load_pid=
    [ "$rc" -eq 0 ] || fail "inventory-load for $1 exited with $rc: $(cat "$work/load-$1.log")"
    out=$(cat "$work/load-$1.out")
    L=()
    for f in $out; do L[${f%%=*}]=${f#*=}; done
    log "$1: $out"
    [ "${L[requests]:-}" = "$requests" ] || fail "$1: inventory-load made ${L[requests]:-?} requests, not $requests"
}

audit() {
    curl -sf --max-time 10 "$base/inventory/audit" >"$work/audit-$1.json" ||
        fail "$1: GET /inventory/audit failed"
    log "$1: audit $(cat "$work/audit-$1.json")"
}

# jqv STRATEGY EXPR: one field of that round's audit.
jqv() { jq -r "$2" "$work/audit-$1.json"; }

expect() {  # expect WHAT ACTUAL WANTED
    [ "$2" = "$3" ] || fail "$1: got $2, expected $3"
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
# And each instance counted them itself (Prometheus text of GET /metrics).
for p in "$port1" "$port2"; do
    n=$(curl -sf --max-time 5 "http://127.0.0.1:$p/metrics" |
        awk '$1 ~ /^inventoryd_http_requests_total/ { s += $2; seen = 1 }
             END { if (seen) printf "%d", s; else print "none" }')
    [ "$n" = none ] && fail "instance $p: no inventoryd_http_requests_total in GET /metrics"
    [ "$n" -gt 0 ] || fail "instance $p: inventoryd_http_requests_total is $n after the load"
done
log "PASS local: audit agrees with the clients; both instances served sales"

# ---- (c) graceful stop -----------------------------------------------------
stop_pid "$nginx_pid"
for p in "$port1:$pid1" "$port2:$pid2"; do
    stop_pid "${p#*:}"
    [ "$stop_status" = 0 ] || fail "inventoryd on ${p%%:*} exited with status $stop_status after SIGTERM"
done
pids=("$redis_pid")
log "PASS both instances stopped cleanly on SIGTERM"
exit 0
