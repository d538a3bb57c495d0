/* inventory.h -- the inventory service: sell one unit under a sale
 * strategy, read the stock, reset it, audit the ledger, read the recorded
 * history. It knows nothing of HTTP.
 *
 * DESIGN
 * The stock lives in Redis under the stock key (inventory001); every sold
 * unit is appended to the ledger list <stock>:sold as "unit|order|port".
 * A sale under a lock is the demo's critical section: GET the stock, check
 * it, then write the new stock and the ledger entry in one all-or-nothing
 * script. Around it sits the mutual-exclusion probe (probe.h); with it goes
 * one event per hold into the capped stream <stock>:history.
 *
 * The service is split by job: the sale path (sale.c), the batch queue of
 * the batched strategy (batch.c), the probe and its heartbeat (probe.c),
 * and the admin of keys, reset, seed, audit and history (inventory.c).
 * struct inventory is opaque. Thread safe: every call borrows what it needs
 * from the pool and the lock core. */
#ifndef INVENTORYD_INVENTORY_H
#define INVENTORYD_INVENTORY_H

#include <stddef.h>
#include <stdint.h>
#include "lock.h"

struct config;
struct lock_core;
struct rpool;
struct strategy;
struct inventory;

#define INVENTORY_ITEM_MAX 64 /* longest stock key, in bytes (ITEM_MAX, item.h) */

/* Results of inventory calls. */
#define INV_SOLD 0
#define INV_SOLD_OUT 1
#define INV_LOCK_TIMEOUT 2 /* the lock stayed busy past lock.wait-ms */
#define INV_BACKEND 3 /* Redis unreachable or failing */
#define INV_STALE_TOKEN 4 /* fenced: a newer holder wrote first */
#define INV_BAD_DATA 5 /* the stock in Redis is missing or not a number */
#define INV_LOCK_LOST 6 /* the lock was lost before the write: refused */
#define INV_NOT_ALLOWED 7 /* lock.allowed does not name the strategy */
#define INV_STOCK_CHANGED 8 /* the stock was set under the hold (a reset): refused */
#define INV_STATUS_COUNT 9

/* Faults injected into one sale (all 0 = none). */
struct sale_faults {
    int hold_ms; /* sleep inside the critical section */
    int crash; /* _exit(86) while holding the lock */
    int release_delay_ms; /* pause between check and delete on release */
    int nested; /* re-acquire this many times inside */
    int commit_delay_ms; /* pause between the last lease check and the write's send */
    int wait_given; /* wait_ms replaces lock.wait-ms for this sale */
    int wait_ms;
    int end_session; /* once inside, the lock's store session is ended from outside */
};

struct sale_result {
    int status; /* INV_* */
    long long remaining; /* stock after the sale */
    long long unit; /* the unit sold (the stock value read) */
    char order[48];
    struct lock_report lock; /* what the lock did (lock.h) */
    int64_t wait_ms; /* waiting in the batch queue and for the lock */
    int64_t hold_ms;
    int batch; /* sales served by that one hold */
    int violation; /* the probe saw another holder inside */
    int lost; /* the release found the lock no longer ours */
    int late; /* the lease deadline had passed at commit */
    /* The end_session fault: 1 ended (seen gone), -1 it could not be (see
     * session_error), 0 not asked; wall-clock µs when it was begun, and
     * when the session was seen gone. */
    int session_ended;
    int64_t session_end_us, session_gone_us;
    char session_error[160];
    char errstr[384];
};

#define AUDIT_FAMILIES 8

struct audit {
    long long stock;
    long long initial;
    long long sold; /* entries in the ledger */
    long long sold_twice; /* entries whose unit was already sold */
    long long oversold_units; /* sold - (initial - stock), at least 0 */
    long long stock_lost; /* (initial - stock) - sold, at least 0: units gone unsold */
    int oversold; /* any unit sold twice, or more sold than stock given */
    long long violations; /* overlapping holders seen by the probe */
    int nfamilies; /* lock families the stock was sold under since its reset */
    char families[AUDIT_FAMILIES][16];
};

/* One recorded hold (GET /inventory/history). Times are wall-clock µs of
 * the instance that recorded them: across hosts they carry clock skew. */
struct history_event {
    char id[32]; /* the stream entry id */
    char instance[16]; /* 8 hex digits naming the process */
    int port;
    char owner[64];
    char strategy[32];
    char outcome[24]; /* sold, sold_out, lock_lost, stale_token, stock_changed, bad_stock */
    char order[48];
    int64_t granted_us; /* the outermost acquire returned */
    int64_t released_us; /* the write (or this event) and the release were sent */
    int64_t lease_us; /* the lease deadline as the holder knew it then; 0: no lease */
    int64_t written_us; /* Redis's clock when the write (or event) applied; 0: unknown */
    int owned; /* as it applied the lock was the holder's (1), not (0); -1: not seen */
    long long unit; /* 0 when nothing was sold */
    long long stock_read;
    long long token;
    int late; /* the holder's own view: its lease had passed at the send */
};

/* Makes the service from cfg over pool and core (both the caller's, and
 * they must outlive it); starts the probe's heartbeat. NULL with errstr set
 * ("inventory.key: ...", "out of memory"). */
struct inventory *inventory_create(const struct config *cfg, struct rpool *pool,
                                   struct lock_core *core, char *errstr, size_t errlen);

/* Stops the heartbeat and frees the service. No sale may be running.
 * Accepts NULL. */
