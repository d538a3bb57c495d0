/* lock.c -- the lock core: registry, owner ids, and the acquire/release
 * bookkeeping shared by every strategy (see lock.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <uuid/uuid.h>
#include "lock.h"
#include "mclock.h"
#include "pubsub.h"
#include "rpool.h"
#include "script.h"
#include "watchdog.h"

extern const struct lock_type lock_type_none;
extern const struct lock_type lock_type_local;
extern const struct lock_type lock_type_setnx_retry;
extern const struct lock_type lock_type_setnx_spin;
extern const struct lock_type lock_type_expiring;
extern const struct lock_type lock_type_owner_check;
extern const struct lock_type lock_type_owner_lua;
extern const struct lock_type lock_type_reentrant;
extern const struct lock_type lock_type_watchdog;
extern const struct lock_type lock_type_redisson;
extern const struct lock_type lock_type_redlock;
extern const struct lock_type lock_type_fenced;
extern const struct lock_type lock_type_batched;
extern const struct lock_type lock_type_atomic;

/* In ladder order: the flaw of each step is fixed by a later one. */
const struct lock_type *const lock_types[] = {
    &lock_type_none,
    &lock_type_local,
    &lock_type_setnx_retry,
    &lock_type_setnx_spin,
    &lock_type_expiring,
    &lock_type_owner_check,
    &lock_type_owner_lua,
    &lock_type_reentrant,
    &lock_type_watchdog,
    &lock_type_redisson,
    &lock_type_redlock,
    &lock_type_fenced,
    &lock_type_batched,
    &lock_type_atomic,
    NULL,
};

const struct lock_type *lock_type_find(const char *name) {
    for (int i = 0; lock_types[i]; i++)
        if (strcmp(lock_types[i]->name, name) == 0) return lock_types[i];
    return NULL;
}

const struct lock_type *lock_type_writer(const struct lock_type *t) {
    return t == &lock_type_redisson || t == &lock_type_batched ? &lock_type_rw_write : t;
}

int lock_type_index(const struct lock_type *t) {
    for (int i = 0; lock_types[i]; i++)
        if (lock_types[i] == t) return i;
    return -1;
}

int lock_type_count(void) {
    int n = 0;
    while (lock_types[n]) n++;
    return n;
}

void lock_type_names(char *buf, size_t len) {
    size_t off = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; lock_types[i] && off < len; i++) {
        int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", lock_types[i]->name);
        if (n < 0) break;
        off += (size_t)n;
    }
}

static pthread_once_t process_id_once = PTHREAD_ONCE_INIT;
static char process_id[33];

static void process_id_make(void) {
    uuid_t u;
    uuid_generate(u);
    for (int i = 0; i < 16; i++) snprintf(process_id + 2 * i, 3, "%02x", u[i]);
}

void lock_owner_id(char *buf, size_t len) {
    pthread_once(&process_id_once, process_id_make);
    snprintf(buf, len, "%s:%ld", process_id, (long)gettid());
}

void lock_init(struct lock *l, const struct lock_type *t,
               const struct lock_env *env, redisContext *c, const char *key) {
    memset(l, 0, sizeof(*l));
    l->type = t;
    l->env = env;
    l->c = c;
    snprintf(l->key, sizeof(l->key), "%s", key);
    lock_owner_id(l->owner, sizeof(l->owner));
}

static struct timeval ms_timeval(int ms) {
    return (struct timeval){ms / 1000, (ms % 1000) * 1000};
}

