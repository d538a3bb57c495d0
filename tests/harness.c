/* harness.c -- real servers for the tests (see harness.h). Every process is
 * started with fork/exec, remembered by pid, and stopped by that pid. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <mysql.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "harness.h"
#include "mclock.h"

int harness_wait_port(int port, int timeout_ms) {
    int64_t deadline = mclock_ms() + timeout_ms;
    do {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(fd);
        if (ok) return 0;
        mclock_sleep_ms(20);
    } while (mclock_ms() < deadline);
    return -1;
}

/* Runs argv in a child; quiet sends its stdout to /dev/null; log, when
 * not NULL, takes both its stdout and its stderr. */
static pid_t spawn_to(char *const argv[], int quiet, const char *log) {
    pid_t pid = fork();
    if (pid == 0) {
        /* Not our test's signals: the child gets the default dispositions. */
        signal(SIGPIPE, SIG_DFL);
        if (quiet && !freopen("/dev/null", "w", stdout)) _exit(127);
        if (log && (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0)) _exit(127);
        execvp(argv[0], argv);
        fprintf(stderr, "harness: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

static pid_t spawn(char *const argv[], int quiet) { return spawn_to(argv, quiet, NULL); }

/* Where the redis-server on a port keeps its RDB file. Without --save a
 * server never writes one, but a replica does (the master's snapshot, on a
 * full sync), and every server loads the one in its directory at start-up:
 * left in the working directory, it would hand the next test's Redis the
 * data of an earlier one. So each port has its own file, removed before a
 * server starts and after it stops. */
static void rdb_path(int port, char *buf, size_t len) {
    snprintf(buf, len, "/tmp/inventoryd-harness-%d.rdb", port);
}

static struct {
    pid_t pid;
    int port;
} redis_ports[128];

pid_t harness_redis_start(int port, int *port_out) {
    return harness_redis_start_args(port, port_out, NULL);
}

pid_t harness_redis_start_args(int port, int *port_out, const char *const *args) {
    if (port == 0) port = harness_free_port();
    char p[16], rdb[96], dbfile[64];
    snprintf(p, sizeof(p), "%d", port);
    rdb_path(port, rdb, sizeof(rdb));
    snprintf(dbfile, sizeof(dbfile), "%s", strrchr(rdb, '/') + 1);
    unlink(rdb);
    /* DEBUG (SLEEP, ...) is on: these servers are the tests' own. */
    char *argv[48] = {"redis-server",
                      "--port",
                      p,
                      "--bind",
                      "127.0.0.1",
                      "--save",
                      "",
                      "--appendonly",
                      "no",
                      "--daemonize",
                      "no",
                      "--loglevel",
                      "warning",
                      "--dir",
                      "/tmp",
                      "--dbfilename",
                      dbfile,
                      "--enable-debug-command",
                      "yes",
                      NULL};
    int n = 19;
    for (int i = 0; args && args[i] && n < 47; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    pid_t pid = spawn(argv, 1);
    if (pid < 0) return -1;
    for (size_t i = 0; i < sizeof(redis_ports) / sizeof(redis_ports[0]); i++)
        if (redis_ports[i].pid == 0) {
            redis_ports[i].pid = pid;
            redis_ports[i].port = port;
            break;
        }
    int64_t deadline = mclock_ms() + 5000;
    while (mclock_ms() < deadline) {
        {
            redisContext *c = redisConnect("127.0.0.1", port);
            int up = c && !c->err;
            redisFree(c);
            if (up) {
                if (port_out) *port_out = port;
                return pid;
            }
        }
        mclock_sleep_ms(20);
    }
    harness_stop(pid);
    return -1;
}

/* Removes the RDB file of the redis-server pid, if the harness started it. */
static void rdb_forget(pid_t pid) {
    for (size_t i = 0; i < sizeof(redis_ports) / sizeof(redis_ports[0]); i++)
        if (redis_ports[i].pid == pid) {
            char rdb[96];
            rdb_path(redis_ports[i].port, rdb, sizeof(rdb));
            unlink(rdb);
            redis_ports[i].pid = 0;
        }
}

static int port_bindable(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

/* At random in 23000..29999: below the ephemeral range (32768 and up on
 * Linux), where no outgoing connection takes the port between the pick and
 * the server's bind, and clear of the cluster ports and their bus ports
 * (20000..22767 and 30000..32767, below). The last picks of this thread
 * are not handed out again, since a caller may pick several before it
 * starts anything on them. */
int harness_free_port(void) {
    static __thread unsigned seed;
    static __thread int recent[32];
    static __thread unsigned nrecent;
    if (!seed) seed = ((unsigned)getpid() * 2654435761u) ^ (unsigned)mclock_us() ^ 1u;
    for (int i = 0; i < 500; i++) {
        int port = 23000 + (int)((unsigned)rand_r(&seed) % 7000u), again = 0;
        for (int k = 0; k < 32; k++) again |= recent[k] == port;
        if (again || !port_bindable(port)) continue;
        recent[nrecent++ % 32] = port;
        return port;
    }
    return -1;
}

int harness_free_cluster_port(void) {
    for (int i = 0; i < 200; i++) {
        /* 20000..22767: the bus port is then 30000..32767, below the
         * ephemeral range, so no outgoing connection takes it meanwhile. */
        int port = 20000 + (int)(((unsigned)getpid() * 7919u + (unsigned)mclock_ms() * 31u +
                                  (unsigned)i * 104729u) %
                                 2768u);
        if (port_bindable(port) && port_bindable(port + 10000)) return port;
    }
    return -1;
}

/* Every node says cluster_state:ok and knows all n nodes. */
static int cluster_settled(const int *ports, int n) {
    for (int i = 0; i < n; i++) {
        redisReply *r = harness_redis(ports[i], "CLUSTER INFO");
        int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok");
        char want[48];
        snprintf(want, sizeof(want), "cluster_known_nodes:%d\r", n);
        ok = ok && strstr(r->str, want);
        if (r) freeReplyObject(r);
        if (!ok) return 0;
    }
    return 1;
}

int harness_cluster_start(int masters, int replicas, int *ports, pid_t *pids) {
    int n = masters * (1 + replicas);
    char cmd[2048];
    int len = snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
    for (int i = 0; i < n; i++) pids[i] = -1;
    for (int i = 0; i < n; i++) {
        char conf[64];
        ports[i] = harness_free_cluster_port();
        snprintf(conf, sizeof(conf), "inventoryd-nodes-%d.conf", ports[i]);
        char path[96];
        snprintf(path, sizeof(path), "/tmp/%s", conf);
        unlink(path);
        const char *args[] = {"--cluster-enabled",
                              "yes",
                              "--cluster-config-file",
                              conf,
                              "--cluster-node-timeout",
                              "2000",
                              "--repl-diskless-sync-delay",
                              "0",
                              NULL};
        if (ports[i] < 0 || (pids[i] = harness_redis_start_args(ports[i], NULL, args)) < 0)
            goto fail;
        len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, " 127.0.0.1:%d", ports[i]);
    }
    snprintf(cmd + len, sizeof(cmd) - (size_t)len,
             " --cluster-replicas %d --cluster-yes >/dev/null 2>&1", replicas);
    if (system(cmd) != 0) goto fail;
    for (int64_t deadline = mclock_ms() + 30000; mclock_ms() < deadline; mclock_sleep_ms(100))
        if (cluster_settled(ports, n)) return 0;
fail:
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) harness_stop(pids[i]);
    return -1;
}

void harness_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int64_t deadline = mclock_ms() + 5000;
    while (mclock_ms() < deadline) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            rdb_forget(pid);
            return;
        }
        mclock_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    rdb_forget(pid);
}

pid_t harness_inventoryd_start(int port, const char *const *sets) {
    return harness_inventoryd_start_logged(port, sets, NULL);
}

pid_t harness_inventoryd_start_logged(int port, const char *const *sets, const char *log_path) {
    char *argv[64];
    int n = 0;
    char portset[32];
    snprintf(portset, sizeof(portset), "server.port=%d", port);
    argv[n++] = INVENTORYD_BIN;
    argv[n++] = "--set";
    argv[n++] = portset;
    for (int i = 0; sets && sets[i] && n < 60; i++) {
        argv[n++] = "--set";
        argv[n++] = (char *)sets[i];
    }
    argv[n] = NULL;
    pid_t pid = spawn_to(argv, 0, log_path);
    if (pid < 0) return -1;
    if (harness_wait_port(port, 5000) < 0) {
        harness_stop(pid);
        return -1;
    }
    return pid;
}

/* Each thread's last client, kept so its answer's body stays readable, and
 * freed when the thread exits (or at its next request). */
static pthread_key_t client_key;
static pthread_once_t client_key_once = PTHREAD_ONCE_INIT;

static void client_free(void *c) { httpc_free(c); }

static void client_key_make(void) { pthread_key_create(&client_key, client_free); }

int harness_http(int port, const char *method, const char *path, const char *headers,
                 const char *body, struct httpc_response *resp) {
    pthread_once(&client_key_once, client_key_make);
    httpc_free(pthread_getspecific(client_key));
    struct httpc *last_client = httpc_create("127.0.0.1", port, 30000);
    pthread_setspecific(client_key, last_client);
    memset(resp, 0, sizeof(*resp));
    if (httpc_request(last_client, method, path, headers, body, resp) < 0) {
        fprintf(stderr, "harness: %s %s: %s\n", method, path, httpc_errstr(last_client));
        return 0;
    }
    return resp->status;
}

static long long redis_vint(int port, const char *fmt, va_list ap) {
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisReply *r = redisvCommand(c, fmt, ap);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)) {
        char *end;
        long long x = strtoll(r->str, &end, 10);
        v = (*end == '\0' && end != r->str) ? x : 0;
    } else if (r && r->type == REDIS_REPLY_NIL)
        v = 0;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

