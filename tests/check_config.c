/* check_config.c -- the configuration module: defaults, the properties file,
 * INVENTORYD_* variables, --set, and the messages a user sees when a value
 * is wrong. No server needed. Temporary files live in a mkdtemp directory
 * made and removed by the checked fixture of each test. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "config.h"

#ifndef SOURCE_DIR
#error "SOURCE_DIR must name the source tree"
#endif

#define SHIPPED_PROPERTIES SOURCE_DIR "/config/inventoryd.properties"

static char tmpdir[64];
static char tmpfiles[16][PATH_MAX];
static int ntmpfiles;

static struct config cfg;
static char err[1024];
static char warn[4096];

static void setup(void) {
    char tmpl[] = "/tmp/check_config.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    snprintf(tmpdir, sizeof tmpdir, "%s", tmpl);
    ntmpfiles = 0;
    config_defaults(&cfg);
    err[0] = '\0';
    warn[0] = '\0';
}

static void teardown(void) {
    for (int i = 0; i < ntmpfiles; i++) unlink(tmpfiles[i]);
    rmdir(tmpdir);
}

/* Writes content to a new file in tmpdir; returns its path. */
static const char *write_file(const char *name, const char *content) {
    char *path;
    FILE *fp;
    ck_assert_int_lt(ntmpfiles, 16);
    path = tmpfiles[ntmpfiles++];
    snprintf(path, PATH_MAX, "%s/%s", tmpdir, name);
    fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    ck_assert_int_eq(fputs(content, fp) >= 0, 1);
    ck_assert_int_eq(fclose(fp), 0);
    return path;
}

static int load(const char *content) {
    const char *path = write_file("test.properties", content);
    return config_load_file(&cfg, path, err, sizeof err, warn, sizeof warn);
}

/* The expected "FILE:LINE" origin for line of the last written file. */
static const char *at_line(int line) {
    static char buf[PATH_MAX + 32];
    snprintf(buf, sizeof buf, "%s:%d", tmpfiles[ntmpfiles - 1], line);
    return buf;
}

/* ---- Core ---------------------------------------------------------------- */

START_TEST(test_defaults_match_the_documented_values) {
    ck_assert_str_eq(cfg.bind, "127.0.0.1");
    ck_assert_int_eq(cfg.port, 3786);
    ck_assert_str_eq(cfg.context_path, "/redis/distributed/lock");
    ck_assert_int_eq(cfg.max_connections, 4096);
    ck_assert_int_eq(cfg.connection_memory_kb, 16);
    ck_assert_int_eq(cfg.connection_timeout_s, 30);
    ck_assert_int_eq(cfg.max_body_bytes, 4096);
    ck_assert_str_eq(cfg.redis_host, "127.0.0.1");
    ck_assert_int_eq(cfg.redis_port, 6379);
    ck_assert_str_eq(cfg.redis_password, "");
    ck_assert_int_eq(cfg.redis_database, 0);
    ck_assert_int_eq(cfg.redis_timeout_ms, 2000);
    ck_assert_int_eq(cfg.redis_pool_size, 128);
    ck_assert_str_eq(cfg.redis_unix_socket, "");
    ck_assert_int_eq(cfg.io_threads, 2);
    ck_assert_int_eq(cfg.workers, 16);
    ck_assert_str_eq(cfg.stock_key, "inventory001");
    ck_assert_int_eq(cfg.initial_stock, 200);
    ck_assert_int_eq(cfg.probe, -1); /* auto */
    ck_assert_int_eq(config_probe(&cfg), 1);
    ck_assert_str_eq(cfg.lock_scope, "auto");
    ck_assert_int_eq(config_lock_per_item(&cfg), 0);
    ck_assert_str_eq(cfg.strategy, "atomic");
    ck_assert_str_eq(cfg.lock_name, "RedisDistributedLock");
    ck_assert_int_eq(cfg.lock_ttl_ms, 10000);
    ck_assert_int_eq(cfg.lock_wait_ms, 5000);
    ck_assert_int_eq(cfg.lock_spin_sleep_ms, 20);
    ck_assert_int_eq(cfg.lock_retry_depth, 500);
    ck_assert_str_eq(cfg.redlock_nodes, "127.0.0.1:6381,127.0.0.1:6382,127.0.0.1:6383");
    ck_assert_int_eq(cfg.redlock_node_timeout_ms, 50);
    ck_assert_int_eq(cfg.faults_enabled, 0);
    ck_assert_int_eq(cfg.faults_max_hold_ms, 60000);
}
END_TEST

START_TEST(test_every_key_says_default_as_its_origin_before_any_override) {
    ck_assert_str_eq(config_origin(&cfg, "server.port"), "default");
    ck_assert_str_eq(config_origin(&cfg, "redis.password"), "default");
    ck_assert_str_eq(config_origin(&cfg, "faults.max-hold-ms"), "default");
}
END_TEST

START_TEST(test_an_unknown_key_has_no_origin) {
    ck_assert_ptr_null(config_origin(&cfg, "server.nope"));
}
END_TEST

START_TEST(test_the_shipped_properties_file_gives_the_defaults_and_no_warnings) {
    struct config defaults;
    char want[4096], got[4096];
    const char *origin;

    config_defaults(&defaults);
    strcpy(warn, "stale");
    ck_assert_int_eq(config_load_file(&cfg, SHIPPED_PROPERTIES, err, sizeof err, warn, sizeof warn),
                     CONFIG_OK);
    ck_assert_str_eq(warn, "");
    config_dump(&defaults, want, sizeof want);
    config_dump(&cfg, got, sizeof got);
    ck_assert_str_eq(got, want);

    /* Every key is in the file: none is left at "default". */
    for (const char *p = want; *p; p = strchr(p, '\n') + 1) {
        char key[128];
        size_t n = (size_t)(strchr(p, '=') - p);
        memcpy(key, p, n);
        key[n] = '\0';
        origin = config_origin(&cfg, key);
        ck_assert_msg(strstr(origin, "inventoryd.properties:") != NULL,
                      "%s is not set by the shipped file (origin %s)", key, origin);
    }
}
END_TEST

