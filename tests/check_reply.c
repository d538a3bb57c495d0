/* check_reply.c -- the bodies the service answers with: every JSON answer is
 * parsed back with cJSON and checked field by field; the demo's text forms
 * are compared byte for byte. No server needed. Every string a reply_*
 * function returns is freed by the test that asked for it. */
#include <check.h>
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "lock.h"
#include "reply.h"
#include "strategy.h"

/* The parsed answer of the current test, deleted by the fixture. */
static cJSON *doc;

static void setup(void) { doc = NULL; }

static void teardown(void) {
    cJSON_Delete(doc);
    doc = NULL;
}

/* Parses body as a JSON object into doc and frees body. */
static cJSON *parse(char *body) {
    ck_assert_ptr_nonnull(body);
    cJSON_Delete(doc);
    doc = cJSON_Parse(body);
    ck_assert_msg(doc != NULL, "not JSON: %s", body);
    free(body);
    ck_assert(cJSON_IsObject(doc));
    return doc;
}

static const cJSON *field(const cJSON *o, const char *key) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(f != NULL, "no \"%s\"", key);
    return f;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *f = field(o, key);
    ck_assert_msg(cJSON_IsNumber(f), "\"%s\" is not a number", key);
    return cJSON_GetNumberValue(f);
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *f = field(o, key);
    ck_assert_msg(cJSON_IsString(f), "\"%s\" is not a string", key);
    return cJSON_GetStringValue(f);
}

/* Asserts that body is exactly want, then frees it. */
static void assert_text(char *body, const char *want) {
    ck_assert_ptr_nonnull(body);
    ck_assert_str_eq(body, want);
    free(body);
}

static int nlock_types(void) {
    int n = 0;
    while (strategies[n].name) n++;
    return n;
}

static struct sale_result sold(void) {
    struct sale_result r;
    memset(&r, 0, sizeof r);
    r.status = INV_SOLD;
    r.remaining = 7;
    r.unit = 8;
    snprintf(r.order, sizeof r.order, "%s", "0a1b2c3d-000042");
    r.lock.attempts = 3;
    r.wait_ms = 41;
    r.hold_ms = 2;
    return r;
}

static struct sale_result failed(int status, const char *errstr) {
    struct sale_result r;
    memset(&r, 0, sizeof r);
    r.status = status;
    r.lock.attempts = 12;
    r.wait_ms = 500;
    snprintf(r.errstr, sizeof r.errstr, "%s", errstr);
    return r;
}

/* ---- Direct: the sale's JSON written without cJSON -------------------------- */

/* One field of the sweep: the values it takes. */
static const long long sweep_nums[] = {
    0, 1, -1, -5, 10, 199, 1000000, INT_MAX, INT_MIN, INT_MAX + 1LL, INT_MIN - 1LL, 1LL << 53};
static const char *const sweep_strs[] = {
    "0a1b2c3d-000042", "", "x\"y", "a\\b", "tab\there", "\x01", "\xc3\xa9t\xc3\xa9", "del\x7f"};
enum { NNUMS = sizeof(sweep_nums) / sizeof(sweep_nums[0]) };
enum { NSTRS = sizeof(sweep_strs) / sizeof(sweep_strs[0]) };

/* Sets the i-th combination of the sweep on r (every field takes each of
 * its values as i runs). */
