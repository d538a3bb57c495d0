# Dockerfile -- inventoryd on Debian 12, for docker-compose.yml.
#
# Two stages: the build stage installs the -dev packages that scripts/deps.sh
# names and builds with CMake (Release, no tests); the runtime stage has only
# their runtime libraries, the two binaries and config/inventoryd.properties
# as /etc/inventoryd/inventoryd.properties. tests/compose_check.sh checks that
# the -dev list below has the package of every library CMakeLists.txt links
# (as scripts/deps.sh names them) and that every source folder it reads is
# copied.
#
#   docker build -t inventoryd:local .
#   docker run --rm -p 127.0.0.1:3786:3786 -e INVENTORYD_ADMIN_TOKEN inventoryd:local \
#       --config /etc/inventoryd/inventoryd.properties \
#       --set server.bind=0.0.0.0 --set redis.host=<redis host>
#
# The image's arguments are inventoryd's (ENTRYPOINT is the binary); the
# default CMD listens on 0.0.0.0:3786 with the shipped properties, which
# expect Redis on 127.0.0.1: docker-compose.yml sets every host explicitly.
# Off loopback inventoryd refuses to start without admin.token, so give it
# INVENTORYD_ADMIN_TOKEN (at least 16 characters).

FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config \
        libmicrohttpd-dev libhiredis-dev libcjson-dev uuid-dev libmariadb-dev libzookeeper-mt-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the build reads, so that a local build/ or results/ never enters
# the image (and no CMakeCache.txt from the host confuses CMake).
COPY CMakeLists.txt ./
COPY cmake/ cmake/
COPY src/ src/
COPY tools/ tools/
RUN cmake -S . -B /tmp/build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
 && cmake --build /tmp/build -j "$(nproc)" --target inventoryd inventory-load

FROM debian:12
# The runtime libraries of the -dev packages above; curl for the healthcheck.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd12 libhiredis0.14 libcjson1 libuuid1 libmariadb3 libzookeeper-mt2 curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin inventoryd
COPY --from=build /tmp/build/inventoryd /tmp/build/inventory-load /usr/local/bin/
COPY config/inventoryd.properties /etc/inventoryd/inventoryd.properties
USER inventoryd
EXPOSE 3786 3787
ENTRYPOINT ["inventoryd"]
CMD ["--config", "/etc/inventoryd/inventoryd.properties", "--set", "server.bind=0.0.0.0"]
