/* config.c -- the service's settings.
 *
 * DESIGN
 * One static table (keys[]) names every key once: its type, its limits, the
 * field of struct config it fills and its default, written as the text a
 * user would type. Defaults, the properties file, the environment and --set
 * all go through the same parser (apply_value), so a default obeys the same
 * rules as a user's value and there is one place to add a key.
 *
 * Each struct config carries one origin string per key ("default",
 * "FILE:LINE", "env NAME", "--set"), so an error found later can say where
 * the value came from.
 *
 * Threads: only start-up code calls the loaders, on one thread; a filled
 * struct config is read-only afterwards. Not thread safe while loading
 * (strerror). No output: errors and warnings go to the caller's buffers. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "config.h"
#include "addr.h"
#include "item.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum key_type {
    KEY_INT, /* whole number within [min, max] */
    KEY_BOOL, /* true/false, yes/no, on/off, 1/0 */
    KEY_AUTOBOOL, /* "auto" (stored as -1: the deployment mode decides) or a boolean */
    KEY_STRING, /* at most size-1 bytes; at least min bytes */
    KEY_NAME, /* a non-empty string of [a-z0-9-] */
    KEY_PATH, /* a URL path starting with '/', stored without trailing '/' */
    KEY_CHOICE, /* one of the '|'-separated words in choices */
    KEY_ADDRS, /* host:port,... (addr.h), at most max entries; empty when min is 0 */
    KEY_NAMES, /* "all" or names [a-z0-9-] separated by commas */
    KEY_TOKEN, /* empty, or at least min visible ASCII characters; secret */
};

struct config_key {
    const char *name;
    enum key_type type;
    size_t offset; /* into struct config */
    size_t size; /* of that field */
    long long min, max; /* KEY_INT: the range; KEY_STRING: min = min length */
    int secret; /* never echoed, masked in config_dump */
    const char *def; /* the default, as text */
    const char *choices; /* KEY_CHOICE: "global|item" */
};

#define FIELD_SIZE(f) sizeof(((struct config *)0)->f)
#define K_INT(n, f, d, lo, hi)                                                                     \
    { n, KEY_INT, offsetof(struct config, f), FIELD_SIZE(f), lo, hi, 0, d, NULL }
#define K_BOOL(n, f, d)                                                                            \
    { n, KEY_BOOL, offsetof(struct config, f), FIELD_SIZE(f), 0, 1, 0, d, NULL }
#define K_AUTOBOOL(n, f)                                                                           \
    { n, KEY_AUTOBOOL, offsetof(struct config, f), FIELD_SIZE(f), 0, 1, 0, "auto", NULL }
#define K_STR(n, f, d, minlen, secret)                                                             \
    { n, KEY_STRING, offsetof(struct config, f), FIELD_SIZE(f), minlen, 0, secret, d, NULL }
#define K_NAME(n, f, d)                                                                            \
    { n, KEY_NAME, offsetof(struct config, f), FIELD_SIZE(f), 1, 0, 0, d, NULL }
#define K_PATH(n, f, d)                                                                            \
    { n, KEY_PATH, offsetof(struct config, f), FIELD_SIZE(f), 1, 0, 0, d, NULL }
#define K_CHOICE(n, f, d, c)                                                                       \
    { n, KEY_CHOICE, offsetof(struct config, f), FIELD_SIZE(f), 1, 0, 0, d, c }
#define K_ADDRS(n, f, d, minn, maxn)                                                               \
    { n, KEY_ADDRS, offsetof(struct config, f), FIELD_SIZE(f), minn, maxn, 0, d, NULL }
#define K_NAMES(n, f, d)                                                                           \
    { n, KEY_NAMES, offsetof(struct config, f), FIELD_SIZE(f), 1, 0, 0, d, NULL }
#define K_TOKEN(n, f, minlen)                                                                      \
    { n, KEY_TOKEN, offsetof(struct config, f), FIELD_SIZE(f), minlen, 0, 1, "", NULL }

