/* inventory.c -- the inventory service's admin: making it, the keys of an
 * item, reads, reset, seed, audit and history (see inventory.h). Sales are
 * dispatched to their strategy's way (sale.c, batch.c).
 *
 * Threads: any; every call borrows its own connection from the pool. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>
#include "config.h"
#include "log.h"
#include "inventory_int.h"
#include "item.h"

_Static_assert(INVENTORY_ITEM_MAX == ITEM_MAX, "one bound for item names");
#include "lock.h"
#include "mclock.h"
#include "pipeline.h"
#include "probe.h"
#include "rpool.h"
#include "strategy.h"
#include "text.h"
#include "waitq.h"

static atomic_uint_fast64_t order_seq;

struct inventory *inventory_create(const struct config *cfg, struct rpool *pool,
                                   struct lock_core *core, char *errstr, size_t errlen) {
    char why[192];
    if (item_check(cfg->stock_key, cfg->lock_name, why, sizeof(why)) != 0) {
        snprintf(errstr, errlen, "inventory.key: %s", why);
        return NULL;
    }
    struct inventory *inv = calloc(1, sizeof(*inv));
    if (!inv || !(inv->batches = waitq_create())) {
        snprintf(errstr, errlen, "out of memory");
        free(inv);
        return NULL;
    }
    inv->cfg = cfg;
    inv->pool = pool;
    inv->core = core;
    inv->port = cfg->port;
    snprintf(inv->port_text, sizeof(inv->port_text), "%d", cfg->port);
    inv->pool_wait_ms = cfg->redis_timeout_ms;
    inv->lock_per_item = config_lock_per_item(cfg);
    inv->cluster = cfg->cluster_nodes[0] != '\0';
    inv->read_lock = cfg->read_lock;
    inv->history_max = cfg->history_enabled ? cfg->history_max_events : 0;
    snprintf(inv->stock_key, sizeof(inv->stock_key), "%.64s", cfg->stock_key);
    snprintf(inv->lock_name, sizeof(inv->lock_name), "%s", cfg->lock_name);
    uuid_t u;
    uuid_generate(u);
    snprintf(inv->instance, sizeof(inv->instance), "%02x%02x%02x%02x", u[0], u[1], u[2], u[3]);
    if (config_probe(cfg)) {
        char alive[INVENTORY_ITEM_MAX + 32];
        snprintf(alive, sizeof(alive), "%s:alive:%s", inv->stock_key, inv->instance);
        if (!(inv->probe = probe_create(pool, alive, errstr, errlen))) {
            inventory_free(inv);
            return NULL;
        }
    }
    return inv;
}

void inventory_free(struct inventory *inv) {
    if (!inv) return;
    pipeline_free(inv->pipeline);
    probe_free(inv->probe);
    waitq_free(inv->batches);
    free(inv);
}

int inventory_port(const struct inventory *inv) { return inv->port; }

/* dst = a b c, cut to size as snprintf cuts it. No printf: every sale
 * names its keys and its order. */
static void join3(char *dst, size_t size, const char *a, const char *b, const char *c) {
    const char *part[3] = {a, b, c};
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        for (const char *p = part[i]; *p && n + 1 < size; p++) dst[n++] = *p;
    dst[n] = '\0';
}

