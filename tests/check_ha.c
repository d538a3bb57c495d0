/* check_ha.c -- single-master high availability: a master, its replica and
 * three real redis-sentinel processes started by the test, the master killed
 * and the service following the failover; and lock.sync-replicas' WAIT with
 * a replica that answers and one that is frozen. */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check_main.h"
#include "harness.h"
#include "mclock.h"

#define NSENTINELS 3

static pid_t master_pid, replica_pid, sentinel_pid[NSENTINELS + 1], app_pid;
static int master_port, replica_port, sentinel_port[NSENTINELS + 1], app_port;
static int replica_stopped;
static char tmpdir[64];

/* ---- processes ------------------------------------------------------------ */

/* Writes once on the master at port and waits (at most 3 s) for one replica
 * to acknowledge it; the number that did. */
static long long acked_write(int port) {
    redisContext *c = redisConnect("127.0.0.1", port);
    long long n = -1;
    if (c && !c->err) {
        freeReplyObject(redisCommand(c, "SET check-ha:probe 1"));
        redisReply *r = redisCommand(c, "WAIT 1 3000");
        if (r && r->type == REDIS_REPLY_INTEGER) n = r->integer;
        freeReplyObject(r);
        freeReplyObject(redisCommand(c, "DEL check-ha:probe"));
    }
    redisFree(c);
    return n;
}

/* Starts a replica of the master on port `of` into *pid and waits until it
 * acknowledges writes. (After a diskless sync the master streams to a new
 * replica only from its first periodic ACK, up to a second later; a WAIT
 * before that would wait for it.) 0, or -1 if it never does. */
static int replica_start(int of, pid_t *pid, int *port) {
    *pid = harness_redis_start(0, port);
    if (*pid <= 0) return -1;
    /* Not the default 5 s wait for more replicas before a diskless sync. */
    freeReplyObject(harness_redis(of, "CONFIG SET repl-diskless-sync-delay 0"));
    freeReplyObject(harness_redis(*port, "REPLICAOF 127.0.0.1 %d", of));
    for (int i = 0; i < 100; i++) {
        redisReply *info = harness_redis(of, "INFO replication");
        int up =
            info && info->type == REDIS_REPLY_STRING && strstr(info->str, "state=online") != NULL;
        freeReplyObject(info);
        if (up) return acked_write(of) == 1 ? 0 : -1;
        mclock_sleep_ms(50);
    }
    return -1;
}

/* Starts a redis-sentinel into *pid, on a free port, watching `name` at
 * 127.0.0.1:of, with its own config file (Sentinel rewrites it) in tmpdir.
 * 0 once it accepts connections, -1 if it does not. */
static int sentinel_start(const char *name, int of, int quorum, int down_after_ms, pid_t *pid,
                          int *port) {
    *port = harness_free_port();
    char conf[128], log[128];
    snprintf(conf, sizeof(conf), "%s/sentinel-%d.conf", tmpdir, *port);
    snprintf(log, sizeof(log), "%s/sentinel-%d.log", tmpdir, *port);
    FILE *f = fopen(conf, "w");
    if (!f) return -1;
    fprintf(f,
            "port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nlogfile \"%s\"\n"
            "sentinel monitor %s 127.0.0.1 %d %d\n"
            "sentinel down-after-milliseconds %s %d\n"
            "sentinel failover-timeout %s 3000\n",
            *port, tmpdir, log, name, of, quorum, name, down_after_ms, name);
    fclose(f);
    *pid = fork();
    if (*pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execlp("redis-sentinel", "redis-sentinel", conf, (char *)NULL);
        execlp("redis-server", "redis-server", conf, "--sentinel", (char *)NULL);
        _exit(127);
    }
    return *pid > 0 && harness_wait_port(*port, 5000) == 0 ? 0 : -1;
}

/* Elements of an array reply to cmd at port, -1 when it is not an array. */
static int array_len(int port, const char *cmd) {
    redisReply *r = harness_redis(port, cmd);
    int n = r && r->type == REDIS_REPLY_ARRAY ? (int)r->elements : -1;
    freeReplyObject(r);
    return n;
}

