/* service.c -- the service's parts from its settings (see service.h). */
#include <stdio.h>
#include <string.h>
#include "config.h"
#include "inventory.h"
#include "lock.h"
#include "rpool.h"
#include "service.h"

int service_open(struct service *s, const struct config *cfg, char *errstr, size_t errlen) {
    memset(s, 0, sizeof(*s));
    struct rpool_options po = {
        .host = cfg->redis_host,
        .port = cfg->redis_port,
        .unix_socket = cfg->redis_unix_socket,
        .password = cfg->redis_password,
        .sentinels = cfg->sentinel_nodes,
        .master_name = cfg->sentinel_master,
        .cluster_nodes = cfg->cluster_nodes,
        .cluster_max_redirects = cfg->cluster_max_redirects,
        .database = cfg->redis_database,
        .timeout_ms = cfg->redis_timeout_ms,
        .size = cfg->redis_pool_size,
        .load_scripts = 1,
    };
    struct lock_core_options lo = {
        .pool_wait_ms = cfg->redis_timeout_ms,
        .redlock_nodes = cfg->redlock_nodes,
        .redlock_password = cfg->redis_password,
        .redlock_node_timeout_ms = cfg->redlock_node_timeout_ms,
        .redlock_pool_size = cfg->redis_pool_size,
        .ttl_ms = cfg->lock_ttl_ms,
        .wait_ms = cfg->lock_wait_ms,
        .spin_sleep_ms = cfg->lock_spin_sleep_ms,
        .retry_depth = cfg->lock_retry_depth,
        .sync_replicas = cfg->lock_sync_replicas,
        .zookeeper_connect = cfg->zookeeper_connect,
        .zookeeper_session_timeout_ms = cfg->zookeeper_session_timeout_ms,
        .mysql_host = cfg->mysql_host,
        .mysql_port = cfg->mysql_port,
        .mysql_user = cfg->mysql_user,
        .mysql_password = cfg->mysql_password,
        .mysql_database = cfg->mysql_database,
    };
    if (!(s->pool = rpool_create(&po))) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    lo.pool = s->pool;
    if (!(s->core = lock_core_init(&lo, errstr, errlen)) ||
        !(s->inv = inventory_create(cfg, s->pool, s->core, errstr, errlen))) {
        service_close(s);
        return -1;
    }
    return 0;
}

void service_close(struct service *s) {
    inventory_free(s->inv);
    lock_core_shutdown(s->core);
    rpool_free(s->pool);
    memset(s, 0, sizeof(*s));
}
