/* check_lab.c -- the lock lab over real HTTP: the page and its files, the
 * run endpoints (a load and named scenarios fired by the instance at
 * itself), their bounds, one run at a time (409), the result files, and
 * 404 for every run endpoint with lab.enabled=false. A real redis-server and
 * real inventoryd processes, started and stopped by the harness. */
#include <arpa/inet.h>
#include <check.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check_main.h"
#include "harness.h"
#include "lab.h"
#include "mclock.h"

static pid_t redis_pid, inst_pid;
static int redis_port, inst_port;
static char redis_set[64], dir_set[320], results_dir[256];

/* Starts the instance with lab.enabled=lab and faults.enabled=faults. */
static void start_instance(int lab, int faults) {
    inst_port = harness_free_port();
    const char *sets[] = {redis_set, "lock.ttl-ms=600", "lock.wait-ms=2000", dir_set,
                          lab ? "lab.enabled=true" : "lab.enabled=false",
                          faults ? "faults.enabled=true" : "faults.enabled=false", NULL};
    inst_pid = harness_inventoryd_start(inst_port, sets);
    ck_assert_int_gt(inst_pid, 0);
}

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    snprintf(redis_set, sizeof(redis_set), "redis.port=%d", redis_port);
    snprintf(results_dir, sizeof(results_dir), "/tmp/inventoryd-lab-results.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(results_dir));
    snprintf(dir_set, sizeof(dir_set), "lab.results-dir=%s", results_dir);
    inst_pid = 0;
}

static void teardown(void) {
    harness_stop(inst_pid);
    harness_stop(redis_pid);
    char path[320];
    snprintf(path, sizeof(path), "%s/demo.csv", results_dir);
    unlink(path);
    rmdir(results_dir);
}

/* GET path on a fresh connection, HTTP/1.0, into buf (head and body).
 * Returns the status. */
static int raw_get(const char *path, char *buf, size_t len) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)inst_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    size_t off = 0;
    ssize_t r;
    while (off + 1 < len && (r = read(fd, buf + off, len - 1 - off)) > 0) off += (size_t)r;
    buf[off] = '\0';
    close(fd);
    int status = 0;
    sscanf(buf, "HTTP/1.%*d %d", &status);
    return status;
}

static cJSON *json(const struct httpc_response *r) {
    cJSON *j = cJSON_Parse(r->body);
    ck_assert_msg(j != NULL, "not JSON: %s", r->body);
    return j;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    ck_assert_msg(cJSON_IsNumber(v), "no number \"%s\"", k);
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    ck_assert_msg(cJSON_IsString(v), "no string \"%s\"", k);
    return v->valuestring;
}

/* POST /lab/runs body; asserts 202 and returns the run's id. */
static int start_run(const char *body) {
    struct httpc_response r;
    int code = harness_http(inst_port, "POST", "/lab/runs", NULL, body, &r);
    ck_assert_msg(code == 202, "POST /lab/runs %s answered %d: %s", body, code, r.body);
    cJSON *j = json(&r);
    int id = (int)num(j, "id");
    ck_assert_str_eq(str(j, "state"), "running");
    cJSON_Delete(j);
    return id;
}

/* Polls GET /lab/runs/{id} until the run is no longer running; returns it. */
static cJSON *finished_run(int id, int timeout_ms) {
    char path[64];
    snprintf(path, sizeof(path), "/lab/runs/%d", id);
    int64_t deadline = mclock_ms() + timeout_ms;
    for (;;) {
        struct httpc_response r;
        ck_assert_int_eq(harness_http(inst_port, "GET", path, NULL, NULL, &r), 200);
        cJSON *j = json(&r);
        if (strcmp(str(j, "state"), "running") != 0) return j;
        cJSON_Delete(j);
        ck_assert_msg(mclock_ms() < deadline, "run %d still running after %d ms", id, timeout_ms);
        mclock_sleep_ms(50);
    }
}

