/* statscli.c -- inventory-stats: one figure of some numbers, for the shell
 * scripts (scripts/demo.sh, scripts/chart.sh, loadtest/bench.sh,
 * scripts/campaign.sh, the shell tests), so that no median, percentile,
 * mean, sum, ratio or interval is computed in bash or awk. The figures themselves are stats.c's.
 *
 * DESIGN
 * The numbers come from the arguments after the figure or, when there are
 * none, from the words of standard input. Each keeps the word it was written
 * as: a figure that picks one of them (min, max, a percentile, the median of
 * an odd count) prints that word, so "3.50" stays "3.50", as the scripts'
 * awk printed it. A computed figure (sum, mean, ratio, the median of an even
 * count) prints as few digits as it needs, up to 15 significant ones (or
 * --significant's; a whole value as an integer), unless --decimals fixes
 * the digits after the point. With --by-key each line is "KEY NUMBER" and the
 * figure is given per key, keys in the order they first appear; a histogram
 * (hist-pN) adds up the counts of a bound given twice in the same way.
 * Single-threaded; everything read is kept until exit, which frees it. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

#define PROG "inventory-stats"
#define SPACE " \t\r\n"

enum figure {
    FIG_COUNT,
    FIG_SUM,
    FIG_MIN,
    FIG_MAX,
    FIG_MEAN,
    FIG_MEDIAN,
    FIG_PCT,
    FIG_RATIO,
    FIG_WILSON_LOW,
    FIG_WILSON_HIGH,
    FIG_HIST
};

struct options {
    enum figure fig;
    double pct; /* FIG_PCT, FIG_HIST: 0 < pct <= 100 */
    int by_key;
    int decimals; /* digits after the point; -1: as few as needed */
    int significant; /* at most this many significant digits (1-15) */
    const char *empty; /* printed for an undefined figure, or NULL */
    int skip; /* words that are not numbers are skipped */
    int positive; /* numbers not above 0 are skipped (and non-numbers) */
};

struct number {
    double v;
    const char *word; /* as written */
};

/* The numbers of one key (the only group without --by-key). */
struct group {
    const char *key;
    struct number *nums;
    size_t n, cap;
};

static struct group *groups;
static size_t ngroups, capgroups;

static void usage(FILE *f) {
    fprintf(f, "usage: " PROG " [options] FIGURE [NUMBER]...\n"
               "Prints one figure of the NUMBERs, or of the words of standard input when\n"
               "no NUMBER follows FIGURE. FIGURE is one of:\n"
               "  count, sum        how many numbers there are, their sum (0 for none)\n"
               "  min, max, mean    the smallest, the largest, the mean\n"
               "  median            the middle number; for an even count, the mean of the\n"
               "                    middle two\n"
               "  pN                the nearest-rank Nth percentile, 0 < N <= 100 (p50, p99.9)\n"
               "  ratio             the first number over the second: exactly two numbers,\n"
               "                    the second not 0\n"
               "  wilson-low, wilson-high\n"
               "                    the bounds of the Wilson 95%% interval of a rate: K N,\n"
               "                    K events in N trials (0 <= K <= N, N > 0), as fractions\n"
               "  hist-pN           of a cumulative histogram given as BOUND COUNT pairs\n"
               "                    (Prometheus's le and count: bounds ascending, +Inf last;\n"
               "                    the counts of a bound given twice add up): \"<=BOUND\" for\n"
               "                    the bucket that holds the nearest-rank Nth percentile,\n"
               "                    \">BOUND\" past the last finite bound\n"
               "A figure that is one of the numbers is printed as it was written; any\n"
               "other with as few digits as it needs (up to 15 significant), and a whole\n"
               "one as an integer.\n"
               "  -k, --by-key      each line of standard input is KEY NUMBER: prints\n"
               "                    KEY FIGURE per key, in the order keys first appear\n"
               "  -d, --decimals N  prints N digits after the point (0-17)\n"
               "  -g, --significant N\n"
               "                    at most N significant digits in a computed figure\n"
               "                    (1-15; awk's print keeps 6)\n"
               "  -e, --empty TEXT  prints TEXT for a figure that is undefined: of no number\n"
               "                    (but count and sum), a ratio over 0, a histogram with\n"
               "                    no sample\n"
               "  -s, --skip        skips the words that are not numbers, rather than failing\n"
               "  -p, --positive    skips every word that is not a number above 0\n"
               "  -h, --help        this text\n"
               "Numbers are decimal: 12, -3.5, 1e6 (not inf, nan or hex).\n"
               "Exit status: 0 when every figure (or TEXT) was printed, 1 when a figure\n"
               "was undefined and no --empty given, 2 on bad usage or input.\n");
}

