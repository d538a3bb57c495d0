/* inventory.c -- the inventory service (see inventory.h).
 *
 * A locked sale costs, besides the lock itself, two round trips: the probe's
 * INCR pipelined with GET stock, then SET, RPUSH and the probe's DECR
 * pipelined together. Nothing here is ever re-sent after an I/O error: a
 * SET or RPUSH whose reply was lost may have been applied, so the sale is
 * reported as backend_unavailable and the connection is dropped. */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uuid/uuid.h>
#include "config.h"
#include "inventory.h"
#include "mclock.h"
#include "redlock.h"
#include "rpool.h"
#include "script.h"

static atomic_uint_fast64_t order_seq;

static int heartbeat_start(struct inventory *inv, char *errstr, size_t errlen);

int inventory_init(struct inventory *inv, const struct config *cfg,
                   struct rpool *pool, char *errstr, size_t errlen) {
    memset(inv, 0, sizeof(*inv));
    inv->pool = pool;
    inv->port = cfg->port;
    inv->probe = cfg->probe;
    inv->pool_wait_ms = cfg->redis_timeout_ms;
    inv->lock_env.pool = pool;
    inv->lock_env.ttl_ms = cfg->lock_ttl_ms;
    inv->lock_env.wait_ms = cfg->lock_wait_ms;
    inv->lock_env.spin_sleep_ms = cfg->lock_spin_sleep_ms;
    inv->lock_env.retry_depth = cfg->lock_retry_depth;
    inv->lock_env.sync_replicas = cfg->lock_sync_replicas;
    if (!inventory_item_valid(cfg->stock_key)) {
        snprintf(errstr, errlen, "inventory.key: '%.80s' must be 1 to %d characters of "
                 "A-Z, a-z, 0-9, '_', ':', '.' and '-'", cfg->stock_key, INVENTORY_ITEM_MAX);
        return -1;
    }
    snprintf(inv->stock_key, sizeof(inv->stock_key), "%.64s", cfg->stock_key);
    snprintf(inv->lock_name, sizeof(inv->lock_name), "%s", cfg->lock_name);
    inv->lock_per_item = strcmp(cfg->lock_scope, "item") == 0;
    inv->read_lock = cfg->read_lock;
    inv->redlock = redlock_create(cfg->redlock_nodes, cfg->redis_password,
                                  cfg->redlock_node_timeout_ms, cfg->lock_ttl_ms,
                                  cfg->redis_pool_size, errstr, errlen);
    if (!inv->redlock) return -1;
    inv->lock_env.redlock = inv->redlock;
    uuid_t u;
    uuid_generate(u);
    snprintf(inv->instance, sizeof(inv->instance), "%02x%02x%02x%02x", u[0], u[1], u[2], u[3]);
    snprintf(inv->alive_key, sizeof(inv->alive_key), "%s:alive:%s", inv->stock_key, inv->instance);
    if (inv->probe && heartbeat_start(inv, errstr, errlen) < 0) return -1;
    return 0;
}

/* ---- the probe's heartbeat ------------------------------------------------
 * One thread per inventory renews <inventory.key>:alive:<instance> every
 * HEARTBEAT_MS with a lease of ALIVE_MS, on a connection of its own (a busy
 * pool must not make a live process look dead). Redis down: it retries. */

#define HEARTBEAT_MS 250
#define ALIVE_MS 1000