void inventory_free(struct inventory *inv);

/* In every call below, item NULL means the configured inventory.key; a
 * non-NULL item must pass item_check() (item.h). */

/* Sells one unit of item with strategy s. Always fills r; returns r->status. */
int inventory_sell(struct inventory *inv, const struct strategy *s, const char *item,
                   const struct sale_faults *faults, struct sale_result *r);

/* ---- sales without a thread waiting (pipeline.c) ----
 * A strategy whose sale is one script (atomic) can be sold with no thread
 * waiting for Redis: its script goes out pipelined with every other such
 * sale, on one connection of the pipeline's own, and the pipeline's thread
 * reads the replies in order. The outcome is the same as inventory_sell's,
 * a lost reply included (backend_unavailable, never sent again). */

/* Called once a pipelined sale's result is filled. */
typedef void inventory_sold(void *arg);

/* Starts the pipeline (a thread and a connection). Nothing is started in
 * cluster mode, and inventory_pipelined is then always 0. 0, or -1 with
 * errstr set. The pipeline is stopped by inventory_free. */
int inventory_pipeline_start(struct inventory *inv, char *errstr, size_t errlen);

/* Whether a sale with s would go pipelined now: s's sale is one script,
 * the pipeline runs, and the start-up seed has run (so the sale's start
 * makes no round trip). Never waits. */
int inventory_pipelined(const struct inventory *inv, const struct strategy *s);

/* Sells one unit of item with s as inventory_sell does (no faults: a
 * one-script sale takes none), without waiting: r is filled and done(arg)
 * called once, in the pipeline's thread, or in this one at once when the
 * sale is refused before any I/O (lock.allowed). 0, or -1 with done never
 * called when it cannot go pipelined (not inventory_pipelined, out of
 * memory, or stopping): sell it with inventory_sell instead. */
int inventory_sell_pipelined(struct inventory *inv, const struct strategy *s, const char *item,
                             struct sale_result *r, inventory_sold *done, void *arg);

/* Whether the faults f apply to a sale of s here (s NULL: to a read of
 * the stock): 0, or -1 with why when one cannot (end_session on a lock
 * that keeps no session of a store). */
int inventory_faults_check(const struct inventory *inv, const struct strategy *s,
                           const struct sale_faults *f, char *why, size_t whylen);

/* Reads the stock, under the read lock when lock.read-lock=true, holding
 * it hold_ms (a fault; 0 normally). Returns INV_SOLD (0) on success,
 * INV_LOCK_TIMEOUT, INV_BACKEND or INV_BAD_DATA with errstr set. */
int inventory_stock(struct inventory *inv, const char *item, int hold_ms, long long *stock,
                    char *errstr, size_t errlen);

/* Sets the stock and the initial stock, clears the ledger, the probe, the
 * lock families, the history and the item's lock: its own with
 * lock.scope=item, the global one only for the configured item (another
 * item's reset leaves the lock its sales share alone). The fencing counter
 * is never touched: it only grows. Returns 0, or INV_BACKEND with errstr
 * set. */
int inventory_reset(struct inventory *inv, const char *item, long long stock, char *errstr,
                    size_t errlen);

/* Sets the configured item's stock and initial stock to stock only where
 * they do not exist yet (SET NX): a fresh Redis starts with the demo's 200,
 * an existing stock is never touched. *seeded says whether it was set.
 * Returns 0, or INV_BACKEND with errstr set. */
int inventory_seed(struct inventory *inv, long long stock, int *seeded, char *errstr,
                   size_t errlen);

/* Reads the stock, the ledger, the probe's count and the lock families. */
int inventory_audit(struct inventory *inv, const char *item, struct audit *a, char *errstr,
                    size_t errlen);

/* Reads at most max events of item's history recorded after the event id
 * since ("0" or NULL: from the oldest kept), oldest first, into out[];
 * *n says how many. Holds only: the faults' coverage events in the same
 * stream are skipped (they are for inventory-check). Returns 0, or
 * INV_BACKEND with errstr set. */
int inventory_history(struct inventory *inv, const char *item, const char *since, int max,
                      struct history_event *out, int *n, char *errstr, size_t errlen);

/* PINGs Redis. Returns 0, or INV_BACKEND with errstr set. */
int inventory_ping(struct inventory *inv, char *errstr, size_t errlen);

/* Whether a sale can succeed now with every strategy lock.allowed allows:
 * every master the service writes to answers PING (in cluster mode, each
 * master of the slot map, and each says cluster_state:ok: until then a node
 * refuses commands with CLUSTERDOWN), and each such strategy's lock can be
 * served (lock_type_ready: for redlock, a quorum of the masters may vote).
 * Returns 0, or INV_BACKEND with errstr saying what is missing ("strategy
 * redlock: only 1 of 3 Redlock masters can vote, ..."). For a readiness
 * probe: it asks every master in turn. */
int inventory_ready(struct inventory *inv, char *errstr, size_t errlen);

/* Whether strategy s can be used in this deployment: 1, or 0 when its lock
 * lives in a store that is not configured, with why naming the missing key
 * ("mysql.host is not configured"). Asks no server. */
struct strategy;
int inventory_strategy_configured(const struct inventory *inv, const struct strategy *s, char *why,
                                  size_t whylen);

/* The port this instance writes into ledger entries. */
int inventory_port(const struct inventory *inv);

#endif
