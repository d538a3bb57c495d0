#!/usr/bin/env bash
# bench.sh -- lockbench for a list of strategies and client counts, against
# throwaway redis-servers started here; prints one table, writes it out.
#
#   loadtest/bench.sh
#
# Starts its own redis-server on a free port (and three more, the Redlock
# masters, when redlock is in the list), runs lockbench for every strategy at
# every client count BENCH_RUNS times, and reports per point the median
# sales/s, the give-ups and backend errors summed over the runs, and the
# medians of commands and lock tries per sale, of clients that sold nothing,
# and of p99 acquire wait and p99 sale latency. The table goes to stdout and
# to $BENCH_RESULTS_DIR/bench.md; bench.csv there has one row per point with
# the same figures and every run's sales/s. loadtest/README-bench.md says how
# to read them.
#
# Environment (defaults in brackets):
#   BENCH_STRATEGIES   [setnx-spin owner-lua redisson redlock fenced atomic]
#   BENCH_CLIENTS      [1 16 64 200]
#   BENCH_STOCK        [2000]
#   BENCH_RUNS         [3]   runs per point; the median sales/s is reported
#   BENCH_WAIT_MS      [10000] lock.wait-ms
#   BENCH_ARGS         []    more lockbench options (--ttl-ms 30000, ...)
#   BENCH_MAX_S        [120] per run: lockbench stops its clients after this
#   BENCH_BUILD_DIR    [build/] where lockbench is, or is built with cmake
#   BENCH_RESULTS_DIR  [results/]
#
# Exit status: 0 when every run passed its audit, 1 when some run sold a unit
# twice or oversold (or did not finish, or failed), 2 when nothing could be
# run (no redis-server, the build failed). Every process started here is
# stopped by its pid on the way out.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=bench.sh
strategies=${BENCH_STRATEGIES:-setnx-spin owner-lua redisson redlock fenced atomic}
clients_list=${BENCH_CLIENTS:-1 16 64 200}
stock=${BENCH_STOCK:-2000}
runs=${BENCH_RUNS:-3}
wait_ms=${BENCH_WAIT_MS:-10000}
max_s=${BENCH_MAX_S:-120}
build=${BENCH_BUILD_DIR:-$root/build}
results=${BENCH_RESULTS_DIR:-$root/results}
read -r -a extra <<<"${BENCH_ARGS:-}"

die() {
    echo "$me: $*" >&2
    exit 2
}

case "$runs" in ''|*[!0-9]*|0) die "BENCH_RUNS must be a positive whole number" ;; esac
case "$stock" in ''|*[!0-9]*|0) die "BENCH_STOCK must be a positive whole number" ;; esac
for tool in redis-server redis-cli; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (run scripts/deps.sh)"
done

# ---- the binary ------------------------------------------------------------
lockbench=$build/lockbench
if [ ! -x "$lockbench" ]; then
    echo "$me: building lockbench in $build" >&2
    if ! cmake -S "$root" -B "$build" >/dev/null ||
       ! cmake --build "$build" -j2 --target lockbench >/dev/null; then
        die "cmake could not build lockbench in $build"
    fi
fi
for s in $strategies; do
    "$lockbench" --help | grep -q -- "[ ,]$s\(,\|$\)" ||
        die "unknown strategy '$s' (lockbench --help lists them)"
done

# ---- servers ---------------------------------------------------------------
work=$(mktemp -d /tmp/inventoryd-bench.XXXXXX)
pids=()
bench_pid=
# shellcheck disable=SC2317  # called by the trap
cleanup() {
    local p
    if [ -n "$bench_pid" ]; then
        kill "$bench_pid" 2>/dev/null
        wait "$bench_pid" 2>/dev/null
    fi
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# A port below the ephemeral range that nothing listens on and that this
# script has not picked already.
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
    die "no free TCP port found"
}

