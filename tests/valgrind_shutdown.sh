#!/usr/bin/env bash
# valgrind_shutdown.sh -- inventoryd under valgrind: sales with every
# strategy (the watchdog and the subscriber threads included), a contended
# redisson lock, metrics, then SIGTERM. Passes when it exits 0 with no memory
# error and nothing leaked.
# Usage: valgrind_shutdown.sh <inventoryd>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tag=valgrind
inventoryd=$1
work=$(mktemp -d)
trap cleanup EXIT

pick_port; redis_port=$port
pick_port   # $port: inventoryd's
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
pids+=($!)
valgrind --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=9 \
    "$inventoryd" --set server.port="$port" --set redis.port="$redis_port" \
    --set faults.enabled=true >"$work/valgrind.log" 2>&1 &
vg=$!
pids+=("$vg")   # stopped by cleanup if anything below fails
base=http://127.0.0.1:$port
for _ in $(seq 1 300); do curl -sf -o /dev/null "$base/healthz" && break; sleep 0.1; done
curl -sf -XPOST "$base/inventory/reset" -d '{"stock":50}' >/dev/null || { cat "$work/valgrind.log"; exit 1; }
for s in $("$inventoryd" --list-strategies); do
    curl -s -o /dev/null "$base/inventory/sale/$s"
done
curl -s -o /dev/null "$base/inventory/sale/redisson?hold_ms=400" &
sleep 0.15
curl -s -o /dev/null "$base/inventory/sale/redisson"
wait $!
curl -s -o /dev/null "$base/metrics"
curl -s -o /dev/null "$base/inventory/audit"
kill -TERM "$vg"
wait "$vg"
rc=$?
keep=()   # valgrind's inventoryd is stopped already
for p in "${pids[@]}"; do [ "$p" != "$vg" ] && keep+=("$p"); done
pids=("${keep[@]}")
grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|All heap blocks" "$work/valgrind.log"
if [ "$rc" -ne 0 ]; then
    echo "valgrind: inventoryd exited $rc; the log:" >&2
    cat "$work/valgrind.log" >&2
    exit 1
fi
grep -q "ERROR SUMMARY: 0 errors" "$work/valgrind.log" || { cat "$work/valgrind.log" >&2; exit 1; }
echo "valgrind: clean shutdown, no leaks"
