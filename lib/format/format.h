/*
 * format.h - the names of everything in a run file, in one place: the
 * schema version, the attributes of the root and of the datasets, the HDF5
 * path of each dataset and group, and the series that are not tables. The
 * writer, the reader, the analysis and the plots all name the file's parts
 * through these (doc/FORMAT.md describes them).
 * The shape of each table is in tables.h.
 */
#ifndef RESDIAG_FORMAT_H
#define RESDIAG_FORMAT_H

/* Version of the file format: the newest this library writes (and the
 * default); a reader refuses a newer one. Schema 1: every value a float64,
 * no filters; schema 2: each field at its precision; schema 3: as 2, with
 * the block sites branch_in, out_norm_in and out_norm_out (doc/FORMAT.md). */
#define RD_SCHEMA_VERSION 3

/* The values of resdiag_placement a model may declare: UNDECLARED..NONE,
 * REORDERED and PER_SUBLAYER (8..11 are verdicts only). */
#define RD_PLACEMENT_END (RESDIAG_PLACEMENT_PER_SUBLAYER + 1)
#define RD_PLACEMENT_DECLARABLE(p)                                                          \
    ((unsigned)(p) <= RESDIAG_PLACEMENT_NONE || (p) == RESDIAG_PLACEMENT_REORDERED ||      \
     (p) == RESDIAG_PLACEMENT_PER_SUBLAYER)

/* Attributes of the root group: what the run is (doc/FORMAT.md). */
#define RD_ATTR_SCHEMA_VERSION "schema_version"
#define RD_ATTR_RESDIAG_VERSION "resdiag_version"
#define RD_ATTR_N_LAYERS "n_layers"
#define RD_ATTR_D_MODEL "d_model"
#define RD_ATTR_N_SUBLAYERS "n_sublayers"
#define RD_ATTR_BLOCK "block"
#define RD_ATTR_DECLARED_PLACEMENT "declared_placement"
#define RD_ATTR_DECLARED_MIX_LAYERS "declared_mix_layers"
#define RD_ATTR_NORM_KIND "norm_kind"
#define RD_ATTR_SHARD_COLS "shard_cols"
#define RD_ATTR_SKETCH_SIZE "sketch_size"
#define RD_ATTR_SKETCH_SEED "sketch_seed"
#define RD_ATTR_RUN_KIND "run_kind"             /* optional: absent = training */
#define RD_ATTR_HEAD_PARAM "head_param"         /* optional: the output head's model parameter */
#define RD_ATTR_RESIDUAL_PARAM "residual_param" /* optional: the layer parameter writing into
                                                   the stream (W2-like) */
#define RD_ATTR_METRIC_NAMES "metric_names"     /* optional (root and metrics/values): the
                                                   trainer's per-step metrics */
/* Provenance (root). */
/* Jobs of several ranks (doc/RANKS.md), all optional: a file without them
 * is rank 0 of 1, split "none", record_rank_every 1. */
#define RD_ATTR_RANK "rank"                           /* int64 */
#define RD_ATTR_WORLD_SIZE "world_size"               /* int64 */
#define RD_ATTR_LOCAL_RANK "local_rank"               /* int64, -1 unknown */
#define RD_ATTR_RANK_SOURCE "rank_source"             /* string: explicit, torchrun, openmpi,
                                                         pmi, slurm, single */
#define RD_ATTR_SPLIT "split"                         /* string: none, data, sequence,
                                                         tensor, pipeline */
#define RD_ATTR_SHARD_COL_OFFSET "shard_col_offset"   /* int64 */
#define RD_ATTR_LAYER_FIRST "layer_first"             /* int64 */
#define RD_ATTR_LAYER_COUNT "layer_count"             /* int64, 0 = every layer */
#define RD_ATTR_RECORD_RANK_EVERY "record_rank_every" /* int64 */
#define RD_ATTR_JOB_ID "job_id"                       /* string, "" unknown */
/* The value of RD_ATTR_SPLIT for a resdiag_split ("none", "data",
 * "sequence", "tensor", "pipeline"); NULL outside 0..RESDIAG_SPLIT_PIPELINE
 * (lib/format/ranks.c). */
