/* lock_mysql.c -- the demo factory's MYSQL lock: MariaDB's named locks,
 * GET_LOCK and RELEASE_LOCK, each hold on a session of its own; and
 * mysql-fenced, the same with a fencing token from a durable counter.
 *
 * DESIGN
 * The store (lock_store_mysql) owns one pool of sessions (sqlpool.c) to the
 * server at mysql.host. A hold takes a session from it, sends
 * SELECT GET_LOCK(name, wait) there, and keeps that session until its
 * last RELEASE_LOCK, then puts it back: MariaDB ties a named lock to the
 * session that took it, and frees it when that session ends. So the
 * session is the lease. Every session of the pool runs
 * SET SESSION wait_timeout = ceil(lock.ttl-ms / 1 s) (at least 1 s): a
 * session the server hears nothing from for that long is closed, and its
 * lock freed (the watchdog's looks keep a running holder's session, below).
 * That is the flaw this rung shows: a session that is killed, cut or timed
 * out under a paused holder frees the lock while its holder, which cannot
 * know, still writes.
 * mysql-fenced fixes it for the stock: right after GET_LOCK, in the same
 * session,
 *   UPDATE inventoryd_fence_counter SET n = LAST_INSERT_ID(n + 1) WHERE id = 1
 * gives a token (the session's insert id) that only grows from one holder
 * to the next, and the write in Redis refuses a token older than the
 * newest it has recorded (fenced-sale.lua). The counter is one InnoDB row,
 * and the statement commits (autocommit): with the server's default
 * innodb_flush_log_at_trx_commit = 1 the token is on disk before the hold
 * is granted, so a crash of MariaDB never hands it out again. A SEQUENCE
 * does not give that: InnoDB logs its NEXTVAL without flushing it, and a
 * SIGKILL within the next second gave values already handed out, or lost
 * the sequence's row (every NEXTVAL failing) on 10.11. A database that
 * still has the old inventoryd_fence sequence starts the counter at that
 * sequence's next uncached value (once, when the counter has no row).
 *
 * The lock's name is the lock key; MariaDB takes names of at most 64
 * characters, so a longer key is named by its first 47 characters, '#',
 * and the 16 hex digits of a 64-bit FNV-1a hash of the whole key.
 *
 * Re-entry: GET_LOCK is reentrant per session in MariaDB (each GET_LOCK
 * counts, each RELEASE_LOCK gives one back), and a nested acquire through
 * the handle sends it on the hold's session, so the type is reentrant, as
 * MariaDB is. A nested hold of mysql-fenced keeps its first token.
 *
 * A wait longer than WAIT_CHUNK_S is sent as several GET_LOCKs, each
 * counted as an attempt, so a session's read timeout (the wait chunk plus
 * the I/O timeout, redis.timeout) always outlasts the server's wait.
 *
 * The session is kept while its holder runs, as a pooled connection in an
 * application keeps its session: the watchdog looks at each hold's session
 * every wait_timeout / 3 (DO 0, which the server counts as activity) until
 * its release, and each look that is answered dates the lease, from its
 * send, as the grant did. So a holder that only works long keeps its lock
 * (as zookeeper's does), and the session ends under a holder only when the
 * holder's process stops (a pause: no look goes out), when the holder is
 * cut from MariaDB (no look arrives, and the server times the session out
 * at wait_timeout from the last one it saw), or when it is killed. A look
 * that fails closes the client's side of the session: the hold is gone,
 * and its holder, as a MariaDB user, is not told (LOCK_T_UNHEEDED): its
 * release finds the session closed.
 *
 * Unknown outcomes: a statement on a hold's session that fails in any way
 * (a lost reply, a killed session, an error) drops that session, which
 * frees on the server whatever it held: that is the abandon. A release
 * that finds the session already closed by the server (its socket
 * readable before anything was sent) answers LOCK_LOST: the lock was
 * freed under the holder.
 *
 * Threads: a handle's thread, and the watchdog's for the looks. The two
 * take turns on the hold's session through h->busy: the holder waits for a
 * look in flight (a few hundred microseconds; at most the read timeout when
 * MariaDB is out of reach), and a look that finds the holder using the
 * session is not sent (the holder's own statement is activity) and is
 * tried again soon. The store's pool is thread safe. */
