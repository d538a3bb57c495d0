/* watchdog.c -- the lock core's renewals and retries, one lane per Redis
 * server (see watchdog.h).
 *
 * DESIGN
 * A lane is one thread and the locks whose renewal needs one server: the
 * locks on the core's Redis (or, in cluster mode, on one cluster master)
 * share a lane, and the locks on the Redlock masters share another. Lanes
 * are made when a lock first needs them and live until watchdog_free. A
 * stalled server therefore stalls only the locks that live on it: a Redlock
 * renewal stuck on a paused master never delays a redisson lock's renewal
 * on the core's Redis, nor its holder's commit.
 *
 * A lane renews one lock at a time, most overdue first, and records the
 * outcome (the lease, dated from when the renewal was sent) as soon as that
 * lock's own reply is in. A lock is busy only while its own renewal is in
 * flight; watchdog_unwatch() waits (on `idle`) for that one renewal, never
 * for the lane's other locks.
 *
 * Locking: one mutex, `mu`, guards every lane's lists, every handle's wd_*
 * fields and the counters. A lane takes what it will renew under `mu`,
 * marks it busy, and drops `mu` for the round trip: no mutex is ever held
 * across I/O. `mu` is a leaf: nothing else is locked while it is held.
 *
 * Connections: each lane has its own (links[], one per Redis server it has
 * needed), made with the pool's options and never borrowed from it, so a
 * busy pool cannot starve a renewal. Only the lane's thread touches them. A
 * server whose link failed is not dialled again by that lane for
 * LINK_REST_MS, so a Redlock lane with one master stalled pays the stall
 * once, not once per lock, and renews by the quorum of the others.
 *
 * Threads: the sale threads (watch, unwatch, adopt), and one thread per
 * lane, started by watch or adopt and joined by watchdog_free. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lock_int.h"
#include "mclock.h"
#include "rpool.h"
#include "watchdog.h"

/* The single-master pool or, in cluster mode, one pool per cluster master,
 * and the Redlock masters: the servers a lane may need. */
#define LINKS_MAX (LOCK_MAX_NODES + 1 + RPOOL_MASTERS_MAX)
/* One lane per cluster master, one for the core's pool, one for Redlock. */
#define LANES_MAX (RPOOL_MASTERS_MAX + 2)
#define ORPHAN_RETRY_MS 250
#define ORPHANS_MAX 4096
#define LINK_REST_MS 100

struct wd_link {
    struct rpool *pool;
    redisContext *c;
    int64_t rest_until_us; /* failed: not dialled again before this */
};

struct wd_lane {
    struct watchdog *wd;
    struct rpool *home; /* the server of its locks; NULL: the Redlock masters, or store */
    const struct lock_store *store; /* the store of its locks when not Redis */
    pthread_t thread;
    pthread_cond_t changed; /* a lock was watched or adopted here, or stop */
    struct lock *watched; /* through wd_next, under mu */
    struct lock *orphans;
    struct wd_link links[LINKS_MAX]; /* the lane thread's own */
    int64_t asleep_until_us; /* under mu: when its sleeping thread wakes by itself;
                                   0 while it is awake (it looks at its lists again
                                   before it sleeps, so nobody need wake it) */
    int nlinks;
    struct lock_lane_stats stats; /* under mu */
};

struct watchdog {
    struct lock_core *core;
    const struct watchdog_ops *ops;
    pthread_mutex_t mu;
    pthread_cond_t idle; /* a renewal or retry ended */
    int stopping;
    int norphans;
    int nlanes;
    struct wd_lane *lanes[LANES_MAX];
};

/* ---- a lane's connections --------------------------------------------------- */

