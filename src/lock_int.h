/* lock_int.h -- the inside of the lock core, for the files that implement
 * lock types (lock_<name>.c, lock_hash.c, redlock.c) and for the watchdog.
 * Not for callers of the core: they use lock.h.
 *
 * A type fills `struct lock_type`. Its acquire, release and report run on
 * the handle's thread and talk to Redis through the helpers below, which use
 * the handle's connection and keep the core's bookkeeping (attempts, send
 * times, lost replies, the holder's pipelined commands). Its renew and
 * abandon may run on the watchdog thread: they get their connections from
 * the struct lock_link they are given, and must not touch the handle's own
 * connection. */
#ifndef INVENTORYD_LOCK_INT_H
#define INVENTORYD_LOCK_INT_H

#include <stdatomic.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "lock.h"
#include "waitq.h"

struct pubsub;
struct watchdog;
struct wd_lane;

/* struct lock_type.flags */
#define LOCK_T_REDIS 1 /* the lock lives on the core's Redis, on the handle's connection */
#define LOCK_T_GATED 2 /* threads of one process queue FIFO in front of it (the gate) */
#define LOCK_T_WATCHED 4 /* renewed by the watchdog while held (needs renew) */
#define LOCK_T_LEASED 8 /* it expires: the lease is dated from the granting send */
#define LOCK_T_CHECKED                                                                             \
    16 /* the holder may not commit past its lease deadline, and its
                              write is refused in Redis when the lock is no longer its own */
#define LOCK_T_QUORUM 32 /* it lives on the Redlock masters, not on the core's Redis */
#define LOCK_T_UNHEEDED                                                                            \
    64 /* the watchdog dates its lease (renew looks whether it is still held)
                               but its holder never looks: a renewal that finds
                               it gone stops the lease and does not mark it lost
                               (Curator's mutex, MariaDB's GET_LOCK: the
                               session is the lease) */

/* A store a lock can live in beside the core's Redis (MySQL, ZooKeeper):
 * one file each fills one `const struct lock_store` and registers it in
 * stores.c; its lock types point at it (struct lock_type.store). The core
 * opens every configured store once (lock_core_init) and closes it at
 * shutdown; a type reaches what open() made through lock_store_state(). A
 * store brings its own connections and threads: it never borrows the
 * core's Redis pool, and the core checks "configured" before any acquire,
 * so a type's acquire always has its state. */
struct lock_store {
    const char *name; /* "mysql": in messages, and the fence key <lock>:fence:<name> */
    const char *setting; /* the key that configures it: "mysql.host" */
    /* Whether o configures it (its key is set). */
    int (*configured)(const struct lock_core_options *o);
    /* Its state from o; NULL with errstr set. Connects to nothing yet. */
    void *(*open)(const struct lock_core_options *o, char *errstr, size_t errlen);
    /* Whether it can serve locks now: 0, or -1 with why (readiness). */
    int (*ready)(void *state, char *why, size_t whylen);
    /* Frees the state; accepts NULL. Every handle has been freed. */
    void (*close)(void *state);
};

/* The stores, NULL-terminated (stores.c). */
extern const struct lock_store *const lock_stores[];
#define LOCK_STORES_MAX 8

extern const struct lock_store lock_store_zookeeper; /* lock_zookeeper.c */
extern const struct lock_store lock_store_mysql; /* lock_mysql.c */

/* The state l's store's open() made (NULL for a type that lives on Redis). */
void *lock_store_state(const struct lock *l);

/* The connections a background operation (renew, abandon) may use: on the
 * watchdog thread its own, on a handle's thread fresh pooled ones. */
struct lock_link {
    /* A connection to pool's server, or NULL with errstr set. */
    redisContext *(*get)(struct lock_link *k, struct rpool *pool);
    /* Done with c (dropped when c->err is set). */
    void (*put)(struct lock_link *k, struct rpool *pool, redisContext *c);
    void *ctx;
    char errstr[128];
};

