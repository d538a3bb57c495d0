/* check_http.c -- the inventoryd binary over real HTTP, against a real
 * redis-server; every process is started and stopped by the harness. */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <cjson/cJSON.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check_main.h"
#include "harness.h"
#include "strategy.h"
#include "lock.h"
#include "mclock.h"
#include "route.h"

static pid_t redis_pid, inst_pid;
static int redis_port, inst_port;
static char redis_set[64];
static const char *loop_set = "server.event-loop=epoll"; /* setup_poll: poll */

static void start_instance(pid_t *pid, int *port, int faults) {
    *port = harness_free_port();
    const char *sets[] = {redis_set,
                          "redis.timeout=500",
                          "lock.wait-ms=3000",
                          faults ? "faults.enabled=true" : "faults.enabled=false",
                          loop_set,
                          NULL};
    *pid = harness_inventoryd_start(*port, sets);
    ck_assert_int_gt(*pid, 0);
}

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    snprintf(redis_set, sizeof(redis_set), "redis.port=%d", redis_port);
    start_instance(&inst_pid, &inst_port, 1);
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r), 200);
}

static void teardown(void) {
    harness_stop(inst_pid);
    if (redis_pid > 0) kill(redis_pid, SIGCONT); /* a test may have frozen it */
    harness_stop(redis_pid);
    loop_set = "server.event-loop=epoll";
}

/* How many epoll instances pid holds open (its descriptors that name
 * anon_inode:[eventpoll]): one a loop with server.event-loop=epoll, none
 * with poll. */
static int epoll_fds(pid_t pid) {
    char dir[64], path[PATH_MAX], target[64];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        ssize_t len = readlink(path, target, sizeof(target) - 1);
        if (len > 0 && (target[len] = '\0', strcmp(target, "anon_inode:[eventpoll]") == 0)) n++;
    }
    closedir(d);
    return n;
}

/* The Core case's instance with server.event-loop=poll; asserts that its
 * loops hold no epoll instance, so the tests run on poll indeed. */
static void setup_poll(void) {
    loop_set = "server.event-loop=poll";
    setup();
    ck_assert_int_eq(epoll_fds(inst_pid), 0);
}

/* Parses the last answer's body as JSON; the caller frees it. */
static cJSON *json(const struct httpc_response *r) {
    cJSON *j = cJSON_Parse(r->body);
    ck_assert_msg(j != NULL, "not JSON: %s", r->body);
    return j;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    ck_assert_msg(cJSON_IsString(v), "no string \"%s\"", k);
    return v->valuestring;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    ck_assert_msg(cJSON_IsNumber(v), "no number \"%s\"", k);
    return v->valuedouble;
}

/* Asserts an error answer: the code, JSON with the status word and a sentence. */
static void expect_error(int code, const char *word, const char *method, const char *path,
                         const char *body) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, method, path, NULL, body, &r), code);
    ck_assert_ptr_nonnull(strstr(r.content_type, "application/json"));
    cJSON *j = json(&r);
    ck_assert_str_eq(str(j, "status"), word);
    ck_assert_int_gt(strlen(str(j, "error")), 10);
    cJSON_Delete(j);
}

/* An order id's sequence number, after asserting its form: the instance's
 * 8 hex digits, a '-', and a decimal number from 1 (prefix gets the first
 * part, to compare two orders' instances). */
static long order_seq(const char *order, char prefix[9]) {
    ck_assert_msg(strlen(order) > 9 && strspn(order, "0123456789abcdef") == 8 && order[8] == '-',
                  "order '%s' is not <8 hex digits>-<n>", order);
    const char *n = order + 9;
    ck_assert_msg(strspn(n, "0123456789") == strlen(n) && n[0] != '0', "order '%s': bad number",
                  order);
    memcpy(prefix, order, 8);
    prefix[8] = '\0';
    return atol(n);
}

START_TEST(test_a_sale_answers_the_contract_json) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    ck_assert_str_eq(str(j, "status"), "sold");
    ck_assert_int_eq(num(j, "remaining"), 199);
    ck_assert_int_eq(num(j, "unit"), 200);
    char inst1[9], inst2[9];
    long seq1 = order_seq(str(j, "order"), inst1);
    ck_assert_str_eq(str(j, "strategy"), "atomic");
    ck_assert_int_eq(num(j, "port"), inst_port);
    const cJSON *lk = cJSON_GetObjectItemCaseSensitive(j, "lock");
    ck_assert_int_ge(num(lk, "attempts"), 1);
    ck_assert_int_ge(num(lk, "wait_ms"), 0);
    cJSON_Delete(j);
    ck_assert_int_eq(harness_http(inst_port, "POST", "/inventory/sale/local", NULL, NULL, &r), 200);
    j = json(&r);
    ck_assert_str_eq(str(j, "status"), "sold");
    ck_assert_int_eq(num(j, "remaining"), 198);
    ck_assert_int_eq(order_seq(str(j, "order"), inst2), seq1 + 1); /* the next order */
    ck_assert_str_eq(inst2, inst1);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_the_demo_path_and_text_format_give_the_demo_line) {
    struct httpc_response r;
    char want[128];
    ck_assert_int_eq(harness_http(inst_port, "GET",
                                  "/redis/distributed/lock/inventory/sale?format=text", NULL, NULL,
                                  &r),
                     200);
    snprintf(want, sizeof(want), "成功卖出一个商品,库存剩余: 199\t服务端口号:%d", inst_port);
    ck_assert_str_eq(r.body, want);
    ck_assert_ptr_nonnull(strstr(r.content_type, "text/plain"));
    ck_assert_int_eq(
        harness_http(inst_port, "GET", "/inventory/sale", "Accept: text/plain\r\n", NULL, &r), 200);
    snprintf(want, sizeof(want), "成功卖出一个商品,库存剩余: 198\t服务端口号:%d", inst_port);
    ck_assert_str_eq(r.body, want);
    harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":0}", &r);
    ck_assert_int_eq(
        harness_http(inst_port, "GET", "/inventory/sale/local?format=text", NULL, NULL, &r), 200);
    ck_assert_str_eq(r.body, "商品卖完了");
}
END_TEST

START_TEST(test_reset_inventory_and_audit_agree_with_the_sales_made) {
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\": 5}", &r), 200);
    for (int i = 0; i < 7; i++)
        harness_http(inst_port, "GET", "/inventory/sale/local", NULL, NULL, &r);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    ck_assert_int_eq(num(j, "stock"), 0);
    cJSON_Delete(j);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/audit", NULL, NULL, &r), 200);
    j = json(&r);
    ck_assert_int_eq(num(j, "stock"), 0);
    ck_assert_int_eq(num(j, "initial"), 5);
    ck_assert_int_eq(num(j, "sold"), 5);
    ck_assert_int_eq(num(j, "sold_twice"), 0);
    ck_assert_int_eq(num(j, "oversold_units"), 0);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "oversold")));
    ck_assert_int_eq(num(j, "violations"), 0);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_strategies_healthz_and_metrics_answer) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/strategies", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "strategies");
    ck_assert_int_eq(cJSON_GetArraySize(list), strategy_count());
    for (int i = 0; strategies[i].name; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        ck_assert_str_eq(str(e, "name"), strategies[i].name);
        ck_assert_int_gt(strlen(str(e, "flaw")), 0);
    }
    cJSON_Delete(j);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/healthz", NULL, NULL, &r), 200);
    harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/metrics", NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.content_type, "text/plain"));
    ck_assert_ptr_nonnull(strstr(r.body, "# TYPE inventoryd_sales_total counter\n"));
    ck_assert_ptr_nonnull(strstr(r.body, "inventoryd_sales_total{strategy=\"atomic\"} 1\n"));
    ck_assert_int_eq(
        harness_metric(inst_port, "inventoryd_lock_wait_ms_count{strategy=\"atomic\"}"), 1);
    ck_assert_int_eq(harness_metric(inst_port, "inventoryd_lock_wait_ms_count{strategy=\"local\"}"),
                     0);
    ck_assert_int_eq(harness_metric(inst_port, "inventoryd_sales_total{strategy=\"local\"}"), 0);
}
END_TEST

START_TEST(test_local_oversells_across_two_instances) {
    pid_t b_pid;
    int b_port;
    start_instance(&b_pid, &b_port, 1);
    /* The first sale holds its instance's mutex 400 ms between read and
     * write; the second, on the other instance, has a mutex of its own. */
    struct harness_bg a, b;
    harness_bg_start(&a, inst_port, "/inventory/sale/local?hold_ms=400", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "the first sale never went inside");
    harness_bg_start(&b, b_port, "/inventory/sale/local", 0);
    harness_bg_join(&a);
    harness_bg_join(&b);
    harness_stop(b_pid);
    ck_assert_int_eq(a.status, 200);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_eq(harness_json_num(a.body, "unit"), harness_json_num(b.body, "unit"));
    struct httpc_response r;
    harness_http(inst_port, "GET", "/inventory/audit", NULL, NULL, &r);
    cJSON *j = json(&r);
    ck_assert_int_eq(num(j, "sold"), 2);
    ck_assert_int_eq(num(j, "sold_twice"), 1);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "oversold")));
    ck_assert_int_eq(num(j, "violations"), 1);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_a_sale_waiting_for_a_lock_does_not_stall_other_requests) {
    struct harness_bg holder, waiter;
    harness_bg_start(&holder, inst_port, "/inventory/sale/local?hold_ms=1500", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "the holder never got inside");
    harness_bg_start(&waiter, inst_port, "/inventory/sale/local", 0);
    for (int i = 0; i < 5; i++) {
        struct httpc_response r;
        int64_t t0 = mclock_ms();
        ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory", NULL, NULL, &r), 200);
        ck_assert_int_eq(harness_http(inst_port, "GET", "/healthz", NULL, NULL, &r), 200);
        ck_assert_int_lt(mclock_ms() - t0, 500);
    }
    harness_bg_join(&holder);
    harness_bg_join(&waiter);
    ck_assert_int_eq(holder.status, 200);
    ck_assert_int_eq(waiter.status, 200);
    ck_assert_int_ge(waiter.took_ms, 1000); /* it did wait for the holder */
    /* Both sales landed in the histograms, where they fell: the holder held
     * 1.5 s and the waiter far less (under a second: it sells one unit); the
     * holder waited for nothing (under a second), the waiter for most of the
     * holder's hold (the sum). No bound tighter than that: a sanitized build
     * is slow. */
    const char *hist[] = {"wait", "hold"};
    for (int i = 0; i < 2; i++) {
        char series[128];
        snprintf(series, sizeof(series), "inventoryd_lock_%s_ms_count{strategy=\"local\"}",
                 hist[i]);
        ck_assert_msg(harness_metric(inst_port, series) == 2, "%s is %lld", series,
                      harness_metric(inst_port, series));
        snprintf(series, sizeof(series),
                 "inventoryd_lock_%s_ms_bucket{strategy=\"local\",le=\"1000\"}", hist[i]);
        /* hold: the waiter only; wait: the holder at least */
        long long under = harness_metric(inst_port, series);
        ck_assert_msg(i == 1 ? under == 1 : under >= 1, "%s is %lld", series, under);
    }
    ck_assert_int_ge(harness_metric(inst_port, "inventoryd_lock_wait_ms_sum{strategy=\"local\"}"),
                     1000);
    ck_assert_int_ge(harness_metric(inst_port, "inventoryd_lock_hold_ms_sum{strategy=\"local\"}"),
                     1500);
}
END_TEST

/* The instance's resident memory, in KB (0 when unreadable). */
static long rss_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

/* Each client opens its connection in the first round and must still have
 * it in the second (the client would reopen a closed one silently, so the
 * number of connects it made is what tells). Each idle connection costs
 * the instance its memory pool in RSS (libmicrohttpd clears all of it after
 * every request), and the default pool (16 KB) keeps that under 24 KB a
 * connection: 10,000 idle ones under 200 MB (loadtest/idle-bound.sh); once
 * they close, their pools are given back. Not under AddressSanitizer, whose
 * allocator pads every block and keeps freed ones. */
START_TEST(test_three_hundred_keep_alive_connections_are_held_at_once) {
    enum { N = 300 };
    struct httpc **c = calloc(N, sizeof(*c));
    long rss0 = rss_kb(inst_pid);
    ck_assert_int_gt(rss0, 0);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            if (!c[i]) c[i] = httpc_create("127.0.0.1", inst_port, 10000);
            struct httpc_response r;
            ck_assert_msg(httpc_request(c[i], "GET", "/inventory", NULL, NULL, &r) == 0,
                          "connection %d: %s", i, httpc_errstr(c[i]));
            ck_assert_int_eq(r.status, 200);
        }
    }
    for (int i = 0; i < N; i++)
        ck_assert_msg(httpc_connects(c[i]) == 1,
                      "client %d connected %ld times: the server "
                      "closed its keep-alive connection",
                      i, httpc_connects(c[i]));
    long held = rss_kb(inst_pid) - rss0;
    /* The last KEEP opened stay open: in a heap, their pools above the
     * others would keep those resident (glibc trims a heap only from its
     * top), whichever of the loops (each with its own heap) took them. */
    enum { KEEP = 8 };
    for (int i = 0; i < N - KEEP; i++) httpc_free(c[i]);
    if (HARNESS_SANITIZED) {
        for (int i = N - KEEP; i < N; i++) httpc_free(c[i]);
        free(c);
        return;
    }
    /* The window: the connections do hold their pools (half a pool each at
     * least), so that their release below has something to give back. */
    ck_assert_msg(held * 1024 / N >= 8 * 1024 && held * 1024 / N < 24 * 1024,
                  "each idle connection costs %ld bytes of RSS", held * 1024 / N);
    /* Closed, the connections give their pools back: RSS follows the
     * connections open now, not the most ever open. */
    long left = held;
    for (int64_t deadline = mclock_ms() + 3000; mclock_ms() < deadline && left > held / 4;
         mclock_sleep_ms(50))
        left = rss_kb(inst_pid) - rss0;
    for (int i = N - KEEP; i < N; i++) httpc_free(c[i]);
    free(c);
    ck_assert_msg(left <= held / 4, "%d connections held %ld kB; %d closed, %ld kB stay", N, held,
                  N - KEEP, left);
}
END_TEST

