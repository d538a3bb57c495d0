/* lock.h -- the lock core: lock types behind one contract, and the handles
 * that hold them.
 *
 * DESIGN
 * A lock type (one file each, lock_<name>.c, filling one
 * `const struct lock_type`, the way Redis's socket.c fills CT_Socket) only
 * acquires, releases, renews and reports. Everything the types share is done
 * here, once: the FIFO gate in front of a lock, the lease and its deadline,
 * renewal by the watchdog, the owner id, the connection a holder uses, and
 * what to do when a reply is lost. The core knows nothing of inventory: a
 * lock guards a named key.
 *
 * The core (struct lock_core) is made once by lock_core_init() and owns: the
 * binding to the Redis pool the single-master locks live on, the Redlock
 * masters, the pub/sub hubs that wake waiters, the gates, and the watchdog
 * thread with connections of its own. lock_core_shutdown() stops and frees
 * all of it.
 *
 * A holder makes one handle per sale (lock_new), acquires it (again for a
 * nested hold: re-entry is through the handle, whose owner id is its own,
 * "<32 hex of this process's uuid>:<handle number>"), does its work, and
 * frees it (lock_free releases whatever is still held). A handle belongs to
 * one thread at a time: not thread safe.
 *
 * Connections. A handle takes a pooled connection only to use it: for a try,
 * and from a successful acquire to its release. The holder's own commands
 * go on that connection too, but only through the handle (lock_append,
 * lock_flush, lock_run_script, lock_reply): the connection never leaves
 * the core, so what was sent on it, and whether a reply was lost, is known
 * here. While it waits (in the gate, between polls, for an unlock message)
 * it holds none. Background work (renewal, retries)
 * runs on the watchdog's own connections, never on pooled ones.
 *
 * Leases. A lease is dated from when the command that granted or renewed it
 * was SENT, not from when its reply came: lease deadline = send time + TTL -
 * (TTL/100 + 2 ms). lock_check() says whether the holder may still commit:
 * not when a renewal found the lock gone, nor, for the types that enforce
 * it, once the deadline has passed.
 *
 * Lost replies. A command whose reply was lost (a time-out, a dropped
 * connection) is taken to have run. After such a loss on acquire or release
 * the core gives up every hold of the handle's owner with a release checked
 * against the owner, on a fresh connection, preceded by the holder's
 * cleanup commands (lock_cleanup); if that too fails, the watchdog thread
 * retries it until it succeeds or the lock's lease is over. An acquire is
 * never re-sent blindly.
 *
 * Pipelining. Commands the holder appends (lock_append) and its cleanup
 * commands go out in the same write as the release, ahead of it, so a sale's
 * write, its probe exit and its history event cost no round trip of their
 * own; their replies are read back with lock_reply(). What the holder needs
 * answered while it holds (a sale's probe entry and its stock read) goes
 * out with lock_flush: what was appended, in one write.
 *
 * Handing on. A type may hand its lock straight to the next waiter
 * (handoff): then the holder's write may itself end the hold, in the same
 * script that checks the lease and writes (lock_handover names what that
 * script needs; lock_append_release appends it, after the cleanups), and
 * the release sends no command of its own. Such a type may also carry a
 * value with the lock (lock_carry): each grant hands the next holder the
 * value of one key as it was when granted, so the holder reads nothing.
 * The string and hash types carry it too: a GET of the key rides right
 * behind each try, in the same write, and a granted try hands its value
 * to the hold (not in cluster mode, where the two keys may be on two
 * masters). */
#ifndef INVENTORYD_LOCK_H
#define INVENTORYD_LOCK_H

#include <stddef.h>
#include <stdint.h>

struct redisReply; /* hiredis's, for lock_reply: callers that read one include hiredis */
struct rpool;
struct redlock;
struct lock;
struct lock_core;
struct lock_type;

/* Results. Busy is not broken: HTTP answers the first with 503
 * lock_timeout and the last with 503 backend_unavailable. */
#define LOCK_OK 0
#define LOCK_BUSY 1 /* still held by someone else when the wait ran out */
#define LOCK_LOST 2 /* the lock is no longer ours (expired, taken, renewal failed) */
#define LOCK_ERR -1 /* Redis failed or answered nonsense; see lock_errstr() */

#define LOCK_MAX_NODES 9

/* A master's answer in the last acquire round (Redlock). */
#define LOCK_VOTE_YES 1 /* granted (or re-entered) */
#define LOCK_VOTE_BUSY 0 /* held by another owner */
#define LOCK_VOTE_ERROR -1 /* unreachable, timed out or failed */
#define LOCK_VOTE_RESTARTED -2 /* restarted within the TTL: no vote yet */

