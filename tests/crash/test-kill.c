/*
 * test-kill.c - a trainer SIGKILLed at any moment leaves a run file that the
 * reader opens, holding every step it had appended, exactly as written.
 *
 * Each round forks a writer that appends steps forever (one or a few at a
 * time) and, after each successful append, reports the number of steps
 * appended so far through a pipe. The parent kills it after a pseudo-random
 * 1..200 ms, takes the last count reported, and opens the file: it must hold
 * n_steps >= that count (at most one batch more: the append in flight may
 * have committed before the kill), with every value of every step exact.
 *
 * A SIGKILL can also land inside one write() of several pages: Linux checks
 * for a fatal signal between the pages it copies, so the file keeps the
 * first pages new and the rest old. The second case makes that happen at
 * every such write, deterministically: the test defines pwrite() itself,
 * which HDF5's calls reach first, and the writer child writes a crossing
 * write only up to a page boundary and dies there.
 *
 * Every case runs on a file of schema 2 with compression (deflate level 1,
 * the default), schema 2 without it, or schema 1: a filtered chunk that a
 * later flush writes again moves to new space with another compressed
 * size, and its index changes with it, which is what a kill or a tear may
 * cut (the record_chunk_steps of several steps, appended one or two at a
 * time, ask for that; the writer decides what its chunks hold).
 *
 * Value of element `off` of step index i: i * 100000 + off + 0.5, NaN in
 * some stats rows (unobserved sites); the fields that schema 2 stores as
 * integers (the counts, calls and aliases) hold integers in their range.
 * A schema-2 file must give back each float32 field (statistics, update
 * ratios, the sketches of the block sites) as the float32 nearest to the
 * value, everything else exactly (the model sites' sketches are float64).
 */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check-one.h"
#include "h5/writer.h"
#include "format/format.h"
#include "format/tables.h"
#include "resdiag.h"

#ifndef N_ROUNDS
#define N_ROUNDS 16
#endif

static char g_dir[256];
static char g_log[2048];

static void capture_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    snprintf(g_log, sizeof g_log, "%s", msg);
}

static const char *const SUB[] = { "attn", "mlp" };
static const char *const LP[] = { "attn.wo", "mlp.w2" };
static const char *const MP[] = { "head.w" };

/* Whether field f of a STATS row is one that schema 2 keeps as an int64. */
static int is_count_field(size_t f)
{
    return f == RESDIAG_FIELD_ROWS || f == RESDIAG_FIELD_COLS || f == RESDIAG_FIELD_ABSMAX_COL
           || f == RESDIAG_FIELD_NAN_COUNT || f == RESDIAG_FIELD_INF_COUNT
           || f == RESDIAG_FIELD_CALL_SEQ;
}

/* The value written at element off of step index i, and (float32) whether
 * a schema-2 file stores it as a float32. */
static double expect_value(const rd_tables *lay, int64_t i, size_t off, int *float32)
{
    *float32 = 0;
    for (int t = 0; t < RD_N_TABLES; t++) {
        const rd_table *tb = &lay->tables[t];
        if (off < tb->offset || off >= tb->offset + tb->count)
            continue;
        size_t e = off - tb->offset;
        switch (tb->kind) {
        case RD_KIND_STATS:
            if ((e / RESDIAG_N_FIELDS + (size_t)i) % 5 == 2)
                return NAN;
            if (is_count_field(e % RESDIAG_N_FIELDS))
                return (double)(i * 1000 + (int64_t)e);
            *float32 = 1;
            break;
        case RD_KIND_CALLS: /* int32, 0 = not observed */
            return (double)(1 + (i * 7 + (int64_t)e) % 100000);
        case RD_KIND_ALIAS: /* int8, -1 = its own tensor */
            return (double)((i + (int64_t)e) % 100);
        case RD_KIND_FLAG: /* int8: 0 complete, 1 aborted */
            return (double)((i + (int64_t)e) % 2);
        case RD_KIND_TEXT: /* uint8 bytes */
            return (double)(1 + (i * 3 + (int64_t)e) % 255);
        case RD_KIND_SKETCH: /* the model sites' sketches stay float64 */
            *float32 = t != RD_T_FWD_MODEL_SKETCH && t != RD_T_BWD_MODEL_SKETCH;
            break;
        case RD_KIND_UPDATE:
            *float32 = 1;
            break;
        default: /* the metrics: float64 in both schemas */
            break;
        }
        break;
    }
    return (double)i * 100000.0 + (double)off + 0.5;
}

