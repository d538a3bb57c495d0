#!/usr/bin/env bash
# executables.sh -- every script a user or CI runs is executable: each
# scripts/*.sh, loadtest/*.sh (loadtest/peers/*.sh too) and tests/*.sh (the libraries
# scripts/lib.sh and scripts/lib-*.sh are sourced, not run, and must not be). A fresh clone keeps git's mode, so this fails when
# a script was added without `chmod +x` (README told users to run
# scripts/matrix.sh, and the shell answered "Permission denied").
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
status=0
for f in scripts/*.sh loadtest/*.sh loadtest/jmeter/*.sh loadtest/peers/*.sh tests/*.sh tests/fuzz/*.sh .ci/run; do
    case $f in
        scripts/lib.sh | scripts/lib-*.sh)
            if [ -x "$f" ]; then
                echo "executables: $f is sourced, not run: chmod -x it" >&2
                status=1
            fi
            continue ;;
    esac
    if [ ! -x "$f" ]; then
        echo "executables: $f is not executable (chmod +x $f)" >&2
        status=1
    fi
done
[ "$status" = 0 ] && echo "executables: every script is executable"
exit "$status"
