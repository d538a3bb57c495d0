/* lock.h -- the lock core: one contract, one table of functions per strategy.
 *
 * DESIGN
 * Each strategy is one file (lock_<name>.c) that fills one
 * `const struct lock_type`, the way Redis's socket.c fills CT_Socket. The
 * registry, lock_types[], is a fixed array built at compile time; it is never
 * changed at run time, so it may be read from any thread.
 *
 * A sale makes one `struct lock` handle on its stack with lock_init(), calls
 * lock_acquire(), does its work, and calls lock_release(). The handle is not
 * thread safe: it belongs to the thread that runs the sale, like the
 * redisContext it borrows. Calling lock_acquire() again on a held handle is a
 * nested acquire by the same owner: reentrant strategies count it, the others
 * block on themselves until the wait limit (that is their flaw).
 *
 * The owner id follows the demo: 32 hex digits of a uuid made once per
 * process, ":" and the thread id, so two threads of one process are two
 * owners and a nested acquire on one thread is the same owner.
 *
 * This file knows nothing of inventory: a strategy guards a named key. */
#ifndef INVENTORYD_LOCK_H
#define INVENTORYD_LOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <hiredis/hiredis.h>

struct rpool;
struct redlock;

/* Results of acquire, release and renew. Busy is not broken: HTTP answers
 * the first with 503 lock_timeout and the second with 503
 * backend_unavailable. */
#define LOCK_OK 0
#define LOCK_BUSY 1     /* still held by someone else when the wait ran out */
#define LOCK_LOST 2     /* release or renew found the lock no longer ours */
#define LOCK_ERR -1     /* Redis failed or answered nonsense; see errstr */

/* lock_type.flags */
#define LOCK_F_NONE 0
#define LOCK_F_ATOMIC 1   /* no lock at all: the caller must do its work as
                             one server-side script (the `atomic` strategy) */
#define LOCK_F_REDIS 2    /* the lock lives in Redis and needs lock->c */
#define LOCK_F_FENCED 4   /* acquire sets lock->token; the caller's write must
                             be refused when a newer token was issued */
#define LOCK_F_MULTI 8    /* the lock lives on several independent masters
                             (Redlock); renew() uses connections of its own */
#define LOCK_F_BATCH 16   /* the caller may serve every sale queued in its
                             process under one hold (the batched strategy) */
#define LOCK_F_GATED 32   /* threads of one process queue FIFO in front of
                             the lock, so only one of them contends in Redis */

#define LOCK_MAX_NODES 9

/* One master's answer to the last acquire round (Redlock). */
struct lock_vote {
    int node;                  /* index in the configured masters */
    int outcome;               /* LOCK_VOTE_* */
    int us;                    /* round-trip time seen for it */
};
#define LOCK_VOTE_YES 1        /* granted (or re-entered) */
#define LOCK_VOTE_BUSY 0       /* held by another owner */
#define LOCK_VOTE_ERROR -1     /* unreachable, timed out or failed */
#define LOCK_VOTE_RESTARTED -2 /* restarted within the TTL: no vote yet */

/* Settings shared by every handle; filled at start-up, read-only after. */
struct lock_env {
    struct rpool *pool;  /* for background work (renewal, pub/sub) */
    struct redlock *redlock;  /* the independent masters, or NULL */
    int ttl_ms;          /* lock.ttl-ms: expiry of lock keys */
    int wait_ms;         /* lock.wait-ms: longest acquire wait; 0 = one try */
    int spin_sleep_ms;   /* lock.spin-sleep-ms: sleep between polls */
    int retry_depth;     /* lock.retry-max-depth: setnx-retry's recursion cap */
    int sync_replicas;   /* lock.sync-replicas: WAIT for this many replicas
                            after a LOCK_F_REDIS acquire; 0 = off */
};

struct lock;

struct lock_type {
    const char *name;          /* URL segment, e.g. "owner-lua" */
    const char *description;   /* the step it reproduces, one line */
    const char *flaw;          /* the flaw it can show, one line */
    int flags;                 /* LOCK_F_* */
    /* Takes the lock for l->owner, polling or waiting until l->deadline_us
     * (monotonic). Counts every try in l->attempts. Returns LOCK_OK,
     * LOCK_BUSY or LOCK_ERR (with l->errstr). */
    int (*acquire)(struct lock *l);
    /* Gives back one hold. Returns LOCK_OK, LOCK_LOST when the lock was
     * no longer ours, or LOCK_ERR. */
    int (*release)(struct lock *l);
    /* Extends the expiry of a held lock; NULL where there is none to extend. */
    int (*renew)(struct lock *l);
};

struct lock {
    const struct lock_type *type;
    const struct lock_env *env;
    redisContext *c;           /* the sale's connection, borrowed, or NULL */
    char key[192];             /* lock name in Redis */
    char owner[64];            /* "<32 hex>:<thread id>" */
    int64_t deadline_us;       /* set by lock_acquire from env->wait_ms */
    int release_delay_ms;      /* fault: pause between check and delete */