#include <mysql.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"
#include "lock_int.h"
#include "mclock.h"
#include "sqlpool.h"

#define POOL_SIZE 64
#define WAIT_CHUNK_S 2
#define NAME_MAX_LEN 64
#define FENCE_TABLE "inventoryd_fence_counter"
#define OLD_SEQUENCE "inventoryd_fence" /* the fence before the counter: its start */
/* A grant answered later than this after its GET_LOCK was sent waited in
 * the server: its lease is dated by one more statement (see acquire). */
#define REDATE_AFTER_US 1000

struct sqllock_store {
    struct sqlpool *pool;
    int wait_timeout_s; /* each session's wait_timeout: the lease */
    int pool_wait_ms; /* longest wait for a session */
};

struct sqllock_hold {
    MYSQL *m; /* the hold's session, from the outermost grant to the last release */
    atomic_int busy; /* 1 while the holder or a look uses m (see Threads) */
    char name[NAME_MAX_LEN + 1];
    long long token;
};

/* ---- the store ------------------------------------------------------------ */

static int store_configured(const struct lock_core_options *o) {
    return o->mysql_host && o->mysql_host[0];
}

static void store_close(void *state) {
    struct sqllock_store *st = state;
    if (!st) return;
    sqlpool_free(st->pool);
    free(st);
}

static void *store_open(const struct lock_core_options *o, char *errstr, size_t errlen) {
    struct sqllock_store *st = alloc_zeroed(sizeof(*st), errstr, errlen);
    if (!st) return NULL;
    st->wait_timeout_s = o->ttl_ms > 1000 ? (o->ttl_ms + 999) / 1000 : 1;
    st->pool_wait_ms = o->pool_wait_ms > 0 ? o->pool_wait_ms : 1;
    int io_s = (st->pool_wait_ms + 999) / 1000;
    char wait_timeout[64];
    snprintf(wait_timeout, sizeof(wait_timeout), "SET SESSION wait_timeout = %d",
             st->wait_timeout_s);
    const char *setup[] = {wait_timeout,
                           "CREATE TABLE IF NOT EXISTS " FENCE_TABLE
                           " (id TINYINT UNSIGNED PRIMARY KEY, n BIGINT UNSIGNED NOT NULL)"
                           " ENGINE=InnoDB",
                           /* The counter's one row: from the old sequence, when there is
                            * one and no row yet; else 0 (a no-op once the row is there). */
                           "SET @inventoryd_fence_start = IF((SELECT COUNT(*) FROM " FENCE_TABLE
                           ") = 0 AND (SELECT COUNT(*) FROM information_schema.tables"
                           " WHERE table_schema = DATABASE() AND table_name = '" OLD_SEQUENCE
                           "' AND table_type = 'SEQUENCE') = 1, 'INSERT IGNORE INTO " FENCE_TABLE
                           " SELECT 1, next_not_cached_value FROM " OLD_SEQUENCE
                           "', 'INSERT IGNORE INTO " FENCE_TABLE " VALUES (1, 0)')",
                           "EXECUTE IMMEDIATE @inventoryd_fence_start", NULL};
    struct sqlpool_options po = {
        .host = o->mysql_host,
        .port = o->mysql_port > 0 ? o->mysql_port : 3306,
        .user = o->mysql_user,
        .password = o->mysql_password,
        .database = o->mysql_database,
        .connect_timeout_s = io_s,
        .read_timeout_s = WAIT_CHUNK_S + io_s,
        .write_timeout_s = io_s,
        .size = POOL_SIZE,
        /* Well before the server's wait_timeout closes an idle one. */
        .idle_max_ms = st->wait_timeout_s * 500,
        .setup = setup,
    };
    st->pool = sqlpool_create(&po, errstr, errlen);
    if (!st->pool) {
        free(st);
        return NULL;
    }
    return st;
}

