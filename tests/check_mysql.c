/* check_mysql.c -- the mysql rungs: MariaDB's GET_LOCK on a session of the
 * holder's own (mysql), its flaw (a killed session frees the lock while its
 * holder still writes), and its fix (mysql-fenced: a token from a durable
 * MariaDB counter, checked by the stock write). A real redis-server and a real
 * mariadbd, both started by the harness for each test, and real inventoryd
 * instances with faults.enabled=true. */
#include <check.h>
#include <cjson/cJSON.h>
#include <mysql.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check_main.h"
#include "harness.h"
#include "mclock.h"

#define LOCK_KEY "RedisDistributedLock"
#define PASSWORD "pw-Zq81-never-shown"

static pid_t redis_pid, db_pid, a_pid, b_pid;
static int redis_port, db_port, a_port, b_port;
static char db_sock[160];
static void cut_heal(void);
static char host_set[64], port_set[64];

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    db_pid = harness_mariadb_start(&db_port, db_sock, sizeof(db_sock));
    ck_assert_int_gt(db_pid, 0);
    snprintf(host_set, sizeof(host_set), "mysql.host=127.0.0.1");
    snprintf(port_set, sizeof(port_set), "mysql.port=%d", db_port);
    a_pid = b_pid = 0;
}

static void teardown(void) {
    harness_stop(a_pid);
    harness_stop(b_pid);
    cut_heal();
    harness_mariadb_stop(db_pid, db_sock, 1);
    harness_stop(redis_pid);
}

/* Starts A and B on the test's Redis and MariaDB (stock 200). */
static void start_pair(void) {
    const char *sets[] = {host_set, port_set, NULL};
    ck_assert_int_eq(
        harness_pair_start(redis_port, 10000, 5000, sets, &a_pid, &a_port, &b_pid, &b_port), 0);
}

static double audit(const char *field) {
    double v = harness_audit(a_port, field);
    ck_assert_msg(v > -1e9, "GET /inventory/audit failed");
    return v;
}

static void reset(int port, int stock) {
    char body[64];
    struct httpc_response r;
    snprintf(body, sizeof(body), "{\"stock\":%d}", stock);
    ck_assert_int_eq(harness_http(port, "POST", "/inventory/reset", NULL, body, &r), 200);
}

/* The MariaDB connection id holding the lock, polled (5 s at most) until
 * someone other than `not` holds it; -1 if none did. */
static long long holder_other_than(MYSQL *m, long long not ) {
    for (int64_t end = mclock_ms() + 5000; mclock_ms() < end; mclock_sleep_ms(5)) {
        long long id = harness_mariadb_int(m, "SELECT IS_USED_LOCK('" LOCK_KEY "')");
        if (id > 0 && id != not ) return id;
    }
    return -1;
}

/* Polls a query on m (every 5 ms, 5 s at most) until it answers want; 1
 * when it did. */
static int mariadb_until(MYSQL *m, long long want, const char *q) {
    for (int64_t end = mclock_ms() + 5000; mclock_ms() < end; mclock_sleep_ms(5))
        if (harness_mariadb_int(m, "%s", q) == want) return 1;
    return 0;
}

/* ---- Core ------------------------------------------------------------------ */

START_TEST(test_mysql_sells_exactly_its_stock_across_two_instances_under_concurrent_sales) {
    start_pair();
    reset(a_port, 20);
    enum { N = 40 };
    static struct harness_bg s[N];
    for (int i = 0; i < N; i++)
        harness_bg_start(&s[i], i % 2 ? b_port : a_port, "/inventory/sale/mysql", 0);
    int sold = 0, sold_out = 0;
    for (int i = 0; i < N; i++) {
        harness_bg_join(&s[i]);
        ck_assert_msg(s[i].status == 200, "sale %d answered %d: %s", i, s[i].status, s[i].body);
        const char *st = harness_json_str(s[i].body, "status");
        sold += strcmp(st, "sold") == 0;
        sold_out += strcmp(st, "sold_out") == 0;
    }
    ck_assert_int_eq(sold, 20);
    ck_assert_int_eq(sold_out, 20);
    ck_assert_int_eq(audit("stock"), 0);
    ck_assert_int_eq(audit("sold"), 20);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(audit("oversold_units"), 0);
}
END_TEST

