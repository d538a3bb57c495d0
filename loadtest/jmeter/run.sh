#!/usr/bin/env bash
# run.sh [-o DIR] PLAN [JMETER_ARGS...]
#
# Runs a JMeter plan of loadtest/jmeter/ headless, prints a short summary and
# turns the plan's verdict into an exit status (JMeter's own is 0 even when
# samples failed).
#
#   PLAN         a .jmx file, or the name of one here: sale-200, sale-3000
#   JMETER_ARGS  handed to JMeter as they are, typically the plan's -J
#                properties: -Jhost=127.0.0.1 -Jport=8080 -Jstrategy=owner-lua
#                -Jthreads=200 -Jloops=1 -Jstock=200 (-Jrampup, -Jtimeout_ms),
#                and -Jtoken=$INVENTORYD_ADMIN_TOKEN when the instances have an
#                admin.token (the reset needs it; the demo prints it)
#   -o DIR       where results.jtl, jmeter.log and jmeter.out go
#                (default loadtest/jmeter/results/<plan>/; the three are replaced)
#
# Which JMeter: $JMETER (a jmeter command) if set; else $JMETER_HOME/bin/jmeter;
# else `jmeter` on PATH; else Debian's JMeter 2.13 (apt-get install jmeter
# jmeter-http) through launcher/JMeterLauncher.java, compiled here with javac
# into loadtest/jmeter/.build/ ($JMETER_LAUNCHER_CACHE). Debian's own
# /usr/bin/jmeter refuses every plan (ForbiddenClassException: its xstream is
# newer than JMeter 2.13), so it is always run through the launcher.
#
# Exit status:
#   0  the stock was reset, every sale was answered sold, sold_out or an
#      expected error, and the audit passed
#   1  the audit failed: oversold, a unit sold twice or a mutual-exclusion
#      violation (the tearDown sampler "audit" failed)
#   2  nothing to judge: no JMeter, the plan did not run, the reset failed,
#      or the audit was missing or did not answer 200
#   3  the audit passed, but some sales got an unexpected answer (sampler
#      "sale" failed: backend_unavailable, a proxy error, no answer, ...)
#
# Environment: JMETER, JMETER_HOME, JAVA_HOME (Debian's JMeter: which java and
# javac), JMETER_LAUNCHER_CACHE, JMETER_RUN_TIMEOUT (seconds, default 1800:
# JMeter is stopped after that).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
me="run.sh"
debian_home=/usr/share/jmeter

die() {
    echo "$me: $*" >&2
    exit 2
}

usage() {
    sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
    exit 2
}

out=
while [ $# -gt 0 ]; do
    case "$1" in
        -o) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
        -h|--help) usage ;;
        --) shift; break ;;
        -*) echo "$me: unknown option $1 (JMeter's own options go after the plan)" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || usage
