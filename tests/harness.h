/* harness.h -- real servers for the tests: a throwaway redis-server on a free
 * port, inventoryd processes, all stopped by their pid. No mocks. */
#ifndef INVENTORYD_HARNESS_H
#define INVENTORYD_HARNESS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>
#include <zookeeper/zookeeper.h>
#include "httpc.h"

/* HARNESS_SANITIZED is 1 in a build with AddressSanitizer, whose checks slow
 * every step: timing bounds may be wider there. GCC defines
 * __SANITIZE_ADDRESS__; clang (14 at least) only answers
 * __has_feature(address_sanitizer). */
#if defined(__SANITIZE_ADDRESS__)
#define HARNESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HARNESS_SANITIZED 1
#endif
#endif
#ifndef HARNESS_SANITIZED
#define HARNESS_SANITIZED 0
#endif

/* A TCP port on 127.0.0.1 below 32768 (out of the ephemeral range) that
 * nothing listens on right now and that this thread was not given lately;
 * -1 when none was found. */
int harness_free_port(void);

/* Starts redis-server on port (0 = a free one), without persistence, and
 * waits until it answers PING. Returns its pid, or -1. *port_out gets the
 * port when not NULL. */
pid_t harness_redis_start(int port, int *port_out);

/* As harness_redis_start, with more redis-server arguments (NULL-terminated;
 * may be NULL), e.g. {"--enable-debug-command", "yes", NULL} for DEBUG SLEEP. */
pid_t harness_redis_start_args(int port, int *port_out, const char *const *args);

/* A port on 127.0.0.1 in 20000..22767 that is free along with port + 10000,
 * the Redis Cluster bus port it implies (below the ephemeral range). -1
 * when none was found. */
int harness_free_cluster_port(void);

/* Starts a Redis Cluster of `masters` masters, each with `replicas`
 * replicas, on free cluster ports (redis-server --cluster-enabled yes, then
 * redis-cli --cluster create ... --cluster-yes), and waits until every node
 * says cluster_state:ok and knows every node. ports[] and pids[] get
 * masters * (1 + replicas) entries, masters first as redis-cli made them.
 * Returns 0, or -1 with everything started stopped again. Stop the nodes
 * with harness_stop. */
int harness_cluster_start(int masters, int replicas, int *ports, pid_t *pids);

/* Starts a standalone ZooKeeper (Debian's, java run directly so that the
 * pid is the JVM's: stop it with harness_stop) on 127.0.0.1:port, with
 * tickTime=500 (session timeouts from 1 s to 10 s), a 128 MB heap, no admin
 * server, and its config and data in /tmp/inventoryd-harness-zk-<port>:
 * port 0 picks a free port and starts from an empty data dir; a port given
 * keeps that port's data (a restart: the same sessions and zxids). Waits
 * until it answers "ruok" with "imok". Returns its pid, or -1. *port_out
 * gets the port when not NULL. */
pid_t harness_zookeeper_start(int port, int *port_out);

/* The answer of the ZooKeeper at port to a four-letter word ("ruok",
 * "wchp": every watched path and the sessions watching it), read until the
 * server closes, into buf; its length, or -1 on error. */
int harness_zookeeper_4lw(int port, const char *word, char *buf, size_t len);

/* Removes the config and data of the ZooKeeper on port. */
void harness_zookeeper_wipe(int port);

/* The children of path on the ZooKeeper at port, through a session of its
 * own: their names, one a line, into buf; returns how many (0 when path
 * does not exist), or -1 on error. */
int harness_zookeeper_children(int port, const char *path, char *buf, size_t len);

/* A throwaway MariaDB server of the test's own: a fresh data directory in
 * a new directory under /tmp, copied from a template that
 * mariadb-install-db made once (root with normal authentication and an
 * empty password, no test database, as root; kept in /tmp for later runs),
 * then
 * mariadbd --no-defaults serves it on 127.0.0.1 at a free port and on a unix
 * socket in that directory, small InnoDB buffers, no name resolution.
 * Waits (10 s at most) until it answers a query as root. Returns its pid,
 * or -1 (nothing left behind); *port_out gets the port and sock the
 * socket's path. Stop it with harness_mariadb_stop. */
pid_t harness_mariadb_start(int *port_out, char *sock, size_t socklen);

/* Starts again the MariaDB server whose socket was sock (stopped by
 * harness_mariadb_stop(pid, sock, 0)), on the same port and data. Its pid,
 * or -1. */
pid_t harness_mariadb_restart(int port, const char *sock);

/* Stops mariadbd by its pid (harness_stop); with remove, deletes the
 * directory of sock (its data, its socket and its logs). */
void harness_mariadb_stop(pid_t pid, const char *sock, int remove);

typedef struct st_mysql MYSQL;

/* A root session to the MariaDB at 127.0.0.1:port (close it with
 * mysql_close), or NULL. For test set-up and checks only. */
MYSQL *harness_mariadb_connect(int port);

/* Runs a statement (printf-style) on m and returns the first column of its
 * first row as an integer; -1 on error, -2 when it is NULL. */
long long harness_mariadb_int(MYSQL *m, const char *fmt, ...);

