/* check_main.h -- the suites of the check_<module> executables.
 *
 * Each tests/check_<module>.c defines one Suite *<module>_suite(void), as in
 * Check's own example; tests/check_main.c is the one main() they all share.
 * CMake builds check_main.c into each executable with CHECK_SUITE naming
 * that module's suite function. */
#ifndef INVENTORYD_CHECK_MAIN_H
#define INVENTORYD_CHECK_MAIN_H

#include <check.h>

Suite *config_suite(void);
Suite *route_suite(void);
Suite *reply_suite(void);
Suite *inventory_suite(void);
Suite *http_suite(void);
Suite *ladder_suite(void);
Suite *redlock_suite(void);
Suite *ha_suite(void);
Suite *lock_suite(void);
Suite *checker_suite(void);
Suite *hold_suite(void);
Suite *safety_suite(void);
Suite *stats_suite(void);
Suite *lab_suite(void);
Suite *cluster_suite(void);
Suite *commit_suite(void);
Suite *handoff_suite(void);
Suite *zookeeper_suite(void);
Suite *mysql_suite(void);
Suite *script_suite(void);

#endif
