/* storeceiling.c -- the ceiling of a lock that lives in ZooKeeper or
 * MariaDB: one client doing, back to back, exactly the store operations
 * one hold of the lock needs, with no Redis and no lock core in between.
 *
 * DESIGN
 * One thread, one session, N holds, each timed on the monotonic clock from
 * the first send to the last reply; the session's set-up is not timed. A
 * lock that serialises its holders cannot sell faster than one hold per
 * round of these operations, so holds/s is that lock's ceiling (as
 * `redis-benchmark -c 1` is Redis's, docs/speed.md).
 *
 *   --zookeeper H:P   create EPHEMERAL|SEQUENCE /locks/storeceiling/c-lock-
 *                     (with its Stat, as zoo_create2), get_children of
 *                     /locks/storeceiling, delete the node: what a holder
 *                     that finds its node first does (src/lock_zookeeper.c).
 *   --mysql H:P --mode lock     SELECT GET_LOCK('storeceiling', 2),
 *                               SELECT RELEASE_LOCK('storeceiling')
 *   --mysql H:P --mode fenced   the same with, between them, the token's
 *                               UPDATE ... SET n = LAST_INSERT_ID(n + 1),
 *                               committed (autocommit), as mysql-fenced
 *   --mysql H:P --mode update   that UPDATE alone: the cost of its commit
 *
 * The UPDATE runs on a table of its own, storeceiling_counter, made as
 * src/lock_mysql.c makes inventoryd_fence_counter (one InnoDB row), so the
 * lock's own counter is never touched. MariaDB is reached as --user (root)
 * with no password, in --database (inventoryd, made when missing).
 *
 * Prints one line of key=value. Exit status 0, or 2 on bad usage or any
 * failure (said on stderr). Threads: the main thread, and the ZooKeeper
 * binding's own two. */
#include <getopt.h>
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zookeeper/zookeeper.h>

#include "addr.h"
#include "mclock.h"
#include "stats.h"

#define EXIT_FAIL 2
#define ZK_DIR "/locks/storeceiling"
#define SQL_LOCK "storeceiling"
#define SQL_TABLE "storeceiling_counter"

struct options {
    const char *zookeeper; /* host:port, or NULL */
    const char *mysql; /* host:port, or NULL */
    const char *mode; /* lock, fenced, update */
    const char *user, *database;
    long holds;
};

/* ---- ZooKeeper -------------------------------------------------------------- */

static pthread_mutex_t zk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t zk_cv = PTHREAD_COND_INITIALIZER;
static int zk_connected;

static void zk_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh, (void)path, (void)ctx;
    if (type != ZOO_SESSION_EVENT) return;
    pthread_mutex_lock(&zk_mu);
    zk_connected = state == ZOO_CONNECTED_STATE ? 1 : -1;
    pthread_cond_signal(&zk_cv);
    pthread_mutex_unlock(&zk_mu);
}

/* A connected handle to connect, or NULL said on stderr after 10 s. */
static zhandle_t *zk_connect(const char *connect) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(connect, zk_watcher, 4000, NULL, NULL, 0);
    if (!zh) {
        fprintf(stderr, "storeceiling: zookeeper_init %s failed\n", connect);
        return NULL;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&zk_mu);
    while (zk_connected == 0)
        if (pthread_cond_timedwait(&zk_cv, &zk_mu, &until) != 0) break;
    int ok = zk_connected == 1;
    pthread_mutex_unlock(&zk_mu);
    if (ok) return zh;
    fprintf(stderr, "storeceiling: zookeeper %s: no session in 10 s\n", connect);
    zookeeper_close(zh);
    return NULL;
}

/* One hold's operations. 0, or the failing call's ZooKeeper error. */
static int zk_hold(zhandle_t *zh) {
    char node[256];
    struct Stat st;
    int zrc = zoo_create2(zh, ZK_DIR "/c-lock-", NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                          ZOO_EPHEMERAL_SEQUENTIAL, node, sizeof(node), &st);
    if (zrc != ZOK) return zrc;
    struct String_vector v = {0, NULL};
    zrc = zoo_get_children(zh, ZK_DIR, 0, &v);
    deallocate_String_vector(&v);
    if (zrc != ZOK) return zrc;
    return zoo_delete(zh, node, -1);
}

