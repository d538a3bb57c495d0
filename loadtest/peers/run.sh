#!/usr/bin/env bash
# run.sh -- loadtest/bench.sh --peers: the Node.js lock libraries people use
# (loadtest/peers/peer.js) and lockbench, bare and default, on the same work,
# round-robin in one run, at C=16, 64 and 200; prints the ratio table.
#
#   loadtest/bench.sh --peers           (which runs this)
#
# Starts its own redis-server and three Redlock masters on free ports (no
# persistence, 127.0.0.1 only), installs the peers with `npm ci` in
# loadtest/peers when node_modules is missing, and builds lockbench and
# inventory-stats when they are missing. Then, PEERS_RUNS rounds; in each
# round, for each C, every runner once, in this order:
#   node-redlock 5 on the one Redis, node-redlock 4 on the three masters,
#   redis-semaphore's Mutex (each: peer.js, PEERS_PROCS processes);
#   lockbench owner-lua, redlock, redisson and handoff, each bare
#   (--set inventory.probe=false --set history.enabled=false) and default;
#   lockbench batched and atomic, bare;
#   and handoff's ceiling: one client sending handoff's commit script
#   (src/lua/handoff-sale.lua) back to back with redis-benchmark, PEERS_CEILING_N
#   times, in the state where each run does the whole hot path (the lock is
#   the caller's, the caller rides as its own rider: every run commits,
#   queues it, and grants it the lock again). No wake-up, no client work, no
#   wait: the most any lock can sell that waits one round trip of that
#   script per sale (docs/speed.md, "The ceiling of one round trip a sale").
# Every figure is the median of the rounds' sales/s. A runner's stock is
# PEERS_STOCK (2000), or PEERS_FAST_STOCK (20000) for handoff, batched and
# atomic, which would sell 2000 in a few tens of ms; lock.wait-ms is 10000.
#
# Environment (defaults in brackets):
#   PEERS_RUNS        [3]          rounds
#   PEERS_CLIENTS     [16 64 200]
#   PEERS_PROCS       [nproc]      worker processes per peer (Node runs one thread)
#   PEERS_STOCK       [2000]
#   PEERS_FAST_STOCK  [20000]
#   PEERS_RETRY_MS    [10 for redlock5 and semaphore, 30 for redlock4]: how
#                     often a peer retries a busy lock (redlock adds up to as
#                     much jitter); the values are the best of 1, 3, 10 and
#                     30 ms at C=64 in a trial on the development machine
#   PEERS_MAX_S       [120]        a run stops after this
#   PEERS_CEILING_N   [20000]      commit scripts per ceiling run
#   BENCH_BUILD_DIR   [build/]     where lockbench and inventory-stats are
#   BENCH_RESULTS_DIR [results/]   peers.md and peers.csv go there
#
# Exit status: 0 when every run sold its stock exactly, 1 when one sold a
# unit twice, oversold, or did not finish, 2 when nothing could be run.
# Every process started here is stopped by its pid on the way out.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tag=peers
. "$root/scripts/lib.sh"
fail_status=2

runs=${PEERS_RUNS:-3}
clients_list=${PEERS_CLIENTS:-16 64 200}
procs=${PEERS_PROCS:-$(nproc)}
stock=${PEERS_STOCK:-2000}
fast_stock=${PEERS_FAST_STOCK:-20000}
max_s=${PEERS_MAX_S:-120}
ceiling_n=${PEERS_CEILING_N:-20000}
build=${BENCH_BUILD_DIR:-$root/build}
results=${BENCH_RESULTS_DIR:-$root/results}
peers_dir=$root/loadtest/peers

for v in runs procs stock fast_stock max_s ceiling_n; do
    case "${!v}" in ''|*[!0-9]*|0) die "PEERS_${v^^} must be a positive whole number" ;; esac
done
require_tools redis-server redis-cli redis-benchmark node npm

if [ ! -d "$peers_dir/node_modules/redlock5" ] || [ ! -d "$peers_dir/node_modules/redis-semaphore" ]; then
    echo "$tag: installing the peers (npm ci in $peers_dir)" >&2
    (cd "$peers_dir" && npm ci --no-audit --no-fund >/dev/null) || die "npm ci failed in $peers_dir"
fi
lockbench=$build/lockbench
if [ ! -x "$lockbench" ] || [ ! -x "$build/inventory-stats" ]; then
    echo "$tag: building lockbench and inventory-stats in $build" >&2
    { cmake -S "$root" -B "$build" >/dev/null &&
      cmake --build "$build" -j2 --target lockbench inventory-stats >/dev/null; } ||
        die "cmake could not build lockbench and inventory-stats in $build"
fi
find_stats "$build/inventory-stats"

setup_work peers
pick_port; redis_port=$port
start_redis "$redis_port"
masters=()
for m in 1 2 3; do
    pick_port
    start_redis "$port" "master-$m"
    masters+=("127.0.0.1:$port")
done
spec=$(IFS=,; echo "${masters[*]}")
echo "$tag: redis 127.0.0.1:$redis_port, Redlock masters $spec; $runs rounds, $procs processes per peer" >&2
wait_voting 10000 "${masters[@]##*:}"