static double expect(const rd_tables *lay, int64_t i, size_t off)
{
    int float32;
    return expect_value(lay, i, off, &float32);
}

/* What a file of this schema gives back for that element. */
static double expect_read(const rd_tables *lay, int schema, int64_t i, size_t off)
{
    int float32;
    double v = expect_value(lay, i, off, &float32);
    return schema == 2 && float32 ? (double)(float)v : v;
}

static int64_t step_no(int64_t i) { return 7 + 2 * i; }

static int same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* Deterministic round parameters: xorshift64* from the round number. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
}

typedef struct setup {
    resdiag_model m;
    rd_tables lay;
    rd_file_header hdr;
    int schema, level;   /* the file's schema (1, 2) and deflate level */
} setup;

/* The three files every guarantee is checked on. */
typedef struct schema_case {
    int schema, level;
} schema_case;
static const schema_case SCHEMAS[3] = { { 2, 1 }, { 2, 0 }, { 1, 0 } };

static void make_setup(setup *s, int chunk, schema_case sc)
{
    memset(s, 0, sizeof *s);
    s->m.struct_size = sizeof s->m;
    s->m.n_layers = 4;
    s->m.d_model = 32;
    s->m.n_sublayers = 2;
    s->m.sublayer_names = SUB;
    s->m.n_layer_params = 2;
    s->m.layer_param_names = LP;
    s->m.n_model_params = 1;
    s->m.model_param_names = MP;
    static const char *const METRICS[] = { "loss", "lr" };
    s->m.n_metrics = 2; /* the trainer's metrics are kept like every table */
    s->m.metric_names = METRICS;
    rd_tables_init(&s->lay, 4, 2, 2, 1, 8, rd_block_sites(sc.schema ? sc.schema : RD_SCHEMA_VERSION));
    rd_tables_set_metrics(&s->lay, 2);
    s->hdr.model = &s->m;
    s->hdr.tables = &s->lay;
    s->hdr.sketch_size = 8;
    s->hdr.sketch_seed = 99;
    s->hdr.record_chunk_steps = chunk;
    s->hdr.file_schema = sc.schema;
    s->hdr.compression = sc.level;
    s->schema = sc.schema;
    s->level = sc.level;
}

/* ------------------------------------------------ torn writes on demand */

/* Page size of the kernel's page cache: the unit a killed write() keeps. */
#define PAGE 4096
/* Exit status of a writer child that died inside a torn write. */
#define TORN_EXIT 42

/* In a writer child: -1, every pwrite() goes through whole; else the index
 * (counted from g_tear_armed on) of the page-crossing pwrite() to tear. */
static long g_tear_at = -1;
/* Which of that write's page boundaries to cut it at (clamped). */
static long g_tear_boundary;
/* Set once the file exists: crossing writes are counted from then on. */
static int g_tear_armed;
/* Page-crossing pwrite() calls seen since g_tear_armed, and those of them
 * that wrote a metadata block (see is_metadata), with the first one. */
static long g_crossing, g_crossing_meta;
static char g_first_meta[96];

/* Whether a write starts with the signature of an HDF5 metadata block:
 * every block of the format the writer uses has one (object headers and
 * their continuations, B-trees, extensible and fixed arrays, heaps, free
 * space, the superblock); the raw data here are doubles. */
