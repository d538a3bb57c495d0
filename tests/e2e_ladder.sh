#!/usr/bin/env bash
# e2e_ladder.sh INVENTORYD INVENTORY_LOAD
#
# The contract's requirement, end to end: "Under 200 concurrent clients on
# two instances, every strategy from setnx-spin up sells exactly the stock:
# zero oversold, zero violations."
#
# One throwaway redis-server, two inventoryd instances behind a real nginx
# (upstream weights 1 and 2, rendered by scripts/nginx-conf.sh), every port a
# free one picked here, everything started stopped by its pid on the way out.
# The instances run with lock.wait-ms=20000 and lock.ttl-ms=10000, so that no
# sale waits out its lock even with the spinning strategies on two cores.
#
# For each of setnx-spin expiring owner-check owner-lua reentrant watchdog
# redisson fenced atomic: reset the stock to 200, fire 600 sales from 200
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

if [ $# -ne 2 ]; then
    echo "usage: $0 INVENTORYD INVENTORY_LOAD" >&2
    exit 2
fi
inventoryd=$(realpath "$1")
load=$(realpath "$2")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
clients=${E2E_CLIENTS:-200}
requests=${E2E_REQUESTS:-600}
stock=200
wait_ms=20000
ttl_ms=10000
exact=(setnx-spin expiring owner-check owner-lua reentrant watchdog redisson fenced atomic)
safe_only=(setnx-retry)

for tool in redis-server redis-cli nginx curl jq; do
    command -v "$tool" >/dev/null 2>&1 || { echo "e2e-ladder: $tool not found (run scripts/deps.sh)" >&2; exit 1; }
done

# The instances must see only what this test sets.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^INVENTORYD_' || true)

work=$(mktemp -d /tmp/inventoryd-ladder.XXXXXX)
# nginx's workers run as nobody when the master is root: they must reach it.
chmod 755 "$work"
pids=()
load_pid=
failed=0
t0=$SECONDS

log() { echo "e2e-ladder: $*"; }

show_logs() {
    local f
    for f in "$work"/*.log; do
        [ -s "$f" ] || continue
        if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f"; then
            echo "---- sanitizer report in $f" >&2
            grep -m 1 -A 30 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f" >&2
            continue
        fi
        echo "---- last lines of $f" >&2
        tail -n 20 "$f" >&2
    done
}

# What the current round saw, printed with a failure.
round=
fail() {
    echo "e2e-ladder: FAIL: $*" >&2
    [ -n "$round" ] && echo "$round" >&2
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
    local i
    [ -n "$load_pid" ] && stop_pid "$load_pid"
    # Last started, first stopped: nginx, the instances, then Redis.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        stop_pid "${pids[$i]}"
    done
    pids=()
    if [ "$failed" -eq 0 ]; then
        rm -rf "$work"
    else
        echo "e2e-ladder: logs kept in $work" >&2
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
        --set lock.wait-ms="$wait_ms" --set lock.ttl-ms="$ttl_ms" \
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
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx-error.log" \
    -g 'daemon off;' >"$work/nginx-stdout.log" 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")
wait_http "$nginx_pid" "$nginx_port" /healthz "nginx on $nginx_port"

# Every strategy this test names must exist in this build.
known=" $("$inventoryd" --list-strategies 2>/dev/null | tr '\n' ' ') "
for s in "${exact[@]}" "${safe_only[@]}"; do
    case "$known" in *" $s "*) ;; *) fail "$s: not in 'inventoryd --list-strategies' ($known)" ;; esac
done

# ---- helpers for one round -------------------------------------------------
base="http://127.0.0.1:$nginx_port"

reset_stock() {
    local code
    code=$(curl -s -o "$work/reset.json" -w '%{http_code}' --max-time 10 \
        -X POST -H 'Content-Type: application/json' \
        -d "{\"stock\":$stock}" "$base/inventory/reset")
    [ "$code" = 200 ] || fail "$1: POST /inventory/reset answered $code: $(cat "$work/reset.json")"
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
    [ "$rc" -eq 0 ] || fail "$1: inventory-load exited with $rc: $(cat "$work/load-$1.log")"
    out=$(cat "$work/load-$1.out")
    L=()
    for f in $out; do L[${f%%=*}]=${f#*=}; done
    for f in requests sold sold_out lock_timeout backend_unavailable other errors sales_per_s p99_ms; do
        [ -n "${L[$f]:-}" ] || fail "$1: inventory-load printed no $f= in: $out"
    done
    round="e2e-ladder: $1: clients saw: $out"
    [ "${L[requests]}" = "$requests" ] || fail "$1: inventory-load made ${L[requests]} requests, not $requests"
}

audit() {
    curl -sf --max-time 10 "$base/inventory/audit" >"$work/audit-$1.json" ||
        fail "$1: GET /inventory/audit failed"
    round="$round
e2e-ladder: $1: audit: $(cat "$work/audit-$1.json")"
}

# jqv STRATEGY EXPR: one field of that round's audit.
jqv() { jq -r "$2" "$work/audit-$1.json"; }

expect() {  # expect WHAT ACTUAL WANTED
    [ "$2" = "$3" ] || fail "$1: got $2, expected $3"
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
stop_pid "$nginx_pid"
for p in "$port1:$pid1" "$port2:$pid2"; do
    stop_pid "${p#*:}"
    [ "$stop_status" = 0 ] || fail "inventoryd on ${p%%:*} exited with status $stop_status after SIGTERM"
done
pids=("$redis_pid")
log "PASS the ladder: every strategy from setnx-spin up sold exactly $stock, none oversold, no violation ($((SECONDS - t0)) s)"
exit 0