START_TEST(test_an_unknown_strategy_is_404_and_lists_the_known_ones) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/etcd", NULL, NULL, &r), 404);
    cJSON *j = json(&r);
    ck_assert_str_eq(str(j, "status"), "unknown_strategy");
    ck_assert_ptr_nonnull(strstr(str(j, "error"), "etcd"));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "strategies")),
                     strategy_count());
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_unknown_paths_and_wrong_methods_get_json_errors) {
    expect_error(404, "not_found", "GET", "/nowhere", NULL);
    expect_error(404, "not_found", "GET", "/inventory/sale/a/b", NULL);
    /* A 405 is JSON too, names what is allowed, and says so in Allow. */
    static const struct {
        const char *method, *path, *allow;
    } wrong[] = {
        {"DELETE", "/inventory", "GET"},
        {"GET", "/inventory/reset", "POST"},
        {"POST", "/metrics", "GET"},
        {"PUT", "/inventory/sale/atomic", "GET, POST"},
    };
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        expect_error(405, "method_not_allowed", wrong[i].method, wrong[i].path, NULL);
        struct httpc_response r;
        ck_assert_int_eq(harness_http(inst_port, wrong[i].method, wrong[i].path, NULL, NULL, &r),
                         405);
        ck_assert_str_eq(r.allow, wrong[i].allow);
        ck_assert_msg(strstr(harness_json_str(r.body, "error"), wrong[i].allow) != NULL,
                      "%s %s: %s", wrong[i].method, wrong[i].path, r.body);
    }
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200); /* nothing sold */
}
END_TEST

START_TEST(test_a_bad_reset_is_400_and_changes_nothing) {
    const char *bodies[] = {"",
                            "abc",
                            "{}",
                            "{\"stock\":-1}",
                            "{\"stock\":1.5}",
                            "{\"stock\":10000000000}",
                            "{\"stock\":\"5\"}",
                            "[200]",
                            NULL};
    for (int i = 0; bodies[i]; i++)
        expect_error(400, "bad_request", "POST", "/inventory/reset",
                     bodies[i][0] ? bodies[i] : NULL);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200);
    char big[8192];
    memset(big, ' ', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    expect_error(413, "payload_too_large", "POST", "/inventory/reset", big);
}
END_TEST

START_TEST(test_a_reset_whose_item_holds_an_escaped_nul_is_400_and_resets_nothing) {
    /* cJSON ends the string at the NUL: "inventory001\u0000:sold" would read as
     * inventory001, a name the checks accept. */
    const char *bodies[] = {"{\"stock\":5,\"item\":\"inventory001\\u0000:sold\"}",
                            "{\"stock\":5,\"item\":\"inventory001\\u0000\"}",
                            "{\"stock\":5,\"item\":\"\\u0000inventory001\"}", NULL};
    for (int i = 0; bodies[i]; i++)
        expect_error(400, "bad_request", "POST", "/inventory/reset", bodies[i]);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001:initial"), 200);
    /* An escaped backslash before u0000 is no NUL: that item is refused for its
     * characters, and a plain reset still works. */
    expect_error(400, "bad_request", "POST", "/inventory/reset",
                 "{\"stock\":5,\"item\":\"a\\\\u0000\"}");
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "POST", "/inventory/reset", NULL,
                                  "{\"stock\":5,\"item\":\"inventory001\"}", &r),
                     200);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 5);
}
END_TEST

START_TEST(test_fault_parameters_are_checked_and_refused_while_faults_are_off) {
    expect_error(400, "bad_request", "GET", "/inventory/sale/local?hold_ms=99999999", NULL);
    expect_error(400, "bad_request", "GET", "/inventory/sale/local?nested=x", NULL);
    pid_t p;
    int port;
    start_instance(&p, &port, 0);
    struct httpc_response r;
    int code = harness_http(port, "GET", "/inventory/sale/local?hold_ms=10", NULL, NULL, &r);
    harness_stop(p);
    ck_assert_int_eq(code, 403);
    ck_assert_ptr_nonnull(strstr(r.body, "faults.enabled=true"));
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200);
}
END_TEST

/* Runs inventoryd with args, returning its exit code and stderr in out. */
static int run_binary(const char *args, char *out, size_t outlen) {
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s 2>&1", INVENTORYD_BIN, args);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_a_bad_config_value_stops_start_up_naming_the_key_and_line) {
    char path[] = "/tmp/inventoryd-test-XXXXXX";
    int fd = mkstemp(path);
    const char text[] = "# test\nserver.port=3786\nlock.ttl-ms=10s\n";
    ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    char out[2048], args[512];
    snprintf(args, sizeof(args), "--config %s", path);
    ck_assert_int_eq(run_binary(args, out, sizeof(out)), 2);
    char where[600];
    snprintf(where, sizeof(where), "%s:3: lock.ttl-ms", path);
    ck_assert_msg(strstr(out, where) != NULL, "got: %s", out);
    unlink(path);
    ck_assert_int_eq(run_binary("--set server.port=70000", out, sizeof(out)), 2);
    ck_assert_ptr_nonnull(strstr(out, "server.port"));
    ck_assert_int_eq(run_binary("--set lock.strategy=etcd", out, sizeof(out)), 2);
    ck_assert_ptr_nonnull(strstr(out, "lock.strategy"));
}
END_TEST

START_TEST(test_list_routes_prints_each_row_of_the_route_table_and_starts_nothing) {
    char out[8192], want[512], flags[64];
    ck_assert_int_eq(run_binary("--list-routes --set server.port=70000", out, sizeof(out)), 0);
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')) != NULL; p++) lines++;
    ck_assert_int_eq(lines, ROUTE_COUNT - 1);
    for (int id = ROUTE_NOT_FOUND + 1; id < ROUTE_COUNT; id++) {
        const struct route_row *row = &route_table[id];
        snprintf(want, sizeof(want), "%s\t%s\t%s\t%s\n", row->methods, row->pattern,
                 route_flags_text(row->flags, flags, sizeof(flags)), row->doc);
        ck_assert_msg(strstr(out, want) != NULL, "no line '%s' in: %s", want, out);
    }
    ck_assert_ptr_nonnull(strstr(out, "GET, POST\t/lab/runs\tadmin-post,lab\t"));
}
END_TEST

/* An "X-Big: aaa..." header line of kb KB in buf (kb * 1024 + 32 bytes). */
static const char *big_header(char *buf, int kb) {
    int n = sprintf(buf, "X-Big: ");
    memset(buf + n, 'a', (size_t)kb * 1024);
    memcpy(buf + n + kb * 1024, "\r\n", 3);
    return buf;
}

/* server.connection-memory-kb reaches libmicrohttpd. At the default 16 KB,
 * an 11 KB header (under the 12 KB the service accepts) is served and a
 * 14 KB one gets the service's JSON 431; at 12 KB the 14 KB header no
 * longer fits, and libmicrohttpd answers its own 431, not JSON. */
START_TEST(test_server_connection_memory_kb_bounds_what_a_request_may_hold) {
    static char header[14 * 1024 + 32];
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(inst_port, "GET", "/strategies", big_header(header, 11), NULL, &r), 200);
    ck_assert_int_eq(
        harness_http(inst_port, "GET", "/strategies", big_header(header, 14), NULL, &r), 431);
    ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"headers_too_large\""));
    int small_port = harness_free_port();
    const char *sets[] = {redis_set, "server.connection-memory-kb=12", NULL};
    pid_t small = harness_inventoryd_start(small_port, sets);
    ck_assert_int_gt(small, 0);
    int code = harness_http(small_port, "GET", "/strategies", header, NULL, &r);
    int json = code && strstr(r.body, "\"status\"") != NULL;
    int plain = harness_http(small_port, "GET", "/strategies", NULL, NULL, &r);
    harness_stop(small);
    ck_assert_msg(code == 431 && !json, "at 12 KB the 14 KB header got %d %.200s", code,
                  code ? r.body : "");
    ck_assert_int_eq(plain, 200);
}
END_TEST

START_TEST(test_a_port_in_use_is_a_clear_error) {
    char out[2048], args[128];
    snprintf(args, sizeof(args), "--set server.port=%d", inst_port);
    ck_assert_int_eq(run_binary(args, out, sizeof(out)), 3);
    ck_assert_msg(strstr(out, "cannot listen") != NULL, "got: %s", out);
}
END_TEST

START_TEST(test_redis_stopped_gives_503_then_sales_recover) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/local", NULL, NULL, &r), 200);
    harness_stop(redis_pid);
    int64_t t0 = mclock_ms();
    expect_error(503, "backend_unavailable", "GET", "/inventory/sale/local", NULL);
    expect_error(503, "backend_unavailable", "GET", "/inventory/sale/atomic", NULL);
    expect_error(503, "backend_unavailable", "GET", "/healthz", NULL);
    ck_assert_int_lt(mclock_ms() - t0, 3 * 500 + 1000);
    redis_pid = harness_redis_start(redis_port, NULL);
    ck_assert_int_gt(redis_pid, 0);
    ck_assert_int_eq(harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":3}", &r),
                     200);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/local", NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"sold\""));
}
END_TEST

/* Reaps the instance (inst_pid, then 0) and asserts that it exited 0. */
static void expect_clean_exit(void) {
    int st = 0;
    ck_assert_int_eq(waitpid(inst_pid, &st, 0), inst_pid);
    inst_pid = 0;
    ck_assert_msg(WIFEXITED(st), "the instance died of signal %d",
                  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    ck_assert_int_eq(WEXITSTATUS(st), 0);
}

/* A sale holds its lock 800 ms; once it is inside, the signal. While the sale
 * finishes, the port takes no new connection; then the process exits 0. */
static void a_sale_in_flight_finishes_through(int sig) {
    struct harness_bg sale;
    harness_bg_start(&sale, inst_port, "/inventory/sale/local?hold_ms=800", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "the sale never went inside");
    kill(inst_pid, sig);
    mclock_sleep_ms(200);
    int refused = harness_refused(inst_port);
    harness_bg_join(&sale);
    ck_assert_msg(refused, "a new connection was accepted during the shutdown");
    expect_clean_exit();
    ck_assert_int_eq(sale.status, 200);
    ck_assert_ptr_nonnull(strstr(sale.body, "\"status\":\"sold\""));
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 1);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001:holders"), 0);
}

START_TEST(test_sigterm_lets_a_sale_in_flight_finish_then_exits_cleanly) {
    a_sale_in_flight_finishes_through(SIGTERM);
}
END_TEST

START_TEST(test_sigint_lets_a_sale_in_flight_finish_then_exits_cleanly) {
    a_sale_in_flight_finishes_through(SIGINT);
}
END_TEST

/* After a lost reply: two sales by path sell units unit and unit - 1 (each
 * reads its own reply, not a stale one), and the audit counts sold in all,
 * none twice. */
static void next_sales_read_their_own_replies(const char *path, int unit, int sold) {
    struct httpc_response r;
    for (int u = unit; u >= unit - 1; u--) {
        ck_assert_int_eq(harness_http(inst_port, "GET", path, NULL, NULL, &r), 200);
        ck_assert_msg(harness_json_num(r.body, "unit") == u, "after the lost reply: %s", r.body);
    }
    ck_assert_int_eq(harness_audit(inst_port, "sold_twice"), 0);
    ck_assert_int_eq(harness_audit(inst_port, "sold"), sold);
}

/* Redis is frozen (SIGSTOP) after the sale read the stock and before it
 * writes: the SET and RPUSH reach Redis's socket, their replies do not come
 * within redis.timeout (500 ms). Thawed later, Redis applies them: the
 * write happened, its reply was lost. The sale must answer 503, never send
 * the write again, and drop that connection (a later sale on it would read
 * the stale replies). */
START_TEST(test_a_sale_whose_write_reply_was_lost_answers_503_and_is_never_sent_again) {
    long long pushes = harness_redis_calls(redis_port, "rpush");
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    struct harness_bg sale;
    harness_bg_start(&sale, inst_port, "/inventory/sale/local?hold_ms=600", 0);
    /* inside: its probe entry, and the stock's read with it, are done */
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "the sale never went inside");
    kill(redis_pid, SIGSTOP);
    harness_bg_join(&sale);
    mclock_sleep_ms(300); /* any re-send would have gone out by now */
    kill(redis_pid, SIGCONT);
    mclock_sleep_ms(300);
    ck_assert_msg(sale.status == 503, "the sale: %d %s", sale.status, sale.body);
    ck_assert_str_eq(harness_json_str(sale.body, "status"), "backend_unavailable");
    ck_assert_int_ge(sale.took_ms, 600 + 400); /* it waited for the reply */
    /* Written once: the lost reply's write, and nothing more. */
    char *seen = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(seen);
    /* The write is one script: MONITOR shows its own calls, in its case. */
    int sets = harness_lines(seen, "\"SET\" \"inventory001\" ", NULL) +
               harness_lines(seen, "\"set\" \"inventory001\" ", NULL);
    int rpushes = harness_lines(seen, "\"RPUSH\" \"inventory001:sold\"", NULL) +
                  harness_lines(seen, "\"rpush\" \"inventory001:sold\"", NULL);
    ck_assert_msg(sets == 1 && rpushes == 1, "%d SET and %d RPUSH of the stock:\n%.1500s", sets,
                  rpushes, seen);
    free(seen);
    ck_assert_int_eq(harness_redis_calls(redis_port, "rpush") - pushes, 1);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 1);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 199);
    /* The next sales read their own replies: units 199 and 198. */
    next_sales_read_their_own_replies("/inventory/sale/local", 199, 3);
}
END_TEST