/* Stops a process by pid (SIGTERM, then SIGKILL after 5 s) and reaps it. */
void harness_stop(pid_t pid);

/* Starts inventoryd with the given --set assignments (NULL-terminated), each
 * passed as "--set" "k=v", and waits until its port accepts connections.
 * Returns its pid, or -1. */
pid_t harness_inventoryd_start(int port, const char *const *sets);

/* As harness_inventoryd_start, with the instance's stdout and stderr
 * written to the file at log_path (created or truncated). */
pid_t harness_inventoryd_start_logged(int port, const char *const *sets, const char *log_path);

/* Starts two inventoryd instances (A and B) on the Redis at redis_port with
 * lock.ttl-ms, lock.wait-ms, faults.enabled=true and the extra assignments
 * (NULL-terminated; may be NULL), then resets the stock to 200 through A.
 * Fills the pids and ports; returns 0, or -1 when a start or the reset
 * failed (whatever started is left for the caller to stop). */
int harness_pair_start(int redis_port, int ttl_ms, int wait_ms, const char *const *extra,
                       pid_t *a_pid, int *a_port, pid_t *b_pid, int *b_port);

/* A number from GET /inventory/audit on port ("violations"); -1e9 when the
 * audit did not answer 200. */
double harness_audit(int port, const char *field);

/* Starts a lab run on the instance on port (POST /lab/runs body) and waits
 * up to timeout_ms for it to finish; out gets its verdict as
 * "<result>: <evidence>". 0, or -1 with out saying what went wrong. */
int harness_lab_verdict(int port, const char *body, int timeout_ms, char *out, size_t len);

/* As harness_lab_verdict, but returns the finished run itself (GET
 * /lab/runs/{id}: its steps with their answers and holds, its audit and
 * its verdict; free it with cJSON_Delete), or NULL with why set. */
struct cJSON;
struct cJSON *harness_lab_run(int port, const char *body, int timeout_ms, char *why, size_t len);

/* Runs the lab's session-lost scenario with strategy on the instance at
 * port (its lab.instances being A and B), and checks that its fault went
 * through its window before anything else is judged: the run finished as
 * written, A's answer says its store session was ended (session_ended,
 * session_end_us no earlier than A's grant), B was granted no sooner than
 * 1 ms before that end and before A answered, and the verdict says the
 * window was reached. The run (cJSON_Delete it), or NULL with why ("fault
 * missed its window: ..."). */
struct cJSON *harness_session_lost(int port, const char *strategy, char *why, size_t len);

/* Waits until something accepts TCP on 127.0.0.1:port; 0 or -1 on timeout. */
int harness_wait_port(int port, int timeout_ms);

/* One request on a fresh connection to 127.0.0.1:port; fills *resp and
 * returns the HTTP status (0 on failure). The body stays valid until the
 * next harness_http call on this thread. */
int harness_http(int port, const char *method, const char *path, const char *headers,
                 const char *body, struct httpc_response *resp);

/* Runs a Redis command (printf-style, as redisCommand) against
 * 127.0.0.1:port and returns the reply's integer, or the string parsed as an
 * integer; -1 on error. For test set-up and checks only. */
long long harness_redis_int(int port, const char *fmt, ...);

/* Runs a Redis command against 127.0.0.1:port and returns its reply (free
 * with freeReplyObject), or NULL. */
redisReply *harness_redis(int port, const char *fmt, ...);

/* Polls the Redis at port (every 5 ms, at most limit_ms) until the command
 * (printf-style) answers want, read as harness_redis_int reads it: waits
 * for an event ("the holder took the lock": EXISTS of the lock key is 1)
 * instead of a time. 1 when it did, 0 when the limit passed first. */
int harness_redis_until(int port, long long want, int limit_ms, const char *fmt, ...);

/* Makes the Redis at port sleep `seconds` (DEBUG SLEEP) before it runs any
 * command sent after this returns: the sleep is written on a connection
 * Redis has already accepted (a PING answered on it), so its bytes are
 * ready before those of any later command, and Redis, which serves ready
 * sockets in the order they became ready, sleeps first. Returns that
 * connection (give it to harness_redis_sleep_end), or NULL on error. */
redisContext *harness_redis_sleep_begin(int port, const char *seconds);

/* Waits for the sleep's reply (Redis is awake again) and frees c. 0, or -1
 * when no reply came. */
int harness_redis_sleep_end(redisContext *c);

/* Waits until the Redis at port has been up for at least seconds (its
 * INFO uptime_in_seconds), at most seconds + 3 s. 0, or -1 on timeout. */
int harness_redis_wait_uptime(int port, int seconds);

/* The calls= count of one command in INFO commandstats ("evalsha"), or of
 * every command when cmd is NULL; -1 on error. */
long long harness_redis_calls(int port, const char *cmd);

/* How many clients are subscribed to channel (PUBSUB NUMSUB), or -1 on
 * error. */
long long harness_subscribers(int port, const char *channel);

/* Every command one Redis runs, as MONITOR shows it: one line per command,
 * "<unix time> [<db> <client>] "CMD" "arg" ...", commands run by Lua
 * scripts included ("[<db> lua]"). */
