/* check_safety.c -- the strategies the README calls safe stay safe under
 * pressure, lost replies and pauses (issue 10). Each test pins one defect
 * seen on main, by the recipe that showed it, and asserts what the service
 * must do once fixed: no unit sold twice, no hold left behind by a lost
 * reply, an audit that counts only real overlaps, per-item state that is
 * bounded, and so on.
 *
 * Black box only: HTTP to real inventoryd processes, hiredis to real
 * redis-servers (started with --enable-debug-command yes, so that DEBUG
 * SLEEP can make replies late), signals to the processes. A lost reply is
 * made by a DEBUG SLEEP longer than the instance's redis.timeout while a
 * command of a sale is in flight. */
#include <arpa/inet.h>
#include "check_main.h"
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "harness.h"
#include "mclock.h"

#define LOCK_KEY "RedisDistributedLock"
#define STOCK_KEY "inventory001"
#define LEDGER_KEY "inventory001:sold"
#define HOLDERS_KEY "inventory001:holders"

static const char *const debug_redis[] = {"--enable-debug-command", "yes", NULL};

static pid_t redis_pid, a_pid, b_pid, master_pid[3];
static int redis_port, a_port, b_port, master_port[3];
static char nodes[128];

static void setup(void) {
    redis_pid = harness_redis_start_args(0, &redis_port, debug_redis);
    ck_assert_int_gt(redis_pid, 0);
    a_pid = b_pid = 0;
    for (int i = 0; i < 3; i++) master_pid[i] = 0;
    nodes[0] = '\0';
}

/* As setup, plus three Redlock masters (debug commands on as well). */
static void setup_masters(void) {
    setup();
    for (int i = 0; i < 3; i++) {
        master_pid[i] = harness_redis_start_args(0, &master_port[i], debug_redis);
        ck_assert_int_gt(master_pid[i], 0);
    }
    snprintf(nodes, sizeof(nodes), "redlock.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             master_port[0], master_port[1], master_port[2]);
}

static void teardown(void) {
    if (a_pid) kill(a_pid, SIGCONT);
    if (b_pid) kill(b_pid, SIGCONT);
    harness_stop(a_pid);
    harness_stop(b_pid);
    for (int i = 0; i < 3; i++) harness_stop(master_pid[i]);
    harness_stop(redis_pid);
}

/* Waits until the running Redlock masters may vote: up for the TTL (the
 * restart rule). */
static void masters_ready(int ttl_ms) {
    for (int i = 0; i < 3; i++)
        if (master_pid[i] > 0)
            ck_assert_int_eq(harness_redis_wait_uptime(master_port[i], (ttl_ms + 999) / 1000), 0);
}

/* Starts instances A and B (faults on, stock reset to 200) with this TTL and
 * wait, and the extra assignments (NULL-terminated); the Redlock masters
 * when the case started them. */
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

static double audit(const char *field) {
    double v = harness_audit(a_port, field);
    ck_assert_msg(v > -1e9, "GET /inventory/audit failed");
    return v;
}

static void reset_stock(int port, int stock) {
    struct httpc_response r;
    char body[64];
    snprintf(body, sizeof(body), "{\"stock\":%d}", stock);
    ck_assert_int_eq(harness_http(port, "POST", "/inventory/reset", NULL, body, &r), 200);
}

/* The stock and the ledger's length, straight from Redis. */
static long long stock_now(void) { return harness_redis_int(redis_port, "GET " STOCK_KEY); }

static long long ledger_len(void) { return harness_redis_int(redis_port, "LLEN " LEDGER_KEY); }

/* ---- helpers: a Redis made to sleep, keep-alive clients, raw HTTP -------- */

struct redis_sleep {
    int port;
    int ms;
    pthread_t thread;
};

static void *redis_sleep_main(void *arg) {
    struct redis_sleep *s = arg;
    redisReply *r = harness_redis(s->port, "DEBUG SLEEP %d.%03d", s->ms / 1000, s->ms % 1000);
    freeReplyObject(r);
    return NULL;
}

/* DEBUG SLEEP on the redis-server at port, from a thread of its own (the
 * command blocks until the server wakes). Join with redis_sleep_join. */
static void redis_sleep_start(struct redis_sleep *s, int port, int ms) {
    s->port = port;
    s->ms = ms;
    pthread_create(&s->thread, NULL, redis_sleep_main, s);
}

static void redis_sleep_join(struct redis_sleep *s) { pthread_join(s->thread, NULL); }

/* One request on a keep-alive client of the caller's, on its own thread:
 * sales on one keep-alive connection are served by one thread of the
 * instance, as a JMeter thread's would be. */
struct ka_bg {
    struct httpc *h;
    char path[256];
    int status;
    char body[1024];
    int64_t sent_ms, took_ms;
    pthread_t thread;
};

static void *ka_bg_main(void *arg) {
    struct ka_bg *b = arg;
    struct httpc_response r;
    b->sent_ms = mclock_ms();
    b->status = httpc_request(b->h, "GET", b->path, NULL, NULL, &r) == 0 ? r.status : 0;
    b->took_ms = mclock_ms() - b->sent_ms;
    snprintf(b->body, sizeof(b->body), "%s", b->status && r.body ? r.body : "");
    return NULL;
}

static void ka_bg_start(struct ka_bg *b, struct httpc *h, const char *path) {
    memset(b, 0, sizeof(*b));
    b->h = h;
    snprintf(b->path, sizeof(b->path), "%s", path);
    pthread_create(&b->thread, NULL, ka_bg_main, b);
}

static void ka_bg_join(struct ka_bg *b) { pthread_join(b->thread, NULL); }

/* A keep-alive client selling path in a loop until stopped. */
struct ka_loop {
    int port;
    char path[256];
    atomic_int stop;
    atomic_long sales; /* answers received */
    pthread_t thread;
};

static void *ka_loop_main(void *arg) {
    struct ka_loop *k = arg;
    struct httpc *h = httpc_create("127.0.0.1", k->port, 10000);
    while (!atomic_load(&k->stop)) {
        struct httpc_response r;
        if (httpc_request(h, "GET", k->path, NULL, NULL, &r) == 0)
            atomic_fetch_add(&k->sales, 1);
        else
            mclock_sleep_ms(5);
    }
    httpc_free(h);
    return NULL;
}

static void ka_loop_start(struct ka_loop *k, int port, const char *path) {
    memset(k, 0, sizeof(*k));
    k->port = port;
    snprintf(k->path, sizeof(k->path), "%s", path);
    pthread_create(&k->thread, NULL, ka_loop_main, k);
}

static void ka_loop_stop(struct ka_loop *k) {
    atomic_store(&k->stop, 1);
    pthread_join(k->thread, NULL);
}

/* Sends request (raw bytes, len of them) on a fresh connection to port and
 * reads until the server closes it (the request must say Connection:
 * close) or 5 s pass. Returns the status of the answer, 0 if none. */
static int raw_http(int port, const char *request, size_t len) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        write(fd, request, len) != (ssize_t)len) {
        close(fd);
        return 0;
    }
    char buf[4096];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof(buf) - 1 && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(fd);
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) status = 0;
    return status;
}

/* Replies an instance lost, as a MONITOR log of the Redis at redis_port
 * shows them: connections that are gone since (see
 * harness_redis_client_gone) and whose last command holding `has` and not
 * `but` (either may be NULL; commands sent by a client, not by a script)
 * also holds `last` (NULL: any). Redis ran that command, and the instance
 * then closed its connection, which it does when a reply times out.
 * Returns how many such connections there are; *at gets the offset in log
 * of the last such line (-1 if none). */
static int lost_replies(const char *log, const char *has, const char *but, const char *last,
                        long *at) {
    enum { MAXCONN = 512 };
    struct {
        char addr[64];
        long line; /* offset of its last matching line */
    } conns[MAXCONN];
    int nconns = 0, n = 0;
    *at = -1;
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *l = strndup(line, len), addr[64];
        const char *cmd;
        if (l && harness_monitor_parse(l, NULL, addr, sizeof(addr), &cmd) == 0 &&
            strcmp(addr, "lua") != 0 && (!has || strstr(cmd, has)) && (!but || !strstr(cmd, but))) {
            int i = 0;
            while (i < nconns && strcmp(conns[i].addr, addr) != 0) i++;
            if (i == nconns && nconns < MAXCONN)
                snprintf(conns[nconns++].addr, sizeof(conns[0].addr), "%s", addr);
            if (i < nconns) conns[i].line = (long)(line - log);
        }
        free(l);
        line = end ? end + 1 : NULL;
    }
    for (int i = 0; i < nconns; i++) {
        const char *line = log + conns[i].line;
        size_t len = strcspn(line, "\n");
        char *l = strndup(line, len);
        int fits = l && (!last || strstr(l, last));
        free(l);
        if (fits && harness_redis_client_gone(redis_port, conns[i].addr) == 1) {
            n++;
            if (conns[i].line > *at) *at = conns[i].line;
        }
    }
    return n;
}

