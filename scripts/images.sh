#!/usr/bin/env bash
# images.sh [--engine docker|podman] [--force] -- makes the base images that
# docker-compose.yml and the Dockerfile use, debian:12, redis:7.0,
# nginx:1.22, inventoryd-zookeeper:3.8 and inventoryd-mariadb:10.11, on this
# machine, when they are missing.
#
# Where a registry is reachable, pulling the official images is the usual
# way for the first three, and this script leaves any image of those names
# alone: it only fills in what is missing, for machines that reach no
# registry but Debian's apt archive (such as ours):
#   debian:12   debootstrap --variant=minbase bookworm, from the apt source
#               this machine uses (its Debian URIs, and apt's Check-Valid-Until
#               and proxy settings, go into the image too), then `import`;
#   redis:7.0   images/redis.Dockerfile: FROM debian:12, Debian's redis-server;
#   nginx:1.22  images/nginx.Dockerfile: FROM debian:12, Debian's nginx;
#   inventoryd-zookeeper:3.8  images/zookeeper.Dockerfile: FROM debian:12,
#               Debian's zookeeper on default-jre-headless, and
#               images/zookeeper-entrypoint.sh;
#   inventoryd-mariadb:10.11  images/mariadb.Dockerfile: FROM debian:12,
#               Debian's mariadb-server, and images/mariadb-entrypoint.sh.
# The last two carry names of our own: the official zookeeper and mariadb
# images are configured otherwise (their own entrypoints and variables), so
# one of those could not stand in for them. The versions are those Debian
# 12 ships, which the local stack and the tests run. An image this script
# made carries the label org.inventoryd.recipe=<hash of its recipe: its
# Dockerfile, the files of images/ it copies, and the id of debian:12>; one
# whose recipe changed since is made again. --force makes them all again
# (never an image of someone else's: without the label, --force still
# keeps it). The JRE and MariaDB make the last two the slow ones the first
# time (see docs/compose.md for the times).
#
# The engine: --engine, else $INVENTORYD_ENGINE, else docker when `docker
# info` answers (DOCKER_HOST is honoured), else podman when installed.
# debootstrap needs root (or sudo); the builds fetch Debian packages with the
# host's network (build --network host), so no NAT for containers is needed;
# a failed build leaves no container behind (--force-rm).
# Idempotent: with the images there, it only looks and prints one line
# each, in well under a second.
#
# Exits 0 when every image is there, 1 otherwise (saying why).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
engine=${INVENTORYD_ENGINE:-}
force=0
while [ $# -gt 0 ]; do
    case $1 in
        --engine) engine=${2:?--engine needs docker or podman}; shift 2 ;;
        --engine=*) engine=${1#--engine=}; shift ;;
        --force) force=1; shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "images: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

die() {
    echo "images: $*" >&2
    exit 1
}

if [ -z "$engine" ]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        engine=docker
    elif command -v podman >/dev/null 2>&1; then
        engine=podman
    elif command -v docker >/dev/null 2>&1; then
        die "no Docker engine answers (docker info failed${DOCKER_HOST:+ at DOCKER_HOST=$DOCKER_HOST}): start dockerd, or install podman"
    else
        die "neither docker nor podman is installed (apt-get install docker.io, or podman)"
    fi
fi
case $engine in
    docker|podman) command -v "$engine" >/dev/null 2>&1 || die "$engine is not installed" ;;
    *) die "--engine must be docker or podman, not '$engine'" ;;
esac
"$engine" info >/dev/null 2>&1 || die "$engine info failed: is the engine running?"

# The name an image is kept under: podman would file a bare "redis:7.0" under
# localhost/, docker under docker.io/library/ (where the official one lives).
full_name() {
    if [ "$engine" = podman ]; then echo "docker.io/library/$1"; else echo "$1"; fi
}

# dockerfile_of NAME: images/<name without tag and "inventoryd-">.Dockerfile.
dockerfile_of() {
    local base=${1%%:*}
    echo "$root/images/${base#inventoryd-}.Dockerfile"
}

# copied_by DOCKERFILE: the files of images/ its COPY lines take from the
# context, one a line.
copied_by() {
    awk 'toupper($1) == "COPY" && $2 !~ /^--from/ { for (i = 2; i < NF; i++) print $i }' "$1"
}