/* The first word of ROLE at port: "master", "slave", or "" when down. */
static const char *role_of(int port) {
    static char word[16];
    redisReply *r = harness_redis(port, "ROLE");
    word[0] = '\0';
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_STRING)
        snprintf(word, sizeof(word), "%s", r->element[0]->str);
    freeReplyObject(r);
    return word;
}

/* INFO stats total_connections_received at port (this call's own included). */
static long long connections_received(int port) {
    redisReply *r = harness_redis(port, "INFO stats");
    const char *p =
        r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "total_connections_received:") : NULL;
    long long n = p ? strtoll(p + 27, NULL, 10) : -1;
    freeReplyObject(r);
    return n;
}

static void rm_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(tmpdir);
}

static void teardown(void);

/* Fails the set-up, stopping first whatever it started. */
#define setup_assert(cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            teardown();                                                                            \
            ck_abort_msg(__VA_ARGS__);                                                             \
        }                                                                                          \
    } while (0)

static void setup_common(void) {
    memset(sentinel_pid, 0, sizeof(sentinel_pid));
    master_pid = replica_pid = app_pid = 0;
    replica_stopped = 0;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/check-ha-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    master_pid = harness_redis_start(0, &master_port);
    setup_assert(master_pid > 0, "the master did not start");
    setup_assert(replica_start(master_port, &replica_pid, &replica_port) == 0,
                 "the replica did not link to the master");
}

/* The master, its replica, and three sentinels (quorum 2) that know the
 * replica and each other, so that a failover can be agreed. */
static void setup_sentinel(void) {
    setup_common();
    for (int i = 0; i < NSENTINELS; i++)
        setup_assert(sentinel_start("mymaster", master_port, 2, 1000, &sentinel_pid[i],
                                    &sentinel_port[i]) == 0,
                     "a sentinel did not start");
    int64_t deadline = mclock_ms() + 15000;
    int ready = 0;
    while (!ready && mclock_ms() < deadline) {
        ready = 1;
        for (int i = 0; i < NSENTINELS; i++)
            ready = ready && array_len(sentinel_port[i], "SENTINEL replicas mymaster") >= 1 &&
                    array_len(sentinel_port[i], "SENTINEL sentinels mymaster") >= NSENTINELS - 1;
        if (!ready) mclock_sleep_ms(100);
    }
    setup_assert(ready, "the sentinels did not find the replica and each other in 15 s");
}

static void teardown(void) {
    if (replica_stopped) kill(replica_pid, SIGCONT);
    replica_stopped = 0;
    harness_stop(app_pid);
    for (int i = 0; i < NSENTINELS + 1; i++) {
        harness_stop(sentinel_pid[i]);
        sentinel_pid[i] = 0;
    }
    harness_stop(master_pid);
    harness_stop(replica_pid);
    app_pid = master_pid = replica_pid = 0;
    rm_tmpdir();
}

/* ---- the service ---------------------------------------------------------- */

static void app_start(const char *const *sets) {
    app_port = harness_free_port();
    app_pid = harness_inventoryd_start(app_port, sets);
    ck_assert_int_gt(app_pid, 0);
    struct httpc_response r;
    ck_assert_int_eq(
        harness_http(app_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r), 200);
}

static double audit(const char *field) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/audit", NULL, NULL, &r), 200);
    return harness_json_num(r.body, field);
}

