/* check_commit.c -- the commit point and what the history says of it
 * (issue 20, safety round 3). Each test pins one defect of the outside
 * review by its recipe, made deterministic, and proves that its fault hit
 * its window before it judges the outcome:
 *
 *   Stall    a Redlock renewal stalled on a paused master held up a redisson
 *            holder's commit past its lease (a unit sold twice);
 *   Guard    a holder stalled after its last check: the write is refused
 *            in Redis for the types that enforce their lease, and where it
 *            lands (the ladder's flawed steps, Redlock) the history dates it
 *            by when Redis applied it, so the checker sees it;
 *   History  a history trimmed by its cap is never judged safe;
 *   Keys     item names that were other keys (the fence counter, the
 *            ledger, the lock);
 *   Core     the lock core on its own: the in-process gate keyed by family,
 *            and a failed nested Redlock acquire whose answer was lost.
 *
 * Black box but for Core: HTTP to real inventoryd processes, hiredis to
 * real redis-servers, inventory-check run as users run it. */
#include "check_main.h"
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "harness.h"
#include "lock.h"
#include "mclock.h"
#include "rpool.h"

#define LOCK_KEY "RedisDistributedLock"
#define STOCK_KEY "inventory001"

static pid_t redis_pid, a_pid, b_pid, master_pid[3];
static int redis_port, a_port, b_port, master_port[3];
static char nodes[128];

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    a_pid = b_pid = 0;
    for (int i = 0; i < 3; i++) master_pid[i] = 0;
    nodes[0] = '\0';
}

/* As setup, plus three Redlock masters, up long enough to vote for a TTL of
 * up to a second. */
static void setup_masters(void) {
    setup();
    for (int i = 0; i < 3; i++) {
        master_pid[i] = harness_redis_start(0, &master_port[i]);
        ck_assert_int_gt(master_pid[i], 0);
    }
    snprintf(nodes, sizeof(nodes), "redlock.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             master_port[0], master_port[1], master_port[2]);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(harness_redis_wait_uptime(master_port[i], 1), 0);
}

static void teardown(void) {
    for (int i = 0; i < 3; i++)
        if (master_pid[i] > 0) harness_redis_int(master_port[i], "CLIENT UNPAUSE");
    harness_stop(a_pid);
    harness_stop(b_pid);
    for (int i = 0; i < 3; i++) harness_stop(master_pid[i]);
    harness_stop(redis_pid);
}

/* Starts instances A and B (faults on, stock reset to 200) with this TTL and
 * wait, the Redlock masters when the case has them, and the extra
 * assignments (NULL-terminated). */
static void start_pair(int ttl_ms, int wait_ms, ...) {
    const char *sets[24];
    int n = 0;
    if (nodes[0]) sets[n++] = nodes;
    va_list ap;
    va_start(ap, wait_ms);
    for (const char *s; n < 23 && (s = va_arg(ap, const char *)) != NULL;) sets[n++] = s;
    va_end(ap);
    sets[n] = NULL;
    ck_assert_int_eq(
        harness_pair_start(redis_port, ttl_ms, wait_ms, sets, &a_pid, &a_port, &b_pid, &b_port), 0);
}

static void reset_item(const char *item, int stock) {
    struct httpc_response r;
    char body[128];
    snprintf(body, sizeof(body), "{\"stock\":%d,\"item\":\"%s\"}", stock, item);
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL, body, &r), 200);
}

/* Runs a command that must answer +OK. */
static void redis_ok(int port, const char *cmd) {
    redisReply *r = harness_redis(port, cmd); /* cmd has no %: split on spaces */
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0, "%s on %d: %s",
                  cmd, port, r && r->str ? r->str : "no answer");
    freeReplyObject(r);
}

static void get_ok(int port, const char *path) {
    struct httpc_response r;
    int code = harness_http(port, "GET", path, NULL, NULL, &r);
    ck_assert_msg(code == 200, "GET %s answered %d: %.300s", path, code, r.body);
}

/* ---- the history and the checker, as a user reads them --------------------- */

/* GET of what (with item in place of its %s) on A, which must answer 200
 * with JSON: parsed. */
static cJSON *get_json(const char *what, const char *item) {
    struct httpc_response r;
    char path[160];
    snprintf(path, sizeof(path), what, item);
    ck_assert_int_eq(harness_http(a_port, "GET", path, NULL, NULL, &r), 200);
    cJSON *doc = cJSON_Parse(r.body);
    ck_assert_ptr_nonnull(doc);
    return doc;
}

/* The item's history events, oldest first (GET /inventory/history on A). */
static cJSON *history(const char *item) {
    return get_json("/inventory/history?item=%s&limit=1000", item);
}

/* The event of history doc with this order (or, order NULL, this outcome). */
static const cJSON *event_of(const cJSON *doc, const char *order, const char *outcome) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "events")) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, order ? "order" : "outcome");
        if (cJSON_IsString(o) && strcmp(o->valuestring, order ? order : outcome) == 0) return e;
    }
    return NULL;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Runs inventory-check on item with args; returns its JSON (free it) and
 * its exit status in *status. */
static cJSON *check_item(const char *item, const char *args, int *status) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s --redis 127.0.0.1:%d --item %s %s 2>&1", INVENTORY_CHECK_BIN,
             redis_port, item, args ? args : "");
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    static char out[1 << 16];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    cJSON *doc = cJSON_Parse(out);
    ck_assert_msg(doc != NULL, "inventory-check printed no JSON: %.400s", out);
    return doc;
}

static double count_of(const cJSON *check, const char *kind) {
    return num(cJSON_GetObjectItemCaseSensitive(check, "counts"), kind);
}

/* ---- Stall ------------------------------------------------------------------ */

