/* watchdog.h -- the lock core's background renewals: Redisson's lock
 * watchdog, and the retrier of holds that could not be given up.
 *
 * While a lock is watched, its lease is renewed every TTL/3 by the thread
 * of its lane: one lane per Redis server the core's locks live on (the
 * core's Redis, or each cluster master) and one for the Redlock masters, so
 * a stalled server delays only the locks that live on it. Lanes renew on
 * connections of their own, never from the sale pool. Each renewal dates
 * the lease from when it was sent, and its outcome is recorded as soon as
 * its own reply is in. A renewal that finds the lock gone marks it lost;
 * one that cannot reach Redis is tried again sooner, and the lock is marked
 * lost once the lease it had has run out.
 *
 * An orphan is a handle whose compensating release failed (see lock.h); the
 * thread retries it every ORPHAN_RETRY_MS until it succeeds or its lease is
 * over, then frees it. */
#ifndef INVENTORYD_WATCHDOG_H
#define INVENTORYD_WATCHDOG_H

struct lock;
struct lock_core;
struct lock_link;
struct watchdog;

/* What the watchdog does to an orphan, given by the lock core that owns
 * the handles, so that the watchdog never calls back up into lock.c. */
struct watchdog_ops {
    /* Gives up every hold of l on k's connections: LOCK_OK or LOCK_ERR. */
    int (*give_up)(struct lock *l, struct lock_link *k);
    /* Frees l, given up or past retrying. */
    void (*destroy)(struct lock *l);
};

/* Starts the first lane's thread (the core's pool); the others start when
 * a lock first needs them. ops is the caller's and must outlive the
 * watchdog. NULL when no thread can be started. */
struct watchdog *watchdog_create(struct lock_core *core, const struct watchdog_ops *ops);

/* Retries every orphan once more, stops and joins every lane's thread,
 * closes their connections and frees the orphans. No lock may be watched.
 * Accepts NULL. */
void watchdog_free(struct watchdog *wd);

/* Starts renewing l (held; its lease set). l must stay valid until
 * watchdog_unwatch(l). */
void watchdog_watch(struct watchdog *wd, struct lock *l);

/* Stops renewing l; waits for a renewal of l in flight to end (never for
 * another lock's). When it returns, the watchdog no longer touches l. */
void watchdog_unwatch(struct watchdog *wd, struct lock *l);

/* Takes over an orphaned handle (holds given up in this process, maybe not
 * in Redis): retried, then freed, by the watchdog thread. */
void watchdog_adopt(struct watchdog *wd, struct lock *l);

/* Orphans not yet given up (for tests). */
int watchdog_orphans(struct watchdog *wd);

/* Fills out[] with up to max lanes' figures; returns how many. */
struct lock_lane_stats;
int watchdog_stats(struct watchdog *wd, struct lock_lane_stats *out, int max);

#endif
