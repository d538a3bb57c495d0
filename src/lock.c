/* lock.c -- the lock core: handles, the gate, leases, lost replies and the
 * holder's pipeline (see lock.h and lock_int.h).
 *
 * Threads: a handle is used by one thread at a time; the core's shared
 * parts (gates, pub/sub, watchdog, Redlock masters) are thread safe. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>
#include "alloc.h"
#include "lock_int.h"
#include "mclock.h"
#include "pubsub.h"
#include "redlock.h"
#include "rpool.h"
#include "script.h"
#include "watchdog.h"

static int lock_compensate(struct lock *l, struct lock_link *k);
static void lock_destroy(struct lock *l);

/* What the watchdog does to an orphan: give up its holds, then free it. */
static const struct watchdog_ops orphan_ops = {.give_up = lock_compensate, .destroy = lock_destroy};

/* ---- the core ------------------------------------------------------------- */

/* The index of store in lock_stores, or -1. */
static int store_index(const struct lock_store *store) {
    for (int i = 0; store && lock_stores[i] && i < LOCK_STORES_MAX; i++)
        if (lock_stores[i] == store) return i;
    return -1;
}

/* Opens every store o configures. 0, or -1 with errstr set. */
static int stores_open(struct lock_core *core, const struct lock_core_options *o, char *errstr,
                       size_t errlen) {
    for (int i = 0; lock_stores[i] && i < LOCK_STORES_MAX; i++) {
        const struct lock_store *st = lock_stores[i];
        if (!st->configured(o)) continue;
        if (!(core->stores[i] = st->open(o, errstr, errlen))) return -1;
    }
    return 0;
}

static void stores_close(struct lock_core *core) {
    for (int i = 0; lock_stores[i] && i < LOCK_STORES_MAX; i++) {
        lock_stores[i]->close(core->stores[i]);
        core->stores[i] = NULL;
    }
}

/* The state of t's store, or NULL (not configured, or t lives on Redis). */
static void *store_state(const struct lock_core *core, const struct lock_type *t) {
    int i = store_index(t->store);
    return i < 0 ? NULL : core->stores[i];
}

void *lock_store_state(const struct lock *l) { return store_state(l->core, l->type); }

int lock_type_configured(const struct lock_core *core, const struct lock_type *t, char *why,
                         size_t whylen) {
    if (!t->store || store_state(core, t)) return 1;
    snprintf(why, whylen, "%s is not configured", t->store->setting);
    return 0;
}

const char *lock_type_store(const struct lock_type *t) {
    return t->store ? t->store->name : "Redis";
}

struct lock_core *lock_core_init(const struct lock_core_options *o, char *errstr, size_t errlen) {
    struct lock_core *core = alloc_zeroed(sizeof(*core), errstr, errlen);
    if (!core) return NULL;
    core->pool = o->pool;
    core->pool_wait_ms = o->pool_wait_ms > 0 ? o->pool_wait_ms : 1;
    core->ttl_ms = o->ttl_ms;
    core->wait_ms = o->wait_ms;
    core->spin_sleep_ms = o->spin_sleep_ms;
    core->retry_depth = o->retry_depth;
    core->sync_replicas = o->sync_replicas;
    if (o->redlock_nodes && o->redlock_nodes[0]) {
        core->redlock =
            redlock_create(o->redlock_nodes, o->redlock_password, o->redlock_node_timeout_ms,
                           o->ttl_ms, o->redlock_pool_size, errstr, errlen);
        if (!core->redlock) {
            free(core);
            return NULL;
        }
    }
    if (stores_open(core, o, errstr, errlen) < 0) {
        char why[256];
        snprintf(why, sizeof(why), "%s", errstr);
        lock_core_shutdown(core);
        snprintf(errstr, errlen, "%s", why);
        return NULL;
    }
    core->pubsub = pubsub_create();
    core->gates = waitq_create();
    core->watchdog = core->pubsub && core->gates ? watchdog_create(core, &orphan_ops) : NULL;
    if (!core->watchdog) {
        snprintf(errstr, errlen, "out of memory, or no thread for the watchdog");
        lock_core_shutdown(core);
        return NULL;
    }
    return core;
}

void lock_core_shutdown(struct lock_core *core) {
    if (!core) return;
    watchdog_free(core->watchdog);
    pubsub_free(core->pubsub);
    waitq_free(core->gates);
    redlock_free(core->redlock);
    stores_close(core);
    free(core);
}

int lock_type_ready(struct lock_core *core, const struct lock_type *t, char *why, size_t whylen) {
    if (t->store) {
        void *state = store_state(core, t);
        if (!state) return lock_type_configured(core, t, why, whylen) ? 0 : 1;
        return t->store->ready(state, why, whylen);
    }
    if (!(t->flags & LOCK_T_QUORUM)) return 0;
    if (!core->redlock) {
        snprintf(why, whylen, "redlock.nodes is not configured");
        return -1;
    }
    return redlock_ready(core->redlock, why, whylen);
}

const struct redlock *lock_core_redlock(const struct lock_core *core) { return core->redlock; }

int lock_core_lanes(struct lock_core *core, struct lock_lane_stats *out, int max) {
    return watchdog_stats(core->watchdog, out, max);
}

const char *lock_vote_word(int outcome) {
    static const char *const words[] = {"restarted", "error", "busy", "yes"};
    return outcome >= LOCK_VOTE_RESTARTED && outcome <= LOCK_VOTE_YES ? words[outcome + 2] : "?";
}

const char *lock_grant_word(int granted_by) {
    static const char *const words[LOCK_GRANTS] = {"", "free", "handed", "checked"};
    return granted_by >= 0 && granted_by < LOCK_GRANTS ? words[granted_by] : "";
}

