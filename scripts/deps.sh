#!/usr/bin/env bash
# deps.sh -- installs with apt-get whatever the build, the tests and the demo
# need and is not there yet, then the browser test's playwright-core with
# `npm ci` in tests/browser/ (from its package-lock.json; it downloads no
# browser: the test drives Debian's chromium). Idempotent; prints nothing
# when all is installed. Needs root (or sudo) only when something is missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
    build-essential cmake pkg-config
    libmicrohttpd-dev libhiredis-dev libcjson-dev uuid-dev check
    redis-server redis-tools redis-sentinel nginx-light
    mariadb-server libmariadb-dev   # the mysql strategies' store and its client library
    jq curl gnuplot-nox clang libclang-rt-14-dev valgrind
    clang-format   # the house style, checked by tests/style.sh
    clang-tidy     # functions' cognitive complexity, checked by tests/complexity.sh
    chromium
    libfaketime    # the safety matrix's clock-drift nemesis (scripts/matrix.sh)
    # the compose stack run for real (tests/compose_up.sh, scripts/images.sh)
    docker.io docker-compose debootstrap python3-yaml
    iproute2 nftables   # the campaigns' network partitions (scripts/campaign.sh)
    wrk webdis   # loadtest/http-bench.sh: the load, and the C gateway it is compared with
    # the zookeeper strategies: ZooKeeper's C binding, and the server (and a
    # JRE) that tests/check_zookeeper.c starts
    libzookeeper-mt-dev zookeeper default-jre-headless
)
# node and npm for the browser test: Debian's, unless some are already on PATH.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

# Optional, only when asked: Debian's JMeter 2.13 and its HTTP sampler, for
# the plans in loadtest/jmeter/ (run by loadtest/jmeter/run.sh, which also
# needs javac). Ask with scripts/deps.sh --jmeter or DEPS_JMETER=1.
if [ "${1:-}" = --jmeter ] || [ "${DEPS_JMETER:-0}" = 1 ]; then
    packages+=(jmeter jmeter-http)
    command -v javac >/dev/null 2>&1 || packages+=(default-jdk-headless)
fi

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "deps: not root and no sudo; install these by hand: ${missing[*]}" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >&2
fi

# playwright-core for tests/browser/lab.spec.mjs: npm ci only when the
# installed version is not the lockfile's.
lock_version() {
    sed -n '/"node_modules\/playwright-core": {/,/}/s/.*"version": "\([^"]*\)".*/\1/p' "$1" | head -n 1
}
browser=$root/tests/browser
want=$(lock_version "$browser/package-lock.json")
have=$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$browser/node_modules/playwright-core/package.json" 2>/dev/null || true)
if [ -n "$want" ] && [ "$have" != "$want" ]; then
    echo "deps: npm ci in tests/browser (playwright-core $want)" >&2
    (cd "$browser" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || {
        echo "deps: npm ci in tests/browser failed" >&2
        exit 1
    }
fi