const char *rd_split_name(int split);
#define RD_ATTR_CREATED_UTC "created_utc"
#define RD_ATTR_PROGRAM "program"
#define RD_ATTR_HDF5_VERSION "hdf5_version"
#define RD_ATTR_HOST "host"
/* The root's and each dataset's description. */
#define RD_ATTR_DESCRIPTION "description"

/* Labels of the axes (root and datasets: one string per index). */
#define RD_ATTR_SUBLAYER_NAMES "sublayer_names"
#define RD_ATTR_LAYER_PARAM_NAMES "layer_param_names" /* root */
#define RD_ATTR_PARAM_NAMES "param_names"             /* datasets, axis "param" */
#define RD_ATTR_MODEL_PARAM_NAMES "model_param_names"
#define RD_ATTR_SITE_NAMES "site_names"
#define RD_ATTR_MODEL_SITE_NAMES "model_site_names"
#define RD_ATTR_FIELD_NAMES "field_names"
#define RD_ATTR_FIELD_UNITS "field_units"
#define RD_ATTR_NONFINITE_FIELD_NAMES "nonfinite_field_names"
#define RD_ATTR_STATS_TABLE_NAMES "stats_table_names"
#define RD_ATTR_UPDATE_FIELD_NAMES "update_field_names"

/* Attributes of every dataset besides its description. */
#define RD_ATTR_UNITS "units"
#define RD_ATTR_AXES "axes" /* the axis names, comma-separated, step axis first */

/* The statistics tables (last axis: the fields). */
#define RD_DS_FWD_SITE_STATS "forward/site_stats"
#define RD_DS_BWD_SITE_STATS "backward/site_stats"
#define RD_DS_FWD_MODEL_STATS "forward/model_stats"
#define RD_DS_BWD_MODEL_STATS "backward/model_stats"
#define RD_DS_LAYER_PARAM_STATS "backward/param_stats"
#define RD_DS_MODEL_PARAM_STATS "backward/model_param_stats"
/* Schema 2: the integer fields of each statistics table (the real ones
 * stay in the table's own dataset). */
#define RD_DS_FWD_SITE_COUNTS "forward/site_counts"
#define RD_DS_BWD_SITE_COUNTS "backward/site_counts"
#define RD_DS_FWD_MODEL_COUNTS "forward/model_counts"
#define RD_DS_BWD_MODEL_COUNTS "backward/model_counts"
#define RD_DS_LAYER_PARAM_COUNTS "backward/param_counts"
#define RD_DS_MODEL_PARAM_COUNTS "backward/model_param_counts"
/* Where each row of a statistics table was observed ("file:line"). */
#define RD_DS_FWD_SITE_CALLSITE "forward/site_callsite"
#define RD_DS_BWD_SITE_CALLSITE "backward/site_callsite"
#define RD_DS_FWD_MODEL_CALLSITE "forward/model_callsite"
#define RD_DS_BWD_MODEL_CALLSITE "backward/model_callsite"
#define RD_DS_LAYER_PARAM_CALLSITE "backward/param_callsite"
#define RD_DS_MODEL_PARAM_CALLSITE "backward/model_param_callsite"
/* The relative update of the stream by each sublayer. */
#define RD_DS_UPDATE "forward/update"
/* Linear sketches. */
#define RD_DS_FWD_SITE_SKETCH "forward/site_sketch"
#define RD_DS_BWD_SITE_SKETCH "backward/site_sketch"
#define RD_DS_FWD_MODEL_SKETCH "forward/model_sketch"
#define RD_DS_BWD_MODEL_SKETCH "backward/model_sketch"
/* Hook calls merged into each row of a statistics table (optional). */
#define RD_DS_FWD_SITE_CALLS "forward/site_calls"
#define RD_DS_BWD_SITE_CALLS "backward/site_calls"
#define RD_DS_FWD_MODEL_CALLS "forward/model_calls"
#define RD_DS_BWD_MODEL_CALLS "backward/model_calls"
#define RD_DS_LAYER_PARAM_CALLS "backward/param_calls"
#define RD_DS_MODEL_PARAM_CALLS "backward/model_param_calls"
/* Which site's tensor each site is, when declared one (optional). */
#define RD_DS_FWD_SITE_ALIAS "forward/site_alias"
#define RD_DS_BWD_SITE_ALIAS "backward/site_alias"

