#!/bin/sh
# zookeeper-entrypoint KEY=VALUE... -- the entrypoint of inventoryd-zookeeper
# (images/zookeeper.Dockerfile): writes its arguments, one a line, as
# zoo.cfg, and runs a standalone ZooKeeper on it in the foreground, the JVM
# as the container's first process (so `docker stop` reaches it). The JVM
# options are scripts/lib.sh's start_zookeeper's; slf4j-simple on the class
# path sends the server's log (INFO, dated) to stderr, the container's log,
# where the host's run logs nothing (no slf4j binding). The connections'
# own lines are left out below WARN: a healthcheck's four-letter word every
# second would fill the log. Exits 2 on an argument that is not KEY=VALUE.
set -eu
if [ $# -eq 0 ]; then
    echo "zookeeper-entrypoint: give the lines of zoo.cfg as arguments (tickTime=500 dataDir=/var/lib/zookeeper clientPort=2181)" >&2
    exit 2
fi
for line in "$@"; do
    case $line in
        ?*=*) ;;
        *) echo "zookeeper-entrypoint: '$line' is not KEY=VALUE (a line of zoo.cfg)" >&2; exit 2 ;;
    esac
done
cfg=${TMPDIR:-/tmp}/zoo.cfg
printf '%s\n' "$@" >"$cfg"
exec java -Xmx256m -XX:+UseSerialGC \
    -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd HH:mm:ss.SSS" \
    -Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.server.NIOServerCnxn=warn \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
