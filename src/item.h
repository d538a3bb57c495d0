/* item.h -- what may name an item (a stock key). Pure: no I/O, no state;
 * config.c checks inventory.key with it, the HTTP layer every ?item= and
 * reset body, and the inventory service the keys it builds.
 *
 * An item is 1 to ITEM_MAX bytes of [A-Za-z0-9_.-]. No ':': every other key
 * of the service is an item or lock.name followed by ':' and a suffix
 * (item:sold, item:initial, item:holders, item:violations, item:families,
 * item:history, item:alive:<instance>, lock:fence, lock:item, ...), so an
 * item can never be another key. Nor may it be lock.name itself, the one
 * key without a suffix. */
#ifndef INVENTORYD_ITEM_H
#define INVENTORYD_ITEM_H

#include <stddef.h>

#define ITEM_MAX 64

/* True when item has the form of an item name. */
int item_valid(const char *item);

/* Whether item may name a stock where the lock is lock_name: of the form,
 * and not the lock's own key. 0, or -1 with a sentence in why. */
int item_check(const char *item, const char *lock_name, char *why, size_t whylen);

#endif