static const struct config_key keys[] = {
    K_STR("server.bind", bind, "127.0.0.1", 1, 0),
    K_INT("server.port", port, "3786", 1, 65535),
    K_PATH("server.context-path", context_path, "/redis/distributed/lock"),
    K_INT("server.max-connections", max_connections, "4096", 1, 1000000),
    K_INT("server.connection-timeout-s", connection_timeout_s, "30", 0, 86400),
    K_INT("server.max-body-bytes", max_body_bytes, "4096", 1, 16777216),
    K_INT("server.io-threads", io_threads, "2", 1, 64),
    K_CHOICE("server.event-loop", event_loop, "epoll", "epoll|poll"),
    K_INT("server.workers", workers, "16", 1, 4096),
    K_INT("server.connection-memory-kb", connection_memory_kb, "16", 8, 1024),

    K_STR("redis.host", redis_host, "127.0.0.1", 1, 0),
    K_INT("redis.port", redis_port, "6379", 1, 65535),
    K_STR("redis.password", redis_password, "", 0, 1),
    K_INT("redis.database", redis_database, "0", 0, 1000000),
    K_INT("redis.timeout", redis_timeout_ms, "2000", 1, 600000),
    K_INT("redis.pool-size", redis_pool_size, "128", 1, 10000),
    K_STR("redis.unix-socket", redis_unix_socket, "", 0, 0),
    K_ADDRS("redis.sentinel.nodes", sentinel_nodes, "", 0, 16),
    K_STR("redis.sentinel.master", sentinel_master, "mymaster", 1, 0),
    K_ADDRS("redis.cluster.nodes", cluster_nodes, "", 0, 16),
    K_INT("redis.cluster.max-redirects", cluster_max_redirects, "5", 0, 16),

    K_STR("inventory.key", stock_key, "inventory001", 1, 0),
    K_INT("inventory.initial-stock", initial_stock, "200", 0, 1000000000),
    K_AUTOBOOL("inventory.probe", probe),

    K_NAME("lock.strategy", strategy, "atomic"),
    K_STR("lock.name", lock_name, "RedisDistributedLock", 1, 0),
    K_INT("lock.ttl-ms", lock_ttl_ms, "10000", 1, 86400000),
    K_INT("lock.wait-ms", lock_wait_ms, "5000", 0, 600000),
    K_INT("lock.spin-sleep-ms", lock_spin_sleep_ms, "20", 0, 60000),
    K_INT("lock.retry-max-depth", lock_retry_depth, "500", 1, 100000),
    K_CHOICE("lock.scope", lock_scope, "auto", "auto|global|item"),
    K_BOOL("lock.read-lock", read_lock, "false"),
    K_NAMES("lock.allowed", lock_allowed, "all"),
    K_INT("lock.sync-replicas", lock_sync_replicas, "0", 0, 1000),

    K_ADDRS("redlock.nodes", redlock_nodes, "127.0.0.1:6381,127.0.0.1:6382,127.0.0.1:6383", 1, 9),
    K_INT("redlock.node-timeout-ms", redlock_node_timeout_ms, "50", 1, 60000),

    K_ADDRS("zookeeper.connect", zookeeper_connect, "", 0, 9),
    K_INT("zookeeper.session-timeout-ms", zookeeper_session_timeout_ms, "4000", 1, 600000),

    K_STR("mysql.host", mysql_host, "", 0, 0),
    K_INT("mysql.port", mysql_port, "3306", 1, 65535),
    K_STR("mysql.user", mysql_user, "root", 1, 0),
    K_STR("mysql.password", mysql_password, "", 0, 1),
    K_STR("mysql.database", mysql_database, "inventoryd", 1, 0),

    K_BOOL("history.enabled", history_enabled, "true"),
    K_INT("history.max-events", history_max_events, "10000", 1, 10000000),

    K_BOOL("lab.enabled", lab_enabled, "false"),
    K_ADDRS("lab.target", lab_target, "", 0, 1),
    K_ADDRS("lab.instances", lab_instances, "", 0, 2),
    K_STR("lab.results-dir", lab_results_dir, "results", 1, 0),

    K_BOOL("faults.enabled", faults_enabled, "false"),
    K_INT("faults.max-hold-ms", faults_max_hold_ms, "60000", 0, 3600000),

    K_TOKEN("admin.token", admin_token, CONFIG_TOKEN_MIN),
};

#define NKEYS (sizeof keys / sizeof keys[0])
_Static_assert(NKEYS == CONFIG_KEY_COUNT, "CONFIG_KEY_COUNT must match keys[]");

#define ENV_PREFIX "INVENTORYD_"
/* How much of a bad value an error message repeats. */
#define ECHO_MAX 64

static void set_err(char *errstr, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *errstr, size_t errlen, const char *fmt, ...) {
    va_list ap;
    if (errstr == NULL || errlen == 0) return;
    va_start(ap, fmt);
    vsnprintf(errstr, errlen, fmt, ap);
    va_end(ap);
}

/* Appends one formatted line to warnings, keeping it NUL-terminated and
 * dropping what does not fit. */