static void *heartbeat_main(void *arg) {
    struct inventory *inv = arg;
    redisContext *c = NULL;
    pthread_mutex_lock(&inv->heartbeat_mu);
    while (!inv->heartbeat_stop) {
        pthread_mutex_unlock(&inv->heartbeat_mu);
        char err[128];
        if (!c) c = rpool_connect(&inv->heartbeat_opts, err, sizeof(err));
        if (c) {
            redisReply *r = redisCommand(c, "SET %s 1 PX %d", inv->alive_key, ALIVE_MS);
            freeReplyObject(r);
            if (c->err) {
                redisFree(c);
                c = NULL;
            }
        }
        pthread_mutex_lock(&inv->heartbeat_mu);
        int64_t until = mclock_us() + HEARTBEAT_MS * 1000;
        struct timespec ts = {until / 1000000, (long)(until % 1000000) * 1000};
        while (!inv->heartbeat_stop &&
               pthread_cond_timedwait(&inv->heartbeat_cond, &inv->heartbeat_mu, &ts) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&inv->heartbeat_mu);
    if (c) {
        redisReply *r = redisCommand(c, "DEL %s", inv->alive_key);   /* gone: no holder left */
        freeReplyObject(r);
        redisFree(c);
    }
    return NULL;
}

static int heartbeat_start(struct inventory *inv, char *errstr, size_t errlen) {
    pthread_mutex_init(&inv->heartbeat_mu, NULL);
    mclock_cond_init(&inv->heartbeat_cond);
    inv->heartbeat_opts = *rpool_options(inv->pool);
    inv->heartbeat_opts.on_connect = NULL;
    if (pthread_create(&inv->heartbeat, NULL, heartbeat_main, inv) != 0) {
        snprintf(errstr, errlen, "cannot start the probe's heartbeat thread");
        return -1;
    }
    inv->heartbeat_running = 1;
    return 0;
}

void inventory_free(struct inventory *inv) {
    if (inv->heartbeat_running) {
        pthread_mutex_lock(&inv->heartbeat_mu);
        inv->heartbeat_stop = 1;
        pthread_cond_signal(&inv->heartbeat_cond);
        pthread_mutex_unlock(&inv->heartbeat_mu);
        pthread_join(inv->heartbeat, NULL);
        inv->heartbeat_running = 0;
        pthread_cond_destroy(&inv->heartbeat_cond);
        pthread_mutex_destroy(&inv->heartbeat_mu);
    }
    redlock_free(inv->redlock);
    inv->redlock = NULL;
    inv->lock_env.redlock = NULL;
}

int inventory_item_valid(const char *item) {
    size_t n = strlen(item);
    if (n == 0 || n > INVENTORY_ITEM_MAX) return 0;
    for (const char *p = item; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

void inventory_keys(const struct inventory *inv, const char *item, struct inventory_keys *k) {
    if (!item) item = inv->stock_key;
    snprintf(k->stock, sizeof(k->stock), "%s", item);
    snprintf(k->ledger, sizeof(k->ledger), "%s:sold", item);
    snprintf(k->initial, sizeof(k->initial), "%s:initial", item);
    snprintf(k->holders, sizeof(k->holders), "%s:holders", item);
    snprintf(k->violations, sizeof(k->violations), "%s:violations", item);
    if (inv->lock_per_item) snprintf(k->lock, sizeof(k->lock), "%s:%s", inv->lock_name, item);
    else snprintf(k->lock, sizeof(k->lock), "%s", inv->lock_name);
}

/* Reads a Redis string reply as a whole number. 0 on success. */
static int parse_ll(const redisReply *r, long long *out) {
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return 0;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(r->str, &end, 10);
    if (errno || *end != '\0') return -1;
    *out = v;
    return 0;
}

static int sale_backend(struct sale_result *r, const char *what, const char *why) {
    snprintf(r->errstr, sizeof(r->errstr), "Redis is unavailable (%.32s: %.150s)", what, why);
    return r->status = INV_BACKEND;
}

/* Reads n pipelined replies into rep[]. On an I/O error every reply read so
 * far is freed and -1 is returned. */
static int read_replies(redisContext *c, redisReply **rep, int n) {
    for (int i = 0; i < n; i++) {
        void *v = NULL;
        if (redisGetReply(c, &v) != REDIS_OK) {
            for (int j = 0; j < i; j++) freeReplyObject(rep[j]);
            return -1;
        }
        rep[i] = v;
    }
    return 0;
}

static void free_replies(redisReply **rep, int n) {
    for (int i = 0; i < n; i++) freeReplyObject(rep[i]);
}

static void next_order(struct inventory *inv, char *buf, size_t len) {
    uint64_t n = atomic_fetch_add(&order_seq, 1) + 1;
    snprintf(buf, len, "%s-%" PRIu64, inv->instance, n);
}

static int sell_atomic(struct inventory *inv, const struct inventory_keys *k, redisContext *c,
                       struct sale_result *r) {
    char port[16];
    snprintf(port, sizeof(port), "%d", inv->port);
    const char *argv[] = {k->stock, k->ledger, r->order, port};
    char err[128];
    r->attempts = 1;
    redisReply *rep = script_run(c, "atomic-sale", 2, 4, argv, NULL, err, sizeof(err));
    if (!rep) return sale_backend(r, "atomic-sale", err);
    int rc;
    if (rep->type == REDIS_REPLY_ERROR) {
        if (strncmp(rep->str, "BADSTOCK", 8) == 0) {
            snprintf(r->errstr, sizeof(r->errstr), "%s", rep->str + 9);
            rc = r->status = INV_BAD_DATA;
        } else {
            rc = sale_backend(r, "atomic-sale", rep->str);
        }
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 &&
               rep->element[0]->type == REDIS_REPLY_INTEGER) {
        if (rep->element[0]->integer == 1 && rep->elements == 3) {
            r->remaining = rep->element[1]->integer;
            r->unit = rep->element[2]->integer;
            rc = r->status = INV_SOLD;
        } else {
            r->remaining = rep->element[1]->integer;
            rc = r->status = INV_SOLD_OUT;
        }
    } else {
        rc = sale_backend(r, "atomic-sale", "unexpected reply");
    }
    freeReplyObject(rep);
    return rc;
}

/* The fenced write: one script that applies SET and RPUSH only while the
 * lock's token is the newest issued. Returns INV_SOLD or the failure. */
static int write_fenced(const struct inventory_keys *k, redisContext *c, const struct lock *l,
                        long long stock, const char *entry, struct sale_result *r) {
    char fence[224], token[24], next[24], err[128];
    snprintf(fence, sizeof(fence), "%s:fence", l->key);
    snprintf(token, sizeof(token), "%lld", l->token);
    snprintf(next, sizeof(next), "%lld", stock - 1);
    const char *argv[] = {k->stock, k->ledger, fence, token, next, entry};
    redisReply *rep = script_run(c, "fenced-sale", 3, 6, argv, NULL, err, sizeof(err));
    if (!rep) return sale_backend(r, "fenced-sale", err);
    int rc = INV_SOLD;
    if (rep->type == REDIS_REPLY_ERROR) {
        if (strncmp(rep->str, "STALE", 5) == 0) {
            snprintf(r->errstr, sizeof(r->errstr),
                     "write refused: fencing %.120s; this holder lost the lock", rep->str + 6);
            rc = r->status = INV_STALE_TOKEN;
        } else {
            rc = sale_backend(r, "fenced-sale", rep->str);
        }
    }
    freeReplyObject(rep);
    return rc;
}

/* Sets the same failure on every result of a batch; returns the status. */
static int fail_all(struct sale_result **rs, int n, int status, const char *errstr) {
    for (int i = 0; i < n; i++) {
        rs[i]->status = status;
        if (rs[i] != rs[0] || errstr != rs[0]->errstr)
            snprintf(rs[i]->errstr, sizeof(rs[i]->errstr), "%s", errstr);
    }
    return status;
}

/* The demo's critical section, run while the lock is held: read, check,
 * write, with the probe around it, for n sales at once (n is 1 but for the
 * batched strategy): one GET, then units stock, stock-1, ... go to the first
 * min(n, stock) sales with one SET and one RPUSH of all their entries; the
 * others are sold out. Faults are rs[0]'s. */
static int sell_locked_section(struct inventory *inv, const struct inventory_keys *k,
                               redisContext *c, const struct lock *l,
                               const struct sale_faults *f, struct sale_result **rs, int n) {
    struct sale_result *r = rs[0];
    redisReply *rep[4];
    int nrep = 0;
    char sha[41] = "", err[128];
    if (inv->probe && script_sha(c, "probe-enter", sha, err, sizeof(err)) == 0) {
        const char *argv[] = {"EVALSHA", sha, "2", k->holders, k->violations, r->order,
                              inv->alive_key};
        redisAppendCommandArgv(c, 7, argv, NULL);
        nrep++;
    }
    redisAppendCommand(c, "GET %s", k->stock);
    nrep++;
    if (read_replies(c, rep, nrep) < 0) {
        sale_backend(r, "GET stock", c->errstr);
        return fail_all(rs, n, r->status, r->errstr);
    }
    /* NOSCRIPT (a restarted or flushed Redis): the entry did not run; it
     * runs now, before the section goes on. */
    if (nrep == 2 && rep[0]->type == REDIS_REPLY_ERROR && strncmp(rep[0]->str, "NOSCRIPT", 8) == 0) {
        const char *argv[] = {k->holders, k->violations, r->order, inv->alive_key};
        freeReplyObject(rep[0]);
        rep[0] = script_run(c, "probe-enter", 2, 4, argv, NULL, err, sizeof(err));
        if (!rep[0]) {
            freeReplyObject(rep[1]);
            sale_backend(r, "probe", err);
            return fail_all(rs, n, r->status, r->errstr);
        }
    }
    redisReply *stock_rep = rep[nrep - 1];
    int entered = nrep == 2 && rep[0]->type == REDIS_REPLY_INTEGER;
    long long inside = entered ? rep[0]->integer : 0;
    long long stock = 0;
    int bad = 0;
    if (stock_rep->type == REDIS_REPLY_ERROR) {
        sale_backend(r, "GET stock", stock_rep->str);
        bad = 1;
    } else if (stock_rep->type == REDIS_REPLY_NIL) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "stock key %s does not exist; POST /inventory/reset first", k->stock);
        r->status = INV_BAD_DATA;
        bad = 1;
    } else if (parse_ll(stock_rep, &stock) < 0) {
        snprintf(r->errstr, sizeof(r->errstr), "stock key %.60s holds '%.40s', not a whole number",
                 k->stock, stock_rep->str);
        r->status = INV_BAD_DATA;
        bad = 1;
    }
    free_replies(rep, nrep);
    for (int i = 0; i < n; i++) rs[i]->violation = inside > 1;

    if (f->hold_ms > 0) mclock_sleep_ms(f->hold_ms);

    long long sold = bad || stock <= 0 ? 0 : (stock < n ? stock : n);
    if (sold > 0 && lock_is_lost(l)) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "the lock %.120s was lost before the write (renewal failed); nothing was sold",
                 l->key);
        r->status = INV_LOCK_LOST;
        bad = 1;
        sold = 0;
    }
    /* Ledger entries, "unit|order|port", one per unit sold. */
    char (*entries)[128] = sold ? malloc((size_t)sold * sizeof(*entries)) : NULL;
    if (sold && !entries) {
        snprintf(r->errstr, sizeof(r->errstr), "out of memory for %lld ledger entries", sold);
        r->status = INV_BACKEND;
        bad = 1;
        sold = 0;
    }
    for (long long i = 0; i < sold; i++) {
        rs[i]->unit = stock - i;
        rs[i]->remaining = stock - i - 1;
        snprintf(entries[i], sizeof(entries[i]), "%lld|%s|%d", stock - i, rs[i]->order, inv->port);
    }

    nrep = 0;
    int writes = 0, write_failed = 0;
    if (sold > 0 && (l->type->flags & LOCK_F_FENCED)) {
        if (write_fenced(k, c, l, stock, entries[0], r) != INV_SOLD) bad = write_failed = 1;
    } else if (sold > 0) {
        const char **argv = malloc((size_t)(sold + 2) * sizeof(*argv));
        if (!argv) {
            snprintf(r->errstr, sizeof(r->errstr), "out of memory");
            r->status = INV_BACKEND;
            bad = 1;
        } else {
            argv[0] = "RPUSH";
            argv[1] = k->ledger;
            for (long long i = 0; i < sold; i++) argv[2 + i] = entries[i];
            redisAppendCommand(c, "SET %s %lld", k->stock, stock - sold);
            redisAppendCommandArgv(c, (int)sold + 2, argv, NULL);
            free(argv);
            nrep = writes = 2;
        }
    }
    free(entries);
    if (entered) {
        redisAppendCommand(c, "HDEL %s %s", k->holders, r->order);
        nrep++;
    }
    if (nrep > 0) {
        if (read_replies(c, rep, nrep) < 0) {
            sale_backend(r, "SET stock", c->errstr);
            return fail_all(rs, n, r->status, r->errstr);
        }
        for (int i = 0; i < writes; i++) {
            if (rep[i]->type == REDIS_REPLY_ERROR && !write_failed) {
                sale_backend(r, "SET stock", rep[i]->str);
                write_failed = 1;
            }
        }
        free_replies(rep, nrep);
    }
    if (bad || write_failed) return fail_all(rs, n, r->status, r->errstr);
    for (int i = 0; i < n; i++) {
        if (i < sold) {
            rs[i]->status = INV_SOLD;
        } else {
            rs[i]->status = INV_SOLD_OUT;
            rs[i]->remaining = stock - sold;
        }
    }
    return r->status;
}

