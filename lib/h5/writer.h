/*
 * writer.h - the only writer of run files (writer_create.c,
 * writer_append.c, writer_close.c and the files they share
 * writer_state.h with). It creates every object up front (in a path that
 * run_file_guard.c claimed), starts SWMR writing, and then appends batches
 * of step records. Hooks never call it: the run calls it from step_end /
 * flush / close, in the trainer's thread.
 */
#ifndef RESDIAG_H5_WRITER_H
#define RESDIAG_H5_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "format/tables.h"
#include "resdiag.h"

typedef struct rd_writer rd_writer;

/* Which rank of its job wrote the file (the root's rank attributes,
 * doc/FORMAT.md); strings are copied. */
typedef struct rd_rank_attrs {
    int rank, world_size;
    int local_rank;            /* -1: unknown */
    const char *rank_source;   /* "explicit", "torchrun", "openmpi", "pmi", "slurm", "single" */
    const char *split;         /* rd_split_name() */
    int shard_col_offset, layer_first, layer_count, record_rank_every;
    const char *job_id;        /* "" when unknown */
} rd_rank_attrs;

/* Everything that goes into the root attributes (strings are copied), and
 * what creating the file may replace. */
typedef struct rd_file_header {
    const resdiag_model *model;   /* validated */
    const rd_tables *tables;
    int sketch_size;
    uint64_t sketch_seed;
    int record_chunk_steps;       /* steps per append (flush_steps), >= 1: the tables'
                                     chunks hold a quarter of it (one step with
                                     compression), /steps at least 256 */
    int overwrite;                /* 1: an existing resdiag run file at the path is replaced */
    const rd_rank_attrs *ranks;   /* NULL: rank 0 of 1, split none, source "single" */
    int file_schema;              /* 1 or 2; 0 = the newest, RD_SCHEMA_VERSION (doc/FORMAT.md) */
    int compression;              /* schema 2: 0 no filters, 1..9 shuffle + deflate level */
} rd_file_header;

/* With compression, a table dataset is deflated only if one step of it
 * takes at least this many bytes in the file (its shape after the step
 * axis times its type's size); smaller ones are stored without filters
 * (doc/FORMAT.md, "Filters"). */
#define RD_FILTER_MIN_STEP_BYTES 1024

/* Where an observed tensor's hook was called: one per stats slot
 * (tables->n_slots). file == NULL: never observed. */
typedef struct rd_callsite {
    const char *file;
    int line;
} rd_callsite;

/* Creates path, writes the header and every dataset, and starts SWMR
 * writing. The path must not exist, or with hdr->overwrite be a resdiag
 * run file that no other writer has open (run_file_guard.h: anything else
 * is RESDIAG_E_EXISTS or RESDIAG_E_LOCKED); the writer keeps it locked
 * until rd_writer_close. On error returns a status and writes a one-line
 * reason (with HDF5's own message where there is one) into err; a file
 * this call created is removed again, nothing else is. */
/* Tests only: when set, called after the path is claimed and before HDF5
 * creates the file (to change the path under the writer). */
extern void (*rd_h5_writer_before_create)(const char *path);

resdiag_status rd_writer_create(rd_writer **out, const char *path, const rd_file_header *hdr,
                                char *err, size_t errlen);

/* Appends n step records: steps (n) the trainer's step numbers, times (n)
 * seconds since the run was opened, records (n, tables->record_len), and
 * their summary (/summary, computed here with rd_tables_summarize).
 * callsites (tables->n_slots) is written too when callsites_changed.
 * Then flushes the file so that a reader (or a crash) sees all of it. */
resdiag_status rd_writer_append(rd_writer *w, const int64_t *steps, const double *times,
                                const double *records, size_t n,
                                const rd_callsite *callsites, int callsites_changed,
                                char *err, size_t errlen);

/* Closes the file. NULL is a no-op. Returns an error if the final close
 * failed (the appended steps are on disk regardless). */
resdiag_status rd_writer_close(rd_writer *w, char *err, size_t errlen);

#endif