long long harness_redis_int(int port, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    long long v = redis_vint(port, fmt, ap);
    va_end(ap);
    return v;
}

int harness_redis_until(int port, long long want, int limit_ms, const char *fmt, ...) {
    int64_t end = mclock_ms() + limit_ms;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        long long v = redis_vint(port, fmt, ap);
        va_end(ap);
        if (v == want) return 1;
        if (mclock_ms() > end) return 0;
        mclock_sleep_ms(5);
    }
}

redisReply *harness_redis(int port, const char *fmt, ...) {
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        redisFree(c);
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

redisContext *harness_redis_sleep_begin(int port, const char *seconds) {
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *pong = c && !c->err ? redisCommand(c, "PING") : NULL;
    int done = 0, ok = pong && redisAppendCommand(c, "DEBUG SLEEP %s", seconds) == REDIS_OK;
    freeReplyObject(pong);
    while (ok && !done) ok = redisBufferWrite(c, &done) == REDIS_OK;
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

int harness_redis_sleep_end(redisContext *c) {
    void *r = NULL;
    int ok = c && redisGetReply(c, &r) == REDIS_OK;
    freeReplyObject(r);
    redisFree(c);
    return ok ? 0 : -1;
}

int harness_redis_wait_uptime(int port, int seconds) {
    int64_t deadline = mclock_ms() + (int64_t)seconds * 1000 + 3000;
    while (mclock_ms() < deadline) {
        redisReply *r = harness_redis(port, "INFO server");
        const char *p =
            r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "uptime_in_seconds:") : NULL;
        long long up = p ? strtoll(p + 18, NULL, 10) : -1;
        freeReplyObject(r);
        if (up >= seconds) return 0;
        mclock_sleep_ms(50);
    }
    return -1;
}

long long harness_subscribers(int port, const char *channel) {
    redisReply *n = harness_redis(port, "PUBSUB NUMSUB %s", channel);
    long long count = n && n->type == REDIS_REPLY_ARRAY && n->elements == 2 &&
                              n->element[1]->type == REDIS_REPLY_INTEGER
                          ? n->element[1]->integer
                          : -1;
    freeReplyObject(n);
    return count;
}

long long harness_redis_calls(int port, const char *cmd) {
    redisReply *r = harness_redis(port, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return -1;
    }
    long long total = 0;
    char want[64];
    snprintf(want, sizeof(want), cmd ? "cmdstat_%s:" : "cmdstat_", cmd ? cmd : "");
    for (char *line = r->str; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, want, strlen(want)) != 0) continue;
        if (strncmp(line, "cmdstat_info:", 13) == 0 && !cmd) continue; /* our own probes */
        char *calls = strstr(line, "calls=");
        if (calls) total += strtoll(calls + 6, NULL, 10);
    }
    freeReplyObject(r);
    return total;
}