static void sweep_case(long i, struct sale_result *r) {
    static const int statuses[] = {INV_SOLD, INV_SOLD_OUT, INV_LOCK_TIMEOUT, INV_LOCK_LOST};
    memset(r, 0, sizeof(*r));
    r->status = statuses[i % 4];
    r->remaining = sweep_nums[(i / 4) % NNUMS];
    r->unit = sweep_nums[(i / 3) % NNUMS];
    snprintf(r->order, sizeof(r->order), "%s", sweep_strs[(i / 5) % NSTRS]);
    r->lock.attempts = (int)(i % 7);
    r->wait_ms = sweep_nums[(i / 7) % NNUMS];
    r->hold_ms = sweep_nums[(i / 11) % NNUMS];
    r->lock.depth = (int)(i % 3) * 4;
    r->batch = (int)(i % 5);
    r->lock.token = sweep_nums[(i / 13) % NNUMS];
    r->lock.granted_by = (int)(i % LOCK_GRANTS);
    r->lock.renewals = (int)(i % 2) * 3;
    r->late = (int)(i / 2) % 2;
    if (i % 17 == 0) {
        r->lock.replicas_wanted = (int)(i % 3) + 1;
        r->lock.replicas_acked = (int)(i % 2);
    }
    if (i % 23 < 4) { /* a Redlock's votes: round trips of every size */
        static const int us[] = {0, 1, 7, 999, 1000, 1234, 123456, 2147483647, -3, 33333};
        r->lock.quorum = 2;
        r->lock.nvotes = (int)(i % 4);
        for (int v = 0; v < r->lock.nvotes; v++) {
            snprintf(r->lock.votes[v].node, sizeof(r->lock.votes[v].node), "%s",
                     v == 2 ? sweep_strs[(i / 23) % NSTRS] : "127.0.0.1:6381");
            r->lock.votes[v].outcome = (int)((i + v) % 4) - 2;
            r->lock.votes[v].us = us[(i / 7 + v) % 10];
        }
    }
    if (i % 19 == 0) r->session_ended = 1;
    snprintf(r->errstr, sizeof(r->errstr), "%s", sweep_strs[(i / 3) % NSTRS]);
}

/* reply_sale writes the common answers itself: over a sweep of every
 * field's values (ints at and past int's range, strings cJSON escapes),
 * what it writes directly is the cJSON tree's JSON byte for byte, strategy
 * names included, and it does write hundreds of them directly. */
START_TEST(test_the_sale_json_written_directly_is_the_cjson_trees_byte_for_byte) {
    long direct = 0, votes = 0;
    for (long i = 0; i < 20000; i++) {
        struct sale_result r;
        sweep_case(i, &r);
        const char *strategy =
            i % 9 == 0 ? sweep_strs[(i / 9) % NSTRS] : strategies[i % nlock_types()].name;
        char *a = reply_sale_direct(&r, strategy, (int)(i % 70000));
        char *b = reply_sale_tree(&r, strategy, (int)(i % 70000));
        char *c = reply_sale(&r, strategy, (int)(i % 70000), 0);
        ck_assert_msg(b && c && strcmp(c, b) == 0, "case %ld:\n reply_sale %s\n tree       %s", i,
                      c, b);
        ck_assert_msg(!a || strcmp(a, b) == 0, "case %ld:\n direct %s\n tree   %s", i, a, b);
        direct += a != NULL;
        votes += a && strstr(a, "\"votes\":[{") && strstr(a, "\"replicas\"");
        free(a);
        free(b);
        free(c);
    }
    /* It takes the common answers: a plain sale among them. */
    ck_assert_int_gt(direct, 500);
    ck_assert_int_gt(votes, 5); /* a Redlock's votes and replicas among them */
    struct sale_result plain = sold();
    char *d = reply_sale_direct(&plain, "atomic", 3786);
    ck_assert_ptr_nonnull(d);
    free(d);
}
END_TEST

/* ---- Core ---------------------------------------------------------------- */

START_TEST(test_a_sold_sale_reports_remaining_unit_order_strategy_port_and_lock) {
    struct sale_result r = sold();
    cJSON *o = parse(reply_sale(&r, "redisson", 3786, 0));
    ck_assert_str_eq(str(o, "status"), "sold");
    ck_assert_int_eq((long long)num(o, "remaining"), 7);
    ck_assert_int_eq((long long)num(o, "unit"), 8);
    ck_assert_str_eq(str(o, "order"), "0a1b2c3d-000042");
    ck_assert_str_eq(str(o, "strategy"), "redisson");
    ck_assert_int_eq((int)num(o, "port"), 3786);
    const cJSON *lk = field(o, "lock");
    ck_assert(cJSON_IsObject(lk));
    ck_assert_int_eq((int)num(lk, "attempts"), 3);
    ck_assert_int_eq((long long)num(lk, "wait_ms"), 41);
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(o, "error"));
}
END_TEST

