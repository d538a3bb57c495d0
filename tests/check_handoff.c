/* check_handoff.c -- the handoff lock (issue 23): redisson's flaw, the herd
 * its unlock wakes, shown, and handoff's fix; its order, its hot path, and
 * its guarantees under a paused holder, a stalled commit, a killed waiter
 * and other locks on the same key.
 *
 *   Herd      redisson's unlock wakes a waiter in each instance and they race;
 *             handoff grants the first waiter inside the holder's write
 *   Order     waiters of two instances are granted in the order they queued
 *   HotPath   the next holder reads nothing (no GET); under load a sale costs
 *             one script, its riders queued by the holder's commit
 *   Faults    a paused holder, a commit stalled past its lease, a waiter
 *             killed after its grant
 *   Interop   handoff, owner-lua and fenced on one lock key and one stock
 *   Lab       the lab's herd scenario, with redisson and with handoff
 *
 * Real redis-server, real inventoryd instances (faults on), HTTP and hiredis;
 * each fault test first proves that its fault hit its window. */
#include "check_main.h"
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "harness.h"
#include "mclock.h"

#define LOCK_KEY "RedisDistributedLock"
#define QUEUE_KEY "RedisDistributedLock:queue"

static pid_t redis_pid, a_pid, b_pid;
static int redis_port, a_port, b_port;

static void setup(void) {
    redis_pid = harness_redis_start(0, &redis_port);
    ck_assert_int_gt(redis_pid, 0);
    a_pid = b_pid = 0;
}

static void teardown(void) {
    if (a_pid) kill(a_pid, SIGCONT);
    if (b_pid) kill(b_pid, SIGCONT);
    harness_stop(a_pid);
    harness_stop(b_pid);
    harness_stop(redis_pid);
}

static void start_pair(int ttl_ms, int wait_ms, const char *extra) {
    const char *sets[] = {extra, NULL};
    ck_assert_int_eq(
        harness_pair_start(redis_port, ttl_ms, wait_ms, sets, &a_pid, &a_port, &b_pid, &b_port), 0);
}

static double audit(const char *field) {
    double v = harness_audit(a_port, field);
    ck_assert_msg(v > -1e9, "GET /inventory/audit failed");
    return v;
}

static void sold(const struct harness_bg *b, const char *who) {
    ck_assert_msg(b->status == 200 && strcmp(harness_json_str(b->body, "status"), "sold") == 0,
                  "%s: %d %s", who, b->status, b->body);
}

static const char *granted_by(const char *body) {
    static char word[16];
    cJSON *j = cJSON_Parse(body);
    const cJSON *g = j ? cJSON_GetObjectItemCaseSensitive(
                             cJSON_GetObjectItemCaseSensitive(j, "lock"), "granted_by")
                       : NULL;
    snprintf(word, sizeof(word), "%s", cJSON_IsString(g) ? g->valuestring : "");
    cJSON_Delete(j);
    return word;
}

/* Lines of log that are client commands (not run by a script) holding has. */
static int client_lines(const char *log, const char *has) {
    const char *lua[] = {" lua]", NULL};
    return harness_lines(log, has, lua);
}

/* The client commands of log, each cut to its first 140 bytes, into buf:
 * what a failed count shows. */
static const char *client_commands(const char *log, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = '\0';
    for (const char *line = log; line && *line && off + 1 < len;) {
        const char *end = strchr(line, '\n');
        int n = end ? (int)(end - line) : (int)strlen(line);
        if (!memmem(line, (size_t)n, " lua]", 5))
            off += (size_t)snprintf(buf + off, len - off, "%.*s\n", n < 140 ? n : 140, line);
        line = end ? end + 1 : NULL;
    }
    return buf;
}

/* `"EVALSHA" "<sha of src/lua/name.lua>"`, for counting in a MONITOR log. */
static const char *evalsha_of(const char *name, char *buf, size_t len) {
    const char *sha = harness_script_sha(redis_port, name);
    ck_assert_msg(sha[0], "no SHA for %s", name);
    snprintf(buf, len, "\"EVALSHA\" \"%s\"", sha);
    return buf;
}

/* Polls until the queue holds n entries (at most 3 s); returns how many it
 * held last. */
static long long queued(long long n) {
    long long len = -1;
    for (int i = 0; i < 300 && (len = harness_redis_int(redis_port, "LLEN " QUEUE_KEY)) != n; i++)
        mclock_sleep_ms(10);
    return len;
}

/* Polls until the lock key exists (at most 5 s): its holder took it. */
static int held(void) { return harness_redis_until(redis_port, 1, 5000, "EXISTS " LOCK_KEY); }

/* H takes the lock on A with hold_ms, then n waiters each queue behind it
 * in turn, each sent once the one before is queued in Redis: on B only
 * (both 0), or alternating B and A. */