/* The same for atomic sales, sent pipelined on one connection (made by a
 * first sale): Redis is frozen with three of them written to it, and no
 * reply comes within redis.timeout (500 ms). Each answers 503; thawed,
 * Redis applies the three, each once; the connection they went on is
 * dropped, so the next sale reads its own reply, not a stale one. */
/* A first atomic sale (the pipeline's connection is made), then Redis
 * frozen and three atomic sales started into sale[]. Returns Redis's count
 * of EVALSHA calls before the three. */
static long long freeze_with_three_pipelined_sales(struct harness_bg sale[3]) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
    long long evals = harness_redis_calls(redis_port, "evalsha");
    kill(redis_pid, SIGSTOP);
    for (int i = 0; i < 3; i++) harness_bg_start(&sale[i], inst_port, "/inventory/sale/atomic", 0);
    return evals;
}

START_TEST(test_pipelined_sales_whose_replies_were_lost_answer_503_and_are_never_sent_again) {
    struct harness_bg sale[3];
    long long evals = freeze_with_three_pipelined_sales(sale);
    for (int i = 0; i < 3; i++) harness_bg_join(&sale[i]);
    mclock_sleep_ms(300); /* any re-send would have gone out by now */
    kill(redis_pid, SIGCONT);
    mclock_sleep_ms(300);
    /* First the window: the three were written once each before the freeze
     * ended, and applied (the fault hit sales in flight, not unsent ones). */
    ck_assert_int_eq(harness_redis_calls(redis_port, "evalsha") - evals, 3);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 4);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 196);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(sale[i].status == 503, "sale %d: %d %s", i, sale[i].status, sale[i].body);
        ck_assert_str_eq(harness_json_str(sale[i].body, "status"), "backend_unavailable");
        ck_assert_int_ge(sale[i].took_ms, 450); /* it waited for the reply */
    }
    next_sales_read_their_own_replies("/inventory/sale/atomic", 196, 6);
}
END_TEST

/* Atomic sales sent pipelined (on the connection a first sale made),
 * Redis frozen, then SIGTERM: the process waits for their replies (Redis
 * thawed 300 ms later, within redis.timeout), answers them, and exits 0. */
START_TEST(test_sigterm_answers_the_pipelined_sales_in_flight_before_exiting) {
    struct harness_bg sale[3];
    long long evals = freeze_with_three_pipelined_sales(sale);
    mclock_sleep_ms(100);
    kill(inst_pid, SIGTERM);
    mclock_sleep_ms(200);
    kill(redis_pid, SIGCONT);
    for (int i = 0; i < 3; i++) harness_bg_join(&sale[i]);
    /* First the window: the three were sent, and each was still waiting
     * for its reply when SIGTERM came (answered only after the thaw). */
    ck_assert_int_eq(harness_redis_calls(redis_port, "evalsha") - evals, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(sale[i].took_ms >= 250, "sale %d was answered in %lld ms, before the thaw", i,
                      (long long)sale[i].took_ms);
    expect_clean_exit();
    for (int i = 0; i < 3; i++)
        ck_assert_msg(sale[i].status == 200 && strstr(sale[i].body, "\"status\":\"sold\""),
                      "sale %d: %d %s", i, sale[i].status, sale[i].body);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 4);
}
END_TEST

