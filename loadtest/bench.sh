#!/usr/bin/env bash
# bench.sh -- lockbench for a list of strategies and client counts, against
# throwaway redis-servers started here; then the same sale end to end over
# HTTP, through nginx and two inventoryd instances. Prints two tables and
# writes them out.
#
#   loadtest/bench.sh
#   loadtest/bench.sh --peers     node-redlock 4 and 5 and redis-semaphore against
#                                 lockbench on the same work (loadtest/peers/run.sh)
#   BENCH_STRATEGIES="redisson fenced zookeeper zookeeper-fenced mysql mysql-fenced" \
#   BENCH_CLIENTS="1 16 64" BENCH_HTTP=0 loadtest/bench.sh
#                                 the locks that live in ZooKeeper and MariaDB
#
# Starts its own redis-server on a free port (and three more, the Redlock
# masters, when redlock is in the list), runs lockbench for every strategy at
# every client count BENCH_RUNS times, and reports per point the median
# sales/s, the give-ups and backend errors summed over the runs, and the
# medians of commands and lock tries per sale, of clients that sold nothing,
# and of p99 acquire wait and p99 sale latency.
#
# When the list has a lock that lives in ZooKeeper (zookeeper,
# zookeeper-fenced) or MariaDB (mysql, mysql-fenced), that store is started
# too (scripts/lib.sh: start_zookeeper, start_mariadb, on free ports) and
# given to lockbench with --set; none is started otherwise. For those locks
# the table also gives the store's requests per sale (ZooKeeper's srvr
# "Received", every packet the server got, pings and the watchdog's looks
# included; MariaDB's Questions, every statement a client sent; both read
# before and after each lockbench process, less what one reading costs),
# and the share of the store's ceiling the lock sold at: after the lockbench
# runs, storeceiling (tools/storeceiling.c) does one hold's store operations
# back to back on one client, BENCH_STOCK holds, BENCH_RUNS times (median):
# ZooKeeper's create, get_children and delete; MariaDB's GET_LOCK and
# RELEASE_LOCK, the same with mysql-fenced's committed UPDATE between them,
# and that UPDATE alone. The ceiling table follows the first.
#
# The table goes to stdout and
# to $BENCH_RESULTS_DIR/bench.md; bench.csv there has one row per point with
# the same figures and every run's sales/s.
#
# Then, unless BENCH_HTTP=0, the HTTP section: two inventoryd instances on the
# same Redis (lock.wait-ms 20000, redlock.nodes the three masters) behind
# nginx rendered from nginx/nginx.conf.in, all started with scripts/lib.sh. In
# each of BENCH_RUNS rounds, atomic is run directly against one instance and
# then through nginx, then every other strategy through nginx, each run
# BENCH_HTTP_CLIENTS clients x BENCH_HTTP_REQUESTS sales with inventory-load
# after resetting the stock to BENCH_HTTP_STOCK (so that nothing sells out),
# and the audit is read after every run. While the loads run, VmRSS and
# Threads of each instance are sampled from /proc/PID/status. A second table
# (median sales/s, p50, p99 and the ratio to atomic through nginx), the
# overhead line (atomic direct vs through nginx) and the RSS line follow the
# first on stdout and in bench.md; bench-http.csv has one row per table row.
# loadtest/README-bench.md says how to read them.
#
# Environment (defaults in brackets):
#   BENCH_STRATEGIES   [setnx-spin owner-lua redisson redlock fenced batched atomic]
#                            zookeeper zookeeper-fenced mysql mysql-fenced may
#                            be added: their store is then started here
#   BENCH_CLIENTS      [1 16 64 200]
#   BENCH_STOCK        [2000]
#   BENCH_RUNS         [3]   runs per point; the median sales/s is reported
#   BENCH_WAIT_MS      [10000] lock.wait-ms
#   BENCH_ARGS         []    more lockbench options (--ttl-ms 30000, ...)
#   BENCH_MAX_S        [120] per run: lockbench stops its clients after this,
#                            and an HTTP run is stopped after this
#   BENCH_BUILD_DIR    [build/] where lockbench, inventory-stats, inventoryd
#                            and inventory-load are, or are built with cmake
#   BENCH_RESULTS_DIR  [results/]
#   BENCH_HTTP         [1]   0 skips the HTTP section
#   BENCH_HTTP_STRATEGIES [atomic batched redisson redlock owner-lua]
#                            (atomic through nginx and direct is always run;
#                            the zookeeper and mysql locks are refused here)
#   BENCH_HTTP_CLIENTS [200]
#   BENCH_HTTP_REQUESTS [6000] sales per HTTP run
#   BENCH_HTTP_STOCK   [100000] the stock each HTTP run starts from
#   BENCH_HTTP_WAIT_MS [20000] the instances' lock.wait-ms
#   BENCH_HTTP_RSS_MB  [32]  the RSS bound the RSS line checks
#
# Exit status: 0 when every run passed its audit, 1 when some run sold a unit
# twice or oversold (or did not finish, or failed), or an instance went over
# BENCH_HTTP_RSS_MB, 2 when nothing could be run (no redis-server, the build
# failed, the HTTP stack did not start). Every process started here is
# stopped by its pid on the way out. Every median, sum and ratio comes from
# inventory-stats (tools/statscli.c).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# --peers: the Node.js lock libraries against lockbench (loadtest/peers/run.sh).
if [ "${1:-}" = --peers ]; then
    exec "$root/loadtest/peers/run.sh"
