/*
 * crash-util.h - what the crash tests (test-kill-tinygpt, test-signals,
 * test-disk-full) share: a scratch directory, starting tinygpt as a child
 * with its output in files, reading its --flush-log and stdout, and
 * checking a run file through the reader and `resdiag report`.
 *
 * Header-only (static functions): each test is one executable.
 */
#ifndef RD_CRASH_UTIL_H
#define RD_CRASH_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "resdiag.h"

static char cu_dir[256];

static inline void cu_make_dir(const char *name)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(cu_dir, sizeof cu_dir, "%s/resdiag-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (!mkdtemp(cu_dir)) {
        perror("mkdtemp");
        exit(EXIT_FAILURE);
    }
}

static const char *cu_path(const char *fmt, ...)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    snprintf(buf[k], sizeof buf[k], "%s/%s", cu_dir, name);
    return buf[k];
}

/* Removes the files of the scratch directory and the directory. */
static inline void cu_remove_dir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cu_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cu_dir);
}

static inline void cu_sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* xorshift64*: deterministic per-round parameters. */
static inline uint64_t cu_mix(uint64_t x)
{
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
}

/* How the child is set up before exec. */
typedef struct cu_child {
    const char *out, *err;  /* stdout / stderr files (NULL: /dev/null) */
    long fsize_limit;       /* >= 0: RLIMIT_FSIZE in bytes, SIGXFSZ at its default */
} cu_child;

/* Starts argv[0] with argv; returns the pid. SIGINT/SIGTERM are set to
 * their defaults in the child: a test started in the background by a
 * non-interactive shell inherits SIGINT ignored. */
static inline pid_t cu_spawn(const cu_child *c, char *const *argv)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    int fo = open(c->out ? c->out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(c->err ? c->err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
        _exit(126);
    if (c->fsize_limit >= 0) {
        /* SIGXFSZ keeps its default action (death): the library must stay
         * below the limit by itself, never reach it. */
        signal(SIGXFSZ, SIG_DFL);
        struct rlimit rl = { (rlim_t)c->fsize_limit, (rlim_t)c->fsize_limit };
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(126);
    }
    execv(argv[0], argv);
    _exit(127);
}

static inline int cu_wait(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

/* The whole of a (small) file, NUL-terminated; "" if it cannot be read. */
static char *cu_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return calloc(1, 1);
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    size_t got;
    while (s && (got = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                s = NULL;
            }
            s = t;
        }
    }
    fclose(f);
    if (!s)
        return calloc(1, 1);
    s[len] = 0;
    return s;
}

/* Lines of text that start with prefix. */
static inline int cu_count_lines(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = text; *p;) {
        if (strncmp(p, prefix, len) == 0)
            n++;
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
    return n;
}

/* The number after the last complete line "<word> N" of text; -1 if none.
 * A line without its newline (cut by a kill) does not count. */
static inline long long cu_last_number(const char *text, const char *word)
{
    long long v = -1;
    size_t len = strlen(word);
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        if (strncmp(p, word, len) == 0 && p[len] == ' ')
            v = strtoll(p + len + 1, NULL, 10);
        p = nl + 1;
    }
    return v;
}

/* The log line "open" is there: the run file exists. Waits up to 20 s. */
static inline int cu_wait_open(const char *log, pid_t pid)
{
    for (int i = 0; i < 20000; i++) {
        char *s = cu_slurp(log);
        int ok = strncmp(s, "open\n", 5) == 0;
        free(s);
        if (ok)
            return 1;
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return 0;
        cu_sleep_us(1000);
    }
    return 0;
}

/* Waits until the flush log says step >= want was flushed (up to 20 s). */
static inline int cu_wait_flushed(const char *log, long long want)
{
    for (int i = 0; i < 20000; i++) {
        char *s = cu_slurp(log);
        long long f = cu_last_number(s, "flushed");
        free(s);
        if (f >= want)
            return 1;
        cu_sleep_us(1000);
    }
    return 0;
}

