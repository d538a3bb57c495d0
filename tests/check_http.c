/* check_http.c -- the inventoryd binary over real HTTP, against a real
 * redis-server; every process is started and stopped by the harness. */
#include <check.h>
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check_main.h"
#include "harness.h"
#include "lock.h"
#include "mclock.h"

static pid_t redis_pid, inst_pid;
static int redis_port, inst_port;
static char redis_set[64];

static void start_instance(pid_t *pid, int *port, int faults) {
    *port = harness_free_port();
    const char *sets[] = {redis_set, "redis.timeout=500", "lock.wait-ms=3000",
                          faults ? "faults.enabled=true" : "faults.enabled=false", NULL};
    *pid = harness_inventoryd_start(*port, sets);
    ck_assert_int_gt(*pid, 0);
}

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    snprintf(redis_set, sizeof(redis_set), "redis.port=%d", redis_port);
    start_instance(&inst_pid, &inst_port, 1);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r), 200);
}

static void teardown(void) {
    harness_stop(inst_pid);
    harness_stop(redis_pid);
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

START_TEST(test_a_sale_answers_the_contract_json) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    ck_assert_str_eq(str(j, "status"), "sold");
    ck_assert_int_eq(num(j, "remaining"), 199);
    ck_assert_int_eq(num(j, "unit"), 200);
    ck_assert_int_gt(strlen(str(j, "order")), 0);
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
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_the_demo_path_and_text_format_give_the_demo_line) {
    struct httpc_response r;
    char want[128];
    ck_assert_int_eq(harness_http(inst_port, "GET", "/redis/distributed/lock/inventory/sale?format=text",
                                  NULL, NULL, &r), 200);
    snprintf(want, sizeof(want), "成功卖出一个商品,库存剩余: 199\t服务端口号:%d", inst_port);
    ck_assert_str_eq(r.body, want);
    ck_assert_ptr_nonnull(strstr(r.content_type, "text/plain"));
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale", "Accept: text/plain\r\n", NULL, &r), 200);
    snprintf(want, sizeof(want), "成功卖出一个商品,库存剩余: 198\t服务端口号:%d", inst_port);
    ck_assert_str_eq(r.body, want);
    harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":0}", &r);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/local?format=text", NULL, NULL, &r), 200);
    ck_assert_str_eq(r.body, "商品卖完了");
}
END_TEST

START_TEST(test_reset_inventory_and_audit_agree_with_the_sales_made) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\": 5}", &r), 200);
    for (int i = 0; i < 7; i++) harness_http(inst_port, "GET", "/inventory/sale/local", NULL, NULL, &r);
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
    ck_assert_int_eq(cJSON_GetArraySize(list), lock_type_count());
    for (int i = 0; lock_types[i]; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        ck_assert_str_eq(str(e, "name"), lock_types[i]->name);
        ck_assert_int_gt(strlen(str(e, "flaw")), 0);
    }
    cJSON_Delete(j);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/healthz", NULL, NULL, &r), 200);
    harness_http(inst_port, "GET", "/inventory/sale/atomic", NULL, NULL, &r);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/metrics", NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "inventoryd_sales_total{strategy=\"atomic\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(r.body, "inventoryd_lock_wait_ms_bucket{strategy=\"local\",le=\"+Inf\"}"));
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
    harness_bg_start(&b, b_port, "/inventory/sale/local", 100);
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
    harness_bg_start(&waiter, inst_port, "/inventory/sale/local", 100);
    mclock_sleep_ms(300);
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
    ck_assert_int_ge(waiter.took_ms, 1000);   /* it did wait for the holder */
}
END_TEST

/* Each client opens its connection in the first round and must still have
 * it in the second (the client would reopen a closed one silently, so the
 * number of connects it made is what tells). */
START_TEST(test_three_hundred_keep_alive_connections_are_held_at_once) {
    enum { N = 300 };
    struct httpc **c = calloc(N, sizeof(*c));
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
        ck_assert_msg(httpc_connects(c[i]) == 1, "client %d connected %ld times: the server "
                      "closed its keep-alive connection", i, httpc_connects(c[i]));
    for (int i = 0; i < N; i++) httpc_free(c[i]);
    free(c);
}
END_TEST