static int is_metadata(const void *buf, size_t n)
{
    static const char sig[][5] = { "OHDR", "OCHK", "BTHD", "BTIN", "BTLF", "EAHD", "EAIB",
                                   "EASB", "EADB", "FAHD", "FADB", "FRHP", "FHDB", "FHIB",
                                   "FSHD", "FSSE", "GCOL", "SMTB", "SMLI", "\211HDF" };
    for (size_t i = 0; n >= 4 && i < sizeof sig / sizeof sig[0]; i++)
        if (memcmp(buf, sig[i], 4) == 0)
            return 1;
    return 0;
}

/* HDF5's sec2 driver writes through pwrite(); this definition in the
 * executable comes first in symbol lookup, for libhdf5 too. The asm name
 * keeps it "pwrite" where _FILE_OFFSET_BITS=64 would rename it. */
ssize_t torn_pwrite(int fd, const void *buf, size_t n, off_t off) __asm__("pwrite");
ssize_t torn_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    if (g_tear_armed && n > 0 && off / PAGE != (off + (off_t)n - 1) / PAGE) {
        if (is_metadata(buf, n) && g_crossing_meta++ == 0)
            snprintf(g_first_meta, sizeof g_first_meta, "%.4s block of %zu bytes at %lld",
                     (const char *)buf, n, (long long)off);
        if (g_crossing++ == g_tear_at) {
            long boundaries = (long)((off + (off_t)n - 1) / PAGE - off / PAGE);
            long b = g_tear_boundary < boundaries ? g_tear_boundary : boundaries - 1;
            size_t keep = (size_t)((off / PAGE + 1 + b) * PAGE - off);
            if (real(fd, buf, keep, off) != (ssize_t)keep)
                _exit(2);
            _exit(TORN_EXIT);
        }
    }
    return real(fd, buf, n, off);
}

/* Whether files in dir get space from fallocate: the writer uses paged
 * aggregation only there (lib/h5/writer_create.c). */
static int dir_can_fallocate(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/fallocate-probe", dir);
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    int ok = fallocate(fd, 0, 0, PAGE) == 0;
    close(fd);
    unlink(p);
    return ok;
}

/* What a writer child reports after each append and after its close (one
 * write() of less than PIPE_BUF: whole or not at all). */
typedef struct report {
    int64_t steps;          /* appended so far */
    int64_t crossing;       /* page-crossing writes so far */
    int64_t crossing_meta;  /* those of metadata blocks */
    char first_meta[96];    /* the first of those */
} report;

/* The writer: appends max_steps steps (or forever when max_steps < 0),
 * closes the file and exits 0. Exit 3: an append failed. It sends a
 * report when the file exists, after each append and after the close. */
static void writer_child(const char *path, setup *s, size_t batch, int64_t max_steps, int fd)
{
    char err[1024];
    rd_writer *w = NULL;
    size_t L = s->lay.record_len;
    double *rec = malloc(batch * L * sizeof *rec);
    int64_t *steps = malloc(batch * sizeof *steps);
    double *times = malloc(batch * sizeof *times);
    rd_callsite *cs = calloc(s->lay.n_slots, sizeof *cs);
    if (!rec || !steps || !times || !cs)
        _exit(2);
    for (size_t k = 0; k < s->lay.n_slots; k++) {
        cs[k].file = k % 2 ? "model.c" : NULL;
        cs[k].line = (int)k;
    }
    if (rd_writer_create(&w, path, &s->hdr, err, sizeof err) != RESDIAG_OK)
        _exit(2);
    g_tear_armed = 1;
    int64_t n = 0;
    report r;
    memset(&r, 0, sizeof r);
    if (write(fd, &r, sizeof r) != sizeof r)
        _exit(2);
    while (max_steps < 0 || n < max_steps) {
        for (size_t k = 0; k < batch; k++) {
            int64_t i = n + (int64_t)k;
            steps[k] = step_no(i);
            times[k] = (double)i;
            for (size_t off = 0; off < L; off++)
                rec[k * L + off] = expect(&s->lay, i, off);
        }
        if (rd_writer_append(w, steps, times, rec, batch, cs, n == 0, err, sizeof err)
            != RESDIAG_OK)
            _exit(3);
        n += (int64_t)batch;
        r.steps = n;
        r.crossing = g_crossing;
        if (write(fd, &r, sizeof r) != sizeof r)
            _exit(2);
    }
    if (rd_writer_close(w, err, sizeof err) != RESDIAG_OK)
        _exit(3);
    r.crossing = g_crossing;
    r.crossing_meta = g_crossing_meta;
    memcpy(r.first_meta, g_first_meta, sizeof r.first_meta);
    if (write(fd, &r, sizeof r) != sizeof r)
        _exit(2);
    _exit(0);
}