/* Gives back every hold of l. If the sale's connection died, the release
 * goes on a fresh one: releasing is safe to send on a new connection, since
 * the old one's commands were all answered or lost with it. */
static void release_all(struct inventory *inv, struct lock *l, redisContext **c,
                        struct sale_result *r) {
    while (l->holds > 0) {
        if ((l->type->flags & LOCK_F_REDIS) && (*c == NULL || (*c)->err)) {
            char err[128];
            rpool_drop(inv->pool, *c);
            *c = rpool_get(inv->pool, inv->pool_wait_ms, err, sizeof(err));
            l->c = *c;
            if (!*c) {
                lock_forget(l);   /* its lease will free it in Redis */
                return;
            }
        }
        if (lock_release(l) == LOCK_LOST) r->lost = 1;
    }
}

/* Takes the lock of type t for the n sales in rs[] (faults f), runs the
 * critical section for all of them, releases, and reports the lock's figures
 * in every result. */
static void sell_under_lock(struct inventory *inv, const struct lock_type *t,
                            const struct inventory_keys *k, const struct sale_faults *f,
                            struct sale_result **rs, int n) {
    struct sale_result *r = rs[0];
    char err[160];   /* room for a sentinel error naming every sentinel */
    redisContext *c = rpool_get(inv->pool, inv->pool_wait_ms, err, sizeof(err));
    if (!c) {
        sale_backend(r, "connection", err);
        fail_all(rs, n, r->status, r->errstr);
        return;
    }
    if (t->flags & LOCK_F_ATOMIC) {
        sell_atomic(inv, k, c, r);
        rpool_put(inv->pool, c);
        return;
    }

    struct lock l;
    lock_init(&l, inv->read_lock ? lock_type_writer(t) : t, &inv->lock_env, c, k->lock);
    l.release_delay_ms = f->release_delay_ms;
    int rc = lock_acquire(&l);
    for (int i = 0; rc == LOCK_OK && i < f->nested; i++) rc = lock_acquire(&l);

    if (rc == LOCK_OK) {
        if (f->crash) _exit(86);   /* fault: die holding the lock */
        sell_locked_section(inv, k, c, &l, f, rs, n);
        int64_t held = (mclock_us() - l.acquired_us) / 1000;
        for (int i = 0; i < n; i++) rs[i]->hold_ms = held;
    } else if (rc == LOCK_BUSY) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "lock %.80s still busy after waiting %d ms (%d attempts%s%.60s)",
                 l.key, inv->lock_env.wait_ms, l.attempts, l.errstr[0] ? "; " : "", l.errstr);
        fail_all(rs, n, INV_LOCK_TIMEOUT, r->errstr);
    } else {
        sale_backend(r, "lock", l.errstr);
        fail_all(rs, n, r->status, r->errstr);
    }
    release_all(inv, &l, &c, r);
    for (int j = 0; j < n; j++) {
        struct sale_result *x = rs[j];
        x->lost = r->lost;
        x->attempts = l.attempts;
        x->renewals = atomic_load(&l.renewals);
        x->wait_ms = l.wait_us / 1000;
        x->depth = l.depth;
        x->token = l.token;
        x->replicas_wanted = l.replicas_wanted;
        x->replicas_acked = l.replicas_acked;
        x->batch = n;
        if (t->flags & LOCK_F_MULTI) {
            x->quorum = redlock_quorum(inv->redlock);
            x->nvotes = l.nvotes;
            for (int i = 0; i < l.nvotes; i++) {
                snprintf(x->votes[i].node, sizeof(x->votes[i].node), "%s",
                         redlock_node_name(inv->redlock, l.votes[i].node));
                x->votes[i].outcome = l.votes[i].outcome;
                x->votes[i].us = l.votes[i].us;
            }
        }
    }
    rpool_put(inv->pool, c);
}

