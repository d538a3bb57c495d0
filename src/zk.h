/* zk.h -- one ZooKeeper session per process, for the locks that live in
 * ZooKeeper (lock_zookeeper.c): ZooKeeper's own multithreaded C binding
 * (zookeeper_mt), one zhandle_t at a time, made anew when its session
 * expires, and the waits on a node's deletion.
 *
 * Errors name the server and the cause: "zookeeper 127.0.0.1:2181: connection
 * loss". Thread safe. */
#ifndef INVENTORYD_ZK_H
#define INVENTORYD_ZK_H

#include <stddef.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

struct zk;
struct zk_session;

/* Starts connecting to connect ("host:port,...") with a session timeout of
 * session_timeout_ms (the server may negotiate it within its own bounds).
 * Returns at once: the session is established in the background. NULL with
 * errstr set when no handle could be made. */
struct zk *zk_open(const char *connect, int session_timeout_ms, char *errstr, size_t errlen);

/* Closes the handles (joining the binding's threads) and frees z. Every
 * session taken must have been put back. Accepts NULL. */
void zk_close(struct zk *z);

/* 0 when the current session is connected; -1 with why ("zookeeper
 * 127.0.0.1:2181: not connected (connecting)") otherwise. Replaces an
 * expired session, without waiting for the new one. */
int zk_ready(struct zk *z, char *why, size_t whylen);

/* The connect string, for messages. */
const char *zk_connect_string(const struct zk *z);

/* The current session, once connected: replaces an expired one, then waits
 * until it is connected, until deadline_us (monotonic) at the latest and at
 * most one session timeout. NULL with errstr set otherwise. Give it back
 * with zk_session_put: a replaced session is closed once the last user has
 * put it back. */
struct zk_session *zk_session_get(struct zk *z, int64_t deadline_us, char *errstr, size_t errlen);
void zk_session_put(struct zk_session *s);

/* The session's handle (for the zoo_* calls) and its number: 1 for the
 * first session of z, then one more for each that replaced an expired
 * one. */
zhandle_t *zk_handle(const struct zk_session *s);
unsigned zk_generation(const struct zk_session *s);

/* The number of z's current session (0 while none), without waiting. */
unsigned zk_current_generation(struct zk *z);

/* Whether the server ended the session (expired): its ephemeral nodes are
 * gone. */
int zk_session_expired(struct zk_session *s);

/* "zookeeper <connect>: <what>: <zerror(rc)>" (no "<what>: " when what is
 * NULL or ""). */
void zk_error(const struct zk *z, char *buf, size_t len, const char *what, int rc);

/* Results of zk_wait_gone. */
#define ZK_GONE 0 /* the node was deleted (or did not exist) */
#define ZK_WAIT_TIMEOUT 1 /* the deadline passed first */
#define ZK_WAIT_ERROR -1 /* the session expired or the watch could not be set */

/* Sets a watch on path (zoo_wexists) and waits until the node is gone or
 * deadline_us (monotonic) has passed. A dropped connection is waited out (the
 * binding sets the watch again when it reconnects within the session);
 * an expired session is not. On ZK_WAIT_ERROR, *zrc gets the ZooKeeper
 * error (ZSESSIONEXPIRED when the session ended). */
int zk_wait_gone(struct zk_session *s, const char *path, int64_t deadline_us, int *zrc);

/* Ends session s from outside, as Curator's tests expire one: a second
 * handle opened on s's id and password (the server moves the session to
 * it and drops s's connection), closed once connected (the server ends
 * the session and removes its ephemeral nodes). Returns once s's own
 * handle has seen the session expire, when it reconnects: 0; or -1 with
 * errstr set after ZK_END_TRIES tries of 1 s (and a 60th of the session
 * timeout) each. Tries, because the two handles race: the server drops
 * s's connection when the twin connects, s's handle reconnects at once,
 * and the server then drops the twin's; a close sent after that is lost,
 * and s's handle keeps its session (in about half the tries here).
 * A fault for the lab: the session ends for every hold of the process. */
#define ZK_END_TRIES 10
int zk_session_end(struct zk_session *s, char *errstr, size_t errlen);

#endif