/* Ready when a session can be had and answers a ping. */
static int store_ready(void *state, char *why, size_t whylen) {
    struct sqllock_store *st = state;
    MYSQL *m = NULL;
    if (sqlpool_get(st->pool, st->pool_wait_ms, &m, why, whylen) != SQLPOOL_OK) return -1;
    if (mysql_ping(m) != 0) {
        snprintf(why, whylen, "mysql %s: %.200s", sqlpool_addr(st->pool), mysql_error(m));
        sqlpool_drop(st->pool, m);
        return -1;
    }
    sqlpool_put(st->pool, m);
    return 0;
}

const struct lock_store lock_store_mysql = {
    .name = "mysql",
    .setting = "mysql.host",
    .configured = store_configured,
    .open = store_open,
    .ready = store_ready,
    .close = store_close,
};

/* ---- the lock --------------------------------------------------------------- */

/* The lock's name for key (see DESIGN). */
static void lock_name(const char *key, char *name) {
    size_t len = strlen(key);
    if (len <= NAME_MAX_LEN) {
        memcpy(name, key, len + 1);
        return;
    }
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
    snprintf(name, NAME_MAX_LEN + 1, "%.47s#%016llx", key, (unsigned long long)h);
}

/* Sets l->errstr from the session's error: "mysql host:port: <error> (what)". */
static int sql_fail(struct lock *l, MYSQL *m, const char *what) {
    struct sqllock_store *st = lock_store_state(l);
    snprintf(l->errstr, sizeof(l->errstr), "mysql %s: %.160s (%s)", sqlpool_addr(st->pool),
             mysql_error(m), what);
    return LOCK_ERR;
}

/* Runs a statement that answers one integer (or NULL) on m. 0 with *v set
 * (*isnull for NULL), or -1 on any failure (the error is m's). */
static int sql_integer(MYSQL *m, const char *q, long long *v, int *isnull) {
    if (mysql_query(m, q) != 0) return -1;
    MYSQL_RES *res = mysql_store_result(m);
    if (!res) return -1;
    MYSQL_ROW row = mysql_fetch_row(res);
    int rc = row && mysql_num_fields(res) == 1 ? 0 : -1;
    if (rc == 0) {
        *isnull = row[0] == NULL;
        *v = row[0] ? strtoll(row[0], NULL, 10) : 0;
    }
    mysql_free_result(res);
    return rc;
}

/* "SELECT <fn>('<name>'<tail>)" with the name escaped for m. */
static void name_call(MYSQL *m, const char *fn, const char *name, const char *tail, char *q,
                      size_t len) {
    char esc[2 * NAME_MAX_LEN + 1];
    mysql_real_escape_string(m, esc, name, (unsigned long)strlen(name));
    snprintf(q, len, "SELECT %s('%s'%s)", fn, esc, tail);
}

/* One GET_LOCK of h->name on m, waiting at most wait_us. 1 granted, 0
 * busy, -1 failed (the error is m's). */
static int get_lock_once(MYSQL *m, const char *name, int64_t wait_us) {
    char tail[32], q[256];
    snprintf(tail, sizeof(tail), ", %lld.%06lld", (long long)(wait_us / 1000000),
             (long long)(wait_us % 1000000));
    name_call(m, "GET_LOCK", name, tail, q, sizeof(q));
    long long v = 0;
    int isnull = 0;
    if (sql_integer(m, q, &v, &isnull) < 0 || isnull) return -1;
    return v == 1 ? 1 : 0;
}

/* GET_LOCK on m until it is granted or l->deadline_us has passed, in
 * chunks of at most WAIT_CHUNK_S; each counts as an attempt. The send of
 * the granting one is in *sent. 1, 0 or -1 as get_lock_once. */
static int get_lock_until(struct lock *l, MYSQL *m, const char *name, int64_t *sent) {
    for (;;) {
        int64_t left = l->deadline_us - mclock_us();
        if (left < 0) left = 0;
        if (left > (int64_t)WAIT_CHUNK_S * 1000000) left = (int64_t)WAIT_CHUNK_S * 1000000;
        l->attempts++;
        *sent = mclock_us();
        int rc = get_lock_once(m, name, left);
        if (rc != 0 || mclock_us() >= l->deadline_us) return rc;
    }
}

