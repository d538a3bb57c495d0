#!/usr/bin/env bash
# lockbench_short.sh LOCKBENCH
#
# lockbench, short: handoff, atomic and setnx-spin at 4 clients sell a
# stock of 400 against a Redis of the script's own. Each run exits 0 (the
# audit passed), sells the whole stock with nothing sold twice, and prints
# its CPU per sale: this process's (above 0), the main Redis's (above 0,
# read from INFO cpu) and the context switches; the text form says the
# same. Redis's figure is checked against a sale that makes Redis do more
# work: handoff sends about 11 commands a sale, atomic one script of 5, so
# Redis spends more CPU a handoff sale (medians of three runs each, taken
# in turn; about 2.3x apart here, so a busy machine's noise does not
# reverse them, as it did the history's one more write).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag="lockbench-short"
. "$root/scripts/lib.sh"
lockbench=$(realpath "$1")
[ -x "$lockbench" ] || { echo "$tag: $lockbench not found" >&2; exit 2; }
setup_work lockbench-short
pick_port; redis_port=$port
start_redis "$redis_port"
bare=(--set inventory.probe=false --set history.enabled=false)

# run STRATEGY ARGS...: one kv run of 4 clients, stock 400, into L.
run() {
    local s=$1 rc
    shift
    redis-cli -p "$redis_port" flushall >/dev/null
    "$lockbench" --strategy "$s" --clients 4 --stock 400 --redis "127.0.0.1:$redis_port" \
        --max-s 60 --format kv "$@" >"$work/out" 2>"$work/err"
    rc=$?
    [ "$rc" = 0 ] || fail "$s: lockbench exited $rc: $(cat "$work/out" "$work/err")"
    kv_parse "$work/out"
}

above0() { awk -v v="$1" 'BEGIN { exit !(v + 0 > 0) }'; }

for s in handoff atomic setnx-spin; do
    run "$s" "${bare[@]}"
    if [ "${L[sold]}" != 400 ] || [ "${L[complete]}" != 1 ] || [ "${L[sold_twice]}" != 0 ]; then
        fail "$s: sold ${L[sold]:-?} of 400, complete ${L[complete]:-?}, sold twice ${L[sold_twice]:-?}"
    fi
    for k in cpu_us_per_sale redis_cpu_us_per_sale; do
        above0 "${L[$k]:-}" || fail "$s: $k is '${L[$k]:-}', not a figure above 0: $(cat "$work/out")"
    done
    [[ "${L[csw_per_sale]:-}" =~ ^[0-9]+\.[0-9]+$ ]] || fail "$s: csw_per_sale is '${L[csw_per_sale]:-}'"
    log "$s: ${L[sales_per_s]} sales/s, CPU a sale: lockbench ${L[cpu_us_per_sale]} us, Redis ${L[redis_cpu_us_per_sale]} us, ${L[csw_per_sale]} context switches"
done

declare -a more less
for _ in 1 2 3; do
    run atomic "${bare[@]}"; less+=("${L[redis_cpu_us_per_sale]}")
    run handoff "${bare[@]}"; more+=("${L[redis_cpu_us_per_sale]}")
done
med() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
m0=$(med "${less[@]}"); m1=$(med "${more[@]}")
awk -v a="$m0" -v b="$m1" 'BEGIN { exit !(b > a) }' ||
    fail "Redis's CPU a handoff sale (${more[*]}: $m1 us) is not above an atomic one (${less[*]}: $m0 us)"
log "Redis's CPU a sale: atomic ${less[*]} (median $m0 us), handoff ${more[*]} (median $m1 us)"

redis-cli -p "$redis_port" flushall >/dev/null
"$lockbench" --strategy atomic --clients 2 --stock 100 --redis "127.0.0.1:$redis_port" >"$work/text" 2>&1 ||
    fail "the text form: lockbench exited $?: $(cat "$work/text")"
grep -qE '^  CPU per sale: this process [0-9.]+ us \([0-9.]+ context switches\), the main Redis [0-9.]+ us$' "$work/text" ||
    fail "the text form has no CPU line: $(cat "$work/text")"
log "ok: three strategies sold their stock with their CPU a sale reported; Redis's figure follows its work"