START_TEST(test_a_sold_sale_of_the_last_unit_reports_zero_remaining) {
    struct sale_result r = sold();
    r.remaining = 0;
    r.unit = 1;
    cJSON *o = parse(reply_sale(&r, "none", 3787, 0));
    ck_assert_str_eq(str(o, "status"), "sold");
    ck_assert_int_eq((long long)num(o, "remaining"), 0);
    ck_assert_int_eq((long long)num(o, "unit"), 1);
    ck_assert_int_eq((int)num(o, "port"), 3787);
}
END_TEST

START_TEST(test_a_fenced_or_retried_sale_reports_its_token_and_depth_in_lock) {
    struct sale_result r = sold();
    r.lock.token = 1234567;
    r.lock.depth = 5;
    cJSON *o = parse(reply_sale(&r, "fenced", 3786, 0));
    const cJSON *lk = field(o, "lock");
    ck_assert_int_eq((long long)num(lk, "token"), 1234567);
    ck_assert_int_eq((int)num(lk, "depth"), 5);
}
END_TEST

START_TEST(test_a_sold_out_sale_says_sold_out_with_its_strategy_and_port) {
    struct sale_result r;
    memset(&r, 0, sizeof r);
    r.status = INV_SOLD_OUT;
    r.remaining = 0;
    r.lock.attempts = 1;
    cJSON *o = parse(reply_sale(&r, "atomic", 3786, 0));
    ck_assert_str_eq(str(o, "status"), "sold_out");
    ck_assert_str_eq(str(o, "strategy"), "atomic");
    ck_assert_int_eq((int)num(o, "port"), 3786);
    ck_assert_int_eq((int)num(field(o, "lock"), "attempts"), 1);
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(o, "error"));
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(o, "order"));
}
END_TEST

START_TEST(test_a_sold_sale_as_text_is_the_demos_sentence) {
    struct sale_result r = sold();
    assert_text(reply_sale(&r, "redisson", 3786, 1),
                "成功卖出一个商品,库存剩余: 7\t服务端口号:3786");
}
END_TEST

START_TEST(test_a_sold_out_sale_as_text_is_the_demos_sentence) {
    struct sale_result r;
    memset(&r, 0, sizeof r);
    r.status = INV_SOLD_OUT;
    assert_text(reply_sale(&r, "none", 3787, 1), "商品卖完了");
}
END_TEST

START_TEST(test_sold_and_sold_out_are_200) {
    ck_assert_int_eq(reply_sale_http_status(INV_SOLD), 200);
    ck_assert_int_eq(reply_sale_http_status(INV_SOLD_OUT), 200);
}
END_TEST

START_TEST(test_lock_timeout_and_backend_unavailable_are_503) {
    ck_assert_int_eq(reply_sale_http_status(INV_LOCK_TIMEOUT), 503);
    ck_assert_int_eq(reply_sale_http_status(INV_BACKEND), 503);
}
END_TEST

START_TEST(test_stale_token_bad_stock_and_lock_lost_are_409) {
    ck_assert_int_eq(reply_sale_http_status(INV_STALE_TOKEN), 409);
    ck_assert_int_eq(reply_sale_http_status(INV_BAD_DATA), 409);
    ck_assert_int_eq(reply_sale_http_status(INV_LOCK_LOST), 409);
}
END_TEST

