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
#include "config.h"
#include "http.h"
#include "inventory.h"
#include "lock.h"
#include "metrics.h"
#include "rpool.h"
#include "sentinel.h"

#define EXIT_CONFIG 2
#define EXIT_LISTEN 3

extern char **environ;

static void usage(FILE *out) {
    fprintf(out,
            "usage: inventoryd [--config FILE] [--set key=value]... [--list-strategies]\n"
            "                  [--check-config] [--help]\n"
            "  --config FILE      properties file (default: config/inventoryd.properties if present)\n"
            "  --set key=value    override one setting; repeatable; applied after the file and env\n"
            "  --list-strategies  print every strategy name and exit\n"
            "  --check-config     print the effective settings and exit\n"
            "Any key can also be set as INVENTORYD_<KEY> (server.port -> INVENTORYD_SERVER_PORT).\n");
}

static void print_warnings(const char *w) {
    if (w[0]) fputs(w, stderr);
}

int main(int argc, char **argv) {
    const char *config_path = NULL;
    int list = 0, check = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config_path = argv[++i];
        } else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            i++;   /* applied below, after the file and the environment */
        } else if (strcmp(argv[i], "--list-strategies") == 0) {
            list = 1;
        } else if (strcmp(argv[i], "--check-config") == 0) {
            check = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "inventoryd: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return EXIT_CONFIG;
        }
    }
    if (list) {
        for (int i = 0; lock_types[i]; i++) printf("%s\n", lock_types[i]->name);
        return 0;
    }

    static struct config cfg;
    char err[512], warnings[4096];
    config_defaults(&cfg);
    if (!config_path && access("config/inventoryd.properties", R_OK) == 0)
        config_path = "config/inventoryd.properties";
    if (config_path) {
        int rc = config_load_file(&cfg, config_path, err, sizeof(err), warnings, sizeof(warnings));
        print_warnings(warnings);
        if (rc != CONFIG_OK) {
            fprintf(stderr, "inventoryd: %s\n", err);
            return EXIT_CONFIG;
        }
    }
    int rc = config_load_env(&cfg, environ, err, sizeof(err), warnings, sizeof(warnings));
    print_warnings(warnings);
    if (rc != CONFIG_OK) {
        fprintf(stderr, "inventoryd: %s\n", err);
        return EXIT_CONFIG;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--set") == 0 && i + 1 < argc) {
            if (config_set(&cfg, argv[++i], err, sizeof(err)) != CONFIG_OK) {
                fprintf(stderr, "inventoryd: %s\n", err);
                return EXIT_CONFIG;
            }
        } else if (strcmp(argv[i], "--config") == 0) {
            i++;
        }
    }
    if (!lock_type_find(cfg.strategy)) {
        char names[512];
        lock_type_names(names, sizeof(names));
        fprintf(stderr, "inventoryd: %s: lock.strategy: unknown strategy '%s' (known: %s)\n",
                config_origin(&cfg, "lock.strategy"), cfg.strategy, names);
        return EXIT_CONFIG;
    }
    if (cfg.sentinel_nodes[0]) {
        struct sentinel_node nodes[SENTINEL_MAX];
        if (sentinel_parse(cfg.sentinel_nodes, nodes, SENTINEL_MAX, err, sizeof(err)) < 0) {
            fprintf(stderr, "inventoryd: %s: redis.sentinel.nodes: %s\n",
                    config_origin(&cfg, "redis.sentinel.nodes"), err);
            return EXIT_CONFIG;
        }
    }
    if (check) {
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

    struct rpool_options po = {
        .host = cfg.redis_host, .port = cfg.redis_port, .password = cfg.redis_password,
        .sentinels = cfg.sentinel_nodes, .master_name = cfg.sentinel_master,
        .database = cfg.redis_database, .timeout_ms = cfg.redis_timeout_ms,
        .size = cfg.redis_pool_size,
    };
    struct rpool *pool = rpool_create(&po);
    static struct inventory inv;
    if (!pool || inventory_init(&inv, &cfg, pool, err, sizeof(err)) != 0) {
        /* The message names its key; say where that key's value came from. */
        char key[64] = "";
        sscanf(err, "%63[a-z.-]:", key);
        const char *origin = pool ? config_origin(&cfg, key) : NULL;
        fprintf(stderr, "inventoryd: %s%s%s\n", origin ? origin : "", origin ? ": " : "",
                pool ? err : "out of memory");
        inventory_free(&inv);
        rpool_free(pool);
        return pool ? EXIT_CONFIG : 1;
    }
    metrics_set_redlock(inv.redlock);
    struct http_server *srv = http_start(&cfg, &inv, err, sizeof(err));
    if (!srv) {
        fprintf(stderr, "inventoryd: %s\n", err);
        inventory_free(&inv);
        rpool_free(pool);
        return EXIT_LISTEN;
    }
    if (cfg.sentinel_nodes[0])
        fprintf(stderr, "inventoryd: listening on http://%s:%d (default strategy %s, redis master "
                "%s via sentinels %s)\n", cfg.bind, cfg.port, cfg.strategy, cfg.sentinel_master,
                cfg.sentinel_nodes);
    else
        fprintf(stderr, "inventoryd: listening on http://%s:%d (default strategy %s, redis %s:%d)\n",
                cfg.bind, cfg.port, cfg.strategy, cfg.redis_host, cfg.redis_port);
    int seeded = 0;
    if (inventory_ping(&inv, err, sizeof(err)) != 0 ||
        inventory_seed(&inv, cfg.initial_stock, &seeded, err, sizeof(err)) != 0)
        fprintf(stderr, "inventoryd: warning: %s; sales answer 503 until Redis is back\n", err);
    else if (seeded)
        fprintf(stderr, "inventoryd: %s did not exist: seeded with inventory.initial-stock=%d\n",
                cfg.stock_key, cfg.initial_stock);

    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "inventoryd: %s: finishing requests in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    http_stop(srv);
    lock_core_shutdown();
    inventory_free(&inv);
    inventory_batches_free();
    rpool_free(pool);
    fprintf(stderr, "inventoryd: stopped\n");
    return 0;
}