/* ---- batched: one hold for every sale queued in this process ---------------
 *
 * Sales of the batched strategy queue per lock key. The first to find no
 * leader becomes it: it takes every queued sale (itself included, at most
 * BATCH_MAX), takes the distributed lock once, sells for all of them in one
 * critical section, answers each, and hands the lead to the oldest sale
 * still queued. Only the leader contends in Redis, so a process sends one
 * acquire per batch, however many requests wait. Every sale still gets its
 * own unit, order and answer.
 *
 * The queues live under batch_mu; a waiter's struct is on its own stack and
 * is touched by the leader only between being taken and being marked done,
 * while its owner waits for exactly that. */

#define BATCH_MAX 256

struct batch_waiter {
    struct sale_result *r;
    const struct sale_faults *f;
    int taken;                 /* a leader has it: only `done` may follow */
    int done;
    int lead;                  /* it is to lead the next batch */
    int64_t queued_us;
    pthread_cond_t cond;
    struct batch_waiter *next;
};

struct batch_queue {
    /* "<lock key>|<stock key>": one batch sells one item, under one lock
     * (with lock.scope=global, items share the lock but not a batch). */
    char key[sizeof(((struct inventory_keys *)0)->lock) + INVENTORY_ITEM_MAX + 2];
    int leading;
    struct batch_waiter *head, *tail;
    struct batch_queue *next;
};

