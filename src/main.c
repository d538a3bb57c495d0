/* main.c -- inventoryd: the sale service.
 *
 * Start-up reads the settings (defaults, then the properties file, then
 * INVENTORYD_* variables, then each --set), checks them, opens the Redis pool
 * and starts HTTP. SIGINT and SIGTERM are taken by sigwait() in this thread
 * only: the server stops accepting, lets requests in flight finish (and so
 * release their locks), then frees everything. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api.h"
#include "config.h"
#include "http.h"
#include "inventory.h"
#include "lab.h"
#include "lock.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"
#include "route.h"
#include "service.h"
#include "strategy.h"

#define EXIT_CONFIG 2
#define EXIT_LISTEN 3

extern char **environ;

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: inventoryd [--config FILE] [--set key=value]... [--list-strategies]\n"
        "                  [--list-routes] [--check-config] [--help]\n"
        "  --config FILE      properties file (default: config/inventoryd.properties if present)\n"
        "  --set key=value    override one setting; repeatable; applied after the file and env\n"
        "  --list-strategies  print every strategy name and exit\n"
        "  --list-routes      print every route (methods, path, flags, what it does) and exit\n"
        "  --check-config     print the effective settings and exit\n"
        "Any key can also be set as INVENTORYD_<KEY> (server.port -> INVENTORYD_SERVER_PORT).\n");
}

static void print_warnings(const char *w) {
    if (w[0]) fputs(w, stderr);
}

/* The command line's options, but the --set assignments. */
struct options {
    const char *config_path;
    int list, list_routes, check, help;
};

/* Reads the options. Returns 0, or EXIT_CONFIG naming the bad one. */
static int parse_options(int argc, char **argv, struct options *o) {
    memset(o, 0, sizeof(*o));
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            o->config_path = argv[++i];
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            i++; /* applied after the file and the environment */
        } else if (strcmp(argv[i], "--list-strategies") == 0) {
            o->list = 1;
        } else if (strcmp(argv[i], "--list-routes") == 0) {
            o->list_routes = 1;
        } else if (strcmp(argv[i], "--check-config") == 0) {
            o->check = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            o->help = 1;
        } else {
            fprintf(stderr, "inventoryd: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return EXIT_CONFIG;
        }
    }
    return 0;
}

/* Fills cfg: defaults, the file, the environment, each --set, then the
 * checks across keys. Returns 0, or EXIT_CONFIG after saying why. */
static int load_config(struct config *cfg, const char *path, int argc, char **argv) {
    char err[512], warnings[4096];
    config_defaults(cfg);
    if (!path && access("config/inventoryd.properties", R_OK) == 0)
        path = "config/inventoryd.properties";
    int rc = CONFIG_OK;
    if (path) {
        rc = config_load_file(cfg, path, err, sizeof(err), warnings, sizeof(warnings));
        print_warnings(warnings);
    }
    if (rc == CONFIG_OK) {
        rc = config_load_env(cfg, environ, err, sizeof(err), warnings, sizeof(warnings));
        print_warnings(warnings);
    }
    for (int i = 1; i < argc && rc == CONFIG_OK; i++) {
        if (strcmp(argv[i], "--set") == 0 && i + 1 < argc)
            rc = config_set(cfg, argv[++i], err, sizeof(err));
        else if (strcmp(argv[i], "--config") == 0)
            i++;
    }
    if (rc == CONFIG_OK) {
        const char *names[64];
        int n = 0;
        for (; strategies[n].name && n < 63; n++) names[n] = strategies[n].name;
        names[n] = NULL;
        rc = config_check(cfg, names, err, sizeof(err));
    }
    if (rc == CONFIG_OK) return 0;
    fprintf(stderr, "inventoryd: %s\n", err);
    return EXIT_CONFIG;
}

/* --help, --list-strategies and --list-routes: printed, and the exit
 * status; -1 when none was asked for. */
static int print_info(const struct options *o) {
    if (o->help) {
        usage(stdout);
        return 0;
    }
    if (o->list) {
        for (int i = 0; strategies[i].name; i++) printf("%s\n", strategies[i].name);
        return 0;
    }
    if (o->list_routes) { /* routes.def, one row a line, tab-separated */
        char flags[64];
        for (int id = ROUTE_NOT_FOUND + 1; id < ROUTE_COUNT; id++)
            printf("%s\t%s\t%s\t%s\n", route_table[id].methods, route_table[id].pattern,
                   route_flags_text(route_table[id].flags, flags, sizeof(flags)),
                   route_table[id].doc);
        return 0;
    }
    return -1;
}

/* The lab, with lab.enabled: 0 with *lab set (NULL when off), or -1 with err
 * set. */
static int start_lab(const struct config *cfg, struct lab **lab, char *err, size_t errlen) {
    *lab = NULL;
    if (!cfg->lab_enabled) return 0;
    struct lab_options lo = {
        .target = cfg->lab_target,
        .self_host = cfg->bind,
        .self_port = cfg->port,
        .instances = cfg->lab_instances,
        .results_dir = cfg->lab_results_dir,
        .ttl_ms = cfg->lock_ttl_ms,
        .wait_ms = cfg->lock_wait_ms,
        .spin_sleep_ms = cfg->lock_spin_sleep_ms,
        .max_hold_ms = cfg->faults_max_hold_ms,
        .history = cfg->history_enabled,
        .io_timeout_ms = cfg->lock_wait_ms + cfg->redis_timeout_ms * 3 + 5000,
        .admin_token = cfg->admin_token,
    };
    *lab = lab_create(&lo, err, errlen);
    return *lab ? 0 : -1;
}