/* Redisson's synced-replicas check (see lock_acquire). */
static void lock_wait_replicas(struct lock *l) {
    const struct lock_env *e = l->env;
    if (e->sync_replicas <= 0 || !l->c || !(l->type->flags & LOCK_F_REDIS) ||
        (l->type->flags & LOCK_F_MULTI))
        return;
    int timeout_ms = e->pool ? rpool_options(e->pool)->timeout_ms : 0;
    if (timeout_ms < 1) timeout_ms = 1;   /* WAIT n 0 would block for ever */
    l->replicas_wanted = e->sync_replicas;
    l->replicas_acked = 0;
    /* The socket must outlast WAIT's own timeout, or its read would time out
     * just as the answer is due and the connection would be lost with it. */
    redisSetTimeout(l->c, ms_timeval(timeout_ms + 1000));
    redisReply *r = redisCommand(l->c, "WAIT %d %d", e->sync_replicas, timeout_ms);
    if (r && r->type == REDIS_REPLY_INTEGER) l->replicas_acked = (int)r->integer;
    else lock_fail(l, r, "WAIT");
    freeReplyObject(r);
    if (!l->c->err) redisSetTimeout(l->c, ms_timeval(timeout_ms));
}

/* ---- the gate: a FIFO per lock key in front of gated locks ------------------
 *
 * A gate has at most one owner, the thread that may contend in Redis, and a
 * queue of waiters in arrival order, each on its own stack. Leaving hands
 * the gate to the oldest waiter. A waiter whose deadline passes unlinks
 * itself, so the line never waits on someone who left. Gates are made on
 * first use and kept (a handful of lock names); all under gates_mu. */

struct gate_waiter {
    pthread_cond_t cond;
    int granted;
    struct gate_waiter *next;
};

struct gate {
    char key[192];
    int owned;
    struct gate_waiter *head, *tail;
    struct gate *next;
};

static pthread_mutex_t gates_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gate *gates;

static struct gate *gate_for(const char *key) {
    for (struct gate *g = gates; g; g = g->next)
        if (strcmp(g->key, key) == 0) return g;
    struct gate *g = calloc(1, sizeof(*g));
    if (!g) return NULL;
    snprintf(g->key, sizeof(g->key), "%s", key);
    g->next = gates;
    gates = g;
    return g;
}

/* Waits for l's turn at its key's gate until l->deadline_us. LOCK_OK or
 * LOCK_BUSY. Out of memory lets the caller through ungated. */
static int gate_enter(struct lock *l) {
    pthread_mutex_lock(&gates_mu);
    struct gate *g = gate_for(l->key);
    if (!g || !g->owned) {
        if (g) g->owned = 1;
        l->gated = g != NULL;
        pthread_mutex_unlock(&gates_mu);
        return LOCK_OK;
    }
    struct gate_waiter w = {.granted = 0};
    mclock_cond_init(&w.cond);
    if (g->tail) g->tail->next = &w;
    else g->head = &w;
    g->tail = &w;
    struct timespec ts = {l->deadline_us / 1000000, (long)(l->deadline_us % 1000000) * 1000};
    while (!w.granted)
        if (pthread_cond_timedwait(&w.cond, &gates_mu, &ts) == ETIMEDOUT) break;
    if (!w.granted) {
        struct gate_waiter *prev = NULL;
        for (struct gate_waiter *x = g->head; x; prev = x, x = x->next) {
            if (x == &w) {
                if (prev) prev->next = w.next;
                else g->head = w.next;
                if (g->tail == &w) g->tail = prev;
                break;
            }
        }
    }
    l->gated = w.granted;
    pthread_mutex_unlock(&gates_mu);
    pthread_cond_destroy(&w.cond);
    if (!w.granted) snprintf(l->errstr, sizeof(l->errstr), "queued in this process");
    return w.granted ? LOCK_OK : LOCK_BUSY;
}

static void gate_leave(struct lock *l) {
    if (!l->gated) return;
    l->gated = 0;
    pthread_mutex_lock(&gates_mu);
    struct gate *g = gate_for(l->key);
    struct gate_waiter *next = g ? g->head : NULL;
    if (next) {
        g->head = next->next;
        if (!g->head) g->tail = NULL;
        next->granted = 1;   /* the gate passes on, still owned */
        pthread_cond_signal(&next->cond);
    } else if (g) {
        g->owned = 0;
    }
    pthread_mutex_unlock(&gates_mu);
}

static void gates_free(void) {
    pthread_mutex_lock(&gates_mu);
    while (gates) {
        struct gate *next = gates->next;
        free(gates);
        gates = next;
    }
    pthread_mutex_unlock(&gates_mu);
}

