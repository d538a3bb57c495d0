#!/usr/bin/env bash
# shell_functions.sh [FILE...] -- no shell function of the shipped scripts
# (scripts/*.sh, the shell library with them, and loadtest/*.sh) is longer
# than 80 lines, from its "NAME() {" line to its closing "}", both counted:
# a long procedure goes in named steps, the state they share in documented
# globals (scripts/campaign.sh's run_one and its run_* steps). Every
# function over the limit fails the test, named FILE:FUNCTION with its
# length; it failed with campaign.sh's run_one at 280 lines, strike at 105
# and draw_schedule at 82 before they went in steps. With FILE arguments it
# checks those files instead (an older version of a script, say).
#
# A function ends at the first line after it that starts with its closing
# brace at the function's own indentation, as the scripts' style writes it
# (a function nested in another is counted in it too); a definition on one
# line is one line; here-document bodies are skipped. A function whose end
# cannot be found fails the test as well: the count would mean nothing.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
limit=80
if [ $# -gt 0 ]; then
    files=("$@")
else
    shopt -s nullglob
    files=(scripts/*.sh loadtest/*.sh)
    [ ${#files[@]} -gt 5 ] || { echo "shell functions: only ${#files[@]} scripts found" >&2; exit 1; }
fi

# functions_of FILE: a line per function, "NAME START LENGTH" (LENGTH "?"
# when its end was not found).
functions_of() {
    awk '
        # the brace depth a definition leaves open on its own line
        function depth_after(s,   d, i, c) {
            sub(/[ \t]#.*$/, "", s)
            d = 0
            for (i = 1; i <= length(s); i++) {
                c = substr(s, i, 1)
                if (c == "{") d++
                else if (c == "}") d--
            }
            return d
        }
        # a definition whose first line (continued by a backslash) closes
        # every brace it opens is a one-liner: its length is that line
        function open(name, ind, rest, start) {
            if (rest ~ /\\$/) { jname = name; jind = ind; jtext = rest; jstart = start; return }
            if (depth_after(rest) <= 0) { print name, start, NR - start + 1; return }
            n++; NAME[n] = name; START[n] = start; IND[n] = ind
        }
        jname != "" {
            name = jname; jname = ""
            open(name, jind, substr(jtext, 1, length(jtext) - 1) " " $0, jstart)
            next
        }
        hd != "" {
            t = $0
            if (hd_tabs) sub(/^\t+/, "", t)
            if (t == hd) hd = ""
            next
        }
        {
            line = $0
            # a here-document starts on this line: its body is not code
            if (match(line, /<<-?[ \t]*["\047]?[A-Za-z_][A-Za-z0-9_]*["\047]?/) &&
                substr(line, RSTART + 2, 1) != "<" && (RSTART == 1 || substr(line, RSTART - 1, 1) != "<")) {
                h = substr(line, RSTART + 2, RLENGTH - 2)
                hd_tabs = (substr(h, 1, 1) == "-")
                if (hd_tabs) h = substr(h, 2)
                gsub(/[ \t"\047]/, "", h)
                hd = h
            }
            # the end of the innermost open function
            if (n > 0 && index(line, IND[n] "}") == 1 && substr(line, length(IND[n]) + 2) ~ /^([ \t;>|&#]|$)/) {
                print NAME[n], START[n], NR - START[n] + 1
                n--
                next
            }
            # a definition: "NAME() {", "function NAME {", "function NAME() {",
            # or "NAME()" with its brace alone on the next line
            if (pending != "" && line ~ ("^" pend_ind "\\{[ \t]*(#.*)?$")) {
                open(pending, pend_ind, "{", NR)
                pending = ""
                next
            }
            pending = ""
            if (match(line, /^[ \t]*(function[ \t]+)?[A-Za-z_][A-Za-z0-9_:.-]*[ \t]*\(\)[ \t]*/) ||
                match(line, /^[ \t]*function[ \t]+[A-Za-z_][A-Za-z0-9_:.-]*[ \t]+/)) {
                head = substr(line, 1, RLENGTH)
                rest = substr(line, RLENGTH + 1)
                ind = head; sub(/[^ \t].*$/, "", ind)
                name = head; sub(/^[ \t]*/, "", name); sub(/^function[ \t]+/, "", name); sub(/[ \t]*(\(\))?[ \t]*$/, "", name)
                if (rest ~ /^\{/) open(name, ind, rest, NR)
                else if (rest ~ /^(#.*)?$/ && head ~ /\(\)/) { pending = name; pend_ind = ind }
            }
        }
        END { for (; n > 0; n--) print NAME[n], START[n], "?" }
    ' "$1"
}

status=0
total=0
for f in "${files[@]}"; do
    [ -f "$f" ] || { echo "shell functions: no file $f" >&2; status=1; continue; }
    count=0
    longest=
    longest_len=0
    while read -r name start len; do
        count=$((count + 1))
        if [ "$len" = "?" ]; then
            echo "shell functions: $f:$name (line $start): no closing brace at its indentation" >&2
            status=1
            continue
        fi
        [ "$len" -gt "$longest_len" ] && { longest=$name; longest_len=$len; }
        if [ "$len" -gt "$limit" ]; then
            echo "shell functions: $f:$name is $len lines (line $start), over $limit" >&2
            status=1
        fi
    done < <(functions_of "$f")
    total=$((total + count))
    echo "shell functions: $f: $count functions${longest:+, the longest $longest at $longest_len lines}"
done
if [ "$status" = 0 ]; then
    echo "shell functions: every one of $total functions in ${#files[@]} files at most $limit lines"
else
    echo "shell functions: FAIL: a function over $limit lines, or one whose end was not found" >&2
fi
exit "$status"