/* The review's recipe. A holds a Redlock lock on item "ballast" for 6 s;
 * Redlock master 3 is paused at 0.15 s, so every renewal of the ballast
 * waits out the 1.5 s node timeout there. H, a redisson sale on A, holds
 * from 1.1 s for 0.85 s; B's redisson sale on the same item comes at
 * 1.2 s. Before the fix the watchdog's one round renewed H, then stalled
 * on the ballast, and H's commit waited for the whole round: H's lock
 * expired, B took it and sold unit 200, then H's queued write sold unit
 * 200 again. Now each server has its lane: H renews on time, commits at
 * once, and B waits its turn. */
START_TEST(
    test_a_redlock_renewal_stalled_on_a_paused_master_neither_delays_nor_endangers_a_redisson_holder) {
    start_pair(1000, 5000, "lock.scope=item", "redlock.node-timeout-ms=1500", NULL);
    reset_item("ballast", 200);
    /* Connections made first, the watchdog's too (a hold renewed once):
     * the holds below pay for no dial, as on a running service. */
    get_ok(a_port, "/inventory/sale/redlock?item=ballast&hold_ms=500");
    get_ok(a_port, "/inventory/sale/redisson?hold_ms=500");
    get_ok(b_port, "/inventory/sale/redisson");
    reset_item("ballast", 200);
    reset_item(STOCK_KEY, 200);
    struct harness_bg ballast, h, b;
    int64_t t0 = mclock_ms();
    harness_bg_start(&ballast, a_port, "/inventory/sale/redlock?item=ballast&hold_ms=6000", 0);
    mclock_sleep_ms(150);
    redis_ok(master_port[2], "CLIENT PAUSE 6000 ALL");
    harness_bg_start(&h, a_port, "/inventory/sale/redisson?hold_ms=850",
                     (int)(t0 + 1100 - mclock_ms()));
    harness_bg_start(&b, b_port, "/inventory/sale/redisson", (int)(t0 + 1200 - mclock_ms()));
    harness_bg_join(&h);
    long long stalled_ms =
        harness_metric(a_port, "inventoryd_watchdog_longest_renewal_ms{lane=\"redlock\"}");
    harness_bg_join(&b);
    harness_redis_int(master_port[2], "CLIENT UNPAUSE");
    harness_bg_join(&ballast);

    /* The fault's window: a renewal on the Redlock lane stalled for the node
     * timeout while H held its lock. */
    ck_assert_msg(stalled_ms >= 1400,
                  "no Redlock renewal stalled before H answered (longest %lld "
                  "ms): the fault missed its window",
                  stalled_ms);
    ck_assert_msg(h.sent_ms + h.took_ms - t0 > 1800,
                  "H answered at %lld ms, before the first stalled round ended",
                  (long long)(h.sent_ms + h.took_ms - t0));
    /* The outcome. */
    ck_assert_msg(h.status == 200 && strcmp(harness_json_str(h.body, "status"), "sold") == 0,
                  "H: %d %s", h.status, h.body);
    ck_assert_msg(harness_json_num(h.body, "lock.hold_ms") < 850 + 400,
                  "H's commit waited for another lock's renewal: hold_ms %.0f for hold_ms=850",
                  harness_json_num(h.body, "lock.hold_ms"));
    ck_assert_msg(harness_json_num(h.body, "lock.renewals") >= 2, "H was not renewed on time: %s",
                  h.body);
    ck_assert_msg(b.status == 200 && strcmp(harness_json_str(b.body, "status"), "sold") == 0,
                  "B: %d %s", b.status, b.body);
    ck_assert_msg(harness_json_num(b.body, "unit") != harness_json_num(h.body, "unit"),
                  "H and B sold the same unit: %s / %s", h.body, b.body);
    ck_assert_int_eq(harness_audit(a_port, "sold_twice"), 0);
    int status;
    cJSON *chk = check_item(STOCK_KEY, NULL, &status);
    ck_assert_msg(status == 0, "inventory-check: %d", status);
    cJSON_Delete(chk);
}
END_TEST

/* ---- Guard ------------------------------------------------------------------ */

/* A holds strategy s's lock with TTL 1 s and stalls 1.8 s between its last
 * lease check and its write (commit_delay_ms: a pause at the worst
 * moment); B's sale comes at 1.2 s, after A's lock expired in Redis, and
 * sells at once. Fills a and b. */
static void stalled_after_the_check(const char *s, struct harness_bg *a, struct harness_bg *b) {
    char pa[128], pb[128];
    snprintf(pa, sizeof(pa), "/inventory/sale/%s", s);
    get_ok(a_port, pa); /* connections made first */
    get_ok(b_port, pa);
    reset_item(STOCK_KEY, 200);
    snprintf(pa, sizeof(pa), "/inventory/sale/%s?commit_delay_ms=1800", s);
    snprintf(pb, sizeof(pb), "/inventory/sale/%s", s);
    harness_bg_start(a, a_port, pa, 0);
    harness_bg_start(b, b_port, pb, 1200);
    harness_bg_join(a);
    harness_bg_join(b);
    ck_assert_msg(b->status == 200 && strcmp(harness_json_str(b->body, "status"), "sold") == 0,
                  "B: %d %s", b->status, b->body);
}

/* The window, from the history: B was granted the lock before A's write
 * (or its refusal) applied in Redis. Returns A's event. */
static const cJSON *b_granted_before_a_wrote(const cJSON *doc, const char *a_outcome,
                                             const struct harness_bg *b) {
    const cJSON *eb = event_of(doc, harness_json_str(b->body, "order"), NULL);
    const cJSON *ea = event_of(doc, NULL, a_outcome);
    ck_assert_msg(ea && eb, "the history lacks A's %s event or B's sold one", a_outcome);
    ck_assert_msg(num(ea, "written_us") > 0, "A's event has no written_us");
    ck_assert_msg(num(eb, "granted_us") < num(ea, "written_us"),
                  "B was granted at %.0f, after A's write applied at %.0f: the stall missed its "
                  "window",
                  num(eb, "granted_us"), num(ea, "written_us"));
    ck_assert_msg(num(ea, "written_us") - num(ea, "released_us") < 500000,
                  "A's event dates its send %.0f us before Redis applied it",
                  num(ea, "written_us") - num(ea, "released_us"));
    return ea;
}

