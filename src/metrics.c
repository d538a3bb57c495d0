/* metrics.c -- per-strategy counters and histograms (see metrics.h).
 *
 * One static row per strategy in strategies[] (at most METRICS_MAX), updated
 * with relaxed atomics from the workers and the event loops; metrics_render() reads
 * them without stopping writers, so a scrape is a near-instant snapshot. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lock.h"
#include "metrics.h"
#include "redlock.h"
#include "cluster.h"
#include "rpool.h"
#include "strategy.h"

#define METRICS_MAX 32

/* Upper bounds of the latency buckets, in ms; +Inf is implicit. */
static const int bucket_ms[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};
#define NBUCKETS ((int)(sizeof(bucket_ms) / sizeof(bucket_ms[0])))

struct histogram {
    atomic_llong buckets[NBUCKETS + 1];
    atomic_llong sum_ms;
    atomic_llong count;
};

struct strategy_row {
    atomic_llong by_status[INV_STATUS_COUNT]; /* indexed by INV_* */
    atomic_llong attempts;
    atomic_llong renewals;
    atomic_llong released_lost; /* releases that found the lock not ours */
    atomic_llong violations; /* sales whose probe saw another holder */
    atomic_llong replica_shortfalls; /* acquires WAIT saw short of lock.sync-replicas */
    atomic_llong grants[LOCK_GRANTS]; /* holds of the types that hand on, by how granted */
    struct histogram wait;
    struct histogram hold;
};

static struct strategy_row rows[METRICS_MAX];
static const struct redlock *redlock_nodes_seen;
static struct lock_core *core_seen;

void metrics_set_core(struct lock_core *core) { core_seen = core; }

void metrics_set_redlock(const struct redlock *rl) { redlock_nodes_seen = rl; }
static struct rpool *cluster_root;

void metrics_set_cluster(struct rpool *root) { cluster_root = root; }

static atomic_llong http_by_class[6]; /* 1xx..5xx, index = status/100 */

static void observe(struct histogram *h, long long ms) {
    int i = 0;
    while (i < NBUCKETS && ms > bucket_ms[i]) i++;
    atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ms, ms, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void metrics_sale(const struct strategy *t, const struct sale_result *r) {
    int i = strategy_index(t);
    if (i < 0 || i >= METRICS_MAX) return;
    struct strategy_row *row = &rows[i];
    if (r->status >= 0 && r->status < INV_STATUS_COUNT)
        atomic_fetch_add_explicit(&row->by_status[r->status], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&row->attempts, r->lock.attempts, memory_order_relaxed);
    atomic_fetch_add_explicit(&row->renewals, r->lock.renewals, memory_order_relaxed);
    atomic_fetch_add_explicit(&row->released_lost, r->lost, memory_order_relaxed);
    atomic_fetch_add_explicit(&row->violations, r->violation, memory_order_relaxed);
    if (r->lock.replicas_wanted > 0 && r->lock.replicas_acked < r->lock.replicas_wanted)
        atomic_fetch_add_explicit(&row->replica_shortfalls, 1, memory_order_relaxed);
    if (r->lock.granted_by > 0 && r->lock.granted_by < LOCK_GRANTS)
        atomic_fetch_add_explicit(&row->grants[r->lock.granted_by], 1, memory_order_relaxed);
    observe(&row->wait, r->wait_ms);
    if (r->status == INV_SOLD || r->status == INV_SOLD_OUT) observe(&row->hold, r->hold_ms);
}

void metrics_http(int status) {
    int c = status / 100;
    if (c >= 1 && c <= 5) atomic_fetch_add_explicit(&http_by_class[c], 1, memory_order_relaxed);
}

/* Every field of a row is an atomic counter: a reset stores 0 into each,
 * atomically, while workers may be adding (a racing add is kept
 * or lost whole, never torn). */
_Static_assert(sizeof(struct strategy_row) % sizeof(atomic_llong) == 0,
               "struct strategy_row must hold atomic_llong counters only");

void metrics_reset(void) {
    atomic_llong *c = (atomic_llong *)(void *)rows;
    size_t n = sizeof(rows);
    n /= sizeof(atomic_llong);
    for (size_t i = 0; i < n; i++) atomic_store_explicit(&c[i], 0, memory_order_relaxed);
}

/* A growing output buffer; out of memory is remembered and reported once. */
struct out {
    char *buf;
    size_t len, cap;
    int oom;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...) {
    if (o->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = 1;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        char *b = realloc(o->buf, o->cap * 2 + (size_t)n);
        if (!b) {
            o->oom = 1;
            return;
        }
        o->buf = b;
        o->cap = o->cap * 2 + (size_t)n;
    }
}

static long long load(atomic_llong *v) { return atomic_load_explicit(v, memory_order_relaxed); }

static void put_histogram(struct out *o, const char *name, const char *help) {
    put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int i = 0; strategies[i].name && i < METRICS_MAX; i++) {
        struct histogram *h =
            strcmp(name, "inventoryd_lock_wait_ms") == 0 ? &rows[i].wait : &rows[i].hold;
        const char *s = strategies[i].name;
        long long cum = 0;
        for (int b = 0; b < NBUCKETS; b++) {
            cum += load(&h->buckets[b]);
            put(o, "%s_bucket{strategy=\"%s\",le=\"%d\"} %lld\n", name, s, bucket_ms[b], cum);
        }
        cum += load(&h->buckets[NBUCKETS]);
        put(o, "%s_bucket{strategy=\"%s\",le=\"+Inf\"} %lld\n", name, s, cum);
        put(o, "%s_sum{strategy=\"%s\"} %lld\n", name, s, load(&h->sum_ms));
        put(o, "%s_count{strategy=\"%s\"} %lld\n", name, s, load(&h->count));
    }
}

