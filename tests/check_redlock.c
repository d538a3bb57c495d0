/* check_redlock.c -- Redlock over real, independent redis-server masters,
 * killed, restarted, paused and failed over by the test. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
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

/* Waits until masters 0..2 may vote: up for the TTL (the restart rule). */
static void masters_ready(int ttl_ms) {
    for (int i = 0; i < 3; i++)
        if (master_pid[i] > 0)
            ck_assert_int_eq(harness_redis_wait_uptime(master_port[i], (ttl_ms + 999) / 1000), 0);
}

/* Two instances on the test's Redis and masters, each master's connect and
 * command timeout node_ms, once the masters may vote. */
static void start_pair_timeout(int ttl_ms, int wait_ms, int node_ms) {
    masters_ready(ttl_ms);
    char nt[48];
    snprintf(nt, sizeof(nt), "redlock.node-timeout-ms=%d", node_ms);
    const char *sets[] = {nodes, nt, NULL};
    ck_assert_int_eq(
        harness_pair_start(redis_port, ttl_ms, wait_ms, sets, &a_pid, &a_port, &b_pid, &b_port), 0);
}

/* The same with the 50 ms node timeout. */
static void start_pair(int ttl_ms, int wait_ms, const char *masters) {
    masters_ready(ttl_ms);
    const char *sets[] = {masters ? masters : nodes, "redlock.node-timeout-ms=50", NULL};
    ck_assert_int_eq(
        harness_pair_start(redis_port, ttl_ms, wait_ms, sets, &a_pid, &a_port, &b_pid, &b_port), 0);
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

/* inventoryd_redlock_votes_total of master i on the instance at port, for
 * one outcome ("yes", "busy", "error", "restarted"). */
static long long votes(int port, int i, const char *outcome) {
    char series[128];
    snprintf(series, sizeof(series),
             "inventoryd_redlock_votes_total{node=\"127.0.0.1:%d\",outcome=\"%s\"}", master_port[i],
             outcome);
    long long n = harness_metric(port, series);
    ck_assert_msg(n >= 0, "no %s in GET /metrics", series);
    return n;
}

/* A counter of /metrics for the redlock strategy ("inventoryd_lock_attempts_total"). */
static long long redlock_metric(int port, const char *name) {
    char series[128];
    snprintf(series, sizeof(series), "%s{strategy=\"redlock\"}", name);
    long long n = harness_metric(port, series);
    ck_assert_msg(n >= 0, "no %s in GET /metrics", series);
    return n;
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
        execl(INVENTORY_LOAD_BIN, INVENTORY_LOAD_BIN, "--port", p, "--path",
              "/inventory/sale/redlock", "--clients", c, "--requests", n, "--timeout-ms", "30000",
              "--format", "kv", (char *)NULL);
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

static pid_t la, lb; /* the two loads while load_both runs */

/* 1 while the load pid has not exited (it is not reaped here). */
static int running(pid_t pid) {
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

/* Both loads (100 clients each, 600 requests each) with `during` run while
 * they go; returns what the clients saw sold in all. */
static long long load_both(void (*during)(void)) {
    char out_a[] = "/tmp/redlock-load-a-XXXXXX", out_b[] = "/tmp/redlock-load-b-XXXXXX";
    close(mkstemp(out_a));
    close(mkstemp(out_b));
    la = load_start(a_port, 100, 600, out_a);
    lb = load_start(b_port, 100, 600, out_b);
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
    /* No master may fail a vote here: a 500 ms node timeout, so that a busy
     * machine's scheduling is not counted as a failed master. */
    start_pair_timeout(3000, 20000, 500);
    long long sold = load_both(NULL);
    ck_assert_int_eq(sold, 200);
    ck_assert_int_eq(audit("sold"), 200);
    ck_assert_int_eq(audit("stock"), 0);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
    /* The metrics agree with the sales: every round got one vote from each
     * master, every lock held had a quorum of yes, no master failed. */
    long long sales = 0;
    for (int k = 0; k < 2; k++) {
        int port = k ? b_port : a_port;
        long long attempts = redlock_metric(port, "inventoryd_lock_attempts_total");
        long long answered = redlock_metric(port, "inventoryd_sales_total") +
                             redlock_metric(port, "inventoryd_sold_out_total");
        long long all = 0, yes = 0;
        for (int i = 0; i < 3; i++) {
            yes += votes(port, i, "yes");
            all += votes(port, i, "yes") + votes(port, i, "busy");
            ck_assert_int_eq(votes(port, i, "error"), 0);
            ck_assert_int_eq(votes(port, i, "restarted"), 0);
        }
        ck_assert_int_eq(answered, 600);
        ck_assert_msg(all == 3 * attempts, "%lld votes for %lld rounds of 3 masters", all,
                      attempts);
        ck_assert_msg(yes >= 2 * answered, "%lld yes votes for %lld holds (quorum 2)", yes,
                      answered);
        sales += redlock_metric(port, "inventoryd_sales_total");
    }
    ck_assert_int_eq(sales, 200);
}
END_TEST

static long long sold_at_kill;

/* Kills master 1 once 20 units are sold, while both loads still run. */
static void kill_second_master(void) {
    int64_t deadline = mclock_ms() + 20000;
    while ((sold_at_kill = harness_redis_int(redis_port, "LLEN inventory001:sold")) < 20 &&
           mclock_ms() < deadline)
        mclock_sleep_ms(5);
    int both = running(la) && running(lb);
    kill(master_pid[1], SIGKILL);
    waitpid(master_pid[1], NULL, 0);
    master_pid[1] = 0;
    ck_assert_msg(both, "a load had ended before the kill");
    ck_assert_msg(sold_at_kill >= 20 && sold_at_kill < 200, "%lld of 200 sold at the kill",
                  sold_at_kill);
}

START_TEST(test_a_master_killed_mid_load_oversells_nothing_and_waits_out_its_restart) {
    /* A 500 ms node timeout: the killed master refuses at once, and the
     * survivors must never count an error, which a 50 ms timeout would
     * when both cores are busy (a CI run beside other work failed so). */
    start_pair_timeout(3000, 20000, 500);
    long long sold = load_both(kill_second_master);
    /* Two masters are a quorum: the sales went on and sold exactly the stock. */
    ck_assert_int_eq(sold, 200);
    ck_assert_int_eq(audit("sold"), 200);
    ck_assert_int_eq(audit("stock"), 0);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(audit("oversold_units"), 0);
    /* Every round after the kill counted the dead master's vote as an error. */
    long long errors = votes(a_port, 1, "error") + votes(b_port, 1, "error");
    ck_assert_msg(errors > 0, "no error vote for the killed master (%lld sold at the kill)",
                  sold_at_kill);
    for (int i = 0; i < 3; i += 2)
        ck_assert_int_eq(votes(a_port, i, "error") + votes(b_port, i, "error"), 0);
    ck_assert_int_eq(votes(a_port, 1, "restarted"), 0);

    /* Restarted empty on the same port: it forgot every lock it held. */
    master_pid[1] = harness_redis_start(master_port[1], NULL);
    ck_assert_int_gt(master_pid[1], 0);
    struct httpc_response r;
    harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":10}", &r);
    long long yes_before = votes(a_port, 1, "yes");
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    ck_assert_str_eq(vote_of(r.body, 1), "restarted");
    ck_assert_str_eq(vote_of(r.body, 0), "yes");
    ck_assert_int_eq(harness_json_num(r.body, "lock.attempts"), 1);
    ck_assert_int_eq(votes(a_port, 1, "restarted"), 1);
    mclock_sleep_ms(3200); /* the longest lease has passed */
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    ck_assert_str_eq(vote_of(r.body, 1), "yes");
    ck_assert_int_eq(votes(a_port, 1, "restarted"), 1);
    ck_assert_int_eq(votes(a_port, 1, "yes"), yes_before + 1);
}
END_TEST

START_TEST(test_two_masters_down_answer_503_at_once_and_sales_resume_when_back) {
    /* lock.wait-ms is far above the bound: a sale that polled until it ran
     * out would take 10 s, not a few node timeouts (50 ms). */
    start_pair(3000, 10000, NULL);
    for (int i = 1; i < 3; i++) {
        harness_stop(master_pid[i]);
        master_pid[i] = 0;
    }
    struct httpc_response r;
    for (int k = 0; k < 3; k++) {
        int64_t t0 = mclock_ms();
        ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r),
                         503);
        int64_t took = mclock_ms() - t0;
        ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
        ck_assert_ptr_nonnull(strstr(r.body, "masters can vote"));
        /* At once: one round at most, not a poll until lock.wait-ms (10 s)
         * ran out; the time bounds, half that wait, leave a loaded machine
         * room. */
        ck_assert_msg(harness_json_num(r.body, "lock.attempts") <= 1, "it polled: %s", r.body);
        ck_assert_msg(harness_json_num(r.body, "lock.wait_ms") < 5000, "it waited: %s", r.body);
        ck_assert_msg(took < 5000, "503 after %lld ms: not at once", (long long)took);
    }
    for (int i = 1; i < 3; i++) {
        master_pid[i] = harness_redis_start(master_port[i], NULL);
        ck_assert_int_gt(master_pid[i], 0);
    }
    masters_ready(3000); /* back, and up for the TTL: they vote again */
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(audit("stock"), 199);
}
END_TEST