fi
me=bench.sh
tag=$me
# pick_port, start_redis, wait_voting, start_instance, start_front,
# reset_stock, load_kv, start_load and wait_load, fetch_audit, stop_pid, die
# and fail, and the traps (cleanup stops $load_pid, then every pid in pids,
# and removes $work). Whatever stops this script early exits 2.
. "$root/scripts/lib.sh"
fail_status=2
bench_t0=$SECONDS
strategies=${BENCH_STRATEGIES:-setnx-spin owner-lua redisson redlock fenced batched atomic}
clients_list=${BENCH_CLIENTS:-1 16 64 200}
stock=${BENCH_STOCK:-2000}
runs=${BENCH_RUNS:-3}
wait_ms=${BENCH_WAIT_MS:-10000}
max_s=${BENCH_MAX_S:-120}
build=${BENCH_BUILD_DIR:-$root/build}
results=${BENCH_RESULTS_DIR:-$root/results}
read -r -a extra <<<"${BENCH_ARGS:-}"
http=${BENCH_HTTP:-1}
http_strategies=${BENCH_HTTP_STRATEGIES:-atomic batched redisson redlock owner-lua}
http_clients=${BENCH_HTTP_CLIENTS:-200}
http_requests=${BENCH_HTTP_REQUESTS:-6000}
http_stock=${BENCH_HTTP_STOCK:-100000}
http_wait_ms=${BENCH_HTTP_WAIT_MS:-20000}
rss_limit_mb=${BENCH_HTTP_RSS_MB:-32}

case "$runs" in ''|*[!0-9]*|0) die "BENCH_RUNS must be a positive whole number" ;; esac
case "$stock" in ''|*[!0-9]*|0) die "BENCH_STOCK must be a positive whole number" ;; esac
case "$http" in 0|1) ;; *) die "BENCH_HTTP must be 0 or 1" ;; esac
tools=(redis-server redis-cli)
if [ "$http" = 1 ]; then
    for v in http_clients http_requests http_stock http_wait_ms rss_limit_mb; do
        case "${!v}" in ''|*[!0-9]*) die "BENCH_${v^^} must be a whole number" ;; esac
    done
    if [ "$http_clients" -eq 0 ] || [ "$http_requests" -eq 0 ]; then
        die "BENCH_HTTP_CLIENTS and BENCH_HTTP_REQUESTS must be positive"
    fi
    # A run that sold out would measure sold_out answers, not sales.
    [ "$http_stock" -ge "$http_requests" ] ||
        die "BENCH_HTTP_STOCK ($http_stock) must be at least BENCH_HTTP_REQUESTS ($http_requests)"
    tools+=(nginx curl jq)
fi
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (run scripts/deps.sh)"
done

# ---- the binaries ----------------------------------------------------------
lockbench=$build/lockbench
inventoryd=$build/inventoryd    # lib.sh's names
load=$build/inventory-load
targets=()
# The stores the list needs: zookeeper* and mysql* live in them.
want_zk=0 want_mysql=0
for s in $strategies; do
    case "$s" in zookeeper*) want_zk=1 ;; mysql*) want_mysql=1 ;; esac
done
ceiling=$build/storeceiling
for t in lockbench inventory-stats $([ "$http" = 1 ] && echo inventoryd inventory-load) \
         $([ "$want_zk$want_mysql" != 00 ] && echo storeceiling); do
    [ -x "$build/$t" ] || targets+=("$t")
done
if [ ${#targets[@]} -gt 0 ]; then
    echo "$me: building ${targets[*]} in $build" >&2
    if ! cmake -S "$root" -B "$build" >/dev/null ||
       ! cmake --build "$build" -j2 --target "${targets[@]}" >/dev/null; then
        die "cmake could not build ${targets[*]} in $build"
    fi
fi
find_stats "$build/inventory-stats"
for s in $strategies; do
    "$lockbench" --help | grep -q -- "[ ,]$s\(,\|$\)" ||
        die "unknown strategy '$s' (lockbench --help lists them)"
done
if [ "$http" = 1 ]; then
    known=" $("$inventoryd" --list-strategies 2>/dev/null | tr '\n' ' ') "
    for s in $http_strategies; do
        case "$known" in *" $s "*) ;; *) die "unknown HTTP strategy '$s' (inventoryd --list-strategies lists them)" ;; esac
        case "$s" in zookeeper* | mysql*) die "the HTTP section starts no ZooKeeper or MariaDB: '$s' is benched by lockbench only (BENCH_STRATEGIES)" ;; esac
    done
