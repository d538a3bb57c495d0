/* check_lab.c -- the lock lab over real HTTP: the page and its files, the
 * run endpoints (a load and named scenarios fired by the instance at
 * itself), their bounds, one run at a time (409), the result files, and
 * 404 for every run endpoint with lab.enabled=false; then every scenario's
 * verdict through POST /lab/runs against two instances: each flaw strategy
 * shows "flaw shown" and each fix "fixed", with the shipped lock settings
 * (Shipped) and with lock.ttl-ms=1000 lock.wait-ms=500 (Verdicts), each
 * verdict checked against the holds and the audit it came from; a missed
 * window is "inconclusive", and a timeline that cannot fit the settings is
 * refused with a 400 naming the setting. A real redis-server and real
 * inventoryd processes, started and stopped by the harness. */
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

static pid_t redis_pid, inst_pid, inst2_pid;
static int redis_port, inst_port, inst2_port;
static char redis_set[64], dir_set[320], results_dir[256];

/* Starts the instance with lab.enabled=lab and faults.enabled=faults. */
static void start_instance(int lab, int faults) {
    inst_port = harness_free_port();
    const char *sets[] = {redis_set,
                          "lock.ttl-ms=600",
                          "lock.wait-ms=2000",
                          dir_set,
                          lab ? "lab.enabled=true" : "lab.enabled=false",
                          faults ? "faults.enabled=true" : "faults.enabled=false",
                          NULL};
    inst_pid = harness_inventoryd_start(inst_port, sets);
    ck_assert_int_gt(inst_pid, 0);
}

/* Starts the instance with runs and faults on and extra settings (NULL-
 * terminated), lab.target itself. */
static void start_instance_with(const char *const *extra) {
    inst_port = harness_free_port();
    const char *sets[16] = {redis_set, dir_set, "lab.enabled=true", "faults.enabled=true"};
    int n = 4;
    for (int i = 0; extra[i] && n < 15; i++) sets[n++] = extra[i];
    sets[n] = NULL;
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
    inst_pid = inst2_pid = 0;
}

static void teardown(void) {
    harness_stop(inst2_pid);
    harness_stop(inst_pid);
    harness_stop(redis_pid);
    const char *made[] = {"demo.csv", "campaign.csv", "campaign-counterexample.json"};
    char path[320];
    for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", results_dir, made[i]);
        unlink(path);
    }
    rmdir(results_dir);
}

/* GET path on a fresh connection, HTTP/1.0, into buf (head and body).
 * Returns the status. */