const char *lock_type_name(const struct lock_type *t) { return t->name; }
const char *lock_type_family(const struct lock_type *t) { return t->family; }

/* ---- handles ---------------------------------------------------------------- */

static pthread_once_t process_id_once = PTHREAD_ONCE_INIT;
static char process_id[33];
static atomic_ullong handle_seq;

static void process_id_make(void) {
    uuid_t u;
    uuid_generate(u);
    for (int i = 0; i < 16; i++) snprintf(process_id + 2 * i, 3, "%02x", u[i]);
}

struct lock *lock_new(struct lock_core *core, const struct lock_type *t, const char *key) {
    size_t head = (sizeof(struct lock) + 15) & ~(size_t)15;
    struct lock *l = calloc(1, head + t->priv_size);
    if (!l) return NULL;
    l->type = t;
    l->core = core;
    l->wait_ms = core->wait_ms;
    l->priv = t->priv_size ? (char *)l + head : NULL;
    snprintf(l->key, sizeof(l->key), "%s", key);
    l->pool = core->pool ? rpool_route(core->pool, l->key) : NULL;
    pthread_once(&process_id_once, process_id_make);
    snprintf(l->owner, sizeof(l->owner), "%s:%llu", process_id,
             (unsigned long long)atomic_fetch_add(&handle_seq, 1) + 1);
    return l;
}

static void replies_clear(struct lock *l) {
    for (int i = 0; i < l->nreplies; i++) freeReplyObject(l->replies[i]);
    memset(l->replies, 0, sizeof(l->replies));
    l->nreplies = 0;
}

static void cleanups_clear(struct lock *l) {
    for (int i = 0; i < l->ncleanup; i++) redisFreeCommand(l->cleanup[i]);
    l->ncleanup = 0;
}

static void lock_destroy(struct lock *l) {
    lock_carry_end(l, 0);
    replies_clear(l);
    cleanups_clear(l);
    free(l);
}

const char *lock_errstr(const struct lock *l) { return l->errstr; }

void lock_set_release_delay(struct lock *l, int ms) { l->release_delay_ms = ms; }

void lock_set_wait(struct lock *l, int wait_ms) { l->wait_ms = wait_ms; }

int lock_type_ends_session(const struct lock_type *t) { return t->end_session != NULL; }

int lock_end_session(struct lock *l, char *why, size_t whylen) {
    if (!l->type->end_session) {
        snprintf(why, whylen, "%s keeps its lock in %s, with no session of a store to end",
                 l->type->name, lock_type_store(l->type));
        return LOCK_ERR;
    }
    if (l->holds <= 0) {
        snprintf(why, whylen, "the %s lock is not held: no session of a hold to end",
                 l->type->name);
        return LOCK_ERR;
    }
    return l->type->end_session(l, why, whylen);
}

void lock_carry(struct lock *l, const char *key) {
    snprintf(l->carry_key, sizeof(l->carry_key), "%s", key);
}

void lock_carry_try(struct lock *l) { l->carry_try = 1; }

void lock_carry_end(struct lock *l, int granted) {
    redisReply *g = l->carry_reply;
    l->carry_reply = NULL;
    l->carry_try = 0;
    if (!g) return;
    if (granted && g->type == REDIS_REPLY_NIL) {
        l->carried = 2;
    } else if (granted && g->type == REDIS_REPLY_STRING && g->len < sizeof(l->carried_value)) {
        memcpy(l->carried_value, g->str, g->len);
        l->carried_value[g->len] = '\0';
        l->carried = 1;
    } /* else (an error, a value too long): the holder reads for itself */
    freeReplyObject(g);
}

/* Whether the carried key's GET rides behind the command about to go out
 * (see lock_carry_try). */
static int carry_rides(const struct lock *l) {
    if (!l->carry_try || !l->carry_key[0] || l->holds > 0 || !l->core->pool) return 0;
    const char *cluster = rpool_options(l->core->pool)->cluster_nodes;
    return !cluster || !cluster[0];
}

int lock_carried(const struct lock *l, const char **value) {
    if (l->holds == 0 || !l->carried) return 0;
    *value = l->carried == 1 ? l->carried_value : NULL;
    return 1;
}

int lock_handover(const struct lock *l, struct lock_handover *h) {
    memset(h, 0, sizeof(*h));
    if (!l->type->handover) return -1;
    h->key = l->key;
    snprintf(h->owner, sizeof(h->owner), "%s", l->owner);
    snprintf(h->lease_ms, sizeof(h->lease_ms), "%d", lock_lease_ms(l));
    l->type->handover(l, h);
    return 0;
}

/* ---- connections ---------------------------------------------------------- */

void lock_park(struct lock *l) {
    /* A holder waiting for a nested hold keeps its connection, as do
     * pipelined replies still due. */
    if (!l->c || l->holds > 0 || l->npending > 0) return;
    rpool_put(l->pool, l->c);
    l->c = NULL;
}

static void conn_drop(struct lock *l) {
    if (!l->c) return;
    rpool_drop(l->pool, l->c);
    l->c = NULL;
    l->npending = 0; /* their replies are lost with it */
}

int lock_try_conn(struct lock *l) {
    if (l->c && !l->c->err) return LOCK_OK;
    conn_drop(l);
    int64_t left_ms = (l->deadline_us - mclock_us()) / 1000;
    int wait =
        left_ms < l->core->pool_wait_ms ? (int)(left_ms > 0 ? left_ms : 0) : l->core->pool_wait_ms;
    int rc = rpool_get(l->pool, wait, &l->c, l->errstr, sizeof(l->errstr));
    return rc == RPOOL_OK ? LOCK_OK : rc == RPOOL_BUSY ? LOCK_BUSY : LOCK_ERR;
}