static void queue_behind(struct harness_bg *h, int hold_ms, struct harness_bg *w, int n, int both) {
    char path[64];
    snprintf(path, sizeof(path), "/inventory/sale/handoff?hold_ms=%d", hold_ms);
    harness_bg_start(h, a_port, path, 0);
    ck_assert_msg(held(), "H never took the lock");
    for (int i = 0; i < n; i++) {
        harness_bg_start(&w[i], both && i % 2 ? a_port : b_port, "/inventory/sale/handoff", 0);
        ck_assert_msg(queued(i + 1) == i + 1, "waiter %d never queued", i);
    }
}

/* ---- Herd: redisson's flaw, and the fix --------------------------------- */

#define OTHER_OWNER "b983c153-7421-469a-addb-44fb92259a1b:1"
#define REDISSON_CHANNEL "redisson_lock__channel:{" LOCK_KEY "}"

/* Polls (at most 5 s) until n waiters wait behind the holder: for handoff,
 * n entries in its queue; for redisson, n instances subscribed to the
 * unlock channel and n waiters' second tries run since tries0 (a waiter
 * tries, subscribes and tries again: lock_hash.c). 1 when they do. */
static int waiting(int redisson, int n, long long tries0) {
    if (!redisson) return queued(n) == n;
    for (int64_t end = mclock_ms() + 5000; mclock_ms() < end; mclock_sleep_ms(5))
        if (harness_subscribers(redis_port, REDISSON_CHANNEL) >= n &&
            harness_redis_calls(redis_port, "evalsha") >= tries0 + 2 * n)
            return 1;
    return 0;
}

/* W1 (on A) and W2 (on B) queue behind a holder H, W2 once W1 waits, each
 * to hold 200 ms; the commands Redis runs from when both wait until both
 * sold are recorded. H is a Redisson client (h NULL: its unlock) or a sale
 * on B holding 500 ms, seen holding before W1 is sent: long enough for
 * both to queue, short enough that neither waits the 1 s after which a
 * handoff waiter re-checks (RECHECK_MS). Returns the log. */
static char *two_waiters(const char *strategy, struct harness_bg *h, struct harness_bg *w1,
                         struct harness_bg *w2) {
    start_pair(30000, 8000, NULL);
    char ph[96], pw[96];
    snprintf(ph, sizeof(ph), "/inventory/sale/%s?hold_ms=500", strategy);
    /* The waiters hold 200 ms: long enough that the loser of a race tries
     * while the winner is still inside. */
    snprintf(pw, sizeof(pw), "/inventory/sale/%s?hold_ms=200", strategy);
    int client = h == NULL;
    if (client) {
        ck_assert_int_eq(harness_redisson_lock(redis_port, LOCK_KEY, OTHER_OWNER, 30000), 1);
    } else {
        harness_bg_start(h, b_port, ph, 0);
        ck_assert_msg(held(), "H never took the lock");
    }
    long long tries0 = harness_redis_calls(redis_port, "evalsha");
    harness_bg_start(w1, a_port, pw, 0);
    ck_assert_msg(waiting(client, 1, tries0), "W1 never waited behind H");
    harness_bg_start(w2, b_port, pw, 0);
    ck_assert_msg(waiting(client, 2, tries0), "W2 never waited behind H");
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    if (client)
        ck_assert_int_eq(harness_redisson_unlock(redis_port, LOCK_KEY, OTHER_OWNER), 1);
    else
        harness_bg_join(h);
    harness_bg_join(w1);
    harness_bg_join(w2);
    char *log = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(log);
    if (!client) sold(h, "H");
    sold(w1, "W1");
    sold(w2, "W2");
    ck_assert_int_eq(audit("sold_twice"), 0);
    return log;
}

START_TEST(test_redisson_unlock_wakes_a_waiter_in_each_instance_and_they_race_for_the_lock) {
    struct harness_bg w1, w2;
    char cmd[96];
    evalsha_of("hash-lock", cmd, sizeof(cmd));
    char *log = two_waiters("redisson", NULL, &w1, &w2);
    /* The unlock reached the waiter of each instance: both tried, one lost
     * and tried again after the winner's unlock. Two waiters, three
     * acquires: the herd's extra round trip, and the second comer may win. */
    int tries = client_lines(log, cmd);
    ck_assert_msg(tries >= 3, "%d acquires after both waited; the herd makes 3:\n%.2000s", tries,
                  log);
    ck_assert_int_ge(
        harness_json_num(w1.body, "lock.attempts") + harness_json_num(w2.body, "lock.attempts"), 5);
    free(log);
}
END_TEST

START_TEST(test_handoff_grants_the_first_waiter_in_the_holders_write_no_acquire_no_race) {
    struct harness_bg h, w1, w2;
    char acquire[96], commit[96];
    evalsha_of("handoff-lock", acquire, sizeof(acquire));
    evalsha_of("handoff-sale", commit, sizeof(commit));
    char *log = two_waiters("handoff", &h, &w1, &w2);
    /* No acquire after both queued: each grant was made by the write
     * before it, three writes for three sales. */
    ck_assert_msg(client_lines(log, acquire) == 0, "acquires after both queued:\n%.2000s", log);
    ck_assert_int_eq(client_lines(log, commit), 3);
    /* In the order they came, across the two instances. */
    ck_assert_int_eq(harness_json_num(h.body, "unit"), 200);
    ck_assert_int_eq(harness_json_num(w1.body, "unit"), 199);
    ck_assert_int_eq(harness_json_num(w2.body, "unit"), 198);
    ck_assert_str_eq(granted_by(w1.body), "handed");
    ck_assert_str_eq(granted_by(w2.body), "handed");
    ck_assert_int_eq(harness_json_num(w1.body, "lock.attempts"), 1);
    ck_assert_int_eq(harness_json_num(w2.body, "lock.attempts"), 1);
    free(log);
}
END_TEST

