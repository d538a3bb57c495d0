/* zk.c -- one ZooKeeper session per process (see zk.h).
 *
 * DESIGN
 * The session is ZooKeeper's multithreaded C binding (libzookeeper_mt): a
 * zhandle_t owns two threads of its own, started by zookeeper_init2 and
 * joined by zookeeper_close. Its IO thread connects (trying the servers of
 * the connect string in turn), sends the requests, pings the server every
 * third of the session timeout so that the session lives while the process
 * does, and reconnects within the session after a dropped connection,
 * setting the watches again. Its completion thread runs the watchers
 * (session_watcher, node_watcher below) and wakes the threads blocked in a
 * synchronous zoo_* call. The handle's calls are thread safe: the sale
 * threads share it.
 *
 * A session is replaced, never repaired: once the server says it expired
 * (after a pause or an outage longer than the session timeout), its
 * ephemeral nodes are gone, and the next zk_session_get makes a new handle
 * (a new session): recovery needs no restart. The expired handle is closed
 * by whoever puts it back last (refs), on that thread, never on the
 * completion thread.
 *
 * A fault may end a session from outside (zk_session_end, for the lab): a
 * second handle on the session's id, with two threads of its own that its
 * zookeeper_close joins before the call returns; its watcher takes `mu`
 * like the others.
 *
 * Locking: `mu` guards `cur`, `creating`, every session's state, refs and
 * retired flag, and the waiters' list; `cv` (monotonic) is broadcast on
 * every session event and every node event. No zoo_* call, no
 * zookeeper_init2 and no zookeeper_close runs under `mu`. The watchers take
 * `mu` on the completion thread, so a thread must never hold `mu` while it
 * waits for a ZooKeeper reply. `mu` is a leaf. */
#include "zk.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "mclock.h"

struct zk_session {
    struct zk *z;
    zhandle_t *zh;
    unsigned gen;
    int state; /* the last session state its watcher saw; 0 before any */
    unsigned events; /* session events its watcher saw */
    int refs; /* users between zk_session_get and zk_session_put */
    int retired; /* replaced: closed when refs drops to 0 */
};

/* A thread in zk_wait_gone, on z's list while it waits. */
struct zk_waiter {
    const char *path;
    const struct zk_session *s;
    int fired; /* the watch on path fired */
    struct zk_waiter *next;
};

struct zk {
    char connect[256];
    int timeout_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct zk_session *cur; /* NULL while a new one is being made */
    int creating; /* a thread is making the next session, outside mu */
    unsigned gens; /* sessions made so far */
    struct zk_waiter *waiters;
    char last_error[128]; /* why the last zookeeper_init2 failed */
};

static void zk_log(const char *message) { log_limited("zookeeper", "%s", message); }

static int state_ended(int state) {
    return state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
}

static const char *state_word(int state) {
    if (state == ZOO_CONNECTED_STATE) return "connected";
    if (state == ZOO_EXPIRED_SESSION_STATE) return "session expired";
    if (state == ZOO_AUTH_FAILED_STATE) return "auth failed";
    if (state == ZOO_ASSOCIATING_STATE) return "associating";
    return "connecting";
}

/* The session's events (connected, disconnected, expired), on the
 * completion thread. ctx is the session. */
static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh;
    (void)path;
    struct zk_session *s = ctx;
    if (type != ZOO_SESSION_EVENT) return;
    pthread_mutex_lock(&s->z->mu);
    s->state = state;
    s->events++;
    pthread_cond_broadcast(&s->z->cv);
    pthread_mutex_unlock(&s->z->mu);
}

/* A node watch fired (or a session event reached it), on the completion
 * thread. ctx is z, which outlives every handle. */
static void node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)state;
    struct zk *z = ctx;
    pthread_mutex_lock(&z->mu);
    for (struct zk_waiter *w = z->waiters; w && type != ZOO_SESSION_EVENT && path; w = w->next)
        if (w->s->zh == zh && strcmp(w->path, path) == 0) w->fired = 1;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
}

static struct zk_session *session_new(struct zk *z, unsigned gen) {
    struct zk_session *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(z->last_error, sizeof(z->last_error), "out of memory");
        return NULL;
    }
    s->z = z;
    s->gen = gen;
    s->zh = zookeeper_init2(z->connect, session_watcher, z->timeout_ms, NULL, s, 0, zk_log);
    if (!s->zh) {
        snprintf(z->last_error, sizeof(z->last_error), "zookeeper_init: %s", strerror(errno));
        free(s);
        return NULL;
    }
    return s;
}

static void session_free(struct zk_session *s) {
    if (!s) return;
    zookeeper_close(s->zh); /* joins its threads: no watcher of it runs after this */
    free(s);
}

