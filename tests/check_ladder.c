/* check_ladder.c -- the flaw ladder: each step's flaw shown on demand by a
 * test, and the next step's test showing it fixed. Real redis-server, real
 * inventoryd instances with faults.enabled=true; timings are in units of the
 * lock TTL, with margins of a few hundred ms. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "check_main.h"
#include "harness.h"
#include "mclock.h"

static pid_t redis_pid, a_pid, b_pid;
static int redis_port, a_port, b_port;

#define LOCK_KEY "RedisDistributedLock"

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    a_pid = b_pid = 0;
}

static void teardown(void) {
    if (a_pid) kill(a_pid, SIGCONT);
    harness_stop(a_pid);
    harness_stop(b_pid);
    harness_stop(redis_pid);
}

/* Starts instances A and B on the test's Redis with this TTL and wait. */
static void start_pair(int ttl_ms, int wait_ms, const char *extra) {
    const char *sets[] = {extra, NULL};
    ck_assert_int_eq(
        harness_pair_start(redis_port, ttl_ms, wait_ms, sets, &a_pid, &a_port, &b_pid, &b_port), 0);
}

static double audit(const char *field) {
    double v = harness_audit(a_port, field);
    ck_assert_msg(v > -1e9, "GET /inventory/audit failed");
    return v;
}

static void sale_path(char *buf, size_t len, const char *strategy, const char *query) {
    snprintf(buf, len, "/inventory/sale/%s%s%s", strategy, query[0] ? "?" : "", query);
}

/* Waits until `at` ms after t0. */
static void at(int64_t t0, int ms) {
    int64_t left = t0 + ms - mclock_ms();
    if (left > 0) mclock_sleep_ms((int)left);
}

/* Waits (10 s at most) until the Redis at port has run more commands cmd
 * (INFO commandstats) than `than`; 1 when it has. */
static int calls_above(int port, const char *cmd, long long than) {
    for (int64_t end = mclock_ms() + 10000; mclock_ms() < end; mclock_sleep_ms(5))
        if (harness_redis_calls(port, cmd) > than) return 1;
    return 0;
}

/* Waits (5 s at most) until the lock key exists: the first sale holds it,
 * and the next can be sent to find it held. */
static void held(void) {
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "EXISTS " LOCK_KEY),
                  "the first sale never took " LOCK_KEY);
}

/* ---- Spin: a lock in Redis, then one that never expires ---------------- */

START_TEST(test_setnx_spin_serialises_two_instances_where_local_did_not) {
    start_pair(10000, 5000, NULL);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/setnx-spin?hold_ms=600", 0);
    held();
    harness_bg_start(&b, b_port, "/inventory/sale/setnx-spin", 0);
    harness_bg_join(&a);
    harness_bg_join(&b);
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_ne(harness_json_num(a.body, "unit"), harness_json_num(b.body, "unit"));
    ck_assert_int_ge(harness_json_num(b.body, "lock.wait_ms"), 200);
    ck_assert_int_gt(harness_json_num(b.body, "lock.attempts"), 5); /* it spun */
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
}
END_TEST

START_TEST(test_setnx_retry_reports_its_depth_and_fails_cleanly_at_the_cap) {
    start_pair(10000, 5000, "lock.retry-max-depth=5");
    harness_redis_int(redis_port, "SET " LOCK_KEY " someone-else");
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/setnx-retry", NULL, NULL, &r),
                     503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "lock_timeout");
    ck_assert_int_eq(harness_json_num(r.body, "lock.depth"), 5);
    ck_assert_ptr_nonnull(strstr(r.body, "recursion depth cap 5"));
    harness_redis_int(redis_port, "DEL " LOCK_KEY);
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/setnx-retry", NULL, NULL, &r),
                     200);
    ck_assert_int_eq(harness_json_num(r.body, "lock.depth"), 1);
}
END_TEST

/* A nested acquire that fails answers with its reason, as a first one does:
 * setnx-retry's nested acquire waits for the holder itself, until its
 * recursion cap. */
START_TEST(test_a_failed_nested_acquire_answers_with_its_reason) {
    start_pair(10000, 5000, "lock.retry-max-depth=5");
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/setnx-retry?nested=1", NULL, NULL, &r), 503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "lock_timeout");
    ck_assert_msg(strstr(r.body, "recursion depth cap 5"), "no reason: %s", r.body);
}
END_TEST

START_TEST(test_a_setnx_spin_holder_that_crashes_leaves_the_lock_forever) {
    start_pair(600, 400, NULL);
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/setnx-spin?crash=1", NULL, NULL, &r), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "PTTL " LOCK_KEY), -1); /* no expiry */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/setnx-spin", NULL, NULL, &r),
                         503);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "lock_timeout");
        mclock_sleep_ms(600); /* a TTL later, still held */
    }
}
END_TEST