START_TEST(test_an_unknown_strategy_is_404_and_lists_the_known_ones) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/zookeeper", NULL, NULL, &r), 404);
    cJSON *j = json(&r);
    ck_assert_str_eq(str(j, "status"), "unknown_strategy");
    ck_assert_ptr_nonnull(strstr(str(j, "error"), "zookeeper"));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "strategies")), lock_type_count());
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_unknown_paths_and_wrong_methods_get_json_errors) {
    expect_error(404, "not_found", "GET", "/nowhere", NULL);
    expect_error(404, "not_found", "GET", "/inventory/sale/a/b", NULL);
    expect_error(405, "method_not_allowed", "DELETE", "/inventory", NULL);
    struct httpc_response r;
    harness_http(inst_port, "GET", "/inventory/reset", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_str_eq(r.allow, "POST");
}
END_TEST

START_TEST(test_a_bad_reset_is_400_and_changes_nothing) {
    const char *bodies[] = {"", "abc", "{}", "{\"stock\":-1}", "{\"stock\":1.5}",
                            "{\"stock\":10000000000}", "{\"stock\":\"5\"}", "[200]", NULL};
    for (int i = 0; bodies[i]; i++)
        expect_error(400, "bad_request", "POST", "/inventory/reset", bodies[i][0] ? bodies[i] : NULL);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 200);
    char big[8192];
    memset(big, ' ', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    expect_error(413, "payload_too_large", "POST", "/inventory/reset", big);
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
    ck_assert_int_eq(run_binary("--set lock.strategy=zookeeper", out, sizeof(out)), 2);
    ck_assert_ptr_nonnull(strstr(out, "lock.strategy"));
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
    ck_assert_int_eq(harness_http(inst_port, "POST", "/inventory/reset", NULL, "{\"stock\":3}", &r), 200);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/inventory/sale/local", NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"sold\""));
}
END_TEST

START_TEST(test_sigterm_lets_a_sale_in_flight_finish_then_exits_cleanly) {
    struct harness_bg sale;
    harness_bg_start(&sale, inst_port, "/inventory/sale/local?hold_ms=800", 0);
    mclock_sleep_ms(200);
    kill(inst_pid, SIGTERM);
    harness_bg_join(&sale);
    int st = 0;
    ck_assert_int_eq(waitpid(inst_pid, &st, 0), inst_pid);
    inst_pid = 0;
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    ck_assert_int_eq(sale.status, 200);
    ck_assert_ptr_nonnull(strstr(sale.body, "\"status\":\"sold\""));
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 1);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001:holders"), 0);
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
    snprintf(args, sizeof(args), "--set redis.port=%d --set redis.password=s3cret-pass --check-config", port);
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
    const char *bad_sets[] = {rp, "redis.password=wrong", NULL};
    pid_t good = harness_inventoryd_start(good_port, good_sets);
    pid_t bad = harness_inventoryd_start(bad_port, bad_sets);
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
    ck_assert_int_eq(reset, 200);
    ck_assert_int_eq(sale, 200);
    ck_assert_int_eq(in_db3, 8);                   /* the sale went to database 3 */
    ck_assert_int_eq(refused, 503);
    ck_assert_msg(strstr(why, "AUTH") != NULL, "got: %s", why);
    ck_assert_ptr_null(strstr(why, "wrong"));      /* the password is not echoed */
}
END_TEST

START_TEST(test_a_missing_stock_is_seeded_at_start_up_and_an_existing_one_kept) {
    harness_redis_int(redis_port, "DEL inventory001 inventory001:initial");
    const char *seven[] = {redis_set, "inventory.initial-stock=7", NULL};
    const char *nine[] = {redis_set, "inventory.initial-stock=9", NULL};
    int p1 = harness_free_port();
    pid_t i1 = harness_inventoryd_start(p1, seven);
    long long after_first = harness_redis_int(redis_port, "GET inventory001");
    int p2 = harness_free_port();
    pid_t i2 = harness_inventoryd_start(p2, nine);
    long long after_second = harness_redis_int(redis_port, "GET inventory001");
    long long initial = harness_redis_int(redis_port, "GET inventory001:initial");
    harness_stop(i1);
    harness_stop(i2);
    ck_assert_int_eq(after_first, 7);
    ck_assert_int_eq(after_second, 7);   /* never overwritten */
    ck_assert_int_eq(initial, 7);
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
    tcase_add_test(errors, test_fault_parameters_are_checked_and_refused_while_faults_are_off);
    tcase_add_test(errors, test_a_bad_config_value_stops_start_up_naming_the_key_and_line);
    tcase_add_test(errors, test_a_port_in_use_is_a_clear_error);
    tcase_add_test(errors, test_redis_password_and_database_are_used_and_the_password_never_logged);
    suite_add_tcase(s, errors);
    TCase *outage = tcase_create("Outage");
    tcase_add_checked_fixture(outage, setup, teardown);
    tcase_set_timeout(outage, 60);
    tcase_add_test(outage, test_redis_stopped_gives_503_then_sales_recover);
    tcase_add_test(outage, test_sigterm_lets_a_sale_in_flight_finish_then_exits_cleanly);
    suite_add_tcase(s, outage);
    return s;
}