static redisContext *link_get(struct lock_link *k, struct rpool *pool) {
    struct wd_lane *lane = k->ctx;
    struct wd_link *ln = NULL;
    for (int i = 0; i < lane->nlinks && !ln; i++)
        if (lane->links[i].pool == pool) ln = &lane->links[i];
    if (!ln) {
        if (lane->nlinks == LINKS_MAX) {
            snprintf(k->errstr, sizeof(k->errstr), "too many Redis servers to renew on");
            return NULL;
        }
        ln = &lane->links[lane->nlinks++];
        ln->pool = pool;
    }
    if (!ln->c && mclock_us() < ln->rest_until_us) {
        snprintf(k->errstr, sizeof(k->errstr), "not tried: it failed less than %d ms ago",
                 LINK_REST_MS);
        return NULL;
    }
    if (!ln->c) ln->c = rpool_connect(rpool_options(pool), k->errstr, sizeof(k->errstr));
    if (!ln->c) ln->rest_until_us = mclock_us() + LINK_REST_MS * 1000;
    return ln->c;
}

static void link_put(struct lock_link *k, struct rpool *pool, redisContext *c) {
    struct wd_lane *lane = k->ctx;
    if (!c || !c->err) return;
    for (int i = 0; i < lane->nlinks; i++) {
        if (lane->links[i].pool == pool && lane->links[i].c == c) {
            redisFree(c);
            lane->links[i].c = NULL; /* redialled on a later use */
            lane->links[i].rest_until_us = mclock_us() + LINK_REST_MS * 1000;
        }
    }
}

/* ---- renewal ------------------------------------------------------------ */

static int64_t period_us(const struct lock *l) {
    int64_t p = (int64_t)lock_lease_ms(l) * 1000 / 3;
    return p > 1000 ? p : 1000;
}

/* Records the outcome rc of renewing l, sent at sent_us. Called with mu held. */
static void renewed(struct wd_lane *lane, struct lock *l, int rc, int64_t sent_us) {
    int64_t now = mclock_us();
    int unheeded = (l->type->flags & LOCK_T_UNHEEDED) != 0;
    if (now - sent_us > lane->stats.longest_us) lane->stats.longest_us = now - sent_us;
    if (rc == LOCK_OK) {
        atomic_store(&l->lease_until_us,
                     sent_us + (int64_t)lock_lease_ms(l) * 1000 - lock_margin_us(lock_lease_ms(l)));
        atomic_fetch_add(&l->renewals, 1);
        l->wd_due_us = sent_us + period_us(l);
        lane->stats.renewed++;
    } else if (rc == LOCK_LOST || (now >= atomic_load(&l->lease_until_us) && !unheeded)) {
        /* Gone, or its lease ran out unrenewed. A holder that never looks
         * (LOCK_T_UNHEEDED) is not told, and its lease stays as it was;
         * while its store is out of reach it is looked at again, even
         * past the lease: a node found again was never lost. */
        if (!unheeded) atomic_store(&l->lost, 1);
        l->wd_due_us = INT64_MAX;
        lane->stats.lost++;
    } else {
        l->wd_due_us = now + period_us(l) / 4; /* not reached: soon again */
        lane->stats.unreached++;
    }
}

/* Records the outcome rc of retrying orphan l; frees it when done. Called
 * with mu held. */
static void retried(struct wd_lane *lane, struct lock *l, int rc) {
    struct watchdog *wd = lane->wd;
    int64_t now = mclock_us();
    lane->stats.retries++;
    if (rc != LOCK_OK && now < l->wd_giveup_us && !wd->stopping) {
        l->wd_due_us = now + ORPHAN_RETRY_MS * 1000;
        return;
    }
    for (struct lock **p = &lane->orphans; *p; p = &(*p)->wd_next)
        if (*p == l) {
            *p = l->wd_next;
            break;
        }
    wd->norphans--;
    wd->ops->destroy(l);
}

/* The most overdue lock of list due at now, or NULL; *next gets the
 * earliest later due time. Called with mu held. */
