# images/redis.Dockerfile -- redis:7.0 made from Debian 12's redis-server, for
# machines that cannot pull the official image (scripts/images.sh builds it
# only when no redis:7.0 is there). It runs what docker-compose.yml asks of
# the official one: `redis-server --port N ...` as the container's command,
# redis-cli for the healthchecks, a shell for redis-cluster-create, and a
# writable working directory, /data, for the cluster nodes' nodes-N.conf.
FROM debian:12
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data && chown redis:redis /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