fi

# ---- servers ---------------------------------------------------------------
# $work is /tmp/inventoryd-bench.XXXXXX; lib.sh's cleanup runs on EXIT (and
# keeps $work, with the logs, after a failed start-up or a signal).
setup_work bench

pick_port; redis_port=$port
start_redis "$redis_port"
redlock_spec=
# start_masters: the three Redlock masters, once; sets redlock_spec.
start_masters() {
    local m
    [ -n "$redlock_spec" ] && return 0
    for m in 1 2 3; do
        pick_port
        start_redis "$port" "master-$m"
        redlock_spec="$redlock_spec${redlock_spec:+,}127.0.0.1:$port"
    done
}
case " $strategies " in *" redlock "*) start_masters ;; esac
# The lock stores, each only when a strategy of the list lives in it, at
# their shipped settings (zookeeper.session-timeout-ms; the MariaDB
# sessions' wait_timeout is lock.ttl-ms).
zk_port='' mysql_port='' store_args=()
if [ "$want_zk" = 1 ]; then
    pick_port; zk_port=$port
    start_zookeeper "$zk_port"
    store_args+=(--set zookeeper.connect="127.0.0.1:$zk_port")
fi
if [ "$want_mysql" = 1 ]; then
    pick_port; mysql_port=$port
    start_mariadb "$mysql_port"
    store_args+=(--set mysql.host=127.0.0.1 --set mysql.port="$mysql_port")
fi
echo "$me: redis 127.0.0.1:$redis_port${redlock_spec:+, redlock masters $redlock_spec}${zk_port:+, zookeeper 127.0.0.1:$zk_port}${mysql_port:+, mariadb 127.0.0.1:$mysql_port};" \
     "stock $stock, $runs runs per point, lock.wait-ms $wait_ms" >&2

# store_of S: the store strategy S's lock lives in (zookeeper, mysql), or
# nothing for a lock in Redis.
store_of() {
    case "$1" in zookeeper*) echo zookeeper ;; mysql*) echo mysql ;; esac
}

# store_count STORE: the requests STORE's server has received so far, on
# stdout: srvr's "Received" (every packet of every client, pings too) for
# ZooKeeper, "Questions" (every statement a client sent) for MariaDB.
store_count() {
    case "$1" in
        zookeeper) zk_word "$zk_port" srvr | sed -n 's/^Received: //p' ;;
        mysql) mariadb --no-defaults -h 127.0.0.1 -P "$mysql_port" -u root -N -B \
                   -e "SHOW GLOBAL STATUS LIKE 'Questions'" 2>/dev/null | cut -f2 ;;
    esac
}

# A fresh ZooKeeper runs its first requests in the JVM's interpreter: the
# first lock benched on it sold 0.6-0.8 of what the same lock sold once the
# server was warm, even after 1000 holds. So ZooKeeper is first given 5000
# holds of storeceiling, MariaDB 1000.
[ -n "$zk_port" ] && { "$ceiling" --zookeeper "127.0.0.1:$zk_port" --holds 5000 >/dev/null ||
                           fail "storeceiling could not warm ZooKeeper up on $zk_port"; }
[ -n "$mysql_port" ] && { "$ceiling" --mysql "127.0.0.1:$mysql_port" --mode fenced --holds 1000 >/dev/null ||
                              fail "storeceiling could not warm MariaDB up on $mysql_port"; }

# What a reading itself adds to the next one, per store: two readings back
# to back, nothing else running.
declare -A store_self
for st in $([ -n "$zk_port" ] && echo zookeeper) $([ -n "$mysql_port" ] && echo mysql); do
    a=$(store_count "$st"); b=$(store_count "$st")
    store_self[$st]=$(( ${b:-0} - ${a:-0} ))
done

