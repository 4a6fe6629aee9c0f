/*
 * load.h - what load.c reads into an analysis before any phase runs
 * (a->load): the run's identity, sizes, names and steps, and the step
 * and options asked for. Every other phase reads it and none writes it.
 */
#ifndef RESDIAG_ANALYSIS_LOAD_H
#define RESDIAG_ANALYSIS_LOAD_H

#include <stdint.h>

#include "resdiag.h"

typedef struct rd_load {
    int n_layers, n_sublayers, d_model, sketch_size, schema_version;
    char **sublayer_names;
    int n_layer_params;
    char **param_names;
    char *head_param_name;     /* the parameter declared the output head, NULL if none */
    int file_rank, file_world; /* the rank and world size of a file read alone (1 of 1 for
                                    one process; a merged job has ranks instead) */
    resdiag_split file_split;
    char *residual_param_name; /* the per-layer residual-write matrix (W2), NULL if none */
    resdiag_block_kind block;
    resdiag_placement declared;
    int declared_mix;
    resdiag_norm_kind norm_kind;
    resdiag_run_kind run_kind;
    char *description, *writer_version, *created, *program;
    int64_t n_steps, *steps, step_index, step;
    double max_growth; /* the option: warn above this growth */
    resdiag_file_state file_state; /* what the file says of its writer, at the analysis */
} rd_load;

#endif