void inventory_keys(const struct inventory *inv, const char *item, struct item_keys *k) {
    if (!item) item = inv->stock_key;
    /* In cluster mode every key of the item shares the stock key's slot:
     * "{item}" hashes as "item" does (docs/deploy.md, keys that live together). */
    char tagged[INVENTORY_ITEM_MAX + 3];
    join3(tagged, sizeof(tagged), inv->cluster ? "{" : "", item, inv->cluster ? "}" : "");
    join3(k->stock, sizeof(k->stock), item, "", "");
    join3(k->ledger, sizeof(k->ledger), tagged, ":sold", "");
    join3(k->initial, sizeof(k->initial), tagged, ":initial", "");
    join3(k->holders, sizeof(k->holders), tagged, ":holders", "");
    join3(k->violations, sizeof(k->violations), tagged, ":violations", "");
    join3(k->families, sizeof(k->families), tagged, ":families", "");
    join3(k->history, sizeof(k->history), tagged, ":history", "");
    if (inv->lock_per_item)
        join3(k->lock, sizeof(k->lock), inv->lock_name, ":", tagged);
    else
        join3(k->lock, sizeof(k->lock), inv->lock_name, "", "");
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

int inv_parse_text(const char *s, long long *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0') return -1;
    *out = v;
    return 0;
}

int inv_parse_ll(const redisReply *r, long long *out) {
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return 0;
    }
    return r->type == REDIS_REPLY_STRING ? inv_parse_text(r->str, out) : -1;
}

/* The start-up seed comes after the port opens, and may come before Redis
 * can take it (Redis not up yet, a cluster still forming): until it has run,
 * a sale of the configured item or /readyz makes it first, so that no sale
 * ever meets a stock key that the seed was about to set. 0, or INV_BACKEND
 * with errstr set. */
static int seed_first(struct inventory *inv, char *errstr, size_t errlen) {
    char why[384];
    int seeded = 0;
    if (atomic_load(&inv->seed_done)) return 0;
    if (inventory_seed(inv, inv->cfg->initial_stock, &seeded, why, sizeof(why)) != 0) {
        snprintf(errstr, errlen, "the stock %.120s is not seeded yet (%.200s)", inv->stock_key,
                 why);
        return INV_BACKEND;
    }
    if (seeded)
        log_limited("seed",
                    "%s did not exist: seeded with inventory.initial-stock=%d "
                    "(before the start-up seed had run)",
                    inv->stock_key, inv->cfg->initial_stock);
    return 0;
}

int inventory_sell_start(struct inventory *inv, const struct strategy *s, const char *item,
                         struct sale_result *r, struct item_keys *k) {
    memset(r, 0, sizeof(*r));
    char seq[24];
    seq[sizeof(seq) - 1] = '\0';
    join3(r->order, sizeof(r->order), inv->instance, "-",
          text_ull(seq + sizeof(seq) - 1, (uint64_t)atomic_fetch_add(&order_seq, 1) + 1));
    if (!config_allows(inv->cfg, s->name)) {
        snprintf(r->errstr, sizeof(r->errstr),
                 "strategy %s is not allowed here: lock.allowed is "
                 "'%.150s'",
                 s->name, inv->cfg->lock_allowed);
        return r->status = INV_NOT_ALLOWED;
    }
    if ((!item || strcmp(item, inv->stock_key) == 0) &&
        seed_first(inv, r->errstr, sizeof(r->errstr)) != 0)
        return r->status = INV_BACKEND;
    inventory_keys(inv, item, k);
    return 0;
}

int inventory_sell(struct inventory *inv, const struct strategy *s, const char *item,
                   const struct sale_faults *f, struct sale_result *r) {
    static const struct sale_faults no_faults;
    struct item_keys k;
    if (inventory_sell_start(inv, s, item, r, &k) != 0) return r->status;
    s->way->sell(inv, s, &k, f ? f : &no_faults, r);
    return r->status;
}

int inventory_pipeline_start(struct inventory *inv, char *errstr, size_t errlen) {
    if (inv->cluster || inv->pipeline) return 0;
    return (inv->pipeline = pipeline_create(inv, errstr, errlen)) ? 0 : -1;
}

int inventory_pipelined(const struct inventory *inv, const struct strategy *s) {
    return inv->pipeline && s->way->script && atomic_load(&inv->seed_done);
}