static int zk_run(const struct options *o, double *elapsed_s) {
    zhandle_t *zh = zk_connect(o->zookeeper);
    if (!zh) return -1;
    /* The persistent parents, as the lock makes them. */
    zoo_create(zh, "/locks", NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    zoo_create(zh, ZK_DIR, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    int zrc = ZOK;
    monotime_us t0 = mclock_us();
    for (long i = 0; i < o->holds && zrc == ZOK; i++) zrc = zk_hold(zh);
    *elapsed_s = (double)(mclock_us() - t0) / 1e6;
    if (zrc != ZOK) fprintf(stderr, "storeceiling: zookeeper %s: %s\n", o->zookeeper, zerror(zrc));
    zookeeper_close(zh);
    return zrc == ZOK ? 0 : -1;
}

/* ---- MariaDB ---------------------------------------------------------------- */

/* Runs q on m and drops any result. 0, or -1 (the error is m's). */
static int sql_run(MYSQL *m, const char *q) {
    if (mysql_query(m, q) != 0) return -1;
    MYSQL_RES *res = mysql_store_result(m);
    if (res) mysql_free_result(res);
    return mysql_errno(m) == 0 ? 0 : -1;
}

/* A session to host:port in the database (made when missing), with the
 * counter's table and row; NULL said on stderr. */
static MYSQL *sql_connect(const struct options *o) {
    struct addr a;
    char why[128];
    if (addr_parse(o->mysql, strlen(o->mysql), &a, why, sizeof(why)) != 0) {
        fprintf(stderr, "storeceiling: --mysql %s: %s\n", o->mysql, why);
        return NULL;
    }
    MYSQL *m = mysql_init(NULL);
    unsigned int timeout = 10;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &timeout);
    char use[200];
    snprintf(use, sizeof(use), "USE `%s`", o->database);
    char create_db[200];
    snprintf(create_db, sizeof(create_db), "CREATE DATABASE IF NOT EXISTS `%s`", o->database);
    if (!mysql_real_connect(m, a.host, o->user, NULL, NULL, (unsigned)a.port, NULL, 0) ||
        sql_run(m, create_db) || sql_run(m, use) ||
        sql_run(m,
                "CREATE TABLE IF NOT EXISTS " SQL_TABLE
                " (id TINYINT UNSIGNED PRIMARY KEY, n BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB") ||
        sql_run(m, "INSERT IGNORE INTO " SQL_TABLE " VALUES (1, 0)")) {
        fprintf(stderr, "storeceiling: mysql %s: %s\n", o->mysql, mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

/* One hold's statements for mode. 0, or -1 (the error is m's). */
static int sql_hold(MYSQL *m, const char *mode) {
    static const char update[] = "UPDATE " SQL_TABLE " SET n = LAST_INSERT_ID(n + 1) WHERE id = 1";
    if (strcmp(mode, "update") == 0) return sql_run(m, update);
    if (sql_run(m, "SELECT GET_LOCK('" SQL_LOCK "', 2)")) return -1;
    if (strcmp(mode, "fenced") == 0 && (sql_run(m, update) || mysql_affected_rows(m) != 1))
        return -1;
    return sql_run(m, "SELECT RELEASE_LOCK('" SQL_LOCK "')");
}

static int sql_bench(const struct options *o, double *elapsed_s) {
    MYSQL *m = sql_connect(o);
    if (!m) return -1;
    int rc = 0;
    monotime_us t0 = mclock_us();
    for (long i = 0; i < o->holds && rc == 0; i++) rc = sql_hold(m, o->mode);
    *elapsed_s = (double)(mclock_us() - t0) / 1e6;
    if (rc != 0) fprintf(stderr, "storeceiling: mysql %s: %s\n", o->mysql, mysql_error(m));
    mysql_close(m);
    return rc;
}

/* ---- main ------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f, "usage: storeceiling --zookeeper HOST:PORT [--holds N]\n"
               "       storeceiling --mysql HOST:PORT --mode lock|fenced|update [--holds N]\n"
               "                    [--user U] [--database D]\n"
               "One client, back to back, the store operations of one hold of the lock\n"
               "(zookeeper: create, get_children, delete; mysql: GET_LOCK, [the fence\n"
               "UPDATE], RELEASE_LOCK; update: the fence UPDATE alone), N times (2000).\n"
               "Prints store= mode= holds= elapsed_s= holds_per_s= us_per_hold=.\n");
}

/* 0 with *o set, or the exit status (0 after --help). */
static int parse(int argc, char **argv, struct options *o) {
    static const struct option longopts[] = {
        {"zookeeper", required_argument, NULL, 'z'},
        {"mysql", required_argument, NULL, 'm'},
        {"mode", required_argument, NULL, 'o'},
        {"holds", required_argument, NULL, 'n'},
        {"user", required_argument, NULL, 'u'},
        {"database", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct options){.mode = "lock", .user = "root", .database = "inventoryd", .holds = 2000};
    int ch;
    while ((ch = getopt_long(argc, argv, "z:m:o:n:u:d:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'z':
            o->zookeeper = optarg;
            break;
        case 'm':
            o->mysql = optarg;
            break;
        case 'o':
            o->mode = optarg;
            break;
        case 'u':
            o->user = optarg;
            break;
        case 'd':
            o->database = optarg;
            break;
        case 'n':
            if (stats_parse_long(optarg, 1, 100000000, &o->holds) == 0) break;
            stats_bad_value("storeceiling", longopts, ch, optarg);
            return EXIT_FAIL;
        case 'h':
            usage(stdout);
            return -1;
        default:
            usage(stderr);
            return EXIT_FAIL;
        }
    }
    int modes =
        !strcmp(o->mode, "lock") || !strcmp(o->mode, "fenced") || !strcmp(o->mode, "update");
    if (optind < argc || !o->zookeeper == !o->mysql || !modes || strchr(o->database, '`')) {
        usage(stderr);
        return EXIT_FAIL;
    }
    return 0;
}

int main(int argc, char **argv) {
    struct options o;
    int rc = parse(argc, argv, &o);
    if (rc != 0) return rc < 0 ? 0 : rc;
    double elapsed = 0;
    if (o.mysql && mysql_library_init(0, NULL, NULL) != 0) {
        fprintf(stderr, "storeceiling: mysql_library_init failed\n");
        return EXIT_FAIL;
    }
    rc = o.zookeeper ? zk_run(&o, &elapsed) : sql_bench(&o, &elapsed);
    if (o.mysql) mysql_library_end();
    if (rc != 0) return EXIT_FAIL;
    printf("store=%s mode=%s holds=%ld elapsed_s=%.3f holds_per_s=%.1f us_per_hold=%.1f\n",
           o.zookeeper ? "zookeeper" : "mysql", o.zookeeper ? "lock" : o.mode, o.holds, elapsed,
           elapsed > 0 ? (double)o.holds / elapsed : 0.0, (double)elapsed * 1e6 / (double)o.holds);
    return 0;
}
