/* loadgen.c -- inventory-load, the bounded HTTP load driver of the demo and
 * the end-to-end tests: the JMeter plan of the original demo, in C.
 *
 * DESIGN
 * C client threads, each with its own keep-alive struct httpc, take request
 * numbers from one shared atomic counter until N requests were made in all.
 * Every thread waits at a barrier before its first request, so the load
 * starts at once rather than as threads happen to be created.
 *
 * Each answer is counted by the word in its JSON "status" field (sold,
 * sold_out, lock_timeout, backend_unavailable, anything else = other); a
 * request that got no HTTP answer is a transport error. Nothing is retried:
 * a sale sent twice would be two sales. Counters are per thread and summed
 * after the join; latencies go into one array indexed by request number, so
 * no thread ever waits for another. Times come from the monotonic clock.
 *
 * With --record FILE, what each client was told is kept too, one line per
 * request in request order, for a checker to set against the ledger:
 *   <wall-clock µs of the answer> <HTTP status, 0: none> <status word> <order> <unit>
 * ("-" for an order, 0 for a unit the answer did not carry).
 *
 * INVENTORY_LOAD_TOKEN, when set, is sent with every request as
 * "Authorization: Bearer <token>" (an instance's admin.token guards the
 * fault parameters, such as hold_ms): an environment variable, so that ps
 * does not show it. */
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "httpc.h"
#include "mclock.h"
#include "stats.h"

enum outcome {
    OUT_SOLD,
    OUT_SOLD_OUT,
    OUT_LOCK_TIMEOUT,
    OUT_BACKEND,
    OUT_OTHER,
    OUT_ERROR,
    OUT_COUNT
};

struct options {
    const char *host;
    int port;
    const char *path;
    const char *method;
    const char *body;
    int clients;
    long requests;
    int timeout_ms;
    int kv;
    const char *record;
    long max_s; /* 0: no bound; else no request begins after this */
    long error_pause_ms; /* after no answer or a 5xx, the client waits this */
    char *headers; /* extra header lines, or NULL (INVENTORY_LOAD_TOKEN) */
};

/* What one request was told (--record). */
struct told {
    long long answered_us;
    int status;
    enum outcome out;
    long long unit;
    char order[48];
};

struct worker {
    pthread_t tid;
    const struct options *opt;
    long counts[OUT_COUNT];
    char first_error[200]; /* the first transport error this thread saw */
    char first_other[200]; /* the first "other" answer this thread saw */
};

static atomic_long next_request;
static double started_ms; /* when the clients were let go */
static double *latency_ms; /* one slot per request number */
static struct told *told; /* one slot per request number, with --record */
static pthread_barrier_t start_line;

static double now_ms(void) { return (double)mclock_us() / 1e3; }

/* The word in "status":"<word>", tolerating blanks around the colon.
 * Returns OUT_OTHER when there is none. */
static enum outcome classify(const char *body) {
    const char *p = strstr(body, "\"status\"");
    if (p == NULL) return OUT_OTHER;
    p += 8;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p++ != ':') return OUT_OTHER;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p++ != '"') return OUT_OTHER;
    static const struct {
        const char *word;
        enum outcome out;
    } words[] = {
        {"sold\"", OUT_SOLD},
        {"sold_out\"", OUT_SOLD_OUT},
        {"lock_timeout\"", OUT_LOCK_TIMEOUT},
        {"backend_unavailable\"", OUT_BACKEND},
    };
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strncmp(p, words[i].word, strlen(words[i].word)) == 0) return words[i].out;
    return OUT_OTHER;
}

/* Keeps what request i was told, from its answer's JSON. */
static void remember(long i, int rc, const struct httpc_response *resp, enum outcome out) {
    struct told *t = &told[i];
    t->answered_us = mclock_wall_us();
    t->status = rc == 0 ? resp->status : 0;
    t->out = out;
    snprintf(t->order, sizeof(t->order), "-");
    if (rc != 0 || resp->body == NULL) return;
    const char *o = strstr(resp->body, "\"order\":\"");
    if (o != NULL) {
        o += 9;
        size_t n = strcspn(o, "\"");
        snprintf(t->order, sizeof(t->order), "%.*s", (int)(n < 47 ? n : 47), o);
    }
    const char *u = strstr(resp->body, "\"unit\":");
    if (u != NULL) t->unit = strtoll(u + 7, NULL, 10);
}

static const char *const outcome_words[OUT_COUNT] = {
    "sold", "sold_out", "lock_timeout", "backend_unavailable", "other", "error",
};