int inventory_sell_pipelined(struct inventory *inv, const struct strategy *s, const char *item,
                             struct sale_result *r, inventory_sold *done, void *arg) {
    if (!inventory_pipelined(inv, s)) return -1;
    struct item_keys k;
    if (inventory_sell_start(inv, s, item, r, &k) != 0) {
        done(arg);
        return 0;
    }
    return pipeline_submit(inv->pipeline, s, r, &k, done, arg);
}

/* A reply to GET stock, parsed. */
static int read_stock(const struct item_keys *k, const redisReply *r, long long *stock,
                      char *errstr, size_t errlen) {
    int rc = INV_SOLD;
    if (r->type == REDIS_REPLY_NIL) {
        snprintf(errstr, errlen, "stock key %s does not exist; POST /inventory/reset first",
                 k->stock);
        rc = INV_BAD_DATA;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(errstr, errlen, "GET stock: %.120s", r->str);
        rc = INV_BACKEND;
    } else if (inv_parse_ll(r, stock) < 0) {
        snprintf(errstr, errlen, "stock key %.60s holds '%.40s', not a whole number", k->stock,
                 r->str);
        rc = INV_BAD_DATA;
    }
    return rc;
}

/* A stock value carried with the lock's grant (NULL: no such key),
 * parsed. */
static int read_carried(const struct item_keys *k, const char *v, long long *stock, char *errstr,
                        size_t errlen) {
    if (!v) {
        snprintf(errstr, errlen, "stock key %s does not exist; POST /inventory/reset first",
                 k->stock);
        return INV_BAD_DATA;
    }
    if (inv_parse_text(v, stock) < 0) {
        snprintf(errstr, errlen, "stock key %.60s holds '%.40s', not a whole number", k->stock, v);
        return INV_BAD_DATA;
    }
    return INV_SOLD;
}

/* A read of the stock under the read lock (or none), as the lock core runs
 * a hold (lock_hold): the stock is its carried key, which the grant brings
 * or the core reads with one GET on the holder's connection. */
struct stock_read {
    struct inventory *inv;
    const struct item_keys *k;
    int rc;
    long long *stock;
    char *errstr;
    size_t errlen;
};

static int stock_got(struct lock_hold *h, void *arg) {
    struct stock_read *sr = arg;
    if (h->flushed < 0 || (!h->has_carried && !h->carry_reply)) {
        snprintf(sr->errstr, sr->errlen, "%s: %.120s", h->connected ? "GET stock" : "connection",
                 h->flushed < 0 ? lock_errstr(h->l) : "no reply");
        sr->rc = INV_BACKEND;
    } else if (h->has_carried) {
        sr->rc = read_carried(sr->k, h->carried, sr->stock, sr->errstr, sr->errlen);
    } else {
        sr->rc = read_stock(sr->k, h->carry_reply, sr->stock, sr->errstr, sr->errlen);
    }
    return -1; /* nothing to write */
}

static void stock_done(struct lock_hold *h, void *arg) {
    struct stock_read *sr = arg;
    if (h->acquired == LOCK_BUSY) {
        snprintf(sr->errstr, sr->errlen, "read lock %.80s still busy after waiting %d ms",
                 sr->k->lock, sr->inv->cfg->lock_wait_ms);
        sr->rc = INV_LOCK_TIMEOUT;
    } else if (h->acquired != LOCK_OK) {
        snprintf(sr->errstr, sr->errlen, "read lock: %.120s", h->errstr);
        sr->rc = INV_BACKEND;
    }
}

int inventory_stock(struct inventory *inv, const char *item, int hold_ms, long long *stock,
                    char *errstr, size_t errlen) {
    struct item_keys k;
    inventory_keys(inv, item, &k);
    struct stock_read sr = {inv, &k, 0, stock, errstr, errlen};
    const struct lock_hold_plan plan = {.type =
                                            inv->read_lock ? &lock_type_rw_read : &lock_type_none,
                                        .key = k.lock,
                                        .hold_ms = hold_ms,
                                        .carry = k.stock,
                                        .inside = stock_got,
                                        .done = stock_done,
                                        .arg = &sr};
    struct lock_hold h;
    if (lock_hold(inv->core, &plan, &h) == LOCK_HOLD_NOMEM) {
        snprintf(errstr, errlen, "out of memory");
        return INV_BACKEND;
    }
    return sr.rc;
}

