#!/usr/bin/env bash
# campaign_quick.sh BUILD_DIR: the fault campaign's own test (issue 22).
#   1. Ctrl-C in the middle of a run stops every process of the campaign
#      and deletes every namespace it made.
#   2. scripts/campaign.sh --quick (3 seeds, 2 mixes, 4 strategies) passes
#      in under 6 minutes, writes campaign.csv with exactly its columns, a
#      directory per seed with its schedule and the checker's verdict, and
#      leaves no namespace.
#   3. A seed's schedule is drawn from the seed alone: --print-schedule
#      draws it again, and --replay of its directory (given relative, as the
#      campaign prints it) runs and writes it,
#      byte for byte, and strikes the same faults in the same order.
#   4. A partition really cuts traffic: a replayed schedule that cuts
#      instance A from Redis for 3 s drops packets (the drop rules'
#      counters), gets only errors from A while it lasts (and sales from B,
#      which is not cut), and sales from A again after.
#   5. Two kills of one server that overlap start it again once: the
#      second kill and its heal are skipped.
#   6. A campaign killed outright (SIGKILL: no trap runs) leaves its
#      namespaces and the processes in them; the next campaign removes
#      them (and only them: a live run's record is kept), and says so.
#   And first: an expectations file with a line that an earlier line
#   shadows (the first match decides) is refused, exit 2.
# Needs root (network namespaces): exits 77 (skipped) otherwise.
set -uo pipefail
tag=campaign-test
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath "${1:?usage: campaign_quick.sh BUILD_DIR}")
campaign=$root/scripts/campaign.sh
export CAMPAIGN_BUILD_DIR=$build

if [ "$(id -u)" != 0 ]; then
    echo "$tag: skipped: network namespaces need root"
    exit 77
fi
out=$(mktemp -d /tmp/inventoryd-campaign-test.XXXXXX)
# The runs' records (scripts/lib-net.sh) of this test's campaigns only.
export NET_RUNS_DIR=$out/runs
bgpid=
live=
cleanup() {
    [ -n "$bgpid" ] && kill -TERM "$bgpid" 2>/dev/null && wait "$bgpid" 2>/dev/null
    [ -n "$live" ] && ip netns delete "$live-hub" 2>/dev/null
    [ "${failed:-0}" = 1 ] && echo "$tag: kept $out" >&2 || rm -rf "$out"
}
trap cleanup EXIT
fail() { echo "$tag: FAIL: $*" >&2; failed=1; exit 1; }
log() { echo "$tag: $*"; }

# prefix_of LOG: the namespaces' prefix a campaign logged.
prefix_of() { sed -n 's/.*network: namespaces \([a-z0-9]*\)-\*.*/\1/p' "$1" | head -n 1; }
# no_namespaces PREFIX WHAT: fails when a namespace PREFIX-* is left.
no_namespaces() {
    [ -n "$1" ] || fail "$2: the campaign logged no namespace prefix"
    local left
    left=$(ip netns list | awk '{ print $1 }' | grep "^$1-" || true)
    [ -z "$left" ] || fail "$2: namespaces left: $left"
    log "$2: no namespace $1-* is left"
}

# ---- 0. An expectation that an earlier line shadows is refused ---------------------
shadow=$out/shadowed.tsv
printf '*\tfailover\tflaw\tany\nredlock\tfailover\tsafe\tthe narrower claim\n' >"$shadow"
CAMPAIGN_EXPECTED=$shadow "$campaign" --quick --results "$out/shadow" >"$out/shadow.log" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "line 2 (redlock failover) is shadowed by line 1" "$out/shadow.log" ||
    fail "a shadowed expectation was not refused (exit $rc): $(tail -n 3 "$out/shadow.log")"
[ ! -e "$out/shadow" ] || fail "a refused campaign wrote $out/shadow"
log "an expectation line that an earlier one shadows is refused"

# ---- 1. Ctrl-C ------------------------------------------------------------------
# In its own process group (job control on: a job of a script without it
# ignores SIGINT), which gets SIGINT as a terminal's Ctrl-C sends it.
set -m
"$campaign" --strategies redisson --mixes partition --seeds 1 --time 8 \
    --results "$out/int" >"$out/int.log" 2>&1 &