/* The holder's connection: the handle's own, taken from the pool when it
 * has none. NULL with l->errstr set when none could be had. */
static redisContext *lock_conn(struct lock *l) {
    if (l->c && l->c->err) {
        snprintf(l->errstr, sizeof(l->errstr), "the connection failed: %.100s", l->c->errstr);
        return NULL;
    }
    if (l->c) return l->c;
    int rc = rpool_get(l->pool, l->core->pool_wait_ms, &l->c, l->errstr, sizeof(l->errstr));
    return rc == RPOOL_OK ? l->c : NULL;
}

int lock_connect(struct lock *l) { return lock_conn(l) ? 0 : -1; }

/* ---- the holder's pipeline ---------------------------------------------------- */

/* Whether one more reply fits, and the connection to append it to. */
static int pipe_room(struct lock *l, const char *what) {
    if (l->npending + l->nreplies >= LOCK_PIPE_MAX) {
        snprintf(l->errstr, sizeof(l->errstr), "%s: more than %d commands in one hold", what,
                 LOCK_PIPE_MAX);
        return 0;
    }
    return lock_conn(l) != NULL;
}

/* Counts one appended command; its reply index. */
static int appended(struct lock *l) { return l->nreplies + l->npending++; }

int lock_append(struct lock *l, int argc, const char **argv, const size_t *argvlen) {
    if (!pipe_room(l, "append")) return -1;
    if (redisAppendCommandArgv(l->c, argc, argv, argvlen) != REDIS_OK) {
        snprintf(l->errstr, sizeof(l->errstr), "append: out of memory");
        return -1;
    }
    return appended(l);
}

int lock_append_script(struct lock *l, const char *name, int numkeys, int argc, const char **argv,
                       const size_t *argvlen) {
    if (!pipe_room(l, name)) return -1;
    if (script_append(l->c, name, numkeys, argc, argv, argvlen) != REDIS_OK) {
        snprintf(l->errstr, sizeof(l->errstr), "%.40s: cannot build the command", name);
        return -1;
    }
    return appended(l);
}

int lock_append_release(struct lock *l, const char *name, const char *const *own, int numkeys,
                        int argc, const char **argv, const size_t *argvlen) {
    enum { ARGS = 300 };
    if (l->holds == 0 || l->releasing || !l->type->handover || argc > ARGS ||
        l->npending + l->nreplies + l->ncleanup + 1 > LOCK_PIPE_MAX || !lock_conn(l))
        return -1;
    const char *all[ARGS];
    size_t lens[ARGS];
    for (int i = 0; i < argc; i++) {
        all[i] = argv[i];
        lens[i] = argvlen ? argvlen[i] : strlen(argv[i]);
    }
    int extra = l->type->release_args ? l->type->release_args(l, all + argc, ARGS - argc) : 0;
    if (extra < 0) return -1;
    for (int i = argc; i < argc + extra; i++) lens[i] = strlen(all[i]);
    /* The cleanups (the probe's exit) go first: once the script has run,
     * the next holder may already be inside. They stay registered until
     * the script's answer is read, for a compensation to send again. */
    for (int i = 0; i < l->ncleanup; i++) {
        if (redisAppendFormattedCommand(l->c, l->cleanup[i], l->cleanup_len[i]) != REDIS_OK)
            return -1;
        l->npending++;
    }
    if (script_append(l->c, name, numkeys, argc + extra, all, lens) != REDIS_OK) return -1;
    l->npending++;
    l->releasing = l->nreplies + l->npending;
    l->release_own = own;
    return l->releasing - 1;
}

int lock_cleanup(struct lock *l, int argc, const char **argv, const size_t *argvlen) {
    if (l->ncleanup == LOCK_CLEANUP_MAX) return -1;
    char *cmd = NULL;
    long long n = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (n < 0) return -1;
    l->cleanup[l->ncleanup] = cmd;
    l->cleanup_len[l->ncleanup++] = (size_t)n;
    return 0;
}

const struct redisReply *lock_reply(const struct lock *l, int i) {
    return i >= 0 && i < l->nreplies ? l->replies[i] : NULL;
}

/* Appends the cleanups to c. Returns how many. */
static int cleanups_append(struct lock *l, redisContext *c) {
    for (int i = 0; i < l->ncleanup; i++)
        redisAppendFormattedCommand(c, l->cleanup[i], l->cleanup_len[i]);
    return l->ncleanup;
}

/* Reads the holder's pending replies into l->replies, then ncleanup
 * cleanup replies. -1 when the connection failed (l->unknown set). */
static int pipeline_read(struct lock *l, int ncleanup) {
    while (l->npending > 0) {
        void *r = NULL;
        if (redisGetReply(l->c, &r) != REDIS_OK) return l->unknown = 1, -1;
        l->replies[l->nreplies++] = r;
        l->npending--;
    }
    for (int i = 0; i < ncleanup; i++) {
        void *r = NULL;
        if (redisGetReply(l->c, &r) != REDIS_OK) return l->unknown = 1, -1;
        freeReplyObject(r);
    }
    return 0;
}

/* Sends what the holder appended, and the cleanups when with_cleanups, and
 * reads their replies. 0, or -1 when they were lost (l->unknown set). */