start_redis() {
    local port=$1 pid i
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize no --dir "$work" >"$work/redis-$port.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    for i in $(seq 1 100); do
        [ "$i" -gt 1 ] && sleep 0.1
        [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && return 0
        kill -0 "$pid" 2>/dev/null || die "redis-server on $port exited during start-up"
    done
    die "redis-server not answering PING on $port"
}

pick_port; redis_port=$port
start_redis "$redis_port"
redlock_spec=
case " $strategies " in
    *" redlock "*)
        for _ in 1 2 3; do
            pick_port
            start_redis "$port"
            redlock_spec="$redlock_spec${redlock_spec:+,}127.0.0.1:$port"
        done
        ;;
esac
echo "$me: redis 127.0.0.1:$redis_port${redlock_spec:+, redlock masters $redlock_spec};" \
     "stock $stock, $runs runs per point, lock.wait-ms $wait_ms" >&2

# ---- runs ------------------------------------------------------------------
declare -A R          # R[strategy|clients|run|key] = value from --format kv
declare -A RC         # RC[strategy|clients|run] = exit status
failed=0
started=$(date +%s)
for s in $strategies; do
    for c in $clients_list; do
        for r in $(seq 1 "$runs"); do
            # In the background, so that a signal reaches the trap at once
            # and the trap can stop it by its pid.
            "$lockbench" --strategy "$s" --clients "$c" --stock "$stock" \
                --redis "127.0.0.1:$redis_port" ${redlock_spec:+--redlock "$redlock_spec"} \
                --wait-ms "$wait_ms" --max-s "$max_s" --format kv "${extra[@]}" \
                >"$work/out" 2>"$work/err" &
            bench_pid=$!
            wait "$bench_pid"
            rc=$?
            bench_pid=
            out=$(cat "$work/out")
            RC["$s|$c|$r"]=$rc
            [ "$rc" -eq 0 ] || failed=1
            for kv in $out; do
                key=${kv%%=*}
                R["$s|$c|$r|$key"]=${kv#*=}
            done
            printf '%s: %-10s C=%-4s run %d: %8s sales/s, give-ups %s, exit %d\n' "$me" "$s" "$c" \
                "$r" "${R["$s|$c|$r|sales_per_s"]:-?}" "${R["$s|$c|$r|giveups"]:-?}" "$rc" >&2
            [ -s "$work/err" ] && sed "s/^/    /" "$work/err" >&2
        done
    done
done
elapsed=$(( $(date +%s) - started ))

# The median of the numbers on stdin, one a line (the mean of the middle two
# when their count is even); "?" when there are none.
median() {
    grep -E '^-?[0-9.]+$' | sort -g |
        awk '{ v[NR] = $1 } END {
            if (NR == 0) { print "?"; exit }
            if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] + v[NR / 2 + 1]) / 2
            print m }'
}