/* "yes", "busy", "error", "restarted"; "?" for anything else. */
const char *lock_vote_word(int outcome);

/* How a hold of a type that hands on was granted (lock_report.granted_by). */
#define LOCK_GRANT_FREE 1 /* its own acquire found it free (or re-entered it) */
#define LOCK_GRANT_HANDED 2 /* handed over by the holder before it */
#define LOCK_GRANT_CHECKED 3 /* found by its own re-check: a lease ran out, a grant was missed */
#define LOCK_GRANTS 4

/* "free", "handed", "checked"; "" for 0. */
const char *lock_grant_word(int granted_by);

struct lock_core_options {
    struct rpool *pool; /* where single-master locks live; borrowed */
    int pool_wait_ms; /* longest wait for a pooled connection (redis.timeout) */
    const char *redlock_nodes; /* "host:port,..." of the Redlock masters; NULL or "": none */
    const char *redlock_password;
    int redlock_node_timeout_ms;
    int redlock_pool_size;
    int ttl_ms; /* lock.ttl-ms: the lease */
    int wait_ms; /* lock.wait-ms: longest acquire wait; 0 = one try */
    int spin_sleep_ms; /* lock.spin-sleep-ms: sleep between polls */
    int retry_depth; /* lock.retry-max-depth: setnx-retry's recursion cap */
    int sync_replicas; /* lock.sync-replicas: WAIT after a single-master acquire */
    /* The stores beyond Redis (lock_int.h, struct lock_store); a store
     * whose key is empty is not configured, and its types answer LOCK_ERR
     * naming that key. */
    const char *zookeeper_connect; /* zookeeper.connect: "host:port,..." */
    int zookeeper_session_timeout_ms;
    const char *mysql_host; /* mysql.host: a name, an address, or a socket path */
    int mysql_port;
    const char *mysql_user;
    const char *mysql_password;
    const char *mysql_database;
};

/* Makes the core: connects to nothing yet, starts the watchdog thread.
 * NULL with errstr set ("redlock.nodes: 'x' is not host:port", "out of
 * memory"). */
struct lock_core *lock_core_init(const struct lock_core_options *o, char *errstr, size_t errlen);

/* Stops the watchdog (after one last try of any pending compensation) and
 * the subscribers, frees the Redlock masters and the core. Every handle must
 * have been freed. Accepts NULL. Call before freeing the pool. */
void lock_core_shutdown(struct lock_core *core);

/* Whether locks of type t can be served now, beyond the core's own Redis
 * (which the caller checks): a type that lives on the Redlock masters needs
 * a quorum of them answering and allowed to vote (the restart rule: a master
 * up for less than the lease votes only once it has been up that long, so a
 * fresh deployment waits one lease); a type that lives in another store
 * (MySQL, ZooKeeper) needs that store to answer. Every other type is ready.
 * Returns 0; 1 when t's store is not configured at all (not part of this
 * deployment: why names the key); or -1 with why saying what is missing.
 * For a readiness probe: it asks every master, one after another. */
int lock_type_ready(struct lock_core *core, const struct lock_type *t, char *why, size_t whylen);

/* Whether t can be used at all here: 1, or 0 when it lives in a store that
 * is not configured, with why naming the missing key ("mysql.host is not
 * configured"). Cheap: asks nothing of any server. */
int lock_type_configured(const struct lock_core *core, const struct lock_type *t, char *why,
                         size_t whylen);

/* Where locks of type t live, for messages: "Redis", or the store's name
 * ("mysql", "zookeeper"). */
const char *lock_type_store(const struct lock_type *t);

/* The Redlock masters (for metrics), or NULL when none are configured. */
const struct redlock *lock_core_redlock(const struct lock_core *core);

/* What one of the watchdog's lanes did (watchdog.h): one lane per Redis
 * server the core's watched locks live on, one for the Redlock masters,
 * and one per other store (its renewals only look: see LOCK_T_UNHEEDED). */
struct lock_lane_stats {
    char name[64]; /* "host:port" of its server, the Sentinel master's name, "redlock",
                      or the store's name ("zookeeper") */
    long long renewed; /* renewals that found the lock and reset its lease */
    long long lost; /* renewals that found it gone, or came after its lease */
    long long unreached; /* renewals that could not reach the server (tried again) */
    long long retries; /* compensations tried for holds that could not be given up */
    int64_t longest_us; /* the longest renewal seen, from its send to its outcome */
};