START_TEST(
    test_a_redisson_holder_stalled_after_its_last_check_writes_nothing_once_its_lock_is_gone) {
    start_pair(1000, 5000, NULL);
    struct harness_bg a, b;
    stalled_after_the_check("redisson", &a, &b);
    cJSON *doc = history(STOCK_KEY);
    const cJSON *ea = b_granted_before_a_wrote(doc, "lock_lost", &b);
    const cJSON *owned = cJSON_GetObjectItemCaseSensitive(ea, "owned");
    ck_assert_msg(cJSON_IsFalse(owned),
                  "A's refused write: Redis must have seen the lock was not A's");
    ck_assert_msg(a.status == 409 && strcmp(harness_json_str(a.body, "status"), "lock_lost") == 0,
                  "A wrote after its lock was gone: %d %s", a.status, a.body);
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN " STOCK_KEY ":sold"), 1);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET " STOCK_KEY), 199);
    int status;
    cJSON *chk = check_item(STOCK_KEY, NULL, &status);
    ck_assert_msg(status == 0, "inventory-check says %d", status);
    cJSON_Delete(chk);
    cJSON_Delete(doc);
}
END_TEST

/* The ladder's expiring step enforces nothing: A's write lands after B's.
 * The history says so from what Redis saw as it applied, and the checker
 * reads it: a late write, and an overlap with B. */
START_TEST(
    test_an_expiring_holder_stalled_after_its_last_check_writes_late_and_the_checker_says_so) {
    start_pair(1000, 5000, NULL);
    struct harness_bg a, b;
    stalled_after_the_check("expiring", &a, &b);
    cJSON *doc = history(STOCK_KEY);
    const cJSON *ea = b_granted_before_a_wrote(doc, "sold", &b);
    ea = event_of(doc, harness_json_str(a.body, "order"), NULL);
    ck_assert_ptr_nonnull(ea);
    ck_assert_msg(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(ea, "owned")),
                  "Redis saw A's late write inside A's own lock?");
    ck_assert_msg(num(ea, "written_us") > num(ea, "lease_us"),
                  "A's write applied at %.0f, not after its lease %.0f", num(ea, "written_us"),
                  num(ea, "lease_us"));
    ck_assert_int_eq(a.status, 200);
    int status;
    cJSON *chk = check_item(STOCK_KEY, NULL, &status);
    ck_assert_int_eq(status, 1);
    ck_assert_msg(count_of(chk, "late_write") >= 1, "the checker missed the late write");
    ck_assert_msg(count_of(chk, "overlap") >= 1, "the checker missed the overlap");
    cJSON_Delete(chk);
    cJSON_Delete(doc);
}
END_TEST

/* Redlock's documented flaw: no script beside the stock can look at a lock
 * that lives on other servers, so a pause after the last check lets a
 * stale write land. The checker dates it from the times alone. */
START_TEST(
    test_redlock_a_pause_after_the_last_check_lets_a_stale_write_land_and_the_checker_dates_it) {
    start_pair(1000, 5000, NULL);
    struct harness_bg a, b;
    stalled_after_the_check("redlock", &a, &b);
    cJSON *doc = history(STOCK_KEY);
    const cJSON *ea = b_granted_before_a_wrote(doc, "sold", &b);
    ea = event_of(doc, harness_json_str(a.body, "order"), NULL);
    ck_assert_ptr_nonnull(ea);
    ck_assert_msg(cJSON_GetObjectItemCaseSensitive(ea, "owned") == NULL,
                  "a Redlock write cannot be looked at beside the stock");
    int status;
    cJSON *chk = check_item(STOCK_KEY, NULL, &status);
    ck_assert_int_eq(status, 1);
    ck_assert_msg(count_of(chk, "late_write") >= 1, "the checker missed the late write");
    cJSON_Delete(chk);
    cJSON_Delete(doc);
}
END_TEST

/* ---- History ---------------------------------------------------------------- */

START_TEST(test_a_history_trimmed_by_its_cap_is_judged_incomplete_never_safe) {
    start_pair(10000, 5000, "history.max-events=100", NULL);
    reset_item(STOCK_KEY, 1000);
    for (int i = 0; i < 400; i++) get_ok(a_port, "/inventory/sale/owner-lua");
    long long len = harness_redis_int(redis_port, "XLEN " STOCK_KEY ":history");
    ck_assert_msg(len > 0 && len < 400, "the stream was not trimmed (%lld events)", len);
    int status;
    cJSON *chk = check_item(STOCK_KEY, NULL, &status);
    ck_assert_msg(status == 3, "inventory-check exited %d on a trimmed history", status);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(chk, "verdict")->valuestring, "incomplete");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(chk, "safe")));
    ck_assert_int_eq(num(chk, "trimmed"), 400 - len);
    cJSON_Delete(chk);
    /* A reset starts a new stream: complete again. */
    reset_item(STOCK_KEY, 200);
    get_ok(a_port, "/inventory/sale/owner-lua");
    chk = check_item(STOCK_KEY, NULL, &status);
    ck_assert_int_eq(status, 0);
    cJSON_Delete(chk);
}
END_TEST

/* ---- Keys ------------------------------------------------------------------- */

static int reset_answer(const char *item, int stock) {
    struct httpc_response r;
    char body[160];
    snprintf(body, sizeof(body), "{\"stock\":%d,\"item\":\"%s\"}", stock, item);
    return harness_http(a_port, "POST", "/inventory/reset", NULL, body, &r);
}

