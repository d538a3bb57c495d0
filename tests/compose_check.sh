#!/usr/bin/env bash
# compose_check.sh [INVENTORYD]
#
# The container stack must be the local stack in containers:
#   (a) `docker-compose -f docker-compose.yml config` accepts the file
#       (Debian's docker-compose package is installed when missing);
#   (b) what it describes agrees with the local stack: Redis 6379, Redlock
#       masters 6381-6383 (three redis-servers, no replication), ZooKeeper
#       2181 and MariaDB 3306, inventoryd on 3786 and 3787, nginx on 8080
#       with upstream weights 1 and 2, every port published on 127.0.0.1
#       only; ZooKeeper's zoo.cfg lines and mariadbd's options are those of
#       scripts/lib.sh's start_zookeeper and start_mariadb (but for what a
#       container sets otherwise: its listen address, its paths), and each
#       store keeps its data in a volume; the instances' zookeeper.connect
#       and mysql.host/port/user/database name those services, their ports
#       and MariaDB's user and database, and INVENTORYD_MYSQL_PASSWORD is
#       the password MariaDB gives that user (the caller's, else the
#       documented default "inventoryd"), shown masked; every image that is
#       not built here is one scripts/images.sh makes; nginx/nginx.compose.conf is the
#       template rendered for the service names; the defaults of
#       config/inventoryd.properties, nginx/nginx.conf and scripts/demo.sh
#       are those same ports; the Dockerfile builds on Debian 12, installs
#       the -dev package of every library CMakeLists.txt links (and only
#       -dev packages scripts/deps.sh names too), and copies every source
#       folder CMakeLists.txt reads; the cluster profile runs six
#       cluster-enabled nodes on 6371-6376, joins them with one replica per
#       master, and an instance on 3796 whose settings name them; every
#       instance gets INVENTORYD_ADMIN_TOKEN from the caller's environment,
#       and with it unset (or empty) `config` refuses the file before
#       anything starts, saying to set INVENTORYD_ADMIN_TOKEN; each STACK_*_PORT variable moves
#       its published port on the host and changes nothing else; every
#       instance is healthy only once GET /readyz answers 200, nginx has a
#       healthcheck, and the one-shots ready and cluster-ready start once
#       nginx and inventoryd-cluster are healthy (so `up -d` waits for them);
#       the instances start once Redis, the masters, ZooKeeper and MariaDB
#       are healthy, and the two stores have healthchecks.
# With INVENTORYD (a built binary), each instance's compose command is also
# run through `inventoryd --check-config`, with its compose environment (a
# test token for INVENTORYD_ADMIN_TOKEN), so an unknown key or a bad value
# fails here, and the effective settings are the ones compared; without the
# token the instances must refuse, naming admin.token.
#
# No Docker engine is needed. Prints every check; exits 0 when all passed,
# 1 otherwise (each failure named on stderr).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
inventoryd=${1:-}
if [ -n "$inventoryd" ]; then
    [ -x "$inventoryd" ] || { echo "compose: FAIL: '$inventoryd' is not an executable" >&2; exit 1; }
    inventoryd=$(realpath "$inventoryd")
fi

die() {
    echo "compose: FAIL: $*" >&2
    exit 1
}

# apt_install PKG...: installs Debian packages, with apt-get update only if
# the first try fails (the lists may be missing on a fresh machine).
apt_install() {
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 ||
            die "$* missing, and not root and no sudo: install it by hand (apt-get install $*)"
        sudo=(sudo)
    fi
    echo "compose: installing $* (Debian packages)"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "$@" >/dev/null 2>&1; then
        "${sudo[@]}" apt-get update -qq >/dev/null 2>&1
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "$@" >/dev/null ||
            die "apt-get install $* failed"
    fi
}

command -v docker-compose >/dev/null 2>&1 || apt_install docker-compose
command -v docker-compose >/dev/null 2>&1 || die "docker-compose still not found after installing it"
python3 -c 'import yaml' >/dev/null 2>&1 || apt_install python3-yaml
python3 -c 'import yaml' >/dev/null 2>&1 || die "python3 with the yaml module is needed to read the compose file"