START_TEST(test_every_sale_result_has_its_status_word) {
    ck_assert_str_eq(reply_sale_status_word(INV_SOLD), "sold");
    ck_assert_str_eq(reply_sale_status_word(INV_SOLD_OUT), "sold_out");
    ck_assert_str_eq(reply_sale_status_word(INV_LOCK_TIMEOUT), "lock_timeout");
    ck_assert_str_eq(reply_sale_status_word(INV_BACKEND), "backend_unavailable");
    ck_assert_str_eq(reply_sale_status_word(INV_STALE_TOKEN), "stale_token");
    ck_assert_str_eq(reply_sale_status_word(INV_LOCK_LOST), "lock_lost");
    ck_assert_str_eq(reply_sale_status_word(INV_BAD_DATA), "bad_stock");
}
END_TEST

START_TEST(test_the_stock_reports_stock_and_port) {
    cJSON *o = parse(reply_stock(200, 3787, 0));
    ck_assert_int_eq((long long)num(o, "stock"), 200);
    ck_assert_int_eq((int)num(o, "port"), 3787);
}
END_TEST

START_TEST(test_a_negative_stock_is_reported_as_is) {
    /* An oversold stock goes below zero; the answer must not hide it. */
    cJSON *o = parse(reply_stock(-3, 3786, 0));
    ck_assert_int_eq((long long)num(o, "stock"), -3);
}
END_TEST

START_TEST(test_the_stock_as_text_is_one_line_with_the_port) {
    assert_text(reply_stock(42, 3786, 1), "库存: 42\t服务端口号:3786");
}
END_TEST

START_TEST(test_the_audit_reports_every_count_and_oversold_as_a_bool) {
    struct audit a = {.stock = -2,
                      .initial = 200,
                      .sold = 203,
                      .sold_twice = 1,
                      .oversold_units = 1,
                      .oversold = 1,
                      .violations = 17};
    cJSON *o = parse(reply_audit(&a, 0));
    ck_assert_int_eq((long long)num(o, "stock"), -2);
    ck_assert_int_eq((long long)num(o, "initial"), 200);
    ck_assert_int_eq((long long)num(o, "sold"), 203);
    ck_assert_int_eq((long long)num(o, "sold_twice"), 1);
    ck_assert_int_eq((long long)num(o, "oversold_units"), 1);
    ck_assert_int_eq((long long)num(o, "violations"), 17);
    const cJSON *over = field(o, "oversold");
    ck_assert(cJSON_IsBool(over));
    ck_assert(cJSON_IsTrue(over));
}
END_TEST

START_TEST(test_a_clean_audit_says_oversold_false) {
    struct audit a = {.stock = 0, .initial = 200, .sold = 200};
    cJSON *o = parse(reply_audit(&a, 0));
    const cJSON *over = field(o, "oversold");
    ck_assert(cJSON_IsBool(over));
    ck_assert(cJSON_IsFalse(over));
    ck_assert_int_eq((long long)num(o, "sold"), 200);
    ck_assert_int_eq((long long)num(o, "violations"), 0);
}
END_TEST

START_TEST(test_the_audit_as_text_has_one_key_value_per_line) {
    struct audit a = {.stock = 5, .initial = 10, .sold = 5, .oversold = 0};
    char *t = reply_audit(&a, 1);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(strstr(t, "stock: 5\n"));
    ck_assert_ptr_nonnull(strstr(t, "initial: 10\n"));
    ck_assert_ptr_nonnull(strstr(t, "sold: 5\n"));
    ck_assert_ptr_nonnull(strstr(t, "oversold: no\n"));
    free(t);
}
END_TEST