/* Whether the script run by the MONITOR line at `line` deleted key: one of
 * the "[0 lua]" lines right after it (a script runs alone) is its DEL. */
static int script_deleted(const char *line, const char *key) {
    char want[160];
    snprintf(want, sizeof(want), "\"del\" \"%s\"", key);
    for (const char *p = strchr(line, '\n'); p; p = strchr(p + 1, '\n')) {
        char addr[64];
        const char *cmd;
        if (harness_monitor_parse(p + 1, NULL, addr, sizeof(addr), &cmd) < 0 ||
            strcmp(addr, "lua") != 0)
            return 0;
        if (strncasecmp(cmd, want, strlen(want)) == 0) return 1;
    }
    return 0;
}

/* The first owner id ("<32 hex>:<n>", the service's form) in s, copied
 * into owner; "" if none. */
static void owner_in(const char *s, char *owner, size_t len) {
    owner[0] = '\0';
    for (const char *p = s; *p; p++) {
        size_t hex = strspn(p, "0123456789abcdef");
        if (hex == 32 && p[32] == ':' && p[33] >= '0' && p[33] <= '9') {
            snprintf(owner, len, "%.*s", (int)(33 + strspn(p + 33, "0123456789")), p);
            return;
        }
        p += hex;
        if (!*p) return;
    }
}

/* VmRSS of pid in kB, or -1. */
static long rss_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

/* Redisson's own lock and unlock scripts, as a Redisson client sends them. */
static const char redisson_lock[] =
    "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], "
    "ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
static const char redisson_unlock[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "return nil;";
#define CLIENT_OWNER "b983c153-7421-469a-addb-44fb92259a1b:1"

/* ---- Pressure: the watchdog starved of connections ------------------------ */

/* Waits until the Redis command fmt answers the integer want, at most
 * limit_ms; 1 when it did. */
static int redis_wait_int(int port, long long want, int limit_ms, const char *fmt,
                          const char *arg) {
    for (int64_t end = mclock_ms() + limit_ms;; mclock_sleep_ms(10)) {
        if (harness_redis_int(port, fmt, arg) == want) return 1;
        if (mclock_ms() > end) return 0;
    }
}

/* Issue 10, defect 1, as issue 21 asks it to be shown: the watchdog renews
 * on connections of its own, so a sale pool exhausted by holders cannot
 * starve it. Instance A has two pooled connections, waited for 300 ms
 * (redis.pool-size=2, redis.timeout=300; lock.scope=item). Sale A (item
 * inventory001) and sale X (item inventory002) each hold their lock, and
 * the connection a holder keeps, for 2000 ms, with a TTL of 900 ms: A's
 * lease needs renewals to last. Sale C on instance B waits for A's lock.
 * The fault first: both holders are inside (their lock keys exist in Redis)
 * and a request on A that needs a connection meanwhile is refused with
 * "all 2 Redis connections busy". Then the outcome: A sells, renewed (a
 * lease that ran out would answer lock_lost, and C would have taken the
 * lock), X sells, C sells after A, and no unit is sold twice. */
static void starved_watchdog(const char *strategy) {
    start_pair(900, 8000, "redis.pool-size=2", "redis.timeout=300", "lock.scope=item", NULL);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "POST", "/inventory/reset", NULL,
                                  "{\"item\":\"inventory002\",\"stock\":200}", &r),
                     200);
    char pa[96], px[128], pc[96];
    snprintf(pa, sizeof(pa), "/inventory/sale/%s?hold_ms=2000", strategy);
    snprintf(px, sizeof(px), "/inventory/sale/%s?item=inventory002&hold_ms=2000", strategy);
    snprintf(pc, sizeof(pc), "/inventory/sale/%s", strategy);
    struct harness_bg a, x, c;
    harness_bg_start(&a, a_port, pa, 0);
    harness_bg_start(&x, a_port, px, 0);
    int inside = redis_wait_int(redis_port, 1, 10000, "EXISTS %s", LOCK_KEY ":inventory001") &&
                 redis_wait_int(redis_port, 1, 10000, "EXISTS %s", LOCK_KEY ":inventory002");
    harness_bg_start(&c, b_port, pc, 0);
    int probe = harness_http(a_port, "GET", "/inventory", NULL, NULL, &r);
    char probe_body[512];
    snprintf(probe_body, sizeof(probe_body), "%s", r.body ? r.body : "");
    harness_bg_join(&a);
    harness_bg_join(&x);
    harness_bg_join(&c);
    ck_assert_msg(inside,
                  "fault missed its window: the two holders of instance A were never inside "
                  "together (A %d %s, X %d %s)",
                  a.status, a.body, x.status, x.body);
    ck_assert_msg(
        probe == 503 && strstr(probe_body, "connections busy"),
        "fault missed its window: a request on A while both held was not refused for want "
        "of a connection: %d %s",
        probe, probe_body);
    ck_assert_msg(a.status == 200 && strcmp(harness_json_str(a.body, "status"), "sold") == 0,
                  "%s: the holder whose renewals needed the exhausted instance did not sell: %d %s",
                  strategy, a.status, a.body);
    ck_assert_msg(harness_json_num(a.body, "lock.renewals") >= 2,
                  "%s: A was renewed %.0f times: %s", strategy,
                  harness_json_num(a.body, "lock.renewals"), a.body);
    ck_assert_msg(x.status == 200, "%s: X answered %d %s", strategy, x.status, x.body);
    ck_assert_msg(c.status == 200 && strcmp(harness_json_str(c.body, "status"), "sold") == 0,
                  "%s: C answered %d %s", strategy, c.status, c.body);
    ck_assert_msg(harness_json_num(c.body, "unit") == harness_json_num(a.body, "unit") - 1,
                  "%s: C (unit %.0f) did not sell after A (unit %.0f)", strategy,
                  harness_json_num(c.body, "unit"), harness_json_num(a.body, "unit"));
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("oversold_units"), 0);
}

START_TEST(test_redisson_sells_no_unit_twice_when_the_pool_is_exhausted_during_a_long_hold) {
    starved_watchdog("redisson");
}
END_TEST

START_TEST(test_watchdog_sells_no_unit_twice_when_the_pool_is_exhausted_during_a_long_hold) {
    starved_watchdog("watchdog");
}
END_TEST

/* ---- LostReplies: an acquire whose reply never came ---------------------- */

/* Issue 10, defect 2. A Redisson client holds the lock for 1500 ms; a sale
 * on A (redis.timeout=300) waits for it on a keep-alive connection. Once
 * the sale's first try has run, Redis sleeps 2000 ms: a try the sale sends
 * meanwhile (redisson's at the client's PTTL, owner-lua's next poll) times
 * out 300 ms later, and runs when Redis wakes, when the client's lease has
 * run out, so it grants the lock to a sale that already answered 503.
 * After the fix the instance sends a release checked against that owner on
 * another connection. The fault is proven from what Redis ran (MONITOR):
 * an acquire by the sale's owner ran on a connection the instance closed
 * (its reply timed out), and it was granted (the checked release of that
 * owner, on another connection after it, found the lock and deleted it). */