START_TEST(test_a_paused_master_costs_no_more_than_the_node_timeout) {
    start_pair(3000, 2000, NULL);
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
    /* Master 0's vote is an error (its node timeout ran out), and the
     * sale did not wait for the pause (3000 ms) to end. */
    ck_assert_msg(took < 1500, "took %lld ms with one master paused", (long long)took);
    ck_assert_int_eq(votes(a_port, 0, "error"), 1);
    ck_assert_int_eq(votes(a_port, 0, "yes"), 1);
    ck_assert_int_eq(votes(a_port, 1, "yes"), 2);
    ck_assert_int_eq(votes(a_port, 2, "yes"), 2);
    ck_assert_int_eq(redlock_metric(a_port, "inventoryd_lock_attempts_total"), 2);
}
END_TEST

/* ---- the rules of a round -------------------------------------------------- */

#define OTHER_OWNER "b983c153-7421-469a-addb-44fb92259a1b:1"

/* Another Redlock client holds the lock on masters 1 and 2, not on 0: each
 * round wins master 0 alone, which is short of the quorum, so the round
 * must give master 0 back at once and keep nothing between rounds. */
START_TEST(test_a_short_round_gives_back_its_partial_win_and_votes_busy_where_held) {
    start_pair(3000, 600, NULL);
    for (int i = 1; i < 3; i++)
        ck_assert_int_eq(harness_redisson_lock(master_port[i], LOCK_KEY, OTHER_OWNER, 30000), 1);
    /* harness_script_sha's buffer is static: copy each. A round that falls
     * short gives its wins back whole (hash-abandon: the owner's field goes,
     * whatever count it had). */
    char lock_sha[48], unlock_sha[48];
    snprintf(lock_sha, sizeof(lock_sha), "%s", harness_script_sha(master_port[0], "hash-lock"));
    snprintf(unlock_sha, sizeof(unlock_sha), "%s",
             harness_script_sha(master_port[0], "hash-abandon"));
    ck_assert(lock_sha[0] && unlock_sha[0]);
    char lock_cmd[96], unlock_cmd[96];
    snprintf(lock_cmd, sizeof(lock_cmd), "\"EVALSHA\" \"%s\"", lock_sha);
    snprintf(unlock_cmd, sizeof(unlock_cmd), "\"EVALSHA\" \"%s\"", unlock_sha);
    struct harness_monitor *m = harness_monitor_start(master_port[0]);
    ck_assert_ptr_nonnull(m);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 503);
    char *seen = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(seen);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "lock_timeout");
    ck_assert_msg(strcmp(vote_of(r.body, 0), "yes") == 0, "answer: %s", r.body);
    ck_assert_str_eq(vote_of(r.body, 1), "busy");
    ck_assert_str_eq(vote_of(r.body, 2), "busy");
    int rounds = (int)harness_json_num(r.body, "lock.attempts");
    ck_assert_int_ge(rounds, 2);
    /* No partial win kept: master 0 holds nothing, and every round that
     * won it gave it back. */
    ck_assert_int_eq(harness_redis_int(master_port[0], "EXISTS " LOCK_KEY), 0);
    int locks = harness_lines(seen, lock_cmd, NULL),
        unlocks = harness_lines(seen, unlock_cmd, NULL);
    ck_assert_msg(locks == rounds && unlocks == rounds,
                  "master 0: %d acquires and %d releases for %d rounds:\n%.1500s", locks, unlocks,
                  rounds, seen);
    free(seen);
    /* The other owner's lock is untouched. */
    for (int i = 1; i < 3; i++)
        ck_assert_int_eq(harness_redis_int(master_port[i], "HGET " LOCK_KEY " " OTHER_OWNER), 1);
    /* Every round counted: yes on master 0, busy on the others. */
    ck_assert_int_eq(votes(a_port, 0, "yes"), rounds);
    ck_assert_int_eq(votes(a_port, 0, "busy"), 0);
    ck_assert_int_eq(votes(a_port, 1, "busy"), rounds);
    ck_assert_int_eq(votes(a_port, 2, "busy"), rounds);
    ck_assert_int_eq(redlock_metric(a_port, "inventoryd_lock_timeouts_total"), 1);
    ck_assert_int_eq(audit("stock"), 200);
}
END_TEST