START_TEST(test_redis_password_and_database_are_used_and_the_password_never_logged) {
    /* A second Redis that requires a password. */
    int port = harness_free_port();
    char p[16];
    snprintf(p, sizeof(p), "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execlp("redis-server", "redis-server", "--port", p, "--save", "", "--appendonly", "no",
               "--requirepass", "s3cret-pass", (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(harness_wait_port(port, 5000), 0);

    char out[4096], args[256];
    snprintf(args, sizeof(args),
             "--set redis.port=%d --set redis.password=s3cret-pass --check-config", port);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s %s 2>&1", INVENTORYD_BIN, args);
    FILE *f = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    pclose(f);
    ck_assert_ptr_nonnull(strstr(out, "redis.password=****"));
    ck_assert_ptr_null(strstr(out, "s3cret-pass"));

    char rp[32], db[32], pw[64];
    snprintf(rp, sizeof(rp), "redis.port=%d", port);
    snprintf(db, sizeof(db), "redis.database=3");
    snprintf(pw, sizeof(pw), "redis.password=s3cret-pass");
    int good_port = harness_free_port(), bad_port = harness_free_port();
    const char *good_sets[] = {rp, db, pw, NULL};
    const char *bad_sets[] = {rp, "redis.password=wrong-pass", NULL};
    char good_log[] = "/tmp/inventoryd-good-XXXXXX", bad_log[] = "/tmp/inventoryd-bad-XXXXXX";
    close(mkstemp(good_log));
    close(mkstemp(bad_log));
    pid_t good = harness_inventoryd_start_logged(good_port, good_sets, good_log);
    pid_t bad = harness_inventoryd_start_logged(bad_port, bad_sets, bad_log);
    struct httpc_response r;
    int reset = harness_http(good_port, "POST", "/inventory/reset", NULL, "{\"stock\":9}", &r);
    int sale = harness_http(good_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r);
    int refused = harness_http(bad_port, "GET", "/healthz", NULL, NULL, &r);
    char why[512];
    snprintf(why, sizeof(why), "%s", r.body ? r.body : "");
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *a = redisCommand(c, "AUTH s3cret-pass");
    freeReplyObject(a);
    redisReply *sel = redisCommand(c, "SELECT 3");
    freeReplyObject(sel);
    redisReply *stock = redisCommand(c, "GET inventory001");
    long long in_db3 = stock && stock->type == REDIS_REPLY_STRING ? atoll(stock->str) : -1;
    freeReplyObject(stock);
    redisFree(c);
    harness_stop(good);
    harness_stop(bad);
    harness_stop(pid);
    /* Everything both daemons wrote, from start-up to their exit. */
    char logs[2][8192];
    const char *paths[2] = {good_log, bad_log};
    for (int i = 0; i < 2; i++) {
        FILE *lf = fopen(paths[i], "r");
        size_t got = lf ? fread(logs[i], 1, sizeof(logs[i]) - 1, lf) : 0;
        logs[i][got] = '\0';
        if (lf) fclose(lf);
        unlink(paths[i]);
    }
    ck_assert_int_eq(reset, 200);
    ck_assert_int_eq(sale, 200);
    ck_assert_int_eq(in_db3, 8); /* the sale went to database 3 */
    ck_assert_int_eq(refused, 503);
    ck_assert_msg(strstr(why, "AUTH") != NULL, "got: %s", why);
    ck_assert_ptr_null(strstr(why, "wrong-pass")); /* the password is not echoed */
    /* The logs were read (each says where it listens, the bad one why Redis
     * refused it), and neither holds its password. */
    ck_assert_msg(strstr(logs[0], "listening on") != NULL, "good log: %s", logs[0]);
    ck_assert_msg(strstr(logs[1], "listening on") && strstr(logs[1], "AUTH"), "bad log: %s",
                  logs[1]);
    ck_assert_msg(strstr(logs[0], "s3cret-pass") == NULL, "the password is in the log: %s",
                  logs[0]);
    ck_assert_msg(strstr(logs[1], "wrong-pass") == NULL, "the password is in the log: %s", logs[1]);
}
END_TEST

/* Polls GET /readyz on port every 20 ms until it answers 200 (the start-up
 * seed has run by then); 0, or -1 after timeout_ms. */
static int ready_on(int port, int timeout_ms) {
    int64_t t0 = mclock_ms();
    struct httpc_response r;
    while (mclock_ms() - t0 < timeout_ms) {
        if (harness_http(port, "GET", "/readyz", NULL, NULL, &r) == 200) return 0;
        mclock_sleep_ms(20);
    }
    return -1;
}

START_TEST(test_a_missing_stock_is_seeded_at_start_up_and_an_existing_one_kept) {
    harness_redis_int(redis_port, "DEL inventory001 inventory001:initial");
    /* lock.allowed=atomic: /readyz then waits for the seed and Redis only,
     * not for Redlock masters this case does not run. */
    const char *seven[] = {redis_set, "inventory.initial-stock=7", "lock.allowed=atomic", NULL};
    const char *nine[] = {redis_set, "inventory.initial-stock=9", "lock.allowed=atomic", NULL};
    int p1 = harness_free_port();
    pid_t i1 = harness_inventoryd_start(p1, seven);
    ck_assert_int_gt(i1, 0);
    int ready1 = ready_on(p1, 10000);
    long long after_first = harness_redis_int(redis_port, "GET inventory001");
    int p2 = harness_free_port();
    pid_t i2 = harness_inventoryd_start(p2, nine);
    int ready2 = i2 > 0 ? ready_on(p2, 10000) : -1;
    long long after_second = harness_redis_int(redis_port, "GET inventory001");
    long long initial = harness_redis_int(redis_port, "GET inventory001:initial");
    harness_stop(i1);
    harness_stop(i2);
    ck_assert_msg(ready1 == 0 && ready2 == 0, "/readyz never said ready (%d, %d)", ready1, ready2);
    ck_assert_int_eq(after_first, 7);
    ck_assert_int_eq(after_second, 7); /* never overwritten */
    ck_assert_int_eq(initial, 7);
}
END_TEST

/* ---- Metrics: the values, against what the test made the sales do ------- */

static pid_t m_pid;
static int m_port;

/* An instance with faults on, a 600 ms TTL and a 400 ms wait. */
static void setup_metrics(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    snprintf(redis_set, sizeof(redis_set), "redis.port=%d", redis_port);
    const char *sets[] = {redis_set,          "redis.timeout=500",   "lock.ttl-ms=600",
                          "lock.wait-ms=400", "faults.enabled=true", NULL};
    m_port = inst_port = harness_free_port();
    m_pid = inst_pid = harness_inventoryd_start(m_port, sets);
    ck_assert_int_gt(m_pid, 0);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(m_port, "POST", "/inventory/reset", NULL, "{\"stock\":100}", &r),
                     200);
}

/* One strategy's counter ("inventoryd_sales_total", "atomic"). */
static long long counter(const char *name, const char *strategy) {
    char series[160];
    snprintf(series, sizeof(series), "%s{strategy=\"%s\"}", name, strategy);
    long long v = harness_metric(m_port, series);
    ck_assert_msg(v >= 0, "no %s in GET /metrics", series);
    return v;
}

/* What the test saw of one strategy's sales, summed from their answers. */
struct seen {
    const char *strategy;
    long long answers, sold, attempts;
};

static void saw(struct seen *w, int n, const char *body) {
    const char *strategy = harness_json_str(body, "strategy");
    for (int i = 0; i < n; i++)
        if (strcmp(w[i].strategy, strategy) == 0) {
            w[i].answers++;
            w[i].sold += strcmp(harness_json_str(body, "status"), "sold") == 0;
            w[i].attempts += (long long)harness_json_num(body, "lock.attempts");
            return;
        }
    ck_abort_msg("an answer of an unexpected strategy: %s", body);
}

static int sale(struct seen *w, int n, const char *path, struct httpc_response *r) {
    int code = harness_http(m_port, "GET", path, NULL, NULL, r);
    saw(w, n, r->body);
    return code;
}

START_TEST(test_metrics_count_what_the_sales_did) {
    struct seen w[] = {{"owner-lua", 0, 0, 0},
                       {"setnx-spin", 0, 0, 0},
                       {"fenced", 0, 0, 0},
                       {"watchdog", 0, 0, 0},
                       {"none", 0, 0, 0}};
    const int n = sizeof(w) / sizeof(w[0]);
    struct httpc_response r;
    /* sold_out: an item with no stock. */
    ck_assert_int_eq(harness_http(m_port, "POST", "/inventory/reset", NULL,
                                  "{\"stock\":0,\"item\":\"inventory002\"}", &r),
                     200);
    ck_assert_int_eq(sale(w, n, "/inventory/sale/owner-lua", &r), 200);
    ck_assert_int_eq(sale(w, n, "/inventory/sale/owner-lua?item=inventory002", &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold_out");
    /* lock_timeout: another owner's lock, never freed; the sale spins. */
    harness_redis_int(redis_port, "SET RedisDistributedLock someone-else");
    ck_assert_int_eq(sale(w, n, "/inventory/sale/setnx-spin", &r), 503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "lock_timeout");
    ck_assert_int_gt(harness_json_num(r.body, "lock.attempts"), 5);
    harness_redis_int(redis_port, "DEL RedisDistributedLock");
    /* stale_token: a holder outlives its 600 ms lease (its key expires);
     * a newer one writes. */
    struct harness_bg slow;
    harness_bg_start(&slow, m_port, "/inventory/sale/fenced?hold_ms=1000", 0);
    ck_assert(harness_redis_until(redis_port, 1, 5000, "EXISTS RedisDistributedLock"));
    ck_assert(harness_redis_until(redis_port, 0, 5000, "EXISTS RedisDistributedLock"));
    ck_assert_int_eq(sale(w, n, "/inventory/sale/fenced", &r), 200);
    harness_bg_join(&slow);
    saw(w, n, slow.body);
    ck_assert_msg(slow.status == 409, "the stale holder: %d %s", slow.status, slow.body);
    ck_assert_str_eq(harness_json_str(slow.body, "status"), "stale_token");
    /* lock_lost: the lock vanishes under a watchdog holder. */
    harness_bg_start(&slow, m_port, "/inventory/sale/watchdog?hold_ms=700", 0);
    ck_assert(harness_redis_until(redis_port, 1, 5000, "EXISTS RedisDistributedLock"));
    ck_assert_int_eq(harness_redis_int(redis_port, "DEL RedisDistributedLock"), 1);
    harness_bg_join(&slow);
    saw(w, n, slow.body);
    ck_assert_str_eq(harness_json_str(slow.body, "status"), "lock_lost");
    /* renewals: work of twice the TTL, renewed every 200 ms; every renewal
     * is one hash-renew script in Redis. */
    char renew_cmd[96];
    snprintf(renew_cmd, sizeof(renew_cmd), "\"EVALSHA\" \"%s\"",
             harness_script_sha(redis_port, "hash-renew"));
    struct harness_monitor *mon = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(mon);
    ck_assert_int_eq(sale(w, n, "/inventory/sale/watchdog?hold_ms=1300", &r), 200);
    char *log = harness_monitor_stop(mon);
    ck_assert_ptr_nonnull(log);
    int renewals = harness_lines(log, renew_cmd, NULL);
    free(log);
    ck_assert_int_ge(renewals, 4);
    /* violations: two sales of `none` inside at once (the second sent once
     * the probe has the first's entry). */
    struct harness_bg first;
    harness_bg_start(&first, m_port, "/inventory/sale/none?hold_ms=300", 0);
    ck_assert(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"));
    ck_assert_int_eq(sale(w, n, "/inventory/sale/none", &r), 200);
    harness_bg_join(&first);
    saw(w, n, first.body);

    for (int i = 0; i < n; i++) {
        const char *s = w[i].strategy;
        long long answered = 0;
        static const char *const by_status[] = {
            "inventoryd_sales_total",         "inventoryd_sold_out_total",
            "inventoryd_lock_timeouts_total", "inventoryd_backend_errors_total",
            "inventoryd_stale_tokens_total",  "inventoryd_lost_locks_total",
            "inventoryd_bad_stock_total",     "inventoryd_stock_changed_total"};
        for (int k = 0; k < 8; k++) answered += counter(by_status[k], s);
        ck_assert_msg(answered == w[i].answers, "%s: %lld answers counted, %lld made", s, answered,
                      w[i].answers);
        ck_assert_msg(counter("inventoryd_sales_total", s) == w[i].sold, "%s: sales", s);
        ck_assert_msg(counter("inventoryd_lock_attempts_total", s) == w[i].attempts,
                      "%s: %lld attempts counted, %lld in the answers", s,
                      counter("inventoryd_lock_attempts_total", s), w[i].attempts);
        ck_assert_msg(counter("inventoryd_lock_wait_ms_count", s) == w[i].answers, "%s: waits", s);
    }
    ck_assert_int_eq(counter("inventoryd_sold_out_total", "owner-lua"), 1);
    ck_assert_int_eq(counter("inventoryd_lock_timeouts_total", "setnx-spin"), 1);
    ck_assert_int_eq(counter("inventoryd_stale_tokens_total", "fenced"), 1);
    ck_assert_int_eq(counter("inventoryd_lost_locks_total", "watchdog"), 1);
    ck_assert_int_eq(counter("inventoryd_lock_renewals_total", "watchdog"), renewals);
    ck_assert_int_eq(counter("inventoryd_exclusion_violations_total", "none"), 1);
    ck_assert_int_eq(counter("inventoryd_exclusion_violations_total", "owner-lua"), 0);
    /* The hold histogram: only sold and sold_out answers are holds; the
     * 1.3 s watchdog sale is the one above 1 s. */
    ck_assert_int_eq(counter("inventoryd_lock_hold_ms_count", "watchdog"), 1);
    ck_assert_int_eq(
        harness_metric(m_port, "inventoryd_lock_hold_ms_bucket{strategy=\"watchdog\",le=\"1000\"}"),
        0);
    ck_assert_int_eq(
        harness_metric(m_port, "inventoryd_lock_hold_ms_bucket{strategy=\"watchdog\",le=\"2000\"}"),
        1);
    ck_assert_int_eq(counter("inventoryd_lock_hold_ms_count", "fenced"), 1);
    ck_assert_int_eq(counter("inventoryd_lock_hold_ms_count", "owner-lua"), 2);
    /* backend_errors: Redis gone. */
    harness_stop(redis_pid);
    redis_pid = 0;
    ck_assert_int_eq(harness_http(m_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r), 503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
    ck_assert_int_eq(counter("inventoryd_backend_errors_total", "owner-lua"), 1);
}
END_TEST

/* A reset gives a clean slate: no lock, no holder in the probe, no
 * violation, no ledger, every counter back at zero. */
START_TEST(test_a_reset_clears_the_probe_the_lock_and_the_counters) {
    struct httpc_response r;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(harness_http(m_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r),
                         200);
    struct harness_bg first;
    harness_bg_start(&first, m_port, "/inventory/sale/none?hold_ms=300", 0);
    ck_assert(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"));
    ck_assert_int_eq(harness_http(m_port, "GET", "/inventory/sale/none", NULL, NULL, &r), 200);
    harness_bg_join(&first);
    ck_assert_int_eq(harness_audit(m_port, "violations"), 1);
    /* Another owner's lock, and a holder that looks alive. */
    harness_redis_int(redis_port, "SET RedisDistributedLock someone-else PX 60000");
    harness_redis_int(redis_port, "SET inventory001:alive:ghost 1 PX 60000");
    harness_redis_int(redis_port, "HSET inventory001:holders ghost-1 inventory001:alive:ghost");
    ck_assert_int_eq(counter("inventoryd_sales_total", "owner-lua"), 3);

    ck_assert_int_eq(harness_http(m_port, "POST", "/inventory/reset", NULL, "{\"stock\":50}", &r),
                     200);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS RedisDistributedLock"), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001:holders"), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001:violations"), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 0);
    ck_assert_int_eq(harness_audit(m_port, "violations"), 0);
    ck_assert_int_eq(harness_audit(m_port, "initial"), 50);
    static const char *const zero[] = {"inventoryd_sales_total", "inventoryd_lock_attempts_total",
                                       "inventoryd_exclusion_violations_total",
                                       "inventoryd_lock_wait_ms_count",
                                       "inventoryd_lock_hold_ms_count"};
    for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++) {
        ck_assert_msg(counter(zero[k], "owner-lua") == 0, "%s{owner-lua} after the reset", zero[k]);
        ck_assert_msg(counter(zero[k], "none") == 0, "%s{none} after the reset", zero[k]);
    }
    /* The lock is free at once, and a sale is no violation. */
    int64_t t0 = mclock_ms();
    ck_assert_int_eq(harness_http(m_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_lt(mclock_ms() - t0, 300);
    ck_assert_int_eq(harness_audit(m_port, "violations"), 0);
    ck_assert_int_eq(counter("inventoryd_sales_total", "owner-lua"), 1);
}
END_TEST

/* docs/api.md (the reset): "never the fencing counter": it only grows. A
 * token handed out before a reset must stay older than every later one. */
START_TEST(test_a_reset_never_lowers_the_fencing_token) {
    struct httpc_response r;
    long long before = 0;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(harness_http(m_port, "GET", "/inventory/sale/fenced", NULL, NULL, &r),
                         200);
        before = (long long)harness_json_num(r.body, "lock.token");
    }
    ck_assert_int_ge(before, 3);
    ck_assert_int_eq(harness_http(m_port, "POST", "/inventory/reset", NULL, "{\"stock\":50}", &r),
                     200);
    ck_assert_int_eq(harness_http(m_port, "GET", "/inventory/sale/fenced", NULL, NULL, &r), 200);
    long long after = (long long)harness_json_num(r.body, "lock.token");
    ck_assert_msg(after > before, "token %lld after the reset, %lld before it: the fence went back",
                  after, before);
}
END_TEST

/* With lock.scope=global every item's sales share one lock: a reset of
 * another item must leave it to the sale that holds it (the matrix's reset
 * of a throwaway item once freed it, and two holders overlapped). */
START_TEST(test_a_reset_of_another_item_leaves_the_held_global_lock_alone) {
    struct harness_bg holder;
    harness_bg_start(&holder, m_port, "/inventory/sale/owner-lua?hold_ms=400", 0);
    int held = 0;
    for (int i = 0; i < 100 && !held; i++) {
        held = harness_redis_int(redis_port, "EXISTS RedisDistributedLock") == 1;
        if (!held) usleep(5 * 1000);
    }
    ck_assert_msg(held, "the holder never took RedisDistributedLock");
    struct httpc_response r;
    ck_assert_int_eq(harness_http(m_port, "POST", "/inventory/reset", NULL,
                                  "{\"stock\":10,\"item\":\"inventory777\"}", &r),
                     200);
    ck_assert_msg(harness_redis_int(redis_port, "EXISTS RedisDistributedLock") == 1,
                  "the reset of inventory777 freed the lock a sale of inventory001 held");
    harness_bg_join(&holder);
    ck_assert_int_eq(holder.status, 200);
    ck_assert_str_eq(harness_json_str(holder.body, "status"), "sold");
    /* The item's own reset still frees it (CONTRACT: reset clears the lock). */
    harness_bg_start(&holder, m_port, "/inventory/sale/owner-lua?hold_ms=400", 0);
    held = 0;
    for (int i = 0; i < 100 && !held; i++) {
        held = harness_redis_int(redis_port, "EXISTS RedisDistributedLock") == 1;
        if (!held) usleep(5 * 1000);
    }
    ck_assert(held);
    ck_assert_int_eq(harness_http(m_port, "POST", "/inventory/reset", NULL, "{\"stock\":10}", &r),
                     200);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS RedisDistributedLock"), 0);
    harness_bg_join(&holder);
}
END_TEST

/* ---- Admin: admin.token guards the reset, lab runs and fault parameters --- */

#define ADMIN_TOKEN "admin-test-7f3a9c2e5b1d-token"
#define ADMIN_AUTH "Authorization: Bearer " ADMIN_TOKEN "\r\n"

static char admin_log[64];

/* An instance with admin.token, faults and the lab on (runs aimed at
 * itself), its output in admin_log; the stock reset to 200 with the token. */
static void setup_admin(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    snprintf(redis_set, sizeof(redis_set), "redis.port=%d", redis_port);
    snprintf(admin_log, sizeof(admin_log), "/tmp/inventoryd-admin-XXXXXX");
    close(mkstemp(admin_log));
    const char *sets[] = {redis_set,
                          "redis.timeout=500",
                          "lock.ttl-ms=1000",
                          "lock.wait-ms=3000",
                          "faults.enabled=true",
                          "lab.enabled=true",
                          "admin.token=" ADMIN_TOKEN,
                          NULL};
    inst_port = harness_free_port();
    inst_pid = harness_inventoryd_start_logged(inst_port, sets, admin_log);
    ck_assert_int_gt(inst_pid, 0);
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/inventory/reset", ADMIN_AUTH, "{\"stock\":200}", &r),
        200);
}

static void teardown_admin(void) {
    teardown();
    unlink(admin_log);
}

/* Asserts a 401 as the contract has it: JSON "unauthorized", a sentence
 * naming the header, and WWW-Authenticate: Bearer. */
static void expect_401(const struct httpc_response *r, const char *what) {
    ck_assert_msg(r->status == 401, "%s: answered %d %s", what, r->status, r->body);
    ck_assert_ptr_nonnull(strstr(r->content_type, "application/json"));
    ck_assert_str_eq(harness_json_str(r->body, "status"), "unauthorized");
    ck_assert_msg(strstr(harness_json_str(r->body, "error"), "Authorization") != NULL,
                  "%s: the sentence does not name the header: %s", what, r->body);
    ck_assert_str_eq(r->www_authenticate, "Bearer realm=\"inventoryd\"");
}

START_TEST(
    test_with_admin_token_set_a_reset_without_the_bearer_token_answers_401_and_changes_nothing) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
    static const char *const refused[] = {
        NULL, /* no header */
        "Authorization: Basic YWRtaW46YWRtaW4=\r\n", /* not Bearer */
        "Authorization: Bearer\r\n", /* no token */
        "Authorization: " ADMIN_TOKEN "\r\n", /* no scheme */
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        harness_http(inst_port, "POST", "/inventory/reset", refused[i], "{\"stock\":5}", &r);
        expect_401(&r, refused[i] ? refused[i] : "no Authorization header");
    }
    /* Refused before the body is read: a bad body gets 401, not 400. */
    harness_http(inst_port, "POST", "/inventory/reset", NULL, "not json", &r);
    expect_401(&r, "a bad body without the token");
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 199);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001:initial"), 200);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 1);
}
END_TEST

START_TEST(test_with_admin_token_set_the_reset_works_with_the_token) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/inventory/reset", ADMIN_AUTH, "{\"stock\":5}", &r), 200);
    ck_assert_int_eq(harness_json_num(r.body, "stock"), 5);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 5);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 0);
    /* The scheme is case-insensitive (RFC 9110). */
    ck_assert_int_eq(harness_http(inst_port, "POST", "/inventory/reset",
                                  "Authorization: bearer " ADMIN_TOKEN "\r\n", "{\"stock\":7}", &r),
                     200);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 7);
}
END_TEST