START_TEST(test_an_expiring_holder_that_crashes_frees_the_lock_after_the_ttl) {
    start_pair(800, 300, NULL);
    struct httpc_response r;
    int64_t t0 = mclock_ms();
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/expiring?crash=1", NULL, NULL, &r), 0);
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/expiring", NULL, NULL, &r), 503);
    at(t0, 900);
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/expiring", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
}
END_TEST

/* ---- Expiry: who deletes whose lock ------------------------------------ */

/* TTL 1500. A holds 2200 (its key expires at 1500 and B, sent once A
 * holds, takes the lock then); B holds 1200 (300 ms inside its TTL), to
 * about 2700. A releases at 2200; once A has answered (after its release),
 * the test looks at the key and sends C: events, not times, and 500 ms
 * between A's release and B's, so that a loaded machine does not move one
 * past the other. Returns C's wait; *key_left tells whether B's key was
 * still there once A had let go. */
static int after_slow_holder(const char *strategy, const char *a_query, int *key_left) {
    start_pair(1500, 5000, NULL);
    char pa[128], pb[128], pc[128];
    sale_path(pa, sizeof(pa), strategy, a_query);
    sale_path(pb, sizeof(pb), strategy, "hold_ms=1200");
    sale_path(pc, sizeof(pc), strategy, "");
    struct harness_bg a, b, c;
    harness_bg_start(&a, a_port, pa, 0);
    held();
    harness_bg_start(&b, b_port, pb, 0);
    harness_bg_join(&a);
    *key_left = (int)harness_redis_int(redis_port, "EXISTS " LOCK_KEY);
    harness_bg_start(&c, a_port, pc, 0);
    harness_bg_join(&b);
    harness_bg_join(&c);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_eq(c.status, 200);
    ck_assert_int_ge(harness_json_num(b.body, "lock.wait_ms"), 500); /* B took A's expired lock */
    return (int)harness_json_num(c.body, "lock.wait_ms");
}

START_TEST(test_an_expiring_holder_slower_than_the_ttl_deletes_the_next_owners_lock) {
    int key_left;
    int c_wait = after_slow_holder("expiring", "hold_ms=2200", &key_left);
    ck_assert_int_eq(key_left, 0); /* A's DEL removed B's lock */
    ck_assert_int_lt(c_wait, 150); /* so C walked in while B held it */
    ck_assert_int_ge(audit("violations"), 2); /* A with B, then B with C */
}
END_TEST

START_TEST(test_owner_check_does_not_delete_the_next_owners_lock) {
    int key_left;
    int c_wait = after_slow_holder("owner-check", "hold_ms=2200", &key_left);
    ck_assert_int_eq(key_left, 1); /* A saw B's value and kept off */
    ck_assert_int_ge(c_wait, 120); /* C waited for B's release at about 2700 */
    /* A and B still overlapped (A outlived its TTL): fixed by the watchdog. */
    ck_assert_int_eq(audit("violations"), 1);
}
END_TEST

START_TEST(test_owner_check_with_a_slow_release_deletes_another_owners_lock) {
    /* A checks at 200 (still its own), pauses 2000 ms, deletes at 2200. */
    int key_left;
    int c_wait = after_slow_holder("owner-check", "hold_ms=200&release_delay_ms=2000", &key_left);
    ck_assert_int_eq(key_left, 0);
    ck_assert_int_lt(c_wait, 150);
    ck_assert_int_ge(audit("violations"), 1); /* B with C */
}
END_TEST

START_TEST(test_owner_lua_never_deletes_another_owners_lock) {
    int key_left;
    int c_wait = after_slow_holder("owner-lua", "hold_ms=200&release_delay_ms=2000", &key_left);
    ck_assert_int_eq(key_left, 1);
    ck_assert_int_ge(c_wait, 120);
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* ---- Reentry and renewal ----------------------------------------------- */

START_TEST(test_owner_lua_nested_acquire_blocks_on_itself) {
    start_pair(10000, 300, NULL);
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/owner-lua?nested=2", NULL, NULL, &r), 503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "lock_timeout");
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY),
                     0); /* outer hold released */
    ck_assert_int_eq(audit("sold"), 0);
}
END_TEST

