/* check_inventory.c -- the inventory service against a real redis-server
 * started on a free port by the harness. No HTTP here. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check_main.h"
#include "config.h"
#include "harness.h"
#include "inventory.h"
#include "mclock.h"
#include "script.h"
#include "service.h"
#include "strategy.h"

static pid_t redis_pid;
static int redis_port;
static struct config cfg;
static struct service svc;

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    config_defaults(&cfg);
    cfg.redis_port = redis_port;
    cfg.redis_timeout_ms = 500;
    cfg.redis_pool_size = 16;
    cfg.lock_wait_ms = 2000;
    /* A master votes once it has been up for the TTL: keep it short. */
    cfg.lock_ttl_ms = 1000;
    /* Redlock on one master, the test's Redis: quorum 1. */
    snprintf(cfg.redlock_nodes, sizeof(cfg.redlock_nodes), "127.0.0.1:%d", redis_port);
    char err[256];
    ck_assert_int_eq(service_open(&svc, &cfg, err, sizeof(err)), 0);
    ck_assert_int_eq(inventory_reset(svc.inv, NULL, 200, err, sizeof(err)), 0);
}

static void teardown(void) {
    service_close(&svc);
    harness_stop(redis_pid);
}

static const struct strategy *type(const char *name) {
    const struct strategy *t = strategy_find(name);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* Waits until the Redlock master (the test's Redis) may vote: up for the
 * TTL (the restart rule). */
static void redlock_ready(void) {
    ck_assert_int_eq(harness_redis_wait_uptime(redis_port, (cfg.lock_ttl_ms + 999) / 1000), 0);
}

static struct audit audit_now(void) {
    struct audit a;
    char err[256];
    ck_assert_int_eq(inventory_audit(svc.inv, NULL, &a, err, sizeof(err)), 0);
    return a;
}

START_TEST(test_a_reset_sets_the_stock_and_clears_the_ledger) {
    struct sale_result r;
    inventory_sell(svc.inv, type("atomic"), NULL, NULL, &r);
    char err[256];
    ck_assert_int_eq(inventory_reset(svc.inv, NULL, 7, err, sizeof(err)), 0);
    struct audit a = audit_now();
    ck_assert_int_eq(a.stock, 7);
    ck_assert_int_eq(a.initial, 7);
    ck_assert_int_eq(a.sold, 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 0);
}
END_TEST

START_TEST(test_a_sale_sells_the_unit_equal_to_the_stock_and_records_it) {
    const char *names[] = {"atomic", "none", "local"};
    for (int i = 0; i < 3; i++) {
        struct sale_result r;
        ck_assert_int_eq(inventory_sell(svc.inv, type(names[i]), NULL, NULL, &r), INV_SOLD);
        ck_assert_int_eq(r.unit, 200 - i);
        ck_assert_int_eq(r.remaining, 199 - i);
        ck_assert_int_ge(r.lock.attempts, names[i][0] == 'n' ? 0 : 1);
    }
    struct audit a = audit_now();
    ck_assert_int_eq(a.stock, 197);
    ck_assert_int_eq(a.sold, 3);
    ck_assert(!a.oversold);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 3);
}
END_TEST

/* Whether s can sell in this suite: its lock lives on Redis, or in a store
 * this suite configures (none: the zookeeper and mysql strategies have
 * suites of their own, which start their stores). */
static int here(const struct strategy *s) {
    char why[128];
    return inventory_strategy_configured(svc.inv, s, why, sizeof(why));
}

START_TEST(test_every_strategy_answers_sold_out_once_the_stock_is_gone) {
    char err[256];
    redlock_ready();
    for (int i = 0; strategies[i].name; i++) {
        if (!here(&strategies[i])) continue;
        ck_assert_int_eq(inventory_reset(svc.inv, NULL, 1, err, sizeof(err)), 0);
        struct sale_result r;
        int rc = inventory_sell(svc.inv, &strategies[i], NULL, NULL, &r);
        ck_assert_msg(rc == INV_SOLD, "%s: status %d: %s", strategies[i].name, rc, r.errstr);
        ck_assert_int_eq(inventory_sell(svc.inv, &strategies[i], NULL, NULL, &r), INV_SOLD_OUT);
        ck_assert_int_eq(r.remaining, 0);
        struct audit a = audit_now();
        ck_assert_int_eq(a.stock, 0);
        ck_assert_int_eq(a.sold, 1);
    }
}
END_TEST

struct slow_sale {
    const char *strategy;
    int hold_ms; /* work this long inside */
    struct sale_result r;
};

static void *run_sale(void *arg) {
    struct slow_sale *s = arg;
    struct sale_faults f = {.hold_ms = s->hold_ms};
    inventory_sell(svc.inv, strategy_find(s->strategy), NULL, &f, &s->r);
    return NULL;
}

/* Two sales: the first reads the stock and works 500 ms before writing; the
 * second starts once the first is inside its critical section (the probe
 * has its entry, which goes out with the GET of the stock), not at a time a
 * loaded machine may not keep. */
static void overlap(const char *strategy, struct slow_sale *a, struct slow_sale *b) {
    *a = (struct slow_sale){.strategy = strategy, .hold_ms = 500};
    *b = (struct slow_sale){.strategy = strategy, .hold_ms = 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_sale, a);
    int inside = harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders");
    pthread_create(&tb, NULL, run_sale, b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_msg(inside, "the first sale never came inside");
}

START_TEST(test_none_sells_the_same_unit_twice_and_the_probe_sees_two_holders) {
    struct slow_sale a, b;
    overlap("none", &a, &b);
    ck_assert_int_eq(a.r.status, INV_SOLD);
    ck_assert_int_eq(b.r.status, INV_SOLD);
    ck_assert_int_eq(a.r.unit, b.r.unit);
    struct audit au = audit_now();
    ck_assert_int_eq(au.sold, 2);
    ck_assert_int_eq(au.sold_twice, 1);
    ck_assert_int_eq(au.oversold_units, 1);
    ck_assert(au.oversold);
    ck_assert_int_eq(au.violations, 1);
}
END_TEST

START_TEST(test_local_serialises_two_sales_in_one_process) {
    struct slow_sale a, b;
    overlap("local", &a, &b);
    ck_assert_int_eq(a.r.status, INV_SOLD);
    ck_assert_int_eq(b.r.status, INV_SOLD);
    ck_assert_int_ne(a.r.unit, b.r.unit);
    ck_assert_int_ge(b.r.wait_ms, 150); /* it waited for the first holder */
    struct audit au = audit_now();
    ck_assert_int_eq(au.sold_twice, 0);
    ck_assert(!au.oversold);
    ck_assert_int_eq(au.violations, 0);
}
END_TEST

START_TEST(test_a_stock_that_is_not_a_number_is_refused_without_a_write) {
    redlock_ready();
    harness_redis_int(redis_port, "SET inventory001 abc");
    for (int i = 0; strategies[i].name; i++) {
        if (!here(&strategies[i])) continue;
        struct sale_result r;
        ck_assert_int_eq(inventory_sell(svc.inv, &strategies[i], NULL, NULL, &r), INV_BAD_DATA);
        ck_assert_ptr_nonnull(strstr(r.errstr, "inventory001"));
        redisReply *stock = harness_redis(redis_port, "GET inventory001");
        ck_assert_msg(stock && stock->type == REDIS_REPLY_STRING && strcmp(stock->str, "abc") == 0,
                      "%s wrote the stock key", strategies[i].name);
        freeReplyObject(stock);
    }
    harness_redis_int(redis_port, "DEL inventory001");
    struct sale_result r;
    ck_assert_int_eq(inventory_sell(svc.inv, type("local"), NULL, NULL, &r), INV_BAD_DATA);
    ck_assert_int_eq(inventory_sell(svc.inv, type("atomic"), NULL, NULL, &r), INV_BAD_DATA);
    ck_assert_ptr_nonnull(strstr(r.errstr, "does not exist"));
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001"), 0); /* not created */
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001:holders"), 0);
}
END_TEST

START_TEST(test_a_sale_with_redis_stopped_is_backend_unavailable_within_the_timeout) {
    struct sale_result r;
    ck_assert_int_eq(inventory_sell(svc.inv, type("local"), NULL, NULL, &r), INV_SOLD);
    harness_stop(redis_pid);
    redis_pid = 0;
    for (int i = 0; strategies[i].name; i++) {
        if (!here(&strategies[i])) continue;
        int64_t t0 = mclock_ms();
        ck_assert_int_eq(inventory_sell(svc.inv, &strategies[i], NULL, NULL, &r), INV_BACKEND);
        ck_assert_int_lt(mclock_ms() - t0, cfg.redis_timeout_ms + 500);
        ck_assert_ptr_nonnull(strstr(r.errstr, "Redis is unavailable"));
    }
    long long stock;
    char err[256];
    ck_assert_int_eq(inventory_stock(svc.inv, NULL, 0, &stock, err, sizeof(err)), INV_BACKEND);
    ck_assert_int_eq(inventory_ping(svc.inv, err, sizeof(err)), INV_BACKEND);
}
END_TEST

START_TEST(test_sales_resume_by_themselves_once_redis_is_back) {
    struct sale_result r;
    /* Fill the pool with idle connections, then restart Redis under them. */
    ck_assert_int_eq(inventory_sell(svc.inv, type("atomic"), NULL, NULL, &r), INV_SOLD);
    harness_stop(redis_pid);
    ck_assert_int_eq(inventory_sell(svc.inv, type("atomic"), NULL, NULL, &r), INV_BACKEND);
    redis_pid = harness_redis_start(redis_port, NULL);
    ck_assert_int_gt(redis_pid, 0);
    char err[256];
    ck_assert_int_eq(inventory_reset(svc.inv, NULL, 100, err, sizeof(err)), 0);
    redlock_ready(); /* the restarted master votes once up for the TTL */
    for (int i = 0; strategies[i].name; i++)
        if (here(&strategies[i]))
            ck_assert_int_eq(inventory_sell(svc.inv, &strategies[i], NULL, NULL, &r), INV_SOLD);
}
END_TEST

START_TEST(test_an_idle_connection_closed_by_a_restart_is_not_reused) {
    struct sale_result r;
    ck_assert_int_eq(inventory_sell(svc.inv, type("local"), NULL, NULL, &r), INV_SOLD);
    harness_stop(redis_pid);
    redis_pid = harness_redis_start(redis_port, NULL);
    ck_assert_int_gt(redis_pid, 0);
    harness_redis_int(redis_port, "SET inventory001 3");
    /* The pooled connection saw EOF: the first sale after the restart must
     * not fail on it. */
    ck_assert_int_eq(inventory_sell(svc.inv, type("local"), NULL, NULL, &r), INV_SOLD);
    ck_assert_int_eq(r.unit, 3);
}
END_TEST

START_TEST(test_a_script_flushed_from_redis_is_loaded_again) {
    struct sale_result r;
    ck_assert_int_eq(inventory_sell(svc.inv, type("atomic"), NULL, NULL, &r), INV_SOLD);
    long long loads = harness_redis_calls(redis_port, "script|load");
    harness_redis_int(redis_port, "SCRIPT FLUSH");
    /* EVALSHA answers NOSCRIPT; the script is loaded and run once. */
    ck_assert_int_eq(inventory_sell(svc.inv, type("atomic"), NULL, NULL, &r), INV_SOLD);
    ck_assert_int_eq(r.unit, 199);
    ck_assert_int_eq(harness_redis_calls(redis_port, "script|load"), loads + 1);
    struct audit a = audit_now();
    ck_assert_int_eq(a.sold, 2);
    ck_assert_int_eq(a.sold_twice, 0);
}
END_TEST

/* errorstat_<code>'s count in INFO errorstats: how many replies Redis has
 * answered with that error. */
static long long errors_answered(const char *code) {
    redisReply *r = harness_redis(redis_port, "INFO errorstats");
    ck_assert_ptr_nonnull(r);
    char key[64];
    snprintf(key, sizeof(key), "errorstat_%s:count=", code);
    const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, key) : NULL;
    long long n = at ? atoll(at + strlen(key)) : 0;
    freeReplyObject(r);
    return n;
}

/* The probe's entry goes out with the GET, through the lock's pipeline. If
 * Redis lost the script (SCRIPT FLUSH), the entry answers NOSCRIPT and did
 * not run: it is loaded and run again, and still sees a holder inside. */
START_TEST(test_a_probe_entry_that_answers_noscript_runs_again_and_sees_the_holder_inside) {
    struct slow_sale a = {.strategy = "none", .hold_ms = 3000};
    pthread_t ta;
    pthread_create(&ta, NULL, run_sale, &a);
    for (int64_t end = mclock_ms() + 10000;
         harness_redis_int(redis_port, "HLEN inventory001:holders") < 1 && mclock_ms() < end;)
        mclock_sleep_ms(5);
    ck_assert_int_eq(harness_redis_int(redis_port, "HLEN inventory001:holders"), 1);
    /* A second pooled connection, made (and its scripts loaded) now, for the
     * next sale: a connection made later would load every script again. */
    long long stock;
    char err[256];
    ck_assert_int_eq(inventory_stock(svc.inv, NULL, 0, &stock, err, sizeof(err)), INV_SOLD);
    /* Every script but the probe's entry is there again: that one alone
     * answers NOSCRIPT. */
    harness_redis_int(redis_port, "SCRIPT FLUSH");
    for (int i = 0; script_sources[i].name; i++)
        if (strcmp(script_sources[i].name, "probe-enter") != 0)
            freeReplyObject(harness_redis(redis_port, "SCRIPT LOAD %s", script_sources[i].body));
    long long noscript = errors_answered("NOSCRIPT");
    long long loads = harness_redis_calls(redis_port, "script|load");
    struct sale_result b;
    ck_assert_int_eq(inventory_sell(svc.inv, type("none"), NULL, NULL, &b), INV_SOLD);
    /* The fault: the entry answered NOSCRIPT (pipelined with the GET, then
     * once more as script_run tries EVALSHA first), then was loaded once. */
    ck_assert_int_eq(errors_answered("NOSCRIPT"), noscript + 2);
    ck_assert_int_eq(harness_redis_calls(redis_port, "script|load"), loads + 1);
    /* Run again, it saw the first sale inside. */
    ck_assert_msg(b.violation, "the entry run again did not see the holder inside");
    pthread_join(ta, NULL);
    ck_assert_int_eq(a.r.status, INV_SOLD);
    struct audit au = audit_now();
    ck_assert_int_eq(au.violations, 1);
    ck_assert_int_eq(harness_redis_int(redis_port, "HLEN inventory001:holders"), 0);
}
END_TEST

struct batch_run {
    int sales;
    long long units[64];
    int biggest_batch;
};

static void *sell_many(void *arg) {
    struct batch_run *b = arg;
    for (;;) {
        struct sale_result r;
        int rc = inventory_sell(svc.inv, strategy_find("batched"), NULL, NULL, &r);
        if (rc != INV_SOLD) break;
        if (b->sales < 64) b->units[b->sales] = r.unit;
        b->sales++;
        if (r.batch > b->biggest_batch) b->biggest_batch = r.batch;
    }
    return NULL;
}

START_TEST(test_batched_sells_each_unit_once_to_its_own_sale_under_shared_holds) {
    char err[256];
    ck_assert_int_eq(inventory_reset(svc.inv, NULL, 150, err, sizeof(err)), 0);
    enum { T = 24 };
    struct batch_run runs[T];
    pthread_t th[T];
    memset(runs, 0, sizeof(runs));
    for (int i = 0; i < T; i++) pthread_create(&th[i], NULL, sell_many, &runs[i]);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    int total = 0, biggest = 0;
    char seen[151] = {0};
    for (int i = 0; i < T; i++) {
        total += runs[i].sales;
        if (runs[i].biggest_batch > biggest) biggest = runs[i].biggest_batch;
        for (int j = 0; j < runs[i].sales && j < 64; j++) {
            long long u = runs[i].units[j];
            ck_assert(u >= 1 && u <= 150);
            ck_assert_msg(!seen[u], "unit %lld sold twice", u);
            seen[u] = 1;
        }
    }
    ck_assert_int_eq(total, 150);
    ck_assert_int_gt(biggest, 1); /* some holds served several sales */
    struct audit a = audit_now();
    ck_assert_int_eq(a.sold, 150);
    ck_assert_int_eq(a.stock, 0);
    ck_assert_int_eq(a.sold_twice, 0);
    ck_assert_int_eq(a.violations, 0);
}
END_TEST

struct item_run {
    const char *item;
    int sold;
    char orders[40][48]; /* the order of each sale that sold */
};

static void *sell_item(void *arg) {
    struct item_run *b = arg;
    for (int i = 0; i < 40; i++) {
        struct sale_result r;
        if (inventory_sell(svc.inv, strategy_find("batched"), b->item, NULL, &r) == INV_SOLD)
            memcpy(b->orders[b->sold++], r.order, sizeof(r.order));
    }
    return NULL;
}

/* The thread of runs[] whose sale has this order; -1 when none. */
static int seller_of(const struct item_run *runs, int n, const char *order) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < runs[i].sold; j++)
            if (strcmp(runs[i].orders[j], order) == 0) return i;
    return -1;
}