/* Writes what every request was told to path; 0, or -1 with a message. */
static int write_record(const char *path, long n) {
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    for (long i = 0; i < n; i++)
        fprintf(f, "%lld %d %s %s %lld\n", told[i].answered_us, told[i].status,
                outcome_words[told[i].out], told[i].order, told[i].unit);
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

static void *worker_run(void *arg) {
    struct worker *w = arg;
    const struct options *o = w->opt;
    struct httpc *h = httpc_create(o->host, o->port, o->timeout_ms);
    struct httpc_response resp;

    pthread_barrier_wait(&start_line);
    if (h == NULL) {
        snprintf(w->first_error, sizeof(w->first_error), "out of memory");
        return NULL;
    }
    for (;;) {
        if (o->max_s > 0 && now_ms() - started_ms >= (double)o->max_s * 1e3) break;
        long i = atomic_fetch_add(&next_request, 1);
        if (i >= o->requests) break;
        double t0 = now_ms();
        int rc = httpc_request(h, o->method, o->path, o->headers, o->body, &resp);
        latency_ms[i] = now_ms() - t0;
        enum outcome out = rc == 0 ? classify(resp.body) : OUT_ERROR;
        w->counts[out]++;
        if (told != NULL) remember(i, rc, &resp, out);
        if (out == OUT_ERROR && w->first_error[0] == '\0')
            snprintf(w->first_error, sizeof(w->first_error), "%s", httpc_errstr(h));
        if (out == OUT_OTHER && w->first_other[0] == '\0')
            snprintf(w->first_other, sizeof(w->first_other), "HTTP %d %.150s", resp.status,
                     resp.body);
        if (o->error_pause_ms > 0 && (rc != 0 || resp.status >= 500)) {
            /* a client backing off, as real ones do: without it a dead
             * instance's refusals would be most of the requests sent */
            struct timespec ts = {o->error_pause_ms / 1000, (o->error_pause_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    httpc_free(h);
    return NULL;
}

static void usage(FILE *f) {
    fprintf(f, "usage: inventory-load [options]\n"
               "  --host HOST         target host (127.0.0.1)\n"
               "  --port PORT         target port (8080)\n"
               "  --path PATH         request path (/inventory/sale/atomic)\n"
               "  --method METHOD     GET or POST (GET)\n"
               "  --body JSON         request body (none)\n"
               "  --clients C         concurrent clients, one thread and keep-alive\n"
               "                      connection each (200)\n"
               "  --requests N        requests in all, shared by the clients (3000)\n"
               "  --timeout-ms MS     per-read/write I/O timeout (30000)\n"
               "  --format text|kv    human summary, or one key=value line (text)\n"
               "  --max-s S           begin no request after S seconds (no bound)\n"
               "  --error-pause-ms MS after a request with no answer or a 5xx answer,\n"
               "                      its client waits MS before the next (0)\n"
               "  --record FILE       what each request was told, one line each:\n"
               "                      answered_us http_status status order unit\n"
               "Environment: INVENTORY_LOAD_TOKEN, when set, goes with every request as\n"
               "\"Authorization: Bearer <token>\" (the instances' admin.token).\n"
               "Answers are counted by their JSON \"status\" word; a request that got\n"
               "no answer is an error and is never retried. Exit status: 0 when the\n"
               "run completed, 1 when no request got any answer, 2 on bad usage.\n");
}

/* What getopt left, and the path. -1 to go on, or the exit status. */
static int check_options(int argc, char **argv, const struct options *o) {
    if (optind < argc) {
        fprintf(stderr, "inventory-load: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (o->path[0] != '/') {
        fprintf(stderr, "inventory-load: --path must start with '/'\n");
        return 2;
    }
    return -1;
}

/* Reads the command line into o. -1 to go on, or the exit status. */
static int parse_options(int argc, char **argv, struct options *o) {
    static const struct option longopts[] = {
        {"host", required_argument, NULL, 'H'},
        {"port", required_argument, NULL, 'p'},
        {"path", required_argument, NULL, 'P'},
        {"method", required_argument, NULL, 'm'},
        {"body", required_argument, NULL, 'b'},
        {"clients", required_argument, NULL, 'c'},
        {"requests", required_argument, NULL, 'n'},
        {"timeout-ms", required_argument, NULL, 't'},
        {"format", required_argument, NULL, 'f'},
        {"record", required_argument, NULL, 'r'},
        {"max-s", required_argument, NULL, 'x'},
        {"error-pause-ms", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    long v;

    while ((c = getopt_long(argc, argv, "H:p:P:m:b:c:n:t:f:r:x:e:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'H':
            o->host = optarg;
            break;
        case 'P':
            o->path = optarg;
            break;
        case 'm':
            o->method = optarg;
            break;
        case 'b':
            o->body = optarg;
            break;
        case 'r':
            o->record = optarg;
            break;
        case 'x':
            if (stats_parse_long(optarg, 1, 86400, &v) != 0) goto bad;
            o->max_s = v;
            break;
        case 'e':
            if (stats_parse_long(optarg, 0, 60000, &v) != 0) goto bad;
            o->error_pause_ms = v;
            break;
        case 'p':
            if (stats_parse_long(optarg, 1, 65535, &v) != 0) goto bad;
            o->port = (int)v;
            break;
        case 'c':
            if (stats_parse_long(optarg, 1, 20000, &v) != 0) goto bad;
            o->clients = (int)v;
            break;
        case 'n':
            if (stats_parse_long(optarg, 0, 100000000, &v) != 0) goto bad;
            o->requests = v;
            break;
        case 't':
            if (stats_parse_long(optarg, 1, INT_MAX, &v) != 0) goto bad;
            o->timeout_ms = (int)v;
            break;
        case 'f':
            if (stats_parse_format(optarg, &o->kv) != 0) goto bad;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
        continue;
    bad:
        stats_bad_value("inventory-load", longopts, c, optarg);
        return 2;
    }
    return check_options(argc, argv, o);
}

/* INVENTORY_LOAD_TOKEN, when set, as a header line of every request. -1 to
 * go on, or the exit status. */
static int set_token(struct options *o) {
    const char *token = getenv("INVENTORY_LOAD_TOKEN");
    if (token == NULL || token[0] == '\0') return -1;
    if (strpbrk(token, "\r\n") != NULL || strlen(token) > 512) {
        fprintf(stderr,
                "inventory-load: INVENTORY_LOAD_TOKEN must be one line of at most 512 bytes\n");
        return 2;
    }
    size_t len = strlen(token) + 32;
    o->headers = malloc(len);
    if (o->headers == NULL) {
        fprintf(stderr, "inventory-load: out of memory\n");
        return 1;
    }
    snprintf(o->headers, len, "Authorization: Bearer %s\r\n", token);
    return -1;
}

/* Starts the clients at once (a barrier), waits for them all, and returns
 * the seconds they took; exits if a client cannot start. */
static double run_clients(struct options *o, struct worker *w) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < o->clients; i++) {
        w[i].opt = o;
        int rc = pthread_create(&w[i].tid, &attr, worker_run, &w[i]);
        if (rc != 0) {
            /* The barrier counts every client: without them all, nobody
             * could pass it. Nothing was sent yet, so stopping is clean. */
            fprintf(stderr, "inventory-load: cannot start client %d of %d: %s\n", i + 1, o->clients,
                    strerror(rc));
            exit(1);
        }
    }
    pthread_attr_destroy(&attr);
    double t0 = now_ms();
    started_ms = t0;
    pthread_barrier_wait(&start_line);
    for (int i = 0; i < o->clients; i++) pthread_join(w[i].tid, NULL);
    return (now_ms() - t0) / 1e3;
}

/* Fairness of the n clients' sales: the least and the most one client sold,
 * and Jain's index (-1 when none sold, or out of memory). */
static double fairness(const struct worker *w, int n, long *least, long *most) {
    long *sold = calloc((size_t)(n > 0 ? n : 1), sizeof(*sold));
    *least = *most = 0;
    if (!sold) return -1.0;
    for (int i = 0; i < n; i++) {
        sold[i] = w[i].counts[OUT_SOLD];
        if (i == 0 || sold[i] < *least) *least = sold[i];
        if (sold[i] > *most) *most = sold[i];
    }
    double jain = stats_jain(sold, (size_t)n);
    free(sold);
    return jain;
}

/* Prints the run's summary from the clients' counts into total[]; returns
 * the requests answered or failed. */
static long report(const struct options *o, const struct worker *w, double elapsed_s,
                   long total[OUT_COUNT]) {
    const char *first_error = NULL, *first_other = NULL;
    for (int k = 0; k < OUT_COUNT; k++) total[k] = 0;
    for (int i = 0; i < o->clients; i++) {
        for (int k = 0; k < OUT_COUNT; k++) total[k] += w[i].counts[k];
        if (first_error == NULL && w[i].first_error[0] != '\0') first_error = w[i].first_error;
        if (first_other == NULL && w[i].first_other[0] != '\0') first_other = w[i].first_other;
    }
    long done = 0;
    for (int k = 0; k < OUT_COUNT; k++) done += total[k];

    struct stats_double lat = stats_summary_double(latency_ms, (size_t)done);
    long least, most;
    double jain = fairness(w, o->clients, &least, &most);
    double req_per_s = elapsed_s > 0 ? (double)done / elapsed_s : 0.0;
    double sales_per_s = elapsed_s > 0 ? (double)total[OUT_SOLD] / elapsed_s : 0.0;

    if (o->kv) {
        printf("requests=%ld sold=%ld sold_out=%ld lock_timeout=%ld "
               "backend_unavailable=%ld other=%ld errors=%ld elapsed_s=%.3f "
               "req_per_s=%.1f sales_per_s=%.1f p50_ms=%.2f p99_ms=%.2f "
               "max_ms=%.2f client_sold_min=%ld client_sold_max=%ld jain=%.3f\n",
               done, total[OUT_SOLD], total[OUT_SOLD_OUT], total[OUT_LOCK_TIMEOUT],
               total[OUT_BACKEND], total[OUT_OTHER], total[OUT_ERROR], elapsed_s, req_per_s,
               sales_per_s, lat.p50, lat.p99, lat.max, least, most, jain);
    } else {
        printf("%s %s:%d%s: %ld requests by %d clients in %.3f s\n", o->method, o->host, o->port,
               o->path, done, o->clients, elapsed_s);
        printf("  sold %ld, sold_out %ld, lock_timeout %ld, "
               "backend_unavailable %ld, other %ld, errors %ld\n",
               total[OUT_SOLD], total[OUT_SOLD_OUT], total[OUT_LOCK_TIMEOUT], total[OUT_BACKEND],
               total[OUT_OTHER], total[OUT_ERROR]);
        printf("  %.1f requests/s, %.1f sales/s; latency p50 %.2f ms, "
               "p99 %.2f ms, max %.2f ms\n",
               req_per_s, sales_per_s, lat.p50, lat.p99, lat.max);
        if (jain >= 0)
            printf("  per client: sold %ld to %ld, Jain's fairness index %.3f\n", least, most,
                   jain);
    }
    if (first_error != NULL)
        fprintf(stderr, "inventory-load: %ld transport errors, first: %s\n", total[OUT_ERROR],
                first_error);
    if (first_other != NULL)
        fprintf(stderr, "inventory-load: %ld other answers, first: %s\n", total[OUT_OTHER],
                first_other);
    fflush(stdout);
    return done;
}

int main(int argc, char **argv) {
    struct options o = {
        .host = "127.0.0.1",
        .port = 8080,
        .path = "/inventory/sale/atomic",
        .method = "GET",
        .body = NULL,
        .clients = 200,
        .requests = 3000,
        .timeout_ms = 30000,
        .kv = 0,
    };
    int rc = parse_options(argc, argv, &o);
    if (rc < 0) rc = set_token(&o);
    if (rc >= 0) return rc;
    if (o.clients > o.requests && o.requests > 0) o.clients = (int)o.requests;

    latency_ms = calloc(o.requests > 0 ? (size_t)o.requests : 1, sizeof(double));
    if (o.record != NULL) told = calloc(o.requests > 0 ? (size_t)o.requests : 1, sizeof(*told));
    struct worker *w = calloc((size_t)o.clients, sizeof(*w));
    if (latency_ms == NULL || w == NULL || (o.record != NULL && told == NULL)) {
        fprintf(stderr, "inventory-load: out of memory\n");
        return 1;
    }
    if (pthread_barrier_init(&start_line, NULL, (unsigned)o.clients + 1) != 0) {
        fprintf(stderr, "inventory-load: pthread_barrier_init failed\n");
        return 1;
    }
    double elapsed_s = run_clients(&o, w);
    pthread_barrier_destroy(&start_line);
    long total[OUT_COUNT];
    long done = report(&o, w, elapsed_s, total);

    int recorded = o.record == NULL || write_record(o.record, done) == 0;
    free(latency_ms);
    free(told);
    free(w);
    free(o.headers);
    if (!recorded) return 1;
    return done > 0 && total[OUT_ERROR] == done ? 1 : 0;
}
