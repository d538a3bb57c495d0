#!/usr/bin/env bash
# idle-bound.sh -- what an idle keep-alive connection costs, and why.
#
# libmicrohttpd (0.9.75, Debian 12's, and its current source too) zeroes a
# connection's whole memory pool (server.connection-memory-kb) after every
# request (MHD_pool_reset's memset), so a keep-alive connection that has made
# one request holds its whole pool in RSS while it idles. The pool also bounds
# the largest request libmicrohttpd hands to the service: past it, the client
# gets libmicrohttpd's own HTML 431 (or 414) instead of the service's JSON one,
# which the service sends for headers over 12 KB (docs/api.md).
#
# For each pool size, one instance: the largest X-Pad header value the service
# itself still answers (found by bisection, each probe a fresh curl), whether
# its JSON 431 is reachable at all (a 12 KB + 1 value answered by the service),
# and the instance's RSS with IB_IDLE idle keep-alive connections open (each
# made one request), with the KB each one costs.
#
#   loadtest/idle-bound.sh                       about 2 minutes
#   IB_POOLS="12 36" IB_IDLE=2000 loadtest/idle-bound.sh
#
# Environment (defaults in brackets):
#   IB_POOLS       [12 16 20 24 28 36] server.connection-memory-kb values (KB)
#   IB_IDLE        [10000] idle keep-alive connections per pool size
#   IB_BUILD_DIR   [build/] where inventoryd is
#   IB_RESULTS_DIR [results/] idle-bound.md is written there
# Exit status 0, 1 when a step failed, 2 on bad usage. Every process started
# here is stopped by its pid on the way out.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag="idle-bound"
. "$root/scripts/lib.sh"
fail_status=2
pools=${IB_POOLS:-12 16 20 24 28 36}
idle=${IB_IDLE:-10000}
build=${IB_BUILD_DIR:-$root/build}
results=${IB_RESULTS_DIR:-$root/results}
headers_max=$((12 * 1024)) # src/http.c HEADERS_MAX

case "$idle" in '' | *[!0-9]* | 0) die "IB_IDLE must be a positive whole number" ;; esac
for p in $pools; do
    case "$p" in '' | *[!0-9]*) die "IB_POOLS: '$p' is not a whole number of KB" ;; esac
    if [ "$p" -lt 8 ] || [ "$p" -gt 1024 ]; then die "IB_POOLS: $p is outside 8..1024 (server.connection-memory-kb)"; fi
done
require_tools redis-server redis-cli curl python3
[ -x "$build/inventoryd" ] || die "$build/inventoryd not found: build first (cmake --build build)"
inventoryd=$(realpath "$build/inventoryd")
need_fds $((idle + 1024)) "IB_IDLE=$idle"
mkdir -p "$results" || die "cannot create $results"
setup_work idle-bound
fail_status=1
pids=()

pick_port
redis_port=$port
start_redis "$redis_port" redis

# probe N: who answers a request with an X-Pad header of N bytes: "ours"
# (the service's JSON: its 200, or its own 431), "mhd" (libmicrohttpd's own
# 431, not JSON) or "dropped" (the connection closed with no answer: the
# request fit the pool, its answer's header did not).
probe() {
    local pad got
    pad=$(printf '%*s' "$1" '' | tr ' ' a)
    got=$(curl -s -o /dev/null -w '%{http_code} %{content_type}' -H "X-Pad: $pad" \
        "http://127.0.0.1:$inst_port/strategies")
    case "$got" in
        "200 application/json"* | "431 application/json"*) echo ours ;;
        431*) echo mhd ;;
        "000"*) echo dropped ;;
        *) fail "an X-Pad of $1 bytes was answered '$got'" ;;
    esac
}

# edge WHO: the largest X-Pad size (1 .. the pool) that probe does not
# answer WHO, by bisection (probe's answers go ours, dropped, mhd as N grows).
edge() {
    local lo=1 hi=$((pool * 1024)) mid
    [ "$(probe "$lo")" = ours ] || fail "pool $pool KB: even a 1-byte header is not served"
    while [ $((hi - lo)) -gt 1 ]; do
        mid=$(((lo + hi) / 2))
        case "$1:$(probe "$mid")" in
            ours:ours | mhd:ours | mhd:dropped) lo=$mid ;;
            *) hi=$mid ;;
        esac
    done
    echo "$lo"
}

table=$results/idle-bound.md
{
    echo "| pool (KB) | X-Pad the service answers (bytes) | dropped, no answer (bytes) | libmicrohttpd's 431 (bytes) | its JSON 431 past 12 KB | RSS before (MB) | RSS with $idle idle (MB) | KB a connection |"
    echo "|---:|---:|---:|---:|---|---:|---:|---:|"
} >"$table"
bound=
for pool in $pools; do
    pick_port
    inst_port=$port
    start_instance "$inst_port" --set server.connection-memory-kb="$pool" \
        --set server.max-connections=$((idle + 200)) --set server.connection-timeout-s=600 \
        --set inventory.probe=false --set history.enabled=false
    wait_http "$inst_pid" "$inst_port" /healthz "inventoryd (pool $pool KB) on $inst_port"
    big=$(edge ours) || exit 1
    last=$(edge mhd) || exit 1
    dropped=none
    [ "$last" -le "$big" ] || dropped="$((big + 1))-$last"
    json431=no
    if [ "$big" -gt "$headers_max" ]; then json431=yes; fi
    rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$inst_pid/status")
    hold_idle "$inst_port" "$idle" 600
    sleep 1
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$inst_pid/status")
    per=$(awk -v a="$rss" -v b="$rss0" -v n="$idle" 'BEGIN {printf "%.1f", (a - b) / n}')
    row="| $pool | 1-$big | $dropped | $((last + 1)) and over | $json431 | $((rss0 / 1024)) | $((rss / 1024)) | $per |"
    echo "$row" >>"$table"
    log "$row"
    [ -n "$bound" ] || [ "$json431" = no ] ||
        bound="the smallest pool here with the service's JSON 431 reachable is $pool KB: $idle idle connections hold $((rss / 1024)) MB"
    stop_pid "$idle_pid"
    forget_pid "$idle_pid"
    stop_pid "$inst_pid"
    forget_pid "$inst_pid"
done
echo
cat "$table"
echo
none="no pool size here reaches the service's JSON 431 for headers over 12 KB"
echo "${bound:-$none}."