/* Opens the run file a killed writer left at path: it must hold n_steps in
 * last .. last + batch (the append in flight may have committed), every
 * value of every step exact. what names the round in messages. */
static void check_killed_file(const char *path, const setup *s, int64_t last, size_t batch,
                              const char *what)
{
    resdiag_reader *rd = NULL;
    resdiag_status st = resdiag_reader_open(&rd, path);
    ck_assert_msg(st == RESDIAG_OK, "%s: open: %s", what, g_log);
    int64_t n = resdiag_reader_info(rd)->n_steps;
    ck_assert_msg(n >= last && n <= last + (int64_t)batch,
                  "%s: n_steps %lld, last reported %lld, batch %zu", what, (long long)n,
                  (long long)last, batch);

    /* every value of every step the file claims (counted, then asserted
     * once: a Check assertion per value would dominate the run time) */
    long bad = 0;
    char first_bad[256] = "";
    for (int t = 0; t < RD_N_TABLES; t++) {
        const rd_table *tb = &s->lay.tables[t];
        size_t len = (size_t)n * tb->count;
        double *all = malloc((len ? len : 1) * sizeof *all);
        st = resdiag_reader_read(rd, tb->name, 0, n, all, len);
        ck_assert_msg(st == RESDIAG_OK, "%s: reading %s: %s", what, tb->name, g_log);
        for (int64_t i = 0; i < n; i++)
            for (size_t e = 0; e < tb->count; e++) {
                double val = all[(size_t)i * tb->count + e];
                if (!same(val, expect_read(&s->lay, s->schema, i, tb->offset + e)) && bad++ == 0)
                    snprintf(first_bad, sizeof first_bad, "%s step %lld element %zu = %g",
                             tb->name, (long long)i, e, val);
            }
        free(all);
    }
    ck_assert_msg(bad == 0, "%s: %ld wrong values, first: %s", what, bad, first_bad);
    int64_t *steps = malloc((size_t)(n ? n : 1) * sizeof *steps);
    double *times = malloc((size_t)(n ? n : 1) * sizeof *times);
    ck_assert_int_eq(resdiag_reader_steps(rd, steps, n), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_read(rd, "step_time", 0, n, times, (size_t)n), RESDIAG_OK);
    for (int64_t i = 0; i < n; i++)
        bad += steps[i] != step_no(i) || times[i] != (double)i;
    ck_assert_msg(bad == 0, "%s: %ld wrong step numbers or times", what, bad);
    free(steps);
    free(times);
    if (n > 0) {
        /* call sites were written with the first append */
        ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_IN),
                         "model.c:1");
        ck_assert_str_eq(resdiag_reader_callsite(rd, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN),
                         "");
    }
    /* a reader of a file still marked as being written can refresh */
    ck_assert_int_eq(resdiag_reader_refresh(rd), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, n);
    resdiag_reader_destroy(rd);
}

/* Starts a writer child (see writer_child) and waits for its first report,
 * which says the file exists. *rfd: the read end of its reports. */