/* The trainer's per-step metrics (resdiag_step_metric), optional. */
#define RD_DS_METRICS "metrics/values"

/* How each step ended (resdiag_step_abort), optional. */
#define RD_STEP_STATUS_GROUP "step_status"
#define RD_DS_STEP_ABORTED "step_status/aborted"
#define RD_DS_ABORT_REASON "step_status/abort_reason"

/* The per-step summary the writer derives from each record. */
#define RD_SUMMARY_GROUP "summary"
#define RD_DS_SUMMARY_NONFINITE "summary/nonfinite"
#define RD_DS_SUMMARY_OBSERVED "summary/observed"
#define RD_DS_SUMMARY_STREAM_NORM "summary/stream_norm"
#define RD_DS_SUMMARY_UPDATE_RATIO "summary/update_ratio"

/* The series that are not tables: the step number of each record, its
 * wall-clock time, and the trainer's key/value metadata group. */
#define RD_STEPS_NAME "steps"
#define RD_STEP_TIME_NAME "step_time"
#define RD_META_GROUP "meta"

/* HDF5 dimension scales (H5DS), one 1-D dataset per labelled axis, at the
 * root: each names the indices of its axis, and every dataset with that
 * axis has it attached (doc/FORMAT.md, "Dimension scales"). The record
 * axis of the time series has /steps as its scale. */
#define RD_SCALE_LAYER "layer"             /* int32 0..L-1; the report's k = layer + 1 */
#define RD_SCALE_SUBLAYER "sublayer"       /* strings: sublayer_names */
#define RD_SCALE_SITE "site"               /* strings: site_names */
#define RD_SCALE_MODEL_SITE "model_site"   /* strings: model_site_names */
#define RD_SCALE_PARAM "param"             /* strings: layer_param_names (P > 0) */
#define RD_SCALE_MODEL_PARAM "model_param" /* strings: model_param_names (Q > 0) */
#define RD_SCALE_FIELD "field"             /* strings: field_names (schema 1) */
/* Schema 2 and later: the field axes of a statistics table's two datasets */
#define RD_SCALE_STAT_FIELD "stat_field"   /* strings: the 12 real fields (rd_real_fields) */
#define RD_SCALE_COUNT_FIELD "count_field" /* strings: the 6 counts (rd_count_fields) */
#define RD_SCALE_UPDATE_FIELD "update_field"       /* strings: update_field_names */
#define RD_SCALE_NONFINITE_FIELD "nonfinite_field" /* strings (with /summary) */
#define RD_SCALE_STATS_TABLE "stats_table"         /* strings (with /summary) */
#define RD_SCALE_SKETCH "sketch"           /* int32 bucket 0..K-1 (K > 0) */
#define RD_SCALE_METRIC "metric"           /* strings: metric_names (with metrics) */
#define RD_SCALE_STATUS "status"             /* strings: "aborted" (with /step_status) */
#define RD_SCALE_REASON_BYTE "reason_byte"   /* int32 0..RESDIAG_MAX_ABORT_REASON-1 */
/* The label (H5DSset_label) of the first axis of every time series, the
 * name its axes attribute gives it: index i is the i-th recorded step;
 * /steps, its scale, holds each one's step number. */
#define RD_LABEL_STEP "step"
/* Room kept in a growing dataset's object header for its scale attributes
 * until they are attached (h5/scales.c); never in a finished file. */
#define RD_ATTR_SCALE_ROOM "resdiag_scale_room"

/* Fill value of /steps: step numbers are >= 0, so -1 marks a step whose
 * number never reached the disk. */
#define RD_STEP_FILL (-1)

#endif
