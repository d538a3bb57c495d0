#!/usr/bin/env bash
# http-bench.sh -- the HTTP layer, measured with wrk against what a user
# would compare it with, all in one run on one machine:
#
#   nginx         nginx's own `return 200` (the ceiling of HTTP on these cores)
#   webdis        webdis (Debian's package: libevent, async hiredis) running
#                 our own sale script, EVALSHA of src/lua/atomic-sale.lua
#   healthz       inventoryd's /healthz (a PING of Redis, in a worker)
#   strategies    inventoryd's /strategies (answered on the event loop; 2 KB
#                 of JSON built for each request)
#   lab           inventoryd's /lab (on the event loop; a small answer: the
#                 loop's own speed)
#   atomic-bare   inventoryd's atomic sale, probe and history off
#   atomic-poll   atomic-bare with server.event-loop=poll
#   atomic-default  the same with the probe and the history on (the defaults)
#   atomic-unix   atomic-bare with redis.unix-socket (Redis's Unix socket)
#   nginx>bare    atomic-bare through the demo's nginx (nginx/nginx.conf.in:
#                 two instances, weights 1 and 2)
#   nginx>default atomic-default through the demo's nginx
#   before-bare   atomic-bare on another build's inventoryd (HB_BASE_BUILD),
#                 for a before-and-after in the same run; only when it is set
#
# at each connection count, HB_RUNS times, targets taken in turn within each
# round so that the machine's noise falls on all of them alike. Prints a
# table of median requests/s, then the ratios the HTTP layer is judged by
# (docs/speed.md), then the CPU each request cost, in us: the server's (its
# processes with their children, read from /proc before and after each wrk
# run), Redis's and wrk's own (bash's time), whose sum bounds what the cores
# can serve when all three share them; then the idle lines: HB_IDLE
# keep-alive connections opened on atomic-bare, and then on atomic-poll
# (each sends one request and then idles), the instance's RSS and threads
# with them open, how long one more sale took on a fresh connection
# meanwhile, and what wrk at c=64 got beside them.
#
#   loadtest/http-bench.sh                    everything, about 10 minutes
#   HB_CONNS="64 256" HB_RUNS=1 HB_SECONDS=3 HB_IDLE=0 loadtest/http-bench.sh
#   HB_TARGETS="webdis atomic-bare" loadtest/http-bench.sh
#
# Environment (defaults in brackets):
#   HB_TARGETS     [all of the above]
#   HB_CONNS       [64 256 1024] wrk's connections (-c)
#   HB_RUNS        [3]   rounds; the table gives each point's median
#   HB_SECONDS     [5]   wrk's duration per point (-d)
#   HB_THREADS     [2]   wrk's threads (-t)
#   HB_IDLE        [10000] idle keep-alive connections for the idle line; 0 skips it
#   HB_BUILD_DIR   [build/] where inventoryd and inventory-stats are
#   HB_RESULTS_DIR [results/] http-bench.md and http-bench.csv are written there
#   HB_ARGS        []    more --set options for every instance
#   HB_BASE_BUILD  []    a build directory whose inventoryd is the before-bare
#                        target (with its own defaults: HB_ARGS are not given
#                        to it, since an older build may not know them)
#
# Every sale row must answer 200 only (the stock is set far above what a run
# can sell, and the ledger emptied between rounds): a point with non-2xx
# answers or socket errors is reported, and the exit status is 1. Exit 2
# when nothing could be run. Every process started here is stopped by its
# pid on the way out, and the work directory removed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=http-bench
. "$root/scripts/lib.sh"
fail_status=2
all_targets="nginx webdis healthz strategies lab atomic-bare atomic-poll atomic-default atomic-unix nginx>bare nginx>default"
base_build=${HB_BASE_BUILD:-}
[ -z "$base_build" ] || all_targets="$all_targets before-bare"
targets=${HB_TARGETS:-$all_targets}
conns=${HB_CONNS:-64 256 1024}
runs=${HB_RUNS:-3}
seconds=${HB_SECONDS:-5}
threads=${HB_THREADS:-2}
idle=${HB_IDLE:-10000}
build=${HB_BUILD_DIR:-$root/build}
results=${HB_RESULTS_DIR:-$root/results}
read -r -a extra_sets <<<"${HB_ARGS:-}"
stock=1000000000
t_all=$SECONDS

for v in runs seconds threads idle; do
    case "${!v}" in ''|*[!0-9]*) die "HB_${v^^} must be a whole number" ;; esac