static void lost_acquire_reply(const char *strategy) {
    start_pair(10000, 3000, "redis.timeout=300", NULL);
    int lua = strcmp(strategy, "owner-lua") == 0;
    char acquire[64], release[64];
    snprintf(acquire, sizeof(acquire), "%s",
             lua ? "\"SET\" \"" LOCK_KEY "\" \"" : harness_script_sha(redis_port, "hash-lock"));
    snprintf(release, sizeof(release), "%s",
             harness_script_sha(redis_port, lua ? "unlock-owner" : "hash-abandon"));
    if (lua) {
        ck_assert_int_eq(harness_redis_int(redis_port, "SET " LOCK_KEY " " CLIENT_OWNER " PX 1500"),
                         0);
    } else {
        redisReply *r = harness_redis(redis_port, "EVAL %s 1 %s 1500 %s", redisson_lock, LOCK_KEY,
                                      CLIENT_OWNER);
        ck_assert_int_eq(r->type, REDIS_REPLY_NIL);
        freeReplyObject(r);
    }
    char path[64];
    snprintf(path, sizeof(path), "/inventory/sale/%s", strategy);
    struct httpc *h = httpc_create("127.0.0.1", a_port, 10000);
    struct ka_bg sale;
    struct redis_sleep zz;
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    const char *tried = lua ? "set" : "evalsha";
    long long calls = harness_redis_calls(redis_port, tried);
    ka_bg_start(&sale, h, path);
    /* The sleep starts once the sale waits: its first try ran and, for
     * redisson, it subscribed and tried again (lock_hash.c), so that what
     * the sleep holds back is a try and not the subscription. */
    long long tries = lua ? 1 : 2;
    for (int64_t end = mclock_ms() + 10000;
         (harness_redis_calls(redis_port, tried) < calls + tries ||
          (!lua && harness_subscribers(redis_port, "redisson_lock__channel:{" LOCK_KEY "}") < 1)) &&
         mclock_ms() < end;)
        mclock_sleep_ms(5);
    redis_sleep_start(&zz, redis_port, 2000);
    redis_sleep_join(&zz);
    ka_bg_join(&sale);
    /* The hold granted after the timeout must not outlive the sale. */
    long long exists = 1;
    for (int64_t end = mclock_ms() + 5000;
         (exists = harness_redis_int(redis_port, "EXISTS " LOCK_KEY)) != 0 && mclock_ms() < end;)
        mclock_sleep_ms(20);
    char *log = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(log);
    /* The fault: Redis ran an acquire of the sale whose reply was lost. */
    long acquired;
    int lost = lost_replies(log, acquire, CLIENT_OWNER, NULL, &acquired);
    if (lost == 0) fprintf(stderr, "%s", log);
    ck_assert_msg(lost > 0,
                  "%s: fault missed its window: no acquire of the sale ran on a connection "
                  "the instance gave up (the sale answered %d %s)",
                  strategy, sale.status, sale.body);
    char owner[64], addr[64], raddr[64];
    owner_in(log + acquired, owner, sizeof(owner));
    ck_assert_str_ne(owner, "");
    ck_assert_int_eq(harness_monitor_parse(log + acquired, NULL, addr, sizeof(addr), NULL), 0);
    /* ... and it was granted: the release checked against its owner found
     * the lock (its script went on to delete it). */
    const char *rel = NULL;
    for (const char *p = strchr(log + acquired, '\n'); p && !rel; p = strchr(p + 1, '\n')) {
        const char *eol = strchr(p + 1, '\n');
        const char *o = strstr(p + 1, owner), *sha = strstr(p + 1, release);
        if (o && sha && (!eol || (o < eol && sha < eol))) rel = p + 1;
    }
    if (!rel) fprintf(stderr, "%s", log);
    ck_assert_msg(rel != NULL, "%s: no release checked against %s after its lost acquire", strategy,
                  owner);
    ck_assert_int_eq(harness_monitor_parse(rel, NULL, raddr, sizeof(raddr), NULL), 0);
    ck_assert_msg(strcmp(addr, raddr) != 0,
                  "%s: the release went on the connection that lost the reply", strategy);
    ck_assert_msg(script_deleted(rel, LOCK_KEY),
                  "%s: the release checked against %s found no lock "
                  "of its own: the lost acquire was not granted",
                  strategy, owner);
    free(log);
    /* The outcome: the sale does not know whether it holds the lock, so
     * it gives the hold up and answers 503 backend_unavailable (an acquire
     * is never re-sent blindly), and the hold does not outlive it. */
    ck_assert_msg(sale.status == 503 &&
                      strcmp(harness_json_str(sale.body, "status"), "backend_unavailable") == 0,
                  "the sale answered %d %s", sale.status, sale.body);
    long long pttl = harness_redis_int(redis_port, "PTTL " LOCK_KEY);
    ck_assert_msg(exists == 0,
                  "%s: a hold nobody releases is left in %s 5 s after the lost reply "
                  "(PTTL %lld ms)",
                  strategy, LOCK_KEY, pttl);

    /* Another instance sells at once: nothing blocks it. */
    struct httpc_response r;
    ck_assert_int_eq(harness_http(b_port, "GET", path, NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");

    /* And the thread that lost the reply sells and lets go as any other. */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(httpc_request(h, "GET", path, NULL, NULL, &r), 0);
        ck_assert_int_eq(r.status, 200);
    }
    httpc_free(h);
    ck_assert_msg(harness_redis_int(redis_port, "EXISTS " LOCK_KEY) == 0,
                  "%s: the lock is still held after every sale finished", strategy);
    ck_assert_int_eq(audit("sold_twice"), 0);
}

START_TEST(test_redisson_a_lost_acquire_reply_leaves_no_hold_behind) {
    lost_acquire_reply("redisson");
}
END_TEST

START_TEST(test_owner_lua_a_lost_acquire_reply_leaves_no_hold_behind) {
    lost_acquire_reply("owner-lua");
}
END_TEST

/* ---- Probe: the audit counts only real overlaps -------------------------- */

/* Issue 10, defect 3. One keep-alive client sells sequentially (the local
 * strategy: an in-process mutex, so the probe's INCR-GET and SET-RPUSH-HDEL
 * are the sale's only round trips), while Redis sleeps 450 ms at a time
 * with redis.timeout=300, until a sleep has lost the reply of the probe's
 * entry: what Redis ran (MONITOR) shows a connection that the instance gave
 * up, whose last probe command was an entry, not the exit that a sale
 * which got that reply would have sent next (at most 30 sleeps; a lost
 * exit has run, and proves nothing). Nothing
 * ever overlapped, so the audit must count no violation and no holder may
 * be left in the probe's hash. */
START_TEST(test_lost_replies_leave_no_probe_entry_and_count_no_violation) {
    start_pair(10000, 3000, "redis.timeout=300", NULL);
    reset_stock(a_port, 100000);
    struct ka_loop k;
    ka_loop_start(&k, a_port, "/inventory/sale/local");
    int sleeps = 0, lost = 0;
    char what[256] = "", enter[48];
    snprintf(enter, sizeof(enter), "%s", harness_script_sha(redis_port, "probe-enter"));
    while (sleeps < 30 && lost == 0) {
        /* The client sells between the sleeps, so that each finds a sale. */
        long sold = atomic_load(&k.sales);
        for (int64_t end = mclock_ms() + 10000;
             atomic_load(&k.sales) < sold + 3 && mclock_ms() < end;)
            mclock_sleep_ms(5);
        ck_assert_msg(atomic_load(&k.sales) >= sold + 3,
                      "fault missed its window: the client sold %ld in 10 s before sleep %d",
                      atomic_load(&k.sales) - sold, sleeps + 1);
        struct harness_monitor *m = harness_monitor_start(redis_port);
        ck_assert_ptr_nonnull(m);
        struct redis_sleep zz;
        redis_sleep_start(&zz, redis_port, 450);
        redis_sleep_join(&zz);
        sleeps++;
        char *log = harness_monitor_stop(m);
        ck_assert_ptr_nonnull(log);
        long at_line;
        lost = lost_replies(log, HOLDERS_KEY, NULL, enter, &at_line);
        if (lost)
            snprintf(what, sizeof(what), "%.*s", (int)strcspn(log + at_line, "\n"), log + at_line);
        free(log);
    }
    ka_loop_stop(&k);
    ck_assert_msg(lost > 0,
                  "fault missed its window: %d DEBUG SLEEPs longer than redis.timeout lost no "
                  "reply of a probe entry",
                  sleeps);
    /* A sequential run after it. */
    struct httpc_response r;
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/local", NULL, NULL, &r), 200);
    long long leaked = harness_redis_int(redis_port, "HLEN " HOLDERS_KEY);
    double violations = audit("violations");
    ck_assert_msg(
        violations == 0 && leaked == 0,
        "one sequential client, %d DEBUG SLEEPs longer than redis.timeout (a reply lost: %s): "
        "the audit counts %.0f violations and %lld holder entries were never removed",
        sleeps, what, violations, leaked);
}
END_TEST

/* ---- State: per-item state is bounded ------------------------------------ */

/* Sales of distinct ?item= values, one per item, from CLIENTS keep-alive
 * clients: item n is sold with strategies[n % count], and must answer
 * expect(n) ("409 bad_stock"): status and "status" word. */
struct item_run {
    int port;
    long to;
    atomic_long next;
    const char *const *strategies;
    const char *(*expect)(long n);
    atomic_long answered, failed, wrong;
    atomic_int noted;
    char first_wrong[1024]; /* the first answer that was not expect(n) */
};

static void *item_run_main(void *arg) {
    struct item_run *ir = arg;
    struct httpc *h = httpc_create("127.0.0.1", ir->port, 10000);
    int count = 0;
    while (ir->strategies[count]) count++;
    long n;
    while ((n = atomic_fetch_add(&ir->next, 1)) < ir->to) {
        char path[160];
        struct httpc_response r;
        snprintf(path, sizeof(path), "/inventory/sale/%s?item=it%ld", ir->strategies[n % count], n);
        if (httpc_request(h, "GET", path, NULL, NULL, &r) != 0) {
            atomic_fetch_add(&ir->failed, 1);
            continue;
        }
        atomic_fetch_add(&ir->answered, 1);
        char got[64];
        snprintf(got, sizeof(got), "%d %s", r.status,
                 harness_json_str(r.body ? r.body : "", "status"));
        if (strcmp(got, ir->expect(n)) != 0) {
            atomic_fetch_add(&ir->wrong, 1);
            if (atomic_exchange(&ir->noted, 1) == 0)
                snprintf(ir->first_wrong, sizeof(ir->first_wrong),
                         "%.200s answered %.63s, not %.63s: %.300s", path, got, ir->expect(n),
                         r.body ? r.body : "");
        }
    }
    httpc_free(h);
    return NULL;
}

static void item_run(struct item_run *ir, long from, long to) {
    enum { CLIENTS = 6 };
    atomic_store(&ir->next, from);
    ir->to = to;
    pthread_t t[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) pthread_create(&t[i], NULL, item_run_main, ir);
    for (int i = 0; i < CLIENTS; i++) pthread_join(t[i], NULL);
    ck_assert_int_eq(atomic_load(&ir->failed), 0);
    ck_assert_msg(atomic_load(&ir->wrong) == 0,
                  "%ld of %ld answers were not the expected one; the first: %s",
                  atomic_load(&ir->wrong), atomic_load(&ir->answered), ir->first_wrong);
}

/* No stock exists for any item: a sale takes its lock, finds no stock and
 * answers 409 bad_stock. */
static const char *expect_bad_stock(long n) {
    (void)n;
    return "409 bad_stock";
}

/* As expect_bad_stock, but a Redisson client holds the lock of every
 * fourth item (n % 4 == 3), whose sale waits for it and times out. */
static const char *expect_held_every_fourth(long n) {
    return n % 4 == 3 ? "503 lock_timeout" : "409 bad_stock";
}

/* Issue 10, defect 4: RSS of instance A after 2,000 distinct items (the
 * warm-up: its threads, pool and arenas are all there by then) and after
 * 50,000 more. No stock exists for any of them (every answer is bad_stock
 * or lock_timeout): the state is made by the ?item= alone. The probe is
 * off, for speed: it keeps no state in the process. */
static void rss_over_distinct_items(struct item_run *ir) {
    ir->port = a_port;
    int64_t t0 = mclock_ms();
    item_run(ir, 0, 2000);
    mclock_sleep_ms(300);
    long before = rss_kb(a_pid);
    item_run(ir, 2000, 52000);
    mclock_sleep_ms(300);
    long after = rss_kb(a_pid);
    ck_assert_int_gt(before, 0);
    ck_assert_int_gt(after, 0);
    ck_assert_msg(
        after - before < 2048,
        "RSS grew from %.1f MB to %.1f MB over 50,000 distinct items (%ld requests in %lld ms)",
        before / 1024.0, after / 1024.0, atomic_load(&ir->answered), (long long)(mclock_ms() - t0));
    /* Still serving. */
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/batched", NULL, NULL, &r), 200);
}

/* With lock.scope=global, one lock for every item, but a batch queue per
 * item (batched) was made all the same. */
START_TEST(test_with_global_scope_rss_stays_flat_over_50000_distinct_items) {
    start_pair(10000, 2000, "lock.scope=global", "inventory.probe=false", NULL);
    static const char *const strategies[] = {"batched", NULL};
    struct item_run ir = {.strategies = strategies, .expect = expect_bad_stock};
    rss_over_distinct_items(&ir);
}
END_TEST

/* With lock.scope=item every item has its own lock: a gate (redisson), a
 * batch queue (batched), and, for the items whose lock a Redisson client
 * holds (every fourth: they are sold with redisson and wait 2 ms for
 * lock_timeout), a pub/sub channel. */
START_TEST(test_with_item_scope_rss_stays_flat_over_50000_distinct_items) {
    start_pair(10000, 2, "lock.scope=item", "inventory.probe=false", NULL);
    redisContext *c = redisConnect("127.0.0.1", redis_port);
    ck_assert(c && !c->err);
    for (long n = 3; n < 52000; n += 4)
        redisAppendCommand(c, "HSET " LOCK_KEY ":it%ld %s 1", n, CLIENT_OWNER);
    for (long n = 3; n < 52000; n += 4) {
        void *v;
        ck_assert_int_eq(redisGetReply(c, &v), REDIS_OK);
        freeReplyObject(v);
    }
    redisFree(c);
    static const char *const strategies[] = {"batched", "redisson", "batched", "redisson", NULL};
    struct item_run ir = {.strategies = strategies, .expect = expect_held_every_fourth};
    rss_over_distinct_items(&ir);
}
END_TEST

/* ---- Protocol: Redisson's messages and the recursion's stack ------------- */

/* Issue 10, defect 5: three readers (GET /inventory, 400 ms each) wait
 * behind a writer (a redisson sale holding 800 ms). Redisson's write unlock
 * publishes the read-unlock message, which wakes every reader at once: all
 * three finish about 400 ms after the writer, not one after another. */
START_TEST(test_a_write_unlock_wakes_every_waiting_reader_at_once) {
    start_pair(10000, 5000, "lock.read-lock=true", NULL);
    struct harness_bg w, rd[3];
    int64_t t0 = mclock_ms();
    harness_bg_start(&w, a_port, "/inventory/sale/redisson?hold_ms=800", 0);
    for (int i = 0; i < 3; i++)
        harness_bg_start(&rd[i], i % 2 ? a_port : b_port, "/inventory?hold_ms=400", 200);
    harness_bg_join(&w);
    int64_t unlocked = mclock_ms(); /* the writer's answer: it has let go */
    for (int i = 0; i < 3; i++) harness_bg_join(&rd[i]);
    ck_assert_int_eq(w.status, 200);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rd[i].status, 200);
        ck_assert_int_eq(harness_json_num(rd[i].body, "stock"), 199);
        int64_t done = rd[i].sent_ms + rd[i].took_ms;
        ck_assert_msg(
            done - unlocked <= 400 + 300,
            "reader %d finished %lld ms after the writer let go (%lld ms after the start): "
            "it was not woken by the unlock",
            i, (long long)(done - unlocked), (long long)(done - t0));
    }
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 0);
}
END_TEST