work=$(mktemp -d /tmp/inventoryd-compose.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The published ports are the defaults unless STACK_*_PORT says otherwise:
# the comparison below is with the defaults, so none may come from outside.
# The same for MariaDB's password, which the comparison gives itself.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^STACK_|^INVENTORYD_MYSQL_PASSWORD$' || true)
# Each overridable port and its default, in the order of docker-compose.yml.
stack_ports="STACK_REDIS_PORT=6379 STACK_REDLOCK_PORT_1=6381 STACK_REDLOCK_PORT_2=6382
STACK_REDLOCK_PORT_3=6383 STACK_ZOOKEEPER_PORT=2181 STACK_MYSQL_PORT=3306 STACK_INSTANCE_PORT_1=3786 STACK_INSTANCE_PORT_2=3787 STACK_NGINX_PORT=8080
STACK_CLUSTER_PORT_1=6371 STACK_CLUSTER_PORT_2=6372 STACK_CLUSTER_PORT_3=6373 STACK_CLUSTER_PORT_4=6374
STACK_CLUSTER_PORT_5=6375 STACK_CLUSTER_PORT_6=6376 STACK_CLUSTER_INSTANCE_PORT=3796"

# ---- (a) the file is valid ---------------------------------------------------
cd "$root" || die "cannot cd to $root"
[ -f docker-compose.yml ] || die "docker-compose.yml is missing at the repository root"
# The token the instances get from the caller's environment: a test one
# here (the comparison below looks for it). Without one, compose itself
# must refuse, naming the variable, before it builds or starts anything
# (the instances would refuse one by one, and `up` end in "nginx is
# unhealthy").
check_token=compose-check-token-0123456789
for unset in "env -u INVENTORYD_ADMIN_TOKEN" "env INVENTORYD_ADMIN_TOKEN="; do
    if $unset docker-compose -f docker-compose.yml config >/dev/null 2>"$work/config.err"; then
        die "docker-compose -f docker-compose.yml config accepts the file with '$unset': up would start instances that refuse to run"
    fi
    grep -q "set INVENTORYD_ADMIN_TOKEN" "$work/config.err" || {
        cat "$work/config.err" >&2
        die "with '$unset', docker-compose config fails without saying to set INVENTORYD_ADMIN_TOKEN (above)"
    }
done
echo "compose: ok: without INVENTORYD_ADMIN_TOKEN (unset or empty) docker-compose refuses up front: $(sed -n 's/.*: \(set INVENTORYD_ADMIN_TOKEN.*\)$/\1/p' "$work/config.err" | head -n 1)"
if ! INVENTORYD_ADMIN_TOKEN=$check_token docker-compose -f docker-compose.yml config \
        >"$work/config.yml" 2>"$work/config.err"; then
    cat "$work/config.err" >&2
    die "docker-compose -f docker-compose.yml config rejected the file (above)"
fi
echo "compose: ok: docker-compose -f docker-compose.yml config accepts the file with INVENTORYD_ADMIN_TOKEN set ($(docker-compose version --short 2>/dev/null || echo '?'))"
if [ -s "$work/config.err" ]; then
    echo "compose: note: docker-compose config said:"
    sed 's/^/    /' "$work/config.err"
fi

# podman-compose 1.0.3 substitutes no "${VAR:-}" with an empty default: it
# would hand the instances that very text as their admin token.
if grep -q '\${INVENTORYD_ADMIN_TOKEN:-}' docker-compose.yml; then
    die 'docker-compose.yml passes ${INVENTORYD_ADMIN_TOKEN:-}: podman-compose 1.0.3 gives the instances that text as their token; write ${INVENTORYD_ADMIN_TOKEN}'
fi
echo 'compose: ok: the token is passed as ${INVENTORYD_ADMIN_TOKEN:?...}, without a ":-" default (podman-compose 1.0.3 passes one on literally)'

# Every published port overridden (20000 + its default): the overridden
# config is compared below with the default one.
overrides=()
for kv in $stack_ports; do overrides+=("${kv%%=*}=$((20000 + ${kv#*=}))"); done
if ! env "${overrides[@]}" INVENTORYD_ADMIN_TOKEN=$check_token docker-compose -f docker-compose.yml config \
        >"$work/config-ports.yml" 2>"$work/config.err"; then
    cat "$work/config.err" >&2
    die "docker-compose -f docker-compose.yml config rejected the file with the STACK_*_PORT variables set (above)"
fi

# A password of the caller's: MariaDB and the instances must both take it.
check_password="compose-check-password-'\\-0123"
if ! INVENTORYD_MYSQL_PASSWORD=$check_password INVENTORYD_ADMIN_TOKEN=$check_token \
        docker-compose -f docker-compose.yml config >"$work/config-password.yml" 2>"$work/config.err"; then
    cat "$work/config.err" >&2
    die "docker-compose -f docker-compose.yml config rejected the file with INVENTORYD_MYSQL_PASSWORD set (above)"
fi

# The compose variant of nginx.conf, rendered afresh for the drift check.
bash scripts/nginx-conf.sh --listen-host 0.0.0.0 --up1-host inventoryd-3786 \
    --up2-host inventoryd-3787 --name nginx.compose.conf 8080 3786 3787 "$work/nginx" ||
    die "scripts/nginx-conf.sh could not render the compose variant"

# ---- (b) it agrees with the local stack --------------------------------------
python3 - "$root" "$work/config.yml" "$work/nginx/nginx.compose.conf" "$inventoryd" "$check_token" \
        "$work/config-ports.yml" "$stack_ports" "$work/config-password.yml" "$check_password" <<'PY'
import os, re, shlex, subprocess, sys
import yaml

(root, config_path, fresh_nginx, inventoryd, check_token, ports_path, stack_ports,
 password_path, check_password) = sys.argv[1:10]
failures = []

def ok(msg):
    print("compose: ok: " + msg)

def fail(msg):
    failures.append(msg)
    print("compose: FAIL: " + msg, file=sys.stderr)

def check(cond, good, bad):
    (ok if cond else fail)(good if cond else bad)
    return cond

def read(rel):
    with open(os.path.join(root, rel)) as f:
        return f.read()

# The local stack: one place for the numbers everything is compared with.
REDIS = 6379
MASTERS = [6381, 6382, 6383]
INSTANCES = [3786, 3787]          # weights 1 and 2, in this order
WEIGHTS = {3786: 1, 3787: 2}
NGINX = 8080
ZOOKEEPER = 2181
MYSQL = 3306
MYSQL_PASSWORD_DEFAULT = "inventoryd"   # docker-compose.yml's documented default
CONFIG_IN_IMAGE = "/etc/inventoryd/inventoryd.properties"

with open(config_path) as f:
    compose = yaml.safe_load(f)
services = compose.get("services") or {}

# --- ports, in the short syntax of docker-compose 1.x or the long one of 2.x
def ports_of(svc):
    out = []
    for p in services[svc].get("ports") or []:
        if isinstance(p, dict):
            out.append((str(p.get("host_ip", "")), str(p.get("published", "")),
                        str(p.get("target", "")), str(p.get("protocol", "tcp"))))
            continue
        s = str(p)
        proto = "tcp"
        if "/" in s:
            s, proto = s.rsplit("/", 1)
        parts = s.rsplit(":", 2)
        if len(parts) == 3:
            out.append((parts[0], parts[1], parts[2], proto))
        elif len(parts) == 2:
            out.append(("", parts[0], parts[1], proto))
        else:
            out.append(("", "", parts[0], proto))
    return out

def command_of(svc):
    c = services[svc].get("command")
    if c is None:
        return []
    return shlex.split(c) if isinstance(c, str) else [str(x) for x in c]

def flag(cmd, name):
    """Value after --name in a command, or None."""
    for i, a in enumerate(cmd[:-1]):
        if a == name:
            return cmd[i + 1]
    return None

def sets_of(cmd):
    out = {}
    for i, a in enumerate(cmd[:-1]):
        if a == "--set" and "=" in cmd[i + 1]:
            k, v = cmd[i + 1].split("=", 1)
            out[k] = v
    return out

def publishes(svc, port):
    ps = ports_of(svc)
    want = ("127.0.0.1", str(port), str(port), "tcp")
    return check(ps == [want],
                 f"{svc} publishes 127.0.0.1:{port} -> {port} and nothing else",
                 f"{svc} should publish exactly 127.0.0.1:{port}:{port}, has {ps or 'no ports'}")

def environment_of(svc):
    """svc's environment as compose resolved it, in the dict or list syntax."""
    e = services[svc].get("environment") or {}
    if isinstance(e, list):
        e = dict(x.split("=", 1) if "=" in x else (x, "") for x in e)
    return {str(k): "" if v is None else str(v) for k, v in e.items()}

def check_config(svc, cmd, with_env=True, env_over=None):
    """inventoryd --check-config on svc's command, the shipped file in place
    of the image's copy, with svc's compose environment (or none), and
    env_over on top."""
    args = [a if a != CONFIG_IN_IMAGE else os.path.join(root, "config/inventoryd.properties")
            for a in cmd]
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVENTORYD_")}
    if with_env:
        env.update(environment_of(svc))
    env.update(env_over or {})
    return subprocess.run([inventoryd] + args + ["--check-config"], capture_output=True,
                          text=True, env=env, timeout=30)

def effective(svc, cmd):
    """The settings inventoryd --check-config gives for svc's command and
    environment; None when it refuses."""
    r = check_config(svc, cmd)
    if not check(r.returncode == 0, f"{svc}: inventoryd --check-config accepts its command",
                 f"{svc}: inventoryd --check-config rejected its command: {r.stderr.strip()}"):
        return None
    return dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)