/* The token of a new hold: the fence counter's next value, committed, in
 * the hold's session (see DESIGN). 0, or LOCK_ERR with l's errstr set (the
 * server's error, or the counter's row gone: *token is then 0). */
static int fence_next(struct lock *l, MYSQL *m, long long *token) {
    *token = 0;
    if (mysql_query(m, "UPDATE " FENCE_TABLE " SET n = LAST_INSERT_ID(n + 1) WHERE id = 1") != 0)
        return sql_fail(l, m, "the fence counter");
    if (mysql_affected_rows(m) == 1) *token = (long long)mysql_insert_id(m);
    if (*token > 0) return 0;
    struct sqllock_store *st = lock_store_state(l);
    snprintf(l->errstr, sizeof(l->errstr),
             "mysql %s: the fence counter's row (" FENCE_TABLE
             ", id 1) is gone: no token can be handed out; put it back with n past the "
             "newest token Redis has seen (GET %.60s:fence:mysql)",
             sqlpool_addr(st->pool), l->key);
    return LOCK_ERR;
}

/* The holder's turn on its session: waits for a look in flight. */
static void session_take(struct sqllock_hold *h) {
    while (atomic_exchange(&h->busy, 1)) mclock_sleep_ms(1);
}

static void session_give(struct sqllock_hold *h) { atomic_store(&h->busy, 0); }

/* A nested hold, on the hold's own session: GET_LOCK counts it. */
static int sqllock_reenter(struct lock *l, struct sqllock_hold *h) {
    struct sqllock_store *st = lock_store_state(l);
    l->attempts++;
    session_take(h);
    l->sent_us = mclock_us(); /* a statement: the lease runs from it */
    int rc = get_lock_once(h->m, h->name, 0);
    if (rc < 0) { /* the outcome is unknown: give every hold up, before a look can use it */
        sql_fail(l, h->m, "GET_LOCK, nested");
        sqlpool_drop(st->pool, h->m);
        h->m = NULL;
    }
    session_give(h);
    if (rc == 1) return LOCK_OK;
    if (rc == 0) { /* the session lost the lock under us (cannot happen while it lives) */
        snprintf(l->errstr, sizeof(l->errstr), "mysql %s: GET_LOCK of its own lock answered 0",
                 sqlpool_addr(st->pool));
        return LOCK_BUSY;
    }
    return LOCK_ERR;
}

static int sqllock_acquire_as(struct lock *l, int fenced) {
    struct sqllock_store *st = lock_store_state(l);
    struct sqllock_hold *h = l->priv;
    if (l->holds > 0 && h->m) return sqllock_reenter(l, h);
    lock_name(l->key, h->name);
    int64_t left_ms = (l->deadline_us - mclock_us()) / 1000;
    int wait = left_ms < st->pool_wait_ms ? (int)(left_ms > 0 ? left_ms : 0) : st->pool_wait_ms;
    MYSQL *m = NULL;
    int rc = sqlpool_get(st->pool, wait, &m, l->errstr, sizeof(l->errstr));
    if (rc != SQLPOOL_OK) return rc == SQLPOOL_BUSY ? LOCK_BUSY : LOCK_ERR;
    int64_t sent = 0;
    int got = get_lock_until(l, m, h->name, &sent);
    if (got == 1 && (fenced || mclock_us() - sent > REDATE_AFTER_US)) {
        /* wait_timeout runs from the end of the session's last statement:
         * for a GET_LOCK that waited, its grant, not its send. The send of
         * a statement after the grant dates the lease: the token's, or a
         * DO 0 when the grant waited. */
        sent = mclock_us();
        if (fenced ? fence_next(l, m, &h->token) != 0 : mysql_query(m, "DO 0") != 0) {
            got = -1; /* dropped below: closing the session frees the lock it got */
            if (!fenced) sql_fail(l, m, "DO 0");
        }
    } else if (got < 0) {
        sql_fail(l, m, "GET_LOCK");
    }
    if (got < 0) { /* an unknown outcome: closing the session gives up whatever it got */
        sqlpool_drop(st->pool, m);
        return LOCK_ERR;
    }
    if (got == 0) {
        snprintf(l->errstr, sizeof(l->errstr), "GET_LOCK('%s') timed out", h->name);
        sqlpool_put(st->pool, m);
        return LOCK_BUSY;
    }
    h->m = m;
    l->lease_ms = st->wait_timeout_s * 1000; /* the core dates the lease from sent */
    l->sent_us = sent;
    return LOCK_OK;
}