START_TEST(
    test_an_unconfigured_mysql_is_listed_unavailable_and_its_sale_answers_503_naming_the_key) {
    /* No mysql.host. lock.allowed leaves out redlock, whose masters this
     * test does not start, so /readyz speaks of Redis and the stores only. */
    char rp[32];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    const char *sets[] = {rp, "lock.allowed=mysql,mysql-fenced,fenced", "lock.strategy=fenced",
                          NULL};
    a_port = harness_free_port();
    a_pid = harness_inventoryd_start(a_port, sets);
    ck_assert_int_gt(a_pid, 0);
    reset(a_port, 5);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/strategies", NULL, NULL, &r), 200);
    const char *mysql = strstr(r.body, "\"name\":\"mysql\"");
    ck_assert_msg(mysql != NULL, "/strategies does not list mysql: %s", r.body);
    const char *next = strstr(mysql + 1, "\"name\":");
    const char *avail = strstr(mysql, "\"available\":false");
    ck_assert_msg(avail && (!next || avail < next), "mysql is not available:false: %s", mysql);
    const char *why = strstr(mysql, "mysql.host is not configured");
    ck_assert_msg(why && (!next || why < next), "mysql's entry does not name mysql.host");
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/mysql", NULL, NULL, &r), 503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
    ck_assert_msg(strstr(harness_json_str(r.body, "error"), "mysql.host"), "%s", r.body);
    ck_assert_int_eq(harness_http(a_port, "GET", "/readyz", NULL, NULL, &r), 200);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 5);
}
END_TEST

/* ---- Faults ------------------------------------------------------------------ */

/* A sells holding 1500 ms; once A is inside (its probe entry is in Redis,
 * so it has read the stock) and holds the MariaDB lock, A's lock session
 * is killed from a test session (KILL CONNECTION), which frees the lock;
 * B then sells while A is still inside. */
static void killed_holder(const char *strategy, struct harness_bg *a, char *b_body, size_t len) {
    start_pair();
    MYSQL *m = harness_mariadb_connect(db_port);
    ck_assert_ptr_nonnull(m);
    char pa[128], pb[128];
    snprintf(pa, sizeof(pa), "/inventory/sale/%s?hold_ms=1500", strategy);
    snprintf(pb, sizeof(pb), "/inventory/sale/%s", strategy);
    harness_bg_start(a, a_port, pa, 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "A never came inside");
    long long a_session = holder_other_than(m, 0);
    ck_assert_msg(a_session > 0, "A came inside without holding the MariaDB lock");
    ck_assert_int_eq(harness_mariadb_int(m, "KILL CONNECTION %lld", a_session), -1); /* no rows */
    ck_assert_int_eq(mysql_errno(m), 0);
    /* A KILL ends the session asynchronously: wait for the event. */
    char gone[160];
    snprintf(gone, sizeof(gone),
             "SELECT COUNT(*) FROM information_schema.processlist WHERE id = %lld", a_session);
    ck_assert_msg(mariadb_until(m, 0, gone), "A's session %lld outlived its KILL", a_session);
    ck_assert_msg(mariadb_until(m, 1, "SELECT IS_FREE_LOCK('" LOCK_KEY "')"),
                  "the lock was not freed with A's session");
    struct httpc_response b;
    ck_assert_int_eq(harness_http(b_port, "GET", pb, NULL, NULL, &b), 200);
    snprintf(b_body, len, "%s", b.body);
    ck_assert_str_eq(harness_json_str(b_body, "status"), "sold");
    /* B was granted while A held: A's probe entry is still there after B
     * came out (A has not written yet), and the probe saw two holders
     * inside at once. */
    ck_assert_msg(harness_redis_int(redis_port, "HLEN inventory001:holders") == 1,
                  "fault missed its window: A came out before B went in");
    harness_bg_join(a);
    ck_assert_int_ge(audit("violations"), 1);
    mysql_close(m);
}

START_TEST(test_a_killed_lock_session_lets_the_next_holder_in_while_the_first_still_writes) {
    struct harness_bg a;
    char b_body[1024];
    killed_holder("mysql", &a, b_body, sizeof(b_body));
    ck_assert_msg(a.status == 200, "A answered %d: %s", a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "sold");
    ck_assert_int_eq(harness_json_num(a.body, "unit"), harness_json_num(b_body, "unit"));
    ck_assert_int_eq(audit("sold_twice"), 1);
}
END_TEST

START_TEST(test_mysql_fenced_refuses_the_killed_holders_late_write_and_nothing_sells_twice) {
    struct harness_bg a;
    char b_body[1024];
    killed_holder("mysql-fenced", &a, b_body, sizeof(b_body));
    ck_assert_msg(a.status == 409, "A answered %d: %s", a.status, a.body);
    const char *st = harness_json_str(a.body, "status");
    ck_assert_msg(strcmp(st, "stale_token") == 0 || strcmp(st, "stock_changed") == 0, "%s", a.body);
    ck_assert_int_lt(harness_json_num(a.body, "lock.token"),
                     harness_json_num(b_body, "lock.token"));
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("stock"), 199);
}
END_TEST

/* The fence's gap where the lock lives elsewhere: Redis sees a counter
 * value only when it arrives, so a next holder that reads and then holds
 * long has not yet shown Redis its newer token when the stale one writes.
 * A's session is killed inside; B is granted and reads, holding 2.5 s; A
 * writes inside B's hold. B's read raises the fence to its token, so A's
 * write is refused and B's lands. */