def admin_token(svc, cmd, eff):
    """svc gets admin.token from the caller's INVENTORYD_ADMIN_TOKEN, never
    shows it, and (on 0.0.0.0) refuses without it."""
    got = environment_of(svc).get("INVENTORYD_ADMIN_TOKEN")
    check(got == check_token,
          f"{svc}: environment INVENTORYD_ADMIN_TOKEN is the caller's (${{INVENTORYD_ADMIN_TOKEN:-}})",
          f"{svc}: environment INVENTORYD_ADMIN_TOKEN is {got!r}, expected the caller's value")
    if not inventoryd or eff is None:
        return
    check(eff.get("admin.token") == "****" and check_token not in str(eff),
          f"{svc}: effective admin.token is set, and shown as ****",
          f"{svc}: effective admin.token is {eff.get('admin.token')!r}, expected ****")
    r = check_config(svc, cmd, with_env=False)
    check(r.returncode != 0 and "admin.token" in r.stderr,
          f"{svc}: without INVENTORYD_ADMIN_TOKEN it refuses to start, naming admin.token",
          f"{svc}: without INVENTORYD_ADMIN_TOKEN --check-config exits {r.returncode}: "
          f"{r.stderr.strip() or r.stdout[:200]}")

# --- the services
want = ["redis"] + [f"redis-{p}" for p in MASTERS] + ["zookeeper", "mariadb"] + \
       [f"inventoryd-{p}" for p in INSTANCES] + ["nginx"]
missing = [s for s in want if s not in services]
check(not missing, "services: " + ", ".join(want),
      f"docker-compose.yml lacks service(s) {', '.join(missing)}")
extra = sorted(set(services) - set(want))
if extra:
    print("compose: note: other services, checked for 127.0.0.1 only: " + ", ".join(extra))
for svc in sorted(services):
    bad = [p for p in ports_of(svc) if p[0] != "127.0.0.1"]
    check(not bad, f"{svc}: every published port is on 127.0.0.1",
          f"{svc} publishes {bad} beyond 127.0.0.1; publish on 127.0.0.1 only")
if missing:
    print("compose: FAIL: stopping: services missing", file=sys.stderr)
    sys.exit(1)

def redis_port(svc):
    p = flag(command_of(svc), "--port")
    return int(p) if p and p.isdigit() else 6379   # redis-server's default

# --- Redis and the masters
publishes("redis", REDIS)
check(redis_port("redis") == REDIS, f"redis: redis-server --port {REDIS}",
      f"redis: redis-server listens on {redis_port('redis')} inside, expected {REDIS}")
for p in MASTERS:
    svc = f"redis-{p}"
    cmd = command_of(svc)
    publishes(svc, p)
    check(redis_port(svc) == p, f"{svc}: its own redis-server --port {p}",
          f"{svc}: redis-server listens on {redis_port(svc)} inside, expected {p}")
    repl = [a for a in cmd if a.lstrip("-").lower() in ("replicaof", "slaveof")]
    check(not repl and not services[svc].get("volumes_from"),
          f"{svc}: an independent master (no replicaof, no shared volumes)",
          f"{svc}: the Redlock masters must be independent; found {repl or 'volumes_from'}")

# --- the stores of the zookeeper and mysql strategies, as scripts/lib.sh
# starts them for the local stack (scripts/demo.sh)
lib = read("scripts/lib.sh")

def function_body(text, name):
    m = re.search(r"^" + re.escape(name) + r"\(\) \{\n(.*?)^\}", text, re.M | re.S)
    return m.group(1) if m else ""

