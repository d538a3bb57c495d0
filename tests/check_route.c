/* check_route.c -- route_match(): every path of the HTTP contract, the
 * methods each one allows, and the limits of the strategy segment; every
 * row of routes.def found by its own pattern; and docs/api.md's endpoint
 * list held to the table (the Docs case, which reads that file). Pure
 * function: no server, no allocation, nothing to set up. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "config.h"
#include "route.h"

#define CONTEXT "/redis/distributed/lock"

static struct route r;

/* Matches method and url under the default context path into r. */
static enum route_id match(const char *method, const char *url) {
    return route_match(method, url, CONTEXT, &r);
}

/* Asserts that url is not a route, and that r says nothing about it. */
static void assert_not_found(const char *method, const char *url, const char *context) {
    ck_assert_int_eq(route_match(method, url, context, &r), ROUTE_NOT_FOUND);
    ck_assert_int_eq(r.id, ROUTE_NOT_FOUND);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_ptr_nonnull(r.allow);
    ck_assert_str_eq(r.allow, "");
}

/* ---- Core ---------------------------------------------------------------- */

START_TEST(test_get_and_post_inventory_sale_sell_with_the_default_strategy) {
    const char *methods[] = {"GET", "POST"};
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(match(methods[i], "/inventory/sale"), ROUTE_SALE);
        ck_assert_int_eq(r.id, ROUTE_SALE);
        ck_assert_str_eq(r.arg, "");
        ck_assert_int_eq(r.method_allowed, 1);
        ck_assert_str_eq(r.allow, "GET, POST");
    }
}
END_TEST

START_TEST(test_a_strategy_segment_names_the_strategy) {
    const char *names[] = {
        "none",      "local",     "setnx-retry", "setnx-spin",       "expiring", "owner-check",
        "owner-lua", "reentrant", "watchdog",    "redisson",         "redlock",  "fenced",
        "handoff",   "batched",   "zookeeper",   "zookeeper-fenced", "atomic"};
    char url[128];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(url, sizeof url, "/inventory/sale/%s", names[i]);
        ck_assert_int_eq(match("GET", url), ROUTE_SALE_NAMED);
        ck_assert_str_eq(r.arg, names[i]);
        ck_assert_int_eq(r.method_allowed, 1);
        ck_assert_str_eq(r.allow, "GET, POST");
        ck_assert_int_eq(match("POST", url), ROUTE_SALE_NAMED);
        ck_assert_str_eq(r.arg, names[i]);
        ck_assert_int_eq(r.method_allowed, 1);
    }
}
END_TEST

START_TEST(test_a_strategy_unknown_to_the_registry_still_routes_to_sale) {
    /* Whether the strategy exists is the handler's 404, not the router's. */
    ck_assert_int_eq(match("GET", "/inventory/sale/no-such-lock"), ROUTE_SALE_NAMED);
    ck_assert_str_eq(r.arg, "no-such-lock");
}
END_TEST

START_TEST(test_the_demo_path_under_the_context_path_sells_with_the_default_strategy) {
    ck_assert_int_eq(match("GET", CONTEXT "/inventory/sale"), ROUTE_SALE_DEMO);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_int_eq(match("HEAD", CONTEXT "/inventory/sale"), ROUTE_SALE_DEMO);
    ck_assert_int_eq(r.method_allowed, 1);
}
END_TEST

START_TEST(test_the_demo_path_follows_a_configured_context_path) {
    ck_assert_int_eq(route_match("GET", "/shop/inventory/sale", "/shop", &r), ROUTE_SALE_DEMO);
    ck_assert_str_eq(r.arg, "");
    /* ...and the default one is then no longer a route. */
    assert_not_found("GET", CONTEXT "/inventory/sale", "/shop");
}
END_TEST

START_TEST(test_a_context_path_with_a_trailing_slash_still_gives_the_demo_path) {
    ck_assert_int_eq(route_match("GET", CONTEXT "/inventory/sale", CONTEXT "/", &r),
                     ROUTE_SALE_DEMO);
    ck_assert_str_eq(r.arg, "");
}
END_TEST

START_TEST(test_only_the_demo_sale_lives_under_the_context_path) {
    assert_not_found("GET", CONTEXT "/inventory", CONTEXT);
    assert_not_found("GET", CONTEXT "/inventory/sale/redisson", CONTEXT);
    assert_not_found("GET", CONTEXT "/healthz", CONTEXT);
    assert_not_found("GET", CONTEXT, CONTEXT);
    assert_not_found("GET", CONTEXT "/inventory/salex", CONTEXT);
}
END_TEST

