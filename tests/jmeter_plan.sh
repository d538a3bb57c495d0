#!/usr/bin/env bash
# jmeter_plan.sh INVENTORYD INVENTORY_LOAD
#
# The JMeter plans of loadtest/jmeter/, run for real by loadtest/jmeter/run.sh
# through a real stack: a throwaway redis-server, two inventoryd instances
# behind nginx (upstream weights 1 and 2, rendered by scripts/nginx-conf.sh),
# every port a free one picked here, everything started stopped by its pid on
# the way out. Small runs: 50 threads x 4 loops, stock 200.
#
#   (a) strategy none, plan sale-200: the tearDown audit catches the oversell
#       and run.sh exits 1 (not 0, and not 2 "could not judge").
#   (b) strategy owner-lua, plan sale-3000 (same -J load): run.sh exits 0 and
#       the audit it prints is clean.
#
# JMeter: whatever run.sh finds (JMETER, JMETER_HOME, a jmeter 5 on PATH,
# Debian's 2.13). When there is none, Debian's is installed here with apt-get
# (jmeter jmeter-http, and a JDK for javac if missing): needs root or sudo.
# INVENTORY_LOAD is not used; it is taken for the same calling convention as
# the other end-to-end tests.
#
# Exit status 0 on pass, 1 on the first failed assertion (named on stderr).
set -uo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 INVENTORYD INVENTORY_LOAD" >&2
    exit 2
