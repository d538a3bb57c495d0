# shellcheck shell=bash disable=SC2034
# (A sourced library: it sets variables for the script and reads the script's.)
# scripts/lib-net.sh -- a private network of Linux network namespaces for
# the fault campaigns (scripts/campaign.sh), so that a link can be cut.
#
# One namespace per node (an instance, a Redis server, the client that
# drives the load), each with one veth whose other end is a port of a bridge
# that lives in a namespace of its own (the hub): nothing of it is in the
# host's namespace, so it has no route out and touches no other network.
# Addresses are 10.251.NET.HOST/24, only inside these namespaces. Every
# node has an nftables table "inet nem" with an input and an output chain
# (policy accept): a cut or a loss is a pair of rules in each end's chains,
# tagged with a comment, and is healed by deleting the rules of that tag.
# Deleting a namespace deletes its veth, its rules and its routes, so
# net_down removes everything the run made.
#
# Names: every namespace is "$net_prefix-NODE"; net_prefix is unique to
# the run (net_init), so that runs of other users never collide; a veth is
# "v-NODE" inside the hub (the names inside a namespace are its own).
#
# A run that is killed outright (SIGKILL, a lost machine session) runs no
# trap, and would leave its namespaces and the processes inside them. So
# each run records itself before it makes anything: a file named after its
# prefix in $NET_RUNS_DIR (/run/inventoryd-net) holding the pid and the
# start time of its script. net_sweep, called by the next run, removes what
# a recorded run that is gone left: it kills the processes inside that
# run's namespaces (by the pids `ip netns pids` lists), deletes the
# namespaces and the record. A run still alive, or a namespace of no
# record, is never touched.
#
# State shared with the script: net_prefix, net_sub (the third octet),
# net_nodes (the nodes made, in order), NET_HOST[NODE] (the host byte).
# Needs root, ip (iproute2) and nft (nftables).

net_prefix=
net_sub=
net_nodes=()
declare -A NET_HOST=()
net_runs_dir=${NET_RUNS_DIR:-/run/inventoryd-net}

# net_started PID: the process's start time (field 22 of /proc/PID/stat,
# after the command's parentheses), on stdout; nothing when it is gone.
net_started() {
    local stat f
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    read -r -a f <<<"${stat##*) }"
    echo "${f[19]}"
}

# net_sweep: removes what every recorded run that is gone left (see above),
# and says so on stderr, a line a run. Returns 1 when something could not be
# removed.
net_sweep() {
    local f prefix pid start ns p rc=0
    [ -d "$net_runs_dir" ] || return 0
    for f in "$net_runs_dir"/*; do
        [ -f "$f" ] || continue
        prefix=${f##*/}
        read -r pid start <"$f"
        [ -n "$pid" ] && [ "$(net_started "$pid")" = "$start" ] && continue
        if [ -z "$(net_list "$prefix")" ]; then
            rm -f "$f" # it was gone before it could remove its record: nothing left
            continue
        fi
        for ns in $(net_list "$prefix"); do
            for p in $(ip netns pids "$ns" 2>/dev/null); do
                kill -CONT "$p" 2>/dev/null
                kill -KILL "$p" 2>/dev/null
            done
            ip netns delete "$ns" 2>/dev/null || rc=1
        done
        if [ -z "$(net_list "$prefix")" ]; then
            rm -f "$f"
            echo "net: removed the namespaces of $prefix, a run that is gone (pid ${pid:-?}), and the processes in them" >&2
        else
            echo "net: could not remove $(net_list "$prefix" | tr '\n' ' ')" >&2
            rc=1
        fi
    done
    return $rc
}

# net_init PREFIX [SUB]: the hub namespace and its bridge; sets net_prefix
# and net_sub (the third octet of 10.251.SUB.0/24, 1 unless given). Fails
# (returns 1) when PREFIX is taken or a command fails.
net_init() {
    net_prefix=$1
    net_sub=${2:-1}
    net_nodes=()
    NET_HOST=()
    if ip netns list | awk '{ print $1 }' | grep -q "^$net_prefix-"; then
        echo "net: namespaces named $net_prefix-* exist already" >&2
        return 1
    fi
    mkdir -p "$net_runs_dir" && echo "$$ $(net_started $$)" >"$net_runs_dir/$net_prefix" || return 1
    ip netns add "$net_prefix-hub" &&
        ip -n "$net_prefix-hub" link add br0 type bridge &&
        ip -n "$net_prefix-hub" link set br0 up &&
        ip -n "$net_prefix-hub" link set lo up
}