# ---- runs ------------------------------------------------------------------
declare -A R          # R[strategy|clients|run|key] = value from --format kv
declare -A RC         # RC[strategy|clients|run] = exit status
bench_status=0       # the exit status: 1 once a run failed (lib.sh's failed keeps $work)
started=$(date +%s)
# lockbench's lock.ttl-ms (BENCH_ARGS may set it): a master votes once up that long.
bench_ttl_ms=$(sed -n 's/.*--ttl-ms[ =]\([0-9]*\).*/\1/p' <<<"${BENCH_ARGS:-}")
for s in $strategies; do
    # shellcheck disable=SC2046 # one port a word
    [ "$s" = redlock ] && wait_voting "${bench_ttl_ms:-10000}" $(tr , " " <<<"${redlock_spec//127.0.0.1:/}")
    for c in $clients_list; do
        for r in $(seq 1 "$runs"); do
            st=$(store_of "$s")
            [ -n "$st" ] && store0=$(store_count "$st")
            # In the background, so that a signal reaches the trap at once
            # and the trap can stop it by its pid.
            start_load "$work/out" "$work/err" \
                "$lockbench" --strategy "$s" --clients "$c" --stock "$stock" \
                --redis "127.0.0.1:$redis_port" ${redlock_spec:+--redlock "$redlock_spec"} \
                --wait-ms "$wait_ms" --max-s "$max_s" --format kv "${store_args[@]}" "${extra[@]}"
            wait_load
            rc=$load_rc
            out=$(cat "$work/out")
            RC["$s|$c|$r"]=$rc
            [ "$rc" -eq 0 ] || bench_status=1
            for kv in $out; do
                key=${kv%%=*}
                R["$s|$c|$r|$key"]=${kv#*=}
            done
            if [ -n "$st" ]; then
                store1=$(store_count "$st")
                [ -n "$store0" ] && [ -n "$store1" ] &&
                    R["$s|$c|$r|store_ops_per_sale"]=$("$stats" --positive --decimals 2 --empty '?' \
                        ratio "$((store1 - store0 - store_self[$st]))" "${R["$s|$c|$r|sold"]:-0}")
            fi
            printf '%s: %-10s C=%-4s run %d: %8s sales/s, give-ups %s, exit %d\n' "$me" "$s" "$c" \
                "$r" "${R["$s|$c|$r|sales_per_s"]:-?}" "${R["$s|$c|$r|giveups"]:-?}" "$rc" >&2
            [ -s "$work/err" ] && sed "s/^/    /" "$work/err" >&2
        done
    done
done
elapsed=$(( $(date +%s) - started ))

# The median of the numbers on stdin, one a line (the mean of the middle two
# when their count is even); "?" when there are none.
median() { "$stats" --skip --significant 6 --empty '?' median; }

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
sum() { field "$@" | "$stats" --skip sum; }

# rate_ratio A B: A over B with two decimals, "?" unless both are above 0.
rate_ratio() { "$stats" --positive --decimals 2 --empty '?' ratio "$1" "$2"; }

# ---- the stores' ceilings ----------------------------------------------------
# One client doing one hold's store operations back to back (storeceiling),
# BENCH_STOCK holds a run, BENCH_RUNS runs of each, on the servers the
# lockbench runs used, after them. CEIL[MODE|run] = holds/s, CEIL[MODE|run|us]
# = µs a hold; MODE is zookeeper, mysql, mysql-fenced or mysql-update.
declare -A CEIL
ceil_modes=$([ -n "$zk_port" ] && echo zookeeper)$([ -n "$mysql_port" ] && echo " mysql mysql-fenced mysql-update")
for r in $(seq 1 "$runs"); do
    for m in $ceil_modes; do
        case "$m" in
            zookeeper) cargs=(--zookeeper "127.0.0.1:$zk_port") ;;
            mysql) cargs=(--mysql "127.0.0.1:$mysql_port" --mode lock) ;;
            *) cargs=(--mysql "127.0.0.1:$mysql_port" --mode "${m#mysql-}") ;;
        esac
        if ! out=$("$ceiling" "${cargs[@]}" --holds "$stock" 2>"$work/err"); then
            bench_status=1
            sed "s/^/    /" "$work/err" >&2
        fi
        for kv in $out; do
            case "$kv" in
                holds_per_s=*) CEIL["$m|$r"]=${kv#*=} ;;
                us_per_hold=*) CEIL["$m|$r|us"]=${kv#*=} ;;
            esac
        done
        printf '%s: ceiling %-12s run %d: %8s holds/s\n' "$me" "$m" "$r" "${CEIL["$m|$r"]:-?}" >&2
    done
done

# ceil_field MODE [us]: every run's figure, one a line.
ceil_field() {
    local r
    for r in $(seq 1 "$runs"); do printf '%s\n' "${CEIL["$1|$r${2:+|$2}"]:-}"; done
}

# ceil_of S: the ceiling mode of store strategy S (nothing for a Redis lock).
ceil_of() {
    case "$1" in zookeeper*) echo zookeeper ;; mysql-fenced) echo mysql-fenced ;; mysql) echo mysql ;; esac
}

mkdir -p "$results" || die "cannot create $results"
csv=$results/bench.csv
md=$results/bench.md
echo "strategy,clients,stock,runs,sales_per_s_median,sales_per_s_runs,giveups,backend_errors,other,sold_twice,oversold,cmds_per_sale,tries_per_sale,clients_no_sale,wait_p50_ms,wait_p99_ms,lat_p50_ms,lat_p99_ms,audit,store_ops_per_sale,of_ceiling,client_sold_min,client_sold_max,jain_median" >"$csv"
header=$(printf '%-16s %4s %9s %8s %7s %9s %6s %7s %8s %8s %6s %9s %7s %11s %6s' \
         strategy C 'sales/s' give-ups backend 'cmds/sale' tries 'no-sale' 'p99 wait' 'p99 lat' audit \
         'store/sl' 'of ceil' 'client' 'jain')