/* ---- Order ---------------------------------------------------------------- */

/* H holds 1.5 s on A; six sales come one after another, alternating B and
 * A, each sent once the one before is queued in Redis (a rider of A queues
 * itself once it has waited RIDE_MAX for A's holder), so that the order
 * they queued in is the order they were sent in, whatever a loaded machine
 * does to their threads: they are granted in that order, each handed the
 * lock by the one before. */
START_TEST(test_waiters_of_two_instances_are_granted_in_the_order_they_queued) {
    start_pair(30000, 8000, NULL);
    enum { N = 6 };
    struct harness_bg h, w[N];
    queue_behind(&h, 1500, w, N, 1);
    /* All of them queued in Redis while H still held. */
    ck_assert_msg(harness_redis_int(redis_port, "EXISTS inventory001:sold") == 0,
                  "H sold too early");
    harness_bg_join(&h);
    sold(&h, "H");
    for (int i = 0; i < N; i++) {
        harness_bg_join(&w[i]);
        sold(&w[i], "waiter");
        ck_assert_msg(harness_json_num(w[i].body, "unit") == 199 - i,
                      "waiter %d (sent %d-th, on %s) sold unit %.0f, not %d: not in queue order", i,
                      i + 1, i % 2 == 0 ? "B" : "A", harness_json_num(w[i].body, "unit"), 199 - i);
        ck_assert_str_eq(granted_by(w[i].body), "handed");
    }
    ck_assert_int_eq(audit("sold"), N + 1);
    ck_assert_int_eq(audit("violations"), 0);
}
END_TEST

/* ---- HotPath -------------------------------------------------------------- */

/* A queue of four behind H as above (H holds 500 ms), watched: no client
 * reads the stock, each sale sends exactly one script, its write, and each
 * waiter's lock came in the grant message ("handed"). A queued waiter that
 * has had no grant for RECHECK_MS (1 s: H's hold, stretched by a loaded
 * machine) may
 * also send a "check" of the lock: that is the timeout path, not the hot
 * one, so it is counted apart, and must not be what granted anyone. */
START_TEST(test_the_next_holder_reads_nothing_the_grant_carries_the_stock) {
    start_pair(30000, 8000, "inventory.probe=false");
    char acquire[96], commit[96];
    evalsha_of("handoff-lock", acquire, sizeof(acquire));
    evalsha_of("handoff-sale", commit, sizeof(commit));
    enum { N = 4 };
    struct harness_bg h, w[N];
    queue_behind(&h, 500, w, N, 1);
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    harness_bg_join(&h);
    for (int i = 0; i < N; i++) harness_bg_join(&w[i]);
    char *log = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(log);
    sold(&h, "H");
    for (int i = 0; i < N; i++) sold(&w[i], "waiter");
    /* Every command a client sent from then on: one write per sale, no
     * acquire, no GET (the stock comes in the grant); and no script read
     * the stock but each commit once, to check that it is still the stock
     * its hold was handed (a reset under the hold is never overwritten):
     * each grant carries the stock its write wrote, read by no one. */
    const char *lua[] = {" lua]", NULL};
    int rechecks = client_lines(log, "\"check\"");
    /* A sale that finds no idle pooled connection opens one, which loads
     * every script first (rpool.c): a connection's set-up, once, not a
     * command of the sale (hog run 2 of 2026-11-27 met one under ASan). */
    int loads = client_lines(log, "\"SCRIPT\" \"LOAD\"");
    char shown[4096];
    ck_assert_msg(harness_lines(log, NULL, lua) - rechecks - loads == N + 1,
                  "client commands (%d rechecks, %d script loads):\n%s", rechecks, loads,
                  client_commands(log, shown, sizeof(shown)));
    ck_assert_int_eq(client_lines(log, commit), N + 1);
    ck_assert_int_eq(client_lines(log, acquire) - rechecks, 0);
    for (int i = 0; i < N; i++) ck_assert_str_eq(granted_by(w[i].body), "handed");
    ck_assert_msg(harness_lines(log, "\"get\" \"inventory001\"", NULL) == N + 1,
                  "the stock was read other than once by each commit's check:\n%.2000s", log);
    free(log);
}
END_TEST

/* A keep-alive client selling path in a loop until told to stop or sold out. */
struct seller {
    int port;
    char path[128];
    int delay_ms; /* starts this late */
    long quota; /* stops after selling this many; 0: no bound */
    int64_t until_ms; /* gives up then, sold out or not */
    long sold, other;
    pthread_t thread;
};

