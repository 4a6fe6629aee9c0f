/*
 * deflate.c - what the deflate of the writer's flush costs, and what
 * libdeflate would save: zlib's compress2 at level 1 (what HDF5's deflate
 * filter calls for each chunk, at the writer's default level) against
 * libdeflate's zlib-format compressor at level 1, on the chunks the writer
 * really produces.
 *
 * The chunk bytes: tinygpt runs, one as the end-to-end section runs it
 * (4 layers, --record full --record-every 2, 16-step flushes) and one with
 * 12 layers (a chunk holds one step of one table: layers x sublayers x
 * sites x fields, whatever the width, so d = 32 gives the chunk bytes of a
 * 12x768 model). Each stored chunk is read (H5Dread_chunk) and inflated:
 * what is left is the shuffled bytes the deflate filter was given.
 *
 * Timing: the thread's CPU clock, per repetition each method over every
 * chunk of a set, in an order that rotates; the ratio is per repetition,
 * then the median and [min-max]. "zlib, one stream" reuses one deflate
 * stream (deflateReset) and gives the same bytes as compress2: it shows
 * how much of the gap is compress2 setting up a stream per chunk.
 *
 * Shares, from the same tinygpt run's --step-times: the flush's CPU (the
 * steps that wrote the file, but the first, over the median of those that
 * did not) and a recorded step's CPU, against zlib's time per step.
 */
#include "deflate.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#ifdef RD_BENCH_LIBDEFLATE
#include <libdeflate.h>
#endif

#define LEVEL 1 /* the writer's default (resdiag_options.compression) */

enum { M_ZLIB, M_ZLIB_ONE, M_LIBDEFLATE, N_METHODS };
static const char *const METHOD_NAME[N_METHODS] = { "zlib compress2", "zlib, one stream",
                                                    "libdeflate" };

/* The shuffled bytes of every deflated chunk of one file. */
typedef struct chunk_set {
    unsigned char **bytes;
    size_t *len;
    size_t n, cap, total, min_len, max_len;
    long steps; /* chunks of one dataset: the steps the file holds */
    int failed;
} chunk_set;

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int add_chunk(chunk_set *s, unsigned char *b, size_t len)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        unsigned char **nb = realloc(s->bytes, cap * sizeof *nb);
        if (!nb)
            return 0;
        s->bytes = nb;
        size_t *nl = realloc(s->len, cap * sizeof *nl);
        if (!nl)
            return 0;
        s->len = nl;
        s->cap = cap;
    }
    s->bytes[s->n] = b;
    s->len[s->n++] = len;
    s->total += len;
    if (!s->min_len || len < s->min_len)
        s->min_len = len;
    if (len > s->max_len)
        s->max_len = len;
    return 1;
}

/* Adds the inflated chunks of dataset ds when its pipeline deflates. */
static void take_dataset(hid_t ds, chunk_set *s)
{
    hid_t dcpl = H5Dget_create_plist(ds), type = H5Dget_type(ds), sp = H5Dget_space(ds);
    int deflated = 0, nf = dcpl >= 0 ? H5Pget_nfilters(dcpl) : 0;
    for (int i = 0; i < nf; i++) {
        unsigned flags, cd[8];
        size_t ncd = 8;
        char name[64];
        if (H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL)
            == H5Z_FILTER_DEFLATE)
            deflated = 1;
    }
    hsize_t chunk[32], nchunks = 0;
    int nd = deflated ? H5Pget_chunk(dcpl, 32, chunk) : -1;
    size_t logical = type >= 0 ? H5Tget_size(type) : 0;
    for (int k = 0; k < nd; k++)
        logical *= (size_t)chunk[k];
    if (nd > 0 && H5Dget_num_chunks(ds, sp, &nchunks) >= 0) {
        if ((long)nchunks > s->steps)
            s->steps = (long)nchunks;
        for (hsize_t c = 0; c < nchunks && !s->failed; c++) {
            hsize_t off[32];
            unsigned mask = 0;
            haddr_t addr;
            hsize_t stored = 0;
            unsigned char *raw = NULL, *out = malloc(logical);
            uLongf len = (uLongf)logical;
            if (H5Dget_chunk_info(ds, sp, c, off, &mask, &addr, &stored) < 0 || mask != 0
                || !(raw = malloc((size_t)stored)) || !out
                || H5Dread_chunk(ds, H5P_DEFAULT, off, &mask, raw) < 0
                || uncompress(out, &len, raw, (uLong)stored) != Z_OK || len != logical
                || !add_chunk(s, out, logical)) {
                free(out);
                s->failed = 1;
            }
            free(raw);
        }
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (type >= 0)
        H5Tclose(type);
    if (dcpl >= 0)
        H5Pclose(dcpl);
}