table="$header"
mdtable="| strategy | C | sales/s (median) | give-ups | backend errors | cmds/sale | lock tries/sale | clients with no sale | p50 / p99 wait ms | p50 / p99 latency ms | audit | store requests/sale | of the store's ceiling | a client's sales, min-max | Jain's index (median) |
|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|"
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
        sops=- ofc=-
        if [ -n "$(store_of "$s")" ]; then
            sops=$(field store_ops_per_sale "$s" "$c" | median)
            ofc=$(rate_ratio "$sps" "$(ceil_field "$(ceil_of "$s")" | median)")
        fi
        # Fairness, from lockbench's own counts (as the HTTP table's).
        cmin=$(field client_sold_min "$s" "$c" | "$stats" --skip --empty '?' min)
        cmax=$(field client_sold_max "$s" "$c" | "$stats" --skip --empty '?' max)
        jain=$(field jain "$s" "$c" | "$stats" --skip --empty '?' median)
        line=$(printf '%-16s %4s %s %8s %7s %s %s %s %s %s %6s %9s %7s %11s %6s' "$s" "$c" "$(num %9.0f "$sps")" \
               "$gu" "$be" "$(num %9.2f "$cps")" "$(num %6.2f "$tps")" "$(num %7.0f "$ns")" \
               "$(num %8.0f "$w99")" "$(num %8.1f "$l99")" "$audit" "$sops" "$ofc" "$cmin-$cmax" "$jain")
        table="$table"$'\n'"$line"
        mdtable="$mdtable"$'\n'"| $s | $c | $(num %.0f "$sps") | $gu | $be | $(num %.2f "$cps") | $(num %.2f "$tps") | $(num %.0f "$ns") | $w50 / $w99 | $(num %.2f "$l50") / $(num %.2f "$l99") | $audit | $sops | $ofc | $cmin-$cmax | $jain |"
        echo "$s,$c,$stock,$runs,$sps,$runs_sps,$gu,$be,$ot,$st,$os,$cps,$tps,$ns,$w50,$w99,$l50,$l99,$audit,$sops,$ofc,$cmin,$cmax,$jain" >>"$csv"
    done
done

# The ceilings' table: median holds/s and µs a hold of each mode.
ceil_table='' ceil_md=''
if [ -n "$ceil_modes" ]; then
    ceil_table=$(printf '%-16s %10s %9s' ceiling 'holds/s' 'us/hold')
    ceil_md="| store operations, one client back to back | holds/s (median) | µs a hold |
|---|--:|--:|"
    for m in $ceil_modes; do
        case "$m" in
            zookeeper) what="ZooKeeper: create (ephemeral, sequential), get_children, delete" ;;
            mysql) what="MariaDB: GET_LOCK, RELEASE_LOCK" ;;
            mysql-fenced) what="MariaDB: GET_LOCK, the fence UPDATE (committed), RELEASE_LOCK" ;;
            mysql-update) what="MariaDB: the fence UPDATE alone (committed)" ;;
        esac
        hps=$(ceil_field "$m" | median)
        us=$(ceil_field "$m" us | median)
        ceil_table="$ceil_table"$'\n'"$(printf '%-16s %s %s' "$m" "$(num %10.0f "$hps")" "$(num %9.1f "$us")")"
        ceil_md="$ceil_md"$'\n'"| $what | $(num %.0f "$hps") | $(num %.1f "$us") |"
    done
fi

echo "$table"
[ -n "$ceil_table" ] && echo && echo "$ceil_table"
echo "$me: ${elapsed} s for $(( $(wc -w <<<"$strategies") * $(wc -w <<<"$clients_list") * runs )) runs; wrote $md and $csv" >&2

{
    echo "# lockbench: sales under each lock strategy"
    echo
    rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
    [ -n "$(git -C "$root" status --porcelain -- src 2>/dev/null)" ] && rev="$rev + changes in src/"
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(redis-server --version | sed 's/ sha=.*//'), inventoryd $rev."
    echo "Stock $stock, $runs runs per point, lock.wait-ms $wait_ms${BENCH_ARGS:+, lockbench $BENCH_ARGS}; one main Redis${redlock_spec:+ and three Redlock masters}, all on this host. ${elapsed} s for these runs."
    echo
    echo "$mdtable"
    echo
    echo "sales/s: the median of the runs (every run's figure is in bench.csv)."
    echo "give-ups, backend errors: summed over the runs. The other columns: medians."
    echo "cmds/sale counts every Redis command, those run inside Lua scripts too,"
    echo "on the main Redis and the Redlock masters. Waits and latencies count every"
    echo "call begun while stock remained. See loadtest/README-bench.md."
    if [ -n "$ceil_md" ]; then
        echo
        echo "store requests/sale: what the lock's store received during the lockbench"
        echo "process (ZooKeeper's srvr Received, MariaDB's Questions), over the units"
        echo "sold. of the store's ceiling: sales/s over the ceiling below (zookeeper's"
        echo "for both zookeeper locks, mysql's for mysql, mysql-fenced's for it)."
        echo
        echo "## The stores' ceilings (storeceiling: $stock holds, one client, median of $runs)"
        echo
        echo "$ceil_md"
    fi
} >"$md"