static void add_warning(char *warnings, size_t warnings_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_warning(char *warnings, size_t warnings_len, const char *fmt, ...) {
    va_list ap;
    size_t used;
    if (warnings == NULL || warnings_len == 0) return;
    used = strnlen(warnings, warnings_len - 1);
    va_start(ap, fmt);
    vsnprintf(warnings + used, warnings_len - used, fmt, ap);
    va_end(ap);
}

static const struct config_key *find_key(const char *name) {
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].name, name) == 0) return &keys[i];
    return NULL;
}

/* Stores origin for key k; an origin too long to keep keeps its tail, which
 * holds the file name and the line number. */
static void set_origin(struct config *cfg, const struct config_key *k, const char *origin) {
    char *dst = cfg->origins[k - keys];
    size_t n = strlen(origin);
    if (n < CONFIG_ORIGIN_MAX) {
        memcpy(dst, origin, n + 1);
    } else {
        memcpy(dst, "...", 3);
        memcpy(dst + 3, origin + n - (CONFIG_ORIGIN_MAX - 4), CONFIG_ORIGIN_MAX - 4);
        dst[CONFIG_ORIGIN_MAX - 1] = '\0';
    }
}

/* Strict: an optional '-', then digits and nothing else. */
static int parse_int(const char *s, long long *out) {
    const char *p = s;
    if (*p == '-') p++;
    if (*p == '\0') return -1;
    for (; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    errno = 0;
    *out = strtoll(s, NULL, 10);
    if (errno == ERANGE) return 1;
    return 0;
}

static int parse_bool(const char *s, int *out) {
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* ---- one checker per key type ---------------------------------------------
 * Each checks value against k and stores it in field; on error it leaves
 * field untouched, writes "ORIGIN: key: why" and returns CONFIG_ERR. */

typedef int (*key_check)(const struct config_key *k, const char *value, char *field,
                         const char *origin, char *errstr, size_t errlen);

static int check_int(const struct config_key *k, const char *value, char *field, const char *origin,
                     char *errstr, size_t errlen) {
    long long v;
    int rc = parse_int(value, &v);
    if (rc < 0) {
        set_err(errstr, errlen, "%s: %s: '%.*s' is not a whole number", origin, k->name, ECHO_MAX,
                value);
        return CONFIG_ERR;
    }
    if (rc > 0 || v < k->min || v > k->max) {
        set_err(errstr, errlen, "%s: %s: %.*s is out of range (%lld..%lld)", origin, k->name,
                ECHO_MAX, value, k->min, k->max);
        return CONFIG_ERR;
    }
    *(int *)(void *)field = (int)v;
    return CONFIG_OK;
}

static int check_bool(const struct config_key *k, const char *value, char *field,
                      const char *origin, char *errstr, size_t errlen) {
    int b;
    if (parse_bool(value, &b) != 0) {
        set_err(errstr, errlen,
                "%s: %s: '%.*s' is not a boolean (use true/false, yes/no, on/off or 1/0)", origin,
                k->name, ECHO_MAX, value);
        return CONFIG_ERR;
    }
    *(int *)(void *)field = b;
    return CONFIG_OK;
}

static int check_autobool(const struct config_key *k, const char *value, char *field,
                          const char *origin, char *errstr, size_t errlen) {
    if (strcasecmp(value, "auto") == 0) {
        *(int *)(void *)field = -1;
        return CONFIG_OK;
    }
    int b;
    if (parse_bool(value, &b) != 0) {
        set_err(errstr, errlen,
                "%s: %s: '%.*s' is neither auto nor a boolean (use auto, "
                "true/false, yes/no, on/off or 1/0)",
                origin, k->name, ECHO_MAX, value);
        return CONFIG_ERR;
    }
    *(int *)(void *)field = b;
    return CONFIG_OK;
}

static int check_choice(const struct config_key *k, const char *value, char *field,
                        const char *origin, char *errstr, size_t errlen) {
    size_t wl = strlen(value);
    const char *c = k->choices;
    int found = 0;
    while (*c && !found) {
        size_t n = strcspn(c, "|");
        found = n == wl && wl > 0 && strncmp(c, value, n) == 0;
        c += n + (c[n] == '|');
    }
    if (!found) {
        set_err(errstr, errlen, "%s: %s: '%.*s' is not one of %s", origin, k->name, ECHO_MAX, value,
                k->choices);
        return CONFIG_ERR;
    }
    memcpy(field, value, wl + 1);
    return CONFIG_OK;
}

/* Stores len bytes of value when they fit. Values of secret keys are never
 * repeated in a message. */
static int store_string(const struct config_key *k, const char *value, size_t len, char *field,
                        const char *origin, char *errstr, size_t errlen) {
    if (len < (size_t)k->min) {
        set_err(errstr, errlen, "%s: %s: must not be empty", origin, k->name);
        return CONFIG_ERR;
    }
    if (len >= k->size) {
        set_err(errstr, errlen, "%s: %s: value is too long (%zu characters, at most %zu)", origin,
                k->name, len, k->size - 1);
        return CONFIG_ERR;
    }
    memcpy(field, value, len);
    field[len] = '\0';
    return CONFIG_OK;
}

static int check_string(const struct config_key *k, const char *value, char *field,
                        const char *origin, char *errstr, size_t errlen) {
    return store_string(k, value, strlen(value), field, origin, errstr, errlen);
}

/* A name: [a-z0-9-]. */
static int name_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return 0;
    return 1;
}

static int check_name(const struct config_key *k, const char *value, char *field,
                      const char *origin, char *errstr, size_t errlen) {
    if (!name_valid(value, strlen(value))) {
        set_err(errstr, errlen, "%s: %s: '%.*s' may contain only a-z, 0-9 and '-'", origin, k->name,
                ECHO_MAX, value);
        return CONFIG_ERR;
    }
    return check_string(k, value, field, origin, errstr, errlen);
}

/* "all", or names separated by commas (spaces around them forgiven). */
static int check_names(const struct config_key *k, const char *value, char *field,
                       const char *origin, char *errstr, size_t errlen) {
    for (const char *p = value; *p;) {
        size_t n = strcspn(p, ",");
        const char *w = p, *e = p + n;
        while (w < e && (*w == ' ' || *w == '\t')) w++;
        while (e > w && (e[-1] == ' ' || e[-1] == '\t')) e--;
        if (e == w || !name_valid(w, (size_t)(e - w))) {
            set_err(errstr, errlen,
                    "%s: %s: '%.*s' is not a list of names (a-z, 0-9, '-') "
                    "separated by commas",
                    origin, k->name, ECHO_MAX, value);
            return CONFIG_ERR;
        }
        p += n + (p[n] == ',');
    }
    return check_string(k, value, field, origin, errstr, errlen);
}

static int check_path(const struct config_key *k, const char *value, char *field,
                      const char *origin, char *errstr, size_t errlen) {
    size_t len = strlen(value);
    if (len > 0 && value[0] != '/') {
        set_err(errstr, errlen, "%s: %s: '%.*s' must start with '/'", origin, k->name, ECHO_MAX,
                value);
        return CONFIG_ERR;
    }
    for (const char *p = value; *p; p++) {
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p) || *p == '?' || *p == '#') {
            set_err(errstr, errlen, "%s: %s: '%.*s' may not contain spaces, '?' or '#'", origin,
                    k->name, ECHO_MAX, value);
            return CONFIG_ERR;
        }
    }
    /* "/a/b/" and "/a/b" name the same prefix; "/" stays "/". */
    while (len > 1 && value[len - 1] == '/') len--;
    return store_string(k, value, len, field, origin, errstr, errlen);
}