/* TTL 250 ms, and master 0 answers nothing for 300 ms (the node timeout):
 * every round ends past the lease, so its yes votes are worth nothing. */
START_TEST(test_a_quorum_reached_after_the_lease_ran_out_is_no_lock) {
    start_pair_timeout(250, 1500, 300);
    redisReply *p = harness_redis(master_port[0], "CLIENT PAUSE 5000 ALL");
    ck_assert_ptr_nonnull(p);
    freeReplyObject(p);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "lock_timeout");
    ck_assert_msg(strstr(r.body, "quorum reached too late") != NULL, "answer: %s", r.body);
    ck_assert_str_eq(vote_of(r.body, 1), "yes");
    ck_assert_str_eq(vote_of(r.body, 2), "yes");
    /* The late wins were given back. */
    ck_assert_int_eq(harness_redis_int(master_port[1], "EXISTS " LOCK_KEY), 0);
    ck_assert_int_eq(harness_redis_int(master_port[2], "EXISTS " LOCK_KEY), 0);
    ck_assert_int_eq(audit("stock"), 200);
}
END_TEST

/* Master 0 (the first in the list) holds every write for 300 ms; master 1
 * must still get the round's command at once, not after master 0 answers:
 * in what the masters ran (MONITOR), master 1 ran the round's acquire
 * before master 0 did. */
