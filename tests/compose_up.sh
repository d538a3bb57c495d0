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
#   (2) scripts/images.sh: debian:12, redis:7.0 and nginx:1.22 made from
#       Debian's packages when missing (no registry is reached).
#   (3) `docker-compose up --build -d` under a project name of its own, every
#       published port a free one (STACK_*_PORT), a random admin token in
#       INVENTORYD_ADMIN_TOKEN. It must return only once a sale can succeed:
#       the very next request, a redlock sale through nginx, must sell.
#   (4) Through nginx, with the admin token: a reset without it is refused
#       (401); then for atomic, redisson and redlock, reset to 200 and
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
#   (7) `docker-compose --profile cluster down`: then no container and no
#       network of the project is left, and no published port is listened on.
#
# Prints the time of each phase. Exits 0 on pass, 1 on the first failure
# (named on stderr, with the stack's logs), 77 (skip) only when no engine
# answers and this is not root, so none can be started.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tag=compose-up

[ $# -eq 1 ] || { echo "usage: $0 INVENTORY_LOAD" >&2; exit 2; }
load=$(realpath "$1")
[ -x "$load" ] || die "$1 is not an executable"
clients=${COMPOSE_CLIENTS:-50}
requests=${COMPOSE_REQUESTS:-1200}
stock=200

require_tools docker-compose docker curl jq ss
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

# phase NAME: logs how long the phase that ends here took, since the last one.
t_phase=$t_start
phase() {
    local now
    now=$(now_ms)
    log "time: $1 took $(( (now - t_phase) / 1000 )).$(( (now - t_phase) % 1000 / 100 )) s"
    t_phase=$now
}

dc() { docker-compose -p "$project" -f "$root/docker-compose.yml" --project-directory "$root" "$@"; }

# On a failure: the stack's own logs, then ours.
on_fail() {
    if [ "$up" = 1 ]; then
        dc --profile cluster ps >&2 2>&1 || true
        dc --profile cluster logs --no-color --tail 30 >"$work/stack.log" 2>&1 || true
    fi
    show_logs "$work" 40
}

cleanup() {
    stop_started
    if [ "$up" = 1 ]; then
        dc --profile cluster down -v --remove-orphans -t 5 >"$work/down-cleanup.log" 2>&1 || true
    fi
    stop_engine
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
if docker info >/dev/null 2>&1; then
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
bash "$root/scripts/images.sh" --engine docker >"$work/images.log" 2>&1 ||
    fail "scripts/images.sh failed: $(tail -n 5 "$work/images.log")"
sed "s/^/$tag: /" "$work/images.log"
phase "scripts/images.sh"

# ---- (3) up, on free ports -------------------------------------------------
port_vars=(STACK_REDIS_PORT STACK_REDLOCK_PORT_1 STACK_REDLOCK_PORT_2 STACK_REDLOCK_PORT_3
           STACK_INSTANCE_PORT_1 STACK_INSTANCE_PORT_2 STACK_NGINX_PORT
           STACK_CLUSTER_PORT_1 STACK_CLUSTER_PORT_2 STACK_CLUSTER_PORT_3 STACK_CLUSTER_PORT_4
           STACK_CLUSTER_PORT_5 STACK_CLUSTER_PORT_6 STACK_CLUSTER_INSTANCE_PORT)
for v in "${port_vars[@]}"; do
    pick_port
    export "$v=$port"
done
nginx_port=$STACK_NGINX_PORT
base="http://127.0.0.1:$nginx_port"
admin_token=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export INVENTORYD_ADMIN_TOKEN=$admin_token
log "project $project: nginx on $nginx_port, instances on $STACK_INSTANCE_PORT_1 and $STACK_INSTANCE_PORT_2, cluster instance on $STACK_CLUSTER_INSTANCE_PORT"

up=1
dc build >"$work/build.log" 2>&1 || fail "docker-compose build failed: $(tail -n 15 "$work/build.log")"
phase "docker-compose build"
dc up --build -d >"$work/up.log" 2>&1 || fail "docker-compose up --build -d failed: $(tail -n 15 "$work/up.log")"
# At once: a redlock sale must sell (the instances are ready, nginx is up).
code=$(curl -s -o "$work/first-sale.json" -w '%{http_code}' --max-time 20 "$base/inventory/sale/redlock")
phase "docker-compose up --build -d (images built)"
log "first redlock sale right after up: $code $(cat "$work/first-sale.json")"
[ "$code" = 200 ] && [ "$(jq -r .status "$work/first-sale.json")" = sold ] ||
    fail "the redlock sale right after docker-compose up answered $code: $(cat "$work/first-sale.json")"
net_id=$(docker network ls -q --no-trunc --filter "label=com.docker.compose.project=$project" | head -n 1)
bridge=br-${net_id:0:12}
ip link show "$bridge" >/dev/null 2>&1 || fail "the stack's network has no bridge $bridge on the host"
for s in nginx inventoryd-3786 inventoryd-3787; do
    st=$(docker inspect --format '{{.State.Health.Status}}' "$(dc ps -q "$s")" 2>/dev/null)
    expect "$s health after up" "$st" healthy
done

# ---- (4) the sales through nginx -------------------------------------------
code=$(curl -s -o "$work/reset-401.json" -w '%{http_code}' --max-time 10 -X POST \
    -d "{\"stock\":$stock}" "$base/inventory/reset")
expect "a reset through nginx without the admin token" "$code" 401

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
dc logs --no-color nginx >"$work/nginx-access.txt" 2>&1
hits1=$(grep -c '"GET /inventory/sale/[a-z-]* .*upstream=[0-9.]*:3786 ' "$work/nginx-access.txt" || true)
hits2=$(grep -c '"GET /inventory/sale/[a-z-]* .*upstream=[0-9.]*:3787 ' "$work/nginx-access.txt" || true)
log "nginx sent $hits1 sales to inventoryd-3786 (weight 1) and $hits2 to inventoryd-3787 (weight 2)"
expect "sales nginx logged vs requests made (4 rounds and the first sale)" $((hits1 + hits2)) $((4 * requests + 1))
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
dc --profile cluster up -d >"$work/up-cluster.log" 2>&1 ||
    fail "docker-compose --profile cluster up -d failed: $(tail -n 15 "$work/up-cluster.log")"
cbase="http://127.0.0.1:$STACK_CLUSTER_INSTANCE_PORT"
code=$(curl -s -o "$work/first-cluster-sale.json" -w '%{http_code}' --max-time 20 "$cbase/inventory/sale/redisson")
phase "docker-compose --profile cluster up -d"
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

# ---- (7) down: nothing left ------------------------------------------------
dc --profile cluster down -v --remove-orphans -t 5 >"$work/down.log" 2>&1 ||
    fail "docker-compose down failed: $(tail -n 15 "$work/down.log")"
up=0
phase "docker-compose --profile cluster down"
left=$(docker ps -aq --filter "label=com.docker.compose.project=$project")
[ -z "$left" ] || fail "containers left after down: $(docker ps -a --filter "label=com.docker.compose.project=$project" --format '{{.Names}}')"
left=$(docker network ls -q --filter "label=com.docker.compose.project=$project")
[ -z "$left" ] || fail "networks left after down: $(docker network ls --filter "label=com.docker.compose.project=$project" --format '{{.Name}}')"
for v in "${port_vars[@]}"; do
    p=${!v}
    [ -z "$(ss -Htln "sport = :$p")" ] || fail "port $p ($v) is still listened on after down: $(ss -Htlnp "sport = :$p")"
done
! ip link show "$bridge" >/dev/null 2>&1 || fail "the bridge $bridge of the stack's network is left after down"
log "after down: no container, no network (nor its bridge $bridge) and no listening port of $project is left"

stop_engine
log "time: in all $(( ($(now_ms) - t_start) / 1000 )) s"
log "PASS: the compose stack ran: up returns ready, atomic, redisson and redlock sold exactly 200 each through nginx, local oversold, nginx split 1:2, the lab ran, the cluster profile served at once, down left nothing"
