/* fuzz_check.h -- the fuzz targets' invariant check: on failure, a message
 * naming FUZZ_NAME, the file, the line and the condition, then abort(), so
 * libFuzzer keeps the input as a reproducer. Define FUZZ_NAME first. */
#ifndef INVENTORYD_FUZZ_CHECK_H
#define INVENTORYD_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, FUZZ_NAME ": %s:%d: check failed: %s\n  ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