def volume_targets(svc):
    """{target: source} of svc's volumes, in the short or the long syntax."""
    out = {}
    for v in services[svc].get("volumes") or []:
        if isinstance(v, dict):
            out[str(v.get("target"))] = str(v.get("source"))
        else:
            parts = str(v).split(":")
            if len(parts) >= 2:
                out[parts[1]] = parts[0]
    return out

def named_volume(svc, path, why):
    src = volume_targets(svc).get(path)
    check(src is not None and src in (compose.get("volumes") or {}),
          f"{svc}: {path} is the named volume {src} ({why})",
          f"{svc}: {path} should be a named volume ({why}); volumes: {services[svc].get('volumes')}")

def healthy_deps(svc):
    dep = services[svc].get("depends_on") or {}
    if isinstance(dep, list):
        return {d: None for d in dep}
    return {d: (c or {}).get("condition") for d, c in dep.items()}

# Images: every one that is not built here is one scripts/images.sh makes
# (this machine reaches no registry).
m = re.search(r"^names=\((.*?)\)", read("scripts/images.sh"), re.M)
made = m.group(1).split() if m else []
for svc in sorted(services):
    img = services[svc].get("image")
    if img and "build" not in services[svc]:
        check(img in made, f"{svc}: image {img} is one scripts/images.sh makes",
              f"{svc}: image {img} is not among scripts/images.sh's names {made}")

# ZooKeeper: its arguments are the lines of its zoo.cfg, those of
# start_zookeeper, but for the paths and the listen address.
zk_body = function_body(lib, "start_zookeeper").replace("\\\n", " ")
m = re.search(r"printf '%s\\n'((?:\s+\"[^\"]*\")+)\s*>\"\$dir/zoo\.cfg\"", zk_body)
local_zk = dict(kv.split("=", 1) for kv in re.findall(r'"([^"]*)"', m.group(1))) if m else {}
check(local_zk.get("clientPort") == "$p",
      f"scripts/lib.sh: start_zookeeper writes zoo.cfg {' '.join(f'{k}={v}' for k, v in local_zk.items())}",
      "scripts/lib.sh: start_zookeeper's zoo.cfg lines (printf ... >\"$dir/zoo.cfg\", clientPort=$p) not found")
zk_cmd = command_of("zookeeper")
zk_cfg = dict(a.split("=", 1) for a in zk_cmd if "=" in a)
check(len(zk_cfg) == len(zk_cmd), f"zookeeper: every argument is a zoo.cfg line KEY=VALUE",
      f"zookeeper: arguments {zk_cmd} are not all KEY=VALUE (images/zookeeper-entrypoint.sh)")
zk_port = int(zk_cfg["clientPort"]) if zk_cfg.get("clientPort", "").isdigit() else None
publishes("zookeeper", ZOOKEEPER)
check(zk_port == ZOOKEEPER, f"zookeeper: clientPort={ZOOKEEPER}",
      f"zookeeper: clientPort is {zk_cfg.get('clientPort')!r} inside, expected {ZOOKEEPER}")
for key, val in local_zk.items():
    if "$" in val or key == "clientPortAddress":
        continue    # the port, the paths and the address are the container's own
    check(zk_cfg.get(key) == val, f"zookeeper: {key}={val}, as start_zookeeper",
          f"zookeeper: {key} is {zk_cfg.get(key)!r}, start_zookeeper (scripts/lib.sh) writes {val!r}")
check(zk_cfg.get("clientPortAddress") in (None, "0.0.0.0"),
      "zookeeper: listens on every address of its container (published on 127.0.0.1 only)",
      f"zookeeper: clientPortAddress={zk_cfg.get('clientPortAddress')}: the other containers could not reach it")
stray = sorted(set(zk_cfg) - set(local_zk))
check(not stray, "zookeeper: no zoo.cfg line start_zookeeper does not write",
      f"zookeeper: zoo.cfg line(s) {stray} that start_zookeeper (scripts/lib.sh) does not write")
if zk_cfg.get("dataDir"):
    named_volume("zookeeper", zk_cfg["dataDir"],
                 "made again from nothing, ZooKeeper would issue czxids the fence refuses")
zk_hc = " ".join(str(x) for x in (services["zookeeper"].get("healthcheck") or {}).get("test") or [])
check("srvr" in zk_hc and f"/{zk_port}" in zk_hc,
      f"zookeeper: healthy when srvr on {zk_port} answers",
      f"zookeeper: the healthcheck should ask srvr on its clientPort, asks: {zk_hc or 'nothing'}")

# MariaDB: its arguments are mariadbd options, start_mariadb's but for the
# paths, the user and the address (images/mariadb-entrypoint.sh sets the
# datadir, socket and pid file; it runs as mysql, on every address).
mdb_body = function_body(lib, "start_mariadb")
m = re.search(r"^\s*mariadbd\s+(.*?)(?:&|>)", mdb_body, re.M | re.S)
local_opts = shlex.split(m.group(1).replace("\\\n", " ")) if m else []
check(any(o.startswith("--port=") for o in local_opts),
      f"scripts/lib.sh: start_mariadb runs mariadbd {' '.join(local_opts)}",
      "scripts/lib.sh: start_mariadb's mariadbd command line not found")
CONTAINER_OWN = ("--no-defaults", "--bind-address", "--user", "--datadir", "--socket",
                 "--pid-file", "--log-error", "--port")
def opt_name(o):
    return o.split("=", 1)[0]
mdb_cmd = command_of("mariadb")
mdb_port = next((int(o.split("=", 1)[1]) for o in mdb_cmd
                 if o.startswith("--port=") and o.split("=", 1)[1].isdigit()), None)
publishes("mariadb", MYSQL)
check(mdb_port == MYSQL, f"mariadb: mariadbd --port={MYSQL}",
      f"mariadb: mariadbd listens on {mdb_port} inside, expected {MYSQL}")