static void *bg_main(void *arg) {
    struct harness_bg *b = arg;
    mclock_sleep_ms(b->delay_ms);
    struct httpc_response r;
    b->sent_ms = mclock_ms();
    b->status = harness_http(b->port, "GET", b->path, NULL, NULL, &r);
    b->took_ms = mclock_ms() - b->sent_ms;
    snprintf(b->body, sizeof(b->body), "%s", r.body ? r.body : "");
    return NULL;
}

void harness_bg_start(struct harness_bg *b, int port, const char *path, int delay_ms) {
    memset(b, 0, sizeof(*b));
    b->port = port;
    snprintf(b->path, sizeof(b->path), "%s", path);
    b->delay_ms = delay_ms;
    pthread_create(&b->thread, NULL, bg_main, b);
}

void harness_bg_join(struct harness_bg *b) { pthread_join(b->thread, NULL); }

long harness_arrival(const char *body) {
    const char *order = harness_json_str(body, "order");
    const char *dash = strrchr(order, '-');
    return dash ? atol(dash + 1) : -1;
}

void harness_by_arrival(const struct harness_bg *b, int from, int n, int *rank) {
    for (int i = 0; i < n; i++) rank[i] = from + i;
    for (int i = 1; i < n; i++)
        for (int j = i;
             j > 0 && harness_arrival(b[rank[j]].body) < harness_arrival(b[rank[j - 1]].body);
             j--) {
            int t = rank[j];
            rank[j] = rank[j - 1];
            rank[j - 1] = t;
        }
}

