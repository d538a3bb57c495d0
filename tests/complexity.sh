#!/usr/bin/env bash
# complexity.sh BUILD_DIR -- every function of src/ and tools/ has a
# cognitive complexity of at most 25, as clang-tidy's (Debian's 14)
# readability-function-cognitive-complexity counts it: a state machine or
# a long dispatch goes in small steps, a table or a struct of the work in
# progress. Reads BUILD_DIR/compile_commands.json (CMake writes it). Any
# function over the limit fails the test, with clang-tidy's line for it.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: complexity.sh BUILD_DIR}
limit=25
command -v clang-tidy >/dev/null 2>&1 ||
    { echo "complexity: clang-tidy is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
[ -f "$build/compile_commands.json" ] ||
    { echo "complexity: no $build/compile_commands.json" >&2; exit 1; }
shopt -s nullglob
files=(src/*.c tools/*.c)
[ ${#files[@]} -gt 20 ] || { echo "complexity: only ${#files[@]} C files found" >&2; exit 1; }
config="{CheckOptions: [{key: readability-function-cognitive-complexity.Threshold, value: $limit}, {key: readability-function-cognitive-complexity.DescribeBasicIncrements, value: false}]}"
over=()
for f in "${files[@]}"; do
    out=$(clang-tidy -p "$build" --quiet --checks='-*,readability-function-cognitive-complexity' \
        --config="$config" "$f" 2>/dev/null) || true
    while IFS= read -r line; do
        [ -n "$line" ] && over+=("$line")
    done < <(grep 'warning: function' <<<"$out")
done
if [ ${#over[@]} -gt 0 ]; then
    printf '%s\n' "${over[@]}" >&2
    echo "complexity: ${#over[@]} functions over $limit" >&2
    exit 1
fi
echo "complexity: every function of ${#files[@]} files at most $limit"