/* Fills out[] with up to max lanes' figures; returns how many. */
int lock_core_lanes(struct lock_core *core, struct lock_lane_stats *out, int max);

/* The lock types. */
extern const struct lock_type lock_type_none; /* no lock at all */
extern const struct lock_type lock_type_local; /* a pthread mutex in this process */
extern const struct lock_type lock_type_setnx_retry; /* SETNX, retried by recursion */
extern const struct lock_type lock_type_setnx_spin; /* SETNX in a loop */
extern const struct lock_type lock_type_expiring; /* SET NX PX, released by DEL */
extern const struct lock_type lock_type_owner_check; /* released by GET, then DEL */
extern const struct lock_type lock_type_owner_lua; /* released by compare-and-delete */
extern const struct lock_type lock_type_reentrant; /* Redisson's hash lock, not renewed */
extern const struct lock_type lock_type_watchdog; /* the hash lock, renewed while held */
extern const struct lock_type lock_type_redisson; /* renewed, waiters woken by pub/sub */
extern const struct lock_type lock_type_redlock; /* the hash lock on a quorum of masters */
extern const struct lock_type lock_type_fenced; /* SET NX PX and a fencing token */
extern const struct lock_type lock_type_handoff; /* a FIFO queue in Redis, handed on by grant */
extern const struct lock_type lock_type_rw_read; /* Redisson's RReadWriteLock, read half */
extern const struct lock_type lock_type_rw_write; /* and write half, renewed while held */
extern const struct lock_type lock_type_zookeeper; /* Curator's mutex on ZooKeeper */
extern const struct lock_type lock_type_zookeeper_fenced; /* and its czxid as the token */
extern const struct lock_type lock_type_mysql; /* MariaDB's GET_LOCK on a session of its own */
extern const struct lock_type lock_type_mysql_fenced; /* the same, with a durable counter */

/* The type's name ("redisson") and family: types of one family exclude each
 * other on one key; two families on one stock do not ("string", "hash",
 * "rw", "redlock", "local", "none"). */
const char *lock_type_name(const struct lock_type *t);
const char *lock_type_family(const struct lock_type *t);

/* A new handle of type t guarding key, with an owner id of its own. NULL
 * when out of memory. */
struct lock *lock_new(struct lock_core *core, const struct lock_type *t, const char *key);

/* Releases whatever l still holds (see lock_release), gives back its
 * connection and frees it. Accepts NULL. */
void lock_free(struct lock *l);

/* Acquires, waiting at most lock.wait-ms from now. Returns LOCK_OK,
 * LOCK_BUSY (with the reason in lock_errstr), or LOCK_ERR. After LOCK_ERR
 * nothing is held: if the outcome of what was sent is unknown, the core has
 * already given it up (see above). With sync_replicas > 0, the outermost
 * acquire of a single-master type is followed by WAIT; a shortfall is
 * reported (lock_report) and does not undo the acquire. */
int lock_acquire(struct lock *l);

/* Releases one hold. Commands appended by the holder, and its cleanup
 * commands, are sent first, in the same write when the lock lives on the
 * holder's connection. Returns LOCK_OK, LOCK_LOST (the lock was no longer
 * ours), or LOCK_ERR (after which every hold is given up, as above).
 * Releasing a handle that holds nothing sends only what was appended. */
int lock_release(struct lock *l);

/* The type of l. */
const struct lock_type *lock_type_of(const struct lock *l);

/* Holds not yet released. */
int lock_holds(const struct lock *l);

/* Whether the holder may commit now: LOCK_OK, or LOCK_LOST when the lock
 * is not held, a renewal found it gone, or (for types that enforce their
 * lease) the lease deadline has passed. */
int lock_check(struct lock *l);

/* The commit point, called right before the holder appends its write:
 * stops renewing the lock (waiting for a renewal of it in flight, and only
 * for that one), then answers as lock_check does. After it the lease is no
 * longer renewed, so the write must go out at once, with the release. A
 * lock whose renewals only look and date its lease (a ZooKeeper or MariaDB
 * session: LOCK_T_UNHEEDED) is looked at until its release, so that a write
 * slowed in Redis is still dated inside the session that really held it
 * (and a MariaDB session is kept alive while the write waits). */
int lock_commit_check(struct lock *l);

/* How Redis itself can tell, inside the script that writes, whether the
 * lock is still the holder's: the write is then conditional in Redis, and a
 * holder stalled between its last check and its write cannot write once
 * its lock has gone. */
