# shellcheck shell=bash disable=SC2034,SC2120,SC2154
# (A sourced library: it sets variables for the script and reads the script's.)
# scripts/lib.sh -- helpers shared by the shipped scripts (demo.sh, matrix.sh,
# campaign.sh, loadtest/bench.sh) and the shell tests (tests/*.sh): stopping
# what was started by its pid, free ports, waiting for a server, the throwaway stack (redis-server, inventoryd instances,
# nginx), loads run so that a signal stops them, and inventory-stats, which
# computes every figure the scripts report. Sourced:
#   . "$root/scripts/lib.sh"   (from tests/: "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh")
# Sourcing only defines functions and the state below; nothing is started
# and no trap is set until a script calls setup_work (or set_traps).
#
# State the functions share with the script (set here, used or set there):
#   tag       the prefix of every message ("e2e", "compare", ...): set it
#   work      the scratch directory (setup_work); logs go there
#   pids      what cleanup stops, last started first
#   load_pid  a foreground job run in the background (cleanup stops it first)
#   load_rc   its exit status (wait_load, load_kv)
#   load_port where load_kv sends the load when set (nginx_port otherwise)
#   stats     inventory-stats (find_stats; take_binaries sets it), the
#             program behind every median, percentile, sum and ratio
#   fail_word fail_status  what fail says before its message ("FAIL: ") and
#             the status fail, die and a signal exit with (1)
#   rounds_pid rounds_rc  the load rounds (start_rounds, stop_rounds)
#   failed    1 once fail ran or a signal came: cleanup then keeps $work
#   kept      what cleanup says it kept ("logs" unless set)
#   root      the checkout
#   redis_port port1 port2 nginx_port  the stack's ports (pick_stack_ports)
#   redis_pid inst_pid nginx_pid       set by start_redis, start_instance, start_nginx
#   pid1 pid2  the instances on port1 and port2 (stop_stack_cleanly reads them)
#   inventoryd load clients requests stock base  read from the script
#   admin_token  the instances' admin.token, or empty: reset_stock sends it
# A script changes a behaviour by defining the function again after sourcing
# (on_fail, on_signal, cleanup), or by setting the variables above.

