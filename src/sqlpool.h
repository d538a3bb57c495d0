/* sqlpool.h -- a bounded pool of MariaDB (or MySQL) sessions to one server,
 * made with Connector/C (libmariadb).
 *
 * A session (a MYSQL handle) belongs to one thread at a time:
 * sqlpool_get() hands one out, and the caller gives it back with
 * sqlpool_put(), or sqlpool_drop() when a statement failed on it in a way
 * that leaves its state unknown (a lost reply, a killed session). A dropped
 * session is closed, never reused: closing it frees whatever it held on
 * the server (its GET_LOCK locks among them), and the next sqlpool_get()
 * dials a fresh one, so the pool recovers by itself once the server is
 * back.
 *
 * Sessions are made lazily, up to `size`, outside the pool's mutex. Every
 * new one has connect, read and write timeouts, no automatic reconnect (a
 * reconnect would silently drop what the session held), creates the
 * database when it is missing and selects it, then runs the setup
 * statements. An idle session that the server closed (its socket became
 * readable: a restart, a KILL, wait_timeout) or that was idle longer than
 * idle_max_ms is closed at sqlpool_get() time, before anything is sent on
 * it.
 *
 * Connector/C (libmariadb 3) needs mysql_library_init() once before
 * threads use it, which sqlpool_create() does; its mysql_thread_init() and
 * mysql_thread_end() do nothing, so threads need not call them.
 *
 * The pool itself is thread safe. */
#ifndef INVENTORYD_SQLPOOL_H
#define INVENTORYD_SQLPOOL_H

#include <stddef.h>

struct sqlpool;
typedef struct st_mysql MYSQL;

struct sqlpool_options {
    const char *host; /* a name or address; one starting with '/' is a unix socket */
    int port;
    const char *user;
    const char *password; /* NULL or "": none; never appears in an errstr */
    const char *database; /* created when missing, then selected; NULL or "": none */
    int connect_timeout_s; /* each at least 1 */
    int read_timeout_s;
    int write_timeout_s;
    int size; /* most sessions alive at once */
    int idle_max_ms; /* an idle session older than this is not handed out; 0: no limit */
    const char *const
        *setup; /* statements run on every new session, NULL-terminated; may be NULL */
};

/* What sqlpool_get returns. Busy is not broken. */
#define SQLPOOL_OK 0
#define SQLPOOL_BUSY 1 /* all `size` sessions stayed in use for wait_ms */
#define SQLPOOL_ERR -1 /* no session could be made: errstr says why */

/* Creates a pool; no session is made yet. The strings of o are copied.
 * NULL with errstr set ("out of memory", "mysql.database: ..."). */
struct sqlpool *sqlpool_create(const struct sqlpool_options *o, char *errstr, size_t errlen);

/* Closes every idle session and frees the pool. Sessions still handed out
 * must have been put back or dropped first. Accepts NULL. */
void sqlpool_free(struct sqlpool *p);

/* Hands out a connected session in *out, waiting at most wait_ms for one
 * to be free when all `size` are in use. SQLPOOL_OK, or SQLPOOL_BUSY or
 * SQLPOOL_ERR with *out NULL and errstr set ("mysql 127.0.0.1:3306: Can't
 * connect to server on '127.0.0.1' (111)"). */
int sqlpool_get(struct sqlpool *p, int wait_ms, MYSQL **out, char *errstr, size_t errlen);

/* Gives a session back for reuse. Accepts NULL. */
void sqlpool_put(struct sqlpool *p, MYSQL *m);

/* Closes a session (what it held on the server is freed with it) and frees
 * its place. Accepts NULL. */
void sqlpool_drop(struct sqlpool *p, MYSQL *m);

/* The server's address as messages name it: "host:port", or the socket's
 * path. */
const char *sqlpool_addr(const struct sqlpool *p);

/* Whether a Connector/C error number means the session is gone or its
 * state unknown (the server went away, the reply was lost, it was
 * killed): then the session must be dropped. */
int sqlpool_gone(unsigned int err);

#endif