static int pipeline_flush(struct lock *l, int with_cleanups) {
    if (l->npending == 0 && (!with_cleanups || l->ncleanup == 0)) return 0;
    if (!lock_conn(l)) return -1;
    int ncleanup = with_cleanups ? cleanups_append(l, l->c) : 0;
    l->sent_us = mclock_us();
    if (pipeline_read(l, ncleanup) < 0) {
        lock_fail(l, NULL, "pipeline");
        return -1;
    }
    if (ncleanup) cleanups_clear(l);
    return 0;
}

int lock_flush(struct lock *l) { return pipeline_flush(l, l->holds == 0); }

int lock_run_script(struct lock *l, const char *name, int numkeys, int argc, const char **argv,
                    const size_t *argvlen) {
    if (pipeline_flush(l, 0) < 0 || !pipe_room(l, name)) return -1;
    char err[128];
    l->sent_us = mclock_us();
    redisReply *r = script_run(l->c, name, numkeys, argc, argv, argvlen, err, sizeof(err));
    if (!r) {
        /* Unknown script (nothing sent), or a lost reply: the connection
         * has failed, and the release gives the holds up. */
        if (l->c->err) l->unknown = 1;
        snprintf(l->errstr, sizeof(l->errstr), "%.40s: %.120s", name, err);
        return -1;
    }
    l->replies[l->nreplies] = r;
    return l->nreplies++;
}

/* ---- commands for the types ---------------------------------------------------- */

int lock_fail(struct lock *l, const redisReply *reply, const char *what) {
    if (reply && reply->type == REDIS_REPLY_ERROR) {
        snprintf(l->errstr, sizeof(l->errstr), "%.40s: %.80s", what, reply->str);
        rpool_note_error(l->core->pool, reply->str);
    } else if (l->c && l->c->err)
        snprintf(l->errstr, sizeof(l->errstr), "%.40s: %.80s", what, l->c->errstr);
    else if (!l->errstr[0])
        snprintf(l->errstr, sizeof(l->errstr), "%s: unexpected reply", what);
    return LOCK_ERR;
}

static void gate_leave(struct lock *l);

/* Sends what is appended to l->c (the holder's pipeline and, on the last
 * release, its cleanups), then reads those replies and the command's own.
 * The last release of a gated lock passes the gate on as soon as it is
 * written: the next thread's try then goes out while this one waits for
 * its answer, and Redis, which runs what one connection sent in order,
 * most often runs the release first (if not, the try is busy and waits
 * for the unlock message, as any waiter would: Redis decides who holds,
 * never the gate). NULL with l->unknown set on a lost reply. */
static redisReply *command_finish(struct lock *l, int ncleanup, const char *what) {
    l->sent_us = mclock_us();
    if (l->gate_at_send) {
        int done = 0;
        while (!done && redisBufferWrite(l->c, &done) == REDIS_OK) {}
        lock_gate_pass(l);
    }
    void *r = NULL;
    if (pipeline_read(l, ncleanup) < 0 || redisGetReply(l->c, &r) != REDIS_OK) {
        l->unknown = 1;
        lock_fail(l, NULL, what);
        return NULL;
    }
    if (ncleanup) cleanups_clear(l);
    return r;
}

/* Cleanups ride with the command that ends the last hold. */
static int cleanups_due(const struct lock *l) { return l->holds == 0 && l->ncleanup > 0; }

/* Sends one formatted command, the cleanups due ahead of it, and reads its
 * reply (after the holder's pipelined ones). In cluster mode a refusal
 * (MOVED, ASK, TRYAGAIN: it did not run) is followed, the same command sent
 * again where it says, unless cleanups rode with it: their refusal would be
 * lost. The handle's connection then comes from the pool followed to, and
 * goes back there. An ASK covers the one command it answered, as the
 * specification says: ASKING is never carried over to the handle's later
 * commands, since the key it names may be on the target while the item's
 * other keys are still on the source (read there, a missing stock would
 * look sold out, and a write would make a key the migration then cannot
 * move). NULL on a lost reply (l->unknown set) or when no connection could
 * be had (the command did not run). */
static redisReply *command_send(struct lock *l, const char *cmd, size_t len, const char *what) {
    int hops = 0, carry = carry_rides(l);
    lock_carry_end(l, 0);
    for (;;) {
        if (!lock_conn(l)) return NULL;
        int ncleanup = cleanups_due(l) ? cleanups_append(l, l->c) : 0;
        if (redisAppendFormattedCommand(l->c, cmd, len) != REDIS_OK) {
            snprintf(l->errstr, sizeof(l->errstr), "%s: out of memory", what);
            return NULL;
        }
        if (carry && redisAppendCommand(l->c, "GET %s", l->carry_key) != REDIS_OK) {
            snprintf(l->errstr, sizeof(l->errstr), "%s: out of memory", what);
            conn_drop(l); /* the try must not go out with the next command */
            return NULL;
        }
        redisReply *r = command_finish(l, ncleanup, what);
        if (r && carry && redisGetReply(l->c, (void **)&l->carry_reply) != REDIS_OK) {
            freeReplyObject(r);
            l->unknown = 1;
            lock_fail(l, NULL, "GET of the carried key");
            return NULL;
        }
        if (!r || ncleanup || carry) return r; /* (carrying: never in cluster mode) */
        struct rpool *pool = l->pool;
        int f = rpool_follow(l->core->pool, r, &hops, &pool, &l->c, l->core->pool_wait_ms,
                             l->errstr, sizeof(l->errstr));
        l->pool = pool;
        if (f == 0) return r;
        freeReplyObject(r);
        if (f < 0) return NULL;
    }
}

