/*
 * h5_writer.h - the only writer of run files (with h5_reader.c, the only
 * files that call HDF5). It creates every object up front, starts SWMR
 * writing, and then appends batches of step records. Hooks never call it:
 * the run calls it from step_end / flush / close, in the trainer's thread.
 */
#ifndef RESDIAG_H5_WRITER_H
#define RESDIAG_H5_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "resdiag.h"

#define RD_SCHEMA_VERSION 1

typedef struct rd_writer rd_writer;

/* Everything that goes into the root attributes. Strings are copied. */
typedef struct rd_file_header {
    const resdiag_model *model;   /* validated */
    const rd_layout *layout;
    int sketch_size;
    uint64_t sketch_seed;
    int record_chunk_steps;       /* steps per append (flush_steps), >= 1: the tables'
                                     chunks hold a quarter of it, /steps at least 256 */
} rd_file_header;

/* Where an observed tensor's hook was called: one per stats slot
 * (layout->n_slots). file == NULL: never observed. */
typedef struct rd_callsite {
    const char *file;
    int line;
} rd_callsite;

/* Creates path (truncating), writes the header and every dataset, and
 * starts SWMR writing. On error returns a status and writes a one-line
 * reason (with HDF5's own message where there is one) into err. */
resdiag_status rd_writer_create(rd_writer **out, const char *path, const rd_file_header *hdr,
                                char *err, size_t errlen);

/* Appends n step records: steps (n) the trainer's step numbers, times (n)
 * seconds since the run was opened, records (n, layout->record_len), and
 * their summary (/summary, computed here with rd_layout_summarize).
 * callsites (layout->n_slots) is written too when callsites_changed.
 * Then flushes the file so that a reader (or a crash) sees all of it. */
resdiag_status rd_writer_append(rd_writer *w, const int64_t *steps, const double *times,
                                const double *records, size_t n,
                                const rd_callsite *callsites, int callsites_changed,
                                char *err, size_t errlen);

/* Closes the file. NULL is a no-op. Returns an error if the final close
 * failed (the appended steps are on disk regardless). */
resdiag_status rd_writer_close(rd_writer *w, char *err, size_t errlen);

#endif