/* Asserts that POST /lab/runs with body is refused with 400 naming what. */
static void refused(const char *body, const char *what) {
    struct httpc_response r;
    int code = harness_http(inst_port, "POST", "/lab/runs", NULL, body, &r);
    ck_assert_msg(code == 400, "POST /lab/runs %s answered %d: %s", body, code, r.body);
    cJSON *j = json(&r);
    ck_assert_str_eq(str(j, "status"), "bad_request");
    ck_assert_msg(strstr(str(j, "error"), what) != NULL, "'%s' does not mention %s", str(j, "error"), what);
    cJSON_Delete(j);
}

/* ---- Core ------------------------------------------------------------------ */

START_TEST(test_get_root_serves_the_page_with_a_content_security_policy_of_self) {
    start_instance(0, 0);
    static char buf[64 * 1024];
    ck_assert_int_eq(raw_get("/", buf, sizeof(buf)), 200);
    ck_assert_ptr_nonnull(strstr(buf, "Content-Type: text/html; charset=utf-8\r\n"));
    ck_assert_ptr_nonnull(strstr(buf, "Content-Security-Policy: default-src 'self'\r\n"));
    const char *body = strstr(buf, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    ck_assert_ptr_nonnull(strstr(body, "<script src=\"/lab/app.js\""));
    ck_assert_ptr_nonnull(strstr(body, "href=\"/lab/app.css\""));
    /* Nothing inline, nothing from elsewhere: */
    ck_assert_ptr_null(strstr(body, "<script>"));
    ck_assert_ptr_null(strstr(body, "<style"));
    ck_assert_ptr_null(strstr(body, " style="));
    ck_assert_ptr_null(strstr(body, "src=\"http"));
    ck_assert_ptr_null(strstr(body, "href=\"http"));
}
END_TEST

START_TEST(test_the_pages_script_style_and_icon_come_with_their_types) {
    start_instance(0, 0);
    static char buf[128 * 1024];
    const struct { const char *path, *type; } files[] = {
        {"/lab/app.js", "text/javascript; charset=utf-8"},
        {"/lab/app.css", "text/css; charset=utf-8"},
        {"/lab/icon.svg", "image/svg+xml"},
    };
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(raw_get(files[i].path, buf, sizeof(buf)), 200);
        char want[96];
        snprintf(want, sizeof(want), "Content-Type: %s\r\n", files[i].type);
        ck_assert_msg(strstr(buf, want) != NULL, "%s lacks %s", files[i].path, want);
        ck_assert_ptr_nonnull(strstr(buf, "X-Content-Type-Options: nosniff\r\n"));
    }
    /* The script calls only its own origin: its one absolute URL is the
     * SVG namespace, which is a name, not a request. */
    ck_assert_int_eq(raw_get("/lab/app.js", buf, sizeof(buf)), 200);
    for (char *p = buf; (p = strstr(p, "http")) != NULL; p += 4)
        ck_assert_msg(strncmp(p, "http://www.w3.org/2000/svg", 26) == 0, "app.js names %.40s", p);
    ck_assert_int_eq(raw_get("/lab/index.html", buf, sizeof(buf)), 404);
}
END_TEST