/* The counters of sale results, one series per strategy. */
static void put_statuses(struct out *o) {
    static const struct {
        int status;
        const char *name, *help;
    } counters[] = {
        {INV_SOLD, "inventoryd_sales_total", "Units sold."},
        {INV_SOLD_OUT, "inventoryd_sold_out_total", "Sales answered sold_out."},
        {INV_LOCK_TIMEOUT, "inventoryd_lock_timeouts_total",
         "Sales whose lock stayed busy past lock.wait-ms."},
        {INV_BACKEND, "inventoryd_backend_errors_total", "Sales that failed on Redis."},
        {INV_STALE_TOKEN, "inventoryd_stale_tokens_total",
         "Writes refused for a stale fencing token."},
        {INV_LOCK_LOST, "inventoryd_lost_locks_total", "Sales refused because the lock was lost."},
        {INV_BAD_DATA, "inventoryd_bad_stock_total",
         "Sales refused because the stock in Redis is not a number."},
        {INV_STOCK_CHANGED, "inventoryd_stock_changed_total",
         "Writes refused because the stock was set under the hold (a reset)."},
        {INV_NOT_ALLOWED, "inventoryd_not_allowed_total",
         "Sales refused because lock.allowed does not name the strategy."},
    };
    for (size_t c = 0; c < sizeof(counters) / sizeof(counters[0]); c++) {
        put(o, "# HELP %s %s\n# TYPE %s counter\n", counters[c].name, counters[c].help,
            counters[c].name);
        for (int i = 0; strategies[i].name && i < METRICS_MAX; i++)
            put(o, "%s{strategy=\"%s\"} %lld\n", counters[c].name, strategies[i].name,
                load(&rows[i].by_status[counters[c].status]));
    }
}

/* The lock's own counters, one series per strategy. */
static void put_sums(struct out *o) {
    static const struct {
        size_t offset;
        const char *name, *help;
    } sums[] = {
        {offsetof(struct strategy_row, attempts), "inventoryd_lock_attempts_total",
         "Lock acquire attempts sent."},
        {offsetof(struct strategy_row, renewals), "inventoryd_lock_renewals_total",
         "Lease renewals by the watchdog."},
        {offsetof(struct strategy_row, released_lost), "inventoryd_lock_released_lost_total",
         "Releases that found the lock already gone or another owner's."},
        {offsetof(struct strategy_row, violations), "inventoryd_exclusion_violations_total",
         "Sales whose probe saw another holder inside the critical section."},
        {offsetof(struct strategy_row, replica_shortfalls),
         "inventoryd_lock_replica_shortfalls_total",
         "Lock acquires that fewer replicas than lock.sync-replicas acknowledged within "
         "redis.timeout."},
    };
    for (size_t k = 0; k < sizeof(sums) / sizeof(sums[0]); k++) {
        put(o, "# HELP %s %s\n# TYPE %s counter\n", sums[k].name, sums[k].help, sums[k].name);
        for (int i = 0; strategies[i].name && i < METRICS_MAX; i++)
            put(o, "%s{strategy=\"%s\"} %lld\n", sums[k].name, strategies[i].name,
                load((atomic_llong *)((char *)&rows[i] + sums[k].offset)));
    }
}

/* How the holds of the locks that hand on were granted. */
static void put_grants(struct out *o) {
    put(o, "# HELP inventoryd_lock_grants_total Holds of the locks that hand on (handoff), by how "
           "each was granted: free (its own acquire), handed (by the holder before it), checked "
           "(its own re-check, after a lease ran out or a missed grant).\n"
           "# TYPE inventoryd_lock_grants_total counter\n");
    for (int i = 0; strategies[i].name && i < METRICS_MAX; i++) {
        long long g[LOCK_GRANTS], any = 0;
        for (int k = 1; k < LOCK_GRANTS; k++) any |= g[k] = load(&rows[i].grants[k]);
        for (int k = 1; k < LOCK_GRANTS && any; k++)
            put(o, "inventoryd_lock_grants_total{strategy=\"%s\",by=\"%s\"} %lld\n",
                strategies[i].name, lock_grant_word(k), g[k]);
    }
}