/* Whether w is a decimal number (sign, digits, point, exponent; no inf, nan
 * or hex); its value into *v if so. */
static int parse_number(const char *w, double *v) {
    const char *s = w;
    int digits = 0;
    if (*s == '+' || *s == '-') s++;
    for (; *s >= '0' && *s <= '9'; s++) digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++) digits++;
    if (digits == 0) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    if (*s != '\0') return 0;
    errno = 0;
    *v = strtod(w, NULL);
    return errno != ERANGE && isfinite(*v);
}

/* A histogram's bound: a number, or +Inf (as Prometheus writes it). */
static int parse_bound(const char *w, double *v) {
    if (strcmp(w, "+Inf") == 0) {
        *v = INFINITY;
        return 1;
    }
    return parse_number(w, v);
}

/* The N of pN into *pct: 0 < N <= 100. */
static int parse_pct(const char *s, double *pct) {
    return parse_number(s, pct) && *pct > 0.0 && *pct <= 100.0;
}

/* FIGURE into o->fig (and o->pct): 0, or -1 when it names none. */
static int parse_figure(const char *s, struct options *o) {
    static const struct {
        const char *name;
        enum figure fig;
    } names[] = {{"count", FIG_COUNT},
                 {"sum", FIG_SUM},
                 {"min", FIG_MIN},
                 {"max", FIG_MAX},
                 {"mean", FIG_MEAN},
                 {"median", FIG_MEDIAN},
                 {"ratio", FIG_RATIO},
                 {"wilson-low", FIG_WILSON_LOW},
                 {"wilson-high", FIG_WILSON_HIGH}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0) {
            o->fig = names[i].fig;
            return 0;
        }
    if (strncmp(s, "hist-p", 6) == 0 && parse_pct(s + 6, &o->pct)) {
        o->fig = FIG_HIST;
        return 0;
    }
    if (s[0] == 'p' && parse_pct(s + 1, &o->pct)) {
        o->fig = FIG_PCT;
        return 0;
    }
    return -1;
}

/* realloc that exits 2 when out of memory (a tool, not library code). */
static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(2);
    }
    return p;
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

/* The group of key (NULL: the only one), made on first use. */
static struct group *group_of(const char *key) {
    for (size_t i = 0; i < ngroups; i++)
        if (key == NULL || strcmp(groups[i].key, key) == 0) return &groups[i];
    if (ngroups == capgroups) {
        capgroups = capgroups ? 2 * capgroups : 16;
        groups = xrealloc(groups, capgroups * sizeof(*groups));
    }
    struct group *g = &groups[ngroups++];
    *g = (struct group){key ? xstrdup(key) : "", NULL, 0, 0};
    return g;
}

/* Adds word to g as the options say: 0, or -1 after saying why. */
static int take(const struct options *o, struct group *g, const char *word) {
    double v;
    if (!parse_number(word, &v)) {
        if (o->skip || o->positive) return 0;
        fprintf(stderr, PROG ": '%s' is not a number\n", word);
        return -1;
    }
    if (o->positive && !(v > 0.0)) return 0;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->nums = xrealloc(g->nums, g->cap * sizeof(*g->nums));
    }
    g->nums[g->n++] = (struct number){v, xstrdup(word)};
    return 0;
}

/* Reads standard input into the groups: every word into the only one, or
 * with --by-key each KEY NUMBER line into KEY's (blank lines ignored).
 * 0, or -1 after saying why. */
static int read_input(const struct options *o) {
    char *line = NULL, *save, *w, *key;
    size_t cap = 0;
    long lineno = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, stdin) != -1) {
        lineno++;
        if (!o->by_key) {
            for (w = strtok_r(line, SPACE, &save); w && rc == 0; w = strtok_r(NULL, SPACE, &save))
                rc = take(o, group_of(NULL), w);
            continue;
        }
        if ((key = strtok_r(line, SPACE, &save)) == NULL) continue;
        w = strtok_r(NULL, SPACE, &save);
        if (w == NULL || strtok_r(NULL, SPACE, &save) != NULL) {
            if (o->skip || o->positive) continue;
            fprintf(stderr, PROG ": line %ld is not KEY NUMBER\n", lineno);
            rc = -1;
            break;
        }
        rc = take(o, group_of(key), w);
    }
    if (rc == 0 && ferror(stdin)) {
        fprintf(stderr, PROG ": reading standard input: %s\n", strerror(errno));
        rc = -1;
    }
    free(line);
    return rc;
}