done
[ "$runs" -gt 0 ] && [ "$seconds" -gt 0 ] && [ "$threads" -gt 0 ] ||
    die "HB_RUNS, HB_SECONDS and HB_THREADS must be positive"
for c in $conns; do
    case "$c" in ''|*[!0-9]*|0) die "HB_CONNS: '$c' is not a positive whole number" ;; esac
done
for t in $targets; do
    case " $all_targets " in *" $t "*) ;; *) die "HB_TARGETS: unknown target '$t' (known: $all_targets)" ;; esac
done
require_tools redis-server redis-cli curl wrk nginx python3
case " $targets " in *" webdis "*) require_tools webdis ;; esac
[ -x "$build/inventoryd" ] || die "$build/inventoryd not found: build first (cmake --build build)"
find_stats "$build/inventory-stats"
inventoryd=$(realpath "$build/inventoryd")
# wrk at c=1024 and the idle line need more descriptors than the default 1024.
need_fds $((idle + 2048)) "HB_IDLE=$idle"
mkdir -p "$results" || die "cannot create $results"
setup_work http-bench
fail_status=1
pids=()

declare -A url   # target -> URL wrk hits
declare -A pid_of  # inventoryd target -> pid (for the idle line)
declare -A cpu_pids # target -> the pids whose CPU is its server's (with their children)

# ---- the servers -------------------------------------------------------------

pick_port; redis_port=$port
sock=$work/redis.sock
start_redis "$redis_port" redis --unixsocket "$sock" --unixsocketperm 777
redis_cpu_pid=$redis_pid
rcli SET inventory001 "$stock" >/dev/null

# inst NAME [SET...]: an inventoryd on a free port, our Redis, HB_ARGS; sets
# url[NAME] to its atomic sale and pid_of[NAME].
inst() {
    local name=$1
    shift
    pick_port
    local sets=(--set server.max-connections=$((idle + 1100)) --set server.connection-timeout-s=120
        --set lock.wait-ms=20000)
    local s
    for s in "$@" "${extra_sets[@]}"; do sets+=(--set "$s"); done
    start_instance "$port" "${sets[@]}"
    pid_of[$name]=$inst_pid
    cpu_pids[$name]=$inst_pid
    eval "port_$(echo "$name" | tr -c 'a-z0-9\n' _)=$port"
    wait_http "$inst_pid" "$port" /healthz "inventoryd ($name) on $port"
    url[$name]="http://127.0.0.1:$port/inventory/sale/atomic"
}

bare=(inventory.probe=false history.enabled=false)
inst atomic-bare "${bare[@]}"
inst atomic-default
url[healthz]="http://127.0.0.1:$port_atomic_default/healthz"
for t in healthz strategies lab; do cpu_pids[$t]=${pid_of[atomic-default]}; done
url[strategies]="http://127.0.0.1:$port_atomic_default/strategies"
url[lab]="http://127.0.0.1:$port_atomic_default/lab"
if [[ " $targets " == *" before-bare "* ]]; then
    [ -x "$base_build/inventoryd" ] || fail "HB_BASE_BUILD: $base_build/inventoryd not found"
    ours=$inventoryd
    inventoryd=$(realpath "$base_build/inventoryd")
    saved_sets=("${extra_sets[@]}")
    extra_sets=()
    inst before-bare "${bare[@]}"
    extra_sets=("${saved_sets[@]}")
    inventoryd=$ours
fi
if [[ " $targets " == *" atomic-poll "* ]]; then
    inst atomic-poll "${bare[@]}" server.event-loop=poll
fi
if [[ " $targets " == *" atomic-unix "* ]]; then
    inst atomic-unix "${bare[@]}" redis.unix-socket="$sock"
fi

# front NAME UP1 UP2 INST1 INST2: the demo's nginx (nginx/nginx.conf.in, weights 1 and
# 2) in $work/NAME in front of the instances on UP1 and UP2; its access log
# off (it would be the bottleneck); sets url[NAME].
front() {
    local name=$1 dir=$work/$1 nport
    pick_port; nport=$port
    bash "$root/scripts/nginx-conf.sh" "$nport" "$2" "$3" "$dir" >/dev/null || fail "nginx-conf.sh failed"
    sed -i 's|^\( *\)access_log access.log upstream;|\1access_log off;|' "$dir/nginx.conf"
    chmod 755 "$dir"
    nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" -g 'daemon off;' >"$work/$name.log" 2>&1 &
    pids+=("$!")
    cpu_pids[$name]="$! ${pid_of[$4]} ${pid_of[$5]}"
    wait_http "$!" "$nport" /healthz "nginx ($name) on $nport"
    url[$name]="http://127.0.0.1:$nport/inventory/sale/atomic"
}

