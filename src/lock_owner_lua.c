/* lock_owner_lua.c -- the release becomes one compare-and-delete script
 * (src/lua/unlock-owner.lua), so it can never delete another owner's lock.
 * But the value is a plain string: a nested acquire by the same owner finds
 * the key taken and waits for itself until lock.wait-ms runs out. */
#include "lock.h"
#include "mclock.h"

static int owner_lua_once(struct lock *l) {
    return lock_set_nx(l, l->env->ttl_ms);
}

static int owner_lua_acquire(struct lock *l) {
    return lock_poll(l, owner_lua_once);
}

/* Compare-and-delete; shared with the fenced strategy. */
int lock_owner_lua_release(struct lock *l) {
    mclock_sleep_ms(l->release_delay_ms);
    const char *argv[] = {l->key, l->owner};
    redisReply *r = lock_script(l, "unlock-owner", 1, 2, argv);
    if (!r) return LOCK_ERR;
    int rc = r->type != REDIS_REPLY_INTEGER ? lock_fail(l, r, "unlock-owner")
             : r->integer == 1 ? LOCK_OK : LOCK_LOST;
    freeReplyObject(r);
    return rc;
}

const struct lock_type lock_type_owner_lua = {
    .name = "owner-lua",
    .description = "SET NX PX; release by compare-and-delete in one Lua script",
    .flaw = "not reentrant: a nested acquire by the same owner blocks on itself",
    .flags = LOCK_F_REDIS,
    .acquire = owner_lua_acquire,
    .release = lock_owner_lua_release,
    .renew = NULL,
};