START_TEST(test_sale_by_redisson_is_its_own_route_without_an_argument) {
    /* Its handler names the strategy (check_http's Core shows redisson). */
    ck_assert_int_eq(match("GET", "/inventory/saleByRedisson"), ROUTE_SALE_BY_REDISSON);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET, POST");
}
END_TEST

START_TEST(test_sale_by_redlock_is_its_own_route_without_an_argument) {
    ck_assert_int_eq(match("GET", "/inventory/saleByRedlock"), ROUTE_SALE_BY_REDLOCK);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(r.method_allowed, 1);
}
END_TEST

START_TEST(test_the_demo_endpoints_are_matched_case_sensitively) {
    assert_not_found("GET", "/inventory/salebyredisson", CONTEXT);
    assert_not_found("GET", "/inventory/SaleByRedlock", CONTEXT);
    assert_not_found("GET", "/Inventory/sale", CONTEXT);
}
END_TEST

START_TEST(test_get_inventory_is_the_stock) {
    ck_assert_int_eq(match("GET", "/inventory"), ROUTE_INVENTORY);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
}
END_TEST

START_TEST(test_post_inventory_reset_is_the_reset) {
    ck_assert_int_eq(match("POST", "/inventory/reset"), ROUTE_RESET);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "POST");
}
END_TEST

START_TEST(test_get_inventory_reset_is_the_reset_path_with_a_method_not_allowed) {
    ck_assert_int_eq(match("GET", "/inventory/reset"), ROUTE_RESET);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_str_eq(r.allow, "POST");
    ck_assert_int_eq(match("HEAD", "/inventory/reset"), ROUTE_RESET);
    ck_assert_int_eq(r.method_allowed, 0);
}
END_TEST

START_TEST(test_get_inventory_audit_is_the_audit) {
    ck_assert_int_eq(match("GET", "/inventory/audit"), ROUTE_AUDIT);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
}
END_TEST

START_TEST(test_get_strategies_healthz_and_metrics_are_their_routes) {
    ck_assert_int_eq(match("GET", "/strategies"), ROUTE_STRATEGIES);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
    ck_assert_int_eq(match("GET", "/healthz"), ROUTE_HEALTHZ);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
    ck_assert_int_eq(match("GET", "/readyz"), ROUTE_READYZ);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
    ck_assert_int_eq(match("POST", "/readyz"), ROUTE_READYZ);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_int_eq(match("GET", "/metrics"), ROUTE_METRICS);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
}
END_TEST

START_TEST(test_delete_inventory_is_the_path_with_a_method_not_allowed_and_allow_get) {
    ck_assert_int_eq(match("DELETE", "/inventory"), ROUTE_INVENTORY);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_str_eq(r.allow, "GET");
}
END_TEST

START_TEST(test_post_to_a_get_only_path_is_not_allowed) {
    const char *paths[] = {"/inventory",     "/inventory/audit",
                           "/strategies",    "/healthz",
                           "/metrics",       "/",
                           "/lab/app.css",   "/lab/runs/7",
                           "/lab/scenarios", "/lab/results/matrix.csv"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        ck_assert_int_ne(match("POST", paths[i]), ROUTE_NOT_FOUND);
        ck_assert_int_eq(r.method_allowed, 0);
        ck_assert_str_eq(r.allow, "GET");
    }
}
END_TEST

START_TEST(test_put_and_delete_on_a_sale_are_not_allowed) {
    ck_assert_int_eq(match("PUT", "/inventory/sale"), ROUTE_SALE);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_str_eq(r.allow, "GET, POST");
    ck_assert_int_eq(match("DELETE", "/inventory/sale/redisson"), ROUTE_SALE_NAMED);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_str_eq(r.allow, "GET, POST");
    ck_assert_str_eq(r.arg, "redisson");
}
END_TEST

START_TEST(test_head_is_allowed_wherever_get_is) {
    const char *paths[] = {"/inventory/sale",
                           "/inventory/sale/local",
                           "/inventory",
                           "/inventory/audit",
                           "/strategies",
                           "/healthz",
                           "/metrics",
                           "/inventory/saleByRedisson",
                           "/inventory/saleByRedlock",
                           "/",
                           "/lab",
                           "/lab/app.js",
                           "/lab/runs",
                           "/lab/runs/1",
                           "/lab/scenarios",
                           "/lab/results/demo.csv"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        ck_assert_int_ne(match("HEAD", paths[i]), ROUTE_NOT_FOUND);
        ck_assert_msg(r.method_allowed == 1, "HEAD %s not allowed", paths[i]);
    }
}
END_TEST