static int raw_get(const char *path, char *buf, size_t len) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)inst_port),
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
    ck_assert_msg(strstr(str(j, "error"), what) != NULL, "'%s' does not mention %s",
                  str(j, "error"), what);
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
    const struct {
        const char *path, *type;
    } files[] = {
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
    ck_assert_str_eq(str(j, "target"), self); /* lab.target empty: this instance */
    ck_assert_int_eq((int)num(cJSON_GetObjectItemCaseSensitive(j, "bounds"), "clients"),
                     LAB_CLIENTS_MAX);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_a_second_run_while_one_is_going_answers_409_with_a_json_error) {
    start_instance(1, 1);
    int id = start_run("{\"strategy\":\"owner-lua\",\"scenario\":\"long-hold\"}");
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/lab/runs", NULL, "{\"strategy\":\"atomic\"}", &r), 409);
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
        ck_assert_str_eq(str(sc, "window"), "A worked past one TTL while B waited for the lock");
        ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(sc, "refused")));
        const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sc, "steps"), 0);
        const cJSON *b = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sc, "steps"), 1);
        ck_assert_int_eq((int)num(a, "hold_ms"), 900); /* 1.5 x 600 */
        /* B's own wait: 1.5 x 600 + 1000 ms, plus one poll (lock.spin-sleep-ms 20). */
        ck_assert_int_eq((int)num(b, "wait_ms"), 1920);
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
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/matrix.csv", NULL, NULL, &r),
                     404);
    ck_assert_int_eq(
        harness_http(inst_port, "GET", "/lab/results/../results/demo.csv", NULL, NULL, &r), 404);
    ck_assert_int_eq(
        harness_http(inst_port, "GET", "/lab/results/%2e%2e%2fdemo.csv", NULL, NULL, &r), 404);
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "results");
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "demo.csv")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "matrix.csv")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "campaign.csv")));
    cJSON_Delete(j);
    /* the campaign's table, and its counterexample as JSON (the Campaigns view) */
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/campaign.csv", NULL, NULL, &r),
                     404);
    const char *csv =
        "strategy,mix,seeds,violating_seeds,rate,ci_low,ci_high,covered_seeds,"
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
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/campaign.csv", NULL, NULL, &r),
                     200);
    ck_assert_str_eq(r.content_type, "text/csv; charset=utf-8");
    ck_assert_str_eq(r.body, csv);
    ck_assert_int_eq(
        harness_http(inst_port, "GET", "/lab/results/campaign-counterexample.json", NULL, NULL, &r),
        200);
    ck_assert_str_eq(r.content_type, "application/json; charset=utf-8");
    ck_assert_str_eq(harness_json_str(r.body, "strategy"), "owner-lua");
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/results/campaign.md", NULL, NULL, &r),
                     404);
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
    refused("{\"strategy\":\"atomic\",\"scenario\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
            "\"scenario\"");
    /* session-lost ends a store session: a lock in Redis has none to end. */
    refused("{\"strategy\":\"expiring\",\"scenario\":\"session-lost\"}",
            "expiring keeps no such session: run it with zookeeper, zookeeper-fenced, mysql");
    /* cJSON would end the name at the NUL and read "atomic". */
    refused("{\"strategy\":\"atomic\\u0000x\"}", "NUL");
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
    j = finished_run(
        start_run("{\"strategy\":\"atomic\",\"clients\":500,\"requests\":500,\"stock\":0}"), 30000);
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
    ck_assert_int_eq(
        harness_http(inst_port, "POST", "/lab/runs", NULL, "{\"strategy\":\"atomic\"}", &r), 404);
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
    /* No verdict but inconclusive: the scenario never ran as written. */
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "verdict");
    ck_assert_str_eq(str(v, "result"), "inconclusive");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(v, "window_reached")));
    ck_assert_ptr_nonnull(strstr(str(v, "evidence"), "403 faults_disabled"));
    cJSON_Delete(j);
}
END_TEST

/* Starts the instance with sets, asserts that POST /lab/runs of scenario
 * sc is refused with 400 naming setting, and that GET /lab/scenarios
 * gives the same reason; then stops the instance. */
static void refused_at(const char *const *sets, const char *sc, const char *setting) {
    start_instance_with(sets);
    char body[96];
    snprintf(body, sizeof(body), "{\"strategy\":\"expiring\",\"scenario\":\"%s\"}", sc);
    refused(body, setting);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab/scenarios", NULL, NULL, &r), 200);
    cJSON *j = json(&r);
    const cJSON *x;
    int found = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(j, "scenarios")) {
        if (strcmp(str(x, "name"), sc) != 0) continue;
        found = 1;
        ck_assert_msg(strstr(str(x, "refused"), setting) != NULL, "%s: refused is %s", sc,
                      cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(x, "refused")));
    }
    ck_assert(found);
    cJSON_Delete(j);
    harness_stop(inst_pid);
    inst_pid = 0;
}

