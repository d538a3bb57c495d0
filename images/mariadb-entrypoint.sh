#!/bin/sh
# mariadb-entrypoint [MARIADBD OPTION...] -- the entrypoint of
# inventoryd-mariadb (images/mariadb.Dockerfile), run as the mysql user.
#
# On the first start (no mysql/ in /var/lib/mysql) it makes the datadir
# with mariadb-install-db, as scripts/lib.sh's start_mariadb does, without
# the test database; root@localhost logs in by the unix socket only, so
# there is no administrator password to keep. On every start it runs
# mariadbd in the foreground (exec: it is the container's first process)
# with the options given, and an init file, read before the server serves,
# that creates MARIADB_DATABASE when missing, (re)creates MARIADB_USER on
# any host with MARIADB_PASSWORD, and grants it on that database what
# inventoryd needs: CREATE (the database, its fence counter's table),
# SELECT, INSERT and UPDATE (the counter). GET_LOCK needs no privilege. The init file is a pipe
# (a here-document on fd 3), so the password is written to no file, and
# it is never echoed.
#
# Environment: MARIADB_USER and MARIADB_DATABASE (letters, digits, _),
# MARIADB_PASSWORD (printable ASCII, not empty). Exits 2, saying which, when
# one is missing or bad.
set -eu
datadir=/var/lib/mysql

die() {
    echo "mariadb-entrypoint: $*" >&2
    exit 2
}

user=${MARIADB_USER:-}
database=${MARIADB_DATABASE:-}
password=${MARIADB_PASSWORD:-}
case $user in '' | *[!A-Za-z0-9_]*) die "MARIADB_USER must be letters, digits and _ (is '$user')" ;; esac
case $database in '' | *[!A-Za-z0-9_]*) die "MARIADB_DATABASE must be letters, digits and _ (is '$database')" ;; esac
[ -n "$password" ] || die "MARIADB_PASSWORD is empty: give the password of MARIADB_USER"
case $password in *[![:print:]]*) die "MARIADB_PASSWORD must be printable ASCII (not shown)" ;; esac
# In an SQL string: \ and ' escaped (the default sql_mode reads both).
quoted=$(printf '%s' "$password" | sed -e 's/\\/\\\\/g' -e "s/'/''/g")

if [ ! -d "$datadir/mysql" ]; then
    echo "mariadb-entrypoint: making the datadir $datadir (mariadb-install-db)"
    if ! mariadb-install-db --no-defaults --datadir="$datadir" --skip-test-db \
            --auth-root-authentication-method=socket >/tmp/install-db.log 2>&1; then
        cat /tmp/install-db.log >&2
        echo "mariadb-entrypoint: mariadb-install-db failed (above)" >&2
        exit 1
    fi
fi

echo "mariadb-entrypoint: mariadbd with user $user and database $database"
exec mariadbd --no-defaults --datadir="$datadir" --socket=/run/mysqld/mysqld.sock \
    --pid-file=/run/mysqld/mysqld.pid --init-file=/dev/fd/3 "$@" 3<<SQL
CREATE DATABASE IF NOT EXISTS \`$database\`;
CREATE OR REPLACE USER '$user'@'%' IDENTIFIED BY '$quoted';
GRANT CREATE, SELECT, INSERT, UPDATE ON \`$database\`.* TO '$user'@'%';
SQL