START_TEST(test_a_round_sends_to_every_master_before_reading_any_answer) {
    start_pair_timeout(3000, 3000, 1000);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    char lock_cmd[96];
    snprintf(lock_cmd, sizeof(lock_cmd), "\"EVALSHA\" \"%s\"",
             harness_script_sha(master_port[1], "hash-lock"));
    ck_assert(strlen(lock_cmd) > 20);
    struct harness_monitor *m0 = harness_monitor_start(master_port[0]);
    struct harness_monitor *m1 = harness_monitor_start(master_port[1]);
    ck_assert(m0 && m1);
    redisReply *p = harness_redis(master_port[0], "CLIENT PAUSE 300 WRITE");
    ck_assert_ptr_nonnull(p);
    freeReplyObject(p);
    int64_t t0 = mclock_ms();
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    int64_t took = mclock_ms() - t0;
    char *seen0 = harness_monitor_stop(m0), *seen1 = harness_monitor_stop(m1);
    ck_assert(seen0 && seen1);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(harness_json_num(r.body, "lock.attempts"), 1);
    ck_assert_str_eq(vote_of(r.body, 0), "yes");
    ck_assert_msg(took >= 200, "the sale took %lld ms: master 0 was not paused", (long long)took);
    double at[2] = {0, 0};
    const char *seen[2] = {seen0, seen1};
    for (int i = 0; i < 2; i++) {
        const char *line = strstr(seen[i], lock_cmd);
        while (line && line > seen[i] && line[-1] != '\n') line--;
        ck_assert_msg(line != NULL, "master %d got no acquire:\n%.1500s", i, seen[i]);
        at[i] = strtod(line, NULL);
    }
    ck_assert_msg(at[1] < at[0],
                  "master 1 ran the acquire %.1f ms after master 0, which was paused "
                  "300 ms: the round was not pipelined",
                  (at[1] - at[0]) * 1000);
    free(seen0);
    free(seen1);
}
END_TEST