START_TEST(test_reentrant_nested_acquire_succeeds_and_the_count_returns_to_zero) {
    start_pair(10000, 300, NULL);
    struct harness_bg a;
    harness_bg_start(&a, a_port, "/inventory/sale/reentrant?nested=2&hold_ms=400", 0);
    /* While it works: one owner field, held three times. */
    redisReply *h = NULL;
    int thrice = 0;
    for (int64_t end = mclock_ms() + 5000; !thrice && mclock_ms() < end; mclock_sleep_ms(5)) {
        freeReplyObject(h);
        h = harness_redis(redis_port, "HGETALL " LOCK_KEY);
        thrice = h && h->type == REDIS_REPLY_ARRAY && h->elements == 2 &&
                 strcmp(h->element[1]->str, "3") == 0;
    }
    ck_assert_msg(thrice, "the lock was never one owner held three times (%zu fields)",
                  h ? h->elements / 2 : 0);
    ck_assert_ptr_nonnull(strchr(h->element[0]->str, ':'));
    freeReplyObject(h);
    harness_bg_join(&a);
    ck_assert_int_eq(a.status, 200);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "sold");
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 0);
}
END_TEST

START_TEST(test_reentrant_work_longer_than_the_ttl_loses_the_lock_and_the_probe_sees_overlap) {
    start_pair(600, 5000, NULL);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/reentrant?hold_ms=1200", 0);
    held(); /* A is inside before B comes */
    harness_bg_start(&b, b_port, "/inventory/sale/reentrant?hold_ms=200", 0);
    harness_bg_join(&a);
    harness_bg_join(&b);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_lt(harness_json_num(b.body, "lock.wait_ms"), 1000); /* in before A left */
    ck_assert_int_ge(audit("violations"), 1);
    ck_assert(audit("oversold_units") >= 1 || audit("sold_twice") >= 1);
}
END_TEST

START_TEST(test_watchdog_keeps_the_lock_through_work_three_times_the_ttl) {
    start_pair(600, 5000, NULL);
    struct harness_bg a, b;
    int64_t t0 = mclock_ms();
    harness_bg_start(&a, a_port, "/inventory/sale/watchdog?hold_ms=1800", 0);
    held(); /* A is inside before B comes */
    harness_bg_start(&b, b_port, "/inventory/sale/watchdog", 0);
    for (int ms = 700; ms <= 1600; ms += 300) {
        at(t0, ms);
        long long pttl = harness_redis_int(redis_port, "PTTL " LOCK_KEY);
        ck_assert_msg(pttl > 100, "PTTL at %d ms was %lld: not renewed", ms, pttl);
    }
    harness_bg_join(&a);
    harness_bg_join(&b);
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_ge(harness_json_num(b.body, "lock.wait_ms"), 1300); /* B waited for A */
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(audit("sold_twice"), 0);
    /* Renewal stops at release: no script runs once both are done. */
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 0);
    long long before = harness_redis_calls(redis_port, "evalsha");
    mclock_sleep_ms(700);
    ck_assert_int_eq(harness_redis_calls(redis_port, "evalsha"), before);
}
END_TEST

START_TEST(test_a_failed_renewal_marks_the_lock_lost_and_the_sale_refuses_to_commit) {
    start_pair(600, 5000, NULL);
    struct harness_bg a;
    harness_bg_start(&a, a_port, "/inventory/sale/watchdog?hold_ms=900", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "EXISTS " LOCK_KEY),
                  "A never took the lock");
    /* e.g. a failover lost it */
    ck_assert_int_eq(harness_redis_int(redis_port, "DEL " LOCK_KEY), 1);
    harness_bg_join(&a);
    ck_assert_int_eq(a.status, 409);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "lock_lost");
    ck_assert_int_eq(audit("sold"), 0);
    ck_assert_int_eq(audit("stock"), 200);
}
END_TEST

/* ---- Redisson: woken by the unlock message ----------------------------- */

/* A Redisson client holds the lock; a sale by strategy waits without a
 * command and is woken by the client's unlock message. */