want_opts = sorted(o for o in local_opts if opt_name(o) not in CONTAINER_OWN)
got_opts = sorted(o for o in mdb_cmd if opt_name(o) not in CONTAINER_OWN)
check(want_opts == got_opts, f"mariadb: mariadbd {' '.join(got_opts)}, as start_mariadb",
      f"mariadb: mariadbd options {got_opts}, start_mariadb (scripts/lib.sh) runs {want_opts}")
bad = [o for o in mdb_cmd if opt_name(o) in CONTAINER_OWN and opt_name(o) != "--port"]
check(not bad, "mariadb: sets none of the paths, user or address its entrypoint sets",
      f"mariadb: {bad}: images/mariadb-entrypoint.sh sets those (and it runs as mysql, on every address)")
named_volume("mariadb", "/var/lib/mysql",
             "made again from nothing, the fence counter would start again at 1")
mdb_env = environment_of("mariadb")
mysql_user, mysql_db = mdb_env.get("MARIADB_USER", ""), mdb_env.get("MARIADB_DATABASE", "")
check(mysql_user and mysql_db and mysql_user != "root",
      f"mariadb: MARIADB_USER={mysql_user}, MARIADB_DATABASE={mysql_db}",
      f"mariadb: MARIADB_USER ({mysql_user!r}, not root) and MARIADB_DATABASE ({mysql_db!r}) must be set")
check(mdb_env.get("MARIADB_PASSWORD") == MYSQL_PASSWORD_DEFAULT,
      f"mariadb: MARIADB_PASSWORD is the documented default \"{MYSQL_PASSWORD_DEFAULT}\" when INVENTORYD_MYSQL_PASSWORD is unset",
      f"mariadb: with INVENTORYD_MYSQL_PASSWORD unset, MARIADB_PASSWORD is not the documented default")
with open(password_path) as f:
    pw_services = (yaml.safe_load(f) or {}).get("services") or {}
pw_env = lambda svc: {str(k): str(v) for k, v in
                      ((pw_services.get(svc) or {}).get("environment") or {}).items()}
check(pw_env("mariadb").get("MARIADB_PASSWORD") == check_password,
      "mariadb: MARIADB_PASSWORD is the caller's INVENTORYD_MYSQL_PASSWORD when set",
      "mariadb: MARIADB_PASSWORD does not follow INVENTORYD_MYSQL_PASSWORD")
mdb_hc = " ".join(str(x) for x in (services["mariadb"].get("healthcheck") or {}).get("test") or [])
check(f"-P {mdb_port}" in mdb_hc and "MARIADB_USER" in mdb_hc and "MARIADB_DATABASE" in mdb_hc
      and "MARIADB_PASSWORD" in mdb_hc,
      f"mariadb: healthy when MARIADB_USER logs in on {mdb_port} and uses MARIADB_DATABASE",
      f"mariadb: the healthcheck should log in as MARIADB_USER on -P {mdb_port}, runs: {mdb_hc or 'nothing'}")

# --- the instances
nodes_want = ",".join(f"redis-{p}:{p}" for p in MASTERS)
store_sets = (("zookeeper.connect", f"zookeeper:{zk_port}"), ("mysql.host", "mariadb"),
              ("mysql.port", str(mdb_port)), ("mysql.user", mysql_user),
              ("mysql.database", mysql_db))
for p in INSTANCES:
    svc = f"inventoryd-{p}"
    s = services[svc]
    cmd = command_of(svc)
    sets = sets_of(cmd)
    publishes(svc, p)
    b = s.get("build")
    ctx = b.get("context") if isinstance(b, dict) else b
    dockerfile = (b.get("dockerfile") if isinstance(b, dict) else None) or "Dockerfile"
    check(ctx is not None and os.path.realpath(ctx) == os.path.realpath(root)
          and dockerfile == "Dockerfile",
          f"{svc}: built from the repository's Dockerfile",
          f"{svc}: build should be the repository root with its Dockerfile, is {b!r}")
    check(flag(cmd, "--config") == CONFIG_IN_IMAGE,
          f"{svc}: --config {CONFIG_IN_IMAGE}",
          f"{svc}: command should pass --config {CONFIG_IN_IMAGE}, has {flag(cmd, '--config')!r}")
    for key, val in (("server.bind", "0.0.0.0"), ("server.port", str(p)),
                     ("redis.host", "redis"), ("redlock.nodes", nodes_want)) + store_sets:
        check(sets.get(key) == val, f"{svc}: --set {key}={val}",
              f"{svc}: --set {key} is {sets.get(key)!r}, expected {val!r}")
    dep = healthy_deps(svc)
    need = ["redis"] + [f"redis-{m}" for m in MASTERS] + ["zookeeper", "mariadb"]
    check(all(dep.get(d) == "service_healthy" for d in need),
          f"{svc}: starts once redis, the three masters, zookeeper and mariadb are healthy",
          f"{svc}: depends_on {dep}, should name {need}, each with condition service_healthy")
    env = environment_of(svc)
    check(env.get("INVENTORYD_MYSQL_PASSWORD") == mdb_env.get("MARIADB_PASSWORD")
          and pw_env(svc).get("INVENTORYD_MYSQL_PASSWORD") == check_password,
          f"{svc}: INVENTORYD_MYSQL_PASSWORD is mariadb's MARIADB_PASSWORD (the default, or the caller's)",
          f"{svc}: INVENTORYD_MYSQL_PASSWORD is not MARIADB_PASSWORD of mariadb, with the variable unset or set")

    # The effective settings, from the real parser.
    eff = effective(svc, cmd) if inventoryd else None
    admin_token(svc, cmd, eff)
    if inventoryd:
        if eff is None:
            continue
        for key, val in (("server.port", str(p)), ("server.bind", "0.0.0.0"),
                         ("redis.host", "redis"), ("redis.port", str(REDIS)),
                         ("redlock.nodes", nodes_want)) + store_sets:
            check(eff.get(key) == val, f"{svc}: effective {key}={val}",
                  f"{svc}: effective {key} is {eff.get(key)!r}, expected {val!r}")
        check(eff.get("mysql.password") == "****",
              f"{svc}: effective mysql.password is set, and shown as ****",
              f"{svc}: effective mysql.password is {eff.get('mysql.password')!r}, expected ****")
        r = check_config(svc, cmd, env_over={"INVENTORYD_MYSQL_PASSWORD": check_password})
        check(r.returncode == 0 and "mysql.password=****" in r.stdout
              and check_password not in r.stdout + r.stderr,
              f"{svc}: a password of the caller's is taken, and shown nowhere",
              f"{svc}: with INVENTORYD_MYSQL_PASSWORD set, --check-config exits {r.returncode} "
              f"or shows it: {r.stderr.strip() or r.stdout[:200]}")
        # ZooKeeper grants sessions of 2 to 20 ticks.
        tick = int(zk_cfg.get("tickTime", "2000"))
        st = int(eff.get("zookeeper.session-timeout-ms", "0"))
        check(2 * tick <= st <= 20 * tick,
              f"{svc}: zookeeper.session-timeout-ms={st} is within ZooKeeper's 2 to 20 ticks of {tick} ms",
              f"{svc}: zookeeper.session-timeout-ms={st}, ZooKeeper would make it {2 * tick} to {20 * tick}")
    # Every Redlock node is a master service on the port it listens on.
    for node in sets.get("redlock.nodes", "").split(","):
        host, _, port = node.rpartition(":")
        check(host in services and port.isdigit() and redis_port(host) == int(port),
              f"{svc}: redlock node {node} is a master service listening on {port}",
              f"{svc}: redlock node {node!r} is not a compose service listening on that port")

