# images/mariadb.Dockerfile -- inventoryd-mariadb:10.11, Debian 12's
# mariadb-server (10.11), for docker-compose.yml's mariadb service
# (scripts/images.sh builds it when it is missing; its context is images/).
# mariadb-entrypoint.sh makes the datadir with mariadb-install-db on the
# first start (into an empty volume, too), gives MARIADB_USER its password
# and MARIADB_DATABASE from the environment, and runs mariadbd in the
# foreground as the mysql user; the container's arguments are mariadbd
# options. The package's own datadir is removed here: the entrypoint makes
# the one it runs, with the options scripts/lib.sh's start_mariadb uses.
FROM debian:12
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mariadb-server \
 && rm -rf /var/lib/apt/lists/* /var/lib/mysql \
 && install -d -o mysql -g mysql -m 750 /var/lib/mysql \
 && install -d -o mysql -g mysql -m 755 /run/mysqld
COPY mariadb-entrypoint.sh /usr/local/bin/mariadb-entrypoint
USER mysql
EXPOSE 3306
ENTRYPOINT ["mariadb-entrypoint"]
CMD ["--port=3306"]
