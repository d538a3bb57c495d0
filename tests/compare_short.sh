#!/usr/bin/env bash
# compare_short.sh INVENTORYD INVENTORY_LOAD [interrupt|keep|cluster]
#
# scripts/demo.sh, the comparison of every strategy, on a short load
# (DEMO_CLIENTS=20, DEMO_REQUESTS=200) with the given binaries (no build),
# on free ports picked here for Redis, the Redlock masters, both instances
# and nginx, writing into a temporary DEMO_RESULTS_DIR (never the checkout):
#   - it exits 0 and prints the table: a header and one row per strategy;
#   - results/demo.md has the table, one row per strategy;
#   - results/demo.csv has the header and exactly one row per strategy named
#     by `inventoryd --list-strategies`, in that order, each of 200 requests;
#   - results/demo.png is a PNG of non-zero size;
#   - nothing listens on its ports afterwards, and no process it started is
#     left; the checkout's results/ is untouched;
#   - its last line names the lab's URL, http://127.0.0.1:<nginx port>/;
#   - it printed the admin token it made once, in a line showing the curl
#     header, and no log it keeps holds the token.
# With "keep" (DEMO_KEEP=1, as on a terminal): once the table is written the
# demo prints the lab's URL and keeps the stack up; through nginx, that URL
# serves the page, GET /lab says runs are on and results/demo.csv exists,
# GET /lab/results/demo.csv is the CSV just written, and a reset answers 401
# without the printed token and 200 with it. Then Ctrl-C (SIGINT
# to its process group) stops everything, the demo exits 0, and the checks
# above follow.
# With "cluster": the same on a local Redis Cluster (DEMO_CLUSTER=1, six
# free cluster ports): the demo says so and names the item's master, and
# the checks above hold, the cluster's ports and bus ports included.
# With "interrupt": the demo is interrupted as Ctrl-C would (SIGINT to its
# process group) during its first round, and must stop everything it started
# and exit 130.
#
# Exit status 0 on pass, 1 on the first failed assertion (named on stderr).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=compare
kept="output and logs"

if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != interrupt ] && [ "$3" != keep ] && [ "$3" != cluster ]; }; then
    echo "usage: $0 INVENTORYD INVENTORY_LOAD [interrupt|keep|cluster]" >&2
    exit 2
fi
for b in "$1" "$2"; do
    [ -x "$b" ] || { echo "compare: FAIL: '$b' is not an executable (build it first)" >&2; exit 1; }
done
inventoryd=$(realpath "$1")
load=$(realpath "$2")
mode=${3:-full}
limit_s=${COMPARE_TIMEOUT_S:-400}

# The demo must see only what this test sets.
clear_env '^(INVENTORYD|DEMO)_'

setup_work compare
demo_pid=

on_fail() {
    if [ -f "$work/demo.out" ]; then
        echo "---- last lines of the demo's output" >&2
        tail -n 30 "$work/demo.out" >&2
    fi
}

# The demo is the leader of its own process group (set -m below): stop it
# with SIGTERM, so its trap stops what it started; SIGKILL to the group only
# if it is still there after 30 s.
stop_demo() {
    [ -n "$demo_pid" ] || return 0
    if kill -0 "$demo_pid" 2>/dev/null; then
        kill -TERM "$demo_pid" 2>/dev/null
        for _ in $(seq 1 300); do
            kill -0 "$demo_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$demo_pid" 2>/dev/null && kill -KILL -- "-$demo_pid" 2>/dev/null
    fi
    wait "$demo_pid" 2>/dev/null
    demo_pid=
}

cleanup() {
    stop_demo
    finish_work
}

