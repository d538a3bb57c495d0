/* script.c -- embedded Lua scripts, run by EVALSHA with a NOSCRIPT fallback.
 *
 * The SHA1 of each script comes from SCRIPT LOAD, once per process, and is
 * cached in shas[] under shas_lock. SCRIPT LOAD is idempotent, so two threads
 * racing to load the same script is harmless. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "script.h"

#define SCRIPT_MAX 64

static pthread_mutex_t shas_lock = PTHREAD_MUTEX_INITIALIZER;
static char shas[SCRIPT_MAX][41];

static int script_index(const char *name) {
    for (int i = 0; script_sources[i].name && i < SCRIPT_MAX; i++)
        if (strcmp(script_sources[i].name, name) == 0) return i;
    return -1;
}

const char *script_body(const char *name) {
    int i = script_index(name);
    return i < 0 ? NULL : script_sources[i].body;
}

/* SCRIPT LOAD script i into the cache. Returns the reply on a Redis error
 * (the caller hands it on), NULL after an I/O error, or a status reply on
 * success that the caller frees. */
static redisReply *script_load(redisContext *c, int i) {
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", script_sources[i].body);
    if (r && r->type == REDIS_REPLY_STRING && r->len == 40) {
        pthread_mutex_lock(&shas_lock);
        memcpy(shas[i], r->str, 40);
        shas[i][40] = '\0';
        pthread_mutex_unlock(&shas_lock);
    }
    return r;
}

static redisReply *script_evalsha(redisContext *c, const char *sha, int numkeys,
                                  int argc, const char **argv, const size_t *argvlen) {
    const char *av[3 + argc];
    size_t avlen[3 + argc];
    char nk[16];
    int nklen = snprintf(nk, sizeof(nk), "%d", numkeys);
    av[0] = "EVALSHA"; avlen[0] = 7;
    av[1] = sha;       avlen[1] = 40;
    av[2] = nk;        avlen[2] = (size_t)nklen;
    for (int j = 0; j < argc; j++) {
        av[3 + j] = argv[j];
        avlen[3 + j] = argvlen ? argvlen[j] : strlen(argv[j]);
    }
    return redisCommandArgv(c, 3 + argc, av, avlen);
}

redisReply *script_run(redisContext *c, const char *name, int numkeys,
                       int argc, const char **argv, const size_t *argvlen,
                       char *errstr, size_t errlen) {
    int i = script_index(name);
    if (i < 0) {
        snprintf(errstr, errlen, "no embedded script named '%s'", name);
        return NULL;
    }
    char sha[41];
    pthread_mutex_lock(&shas_lock);
    memcpy(sha, shas[i], sizeof(sha));
    pthread_mutex_unlock(&shas_lock);

    for (int tries = 0; tries < 2; tries++) {
        if (sha[0] == '\0') {
            redisReply *r = script_load(c, i);
            if (!r || r->type != REDIS_REPLY_STRING) {
                if (!r) snprintf(errstr, errlen, "%s", c->errstr);
                return r;
            }
            memcpy(sha, r->str, 40);
            sha[40] = '\0';
            freeReplyObject(r);
        }
        redisReply *r = script_evalsha(c, sha, numkeys, argc, argv, argvlen);
        if (!r) {
            snprintf(errstr, errlen, "%s", c->errstr);
            return NULL;
        }
        /* NOSCRIPT: the script did not run, so loading it and running it
         * again cannot apply it twice. */
        if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            freeReplyObject(r);
            sha[0] = '\0';
            continue;
        }
        return r;
    }
    snprintf(errstr, errlen, "script %s: NOSCRIPT after SCRIPT LOAD", name);
    return NULL;
}

int script_sha(redisContext *c, const char *name, char sha[41], char *errstr, size_t errlen) {
    int i = script_index(name);
    if (i < 0) {
        snprintf(errstr, errlen, "no embedded script named '%s'", name);
        return -1;
    }
    pthread_mutex_lock(&shas_lock);
    memcpy(sha, shas[i], 41);
    pthread_mutex_unlock(&shas_lock);
    if (sha[0]) return 0;
    redisReply *r = script_load(c, i);
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok) {
        memcpy(sha, r->str, 40);
        sha[40] = '\0';
    } else {
        snprintf(errstr, errlen, "SCRIPT LOAD %s: %s", name,
                 r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
    }
    freeReplyObject(r);
    return ok ? 0 : -1;
}
