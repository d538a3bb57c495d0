#!/usr/bin/env bash
# wakering_short.sh WAKERING
#
# tools/wakering, short: with 4 and 8 threads, 2,000 turns, one round, it
# prints a round line and a median line for each thread count, with turns/s
# and CPU a turn above 0 and the first count's ratio 1.00; bad usage exits 2.
set -uo pipefail
bin=$1
fail() {
    echo "wakering-short: FAIL: $*" >&2
    exit 1
}
out=$(timeout 60 "$bin" --threads "4 8" --kb 4 --turns 2000 --rounds 1) || fail "wakering exited $?"
for n in 4 8; do
    grep -qE "^round 1: +$n threads, 4 KB each: +[1-9][0-9]* turns/s, +[0-9.]+ us CPU a turn$" <<<"$out" ||
        fail "no round line for $n threads: $out"
    line=$(grep -E "^threads=$n kb=4 " <<<"$out") || fail "no median line for $n threads: $out"
    rate=$(sed -E 's/.*turns_per_s=([0-9]+).*/\1/' <<<"$line")
    cpu=$(sed -E 's/.*cpu_us_per_turn=([0-9.]+).*/\1/' <<<"$line")
    [ "$rate" -gt 0 ] || fail "$n threads: turns/s $rate"
    awk -v c="$cpu" 'BEGIN { exit !(c > 0) }' || fail "$n threads: CPU a turn $cpu"
done
grep -qE "^threads=4 .* over_first=1.00$" <<<"$out" || fail "the first count is not 1.00 of itself: $out"
"$bin" --threads "1" >/dev/null 2>&1
[ $? -eq 2 ] || fail "one thread (no ring) was not refused with exit 2"
"$bin" --bogus 1 >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown option was not refused with exit 2"
echo "wakering-short: ok"