static void *seller_main(void *arg) {
    struct seller *s = arg;
    struct httpc *h = httpc_create("127.0.0.1", s->port, 15000);
    mclock_sleep_ms(s->delay_ms);
    while (mclock_ms() < s->until_ms) {
        struct httpc_response r;
        if (httpc_request(h, "GET", s->path, NULL, NULL, &r) != 0) {
            s->other++;
            mclock_sleep_ms(5);
            continue;
        }
        const char *st = harness_json_str(r.body, "status");
        if (strcmp(st, "sold_out") == 0) break;
        if (strcmp(st, "sold") == 0)
            s->sold++;
        else if (strcmp(st, "lock_timeout") != 0)
            s->other++; /* a poller may wait out a queue */
        if (s->quota && s->sold == s->quota) break;
    }
    httpc_free(h);
    return NULL;
}

/* Runs n sellers until each is told sold_out (or max_ms passes). */
static void sellers_run(struct seller *s, int n, int64_t max_ms) {
    int64_t until = mclock_ms() + max_ms;
    for (int i = 0; i < n; i++) {
        s[i].until_ms = until;
        pthread_create(&s[i].thread, NULL, seller_main, &s[i]);
    }
    for (int i = 0; i < n; i++) pthread_join(s[i].thread, NULL);
}

/* Twenty keep-alive clients on one instance: under load, a waiter is queued
 * by its holder's commit (it rides), so nearly every sale costs its write
 * and nothing else. */
START_TEST(test_under_load_a_sale_costs_one_script_its_queueing_rides_on_the_holders_write) {
    start_pair(30000, 8000, "inventory.probe=false");
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":600}", &r),
                     200);
    char acquire[96], commit[96];
    evalsha_of("handoff-lock", acquire, sizeof(acquire));
    evalsha_of("handoff-sale", commit, sizeof(commit));
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    enum { N = 20 };
    struct seller s[N];
    memset(s, 0, sizeof(s));
    for (int i = 0; i < N; i++) {
        s[i].port = a_port;
        snprintf(s[i].path, sizeof(s[i].path), "/inventory/sale/handoff");
    }
    sellers_run(s, N, 60000);
    char *log = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(log);
    long total = 0;
    for (int i = 0; i < N; i++) {
        total += s[i].sold;
        ck_assert_msg(s[i].other == 0, "client %d had %ld answers other than sold", i, s[i].other);
    }
    ck_assert_int_eq(total, 600);
    int acquires = client_lines(log, acquire), writes = client_lines(log, commit);
    ck_assert_int_eq(writes, 600);
    ck_assert_msg(acquires * 4 < writes, "%d acquires for %d writes: the waiters did not ride",
                  acquires, writes);
    ck_assert_int_eq(harness_lines(log, "\"GET\" \"inventory001\"", NULL), 0);
    free(log);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("stock"), 0);
    ck_assert_int_ge(
        harness_metric(a_port, "inventoryd_lock_grants_total{strategy=\"handoff\",by=\"handed\"}"),
        500);
}
END_TEST

/* ---- Faults --------------------------------------------------------------- */

/* A sells holding 400 ms and is SIGSTOPped inside (once the probe has its
 * entry); its lease (600 ms) ends and its key with it; B sells; A is
 * resumed: its write is refused, 409 lock_lost. */
START_TEST(test_a_paused_holder_past_its_lease_sells_nothing_409_lock_lost) {
    start_pair(600, 3000, NULL);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/handoff?hold_ms=400", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "A never came inside");
    kill(a_pid, SIGSTOP);
    ck_assert_msg(harness_redis_until(redis_port, 0, 5000, "EXISTS " LOCK_KEY),
                  "fault missed its window: A's lock outlived its lease while A was stopped");
    harness_bg_start(&b, b_port, "/inventory/sale/handoff", 0);
    harness_bg_join(&b);
    /* The fault's window: B sold while A, inside, was stopped past its
     * lease (the lock had expired: B found it free). */
    sold(&b, "B");
    ck_assert_str_eq(granted_by(b.body), "free");
    kill(a_pid, SIGCONT);
    harness_bg_join(&a);
    ck_assert_msg(a.status == 409, "A: %d %s", a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "lock_lost");
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("stock"), 199);
}
END_TEST

/* The stall comes after A's last check of its lease (commit_delay_ms, 1.5
 * TTL): A's write goes out late and Redis refuses it; B, which queued
 * behind A, was granted the lock by its own re-check once A's lease had
 * run out, and sold. */