bgpid=$!
set +m
# Interrupted while its fault is struck and its loads run (they run 8 s;
# the partition strikes within the first 1.2 s). Not on a load's --record
# file: inventory-load writes it as it ends, and by then the run is over.
faults=$out/int/campaign/redisson/partition/seed-1/faults.log
for _ in $(seq 1 300); do
    grep -q ' strike ' "$faults" 2>/dev/null && break
    kill -0 "$bgpid" 2>/dev/null || fail "the campaign ended before its first fault: $(tail -5 "$out/int.log")"
    sleep 0.1
done
grep -q ' strike ' "$faults" 2>/dev/null || fail "no fault struck within 30 s: $(tail -5 "$out/int.log")"
kill -0 "$bgpid" 2>/dev/null || fail "the campaign ended before it was interrupted: $(tail -5 "$out/int.log")"
prefix=$(prefix_of "$out/int.log")
[ -n "$(ip netns list | grep "^$prefix-")" ] || fail "no namespace $prefix-* while the campaign runs"
# Its work directory: that of its own processes (its process group), not of
# another campaign running on the machine meanwhile.
work=$(ps -eo pid=,pgid= | awk -v g="$bgpid" '$2 == g { print $1 }' | while read -r p; do
    readlink "/proc/$p/cwd" 2>/dev/null; done | grep '^/tmp/inventoryd-campaign\.' | sort -u)
[ -n "$work" ] || fail "no process of the campaign runs in a work directory of its own"
kill -INT -- "-$bgpid"
for _ in $(seq 1 300); do kill -0 "$bgpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$bgpid" 2>/dev/null && fail "the campaign did not stop within 30 s of Ctrl-C"
wait "$bgpid"
rc=$?
bgpid=
[ "$rc" != 0 ] || fail "an interrupted campaign exited 0"
[ ! -e "${faults%/*}/run.json" ] || fail "the run ended before Ctrl-C reached it (it wrote run.json)"
no_namespaces "$prefix" "after Ctrl-C"
for w in $work; do
    for c in /proc/[0-9]*/cwd; do
        [ "$(readlink "$c" 2>/dev/null)" = "$w" ] && fail "after Ctrl-C, process ${c//[^0-9]/} still runs in $w"
    done
done
if pgrep -f "$out/int" >/dev/null; then fail "after Ctrl-C, a load of the campaign still runs"; fi
log "Ctrl-C stopped every process of the campaign"

# ---- 2. the quick campaign ---------------------------------------------------------
start=$SECONDS
"$campaign" --quick --results "$out/q" >"$out/quick.log" 2>&1
rc=$?
secs=$((SECONDS - start))
grep -E '^campaign: \[' "$out/quick.log"
[ "$rc" = 0 ] || { tail -40 "$out/quick.log" >&2; fail "campaign.sh --quick exited $rc"; }
[ "$secs" -lt 360 ] || fail "campaign.sh --quick took $secs s, more than 6 minutes"
no_namespaces "$(prefix_of "$out/quick.log")" "after --quick"
csv=$out/q/campaign.csv
[ "$(head -n 1 "$csv")" = "strategy,mix,seeds,violating_seeds,rate,ci_low,ci_high,covered_seeds,first_violating_seed,sold_twice_total" ] ||
    fail "campaign.csv header: $(head -n 1 "$csv")"
[ "$(tail -n +2 "$csv" | wc -l)" = 8 ] || fail "campaign.csv has $(tail -n +2 "$csv" | wc -l) cells, not 8"
awk -F, 'NR > 1 && $3 != 3 { bad = 1 } END { exit bad }' "$csv" || fail "a cell of campaign.csv has other than 3 seeds"
for f in campaign.md campaign.png; do [ -s "$out/q/$f" ] || fail "no $f"; done
n=0
for d in "$out"/q/campaign/*/*/seed-*; do
    for f in schedule.json check.json faults.log coverage.tsv told-a told-b; do
        [ -f "$d/$f" ] || fail "$d has no $f"
    done
    jq -e '.verdict' "$d/check.json" >/dev/null || fail "$d/check.json has no verdict"
    n=$((n + 1))
done
[ "$n" = 24 ] || fail "$n seed directories, not 24"
log "--quick: 24 runs in $secs s, each with its schedule, faults and verdict"

# ---- 3. a seed's schedule, drawn again and replayed -----------------------------------
seed_dir=$out/q/campaign/owner-lua/partition+pause/seed-2
"$campaign" --print-schedule --strategy owner-lua --mix partition+pause --seed 2 --time 3 |
    cmp - "$seed_dir/schedule.json" || fail "--print-schedule drew another schedule for the seed"
