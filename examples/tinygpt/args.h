/*
 * args.h - tinygpt's command line: the options of a run, their defaults,
 * the checks between them, and the --help text (args.c).
 */
#ifndef TINYGPT_ARGS_H
#define TINYGPT_ARGS_H

#include <stdint.h>

#include "instrument.h"
#include "model.h"

typedef struct tg_options {
    tg_config cfg;
    int steps;
    double lr, weight_decay;
    int warmup;         /* --warmup: steps of linear warm-up to lr; 0 none */
    uint64_t seed;
    int threads;        /* 0: OpenMP's default */
    int log_every;
    const char *out;
    tg_record record;
    int record_every;
    int flush_steps;    /* 0: resdiag's default */
    double flush_seconds; /* < 0: resdiag's default */
    const char *flush_log;
    int signals;        /* 0 off, 1 raise, 2 stop */
    const char *step_times;
    int overwrite;      /* --overwrite: resdiag_options.overwrite */
    const char *declare; /* --declare: NULL, or the placement name to declare */
    int grad_accum;     /* --grad-accum: micro-batches per step */
    int hook_threads;   /* --hook-threads; -1: the OpenMP threads (1 with --hook-team on) */
    int hook_team;      /* --hook-team: hooks are team calls of the OpenMP threads */
    int file_schema;    /* --file-schema: resdiag_options.file_schema */
    int compression;    /* --compression: resdiag_options.compression */
    int resdiag_log;    /* --resdiag-log: 0 error, 1 info, 2 debug */
    const char *stop_on; /* --stop-on: NULL, or the alarms */
    /* tinygpt-mpi's faults: the rank and the step, -1 for none */
    int kill_rank, kill_step, nan_rank, nan_step;
} tg_options;

/* Fills o with the defaults, then the command line over them. Prints the
 * help and exits 0 for --help; a bad command line exits 2 (tg_die_usage). */
void tg_parse_args(tg_options *o, int argc, char **argv);

/* "tinygpt: <message>" and a pointer to --help on stderr, then exit 2. */
_Noreturn void tg_die_usage(const char *fmt, ...);

#endif /* TINYGPT_ARGS_H */