tag=${tag:-test}
root=${root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
pids=()
load_pid=
load_rc=
load_port=
stats=
fail_word="FAIL: "
fail_status=1
rounds_pid=
failed=0
kept=logs
picked=" "
stop_status=0
declare -A L

# log MESSAGE...: "$tag: MESSAGE" on stdout.
log() { echo "$tag: $*"; }

# now_ms: the wall clock in milliseconds, on stdout.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# rcli ARG...: redis-cli against the Redis on $redis_port, its stderr dropped.
rcli() { redis-cli -p "$redis_port" "$@" 2>/dev/null; }

# take_binaries ARG...: exactly INVENTORYD INVENTORY_LOAD, else the usage on
# stderr and exit 2; sets inventoryd and load to their real paths, and stats
# to the inventory-stats beside INVENTORY_LOAD (find_stats).
take_binaries() {
    if [ $# -ne 2 ]; then
        echo "usage: $0 INVENTORYD INVENTORY_LOAD" >&2
        exit 2
    fi
    inventoryd=$(realpath "$1")
    load=$(realpath "$2")
    find_stats "$(dirname "$load")/inventory-stats"
}

# find_stats PATH: sets stats to PATH's real path, inventory-stats
# (tools/statscli.c, built beside inventory-load); dies saying how to build
# it unless PATH is an executable.
find_stats() {
    [ -x "$1" ] || die "$1 is not an executable: build inventory-stats (cmake --build BUILD --target inventory-stats)"
    stats=$(realpath "$1")
}

# find_builds BUILD: dies unless BUILD holds inventoryd and its three tools;
# sets inventoryd, load, checker and stats to their real paths (a relative
# BUILD stays right once the script works in another directory).
find_builds() {
    local b d
    for b in inventoryd inventory-load inventory-check inventory-stats; do
        [ -x "$1/$b" ] || die "$1/$b not found: build first (cmake --build build)"
    done
    d=$(realpath "$1")
    inventoryd=$d/inventoryd
    load=$d/inventory-load
    checker=$d/inventory-check
    stats=$d/inventory-stats
}

# require_tools TOOL...: exits 1 naming the first TOOL not on PATH.
require_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || { echo "$tag: $tool not found (run scripts/deps.sh)" >&2; exit 1; }
    done
}

# clear_env REGEX: unsets every exported variable whose name matches REGEX (grep -E).
clear_env() {
    local v
    while read -r v; do unset "$v"; done < <(compgen -e | grep -E "$1" || true)
}

# setup_work NAME: work=/tmp/inventoryd-NAME.XXXXXX (mode 755, for nginx's
# workers running as nobody under root), then set_traps.
setup_work() {
    work=$(mktemp -d "/tmp/inventoryd-$1.XXXXXX")
    chmod 755 "$work"
    set_traps
}

# set_traps: cleanup on EXIT, on_signal on INT and TERM.
set_traps() {
    trap cleanup EXIT
    trap on_signal INT TERM
}

# on_signal: what INT and TERM do: failed=1 (cleanup keeps $work) and exit
# $fail_status, a failure.
on_signal() {
    failed=1
    exit "$fail_status"
}

# show_logs [DIR [LINES]]: on stderr, for each non-empty DIR/*.log ($work, 20):
# the head of its sanitizer report if it has one, else its last LINES lines.
show_logs() {
    local dir=${1:-$work} lines=${2:-20} f
    for f in "$dir"/*.log; do
        [ -s "$f" ] || continue
        if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f"; then
            # A sanitizer report: its head says what and where.
            echo "---- sanitizer report in $f" >&2
            grep -m 1 -A 30 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f" >&2
            continue
        fi
        echo "---- last lines of $f" >&2
        tail -n "$lines" "$f" >&2
    done
}

# on_fail: what fail shows after its message: show_logs.
on_fail() { show_logs; }

# fail MESSAGE...: "$tag: FAIL: MESSAGE" on stderr ($fail_word for
# "FAIL: "), failed=1, on_fail, exit $fail_status.
fail() {
    echo "$tag: $fail_word$*" >&2
    failed=1
    on_fail
    exit "$fail_status"
}

# die MESSAGE...: "$tag: MESSAGE" on stderr, exit $fail_status: for what
# stops a script before it ran anything worth a log (bad settings, a missing
# tool).
die() {
    echo "$tag: $*" >&2
    exit "$fail_status"
}

# stop_pid PID: SIGTERM to our child PID, SIGKILL after 10 s, reaped; sets
# stop_status to its exit status, returns 0. (Not in a subshell: only the
# parent can wait.)
stop_pid() {
    local pid=$1 i
    if ! kill -TERM "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null
        stop_status=$?
        return 0
    fi
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    stop_status=$?
    return 0
}

# forget_pid PID: PID was reaped here; cleanup must not signal it (nor a
# process that reused its number): removes it from pids.
forget_pid() {
    local p keep=()
    for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    pids=("${keep[@]}")
}

# kill_pid PID: the process killed outright (SIGKILL: a crash, nothing
# flushed on the way out), reaped and forgotten.
kill_pid() {
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    forget_pid "$1"
}

# stop_started: stop_pid on $load_pid if set, then on every pid in pids, last
# started first (nginx, the instances, then Redis); empties pids.
stop_started() {
    local i
    [ -n "$load_pid" ] && stop_pid "$load_pid"
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        stop_pid "${pids[$i]}"
    done
    pids=()
}

# finish_work: removes $work after a pass; after a failure keeps it and says
# "$tag: $kept kept in $work" on stderr.
finish_work() {
    if [ "$failed" -eq 0 ]; then
        rm -rf "$work"
    else
        echo "$tag: $kept kept in $work" >&2
    fi
}

# cleanup: the EXIT trap: stop_started, then finish_work.
cleanup() {
    stop_started
    finish_work
}

# port_busy PORT: true when something listens on PORT (ss), or 127.0.0.1:PORT
# accepts a connection.
port_busy() {
    if command -v ss >/dev/null 2>&1 && [ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]; then
        return 0
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pick_port: sets port to a free one in 20000-31999 (below the ephemeral
# range) not picked before by this script; fails after 500 tries.
pick_port() {
    local p i
    for i in $(seq 1 500); do
        p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 12000 ))
        case "$picked" in *" $p "*) continue ;; esac
        port_busy "$p" && continue
        picked="$picked$p "
        port=$p
        return 0
    done
    fail "no free TCP port found"
}

# need_fds N WHAT: raises this shell's open-file limit as far as allowed
# and dies (naming WHAT) unless it is above N.
need_fds() {
    ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
    [ "$(ulimit -n)" -gt "$1" ] ||
        die "ulimit -n is $(ulimit -n): too few descriptors for $2 (raise the hard limit, or lower it)"
}

# hold_idle PORT N SECONDS: loadtest/idle-conns.py opens N keep-alive
# connections to 127.0.0.1:PORT (one 200 answer read on each) and holds them
# idle for SECONDS; returns once all are open, with idle_pid its pid (in
# pids); fails if it stops first or after 60 s. Needs ulimit -n above N.
hold_idle() {
    rm -f "$work/idle.ready"
    python3 "$root/loadtest/idle-conns.py" "$1" "$2" "$work/idle.ready" "$3" >"$work/idle.log" 2>&1 &
    idle_pid=$!
    pids+=("$idle_pid")
    local i
    for i in $(seq 1 600); do
        [ -s "$work/idle.ready" ] && return 0
        kill -0 "$idle_pid" 2>/dev/null || fail "the idle connections' script stopped: $(tail -3 "$work/idle.log")"
        sleep 0.1
    done
    fail "$2 idle connections not open after 60 s"
}

# wait_http PID PORT PATH NAME: returns once PATH on 127.0.0.1:PORT answers
# 2xx; fails if PID exits first or after 20 s.
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

# ---- the stack: redis-server, two inventoryd instances, nginx ---------------

# pick_stack_ports: picks redis_port, port1, port2, nginx_port and logs them.
pick_stack_ports() {
    pick_port; redis_port=$port
    pick_port; port1=$port
    pick_port; port2=$port
    pick_port; nginx_port=$port
    log "redis $redis_port, instances $port1 and $port2, nginx $nginx_port, in $work"
}

# start_redis [PORT [NAME [ARG...]]]: redis-server on 127.0.0.1:PORT
# (default $redis_port), no persistence, in $work (log NAME.log, default
# redis.log; a replica's sync file NAME.rdb), ARGs appended;
# sets redis_pid, adds it to pids; fails unless it answers PING within 10 s.
start_redis() {
    local p=${1:-$redis_port} name=${2:-redis} i
    shift $(( $# < 2 ? $# : 2 ))
    redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize no --dir "$work" --dbfilename "$name.rdb" "$@" >"$work/$name.log" 2>&1 &
    redis_pid=$!
    pids+=("$redis_pid")
    for i in $(seq 1 100); do
        [ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && break
        kill -0 "$redis_pid" 2>/dev/null || fail "$name (redis-server) exited during start-up"
        [ "$i" -eq 100 ] && fail "$name (redis-server) not answering PING on $p"
        sleep 0.1
    done
}

# start_zookeeper PORT [NAME]: a standalone ZooKeeper (Debian's zookeeper
# package) on 127.0.0.1:PORT, its data and zoo.cfg in $work/NAME (zookeeper-
# PORT), the JVM run directly so that its pid is the server's (stopped by it
# like everything else). tickTime 500 ms: sessions from 1 s to 10 s. Waits
# until it serves ("srvr" names its mode: "ruok" says imok before that);
# sets zk_pid.
start_zookeeper() {
    local p=$1 name=${2:-zookeeper-$1} dir i
    dir=$work/$name
    [ -r /usr/share/java/zookeeper.jar ] || fail "ZooKeeper is not installed (apt-get install zookeeper default-jre-headless)"
    mkdir -p "$dir/data"
    printf '%s\n' "tickTime=500" "dataDir=$dir/data" "clientPort=$p" "clientPortAddress=127.0.0.1" \
        "admin.enableServer=false" "4lw.commands.whitelist=ruok,srvr,cons,dump" >"$dir/zoo.cfg"
    java -Xmx256m -XX:+UseSerialGC -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
        -Dzookeeper.log.dir="$dir" -Dzookeeper.root.logger=INFO,CONSOLE \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" >"$work/$name.log" 2>&1 &
    zk_pid=$!
    pids+=("$zk_pid")
    for i in $(seq 1 300); do
        zk_word "$p" srvr | grep -q '^Mode:' && return 0
        kill -0 "$zk_pid" 2>/dev/null || fail "$name (ZooKeeper) exited during start-up; see $work/$name.log"
        sleep 0.1
    done
    fail "$name (ZooKeeper) not serving on $p after 30 s"
}

# zk_word PORT WORD [HOST]: ZooKeeper's answer to a four-letter word (ruok,
# srvr, cons; dump: the ephemeral nodes of every session, which the matrix
# reads to see a lock held), from HOST (127.0.0.1), given zk_word_s seconds
# (2) for each line. Asked by the shell itself, starting no process (the
# matrix polls an election with it while its loads keep both cores busy),
# or, when zk_wrap names a command (the campaign's: ip netns exec NS),
# through it.
zk_wrap=()
zk_word_s=2
zk_word() {
    local fd line out=
    if [ ${#zk_wrap[@]} -gt 0 ]; then
        "${zk_wrap[@]}" timeout "$zk_word_s" bash -c 'exec 3<>"/dev/tcp/$3/$1" && printf %s "$2" >&3 && cat <&3' _ \
            "$1" "$2" "${3:-127.0.0.1}" 2>/dev/null
        return 0
    fi
    { exec {fd}<>"/dev/tcp/${3:-127.0.0.1}/$1"; } 2>/dev/null || return 0
    { printf %s "$2" >&"$fd"; } 2>/dev/null
    while IFS= read -r -t "$zk_word_s" -u "$fd" line; do out+=$line$'\n'; done
    exec {fd}>&-
    printf '%s%s' "$out" "$line"
}

# zk_mode PORT [HOST]: the server's role as srvr names it (leader, follower,
# standalone), on stdout; nothing when it does not serve (down, or electing:
# a server without a leader answers "This ZooKeeper instance is not
# currently serving requests").
zk_mode() { zk_word "$1" srvr "${2:-}" | sed -n 's/^Mode: //p'; }

# ---- a ZooKeeper ensemble of three servers ----------------------------------
# zk_ens_ports[I]  the client port of member I (0, 1, 2; myid I+1)
# zk_ens_pids[I]   its server's pid ("" while it is down)
# zk_ens_cfgs[I]   its zoo.cfg (its dataDir and myid beside it)
# zk_ens_connect   host:port,host:port,host:port, for zookeeper.connect
# zk_ens_host      the address every member listens on
zk_ens_ports=(); zk_ens_pids=(); zk_ens_cfgs=(); zk_ens_connect=; zk_ens_host=127.0.0.1

# zk_ensemble_conf DIR HOST C1 Q1 E1 C2 Q2 E2 C3 Q3 E3: the configurations
# of a three-server ensemble on HOST: member I (0-2) in DIR/zk-I+1
# (zoo.cfg, data/myid), its client port CI, its quorum port QI (followers
# to the leader) and its election port EI. tickTime 500 ms as
# start_zookeeper (sessions of 1 s to 10 s), initLimit 10 ticks, syncLimit
# 2 (a follower that hears nothing of its leader for 1 s leaves it and
# elects another). Sets zk_ens_ports, zk_ens_cfgs, zk_ens_connect, zk_ens_host.
zk_ensemble_conf() {
    local dir=$1 host=$2 i servers=()
    shift 2
    for i in 0 1 2; do servers+=("server.$((i + 1))=$host:${*:3*i+2:1}:${*:3*i+3:1}"); done
    zk_ens_host=$host zk_ens_ports=() zk_ens_cfgs=() zk_ens_pids=("" "" "") zk_ens_connect=
    for i in 0 1 2; do
        zk_ens_ports+=("${*:3*i+1:1}")
        zk_ens_cfgs+=("$dir/zk-$((i + 1))/zoo.cfg")
        zk_ens_connect+="${zk_ens_connect:+,}$host:${*:3*i+1:1}"
        mkdir -p "$dir/zk-$((i + 1))/data"
        echo "$((i + 1))" >"$dir/zk-$((i + 1))/data/myid"
        printf '%s\n' "tickTime=500" "initLimit=10" "syncLimit=2" "dataDir=$dir/zk-$((i + 1))/data" \
            "clientPort=${*:3*i+1:1}" "clientPortAddress=$host" "admin.enableServer=false" \
            "4lw.commands.whitelist=ruok,srvr,cons,dump" "${servers[@]}" >"${zk_ens_cfgs[$i]}"
    done
}

# zk_member_start I LOG [WRAPPER...]: member I of the ensemble (its zoo.cfg
# from zk_ensemble_conf, its data kept from an earlier run of it) started
# by `zkServer.sh start-foreground CFG`, which execs the JVM: the pid is the
# server's, stopped by it like everything else. WRAPPER runs it (ip netns
# exec ...). Its log (INFO, log4j's console: Debian's zookeeper.jar names no
# slf4j binding, so the class path given after zkServer.sh's own adds one:
# the last -cp counts) to LOG; sets zk_ens_pids[I], adds it to pids; does
# not wait.
zk_member_start() {
    local i=$1 log=$2 bin=/usr/share/zookeeper/bin/zkServer.sh j=/usr/share/java
    shift 2
    [ -x "$bin" ] || fail "ZooKeeper is not installed (apt-get install zookeeper default-jre-headless)"
    JMXDISABLE=true SERVER_JVMFLAGS="-Xmx256m -XX:+UseSerialGC -Dzookeeper.root.logger=INFO,CONSOLE
        -Dzookeeper.log.dir=${zk_ens_cfgs[$i]%/*} -cp /etc/zookeeper/conf:$j/zookeeper.jar:$j/slf4j-log4j12.jar:$j/log4j-1.2.jar" \
        "$@" "$bin" start-foreground "${zk_ens_cfgs[$i]}" >>"$log" 2>&1 &
    zk_ens_pids[$i]=$!
    pids+=("${zk_ens_pids[$i]}")
}

# zk_member_kill I: member I's server killed outright (SIGKILL), reaped and
# forgotten; zk_ens_pids[I] emptied.
zk_member_kill() {
    kill_pid "${zk_ens_pids[$1]}"
    zk_ens_pids[$1]=
}

# zk_leader: the member (0-2) that says "Mode: leader" now, on stdout;
# nothing when none does (an election under way, or none up).
zk_leader() {
    local i
    for i in 0 1 2; do
        [ -n "${zk_ens_pids[$i]}" ] || continue
        [ "$(zk_mode "${zk_ens_ports[$i]}" "$zk_ens_host")" = leader ] && { echo "$i"; return 0; }
    done
    return 0
}

# zk_ensemble_settled: true when one member says leader and the two others
# follower (srvr), all three up.
zk_ensemble_settled() {
    local i m roles=
    for i in 0 1 2; do
        [ -n "${zk_ens_pids[$i]}" ] || return 1
        m=$(zk_mode "${zk_ens_ports[$i]}" "$zk_ens_host")
        roles+="${m:-none} "
    done
    [ "$(tr ' ' '\n' <<<"$roles" | grep -c '^leader$')" = 1 ] &&
        [ "$(tr ' ' '\n' <<<"$roles" | grep -c '^follower$')" = 2 ]
}

# zk_ensemble_wait SECONDS: waits until the ensemble is settled (one leader,
# two followers); returns 1 after SECONDS, or when a member's server exited.
zk_ensemble_wait() {
    local end=$((SECONDS + $1)) i
    while [ "$SECONDS" -lt "$end" ]; do
        zk_ensemble_settled && return 0
        for i in 0 1 2; do
            [ -n "${zk_ens_pids[$i]}" ] && ! kill -0 "${zk_ens_pids[$i]}" 2>/dev/null && return 1
        done
        sleep 0.1
    done
    return 1
}

# start_zookeeper_ensemble [NAME]: three ZooKeeper servers forming one
# ensemble on 127.0.0.1 (zk_ensemble_conf in $work/NAME, zk-ensemble), each
# on three free ports of its own (pick_port: below 32768), each started by
# zk_member_start (log $work/NAME-N.log); waits until one is leader and two
# are followers (srvr: start_zookeeper's whitelist, ruok,srvr,cons,dump),
# or fails after 60 s. Stopped by pid, as every server.
start_zookeeper_ensemble() {
    local name=${1:-zk-ensemble} ports=() i
    for i in $(seq 1 9); do pick_port; ports+=("$port"); done
    zk_ensemble_conf "$work/$name" 127.0.0.1 "${ports[@]}"
    for i in 0 1 2; do zk_member_start "$i" "$work/$name-$((i + 1)).log"; done
    zk_ensemble_wait 60 ||
        fail "the ZooKeeper ensemble $name did not settle (one leader, two followers) in 60 s; see $work/$name-*.log"
}

# start_mariadb PORT [NAME]: a private MariaDB (Debian's mariadb-server) on
# 127.0.0.1:PORT: mariadb-install-db into $work/NAME (mariadb-PORT), root
# with no password, its socket there too, no binary log; waits for ping.
# Started again with the same PORT and NAME (after a kill or a stop), it
# keeps its datadir: the fence counter only grows. Sets mariadb_pid.
start_mariadb() {
    local p=$1 name=${2:-mariadb-$1} dir i
    dir=$work/$name
    command -v mariadbd >/dev/null || fail "MariaDB is not installed (apt-get install mariadb-server)"
    mkdir -p "$dir"
    [ -d "$dir/data" ] || mariadb-install-db --no-defaults --datadir="$dir/data" --user=root --skip-test-db \
        --auth-root-authentication-method=normal >"$work/$name-install.log" 2>&1 ||
        fail "mariadb-install-db failed; see $work/$name-install.log"
    mariadbd --no-defaults --datadir="$dir/data" --port="$p" --bind-address=127.0.0.1 \
        --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" --user=root --skip-name-resolve \
        --skip-log-bin --innodb-buffer-pool-size=32M --max-connections=1000 \
        --log-error="$work/$name.log" >/dev/null 2>&1 &
    mariadb_pid=$!
    pids+=("$mariadb_pid")
    for i in $(seq 1 300); do
        mariadb-admin --no-defaults -h 127.0.0.1 -P "$p" -u root ping >/dev/null 2>&1 && return 0
        kill -0 "$mariadb_pid" 2>/dev/null || fail "$name (mariadbd) exited during start-up; see $work/$name.log"
        sleep 0.1
    done
    fail "$name (mariadbd) not answering on $p after 30 s"
}

# wait_voting TTL_MS PORT...: waits until every Redis on PORT has been up for
# TTL_MS (rounded up to whole seconds, INFO uptime_in_seconds): a Redlock
# master votes only then (the restart rule; see src/redlock.c). Says so when
# it has to wait.
wait_voting() {
    local ttl_ms=$1 s=$(( ($1 + 999) / 1000 )) p up said=0
    shift
    for p in "$@"; do
        while :; do
            up=$(redis-cli -p "$p" INFO server 2>/dev/null | tr -d '\r' | sed -n 's/^uptime_in_seconds://p')
            [ -n "$up" ] || fail "Redlock master on $p does not answer INFO"
            [ "$up" -ge "$s" ] && break
            [ "$said" = 1 ] || log "waiting for the Redlock masters to be up for lock.ttl-ms ($ttl_ms ms): a younger master gets no vote"
            said=1
            sleep 0.2
        done
    done
}

# start_instance PORT [ARG...]: $inventoryd on 127.0.0.1:PORT using the Redis
# on $redis_port, ARGs appended, run in $work (log inventoryd-PORT.log); sets
# inst_pid, adds it to pids; does not wait.
start_instance() {
    local port=$1
    shift
    (cd "$work" && exec "$inventoryd" \
        --set server.port="$port" --set server.bind=127.0.0.1 \
        --set redis.host=127.0.0.1 --set redis.port="$redis_port" \
        "$@" >"$work/inventoryd-$port.log" 2>&1) &
    inst_pid=$!
    pids+=("$inst_pid")
}

# render_nginx: scripts/nginx-conf.sh renders $work/nginx/nginx.conf for
# $nginx_port in front of $port1 (weight 1) and $port2 (weight 2); the
# directory gets mode 755 for nginx's workers (nobody, under root).
render_nginx() {
    bash "$root/scripts/nginx-conf.sh" "$nginx_port" "$port1" "$port2" "$work/nginx" ||
        fail "scripts/nginx-conf.sh failed"
    chmod 755 "$work/nginx"
}

# check_nginx: fails unless nginx -t accepts $work/nginx/nginx.conf.
check_nginx() {
    nginx -t -q -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx-error.log" ||
        fail "nginx -t rejected the rendered template"
}

# start_nginx: nginx in the foreground on $work/nginx; sets nginx_pid, adds it
# to pids; waits for its /healthz.
start_nginx() {
    nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx-error.log" \
        -g 'daemon off;' >"$work/nginx-stdout.log" 2>&1 &
    nginx_pid=$!
    pids+=("$nginx_pid")
    wait_http "$nginx_pid" "$nginx_port" /healthz "nginx on $nginx_port"
}

# start_front: waits for the instances $pid1 ($port1) and $pid2 ($port2),
# then render_nginx, check_nginx and start_nginx; sets base to nginx's URL.
start_front() {
    wait_http "$pid1" "$port1" /healthz "inventoryd on $port1"
    wait_http "$pid2" "$port2" /healthz "inventoryd on $port2"
    render_nginx
    check_nginx
    start_nginx
    base="http://127.0.0.1:$nginx_port"
}

# stop_stack_cleanly: stops nginx, then the instances $pid1 ($port1) and $pid2
# ($port2), failing unless each exits 0 on SIGTERM; forgets those three, so
# cleanup still stops every Redis the script started.
stop_stack_cleanly() {
    local p
    stop_pid "$nginx_pid"
    forget_pid "$nginx_pid"
    for p in "$port1:$pid1" "$port2:$pid2"; do
        stop_pid "${p#*:}"
        forget_pid "${p#*:}"
        [ "$stop_status" = 0 ] || fail "inventoryd on ${p%%:*} exited with status $stop_status after SIGTERM"
    done
}

# ---- a Redis Cluster -------------------------------------------------------

# pick_cluster_port: a free port in 20000-22767 whose cluster bus port
# (+10000, so 30000-32767: below the ephemeral range, where no outgoing
# connection takes it meanwhile) is free too; neither picked before.
pick_cluster_port() {
    local p i
    for i in $(seq 1 500); do
        p=$(( 20000 + RANDOM % 2768 ))
        case "$picked" in *" $p "* | *" $((p + 10000)) "*) continue ;; esac
        port_busy "$p" || port_busy $((p + 10000)) && continue
        picked="$picked$p $((p + 10000)) "
        port=$p
        return 0
    done
    fail "no free port with a free cluster bus port"
}

# start_cluster PORT...: a Redis Cluster on the six PORTs (three masters,
# each with one replica): redis-server --cluster-enabled yes on each (logs
# and nodes-PORT.conf in $work), then redis-cli --cluster create; returns
# once every node says cluster_state:ok, knows all six and sees three of
# them as replicas, or fails after 30 s. Fills node_pid[PORT], sets
# redis_port to the first PORT and seeds to the first three as
# redis.cluster.nodes wants them (127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3).
declare -A node_pid=()
start_cluster() {
    local p i ok info n=$#
    for p in "$@"; do
        rm -f "$work/nodes-$p.conf"
        start_redis "$p" "node-$p" --cluster-enabled yes \
            --cluster-config-file "nodes-$p.conf" --cluster-node-timeout 2000 \
            --repl-diskless-sync-delay 0
        node_pid[$p]=$redis_pid
    done
    redis_port=$1
    seeds=$(printf '127.0.0.1:%s,' "${@:1:3}")
    seeds=${seeds%,}
    # shellcheck disable=SC2046 # one word per node
    redis-cli --cluster create $(printf '127.0.0.1:%s ' "$@") --cluster-replicas 1 --cluster-yes \
        >"$work/cluster-create.log" 2>&1 ||
        fail "redis-cli --cluster create failed: $(tail -3 "$work/cluster-create.log")"
    for i in $(seq 1 300); do
        ok=1
        for p in "$@"; do
            info=$(redis-cli -p "$p" CLUSTER INFO 2>/dev/null | tr -d '\r')
            grep -q '^cluster_state:ok' <<<"$info" && grep -q "^cluster_known_nodes:$n\$" <<<"$info" || ok=0
            [ "$(redis-cli -p "$p" CLUSTER NODES 2>/dev/null | awk '$3 ~ /slave/' | wc -l)" = $((n / 2)) ] || ok=0
        done
        [ "$ok" = 1 ] && return 0
        sleep 0.1
    done
    fail "the cluster on $* did not settle in 30 s"
}

# start_free_cluster: start_cluster on six ports from pick_cluster_port,
# which it leaves in the array nodes.
start_free_cluster() {
    nodes=()
    for _ in 1 2 3 4 5 6; do
        pick_cluster_port
        nodes+=("$port")
    done
    start_cluster "${nodes[@]}"
}

# masters: the ports of the masters that serve slots, as the node on
# $redis_port sees them, one per line.
masters() {
    rcli CLUSTER NODES | tr -d '\r' | awk '$3 ~ /master/ && NF >= 9 { split($2, a, "[:@]"); print a[2] }' | sort -u
}

# owner_of KEY: the port of the master that owns KEY's slot, as the node on
# $redis_port sees it (CLUSTER NODES).
owner_of() {
    local slot
    slot=$(rcli CLUSTER KEYSLOT "$1")
    rcli CLUSTER NODES | tr -d '\r' | awk -v s="$slot" '
        $3 ~ /master/ { for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1];
                         if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2]; exit } } }'
}

# ---- one round through nginx ($base) ---------------------------------------

# admin_curl ARG...: curl ARG..., with "Authorization: Bearer $admin_token"
# when admin_token is set, given on curl's stdin (-H @-) so that ps does not
# show it.
admin_curl() {
    if [ -n "${admin_token:-}" ]; then
        printf 'Authorization: Bearer %s\n' "$admin_token" | curl -H @- "$@"
    else
        curl "$@"
    fi
}

# reset_stock [LABEL]: POST /inventory/reset with $stock (and $admin_token,
# admin_curl), the answer in $work/reset[-LABEL].json; fails (the message
# prefixed "LABEL: " when given) unless it answers 200.
reset_stock() {
    local code answer=$work/reset${1:+-$1}.json
    code=$(admin_curl -s -o "$answer" -w '%{http_code}' --max-time 10 \
        -X POST -H 'Content-Type: application/json' \
        -d "{\"stock\":$stock}" "$base/inventory/reset")
    [ "$code" = 200 ] || fail "${1:+$1: }POST /inventory/reset answered $code: $(cat "$answer" 2>/dev/null)"
}

# start_load OUT LOG CMD...: CMD in the background, its stdout to OUT and its
# stderr to LOG, so that a signal runs the trap at once and cleanup stops it
# by its pid; sets load_pid.
start_load() {
    local out=$1 log=$2
    shift 2
    "$@" >"$out" 2>"$log" &
    load_pid=$!
}

# wait_load: waits for $load_pid, then empties it; sets load_rc to its exit
# status (127 when it was stopped, and so reaped, already).
wait_load() {
    wait "$load_pid" 2>/dev/null
    load_rc=$?
    load_pid=
}

# load_kv STRATEGY [CMD...]: $load, $clients clients making $requests sales
# of STRATEGY through nginx, or at 127.0.0.1:$load_port when set (start_load:
# $work/load-STRATEGY.out and .log). CMD, when given, runs meanwhile: it
# returns once $load_pid has ended, and may stop it. Sets load_rc and
# load_out (its --format kv line) and fills L from it.
load_kv() {
    local s=$1
    shift
    start_load "$work/load-$s.out" "$work/load-$s.log" \
        "$load" --host 127.0.0.1 --port "${load_port:-$nginx_port}" \
        --path "/inventory/sale/$s" --clients "$clients" \
        --requests "$requests" --timeout-ms 60000 --format kv
    [ $# -eq 0 ] || "$@"
    wait_load
    load_out=$(cat "$work/load-$s.out")
    kv_parse "$work/load-$s.out"
}

# kv_parse FILE: fills L (emptied first) from an inventory-load --format kv line.
kv_parse() {
    local f
    L=()
    # shellcheck disable=SC2013 # one line of key=value words
    for f in $(cat "$1"); do L[${f%%=*}]=${f#*=}; done
}

# fetch_audit STRATEGY: GET /inventory/audit into $work/audit-STRATEGY.json, or fail.
fetch_audit() {
    curl -sf --max-time 10 "$base/inventory/audit" >"$work/audit-$1.json" ||
        fail "$1: GET /inventory/audit failed"
}

# jqv STRATEGY EXPR: one field of that round's audit.
jqv() { jq -r "$2" "$work/audit-$1.json"; }

# expect WHAT ACTUAL WANTED: fails with "WHAT: got ACTUAL, expected WANTED" unless equal.
expect() {
    [ "$2" = "$3" ] || fail "$1: got $2, expected $3"
}

# ---- load in bounded rounds ------------------------------------------------

# start_rounds NAME PORT PATH CLIENTS REQUESTS SECONDS: in the background,
# inventory-load rounds (CLIENTS clients, REQUESTS requests each) against
# 127.0.0.1:PORT PATH, one --format kv line per round appended to
# $work/NAME.kv (stderr to $work/NAME-load.log), until $work/NAME.stop exists
# or SECONDS have passed (a round under way is finished, not cut); a round
# exiting above 1 ends them with status 1. Sets rounds_pid, adds it to pids;
# SIGTERM stops the current round by its pid.
start_rounds() {
    local name=$1 port=$2 path=$3 c=$4 n=$5 secs=$6
    rm -f "$work/$name.stop"
    : >"$work/$name.kv"
    (
        lp=
        trap '[ -n "$lp" ] && kill -TERM "$lp" 2>/dev/null; exit 1' TERM
        end=$((SECONDS + secs))
        while [ ! -e "$work/$name.stop" ] && [ "$SECONDS" -lt "$end" ]; do
            "$load" --host 127.0.0.1 --port "$port" --path "$path" --clients "$c" \
                --requests "$n" --timeout-ms 30000 --format kv \
                >>"$work/$name.kv" 2>>"$work/$name-load.log" &
            lp=$!
            wait "$lp"
            rc=$?
            lp=
            [ "$rc" -le 1 ] || { echo "inventory-load exited with $rc" >>"$work/$name-load.log"; exit 1; }
        done
        exit 0
    ) &
    rounds_pid=$!
    pids+=("$rounds_pid")
}

# stop_rounds NAME: asks NAME's rounds to stop after the current one and waits
# (at most 120 s); sets rounds_rc, forgets rounds_pid; fails unless they ended 0.
stop_rounds() {
    local name=$1 deadline=$((SECONDS + 120))
    touch "$work/$name.stop"
    while kill -0 "$rounds_pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    kill -0 "$rounds_pid" 2>/dev/null && fail "$name: the load rounds did not stop within 120 s"
    wait "$rounds_pid"
    rounds_rc=$?
    forget_pid "$rounds_pid"
    rounds_pid=
    [ "$rounds_rc" -eq 0 ] || fail "$name: the load rounds failed: $(tail -n 5 "$work/$name-load.log")"
}

# sum_rounds NAME: fills L with the sums of the counters over NAME's rounds
# (inventory-stats; the times and rates, *_ms and *_s, are not summed) and
# L[rounds]; the counters kv_line names default to 0.
sum_rounds() {
    local k v
    L=()
    while read -r k v; do
        case "$k" in *_ms | *_s) ;; *) L[$k]=$v ;; esac
    done < <(tr ' =' '\n ' <"$work/$1.kv" | "$stats" --by-key --skip sum)
    L[rounds]=$(wc -l <"$work/$1.kv")
    for k in requests sold sold_out lock_timeout backend_unavailable other errors; do
        L[$k]=${L[$k]:-0}
    done
}

# kv_line: the counters in L (after sum_rounds) as one key=value line, on stdout.
kv_line() { echo "rounds=${L[rounds]} requests=${L[requests]} sold=${L[sold]} sold_out=${L[sold_out]}" \
    "lock_timeout=${L[lock_timeout]} backend_unavailable=${L[backend_unavailable]} other=${L[other]} errors=${L[errors]}"; }
