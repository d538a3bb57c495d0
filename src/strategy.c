/* strategy.c -- the table of sale strategies (see strategy.h). In ladder
 * order: the flaw of each step is fixed by a later one. */
#include <stdio.h>
#include <string.h>
#include "lock.h"
#include "sale.h"
#include "strategy.h"

const struct strategy strategies[] = {
    {"none", "no lock: read, check and write the stock unguarded",
     "oversells even on one instance: concurrent sales read the same stock", &lock_type_none, NULL,
     &sale_plain},
    {"local", "in-process lock: one pthread mutex per instance",
     "safe on one instance, oversells across two behind nginx", &lock_type_local, NULL,
     &sale_plain},
    {"setnx-retry", "SETNX without expiry; on failure sleep 20 ms and retry by recursion",
     "recursion depth grows with contention (capped by lock.retry-max-depth and by the "
     "thread's stack, reported as lock.depth)",
     &lock_type_setnx_retry, NULL, &sale_plain},
    {"setnx-spin", "SETNX without expiry, spinning with lock.spin-sleep-ms sleeps",
     "a holder that dies leaves the lock forever: every later sale times out",
     &lock_type_setnx_spin, NULL, &sale_plain},
    {"expiring", "SET key value NX PX ttl in one command; release by DEL",
     "a holder slower than the TTL deletes someone else's lock", &lock_type_expiring, NULL,
     &sale_plain},
    {"owner-check", "SET NX PX; release only if GET returns my value, then DEL",
     "the check and the delete are two commands: a lock that expires between them is "
     "deleted from its next owner",
     &lock_type_owner_check, NULL, &sale_plain},
    {"owner-lua", "SET NX PX; release by compare-and-delete in one Lua script",
     "not reentrant: a nested acquire by the same owner blocks on itself", &lock_type_owner_lua,
     NULL, &sale_plain},
    {"reentrant",
     "Redisson's hash lock: HINCRBY hold count per owner, PEXPIRE lease, PTTL when busy",
     "no renewal: work longer than the TTL loses the lock to the next owner", &lock_type_reentrant,
     NULL, &sale_plain},
    {"watchdog", "reentrant hash lock renewed every TTL/3 while held, by one watchdog thread",
     "one Redis master: a failover before replication can hand the lock to two owners",
     &lock_type_watchdog, NULL, &sale_plain},
    {"redisson",
     "watchdog lock whose waiters sleep until an unlock message, Redisson's layout and scripts",
     "one Redis master, as watchdog: a failover can lose the lock", &lock_type_redisson,
     &lock_type_rw_write, &sale_plain},
    {"redlock",
     "Redlock: the hash lock on N independent masters, N/2+1 votes within the validity time",
     "relies on bounded clock drift and pauses shorter than the validity time", &lock_type_redlock,
     NULL, &sale_plain},
    {"fenced", "SET NX PX plus a fencing token from INCR; the stock write refuses older tokens",
     "none for correctness: a stale holder's write is refused (409 stale_token), not applied",
     &lock_type_fenced, NULL, &sale_fenced},
    {"handoff",
     "a fair FIFO lock in Redis handed, with the stock, straight to the next waiter: "
     "one script queues, the commit script checks the lease, writes and grants the next",
     "none for correctness: it fixes the herd redisson's unlock wakes, and a lost lease writes "
     "nothing (409 lock_lost); one master, as redisson: a failover can lose the lock",
     &lock_type_handoff, NULL, &sale_handoff},
    {"batched", "the redisson lock, but one hold sells for every request queued in the process",
     "none known: it keeps every guarantee of redisson, with one acquire per batch",
     &lock_type_redisson, &lock_type_rw_write, &sale_batched},
    {"zookeeper",
     "Curator's mutex on ZooKeeper: an ephemeral sequential node each, the lowest holds, each "
     "waiter watching only the node before its own",
     "the session is the lease: a holder paused past the session timeout is still writing when "
     "its node is gone and the next holder enters",
     &lock_type_zookeeper, NULL, &sale_plain},
    {"zookeeper-fenced",
     "the zookeeper lock, its node's czxid as the fencing token the stock write checks",
     "none for correctness: a paused holder's late write is refused (409 stale_token), not "
     "applied",
     &lock_type_zookeeper_fenced, NULL, &sale_store_fenced},
    {"mysql",
     "the factory's MYSQL lock: SELECT GET_LOCK / RELEASE_LOCK on a MariaDB session of its own",
     "a killed, cut or timed-out session frees the lock while its holder still writes",
     &lock_type_mysql, NULL, &sale_plain},
    {"mysql-fenced",
     "mysql, plus a fencing token from a durable MariaDB counter taken in the lock's session; the "
     "stock write refuses older tokens",
     "none for correctness: a holder whose session was lost has its write refused (409 "
     "stale_token or stock_changed)",
     &lock_type_mysql_fenced, NULL, &sale_store_fenced},
    {"atomic", "no lock: check-and-decrement in one Lua script",
     "none for this workload; it is the reference ceiling, but only fits work that one script can "
     "do",
     &lock_type_none, NULL, &sale_atomic},
    {NULL, NULL, NULL, NULL, NULL, NULL},
};

const struct strategy *strategy_find(const char *name) {
    for (int i = 0; strategies[i].name; i++)
        if (strcmp(strategies[i].name, name) == 0) return &strategies[i];
    return NULL;
}

int strategy_count(void) {
    int n = 0;
    while (strategies[n].name) n++;
    return n;
}

int strategy_index(const struct strategy *s) {
    for (int i = 0; strategies[i].name; i++)
        if (&strategies[i] == s) return i;
    return -1;
}

void strategy_names(char *buf, size_t len) {
    size_t off = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; strategies[i].name && off < len; i++) {
        int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", strategies[i].name);
        if (n < 0) break;
        off += (size_t)n;
    }
}

void strategy_session_names(char *buf, size_t len) {
    size_t off = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; strategies[i].name && off < len; i++) {
        if (!lock_type_ends_session(strategies[i].lock)) continue;
        int n = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", strategies[i].name);
        if (n < 0) break;
        off += (size_t)n;
    }
}