static pthread_mutex_t batch_mu = PTHREAD_MUTEX_INITIALIZER;
static struct batch_queue *batch_queues;

static struct batch_queue *batch_queue_for(const struct inventory_keys *k) {
    char key[sizeof(((struct batch_queue *)0)->key)];
    snprintf(key, sizeof(key), "%s|%s", k->lock, k->stock);
    for (struct batch_queue *q = batch_queues; q; q = q->next)
        if (strcmp(q->key, key) == 0) return q;
    struct batch_queue *q = calloc(1, sizeof(*q));
    if (!q) return NULL;
    memcpy(q->key, key, sizeof(key));
    q->next = batch_queues;
    batch_queues = q;
    return q;
}

void inventory_batches_free(void) {
    pthread_mutex_lock(&batch_mu);
    while (batch_queues) {
        struct batch_queue *next = batch_queues->next;
        free(batch_queues);
        batch_queues = next;
    }
    pthread_mutex_unlock(&batch_mu);
}

/* Leads one batch: takes every sale queued in q, the leader's own first.
 * Called and returns with batch_mu held. */
static void batch_lead(struct inventory *inv, const struct lock_type *t,
                       const struct inventory_keys *k, struct batch_queue *q) {
    struct batch_waiter *take[BATCH_MAX];
    struct sale_result *rs[BATCH_MAX];
    int n = 0;
    while (q->head && n < BATCH_MAX) {
        struct batch_waiter *w = q->head;
        q->head = w->next;
        w->taken = 1;
        take[n] = w;
        rs[n++] = w->r;
    }
    if (!q->head) q->tail = NULL;
    pthread_mutex_unlock(&batch_mu);

    int64_t start = mclock_us();
    sell_under_lock(inv, t, k, take[0]->f, rs, n);
    /* Each sale waited for the lock in the queue, then in the acquire. */
    int64_t acquired = start + (int64_t)rs[0]->wait_ms * 1000;
    for (int i = 0; i < n; i++) rs[i]->wait_ms = (acquired - take[i]->queued_us) / 1000;

    pthread_mutex_lock(&batch_mu);
    for (int i = 0; i < n; i++) {
        take[i]->done = 1;
        pthread_cond_signal(&take[i]->cond);
    }
    if (q->head) {
        q->head->lead = 1;
        pthread_cond_signal(&q->head->cond);
    } else {
        q->leading = 0;
    }
}

