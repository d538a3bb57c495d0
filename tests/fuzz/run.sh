#!/usr/bin/env bash
# run.sh -- builds the libFuzzer targets with clang and runs each one for a
# bounded time: the CI's fuzz step.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET]      (default 30)
#
# Environment:
#   CC               clang to use (default: clang, else clang-14)
#   FUZZ_WORK_DIR    where to build and run (default: a new mktemp -d dir)
#   FUZZ_TARGETS     which targets, space-separated (default: "config route")
#   FUZZ_JOBS        compile jobs (default: nproc)
#   CMAKE            cmake to run cmake/embed_lua.cmake with (default: cmake)
#
# DESIGN
# The targets are built here, not by CMake: each one is compiled with
# -fsanitize=fuzzer,address,undefined against the sources it needs.
#   fuzz_config  src/config.c and what it uses: the host:port parser, src/addr.c,
#                and the item rule, src/item.c.
#   fuzz_route   route.c, reply.c, inventory.c and what they pull in: every
#                src/*.c but main.c, plus the embedded Lua table generated
#                with cmake/embed_lua.cmake as CMakeLists.txt does, put in a
#                static archive so the linker takes only the objects needed,
#                and linked with --gc-sections so it keeps only the functions
#                reachable from the target (a half-finished change to a
#                function the target never reaches does not break the link).
# Each target runs on a copy of its seed corpus in the work directory, so new
# inputs never land in the checkout. Any crash, leak, UB report, timeout or
# failed check stops that target; the script then names the reproducer and
# how to replay it, keeps the work directory and exits 1. On success the work
# directory is removed (unless FUZZ_WORK_DIR was given).
set -euo pipefail

SECONDS_PER_TARGET=${1:-30}
case $SECONDS_PER_TARGET in
  ''|*[!0-9]*|0) echo "usage: $0 [SECONDS_PER_TARGET >= 1]" >&2; exit 2 ;;
esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SRC=$ROOT/src
TARGETS=${FUZZ_TARGETS:-config route}
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}

if [ -z "${CC:-}" ]; then
  if command -v clang >/dev/null 2>&1; then CC=clang
  elif command -v clang-14 >/dev/null 2>&1; then CC=clang-14
  else echo "fuzz: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2
  fi
fi

if [ -n "${FUZZ_WORK_DIR:-}" ]; then
  WORK=$FUZZ_WORK_DIR
  KEEP=1
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/inventoryd-fuzz.XXXXXX")
  KEEP=0
fi
WORK=$(cd "$WORK" && pwd)
BUILD=$WORK/build
mkdir -p "$BUILD/obj"