# --- the cluster profile: six cluster nodes on 6371-6376 (the demo's
# commented lines), a one-shot create, one instance on the cluster
CLUSTER = list(range(6371, 6377))
CLUSTER_INSTANCE = 3796
for p in CLUSTER:
    svc = f"redis-{p}"
    if not check(svc in services, f"cluster profile: {svc}", f"docker-compose.yml lacks {svc}"):
        continue
    publishes(svc, p)
    cmd = command_of(svc)
    check(redis_port(svc) == p and flag(cmd, "--cluster-enabled") == "yes",
          f"{svc}: redis-server --port {p} --cluster-enabled yes",
          f"{svc}: should run redis-server --port {p} --cluster-enabled yes, runs {cmd}")
    check(services[svc].get("profiles") == ["cluster"], f"{svc}: in the cluster profile only",
          f"{svc}: profiles {services[svc].get('profiles')}, expected ['cluster']")
create = " ".join(command_of("redis-cluster-create")) if "redis-cluster-create" in services else ""
check(all(f":{p}" in create for p in CLUSTER) and "--cluster-replicas 1" in create,
      "redis-cluster-create joins the six nodes, one replica per master",
      f"redis-cluster-create should run redis-cli --cluster create over 6371-6376 with "
      f"--cluster-replicas 1: {create or 'missing'}")
svc = "inventoryd-cluster"
if check(svc in services, f"cluster profile: {svc}", f"docker-compose.yml lacks {svc}"):
    publishes(svc, CLUSTER_INSTANCE)
    cmd = command_of(svc)
    eff = effective(svc, cmd) if inventoryd else None
    admin_token(svc, cmd, eff)
    if eff is not None:
        seeds = eff.get("redis.cluster.nodes", "")
        check(seeds and all(n.rpartition(":")[0] in services and
                            redis_port(n.rpartition(":")[0]) == int(n.rpartition(":")[2])
                            for n in seeds.split(",")),
              f"{svc}: effective redis.cluster.nodes={seeds}, each a cluster node's service",
              f"{svc}: redis.cluster.nodes {seeds!r} should name cluster node services")

# --- nginx
publishes("nginx", NGINX)
vols = services["nginx"].get("volumes") or []
conf_src = None
for v in vols:
    if isinstance(v, dict):
        src, dst = v.get("source"), v.get("target")
    else:
        parts = str(v).split(":")
        src, dst = parts[0], parts[1] if len(parts) > 1 else ""
    if src and os.path.realpath(src) == os.path.join(os.path.realpath(root), "nginx/nginx.compose.conf"):
        conf_src, conf_dst = src, dst
ncmd = command_of("nginx")
if check(conf_src is not None, "nginx: mounts nginx/nginx.compose.conf",
         f"nginx: no volume mounts nginx/nginx.compose.conf (volumes: {vols})"):
    check(flag(ncmd, "-c") == conf_dst, f"nginx: runs -c {conf_dst}",
          f"nginx: command {ncmd} does not read the mounted {conf_dst} (-c)")
    check(flag(ncmd, "-p") is not None, f"nginx: runs with a prefix (-p {flag(ncmd, '-p')}) for its relative paths",
          "nginx: command has no -p; the template's pid, logs and temp paths are relative to it")

def nginx_numbers(text):
    listen = re.findall(r"^\s*listen\s+(\S+?):(\d+)[\s;]", text, re.M)
    servers = re.findall(r"^\s*server\s+(\S+?):(\d+)\s+weight=(\d+)\s*;", text, re.M)
    return listen, servers

try:
    compose_conf = read("nginx/nginx.compose.conf")
except OSError as e:
    compose_conf = ""
    fail(f"nginx/nginx.compose.conf: {e}")