static int sell_batched(struct inventory *inv, const struct lock_type *t,
                        const struct inventory_keys *k, const struct sale_faults *f,
                        struct sale_result *r) {
    struct batch_waiter w = {.r = r, .f = f, .queued_us = mclock_us()};
    mclock_cond_init(&w.cond);

    pthread_mutex_lock(&batch_mu);
    struct batch_queue *q = batch_queue_for(k);
    if (!q) {
        pthread_mutex_unlock(&batch_mu);
        pthread_cond_destroy(&w.cond);
        return sale_backend(r, "batch", "out of memory");
    }
    if (q->tail) q->tail->next = &w;
    else q->head = &w;
    q->tail = &w;
    if (!q->leading) {
        q->leading = 1;
        w.lead = 1;
    }
    while (!w.done) {
        if (w.lead && !w.taken) {
            batch_lead(inv, t, k, q);
            continue;
        }
        pthread_cond_wait(&w.cond, &batch_mu);
    }
    pthread_mutex_unlock(&batch_mu);
    pthread_cond_destroy(&w.cond);
    return r->status;
}

int inventory_sell(struct inventory *inv, const struct lock_type *t, const char *item,
                   const struct sale_faults *f, struct sale_result *r) {
    static const struct sale_faults no_faults;
    if (!f) f = &no_faults;
    memset(r, 0, sizeof(*r));
    next_order(inv, r->order, sizeof(r->order));
    struct inventory_keys k;
    inventory_keys(inv, item, &k);
    if (t->flags & LOCK_F_BATCH) return sell_batched(inv, t, &k, f, r);
    sell_under_lock(inv, t, &k, f, &r, 1);
    return r->status;
}

