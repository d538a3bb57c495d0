#!/usr/bin/env bash
# browser_lab.sh INVENTORYD
#
# The lock lab's page in a real browser (tests/browser/lab.spec.mjs, run by
# node with playwright-core and Debian's chromium) against a real stack on
# free ports: a redis-server, two inventoryd instances behind nginx (the
# demo's weights), lock.ttl-ms=1000 so that a scenario takes two seconds.
#   - instance 1: lab.enabled=true, its runs aimed at nginx, scenario sales
#     A and B at instance 1 and instance 2 (lab.instances);
#   - instance 2: lab.enabled=false, so POST /lab/runs there must be a 404;
#   - both: faults.enabled=true (scenarios send hold_ms and friends), and
#     working directory $work, where results/demo.csv and results/matrix.csv
#     are written as scripts/demo.sh and the safety matrix would;
#   - instance 3, on its own (not behind nginx): admin.token set, runs on and
#     aimed at itself, so the page must ask for the token before a run.
# The checks save their screenshots as results/lab-*.png in the checkout.
# Both instances must then stop cleanly on SIGTERM (a lab run's threads are
# joined; under the sanitizer build, nothing leaked).
#
# Needs node, tests/browser/node_modules (npm ci, which scripts/deps.sh
# runs) and /usr/bin/chromium (or LAB_CHROMIUM). Exit status 0 on pass, 1 on
# the first failure (named on stderr).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=browser

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 INVENTORYD" >&2
    exit 2
fi
inventoryd=$(realpath "$1")
chromium=${LAB_CHROMIUM:-/usr/bin/chromium}
require_tools redis-server redis-cli nginx curl node
[ -x "$chromium" ] || { echo "$tag: $chromium not found (scripts/deps.sh installs Debian's chromium)" >&2; exit 1; }
[ -f "$root/tests/browser/node_modules/playwright-core/package.json" ] ||
    { echo "$tag: tests/browser/node_modules has no playwright-core (scripts/deps.sh runs npm ci there)" >&2; exit 1; }

clear_env '^INVENTORYD_'
setup_work browser
pick_stack_ports
start_redis

mkdir -p "$work/results" "$root/results"
rm -f "$root/results"/lab-*.png
cat >"$work/results/demo.csv" <<'EOF'
strategy,requests,sold,stock,oversold_units,sold_twice,violations,lock_timeouts,errors,sales_per_s,p50_ms,p99_ms,p99_wait_ms,redis_cmds_per_sale,verdict
none,3000,3000,169,2969,2969,2999,0,0,11595,2.1,32,<=1,6.1,OVERSOLD
owner-lua,3000,200,0,0,0,0,0,0,161,0.8,744,<=1000,14.8,OK
redisson,3000,200,0,0,0,0,0,0,270,75.5,95,<=100,18.5,OK
EOF
cat >"$work/results/matrix.csv" <<'EOF'
strategy,nemesis,verdict,expected,agrees,oversold_units,sold_twice,overlapping_holds,late_writes,lost_sales,untold_sales,stock_ledger,served_share,served,requests
expiring,pause,unsafe,flaw,yes,3,3,2,1,0,0,0,1.00,600,600
expiring,pool,safe,either,yes,0,0,0,0,0,0,0,1.00,600,600
fenced,pause,safe,safe,yes,0,0,1,1,0,0,0,0.99,598,600
fenced,pool,unavailable,safe,yes,0,0,0,0,0,0,0,0.10,60,600
EOF
cat >"$work/results/campaign.csv" <<'EOF'
strategy,mix,seeds,violating_seeds,rate,ci_low,ci_high,covered_seeds,first_violating_seed,sold_twice_total
owner-lua,partition+pause,30,11,0.3667,0.2187,0.5449,21,2,14
fenced,partition+pause,30,0,0.0000,0.0000,0.1135,19,,0
redisson,partition+pause,3,0,0.0000,0.0000,0.5615,1,,0
EOF
cat >"$work/results/campaign-counterexample.json" <<'EOF'
{"strategy":"owner-lua","mix":"partition+pause","seed":2,"faults":"pause a @900+1400","kind":"sold_twice",
 "detail":"unit 99917 went to orders a1-70 and b2-81",
 "events":[
  {"id":"1-0","instance":"a1","port":3786,"owner":"x:70","order":"a1-70","outcome":"sold","granted_us":1000000,"released_us":2600000,"lease_us":1990000,"written_us":2600100,"inside_until_us":2600100,"owned":0,"unit":99917,"token":0},
  {"id":"2-0","instance":"b2","port":3786,"owner":"y:81","order":"b2-81","outcome":"sold","granted_us":2010000,"released_us":2030000,"lease_us":3000000,"written_us":2030100,"inside_until_us":2030100,"owned":1,"unit":99917,"token":0}],
 "overlaps":[{"a":"1-0","b":"2-0","lead_us":590100}]}
EOF

common=(--set faults.enabled=true --set lock.ttl-ms=1000 --set lock.wait-ms=3000)
start_instance "$port1" "${common[@]}" --set lab.enabled=true \
    --set lab.target="127.0.0.1:$nginx_port" --set lab.instances="127.0.0.1:$port1,127.0.0.1:$port2"
pid1=$inst_pid
start_instance "$port2" "${common[@]}" --set lab.enabled=false
pid2=$inst_pid
pick_port; port3=$port
token=browser-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
start_instance "$port3" "${common[@]}" --set lab.enabled=true --set admin.token="$token"
pid3=$inst_pid
start_front
wait_http "$pid3" "$port3" /healthz "inventoryd on $port3"

log "the page at $base/ (runs on), at http://127.0.0.1:$port2/ (runs off) and at http://127.0.0.1:$port3/ (admin.token set)"
LAB_BASE=$base LAB_OFF="http://127.0.0.1:$port2" LAB_SHOTS="$root/results" LAB_CHROMIUM=$chromium \
LAB_TOKEN_BASE="http://127.0.0.1:$port3" LAB_TOKEN=$token \
    node "$root/tests/browser/lab.spec.mjs" >"$work/spec.out" 2>&1 &
load_pid=$!
wait "$load_pid"
rc=$?
load_pid=
sed "s/^/$tag: /" "$work/spec.out"
[ "$rc" -eq 0 ] || fail "the browser checks failed (exit $rc)"

stop_stack_cleanly
stop_pid "$pid3"
forget_pid "$pid3"
[ "$stop_status" = 0 ] || fail "inventoryd on $port3 exited with status $stop_status after SIGTERM"
grep -qF "$token" "$work"/inventoryd-*.log && fail "the admin token is in an instance's log"
log "PASS the lab page, its runs, its 404 when off and its token prompt, in chromium"
exit 0