/* A counter of /metrics for one strategy; -1 if absent. */
static long long metric(const char *name, const char *strategy) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(app_port, "GET", "/metrics", NULL, NULL, &r), 200);
    char key[160];
    snprintf(key, sizeof(key), "%s{strategy=\"%s\"} ", name, strategy);
    const char *p = strstr(r.body, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* ---- Sentinel ------------------------------------------------------------- */

START_TEST(test_a_killed_master_fails_over_and_sales_go_on_at_the_promoted_replica) {
    /* redis.port names nothing: only the sentinels can lead to Redis. The
     * first sentinel listed is down: the next one is asked. */
    char nodes[192], rp[32];
    snprintf(nodes, sizeof(nodes),
             "redis.sentinel.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             harness_free_port(), sentinel_port[0], sentinel_port[1], sentinel_port[2]);
    snprintf(rp, sizeof(rp), "redis.port=%d", harness_free_port());
    const char *sets[] = {nodes, rp, "redis.timeout=500", "lock.wait-ms=2000", NULL};
    app_start(sets);

    struct httpc_response r;
    long long sold = 0;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale/redisson", NULL, NULL, &r),
                         200);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
        sold++;
    }
    ck_assert_int_eq(harness_http(app_port, "GET", "/healthz", NULL, NULL, &r), 200);
    /* What was sold is on the replica before the master dies. */
    ck_assert_int_eq(acked_write(master_port), 1);

    int64_t killed = mclock_ms();
    kill(master_pid, SIGKILL);
    waitpid(master_pid, NULL, 0);
    master_pid = 0;

    /* At once, before any sentinel can even see the master down (1 s): a
     * sale into the outage, answered 503 naming the master and the
     * sentinels asked. */
    char outage[512] = "";
    int first = harness_http(app_port, "GET", "/inventory/sale/redisson", NULL, NULL, &r);
    snprintf(outage, sizeof(outage), "%s", r.body ? r.body : "");
    ck_assert_msg(mclock_ms() - killed < 1000, "the sale into the outage came too late to be one");
    ck_assert_msg(first == 503, "a sale right after the master was killed: %d %s", first, outage);
    ck_assert_str_eq(harness_json_str(outage, "status"), "backend_unavailable");
    char want[256];
    snprintf(want, sizeof(want), "127.0.0.1:%d", master_port);
    ck_assert_msg(strstr(outage, want) != NULL, "the error does not name the master %s: %s", want,
                  outage);
    snprintf(want, sizeof(want), "master mymaster via sentinels %s",
             nodes + strlen("redis.sentinel.nodes="));
    ck_assert_msg(strstr(outage, want) != NULL, "the error does not name the sentinels: %s",
                  outage);

    /* Sell with short pauses until the promoted replica takes the sales. */
    int failed = 1, back = 0;
    while (!back && mclock_ms() - killed < 20000) {
        int code = harness_http(app_port, "GET", "/inventory/sale/redisson", NULL, NULL, &r);
        if (code == 200 && strcmp(harness_json_str(r.body, "status"), "sold") == 0) {
            back = 1;
            sold++;
        } else {
            ck_assert_msg(code == 503, "during the failover: %d %s", code, r.body);
            ck_assert_str_eq(harness_json_str(r.body, "status"), "backend_unavailable");
            ck_assert_msg(strstr(r.body, "master mymaster via sentinels 127.0.0.1:") != NULL,
                          "during the failover, the error names no master or sentinel: %s", r.body);
            failed++;
            mclock_sleep_ms(100);
        }
    }
    ck_assert_msg(back,
                  "no sale succeeded in the 20 s after the master was killed "
                  "(%d failed; first: %s)",
                  failed, outage);
    fprintf(stderr,
            "check_ha: sales back %lld ms after the kill (%d refused meanwhile; first: %s)\n",
            (long long)(mclock_ms() - killed), failed, outage);
    ck_assert_str_eq(role_of(replica_port), "master");

    /* The pool keeps its connections to the new master: no dial per sale. */
    long long dialed = connections_received(replica_port);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale/redisson", NULL, NULL, &r),
                         200);
        ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
        sold++;
    }
    ck_assert_int_le(connections_received(replica_port) - dialed, 2);
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale", NULL, NULL, &r), 200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    sold++;
    ck_assert_int_eq(harness_http(app_port, "GET", "/healthz", NULL, NULL, &r), 200);
    ck_assert_int_eq(audit("sold"), sold);
    ck_assert_int_eq(audit("stock"), 200 - sold);
    ck_assert_int_eq(audit("sold_twice"), 0);
    ck_assert_int_eq(audit("violations"), 0);
    ck_assert_int_eq(harness_redis_int(replica_port, "LLEN inventory001:sold"), sold);
}
END_TEST