START_TEST(test_a_load_run_sells_exactly_the_stock_and_its_numbers_match_the_audit) {
    start_instance(1, 0);
    int id = start_run("{\"strategy\":\"atomic\",\"clients\":20,\"requests\":500,\"stock\":100}");
    cJSON *j = finished_run(id, 30000);
    ck_assert_str_eq(str(j, "state"), "done");
    ck_assert_int_eq((int)num(j, "done"), 500);
    ck_assert_int_eq((int)num(j, "sold"), 100);
    ck_assert_int_eq((int)num(j, "sold_out"), 400);
    ck_assert_int_eq((int)num(j, "errors"), 0);
    ck_assert_int_eq((int)num(j, "other"), 0);
    ck_assert(num(j, "p99_ms") >= num(j, "p50_ms") && num(j, "p50_ms") > 0);
    ck_assert(num(j, "elapsed_s") > 0 && num(j, "sales_per_s") > 0);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "audit");
    ck_assert(cJSON_IsObject(a));
    ck_assert_int_eq((int)num(a, "sold"), 100);
    ck_assert_int_eq((int)num(a, "stock"), 0);
    ck_assert_int_eq((int)num(a, "initial"), 100);
    cJSON_Delete(j);
    /* ...and the audit read now agrees. */
    ck_assert_int_eq((int)harness_audit(inst_port, "sold"), 100);

    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/runs", NULL, NULL, &r), 200);
    j = json(&r);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "running")));
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(j, "runs");
    ck_assert_int_eq(cJSON_GetArraySize(runs), 1);
    ck_assert_int_eq((int)num(cJSON_GetArrayItem(runs, 0), "id"), id);
    cJSON_Delete(j);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab", NULL, NULL, &r), 200);
    j = json(&r);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "enabled")));
    char self[64];
    snprintf(self, sizeof(self), "127.0.0.1:%d", inst_port);
    ck_assert_str_eq(str(j, "target"), self);    /* lab.target empty: this instance */
    ck_assert_int_eq((int)num(cJSON_GetObjectItemCaseSensitive(j, "bounds"), "clients"), LAB_CLIENTS_MAX);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_a_second_run_while_one_is_going_answers_409_with_a_json_error) {
    start_instance(1, 1);
    int id = start_run("{\"strategy\":\"owner-lua\",\"scenario\":\"long-hold\"}");
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "POST", "/lab/runs", NULL, "{\"strategy\":\"atomic\"}", &r), 409);
    ck_assert_ptr_nonnull(strstr(r.content_type, "application/json"));
    cJSON *j = json(&r);
    ck_assert_str_eq(str(j, "status"), "run_in_progress");
    char want[32];
    snprintf(want, sizeof(want), "run %d", id);
    ck_assert_ptr_nonnull(strstr(str(j, "error"), want));
    cJSON_Delete(j);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab", NULL, NULL, &r), 200);
    ck_assert_int_eq((int)harness_json_num(r.body, "running"), id);
    j = finished_run(id, 20000);
    ck_assert_str_eq(str(j, "state"), "done");
    cJSON_Delete(j);
    /* Once it is over, the next one starts. */
    j = finished_run(start_run("{\"strategy\":\"atomic\",\"clients\":2,\"requests\":10}"), 20000);
    ck_assert_str_eq(str(j, "state"), "done");
    cJSON_Delete(j);
}
END_TEST

/* Runs the slow-holder scenario with strategy; returns the audit's violations. */
static int slow_holder_violations(const char *strategy) {
    char body[128];
    snprintf(body, sizeof(body), "{\"strategy\":\"%s\",\"scenario\":\"slow-holder\"}", strategy);
    cJSON *j = finished_run(start_run(body), 20000);
    ck_assert_str_eq(str(j, "state"), "done");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "faults_refused")));
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
    ck_assert_int_eq(cJSON_GetArraySize(steps), 3);
    for (int i = 0; i < 3; i++) {
        const cJSON *st = cJSON_GetArrayItem(steps, i);
        ck_assert_int_eq((int)num(st, "status"), 200);
        ck_assert_str_eq(str(st, "word"), "sold");
        ck_assert(num(st, "sent_us") > 0);
    }
    ck_assert_str_eq(str(cJSON_GetArrayItem(steps, 0), "query"), "hold_ms=120&release_delay_ms=780");
    ck_assert_int_eq((int)num(cJSON_GetArrayItem(steps, 2), "at_ms"), 990);   /* 1.65 x 600 */
    int v = (int)num(cJSON_GetObjectItemCaseSensitive(j, "audit"), "violations");
    cJSON_Delete(j);
    return v;
}

START_TEST(test_the_slow_holder_scenario_shows_expirings_flaw_and_owner_lua_fixes_it) {
    start_instance(1, 1);
    ck_assert_int_ge(slow_holder_violations("expiring"), 1);
    ck_assert_int_eq(slow_holder_violations("owner-lua"), 0);
}
END_TEST