/* Whether none of n replies is an error; else INV_BACKEND with errstr
 * naming the first. */
static int check_replies(struct inventory *inv, redisReply **rep, int n, const char *what,
                         char *errstr, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (rep[i]->type == REDIS_REPLY_ERROR) {
            snprintf(errstr, errlen, "%s: %.120s", what, rep[i]->str);
            rpool_note_error(inv->pool, rep[i]->str);
            free_replies(rep, n);
            return INV_BACKEND;
        }
    }
    return 0;
}

/* Runs n pipelined commands, built by the caller on c, and checks that
 * none answered an error. Returns 0, or INV_BACKEND with errstr set. */
static int run_pipeline(struct inventory *inv, struct rpool *pool, redisContext *c,
                        redisReply **rep, int n, const char *what, char *errstr, size_t errlen) {
    if (read_replies(c, rep, n) < 0) {
        snprintf(errstr, errlen, "%s: %.120s", what, c->errstr);
        rpool_put(pool, c);
        return INV_BACKEND;
    }
    rpool_put(pool, c);
    return check_replies(inv, rep, n, what, errstr, errlen);
}

/* A connection to the server of key (in cluster mode, the master of its
 * slot), and in *pool the pool it goes back to. */
static redisContext *conn(struct inventory *inv, const char *key, struct rpool **pool, char *errstr,
                          size_t errlen) {
    redisContext *c = NULL;
    *pool = rpool_route(inv->pool, key);
    rpool_get(*pool, inv->pool_wait_ms, &c, errstr, errlen);
    return c;
}

/* item's keys in *k, and a connection to the server of its stock key (in
 * cluster mode every key of an item shares that slot: inventory_keys). */
static redisContext *item_conn(struct inventory *inv, const char *item, struct item_keys *k,
                               struct rpool **pool, char *errstr, size_t errlen) {
    inventory_keys(inv, item, k);
    return conn(inv, k->stock, pool, errstr, errlen);
}

static int is_error(const redisReply *r, const char *prefix) {
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

/* The MOVED that refused a pipeline of one slot's commands when none of
 * them ran: each reply is a MOVED, or the MULTI and EXECABORT of a
 * transaction a MOVED aborted. NULL when anything ran or answered else. */
static const redisReply *moved_away(redisReply **rep, int n) {
    const redisReply *moved = NULL;
    int aborted = is_error(rep[n - 1], "EXECABORT");
    for (int i = 0; i < n; i++) {
        if (is_error(rep[i], "MOVED ")) {
            if (!moved) moved = rep[i];
        } else if (!(aborted && (i == n - 1 || (i == 0 && rep[i]->type == REDIS_REPLY_STATUS)))) {
            return NULL;
        }
    }
    return moved;
}

/* Appends a pipeline's commands for item keys k on c. */
typedef void pipeline_build(redisContext *c, const struct item_keys *k, const void *arg);

/* Runs the n commands build appends on the server of item's keys (filled
 * into *k), and checks that none answered an error: 0, or INV_BACKEND with
 * errstr set. In cluster mode a pipeline refused with MOVED ran nowhere
 * (its slot moved since the map was read), so it is sent again to the new
 * master, as a sale's commands are (rpool_follow), rather than failing
 * until the map's next reload. */
static int item_pipeline(struct inventory *inv, const char *item, struct item_keys *k,
                         pipeline_build *build, const void *arg, redisReply **rep, int n,
                         const char *what, char *errstr, size_t errlen) {
    struct rpool *pool;
    redisContext *c = item_conn(inv, item, k, &pool, errstr, errlen);
    for (int hops = 0; c;) {
        build(c, k, arg);
        if (read_replies(c, rep, n) < 0) {
            snprintf(errstr, errlen, "%s: %.120s", what, c->errstr);
            rpool_put(pool, c);
            return INV_BACKEND;
        }
        const redisReply *m = moved_away(rep, n);
        int again =
            m ? rpool_follow(inv->pool, m, &hops, &pool, &c, inv->pool_wait_ms, errstr, errlen) : 0;
        if (again == 0) {
            rpool_put(pool, c);
            return check_replies(inv, rep, n, what, errstr, errlen);
        }
        free_replies(rep, n);
    }
    return INV_BACKEND; /* no connection: errstr says why */
}

struct reset_args {
    long long stock;
    int own_lock;
};

static void reset_build(redisContext *c, const struct item_keys *k, const void *arg) {
    const struct reset_args *a = arg;
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "SET %s %lld", k->stock, a->stock);
    redisAppendCommand(c, "SET %s %lld", k->initial, a->stock);
    redisAppendCommand(c, "DEL %s %s %s %s %s %s", k->ledger, k->holders, k->violations,
                       k->families, k->history, a->own_lock ? k->lock : k->ledger);
    redisAppendCommand(c, "EXEC");
}

