/* redlock.h -- the independent Redis masters of the redlock strategy, and
 * what this process knows of each: its connection pool, its run_id and
 * whether it restarted too recently to vote.
 *
 * Made once at start-up from redlock.nodes; read-only afterwards except for
 * each node's restart state and counters, which are guarded or atomic. Thread
 * safe. */
#ifndef INVENTORYD_REDLOCK_H
#define INVENTORYD_REDLOCK_H

#include <stddef.h>
#include <stdint.h>
#include "lock.h"

struct redlock;

/* Parses spec ("host:port,host:port,...", 1 to LOCK_MAX_NODES masters) and
 * makes a pool per master with node_timeout_ms as connect and command
 * timeout; no connection is made yet. max_ttl_ms is the longest lease this
 * process uses: a master that restarted less than that ago gets no vote
 * until it has been up that long (the Redis docs' delayed restart).
 * NULL with errstr set ("redlock.nodes: 'x' is not host:port"). */
struct redlock *redlock_create(const char *spec, const char *password, int node_timeout_ms,
                               int max_ttl_ms, int pool_size, char *errstr, size_t errlen);

/* Frees the pools. Accepts NULL. */
void redlock_free(struct redlock *rl);

/* Number of masters, and the quorum N/2+1 of the configured N. */
int redlock_nodes(const struct redlock *rl);
int redlock_quorum(const struct redlock *rl);

/* "host:port" of master i. */
const char *redlock_node_name(const struct redlock *rl, int i);

/* Counters of master i, for metrics: votes granted, refused (busy), failed,
 * and withheld because it restarted within the TTL. */
void redlock_node_counts(const struct redlock *rl, int i, long long *yes, long long *busy,
                         long long *error, long long *restarted);

/* The strategy's operations (lock_redlock.c fills its table with them). */
int redlock_acquire(struct lock *l);
int redlock_release(struct lock *l);
int redlock_renew(struct lock *l);

#endif