START_TEST(test_the_scenarios_are_listed_with_their_times_for_this_ttl) {
    start_instance(1, 0);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/scenarios", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    ck_assert_int_eq((int)num(j, "ttl_ms"), 600);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "scenarios"), *sc;
    int found = 0;
    cJSON_ArrayForEach(sc, list) {
        if (strcmp(str(sc, "name"), "overrun") != 0) continue;
        found = 1;
        ck_assert_str_eq(str(sc, "fixed_by"), "watchdog");
        const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sc, "steps"), 0);
        ck_assert_int_eq((int)num(a, "hold_ms"), 900);   /* 1.5 x 600 */
    }
    ck_assert(found);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_results_files_come_from_lab_results_dir_and_only_those_named) {
    start_instance(1, 0);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/demo.csv", NULL, NULL, &r), 404);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "not_found");
    char path[320];
    snprintf(path, sizeof(path), "%s/demo.csv", results_dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("strategy,sold\natomic,200\n", f);
    fclose(f);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/demo.csv", NULL, NULL, &r), 200);
    ck_assert_str_eq(r.content_type, "text/csv; charset=utf-8");
    ck_assert_str_eq(r.body, "strategy,sold\natomic,200\n");
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/matrix.csv", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/../results/demo.csv", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/%2e%2e%2fdemo.csv", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "results");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "demo.csv")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "matrix.csv")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "campaign.csv")));
    cJSON_Delete(j);
    /* the campaign's table, and its counterexample as JSON (the Campaigns view) */
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/campaign.csv", NULL, NULL, &r), 404);
    const char *csv = "strategy,mix,seeds,violating_seeds,rate,ci_low,ci_high,covered_seeds,"
                      "first_violating_seed,sold_twice_total\nfenced,partition,30,0,0.0000,0.0000,0.1135,"
                      "12,,0\n";
    snprintf(path, sizeof(path), "%s/campaign.csv", results_dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(csv, f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/campaign-counterexample.json", results_dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"strategy\":\"owner-lua\",\"events\":[]}\n", f);
    fclose(f);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/campaign.csv", NULL, NULL, &r), 200);
    ck_assert_str_eq(r.content_type, "text/csv; charset=utf-8");
    ck_assert_str_eq(r.body, csv);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/campaign-counterexample.json", NULL, NULL, &r), 200);
    ck_assert_str_eq(r.content_type, "application/json; charset=utf-8");
    ck_assert_str_eq(harness_json_str(r.body, "strategy"), "owner-lua");
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/campaign.md", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab", NULL, NULL, &r), 200);
    j = json(&r);
    res = cJSON_GetObjectItemCaseSensitive(j, "results");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "campaign.csv")));
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "campaign-counterexample.json")));
    cJSON_Delete(j);
}
END_TEST

/* ---- Limits ---------------------------------------------------------------- */

START_TEST(test_clients_requests_stock_and_names_out_of_bounds_are_refused_with_400) {
    start_instance(1, 0);
    refused("{\"strategy\":\"atomic\",\"clients\":0}", "\"clients\"");
    refused("{\"strategy\":\"atomic\",\"clients\":501}", "from 1 to 500");
    refused("{\"strategy\":\"atomic\",\"clients\":2.5}", "\"clients\"");
    refused("{\"strategy\":\"atomic\",\"clients\":\"9\"}", "\"clients\"");
    refused("{\"strategy\":\"atomic\",\"requests\":0}", "\"requests\"");
    refused("{\"strategy\":\"atomic\",\"requests\":20001}", "from 1 to 20000");
    refused("{\"strategy\":\"atomic\",\"stock\":-1}", "\"stock\"");
    refused("{\"strategy\":\"atomic\",\"stock\":1e12}", "\"stock\"");
    refused("{\"clients\":10}", "no \"strategy\"");
    refused("{\"strategy\":\"no-such-lock\"}", "unknown strategy");
    refused("{\"strategy\":7}", "\"strategy\"");
    refused("{\"strategy\":\"atomic\",\"scenario\":\"no-such\"}", "unknown scenario");
    refused("{\"strategy\":\"atomic\",\"scenario\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}", "\"scenario\"");
    refused("[1,2]", "not a JSON object");
    refused("not json", "not a JSON object");
    refused("", "not a JSON object");
    /* Nothing was started by any of them. */
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/runs", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "runs")), 0);
    cJSON_Delete(j);
    /* The bounds themselves are accepted. */
    j = finished_run(start_run("{\"strategy\":\"atomic\",\"clients\":500,\"requests\":500,\"stock\":0}"), 30000);
    ck_assert_int_eq((int)num(j, "sold_out"), 500);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_an_unknown_or_malformed_run_id_is_404) {
    start_instance(1, 0);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/runs/999", NULL, NULL, &r), 404);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "not_found");
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/runs/abc", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/runs/1234567890", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_http(inst_port, "DELETE", "/lab/runs", NULL, NULL, &r), 405);
    ck_assert_str_eq(r.allow, "GET, POST");
}
END_TEST