/* ---- the watchdog on a quorum ---------------------------------------------- */

START_TEST(test_the_watchdog_renews_on_every_master_while_the_sale_works) {
    start_pair(600, 5000, NULL);
    struct harness_bg a;
    int64_t t0 = mclock_ms();
    harness_bg_start(&a, a_port, "/inventory/sale/redlock?hold_ms=1800", 0);
    for (int ms = 700; ms <= 1600; ms += 300) {
        int64_t left = t0 + ms - mclock_ms();
        if (left > 0) mclock_sleep_ms((int)left);
        for (int i = 0; i < 3; i++) {
            long long pttl = harness_redis_int(master_port[i], "PTTL " LOCK_KEY);
            ck_assert_msg(pttl > 100, "master %d: PTTL at %d ms was %lld: not renewed", i, ms,
                          pttl);
        }
    }
    harness_bg_join(&a);
    ck_assert_int_eq(a.status, 200);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "sold");
    ck_assert_int_ge(redlock_metric(a_port, "inventoryd_lock_renewals_total"), 5);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(harness_redis_int(master_port[i], "EXISTS " LOCK_KEY), 0);
}
END_TEST

/* The lock vanishes from `gone` masters once the sale holds it there, early
 * in its 900 ms (TTL 600: the watchdog renews every 200 ms). With one gone,
 * two renew: a quorum, the sale sells. With two gone, it is lost: 409 and
 * nothing written. */
static struct harness_bg sale_losing(int gone) {
    struct harness_bg a;
    harness_bg_start(&a, a_port, "/inventory/sale/redlock?hold_ms=900", 0);
    for (int i = 0; i < gone; i++) {
        ck_assert_msg(harness_redis_until(master_port[2 - i], 1, 5000, "EXISTS " LOCK_KEY),
                      "the sale never took the lock on master %d", 2 - i);
        ck_assert_int_eq(harness_redis_int(master_port[2 - i], "DEL " LOCK_KEY), 1);
    }
    harness_bg_join(&a);
    return a;
}

START_TEST(test_a_renewal_short_of_a_quorum_loses_the_lock_and_the_sale_writes_nothing) {
    start_pair(600, 5000, NULL);
    struct harness_bg a = sale_losing(1);
    ck_assert_msg(a.status == 200, "one master lost: %d %s", a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "sold");
    ck_assert_int_eq(audit("stock"), 199);
    a = sale_losing(2);
    ck_assert_msg(a.status == 409, "two masters lost: %d %s", a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "lock_lost");
    ck_assert_int_eq(audit("stock"), 199);
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(redlock_metric(a_port, "inventoryd_lost_locks_total"), 1);
}
END_TEST

/* ---- the FIFO gate ------------------------------------------------------------ */

/* Six sales, 60 ms apart, queue behind another client's lock (each is shown
 * to have come in before the lock was freed, and the first to have met it
 * held: harness_queued_before); once it is freed they are served one by
 * one in the order they came in (the gate:
 * none starves): the units, taken in the order of their arrival (their
 * order ids, harness_arrival), go down one by one; and none but the first
 * sent an acquire while it waited. Sales 60 ms apart may come in out of
 * their sending order on a loaded machine, as in the ladder's redisson
 * case. */