START_TEST(test_the_strategies_list_every_registered_lock_type_and_the_default) {
    int n = nlock_types();
    ck_assert_int_gt(n, 0);
    const char *unavailable[64] = {0};
    unavailable[1] = "mysql.host is not configured";
    cJSON *o = parse(reply_strategies(strategies[0].name, unavailable, 0));
    ck_assert_str_eq(str(o, "default"), strategies[0].name);
    const cJSON *list = field(o, "strategies");
    ck_assert(cJSON_IsArray(list));
    ck_assert_int_eq(cJSON_GetArraySize(list), n);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        ck_assert(cJSON_IsObject(e));
        ck_assert_str_eq(str(e, "name"), strategies[i].name);
        ck_assert_str_eq(str(e, "description"), strategies[i].description);
        ck_assert_str_eq(str(e, "flaw"), strategies[i].flaw);
        ck_assert_int_gt((int)strlen(str(e, "description")), 0);
        ck_assert_int_gt((int)strlen(str(e, "flaw")), 0);
        /* One that cannot be used here says so, and why. */
        ck_assert(cJSON_IsBool(field(e, "available")));
        ck_assert_int_eq(cJSON_IsTrue(field(e, "available")), i != 1);
        if (i == 1)
            ck_assert_str_eq(str(e, "unavailable"), "mysql.host is not configured");
        else
            ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(e, "unavailable"));
    }
}
END_TEST

START_TEST(test_the_strategies_default_is_the_one_given) {
    const char *last = strategies[nlock_types() - 1].name;
    const char *unavailable[64] = {0};
    cJSON *o = parse(reply_strategies(last, unavailable, 0));
    ck_assert_str_eq(str(o, "default"), last);
}
END_TEST

START_TEST(test_the_strategies_as_text_name_each_one_and_mark_the_default) {
    int n = nlock_types();
    const char *def = strategies[n - 1].name;
    const char *unavailable[64] = {0};
    unavailable[0] = "zookeeper.connect is not configured";
    char *t = reply_strategies(def, unavailable, 1);
    char want[256];
    ck_assert_ptr_nonnull(t);
    for (int i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(strstr(t, strategies[i].name));
        ck_assert_ptr_nonnull(strstr(t, strategies[i].description));
        ck_assert_ptr_nonnull(strstr(t, strategies[i].flaw));
    }
    snprintf(want, sizeof want, "%s (default)", def);
    ck_assert_ptr_nonnull(strstr(t, want));
    ck_assert_ptr_nonnull(strstr(t, "(unavailable: zookeeper.connect is not configured)"));
    free(t);
}
END_TEST

/* ---- Errors -------------------------------------------------------------- */

START_TEST(test_an_error_has_its_status_word_and_a_human_sentence) {
    cJSON *o = parse(reply_error("bad_request", "The body must be {\"stock\": N}.", 0));
    ck_assert_str_eq(str(o, "status"), "bad_request");
    ck_assert_str_eq(str(o, "error"), "The body must be {\"stock\": N}.");
}
END_TEST

START_TEST(test_an_error_as_text_is_the_sentence_alone) {
    assert_text(reply_error("bad_request", "stock must be a whole number", 1),
                "stock must be a whole number");
}
END_TEST

START_TEST(test_an_error_with_quotes_backslashes_and_newlines_is_valid_json) {
    const char *nasty = "say \"hi\"\\ back\\slash\nnew line\r\ttab \x01 ctl, "
                        "\xe5\xba\x93\xe5\xad\x98 }]\"";
    cJSON *o = parse(reply_error("backend_unavailable", nasty, 0));
    ck_assert_str_eq(str(o, "status"), "backend_unavailable");
    ck_assert_str_eq(str(o, "error"), nasty);
}
END_TEST

START_TEST(test_an_empty_error_sentence_is_still_valid_json) {
    cJSON *o = parse(reply_error("bad_request", "", 0));
    ck_assert_str_eq(str(o, "error"), "");
}
END_TEST

START_TEST(test_an_unknown_strategy_is_named_and_every_known_one_listed) {
    int n = nlock_types();
    cJSON *o = parse(reply_unknown_strategy("no-such-lock", 0));
    ck_assert_str_eq(str(o, "status"), "unknown_strategy");
    const char *sentence = str(o, "error");
    ck_assert_ptr_nonnull(strstr(sentence, "no-such-lock"));
    for (int i = 0; i < n; i++)
        ck_assert_msg(strstr(sentence, strategies[i].name) != NULL, "\"%s\" not in \"%s\"",
                      strategies[i].name, sentence);
    const cJSON *list = field(o, "strategies");
    ck_assert(cJSON_IsArray(list));
    ck_assert_int_eq(cJSON_GetArraySize(list), n);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        ck_assert(cJSON_IsString(e));
        ck_assert_str_eq(cJSON_GetStringValue(e), strategies[i].name);
    }
}
END_TEST

