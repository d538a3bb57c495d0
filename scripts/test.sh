#!/usr/bin/env bash
# test.sh -- the one test command (README and .ci/run call it).
#
# Installs what is missing (scripts/deps.sh), then builds and runs every ctest
# twice: a RelWithDebInfo build in build/, and an AddressSanitizer +
# UndefinedBehaviorSanitizer build with clang in build-asan/. The tests start
# their own redis-server and nginx on free ports.
#
#   scripts/test.sh           everything, twice (what CI runs; about 30 min)
#   scripts/test.sh --quick   the quick tier, once, in build/: the unit tests
#                             and one integration test per module (ctest
#                             labels unit and quick; under 3 min once built),
#                             what a contributor runs before every commit
#
# Exits non-zero if anything failed; the last line is always
#   tests: N passed, N failed, N skipped
# summed over both runs (a build that failed counts as one failed test; a
# test that skipped itself, exit 77, is neither passed nor failed).
set -uo pipefail

quick=0
case "${1:-}" in
    --quick) quick=1 ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
passed=0
failed=0
skipped=0
status=0

if ! bash scripts/deps.sh; then
    echo "test: scripts/deps.sh failed" >&2
    echo "tests: 0 passed, 1 failed, 0 skipped"
    exit 1
fi

# run_suite NAME DIR CMAKE_ARGS...: configure, build, ctest; adds to the sums.
run_suite() {
    local name=$1 dir=$2 log rc line total nfail nskip
    shift 2
    echo "==== $name: configure and build in $dir"
    if ! cmake -S . -B "$dir" -DBUILD_TESTING=ON "$@" ||
       ! cmake --build "$dir" -j "$jobs"; then
        echo "test: $name: the build failed" >&2
        failed=$((failed + 1))
        status=1
        return
    fi
    echo "==== $name: ctest"
    log="$dir/ctest-output.log"
    ctest --test-dir "$dir" --output-on-failure -j1 "${ctest_args[@]}" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    # "100% tests passed, 0 tests failed out of 12"
    line=$(grep -E '[0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
    if [ -n "$line" ]; then
        nfail=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
        total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
        # "The following tests did not run: ... (Skipped)": not passes
        nskip=$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)$' "$log")
        passed=$((passed + total - nfail - nskip))
        failed=$((failed + nfail))
        skipped=$((skipped + nskip))
    elif [ "$rc" -ne 0 ]; then
        failed=$((failed + 1))
    else
        echo "test: $name: ctest found no tests" >&2
        failed=$((failed + 1))
    fi
    if [ "$rc" -ne 0 ]; then
        echo "test: $name: ctest failed (exit $rc); output in $log" >&2
        status=1
    fi
}

ctest_args=()
if [ "$quick" = 1 ]; then
    ctest_args=(-L '^(unit|quick)$')
    run_suite "quick" build -DCMAKE_BUILD_TYPE=RelWithDebInfo
    echo "tests: $passed passed, $failed failed, $skipped skipped"
    [ "$failed" -gt 0 ] && exit 1
    exit "$status"
fi

run_suite "plain" build -DCMAKE_BUILD_TYPE=RelWithDebInfo

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suite "asan+ubsan" build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DINVENTORYD_SANITIZE=ON -DCMAKE_C_COMPILER=clang

[ "$failed" -gt 0 ] && status=1
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit "$status"
