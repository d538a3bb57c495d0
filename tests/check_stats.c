/* check_stats.c -- the figures the tools and scripts report: stats.c's
 * functions (Core), and inventory-stats, the program the shell scripts run
 * for every median, percentile, sum and ratio (Program, Limits). No server:
 * the program is run with fork and exec, its standard input and output
 * through pipes. */
#include "check_main.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats.h"

/* What one run of inventory-stats gave. */
struct run {
    int status; /* exit status, or -1 when it did not exit */
    char out[4096]; /* standard output */
};

static struct run r;

/* Runs inventory-stats with the arguments (NULL-terminated) and input on its
 * standard input (NULL: empty) into r; returns r.status. The input goes by an
 * unlinked temporary file, so that any size is read without a writer. */
static int stats(const char *input, ...) {
    const char *argv[32] = {INVENTORY_STATS_BIN};
    int out[2], n = 1, wstatus;
    size_t got = 0;
    ssize_t k;
    va_list ap;
    va_start(ap, input);
    while (n < 31 && (argv[n] = va_arg(ap, const char *)) != NULL) n++;
    va_end(ap);
    argv[n] = NULL;

    FILE *in = tmpfile();
    ck_assert_ptr_nonnull(in);
    if (input != NULL) ck_assert_int_eq(fwrite(input, 1, strlen(input), in), strlen(input));
    ck_assert_int_eq(fflush(in), 0);
    rewind(in);
    ck_assert_int_eq(pipe(out), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fileno(in), 0);
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    while ((k = read(out[0], r.out + got, sizeof(r.out) - 1 - got)) > 0) got += (size_t)k;
    r.out[got] = '\0';
    close(out[0]);
    fclose(in);
    ck_assert_int_eq(waitpid(pid, &wstatus, 0), pid);
    r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
    return r.status;
}

/* Asserts that the last run exited 0 and printed exactly want. */
static void assert_printed(const char *want) {
    ck_assert_int_eq(r.status, 0);
    ck_assert_str_eq(r.out, want);
}

/* ---- Core: stats.c --------------------------------------------------------- */

START_TEST(test_the_median_of_an_odd_count_is_the_middle_value) {
    const double v[] = {1, 2, 7};
    ck_assert_double_eq(stats_median_double(v, 3), 2);
    ck_assert_double_eq(stats_median_double(v, 1), 1);
}
END_TEST

START_TEST(test_the_median_of_an_even_count_is_the_mean_of_the_middle_two) {
    const double v[] = {1, 2, 5, 100};
    ck_assert_double_eq(stats_median_double(v, 4), 3.5);
    ck_assert_double_eq(stats_median_double(v, 2), 1.5);
}
END_TEST

START_TEST(test_the_median_and_the_mean_of_no_sample_are_0) {
    ck_assert_double_eq(stats_median_double(NULL, 0), 0);
    ck_assert_double_eq(stats_mean_double(NULL, 0), 0);
}
END_TEST

START_TEST(test_the_sum_adds_every_value_and_is_0_for_none) {
    const double v[] = {1.5, -2, 40};
    ck_assert_double_eq(stats_sum_double(v, 3), 39.5);
    ck_assert_double_eq(stats_sum_double(v, 0), 0);
    ck_assert_double_eq(stats_mean_double(v, 2), -0.25);
}
END_TEST

START_TEST(test_a_nearest_rank_percentile_is_one_of_the_samples) {
    double v[100];
    for (int i = 0; i < 100; i++) v[i] = i + 1;
    ck_assert_double_eq(stats_percentile_double(v, 100, 99), 99);
    ck_assert_double_eq(stats_percentile_double(v, 100, 100), 100);
    /* Of 10 samples, the 99th percentile is the largest and the median the 5th. */
    ck_assert_double_eq(stats_percentile_double(v, 10, 99), 10);
    ck_assert_double_eq(stats_percentile_double(v, 10, 50), 5);
}
END_TEST

START_TEST(test_the_percentile_bucket_is_the_first_whose_count_reaches_p_percent_of_the_total) {
    /* Buckets le=1, 5, 10, +Inf: 50, 90, 99, 100 samples at or below. */
    const double cum[] = {50, 90, 99, 100};
    ck_assert_int_eq(stats_bucket_percentile(cum, 4, 99), 2);
    ck_assert_int_eq(stats_bucket_percentile(cum, 4, 50), 0);
    ck_assert_int_eq(stats_bucket_percentile(cum, 4, 99.5), 3);
}
END_TEST

