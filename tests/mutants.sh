#!/usr/bin/env bash
# mutants.sh -- mutation testing: are the tests strong enough to catch the
# bugs they exist for?
#
# Each mutant (tests/mutants.tsv) is one deliberate bug in a copy of the
# tree: renewals that never renew, a compare-and-delete that deletes
# anyone's lock, a fence that lets an older token write, a Redlock quorum
# of one, a HEAD that sells, and so on. For each, the copy is rebuilt and
# the tests named for it are run: the mutant is KILLED when one of them
# fails, and SURVIVED when all pass (the tests missed the bug). A mutant
# whose text is not found exactly once, or that does not build, is an
# error of this list, never a kill.
#
#   tests/mutants.sh            every mutant (about 15 min on 2 cores)
#   tests/mutants.sh NAME...    only these
#   tests/mutants.sh --list     the mutants, their tests, what they break
#
# The copy is made from the working tree (tracked and untracked files, no
# build directories), built once with the tests, and each mutant's tests are
# first run on it unmutated: a test that fails there would kill every
# mutant, so the run stops instead. Results: a line per mutant, then
# "mutants: N killed, N survived"; exit 0 only when every mutant was killed.
# Environment: MUTANTS_KEEP=1 keeps the copy (its path is printed).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
list=$root/tests/mutants.tsv
jobs=$(nproc 2>/dev/null || echo 2)

rows() { grep -v '^#' "$list" | grep -v '^[[:space:]]*$'; }
names() { rows | cut -f1 | awk '!seen[$0]++'; }
field() { rows | awk -F'\t' -v n="$1" -v f="$2" '$1 == n { print $f; exit }'; }

if [ "${1:-}" = --list ]; then
    while read -r n; do
        printf '%-28s %-45s %s\n' "$n" "$(field "$n" 5)" "$(field "$n" 6)"
    done < <(names)
    exit 0
fi

if [ $# -gt 0 ]; then
    want=("$@")
    for n in "${want[@]}"; do
        names | grep -qxF "$n" || { echo "mutants: no mutant named '$n' (see --list)" >&2; exit 2; }
    done
else
    mapfile -t want < <(names)
fi

work=$(mktemp -d /tmp/inventoryd-mutants.XXXXXX)
cleanup() {
    if [ "${MUTANTS_KEEP:-0}" = 1 ]; then echo "mutants: the copy is kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
tree=$work/tree
mkdir -p "$tree"
# The working tree as it is, without build output or installed packages.
tar -C "$root" --exclude='./build' --exclude='./build-*' --exclude='./results' \
    --exclude='./Testing' --exclude='node_modules' --exclude='./.git' -cf - . | tar -C "$tree" -xf -

echo "mutants: building the copy in $tree/build"
if ! cmake -S "$tree" -B "$tree/build" -DBUILD_TESTING=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        >"$work/configure.log" 2>&1 ||
   ! cmake --build "$tree/build" -j "$jobs" >"$work/build.log" 2>&1; then
    echo "mutants: the unmutated copy does not build; see $work/build.log" >&2
    MUTANTS_KEEP=1
    exit 2
fi

# run_tests REGEX LOG: the tests matching REGEX; 0 when all passed. A regex
# that matches no test is an error of the list (ctest would pass).
run_tests() {
    local n
    n=$(ctest --test-dir "$tree/build" -N -R "$1" | sed -n 's/^Total Tests: //p')
    if [ "${n:-0}" -eq 0 ]; then
        echo "mutants: no test matches '$1'" >>"$2"
        return 3
    fi
    ctest --test-dir "$tree/build" -R "$1" --output-on-failure -j1 >>"$2" 2>&1
}

# The baseline: every regex once, on the unmutated copy.
regexes=$(for n in "${want[@]}"; do field "$n" 5; done | sort -u)
echo "mutants: the tests of ${#want[@]} mutants on the unmutated copy"
while read -r re; do
    if ! run_tests "$re" "$work/baseline.log"; then
        echo "mutants: '$re' fails without any mutant; see $work/baseline.log" >&2
        MUTANTS_KEEP=1
        exit 2
    fi
done <<<"$regexes"

# apply NAME: applies every row of NAME; 0, or 1 when a text is not found
# exactly once (the file is then left as it was).
apply() {
    local file from to
    while IFS=$'\t' read -r _ file from to _ _; do
        cp "$tree/$file" "$tree/$file.orig" 2>/dev/null || return 1
        FROM=$from TO=$to perl -0777 -i -pe \
            'BEGIN { $n = 0 } $n += s/\Q$ENV{FROM}\E/$ENV{TO}/g; END { exit($n == 1 ? 0 : 3) }' \
            "$tree/$file" || { echo "mutants: $1: the text is not in $file exactly once" >&2; return 1; }
    done < <(rows | awk -F'\t' -v n="$1" '$1 == n')
}

# restore NAME: puts back every file NAME changed.
restore() {
    local file
    while IFS=$'\t' read -r _ file _; do
        # newer than what the mutant built, so that make rebuilds from it
        [ -f "$tree/$file.orig" ] && mv "$tree/$file.orig" "$tree/$file" && touch "$tree/$file"
    done < <(rows | awk -F'\t' -v n="$1" '$1 == n')
}

killed=0
survived=0
errors=0
t0=$SECONDS
for n in "${want[@]}"; do
    log=$work/$n.log
    t=$SECONDS
    re=$(field "$n" 5)
    if ! apply "$n"; then
        restore "$n"
        printf 'mutants: %-28s ERROR    (not applied)\n' "$n"
        errors=$((errors + 1))
        continue
    fi
    if ! cmake --build "$tree/build" -j "$jobs" >"$log" 2>&1; then
        restore "$n"
        printf 'mutants: %-28s ERROR    (does not build; see %s)\n' "$n" "$log"
        errors=$((errors + 1))
        MUTANTS_KEEP=1
        continue
    fi
    if run_tests "$re" "$log"; then
        verdict=SURVIVED
        survived=$((survived + 1))
        MUTANTS_KEEP=1
    else
        verdict=killed
        killed=$((killed + 1))
    fi
    caught=$(grep -E '^[[:space:]]*[0-9]+ - .* \((Failed|Timeout|SEGFAULT|Subprocess aborted|Not Run)\)$' "$log" |
        sed -E 's/^[[:space:]]*[0-9]+ - //; s/ \(.*//' | paste -sd, -)
    restore "$n"
    printf 'mutants: %-28s %-8s by %s (%d s): %s\n' "$n" "$verdict" "${caught:-nothing}" \
        "$((SECONDS - t))" "$(field "$n" 6)"
done
# leave the copy's build as the tree is
cmake --build "$tree/build" -j "$jobs" >/dev/null 2>&1

echo "mutants: $killed killed, $survived survived, $errors errors ($((SECONDS - t0)) s)"
[ "$survived" -eq 0 ] && [ "$errors" -eq 0 ]