struct lock_guard {
    const char *kind; /* "string": the key's value is the owner; "hash": the owner is
                              a field of the hash; "": no script beside the stock can tell
                              (the lock lives on other servers, or nowhere) */
    const char *key; /* the lock's key */
    char field[96]; /* the value or field that names the owner */
    int enforce; /* refuse the write when the lock is not the holder's: the types
                              that enforce their lease do, the ladder's flawed steps only
                              record it */
};

/* Fills g for l. */
void lock_guard(const struct lock *l, struct lock_guard *g);

/* The Redis key where the newest fencing token of l's lock is kept:
 * "<key>:fence" for a lock on Redis (fenced-lock.lua counts there), and
 * "<key>:fence:<store>" for a lock whose tokens come from another store
 * (the write records the newest it has seen). */
void lock_fence_key(const struct lock *l, char *buf, size_t len);

/* True when the lease deadline of a held lease has passed (whatever the
 * type enforces); 0 for locks without a lease. */
int lock_lease_passed(const struct lock *l);

/* Makes sure the holder has its connection to the core's Redis: the
 * handle's own, taken from the pool when it has none (waiting at most
 * redis.timeout). 0, or -1 with lock_errstr set when none could be had.
 * For a holder that wants to know it can reach Redis before it appends:
 * the holder's commands go on that connection only through the calls
 * below, and it never sees the connection itself. */
int lock_connect(struct lock *l);

/* Appends a command to the holder's connection, to be sent with the next
 * release (or lock_flush). Returns its reply index i, for lock_reply(l, i):
 * every command of the handle whose reply it keeps (appended here, run by
 * lock_run_script, or appended by lock_append_release, the cleanups it
 * appends included) counts, from 0, in the order they were added. -1
 * with lock_errstr set (no connection, out of room: at most 8, out of
 * memory). Never resent: a lost reply leaves lock_reply NULL. */
int lock_append(struct lock *l, int argc, const char **argv, const size_t *argvlen);

/* As lock_append, for an embedded script run by EVALSHA. A NOSCRIPT reply
 * (the script did not run) is the holder's to handle, with
 * lock_run_script. */
int lock_append_script(struct lock *l, const char *name, int numkeys, int argc, const char **argv,
                       const size_t *argvlen);

/* Runs an embedded script now on the holder's connection, after sending
 * whatever was appended, by EVALSHA, and when Redis answers NOSCRIPT by
 * SCRIPT LOAD and EVALSHA again (script_run): for a script appended
 * earlier that answered NOSCRIPT, so did not run. Returns its reply index
 * (lock_reply), or -1 with lock_errstr set (no connection, out of room, or
 * its reply was lost: then, as after any lost reply, the holds are given
 * up at release). */
int lock_run_script(struct lock *l, const char *name, int numkeys, int argc, const char **argv,
                    const size_t *argvlen);

/* Registers an idempotent command that must reach the core's Redis before
 * the lock is given up (the probe's exit): sent ahead of the release, and
 * again ahead of any compensating release. At most 4. Returns 0 or -1. */
int lock_cleanup(struct lock *l, int argc, const char **argv, const size_t *argvlen);

/* Sends what was appended, in one write, and reads the replies, without
 * releasing (when nothing is held, the cleanups go too); 0, or -1 with
 * lock_errstr set when the replies were lost. */
int lock_flush(struct lock *l);

/* The reply of command i (see lock_append), once sent (NULL if lost or not
 * sent). Owned by the handle. */
const struct redisReply *lock_reply(const struct lock *l, int i);

/* The key whose value travels with the lock, for the types that carry one:
 * each grant hands over its value, read in Redis as the lock was granted
 * (handoff: by the script that grants it; the string and hash types: by a
 * GET sent right behind the try, on its connection, so Redis runs it after
 * the try, and its reply is kept only when the try was granted; not
 * in cluster mode). Set before lock_acquire; Redlock and the in-process
 * types ignore it. key is copied; at most 127 bytes. */
void lock_carry(struct lock *l, const char *key);

/* The carried key's value as the current hold's grant handed it over: 1
 * with *value set (NULL when the key did not exist), or 0 when this hold
 * carries none (the type carries nothing, or the grant's value was not
 * whole): the holder then reads the key itself. *value lives in l. */
int lock_carried(const struct lock *l, const char **value);