# net_node NODE HOST: the namespace $net_prefix-NODE, its veth on the hub's
# bridge, the address 10.251.$net_sub.HOST, and its nft table. 0 or 1.
net_node() {
    local node=$1 host=$2 ns=$net_prefix-$1
    ip netns add "$ns" || return 1
    net_nodes+=("$node")
    NET_HOST[$node]=$host
    ip -n "$net_prefix-hub" link add "v-$node" type veth peer name eth0 netns "$ns" &&
        ip -n "$net_prefix-hub" link set "v-$node" master br0 up &&
        ip -n "$ns" link set lo up &&
        ip -n "$ns" addr add "10.251.$net_sub.$host/24" dev eth0 &&
        ip -n "$ns" link set eth0 up &&
        ip netns exec "$ns" nft -f - <<EOF
table inet nem {
    chain in { type filter hook input priority 0; policy accept; }
    chain out { type filter hook output priority 0; policy accept; }
}
EOF
}

# net_ip NODE: its address, on stdout.
net_ip() { echo "10.251.$net_sub.${NET_HOST[$1]}"; }

# net_ns NODE: its namespace's name, on stdout.
net_ns() { echo "$net_prefix-$1"; }

# net_exec NODE CMD...: CMD inside NODE's namespace (exec'd: as a
# background job its $! is CMD's own pid).
net_exec() {
    local node=$1
    shift
    exec_in_ns "$net_prefix-$node" "$@"
}
exec_in_ns() {
    local ns=$1
    shift
    ip netns exec "$ns" "$@"
}

# net_rules TAG X Y [MATCH...]: in X's namespace, packets from Y in and to Y
# out, and the same in Y's for X, are dropped (with MATCH before the drop,
# e.g. "numgen random mod 100 < 30" for a loss); each rule carries TAG.
net_rules() {
    local tag=$1 x=$2 y=$3 match
    shift 3
    match="$*"
    local rc=0 a b
    for pair in "$x $y" "$y $x"; do
        read -r a b <<<"$pair"
        ip netns exec "$net_prefix-$a" nft add rule inet nem in ip saddr "$(net_ip "$b")" \
            $match counter drop comment "\"$tag\"" || rc=1
        ip netns exec "$net_prefix-$a" nft add rule inet nem out ip daddr "$(net_ip "$b")" \
            $match counter drop comment "\"$tag\"" || rc=1
    done
    return $rc
}

# net_cut TAG X Y: cuts the link between nodes X and Y, both ways.
net_cut() { net_rules "$1" "$2" "$3"; }

# net_loss TAG X Y PCT: drops PCT% of the packets between X and Y, at random
# (nft numgen), both ways.
net_loss() { net_rules "$1" "$2" "$3" numgen random mod 100 "<" "$4"; }

# net_heal TAG: deletes every rule tagged TAG, in every node; sets
# net_dropped to the packets those rules dropped (their counters): the
# proof that the cut or the loss really took traffic.
net_dropped=0
net_heal() {
    local tag=$1 node ns chain h p
    net_dropped=0
    for node in "${net_nodes[@]}"; do
        ns=$net_prefix-$node
        for chain in in out; do
            while read -r p h; do
                [ -n "$h" ] || continue
                net_dropped=$((net_dropped + p))
                ip netns exec "$ns" nft delete rule inet nem "$chain" handle "$h" || return 1
            done < <(ip netns exec "$ns" nft -a list chain inet nem "$chain" 2>/dev/null |
                awk -v t="comment \"$tag\"" 'index($0, t) {
                    p = 0; for (i = 1; i < NF; i++) if ($i == "packets") p = $(i + 1); print p, $NF }')
        done
    done
}

# net_rules_left: how many drop rules remain in all the nodes, on stdout.
net_rules_left() {
    local node n=0 c
    for node in "${net_nodes[@]}"; do
        c=$(ip netns exec "$net_prefix-$node" nft list table inet nem 2>/dev/null | grep -c ' drop')
        n=$((n + c))
    done
    echo "$n"
}

# net_list [PREFIX]: the namespaces named PREFIX-* ($net_prefix), one a line.
net_list() {
    local p=${1:-$net_prefix}
    [ -n "$p" ] || return 0
    ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$p-" || true
}

# net_down: deletes every namespace of the run (their veths, rules and
# routes go with them); safe to call twice, and before net_init.
# Returns 1 when one is left.
net_down() {
    local ns
    [ -n "$net_prefix" ] || return 0
    for ns in $(net_list); do ip netns delete "$ns" 2>/dev/null; done
    [ -z "$(net_list)" ] || return 1
    rm -f "$net_runs_dir/$net_prefix"
}
