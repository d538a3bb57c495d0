/* config.h -- the service's settings: defaults, a Spring-style properties
 * file, INVENTORYD_* environment variables and --set overrides.
 *
 * Precedence, lowest first: built-in defaults, the properties file, the
 * environment (INVENTORYD_SERVER_PORT overrides server.port: upper case,
 * '.' and '-' become '_'), then each --set key=value in order.
 *
 * Every value remembers where it came from ("config/x.properties:12",
 * "env INVENTORYD_SERVER_PORT", "--set", "default"), so an error can name it.
 * A struct config is filled once at start-up and read-only afterwards: it is
 * then safe to read from any thread. */
#ifndef INVENTORYD_CONFIG_H
#define INVENTORYD_CONFIG_H

#include <stddef.h>

#define CONFIG_OK 0
#define CONFIG_ERR -1

#define CONFIG_ORIGIN_MAX 256

/* The shortest admin.token accepted: a guessable token guards nothing. */
#define CONFIG_TOKEN_MIN 16

/* The number of keys in config.c's table; one origin is kept per key. */
#define CONFIG_KEY_COUNT 52

struct config {
    /* server.* */
    char bind[64]; /* server.bind, default 127.0.0.1 */
    int port; /* server.port, default 3786 */
    char context_path[128]; /* server.context-path, default /redis/distributed/lock */
    int max_connections; /* server.max-connections, default 4096 */
    int connection_timeout_s; /* server.connection-timeout-s, default 30: to deliver a whole request */
    int max_body_bytes; /* server.max-body-bytes, default 4096 */
    int io_threads; /* server.io-threads, default 2: event loops over the connections */
    char event_loop[8]; /* server.event-loop: epoll (default), or poll */
    int workers; /* server.workers, default 16: threads that answer sales and store reads */
    int connection_memory_kb; /* server.connection-memory-kb, default 16: each connection's pool */

    /* redis.* */
    char redis_host[256]; /* redis.host, default 127.0.0.1 */
    int redis_port; /* redis.port, default 6379 */
    char redis_password[256]; /* redis.password, default empty (no AUTH) */
    int redis_database; /* redis.database, default 0 */
    int redis_timeout_ms; /* redis.timeout (ms), default 2000 */
    int redis_pool_size; /* redis.pool-size, default 128 */
    char redis_unix_socket[108]; /* redis.unix-socket: the Redis on this host, by its
                                   socket's path instead of redis.host and port;
                                   default empty (TCP) */
    char cluster_nodes[512]; /* redis.cluster.nodes: host:port,... seeds of a
                                   Redis Cluster, or "" (default: no cluster) */
    int cluster_max_redirects; /* redis.cluster.max-redirects: MOVED, ASK or
                                   TRYAGAIN refusals followed per command,
                                   default 5 */
    char sentinel_nodes[512]; /* redis.sentinel.nodes: host:port,... of the
                                   sentinels; default empty = no Sentinel, use
                                   redis.host and redis.port */
    char sentinel_master[128]; /* redis.sentinel.master, default mymaster */

    /* inventory.* */
    char stock_key[128]; /* inventory.key, default inventory001 */
    int initial_stock; /* inventory.initial-stock, default 200 */
    int probe; /* inventory.probe: 1, 0, or -1 = auto (the default: on,
                                   but off in cluster mode); read it with config_probe() */

    /* lock.* */
    char strategy[32]; /* lock.strategy, default atomic */
    char lock_name[128]; /* lock.name, default RedisDistributedLock */
    int lock_ttl_ms; /* lock.ttl-ms, default 10000 */
    int lock_wait_ms; /* lock.wait-ms, default 5000; 0 = fail fast */
    int lock_spin_sleep_ms; /* lock.spin-sleep-ms, default 20 */
    int lock_retry_depth; /* lock.retry-max-depth, default 500 */
    char lock_scope[8]; /* lock.scope: global (one lock, the demo's), item
                                   (one lock per stock key) or auto (the default: item
                                   in cluster mode, else global); read it with
                                   config_lock_per_item() */
    int read_lock; /* lock.read-lock: GET /inventory takes the read
                                   lock of a Redisson RReadWriteLock */
    int lock_sync_replicas; /* lock.sync-replicas: WAIT for this many
                                   replicas after acquiring; default 0 = off */
    char lock_allowed[512]; /* lock.allowed: the strategies that may sell,
                                   comma-separated, or "all" (the default) */

    /* history.* */
    int history_enabled; /* history.enabled, default true */
    int history_max_events; /* history.max-events, default 10000 */

    /* redlock.* */
    char redlock_nodes[512]; /* redlock.nodes, default 127.0.0.1:6381,... */
    int redlock_node_timeout_ms; /* redlock.node-timeout-ms, default 50 */

