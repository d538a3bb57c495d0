/* harness.c -- real servers for the tests (see harness.h). Every process is
 * started with fork/exec, remembered by pid, and stopped by that pid. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "harness.h"
#include "mclock.h"

int harness_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
}

int harness_wait_port(int port, int timeout_ms) {
    int64_t deadline = mclock_ms() + timeout_ms;
    do {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(fd);
        if (ok) return 0;
        mclock_sleep_ms(20);
    } while (mclock_ms() < deadline);
    return -1;
}

/* Runs argv in a child; quiet sends its stdout to /dev/null. */
static pid_t spawn(char *const argv[], int quiet) {
    pid_t pid = fork();
    if (pid == 0) {
        /* Not our test's signals: the child gets the default dispositions. */
        signal(SIGPIPE, SIG_DFL);
        if (quiet && !freopen("/dev/null", "w", stdout)) _exit(127);
        execvp(argv[0], argv);
        fprintf(stderr, "harness: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

pid_t harness_redis_start(int port, int *port_out) {
    return harness_redis_start_args(port, port_out, NULL);
}

pid_t harness_redis_start_args(int port, int *port_out, const char *const *args) {
    if (port == 0) port = harness_free_port();
    char p[16];
    snprintf(p, sizeof(p), "%d", port);
    /* DEBUG (SLEEP, ...) is on: these servers are the tests' own. */
    char *argv[48] = {"redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
                      "--enable-debug-command", "yes", NULL};
    int n = 15;
    for (int i = 0; args && args[i] && n < 47; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    pid_t pid = spawn(argv, 1);
    if (pid < 0) return -1;
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

void harness_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int64_t deadline = mclock_ms() + 5000;
    while (mclock_ms() < deadline) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return;
        mclock_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

pid_t harness_inventoryd_start(int port, const char *const *sets) {
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
    pid_t pid = spawn(argv, 0);
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

static void client_free(void *c) {
    httpc_free(c);
}

static void client_key_make(void) {
    pthread_key_create(&client_key, client_free);
}

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

long long harness_redis_int(int port, const char *fmt, ...) {
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER) v = r->integer;
    else if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)) {
        char *end;
        long long x = strtoll(r->str, &end, 10);
        v = (*end == '\0' && end != r->str) ? x : 0;
    } else if (r && r->type == REDIS_REPLY_NIL) v = 0;
    freeReplyObject(r);
    redisFree(c);
    return v;
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

int harness_redis_wait_uptime(int port, int seconds) {
    int64_t deadline = mclock_ms() + (int64_t)seconds * 1000 + 3000;
    while (mclock_ms() < deadline) {
        redisReply *r = harness_redis(port, "INFO server");
        const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "uptime_in_seconds:") : NULL;
        long long up = p ? strtoll(p + 18, NULL, 10) : -1;
        freeReplyObject(r);
        if (up >= seconds) return 0;
        mclock_sleep_ms(50);
    }
    return -1;
}

long long harness_redis_calls(int port, const char *cmd) {
    redisReply *r = harness_redis(port, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return -1;
    }
    long long total = 0;
    char want[64];
    snprintf(want, sizeof(want), "cmdstat_%s:", cmd ? cmd : "");
    for (char *line = r->str; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, want, strlen(want)) != 0) continue;
        if (strncmp(line, "cmdstat_info:", 13) == 0 && !cmd) continue;   /* our own probes */
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

void harness_bg_join(struct harness_bg *b) {
    pthread_join(b->thread, NULL);
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
    return harness_http(*a_port, "POST", "/inventory/reset", NULL, "{\"stock\":200}", &r) == 200 ? 0 : -1;
}

double harness_audit(int port, const char *field) {
    struct httpc_response r;
    if (harness_http(port, "GET", "/inventory/audit", NULL, NULL, &r) != 200) return -1e9;
    return harness_json_num(r.body, field);
}