# recipe_of NAME: a hash of what makes the image (the script's part for it, or
# its Dockerfile, the files it copies and the id of the debian:12 it starts
# from), so an image made from an older recipe or an older debian:12 is made
# again.
recipe_of() {
    local f
    case $1 in
        debian:12) sed -n '/^# ---- debian:12/,/^# ---- end debian:12/p' "${BASH_SOURCE[0]}" ;;
        *)
            cat "$(dockerfile_of "$1")"
            while read -r f; do cat "$root/images/$f"; done < <(copied_by "$(dockerfile_of "$1")")
            "$engine" image inspect --format '{{.Id}}' "$(full_name debian:12)" 2>/dev/null || true ;;
    esac | sha256sum | cut -c1-16
}

# label_of NAME: the image's org.inventoryd.recipe label ("" when it has
# none: someone else's); fails when there is no such image.
label_of() {
    local label
    label=$("$engine" image inspect --format '{{ index .Config.Labels "org.inventoryd.recipe" }}' \
        "$(full_name "$1")" 2>/dev/null) || return 1
    [ "$label" = "<no value>" ] && label=
    echo "$label"
}

# state NAME: "ok" (someone else's, or ours from the current recipe), "stale"
# (ours, from another recipe, or any of ours with --force) or "missing".
state() {
    local label
    if ! label=$(label_of "$1"); then
        echo missing
    elif [ -z "$label" ]; then
        echo ok
    elif [ "$force" = 1 ] || [ "$label" != "$(recipe_of "$1")" ]; then
        echo stale
    else
        echo ok
    fi
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "debootstrap needs root, and there is no sudo: run this script as root"
    fi
}

# apt_sources: "MIRROR SECURITY" from this machine's Debian sources (one-line
# .list and deb822 .sources), the URIs whose suites are bookworm and
# bookworm-security; $INVENTORYD_DEBIAN_MIRROR overrides the first.
apt_sources() {
    local files=() f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || { echo "http://deb.debian.org/debian http://deb.debian.org/debian-security"; return; }
    awk -v want_mirror="${INVENTORYD_DEBIAN_MIRROR:-}" '
        function take(uri, suite) {
            sub(/\/+$/, "", uri)
            if (suite == "bookworm" && mirror == "") mirror = uri
            if (suite == "bookworm-security" && security == "") security = uri
        }
        FNR == 1 { flush() }
        # one-line format: deb [options] URI SUITE COMPONENT...
        FILENAME !~ /\.sources$/ && $1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
            take($i, $(i + 1))
            next
        }
        # deb822: stanzas separated by blank lines
        FILENAME ~ /\.sources$/ {
            if ($0 ~ /^[ \t]*$/) { flush(); next }
            if (tolower($1) == "uris:") { uris = $0; sub(/^[^:]*:[ \t]*/, "", uris) }
            if (tolower($1) == "suites:") { suites = $0; sub(/^[^:]*:[ \t]*/, "", suites) }
            if (tolower($1) == "types:" && $0 !~ /deb([ \t]|$)/) skip = 1
        }
        function flush(   nu, ns, u, s, U, S) {
            if (!skip && uris != "" && suites != "") {
                nu = split(uris, U, /[ \t]+/); ns = split(suites, S, /[ \t]+/)
                for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) take(U[u], S[s])
            }
            uris = ""; suites = ""; skip = 0
        }
        END {
            flush()
            if (want_mirror != "") mirror = want_mirror
            if (mirror == "") mirror = "http://deb.debian.org/debian"
            if (security == "") { security = mirror; sub(/\/debian$/, "/debian-security", security) }
            print mirror, security
        }' "${files[@]}"
}

tmp=$(mktemp -d /tmp/inventoryd-images.XXXXXX)
cleanup() {
    # debootstrap's tree is root's; removing it needs root too.
    if [ -d "$tmp" ]; then
        rm -rf "$tmp" 2>/dev/null || as_root rm -rf "$tmp"
    fi
}
trap cleanup EXIT