    /* What the last acquires did, reported in the sale answer. */
    int attempts;              /* tries sent to Redis (or mutex tries) */
    int64_t wait_us;           /* total time spent in acquire */
    int depth;                 /* setnx-retry: deepest recursion reached */
    int holds;                 /* acquires not yet released */
    int gated;                 /* it holds its place at the head of the gate */
    int64_t acquired_us;       /* when the outermost hold began */
    long long token;           /* fencing token, when the strategy gives one */
    int nvotes;                /* Redlock: the last round's votes */
    struct lock_vote votes[LOCK_MAX_NODES];
    int replicas_wanted;       /* lock.sync-replicas, once WAIT was sent */
    int replicas_acked;        /* replicas WAIT saw acknowledge the acquire */

    /* Written by the watchdog thread while the lock is watched. */
    atomic_int lost;           /* a renewal found the lock gone: do not commit */
    atomic_int renewals;       /* renewals that succeeded */
    struct lock *wd_next;      /* watchdog list link, guarded by its mutex */
    int64_t wd_due_us;         /* next renewal */
    int64_t wd_renewed_us;     /* last successful renewal (or acquire) */

    char errstr[128];
};

/* The registry: every strategy, in ladder order, NULL-terminated. */
extern const struct lock_type *const lock_types[];

/* The two halves of Redisson's RReadWriteLock (lock_rwlock.c). They are not
 * sale strategies and are not in lock_types[]. */
extern const struct lock_type lock_type_rw_read;
extern const struct lock_type lock_type_rw_write;

/* The lock a sale by t takes when readers take the read lock: the write
 * lock for the redisson strategy, t itself for every other. */
const struct lock_type *lock_type_writer(const struct lock_type *t);

/* The strategy called name, or NULL. */
const struct lock_type *lock_type_find(const char *name);

/* The position of t in lock_types[] (for per-strategy metrics), or -1. */
int lock_type_index(const struct lock_type *t);

/* Number of strategies in lock_types[]. */
int lock_type_count(void);

/* Writes the names of every strategy, comma-separated, into buf. */
void lock_type_names(char *buf, size_t len);

/* This thread's owner id, "<32 hex>:<tid>", into buf (at least 64 bytes). */
void lock_owner_id(char *buf, size_t len);

/* Prepares a handle guarding `key` with connection c (may be NULL for
 * strategies without LOCK_F_REDIS). Never fails. */
void lock_init(struct lock *l, const struct lock_type *t,
               const struct lock_env *env, redisContext *c, const char *key);

/* Acquires, waiting at most env->wait_ms. Adds to l->attempts and l->wait_us.
 * Returns LOCK_OK, LOCK_BUSY or LOCK_ERR.
 * With env->sync_replicas > 0, the outermost acquire of a LOCK_F_REDIS
 * strategy (not Redlock) is followed by `WAIT sync_replicas timeout` on l->c,
 * timeout being the pool's (redis.timeout), as Redisson checks synced
 * replicas: l->replicas_wanted and l->replicas_acked say how it went, and
 * the time counts in l->wait_us. A shortfall, or a failed WAIT (l->c->err
 * then tells), is reported there and does not undo the acquire: LOCK_OK is
 * returned and the lock is held. */
int lock_acquire(struct lock *l);

/* Releases one hold. Returns LOCK_OK, LOCK_LOST or LOCK_ERR. Releasing a
 * handle that holds nothing returns LOCK_OK and sends nothing. */
int lock_release(struct lock *l);

/* Renews a held lock; LOCK_OK where the strategy has nothing to renew. */
int lock_renew(struct lock *l);

/* Drops every hold of l in this process only (the gate, the watchdog),
 * without a word to Redis: for a release that cannot be sent. The lock in
 * Redis then ends with its lease. */
void lock_forget(struct lock *l);

/* True when the lock is known to be lost (a renewal failed, or the watchdog
 * saw it expire): the caller must not commit work done under it. */
int lock_is_lost(const struct lock *l);

/* Helpers for strategy files. */

/* Sets l->errstr from c->errstr, or from a reply of type error, and returns
 * LOCK_ERR. Either reply or c may be NULL. */
int lock_fail(struct lock *l, const redisReply *reply, const char *what);

/* Sleeps spin_sleep_ms, or less when the deadline is nearer. Returns 0 if
 * the deadline has not passed yet (try again), -1 if it has. */
int lock_backoff(struct lock *l);

/* Calls try_once until it returns something other than LOCK_BUSY, sleeping
 * with lock_backoff() in between: the demo's spin. Returns LOCK_BUSY once the
 * deadline has passed. */
int lock_poll(struct lock *l, int (*try_once)(struct lock *));

/* One SET key owner NX [PX ttl] (ttl_ms 0: no expiry, the demo's SETNX).
 * Counts an attempt. Returns LOCK_OK, LOCK_BUSY or LOCK_ERR. */
int lock_set_nx(struct lock *l, int ttl_ms);

/* DEL key, unconditionally (the early steps' release). LOCK_OK when a key was
 * deleted, LOCK_LOST when there was none, LOCK_ERR. */
int lock_del(struct lock *l);

/* Runs an embedded script on l->c; NULL with l->errstr set on I/O error. */
redisReply *lock_script(struct lock *l, const char *name, int numkeys, int argc,
                        const char **argv);

/* Stops the background threads of the lock core (watchdog, subscriber) and
 * frees what they hold. Call before freeing the pool given in lock_env. */
void lock_core_shutdown(void);

#endif
