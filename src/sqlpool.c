/* sqlpool.c -- a bounded pool of MariaDB sessions (see sqlpool.h).
 *
 * DESIGN
 * The pool keeps its idle sessions on a stack (the most recently used
 * first, so a quiet service keeps few warm) and counts the live ones, idle
 * or handed out. One mutex guards both; a condition variable wakes a
 * getter when a session is put back or dropped. Nothing that talks to the
 * server runs under the mutex: a getter reserves a place (live++) under it,
 * then dials outside; a stale idle session is taken off the stack under
 * it, then closed outside.
 *
 * Threads: any; the mutex is a leaf (no other lock is taken under it). */
#include <errno.h>
#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"
#include "mclock.h"
#include "sqlpool.h"

#define SETUP_MAX 8

struct idle {
    MYSQL *m;
    monotime_us since_us;
};

struct sqlpool {
    char host[256];
    int port;
    char user[128];
    char password[256];
    char database[128];
    char addr[280];
    unsigned int connect_timeout_s, read_timeout_s, write_timeout_s;
    int size;
    int idle_max_ms;
    char *setup[SETUP_MAX + 1];

    pthread_mutex_t mu;
    pthread_cond_t freed;
    int live; /* sessions idle or handed out, and places reserved for a dial */
    int nidle;
    struct idle *idle; /* size entries */
};

static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static int library_rc;

static void library_init(void) { library_rc = mysql_library_init(0, NULL, NULL); }

static unsigned int at_least_1(int s) { return s > 0 ? (unsigned int)s : 1; }

/* Copies the strings of o into p. 0, or -1 with errstr set. */
static int options_copy(struct sqlpool *p, const struct sqlpool_options *o, char *errstr,
                        size_t errlen) {
    snprintf(p->host, sizeof(p->host), "%s", o->host ? o->host : "");
    snprintf(p->user, sizeof(p->user), "%s", o->user ? o->user : "");
    snprintf(p->password, sizeof(p->password), "%s", o->password ? o->password : "");
    snprintf(p->database, sizeof(p->database), "%s", o->database ? o->database : "");
    if (strchr(p->database, '`')) {
        snprintf(errstr, errlen, "mysql.database: '%s' holds a backtick", p->database);
        return -1;
    }
    for (int i = 0; o->setup && o->setup[i]; i++) {
        if (i == SETUP_MAX || !(p->setup[i] = strdup(o->setup[i]))) {
            snprintf(errstr, errlen,
                     i == SETUP_MAX ? "too many setup statements" : "out of memory");
            return -1;
        }
    }
    if (p->host[0] == '/')
        snprintf(p->addr, sizeof(p->addr), "%s", p->host);
    else
        snprintf(p->addr, sizeof(p->addr), "%s:%d", p->host, o->port);
    return 0;
}

struct sqlpool *sqlpool_create(const struct sqlpool_options *o, char *errstr, size_t errlen) {
    pthread_once(&library_once, library_init);
    if (library_rc != 0) {
        snprintf(errstr, errlen, "mysql: the client library did not initialise");
        return NULL;
    }
    struct sqlpool *p = alloc_zeroed(sizeof(*p), errstr, errlen);
    if (!p) return NULL;
    p->port = o->port;
    p->connect_timeout_s = at_least_1(o->connect_timeout_s);
    p->read_timeout_s = at_least_1(o->read_timeout_s);
    p->write_timeout_s = at_least_1(o->write_timeout_s);
    p->size = o->size > 0 ? o->size : 1;
    p->idle_max_ms = o->idle_max_ms;
    p->idle = alloc_zeroed(sizeof(*p->idle) * (size_t)p->size, errstr, errlen);
    if (!p->idle || options_copy(p, o, errstr, errlen) < 0) {
        sqlpool_free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    mclock_cond_init(&p->freed);
    return p;
}

void sqlpool_free(struct sqlpool *p) {
    if (!p) return;
    if (p->idle) {
        for (int i = 0; i < p->nidle; i++) mysql_close(p->idle[i].m);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->freed);
    }
    for (int i = 0; p->setup[i]; i++) free(p->setup[i]);
    memset(p->password, 0, sizeof(p->password));
    free(p->idle);
    free(p);
}

const char *sqlpool_addr(const struct sqlpool *p) { return p->addr; }

int sqlpool_gone(unsigned int err) {
    return err == CR_SERVER_GONE_ERROR || err == CR_SERVER_LOST || err == CR_CONNECTION_ERROR ||
           err == CR_CONN_HOST_ERROR || err == CR_UNKNOWN_ERROR || err == ER_CONNECTION_KILLED ||
           err == ER_SERVER_SHUTDOWN;
}

