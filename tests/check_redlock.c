/* check_redlock.c -- Redlock over real, independent redis-server masters,
 * killed, restarted, paused and failed over by the test. */
#include <check.h>
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

static pid_t redis_pid, master_pid[3], a_pid, b_pid;
static int redis_port, master_port[3], a_port, b_port;
static char nodes[128];

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    for (int i = 0; i < 3; i++) {
        master_pid[i] = harness_redis_start(0, &master_port[i]);
        ck_assert_int_gt(master_pid[i], 0);
    }
    snprintf(nodes, sizeof(nodes), "redlock.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             master_port[0], master_port[1], master_port[2]);
    a_pid = b_pid = 0;
}

static void teardown(void) {
    harness_stop(a_pid);
    harness_stop(b_pid);
    for (int i = 0; i < 3; i++) harness_stop(master_pid[i]);
    harness_stop(redis_pid);
}

/* Two instances on the test's Redis and masters. */
static void start_pair(int ttl_ms, int wait_ms, const char *masters) {
    const char *sets[] = {masters ? masters : nodes, "redlock.node-timeout-ms=50", NULL};
    ck_assert_int_eq(harness_pair_start(redis_port, ttl_ms, wait_ms, sets, &a_pid, &a_port,
                                        &b_pid, &b_port), 0);
}

static double audit(const char *field) {
    double v = harness_audit(a_port, field);
    ck_assert_msg(v > -1e9, "GET /inventory/audit failed");
    return v;
}

/* The vote of master i in a sale answer: "yes", "busy", "error", "restarted". */
static const char *vote_of(const char *body, int i) {
    static char word[16];
    char key[64];
    snprintf(key, sizeof(key), "\"node\":\"127.0.0.1:%d\",\"vote\":\"", master_port[i]);
    const char *p = strstr(body, key);
    word[0] = '\0';
    if (p) sscanf(p + strlen(key), "%15[a-z]", word);
    return word;
}

