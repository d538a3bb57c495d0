#!/usr/bin/env bash
# demo.sh -- the one demo command: the "Redis distributed lock" sale demo,
# every strategy side by side.
#
# Builds inventoryd (Release, in build/), starts redis-server on 6379, two
# instances on 3786 and 3787 and nginx on 8080 (upstream weights 1 and 2,
# rendered from nginx/nginx.conf.in), then for every strategy that
# `inventoryd --list-strategies` names: resets the stock to 200, fires
# 3000 sales from 200 concurrent clients through nginx, audits, and prints one
# row. The table also goes to results/demo.md and results/demo.csv, a chart of
# sales/s and oversold units per strategy to results/demo.png (scripts/chart.sh,
# gnuplot); logs go to results/run/. Progress: a line per round, and while a
# round runs the sales answered so far (live on a terminal, every 10 s
# otherwise). Everything started here is stopped by its pid at the end and on
# Ctrl-C, and the ports are checked to be free again.
#
# The lock lab: the instances run with lab.enabled=true (bound to loopback,
# like everything here), lab.target = nginx, lab.instances = the two
# instances, lab.results-dir = the results folder, and faults.enabled=true
# so that its scenarios can run. The demo ends by printing the lab's URL,
# http://127.0.0.1:8080/, whose Compare view shows this run's demo.csv. On a
# terminal the stack then stays up until Ctrl-C, so that the URL can be
# opened; otherwise (or with DEMO_KEEP=0) it is stopped first.
#
# The admin token: the instances run with admin.token, so a reset, a lab run
# and a fault parameter need "Authorization: Bearer <token>" (the lab page
# asks for it). It is INVENTORYD_ADMIN_TOKEN when set (at least 16
# characters), else a random one made here. It reaches the instances through
# their environment and this script's curl on its stdin, never a command
# line (ps shows those); the demo prints it once, while the stack is up, in a
# line that shows how to send it with curl (a token of your own is named,
# not printed).
#
# Two columns measure cost rather than outcome:
#   redis_cmds_per_sale  the calls= deltas of Redis' INFO commandstats over
#       the load alone (snapshots after the reset and before the audit; the
#       snapshots' own INFO excluded), divided by the units sold (by the
#       requests when nothing sold). Commands a Lua script runs count too, and
#       so does the audit probe around each locked sale (its entry script and HDEL) and its heartbeat; sold_out
#       answers cost commands as well, so it grows with DEMO_REQUESTS.
#   p99_wait_ms  from the instances' inventoryd_lock_wait_ms histograms (both
#       instances, deltas over the load): the upper bound of the bucket that
#       holds the 99th percentile of lock waits, shown as "<=N" (">N" past
#       the last bucket).
# The per-command breakdown of each round is in results/run/cmdstats-<s>.txt.
#
# Environment: DEMO_CLIENTS (200), DEMO_REQUESTS (3000), DEMO_STOCK (200),
# DEMO_WAIT_MS (lock.wait-ms, 10000: for the load table, whose sales wait
# behind 200 concurrent others; the lab's scenarios do not need it, each of
# their sales carries a wait of its own), and
#   DEMO_REDIS_PORT (6379)
#   DEMO_CLUSTER (0): 1 runs the same demo on a local Redis Cluster instead
#       of one Redis: three masters and three replicas on DEMO_CLUSTER_PORTS
#       (6371 6372 6373 6374 6375 6376, as in the demo's commented cluster
#       lines; each also takes its bus port, +10000), the instances with
#       redis.cluster.nodes alone (lock.scope and inventory.probe, left at
#       auto, pick what cluster mode needs)
#   DEMO_REDLOCK_PORTS (6381 6382 6383; used only when a strategy is redlock)
#   DEMO_ZOOKEEPER_PORT (2181) and DEMO_MYSQL_PORT (3306): a standalone
#       ZooKeeper and a private MariaDB (data in results/run/), started only
#       when a strategy keeps its lock there (zookeeper*, mysql*)
#   DEMO_INSTANCE_PORTS (3786 3787; the first gets weight 1, the second 2)
#   DEMO_NGINX_PORT (8080)
#   DEMO_RESULTS_DIR (results; the table, CSV and chart, and run/ for logs)
#   DEMO_BUILD_DIR (build; where the Release build goes)
#   DEMO_KEEP (auto: 1 when stdin and stdout are a terminal, else 0): 1 keeps
#       the stack and the lab up after the table until Ctrl-C (exit 0)
#   DEMO_INVENTORYD and DEMO_LOAD: an inventoryd and an inventory-load already
#       built (both or neither); no build then. The tests use this.
#   DEMO_STATS: the inventory-stats to use (default: the one beside
#       DEMO_LOAD, or the one built); it computes every figure of the table.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
tag=demo
# The stack (start_redis, start_instance, start_front), the load (load_kv),
# reset_stock, fetch_audit, wait_voting, the traps, die and fail, stopping by
# pid, port_busy and show_logs: shared with the tests. $work is results/run.
. "$root/scripts/lib.sh"
fail_word=   # "demo: MESSAGE", not "demo: FAIL: MESSAGE"