/* host:port,... with at most k->max entries; empty when k->min is 0. */
static int check_addrs(const struct config_key *k, const char *value, char *field,
                       const char *origin, char *errstr, size_t errlen) {
    if (value[0] != '\0' || k->min > 0) {
        struct addr a[64];
        char why[128];
        int max = k->max < 64 ? (int)k->max : 64;
        if (addr_list_parse(value, a, max, why, sizeof(why)) < 0) {
            set_err(errstr, errlen, "%s: %s: %s", origin, k->name, why);
            return CONFIG_ERR;
        }
    }
    return check_string(k, value, field, origin, errstr, errlen);
}

/* A token: empty (none), or at least k->min characters a header can carry
 * and a shell can pass unquoted, 0x21 to 0x7e. The value is never repeated. */
static int check_token(const struct config_key *k, const char *value, char *field,
                       const char *origin, char *errstr, size_t errlen) {
    size_t len = strlen(value);
    if (len == 0) { /* no token */
        field[0] = '\0';
        return CONFIG_OK;
    }
    if (len < (size_t)k->min) {
        set_err(errstr, errlen,
                "%s: %s: the token is shorter than %lld characters; pick a "
                "random one, e.g. the output of od -An -tx1 -N24 /dev/urandom | tr -d ' \\n'",
                origin, k->name, k->min);
        return CONFIG_ERR;
    }
    for (const char *p = value; *p; p++) {
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e) {
            set_err(errstr, errlen,
                    "%s: %s: the token may hold only visible ASCII characters "
                    "(no spaces, no control characters)",
                    origin, k->name);
            return CONFIG_ERR;
        }
    }
    return store_string(k, value, len, field, origin, errstr, errlen);
}

