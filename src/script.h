/* script.h -- Lua scripts embedded at build time from src/lua/NAME.lua, run by
 * EVALSHA with a fallback on NOSCRIPT.
 *
 * The SHA1 of each script is learnt from SCRIPT LOAD the first time the
 * script runs in this process and cached; the cache is guarded by a mutex and
 * may be used from any thread. A NOSCRIPT reply (the server restarted or ran
 * SCRIPT FLUSH) means the script did not run, so loading it and running it
 * again is safe: that is the only retry done here. */
#ifndef INVENTORYD_SCRIPT_H
#define INVENTORYD_SCRIPT_H

#include <stddef.h>
#include <hiredis/hiredis.h>

struct script_source {
    const char *name;   /* file name without .lua, e.g. "atomic-sale" */
    const char *body;
};

/* The generated table, terminated by {NULL, NULL}. */
extern const struct script_source script_sources[];

/* The body of the named script, or NULL. */
const char *script_body(const char *name);

/* Runs the named script with numkeys keys followed by its args, as argv.
 * Returns the reply (to be freed with freeReplyObject), which may be a
 * REDIS_REPLY_ERROR from the script itself; or NULL when the connection
 * failed (c->err is set and c must be discarded) or the script is unknown
 * (errstr says which). */
redisReply *script_run(redisContext *c, const char *name, int numkeys,
                       int argc, const char **argv, const size_t *argvlen,
                       char *errstr, size_t errlen);

/* The SHA1 of the named script into sha (41 bytes), loading it with SCRIPT
 * LOAD on c when this process has not learnt it yet. For callers that
 * pipeline EVALSHA themselves; a NOSCRIPT reply from another server is then
 * theirs to handle (script_run does it). Returns 0, or -1 with errstr set
 * (c->err set when the connection failed). */
int script_sha(redisContext *c, const char *name, char sha[41], char *errstr, size_t errlen);

#endif