int inventory_reset(struct inventory *inv, const char *item, long long stock, char *errstr,
                    size_t errlen) {
    struct item_keys k;
    inventory_keys(inv, item, &k);
    /* The lock goes too when it is this item's: its own (lock.scope=item),
     * or the global one when this is the configured item. Another item's
     * reset must not free the global lock under the sale that holds it.
     * Never the fencing counter: it only grows, so a paused holder's old
     * token stays stale across a reset. */
    struct reset_args a = {stock, inv->lock_per_item || strcmp(k.stock, inv->stock_key) == 0};
    redisReply *rep[5];
    int rc = item_pipeline(inv, item, &k, reset_build, &a, rep, 5, "reset", errstr, errlen);
    if (rc) return rc;
    if (rep[4]->type != REDIS_REPLY_ARRAY) {
        snprintf(errstr, errlen, "reset: transaction aborted");
        rc = INV_BACKEND;
    } else if (strcmp(k.stock, inv->stock_key) == 0) {
        atomic_store(&inv->seed_done, 1); /* the stock is set: nothing left to seed */
    }
    free_replies(rep, 5);
    return rc;
}

static void seed_build(redisContext *c, const struct item_keys *k, const void *arg) {
    long long stock = *(const long long *)arg;
    redisAppendCommand(c, "SET %s %lld NX", k->stock, stock);
    redisAppendCommand(c, "SET %s %lld NX", k->initial, stock);
}

