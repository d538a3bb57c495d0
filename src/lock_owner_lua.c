/* lock_owner_lua.c -- the release becomes one compare-and-delete script
 * (src/lua/unlock-owner.lua), so it can never delete another owner's lock.
 * But the value is a plain string: a nested acquire by the same owner finds
 * the key taken and waits for itself until lock.wait-ms runs out. */
#include "lock_int.h"

static int owner_lua_release(struct lock *l) {
    lock_release_pause(l);
    return lock_del_owned(l);
}

const struct lock_type lock_type_owner_lua =
    LOCK_STRING_TYPE("owner-lua", LOCK_T_LEASED, lock_string_acquire, owner_lua_release, 0, NULL);
