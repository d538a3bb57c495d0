/* text.h -- a whole number as decimal text without printf, for what every
 * sale writes: its order id and the integers of its answer. */
#ifndef INVENTORYD_TEXT_H
#define INVENTORYD_TEXT_H

/* Writes u in decimal, as %llu does, into the bytes before end (at most
 * 20 of them), and returns the first digit's address. Nothing is written
 * at end: the caller ends the text there if it needs a string. */
static inline char *text_ull(char *end, unsigned long long u) {
    do {
        *--end = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    return end;
}

#endif
