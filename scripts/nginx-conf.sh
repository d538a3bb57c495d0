#!/usr/bin/env bash
# nginx-conf.sh LISTEN_PORT UP1_PORT UP2_PORT DIR
#
# Renders nginx/nginx.conf.in into DIR/nginx.conf: nginx listening on
# 127.0.0.1:LISTEN_PORT in front of two inventoryd instances on
# 127.0.0.1:UP1_PORT (weight 1) and 127.0.0.1:UP2_PORT (weight 2). DIR is
# created if needed and is meant to be nginx's prefix:
#   nginx -p DIR -c DIR/nginx.conf -e DIR/error.log -g 'daemon off;'
# The demo and the tests both use this one template; nginx/nginx.conf is its
# rendering for the demo's ports (8080 3786 3787).
set -euo pipefail

if [ $# -ne 4 ]; then
    echo "usage: $0 LISTEN_PORT UP1_PORT UP2_PORT DIR" >&2
    exit 2
fi
for p in "$1" "$2" "$3"; do
    if ! [[ "$p" =~ ^[0-9]+$ ]] || [ "$p" -lt 1 ] || [ "$p" -gt 65535 ]; then
        echo "$0: '$p' is not a TCP port" >&2
        exit 2
    fi
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
template="$here/../nginx/nginx.conf.in"
dir=$4
mkdir -p "$dir"
sed -e "s/@LISTEN_PORT@/$1/g" -e "s/@UP1_PORT@/$2/g" -e "s/@UP2_PORT@/$3/g" \
    "$template" > "$dir/nginx.conf.tmp"
mv "$dir/nginx.conf.tmp" "$dir/nginx.conf"