if [[ " $targets " == *" nginx>bare "* ]]; then
    inst atomic-bare2 "${bare[@]}"
    front "nginx>bare" "$port_atomic_bare" "$port_atomic_bare2" atomic-bare atomic-bare2
fi
if [[ " $targets " == *" nginx>default "* ]]; then
    inst atomic-default2
    front "nginx>default" "$port_atomic_default" "$port_atomic_default2" atomic-default atomic-default2
fi

if [[ " $targets " == *" nginx "* ]]; then
    pick_port; nginx_ret_port=$port
    mkdir -p "$work/ret"
    chmod 755 "$work/ret"
    cat >"$work/ret/nginx.conf" <<EOF
worker_processes auto;
worker_rlimit_nofile 20000;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 8192; }
http {
    client_body_temp_path client_body_temp;
    proxy_temp_path proxy_temp;
    fastcgi_temp_path fastcgi_temp;
    uwsgi_temp_path uwsgi_temp;
    scgi_temp_path scgi_temp;
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$nginx_ret_port;
        location / { return 200 "ok\n"; }
    }
}
EOF
    nginx -p "$work/ret" -c "$work/ret/nginx.conf" -e "$work/ret/error.log" -g 'daemon off;' \
        >"$work/nginx-return.log" 2>&1 &
    pids+=("$!")
    cpu_pids[nginx]=$!
    wait_http "$!" "$nginx_ret_port" / "nginx return 200 on $nginx_ret_port"
    url[nginx]="http://127.0.0.1:$nginx_ret_port/"
fi

if [[ " $targets " == *" webdis "* ]]; then
    sha=$(redis-cli -p "$redis_port" SCRIPT LOAD "$(cat "$root/src/lua/atomic-sale.lua")")
    [ ${#sha} -eq 40 ] || fail "SCRIPT LOAD of atomic-sale.lua answered '$sha'"
    pick_port; webdis_port=$port
    cat >"$work/webdis.json" <<EOF
{"redis_host": "127.0.0.1", "redis_port": $redis_port, "redis_auth": null,
 "http_host": "127.0.0.1", "http_port": $webdis_port, "threads": 2, "pool_size": 20,
 "daemonize": false, "database": 0, "verbosity": 0, "logfile": "$work/webdis-own.log"}
EOF
    (cd "$work" && exec webdis "$work/webdis.json" >"$work/webdis.log" 2>&1) &
    pids+=("$!")
    webdis_pid=$!
    cpu_pids[webdis]=$webdis_pid
    # The same keys and arguments as an atomic sale of inventory001 (src/sale.c).
    url[webdis]="http://127.0.0.1:$webdis_port/EVALSHA/$sha/3/inventory001/inventory001:sold/inventory001:families/webdis-1/$webdis_port/none"
    wait_http "$webdis_pid" "$webdis_port" "/PING" "webdis on $webdis_port"
    answer=$(curl -s "${url[webdis]}")
    case "$answer" in *'"EVALSHA":[1,'*) ;; *) fail "webdis's EVALSHA answered $answer, not a sale" ;; esac
fi

# ---- the runs ----------------------------------------------------------------

csv=$work/points.csv
echo "round,target,conns,rps,non2xx,socket_errors,requests,server_cpu_ms,redis_cpu_ms,wrk_cpu_ms" >"$csv"
bad=0
hz=$(getconf CLK_TCK)