static const key_check checks[] = {
    [KEY_INT] = check_int,           [KEY_BOOL] = check_bool,   [KEY_STRING] = check_string,
    [KEY_AUTOBOOL] = check_autobool, [KEY_NAME] = check_name,   [KEY_PATH] = check_path,
    [KEY_CHOICE] = check_choice,     [KEY_ADDRS] = check_addrs, [KEY_NAMES] = check_names,
    [KEY_TOKEN] = check_token,
};

/* Checks value against k and stores it; on error leaves cfg untouched and
 * writes "ORIGIN: key: why". */
static int apply_value(struct config *cfg, const struct config_key *k, const char *value,
                       const char *origin, char *errstr, size_t errlen) {
    char *field = (char *)cfg + k->offset;
    if (checks[k->type](k, value, field, origin, errstr, errlen) != CONFIG_OK) return CONFIG_ERR;
    set_origin(cfg, k, origin);
    return CONFIG_OK;
}

void config_defaults(struct config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NKEYS; i++) {
        /* The table's defaults are valid; check_config's "Core" case proves it. */
        (void)apply_value(cfg, &keys[i], keys[i].def, "default", NULL, 0);
    }
}

int config_apply(struct config *cfg, const char *key, const char *value, const char *origin,
                 char *errstr, size_t errlen) {
    const struct config_key *k = find_key(key);
    if (k == NULL) {
        set_err(errstr, errlen, "%s: unknown key '%.*s'", origin, ECHO_MAX, key);
        return CONFIG_ERR;
    }
    return apply_value(cfg, k, value, origin, errstr, errlen);
}

/* Trims s in place; returns the first non-space character. */
static char *trim(char *s) {
    char *end;
    while (isspace((unsigned char)*s)) s++;
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) end--;
    *end = '\0';
    return s;
}

/* Warnings are cleared first, so each call reports only its own. Keys before
 * a bad line have already been applied when CONFIG_ERR is returned; the
 * caller is expected to stop. */
int config_load_file(struct config *cfg, const char *path, char *errstr, size_t errlen,
                     char *warnings, size_t warnings_len) {
    FILE *fp;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long lineno = 0;
    int rc = CONFIG_OK;

    if (warnings != NULL && warnings_len > 0) warnings[0] = '\0';
    fp = fopen(path, "r");
    if (fp == NULL) {
        set_err(errstr, errlen, "%s: cannot open: %s", path, strerror(errno));
        return CONFIG_ERR;
    }
    while ((n = getline(&line, &cap, fp)) != -1) {
        char *s = line, *sep, *key, *value;
        char origin[4096 + 32];

        lineno++;
        if (lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0) s += 3; /* UTF-8 BOM */
        if ((size_t)n != strlen(line)) {
            set_err(errstr, errlen, "%s:%lu: line contains a NUL byte", path, lineno);
            rc = CONFIG_ERR;
            break;
        }
        s = trim(s); /* also drops the '\r' of CRLF files */
        if (*s == '\0' || *s == '#' || *s == '!') continue;

        snprintf(origin, sizeof origin, "%s:%lu", path, lineno);
        sep = strpbrk(s, "=:");
        if (sep == NULL) {
            set_err(errstr, errlen, "%s: expected key=value", origin);
            rc = CONFIG_ERR;
            break;
        }
        *sep = '\0';
        key = trim(s);
        value = trim(sep + 1);
        if (*key == '\0') {
            set_err(errstr, errlen, "%s: expected key=value", origin);
            rc = CONFIG_ERR;
            break;
        }
        if (find_key(key) == NULL) {
            add_warning(warnings, warnings_len, "%s: unknown key '%.*s' ignored\n", origin,
                        ECHO_MAX, key);
            continue;
        }
        if (config_apply(cfg, key, value, origin, errstr, errlen) != CONFIG_OK) {
            rc = CONFIG_ERR;
            break;
        }
    }
    if (rc == CONFIG_OK && ferror(fp)) {
        set_err(errstr, errlen, "%s: read error: %s", path, strerror(errno));
        rc = CONFIG_ERR;
    }
    free(line);
    fclose(fp);
    return rc;
}

/* Writes key's variable name (INVENTORYD_SERVER_PORT) into buf. */
static void env_name(const char *key, char *buf, size_t len) {
    size_t i = strlen(ENV_PREFIX);
    memcpy(buf, ENV_PREFIX, i);
    for (; *key && i + 1 < len; key++, i++) {
        char c = *key;
        buf[i] = (c == '.' || c == '-') ? '_' : (char)toupper((unsigned char)c);
    }
    buf[i] = '\0';
}

