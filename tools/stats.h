/* stats.h -- helpers shared by the tools (inventory-load, lockbench):
 * nearest-rank latency summaries over samples, and the option parsing both
 * command lines do the same way. No state, no threads; C11 (+ getopt_long). */
#ifndef INVENTORYD_TOOLS_STATS_H
#define INVENTORYD_TOOLS_STATS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

/* p50, p99 and the largest of a set of samples (all 0 for no samples). */
struct stats_double { double p50, p99, max; };
struct stats_i64 { int64_t p50, p99, max; };

/* Nearest-rank percentile p (0-100) of sorted[0..n); 0 when n is 0. */
double stats_percentile_double(const double *sorted, size_t n, double p);
int64_t stats_percentile_i64(const int64_t *sorted, size_t n, double p);

/* Sorts v[0..n) ascending in place, then returns its p50, p99 and max. */
struct stats_double stats_summary_double(double *v, size_t n);
struct stats_i64 stats_summary_i64(int64_t *v, size_t n);

/* s as a whole decimal number in [min, max] into *out: 0, or -1 (and *out
 * untouched) when it is not one. */
int stats_parse_long(const char *s, long min, long max, long *out);

/* "--format text|kv": *kv = 0 for "text", 1 for "kv"; 0, or -1 otherwise. */
int stats_parse_format(const char *s, int *kv);

/* On stderr, "PROG: bad value 'ARG' for --NAME", NAME being the long option
 * of longopts (ended by a NULL name) whose val is val, or "?". */
void stats_bad_value(const char *prog, const struct option *longopts, int val,
                     const char *arg);

#endif
