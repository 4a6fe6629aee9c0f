/*
 * instrument.h - tinygpt's connection to libresdiag.
 *
 * The model code (model.c) calls the HOOK_* macros below at the places where
 * a norm, a sublayer or a residual add happens. The macros pass __FILE__ and
 * __LINE__ of that place in model.c on to resdiag_observe_at(), so a verdict
 * in `resdiag report` points at the model code, not at this wrapper. All
 * resdiag calls live in instrument.c; model.c does not include resdiag.h.
 *
 * Built with -DTINYGPT_NO_HOOKS (the gradient check does that), the macros
 * expand to nothing and the model needs no libresdiag at all.
 *
 * A NULL tg_instr means "no diagnostics": every hook returns at once and
 * no resdiag function is called (--record off).
 */
#ifndef TINYGPT_INSTRUMENT_H
#define TINYGPT_INSTRUMENT_H

#include <stdint.h>

#include "kernels.h"
#include "model.h"

/* The sites of resdiag.h, with the same values (checked in instrument.c),
 * so that model.c needs no resdiag header. */
typedef enum tg_site {
    TG_STREAM_IN = 0,
    TG_NORM_IN = 1,
    TG_NORM_OUT = 2,
    TG_BRANCH_OUT = 3,
    TG_STREAM_OUT = 4,
    TG_BRANCH_IN = 5,       /* what F's first operation reads */
    TG_OUT_NORM_IN = 6,     /* what a norm on F's output reads: F's raw output */
    TG_OUT_NORM_OUT = 7,    /* that norm's output */
    TG_EMBED_OUT = 16,
    TG_FINAL_NORM_IN = 17,
    TG_FINAL_NORM_OUT = 18,
    TG_LOGITS = 19
} tg_site;

enum { TG_FWD = 0, TG_BWD = 1 };       /* = RESDIAG_FORWARD / RESDIAG_BACKWARD */
#define TG_MODEL_LEVEL (-1)             /* = RESDIAG_MODEL_LEVEL */

/* What --record asks for. */
typedef enum tg_record {
    TG_RECORD_OFF = 0,     /* no run file, no resdiag calls */
    TG_RECORD_STREAM = 1,  /* forward STREAM_OUT of each layer's last sublayer + EMBED_OUT */
    TG_RECORD_FULL = 2     /* every site forward and backward, parameter gradients */
} tg_record;

typedef struct tg_instr tg_instr; /* opaque */

typedef struct tg_instr_settings {
    const char *path;        /* the run file */
    tg_record record;        /* STREAM or FULL (OFF: do not open) */
    int64_t record_every;    /* resdiag_options.record_every */
    int n_meta;              /* free key/value pairs for the run file */
    const char *const *meta; /* (2*n_meta) */
    const char *description;
    int flush_steps;         /* resdiag_options.flush_steps; 0: the default */
    const char *flush_log;   /* NULL, or a file that gets "open" and "flushed N" lines */
    int signals;             /* 0: no handlers; 1: close and re-raise; 2: close and stop */
    int time_calls;          /* 1: add up the seconds spent in resdiag (tg_instr_last_step) */
    int overwrite;           /* resdiag_options.overwrite: replace an earlier run file */
    const char *declare;     /* NULL: declare cfg's placement; else a resdiag placement
                                name ("undeclared": nothing) to declare instead */
    int hook_threads;        /* resdiag_options.hook_threads */
    int rank;                /* this process's rank in a job of world_size ranks, given */
    int world_size;          /*   by tinygpt-mpi; world_size 0: from the environment */
    int file_schema;         /* resdiag_options.file_schema: 0 (newest), 1 or 2 */
    int compression;         /* resdiag_options.compression: 0..9 (schema 2) */
    int hook_team;           /* 1: every hook is a team call (resdiag_observe_team_at) of
                                the OpenMP threads, from a parallel region of its own */
    int log_priority;        /* resdiag's messages on stderr from: 0 errors, 1 info, 2 debug */
    const char *stop_on;     /* --stop-on: NULL, or the alarms (tg_parse_stop_on) */
    double flush_seconds;    /* resdiag_options.flush_seconds; < 0: the default */
} tg_instr_settings;

/* --stop-on LIST: comma-separated nonfinite, r>B, growth>B, grad>B into the
 * alarm fields of *o. Returns NULL, or what is wrong with LIST. */
struct resdiag_options;
const char *tg_parse_stop_on(const char *list, struct resdiag_options *o);