redisReply *lock_command(struct lock *l, const char *fmt, ...) {
    char *cmd = NULL;
    va_list ap;
    va_start(ap, fmt);
    int len = redisvFormatCommand(&cmd, fmt, ap);
    va_end(ap);
    if (len < 0) {
        snprintf(l->errstr, sizeof(l->errstr), "out of memory");
        l->carry_try = 0; /* nothing was sent */
        return NULL;
    }
    redisReply *r = command_send(l, cmd, (size_t)len, fmt);
    redisFreeCommand(cmd);
    return r;
}

redisReply *lock_script(struct lock *l, const char *name, int numkeys, int argc,
                        const char **argv) {
    char *cmd = NULL;
    long long len = script_format(&cmd, name, numkeys, argc, argv, NULL);
    if (len < 0) {
        snprintf(l->errstr, sizeof(l->errstr), "%s: cannot build the command", name);
        l->carry_try = 0; /* nothing was sent */
        return NULL;
    }
    redisReply *r = command_send(l, cmd, (size_t)len, name);
    redisFreeCommand(cmd);
    if (script_missing(r)) {
        /* It did not run (SCRIPT FLUSH): loaded, and run once more, alone. */
        lock_carry_end(l, 0); /* a GET that rode behind it read before any grant */
        freeReplyObject(r);
        char err[128];
        r = script_run(l->c, name, numkeys, argc, argv, NULL, err, sizeof(err));
        if (!r) {
            l->unknown = 1;
            snprintf(l->errstr, sizeof(l->errstr), "%.40s: %.80s", name, err);
        }
    }
    return r;
}

redisReply *lock_link_script(struct lock *l, struct lock_link *k, const char *name, int numkeys,
                             int argc, const char **argv) {
    struct rpool *pool = l->pool; /* once: the holder may follow a refusal */
    redisContext *c = k->get(k, pool);
    if (!c) return NULL;
    redisReply *r = script_run(c, name, numkeys, argc, argv, NULL, k->errstr, sizeof(k->errstr));
    if (r && r->type == REDIS_REPLY_ERROR) snprintf(k->errstr, sizeof(k->errstr), "%.120s", r->str);
    k->put(k, pool, c);
    return r;
}

int lock_backoff(struct lock *l) {
    lock_park(l);
    monotime_us now = mclock_us();
    if (now >= l->deadline_us) return -1;
    int64_t left_ms = (l->deadline_us - now + 999) / 1000;
    int ms = l->core->spin_sleep_ms;
    if (left_ms < ms) ms = (int)left_ms;
    mclock_sleep_ms(ms);
    return 0;
}

int lock_poll(struct lock *l, int (*try_once)(struct lock *)) {
    for (;;) {
        int rc = try_once(l);
        if (rc != LOCK_BUSY) return rc;
        if (lock_backoff(l) < 0) return LOCK_BUSY;
    }
}

void lock_release_pause(struct lock *l) {
    mclock_sleep_ms(l->release_delay_ms);
    if (l->holds == 0 && l->release_delay_ms > 0)
        l->released_us = mclock_us(); /* the stall was part of the hold */
}

int lock_set_nx(struct lock *l, int ttl_ms) {
    int rc = lock_try_conn(l);
    if (rc != LOCK_OK) return rc;
    l->attempts++;
    lock_carry_try(l);
    redisReply *r = ttl_ms > 0 ? lock_command(l, "SET %s %s NX PX %d", l->key, l->owner, ttl_ms)
                               : lock_command(l, "SET %s %s NX", l->key, l->owner);
    if (!r || r->type == REDIS_REPLY_ERROR)
        rc = lock_fail(l, r, "SET NX");
    else
        rc = r->type == REDIS_REPLY_STATUS ? LOCK_OK : LOCK_BUSY;
    lock_carry_end(l, rc == LOCK_OK);
    freeReplyObject(r);
    return rc;
}

static int string_once(struct lock *l) { return lock_set_nx(l, lock_lease_ms(l)); }

int lock_string_acquire(struct lock *l) { return lock_poll(l, string_once); }

int lock_del(struct lock *l) {
    redisReply *r = lock_command(l, "DEL %s", l->key);
    int rc;
    if (!r || r->type != REDIS_REPLY_INTEGER)
        rc = lock_fail(l, r, "DEL");
    else
        rc = r->integer == 1 ? LOCK_OK : LOCK_LOST;
    freeReplyObject(r);
    return rc;
}

int lock_del_owned(struct lock *l) {
    const char *argv[] = {l->key, l->owner};
    redisReply *r = lock_script(l, "unlock-owner", 1, 2, argv);
    int rc = !r || r->type != REDIS_REPLY_INTEGER ? lock_fail(l, r, "unlock-owner")
             : r->integer == 1                    ? LOCK_OK
                                                  : LOCK_LOST;
    freeReplyObject(r);
    return rc;
}

int lock_link_abandon(struct lock *l, struct lock_link *k, const char *name, int numkeys, int argc,
                      const char **argv) {
    redisReply *r = lock_link_script(l, k, name, numkeys, argc, argv);
    int rc = r && r->type == REDIS_REPLY_INTEGER ? LOCK_OK : LOCK_ERR;
    freeReplyObject(r);
    return rc;
}

int lock_link_owned(struct lock *l, struct lock_link *k, const char *name, int numkeys, int argc,
                    const char **argv) {
    redisReply *r = lock_link_script(l, k, name, numkeys, argc, argv);
    int rc = !r || r->type != REDIS_REPLY_INTEGER ? LOCK_ERR
             : r->integer == 1                    ? LOCK_OK
                                                  : LOCK_LOST;
    freeReplyObject(r);
    return rc;
}

int lock_string_abandon(struct lock *l, struct lock_link *k) {
    const char *argv[] = {l->key, l->owner};
    return lock_link_abandon(l, k, "unlock-owner", 1, 2, argv);
}