# ---- debian:12 -----------------------------------------------------------------
# debootstrap --variant=minbase bookworm from this machine's mirror, as small
# as the official image: no apt lists, no downloaded .debs, no man pages; a
# policy-rc.d so that no package starts a service while an image is built;
# apt told what this machine's apt is told (Check-Valid-Until, proxies), so
# that `apt-get update` in a build behaves as on the host.
make_debian() {
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (apt-get install debootstrap)"
    local mirror security rootfs=$tmp/rootfs
    read -r mirror security < <(apt_sources)
    echo "images: debian:12: debootstrap --variant=minbase bookworm from $mirror"
    if ! as_root debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" "$mirror" \
            >"$tmp/debootstrap.log" 2>&1; then
        tail -n 20 "$tmp/debootstrap.log" >&2
        die "debootstrap failed (log above)"
    fi
    as_root sh -c '
        set -e
        r=$1; mirror=$2; security=$3
        printf "deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s bookworm-security main\n" \
            "$mirror" "$mirror" "$security" >"$r/etc/apt/sources.list"
        printf "#!/bin/sh\nexit 101\n" >"$r/usr/sbin/policy-rc.d"
        chmod 755 "$r/usr/sbin/policy-rc.d"
        apt-config dump | grep -E "^Acquire::(Check-Valid-Until|Check-Date|https?::Proxy)" \
            >"$r/etc/apt/apt.conf.d/99inventoryd-host" || true
        printf "APT::Install-Recommends \"false\";\n" >"$r/etc/apt/apt.conf.d/99inventoryd-norecommends"
        rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin "$r"/var/cache/apt/archives/*.deb \
               "$r"/usr/share/man/* "$r"/usr/share/doc/* "$r"/var/log/*.log "$r"/debootstrap
        : >"$r/etc/machine-id"
        printf "debian\n" >"$r/etc/hostname"
    ' sh "$rootfs" "$mirror" "$security"
    echo "images: debian:12: import"
    as_root tar -C "$rootfs" --numeric-owner -c . |
        "$engine" import --change 'CMD ["bash"]' \
            --change "LABEL org.inventoryd.recipe=$(recipe_of debian:12)" \
            - "$(full_name debian:12)" >/dev/null
}
# ---- end debian:12 -------------------------------------------------------------

# make_from NAME DOCKERFILE: builds NAME from a Dockerfile whose context is
# only the files of images/ it copies (none for redis and nginx).
make_from() {
    local name=$1 dockerfile=$2 f
    echo "images: $name: build from ${dockerfile#"$root"/}"
    rm -rf "$tmp/ctx"
    mkdir -p "$tmp/ctx"
    while read -r f; do
        cp -p "$root/images/$f" "$tmp/ctx/" || die "$dockerfile copies $f, which images/ lacks"
    done < <(copied_by "$dockerfile")
    local extra=()
    # podman's builds raise RLIMIT_NOFILE past this shell's hard limit by
    # default, which fails without CAP_SYS_RESOURCE (as in containers).
    [ "$engine" = podman ] && extra=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)")
    if ! "$engine" build "${extra[@]}" --force-rm --network host --label "org.inventoryd.recipe=$(recipe_of "$name")" \
            -t "$(full_name "$name")" -f "$dockerfile" "$tmp/ctx" >"$tmp/build.log" 2>&1; then
        tail -n 30 "$tmp/build.log" >&2
        die "building $name failed (log above)"
    fi
}

# With the legacy builder a client newer than the engine could pick BuildKit.
export DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0}

names=(debian:12 redis:7.0 nginx:1.22 inventoryd-zookeeper:3.8 inventoryd-mariadb:10.11)
made=0
for name in "${names[@]}"; do
    st=$(state "$name")
    if [ "$st" = ok ]; then
        echo "images: $name: there ($engine)"
        continue
    fi
    [ "$st" = stale ] && echo "images: $name: made from an older recipe, making it again"
    t0=$(date +%s)
    case $name in
        debian:12) make_debian ;;
        *) make_from "$name" "$(dockerfile_of "$name")" ;;
    esac
    [ "$(label_of "$name" || echo none)" = "$(recipe_of "$name")" ] ||
        die "$name is not there after making it"
    echo "images: $name: made in $(( $(date +%s) - t0 )) s"
    made=$((made + 1))
done
echo "images: ${names[*]} are there ($engine; $made made)"