START_TEST(test_redlock_serves_the_sales_of_one_process_in_arrival_order) {
    start_pair(3000, 8000, NULL);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(harness_redisson_lock(master_port[i], LOCK_KEY, OTHER_OWNER, 30000), 1);
    enum { N = 6 };
    struct harness_bg s[N];
    for (int i = 0; i < N; i++) {
        harness_bg_start(&s[i], a_port, "/inventory/sale/redlock", 0);
        mclock_sleep_ms(60);
    }
    mclock_sleep_ms(1000); /* every one in, on a loaded machine too (as the ladder's) */
    int64_t freed = mclock_ms();
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(harness_redisson_unlock(master_port[i], LOCK_KEY, OTHER_OWNER), 1);
    for (int i = 0; i < N; i++) harness_bg_join(&s[i]);
    char why[1200];
    ck_assert_msg(harness_queued_before(s, 0, N, freed, why, sizeof(why)), "%s", why);
    ck_assert_msg(harness_served_in_arrival_order(s, 0, N, 200, why, sizeof(why)), "%s", why);
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
 * lock is even in the replica's socket), the master is killed once A holds
 * the lock there, the replica resumes and is promoted; B, whose Redis is
 * now the replica, sells. */
static void failover(const char *strategy, int master, pid_t master_proc, int replica_port,
                     pid_t replica_pid, struct harness_bg *a, struct harness_bg *b) {
    char pa[128], pb[128];
    snprintf(pa, sizeof(pa), "/inventory/sale/%s?hold_ms=1500", strategy);
    snprintf(pb, sizeof(pb), "/inventory/sale/%s", strategy);
    kill(replica_pid, SIGSTOP);
    redisReply *cut = harness_redis(master, "CLIENT KILL TYPE replica");
    freeReplyObject(cut);
    harness_bg_start(a, a_port, pa, 0);
    int held = harness_redis_until(master, 1, 5000, "EXISTS " LOCK_KEY); /* A holds it there */
    kill(master_proc, SIGKILL);
    waitpid(master_proc, NULL, 0);
    kill(replica_pid, SIGCONT);
    redisReply *r = harness_redis(replica_port, "REPLICAOF NO ONE");
    freeReplyObject(r);
    /* The hazard really happened: A held the lock on the master, and the
     * promoted replica never heard of it. */
    ck_assert_msg(held, "A did not hold the lock on the master when it was killed");
    ck_assert_msg(harness_redis_int(replica_port, "EXISTS " LOCK_KEY) == 0,
                  "the lock reached the replica: the failover lost nothing");
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
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r),
                     200);
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
    ck_assert_int_lt(b.sent_ms + b.took_ms, a.sent_ms + a.took_ms); /* B done before A let go */
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
    const char *sa[] = {rp,  nodes, "lock.ttl-ms=3000", "lock.wait-ms=3000", "faults.enabled=true",
                        NULL};
    const char *sb[] = {
        rp, nodes_b, "lock.ttl-ms=3000", "lock.wait-ms=3000", "faults.enabled=true", NULL};
    masters_ready(3000);
    struct httpc_response r;
    a_port = harness_free_port();
    a_pid = harness_inventoryd_start(a_port, sa);
    b_port = harness_free_port();
    b_pid = harness_inventoryd_start(b_port, sb);
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r),
                     200);
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
    tcase_add_test(q, test_redlock_serves_the_sales_of_one_process_in_arrival_order);
    suite_add_tcase(s, q);
    TCase *rd = tcase_create("Rounds");
    tcase_add_checked_fixture(rd, setup, teardown);
    tcase_set_timeout(rd, 60);
    tcase_add_test(rd, test_a_short_round_gives_back_its_partial_win_and_votes_busy_where_held);
    tcase_add_test(rd, test_a_quorum_reached_after_the_lease_ran_out_is_no_lock);
    tcase_add_test(rd, test_a_round_sends_to_every_master_before_reading_any_answer);
    tcase_add_test(rd, test_the_watchdog_renews_on_every_master_while_the_sale_works);
    tcase_add_test(rd, test_a_renewal_short_of_a_quorum_loses_the_lock_and_the_sale_writes_nothing);
    suite_add_tcase(s, rd);
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
