/*
 * run.c - opening and analysing a run, writing what the commands make
 * (run.h).
 */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "command.h"

char tool_last_msg[1024];

static void keep_message(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    if (!tool_last_msg[0])
        snprintf(tool_last_msg, sizeof tool_last_msg, "%s", msg);
}

void tool_keep_messages(void)
{
    resdiag_set_log_handler(keep_message, NULL);
}

const char *tool_printable(const char *path)
{
    static char *kept;
    resdiag_free(kept);
    kept = resdiag_escape_text(path);
    return kept ? kept : "?";
}

int find_step(const resdiag_reader *rd, const char *path, long long want_step,
              int64_t *index)
{
    int64_t n = resdiag_reader_info(rd)->n_steps;
    int64_t *steps = calloc(n > 0 ? (size_t)n : 1, sizeof *steps);
    tool_last_msg[0] = 0;
    if (!steps || (n > 0 && resdiag_reader_steps(rd, steps, n) != RESDIAG_OK)) {
        fprintf(stderr, "resdiag: %s: %s\n", path,
                tool_last_msg[0] ? tool_last_msg : "cannot read the step numbers");
        free(steps);
        return EXIT_BAD;
    }
    int64_t si = want_step < 0 ? 0 : -1;
    for (int64_t i = 0; i < n && want_step >= 0; i++)
        if (steps[i] == want_step)
            si = i;
    free(steps);
    if (si < 0) {
        fprintf(stderr, "resdiag: %s: step %lld was not recorded\n", path, want_step);
        return EXIT_BAD;
    }
    *index = si;
    return 0;
}

/* Opens and analyses the run; on failure prints one line and returns NULL. */
resdiag_analysis *open_analysis(const cli_args *o, resdiag_reader **rdp)
{
    resdiag_reader *rd = NULL;
    *rdp = NULL;
    tool_last_msg[0] = 0;
    if (resdiag_reader_open_rank(&rd, o->path, o->rank) != RESDIAG_OK) {
        fprintf(stderr, "resdiag: %s\n",
                tool_last_msg[0] ? tool_last_msg : "cannot read the run file");
        return NULL;
    }
    const resdiag_run_info *in = resdiag_reader_info(rd);
    resdiag_analyze_options opt;
    resdiag_analyze_options_init(&opt);
    if (o->last)
        opt.step_index = RESDIAG_STEP_LAST;
    if (o->have_growth)
        opt.max_growth = o->max_growth;
    opt.no_consequences = o->no_consequences;
    if (o->want_step >= 0) {
        int64_t si;
        if (find_step(rd, o->path, o->want_step, &si) != 0) {
            resdiag_reader_destroy(rd);
            return NULL;
        }
        opt.step_index = si;
    }
    if (in->n_steps == 0) {
        fprintf(stderr, "resdiag: %s: the run holds no recorded steps (empty run, or the trainer "
                        "was stopped before its first step ended)\n", o->path);
        resdiag_reader_destroy(rd);
        return NULL;
    }
    resdiag_analysis *an = NULL;
    tool_last_msg[0] = 0;
    if (resdiag_analyze(rd, &opt, &an) != RESDIAG_OK) {
        fprintf(stderr, "resdiag: %s: %s\n", o->path,
                tool_last_msg[0] ? tool_last_msg : "cannot analyse the run");
        resdiag_reader_destroy(rd);
        return NULL;
    }
    *rdp = rd;
    return an;
}

int start_analysis(const char *cmd, int argc, char **argv, cli_args *o, resdiag_reader **rd,
                   resdiag_analysis **an, int *rc)
{
    *rc = parse_cli_args(cmd, argc, argv, o);
    if (*rc) {
        *rc = *rc < 0 ? 0 : *rc;
        return 0;
    }
    *an = open_analysis(o, rd);
    *rc = *an ? 0 : EXIT_BAD;
    return *an != NULL;
}

void end_analysis(resdiag_analysis *an, resdiag_reader *rd)
{
    resdiag_analysis_destroy(an);
    resdiag_reader_destroy(rd);
}

/* Writes text to path ("-" = stdout); 0, or -1 with errno set. */
static int write_file(const char *path, const char *text)
{
    if (strcmp(path, "-") == 0)
        return fputs(text, stdout) < 0 ? -1 : 0;
    /* only a regular file may be removed after a failed write: never a
     * device such as /dev/full, a pipe or whatever else the path names */
    struct stat st;
    int regular = stat(path, &st) != 0 || S_ISREG(st.st_mode);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    int e = errno;
    if (fclose(f) != 0 || bad) {
        if (bad)
            errno = e;
        e = errno;
        if (regular)
            remove(path); /* no half-written page left behind */
        errno = e;
        return -1;
    }
    return 0;
}

int write_output(const char *path, char *text)
{
    int rc = 0;
    if (!text) {
        fprintf(stderr, "resdiag: cannot make the page: %s\n",
                tool_last_msg[0] ? tool_last_msg : "out of memory");
        rc = EXIT_BAD;
    } else if (write_file(path, text) != 0) {
        fprintf(stderr, "resdiag: cannot write %s: %s\n", path, strerror(errno));
        rc = EXIT_BAD;
    }
    resdiag_free(text);
    return rc;
}