/* The words of standard input (hist-pN), kept until exit. */
static char **words;
static size_t nwords, capwords;

/* Reads every word of standard input into words. */
static void read_words(void) {
    char *line = NULL, *save, *t;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) != -1)
        for (t = strtok_r(line, SPACE, &save); t; t = strtok_r(NULL, SPACE, &save)) {
            if (nwords == capwords) {
                capwords = capwords ? 2 * capwords : 64;
                words = xrealloc(words, capwords * sizeof(*words));
            }
            words[nwords++] = xstrdup(t);
        }
    free(line);
}

static int cmp_number(const void *a, const void *b) {
    double x = ((const struct number *)a)->v, y = ((const struct number *)b)->v;
    return (x > y) - (x < y);
}

/* v as text in buf: with o->decimals digits after the point; or else a
 * whole v as an integer, any other with at most o->significant significant
 * digits, as few as it needs. Never "-0". */
static const char *format_value(const struct options *o, double v, char *buf, size_t size) {
    if (v == 0.0) v = 0.0;
    if (o->decimals >= 0)
        snprintf(buf, size, "%.*f", o->decimals, v);
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, size, "%.0f", v);
    else
        snprintf(buf, size, "%.*g", o->significant, v);
    return buf;
}

/* g's figure as text (in buf, or the word of one of g's numbers), or NULL
 * when it is undefined. Sorts g's numbers. */
static const char *figure_text(const struct options *o, struct group *g, char *buf, size_t size) {
    size_t n = g->n;
    double *v, f;
    if (o->fig == FIG_COUNT) {
        snprintf(buf, size, "%zu", n);
        return buf;
    }
    if (o->fig == FIG_RATIO) {
        if (n != 2 || g->nums[1].v == 0.0) return NULL;
        return format_value(o, g->nums[0].v / g->nums[1].v, buf, size);
    }
    if (o->fig == FIG_WILSON_LOW || o->fig == FIG_WILSON_HIGH) {
        double low, high;
        if (n != 2 || stats_wilson(g->nums[0].v, g->nums[1].v, 1.96, &low, &high) != 0) return NULL;
        return format_value(o, o->fig == FIG_WILSON_LOW ? low : high, buf, size);
    }
    if (n == 0 && o->fig != FIG_SUM) return NULL;
    if (o->fig != FIG_SUM && o->fig != FIG_MEAN) qsort(g->nums, n, sizeof(*g->nums), cmp_number);
    v = xrealloc(NULL, n * sizeof(*v));
    for (size_t i = 0; i < n; i++) v[i] = g->nums[i].v;
    switch (o->fig) {
    case FIG_SUM:
        f = stats_sum_double(v, n);
        break;
    case FIG_MEAN:
        f = stats_mean_double(v, n);
        break;
    case FIG_MIN:
        f = v[0];
        break;
    case FIG_MAX:
        f = v[n - 1];
        break;
    case FIG_MEDIAN:
        f = stats_median_double(v, n);
        break;
    default:
        f = stats_percentile_double(v, n, o->pct);
        break;
    }
    free(v);
    /* An order figure that is one of the numbers: that number as written. */
    if (o->decimals < 0 && o->fig != FIG_SUM && o->fig != FIG_MEAN)
        for (size_t i = 0; i < n; i++)
            if (g->nums[i].v == f) return g->nums[i].word;
    return format_value(o, f, buf, size);
}

/* The hist-pN figure of w[0..n), BOUND COUNT pairs: 1 with its text in buf,
 * 0 when it is undefined, -1 on bad input (said on stderr). */
static int hist_text(const struct options *o, char *const *w, size_t n, char *buf, size_t size) {
    size_t nb = 0;
    long k = -1;
    int rc = 1;
    if (n % 2 != 0) {
        fprintf(stderr, PROG ": hist-pN needs BOUND COUNT pairs, got %zu words\n", n);
        return -1;
    }
    const char **bound = xrealloc(NULL, (n / 2) * sizeof(*bound));
    double *le = xrealloc(NULL, (n / 2) * sizeof(*le));
    double *cum = xrealloc(NULL, (n / 2) * sizeof(*cum));
    for (size_t i = 0; i < n && rc == 1; i += 2) {
        double b, c;
        size_t j;
        if (!parse_bound(w[i], &b) || !parse_number(w[i + 1], &c)) {
            fprintf(stderr, PROG ": '%s %s' is not a BOUND COUNT pair\n", w[i], w[i + 1]);
            rc = -1;
            break;
        }
        for (j = 0; j < nb && le[j] != b; j++)
            ;
        if (j == nb) {
            if (nb > 0 && !(b > le[nb - 1])) {
                fprintf(stderr, PROG ": bound %s after %s: the bounds must ascend\n", w[i],
                        bound[nb - 1]);
                rc = -1;
                break;
            }
            bound[nb] = w[i];
            le[nb] = b;
            cum[nb++] = 0.0;
        }
        cum[j] += c;
    }
    if (rc == 1 && (k = stats_bucket_percentile(cum, nb, o->pct)) < 0) rc = 0;
    if (rc == 1 && k > 0 && isinf(le[k]))
        snprintf(buf, size, ">%s", bound[k - 1]); /* past the last finite bound */
    else if (rc == 1)
        snprintf(buf, size, "<=%s", bound[k]);
    free(bound);
    free(le);
    free(cum);
    return rc;
}

