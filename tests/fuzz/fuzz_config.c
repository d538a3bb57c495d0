/* fuzz_config.c -- libFuzzer target for the configuration parser (config.c).
 *
 * DESIGN
 * One input is used four ways, in the order of the service's precedence,
 * on one struct config:
 *   1. as a properties file, through config_defaults + config_load_file (the
 *      bytes go to one file per process, made under /dev/shm and read back
 *      through /proc/self/fd, rewritten per input);
 *   2. as an environment: split on NUL and newline, each piece that is not
 *      already INVENTORYD_* becomes one by upper-casing its name and mapping
 *      '.' and '-' to '_' (so a properties line is also a variable);
 *   3. as --set lines through config_set, and as config_apply calls whose
 *      origin is the line itself (long origins are kept by their tail);
 *   4. through config_dump, with and without room.
 * Invariants, whatever the return code (a bad value must leave cfg
 * untouched, so cfg is always valid):
 *   - after every stage, every documented range holds (ports 1..65535,
 *     booleans 0/1, ...) and every string field is NUL-terminated inside
 *     its array;
 *   - on CONFIG_ERR, errstr is NUL-terminated within errlen and not empty;
 *     warnings are NUL-terminated within their length;
 *   - after the file and at the end: config_origin names every key and is
 *     NUL-terminated; config_dump returns the length it needs, writes at
 *     most len bytes, and does not depend on the password's content:
 *     redis.password is "****" when set, empty when not;
 *   - an error about redis.password does not depend on the value's content
 *     (only its length): a secret is never echoed;
 *   - every "key=value" line of config_dump is accepted again by config_set
 *     and gives back the same line (what is stored is always valid).
 * Each check that fails calls abort() after a message on stderr, so
 * libFuzzer records the input. Not thread safe (one process, one file). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#define FUZZ_NAME "fuzz_config"
#include "fuzz_check.h"

#define SECRET_KEY "redis.password"
#define FILLER 'x'

static char path[128];
static int fd = -1;
static int named; /* the file still has its name: remove it at exit */

static void remove_file(void) {
    if (named && path[0]) unlink(path);
}

/* Opens this process's properties file, once. The file is made under
 * /dev/shm with a per-process name, then unlinked at once and read back
 * through /proc/self/fd, so a crash leaves nothing behind. Without /proc it
 * keeps its name and is removed at exit. */
static void open_file(void) {
    const char *dirs[] = {"/dev/shm", getenv("TMPDIR"), "/tmp"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && fd < 0; i++) {
        if (dirs[i] == NULL) continue;
        snprintf(path, sizeof path, "%s/fuzz_config.%ld.properties", dirs[i], (long)getpid());
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    }
    if (fd < 0) {
        perror("fuzz_config: cannot create the properties file");
        abort();
    }
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (access(proc, R_OK) == 0 && unlink(path) == 0) {
        snprintf(path, sizeof path, "%s", proc);
    } else {
        named = 1;
        atexit(remove_file);
    }
}

static void write_file(const uint8_t *data, size_t size) {
    size_t off = 0;
    if (ftruncate(fd, 0) != 0) abort();
    while (off < size) {
        ssize_t n = pwrite(fd, data + off, size - off, (off_t)off);
        if (n <= 0) abort();
        off += (size_t)n;
    }
}

/* A heap copy of [s, s+n) with a NUL, sized exactly for ASan. */
static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p == NULL) abort();
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* Splits data into pieces at any byte of seps. Returns a NULL-terminated
 * array of heap strings; free with free_pieces. */
static char **split(const uint8_t *data, size_t size, const char *seps, size_t nseps) {
    size_t count = 1, k = 0, start = 0;
    for (size_t i = 0; i < size; i++)
        if (memchr(seps, data[i], nseps)) count++;
    char **v = calloc(count + 1, sizeof *v);
    if (v == NULL) abort();
    for (size_t i = 0; i <= size; i++) {
        if (i == size || memchr(seps, data[i], nseps)) {
            v[k++] = dup_n((const char *)data + start, i - start);
            start = i + 1;
        }
    }
    return v;
}