START_TEST(test_a_commit_stalled_past_its_lease_is_refused_in_redis_and_the_waiter_sells) {
    start_pair(600, 5000, NULL);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/handoff?commit_delay_ms=900", 0);
    ck_assert_msg(held(), "A never took the lock");
    harness_bg_start(&b, b_port, "/inventory/sale/handoff", 0);
    harness_bg_join(&b);
    harness_bg_join(&a);
    sold(&b, "B");
    /* The window: B took the lock while A was stalled after its check (A
     * answered after B), through its own check once A's lease ended. */
    ck_assert_int_gt(a.sent_ms + a.took_ms, b.sent_ms + b.took_ms);
    ck_assert_str_eq(granted_by(b.body), "checked");
    ck_assert_msg(a.status == 409, "A: %d %s", a.status, a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "lock_lost");
    ck_assert_msg(strstr(harness_json_str(a.body, "error"), "refused by Redis") != NULL,
                  "not refused by Redis itself: %s", a.body);
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "GET inventory001"), 199);
    /* The history has A's refusal, written by the script that refused it. */
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/history?limit=50", NULL, NULL, &r),
                     200);
    ck_assert_msg(strstr(r.body, "\"outcome\":\"lock_lost\"") != NULL, "no lock_lost event: %.800s",
                  r.body);
}
END_TEST

/* H holds 800 ms on A; W (on B) queues behind it, then C (on A), each sent
 * once the one before holds or is queued. W's
 * process is stopped, so H's write grants the lock to W, which cannot use
 * it; W's process is then killed. C waits out W's lease (1.5 s), and its
 * re-check grants the lock to itself. */
START_TEST(test_a_waiter_killed_after_its_grant_blocks_the_queue_only_until_its_lease_ends) {
    start_pair(1500, 8000, NULL);
    struct harness_bg h, w, c;
    harness_bg_start(&h, a_port, "/inventory/sale/handoff?hold_ms=800", 0);
    ck_assert_msg(held(), "H never took the lock");
    harness_bg_start(&w, b_port, "/inventory/sale/handoff", 0);
    ck_assert_int_eq(queued(1), 1);
    redisReply *e = harness_redis(redis_port, "LINDEX " QUEUE_KEY " 0");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->type, REDIS_REPLY_STRING);
    char owner[96];
    snprintf(owner, sizeof(owner), "%.*s", (int)strcspn(strchr(e->str, '|') + 1, "|"),
             strchr(e->str, '|') + 1);
    freeReplyObject(e);
    kill(b_pid, SIGSTOP);
    harness_bg_start(&c, a_port, "/inventory/sale/handoff", 0);
    ck_assert_int_eq(queued(2), 2);
    harness_bg_join(&h);
    sold(&h, "H");
    /* The fault: H's write granted the lock to W, whose process is stopped. */
    redisReply *holder = harness_redis(redis_port, "GET " LOCK_KEY);
    ck_assert_msg(holder && holder->type == REDIS_REPLY_STRING && strcmp(holder->str, owner) == 0,
                  "the lock is %s, not the stopped waiter's (%s)",
                  holder && holder->str ? holder->str : "gone", owner);
    freeReplyObject(holder);
    int64_t granted_ms = mclock_ms();
    kill(b_pid, SIGKILL);
    waitpid(b_pid, NULL, 0);
    b_pid = 0;
    harness_bg_join(&w);
    ck_assert_int_eq(w.status, 0); /* W never answered */
    harness_bg_join(&c);
    sold(&c, "C");
    int64_t c_done = c.sent_ms + c.took_ms;
    /* C waited out W's lease, and not much more. */
    ck_assert_msg(c_done - granted_ms >= 1300, "C sold %lld ms after W's grant, within W's lease",
                  (long long)(c_done - granted_ms));
    ck_assert_msg(c_done - granted_ms <= 1500 + 1000, "C sold %lld ms after W's grant",
                  (long long)(c_done - granted_ms));
    ck_assert_str_eq(granted_by(c.body), "checked");
    ck_assert_int_eq(harness_json_num(c.body, "unit"), 199);
    ck_assert_int_eq(audit("sold"), 2);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
}
END_TEST

/* ---- Liveness: no free lock waits out a lease (issue 34) ------------------- */

/* The owner id of the queue's entry at index i ("<deadline>|<owner>|<key>"),
 * into buf; "" when there is none. */
static const char *queued_owner(int i, char *buf, size_t len) {
    buf[0] = '\0';
    redisReply *e = harness_redis(redis_port, "LINDEX " QUEUE_KEY " %d", i);
    const char *bar = e && e->type == REDIS_REPLY_STRING ? strchr(e->str, '|') : NULL;
    if (bar) snprintf(buf, len, "%.*s", (int)strcspn(bar + 1, "|"), bar + 1);
    freeReplyObject(e);
    return buf;
}

/* A's commit reaches Redis while Redis refuses every write (maxmemory 1,
 * noeviction): the commit script does not run, so nothing of it ended the
 * hold. The sale answers 503 naming OOM (the fault hit the commit), and
 * the lock is released there and then, not left for its 10 s lease: the
 * next sale sells at once. */