/* The Redlock masters' votes, when there are masters. */
static void put_votes(struct out *o) {
    if (!redlock_nodes_seen) return;
    put(o, "# HELP inventoryd_redlock_votes_total Redlock votes by master and outcome.\n"
           "# TYPE inventoryd_redlock_votes_total counter\n");
    for (int i = 0; i < redlock_nodes(redlock_nodes_seen); i++) {
        long long n[4];
        static const int outcome[] = {LOCK_VOTE_YES, LOCK_VOTE_BUSY, LOCK_VOTE_ERROR,
                                      LOCK_VOTE_RESTARTED};
        redlock_node_counts(redlock_nodes_seen, i, &n[0], &n[1], &n[2], &n[3]);
        for (int k = 0; k < 4; k++)
            put(o, "inventoryd_redlock_votes_total{node=\"%s\",outcome=\"%s\"} %lld\n",
                redlock_node_name(redlock_nodes_seen, i), lock_vote_word(outcome[k]), n[k]);
    }
}

/* The watchdog's lanes, one per server. */
static void put_lanes(struct out *o) {
    if (!core_seen) return;
    struct lock_lane_stats lanes[16];
    int n = lock_core_lanes(core_seen, lanes, 16);
    put(o, "# HELP inventoryd_watchdog_renewals_total Lease renewals by the watchdog lane "
           "of each server, by outcome.\n"
           "# TYPE inventoryd_watchdog_renewals_total counter\n");
    for (int i = 0; i < n; i++)
        put(o,
            "inventoryd_watchdog_renewals_total{lane=\"%s\",outcome=\"renewed\"} %lld\n"
            "inventoryd_watchdog_renewals_total{lane=\"%s\",outcome=\"lost\"} %lld\n"
            "inventoryd_watchdog_renewals_total{lane=\"%s\",outcome=\"unreached\"} %lld\n",
            lanes[i].name, lanes[i].renewed, lanes[i].name, lanes[i].lost, lanes[i].name,
            lanes[i].unreached);
    put(o, "# HELP inventoryd_watchdog_longest_renewal_ms The longest renewal of each lane, "
           "from its send to its outcome.\n"
           "# TYPE inventoryd_watchdog_longest_renewal_ms gauge\n");
    for (int i = 0; i < n; i++)
        put(o, "inventoryd_watchdog_longest_renewal_ms{lane=\"%s\"} %lld\n", lanes[i].name,
            (long long)(lanes[i].longest_us / 1000));
}

/* Redis Cluster's refusals followed and slot map loads, in cluster mode. */
static void put_cluster(struct out *o) {
    if (!cluster_root) return;
    struct cluster_stats st;
    rpool_cluster_stats(cluster_root, &st);
    put(o,
        "# HELP inventoryd_cluster_refusals_followed_total Commands refused by a cluster "
        "node (they did not run) and sent again where the refusal said.\n"
        "# TYPE inventoryd_cluster_refusals_followed_total counter\n"
        "inventoryd_cluster_refusals_followed_total{kind=\"moved\"} %lld\n"
        "inventoryd_cluster_refusals_followed_total{kind=\"ask\"} %lld\n"
        "inventoryd_cluster_refusals_followed_total{kind=\"tryagain\"} %lld\n"
        "# HELP inventoryd_cluster_map_loads_total Slot map loads (CLUSTER SLOTS).\n"
        "# TYPE inventoryd_cluster_map_loads_total counter\n"
        "inventoryd_cluster_map_loads_total %lld\n",
        st.moved, st.ask, st.tryagain, st.refreshes);
}

char *metrics_render(void) {
    struct out o = {malloc(8192), 0, 8192, 0};
    if (!o.buf) return NULL;
    put_statuses(&o);
    put_sums(&o);
    put_grants(&o);
    put_histogram(&o, "inventoryd_lock_wait_ms", "Time spent acquiring the lock, in ms.");
    put_histogram(&o, "inventoryd_lock_hold_ms", "Time the lock was held, in ms.");
    put_votes(&o);
    put_lanes(&o);
    put_cluster(&o);
    put(&o, "# HELP inventoryd_http_requests_total HTTP requests answered, by status class.\n"
            "# TYPE inventoryd_http_requests_total counter\n");
    for (int c = 1; c <= 5; c++)
        put(&o, "inventoryd_http_requests_total{code=\"%dxx\"} %lld\n", c, load(&http_by_class[c]));
    if (o.oom) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
}