/* GET stock on c, parsed. */
static int read_stock(const struct inventory_keys *k, redisContext *c, long long *stock,
                      char *errstr, size_t errlen) {
    redisReply *r = redisCommand(c, "GET %s", k->stock);
    int rc = INV_SOLD;
    if (!r) {
        snprintf(errstr, errlen, "GET stock: %.120s", c->errstr);
        rc = INV_BACKEND;
    } else if (r->type == REDIS_REPLY_NIL) {
        snprintf(errstr, errlen, "stock key %s does not exist; POST /inventory/reset first",
                 k->stock);
        rc = INV_BAD_DATA;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(errstr, errlen, "GET stock: %.120s", r->str);
        rc = INV_BACKEND;
    } else if (parse_ll(r, stock) < 0) {
        snprintf(errstr, errlen, "stock key %.60s holds '%.40s', not a whole number",
                 k->stock, r->str);
        rc = INV_BAD_DATA;
    }
    freeReplyObject(r);
    return rc;
}

int inventory_stock(struct inventory *inv, const char *item, int hold_ms, long long *stock,
                    char *errstr, size_t errlen) {
    struct inventory_keys k;
    inventory_keys(inv, item, &k);
    redisContext *c = rpool_get(inv->pool, inv->pool_wait_ms, errstr, errlen);
    if (!c) return INV_BACKEND;
    if (!inv->read_lock) {
        int rc = read_stock(&k, c, stock, errstr, errlen);
        mclock_sleep_ms(hold_ms);
        rpool_put(inv->pool, c);
        return rc;
    }
    struct lock l;
    lock_init(&l, &lock_type_rw_read, &inv->lock_env, c, k.lock);
    int rc = lock_acquire(&l);
    if (rc == LOCK_OK) {
        rc = read_stock(&k, c, stock, errstr, errlen);
        mclock_sleep_ms(hold_ms);
    } else if (rc == LOCK_BUSY) {
        snprintf(errstr, errlen, "read lock %.80s still busy after waiting %d ms",
                 l.key, inv->lock_env.wait_ms);
        rc = INV_LOCK_TIMEOUT;
    } else {
        snprintf(errstr, errlen, "read lock: %.120s", l.errstr);
        rc = INV_BACKEND;
    }
    struct sale_result ignored;
    release_all(inv, &l, &c, &ignored);
    rpool_put(inv->pool, c);
    return rc;
}

int inventory_reset(struct inventory *inv, const char *item, long long stock,
                    char *errstr, size_t errlen) {
    struct inventory_keys k;
    inventory_keys(inv, item, &k);
    redisContext *c = rpool_get(inv->pool, inv->pool_wait_ms, errstr, errlen);
    if (!c) return INV_BACKEND;
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "SET %s %lld", k.stock, stock);
    redisAppendCommand(c, "SET %s %lld", k.initial, stock);
    redisAppendCommand(c, "DEL %s %s %s %s %s:fence", k.ledger, k.holders, k.violations, k.lock, k.lock);
    redisAppendCommand(c, "EXEC");
    redisReply *rep[5];
    int rc = 0;
    if (read_replies(c, rep, 5) < 0) {
        snprintf(errstr, errlen, "reset: %s", c->errstr);
        rc = INV_BACKEND;
    } else {
        if (rep[4]->type != REDIS_REPLY_ARRAY) {
            snprintf(errstr, errlen, "reset: %s",
                     rep[4]->type == REDIS_REPLY_ERROR ? rep[4]->str : "transaction aborted");
            rc = INV_BACKEND;
        }
        free_replies(rep, 5);
    }
    rpool_put(inv->pool, c);
    return rc;
}