# num PRINTF-FORMAT VALUE: VALUE formatted, or "?" (right-aligned to the
# format's width) when it is not a number.
num() {
    # shellcheck disable=SC2059  # the format is the argument
    if [[ "$2" =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then
        printf "$1" "$2"
    else
        printf "${1//[.0-9]*[fd]/s}" "?"
    fi
}

# field KEY S C: every run's value of KEY, one a line.
field() {
    local key=$1 s=$2 c=$3 r
    for r in $(seq 1 "$runs"); do
        printf '%s\n' "${R["$s|$c|$r|$key"]:-}"
    done
}

# sum KEY S C over the runs.
sum() {
    local t=0 v
    for v in $(field "$@"); do
        [[ "$v" =~ ^[0-9]+$ ]] && t=$(( t + v ))
    done
    echo "$t"
}

mkdir -p "$results" || die "cannot create $results"
csv=$results/bench.csv
md=$results/bench.md
echo "strategy,clients,stock,runs,sales_per_s_median,sales_per_s_runs,giveups,backend_errors,other,sold_twice,oversold,cmds_per_sale,tries_per_sale,clients_no_sale,wait_p50_ms,wait_p99_ms,lat_p50_ms,lat_p99_ms,audit" >"$csv"
header=$(printf '%-10s %4s %9s %8s %7s %9s %6s %7s %8s %8s %6s' \
         strategy C 'sales/s' give-ups backend 'cmds/sale' tries 'no-sale' 'p99 wait' 'p99 lat' audit)
table="$header"
mdtable="| strategy | C | sales/s (median) | give-ups | backend errors | cmds/sale | lock tries/sale | clients with no sale | p50 / p99 wait ms | p50 / p99 latency ms | audit |
|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
for s in $strategies; do
    for c in $clients_list; do
        sps=$(field sales_per_s "$s" "$c" | median)
        gu=$(sum giveups "$s" "$c")
        be=$(sum backend_errors "$s" "$c")
        ot=$(sum other "$s" "$c")
        st=$(sum sold_twice "$s" "$c")
        os=$(sum oversold "$s" "$c")
        cps=$(field cmds_per_sale "$s" "$c" | median)
        tps=$(field tries_per_sale "$s" "$c" | median)
        ns=$(field clients_no_sale "$s" "$c" | median)
        w50=$(field wait_p50_ms "$s" "$c" | median)
        w99=$(field wait_p99_ms "$s" "$c" | median)
        l50=$(field lat_p50_ms "$s" "$c" | median)
        l99=$(field lat_p99_ms "$s" "$c" | median)
        audit=ok
        for r in $(seq 1 "$runs"); do
            case "${RC["$s|$c|$r"]}" in
                0) ;;
                1) audit=FAIL ;;
                3) [ "$audit" = ok ] && audit=unfin ;;
                *) [ "$audit" = ok ] && audit=error ;;
            esac
        done
        runs_sps=$(field sales_per_s "$s" "$c" | paste -sd';')
        line=$(printf '%-10s %4s %s %8s %7s %s %s %s %s %s %6s' "$s" "$c" "$(num %9.0f "$sps")" \
               "$gu" "$be" "$(num %9.2f "$cps")" "$(num %6.2f "$tps")" "$(num %7.0f "$ns")" \
               "$(num %8.0f "$w99")" "$(num %8.1f "$l99")" "$audit")
        table="$table"$'\n'"$line"
        mdtable="$mdtable"$'\n'"| $s | $c | $(num %.0f "$sps") | $gu | $be | $(num %.2f "$cps") | $(num %.2f "$tps") | $(num %.0f "$ns") | $w50 / $w99 | $(num %.2f "$l50") / $(num %.2f "$l99") | $audit |"
        echo "$s,$c,$stock,$runs,$sps,$runs_sps,$gu,$be,$ot,$st,$os,$cps,$tps,$ns,$w50,$w99,$l50,$l99,$audit" >>"$csv"
    done
done

echo "$table"
echo "$me: ${elapsed} s for $(( $(wc -w <<<"$strategies") * $(wc -w <<<"$clients_list") * runs )) runs; wrote $md and $csv" >&2

{
    echo "# lockbench: sales under each lock strategy"
    echo
    rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
    [ -n "$(git -C "$root" status --porcelain -- src 2>/dev/null)" ] && rev="$rev + changes in src/"
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(redis-server --version | sed 's/ sha=.*//'), inventoryd $rev."
    echo "Stock $stock, $runs runs per point, lock.wait-ms $wait_ms${BENCH_ARGS:+, lockbench $BENCH_ARGS}; one main Redis${redlock_spec:+ and three Redlock masters}, all on this host. ${elapsed} s in all."
    echo
    echo "$mdtable"
    echo
    echo "sales/s: the median of the runs (every run's figure is in bench.csv)."
    echo "give-ups, backend errors: summed over the runs. The other columns: medians."
    echo "cmds/sale counts every Redis command, those run inside Lua scripts too,"
    echo "on the main Redis and the Redlock masters. Waits and latencies count every"
    echo "call begun while stock remained. See loadtest/README-bench.md."
} >"$md"

exit "$failed"