START_TEST(
    test_a_scenario_whose_timeline_cannot_fit_the_settings_is_refused_with_400_naming_the_setting) {
    /* A's stall is 1.2 x TTL = 1200 ms: more than the fault bound. */
    const char *hold[] = {"lock.ttl-ms=1000", "faults.max-hold-ms=1000", NULL};
    refused_at(hold, "slow-holder", "faults.max-hold-ms");
    /* The tightest margin, 0.2 x TTL, would be 20 ms. */
    const char *tiny[] = {"lock.ttl-ms=100", NULL};
    refused_at(tiny, "slow-holder", "lock.ttl-ms");
    /* overrun at 30 s would run past the lab's 60 s. */
    const char *huge[] = {"lock.ttl-ms=30000", NULL};
    refused_at(huge, "overrun", "lock.ttl-ms");
    /* A waiter that polls every 400 ms cannot take A's lock within 0.25 x TTL. */
    const char *poll[] = {"lock.ttl-ms=1000", "lock.spin-sleep-ms=400", NULL};
    refused_at(poll, "slow-holder", "lock.spin-sleep-ms");
    /* No history, no evidence to judge a run by. */
    const char *blind[] = {"history.enabled=false", NULL};
    refused_at(blind, "race", "history.enabled");
    /* A scenario timed in plain milliseconds fits a 100 ms TTL: it runs. */
    start_instance_with(tiny);
    cJSON *j = finished_run(start_run("{\"strategy\":\"local\",\"scenario\":\"race\"}"), 20000);
    ck_assert_str_eq(str(j, "state"), "done");
    ck_assert_str_eq(str(cJSON_GetObjectItemCaseSensitive(j, "verdict"), "result"), "fixed");
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_sigterm_during_a_run_stops_it_and_the_instance_exits_0) {
    start_instance(1, 0);
    start_run("{\"strategy\":\"owner-lua\",\"clients\":100,\"requests\":20000,\"stock\":100000}");
    /* under way: it has sold (however slowly it started), not finished */
    ck_assert_msg(harness_redis_until(redis_port, 1, 10000, "EXISTS inventory001:sold"),
                  "the run sold nothing in 10 s");
    mclock_sleep_ms(200);
    ck_assert_msg(harness_redis_int(redis_port, "LLEN inventory001:sold") < 20000,
                  "the run finished before the signal");
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

/* ---- Verdicts and Shipped: every scenario, judged ---------------------------- */

/* The lock settings of the pair: lock.ttl-ms, lock.wait-ms, and
 * lock.spin-sleep-ms and faults.max-hold-ms (-1: the default). */
static int set_ttl, set_wait, set_spin, set_hold;

/* The value of key in the shipped config/inventoryd.properties. */
static int shipped(const char *key) {
    FILE *f = fopen(SOURCE_DIR "/config/inventoryd.properties", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    size_t n = strlen(key);
    int v = -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == '=') v = atoi(line + n + 1);
    fclose(f);
    ck_assert_msg(v >= 0, "no %s in the shipped inventoryd.properties", key);
    return v;
}

static void setup_short(void) {
    setup();
    set_ttl = 1000;
    set_wait = 500;
    set_spin = set_hold = -1;
}

/* The lock settings users get: config/inventoryd.properties as shipped
 * (lock.ttl-ms 10000, lock.wait-ms 5000 when this was written). */
static void setup_shipped(void) {
    setup();
    set_ttl = shipped("lock.ttl-ms");
    set_wait = shipped("lock.wait-ms");
    set_spin = shipped("lock.spin-sleep-ms");
    set_hold = shipped("faults.max-hold-ms");
}

/* Starts instance B, then instance A: runs on and aimed at A itself,
 * scenario sales A and B at A and at B; both with faults on and the
 * settings above. */
static void start_pair(void) {
    inst_port = harness_free_port();
    do inst2_port = harness_free_port();
    while (inst2_port == inst_port);
    char ttl[40], wait[40], spin[48], hold[48], insts[96], target[64];
    snprintf(ttl, sizeof(ttl), "lock.ttl-ms=%d", set_ttl);
    snprintf(wait, sizeof(wait), "lock.wait-ms=%d", set_wait);
    snprintf(spin, sizeof(spin), "lock.spin-sleep-ms=%d", set_spin < 0 ? 20 : set_spin);
    snprintf(hold, sizeof(hold), "faults.max-hold-ms=%d", set_hold < 0 ? 60000 : set_hold);
    snprintf(insts, sizeof(insts), "lab.instances=127.0.0.1:%d,127.0.0.1:%d", inst_port,
             inst2_port);
    snprintf(target, sizeof(target), "lab.target=127.0.0.1:%d", inst_port);
    const char *b_sets[] = {redis_set, ttl, wait, spin, hold, "faults.enabled=true", NULL};
    inst2_pid = harness_inventoryd_start(inst2_port, b_sets);
    ck_assert_int_gt(inst2_pid, 0);
    const char *a_sets[] = {
        redis_set,          ttl,   wait,   spin, hold, dir_set, "faults.enabled=true",
        "lab.enabled=true", insts, target, NULL};
    inst_pid = harness_inventoryd_start(inst_port, a_sets);
    ck_assert_int_gt(inst_pid, 0);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(inst_port, "GET", "/lab", NULL, NULL, &r), 200);
    ck_assert_int_eq((int)harness_json_num(r.body, "ttl_ms"), set_ttl);
    ck_assert_int_eq((int)harness_json_num(r.body, "wait_ms"), set_wait);
}