START_TEST(test_batched_never_mixes_items_that_share_the_global_lock) {
    char err[256];
    ck_assert_int_eq(inventory_reset(svc.inv, "inventory001", 50, err, sizeof(err)), 0);
    ck_assert_int_eq(inventory_reset(svc.inv, "inventory002", 30, err, sizeof(err)), 0);
    enum { T = 12 };
    struct item_run runs[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        memset(&runs[i], 0, sizeof(runs[i]));
        runs[i].item = i % 2 ? "inventory002" : "inventory001";
        pthread_create(&th[i], NULL, sell_item, &runs[i]);
    }
    int sold[2] = {0, 0};
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        sold[i % 2] += runs[i].sold;
    }
    ck_assert_int_eq(sold[0], 50);
    ck_assert_int_eq(sold[1], 30);
    /* Every entry of each item's ledger ("unit|order|port") is a sale made
     * for that item, and its units are that item's, each once. */
    static const struct {
        const char *item;
        int stock;
    } items[] = {{"inventory001", 50}, {"inventory002", 30}};
    for (int k = 0; k < 2; k++) {
        redisReply *l = harness_redis(redis_port, "LRANGE %s:sold 0 -1", items[k].item);
        ck_assert_ptr_nonnull(l);
        ck_assert_int_eq(l->elements, items[k].stock);
        char seen[51] = {0};
        for (size_t e = 0; e < l->elements; e++) {
            long long unit;
            char order[64];
            ck_assert_int_eq(sscanf(l->element[e]->str, "%lld|%63[^|]", &unit, order), 2);
            int who = seller_of(runs, T, order);
            ck_assert_msg(who >= 0 && strcmp(runs[who].item, items[k].item) == 0,
                          "%s's ledger has %s, sold for %s", items[k].item, l->element[e]->str,
                          who >= 0 ? runs[who].item : "no one");
            ck_assert(unit >= 1 && unit <= items[k].stock && !seen[unit]);
            seen[unit] = 1;
        }
        freeReplyObject(l);
    }
    struct audit a;
    ck_assert_int_eq(inventory_audit(svc.inv, "inventory002", &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.sold, 30);
    ck_assert_int_eq(a.sold_twice, 0);
}
END_TEST

