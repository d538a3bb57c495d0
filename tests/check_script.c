/* check_script.c -- the write scripts' arguments by name (script.h): the
 * names sale.c fills (sale_script_sigs) are the ones, in the order, that
 * each script's header lists on its "-- KEYS:" and "-- ARGV:" lines, and
 * script_args places every value by its name and refuses a call that names
 * one wrong, twice or not at all. No server. */
#include "check_main.h"
#include <stdio.h>
#include <string.h>
#include "sale.h"
#include "script.h"

/* The words of the line of path that starts with lead, up to a comma or
 * the line's end, into words (at most max); how many, or -1 when no line
 * starts so. */
static int header_words(const char *path, const char *lead, char words[][48], int max) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[512];
    int n = -1;
    while (n < 0 && fgets(line, sizeof(line), f)) {
        if (strncmp(line, lead, strlen(lead)) != 0) continue;
        n = 0;
        char *rest = line + strlen(lead);
        rest[strcspn(rest, ",\n")] = '\0';
        for (char *w = strtok(rest, " "); w && n < max; w = strtok(NULL, " "))
            snprintf(words[n++], sizeof(words[0]), "%s", w);
    }
    fclose(f);
    return n;
}

/* ---- Core ------------------------------------------------------------------ */

START_TEST(test_each_write_scripts_header_names_the_arguments_sale_c_fills_in_their_order) {
    int scripts = 0;
    for (const struct script_sig *const *p = sale_script_sigs; *p; p++, scripts++) {
        const struct script_sig *sig = *p;
        ck_assert_msg(script_find(sig->script) != NULL, "%s is not embedded", sig->script);
        char path[256], words[SCRIPT_ARGS_MAX][48];
        snprintf(path, sizeof(path), "%s/src/lua/%s.lua", SOURCE_DIR, sig->script);
        int nk = header_words(path, "-- KEYS:", words, SCRIPT_ARGS_MAX);
        ck_assert_msg(nk == sig->nkeys, "%s: its header lists %d KEYS, sale.c fills %d",
                      sig->script, nk, sig->nkeys);
        for (int i = 0; i < nk; i++)
            ck_assert_msg(strcmp(words[i], sig->names[i]) == 0,
                          "%s: KEYS[%d] is %s, sale.c says %s", sig->script, i + 1, words[i],
                          sig->names[i]);
        int na = header_words(path, "-- ARGV:", words, SCRIPT_ARGS_MAX);
        ck_assert_msg(na == sig->nargs - sig->nkeys,
                      "%s: its header lists %d ARGV, sale.c fills %d", sig->script, na,
                      sig->nargs - sig->nkeys);
        for (int i = 0; i < na; i++)
            ck_assert_msg(strcmp(words[i], sig->names[sig->nkeys + i]) == 0,
                          "%s: ARGV[%d] is %s, sale.c says %s", sig->script, i + 1, words[i],
                          sig->names[sig->nkeys + i]);
    }
    ck_assert_int_eq(scripts, 5);
}
END_TEST

static const struct script_sig sig = {"x", 1, 3, {"key", "a", "b"}};

START_TEST(test_script_args_places_each_value_by_name_whatever_the_order_given) {
    const char *argv[SCRIPT_ARGS_MAX];
    const struct script_kv kv[] = {{"b", "2"}, {"key", "k"}, {"a", "1"}};
    ck_assert_int_eq(script_args(&sig, argv, kv, 3), 0);
    ck_assert_str_eq(argv[0], "k");
    ck_assert_str_eq(argv[1], "1");
    ck_assert_str_eq(argv[2], "2");
}
END_TEST

START_TEST(test_script_args_refuses_a_name_unknown_given_twice_missing_or_without_a_value) {
    const char *argv[SCRIPT_ARGS_MAX];
    const struct script_kv unknown[] = {{"key", "k"}, {"a", "1"}, {"c", "3"}};
    const struct script_kv twice[] = {{"key", "k"}, {"a", "1"}, {"a", "2"}};
    const struct script_kv missing[] = {{"key", "k"}, {"a", "1"}};
    const struct script_kv empty[] = {{"key", "k"}, {"a", NULL}, {"b", "2"}};
    ck_assert_int_eq(script_args(&sig, argv, unknown, 3), -1);
    ck_assert_int_eq(script_args(&sig, argv, twice, 3), -1);
    ck_assert_int_eq(script_args(&sig, argv, missing, 2), -1);
    ck_assert_int_eq(script_args(&sig, argv, empty, 3), -1);
}
END_TEST

Suite *script_suite(void) {
    Suite *s = suite_create("script");
    TCase *core = tcase_create("Core");
    tcase_add_test(core,
                   test_each_write_scripts_header_names_the_arguments_sale_c_fills_in_their_order);
    tcase_add_test(core, test_script_args_places_each_value_by_name_whatever_the_order_given);
    tcase_add_test(core,
                   test_script_args_refuses_a_name_unknown_given_twice_missing_or_without_a_value);
    suite_add_tcase(s, core);
    return s;
}