static herr_t visit(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)info;
    hid_t o = H5Oopen(g, name, H5P_DEFAULT);
    if (o < 0)
        return 0;
    if (H5Iget_type(o) == H5I_DATASET)
        take_dataset(o, data);
    H5Oclose(o);
    return 0;
}

static int read_chunks(const char *path, chunk_set *s)
{
    memset(s, 0, sizeof *s);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return 0;
    H5Lvisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, visit, s);
    H5Fclose(f);
    return !s->failed && s->n > 0;
}

static void free_chunks(chunk_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->bytes[i]);
    free(s->bytes);
    free(s->len);
}

/* The compressors, each set up once, as a filter of ours would keep them. */
typedef struct compressors {
    z_stream zs;
    int zs_ok;
#ifdef RD_BENCH_LIBDEFLATE
    struct libdeflate_compressor *ld;
#endif
    unsigned char *out;
    size_t out_cap;
} compressors;

/* Compresses every chunk of s with method m: the CPU seconds, the bytes
 * out into *out_bytes; -1 on a failure (and when the output does not
 * inflate back to the chunk, checked with check). */
static double run_method(compressors *c, int m, const chunk_set *s, size_t *out_bytes, int check)
{
    size_t total = 0;
    double t0 = thread_cpu();
    for (size_t i = 0; i < s->n; i++) {
        size_t n = s->len[i], got = 0;
        if (m == M_ZLIB) {
            uLongf len = (uLongf)c->out_cap;
            if (compress2(c->out, &len, s->bytes[i], (uLong)n, LEVEL) != Z_OK)
                return -1;
            got = len;
        } else if (m == M_ZLIB_ONE) {
            if (deflateReset(&c->zs) != Z_OK)
                return -1;
            c->zs.next_in = s->bytes[i];
            c->zs.avail_in = (uInt)n;
            c->zs.next_out = c->out;
            c->zs.avail_out = (uInt)c->out_cap;
            if (deflate(&c->zs, Z_FINISH) != Z_STREAM_END)
                return -1;
            got = c->out_cap - c->zs.avail_out;
        } else {
#ifdef RD_BENCH_LIBDEFLATE
            got = libdeflate_zlib_compress(c->ld, s->bytes[i], n, c->out, c->out_cap);
#endif
            if (!got)
                return -1;
        }
        total += got;
        if (check) {
            unsigned char *back = malloc(n);
            uLongf blen = (uLongf)n;
            int ok = back && uncompress(back, &blen, c->out, (uLong)got) == Z_OK && blen == n
                     && !memcmp(back, s->bytes[i], n);
            free(back);
            if (!ok)
                return -1;
        }
    }
    double t = thread_cpu() - t0;
    *out_bytes = total;
    return t;
}

/* One tinygpt run; 0 on success. */
static int run_tinygpt(const char *exe, const char *args, const char *h5, const char *times)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --threads 1 %s --log-every 100000 --overwrite --out '%s'%s%s%s "
             ">/dev/null 2>&1", exe, args, h5, times ? " --step-times '" : "",
             times ? times : "", times ? "'" : "");
    return system(cmd) == 0 ? 0 : -1;
}

/* From a --step-times file: the flush CPU per step it wrote (the steps
 * that flushed but the first, over the median of the recorded ones that
 * did not) and the median recorded step's CPU. 0 when unreadable. */
static int flush_figures(const char *path, double *flush_per_step, double *step_cpu)
{
    FILE *f = fopen(path, "r");
    enum { MAX = 4096 };
    static double quiet[MAX], rec[MAX];
    double loud = 0;
    int nq = 0, nr = 0, nl = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        int step, recd, fl;
        double cpu, wall, in_rd, rd_cpu;
        if (line[0] == '#' || sscanf(line, "%d %d %lf %lf %lf %d %lf", &step, &recd, &cpu,
                                     &wall, &in_rd, &fl, &rd_cpu) != 7 || !recd || nr >= MAX)
            continue;
        rec[nr++] = cpu;
        if (step == 0)
            continue; /* creates the datasets and writes one step */
        if (fl) {
            loud += rd_cpu;
            nl++;
        } else {
            quiet[nq++] = rd_cpu;
        }
    }
    if (f)
        fclose(f);
    if (nq == 0 || nl == 0 || nr < 2)
        return 0;
    qsort(quiet, (size_t)nq, sizeof *quiet, cmp_d);
    qsort(rec, (size_t)nr, sizeof *rec, cmp_d);
    *flush_per_step = (loud - nl * quiet[nq / 2]) / (nr - 1);
    *step_cpu = rec[nr / 2];
    return 1;
}

