#!/usr/bin/env bash
# campaign.sh -- fault campaigns: many seeded runs of random, composed
# faults per (strategy, mix), each judged by inventory-check, and the
# violation rate of each with its 95% interval (docs/campaign.md).
#
# Every run is one (strategy, mix, seed): two inventoryd instances (A, B)
# and their Redis servers (and ZooKeeper or MariaDB, for the strategies
# whose lock lives there), each in its own network namespace on a bridge
# the campaign makes (scripts/lib-net.sh), loaded from a client namespace
# with inventory-load --record, while a fault schedule drawn from the seed
# alone (times in ms from the load's start) strikes and heals. Then the
# coverage the faults reached is written into the item's history and
# inventory-check judges the history, the ledger, the stock and every
# answer, with --need naming the key states of the mix.
#
#   scripts/campaign.sh [--strategies LIST] [--mixes LIST] [--seeds N]
#                       [--seed S] [--time S] [--results DIR]
#   scripts/campaign.sh --quick          3 seeds, 2 mixes, 4 strategies, 3 s runs
#   scripts/campaign.sh --replay DIR     reruns DIR/schedule.json exactly
#   scripts/campaign.sh --shrink DIR     the smallest schedule that still violates
#   scripts/campaign.sh --print-schedule --strategy S --mix M --seed N [--time S]
#
# Mixes are nemeses joined by "+": partition, loss, pause, kill, failover,
# redlock-restart, drift, slow, mixed (several lock families on other
# items of the same processes, fenced and handoff sharing one item's lock
# key, stalls of their servers, and a reset of the cell's item while one of
# its holds is inside), store-failover (the lock's own store fails
# while a holder is inside: the leader of a 3-server ZooKeeper ensemble is
# killed, or MariaDB is killed, each started again later; zookeeper* and
# mysql* only, run with a 6 s TTL and session and 3.5 s holds), and
# session-end (a sale of A or B that, once inside, ends its own lock-store
# session from outside, end_session=1, then holds 0.8-2 s and writes, never
# told: ZooKeeper's session expired, MariaDB's connection killed; zookeeper*
# and mysql* only). Default mixes: partition partition+pause pause+slow
# kill+loss failover mixed (store-failover and session-end only when asked
# for).
#
# Writes RESULTS/campaign.csv, campaign.md, campaign.png and, per run,
# RESULTS/campaign/<strategy>/<mix>/seed-<N>/ (schedule.json, check.json,
# faults.log, coverage.tsv, the answers, the logs). Exit status: 0 when no
# strategy expected safe (loadtest/campaign-expected.tsv) violated, 1 when
# one did, 2 when the campaign could not run (not root, a tool missing).
# Ctrl-C stops every process and deletes every namespace the run made.
set -uo pipefail
# shellcheck disable=SC2317  # functions called by name or from traps

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=campaign
. "$root/scripts/lib.sh"
. "$root/scripts/lib-net.sh"
fail_status=2

# ---- options ------------------------------------------------------------------
all_mixes="partition partition+pause pause+slow kill+loss failover mixed"
nemeses_known="partition loss pause kill failover redlock-restart drift slow mixed store-failover session-end"
strategies_opt=
mixes_opt=
nseeds=30
first_seed=1
time_s=
results=${CAMPAIGN_RESULTS_DIR:-$root/results}
build=${CAMPAIGN_BUILD_DIR:-$root/build}
expected=${CAMPAIGN_EXPECTED:-$root/loadtest/campaign-expected.tsv}
min_covered=10
quick=0
replay_dir=
shrink_dir=
print_schedule=0
resume=0
one_strategy=
one_mix=
one_seed=
out_dir=
shrink_tries=3

usage() {
    sed -n '2,43p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    cat <<EOF
Options: --strategies LIST (comma or blank separated; default every strategy of
inventoryd --list-strategies but none and local, the ZooKeeper and MySQL ones
when ZooKeeper and MariaDB are installed), --mixes LIST, --seeds N (30), --seed S
(first seed, 1), --time S (seconds of load per run: 6, --quick 3), --results DIR,
--min-covered N (seeds a safe cell needs covered: 10, --quick 1), --out DIR
(where --replay writes its run), --tries N (runs per candidate in --shrink, 3),
--resume (keep the runs RESULTS/campaign/seeds.tsv already has, run the others,
then tabulate all: a long campaign can be run a mix at a time).
EOF
}

while [ $# -gt 0 ]; do
    case $1 in
        --strategies) strategies_opt=${2:-}; shift ;;
        --mixes) mixes_opt=${2:-}; shift ;;
        --seeds) nseeds=${2:-}; shift ;;
        --seed) first_seed=${2:-}; one_seed=${2:-}; shift ;;
        --time) time_s=${2:-}; shift ;;
        --results) results=${2:-}; shift ;;
        --min-covered) min_covered=${2:-}; shift ;;
        --quick) quick=1 ;;
        --replay) replay_dir=${2:-}; shift ;;
        --shrink) shrink_dir=${2:-}; shift ;;
        --out) out_dir=${2:-}; shift ;;
        --tries) shrink_tries=${2:-}; shift ;;
        --print-schedule) print_schedule=1 ;;
        --resume) resume=1 ;;
        --strategy) one_strategy=${2:-}; shift ;;
        --mix) one_mix=${2:-}; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "$tag: unknown option $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done