/* Issue 10, defect 6: the deepest recursion the config accepts, with no
 * sleep between tries and the lock held elsewhere. Each retry is a real
 * stack frame (lock_setnx_retry.c is built without sibling-call
 * optimisation, so the recursion is not turned into a loop): before the
 * cap of 100000 the connection thread's stack nears its end, and the
 * stack guard must stop the recursion there. The guard first: the sale
 * answers 503 lock_timeout, saying the stack stopped it at a depth below
 * the cap, the depth it reports (lock.depth). Then the instance lives and
 * sells. Without the guard the instance dies of a stack overflow; with a
 * recursion made a loop, the cap, not the stack, would stop it. */
START_TEST(
    test_setnx_retry_at_the_deepest_accepted_recursion_fails_cleanly_and_the_instance_lives) {
    start_pair(10000, 30000, "lock.retry-max-depth=100000", "lock.spin-sleep-ms=0", NULL);
    ck_assert_int_eq(harness_redis_int(redis_port, "SET " LOCK_KEY " someone-else"), 0);
    struct httpc_response r;
    int status = harness_http(a_port, "GET", "/inventory/sale/setnx-retry", NULL, NULL, &r);
    int alive = waitpid(a_pid, NULL, WNOHANG) == 0;
    if (!alive) a_pid = 0;
    ck_assert_msg(alive,
                  "the instance died during a setnx-retry sale at lock.retry-max-depth=100000");
    ck_assert_msg(status == 503 && strcmp(harness_json_str(r.body, "status"), "lock_timeout") == 0,
                  "the sale answered %d %s", status, r.body);
    const char *error = harness_json_str(r.body, "error");
    const char *why = strstr(error, "recursion stopped at depth ");
    int depth = (int)harness_json_num(r.body, "lock.depth");
    ck_assert_msg(why && strstr(why, "the thread's stack is nearly exhausted"),
                  "the stack guard did not stop the recursion (a loop, not a recursion?): %s",
                  r.body);
    ck_assert_msg(
        depth > 100 && depth < 100000 && atoi(why + strlen("recursion stopped at depth ")) == depth,
        "the stack guard stopped at a depth that is not the one reported (lock.depth %d): %s",
        depth, r.body);
    ck_assert_int_eq(harness_http(a_port, "GET", "/healthz", NULL, NULL, &r), 200);
    harness_redis_int(redis_port, "DEL " LOCK_KEY);
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/setnx-retry", NULL, NULL, &r),
                     200);
    ck_assert_int_eq(stock_now(), 199);
}
END_TEST