START_TEST(test_a_commit_redis_refuses_without_running_it_releases_the_lock_at_once) {
    start_pair(10000, 5000, NULL);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/handoff?hold_ms=600", 0);
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN inventory001:holders"),
                  "A never came inside");
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 1);
    redisReply *c = harness_redis(redis_port, "CONFIG SET maxmemory-policy noeviction");
    ck_assert_msg(c && c->type == REDIS_REPLY_STATUS, "CONFIG SET maxmemory-policy failed");
    freeReplyObject(c);
    c = harness_redis(redis_port, "CONFIG SET maxmemory 1");
    ck_assert_msg(c && c->type == REDIS_REPLY_STATUS, "CONFIG SET maxmemory failed");
    freeReplyObject(c);
    harness_bg_join(&a);
    c = harness_redis(redis_port, "CONFIG SET maxmemory 0");
    ck_assert_msg(c && c->type == REDIS_REPLY_STATUS, "CONFIG SET maxmemory 0 failed");
    freeReplyObject(c);
    /* The fault's window: Redis refused the commit itself, for memory. */
    ck_assert_msg(a.status == 503 && strstr(harness_json_str(a.body, "error"), "OOM") != NULL,
                  "fault missed its window: A answered %d %s, not the refused commit", a.status,
                  a.body);
    long long pttl = harness_redis_int(redis_port, "PTTL " LOCK_KEY);
    ck_assert_msg(pttl == -2, "A's lock is still held after its refused commit (PTTL %lld ms)",
                  pttl);
    harness_bg_start(&b, b_port, "/inventory/sale/handoff", 0);
    harness_bg_join(&b);
    sold(&b, "B");
    ck_assert_msg(b.took_ms < 2000, "B took %lld ms", (long long)b.took_ms);
    ck_assert_int_eq(harness_json_num(b.body, "unit"), 200);
    ck_assert_int_eq(audit("sold"), 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* H holds 3 s on A; four waiters queue on B; then the queue's key is
 * deleted (as an eviction, a failover or a restart the connections
 * survive would). Each waiter, at its next re-check, finds itself neither
 * granted nor queued and queues anew: all four sell, none times out. */
START_TEST(test_waiters_whose_queue_entry_vanished_queue_anew_and_all_sell) {
    start_pair(10000, 8000, NULL);
    enum { N = 4 };
    struct harness_bg h, w[N];
    queue_behind(&h, 3000, w, N, 0);
    /* The fault: the queue, with its four entries, gone while H holds. */
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001:sold"), 0);
    ck_assert_int_eq(harness_redis_int(redis_port, "DEL " QUEUE_KEY), 1);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001:sold"), 0);
    harness_bg_join(&h);
    sold(&h, "H");
    for (int i = 0; i < N; i++) {
        harness_bg_join(&w[i]);
        sold(&w[i], "waiter");
    }
    ck_assert_int_eq(audit("sold"), N + 1);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
}
END_TEST

/* H holds 2 s on A (TTL 3 s); three waiters queue on B, and B is killed
 * with SIGKILL while they are queued; then C comes on A. H's write must
 * pass the lock over B's dead waiters: C sells well within one and a
 * half leases of H, where granting each dead waiter a lease costs three. */
START_TEST(test_waiters_of_a_killed_instance_are_passed_over_not_granted_a_lease_each) {
    start_pair(3000, 20000, NULL);
    enum { N = 3 };
    struct harness_bg h, w[N], c;
    queue_behind(&h, 2000, w, N, 0);
    kill(b_pid, SIGKILL);
    waitpid(b_pid, NULL, 0);
    b_pid = 0;
    /* The fault's window: B is dead, its three waiters still queued, and
     * H still holds. */
    ck_assert_int_eq(harness_redis_int(redis_port, "LLEN " QUEUE_KEY), N);
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS inventory001:sold"), 0);
    harness_bg_start(&c, a_port, "/inventory/sale/handoff", 0);
    ck_assert_msg(queued(N + 1) == N + 1, "C never queued behind B's waiters");
    harness_bg_join(&h);
    sold(&h, "H");
    harness_bg_join(&c);
    sold(&c, "C");
    for (int i = 0; i < N; i++) harness_bg_join(&w[i]);
    int64_t after = (c.sent_ms + c.took_ms) - (h.sent_ms + h.took_ms);
    ck_assert_msg(after < 4500, "C sold %lld ms after H: the dead waiters held the lock",
                  (long long)after);
    ck_assert_int_eq(harness_json_num(c.body, "unit"), 199);
    ck_assert_int_eq(audit("sold"), 2);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* W waits 800 ms (less than a re-check period, so its only scripts are its
 * acquire and, at its deadline, its cancel) behind a lock of another
 * owner. Before its deadline the lock is granted to W as a grant script
 * does (its entry popped, the key set to W), but no message comes: W
 * learns of it from its cancel's answer. It must use the grant (or hand
 * it on), never walk away from it: W sells, and the lock is not left to
 * it; the next sale sells at once. */
START_TEST(test_a_grant_that_comes_in_a_waiters_cancel_is_used_not_dropped) {
    start_pair(10000, 5000, NULL);
    redisReply *o = harness_redis(redis_port, "SET " LOCK_KEY " %s PX 30000", OTHER_OWNER);
    ck_assert_msg(o && o->type == REDIS_REPLY_STATUS, "SET of another owner's lock failed");
    freeReplyObject(o);
    struct harness_bg w, b;
    harness_bg_start(&w, a_port, "/inventory/sale/handoff?wait_ms=800", 0);
    ck_assert_int_eq(queued(1), 1);
    char owner[96];
    ck_assert_str_ne(queued_owner(0, owner, sizeof(owner)), "");
    redisReply *g = harness_redis(redis_port, "EVAL %s 2 " LOCK_KEY " " QUEUE_KEY " %s",
                                  "redis.call('lpop', KEYS[2]) "
                                  "return redis.call('set', KEYS[1], ARGV[1], 'PX', 10000)",
                                  owner);
    int64_t granted_ms = mclock_ms();
    ck_assert_msg(g && g->type == REDIS_REPLY_STATUS, "the grant failed");
    freeReplyObject(g);
    harness_bg_join(&w);
    /* The window: the grant was in place before W's deadline, and W's only
     * scripts were its acquire and its cancel. */
    ck_assert_msg(granted_ms < w.sent_ms + 700,
                  "fault missed its window: granted %lld ms after W was sent",
                  (long long)(granted_ms - w.sent_ms));
    /* The cancel answered the grant (2 attempts, granted by a script): it
     * is not left to an owner that walked away. */
    ck_assert_int_eq(harness_json_num(w.body, "lock.attempts"), 2);
    ck_assert_str_eq(granted_by(w.body), "checked");
    redisReply *holder = harness_redis(redis_port, "GET " LOCK_KEY);
    ck_assert_msg(holder && holder->type == REDIS_REPLY_NIL,
                  "the lock is still %s's (PTTL %lld ms) after W answered %d", owner,
                  harness_redis_int(redis_port, "PTTL " LOCK_KEY), w.status);
    freeReplyObject(holder);
    sold(&w, "W");
    harness_bg_start(&b, b_port, "/inventory/sale/handoff", 0);
    harness_bg_join(&b);
    sold(&b, "B");
    ck_assert_msg(b.took_ms < 2000, "B took %lld ms", (long long)b.took_ms);
    ck_assert_int_eq(audit("sold"), 2);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* ---- Interop -------------------------------------------------------------- */

/* Handoff, owner-lua and fenced sell one stock on one lock key from both
 * instances at once, each client 25 units: the string locks exclude each
 * other (each finds the key taken), the probe sees no overlap, and the
 * checker finds the history safe. (The pollers get the lock only when
 * handoff's queue is empty: a grant goes straight to the next in it.) */
START_TEST(test_handoff_owner_lua_and_fenced_on_one_key_sell_the_stock_exactly) {
    start_pair(10000, 8000, NULL);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL, "{\"stock\":300}", &r),
                     200);
    enum { N = 12 };
    static const char *const strategies[] = {"handoff", "owner-lua", "handoff", "fenced"};
    struct seller s[N];
    memset(s, 0, sizeof(s));
    for (int i = 0; i < N; i++) {
        s[i].port = (i / 2) % 2 ? b_port : a_port; /* each strategy from both */
        s[i].quota = 25;
        snprintf(s[i].path, sizeof(s[i].path), "/inventory/sale/%s?hold_ms=2", strategies[i % 4]);
    }
    sellers_run(s, N, 90000);
    long total = 0, by_handoff = 0, by_others = 0;
    for (int i = 0; i < N; i++) {
        total += s[i].sold;
        if (i % 2 == 0)
            by_handoff += s[i].sold;
        else
            by_others += s[i].sold;
    }
    ck_assert_int_eq(total, 300);
    ck_assert_msg(by_handoff > 0 && by_others > 0,
                  "handoff sold %ld, the others %ld: no contention", by_handoff, by_others);
    ck_assert_int_eq(audit("sold"), 300);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(audit("stock"), 0);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s --redis 127.0.0.1:%d 2>&1", INVENTORY_CHECK_BIN, redis_port);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    static char out[1 << 16];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    cJSON *chk = cJSON_Parse(out);
    ck_assert_msg(chk != NULL, "inventory-check printed no JSON: %.800s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
                      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(chk, "safe")),
                  "inventory-check: %.1500s", out);
    cJSON_Delete(chk);
}
END_TEST

