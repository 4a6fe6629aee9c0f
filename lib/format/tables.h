/*
 * tables.h - the shape of one step's record, shared by the run (which fills
 * it), the HDF5 writer (which appends it) and the reader (which finds things
 * in it). A record is one flat array of doubles made of "tables"; each table
 * becomes one HDF5 dataset whose first axis is the step.
 *
 * Dimension names: L = layers, S = sublayers, B = block sites (8; 5 before schema 3),
 * M = model sites (4), P = per-layer parameters, Q = model parameters,
 * F = RESDIAG_N_FIELDS, U = RESDIAG_N_UPDATE_FIELDS, K = sketch size.
 */
#ifndef RESDIAG_FORMAT_TABLES_H
#define RESDIAG_FORMAT_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "resdiag.h"

enum rd_table_id {
    RD_T_FWD_SITE = 0,       /* forward/site_stats    (L, S, B, F) */
    RD_T_BWD_SITE,           /* backward/site_stats   (L, S, B, F) */
    RD_T_FWD_MODEL,          /* forward/model_stats   (M, F) */
    RD_T_BWD_MODEL,          /* backward/model_stats  (M, F) */
    RD_T_LAYER_PARAM,        /* backward/param_stats  (L, P, F) */
    RD_T_MODEL_PARAM,        /* backward/model_param_stats (Q, F) */
    RD_T_UPDATE,             /* forward/update        (L, S, U) */
    RD_T_FWD_SITE_SKETCH,    /* forward/site_sketch   (L, S, B, K) */
    RD_T_BWD_SITE_SKETCH,    /* backward/site_sketch  (L, S, B, K) */
    RD_T_FWD_MODEL_SKETCH,   /* forward/model_sketch  (M, K) */
    RD_T_BWD_MODEL_SKETCH,   /* backward/model_sketch (M, K) */
    /* Hook calls merged into each slot of the STATS tables, in their order
     * (RD_T_FWD_SITE_CALLS + i counts the calls of STATS table i). Files
     * of resdiag before 0.2 lack them. */
    RD_T_FWD_SITE_CALLS,     /* forward/site_calls    (L, S, B) */
    RD_T_BWD_SITE_CALLS,     /* backward/site_calls   (L, S, B) */
    RD_T_FWD_MODEL_CALLS,    /* forward/model_calls   (M) */
    RD_T_BWD_MODEL_CALLS,    /* backward/model_calls  (M) */
    RD_T_LAYER_PARAM_CALLS,  /* backward/param_calls  (L, P) */
    RD_T_MODEL_PARAM_CALLS,  /* backward/model_param_calls (Q) */
    RD_T_FWD_ALIAS,          /* forward/site_alias    (L, S, B), optional in a file */
    RD_T_BWD_ALIAS,          /* backward/site_alias   (L, S, B), optional in a file */
    RD_T_METRICS,            /* metrics/values        (N): the trainer's metrics, optional;
                                absent (count 0) when the model declares none */
    /* How each step ended (resdiag_step_abort), optional in a file: files
     * written before them read as every step complete. */
    RD_T_STEP_ABORTED,       /* step_status/aborted      (1): 1 aborted, 0 complete */
    RD_T_ABORT_REASON,       /* step_status/abort_reason (R): the reason's UTF-8 bytes,
                                NUL-padded (R = RESDIAG_MAX_ABORT_REASON) */
    RD_N_TABLES
};

enum rd_table_kind {
    RD_KIND_STATS = 0,   /* last axis = fields; has a callsite dataset */
    RD_KIND_SKETCH = 1,  /* last axis = sketch */
    RD_KIND_UPDATE = 2,  /* last axis = update fields */
    RD_KIND_CALLS = 3,   /* one count per slot of a STATS table; optional in a file */
    RD_KIND_ALIAS = 4,   /* last axis = sites: which site's tensor each one is (NaN: its own) */
    RD_KIND_METRIC = 5,  /* last axis = the declared metrics (NaN: not given at the step) */
    RD_KIND_FLAG = 6,    /* one 0/1 value per step (NaN: not written) */
    RD_KIND_TEXT = 7     /* last axis = the bytes of a string, NUL-padded (NaN: 0) */
};
/* A table of this id may be missing from a file (written before it was
 * added): the reader reads it as all NaN. */
#define RD_TABLE_OPTIONAL(id) \
    (((id) >= RD_T_FWD_SITE_CALLS && (id) <= RD_T_MODEL_PARAM_CALLS) || (id) == RD_T_FWD_ALIAS \
     || (id) == RD_T_BWD_ALIAS || (id) == RD_T_METRICS || (id) == RD_T_STEP_ABORTED           \
     || (id) == RD_T_ABORT_REASON)

#define RD_MAX_RANK 4        /* axes after the step axis */
#define RD_CALLSITE_LEN 128  /* bytes of a "file:line" string, with the NUL */

typedef struct rd_table {
    const char *name;         /* HDF5 path, e.g. "forward/site_stats" */
    const char *callsite_name;/* e.g. "forward/site_callsite", NULL if none */
    const char *counts_name;  /* STATS tables in schema 2: the dataset of the integer
                                 fields, e.g. "forward/site_counts"; else NULL */
    const char *axes;         /* comma-separated axis names, step first */
    const char *description;
    const char *units;
    enum rd_table_kind kind;
    int rank;                 /* axes after step */
    int64_t dims[RD_MAX_RANK];
    size_t offset;            /* first double of this table in the record */
    size_t count;             /* doubles in one step; 0 = table absent */
    size_t slot_offset;       /* for STATS tables: first callsite slot */
} rd_table;

