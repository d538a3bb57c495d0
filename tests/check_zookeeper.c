/* check_zookeeper.c -- the zookeeper and zookeeper-fenced strategies on a
 * real ZooKeeper (Debian's, started by the harness per test: its JVM is up
 * in about half a second) and a real redis-server, with two inventoryd
 * instances (faults.enabled=true).
 *
 * Core: exact sales across two instances, each waiter watching only the
 * node before its own, the strategies unconfigured. Faults: a holder paused
 * past its session (the flaw, then the fence that fixes it; the checker
 * dates both by the session's lease), a long hold's lease renewed. Outage:
 * ZooKeeper stopped and started again under a running instance. */
#include <check.h>
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "check_main.h"
#include "harness.h"
#include "mclock.h"

static pid_t redis_pid, zk_pid, a_pid, b_pid;
static int redis_port, zk_port, a_port, b_port;

#define LOCK_DIR "/locks/RedisDistributedLock"

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    zk_pid = harness_zookeeper_start(0, &zk_port);
    ck_assert_msg(zk_pid > 0, "ZooKeeper did not start");
    a_pid = b_pid = 0;
}

static void teardown(void) {
    if (a_pid) kill(a_pid, SIGCONT);
    harness_stop(a_pid);
    harness_stop(b_pid);
    harness_stop(zk_pid);
    harness_zookeeper_wipe(zk_port);
    harness_stop(redis_pid);
}

/* Starts A and B on the test's Redis and ZooKeeper (none when connect is
 * 0), with this session timeout and lock.wait-ms. Only the zookeeper
 * strategies (and atomic, the default) may be picked: readiness asks only
 * for their stores, not for the Redlock masters these tests do not start. */
static void start_pair(int connect, int session_ms, int wait_ms) {
    char zc[64], st[64];
    snprintf(zc, sizeof(zc), "zookeeper.connect=127.0.0.1:%d", zk_port);
    snprintf(st, sizeof(st), "zookeeper.session-timeout-ms=%d", session_ms);
    const char *sets[] = {st, "lock.allowed=zookeeper,zookeeper-fenced,atomic", connect ? zc : NULL,
                          NULL};
    ck_assert_int_eq(
        harness_pair_start(redis_port, 10000, wait_ms, sets, &a_pid, &a_port, &b_pid, &b_port), 0);
}

static double audit(const char *field) {
    double v = harness_audit(a_port, field);
    ck_assert_msg(v > -1e9, "GET /inventory/audit failed");
    return v;
}

/* The lock's nodes now (one a line, into buf); their count. */
static int nodes(char *buf, size_t len) {
    int n = harness_zookeeper_children(zk_port, LOCK_DIR, buf, len);
    ck_assert_msg(n >= 0, "could not list " LOCK_DIR);
    return n;
}

/* Waits (limit_ms at most) until the lock has `want` nodes; 1 when so. */
static int nodes_until(int want, int limit_ms) {
    char buf[4096];
    for (int64_t end = mclock_ms() + limit_ms; mclock_ms() < end; mclock_sleep_ms(20))
        if (nodes(buf, sizeof(buf)) == want) return 1;
    return 0;
}

/* ---- Core ------------------------------------------------------------------ */

START_TEST(test_zookeeper_sells_exactly_its_stock_across_two_instances) {
    start_pair(1, 4000, 10000);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":12}", &r),
                     200);
    enum { N = 16 };
    struct harness_bg b[N];
    /* hold_ms: each holder stays inside long enough that an unguarded
     * sale would overlap it. */
    for (int i = 0; i < N; i++)
        harness_bg_start(&b[i], i % 2 ? b_port : a_port, "/inventory/sale/zookeeper?hold_ms=15", 0);
    int sold = 0, out = 0;
    for (int i = 0; i < N; i++) {
        harness_bg_join(&b[i]);
        ck_assert_msg(b[i].status == 200, "sale %d: %d %s", i, b[i].status, b[i].body);
        const char *st = harness_json_str(b[i].body, "status");
        sold += strcmp(st, "sold") == 0;
        out += strcmp(st, "sold_out") == 0;
    }
    ck_assert_int_eq(sold, 12);
    ck_assert_int_eq(out, N - 12);
    ck_assert_int_eq(audit("stock"), 0);
    ck_assert_int_eq(audit("sold"), 12);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
    char buf[256];
    ck_assert_int_eq(nodes(buf, sizeof(buf)), 0); /* every node deleted at release */
}
END_TEST

