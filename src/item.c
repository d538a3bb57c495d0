/* item.c -- what may name an item (see item.h). */
#include <stdio.h>
#include <string.h>
#include "item.h"

int item_valid(const char *item) {
    size_t n = strlen(item);
    return n > 0 && n <= ITEM_MAX &&
           strspn(item, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

int item_check(const char *item, const char *lock_name, char *why, size_t whylen) {
    if (!item_valid(item)) {
        snprintf(why, whylen,
                 "item must be 1 to %d characters of A-Z, a-z, 0-9, '_', '.' and '-' "
                 "(':' is kept for the service's own keys: item:sold and the rest)",
                 ITEM_MAX);
        return -1;
    }
    if (strcmp(item, lock_name) == 0) {
        snprintf(why, whylen,
                 "item '%s' is lock.name, the lock's own key: a stock there would "
                 "overwrite the lock",
                 item);
        return -1;
    }
    return 0;
}