/* Runs scenario sc with strategy; asserts that it finished "done" with its
 * fault parameters accepted, and returns the run. */
static cJSON *scenario_run(const char *strategy, const char *sc) {
    char body[128];
    snprintf(body, sizeof(body), "{\"strategy\":\"%s\",\"scenario\":\"%s\"}", strategy, sc);
    cJSON *j = finished_run(start_run(body), 90000);
    ck_assert_msg(strcmp(str(j, "state"), "done") == 0, "%s %s ended %s: %s", sc, strategy,
                  str(j, "state"), str(j, "error"));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "faults_refused")));
    return j;
}

/* Asserts that run's verdict is result, and first that its window was reached. */
static void judged(const cJSON *run, const char *result) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(run, "verdict");
    ck_assert_msg(cJSON_IsObject(v), "run %s %s has no verdict", str(run, "scenario"),
                  str(run, "strategy"));
    ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "window_reached")),
                  "%s %s (ttl %d): fault missed its window (%s): %s: %s", str(run, "scenario"),
                  str(run, "strategy"), set_ttl, str(v, "window"), str(v, "result"),
                  str(v, "evidence"));
    ck_assert_msg(strcmp(str(v, "result"), result) == 0, "%s %s (ttl %d): %s, not %s: %s",
                  str(run, "scenario"), str(run, "strategy"), set_ttl, str(v, "result"), result,
                  str(v, "evidence"));
    ck_assert(strlen(str(v, "evidence")) > 20);
}

static const cJSON *step(const cJSON *run, int i) {
    const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(run, "steps"), i);
    ck_assert_ptr_nonnull(st);
    return st;
}

/* Step i's recorded hold (from the history): one of granted_us, released_us, lease_us. */
static double held(const cJSON *run, int i, const char *k) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(step(run, i), "hold");
    ck_assert_msg(cJSON_IsObject(h), "%s %s: sale %d has no recorded hold", str(run, "scenario"),
                  str(run, "strategy"), i);
    return num(h, k);
}

