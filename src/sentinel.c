/* sentinel.c -- asking Redis Sentinel where a master is (see sentinel.h).
 *
 * Every question is one short-lived connection: a master is looked up only
 * when rpool dials a new connection, which is rare next to the commands sent
 * on pooled ones, and a fresh connection never carries a stale answer. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include "sentinel.h"

int sentinel_ask(const struct addr *s, const char *master, int timeout_ms, char *host,
                 size_t hostlen, int *port, char *errstr, size_t errlen) {
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
    if (!c || c->err) {
        snprintf(errstr, errlen, "%s", c ? c->errstr : "out of memory");
        redisFree(c);
        return -1;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", master);
    int rc = -1;
    if (!r) {
        snprintf(errstr, errlen, "%s", c->errstr);
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(errstr, errlen, "%.100s", r->str);
    } else if (r->type == REDIS_REPLY_NIL) {
        snprintf(errstr, errlen, "does not know master '%.60s'", master);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
               r->element[0]->type != REDIS_REPLY_STRING ||
               r->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(errstr, errlen, "unexpected answer to get-master-addr-by-name");
    } else {
        char *end;
        long p = strtol(r->element[1]->str, &end, 10);
        if (*end || p < 1 || p > 65535 || r->element[0]->len >= hostlen) {
            snprintf(errstr, errlen, "unusable master address from get-master-addr-by-name");
        } else {
            memcpy(host, r->element[0]->str, r->element[0]->len + 1);
            *port = (int)p;
            rc = 0;
        }
    }
    freeReplyObject(r);
    redisFree(c);
    return rc;
}
