/* watchdog.c -- one background thread per lock core (see watchdog.h).
 *
 * DESIGN
 * `watched` and `orphans` are singly linked lists of handles (through
 * wd_next), kept under `mu`. The thread picks what is due under `mu`,
 * marks each watched one busy, and drops `mu` for the network round trips:
 * no mutex is ever held across I/O. It then takes `mu` again to record the
 * outcomes. watchdog_unwatch() waits (on `idle`) for a renewal of its handle
 * in flight to end, so once it returns the thread never touches that handle
 * again (it lives with its sale).
 *
 * The thread's connections (links[], one per pool it has needed) are its
 * own: made with the pool's options, never borrowed from it, so a busy pool
 * cannot starve a renewal. Only the thread touches them.
 *
 * Threads: the sale threads (watch, unwatch, adopt) and the watchdog thread. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lock_int.h"
#include "mclock.h"
#include "cluster.h"
#include "rpool.h"
#include "watchdog.h"

#define ROUND_MAX 256
/* Redlock's masters, and the single-master pool or, in cluster mode, one
 * pool per cluster master. */
#define LINKS_MAX (LOCK_MAX_NODES + 1 + CLUSTER_NODES_MAX)
#define ORPHAN_RETRY_MS 250
#define ORPHANS_MAX 4096

struct wd_link {
    struct rpool *pool;
    redisContext *c;
};

struct watchdog {
    struct lock_core *core;
    pthread_mutex_t mu;
    pthread_cond_t changed;     /* a lock was watched or adopted, or stop */
    pthread_cond_t idle;        /* a round ended */
    pthread_t thread;
    int stopping;
    struct lock *watched;
    struct lock *orphans;
    int norphans;
    struct wd_link links[LINKS_MAX];   /* the thread's own */
    int nlinks;
};

/* ---- the thread's connections ------------------------------------------- */

static redisContext *link_get(struct lock_link *k, struct rpool *pool) {
    struct watchdog *wd = k->ctx;
    struct wd_link *ln = NULL;
    for (int i = 0; i < wd->nlinks && !ln; i++)
        if (wd->links[i].pool == pool) ln = &wd->links[i];
    if (!ln) {
        if (wd->nlinks == LINKS_MAX) {
            snprintf(k->errstr, sizeof(k->errstr), "too many Redis servers to renew on");
            return NULL;
        }
        ln = &wd->links[wd->nlinks++];
        ln->pool = pool;
    }
    if (!ln->c) ln->c = rpool_connect(rpool_options(pool), k->errstr, sizeof(k->errstr));
    return ln->c;
}

static void link_put(struct lock_link *k, struct rpool *pool, redisContext *c) {
    struct watchdog *wd = k->ctx;
    if (!c || !c->err) return;
    for (int i = 0; i < wd->nlinks; i++) {
        if (wd->links[i].pool == pool && wd->links[i].c == c) {
            redisFree(c);
            wd->links[i].c = NULL;   /* redialed on next use */
        }
    }
}

/* ---- renewal ------------------------------------------------------------ */

static int64_t period_us(const struct lock *l) {
    int64_t p = (int64_t)lock_lease_ms(l) * 1000 / 3;
    return p > 1000 ? p : 1000;
}

/* Records the outcome rc of renewing l, sent at sent_us. Called with mu held. */
static void renewed(struct lock *l, int rc, int64_t sent_us) {
    int64_t now = mclock_us();
    if (rc == LOCK_OK) {
        atomic_store(&l->lease_until_us,
                     sent_us + (int64_t)lock_lease_ms(l) * 1000 - lock_margin_us(lock_lease_ms(l)));
        atomic_fetch_add(&l->renewals, 1);
        l->wd_due_us = sent_us + period_us(l);
    } else if (rc == LOCK_LOST || now >= atomic_load(&l->lease_until_us)) {
        atomic_store(&l->lost, 1);     /* gone, or its lease ran out unrenewed */
        l->wd_due_us = INT64_MAX;
    } else {
        l->wd_due_us = now + period_us(l) / 4;   /* not reached: soon again */
    }
}

static void run_round(struct watchdog *wd, struct lock **due, int n, struct lock **orph, int m) {
    struct lock_link k = {.get = link_get, .put = link_put, .ctx = wd};
    int rc[ROUND_MAX], orc[ROUND_MAX];
    int64_t sent[ROUND_MAX];
    for (int i = 0; i < n; i++) {
        sent[i] = mclock_us();
        rc[i] = due[i]->type->renew(due[i], &k);
    }
    for (int i = 0; i < m; i++) orc[i] = lock_compensate(orph[i], &k);

    pthread_mutex_lock(&wd->mu);
    for (int i = 0; i < n; i++) {
        renewed(due[i], rc[i], sent[i]);
        due[i]->wd_busy = 0;
    }
    int64_t now = mclock_us();
    for (int i = 0; i < m; i++) {
        struct lock *l = orph[i];
        l->wd_busy = 0;
        if (orc[i] == LOCK_OK || now >= l->wd_giveup_us || wd->stopping) {
            for (struct lock **p = &wd->orphans; *p; p = &(*p)->wd_next)
                if (*p == l) {
                    *p = l->wd_next;
                    break;
                }
            wd->norphans--;
            lock_destroy(l);
        } else {
            l->wd_due_us = now + ORPHAN_RETRY_MS * 1000;
        }
    }
    pthread_cond_broadcast(&wd->idle);
}

