#!/usr/bin/env bash
# style.sh -- the C sources of src/, tools/ and tests/ are as clang-format
# (Debian's 14, .clang-format at the root) writes them: any file it would
# change fails the test, with the first lines it disagrees on. Reformat
# with: clang-format -i src/*.[ch] tools/*.[ch] tests/*.[ch] tests/fuzz/*.[ch]
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v clang-format >/dev/null 2>&1 ||
    { echo "style: clang-format is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
# Another major version formats some constructs otherwise: its verdict
# would be about the version, not the code.
v=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
[ "$v" = 14 ] || { echo "style: clang-format ${v:-?} found; the house style is clang-format 14's (Debian 12's)" >&2; exit 1; }
shopt -s nullglob
files=(src/*.c src/*.h tools/*.c tools/*.h tests/*.c tests/*.h tests/fuzz/*.c tests/fuzz/*.h)
[ ${#files[@]} -gt 20 ] || { echo "style: only ${#files[@]} C files found" >&2; exit 1; }
out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1)
if [ -n "$out" ]; then
    echo "$out" | head -n 30 >&2
    echo "style: $(echo "$out" | grep -c 'error:') places in $(echo "$out" | grep 'error:' | cut -d: -f1 | sort -u | wc -l) files differ from clang-format" >&2
    exit 1
fi
echo "style: ${#files[@]} files as clang-format writes them"