int inventory_seed(struct inventory *inv, long long stock, int *seeded, char *errstr,
                   size_t errlen) {
    *seeded = 0;
    struct item_keys k;
    redisReply *rep[2];
    int rc = item_pipeline(inv, NULL, &k, seed_build, &stock, rep, 2, "seed", errstr, errlen);
    if (rc) return rc;
    *seeded = rep[0]->type == REDIS_REPLY_STATUS;
    free_replies(rep, 2);
    atomic_store(&inv->seed_done, 1);
    return 0;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Counts the ledger's units sold twice into a. */
static int count_ledger(const redisReply *ledger, struct audit *a, char *errstr, size_t errlen) {
    size_t n = ledger->elements;
    long long *units = n ? malloc(n * sizeof(*units)) : NULL;
    if (n && !units) {
        snprintf(errstr, errlen, "audit: out of memory for %zu ledger entries", n);
        return INV_BACKEND;
    }
    for (size_t i = 0; i < n; i++) units[i] = strtoll(ledger->element[i]->str, NULL, 10);
    if (n) qsort(units, n, sizeof(*units), cmp_ll);
    for (size_t i = 1; i < n; i++)
        if (units[i] == units[i - 1]) a->sold_twice++;
    free(units);
    a->sold = (long long)n;
    long long given = a->initial - a->stock;
    a->oversold_units = a->sold > given ? a->sold - given : 0;
    a->stock_lost = given > a->sold ? given - a->sold : 0;
    a->oversold = a->sold_twice > 0 || a->oversold_units > 0 || a->stock < 0;
    return 0;
}

static void audit_build(redisContext *c, const struct item_keys *k, const void *arg) {
    (void)arg;
    redisAppendCommand(c, "GET %s", k->stock);
    redisAppendCommand(c, "GET %s", k->initial);
    redisAppendCommand(c, "GET %s", k->violations);
    redisAppendCommand(c, "LRANGE %s 0 -1", k->ledger);
    redisAppendCommand(c, "SMEMBERS %s", k->families);
}

int inventory_audit(struct inventory *inv, const char *item, struct audit *a, char *errstr,
                    size_t errlen) {
    memset(a, 0, sizeof(*a));
    struct item_keys k;
    redisReply *rep[5];
    int rc = item_pipeline(inv, item, &k, audit_build, NULL, rep, 5, "audit", errstr, errlen);
    if (rc) return rc;
    if (inv_parse_ll(rep[0], &a->stock) < 0 || inv_parse_ll(rep[1], &a->initial) < 0) {
        snprintf(errstr, errlen,
                 "stock key %s or %s is missing or not a whole number; "
                 "POST /inventory/reset first",
                 k.stock, k.initial);
        rc = INV_BAD_DATA;
    }
    if (rc == 0) {
        if (rep[2]->type != REDIS_REPLY_NIL) inv_parse_ll(rep[2], &a->violations);
        for (size_t i = 0; i < rep[4]->elements && a->nfamilies < AUDIT_FAMILIES; i++)
            snprintf(a->families[a->nfamilies++], sizeof(a->families[0]), "%s",
                     rep[4]->element[i]->str);
        rc = count_ledger(rep[3], a, errstr, errlen);
    }
    free_replies(rep, 5);
    return rc;
}

/* A history entry's fields as history-event.lua and sale-write.lua write
 * them: text is copied into its array, a number is parsed into its field
 * by the field's own type. _Generic picks the kind from the member's type,
 * so a field of a type not listed here does not compile. A field the table
 * does not know is skipped. */
enum history_kind { HF_TEXT, HF_INT, HF_LONG, HF_LLONG };
struct history_field {
    const char *name;
    size_t off, size;
    enum history_kind kind;
};
#define HISTORY_MEMBER(f) (((struct history_event *)0)->f)
#define HISTORY_KIND(m)                                                                            \
    _Generic((m), char * : HF_TEXT, int : HF_INT, long : HF_LONG, long long : HF_LLONG)
#define HISTORY_FIELD(f)                                                                           \
    {                                                                                              \
        .name = #f, .off = offsetof(struct history_event, f), .size = sizeof(HISTORY_MEMBER(f)),   \
        .kind = HISTORY_KIND(HISTORY_MEMBER(f))                                                    \
    }
static const struct history_field history_fields[] = {
    HISTORY_FIELD(instance),   HISTORY_FIELD(port),        HISTORY_FIELD(owner),
    HISTORY_FIELD(strategy),   HISTORY_FIELD(outcome),     HISTORY_FIELD(order),
    HISTORY_FIELD(granted_us), HISTORY_FIELD(released_us), HISTORY_FIELD(lease_us),
    HISTORY_FIELD(written_us), HISTORY_FIELD(owned),       HISTORY_FIELD(unit),
    HISTORY_FIELD(stock_read), HISTORY_FIELD(token),       HISTORY_FIELD(late),
};

static void history_set(struct history_event *e, const struct history_field *hf, const char *v) {
    char *at = (char *)e + hf->off;
    long long x = hf->kind == HF_TEXT ? 0 : strtoll(v, NULL, 10);
    switch (hf->kind) {
    case HF_TEXT:
        snprintf(at, hf->size, "%s", v);
        break;
    case HF_INT:
        memcpy(at, &(int){(int)x}, sizeof(int));
        break;
    case HF_LONG:
        memcpy(at, &(long){(long)x}, sizeof(long));
        break;
    case HF_LLONG:
        memcpy(at, &x, sizeof(x));
        break;
    }
}

/* Fills e from one stream entry's field/value array. */
static void history_parse(const redisReply *fields, struct history_event *e) {
    for (size_t j = 0; j + 1 < fields->elements; j += 2) {
        const char *f = fields->element[j]->str, *v = fields->element[j + 1]->str;
        for (size_t k = 0; k < sizeof(history_fields) / sizeof(history_fields[0]); k++) {
            if (strcmp(f, history_fields[k].name) == 0) {
                history_set(e, &history_fields[k], v);
                break;
            }
        }
    }
}

struct history_args {
    char start[40];
    int max;
};

static void history_build(redisContext *c, const struct item_keys *k, const void *arg) {
    const struct history_args *a = arg;
    redisAppendCommand(c, "XRANGE %s %s + COUNT %d", k->history, a->start, a->max);
}

int inventory_history(struct inventory *inv, const char *item, const char *since, int max,
                      struct history_event *out, int *n, char *errstr, size_t errlen) {
    *n = 0;
    struct item_keys k;
    struct history_args a = {.max = max};
    if (!since || !since[0] || strcmp(since, "0") == 0)
        snprintf(a.start, sizeof(a.start), "-");
    else
        snprintf(a.start, sizeof(a.start), "(%.32s", since);
    redisReply *rep[1];
    int rc = item_pipeline(inv, item, &k, history_build, &a, rep, 1, "history", errstr, errlen);
    if (rc) return rc;
    for (size_t i = 0; i < rep[0]->elements && *n < max; i++) {
        const redisReply *e = rep[0]->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[1]->type != REDIS_REPLY_ARRAY)
            continue;
        struct history_event *h = &out[*n];
        memset(h, 0, sizeof(*h));
        h->owned = -1;
        snprintf(h->id, sizeof(h->id), "%s", e->element[0]->str);
        history_parse(e->element[1], h);
        /* A fault's coverage event (outcome "coverage", written by the
         * matrix and the campaigns for inventory-check) is not a hold. */
        if (strcmp(h->outcome, "coverage") != 0) (*n)++;
    }
    free_replies(rep, 1);
    return 0;
}