/* ---- Lab: the herd scenario ---------------------------------------------- */

/* Runs the lab's herd scenario with strategy from instance A (lab on, both
 * instances its roles); returns the finished run (free it). */
static cJSON *herd_run(const char *strategy) {
    a_port = harness_free_port();
    b_port = harness_free_port();
    char rp[32], inst[96], target[64];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    snprintf(inst, sizeof(inst), "lab.instances=127.0.0.1:%d,127.0.0.1:%d", a_port, b_port);
    snprintf(target, sizeof(target), "lab.target=127.0.0.1:%d", a_port);
    const char *sets[] = {rp,
                          "lock.ttl-ms=10000",
                          "lock.wait-ms=5000",
                          "faults.enabled=true",
                          "lab.enabled=true",
                          inst,
                          target,
                          NULL};
    a_pid = harness_inventoryd_start(a_port, sets);
    b_pid = harness_inventoryd_start(b_port, sets);
    ck_assert_int_gt(a_pid, 0);
    ck_assert_int_gt(b_pid, 0);
    struct httpc_response r;
    char body[96];
    snprintf(body, sizeof(body), "{\"strategy\":\"%s\",\"scenario\":\"herd\"}", strategy);
    ck_assert_int_eq(harness_http(a_port, "POST", "/lab/runs", NULL, body, &r), 202);
    int id = (int)harness_json_num(r.body, "id");
    char path[64];
    snprintf(path, sizeof(path), "/lab/runs/%d", id);
    int64_t deadline = mclock_ms() + 30000;
    for (;;) {
        ck_assert_int_eq(harness_http(a_port, "GET", path, NULL, NULL, &r), 200);
        if (strcmp(harness_json_str(r.body, "state"), "running") != 0) break;
        ck_assert_msg(mclock_ms() < deadline, "the run did not finish");
        mclock_sleep_ms(50);
    }
    cJSON *j = cJSON_Parse(r.body);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "state")->valuestring, "done");
    return j;
}