/* The review's recipe: three fenced sales, then a reset of the item named
 * like the fence counter rewound it, and the next sale got token 1. Every
 * key the service keeps beside an item is now out of reach of an item. */
START_TEST(test_no_item_name_reaches_another_key_and_the_fence_never_rewinds) {
    start_pair(10000, 5000, "lock.scope=global", NULL);
    struct httpc_response r;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/fenced", NULL, NULL, &r),
                         200);
    ck_assert_int_eq(harness_json_num(r.body, "lock.token"), 3);
    static const char *const reserved[] = {LOCK_KEY,
                                           LOCK_KEY ":fence",
                                           STOCK_KEY ":sold",
                                           STOCK_KEY ":initial",
                                           STOCK_KEY ":holders",
                                           STOCK_KEY ":violations",
                                           STOCK_KEY ":families",
                                           STOCK_KEY ":history",
                                           STOCK_KEY ":alive:x",
                                           LOCK_KEY ":" STOCK_KEY,
                                           NULL};
    for (int i = 0; reserved[i]; i++) {
        ck_assert_msg(reset_answer(reserved[i], 0) == 400, "a reset of item %s was accepted",
                      reserved[i]);
        char path[160];
        snprintf(path, sizeof(path), "/inventory/sale/fenced?item=%s", reserved[i]);
        ck_assert_msg(harness_http(a_port, "GET", path, NULL, NULL, &r) == 400,
                      "a sale of item %s was not refused", reserved[i]);
        snprintf(path, sizeof(path), "/inventory?item=%s", reserved[i]);
        ck_assert_int_eq(harness_http(a_port, "GET", path, NULL, NULL, &r), 400);
    }
    ck_assert_int_eq(harness_redis_int(redis_port, "GET " LOCK_KEY ":fence"), 3);
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/fenced", NULL, NULL, &r), 200);
    ck_assert_int_eq(harness_json_num(r.body, "lock.token"), 4);
    ck_assert_int_eq(harness_audit(a_port, "sold"), 4);
    ck_assert_int_eq(harness_audit(a_port, "sold_twice"), 0);
    /* Nor can the configured item be the lock. */
    int port = harness_free_port();
    char rp[32];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    const char *sets[] = {rp, "inventory.key=" LOCK_KEY, NULL};
    pid_t bad = harness_inventoryd_start(port, sets);
    ck_assert_msg(bad <= 0, "inventory.key=lock.name started");
    harness_stop(bad);
}
END_TEST

/* ---- Fence: fenced and another lock of its family on one key ------------- */

/* The item's audit (GET /inventory/audit?item= on A), parsed. */
static cJSON *audit_of(const char *item) { return get_json("/inventory/audit?item=%s", item); }

static double field(const cJSON *o, const char *name) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, name);
    ck_assert_msg(cJSON_IsNumber(x), "no number %s", name);
    return x->valuedouble;
}

/* The review's recipe, with the lock's TTL at 1 s: A's fenced sale works
 * 2.5 s; once its key has expired, B sells under `other`, a lock of the
 * same key that takes an expired key without bumping the fence. A's write
 * still carries the newest token, but the lock is not A's: it must be
 * refused (409 lock_lost: the token alone proves nothing here) and the
 * unit sold once. The window first: A
 * inside (the probe's entry) when its key expired, and still inside when
 * B sold. */
static void stale_fenced_write_refused_after(const char *other) {
    reset_item(STOCK_KEY, 100);
    /* A known fence: A's acquire takes it one up, and B's must not. */
    long long fence = harness_redis_int(redis_port, "INCR " LOCK_KEY ":fence");
    struct harness_bg a;
    harness_bg_start(&a, a_port, "/inventory/sale/fenced?hold_ms=2500", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN " STOCK_KEY ":holders"),
                  "A never came inside");
    ck_assert_msg(harness_redis_until(redis_port, 0, 5000, "EXISTS " LOCK_KEY),
                  "fault missed its window: A's key outlived its 1 s lease");
    char path[96];
    snprintf(path, sizeof(path), "/inventory/sale/%s", other);
    struct httpc_response r;
    int code = harness_http(b_port, "GET", path, NULL, NULL, &r);
    ck_assert_msg(code == 200 && strcmp(harness_json_str(r.body, "status"), "sold") == 0,
                  "%s did not sell on the expired key: %d %s", other, code, r.body);
    ck_assert_msg(harness_redis_int(redis_port, "HLEN " STOCK_KEY ":holders") == 1,
                  "fault missed its window: A had left before %s sold", other);
    ck_assert_msg(harness_redis_int(redis_port, "GET " LOCK_KEY ":fence") == fence + 1,
                  "fault missed its window: %s bumped the fence, so A's token is stale anyway",
                  other);
    double unit = harness_json_num(r.body, "unit");
    harness_bg_join(&a);
    ck_assert_msg(a.status == 409,
                  "A's stale fenced write (token %.0f, the newest) landed after %s sold unit "
                  "%.0f: %d %s",
                  harness_json_num(a.body, "lock.token"), other, unit, a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "lock_lost");
    cJSON *au = audit_of(STOCK_KEY);
    ck_assert_msg(field(au, "sold_twice") == 0 && field(au, "sold") == 1 &&
                      field(au, "stock") == 99,
                  "after %s: sold %.0f, sold twice %.0f, stock %.0f", other, field(au, "sold"),
                  field(au, "sold_twice"), field(au, "stock"));
    cJSON_Delete(au);
}

START_TEST(test_a_stale_fenced_write_is_refused_when_handoff_took_the_expired_key) {
    start_pair(1000, 3000, NULL);
    stale_fenced_write_refused_after("handoff");
}
END_TEST

