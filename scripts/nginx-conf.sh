#!/usr/bin/env bash
# nginx-conf.sh [OPTIONS] LISTEN_PORT UP1_PORT UP2_PORT DIR
#
# Renders nginx/nginx.conf.in into DIR/nginx.conf: nginx listening on
# 127.0.0.1:LISTEN_PORT in front of two inventoryd instances on
# 127.0.0.1:UP1_PORT (weight 1) and 127.0.0.1:UP2_PORT (weight 2). DIR is
# created if needed and is meant to be nginx's prefix:
#   nginx -p DIR -c DIR/nginx.conf -e DIR/error.log -g 'daemon off;'
# The demo and the tests both use this one template; nginx/nginx.conf is its
# rendering for the demo's ports (8080 3786 3787).
#
# Options, for stacks where the hosts are not 127.0.0.1 (docker-compose):
#   --listen-host H   address nginx listens on (127.0.0.1)
#   --up1-host H      host of the weight-1 instance (127.0.0.1)
#   --up2-host H      host of the weight-2 instance (127.0.0.1)
#   --name FILE       file name written in DIR (nginx.conf)
# nginx/nginx.compose.conf, the compose stack's variant, is
#   scripts/nginx-conf.sh --listen-host 0.0.0.0 --up1-host inventoryd-3786 \
#       --up2-host inventoryd-3787 --name nginx.compose.conf 8080 3786 3787 nginx
# Without options the output is exactly what it always was.
set -euo pipefail

usage() {
    echo "usage: $0 [--listen-host H] [--up1-host H] [--up2-host H] [--name FILE]" \
         "LISTEN_PORT UP1_PORT UP2_PORT DIR" >&2
    exit 2
}

listen_host=127.0.0.1
up1_host=127.0.0.1
up2_host=127.0.0.1
name=nginx.conf
while [ $# -gt 0 ]; do
    case "$1" in
        --listen-host|--up1-host|--up2-host|--name)
            [ $# -ge 2 ] || usage
            case "$1" in
                --listen-host) listen_host=$2 ;;
                --up1-host) up1_host=$2 ;;
                --up2-host) up2_host=$2 ;;
                --name) name=$2 ;;
            esac
            shift 2
            ;;
        --) shift; break ;;
        -*) usage ;;
        *) break ;;
    esac
done

if [ $# -ne 4 ]; then
    usage
fi
for p in "$1" "$2" "$3"; do
    if ! [[ "$p" =~ ^[0-9]+$ ]] || [ "$p" -lt 1 ] || [ "$p" -gt 65535 ]; then
        echo "$0: '$p' is not a TCP port" >&2
        exit 2
    fi
done
# Host names and IPv4 addresses only: they go into sed and nginx unquoted.
for h in "$listen_host" "$up1_host" "$up2_host"; do
    if ! [[ "$h" =~ ^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]]; then
        echo "$0: '$h' is not a host name or IPv4 address" >&2
        exit 2
    fi
done
if ! [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || [ "$name" = . ] || [ "$name" = .. ]; then
    echo "$0: '$name' is not a plain file name" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
template="$here/../nginx/nginx.conf.in"
dir=$4
mkdir -p "$dir"
out="$dir/$name"
{
    if [ "$listen_host" != 127.0.0.1 ] || [ "$up1_host" != 127.0.0.1 ] ||
       [ "$up2_host" != 127.0.0.1 ]; then
        echo "# Rendered with hosts: listen $listen_host:$1, upstreams" \
             "$up1_host:$2 (weight 1) and $up2_host:$3 (weight 2)."
        echo "# Do not edit: run scripts/nginx-conf.sh --listen-host $listen_host" \
             "--up1-host $up1_host --up2-host $up2_host --name $name $1 $2 $3 DIR"
    fi
    # The template writes 127.0.0.1 in front of each port placeholder; the
    # host options replace exactly those.
    sed -e "s/127\.0\.0\.1:@LISTEN_PORT@/$listen_host:$1/g" \
        -e "s/127\.0\.0\.1:@UP1_PORT@/$up1_host:$2/g" \
        -e "s/127\.0\.0\.1:@UP2_PORT@/$up2_host:$3/g" \
        -e "s/@LISTEN_PORT@/$1/g" -e "s/@UP1_PORT@/$2/g" -e "s/@UP2_PORT@/$3/g" \
        "$template"
} > "$out.tmp"
# A template whose listen or server lines no longer read 127.0.0.1:@...@
# would silently ignore the host options: refuse rather than render that.
if ! grep -Eq "^[[:space:]]*listen[[:space:]]+$listen_host:$1[[:space:];]" "$out.tmp" ||
   ! grep -Eq "^[[:space:]]*server[[:space:]]+$up1_host:$2[[:space:]]+weight=1;" "$out.tmp" ||
   ! grep -Eq "^[[:space:]]*server[[:space:]]+$up2_host:$3[[:space:]]+weight=2;" "$out.tmp"; then
    rm -f "$out.tmp"
    echo "$0: $template no longer has 'listen 127.0.0.1:@LISTEN_PORT@' and" \
         "'server 127.0.0.1:@UP1_PORT@ weight=1;' / '... @UP2_PORT@ weight=2;' lines;" \
         "update the host substitution here" >&2
    exit 1
fi
mv "$out.tmp" "$out"