static pid_t start_writer(const char *path, setup *s, size_t batch, int64_t max_steps,
                          int *rfd)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        writer_child(path, s, batch, max_steps, fds[1]);
    }
    close(fds[1]);
    report r;
    ck_assert_int_eq(read(fds[0], &r, sizeof r), (ssize_t)sizeof r);
    ck_assert_int_eq(r.steps, 0);
    *rfd = fds[0];
    return pid;
}

/* Reads the writer's reports to the end: the last one. */
static report last_report(int rfd)
{
    report r, v;
    memset(&r, 0, sizeof r);
    while (read(rfd, &v, sizeof v) == (ssize_t)sizeof v)
        r = v;
    close(rfd);
    return r;
}

START_TEST(kill_at_random_time_keeps_every_reported_step)
{
    uint64_t rnd = mix(0x9E3779B97F4A7C15ull * (uint64_t)(_i + 1));
    static const int chunks[] = { 1, 3, 8, 16 };
    static const size_t batches[] = { 1, 1, 2, 5 };
    int chunk = chunks[rnd % 4];
    size_t batch = batches[(rnd >> 8) % 4];
    /* 1..200 ms, a few rounds right after the file exists */
    long delay_us = _i % 4 == 0 ? 1000 + (long)((rnd >> 16) % 3000)
                                : 1000 + (long)((rnd >> 16) % 199000);
    schema_case sc = SCHEMAS[_i % 3];
    setup s;
    make_setup(&s, chunk, sc);
    char path[512];
    snprintf(path, sizeof path, "%s/kill-%d.h5", g_dir, _i);

    int rfd;
    pid_t pid = start_writer(path, &s, batch, -1, &rfd);
    struct timespec ts = { delay_us / 1000000, (delay_us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "writer ended by itself: status %#x", status);
    report r = last_report(rfd);

    char what[160];
    snprintf(what, sizeof what, "round %d (schema %d level %d, chunk %d, batch %zu, %ld us)", _i,
             sc.schema, sc.level, chunk, batch, delay_us);
    check_killed_file(path, &s, r.steps, batch, what);
    fprintf(stderr, "kill round %2d: schema %d level %d chunk %2d batch %zu after %6.1f ms: "
            "reported %4lld\n", _i, sc.schema, sc.level, chunk, batch,
            (double)delay_us / 1000.0, (long long)r.steps);
    unlink(path);
}
END_TEST

/* One writer configuration: steps appended `batch` at a time into tables
 * of `chunk` steps per chunk. */
typedef struct torn_case {
    int chunk;
    size_t batch;
    int64_t steps;
    schema_case sc;
} torn_case;

/* Runs the configuration once whole; returns its last report. */
static report clean_run(const char *path, setup *s, const torn_case *c)
{
    int rfd, status = 0;
    pid_t pid = start_writer(path, s, c->batch, c->steps, &rfd);
    report r = last_report(rfd);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "clean run: status %#x",
                  status);
    return r;
}

/* No metadata block is written across a page boundary, so none can be
 * torn: checked on every write of long runs (chunks of 1 step make the
 * chunk indexes large; an extensible array's data blocks would outgrow a
 * page here), then the file is read back whole. */