Suite *inventory_suite(void) {
    Suite *s = suite_create("inventory");
    TCase *core = tcase_create("Core");
    tcase_add_checked_fixture(core, setup, teardown);
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_a_reset_sets_the_stock_and_clears_the_ledger);
    tcase_add_test(core, test_a_sale_sells_the_unit_equal_to_the_stock_and_records_it);
    tcase_add_test(core, test_every_strategy_answers_sold_out_once_the_stock_is_gone);
    tcase_add_test(core, test_none_sells_the_same_unit_twice_and_the_probe_sees_two_holders);
    tcase_add_test(core, test_local_serialises_two_sales_in_one_process);
    tcase_add_test(core, test_a_stock_that_is_not_a_number_is_refused_without_a_write);
    tcase_add_test(core, test_a_script_flushed_from_redis_is_loaded_again);
    tcase_add_test(core,
                   test_a_probe_entry_that_answers_noscript_runs_again_and_sees_the_holder_inside);
    tcase_add_test(core, test_batched_sells_each_unit_once_to_its_own_sale_under_shared_holds);
    tcase_add_test(core, test_batched_never_mixes_items_that_share_the_global_lock);
    suite_add_tcase(s, core);
    TCase *outage = tcase_create("Outage");
    tcase_add_checked_fixture(outage, setup, teardown);
    tcase_set_timeout(outage, 60);
    tcase_add_test(outage,
                   test_a_sale_with_redis_stopped_is_backend_unavailable_within_the_timeout);
    tcase_add_test(outage, test_sales_resume_by_themselves_once_redis_is_back);
    tcase_add_test(outage, test_an_idle_connection_closed_by_a_restart_is_not_reused);
    suite_add_tcase(s, outage);
    return s;
}