int inventory_ping(struct inventory *inv, char *errstr, size_t errlen) {
    struct rpool *pool; /* in cluster mode, the master of inventory.key */
    redisContext *c = conn(inv, inv->stock_key, &pool, errstr, errlen);
    if (!c) return INV_BACKEND;
    redisAppendCommand(c, "PING");
    redisReply *rep[1];
    int rc = run_pipeline(inv, pool, c, rep, 1, "PING", errstr, errlen);
    if (rc == 0) free_replies(rep, 1);
    return rc;
}

/* Most masters inventory_ready asks: every pool rpool_masters can give. */
#define READY_MASTERS_MAX RPOOL_MASTERS_MAX

/* Whether master m answers PING and, in cluster mode, says cluster_state:ok.
 * 0, or INV_BACKEND with errstr naming it. */
static int master_ready(struct inventory *inv, struct rpool *m, char *errstr, size_t errlen) {
    redisContext *c = NULL;
    char why[384];
    if (rpool_get(m, inv->pool_wait_ms, &c, why, sizeof(why)) != RPOOL_OK) {
        snprintf(errstr, errlen, "Redis: %s", why);
        return INV_BACKEND;
    }
    char where[80];
    snprintf(where, sizeof(where), "Redis %.60s:%d", c->tcp.host ? c->tcp.host : "?", c->tcp.port);
    redisAppendCommand(c, "PING");
    if (inv->cluster) redisAppendCommand(c, "CLUSTER INFO");
    redisReply *rep[2];
    if (run_pipeline(inv, m, c, rep, inv->cluster ? 2 : 1, where, errstr, errlen) != 0)
        return INV_BACKEND;
    /* A node answers CLUSTERDOWN until it sees every slot served. */
    const char *state = inv->cluster && rep[1]->type == REDIS_REPLY_STRING
                            ? strstr(rep[1]->str, "cluster_state:")
                            : NULL;
    int ok = !inv->cluster || (state && strncmp(state + 14, "ok", 2) == 0);
    if (!ok) {
        size_t len = state ? strcspn(state, "\r\n") : 0;
        snprintf(errstr, errlen, "%s says %.*s: the cluster does not serve every slot yet", where,
                 (int)(len < 40 ? len : 40), state ? state : "no cluster_state");
    }
    free_replies(rep, inv->cluster ? 2 : 1);
    return ok ? 0 : INV_BACKEND;
}