/* Says where the service listens, its Redis, its lab and its token. */
static void announce(const struct config *cfg, struct lab *lab) {
    if (cfg->sentinel_nodes[0])
        fprintf(stderr,
                "inventoryd: listening on http://%s:%d (default strategy %s, redis master "
                "%s via sentinels %s)\n",
                cfg->bind, cfg->port, cfg->strategy, cfg->sentinel_master, cfg->sentinel_nodes);
    else if (cfg->cluster_nodes[0])
        fprintf(stderr,
                "inventoryd: listening on http://%s:%d (default strategy %s, redis cluster "
                "via %s)\n",
                cfg->bind, cfg->port, cfg->strategy, cfg->cluster_nodes);
    else if (cfg->redis_unix_socket[0])
        fprintf(stderr,
                "inventoryd: listening on http://%s:%d (default strategy %s, redis unix:%s)\n",
                cfg->bind, cfg->port, cfg->strategy, cfg->redis_unix_socket);
    else
        fprintf(stderr,
                "inventoryd: listening on http://%s:%d (default strategy %s, redis %s:%d)\n",
                cfg->bind, cfg->port, cfg->strategy, cfg->redis_host, cfg->redis_port);
    if (lab) {
        struct lab_info li;
        lab_get_info(lab, &li);
        fprintf(stderr, "inventoryd: the lock lab is at http://%s:%d/ (runs on: they go to %s)\n",
                cfg->bind, cfg->port, li.target);
    } else {
        fprintf(stderr,
                "inventoryd: the lock lab is at http://%s:%d/ (runs off: lab.enabled=false)\n",
                cfg->bind, cfg->port);
    }
    if (cfg->admin_token[0])
        fprintf(stderr,
                "inventoryd: admin.token is set: a reset, a lab run and any fault parameter "
                "need 'Authorization: Bearer <admin.token>'\n");
}

/* The start-up seed of a missing stock key, and what it did. */
static void seed_at_start(const struct config *cfg, struct inventory *inv) {
    char err[512];
    int seeded = 0;
    if (inventory_ping(inv, err, sizeof(err)) != 0 ||
        inventory_seed(inv, cfg->initial_stock, &seeded, err, sizeof(err)) != 0)
        fprintf(stderr, "inventoryd: warning: %s; sales answer 503 until Redis is back\n", err);
    else if (seeded)
        fprintf(stderr, "inventoryd: %s did not exist: seeded with inventory.initial-stock=%d\n",
                cfg->stock_key, cfg->initial_stock);
}

int main(int argc, char **argv) {
    struct options o;
    if (parse_options(argc, argv, &o) != 0) return EXIT_CONFIG;
    int info = print_info(&o);
    if (info >= 0) return info;
    static struct config cfg;
    char err[512];
    if (load_config(&cfg, o.config_path, argc, argv) != 0) return EXIT_CONFIG;
    if (o.check) {
        char dump[8192];
        config_dump(&cfg, dump, sizeof(dump));
        fputs(dump, stdout);
        return 0;
    }

    /* Signals are taken only by sigwait() below; every thread started from
     * here on inherits the blocked mask. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    log_enable(1);
    static struct service svc;
    if (service_open(&svc, &cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "inventoryd: %s\n", err);
        return EXIT_CONFIG;
    }
    metrics_set_redlock(lock_core_redlock(svc.core));
    metrics_set_core(svc.core);
    if (cfg.cluster_nodes[0]) metrics_set_cluster(svc.pool);
    struct lab *lab;
    if (start_lab(&cfg, &lab, err, sizeof(err)) != 0) {
        fprintf(stderr, "inventoryd: %s\n", err);
        service_close(&svc);
        return EXIT_CONFIG;
    }
    struct api *api = api_create(&cfg, svc.inv, lab, err, sizeof(err));
    /* The server's error bodies and counts come from above it (reply, metrics). */
    static const struct http_hooks hooks = {
        .error_body = reply_error, .answered = metrics_http, .on_loop = api_on_loop};
    struct http_server *srv =
        api ? http_start(&cfg, &hooks, api_answer, api, err, sizeof(err)) : NULL;
    if (!srv) {
        fprintf(stderr, "inventoryd: %s\n", err);
        api_free(api);
        lab_free(lab);
        service_close(&svc);
        return EXIT_LISTEN;
    }
    announce(&cfg, lab);
    seed_at_start(&cfg, svc.inv);

    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "inventoryd: %s: finishing requests in flight\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    lab_stop(lab); /* a lab run sends nothing more */
    http_stop(srv);
    api_free(api); /* no request can reach a handler now */
    lab_free(lab); /* no request can reach the lab now: join its threads */
    service_close(&svc);
    fprintf(stderr, "inventoryd: stopped\n");
    return 0;
}