START_TEST(test_a_histogram_with_no_sample_has_no_percentile_bucket) {
    const double none[] = {0, 0, 0}, less[] = {0, -1, -1};
    ck_assert_int_eq(stats_bucket_percentile(none, 3, 99), -1);
    ck_assert_int_eq(stats_bucket_percentile(less, 3, 99), -1);
    ck_assert_int_eq(stats_bucket_percentile(NULL, 0, 99), -1);
}
END_TEST

/* ---- Program: inventory-stats ---------------------------------------------- */

START_TEST(test_the_program_prints_the_median_of_an_even_count_as_the_mean_of_the_middle_two) {
    stats(NULL, "median", "4", "1", "3", "2", NULL);
    assert_printed("2.5\n");
    stats(NULL, "median", "9", "1", "5", NULL);
    assert_printed("5\n");
}
END_TEST

START_TEST(test_a_figure_that_is_one_of_the_numbers_is_printed_as_it_was_written) {
    stats(NULL, "median", "3.50", "1.25", "9.0", NULL);
    assert_printed("3.50\n");
    stats(NULL, "max", "0.100", "0.0500", NULL);
    assert_printed("0.100\n");
    stats(NULL, "p99", "7.000", "3", NULL);
    assert_printed("7.000\n");
    /* Equal middle values: their mean is the value itself, as written. */
    stats(NULL, "median", "2.50", "2.50", NULL);
    assert_printed("2.50\n");
}
END_TEST

START_TEST(test_a_computed_figure_is_printed_with_as_few_digits_as_it_needs) {
    stats(NULL, "sum", "0.1", "0.2", NULL);
    assert_printed("0.3\n");
    stats(NULL, "sum", "10", "20", "12", NULL);
    assert_printed("42\n");
    stats(NULL, "mean", "1", "2", NULL);
    assert_printed("1.5\n");
    stats(NULL, "sum", "-5", "5", NULL);
    assert_printed("0\n");
}
END_TEST

START_TEST(test_decimals_fix_the_digits_after_the_point) {
    stats(NULL, "-d", "2", "ratio", "10", "3", NULL);
    assert_printed("3.33\n");
    stats(NULL, "--decimals", "1", "ratio", "19456", "1024", NULL);
    assert_printed("19.0\n");
    stats(NULL, "-d", "0", "median", "2.5", NULL);
    assert_printed("2\n"); /* printf rounds half to even */
}
END_TEST

START_TEST(test_significant_rounds_a_computed_figure_as_awk_print_does) {
    stats(NULL, "-g", "6", "median", "12345.6", "12345.9", NULL);
    assert_printed("12345.8\n");
    stats(NULL, "--significant", "6", "mean", "249.627", "186.486", NULL);
    assert_printed("218.056\n"); /* 218.0565 is 218.05649... in binary */
    /* A whole figure stays an integer; a picked one stays as written. */
    stats(NULL, "-g", "6", "sum", "1234567", "1", NULL);
    assert_printed("1234568\n");
    stats(NULL, "-g", "6", "median", "12345.678", NULL);
    assert_printed("12345.678\n");
}
END_TEST

START_TEST(test_the_numbers_come_from_standard_input_when_no_argument_follows_the_figure) {
    stats("3 1\n\n2\t10\n", "max", NULL);
    assert_printed("10\n");
    stats("3 1\n2\n", "count", NULL);
    assert_printed("3\n");
}
END_TEST