clients=${DEMO_CLIENTS:-200}
requests=${DEMO_REQUESTS:-3000}
stock=${DEMO_STOCK:-200}
wait_ms=${DEMO_WAIT_MS:-10000}
redis_port=${DEMO_REDIS_PORT:-6379}
cluster=${DEMO_CLUSTER:-0}
read -ra cluster_ports <<<"${DEMO_CLUSTER_PORTS:-6371 6372 6373 6374 6375 6376}"
read -ra redlock_ports <<<"${DEMO_REDLOCK_PORTS:-6381 6382 6383}"
zk_port=${DEMO_ZOOKEEPER_PORT:-2181}
mysql_port=${DEMO_MYSQL_PORT:-3306}
read -ra instance_ports <<<"${DEMO_INSTANCE_PORTS:-3786 3787}"
nginx_port=${DEMO_NGINX_PORT:-8080}
build_dir=${DEMO_BUILD_DIR:-build}
results=${DEMO_RESULTS_DIR:-$root/results}
keep=${DEMO_KEEP:-auto}

tick_pid=

# After lib.sh's fail message: the logs of everything that ran.
# shellcheck disable=SC2317 # called by fail
on_fail() {
    show_logs "$run" 10
    echo "demo: logs are in $run/" >&2
}

# lib.sh's cleanup, but $work (results/run) holds the logs, which stay: the
# progress tick, the load, then last started first (nginx, the instances,
# then Redis). Called once at the end, so it clears the traps.
cleanup() {
    trap - EXIT INT TERM
    [ -n "$tick_pid" ] && stop_pid "$tick_pid"
    stop_started
}
# shellcheck disable=SC2317 # the INT and TERM trap
on_signal() {
    echo
    echo "demo: interrupted, stopping everything" >&2
    exit 130
}
set_traps

