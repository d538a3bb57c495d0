/* strategy.h -- the sale strategies: the ladder's steps, by name.
 *
 * DESIGN
 * A strategy is one row of a table: its name (the URL segment), the step it
 * reproduces, the flaw it can show, the lock type it takes (lock.h), and the
 * way its sale writes (sale.h: plain, fenced, batched, atomic script).
 * Nothing else in the service tests which strategy it runs: a new strategy
 * is a lock type file and a row here. The table is constant, built at
 * compile time: any thread may read it. */
#ifndef INVENTORYD_STRATEGY_H
#define INVENTORYD_STRATEGY_H

#include <stddef.h>

struct lock_type;
struct sale_way;

struct strategy {
    const char *name; /* URL segment, e.g. "owner-lua" */
    const char *description; /* the step it reproduces, one line */
    const char *flaw; /* the flaw it can show, one line */
    const struct lock_type *lock; /* the lock its sales take */
    const struct lock_type *rw_lock; /* the lock taken instead when readers take the
                                          read lock (lock.read-lock=true); NULL: lock */
    const struct sale_way *way; /* how the sale writes */
};

/* Every strategy, in ladder order; the last row's name is NULL. */
extern const struct strategy strategies[];

/* The strategy called name, or NULL. */
const struct strategy *strategy_find(const char *name);

/* Number of strategies, and the position of s among them (-1 if none). */
int strategy_count(void);
int strategy_index(const struct strategy *s);

/* Every name, comma-separated, into buf. */
void strategy_names(char *buf, size_t len);

/* The names of the strategies whose lock lives on a session of its store
 * (lock_type_ends_session: the end_session fault applies to them),
 * comma-separated, into buf. */
void strategy_session_names(char *buf, size_t len);

#endif