START_TEST(test_a_figure_of_no_number_is_undefined_unless_empty_names_a_text) {
    stats("", "median", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_str_eq(r.out, "");
    stats("", "-e", "?", "median", NULL);
    assert_printed("?\n");
    stats("", "-e", "-", "min", NULL);
    assert_printed("-\n");
}
END_TEST

START_TEST(test_the_sum_and_the_count_of_no_number_are_0) {
    stats("", "sum", NULL);
    assert_printed("0\n");
    stats("\n", "count", NULL);
    assert_printed("0\n");
}
END_TEST

START_TEST(test_a_word_that_is_not_a_number_fails_unless_skipped) {
    ck_assert_int_eq(stats(NULL, "sum", "1", "?", NULL), 2);
    stats(NULL, "-s", "sum", "1", "?", "", "2", NULL);
    assert_printed("3\n");
    stats(NULL, "-s", "-e", "?", "median", "", "", NULL);
    assert_printed("?\n");
}
END_TEST

START_TEST(test_positive_skips_every_word_that_is_not_a_number_above_0) {
    stats(NULL, "-p", "-d", "2", "-e", "?", "ratio", "0", "5", NULL);
    assert_printed("?\n");
    stats(NULL, "-p", "-d", "2", "-e", "?", "ratio", "?", "5", NULL);
    assert_printed("?\n");
    stats(NULL, "-p", "-d", "2", "-e", "?", "ratio", "5", "4", NULL);
    assert_printed("1.25\n");
}
END_TEST

START_TEST(test_the_wilson_interval_of_a_rate_has_its_known_bounds) {
    double lo, hi;
    /* 0 of 30: 0 to 11.35%; 30 of 30: 88.65% to 1; 11 of 30 (36.7%): 21.9% to 54.5% */
    ck_assert_int_eq(stats_wilson(0, 30, 1.96, &lo, &hi), 0);
    ck_assert_double_eq(lo, 0.0);
    ck_assert_double_eq_tol(hi, 0.1135, 0.0001);
    ck_assert_int_eq(stats_wilson(30, 30, 1.96, &lo, &hi), 0);
    ck_assert_double_eq_tol(lo, 0.8865, 0.0001);
    ck_assert_double_eq(hi, 1.0);
    ck_assert_int_eq(stats_wilson(11, 30, 1.96, &lo, &hi), 0);
    ck_assert_double_eq_tol(lo, 0.2187, 0.0001);
    ck_assert_double_eq_tol(hi, 0.5449, 0.0001);
    ck_assert_int_eq(stats_wilson(1, 0, 1.96, &lo, &hi), -1);
    ck_assert_int_eq(stats_wilson(4, 3, 1.96, &lo, &hi), -1);
    ck_assert_int_eq(stats_wilson(-1, 3, 1.96, &lo, &hi), -1);
}
END_TEST

START_TEST(test_jains_index_is_1_for_equal_shares_1_over_n_for_one_and_undefined_for_none) {
    const long equal[] = {5, 5, 5, 5}, one[] = {0, 0, 12, 0}, halves[] = {2, 2, 0, 0},
               none[] = {0, 0};
    ck_assert_double_eq_tol(stats_jain(equal, 4), 1.0, 1e-12);
    ck_assert_double_eq_tol(stats_jain(one, 4), 0.25, 1e-12);
    ck_assert_double_eq_tol(stats_jain(halves, 4), 0.5, 1e-12);
    /* 1, 2, 3: 36 / (3 * 14) */
    const long ramp[] = {1, 2, 3};
    ck_assert_double_eq_tol(stats_jain(ramp, 3), 36.0 / 42.0, 1e-12);
    ck_assert_double_eq(stats_jain(none, 2), -1.0);
    ck_assert_double_eq(stats_jain(equal, 0), -1.0);
}
END_TEST

START_TEST(test_wilson_low_and_high_print_the_interval_of_k_in_n) {
    stats(NULL, "-d", "4", "wilson-low", "11", "30", NULL);
    assert_printed("0.2187\n");
    stats(NULL, "-d", "4", "wilson-high", "11", "30", NULL);
    assert_printed("0.5449\n");
    stats(NULL, "-d", "4", "wilson-high", "0", "30", NULL);
    assert_printed("0.1135\n");
    ck_assert_int_eq(stats(NULL, "wilson-low", "3", "0", NULL), 1);
    ck_assert_int_eq(stats(NULL, "wilson-low", "3", NULL), 1);
}
END_TEST

START_TEST(test_a_ratio_over_0_or_of_other_than_two_numbers_is_undefined) {
    ck_assert_int_eq(stats(NULL, "ratio", "1", "0", NULL), 1);
    ck_assert_int_eq(stats(NULL, "ratio", "1", "2", "3", NULL), 1);
    stats(NULL, "-e", "0.0", "-d", "1", "ratio", "17", "0", NULL);
    assert_printed("0.0\n");
    stats(NULL, "ratio", "0", "4", NULL);
    assert_printed("0\n");
}
END_TEST

START_TEST(test_by_key_gives_the_figure_per_key_in_the_order_keys_first_appear) {
    stats("sold 3\nrequests 10\nsold 4\n\nrequests 10\n", "-k", "sum", NULL);
    assert_printed("sold 7\nrequests 20\n");
    stats("a|rss1 100\nall|rss1 100\na|rss1 300\nall|rss1 300\nall|rss1 200\n", "-k", "max", NULL);
    assert_printed("a|rss1 300\nall|rss1 300\n");
    /* A snapshot taken from another: the "before" negated, then the "after". */
    stats("get -5\nset -2\nget 12\nset 2\nevalsha 7\n", "--by-key", "sum", NULL);
    assert_printed("get 7\nset 0\nevalsha 7\n");
}
END_TEST

START_TEST(test_a_negative_number_after_the_figure_is_a_number_not_an_option) {
    stats(NULL, "min", "-5", "3", NULL);
    assert_printed("-5\n");
    stats(NULL, "-s", "sum", "-2", "-d", NULL);
    assert_printed("-2\n");
}
END_TEST

START_TEST(test_hist_names_the_bound_of_the_bucket_or_the_last_finite_one_past_it) {
    stats("1 50\n5 90\n10 99\n+Inf 100\n", "hist-p99", NULL);
    assert_printed("<=10\n");
    stats("1 50\n5 90\n10 98\n+Inf 100\n", "hist-p99", NULL);
    assert_printed(">10\n");
    stats(NULL, "hist-p50", "0.5", "3", "2.5", "4", "+Inf", "4", NULL);
    assert_printed("<=0.5\n");
}
END_TEST

START_TEST(test_hist_adds_up_the_counts_of_a_bound_given_twice) {
    /* Two instances' histograms: 2+0 of 3+6 by le=1, all 9 by le=5. */
    stats("1 2\n5 3\n+Inf 3\n1 0\n5 6\n+Inf 6\n", "hist-p99", NULL);
    assert_printed("<=5\n");
    /* A round's waits: the snapshot before, negated, then the one after. */
    stats("1 -40\n5 -50\n+Inf -50\n1 40\n5 50\n+Inf 50\n", "-e", "-", "hist-p99", NULL);
    assert_printed("-\n");
    stats("1 -40\n5 -50\n+Inf -50\n1 140\n5 150\n+Inf 150\n", "-e", "-", "hist-p99", NULL);
    assert_printed("<=1\n");
}
END_TEST

/* ---- Limits ------------------------------------------------------------------ */

START_TEST(test_inf_nan_and_hex_are_not_numbers) {
    const char *words[] = {"inf", "nan", "0x10", "1e", "-", ".", "1.2.3", "1e999", "12abc"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        ck_assert_msg(stats(NULL, "sum", words[i], NULL) == 2, "'%s' taken as a number", words[i]);
    stats(NULL, "sum", "+1", ".5", "2.", "1e3", "-1E-1", NULL);
    assert_printed("1003.4\n");
}
END_TEST

START_TEST(test_an_unknown_figure_or_option_is_bad_usage) {
    const char *figures[] = {"avg", "p0", "p101", "p", "hist-p", "hist-p0", "Median"};
    for (size_t i = 0; i < sizeof(figures) / sizeof(figures[0]); i++)
        ck_assert_msg(stats(NULL, figures[i], "1", NULL) == 2, "'%s' taken as a figure",
                      figures[i]);
    ck_assert_int_eq(stats(NULL, NULL), 2);
    ck_assert_int_eq(stats(NULL, "-d", "18", "sum", "1", NULL), 2);
    ck_assert_int_eq(stats(NULL, "-g", "0", "sum", "1", NULL), 2);
    ck_assert_int_eq(stats(NULL, "-g", "16", "sum", "1", NULL), 2);
    ck_assert_int_eq(stats(NULL, "-x", "sum", "1", NULL), 2);
    ck_assert_int_eq(stats(NULL, "-k", "sum", "1", NULL), 2);
    ck_assert_int_eq(stats(NULL, "-s", "hist-p99", "1", "1", NULL), 2);
    stats(NULL, "--help", NULL);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: inventory-stats"));
}
END_TEST

START_TEST(test_a_line_that_is_not_key_number_fails_by_key_unless_skipped) {
    ck_assert_int_eq(stats("a 1\nb\n", "-k", "sum", NULL), 2);
    ck_assert_int_eq(stats("a 1 2\n", "-k", "sum", NULL), 2);
    ck_assert_int_eq(stats("a x\n", "-k", "sum", NULL), 2);
    stats("a 1\nb\na 2 3\na x\na 4\n", "-k", "-s", "sum", NULL);
    assert_printed("a 5\n");
}
END_TEST

START_TEST(test_hist_refuses_odd_words_bounds_that_do_not_ascend_and_bad_counts) {
    ck_assert_int_eq(stats("1 2\n+Inf\n", "hist-p99", NULL), 2);
    ck_assert_int_eq(stats("5 1\n1 2\n+Inf 2\n", "hist-p99", NULL), 2);
    ck_assert_int_eq(stats("1 x\n+Inf 2\n", "hist-p99", NULL), 2);
    ck_assert_int_eq(stats("+Inf 2\n1 2\n", "hist-p99", NULL), 2);
    /* No bucket at all is no sample: undefined. */
    ck_assert_int_eq(stats("", "hist-p99", NULL), 1);
}
END_TEST

START_TEST(test_a_hundred_thousand_numbers_on_standard_input_give_their_median) {
    size_t size = 100000 * 8 + 1, off = 0;
    char *in = malloc(size);
    ck_assert_ptr_nonnull(in);
    for (int i = 100000; i >= 1; i--) off += (size_t)snprintf(in + off, size - off, "%d\n", i);
    stats(in, "median", NULL);
    free(in);
    assert_printed("50000.5\n");
}
END_TEST

Suite *stats_suite(void) {
    Suite *s = suite_create("stats");
    TCase *core = tcase_create("Core");
    TCase *program = tcase_create("Program");
    TCase *limits = tcase_create("Limits");

    tcase_add_test(core, test_the_median_of_an_odd_count_is_the_middle_value);
    tcase_add_test(core, test_the_median_of_an_even_count_is_the_mean_of_the_middle_two);
    tcase_add_test(core, test_the_median_and_the_mean_of_no_sample_are_0);
    tcase_add_test(core, test_the_sum_adds_every_value_and_is_0_for_none);
    tcase_add_test(core, test_a_nearest_rank_percentile_is_one_of_the_samples);
    tcase_add_test(
        core, test_the_percentile_bucket_is_the_first_whose_count_reaches_p_percent_of_the_total);
    tcase_add_test(core, test_a_histogram_with_no_sample_has_no_percentile_bucket);
    tcase_add_test(core, test_the_wilson_interval_of_a_rate_has_its_known_bounds);
    tcase_add_test(core,
                   test_jains_index_is_1_for_equal_shares_1_over_n_for_one_and_undefined_for_none);
    suite_add_tcase(s, core);

    tcase_add_test(
        program, test_the_program_prints_the_median_of_an_even_count_as_the_mean_of_the_middle_two);
    tcase_add_test(program, test_a_figure_that_is_one_of_the_numbers_is_printed_as_it_was_written);
    tcase_add_test(program, test_a_computed_figure_is_printed_with_as_few_digits_as_it_needs);
    tcase_add_test(program, test_decimals_fix_the_digits_after_the_point);
    tcase_add_test(program, test_significant_rounds_a_computed_figure_as_awk_print_does);
    tcase_add_test(program,
                   test_the_numbers_come_from_standard_input_when_no_argument_follows_the_figure);
    tcase_add_test(program, test_a_figure_of_no_number_is_undefined_unless_empty_names_a_text);
    tcase_add_test(program, test_the_sum_and_the_count_of_no_number_are_0);
    tcase_add_test(program, test_a_word_that_is_not_a_number_fails_unless_skipped);
    tcase_add_test(program, test_positive_skips_every_word_that_is_not_a_number_above_0);
    tcase_add_test(program, test_a_ratio_over_0_or_of_other_than_two_numbers_is_undefined);
    tcase_add_test(program, test_wilson_low_and_high_print_the_interval_of_k_in_n);
    tcase_add_test(program, test_by_key_gives_the_figure_per_key_in_the_order_keys_first_appear);
    tcase_add_test(program, test_a_negative_number_after_the_figure_is_a_number_not_an_option);
    tcase_add_test(program, test_hist_names_the_bound_of_the_bucket_or_the_last_finite_one_past_it);
    tcase_add_test(program, test_hist_adds_up_the_counts_of_a_bound_given_twice);
    suite_add_tcase(s, program);

    tcase_set_timeout(limits, 30);
    tcase_add_test(limits, test_inf_nan_and_hex_are_not_numbers);
    tcase_add_test(limits, test_an_unknown_figure_or_option_is_bad_usage);
    tcase_add_test(limits, test_a_line_that_is_not_key_number_fails_by_key_unless_skipped);
    tcase_add_test(limits, test_hist_refuses_odd_words_bounds_that_do_not_ascend_and_bad_counts);
    tcase_add_test(limits, test_a_hundred_thousand_numbers_on_standard_input_give_their_median);
    suite_add_tcase(s, limits);
    return s;
}
