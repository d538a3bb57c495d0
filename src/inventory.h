/* inventory.h -- the inventory service: sell one unit under a lock strategy,
 * read the stock, reset it, audit the ledger.
 *
 * DESIGN
 * The stock lives in Redis under the stock key (inventory001); every sold
 * unit is appended to the ledger list <stock>:sold as "unit|order|port".
 * A sale under a lock is the demo's critical section: GET the stock, check
 * it, SET stock-1 and RPUSH the unit. Around it sits a mutual-exclusion probe:
 * on entry the sale adds itself to <stock>:holders (src/lua/probe-enter.lua;
 * another holder already inside increments <stock>:violations), on exit it
 * removes itself, both pipelined with the section's own commands, so
 * overlapping holders are seen, not guessed. Each entry names its process's
 * alive key, which a heartbeat thread renews every 250 ms with a 1 s lease:
 * a process killed inside the section stops counting within a second
 * instead of making every later sale a false violation.
 *
 * This file knows nothing of HTTP. It is thread safe: every sale borrows its
 * own connection from the pool. */
#ifndef INVENTORYD_INVENTORY_H
#define INVENTORYD_INVENTORY_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include "lock.h"
#include "rpool.h"

struct rpool;
struct config;

#define INVENTORY_ITEM_MAX 64    /* longest stock key, in bytes */

/* Results of inventory calls. */
#define INV_SOLD 0
#define INV_SOLD_OUT 1
#define INV_LOCK_TIMEOUT 2   /* the lock stayed busy past lock.wait-ms */
#define INV_BACKEND 3        /* Redis unreachable or failing */
#define INV_STALE_TOKEN 4    /* fenced: a newer holder wrote first */
#define INV_BAD_DATA 5       /* the stock in Redis is missing or not a number */
#define INV_LOCK_LOST 6      /* the lock was lost before the write: refused */

struct inventory {
    struct rpool *pool;
    struct redlock *redlock;     /* the masters of redlock.nodes, owned */
    struct lock_env lock_env;
    int port;                    /* this instance's port, written to the ledger */
    int probe;                   /* inventory.probe */
    int pool_wait_ms;            /* longest wait for a free connection */
    int lock_per_item;           /* lock.scope=item */
    int read_lock;               /* lock.read-lock: reads take the read lock */
    char stock_key[INVENTORY_ITEM_MAX + 1];  /* the default item */
    char lock_name[128];
    char instance[16];           /* 8 hex digits naming this process in order ids */
    char alive_key[INVENTORY_ITEM_MAX + 32];  /* <inventory.key>:alive:<instance> */
    struct rpool_options heartbeat_opts;      /* the heartbeat's own connection */
    pthread_t heartbeat;
    pthread_mutex_t heartbeat_mu;
    pthread_cond_t heartbeat_cond;
    int heartbeat_running, heartbeat_stop;
};

/* The Redis keys of one item (a stock key): its stock, ledger, initial
 * stock, probe and lock. */
struct inventory_keys {
    char stock[INVENTORY_ITEM_MAX + 1];
    char ledger[INVENTORY_ITEM_MAX + 16];
    char initial[INVENTORY_ITEM_MAX + 16];
    char holders[INVENTORY_ITEM_MAX + 16];
    char violations[INVENTORY_ITEM_MAX + 16];
    char lock[128 + INVENTORY_ITEM_MAX + 4];
};

/* Faults injected into one sale (all 0 = none). */
struct sale_faults {
    int hold_ms;                 /* sleep inside the critical section */
    int crash;                   /* _exit(86) while holding the lock */
    int release_delay_ms;        /* pause between check and delete on release */
    int nested;                  /* re-acquire this many times inside */
};

struct sale_result {
    int status;                  /* INV_* */
    long long remaining;         /* stock after the sale */
    long long unit;              /* the unit sold (the stock value read) */
    char order[48];
    int attempts;
    int64_t wait_ms;
    int64_t hold_ms;
    int depth;
    long long token;
    int quorum;                  /* Redlock: votes needed, 0 otherwise */
    int nvotes;                  /* Redlock: the last round, one per master */
    struct {
        char node[64];
        int outcome;             /* LOCK_VOTE_* */
        int us;
    } votes[LOCK_MAX_NODES];
    int replicas_wanted;         /* lock.sync-replicas, when WAIT was sent */
    int replicas_acked;          /* replicas that acknowledged the acquire */
    int batch;                   /* sales served by that one hold */
    int renewals;                /* lease renewals while held */
    int violation;               /* the probe saw another holder inside */
    int lost;                    /* the release found the lock no longer ours */
    char errstr[256];
};

struct audit {
    long long stock;
    long long initial;
    long long sold;              /* entries in the ledger */
    long long sold_twice;        /* entries whose unit was already sold */
    long long oversold_units;    /* sold - (initial - stock), at least 0 */
    int oversold;                /* any unit sold twice, or more sold than stock given */
    long long violations;        /* overlapping holders seen by the probe */
};

/* Fills inv from cfg; the pool is the caller's and must outlive inv. The
 * Redlock masters' pools are made here (no connection yet). Returns 0, or -1
 * with errstr set, naming the key at fault. */
int inventory_init(struct inventory *inv, const struct config *cfg,
                   struct rpool *pool, char *errstr, size_t errlen);

/* Frees what inventory_init made. Call after lock_core_shutdown(). */
void inventory_free(struct inventory *inv);

/* Frees the batched strategy's per-lock queues (process-wide). Call once no
 * sale runs any more, at shutdown. */
void inventory_batches_free(void);

/* True when item can name a stock key: 1 to INVENTORY_ITEM_MAX bytes of
 * [A-Za-z0-9_:.-]. */
int inventory_item_valid(const char *item);

/* The keys of item (NULL: the configured inventory.key). The lock is
 * lock.name, or lock.name:item when lock.scope=item. */
void inventory_keys(const struct inventory *inv, const char *item, struct inventory_keys *k);

/* In every call below, item NULL means the configured inventory.key; a
 * non-NULL item must pass inventory_item_valid(). */

/* Sells one unit of item with strategy t. Always fills r; returns r->status. */
int inventory_sell(struct inventory *inv, const struct lock_type *t, const char *item,
                   const struct sale_faults *faults, struct sale_result *r);

/* Reads the stock, under the read lock when lock.read-lock=true, holding
 * it hold_ms (a fault; 0 normally). Returns INV_SOLD (0) on success,
 * INV_LOCK_TIMEOUT, INV_BACKEND or INV_BAD_DATA with errstr set. */
int inventory_stock(struct inventory *inv, const char *item, int hold_ms, long long *stock,
                    char *errstr, size_t errlen);

/* Sets the stock and the initial stock, clears the ledger, the probe, the
 * fencing counter and the lock key. Returns 0, INV_BACKEND with errstr set. */
int inventory_reset(struct inventory *inv, const char *item, long long stock,
                    char *errstr, size_t errlen);

/* Sets the configured item's stock and initial stock to stock only where
 * they do not exist yet (SET NX): a fresh Redis starts with the demo's 200,
 * an existing stock is never touched. *seeded says whether it was set.
 * Returns 0, or INV_BACKEND with errstr set. */
int inventory_seed(struct inventory *inv, long long stock, int *seeded,
                   char *errstr, size_t errlen);

/* Reads the stock, the ledger and the probe's counts. */
int inventory_audit(struct inventory *inv, const char *item, struct audit *a,
                    char *errstr, size_t errlen);

/* PINGs Redis. Returns 0, or INV_BACKEND with errstr set. */
int inventory_ping(struct inventory *inv, char *errstr, size_t errlen);

#endif