/* True when the last entry of the ledger at port is the sale in body. */
static int sold_at(int port, const char *body) {
    redisReply *r = harness_redis(port, "LINDEX inventory001:sold -1");
    char order[64];
    snprintf(order, sizeof(order), "|%s|", harness_json_str(body, "order"));
    int yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, order) != NULL;
    freeReplyObject(r);
    return yes;
}

/* Sales by path go to the master; after a failover whose old master stays
 * up (and still a master), they move to the new one within 5 s, and none
 * goes back. */
static void failover_moves_sales(const char *path) {
    char nodes[160];
    snprintf(nodes, sizeof(nodes), "redis.sentinel.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             sentinel_port[0], sentinel_port[1], sentinel_port[2]);
    const char *sets[] = {nodes, "redis.timeout=500", NULL};
    app_start(sets);
    struct httpc_response r;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(harness_http(app_port, "GET", path, NULL, NULL, &r), 200);
        ck_assert(sold_at(master_port, r.body));
    }
    ck_assert_int_eq(acked_write(master_port), 1);

    /* The pooled connections to the old master stay open: Sentinel demotes
     * it (and closes them) only some 8 s after the switch. */
    redisReply *f = harness_redis(sentinel_port[0], "SENTINEL FAILOVER mymaster");
    ck_assert_msg(f && f->type == REDIS_REPLY_STATUS, "SENTINEL FAILOVER: %s",
                  f && f->str ? f->str : "no answer");
    freeReplyObject(f);
    int64_t t0 = mclock_ms();
    while (strcmp(role_of(replica_port), "master") != 0 && mclock_ms() - t0 < 10000)
        mclock_sleep_ms(50);
    ck_assert_str_eq(role_of(replica_port), "master");
    int64_t promoted = mclock_ms();

    int moved = 0, to_old = 0;
    while (!moved && mclock_ms() - promoted < 5000) {
        if (harness_http(app_port, "GET", path, NULL, NULL, &r) == 200 &&
            strcmp(harness_json_str(r.body, "status"), "sold") == 0) {
            moved = sold_at(replica_port, r.body);
            to_old += !moved;
        }
        if (!moved) mclock_sleep_ms(100);
    }
    fprintf(stderr,
            "check_ha: sales moved %lld ms after the promotion (%d went to the old "
            "master meanwhile)\n",
            (long long)(mclock_ms() - promoted), to_old);
    ck_assert_msg(moved, "sales still go elsewhere 5 s after the promotion");
    ck_assert_msg(strcmp(role_of(master_port), "master") == 0,
                  "the old master was demoted already: this shows nothing");
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(harness_http(app_port, "GET", path, NULL, NULL, &r), 200);
        ck_assert_msg(sold_at(replica_port, r.body), "a sale went back: %s", r.body);
    }
}

START_TEST(test_a_failover_whose_old_master_stays_up_moves_sales_to_the_new_master) {
    failover_moves_sales("/inventory/sale/owner-lua");
}
END_TEST

/* The same for atomic sales, sent pipelined on the pipeline's own
 * connection: it follows the failover too. */
START_TEST(test_a_failover_whose_old_master_stays_up_moves_pipelined_sales_too) {
    failover_moves_sales("/inventory/sale/atomic");
}
END_TEST

/* total_error_replies of INFO stats at port: an AUTH or a SELECT sent to a
 * sentinel (which has neither a password nor databases) is an error reply. */
static long long error_replies(int port) {
    redisReply *r = harness_redis(port, "INFO stats");
    const char *p =
        r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "total_error_replies:") : NULL;
    long long n = p ? strtoll(p + 20, NULL, 10) : -1;
    freeReplyObject(r);
    return n;
}