/* The watched paths of the ZooKeeper's "wchp" answer that lie under dir,
 * and how many watches (sessions) each has at most. */
static int watched_paths(const char *dir, int *most) {
    static char out[65536];
    ck_assert_int_ge(harness_zookeeper_4lw(zk_port, "wchp", out, sizeof(out)), 0);
    int paths = 0, here = 0, in_dir = 0;
    *most = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '/') {
            in_dir = strncmp(line, dir, strlen(dir)) == 0 &&
                     (dir[strlen(dir) - 1] == '/' || line[strlen(dir)] == '\0');
            paths += in_dir;
            here = 0;
        } else if (in_dir && line[0] == '\t' && ++here > *most) {
            *most = here;
        }
    }
    return paths;
}

START_TEST(test_each_zookeeper_waiter_watches_only_the_node_before_its_own) {
    start_pair(1, 4000, 10000);
    enum { N = 5 };
    struct harness_bg h, w[N];
    harness_bg_start(&h, a_port, "/inventory/sale/zookeeper?hold_ms=1500", 0);
    ck_assert_msg(nodes_until(1, 5000), "the first sale never created its node");
    for (int i = 0; i < N; i++)
        harness_bg_start(&w[i], i % 2 ? b_port : a_port, "/inventory/sale/zookeeper", 0);
    ck_assert_msg(nodes_until(N + 1, 5000), "the waiters never queued behind the holder");
    int most = 0, paths = 0;
    /* a waiter sets its watch right after its list: wait for the last */
    for (int64_t end = mclock_ms() + 1000; mclock_ms() < end && paths < N; mclock_sleep_ms(20))
        paths = watched_paths(LOCK_DIR "/", &most);
    int dir_most = 0, on_dir = watched_paths(LOCK_DIR, &dir_most);
    ck_assert_int_eq(nodes_until(N + 1, 1), 1); /* the holder was inside throughout */
    harness_bg_join(&h);
    for (int i = 0; i < N; i++) harness_bg_join(&w[i]);
    /* N waiters, N watched nodes, one watch each: no herd on the holder */
    ck_assert_int_eq(paths, N);
    ck_assert_int_eq(most, 1);
    ck_assert_int_eq(on_dir, 0); /* and nobody watches the list of children */
    ck_assert_int_eq(audit("sold"), N + 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

START_TEST(test_without_zookeeper_connect_the_strategies_are_unavailable_and_the_instance_ready) {
    start_pair(0, 4000, 2000);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/strategies", NULL, NULL, &r), 200);
    const char *zk = strstr(r.body, "\"name\":\"zookeeper\"");
    ck_assert_msg(zk, "/strategies lists no zookeeper: %s", r.body);
    const char *next = strstr(zk + 1, "\"name\":");
    const char *why = strstr(zk, "\"unavailable\":\"zookeeper.connect is not configured\"");
    const char *avail = strstr(zk, "\"available\":false");
    ck_assert_msg(why && (!next || why < next) && avail && (!next || avail < next),
                  "zookeeper is not said unavailable for zookeeper.connect: %s", r.body);
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/zookeeper-fenced", NULL, NULL, &r), 503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
    ck_assert_msg(strstr(harness_json_str(r.body, "error"), "zookeeper.connect"), "%s", r.body);
    ck_assert_int_eq(harness_http(a_port, "GET", "/readyz", NULL, NULL, &r), 200);
    ck_assert_int_eq(audit("stock"), 200);
}
END_TEST

/* Waits until the instance on port answers /readyz 200 (its ZooKeeper
 * session is up), ms at most. */
static void ready_within(int port, int ms) {
    struct httpc_response r;
    int64_t t0 = mclock_ms();
    while (harness_http(port, "GET", "/readyz", NULL, NULL, &r) != 200 && mclock_ms() - t0 < ms)
        mclock_sleep_ms(100);
    ck_assert_msg(mclock_ms() - t0 < ms, "instance %d not ready in %d ms: %s", port, ms, r.body);
}

/* ---- Faults: a holder paused past its session ------------------------------ */

/* inventory-check on the test's item: its exit status, and in *n the
 * count of violations of kind ("overlap", "late_write", "sold_twice"). */
static int checker(const char *kind, double *n) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s --redis 127.0.0.1:%d --item inventory001 2>&1",
             INVENTORY_CHECK_BIN, redis_port);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    static char out[1 << 16];
    size_t len = fread(out, 1, sizeof(out) - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    cJSON *doc = cJSON_Parse(out);
    ck_assert_msg(doc != NULL, "inventory-check printed no JSON: %.400s", out);
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "counts"), kind);
    *n = cJSON_IsNumber(v) ? v->valuedouble : 0;
    cJSON_Delete(doc);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A sells holding 2 s with a session of 1.5 s, and is SIGSTOPped once
 * inside (the probe has its entry: A has read the stock). Returns once its
 * session has expired and the server deleted its node. */
