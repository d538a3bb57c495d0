/* redlock.h -- the independent Redis masters of the redlock type, and what
 * this process knows of each: its connection pool, and from when it may
 * vote (a master that has been up for less than the TTL may have lost
 * locks in a restart, and gets no vote until it has been up that long).
 *
 * Made once by the lock core from redlock.nodes; read-only afterwards
 * except each node's voting time and counters, which are guarded or
 * atomic. Thread safe. */
#ifndef INVENTORYD_REDLOCK_H
#define INVENTORYD_REDLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "lock.h"

struct redlock;

/* Parses spec ("host:port,host:port,...", 1 to LOCK_MAX_NODES masters) and
 * makes a pool per master with node_timeout_ms as connect and command
 * timeout; no connection is made yet. max_ttl_ms is the longest lease this
 * process uses. NULL with errstr set ("redlock.nodes: 'x' is not
 * host:port"). */
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
 * and withheld because it has been up for less than the TTL. */
void redlock_node_counts(const struct redlock *rl, int i, long long *yes, long long *busy,
                         long long *error, long long *restarted);

/* Whether a quorum of the masters can vote now: each is asked PING on a
 * connection of its pool (a new one reads its uptime, as for a sale), and
 * counts when it answers and the restart rule lets it vote. Returns 0 when
 * a quorum can, else -1 with why saying how many can, how many are needed,
 * and for each that cannot, why not and, when it is only too fresh, in how
 * long it may ("redis-6381:6381 votes in 6.2 s"). Costs one round trip per
 * master, one after another: for a readiness probe, not for sales. */
int redlock_ready(struct redlock *rl, char *why, size_t whylen);

/* ---- for lock_redlock.c: one round over the masters ----------------------- */

struct lock_link;

/* A round's state for one master. */
struct redlock_leg {
    redisContext *c;
    int skip; /* open, but not part of this round */
    int sent; /* the command was written */
    int down; /* refused or closed: the master is down, not slow */
    redisReply *reply; /* NULL when none came */
    int64_t sent_us, got_us;
};

/* Opens a connection to every master i with want[i]: from its pool, waiting
 * at most the node timeout, or from k when k is not NULL (the watchdog's
 * own). */
void redlock_legs_open(struct redlock *rl, struct redlock_leg *legs, const int *want,
                       struct lock_link *k);

/* Sends an embedded script with argv to every open leg, pipelined: appended
 * on every connection, every one flushed, then every reply read, so a round
 * costs one round trip, not N. A NOSCRIPT answer is run again by EVAL on
 * that master (it did not run there). */
void redlock_round(struct redlock *rl, struct redlock_leg *legs, const char *script, int numkeys,
                   int argc, const char **argv);

/* The same, calling sent(arg) once every leg is written, before any reply
 * is read (the lock core passes its gate on then: lock_gate_pass). */
void redlock_round_then(struct redlock *rl, struct redlock_leg *legs, const char *script,
                        int numkeys, int argc, const char **argv, void (*sent)(void *), void *arg);

/* Frees the replies and gives every connection back (a failed one is
 * dropped). */
void redlock_legs_close(struct redlock *rl, struct redlock_leg *legs, struct lock_link *k);

/* Whether master i may vote at now (monotonic). */
int redlock_may_vote(struct redlock *rl, int i, int64_t now);

/* The pool of master i. */
struct rpool *redlock_pool(struct redlock *rl, int i);

/* Counts a vote of master i (LOCK_VOTE_*). */
void redlock_count(struct redlock *rl, int i, int outcome);

#endif