START_TEST(no_metadata_write_crosses_a_page)
{
    static const torn_case cases[] = { { 1, 1, 3000, { 1, 0 } }, { 1, 1, 3000, { 2, 1 } },
                                       { 16, 5, 4000, { 2, 1 } } };
    const torn_case *c = &cases[_i];
    if (!dir_can_fallocate(g_dir)) {
        fprintf(stderr, "%s has no fallocate: the writer does not page the file; skipped\n",
                g_dir);
        return;
    }
    setup s;
    make_setup(&s, c->chunk, c->sc);
    char path[512];
    snprintf(path, sizeof path, "%s/pages-%d.h5", g_dir, _i);
    report r = clean_run(path, &s, c);
    ck_assert_msg(r.crossing_meta == 0, "schema %d level %d, chunk %d, %lld steps: %lld of %lld "
                  "page-crossing writes were metadata, the first a %s", c->sc.schema,
                  c->sc.level, c->chunk, (long long)c->steps,
                  (long long)r.crossing_meta, (long long)r.crossing, r.first_meta);
    check_killed_file(path, &s, c->steps, 0, "clean run");
    fprintf(stderr, "pages: schema %d level %d, chunk %2d, %lld steps: %lld page-crossing "
            "writes, none of metadata\n", c->sc.schema, c->sc.level, c->chunk,
            (long long)c->steps, (long long)r.crossing);
    unlink(path);
}
END_TEST

/* Round _i: one configuration, torn at N_TEARS of its page-crossing writes
 * (the first ones, the last ones, those of the close, and evenly spaced
 * between), alternately at the write's first and last page boundary. */
#ifndef N_TEARS
#define N_TEARS 16
#endif
START_TEST(torn_write_keeps_every_reported_step)
{
    /* deflate where chunks would be rewritten most (record_chunk_steps of
     * several steps, filled one or two at a time) */
    static const torn_case cases[] = { { 1, 1, 240, { 1, 0 } }, { 3, 2, 300, { 2, 1 } },
                                       { 8, 5, 400, { 2, 0 } }, { 16, 1, 600, { 2, 1 } } };
    const torn_case *c = &cases[_i];
    setup s;
    make_setup(&s, c->chunk, c->sc);
    char path[512];
    snprintf(path, sizeof path, "%s/torn-%d.h5", g_dir, _i);

    /* a clean run first: how many crossing writes there are to tear */
    long total = (long)clean_run(path, &s, c).crossing;
    ck_assert_msg(total > 0, "no write crossed a page: the test tears nothing");
    unlink(path);

    long n_tears = total < N_TEARS ? total : N_TEARS;
    for (long j = 0; j < n_tears; j++) {
        long k = j < 4 ? j : j >= n_tears - 4 ? total - (n_tears - j) : j * total / n_tears;
        g_tear_at = k;
        g_tear_boundary = j % 2 ? 1L << 30 : 0;
        int rfd, status = 0;
        pid_t pid = start_writer(path, &s, c->batch, c->steps, &rfd);
        g_tear_at = -1;
        report r = last_report(rfd);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == TORN_EXIT,
                      "tear %ld of %ld: the writer did not die in it (status %#x)", k, total,
                      status);
        char what[160];
        snprintf(what, sizeof what, "schema %d level %d, chunk %d batch %zu, crossing write %ld "
                 "of %ld torn at its %s page boundary", c->sc.schema, c->sc.level, c->chunk,
                 c->batch, k, total, j % 2 ? "last" : "first");
        check_killed_file(path, &s, r.steps, c->batch, what);
        unlink(path);
    }
    fprintf(stderr, "torn writes: schema %d level %d, chunk %2d batch %zu, %lld steps: %ld of "
            "%ld crossing writes torn, every file whole\n", c->sc.schema, c->sc.level, c->chunk,
            c->batch, (long long)c->steps, n_tears, total);
}
END_TEST

static void capture_every_log(void)
{
    resdiag_set_log_handler(capture_log, NULL);
}

static const check_program program = {
    .name = "kill",
    .scratch = g_dir,
    .scratch_size = sizeof g_dir,
    .prepare = capture_every_log,
};
CHECK_MAIN(&program,
           CHECK_CASE("sigkill", 60),
               CHECK_LOOP(kill_at_random_time_keeps_every_reported_step, 0, N_ROUNDS),
           CHECK_CASE("torn-write", 120),
               CHECK_LOOP(no_metadata_write_crosses_a_page, 0, 3),
               CHECK_LOOP(torn_write_keeps_every_reported_step, 0, 4))