static void stop_a_inside(const char *strategy, struct harness_bg *a) {
    start_pair(1, 1500, 5000);
    /* Ready: A's ZooKeeper session is up (a slow first connect under the
     * sanitizers ate A's lock wait in a CI run, and A never came inside). */
    ready_within(a_port, 20000);
    char pa[128], before[512];
    snprintf(pa, sizeof(pa), "/inventory/sale/%s?hold_ms=2000", strategy);
    harness_bg_start(a, a_port, pa, 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "A never came inside");
    ck_assert_int_eq(nodes(before, sizeof(before)), 1);
    kill(a_pid, SIGSTOP);
    ck_assert_msg(nodes_until(0, 10000),
                  "fault missed its window: A's node %s outlived its session while A was stopped",
                  before);
}

/* A stopped inside past its session (stop_a_inside); only then B sells. A
 * is resumed and writes what it read. */
static void paused_holder(const char *strategy, struct harness_bg *a, struct harness_bg *b) {
    stop_a_inside(strategy, a);
    char pb[128], after[512];
    snprintf(pb, sizeof(pb), "/inventory/sale/%s", strategy);
    harness_bg_start(b, b_port, pb, 0);
    harness_bg_join(b);
    ck_assert_int_eq(b->status, 200);
    ck_assert_str_eq(harness_json_str(b->body, "status"), "sold");
    /* B came and went while A was stopped inside */
    ck_assert_int_eq(nodes(after, sizeof(after)), 0);
    kill(a_pid, SIGCONT);
    harness_bg_join(a);
}

START_TEST(test_a_zookeeper_holder_paused_past_its_session_sells_a_unit_sold_since) {
    struct harness_bg a, b;
    paused_holder("zookeeper", &a, &b);
    ck_assert_int_eq(a.status, 200); /* its write went through */
    ck_assert_str_eq(harness_json_str(a.body, "status"), "sold");
    ck_assert_int_eq(harness_json_num(a.body, "unit"), harness_json_num(b.body, "unit"));
    ck_assert_int_eq(audit("sold_twice"), 1);
    /* A's hold recorded its session's lease: its write came after it */
    double n = 0;
    ck_assert_int_eq(checker("late_write", &n), 1);
    ck_assert_msg(n >= 1, "the checker saw no late write of A's");
}
END_TEST

START_TEST(test_zookeeper_fenced_refuses_the_paused_holders_write_by_its_older_czxid) {
    struct harness_bg a, b;
    paused_holder("zookeeper-fenced", &a, &b);
    ck_assert_msg(a.status == 409, "A answered %d: %s", a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "stale_token");
    ck_assert_int_gt(harness_json_num(a.body, "lock.token"), 0);
    ck_assert_int_lt(harness_json_num(a.body, "lock.token"),
                     harness_json_num(b.body, "lock.token"));
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("stock"), 199);
    /* A's hold ended with its session's lease, before B came in: the
     * checker counts no overlap and judges the run safe */
    double n = -1;
    int st = checker("overlap", &n);
    ck_assert_msg(n == 0, "the checker counts %.0f overlapping holds", n);
    ck_assert_int_eq(st, 0);
    /* and the next sale, on A's new session, is granted */
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/zookeeper-fenced", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
}
END_TEST