/* `resdiag report FILE` (stdout and stderr to files): the exit status. */
static inline int cu_report(const char *tool, const char *file, const char *json)
{
    char *argv[] = { (char *)tool, "report", (char *)file, NULL, NULL };
    if (json) {
        argv[2] = "--json";
        argv[3] = (char *)file;
    }
    cu_child c = { cu_path("report.out"), cu_path("report.err"), -1 };
    int status = cu_wait(cu_spawn(&c, argv));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A run file of tinygpt checked through the reader: the trainer's step
 * numbers are 0, 1, ..., n-1 (record_every 1), and every recorded step
 * has the stream leaving the last layer observed with `rows` tokens and a
 * finite, positive norm. Returns n, or -1 with a reason in why. */
static inline int64_t cu_check_run(const char *file, int last_layer, int64_t rows, char *why,
                            size_t why_len)
{
    resdiag_reader *rd = NULL;
    if (resdiag_reader_open(&rd, file) != RESDIAG_OK) {
        snprintf(why, why_len, "the reader cannot open %s", file);
        return -1;
    }
    int64_t n = resdiag_reader_info(rd)->n_steps;
    int64_t *steps = malloc((size_t)(n ? n : 1) * sizeof *steps);
    double *frob = malloc((size_t)(n ? n : 1) * sizeof *frob);
    double *nrow = malloc((size_t)(n ? n : 1) * sizeof *nrow);
    int64_t ret = n;
    if (!steps || !frob || !nrow ||
        resdiag_reader_steps(rd, steps, n) != RESDIAG_OK ||
        resdiag_reader_series(rd, RESDIAG_FORWARD, last_layer, 1, RESDIAG_STREAM_OUT,
                              RESDIAG_FIELD_FROB, frob, n) != RESDIAG_OK ||
        resdiag_reader_series(rd, RESDIAG_FORWARD, last_layer, 1, RESDIAG_STREAM_OUT,
                              RESDIAG_FIELD_ROWS, nrow, n) != RESDIAG_OK) {
        snprintf(why, why_len, "cannot read the %lld steps of %s", (long long)n, file);
        ret = -1;
    }
    for (int64_t i = 0; ret >= 0 && i < n; i++) {
        if (steps[i] != i || !(frob[i] > 0) || !isfinite(frob[i]) || nrow[i] != (double)rows) {
            snprintf(why, why_len, "%s: record %lld is step %lld, norm %g, rows %g", file,
                     (long long)i, (long long)steps[i], frob[i], nrow[i]);
            ret = -1;
        }
    }
    free(steps);
    free(frob);
    free(nrow);
    resdiag_reader_destroy(rd);
    return ret;
}

/* Whether steps 0..n-1 of every time series of file equal those of ref,
 * bit for bit (NaN where NaN): ref is a whole run of the same trainer and
 * configuration (deterministic with --threads 1), so each step a killed
 * run kept is the one it computed, read back exactly. The datasets are
 * the ones the reader lists for ref; step_time is left out (a clock).
 * Returns 1, or 0 with the first difference in why. */
static inline int cu_same_steps(const char *file, const char *ref, int64_t n, char *why,
                                size_t why_len)
{
    resdiag_reader *a = NULL, *b = NULL;
    if (resdiag_reader_open(&a, file) != RESDIAG_OK || resdiag_reader_open(&b, ref) != RESDIAG_OK) {
        snprintf(why, why_len, "cannot open %s and %s", file, ref);
        resdiag_reader_destroy(a);
        return 0;
    }
    int ok = resdiag_reader_info(b)->n_steps >= n;
    if (!ok)
        snprintf(why, why_len, "the reference %s holds fewer than %lld steps", ref, (long long)n);
    for (int d = 0; ok && d < resdiag_reader_n_datasets(b); d++) {
        const char *name = resdiag_reader_dataset_name(b, d);
        int64_t dims[8];
        int rank = 0;
        if (strcmp(name, "step_time") == 0
            || resdiag_reader_dims(b, name, dims, 8, &rank) != RESDIAG_OK || rank < 1)
            continue;
        size_t per = 1;
        for (int k = 1; k < rank; k++) per *= (size_t)dims[k];
        size_t len = (size_t)n * per;
        double *x = malloc((len ? len : 1) * sizeof *x);
        double *y = malloc((len ? len : 1) * sizeof *y);
        resdiag_status sb = x && y ? resdiag_reader_read(b, name, 0, n, y, len) : RESDIAG_E_NOMEM;
        if (sb == RESDIAG_OK && resdiag_reader_read(a, name, 0, n, x, len) != RESDIAG_OK) {
            snprintf(why, why_len, "%s: cannot read %s", file, name);
            ok = 0;
        }
        for (size_t e = 0; ok && sb == RESDIAG_OK && e < len; e++)
            if (!(x[e] == y[e] || (isnan(x[e]) && isnan(y[e])))) {
                snprintf(why, why_len, "%s: %s step %zu element %zu is %.17g, the whole run "
                         "has %.17g", file, name, e / per, e % per, x[e], y[e]);
                ok = 0;
            }
        free(x);
        free(y);
    }
    resdiag_reader_destroy(a);
    resdiag_reader_destroy(b);
    return ok;
}

#endif /* RD_CRASH_UTIL_H */