# ---- settings -------------------------------------------------------------
is_port() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le 65535 ]; }
[ ${#instance_ports[@]} -eq 2 ] ||
    die "DEMO_INSTANCE_PORTS must name two ports (weight 1, weight 2), not '${instance_ports[*]}'"
[ ${#redlock_ports[@]} -ge 1 ] || die "DEMO_REDLOCK_PORTS names no port"
port1=${instance_ports[0]}
port2=${instance_ports[1]}
[ "$cluster" = 0 ] || [ "$cluster" = 1 ] || die "DEMO_CLUSTER must be 0 or 1, not '$cluster'"
[ "$cluster" = 0 ] || [ ${#cluster_ports[@]} -eq 6 ] ||
    die "DEMO_CLUSTER_PORTS must name six ports (three masters, three replicas), not '${cluster_ports[*]}'"
for p in "$redis_port" "${redlock_ports[@]}" "$port1" "$port2" "$nginx_port"; do
    is_port "$p" || die "'$p' is not a TCP port (see DEMO_*_PORT(S))"
done
if [ "$cluster" = 1 ]; then
    for p in "${cluster_ports[@]}"; do
        is_port "$p" && [ "$p" -lt 55536 ] || die "'$p' is not a cluster port below 55536 (DEMO_CLUSTER_PORTS; each takes port + 10000 too)"
    done
fi
for v in "$clients" "$requests" "$stock" "$wait_ms"; do
    [[ "$v" =~ ^[0-9]+$ ]] || die "'$v' is not a number (DEMO_CLIENTS, DEMO_REQUESTS, DEMO_STOCK, DEMO_WAIT_MS)"
done
if [ "$keep" = auto ]; then
    if [ -t 0 ] && [ -t 1 ]; then keep=1; else keep=0; fi
fi
[ "$keep" = 0 ] || [ "$keep" = 1 ] || die "DEMO_KEEP must be 0 or 1 (or auto), not '$keep'"
token_given=0
if [ -n "${INVENTORYD_ADMIN_TOKEN:-}" ]; then
    token_given=1
    [ ${#INVENTORYD_ADMIN_TOKEN} -ge 16 ] ||
        die "INVENTORYD_ADMIN_TOKEN must be at least 16 characters (or unset: the demo makes one)"
else
    INVENTORYD_ADMIN_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    [ ${#INVENTORYD_ADMIN_TOKEN} -eq 32 ] || die "cannot read /dev/urandom for an admin token"
fi
export INVENTORYD_ADMIN_TOKEN
admin_token=$INVENTORYD_ADMIN_TOKEN   # reset_stock sends it (scripts/lib.sh)
if [ -n "${DEMO_INVENTORYD:-}${DEMO_LOAD:-}" ]; then
    if ! [ -x "${DEMO_INVENTORYD:-}" ] || ! [ -x "${DEMO_LOAD:-}" ]; then
        die "DEMO_INVENTORYD and DEMO_LOAD must both name executables (got '${DEMO_INVENTORYD:-}' and '${DEMO_LOAD:-}')"
    fi
fi

# ---- results --------------------------------------------------------------
mkdir -p "$results" || die "cannot create $results (DEMO_RESULTS_DIR)"
results=$(cd "$results" && pwd)
[ "$results" != / ] || die "DEMO_RESULTS_DIR must not be /"
run=$results/run
# run/ is emptied on every run: only one that this script made (marker) or
# the checkout's own results/run.
if [ -e "$run" ] && [ ! -e "$run/.demo-run" ] && [ "$run" != "$root/results/run" ]; then
    die "$run exists and was not made by demo.sh; remove it or pick another DEMO_RESULTS_DIR"
fi
rm -rf "$run"
mkdir -p "$run" || die "cannot create $run"
: >"$run/.demo-run"
chmod 755 "$results" "$run"   # nginx's workers (nobody, under root) write temp files there
work=$run   # where lib.sh's helpers write their logs

# ---- build ----------------------------------------------------------------
bash scripts/deps.sh || die "scripts/deps.sh failed"
for tool in redis-server redis-cli nginx curl jq; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
if [ -n "${DEMO_INVENTORYD:-}" ]; then
    inventoryd=$(realpath "$DEMO_INVENTORYD")
    load=$(realpath "$DEMO_LOAD")
    find_stats "${DEMO_STATS:-$(dirname "$load")/inventory-stats}"
    echo "demo: using $inventoryd and $load (no build)"
else
    echo "demo: building (Release) in $build_dir/ ..."
    if ! { cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release &&
           cmake --build "$build_dir" -j "$(nproc 2>/dev/null || echo 2)" \
               --target inventoryd inventory-load inventory-stats; } \
           >"$run/build.log" 2>&1; then
        tail -n 30 "$run/build.log" >&2
        die "the build failed; see $run/build.log"
    fi
    build_dir=$(cd "$build_dir" && pwd)
    inventoryd=$build_dir/inventoryd
    load=$build_dir/inventory-load
    find_stats "${DEMO_STATS:-$build_dir/inventory-stats}"
fi

mapfile -t strategies < <("$inventoryd" --list-strategies 2>"$run/list-strategies.log")
[ ${#strategies[@]} -gt 0 ] || fail "inventoryd --list-strategies named no strategy"
need_redlock=0 need_zk=0 need_mysql=0
for s in "${strategies[@]}"; do
    case $s in
        redlock) need_redlock=1 ;;
        zookeeper*) need_zk=1 ;;
        mysql*) need_mysql=1 ;;
    esac
done

# ---- ports ----------------------------------------------------------------
# Every port this demo listens on, and the variable that moves it.
ports=("$port1" "$port2" "$nginx_port")
port_vars=(DEMO_INSTANCE_PORTS DEMO_INSTANCE_PORTS DEMO_NGINX_PORT)
if [ "$cluster" = 1 ]; then
    for p in "${cluster_ports[@]}"; do
        ports+=("$p" $((p + 10000)))
        port_vars+=(DEMO_CLUSTER_PORTS "DEMO_CLUSTER_PORTS (a bus port)")
    done
else
    ports+=("$redis_port")
    port_vars+=(DEMO_REDIS_PORT)
fi
if [ "$need_redlock" -eq 1 ]; then
    for p in "${redlock_ports[@]}"; do ports+=("$p"); port_vars+=(DEMO_REDLOCK_PORTS); done
fi
[ "$need_zk" -eq 1 ] && { ports+=("$zk_port"); port_vars+=(DEMO_ZOOKEEPER_PORT); }
[ "$need_mysql" -eq 1 ] && { ports+=("$mysql_port"); port_vars+=(DEMO_MYSQL_PORT); }
dups=$(printf '%s\n' "${ports[@]}" | sort | uniq -d | paste -sd ' ' -)
[ -z "$dups" ] || die "port(s) $dups given twice (DEMO_*_PORT(S))"
busy=()
for ((k = 0; k < ${#ports[@]}; k++)); do
    port_busy "${ports[$k]}" && busy+=("${ports[$k]} (${port_vars[$k]})")
done
if [ ${#busy[@]} -gt 0 ]; then
    die "already taken: ${busy[*]}. Stop what listens there (a Redis or nginx of your own?), or move the demo with the variable named."
fi

# ---- the stack ------------------------------------------------------------
if [ "$cluster" = 1 ]; then
    echo "demo: starting a Redis Cluster on ${cluster_ports[*]} (3 masters, 3 replicas), inventoryd on $port1 and $port2, nginx on $nginx_port"
    start_cluster "${cluster_ports[@]}"
else
    echo "demo: starting redis-server on $redis_port, inventoryd on $port1 and $port2, nginx on $nginx_port"
    start_redis "$redis_port" "redis-$redis_port"
fi

# start_instance sets the bind address, the port and the Redis; the instances
# run in $run, so they are given the checkout's properties by name, as they
# found them when they ran in the checkout. The lab is on: its runs go through
# nginx, its scenario sales to each instance, and it serves this run's results.
# lock.wait-ms is the load table's (DEMO_WAIT_MS); scenario sales size their
# own waits (wait_ms) from lock.ttl-ms.
sets=(--set lock.wait-ms="$wait_ms"
      --set lab.enabled=true --set lab.target="127.0.0.1:$nginx_port"
      --set lab.instances="127.0.0.1:$port1,127.0.0.1:$port2"
      --set lab.results-dir="$results" --set faults.enabled=true)
[ -r "$root/config/inventoryd.properties" ] && sets+=(--config "$root/config/inventoryd.properties")
if [ "$cluster" = 1 ]; then
    sets+=(--set redis.cluster.nodes="$seeds")
    # The cost columns count the commands of the master that holds the item.
    redis_port=$(owner_of "$("$inventoryd" "${sets[@]}" --check-config | sed -n 's/^inventory.key=//p')")
    [ -n "$redis_port" ] || fail "no master of the cluster owns the item's slot"
    echo "demo: the item lives on the master on $redis_port"
fi
if [ "$need_redlock" -eq 1 ]; then
    nodes=""
    for p in "${redlock_ports[@]}"; do
        start_redis "$p" "redis-$p"
        nodes="${nodes:+$nodes,}127.0.0.1:$p"
    done
    sets+=(--set redlock.nodes="$nodes")
fi

if [ "$need_zk" -eq 1 ]; then
    echo "demo: starting ZooKeeper on $zk_port (the zookeeper strategies' locks)"
    start_zookeeper "$zk_port"
    sets+=(--set zookeeper.connect="127.0.0.1:$zk_port")
fi
if [ "$need_mysql" -eq 1 ]; then
    echo "demo: starting MariaDB on $mysql_port (the mysql strategies' locks)"
    start_mariadb "$mysql_port"
    sets+=(--set mysql.host=127.0.0.1 --set mysql.port="$mysql_port")
fi

# The instances' lock.ttl-ms: a Redlock master votes once up that long.
ttl_ms=$("$inventoryd" "${sets[@]}" --check-config | sed -n 's/^lock.ttl-ms=//p')
start_instance "$port1" "${sets[@]}"; pid1=$inst_pid
start_instance "$port2" "${sets[@]}"; pid2=$inst_pid
# Waits for both, renders nginx/nginx.conf.in into $run/nginx, checks it
# (nginx -t) and starts nginx; sets base.
start_front

# say_token: the one line that gives the admin token and shows its use.
say_token() {
    if [ "$token_given" = 1 ]; then
        echo "demo: admin token: yours, from INVENTORYD_ADMIN_TOKEN; resets, lab runs and fault parameters need it:" \
            "curl -H \"Authorization: Bearer \$INVENTORYD_ADMIN_TOKEN\" -X POST -d '{\"stock\":200}' $base/inventory/reset"
    else
        echo "demo: admin token: $admin_token (resets, lab runs and fault parameters need it; the lab page asks for it):" \
            "curl -H 'Authorization: Bearer $admin_token' -X POST -d '{\"stock\":200}' $base/inventory/reset"
    fi
}
# Once, while the stack is up: here, or before the lab's URL when it stays up.
[ "$keep" = 1 ] || say_token

# ---- cost snapshots --------------------------------------------------------
# cmdstats FILE: "<command> <calls>" per command Redis has run, but INFO (the
# snapshots themselves).
cmdstats() {
    redis-cli -p "$redis_port" INFO commandstats 2>/dev/null | tr -d '\r' |
        awk -F'[:,=]' '/^cmdstat_/ && $1 != "cmdstat_info" && $2 == "calls" { print substr($1, 9), $3 }' >"$1"
}

# cmds_delta BEFORE AFTER: "<command> <delta>" per command that ran,
# busiest first, then a last line "total <sum>".
cmds_delta() {
    local deltas
    deltas=$({ negated "$1"; cat "$2"; } | "$stats" --by-key sum | grep -E ' [1-9][0-9]*$' |
        sort -k2,2nr -k1,1)
    [ -z "$deltas" ] || echo "$deltas"
    echo "total $(cut -d' ' -f2 <<<"$deltas" | "$stats" sum)"
}

# waits STRATEGY FILE: "<le> <count>" per bucket of that strategy's
# inventoryd_lock_wait_ms histogram, summed over both instances.
waits() {
    local p
    for p in "$port1" "$port2"; do
        curl -sf --max-time 5 "http://127.0.0.1:$p/metrics" || return 1
    done | sed -n "s/^inventoryd_lock_wait_ms_bucket{strategy=\"$1\",le=\"\([^\"]*\)\"} /\1 /p" |
        "$stats" --by-key sum >"$2"
}

# negated FILE: FILE's "<key> <count>" lines with each count negated, so that
# inventory-stats, summing by key, takes that snapshot from a later one.
negated() { sed 's/ / -/' "$1"; }

# p99_wait BEFORE AFTER: "<=N" for the bucket holding the 99th percentile of
# the waits between the two snapshots, ">N" past the last finite bucket, "-"
# when there was no wait to measure.
p99_wait() {
    { negated "$1"; cat "$2"; } | "$stats" --empty - hist-p99
}

# show_progress LABEL LINES_BEFORE: until the load ($load_pid) ends, the sales
# answered so far (nginx's access log has one line per answered request):
# rewritten every second on a terminal, a line every 10 s otherwise.
# shellcheck disable=SC2317 # run by load_kv
show_progress() {
    local label=$1 before=$2 t0=$SECONDS answered last=0 tty=0
    [ -t 1 ] && tty=1
    while kill -0 "$load_pid" 2>/dev/null; do
        sleep 1 &
        tick_pid=$!
        wait "$tick_pid"
        tick_pid=
        kill -0 "$load_pid" 2>/dev/null || break
        answered=$(( $(wc -l <"$access_log" 2>/dev/null || echo "$before") - before ))
        [ "$answered" -gt "$requests" ] && answered=$requests
        if [ "$tty" -eq 1 ]; then
            printf '\r%s: %d/%d sales answered, %d s ' "$label" "$answered" "$requests" $((SECONDS - t0))
        elif [ $((SECONDS - last)) -ge 10 ] && [ $((SECONDS - t0)) -ge 10 ]; then
            last=$SECONDS
            echo "$label: $answered/$requests sales answered, $((SECONDS - t0)) s"
        fi
    done
    [ "$tty" -eq 1 ] && printf '\r\033[K'
    return 0
}

# ---- one round per strategy -----------------------------------------------
access_log=$run/nginx/access.log
header=(strategy requests sold stock oversold_units sold_twice violations lock_timeouts errors sales_per_s p50_ms p99_ms p99_wait_ms redis_cmds_per_sale client_sold_min client_sold_max jain verdict)
rows=()
n=${#strategies[@]}
i=0
echo "demo: $n strategies, $requests sales each from $clients clients, stock $stock"
for s in "${strategies[@]}"; do
    i=$((i + 1))
    echo "[$i/$n] $s ..."
    [ "$s" = redlock ] && wait_voting "$ttl_ms" "${redlock_ports[@]}"
    reset_stock "$s"

    # Cost snapshots after the reset: it went to one instance only, which
    # zeroed its own metrics, so only deltas mean anything.
    waits "$s" "$run/waits-$s.before" || fail "$s: GET /metrics failed on an instance"
    cmdstats "$run/cmdstats-$s.before"

    # In the background (so that a signal runs the trap at once rather than
    # after the load finished), the progress shown meanwhile; fills L.
    lines_before=$(wc -l <"$access_log" 2>/dev/null || echo 0)
    load_kv "$s" show_progress "[$i/$n] $s" "$lines_before"
    [ "$load_rc" -eq 0 ] || fail "$s: inventory-load exited with $load_rc: $(cat "$run/load-$s.log")"

    # And before the audit.
    cmdstats "$run/cmdstats-$s.after"
    waits "$s" "$run/waits-$s.after" || fail "$s: GET /metrics failed on an instance"
    cmds_delta "$run/cmdstats-$s.before" "$run/cmdstats-$s.after" >"$run/cmdstats-$s.txt"
    cmds=$(sed -n 's/^total //p' "$run/cmdstats-$s.txt")
    # Per unit sold, or per request when nothing sold; 0.0 when neither.
    per=${L[requests]:-0}
    [ "${L[sold]:-0}" = 0 ] || per=${L[sold]}
    cmds_per_sale=$("$stats" --skip --decimals 1 --empty 0.0 ratio "${cmds:-0}" "$per")
    p99w=$(p99_wait "$run/waits-$s.before" "$run/waits-$s.after")

    fetch_audit "$s"
    read -r a_stock a_units a_twice a_viol a_over < <(jq -r \
        '[.stock, .oversold_units, .sold_twice, .violations, .oversold] | map(tostring) | join(" ")' \
        "$run/audit-$s.json") || fail "$s: cannot read the audit: $(cat "$run/audit-$s.json")"
    verdict=OK
    [ "$a_over" = true ] && verdict=OVERSOLD
    errors=$("$stats" --skip sum "${L[backend_unavailable]:-}" "${L[other]:-}" "${L[errors]:-}")
    row=("$s" "${L[requests]}" "${L[sold]}" "$a_stock" "$a_units" "$a_twice" "$a_viol"
         "${L[lock_timeout]}" "$errors" "${L[sales_per_s]}" "${L[p50_ms]}" "${L[p99_ms]}"
         "$p99w" "$cmds_per_sale" "${L[client_sold_min]:-?}" "${L[client_sold_max]:-?}"
         "${L[jain]:-?}" "$verdict")
    rows+=("$(IFS=$'\t'; echo "${row[*]}")")
    echo "[$i/$n] $s: clients saw ${L[sold]:-0} sold, stock $a_stock, oversold $a_units, sold twice $a_twice, $cmds_per_sale redis cmds/sale, p99 wait $p99w ms -> $verdict"
done

# ---- the table -------------------------------------------------------------
notes() {
    echo "p50_ms, p99_ms: sale latency seen by the clients, through nginx."
    echo "p99_wait_ms: lock wait from the instances' inventoryd_lock_wait_ms histograms over this round, both instances; the upper bound of the bucket holding the 99th percentile (<=1 also means no lock to wait for)."
    echo "client_sold_min, client_sold_max, jain: units sold by the client that sold least and by the one that sold most, and Jain's fairness index of the clients' sales, (sum x)^2 / (n sum x^2): 1 when every client sold as many, 1/n when one sold all, -1 when none sold (inventory-load's own counts)."
    echo "redis_cmds_per_sale: Redis commands run during the load (INFO commandstats deltas; commands inside Lua scripts, the audit probe's entry script and HDEL, and its heartbeat included, reset and audit excluded) per unit sold; sold_out answers cost commands too, so it grows with the requests."
}
{
    line=$(IFS='|'; echo "${header[*]}")
    printf '| %s |\n' "${line//|/ | }"
    printf '|%s\n' "$(for _ in "${header[@]}"; do printf -- '---|'; done)"
    for r in "${rows[@]}"; do
        printf '| %s |\n' "${r//$'\t'/ | }"
    done
    echo
    echo "$requests sales from $clients concurrent clients through nginx (weights 1:2) on two instances, stock $stock, lock.wait-ms $wait_ms."
    echo
    notes
} >"$results/demo.md"
{
    (IFS=,; echo "${header[*]}")
    for r in "${rows[@]}"; do tr '\t' ',' <<<"$r"; done
} >"$results/demo.csv"

echo
{
    (IFS=$'\t'; echo "${header[*]}")
    for r in "${rows[@]}"; do echo "$r"; done
} | awk -F'\t' '
    { for (c = 1; c <= NF; c++) { cell[NR, c] = $c; if (length($c) > w[c]) w[c] = length($c) } nf[NR] = NF }
    END { for (r = 1; r <= NR; r++) { line = ""
              for (c = 1; c <= nf[r]; c++) line = line sprintf(c == 1 ? "%-*s" : "  %*s", w[c], cell[r, c])
              print line } }'
echo
notes
echo
echo "demo: table written to $results/demo.md and $results/demo.csv; logs in $run/"

status=0
# The chart needs only the CSV (and inventory-stats).
if INVENTORY_STATS=$stats bash scripts/chart.sh "$results/demo.csv" "$results/demo.png" \
        "$clients clients, stock $stock, 2 instances behind nginx (weights 1:2)" 2>"$run/chart.log"; then
    echo "demo: chart written to $results/demo.png"
else
    cat "$run/chart.log" >&2
    echo "demo: the chart could not be drawn (scripts/chart.sh; see above); the table is complete" >&2
    status=1
fi

lab_url="http://127.0.0.1:$nginx_port/"
if [ "$keep" = 1 ]; then
    echo "demo: the stack stays up: the lock lab shows this run's results (Compare) and runs"
    echo "demo: any strategy or flaw from the browser; Ctrl-C stops everything."
    say_token
    echo "demo: lab: $lab_url"
    stopping=0
    trap 'stopping=1' INT TERM
    while [ "$stopping" = 0 ]; do
        sleep 1 &
        tick_pid=$!
        wait "$tick_pid"
    done
    echo
    echo "demo: stopping everything"
fi

cleanup
left=()
for p in "${ports[@]}"; do port_busy "$p" && left+=("$p"); done
if [ ${#left[@]} -gt 0 ]; then
    echo "demo: warning: something still listens on ${left[*]}" >&2
    status=1
fi
if [ "$keep" = 1 ]; then
    echo "demo: stopped; the results stay in $results/"
else
    echo "demo: lab: $lab_url (it shows these results while the stack runs; DEMO_KEEP=1 keeps it up after the table)"
fi
exit "$status"