static void woken_by_redisson_client(const char *strategy) {
    start_pair(30000, 5000, NULL);
    const char *owner = "b983c153-7421-469a-addb-44fb92259a1b:1";
    ck_assert_int_eq(harness_redisson_lock(redis_port, LOCK_KEY, owner, 30000), 1);

    struct harness_bg sale;
    char path[64];
    snprintf(path, sizeof(path), "/inventory/sale/%s", strategy);
    long long tries = harness_redis_calls(redis_port, "evalsha");
    harness_bg_start(&sale, a_port, path, 0);
    /* Waiting: it tried, subscribed to the unlock channel, and tried again
     * (lock_hash.c: an unlock before the subscription is not missed). */
    ck_assert_msg(calls_above(redis_port, "evalsha", tries + 1),
                  "the sale did not try the lock twice");
    int listening = 0;
    for (int64_t end = mclock_ms() + 10000; !listening && mclock_ms() < end; mclock_sleep_ms(5))
        listening = harness_subscribers(redis_port, "redisson_lock__channel:{" LOCK_KEY "}") >= 1;
    ck_assert_msg(listening, "the sale never subscribed to the unlock channel");
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    mclock_sleep_ms(700);
    char *seen = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(seen);
    /* The probe's heartbeat renews each process's alive key every 250 ms,
     * whatever the sales do: that is not the waiter, and is left out on
     * purpose. Seeing it shows that the log is live. */
    const char *heartbeat[] = {"\"SET\" \"inventory001:alive:", NULL};
    int beats = harness_lines(seen, heartbeat[0], NULL);
    int during = harness_lines(seen, NULL, heartbeat);
    ck_assert_msg(beats >= 2, "only %d heartbeats in 700 ms: MONITOR saw nothing?\n%.1500s", beats,
                  seen);
    ck_assert_msg(during == 0, "%d Redis commands while waiting: it polled:\n%.1500s", during,
                  seen);
    free(seen);

    int64_t released = mclock_ms();
    ck_assert_int_eq(harness_redisson_unlock(redis_port, LOCK_KEY, owner), 1);
    harness_bg_join(&sale);
    ck_assert_int_eq(sale.status, 200);
    ck_assert_str_eq(harness_json_str(sale.body, "status"), "sold");
    ck_assert_int_le(harness_json_num(sale.body, "lock.attempts"), 3);
    /* From before the unlock's round trip to the whole answer received:
     * woken by the message, not at the end of its wait (5 s) or the
     * client's PTTL (30 s); the bound is generous for a loaded machine. */
    int64_t woken_within = sale.sent_ms + sale.took_ms - released;
    ck_assert_msg(woken_within <= 2000, "answered %lld ms after the unlock",
                  (long long)woken_within);
}

START_TEST(test_redisson_waits_for_a_redisson_client_and_is_woken_by_its_unlock_message) {
    woken_by_redisson_client("redisson");
}
END_TEST

START_TEST(test_batched_waits_for_a_redisson_client_and_is_woken_by_its_unlock_message) {
    woken_by_redisson_client("batched");
}
END_TEST

#define OTHER_OWNER "b983c153-7421-469a-addb-44fb92259a1b:1"

/* Six sales queue behind a Redisson client's lock; once it is freed they
 * are served one by one in the order they came in (the gate: none
 * starves): the units, taken in the order of their arrival (their order
 * ids), go down one by one; and none but the first sent an acquire while
 * it waited. The first is sent once the lock is held, the others 60 ms
 * apart; the unlock comes 1 s after the last. */
START_TEST(test_redisson_serves_the_sales_of_one_process_in_arrival_order) {
    start_pair(30000, 8000, NULL);
    ck_assert_int_eq(harness_redisson_lock(redis_port, LOCK_KEY, OTHER_OWNER, 30000), 1);
    enum { N = 6 };
    struct harness_bg s[N];
    for (int i = 0; i < N; i++) {
        harness_bg_start(&s[i], a_port, "/inventory/sale/redisson", 0);
        mclock_sleep_ms(60);
    }
    mclock_sleep_ms(1000);
    int64_t freed = mclock_ms();
    ck_assert_int_eq(harness_redisson_unlock(redis_port, LOCK_KEY, OTHER_OWNER), 1);
    for (int i = 0; i < N; i++) harness_bg_join(&s[i]);
    char why[1200];
    ck_assert_msg(harness_queued_before(s, 0, N, freed, why, sizeof(why)), "%s", why);
    ck_assert_msg(harness_served_in_arrival_order(s, 0, N, 200, why, sizeof(why)), "%s", why);
}
END_TEST

/* ---- Batched: one hold for every sale queued in the process ---------------- */

/* Sale L waits alone for a Redisson client's lock (it leads the first
 * batch); then X (x_query), 300 ms later five plain sales and Z
 * (hold_ms=3000), in that order, 40 ms apart, queue behind it. L is seen waiting (its first try ran
 * in Redis) before the others are sent; they may come in in another order
 * (see harness_arrival()). The client unlocks 1 s after the last. Fills s[0..7] in
 * the sending order; `during`, when not NULL, runs once L has sold and the
 * second batch holds the lock. */