START_TEST(test_a_wrong_token_of_the_same_length_answers_401) {
    char first[] = ADMIN_TOKEN, last[] = ADMIN_TOKEN;
    first[0] ^= 1;
    last[sizeof(last) - 2] ^= 1;
    ck_assert_int_eq(strlen(first), strlen(ADMIN_TOKEN));
    /* The same length differing in the first or the last byte, a prefix,
     * the token with a byte more: each is another token. */
    const char *wrong[] = {first, last, "admin-test-7f3a9c2e5b1d-toke", ADMIN_TOKEN "x"};
    struct httpc_response r;
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        char h[128];
        snprintf(h, sizeof(h), "Authorization: Bearer %s\r\n", wrong[i]);
        harness_http(inst_port, "POST", "/inventory/reset", h, "{\"stock\":5}", &r);
        expect_401(&r, wrong[i]);
        ck_assert_ptr_nonnull(
            strstr(harness_json_str(r.body, "error"), "not this instance's admin.token"));
    }
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200);
}
END_TEST

START_TEST(test_a_fault_parameter_without_the_token_answers_401_and_sells_nothing) {
    /* Every fault parameter, even a zero one, on a sale and on GET /inventory. */
    static const char *const paths[] = {
        "/inventory/sale/atomic?hold_ms=1",
        "/inventory/sale/owner-lua?hold_ms=0",
        "/inventory/sale/owner-lua?crash=1",
        "/inventory/sale/owner-lua?crash=0",
        "/inventory/sale/owner-check?release_delay_ms=1",
        "/inventory/sale/reentrant?nested=1",
        "/inventory/sale?hold_ms=1",
        "/redis/distributed/lock/inventory/sale?hold_ms=1",
        "/inventory?hold_ms=1",
    };
    struct httpc_response r;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        harness_http(inst_port, "GET", paths[i], NULL, NULL, &r);
        expect_401(&r, paths[i]);
        harness_http(inst_port, "POST", paths[i],
                     "Authorization: Bearer wrong-token-0123456789\r\n", NULL, &r);
        if (strncmp(paths[i], "/inventory?", 11) != 0) expect_401(&r, paths[i]);
    }
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 0);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/healthz", NULL, NULL, &r),
                     200); /* no crash */
    /* With the token the same parameter is taken. */
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/owner-lua?hold_ms=50",
                                  ADMIN_AUTH, NULL, &r),
                     200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_ge(harness_json_num(r.body, "lock.hold_ms"), 50);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 199);
}
END_TEST

START_TEST(test_a_plain_sale_and_every_read_need_no_token) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(harness_http(inst_port, "POST", "/inventory/sale/owner-lua", NULL, NULL, &r),
                     200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(harness_http(inst_port, "GET",
                                  "/redis/distributed/lock/inventory/sale?format=text", NULL, NULL,
                                  &r),
                     200);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 197);
    static const char *const open[] = {"/inventory", "/inventory/audit", "/inventory/history",
                                       "/metrics",   "/healthz",         "/strategies",
                                       "/",          "/lab/app.js",      "/lab",
                                       "/lab/runs",  "/lab/scenarios"};
    for (size_t i = 0; i < sizeof(open) / sizeof(open[0]); i++)
        ck_assert_msg(harness_http(inst_port, "GET", open[i], NULL, NULL, &r) == 200,
                      "GET %s without the token: %d %s", open[i], r.status, r.body);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab", NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"token_required\":true"));
}
END_TEST

START_TEST(test_post_lab_runs_without_the_token_answers_401_and_starts_no_run) {
    struct httpc_response r;
    const char *run = "{\"strategy\":\"atomic\",\"clients\":1,\"requests\":5,\"stock\":50}";
    harness_http(inst_port, "POST", "/lab/runs", NULL, run, &r);
    expect_401(&r, "POST /lab/runs without the token");
    harness_http(inst_port, "POST", "/lab/runs", "Authorization: Bearer not-the-token-at-all\r\n",
                 run, &r);
    expect_401(&r, "POST /lab/runs with a wrong token");
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/runs", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "runs")), 0);
    cJSON_Delete(j);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/runs/1", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200); /* no reset */
}
END_TEST

/* The lab's own requests need the token too: it sends it with the run's
 * reset and with a scenario's sales (hold_ms and friends). */
START_TEST(test_a_lab_run_started_with_the_token_resets_and_sends_its_fault_parameters_with_it) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "POST", "/lab/runs", ADMIN_AUTH,
                                  "{\"strategy\":\"owner-lua\",\"scenario\":\"race\",\"stock\":50}",
                                  &r),
                     202);
    int id = (int)harness_json_num(r.body, "id");
    char path[64];
    snprintf(path, sizeof(path), "/lab/runs/%d", id);
    cJSON *j = NULL;
    for (int64_t deadline = mclock_ms() + 30000; mclock_ms() < deadline; mclock_sleep_ms(100)) {
        ck_assert_int_eq(harness_http(inst_port, "GET", path, NULL, NULL, &r), 200);
        if (strcmp(harness_json_str(r.body, "state"), "running") != 0) break;
    }
    j = json(&r);
    ck_assert_msg(strcmp(str(j, "state"), "done") == 0, "the run: %s", r.body);
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
    ck_assert_int_eq(cJSON_GetArraySize(steps), 2);
    for (int i = 0; i < 2; i++) {
        const cJSON *st = cJSON_GetArrayItem(steps, i);
        ck_assert_msg(num(st, "status") == 200, "step %d: %s", i, r.body);
        ck_assert_str_eq(str(st, "word"), "sold");
    }
    ck_assert_ptr_nonnull(strstr(str(cJSON_GetArrayItem(steps, 0), "query"), "hold_ms="));
    cJSON_Delete(j);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001:initial"), 50); /* its reset */
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 48);
}
END_TEST

/* Runs INVENTORYD_BIN with args under a 20 s timeout (so that an instance
 * that starts instead of refusing fails the test rather than hanging it);
 * its exit status, and its stdout and stderr in out. */
static int run_bounded(const char *args, char *out, size_t outlen) {
    char full[1024];
    snprintf(full, sizeof(full), "%s %s", INVENTORYD_BIN, args);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "timeout 20 %s 2>&1", full);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_start_up_refuses_faults_or_lab_on_0_0_0_0_without_a_token_naming_admin_token) {
    char out[2048], args[512];
    int port = harness_free_port();
    static const char *const on[] = {"faults.enabled", "lab.enabled"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof(args),
                 "--set server.bind=0.0.0.0 --set server.port=%d --set %s "
                 "--set %s=true",
                 port, redis_set, on[i]);
        int rc = run_bounded(args, out, sizeof(out));
        ck_assert_msg(rc == 2, "%s on 0.0.0.0 without a token: exit %d: %s", on[i], rc, out);
        ck_assert_msg(strstr(out, "admin.token") && strstr(out, "server.bind") &&
                          strstr(out, on[i]),
                      "%s: %s", on[i], out);
        ck_assert_msg(strstr(out, "listening") == NULL, "it listened: %s", out);
    }
    /* A file's value is named by its line, as other errors are. */
    char path[] = "/tmp/inventoryd-admin-conf-XXXXXX";
    int fd = mkstemp(path);
    const char text[] = "# test\nfaults.enabled=true\nserver.bind=10.1.2.3\n";
    ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    snprintf(args, sizeof(args), "--config %s --check-config", path);
    ck_assert_int_eq(run_bounded(args, out, sizeof(out)), 2);
    char where[128];
    snprintf(where, sizeof(where), "%s:3: server.bind", path);
    unlink(path);
    ck_assert_msg(strstr(out, where) && strstr(out, "admin.token"), "got: %s", out);
    /* Loopback needs no token; a token makes 0.0.0.0 acceptable (and 0.0.0.0 without
     * one is refused even with both off: see the test below). */
    ck_assert_int_eq(run_bounded("--set server.bind=127.0.0.2 --set faults.enabled=true "
                                 "--set lab.enabled=true --check-config",
                                 out, sizeof(out)),
                     0);
    ck_assert_int_eq(run_bounded("--set server.bind=0.0.0.0 --set faults.enabled=true --set "
                                 "lab.enabled=true --set admin.token=" ADMIN_TOKEN
                                 " --check-config",
                                 out, sizeof(out)),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "admin.token=****\n"));
    ck_assert_ptr_null(strstr(out, ADMIN_TOKEN));
    /* A short token is refused with the reason, and not repeated. */
    ck_assert_int_eq(
        run_bounded("--set admin.token=short-secret15c --check-config", out, sizeof(out)), 2);
    ck_assert_msg(strstr(out, "admin.token") && strstr(out, "shorter than 16"), "got: %s", out);
    ck_assert_ptr_null(strstr(out, "short-secret15c"));
}
END_TEST

/* An IPv4 address of this host outside 127.0.0.0/8, on an interface that is
 * up, in buf; 0, or -1 when the host has none. */
static int outside_address(char *buf, size_t len) {
    struct ifaddrs *all;
    if (getifaddrs(&all) != 0) return -1;
    int found = -1;
    for (struct ifaddrs *i = all; i && found < 0; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
        const struct sockaddr_in *a = (const struct sockaddr_in *)i->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
        inet_ntop(AF_INET, &a->sin_addr, buf, (socklen_t)len);
        found = 0;
    }
    freeifaddrs(all);
    return found;
}

/* POSTs body to path on ip:port over a connection of its own and returns
 * the answer's status (0 when none came). peer gets the connection's local
 * address, which is the peer address the instance sees. */
static int post_from(const char *ip, int port, const char *path, const char *headers,
                     const char *body, char *peer, size_t peerlen) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return 0;
    }
    struct sockaddr_in me;
    socklen_t melen = sizeof(me);
    getsockname(fd, (struct sockaddr *)&me, &melen);
    inet_ntop(AF_INET, &me.sin_addr, peer, (socklen_t)peerlen);
    char req[1024], ans[512] = "";
    int n = snprintf(req, sizeof(req),
                     "POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     path, ip, headers ? headers : "", strlen(body), body);
    int status = 0;
    if (write(fd, req, (size_t)n) == n) {
        ssize_t got = read(fd, ans, sizeof(ans) - 1);
        if (got > 0) ans[got] = '\0';
        if (strncmp(ans, "HTTP/1.", 7) == 0) status = atoi(ans + 9);
    }
    close(fd);
    return status;
}

START_TEST(
    test_off_loopback_a_reset_from_another_address_needs_the_token_even_with_lab_and_faults_off) {
    char ip[INET_ADDRSTRLEN], peer[INET_ADDRSTRLEN] = "", out[2048], args[512];
    ck_assert_msg(outside_address(ip, sizeof(ip)) == 0,
                  "this host has no IPv4 address outside 127.0.0.0/8 to connect from");
    harness_redis_int(redis_port, "SET inventory001 7");
    /* Lab and faults off, no token, bound to every address. */
    int port = harness_free_port();
    const char *open_sets[] = {redis_set, "server.bind=0.0.0.0", "lab.enabled=false",
                               "faults.enabled=false", NULL};
    unsetenv("INVENTORYD_ADMIN_TOKEN");
    pid_t pid = harness_inventoryd_start(port, open_sets);
    if (pid > 0) {
        /* It started: then a reset from off loopback must still be refused. */
        int st =
            post_from(ip, port, "/inventory/reset", NULL, "{\"stock\":500}", peer, sizeof(peer));
        harness_stop(pid);
        ck_assert_msg(strncmp(peer, "127.", 4) != 0 && peer[0],
                      "the request came from %s, not from off loopback", peer);
        ck_assert_msg(st != 200, "a reset from %s without a token answered 200", peer);
        ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 7);
    }
    /* Start-up refuses, naming both ways to set the token. */
    snprintf(args, sizeof(args),
             "--set server.bind=0.0.0.0 --set server.port=%d --set %s --set lab.enabled=false "
             "--set faults.enabled=false",
             port, redis_set);
    int rc = run_bounded(args, out, sizeof(out));
    ck_assert_msg(rc == 2, "0.0.0.0 without a token, lab and faults off: exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "server.bind") && strstr(out, "admin.token") &&
                      strstr(out, "INVENTORYD_ADMIN_TOKEN") && !strstr(out, "listening"),
                  "got: %s", out);
    /* With a token, the outside peer needs it, and with it the reset works. */
    const char *guarded_sets[] = {redis_set, "server.bind=0.0.0.0", "admin.token=" ADMIN_TOKEN,
                                  NULL};
    pid = harness_inventoryd_start(port, guarded_sets);
    ck_assert_int_gt(pid, 0);
    int without =
        post_from(ip, port, "/inventory/reset", NULL, "{\"stock\":500}", peer, sizeof(peer));
    long long after_refused = harness_redis_int(redis_port, "GET inventory001");
    int with =
        post_from(ip, port, "/inventory/reset", ADMIN_AUTH, "{\"stock\":500}", peer, sizeof(peer));
    harness_stop(pid);
    ck_assert_msg(strncmp(peer, "127.", 4) != 0, "the request came from %s", peer);
    ck_assert_int_eq(without, 401);
    ck_assert_int_eq(after_refused, 7);
    ck_assert_int_eq(with, 200);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 500);
}
END_TEST

