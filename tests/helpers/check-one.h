/*
 * check-one.h - the one main() of every Check program: CHECK_MAIN(&program,
 * table...) builds the suite from a table of cases and tests, runs it, and
 * makes and removes the program's scratch directory; what a program needs
 * besides (arguments, a child mode, a log handler, set-up, a run of the
 * suite per kernel path) it gives as hooks in its check_program.
 *
 *     static const check_program program = { .name = "merge", .timeout = 60 };
 *     CHECK_MAIN(&program, CHECK_TEST(a_test), CHECK_LOOP(a_loop_test, 0, 4))
 *
 * Tests listed before any CHECK_CASE make a case of the program's name and
 * timeout; each CHECK_CASE begins a case of its own name, timeout and
 * fixtures, as tcase_create and its settings would.
 */
#ifndef RD_CHECK_ONE_H
#define RD_CHECK_ONE_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* What start returns to let the tests run; any other value is main's exit
 * status (a usage error, a child mode's status, a set-up that failed). */
#define CHECK_GO_ON (-1)

/* What a round hook returns before run `round` of the suite. */
typedef enum {
    CHECK_ROUND_RUN,  /* run the suite this round */
    CHECK_ROUND_SKIP, /* not this round; ask about the next */
    CHECK_ROUND_STOP, /* no more rounds */
    CHECK_ROUND_FAIL, /* the round could not be set up: main fails */
} check_round;

typedef struct check_program {
    const char *name; /* the suite; the first case; the scratch directory's */
    int timeout;      /* of the first case, in seconds; 0: Check's default */
    /* When set: $TMPDIR/resdiag-test-NAME-XXXXXX (or under /tmp) is made
     * here before start. After the tests pass it is removed: with what is
     * in it when remove_files is 1, else only when the tests emptied it.
     * After a failure it is kept unless empty, for inspection. */
    char *scratch;
    size_t scratch_size;
    int remove_files;
    void (*prepare)(void);                /* process-wide set-up that cannot fail */
    int (*start)(int argc, char **argv);  /* arguments and set-up; CHECK_GO_ON or a status */
    check_round (*round)(int round);      /* when set: asked before each run of the suite */
    void (*finish)(void);                 /* after the tests: frees what start made */
} check_program;

/* One entry of a program's table: a case, or a test of the case above. */
typedef struct check_entry {
    const char *case_name;         /* set: this entry begins a case */
    int timeout;                   /* the case's; 0: Check's default */
    SFun setup, teardown;          /* checked fixture: around each test, in its child */
    SFun setup_once, teardown_once; /* unchecked fixture: once around the case */
    const TTest *test;             /* set: a test; tcase_add_test is the loop [0, 1) */
    int from, to;
} check_entry;

#define CHECK_CASE(name_, timeout_) { .case_name = (name_), .timeout = (timeout_) }
#define CHECK_CASE_FIXTURE(name_, timeout_, setup_, teardown_)                        \
    { .case_name = (name_), .timeout = (timeout_), .setup = (setup_),                \
      .teardown = (teardown_) }
#define CHECK_CASE_ONCE(name_, timeout_, setup_, teardown_)                           \
    { .case_name = (name_), .timeout = (timeout_), .setup_once = (setup_),           \
      .teardown_once = (teardown_) }
#define CHECK_TEST(test_) { .test = (test_), .from = 0, .to = 1 }
#define CHECK_LOOP(test_, from_, to_) { .test = (test_), .from = (from_), .to = (to_) }

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

static inline TCase *check_new_case(Suite *s, const char *name, int timeout)
{
    TCase *tc = tcase_create(name);
    if (timeout > 0)
        tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

/* The suite of a table, its cases in the table's order. */
static inline Suite *check_suite_of(const check_program *p, const check_entry *table, size_t n)
{
    Suite *s = suite_create(p->name);
    TCase *tc = NULL;
    for (size_t i = 0; i < n; i++) {
        const check_entry *e = &table[i];
        if (e->case_name) {
            tc = check_new_case(s, e->case_name, e->timeout);
            if (e->setup || e->teardown)
                tcase_add_checked_fixture(tc, e->setup, e->teardown);
            if (e->setup_once || e->teardown_once)
                tcase_add_unchecked_fixture(tc, e->setup_once, e->teardown_once);
            continue;
        }
        if (!tc)
            tc = check_new_case(s, p->name, p->timeout);
        tcase_add_loop_test(tc, e->test, e->from, e->to);
    }
    return s;
}

/* How many tests failed in every round (a program without rounds has one);
 * -1 when a round could not be set up. */
static inline int check_run_rounds(const check_program *p, const check_entry *table, size_t n)
{
    int failed = 0;
    for (int round = 0;; round++) {
        check_round what = p->round ? p->round(round) : round == 0 ? CHECK_ROUND_RUN
                                                                   : CHECK_ROUND_STOP;
        if (what == CHECK_ROUND_FAIL)
            return -1;
        if (what == CHECK_ROUND_STOP)
            return failed;
        if (what == CHECK_ROUND_SKIP)
            continue;
        SRunner *sr = srunner_create(check_suite_of(p, table, n));
        srunner_run_all(sr, CK_NORMAL);
        failed += srunner_ntests_failed(sr);
        srunner_free(sr);
    }
}

static inline int check_remove_one(const char *path, const struct stat *st, int flag,
                                   struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The scratch directory after the tests (see check_program). */
static inline void check_end_scratch(const check_program *p, int passed)
{
    if (!p->scratch)
        return;
    if (passed && p->remove_files)
        nftw(p->scratch, check_remove_one, 16, FTW_DEPTH | FTW_PHYS);
    else
        rmdir(p->scratch);
    if (access(p->scratch, F_OK) == 0)
        fprintf(stderr, "run files left in %s\n", p->scratch);
}

/* Scratch directory, prepare and start: CHECK_GO_ON, or main's status. */
static inline int check_begin(const check_program *p, int argc, char **argv)
{
    if (p->scratch && !check_one_make_dir(p->scratch, p->scratch_size, p->name))
        return EXIT_FAILURE;
    if (p->prepare)
        p->prepare();
    int status = p->start ? p->start(argc, argv) : CHECK_GO_ON;
    if (status != CHECK_GO_ON)
        check_end_scratch(p, 0);
    return status;
}

/* The rounds, finish and the scratch directory: main's status. */
static inline int check_end(const check_program *p, const check_entry *table, size_t n)
{
    int failed = check_run_rounds(p, table, n);
    if (p->finish)
        p->finish();
    check_end_scratch(p, failed == 0);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* The program's main; the table is built after start, so that a loop's
 * range may be what start computed. */
#define CHECK_MAIN(program, ...)                                                       \
    int main(int argc, char **argv)                                                    \
    {                                                                                  \
        int check_status_ = check_begin((program), argc, argv);                        \
        if (check_status_ != CHECK_GO_ON)                                              \
            return check_status_;                                                      \
        const check_entry check_table_[] = { __VA_ARGS__ };                            \
        return check_end((program), check_table_, sizeof check_table_ / sizeof *check_table_); \
    }

#endif