START_TEST(test_a_stale_fenced_write_is_refused_when_owner_lua_or_watchdog_took_the_expired_key) {
    start_pair(1000, 3000, NULL);
    stale_fenced_write_refused_after("owner-lua");
    stale_fenced_write_refused_after("watchdog");
}
END_TEST

/* ---- Reset: a reset while a sale is inside ------------------------------- */

/* The review's recipe: A's sale of item is inside its hold (800 ms) when B
 * resets the item's stock to 500. For the configured item the reset also
 * frees the lock; for another item under the global scope it cannot (a
 * sale of some other item may hold it), so only the write's look at the
 * stock stands between A and the reset. The window first: A inside when
 * the reset was sent, and A's answer after the reset's. The outcome for
 * each strategy whose write Redis checks: nothing written (409), and the
 * audit exactly the reset's. */
static void reset_in_flight(const char *strategy, const char *item, cJSON **audit, int *status,
                            char *word, size_t wordlen) {
    reset_item(item, 100);
    char path[160], body[96];
    snprintf(path, sizeof(path), "/inventory/sale/%s?hold_ms=800&item=%s", strategy, item);
    struct harness_bg a;
    harness_bg_start(&a, a_port, path, 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN %s:holders", item),
                  "%s: A never came inside", strategy);
    snprintf(body, sizeof(body), "{\"stock\":500,\"item\":\"%s\"}", item);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(b_port, "POST", "/inventory/reset", NULL, body, &r), 200);
    int64_t reset_at = mclock_ms();
    harness_bg_join(&a);
    ck_assert_msg(a.status != 0 && a.sent_ms + a.took_ms >= reset_at - 5,
                  "fault missed its window: %s's sale of %s answered before the reset (%d %s)",
                  strategy, item, a.status, a.body);
    *status = a.status;
    snprintf(word, wordlen, "%s", a.status ? harness_json_str(a.body, "status") : "");
    *audit = audit_of(item);
}

/* Where the reset could not free the lock (another item under the global
 * scope), the write itself refused it: the answer says stock_changed, and
 * so do the history's event and the strategy's counter. */
static void stock_changed_recorded(const char *strategy, const char *item, const char *word) {
    ck_assert_msg(strcmp(word, "stock_changed") == 0,
                  "%s on %s: the lock was never freed, but A answered %s", strategy, item, word);
    cJSON *h = history(item);
    const cJSON *e, *events = cJSON_GetObjectItemCaseSensitive(h, "events");
    int seen = 0;
    cJSON_ArrayForEach(e, events) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "outcome");
        seen += cJSON_IsString(o) && strcmp(o->valuestring, "stock_changed") == 0;
    }
    cJSON_Delete(h);
    ck_assert_msg(seen == 1, "%s on %s: %d history events say stock_changed", strategy, item, seen);
    char series[96];
    snprintf(series, sizeof(series), "inventoryd_stock_changed_total{strategy=\"%s\"}", strategy);
    ck_assert_msg(harness_metric(a_port, series) >= 1, "%s: not counted", series);
}

START_TEST(test_a_reset_during_a_sale_is_never_overwritten_by_a_lock_whose_write_redis_checks) {
    start_pair(10000, 5000, NULL);
    static const char *const strategies[] = {"fenced", "watchdog", "redisson", "handoff",
                                             "batched"};
    static const char *const items[] = {STOCK_KEY, "inventory002"};
    char bad[1024] = "";
    for (size_t i = 0; i < sizeof(strategies) / sizeof(strategies[0]); i++) {
        for (size_t j = 0; j < 2; j++) {
            cJSON *au;
            int status;
            char word[32];
            reset_in_flight(strategies[i], items[j], &au, &status, word, sizeof(word));
            if (status != 409 || field(au, "stock") != 500 || field(au, "sold") != 0 ||
                field(au, "stock_lost") != 0)
                snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad),
                         " %s on %s (answered %d %s; stock %.0f, sold %.0f, lost %.0f);",
                         strategies[i], items[j], status, word, field(au, "stock"),
                         field(au, "sold"), field(au, "stock_lost"));
            else if (j == 1)
                stock_changed_recorded(strategies[i], items[j], word);
            cJSON_Delete(au);
        }
    }
    ck_assert_msg(bad[0] == '\0', "a reset during a sale was overwritten by:%s", bad);
}
END_TEST

/* A stock key deleted under a handoff hold is bad data, as for the other
 * checked writes, never a write that makes it anew: 409 bad_stock, the key
 * still missing, and the lock handed on (free: nobody waits). */
START_TEST(test_a_stock_deleted_during_a_handoff_hold_is_bad_stock_and_the_lock_goes_on) {
    start_pair(10000, 5000, NULL);
    reset_item(STOCK_KEY, 100);
    struct harness_bg a;
    harness_bg_start(&a, a_port, "/inventory/sale/handoff?hold_ms=800", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN " STOCK_KEY ":holders"),
                  "A never came inside");
    ck_assert_int_eq(harness_redis_int(redis_port, "DEL " STOCK_KEY), 1);
    harness_bg_join(&a);
    ck_assert_msg(a.status == 409 && strcmp(harness_json_str(a.body, "status"), "bad_stock") == 0,
                  "a handoff commit on a deleted stock answered %d %s", a.status, a.body);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " STOCK_KEY), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 0);
}
END_TEST

/* The steps whose write Redis does not check keep their flaw, and the audit
 * says so: owner-lua's stale write lands over the reset, and the audit
 * counts the 400 units gone as stock_lost, with a warning: never clean. */