struct zk *zk_open(const char *connect, int session_timeout_ms, char *errstr, size_t errlen) {
    struct zk *z = calloc(1, sizeof(*z));
    if (!z) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    snprintf(z->connect, sizeof(z->connect), "%s", connect);
    z->timeout_ms = session_timeout_ms > 0 ? session_timeout_ms : 4000;
    pthread_mutex_init(&z->mu, NULL);
    mclock_cond_init(&z->cv);
    z->gens = 1;
    /* The binding's own log (global to it): warnings and errors only, into
     * the service's rate-limited log. */
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    z->cur = session_new(z, 1);
    if (!z->cur) {
        snprintf(errstr, errlen, "zookeeper %s: %s", z->connect, z->last_error);
        zk_close(z);
        return NULL;
    }
    return z;
}

void zk_close(struct zk *z) {
    if (!z) return;
    session_free(z->cur);
    pthread_cond_destroy(&z->cv);
    pthread_mutex_destroy(&z->mu);
    free(z);
}

const char *zk_connect_string(const struct zk *z) { return z->connect; }

void zk_error(const struct zk *z, char *buf, size_t len, const char *what, int rc) {
    snprintf(buf, len, "zookeeper %s: %s%s%s", z->connect, what ? what : "",
             what && what[0] ? ": " : "", zerror(rc));
}

/* Under mu: takes an ended session out of `cur`. Returns it when nobody
 * uses it any more (the caller closes it once mu is dropped), else NULL
 * (its last user will). */
static struct zk_session *retire_ended(struct zk *z) {
    struct zk_session *s = z->cur;
    if (!s || !state_ended(s->state)) return NULL;
    z->cur = NULL;
    s->retired = 1;
    return s->refs == 0 ? s : NULL;
}

/* Under mu, with no current session: makes the next one outside mu (or
 * waits for the thread that does). 0, or -1 when it could not be made. */
static int replace(struct zk *z, monotime_us limit, struct zk_session *old) {
    if (z->creating) {
        pthread_mutex_unlock(&z->mu);
        session_free(old);
        pthread_mutex_lock(&z->mu);
        while (z->creating && mclock_cond_wait_until(&z->cv, &z->mu, limit) == 0) {}
        return z->cur ? 0 : -1;
    }
    z->creating = 1;
    unsigned gen = ++z->gens;
    pthread_mutex_unlock(&z->mu);
    session_free(old);
    struct zk_session *s = session_new(z, gen);
    pthread_mutex_lock(&z->mu);
    z->creating = 0;
    z->cur = s;
    pthread_cond_broadcast(&z->cv);
    return s ? 0 : -1;
}

struct zk_session *zk_session_get(struct zk *z, int64_t deadline_us, char *errstr, size_t errlen) {
    monotime_us now = mclock_us(), limit = now + (monotime_us)z->timeout_ms * 1000;
    if (deadline_us < limit) limit = deadline_us;
    pthread_mutex_lock(&z->mu);
    struct zk_session *s = NULL;
    for (;;) {
        struct zk_session *old = retire_ended(z);
        if ((!z->cur || old) && replace(z, limit, old) < 0) {
            snprintf(errstr, errlen, "zookeeper %s: %s", z->connect,
                     z->creating ? "a new session is being made" : z->last_error);
            break;
        }
        if (z->cur && z->cur->state == ZOO_CONNECTED_STATE) {
            s = z->cur;
            s->refs++;
            break;
        }
        if (mclock_us() >= limit) {
            snprintf(errstr, errlen, "zookeeper %s: not connected (%s)", z->connect,
                     state_word(z->cur ? z->cur->state : 0));
            break;
        }
        mclock_cond_wait_until(&z->cv, &z->mu, limit);
    }
    pthread_mutex_unlock(&z->mu);
    return s;
}

void zk_session_put(struct zk_session *s) {
    if (!s) return;
    struct zk *z = s->z;
    pthread_mutex_lock(&z->mu);
    int last = --s->refs == 0 && s->retired;
    pthread_mutex_unlock(&z->mu);
    if (last) session_free(s);
}

zhandle_t *zk_handle(const struct zk_session *s) { return s->zh; }
unsigned zk_generation(const struct zk_session *s) { return s->gen; }

unsigned zk_current_generation(struct zk *z) {
    pthread_mutex_lock(&z->mu);
    unsigned gen = z->cur ? z->cur->gen : 0;
    pthread_mutex_unlock(&z->mu);
    return gen;
}

int zk_session_expired(struct zk_session *s) {
    pthread_mutex_lock(&s->z->mu);
    int ended = state_ended(s->state);
    pthread_mutex_unlock(&s->z->mu);
    return ended;
}

int zk_ready(struct zk *z, char *why, size_t whylen) {
    struct zk_session *s = zk_session_get(z, mclock_us(), why, whylen);
    if (!s) return -1;
    zk_session_put(s);
    return 0;
}