bare=(--set inventory.probe=false --set history.enabled=false)
# The runners: NAME|KIND|WHAT. KIND peer: peer.js --lib WHAT; bench: lockbench
# --strategy WHAT (ARGS after a colon: bare or default).
runners=(
    "redlock5|peer|redlock5" "redlock4|peer|redlock4" "semaphore|peer|semaphore"
    "owner-lua bare|bench|owner-lua:bare" "owner-lua|bench|owner-lua:default"
    "redlock bare|bench|redlock:bare" "redlock|bench|redlock:default"
    "redisson bare|bench|redisson:bare" "redisson|bench|redisson:default"
    "handoff bare|bench|handoff:bare" "handoff|bench|handoff:default"
    "batched bare|bench|batched:bare" "atomic bare|bench|atomic:bare"
    "handoff ceiling|ceiling|handoff-sale" "script ceiling|ceiling|return-1"
)
declare -A S       # S[name|C|round] = sales/s
status=0

# ceiling_out: redis-benchmark's requests per second (its --csv, second
# line, second field) as the runners' sales_per_s, in $work/out.
ceiling_out() {
    printf 'sales_per_s=%.0f\n' "$(sed -n '2p' "$work/out.csv" | cut -d, -f2 | tr -d '"')" >"$work/out"
}

run_one() {
    local name=$1 kind=$2 what=$3 c=$4 r=$5 out n
    if [ "$kind" = ceiling ] && [ "$what" = return-1 ]; then
        # the cheapest script there is, back to back: any lock's ceiling
        start_load "$work/out.csv" "$work/err" redis-benchmark -p "$redis_port" -c 1 -n "$ceiling_n" --csv \
            EVAL "return 1" 0
        wait_load
        ceiling_out
    elif [ "$kind" = ceiling ]; then
        # keys of their own; the lock is the caller's ("p1:t1": process p1)
        local sha k=peers-ceiling
        rcli DEL "$k:stock" "$k:ledger" "$k:families" "$k:history" "$k:lock" "$k:queue" >/dev/null
        rcli SET "$k:lock" p1:t1 >/dev/null
        sha=$(rcli SCRIPT LOAD "$(cat "$root/src/lua/$what.lua")")
        # KEYS: stock ledger families history lock queue; ARGV: new stock,
        # family, history cap 0 (bare), owner, lease, channel prefix, ledger
        # entry, one rider (wait, owner, carried key), 1 rider
        start_load "$work/out.csv" "$work/err" redis-benchmark -p "$redis_port" -c 1 -n "$ceiling_n" --csv \
            EVALSHA "$sha" 6 "$k:stock" "$k:ledger" "$k:families" "$k:history" "$k:lock" "$k:queue" \
            100 handoff 0 p1:t1 30000 "$k:channel:" "1|o-1|3786" 5000 p1:t1 "$k:stock" 1
        wait_load
        # one write each, and the lock still the caller's: every run did the whole path
        n=$(rcli LLEN "$k:ledger")
        if [ "$load_rc" -eq 0 ] && [ "$n" = "$ceiling_n" ] && [ "$(rcli GET "$k:lock")" = p1:t1 ]; then
            ceiling_out
        else
            echo "the ceiling's commits did not all commit: $n of $ceiling_n written" >>"$work/err"
            : >"$work/out"
            load_rc=1
        fi
        rcli DEL "$k:ledger" >/dev/null
    elif [ "$kind" = peer ]; then
        local retry=${PEERS_RETRY_MS:-$([ "$what" = redlock4 ] && echo 30 || echo 10)}
        start_load "$work/out" "$work/err" node "$peers_dir/peer.js" --lib "$what" --clients "$c" \
            --procs "$procs" --redis "127.0.0.1:$redis_port" --redlock "$spec" --stock "$stock" \
            --retry-ms "$retry" --max-s "$max_s"
    else
        local s=${what%%:*} mode=${what#*:} args=() n_stock=$stock
        [ "$mode" = bare ] && args=("${bare[@]}")
        case "$s" in handoff|batched|atomic) n_stock=$fast_stock ;; esac
        start_load "$work/out" "$work/err" "$lockbench" --strategy "$s" --clients "$c" \
            --stock "$n_stock" --redis "127.0.0.1:$redis_port" --redlock "$spec" --wait-ms 10000 \
            --max-s "$max_s" --format kv "${args[@]}"
    fi
    [ "$kind" = ceiling ] || wait_load
    out=$(cat "$work/out")
    n=$(tr ' ' '\n' <<<"$out" | sed -n 's/^sales_per_s=//p')
    S["$name|$c|$r"]=${n:-?}
    [ "$load_rc" -eq 0 ] || status=1
    printf '%s: round %d C=%-4s %-15s %9s sales/s, exit %d\n' "$tag" "$r" "$c" "$name" "${n:-?}" "$load_rc" >&2
    [ -s "$work/err" ] && sed "s/^/    /" "$work/err" >&2
    return 0
}