START_TEST(test_mysql_fenced_refuses_a_stale_write_that_lands_before_the_next_holder_writes) {
    start_pair();
    MYSQL *m = harness_mariadb_connect(db_port);
    ck_assert_ptr_nonnull(m);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/mysql-fenced?hold_ms=1500", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "A never came inside");
    long long a_session = holder_other_than(m, 0);
    ck_assert_msg(a_session > 0, "A came inside without holding the MariaDB lock");
    ck_assert_int_eq(harness_mariadb_int(m, "KILL CONNECTION %lld", a_session), -1);
    ck_assert_msg(mariadb_until(m, 1, "SELECT IS_FREE_LOCK('" LOCK_KEY "')"),
                  "the lock was not freed with A's session");
    harness_bg_start(&b, b_port, "/inventory/sale/mysql-fenced?hold_ms=2500", 0);
    ck_assert_msg(holder_other_than(m, a_session) > 0, "B was never granted");
    harness_bg_join(&a);
    harness_bg_join(&b);
    ck_assert_msg(b.status == 200, "B answered %d: %s", b.status, b.body);
    ck_assert_str_eq(harness_json_str(b.body, "status"), "sold");
    ck_assert_msg(a.status == 409, "A's stale write answered %d: %s", a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "stale_token");
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
    mysql_close(m);
}
END_TEST

/* Starts A and B with lock.ttl-ms 1000 (every lock session has
 * wait_timeout 1 s), sends A's sale holding hold_ms in the background, and
 * returns A's lock session's id once A is inside holding it. */
static long long holder_inside(MYSQL *m, struct harness_bg *a, int hold_ms) {
    const char *sets[] = {host_set, port_set, NULL};
    ck_assert_int_eq(
        harness_pair_start(redis_port, 1000, 5000, sets, &a_pid, &a_port, &b_pid, &b_port), 0);
    char path[96];
    snprintf(path, sizeof(path), "/inventory/sale/mysql?hold_ms=%d", hold_ms);
    harness_bg_start(a, a_port, path, 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "A never came inside");
    long long id = holder_other_than(m, 0);
    ck_assert_msg(id > 0, "A came inside without holding the MariaDB lock");
    return id;
}

/* B sells while A is still inside, A's stale write lands after: one unit
 * sold twice. */
static void b_sells_under_a(struct harness_bg *a) {
    ck_assert_msg(harness_redis_int(redis_port, "HLEN inventory001:holders") == 1,
                  "fault missed its window: A came out before its session ended");
    struct httpc_response r;
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/mysql", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_msg(harness_redis_int(redis_port, "HLEN inventory001:holders") == 1,
                  "fault missed its window: A came out before B went in");
    harness_bg_join(a);
    ck_assert_msg(a->status == 200, "A answered %d: %s", a->status, a->body);
    ck_assert_int_ge(audit("violations"), 1);
    ck_assert_int_eq(audit("sold_twice"), 1);
}

/* A holder that only works long keeps its session, as a pooled connection
 * in an application does: A works 3 s with wait_timeout 1 s, the
 * watchdog's looks keep its session, and the lock is A's throughout; B
 * waits behind it and sells after it. */
START_TEST(test_a_holder_working_past_wait_timeout_keeps_its_session_and_its_lock) {
    MYSQL *m = harness_mariadb_connect(db_port);
    ck_assert_ptr_nonnull(m);
    struct harness_bg a, b;
    long long id = holder_inside(m, &a, 3000);
    harness_bg_start(&b, b_port, "/inventory/sale/mysql", 0);
    for (int64_t end = mclock_ms() + 2500; mclock_ms() < end; mclock_sleep_ms(50))
        ck_assert_msg(harness_mariadb_int(m, "SELECT IS_USED_LOCK('" LOCK_KEY "')") == id,
                      "A's session lost the lock while A was inside and running");
    harness_bg_join(&a);
    harness_bg_join(&b);
    ck_assert_msg(a.status == 200 && b.status == 200, "A %d: %s; B %d: %s", a.status, a.body,
                  b.status, b.body);
    ck_assert_int_ne(harness_json_num(a.body, "unit"), harness_json_num(b.body, "unit"));
    ck_assert_int_ge(harness_metric(a_port, "inventoryd_watchdog_renewals_total{lane=\"mysql\","
                                            "outcome=\"renewed\"}"),
                     3);
    ck_assert_int_eq(audit("violations"), 0);
    mysql_close(m);
}
END_TEST

/* A stopped holder sends no look: MariaDB ends its session at wait_timeout
 * and frees the lock while A is inside; B sells, and A, continued, writes
 * its stale read. */
