/* alloc.h -- the one way a constructor says that memory ran out: the
 * "out of memory" errstr every create function gives, set in one place. */
#ifndef INVENTORYD_ALLOC_H
#define INVENTORYD_ALLOC_H

#include <stdio.h>
#include <stdlib.h>

/* calloc(1, size). On failure NULL is returned, with errstr set to
 * "out of memory". */
static inline void *alloc_zeroed(size_t size, char *errstr, size_t errlen) {
    void *p = calloc(1, size);
    if (!p) snprintf(errstr, errlen, "out of memory");
    return p;
}

#endif