int harness_served_in_arrival_order(const struct harness_bg *b, int from, int n, int top, char *why,
                                    size_t len) {
    int rank[64];
    if (n > 64) n = 64;
    for (int i = from; i < from + n; i++)
        if (b[i].status != 200) {
            snprintf(why, len, "sale %d: %d %s", i, b[i].status, b[i].body);
            return 0;
        }
    harness_by_arrival(b, from, n, rank);
    for (int r = 0; r < n; r++) {
        const char *body = b[rank[r]].body;
        if (harness_json_num(body, "unit") != top - r) {
            snprintf(why, len,
                     "the %d-th sale to come in (sale %d, order %s) sold unit %.0f, not %d: not "
                     "served in arrival order",
                     r + 1, rank[r], harness_json_str(body, "order"),
                     harness_json_num(body, "unit"), top - r);
            return 0;
        }
        if (r > 0 && harness_json_num(body, "lock.attempts") != 1) {
            snprintf(why, len, "sale %d contended while queued: %s", rank[r], body);
            return 0;
        }
    }
    return 1;
}

int harness_queued_before(const struct harness_bg *b, int from, int n, int64_t freed_ms, char *why,
                          size_t len) {
    int rank[64];
    if (n > 64) n = 64;
    harness_by_arrival(b, from, n, rank);
    for (int i = from; i < from + n; i++) {
        double wait = harness_json_num(b[i].body, "lock.wait_ms");
        /* it came in no later than its grant, which was no later than its answer */
        int64_t in_by = b[i].sent_ms + b[i].took_ms - (int64_t)(wait < 0 ? 0 : wait);
        if (wait < 0 || in_by >= freed_ms) {
            snprintf(why, len,
                     "fault missed its window: sale %d may have come in %lld ms after the lock was "
                     "freed (it waited %.0f ms): %s",
                     i, (long long)(in_by - freed_ms), wait, b[i].body);
            return 0;
        }
    }
    if (harness_json_num(b[rank[0]].body, "lock.attempts") < 2) {
        snprintf(why, len,
                 "fault missed its window: the first sale to come in never met the held lock: %s",
                 b[rank[0]].body);
        return 0;
    }
    return 1;
}

double harness_json_num(const char *body, const char *path) {
    cJSON *root = cJSON_Parse(body);
    const cJSON *o = root;
    char key[64];
    const char *p = path;
    while (o && *p) {
        size_t n = strcspn(p, ".");
        snprintf(key, sizeof(key), "%.*s", (int)n, p);
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        p += n + (p[n] == '.');
    }
    double v = cJSON_IsNumber(o) ? o->valuedouble : -1;
    cJSON_Delete(root);
    return v;
}

const char *harness_json_str(const char *body, const char *key) {
    static __thread char buf[256];
    cJSON *root = cJSON_Parse(body);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, key);
    snprintf(buf, sizeof(buf), "%s", cJSON_IsString(o) ? o->valuestring : "");
    cJSON_Delete(root);
    return buf;
}

int harness_pair_start(int redis_port, int ttl_ms, int wait_ms, const char *const *extra,
                       pid_t *a_pid, int *a_port, pid_t *b_pid, int *b_port) {
    char rp[32], ttl[32], wait[32];
    snprintf(rp, sizeof(rp), "redis.port=%d", redis_port);
    snprintf(ttl, sizeof(ttl), "lock.ttl-ms=%d", ttl_ms);
    snprintf(wait, sizeof(wait), "lock.wait-ms=%d", wait_ms);
    const char *sets[32] = {rp, ttl, wait, "faults.enabled=true"};
    int n = 4;
    for (int i = 0; extra && extra[i] && n < 31; i++) sets[n++] = extra[i];
    sets[n] = NULL;
    *a_port = harness_free_port();
    *a_pid = harness_inventoryd_start(*a_port, sets);
    *b_port = harness_free_port();
    *b_pid = harness_inventoryd_start(*b_port, sets);
    if (*a_pid <= 0 || *b_pid <= 0) return -1;
    struct httpc_response r;
    return harness_http(*a_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r) == 200
               ? 0
               : -1;
}

double harness_audit(int port, const char *field) {
    struct httpc_response r;
    if (harness_http(port, "GET", "/inventory/audit", NULL, NULL, &r) != 200) return -1e9;
    return harness_json_num(r.body, field);
}

struct harness_monitor {
    redisContext *c;
    int port;
};

struct harness_monitor *harness_monitor_start(int port) {
    struct harness_monitor *m = calloc(1, sizeof(*m));
    if (!m) return NULL;
    m->port = port;
    m->c = redisConnect("127.0.0.1", port);
    redisReply *r = m->c && !m->c->err ? redisCommand(m->c, "MONITOR") : NULL;
    int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    freeReplyObject(r);
    if (!ok) {
        redisFree(m->c);
        free(m);
        return NULL;
    }
    return m;
}