/* ---- giving up after a lost reply ------------------------------------------------ */

static int lock_compensate(struct lock *l, struct lock_link *k) {
    if (l->ncleanup > 0) {
        struct rpool *pool = l->pool; /* once: the holder may follow a refusal */
        redisContext *c = k->get(k, pool);
        if (!c) return LOCK_ERR;
        int n = cleanups_append(l, c), ok = 1;
        for (int i = 0; i < n; i++) {
            void *r = NULL;
            if (redisGetReply(c, &r) != REDIS_OK) ok = 0;
            freeReplyObject(r);
            if (!ok) break;
        }
        /* the put may free a broken connection: its error is read first */
        if (!ok) snprintf(k->errstr, sizeof(k->errstr), "cleanup: %.100s", c->errstr);
        k->put(k, pool, c);
        if (!ok) return LOCK_ERR;
        cleanups_clear(l);
    }
    return l->type->abandon ? l->type->abandon(l, k) : LOCK_OK;
}

static redisContext *fresh_get(struct lock_link *k, struct rpool *pool) {
    struct lock *l = k->ctx;
    redisContext *c = NULL;
    if (rpool_get(pool, l->core->pool_wait_ms, &c, k->errstr, sizeof(k->errstr)) != RPOOL_OK)
        return NULL;
    return c;
}

static void fresh_put(struct lock_link *k, struct rpool *pool, redisContext *c) {
    (void)k;
    rpool_put(pool, c);
}

static void gate_leave(struct lock *l) {
    if (!l->gated) return;
    l->gated = 0;
    waitq_leave(l->core->gates, &l->gate);
}

void lock_gate_pass(void *arg) {
    struct lock *l = arg;
    if (!l->gate_at_send) return;
    l->gate_at_send = 0;
    gate_leave(l);
}

/* Takes l back from the watchdog, once. */
static void unwatch(struct lock *l) {
    if (!l->watching) return;
    l->watching = 0;
    watchdog_unwatch(l->core->watchdog, l);
}

/* Every hold of l ends in this process; in Redis they are given up by a
 * release checked against the owner, on a fresh connection, after the
 * holder's cleanups. If that fails too, the watchdog retries it once the
 * handle is freed. */
static void give_up(struct lock *l) {
    unwatch(l);
    conn_drop(l);
    l->releasing = 0;
    /* Whatever the type was told to carry with the release is unknown now. */
    if (l->type->handed) l->type->handed(l, NULL);
    int rc;
    if (!l->type->abandon) {
        /* Nothing of it in Redis: the cleanups, then each hold, locally. */
        struct lock_link k = {.get = fresh_get, .put = fresh_put, .ctx = l};
        rc = lock_compensate(l, &k);
        while (l->holds > 0) {
            l->holds--;
            l->type->release(l);
        }
    } else {
        struct lock_link k = {.get = fresh_get, .put = fresh_put, .ctx = l};
        rc = lock_compensate(l, &k);
        if (rc != LOCK_OK)
            snprintf(l->errstr + strlen(l->errstr), sizeof(l->errstr) - strlen(l->errstr),
                     "; then %.60s", k.errstr);
        l->holds = 0;
    }
    l->orphaned = rc != LOCK_OK;
    l->unknown = 0;
    gate_leave(l);
}

/* ---- acquire, release, check ---------------------------------------------------- */

/* Redisson's synced-replicas check (see lock_acquire). */
static void wait_replicas(struct lock *l) {
    struct lock_core *core = l->core;
    if (core->sync_replicas <= 0 || !l->c || l->c->err || !(l->type->flags & LOCK_T_REDIS)) return;
    int timeout_ms = rpool_options(core->pool)->timeout_ms;
    if (timeout_ms < 1) timeout_ms = 1; /* WAIT n 0 would block for ever */
    l->replicas_wanted = core->sync_replicas;
    l->replicas_acked = 0;
    /* The socket must outlast WAIT's own timeout, or its read would time out
     * just as the answer is due and the connection would be lost with it. */
    struct timeval longer = {(timeout_ms + 1000) / 1000, ((timeout_ms + 1000) % 1000) * 1000};
    struct timeval normal = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisSetTimeout(l->c, longer);
    redisReply *r = redisCommand(l->c, "WAIT %d %d", core->sync_replicas, timeout_ms);
    if (r && r->type == REDIS_REPLY_INTEGER) l->replicas_acked = (int)r->integer;
    freeReplyObject(r);
    if (!l->c->err) redisSetTimeout(l->c, normal);
}

/* The gate is keyed by the family and the key: types of one family exclude
 * each other on a key, two families do not, so a hold of one never queues
 * the other's sales. */
static int gate_enter(struct lock *l) {
    char gate[sizeof(l->key) + 32];
    snprintf(gate, sizeof(gate), "%s|%s", l->type->family, l->key);
    int st = waitq_enter(l->core->gates, gate, &l->gate, l, l->deadline_us);
    if (st == WAITQ_OWNER) {
        l->gated = 1;
        return LOCK_OK;
    }
    if (st == WAITQ_NOMEM) return LOCK_OK; /* out of memory: through, ungated */
    snprintf(l->errstr, sizeof(l->errstr), "queued in this process");
    return LOCK_BUSY;
}

