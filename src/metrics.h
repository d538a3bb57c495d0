/* metrics.h -- per-strategy counters and histograms, rendered as Prometheus
 * text. Counters are C11 atomics: any thread may add to them without a lock.
 * The set of strategies is fixed (strategies[]), so the tables are static. */
#ifndef INVENTORYD_METRICS_H
#define INVENTORYD_METRICS_H

#include <stdint.h>
#include "inventory.h"

struct strategy;

/* Records one finished sale by strategy t. */
void metrics_sale(const struct strategy *t, const struct sale_result *r);

struct redlock;

/* Adds the Redlock masters' vote counters to the exposition (NULL: none). */
void metrics_set_redlock(const struct redlock *rl);

struct lock_core;

/* Adds the watchdog's lanes (renewals by outcome, the longest renewal) to
 * the exposition (NULL: none). */
void metrics_set_core(struct lock_core *core);

struct rpool;

/* In cluster mode, adds the refusals the pool followed (MOVED, ASK,
 * TRYAGAIN) and its slot map loads to the exposition (NULL: none). */
void metrics_set_cluster(struct rpool *root);

/* Records one HTTP request answered with status code. */
void metrics_http(int status);

/* Sets every counter back to zero (on reset). */
void metrics_reset(void);

/* The Prometheus text exposition of everything; free() it. NULL if out of memory. */
char *metrics_render(void);

#endif
