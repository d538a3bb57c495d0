#!/usr/bin/env bash
# compose_up.sh INVENTORY_LOAD
#
# The compose stack run for real, with Docker: docker-compose.yml and the
# Dockerfile, on this machine, as a user runs them.
#
#   (1) An engine: the one `docker info` reaches (DOCKER_HOST, or the default
#       socket), else dockerd started here, as root, with its own socket,
#       --data-root and --exec-root (/run/inventoryd-docker,
#       /var/lib/inventoryd-docker: the images stay there for the next run)
#       and --iptables=false --ip-forward=false --bridge=none (the containers
#       reach each other on the stack's own bridge and the host through
#       published ports; the builds use the host's network; nothing else of
#       the machine's network is touched). Only a dockerd started here is
#       stopped on the way out, and what it left mounted is unmounted.
#       Where the host's iptables FORWARD policy is DROP (a default docker
#       engine leaves it so), the stack's own bridge is let through by one
#       rule, inserted once `up --no-start` made the bridge and deleted on
#       the way out, failure included (see forward_open).
#   (2) scripts/images.sh: debian:12, redis:7.0, nginx:1.22,
#       inventoryd-zookeeper:3.8 and inventoryd-mariadb:10.11 made from
#       Debian's packages when missing (no registry is reached).
#   (3) `docker-compose up --build -d` under a project name of its own, every
#       published port a free one (STACK_*_PORT), a random admin token in
#       INVENTORYD_ADMIN_TOKEN and a random MariaDB password, with a quote
#       and a backslash, in INVENTORYD_MYSQL_PASSWORD. It must return only
#       once a sale can succeed with every strategy: the very next requests,
#       a redlock, a zookeeper-fenced and a mysql-fenced sale through nginx,
#       must sell (the last two take their locks and tokens in the zookeeper
#       and mariadb services).
#   (4) Through nginx, with the admin token: a reset without it is refused
#       (401); on an instance, a mysql-fenced sale with end_session=1 (its
#       MariaDB session KILLed by another of its own) ends its session and
#       sells, which MariaDB's user's grants must allow; then for atomic,
#       redisson and redlock, reset to 200 and
#       $COMPOSE_REQUESTS (1200) sales from $COMPOSE_CLIENTS (50) clients:
#       no transport error, no answer but sold or sold_out, clients saw 200
#       sold and the audit says sold 200, sold_twice 0. local must oversell
#       across the two instances (its audit agrees with the clients). nginx's
#       log (docker-compose logs nginx) must show the sales split 1:2 between
#       the two instances (their weights) within 10%.
#   (5) The lab through nginx: GET / is the page, GET /lab says runs are on
#       and need the token, and a run started with the token sells exactly
#       its stock with nothing sold twice.
#   (6) The cluster profile: `--profile cluster up -d` returns once its
#       instance is ready, and the very next sale on it sells; then a reset
#       of another item and 400 redisson sales sell exactly 200.
#   (7) `docker-compose --profile cluster down -v`: then no container, no
#       network and no volume (the stores' data) of the project is left, and
#       no published port is listened on; MariaDB's password appeared in no
#       answer and in no log of the stack.
#
# With COMPOSE_ENGINE=podman, the same with Debian's podman 4.3 and
# podman-compose 1.0.3, as root, with a containers.conf of the test's own
# (runc, cgroupfs, default_ulimits within this shell's hard limits, the
# netavark network backend for name resolution, events in a file: README's
# compose section says why each) and storage under /var/lib/inventoryd-podman.
# Root podman's networks turn on IP forwarding and write firewall rules, so
# the stack runs in a network namespace the test makes and deletes
# (inventorydpod<pid>, loopback only), on the default ports, and every
# request is sent from inside it. podman-compose 1.0.3 ignores profiles
# (the cluster starts with everything else) and depends_on conditions, and
# podman runs no healthcheck without systemd, so `podman-compose up -d`
# returns before the stack is ready: there the test waits for /readyz itself
# (and logs how long that took), then asserts the same sales and audits.
# Its down leaves the project's network, and the test then removes it and
# the stores' volumes.
#
# Prints the time of each phase. Exits 0 on pass, 1 on the first failure
# (named on stderr, with the stack's logs), 77 (skip) only when no engine
# answers and this is not root, so none can be started.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
tag=compose-up