/* Fails m's dial: errstr names the server and Connector/C's message. */
static MYSQL *dial_fail(struct sqlpool *p, MYSQL *m, const char *what, char *errstr,
                        size_t errlen) {
    snprintf(errstr, errlen, "mysql %s: %s%.200s", p->addr, what, mysql_error(m));
    mysql_close(m);
    return NULL;
}

/* Creates the database when missing and selects it, then runs the setup
 * statements. 0, or -1 (the error is m's). */
static int session_setup(struct sqlpool *p, MYSQL *m) {
    if (p->database[0]) {
        char q[200];
        snprintf(q, sizeof(q), "CREATE DATABASE IF NOT EXISTS `%s`", p->database);
        if (mysql_query(m, q) != 0 || mysql_select_db(m, p->database) != 0) return -1;
    }
    for (int i = 0; p->setup[i]; i++)
        if (mysql_query(m, p->setup[i]) != 0) return -1;
    return 0;
}

/* A new session, or NULL with errstr set. */
static MYSQL *session_dial(struct sqlpool *p, char *errstr, size_t errlen) {
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        snprintf(errstr, errlen, "mysql %s: out of memory", p->addr);
        return NULL;
    }
    char reconnect = 0;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &p->connect_timeout_s);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &p->read_timeout_s);
    mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &p->write_timeout_s);
    mysql_options(m, MYSQL_OPT_RECONNECT, &reconnect);
    const char *host = p->host, *socket = NULL;
    if (host[0] == '/') {
        socket = host;
        host = "localhost"; /* Connector/C's name for "use the socket" */
    }
    if (!mysql_real_connect(m, host, p->user, p->password[0] ? p->password : NULL, NULL,
                            (unsigned int)p->port, socket, 0))
        return dial_fail(p, m, "", errstr, errlen);
    if (session_setup(p, m) < 0) return dial_fail(p, m, "setup: ", errstr, errlen);
    return m;
}

/* Whether an idle session must not be handed out: the server closed it
 * (its socket is readable: an end of file, or the error packet of a KILL
 * or a shutdown), or it was idle too long. */
static int session_stale(const struct sqlpool *p, const struct idle *s) {
    if (p->idle_max_ms > 0 && mclock_us() - s->since_us > (monotime_us)p->idle_max_ms * 1000)
        return 1;
    struct pollfd pfd = {.fd = (int)mysql_get_socket(s->m), .events = POLLIN};
    return pfd.fd < 0 || poll(&pfd, 1, 0) != 0;
}

/* Under p->mu: an idle session in *out (1), a place reserved for a dial
 * (0), or nothing before the deadline (-1). */
static int take_locked(struct sqlpool *p, monotime_us deadline, struct idle *out) {
    for (;;) {
        if (p->nidle > 0) {
            *out = p->idle[--p->nidle];
            return 1;
        }
        if (p->live < p->size) {
            p->live++;
            return 0;
        }
        if (mclock_cond_wait_until(&p->freed, &p->mu, deadline) == ETIMEDOUT && p->nidle == 0 &&
            p->live >= p->size)
            return -1;
    }
}

/* One place less: a session closed, or a dial that failed. */
static void place_free(struct sqlpool *p) {
    pthread_mutex_lock(&p->mu);
    p->live--;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->mu);
}

int sqlpool_get(struct sqlpool *p, int wait_ms, MYSQL **out, char *errstr, size_t errlen) {
    *out = NULL;
    monotime_us deadline = mclock_us() + (monotime_us)(wait_ms > 0 ? wait_ms : 0) * 1000;
    for (;;) {
        struct idle s = {0};
        pthread_mutex_lock(&p->mu);
        int got = take_locked(p, deadline, &s);
        pthread_mutex_unlock(&p->mu);
        if (got < 0) {
            snprintf(errstr, errlen, "mysql %s: all %d sessions stayed in use for %d ms", p->addr,
                     p->size, wait_ms);
            return SQLPOOL_BUSY;
        }
        if (got == 1 && !session_stale(p, &s)) {
            *out = s.m;
            return SQLPOOL_OK;
        }
        if (got == 1) { /* closed outside the mutex, then try again */
            mysql_close(s.m);
            place_free(p);
            continue;
        }
        *out = session_dial(p, errstr, errlen);
        if (*out) return SQLPOOL_OK;
        place_free(p);
        return SQLPOOL_ERR;
    }
}

void sqlpool_put(struct sqlpool *p, MYSQL *m) {
    if (!m) return;
    if (sqlpool_gone(mysql_errno(m))) {
        sqlpool_drop(p, m);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->idle[p->nidle++] = (struct idle){.m = m, .since_us = mclock_us()};
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->mu);
}

void sqlpool_drop(struct sqlpool *p, MYSQL *m) {
    if (!m) return;
    mysql_close(m);
    place_free(p);
}