/* The fence's gap where the lock lives elsewhere: Redis sees a czxid only
 * when it arrives, so a next holder that reads and then holds long has not
 * yet shown Redis its newer token when the stale one writes. A is stopped
 * inside past its session; B is granted and reads, holding 3 s; A resumed
 * writes inside B's hold. B's read raises the fence to its czxid, so A's
 * write is refused, B's lands, and no hold overlaps another. */
START_TEST(test_zookeeper_fenced_refuses_a_stale_write_that_lands_before_the_next_holder_writes) {
    struct harness_bg a, b;
    stop_a_inside("zookeeper-fenced", &a);
    harness_bg_start(&b, b_port, "/inventory/sale/zookeeper-fenced?hold_ms=3000", 0);
    ck_assert_msg(nodes_until(1, 5000), "B was never granted");
    mclock_sleep_ms(500); /* B reads right after its grant */
    kill(a_pid, SIGCONT);
    harness_bg_join(&a);
    harness_bg_join(&b);
    ck_assert_msg(b.status == 200, "B answered %d: %s", b.status, b.body);
    ck_assert_msg(a.status == 409, "A's stale write answered %d: %s", a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "stale_token");
    ck_assert_str_eq(harness_json_str(b.body, "status"), "sold");
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
    double n = -1;
    int st = checker("overlap", &n);
    ck_assert_msg(n == 0, "the checker counts %.0f overlapping holds", n);
    ck_assert_int_eq(st, 0);
}
END_TEST

/* A holder that works past its session timeout (a sleep: the binding's
 * pings keep the session) keeps its lock, and the lease its hold records
 * keeps up with the session: the watchdog's looks find the node and date
 * it again, so the checker sees no late write. */
START_TEST(test_a_long_zookeeper_hold_renews_its_recorded_lease_and_writes_inside_it) {
    start_pair(1, 1500, 5000);
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/zookeeper?hold_ms=2500", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_msg(harness_json_num(r.body, "lock.renewals") >= 2,
                  "a 2.5 s hold on a 1.5 s session looked at its node %.0f times: %s",
                  harness_json_num(r.body, "lock.renewals"), r.body);
    double n = -1;
    ck_assert_int_eq(checker("late_write", &n), 0);
    ck_assert_msg(n == 0, "the checker counts %.0f late writes", n);
}
END_TEST

/* ---- Outage: ZooKeeper stopped, then started again ------------------------- */