[ $# -eq 1 ] || { echo "usage: $0 INVENTORY_LOAD" >&2; exit 2; }
load=$(realpath "$1")
[ -x "$load" ] || die "$1 is not an executable"
clients=${COMPOSE_CLIENTS:-50}
requests=${COMPOSE_REQUESTS:-1200}
stock=200

engine=${COMPOSE_ENGINE:-docker}
case $engine in
    docker) require_tools docker-compose docker curl jq ss ;;
    podman) require_tools podman podman-compose curl jq ss nsenter ip ;;
    *) die "COMPOSE_ENGINE must be docker or podman, not '$engine'" ;;
esac
# The compose stack must see only what this test sets.
clear_env '^INVENTORYD_|^STACK_|^COMPOSE_PROFILES$|^COMPOSE_FILE$|^COMPOSE_PROJECT_NAME$'
# A client newer than the engine must not try BuildKit (not in every engine).
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0

setup_work compose
t_start=$(now_ms)
project=inventorydtest$$
engine_root=/run/inventoryd-docker
dockerd_pid=
up=0
netns=
in_ns=()

# phase NAME: logs how long the phase that ends here took, since the last one.
t_phase=$t_start
phase() {
    local now
    now=$(now_ms)
    log "time: $1 took $(( (now - t_phase) / 1000 )).$(( (now - t_phase) % 1000 / 100 )) s"
    t_phase=$now
}

# dc ARG...: docker-compose, or podman-compose (in the namespace), on this project.
dc() {
    if [ "$engine" = docker ]; then
        docker-compose -p "$project" -f "$root/docker-compose.yml" --project-directory "$root" "$@"
    else
        (cd "$root" && "${in_ns[@]}" podman-compose -p "$project" -f "$root/docker-compose.yml" "$@")
    fi
}

# With podman every request goes from inside the stack's namespace: curl,
# ss and inventory-load (a wrapper, since lib.sh runs "$load").
curl_bin=$(command -v curl) ss_bin=$(command -v ss)
curl() { "${in_ns[@]}" "$curl_bin" "$@"; }
ss() { "${in_ns[@]}" "$ss_bin" "$@"; }

# The stack's containers and networks, by the project's label.
project_containers() { "$engine" ps -aq --filter "label=com.docker.compose.project=$project"; }
project_volumes() {
    if [ "$engine" = docker ]; then
        docker volume ls -q --filter "label=com.docker.compose.project=$project"
    else
        podman volume ls -q | grep "^${project}_" || true
    fi
}
project_networks() {
    if [ "$engine" = docker ]; then
        docker network ls -q --filter "label=com.docker.compose.project=$project"
    else
        podman network exists "${project}_default" 2>/dev/null && echo "${project}_default"
    fi
}

# stack_down: down, all profiles, volumes too; with podman also the network
# and the volumes its down leaves.
stack_down() {
    local v
    if [ "$engine" = docker ]; then
        dc --profile cluster down -v --remove-orphans -t 5
    else
        dc down -t 5 && { ! podman network exists "${project}_default" ||
            { log "podman-compose down left the network ${project}_default: removing it"; podman network rm "${project}_default" >/dev/null; }; } &&
        for v in $(project_volumes); do
            log "podman-compose down left the volume $v: removing it"
            podman volume rm "$v" >/dev/null || return 1
        done
    fi
}

