/* script.h -- Lua scripts embedded at build time from src/lua/NAME.lua, run by
 * EVALSHA with a fallback on NOSCRIPT.
 *
 * Each script's SHA1 is computed at build time from its bytes, so EVALSHA
 * needs no round trip to learn it. rpool loads every script on every new
 * connection (script_load_all), so a pipelined EVALSHA finds it even right
 * after a Redis restart. A NOSCRIPT reply (someone ran SCRIPT FLUSH) means
 * the script did not run, so loading it (SCRIPT LOAD) and running it again
 * is safe: that is the only retry done here. Everything here is thread safe: the table is
 * constant. */
#ifndef INVENTORYD_SCRIPT_H
#define INVENTORYD_SCRIPT_H

#include <stddef.h>
#include <hiredis/hiredis.h>

struct script_source {
    const char *name; /* file name without .lua, e.g. "atomic-sale" */
    const char *body;
    const char *sha; /* 40 hex digits */
};

/* The generated table, terminated by {NULL, NULL, NULL}. */
extern const struct script_source script_sources[];

/* The named script, or NULL. */
const struct script_source *script_find(const char *name);

/* Runs the named script with numkeys keys followed by its args, as argv
 * (argvlen NULL: C strings). Returns the reply (free it with
 * freeReplyObject), which may be a REDIS_REPLY_ERROR from the script
 * itself; or NULL when the connection failed (c->err is set and c must be
 * discarded) or the script is unknown (errstr says which). */
redisReply *script_run(redisContext *c, const char *name, int numkeys, int argc, const char **argv,
                       const size_t *argvlen, char *errstr, size_t errlen);

/* Appends EVALSHA of the named script to c's output buffer without sending
 * it, for a caller that pipelines. REDIS_OK, or REDIS_ERR (unknown script
 * or out of memory). A NOSCRIPT reply to it is the caller's to handle. */
int script_append(redisContext *c, const char *name, int numkeys, int argc, const char **argv,
                  const size_t *argvlen);

/* The same with EVAL of the script's text: for a pipelining caller to send
 * again a script that was refused NOSCRIPT (it did not run). */
int script_append_eval(redisContext *c, const char *name, int numkeys, int argc, const char **argv,
                       const size_t *argvlen);

/* Formats EVALSHA of the named script as a command ready to send
 * (redisAppendFormattedCommand), into *cmd, to be freed with
 * redisFreeCommand. Its length, or -1 (unknown script, too many arguments
 * or out of memory). */
long long script_format(char **cmd, const char *name, int numkeys, int argc, const char **argv,
                        const size_t *argvlen);

/* True when r is the NOSCRIPT error: the script did not run. */
int script_missing(const redisReply *r);

/* A script's fixed arguments by name: its KEYS, then the head of its ARGV
 * (what follows, a variable tail, the caller appends), in the order the
 * script's header lists them on its "-- KEYS:" and "-- ARGV:" lines, which
 * a unit test compares with this table. Callers fill argv by name
 * (script_args), never by position. */
#define SCRIPT_ARGS_MAX 16
struct script_sig {
    const char *script; /* the file name without .lua */
    int nkeys;
    int nargs; /* the keys and the fixed head of ARGV */
    const char *names[SCRIPT_ARGS_MAX];
};

/* One named argument for script_args. */
struct script_kv {
    const char *name;
    const char *value;
};

/* Fills argv[0 .. sig->nargs) from the n named values: each of sig's names
 * exactly once. 0, or -1 when a name is unknown, given twice or missing
 * (a caller's mistake: the script must not run with arguments in the wrong
 * places). */
int script_args(const struct script_sig *sig, const char **argv, const struct script_kv *kv, int n);

/* Loads every embedded script on c with SCRIPT LOAD, pipelined (one round
 * trip). Returns 0, or -1 with errstr set (c->err set if the connection
 * failed). */
int script_load_all(redisContext *c, char *errstr, size_t errlen);

#endif