/* inventory-load against one instance, in the background. */
static pid_t load_start(int port, int clients, int requests, const char *out) {
    pid_t pid = fork();
    if (pid == 0) {
        char p[16], c[16], n[16];
        snprintf(p, sizeof(p), "%d", port);
        snprintf(c, sizeof(c), "%d", clients);
        snprintf(n, sizeof(n), "%d", requests);
        if (!freopen(out, "w", stdout)) _exit(127);
        execl(INVENTORY_LOAD_BIN, INVENTORY_LOAD_BIN, "--port", p, "--path", "/inventory/sale/redlock",
              "--clients", c, "--requests", n, "--timeout-ms", "30000", "--format", "kv", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* A field of a load's kv line ("sold"). */
static long long load_field(const char *out, const char *field) {
    FILE *f = fopen(out, "r");
    char line[1024] = "";
    if (f) {
        if (!fgets(line, sizeof(line), f)) line[0] = '\0';
        fclose(f);
    }
    char key[40];
    snprintf(key, sizeof(key), " %s=", field);
    char padded[1100];
    snprintf(padded, sizeof(padded), " %s", line);
    const char *p = strstr(padded, key);
    ck_assert_msg(p != NULL, "no %s in load output '%s'", field, line);
    return strtoll(p + strlen(key), NULL, 10);
}

/* Both loads (100 clients each, 600 requests each) with `during` run while
 * they go; returns what the clients saw sold in all. */
static long long load_both(void (*during)(void)) {
    char out_a[] = "/tmp/redlock-load-a-XXXXXX", out_b[] = "/tmp/redlock-load-b-XXXXXX";
    close(mkstemp(out_a));
    close(mkstemp(out_b));
    pid_t la = load_start(a_port, 100, 600, out_a);
    pid_t lb = load_start(b_port, 100, 600, out_b);
    if (during) during();
    int st;
    waitpid(la, &st, 0);
    waitpid(lb, &st, 0);
    long long sold = load_field(out_a, "sold") + load_field(out_b, "sold");
    ck_assert_int_eq(load_field(out_a, "other") + load_field(out_b, "other"), 0);
    unlink(out_a);
    unlink(out_b);
    return sold;
}

START_TEST(test_all_three_masters_up_sell_exactly_the_stock) {
    start_pair(10000, 20000, NULL);
    long long sold = load_both(NULL);
    ck_assert_int_eq(sold, 200);
    ck_assert_int_eq(audit("sold"), 200);
    ck_assert_int_eq(audit("stock"), 0);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
    struct httpc_response r;
    harness_http(a_port, "GET", "/metrics", NULL, NULL, &r);
    char want[96];
    snprintf(want, sizeof(want), "inventoryd_redlock_votes_total{node=\"127.0.0.1:%d\",outcome=\"yes\"}",
             master_port[2]);
    ck_assert_ptr_nonnull(strstr(r.body, want));
}
END_TEST

static void kill_second_master(void) {
    mclock_sleep_ms(300);
    kill(master_pid[1], SIGKILL);
    waitpid(master_pid[1], NULL, 0);
    master_pid[1] = 0;
}

START_TEST(test_a_master_killed_mid_load_oversells_nothing_and_waits_out_its_restart) {
    start_pair(3000, 20000, NULL);
    long long sold = load_both(kill_second_master);
    ck_assert_int_eq(sold, audit("sold"));
    ck_assert_int_le(sold, 200);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(audit("oversold_units"), 0);

    /* Restarted empty on the same port: it forgot every lock it held. */
    master_pid[1] = harness_redis_start(master_port[1], NULL);
    ck_assert_int_gt(master_pid[1], 0);
    struct httpc_response r;
    harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":10}", &r);
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    ck_assert_str_eq(vote_of(r.body, 1), "restarted");
    ck_assert_str_eq(vote_of(r.body, 0), "yes");
    mclock_sleep_ms(3200);   /* the longest lease has passed */
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    ck_assert_str_eq(vote_of(r.body, 1), "yes");
}
END_TEST

START_TEST(test_two_masters_down_answer_503_at_once_and_sales_resume_when_back) {
    start_pair(10000, 2000, NULL);
    for (int i = 1; i < 3; i++) {
        harness_stop(master_pid[i]);
        master_pid[i] = 0;
    }
    struct httpc_response r;
    for (int k = 0; k < 3; k++) {
        int64_t t0 = mclock_ms();
        ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 503);
        ck_assert_int_lt(mclock_ms() - t0, 2000 + 500);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
        ck_assert_ptr_nonnull(strstr(r.body, "masters can vote"));
    }
    for (int i = 1; i < 3; i++) {
        master_pid[i] = harness_redis_start(master_port[i], NULL);
        ck_assert_int_gt(master_pid[i], 0);
    }
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(audit("stock"), 199);
}
END_TEST

START_TEST(test_a_paused_master_costs_no_more_than_the_node_timeout) {
    start_pair(10000, 2000, NULL);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    redisReply *p = harness_redis(master_port[0], "CLIENT PAUSE 3000 ALL");
    ck_assert_ptr_nonnull(p);
    freeReplyObject(p);
    int64_t t0 = mclock_ms();
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    int64_t took = mclock_ms() - t0;
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_msg(strcmp(vote_of(r.body, 0), "error") == 0, "answer: %s", r.body);
    ck_assert_str_eq(vote_of(r.body, 1), "yes");
    ck_assert_str_eq(vote_of(r.body, 2), "yes");
    ck_assert_msg(took < 50 + 150, "took %lld ms with one master paused", (long long)took);
}
END_TEST

/* The hazard that motivates Redlock: the lock is on a master whose replica
 * has not received it; the master dies and the replica is promoted. */
static pid_t replica_of(int master, int *port) {
    pid_t pid = harness_redis_start(0, port);
    ck_assert_int_gt(pid, 0);
    redisReply *r = harness_redis(*port, "REPLICAOF 127.0.0.1 %d", master);
    freeReplyObject(r);
    for (int i = 0; i < 100; i++) {
        redisReply *info = harness_redis(*port, "INFO replication");
        int up = info && strstr(info->str, "master_link_status:up") != NULL;
        freeReplyObject(info);
        if (up) break;
        mclock_sleep_ms(50);
    }
    return pid;
}

/* Holder A takes the lock on a master whose replica is frozen (SIGSTOP)
 * and cut off (the master closes the replication link, so no byte of the
 * lock is even in the replica's socket), the master is killed, the replica
 * resumes and is promoted; B, whose Redis is now the replica, sells. */
static void failover(const char *strategy, int master, pid_t master_proc, int replica_port,
                     pid_t replica_pid, struct harness_bg *a, struct harness_bg *b) {
    char pa[128], pb[128];
    snprintf(pa, sizeof(pa), "/inventory/sale/%s?hold_ms=1500", strategy);
    snprintf(pb, sizeof(pb), "/inventory/sale/%s", strategy);
    kill(replica_pid, SIGSTOP);
    redisReply *cut = harness_redis(master, "CLIENT KILL TYPE replica");
    freeReplyObject(cut);
    harness_bg_start(a, a_port, pa, 0);
    mclock_sleep_ms(200);
    kill(master_proc, SIGKILL);
    waitpid(master_proc, NULL, 0);
    kill(replica_pid, SIGCONT);
    redisReply *r = harness_redis(replica_port, "REPLICAOF NO ONE");
    freeReplyObject(r);
    harness_bg_start(b, b_port, pb, 100);
    harness_bg_join(b);
    harness_bg_join(a);
}

START_TEST(test_watchdog_on_one_master_loses_exclusion_in_a_failover) {
    /* A's Redis is the master; B's is its replica, as after a failover. */
    int replica_port;
    pid_t replica = replica_of(redis_port, &replica_port);
    char rp[32], bp[32];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    snprintf(bp, sizeof(bp), "redis.port=%d", replica_port);
    const char *sa[] = {rp, "lock.ttl-ms=10000", "lock.wait-ms=3000", "faults.enabled=true", NULL};
    const char *sb[] = {bp, "lock.ttl-ms=10000", "lock.wait-ms=3000", "faults.enabled=true", NULL};
    struct httpc_response r;
    a_port = harness_free_port();
    a_pid = harness_inventoryd_start(a_port, sa);
    b_port = harness_free_port();
    b_pid = harness_inventoryd_start(b_port, sb);
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r), 200);
    /* Wait until the stock is on the replica: a freshly synced Redis 7
     * replica may get the stream only after its first ACK (up to 1 s). */
    for (int i = 0; i < 100 && harness_redis_int(replica_port, "GET inventory001") != 200; i++)
        mclock_sleep_ms(50);
    ck_assert_int_eq(harness_redis_int(replica_port, "GET inventory001"), 200);
    struct harness_bg a, b;
    failover("watchdog", redis_port, redis_pid, replica_port, replica, &a, &b);
    redis_pid = 0;
    /* B took the lock while A still held it: two owners. */
    ck_assert_msg(b.status == 200, "B: %d %s", b.status, b.body);
    ck_assert_int_lt(harness_json_num(b.body, "lock.wait_ms"), 500);
    ck_assert_int_lt(b.sent_ms + b.took_ms, a.sent_ms + a.took_ms);   /* B done before A let go */
    harness_stop(replica);
}
END_TEST