/* The end is marked by an ECHO of a word of our own, sent on another
 * connection: every command Redis ran before it is in the log, none after. */
char *harness_monitor_stop(struct harness_monitor *m) {
    if (!m) return NULL;
    char marker[64];
    snprintf(marker, sizeof(marker), "harness-monitor-end-%d-%lld", (int)getpid(),
             (long long)mclock_us());
    freeReplyObject(harness_redis(m->port, "ECHO %s", marker));
    size_t len = 0, cap = 4096;
    char *out = malloc(cap);
    struct timeval patience = {5, 0};
    redisSetTimeout(m->c, patience);
    void *v;
    int ended = 0;
    while (out && !ended && redisGetReply(m->c, &v) == REDIS_OK) {
        redisReply *r = v;
        if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING) {
            if (strstr(r->str, marker)) {
                ended = 1;
            } else {
                while (out && len + r->len + 2 > cap) {
                    char *bigger = realloc(out, cap *= 2);
                    if (!bigger) free(out);
                    out = bigger;
                }
                if (out) {
                    memcpy(out + len, r->str, r->len);
                    len += r->len;
                    out[len++] = '\n';
                }
            }
        }
        freeReplyObject(r);
    }
    if (out && !ended) {
        free(out);
        out = NULL;
    }
    if (out) out[len] = '\0';
    redisFree(m->c);
    free(m);
    return out;
}

int harness_lines(const char *log, const char *has, const char *const *but) {
    int n = 0;
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *l = strndup(line, len);
        int yes = l && (!has || strstr(l, has));
        for (int i = 0; yes && but && but[i]; i++) yes = strstr(l, but[i]) == NULL;
        n += yes;
        free(l);
        line = end ? end + 1 : NULL;
    }
    return n;
}

int harness_monitor_parse(const char *line, double *ts, char *addr, size_t addrlen,
                          const char **cmd) {
    char *end;
    double t = strtod(line, &end);
    if (end == line || strncmp(end, " [", 2) != 0) return -1;
    const char *who = strchr(end + 2, ' '); /* after the db number */
    const char *close = who ? strchr(who, ']') : NULL;
    if (!close) return -1;
    if (ts) *ts = t;
    if (addr) snprintf(addr, addrlen, "%.*s", (int)(close - who - 1), who + 1);
    if (cmd) *cmd = close[1] == ' ' ? close + 2 : close + 1;
    return 0;
}

int harness_redis_client_gone(int port, const char *addr) {
    redisReply *r = harness_redis(port, "CLIENT LIST");
    if (!r || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return -1;
    }
    char want[96];
    snprintf(want, sizeof(want), " addr=%s ", addr);
    int gone = strstr(r->str, want) == NULL;
    freeReplyObject(r);
    return gone;
}

const char *harness_script_sha(int port, const char *name) {
    static char sha[48];
    char path[512];
    sha[0] = '\0';
    snprintf(path, sizeof(path), "%s/src/lua/%s.lua", SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f) return sha;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[4096];
    size_t n;
    while (mem && (n = fread(buf, 1, sizeof(buf), f)) > 0) fwrite(buf, 1, n, mem);
    fclose(f);
    if (!mem) return sha;
    fclose(mem);
    redisReply *r = harness_redis(port, "SCRIPT LOAD %b", text, len);
    if (r && r->type == REDIS_REPLY_STRING) snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    free(text);
    return sha;
}

long long harness_metric(int port, const char *series) {
    struct httpc_response r;
    if (harness_http(port, "GET", "/metrics", NULL, NULL, &r) != 200 || !r.body) return -1;
    size_t n = strlen(series);
    for (const char *line = r.body; line && *line;) {
        if (strncmp(line, series, n) == 0 && line[n] == ' ') return strtoll(line + n + 1, NULL, 10);
        line = strchr(line, '\n');
        if (line) line++;
    }
    return -1;
}

int harness_refused(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int refused = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == ECONNREFUSED;
    close(fd);
    return refused;
}

/* Redisson's own scripts (RedissonLock), as a Redisson client sends them. */
static const char redisson_lock_script[] =
    "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], "
    "ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
