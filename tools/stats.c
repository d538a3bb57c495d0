/* stats.c -- see stats.h. */
#include "stats.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The 1-based nearest rank of percentile p among n > 0 samples. */
static size_t nearest_rank(size_t n, double p) {
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return rank;
}

double stats_percentile_double(const double *sorted, size_t n, double p) {
    return n == 0 ? 0.0 : sorted[nearest_rank(n, p) - 1];
}

int64_t stats_percentile_i64(const int64_t *sorted, size_t n, double p) {
    return n == 0 ? 0 : sorted[nearest_rank(n, p) - 1];
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

struct stats_double stats_summary_double(double *v, size_t n) {
    qsort(v, n, sizeof(*v), cmp_double);
    struct stats_double s = {
        stats_percentile_double(v, n, 50.0),
        stats_percentile_double(v, n, 99.0),
        n > 0 ? v[n - 1] : 0.0,
    };
    return s;
}

struct stats_i64 stats_summary_i64(int64_t *v, size_t n) {
    qsort(v, n, sizeof(*v), cmp_i64);
    struct stats_i64 s = {
        stats_percentile_i64(v, n, 50.0),
        stats_percentile_i64(v, n, 99.0),
        n > 0 ? v[n - 1] : 0,
    };
    return s;
}

double stats_median_double(const double *sorted, size_t n) {
    if (n == 0) return 0.0;
    if (n % 2 == 1) return sorted[n / 2];
    return (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}

double stats_sum_double(const double *v, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    return sum;
}

double stats_mean_double(const double *v, size_t n) {
    return n == 0 ? 0.0 : stats_sum_double(v, n) / (double)n;
}

long stats_bucket_percentile(const double *cum, size_t n, double p) {
    if (n == 0 || !(cum[n - 1] > 0.0)) return -1;
    /* Counts are whole, so reaching p% of the total is reaching the
     * nearest rank, ceil(p% of the total). */
    double need = p / 100.0 * cum[n - 1];
    for (size_t i = 0; i < n; i++)
        if (cum[i] >= need) return (long)i;
    return -1;
}

int stats_parse_long(const char *s, long min, long max, long *out) {
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno != 0 || e == s || *e != '\0' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int stats_parse_format(const char *s, int *kv) {
    if (strcmp(s, "kv") == 0)
        *kv = 1;
    else if (strcmp(s, "text") == 0)
        *kv = 0;
    else
        return -1;
    return 0;
}

void stats_bad_value(const char *prog, const struct option *longopts, int val, const char *arg) {
    size_t i;
    for (i = 0; longopts[i].name != NULL && longopts[i].val != val; i++)
        ;
    fprintf(stderr, "%s: bad value '%s' for --%s\n", prog, arg,
            longopts[i].name ? longopts[i].name : "?");
}

double stats_jain(const long *v, size_t n) {
    double sum = 0.0, squares = 0.0;
    for (size_t i = 0; i < n; i++) {
        sum += (double)v[i];
        squares += (double)v[i] * (double)v[i];
    }
    if (n == 0 || squares == 0.0) return -1.0;
    return sum * sum / ((double)n * squares);
}

int stats_wilson(double k, double n, double z, double *low, double *high) {
    if (!(n > 0.0) || k < 0.0 || k > n) return -1;
    double p = k / n, z2 = z * z;
    double centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    double half = z * sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / (1.0 + z2 / n);
    *low = centre - half < 0.0 ? 0.0 : centre - half;
    *high = centre + half > 1.0 ? 1.0 : centre + half;
    /* at the ends the bound is exact: k = 0 cannot be above 0 */
    if (k == 0.0) *low = 0.0;
    if (k == n) *high = 1.0;
    return 0;
}