START_TEST(test_comments_blank_lines_crlf_and_spaces_are_accepted) {
    ck_assert_int_eq(load("# a comment\r\n"
                          "! another comment\r\n"
                          "\r\n"
                          "   \t\r\n"
                          "  server.port  =  4000  \r\n"
                          "\tredis.host=\tredis.local\r\n"
                          "lock.strategy=redlock\r\n"),
                     CONFIG_OK);
    ck_assert_int_eq(cfg.port, 4000);
    ck_assert_str_eq(cfg.redis_host, "redis.local");
    ck_assert_str_eq(cfg.strategy, "redlock");
    ck_assert_str_eq(warn, "");
}
END_TEST

START_TEST(test_a_value_may_contain_equals_and_colons) {
    ck_assert_int_eq(load("redis.password=a=b:c==\n"
                          "redlock.nodes=10.0.0.1:7001,10.0.0.2:7002\n"
                          "server.bind: ::1\n"),
                     CONFIG_OK);
    ck_assert_str_eq(cfg.redis_password, "a=b:c==");
    ck_assert_str_eq(cfg.redlock_nodes, "10.0.0.1:7001,10.0.0.2:7002");
    ck_assert_str_eq(cfg.bind, "::1");
}
END_TEST

START_TEST(test_key_colon_value_is_accepted_like_key_equals_value) {
    ck_assert_int_eq(load("server.port: 3787\nlock.ttl-ms :250\n"), CONFIG_OK);
    ck_assert_int_eq(cfg.port, 3787);
    ck_assert_int_eq(cfg.lock_ttl_ms, 250);
}
END_TEST

START_TEST(test_the_last_occurrence_of_a_key_in_a_file_wins) {
    ck_assert_int_eq(load("server.port=4000\nserver.port=4001\n"), CONFIG_OK);
    ck_assert_int_eq(cfg.port, 4001);
    ck_assert_str_eq(config_origin(&cfg, "server.port"), at_line(2));
}
END_TEST

START_TEST(test_a_line_without_a_separator_is_an_error_naming_file_and_line) {
    char want[PATH_MAX + 64];
    ck_assert_int_eq(load("server.port=4000\n\nredis.password hunter2\n"), CONFIG_ERR);
    snprintf(want, sizeof want, "%s: expected key=value", at_line(3));
    ck_assert_str_eq(err, want);
    ck_assert_ptr_null(strstr(err, "hunter2"));
}
END_TEST

START_TEST(test_a_line_with_an_empty_key_is_an_error) {
    ck_assert_int_eq(load("=4000\n"), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "expected key=value"));
}
END_TEST

START_TEST(test_an_unknown_key_in_a_file_is_a_warning_not_an_error) {
    char want[PATH_MAX + 64];
    ck_assert_int_eq(load("server.port=4000\nfoo.bar=1\nlock.ttl-ms=300\n"), CONFIG_OK);
    snprintf(want, sizeof want, "%s: unknown key 'foo.bar' ignored\n", at_line(2));
    ck_assert_str_eq(warn, want);
    ck_assert_int_eq(cfg.port, 4000);
    ck_assert_int_eq(cfg.lock_ttl_ms, 300);
}
END_TEST