failed=0
finish() {
  local rc=$?
  if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$KEEP" -eq 1 ]; then
    echo "fuzz: work directory kept: $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap finish EXIT

# -fsanitize=fuzzer-no-link instruments the library code for coverage; the
# targets link with -fsanitize=fuzzer, which brings libFuzzer's main().
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS_COMMON="-g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra $SAN -I$SRC"
PKG_CFLAGS=$(pkg-config --cflags libmicrohttpd hiredis libcjson uuid libmariadb)
PKG_LIBS=$(pkg-config --libs libmicrohttpd hiredis libcjson uuid libmariadb)
# ZooKeeper's multithreaded binding ships no pkg-config file (as in CMakeLists.txt).
PKG_CFLAGS="$PKG_CFLAGS -DTHREADED"
PKG_LIBS="$PKG_LIBS -lzookeeper_mt"

# The embedded Lua scripts, in CMake's file(GLOB) order.
embed_lua() {
  local scripts
  scripts=$(LC_ALL=C ls "$SRC"/lua/*.lua | paste -sd ';' -)
  "${CMAKE:-cmake}" -DOUT="$BUILD/scripts_embedded.c" "-DSCRIPTS=$scripts" -P "$ROOT/cmake/embed_lua.cmake"
}

# Compiles the core (every src/*.c but main.c) into libcore.a, in parallel.
# A file that does not compile is reported and left out: the link then fails
# only if the target needs it (other people's work in progress elsewhere in
# src/ does not stop the fuzzing of route.c and reply.c).
build_core() {
  local srcs=() s
  for s in "$SRC"/*.c; do
    [ "$(basename "$s")" = main.c ] || srcs+=("$s")
  done
  srcs+=("$BUILD/scripts_embedded.c")
  rm -rf "$BUILD/obj" "$BUILD/libcore.a"
  mkdir -p "$BUILD/obj"
  export CC CFLAGS_COMMON PKG_CFLAGS BUILD
  printf '%s\n' "${srcs[@]}" | xargs -P "$JOBS" -I{} sh -c '
    o="$BUILD/obj/$(basename "$1" .c).o"
    $CC $CFLAGS_COMMON $PKG_CFLAGS -fsanitize=fuzzer-no-link \
      -ffunction-sections -fdata-sections -c "$1" -o "$o" ||
      echo "fuzz: warning: $1 does not compile; left out of the core" >&2
  ' sh {}
  ar rcs "$BUILD/libcore.a" "$BUILD"/obj/*.o
}

build_target() {
  local t=$1
  case $t in
    config)
      $CC $CFLAGS_COMMON -fsanitize=fuzzer "$HERE/fuzz_config.c" "$SRC/config.c" "$SRC/addr.c" "$SRC/item.c" \
        -o "$BUILD/fuzz_config" || return 1
      ;;
    route)
      if [ ! -f "$BUILD/libcore.a" ]; then
        embed_lua || return 1
        build_core || return 1
      fi
      $CC $CFLAGS_COMMON $PKG_CFLAGS -fsanitize=fuzzer "$HERE/fuzz_route.c" \
        "$BUILD/libcore.a" $PKG_LIBS -lpthread -lm -Wl,--gc-sections \
        -o "$BUILD/fuzz_route" || return 1
      ;;
    *) echo "fuzz: unknown target '$t'" >&2; return 2 ;;
  esac
}

# The last value of a libFuzzer final stat (-print_final_stats=1) in a log.
stat_of() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

run_target() {
  local t=$1 bin=$BUILD/fuzz_$1 corpus=$WORK/corpus_$1 art=$WORK/artifacts_$1
  local log=$WORK/fuzz_$1.log rc=0
  rm -rf "$corpus" "$art"
  mkdir -p "$corpus" "$art"
  cp -R "$HERE/corpus_$t/." "$corpus/"
  local dict=()
  [ -f "$HERE/$t.dict" ] && dict=(-dict="$HERE/$t.dict")

  echo "fuzz: running fuzz_$t for ${SECONDS_PER_TARGET}s on $(ls "$corpus" | wc -l) seeds"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=0:${ASAN_OPTIONS:-} \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-} \
    "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -max_len=8192 -print_final_stats=1 "${dict[@]}" \
      -artifact_prefix="$art/" "$corpus" >"$log" 2>&1 || rc=$?

  local execs per_sec
  execs=$(stat_of number_of_executed_units "$log")
  per_sec=$(stat_of average_exec_per_sec "$log")
  if [ "$rc" -eq 0 ] && ! grep -q -E '^==[0-9]+==ERROR|runtime error:|check failed' "$log"; then
    echo "fuzz: fuzz_$t passed: ${execs:-?} executions, ${per_sec:-?}/s, corpus $(ls "$corpus" | wc -l) inputs"
    return 0
  fi

  echo "fuzz: fuzz_$t FAILED (exit $rc); the end of its log ($log):"
  grep -n -E 'ERROR|runtime error|check failed|SUMMARY|Test unit written' "$log" | head -n 20 || true
  echo "----"
  tail -n 60 "$log"
  echo "----"
  local repro
  for repro in "$art"/*; do
    [ -e "$repro" ] || continue
    echo "fuzz: reproducer: $repro"
    echo "fuzz:   hex: $(od -An -tx1 -v "$repro" | tr -d ' \n' | head -c 2000)"
    echo "fuzz:   replay: $bin $repro"
  done
  return 1
}

passed=0
for t in $TARGETS; do
  if ! build_target "$t"; then
    echo "fuzz: fuzz_$t FAILED to build"
    failed=$((failed + 1))
    continue
  fi
  if run_target "$t"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
done

echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
