/* script.c -- embedded Lua scripts, run by EVALSHA with a NOSCRIPT fallback
 * (see script.h). The SHA1s come from the build (cmake/embed_lua.cmake). */
#include <stdio.h>
#include <string.h>
#include "script.h"

#define ARGS_MAX 320

const struct script_source *script_find(const char *name) {
    for (int i = 0; script_sources[i].name; i++)
        if (strcmp(script_sources[i].name, name) == 0) return &script_sources[i];
    return NULL;
}

int script_missing(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Fills av/avlen with CMD sha_or_body numkeys args. Returns the count, or
 * -1 when there are too many args. */
static int build(const char *cmd, const char *script, int numkeys, int argc, const char **argv,
                 const size_t *argvlen, char *nk, size_t nklen, const char **av, size_t *avlen) {
    if (argc + 3 > ARGS_MAX) return -1;
    snprintf(nk, nklen, "%d", numkeys);
    av[0] = cmd;
    avlen[0] = strlen(cmd);
    av[1] = script;
    avlen[1] = strlen(script);
    av[2] = nk;
    avlen[2] = strlen(nk);
    for (int j = 0; j < argc; j++) {
        av[3 + j] = argv[j];
        avlen[3 + j] = argvlen ? argvlen[j] : strlen(argv[j]);
    }
    return argc + 3;
}

/* EVALSHA of a named script, as an argv. */
struct evalsha {
    const char *av[ARGS_MAX];
    size_t avlen[ARGS_MAX];
    char nk[16];
};

/* Fills e; the argc of EVALSHA, or -1 (unknown script, too many arguments). */
static int evalsha_build(struct evalsha *e, const char *name, int numkeys, int argc,
                         const char **argv, const size_t *argvlen) {
    const struct script_source *s = script_find(name);
    return s ? build("EVALSHA", s->sha, numkeys, argc, argv, argvlen, e->nk, sizeof(e->nk), e->av,
                     e->avlen)
             : -1;
}

int script_append(redisContext *c, const char *name, int numkeys, int argc, const char **argv,
                  const size_t *argvlen) {
    struct evalsha e;
    int n = evalsha_build(&e, name, numkeys, argc, argv, argvlen);
    return n < 0 ? REDIS_ERR : redisAppendCommandArgv(c, n, e.av, e.avlen);
}

int script_append_eval(redisContext *c, const char *name, int numkeys, int argc, const char **argv,
                       const size_t *argvlen) {
    const struct script_source *s = script_find(name);
    struct evalsha e;
    int n =
        s ? build("EVAL", s->body, numkeys, argc, argv, argvlen, e.nk, sizeof(e.nk), e.av, e.avlen)
          : -1;
    return n < 0 ? REDIS_ERR : redisAppendCommandArgv(c, n, e.av, e.avlen);
}

long long script_format(char **cmd, const char *name, int numkeys, int argc, const char **argv,
                        const size_t *argvlen) {
    struct evalsha e;
    int n = evalsha_build(&e, name, numkeys, argc, argv, argvlen);
    return n < 0 ? -1 : redisFormatCommandArgv(cmd, n, e.av, e.avlen);
}

redisReply *script_run(redisContext *c, const char *name, int numkeys, int argc, const char **argv,
                       const size_t *argvlen, char *errstr, size_t errlen) {
    const struct script_source *s = script_find(name);
    const char *av[ARGS_MAX];
    size_t avlen[ARGS_MAX];
    char nk[16];
    if (!s ||
        build("EVALSHA", s->sha, numkeys, argc, argv, argvlen, nk, sizeof(nk), av, avlen) < 0) {
        snprintf(errstr, errlen,
                 s ? "script %s: too many arguments" : "no embedded script named '%s'", name);
        return NULL;
    }
    redisReply *r = redisCommandArgv(c, argc + 3, av, avlen);
    if (script_missing(r)) {
        /* It did not run: load it, then run it once more. */
        freeReplyObject(r);
        r = redisCommand(c, "SCRIPT LOAD %s", s->body);
        int loaded = r && r->type == REDIS_REPLY_STRING;
        if (!loaded) {
            if (r)
                snprintf(errstr, errlen, "SCRIPT LOAD %s: %.100s", name,
                         r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            else
                snprintf(errstr, errlen, "%s", c->errstr);
            return r;
        }
        freeReplyObject(r);
        r = redisCommandArgv(c, argc + 3, av, avlen);
    }
    if (!r) snprintf(errstr, errlen, "%s", c->errstr);
    return r;
}

int script_load_all(redisContext *c, char *errstr, size_t errlen) {
    int n = 0;
    for (; script_sources[n].name; n++)
        if (redisAppendCommand(c, "SCRIPT LOAD %s", script_sources[n].body) != REDIS_OK) break;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            snprintf(errstr, errlen, "SCRIPT LOAD: %s", c->errstr);
            return -1;
        }
        if (rc == 0 &&
            (r->type != REDIS_REPLY_STRING || strcmp(r->str, script_sources[i].sha) != 0)) {
            snprintf(errstr, errlen, "SCRIPT LOAD %s: %.80s", script_sources[i].name,
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected SHA1");
            rc = -1;
        }
        freeReplyObject(r);
    }
    return rc;
}

int script_args(const struct script_sig *sig, const char **argv, const struct script_kv *kv,
                int n) {
    if (n != sig->nargs) return -1;
    for (int i = 0; i < sig->nargs; i++) argv[i] = NULL;
    for (int j = 0; j < n; j++) {
        int at = -1;
        for (int i = 0; i < sig->nargs && at < 0; i++)
            if (strcmp(sig->names[i], kv[j].name) == 0) at = i;
        if (at < 0 || argv[at] || !kv[j].value) return -1;
        argv[at] = kv[j].value;
    }
    return 0;
}
