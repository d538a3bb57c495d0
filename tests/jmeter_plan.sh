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
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=jmeter-plan
kept="logs and JMeter results"

if [ $# -ne 2 ]; then
    echo "usage: $0 INVENTORYD INVENTORY_LOAD" >&2
    exit 2
fi
inventoryd=$(realpath "$1")
runner=$root/loadtest/jmeter/run.sh
threads=${JMETER_TEST_THREADS:-50}
loops=${JMETER_TEST_LOOPS:-4}
stock=200

require_tools redis-server redis-cli nginx curl
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
clear_env '^INVENTORYD_'

setup_work jmeter

# ---- start the stack -------------------------------------------------------
pick_stack_ports
start_redis
for p in "$port1" "$port2"; do
    start_instance "$p" --set lock.wait-ms=10000
    wait_http "$inst_pid" "$p" /healthz "inventoryd on $p"
done

render_nginx
start_nginx

# ---- one run of the plan ----------------------------------------------------
# run_plan NAME PLAN STRATEGY: runs loadtest/jmeter/run.sh, sets rc and out.
run_plan() {
    local name=$1 plan=$2 strategy=$3
    # In the background, so that a signal runs the trap at once.
    JMETER_RUN_TIMEOUT=${JMETER_RUN_TIMEOUT:-300} bash "$runner" -o "$work/$name" "$plan" \
        -Jhost=127.0.0.1 -Jport="$nginx_port" -Jstrategy="$strategy" \
        -Jthreads="$threads" -Jloops="$loops" -Jstock="$stock" \
        >"$work/run-$name.out" 2>&1 &
    load_pid=$!
    wait "$load_pid"
    rc=$?
    load_pid=
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