static int sqllock_acquire(struct lock *l) { return sqllock_acquire_as(l, 0); }
static int sqllock_fenced_acquire(struct lock *l) { return sqllock_acquire_as(l, 1); }

/* Whether the server has closed m (its socket is readable while nothing
 * was asked: an end of file, or the error packet of a KILL). */
static int session_closed(MYSQL *m) {
    struct pollfd pfd = {.fd = (int)mysql_get_socket(m), .events = POLLIN};
    return pfd.fd < 0 || poll(&pfd, 1, 0) != 0;
}

/* Ends the hold's session: back to the pool, or dropped. */
static void session_end(struct lock *l, struct sqllock_hold *h, int drop) {
    struct sqllock_store *st = lock_store_state(l);
    if (drop)
        sqlpool_drop(st->pool, h->m);
    else
        sqlpool_put(st->pool, h->m);
    h->m = NULL;
    atomic_store(&l->lease_until_us, 0);
}

static int sqllock_release_on(struct lock *l, struct sqllock_hold *h) {
    struct sqllock_store *st = lock_store_state(l);
    if (!h->m) return LOCK_LOST; /* its session was dropped: nothing is held */
    if (session_closed(h->m)) {
        snprintf(l->errstr, sizeof(l->errstr),
                 "mysql %s: the lock's session was closed by the server while held",
                 sqlpool_addr(st->pool));
        session_end(l, h, 1);
        return LOCK_LOST;
    }
    char q[256];
    name_call(h->m, "RELEASE_LOCK", h->name, "", q, sizeof(q));
    long long v = 0;
    int isnull = 0;
    if (sql_integer(h->m, q, &v, &isnull) < 0) {
        sql_fail(l, h->m, "RELEASE_LOCK");
        session_end(l, h, 1); /* an unknown outcome: closing the session frees the lock */
        return LOCK_ERR;
    }
    if (l->holds == 0) session_end(l, h, 0);
    return !isnull && v == 1 ? LOCK_OK : LOCK_LOST;
}

static int sqllock_release(struct lock *l) {
    struct sqllock_hold *h = l->priv;
    lock_release_pause(l);
    session_take(h); /* an inner release runs while the session is looked at */
    int rc = sqllock_release_on(l, h);
    session_give(h);
    return rc;
}

/* The watchdog's look at a held lock's session (see DESIGN): DO 0, which
 * the server counts as the session's activity, so its wait_timeout starts
 * again. Its send dates the lease. A look that fails, or finds the
 * session closed by the server, ends the hold (LOCK_LOST; the holder is
 * not told: LOCK_T_UNHEEDED). A look while the holder uses the session is
 * not sent (LOCK_ERR: tried again soon). */
static int sqllock_renew(struct lock *l, struct lock_link *k) {
    struct sqllock_hold *h = l->priv;
    if (atomic_exchange(&h->busy, 1)) {
        snprintf(k->errstr, sizeof(k->errstr), "the holder is using its session");
        return LOCK_ERR;
    }
    int rc = h->m && !session_closed(h->m) && mysql_query(h->m, "DO 0") == 0 ? LOCK_OK : LOCK_LOST;
    session_give(h);
    return rc;
}

/* After an unknown outcome: closing the session frees every hold of it. */
static int sqllock_abandon(struct lock *l, struct lock_link *k) {
    (void)k;
    struct sqllock_hold *h = l->priv;
    if (h->m) session_end(l, h, 1);
    return LOCK_OK;
}

