#!/usr/bin/env bash
# valgrind_shutdown.sh -- inventoryd under valgrind: one sale with every
# strategy, each of which must answer sold (redlock on three real masters;
# the watchdog and the subscriber threads included), a contended redisson
# lock (both sales sold, the second after waiting), metrics, then SIGTERM.
# Passes when it exits 0 with no memory error and nothing leaked.
# Usage: valgrind_shutdown.sh <inventoryd>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=valgrind
inventoryd=$1
work=$(mktemp -d)
trap cleanup EXIT

pick_port; redis_port=$port
nodes=
for i in 1 2 3; do
    pick_port
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
    pids+=($!)
    nodes="$nodes${nodes:+,}127.0.0.1:$port"
    master_ports="${master_ports:-} $port"
done
pick_port   # $port: inventoryd's
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
pids+=($!)
for p in $redis_port $master_ports; do
    for _ in $(seq 1 100); do [ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
done
# The node timeout is the client's: valgrind slows the client, not Redis.
valgrind --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=9 \
    "$inventoryd" --set server.port="$port" --set redis.port="$redis_port" \
    --set redlock.nodes="$nodes" --set redlock.node-timeout-ms=2000 --set lock.wait-ms=20000 \
    --set lock.ttl-ms=2000 \
    --set faults.enabled=true >"$work/valgrind.log" 2>&1 &
vg=$!
pids+=("$vg")   # stopped by cleanup if anything below fails
base=http://127.0.0.1:$port
for _ in $(seq 1 300); do curl -sf -o /dev/null "$base/healthz" && break; sleep 0.1; done
curl -sf -XPOST "$base/inventory/reset" -d '{"stock":50}' >/dev/null || { cat "$work/valgrind.log"; exit 1; }
# A Redlock master votes once it has been up for lock.ttl-ms.
wait_voting 2000 $master_ports
bad=
n=0
for s in $("$inventoryd" --list-strategies); do
    # no ZooKeeper nor MariaDB here: tests/check_zookeeper.c and check_mysql.c sell those
    case $s in zookeeper | zookeeper-fenced | mysql | mysql-fenced) continue ;; esac
    out=$(curl -s --max-time 60 "$base/inventory/sale/$s")
    n=$((n + 1))
    [ "$(jq -r .status <<<"$out" 2>/dev/null)" = sold ] && [ "$(jq -r .strategy <<<"$out")" = "$s" ] ||
        bad="$bad
  $s: ${out:-no answer}"
done
[ "$n" -ge 14 ] || bad="$bad
  only $n strategies listed"
curl -s --max-time 60 -o "$work/first.json" "$base/inventory/sale/redisson?hold_ms=400" &
first=$!
# the second comes once the first is inside (the probe's entry), so that it
# waits, however slow valgrind makes the first
for _ in $(seq 1 300); do
    [ "$(redis-cli -p "$redis_port" HLEN inventory001:holders 2>/dev/null)" -ge 1 ] 2>/dev/null && break
    kill -0 "$first" 2>/dev/null || break
    sleep 0.05
done
second=$(curl -s --max-time 60 "$base/inventory/sale/redisson")
wait "$first"
[ "$(jq -r .status "$work/first.json" 2>/dev/null)" = sold ] || bad="$bad
  the holding redisson sale: $(cat "$work/first.json")"
[ "$(jq -r .status <<<"$second" 2>/dev/null)" = sold ] && [ "$(jq -r .lock.wait_ms <<<"$second")" -ge 100 ] ||
    bad="$bad
  the waiting redisson sale (it must sell after waiting): $second"
curl -s -o /dev/null "$base/metrics"
curl -s -o /dev/null "$base/inventory/audit"
kill -TERM "$vg"
wait "$vg"
rc=$?
keep=()   # valgrind's inventoryd is stopped already
for p in "${pids[@]}"; do [ "$p" != "$vg" ] && keep+=("$p"); done
pids=("${keep[@]}")
grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|All heap blocks" "$work/valgrind.log"
if [ -n "$bad" ]; then
    echo "valgrind: not every sale sold:$bad" >&2
    exit 1
fi
echo "valgrind: each of the $n strategies sold once; the contended redisson pair sold"
if [ "$rc" -ne 0 ]; then
    echo "valgrind: inventoryd exited $rc; the log:" >&2
    cat "$work/valgrind.log" >&2
    exit 1
fi
grep -q "ERROR SUMMARY: 0 errors" "$work/valgrind.log" || { cat "$work/valgrind.log" >&2; exit 1; }
echo "valgrind: clean shutdown, no leaks"