START_TEST(
    test_off_loopback_an_admin_token_is_needed_even_with_lab_and_faults_off_and_loopback_needs_none) {
    static const char *const names[] = {"atomic", NULL};
    ck_assert_int_eq(load("server.bind=0.0.0.0\nlab.enabled=true\n"), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, at_line(1)));
    ck_assert_msg(strstr(err, "server.bind: 0.0.0.0") && strstr(err, "admin.token") &&
                      strstr(err, "lab.enabled"),
                  "got: %s", err);
    /* With both off a reset is still an admin route: still refused. */
    ck_assert_int_eq(config_set(&cfg, "lab.enabled=false", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_msg(strstr(err, "admin.token") && strstr(err, "INVENTORYD_ADMIN_TOKEN") &&
                      strstr(err, "reset"),
                  "got: %s", err);
    ck_assert_int_eq(config_set(&cfg, "faults.enabled=true", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "faults.enabled"));
    static const char *const loopback[] = {"127.0.0.1", "127.0.0.2", "127.255.255.254"};
    for (size_t i = 0; i < sizeof loopback / sizeof loopback[0]; i++) {
        char set[64];
        snprintf(set, sizeof set, "server.bind=%s", loopback[i]);
        ck_assert_int_eq(config_set(&cfg, set, err, sizeof err), CONFIG_OK);
        ck_assert_msg(config_check(&cfg, names, err, sizeof err) == CONFIG_OK, "%s: %s", set, err);
    }
    static const char *const outside[] = {"128.0.0.1", "10.0.0.1", "126.255.255.255", "localhost"};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        char set[64];
        snprintf(set, sizeof set, "server.bind=%s", outside[i]);
        ck_assert_int_eq(config_set(&cfg, set, err, sizeof err), CONFIG_OK);
        ck_assert_msg(config_check(&cfg, names, err, sizeof err) == CONFIG_ERR, "%s passed", set);
    }
    ck_assert_int_eq(config_set(&cfg, "admin.token=0123456789abcdef", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_OK);
}
END_TEST

START_TEST(test_a_lock_name_among_an_items_keys_is_refused_naming_lock_name) {
    static const char *const names[] = {"atomic", NULL};
    /* The ledger, the stock's other keys, their cluster form, any item's. */
    static const char *const under[] = {
        "inventory001:sold", "inventory001:",        "{inventory001}:sold",
        "{inventory001}",    "inventory002:history", "RedisDistributedLock:x"};
    for (size_t i = 0; i < sizeof under / sizeof under[0]; i++) {
        char set[96];
        ck_assert_int_eq(load("# lock\nlock.strategy=atomic\n"), CONFIG_OK);
        snprintf(set, sizeof set, "lock.name=%s", under[i]);
        ck_assert_int_eq(config_set(&cfg, set, err, sizeof err), CONFIG_OK);
        ck_assert_msg(config_check(&cfg, names, err, sizeof err) == CONFIG_ERR, "%s passed", set);
        ck_assert_msg(strstr(err, "lock.name") && strstr(err, under[i]) && strstr(err, "--set"),
                      "%s: %s", set, err);
    }
    ck_assert_int_eq(config_set(&cfg, "lock.name=inventory001:sold", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_msg(strstr(err, "ledger") || strstr(err, "inventory001:*"), "got: %s", err);
    /* Names that no item's key can be are kept. */
    static const char *const kept[] = {"RedisDistributedLock", "orders lock", "lock/orders:1"};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        char set[96];
        snprintf(set, sizeof set, "lock.name=%s", kept[i]);
        ck_assert_int_eq(config_set(&cfg, set, err, sizeof err), CONFIG_OK);
        ck_assert_msg(config_check(&cfg, names, err, sizeof err) == CONFIG_OK, "%s: %s", set, err);
    }
}
END_TEST

START_TEST(test_admin_token_is_empty_or_16_visible_characters_and_never_repeated) {
    ck_assert_str_eq(cfg.admin_token, "");
    static const char *const bad[] = {"admin.token=s3cret-is-15chr",
                                      "admin.token=s3cret is sixteen+",
                                      "admin.token=s3cret\tis-sixteen+"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(config_set(&cfg, bad[i], err, sizeof err), CONFIG_ERR);
        ck_assert_msg(strstr(err, "--set: admin.token: ") != NULL, "got: %s", err);
        ck_assert_msg(strstr(err, "s3cret") == NULL, "the token is repeated: %s", err);
    }
    ck_assert_ptr_nonnull(strstr(err, "visible ASCII"));
    ck_assert_int_eq(config_set(&cfg, "admin.token=s3cret-is-15chr", err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "shorter than 16"));
    ck_assert_str_eq(cfg.admin_token, "");
    char *env[] = {"INVENTORYD_ADMIN_TOKEN=s3cret-from-the-env", NULL};
    ck_assert_int_eq(config_load_env(&cfg, env, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_str_eq(cfg.admin_token, "s3cret-from-the-env");
    ck_assert_str_eq(config_origin(&cfg, "admin.token"), "env INVENTORYD_ADMIN_TOKEN");
    char buf[8192];
    config_dump(&cfg, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "\nadmin.token=****\n"));
    ck_assert_ptr_null(strstr(buf, "s3cret"));
    ck_assert_int_eq(config_set(&cfg, "admin.token=", err, sizeof err), CONFIG_OK); /* off again */
    ck_assert_str_eq(cfg.admin_token, "");
}
END_TEST

START_TEST(test_cluster_mode_says_what_cannot_share_a_cluster_and_why) {
    static const char *const names[] = {"atomic", "redisson", NULL};
    ck_assert_int_eq(load("redis.cluster.nodes=127.0.0.1:6371, 127.0.0.1:6372\n"), CONFIG_OK);
    ck_assert_str_eq(cfg.cluster_nodes, "127.0.0.1:6371, 127.0.0.1:6372");
    /* the one key is enough: auto picks one lock per item and no probe */
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_lock_per_item(&cfg), 1);
    ck_assert_int_eq(config_probe(&cfg), 0);
    /* an explicit contrary setting is refused, naming where it came from */
    ck_assert_int_eq(config_set(&cfg, "lock.scope=global", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "needs lock.scope=item"));
    ck_assert_ptr_nonnull(strstr(err, "lock.scope is global (--set)"));
    ck_assert_ptr_nonnull(strstr(err, at_line(1)));
    ck_assert_int_eq(config_set(&cfg, "lock.scope=item", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, "inventory.probe=yes", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "needs inventory.probe=false"));
    ck_assert_int_eq(config_set(&cfg, "inventory.probe=false", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, "inventory.probe=AUTO", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(cfg.probe, -1);
    ck_assert_int_eq(config_set(&cfg, "lock.name=a{b", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "without '{' or '}'"));
    ck_assert_int_eq(config_set(&cfg, "lock.name=RedisDistributedLock", err, sizeof err),
                     CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, "redis.database=2", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "database 0 only"));
    ck_assert_int_eq(config_set(&cfg, "redis.database=0", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, "redis.sentinel.nodes=127.0.0.1:26379", err, sizeof err),
                     CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "both set"));
    ck_assert_int_eq(config_set(&cfg, "redis.cluster.nodes=nocolon", err, sizeof err), CONFIG_ERR);
    ck_assert_int_eq(cfg.cluster_max_redirects, 5); /* as the demo's line */
    ck_assert_int_eq(config_set(&cfg, "redis.cluster.max-redirects=0", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(cfg.cluster_max_redirects, 0);
    ck_assert_int_eq(config_set(&cfg, "redis.cluster.max-redirects=17", err, sizeof err),
                     CONFIG_ERR);
}
END_TEST

/* A Unix socket names one Redis on this host: not a cluster, not a
 * master found through sentinels. */
START_TEST(test_redis_unix_socket_is_refused_with_a_cluster_or_sentinels) {
    static const char *const names[] = {"atomic", NULL};
    ck_assert_int_eq(load("redis.unix-socket=/run/redis/redis.sock\n"), CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, "redis.sentinel.nodes=127.0.0.1:26379", err, sizeof err),
                     CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_msg(strstr(err, "redis.unix-socket") && strstr(err, "redis.sentinel.nodes"), "%s",
                  err);
    ck_assert_int_eq(config_set(&cfg, "redis.sentinel.nodes=", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, "redis.cluster.nodes=127.0.0.1:6371", err, sizeof err),
                     CONFIG_OK);
    ck_assert_int_eq(config_check(&cfg, names, err, sizeof err), CONFIG_ERR);
    ck_assert_msg(strstr(err, "redis.unix-socket") && strstr(err, "redis.cluster.nodes"), "%s",
                  err);
}
END_TEST

START_TEST(test_a_missing_file_is_an_error_naming_the_path_and_reason) {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/absent.properties", tmpdir);
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err, warn, sizeof warn), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_nonnull(strstr(err, "No such file or directory"));
}
END_TEST

START_TEST(test_a_warnings_buffer_may_be_null) {
    const char *path = write_file("w.properties", "foo.bar=1\n");
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err, NULL, 0), CONFIG_OK);
}
END_TEST

START_TEST(test_booleans_accept_true_false_yes_no_on_off_1_0_in_any_case) {
    static const char *const yes[] = {"true", "TRUE", "Yes", "on", "ON", "1"};
    static const char *const no[] = {"false", "False", "no", "NO", "off", "0"};
    for (size_t i = 0; i < 6; i++) {
        ck_assert_int_eq(config_apply(&cfg, "faults.enabled", yes[i], "t", err, sizeof err),
                         CONFIG_OK);
        ck_assert_int_eq(cfg.faults_enabled, 1);
        ck_assert_int_eq(config_apply(&cfg, "faults.enabled", no[i], "t", err, sizeof err),
                         CONFIG_OK);
        ck_assert_int_eq(cfg.faults_enabled, 0);
    }
}
END_TEST

START_TEST(test_a_word_that_is_not_a_boolean_is_an_error) {
    ck_assert_int_eq(load("inventory.probe=maybe\n"), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "inventory.probe: 'maybe' is neither auto nor a boolean"));
    ck_assert_int_eq(cfg.probe, -1);
}
END_TEST