static void free_pieces(char **v) {
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

static int nul_within(const char *s, size_t n) { return memchr(s, '\0', n) != NULL; }

#define STR_OK(f) CHECK(nul_within(cfg->f, sizeof cfg->f), "%s is not NUL-terminated", #f)
#define RANGE(f, lo, hi)                                                                           \
    CHECK(cfg->f >= (lo) && cfg->f <= (hi), "%s=%d outside %d..%d (%s)", #f, cfg->f, lo, hi, stage)
#define BOOL(f) CHECK(cfg->f == 0 || cfg->f == 1, "%s=%d is not a boolean (%s)", #f, cfg->f, stage)

/* The documented limits (config.h, config/inventoryd.properties). The exact
 * limits of every key are checked by the dump round trip instead, against
 * config.c's own table. */
static void check_fields(const struct config *cfg, const char *stage) {
    STR_OK(bind);
    STR_OK(context_path);
    STR_OK(redis_host);
    STR_OK(redis_password);
    STR_OK(sentinel_nodes);
    STR_OK(sentinel_master);
    STR_OK(stock_key);
    STR_OK(strategy);
    STR_OK(lock_name);
    STR_OK(lock_scope);
    STR_OK(redlock_nodes);
    RANGE(port, 1, 65535);
    RANGE(redis_port, 1, 65535);
    RANGE(max_connections, 1, 1000000);
    RANGE(connection_timeout_s, 0, 86400);
    RANGE(max_body_bytes, 1, 16777216);
    RANGE(redis_database, 0, 1000000);
    RANGE(redis_timeout_ms, 1, 600000);
    RANGE(redis_pool_size, 1, 10000);
    RANGE(initial_stock, 0, 1000000000);
    RANGE(lock_ttl_ms, 1, 86400000);
    RANGE(lock_wait_ms, 0, 600000);
    RANGE(lock_spin_sleep_ms, 0, 60000);
    RANGE(lock_retry_depth, 1, 100000);
    RANGE(lock_sync_replicas, 0, 1000);
    RANGE(redlock_node_timeout_ms, 1, 60000);
    RANGE(faults_max_hold_ms, 0, 3600000);
    CHECK(cfg->probe >= -1 && cfg->probe <= 1, "inventory.probe is %d (%s)", cfg->probe, stage);
    BOOL(read_lock);
    BOOL(faults_enabled);

    CHECK(cfg->strategy[0] != '\0', "lock.strategy is empty (%s)", stage);
    for (const char *p = cfg->strategy; *p; p++)
        CHECK((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-',
              "lock.strategy '%s' has a byte 0x%02x outside [a-z0-9-] (%s)", cfg->strategy,
              (unsigned char)*p, stage);
    CHECK(strcmp(cfg->lock_scope, "global") == 0 || strcmp(cfg->lock_scope, "item") == 0 ||
              strcmp(cfg->lock_scope, "auto") == 0,
          "lock.scope is '%s' (%s)", cfg->lock_scope, stage);
    size_t cl = strlen(cfg->context_path);
    CHECK(cl >= 1 && cfg->context_path[0] == '/', "context path '%s' (%s)", cfg->context_path,
          stage);
    CHECK(cl == 1 || cfg->context_path[cl - 1] != '/',
          "context path '%s' keeps a trailing '/' (%s)", cfg->context_path, stage);
    for (const char *p = cfg->context_path; *p; p++)
        CHECK(!isspace((unsigned char)*p) && !iscntrl((unsigned char)*p) && *p != '?' && *p != '#',
              "context path has byte 0x%02x (%s)", (unsigned char)*p, stage);
    CHECK(cfg->bind[0] && cfg->redis_host[0] && cfg->sentinel_master[0] && cfg->stock_key[0] &&
              cfg->lock_name[0] && cfg->redlock_nodes[0],
          "a string key that must not be empty is empty (%s)", stage);
}

/* errstr is a malloc'd errlen bytes filled with 0xAA before the call. */
static void check_error(int rc, const char *errstr, size_t errlen, const char *stage) {
    CHECK(rc == CONFIG_OK || rc == CONFIG_ERR, "%s returned %d", stage, rc);
    if (rc == CONFIG_ERR) {
        CHECK(nul_within(errstr, errlen), "%s: errstr not NUL-terminated within %zu", stage,
              errlen);
        CHECK(errstr[0] != '\0', "%s: errstr is empty on error", stage);
    }
}

static char *new_buf(size_t n) {
    char *b = malloc(n);
    if (b == NULL) abort();
    memset(b, 0xAA, n);
    return b;
}

/* The key names, from a full dump: the text before each line's first '='. */
static char **dump_keys(const char *dump) {
    char **v = calloc(CONFIG_KEY_COUNT + 1, sizeof *v);
    size_t k = 0;
    if (v == NULL) abort();
    for (const char *line = dump; *line && k < CONFIG_KEY_COUNT;) {
        const char *eq = strchr(line, '='), *nl = strchr(line, '\n');
        CHECK(eq != NULL && nl != NULL && eq < nl, "dump line without '=': %.80s", line);
        v[k++] = dup_n(line, (size_t)(eq - line));
        line = nl + 1;
    }
    CHECK(k == CONFIG_KEY_COUNT, "dump has %zu lines, want %d", k, CONFIG_KEY_COUNT);
    return v;
}

/* Dumps cfg into a new exact-size buffer; checks the length contract. */
static char *dump(const struct config *cfg, size_t small) {
    size_t need = config_dump(cfg, NULL, 0);
    char *buf = new_buf(need + 1);
    size_t got = config_dump(cfg, buf, need + 1);
    CHECK(got == need, "config_dump returned %zu then %zu", need, got);
    CHECK(strlen(buf) == need, "config_dump wrote %zu bytes, said %zu", strlen(buf), need);

    /* Too small a buffer: same answer, truncated, terminated, no overflow. */
    if (small > need) small = need;
    char *part = new_buf(small + 1);
    got = config_dump(cfg, part, small + 1);
    CHECK(got == need, "config_dump with %zu bytes returned %zu, want %zu", small + 1, got, need);
    CHECK(strlen(part) == small && memcmp(part, buf, small) == 0,
          "config_dump with %zu bytes wrote something else", small + 1);
    free(part);
    return buf;
}

/* The value of key's line in a dump, up to its newline, or NULL. */
static const char *dump_value(const char *d, const char *key, size_t *len) {
    size_t kl = strlen(key);
    for (const char *line = d; *line;) {
        const char *nl = strchr(line, '\n');
        if (nl == NULL) return NULL;
        if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
            *len = (size_t)(nl - line - (ptrdiff_t)kl - 1);
            return line + kl + 1;
        }
        line = nl + 1;
    }
    return NULL;
}

static void check_dump(const struct config *cfg, size_t small, const char *stage) {
    char *d = dump(cfg, small);
    size_t vl = 0;
    const char *v = dump_value(d, SECRET_KEY, &vl);
    CHECK(v != NULL, "no %s line in the dump (%s)", SECRET_KEY, stage);
    if (cfg->redis_password[0])
        CHECK(vl == 4 && memcmp(v, "****", 4) == 0, "the password is dumped as '%.*s' (%s)",
              (int)vl, v, stage);
    else
        CHECK(vl == 0, "an empty password is dumped as '%.*s' (%s)", (int)vl, v, stage);

    /* The dump must not depend on the password's content. */
    if (cfg->redis_password[0]) {
        struct config *other = malloc(sizeof *other);
        if (other == NULL) abort();
        memcpy(other, cfg, sizeof *other);
        memset(other->redis_password, 0, sizeof other->redis_password);
        other->redis_password[0] = FILLER;
        char *d2 = dump(other, small);
        CHECK(strcmp(d, d2) == 0, "config_dump depends on the password's content (%s)", stage);
        free(d2);
        free(other);
    }

    /* Origins: one per key, terminated; an unknown key has none. */
    char **keys = dump_keys(d);
    for (size_t i = 0; keys[i]; i++) {
        const char *o = config_origin(cfg, keys[i]);
        CHECK(o != NULL, "config_origin(%s) is NULL (%s)", keys[i], stage);
        CHECK(nul_within(o, CONFIG_ORIGIN_MAX), "origin of %s not terminated (%s)", keys[i], stage);
    }
    CHECK(config_origin(cfg, "no.such.key") == NULL, "an unknown key has an origin");
    free_pieces(keys);
    free(d);
}

/* Every line of the dump goes back through config_set and comes out the
 * same: what config.c stores is always what config.c accepts. Values with
 * spaces at either end are skipped: only the environment keeps those, and
 * config_set trims them by design; so are secrets, which the dump shows as
 * **** (admin.token refuses that as too short). */
static void check_round_trip(const struct config *cfg, const char *stage) {
    char *d = dump(cfg, 0);
    struct config *again = malloc(sizeof *again);
    char err[512];
    if (again == NULL) abort();
    config_defaults(again);
    char **lines = split((const uint8_t *)d, strlen(d), "\n", 1);
    for (size_t i = 0; lines[i]; i++) {
        size_t n = strlen(lines[i]);
        if (n == 0) continue;
        const char *eq = strchr(lines[i], '=');
        if (eq[1] && (isspace((unsigned char)eq[1]) || isspace((unsigned char)lines[i][n - 1])))
            continue;
        if (n >= 1024) continue; /* longer than config_set takes; no field is that long */
        if (strcmp(eq + 1, "****") == 0) continue; /* a secret: the dump hides its value */
        int rc = config_set(again, lines[i], err, sizeof err);
        CHECK(rc == CONFIG_OK, "config_set refuses its own dump line '%.120s': %s (%s)", lines[i],
              err, stage);
    }
    char *d2 = dump(again, 0);
    char **lines2 = split((const uint8_t *)d2, strlen(d2), "\n", 1);
    for (size_t i = 0; lines[i] && lines2[i]; i++) {
        const char *eq = strchr(lines[i], '=');
        size_t n = strlen(lines[i]);
        if (n == 0 ||
            (eq[1] && (isspace((unsigned char)eq[1]) || isspace((unsigned char)lines[i][n - 1]))) ||
            strcmp(eq + 1, "****") == 0)
            continue;
        CHECK(strcmp(lines[i], lines2[i]) == 0, "round trip changed '%.120s' into '%.120s' (%s)",
              lines[i], lines2[i], stage);
    }
    free_pieces(lines2);
    free_pieces(lines);
    free(d2);
    free(again);
    free(d);
}

static void check_all(const struct config *cfg, size_t small, const char *stage) {
    check_fields(cfg, stage);
    check_dump(cfg, small, stage);
}

/* Trims in place like config.c does (isspace at both ends). */
static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) end--;
    *end = '\0';
    return s;
}