int lock_acquire(struct lock *l) {
    monotime_us start = mclock_us();
    l->deadline_us = start + (monotime_us)l->wait_ms * 1000;
    l->errstr[0] = '\0';
    l->unknown = 0;
    int outer = l->holds == 0;
    if (outer) l->carried = 0;
    if (!lock_type_configured(l->core, l->type, l->errstr, sizeof(l->errstr))) return LOCK_ERR;
    int rc = outer && (l->type->flags & LOCK_T_GATED) ? gate_enter(l) : LOCK_OK;
    if (rc == LOCK_OK) rc = l->type->acquire(l);
    if (rc != LOCK_OK && l->unknown) {
        give_up(l); /* it may have been granted: give it up, checked */
    } else if (rc != LOCK_OK && outer) {
        gate_leave(l);
        lock_park(l);
    }
    if (rc == LOCK_OK) {
        int flags = l->type->flags;
        if (flags & LOCK_T_LEASED)
            atomic_store(&l->lease_until_us, l->sent_us + (int64_t)lock_lease_ms(l) * 1000 -
                                                 lock_margin_us(lock_lease_ms(l)));
        if (l->holds++ == 0) {
            l->acquired_us = mclock_us();
            l->released_us = 0;
            l->granted_wall_us = mclock_wall_us();
            wait_replicas(l);
            if (flags & LOCK_T_WATCHED) {
                l->watching = 1;
                watchdog_watch(l->core->watchdog, l);
            }
        }
    }
    l->wait_us += mclock_us() - start;
    return rc;
}

/* Whether the answer of the script that ends the hold says it ran to its
 * end: anything but an error, or an error whose first word is one of the
 * script's own (lock_append_release). */
static int release_ran(const struct lock *l, const redisReply *answer) {
    if (!answer || answer->type != REDIS_REPLY_ERROR) return answer != NULL;
    size_t word = strcspn(answer->str, " ");
    for (const char *const *o = l->release_own; o && *o; o++)
        if (strlen(*o) == word && strncmp(answer->str, *o, word) == 0) return 1;
    return 0;
}

/* The hold ends with the script the holder appended (lock_append_release):
 * sends the pipeline and reads it. 1 when the script ran (every hold has
 * ended in Redis, whatever it answered), 0 when it did not run to its end
 * (refused: NOSCRIPT, OOM, MOVED, READONLY, BUSY, ...; or an error
 * partway): the caller releases as usual, checked against the owner, -1
 * when the replies were lost (everything was given up). */
static int release_appended(struct lock *l) {
    int i = l->releasing - 1;
    l->releasing = 0;
    lock_release_pause(l);
    int64_t sent = mclock_us();
    if (pipeline_flush(l, 0) < 0) {
        give_up(l);
        return -1;
    }
    const redisReply *answer = lock_reply(l, i);
    if (script_missing(answer)) return 0;
    if (!release_ran(l, answer)) {
        /* What it did, if anything, is not known to the type: its riders
         * check before they queue. The lock may still be the holder's. */
        if (l->type->handed) l->type->handed(l, NULL);
        return 0;
    }
    if (l->type->handed) l->type->handed(l, answer);
    cleanups_clear(l);
    unwatch(l);
    l->holds = 0;
    l->released_us = sent;
    gate_leave(l);
    return 1;
}

int lock_release(struct lock *l) {
    l->errstr[0] = '\0';
    if (l->holds == 0) return lock_flush(l) == 0 ? LOCK_OK : LOCK_ERR;
    if (l->c && l->c->err) {
        give_up(l); /* the holder's connection died: what it sent is unknown */
        return LOCK_ERR;
    }
    if (l->releasing) {
        int ended = release_appended(l);
        if (ended != 0) return ended > 0 ? LOCK_OK : LOCK_ERR;
    }
    if ((l->release_delay_ms > 0 || !(l->type->flags & LOCK_T_REDIS)) &&
        pipeline_flush(l, l->holds == 1) < 0) {
        /* Sent now, not with a release that comes later or elsewhere. */
        give_up(l);
        return LOCK_ERR;
    }
    if (l->holds == 1) unwatch(l);
    l->holds--;
    l->gate_at_send = l->holds == 0 && l->gated;
    /* The hold ends as its release goes out: stamped before the type lets
     * the next holder in (a local unlock), never after. */
    if (l->holds == 0) l->released_us = mclock_us();
    int rc = l->type->release(l);
    l->gate_at_send = 0;
    if (rc == LOCK_ERR) {
        l->holds++;
        give_up(l);
        return LOCK_ERR;
    }
    if (l->holds == 0) gate_leave(l);
    return rc;
}

int lock_holds(const struct lock *l) { return l->holds; }

const struct lock_type *lock_type_of(const struct lock *l) { return l->type; }

int lock_check(struct lock *l) {
    if (l->holds == 0 || atomic_load(&l->lost)) return LOCK_LOST;
    if ((l->type->flags & LOCK_T_CHECKED) && lock_lease_passed(l)) {
        snprintf(l->errstr, sizeof(l->errstr), "the lease ran out before the commit");
        return LOCK_LOST;
    }
    return LOCK_OK;
}

int lock_commit_check(struct lock *l) {
    if (!(l->type->flags & LOCK_T_UNHEEDED)) unwatch(l);
    return lock_check(l);
}

void lock_guard(const struct lock *l, struct lock_guard *g) {
    memset(g, 0, sizeof(*g));
    g->kind = "";
    g->key = l->key;
    if (l->type->guard) l->type->guard(l, g);
    g->enforce = g->kind[0] && (l->type->flags & LOCK_T_CHECKED);
}

void lock_fence_key(const struct lock *l, char *buf, size_t len) {
    if (l->type->store)
        snprintf(buf, len, "%s:fence:%s", l->key, l->type->store->name);
    else
        snprintf(buf, len, "%s:fence", l->key);
}