START_TEST(test_a_holder_stopped_past_its_session_timeout_loses_the_lock_while_still_inside) {
    MYSQL *m = harness_mariadb_connect(db_port);
    ck_assert_ptr_nonnull(m);
    struct harness_bg a;
    holder_inside(m, &a, 500);
    ck_assert_int_eq(kill(a_pid, SIGSTOP), 0);
    int freed = mariadb_until(m, 1, "SELECT IS_FREE_LOCK('" LOCK_KEY "')");
    if (!freed) kill(a_pid, SIGCONT);
    ck_assert_msg(freed, "A's session kept the lock while A was stopped past its wait_timeout");
    struct httpc_response r;
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/mysql", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    /* A is still stopped inside (its probe entry went with its alive key). */
    ck_assert_int_eq(kill(a_pid, SIGCONT), 0);
    harness_bg_join(&a);
    ck_assert_msg(a.status == 200, "A answered %d: %s", a.status, a.body);
    ck_assert_int_eq(harness_json_num(a.body, "unit"), harness_json_num(r.body, "unit"));
    ck_assert_int_eq(audit("sold_twice"), 1);
    mysql_close(m);
}
END_TEST

/* Drops, on loopback, every packet between MariaDB and the local port of
 * session id (its processlist host), both ways: that session alone is cut.
 * 0, or -1 when the rules could not be made. */
static char cut_table[64];
static int cut_session(MYSQL *m, long long id) {
    long long port = harness_mariadb_int(
        m,
        "SELECT SUBSTRING_INDEX(HOST, ':', -1) FROM information_schema.processlist WHERE ID = %lld",
        id);
    if (port <= 0) return -1;
    snprintf(cut_table, sizeof(cut_table), "inventoryd_mysqlcut_%d", (int)getpid());
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "nft -f - <<EOF\ntable inet %s {\n chain out { type filter hook output priority 0;"
             " tcp sport %lld tcp dport %d drop; tcp sport %d tcp dport %lld drop; }\n}\nEOF",
             cut_table, port, db_port, db_port, port);
    return system(cmd) == 0 ? 0 : -1;
}

static void cut_heal(void) {
    if (!cut_table[0]) return;
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "nft delete table inet %s", cut_table);
    if (system(cmd) != 0) fprintf(stderr, "mysql: could not delete the table %s\n", cut_table);
    cut_table[0] = '\0';
}

/* A running holder cut from MariaDB: its looks no longer arrive, so the
 * server ends its session at wait_timeout from the last one it saw and
 * frees the lock while A, which still reaches Redis, is inside; B sells
 * and A's stale write lands. The cut is the cause: the same hold uncut
 * keeps its lock (above). */
START_TEST(test_a_holder_cut_from_mariadb_loses_the_lock_while_still_inside_and_writing) {
    if (getuid() != 0) {
        fprintf(stderr, "mysql: the cut needs root (nftables): not run\n");
        return;
    }
    MYSQL *m = harness_mariadb_connect(db_port);
    ck_assert_ptr_nonnull(m);
    struct harness_bg a;
    long long id = holder_inside(m, &a, 3500);
    int cut = cut_session(m, id);
    ck_assert_msg(cut == 0, "could not cut A's session (nft)");
    ck_assert_msg(harness_mariadb_int(m, "SELECT IS_USED_LOCK('" LOCK_KEY "')") == id,
                  "fault missed its window: A's session had lost the lock before the cut");
    int freed = mariadb_until(m, 1, "SELECT IS_FREE_LOCK('" LOCK_KEY "')");
    cut_heal();
    ck_assert_msg(freed, "A's session kept the lock while cut past its wait_timeout");
    b_sells_under_a(&a);
    mysql_close(m);
}
END_TEST

/* The lease B's hold recorded, from its grant, in ms (history on A). */
static double lease_after_grant_ms(const char *order) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/history?limit=100", NULL, NULL, &r),
                     200);
    cJSON *doc = cJSON_Parse(r.body), *e;
    ck_assert_ptr_nonnull(doc);
    double ms = -1;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "events")) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "order");
        if (!cJSON_IsString(o) || strcmp(o->valuestring, order) != 0) continue;
        ms = (cJSON_GetObjectItemCaseSensitive(e, "lease_us")->valuedouble -
              cJSON_GetObjectItemCaseSensitive(e, "granted_us")->valuedouble) /
             1000;
    }
    cJSON_Delete(doc);
    ck_assert_msg(ms >= 0, "no event of order %s in %.300s", order, r.body);
    return ms;
}

/* MariaDB's wait_timeout (10 s here) runs from the end of the session's
 * last statement: for a GET_LOCK that waited, its grant. B waits about
 * 1.5 s behind A; its hold records a lease of a whole wait_timeout from
 * its grant, not one dated from the GET_LOCK it sent 1.5 s before. */