static void sqllock_report(const struct lock *l, struct lock_report *r) {
    const struct sqllock_hold *h = l->priv;
    r->token = h->token;
}

#define KILL_WAIT_MS 5000 /* the end_session fault's wait for the killed session */

/* Polls on k (every 5 ms, KILL_WAIT_MS at most) until the session id is
 * gone from the server's process list and holds the lock name no more. 0
 * when so, 1 when it was still there at the end, -1 when a query failed
 * (the error is k's). */
static int session_gone_wait(MYSQL *k, unsigned long id, const char *name) {
    char esc[2 * NAME_MAX_LEN + 1], q[400];
    mysql_real_escape_string(k, esc, name, (unsigned long)strlen(name));
    snprintf(q, sizeof(q),
             "SELECT (SELECT COUNT(*) FROM information_schema.processlist WHERE id = %lu)"
             " + (IS_USED_LOCK('%s') <=> %lu)",
             id, esc, id);
    for (int64_t end = mclock_us() + (int64_t)KILL_WAIT_MS * 1000;; mclock_sleep_ms(5)) {
        long long v = 0;
        int isnull = 0;
        if (sql_integer(k, q, &v, &isnull) < 0) return -1;
        if (v == 0) return 0;
        if (mclock_us() >= end) return 1;
    }
}

/* The end_session fault: the hold's session is killed from another
 * session of the pool (KILL CONNECTION, as an operator would), and
 * waited for until the server has ended it and its lock is free; the
 * holder is not told (its release then finds the session closed). */
static int sqllock_end_session(struct lock *l, char *why, size_t whylen) {
    struct sqllock_hold *h = l->priv;
    struct sqllock_store *st = lock_store_state(l);
    if (!h->m) {
        snprintf(why, whylen, "mysql %s: the hold has no session", sqlpool_addr(st->pool));
        return LOCK_ERR;
    }
    unsigned long id = mysql_thread_id(h->m);
    MYSQL *k = NULL;
    if (sqlpool_get(st->pool, st->pool_wait_ms, &k, why, whylen) != SQLPOOL_OK) return LOCK_ERR;
    char q[64];
    snprintf(q, sizeof(q), "KILL CONNECTION %lu", id);
    int rc = mysql_query(k, q) == 0 ? session_gone_wait(k, id, h->name) : -1;
    if (rc < 0)
        snprintf(why, whylen, "mysql %s: %.160s (KILL CONNECTION %lu)", sqlpool_addr(st->pool),
                 mysql_error(k), id);
    else if (rc > 0)
        snprintf(why, whylen, "mysql %s: session %lu still held the lock %d ms after its KILL",
                 sqlpool_addr(st->pool), id, KILL_WAIT_MS);
    if (rc < 0)
        sqlpool_drop(st->pool, k);
    else
        sqlpool_put(st->pool, k);
    return rc == 0 ? LOCK_OK : LOCK_ERR;
}

const struct lock_type lock_type_mysql = {
    .name = "mysql",
    .family = "mysql",
    .flags = LOCK_T_GATED | LOCK_T_WATCHED | LOCK_T_LEASED | LOCK_T_UNHEEDED,
    .store = &lock_store_mysql,
    .priv_size = sizeof(struct sqllock_hold),
    .acquire = sqllock_acquire,
    .release = sqllock_release,
    .renew = sqllock_renew,
    .abandon = sqllock_abandon,
    .end_session = sqllock_end_session,
};

const struct lock_type lock_type_mysql_fenced = {
    .name = "mysql-fenced",
    .family = "mysql",
    .flags = LOCK_T_GATED | LOCK_T_WATCHED | LOCK_T_LEASED | LOCK_T_UNHEEDED,
    .store = &lock_store_mysql,
    .priv_size = sizeof(struct sqllock_hold),
    .acquire = sqllock_fenced_acquire,
    .release = sqllock_release,
    .renew = sqllock_renew,
    .abandon = sqllock_abandon,
    .report = sqllock_report,
    .end_session = sqllock_end_session,
};