/* Whether the locks of every strategy lock.allowed lets a client pick can
 * be served (a store this deployment does not configure is not asked: its
 * strategies answer 503 naming the key). 0, or INV_BACKEND with errstr
 * naming the first that cannot. */
static int locks_ready(struct inventory *inv, char *errstr, size_t errlen) {
    char why[384];
    for (const struct strategy *s = strategies; s->name; s++) {
        if (!config_allows(inv->cfg, s->name)) continue;
        if (lock_type_ready(inv->core, s->lock, why, sizeof(why)) < 0 ||
            (s->rw_lock && lock_type_ready(inv->core, s->rw_lock, why, sizeof(why)) < 0)) {
            snprintf(errstr, errlen, "strategy %s: %s", s->name, why);
            return INV_BACKEND;
        }
    }
    return 0;
}

int inventory_strategy_configured(const struct inventory *inv, const struct strategy *s, char *why,
                                  size_t whylen) {
    return lock_type_configured(inv->core, s->lock, why, whylen) &&
           (!s->rw_lock || lock_type_configured(inv->core, s->rw_lock, why, whylen));
}

int inventory_faults_check(const struct inventory *inv, const struct strategy *s,
                           const struct sale_faults *f, char *why, size_t whylen) {
    if (!f->end_session) return 0;
    const struct lock_type *t = s ? (inv->read_lock && s->rw_lock ? s->rw_lock : s->lock)
                                  : (inv->read_lock ? &lock_type_rw_read : &lock_type_none);
    if (lock_type_ends_session(t)) return 0;
    char names[256];
    strategy_session_names(names, sizeof(names));
    if (s)
        snprintf(why, whylen,
                 "end_session ends the store session that holds a sale's lock, and %s keeps "
                 "its lock in %s, with no session to end: it applies to the sales of %s",
                 s->name, lock_type_store(t), names);
    else
        snprintf(why, whylen,
                 "end_session ends the store session that holds a sale's lock: a read of the "
                 "stock holds none; it applies to the sales of %s",
                 names);
    return -1;
}

int inventory_ready(struct inventory *inv, char *errstr, size_t errlen) {
    struct rpool *m[READY_MASTERS_MAX];
    char why[384];
    if (seed_first(inv, errstr, errlen) != 0) return INV_BACKEND;
    int n = rpool_masters(inv->pool, m, READY_MASTERS_MAX, why, sizeof(why));
    if (n < 0) {
        snprintf(errstr, errlen, "Redis Cluster: %s", why);
        return INV_BACKEND;
    }
    for (int i = 0; i < n; i++)
        if (master_ready(inv, m[i], errstr, errlen) != 0) return INV_BACKEND;
    return locks_ready(inv, errstr, errlen);
}