enum { QUEUED = 8 };
static int batch_stock; /* > 0: the stock set before the client unlocks */
static void batch_behind_a_client(int ttl_ms, const char *x_query, struct harness_bg *s,
                                  struct harness_monitor **m, void (*during)(void)) {
    start_pair(ttl_ms, 8000, NULL);
    ck_assert_int_eq(harness_redisson_lock(redis_port, LOCK_KEY, OTHER_OWNER, 30000), 1);
    long long tries = harness_redis_calls(redis_port, "evalsha");
    harness_bg_start(&s[0], a_port, "/inventory/sale/batched", 0);
    ck_assert_msg(calls_above(redis_port, "evalsha", tries), "sale L never tried the lock");
    char px[96];
    snprintf(px, sizeof(px), "/inventory/sale/batched?%s", x_query);
    for (int i = 1; i < QUEUED; i++) {
        harness_bg_start(&s[i], a_port,
                         i == 1            ? px
                         : i == QUEUED - 1 ? "/inventory/sale/batched?hold_ms=3000"
                                           : "/inventory/sale/batched",
                         0);
        mclock_sleep_ms(i == 1 ? 300 : 40); /* X well ahead of the rest */
    }
    mclock_sleep_ms(1000);
    if (batch_stock > 0) { /* the stock the batches will find */
        harness_redis_int(redis_port, "SET inventory001 %d", batch_stock);
    }
    if (m) *m = harness_monitor_start(redis_port);
    ck_assert_int_eq(harness_redisson_unlock(redis_port, LOCK_KEY, OTHER_OWNER), 1);
    int first = 0;
    if (during) {
        harness_bg_join(&s[0]);
        first = 1;
        int held = 0;
        for (int64_t end = mclock_ms() + 10000; !held && mclock_ms() < end; mclock_sleep_ms(5))
            held = harness_redis_int(redis_port, "EXISTS " LOCK_KEY) == 1;
        ck_assert_msg(held, "the second batch never took the lock");
        during();
    }
    for (int i = first; i < QUEUED; i++) harness_bg_join(&s[i]);
}

START_TEST(test_batched_sends_one_acquire_and_one_read_and_write_per_batch_led_by_the_oldest_sale) {
    struct harness_bg s[QUEUED];
    struct harness_monitor *m = NULL;
    const char *acquire = harness_script_sha(redis_port, "hash-lock");
    char acquire_cmd[96];
    batch_behind_a_client(30000, "hold_ms=400", s, &m, NULL);
    char *seen = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(seen);
    ck_assert(acquire[0]);
    snprintf(acquire_cmd, sizeof(acquire_cmd), "\"EVALSHA\" \"%s\"", acquire);
    for (int i = 0; i < QUEUED; i++) {
        ck_assert_msg(s[i].status == 200, "sale %d: %d %s", i, s[i].status, s[i].body);
        ck_assert_str_eq(harness_json_str(s[i].body, "status"), "sold");
    }
    /* Units in queue order: L first, then the second batch in the order
     * its sales came in. */
    ck_assert_int_eq(harness_json_num(s[0].body, "unit"), 200);
    int rank[QUEUED - 1];
    harness_by_arrival(s, 1, QUEUED - 1, rank);
    for (int r = 0; r < QUEUED - 1; r++)
        ck_assert_msg(harness_json_num(s[rank[r]].body, "unit") == 199 - r,
                      "the %d-th sale of the second batch to come in (sale %d): %s", r + 1, rank[r],
                      s[rank[r]].body);
    ck_assert_int_eq(harness_json_num(s[0].body, "lock.batch"), -1); /* alone */
    ck_assert_int_lt(harness_json_num(s[0].body, "lock.hold_ms"), 400);
    /* The oldest queued sale led the batch: its hold_ms applied to all of
     * it (X's 400 ms, as sent first; a plain sale's none), and Z's 3000 ms,
     * unless Z led, to nothing. */
    int leader = rank[0];
    int lead_hold = leader == 1 ? 400 : leader == QUEUED - 1 ? 3000 : 0;
    for (int i = 1; i < QUEUED; i++) {
        ck_assert_msg(harness_json_num(s[i].body, "lock.batch") == QUEUED - 1, "sale %d: %s", i,
                      s[i].body);
        double held = harness_json_num(s[i].body, "lock.hold_ms");
        ck_assert_msg(held >= lead_hold && (lead_hold == 3000 || held < 3000),
                      "sale %d held %.0f ms, in a batch led by sale %d (hold_ms %d): %s", i, held,
                      leader, lead_hold, s[i].body);
    }
    /* Two batches after the unlock: two acquires, two GETs, two SETs, two
     * RPUSHes (the second with seven entries), inside two writes. */
    ck_assert_msg(harness_lines(seen, acquire_cmd, NULL) == 2,
                  "acquires after the unlock:\n%.1500s", seen);
    ck_assert_int_eq(harness_lines(seen, "\"GET\" \"inventory001\"", NULL), 2);
    /* The write is one script (sale-write.lua): MONITOR shows its calls. */
    ck_assert_int_eq(harness_lines(seen, "\"set\" \"inventory001\" ", NULL), 2);
    ck_assert_int_eq(harness_lines(seen, "\"rpush\" \"inventory001:sold\"", NULL), 2);
    free(seen);
    ck_assert_int_eq(audit("sold"), QUEUED);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
}
END_TEST