START_TEST(test_the_password_and_database_apply_to_the_master_and_not_to_the_sentinels) {
    /* The sentinels and the replica learn the master's password first. */
    for (int i = 0; i < NSENTINELS; i++)
        freeReplyObject(
            harness_redis(sentinel_port[i], "SENTINEL SET mymaster auth-pass s3cret-pass"));
    freeReplyObject(harness_redis(replica_port, "CONFIG SET masterauth s3cret-pass"));
    freeReplyObject(harness_redis(master_port, "CONFIG SET requirepass s3cret-pass"));
    long long errors[NSENTINELS];
    for (int i = 0; i < NSENTINELS; i++) {
        errors[i] = error_replies(sentinel_port[i]);
        ck_assert_int_ge(errors[i], 0);
    }
    char nodes[160];
    snprintf(nodes, sizeof(nodes), "redis.sentinel.nodes=127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             sentinel_port[0], sentinel_port[1], sentinel_port[2]);
    const char *sets[] = {nodes, "redis.password=s3cret-pass", "redis.database=2",
                          "redis.timeout=500", NULL};
    app_start(sets);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r),
                     200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    /* The sale is in database 2 of the master, reached with the password. */
    redisContext *c = redisConnect("127.0.0.1", master_port);
    ck_assert(c && !c->err);
    freeReplyObject(redisCommand(c, "AUTH s3cret-pass"));
    freeReplyObject(redisCommand(c, "SELECT 2"));
    redisReply *stock = redisCommand(c, "GET inventory001");
    long long in_db2 = stock && stock->type == REDIS_REPLY_STRING ? atoll(stock->str) : -1;
    freeReplyObject(stock);
    freeReplyObject(redisCommand(c, "SELECT 0"));
    redisReply *db0 = redisCommand(c, "EXISTS inventory001");
    long long in_db0 = db0 && db0->type == REDIS_REPLY_INTEGER ? db0->integer : -1;
    freeReplyObject(db0);
    redisFree(c);
    ck_assert_int_eq(in_db2, 199);
    ck_assert_int_eq(in_db0, 0);
    /* No sentinel was sent the password or the database. */
    for (int i = 0; i < NSENTINELS; i++)
        ck_assert_msg(error_replies(sentinel_port[i]) == errors[i],
                      "sentinel %d answered %lld errors "
                      "(AUTH or SELECT sent to it?)",
                      i, error_replies(sentinel_port[i]) - errors[i]);
}
END_TEST

START_TEST(test_a_sentinel_that_names_a_replica_as_master_gets_no_connection) {
    /* A fourth sentinel, alone, told that the replica is the master of
     * "stale": it names the replica in get-master-addr-by-name, and ROLE
     * there says "slave". (Its own name keeps it out of the others' talk
     * about mymaster.) */
    ck_assert_int_eq(sentinel_start("stale", replica_port, 1, 60000, &sentinel_pid[NSENTINELS],
                                    &sentinel_port[NSENTINELS]),
                     0);
    char nodes[96];
    snprintf(nodes, sizeof(nodes), "redis.sentinel.nodes=127.0.0.1:%d", sentinel_port[NSENTINELS]);
    const char *sets[] = {nodes, "redis.sentinel.master=stale", "redis.timeout=500", NULL};
    app_port = harness_free_port();
    app_pid = harness_inventoryd_start(app_port, sets);
    ck_assert_int_gt(app_pid, 0);
    struct httpc_response r;
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r),
                     503);
    char want[96];
    snprintf(want, sizeof(want), "127.0.0.1:%d is a slave, not a master", replica_port);
    ck_assert_msg(strstr(r.body, want) != NULL, "answer: %s", r.body);
    snprintf(want, sizeof(want), "via sentinels 127.0.0.1:%d", sentinel_port[NSENTINELS]);
    ck_assert_msg(strstr(r.body, want) != NULL, "answer: %s", r.body);
    ck_assert_int_eq(harness_http(app_port, "GET", "/healthz", NULL, NULL, &r), 503);
    /* Nothing was written to the replica's data set. */
    ck_assert_int_eq(harness_redis_int(replica_port, "EXISTS RedisDistributedLock"), 0);
}
END_TEST