struct lock_type {
    const char *name;
    const char *family; /* see lock_type_family() */
    int flags; /* LOCK_T_* */
    const struct lock_store *store; /* where it lives when not on Redis; NULL: Redis (or nowhere) */
    size_t priv_size; /* bytes of per-handle state, zeroed, at l->priv */
    /* Takes the lock for l->owner, trying until l->deadline_us (monotonic).
     * Counts every try in l->attempts. Returns LOCK_OK (first hold or
     * re-entry), LOCK_BUSY, or LOCK_ERR (l->errstr; l->unknown set when
     * something was sent whose reply was lost). */
    int (*acquire)(struct lock *l);
    /* Gives back one hold: LOCK_OK, LOCK_LOST (not ours any more), LOCK_ERR. */
    int (*release)(struct lock *l);
    /* Resets the lease of a held lock (LOCK_T_WATCHED), or for a store
     * whose session is the lease looks that it is still held (the look's
     * send dates the lease): LOCK_OK, LOCK_LOST (it is gone), LOCK_ERR (not
     * reached; try again). Watchdog thread. */
    int (*renew)(struct lock *l, struct lock_link *k);
    /* Gives up every hold of l->owner, checked against the owner, after an
     * unknown outcome: LOCK_OK (done, or nothing was ours), LOCK_ERR (not
     * reached; the core retries). NULL for types with nothing in Redis:
     * the core then calls release once per hold. Any thread. */
    int (*abandon)(struct lock *l, struct lock_link *k);
    /* Adds the type's own figures (token, depth, votes); may be NULL. */
    void (*report)(const struct lock *l, struct lock_report *r);
    /* Says how a script on the lock's server finds the owner (g->kind and
     * g->field); NULL when no script beside the stock can (the lock lives
     * elsewhere, or nowhere). */
    void (*guard)(const struct lock *l, struct lock_guard *g);
    /* Fills h when the holder's write may hand the lock on (see
     * lock_handover); NULL for the types that hand nothing on. */
    void (*handover)(const struct lock *l, struct lock_handover *h);
    /* Appends the type's own arguments to the script that will end the
     * hold (lock_append_release), at most max, into argv; they must stay
     * valid until lock_release has read its answer. Returns how many, or
     * -1 (the script is not appended). May be NULL. */
    int (*release_args)(struct lock *l, const char **argv, int max);
    /* Called with the answer of the script that ended the hold (see
     * lock_append_release), for what it says to the type (handoff: a
     * grant to hand over in-process, the riders it queued); and with NULL
     * whenever what the script did is not known: the core gives the
     * handle's holds up (the answer, if any, is lost), or the answer was
     * an error not the script's own (it was refused, or stopped partway).
     * May be NULL. */
    void (*handed)(struct lock *l, const redisReply *answer);
    /* Fault injection, for the types whose lease is a session of their
     * store: ends the session of l's hold from outside, as the server
     * expiring it or an operator killing it would, while the holder goes
     * on as if it held the lock; returns once the session is seen gone
     * (the lock free for the next holder). LOCK_OK, or LOCK_ERR with why
     * set (the session could not be ended, or was not seen gone in time).
     * On the handle's thread, while held. NULL for the others (lock.h,
     * lock_end_session). */
    int (*end_session)(struct lock *l, char *why, size_t whylen);
};

struct lock_core {
    struct rpool *pool;
    int pool_wait_ms;
    struct redlock *redlock;
    struct pubsub *pubsub;
    struct watchdog *watchdog;
    struct waitq *gates;
    void *stores[LOCK_STORES_MAX]; /* each configured store's state, by its index in lock_stores */
    int ttl_ms, wait_ms, spin_sleep_ms, retry_depth, sync_replicas;
};

#define LOCK_PIPE_MAX 8
#define LOCK_CLEANUP_MAX 4

struct lock {
    const struct lock_type *type;
    struct lock_core *core;
    void *priv; /* type->priv_size bytes */
    char key[192];
    char owner[64];
    redisContext *c; /* the handle's connection, or NULL */
    int64_t deadline_us; /* of the acquire in progress */
    int wait_ms; /* the longest acquire wait: lock.wait-ms, or lock_set_wait's */
    int release_delay_ms; /* fault: see lock_set_release_delay */
    int lease_ms; /* the lease's length when it is not lock.ttl-ms (a store
                     session's timeout, set by the type's acquire); 0: ttl */
    int holds;
    int unknown; /* the last command's reply was lost */
    int orphaned; /* its holds could not be given up: the watchdog retries */
    int64_t sent_us; /* when the last command was sent */