/* The rejected_calls= count of one command in INFO commandstats: calls
 * Redis refused before running them (OOM, ...); -1 on error. */
static long long rejected_calls(int port, const char *cmd) {
    redisReply *r = harness_redis(port, "INFO commandstats");
    long long n = -1;
    char want[64];
    snprintf(want, sizeof(want), "cmdstat_%s:", cmd);
    const char *line = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, want) : NULL;
    const char *rej = line ? strstr(line, "rejected_calls=") : NULL;
    const char *eol = line ? strchr(line, '\n') : NULL;
    if (line) n = 0;
    if (rej && (!eol || rej < eol)) n = strtoll(rej + 15, NULL, 10);
    freeReplyObject(r);
    return n;
}

/* README: sale-write.lua, fenced-sale.lua and atomic-sale.lua start with
 * `#!lua`, "which makes Redis refuse them whole when out of memory". Redis
 * is put over its memory limit (maxmemory 1 byte, noeviction). The window
 * first: an unflagged script (atomic-sale.lua without its `#!lua` line,
 * sent with EVAL) is started and runs its read (MONITOR shows its GET)
 * until its first write is refused: Redis is out of memory, and an
 * unflagged script is not refused whole. Then a sale by each strategy whose write is one of the three
 * scripts (atomic; redisson, after its lock was taken and while it works
 * inside; fenced, likewise): it fails, Redis refused its EVALSHA before
 * running it (rejected_calls) and ran nothing of its script (no line of it
 * in MONITOR), and the stock and the ledger are untouched. */
START_TEST(test_the_sale_scripts_flagged_lua_are_refused_whole_when_redis_is_out_of_memory) {
    start_pair(10000, 3000, NULL);
    struct httpc_response r;
    for (int i = 0; i < 3; i++) /* every script loaded, every connection made */
        ck_assert_int_eq(harness_http(a_port, "GET",
                                      i == 0   ? "/inventory/sale/atomic"
                                      : i == 1 ? "/inventory/sale/redisson"
                                               : "/inventory/sale/fenced",
                                      NULL, NULL, &r),
                         200);
    reset_stock(a_port, 200);
    /* The unflagged copy of atomic-sale.lua. */
    char path[512], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/src/lua/atomic-sale.lua", SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert(getdelim(&text, &len, '\0', f) > 0);
    fclose(f);
    ck_assert_msg(strncmp(text, "#!lua\n", 6) == 0, "atomic-sale.lua does not start with #!lua");
    const char *unflagged = text + 6;
    freeReplyObject(harness_redis(redis_port, "CONFIG SET maxmemory-policy noeviction"));
    freeReplyObject(harness_redis(redis_port, "CONFIG SET maxmemory 1"));
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    redisReply *e = harness_redis(redis_port, "EVAL %s 3 %s %s %s order-x 1 none", unflagged,
                                  STOCK_KEY, LEDGER_KEY, STOCK_KEY ":families");
    char *seen = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(seen);
    int reads = harness_lines(seen, "[0 lua] \"GET\" \"" STOCK_KEY "\"", NULL);
    /* (Its RPUSH, by redis.pcall, was refused: the script then calls the
     * ledger bad, BADKEY.) */
    ck_assert_msg(e && e->type == REDIS_REPLY_ERROR && reads == 1 && ledger_len() == 0,
                  "fault missed its window: the unflagged script answered %s after %d reads",
                  e ? (e->type == REDIS_REPLY_ERROR ? e->str : "no error") : "nothing", reads);
    freeReplyObject(e);
    free(seen);
    free(text);
    freeReplyObject(harness_redis(redis_port, "CONFIG SET maxmemory 0"));

    static const char *const strategies[] = {"atomic", "redisson", "fenced"};
    static const char *const scripts[] = {"atomic-sale", "sale-write", "fenced-sale"};
    for (int i = 0; i < 3; i++) {
        char sha[48], sale[96];
        snprintf(sha, sizeof(sha), "%s", harness_script_sha(redis_port, scripts[i]));
        long long rejected = rejected_calls(redis_port, "evalsha");
        m = harness_monitor_start(redis_port);
        ck_assert_ptr_nonnull(m);
        struct harness_bg b;
        if (i == 0) {
            freeReplyObject(harness_redis(redis_port, "CONFIG SET maxmemory 1"));
            harness_bg_start(&b, a_port, "/inventory/sale/atomic", 0);
        } else {
            /* Out of memory once the sale holds its lock, while it works. */
            snprintf(sale, sizeof(sale), "/inventory/sale/%s?hold_ms=1500", strategies[i]);
            harness_bg_start(&b, a_port, sale, 0);
            ck_assert_msg(redis_wait_int(redis_port, 1, 10000, "EXISTS %s", LOCK_KEY),
                          "%s: the sale never took its lock", strategies[i]);
            freeReplyObject(harness_redis(redis_port, "CONFIG SET maxmemory 1"));
            ck_assert_msg(
                harness_redis_int(redis_port, "EXISTS " LOCK_KEY) == 1,
                "%s: fault missed its window: the sale let go before Redis ran out of memory",
                strategies[i]);
        }
        harness_bg_join(&b);
        seen = harness_monitor_stop(m);
        ck_assert_ptr_nonnull(seen);
        freeReplyObject(harness_redis(redis_port, "CONFIG SET maxmemory 0"));
        ck_assert_msg(b.status != 200 && strstr(b.body, "OOM"), "%s: the sale answered %d %s",
                      strategies[i], b.status, b.body);
        ck_assert_msg(rejected_calls(redis_port, "evalsha") > rejected,
                      "%s: Redis refused no EVALSHA", strategies[i]);
        ck_assert_msg(harness_lines(seen, sha, NULL) == 0,
                      "%s: Redis ran %s.lua out of memory:\n%.1500s", strategies[i], scripts[i],
                      seen);
        free(seen);
        ck_assert_msg(stock_now() == 200 && ledger_len() == 0,
                      "%s: stock %lld, ledger %lld after a refused "
                      "write",
                      strategies[i], stock_now(), ledger_len());
        redis_wait_int(redis_port, 0, 10000, "EXISTS %s", LOCK_KEY);
    }
    /* Back under the limit, it sells. */
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redisson", NULL, NULL, &r), 200);
}
END_TEST

/* ---- Http: requests that must never sell --------------------------------- */

/* Issue 10, defect 7. */
START_TEST(test_a_head_request_never_sells) {
    start_pair(10000, 2000, NULL);
    static const char *const paths[] = {"/inventory/sale/redisson",
                                        "/inventory/sale/atomic",
                                        "/inventory/sale",
                                        "/inventory/saleByRedisson",
                                        "/redis/distributed/lock/inventory/sale",
                                        NULL};
    for (int i = 0; paths[i]; i++) {
        char req[256];
        int n =
            snprintf(req, sizeof(req),
                     "HEAD %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", paths[i]);
        int status = raw_http(a_port, req, (size_t)n);
        ck_assert_msg(status != 0, "HEAD %s: no answer", paths[i]);
        ck_assert_msg(stock_now() == 200 && ledger_len() == 0,
                      "HEAD %s (answered %d) sold: stock %lld, %lld ledger entries", paths[i],
                      status, stock_now(), ledger_len());
    }
    ck_assert_int_eq(audit("sold"), 0);
}
END_TEST

/* Issue 10, defect 8: a NUL cuts the path at the decoded byte, so
 * /inventory/sale/%00%ff used to sell with the default strategy. */
START_TEST(test_a_path_holding_a_nul_or_a_byte_no_route_has_answers_400_or_404_and_never_sells) {
    start_pair(10000, 2000, NULL);
    static const char *const paths[] = {"/inventory/sale/%00%ff",
                                        "/inventory/sale/%00",
                                        "/inventory/sale%00",
                                        "/inventory/sale/atomic%00",
                                        "/inventory/sale/redisson%00x",
                                        "/inventory/sale/%ff",
                                        "/inventory/sale/atomic%ff",
                                        "/inventory/saleByRedisson%00",
                                        "/inventory%00/sale/atomic",
                                        "/redis/distributed/lock/inventory/sale%00",
                                        NULL};
    for (int i = 0; paths[i]; i++) {
        char req[256];
        int n =
            snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", paths[i]);
        int status = raw_http(a_port, req, (size_t)n);
        ck_assert_msg(stock_now() == 200 && ledger_len() == 0,
                      "GET %s answered %d and sold: stock %lld", paths[i], status, stock_now());
        ck_assert_msg(status == 400 || status == 404, "GET %s answered %d, not 400 or 404",
                      paths[i], status);
    }
    /* The same bytes raw in the request line. */
    static const char raw[] =
        "GET /inventory/sale/\0\xff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int status = raw_http(a_port, raw, sizeof(raw) - 1);
    ck_assert_msg(stock_now() == 200, "a raw NUL in the request line sold (answered %d)", status);
    ck_assert_int_eq(audit("sold"), 0);
}
END_TEST