# ---- the HTTP section ------------------------------------------------------
http_csv=$results/bench-http.csv
if [ "$http" = 0 ]; then
    # A bench-http.csv from an earlier run would not match this bench.md.
    rm -f "$http_csv"
    {
        echo
        echo "## HTTP: skipped (BENCH_HTTP=0)"
    } >>"$md"
    echo "$me: HTTP section skipped (BENCH_HTTP=0); $((SECONDS - bench_t0)) s in all" >&2
    exit "$bench_status"
fi

# The instances must see only what this script sets; the lockbench runs'
# keys go.
clear_env '^INVENTORYD_'
start_masters
for p in "$redis_port" ${redlock_spec//,/ }; do
    redis-cli -p "${p##*:}" flushall >/dev/null || fail "FLUSHALL on ${p##*:} failed"
done
pick_port; port1=$port
pick_port; port2=$port
pick_port; nginx_port=$port
start_instance "$port1" --set lock.wait-ms="$http_wait_ms" --set redlock.nodes="$redlock_spec"
pid1=$inst_pid
start_instance "$port2" --set lock.wait-ms="$http_wait_ms" --set redlock.nodes="$redlock_spec"
pid2=$inst_pid
start_front   # waits for both, renders, checks and starts nginx; sets base
echo "$me: HTTP: instances 127.0.0.1:$port1 (pid $pid1) and :$port2 (pid $pid2) behind nginx :$nginx_port;" \
     "$http_clients clients x $http_requests sales per run, stock $http_stock, lock.wait-ms $http_wait_ms" >&2

# proc_status PID: st_rss_kb and st_threads from /proc/PID/status (empty once
# it is gone). Builtins only, so that sampling forks nothing.
# shellcheck disable=SC2317 # run by watch_http, which load_kv runs
proc_status() {
    local k v rest
    st_rss_kb='' st_threads=''
    while read -r k v rest; do
        case "$k" in
            VmRSS:) st_rss_kb=$v ;;
            Threads:) st_threads=$v ;;
        esac
    done 2>/dev/null <"/proc/$1/status"
}

declare -A H          # H[strategy|path|run|key] = value from inventory-load --format kv
declare -A HA         # HA[strategy|path|run] = ok, FAIL, unfin or error
declare -A M          # M[row|rss1|thr1|rss2|thr2] = the most seen during that row's loads; row "all": overall
samples=0
: >"$work/samples"

# sample ROW: one reading of both instances, appended to $work/samples as
# "ROW|rssI KB" and "ROW|thrI N" lines, and the same for the row "all"
# (M is their maximum per key, once the loads are done). Builtins only.
# shellcheck disable=SC2317 # run by watch_http, which load_kv runs
sample() {
    local i pid row
    for i in 1 2; do
        [ "$i" = 1 ] && pid=$pid1 || pid=$pid2
        proc_status "$pid"
        for row in "$1" all; do
            [ -n "$st_rss_kb" ] && echo "$row|rss$i $st_rss_kb" >>"$work/samples"
            [ -n "$st_threads" ] && echo "$row|thr$i $st_threads" >>"$work/samples"
        done
    done
    samples=$((samples + 1))
}

# watch_http ROW: while the load runs, samples the instances every 50 ms;
# stops the load after BENCH_MAX_S (http_unfin=1).
# shellcheck disable=SC2317 # run by load_kv
watch_http() {
    local t0=$SECONDS
    while kill -0 "$load_pid" 2>/dev/null; do
        sample "$1"
        if [ $((SECONDS - t0)) -ge "$max_s" ]; then
            stop_pid "$load_pid"
            http_unfin=1
            return 0
        fi
        sleep 0.05
    done
}

