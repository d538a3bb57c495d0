#!/usr/bin/env bash
# ab.sh -- two builds of lockbench, run alternately on the same throwaway
# Redis servers, so that their figures come from one run of a noisy machine:
# for each strategy and client count, A then B, AB_RUNS times, and the
# median sales/s of each with the ratio B/A.
#
#   loadtest/ab.sh OLD_BUILD_DIR NEW_BUILD_DIR
#
# Environment: AB_STRATEGIES (every locked strategy and atomic), AB_CLIENTS
# (64 200), AB_RUNS (5), AB_STOCK (2000), AB_ARGS_A, AB_ARGS_B (more lockbench
# options for one side, e.g. AB_ARGS_B="--set history.enabled=false" with the
# same build twice to measure the history's cost).
# Prints one table row per point (median sales/s of A and of B, B/A, give-ups)
# and writes it to $AB_RESULTS_DIR/ab.md (results/). Exit status 0, or 1 when
# a run failed its audit, 2 on bad usage.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=ab
. "$root/scripts/lib.sh"

[ $# -eq 2 ] || { echo "usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR" >&2; exit 2; }
a_bin=$(realpath "$1")/lockbench
b_bin=$(realpath "$2")/lockbench
stats=$root/build/inventory-stats
for b in "$a_bin" "$b_bin" "$stats"; do [ -x "$b" ] || { echo "$tag: $b not found" >&2; exit 2; }; done
strategies=${AB_STRATEGIES:-setnx-retry setnx-spin expiring owner-check owner-lua reentrant watchdog redisson redlock fenced batched atomic}
clients_list=${AB_CLIENTS:-64 200}
runs=${AB_RUNS:-5}
stock=${AB_STOCK:-2000}
results=${AB_RESULTS_DIR:-$root/results}
read -r -a args_a <<<"${AB_ARGS_A:-}"
read -r -a args_b <<<"${AB_ARGS_B:-}"

setup_work ab
pick_port; redis_port=$port
start_redis "$redis_port" redis
masters=()
for i in 1 2 3; do
    pick_port
    start_redis "$port" "master-$i"
    masters+=("$port")
done
spec="127.0.0.1:${masters[0]},127.0.0.1:${masters[1]},127.0.0.1:${masters[2]}"
mkdir -p "$results"
status=0

# one BIN S C ARGS...: one lockbench run; sets v (sales/s) and g (give-ups).
one() {
    local bin=$1 s=$2 c=$3
    shift 3
    "$bin" --strategy "$s" --clients "$c" --stock "$stock" --redis "127.0.0.1:$redis_port" \
        --redlock "$spec" --wait-ms 20000 --max-s 120 --format kv "$@" >"$work/out" 2>>"$work/err" ||
        { status=1; echo "$tag: $bin $s C=$c failed: $(cat "$work/out")" >&2; }
    kv_parse "$work/out"
    v=${L[sales_per_s]:-0}
    g=${L[giveups]:-0}
}

table=$results/ab.md
{
    echo "| strategy | C | A sales/s | B sales/s | B/A | give-ups A/B |"
    echo "|---|---:|---:|---:|---:|---:|"
} >"$table"
for s in $strategies; do
    [ "$s" = redlock ] && wait_voting 10000 "${masters[@]}"
    for c in $clients_list; do
        a=(); b=(); ga=0; gb=0
        for r in $(seq 1 "$runs"); do
            one "$a_bin" "$s" "$c" "${args_a[@]}"; a+=("$v"); ga=$((ga + g))
            one "$b_bin" "$s" "$c" "${args_b[@]}"; b+=("$v"); gb=$((gb + g))
        done
        ma=$("$stats" median "${a[@]}")
        mb=$("$stats" median "${b[@]}")
        ratio=$("$stats" -d 2 ratio "$mb" "$ma")
        row="| $s | $c | $ma | $mb | $ratio | $ga/$gb |"
        echo "$row" >>"$table"
        log "$s C=$c: A ${a[*]} -> $ma; B ${b[*]} -> $mb; B/A $ratio"
    done
done
echo
cat "$table"
exit "$status"