/* What a script needs to end the hold itself, for the types whose lock the
 * holder's write may hand on (handoff): it checks in Redis that the lock
 * is still owner's (a string key whose value is owner, with a lease), and
 * when it is, grants it to the first live waiter of the queue (a list of
 * "<deadline ms, Redis clock>|<owner>|<carried key>", oldest first; the
 * expired ones are dropped) with a lease of lease_ms, and publishes
 * "<owner> <Redis time in us> <=value, or - for none>" on channel_prefix
 * followed by the waiter's process part (its owner id up to the ':'), or
 * deletes the lock when nobody waits. See src/lua/handoff-lock.lua. */
struct lock_handover {
    const char *key; /* the lock */
    char queue[224]; /* the waiters' list */
    char channel_prefix[240];
    char owner[64];
    char lease_ms[16];
};

/* Fills h for l: 0, or -1 when l's type hands nothing on. */
int lock_handover(const struct lock *l, struct lock_handover *h);

/* Appends the holder's cleanup commands, then the embedded script name
 * that ends every hold of l when it runs (it checks the lock, writes, and
 * hands the lock on: see lock_handover). own lists (NULL-terminated) the
 * first words of the errors the script answers itself, having ended the
 * hold all the same ("LOST", "BADKEY", "CHANGED"). The next lock_release sends them
 * and, once the script has answered anything else than an error, or one of
 * its own errors, counts every hold as ended, sending no release of its
 * own. Any other error means the script did not run to its end: Redis
 * refused it (NOSCRIPT, OOM, MOVED, ASK, TRYAGAIN, READONLY, BUSY,
 * LOADING, ...) or it failed partway; the usual release, checked against
 * the owner, follows then, so the lock is not left held for its lease.
 * Returns the script's reply index (lock_reply), or -1 (not held, no
 * connection, out of room). */
int lock_append_release(struct lock *l, const char *name, const char *const *own, int numkeys,
                        int argc, const char **argv, const size_t *argvlen);

/* Fault injection: sleep ms between the release's ownership check and its
 * delete (or before a one-step release). */
void lock_set_release_delay(struct lock *l, int ms);

/* The longest wait of l's acquires from now on, instead of lock.wait-ms
 * (0: one try). */
void lock_set_wait(struct lock *l, int wait_ms);

/* Whether locks of type t live on a session of their store (zookeeper,
 * mysql and their fenced forms) that lock_end_session can end: 1 or 0. */
int lock_type_ends_session(const struct lock_type *t);

/* Fault injection: ends the store session of l's hold from outside, as the
 * store would when it expires or kills it (ZooKeeper: the session is
 * expired through a second handle on it; MariaDB: KILL CONNECTION from
 * another session), and returns once the session is seen gone, so the
 * lock is free for the next holder while this one, which is not told,
 * goes on inside. LOCK_OK, or LOCK_ERR with why set: l's type keeps no
 * session (lock_type_ends_session), l is not held, or the session could
 * not be ended or was not seen gone in time. The holds stay counted: the
 * release then finds the lock gone. */
int lock_end_session(struct lock *l, char *why, size_t whylen);

/* Why the last call failed. */
const char *lock_errstr(const struct lock *l);

/* What a handle did, for the sale's answer, the metrics and the history. */
struct lock_report {
    char owner[64];
    int holds; /* acquires not yet released */
    int attempts; /* tries sent to Redis (or mutex tries) */
    int64_t wait_us; /* total time spent acquiring */
    int64_t hold_us; /* outermost acquire to the last release sent (or now
                        while held; 0 if never held) */
    int64_t granted_wall_us; /* wall clock when the outermost acquire returned */
    int64_t lease_wall_us; /* wall clock of the lease deadline; 0: no lease */
    int renewals; /* successful renewals */
    int depth; /* setnx-retry: deepest recursion reached */
    long long token; /* fencing token, 0 if none */
    int granted_by; /* LOCK_GRANT_*: how the outermost hold was granted, for the
                                  types that hand on (0 for the others) */
    int replicas_wanted; /* lock.sync-replicas, when WAIT was sent */
    int replicas_acked;
    int quorum; /* Redlock: votes needed; 0 otherwise */
    int nvotes;
    struct {
        char node[64];
        int outcome; /* LOCK_VOTE_* */
        int us; /* round trip seen for it */
    } votes[LOCK_MAX_NODES];
};

void lock_report(const struct lock *l, struct lock_report *r);