START_TEST(test_zookeeper_down_answers_503_and_sales_resume_without_a_restart) {
    start_pair(1, 2000, 1500);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/zookeeper", NULL, NULL, &r), 200);
    harness_stop(zk_pid);
    zk_pid = 0;
    ck_assert_msg(harness_refused(zk_port), "ZooKeeper still listens");
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/zookeeper", NULL, NULL, &r), 503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
    ck_assert_msg(strstr(harness_json_str(r.body, "error"), "zookeeper"), "%s", r.body);
    ck_assert_int_eq(harness_http(a_port, "GET", "/readyz", NULL, NULL, &r), 503);
    ck_assert_msg(strstr(r.body, "zookeeper"), "%s", r.body);
    zk_pid = harness_zookeeper_start(zk_port, NULL);
    ck_assert_msg(zk_pid > 0, "ZooKeeper did not start again on %d", zk_port);
    int status = 0;
    for (int64_t end = mclock_ms() + 15000; mclock_ms() < end && status != 200;
         mclock_sleep_ms(100))
        status = harness_http(a_port, "GET", "/inventory/sale/zookeeper", NULL, NULL, &r);
    ck_assert_msg(status == 200, "no sale after ZooKeeper came back: %d %s", status, r.body);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/zookeeper", NULL, NULL, &r), 200);
    ck_assert_int_eq(harness_http(a_port, "GET", "/readyz", NULL, NULL, &r), 200);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* Starts A and B for the lab (below), with one more setting (or NULL). */
static void start_lab_pair(const char *extra);

START_TEST(test_a_zookeeper_holder_that_only_works_long_keeps_its_lock_in_the_labs_overrun) {
    /* The lab's overrun: A works 1.5 x TTL, B comes at 0.25 x TTL. The
     * session (the shipped 4 s) pings while A works (a sleep, not a
     * pause), so A keeps its lock past the 1 s TTL: B waits, as behind a
     * watchdog. Both instances first wait until their session is up: a
     * session still connecting on a loaded machine ate A's lock wait. */
    char v[512];
    start_lab_pair("lock.ttl-ms=1000");
    ready_within(a_port, 20000);
    ready_within(b_port, 20000);
    const char *body = "{\"strategy\":\"zookeeper\",\"scenario\":\"overrun\"}";
    ck_assert_msg(harness_lab_verdict(a_port, body, 20000, v, sizeof(v)) == 0, "%s", v);
    ck_assert_msg(strncmp(v, "fixed: ", 7) == 0 && strstr(v, "kept the lock"), "zookeeper: %s", v);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* ---- Lab: session-lost, the session ended from outside ---------------------- */

/* Waits (20 s at most) until the instance on port is ready: its ZooKeeper
 * session is up (a first connect, or the one after an expiry). */
static void ready(int port) {
    struct httpc_response r;
    int64_t t0 = mclock_ms();
    while (harness_http(port, "GET", "/readyz", NULL, NULL, &r) != 200 && mclock_ms() - t0 < 20000)
        mclock_sleep_ms(100);
    ck_assert_msg(mclock_ms() - t0 < 20000, "instance %d not ready in 20 s: %s", port, r.body);
}

/* Starts A and B with faults on and A's lab, at the shipped lock settings
 * (the defaults: lock.ttl-ms 10000, lock.wait-ms 5000,
 * zookeeper.session-timeout-ms 4000) but for extra (one more setting, or
 * NULL), once; each run waits until both have their session. */
static void start_lab_pair(const char *extra) {
    static char rp[32], zc[64], inst[96];
    if (a_pid) return;
    a_port = harness_free_port();
    b_port = harness_free_port();
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    snprintf(zc, sizeof(zc), "zookeeper.connect=127.0.0.1:%d", zk_port);
    snprintf(inst, sizeof(inst), "lab.instances=127.0.0.1:%d,127.0.0.1:%d", a_port, b_port);
    const char *sets[] = {rp,
                          zc,
                          "lock.allowed=zookeeper,zookeeper-fenced,atomic",
                          "faults.enabled=true",
                          "lab.enabled=true",
                          inst,
                          extra,
                          NULL};
    ck_assert_int_gt(a_pid = harness_inventoryd_start(a_port, sets), 0);
    ck_assert_int_gt(b_pid = harness_inventoryd_start(b_port, sets), 0);
}

static const cJSON *at(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    ck_assert_msg(v != NULL, "no \"%s\" in the run", k);
    return v;
}

static double number(const cJSON *o, const char *k) {
    const cJSON *v = at(o, k);
    ck_assert_msg(cJSON_IsNumber(v), "\"%s\" is not a number", k);
    return v->valuedouble;
}

static const char *text(const cJSON *o, const char *k) {
    const char *v = cJSON_GetStringValue(at(o, k));
    ck_assert_msg(v != NULL, "\"%s\" is not a string", k);
    return v;
}

/* The lab's session-lost with strategy s, its fault's evidence asserted
 * first (harness_session_lost). Returns the run (cJSON_Delete it). */
static cJSON *session_lost(const char *s) {
    start_lab_pair(NULL);
    ready(a_port);
    ready(b_port);
    char why[512];
    cJSON *run = harness_session_lost(a_port, s, why, sizeof(why));
    ck_assert_msg(run != NULL, "%s: %s", s, why);
    return run;
}

START_TEST(
    test_the_labs_session_lost_shows_zookeepers_flaw_and_zookeeper_fenced_refuses_the_write) {
    cJSON *run = session_lost("zookeeper");
    const cJSON *v = at(run, "verdict");
    const cJSON *a = cJSON_GetArrayItem(at(run, "steps"), 0);
    const cJSON *b = cJSON_GetArrayItem(at(run, "steps"), 1);
    ck_assert_msg(strcmp(text(v, "result"), "flaw_shown") == 0 &&
                      strstr(text(v, "evidence"), "sold twice"),
                  "zookeeper: %s: %s", text(v, "result"), text(v, "evidence"));
    ck_assert_str_eq(text(a, "word"), "sold");
    ck_assert_int_eq(number(at(a, "answer"), "unit"), number(at(b, "answer"), "unit"));
    ck_assert_int_ge(number(at(run, "audit"), "sold_twice"), 1);
    cJSON_Delete(run);

    run = session_lost("zookeeper-fenced");
    v = at(run, "verdict");
    a = cJSON_GetArrayItem(at(run, "steps"), 0);
    ck_assert_msg(strcmp(text(v, "result"), "fixed") == 0, "zookeeper-fenced: %s: %s",
                  text(v, "result"), text(v, "evidence"));
    ck_assert_str_eq(text(a, "word"), "stale_token");
    ck_assert_int_eq(number(at(run, "audit"), "sold_twice"), 0);
    ck_assert_int_eq(number(at(run, "audit"), "sold"), 1);
    cJSON_Delete(run);
}
END_TEST

START_TEST(test_end_session_needs_faults_on_and_the_admin_token_and_a_lock_with_a_session) {
    /* A: faults on, an admin token; B: faults off. */
    char rp[32], zc[64];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    snprintf(zc, sizeof(zc), "zookeeper.connect=127.0.0.1:%d", zk_port);
    const char *allowed = "lock.allowed=zookeeper,zookeeper-fenced,expiring,atomic";
    const char *a_sets[] = {
        rp, zc, allowed, "faults.enabled=true", "admin.token=tok-35-end-session-00", NULL};
    const char *b_sets[] = {rp, zc, allowed, NULL};
    a_port = harness_free_port();
    ck_assert_int_gt(a_pid = harness_inventoryd_start(a_port, a_sets), 0);
    b_port = harness_free_port();
    ck_assert_int_gt(b_pid = harness_inventoryd_start(b_port, b_sets), 0);
    ready(a_port);
    const char *auth = "Authorization: Bearer tok-35-end-session-00\r\n";
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", auth, "{\"stock\":5}", &r),
                     200);
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/zookeeper?end_session=1", NULL, NULL, &r),
        401);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "unauthorized");
    ck_assert_msg(strstr(r.www_authenticate, "Bearer"), "%s", r.www_authenticate);
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/expiring?end_session=1", auth, NULL, &r), 400);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "bad_request");
    const char *e = harness_json_str(r.body, "error");
    ck_assert_msg(strstr(e, "end_session") && strstr(e, "expiring") && strstr(e, "zookeeper"), "%s",
                  e);
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/zookeeper?end_session=2", auth, NULL, &r),
        400);
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory?end_session=1", auth, NULL, &r), 400);
    ck_assert_int_eq(
        harness_http(b_port, "GET", "/inventory/sale/zookeeper?end_session=1", NULL, NULL, &r),
        403);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "faults_disabled");
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 5); /* none sold */
    /* With the token, on a lock that has a session: sold, the session ended. */
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/zookeeper?end_session=1", auth, NULL, &r),
        200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_msg(strstr(r.body, "\"session_ended\":true"), "%s", r.body);
}
END_TEST

