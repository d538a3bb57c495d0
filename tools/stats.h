/* stats.h -- helpers shared by the tools (inventory-load, lockbench,
 * inventory-stats): nearest-rank latency summaries over samples, the other
 * figures the scripts report (median, mean, sum, a histogram's percentile
 * bucket), and the option parsing the command lines do the same way. No
 * state, no threads; C11 (+ getopt_long). */
#ifndef INVENTORYD_TOOLS_STATS_H
#define INVENTORYD_TOOLS_STATS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

/* p50, p99 and the largest of a set of samples (all 0 for no samples). */
struct stats_double {
    double p50, p99, max;
};
struct stats_i64 {
    int64_t p50, p99, max;
};

/* Nearest-rank percentile p (0-100) of sorted[0..n); 0 when n is 0. */
double stats_percentile_double(const double *sorted, size_t n, double p);
int64_t stats_percentile_i64(const int64_t *sorted, size_t n, double p);

/* Sorts v[0..n) ascending in place, then returns its p50, p99 and max. */
struct stats_double stats_summary_double(double *v, size_t n);
struct stats_i64 stats_summary_i64(int64_t *v, size_t n);

/* The median of sorted[0..n) (ascending): the middle value, or the mean of
 * the middle two when n is even; 0 when n is 0. */
double stats_median_double(const double *sorted, size_t n);

/* The sum of v[0..n), added in order; 0 when n is 0. */
double stats_sum_double(const double *v, size_t n);

/* The mean of v[0..n); 0 when n is 0. */
double stats_mean_double(const double *v, size_t n);

/* The bucket of a cumulative histogram that holds percentile p (0-100), as
 * Prometheus keeps one: cum[i] counts the samples at or below bound i, the
 * bounds ascend, and cum[n-1] (the last bound, +Inf) is the total. Returns
 * the index of the first bucket whose count reaches p% of the total (the
 * bucket of the nearest-rank sample), or -1 when n is 0, the total is not
 * above 0, or no bucket reaches it. */
long stats_bucket_percentile(const double *cum, size_t n, double p);

/* The Wilson score interval of k successes in n trials at z (1.96 for
 * 95%) into *low and *high, each within [0, 1]: the interval the campaigns
 * give a violation rate, which stays meaningful at 0 of 30 (0 to 11%) and
 * 30 of 30. 0, or -1 when n is not above 0 or k is not in [0, n]. */
int stats_wilson(double k, double n, double z, double *low, double *high);

/* Jain's fairness index of v[0..n): (sum v)^2 / (n * sum v^2), 1 when every
 * v is equal, 1/n when one has everything; what lock libraries' users ask
 * of a lock's clients (does any starve?). -1 when n is 0 or every v is 0,
 * where it is undefined. */
double stats_jain(const long *v, size_t n);

/* s as a whole decimal number in [min, max] into *out: 0, or -1 (and *out
 * untouched) when it is not one. */
int stats_parse_long(const char *s, long min, long max, long *out);

/* "--format text|kv": *kv = 0 for "text", 1 for "kv"; 0, or -1 otherwise. */
int stats_parse_format(const char *s, int *kv);

/* On stderr, "PROG: bad value 'ARG' for --NAME", NAME being the long option
 * of longopts (ended by a NULL name) whose val is val, or "?". */
void stats_bad_value(const char *prog, const struct option *longopts, int val, const char *arg);

#endif
