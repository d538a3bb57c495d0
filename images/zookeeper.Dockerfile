# images/zookeeper.Dockerfile -- inventoryd-zookeeper:3.8, Debian 12's
# ZooKeeper (3.8) on its headless JRE, for docker-compose.yml's zookeeper
# service (scripts/images.sh builds it when it is missing; its context is
# images/). It runs a standalone ZooKeeper in the foreground as the
# zookeeper user, as scripts/lib.sh's start_zookeeper does on the host:
# the container's arguments are the lines of its zoo.cfg
# (zookeeper-entrypoint.sh), and bash is there for a healthcheck that asks
# the four-letter word srvr over /dev/tcp.
#
# The server is libzookeeper-java (/usr/share/java/zookeeper.jar and what
# it loads), built from Debian's zookeeper source. The zookeeper package
# itself adds only its scripts, an example configuration and zooinspector,
# a GUI, for which it depends on default-jre, the full JRE: GTK, Mesa and
# LLVM, 450 MB more than default-jre-headless. The JRE's postinst links
# its man page into /usr/share/man/man1, which the base image leaves out.
FROM debian:12
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libzookeeper-java default-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --home-dir /var/lib/zookeeper \
        --shell /usr/sbin/nologin zookeeper \
 && install -d -o zookeeper -g zookeeper -m 750 /var/lib/zookeeper
COPY zookeeper-entrypoint.sh /usr/local/bin/zookeeper-entrypoint
USER zookeeper
EXPOSE 2181
ENTRYPOINT ["zookeeper-entrypoint"]
CMD ["tickTime=2000", "dataDir=/var/lib/zookeeper", "clientPort=2181"]