int lock_acquire(struct lock *l) {
    monotime_us start = mclock_us();
    l->deadline_us = start + (monotime_us)l->env->wait_ms * 1000;
    l->errstr[0] = '\0';
    int gate = (l->type->flags & LOCK_F_GATED) && l->holds == 0;
    int rc = gate ? gate_enter(l) : LOCK_OK;
    if (rc == LOCK_OK) rc = l->type->acquire ? l->type->acquire(l) : LOCK_OK;
    if (rc != LOCK_OK && gate) gate_leave(l);
    if (rc == LOCK_OK && l->holds++ == 0) {
        l->acquired_us = mclock_us();
        lock_wait_replicas(l);
    }
    l->wait_us += mclock_us() - start;
    return rc;
}

int lock_release(struct lock *l) {
    if (l->holds == 0) return LOCK_OK;
    l->holds--;
    int rc = l->type->release ? l->type->release(l) : LOCK_OK;
    if (l->holds == 0) gate_leave(l);
    return rc;
}

void lock_forget(struct lock *l) {
    if (l->holds == 0) return;
    l->holds = 0;
    watchdog_unwatch(l);
    gate_leave(l);
}

int lock_renew(struct lock *l) {
    if (l->holds == 0 || !l->type->renew) return LOCK_OK;
    return l->type->renew(l);
}

int lock_fail(struct lock *l, const redisReply *reply, const char *what) {
    if (reply && reply->type == REDIS_REPLY_ERROR)
        snprintf(l->errstr, sizeof(l->errstr), "%.40s: %.80s", what, reply->str);
    else if (l->c && l->c->err)
        snprintf(l->errstr, sizeof(l->errstr), "%.40s: %.80s", what, l->c->errstr);
    else
        snprintf(l->errstr, sizeof(l->errstr), "%s: unexpected reply", what);
    return LOCK_ERR;
}

int lock_backoff(struct lock *l) {
    monotime_us now = mclock_us();
    if (now >= l->deadline_us) return -1;
    int64_t left_ms = (l->deadline_us - now + 999) / 1000;
    int ms = l->env->spin_sleep_ms;
    if (left_ms < ms) ms = (int)left_ms;
    mclock_sleep_ms(ms);
    return 0;
}

int lock_poll(struct lock *l, int (*try_once)(struct lock *)) {
    for (;;) {
        int rc = try_once(l);
        if (rc != LOCK_BUSY) return rc;
        if (lock_backoff(l) < 0) return LOCK_BUSY;
    }
}

int lock_is_lost(const struct lock *l) {
    return atomic_load(&l->lost) != 0;
}

int lock_set_nx(struct lock *l, int ttl_ms) {
    l->attempts++;
    redisReply *r = ttl_ms > 0
        ? redisCommand(l->c, "SET %s %s NX PX %d", l->key, l->owner, ttl_ms)
        : redisCommand(l->c, "SET %s %s NX", l->key, l->owner);
    int rc;
    if (!r || r->type == REDIS_REPLY_ERROR) rc = lock_fail(l, r, "SET NX");
    else rc = r->type == REDIS_REPLY_STATUS ? LOCK_OK : LOCK_BUSY;
    freeReplyObject(r);
    return rc;
}

int lock_del(struct lock *l) {
    redisReply *r = redisCommand(l->c, "DEL %s", l->key);
    int rc;
    if (!r || r->type != REDIS_REPLY_INTEGER) rc = lock_fail(l, r, "DEL");
    else rc = r->integer == 1 ? LOCK_OK : LOCK_LOST;
    freeReplyObject(r);
    return rc;
}

redisReply *lock_script(struct lock *l, const char *name, int numkeys, int argc,
                        const char **argv) {
    char err[128];
    redisReply *r = script_run(l->c, name, numkeys, argc, argv, NULL, err, sizeof(err));
    if (!r) snprintf(l->errstr, sizeof(l->errstr), "%.40s: %.80s", name, err);
    return r;
}

void lock_core_shutdown(void) {
    watchdog_shutdown();
    pubsub_shutdown();
    gates_free();
}
