/*
 * check-one.h - the main() of a test program that runs its Check tests in a
 * scratch directory of its own: one test (test-bad-numbers, test-nan-storm)
 * or a list of them in one case.
 */
#ifndef RD_CHECK_ONE_H
#define RD_CHECK_ONE_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Makes $TMPDIR/resdiag-test-NAME-XXXXXX (or under /tmp) into dir. */
static inline int check_one_make_dir(char *dir, size_t len, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, len, "%s/resdiag-test-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 0;
    }
    return 1;
}

/* Runs the n tests in a suite and a case called name; then removes dir,
 * which the tests empty when they pass (the run files of a failed check stay
 * there for inspection). EXIT_SUCCESS or EXIT_FAILURE. */
static inline int check_tests_run(const char *name, const TTest *const *tests, size_t n,
                                  int timeout, const char *dir)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (rmdir(dir) != 0)
        fprintf(stderr, "run files left in %s\n", dir);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* check_tests_run of the one test. */
static inline int check_one_run(const char *name, const TTest *test, int timeout,
                                const char *dir)
{
    return check_tests_run(name, &test, 1, timeout, dir);
}

#endif