/* ---- Suspected ------------------------------------------------------------- */

/* The vote of master i in a sale answer: "yes", "busy", "error", "restarted". */
static const char *vote_of(const char *body, int i, char word[16]) {
    char key[64];
    snprintf(key, sizeof(key), "\"node\":\"127.0.0.1:%d\",\"vote\":\"", master_port[i]);
    const char *p = strstr(body, key);
    word[0] = '\0';
    if (p) sscanf(p + strlen(key), "%15[a-z]", word);
    return word;
}

/* Suspected: the Redlock validity computed at acquire is dropped. TTL
 * 3000; master 1 sleeps 2400 ms from just before sale A's round goes out
 * (the sleep is written first on a connection Redis has already accepted,
 * so it runs first), so its vote comes at ~2400 and A holds with at most
 * ~600 ms of validity, while masters 0 and 2 let their copies expire at
 * ~3000. The watchdog renews first a third of the TTL after the grant, at
 * ~3400. A works 800 ms and commits at ~3200: past its validity, so it
 * must answer lock_lost and write nothing. Meanwhile, as soon as masters
 * 0 and 2 have let A's copies expire, another Redlock client takes them.
 * The window first, from A's own answer: master 1's vote was slow, and
 * A's round plus its work outlasted the TTL. */
START_TEST(test_redlock_a_holder_past_the_validity_of_a_slow_round_writes_nothing) {
    masters_ready(3000);
    start_pair(3000, 8000, "redlock.node-timeout-ms=2800", NULL);
    struct httpc_response r;
    /* Connections to the masters made before the test. */
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    reset_stock(a_port, 200);
    struct harness_bg a, b;
    redisContext *zz = redisConnect("127.0.0.1", master_port[1]);
    ck_assert(zz && !zz->err);
    freeReplyObject(redisCommand(zz, "PING"));
    ck_assert_int_eq(redisAppendCommand(zz, "DEBUG SLEEP 2.4"), REDIS_OK);
    int done = 0;
    while (!done) ck_assert_int_eq(redisBufferWrite(zz, &done), REDIS_OK);
    int64_t t0 = mclock_ms();
    harness_bg_start(&a, a_port, "/inventory/sale/redlock?hold_ms=800", 0);
    harness_bg_start(&b, b_port, "/inventory/sale/redlock", 100);
    /* As soon as masters 0 and 2 have let A's copies expire, another
     * Redlock client takes them: a quorum of its own, 200 ms. A's copies
     * are seen there first. */
    int copies = redis_wait_int(master_port[0], 1, 5000, "EXISTS %s", LOCK_KEY) &&
                 redis_wait_int(master_port[2], 1, 5000, "EXISTS %s", LOCK_KEY);
    int64_t other_at = -1;
    while (copies && other_at < 0 && mclock_ms() - t0 < 8000) {
        if (harness_redis_int(master_port[0], "EXISTS " LOCK_KEY) == 0 &&
            harness_redis_int(master_port[2], "EXISTS " LOCK_KEY) == 0) {
            int granted = 0;
            for (int i = 0; i < 3; i += 2) {
                redisReply *g = harness_redis(master_port[i], "EVAL %s 1 %s 200 %s", redisson_lock,
                                              LOCK_KEY, CLIENT_OWNER);
                granted += g && g->type == REDIS_REPLY_NIL;
                freeReplyObject(g);
            }
            if (granted == 2) other_at = mclock_ms() - t0;
        }
        if (other_at < 0) mclock_sleep_ms(3);
    }
    harness_bg_join(&a);
    harness_bg_join(&b);
    void *v = NULL;
    ck_assert_int_eq(redisGetReply(zz, &v), REDIS_OK);
    freeReplyObject(v);
    redisFree(zz);
    /* The window: master 1's vote came late, and A's round and work
     * together outlasted its lease (TTL 3000). */
    char vote[16];
    double round_ms = harness_json_num(a.body, "lock.wait_ms");
    ck_assert_msg(copies, "fault missed its window: A's copies never showed on masters 0 and 2");
    ck_assert_msg(harness_json_num(a.body, "lock.attempts") == 1 &&
                      strcmp(vote_of(a.body, 1, vote), "yes") == 0 && round_ms >= 2000,
                  "fault missed its window: A's one round took %.0f ms, master 1 voted '%s': %d %s",
                  round_ms, vote, a.status, a.body);
    ck_assert_msg(round_ms + 800 > 3000,
                  "fault missed its window: A's round (%.0f ms) and its 800 ms of "
                  "work fit in the TTL",
                  round_ms);
    ck_assert_msg(a.status == 409,
                  "A committed past the validity of its round (master 1 answered in %.0f ms of a "
                  "3000 ms TTL): A answered %d at %lld ms, while another client held masters 0 "
                  "and 2 from %lld ms",
                  round_ms, a.status, (long long)(a.sent_ms + a.took_ms - t0), (long long)other_at);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "lock_lost");
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* Suspected: the restart rule trusts a master that restarted before this
 * process first saw it. A holds the lock on masters 0 and 1 (2 is down);
 * master 1 restarts empty and master 2 comes up. Instance B, which has
 * never seen 1 or 2, must not count their votes while they have been up
 * for less than the TTL: it must not sell while A is inside. The window
 * first: A's copies were on masters 0 and 1, master 1 came back without
 * it, and A was still inside when B tried (its copy on master 0 outlived
 * B's answer). Then B's exact answer: 503 backend_unavailable, since only
 * master 0 may vote (busy: A holds it), fewer than the quorum of 2, with
 * masters 1 and 2 restarted. */
START_TEST(test_redlock_a_master_restarted_before_first_sight_gets_no_vote_until_up_a_ttl) {
    masters_ready(2000); /* masters 0 and 1 up for longer than a TTL */
    harness_stop(master_pid[2]);
    master_pid[2] = 0;
    start_pair(1000, 500, NULL);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/redlock?hold_ms=4000", 0);
    int held = redis_wait_int(master_port[0], 1, 10000, "EXISTS %s", LOCK_KEY) &&
               redis_wait_int(master_port[1], 1, 10000, "EXISTS %s", LOCK_KEY);
    kill(master_pid[1], SIGKILL);
    waitpid(master_pid[1], NULL, 0);
    master_pid[1] = harness_redis_start_args(master_port[1], NULL, debug_redis);
    master_pid[2] = harness_redis_start_args(master_port[2], NULL, debug_redis);
    ck_assert_int_gt(master_pid[1], 0);
    ck_assert_int_gt(master_pid[2], 0);
    long long forgotten = harness_redis_int(master_port[1], "EXISTS " LOCK_KEY);
    harness_bg_start(&b, b_port, "/inventory/sale/redlock", 0);
    harness_bg_join(&b);
    long long a_inside = harness_redis_int(master_port[0], "EXISTS " LOCK_KEY);
    harness_bg_join(&a);
    char v0[16], v1[16], v2[16];
    ck_assert_msg(held, "fault missed its window: A's lock never showed on masters 0 and 1 (%d %s)",
                  a.status, a.body);
    ck_assert_msg(strcmp(vote_of(a.body, 0, v0), "yes") == 0 &&
                      strcmp(vote_of(a.body, 1, v1), "yes") == 0,
                  "A did not get the lock from masters 0 and 1: %d %s", a.status, a.body);
    ck_assert_msg(forgotten == 0, "fault missed its window: restarted master 1 still has A's lock");
    ck_assert_msg(a_inside == 1,
                  "fault missed its window: A was no longer inside when B had answered");
    ck_assert_msg(
        b.status == 503 && strcmp(harness_json_str(b.body, "status"), "backend_unavailable") == 0 &&
            strstr(harness_json_str(b.body, "error"), "only 1 of 3 Redlock masters can vote") &&
            strcmp(vote_of(b.body, 0, v0), "busy") == 0 &&
            strcmp(vote_of(b.body, 1, v1), "restarted") == 0 &&
            strcmp(vote_of(b.body, 2, v2), "restarted") == 0,
        "B answered %d, not 503 backend_unavailable (only 1 of 3 Redlock masters can vote) "
        "with master 0 busy and masters 1 and 2 restarted: votes %s, %s, %s: %s",
        b.status, vote_of(b.body, 0, v0), vote_of(b.body, 1, v1), vote_of(b.body, 2, v2), b.body);
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

/* Suspected: pub/sub reconnect. A sale waits for a Redisson client's lock.
 * The subscriber's connection is killed and Redis sleeps 1 s in the same
 * breath; 500 ms into the sleep the client unlocks. When Redis wakes, the
 * waiter's retry (sent at the kill) runs first and finds the lock held, then
 * the unlock publishes, then the new SUBSCRIBE comes in: a waiter that went
 * back to sleep without waiting for that SUBSCRIBE's confirmation misses
 * the message. The window first: CLIENT KILL killed the subscriber, and in
 * what Redis ran (MONITOR) the waiter's retry came after the kill and
 * before the unlock, and a SUBSCRIBE to the channel after the unlock (the
 * subscriber reconnected). Then the outcome: the waiter sells, woken by
 * the unlock, not at the PTTL (30 s) or the wait's end (10 s). */
START_TEST(test_redisson_a_waiter_is_woken_by_an_unlock_during_a_subscriber_reconnect) {
    start_pair(30000, 10000, NULL);
    redisReply *r =
        harness_redis(redis_port, "EVAL %s 1 %s 30000 %s", redisson_lock, LOCK_KEY, CLIENT_OWNER);
    ck_assert_int_eq(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    const char *channel = "redisson_lock__channel:{" LOCK_KEY "}";
    char hash_lock[48];
    snprintf(hash_lock, sizeof(hash_lock), "%s", harness_script_sha(redis_port, "hash-lock"));
    long long tries = harness_redis_calls(redis_port, "evalsha");
    struct harness_bg sale;
    harness_bg_start(&sale, a_port, "/inventory/sale/redisson", 0);
    /* Subscribed and waiting: its channel has a subscriber, its try ran. */
    int waiting = 0;
    for (int64_t end = mclock_ms() + 10000; !waiting && mclock_ms() < end; mclock_sleep_ms(10))
        waiting = harness_subscribers(redis_port, channel) == 1 &&
                  harness_redis_calls(redis_port, "evalsha") > tries;
    ck_assert_msg(waiting, "the sale never waited on the unlock channel");
    struct harness_monitor *m = harness_monitor_start(redis_port);
    ck_assert_ptr_nonnull(m);
    redisContext *killer = redisConnect("127.0.0.1", redis_port);
    redisContext *client = redisConnect("127.0.0.1", redis_port);
    ck_assert(killer && !killer->err && client && !client->err);
    redisAppendCommand(killer, "CLIENT KILL TYPE pubsub");
    redisAppendCommand(killer, "DEBUG SLEEP 1.0");
    double killed_s = (double)mclock_wall_us() / 1e6;
    int done = 0;
    while (!done) ck_assert_int_eq(redisBufferWrite(killer, &done), REDIS_OK);
    mclock_sleep_ms(500);
    r = redisCommand(client, "EVAL %s 2 %s redisson_lock__channel:{%s} 0 30000 %s", redisson_unlock,
                     LOCK_KEY, LOCK_KEY, CLIENT_OWNER);
    int64_t released = mclock_ms();
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    long long killed = -1;
    for (int i = 0; i < 2; i++) {
        redisReply *v = NULL;
        ck_assert_int_eq(redisGetReply(killer, (void **)&v), REDIS_OK);
        if (i == 0 && v && v->type == REDIS_REPLY_INTEGER) killed = v->integer;
        freeReplyObject(v);
    }
    redisFree(killer);
    redisFree(client);
    harness_bg_join(&sale);
    char *log = harness_monitor_stop(m);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(killed >= 1,
                  "fault missed its window: CLIENT KILL TYPE pubsub killed %lld clients", killed);
    /* The order Redis ran them in: the retry, the unlock, the SUBSCRIBE. */
    long retry = -1, unlock = -1, subscribe = -1;
    for (const char *line = log; line && *line;) {
        double ts;
        char addr[64];
        const char *cmd;
        long off = (long)(line - log);
        size_t len = strcspn(line, "\n");
        if (harness_monitor_parse(line, &ts, addr, sizeof(addr), &cmd) == 0 &&
            strcmp(addr, "lua") != 0) {
            char *l = strndup(cmd, len - (size_t)(cmd - line));
            if (l && retry < 0 && ts >= killed_s && strstr(l, hash_lock) &&
                !strstr(l, CLIENT_OWNER))
                retry = off;
            if (l && unlock < 0 && strncmp(l, "\"EVAL\"", 6) == 0 && strstr(l, CLIENT_OWNER))
                unlock = off;
            if (l && unlock >= 0 && subscribe < 0 && strncasecmp(l, "\"SUBSCRIBE\"", 11) == 0 &&
                strstr(l, channel))
                subscribe = off;
            free(l);
        }
        line = line[len] ? line + len + 1 : NULL;
    }
    if (!(retry >= 0 && unlock > retry && subscribe > unlock)) fprintf(stderr, "%s", log);
    free(log);
    ck_assert_msg(
        retry >= 0 && unlock > retry,
        "fault missed its window: the waiter's retry did not run between the kill and the unlock");
    ck_assert_msg(subscribe > unlock,
                  "fault missed its window: no SUBSCRIBE to %s after the unlock: the "
                  "subscriber did not reconnect",
                  channel);
    int64_t woken_within = sale.sent_ms + sale.took_ms - released;
    ck_assert_msg(sale.status == 200 &&
                      strcmp(harness_json_str(sale.body, "status"), "sold") == 0 &&
                      woken_within <= 2000,
                  "the waiter answered %d %lld ms after the unlock: the message was missed (%s)",
                  sale.status, (long long)woken_within, sale.body);
}
END_TEST

/* Suspected: POST /inventory/reset deleted the fence counter, so a fenced
 * holder paused across a reset came back with a token as new as the next
 * owner's. A is paused inside its sale past the TTL; the stock is reset;
 * B sells; A resumes and must be refused. */
START_TEST(test_fenced_a_paused_holder_is_refused_after_a_reset_the_counter_only_grows) {
    start_pair(600, 3000, NULL);
    struct harness_bg a, b;
    harness_bg_start(&a, a_port, "/inventory/sale/fenced?hold_ms=400", 0);
    /* Inside: the probe has its entry, sent with the GET of the stock. */
    ck_assert_msg(harness_redis_until(redis_port, 1, 5000, "HLEN " HOLDERS_KEY),
                  "A never came inside");
    kill(a_pid, SIGSTOP);
    long long fence_before = harness_redis_int(redis_port, "GET " LOCK_KEY ":fence");
    ck_assert_msg(harness_redis_until(redis_port, 0, 5000, "EXISTS " LOCK_KEY),
                  "fault missed its window: A's lock outlived its TTL while A was stopped");
    reset_stock(b_port, 200);
    long long fence_after = harness_redis_int(redis_port, "GET " LOCK_KEY ":fence");
    harness_bg_start(&b, b_port, "/inventory/sale/fenced", 0);
    harness_bg_join(&b);
    kill(a_pid, SIGCONT);
    harness_bg_join(&a);
    ck_assert_int_eq(b.status, 200);
    ck_assert_msg(
        a.status == 409,
        "the paused holder (token %.0f) wrote after a reset and B's sale (token %.0f): %d %s",
        harness_json_num(a.body, "lock.token"), harness_json_num(b.body, "lock.token"), a.status,
        a.body);
    ck_assert_str_eq(harness_json_str(a.body, "status"), "stale_token");
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_msg(fence_after >= fence_before, "the reset took the fence counter from %lld to %lld",
                  fence_before, fence_after);
}
END_TEST

/* Suspected: the sale's write is SET then RPUSH, pipelined or in one Lua
 * script, which Redis does not roll back either. With a ledger key of the
 * wrong type RPUSH fails: the stock must be unchanged, by every strategy. */
START_TEST(test_a_sale_whose_ledger_write_fails_leaves_the_stock_unchanged) {
    masters_ready(2000); /* so that redlock really takes its lock */
    start_pair(2000, 2000, NULL);
    static const char *const strategies[] = {"redisson", "owner-lua", "fenced", "handoff",
                                             "batched",  "redlock",   "atomic", NULL};
    char wrong[512] = "";
    for (int i = 0; strategies[i]; i++) {
        reset_stock(a_port, 200);
        ck_assert_int_eq(harness_redis_int(redis_port, "SET " LEDGER_KEY " not-a-list"), 0);
        char path[64];
        struct httpc_response r;
        snprintf(path, sizeof(path), "/inventory/sale/%s", strategies[i]);
        int status = harness_http(a_port, "GET", path, NULL, NULL, &r);
        long long stock = stock_now();
        ck_assert_msg(status != 200, "%s sold with a ledger that cannot be written: %s",
                      strategies[i], r.body);
        /* Refused for the data, after taking its lock: not an outage. */
        ck_assert_msg(status == 409, "%s answered %d, not 409 bad_stock: %s", strategies[i], status,
                      r.body);
        if (stock != 200)
            snprintf(wrong + strlen(wrong), sizeof(wrong) - strlen(wrong),
                     " %s (answered %d, stock %lld)", strategies[i], status, stock);
    }
    ck_assert_msg(wrong[0] == '\0', "the ledger write failed but the stock was decremented by:%s",
                  wrong);
}
END_TEST

/* Suspected: with lock.read-lock=true, strategy's lock and the read lock
 * share a key, but the read lock took another strategy's hold for a free
 * lock. A reader must wait for a sale in progress, and a sale for a reader. */
static void read_lock_excludes(const char *strategy) {
    start_pair(10000, 5000, "lock.read-lock=true", NULL);
    char path[96];
    snprintf(path, sizeof(path), "/inventory/sale/%s?hold_ms=800", strategy);
    struct harness_bg w, rd;
    harness_bg_start(&w, a_port, path, 0);
    ck_assert(redis_wait_int(redis_port, 1, 5000, "EXISTS %s", LOCK_KEY));
    harness_bg_start(&rd, b_port, "/inventory", 0);
    harness_bg_join(&w);
    harness_bg_join(&rd);
    ck_assert_int_eq(w.status, 200);
    ck_assert_msg(rd.status == 200 && rd.took_ms >= 400 &&
                      harness_json_num(rd.body, "stock") == 199,
                  "a reader did not wait for a %s sale in progress: %d after %lld ms, %s", strategy,
                  rd.status, (long long)rd.took_ms, rd.body);

    reset_stock(a_port, 200);
    snprintf(path, sizeof(path), "/inventory/sale/%s", strategy);
    struct harness_bg r2, w2;
    harness_bg_start(&r2, b_port, "/inventory?hold_ms=800", 0);
    ck_assert(redis_wait_int(redis_port, 1, 5000, "EXISTS %s", LOCK_KEY));
    harness_bg_start(&w2, a_port, path, 0);
    harness_bg_join(&r2);
    harness_bg_join(&w2);
    ck_assert_int_eq(r2.status, 200);
    ck_assert_int_eq(w2.status, 200);
    ck_assert_msg(w2.took_ms >= 400, "a %s sale did not wait for a reader (%lld ms)", strategy,
                  (long long)w2.took_ms);
    ck_assert_int_eq(audit("sold_twice"), 0);
}

START_TEST(test_with_the_read_lock_a_watchdog_sale_and_a_reader_exclude_each_other) {
    read_lock_excludes("watchdog");
}
END_TEST

START_TEST(test_with_the_read_lock_an_owner_lua_sale_and_a_reader_exclude_each_other) {
    read_lock_excludes("owner-lua");
}
END_TEST

/* Suspected: lock families mixed on one stock do not exclude each other.
 * lock.allowed names the strategies an instance may sell with. */
START_TEST(test_a_strategy_not_in_lock_allowed_answers_an_error_and_sells_nothing) {
    const char *sets[] = {nodes, "lock.allowed=redisson,atomic", NULL};
    ck_assert_msg(
        harness_pair_start(redis_port, 10000, 2000, sets, &a_pid, &a_port, &b_pid, &b_port) == 0,
        "inventoryd does not start with --set lock.allowed=redisson,atomic");
    struct httpc_response r;
    int status = harness_http(a_port, "GET", "/inventory/sale/watchdog", NULL, NULL, &r);
    ck_assert_msg(status == 403 &&
                      strcmp(harness_json_str(r.body, "status"), "strategy_not_allowed") == 0 &&
                      stock_now() == 200 && ledger_len() == 0,
                  "watchdog is not in lock.allowed=redisson,atomic but answered %d (%s), not 403 "
                  "strategy_not_allowed; stock %lld",
                  status, r.body, stock_now());
    ck_assert_str_ne(harness_json_str(r.body, "error"), "");
    ck_assert_int_eq(harness_redis_int(redis_port, "EXISTS " LOCK_KEY), 0); /* no lock was taken */
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/redisson", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
}
END_TEST

/* The audit's "warnings": an array of sentences; -1 when absent. */
static int audit_warnings(char *first, size_t len) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/audit", NULL, NULL, &r), 200);
    cJSON *root = cJSON_Parse(r.body);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "warnings");
    int n = cJSON_IsArray(w) ? cJSON_GetArraySize(w) : -1;
    first[0] = '\0';
    if (n > 0 && cJSON_IsString(cJSON_GetArrayItem(w, 0)))
        snprintf(first, len, "%s", cJSON_GetArrayItem(w, 0)->valuestring);
    cJSON_Delete(root);
    return n;
}

START_TEST(test_the_audit_warns_when_one_stock_was_sold_under_two_lock_families) {
    masters_ready(2000);
    start_pair(2000, 2000, NULL);
    struct httpc_response r;
    char first[256];
    ck_assert_int_eq(harness_http(a_port, "GET", "/inventory/sale/watchdog", NULL, NULL, &r), 200);
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/watchdog", NULL, NULL, &r), 200);
    ck_assert_int_le(audit_warnings(first, sizeof(first)), 0); /* one family: nothing to say */
    ck_assert_int_eq(harness_http(b_port, "GET", "/inventory/sale/redlock", NULL, NULL, &r), 200);
    int n = audit_warnings(first, sizeof(first));
    ck_assert_msg(n >= 1, "sold under watchdog and redlock since the reset, and the audit has %s",
                  n < 0 ? "no \"warnings\" field" : "an empty \"warnings\" array");
    ck_assert_str_ne(first, "");
    reset_stock(a_port, 200);
    ck_assert_int_le(audit_warnings(first, sizeof(first)), 0); /* since its reset */
}
END_TEST

Suite *safety_suite(void) {
    Suite *s = suite_create("safety");
    struct {
        const char *name;
        void (*setup)(void);
        int timeout;
        const TTest *tests[8];
    } cases[] = {
        {"Pressure",
         setup,
         60,
         {test_redisson_sells_no_unit_twice_when_the_pool_is_exhausted_during_a_long_hold,
          test_watchdog_sells_no_unit_twice_when_the_pool_is_exhausted_during_a_long_hold}},
        {"LostReplies",
         setup,
         60,
         {test_redisson_a_lost_acquire_reply_leaves_no_hold_behind,
          test_owner_lua_a_lost_acquire_reply_leaves_no_hold_behind}},
        {"Probe", setup, 60, {test_lost_replies_leave_no_probe_entry_and_count_no_violation}},
        {"State",
         setup,
         240,
         {test_with_global_scope_rss_stays_flat_over_50000_distinct_items,
          test_with_item_scope_rss_stays_flat_over_50000_distinct_items}},
        {"Protocol",
         setup,
         90,
         {test_a_write_unlock_wakes_every_waiting_reader_at_once,
          test_setnx_retry_at_the_deepest_accepted_recursion_fails_cleanly_and_the_instance_lives,
          test_the_sale_scripts_flagged_lua_are_refused_whole_when_redis_is_out_of_memory}},
        {"Http",
         setup,
         60,
         {test_a_head_request_never_sells,
          test_a_path_holding_a_nul_or_a_byte_no_route_has_answers_400_or_404_and_never_sells}},
        {"Redlock",
         setup_masters,
         60,
         {test_redlock_a_holder_past_the_validity_of_a_slow_round_writes_nothing,
          test_redlock_a_master_restarted_before_first_sight_gets_no_vote_until_up_a_ttl}},
        {"Suspected",
         setup_masters,
         60,
         {test_redisson_a_waiter_is_woken_by_an_unlock_during_a_subscriber_reconnect,
          test_fenced_a_paused_holder_is_refused_after_a_reset_the_counter_only_grows,
          test_a_sale_whose_ledger_write_fails_leaves_the_stock_unchanged,
          test_with_the_read_lock_a_watchdog_sale_and_a_reader_exclude_each_other,
          test_with_the_read_lock_an_owner_lua_sale_and_a_reader_exclude_each_other,
          test_a_strategy_not_in_lock_allowed_answers_an_error_and_sells_nothing,
          test_the_audit_warns_when_one_stock_was_sold_under_two_lock_families}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, cases[i].setup, teardown);
        tcase_set_timeout(tc, cases[i].timeout);
        for (int j = 0; j < 8 && cases[i].tests[j]; j++) tcase_add_test(tc, cases[i].tests[j]);
        suite_add_tcase(s, tc);
    }
    return s;
}