int inventory_seed(struct inventory *inv, long long stock, int *seeded,
                   char *errstr, size_t errlen) {
    struct inventory_keys k;
    inventory_keys(inv, NULL, &k);
    *seeded = 0;
    redisContext *c = rpool_get(inv->pool, inv->pool_wait_ms, errstr, errlen);
    if (!c) return INV_BACKEND;
    redisAppendCommand(c, "SET %s %lld NX", k.stock, stock);
    redisAppendCommand(c, "SET %s %lld NX", k.initial, stock);
    redisReply *rep[2];
    int rc = 0;
    if (read_replies(c, rep, 2) < 0) {
        snprintf(errstr, errlen, "seed: %.120s", c->errstr);
        rc = INV_BACKEND;
    } else {
        if (rep[0]->type == REDIS_REPLY_ERROR) {
            snprintf(errstr, errlen, "seed: %.120s", rep[0]->str);
            rc = INV_BACKEND;
        }
        *seeded = rep[0]->type == REDIS_REPLY_STATUS;
        free_replies(rep, 2);
    }
    rpool_put(inv->pool, c);
    return rc;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int inventory_audit(struct inventory *inv, const char *item, struct audit *a,
                    char *errstr, size_t errlen) {
    struct inventory_keys k;
    inventory_keys(inv, item, &k);
    memset(a, 0, sizeof(*a));
    redisContext *c = rpool_get(inv->pool, inv->pool_wait_ms, errstr, errlen);
    if (!c) return INV_BACKEND;
    redisAppendCommand(c, "GET %s", k.stock);
    redisAppendCommand(c, "GET %s", k.initial);
    redisAppendCommand(c, "GET %s", k.violations);
    redisAppendCommand(c, "LRANGE %s 0 -1", k.ledger);
    redisReply *rep[4];
    if (read_replies(c, rep, 4) < 0) {
        snprintf(errstr, errlen, "audit: %s", c->errstr);
        rpool_drop(inv->pool, c);
        return INV_BACKEND;
    }
    rpool_put(inv->pool, c);
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        if (rep[i]->type == REDIS_REPLY_ERROR) {
            snprintf(errstr, errlen, "audit: %s", rep[i]->str);
            rc = INV_BACKEND;
        }
    }
    if (rc == 0 && (parse_ll(rep[0], &a->stock) < 0 || parse_ll(rep[1], &a->initial) < 0)) {
        snprintf(errstr, errlen, "stock key %s or %s is missing or not a whole number; "
                 "POST /inventory/reset first", k.stock, k.initial);
        rc = INV_BAD_DATA;
    }
    if (rc == 0) {
        if (rep[2]->type != REDIS_REPLY_NIL) parse_ll(rep[2], &a->violations);
        size_t n = rep[3]->elements;
        long long *units = n ? malloc(n * sizeof(*units)) : NULL;
        if (n && !units) {
            snprintf(errstr, errlen, "audit: out of memory for %zu ledger entries", n);
            rc = INV_BACKEND;
        } else {
            for (size_t i = 0; i < n; i++)
                units[i] = strtoll(rep[3]->element[i]->str, NULL, 10);
            if (n) qsort(units, n, sizeof(*units), cmp_ll);
            for (size_t i = 1; i < n; i++)
                if (units[i] == units[i - 1]) a->sold_twice++;
            free(units);
            a->sold = (long long)n;
            long long given = a->initial - a->stock;
            a->oversold_units = a->sold > given ? a->sold - given : 0;
            a->oversold = a->sold_twice > 0 || a->oversold_units > 0 || a->stock < 0;
        }
    }
    free_replies(rep, 4);
    return rc;
}

int inventory_ping(struct inventory *inv, char *errstr, size_t errlen) {
    redisContext *c = rpool_get(inv->pool, inv->pool_wait_ms, errstr, errlen);
    if (!c) return INV_BACKEND;
    redisReply *r = redisCommand(c, "PING");
    int rc = 0;
    if (!r || r->type == REDIS_REPLY_ERROR) {
        snprintf(errstr, errlen, "PING: %s", r ? r->str : c->errstr);
        rc = INV_BACKEND;
    }
    freeReplyObject(r);
    rpool_put(inv->pool, c);
    return rc;
}