START_TEST(test_config_dump_lists_every_key_and_masks_the_password) {
    char buf[4096];
    size_t n;
    ck_assert_int_eq(config_set(&cfg, "redis.password=hunter2", err, sizeof err), CONFIG_OK);
    ck_assert_str_eq(cfg.redis_password, "hunter2");
    n = config_dump(&cfg, buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_ptr_null(strstr(buf, "hunter2"));
    ck_assert_ptr_nonnull(strstr(buf, "\nredis.password=****\n"));
    ck_assert_ptr_nonnull(strstr(buf, "server.port=3786\n"));
    ck_assert_ptr_nonnull(strstr(buf, "inventory.probe=auto\n"));
    ck_assert_ptr_nonnull(strstr(buf, "faults.enabled=false\n"));
    int lines = 0;
    for (const char *p = buf; *p; p++) lines += *p == '\n';
    ck_assert_int_eq(lines, CONFIG_KEY_COUNT);
}
END_TEST

START_TEST(test_config_dump_shows_an_empty_password_as_empty) {
    char buf[4096];
    config_dump(&cfg, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "\nredis.password=\n"));
}
END_TEST

START_TEST(test_config_dump_returns_the_needed_length_when_the_buffer_is_small) {
    char full[4096], small[32];
    size_t need = config_dump(&cfg, full, sizeof full);
    ck_assert_uint_eq(config_dump(&cfg, small, sizeof small), need);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_int_eq(strncmp(small, full, sizeof small - 1), 0);
    ck_assert_uint_eq(config_dump(&cfg, NULL, 0), need);
}
END_TEST

/* ---- Overrides ----------------------------------------------------------- */