START_TEST(test_inventoryd_admin_token_in_the_environment_sets_admin_token) {
    setenv("INVENTORYD_ADMIN_TOKEN", "env-token-0123456789abcdef", 1);
    char out[4096];
    int rc = run_bounded("--set server.bind=0.0.0.0 --set faults.enabled=true --check-config", out,
                         sizeof(out));
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "admin.token=****\n"));
    ck_assert_ptr_null(strstr(out, "env-token-0123456789abcdef"));
    int port = harness_free_port();
    const char *sets[] = {redis_set, NULL};
    pid_t pid = harness_inventoryd_start(port, sets);
    unsetenv("INVENTORYD_ADMIN_TOKEN");
    ck_assert_int_gt(pid, 0);
    struct httpc_response r;
    int without = harness_http(port, "POST", "/inventory/reset", NULL, "{\"stock\":3}", &r);
    int with =
        harness_http(port, "POST", "/inventory/reset",
                     "Authorization: Bearer env-token-0123456789abcdef\r\n", "{\"stock\":3}", &r);
    harness_stop(pid);
    ck_assert_int_eq(without, 401);
    ck_assert_int_eq(with, 200);
}
END_TEST

START_TEST(test_the_token_appears_in_no_answer_and_no_log_line) {
    struct httpc_response r;
    char seen[65536];
    size_t off = 0;
    /* Every kind of answer this instance gives about the token, collected. */
    static const struct {
        const char *method, *path, *headers, *body;
    } calls[] = {
        {"POST", "/inventory/reset", NULL, "{\"stock\":9}"},
        {"POST", "/inventory/reset", "Authorization: Bearer admin-test-7f3a9c2e5b1d-tokeX\r\n",
         "{\"stock\":9}"},
        {"POST", "/inventory/reset?format=text", "Authorization: Bearer wrong\r\n",
         "{\"stock\":9}"},
        {"POST", "/inventory/reset", ADMIN_AUTH, "{\"stock\":9}"},
        {"POST", "/inventory/reset", ADMIN_AUTH, "{\"stock\":-1}"},
        {"GET", "/inventory/sale/atomic?hold_ms=1", NULL, NULL},
        {"GET", "/inventory/sale/atomic?hold_ms=1", ADMIN_AUTH, NULL},
        {"GET", "/inventory/sale/atomic?hold_ms=x", ADMIN_AUTH, NULL},
        {"POST", "/lab/runs", NULL, "{\"strategy\":\"atomic\"}"},
        {"POST", "/lab/runs", ADMIN_AUTH, "{\"strategy\":\"atomic\",\"clients\":2,\"requests\":4}"},
        {"POST", "/lab/runs", ADMIN_AUTH, "{\"strategy\":\"nope\"}"},
        {"GET", "/lab", NULL, NULL},
        {"GET", "/lab/runs", NULL, NULL},
        {"GET", "/metrics", NULL, NULL},
        {"GET", "/inventory/history", NULL, NULL},
        {"GET", "/nowhere", ADMIN_AUTH, NULL},
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        int code = harness_http(inst_port, calls[i].method, calls[i].path, calls[i].headers,
                                calls[i].body, &r);
        ck_assert_msg(code > 0, "%s %s: no answer", calls[i].method, calls[i].path);
        ck_assert_msg(strstr(r.body, ADMIN_TOKEN) == NULL, "%s %s answered the token: %s",
                      calls[i].method, calls[i].path, r.body);
        off += (size_t)snprintf(seen + off, sizeof(seen) - off, "%d ", code);
    }
    ck_assert_msg(strstr(seen, "401 ") && strstr(seen, "202 ") && strstr(seen, "400 "), "%s", seen);
    /* The run's record, once it is over (its reset and audit went out with the token). */
    for (int64_t deadline = mclock_ms() + 20000; mclock_ms() < deadline; mclock_sleep_ms(100)) {
        harness_http(inst_port, "GET", "/lab/runs/1", NULL, NULL, &r);
        if (strcmp(harness_json_str(r.body, "state"), "running") != 0) break;
    }
    ck_assert_str_eq(harness_json_str(r.body, "state"), "done");
    ck_assert_ptr_null(strstr(r.body, ADMIN_TOKEN));
    /* The whole log, from start-up to exit. */
    harness_stop(inst_pid);
    inst_pid = 0;
    char log[65536];
    FILE *f = fopen(admin_log, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(log, 1, sizeof(log) - 1, f);
    log[n] = '\0';
    fclose(f);
    ck_assert_msg(strstr(log, "admin.token is set") && strstr(log, "refused a reset") &&
                      strstr(log, "stopped"),
                  "the log was not all written: %s", log);
    ck_assert_msg(strstr(log, ADMIN_TOKEN) == NULL, "the token is in the log: %s", log);
    ck_assert_msg(strstr(log, "7f3a9c2e5b1d") == NULL, "part of the token is in the log: %s", log);
}
END_TEST

/* ---- readiness (GET /readyz) ---------------------------------------------------
 * Fresh Redlock masters: by the restart rule none may vote before it has been
 * up for the lease, so an instance started with them is alive (/healthz) but
 * not ready, and says why. */
#define READY_TTL_MS 4000

static pid_t master_pid[3];
static int master_port[3];

static void setup_ready(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    snprintf(redis_set, sizeof(redis_set), "redis.port=%d", redis_port);
    for (int i = 0; i < 3; i++) {
        master_pid[i] = harness_redis_start(0, &master_port[i]);
        ck_assert_int_gt(master_pid[i], 0);
    }
    char nodes[128], ttl[32];
    snprintf(nodes, sizeof(nodes), "redlock.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             master_port[0], master_port[1], master_port[2]);
    snprintf(ttl, sizeof(ttl), "lock.ttl-ms=%d", READY_TTL_MS);
    inst_port = harness_free_port();
    const char *sets[] = {
        redis_set,           nodes, ttl, "redis.timeout=500", "redlock.node-timeout-ms=200",
        "lock.wait-ms=3000", NULL};
    inst_pid = harness_inventoryd_start(inst_port, sets);
    ck_assert_int_gt(inst_pid, 0);
}

static void teardown_ready(void) {
    teardown();
    for (int i = 0; i < 3; i++) harness_stop(master_pid[i]);
}

/* GET /readyz: asserts its JSON agrees with its status; returns the status
 * and copies the reason ("" when ready) into why. */
static int readyz(char *why, size_t len) {
    struct httpc_response r;
    int code = harness_http(inst_port, "GET", "/readyz", NULL, NULL, &r);
    ck_assert_msg(code == 200 || code == 503, "/readyz answered %d: %s", code, r.body);
    cJSON *j = json(&r);
    const cJSON *ready = cJSON_GetObjectItemCaseSensitive(j, "ready");
    ck_assert_msg(cJSON_IsBool(ready), "no \"ready\": %s", r.body);
    ck_assert_int_eq(cJSON_IsTrue(ready), code == 200);
    ck_assert_str_eq(str(j, "status"), code == 200 ? "ready" : "not_ready");
    ck_assert_int_eq((int)num(j, "port"), inst_port);
    const cJSON *reason = cJSON_GetObjectItemCaseSensitive(j, "reason");
    ck_assert_msg(code == 200 ? reason == NULL
                              : cJSON_IsString(reason) && strlen(reason->valuestring) > 10,
                  "the reason does not match the status %d: %s", code, r.body);
    snprintf(why, len, "%s", code == 200 ? "" : reason->valuestring);
    cJSON_Delete(j);
    return code;
}

/* Polls /readyz every 20 ms until it answers want; the ms that took, or -1. */
static int64_t wait_ready(int want, int timeout_ms, char *why, size_t len) {
    int64_t t0 = mclock_ms();
    while (mclock_ms() - t0 < timeout_ms) {
        if (readyz(why, len) == want) return mclock_ms() - t0;
        mclock_sleep_ms(20);
    }
    return -1;
}

START_TEST(
    test_with_fresh_redlock_masters_readyz_is_503_with_the_reason_until_a_redlock_sale_can_sell) {
    char why[512];
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r), 200);
    /* The window: alive, Redis answers, but no master may vote yet... */
    ck_assert_int_eq(harness_http(inst_port, "GET", "/healthz", NULL, NULL, &r), 200);
    ck_assert_int_eq(readyz(why, sizeof(why)), 503);
    ck_assert_msg(strstr(why, "of 3 Redlock masters can vote, 2 needed") && strstr(why, "votes in"),
                  "the reason does not name the masters' wait: %s", why);
    /* ...and a redlock sale in it fails, which is what readiness is for. */
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r),
                     503);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
    ck_assert_msg(harness_audit(inst_port, "sold") == 0, "a sale sold while not ready");
    /* Ready once two masters have been up for the lease, not before. */
    int64_t took = wait_ready(200, READY_TTL_MS + 5000, why, sizeof(why));
    ck_assert_msg(took >= 0, "/readyz never answered 200; last reason: %s", why);
    /* At once after it, every redlock sale sells. */
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r),
                         200);
        ck_assert_msg(strcmp(harness_json_str(r.body, "status"), "sold") == 0,
                      "sale %d after /readyz said ready: %s", i, r.body);
    }
    ck_assert_int_eq((int)harness_audit(inst_port, "sold"), 20);
    ck_assert_int_eq((int)harness_audit(inst_port, "sold_twice"), 0);
}
END_TEST

/* Sells by redlock until every master voted yes: each master's vote
 * begins once the service has seen it up for the lease, dated from its
 * coarse uptime, so the three begin up to a second or so apart, and ready
 * means two of them. 1 once all three did, 0 if not within timeout_ms. */
static int wait_every_master_votes(int timeout_ms) {
    for (int64_t end = mclock_ms() + timeout_ms; mclock_ms() < end; mclock_sleep_ms(50)) {
        struct httpc_response r;
        if (harness_http(inst_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r) != 200)
            continue;
        int yes = 0;
        for (const char *p = r.body; (p = strstr(p, "\"vote\":\"yes\"")); p++) yes++;
        if (yes == 3) return 1;
    }
    return 0;
}

START_TEST(test_readyz_needs_a_quorum_of_redlock_masters_and_names_those_down) {
    char why[512];
    ck_assert_msg(wait_ready(200, READY_TTL_MS + 5000, why, sizeof(why)) >= 0,
                  "/readyz never answered 200; last reason: %s", why);
    /* Ready is two of three: the one stopped next may have been one of
     * them, and the third not voting yet. */
    ck_assert_msg(wait_every_master_votes(5000), "not every Redlock master came to vote");
    harness_stop(master_pid[0]); /* two of three: still a quorum */
    master_pid[0] = -1;
    ck_assert_int_eq(readyz(why, sizeof(why)), 200);
    harness_stop(master_pid[1]); /* one of three: none */
    master_pid[1] = -1;
    ck_assert_int_eq(readyz(why, sizeof(why)), 503);
    char name0[32], name1[32];
    snprintf(name0, sizeof(name0), "127.0.0.1:%d", master_port[0]);
    snprintf(name1, sizeof(name1), "127.0.0.1:%d", master_port[1]);
    ck_assert_msg(strstr(why, "only 1 of 3 Redlock masters can vote, 2 needed") &&
                      strstr(why, name0) && strstr(why, name1),
                  "the reason does not name the two masters down: %s", why);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r),
                     503);
}
END_TEST

START_TEST(test_readyz_is_503_naming_redis_while_it_is_frozen_and_200_once_it_answers) {
    char why[512];
    ck_assert_msg(wait_ready(200, READY_TTL_MS + 5000, why, sizeof(why)) >= 0,
                  "/readyz never answered 200; last reason: %s", why);
    ck_assert_int_eq(kill(redis_pid, SIGSTOP), 0);
    int code = readyz(why, sizeof(why));
    kill(redis_pid, SIGCONT);
    ck_assert_int_eq(code, 503);
    char where[48];
    snprintf(where, sizeof(where), "Redis 127.0.0.1:%d", redis_port);
    ck_assert_msg(strstr(why, where), "the reason does not name Redis at its port: %s", why);
    ck_assert_msg(wait_ready(200, 5000, why, sizeof(why)) >= 0,
                  "/readyz stayed 503 after Redis came back: %s", why);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
}
END_TEST

