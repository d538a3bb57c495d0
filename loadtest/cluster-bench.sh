#!/usr/bin/env bash
# cluster-bench.sh -- per-item locks over a Redis Cluster against one Redis,
# in one run: CB_ITEMS items (default 8, inventory001...), each sold by its
# own lockbench process (CB_CLIENTS threads, CB_STOCK units, lock.scope=item)
# at the same time, first on one redis-server, then on a local cluster of
# three masters and three replicas, CB_RUNS times alternately.
#
#   loadtest/cluster-bench.sh [BUILD_DIR]        (default build/)
#
# Environment: CB_STRATEGY (redisson), CB_ITEMS (8), CB_CLIENTS (8),
# CB_STOCK (2000), CB_RUNS (3), CB_RESULTS_DIR (results). The items are
# spread as evenly as they can be over the three masters.
# Prints, and writes to $CB_RESULTS_DIR/cluster-bench.md: the median total
# sales/s on one Redis and on the cluster and their ratio; each item's
# median sales/s on the cluster and its master; the Redis commands each
# master ran during the cluster runs (INFO commandstats, median per run)
# and how far the busiest and the idlest shard are from the mean. Both set
# inventory.probe=false (the cluster needs it) and keep the history on.
# Exit status 0, 1 when a run failed its audit or did not sell out, 2 on
# bad usage.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=cluster-bench
. "$root/scripts/lib.sh"

[ $# -le 1 ] || { echo "usage: $0 [BUILD_DIR]" >&2; exit 2; }
build=$(realpath "${1:-$root/build}")
bench=$build/lockbench
stats=$build/inventory-stats
for b in "$bench" "$stats"; do [ -x "$b" ] || { echo "$tag: $b not found (build first)" >&2; exit 2; }; done
strategy=${CB_STRATEGY:-redisson}
nitems=${CB_ITEMS:-8}
clients=${CB_CLIENTS:-8}
stock=${CB_STOCK:-2000}
runs=${CB_RUNS:-3}
results=${CB_RESULTS_DIR:-$root/results}
for v in "$nitems" "$clients" "$stock" "$runs"; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "$tag: '$v' is not a positive number (CB_*)" >&2; exit 2; }
done
require_tools redis-server redis-cli
setup_work cluster-bench

pick_port; single=$port
start_redis "$single" single
start_free_cluster
# The items, spread as evenly as they can be over the three masters (eight
# make 3, 3 and 2): inventory001, inventory002, ..., each taken only while
# its master has fewer than its share.
all_masters=$(masters)
share=$(( (nitems + 2) / 3 ))
items=()
declare -A owner=() count=()
for i in $(seq 1 999); do
    it=$(printf 'inventory%03d' "$i")
    o=$(owner_of "$it")
    [ "${count[$o]:-0}" -lt "$share" ] || continue
    count[$o]=$(( ${count[$o]:-0} + 1 ))
    owner[$it]=$o
    items+=("$it")
    [ "${#items[@]}" -lt "$nitems" ] || break
done
log "$nitems items, $clients clients and $stock units each, $strategy; one Redis on $single; cluster on ${nodes[*]}"
for m in $all_masters; do
    log "master $m holds: $(for it in "${items[@]}"; do [ "${owner[$it]}" = "$m" ] && printf '%s ' "$it"; done)"
done

# cmds PORT: the calls INFO commandstats counts on PORT (INFO itself left out).
cmds() {
    redis-cli -p "$1" INFO commandstats | tr -d '\r' |
        awk -F'[:,=]' '/^cmdstat_/ && $1 != "cmdstat_info" && $2 == "calls" { n += $3 } END { print n + 0 }'
}

status=0
# round MODE: every item sold at once, one lockbench each; sets total (sum
# of sales/s) and rate[ITEM].
declare -A rate=()
round() {
    local mode=$1 it pids=() k=0
    local args=(--strategy "$strategy" --clients "$clients" --stock "$stock" --wait-ms 30000
                --max-s 120 --format kv --set lock.scope=item --set inventory.probe=false)
    if [ "$mode" = cluster ]; then
        args+=(--redis "127.0.0.1:${nodes[0]}" --set "redis.cluster.nodes=$seeds")
    else
        args+=(--redis "127.0.0.1:$single")
    fi
    for it in "${items[@]}"; do
        "$bench" "${args[@]}" --set "inventory.key=$it" >"$work/$mode-$it.out" 2>"$work/$mode-$it.err" &
        pids+=($!)
    done
    for it in "${items[@]}"; do
        wait "${pids[$k]}" || { status=1; log "$mode $it failed: $(cat "$work/$mode-$it.out" "$work/$mode-$it.err" | head -3)"; }
        k=$((k + 1))
    done
    total=0
    for it in "${items[@]}"; do
        kv_parse "$work/$mode-$it.out"
        rate[$it]=${L[sales_per_s]:-0}
        total=$("$stats" sum "$total" "${rate[$it]}")
    done
}

single_totals=()
cluster_totals=()
declare -A item_rates=() shard_cmds=()
for r in $(seq 1 "$runs"); do
    round single
    single_totals+=("$total")
    declare -A before=()
    for m in $all_masters; do before[$m]=$(cmds "$m"); done
    round cluster
    cluster_totals+=("$total")
    for m in $all_masters; do shard_cmds[$m]="${shard_cmds[$m]:-} $(( $(cmds "$m") - before[$m] ))"; done
    for it in "${items[@]}"; do item_rates[$it]="${item_rates[$it]:-} ${rate[$it]}"; done
    log "run $r: one Redis ${single_totals[-1]} sales/s, cluster ${cluster_totals[-1]} sales/s"
done

ms=$("$stats" median "${single_totals[@]}")
mc=$("$stats" median "${cluster_totals[@]}")
mkdir -p "$results"
out=$results/cluster-bench.md
{
    echo "$nitems items x $stock units, $clients clients each, \`$strategy\`, lock.scope=item, medians of $runs runs"
    echo
    echo "| | one Redis | cluster (3 masters) | cluster / one |"
    echo "|---|---:|---:|---:|"
    echo "| total sales/s | $ms | $mc | $("$stats" -d 2 ratio "$mc" "$ms") |"
    echo
    echo "| item | master | sales/s on the cluster |"
    echo "|---|---:|---:|"
    for it in "${items[@]}"; do
        # shellcheck disable=SC2086 # one word per run
        echo "| $it | ${owner[$it]} | $("$stats" median ${item_rates[$it]}) |"
    done
    echo
    echo "| master | items | Redis commands per run |"
    echo "|---:|---:|---:|"
    meds=()
    for m in $all_masters; do
        n=0
        for it in "${items[@]}"; do [ "${owner[$it]}" = "$m" ] && n=$((n + 1)); done
        # shellcheck disable=SC2086 # one word per run
        med=$("$stats" median ${shard_cmds[$m]})
        meds+=("$med")
        echo "| $m | $n | $med |"
    done
    mean=$("$stats" mean "${meds[@]}")
    max=$(printf '%s\n' "${meds[@]}" | sort -n | tail -1)
    min=$(printf '%s\n' "${meds[@]}" | sort -n | head -1)
    echo
    pct() { awk -v a="$1" -v m="$2" 'BEGIN { printf "%+.0f%%", (m > 0 ? (a - m) / m * 100 : 0) }'; }
    echo "Commands per shard against their mean: busiest $(pct "$max" "$mean"), idlest $(pct "$min" "$mean")."
} >"$out"
cat "$out"
log "written to $out"
exit "$status"
