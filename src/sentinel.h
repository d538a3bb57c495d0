/* sentinel.h -- asking Redis Sentinel where a master is.
 *
 * The sentinels are written "host:port,host:port,..." (redis.sentinel.nodes,
 * parsed by addr_list_parse, at most SENTINEL_MAX).
 * They are reached without AUTH: redis.password is the master's, not theirs.
 * Nothing here keeps state between calls: every function is thread safe. */
#ifndef INVENTORYD_SENTINEL_H
#define INVENTORYD_SENTINEL_H

#include <stddef.h>

#include "addr.h"

#define SENTINEL_MAX 16

/* Asks one sentinel `SENTINEL get-master-addr-by-name master`, with connect
 * and command timeouts of timeout_ms. Returns 0 with host and *port set, or
 * -1 with errstr saying why ("Connection refused", "does not know master
 * 'x'"), never naming the sentinel (the caller lists the ones it tried). */
int sentinel_ask(const struct addr *s, const char *master, int timeout_ms, char *host,
                 size_t hostlen, int *port, char *errstr, size_t errlen);

#endif