/* An error about the secret may depend on the value's length, never on its
 * content: apply value and a filler of the same length, compare. */
static void check_secret_not_echoed(const char *value, const char *origin) {
    size_t n = strlen(value);
    char *filler = malloc(n + 1);
    char e1[512], e2[512];
    struct config *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    if (filler == NULL || a == NULL || b == NULL) abort();
    memset(filler, FILLER, n);
    filler[n] = '\0';
    config_defaults(a);
    config_defaults(b);
    e1[0] = e2[0] = '\0';
    int r1 = config_apply(a, SECRET_KEY, value, origin, e1, sizeof e1);
    int r2 = config_apply(b, SECRET_KEY, filler, origin, e2, sizeof e2);
    CHECK(r1 == r2, "a password's validity depends on its content (%d vs %d)", r1, r2);
    if (r1 == CONFIG_ERR)
        CHECK(strcmp(e1, e2) == 0, "the error echoes the password: '%s' vs '%s'", e1, e2);
    free(filler);
    free(a);
    free(b);
}

/* Turns "server.port=1" into "INVENTORYD_SERVER_PORT=1"; INVENTORYD_*
 * pieces are kept as they are. */
static char *to_env(const char *piece) {
    static const char prefix[] = "INVENTORYD_";
    size_t n = strlen(piece);
    if (strncmp(piece, prefix, sizeof prefix - 1) == 0) return dup_n(piece, n);
    char *v = malloc(sizeof prefix + n);
    if (v == NULL) abort();
    memcpy(v, prefix, sizeof prefix - 1);
    char *o = v + sizeof prefix - 1;
    int in_name = 1;
    for (const char *p = piece; *p; p++) {
        char c = *p;
        if (c == '=') in_name = 0;
        if (in_name) c = (c == '.' || c == '-') ? '_' : (char)toupper((unsigned char)c);
        *o++ = c;
    }
    *o = '\0';
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct config cfg;
    /* Buffer sizes vary with the input, to reach the truncating paths. */
    size_t errlen = 16 + size % 241;
    size_t warnlen = 1 + (size * 7) % 300;
    size_t small = size % 700;
    char *errstr = new_buf(errlen);
    char *warnings = new_buf(warnlen);
    int rc;

    if (fd < 0) open_file();

    /* 1. The properties file. */
    config_defaults(&cfg);
    check_fields(&cfg, "defaults");
    write_file(data, size);
    rc = config_load_file(&cfg, path, errstr, errlen, warnings, warnlen);
    check_error(rc, errstr, errlen, "config_load_file");
    CHECK(nul_within(warnings, warnlen), "file warnings not terminated within %zu", warnlen);
    check_all(&cfg, small, "after the file");

    /* 2. The environment. */
    char **pieces = split(data, size, "\n\0", 2);
    size_t np = 0;
    while (pieces[np]) np++;
    char **envp = calloc(np + 1, sizeof *envp);
    if (envp == NULL) abort();
    for (size_t i = 0; i < np; i++) envp[i] = to_env(pieces[i]);
    memset(errstr, 0xAA, errlen);
    memset(warnings, 0xAA, warnlen);
    rc = config_load_env(&cfg, envp, errstr, errlen, warnings, warnlen);
    check_error(rc, errstr, errlen, "config_load_env");
    CHECK(nul_within(warnings, warnlen), "env warnings not terminated within %zu", warnlen);
    check_fields(&cfg, "after the environment");
    for (size_t i = 0; i < np; i++) {
        static const char name[] = "INVENTORYD_REDIS_PASSWORD=";
        if (strncmp(envp[i], name, sizeof name - 1) == 0)
            check_secret_not_echoed(envp[i] + sizeof name - 1, "env INVENTORYD_REDIS_PASSWORD");
        free(envp[i]);
    }
    free(envp);

    /* 3. --set lines, then config_apply with the line as a (long) origin. */
    for (size_t i = 0; i < np; i++) {
        memset(errstr, 0xAA, errlen);
        rc = config_set(&cfg, pieces[i], errstr, errlen);
        check_error(rc, errstr, errlen, "config_set");
        check_fields(&cfg, "after config_set");

        char *copy = dup_n(pieces[i], strlen(pieces[i]));
        char *eq = strpbrk(copy, "=:");
        if (eq != NULL) {
            *eq = '\0';
            char *key = trim(copy), *value = trim(eq + 1);
            memset(errstr, 0xAA, errlen);
            rc = config_apply(&cfg, key, value, pieces[i], errstr, errlen);
            check_error(rc, errstr, errlen, "config_apply");
            check_fields(&cfg, "after config_apply");
            if (strcmp(key, SECRET_KEY) == 0) {
                check_secret_not_echoed(value, "--set");
                check_secret_not_echoed(value, pieces[i]);
            }
        }
        free(copy);
    }
    free_pieces(pieces);

    /* 4. The dump, its masking and its round trip. */
    check_all(&cfg, small, "after --set");
    check_round_trip(&cfg, "after --set");

    free(errstr);
    free(warnings);
    return 0;
}