static const char redisson_unlock_script[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "return nil;";

int harness_redisson_lock(int port, const char *key, const char *owner, int lease_ms) {
    redisReply *r =
        harness_redis(port, "EVAL %s 1 %s %d %s", redisson_lock_script, key, lease_ms, owner);
    int rc = !r ? -1 : r->type == REDIS_REPLY_NIL ? 1 : r->type == REDIS_REPLY_INTEGER ? 0 : -1;
    freeReplyObject(r);
    return rc;
}

int harness_redisson_unlock(int port, const char *key, const char *owner) {
    redisReply *r = harness_redis(port, "EVAL %s 2 %s redisson_lock__channel:{%s} 0 30000 %s",
                                  redisson_unlock_script, key, key, owner);
    int rc = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    freeReplyObject(r);
    return rc;
}

/* ---- ZooKeeper ------------------------------------------------------------ */

/* Where the ZooKeeper on a port keeps its config and data. */
static void zk_dir(int port, char *buf, size_t len) {
    snprintf(buf, len, "/tmp/inventoryd-harness-zk-%d", port);
}

void harness_zookeeper_wipe(int port) {
    char dir[96], cmd[128];
    zk_dir(port, dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "harness: %s failed\n", cmd);
}

int harness_zookeeper_4lw(int port, const char *word, char *buf, size_t len) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || len == 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    size_t off = 0;
    ssize_t n = -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        write(fd, word, strlen(word)) == (ssize_t)strlen(word))
        while (off + 1 < len && (n = read(fd, buf + off, len - 1 - off)) > 0) off += (size_t)n;
    close(fd);
    buf[off] = '\0';
    return n < 0 ? -1 : (int)off;
}

/* Whether the ZooKeeper at port answers "ruok" with "imok". */
static int zk_imok(int port) {
    char buf[16];
    return harness_zookeeper_4lw(port, "ruok", buf, sizeof(buf)) == 4 && strcmp(buf, "imok") == 0;
}

pid_t harness_zookeeper_start(int port, int *port_out) {
    if (port == 0) {
        port = harness_free_port();
        harness_zookeeper_wipe(port);
    }
    char dir[96], cfg[128], cmd[160];
    zk_dir(port, dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/data'", dir);
    if (port < 0 || system(cmd) != 0) return -1;
    snprintf(cfg, sizeof(cfg), "%s/zoo.cfg", dir);
    FILE *f = fopen(cfg, "w");
    if (!f) return -1;
    /* tickTime 500: sessions of 1 s (2 ticks) to 10 s (20 ticks). */
    fprintf(f,
            "tickTime=500\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,stat,cons,wchp\n"
            "maxClientCnxns=0\n",
            dir, port);
    fclose(f);
    /* java itself, not a wrapper script: the pid stopped is the JVM's. */
    char *argv[] = {"java",
                    "-Xmx128m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-cp",
                    "/usr/share/java/zookeeper.jar",
                    "org.apache.zookeeper.server.ZooKeeperServerMain",
                    cfg,
                    NULL};
    pid_t pid = spawn(argv, 1);
    if (pid < 0) return -1;
    for (int64_t deadline = mclock_ms() + 20000; mclock_ms() < deadline; mclock_sleep_ms(20)) {
        if (zk_imok(port)) {
            if (port_out) *port_out = port;
            return pid;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) return -1;
    }
    harness_stop(pid);
    return -1;
}

/* A short-lived session of the harness's own, connected, or NULL. */
static zhandle_t *zk_connect(int port) {
    char hosts[32];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", port);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zhandle_t *zh = zookeeper_init(hosts, NULL, 4000, NULL, NULL, 0);
    for (int64_t deadline = mclock_ms() + 5000; zh && mclock_ms() < deadline; mclock_sleep_ms(5))
        if (zoo_state(zh) == ZOO_CONNECTED_STATE) return zh;
    if (zh) zookeeper_close(zh);
    return NULL;
}

int harness_zookeeper_children(int port, const char *path, char *buf, size_t len) {
    zhandle_t *zh = zk_connect(port);
    if (!zh) return -1;
    struct String_vector v = {0, NULL};
    int rc = zoo_get_children(zh, path, 0, &v);
    int n = rc == ZOK ? v.count : rc == ZNONODE ? 0 : -1;
    size_t off = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; rc == ZOK && i < v.count && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s\n", v.data[i]);
        if (w > 0) off += (size_t)w;
    }
    deallocate_String_vector(&v);
    zookeeper_close(zh);
    return n;
}

/* ---- MariaDB ---------------------------------------------------------------- */

#define MARIADB_DIR_PREFIX "/tmp/inventoryd-mariadb."

/* Runs argv to its end with its output in log; its exit status, or -1. */
static int run_to_end(char *const argv[], const char *log) {
    pid_t pid = spawn_to(argv, 0, log);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The directory of a socket path, into dir. */
static void sock_dir(const char *sock, char *dir, size_t len) {
    snprintf(dir, len, "%s", sock);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
}

MYSQL *harness_mariadb_connect(int port) {
    MYSQL *m = mysql_init(NULL);
    unsigned int t = 2;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &t);
    if (m && mysql_real_connect(m, "127.0.0.1", "root", NULL, NULL, (unsigned int)port, NULL, 0))
        return m;
    mysql_close(m);
    return NULL;
}