if compose_conf:
    with open(fresh_nginx) as f:
        check(f.read() == compose_conf,
              "nginx/nginx.compose.conf is nginx/nginx.conf.in rendered for the service names",
              "nginx/nginx.compose.conf differs from the template's rendering; run "
              "scripts/nginx-conf.sh --listen-host 0.0.0.0 --up1-host inventoryd-3786 "
              "--up2-host inventoryd-3787 --name nginx.compose.conf 8080 3786 3787 nginx")
    listen, servers = nginx_numbers(compose_conf)
    check(listen == [("0.0.0.0", str(NGINX))],
          f"nginx.compose.conf: listen 0.0.0.0:{NGINX} (the published port's target)",
          f"nginx.compose.conf: listen {listen}, expected 0.0.0.0:{NGINX}")
    want_up = [(f"inventoryd-{p}", str(p), str(WEIGHTS[p])) for p in INSTANCES]
    check(servers == want_up,
          "nginx.compose.conf: upstream " +
          ", ".join(f"{h}:{p} weight={w}" for h, p, w in want_up),
          f"nginx.compose.conf: upstream {servers}, expected {want_up}")

# --- STACK_*_PORT moves a published port on the host, and nothing else
with open(ports_path) as f:
    moved = (yaml.safe_load(f) or {}).get("services") or {}
defaults = dict(kv.split("=") for kv in stack_ports.split())
by_default = {}
for svc in services:
    for ip, pub, tgt, proto in ports_of(svc):
        by_default[pub] = (svc, tgt)
for var, dflt in defaults.items():
    svc, tgt = by_default.get(dflt, (None, None))
    if not check(svc is not None, f"{var} (default {dflt}) is a published port",
                 f"no service publishes {dflt}, the default of {var}"):
        continue
    want = ("127.0.0.1", str(20000 + int(dflt)), tgt, "tcp")
    saved = services
    services = moved
    got = ports_of(svc) if svc in moved else []
    services = saved
    check(got == [want], f"{svc}: {var}={want[1]} publishes 127.0.0.1:{want[1]} -> {tgt}",
          f"{svc}: with {var}={want[1]} it publishes {got}, expected [{want}]")
    for key in ("command", "healthcheck", "environment"):
        check(moved.get(svc, {}).get(key) == services[svc].get(key),
              f"{svc}: {var} changes no {key}",
              f"{svc}: with {var} set its {key} changed")

# --- ready means ready: the instances are healthy once /readyz says so, and
# `up -d` returns only once nginx is (the one-shot services start last)
for svc in [f"inventoryd-{p}" for p in INSTANCES] + ["inventoryd-cluster"]:
    hc = " ".join(str(x) for x in (services.get(svc, {}).get("healthcheck") or {}).get("test") or [])
    check("/readyz" in hc, f"{svc}: healthy when GET /readyz answers 200",
          f"{svc}: the healthcheck should ask /readyz, asks: {hc or 'nothing'}")
for gate, after in (("ready", "nginx"), ("cluster-ready", "inventoryd-cluster")):
    dep = (services.get(gate) or {}).get("depends_on") or {}
    cond = dep.get(after, {}).get("condition") if isinstance(dep, dict) else None
    check(cond == "service_healthy", f"{gate}: starts once {after} is healthy",
          f"{gate}: should depend on {after} with condition service_healthy, has {dep}")
check("healthcheck" in services.get("nginx", {}), "nginx: has a healthcheck (through it to /readyz)",
      "nginx: no healthcheck, so `up -d` cannot wait for it")

# --- the local stack's own files
local_listen, local_servers = nginx_numbers(read("nginx/nginx.conf"))
want_local = [("127.0.0.1", str(p), str(WEIGHTS[p])) for p in INSTANCES]
check(local_listen == [("127.0.0.1", str(NGINX))] and local_servers == want_local,
      f"nginx/nginx.conf (local): listen 127.0.0.1:{NGINX}, upstream 3786 weight=1, 3787 weight=2",
      f"nginx/nginx.conf (local): listen {local_listen}, upstream {local_servers}")
if compose_conf:
    _, cs = nginx_numbers(compose_conf)
    check([(p, w) for _, p, w in cs] == [(p, w) for _, p, w in local_servers],
          "weights and upstream ports agree between nginx.conf and nginx.compose.conf",
          f"nginx.conf {local_servers} and nginx.compose.conf {cs} disagree")

props = {}
for line in read("config/inventoryd.properties").splitlines():
    line = line.strip()
    if line and line[0] not in "#!" and "=" in line:
        k, v = line.split("=", 1)
        props[k.strip()] = v.strip()
for key, val in (("server.port", str(INSTANCES[0])), ("redis.port", str(REDIS)),
                 ("mysql.port", str(MYSQL))):
    check(props.get(key) == val, f"config/inventoryd.properties: {key}={val}",
          f"config/inventoryd.properties: {key} is {props.get(key)!r}, expected {val}")
nodes = props.get("redlock.nodes", "")
node_ports = [n.rpartition(":")[2] for n in nodes.split(",") if n]
check(node_ports == [str(p) for p in MASTERS],
      f"config/inventoryd.properties: redlock.nodes={nodes}",
      f"config/inventoryd.properties: redlock.nodes is {nodes!r}, expected ports {MASTERS}")

demo = read("scripts/demo.sh")
for var, want_val in (("DEMO_REDIS_PORT", str(REDIS)),
                      ("DEMO_REDLOCK_PORTS", " ".join(map(str, MASTERS))),
                      ("DEMO_INSTANCE_PORTS", " ".join(map(str, INSTANCES))),
                      ("DEMO_NGINX_PORT", str(NGINX)),
                      ("DEMO_ZOOKEEPER_PORT", str(ZOOKEEPER)),
                      ("DEMO_MYSQL_PORT", str(MYSQL))):
    m = re.search(r"\$\{" + var + r":-([^}]*)\}", demo)
    got = m.group(1) if m else None
    check(got == want_val, f"scripts/demo.sh: {var} defaults to {want_val}",
          f"scripts/demo.sh: {var} defaults to {got!r}, expected {want_val!r}")