/* A batch larger than what is left sells only what is left: L takes one
 * of 4 units alone, then the second batch of 7 finds 3, sells units 3, 2
 * and 1 to its first three sales in arrival order, and answers sold_out to
 * the other four. Nothing is oversold and the ledger has 4 entries. */
START_TEST(test_a_batch_larger_than_the_stock_sells_only_the_stock) {
    struct harness_bg s[QUEUED];
    batch_stock = 4;
    batch_behind_a_client(30000, "hold_ms=0", s, NULL, NULL);
    batch_stock = 0;
    ck_assert_msg(s[0].status == 200 && harness_json_num(s[0].body, "unit") == 4, "L: %d %s",
                  s[0].status, s[0].body);
    /* A sold_out answer has no order id: harness_by_arrival puts those first, and
     * the sold ones after them in the order they came in. */
    int rank[QUEUED - 1], out = 0;
    harness_by_arrival(s, 1, QUEUED - 1, rank);
    for (int r = 0; r < QUEUED - 1; r++) {
        struct harness_bg *b = &s[rank[r]];
        ck_assert_msg(b->status == 200, "sale %d: %d %s", rank[r], b->status, b->body);
        ck_assert_msg(harness_json_num(b->body, "lock.batch") == QUEUED - 1,
                      "sale %d was not in the second batch: %s", rank[r], b->body);
        const char *st = harness_json_str(b->body, "status");
        if (strcmp(st, "sold_out") == 0) {
            out++;
            continue;
        }
        ck_assert_msg(strcmp(st, "sold") == 0 && harness_json_num(b->body, "unit") == 3 - (r - out),
                      "the %d-th sold sale of the batch: %s", r - out + 1, b->body);
    }
    ck_assert_msg(out == 4, "%d of the batch's 7 sales answered sold_out, with 3 units left", out);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 4);
}
END_TEST

static void delete_the_lock(void) {
    ck_assert_int_eq(harness_redis_int(redis_port, "DEL " LOCK_KEY), 1);
}

/* As for redisson: the lock deleted under the second batch (TTL 900: the
 * watchdog renews every 300 ms and finds it gone), so every sale of that
 * batch answers 409 lock_lost and nothing of it is written. */
START_TEST(test_a_batch_that_loses_its_lock_answers_lock_lost_for_every_sale_and_writes_nothing) {
    struct harness_bg s[QUEUED];
    batch_behind_a_client(900, "hold_ms=1200", s, NULL, delete_the_lock);
    ck_assert_msg(s[0].status == 200, "the first batch: %d %s", s[0].status, s[0].body);
    for (int i = 1; i < QUEUED; i++) {
        ck_assert_msg(s[i].status == 409, "sale %d: %d %s", i, s[i].status, s[i].body);
        ck_assert_str_eq(harness_json_str(s[i].body, "status"), "lock_lost");
    }
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("stock"), 199);
    ck_assert_int_eq(harness_metric(a_port, "inventoryd_lost_locks_total{strategy=\"batched\"}"),
                     QUEUED - 1);
}
END_TEST

/* ---- Fencing: a paused holder --------------------------------------------- */

/* A starts a sale holding 400 ms and is SIGSTOPped inside it, once the
 * probe has its entry (sent with the GET of the stock, in one write: A has
 * read); the TTL (600) passes and A's key expires, B sells; A is resumed
 * and tries to write what it read. */
static void paused_holder(const char *strategy, struct harness_bg *a, struct harness_bg *b) {
    start_pair(600, 3000, NULL);
    char pa[128], pb[128];
    sale_path(pa, sizeof(pa), strategy, "hold_ms=400");
    sale_path(pb, sizeof(pb), strategy, "");
    harness_bg_start(a, a_port, pa, 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "A never came inside");
    kill(a_pid, SIGSTOP);
    ck_assert_msg(harness_redis_until(redis_port, 0, 5000, "EXISTS " LOCK_KEY),
                  "fault missed its window: A's lock outlived its TTL while A was stopped");
    harness_bg_start(b, b_port, pb, 0);
    harness_bg_join(b);
    kill(a_pid, SIGCONT);
    harness_bg_join(a);
    ck_assert_int_eq(b->status, 200);
    ck_assert_str_eq(harness_json_str(b->body, "status"), "sold");
}

START_TEST(test_owner_lua_lets_a_paused_holder_write_a_stale_read) {
    struct harness_bg a, b;
    paused_holder("owner-lua", &a, &b);
    ck_assert_int_eq(a.status, 200); /* its write went through */
    ck_assert_int_eq(harness_json_num(a.body, "unit"), harness_json_num(b.body, "unit"));
    ck_assert_int_eq(audit("sold_twice"), 1);
}
END_TEST