START_TEST(test_a_reset_overwritten_by_an_unchecked_write_is_reported_as_stock_lost) {
    start_pair(10000, 5000, NULL);
    cJSON *au;
    int status;
    char word[32];
    reset_in_flight("owner-lua", "inventory002", &au, &status, word, sizeof(word));
    ck_assert_msg(status == 200 && strcmp(word, "sold") == 0,
                  "owner-lua's write did not land over the reset: %d %s", status, word);
    ck_assert_msg(field(au, "stock") == 99 && field(au, "initial") == 500 &&
                      field(au, "sold") == 1 && field(au, "stock_lost") == 400,
                  "the audit of an overwritten reset: stock %.0f, initial %.0f, sold %.0f, "
                  "stock_lost %.0f",
                  field(au, "stock"), field(au, "initial"), field(au, "sold"),
                  field(au, "stock_lost"));
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(au, "warnings");
    const cJSON *first = cJSON_GetArrayItem(w, 0);
    ck_assert_msg(cJSON_IsString(first) && strstr(first->valuestring, "400 units left the stock"),
                  "no warning of the lost units");
    cJSON_Delete(au);
}
END_TEST

/* ---- Core: the lock core on its own ---------------------------------------- */

static struct rpool *pool;
static struct lock_core *core;

/* A core over the Redis of the case and its three masters. */
static void core_start(int ttl_ms, int wait_ms, int node_timeout_ms) {
    struct rpool_options po = {
        .host = "127.0.0.1", .port = redis_port, .timeout_ms = 2000, .size = 8, .load_scripts = 1};
    pool = rpool_create(&po);
    ck_assert_ptr_nonnull(pool);
    char spec[96], err[256];
    snprintf(spec, sizeof(spec), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", master_port[0],
             master_port[1], master_port[2]);
    struct lock_core_options lo = {
        .pool = pool,
        .pool_wait_ms = 2000,
        .redlock_nodes = spec,
        .redlock_node_timeout_ms = node_timeout_ms,
        .redlock_pool_size = 4,
        .ttl_ms = ttl_ms,
        .wait_ms = wait_ms,
        .spin_sleep_ms = 10,
        .retry_depth = 1000,
    };
    core = lock_core_init(&lo, err, sizeof(err));
    ck_assert_msg(core != NULL, "lock_core_init: %s", err);
}

static void core_stop(void) {
    lock_core_shutdown(core);
    rpool_free(pool);
    core = NULL;
    pool = NULL;
}

struct acquirer {
    const struct lock_type *type;
    int rc;
    int64_t took_ms;
    pthread_t thread;
};

static void *acquirer_main(void *arg) {
    struct acquirer *q = arg;
    struct lock *l = lock_new(core, q->type, LOCK_KEY);
    int64_t t0 = mclock_ms();
    q->rc = lock_acquire(l);
    q->took_ms = mclock_ms() - t0;
    lock_free(l);
    return NULL;
}

/* README: lock families do not exclude each other. The in-process gate
 * was keyed by the key alone, so a Redlock hold queued a redisson sale of
 * the same lock name in the same process for the whole hold. */
START_TEST(test_a_hold_of_one_lock_family_never_queues_another_familys_acquire_in_the_gate) {
    core_start(1000, 3000, 200);
    struct lock *r = lock_new(core, &lock_type_redlock, LOCK_KEY);
    ck_assert_int_eq(lock_acquire(r), LOCK_OK);
    struct acquirer q = {.type = &lock_type_redisson};
    pthread_create(&q.thread, NULL, acquirer_main, &q);
    pthread_join(q.thread, NULL);
    ck_assert_int_eq(lock_holds(r), 1); /* the Redlock hold was there all along */
    ck_assert_int_eq(q.rc, LOCK_OK);
    ck_assert_msg(q.took_ms < 1000, "the redisson acquire waited %lld ms behind a Redlock hold",
                  (long long)q.took_ms);
    /* One family still queues in the gate: a second Redlock acquire waits. */
    struct acquirer q2 = {.type = &lock_type_redlock};
    pthread_create(&q2.thread, NULL, acquirer_main, &q2);
    pthread_join(q2.thread, NULL);
    ck_assert_int_eq(q2.rc, LOCK_BUSY);
    lock_free(r);
    core_stop();
}
END_TEST

/* Suspected: a nested Redlock acquire that failed gave its count back on a
 * master whose answer was lost, where the count may never have grown: it
 * took the outer hold's only count there. Master 3 is down; the outer hold
 * has masters 1 and 2. Master 2 pauses writes for 600 ms, so the nested
 * hash-lock sent there times out at 400 ms (and is dropped with its
 * connection), the round fails (1 of 3), and any give-back sent to master
 * 2 runs there at 600 ms. The outer hold must still be on master 2. */
START_TEST(
    test_a_failed_nested_redlock_acquire_never_takes_the_outer_holds_count_where_its_answer_was_lost) {
    for (int i = 0; i < 2; i++) ck_assert_int_eq(harness_redis_wait_uptime(master_port[i], 3), 0);
    core_start(3000, 0, 400);
    harness_stop(master_pid[2]);
    master_pid[2] = 0;
    struct lock *l = lock_new(core, &lock_type_redlock, LOCK_KEY);
    ck_assert_int_eq(lock_acquire(l), LOCK_OK);
    struct lock_report rep;
    lock_report(l, &rep);
    ck_assert_int_eq(harness_redis_int(master_port[1], "HGET %s %s", LOCK_KEY, rep.owner), 1);
    redis_ok(master_port[1], "CLIENT PAUSE 600 WRITE");
    int64_t t0 = mclock_ms();
    int rc = lock_acquire(l);
    int64_t took = mclock_ms() - t0;
    lock_report(l, &rep);
    /* The window: master 2's answer was lost (the round waited out its
     * timeout), and the round failed. */
    ck_assert_msg(rc != LOCK_OK, "the nested acquire succeeded: no window");
    ck_assert_msg(took >= 380, "the nested round took %lld ms: master 2 answered", (long long)took);
    ck_assert_int_eq(rep.votes[1].outcome, LOCK_VOTE_ERROR);
    mclock_sleep_ms((int)(t0 + 900 - mclock_ms()));
    ck_assert_int_eq(lock_holds(l), 1);
    long long count = harness_redis_int(master_port[1], "HGET %s %s", LOCK_KEY, rep.owner);
    ck_assert_msg(count >= 1, "the outer hold's count on master 2 is gone (%lld)", count);
    ck_assert_int_eq(lock_check(l), LOCK_OK);
    ck_assert_int_eq(lock_release(l), LOCK_OK);
    ck_assert_int_eq(harness_redis_int(master_port[1], "EXISTS %s", LOCK_KEY), 0);
    ck_assert_int_eq(harness_redis_int(master_port[0], "EXISTS %s", LOCK_KEY), 0);
    lock_free(l);
    core_stop();
}
END_TEST

