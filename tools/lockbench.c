/* lockbench.c -- lockbench, the sale workload of the demo run in-process:
 * C threads sell one stock under one lock strategy through the core library
 * (inventory_sell), with no HTTP in between, and the run is measured.
 *
 * DESIGN
 * One struct config (config_defaults() plus the options), and the service
 * made from it by service_open() exactly as the daemon makes it: one rpool
 * of C + 8 connections (128 at least, the default), the lock core, the
 * inventory; service_close() tears them down.
 * The stock is reset, then every client thread waits at a barrier and loops
 * inventory_sell() until it answers sold_out. Nothing is retried by hand: a
 * give-up (lock_timeout) or a backend error is counted and the thread simply
 * tries to buy the next unit, as a JMeter client would.
 *
 * Each thread records, for every call, when it began, the acquire wait the
 * library reports (r.wait_ms, whole ms), the call's own duration on the
 * monotonic clock in µs and its lock tries, in an array of its own; the
 * arrays are merged after the join, so no thread ever waits for another.
 * The run ends when the last sold unit's call returned (the stock hit 0).
 * Percentiles and tries per sale count every call that began before then:
 * the sales, the give-ups, the errors, and the calls that waited for the
 * lock while stock remained and found it sold out once they had it (with a
 * spinning lock, a client that never wins the race waits all run long and
 * ends that way; leaving it out would hide the longest waits). Calls begun
 * after the end only find out that the stock is gone and are left out.
 *
 * Redis commands per sale: INFO commandstats is read (sum of calls=) on the
 * main Redis, and on every Redlock master when the strategy uses them, just
 * before the barrier and just after the join. The "after" reading also
 * counts the "before" INFO itself, which is subtracted. Connection set-up
 * (script loads, the masters' INFO server) is part of the workload.
 *
 * CPU per sale: this process's CPU time (user and system, getrusage) and
 * its context switches, and the main Redis's (INFO cpu: used_cpu_user and
 * used_cpu_sys), each read just before the barrier and just after the
 * join, divided by the units sold. Where a lock's sales wait for each
 * other, their sum against 1 / sales_per_s shows how much of a sale's time
 * is CPU on the path from one holder to the next. The INFO cpu readings
 * come before and after the commandstats readings, so they are not counted.
 *
 * The audit (inventory_audit) judges the run: any unit sold twice or any
 * oversold unit makes the exit status 1.
 *
 * Threads: the main thread and C client threads; the lock core may add its
 * watchdog and subscriber threads, stopped by lock_core_shutdown(). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "addr.h"
#include "config.h"
#include "inventory.h"
#include "lock.h"
#include "mclock.h"
#include "rpool.h"
#include "service.h"
#include "stats.h"
#include "strategy.h"

#define EXIT_AUDIT 1 /* oversold or sold twice */
#define EXIT_USAGE 2 /* bad options, or nothing could be set up */
#define EXIT_INCOMPLETE 3 /* the stock was not sold out before --max-s */

struct options {
    const struct strategy *type;
    int clients;
    long long stock;
    char redis_host[256];
    int redis_port;
    char redlock[512];
    int ttl_ms;
    int wait_ms;
    int node_timeout_ms;
    int max_s;
    int kv;
};

/* One client's counts and samples; touched only by its thread until the
 * join. */
struct sample {
    monotime_us start_us; /* when the call began */
    int64_t lat_us; /* how long it took, measured here */
    int64_t wait_ms; /* r.wait_ms */
    int attempts; /* r.attempts */
};

struct client {
    pthread_t tid;
    long long sold, giveups, backend, other;
    monotime_us last_sold_us; /* when its last sold call returned */
    struct sample *samples; /* one per call */
    size_t n, cap;
    int oom;
    char first_error[200]; /* the first backend or other answer */
};

static struct service svc;
static const struct options *opt;
static pthread_barrier_t start_line;
static monotime_us deadline_us;
static atomic_int stop_all; /* set when --max-s ran out */

static int sample_add(struct client *c, const struct sample *s) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        struct sample *a = realloc(c->samples, cap * sizeof(*a));
        if (a == NULL) return -1;
        c->samples = a;
        c->cap = cap;
    }
    c->samples[c->n++] = *s;
    return 0;
}