long long harness_mariadb_int(MYSQL *m, const char *fmt, ...) {
    char q[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof(q), fmt, ap);
    va_end(ap);
    if (!m || mysql_query(m, q) != 0) return -1;
    MYSQL_RES *res = mysql_store_result(m);
    MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
    long long v = !row ? -1 : row[0] ? strtoll(row[0], NULL, 10) : -2;
    mysql_free_result(res);
    return v;
}

/* Starts mariadbd on dir's data; waits until it answers as root. */
static pid_t mariadb_serve(const char *dir, int port) {
    char datadir[160], portarg[32], sockarg[160], pidarg[160], errarg[160];
    snprintf(datadir, sizeof(datadir), "--datadir=%s/data", dir);
    snprintf(portarg, sizeof(portarg), "--port=%d", port);
    snprintf(sockarg, sizeof(sockarg), "--socket=%s/mysqld.sock", dir);
    snprintf(pidarg, sizeof(pidarg), "--pid-file=%s/mysqld.pid", dir);
    snprintf(errarg, sizeof(errarg), "--log-error=%s/error.log", dir);
    char *argv[] = {"mariadbd",
                    "--no-defaults",
                    datadir,
                    portarg,
                    sockarg,
                    pidarg,
                    errarg,
                    "--bind-address=127.0.0.1",
                    "--user=root",
                    "--skip-name-resolve",
                    "--innodb-buffer-pool-size=8M",
                    "--innodb-flush-log-at-trx-commit=2",
                    "--performance-schema=OFF",
                    "--open-files-limit=1024",
                    NULL};
    char log[160];
    snprintf(log, sizeof(log), "%s/stderr.log", dir); /* what it says before --log-error */
    pid_t pid = spawn_to(argv, 0, log);
    if (pid < 0) return -1;
    for (int64_t end = mclock_ms() + 10000; mclock_ms() < end; mclock_sleep_ms(20)) {
        MYSQL *m = harness_mariadb_connect(port);
        if (m) {
            mysql_close(m);
            return pid;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) return -1; /* it died */
    }
    harness_stop(pid);
    return -1;
}

static void mariadb_remove(const char *dir) {
    if (strncmp(dir, MARIADB_DIR_PREFIX, strlen(MARIADB_DIR_PREFIX)) != 0) return;
    char *argv[] = {"rm", "-rf", (char *)dir, NULL};
    run_to_end(argv, "/dev/null");
}

/* The data directory every test server starts from, made once by
 * mariadb-install-db (seconds on a busy machine) and copied for each
 * server (a fraction of one): /tmp/inventoryd-mariadb-template.<uid>.<the
 * mariadbd binary's mtime>/data, never served itself, so it stays as
 * installed. Made in a directory of its own and renamed into place, so two
 * test processes making it at once both end with one whole template.
 * 0, or -1. */
static int mariadb_template(char *path, size_t len) {
    struct stat st;
    if (stat("/usr/sbin/mariadbd", &st) != 0) return -1;
    snprintf(path, len, "/tmp/inventoryd-mariadb-template.%d.%lld", (int)getuid(),
             (long long)st.st_mtime);
    char data[200];
    snprintf(data, sizeof(data), "%s/data/mysql", path);
    if (stat(data, &st) == 0) return 0;
    char dir[] = MARIADB_DIR_PREFIX "XXXXXX";
    if (!mkdtemp(dir)) return -1;
    char datadir[160], log[160];
    snprintf(datadir, sizeof(datadir), "--datadir=%s/data", dir);
    snprintf(log, sizeof(log), "%s/install.log", dir);
    char *install[] = {"mariadb-install-db",
                       "--no-defaults",
                       datadir,
                       "--auth-root-authentication-method=normal",
                       "--skip-test-db",
                       "--user=root",
                       "--skip-name-resolve",
                       "--innodb-log-file-size=4M",
                       "--innodb-buffer-pool-size=8M",
                       NULL};
    if (run_to_end(install, log) != 0) {
        fprintf(stderr, "harness: mariadb-install-db failed; see %s\n", log);
        return -1;
    }
    if (rename(dir, path) != 0) mariadb_remove(dir); /* another process made it first */
    return stat(data, &st) == 0 ? 0 : -1;
}

pid_t harness_mariadb_start(int *port_out, char *sock, size_t socklen) {
    char template[160], from[200], dir[] = MARIADB_DIR_PREFIX "XXXXXX";
    if (mariadb_template(template, sizeof(template)) < 0 || !mkdtemp(dir)) return -1;
    snprintf(from, sizeof(from), "%s/data", template);
    char *copy[] = {"cp", "-a", from, dir, NULL};
    int port = harness_free_port();
    pid_t pid = run_to_end(copy, "/dev/null") == 0 && port > 0 ? mariadb_serve(dir, port) : -1;
    if (pid < 0) {
        fprintf(stderr, "harness: mariadb did not start; see %s\n", dir);
        return -1; /* the directory is left for its logs */
    }
    if (port_out) *port_out = port;
    snprintf(sock, socklen, "%s/mysqld.sock", dir);
    return pid;
}