# cpu_ms PID...: the CPU (user and system) each PID and its live children
# have used so far, summed, in ms.
cpu_ms() {
    local p c t=0
    for p in "$@"; do
        for c in "$p" $(cat /proc/"$p"/task/*/children 2>/dev/null); do
            t=$((t + $(sed 's/^.*) //' "/proc/$c/stat" 2>/dev/null | awk '{print $12 + $13} END {if (NR == 0) print 0}')))
        done
    done
    echo $((t * 1000 / hz))
}

# point ROUND TARGET C: one wrk run, with the CPU its server, Redis and wrk
# itself used meanwhile; appends its line to the CSV.
point() {
    local out rps non2xx errs reqs s0 r0 s1 r1 wrk_ms
    # shellcheck disable=SC2086 # cpu_pids holds a list of pids
    s0=$(cpu_ms ${cpu_pids[$2]})
    r0=$(cpu_ms "$redis_cpu_pid")
    out=$({ TIMEFORMAT='wrk-cpu %U %S'; time wrk -t "$threads" -c "$3" -d "${seconds}s" --timeout 10s "${url[$2]}"; } 2>&1)
    # shellcheck disable=SC2086
    s1=$(cpu_ms ${cpu_pids[$2]})
    r1=$(cpu_ms "$redis_cpu_pid")
    wrk_ms=$(awk '$1 == "wrk-cpu" {printf "%d", ($2 + $3) * 1000}' <<<"$out")
    rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' <<<"$out")
    reqs=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' <<<"$out")
    non2xx=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' <<<"$out")
    errs=$(sed -n 's/^ *Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\).*/\1 \2 \3 \4/p' <<<"$out")
    errs=$("$stats" sum ${errs:-0})
    [ -n "$rps" ] || { echo "$out" >&2; fail "wrk gave no Requests/sec for $2 at c=$3"; }
    echo "$1,$2,$3,$rps,${non2xx:-0},$errs,${reqs:-0},$((s1 - s0)),$((r1 - r0)),${wrk_ms:-0}" >>"$csv"
    if [ "${non2xx:-0}" -gt 0 ] || { [ "$errs" -gt 0 ] && [ "$2" != nginx ]; }; then
        log "round $1: $2 at c=$3: ${non2xx:-0} non-2xx answers, $errs socket errors"
        bad=1
    fi
}

t0=$SECONDS
log "redis $redis_port; $runs rounds of: $targets; at c = $conns; wrk -t$threads -d${seconds}s"
for r in $(seq 1 "$runs"); do
    for c in $conns; do
        for t in $targets; do
            rcli SET inventory001 "$stock" >/dev/null
            rcli DEL inventory001:sold >/dev/null
            point "$r" "$t" "$c"
        done
    done
    log "round $r of $runs done ($((SECONDS - t0)) s)"
done

# ---- the idle line -----------------------------------------------------------

# idle_on NAME: HB_IDLE idle connections held on the instance NAME; appends
# to idle_line its RSS with them, its threads and descriptors, how long one
# more sale on a fresh connection took, and the sales/s of a wrk run at
# c=64 beside them.
idle_on() {
    local ipid=${pid_of[$1]} iport rss0 rss thr open_now sale_ms out rps
    eval "iport=\$port_$(echo "$1" | tr -c 'a-z0-9\n' _)"
    rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$ipid/status")
    hold_idle "$iport" "$idle" $((seconds + 30))
    sleep 1
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$ipid/status")
    thr=$(awk '/^Threads/ {print $2}' "/proc/$ipid/status")
    open_now=$(ls "/proc/$ipid/fd" | wc -l)
    sale_ms=$(curl -s -o "$work/idle-sale.json" -w '%{time_total}' "${url[$1]}")
    grep -q '"status":"sold"' "$work/idle-sale.json" || fail "the sale beside $idle idle connections on $1: $(cat "$work/idle-sale.json")"
    sale_ms=$(awk -v s="$sale_ms" 'BEGIN {printf "%.1f", s * 1000}')
    out=$(wrk -t "$threads" -c 64 -d "${seconds}s" --timeout 10s "${url[$1]}" 2>&1)
    rps=$(echo "$out" | awk '/^Requests\/sec:/ {printf "%.0f", $2}')
    [ -n "$rps" ] || { echo "$out" >&2; fail "wrk gave no Requests/sec beside the idle connections on $1"; }
    idle_line="$idle_line
- $idle idle keep-alive connections on $1: RSS $((rss / 1024)) MB (was $((rss0 / 1024)) MB), $thr threads, $open_now descriptors; one more sale on a fresh connection answered sold in $sale_ms ms; wrk at c=64 beside them: $rps requests/s"
    stop_pid "$idle_pid"
    forget_pid "$idle_pid"
}

idle_line=
if [ "$idle" -gt 0 ]; then
    for t in atomic-bare atomic-poll; do
        [[ " $targets " == *" $t "* ]] || [ "$t" = atomic-bare ] || continue
        idle_on "$t"
    done
fi

# ---- the table ---------------------------------------------------------------

# med TARGET C: the median requests/s of TARGET at C over the rounds.
med() {
    awk -F, -v t="$1" -v c="$2" '$2 == t && $3 == c {print $4}' "$csv" | "$stats" -e - -d 0 median
}

# ratio A CA B CB: A's median at CA over B's at CB, or "-".
ratio() {
    local a b
    a=$(med "$1" "$2")
    b=$(med "$3" "$4")
    [ "$a" = - ] || [ "$b" = - ] && { echo -; return; }
    "$stats" -e - -d 2 ratio "$a" "$b"
}

# us TARGET C COL: the median CPU a request of TARGET at C, in us, of the
# CSV's column COL (8 server, 9 Redis, 10 wrk, 0 all three).
us() {
    awk -F, -v t="$1" -v c="$2" -v k="$3" '$2 == t && $3 == c && $7 > 0 {
        v = (k == 0 ? $8 + $9 + $10 : $k); print v * 1000 / $7 }' "$csv" | "$stats" -e - -d 0 median
}