START_TEST(test_a_grant_that_waited_dates_its_lease_from_after_the_grant) {
    for (int fenced = 0; fenced < 2; fenced++) {
        const char *s = fenced ? "mysql-fenced" : "mysql";
        if (!a_pid) start_pair();
        char pa[96], pb[96];
        snprintf(pa, sizeof(pa), "/inventory/sale/%s?hold_ms=1500", s);
        snprintf(pb, sizeof(pb), "/inventory/sale/%s", s);
        struct harness_bg a;
        harness_bg_start(&a, a_port, pa, 0);
        ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                      "A never came inside");
        struct httpc_response r;
        int64_t t0 = mclock_ms();
        ck_assert_int_eq(harness_http(b_port, "GET", pb, NULL, NULL, &r), 200);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
        ck_assert_msg(mclock_ms() - t0 >= 1000, "%s: B did not wait behind A (%lld ms)", s,
                      (long long)(mclock_ms() - t0));
        harness_bg_join(&a);
        double ms = lease_after_grant_ms(harness_json_str(r.body, "order"));
        /* Less the core's margin (lock_margin_us: 10000 / 100 + 2 ms). */
        ck_assert_msg(ms >= 9800 && ms <= 10000,
                      "%s: B's lease ends %.0f ms after its grant, not one wait_timeout (10 s) "
                      "less the margin",
                      s, ms);
    }
}
END_TEST

/* The lab's overrun scenario (A works 1.5 x TTL on instance A, B sells on
 * instance B at 0.25 x TTL) run with strategy s on two instances with
 * lock.ttl-ms 1000 (wait_timeout 1 s): its verdict, as "result: evidence". */
static void lab_overrun(const char *s, char *out, size_t len) {
    char rp[32], inst[96];
    if (!a_pid) {
        a_port = harness_free_port();
        b_port = harness_free_port();
    }
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    snprintf(inst, sizeof(inst), "lab.instances=127.0.0.1:%d,127.0.0.1:%d", a_port, b_port);
    const char *sets[] = {
        rp,   host_set, port_set, "lock.ttl-ms=1000", "faults.enabled=true", "lab.enabled=true",
        inst, NULL};
    if (!a_pid) a_pid = harness_inventoryd_start(a_port, sets);
    if (!b_pid) b_pid = harness_inventoryd_start(b_port, sets);
    ck_assert_int_gt(a_pid, 0);
    ck_assert_int_gt(b_pid, 0);
    char body[96];
    snprintf(body, sizeof(body), "{\"strategy\":\"%s\",\"scenario\":\"overrun\"}", s);
    ck_assert_msg(harness_lab_verdict(a_port, body, 20000, out, len) == 0, "%s", out);
}

/* A holder that only works long keeps its MariaDB session: the watchdog
 * looks at it while A works 1.5 x TTL past its 1 s wait_timeout, so B
 * waits, as behind a watchdog (verdict fixed); the flaw needs the session
 * itself to end (session-lost, below; a stop or a cut: Faults). */