static void *client_run(void *arg) {
    struct client *c = arg;
    struct sale_result r;

    pthread_barrier_wait(&start_line);
    for (;;) {
        if (atomic_load(&stop_all)) break;
        monotime_us t0 = mclock_us();
        if (t0 >= deadline_us) {
            atomic_store(&stop_all, 1);
            break;
        }
        int st = inventory_sell(svc.inv, opt->type, NULL, NULL, &r);
        monotime_us t1 = mclock_us();
        struct sample sm = {t0, t1 - t0, r.wait_ms, r.lock.attempts};
        if (!c->oom && sample_add(c, &sm) < 0) c->oom = 1;
        if (st == INV_SOLD_OUT) break;
        switch (st) {
        case INV_SOLD:
            c->sold++;
            c->last_sold_us = t1;
            continue;
        case INV_LOCK_TIMEOUT:
            c->giveups++;
            continue;
        case INV_BACKEND:
            c->backend++;
            break;
        default:
            c->other++;
            break;
        }
        if (c->first_error[0] == '\0')
            snprintf(c->first_error, sizeof(c->first_error), "status %d: %.180s", st, r.errstr);
        /* Bad data (no stock key, not a number) will not mend by itself. */
        if (st == INV_BAD_DATA) break;
    }
    return NULL;
}

/* INFO section of host:port as a string reply, or NULL with errstr set;
 * the caller frees it. */