/* Times the methods on s over reps repetitions; prints one line per
 * method; ratio[] gets zlib / libdeflate per repetition. The median zlib
 * seconds over the whole set into *zlib_s. */
static int time_set(const char *label, const chunk_set *s, int reps, double *ratio,
                    double *zlib_s)
{
    compressors c;
    memset(&c, 0, sizeof c);
    c.out_cap = compressBound((uLong)s->max_len) + 64;
    c.out = malloc(c.out_cap);
    c.zs_ok = deflateInit(&c.zs, LEVEL) == Z_OK;
    int nm = 2, ok = c.out && c.zs_ok;
#ifdef RD_BENCH_LIBDEFLATE
    c.ld = libdeflate_alloc_compressor(LEVEL);
    ok = ok && c.ld;
    nm = N_METHODS;
#endif
    double *t = calloc((size_t)reps * N_METHODS, sizeof *t), med[N_METHODS] = { 0 };
    size_t out[N_METHODS] = { 0 };
    ok = ok && t;
    for (int m = 0; ok && m < nm; m++) /* warm-up, and every output inflates back */
        ok = run_method(&c, m, s, &out[m], 1) >= 0;
    for (int r = 0; ok && r < reps; r++)
        for (int k = 0; ok && k < nm; k++) {
            int m = (k + r) % nm;
            t[m * reps + r] = run_method(&c, m, s, &out[m], 0);
            ok = t[m * reps + r] > 0;
        }
    for (int r = 0; ok && nm == N_METHODS && r < reps; r++)
        ratio[r] = t[M_ZLIB * reps + r] / t[M_LIBDEFLATE * reps + r];
    for (int m = 0; ok && m < nm; m++) {
        double *v = t + m * reps;
        qsort(v, (size_t)reps, sizeof *v, cmp_d);
        med[m] = v[reps / 2];
        printf("    %-17s %7.1f us per step [%.1f-%.1f], %5.1f MB/s, %.3f of the bytes\n",
               METHOD_NAME[m], 1e6 * med[m] / (double)s->steps, 1e6 * v[0] / (double)s->steps,
               1e6 * v[reps - 1] / (double)s->steps, 1e-6 * (double)s->total / med[m],
               (double)out[m] / (double)s->total);
    }
    if (!ok)
        printf("    %s: a compressor failed or its output did not inflate back\n", label);
    *zlib_s = med[M_ZLIB];
    free(t);
    free(c.out);
    if (c.zs_ok)
        deflateEnd(&c.zs);
#ifdef RD_BENCH_LIBDEFLATE
    if (c.ld)
        libdeflate_free_compressor(c.ld);
#endif
    return ok;
}

static double median_of(double *v, int n, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    *lo = v[0];
    *hi = v[n - 1];
    return v[n / 2];
}