/* Opens the run file. Returns NULL and writes a reason to errbuf on failure. */
tg_instr *tg_instr_open(const tg_config *cfg, const tg_instr_settings *s,
                        char *errbuf, int errlen);
/* Bracket one training step (forward + backward, before the update).
 * step_end returns 1 when a signal closed the run (signals = 2) and
 * training should stop, 2 when a --stop-on alarm fired (said on stderr),
 * else 0. */
void tg_instr_step_begin(tg_instr *h, int64_t step);
int tg_instr_step_end(tg_instr *h);
/* The step's loss (the mean over its batch) and the learning rate its
 * update uses, before step_end: the run file keeps them beside the
 * statistics (resdiag_step_metric "loss" and "lr"). */
void tg_instr_metrics(tg_instr *h, double loss, double lr);
/* After step_end: whether the step just ended was recorded, the seconds
 * (CLOCK_MONOTONIC, vDSO-cheap so the timing does not cost what it
 * measures) spent inside resdiag calls since the last call of this function
 * (0 unless time_calls), whether the run file grew during the step, and
 * the CPU seconds resdiag used meanwhile: the calling thread's inside its
 * calls and those of the library's hook threads (resdiag_options.
 * hook_threads; 0 unless time_calls). NULL: 0, 0, 0, 0. For --step-times. */
void tg_instr_last_step(tg_instr *h, int *recorded, double *resdiag_s, int *flushed,
                        double *resdiag_cpu_s);
/* Flushes, closes and frees. Returns 0; 1 with a note in errbuf when
 * recording stopped for lack of space (disk full, file size limit: a state
 * of the machine, not a failure of the run); -1 with a reason in errbuf
 * for any other failure. NULL: 0. */
int tg_instr_close(tg_instr *h, char *errbuf, int errlen);

/* The hook entry points; call them through the macros. */
void tg_hook_tensor(tg_instr *h, int dir, int layer, int sublayer, tg_site site,
                    const real *x, int64_t rows, int64_t cols, const char *file, int line);
void tg_hook_param(tg_instr *h, int layer, const char *name, const real *g,
                   int64_t rows, int64_t cols, const char *file, int line);
/* A site whose tensor x is the very buffer observed last at (from_layer,
 * from_sublayer, from_site), unchanged since: recorded from that call with
 * resdiag_observe_same_as, x not read again. With the environment variable
 * TINYGPT_READ_EVERY_SITE set (not "" or "0"), x is read as any site's (to
 * compare the two). */
void tg_hook_same(tg_instr *h, int dir, int layer, int sublayer, tg_site site, const real *x,
                  int64_t rows, int64_t cols, int from_layer, int from_sublayer,
                  tg_site from_site, const char *file, int line);

#ifdef TINYGPT_NO_HOOKS
#define HOOK_FWD(h, layer, sub, site, x, rows, cols) ((void)(h))
#define HOOK_BWD(h, layer, sub, site, x, rows, cols) ((void)(h))
#define HOOK_PARAM(h, layer, name, g, rows, cols) ((void)(h))
#define HOOK_FWD_SAME(h, layer, sub, site, x, rows, cols, fl, fs, fsite) ((void)(h))
#define HOOK_BWD_SAME(h, layer, sub, site, x, rows, cols, fl, fs, fsite) ((void)(h))
#else
#define HOOK_FWD(h, layer, sub, site, x, rows, cols) \
    tg_hook_tensor((h), TG_FWD, (layer), (sub), (site), (x), (rows), (cols), __FILE__, __LINE__)
#define HOOK_BWD(h, layer, sub, site, x, rows, cols) \
    tg_hook_tensor((h), TG_BWD, (layer), (sub), (site), (x), (rows), (cols), __FILE__, __LINE__)
#define HOOK_PARAM(h, layer, name, g, rows, cols) \
    tg_hook_param((h), (layer), (name), (g), (rows), (cols), __FILE__, __LINE__)
#define HOOK_FWD_SAME(h, layer, sub, site, x, rows, cols, fl, fs, fsite)                    \
    tg_hook_same((h), TG_FWD, (layer), (sub), (site), (x), (rows), (cols), (fl), (fs), (fsite), \
                 __FILE__, __LINE__)
#define HOOK_BWD_SAME(h, layer, sub, site, x, rows, cols, fl, fs, fsite)                    \
    tg_hook_same((h), TG_BWD, (layer), (sub), (site), (x), (rows), (cols), (fl), (fs), (fsite), \
                 __FILE__, __LINE__)
#endif

#endif /* TINYGPT_INSTRUMENT_H */