/* Warnings are cleared first, as for config_load_file. Values are taken as
 * they are, without trimming. */
int config_load_env(struct config *cfg, char *const *envp, char *errstr, size_t errlen,
                    char *warnings, size_t warnings_len) {
    if (warnings != NULL && warnings_len > 0) warnings[0] = '\0';
    if (envp == NULL) return CONFIG_OK;
    for (; *envp != NULL; envp++) {
        const char *var = *envp, *eq;
        const struct config_key *k = NULL;
        size_t namelen;
        char origin[CONFIG_ORIGIN_MAX];

        if (strncmp(var, ENV_PREFIX, strlen(ENV_PREFIX)) != 0) continue;
        eq = strchr(var, '=');
        if (eq == NULL) continue;
        namelen = (size_t)(eq - var);
        for (size_t i = 0; i < NKEYS && k == NULL; i++) {
            char name[128];
            env_name(keys[i].name, name, sizeof name);
            if (strlen(name) == namelen && memcmp(name, var, namelen) == 0) k = &keys[i];
        }
        snprintf(origin, sizeof origin, "env %.*s", (int)(namelen < 200 ? namelen : 200), var);
        if (k == NULL) {
            add_warning(warnings, warnings_len, "%s: unknown key ignored\n", origin);
            continue;
        }
        if (apply_value(cfg, k, eq + 1, origin, errstr, errlen) != CONFIG_OK) return CONFIG_ERR;
    }
    return CONFIG_OK;
}

int config_set(struct config *cfg, const char *assignment, char *errstr, size_t errlen) {
    char buf[1024];
    char *eq, *key, *value;
    size_t len = strlen(assignment);

    if (len >= sizeof buf) {
        set_err(errstr, errlen, "--set: assignment is too long (%zu characters, at most %zu)", len,
                sizeof buf - 1);
        return CONFIG_ERR;
    }
    memcpy(buf, assignment, len + 1);
    eq = strchr(buf, '=');
    if (eq == NULL) {
        /* Not repeated: it may be a mistyped secret. */
        set_err(errstr, errlen, "--set: expected key=value");
        return CONFIG_ERR;
    }
    *eq = '\0';
    key = trim(buf);
    value = trim(eq + 1);
    if (*key == '\0') {
        set_err(errstr, errlen, "--set: expected key=value");
        return CONFIG_ERR;
    }
    return config_apply(cfg, key, value, "--set", errstr, errlen);
}

static int name_known(const char *name, size_t n, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && strncmp(names[i], name, n) == 0) return 1;
    return 0;
}

/* Calls fn on each trimmed name of a comma list until it returns nonzero. */
static int each_name(const char *list, int (*fn)(const char *w, size_t n, const void *arg),
                     const void *arg) {
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        const char *w = p, *e = p + n;
        while (w < e && (*w == ' ' || *w == '\t')) w++;
        while (e > w && (e[-1] == ' ' || e[-1] == '\t')) e--;
        int rc = fn(w, (size_t)(e - w), arg);
        if (rc) return rc;
        p += n + (p[n] == ',');
    }
    return 0;
}

static int unknown_name(const char *w, size_t n, const void *arg) {
    return !(n == 3 && strncmp(w, "all", 3) == 0) && !name_known(w, n, arg);
}

struct match {
    const char *name;
};

static int same_name(const char *w, size_t n, const void *arg) {
    const struct match *m = arg;
    return (n == 3 && strncmp(w, "all", 3) == 0) ||
           (strlen(m->name) == n && strncmp(w, m->name, n) == 0);
}

int config_allows(const struct config *cfg, const char *name) {
    struct match m = {name};
    return each_name(cfg->lock_allowed, same_name, &m);
}

/* The names, comma-separated, into buf. */
static void join_names(const char *const *names, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; names[i] && off < len; i++) {
        int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", names[i]);
        if (n < 0) break;
        off += (size_t)n;
    }
}