    /* zookeeper.*: the zookeeper strategies' store */
    char zookeeper_connect[512]; /* zookeeper.connect, host:port,...; default empty:
                                   not configured (those strategies answer 503) */
    int zookeeper_session_timeout_ms; /* zookeeper.session-timeout-ms, default 4000 */

    /* mysql.*: the mysql strategies' store (MariaDB or MySQL) */
    char mysql_host[256]; /* mysql.host; default empty: not configured */
    int mysql_port; /* mysql.port, default 3306 */
    char mysql_user[128]; /* mysql.user, default root */
    char mysql_password[256]; /* mysql.password, default empty; never echoed */
    char mysql_database[128]; /* mysql.database, default inventoryd */

    /* lab.* */
    int lab_enabled; /* lab.enabled, default false: POST /lab/runs and
                                   the other lab endpoints exist only when true */
    char lab_target[300]; /* lab.target: host:port a run's load goes to;
                                   default empty = this instance */
    char lab_instances[600]; /* lab.instances: the instances behind lab.target,
                                   host:port,host:port; a scenario's sale A goes to
                                   the first, B to the second; empty = lab.target */
    char lab_results_dir[256]; /* lab.results-dir, default results: where
                                   GET /lab/results/<name> reads demo.csv,
                                   matrix.csv, campaign.csv and
                                   campaign-counterexample.json (relative to the
                                   working directory) */

    /* faults.* */
    int faults_enabled; /* faults.enabled, default false */
    int faults_max_hold_ms; /* faults.max-hold-ms, default 60000 */

    /* admin.* */
    char admin_token[128]; /* admin.token: empty (the default: nothing
                                   needs a token), or CONFIG_TOKEN_MIN to 127
                                   visible ASCII characters, which a reset,
                                   a lab run and any fault parameter must then
                                   carry as "Authorization: Bearer <token>".
                                   Secret: never echoed, masked in config_dump */

    /* Where each key's value came from, in config.c's table order; read it
     * with config_origin(). An empty string means "default". */
    char origins[CONFIG_KEY_COUNT][CONFIG_ORIGIN_MAX];
};

/* Fills cfg with the built-in defaults. Never fails. */
void config_defaults(struct config *cfg);

/* Reads a properties file into cfg. Lines are `key=value` or `key: value`;
 * blank lines and lines starting with '#' or '!' are ignored; whitespace
 * around keys and values is trimmed.
 * On error CONFIG_ERR is returned and errstr holds "FILE:LINE: key: why".
 * Unknown keys are not errors: each gets a line in warnings (if not NULL),
 * "FILE:LINE: unknown key 'x' ignored\n", up to warnings_len bytes. */
int config_load_file(struct config *cfg, const char *path, char *errstr, size_t errlen,
                     char *warnings, size_t warnings_len);

/* Applies INVENTORYD_* variables from envp (NULL-terminated, as environ).
 * Unknown INVENTORYD_* names are warnings, as for the file. */
int config_load_env(struct config *cfg, char *const *envp, char *errstr, size_t errlen,
                    char *warnings, size_t warnings_len);

/* Applies one "key=value" (from --set). An unknown key is an error here:
 * a typo on the command line should not pass silently. */
int config_set(struct config *cfg, const char *assignment, char *errstr, size_t errlen);

/* Applies one key and value, recording origin (copied). Returns CONFIG_ERR
 * with "ORIGIN: key: why" in errstr for a bad value or an unknown key. */
int config_apply(struct config *cfg, const char *key, const char *value, const char *origin,
                 char *errstr, size_t errlen);

/* Checks what no single key can: that inventory.key can name a stock key,
 * that lock.strategy and every name in lock.allowed is one of names
 * (NULL-terminated), that lock.strategy is allowed, that lock.name is none
 * of any item's keys (P:..., {P}, {P}:...), and that a server.bind outside
 * 127.0.0.0/8 comes with an admin.token. Returns CONFIG_OK, or CONFIG_ERR
 * with "ORIGIN: key: why". */
int config_check(const struct config *cfg, const char *const *names, char *errstr, size_t errlen);

/* Whether strategy name may sell under lock.allowed. */
int config_allows(const struct config *cfg, const char *name);

/* What the deployment mode makes of lock.scope and inventory.probe when
 * they are auto: cluster mode (redis.cluster.nodes) needs one lock per item
 * and no probe, so redis.cluster.nodes alone turns cluster mode on. */
int config_lock_per_item(const struct config *cfg);
int config_probe(const struct config *cfg);

/* Where key's current value came from: "FILE:LINE", "env NAME", "--set" or
 * "default". NULL for an unknown key. The string lives as long as cfg. */
const char *config_origin(const struct config *cfg, const char *key);

/* Writes "key=value\n" for every key, with redis.password and admin.token
 * masked, into buf.
 * Returns the length that was needed (as snprintf). */
size_t config_dump(const struct config *cfg, char *buf, size_t len);

#endif