for v in nseeds first_seed min_covered shrink_tries; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "--${v//_/-}: not a whole number: ${!v}"
done
# Every path absolute, now: the servers run in their own working directory
# ($work), where "results/campaign/.../seed-3", as the campaign prints a
# seed's directory, names nothing.
for v in replay_dir shrink_dir out_dir results build expected; do
    case ${!v} in
        '' | /*) ;;
        *) printf -v "$v" '%s/%s' "$PWD" "${!v}" ;;
    esac
done
if [ "$quick" = 1 ]; then
    nseeds=3
    [ -n "$mixes_opt" ] || mixes_opt="partition+pause mixed"
    [ -n "$strategies_opt" ] || strategies_opt="owner-lua redisson fenced redlock"
    [ -n "$time_s" ] || time_s=3
    min_covered=1
fi
time_s=${time_s:-6}
[[ $time_s =~ ^[0-9]+$ ]] && [ "$time_s" -ge 2 ] && [ "$time_s" -le 600 ] ||
    die "--time: whole seconds from 2 to 600, not $time_s"
ttl=1000
stock=100000
item=inventory001
T=$((time_s * 1000))

# ---- the schedule: drawn from the seed alone ------------------------------------
# A Park-Miller generator (MINSTD, no overflow in bash's 64-bit arithmetic),
# seeded from the seed, the mix's CRC, the run's length and the family, so a
# seed gives every strategy of a family the same faults.
rng=1
rng_seed() {   # SEED MIX TIME_MS FAMILY
    local crc fam=1
    crc=$(printf '%s' "$2" | cksum | awk '{ print $1 }')
    [ "$4" = redlock ] && fam=2
    rng=$(( ($1 * 7919 + crc % 1000003 * 31 + $3 * 17 + fam * 104729) % 2147483646 + 1 ))
    rand 2 >/dev/null; rand 2 >/dev/null
}
# rand N: sets r to a number in [0, N) (and prints nothing).
rand() {
    rng=$(( rng * 48271 % 2147483647 ))
    r=$(( rng * $1 / 2147483647 ))
}
# pick WORD...: sets r to one of the words.
pick() { rand $#; local a=("$@"); r=${a[$r]}; }

family_of() { [ "$1" = redlock ] && echo redlock || echo single; }

# store_of STRATEGY: the node of the server the lock lives on when that is
# not the data Redis: zk (ZooKeeper) or db (MariaDB); nothing otherwise.
# Those strategies draw the single family's schedules with that node where
# the lock's server is aimed at (a cut, a loss, a pause or a kill of it), so
# a seed strikes them at the times it strikes the Redis locks.
store_of() { case $1 in zookeeper*) echo zk ;; mysql*) echo db ;; esac; }

# ttl_of MIX: the run's TTL (lock.ttl-ms, ZooKeeper's session timeout,
# MariaDB's wait_timeout): $ttl, but 6 s in a mix with store-failover, whose
# long holds of 3.5 s must outlast a store's failover and restart within
# their lease, dated from an acquire that may have waited lock.wait-ms
# (2 s): only the fault may end the lock (the matrix's store-failover
# column, whose holder finds the lock idle, needs 4 s for 3 s).
store_ttl=6000
store_hold=3500
# A store lock's stop of a holder's instance waits (at most store_aim_ms,
# a long holder's period: its 600 ms hold and 1 s gap) for a long hold to
# freeze, and a cut from its store (at most
# store_cut_aim_ms) for a long hold of the cut instance to begin; either
# lasts past the session: its aim, the session's window and 350 ms
# (store_stretch_ms). A shorter one cannot end a session, as a stop under
# the TTL cannot outlive a Redis lease. A slow Redis waits (at most
# store_slow_aim_ms) for a hold that began after it was due (aim_new), and
# lasts past redis.timeout (500 ms) once its aim is done, so that a write
# waiting in it loses its reply. The Redis locks' schedules draw the same times and
# targets, unstretched.
store_aim_ms=1700
store_slow_aim_ms=2500
store_cut_aim_ms=2500
ttl_of() { case "+$1+" in *+store-failover+*) echo "$store_ttl" ;; *) echo "$ttl" ;; esac; }

# session_window_ms STORE TTL: how long a stop or a cut must last, from
# when it struck, for the lock store (store_of: zk, db) to have ended the
# holder's session: the TTL (ZooKeeper's session timeout, MariaDB's
# wait_timeout in whole seconds) and the server's own slack (ZooKeeper
# expires sessions by the tick, 500 ms); 0 for the Redis locks.
session_window_ms() {
    case $1 in
        zk) echo $(($2 + 600)) ;;
        db) echo $(( ($2 + 999) / 1000 * 1000 + 200 )) ;;
        *) echo 0 ;;
    esac
}

# store_stretch_ms STORE TTL NEMESIS TARGET: how long at least a fault must
# last against a store lock (see store_aim_ms), 0 where nothing is stretched.
store_stretch_ms() {
    local w
    w=$(session_window_ms "$1" "$2")
    [ "$w" -gt 0 ] || { echo 0; return; }
    case $3:$4 in
        pause:[ab]) echo $((store_aim_ms + w + 350)) ;;
        partition:*\|"$1") echo $((store_cut_aim_ms + w + 350)) ;;
        slow:r) echo 1100 ;;
        *) echo 0 ;;
    esac
}

# needs_of MIX: the coverage events (key states) a seed of MIX must show to
# count as covered, comma separated.
needs_of() {
    local n out=() e
    for n in ${1//+/ }; do
        case $n in
            partition) e=partition_while_held ;;
            loss | slow) e=reply_lost ;;
            pause | kill | redlock-restart | drift) e=holder_inside ;;
            failover) e=failover_before_replication ;;
            mixed) e="stall_while_held reset_inside" ;;
            store-failover) e="store_down_while_held store_back_while_held" ;;
            session-end) e="session_ended_while_held granted_after_session_end" ;;
        esac
        for e in $e; do
            case " ${out[*]} " in *" $e "*) ;; *) out+=("$e") ;; esac
        done
    done
    local IFS=,
    echo "${out[*]}"
}

# sentinel_topology MIX FAMILY: true when the single-master family runs with
# a replica and a Sentinel (the mix fails over).
sentinel_topology() {
    [ "$2" = single ] || return 1
    case "+$1+" in *+failover+*) return 0 ;; esac
    return 1
}

# F_AT F_NEM F_TGT F_DUR F_ARG: the faults, by index, ordered by time
# (F_LEDGER: the promoted replica's ledger length, for a split brain).
F_AT=(); F_NEM=(); F_TGT=(); F_DUR=(); F_ARG=(); F_LEDGER=(); F_SKIP=()
# and what a run's faults did to a ZooKeeper ensemble or a store: F_HIT (the
# member struck), F_INSIDE (the holders inside once the store was down),
# F_DOWN (when it went down); F_STOPPED[M]: 1 while member M is paused;
# F_STRUCK: when each fault struck (its aim done), in microseconds; F_LEFT:
# how long it had to last from then, in ms
F_HIT=(); F_INSIDE=(); F_DOWN=(); F_STOPPED=(); F_STRUCK=(); F_LEFT=()

# draw_fault NEMESIS FAMILY MIX: draws the rest of one fault of NEMESIS,
# its time already drawn into at and arg set to 0: sets at, tgt, dur and
# arg, reads lsrv (the lock's server: r, or the strategy's store_of) and
# reads and sets mixed_used, all locals of draw_schedule, its only
# caller (bash's dynamic scope); false when the family has no such fault
# (redlock-restart off Redlock). The draws' order is the schedule: moving
# one changes every seed's faults.
draw_fault() {
    local n=$1 fam=$2 mix=$3 masters=(m0 m1 m2)
    case $n in
        partition)
            if [ "$fam" = redlock ]; then
                pick "a|m0" "a|m1" "a|m2" "b|m0" "b|m2" "a|r" "a|m0+m1"; tgt=$r
            else
                pick "a|$lsrv" "b|$lsrv"; tgt=$r
            fi
            rand 1700; dur=$((300 + r)) ;;
        loss)
            if [ "$fam" = redlock ]; then pick "a|m0" "b|m1" "a|r" "b|r"; else pick "a|$lsrv" "b|$lsrv"; fi
            tgt=$r
            rand 5; arg=$((20 + 10 * r))
            rand 1500; dur=$((500 + r)) ;;
        pause)
            if [ "$fam" = redlock ]; then pick a b a b m0 m1; else pick a b a b "$lsrv"; fi
            tgt=$r
            rand 2200; dur=$((300 + r)) ;;
        kill)
            if [ "$fam" = redlock ]; then pick a b r m2; else pick a b "$lsrv"; fi
            tgt=$r
            rand 1200; dur=$((300 + r)) ;;
        failover)
            if [ "$fam" = redlock ]; then pick m0 m1 m2; tgt=$r; rand 400; dur=$((100 + r))
            else pick lag split; tgt=$r; rand 1000; dur=$((1200 + r)); fi ;;
        redlock-restart)
            [ "$fam" = redlock ] || return 1
            pick m0 m1 m2; tgt=$r
            rand 400; dur=$((100 + r)) ;;
        store-failover)
            # the lock's own store: ZooKeeper's leader stays down 1-2.5 s
            # (its followers elect another meanwhile), MariaDB 0.1-0.5 s
            # (then its restart, about a second)
            [ "$lsrv" = r ] && return 1
            tgt=$lsrv
            if [ "$lsrv" = zk ]; then rand 1500; dur=$((1000 + r)); else rand 400; dur=$((100 + r)); fi ;;
        session-end)
            # a sale of A or B that ends its own store session once
            # inside, then holds dur (0.8-2 s) and writes
            [ "$lsrv" = r ] && return 1
            pick a b; tgt=$r
            rand 1200; dur=$((800 + r)) ;;
        drift)
            pick "0.5" "0.7" "1.5" "2"; arg=$r
            at=0; dur=$T; tgt=a ;;
        slow)
            if [ "$fam" = redlock ]; then pick r m0 m1 m2; else pick r; fi
            tgt=$r
            rand 1000; dur=$((300 + r)) ;;
        mixed)
            # a second stall hits another master: two on one server
            # would queue the pause behind the stop and outlast both
            if [ "$fam" = redlock ]; then tgt=r
            elif [ -n "$mixed_used" ]; then pick ${masters[@]/$mixed_used}; tgt=$r
            else pick "${masters[@]}"; tgt=$r; fi
            mixed_used=$tgt
            pick pause stop; arg=$r
            # early in the run (10-30%), while A's first Redlock
            # hold is under way, and 3-5 s long, as the review's
            # 6 s pause: its renewal is held up whatever its phase
            rand $((T / 5)); at=$((T / 10 + r))
            rand 2000; dur=$((3000 + r)) ;;
        *) die "unknown nemesis '$n' in mix '$mix' (known: $nemeses_known)" ;;
    esac
    return 0
}

# overlaps NEMESIS TARGET AT DUR LINE...: true when one of the schedule's
# LINEs (draw_schedule's) is a fault of NEMESIS on TARGET whose time meets
# [AT, AT + DUR].
overlaps() {
    local n=$1 tgt=$2 at=$3 dur=$4 l l_at l_n l_tgt l_dur
    shift 4
    for l in "$@"; do
        read -r l_at l_n l_tgt l_dur _ <<<"$l"
        [ "$l_n $l_tgt" = "$n $tgt" ] || continue
        [ $((10#$l_at)) -le $((at + dur)) ] && [ $((10#$l_at + l_dur)) -ge "$at" ] && return 0
    done
    return 1
}

# draw_schedule SEED MIX FAMILY [STORE]: fills the F_ arrays (STORE: the
# strategy's store_of, when its lock is not in the data Redis).
draw_schedule() {
    local seed=$1 mix=$2 fam=$3 lsrv=${4:-r} n k count at dur tgt arg min lines=() mixed_used=
    rng_seed "$seed" "$mix" "$T" "$fam"
    for n in ${mix//+/ }; do
        rand 2; count=$((1 + r))
        [ "$n" = drift ] && count=1
        # redlock's stalls hit the data Redis: once is the whole fault
        [ "$n" = mixed ] && [ "$fam" = redlock ] && count=1
        for ((k = 0; k < count; k++)); do
            rand $((T / 2)); at=$((T / 10 + r))
            arg=0
            draw_fault "$n" "$fam" "$mix" || continue
            # against a store lock, a holder's stop or a cut lasts past its
            # session, and begins early enough to end before the load does
            min=$(store_stretch_ms "$lsrv" "$(ttl_of "$mix")" "$n" "$tgt")
            if [ "$dur" -lt "$min" ]; then
                dur=$min
                [ $((at + dur)) -le $((T * 9 / 10)) ] || at=$((T * 9 / 10 - dur))
                [ "$at" -ge $((T / 10)) ] || at=$((T / 10))
                # a second stop or cut of the same instance while the first
                # is on would add nothing (and its heal would end the first
                # early): not drawn
                overlaps "$n" "$tgt" "$at" "$dur" "${lines[@]}" && continue
            fi
            # every fault heals before the load ends
            [ $((at + dur)) -le $((T * 9 / 10)) ] || dur=$((T * 9 / 10 - at))
            [ "$n" = drift ] && dur=$T
            [ "$dur" -ge 100 ] || dur=100
            lines+=("$(printf '%08d %s %s %d %s' "$at" "$n" "$tgt" "$dur" "$arg")")
        done
        # mixed: a reset of the cell's item, to twice the stock, sent to A
        # while one of A's long holds is inside, early (5-10%: before the
        # stalls, which are then judged on the reset's stock); drawn after
        # the stalls, so that a seed's stalls are what they were
        if [ "$n" = mixed ]; then
            rand $((T / 20)); at=$((T / 20 + r))
            lines+=("$(printf '%08d %s %s %d %s' "$at" reset a 100 $((2 * stock)))")
        fi
    done
    F_AT=(); F_NEM=(); F_TGT=(); F_DUR=(); F_ARG=()
    while read -r at n tgt dur arg; do
        [ -n "$at" ] || continue
        F_AT+=($((10#$at))); F_NEM+=("$n"); F_TGT+=("$tgt"); F_DUR+=("$dur"); F_ARG+=("$arg")
    done < <(printf '%s\n' "${lines[@]}" | sort)
}

# write_schedule SEED STRATEGY MIX: the schedule as JSON on stdout, every
# field in a fixed order and form, so that a replay writes it byte for byte.
write_schedule() {
    local i n=${#F_AT[@]}
    printf '{\n  "seed": %d,\n  "strategy": "%s",\n  "mix": "%s",\n  "family": "%s",\n' \
        "$1" "$2" "$3" "$(family_of "$2")"
    printf '  "time_s": %d,\n  "ttl_ms": %d,\n  "needs": "%s",\n  "faults": [' \
        "$time_s" "$(ttl_of "$3")" "$(needs_of "$3")"
    for ((i = 0; i < n; i++)); do
        [ "$i" -gt 0 ] && printf ','
        printf '\n    {"at_ms": %d, "nemesis": "%s", "target": "%s", "dur_ms": %d, "arg": "%s"}' \
            "${F_AT[$i]}" "${F_NEM[$i]}" "${F_TGT[$i]}" "${F_DUR[$i]}" "${F_ARG[$i]}"
    done
    [ "$n" -gt 0 ] && printf '\n  '
    printf ']\n}\n'
}

# read_schedule FILE: the F_ arrays, time_s and T from a schedule.json; sets
# S_SEED S_STRATEGY S_MIX.
read_schedule() {
    local f=$1 at n tgt dur arg
    jq -e '.faults' "$f" >/dev/null 2>&1 || die "$f is not a schedule.json"
    S_SEED=$(jq -r .seed "$f"); S_STRATEGY=$(jq -r .strategy "$f"); S_MIX=$(jq -r .mix "$f")
    time_s=$(jq -r .time_s "$f"); T=$((time_s * 1000))
    F_AT=(); F_NEM=(); F_TGT=(); F_DUR=(); F_ARG=()
    while read -r at n tgt dur arg; do
        F_AT+=("$at"); F_NEM+=("$n"); F_TGT+=("$tgt"); F_DUR+=("$dur"); F_ARG+=("$arg")
    done < <(jq -r '.faults[] | "\(.at_ms) \(.nemesis) \(.target) \(.dur_ms) \(.arg)"' "$f")
}

# faults_summary: the faults on one line ("partition a|r @812+1500, ...").
faults_summary() {
    local i out=""
    for ((i = 0; i < ${#F_AT[@]}; i++)); do
        out+="${out:+, }${F_NEM[$i]} ${F_TGT[$i]}"
        [ "${F_ARG[$i]}" != 0 ] && out+=" (${F_ARG[$i]})"
        out+=" @${F_AT[$i]}+${F_DUR[$i]}"
    done
    echo "${out:-none}"
}

if [ "$print_schedule" = 1 ]; then
    [ -n "$one_strategy" ] && [ -n "$one_mix" ] && [ -n "$one_seed" ] ||
        die "--print-schedule needs --strategy, --mix and --seed"
    draw_schedule "$one_seed" "$one_mix" "$(family_of "$one_strategy")" "$(store_of "$one_strategy")"
    write_schedule "$one_seed" "$one_strategy" "$one_mix"
    exit 0
fi

# ---- what the campaign needs -------------------------------------------------------
[ "$(id -u)" = 0 ] || die "network namespaces need root"
find_builds "$build"
require_tools ip nft redis-server redis-sentinel redis-cli curl jq gnuplot cksum timeout
faketime_lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n 1)
# The first line of the expectations that matches a cell decides it: a line
# that an earlier one already matches (its strategy and mix, or "*") is never
# read, and would leave a claim silently unjudged.
if [ -f "$expected" ]; then
    shadowed=$(awk -F'\t' 'BEGIN { n = 0 } !/^#/ && NF >= 3 {
            for (i = 0; i < n; i++)
                if ((S[i] == $1 || S[i] == "*") && (M[i] == $2 || M[i] == "*"))
                    printf "line %d (%s %s) is shadowed by line %d (%s %s); ", NR, $1, $2, L[i], S[i], M[i]
            S[n] = $1; M[n] = $2; L[n] = NR; n++ }' "$expected")
    [ -z "$shadowed" ] || die "$expected: ${shadowed%; }: put the narrower line first"
fi
mapfile -t listed < <("$inventoryd" --list-strategies)
# store_here STORE: true when this machine can run that lock store's server
store_here() {
    case $1 in
        zk) command -v java >/dev/null && [ -r "$zk_jar" ] ;;
        db) command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null && command -v mariadb >/dev/null ;;
        *) return 0 ;;
    esac
}
zk_jar=/usr/share/java/zookeeper.jar
campaignable=()   # every strategy but none and local
by_default=()     # and of those, the ones whose lock store this machine has
for s in "${listed[@]}"; do
    case $s in none | local) continue ;; esac
    campaignable+=("$s")
    if store_here "$(store_of "$s")"; then by_default+=("$s")
    else log "leaving $s out: its lock store is not installed here (scripts/deps.sh)"; fi
done
read -r -a strategies <<<"${strategies_opt//,/ }"
[ ${#strategies[@]} -gt 0 ] || strategies=("${by_default[@]}")
read -r -a mixes <<<"${mixes_opt//,/ }"
[ ${#mixes[@]} -gt 0 ] || read -r -a mixes <<<"$all_mixes"
for s in "${strategies[@]}"; do
    case " ${campaignable[*]} " in *" $s "*) ;; *) die "'$s' is not a strategy a campaign can judge (${campaignable[*]})" ;; esac
    store_here "$(store_of "$s")" || die "$s needs $(store_of "$s" | sed 's/zk/ZooKeeper (zookeeper, a JRE)/; s/db/MariaDB (mariadb-server)/'), not installed here (scripts/deps.sh)"
done
for m in "${mixes[@]}"; do
    for n in ${m//+/ }; do
        case " $nemeses_known " in *" $n "*) ;; *) die "unknown nemesis '$n' in mix '$m' (known: $nemeses_known)" ;; esac
    done
done

# ---- the network and the cleanup ----------------------------------------------------
setup_work campaign
net_prefix_want=cg$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
bg_jobs=()
declare -A PID=()

# cleanup (EXIT): every process of the run (continued first: a stopped
# process ignores SIGTERM), then every namespace, then the scratch dir.
cleanup() {
    local p
    trap - INT TERM
    for p in "${pids[@]}" "${bg_jobs[@]}"; do kill -CONT "$p" 2>/dev/null; done
    for p in "${bg_jobs[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    stop_started
    # the lock stores' data (a MariaDB datadir is 26 MB): gone on every
    # path, a failure too, when $work with the logs is kept
    rm -rf "$work/stores"
    if ! net_down; then
        echo "$tag: namespaces left: $(net_list | tr '\n' ' ')" >&2
        failed=1
    fi
    finish_work
}

net_sweep || log "some namespaces of a run that is gone could not be removed (ip netns list)"
net_init "$net_prefix_want" 1 || die "could not make the hub namespace $net_prefix_want-hub"
for nh in cli:10 a:21 b:22 r:31 rr:32 sen:33 m0:41 m1:42 m2:43 zk:51 db:52; do
    net_node "${nh%%:*}" "${nh#*:}" || fail "could not make the namespace for ${nh%%:*}"
done
log "network: namespaces $net_prefix-* on 10.251.$net_sub.0/24 (hub, ${net_nodes[*]})"
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

# ---- the processes of a run --------------------------------------------------------------
ns_cli() { net_exec cli "$@"; }
rc_at() {   # NODE ARG...: redis-cli at NODE's Redis, from the client, at most 1 s
    local node=$1
    shift
    ns_cli timeout 1 redis-cli -h "$(net_ip "$node")" -p "$(port_of "$node")" "$@" 2>/dev/null
}
probe_at() {   # NODE ARG...: the same, at most 0.2 s (a look that must not hold up the schedule)
    local node=$1
    shift
    ns_cli timeout 0.2 redis-cli -h "$(net_ip "$node")" -p "$(port_of "$node")" "$@" 2>/dev/null
}
port_of() { case $1 in sen) echo 26379 ;; a | b) echo 3786 ;; *) echo 6379 ;; esac; }

# start_redis_in NODE [ARG...]: redis-server in NODE's namespace; sets PID[NODE].
start_redis_in() {
    local node=$1 i
    shift
    ns_empty "$node"
    (cd "$work" && exec ip netns exec "$(net_ns "$node")" redis-server --port 6379 \
        --bind 0.0.0.0 --protected-mode no --save '' --appendonly no --daemonize no \
        --dir "$work" --dbfilename "$node.rdb" --repl-diskless-sync-delay 0 \
        --enable-debug-command yes "$@" \
        >>"$run/logs/redis-$node.log" 2>&1) &
    PID[$node]=$!
    pids+=("${PID[$node]}")
    for i in $(seq 1 100); do
        if [ "$(net_exec "$node" redis-cli -p 6379 ping 2>/dev/null)" = PONG ]; then
            # the one that answers is the one just started
            [ "$(net_exec "$node" redis-cli -p 6379 info server 2>/dev/null | tr -d '\r' |
                sed -n 's/^process_id://p')" = "${PID[$node]}" ] ||
                fail "redis-server in $node: another process answers on its port"
            return 0
        fi
        kill -0 "${PID[$node]}" 2>/dev/null || fail "redis-server in $node exited at start-up"
        sleep 0.05
    done
    fail "redis-server in $node not answering"
}

# start_zookeeper_in NODE: a standalone ZooKeeper in NODE's namespace on its
# address, port 2181, the JVM run directly (its pid is the server's), tickTime
# 500 ms (sessions from 1 s), its data in $work/stores/NODE, kept when it is
# killed and started again within the run (a czxid only grows); sets
# PID[NODE]. Waits until it serves ("srvr" names its mode).
start_zookeeper_in() {
    local node=$1 dir=$work/stores/$1 ip i
    ip=$(net_ip "$node")
    ns_empty "$node"
    mkdir -p "$dir/data"
    printf '%s\n' "tickTime=500" "dataDir=$dir/data" "clientPort=2181" "clientPortAddress=$ip" \
        "admin.enableServer=false" "4lw.commands.whitelist=srvr" >"$dir/zoo.cfg"
    (cd "$work" && exec ip netns exec "$(net_ns "$node")" java -Xmx256m -XX:+UseSerialGC \
        -XX:TieredStopAtLevel=1 -cp "/etc/zookeeper/conf:$zk_jar" -Dzookeeper.log.dir="$dir" \
        -Dzookeeper.root.logger=INFO,CONSOLE org.apache.zookeeper.server.quorum.QuorumPeerMain \
        "$dir/zoo.cfg" >>"$run/logs/zookeeper-$node.log" 2>&1) &
    PID[$node]=$!
    pids+=("${PID[$node]}")
    for i in $(seq 1 300); do
        net_exec "$node" timeout 1 bash -c 'exec 3<>"/dev/tcp/$1/2181" && printf srvr >&3 && cat <&3' _ "$ip" \
            2>/dev/null | grep -q '^Mode:' && return 0
        kill -0 "${PID[$node]}" 2>/dev/null || fail "ZooKeeper in $node exited at start-up: $(tail -3 "$run/logs/zookeeper-$node.log")"
        sleep 0.1
    done
    fail "ZooKeeper in $node not serving after 30 s"
}

# start_mariadb_in NODE: mariadbd in NODE's namespace on its address, port
# 3306, its datadir $work/stores/NODE: a copy of the campaign's template
# (mariadb-install-db, made once) at the run's first start, kept when it is
# killed and started again within the run (the fence counter only grows); root may
# connect from any node, with no password. Sets PID[NODE]; waits for ping.
start_mariadb_in() {
    local node=$1 dir=$work/stores/$1 tpl=$work/stores/mariadb-template i
    ns_empty "$node"
    if [ ! -d "$tpl" ]; then
        mariadb-install-db --no-defaults --datadir="$tpl" --user=root --skip-test-db \
            --auth-root-authentication-method=normal --innodb-log-file-size=8M \
            >"$work/mariadb-install.log" 2>&1 || fail "mariadb-install-db failed: $(tail -3 "$work/mariadb-install.log")"
    fi
    [ -d "$dir/data" ] || { mkdir -p "$dir" && cp -a "$tpl" "$dir/data"; } || fail "could not copy the MariaDB datadir"
    (cd "$work" && exec ip netns exec "$(net_ns "$node")" mariadbd --no-defaults --datadir="$dir/data" \
        --port=3306 --bind-address="$(net_ip "$node")" --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
        --user=root --skip-name-resolve --skip-log-bin --innodb-buffer-pool-size=32M \
        --innodb-log-file-size=8M --max-connections=1000 \
        --log-error="$run/logs/mariadb-$node.log" >/dev/null 2>&1) &
    PID[$node]=$!
    pids+=("${PID[$node]}")
    for i in $(seq 1 300); do
        if net_exec "$node" mariadb-admin --no-defaults -S "$dir/mysqld.sock" -u root ping >/dev/null 2>&1; then
            net_exec "$node" mariadb --no-defaults -S "$dir/mysqld.sock" -u root -e \
                "CREATE USER IF NOT EXISTS 'root'@'%'; GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION" ||
                fail "MariaDB in $node: root could not be let in from the other nodes"
            return 0
        fi
        kill -0 "${PID[$node]}" 2>/dev/null || fail "mariadbd in $node exited at start-up: $(tail -3 "$run/logs/mariadb-$node.log")"
        sleep 0.1
    done
    fail "mariadbd in $node not answering after 30 s"
}

# start_zk_ensemble_in NODE: a ZooKeeper ensemble of three servers in
# NODE's namespace, on its address (lib.sh: zk_ensemble_conf, and each
# member by zk_member_start: zkServer.sh start-foreground, the JVM's pid the
# server's): client ports 2181-2183, quorum 2888-2890, election 3888-3890,
# their data in $work/stores/NODE (kept when a member is killed and started
# again within the run: a czxid only grows). Waits until one leads and two
# follow (srvr, asked from the client's namespace: zk_wrap).
start_zk_ensemble_in() {
    local node=$1 i
    ns_empty "$node"
    zk_wrap=(ip netns exec "$(net_ns cli)")
    zk_word_s=0.5   # a look that must not hold up the schedule
    zk_ensemble_conf "$work/stores/$node" "$(net_ip "$node")" 2181 2888 3888 2182 2889 3889 2183 2890 3890
    for i in 0 1 2; do
        zk_member_start "$i" "$run/logs/zookeeper-$node-$((i + 1)).log" ip netns exec "$(net_ns "$node")"
    done
    zk_ensemble_wait 60 || fail "the ZooKeeper ensemble in $node did not settle in 60 s: $(tail -3 "$run/logs/zookeeper-$node-1.log")"
}

# start_store NODE: the lock store on NODE (zk or db), or the data Redis.
start_store() {
    case $1 in
        zk) start_zookeeper_in zk ;;
        db) start_mariadb_in db ;;
        *) start_redis_in "$1" ;;
    esac
}

start_sentinel() {
    cat >"$work/sentinel.conf" <<EOF
port 26379
bind 0.0.0.0
protected-mode no
dir $work
sentinel monitor mymaster $(net_ip r) 6379 1
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 2000
EOF
    (cd "$work" && exec ip netns exec "$(net_ns sen)" redis-sentinel "$work/sentinel.conf" \
        >>"$run/logs/sentinel.log" 2>&1) &
    PID[sen]=$!
    pids+=("${PID[sen]}")
    local i
    for i in $(seq 1 100); do
        rc_at sen SENTINEL replicas mymaster | grep -q "$(net_ip rr)" && return 0
        sleep 0.1
    done
    fail "sentinel never saw the replica"
}

# start_inst NODE: inventoryd in NODE's namespace (A under libfaketime when
# the schedule drifts it); sets PID[NODE] and ID[NODE] (its order prefix).
declare -A ID=()
start_inst() {
    local node=$1 pre=() i
    ns_empty "$node"
    if [ "$node" = a ] && [ -n "$drift_rate" ]; then
        [ -n "$faketime_lib" ] || fail "drift needs libfaketime (scripts/deps.sh)"
        pre=(env LD_PRELOAD="$faketime_lib" FAKETIME="+0 x$drift_rate" FAKETIME_NO_CACHE=1)
    fi
    (cd "$work" && INVENTORYD_ADMIN_TOKEN=$token exec ip netns exec "$(net_ns "$node")" \
        "${pre[@]}" "$inventoryd" --set server.port=3786 --set server.bind="$(net_ip "$node")" \
        "${inst_args[@]}" >>"$run/logs/inventoryd-$node.log" 2>&1) &
    PID[$node]=$!
    pids+=("${PID[$node]}")
    for i in $(seq 1 200); do
        ns_cli curl -sf -o /dev/null --max-time 1 "http://$(net_ip "$node"):3786/strategies" && break
        kill -0 "${PID[$node]}" 2>/dev/null || fail "inventoryd in $node exited at start-up: $(tail -3 "$run/logs/inventoryd-$node.log")"
        [ "$i" = 200 ] && fail "inventoryd in $node not answering"
        sleep 0.05
    done
    admin "$node" POST /inventory/reset '{"stock":1000000,"item":"campaign-id"}' >/dev/null
    ID[$node]=$(ns_cli curl -s --max-time 5 "http://$(net_ip "$node"):3786/inventory/sale/atomic?item=campaign-id" |
        jq -r '.order // "" | split("-")[0]')
}

# ns_empty NODE: NODE's namespace holds no process, or the campaign fails:
# a server left over from an earlier run would answer in this run's place.
ns_empty() {
    local left
    left=$(ip netns pids "$(net_ns "$1")" 2>/dev/null | tr '\n' ' ')
    [ -z "$left" ] || fail "the namespace of $1 still holds process(es) $left from an earlier run"
}

# admin NODE METHOD PATH [BODY]: an admin request to the instance on NODE.
admin() {
    printf 'Authorization: Bearer %s\n' "$token" |
        ns_cli curl -s --max-time 10 -H @- -X "$2" "http://$(net_ip "$1"):3786$3" ${4:+-d "$4"}
}

# stop_node NODE: stops NODE's process by its pid (continued first).
stop_node() {
    local p=${PID[$1]:-}
    [ -n "$p" ] || return 0
    kill -CONT "$p" 2>/dev/null
    stop_pid "$p"
    forget_pid "$p"
    PID[$1]=
}

# the current master of the data, as Sentinel says (r without Sentinel)
data_master() {
    local ip n
    if [ -n "${PID[sen]:-}" ]; then
        ip=$(rc_at sen SENTINEL get-master-addr-by-name mymaster | head -n 1)
        for n in r rr; do [ "$ip" = "$(net_ip "$n")" ] && { echo "$n"; return; }; done
    fi
    echo r
}

# ---- coverage: what a fault reached, seen as it struck ----------------------------------
now_us() { echo $(( $(date +%s%N) / 1000 )); }
# cover NAME SOURCE DETAIL: one coverage event, written into the history
# once the run is over (a restart of Redis would wipe it before).
cover() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$(now_us)" "$3" >>"$run/coverage.tsv"; }

# holders ITEM [NODE]: the holders of ITEM inside the critical section now
# (of NODE's instance only when given), read from the probe on every data
# Redis.
holders() {
    local it=$1 who=${2:-} n=0 c d
    for d in r rr; do
        [ -n "${PID[$d]:-}" ] || continue
        c=$(probe_at "$d" HKEYS "$it:holders" | grep -c "^${who:+${ID[$who]}-}" || true)
        n=$((n + c))
    done
    echo "$n"
}

# lock_on NODE ITEM: 1 when ITEM's lock is held on the Redis of NODE now.
lock_on() { [ "$(probe_at "$1" EXISTS "RedisDistributedLock:$2")" = 1 ] && echo 1 || echo 0; }

# ---- the nemeses ---------------------------------------------------------------------------
# strike I / mid I / heal I: fault I's start, its middle step (failover's
# promotion, drift's look), its end. Each logs what it did, when.
flog() { echo "$(( ($(now_us) - t0_us) / 1000 )) $*" >>"$run/faults.log"; }

ends() { echo "${1%%|*}" "${1#*|}"; }

# aim [WHO]: waits (at most 250 ms) until a holder of the item is inside
# (of WHO's instance, or any), so that the fault meets a hold, as the
# campaign's faults aim to; sets aimed to the holders seen last. The
# strike's real time is in faults.log. Where the fault leaves the holders'
# entries readable (a paused, killed or cut instance cannot clear its own),
# they are read again after the strike: that is the coverage.
aim() {
    local end=$(( $(now_us) + ${aim_ms:-250} * 1000 ))
    aimed=0
    while [ "$(now_us)" -lt "$end" ]; do
        aimed=$(holders "$item" "$@")
        [ "$aimed" -gt 0 ] && return 0
    done
    return 0
}

# aim_young WHO: waits (at most store_cut_aim_ms) until a hold of WHO's
# instance that began meanwhile (an order not inside at the first look) has
# been inside for 150 ms: a long hold, young, so that a cut that outlasts
# its session meets a hold that may outlast it too; sets aimed to 1 then,
# or else to the holders of WHO inside at the end.
aim_young() {
    local end=$(( $(now_us) + store_cut_aim_ms * 1000 )) first o t
    local -A seen=()
    first=" $(probe_at r HKEYS "$item:holders" | grep "^${ID[$1]}-" | tr '\n' ' ')"
    aimed=0
    while [ "$(now_us)" -lt "$end" ]; do
        t=$(now_us)
        for o in $(probe_at r HKEYS "$item:holders" | grep "^${ID[$1]}-"); do
            case "$first" in *" $o "*) continue ;; esac
            [ -n "${seen[$o]:-}" ] || seen[$o]=$t
            [ $((t - seen[$o])) -ge 150000 ] && { aimed=1; return 0; }
        done
    done
    aimed=$(holders "$item" "$1")
}

# aim_new: waits (at most store_slow_aim_ms) until a hold of the item that
# was not inside at the first look is inside: a store lock's slow Redis then
# meets a holder that will write into it (a stopped holder's frozen entry
# stays in the hash, and nobody else enters until its session has ended,
# so a slow Redis struck before that loses no reply); sets aimed to 1 then,
# or else to the holders inside at the end.
aim_new() {
    local end=$(( $(now_us) + store_slow_aim_ms * 1000 )) first o
    first=" $(probe_at r HKEYS "$item:holders" | tr '\n' ' ')"
    aimed=0
    while [ "$(now_us)" -lt "$end" ]; do
        for o in $(probe_at r HKEYS "$item:holders"); do
            case "$first" in *" $o "*) continue ;; esac
            aimed=1
            return 0
        done
    done
    aimed=$(holders "$item")
}

# aim_long [END_US [WHO]]: waits (at most 1 s, or until END_US) until one of the holders of the
# item of WHO's instance (A's by default) has been inside for two looks in a
# row: a long hold (the long holder's), young enough that its renewal is
# still to come, for another family's stall to meet (issue 20's shape), or
# still inside when a stop lands; sets aimed to 1 when it saw one.
aim_long() {
    local end=${1:-$(( $(now_us) + 1000000 ))} who=${2:-a} prev=" " now o
    aimed=0
    while [ "$(now_us)" -lt "$end" ]; do
        now=" $(probe_at r HKEYS "$item:holders" | grep "^${ID[$who]}-" | tr '\n' ' ')"
        for o in $now; do
            case "$prev" in *" $o "*) aimed=1; return 0 ;; esac
        done
        prev=$now
    done
    return 0
}

# strike_skipped I: true (and logged) when fault I would kill a server that
# is already down. Two faults that kill the same server overlap: the second
# finds it down and is skipped, and so is its heal. (Restarting it twice
# would start a second server that cannot bind, and lose the first one's
# pid: a server that outlives the run and answers the next runs.)
strike_skipped() {
    local i=$1 n=${F_NEM[$1]} tgt=${F_TGT[$1]} m
    # an ensemble's member struck is its leader: none while one of them is
    # down from an earlier fault (two down: no quorum, and no leader)
    if [ "$tgt" = zk ] && [ "$run_ensemble" = 1 ]; then
        case $n in
            kill | pause | store-failover)
                for m in 0 1 2; do
                    [ -n "${zk_ens_pids[$m]}" ] && [ "${F_STOPPED[$m]:-0}" = 0 ] && continue
                    F_SKIP[$i]=1
                    echo "$(( ($(now_us) - t0_us) / 1000 )) strike f$i $n $tgt skipped: member $((m + 1)) of the ensemble is down" >>"$run/faults.log"
                    return 0
                done ;;
        esac
        return 1
    fi
    case $n:$tgt in
        kill:* | redlock-restart:* | failover:m* | store-failover:*)
            if [ -z "${PID[$tgt]:-}" ]; then
                F_SKIP[$i]=1
                echo "$(( ($(now_us) - t0_us) / 1000 )) strike f$i $n $tgt skipped: $tgt is down" >>"$run/faults.log"
                return 0
            fi ;;
    esac
    return 1
}

# kill_node NODE: kills NODE's server outright (SIGKILL) and forgets it.
kill_node() {
    kill_pid "${PID[$1]}"
    PID[$1]=
}

# strike_stop I LEFT: fault I, a pause or a kill of its target, LEFT ms of
# it to come. A lock held by a session (run_window) frees itself only once
# the session has expired: a pause shorter than that never reached its
# window, and covers nothing. In an ensemble, zk is its leader.
strike_stop() {
    local i=$1 left=$2 n=${F_NEM[$1]} tgt=${F_TGT[$1]} h past=""
    case $tgt in
        r | zk | db) h=$aimed ;;
        m*) h=$(lock_on "$tgt" "$item") ;;
    esac
    if [ "$tgt" = zk ] && [ "$run_ensemble" = 1 ]; then
        strike_leader "$i" || return 0
        if [ "$n" = pause ]; then
            kill -STOP "${zk_ens_pids[${F_HIT[$i]}]}" 2>/dev/null
            F_STOPPED[${F_HIT[$i]}]=1
        else
            zk_member_kill "${F_HIT[$i]}"
        fi
    elif [ "$n" = pause ]; then
        kill -STOP "${PID[$tgt]}" 2>/dev/null
    else
        kill_node "$tgt"
    fi
    case $tgt in a | b) h=$(holders "$item" "$tgt") ;; esac
    if [ "$n" = pause ] && [ "$run_window" -gt 0 ]; then
        [ "$left" -ge "$run_window" ] || return 0
        past=", stopped past the session ($left ms of a $run_window ms window)"
    fi
    [ "$h" -gt 0 ] && cover holder_inside "f$i" "$n of $tgt with $h holder(s) or lock inside$past"
}

# strike_leader I: F_HIT[I] set to the ensemble's member that leads now
# (srvr), for fault I to strike; false, and logged, when none does.
strike_leader() {
    F_HIT[$1]=$(zk_leader)
    [ -n "${F_HIT[$1]}" ] && return 0
    F_SKIP[$1]=1   # and so is its heal
    flog "strike f$1 ${F_NEM[$1]} zk: no member of the ensemble leads"
    return 1
}

# inside_orders: the orders of the item's holders inside now, from the
# probe on every data Redis, a space before each and after the last.
inside_orders() {
    local d orders=" "
    for d in r rr; do
        [ -n "${PID[$d]:-}" ] || continue
        orders+="$(rc_at "$d" HKEYS "$item:holders" | tr '\n' ' ')"
    done
    echo "$orders"
}

# still_inside ORDERS: how many of ORDERS (inside_orders, earlier) are
# inside now, on stdout.
still_inside() {
    local now o n=0
    now=$(inside_orders)
    for o in $1; do case "$now" in *" $o "*) n=$((n + 1)) ;; esac; done
    echo "$n"
}

# strike_store_failover I: fault I, the lock's own store failed: the
# ensemble's leader killed (its member in F_HIT[I]), or MariaDB killed.
# Covered when holders of the item were inside once it was down; their
# orders (F_INSIDE[I]) are looked for again once it is back (store_back).
strike_store_failover() {
    local i=$1 what
    if [ "${F_TGT[$i]}" = zk ]; then
        strike_leader "$i" || return 0
        zk_member_kill "${F_HIT[$i]}"
        what="the leader, member $((F_HIT[i] + 1)) of the ensemble,"
    else
        kill_node db
        what=MariaDB
    fi
    F_INSIDE[$i]=$(inside_orders)
    F_DOWN[$i]=$(now_us)
    [ -n "${F_INSIDE[$i]// /}" ] &&
        cover store_down_while_held "f$i" "$what killed with$(echo "${F_INSIDE[$i]}" | tr -s ' ' ' ')inside"
    return 0
}

# store_back I: the store of fault I serves again (another member leads;
# MariaDB answers): covered when a holder inside at the strike is inside
# still, so that a lock the failover lost could be granted under it.
store_back() {
    local i=$1 what=$2 n
    [ -n "${F_INSIDE[$i]:-}" ] || return 0
    n=$(still_inside "${F_INSIDE[$i]}")
    flog "back f$i store-failover ${F_TGT[$i]}: $what, $(( ($(now_us) - F_DOWN[i]) / 1000 )) ms after the kill; $n holder(s) of the strike inside"
    [ "$n" -gt 0 ] && cover store_back_while_held "f$i" "$what $(( ($(now_us) - F_DOWN[i]) / 1000 )) ms after the kill, $n holder(s) of the strike still inside"
    return 0
}

# strike_failover I: fault I, a failover: the replica cut off (lag, split),
# or a Redlock master killed.
strike_failover() {
    local i=$1 tgt=${F_TGT[$1]} h
    if [ "$tgt" = lag ]; then
        net_cut "f$i" r rr   # the replica falls behind; promoted at mid
    elif [ "$tgt" = split ]; then
        # the master alone with A: Sentinel promotes the replica at
        # mid, while the old master still takes A's writes
        net_cut "f$i" r rr && net_cut "f$i" r sen && net_cut "f$i" a sen
    else
        h=$(lock_on "$tgt" "$item")
        kill_node "$tgt"
        [ "$h" = 1 ] && cover failover_before_replication "f$i" "$tgt lost the lock it held (no replica): restarted empty"
    fi
}

# strike_reset I: fault I, the reset of the cell's item.
strike_reset() {
    local i=$1
    # the reset frees the item's lock (lock.scope=item) and empties
    # its ledger and history: the run is judged from then on. When,
    # Redis itself says: MONITOR (for 1 s, in the background) dates
    # each command as Redis runs it, and the reset's SET of the
    # initial stock is read from it once the run is over (the
    # answer's time is too late: a hold granted between the two
    # would be taken for one the reset freed)
    reset_f=$i
    ns_cli timeout 1 redis-cli -h "$(net_ip "$(data_master)")" -p 6379 MONITOR >"$run/reset-monitor.txt" 2>/dev/null &
    bg_jobs+=($!)
    sleep 0.05
    admin "${F_TGT[$i]}" POST /inventory/reset "{\"stock\":${F_ARG[$i]},\"item\":\"$item\"}" >"$run/reset-f$i.json"
    reset_at=1
}

# strike_session_end I: fault I, a sale sent to instance F_TGT[I] (in the
# background) that, once inside, ends its own lock-store session from
# outside (end_session=1), then holds F_DUR[I] ms and writes, never told.
# It waits for the lock up to se_wait_ms (the long holder may be inside).
# Its answer is kept in session-end-fI.json (and its HTTP code in
# session-end-fI.code), and its line, in the loads' form, in
# told-session-end-fI, which the checker judges with theirs. What it
# reached is read from them after the run (session_end_coverage).
se_wait_ms=4000
strike_session_end() {
    local i=$1 node=${F_TGT[$1]} hold=${F_DUR[$1]}
    (
        ans=$run/session-end-f$i lp=
        trap '[ -n "$lp" ] && kill -TERM "$lp" 2>/dev/null; exit 0' TERM
        printf 'Authorization: Bearer %s\n' "$token" | ns_cli curl -s -H @- \
            --max-time $(( (se_wait_ms + hold) / 1000 + 4 )) -w '\n%{http_code}' \
            "http://$(net_ip "$node"):3786/inventory/sale/$run_strategy?hold_ms=$hold&wait_ms=$se_wait_ms&end_session=1" \
            >"$ans.body" &
        lp=$!
        wait "$lp"
        body=$(cat "$ans.body")
        code=${body##*$'\n'}
        body=${body%$'\n'*}
        printf '%s\n' "$body" >"$ans.json"
        echo "${code:-0}" >"$ans.code"
        rm -f "$ans.body"
        jq -r --arg t "$(now_us)" --arg c "${code:-0}" \
            '"\($t) \($c) \(.status // "error") \(.order // "-") \(.unit // 0)"' <<<"$body" 2>/dev/null \
            >"$run/told-session-end-f$i" || echo "$(now_us) ${code:-0} error - 0" >"$run/told-session-end-f$i"
        flog "answer f$i session-end $node: HTTP ${code:-0} $(jq -c '{status, order, unit, session_ended,
            session_end_us, session_gone_us, session_error}' <<<"$body" 2>/dev/null || echo "(no JSON)")"
    ) &
    bg_jobs+=($!)
}

strike() {
    local i=$1 n=${F_NEM[$1]} tgt=${F_TGT[$1]} dur=${F_DUR[$1]} arg=${F_ARG[$1]} x y h aim_ms=250
    strike_skipped "$i" && return
    # a store lock's holder stopped: a long hold (store_aim_ms), which a
    # stop then freezes inside, where a load's 10 ms hold may have left
    # between the look and the stop
    [ -n "$run_store" ] && case $n:$tgt in pause:[ab]) aim_ms=$store_aim_ms ;; esac
    case $n:$tgt in
        partition:*\|zk | partition:*\|db) aim_young "${tgt%%|*}" ;;
        pause:[ab]) [ "$aim_ms" = "$store_aim_ms" ] && aim_long $(( $(now_us) + aim_ms * 1000 )) "$tgt" || aim "$tgt" ;;
        slow:r) [ -n "$run_store" ] && aim_new || aim ;;
        partition:* | loss:*) aim "${tgt%%|*}" ;;
        pause:[ab] | kill:[ab]) aim "$tgt" ;;
        mixed:m*) aim_long ;;
        # the reset lands before the stalls (from 10% of the run), which it
        # must neither hold up nor meet: it waits for a long hold until then
        reset:*) aim_long $((t0_us + (T / 10 - 150) * 1000)) ;;
        pause:r | kill:r | pause:zk | kill:zk | pause:db | kill:db | slow:r | mixed:* | failover:lag | failover:split | store-failover:*) aim ;;
    esac
    local at=$(( ($(now_us) - t0_us) / 1000 ))   # when the strike began
    # what is left of the fault's time once the aim has waited: a fault
    # that ends by itself (CLIENT PAUSE, DEBUG SLEEP) ends when scheduled
    local left=$(( F_AT[i] + dur - at ))
    [ "$left" -ge 100 ] || left=100
    # a store lock's slow Redis lasts its least once its aim is done
    if [ -n "$run_store" ] && [ "$n" = slow ]; then
        x=$(store_stretch_ms "$run_store" "$run_ttl" slow r)
        [ "$left" -ge "$x" ] || left=$x
    fi
    case $n in
        partition)
            read -r x y <<<"$(ends "$tgt")"
            for y in ${y//+/ }; do net_cut "f$i" "$x" "$y"; done
            # cut from a lock store: covered at mid, if a holder is still
            # inside once the session has expired (its window)
            case $tgt in *\|zk | *\|db) ;; *)
                h=$(holders "$item" "$x")
                [ "$h" -gt 0 ] && cover partition_while_held "f$i" "$x cut from ${tgt#*|} with $h holder(s) of $x inside" ;;
            esac ;;
        loss)
            read -r x y <<<"$(ends "$tgt")"
            net_loss "f$i" "$x" "$y" "$arg" ;;
        pause | kill) strike_stop "$i" "$left" ;;
        failover) strike_failover "$i" ;;
        redlock-restart)
            h=$(lock_on "$tgt" "$item")
            kill_node "$tgt"
            [ "$h" = 1 ] && cover holder_inside "f$i" "$tgt killed holding the lock" ;;
        drift) ;;   # A was started under libfaketime
        slow)
            ns_cli redis-cli -h "$(net_ip "$tgt")" -p 6379 DEBUG SLEEP "$(awk -v d="$left" 'BEGIN { printf "%.3f", d / 1000 }')" \
                >/dev/null 2>&1 &
            bg_jobs+=($!) ;;
        mixed)
            h=$aimed
            if [ "$arg" = pause ]; then
                rc_at "$tgt" CLIENT PAUSE "$left" ALL >/dev/null
            else
                kill -STOP "${PID[$tgt]}" 2>/dev/null
            fi
            [ "$tgt" = r ] || h=$(holders "$item")
            [ "$h" -gt 0 ] && cover stall_while_held "f$i" "$tgt stalled ($arg) with $h holder(s) of $item inside" ;;
        reset) strike_reset "$i" ;;
        store-failover) strike_store_failover "$i" ;;
        session-end) strike_session_end "$i" ;;
    esac
    F_STRUCK[$i]=$(( t0_us + at * 1000 ))
    F_LEFT[$i]=$left
    echo "$at strike f$i $n $tgt${arg:+ $arg}" >>"$run/faults.log"
}

mid() {
    local i=$1 n=${F_NEM[$1]} a b
    case $n in
        store-failover)
            [ "${F_SKIP[$i]:-0}" = 1 ] && return 0
            # ZooKeeper's followers elect another leader (about a second
            # after the kill; looked for until 2 s more have passed)
            b=$(( $(now_us) + 2000000 ))
            a=$(zk_leader)
            while [ -z "$a" ] && [ "$(now_us)" -lt "$b" ]; do sleep 0.1; a=$(zk_leader); done
            if [ -n "$a" ]; then store_back "$i" "member $((a + 1)) leads"
            else flog "mid f$i store-failover zk: no member leads, 2 s after the mid began"; fi ;;
        partition)
            # a cut from a lock store, run_window after it struck (waited
            # for here: its aim may have struck up to store_cut_aim_ms late)
            # and still on: the session has expired, the store has freed
            # the lock; a holder of the cut instance still inside will
            # write after the next holder got it
            a=$(( F_STRUCK[i] + run_window * 1000 - $(now_us) ))
            [ "$a" -gt 0 ] && sleep "$(awk -v w="$a" 'BEGIN { printf "%.3f", w / 1000000 }')"
            a=${F_TGT[$i]%%|*}
            b=$(holders "$item" "$a")
            flog "mid f$i partition ${F_TGT[$i]}: $b holder(s) of $a inside, the session expired"
            [ "$b" -gt 0 ] && cover partition_while_held "f$i" "$a cut from ${F_TGT[$i]#*|} past the session ($run_window ms) with $b holder(s) of $a still inside" ;;
        failover)
            a=$(probe_at r INFO replication | tr -d '\r' | sed -n 's/^master_repl_offset://p')
            b=$(probe_at rr INFO replication | tr -d '\r' | sed -n 's/^slave_repl_offset://p')
            F_LEDGER[$i]=$(probe_at rr LLEN "$item:sold")
            rc_at sen SENTINEL FAILOVER mymaster >/dev/null
            flog "mid f$i failover (${F_TGT[$i]}): master offset ${a:-?}, replica offset ${b:-?}"
            if [ -n "$a" ] && [ -n "$b" ] && [ "$a" -gt "$b" ]; then
                cover failover_before_replication "f$i" "promoted the replica at offset $b of the master's $a"
            fi ;;
        drift)
            a=$(holders "$item" a)
            flog "mid f$i drift: $a holder(s) of A inside"
            [ "$a" -gt 0 ] && cover holder_inside "f$i" "A (clock x${F_ARG[$i]}) had $a holder(s) inside" ;;
    esac
}

heal() {
    local i=$1 n=${F_NEM[$1]} tgt=${F_TGT[$1]} at
    at=$(( ($(now_us) - t0_us) / 1000 ))   # when the heal began
    if [ "${F_SKIP[$i]:-0}" = 1 ]; then
        echo "$at heal f$i $n $tgt skipped" >>"$run/faults.log"
        return
    fi
    if [ "$tgt" = zk ] && [ "$run_ensemble" = 1 ]; then
        heal_member "$i"
        echo "$at heal f$i $n $tgt (member $((F_HIT[i] + 1)))" >>"$run/faults.log"
        return
    fi
    case $n in
        store-failover)
            start_store db
            store_back "$i" "MariaDB answering again" ;;
        partition | loss | failover)
            if [ "$n" = failover ] && [ "$tgt" = split ]; then
                # the old master's sales since the promotion: lost at the heal
                local old new
                old=$(probe_at r LLEN "$item:sold")
                new=${F_LEDGER[$i]:-}
                if [ -n "$old" ] && [ -n "$new" ] && [ "$old" -gt "$new" ]; then
                    cover failover_before_replication "f$i" "split brain: the old master holds $old sales, the replica had $new when promoted"
                fi
            fi
            net_heal "f$i"
            case $tgt in m*) start_redis_in "$tgt" ;; esac
            echo "$at heal f$i $n $tgt (dropped $net_dropped packets)" >>"$run/faults.log"
            return ;;
        pause | mixed)
            [ "$n" = mixed ] && [ "${F_ARG[$i]}" = pause ] && { echo "$at heal f$i $n $tgt" >>"$run/faults.log"; return; }
            [ -n "${PID[$tgt]:-}" ] && kill -CONT "${PID[$tgt]}" 2>/dev/null ;;
        kill | redlock-restart)
            case $tgt in
                a | b) start_inst "$tgt" ;;
                r)
                    start_redis_in r
                    since=$(now_us)
                    # the stock again, in Redis itself (a reset would free a held lock)
                    rc_at "$(data_master)" MSET "$item" "$stock" "$item:initial" "$stock" >/dev/null ;;
                m*) start_redis_in "$tgt" ;;
                zk | db) start_store "$tgt" ;;
            esac ;;
    esac
    echo "$at heal f$i $n $tgt" >>"$run/faults.log"
}

# heal_member I: the ensemble's member that fault I struck (F_HIT[I])
# continued (pause) or started again on its data (kill, store-failover).
# (A cut of the zk node, a|zk, cuts all three, and heals as any cut.)
heal_member() {
    local i=$1 m=${F_HIT[$1]:-}
    case ${F_NEM[$i]} in
        pause) kill -CONT "${zk_ens_pids[$m]}" 2>/dev/null; F_STOPPED[$m]=0 ;;
        *) zk_member_start "$m" "$run/logs/zookeeper-zk-$((m + 1)).log" ip netns exec "$(net_ns zk)" ;;
    esac
}

# ---- one run ---------------------------------------------------------------------------------
# run_one STRATEGY MIX SEED DIR: the run, with the F_ arrays already set;
# sets R_VERDICT R_COVERED R_TWICE R_FINDINGS R_NOTE. It goes in steps, in
# this order, each a function below: run_begin (the run's directory and
# state), run_servers, run_items, run_loads (the loads and the long holder),
# run_schedule (the faults), run_coverage, run_judge (the checkers) and
# run_verdict (the servers stopped, the R_* verdict).
#
# What a step leaves for a later one is in these globals, every one set
# afresh by run_begin, so that nothing of a run reaches the next:
#   run_strategy, run_mix, run_seed: the run's cell and seed; run_family:
#       the strategy's family (single or redlock); run_store: the node of
#       its lock store (zk, db) when the lock is not in Redis; run_ttl: the
#       run's TTL (ttl_of the mix); run_window: how long a stop or a cut
#       must last to outlive its session there (session_window_ms);
#       run_ensemble: 1 when the ZooKeeper is an ensemble of three (the mix
#       fails the store over), whose members' pids are lib.sh's zk_ens_pids
#   run_sentinel: 1 when the data Redis runs with a replica and a Sentinel
#       (the mix fails over); run_mixed: 1 in the mixed workload;
#       run_masters: 1 when the three Redlock masters run (Redlock's family,
#       or the mixed workload's Redlock companion)
#   run_up_at: $SECONDS when the servers were up (the masters' vote wait)
#   run_companions: the mixed workload's companions, family:hold_ms:instances;
#       run_shared: the shared key's sellers, family:hold_ms:instance
#   run_load_pids: the pids of the loads and of the long holder
#   run_shared_cov: handoff sales on the shared key written while a fenced
#       hold was inside past its lease (run_coverage, for run_judge)
#   run_judge_node: the data Redis the checkers read (the master at the end)
#   run_rc, run_rc_shared: the checker's exit status on the cell's item and
#       on the shared key
# and those the nemeses and heals share with the steps: run (the run's
# directory), since (the judged history's start: a restart of Redis moves
# it), reset_at, reset_lost, reset_f (the mixed workload's reset),
# drift_rate (A's clock), t0_us (the load's start) and inst_args.

# run_begin STRATEGY MIX SEED DIR: an empty run directory with the schedule,
# and the run's state set afresh.
run_begin() {
    local i
    run_strategy=$1 run_mix=$2 run_seed=$3 run=$4
    run_family=$(family_of "$run_strategy")
    run_store=$(store_of "$run_strategy")
    run_ttl=$(ttl_of "$run_mix")
    run_window=$(session_window_ms "$run_store" "$run_ttl")
    run_ensemble=0
    [ "$run_store" = zk ] && case "+$run_mix+" in *+store-failover+*) run_ensemble=1 ;; esac
    F_HIT=() F_INSIDE=() F_DOWN=() F_STOPPED=() F_STRUCK=() F_LEFT=()
    rm -rf "$run"
    mkdir -p "$run/logs"
    write_schedule "$run_seed" "$run_strategy" "$run_mix" >"$run/schedule.json"
    : >"$run/faults.log"; : >"$run/coverage.tsv"
    since=0
    reset_at=0
    reset_lost=0
    reset_f=
    drift_rate=
    t0_us=0
    inst_args=()
    for ((i = 0; i < ${#F_AT[@]}; i++)); do [ "${F_NEM[$i]}" = drift ] && drift_rate=${F_ARG[$i]}; done
    run_sentinel=0 run_masters=0 run_mixed=0
    sentinel_topology "$run_mix" "$run_family" && run_sentinel=1
    case "+$run_mix+" in *+mixed+*) run_mixed=1 ;; esac
    [ "$run_family" = redlock ] || [ "$run_mixed" = 1 ] && run_masters=1
    run_up_at=0
    run_companions=() run_shared=() run_load_pids=()
    run_shared_cov=0 run_judge_node='' run_rc='' run_rc_shared=0
}

# run_servers: the servers, the firewall rules of an earlier run gone: the
# data Redis (and its replica and Sentinel), the Redlock masters, the lock
# store (ZooKeeper or MariaDB, for the strategies whose lock is there), A
# and B.
run_servers() {
    local n node_timeout=50
    for n in "${net_nodes[@]}"; do
        [ "$n" = hub ] && continue
        ip netns exec "$(net_ns "$n")" nft flush table inet nem 2>/dev/null
    done
    start_redis_in r
    if [ "$run_sentinel" = 1 ]; then
        start_redis_in rr --replicaof "$(net_ip r)" 6379
        start_sentinel
    fi
    [ "$run_masters" = 1 ] && for n in m0 m1 m2; do start_redis_in "$n"; done
    if [ "$run_ensemble" = 1 ]; then start_zk_ensemble_in zk
    elif [ -n "$run_store" ]; then start_store "$run_store"; fi
    run_up_at=$SECONDS
    # the mixed workload's Redlock companion waits long on a stalled master,
    # so that its stall can meet the cell's holds (issue 20's recipe)
    [ "$run_mixed" = 1 ] && [ "$run_family" = single ] && node_timeout=1500
    inst_args=(--set lock.ttl-ms="$run_ttl" --set lock.wait-ms=2000 --set lock.scope=item
               --set faults.enabled=true --set faults.max-hold-ms=5000 --set redis.timeout=500
               --set redlock.node-timeout-ms="$node_timeout" --set history.enabled=true
               --set history.max-events=1000000
               --set redlock.nodes="$(net_ip m0):6379,$(net_ip m1):6379,$(net_ip m2):6379")
    if [ "$run_sentinel" = 1 ]; then
        inst_args+=(--set redis.sentinel.nodes="$(net_ip sen):26379" --set redis.sentinel.master=mymaster)
    else
        inst_args+=(--set redis.host="$(net_ip r)" --set redis.port=6379)
    fi
    case $run_store in
        zk) local connect
            connect="$(net_ip zk):2181"
            [ "$run_ensemble" = 1 ] && connect=$zk_ens_connect
            inst_args+=(--set zookeeper.connect="$connect" --set zookeeper.session-timeout-ms="$run_ttl") ;;
        db) inst_args+=(--set mysql.host="$(net_ip db)" --set mysql.port=3306) ;;
    esac
    start_inst a
    start_inst b
}

# run_items: the items reset to the stock; sets run_companions and run_shared.
run_items() {
    local c
    # the items: the cell's, and in the mixed workload its companions
    # (family:hold_ms:instances). Redlock's runs on A alone, one 5 s hold
    # after another: issue 20's recipe, where a Redlock renewal stalled on a
    # paused master held up the round in which A's other locks were renewed.
    # A hold that outlasts the stall is what found it: against the build
    # before the fix, 3 of 10 seeds sold a unit twice with 5 s holds, none
    # with 2.5 s holds (docs/campaign.md)
    if [ "$run_mixed" = 1 ]; then
        if [ "$run_family" = redlock ]; then run_companions=(redisson:700:ab watchdog:5000:a fenced:150:ab)
        else
            run_companions=(redlock:5000:a)
            [ "$run_strategy" = redisson ] && run_companions+=(watchdog:700:ab) || run_companions+=(redisson:700:ab)
            [ "$run_strategy" = fenced ] && run_companions+=(owner-lua:150:ab) || run_companions+=(fenced:150:ab)
        fi
    fi
    # and the shared key (family:hold_ms:instance): one item, mix-shared,
    # sold by fenced on A, each hold 1.3 s (past the TTL: no renewal, so its
    # lease runs out inside every hold), and by handoff on B, which takes
    # the expired key without bumping the fence (issue 34's recipe). Judged
    # on its own, and its verdict is the seed's too.
    [ "$run_mixed" = 1 ] && run_shared=(fenced:1300:a handoff:10:b)
    admin a POST /inventory/reset "{\"stock\":$stock,\"item\":\"$item\"}" >"$run/reset.json"
    for c in "${run_companions[@]}"; do
        admin a POST /inventory/reset "{\"stock\":$stock,\"item\":\"mix-${c%%:*}\"}" >/dev/null
    done
    [ ${#run_shared[@]} -gt 0 ] && admin a POST /inventory/reset "{\"stock\":$stock,\"item\":\"mix-shared\"}" >/dev/null
}

# lstart NAME NODE PATH CLIENTS [TIMEOUT_MS: 4000] [MAX_S: the run's]: a
# load from the client on NODE's instance, its answers recorded in
# told-NAME; its pid joins run_load_pids.
lstart() {
    INVENTORY_LOAD_TOKEN=$token ip netns exec "$(net_ns cli)" "$load" --host "$(net_ip "$2")" --port 3786 \
        --path "$3" --clients "$4" --requests 100000 --max-s "${6:-$time_s}" --timeout-ms "${5:-4000}" \
        --error-pause-ms 20 --record "$run/told-$1" --format kv >"$run/load-$1.kv" 2>"$run/load-$1.log" &
    run_load_pids+=($!)
    pids+=($!)
}

# long_start X HOLD_MS GAP_S [QUERY]: a long holder on instance X, from
# t0_us for the run's time: sales of hold_ms HOLD_MS (and QUERY, "&k=v...")
# one after another, GAP_S apart, its answers recorded as the loads'
# (told-X-long).
long_start() {
    local x=$1 hold=$2 gap=$3 q=${4:-}
    (
        lp=
        trap '[ -n "$lp" ] && kill -TERM "$lp" 2>/dev/null; exit 0' TERM
        end=$((t0_us + T * 1000))
        while [ "$(now_us)" -lt "$end" ]; do
            printf 'Authorization: Bearer %s\n' "$token" | ns_cli curl -s -H @- --max-time 8 \
                -w '\n%{http_code}' "http://$(net_ip "$x"):3786/inventory/sale/$run_strategy?hold_ms=$hold$q" >"$run/long-$x.body" &
            lp=$!
            wait "$lp"
            body=$(cat "$run/long-$x.body")
            code=${body##*$'\n'}
            body=${body%$'\n'*}
            jq -r --arg t "$(now_us)" --arg c "${code:-0}" \
                '"\($t) \($c) \(.status // "error") \(.order // "-") \(.unit // 0)"' <<<"$body" 2>/dev/null ||
                echo "$(now_us) ${code:-0} error - 0"
            sleep "$gap" &
            lp=$!
            wait "$lp"
        done >"$run/told-$x-long"
    ) &
    run_load_pids+=($!)
    pids+=($!)
}

# run_loads: the loads, the long holders, the companions' and the shared
# key's, all started at t0_us; sets run_load_pids.
run_loads() {
    local x c cf ch cw long_on=(a) long_q=
    # a Redlock master votes once up for a TTL
    if [ "$run_masters" = 1 ]; then
        while [ $((SECONDS - run_up_at)) -lt 2 ]; do sleep 0.1; done
    fi
    # the loads
    t0_us=$(now_us)
    # the long holder: A sells with hold_ms 600 (past TTL/3: renewed, if
    # the strategy renews) every 2 s, its answers recorded as the loads';
    # in the mixed workload one after another (0.1 s apart), so that another
    # family's stall meets a renewing hold
    local long_gap=2 long_hold=600
    [ "$run_mixed" = 1 ] && long_gap=0.1
    # The store locks: a stop of A or B (pause) and a slow Redis need holds
    # of both instances to meet, not long ones (a frozen holder stays
    # inside), so their holds stay 600 ms, 1 s apart, on A and on B. The
    # session is kept while its holder runs (ZooKeeper's by the client's
    # heartbeats, MariaDB's by the watchdog's looks), as a watchdog renews:
    # where the mix cuts, the long holds outlast the session (the TTL) by
    # 1.5 s, so that a cut that begins with one can outlive the session
    # while the holder is still inside, on A and on B, queued behind each
    # other (wait_ms 4 s), one after another. A store's
    # failover (a leader's election, MariaDB's restart) must fall inside a
    # hold, which its lease (6 s from the acquire's send) outlasts: 3.5 s
    # holds, one after another (0.1 s apart), on A.
    if [ -n "$run_store" ]; then
        case "+$run_mix+" in
            *+store-failover+*) long_hold=$store_hold long_gap=0.1 ;;
            *+partition+*)
                long_on=(a b) long_gap=1
                long_hold=$((run_ttl + 1500)) long_gap=0 long_q='&wait_ms=4000' ;;
            *+pause+* | *+slow+*) long_on=(a b) long_gap=1 ;;
            *) long_hold=$((run_ttl + 1500)) long_gap=0.5 ;;
        esac
    fi
    for x in "${long_on[@]}"; do long_start "$x" "$long_hold" "$long_gap" "$long_q"; done
    for x in a b; do
        lstart "$x" "$x" "/inventory/sale/$run_strategy?hold_ms=10" 4
        for c in "${run_companions[@]}"; do
            cf=${c%%:*} ch=${c#*:}
            cw=${ch#*:}
            ch=${ch%%:*}
            case $cw in *"$x"*) ;; *) continue ;; esac
            # a long hold answers after its hold, an acquire that waited
            # lock.wait-ms, and two rounds held up by a stalled master
            lstart "mix-$cf-$x" "$x" "/inventory/sale/$cf?item=mix-$cf&hold_ms=$ch" 1 $((ch + 6000))
        done
    done
    for c in "${run_shared[@]}"; do
        IFS=: read -r cf ch x <<<"$c"
        lstart "shared-$cf-$x" "$x" "/inventory/sale/$cf?item=mix-shared&hold_ms=$ch" 1 $((ch + 6000))
    done
}

# run_schedule: the schedule played, each strike, mid and heal at its time
# from t0_us; then the loads and the faults' background jobs waited for.
run_schedule() {
    local ev=() t k i x wait_ms
    F_SKIP=()
    for ((i = 0; i < ${#F_AT[@]}; i++)); do
        ev+=("$(printf '%08d 1 strike %d' "${F_AT[$i]}" "$i")")
        case ${F_NEM[$i]} in
            failover) case ${F_TGT[$i]} in lag | split) ev+=("$(printf '%08d 2 mid %d' $((F_AT[i] + 300)) "$i")") ;; esac ;;
            drift) ev+=("$(printf '%08d 2 mid %d' $((T / 2)) "$i")") ;;
            store-failover) [ "${F_TGT[$i]}" = zk ] && ev+=("$(printf '%08d 2 mid %d' $((F_AT[i] + 600)) "$i")") ;;
            partition)
                # its session's window from the strike (mid waits for the
                # rest: the aim may strike up to store_cut_aim_ms late)
                x=$((F_AT[i] + run_window))
                case ${F_TGT[$i]} in *\|zk | *\|db)
                    [ "$x" -lt $((F_AT[i] + F_DUR[i])) ] && ev+=("$(printf '%08d 2 mid %d' "$x" "$i")") ;;
                esac ;;
        esac
        case ${F_NEM[$i]} in drift | slow | reset | session-end) ;; *) ev+=("$(printf '%08d 0 heal %d' $((F_AT[i] + F_DUR[i])) "$i")") ;; esac
    done
    while read -r t _ k i; do
        [ -n "$t" ] || continue
        t=$((10#$t))
        wait_ms=$(( t - ($(now_us) - t0_us) / 1000 ))
        [ "$wait_ms" -gt 0 ] && sleep "$(awk -v w="$wait_ms" 'BEGIN { printf "%.3f", w / 1000 }')"
        "$k" "$i"
    done < <(printf '%s\n' "${ev[@]}" | sort)
    for x in "${run_load_pids[@]}"; do wait "$x" 2>/dev/null; forget_pid "$x"; done
    for x in "${bg_jobs[@]}"; do wait "$x" 2>/dev/null; done
    bg_jobs=()
}

# run_coverage: what the faults reached that only the run's answers, its
# metrics and its history tell, into coverage.tsv; sets run_shared_cov.
run_coverage() {
    local i x c lo hi lost from votes held
    # replies lost: answers with no reply from Redis (503) or none at all,
    # during a fault that can lose one (from when it really struck, its aim
    # done, to the later of its scheduled end and what it had left then, and
    # a second more), and Redlock votes lost
    for ((i = 0; i < ${#F_AT[@]}; i++)); do
        case ${F_NEM[$i]} in slow | loss | partition | failover) ;; *) continue ;; esac
        lo=${F_STRUCK[$i]:-$((t0_us + F_AT[i] * 1000))} hi=$((t0_us + (F_AT[i] + F_DUR[i]) * 1000))
        x=$((lo + ${F_LEFT[$i]:-0} * 1000))
        [ "$x" -le "$hi" ] || hi=$x
        hi=$((hi + 1000000))
        from=("$run"/told-a "$run"/told-b "$run"/told-a-long "$run"/told-b-long)
        case ${F_TGT[$i]} in a\|*) from=("$run"/told-a "$run"/told-a-long) ;; b\|*) from=("$run"/told-b "$run"/told-b-long) ;; esac
        # an instance that answers 503 lost a reply from Redis (or its connection)
        lost=$(cat "${from[@]}" 2>/dev/null |
            awk -v lo="$lo" -v hi="$hi" '$1 >= lo && $1 <= hi && $3 == "backend_unavailable" { n++ } END { print n + 0 }')
        [ "$lost" -gt 0 ] && cover reply_lost "f$i" "$lost answers lost their reply during ${F_NEM[$i]} ${F_TGT[$i]}"
    done
    if [ "$run_family" = redlock ]; then
        votes=0
        for x in a b; do
            c=$(ns_cli curl -s --max-time 5 "http://$(net_ip "$x"):3786/metrics" |
                awk '/^inventoryd_redlock_votes_total/ && /outcome="error"/ { n += $NF } END { print n + 0 }')
            votes=$((votes + ${c:-0}))
        done
        [ "$votes" -gt 0 ] && cover reply_lost metrics "$votes Redlock votes got no reply"
    fi
    # the reset's window: a hold that read the stock of before the reset (at
    # or below the old stock) whose event is in the history the reset began
    # (its write or refusal reached Redis after it): it spanned the reset
    if [ "$reset_at" -gt 0 ]; then
        reset_at=$(awk -v k="\"$item:initial\"" '$0 ~ /"SET"/ && index($0, k) { printf "%.0f", $1 * 1000000; exit }' \
            "$run/reset-monitor.txt" 2>/dev/null)
        [ -n "$reset_at" ] || { reset_at=0; reset_lost=1; }
        held=$(ns_cli curl -s --max-time 5 "http://$(net_ip a):3786/inventory/history?item=$item&limit=5000" |
            jq -r --argjson old "$stock" '.events[]? | select(.stock_read > 0 and .stock_read <= $old) |
                "\(.instance) \(.owner) read \(.stock_read), \(.outcome)"' 2>/dev/null | head -n 1)
        [ -n "$held" ] && cover reset_inside "f$reset_f" "a hold spanned the reset: $held"
    fi
    # the shared key's window: a handoff sale written while a fenced hold was
    # inside with its lease run out (after its lease, before its write)
    if [ ${#run_shared[@]} -gt 0 ]; then
        run_shared_cov=$(ns_cli curl -s --max-time 5 "http://$(net_ip a):3786/inventory/history?item=mix-shared&limit=5000" |
            jq '[.events[]?] as $e | [$e[] | select(.strategy == "fenced" and .lease_us > 0)] as $f |
                [$e[] | select(.strategy == "handoff" and .outcome == "sold") as $h | $f[] |
                 select($h.written_us > .lease_us and $h.written_us < (.written_us // .released_us))] | length' 2>/dev/null)
        [[ $run_shared_cov =~ ^[0-9]+$ ]] || run_shared_cov=0
    fi
    session_end_coverage
}

# session_end_coverage: what each session-end fault reached, from its
# answer and the item's history: session_ended_while_held when the answer
# says the session ended (the sale was inside: it had read the stock), and
# granted_after_session_end when another hold of the item was granted after
# the session was seen gone and before the special sale's write or refusal
# applied (its event's written_us; its answer's time when it has none): the
# lock was freed under a holder that still writes. A special that never got
# inside, or whose session could not be ended, covers nothing. Its event
# is found by its order, or, when its answer has none (a refused write),
# as its instance's hold that was inside when the session end began.
session_end_coverage() {
    local i f gone began order told_at got n end sorder soutcome forder fgranted
    for ((i = 0; i < ${#F_AT[@]}; i++)); do
        [ "${F_NEM[$i]}" = session-end ] || continue
        f=$run/session-end-f$i.json
        [ "$(jq -r '.session_ended // false' "$f" 2>/dev/null)" = true ] || continue
        gone=$(jq -r '.session_gone_us // 0' "$f")
        began=$(jq -r '.session_end_us // 0' "$f")
        order=$(jq -r '.order // "-"' "$f")
        told_at=$(awk '{ print $1; exit }' "$run/told-session-end-f$i" 2>/dev/null)
        cover session_ended_while_held "f$i" "a sale of ${F_TGT[$i]} (order $order) inside: its session ended from outside at $began, seen gone at $gone"
        # the events XADDed from the ms before the session was gone: every
        # hold granted since, and the special's own
        ns_cli curl -s --max-time 5 "http://$(net_ip a):3786/inventory/history?item=$item&since=$((gone / 1000 - 1))-0&limit=5000" \
            >"$run/session-end-f$i-history.json"
        got=$(jq -r --arg o "$order" --arg inst "${ID[${F_TGT[$i]}]}" --argjson gone "$gone" \
            --argjson began "$began" --argjson told "${told_at:-0}" '
            [.events[]?] as $e
            | ([$e[] | select(if $o != "-" then .order == $o
                             else .instance == $inst and .granted_us <= $began and .released_us >= $began end)]
               | last) as $s
            | ($s.written_us // $told) as $stop
            | [$e[] | select(.order != $s.order and .granted_us > $gone and .granted_us < $stop)]
            | "\(length) \($stop) \($s.order // "-") \($s.outcome // "-") \(first | "\(.order // "-") \(.granted_us // 0)")"' \
            "$run/session-end-f$i-history.json" 2>/dev/null)
        read -r n end sorder soutcome forder fgranted <<<"${got:-0 0 - - - 0}"
        flog "coverage f$i session-end: ${F_TGT[$i]}'s order $sorder ($soutcome), its session gone at $gone, its write at $end; $n hold(s) granted between, the first $forder at $fgranted"
        [ "$n" -gt 0 ] &&
            cover granted_after_session_end "f$i" "$n hold(s) granted after the session of $sorder was gone ($gone) and before its write ($soutcome at $end), the first $forder at $fgranted"
    done
    return 0
}

# run_judge: the coverage written into the history, and the checkers run on
# the cell's item, the shared key and each companion's item; sets
# run_judge_node, run_rc, run_rc_shared and R_NOTE (the companions' verdicts).
run_judge() {
    local name src at detail told=() se=() f skew=() reset=() stold=() ctold=() c cf ch x
    # judge: the coverage into the history of the Redis the checker reads
    run_judge_node=$(data_master)
    [ "$run_shared_cov" -gt 0 ] && rc_at "$run_judge_node" XADD mix-shared:history '*' outcome coverage \
        event shared_key_sold source shared at_us "$(now_us)" \
        detail "$run_shared_cov handoff sale(s) written while a fenced hold was inside past its lease" >/dev/null
    while IFS=$'\t' read -r name src at detail; do
        rc_at "$run_judge_node" XADD "$item:history" '*' outcome coverage event "$name" source "$src" \
            at_us "$at" detail "$detail" >/dev/null
    done <"$run/coverage.tsv"
    # After a reset the item is a new inventory of units above the old
    # stock: a sold answer of a unit at or below it is of the inventory the
    # reset replaced (its ledger entry went with it), and is not judged. A
    # write of such a unit that landed after the reset is still in the
    # ledger, where the stock it overwrote disagrees with it.
    mkdir -p "$run/judged"
    # and the session-end faults' special sales (told-session-end-fI)
    for f in "$run"/told-session-end-f*; do [ -f "$f" ] && se+=("${f#"$run"/told-}"); done
    for f in a b a-long b-long "${se[@]}"; do
        [ -f "$run/told-$f" ] || continue
        if [ "$reset_at" -gt 0 ]; then
            awk -v s="$stock" '!($3 == "sold" && $5 <= s)' "$run/told-$f" >"$run/judged/told-$f"
            told+=(--told "$run/judged/told-$f")
        else
            told+=(--told "$run/told-$f")
        fi
    done
    [ "$reset_at" -gt 0 ] && reset=(--reset-us "$reset_at")
    [ -n "$drift_rate" ] && skew=(--no-overlaps)
    ns_cli "$checker" --redis "$(net_ip "$run_judge_node"):6379" --item "$item" --since-us "$since" \
        --max-findings 20 --need "$(needs_of "$run_mix")" "${skew[@]}" "${reset[@]}" "${told[@]}" \
        >"$run/check.json" 2>"$run/check.log"
    run_rc=$?
    if [ ${#run_shared[@]} -gt 0 ]; then
        for c in "${run_shared[@]}"; do
            IFS=: read -r cf ch x <<<"$c"
            [ -f "$run/told-shared-$cf-$x" ] && stold+=(--told "$run/told-shared-$cf-$x")
        done
        ns_cli "$checker" --redis "$(net_ip "$run_judge_node"):6379" --item mix-shared --since-us "$since" \
            --max-findings 5 --need shared_key_sold,lease_expired_inside "${stold[@]}" \
            >"$run/check-shared.json" 2>>"$run/check.log"
        run_rc_shared=$?
    fi
    R_NOTE=""
    for c in "${run_companions[@]}"; do
        c=${c%%:*}
        ctold=()
        for f in "$run/told-mix-$c-a" "$run/told-mix-$c-b"; do [ -f "$f" ] && ctold+=(--told "$f"); done
        ns_cli "$checker" --redis "$(net_ip "$run_judge_node"):6379" --item "mix-$c" --since-us "$since" \
            --max-findings 5 "${ctold[@]}" >"$run/check-mix-$c.json" 2>>"$run/check.log"
        R_NOTE+=" $c:$(jq -r .verdict "$run/check-mix-$c.json" 2>/dev/null || echo error)"
    done
}

# verdict_of STATUS: the verdict an inventory-check exit status stands for.
verdict_of() { case $1 in 0) echo safe ;; 1) echo unsafe ;; 3) echo incomplete ;; 4) echo inconclusive ;; *) echo error ;; esac; }

# run_verdict: the end of the run: every server stopped, R_VERDICT
# R_COVERED R_TWICE R_FINDINGS set (R_NOTE completed), and run.json written.
run_verdict() {
    local n sv sf
    # the end of the run
    for n in a b sen rr r m0 m1 m2; do stop_node "$n"; done
    # the lock store's data is the run's alone: killed, and deleted
    for n in 0 1 2; do
        [ -n "${zk_ens_pids[$n]:-}" ] && zk_member_kill "$n"
    done
    for n in zk db; do
        [ -n "${PID[$n]:-}" ] && kill_node "$n"
        rm -rf "${work:?}/stores/$n"
    done
    rm -f "$work"/*.rdb
    R_VERDICT=$(verdict_of "$run_rc")
    R_COVERED=$(jq -r 'if .covered then 1 else 0 end' "$run/check.json" 2>/dev/null || echo 0)
    R_TWICE=$(jq -r '.counts.sold_twice // 0' "$run/check.json" 2>/dev/null || echo 0)
    R_FINDINGS=$(jq -r '[.counts | to_entries[] | select(.value > 0 and .key != "untold_sale") | "\(.key) \(.value)"] | join(", ")' \
        "$run/check.json" 2>/dev/null)
    # a reset whose time Redis did not tell cannot be judged around
    if [ "$reset_lost" = 1 ]; then
        R_VERDICT=error
        R_FINDINGS+="${R_FINDINGS:+, }the reset's time is not in reset-monitor.txt"
    fi
    # the shared key's verdict is the seed's too: unsafe if either is, and
    # safe (and covered) only if both are
    if [ ${#run_shared[@]} -gt 0 ]; then
        sv=$(verdict_of "$run_rc_shared")
        R_NOTE+=" shared:$sv"
        if [ "$sv" = unsafe ] || { [ "$R_VERDICT" = safe ] && [ "$sv" != safe ]; }; then
            [ "$R_VERDICT" = unsafe ] || R_VERDICT=$sv
        fi
        [ "$(jq -r '.covered' "$run/check-shared.json" 2>/dev/null)" = true ] || R_COVERED=0
        R_TWICE=$((R_TWICE + $(jq -r '.counts.sold_twice // 0' "$run/check-shared.json" 2>/dev/null || echo 0)))
        sf=$(jq -r '[.counts | to_entries[] | select(.value > 0 and .key != "untold_sale") | "shared \(.key) \(.value)"] | join(", ")' \
            "$run/check-shared.json" 2>/dev/null)
        [ -n "$sf" ] && R_FINDINGS+="${R_FINDINGS:+, }$sf"
    fi
    printf '{"prefix": "%s", "load_start_us": %s, "since_us": %s, "judged_on": "%s", "verdict": "%s", "companions": "%s"}\n' \
        "$net_prefix" "$t0_us" "$since" "$run_judge_node" "$R_VERDICT" "${R_NOTE# }" >"$run/run.json"
}

run_one() {
    run_begin "$@"
    run_servers
    run_items
    run_loads
    run_schedule
    run_coverage
    run_judge
    run_verdict
}

# ---- expectations --------------------------------------------------------------------------
# expect_of STRATEGY MIX: safe, flaw or either: the first line of the
# expected file whose strategy and mix match ("*" matches any).
expect_of() {
    [ -f "$expected" ] || { echo either; return; }
    awk -F'\t' -v s="$1" -v m="$2" '!/^#/ && NF >= 3 && ($1 == s || $1 == "*") && ($2 == m || $2 == "*") { print $3; f = 1; exit }
        END { if (!f) print "either" }' "$expected"
}

# progress LINE: one run's line.
progress() { log "$*"; }

# verdict_line STRATEGY MIX SEED: the run's progress line.
verdict_line() {
    local more=""
    [ -n "$R_FINDINGS" ] && more=" ($R_FINDINGS)"
    [ -n "${R_NOTE// /}" ] && more+=" [companions:$R_NOTE]"
    echo "$1 $2 seed $3: $(faults_summary) -> $R_VERDICT$more, covered $R_COVERED"
}

# ---- replay ---------------------------------------------------------------------------------
if [ -n "$replay_dir" ]; then
    [ -f "$replay_dir/schedule.json" ] || die "no $replay_dir/schedule.json"
    read_schedule "$replay_dir/schedule.json"
    out=${out_dir:-$replay_dir/replay}
    t_start=$SECONDS
    run_one "$S_STRATEGY" "$S_MIX" "$S_SEED" "$out"
    progress "replay of $(verdict_line "$S_STRATEGY" "$S_MIX" "$S_SEED") ($((SECONDS - t_start)) s, in $out)"
    exit 0
fi

# ---- shrink ---------------------------------------------------------------------------------
# set_faults LINE...: the F_ arrays from "at nemesis target dur arg" lines.
set_faults() {
    local l at n tgt dur arg
    F_AT=(); F_NEM=(); F_TGT=(); F_DUR=(); F_ARG=()
    for l in "$@"; do
        read -r at n tgt dur arg <<<"$l"
        F_AT+=("$at"); F_NEM+=("$n"); F_TGT+=("$tgt"); F_DUR+=("$dur"); F_ARG+=("$arg")
    done
}

if [ -n "$shrink_dir" ]; then
    [ -f "$shrink_dir/schedule.json" ] || die "no $shrink_dir/schedule.json"
    read_schedule "$shrink_dir/schedule.json"
    sdir=${out_dir:-$shrink_dir/shrunk}
    rm -rf "$sdir"; mkdir -p "$sdir"
    slog=$sdir/shrink.log
    : >"$slog"
    trials=0
    last_bad=
    # violates LINE...: true when a run of those faults is unsafe, in at
    # most $shrink_tries runs (a violation depends on timing).
    violates() {
        local k
        set_faults "$@"
        for ((k = 1; k <= shrink_tries; k++)); do
            trials=$((trials + 1))
            run_one "$S_STRATEGY" "$S_MIX" "$S_SEED" "$sdir/trial-$trials"
            echo "trial $trials: $(faults_summary) -> $R_VERDICT ${R_FINDINGS}" >>"$slog"
            progress "shrink trial $trials: $(faults_summary) -> $R_VERDICT${R_FINDINGS:+ ($R_FINDINGS)}"
            if [ "$R_VERDICT" = unsafe ]; then
                [ -n "$last_bad" ] && [ "$last_bad" != "$sdir/trial-$trials" ] && rm -rf "$last_bad"
                last_bad=$sdir/trial-$trials
                return 0
            fi
            rm -rf "$sdir/trial-$trials"
        done
        return 1
    }
    cur=()
    for ((i = 0; i < ${#F_AT[@]}; i++)); do
        cur+=("${F_AT[$i]} ${F_NEM[$i]} ${F_TGT[$i]} ${F_DUR[$i]} ${F_ARG[$i]}")
    done
    log "shrinking $S_STRATEGY $S_MIX seed $S_SEED: ${#cur[@]} faults, $shrink_tries runs per candidate"
    violates "${cur[@]}" || die "the schedule did not violate in $shrink_tries runs: nothing to shrink"
    if violates; then
        cur=()
    fi
    # ddmin: a chunk alone, then each complement, at finer grain
    gran=2
    while [ ${#cur[@]} -ge 2 ]; do
        len=${#cur[@]}
        size=$(( (len + gran - 1) / gran ))
        reduced=0
        for ((c = 0; c < len && reduced == 0; c += size)); do
            chunk=("${cur[@]:c:size}")
            if violates "${chunk[@]}"; then cur=("${chunk[@]}"); gran=2; reduced=1; fi
        done
        for ((c = 0; c < len && reduced == 0 && gran > 2; c += size)); do
            comp=("${cur[@]:0:c}" "${cur[@]:c+size}")
            if violates "${comp[@]}"; then cur=("${comp[@]}"); gran=$((gran > 2 ? gran - 1 : 2)); reduced=1; fi
        done
        if [ "$reduced" = 0 ]; then
            [ "$gran" -ge "$len" ] && break
            gran=$((gran * 2 > len ? len : gran * 2))
        fi
    done
    # then each fault shorter, by halves, while it still violates
    for ((i = 0; i < ${#cur[@]}; i++)); do
        while :; do
            read -r at n tgt dur arg <<<"${cur[$i]}"
            [ "$n" = drift ] && break
            [ "$dur" -gt 200 ] || break
            try=("${cur[@]}")
            try[$i]="$at $n $tgt $((dur / 2)) $arg"
            violates "${try[@]}" && cur=("${try[@]}") || break
        done
    done
    set_faults "${cur[@]}"
    write_schedule "$S_SEED" "$S_STRATEGY" "$S_MIX" >"$sdir/schedule.json"
    cp "$last_bad/check.json" "$sdir/check.json"
    jq '.counterexample' "$last_bad/check.json" >"$sdir/counterexample.json"
    echo "$(faults_summary)" >"$sdir/faults.txt"
    # for the lab's Campaigns view: the counterexample with its cell and schedule
    mkdir -p "$results"
    jq --arg s "$S_STRATEGY" --arg m "$S_MIX" --argjson seed "$S_SEED" --arg f "$(faults_summary)" \
        --arg dir "$sdir" --argjson runs "$trials" --slurpfile sch "$sdir/schedule.json" \
        '{strategy: $s, mix: $m, seed: $seed, faults: $f, dir: $dir, shrink_runs: $runs,
          schedule: $sch[0]} + (.counterexample // {})' "$last_bad/check.json" \
        >"$results/campaign-counterexample.json"
    log "shrunk in $trials runs to: $(faults_summary)"
    log "counterexample ($sdir/counterexample.json): $(jq -r '.detail // "none"' "$sdir/counterexample.json")"
    jq -r '.events[]? | "  \(.instance) \(.owner) granted \(.granted_us) released \(.released_us) lease \(.lease_us) written \(.written_us) owned \(.owned) unit \(.unit) token \(.token) \(.outcome)"' \
        "$sdir/counterexample.json"
    exit 0
fi

# ---- the campaign -----------------------------------------------------------------------------
cdir=$results/campaign
mkdir -p "$cdir"
seeds_tsv=$cdir/seeds.tsv
if [ "$resume" = 0 ] || [ ! -s "$seeds_tsv" ]; then
    printf 'strategy\tmix\tseed\tverdict\tcovered\tsold_twice\tlease_expired_inside\tfaults\n' >"$seeds_tsv"
fi
# mix_applies S M: some nemesis of mix M can strike strategy S (store-failover
# and session-end need a lock store of S's own, redlock-restart the Redlock masters): a
# cell whose every seed would run without a fault is left out.
mix_applies() {
    local n
    for n in ${2//+/ }; do
        case $n in
            store-failover | session-end) [ -n "$(store_of "$1")" ] && return 0 ;;
            redlock-restart) [ "$1" = redlock ] && return 0 ;;
            *) return 0 ;;
        esac
    done
    return 1
}
for m in "${mixes[@]}"; do
    for s in "${strategies[@]}"; do
        mix_applies "$s" "$m" || log "leaving $s out of $m: no fault of that mix can strike it"
    done
done
# done_run S M SEED: true when seeds.tsv has that run (--resume)
done_run() { awk -F'\t' -v s="$1" -v m="$2" -v n="$3" '$1 == s && $2 == m && $3 == n { f = 1 } END { exit !f }' "$seeds_tsv"; }
total=0
for m in "${mixes[@]}"; do
    for s in "${strategies[@]}"; do mix_applies "$s" "$m" && total=$((total + nseeds)); done
done
log "$total runs: ${#strategies[@]} strategies (${strategies[*]}) x ${#mixes[@]} mixes (${mixes[*]}) x $nseeds seeds from $first_seed, $time_s s each"
t_start=$SECONDS
k=0
ran=0
for m in "${mixes[@]}"; do
    for s in "${strategies[@]}"; do
        mix_applies "$s" "$m" || continue
        [ "$resume" = 1 ] || rm -rf "${cdir:?}/$s/$m"
        for ((seed = first_seed; seed < first_seed + nseeds; seed++)); do
            k=$((k + 1))
            [ "$resume" = 1 ] && done_run "$s" "$m" "$seed" && continue
            ran=$((ran + 1))
            draw_schedule "$seed" "$m" "$(family_of "$s")" "$(store_of "$s")"
            run_one "$s" "$m" "$seed" "$cdir/$s/$m/seed-$seed"
            lei=$(jq -r 'if (.coverage.lease_expired_inside // 0) > 0 then 1 else 0 end' \
                "$run/check.json" 2>/dev/null || echo 0)
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$m" "$seed" "$R_VERDICT" "$R_COVERED" \
                "$R_TWICE" "$lei" "$(faults_summary)" >>"$seeds_tsv"
            progress "[$k/$total $((SECONDS - t_start)) s] $(verdict_line "$s" "$m" "$seed")"
        done
    done
done
elapsed=$((SECONDS - t_start))

# ---- the table, the CSV, the picture ------------------------------------------------------
csv=$results/campaign.csv
md=$results/campaign.md
echo "strategy,mix,seeds,violating_seeds,rate,ci_low,ci_high,covered_seeds,first_violating_seed,sold_twice_total" >"$csv"
findings=()
rows=()
dat=$work/campaign.dat
: >"$dat"
idx=0
for m in "${mixes[@]}"; do
    for s in "${strategies[@]}"; do
        read -r n bad cov first twice lei < <(awk -F'\t' -v s="$s" -v m="$m" '
            NR > 1 && $1 == s && $2 == m { n++; if ($4 == "unsafe") { b++; if (f == "") f = $3 }
                                           c += $5; t += $6; l += $7 }
            END { print n + 0, b + 0, c + 0, (f == "" ? "-" : f), t + 0, l + 0 }' "$seeds_tsv")
        [ "$n" -gt 0 ] || continue
        rate=$("$stats" -d 4 ratio "$bad" "$n")
        lo=$("$stats" -d 4 wilson-low "$bad" "$n")
        hi=$("$stats" -d 4 wilson-high "$bad" "$n")
        [ "$first" = - ] && first=""
        echo "$s,$m,$n,$bad,$rate,$lo,$hi,$cov,$first,$twice" >>"$csv"
        e=$(expect_of "$s" "$m")
        pct() { awk -v x="$1" 'BEGIN { printf "%.0f%%", 100 * x }'; }
        case $e in
            safe)
                if [ "$bad" -gt 0 ]; then
                    word="**VIOLATED**"
                    findings+=("$s under $m: expected safe, violated in $bad of $n seeds (first: seed $first; sold twice $twice): a defect, or a README claim to correct")
                elif [ "$cov" -lt "$min_covered" ]; then
                    word="inconclusive"
                    findings+=("$s under $m: expected safe, 0 violations, but its key state ($(needs_of "$m")) was reached in only $cov of $n seeds (at least $min_covered wanted)")
                else
                    word="safe"
                fi ;;
            flaw) [ "$bad" -gt 0 ] && word="flaw shown" || word="flaw not shown" ;;
            *) word="-" ;;
        esac
        rows+=("| $s | $m | $e | $bad / $n | $(pct "$rate") ($(pct "$lo")-$(pct "$hi")) | $cov | $lei | ${first:--} | $twice | $word |")
        case $e in safe) colour=0x4daf4a ;; flaw) colour=0xe41a1c ;; *) colour=0x999999 ;; esac
        echo "$idx $(awk -v r="$rate" -v l="$lo" -v h="$hi" 'BEGIN { print 100 * r, 100 * l, 100 * h }') $((colour)) \"$s / $m\"" >>"$dat"
        idx=$((idx + 1))
    done
done
{
    echo "# Fault campaign"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%MZ): ${#strategies[@]} strategies x ${#mixes[@]} mixes x $nseeds seeds"
    echo "(from seed $first_seed), $time_s s of load per run, TTL $ttl ms ($store_ttl ms in a mix with store-failover), two instances with 4 clients"
    echo "(hold_ms 10) each, and a long holder on A (hold_ms 600 every 2 s, 0.1 s apart in mixed; $store_hold 0.1 s apart with store-failover;"
    echo "the store locks: on A and B, 600 every 1 s, or TTL + 1500 one after another where ZooKeeper's mix cuts,"
    echo "their holders' stops and cuts stretched past the session: docs/campaign.md); $k runs ($ran of them in $elapsed s by this"
    echo "invocation, the others kept by --resume). A seed violates when"
    echo "inventory-check finds anything unsafe in it (a unit sold twice, overlapping holds, a write past"
    echo "its lease, a stale-token write, a lost sale, stock and ledger apart). Rate: violating seeds over"
    echo "seeds, with its Wilson 95% interval. Covered: seeds whose faults reached the mix's key state"
    echo "(the checker's --need); lease expired: seeds where a lease ran out while its holder was inside."
    echo "Expected (loadtest/campaign-expected.tsv): safe cells must show 0 violating seeds and at least"
    echo "$min_covered covered seeds."
    echo
    echo "| strategy | mix | expected | violating seeds | rate (95% CI) | covered | lease expired | first violating seed | sold twice | verdict |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    if [ ${#findings[@]} -gt 0 ]; then
        echo "Findings:"
        printf -- '- %s\n' "${findings[@]}"
    else
        echo "Findings: none: every cell expected safe showed 0 violating seeds and was covered."
    fi
    echo
    echo "Each run: campaign/<strategy>/<mix>/seed-<N>/ (schedule.json, check.json, faults.log, coverage.tsv);"
    echo "replay one with scripts/campaign.sh --replay DIR, shrink a violating one with --shrink DIR."
} >"$md"

ncells=$idx
width=$((ncells * 34 + 200))
[ "$width" -lt 900 ] && width=900
gnuplot <<EOF || log "gnuplot failed: no campaign.png"
set terminal pngcairo size $width,640 font "DejaVu Sans,10"
set output "$results/campaign.png"
set title "Fault campaign: violating seeds per cell, with Wilson 95% intervals\n(bar and dot below it: green expected safe, red known flaw, grey no claim)"
set ylabel "violating seeds (%)"
set yrange [-5:105]
set ytics 0, 20, 100
set xrange [-0.7:$ncells - 0.3]
set xtics rotate by -60 scale 0 font "DejaVu Sans,9"
set grid ytics
set style fill solid 0.8 border -1
set boxwidth 0.7
set bmargin 14
set rmargin 10
plot "$dat" using 1:2:(0.7):5:xtic(6) with boxes lc rgb variable notitle, \
     "$dat" using 1:2:3:4 with yerrorbars lc rgb "black" pt 0 lw 1.5 notitle, \
     "$dat" using 1:(-2.5):5 with points pt 7 ps 1.2 lc rgb variable notitle
EOF

echo
cat "$md"
log "$ran runs in $elapsed s ($k in the table); results in $results/campaign.md, campaign.csv, campaign.png"
if [ ${#findings[@]} -gt 0 ] && printf '%s\n' "${findings[@]}" | grep -q "violated in"; then
    log "FAIL: a strategy expected safe violated (see Findings)"
    exit 1
fi
exit 0