START_TEST(test_fenced_refuses_a_paused_holders_write_with_409_and_nothing_is_oversold) {
    struct harness_bg a, b;
    paused_holder("fenced", &a, &b);
    ck_assert_int_eq(a.status, 409);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "stale_token");
    ck_assert_int_lt(harness_json_num(a.body, "lock.token"),
                     harness_json_num(b.body, "lock.token"));
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("stock"), 199);
}
END_TEST

/* ---- Scope: one lock per item ------------------------------------------- */

/* A sale of inventory001 holds its lock 800 ms; once it is inside (the
 * probe has its entry), a sale of inventory002 starts. Returns how long the
 * second one waited. */
static int second_item_wait(const char *scope) {
    start_pair(10000, 5000, scope);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL,
                                  "{\"stock\":5,\"item\":\"inventory002\"}", &r),
                     200);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/owner-lua?item=inventory001&hold_ms=800", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "the sale of inventory001 never came inside");
    harness_bg_start(&b, b_port, "/inventory/sale/owner-lua?item=inventory002", 0);
    harness_bg_join(&a);
    harness_bg_join(&b);
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_eq(harness_json_num(b.body, "remaining"), 4); /* sold from inventory002 */
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory002"), 4);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 199);
    return (int)harness_json_num(b.body, "lock.wait_ms");
}

START_TEST(test_with_global_scope_a_sale_of_another_item_waits_for_the_one_lock) {
    ck_assert_int_ge(second_item_wait("lock.scope=global"), 400);
}
END_TEST

START_TEST(test_with_item_scope_independent_items_do_not_wait_for_each_other) {
    ck_assert_int_lt(second_item_wait("lock.scope=item"), 100);
}
END_TEST

/* Each refusal is a JSON 400 that names the item rule, and changes nothing:
 * no sale, no key made, the stock untouched. */
START_TEST(test_a_bad_item_is_refused_with_400) {
    start_pair(10000, 5000, NULL);
    long long keys = harness_redis_int(redis_port, "DBSIZE");
    static const struct {
        const char *method, *path, *body;
    } bad[] = {
        {"GET", "/inventory/sale/atomic?item=a%20b", NULL},
        {"GET", "/inventory/sale/owner-lua?item=a%20b", NULL},
        {"GET", "/inventory?item=inventory001%2A", NULL},
        {"GET", "/inventory/audit?item=", NULL},
        {"POST", "/inventory/reset", "{\"stock\":1,\"item\":7}"},
        {"POST", "/inventory/reset", "{\"stock\":1,\"item\":\"a b\"}"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct httpc_response r;
        ck_assert_int_eq(harness_http(a_port, bad[i].method, bad[i].path, NULL, bad[i].body, &r),
                         400);
        ck_assert_msg(strcmp(harness_json_str(r.body, "status"), "bad_request") == 0 &&
                          strstr(harness_json_str(r.body, "error"), "item") != NULL,
                      "%s %s: %s", bad[i].method, bad[i].path, r.body);
    }
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001:initial"), 200);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "DBSIZE"), keys);
}
END_TEST

/* ---- Read-write lock: readers share, writers exclude ------------------- */

START_TEST(test_readers_share_the_read_lock) {
    start_pair(10000, 5000, "lock.read-lock=true");
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory?hold_ms=800", 0);
    held();
    redisReply *mode = harness_redis(redis_port, "HGET " LOCK_KEY " mode");
    ck_assert_str_eq(mode->str, "read");
    freeReplyObject(mode);
    /* Redisson's timeout key of the first reader's hold. */
    redisReply *keys = harness_redis(redis_port, "KEYS {" LOCK_KEY "}:*:rwlock_timeout:1");
    ck_assert_int_eq(keys->elements, 1);
    freeReplyObject(keys);
    harness_bg_start(&b, b_port, "/inventory?hold_ms=300", 0);
    /* both inside at once (B did not wait for A): the hash holds the mode
     * and two readers */
    ck_assert_msg(harness_redis_until(redis_port, 3, 5000, "HLEN " LOCK_KEY),
                  "B's read lock never joined A's");
    harness_bg_join(&a);
    harness_bg_join(&b);
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 0);
}
END_TEST

