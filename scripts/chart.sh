#!/usr/bin/env bash
# chart.sh CSV PNG [NOTE]
#
# Draws the demo's comparison (results/demo.csv from scripts/demo.sh) as a
# PNG with gnuplot: top panel, sales per second of each strategy (log scale,
# the fastest and the slowest differ a hundredfold); bottom panel, units
# oversold. Bars are red where the strategy oversold and blue where it did
# not, in the order of the CSV. The title carries the date, the requests per
# strategy and NOTE (scripts/demo.sh passes clients and stock).
#
# Columns are found by name in the CSV's header (strategy, requests,
# sales_per_s, oversold_units, verdict), so new columns do not matter.
# Uses gnuplot's pngcairo terminal when it has one, png otherwise. The axes'
# ranges come from inventory-stats (tools/statscli.c): $INVENTORY_STATS, or
# build/inventory-stats in this checkout (scripts/demo.sh passes its own).
# Exit status: 0 with PNG written, 1 on bad input, a gnuplot failure or no
# inventory-stats, 2 on bad usage.
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: $0 CSV PNG [NOTE]" >&2
    exit 2
fi
csv=$1
png=$2
note=${3:-}

command -v gnuplot >/dev/null 2>&1 ||
    { echo "chart: gnuplot not found (scripts/deps.sh installs gnuplot-nox)" >&2; exit 1; }
stats=${INVENTORY_STATS:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/inventory-stats}
[ -x "$stats" ] ||
    { echo "chart: $stats is not an executable: build inventory-stats (cmake --build build --target inventory-stats) or name it in INVENTORY_STATS" >&2; exit 1; }
[ -s "$csv" ] || { echo "chart: $csv is missing or empty" >&2; exit 1; }

work=$(mktemp -d /tmp/inventoryd-chart.XXXXXX)
trap 'rm -rf "$work"' EXIT

# One line per strategy: index, name, sales/s, oversold units, 1 if oversold.
if ! awk -F, '
    NR == 1 {
        for (i = 1; i <= NF; i++) col[$i] = i
        split("strategy sales_per_s oversold_units verdict requests", need, " ")
        for (k in need) if (!(need[k] in col)) { print "no column " need[k] > "/dev/stderr"; bad = 1 }
        if (bad) exit 1
        next
    }
    NF > 1 {
        n++
        over = ($col["verdict"] == "OVERSOLD" || $col["oversold_units"] + 0 > 0) ? 1 : 0
        printf "%d \"%s\" %s %d %d\n", n - 1, $col["strategy"], $col["sales_per_s"] + 0,
               $col["oversold_units"] + 0, over
        if (!($col["requests"] in seen)) { seen[$col["requests"]] = 1; reqs = reqs (reqs == "" ? "" : "/") $col["requests"] }
    }
    END { if (!bad) print reqs > "'"$work/requests"'" }' "$csv" >"$work/data"; then
    echo "chart: cannot read $csv" >&2
    exit 1
fi
rows=$(wc -l <"$work/data")
[ "$rows" -gt 0 ] || { echo "chart: $csv has no strategy rows" >&2; exit 1; }
requests=$(cat "$work/requests")

# Axis ranges: room above the tallest bar for its label.
smin=$(cut -d' ' -f3 "$work/data" | "$stats" min)
smax=$(cut -d' ' -f3 "$work/data" | "$stats" max)
omax=$(cut -d' ' -f4 "$work/data" | "$stats" max)
ylo=$(awk -v v="$smin" 'BEGIN { l = 1; while (l * 10 <= v / 2) l *= 10; print l }')
yhi=$(awk -v v="$smax" 'BEGIN { print (v > 0 ? v * 4 : 10) }')
ohi=$(awk -v v="$omax" 'BEGIN { print (v > 0 ? v * 1.25 : 1) }')

# The list of terminals. The command goes in through a pipe: gnuplot given no
# script reads standard input, which may be the user's terminal.
terminals=$(printf 'set terminal\n' | gnuplot 2>&1 || true)
if grep -qw pngcairo <<<"$terminals"; then
    term="pngcairo size 1400,1000 enhanced font 'DejaVu Sans,12' linewidth 1.2"
else
    term="png size 1400,1000 enhanced font 'DejaVu Sans' 11"
fi

title="Distributed-lock strategies side by side"
sub="$(date +%F), $requests requests per strategy${note:+, $note}"
# gnuplot strings are in single quotes below: keep the text free of them.
title=${title//\'/}
sub=${sub//\'/}

mkdir -p "$(dirname "$png")"
if ! gnuplot >"$work/gnuplot.log" 2>&1 <<EOF
set terminal $term
set output '$png.tmp'
set encoding utf8
set datafile separator whitespace

red  = 0xC44E52
blue = 0x4C72B0
bar(over) = (over > 0.5) ? red : blue

set style fill solid 0.9 border rgb 'white'
set boxwidth 0.72
set grid ytics lc rgb '#dddddd' lt 1
set border 3 lc rgb '#555555'
set tics nomirror textcolor rgb '#333333'
set xtics rotate by 35 right offset 0.6,0 font ',12'
set xrange [-0.6:$rows - 0.4]
set key top right reverse Left samplen 1.5 font ',12' box lc rgb '#bbbbbb' opaque

set multiplot title "{/:Bold=17 $title}\n{/=12 $sub}" layout 2,1 margins 0.08,0.98,0.11,0.87 spacing 0,0.13

# Top: throughput.
set title 'Sales per second (log scale): higher is faster' font ',14'
set logscale y
set yrange [$ylo:$yhi]
set format y '%.0s%c'
set ylabel 'sales / s'
plot '$work/data' using 1:3:(bar(\$5)):xtic(2) with boxes lc rgb variable notitle, \
     '' using 1:3:(sprintf('%.0f', \$3)) with labels offset 0,0.8 font ',11' textcolor rgb '#222222' notitle, \
     NaN with boxes lc rgb blue title 'did not oversell', \
     NaN with boxes lc rgb red title 'oversold'

# Bottom: correctness.
set title 'Units oversold (sold beyond the stock): 0 is correct' font ',14'
unset logscale y
set yrange [0:$ohi]
set format y '%.0f'
set ylabel 'units oversold'
set key off
plot '$work/data' using 1:4:(bar(\$5)):xtic(2) with boxes lc rgb variable, \
     '' using 1:4:(sprintf('%d', \$4)):((\$5 > 0.5) ? red : 0x2E7D32) with labels offset 0,0.8 font ',12' textcolor rgb variable
unset multiplot
set output
EOF
then
    cat "$work/gnuplot.log" >&2
    rm -f "$png.tmp"
    echo "chart: gnuplot failed" >&2
    exit 1
fi
if [ -s "$work/gnuplot.log" ]; then
    # Warnings only (a failure exits above): show them, they are rare.
    sed 's/^/chart: gnuplot: /' "$work/gnuplot.log" >&2
fi
[ -s "$png.tmp" ] || { echo "chart: gnuplot wrote nothing" >&2; exit 1; }
mv "$png.tmp" "$png"