void bench_deflate(const char *build_root, int quick, dfl_result *r)
{
    memset(r, 0, sizeof *r);
#ifdef RD_BENCH_LIBDEFLATE
    r->libdeflate = 1;
#endif
    char exe[600];
    snprintf(exe, sizeof exe, "%s/examples/tinygpt/tinygpt", build_root);
    printf("\n== deflate on flush: zlib against libdeflate, level %d, on the writer's chunks "
           "==\n", LEVEL);
    if (access(exe, X_OK) != 0) {
        snprintf(r->note, sizeof r->note, "%.200s not built", exe);
        printf("  not measured (%s)\n", r->note);
        return;
    }
    char dir[] = "/tmp/resdiag-bench-deflate-XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(r->note, sizeof r->note, "no temporary directory");
        return;
    }
    char h5[2][700], times[700];
    snprintf(h5[0], sizeof h5[0], "%s/e2e.h5", dir);
    snprintf(h5[1], sizeof h5[1], "%s/l12.h5", dir);
    snprintf(times, sizeof times, "%s/steps.txt", dir);
    /* the end-to-end section's run (1 flush after the first when quick, 2
     * else), then 12 layers */
    char e2e_args[256];
    snprintf(e2e_args, sizeof e2e_args, "--steps %d --record full --record-every 2 "
             "--flush-steps 16 --flush-seconds 0", quick ? 33 : 65);
    const char *args[2] = { e2e_args, "--layers 12 --d-model 32 --heads 2 --seq 16 --batch 2 "
                                      "--record full --steps 32 --flush-steps 16" };
    const char *label[2] = { "tinygpt (4 layers, d = 128, the end-to-end run)",
                             "12 layers (the chunks of a 12x768 model)" };
    int reps = quick ? 7 : 21;
    double *ratio[2] = { calloc((size_t)reps, sizeof(double)),
                         calloc((size_t)reps, sizeof(double)) };
    chunk_set s[2];
    memset(s, 0, sizeof s);
    int ok = ratio[0] && ratio[1];
    double zlib_s[2] = { 0, 0 }, lo[2] = { 0 }, hi[2] = { 0 }, med[2] = { 0 };
    for (int k = 0; ok && k < 2; k++) {
        ok = run_tinygpt(exe, args[k], h5[k], k == 0 ? times : NULL) == 0
             && read_chunks(h5[k], &s[k]);
        if (!ok) {
            snprintf(r->note, sizeof r->note, "tinygpt %.150s failed, or its file has no "
                     "deflated chunks", args[k]);
            break;
        }
        printf("  %s: %zu chunks of %zu-%zu bytes (shuffled), %ld steps\n", label[k], s[k].n,
               s[k].min_len, s[k].max_len, s[k].steps);
        ok = time_set(label[k], &s[k], reps, ratio[k], &zlib_s[k]);
        if (!ok)
            snprintf(r->note, sizeof r->note, "a compressor failed");
        else if (r->libdeflate)
            med[k] = median_of(ratio[k], reps, &lo[k], &hi[k]);
        if (ok && r->libdeflate)
            printf("    zlib / libdeflate: %.2fx [%.2f-%.2f] (median of %d interleaved "
                   "repetitions, thread CPU)\n", med[k], lo[k], hi[k], reps);
    }
    double flush = 0, step = 0;
    if (ok && !flush_figures(times, &flush, &step)) {
        ok = 0;
        snprintf(r->note, sizeof r->note, "tinygpt's --step-times unreadable");
    }
    if (ok) {
        r->valid = 1;
        r->reps = reps;
        r->ratio_med = med[0];
        r->ratio_min = lo[0];
        r->ratio_max = hi[0];
        r->zlib_step_us = 1e6 * zlib_s[0] / (double)s[0].steps;
        r->flush_step_us = 1e6 * flush;
        r->step_ms = 1e3 * step;
        printf("  tinygpt run: flush %.1f us CPU per recorded step, of which zlib %.1f us "
               "(%.0f%%); a recorded step %.1f ms CPU (median)\n", r->flush_step_us,
               r->zlib_step_us, 100.0 * r->zlib_step_us / r->flush_step_us, r->step_ms);
    } else {
        printf("  not measured (%s)\n", r->note);
    }
    for (int k = 0; k < 2; k++) {
        free_chunks(&s[k]);
        free(ratio[k]);
        remove(h5[k]);
    }
    remove(times);
    rmdir(dir);
}

void deflate_targets(const dfl_result *r, double inside, const char *load)
{
    if (!r->valid) {
        printf("info deflate-zlib-vs-libdeflate: not measured (%s)\n",
               r->note[0] ? r->note : "--no-deflate");
        return;
    }
    double zlib_share = 1e-3 * r->zlib_step_us / r->step_ms;
    char now[96] = "";
    if (!isnan(inside))
        snprintf(now, sizeof now, " (this run's tinygpt-time-in-resdiag: %.2f%%)",
                 100.0 * inside);
    if (!r->libdeflate) {
        printf("info deflate-zlib-vs-libdeflate: libdeflate not built in (libdeflate-dev not "
               "found at configure time); zlib takes %.0f%% of the flush and %.3f%% of a "
               "recorded tinygpt step%s; load %s\n", 100.0 * r->zlib_step_us / r->flush_step_us,
               100.0 * zlib_share, now, load);
        return;
    }
    double saved = zlib_share * (1.0 - 1.0 / r->ratio_med);
    printf("info deflate-zlib-vs-libdeflate: %.2fx [%.2f-%.2f] (zlib's CPU time over "
           "libdeflate's, level 1, tinygpt's chunks, median of %d); zlib takes %.0f%% of the "
           "flush and %.3f%% of a recorded step, so libdeflate would take %.3f points off "
           "tinygpt-time-in-resdiag%s; load %s\n", r->ratio_med, r->ratio_min, r->ratio_max,
           r->reps, 100.0 * r->zlib_step_us / r->flush_step_us, 100.0 * zlib_share,
           100.0 * saved, now, load);
}