START_TEST(test_a_sale_waits_for_readers_and_readers_wait_for_a_sale) {
    start_pair(10000, 5000, "lock.read-lock=true");
    struct harness_bg r1, w1;
    harness_bg_start(&r1, a_port, "/inventory?hold_ms=800", 0);
    held();
    harness_bg_start(&w1, b_port, "/inventory/sale/redisson", 0);
    harness_bg_join(&r1);
    harness_bg_join(&w1);
    ck_assert_int_eq(w1.status, 200);
    ck_assert_int_ge(harness_json_num(w1.body, "lock.wait_ms"), 400);

    struct harness_bg w2, r2;
    harness_bg_start(&w2, a_port, "/inventory/sale/redisson?hold_ms=800", 0);
    held();
    redisReply *mode = harness_redis(redis_port, "HGET " LOCK_KEY " mode");
    ck_assert_str_eq(mode->str, "write");
    freeReplyObject(mode);
    harness_bg_start(&r2, b_port, "/inventory", 0);
    harness_bg_join(&w2);
    harness_bg_join(&r2);
    ck_assert_int_eq(r2.status, 200);
    ck_assert_int_ge(r2.took_ms, 400);
    ck_assert_int_eq(harness_json_num(r2.body, "stock"), 198); /* read after the write */
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 0);
}
END_TEST

/* ---- The probe itself ------------------------------------------------------ */

/* The probe forgets a dead process within its alive lease (1 s); the lock's
 * TTL here is longer, as in any real use, so the next holder comes after. */
START_TEST(test_a_holder_killed_inside_the_section_is_not_counted_against_later_holders) {
    start_pair(1500, 5000, NULL);
    struct harness_bg a;
    harness_bg_start(&a, a_port, "/inventory/sale/redisson?hold_ms=5000", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "the holder never came inside");
    kill(a_pid, SIGKILL); /* dies inside the critical section */
    harness_bg_join(&a);
    waitpid(a_pid, NULL, 0);
    a_pid = 0;
    struct httpc_response r;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/redisson", NULL, NULL, &r),
                         200);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    }
    struct httpc_response au;
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/audit", NULL, NULL, &au), 200);
    ck_assert_int_eq(harness_json_num(au.body, "violations"), 0);
    ck_assert_int_eq(harness_json_num(au.body, "sold"), 3);
    ck_assert_int_eq(harness_redis_int(redis_port, "HLEN inventory001:holders"), 0);
}
END_TEST

Suite *ladder_suite(void) {
    Suite *s = suite_create("ladder");
    struct {
        const char *name;
        const TTest *tests[8];
    } cases[] = {
        {"Spin",
         {test_setnx_spin_serialises_two_instances_where_local_did_not,
          test_setnx_retry_reports_its_depth_and_fails_cleanly_at_the_cap,
          test_a_failed_nested_acquire_answers_with_its_reason,
          test_a_setnx_spin_holder_that_crashes_leaves_the_lock_forever,
          test_an_expiring_holder_that_crashes_frees_the_lock_after_the_ttl}},
        {"Expiry",
         {test_an_expiring_holder_slower_than_the_ttl_deletes_the_next_owners_lock,
          test_owner_check_does_not_delete_the_next_owners_lock,
          test_owner_check_with_a_slow_release_deletes_another_owners_lock,
          test_owner_lua_never_deletes_another_owners_lock}},
        {"Reentry",
         {test_owner_lua_nested_acquire_blocks_on_itself,
          test_reentrant_nested_acquire_succeeds_and_the_count_returns_to_zero,
          test_reentrant_work_longer_than_the_ttl_loses_the_lock_and_the_probe_sees_overlap,
          test_watchdog_keeps_the_lock_through_work_three_times_the_ttl,
          test_a_failed_renewal_marks_the_lock_lost_and_the_sale_refuses_to_commit}},
        {"Redisson",
         {test_redisson_waits_for_a_redisson_client_and_is_woken_by_its_unlock_message,
          test_batched_waits_for_a_redisson_client_and_is_woken_by_its_unlock_message,
          test_redisson_serves_the_sales_of_one_process_in_arrival_order}},
        {"Batched",
         {test_batched_sends_one_acquire_and_one_read_and_write_per_batch_led_by_the_oldest_sale,
          test_a_batch_that_loses_its_lock_answers_lock_lost_for_every_sale_and_writes_nothing,
          test_a_batch_larger_than_the_stock_sells_only_the_stock}},
        {"Scope",
         {test_with_global_scope_a_sale_of_another_item_waits_for_the_one_lock,
          test_with_item_scope_independent_items_do_not_wait_for_each_other,
          test_a_bad_item_is_refused_with_400}},
        {"ReadWrite",
         {test_readers_share_the_read_lock,
          test_a_sale_waits_for_readers_and_readers_wait_for_a_sale}},
        {"Probe", {test_a_holder_killed_inside_the_section_is_not_counted_against_later_holders}},
        {"Fencing",
         {test_owner_lua_lets_a_paused_holder_write_a_stale_read,
          test_fenced_refuses_a_paused_holders_write_with_409_and_nothing_is_oversold}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        for (int j = 0; j < 8 && cases[i].tests[j]; j++) tcase_add_test(tc, cases[i].tests[j]);
        suite_add_tcase(s, tc);
    }
    return s;
}