/* The per-step summary (group /summary, doc/FORMAT.md): a few numbers per
 * step and layer, derived from the step's record by the writer, so that a
 * reader can scan a long run without reading its full tables. */
enum rd_summary_id {
    RD_S_NONFINITE = 0,  /* summary/nonfinite    (3): nan, inf, records */
    RD_S_OBSERVED,       /* summary/observed     (6): observed rows per stats table */
    RD_S_STREAM_NORM,    /* summary/stream_norm  (L) */
    RD_S_UPDATE_RATIO,   /* summary/update_ratio (L, S) */
    RD_N_SUMMARY
};
/* Columns of summary/nonfinite. */
enum { RD_SUM_NAN = 0, RD_SUM_INF = 1, RD_SUM_RECORDS = 2, RD_SUM_NF_COLS = 3 };
/* Columns of summary/observed: the STATS tables RD_T_FWD_SITE..RD_T_MODEL_PARAM. */
#define RD_SUM_OBS_COLS 6
#define RD_SUMMARY_GROUP "summary"

typedef struct rd_tables {
    int n_layers, n_sublayers, n_layer_params, n_model_params, sketch_size, n_metrics;
    int n_block_sites;  /* B: 8 from schema 3, 5 in files of schema 1 and 2 */
    rd_table tables[RD_N_TABLES];
    size_t record_len;  /* doubles per step record */
    size_t n_slots;     /* stats slots (= callsite entries) over all STATS tables */
    rd_table summary[RD_N_SUMMARY]; /* offsets into a summary record */
    size_t summary_len; /* doubles per step summary */
} rd_tables;

/* Fills *lay for these sizes. All sizes must already be validated (>= 0,
 * L and S >= 1); n_block_sites is rd_block_sites(schema). */
void rd_tables_init(rd_tables *lay, int n_layers, int n_sublayers, int n_layer_params,
                    int n_model_params, int sketch_size, int n_block_sites);

/* The block sites a file of this schema holds: RESDIAG_N_BLOCK_SITES from
 * schema 3, the first RD_OLD_BLOCK_SITES (stream_in..stream_out) before. */
#define RD_OLD_BLOCK_SITES 5
int rd_block_sites(int schema_version);

/* Gives *lay the metrics table for n_metrics metrics (0: none, the table
 * stays absent). Its values go at the end of the record, so no other
 * offset moves; call it once, right after rd_tables_init. */
void rd_tables_set_metrics(rd_tables *lay, int n_metrics);

/* Index of a model site (RESDIAG_EMBED_OUT..RESDIAG_LOGITS) in 0..M-1, or -1. */
int rd_model_site_index(resdiag_site site);

/* Slot (row of F fields, or of K sketch values) of a site, within its table:
 * returns the table id through *table and the slot index inside it.
 * The caller has validated layer/sublayer/site. */
void rd_tables_site_slot(const rd_tables *lay, resdiag_direction dir, int layer, int sublayer,
                         resdiag_site site, int sketch, int *table, size_t *slot);

/* Schema 2 stores a STATS table's fields in two datasets: the real-valued
 * ones (float32, in field order) in the table's own dataset, the integer
 * ones (int64) in its counts_name dataset. rd_real_fields[k] is the field
 * at index k of the first, rd_count_fields[k] of the second. */
#define RD_N_REAL_FIELDS 12
#define RD_N_COUNT_FIELDS 6
extern const int rd_real_fields[RD_N_REAL_FIELDS];
extern const int rd_count_fields[RD_N_COUNT_FIELDS];

/* Offset in the record of slot `slot` of table `table`. */
static inline size_t rd_tables_offset(const rd_tables *lay, int table, size_t slot)
{
    const rd_table *t = &lay->tables[table];
    return t->offset + slot * (size_t)t->dims[t->rank - 1];
}

/* Offset in the record of the call count of slot `slot` of STATS table
 * `table` (RD_T_FWD_SITE..RD_T_MODEL_PARAM). */
static inline size_t rd_tables_calls_offset(const rd_tables *lay, int table, size_t slot)
{
    return lay->tables[RD_T_FWD_SITE_CALLS + (table - RD_T_FWD_SITE)].offset + slot;
}

/* Fills out (lay->summary_len) with the summary of one step record: see
 * doc/FORMAT.md, group /summary. */
void rd_tables_summarize(const rd_tables *lay, const double *record, double *out);

/* Labels of the columns of summary/nonfinite and summary/observed. */
const char *rd_summary_nonfinite_label(int col);
const char *rd_summary_observed_label(int col);

/* Label of an update field ("ratio_frob", ...), for attributes; field
 * labels and site labels are resdiag_field_name and resdiag_site_name. */
const char *rd_update_label(int field);

/* The step status of a record (RD_T_STEP_ABORTED, RD_T_ABORT_REASON):
 * rd_tables_set_aborted marks the record aborted with reason (NULL: none;
 * at most RESDIAG_MAX_ABORT_REASON - 1 bytes are kept, the caller cuts it);
 * rd_tables_set_complete marks it complete unless it is marked aborted. */
void rd_tables_set_aborted(const rd_tables *lay, double *record, const char *reason);
void rd_tables_set_complete(const rd_tables *lay, double *record);
/* The reason bytes of a record's table (RESDIAG_MAX_ABORT_REASON values, as
 * read back) as a string into out (out_len >= 1): up to the first NUL,
 * a value that is no byte 1..255 ends it too. */
void rd_tables_abort_reason(const double *bytes, char *out, size_t out_len);

#endif
