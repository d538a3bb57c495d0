/* watchdog.h -- renewal of held locks, Redisson's lock watchdog: while a lock
 * is watched, its lease is reset every TTL/3 by ONE background thread for
 * all held locks of the process (not a timer thread per lock).
 *
 * A renewal that finds the lock gone, or that cannot reach Redis before the
 * lease would have run out, marks the lock lost (lock->lost); the holder then
 * refuses to commit. Renewal stops at watchdog_unwatch(), which the strategy
 * calls before it sends its release. */
#ifndef INVENTORYD_WATCHDOG_H
#define INVENTORYD_WATCHDOG_H

#include "lock.h"

/* Starts renewing l (held, with l->env->ttl_ms as its lease). The thread is
 * started on first use. l must stay valid until watchdog_unwatch(l). */
void watchdog_watch(struct lock *l);

/* Stops renewing l. When it returns, the watchdog no longer touches l. */
void watchdog_unwatch(struct lock *l);

/* Renewals sent since start (for tests and metrics). */
long long watchdog_renewals(void);

/* Stops and joins the thread. Accepts being called when it never started. */
void watchdog_shutdown(void);

#endif