static redisReply *info(const char *host, int port, const char *section, char *errstr,
                        size_t errlen) {
    struct rpool_options o = {.host = host, .port = port, .timeout_ms = 5000};
    redisContext *c = rpool_connect(&o, errstr, errlen);
    if (c == NULL) return NULL;
    redisReply *r = redisCommand(c, "INFO %s", section);
    if (r == NULL) {
        snprintf(errstr, errlen, "INFO %s on %s:%d: %s", section, host, port, c->errstr);
    } else if (r->type != REDIS_REPLY_STRING) {
        snprintf(errstr, errlen, "INFO %s on %s:%d: %.80s", section, host, port,
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        freeReplyObject(r);
        r = NULL;
    }
    redisFree(c);
    return r;
}

/* The sum of calls= over INFO commandstats of host:port, or -1 with errstr
 * set. */
static long long commandstats_total(const char *host, int port, char *errstr, size_t errlen) {
    redisReply *r = info(host, port, "commandstats", errstr, errlen);
    if (r == NULL) return -1;
    long long total = 0;
    for (const char *p = strstr(r->str, "calls="); p != NULL; p = strstr(p + 6, "calls="))
        total += strtoll(p + 6, NULL, 10);
    freeReplyObject(r);
    return total;
}

/* used_cpu_user + used_cpu_sys of host:port (INFO cpu), in seconds; -1
 * when it cannot be read. */
static double redis_cpu_s(const char *host, int port) {
    char err[128];
    redisReply *r = info(host, port, "cpu", err, sizeof(err));
    if (r == NULL) return -1;
    const char *u = strstr(r->str, "used_cpu_user:"), *y = strstr(r->str, "used_cpu_sys:");
    double total = u && y ? strtod(u + 14, NULL) + strtod(y + 13, NULL) : -1;
    freeReplyObject(r);
    return total;
}

/* This process's CPU time so far (user and system, s) and its voluntary
 * and involuntary context switches. */
static void self_cpu(double *cpu_s, long *vcsw, long *icsw) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
             (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    *vcsw = ru.ru_nvcsw;
    *icsw = ru.ru_nivcsw;
}

/* Sums INFO commandstats over the main Redis and, when multi is set, every
 * master of the redlock spec. *main_out and *nodes_out get the parts. */
static int commands_now(int multi, long long *main_out, long long *nodes_out, int *servers,
                        char *errstr, size_t errlen) {
    *main_out = commandstats_total(opt->redis_host, opt->redis_port, errstr, errlen);
    if (*main_out < 0) return -1;
    *servers = 1;
    *nodes_out = 0;
    if (!multi) return 0;
    struct addr a[LOCK_MAX_NODES];
    char why[128];
    int nodes = addr_list_parse(opt->redlock, a, LOCK_MAX_NODES, why, sizeof(why));
    if (nodes < 0) {
        snprintf(errstr, errlen, "--redlock: %s", why);
        return -1;
    }
    for (int i = 0; i < nodes; i++) {
        long long n = commandstats_total(a[i].host, a[i].port, errstr, errlen);
        if (n < 0) return -1;
        *nodes_out += n;
        (*servers)++;
    }
    return 0;
}

static void usage(FILE *f) {
    char names[512];
    strategy_names(names, sizeof(names));
    fprintf(
        f,
        "usage: lockbench --strategy S [options]\n"
        "  --strategy S        one of: %s\n"
        "  --clients C         client threads (16)\n"
        "  --stock N           units to sell (2000)\n"
        "  --redis HOST:PORT   the main Redis: stock, ledger, lock (127.0.0.1:6379)\n"
        "  --redlock H:P,...   the Redlock masters (127.0.0.1:6381,127.0.0.1:6382,127.0.0.1:6383)\n"
        "  --ttl-ms MS         lock.ttl-ms (config default)\n"
        "  --wait-ms MS        lock.wait-ms, longest acquire wait (10000)\n"
        "  --node-timeout-ms MS redlock.node-timeout-ms (config default)\n"
        "  --max-s S           stop the clients after S seconds (300)\n"
        "  --format text|kv    human summary, or one key=value line (text)\n"
        "  --set key=value     any inventoryd setting (history.enabled=false, ...); repeatable\n"
        "Every client loops sale after sale until the stock is sold out; give-ups\n"
        "and backend errors are counted, never retried by hand. Exit status: 0 when\n"
        "the audit passed, 1 when a unit was sold twice or oversold, 2 on bad usage\n"
        "or set-up failure, 3 when the stock was not sold out before --max-s.\n",
        names);
}

/* The options' defaults, some of them cfg's (config_defaults). */
static void options_defaults(struct options *o, const struct config *cfg) {
    memset(o, 0, sizeof(*o));
    o->clients = 16;
    o->stock = 2000;
    snprintf(o->redis_host, sizeof(o->redis_host), "127.0.0.1");
    o->redis_port = 6379;
    snprintf(o->redlock, sizeof(o->redlock), "127.0.0.1:6381,127.0.0.1:6382,127.0.0.1:6383");
    o->ttl_ms = cfg->lock_ttl_ms;
    o->wait_ms = 10000;
    o->node_timeout_ms = cfg->redlock_node_timeout_ms;
    o->max_s = 300;
}

/* Reads the command line into *o, and the --set settings into sets[] (at
 * most max, *nsets of them). Returns -1 to go on, or the exit status: 0
 * after --help, EXIT_USAGE (said on stderr) for a bad command line. */
/* Applies one option with its value: 0, or -1 when the value is bad. */
static int set_option(int ch, const char *arg, struct options *o, const char **sets, int max,
                      int *nsets) {
    long v;
    struct addr a;
    char why[128];
    switch (ch) {
    case 's':
        return (o->type = strategy_find(arg)) == NULL ? -1 : 0;
    case 'c':
        if (stats_parse_long(arg, 1, 5000, &v) != 0) return -1;
        o->clients = (int)v;
        return 0;
    case 'n':
        if (stats_parse_long(arg, 1, 100000000, &v) != 0) return -1;
        o->stock = v;
        return 0;
    case 'r':
        if (addr_parse(arg, strlen(arg), &a, why, sizeof(why)) != 0) return -1;
        snprintf(o->redis_host, sizeof(o->redis_host), "%s", a.host);
        o->redis_port = a.port;
        return 0;
    case 'R':
        if (strlen(arg) >= sizeof(o->redlock)) return -1;
        snprintf(o->redlock, sizeof(o->redlock), "%s", arg);
        return 0;
    case 't':
        if (stats_parse_long(arg, 1, INT_MAX / 1000, &v) != 0) return -1;
        o->ttl_ms = (int)v;
        return 0;
    case 'w':
        if (stats_parse_long(arg, 0, INT_MAX / 1000, &v) != 0) return -1;
        o->wait_ms = (int)v;
        return 0;
    case 'T':
        if (stats_parse_long(arg, 1, 60000, &v) != 0) return -1;
        o->node_timeout_ms = (int)v;
        return 0;
    case 'm':
        if (stats_parse_long(arg, 1, 86400, &v) != 0) return -1;
        o->max_s = (int)v;
        return 0;
    case 'S':
        if (*nsets == max) return -1;
        sets[(*nsets)++] = arg; /* applied over the other options, in set_up() */
        return 0;
    default: /* 'f' */
        return stats_parse_format(arg, &o->kv) != 0 ? -1 : 0;
    }
}

static int parse_options(int argc, char **argv, struct options *o, const char **sets, int max,
                         int *nsets) {
    static const struct option longopts[] = {
        {"strategy", required_argument, NULL, 's'},
        {"clients", required_argument, NULL, 'c'},
        {"stock", required_argument, NULL, 'n'},
        {"redis", required_argument, NULL, 'r'},
        {"redlock", required_argument, NULL, 'R'},
        {"ttl-ms", required_argument, NULL, 't'},
        {"wait-ms", required_argument, NULL, 'w'},
        {"node-timeout-ms", required_argument, NULL, 'T'},
        {"max-s", required_argument, NULL, 'm'},
        {"format", required_argument, NULL, 'f'},
        {"set", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    *nsets = 0;
    while ((ch = getopt_long(argc, argv, "s:c:n:r:R:t:w:T:m:f:S:h", longopts, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            return 0;
        }
        if (!strchr("scnrRtwTmfS", ch)) {
            usage(stderr);
            return EXIT_USAGE;
        }
        if (set_option(ch, optarg, o, sets, max, nsets) != 0) {
            stats_bad_value("lockbench", longopts, ch, optarg);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "lockbench: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (o->type == NULL) {
        fprintf(stderr, "lockbench: --strategy is required\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    return -1;
}

/* Makes cfg from the options and the --set settings over them, and opens
 * the service from it. 0, or -1 said on stderr (nothing is left open). */
static int set_up(struct config *cfg, const struct options *o, const char **sets, int nsets) {
    snprintf(cfg->redis_host, sizeof(cfg->redis_host), "%s", o->redis_host);
    cfg->redis_port = o->redis_port;
    snprintf(cfg->redlock_nodes, sizeof(cfg->redlock_nodes), "%s", o->redlock);
    cfg->redlock_node_timeout_ms = o->node_timeout_ms;
    cfg->lock_ttl_ms = o->ttl_ms;
    cfg->lock_wait_ms = o->wait_ms;
    cfg->redis_pool_size = o->clients + 8;
    if (cfg->redis_pool_size < 128) cfg->redis_pool_size = 128;
    cfg->probe = 1;
    snprintf(cfg->strategy, sizeof(cfg->strategy), "%s", o->type->name);

    char err[256];
    for (int i = 0; i < nsets; i++) {
        if (config_set(cfg, sets[i], err, sizeof(err)) != CONFIG_OK) {
            fprintf(stderr, "lockbench: %s\n", err);
            return -1;
        }
    }
    if (service_open(&svc, cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "lockbench: %s\n", err);
        return -1;
    }
    return 0;
}

/* What one run measured. */
struct run {
    monotime_us t0, t_join; /* the clients were let go; the last was joined */
    int cmds_ok; /* both INFO readings were made */
    long long cmds_main, cmds_nodes; /* -1 unless cmds_ok */
    double cpu_s; /* this process's CPU time over the run */
    long vcsw, icsw; /* its context switches over the run */
    double redis_cpu_s; /* the main Redis's CPU time over the run; -1 unread */
};

/* The CPU readings taken on either side of a run. */
struct cpu_mark {
    double self_s, redis_s;
    long vcsw, icsw;
};

static void cpu_mark(struct cpu_mark *m) {
    m->redis_s = redis_cpu_s(opt->redis_host, opt->redis_port);
    self_cpu(&m->self_s, &m->vcsw, &m->icsw);
}

/* The CPU used between a and b into run. */
static void cpu_between(const struct cpu_mark *a, const struct cpu_mark *b, struct run *run) {
    run->cpu_s = b->self_s - a->self_s;
    run->vcsw = b->vcsw - a->vcsw;
    run->icsw = b->icsw - a->icsw;
    run->redis_cpu_s = a->redis_s >= 0 && b->redis_s >= 0 ? b->redis_s - a->redis_s : -1;
}

/* Starts the n clients of cl[], reads the commands so far, lets the
 * clients go at once, joins them and reads the commands again. 0, or -1
 * said on stderr when the first reading failed (every client joined, none
 * sold). A client that cannot be started ends the process. */
static int run_clients(struct client *cl, int n, int multi, struct run *run) {
    char err[256];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    deadline_us = INT64_MAX;
    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&cl[i].tid, &attr, client_run, &cl[i]);
        if (rc != 0) {
            /* The barrier counts every client: without them all nobody
             * passes it, and nothing was sold yet, so stopping is clean. */
            fprintf(stderr, "lockbench: cannot start client %d of %d: %s\n", i + 1, n,
                    strerror(rc));
            _exit(EXIT_USAGE);
        }
    }
    pthread_attr_destroy(&attr);

    long long main0, nodes0, main1, nodes1;
    int servers;
    struct cpu_mark before, after;
    cpu_mark(&before);
    if (commands_now(multi, &main0, &nodes0, &servers, err, sizeof(err)) < 0) {
        /* The clients are parked at the barrier: let them go with the
         * deadline already past, so each returns without a sale. */
        fprintf(stderr, "lockbench: %s\n", err);
        atomic_store(&stop_all, 1);
        pthread_barrier_wait(&start_line);
        for (int i = 0; i < n; i++) pthread_join(cl[i].tid, NULL);
        return -1;
    }

    run->t0 = mclock_us();
    deadline_us = run->t0 + (monotime_us)opt->max_s * 1000000;
    pthread_barrier_wait(&start_line);
    for (int i = 0; i < n; i++) pthread_join(cl[i].tid, NULL);
    run->t_join = mclock_us();
    run->cmds_ok = commands_now(multi, &main1, &nodes1, &servers, err, sizeof(err)) == 0;
    cpu_mark(&after);
    cpu_between(&before, &after, run);
    if (!run->cmds_ok) fprintf(stderr, "lockbench: %s\n", err);
    /* The "after" reading counts each server's "before" INFO. */
    run->cmds_main = run->cmds_ok ? main1 - main0 - 1 : -1;
    run->cmds_nodes = run->cmds_ok ? nodes1 - nodes0 - (servers - 1) : -1;
    return 0;
}

/* The clients' counts and samples, summed up. */
struct summary {
    long long sold, giveups, backend, other, attempts;
    size_t calls; /* begun while stock remained */
    int oom, no_sale;
    long long sold_min, sold_max; /* the fewest and the most one client sold */
    double jain; /* Jain's index of the clients' sales; -1 when none sold */
    const char *first_error; /* a client's, or NULL */
    int64_t w50, w99; /* acquire wait, ms */
    double l50, l99, lmax; /* sale latency, ms */
    double elapsed_s, sales_per_s, cmds_per_sale, tries_per_sale;
    long long cmds; /* -1 unless run->cmds_ok */
    double cpu_us, redis_cpu_us, csw; /* per sale; redis_cpu_us -1 when unread */
};

/* The fewest and the most one of the n clients sold, and Jain's index of
 * their sales, into s. 0, or -1 said on stderr (out of memory). */
static int client_fairness(const struct client *cl, int n, struct summary *s) {
    long *each = calloc((size_t)(n > 0 ? n : 1), sizeof(*each));
    if (!each) {
        fprintf(stderr, "lockbench: out of memory\n");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        each[i] = (long)cl[i].sold;
        if (i == 0 || cl[i].sold < s->sold_min) s->sold_min = cl[i].sold;
        if (cl[i].sold > s->sold_max) s->sold_max = cl[i].sold;
    }
    s->jain = stats_jain(each, (size_t)n);
    free(each);
    return 0;
}

/* Sums up the n clients of cl[] after run. 0, or -1 said on stderr (out of
 * memory). */
static int summarize(const struct client *cl, int n, const struct run *run, struct summary *s) {
    memset(s, 0, sizeof(*s));
    monotime_us last_sold = 0;
    size_t calls = 0;
    if (client_fairness(cl, n, s) < 0) return -1;
    for (int i = 0; i < n; i++) {
        s->sold += cl[i].sold;
        s->giveups += cl[i].giveups;
        s->backend += cl[i].backend;
        s->other += cl[i].other;
        s->no_sale += cl[i].sold == 0;
        calls += cl[i].n;
        s->oom |= cl[i].oom;
        if (cl[i].last_sold_us > last_sold) last_sold = cl[i].last_sold_us;
        if (s->first_error == NULL && cl[i].first_error[0] != '\0')
            s->first_error = cl[i].first_error;
    }
    int64_t *waits = malloc((calls ? calls : 1) * sizeof(*waits));
    int64_t *lats = malloc((calls ? calls : 1) * sizeof(*lats));
    if (waits == NULL || lats == NULL) {
        fprintf(stderr, "lockbench: out of memory\n");
        free(waits);
        free(lats);
        return -1;
    }
    /* Every call begun while stock remained (see the design note). */
    monotime_us end_us = last_sold ? last_sold : run->t_join;
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < cl[i].n; j++) {
            const struct sample *sm = &cl[i].samples[j];
            if (sm->start_us >= end_us) continue;
            waits[k] = sm->wait_ms;
            lats[k] = sm->lat_us;
            s->attempts += sm->attempts;
            k++;
        }
    s->calls = k;
    struct stats_i64 ws = stats_summary_i64(waits, k), ls = stats_summary_i64(lats, k);
    s->w50 = ws.p50;
    s->w99 = ws.p99;
    s->l50 = (double)ls.p50 / 1e3;
    s->l99 = (double)ls.p99 / 1e3;
    s->lmax = (double)ls.max / 1e3;
    free(waits);
    free(lats);

    s->elapsed_s = (double)(end_us - run->t0) / 1e6;
    s->sales_per_s = s->elapsed_s > 0 ? (double)s->sold / s->elapsed_s : 0.0;
    s->cmds = run->cmds_ok ? run->cmds_main + run->cmds_nodes : -1;
    s->cmds_per_sale = run->cmds_ok && s->sold > 0 ? (double)s->cmds / (double)s->sold : 0.0;
    s->tries_per_sale = s->sold > 0 ? (double)s->attempts / (double)s->sold : 0.0;
    double per = s->sold > 0 ? 1e6 / (double)s->sold : 0.0;
    s->cpu_us = run->cpu_s * per;
    s->redis_cpu_us = run->redis_cpu_s >= 0 ? run->redis_cpu_s * per : -1;
    s->csw = (double)(run->vcsw + run->icsw) * per / 1e6;
    return 0;
}

/* Prints the run's summary on stdout (--format), then its errors on stderr. */
static void report(const struct options *o, const struct run *run, const struct summary *s,
                   const struct audit *a, int complete) {
    if (o->kv) {
        printf("strategy=%s clients=%d stock=%lld sold=%lld elapsed_s=%.3f sales_per_s=%.1f "
               "giveups=%lld backend_errors=%lld other=%lld sold_twice=%lld oversold=%lld "
               "violations=%lld remaining=%lld complete=%d clients_no_sale=%d calls=%zu cmds=%lld "
               "cmds_main=%lld "
               "cmds_nodes=%lld cmds_per_sale=%.2f tries_per_sale=%.2f wait_p50_ms=%" PRId64
               " wait_p99_ms=%" PRId64
               " lat_p50_ms=%.3f lat_p99_ms=%.3f lat_max_ms=%.3f client_sold_min=%lld "
               "client_sold_max=%lld jain=%.3f cpu_us_per_sale=%.1f redis_cpu_us_per_sale=%.1f "
               "csw_per_sale=%.2f\n",
               o->type->name, o->clients, o->stock, s->sold, s->elapsed_s, s->sales_per_s,
               s->giveups, s->backend, s->other, a->sold_twice, a->oversold_units, a->violations,
               a->stock, complete, s->no_sale, s->calls, s->cmds, run->cmds_main, run->cmds_nodes,
               s->cmds_per_sale, s->tries_per_sale, s->w50, s->w99, s->l50, s->l99, s->lmax,
               s->sold_min, s->sold_max, s->jain, s->cpu_us, s->redis_cpu_us, s->csw);
    } else {
        printf("lockbench: strategy %s, %d clients, stock %lld\n", o->type->name, o->clients,
               o->stock);
        printf("  sold %lld in %.3f s: %.1f sales/s%s\n", s->sold, s->elapsed_s, s->sales_per_s,
               complete ? "" : " (NOT sold out)");
        printf("  give-ups %lld, backend errors %lld, other %lld; %d of %d clients sold nothing\n",
               s->giveups, s->backend, s->other, s->no_sale, o->clients);
        printf("  per client: sold %lld to %lld, Jain's fairness index %.3f\n", s->sold_min,
               s->sold_max, s->jain);
        printf("  audit: sold twice %lld, oversold %lld, probe violations %lld, stock left %lld\n",
               a->sold_twice, a->oversold_units, a->violations, a->stock);
        printf("  redis commands %lld (main %lld, redlock masters %lld): %.2f per sale; "
               "%.2f lock tries per sale\n",
               s->cmds, run->cmds_main, run->cmds_nodes, s->cmds_per_sale, s->tries_per_sale);
        printf("  over %zu calls begun while stock remained: acquire wait p50 %" PRId64
               " ms, p99 %" PRId64 " ms;\n    sale latency p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
               s->calls, s->w50, s->w99, s->l50, s->l99, s->lmax);
        printf("  CPU per sale: this process %.1f us (%.2f context switches), the main Redis "
               "%.1f us\n",
               s->cpu_us, s->csw, s->redis_cpu_us);
    }
    fflush(stdout);
    if (s->first_error != NULL)
        fprintf(stderr, "lockbench: %lld backend errors, %lld other; first: %s\n", s->backend,
                s->other, s->first_error);
    if (s->oom) fprintf(stderr, "lockbench: out of memory for samples; percentiles are partial\n");
}

int main(int argc, char **argv) {
    struct config cfg;
    config_defaults(&cfg);
    static struct options o;
    options_defaults(&o, &cfg);
    opt = &o;
    const char *sets[32];
    int nsets;
    int status = parse_options(argc, argv, &o, sets, (int)(sizeof(sets) / sizeof(sets[0])), &nsets);
    if (status >= 0) return status;
    if (set_up(&cfg, &o, sets, nsets) != 0) return EXIT_USAGE;

    status = EXIT_USAGE;
    char err[256];
    struct client *cl = NULL;
    int barrier_ready = 0;
    /* The Redlock masters' commands count only when the lock lives there. */
    int multi = strcmp(lock_type_family(o.type->lock), "redlock") == 0;
    struct run run;
    struct summary sum;
    if (inventory_reset(svc.inv, NULL, o.stock, err, sizeof(err)) != 0) {
        fprintf(stderr, "lockbench: %s\n", err);
        goto out;
    }
    cl = calloc((size_t)o.clients, sizeof(*cl));
    if (cl == NULL || pthread_barrier_init(&start_line, NULL, (unsigned)o.clients + 1) != 0) {
        fprintf(stderr, "lockbench: out of memory\n");
        goto out;
    }
    barrier_ready = 1;
    if (run_clients(cl, o.clients, multi, &run) != 0) goto out;
    if (summarize(cl, o.clients, &run, &sum) != 0) goto out;

    struct audit a;
    int audited = inventory_audit(svc.inv, NULL, &a, err, sizeof(err)) == 0;
    if (!audited) {
        fprintf(stderr, "lockbench: audit: %s\n", err);
        memset(&a, 0, sizeof(a));
    }
    int complete = audited && a.stock <= 0 && !atomic_load(&stop_all);
    report(&o, &run, &sum, &a, complete);

    if (!audited)
        status = EXIT_USAGE;
    else if (a.oversold || a.sold_twice > 0 || a.oversold_units > 0)
        status = EXIT_AUDIT;
    else if (!complete)
        status = EXIT_INCOMPLETE;
    else
        status = 0;

out:
    if (cl != NULL)
        for (int i = 0; i < o.clients; i++) free(cl[i].samples);
    if (barrier_ready) pthread_barrier_destroy(&start_line);
    free(cl);
    service_close(&svc);
    return status;
}
