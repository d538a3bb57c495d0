/* watchdog.c -- one renewal thread for every watched lock (see watchdog.h).
 *
 * DESIGN
 * `watched` is a singly linked list of lock handles (through wd_next), kept
 * under `mu`. The thread sleeps on `changed` until the earliest wd_due_us,
 * then renews every due lock on a connection borrowed from the pool, still
 * under `mu`: watchdog_unwatch() therefore waits for a round
 * in flight to end, and once it returns the thread never touches that handle
 * again (it lives on a sale thread's stack). A round is bounded by
 * redis.timeout, and happens only every TTL/3.
 *
 * Threads: the sale threads (watch/unwatch) and the watchdog thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "mclock.h"
#include "rpool.h"
#include "script.h"
#include "watchdog.h"

#define ROUND_MAX 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed;
static pthread_t thread;
static int running, stopping;
static struct lock *watched;
static struct rpool *pool;
static atomic_llong renewals_total;

/* The lease a renewal resets, and how often it is renewed: TTL/3. */
static int64_t period_us(const struct lock *l) {
    int64_t p = (int64_t)l->env->ttl_ms * 1000 / 3;
    return p > 1000 ? p : 1000;
}

static void mark_lost(struct lock *l) {
    atomic_store(&l->lost, 1);
}

/* Records the outcome of one renewal of l at now. */
static void renewed(struct lock *l, int ok, int64_t now) {
    if (ok) {
        atomic_fetch_add(&l->renewals, 1);
        atomic_fetch_add(&renewals_total, 1);
        l->wd_renewed_us = now;
        l->wd_due_us = now + period_us(l);
    } else {
        mark_lost(l);       /* gone, or another owner's: stop */
        l->wd_due_us = INT64_MAX;
    }
}

/* Renews the due locks in due[]. Called with mu held. A lock on several
 * masters renews itself through its type (it needs a quorum of them). */
static void renew_round(struct lock **due, int n) {
    int single = 0;
    for (int i = 0; i < n; i++) {
        if (due[i]->type->flags & LOCK_F_MULTI)
            renewed(due[i], due[i]->type->renew(due[i]) == LOCK_OK, mclock_us());
        else
            due[single++] = due[i];
    }
    n = single;
    if (n == 0) return;
    char err[128];
    redisContext *c = rpool_get(pool, 1000, err, sizeof(err));
    redisReply *rep[ROUND_MAX] = {0};
    int got = 0;
    if (c) {
        char lease[n][24];
        for (int i = 0; i < n; i++) {
            snprintf(lease[i], sizeof(lease[i]), "%d", due[i]->env->ttl_ms);
            const char *argv[] = {due[i]->key, lease[i], due[i]->owner};
            /* One by one through script_run, which handles NOSCRIPT; a round
             * is small (one lock per name is held at a time). */
            rep[i] = script_run(c, "hash-renew", 1, 3, argv, NULL, err, sizeof(err));
            if (!rep[i]) break;
            got++;
        }
    }
    int64_t now = mclock_us();
    for (int i = 0; i < n; i++) {
        struct lock *l = due[i];
        if (i < got && rep[i]->type == REDIS_REPLY_INTEGER) {
            renewed(l, rep[i]->integer == 1, now);
        } else {
            /* Not reached: try again soon, until the lease set by the last
             * renewal has run out. */
            if (now - l->wd_renewed_us >= (int64_t)l->env->ttl_ms * 1000) {
                mark_lost(l);
                l->wd_due_us = INT64_MAX;
            } else {
                l->wd_due_us = now + period_us(l) / 4;
            }
        }
    }
    for (int i = 0; i < got; i++) freeReplyObject(rep[i]);
    if (c) rpool_put(pool, c);   /* dropped by rpool_put if it failed */
}

static void *watchdog_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        int64_t now = mclock_us(), next = now + 1000000;
        struct lock *due[ROUND_MAX];
        int n = 0;
        for (struct lock *l = watched; l; l = l->wd_next) {
            if (l->wd_due_us <= now && n < ROUND_MAX) due[n++] = l;
            else if (l->wd_due_us < next) next = l->wd_due_us;
        }
        if (n > 0) {
            renew_round(due, n);
            continue;
        }
        struct timespec ts = {next / 1000000, (long)(next % 1000000) * 1000};
        pthread_cond_timedwait(&changed, &mu, &ts);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

void watchdog_watch(struct lock *l) {
    pthread_mutex_lock(&mu);
    if (!running) {
        mclock_cond_init(&changed);
        pool = l->env->pool;
        stopping = 0;
        if (pthread_create(&thread, NULL, watchdog_main, NULL) == 0) running = 1;
    }
    l->wd_renewed_us = mclock_us();
    l->wd_due_us = l->wd_renewed_us + period_us(l);
    l->wd_next = watched;
    watched = l;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&mu);
}

void watchdog_unwatch(struct lock *l) {
    pthread_mutex_lock(&mu);
    for (struct lock **p = &watched; *p; p = &(*p)->wd_next) {
        if (*p == l) {
            *p = l->wd_next;
            break;
        }
    }
    l->wd_next = NULL;
    pthread_mutex_unlock(&mu);
}

long long watchdog_renewals(void) {
    return atomic_load(&renewals_total);
}

void watchdog_shutdown(void) {
    pthread_mutex_lock(&mu);
    if (!running) {
        pthread_mutex_unlock(&mu);
        return;
    }
    stopping = 1;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&mu);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&mu);
    running = 0;
    watched = NULL;
    pthread_cond_destroy(&changed);
    pthread_mutex_unlock(&mu);
}