started=$SECONDS
for r in $(seq 1 "$runs"); do
    for c in $clients_list; do
        for x in "${runners[@]}"; do
            IFS='|' read -r name kind what <<<"$x"
            run_one "$name" "$kind" "$what" "$c" "$r"
        done
    done
done
elapsed=$((SECONDS - started))

med() {   # med NAME C: the median over the rounds
    local r
    for r in $(seq 1 "$runs"); do echo "${S["$1|$2|$r"]:-}"; done |
        "$stats" --skip --decimals 0 --empty '?' median
}
ratio() { "$stats" --positive --decimals 1 --empty '?' ratio "$1" "$2"; }
# times N F: N times F, whole, or "?" when N is not a number
times() { [[ "$1" =~ ^[0-9]+$ ]] && awk -v n="$1" -v f="$2" 'BEGIN { printf "%.0f", n * f }' || printf '?'; }
k() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 10000 ] && printf '%.1fk' "$("$stats" --decimals 1 ratio "$1" 1000)" || printf '%s' "$1"; }

mkdir -p "$results" || die "cannot create $results"
csv=$results/peers.csv
echo "runner,clients,runs,sales_per_s_median,sales_per_s_runs" >"$csv"
for x in "${runners[@]}"; do
    IFS='|' read -r name _ _ <<<"$x"
    for c in $clients_list; do
        runs_sps=$(for r in $(seq 1 "$runs"); do echo "${S["$name|$c|$r"]:-}"; done | paste -sd';')
        echo "$name,$c,$runs,$(med "$name" "$c"),$runs_sps" >>"$csv"
    done
done

table="| C | node-redlock 5 (1 Redis) | owner-lua default (bare) | × | node-redlock 4 (3 masters) | redlock default (bare) | × | redis-semaphore | redisson default (bare) | × | handoff default (bare) | × best peer | × atomic | batched (bare) | atomic (bare) |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
ctable="| C | handoff bare | handoff's ceiling | bare × ceiling | one-command script's ceiling | 0.5 × atomic bare | 5 × best peer |
|---|---|---|---|---|---|---|"
for c in $clients_list; do
    p5=$(med redlock5 "$c"); p4=$(med redlock4 "$c"); ps=$(med semaphore "$c")
    ol=$(med owner-lua "$c"); olb=$(med "owner-lua bare" "$c")
    rl=$(med redlock "$c"); rlb=$(med "redlock bare" "$c")
    rs=$(med redisson "$c"); rsb=$(med "redisson bare" "$c")
    ho=$(med handoff "$c"); hob=$(med "handoff bare" "$c")
    ba=$(med "batched bare" "$c"); at=$(med "atomic bare" "$c"); ce=$(med "handoff ceiling" "$c")
    best=$(printf '%s\n' "$p5" "$p4" "$ps" | "$stats" --skip --decimals 0 --empty '?' max)
    table="$table
| $c | $p5 | $ol ($olb) | $(ratio "$ol" "$p5") ($(ratio "$olb" "$p5")) | $p4 | $rl ($rlb) | $(ratio "$rl" "$p4") ($(ratio "$rlb" "$p4")) | $ps | $rs ($rsb) | $(ratio "$rs" "$ps") ($(ratio "$rsb" "$ps")) | $(k "$ho") ($(k "$hob")) | $(ratio "$ho" "$best") ($(ratio "$hob" "$best")) | $(ratio "$hob" "$at") | $(k "$ba") | $(k "$at") |"
    ctable="$ctable
| $c | $(k "$hob") | $(k "$ce") | $(ratio "$hob" "$ce") | $(k "$(med "script ceiling" "$c")") | $(k "$(times "$at" 0.5)") | $(k "$(times "$best" 5)") |"
done

echo "$table"
echo
echo "$ctable"
{
    echo "# The lock libraries people use, and lockbench, on the same work"
    echo
    rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(redis-server --version | sed 's/ sha=.*//'), node $(node --version), inventoryd $rev."
    echo "Sales/s, medians of $runs rounds run round-robin ($elapsed s); peers with $procs processes each;"
    echo "stock $stock ($fast_stock for handoff, batched and atomic); lock.wait-ms 10000, TTL 10 s."
    echo "Bare: lockbench with --set inventory.probe=false --set history.enabled=false. × columns: the"
    echo "lockbench figure over the peer's, default (bare); handoff's against the best peer at that C,"
    echo "and its bare figure over atomic's (bare)."
    echo
    echo "$table"
    echo
    echo "The ceiling of one round trip a sale: one client sending handoff's commit script back to"
    echo "back (redis-benchmark -c 1, $ceiling_n runs, no wake-up, no client work), and the cheapest"
    echo "script (EVAL \"return 1\" 0) likewise. A lock whose every sale waits for the one before it,"
    echo "one round trip each, sells no more than these; the last two columns are what handoff's"
    echo "targets (0.5 × atomic, 5 × the best peer) would need."
    echo
    echo "$ctable"
} >"$results/peers.md"
echo "$tag: $elapsed s; wrote $results/peers.md and $csv" >&2
exit "$status"