START_TEST(test_with_no_sentinel_reachable_a_sale_fails_at_once_naming_every_sentinel) {
    int a = harness_free_port(), b = harness_free_port();
    char nodes[96];
    snprintf(nodes, sizeof(nodes), "redis.sentinel.nodes=127.0.0.1:%d,127.0.0.1:%d", a, b);
    const char *sets[] = {nodes, "redis.timeout=500", NULL};
    app_port = harness_free_port();
    app_pid = harness_inventoryd_start(app_port, sets);
    ck_assert_int_gt(app_pid, 0);
    struct httpc_response r;
    int64_t t0 = mclock_ms();
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale", NULL, NULL, &r), 503);
    ck_assert_int_lt(mclock_ms() - t0, 1000);
    char want[96];
    snprintf(want, sizeof(want), "via sentinels 127.0.0.1:%d,127.0.0.1:%d", a, b);
    ck_assert_msg(strstr(r.body, "no sentinel answered") && strstr(r.body, want), "answer: %s",
                  r.body);
}
END_TEST

START_TEST(test_a_malformed_sentinel_list_stops_the_start_naming_the_key) {
    char out[] = "/tmp/check-ha-err-XXXXXX";
    int fd = mkstemp(out);
    ck_assert_int_ge(fd, 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        execl(INVENTORYD_BIN, INVENTORYD_BIN, "--set", "redis.sentinel.nodes=127.0.0.1:1,nope",
              "--check-config", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    char buf[512] = "";
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(out);
    ck_assert_int_eq(WEXITSTATUS(st), 2);
    ck_assert_msg(strstr(buf, "--set: redis.sentinel.nodes: 'nope' is not host:port"), "stderr: %s",
                  buf);
}
END_TEST

/* ---- SyncReplicas --------------------------------------------------------- */

static void setup_sync(void) {
    setup_common();
    char rp[32], rl[64];
    snprintf(rp, sizeof(rp), "redis.port=%d", master_port);
    /* redlock's one master is the same Redis, with the same replica. */
    snprintf(rl, sizeof(rl), "redlock.nodes=127.0.0.1:%d", master_port);
    /* A 2 s TTL: the Redlock master votes once it has been up that long. */
    const char *sets[] = {rp,  rl, "lock.sync-replicas=1", "redis.timeout=500", "lock.ttl-ms=2000",
                          NULL};
    app_start(sets);
}

START_TEST(test_a_lock_waits_for_its_replica_and_reports_a_frozen_one_as_a_shortfall) {
    struct httpc_response r;
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r),
                     200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(harness_json_num(r.body, "lock.replicas.wanted"), 1);
    ck_assert_msg(harness_json_num(r.body, "lock.replicas.acked") == 1, "answer: %s", r.body);
    ck_assert_int_eq(metric("inventoryd_lock_replica_shortfalls_total", "owner-lua"), 0);

    kill(replica_pid, SIGSTOP);
    replica_stopped = 1;
    int64_t t0 = mclock_ms();
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r),
                     200);
    int64_t took = mclock_ms() - t0;
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_int_eq(harness_json_num(r.body, "lock.replicas.wanted"), 1);
    ck_assert_msg(harness_json_num(r.body, "lock.replicas.acked") == 0, "answer: %s", r.body);
    /* WAIT gave up after redis.timeout, and the connection survived it. */
    ck_assert_int_ge(took, 450);
    ck_assert_int_lt(took, 1500);
    ck_assert_int_ge(harness_json_num(r.body, "lock.wait_ms"), 450);
    ck_assert_int_eq(metric("inventoryd_lock_replica_shortfalls_total", "owner-lua"), 1);
    ck_assert_int_eq(metric("inventoryd_lock_replica_shortfalls_total", "watchdog"), 0);

    kill(replica_pid, SIGCONT);
    replica_stopped = 0;
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale/owner-lua", NULL, NULL, &r),
                     200);
    ck_assert_msg(harness_json_num(r.body, "lock.replicas.acked") == 1, "answer: %s", r.body);
    ck_assert_int_eq(metric("inventoryd_lock_replica_shortfalls_total", "owner-lua"), 1);
    ck_assert_int_eq(audit("sold"), 3);
    ck_assert_int_eq(audit("sold_twice"), 0);
}
END_TEST