static void waiter_remove(struct zk *z, struct zk_waiter *w) {
    pthread_mutex_lock(&z->mu);
    for (struct zk_waiter **p = &z->waiters; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&z->mu);
}

int zk_wait_gone(struct zk_session *s, const char *path, int64_t deadline_us, int *zrc) {
    struct zk *z = s->z;
    struct zk_waiter w = {.path = path, .s = s};
    pthread_mutex_lock(&z->mu);
    w.next = z->waiters;
    z->waiters = &w; /* before the watch is set: its event cannot be missed */
    pthread_mutex_unlock(&z->mu);
    /* getData rather than exists, as Curator does: on a node already gone
     * it leaves no watch behind (exists would watch for its creation). */
    char buf[8];
    int buflen = sizeof(buf);
    int rc = zoo_wget(s->zh, path, node_watcher, z, buf, &buflen, NULL);
    int out = ZK_WAIT_TIMEOUT;
    if (rc == ZNONODE) {
        out = ZK_GONE;
    } else if (rc != ZOK) {
        out = ZK_WAIT_ERROR;
        *zrc = rc;
    } else {
        pthread_mutex_lock(&z->mu);
        while (!w.fired && !state_ended(s->state) && mclock_us() < deadline_us)
            mclock_cond_wait_until(&z->cv, &z->mu, deadline_us);
        if (w.fired) {
            out = ZK_GONE;
        } else if (state_ended(s->state)) {
            out = ZK_WAIT_ERROR;
            *zrc = ZSESSIONEXPIRED;
        }
        pthread_mutex_unlock(&z->mu);
    }
    waiter_remove(z, &w);
    return out;
}

/* ---- a session ended from outside (a fault) --------------------------------- */

/* A second handle on a session: its last session state, under z->mu. */
struct zk_twin {
    struct zk *z;
    int state; /* 0 before any event */
};

/* The twin's session events, on its own completion thread. */
static void twin_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh;
    (void)path;
    struct zk_twin *t = ctx;
    if (type != ZOO_SESSION_EVENT) return;
    pthread_mutex_lock(&t->z->mu);
    t->state = state;
    pthread_cond_broadcast(&t->z->cv);
    pthread_mutex_unlock(&t->z->mu);
}

/* One try of zk_session_end: a twin on id, closed once connected; then
 * waits until s's own handle has seen the end (1), or has connected again
 * since the close began (0: it won its session back from the twin before
 * the close reached the server), until limit (0). errstr says what was
 * seen; -1 when no twin could be made. */
static int end_once(struct zk_session *s, const clientid_t *id, monotime_us limit, char *errstr,
                    size_t errlen) {
    struct zk *z = s->z;
    struct zk_twin t = {.z = z};
    zhandle_t *zh = zookeeper_init2(z->connect, twin_watcher, z->timeout_ms, id, &t, 0, zk_log);
    if (!zh) {
        snprintf(errstr, errlen, "zookeeper %s: zookeeper_init: %s", z->connect, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&z->mu);
    while (t.state != ZOO_CONNECTED_STATE && !state_ended(t.state) && !state_ended(s->state) &&
           mclock_us() < limit)
        mclock_cond_wait_until(&z->cv, &z->mu, limit);
    int twin = t.state;
    unsigned mark = s->events;
    pthread_mutex_unlock(&z->mu);
    /* Connected, the close ends the session on the server, its ephemeral
     * nodes with it; it also joins the twin's threads. */
    zookeeper_close(zh);
    pthread_mutex_lock(&z->mu);
    while (!state_ended(s->state) && !(s->events != mark && s->state == ZOO_CONNECTED_STATE) &&
           mclock_us() < limit)
        mclock_cond_wait_until(&z->cv, &z->mu, limit);
    int own = s->state;
    pthread_mutex_unlock(&z->mu);
    if (!state_ended(own))
        snprintf(errstr, errlen,
                 "zookeeper %s: the session 0x%llx was not seen expired (its own handle %s, the "
                 "second one %s)",
                 z->connect, (unsigned long long)id->client_id, state_word(own), state_word(twin));
    return state_ended(own);
}

int zk_session_end(struct zk_session *s, char *errstr, size_t errlen) {
    if (zk_session_expired(s)) return 0;
    clientid_t id = *zoo_client_id(s->zh);
    int64_t per_try_us = (int64_t)(1000 + s->z->timeout_ms / 60) * 1000;
    for (int i = 0; i < ZK_END_TRIES; i++) {
        int rc = end_once(s, &id, mclock_us() + per_try_us, errstr, errlen);
        if (rc != 0) return rc > 0 ? 0 : -1;
    }
    return -1;
}
