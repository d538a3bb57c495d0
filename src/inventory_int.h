/* inventory_int.h -- the inside of the inventory service, shared by its
 * files (inventory.c, sale.c, batch.c, probe.c). Not for callers: they use
 * inventory.h. */
#ifndef INVENTORYD_INVENTORY_INT_H
#define INVENTORYD_INVENTORY_INT_H

#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include "inventory.h"

struct pipeline;
struct probe;
struct waitq;

struct inventory {
    const struct config *cfg;
    struct rpool *pool;
    struct lock_core *core;
    struct probe *probe; /* NULL with inventory.probe=false */
    struct waitq *batches; /* the batched strategy's queues */
    struct pipeline *pipeline; /* one-script sales, pipelined; NULL until started */
    int port; /* this instance's port, written to the ledger */
    char port_text[16]; /* the same in decimal */
    int pool_wait_ms; /* longest wait for a free connection */
    int lock_per_item; /* lock.scope=item */
    int cluster; /* redis.cluster.nodes set: keys carry the item's hash tag */
    int read_lock; /* lock.read-lock: reads take the read lock */
    int history_max; /* history.max-events, 0 when history.enabled=false */
    char stock_key[INVENTORY_ITEM_MAX + 1]; /* the default item */
    char lock_name[128];
    char instance[16]; /* 8 hex digits naming this process */
    atomic_int seed_done; /* the start-up seed ran (the stock was set, or was there);
                                    until then /readyz tries it again (inventory_ready) */
};

/* The Redis keys of one item (a stock key). */
struct item_keys {
    char stock[INVENTORY_ITEM_MAX + 1];
    char ledger[INVENTORY_ITEM_MAX + 16];
    char initial[INVENTORY_ITEM_MAX + 16];
    char holders[INVENTORY_ITEM_MAX + 16];
    char violations[INVENTORY_ITEM_MAX + 16];
    char families[INVENTORY_ITEM_MAX + 16];
    char history[INVENTORY_ITEM_MAX + 16];
    char lock[128 + INVENTORY_ITEM_MAX + 4];
};

/* The keys of item (NULL: the configured inventory.key). The lock is
 * lock.name, or lock.name:item when lock.scope=item. In cluster mode all
 * but the stock carry the item's hash tag: {item}:sold, lock.name:{item}. */
void inventory_keys(const struct inventory *inv, const char *item, struct item_keys *k);

/* The start of every sale: its order id, lock.allowed, the seed of the
 * configured item when the start-up seed has not run (a round trip; none
 * once it has), and k, the item's keys. 0 to go on, or the status, with r
 * filled, when the sale is answered already. */
int inventory_sell_start(struct inventory *inv, const struct strategy *s, const char *item,
                         struct sale_result *r, struct item_keys *k);

/* ---- sale.c --------------------------------------------------------------- */

/* The write of the critical section: appends it to the lock's pipeline.
 * Returns the index of its reply there (lock_reply), or -1. */
struct sale_section;
typedef int (*sale_commit)(struct sale_section *sec);

/* The arguments of a sale that is one script and nothing else (argv
 * points into the item's keys, the sale's result and the inventory). */
#define SALE_ARGS_MAX 8
struct sale_args {
    const char *script; /* the embedded script's name (script.h) */
    int nkeys, argc;
    const char *argv[SALE_ARGS_MAX];
};

/* A sale that is one script and nothing else: no lock, no probe, no read
 * first. Its command can go out pipelined with others on one connection
 * (pipeline.c), and its reply alone says what happened. */
struct sale_script {
    /* Fills a for the sale r (its order set) of k's item with strategy s. */
    void (*args)(const struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                 const struct sale_result *r, struct sale_args *a);
    /* Reads the script's reply (not NULL) into r. */
    void (*read)(struct inventory *inv, const redisReply *rep, struct sale_result *r);
};

/* How a strategy's sale writes (strategy.h names one per strategy). */
struct sale_way {
    const char *name;
    /* Sells one unit of k's item with strategy s; fills r. */
    void (*sell)(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                 const struct sale_faults *f, struct sale_result *r);
    /* The write of a sale made alone under s's lock; NULL when sell writes
     * otherwise. */
    sale_commit commit;
    /* 1: the read first shows Redis the hold's fencing token (raise_fence in
     * sale.c), for a lock whose tokens come from another store; Redis's own
     * fence is bumped by the grant itself. */
    int shows_token;
    /* Not NULL when the sale is one script (sell runs it on a pooled
     * connection of its own): a caller may pipeline it instead. */
    const struct sale_script *script;
};

/* Takes s's lock for the n sales in rs[] (faults f, rs[0]'s), runs the
 * critical section for all of them with commit as the write, releases, and
 * fills every result. */
void sale_locked(struct inventory *inv, const struct strategy *s, const struct item_keys *k,
                 const struct sale_faults *f, struct sale_result **rs, int n, sale_commit commit);

/* The plain write (sale-write.lua), also the batched strategy's. */
int sale_commit_plain(struct sale_section *sec);

/* Reads a Redis reply (an integer, or a string of one) as a whole number.
 * 0 on success, -1 on anything else. */
int inv_parse_ll(const redisReply *r, long long *out);

/* Reads text as a whole number: 0, or -1 when it is empty or not one. */
int inv_parse_text(const char *s, long long *out);

/* Sets the same failure on every result; returns the status. */
int sale_fail_all(struct sale_result **rs, int n, int status, const char *errstr);

/* Fills r for a backend failure; returns INV_BACKEND. */
int sale_backend(struct sale_result *r, const char *what, const char *why);

#endif
