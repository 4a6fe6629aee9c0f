/*
 * reader_root.h - what the reader takes from the root of a run file: the
 * root attributes (the run's shape, its kinds, its names and roles, its
 * provenance) and the trainer's /meta, each checked against what it must
 * be before the reader opens any dataset (reader_open.c).
 */
#ifndef RESDIAG_H5_READER_ROOT_H
#define RESDIAG_H5_READER_ROOT_H

#include <hdf5.h>
#include <stddef.h>

#include "resdiag.h"

/* The strings own what info points at. */
typedef struct rd_root {
    resdiag_run_info info;    /* all but n_steps (the reader counts them) */
    char *resdiag_version, *description, *created_utc, *program, *hdf5_version;
    char **sublayer_names;
    size_t n_sublayer_names;
    char **layer_params;
    size_t n_layer_params;
    char **model_params;
    size_t n_model_params;
    char **metric_names;
    size_t n_metric_names;
    char **meta;              /* 2 * n_meta */
    size_t n_meta_strings;
    char *rank_source, *job_id;
} rd_root;

/* The largest world_size a file may declare: a reader of a merged job
 * probes one name per rank (doc/RANKS.md). */
#define RD_MAX_WORLD_SIZE 1000000

/* Reads the root attributes and /meta of file (run file path) into *r,
 * which must be zeroed. On error the status is logged; rd_root_free frees
 * what was read. */
resdiag_status rd_root_read(rd_root *r, hid_t file, const char *path);

void rd_root_free(rd_root *r);

#endif