fi
inventoryd=$(realpath "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runner=$root/loadtest/jmeter/run.sh
threads=${JMETER_TEST_THREADS:-50}
loops=${JMETER_TEST_LOOPS:-4}
stock=200

log() { echo "jmeter-plan: $*"; }

for tool in redis-server redis-cli nginx curl; do
    command -v "$tool" >/dev/null 2>&1 || { echo "jmeter-plan: $tool not found (run scripts/deps.sh)" >&2; exit 1; }
done
[ -x "$inventoryd" ] || { echo "jmeter-plan: $inventoryd is not executable" >&2; exit 1; }

# ---- JMeter ------------------------------------------------------------------
have_jmeter() {
    [ -n "${JMETER:-}" ] && return 0
    [ -n "${JMETER_HOME:-}" ] && [ -x "$JMETER_HOME/bin/jmeter" ] && return 0
    [ -f /usr/share/jmeter/bin/ApacheJMeter.jar ] &&
        [ -f /usr/share/jmeter/lib/ext/ApacheJMeter_http.jar ] &&
        command -v javac >/dev/null 2>&1 && return 0
    # A jmeter on PATH that is not Debian's (Debian's needs the jars above).
    command -v jmeter >/dev/null 2>&1 &&
        ! grep -qs java-wrappers "$(readlink -f "$(command -v jmeter)")"
}

install_jmeter() {
    local sudo=() pkgs=(jmeter jmeter-http) t0
    command -v javac >/dev/null 2>&1 || pkgs+=(default-jdk-headless)
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null ||
            { echo "jmeter-plan: FAIL: no JMeter, and not root (nor password-less sudo) to apt-get install ${pkgs[*]}" >&2; exit 1; }
        sudo=(sudo -n)
    fi
    t0=$(date +%s)
    log "no JMeter found: apt-get install ${pkgs[*]} ..."
    export DEBIAN_FRONTEND=noninteractive
    if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 \
            "${pkgs[@]}" >/tmp/jmeter-plan-apt.$$.log 2>&1; then
        # Package lists may be missing or stale: once more after an update.
        "${sudo[@]}" apt-get update -qq -o DPkg::Lock::Timeout=300 >>/tmp/jmeter-plan-apt.$$.log 2>&1
        if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 \
                "${pkgs[@]}" >>/tmp/jmeter-plan-apt.$$.log 2>&1; then
            tail -n 20 /tmp/jmeter-plan-apt.$$.log >&2
            rm -f /tmp/jmeter-plan-apt.$$.log
            echo "jmeter-plan: FAIL: apt-get install ${pkgs[*]} failed" >&2
            exit 1
        fi
    fi
    rm -f /tmp/jmeter-plan-apt.$$.log
    log "installed ${pkgs[*]} in $(( $(date +%s) - t0 )) s"
}
have_jmeter || install_jmeter

# run.sh compiles its launcher for Debian's JMeter once: next to the binaries
# under test rather than in the source tree.
export JMETER_LAUNCHER_CACHE=${JMETER_LAUNCHER_CACHE:-$(dirname "$inventoryd")/jmeter-launcher}

# The instances must see only what this test sets.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^INVENTORYD_' || true)

work=$(mktemp -d /tmp/inventoryd-jmeter.XXXXXX)
# nginx's workers run as nobody when the master is root: they must reach it.
chmod 755 "$work"
pids=()
run_pid=
failed=0

show_logs() {
    local f
    for f in "$work"/*.log; do
        [ -s "$f" ] || continue
        if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f"; then
            echo "---- sanitizer report in $f" >&2
            grep -m 1 -A 30 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f" >&2
            continue
        fi
        echo "---- last lines of $f" >&2
        tail -n 20 "$f" >&2
    done
}

fail() {
    echo "jmeter-plan: FAIL: $*" >&2
    failed=1
    show_logs
    exit 1
}

# Stops one of our children by pid: SIGTERM, SIGKILL after 10 s.
stop_pid() {
    local pid=$1 i
    if ! kill -TERM "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null
        return
    fi
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

cleanup() {
    local i
    [ -n "$run_pid" ] && stop_pid "$run_pid"
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        stop_pid "${pids[$i]}"
    done
    pids=()
    if [ "$failed" -eq 0 ]; then
        rm -rf "$work"
    else
        echo "jmeter-plan: logs and JMeter results kept in $work" >&2
    fi
}
trap cleanup EXIT
trap 'failed=1; exit 1' INT TERM

# A port below the ephemeral range that nothing listens on and that this
# test has not picked already.
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
    fail "no free TCP port found"
}

# wait_http PID PORT PATH NAME: until PATH on PORT answers 2xx, or PID died.
wait_http() {
    local pid=$1 port=$2 path=$3 name=$4 i
    for i in $(seq 1 200); do
        if curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$port$path"; then
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || fail "$name exited during start-up"
        sleep 0.1
    done
    fail "$name not ready on port $port after 20 s"
}

# ---- start the stack -------------------------------------------------------
pick_port; redis_port=$port
pick_port; port1=$port
pick_port; port2=$port
pick_port; nginx_port=$port
log "redis $redis_port, instances $port1 and $port2, nginx $nginx_port, in $work"

redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
for i in $(seq 1 100); do
    [ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ] && break
    kill -0 "$redis_pid" 2>/dev/null || fail "redis-server exited during start-up"
    [ "$i" -eq 100 ] && fail "redis-server not answering PING on $redis_port"
    sleep 0.1
done

for p in "$port1" "$port2"; do
    (cd "$work" && exec "$inventoryd" \
        --set server.port="$p" --set server.bind=127.0.0.1 \
        --set redis.host=127.0.0.1 --set redis.port="$redis_port" \
        --set lock.wait-ms=10000 \
        >"$work/inventoryd-$p.log" 2>&1) &
    pids+=("$!")
    wait_http "$!" "$p" /healthz "inventoryd on $p"
done

bash "$root/scripts/nginx-conf.sh" "$nginx_port" "$port1" "$port2" "$work/nginx" ||
    fail "scripts/nginx-conf.sh failed"
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx-error.log" \
    -g 'daemon off;' >"$work/nginx-stdout.log" 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")
wait_http "$nginx_pid" "$nginx_port" /healthz "nginx on $nginx_port"

# ---- one run of the plan ----------------------------------------------------
# run_plan NAME PLAN STRATEGY: runs loadtest/jmeter/run.sh, sets rc and out.
run_plan() {
    local name=$1 plan=$2 strategy=$3
    # In the background, so that a signal runs the trap at once.
    JMETER_RUN_TIMEOUT=${JMETER_RUN_TIMEOUT:-300} bash "$runner" -o "$work/$name" "$plan" \
        -Jhost=127.0.0.1 -Jport="$nginx_port" -Jstrategy="$strategy" \
        -Jthreads="$threads" -Jloops="$loops" -Jstock="$stock" \
        >"$work/run-$name.out" 2>&1 &
    run_pid=$!
    wait "$run_pid"
    rc=$?
    run_pid=
    out=$(cat "$work/run-$name.out")
    sed 's/^/    /' "$work/run-$name.out"
}

# show_run NAME: run.sh's output and JMeter's own, for a failure.
show_run() {
    echo "---- run.sh output ($1)" >&2
    cat "$work/run-$1.out" >&2
    [ -f "$work/$1/jmeter.out" ] && { echo "---- JMeter output ($1)" >&2; tail -n 20 "$work/$1/jmeter.out" >&2; }
    [ -f "$work/$1/jmeter.log" ] && { echo "---- jmeter.log ($1)" >&2; grep -E 'ERROR|WARN' "$work/$1/jmeter.log" | tail -n 20 >&2; }
}

requests=$((threads * loops))

# ---- (a) none: the tearDown audit catches the oversell ----------------------
log "(a) sale-200, strategy none, $threads threads x $loops loops, stock $stock"
run_plan none sale-200 none
[ "$rc" -eq 1 ] || { show_run none; fail "none: run.sh exited $rc, expected 1 (the audit catches the oversell)"; }
grep -q "^  sale   $requests sample(s)" <<<"$out" ||
    { show_run none; fail "none: JMeter did not make $requests sales"; }
grep -q '^audit: {.*"oversold":true' <<<"$out" ||
    { show_run none; fail "none: the audit line does not say oversold"; }
log "PASS none: the tearDown audit failed the run (exit 1)"

# ---- (b) owner-lua: the same load passes ------------------------------------
log "(b) sale-3000, strategy owner-lua, $threads threads x $loops loops, stock $stock"
run_plan owner-lua sale-3000 owner-lua
[ "$rc" -eq 0 ] || { show_run owner-lua; fail "owner-lua: run.sh exited $rc, expected 0"; }
grep -q "^  sale   $requests sample(s), 0 failed" <<<"$out" ||
    { show_run owner-lua; fail "owner-lua: JMeter did not make $requests sales without failure"; }
grep -q '^audit: {.*"oversold":false' <<<"$out" ||
    { show_run owner-lua; fail "owner-lua: the audit line does not say not oversold"; }
log "PASS owner-lua: no oversell, run.sh exited 0"
exit 0