START_TEST(test_a_mysql_holder_that_only_works_long_keeps_its_lock_in_the_labs_overrun) {
    char v[512];
    lab_overrun("mysql", v, sizeof(v));
    ck_assert_msg(strncmp(v, "fixed: ", 7) == 0 && strstr(v, "kept the lock"), "mysql: %s", v);
    lab_overrun("mysql-fenced", v, sizeof(v));
    ck_assert_msg(strncmp(v, "fixed: ", 7) == 0 && strstr(v, "kept the lock"), "mysql-fenced: %s",
                  v);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* The lab's session-lost with strategy s on A and B at the shipped lock
 * settings (the defaults: lock.ttl-ms 10000, so wait_timeout 10 s, and
 * lock.wait-ms 5000), started once, its fault's evidence asserted first
 * (harness_session_lost): A's answer says its session was killed while A
 * held the lock, and B got in before A answered. Returns the run. */
static cJSON *session_lost(const char *s) {
    char rp[32], inst[96], why[512];
    if (!a_pid) {
        a_port = harness_free_port();
        b_port = harness_free_port();
        snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
        snprintf(inst, sizeof(inst), "lab.instances=127.0.0.1:%d,127.0.0.1:%d", a_port, b_port);
        const char *sets[] = {rp,   host_set, port_set, "faults.enabled=true", "lab.enabled=true",
                              inst, NULL};
        ck_assert_int_gt(a_pid = harness_inventoryd_start(a_port, sets), 0);
        ck_assert_int_gt(b_pid = harness_inventoryd_start(b_port, sets), 0);
    }
    cJSON *run = harness_session_lost(a_port, s, why, sizeof(why));
    ck_assert_msg(run != NULL, "%s: %s", s, why);
    return run;
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

START_TEST(test_the_labs_session_lost_shows_mysqls_flaw_and_mysql_fenced_refuses_the_write) {
    cJSON *run = session_lost("mysql");
    const cJSON *v = at(run, "verdict");
    const cJSON *a = cJSON_GetArrayItem(at(run, "steps"), 0);
    const cJSON *b = cJSON_GetArrayItem(at(run, "steps"), 1);
    ck_assert_msg(strcmp(text(v, "result"), "flaw_shown") == 0 &&
                      strstr(text(v, "evidence"), "sold twice"),
                  "mysql: %s: %s", text(v, "result"), text(v, "evidence"));
    ck_assert_str_eq(text(a, "word"), "sold");
    ck_assert_int_eq(number(at(a, "answer"), "unit"), number(at(b, "answer"), "unit"));
    ck_assert_int_ge(number(at(run, "audit"), "sold_twice"), 1);
    cJSON_Delete(run);

    run = session_lost("mysql-fenced");
    v = at(run, "verdict");
    a = cJSON_GetArrayItem(at(run, "steps"), 0);
    ck_assert_msg(strcmp(text(v, "result"), "fixed") == 0, "mysql-fenced: %s: %s",
                  text(v, "result"), text(v, "evidence"));
    ck_assert_str_eq(text(a, "word"), "stale_token");
    ck_assert_int_eq(number(at(run, "audit"), "sold_twice"), 0);
    ck_assert_int_eq(number(at(run, "audit"), "sold"), 1);
    cJSON_Delete(run);
}
END_TEST

START_TEST(test_end_session_needs_faults_on_and_the_admin_token_and_a_lock_with_a_session) {
    /* A: faults on, an admin token; B: faults off. */
    char rp[32];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    const char *a_sets[] = {
        rp, host_set, port_set, "faults.enabled=true", "admin.token=tok-35-end-session-00", NULL};
    const char *b_sets[] = {rp, host_set, port_set, NULL};
    a_port = harness_free_port();
    ck_assert_int_gt(a_pid = harness_inventoryd_start(a_port, a_sets), 0);
    b_port = harness_free_port();
    ck_assert_int_gt(b_pid = harness_inventoryd_start(b_port, b_sets), 0);
    const char *auth = "Authorization: Bearer tok-35-end-session-00\r\n";
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", auth, "{\"stock\":5}", &r),
                     200);
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/mysql?end_session=1", NULL, NULL, &r), 401);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "unauthorized");
    ck_assert_msg(strstr(r.www_authenticate, "Bearer"), "%s", r.www_authenticate);
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/owner-lua?end_session=1", auth, NULL, &r),
        400);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "bad_request");
    const char *e = harness_json_str(r.body, "error");
    ck_assert_msg(strstr(e, "end_session") && strstr(e, "owner-lua") && strstr(e, "mysql"), "%s",
                  e);
    ck_assert_int_eq(
        harness_http(b_port, "GET", "/inventory/sale/mysql?end_session=1", NULL, NULL, &r), 403);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "faults_disabled");
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 5); /* none sold */
    /* With the token, on a lock that has a session: sold, the session killed. */
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/mysql?end_session=1", auth, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_msg(strstr(r.body, "\"session_ended\":true"), "%s", r.body);
    /* A read that is not clean (a stock that is no number) writes nothing,
     * and the session is not ended under it. */
    harness_redis_int(redis_port, "SET inventory001 abc");
    ck_assert_int_eq(
        harness_http(a_port, "GET", "/inventory/sale/mysql?end_session=1", auth, NULL, &r), 409);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "bad_stock");
    ck_assert_msg(!strstr(r.body, "session_ended"), "the session was ended on a bad read: %s",
                  r.body);
}
END_TEST

/* The crash fault kills the holder as soon as it holds the lock, before it
 * reaches Redis: it dies inside even when the data Redis is out of reach
 * (stopped here), as a holder that dies inside does not wait for Redis. */
START_TEST(test_the_crash_fault_dies_holding_the_lock_even_when_redis_is_out_of_reach) {
    start_pair();
    struct httpc_response r;
    harness_stop(redis_pid);
    redis_pid = 0;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/mysql?crash=1", NULL, NULL, &r),
                     0);
    int st = 0;
    ck_assert_int_eq(waitpid(a_pid, &st, 0), a_pid);
    a_pid = 0;
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 86, "A ended with status %#x, not exit 86",
                  st);
}
END_TEST