START_TEST(test_methods_are_case_sensitive_and_whole_words) {
    ck_assert_int_eq(match("get", "/inventory"), ROUTE_INVENTORY);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_int_eq(match("GE", "/inventory"), ROUTE_INVENTORY);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_int_eq(match("GETX", "/inventory"), ROUTE_INVENTORY);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_int_eq(match("ST", "/inventory/sale"), ROUTE_SALE);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_int_eq(match("OST", "/inventory/sale"), ROUTE_SALE);
    ck_assert_int_eq(r.method_allowed, 0);
}
END_TEST

START_TEST(test_a_trailing_slash_is_ignored) {
    ck_assert_int_eq(match("GET", "/inventory/"), ROUTE_INVENTORY);
    ck_assert_int_eq(match("GET", "/inventory/sale/"), ROUTE_SALE);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(match("GET", "/inventory/sale/redlock/"), ROUTE_SALE_NAMED);
    ck_assert_str_eq(r.arg, "redlock");
    ck_assert_int_eq(match("GET", "/inventory/saleByRedisson/"), ROUTE_SALE_BY_REDISSON);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(match("POST", "/inventory/reset/"), ROUTE_RESET);
    ck_assert_int_eq(match("GET", "/healthz/"), ROUTE_HEALTHZ);
    ck_assert_int_eq(match("GET", CONTEXT "/inventory/sale/"), ROUTE_SALE_DEMO);
    ck_assert_str_eq(r.arg, "");
}
END_TEST

START_TEST(test_several_trailing_slashes_are_ignored_too) {
    ck_assert_int_eq(match("GET", "/metrics///"), ROUTE_METRICS);
    ck_assert_int_eq(match("GET", "/inventory/sale/fenced//"), ROUTE_SALE_NAMED);
    ck_assert_str_eq(r.arg, "fenced");
}
END_TEST

START_TEST(test_get_root_is_the_lab_page) {
    ck_assert_int_eq(match("GET", "/"), ROUTE_LAB_PAGE);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
    ck_assert_str_eq(r.arg, "");
}
END_TEST

START_TEST(test_get_lab_is_the_labs_status_whether_or_not_runs_are_on) {
    ck_assert_int_eq(match("GET", "/lab"), ROUTE_LAB_STATUS);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
    ck_assert_int_eq(match("GET", "/lab/"), ROUTE_LAB_STATUS);
    ck_assert_int_eq(route_table[ROUTE_LAB_STATUS].flags & ROUTE_F_LAB, 0);
}
END_TEST

START_TEST(test_the_pages_script_style_and_icon_are_lab_assets_named_by_arg) {
    const char *names[] = {"app.js", "app.css", "icon.svg"};
    char url[64];
    for (size_t i = 0; i < 3; i++) {
        snprintf(url, sizeof url, "/lab/%s", names[i]);
        ck_assert_int_eq(match("GET", url), ROUTE_LAB_ASSET);
        ck_assert_str_eq(r.arg, names[i]);
        ck_assert_int_eq(r.method_allowed, 1);
        ck_assert_str_eq(r.allow, "GET");
    }
}
END_TEST

START_TEST(test_lab_runs_takes_get_and_post_and_a_run_is_get_by_its_id) {
    ck_assert_int_eq(match("GET", "/lab/runs"), ROUTE_LAB_RUNS);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET, POST");
    ck_assert_int_eq(match("POST", "/lab/runs/"), ROUTE_LAB_RUNS);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_int_eq(match("DELETE", "/lab/runs"), ROUTE_LAB_RUNS);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_int_eq(match("GET", "/lab/runs/42"), ROUTE_LAB_RUN);
    ck_assert_str_eq(r.arg, "42");
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_str_eq(r.allow, "GET");
}
END_TEST

START_TEST(test_lab_scenarios_and_the_two_result_files_are_their_routes) {
    ck_assert_int_eq(match("GET", "/lab/scenarios"), ROUTE_LAB_SCENARIOS);
    ck_assert_int_eq(r.method_allowed, 1);
    ck_assert_int_eq(match("GET", "/lab/results/demo.csv"), ROUTE_LAB_RESULT);
    ck_assert_str_eq(r.arg, "demo.csv");
    ck_assert_int_eq(match("GET", "/lab/results/matrix.csv"), ROUTE_LAB_RESULT);
    ck_assert_str_eq(r.arg, "matrix.csv");
    ck_assert_str_eq(r.allow, "GET");
    ck_assert_int_eq(match("GET", "/lab/results/campaign.csv"), ROUTE_LAB_RESULT);
    ck_assert_str_eq(r.arg, "campaign.csv");
    ck_assert_int_eq(match("GET", "/lab/results/campaign-counterexample.json"), ROUTE_LAB_RESULT);
    ck_assert_str_eq(r.arg, "campaign-counterexample.json");
    ck_assert_int_eq(match("GET", "/lab/results/campaign.md"), ROUTE_NOT_FOUND);
}
END_TEST