pid_t harness_mariadb_restart(int port, const char *sock) {
    char dir[160];
    sock_dir(sock, dir, sizeof(dir));
    return mariadb_serve(dir, port);
}

void harness_mariadb_stop(pid_t pid, const char *sock, int remove) {
    harness_stop(pid);
    if (!remove || !sock || !sock[0]) return;
    char dir[160];
    sock_dir(sock, dir, sizeof(dir));
    mariadb_remove(dir);
}

struct cJSON *harness_lab_run(int port, const char *body, int timeout_ms, char *why, size_t len) {
    struct httpc_response r;
    int code = harness_http(port, "POST", "/lab/runs", NULL, body, &r);
    if (code != 202) {
        snprintf(why, len, "POST /lab/runs %s answered %d: %.200s", body, code, r.body);
        return NULL;
    }
    char path[64];
    snprintf(path, sizeof(path), "/lab/runs/%d", (int)harness_json_num(r.body, "id"));
    for (int64_t t0 = mclock_ms(); mclock_ms() - t0 < timeout_ms; mclock_sleep_ms(100)) {
        if (harness_http(port, "GET", path, NULL, NULL, &r) != 200) continue;
        cJSON *j = cJSON_Parse(r.body);
        const char *state = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "state"));
        if (state && strcmp(state, "running") != 0) return j;
        cJSON_Delete(j);
    }
    snprintf(why, len, "%s did not finish in %d ms", path, timeout_ms);
    return NULL;
}

int harness_lab_verdict(int port, const char *body, int timeout_ms, char *out, size_t len) {
    cJSON *j = harness_lab_run(port, body, timeout_ms, out, len);
    if (!j) return -1;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "verdict");
    snprintf(out, len, "%s: %s",
             v ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "result"))
               : cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "state")),
             v ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "evidence")) : "");
    cJSON_Delete(j);
    return 0;
}

/* A number of o (0 when absent). */
static double json_field(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* Why the run of session-lost did not go through its window, or NULL. */
static const char *session_lost_missed(const cJSON *run, char *why, size_t len) {
    const char *state = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(run, "state"));
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(run, "steps");
    const cJSON *a = cJSON_GetArrayItem(steps, 0), *b = cJSON_GetArrayItem(steps, 1);
    const cJSON *ans = cJSON_GetObjectItemCaseSensitive(a, "answer");
    const cJSON *ah = cJSON_GetObjectItemCaseSensitive(a, "hold");
    const cJSON *bh = cJSON_GetObjectItemCaseSensitive(b, "hold");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(run, "verdict");
    double ended = json_field(ans, "session_end_us");
    double answered = json_field(a, "sent_us") + json_field(a, "took_ms") * 1000;
    if (!state || strcmp(state, "done") != 0 ||
        !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(run, "faults_refused")))
        snprintf(why, len, "the run did not run as written: %s %s", state ? state : "?",
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(run, "error")));
    else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans, "session_ended")))
        snprintf(why, len, "fault missed its window: A's session was not ended: A answered %.300s",
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "word")));
    else if (!cJSON_IsObject(ah) || !cJSON_IsObject(bh))
        snprintf(why, len, "a sale of the run has no recorded hold");
    else if (json_field(ah, "granted_us") > ended || json_field(ans, "session_gone_us") < ended)
        snprintf(why, len, "A's session was not ended while A held the lock");
    else if (json_field(bh, "granted_us") < ended - 1000 ||
             json_field(bh, "granted_us") >= answered)
        snprintf(why, len,
                 "fault missed its window: B was granted %.0f us after A's session was ended, "
                 "A answered %.0f us after it",
                 json_field(bh, "granted_us") - ended, answered - ended);
    else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "window_reached")))
        snprintf(why, len, "the verdict says the window was not reached: %.300s",
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "evidence")));
    else
        return NULL;
    return why;
}

struct cJSON *harness_session_lost(int port, const char *strategy, char *why, size_t len) {
    char body[96];
    snprintf(body, sizeof(body), "{\"strategy\":\"%s\",\"scenario\":\"session-lost\"}", strategy);
    cJSON *run = harness_lab_run(port, body, 40000, why, len);
    if (run && session_lost_missed(run, why, len)) {
        char *all = cJSON_PrintUnformatted(run); /* for the reader of the failure */
        fprintf(stderr, "harness: session-lost with %s: %s\n", strategy, all ? all : "?");
        free(all);
        cJSON_Delete(run);
        return NULL;
    }
    return run;
}