/* Cluster mode's rules: what cannot share a cluster, said with its reason. */
static int cluster_check(const struct config *cfg, char *errstr, size_t errlen) {
    const char *at = config_origin(cfg, "redis.cluster.nodes");
    if (cfg->sentinel_nodes[0]) {
        set_err(errstr, errlen,
                "%s: redis.cluster.nodes and redis.sentinel.nodes are both set: "
                "a cluster fails over by itself, without Sentinel; set one",
                at);
        return CONFIG_ERR;
    }
    if (strcmp(cfg->lock_scope, "global") == 0) {
        set_err(errstr, errlen,
                "%s: redis.cluster.nodes needs lock.scope=item (or auto, which "
                "picks it), and lock.scope is global (%s): one global lock key lives in one slot "
                "and each item's keys in another, and a sale's scripts touch both, which a cluster "
                "refuses",
                at, config_origin(cfg, "lock.scope"));
        return CONFIG_ERR;
    }
    if (strpbrk(cfg->lock_name, "{}") || strlen(cfg->lock_name) > 100) {
        set_err(errstr, errlen,
                "%s: redis.cluster.nodes: lock.name '%.*s' must be at most 100 "
                "characters without '{' or '}': the lock key is lock.name:{item}, and a brace of "
                "its own would put the lock in another slot than the item",
                at, ECHO_MAX, cfg->lock_name);
        return CONFIG_ERR;
    }
    if (cfg->redis_database != 0) {
        set_err(errstr, errlen,
                "%s: redis.cluster.nodes: a cluster has database 0 only, and "
                "redis.database is %d",
                at, cfg->redis_database);
        return CONFIG_ERR;
    }
    if (cfg->probe == 1) {
        set_err(errstr, errlen,
                "%s: redis.cluster.nodes needs inventory.probe=false (or auto, "
                "which picks it), and inventory.probe is true (%s): the probe's dead-holder check "
                "reads each process's alive key, which lives in another slot; the history and "
                "inventory-check still judge overlaps",
                at, config_origin(cfg, "inventory.probe"));
        return CONFIG_ERR;
    }
    return CONFIG_OK;
}

/* Whether server.bind is an IPv4 address in 127.0.0.0/8. Anything else,
 * unparsable included, counts as reachable from outside. */