void lock_string_guard(const struct lock *l, struct lock_guard *g) {
    g->kind = "string";
    snprintf(g->field, sizeof(g->field), "%s", l->owner);
}

void lock_hash_guard(const struct lock *l, struct lock_guard *g) {
    g->kind = "hash";
    snprintf(g->field, sizeof(g->field), "%s", l->owner);
}

int lock_lease_passed(const struct lock *l) {
    int64_t until = atomic_load(&((struct lock *)l)->lease_until_us);
    return until > 0 && mclock_us() >= until;
}

void lock_free(struct lock *l) {
    if (!l) return;
    while (l->holds > 0) lock_release(l);
    if (pipeline_flush(l, 1) < 0) give_up(l);
    if (l->c) rpool_put(l->pool, l->c); /* dropped if it failed */
    l->c = NULL;
    if (l->orphaned) {
        watchdog_adopt(l->core->watchdog, l); /* frees it when done */
        return;
    }
    lock_destroy(l);
}

void lock_report(const struct lock *l, struct lock_report *r) {
    memset(r, 0, sizeof(*r));
    snprintf(r->owner, sizeof(r->owner), "%s", l->owner);
    r->holds = l->holds;
    r->attempts = l->attempts;
    r->wait_us = l->wait_us;
    if (l->acquired_us)
        r->hold_us = (l->released_us ? l->released_us : mclock_us()) - l->acquired_us;
    r->granted_wall_us = l->granted_wall_us;
    int64_t until = atomic_load(&((struct lock *)l)->lease_until_us);
    r->lease_wall_us = until ? mclock_wall_us() + (until - mclock_us()) : 0;
    r->renewals = atomic_load(&((struct lock *)l)->renewals);
    r->replicas_wanted = l->replicas_wanted;
    r->replicas_acked = l->replicas_acked;
    if (l->type->report) l->type->report(l, r);
}

/* ---- a hold in one call (lock.h) ------------------------------------------ */

/* The end_session fault, once the holder is inside: its store session is
 * ended from outside, and the hold goes on, not told. */
static void hold_end_session(struct lock_hold *h) {
    h->session_end_us = mclock_wall_us();
    if (lock_end_session(h->l, h->session_error, sizeof(h->session_error)) == LOCK_OK) {
        h->session_ended = 1;
        h->session_gone_us = mclock_wall_us();
    } else {
        h->session_ended = -1;
    }
}

/* The read: the plan's own appends, then the GET of the carried key when
 * the grant did not bring its value, sent in one write; then the plan's
 * inside step, whose answer it returns (below 0: nothing is written). */
static int hold_read(const struct lock_hold_plan *p, struct lock_hold *h) {
    int go = p->read ? p->read(h, p->arg) : 0;
    if (go < 0) return go;
    int got = -1;
    if (p->carry && !h->has_carried) {
        const char *get[] = {"GET", p->carry};
        got = lock_append(h->l, 2, get, NULL);
    }
    h->flushed = p->carry && !h->has_carried && got < 0 ? -1 : lock_flush(h->l);
    if (got >= 0 && h->flushed == 0) h->carry_reply = lock_reply(h->l, got);
    return p->inside ? p->inside(h, p->arg) : 0;
}

/* Inside, held: the read, its replies, the faults, the commit point, the
 * write. */
static void hold_inside(const struct lock_hold_plan *p, struct lock_hold *h) {
    struct lock *l = h->l;
    if (p->crash) _exit(86); /* fault: die holding the lock */
    h->connected = lock_connect(l) == 0;
    h->has_carried = lock_carried(l, &h->carried);
    lock_fence_key(l, h->fence, sizeof(h->fence));
    lock_report(l, &h->report);
    if (!h->connected) { /* nothing appended: the release gives it up if need be */
        h->flushed = -1;
        if (p->inside) p->inside(h, p->arg);
        return;
    }
    int go = hold_read(p, h);
    if (go == 0 && p->end_session) hold_end_session(h);
    mclock_sleep_ms(p->hold_ms);
    if (go < 0) return;
    /* The commit point: no renewal from here on, and the last check of the
     * lease right before the write goes out with the release. */
    h->may_commit = lock_commit_check(l) == LOCK_OK;
    mclock_sleep_ms(p->commit_delay_ms); /* fault: a stall after the last check */
    h->late = lock_lease_passed(l);
    lock_guard(l, &h->guard);
    h->hands_on = lock_handover(l, &h->handover) == 0;
    lock_report(l, &h->report);
    if (p->write) p->write(h, p->arg);
}

int lock_hold(struct lock_core *core, const struct lock_hold_plan *p, struct lock_hold *h) {
    memset(h, 0, sizeof(*h));
    struct lock *l = h->l = lock_new(core, p->type, p->key);
    if (!l) return LOCK_HOLD_NOMEM;
    lock_set_release_delay(l, p->release_delay_ms);
    if (p->wait_given) lock_set_wait(l, p->wait_ms);
    if (p->carry) lock_carry(l, p->carry);
    int rc = lock_acquire(l);
    for (int i = 0; rc == LOCK_OK && i < p->nested; i++) rc = lock_acquire(l);
    h->acquired = rc;
    if (rc == LOCK_OK)
        hold_inside(p, h);
    else
        snprintf(h->errstr, sizeof(h->errstr), "%s", lock_errstr(l));
    while (l->holds > 0) h->lost |= lock_release(l) == LOCK_LOST;
    lock_report(l, &h->report);
    if (p->done) p->done(h, p->arg);
    lock_free(l);
    h->l = NULL;
    h->carried = NULL;
    h->carry_reply = NULL;
    h->guard.key = NULL;
    h->handover.key = NULL;
    return rc;
}