/* The commit point's own check (lock.c, lock_check: a checked type may not
 * commit past its lease deadline) is the only thing between a holder whose
 * renewal waits its turn and a late write when the type's write cannot be
 * guarded in Redis (Redlock's write goes to the data Redis, its lock lives
 * on the masters). Two Redlock holds share the Redlock lane, which renews
 * one lock at a time. Master 1 stops answering (CLIENT PAUSE ALL), so the
 * lane's next renewal waits out the node timeout (1.5 s) with the other
 * hold queued behind it, unrenewed, its lease (900 ms) running out. The
 * window first: a hold whose lease passed while the watchdog had not yet
 * looked at it (its renewals unchanged). Then the outcome: its commit
 * check says lost (LOCK_LOST), and its copies on the masters are gone. */
START_TEST(
    test_a_hold_whose_renewal_waits_behind_a_stalled_one_is_refused_its_commit_once_its_lease_passes) {
    for (int i = 0; i < 3; i++) ck_assert_int_eq(harness_redis_wait_uptime(master_port[i], 3), 0);
    core_start(900, 0, 1500);
    struct lock *x = lock_new(core, &lock_type_redlock, "commit-x");
    struct lock *y = lock_new(core, &lock_type_redlock, "commit-y");
    ck_assert_int_eq(lock_acquire(x), LOCK_OK);
    ck_assert_int_eq(lock_acquire(y), LOCK_OK);
    for (int i = 1; i < 3; i++)
        ck_assert_int_eq(harness_redis_int(master_port[i], "EXISTS commit-y"), 1);
    /* The lane renews the most due hold first. Right after y's renewal, x
     * (renewed before it) is the next due: pausing master 1 then stalls
     * x's renewal, and y waits behind it. */
    struct lock_report ry;
    lock_report(y, &ry);
    int before = ry.renewals;
    for (int64_t end = mclock_ms() + 3000; mclock_ms() < end; mclock_sleep_ms(1)) {
        lock_report(y, &ry);
        if (ry.renewals > before && ry.renewals >= 2) break;
        before = ry.renewals;
    }
    ck_assert_msg(ry.renewals >= 2, "y was not renewed while every master answered");
    redis_ok(master_port[0], "CLIENT PAUSE 4000 ALL");
    /* From here no renewal of y can complete before x's has waited out
     * master 1 (a renewal needs it answered or timed out). */
    lock_report(y, &ry);
    int base = ry.renewals;
    int64_t end = mclock_ms() + 3000;
    while (!lock_lease_passed(y) && mclock_ms() < end) mclock_sleep_ms(2);
    lock_report(y, &ry);
    ck_assert_msg(lock_lease_passed(y) && ry.renewals == base,
                  "fault missed its window: y's lease %s, its renewals %d (%d at the stall)",
                  lock_lease_passed(y) ? "passed" : "never passed", ry.renewals, base);
    int rc = lock_commit_check(y);
    lock_report(y, &ry);
    ck_assert_msg(rc == LOCK_LOST,
                  "a hold whose lease had passed unrenewed (renewals %d, as "
                  "at the stall) was allowed to commit (rc %d)",
                  ry.renewals, rc);
    /* Its lease was real: its copies on masters 2 and 3 run out with it. */
    for (int i = 1; i < 3; i++) {
        long long there = 1;
        for (int64_t e = mclock_ms() + 1000; there && mclock_ms() < e; mclock_sleep_ms(10))
            there = harness_redis_int(master_port[i], "EXISTS commit-y");
        ck_assert_msg(there == 0, "y's lock outlived its lease on master %d", i + 1);
    }
    redis_ok(master_port[0], "CLIENT UNPAUSE");
    lock_free(x);
    lock_free(y);
    core_stop();
}
END_TEST

/* A lease is dated from when its acquire was sent, never from its reply:
 * a reply can come late (a slow network, a paused client), and a lease
 * counted from the reply would outlive the key. Here the data Redis holds
 * writes for 800 ms (CLIENT PAUSE WRITE), so the acquire's reply comes
 * late. The window: the acquire took at least 650 ms. The rule: the lease
 * ends one TTL (less the margin) after the send, not after the reply; a
 * thread preempted between the test's clock reading and the send moves
 * the send, so the bound allows half the wait. */