static int bind_loopback(const char *bind) {
    struct in_addr a;
    return inet_pton(AF_INET, bind, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* A reset destroys the stock, lab.enabled makes the instance a load generator
 * and faults.enabled lets a request hold the lock for a minute or kill the
 * process: off loopback, the instance needs admin.token, which then guards
 * every admin route (http.c). On loopback, only this host can reach it. */
static int admin_check(const struct config *cfg, char *errstr, size_t errlen) {
    const char *on = cfg->lab_enabled && cfg->faults_enabled
                         ? ", start load runs (lab.enabled) or inject faults (faults.enabled)"
                     : cfg->lab_enabled    ? " or start load runs (lab.enabled)"
                     : cfg->faults_enabled ? " or inject faults (faults.enabled)"
                                           : "";
    if (cfg->admin_token[0] || bind_loopback(cfg->bind)) return CONFIG_OK;
    set_err(errstr, errlen,
            "%s: server.bind: %.*s is not a loopback address (127.0.0.0/8), so anyone who "
            "reaches the port could reset the stock%s; set admin.token (at least %d "
            "characters, or the environment variable INVENTORYD_ADMIN_TOKEN) to require "
            "'Authorization: Bearer <admin.token>' for every admin route, or bind 127.0.0.1",
            config_origin(cfg, "server.bind"), ECHO_MAX, cfg->bind, on, CONFIG_TOKEN_MIN);
    return CONFIG_ERR;
}

/* The keys of an item P are P, P:<suffix> and, in cluster mode, {P}:<suffix>
 * (inventory.c), and a request may name any P of the item alphabet. A
 * lock.name of the form P:..., {P} or {P}:... would make the lock's keys
 * (lock.name, lock.name:fence, ...) some item's ledger, history or counters:
 * refused. Any other name (no ':' after an item-shaped prefix) is safe, since
 * an item may not be lock.name itself (item_check). */
static int lock_name_check(const struct config *cfg, char *errstr, size_t errlen) {
    const char *name = cfg->lock_name;
    int brace = name[0] == '{';
    const char *p = name + brace;
    size_t len = strcspn(p, brace ? "}" : ":");
    char item[ITEM_MAX + 1];
    if (len == 0 || len > ITEM_MAX) return CONFIG_OK;
    memcpy(item, p, len);
    item[len] = '\0';
    const char *after = p + len;
    if (!item_valid(item)) return CONFIG_OK;
    if (brace ? !(after[0] == '}' && (after[1] == '\0' || after[1] == ':')) : after[0] != ':')
        return CONFIG_OK;
    set_err(errstr, errlen,
            "%s: lock.name: '%.*s' is among the keys of the item '%s' (%s, %s:* and {%s}:*, "
            "where its stock, ledger, history and counters live%s): the lock would overwrite "
            "one of them; choose a lock.name without ':' after a name an item could have "
            "(A-Z, a-z, 0-9, '_', '.', '-')",
            config_origin(cfg, "lock.name"), ECHO_MAX, name, item, item, item, item,
            strcmp(item, cfg->stock_key) == 0 ? "; it is inventory.key" : "");
    return CONFIG_ERR;
}

int config_check(const struct config *cfg, const char *const *names, char *errstr, size_t errlen) {
    char known[1024];
    char why[192];
    if (item_check(cfg->stock_key, cfg->lock_name, why, sizeof(why)) != 0) {
        set_err(errstr, errlen, "%s: inventory.key: '%.*s': %s",
                config_origin(cfg, "inventory.key"), ECHO_MAX, cfg->stock_key, why);
        return CONFIG_ERR;
    }
    if (lock_name_check(cfg, errstr, errlen) != CONFIG_OK) return CONFIG_ERR;
    join_names(names, known, sizeof known);
    if (!name_known(cfg->strategy, strlen(cfg->strategy), names)) {
        set_err(errstr, errlen, "%s: lock.strategy: unknown strategy '%s' (known: %s)",
                config_origin(cfg, "lock.strategy"), cfg->strategy, known);
        return CONFIG_ERR;
    }
    if (each_name(cfg->lock_allowed, unknown_name, names)) {
        set_err(errstr, errlen, "%s: lock.allowed: '%.*s' names an unknown strategy (known: %s)",
                config_origin(cfg, "lock.allowed"), ECHO_MAX, cfg->lock_allowed, known);
        return CONFIG_ERR;
    }
    if (cfg->cluster_nodes[0] && cluster_check(cfg, errstr, errlen) != CONFIG_OK) return CONFIG_ERR;
    if (cfg->redis_unix_socket[0] && (cfg->cluster_nodes[0] || cfg->sentinel_nodes[0])) {
        set_err(errstr, errlen,
                "%s: redis.unix-socket is for one Redis on this host, and redis.%s.nodes is "
                "set: a %s names its servers by host and port; set one",
                config_origin(cfg, "redis.unix-socket"),
                cfg->cluster_nodes[0] ? "cluster" : "sentinel",
                cfg->cluster_nodes[0] ? "cluster" : "Sentinel");
        return CONFIG_ERR;
    }
    if (!config_allows(cfg, cfg->strategy)) {
        set_err(errstr, errlen, "%s: lock.allowed: '%.*s' does not allow lock.strategy '%s'",
                config_origin(cfg, "lock.allowed"), ECHO_MAX, cfg->lock_allowed, cfg->strategy);
        return CONFIG_ERR;
    }
    return admin_check(cfg, errstr, errlen);
}

int config_lock_per_item(const struct config *cfg) {
    if (strcmp(cfg->lock_scope, "auto") == 0) return cfg->cluster_nodes[0] != '\0';
    return strcmp(cfg->lock_scope, "item") == 0;
}

int config_probe(const struct config *cfg) {
    return cfg->probe < 0 ? cfg->cluster_nodes[0] == '\0' : cfg->probe;
}

const char *config_origin(const struct config *cfg, const char *key) {
    const struct config_key *k = find_key(key);
    if (k == NULL) return NULL;
    if (cfg->origins[k - keys][0] == '\0') return "default";
    return cfg->origins[k - keys];
}

/* Key k's value in cfg as text (num holds a number's digits); a secret
 * that is set is "****". */
static const char *key_text(const struct config *cfg, const struct config_key *k, char *num,
                            size_t numlen) {
    const char *field = (const char *)cfg + k->offset;
    int v = k->type == KEY_INT || k->type == KEY_BOOL || k->type == KEY_AUTOBOOL
                ? *(const int *)(const void *)field
                : 0;
    switch (k->type) {
    case KEY_INT:
        snprintf(num, numlen, "%d", v);
        return num;
    case KEY_BOOL:
        return v ? "true" : "false";
    case KEY_AUTOBOOL:
        return v < 0 ? "auto" : v ? "true" : "false";
    default:
        return (k->secret && field[0] != '\0') ? "****" : field;
    }
}

size_t config_dump(const struct config *cfg, char *buf, size_t len) {
    size_t need = 0;
    if (buf != NULL && len > 0) buf[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++) {
        char num[32];
        const char *value = key_text(cfg, &keys[i], num, sizeof(num));
        int n =
            snprintf(buf != NULL && need < len ? buf + need : NULL,
                     buf != NULL && need < len ? len - need : 0, "%s=%s\n", keys[i].name, value);
        if (n > 0) need += (size_t)n;
    }
    return need;
}