# --- the Dockerfile
dockerfile = read("Dockerfile")
froms = re.findall(r"^FROM\s+(\S+)", dockerfile, re.M | re.I)
check(froms and all(f in ("debian:12", "debian:bookworm") or f.startswith(("debian:12-", "debian:bookworm-"))
                    for f in froms),
      f"Dockerfile: every stage FROM Debian 12 ({', '.join(froms)})",
      f"Dockerfile: stages FROM {froms}, expected debian:12")
deps = read("scripts/deps.sh")
m = re.search(r"^packages=\((.*?)^\)", deps, re.M | re.S)
deps_dev = sorted(set(re.findall(r"\b[a-z0-9][a-z0-9.+-]*-dev\b", m.group(1)))) if m else []
docker_dev = sorted(set(re.findall(r"\b[a-z0-9][a-z0-9.+-]*-dev\b", dockerfile)))
stray = [d for d in docker_dev if d not in deps_dev]
check(docker_dev and not stray,
      f"Dockerfile's -dev packages are scripts/deps.sh's: {' '.join(docker_dev)}",
      f"Dockerfile installs -dev package(s) {stray} that scripts/deps.sh does not name")
# The libraries the product links (pkg_check_modules of CMakeLists.txt; the
# tests' are in tests/) and the Debian package that ships each .pc file.
cml = read("CMakeLists.txt")
for mod in re.findall(r"pkg_check_modules\(\s*\w+\s+(?:REQUIRED\s+)?(?:IMPORTED_TARGET\s+)?([\w.+-]+)", cml):
    try:
        pcdir = subprocess.run(["pkg-config", "--variable=pcfiledir", mod], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        owner = subprocess.run(["dpkg", "-S", os.path.join(pcdir, mod + ".pc")], capture_output=True,
                               text=True, timeout=10).stdout.split(":")[0].strip() if pcdir else ""
    except OSError:
        owner = ""
    if not owner:
        fail(f"cannot tell which Debian package ships {mod}.pc (pkg-config, dpkg; run scripts/deps.sh)")
        continue
    check(owner in docker_dev and owner in deps_dev,
          f"CMakeLists.txt links {mod}: {owner} is in the Dockerfile and in scripts/deps.sh",
          f"CMakeLists.txt links {mod}, shipped by {owner}: "
          f"{'missing from the Dockerfile' if owner not in docker_dev else 'missing from scripts/deps.sh'}")
rest = [d for d in deps_dev if d not in docker_dev]
if rest:
    print("compose: note: -dev packages of scripts/deps.sh the image does not need "
          "(tests, sanitizers): " + " ".join(rest))
check(re.search(r"^COPY\s+config/inventoryd\.properties\s+" + re.escape(CONFIG_IN_IMAGE) + r"\s*$",
                dockerfile, re.M) is not None,
      f"Dockerfile: config/inventoryd.properties -> {CONFIG_IN_IMAGE}",
      f"Dockerfile does not COPY config/inventoryd.properties to {CONFIG_IN_IMAGE}")
copied = set()
for line in re.findall(r"^COPY\s+(?!--from)(.*)$", dockerfile, re.M):
    for a in line.split()[:-1]:
        copied.add(a.strip("/").split("/")[0])
# A top-level folder is read when CMakeLists.txt names a path in it
# (src/main.c, ${CMAKE_SOURCE_DIR}/cmake/...) or adds it as a subdirectory.
read_dirs = set()
cml_code = re.sub(r"#[^\n]*", "", cml)   # a path in a comment is not read
for d in os.listdir(root):
    if d.startswith(".") or d == "tests" or not os.path.isdir(os.path.join(root, d)):
        continue    # tests: the image builds with BUILD_TESTING=OFF
    if re.search(r"(?<![A-Za-z0-9_.-])" + re.escape(d) + r"/", cml_code) or \
       re.search(r"^\s*add_subdirectory\(\s*" + re.escape(d) + r"\b", cml_code, re.M):
        read_dirs.add(d)
lacking = sorted(read_dirs - copied)
check("CMakeLists.txt" in copied and not lacking,
      f"Dockerfile copies CMakeLists.txt and every folder it reads ({', '.join(sorted(read_dirs))})",
      f"Dockerfile does not COPY {', '.join(lacking) or 'CMakeLists.txt'}, which the build reads")

n = len(failures)
if n:
    print(f"compose: {n} check(s) failed", file=sys.stderr)
    sys.exit(1)
PY
status=$?
[ "$status" -eq 0 ] || exit 1

# nginx itself reads the compose variant (service names as 127.0.0.1, since
# they only resolve inside the compose network). `nginx -t` binds nothing.
if command -v nginx >/dev/null 2>&1; then
    mkdir -p "$work/nginx-t"
    chmod 755 "$work" "$work/nginx-t"
    sed -e 's/inventoryd-378[67]:/127.0.0.1:/' nginx/nginx.compose.conf >"$work/nginx-t/nginx.conf"
    if ! nginx -t -q -p "$work/nginx-t" -c "$work/nginx-t/nginx.conf" -e "$work/nginx-t/error.log" \
            2>"$work/nginx-t.err"; then
        cat "$work/nginx-t.err" >&2
        die "nginx -t rejected nginx/nginx.compose.conf (service names replaced by 127.0.0.1)"
    fi
    echo "compose: ok: nginx -t accepts nginx/nginx.compose.conf"
else
    echo "compose: note: nginx not installed; nginx -t skipped"
fi
echo "compose: PASS: docker-compose.yml is valid and agrees with the local stack"
exit 0