# http_run STRATEGY PATH RUN [REQUESTS]: resets the stock, runs inventory-load
# through nginx (PATH nginx) or straight at the first instance (PATH direct)
# while sampling the instances, then reads the audit. RUN 0 is a warm-up:
# only its RSS samples are kept.
http_run() {
    local s=$1 via=$2 r=$3 n=${4:-$http_requests} p rc k verdict sold twice over viol
    local key="$s|$via|$r"
    [ "$via" = direct ] && p=$port1 || p=$nginx_port
    stock=$http_stock reset_stock "$s"
    http_unfin=0
    load_port=$p clients=$http_clients requests=$n load_kv "$s" watch_http "$s|$via"
    rc=$load_rc
    [ "$http_unfin" = 1 ] && rc=unfin
    [ "$r" = 0 ] && return 0
    for k in "${!L[@]}"; do
        H["$key|$k"]=${L[$k]}
    done
    fetch_audit "$s"
    read -r sold twice over viol < <(jq -r '"\(.sold) \(.sold_twice) \(.oversold) \(.violations)"' "$work/audit-$s.json")
    cp "$work/audit-$s.json" "$work/audit-$s-$via-$r.json"
    # Clients saw at most what the ledger holds, and at least that less the
    # answers they could not read (a transport error may hide a sale).
    local seen=${H["$key|sold"]:-0} unknown=$(( ${H["$key|errors"]:-0} + ${H["$key|other"]:-0} ))
    if [ "$twice" != 0 ] || [ "$over" != false ] || [ "$viol" != 0 ] ||
       ! [[ "$sold" =~ ^[0-9]+$ ]] || [ "$sold" -lt "$seen" ] || [ "$sold" -gt $((seen + unknown)) ]; then
        verdict=FAIL
    elif [ "$rc" = unfin ]; then
        verdict=unfin
    elif [ "$rc" != 0 ] || [ -z "${H["$key|sales_per_s"]:-}" ]; then
        verdict=error
    else
        verdict=ok
    fi
    HA["$key"]=$verdict
    [ "$verdict" = ok ] || bench_status=1
    printf '%s: HTTP %-10s %-6s run %d: %8s sales/s, p50 %6s ms, p99 %7s ms, lock_timeout %s, errors %s, audit %s\n' \
        "$me" "$s" "$via" "$r" "${H["$key|sales_per_s"]:-?}" "${H["$key|p50_ms"]:-?}" \
        "${H["$key|p99_ms"]:-?}" "${H["$key|lock_timeout"]:-?}" "${H["$key|errors"]:-?}" "$verdict" >&2
    [ -s "$work/load-$s.log" ] && sed "s/^/    /" "$work/load-$s.log" >&2
    return 0
}

# The rows of the table: atomic through nginx (the reference), atomic direct,
# then the other strategies through nginx.
rows=("atomic|nginx" "atomic|direct")
for s in $http_strategies; do
    [ "$s" = atomic ] || rows+=("$s|nginx")
done

http_started=$SECONDS
# Unmeasured: both paths once, so that the first measured run does not pay
# for connecting 200 clients and the instances' Redis pools.
warm=$(( http_requests < 2000 ? http_requests : 2000 ))
http_run atomic direct 0 "$warm"
http_run atomic nginx 0 "$warm"
for r in $(seq 1 "$runs"); do
    # atomic direct and through nginx alternate, one pair a round; the other
    # strategies follow, so that a noisy minute hits every row alike.
    for row in "atomic|direct" "atomic|nginx" "${rows[@]:2}"; do
        http_run "${row%|*}" "${row#*|}" "$r"
    done
done
http_elapsed=$((SECONDS - http_started))
while read -r k v; do M[$k]=$v; done < <("$stats" --by-key max <"$work/samples")

# hfield KEY ROW: every run's value of KEY, one a line.
hfield() {
    local r
    for r in $(seq 1 "$runs"); do
        printf '%s\n' "${H["$2|$r|$1"]:-}"
    done
}
# hsum KEY ROW: KEY summed over the runs.
hsum() { hfield "$@" | "$stats" --skip sum; }
# mb KB: KB in MB with one decimal, or "?".
mb() { "$stats" --skip --decimals 1 --empty '?' ratio "${1:-}" 1024; }