/* A number of step i's answer ("unit") or of its lock report ("lock.wait_ms"); -1 if absent. */
static double said(const cJSON *run, int i, const char *k) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(step(run, i), "answer");
    if (strncmp(k, "lock.", 5) == 0) {
        o = cJSON_GetObjectItemCaseSensitive(o, "lock");
        k += 5;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *word(const cJSON *run, int i) { return str(step(run, i), "word"); }

static double audited(const cJSON *run, const char *k) {
    return num(cJSON_GetObjectItemCaseSensitive(run, "audit"), k);
}

/* Whether the recorded holds of steps i and j overlap. */
static int overlap(const cJSON *run, int i, int j) {
    return held(run, i, "granted_us") < held(run, j, "released_us") &&
           held(run, j, "granted_us") < held(run, i, "released_us");
}

/* race and two-instances: flaw shows A and B inside together, one unit
 * sold twice; fix shows B granted after A's release, a unit of its own. */
static void meet(const char *sc, const char *flaw, const char *fix) {
    start_pair();
    cJSON *j = scenario_run(flaw, sc);
    judged(j, "flaw_shown");
    ck_assert(overlap(j, 0, 1));
    ck_assert(said(j, 0, "unit") == said(j, 1, "unit") && said(j, 0, "unit") > 0);
    ck_assert(audited(j, "sold_twice") >= 1);
    cJSON_Delete(j);
    j = scenario_run(fix, sc);
    judged(j, "fixed");
    ck_assert(held(j, 1, "granted_us") >= held(j, 0, "released_us"));
    ck_assert(said(j, 1, "lock.wait_ms") >= 100); /* A had 200 ms to go */
    ck_assert(said(j, 0, "unit") != said(j, 1, "unit"));
    ck_assert(audited(j, "violations") == 0 && audited(j, "sold_twice") == 0);
    cJSON_Delete(j);
}

START_TEST(test_race_shows_nones_flaw_and_local_fixes_it) { meet("race", "none", "local"); }
END_TEST

START_TEST(test_two_instances_shows_locals_flaw_and_setnx_spin_fixes_it) {
    meet("two-instances", "local", "setnx-spin");
}
END_TEST

START_TEST(test_long_hold_shows_setnx_retrys_recursion_and_setnx_spin_waits_in_a_loop) {
    start_pair();
    cJSON *j = scenario_run("setnx-retry", "long-hold");
    judged(j, "flaw_shown");
    ck_assert_msg(said(j, 1, "lock.depth") >= 10, "B's depth %g", said(j, 1, "lock.depth"));
    cJSON_Delete(j);
    j = scenario_run("setnx-spin", "long-hold");
    judged(j, "fixed");
    ck_assert(said(j, 1, "lock.depth") < 0); /* no recursion to report */
    ck_assert(said(j, 1, "lock.wait_ms") >= 1000 && strcmp(word(j, 1), "sold") == 0);
    ck_assert(held(j, 1, "granted_us") >= held(j, 0, "released_us"));
    cJSON_Delete(j);
}
END_TEST

/* slow-holder's window, from the records: A's lease ran out before B got
 * the lock, and A (its stalled release included) was still inside. */
static void slow_holder_window(const cJSON *j) {
    double a_end = held(j, 0, "granted_us") + said(j, 0, "lock.hold_ms") * 1000;
    ck_assert(held(j, 0, "lease_us") <= held(j, 1, "granted_us"));
    ck_assert(held(j, 1, "granted_us") < a_end);
    ck_assert_str_eq(word(j, 1), "sold");
}

START_TEST(test_slow_holder_shows_expirings_and_owner_checks_flaw_and_owner_lua_fixes_it) {
    start_pair();
    const char *flaws[] = {"expiring", "owner-check"};
    for (int i = 0; i < 2; i++) {
        cJSON *j = scenario_run(flaws[i], "slow-holder");
        judged(j, "flaw_shown");
        slow_holder_window(j);
        ck_assert(overlap(j, 1, 2));
        ck_assert(said(j, 1, "unit") == said(j, 2, "unit"));
        ck_assert(audited(j, "violations") >= 1);
        cJSON_Delete(j);
    }
    cJSON *j = scenario_run("owner-lua", "slow-holder");
    judged(j, "fixed");
    slow_holder_window(j);
    ck_assert(held(j, 2, "granted_us") >= held(j, 1, "released_us"));
    ck_assert(said(j, 2, "lock.wait_ms") > 0 && strcmp(word(j, 2), "sold") == 0);
    ck_assert(audited(j, "violations") == 0 && audited(j, "sold_twice") == 0);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_nested_shows_owner_lua_waiting_for_itself_and_reentrant_fixes_it) {
    start_pair();
    cJSON *j = scenario_run("owner-lua", "nested");
    judged(j, "flaw_shown");
    /* It waited for its own lock: its whole wait, or until its lease ran out. */
    double wait = num(step(j, 0), "wait_ms"), upto = wait < set_ttl ? wait : set_ttl;
    ck_assert_msg(said(j, 0, "lock.wait_ms") >= 0.9 * upto, "A waited %g ms",
                  said(j, 0, "lock.wait_ms"));
    ck_assert(audited(j, "violations") == 0);
    cJSON_Delete(j);
    j = scenario_run("reentrant", "nested");
    judged(j, "fixed");
    ck_assert_str_eq(word(j, 0), "sold");
    ck_assert(said(j, 0, "lock.attempts") == 3 && said(j, 0, "lock.wait_ms") < 100);
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_overrun_shows_reentrants_and_fenceds_flaw_and_watchdog_fixes_it) {
    start_pair();
    cJSON *j = scenario_run("reentrant", "overrun");
    judged(j, "flaw_shown");
    ck_assert(held(j, 0, "lease_us") <= held(j, 1, "granted_us"));
    ck_assert(overlap(j, 0, 1));
    ck_assert(said(j, 0, "unit") == said(j, 1, "unit") && audited(j, "sold_twice") >= 1);
    cJSON_Delete(j);
    j = scenario_run("fenced", "overrun");
    judged(j, "flaw_shown");
    ck_assert(overlap(j, 0, 1));
    ck_assert_int_eq((int)num(step(j, 0), "status"), 409);
    ck_assert_str_eq(word(j, 0), "stale_token");
    ck_assert(audited(j, "sold_twice") == 0);
    cJSON_Delete(j);
    j = scenario_run("watchdog", "overrun");
    judged(j, "fixed");
    ck_assert(held(j, 0, "released_us") - held(j, 0, "granted_us") > set_ttl * 1000.0);
    ck_assert(held(j, 1, "granted_us") >= held(j, 0, "released_us"));
    ck_assert(said(j, 0, "lock.renewals") >= 1 && strcmp(word(j, 1), "sold") == 0);
    ck_assert(audited(j, "violations") == 0 && audited(j, "sold_twice") == 0);
    cJSON_Delete(j);
}
END_TEST

/* setnx-spin's lock has no TTL, so slow-holder's window (A's lease running
 * out while A is inside) cannot be reached: the run sells cleanly, and that
 * is no proof of anything. */
START_TEST(test_a_window_the_strategy_cannot_reach_is_inconclusive_though_the_audit_is_clean) {
    start_pair();
    cJSON *j = scenario_run("setnx-spin", "slow-holder");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "verdict");
    ck_assert_str_eq(str(v, "result"), "inconclusive");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(v, "window_reached")));
    ck_assert_msg(strstr(str(v, "evidence"), "no lease") != NULL, "%s", str(v, "evidence"));
    ck_assert(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(step(j, 0), "hold")));
    ck_assert(audited(j, "violations") == 0 && audited(j, "sold_twice") == 0);
    cJSON_Delete(j);
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
    tcase_add_test(core, test_the_scenarios_are_listed_with_their_times_for_this_ttl);
    tcase_add_test(core, test_results_files_come_from_lab_results_dir_and_only_those_named);
    suite_add_tcase(s, core);
    TCase *limits = tcase_create("Limits");
    tcase_add_checked_fixture(limits, setup, teardown);
    tcase_set_timeout(limits, 90);
    tcase_add_test(limits,
                   test_clients_requests_stock_and_names_out_of_bounds_are_refused_with_400);
    tcase_add_test(limits, test_an_unknown_or_malformed_run_id_is_404);
    tcase_add_test(
        limits, test_with_lab_enabled_false_every_run_endpoint_is_404_and_the_page_is_still_served);
    tcase_add_test(limits, test_a_scenario_refused_with_403_says_faults_are_off);
    tcase_add_test(limits, test_sigterm_during_a_run_stops_it_and_the_instance_exits_0);
    tcase_add_test(
        limits,
        test_a_scenario_whose_timeline_cannot_fit_the_settings_is_refused_with_400_naming_the_setting);
    suite_add_tcase(s, limits);
    /* Each flaw and each fix, at lock.ttl-ms=1000 lock.wait-ms=500 and then
     * at the shipped settings (slow-holder and overrun take about 18 s a
     * run there). */
    TCase *cases[2] = {tcase_create("Verdicts"), tcase_create("Shipped")};
    tcase_add_checked_fixture(cases[0], setup_short, teardown);
    tcase_add_checked_fixture(cases[1], setup_shipped, teardown);
    for (int i = 0; i < 2; i++) {
        tcase_set_timeout(cases[i], 150);
        tcase_add_test(cases[i], test_race_shows_nones_flaw_and_local_fixes_it);
        tcase_add_test(cases[i], test_two_instances_shows_locals_flaw_and_setnx_spin_fixes_it);
        tcase_add_test(cases[i],
                       test_long_hold_shows_setnx_retrys_recursion_and_setnx_spin_waits_in_a_loop);
        tcase_add_test(
            cases[i],
            test_slow_holder_shows_expirings_and_owner_checks_flaw_and_owner_lua_fixes_it);
        tcase_add_test(cases[i],
                       test_nested_shows_owner_lua_waiting_for_itself_and_reentrant_fixes_it);
        tcase_add_test(cases[i],
                       test_overrun_shows_reentrants_and_fenceds_flaw_and_watchdog_fixes_it);
    }
    tcase_add_test(
        cases[0],
        test_a_window_the_strategy_cannot_reach_is_inconclusive_though_the_audit_is_clean);
    suite_add_tcase(s, cases[0]);
    suite_add_tcase(s, cases[1]);
    return s;
}
