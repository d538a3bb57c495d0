#!/usr/bin/env bash
# http_bench_short.sh BUILD_DIR
#
# loadtest/http-bench.sh, short (one round, 1 s a point, c = 16 and 64, 200
# idle connections): it exits 0 (every sale answered 200, no socket error),
# its table has a row for every target with a figure above 0 at each
# connection count, the ratios name webdis and nginx, and the idle lines
# (epoll's and poll's) say the 200 connections were held, a sale beside
# them sold and wrk got answers beside them; the CPU
# table gives each request's server, Redis and wrk CPU, Redis's above 0 for
# a sale and about 0 for nginx's return 200. Every
# process it started is gone afterwards (it stops them by pid).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath "$1")
out=$(mktemp -d /tmp/inventoryd-http-bench-short.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() {
    echo "http-bench-short: FAIL: $*" >&2
    sed -n '1,80p' "$out/run.log" >&2
    exit 1
}

HB_BUILD_DIR=$build HB_CONNS="16 64" HB_RUNS=1 HB_SECONDS=1 HB_IDLE=200 \
    HB_RESULTS_DIR=$out timeout 300 bash "$root/loadtest/http-bench.sh" >"$out/run.log" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "http-bench.sh exited $rc"
md=$out/http-bench.md
[ -s "$md" ] || fail "no $md"
for t in nginx webdis healthz strategies lab atomic-bare atomic-poll atomic-default atomic-unix 'nginx>bare' 'nginx>default'; do
    row=$(grep -F "| $t |" "$md" | head -n 1)
    [ -n "$row" ] || fail "no row for $t"
    read -r a b < <(awk -F'|' '{gsub(/ /, "", $3); gsub(/ /, "", $4); print $3, $4}' <<<"$row")
    for v in "$a" "$b"; do
        [[ "$v" =~ ^[0-9]+$ ]] && [ "$v" -gt 0 ] || fail "$t: '$v' is not a rate above 0 ($row)"
    done
done
# The CPU table: a sale costs its server and Redis CPU, nginx's return 200
# costs Redis none (its row would read the same if nothing were measured).
cpu=$(sed -n '/^CPU a request/,$p' "$md")
for t in atomic-bare webdis nginx; do
    row=$(grep -F "| $t |" <<<"$cpu" | head -n 1)
    read -r all srv red wrk < <(sed -E 's/^\| [^|]* \| ([0-9]+) = ([0-9]+) \+ ([0-9]+) \+ ([0-9]+) \|.*/\1 \2 \3 \4/' <<<"$row")
    [[ "$all" =~ ^[0-9]+$ ]] || fail "no CPU cell for $t: '$row'"
    [ "$srv" -gt 0 ] && [ "$wrk" -gt 0 ] || fail "$t: no server or wrk CPU measured ($row)"
    if [ "$t" = nginx ]; then
        [ "$red" -le 2 ] || fail "nginx's return 200 cost Redis $red us a request ($row)"
    else
        [ "$red" -gt 2 ] || fail "$t: its sales cost Redis no CPU ($row)"
    fi
done
grep -q 'atomic-bare / webdis [0-9]' "$md" || fail "no atomic-bare / webdis ratio"
grep -q 'atomic-poll / atomic-bare [0-9]' "$md" || fail "no atomic-poll / atomic-bare ratio"
grep -q 'healthz / nginx [0-9]' "$md" || fail "no healthz / nginx ratio"
for t in atomic-bare atomic-poll; do
    grep -qE "^- 200 idle keep-alive connections on $t: RSS [0-9]+ MB .* answered sold in [0-9.]+ ms; wrk at c=64 beside them: [1-9][0-9]* requests/s" "$md" ||
        fail "no idle line for $t: $(sed -n '/^Idle:/,$p' "$md")"
done
[ "$(wc -l <"$out/http-bench.csv")" -eq $((1 + 11 * 2)) ] || fail "http-bench.csv has $(wc -l <"$out/http-bench.csv") lines, expected 23"
echo "http-bench-short: ok: every target measured at c=16 and 64, the ratios and the idle line printed"
