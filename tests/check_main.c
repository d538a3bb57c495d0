/* check_main.c -- the one main() of every check_<module> executable (see
 * check_main.h): runs CHECK_SUITE(), the case picked by CK_RUN_CASE or all
 * of them, and fails when a test failed or when no test ran at all. A
 * ctest entry whose case name is mistyped (CK_RUN_CASE names no case of
 * the suite) runs nothing; Check alone would call that a pass. */
#include <stdio.h>
#include <stdlib.h>
#include "check_main.h"

#ifndef CHECK_SUITE
#error "build check_main.c with CHECK_SUITE=<module>_suite"
#endif

int main(void) {
    Suite *s = CHECK_SUITE();
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int ran = srunner_ntests_run(sr);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (ran == 0) {
        const char *tcase = getenv("CK_RUN_CASE");
        fprintf(stderr,
                "check: no test ran: %s%s%s (a case name in tests/CMakeLists.txt "
                "that the suite does not have?)\n",
                tcase ? "CK_RUN_CASE=" : "the suite has no test", tcase ? tcase : "",
                tcase ? " names no case with a test" : "");
        return EXIT_FAILURE;
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