START_TEST(test_a_killed_replica_is_a_shortfall_and_sales_without_a_redis_lock_do_not_wait) {
    struct httpc_response r;
    harness_stop(replica_pid);
    replica_pid = 0;
    ck_assert_int_eq(harness_http(app_port, "GET", "/inventory/sale/redisson", NULL, NULL, &r),
                     200);
    ck_assert_str_eq(harness_json_str(r.body, "status"), "sold");
    ck_assert_msg(harness_json_num(r.body, "lock.replicas.acked") == 0, "answer: %s", r.body);
    ck_assert_int_eq(metric("inventoryd_lock_replica_shortfalls_total", "redisson"), 1);

    /* No lock in Redis, nothing to replicate: no WAIT, no "replicas". And
     * redlock, whose safety is its quorum of masters, sends none either. */
    const char *none[] = {"/inventory/sale/atomic", "/inventory/sale/local", "/inventory/sale/none",
                          "/inventory/sale/redlock"};
    long long waits = harness_redis_calls(master_port, "wait");
    ck_assert_int_ge(waits, 1); /* redisson's, above */
    ck_assert_int_eq(harness_redis_wait_uptime(master_port, 2), 0); /* so that redlock votes */
    for (int i = 0; i < 4; i++) {
        int64_t t0 = mclock_ms();
        ck_assert_int_eq(harness_http(app_port, "GET", none[i], NULL, NULL, &r), 200);
        ck_assert_msg(strcmp(harness_json_str(r.body, "status"), "sold") == 0, "%s: %s", none[i],
                      r.body);
        ck_assert_int_lt(mclock_ms() - t0, 400);
        ck_assert_msg(strstr(r.body, "\"replicas\"") == NULL, "answer: %s", r.body);
        ck_assert_msg(harness_redis_calls(master_port, "wait") == waits, "%s sent a WAIT", none[i]);
    }
}
END_TEST

Suite *ha_suite(void) {
    Suite *s = suite_create("ha");
    TCase *sen = tcase_create("Sentinel");
    tcase_add_checked_fixture(sen, setup_sentinel, teardown);
    tcase_set_timeout(sen, 90);
    tcase_add_test(sen, test_a_killed_master_fails_over_and_sales_go_on_at_the_promoted_replica);
    tcase_add_test(sen, test_a_failover_whose_old_master_stays_up_moves_sales_to_the_new_master);
    tcase_add_test(sen, test_a_failover_whose_old_master_stays_up_moves_pipelined_sales_too);
    tcase_add_test(sen,
                   test_the_password_and_database_apply_to_the_master_and_not_to_the_sentinels);
    tcase_add_test(sen, test_a_sentinel_that_names_a_replica_as_master_gets_no_connection);
    tcase_add_test(sen, test_with_no_sentinel_reachable_a_sale_fails_at_once_naming_every_sentinel);
    tcase_add_test(sen, test_a_malformed_sentinel_list_stops_the_start_naming_the_key);
    suite_add_tcase(s, sen);
    TCase *sync = tcase_create("SyncReplicas");
    tcase_add_checked_fixture(sync, setup_sync, teardown);
    tcase_set_timeout(sync, 60);
    tcase_add_test(sync, test_a_lock_waits_for_its_replica_and_reports_a_frozen_one_as_a_shortfall);
    tcase_add_test(sync,
                   test_a_killed_replica_is_a_shortfall_and_sales_without_a_redis_lock_do_not_wait);
    suite_add_tcase(s, sync);
    return s;
}