/* A step's answer field: its lock's `key`, or the answer's own. */
static const cJSON *answer_of(const cJSON *run, int i, const char *lock_key, const char *key) {
    const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(run, "steps"), i);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(st, "answer");
    if (lock_key) a = cJSON_GetObjectItemCaseSensitive(a, lock_key);
    return cJSON_GetObjectItemCaseSensitive(a, key);
}

/* A field of the run's verdict, "" when absent. */
static const char *verdict_of(cJSON *run, const char *key) {
    const cJSON *x =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "verdict"), key);
    return cJSON_IsString(x) ? x->valuestring : "";
}

START_TEST(test_the_herd_scenario_shows_redissons_retries_and_handoffs_queue_order) {
    cJSON *run = herd_run("handoff");
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(answer_of(run, i, NULL, "status")->valuestring, "sold");
        ck_assert_int_eq(answer_of(run, i, NULL, "unit")->valueint, 200 - i); /* A, B, C, D */
        ck_assert_int_eq(answer_of(run, i, "lock", "attempts")->valueint, 1);
        if (i > 0) ck_assert_str_eq(answer_of(run, i, "lock", "granted_by")->valuestring, "handed");
    }
    ck_assert_str_eq(verdict_of(run, "result"), "fixed");
    ck_assert_msg(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                      cJSON_GetObjectItemCaseSensitive(run, "verdict"), "window_reached")),
                  "handoff's herd run did not reach its window: %s", verdict_of(run, "evidence"));
    cJSON_Delete(run);
    harness_stop(a_pid);
    harness_stop(b_pid);
    a_pid = b_pid = 0;
    run = herd_run("redisson");
    int most = 0;
    for (int i = 1; i < 4; i++) {
        ck_assert_str_eq(answer_of(run, i, NULL, "status")->valuestring, "sold");
        int n = answer_of(run, i, "lock", "attempts")->valueint;
        if (n > most) most = n;
    }
    /* A Redisson waiter tries, subscribes, tries again, and once woken
     * tries once more at least; one woken to lose a race, more. */
    ck_assert_int_ge(most, 3);
    ck_assert_msg(strcmp(verdict_of(run, "result"), "flaw_shown") == 0, "redisson's herd: %s: %s",
                  verdict_of(run, "result"), verdict_of(run, "evidence"));
    cJSON_Delete(run);
}
END_TEST

Suite *handoff_suite(void) {
    Suite *s = suite_create("handoff");
    struct {
        const char *name;
        const TTest *tests[4];
    } cases[] = {
        {"Herd",
         {test_redisson_unlock_wakes_a_waiter_in_each_instance_and_they_race_for_the_lock,
          test_handoff_grants_the_first_waiter_in_the_holders_write_no_acquire_no_race}},
        {"Order", {test_waiters_of_two_instances_are_granted_in_the_order_they_queued}},
        {"HotPath",
         {test_the_next_holder_reads_nothing_the_grant_carries_the_stock,
          test_under_load_a_sale_costs_one_script_its_queueing_rides_on_the_holders_write}},
        {"Faults",
         {test_a_paused_holder_past_its_lease_sells_nothing_409_lock_lost,
          test_a_commit_stalled_past_its_lease_is_refused_in_redis_and_the_waiter_sells,
          test_a_waiter_killed_after_its_grant_blocks_the_queue_only_until_its_lease_ends}},
        {"Liveness",
         {test_a_commit_redis_refuses_without_running_it_releases_the_lock_at_once,
          test_waiters_whose_queue_entry_vanished_queue_anew_and_all_sell,
          test_waiters_of_a_killed_instance_are_passed_over_not_granted_a_lease_each,
          test_a_grant_that_comes_in_a_waiters_cancel_is_used_not_dropped}},
        {"Interop", {test_handoff_owner_lua_and_fenced_on_one_key_sell_the_stock_exactly}},
        {"Lab", {test_the_herd_scenario_shows_redissons_retries_and_handoffs_queue_order}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        for (int j = 0; j < 4 && cases[i].tests[j]; j++) tcase_add_test(tc, cases[i].tests[j]);
        suite_add_tcase(s, tc);
    }
    return s;
}