Suite *zookeeper_suite(void) {
    Suite *s = suite_create("zookeeper");
    struct {
        const char *name;
        const TTest *tests[6];
    } cases[] = {
        {"Core",
         {test_zookeeper_sells_exactly_its_stock_across_two_instances,
          test_each_zookeeper_waiter_watches_only_the_node_before_its_own,
          test_without_zookeeper_connect_the_strategies_are_unavailable_and_the_instance_ready}},
        {"Faults",
         {test_a_zookeeper_holder_paused_past_its_session_sells_a_unit_sold_since,
          test_zookeeper_fenced_refuses_the_paused_holders_write_by_its_older_czxid,
          test_zookeeper_fenced_refuses_a_stale_write_that_lands_before_the_next_holder_writes,
          test_a_long_zookeeper_hold_renews_its_recorded_lease_and_writes_inside_it}},
        {"Outage", {test_zookeeper_down_answers_503_and_sales_resume_without_a_restart}},
        {"Lab",
         {test_a_zookeeper_holder_that_only_works_long_keeps_its_lock_in_the_labs_overrun,
          test_the_labs_session_lost_shows_zookeepers_flaw_and_zookeeper_fenced_refuses_the_write,
          test_end_session_needs_faults_on_and_the_admin_token_and_a_lock_with_a_session}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        for (int j = 0; j < 6 && cases[i].tests[j]; j++) tcase_add_test(tc, cases[i].tests[j]);
        suite_add_tcase(s, tc);
    }
    return s;
}