static struct lock *most_due(struct lock *list, int64_t now, int all, int64_t *next) {
    struct lock *pick = NULL;
    for (struct lock *l = list; l; l = l->wd_next) {
        if (l->wd_due_us <= now || all) {
            if (!pick || l->wd_due_us < pick->wd_due_us) pick = l;
        } else if (l->wd_due_us < *next) {
            *next = l->wd_due_us;
        }
    }
    return pick;
}

static void *lane_main(void *arg) {
    struct wd_lane *lane = arg;
    struct watchdog *wd = lane->wd;
    struct lock_link k = {.get = link_get, .put = link_put, .ctx = lane};
    pthread_mutex_lock(&wd->mu);
    for (;;) {
        int64_t now = mclock_us(), next = now + 1000000;
        struct lock *l = most_due(lane->watched, now, 0, &next);
        int orphan = !l;
        if (orphan) l = most_due(lane->orphans, now, wd->stopping, &next);
        if (!l) {
            if (wd->stopping) break;
            lane->asleep_until_us = next;
            mclock_cond_wait_until(&lane->changed, &wd->mu, next);
            lane->asleep_until_us = 0;
            continue;
        }
        l->wd_busy = 1;
        pthread_mutex_unlock(&wd->mu);
        int64_t sent = mclock_us();
        int rc = orphan ? wd->ops->give_up(l, &k) : l->type->renew(l, &k);
        pthread_mutex_lock(&wd->mu);
        l->wd_busy = 0;
        if (orphan)
            retried(lane, l, rc);
        else
            renewed(lane, l, rc, sent);
        pthread_cond_broadcast(&wd->idle);
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

/* The lane for home, made and started if need be; with no thread to be
 * had, the first lane (any lane can reach any server). Called with mu
 * held. */
static struct wd_lane *lane_for(struct watchdog *wd, struct rpool *home,
                                const struct lock_store *store) {
    for (int i = 0; i < wd->nlanes; i++)
        if (wd->lanes[i]->home == home && wd->lanes[i]->store == store) return wd->lanes[i];
    struct wd_lane *lane = wd->nlanes < LANES_MAX ? calloc(1, sizeof(*lane)) : NULL;
    if (lane) {
        lane->wd = wd;
        lane->home = home;
        lane->store = store;
        mclock_cond_init(&lane->changed);
        if (pthread_create(&lane->thread, NULL, lane_main, lane) == 0) {
            wd->lanes[wd->nlanes++] = lane;
            return lane;
        }
        pthread_cond_destroy(&lane->changed);
        free(lane);
    }
    return wd->nlanes > 0 ? wd->lanes[0] : NULL;
}

/* The Redis server whose stall would stall l's renewal: NULL for the
 * Redlock masters and for a lock in another store (its lane is the
 * store's). */
static struct rpool *home_of(const struct lock *l) {
    if ((l->type->flags & LOCK_T_QUORUM) || l->type->store) return NULL;
    return atomic_load(&((struct lock *)l)->pool);
}

struct watchdog *watchdog_create(struct lock_core *core, const struct watchdog_ops *ops) {
    struct watchdog *wd = calloc(1, sizeof(*wd));
    if (!wd) return NULL;
    wd->core = core;
    wd->ops = ops;
    pthread_mutex_init(&wd->mu, NULL);
    mclock_cond_init(&wd->idle);
    pthread_mutex_lock(&wd->mu);
    int ok =
        lane_for(wd, core->pool, NULL) != NULL; /* the first lane: the fallback of the others */
    pthread_mutex_unlock(&wd->mu);
    if (!ok) {
        pthread_cond_destroy(&wd->idle);
        pthread_mutex_destroy(&wd->mu);
        free(wd);
        return NULL;
    }
    return wd;
}

void watchdog_watch(struct watchdog *wd, struct lock *l) {
    pthread_mutex_lock(&wd->mu);
    struct wd_lane *lane = lane_for(wd, home_of(l), l->type->store);
    l->wd_lane = lane;
    l->wd_due_us = mclock_us() + period_us(l);
    l->wd_busy = 0;
    l->wd_next = lane->watched;
    lane->watched = l;
    /* Only a lock due before the lane wakes by itself needs it woken: a
     * wake-up per hold would cost every sale a context switch. */
    if (lane->asleep_until_us && l->wd_due_us < lane->asleep_until_us)
        pthread_cond_signal(&lane->changed);
    pthread_mutex_unlock(&wd->mu);
}

void watchdog_unwatch(struct watchdog *wd, struct lock *l) {
    pthread_mutex_lock(&wd->mu);
    struct wd_lane *lane = l->wd_lane;
    for (struct lock **p = lane ? &lane->watched : NULL; p && *p; p = &(*p)->wd_next) {
        if (*p == l) {
            *p = l->wd_next;
            break;
        }
    }
    l->wd_next = NULL;
    l->wd_lane = NULL;
    while (l->wd_busy) pthread_cond_wait(&wd->idle, &wd->mu);
    pthread_mutex_unlock(&wd->mu);
}

void watchdog_adopt(struct watchdog *wd, struct lock *l) {
    pthread_mutex_lock(&wd->mu);
    if (wd->norphans >= ORPHANS_MAX) {
        /* Past the bound the lease alone will free it. */
        pthread_mutex_unlock(&wd->mu);
        wd->ops->destroy(l);
        return;
    }
    struct wd_lane *lane = lane_for(wd, home_of(l), l->type->store);
    int64_t now = mclock_us(), lease = atomic_load(&l->lease_until_us);
    /* A lock without a lease (setnx) is retried for a minute at most. */
    l->wd_giveup_us = lease ? lease + lock_margin_us(lock_lease_ms(l)) : now + 60000000;
    l->wd_due_us = now + ORPHAN_RETRY_MS * 1000;
    l->wd_busy = 0;
    l->wd_lane = lane;
    l->wd_next = lane->orphans;
    lane->orphans = l;
    wd->norphans++;
    pthread_cond_signal(&lane->changed);
    pthread_mutex_unlock(&wd->mu);
}

int watchdog_orphans(struct watchdog *wd) {
    pthread_mutex_lock(&wd->mu);
    int n = wd->norphans;
    pthread_mutex_unlock(&wd->mu);
    return n;
}

int watchdog_stats(struct watchdog *wd, struct lock_lane_stats *out, int max) {
    pthread_mutex_lock(&wd->mu);
    int n = 0;
    for (; n < wd->nlanes && n < max; n++) {
        struct wd_lane *lane = wd->lanes[n];
        out[n] = lane->stats;
        if (lane->store) {
            snprintf(out[n].name, sizeof(out[n].name), "%s", lane->store->name);
        } else if (!lane->home) {
            snprintf(out[n].name, sizeof(out[n].name), "redlock");
        } else {
            const struct rpool_options *o = rpool_options(lane->home);
            if (o->sentinels && o->sentinels[0])
                snprintf(out[n].name, sizeof(out[n].name), "%.60s", o->master_name);
            else
                snprintf(out[n].name, sizeof(out[n].name), "%.48s:%d", o->host, o->port);
        }
    }
    pthread_mutex_unlock(&wd->mu);
    return n;
}

void watchdog_free(struct watchdog *wd) {
    if (!wd) return;
    pthread_mutex_lock(&wd->mu);
    wd->stopping = 1;
    for (int i = 0; i < wd->nlanes; i++) pthread_cond_signal(&wd->lanes[i]->changed);
    pthread_mutex_unlock(&wd->mu);
    for (int i = 0; i < wd->nlanes; i++) {
        struct wd_lane *lane = wd->lanes[i];
        pthread_join(lane->thread, NULL);
        for (int j = 0; j < lane->nlinks; j++) redisFree(lane->links[j].c);
        pthread_cond_destroy(&lane->changed);
        free(lane);
    }
    pthread_cond_destroy(&wd->idle);
    pthread_mutex_destroy(&wd->mu);
    free(wd);
}