plan=$1
shift
case "$plan" in
    */*|*.jmx) ;;
    *) plan=$here/$plan.jmx ;;
esac
[ -f "$plan" ] || die "no such plan: $plan"
plan=$(cd "$(dirname "$plan")" && pwd)/$(basename "$plan")
name=$(basename "$plan" .jmx)
[ -n "$out" ] || out=$here/results/$name
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
jtl=$out/results.jtl
# JMeter appends to an existing results file: start from nothing.
rm -f "$jtl" "$out/jmeter.log" "$out/jmeter.out"

# ---- which JMeter ------------------------------------------------------------
# is_debian_jmeter CMD: CMD is Debian's wrapper around /usr/share/jmeter.
is_debian_jmeter() {
    local f
    f=$(readlink -f "$1" 2>/dev/null) || return 1
    case "$f" in "$debian_home"/*) return 0 ;; esac
    grep -qs 'java-wrappers' "$f" && grep -qs "$debian_home" "$f"
}

jmeter_cmd=()
how=
if [ -n "${JMETER:-}" ]; then
    command -v "$JMETER" >/dev/null 2>&1 || die "JMETER=$JMETER is not a command"
    if ! is_debian_jmeter "$(command -v "$JMETER")"; then
        jmeter_cmd=("$JMETER"); how="JMETER=$JMETER"
    fi
elif [ -n "${JMETER_HOME:-}" ]; then
    [ -x "$JMETER_HOME/bin/jmeter" ] || die "JMETER_HOME=$JMETER_HOME has no bin/jmeter"
    if ! is_debian_jmeter "$JMETER_HOME/bin/jmeter"; then
        jmeter_cmd=("$JMETER_HOME/bin/jmeter"); how="$JMETER_HOME/bin/jmeter"
    fi
elif command -v jmeter >/dev/null 2>&1 && ! is_debian_jmeter "$(command -v jmeter)"; then
    jmeter_cmd=("$(command -v jmeter)"); how="$(command -v jmeter) (from PATH)"
fi

if [ ${#jmeter_cmd[@]} -eq 0 ]; then
    # Debian's JMeter 2.13, through the launcher.
    if [ ! -f "$debian_home/bin/ApacheJMeter.jar" ]; then
        die "no JMeter found. Either set JMETER_HOME to a JMeter 5 (or put its bin/ on PATH), or install Debian's: apt-get install jmeter jmeter-http"
    fi
    [ -f "$debian_home/lib/ext/ApacheJMeter_http.jar" ] ||
        die "Debian's JMeter has no HTTP sampler: apt-get install jmeter-http"
    xstream=/usr/share/java/xstream.jar
    [ -f "$xstream" ] || die "$xstream not found (apt-get install libxstream-java)"
    if [ -n "${JAVA_HOME:-}" ]; then
        java=$JAVA_HOME/bin/java; javac=$JAVA_HOME/bin/javac
    else
        java=$(command -v java || true); javac=$(command -v javac || true)
    fi
    [ -n "$java" ] && [ -x "$java" ] || die "no java (apt-get install default-jre-headless)"
    [ -n "$javac" ] && [ -x "$javac" ] ||
        die "no javac to build the launcher (apt-get install default-jdk-headless)"

    src=$here/launcher/JMeterLauncher.java
    [ -f "$src" ] || die "$src is missing"
    # The cache: the class and a stamp of what it was built from.
    cache=${JMETER_LAUNCHER_CACHE:-$here/.build}
    if ! { mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ]; }; then
        cache=${XDG_CACHE_HOME:-$HOME/.cache}/inventoryd-jmeter
        mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] || die "no writable cache directory for the launcher"
    fi
    cp_build=$debian_home/bin/ApacheJMeter.jar:$debian_home/lib/ext/ApacheJMeter_core.jar:$debian_home/lib/jorphan.jar:$xstream
    stamp=$( { cksum <"$src"; "$javac" -version 2>&1; ls -l --time-style=+%s "$debian_home/lib/ext/ApacheJMeter_core.jar" "$xstream"; } | cksum)
    if [ ! -f "$cache/JMeterLauncher.class" ] || [ "$(cat "$cache/stamp" 2>/dev/null)" != "$stamp" ]; then
        tmp=$(mktemp -d "$cache/tmp.XXXXXX") || die "cannot write in $cache"
        if ! "$javac" -nowarn -d "$tmp" -cp "$cp_build" "$src" >"$tmp/javac.log" 2>&1; then
            cat "$tmp/javac.log" >&2
            rm -rf "$tmp"
            die "javac could not build $src"
        fi
        # Renames: a run in parallel sees the old class or the new one, whole.
        mv -f "$tmp/JMeterLauncher.class" "$cache/JMeterLauncher.class"
        echo "$stamp" >"$tmp/stamp" && mv -f "$tmp/stamp" "$cache/stamp"
        rm -rf "$tmp"
    fi
    jmeter_cmd=("$java" -Djava.awt.headless=true -Djmeter.home="$debian_home"
        -cp "$cache:$debian_home/bin/ApacheJMeter.jar:$debian_home/lib/*:$debian_home/lib/ext/*"
        JMeterLauncher)
    how="Debian's JMeter 2.13 through launcher/JMeterLauncher.java (class in $cache)"
fi

# ---- run ---------------------------------------------------------------------
# Last, so that they win: the results file this script can read (tab
# separated CSV with a header, failure messages, and the plan's variables
# audit and sale_status as extra columns), and no UDP shutdown listener.
# shellcheck disable=SC2054  # the commas are inside one property value
save=(-Jjmeter.save.saveservice.output_format=csv
      -Jjmeter.save.saveservice.print_field_names=true
      '-Jjmeter.save.saveservice.default_delimiter=\t'
      -Jjmeter.save.saveservice.label=true
      -Jjmeter.save.saveservice.successful=true
      -Jjmeter.save.saveservice.response_code=true
      -Jjmeter.save.saveservice.assertion_results_failure_message=true
      -Jsample_variables=audit,sale_status
      -Jjmeterengine.nongui.port=0)

echo "$me: JMeter: $how"
echo "$me: plan $plan $*"
echo "$me: results in $out/"
jpid=
stop_jmeter() {
    [ -n "$jpid" ] || return 0
    kill -TERM "$jpid" 2>/dev/null
    for _ in $(seq 1 100); do
        kill -0 "$jpid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$jpid" 2>/dev/null
    wait "$jpid" 2>/dev/null
    jpid=
}
trap 'echo "$me: interrupted, stopping JMeter" >&2; stop_jmeter; exit 2' INT TERM
# In the background, so that a signal reaches the trap at once; cd to the
# results directory, where JMeter leaves anything it writes by itself.
(cd "$out" && exec timeout -k 10 "${JMETER_RUN_TIMEOUT:-1800}" "${jmeter_cmd[@]}" \
    -n -t "$plan" -l "$jtl" -j "$out/jmeter.log" "$@" "${save[@]}") >"$out/jmeter.out" 2>&1 &
jpid=$!
wait "$jpid"
rc=$?
jpid=
trap - INT TERM
if [ "$rc" -ne 0 ] || [ ! -s "$jtl" ]; then
    [ "$rc" -eq 124 ] && echo "$me: JMeter ran longer than ${JMETER_RUN_TIMEOUT:-1800} s and was stopped" >&2
    echo "$me: JMeter exited with $rc; last lines of $out/jmeter.out:" >&2
    tail -n 15 "$out/jmeter.out" >&2
    [ -s "$jtl" ] || die "no results in $jtl: the plan did not run (see $out/jmeter.log)"
    die "JMeter failed"
fi
# JMeter 2.13 answers a plan it cannot load with a message and status 0.
if grep -q 'Error in NonGUIDriver' "$out/jmeter.out"; then
    grep 'Error in NonGUIDriver' "$out/jmeter.out" >&2
    die "JMeter could not run the plan"
fi

# ---- read the results ----------------------------------------------------------
# One line per fact, tab separated: "count LABEL N", "failed LABEL N",
# "code LABEL CODE N", "status LABEL STATUS N", "message LABEL TEXT" (first
# failure), "audit TEXT", "auditcode CODE", "auditok true|false", "bad N"
# (lines that were not records).
facts=$(awk -F'\t' '
    function unq(s) {
        if (s ~ /^".*"$/) { s = substr(s, 2, length(s) - 2); gsub(/""/, "\"", s) }
        return s
    }
    NR == 1 {
        nf = NF
        for (i = 1; i <= NF; i++) col[unq($i)] = i
        if (!("label" in col) || !("success" in col)) { print "noheader"; exit }
        next
    }
    # A quoted field may hold line breaks (JMeter quotes it): join the
    # lines of one record until its quotes pair up.
    {
        rec = (pending == "") ? $0 : pending "\n" $0
        if (gsub(/"/, "\"", rec) % 2 == 1) { pending = rec; next }
        pending = ""
        $0 = rec
    }
    NF != nf { bad++; next }
    {
        l = unq($col["label"]); ok = $col["success"]
        n[l]++
        if (ok != "true") {
            f[l]++
            if (!(l in msg)) {
                m = ("failureMessage" in col) ? unq($col["failureMessage"]) : ""
                if (m == "" && ("responseMessage" in col)) m = unq($col["responseMessage"])
                gsub(/[\r\n\t]+/, " ", m)
                msg[l] = m
            }
        }
        if ("responseCode" in col) code[l SUBSEP unq($col["responseCode"])]++
        if (("sale_status" in col) && l == "sale") st[unq($col["sale_status"])]++
        if (l == "audit") {
            auditok = ok
            if ("audit" in col) audit = unq($col["audit"])
            if ("responseCode" in col) auditcode = unq($col["responseCode"])
        }
    }
    END {
        for (l in n) { print "count\t" l "\t" n[l]; print "failed\t" l "\t" f[l] + 0 }
        for (l in msg) print "message\t" l "\t" msg[l]
        for (k in code) { split(k, p, SUBSEP); print "code\t" p[1] "\t" p[2] "\t" code[k] }
        for (s in st) print "status\tsale\t" s "\t" st[s]
        if (auditok != "") { print "auditok\t" auditok; print "audit\t" audit; print "auditcode\t" auditcode }
        print "bad\t" bad + 0
    }' "$jtl")
echo "$facts" | grep -q '^noheader' && die "cannot read $jtl: no header with label and success"

fact() {  # fact KIND [LABEL [KEY]]: the value, empty if none
    local kind=$1
    shift
    awk -F'\t' -v k="$kind" -v a="${1:-}" -v b="${2:-}" '
        $1 != k { next }
        k == "audit" || k == "auditok" || k == "auditcode" || k == "bad" { v = $2; exit }
        k == "code" || k == "status" { if ($2 == a && $3 == b) { v = $4; exit } next }
        $2 == a { v = $3; exit }
        END { print v }' <<<"$facts"
}
# list KIND LABEL: "KEY N, KEY N" over the codes or statuses of LABEL.
list() {
    awk -F'\t' -v k="$1" -v a="$2" '$1 == k && $2 == a { print $3 " " $4 }' <<<"$facts" |
        sort -k2,2nr -k1,1 | paste -sd, - | sed 's/,/, /g'
}

total=0
failed=0
for l in $(awk -F'\t' '$1 == "count" { print $2 }' <<<"$facts" | sort); do
    total=$((total + $(fact count "$l")))
    failed=$((failed + $(fact failed "$l")))
done
echo "samples: $total, failed: $failed"
for l in reset sale audit; do
    n=$(fact count "$l")
    f=$(fact failed "$l")
    printf '  %-6s %s sample(s), %s failed' "$l" "${n:-0}" "${f:-0}"
    [ -n "$n" ] && printf '; HTTP %s' "$(list code "$l")"
    [ "$l" = sale ] && [ -n "$(list status sale)" ] && printf '; %s' "$(list status sale)"
    echo
    m=$(fact message "$l")
    [ -n "$m" ] && echo "         first failure: $m"
done
other=$(awk -F'\t' '$1 == "count" && $2 != "reset" && $2 != "sale" && $2 != "audit" { printf "%s%s %s", s, $2, $3; s = ", " }' <<<"$facts")
[ -n "$other" ] && echo "  other samplers: $other"
bad=$(fact bad)
[ "${bad:-0}" -gt 0 ] && echo "  ($bad line(s) of $jtl were not records and were skipped)"

auditok=$(fact auditok)
echo "audit: $(fact audit)"

verdict() {
    echo "result: $2"
    exit "$1"
}
[ "$(fact count reset)" = 1 ] && [ "$(fact failed reset)" = 0 ] ||
    verdict 2 "FAIL: the setUp reset did not succeed, nothing to judge"
[ -n "$auditok" ] ||
    verdict 2 "FAIL: no audit sample in the results (did the tearDown thread group run?)"
[ "$(fact auditcode)" = 200 ] ||
    verdict 2 "FAIL: GET /inventory/audit answered $(fact auditcode), not 200"
[ "$auditok" = true ] ||
    verdict 1 "FAIL: the audit found an oversell, a unit sold twice or a mutual-exclusion violation"
[ "$(fact failed sale)" = 0 ] ||
    verdict 3 "FAIL: the audit passed, but $(fact failed sale) sale(s) got an unexpected answer"
verdict 0 "PASS: nothing oversold, no unit sold twice, no mutual-exclusion violation"