/* Whether the file at path holds text. */
static int file_has(const char *path, const char *text) {
    char buf[16384];
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

/* The window of the seed tests: the instance restarted, with sets, while
 * Redis (frozen) cannot take its start-up seed, on a Redis without the
 * stock key; its log in log. Returns whether the seed failed, as the log
 * says, within 5 s. Redis is still frozen when it returns. */
static int restart_with_the_seed_missed(const char *const *sets, const char *log) {
    harness_stop(inst_pid);
    inst_pid = -1;
    ck_assert_int_eq((int)harness_redis_int(redis_port, "DEL inventory001"), 1);
    ck_assert_int_eq(kill(redis_pid, SIGSTOP), 0);
    inst_pid = harness_inventoryd_start_logged(inst_port, sets, log);
    ck_assert_int_gt(inst_pid, 0);
    int missed = 0;
    for (int i = 0; i < 100 && !missed; i++) {
        missed = file_has(log, "sales answer 503 until Redis is back");
        if (!missed) mclock_sleep_ms(50);
    }
    return missed;
}

START_TEST(test_a_seed_missed_at_start_up_is_made_before_readyz_says_ready) {
    char why[512];
    struct httpc_response r;
    /* The window: an instance that starts while Redis cannot take its seed
     * (frozen), on a Redis without the stock key. */
    char log[128];
    snprintf(log, sizeof(log), "/tmp/check_http_seed.%d.log", (int)getpid());
    char nodes[128], ttl[32];
    snprintf(nodes, sizeof(nodes), "redlock.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             master_port[0], master_port[1], master_port[2]);
    snprintf(ttl, sizeof(ttl), "lock.ttl-ms=%d", READY_TTL_MS);
    const char *sets[] = {
        redis_set,           nodes, ttl, "redis.timeout=500", "redlock.node-timeout-ms=200",
        "lock.wait-ms=3000", NULL};
    int missed = restart_with_the_seed_missed(sets, log);
    kill(redis_pid, SIGCONT);
    ck_assert_msg(missed, "the start-up seed did not fail: the test missed its window");
    ck_assert_int_eq((int)harness_redis_int(redis_port, "EXISTS inventory001"), 0);
    /* Ready means a sale can succeed: the seed is made by then. */
    ck_assert_msg(wait_ready(200, READY_TTL_MS + 5000, why, sizeof(why)) >= 0,
                  "/readyz never answered 200; last reason: %s", why);
    ck_assert_int_eq((int)harness_redis_int(redis_port, "GET inventory001"), 200);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq((int)harness_json_num(r.body, "unit"), 200);
    unlink(log);
}
END_TEST

START_TEST(test_a_sale_sent_before_a_missed_seed_is_made_sells_from_the_seeded_stock) {
    struct httpc_response r;
    /* The window: the start-up seed failed (Redis frozen) on a Redis without
     * the stock key, and nothing (no /readyz) has made it since. */
    char log[128];
    snprintf(log, sizeof(log), "/tmp/check_http_sale_seed.%d.log", (int)getpid());
    const char *sets[] = {redis_set, "redis.timeout=500", "lock.wait-ms=3000",
                          "lock.allowed=atomic,expiring", NULL};
    int missed = restart_with_the_seed_missed(sets, log);
    /* While Redis cannot take the seed, a sale is refused as unavailable. */
    int frozen =
        missed ? harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r) : 0;
    char frozen_body[512];
    snprintf(frozen_body, sizeof(frozen_body), "%s", r.body ? r.body : "");
    kill(redis_pid, SIGCONT);
    ck_assert_msg(missed, "the start-up seed did not fail: the test missed its window");
    ck_assert_msg(frozen == 503, "a sale while Redis was frozen answered %d: %s", frozen,
                  frozen_body);
    ck_assert_int_eq((int)harness_redis_int(redis_port, "EXISTS inventory001"), 0);
    /* The first sales after: the seed is made before them, never a missing key. */
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/expiring", NULL, NULL, &r),
                     200);
    ck_assert_msg(strcmp(harness_json_str(r.body, "status"), "sold") == 0, "%s", r.body);
    ck_assert_int_eq((int)harness_json_num(r.body, "unit"), 200);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
    ck_assert_int_eq((int)harness_json_num(r.body, "unit"), 199);
    ck_assert_int_eq((int)harness_redis_int(redis_port, "GET inventory001:initial"), 200);
    unlink(log);
}
END_TEST

/* ---- the workers -----------------------------------------------------------
 * Requests that may wait on a store or a lock are answered by
 * server.workers threads, the rest on the event loops (src/http.c). */

static void setup_redis_only(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    snprintf(redis_set, sizeof(redis_set), "redis.port=%d", redis_port);
    inst_pid = 0;
}

/* An instance with that many workers and lock.wait-ms=1500, faults on. */
static void start_with_workers(int workers) {
    char w[64];
    snprintf(w, sizeof(w), "server.workers=%d", workers);
    inst_port = harness_free_port();
    const char *sets[] = {
        redis_set, "redis.timeout=500", "lock.wait-ms=1500", "faults.enabled=true", w, NULL};
    inst_pid = harness_inventoryd_start(inst_port, sets);
    ck_assert_int_gt(inst_pid, 0);
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r), 200);
}

/* Starts a sale of the local lock that holds it hold_ms, and waits until it
 * is inside: with one worker, that worker is then busy. */
static void hold_a_worker(struct harness_bg *holder, int hold_ms) {
    char path[96];
    snprintf(path, sizeof(path), "/inventory/sale/local?hold_ms=%d", hold_ms);
    harness_bg_start(holder, inst_port, path, 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "the holder never got inside");
}

/* One worker, held by a sale inside its lock for 1.5 s: the list of
 * strategies, the metrics, the lab's settings, a 404 and an atomic sale
 * (one script, sent pipelined) need no worker and are answered at once; a
 * sale of another strategy, even one that takes no lock, waits for the
 * worker and is then answered. */
START_TEST(test_with_every_worker_busy_what_waits_for_no_lock_is_answered_at_once) {
    start_with_workers(1);
    struct harness_bg holder, queued;
    hold_a_worker(&holder, 1500);
    harness_bg_start(&queued, inst_port, "/inventory/sale/none", 0);
    const char *paths[] = {"/strategies", "/metrics", "/lab", "/nowhere", "/inventory/sale/atomic"};
    const int codes[] = {200, 200, 200, 404, 200};
    for (int i = 0; i < 5; i++) {
        struct httpc_response r;
        int64_t t0 = mclock_ms();
        ck_assert_int_eq(harness_http(inst_port, "GET", paths[i], NULL, NULL, &r), codes[i]);
        ck_assert_msg(mclock_ms() - t0 < 500, "%s took %lld ms while the worker was busy", paths[i],
                      (long long)(mclock_ms() - t0));
    }
    ck_assert_msg(harness_redis_int(redis_port, "HLEN inventory001:holders") == 1,
                  "the holder left before the loop's answers were checked");
    harness_bg_join(&holder);
    harness_bg_join(&queued);
    ck_assert_int_eq(holder.status, 200);
    ck_assert_msg(queued.status == 200, "the queued sale: %d %s", queued.status, queued.body);
    ck_assert_msg(queued.took_ms >= 700,
                  "the sale of none took %lld ms: it did not wait for the "
                  "one worker",
                  (long long)queued.took_ms);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 3);
}
END_TEST

/* Two workers, lock.wait-ms=1500. A holds the lock 4 s in one worker; B
 * waits for it in the other and gives up after 1.5 s; C, sent 200 ms after
 * B, waits for a worker until B gives up. C's wait for the lock counts from
 * its arrival, so it too answers lock_timeout about 1.5 s after it was sent,
 * not 1.3 s in the queue plus 1.5 s more. */
START_TEST(test_a_sale_queued_for_a_worker_waits_for_its_lock_no_longer_than_lock_wait_ms) {
    start_with_workers(2);
    struct harness_bg a, b, c;
    harness_bg_start(&a, inst_port, "/inventory/sale/setnx-spin?hold_ms=4000", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "A never got inside");
    harness_bg_start(&b, inst_port, "/inventory/sale/setnx-spin", 0);
    mclock_sleep_ms(200);
    harness_bg_start(&c, inst_port, "/inventory/sale/setnx-spin", 0);
    harness_bg_join(&b);
    harness_bg_join(&c);
    harness_bg_join(&a);
    ck_assert_int_eq(a.status, 200);
    ck_assert_msg(b.status == 503 && strstr(b.body, "lock_timeout"), "B: %d %s", b.status, b.body);
    ck_assert_msg(c.status == 503 && strstr(c.body, "lock_timeout"), "C: %d %s", c.status, c.body);
    ck_assert_msg(c.took_ms >= 1000, "C took %lld ms: it did not wait for a worker",
                  (long long)c.took_ms);
    ck_assert_msg(c.took_ms < 2300,
                  "C took %lld ms: its wait for the lock did not count its time in the queue",
                  (long long)c.took_ms);
}
END_TEST

/* One worker: a sale inside its lock, one queued behind it; SIGTERM. Both
 * are answered, then the process exits 0. */
START_TEST(test_sigterm_answers_the_sales_queued_for_a_worker_before_exiting) {
    start_with_workers(1);
    struct harness_bg holder, queued;
    hold_a_worker(&holder, 800);
    harness_bg_start(&queued, inst_port, "/inventory/sale/owner-lua", 0);
    mclock_sleep_ms(100);
    kill(inst_pid, SIGTERM);
    harness_bg_join(&holder);
    harness_bg_join(&queued);
    expect_clean_exit();
    ck_assert_int_eq(holder.status, 200);
    ck_assert_msg(queued.status == 200 && strstr(queued.body, "\"status\":\"sold\""),
                  "the queued sale: %d %s", queued.status, queued.body);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 2);
}
END_TEST

/* A keep-alive client sending GET /inventory (a worker's request) back to
 * back until stop is set or its connection closes. */
struct pounder {
    int port;
    atomic_int stop;
    long answered;
    pthread_t thread;
};

static void *pound(void *arg) {
    struct pounder *p = arg;
    struct httpc *c = httpc_create("127.0.0.1", p->port, 2000);
    struct httpc_response r;
    while (c && !atomic_load(&p->stop) &&
           httpc_request(c, "GET", "/inventory", NULL, NULL, &r) == 0)
        p->answered++;
    httpc_free(c);
    return NULL;
}

/* SIGTERM while keep-alive clients send one request after another: the
 * requests they send once the workers are stopping are answered on the
 * loop, and the process exits 0. Before, such a request was parked with no
 * worker left to take it, and libmicrohttpd aborted the process
 * ("MHD_stop_daemon() called while we have suspended connections"). */
START_TEST(test_sigterm_under_keep_alive_requests_exits_cleanly) {
    start_with_workers(1);
    enum { N = 2 };
    struct pounder p[N];
    for (int i = 0; i < N; i++) {
        p[i].port = inst_port;
        atomic_init(&p[i].stop, 0);
        p[i].answered = 0;
        ck_assert_int_eq(pthread_create(&p[i].thread, NULL, pound, &p[i]), 0);
    }
    mclock_sleep_ms(300);
    kill(inst_pid, SIGTERM);
    expect_clean_exit();
    long answered = 0;
    for (int i = 0; i < N; i++) {
        atomic_store(&p[i].stop, 1);
        pthread_join(p[i].thread, NULL);
        answered += p[i].answered;
    }
    ck_assert_msg(answered > 10, "the clients were answered %ld times before the signal", answered);
}
END_TEST

/* GET /healthz, timed: its status, and its time in *took_ms. */
static int healthz_timed(int64_t *took_ms, struct httpc_response *r) {
    int64_t t0 = mclock_ms();
    int code = harness_http(inst_port, "GET", "/healthz", NULL, NULL, r);
    *took_ms = mclock_ms() - t0;
    return code;
}

/* One worker. A /healthz answered by a PING makes the next ones, for a
 * second, answers of the loop from it: with the worker held by a sale, one
 * is answered at once and says how old its PING is. Past that second the
 * answer needs a PING again, so it waits for the worker. */
START_TEST(test_healthz_is_answered_on_the_loop_for_a_second_after_a_ping) {
    start_with_workers(1);
    struct httpc_response r;
    int64_t took;
    ck_assert_int_eq(healthz_timed(&took, &r), 200);
    int64_t pinged = mclock_ms();
    ck_assert_msg(strstr(r.body, "Redis answers"), "the first /healthz: %s", r.body);
    struct harness_bg holder;
    hold_a_worker(&holder, 2500);
    ck_assert_msg(mclock_ms() - pinged < 900, "the holder took %lld ms to get inside",
                  (long long)(mclock_ms() - pinged));
    ck_assert_int_eq(healthz_timed(&took, &r), 200);
    ck_assert_msg(took < 300, "/healthz took %lld ms with the worker busy, its PING %lld ms old",
                  (long long)took, (long long)(mclock_ms() - pinged));
    ck_assert_msg(strstr(r.body, "Redis answered a PING "), "the loop's /healthz: %s", r.body);
    mclock_sleep_ms(1100 - (mclock_ms() - pinged));
    ck_assert_msg(harness_redis_int(redis_port, "HLEN inventory001:holders") == 1,
                  "the holder left before the PING went stale");
    ck_assert_int_eq(healthz_timed(&took, &r), 200);
    ck_assert_msg(took >= 500,
                  "/healthz %lld ms after its PING took %lld ms: it did not wait for the worker",
                  (long long)(mclock_ms() - pinged), (long long)took);
    ck_assert_msg(strstr(r.body, "Redis answers"), "the stale /healthz: %s", r.body);
    harness_bg_join(&holder);
    ck_assert_int_eq(holder.status, 200);
}
END_TEST

/* A /healthz right after a PING, but after a connection to Redis was found
 * broken since (a sale, with Redis stopped), PINGs again: 503, not the
 * loop's 200 from before the failure. */
START_TEST(test_healthz_after_a_redis_failure_pings_again) {
    start_with_workers(2);
    struct httpc_response r;
    int64_t took;
    ck_assert_int_eq(healthz_timed(&took, &r), 200);
    ck_assert_int_eq(healthz_timed(&took, &r), 200);
    ck_assert_msg(strstr(r.body, "Redis answered a PING "), "the second /healthz: %s", r.body);
    harness_stop(redis_pid);
    redis_pid = 0;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 503);
    ck_assert_int_eq(healthz_timed(&took, &r), 503);
    ck_assert_msg(strstr(r.body, "backend_unavailable"), "/healthz with Redis stopped: %s", r.body);
}
END_TEST