START_TEST(test_env_overrides_the_file_and_names_the_variable_as_origin) {
    char *envp[] = {"INVENTORYD_SERVER_PORT=3787", NULL};
    ck_assert_int_eq(load("server.port=4000\n"), CONFIG_OK);
    ck_assert_int_eq(config_load_env(&cfg, envp, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_int_eq(cfg.port, 3787);
    ck_assert_str_eq(config_origin(&cfg, "server.port"), "env INVENTORYD_SERVER_PORT");
}
END_TEST

START_TEST(test_set_overrides_env) {
    char *envp[] = {"INVENTORYD_SERVER_PORT=3787", NULL};
    ck_assert_int_eq(config_load_env(&cfg, envp, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, "server.port=3788", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(cfg.port, 3788);
    ck_assert_str_eq(config_origin(&cfg, "server.port"), "--set");
}
END_TEST

START_TEST(test_each_set_applies_in_order_and_the_last_wins) {
    ck_assert_int_eq(config_set(&cfg, "lock.strategy=redisson", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, " lock.strategy = watchdog ", err, sizeof err), CONFIG_OK);
    ck_assert_str_eq(cfg.strategy, "watchdog");
}
END_TEST

START_TEST(test_env_names_map_dots_and_dashes_to_underscores) {
    char *envp[] = {"INVENTORYD_SERVER_CONTEXT_PATH=/shop", "INVENTORYD_LOCK_TTL_MS=1234",
                    "INVENTORYD_REDIS_POOL_SIZE=7", "INVENTORYD_FAULTS_ENABLED=yes", NULL};
    ck_assert_int_eq(config_load_env(&cfg, envp, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_str_eq(cfg.context_path, "/shop");
    ck_assert_int_eq(cfg.lock_ttl_ms, 1234);
    ck_assert_int_eq(cfg.redis_pool_size, 7);
    ck_assert_int_eq(cfg.faults_enabled, 1);
    ck_assert_str_eq(config_origin(&cfg, "lock.ttl-ms"), "env INVENTORYD_LOCK_TTL_MS");
    ck_assert_str_eq(warn, "");
}
END_TEST

START_TEST(test_env_variables_without_the_prefix_are_ignored) {
    char *envp[] = {"SERVER_PORT=1",           "PATH=/usr/bin", "inventoryd_server_port=2",
                    "INVENTORYDSERVER_PORT=3", "NOEQUALS",      NULL};
    ck_assert_int_eq(config_load_env(&cfg, envp, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_int_eq(cfg.port, 3786);
    ck_assert_str_eq(warn, "");
    ck_assert_str_eq(config_origin(&cfg, "server.port"), "default");
}
END_TEST

START_TEST(test_an_unknown_inventoryd_variable_is_a_warning_naming_it) {
    char *envp[] = {"INVENTORYD_SERVER_PROT=3787", NULL};
    ck_assert_int_eq(config_load_env(&cfg, envp, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_ptr_nonnull(strstr(warn, "INVENTORYD_SERVER_PROT"));
    ck_assert_ptr_nonnull(strstr(warn, "ignored\n"));
    ck_assert_int_eq(cfg.port, 3786);
}
END_TEST

START_TEST(test_a_bad_env_value_names_the_variable_and_the_key) {
    char *envp[] = {"INVENTORYD_REDIS_PORT=70000", NULL};
    ck_assert_int_eq(config_load_env(&cfg, envp, err, sizeof err, warn, sizeof warn), CONFIG_ERR);
    ck_assert_str_eq(err,
                     "env INVENTORYD_REDIS_PORT: redis.port: 70000 is out of range (1..65535)");
}
END_TEST

START_TEST(test_a_null_environment_changes_nothing) {
    ck_assert_int_eq(config_load_env(&cfg, NULL, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_int_eq(cfg.port, 3786);
}
END_TEST

START_TEST(test_an_unknown_key_in_set_is_an_error) {
    ck_assert_int_eq(config_set(&cfg, "server.prot=3787", err, sizeof err), CONFIG_ERR);
    ck_assert_str_eq(err, "--set: unknown key 'server.prot'");
}
END_TEST

START_TEST(test_set_without_equals_is_an_error) {
    ck_assert_int_eq(config_set(&cfg, "server.port", err, sizeof err), CONFIG_ERR);
    ck_assert_str_eq(err, "--set: expected key=value");
    ck_assert_int_eq(config_set(&cfg, "=3787", err, sizeof err), CONFIG_ERR);
}
END_TEST

START_TEST(test_a_bad_set_value_names_set_and_the_key) {
    ck_assert_int_eq(config_set(&cfg, "lock.wait-ms=soon", err, sizeof err), CONFIG_ERR);
    ck_assert_str_eq(err, "--set: lock.wait-ms: 'soon' is not a whole number");
}
END_TEST

START_TEST(test_origins_report_file_line_env_and_set) {
    char *envp[] = {"INVENTORYD_REDIS_HOST=redis.env", NULL};
    char file_origin[PATH_MAX + 32];
    ck_assert_int_eq(load("# header\nlock.name=FromFile\nredis.host=redis.file\n"), CONFIG_OK);
    snprintf(file_origin, sizeof file_origin, "%s", at_line(2));
    ck_assert_int_eq(config_load_env(&cfg, envp, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_int_eq(config_set(&cfg, "lock.ttl-ms=42", err, sizeof err), CONFIG_OK);

    ck_assert_str_eq(config_origin(&cfg, "lock.name"), file_origin);
    ck_assert_str_eq(config_origin(&cfg, "redis.host"), "env INVENTORYD_REDIS_HOST");
    ck_assert_str_eq(config_origin(&cfg, "lock.ttl-ms"), "--set");
    ck_assert_str_eq(config_origin(&cfg, "lock.wait-ms"), "default");
}
END_TEST

START_TEST(test_a_failed_set_leaves_the_previous_value_and_origin) {
    ck_assert_int_eq(config_set(&cfg, "server.port=3787", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_apply(&cfg, "server.port", "0", "elsewhere", err, sizeof err),
                     CONFIG_ERR);
    ck_assert_int_eq(cfg.port, 3787);
    ck_assert_str_eq(config_origin(&cfg, "server.port"), "--set");
}
END_TEST

START_TEST(test_each_load_reports_only_its_own_warnings) {
    char *envp[] = {"INVENTORYD_NOPE=1", NULL};
    ck_assert_int_eq(load("foo.bar=1\n"), CONFIG_OK);
    ck_assert_ptr_nonnull(strstr(warn, "foo.bar"));
    ck_assert_int_eq(config_load_env(&cfg, envp, err, sizeof err, warn, sizeof warn), CONFIG_OK);
    ck_assert_ptr_null(strstr(warn, "foo.bar"));
    ck_assert_ptr_nonnull(strstr(warn, "INVENTORYD_NOPE"));
}
END_TEST

/* ---- Limits -------------------------------------------------------------- */

START_TEST(test_a_port_above_65535_names_the_key_and_line) {
    char want[PATH_MAX + 128];
    ck_assert_int_eq(load("# ports\nserver.bind=0.0.0.0\nserver.port=70000\n"), CONFIG_ERR);
    snprintf(want, sizeof want, "%s: server.port: 70000 is out of range (1..65535)", at_line(3));
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(cfg.port, 3786);
}
END_TEST

START_TEST(test_port_zero_and_65535_are_the_edges) {
    ck_assert_int_eq(config_apply(&cfg, "redis.port", "0", "t", err, sizeof err), CONFIG_ERR);
    ck_assert_int_eq(config_apply(&cfg, "redis.port", "65535", "t", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(cfg.redis_port, 65535);
    ck_assert_int_eq(config_apply(&cfg, "redis.port", "1", "t", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(config_apply(&cfg, "redis.port", "65536", "t", err, sizeof err), CONFIG_ERR);
}
END_TEST

START_TEST(test_a_ttl_with_a_unit_is_not_a_whole_number) {
    char want[PATH_MAX + 128];
    ck_assert_int_eq(load("lock.ttl-ms=10s\n"), CONFIG_ERR);
    snprintf(want, sizeof want, "%s: lock.ttl-ms: '10s' is not a whole number", at_line(1));
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(cfg.lock_ttl_ms, 10000);
}
END_TEST

START_TEST(test_an_overflowing_number_is_out_of_range_not_wrapped) {
    ck_assert_int_eq(
        config_apply(&cfg, "lock.ttl-ms", "99999999999999999999", "t", err, sizeof err),
        CONFIG_ERR);
    ck_assert_str_eq(err, "t: lock.ttl-ms: 99999999999999999999 is out of range (1..86400000)");
    ck_assert_int_eq(
        config_apply(&cfg, "lock.ttl-ms", "-99999999999999999999", "t", err, sizeof err),
        CONFIG_ERR);
    /* Fits in long long, not in int: the range check still refuses it. */
    ck_assert_int_eq(config_apply(&cfg, "lock.ttl-ms", "4294977296", "t", err, sizeof err),
                     CONFIG_ERR);
    ck_assert_int_eq(cfg.lock_ttl_ms, 10000);
}
END_TEST

START_TEST(test_numbers_with_a_plus_spaces_hex_or_nothing_are_rejected) {
    static const char *const bad[] = {"+5", " 5", "5 ", "0x10", "", "-", "1e3", "5.0", "--5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(config_apply(&cfg, "lock.wait-ms", bad[i], "t", err, sizeof err) ==
                          CONFIG_ERR,
                      "'%s' was accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "is not a whole number"));
    }
    ck_assert_int_eq(cfg.lock_wait_ms, 5000);
}
END_TEST

START_TEST(test_a_negative_number_is_parsed_then_range_checked) {
    ck_assert_int_eq(config_apply(&cfg, "lock.wait-ms", "-1", "t", err, sizeof err), CONFIG_ERR);
    ck_assert_str_eq(err, "t: lock.wait-ms: -1 is out of range (0..600000)");
    ck_assert_int_eq(config_apply(&cfg, "lock.wait-ms", "-0", "t", err, sizeof err), CONFIG_OK);
    ck_assert_int_eq(cfg.lock_wait_ms, 0);
}
END_TEST

START_TEST(test_range_bounds_are_inclusive) {
    ck_assert_int_eq(config_apply(&cfg, "redis.database", "1000000", "t", err, sizeof err),
                     CONFIG_OK);
    ck_assert_int_eq(cfg.redis_database, 1000000);
    ck_assert_int_eq(config_apply(&cfg, "redis.database", "1000001", "t", err, sizeof err),
                     CONFIG_ERR);
    ck_assert_int_eq(config_apply(&cfg, "inventory.initial-stock", "0", "t", err, sizeof err),
                     CONFIG_OK);
    ck_assert_int_eq(
        config_apply(&cfg, "inventory.initial-stock", "1000000000", "t", err, sizeof err),
        CONFIG_OK);
    ck_assert_int_eq(cfg.initial_stock, 1000000000);
    ck_assert_int_eq(config_apply(&cfg, "redis.pool-size", "0", "t", err, sizeof err), CONFIG_ERR);
    ck_assert_int_eq(config_apply(&cfg, "lock.retry-max-depth", "100001", "t", err, sizeof err),
                     CONFIG_ERR);
    ck_assert_int_eq(config_apply(&cfg, "faults.max-hold-ms", "3600000", "t", err, sizeof err),
                     CONFIG_OK);
}
END_TEST

START_TEST(test_a_context_path_without_a_leading_slash_is_an_error) {
    ck_assert_int_eq(config_set(&cfg, "server.context-path=shop", err, sizeof err), CONFIG_ERR);
    ck_assert_str_eq(err, "--set: server.context-path: 'shop' must start with '/'");
    ck_assert_str_eq(cfg.context_path, "/redis/distributed/lock");
    ck_assert_int_eq(config_set(&cfg, "server.context-path=", err, sizeof err), CONFIG_ERR);
    ck_assert_int_eq(config_set(&cfg, "server.context-path=/a b", err, sizeof err), CONFIG_ERR);
}
END_TEST

START_TEST(test_a_context_path_loses_its_trailing_slash_but_root_stays_root) {
    ck_assert_int_eq(config_set(&cfg, "server.context-path=/shop/", err, sizeof err), CONFIG_OK);
    ck_assert_str_eq(cfg.context_path, "/shop");
    ck_assert_int_eq(config_set(&cfg, "server.context-path=/a/b//", err, sizeof err), CONFIG_OK);
    ck_assert_str_eq(cfg.context_path, "/a/b");
    ck_assert_int_eq(config_set(&cfg, "server.context-path=/", err, sizeof err), CONFIG_OK);
    ck_assert_str_eq(cfg.context_path, "/");
    ck_assert_int_eq(config_set(&cfg, "server.context-path=//", err, sizeof err), CONFIG_OK);
    ck_assert_str_eq(cfg.context_path, "/");
}
END_TEST

START_TEST(test_lock_strategy_accepts_only_lowercase_letters_digits_and_dashes) {
    ck_assert_int_eq(config_set(&cfg, "lock.strategy=owner-lua", err, sizeof err), CONFIG_OK);
    ck_assert_str_eq(cfg.strategy, "owner-lua");
    ck_assert_int_eq(config_set(&cfg, "lock.strategy=Redlock", err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "lock.strategy: 'Redlock' may contain only"));
    ck_assert_int_eq(config_set(&cfg, "lock.strategy=../x", err, sizeof err), CONFIG_ERR);
    ck_assert_int_eq(config_set(&cfg, "lock.strategy=", err, sizeof err), CONFIG_ERR);
    ck_assert_str_eq(cfg.strategy, "owner-lua");
}
END_TEST

START_TEST(test_a_string_longer_than_its_field_is_an_error) {
    char value[sizeof cfg.strategy + 1];
    memset(value, 'a', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    ck_assert_int_eq(config_apply(&cfg, "lock.strategy", value, "t", err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "lock.strategy: value is too long"));
    value[sizeof value - 2] = '\0'; /* exactly fits */
    ck_assert_int_eq(config_apply(&cfg, "lock.strategy", value, "t", err, sizeof err), CONFIG_OK);
    ck_assert_str_eq(cfg.strategy, value);
}
END_TEST

START_TEST(test_a_too_long_password_is_refused_without_being_repeated) {
    char value[sizeof cfg.redis_password + 10];
    memset(value, 'S', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    memcpy(value, "secret", 6);
    ck_assert_int_eq(config_apply(&cfg, "redis.password", value, "t", err, sizeof err), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "redis.password: value is too long"));
    ck_assert_ptr_null(strstr(err, "secret"));
    ck_assert_str_eq(cfg.redis_password, "");
}
END_TEST

START_TEST(test_an_empty_host_is_an_error_but_an_empty_password_is_allowed) {
    ck_assert_int_eq(load("redis.password=\n"), CONFIG_OK);
    ck_assert_str_eq(cfg.redis_password, "");
    ck_assert_int_eq(load("redis.host=\n"), CONFIG_ERR);
    ck_assert_ptr_nonnull(strstr(err, "redis.host: must not be empty"));
}
END_TEST

START_TEST(test_warnings_that_do_not_fit_are_cut_not_overflowed) {
    char small[24];
    const char *path = write_file("many.properties", "a.a=1\nb.b=2\nc.c=3\nd.d=4\n");
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err, small, sizeof small), CONFIG_OK);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
}
END_TEST

START_TEST(test_a_long_origin_keeps_its_line_number) {
    char origin[1024];
    const char *kept;
    memset(origin, 'd', sizeof origin);
    strcpy(origin + sizeof origin - 20, "/x.properties:7");
    ck_assert_int_eq(config_apply(&cfg, "server.port", "3787", origin, err, sizeof err), CONFIG_OK);
    kept = config_origin(&cfg, "server.port");
    ck_assert_uint_lt(strlen(kept), CONFIG_ORIGIN_MAX);
    ck_assert_str_eq(kept + strlen(kept) - 15, "/x.properties:7");
}
END_TEST

START_TEST(test_a_null_errstr_is_allowed) {
    ck_assert_int_eq(config_apply(&cfg, "server.port", "x", "t", NULL, 0), CONFIG_ERR);
    ck_assert_int_eq(config_set(&cfg, "nope=1", NULL, 0), CONFIG_ERR);
}
END_TEST

START_TEST(
    test_every_host_port_key_refuses_schemes_paths_users_and_empty_parts_with_file_and_line) {
    static const char *const addr_keys[] = {"lab.target", "lab.instances", "redlock.nodes",
                                            "redis.sentinel.nodes", "redis.cluster.nodes"};
    static const struct {
        const char *value, *says;
    } bad[] = {
        {"http://127.0.0.1:17110", "no scheme"},
        {"127.0.0.1:17110/", "not host:port"},
        {"127.0.0.1/x:17110", "no path"},
        {"user@127.0.0.1:17110", "no user"},
        {"127.0.0.1:17110,", "empty entry"},
        {",127.0.0.1:17110", "empty entry"},
        {"a:1,,b:2", "empty entry"},
        {"127.0.0.1", "not host:port"},
        {"127.0.0.1:", "not host:port"},
        {":17110", "not host:port"},
        {"127.0.0.1:0", "not host:port"},
        {"127.0.0.1:65536", "not host:port"},
        {"ho st:1", "letters, digits"},
    };
    for (size_t k = 0; k < sizeof(addr_keys) / sizeof(addr_keys[0]); k++) {
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            char line[256];
            /* line 2 of the file: the error must say so */
            snprintf(line, sizeof line, "# a comment\n%s=%s\n", addr_keys[k], bad[i].value);
            config_defaults(&cfg);
            ck_assert_msg(load(line) == CONFIG_ERR, "%s=%s was accepted", addr_keys[k],
                          bad[i].value);
            ck_assert_msg(strstr(err, at_line(2)) != NULL, "no file:line in: %s", err);
            ck_assert_msg(strstr(err, addr_keys[k]) != NULL, "no key name in: %s", err);
            ck_assert_msg(strstr(err, bad[i].says) != NULL, "'%s' does not say '%s': %s",
                          bad[i].value, bad[i].says, err);
            unlink(tmpfiles[--ntmpfiles]); /* room for the next one */
        }
    }
    /* and what is right is still right */
    config_defaults(&cfg);
    ck_assert_int_eq(load("lab.instances= a-1.example:3786 , 10.0.0.2:3787\n"
                          "redlock.nodes=::1:6381,[::1]x:1\n"),
                     CONFIG_ERR);
    config_defaults(&cfg);
    ck_assert_int_eq(load("lab.instances= a-1.example:3786 , 10.0.0.2:3787\n"
                          "redlock.nodes=::1:6381,redis_1:6382,127.0.0.1:6383\n"),
                     CONFIG_OK);
}
END_TEST

Suite *config_suite(void) {
    Suite *s = suite_create("config");
    TCase *core = tcase_create("Core");
    TCase *overrides = tcase_create("Overrides");
    TCase *limits = tcase_create("Limits");

    tcase_add_checked_fixture(core, setup, teardown);
    tcase_add_test(core, test_defaults_match_the_documented_values);
    tcase_add_test(core, test_every_key_says_default_as_its_origin_before_any_override);
    tcase_add_test(core, test_an_unknown_key_has_no_origin);
    tcase_add_test(core, test_the_shipped_properties_file_gives_the_defaults_and_no_warnings);
    tcase_add_test(core, test_comments_blank_lines_crlf_and_spaces_are_accepted);
    tcase_add_test(core, test_a_value_may_contain_equals_and_colons);
    tcase_add_test(core, test_key_colon_value_is_accepted_like_key_equals_value);
    tcase_add_test(core, test_the_last_occurrence_of_a_key_in_a_file_wins);
    tcase_add_test(core, test_a_line_without_a_separator_is_an_error_naming_file_and_line);
    tcase_add_test(core, test_a_line_with_an_empty_key_is_an_error);
    tcase_add_test(core, test_an_unknown_key_in_a_file_is_a_warning_not_an_error);
    tcase_add_test(core, test_cluster_mode_says_what_cannot_share_a_cluster_and_why);
    tcase_add_test(core, test_a_lock_name_among_an_items_keys_is_refused_naming_lock_name);
    tcase_add_test(core, test_redis_unix_socket_is_refused_with_a_cluster_or_sentinels);
    tcase_add_test(core, test_a_missing_file_is_an_error_naming_the_path_and_reason);
    tcase_add_test(
        core,
        test_every_host_port_key_refuses_schemes_paths_users_and_empty_parts_with_file_and_line);
    tcase_add_test(core, test_a_warnings_buffer_may_be_null);
    tcase_add_test(core, test_booleans_accept_true_false_yes_no_on_off_1_0_in_any_case);
    tcase_add_test(core, test_a_word_that_is_not_a_boolean_is_an_error);
    tcase_add_test(core, test_config_dump_lists_every_key_and_masks_the_password);
    tcase_add_test(core, test_config_dump_shows_an_empty_password_as_empty);
    tcase_add_test(core, test_config_dump_returns_the_needed_length_when_the_buffer_is_small);
    suite_add_tcase(s, core);

    tcase_add_checked_fixture(overrides, setup, teardown);
    tcase_add_test(overrides, test_env_overrides_the_file_and_names_the_variable_as_origin);
    tcase_add_test(overrides, test_set_overrides_env);
    tcase_add_test(overrides, test_each_set_applies_in_order_and_the_last_wins);
    tcase_add_test(overrides, test_env_names_map_dots_and_dashes_to_underscores);
    tcase_add_test(overrides, test_env_variables_without_the_prefix_are_ignored);
    tcase_add_test(overrides, test_an_unknown_inventoryd_variable_is_a_warning_naming_it);
    tcase_add_test(overrides, test_a_bad_env_value_names_the_variable_and_the_key);
    tcase_add_test(overrides, test_a_null_environment_changes_nothing);
    tcase_add_test(overrides, test_an_unknown_key_in_set_is_an_error);
    tcase_add_test(overrides, test_set_without_equals_is_an_error);
    tcase_add_test(overrides, test_a_bad_set_value_names_set_and_the_key);
    tcase_add_test(overrides, test_origins_report_file_line_env_and_set);
    tcase_add_test(overrides, test_a_failed_set_leaves_the_previous_value_and_origin);
    tcase_add_test(overrides, test_each_load_reports_only_its_own_warnings);
    suite_add_tcase(s, overrides);

    tcase_add_checked_fixture(limits, setup, teardown);
    tcase_add_test(limits, test_a_port_above_65535_names_the_key_and_line);
    tcase_add_test(limits, test_port_zero_and_65535_are_the_edges);
    tcase_add_test(limits, test_a_ttl_with_a_unit_is_not_a_whole_number);
    tcase_add_test(limits, test_an_overflowing_number_is_out_of_range_not_wrapped);
    tcase_add_test(limits, test_numbers_with_a_plus_spaces_hex_or_nothing_are_rejected);
    tcase_add_test(limits, test_a_negative_number_is_parsed_then_range_checked);
    tcase_add_test(limits, test_range_bounds_are_inclusive);
    tcase_add_test(limits, test_a_context_path_without_a_leading_slash_is_an_error);
    tcase_add_test(limits, test_a_context_path_loses_its_trailing_slash_but_root_stays_root);
    tcase_add_test(limits, test_lock_strategy_accepts_only_lowercase_letters_digits_and_dashes);
    tcase_add_test(limits, test_a_string_longer_than_its_field_is_an_error);
    tcase_add_test(limits, test_a_too_long_password_is_refused_without_being_repeated);
    tcase_add_test(limits, test_an_empty_host_is_an_error_but_an_empty_password_is_allowed);
    tcase_add_test(limits, test_warnings_that_do_not_fit_are_cut_not_overflowed);
    tcase_add_test(limits, test_a_long_origin_keeps_its_line_number);
    tcase_add_test(limits, test_a_null_errstr_is_allowed);
    tcase_add_test(
        limits,
        test_off_loopback_an_admin_token_is_needed_even_with_lab_and_faults_off_and_loopback_needs_none);
    tcase_add_test(limits, test_admin_token_is_empty_or_16_visible_characters_and_never_repeated);
    suite_add_tcase(s, limits);
    return s;
}