ref=$(hfield sales_per_s "atomic|nginx" | median)
echo "strategy,path,clients,requests,stock,runs,sales_per_s_median,sales_per_s_runs,p50_ms_median,p99_ms_median,ratio_to_atomic_nginx,giveups,backend_errors,other,errors,rss1_mb_max,threads1_max,rss2_mb_max,threads2_max,client_sold_min,client_sold_max,jain_median,audit" >"$http_csv"
htable=$(printf '%-10s %-6s %9s %8s %8s %9s %8s %6s %9s %6s %6s' strategy path 'sales/s' 'p50 ms' 'p99 ms' 'vs atomic' give-ups errors 'client' jain audit)
hmd="| strategy | path | sales/s (median) | p50 ms | p99 ms | vs atomic via nginx | give-ups | errors | a client's sales, min-max | Jain's index (median) | audit |
|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|"
for row in "${rows[@]}"; do
    s=${row%|*} via=${row#*|}
    sps=$(hfield sales_per_s "$row" | median)
    p50=$(hfield p50_ms "$row" | median)
    p99=$(hfield p99_ms "$row" | median)
    ratio=$(rate_ratio "$sps" "$ref")
    gu=$(hsum lock_timeout "$row")
    be=$(hsum backend_unavailable "$row")
    ot=$(hsum other "$row")
    te=$(hsum errors "$row")
    errs=$("$stats" sum "$be" "$ot" "$te")
    audit=ok
    for r in $(seq 1 "$runs"); do
        case "${HA["$row|$r"]:-error}" in
            ok) ;;
            FAIL) audit=FAIL ;;
            *) [ "$audit" = ok ] && audit=${HA["$row|$r"]:-error} ;;
        esac
    done
    runs_sps=$(hfield sales_per_s "$row" | paste -sd';')
    # Fairness, from inventory-load's own counts: the fewest and the most
    # sales one client made in any run, and the median of the runs' Jain's
    # index (1: every client sold as many; 1/clients: one sold all).
    cmin=$(hfield client_sold_min "$row" | "$stats" --skip --empty '?' min)
    cmax=$(hfield client_sold_max "$row" | "$stats" --skip --empty '?' max)
    jain=$(hfield jain "$row" | "$stats" --skip --empty '?' median)
    htable="$htable"$'\n'$(printf '%-10s %-6s %s %s %s %s %8s %6s %9s %6s %6s' "$s" "$via" "$(num %9.0f "$sps")" \
        "$(num %8.1f "$p50")" "$(num %8.1f "$p99")" "$(num %9.2f "$ratio")" "$gu" "$errs" "$cmin-$cmax" "$jain" "$audit")
    hmd="$hmd"$'\n'"| $s | $via | $(num %.0f "$sps") | $(num %.1f "$p50") | $(num %.1f "$p99") | $ratio | $gu | $errs | $cmin-$cmax | $jain | $audit |"
    echo "$s,$via,$http_clients,$http_requests,$http_stock,$runs,$sps,$runs_sps,$p50,$p99,$ratio,$gu,$be,$ot,$te,$(mb "${M["$row|rss1"]:-}"),${M["$row|thr1"]:-},$(mb "${M["$row|rss2"]:-}"),${M["$row|thr2"]:-},$cmin,$cmax,$jain,$audit" >>"$http_csv"
done

direct=$(hfield sales_per_s "atomic|direct" | median)
over_ratio=$(rate_ratio "$direct" "$ref")
overhead="overhead: atomic direct to one instance $(num %.0f "$direct") sales/s, p50 $(num %.1f "$(hfield p50_ms "atomic|direct" | median)") ms, p99 $(num %.1f "$(hfield p99_ms "atomic|direct" | median)") ms;"
overhead="$overhead through nginx to both $(num %.0f "$ref") sales/s, p50 $(num %.1f "$(hfield p50_ms "atomic|nginx" | median)") ms, p99 $(num %.1f "$(hfield p99_ms "atomic|nginx" | median)") ms;"
overhead="$overhead direct/nginx = $over_ratio (medians of $runs alternating runs each)"
rss_ok=yes
for i in 1 2; do
    [ -n "${M["all|rss$i"]:-}" ] && [ "${M["all|rss$i"]}" -lt $((rss_limit_mb * 1024)) ] || rss_ok=NO
done
[ "$rss_ok" = yes ] || bench_status=1
rssline="RSS: instance :$port1 max $(mb "${M["all|rss1"]:-}") MB ($(printf '%s' "${M["all|thr1"]:-?}") threads at most), instance :$port2 max $(mb "${M["all|rss2"]:-}") MB (${M["all|thr2"]:-?} threads); $samples samples during the $http_clients-client loads; each under $rss_limit_mb MB: $rss_ok"

echo
echo "$htable"
echo "$overhead"
echo "$rssline"
total=$((SECONDS - bench_t0))
echo "$me: HTTP ${http_elapsed} s for $(( (${#rows[@]}) * runs )) runs (and 2 warm-ups); ${total} s in all; wrote $md, $csv and $http_csv" >&2

{
    echo
    echo "## HTTP: the sale end to end, through nginx and two instances"
    echo
    echo "$http_clients clients (inventory-load, keep-alive), $http_requests sales per run, the stock reset to $http_stock before each run (nothing sells out);"
    echo "two inventoryd instances (lock.wait-ms $http_wait_ms, thread per connection) behind $(nginx -v 2>&1 | sed 's/^nginx version: //') (upstream weights 1 and 2),"
    echo "on the same Redis and Redlock masters. $runs rounds, each: atomic direct to the weight-1 instance, atomic through nginx, then the rest through nginx."
    echo "${http_elapsed} s for this section; ${total} s for bench.sh in all."
    echo
    echo "$hmd"
    echo
    echo "sales/s, p50, p99: medians of the runs (every run's sales/s is in bench-http.csv);"
    echo "vs atomic via nginx: the row's median sales/s over atomic's through nginx in this run."
    echo "give-ups (lock_timeout) and errors (backend_unavailable, other answers, transport errors): summed."
    echo "audit: the ledger read after every run; FAIL if a unit was sold twice or oversold."
    echo
    echo "### Overhead of nginx and the second instance"
    echo
    echo "${overhead#overhead: }."
    echo
    echo "### Memory"
    echo
    echo "${rssline#RSS: }. VmRSS and Threads from /proc/PID/status every 50 ms while each load ran; the direct runs put all $http_clients connections on the weight-1 instance."
} >>"$md"

exit "$bench_status"