/* Sends "GET path" on a connection of its own, keep-alive as a browser's,
 * and reads until the server closes it or 3 s pass. Returns the bytes read
 * (0: closed unanswered, or reset); *closed says whether the server closed
 * the connection within the 3 s. */
static int raw_get(int port, const char *path, char *ans, size_t len, int *closed) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0), got = 0;
    struct timeval tv = {.tv_sec = 3};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    *closed = 0;
    ans[0] = '\0';
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && write(fd, req, (size_t)n) == n) {
        for (;;) {
            ssize_t r = read(fd, ans + got, len - 1 - (size_t)got);
            if (r <= 0) {
                *closed = r == 0 || errno == ECONNRESET;
                break;
            }
            got += (int)r;
            ans[got] = '\0';
            if ((size_t)got == len - 1) break;
        }
    }
    close(fd);
    return got;
}

/* server.max-connections=8: eight keep-alive connections, each answered,
 * hold every slot. A ninth is answered at once: 503 too_many_connections,
 * with Retry-After and Connection: close, then closed; it is never dropped
 * unanswered (libmicrohttpd's own limit closed it without a word). The
 * eight are still served on their connections, and once one of them has
 * closed, a new connection is served again. */
START_TEST(test_past_max_connections_a_new_connection_gets_a_fast_503_never_a_drop) {
    enum { N = 8 };
    inst_port = harness_free_port();
    const char *sets[] = {redis_set, "server.max-connections=8", NULL};
    inst_pid = harness_inventoryd_start(inst_port, sets);
    ck_assert_int_gt(inst_pid, 0);
    struct httpc *c[N];
    struct httpc_response r;
    for (int i = 0; i < N; i++) {
        c[i] = httpc_create("127.0.0.1", inst_port, 5000);
        ck_assert_msg(httpc_request(c[i], "GET", "/strategies", NULL, NULL, &r) == 0 &&
                          r.status == 200,
                      "held connection %d was not served: %s", i, httpc_errstr(c[i]));
    }
    char ans[4096];
    int closed;
    int64_t t0 = mclock_ms();
    int got = raw_get(inst_port, "/strategies", ans, sizeof(ans), &closed);
    int64_t took = mclock_ms() - t0;
    ck_assert_msg(got > 0, "the ninth connection was dropped unanswered (%s after %lld ms)",
                  closed ? "closed" : "no answer", (long long)took);
    ck_assert_msg(strncmp(ans, "HTTP/1.1 503", 12) == 0, "the ninth connection got: %.200s", ans);
    ck_assert_msg(strstr(ans, "\"status\":\"too_many_connections\""), "503 body: %s", ans);
    ck_assert_msg(strstr(ans, "server.max-connections"), "the 503 does not name the key: %s", ans);
    ck_assert_msg(strcasestr(ans, "\r\nRetry-After: 1\r\n"), "no Retry-After: %s", ans);
    ck_assert_msg(strcasestr(ans, "\r\nConnection: close\r\n"), "no Connection: close: %s", ans);
    ck_assert_msg(closed, "the ninth connection was left open after its 503");
    ck_assert_msg(took < 1000, "the 503 took %lld ms", (long long)took);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(httpc_request(c[i], "GET", "/strategies", NULL, NULL, &r) == 0 &&
                          r.status == 200 && httpc_connects(c[i]) == 1,
                      "held connection %d lost its slot: %s", i, httpc_errstr(c[i]));
    }
    httpc_free(c[0]);
    int status = 0;
    for (int64_t end = mclock_ms() + 3000; mclock_ms() < end; mclock_sleep_ms(50)) {
        raw_get(inst_port, "/strategies", ans, sizeof(ans), &closed);
        status = strncmp(ans, "HTTP/1.1 ", 9) == 0 ? atoi(ans + 9) : 0;
        if (status == 200) break;
    }
    ck_assert_msg(status == 200, "a slot freed was not given to a new connection: %.200s", ans);
    for (int i = 1; i < N; i++) httpc_free(c[i]);
}
END_TEST

/* redis.unix-socket: an instance whose redis.port leads nowhere sells
 * through the socket, with a lock that waits on pub/sub (its subscriber
 * dials the same way), and /healthz says Redis answers. */
START_TEST(test_redis_unix_socket_is_used_for_every_connection) {
    harness_stop(redis_pid);
    char sock[128], sock_set[160], nowhere[64];
    snprintf(sock, sizeof(sock), "/tmp/inventoryd-check-%d.sock", (int)getpid());
    const char *args[] = {"--unixsocket", sock, "--unixsocketperm", "700", NULL};
    redis_pid = harness_redis_start_args(0, &redis_port, args);
    ck_assert_int_gt(redis_pid, 0);
    snprintf(sock_set, sizeof(sock_set), "redis.unix-socket=%s", sock);
    snprintf(nowhere, sizeof(nowhere), "redis.port=%d", harness_free_port());
    inst_port = harness_free_port();
    const char *sets[] = {nowhere, sock_set, "redis.timeout=500", NULL};
    inst_pid = harness_inventoryd_start(inst_port, sets);
    ck_assert_int_gt(inst_pid, 0);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/healthz", NULL, NULL, &r), 200);
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":10}", &r), 200);
    const char *paths[] = {"/inventory/sale/atomic", "/inventory/sale/redisson",
                           "/inventory/sale/owner-lua"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(harness_http(inst_port, "GET", paths[i], NULL, NULL, &r), 200);
        ck_assert_msg(strstr(r.body, "\"status\":\"sold\""), "%s: %s", paths[i], r.body);
    }
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 7);
    unlink(sock);
}
END_TEST

Suite *http_suite(void) {
    Suite *s = suite_create("http");
    TCase *core = tcase_create("Core");
    tcase_add_checked_fixture(core, setup, teardown);
    tcase_set_timeout(core, 60);
    tcase_add_test(core, test_a_sale_answers_the_contract_json);
    tcase_add_test(core, test_the_demo_path_and_text_format_give_the_demo_line);
    tcase_add_test(core, test_reset_inventory_and_audit_agree_with_the_sales_made);
    tcase_add_test(core, test_strategies_healthz_and_metrics_answer);
    tcase_add_test(core, test_local_oversells_across_two_instances);
    tcase_add_test(core, test_a_sale_waiting_for_a_lock_does_not_stall_other_requests);
    tcase_add_test(core, test_three_hundred_keep_alive_connections_are_held_at_once);
    tcase_add_test(core, test_a_missing_stock_is_seeded_at_start_up_and_an_existing_one_kept);
    suite_add_tcase(s, core);
    TCase *errors = tcase_create("Errors");
    tcase_add_checked_fixture(errors, setup, teardown);
    tcase_set_timeout(errors, 60);
    tcase_add_test(errors, test_an_unknown_strategy_is_404_and_lists_the_known_ones);
    tcase_add_test(errors, test_unknown_paths_and_wrong_methods_get_json_errors);
    tcase_add_test(errors, test_a_bad_reset_is_400_and_changes_nothing);
    tcase_add_test(errors, test_a_reset_whose_item_holds_an_escaped_nul_is_400_and_resets_nothing);
    tcase_add_test(errors, test_fault_parameters_are_checked_and_refused_while_faults_are_off);
    tcase_add_test(errors, test_a_bad_config_value_stops_start_up_naming_the_key_and_line);
    tcase_add_test(errors, test_a_port_in_use_is_a_clear_error);
    tcase_add_test(errors, test_server_connection_memory_kb_bounds_what_a_request_may_hold);
    tcase_add_test(errors, test_list_routes_prints_each_row_of_the_route_table_and_starts_nothing);
    tcase_add_test(errors, test_redis_password_and_database_are_used_and_the_password_never_logged);
    suite_add_tcase(s, errors);
    /* server.event-loop=poll: what the loops must keep, on the other way
     * of waiting (the tests of Core and Outage it could break). */
    TCase *poll = tcase_create("Poll");
    tcase_add_checked_fixture(poll, setup_poll, teardown);
    tcase_set_timeout(poll, 60);
    tcase_add_test(poll, test_a_sale_answers_the_contract_json);
    tcase_add_test(poll, test_a_sale_waiting_for_a_lock_does_not_stall_other_requests);
    tcase_add_test(poll, test_three_hundred_keep_alive_connections_are_held_at_once);
    tcase_add_test(
        poll, test_pipelined_sales_whose_replies_were_lost_answer_503_and_are_never_sent_again);
    tcase_add_test(poll, test_sigterm_answers_the_pipelined_sales_in_flight_before_exiting);
    suite_add_tcase(s, poll);
    TCase *outage = tcase_create("Outage");
    tcase_add_checked_fixture(outage, setup, teardown);
    tcase_set_timeout(outage, 60);
    tcase_add_test(outage, test_redis_stopped_gives_503_then_sales_recover);
    tcase_add_test(outage, test_sigterm_lets_a_sale_in_flight_finish_then_exits_cleanly);
    tcase_add_test(outage, test_sigint_lets_a_sale_in_flight_finish_then_exits_cleanly);
    tcase_add_test(
        outage, test_pipelined_sales_whose_replies_were_lost_answer_503_and_are_never_sent_again);
    tcase_add_test(outage, test_sigterm_answers_the_pipelined_sales_in_flight_before_exiting);
    tcase_add_test(outage,
                   test_a_sale_whose_write_reply_was_lost_answers_503_and_is_never_sent_again);
    suite_add_tcase(s, outage);
    TCase *metrics = tcase_create("Metrics");
    tcase_add_checked_fixture(metrics, setup_metrics, teardown);
    tcase_set_timeout(metrics, 60);
    tcase_add_test(metrics, test_metrics_count_what_the_sales_did);
    tcase_add_test(metrics, test_a_reset_clears_the_probe_the_lock_and_the_counters);
    suite_add_tcase(s, metrics);
    TCase *contract = tcase_create("FenceReset");
    tcase_add_checked_fixture(contract, setup_metrics, teardown);
    tcase_set_timeout(contract, 60);
    tcase_add_test(contract, test_a_reset_never_lowers_the_fencing_token);
    tcase_add_test(contract, test_a_reset_of_another_item_leaves_the_held_global_lock_alone);
    suite_add_tcase(s, contract);
    TCase *admin = tcase_create("Admin");
    tcase_add_checked_fixture(admin, setup_admin, teardown_admin);
    tcase_set_timeout(admin, 90);
    tcase_add_test(
        admin,
        test_with_admin_token_set_a_reset_without_the_bearer_token_answers_401_and_changes_nothing);
    tcase_add_test(admin, test_with_admin_token_set_the_reset_works_with_the_token);
    tcase_add_test(admin, test_a_wrong_token_of_the_same_length_answers_401);
    tcase_add_test(admin, test_a_fault_parameter_without_the_token_answers_401_and_sells_nothing);
    tcase_add_test(admin, test_a_plain_sale_and_every_read_need_no_token);
    tcase_add_test(admin, test_post_lab_runs_without_the_token_answers_401_and_starts_no_run);
    tcase_add_test(
        admin, test_a_lab_run_started_with_the_token_resets_and_sends_its_fault_parameters_with_it);
    tcase_add_test(
        admin, test_start_up_refuses_faults_or_lab_on_0_0_0_0_without_a_token_naming_admin_token);
    tcase_add_test(admin, test_inventoryd_admin_token_in_the_environment_sets_admin_token);
    tcase_add_test(
        admin,
        test_off_loopback_a_reset_from_another_address_needs_the_token_even_with_lab_and_faults_off);
    tcase_add_test(admin, test_the_token_appears_in_no_answer_and_no_log_line);
    suite_add_tcase(s, admin);
    TCase *ready = tcase_create("Ready");
    tcase_add_checked_fixture(ready, setup_ready, teardown_ready);
    tcase_set_timeout(ready, 60);
    tcase_add_test(
        ready,
        test_with_fresh_redlock_masters_readyz_is_503_with_the_reason_until_a_redlock_sale_can_sell);
    tcase_add_test(ready, test_readyz_needs_a_quorum_of_redlock_masters_and_names_those_down);
    tcase_add_test(ready,
                   test_readyz_is_503_naming_redis_while_it_is_frozen_and_200_once_it_answers);
    tcase_add_test(ready, test_a_seed_missed_at_start_up_is_made_before_readyz_says_ready);
    tcase_add_test(ready,
                   test_a_sale_sent_before_a_missed_seed_is_made_sells_from_the_seeded_stock);
    suite_add_tcase(s, ready);
    TCase *workers = tcase_create("Workers");
    tcase_add_checked_fixture(workers, setup_redis_only, teardown);
    tcase_set_timeout(workers, 60);
    tcase_add_test(workers, test_with_every_worker_busy_what_waits_for_no_lock_is_answered_at_once);
    tcase_add_test(workers,
                   test_a_sale_queued_for_a_worker_waits_for_its_lock_no_longer_than_lock_wait_ms);
    tcase_add_test(workers, test_sigterm_answers_the_sales_queued_for_a_worker_before_exiting);
    tcase_add_test(workers, test_redis_unix_socket_is_used_for_every_connection);
    tcase_add_test(workers, test_sigterm_under_keep_alive_requests_exits_cleanly);
    tcase_add_test(workers,
                   test_past_max_connections_a_new_connection_gets_a_fast_503_never_a_drop);
    tcase_add_test(workers, test_healthz_is_answered_on_the_loop_for_a_second_after_a_ping);
    tcase_add_test(workers, test_healthz_after_a_redis_failure_pings_again);
    suite_add_tcase(s, workers);
    return s;
}