# wait_ready URL NAME: polls URL (a /readyz) until it answers 200, at most 90 s.
wait_ready() {
    local i
    for i in $(seq 1 900); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1")" = 200 ] && return 0
        sleep 0.1
    done
    fail "$2 never answered 200 on $1 within 90 s: $(curl -s --max-time 2 "$1")"
}

# On a failure: the stack's own logs, then ours.
on_fail() {
    if [ "$up" = 1 ] && [ "$engine" = docker ]; then
        dc --profile cluster ps >&2 2>&1 || true
        dc --profile cluster logs --no-color --tail 30 >"$work/stack.log" 2>&1 || true
    elif [ "$up" = 1 ]; then
        podman ps -a --filter "label=com.docker.compose.project=$project" >&2 2>&1 || true
        local c
        for c in $(podman ps -a --format '{{.Names}}' --filter "label=com.docker.compose.project=$project"); do
            { echo "==== $c"; podman logs --tail 30 "$c" 2>&1; } >>"$work/stack.log"
        done
    fi
    show_logs "$work" 40
}

# forward_open: with Docker, when the host's iptables FORWARD policy is DROP
# (what a default docker engine leaves behind) and bridged traffic passes
# through iptables (br_netfilter's bridge-nf-call-iptables=1), the stack's
# containers cannot reach each other over its bridge unless the engine
# writes rules of its own, which one started with --iptables=false does
# not: nginx then never sees a healthy instance. Here the stack's own bridge
# (made by `up --no-start`) is let through, by one rule taken away again on
# the way out, failure included; nothing else of the firewall is touched.
forward_rule=()
forward_open() {
    local bridge=$1
    [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ] || return 0
    command -v iptables >/dev/null 2>&1 || return 0
    # Unreadable (not root): nothing to do here, nor allowed.
    iptables -S FORWARD 2>/dev/null | grep -qx -- '-P FORWARD DROP' || return 0
    forward_rule=(FORWARD -i "$bridge" -o "$bridge" -m comment --comment "inventoryd compose_up $$" -j ACCEPT)
    iptables -I "${forward_rule[@]}" || { forward_rule=(); fail "could not let $bridge through the FORWARD chain (its policy is DROP)"; }
    log "the iptables FORWARD policy is DROP: let the stack's bridge $bridge through (iptables -I ${forward_rule[*]}), until the end"
}

