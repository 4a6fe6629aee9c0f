/*
 * deflate.h - the benchmark's deflate figures (deflate.c): zlib's
 * compress2, which HDF5's deflate filter calls for every chunk the writer
 * flushes, against libdeflate on the same chunk bytes, and the share of the
 * flush and of a recorded tinygpt step that deflate takes.
 */
#ifndef RD_BENCH_DEFLATE_H
#define RD_BENCH_DEFLATE_H

typedef struct dfl_result {
    int valid;
    int libdeflate;              /* built with libdeflate */
    double ratio_med, ratio_min, ratio_max; /* zlib CPU time / libdeflate's, per repetition */
    int reps;
    double zlib_step_us;         /* zlib per recorded step of the tinygpt run */
    double flush_step_us;        /* the flush per recorded step, same run */
    double step_ms;              /* CPU of a recorded step (median), same run */
    char note[256];              /* why not measured */
} dfl_result;

/* Runs tinygpt (build_root) as the end-to-end section does and with 12
 * layers, takes the chunks its files hold, and times both compressors on
 * them (quick: shorter runs, fewer repetitions); prints a line per set. */
void bench_deflate(const char *build_root, int quick, dfl_result *r);

/* The informational line deflate-zlib-vs-libdeflate; inside: the
 * tinygpt-time-in-resdiag figure of this run (NAN: not measured); load:
 * the load average to print beside it. */
void deflate_targets(const dfl_result *r, double inside, const char *load);

#endif