START_TEST(test_redlock_keeps_exclusion_through_the_same_failover) {
    /* Master 0 has a replica; after the failover B's masters are the
     * promoted replica and the two others. */
    int replica_port;
    pid_t replica = replica_of(master_port[0], &replica_port);
    char rp[32], nodes_b[128];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    snprintf(nodes_b, sizeof(nodes_b), "redlock.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             replica_port, master_port[1], master_port[2]);
    const char *sa[] = {rp, nodes, "lock.ttl-ms=10000", "lock.wait-ms=3000", "faults.enabled=true", NULL};
    const char *sb[] = {rp, nodes_b, "lock.ttl-ms=10000", "lock.wait-ms=3000", "faults.enabled=true", NULL};
    struct httpc_response r;
    a_port = harness_free_port();
    a_pid = harness_inventoryd_start(a_port, sa);
    b_port = harness_free_port();
    b_pid = harness_inventoryd_start(b_port, sb);
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r), 200);
    struct harness_bg a, b;
    failover("redlock", master_port[0], master_pid[0], replica_port, replica, &a, &b);
    master_pid[0] = 0;
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(b.status, 200);
    /* B waited for A: the two untouched masters still held A's lock. */
    ck_assert_int_ge(b.sent_ms + b.took_ms, a.sent_ms + a.took_ms - 50);
    ck_assert_int_ge(harness_json_num(b.body, "lock.wait_ms"), 900);
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(audit("sold_twice"), 0);
    harness_stop(replica);
}
END_TEST

Suite *redlock_suite(void) {
    Suite *s = suite_create("redlock");
    TCase *q = tcase_create("Quorum");
    tcase_add_checked_fixture(q, setup, teardown);
    tcase_set_timeout(q, 120);
    tcase_add_test(q, test_all_three_masters_up_sell_exactly_the_stock);
    tcase_add_test(q, test_a_paused_master_costs_no_more_than_the_node_timeout);
    suite_add_tcase(s, q);
    TCase *f = tcase_create("Failures");
    tcase_add_checked_fixture(f, setup, teardown);
    tcase_set_timeout(f, 120);
    tcase_add_test(f, test_a_master_killed_mid_load_oversells_nothing_and_waits_out_its_restart);
    tcase_add_test(f, test_two_masters_down_answer_503_at_once_and_sales_resume_when_back);
    suite_add_tcase(s, f);
    TCase *fo = tcase_create("Failover");
    tcase_add_checked_fixture(fo, setup, teardown);
    tcase_set_timeout(fo, 120);
    tcase_add_test(fo, test_watchdog_on_one_master_loses_exclusion_in_a_failover);
    tcase_add_test(fo, test_redlock_keeps_exclusion_through_the_same_failover);
    suite_add_tcase(s, fo);
    return s;
}