forward_close() {
    [ ${#forward_rule[@]} -gt 0 ] || return 0
    if iptables -D "${forward_rule[@]}"; then
        log "took the FORWARD rule for ${forward_rule[2]} away again"
    else
        echo "$tag: could not remove: iptables -D ${forward_rule[*]}" >&2
    fi
    forward_rule=()
}

cleanup() {
    stop_started
    if [ "$up" = 1 ]; then
        stack_down >"$work/down-cleanup.log" 2>&1 || true
    fi
    forward_close
    stop_engine
    if [ -n "$netns" ]; then
        ip netns del "$netns" 2>/dev/null && log "deleted the network namespace $netns"
    fi
    finish_work
}

stop_engine() {
    [ -n "$dockerd_pid" ] || return 0
    stop_pid "$dockerd_pid"
    log "stopped the dockerd started here (pid $dockerd_pid, exit $stop_status)"
    dockerd_pid=
    # What it leaves mounted under its exec root (its network namespaces).
    local m
    while read -r m; do umount "$m" 2>/dev/null; done < <(awk -v r="$engine_root/" \
        'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r)
    rm -rf "$engine_root"
}

# ---- (1) an engine ---------------------------------------------------------
if [ "$engine" = podman ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "$tag: SKIP: podman here runs as root (rootless podman needs slirp4netns and uidmap)" >&2
        exit 77
    fi
    # A hard limit podman may not raise past (no CAP_SYS_RESOURCE in a
    # container, or a sandbox): the containers get this shell's nofile, and
    # as many processes as runc could set here (65536 could not, 32768 could).
    nproc=$(ulimit -Hu)
    [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
    cat >"$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[network]
network_backend = "netavark"
EOF
    cat >"$work/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "/var/lib/inventoryd-podman"
runroot = "/run/inventoryd-podman"
EOF
    export CONTAINERS_CONF=$work/containers.conf CONTAINERS_STORAGE_CONF=$work/storage.conf
    podman info >"$work/podman-info.log" 2>&1 || fail "podman info failed: $(tail -n 5 "$work/podman-info.log")"
    command -v netavark >/dev/null 2>&1 || [ -x /usr/lib/podman/netavark ] ||
        fail "netavark is not installed (apt-get install netavark aardvark-dns)"
    netns=inventorydpod$$
    ip netns add "$netns" || fail "could not make the network namespace $netns"
    ip -n "$netns" link set lo up
    in_ns=(nsenter "--net=/run/netns/$netns")
    printf '#!/bin/sh\nexec nsenter --net=/run/netns/%s %s "$@"\n' "$netns" "$load" >"$work/inventory-load"
    chmod +x "$work/inventory-load"
    load=$work/inventory-load
    log "engine: podman $(podman version --format '{{.Version}}') as root, runc, cgroupfs, netavark, in the network namespace $netns"
elif docker info >/dev/null 2>&1; then
    log "engine: the one at ${DOCKER_HOST:-the default socket} ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
elif [ -z "${DOCKER_HOST:-}" ] && DOCKER_HOST=unix://$engine_root/docker.sock docker info >/dev/null 2>&1; then
    export DOCKER_HOST=unix://$engine_root/docker.sock
    log "engine: a dockerd left at $DOCKER_HOST (not started here: left running)"
else
    [ -z "${DOCKER_HOST:-}" ] || fail "DOCKER_HOST=$DOCKER_HOST does not answer (docker info)"
    if [ "$(id -u)" -ne 0 ]; then
        echo "$tag: SKIP: no Docker engine answers and this is not root: none can be started here" >&2
        exit 77
    fi
    command -v dockerd >/dev/null 2>&1 || fail "dockerd is not installed (scripts/deps.sh installs docker.io)"
    mkdir -p "$engine_root" /var/lib/inventoryd-docker
    # No docker0 (--bridge=none: the builds use the host's network, the
    # stack a network of its own, removed by down), and the stack's network
    # from a range of our own.
    dockerd --data-root /var/lib/inventoryd-docker --exec-root "$engine_root/exec" \
        --pidfile "$engine_root/dockerd.pid" -H "unix://$engine_root/docker.sock" \
        --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
        --default-address-pool base=172.29.0.0/17,size=24 \
        >"$work/dockerd.log" 2>&1 &
    dockerd_pid=$!
    export DOCKER_HOST=unix://$engine_root/docker.sock
    for i in $(seq 1 300); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$dockerd_pid" 2>/dev/null || fail "dockerd exited during start-up"
        sleep 0.1
    done
    docker info >/dev/null 2>&1 || fail "dockerd did not answer within 30 s"
    log "engine: dockerd $(docker version --format '{{.Server.Version}}') started here (pid $dockerd_pid, $DOCKER_HOST)"
fi
phase "the engine"

# ---- (2) the base images ---------------------------------------------------
bash "$root/scripts/images.sh" --engine "$engine" >"$work/images.log" 2>&1 ||
    fail "scripts/images.sh failed: $(tail -n 5 "$work/images.log")"
sed "s/^/$tag: /" "$work/images.log"
phase "scripts/images.sh"

# ---- (3) up, on free ports -------------------------------------------------
port_vars=(STACK_REDIS_PORT STACK_REDLOCK_PORT_1 STACK_REDLOCK_PORT_2 STACK_REDLOCK_PORT_3
           STACK_ZOOKEEPER_PORT STACK_MYSQL_PORT
           STACK_INSTANCE_PORT_1 STACK_INSTANCE_PORT_2 STACK_NGINX_PORT
           STACK_CLUSTER_PORT_1 STACK_CLUSTER_PORT_2 STACK_CLUSTER_PORT_3 STACK_CLUSTER_PORT_4
           STACK_CLUSTER_PORT_5 STACK_CLUSTER_PORT_6 STACK_CLUSTER_INSTANCE_PORT)
for v in "${port_vars[@]}"; do
    if [ "$engine" = podman ]; then
        # The namespace is the stack's alone: the default ports.
        export "$v=$(sed -n "s/.*\${$v:-\([0-9]*\)}.*/\1/p" "$root/docker-compose.yml")"
        [ -n "${!v}" ] || fail "no default for $v in docker-compose.yml"
    else
        pick_port
        export "$v=$port"
    fi
done
nginx_port=$STACK_NGINX_PORT
base="http://127.0.0.1:$nginx_port"
admin_token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export INVENTORYD_ADMIN_TOKEN=$admin_token
# MariaDB's user's password, which its entrypoint writes into SQL and
# inventoryd sends: a quote and a backslash in it, and it must show nowhere.
mysql_secret=$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')
export INVENTORYD_MYSQL_PASSWORD="pw'\\$mysql_secret"
log "project $project: nginx on $nginx_port, instances on $STACK_INSTANCE_PORT_1 and $STACK_INSTANCE_PORT_2, cluster instance on $STACK_CLUSTER_INSTANCE_PORT"

up=1
if [ "$engine" = docker ]; then
    dc build >"$work/build.log" 2>&1 || fail "docker-compose build failed: $(tail -n 15 "$work/build.log")"
    phase "docker-compose build"
    # The network first, to let its bridge through a FORWARD policy of DROP.
    dc up --no-start >"$work/up-no-start.log" 2>&1 ||
        fail "docker-compose up --no-start failed: $(tail -n 15 "$work/up-no-start.log")"
    net_id=$(docker network ls -q --no-trunc --filter "label=com.docker.compose.project=$project" | head -n 1)
    [ -n "$net_id" ] || fail "docker-compose up --no-start made no network for $project"
    forward_open "br-${net_id:0:12}"
    dc up --build -d >"$work/up.log" 2>&1 || fail "docker-compose up --build -d failed: $(tail -n 15 "$work/up.log")"
else
    # Built outside the namespace: the Dockerfile's apt-get needs the host's network.
    podman build --network host --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" -t inventoryd:local \
        -f "$root/Dockerfile" "$root" >"$work/build.log" 2>&1 ||
        fail "podman build failed: $(tail -n 15 "$work/build.log")"
    phase "podman build"
    dc up -d >"$work/up.log" 2>&1 || fail "podman-compose up -d failed: $(tail -n 15 "$work/up.log")"
fi
# first_sales WHEN: a redlock, a zookeeper-fenced and a mysql-fenced sale
# through nginx, one after the other: each must sell. Adds 3 to first_sales.
first_sales=0
first_sales() {
    local s code
    for s in redlock zookeeper-fenced mysql-fenced; do
        code=$(curl -s -o "$work/first-sale-$s.json" -w '%{http_code}' --max-time 20 "$base/inventory/sale/$s")
        first_sales=$((first_sales + 1))
        log "first $s sale $1: $code $(cat "$work/first-sale-$s.json")"
        [ "$code" = 200 ] && [ "$(jq -r .status "$work/first-sale-$s.json")" = sold ] ||
            fail "the $s sale $1 answered $code: $(cat "$work/first-sale-$s.json")"
        expect "$s: the first sale's strategy" "$(jq -r .strategy "$work/first-sale-$s.json")" "$s"
    done
}
# At once: the sales must sell (the instances are ready, nginx is up).
if [ "$engine" = docker ]; then
    first_sales "right after up"
    phase "$engine-compose up -d, and the first sales"
else
    # podman-compose did not wait: wait here, then the same must hold.
    phase "$engine-compose up -d"
    wait_ready "$base/readyz" "nginx"
    phase "waiting for /readyz through nginx after podman-compose up"
    first_sales "once /readyz answered 200"
fi
if [ "$engine" = docker ]; then
    net_id=$(docker network ls -q --no-trunc --filter "label=com.docker.compose.project=$project" | head -n 1)
    bridge=br-${net_id:0:12}
    ip link show "$bridge" >/dev/null 2>&1 || fail "the stack's network has no bridge $bridge on the host"
    for s in nginx inventoryd-3786 inventoryd-3787 zookeeper mariadb; do
        st=$(docker inspect --format '{{.State.Health.Status}}' "$(dc ps -q "$s")" 2>/dev/null)
        expect "$s health after up" "$st" healthy
    done
fi

# ---- (4) the sales through nginx -------------------------------------------
code=$(curl -s -o "$work/reset-401.json" -w '%{http_code}' --max-time 10 -X POST \
    -d "{\"stock\":$stock}" "$base/inventory/reset")
expect "a reset through nginx without the admin token" "$code" 401

# MariaDB's grants suffice for what inventoryd does there, the end_session
# fault too: it KILLs the holder's session from another of its own pool
# (directly on an instance: nginx's log counts the sales above).
code=$(admin_curl -s -o "$work/end-session.json" -w '%{http_code}' --max-time 20 \
    "http://127.0.0.1:$STACK_INSTANCE_PORT_1/inventory/sale/mysql-fenced?end_session=1")
log "a mysql-fenced sale with end_session=1 on inventoryd-3786: $code $(cat "$work/end-session.json")"
expect "mysql-fenced with end_session=1: status" "$code $(jq -r .status "$work/end-session.json")" "200 sold"
expect "mysql-fenced with end_session=1: session_ended" "$(jq -r .session_ended "$work/end-session.json")" true

sales_round() {
    local s=$1
    reset_stock "$s"
    load_kv "$s"
    [ "$load_rc" -eq 0 ] || fail "inventory-load for $s exited with $load_rc: $(cat "$work/load-$s.log")"
    log "$s: $load_out"
    expect "$s: requests made" "${L[requests]}" "$requests"
    expect "$s: transport errors seen by clients" "${L[errors]}" 0
    expect "$s: answers that were neither sold nor sold_out" "${L[other]}" 0
    fetch_audit "$s"
    log "$s: audit $(cat "$work/audit-$s.json")"
}
for s in atomic redisson redlock; do
    sales_round "$s"
    expect "$s: units clients saw sold" "${L[sold]}" "$stock"
    expect "$s: audit.sold" "$(jqv "$s" .sold)" "$stock"
    expect "$s: audit.sold_twice" "$(jqv "$s" .sold_twice)" 0
    expect "$s: audit.oversold" "$(jqv "$s" .oversold)" false
    expect "$s: audit.stock" "$(jqv "$s" .stock)" 0
done
clients=${COMPOSE_LOCAL_CLIENTS:-100} sales_round local
expect "local: audit.sold vs units clients saw sold" "$(jqv local .sold)" "${L[sold]}"
[ "${L[sold]}" -gt "$stock" ] && [ "$(jqv local .oversold)" = true ] ||
    fail "local did not oversell across the two instances: clients saw ${L[sold]} sold of $stock, audit $(cat "$work/audit-local.json")"
log "local oversold $(( L[sold] - stock )) units across the two instances (sold_twice $(jqv local .sold_twice))"

# The split, from nginx's own log: upstream=<address>:<port> on every sale.
if [ "$engine" = docker ]; then
    dc logs --no-color nginx >"$work/nginx-access.txt" 2>&1
else
    podman logs "${project}_nginx_1" >"$work/nginx-access.txt" 2>&1
fi
hits1=$(grep -c '"GET /inventory/sale/[a-z-]* .*upstream=[0-9.]*:3786 ' "$work/nginx-access.txt" || true)
hits2=$(grep -c '"GET /inventory/sale/[a-z-]* .*upstream=[0-9.]*:3787 ' "$work/nginx-access.txt" || true)
log "nginx sent $hits1 sales to inventoryd-3786 (weight 1) and $hits2 to inventoryd-3787 (weight 2)"
expect "sales nginx logged vs requests made (4 rounds and the $first_sales first sales)" $((hits1 + hits2)) $((4 * requests + first_sales))
[ $((hits2 * 10)) -ge $((hits1 * 18)) ] && [ $((hits2 * 10)) -le $((hits1 * 22)) ] ||
    fail "nginx split the sales $hits1:$hits2, not 1:2 (weights 1 and 2) within 10%"
phase "4 rounds of $requests sales through nginx"

# ---- (5) the lab through nginx ---------------------------------------------
code=$(curl -s -o "$work/page.html" -w '%{http_code} %{content_type}' --max-time 10 "$base/")
case $code in "200 text/html"*) ;; *) fail "GET / through nginx answered $code" ;; esac
grep -qi '<html' "$work/page.html" || fail "GET / through nginx is not the lab page"
curl -sf --max-time 10 "$base/lab" >"$work/lab.json" || fail "GET /lab through nginx failed"
expect "GET /lab: enabled" "$(jq -r .enabled "$work/lab.json")" true
expect "GET /lab: token_required" "$(jq -r .token_required "$work/lab.json")" true
code=$(admin_curl -s -o "$work/lab-run.json" -w '%{http_code}' --max-time 10 -X POST \
    -H 'Content-Type: application/json' \
    -d '{"strategy":"redisson","clients":20,"requests":300,"stock":200}' "$base/lab/runs")
expect "POST /lab/runs with the token: status ($(cat "$work/lab-run.json"))" "$code" 202
run_id=$(jq -r .id "$work/lab-run.json")
for i in $(seq 1 600); do
    curl -sf --max-time 10 "$base/lab/runs/$run_id" >"$work/lab-run.json" || fail "GET /lab/runs/$run_id failed"
    [ "$(jq -r '.audit != null and .state != "running"' "$work/lab-run.json")" = true ] && break
    sleep 0.1
done
log "lab run $run_id: $(jq -c '{state, counts, audit}' "$work/lab-run.json")"
expect "lab run: audit.sold" "$(jq -r .audit.sold "$work/lab-run.json")" 200
expect "lab run: audit.sold_twice" "$(jq -r .audit.sold_twice "$work/lab-run.json")" 0
phase "the lab through nginx"

# ---- (6) the cluster profile -----------------------------------------------
cbase="http://127.0.0.1:$STACK_CLUSTER_INSTANCE_PORT"
if [ "$engine" = docker ]; then
    dc --profile cluster up -d >"$work/up-cluster.log" 2>&1 ||
        fail "docker-compose --profile cluster up -d failed: $(tail -n 15 "$work/up-cluster.log")"
    # Served at once: no reset first. The instance's start-up seed of
    # inventory001 can fall in the CLUSTERDOWN window just after
    # redis-cluster-create; /readyz makes it before it says ready, and up
    # waits for /readyz.
    code=$(curl -s -o "$work/first-cluster-sale.json" -w '%{http_code}' --max-time 20 "$cbase/inventory/sale/redisson")
    phase "docker-compose --profile cluster up -d"
else
    # podman-compose started the cluster with everything else (no profiles).
    wait_ready "$cbase/readyz" "inventoryd-cluster"
    code=$(curl -s -o "$work/first-cluster-sale.json" -w '%{http_code}' --max-time 20 "$cbase/inventory/sale/redisson")
    phase "waiting for inventoryd-cluster's /readyz"
fi
log "first cluster sale right after up: $code $(cat "$work/first-cluster-sale.json")"
[ "$code" = 200 ] && [ "$(jq -r .status "$work/first-cluster-sale.json")" = sold ] ||
    fail "the sale on the cluster instance right after up answered $code: $(cat "$work/first-cluster-sale.json")"
code=$(admin_curl -s -o "$work/reset-cluster.json" -w '%{http_code}' --max-time 10 -X POST \
    -d '{"stock":200,"item":"inventory002"}' "$cbase/inventory/reset")
expect "cluster: reset of inventory002 ($(cat "$work/reset-cluster.json"))" "$code" 200
"$load" --host 127.0.0.1 --port "$STACK_CLUSTER_INSTANCE_PORT" \
    --path '/inventory/sale/redisson?item=inventory002' --clients 20 --requests 400 \
    --timeout-ms 60000 --format kv >"$work/load-cluster.out" 2>"$work/load-cluster.log" ||
    fail "inventory-load on the cluster instance failed: $(cat "$work/load-cluster.log")"
kv_parse "$work/load-cluster.out"
log "cluster redisson: $(cat "$work/load-cluster.out")"
expect "cluster: transport errors" "${L[errors]}" 0
expect "cluster: answers neither sold nor sold_out" "${L[other]}" 0
expect "cluster: units clients saw sold" "${L[sold]}" 200
curl -sf --max-time 10 "$cbase/inventory/audit?item=inventory002" >"$work/audit-cluster.json" ||
    fail "cluster: GET /inventory/audit failed"
log "cluster: audit $(cat "$work/audit-cluster.json")"
expect "cluster: audit.sold" "$(jq -r .sold "$work/audit-cluster.json")" 200
expect "cluster: audit.sold_twice" "$(jq -r .sold_twice "$work/audit-cluster.json")" 0
phase "the cluster profile's sales"

# MariaDB's password: in no answer this test saved, in no log of the stack.
if [ "$engine" = docker ]; then
    dc --profile cluster logs --no-color >"$work/stack-all.log" 2>&1
else
    for c in $(podman ps -a --format '{{.Names}}' --filter "label=com.docker.compose.project=$project"); do
        podman logs "$c" >>"$work/stack-all.log" 2>&1
    done
fi
! grep -l -F -e "$mysql_secret" "$work"/*.json "$work/stack-all.log" "$work/nginx-access.txt" ||
    fail "MariaDB's password shows in the files above (answers, or the stack's logs)"
log "MariaDB's password shows in no answer and no log of the stack ($(wc -l <"$work/stack-all.log") lines of logs)"

# ---- (7) down: nothing left ------------------------------------------------
stack_down >"$work/down.log" 2>&1 || fail "down failed: $(tail -n 15 "$work/down.log")"
up=0
sed -n "s/^$tag: /&/p" "$work/down.log"
phase "$engine-compose down"
left=$(project_containers)
[ -z "$left" ] || fail "containers left after down: $left"
left=$(project_networks)
[ -z "$left" ] || fail "networks left after down: $left"
left=$(project_volumes)
[ -z "$left" ] || fail "volumes left after down: $left"
for v in "${port_vars[@]}"; do
    p=${!v}
    [ -z "$(ss -Htln "sport = :$p")" ] || fail "port $p ($v) is still listened on after down: $(ss -Htlnp "sport = :$p")"
done
if [ "$engine" = docker ]; then
    ! ip link show "$bridge" >/dev/null 2>&1 || fail "the bridge $bridge of the stack's network is left after down"
    log "after down: no container, no network (nor its bridge $bridge), no volume and no listening port of $project is left"
else
    log "after down: no container, no network, no volume and no listening port of $project is left in $netns"
fi

stop_engine
log "time: in all $(( ($(now_ms) - t_start) / 1000 )) s"
log "PASS: the compose stack ran: up returns ready (redlock, zookeeper-fenced and mysql-fenced sold at once), atomic, redisson and redlock sold exactly 200 each through nginx, local oversold, nginx split 1:2, the lab ran, the cluster profile served at once, down left nothing"