    struct waitq_node gate; /* its place in the gate */
    int gated; /* it holds the gate */
    int gate_at_send; /* the command being sent ends the last hold: the gate
                         passes on once it is written, not once answered */

    int64_t acquired_us; /* when the outermost acquire returned */
    int64_t released_us; /* when the last release was sent (before a local
                            unlock lets the next holder in), 0 while held */
    int64_t granted_wall_us;
    atomic_llong lease_until_us; /* 0: no lease; written by the watchdog too */
    atomic_int lost; /* a renewal found the lock gone */
    atomic_int renewals;

    int watching; /* handed to the watchdog, not taken back yet */

    /* The watchdog's, under its mutex. */
    struct wd_lane *wd_lane; /* the lane renewing or retrying it */
    struct lock *wd_next;
    int64_t wd_due_us;
    int wd_busy; /* a renewal of it is in flight */
    int64_t wd_giveup_us; /* orphaned: stop retrying after this */

    /* The carried key (lock_carry) and the value the grant handed over. */
    char carry_key[128];
    int carried; /* 0: none; 1: carried_value; 2: the key did not exist */
    char carried_value[64];
    /* The string and hash types: the next command is a try that a GET of
     * the carried key rides behind (lock_carry_try), and that GET's reply
     * until the try's outcome is known. */
    int carry_try;
    redisReply *carry_reply;

    /* The holder's pipeline (lock_append) and cleanups (lock_cleanup). */
    int releasing; /* 1 + the reply index of an appended script that
                                    ends the hold (lock_append_release); 0: none */
    const char *const *release_own; /* the first words of that script's own errors */
    int npending; /* appended, reply not read yet */
    int nreplies;
    redisReply *replies[LOCK_PIPE_MAX];
    int ncleanup;
    char *cleanup[LOCK_CLEANUP_MAX]; /* formatted commands */
    size_t cleanup_len[LOCK_CLEANUP_MAX];

    int attempts;
    int64_t wait_us;
    int replicas_wanted, replicas_acked;
    char errstr[256]; /* room for a pool error naming every sentinel */
    /* The pool of the key's server: the core's, or in cluster mode that of
     * the master owning the key's slot when the handle was made, or the one
     * a refusal sent it to since (written by the handle's thread, read by
     * the watchdog's too). */
    _Atomic(struct rpool *) pool;
};

/* ---- helpers for lock types, on the handle's thread ---------------------- */

/* Makes sure l->c is a live connection for a try. LOCK_OK; LOCK_BUSY when
 * the pool stayed busy (the try may be repeated until the deadline);
 * LOCK_ERR when Redis cannot be reached (l->errstr). */
int lock_try_conn(struct lock *l);

/* Runs a command on l->c (taken if needed), after whatever the holder has
 * pipelined. NULL on failure with l->errstr set, and l->unknown set when
 * the command was sent but its reply lost. */
redisReply *lock_command(struct lock *l, const char *fmt, ...);

/* Runs an embedded script on l->c the same way. */
redisReply *lock_script(struct lock *l, const char *name, int numkeys, int argc, const char **argv);

/* The next lock_command or lock_script is a try for the lock: unless the
 * handle already holds it, or is in cluster mode (the lock's key and the
 * carried one may be on two masters, and move one by one), a GET of the
 * carried key (lock_carry) goes out right behind it in the same write, and
 * is read after it: were the try's reply or the GET's lost, the command
 * answers NULL with l->unknown set. Then lock_carry_end(l, granted): a
 * granted try hands its GET's reply to the hold (lock_carried), so the
 * holder's critical section needs no read of its own; another drops it. */
void lock_carry_try(struct lock *l);
void lock_carry_end(struct lock *l, int granted);

/* Sets l->errstr from reply (an error reply) or l->c; returns LOCK_ERR.
 * Either may be NULL. */
int lock_fail(struct lock *l, const redisReply *reply, const char *what);