START_TEST(test_a_stopped_mariadb_answers_503_naming_it_and_sales_resume_when_it_is_back) {
    start_pair();
    struct httpc_response r;
    /* Each instance keeps a pooled session from a sale before the stop. */
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/mysql", NULL, NULL, &r), 200);
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/mysql", NULL, NULL, &r), 200);
    harness_stop(db_pid);
    db_pid = 0;
    ck_assert_msg(harness_refused(db_port), "mariadb still listens on %d", db_port);
    char addr[64];
    snprintf(addr, sizeof(addr), "mysql 127.0.0.1:%d", db_port);
    for (int i = 0; i < 2; i++) { /* the pooled session, then a fresh dial */
        ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/mysql", NULL, NULL, &r), 503);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
        ck_assert_msg(strstr(harness_json_str(r.body, "error"), addr), "%s", r.body);
    }
    ck_assert_int_eq(harness_http(a_port, "GET", "/readyz", NULL, NULL, &r), 503);
    db_pid = harness_mariadb_restart(db_port, db_sock);
    ck_assert_int_gt(db_pid, 0);
    /* B's pooled session died with the server: it is closed unused, and
     * B's first sale after the restart dials a fresh one. */
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r),
                     200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/mysql", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(kill(a_pid, 0), 0); /* the same processes: no restart */
    ck_assert_int_eq(kill(b_pid, 0), 0);
    ck_assert_int_eq(audit("sold"), 4);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* A fencing token is never handed out twice, even when MariaDB dies
 * (SIGKILL: no shutdown, nothing flushed on the way out) right after it
 * was handed out: a repeated token would let a stale holder's write pass
 * the fence as if it held the lock. Three rounds, each killing the server
 * within milliseconds of a new hold's token (the window in which the
 * SEQUENCE this fence once used still had its new values only in the
 * unflushed redo log: it handed them out again, or lost its row). */
START_TEST(test_mysql_fenced_tokens_keep_growing_across_crashes_right_after_they_were_handed_out) {
    start_pair();
    struct httpc_response r;
    long long last = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2; i++) {
            ck_assert_int_eq(
                harness_http(a_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r), 200);
            ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
            long long t = (long long)harness_json_num(r.body, "lock.token");
            ck_assert_msg(t > last, "round %d: token %lld after %lld", round, t, last);
            last = t;
        }
        ck_assert_int_eq(kill(db_pid, SIGKILL), 0);
        ck_assert_int_eq(waitpid(db_pid, NULL, 0), db_pid);
        db_pid = harness_mariadb_restart(db_port, db_sock);
        ck_assert_int_gt(db_pid, 0);
        /* A's pooled session died with the server: the first sale may find
         * it dead (503), the next dials a fresh one. */
        int code = harness_http(a_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r);
        if (code == 503)
            code = harness_http(a_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r);
        ck_assert_msg(code == 200, "round %d: after the crash the sale answered %d: %s", round,
                      code, r.body);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
        long long t = (long long)harness_json_num(r.body, "lock.token");
        ck_assert_msg(t > last,
                      "round %d: after the crash the token is %lld, yet %lld was handed out "
                      "before it",
                      round, t, last);
        last = t;
    }
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* A database that still has the SEQUENCE inventoryd_fence of earlier
 * versions (its tokens may be recorded as the newest in Redis) starts the
 * fence counter past it, so the first new token is not refused as older
 * than those; the sequence itself is left alone. */
START_TEST(test_mysql_fenced_starts_its_counter_past_the_sequence_of_earlier_versions) {
    MYSQL *m = harness_mariadb_connect(db_port);
    ck_assert_ptr_nonnull(m);
    harness_mariadb_int(m, "CREATE DATABASE inventoryd");
    harness_mariadb_int(m, "CREATE SEQUENCE inventoryd.inventoryd_fence START WITH 5000");
    ck_assert_int_eq(harness_mariadb_int(m, "SELECT NEXTVAL(inventoryd.inventoryd_fence)"), 5000);
    start_pair();
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r),
                     200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    long long first = (long long)harness_json_num(r.body, "lock.token");
    ck_assert_msg(first > 5000, "the first token, %lld, is not past the old sequence's 5000",
                  first);
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r),
                     200);
    ck_assert_int_eq((long long)harness_json_num(r.body, "lock.token"), first + 1);
    ck_assert_int_eq(harness_mariadb_int(m, "SELECT COUNT(*) FROM inventoryd.inventoryd_fence"), 1);
    mysql_close(m);
}
END_TEST

/* The counter's row deleted by hand: a fenced sale answers 503 saying so
 * and how to mend it (no blank "mysql ...: (the fence counter)"), and the
 * row put back past the newest token, sales go on with no restart. */
START_TEST(
    test_a_missing_fence_counter_row_answers_503_naming_it_and_sales_resume_once_it_is_back) {
    start_pair();
    MYSQL *m = harness_mariadb_connect(db_port);
    ck_assert_ptr_nonnull(m);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r),
                     200);
    harness_mariadb_int(m, "DELETE FROM inventoryd.inventoryd_fence_counter");
    ck_assert_int_eq(
        harness_mariadb_int(m, "SELECT COUNT(*) FROM inventoryd.inventoryd_fence_counter"), 0);
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r),
                     503);
    const char *e = harness_json_str(r.body, "error");
    ck_assert_msg(strstr(e, "inventoryd_fence_counter") && strstr(e, "is gone") &&
                      strstr(e, ":fence:mysql"),
                  "%s", r.body);
    harness_mariadb_int(m, "INSERT INTO inventoryd.inventoryd_fence_counter VALUES (1, 1000)");
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/mysql-fenced", NULL, NULL, &r),
                     200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq((long long)harness_json_num(r.body, "lock.token"), 1001);
    mysql_close(m);
}
END_TEST