START_TEST(test_only_the_run_endpoints_need_lab_enabled) {
    enum route_id lab[] = {ROUTE_LAB_RUNS, ROUTE_LAB_RUN, ROUTE_LAB_SCENARIOS, ROUTE_LAB_RESULT};
    size_t nlab = sizeof(lab) / sizeof(lab[0]), seen = 0;
    for (int id = 0; id < ROUTE_COUNT; id++) {
        int want = 0;
        for (size_t i = 0; i < nlab; i++) want |= lab[i] == (enum route_id)id;
        ck_assert_msg(!!(route_table[id].flags & ROUTE_F_LAB) == want, "route %s",
                      route_table[id].pattern);
        seen += want;
    }
    ck_assert_uint_eq(seen, nlab);
}
END_TEST

START_TEST(test_a_match_overwrites_what_a_previous_match_left) {
    ck_assert_int_eq(match("GET", "/inventory/sale/watchdog"), ROUTE_SALE_NAMED);
    ck_assert_int_eq(match("DELETE", "/inventory"), ROUTE_INVENTORY);
    ck_assert_str_eq(r.arg, "");
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_int_eq(match("GET", "/lab/runs/9"), ROUTE_LAB_RUN);
    ck_assert_int_eq(match("GET", "/inventory"), ROUTE_INVENTORY);
    ck_assert_str_eq(r.arg, "");
    assert_not_found("GET", "/nope", CONTEXT);
}
END_TEST

/* ---- Limits -------------------------------------------------------------- */

START_TEST(test_a_strategy_of_32_characters_is_accepted) {
    char url[64];
    const char *s32 = "abcdefghijklmnopqrstuvwxyz-01234";
    ck_assert_int_eq((int)strlen(s32), 32);
    snprintf(url, sizeof url, "/inventory/sale/%s", s32);
    ck_assert_int_eq(match("GET", url), ROUTE_SALE_NAMED);
    ck_assert_str_eq(r.arg, s32);
    /* and with a trailing slash, which is not part of it */
    snprintf(url, sizeof url, "/inventory/sale/%s/", s32);
    ck_assert_int_eq(match("GET", url), ROUTE_SALE_NAMED);
    ck_assert_str_eq(r.arg, s32);
}
END_TEST

START_TEST(test_a_strategy_of_33_characters_is_not_found) {
    char url[64];
    const char *s33 = "abcdefghijklmnopqrstuvwxyz-012345";
    ck_assert_int_eq((int)strlen(s33), 33);
    snprintf(url, sizeof url, "/inventory/sale/%s", s33);
    assert_not_found("GET", url, CONTEXT);
}
END_TEST

START_TEST(test_a_strategy_segment_with_uppercase_is_not_found) {
    assert_not_found("GET", "/inventory/sale/Redisson", CONTEXT);
    assert_not_found("GET", "/inventory/sale/REDLOCK", CONTEXT);
    assert_not_found("GET", "/inventory/sale/owner-Lua", CONTEXT);
}
END_TEST

START_TEST(test_a_strategy_segment_with_a_percent_is_not_found) {
    assert_not_found("GET", "/inventory/sale/%72edisson", CONTEXT);
    assert_not_found("GET", "/inventory/sale/%", CONTEXT);
}
END_TEST

START_TEST(test_a_strategy_segment_with_a_slash_is_not_found) {
    assert_not_found("GET", "/inventory/sale/redisson/extra", CONTEXT);
    assert_not_found("GET", "/inventory/sale//redisson", CONTEXT);
    assert_not_found("GET", "/inventory/sale/a/b/", CONTEXT);
}
END_TEST

