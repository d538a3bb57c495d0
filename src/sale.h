/* sale.h -- the ways a sale writes, for the strategy table: plain (GET,
 * then the stock and the ledger entry in one all-or-nothing script),
 * fenced (the same, refused for a stale fencing token), handoff (no GET:
 * the stock comes with the lock's grant, and the write hands the lock and
 * the new stock to the next waiter), batched (one hold
 * sells for every sale queued in the process), atomic (no lock: one script
 * checks and decrements). Their work is in sale.c and batch.c. */
#ifndef INVENTORYD_SALE_H
#define INVENTORYD_SALE_H

struct sale_way;

extern const struct sale_way sale_plain;
extern const struct sale_way sale_fenced;
extern const struct sale_way sale_store_fenced; /* fenced by another store's tokens */
extern const struct sale_way sale_handoff;
extern const struct sale_way sale_batched;
extern const struct sale_way sale_atomic;

/* The fixed arguments of the write scripts sale.c runs, by name (script.h),
 * NULL-terminated: for the test that holds them to the scripts' headers. */
struct script_sig;
extern const struct script_sig *const sale_script_sigs[];

#endif