/* Whether needle is in the file at path; -1 when it cannot be read. */
static int file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

START_TEST(test_the_mysql_password_appears_in_no_answer_no_config_dump_and_no_log) {
    /* The password is wrong (root's is empty): the sales fail with
     * MariaDB's own "Access denied" message, which must not carry it. */
    char rp[32], log[64];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    snprintf(log, sizeof(log), "/tmp/check_mysql_%d.log", (int)getpid());
    const char *sets[] = {rp,
                          host_set,
                          port_set,
                          "mysql.password=" PASSWORD,
                          "lock.allowed=mysql,mysql-fenced",
                          "lock.strategy=mysql",
                          NULL};
    a_port = harness_free_port();
    a_pid = harness_inventoryd_start_logged(a_port, sets, log);
    ck_assert_int_gt(a_pid, 0);
    reset(a_port, 5);
    static const char *const paths[] = {"/inventory/sale/mysql",
                                        "/inventory/sale/mysql-fenced",
                                        "/readyz",
                                        "/healthz",
                                        "/strategies",
                                        "/metrics",
                                        "/inventory/audit"};
    struct httpc_response r;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        int st = harness_http(a_port, "GET", paths[i], NULL, NULL, &r);
        ck_assert_int_ne(st, 0);
        ck_assert_msg(!strstr(r.body, PASSWORD), "%s shows the password: %s", paths[i], r.body);
        if (i == 0) {
            ck_assert_int_eq(st, 503);
            ck_assert_msg(strstr(r.body, "Access denied"), "%s", r.body);
        }
    }
    /* The effective settings, as --check-config prints them. */
    char cmd[512], out[128];
    snprintf(out, sizeof(out), "/tmp/check_mysql_%d.dump", (int)getpid());
    snprintf(cmd, sizeof(cmd), "%s --set mysql.password=%s --check-config > %s 2>&1",
             INVENTORYD_BIN, PASSWORD, out);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(file_has(out, "mysql.password"), 1);
    ck_assert_int_eq(file_has(out, PASSWORD), 0);
    harness_stop(a_pid);
    a_pid = 0;
    ck_assert_int_eq(file_has(log, PASSWORD), 0);
    unlink(out);
    unlink(log);
}
END_TEST

Suite *mysql_suite(void) {
    Suite *s = suite_create("mysql");
    struct {
        const char *name;
        const TTest *tests[12];
    } cases[] = {
        {"Core",
         {test_mysql_sells_exactly_its_stock_across_two_instances_under_concurrent_sales,
          test_an_unconfigured_mysql_is_listed_unavailable_and_its_sale_answers_503_naming_the_key,
          test_the_mysql_password_appears_in_no_answer_no_config_dump_and_no_log,
          test_mysql_fenced_starts_its_counter_past_the_sequence_of_earlier_versions,
          test_a_missing_fence_counter_row_answers_503_naming_it_and_sales_resume_once_it_is_back}},
        {"Lab",
         {test_a_mysql_holder_that_only_works_long_keeps_its_lock_in_the_labs_overrun,
          test_the_labs_session_lost_shows_mysqls_flaw_and_mysql_fenced_refuses_the_write,
          test_end_session_needs_faults_on_and_the_admin_token_and_a_lock_with_a_session,
          test_the_crash_fault_dies_holding_the_lock_even_when_redis_is_out_of_reach}},
        {"Faults",
         {test_a_killed_lock_session_lets_the_next_holder_in_while_the_first_still_writes,
          test_a_grant_that_waited_dates_its_lease_from_after_the_grant,
          test_mysql_fenced_refuses_the_killed_holders_late_write_and_nothing_sells_twice,
          test_mysql_fenced_refuses_a_stale_write_that_lands_before_the_next_holder_writes,
          test_a_holder_working_past_wait_timeout_keeps_its_session_and_its_lock,
          test_a_holder_stopped_past_its_session_timeout_loses_the_lock_while_still_inside,
          test_a_holder_cut_from_mariadb_loses_the_lock_while_still_inside_and_writing,
          test_a_stopped_mariadb_answers_503_naming_it_and_sales_resume_when_it_is_back,
          test_mysql_fenced_tokens_keep_growing_across_crashes_right_after_they_were_handed_out}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        for (int j = 0; j < 12 && cases[i].tests[j]; j++) tcase_add_test(tc, cases[i].tests[j]);
        suite_add_tcase(s, tc);
    }
    return s;
}