/* The command that ends l's last hold has been written (not answered yet):
 * a gated lock passes its gate on now, so the next thread's try goes out
 * behind it. Does nothing otherwise. Takes a struct lock *. */
void lock_gate_pass(void *l);

/* Gives l->c back to the pool: a waiter holds no connection. */
void lock_park(struct lock *l);

/* Parks, then sleeps spin_sleep_ms or until the deadline. 0 when there is
 * time left for another try, -1 once the deadline has passed. */
int lock_backoff(struct lock *l);

/* Calls try_once until it returns something other than LOCK_BUSY, with
 * lock_backoff() between tries. LOCK_BUSY once the deadline has passed. */
int lock_poll(struct lock *l, int (*try_once)(struct lock *));

/* Sleeps the release-delay fault. */
void lock_release_pause(struct lock *l);

/* One SET key owner NX [PX ttl] (ttl_ms 0: no expiry). Counts an attempt.
 * LOCK_OK, LOCK_BUSY or LOCK_ERR. */
int lock_set_nx(struct lock *l, int ttl_ms);

/* The acquire of the leased string locks (expiring, owner-lua,
 * owner-check): SET key owner NX PX lease, polled with lock_poll(). */
int lock_string_acquire(struct lock *l);

/* DEL key, unconditionally. LOCK_OK when a key was deleted, LOCK_LOST when
 * there was none, LOCK_ERR. */
int lock_del(struct lock *l);

/* Compare-and-delete of a string lock (unlock-owner.lua) on l->c: LOCK_OK,
 * LOCK_LOST (not ours), LOCK_ERR. */
int lock_del_owned(struct lock *l);

/* The abandon of every string lock: compare-and-delete on a link. */
int lock_string_abandon(struct lock *l, struct lock_link *k);

/* The guard of the string locks (the key's value is the owner id) and of
 * the hash locks (the owner id is a field of the hash). */
void lock_string_guard(const struct lock *l, struct lock_guard *g);
void lock_hash_guard(const struct lock *l, struct lock_guard *g);

/* The table of a type whose lock is a string key holding the owner id (the
 * SET NX steps of the ladder, setnx-retry to fenced): the family's abandon
 * (compare-and-delete) and guard (GET) go with the key's layout, so a step
 * names only what it changes: flags beyond LOCK_T_REDIS, acquire, release,
 * and its own state and report (0 and NULL when it has none). */
#define LOCK_STRING_TYPE(name_, flags_, acquire_, release_, priv_size_, report_)                   \
    {                                                                                              \
        .name = (name_), .family = "redis", .flags = LOCK_T_REDIS | (flags_),                      \
        .priv_size = (priv_size_), .acquire = (acquire_), .release = (release_),                   \
        .abandon = lock_string_abandon, .report = (report_), .guard = lock_string_guard,           \
    }

/* Runs an abandon script (one that answers an integer) on a link:
 * LOCK_OK, or LOCK_ERR with k->errstr set. */
int lock_link_abandon(struct lock *l, struct lock_link *k, const char *name, int numkeys, int argc,
                      const char **argv);

/* Runs a script that answers 1 when the lock was still l->owner's (a
 * renewal) on a link: LOCK_OK, LOCK_LOST (another integer), or LOCK_ERR
 * with k->errstr set. */
int lock_link_owned(struct lock *l, struct lock_link *k, const char *name, int numkeys, int argc,
                    const char **argv);

/* Runs an embedded script on a connection of k to l's server (any thread)
 * and gives the connection back. NULL with k->errstr set when there was no
 * connection or no reply; an error reply's text is in k->errstr too. */
redisReply *lock_link_script(struct lock *l, struct lock_link *k, const char *name, int numkeys,
                             int argc, const char **argv);

/* The lease in ms (lock.ttl-ms, or the store session's timeout), and its
 * safety margin: TTL/100 + 2 ms. Inline, so that the watchdog reads them
 * without calling into lock.c. */
static inline int lock_lease_ms(const struct lock *l) {
    return l->lease_ms > 0 ? l->lease_ms : l->core->ttl_ms;
}
static inline int64_t lock_margin_us(int ttl_ms) { return ((int64_t)ttl_ms / 100 + 2) * 1000; }

#endif