/* ---- a hold in one call ----------------------------------------------------
 * lock_hold runs the fixed order of one hold, so that its holder says what
 * to read and what to write, and the core does when (as Redis's connXxx()
 * wrappers run a ConnectionType): the handle is made, acquired (and again,
 * nested times), connected; the plan's read appends what the holder needs
 * answered, and goes out in one write (lock_flush); the plan's inside
 * reads the replies; the session fault, the hold's sleep; the commit point
 * (lock_commit_check), the stall fault; the plan's write appends the write
 * (or the event of a hold that writes nothing), which goes out with the
 * release; every hold is released; the plan's done reads the write's
 * reply; the handle is freed. A key the holder reads is best carried
 * (p->carry): the grant brings its value when the type can, and the core
 * sends its GET with the read when not. Each step is handed the hold: what the core
 * knows at that point. The steps append with lock_append,
 * lock_append_script or lock_append_release on h->l, and read with
 * lock_reply and lock_errstr. A step left NULL does nothing. Once
 * lock_hold has returned, h->l is NULL, and so are h->carried,
 * h->carry_reply, h->guard.key and h->handover.key, which pointed into the
 * freed handle: read them in the steps. */
struct lock_hold {
    struct lock *l; /* the handle, for the steps */
    int acquired; /* what the acquire answered: LOCK_OK, LOCK_BUSY or LOCK_ERR */
    /* Why an acquire (the first, or a nested one) answered LOCK_BUSY or
     * LOCK_ERR: its lock_errstr, kept for the done step (the releases that
     * follow a failed nested acquire clear the handle's). */
    char errstr[256];
    int connected; /* the holder has its connection (lock_connect): it may append */
    int flushed; /* 0, or -1 when the read's replies were lost, or it had no
                    connection (lock_errstr says why) */
    int has_carried; /* the grant carried the carry key's value (lock_carried) ... */
    const char *carried; /* ... this one (NULL: the key did not exist) */
    /* Else the reply to the GET of the carry key that the core sent with the
     * read (NULL when lost or not sent). */
    const struct redisReply *carry_reply;
    /* The end_session fault: 1 ended and seen gone, -1 could not be (see
     * session_error), 0 not asked; wall-clock us when begun and seen gone. */
    int session_ended;
    int64_t session_end_us, session_gone_us;
    char session_error[160];
    int may_commit; /* the commit point's check answered LOCK_OK */
    int late; /* the lease had passed at the write (lock_lease_passed) */
    struct lock_guard guard; /* how the write's script looks at the lock */
    char fence[224]; /* the key of the lock's fencing tokens (lock_fence_key) */
    int hands_on; /* the write may end the hold: handover says how */
    struct lock_handover handover;
    int lost; /* a release found the lock no longer the holder's */
    struct lock_report report; /* as of the read, then of the write; in done, of the release */
};

struct lock_hold_plan {
    const struct lock_type *type;
    const char *key; /* the lock's key */
    const char *carry; /* the key whose value travels with the lock (lock_carry), or NULL */
    int wait_given; /* wait_ms replaces lock.wait-ms (lock_set_wait) */
    int wait_ms;
    int nested; /* acquires beyond the first: re-entry */
    /* Faults: lock_set_release_delay; the process dying (exit 86) as soon
     * as every acquire was granted, before anything else (a holder that dies
     * inside); a sleep once inside; the store session ended from outside
     * once inside, after a clean read (lock_end_session); a stall between the
     * commit point and the write. */
    int release_delay_ms, crash, hold_ms, end_session, commit_delay_ms;
    /* Held and connected: appends the reads. Below 0: nothing more is
     * read or written. */
    int (*read)(struct lock_hold *h, void *arg);
    /* The reads answered (or h->flushed < 0: lost, or no connection). Below
     * 0: nothing is written; 0: the read is clean; above 0: the write step
     * runs, but the read was not clean (it records a hold that writes
     * nothing), and the end_session fault is not struck. */
    int (*inside)(struct lock_hold *h, void *arg);
    /* At the commit point: appends the write, or the event of a hold that
     * writes nothing; it goes out with the release. */
    void (*write)(struct lock_hold *h, void *arg);
    /* Every hold released, or none granted (h->acquired): reads the
     * write's reply. */
    void (*done)(struct lock_hold *h, void *arg);
    void *arg;
};

/* Runs one hold by plan p into h: returns what the acquire answered
 * (LOCK_OK, LOCK_BUSY, LOCK_ERR), or -2 when out of memory (no step ran). */
#define LOCK_HOLD_NOMEM -2
int lock_hold(struct lock_core *core, const struct lock_hold_plan *p, struct lock_hold *h);

#endif