START_TEST(test_an_unknown_strategy_as_text_names_it_and_every_known_one) {
    char *t = reply_unknown_strategy("zookeeper", 1);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(strstr(t, "zookeeper"));
    for (int i = 0; strategies[i].name; i++)
        ck_assert_msg(strstr(t, strategies[i].name) != NULL, "\"%s\" not in \"%s\"",
                      strategies[i].name, t);
    free(t);
}
END_TEST

START_TEST(test_an_unknown_strategy_with_quotes_and_percents_is_valid_json) {
    const char *name = "a\"b\\c%s%n\n";
    cJSON *o = parse(reply_unknown_strategy(name, 0));
    ck_assert_ptr_nonnull(strstr(str(o, "error"), name));
}
END_TEST

START_TEST(test_a_very_long_unknown_strategy_is_named_whole) {
    char name[4097];
    memset(name, 'z', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    cJSON *o = parse(reply_unknown_strategy(name, 0));
    ck_assert_ptr_nonnull(strstr(str(o, "error"), name));
    ck_assert_int_eq(cJSON_GetArraySize(field(o, "strategies")), nlock_types());
}
END_TEST

START_TEST(test_a_lock_timeout_sale_carries_its_errstr_in_error) {
    struct sale_result r = failed(INV_LOCK_TIMEOUT, "the lock stayed busy for 500 ms");
    cJSON *o = parse(reply_sale(&r, "setnx-spin", 3786, 0));
    ck_assert_str_eq(str(o, "status"), "lock_timeout");
    ck_assert_str_eq(str(o, "error"), "the lock stayed busy for 500 ms");
    ck_assert_str_eq(str(o, "strategy"), "setnx-spin");
    ck_assert_int_eq((int)num(o, "port"), 3786);
    const cJSON *lk = field(o, "lock");
    ck_assert_int_eq((int)num(lk, "attempts"), 12);
    ck_assert_int_eq((long long)num(lk, "wait_ms"), 500);
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(o, "order"));
}
END_TEST

START_TEST(test_a_lock_timeout_sale_as_text_is_its_errstr) {
    struct sale_result r = failed(INV_LOCK_TIMEOUT, "the lock stayed busy for 500 ms");
    assert_text(reply_sale(&r, "setnx-spin", 3786, 1), "the lock stayed busy for 500 ms");
}
END_TEST

START_TEST(test_every_failed_sale_has_its_word_and_error) {
    const int statuses[] = {INV_LOCK_TIMEOUT, INV_BACKEND, INV_STALE_TOKEN, INV_BAD_DATA,
                            INV_LOCK_LOST};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        struct sale_result r = failed(statuses[i], "why it failed");
        cJSON *o = parse(reply_sale(&r, "fenced", 3787, 0));
        ck_assert_str_eq(str(o, "status"), reply_sale_status_word(statuses[i]));
        ck_assert_str_eq(str(o, "error"), "why it failed");
        ck_assert_str_eq(str(o, "strategy"), "fenced");
    }
}
END_TEST

START_TEST(test_a_failed_sales_errstr_with_quotes_and_newlines_is_valid_json) {
    const char *nasty = "redis said \"ERR\" at C:\\x\nand then\tnothing";
    struct sale_result r = failed(INV_BACKEND, nasty);
    cJSON *o = parse(reply_sale(&r, "redlock", 3786, 0));
    ck_assert_str_eq(str(o, "status"), "backend_unavailable");
    ck_assert_str_eq(str(o, "error"), nasty);
}
END_TEST

