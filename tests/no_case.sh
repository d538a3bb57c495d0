#!/usr/bin/env bash
# no_case.sh CHECK_BINARY -- a Check executable run with a case name that
# names no case (CK_RUN_CASE=NoSuchCase) must fail, not pass having run
# nothing: its exit status is not 0, and it says why. ctest's
# PASS_REGULAR_EXPRESSION alone would ignore the exit status.
set -u
bin=${1:?usage: no_case.sh CHECK_BINARY}
out=$(CK_RUN_CASE=NoSuchCase "$bin" 2>&1)
rc=$?
want="check: no test ran: CK_RUN_CASE=NoSuchCase"
if [ "$rc" -eq 0 ]; then
    echo "no_case: $bin exited 0 with CK_RUN_CASE=NoSuchCase; it said:" >&2
    echo "$out" >&2
    exit 1
fi
if ! grep -qF "$want" <<<"$out"; then
    echo "no_case: $bin exited $rc without saying \"$want\"; it said:" >&2
    echo "$out" >&2
    exit 1
fi
echo "no_case: $bin exited $rc and said: $want"
