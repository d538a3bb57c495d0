/* watchdog.h -- the lock core's background thread: Redisson's lock
 * watchdog, and the retrier of holds that could not be given up.
 *
 * While a lock is watched, its lease is renewed every TTL/3 by ONE thread
 * for all the held locks of the core, on connections of its own (one per
 * Redis server, never from the sale pool). Each renewal dates the lease from
 * when it was sent. A renewal that finds the lock gone marks it lost; one
 * that cannot reach Redis is tried again sooner, and the lock is marked lost
 * once the lease it had has run out.
 *
 * An orphan is a handle whose compensating release failed (see lock.h); the
 * thread retries it every ORPHAN_RETRY_MS until it succeeds or its lease is
 * over, then frees it. */
#ifndef INVENTORYD_WATCHDOG_H
#define INVENTORYD_WATCHDOG_H

struct lock;
struct lock_core;
struct watchdog;

/* Starts the thread. NULL when it cannot be started. */
struct watchdog *watchdog_create(struct lock_core *core);

/* Retries every orphan once more, stops and joins the thread, closes its
 * connections and frees the orphans. No lock may be watched. Accepts NULL. */
void watchdog_free(struct watchdog *wd);

/* Starts renewing l (held; its lease set). l must stay valid until
 * watchdog_unwatch(l). */
void watchdog_watch(struct watchdog *wd, struct lock *l);

/* Stops renewing l; waits for a renewal of l in flight to end. When it
 * returns, the watchdog no longer touches l. */
void watchdog_unwatch(struct watchdog *wd, struct lock *l);

/* Takes over an orphaned handle (holds given up in this process, maybe not
 * in Redis): retried, then freed, by the watchdog thread. */
void watchdog_adopt(struct watchdog *wd, struct lock *l);

/* Orphans not yet given up (for tests). */
int watchdog_orphans(struct watchdog *wd);

#endif