# Both directories relative, as the campaign prints a seed's directory: the
# servers run elsewhere, and used to find no log path there.
(cd "$out" && "$campaign" --replay q/campaign/owner-lua/partition+pause/seed-2 --out replay) \
    >"$out/replay.log" 2>&1 || fail "--replay of a relative directory failed: $(tail -5 "$out/replay.log")"
cat "$out/replay.log" | grep replay
cmp "$seed_dir/schedule.json" "$out/replay/schedule.json" ||
    fail "the replay's schedule.json differs from the seed's"
struck() { awk '$2 == "strike" { print $3, $4, $5 }' "$1"; }
[ "$(struck "$seed_dir/faults.log")" = "$(struck "$out/replay/faults.log")" ] ||
    fail "the replay struck other faults: $(struck "$out/replay/faults.log") vs $(struck "$seed_dir/faults.log")"
[ -n "$(struck "$seed_dir/faults.log")" ] || fail "the seed struck no fault"
no_namespaces "$(prefix_of "$out/replay.log")" "after --replay"
log "the seed's schedule was drawn again and replayed byte for byte"

# ---- 4. a partition cuts traffic ---------------------------------------------------------
mkdir -p "$out/cut"
cat >"$out/cut/schedule.json" <<'EOF'
{
  "seed": 0,
  "strategy": "redisson",
  "mix": "partition",
  "family": "single",
  "time_s": 8,
  "ttl_ms": 1000,
  "needs": "partition_while_held",
  "faults": [
    {"at_ms": 1000, "nemesis": "partition", "target": "a|r", "dur_ms": 3000, "arg": "0"}
  ]
}
EOF
"$campaign" --replay "$out/cut" --out "$out/cut/run" >"$out/cut.log" 2>&1 ||
    fail "the partition's replay failed: $(tail -5 "$out/cut.log")"
run=$out/cut/run
grep -q 'strike f0 partition a|r' "$run/faults.log" || fail "the partition never struck"
grep -q 'heal f0 partition a|r' "$run/faults.log" || fail "the partition never healed"
dropped=$(sed -n 's/.*heal f0 partition a|r (dropped \([0-9]*\) packets).*/\1/p' "$run/faults.log")
[ "${dropped:-0}" -gt 0 ] || fail "the partition's rules dropped no packet: $(cat "$run/faults.log")"
t0=$(jq -r .load_start_us "$run/run.json")
cut=$(awk '$2 == "strike" { print $1 }' "$run/faults.log")
healed=$(awk '$2 == "heal" { print $1 }' "$run/faults.log")
# the window: from 600 ms after the cut (a request sent before it has timed
# out by then) to the heal
count() {   # FILE FROM_MS TO_MS: "sold errors" answered in the window
    awk -v t0="$t0" -v lo="$2" -v hi="$3" '{ t = ($1 - t0) / 1000 }
        t >= lo && t <= hi { if ($3 == "sold" || $3 == "sold_out") s++; else e++ }
        END { print s + 0, e + 0 }' "$1"
}
cat "$run/told-a" "$run/told-a-long" >"$run/told-a-all"   # every answer of A
read -r a_sold a_err <<<"$(count "$run/told-a-all" $((cut + 600)) "$healed")"
read -r b_sold b_err <<<"$(count "$run/told-b" $((cut + 600)) "$healed")"
read -r a_after _ <<<"$(count "$run/told-a-all" $((healed + 1000)) 100000)"
log "partition A|Redis $cut-$healed ms: $dropped packets dropped; A sold $a_sold, failed $a_err; B sold $b_sold, failed $b_err; A sold $a_after after the heal"
[ "$a_err" -ge 3 ] || fail "the cut side answered only $a_err errors during the partition"
[ "$a_sold" = 0 ] || fail "the cut side sold $a_sold units during the partition"
[ "$b_sold" -ge 3 ] || fail "the side not cut sold only $b_sold units during the partition"
[ "$a_after" -ge 1 ] || fail "A sold nothing after the partition healed"
grep -q . "$run/coverage.tsv" || true
no_namespaces "$(prefix_of "$out/cut.log")" "after the partition's replay"