struct harness_monitor;

/* Starts recording the commands run by the Redis at port; NULL on error. */
struct harness_monitor *harness_monitor_start(int port);

/* Stops recording and returns the lines of every command Redis ran between
 * the start and this call, '\n'-separated: malloc'd, the caller frees it.
 * NULL on error. Frees m. */
char *harness_monitor_stop(struct harness_monitor *m);

/* Lines of a MONITOR log that contain `has` (NULL: any) and none of the
 * NULL-terminated `but` (may be NULL). */
int harness_lines(const char *log, const char *has, const char *const *but);

/* One line of a MONITOR log, parsed: when Redis ran it (wall-clock
 * seconds), who sent it (the client's "127.0.0.1:40312", or "lua" for a
 * command a script ran) into addr, and *cmd where the command itself
 * starts. 0, or -1 when line does not have the form of a MONITOR line. */
int harness_monitor_parse(const char *line, double *ts, char *addr, size_t addrlen,
                          const char **cmd);

/* 1 when no client of the Redis at port is connected from addr (as
 * MONITOR names it), 0 when one is, -1 on error. An instance closes a
 * pooled connection only when a command on it failed (a reply timed out,
 * or the server closed it): a command that Redis ran on a connection gone
 * since then had its reply lost. */
int harness_redis_client_gone(int port, const char *addr);

/* The SHA1 by which Redis knows the service's script src/lua/<name>.lua (the
 * file is loaded with SCRIPT LOAD into the Redis at port, as the service
 * would); "" on error. Static storage, valid until the next call. */
const char *harness_script_sha(int port, const char *name);

/* The value of one series of GET /metrics on port, named exactly as in the
 * exposition ("inventoryd_sales_total{strategy=\"atomic\"}"); -1 when the
 * series is absent or /metrics did not answer 200. */
long long harness_metric(int port, const char *series);

/* 1 when a TCP connect to 127.0.0.1:port is refused (nothing listens). */
int harness_refused(int port);

/* A Redisson client, with Redisson's own lock and unlock scripts: takes the
 * hash lock `key` on the Redis at port for owner ("<uuid>:<thread>") with a
 * lease of lease_ms; 1 when granted, 0 when busy, -1 on error. */
int harness_redisson_lock(int port, const char *key, const char *owner, int lease_ms);

/* Its unlock: one hold of owner given back; at zero the key is deleted and
 * "0" is published on redisson_lock__channel:{key}. 1 when the lock was
 * freed, 0 when it is still held (re-entered), -1 when it was not owner's. */
int harness_redisson_unlock(int port, const char *key, const char *owner);

/* A request run on its own thread, started delay_ms from now. */
struct harness_bg {
    int port;
    char path[256];
    int delay_ms;
    int status; /* HTTP status, 0 if no answer (e.g. a crash) */
    char body[1024];
    int64_t sent_ms; /* monotonic ms when it was sent */
    int64_t took_ms;
    pthread_t thread;
};

void harness_bg_start(struct harness_bg *b, int port, const char *path, int delay_ms);
void harness_bg_join(struct harness_bg *b);

/* The order in which an instance took a sale in: its answer's order id is
 * "<instance>-<n>", n counted as sales come in (inventory_sell); -1 if
 * absent. Sales sent a few tens of ms apart may come in out of the order
 * they were sent in (a loaded machine schedules their threads as it
 * likes): order tests compare what was served with this, not with the
 * sending order. */
long harness_arrival(const char *body);

/* Fills rank[] (n entries) with the indices of b[from..from+n-1] in the
 * order the instance took them in (harness_arrival); answers without an
 * order id come first. */
void harness_by_arrival(const struct harness_bg *b, int from, int n, int *rank);

/* Whether the sales b[from..from+n-1] were served as a FIFO gate serves
 * them: all answered 200, the units top, top-1, ... went to them in the
 * order they came in (harness_by_arrival), and every one but the first to
 * come in took the lock at its first attempt (lock.attempts 1: it did not
 * contend while queued). 1 when so; 0 with what was not, in why. */
int harness_served_in_arrival_order(const struct harness_bg *b, int from, int n, int top, char *why,
                                    size_t len);

/* Whether every sale of b[from..from+n-1] was inside the instance, waiting,
 * before `freed_ms` (mclock_ms() when the lock they queued behind was
 * freed): a sale came in no later than its answer less its lock.wait_ms,
 * so an answer that ends more than its wait after the sending began proves
 * nothing of the kind. And the first to come in contended (lock.attempts
 * above 1): it met the held lock. 1 when so; 0 with why ("fault missed its
 * window: ..."). */
int harness_queued_before(const struct harness_bg *b, int from, int n, int64_t freed_ms, char *why,
                          size_t len);

/* A number in a JSON body by dotted path ("lock.wait_ms"); -1 if absent. */
double harness_json_num(const char *body, const char *path);

/* A string in a JSON body by key at the top level; "" if absent. Static
 * storage, valid until the next call on this thread. */
const char *harness_json_str(const char *body, const char *key);

#endif