START_TEST(test_a_strategy_segment_with_other_punctuation_is_not_found) {
    const char *bad[] = {"/inventory/sale/owner_lua", "/inventory/sale/owner.lua",
                         "/inventory/sale/a b",       "/inventory/sale/..",
                         "/inventory/sale/a?b",       "/inventory/sale/\xc3\xa9t\xc3\xa9",
                         "/inventory/sale/a\tb"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_not_found("GET", bad[i], CONTEXT);
}
END_TEST

START_TEST(test_an_empty_url_is_not_found) { assert_not_found("GET", "", CONTEXT); }
END_TEST

START_TEST(test_the_root_path_is_the_lab_page_whatever_the_context_path) {
    ck_assert_int_eq(match("GET", "/"), ROUTE_LAB_PAGE);
    ck_assert_int_eq(match("GET", "//"), ROUTE_LAB_PAGE);
    ck_assert_int_eq(route_match("GET", "/", "/", &r), ROUTE_LAB_PAGE);
    ck_assert_int_eq(route_match("GET", "/", "", &r), ROUTE_LAB_PAGE);
    ck_assert_str_eq(r.arg, "");
}
END_TEST

START_TEST(test_a_lab_file_not_listed_is_not_found) {
    const char *bad[] = {"/lab/index.html",
                         "/lab/app.jsx",
                         "/lab/App.js",
                         "/lab/app.js/x",
                         "/lab/../lab/app.js",
                         "/lab/%61pp.js",
                         "/lab/web/app.js",
                         "/lab/results",
                         "/lab/results/",
                         "/lab/results/demo.md",
                         "/lab/results/demo.csv.bak",
                         "/lab/results/../results/demo.csv",
                         "/lab/results/..%2fdemo.csv",
                         "/lab/results/DEMO.csv",
                         "/lab/results/run/demo.csv",
                         "/lab/results//demo.csv",
                         "/lab/results/demo.csv/x",
                         "/labx/runs",
                         "/lab/run",
                         "/lab/runsx"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_not_found("GET", bad[i], CONTEXT);
}
END_TEST

START_TEST(test_a_run_id_is_one_to_nine_digits) {
    ck_assert_int_eq(match("GET", "/lab/runs/123456789"), ROUTE_LAB_RUN);
    ck_assert_str_eq(r.arg, "123456789");
    const char *bad[] = {"/lab/runs/1234567890", "/lab/runs/-1",  "/lab/runs/1a", "/lab/runs/a",
                         "/lab/runs/1/",         "/lab/runs/1/x", "/lab/runs//1", "/lab/runs/+1",
                         "/lab/runs/ 1",         "/lab/runs/0x1", "/lab/runs/1.0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (strcmp(bad[i], "/lab/runs/1/") == 0) { /* a trailing slash is ignored */
            ck_assert_int_eq(match("GET", bad[i]), ROUTE_LAB_RUN);
            ck_assert_str_eq(r.arg, "1");
            continue;
        }
        assert_not_found("GET", bad[i], CONTEXT);
    }
}
END_TEST

START_TEST(test_with_context_path_root_the_demo_path_is_the_plain_sale) {
    /* With context path "/" the demo path is /inventory/sale itself; no
     * second prefix is matched, and nothing under "//" appears. */
    ck_assert_int_eq(route_match("GET", "/inventory/sale", "/", &r), ROUTE_SALE);
    ck_assert_str_eq(r.arg, "");
    ck_assert_str_eq(r.allow, "GET, POST");
    assert_not_found("GET", "//inventory/sale", "/");
    assert_not_found("GET", CONTEXT "/inventory/sale", "/");
    ck_assert_int_eq(route_match("GET", "/inventory/sale/redlock", "/", &r), ROUTE_SALE_NAMED);
    ck_assert_str_eq(r.arg, "redlock");
}
END_TEST

START_TEST(test_an_empty_context_path_behaves_like_root) {
    ck_assert_int_eq(route_match("GET", "/inventory/sale", "", &r), ROUTE_SALE);
    assert_not_found("GET", CONTEXT "/inventory/sale", "");
}
END_TEST

START_TEST(test_unknown_paths_are_not_found) {
    const char *unknown[] = {"/inventor",
                             "/inventoryx",
                             "/inventory/stock",
                             "/inventory/sales",
                             "/inventory/sale-redisson",
                             "/inventory/audit/x",
                             "/inventory/reset/now",
                             "/strategy",
                             "/healthz/x",
                             "/metric",
                             "/inventory/saleByRedissonX",
                             "inventory",
                             "inventory/sale",
                             "/redis/distributed/lock",
                             "/redis/inventory/sale",
                             "/inventory/sale/redisson?x=1"};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
        assert_not_found("GET", unknown[i], CONTEXT);
}
END_TEST

START_TEST(test_a_10_kb_url_is_not_found_without_overflowing) {
    size_t n = 10 * 1024;
    char *url = malloc(n + 1);
    ck_assert_ptr_nonnull(url);

    /* a long strategy segment */
    memcpy(url, "/inventory/sale/", 16);
    memset(url + 16, 'a', n - 16);
    url[n] = '\0';
    assert_not_found("GET", url, CONTEXT);

    /* a long path of slashes: trimmed to "/", the page */
    memset(url, '/', n);
    ck_assert_int_eq(match("GET", url), ROUTE_LAB_PAGE);

    /* a long run id and a long result file name */
    memcpy(url, "/lab/runs/", 10);
    memset(url + 10, '7', n - 10);
    assert_not_found("GET", url, CONTEXT);
    memcpy(url, "/lab/results/", 13);
    memset(url + 13, 'x', n - 13);
    assert_not_found("GET", url, CONTEXT);
    memset(url, '/', n);

    /* a route followed by ten thousand slashes is still that route */
    memcpy(url, "/inventory", 10);
    ck_assert_int_eq(match("GET", url), ROUTE_INVENTORY);

    /* a long path starting like the context path */
    memcpy(url, CONTEXT, strlen(CONTEXT));
    memset(url + strlen(CONTEXT), 'x', n - strlen(CONTEXT));
    assert_not_found("GET", url, CONTEXT);
    free(url);
}
END_TEST

START_TEST(test_an_empty_method_is_not_allowed_and_returns) {
    /* route_match is documented to always return; an empty method must not
     * make the Allow scan loop forever. (Times out if it does.) */
    ck_assert_int_eq(match("", "/inventory"), ROUTE_INVENTORY);
    ck_assert_int_eq(r.method_allowed, 0);
    ck_assert_str_eq(r.allow, "GET");
}
END_TEST

START_TEST(test_a_method_that_lists_methods_is_never_allowed) {
    struct route r;
    route_match("GET, POST", "/inventory/sale", "/", &r);
    ck_assert_int_eq(r.id, ROUTE_SALE);
    ck_assert_int_eq(r.method_allowed, 0);
}
END_TEST

START_TEST(test_a_context_path_under_the_sale_path_still_finds_the_demo_path) {
    struct route r;
    route_match("GET", "/inventory/sale/x/inventory/sale", "/inventory/sale/x", &r);
    ck_assert_int_eq(r.id, ROUTE_SALE_DEMO);
    ck_assert_str_eq(r.arg, "");
}
END_TEST

/* A path of pattern: {context-path} as CONTEXT, the parameter as a valid
 * value of it, into buf. */
static void instance(const char *pattern, char *buf, size_t len) {
    static const struct {
        const char *param, *value;
    } values[] = {{"{context-path}", CONTEXT},
                  {"{strategy}", "redlock"},
                  {"{id}", "7"},
                  {"{asset}", "app.js"},
                  {"{file}", "demo.csv"}};
    size_t used = 0;
    buf[0] = '\0';
    for (const char *p = pattern; *p;) {
        size_t i = 0, nv = sizeof(values) / sizeof(values[0]);
        while (i < nv && strncmp(p, values[i].param, strlen(values[i].param)) != 0) i++;
        if (i < nv) {
            used += (size_t)snprintf(buf + used, len - used, "%s", values[i].value);
            p += strlen(values[i].param);
        } else {
            ck_assert_msg(*p != '{', "pattern %s: unknown parameter", pattern);
            used += (size_t)snprintf(buf + used, len - used, "%c", *p++);
        }
        ck_assert_uint_lt(used, len);
    }
}

START_TEST(test_every_row_of_the_table_is_found_by_its_own_pattern_with_its_methods) {
    char url[256];
    for (int id = ROUTE_NOT_FOUND + 1; id < ROUTE_COUNT; id++) {
        const struct route_row *row = &route_table[id];
        instance(row->pattern, url, sizeof(url));
        ck_assert_msg(match("GET", url) == (enum route_id)id, "%s: %s is route %d, not %d",
                      row->pattern, url, r.id, id);
        ck_assert_str_eq(r.allow, row->methods);
        ck_assert_ptr_nonnull(row->doc);
        ck_assert_msg(row->doc[0] != '\0', "%s has no doc", row->pattern);
        /* every method of its Allow is allowed, and HEAD wherever GET is */
        char methods[32];
        snprintf(methods, sizeof(methods), "%s", row->methods);
        for (char *save, *m = strtok_r(methods, ", ", &save); m; m = strtok_r(NULL, ", ", &save)) {
            match(m, url);
            ck_assert_msg(r.method_allowed, "%s %s not allowed", m, url);
        }
        match("HEAD", url);
        ck_assert_int_eq(r.method_allowed, strstr(row->methods, "GET") != NULL);
        match("PATCH", url);
        ck_assert_int_eq(r.method_allowed, 0);
    }
}
END_TEST

/* ---- docs/api.md ------------------------------------------------------------
 * Its endpoint list is the table under "| method and path | what it does |":
 * the first cell of each row lists endpoints separated by ", ", each
 * `METHOD[/METHOD...] /path` (backticks anywhere; what follows the path, a
 * body or a query, is ignored). The demo's path is written under the
 * default server.context-path. */

#define DOC_MAX 64

struct doc_endpoint {
    char methods[32]; /* as routes.def writes them: "GET, POST" */
    char path[128];
};

/* Reads docs/api.md's endpoint list into out (at most DOC_MAX). */
static int read_doc_endpoints(struct doc_endpoint *out) {
    FILE *f = fopen(SOURCE_DIR "/docs/api.md", "r");
    ck_assert_msg(f != NULL, "cannot open docs/api.md");
    char line[4096];
    int in_table = 0, n = 0, rows = 0;
    while (fgets(line, sizeof(line), f)) {
        if (!in_table) {
            in_table = strncmp(line, "| method and path | what it does |", 34) == 0;
            continue;
        }
        if (line[0] != '|') break;
        if (strncmp(line, "|---", 4) == 0) continue;
        rows++;
        char cell[1024];
        size_t c = 0;
        for (const char *p = line + 1; *p && strncmp(p, " | ", 3) != 0 && c + 1 < sizeof(cell); p++)
            if (*p != '`') cell[c++] = *p;
        cell[c] = '\0';
        char *save;
        for (char *item = strtok_r(cell, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            while (*item == ' ') item++;
            ck_assert_int_lt(n, DOC_MAX);
            struct doc_endpoint *e = &out[n++];
            size_t ml = strspn(item, "ABCDEFGHIJKLMNOPQRSTUVWXYZ/");
            ck_assert_msg(ml > 0 && item[ml] == ' ' && item[ml + 1] == '/',
                          "docs/api.md: '%s' is not `METHOD /path`", item);
            size_t used = 0; /* "GET/POST" -> "GET, POST" */
            for (size_t i = 0; i < ml && used + 3 < sizeof(e->methods); i++) {
                if (item[i] == '/') e->methods[used++] = ',';
                e->methods[used++] = item[i] == '/' ? ' ' : item[i];
            }
            e->methods[used] = '\0';
            size_t pl = strcspn(item + ml + 1, " ?");
            ck_assert_uint_lt(pl, sizeof(e->path));
            memcpy(e->path, item + ml + 1, pl);
            e->path[pl] = '\0';
        }
    }
    fclose(f);
    ck_assert_msg(rows > 0, "docs/api.md has no endpoint table");
    return n;
}

/* A row's path as docs/api.md writes it. */
static void doc_path(const struct route_row *row, char *buf, size_t len) {
    static const char cp[] = "{context-path}";
    static struct config cfg;
    config_defaults(&cfg);
    if (strncmp(row->pattern, cp, sizeof(cp) - 1) == 0)
        snprintf(buf, len, "%s%s", cfg.context_path, row->pattern + sizeof(cp) - 1);
    else
        snprintf(buf, len, "%s", row->pattern);
}

START_TEST(test_docs_api_lists_every_route_with_its_methods_and_no_other_path) {
    struct doc_endpoint doc[DOC_MAX];
    int n = read_doc_endpoints(doc);
    char path[256];
    for (int id = ROUTE_NOT_FOUND + 1; id < ROUTE_COUNT; id++) {
        doc_path(&route_table[id], path, sizeof(path));
        int found = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(doc[i].path, path) == 0) {
                ck_assert_msg(strcmp(doc[i].methods, route_table[id].methods) == 0,
                              "docs/api.md lists %s %s; routes.def says %s", doc[i].methods, path,
                              route_table[id].methods);
                found++;
            }
        ck_assert_msg(found == 1, "docs/api.md lists %s %d times, not once", path, found);
    }
    for (int i = 0; i < n; i++) {
        int known = 0;
        for (int id = ROUTE_NOT_FOUND + 1; id < ROUTE_COUNT && !known; id++) {
            doc_path(&route_table[id], path, sizeof(path));
            known = strcmp(doc[i].path, path) == 0;
        }
        ck_assert_msg(known, "docs/api.md lists %s %s, which routes.def does not have",
                      doc[i].methods, doc[i].path);
    }
}
END_TEST

Suite *route_suite(void) {
    Suite *s = suite_create("route");
    TCase *core = tcase_create("Core");
    TCase *limits = tcase_create("Limits");

    tcase_add_test(core, test_get_and_post_inventory_sale_sell_with_the_default_strategy);
    tcase_add_test(core, test_a_strategy_segment_names_the_strategy);
    tcase_add_test(core, test_a_strategy_unknown_to_the_registry_still_routes_to_sale);
    tcase_add_test(core, test_the_demo_path_under_the_context_path_sells_with_the_default_strategy);
    tcase_add_test(core, test_the_demo_path_follows_a_configured_context_path);
    tcase_add_test(core, test_a_context_path_with_a_trailing_slash_still_gives_the_demo_path);
    tcase_add_test(core, test_only_the_demo_sale_lives_under_the_context_path);
    tcase_add_test(core, test_sale_by_redisson_is_its_own_route_without_an_argument);
    tcase_add_test(core, test_sale_by_redlock_is_its_own_route_without_an_argument);
    tcase_add_test(core, test_the_demo_endpoints_are_matched_case_sensitively);
    tcase_add_test(core, test_get_inventory_is_the_stock);
    tcase_add_test(core, test_post_inventory_reset_is_the_reset);
    tcase_add_test(core, test_get_inventory_reset_is_the_reset_path_with_a_method_not_allowed);
    tcase_add_test(core, test_get_inventory_audit_is_the_audit);
    tcase_add_test(core, test_get_strategies_healthz_and_metrics_are_their_routes);
    tcase_add_test(core, test_delete_inventory_is_the_path_with_a_method_not_allowed_and_allow_get);
    tcase_add_test(core, test_post_to_a_get_only_path_is_not_allowed);
    tcase_add_test(core, test_put_and_delete_on_a_sale_are_not_allowed);
    tcase_add_test(core, test_head_is_allowed_wherever_get_is);
    tcase_add_test(core, test_methods_are_case_sensitive_and_whole_words);
    tcase_add_test(core, test_a_trailing_slash_is_ignored);
    tcase_add_test(core, test_several_trailing_slashes_are_ignored_too);
    tcase_add_test(core, test_get_root_is_the_lab_page);
    tcase_add_test(core, test_get_lab_is_the_labs_status_whether_or_not_runs_are_on);
    tcase_add_test(core, test_the_pages_script_style_and_icon_are_lab_assets_named_by_arg);
    tcase_add_test(core, test_lab_runs_takes_get_and_post_and_a_run_is_get_by_its_id);
    tcase_add_test(core, test_lab_scenarios_and_the_two_result_files_are_their_routes);
    tcase_add_test(core, test_only_the_run_endpoints_need_lab_enabled);
    tcase_add_test(core, test_a_match_overwrites_what_a_previous_match_left);
    tcase_add_test(core, test_every_row_of_the_table_is_found_by_its_own_pattern_with_its_methods);
    suite_add_tcase(s, core);

    TCase *docs = tcase_create("Docs");
    tcase_add_test(docs, test_docs_api_lists_every_route_with_its_methods_and_no_other_path);
    suite_add_tcase(s, docs);

    /* Short, fixed timeout: a hang in route_match fails fast rather than
     * waiting for CK_DEFAULT_TIMEOUT. */
    tcase_set_timeout(limits, 10);
    tcase_add_test(limits, test_a_strategy_of_32_characters_is_accepted);
    tcase_add_test(limits, test_a_strategy_of_33_characters_is_not_found);
    tcase_add_test(limits, test_a_strategy_segment_with_uppercase_is_not_found);
    tcase_add_test(limits, test_a_strategy_segment_with_a_percent_is_not_found);
    tcase_add_test(limits, test_a_strategy_segment_with_a_slash_is_not_found);
    tcase_add_test(limits, test_a_strategy_segment_with_other_punctuation_is_not_found);
    tcase_add_test(limits, test_an_empty_url_is_not_found);
    tcase_add_test(limits, test_the_root_path_is_the_lab_page_whatever_the_context_path);
    tcase_add_test(limits, test_a_lab_file_not_listed_is_not_found);
    tcase_add_test(limits, test_a_run_id_is_one_to_nine_digits);
    tcase_add_test(limits, test_with_context_path_root_the_demo_path_is_the_plain_sale);
    tcase_add_test(limits, test_an_empty_context_path_behaves_like_root);
    tcase_add_test(limits, test_unknown_paths_are_not_found);
    tcase_add_test(limits, test_a_10_kb_url_is_not_found_without_overflowing);
    tcase_add_test(limits, test_an_empty_method_is_not_allowed_and_returns);
    tcase_add_test(limits, test_a_method_that_lists_methods_is_never_allowed);
    tcase_add_test(limits, test_a_context_path_under_the_sale_path_still_finds_the_demo_path);
    suite_add_tcase(s, limits);
    return s;
}