mapfile -t strategies < <("$inventoryd" --list-strategies)
[ ${#strategies[@]} -gt 0 ] || fail "inventoryd --list-strategies named no strategy"

pick_port; redis_port=$port
pick_port; m1=$port
pick_port; m2=$port
pick_port; m3=$port
pick_port; i1=$port
pick_port; i2=$port
pick_port; nginx_port=$port
pick_port; zk_port=$port
pick_port; mysql_port=$port
ours=("$redis_port" "$m1" "$m2" "$m3" "$i1" "$i2" "$nginx_port" "$zk_port" "$mysql_port")
cluster_ports=()
if [ "$mode" = cluster ]; then
    for _ in 1 2 3 4 5 6; do
        pick_cluster_port
        cluster_ports+=("$port")
        ours+=("$port" $((port + 10000)))
    done
fi
results=$work/results
log "${#strategies[@]} strategies; redis $redis_port, masters $m1 $m2 $m3, instances $i1 $i2, nginx $nginx_port; results in $results"

# The checkout's results, to show they are left alone.
fingerprint() {
    if [ -d "$root/results" ]; then
        find "$root/results" -maxdepth 1 -type f -printf '%P %s %T@\n' 2>/dev/null | sort
    else
        echo "no results/"
    fi
}
before_fp=$(fingerprint)

# Its own process group, as a terminal's foreground job would have: a
# background job of a script without job control ignores SIGINT.
set -m
DEMO_CLUSTER=$([ "$mode" = cluster ] && echo 1 || echo 0) DEMO_CLUSTER_PORTS="${cluster_ports[*]}" \
DEMO_KEEP=$([ "$mode" = keep ] && echo 1 || echo 0) \
DEMO_CLIENTS=20 DEMO_REQUESTS=200 DEMO_STOCK=200 \
DEMO_REDIS_PORT=$redis_port DEMO_REDLOCK_PORTS="$m1 $m2 $m3" \
DEMO_ZOOKEEPER_PORT=$zk_port DEMO_MYSQL_PORT=$mysql_port \
DEMO_INSTANCE_PORTS="$i1 $i2" DEMO_NGINX_PORT=$nginx_port \
DEMO_RESULTS_DIR=$results DEMO_INVENTORYD=$inventoryd DEMO_LOAD=$load \
    bash "$root/scripts/demo.sh" >"$work/demo.out" 2>&1 </dev/null &
demo_pid=$!
set +m
t0=$SECONDS

# check_stopped: nothing of the demo listens or runs any more.
check_stopped() {
    local left=() p procs
    for p in "${ours[@]}"; do port_busy "$p" && left+=("$p"); done
    [ ${#left[@]} -eq 0 ] || fail "still listening after the demo ended: ${left[*]} ($(ss -Htlnp 2>/dev/null | grep -E ":($(IFS='|'; echo "${left[*]}"))\b" | tr -s ' '))"
    # Every redis-server and nginx of the demo names $work in its arguments.
    procs=$(pgrep -a -f -- "$work/results" || true)
    [ -z "$procs" ] || fail "processes of the demo still running: $procs"
    log "ok: nothing listens on ${ours[*]} and no process of the demo is left"
}

if [ "$mode" = interrupt ]; then
    # Wait for the first round to start, then Ctrl-C.
    for _ in $(seq 1 600); do
        grep -q '^\[1/' "$work/demo.out" 2>/dev/null && break
        kill -0 "$demo_pid" 2>/dev/null || fail "the demo exited before its first round"
        sleep 0.1
    done
    grep -q '^\[1/' "$work/demo.out" || fail "the demo did not start a round within 60 s"
    sleep 0.3
    log "sending SIGINT to the demo's process group (as Ctrl-C does)"
    kill -INT -- "-$demo_pid"
    for _ in $(seq 1 300); do
        kill -0 "$demo_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$demo_pid" 2>/dev/null && fail "the demo is still running 30 s after SIGINT"
    wait "$demo_pid"
    rc=$?
    demo_pid=
    [ "$rc" -eq 130 ] || fail "the interrupted demo exited with $rc, expected 130"
    grep -q 'interrupted, stopping everything' "$work/demo.out" ||
        fail "the demo did not say it was stopping everything"
    log "ok: interrupted demo exited 130 after $((SECONDS - t0)) s"
    check_stopped
    [ "$(fingerprint)" = "$before_fp" ] || fail "the checkout's results/ changed"
    log "PASS: Ctrl-C stops the demo and everything it started"
    exit 0
fi

lab_url="http://127.0.0.1:$nginx_port/"
while kill -0 "$demo_pid" 2>/dev/null; do
    [ $((SECONDS - t0)) -lt "$limit_s" ] || { stop_demo; fail "the demo ran longer than $limit_s s"; }
    [ "$mode" = keep ] && grep -qxF "demo: lab: $lab_url" "$work/demo.out" 2>/dev/null && break
    sleep 0.5
done
if [ "$mode" = keep ]; then
    kill -0 "$demo_pid" 2>/dev/null || fail "with DEMO_KEEP=1 the demo exited instead of keeping the lab up"
    curl -sf --max-time 5 -o "$work/page.html" "$lab_url" || fail "the lab's URL $lab_url does not answer"
    grep -q '<script src="/lab/app.js"' "$work/page.html" || fail "$lab_url is not the lab's page"
    curl -sf --max-time 5 "${lab_url}lab" >"$work/lab.json" || fail "GET /lab through nginx failed"
    [ "$(jq -r '.enabled, .results["demo.csv"]' "$work/lab.json" | paste -sd ' ' -)" = "true true" ] ||
        fail "GET /lab says $(cat "$work/lab.json"), expected runs on and results/demo.csv present"
    curl -sf --max-time 5 "${lab_url}lab/results/demo.csv" >"$work/served.csv" ||
        fail "GET /lab/results/demo.csv through nginx failed"
    cmp -s "$work/served.csv" "$results/demo.csv" || fail "the lab serves another demo.csv than the one just written"
    log "ok: the demo kept the lab up at $lab_url, serving this run's demo.csv"
    token=$(sed -n 's/^demo: admin token: \([0-9a-f]\{32\}\) .*/\1/p' "$work/demo.out")
    [ -n "$token" ] || fail "the kept demo printed no admin token before the lab's URL"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -d '{"stock":200}' "${lab_url}inventory/reset")
    [ "$code" = 401 ] || fail "a reset without the admin token answered $code, expected 401"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -H "Authorization: Bearer $token" \
        -d '{"stock":200}' "${lab_url}inventory/reset")
    [ "$code" = 200 ] || fail "a reset with the printed admin token answered $code, expected 200"
    log "ok: a reset needs the printed admin token (401 without it, 200 with it)"
    kill -INT -- "-$demo_pid"
    for _ in $(seq 1 300); do
        kill -0 "$demo_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$demo_pid" 2>/dev/null && fail "the demo is still running 30 s after SIGINT"
fi
wait "$demo_pid"
rc=$?
demo_pid=
log "demo.sh exited with $rc after $((SECONDS - t0)) s"
[ "$rc" -eq 0 ] || fail "scripts/demo.sh exited with $rc"
check_stopped
if [ "$mode" = keep ]; then
    tail -n 1 "$work/demo.out" | grep -q "stopped; the results stay in" || fail "the kept demo did not say it stopped"
else
    tail -n 1 "$work/demo.out" | grep -qF "demo: lab: $lab_url" || fail "the demo's last line does not name the lab's URL $lab_url"
fi

n=$(grep -c '^demo: admin token: ' "$work/demo.out")
[ "$n" -eq 1 ] || fail "the demo printed $n admin token lines, expected 1"
token=$(sed -n 's/^demo: admin token: \([0-9a-f]\{32\}\) .*/\1/p' "$work/demo.out")
[ -n "$token" ] || fail "the demo's admin token line holds no 32-digit token: $(grep '^demo: admin token: ' "$work/demo.out")"
grep -qF "curl -H 'Authorization: Bearer $token'" "$work/demo.out" || fail "the token line does not show the curl header"
leaks=$(grep -rlF "$token" "$results" 2>/dev/null)
[ -z "$leaks" ] || fail "the admin token is in $leaks"
log "ok: the demo printed its admin token once, with its curl header, and no log holds it"

if [ "$mode" = cluster ]; then
    grep -q "^demo: starting a Redis Cluster on ${cluster_ports[*]} " "$work/demo.out" ||
        fail "the demo did not say it started a Redis Cluster on ${cluster_ports[*]}"
    grep -qE "^demo: the item lives on the master on [0-9]+$" "$work/demo.out" ||
        fail "the demo did not name the item's master"
    log "ok: the demo ran on a Redis Cluster on ${cluster_ports[*]}"
fi

# ---- the printed table --------------------------------------------------------
header=$(grep -E '^strategy +requests +sold ' "$work/demo.out" | head -n 1)
[ -n "$header" ] || fail "the demo printed no table header (strategy requests sold ...)"
for s in "${strategies[@]}"; do
    n=$(grep -cE "^$s +200 " "$work/demo.out")
    [ "$n" -eq 1 ] || fail "the printed table has $n rows for $s (of 200 requests), expected 1"
done
log "ok: printed table has a header and one row per strategy"

# ---- demo.md --------------------------------------------------------------------
md=$results/demo.md
[ -s "$md" ] || fail "$md is missing or empty"
grep -qE '^\| strategy \| requests \|' "$md" || fail "$md has no table header"
for s in "${strategies[@]}"; do
    n=$(grep -cE "^\| $s \| " "$md")
    [ "$n" -eq 1 ] || fail "$md has $n rows for $s, expected 1"
done
log "ok: demo.md has the table, one row per strategy"

# ---- demo.csv -------------------------------------------------------------------
csv=$results/demo.csv
[ -s "$csv" ] || fail "$csv is missing or empty"
head -n 1 "$csv" | tr ',' '\n' >"$work/columns"
for c in strategy requests sold oversold_units sales_per_s client_sold_min client_sold_max jain verdict; do
    grep -qx "$c" "$work/columns" || fail "$csv has no column $c (header: $(head -n 1 "$csv"))"
done
mapfile -t rows < <(tail -n +2 "$csv")
[ ${#rows[@]} -eq ${#strategies[@]} ] ||
    fail "$csv has ${#rows[@]} rows, expected ${#strategies[@]} (one per strategy of --list-strategies)"
req_col=$(grep -nx requests "$work/columns" | cut -d: -f1)
for k in "${!strategies[@]}"; do
    s=${strategies[$k]}
    name=${rows[$k]%%,*}
    [ "$name" = "$s" ] || fail "$csv row $((k + 1)) is '$name', expected '$s' (the order of --list-strategies)"
    r=$(cut -d, -f"$req_col" <<<"${rows[$k]}")
    [ "$r" = 200 ] || fail "$csv: $s made $r requests, expected 200"
done
log "ok: demo.csv has one row per strategy, in the order of --list-strategies: ${strategies[*]}"

# Every strategy with a lock across instances sold nothing twice (on a
# cluster too, with redis.cluster.nodes as its only cluster setting), and
# atomic, which never waits, sold exactly the stock: 200 of 200.
col() { grep -nx "$1" "$work/columns" | cut -d: -f1; }
for k in "${!strategies[@]}"; do
    s=${strategies[$k]}
    case $s in none | local) continue ;; esac
    over=$(cut -d, -f"$(col oversold_units)" <<<"${rows[$k]}")
    twice=$(cut -d, -f"$(col sold_twice)" <<<"${rows[$k]}")
    verdict=$(cut -d, -f"$(col verdict)" <<<"${rows[$k]}")
    [ "$over" = 0 ] && [ "$twice" = 0 ] && [ "$verdict" = OK ] ||
        fail "$csv: $s oversold $over, sold $twice twice, verdict $verdict; expected 0, 0, OK"
    if [ "$s" = atomic ]; then
        sold=$(cut -d, -f"$(col sold)" <<<"${rows[$k]}")
        left=$(cut -d, -f"$(col stock)" <<<"${rows[$k]}")
        [ "$sold" = 200 ] && [ "$left" = 0 ] || fail "$csv: atomic sold $sold, stock $left; expected 200, 0"
    fi
done
log "ok: every strategy with a lock across instances sold nothing twice; atomic sold its 200"

# ---- demo.png -------------------------------------------------------------------
png=$results/demo.png
[ -s "$png" ] || fail "$png is missing or empty"
[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    fail "$png is not a PNG file"
grep -qF "demo: chart written to $png" "$work/demo.out" || fail "the demo did not print the chart's path"
log "ok: demo.png is a PNG of $(stat -c %s "$png") bytes, and its path was printed"

[ "$(fingerprint)" = "$before_fp" ] || fail "the checkout's results/ changed (DEMO_RESULTS_DIR not honoured?)"
log "ok: the checkout's results/ is untouched"
log "PASS: the comparison writes a table, a CSV and a PNG"
exit 0