START_TEST(test_with_lab_enabled_false_every_run_endpoint_is_404_and_the_page_is_still_served) {
    start_instance(0, 1);
    struct httpc_response r;
    const char *paths[] = {"/lab/runs", "/lab/runs/1", "/lab/scenarios", "/lab/results/demo.csv"};
    ck_assert_int_eq(harness_http(inst_port, "POST", "/lab/runs", NULL, "{\"strategy\":\"atomic\"}", &r), 404);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "not_found");
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(harness_http(inst_port, "GET", paths[i], NULL, NULL, &r), 404);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "not_found");
    }
    ck_assert_int_eq(harness_http(inst_port, "DELETE", "/lab/runs", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "enabled")));
    cJSON_Delete(j);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/", NULL, NULL, &r), 200);
    /* Nothing was sold: no load was fired. */
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN inventory001:sold"), 0);
}
END_TEST

START_TEST(test_a_scenario_refused_with_403_says_faults_are_off) {
    start_instance(1, 0);
    cJSON *j = finished_run(start_run("{\"strategy\":\"none\",\"scenario\":\"race\"}"), 20000);
    ck_assert_str_eq(str(j, "state"), "done");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "faults_refused")));
    const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "steps"), 0);
    ck_assert_int_eq((int)num(a, "status"), 403);
    ck_assert_str_eq(str(a, "word"), "faults_disabled");
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_sigterm_during_a_run_stops_it_and_the_instance_exits_0) {
    start_instance(1, 0);
    start_run("{\"strategy\":\"owner-lua\",\"clients\":100,\"requests\":20000,\"stock\":100000}");
    mclock_sleep_ms(800);
    int64_t t0 = mclock_ms();
    kill(inst_pid, SIGTERM);
    int st = 0;
    while (waitpid(inst_pid, &st, WNOHANG) == 0) {
        ck_assert_msg(mclock_ms() - t0 < 15000, "still running 15 s after SIGTERM");
        mclock_sleep_ms(20);
    }
    inst_pid = 0;
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    /* It stopped early: not all 20000 sales were made. */
    long long sold = harness_redis_int(redis_port, "LLEN inventory001:sold");
    ck_assert(sold > 0 && sold < 20000);
}
END_TEST

Suite *lab_suite(void) {
    Suite *s = suite_create("lab");
    TCase *core = tcase_create("Core");
    tcase_add_checked_fixture(core, setup, teardown);
    tcase_set_timeout(core, 90);
    tcase_add_test(core, test_get_root_serves_the_page_with_a_content_security_policy_of_self);
    tcase_add_test(core, test_the_pages_script_style_and_icon_come_with_their_types);
    tcase_add_test(core, test_a_load_run_sells_exactly_the_stock_and_its_numbers_match_the_audit);
    tcase_add_test(core, test_a_second_run_while_one_is_going_answers_409_with_a_json_error);
    tcase_add_test(core, test_the_slow_holder_scenario_shows_expirings_flaw_and_owner_lua_fixes_it);
    tcase_add_test(core, test_the_scenarios_are_listed_with_their_times_for_this_ttl);
    tcase_add_test(core, test_results_files_come_from_lab_results_dir_and_only_those_named);
    suite_add_tcase(s, core);
    TCase *limits = tcase_create("Limits");
    tcase_add_checked_fixture(limits, setup, teardown);
    tcase_set_timeout(limits, 90);
    tcase_add_test(limits, test_clients_requests_stock_and_names_out_of_bounds_are_refused_with_400);
    tcase_add_test(limits, test_an_unknown_or_malformed_run_id_is_404);
    tcase_add_test(limits, test_with_lab_enabled_false_every_run_endpoint_is_404_and_the_page_is_still_served);
    tcase_add_test(limits, test_a_scenario_refused_with_403_says_faults_are_off);
    tcase_add_test(limits, test_sigterm_during_a_run_stops_it_and_the_instance_exits_0);
    suite_add_tcase(s, limits);
    return s;
}