# cpu_cell TARGET C: "all = server + Redis + wrk" in us a request.
# shellcheck disable=SC2317 # called through table
cpu_cell() {
    echo "$(us "$1" "$2" 0) = $(us "$1" "$2" 8) + $(us "$1" "$2" 9) + $(us "$1" "$2" 10)"
}

# table CELL: a row per target, a column per connection count, each cell
# what the function CELL TARGET C prints.
table() {
    printf '| target |'
    for c in $conns; do printf ' c=%s |' "$c"; done
    echo
    printf '|---|'
    for c in $conns; do printf -- '---:|'; done
    echo
    for t in $targets; do
        printf '| %s |' "$t"
        for c in $conns; do printf ' %s |' "$("$1" "$t" "$c")"; done
        echo
    done
}

md=$results/http-bench.md
{
    echo "# loadtest/http-bench.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
    echo
    echo "wrk -t$threads -d${seconds}s, medians of $runs rounds of requests/s; server.io-threads and server.workers as configured (defaults 2 and 16)."
    echo
    table med
    echo
    echo "Ratios (medians):"
    echo
    for c in $conns; do
        echo "- c=$c: healthz / nginx $(ratio healthz "$c" nginx "$c"), strategies / nginx $(ratio strategies "$c" nginx "$c"), lab / nginx $(ratio lab "$c" nginx "$c"), atomic-bare / webdis $(ratio atomic-bare "$c" webdis "$c"), atomic-poll / webdis $(ratio atomic-poll "$c" webdis "$c"), atomic-poll / atomic-bare $(ratio atomic-poll "$c" atomic-bare "$c"), atomic-default / webdis $(ratio atomic-default "$c" webdis "$c"), atomic-unix / atomic-bare $(ratio atomic-unix "$c" atomic-bare "$c"), atomic-bare / before-bare $(ratio atomic-bare "$c" before-bare "$c"), nginx>default / atomic-default $(ratio "nginx>default" "$c" atomic-default "$c")"
    done
    echo
    echo "CPU a request, in us (medians): all = the server's (its processes and their children: nginx's workers, the instances behind the demo's nginx) + Redis's + wrk's. $(nproc) cores over \"all\" is the most requests/s these cores could serve."
    echo
    table cpu_cell
    echo
    for c in $conns; do
        a=$(us atomic-bare "$c" 0)
        w=$(us webdis "$c" 0)
        [ "$a" = - ] || [ "$w" = - ] || [ "$a" = 0 ] ||
            echo "- c=$c: atomic-bare's CPU bound over webdis's (webdis's all over atomic-bare's): $("$stats" -e - -d 2 ratio "$w" "$a")"
    done
    echo
    first=${conns%% *}
    last=${conns##* }
    echo "- atomic-bare at c=$last over c=$first: $(ratio atomic-bare "$last" atomic-bare "$first"); atomic-poll: $(ratio atomic-poll "$last" atomic-poll "$first"); before-bare: $(ratio before-bare "$last" before-bare "$first"); webdis: $(ratio webdis "$last" webdis "$first"); nginx: $(ratio nginx "$last" nginx "$first")"
    if [ -n "$idle_line" ]; then
        echo
        echo "Idle:$idle_line"
    fi
    [ "$bad" = 0 ] || { echo; echo "Some points had non-2xx answers or socket errors: see http-bench.csv."; }
} | tee "$md"
cp "$csv" "$results/http-bench.csv"
log "written: $md and $results/http-bench.csv ($((SECONDS - t_all)) s)"
exit "$bad"