START_TEST(test_an_errstr_filling_its_whole_buffer_is_reported_whole) {
    struct sale_result r = failed(INV_BACKEND, "");
    memset(r.errstr, 'e', sizeof r.errstr - 1);
    r.errstr[sizeof r.errstr - 1] = '\0';
    cJSON *o = parse(reply_sale(&r, "none", 3786, 0));
    ck_assert_int_eq((int)strlen(str(o, "error")), (int)sizeof r.errstr - 1);
}
END_TEST

Suite *reply_suite(void) {
    Suite *s = suite_create("reply");
    TCase *core = tcase_create("Core");
    TCase *errors = tcase_create("Errors");

    tcase_add_checked_fixture(core, setup, teardown);
    tcase_add_test(core, test_a_sold_sale_reports_remaining_unit_order_strategy_port_and_lock);
    tcase_add_test(core, test_the_sale_json_written_directly_is_the_cjson_trees_byte_for_byte);
    tcase_add_test(core, test_a_sold_sale_of_the_last_unit_reports_zero_remaining);
    tcase_add_test(core, test_a_fenced_or_retried_sale_reports_its_token_and_depth_in_lock);
    tcase_add_test(core, test_a_sold_out_sale_says_sold_out_with_its_strategy_and_port);
    tcase_add_test(core, test_a_sold_sale_as_text_is_the_demos_sentence);
    tcase_add_test(core, test_a_sold_out_sale_as_text_is_the_demos_sentence);
    tcase_add_test(core, test_sold_and_sold_out_are_200);
    tcase_add_test(core, test_lock_timeout_and_backend_unavailable_are_503);
    tcase_add_test(core, test_stale_token_bad_stock_and_lock_lost_are_409);
    tcase_add_test(core, test_every_sale_result_has_its_status_word);
    tcase_add_test(core, test_the_stock_reports_stock_and_port);
    tcase_add_test(core, test_a_negative_stock_is_reported_as_is);
    tcase_add_test(core, test_the_stock_as_text_is_one_line_with_the_port);
    tcase_add_test(core, test_the_audit_reports_every_count_and_oversold_as_a_bool);
    tcase_add_test(core, test_a_clean_audit_says_oversold_false);
    tcase_add_test(core, test_the_audit_as_text_has_one_key_value_per_line);
    tcase_add_test(core, test_the_strategies_list_every_registered_lock_type_and_the_default);
    tcase_add_test(core, test_the_strategies_default_is_the_one_given);
    tcase_add_test(core, test_the_strategies_as_text_name_each_one_and_mark_the_default);
    suite_add_tcase(s, core);

    tcase_add_checked_fixture(errors, setup, teardown);
    tcase_add_test(errors, test_an_error_has_its_status_word_and_a_human_sentence);
    tcase_add_test(errors, test_an_error_as_text_is_the_sentence_alone);
    tcase_add_test(errors, test_an_error_with_quotes_backslashes_and_newlines_is_valid_json);
    tcase_add_test(errors, test_an_empty_error_sentence_is_still_valid_json);
    tcase_add_test(errors, test_an_unknown_strategy_is_named_and_every_known_one_listed);
    tcase_add_test(errors, test_an_unknown_strategy_as_text_names_it_and_every_known_one);
    tcase_add_test(errors, test_an_unknown_strategy_with_quotes_and_percents_is_valid_json);
    tcase_add_test(errors, test_a_very_long_unknown_strategy_is_named_whole);
    tcase_add_test(errors, test_a_lock_timeout_sale_carries_its_errstr_in_error);
    tcase_add_test(errors, test_a_lock_timeout_sale_as_text_is_its_errstr);
    tcase_add_test(errors, test_every_failed_sale_has_its_word_and_error);
    tcase_add_test(errors, test_a_failed_sales_errstr_with_quotes_and_newlines_is_valid_json);
    tcase_add_test(errors, test_an_errstr_filling_its_whole_buffer_is_reported_whole);
    suite_add_tcase(s, errors);
    return s;
}