START_TEST(test_a_lease_is_dated_from_the_acquire_sent_not_from_its_late_reply) {
    core_start(1000, 3000, 200);
    struct lock *l = lock_new(core, &lock_type_owner_lua, "commit-lease");
    struct lock *warm = lock_new(core, &lock_type_owner_lua, "commit-warm");
    ck_assert_int_eq(lock_acquire(warm), LOCK_OK); /* a connection, its scripts loaded */
    lock_free(warm);
    redis_ok(redis_port, "CLIENT PAUSE 800 WRITE");
    int64_t wall0 = mclock_wall_us(), t0 = mclock_ms();
    ck_assert_int_eq(lock_acquire(l), LOCK_OK);
    int64_t took = mclock_ms() - t0;
    struct lock_report r;
    lock_report(l, &r);
    ck_assert_msg(took >= 650, "fault missed its window: the acquire took %lld ms",
                  (long long)took);
    /* The margin (lock_margin_us) is TTL/100 + 2 ms: 12 ms. */
    int64_t lease_ms = (r.lease_wall_us - wall0) / 1000, want = 1000 - 12;
    ck_assert_msg(lease_ms >= want - 50 && lease_ms <= want + took / 2,
                  "the lease ends %lld ms after the acquire was sent (reply after %lld ms); "
                  "%lld wanted",
                  (long long)lease_ms, (long long)took, (long long)want);
    lock_free(l);
    core_stop();
}
END_TEST

/* A renewed lease is dated from when the renewal was sent, as an acquired
 * one is (the test above): a renewal whose reply comes late must not
 * stretch the lease past the key's. TTL 3 s, renewed every second. Right
 * after a renewal Redis holds writes for 1.7 s (CLIENT PAUSE WRITE, below
 * the 2 s socket timeout), so the next renewal, sent about a second in, is
 * answered only when the pause ends. The window: the renewal count grew no
 * sooner than 1.5 s after the pause began. The rule: the lease ends a TTL,
 * less the 32 ms margin, after that send (at most 1 s + 2968 ms after the
 * pause began, with 250 ms for a slow scheduler), where one dated from the
 * reply would end at least 1.5 s + 2968 ms after it. */
START_TEST(test_a_renewed_lease_is_dated_from_the_renewal_sent_not_from_its_late_reply) {
    core_start(3000, 3000, 200);
    struct lock *l = lock_new(core, &lock_type_watchdog, "commit-renew");
    ck_assert_int_eq(lock_acquire(l), LOCK_OK);
    struct lock_report r;
    lock_report(l, &r);
    int before = r.renewals;
    for (int64_t end = mclock_ms() + 3000; r.renewals == before && mclock_ms() < end;) {
        mclock_sleep_ms(1);
        lock_report(l, &r);
    }
    ck_assert_msg(r.renewals > before, "the hold was never renewed");
    int base = r.renewals;
    redis_ok(redis_port, "CLIENT PAUSE 1700 WRITE");
    int64_t paused_wall = mclock_wall_us(), paused = mclock_ms();
    while (r.renewals == base && mclock_ms() < paused + 4000) {
        mclock_sleep_ms(1);
        lock_report(l, &r);
    }
    int64_t grew = mclock_ms() - paused;
    ck_assert_msg(r.renewals > base && grew >= 1500,
                  "fault missed its window: the renewal after the pause was answered %lld ms in "
                  "(renewals %d, %d before)",
                  (long long)grew, r.renewals, base);
    int64_t lease_ms = (r.lease_wall_us - paused_wall) / 1000;
    ck_assert_msg(lease_ms <= 1000 + 2968 + 250,
                  "the renewed lease ends %lld ms after the pause began: dated from the reply "
                  "(%lld ms in), not from the send (about 1000 ms in)",
                  (long long)lease_ms, (long long)grew);
    ck_assert_int_eq(lock_holds(l), 1);
    lock_free(l);
    core_stop();
}
END_TEST

Suite *commit_suite(void) {
    Suite *s = suite_create("commit");
    struct {
        const char *name;
        void (*setup)(void);
        int timeout;
        const TTest *tests[5];
    } cases[] = {
        {"Stall",
         setup_masters,
         60,
         {test_a_redlock_renewal_stalled_on_a_paused_master_neither_delays_nor_endangers_a_redisson_holder}},
        {"Guard",
         setup_masters,
         90,
         {test_a_redisson_holder_stalled_after_its_last_check_writes_nothing_once_its_lock_is_gone,
          test_an_expiring_holder_stalled_after_its_last_check_writes_late_and_the_checker_says_so,
          test_redlock_a_pause_after_the_last_check_lets_a_stale_write_land_and_the_checker_dates_it}},
        {"History", setup, 60, {test_a_history_trimmed_by_its_cap_is_judged_incomplete_never_safe}},
        {"Keys", setup, 60, {test_no_item_name_reaches_another_key_and_the_fence_never_rewinds}},
        {"Fence",
         setup,
         60,
         {test_a_stale_fenced_write_is_refused_when_handoff_took_the_expired_key,
          test_a_stale_fenced_write_is_refused_when_owner_lua_or_watchdog_took_the_expired_key}},
        {"Reset",
         setup,
         90,
         {test_a_reset_during_a_sale_is_never_overwritten_by_a_lock_whose_write_redis_checks,
          test_a_reset_overwritten_by_an_unchecked_write_is_reported_as_stock_lost,
          test_a_stock_deleted_during_a_handoff_hold_is_bad_stock_and_the_lock_goes_on}},
        {"Core",
         setup_masters,
         60,
         {test_a_hold_of_one_lock_family_never_queues_another_familys_acquire_in_the_gate,
          test_a_failed_nested_redlock_acquire_never_takes_the_outer_holds_count_where_its_answer_was_lost,
          test_a_hold_whose_renewal_waits_behind_a_stalled_one_is_refused_its_commit_once_its_lease_passes,
          test_a_lease_is_dated_from_the_acquire_sent_not_from_its_late_reply,
          test_a_renewed_lease_is_dated_from_the_renewal_sent_not_from_its_late_reply}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, cases[i].setup, teardown);
        tcase_set_timeout(tc, cases[i].timeout);
        for (int j = 0; j < 5 && cases[i].tests[j]; j++) tcase_add_test(tc, cases[i].tests[j]);
        suite_add_tcase(s, tc);
    }
    return s;
}