/* Collects what is due into due[] and orph[], marking each busy; returns
 * the earliest later due time. Called with mu held. */
static int64_t collect(struct watchdog *wd, struct lock **due, int *n, struct lock **orph, int *m) {
    int64_t now = mclock_us(), next = now + 1000000;
    *n = *m = 0;
    for (struct lock *l = wd->watched; l; l = l->wd_next) {
        if (l->wd_due_us <= now && *n < ROUND_MAX) {
            l->wd_busy = 1;
            due[(*n)++] = l;
        } else if (l->wd_due_us < next) {
            next = l->wd_due_us;
        }
    }
    for (struct lock *l = wd->orphans; l; l = l->wd_next) {
        if ((l->wd_due_us <= now || wd->stopping) && *m < ROUND_MAX) {
            l->wd_busy = 1;
            orph[(*m)++] = l;
        } else if (l->wd_due_us < next) {
            next = l->wd_due_us;
        }
    }
    return next;
}

static void *watchdog_main(void *arg) {
    struct watchdog *wd = arg;
    struct lock *due[ROUND_MAX], *orph[ROUND_MAX];
    pthread_mutex_lock(&wd->mu);
    for (;;) {
        int n, m;
        int64_t next = collect(wd, due, &n, orph, &m);
        if (n > 0 || m > 0) {
            pthread_mutex_unlock(&wd->mu);
            run_round(wd, due, n, orph, m);   /* takes mu back */
            continue;
        }
        if (wd->stopping) break;
        mclock_cond_wait_until(&wd->changed, &wd->mu, next);
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

struct watchdog *watchdog_create(struct lock_core *core) {
    struct watchdog *wd = calloc(1, sizeof(*wd));
    if (!wd) return NULL;
    wd->core = core;
    pthread_mutex_init(&wd->mu, NULL);
    mclock_cond_init(&wd->changed);
    mclock_cond_init(&wd->idle);
    if (pthread_create(&wd->thread, NULL, watchdog_main, wd) != 0) {
        pthread_cond_destroy(&wd->changed);
        pthread_cond_destroy(&wd->idle);
        pthread_mutex_destroy(&wd->mu);
        free(wd);
        return NULL;
    }
    return wd;
}

void watchdog_watch(struct watchdog *wd, struct lock *l) {
    pthread_mutex_lock(&wd->mu);
    l->wd_due_us = mclock_us() + period_us(l);
    l->wd_busy = 0;
    l->wd_next = wd->watched;
    wd->watched = l;
    pthread_cond_signal(&wd->changed);
    pthread_mutex_unlock(&wd->mu);
}

void watchdog_unwatch(struct watchdog *wd, struct lock *l) {
    pthread_mutex_lock(&wd->mu);
    for (struct lock **p = &wd->watched; *p; p = &(*p)->wd_next) {
        if (*p == l) {
            *p = l->wd_next;
            break;
        }
    }
    l->wd_next = NULL;
    while (l->wd_busy) pthread_cond_wait(&wd->idle, &wd->mu);
    pthread_mutex_unlock(&wd->mu);
}

void watchdog_adopt(struct watchdog *wd, struct lock *l) {
    pthread_mutex_lock(&wd->mu);
    if (wd->norphans >= ORPHANS_MAX) {
        /* Past the bound the lease alone will free it. */
        pthread_mutex_unlock(&wd->mu);
        lock_destroy(l);
        return;
    }
    int64_t now = mclock_us(), lease = atomic_load(&l->lease_until_us);
    /* A lock without a lease (setnx) is retried for a minute at most. */
    l->wd_giveup_us = lease ? lease + lock_margin_us(lock_lease_ms(l)) : now + 60000000;
    l->wd_due_us = now + ORPHAN_RETRY_MS * 1000;
    l->wd_busy = 0;
    l->wd_next = wd->orphans;
    wd->orphans = l;
    wd->norphans++;
    pthread_cond_signal(&wd->changed);
    pthread_mutex_unlock(&wd->mu);
}

int watchdog_orphans(struct watchdog *wd) {
    pthread_mutex_lock(&wd->mu);
    int n = wd->norphans;
    pthread_mutex_unlock(&wd->mu);
    return n;
}

void watchdog_free(struct watchdog *wd) {
    if (!wd) return;
    pthread_mutex_lock(&wd->mu);
    wd->stopping = 1;
    pthread_cond_signal(&wd->changed);
    pthread_mutex_unlock(&wd->mu);
    pthread_join(wd->thread, NULL);
    for (int i = 0; i < wd->nlinks; i++) redisFree(wd->links[i].c);
    pthread_cond_destroy(&wd->changed);
    pthread_cond_destroy(&wd->idle);
    pthread_mutex_destroy(&wd->mu);
    free(wd);
}