/* Prints text, or o->empty for an undefined figure, and a newline. Returns
 * 0, or 1 when the figure was undefined and there is no o->empty. */
static int print_text(const struct options *o, const char *key, const char *text) {
    if (text == NULL && o->empty == NULL) return 1;
    if (key != NULL) printf("%s ", key);
    printf("%s\n", text != NULL ? text : o->empty);
    return 0;
}

/* Reads the options and the figure into o. -1 to go on, or the exit
 * status. */
static int parse_options(int argc, char **argv, struct options *o) {
    static const struct option longopts[] = {
        {"by-key", no_argument, NULL, 'k'},
        {"decimals", required_argument, NULL, 'd'},
        {"significant", required_argument, NULL, 'g'},
        {"empty", required_argument, NULL, 'e'},
        {"skip", no_argument, NULL, 's'},
        {"positive", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    long v;
    /* "+": options end at FIGURE, so that a "-5" after it is a number. */
    while ((c = getopt_long(argc, argv, "+kd:g:e:sph", longopts, NULL)) != -1) {
        switch (c) {
        case 'k':
            o->by_key = 1;
            break;
        case 'e':
            o->empty = optarg;
            break;
        case 's':
            o->skip = 1;
            break;
        case 'p':
            o->positive = 1;
            break;
        case 'd':
        case 'g':
            if (stats_parse_long(optarg, c == 'd' ? 0 : 1, c == 'd' ? 17 : 15, &v) != 0) {
                stats_bad_value(PROG, longopts, c, optarg);
                return 2;
            }
            *(c == 'd' ? &o->decimals : &o->significant) = (int)v;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    return -1;
}

/* The figure named at optind, and what may follow it. -1 to go on, or the
 * exit status. */
static int parse_figure_arg(int argc, char **argv, struct options *o) {
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    if (parse_figure(argv[optind], o) != 0) {
        fprintf(stderr, PROG ": unknown figure '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    optind++;
    if (o->by_key && optind < argc) {
        fprintf(stderr, PROG ": with --by-key the numbers come from standard input only\n");
        return 2;
    }
    return -1;
}

/* hist-pN: a percentile of a histogram given as words. */
static int run_hist(int argc, char **argv, const struct options *o, char *buf, size_t len) {
    if (o->by_key || o->skip || o->positive || o->decimals >= 0 || o->significant != 15) {
        fprintf(stderr, PROG ": hist-pN takes none of --by-key, --decimals, --significant, "
                             "--skip, --positive\n");
        return 2;
    }
    if (optind == argc) {
        read_words();
    } else {
        words = argv + optind;
        nwords = (size_t)(argc - optind);
    }
    int rc = hist_text(o, words, nwords, buf, len);
    return rc < 0 ? 2 : print_text(o, NULL, rc == 1 ? buf : NULL);
}

int main(int argc, char **argv) {
    struct options o = {.decimals = -1, .significant = 15};
    char buf[512];
    int status = parse_options(argc, argv, &o);
    if (status < 0) status = parse_figure_arg(argc, argv, &o);
    if (status >= 0) return status;
    if (o.fig == FIG_HIST) return run_hist(argc, argv, &o, buf, sizeof(buf));

    status = 0;
    if (!o.by_key) group_of(NULL); /* the figure of no number at all is still asked for */
    if (optind < argc) {
        for (int i = optind; i < argc; i++)
            if (take(&o, group_of(NULL), argv[i]) != 0) return 2;
    } else if (read_input(&o) != 0) {
        return 2;
    }
    for (size_t i = 0; i < ngroups; i++)
        status |= print_text(&o, o.by_key ? groups[i].key : NULL,
                             figure_text(&o, &groups[i], buf, sizeof(buf)));
    return status;
}