# ---- 5. two kills of one server overlap ----------------------------------------------
# The second finds Redis down: it is skipped, and so is its heal, so Redis
# is started once. (Starting it twice made a second server that could not
# bind, and lost the first one's pid: it outlived its run and answered the
# next runs of the campaign in place of theirs, kill+loss seed 22 onwards.)
mkdir -p "$out/kill"
cat >"$out/kill/schedule.json" <<'EOF'
{
  "seed": 0,
  "strategy": "watchdog",
  "mix": "kill+loss",
  "family": "single",
  "time_s": 4,
  "ttl_ms": 1000,
  "needs": "holder_inside reply_lost",
  "faults": [
    {"at_ms": 800, "nemesis": "kill", "target": "r", "dur_ms": 1300, "arg": "0"},
    {"at_ms": 1200, "nemesis": "kill", "target": "r", "dur_ms": 1100, "arg": "0"}
  ]
}
EOF
"$campaign" --replay "$out/kill" --out "$out/kill/run" >"$out/kill.log" 2>&1 ||
    fail "the overlapping kills' replay failed: $(tail -5 "$out/kill.log")"
run=$out/kill/run
grep -qE 'strike f0 kill r( 0)?$' "$run/faults.log" || fail "the first kill never struck: $(cat "$run/faults.log")"
grep -q 'strike f1 kill r skipped: r is down' "$run/faults.log" ||
    fail "the second kill was not skipped: $(cat "$run/faults.log")"
grep -q 'heal f1 kill r skipped' "$run/faults.log" || fail "the second kill's heal was not skipped"
[ "$(grep -c 'heal f0 kill r$' "$run/faults.log")" = 1 ] || fail "Redis was not started again once"
if grep -q 'Address already in use' "$run/logs/redis-r.log"; then
    fail "a second redis-server was started where one ran: $(grep -m1 'Address already' "$run/logs/redis-r.log")"
fi
no_namespaces "$(prefix_of "$out/kill.log")" "after the kills' replay"
log "two overlapping kills of Redis: the second and its heal were skipped, Redis started once"

# ---- 6. a campaign killed outright ---------------------------------------------------
# A live run's record (this test's own pid and start time) and its hub: the
# sweep must leave both.
. "$root/scripts/lib-net.sh"
live=cg$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
ip netns add "$live-hub" || fail "could not make $live-hub"
echo "$$ $(net_started $$)" >"$NET_RUNS_DIR/$live"
"$campaign" --replay "$out/kill" --out "$out/killed" >"$out/killed.log" 2>&1 &
bgpid=$!
# killed once its first fault struck, its loads under way (not on a load's
# --record file, which is written as the load ends)
for _ in $(seq 1 300); do
    grep -q ' strike ' "$out/killed/faults.log" 2>/dev/null && break
    kill -0 "$bgpid" 2>/dev/null || fail "the campaign to kill ended first: $(tail -5 "$out/killed.log")"
    sleep 0.1
done
kill -0 "$bgpid" 2>/dev/null || fail "the campaign to kill ended first: $(tail -5 "$out/killed.log")"
dead=$(prefix_of "$out/killed.log")
kill -KILL "$bgpid"
wait "$bgpid" 2>/dev/null
bgpid=
# The fault: what the killed run made is still there, processes inside.
[ -n "$dead" ] && [ -n "$(net_list "$dead")" ] || fail "the killed campaign left no namespace to sweep"
[ -f "$NET_RUNS_DIR/$dead" ] || fail "the killed campaign left no record of itself"
inside=$(for ns in $(net_list "$dead"); do ip netns pids "$ns"; done | tr '\n' ' ')
[ -n "${inside// /}" ] || fail "no process was left inside the killed campaign's namespaces"
log "a campaign killed outright left $(net_list "$dead" | wc -l) namespaces $dead-* and processes $inside"
# The next campaign sweeps them.
"$campaign" --replay "$out/kill" --out "$out/after" >"$out/after.log" 2>&1 ||
    fail "the campaign after the killed one failed: $(tail -5 "$out/after.log")"
grep -q "net: removed the namespaces of $dead, a run that is gone" "$out/after.log" ||
    fail "the next campaign did not say it removed $dead-*: $(head -5 "$out/after.log")"
no_namespaces "$dead" "after the next campaign"
[ ! -f "$NET_RUNS_DIR/$dead" ] || fail "the record of the killed run is left"
for p in $inside; do
    kill -0 "$p" 2>/dev/null && fail "process $p of the killed campaign still runs: $(tr '\0' ' ' </proc/"$p"/cmdline)"
done
[ -n "$(net_list "$live")" ] && [ -f "$NET_RUNS_DIR/$live" ] || fail "the sweep removed a live run's $live-*"
ip netns delete "$live-hub"
live=
no_namespaces "$(prefix_of "$out/after.log")" "after the sweeping campaign"
log "the next campaign removed what the killed one left, and kept a live run's namespaces"
log "PASS"
