/*
 * scales.h - the HDF5 dimension scales of a run file (scales.c,
 * doc/FORMAT.md "Dimension scales"): one scale dataset per labelled axis,
 * attached with a label to every axis of every dataset, so that h5py,
 * xarray and HDFView name the axes. The writer calls these while it
 * creates the file, before SWMR writing starts.
 */
#ifndef RESDIAG_H5_SCALES_H
#define RESDIAG_H5_SCALES_H

#include <hdf5.h>

#include "format/tables.h"
#include "h5/common.h"
#include "resdiag.h"

/* Creates the scale datasets that the run's axes need (format.h
 * RD_SCALE_*), with their values and attributes (the block-site axis of
 * n_block_sites). split_fields: the statistics tables are split in two
 * datasets (schema 2 and later), whose field axes get /stat_field and
 * /count_field instead of /field. with_summary: the
 * /summary axes too. 0 with HDF5's error in *e and the dataset in *object
 * when a call failed. */
int rd_scales_create(hid_t file, const resdiag_model *m, int sketch_size, int n_block_sites,
                     int split_fields, int with_summary, rd_h5_error *e,
                     const char **object);

/* Keeps room in the object header of the growing dataset ds for the
 * scale attributes it will get: a placeholder attribute, sized for a
 * dataset of `rank` axes (step included) or, with n_refs > 0, for the
 * record scale /steps referred to by n_refs datasets. Called before the
 * header is moved into one page, so that attaching later grows no header. */
int rd_scales_make_room(hid_t ds, int rank, int n_refs, rd_h5_error *e);

/* Makes the growing dataset steps the scale of the record axis (it gives
 * up its room first). */
int rd_scales_set_record_scale(hid_t steps, rd_h5_error *e);

/* Attaches to each axis of ds, named in the comma-separated `axes` (as the
 * dataset's axes attribute), its scale and label; the axis "step" gets
 * /steps (label "step"), the axes "stat_field" and "count_field" (the
 * field axis of a split table's two datasets) /stat_field and
 * /count_field (label "field"). Gives up ds's room first, if it has one. */
int rd_scales_attach(hid_t file, hid_t ds, const char *axes, rd_h5_error *e);

#endif
