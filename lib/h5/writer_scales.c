/*
 * writer_scales.c - which scale each axis of the writer's datasets gets
 * (scales.h, doc/FORMAT.md "Dimension scales"): room kept in every growing
 * header for its scale attributes before the headers are moved into one
 * page, then, after the move, the scale datasets created and every axis
 * of every dataset attached (the field axis of a schema-2 part, which
 * holds some of the fields, to the scale of those: /stat_field or
 * /count_field).
 */
#include <stdio.h>
#include <string.h>

#include "format/format.h"
#include "format/tables.h"
#include "h5/scales.h"
#include "h5/writer_state.h"

/* The time series: /steps' dataset count as the record scale. */
static int n_time_series(const rd_writer *w)
{
    int n = 1; /* step_time */
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++)
            n += w->part[i][p].ds >= 0;
    for (int i = 0; i < RD_N_SUMMARY; i++)
        n += w->summary_ds[i] >= 0;
    return n;
}

/* Room in each growing header for its scale attributes (scales.h), before
 * the headers are moved into one page. */
int rd_writer_make_scale_room(rd_writer *w, werr *e)
{
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++)
            if (w->part[i][p].ds >= 0
                && !rd_scales_make_room(w->part[i][p].ds, w->lay.tables[i].rank + 1, 0,
                                        &e->h5)) {
                e->object = w->part[i][p].name;
                return 0;
            }
    for (int i = 0; i < RD_N_SUMMARY; i++)
        if (w->summary_ds[i] >= 0
            && !rd_scales_make_room(w->summary_ds[i], w->lay.summary[i].rank + 1, 0, &e->h5)) {
            e->object = w->lay.summary[i].name;
            return 0;
        }
    e->object = RD_STEP_TIME_NAME;
    if (!rd_scales_make_room(w->time_ds, 1, 0, &e->h5))
        return 0;
    e->object = RD_STEPS_NAME;
    if (!rd_scales_make_room(w->steps_ds, 1, n_time_series(w), &e->h5))
        return 0;
    e->object = NULL;
    return 1;
}

/* Table i's call sites get the table's axes without the record and the
 * field axis. */
static int attach_callsite_scales(rd_writer *w, hid_t file, int i, werr *e)
{
    char axes[128];
    const char *first = strchr(w->lay.tables[i].axes, ',');
    snprintf(axes, sizeof axes, "%s", first ? first + 1 : "");
    char *comma = strrchr(axes, ',');
    if (comma)
        *comma = '\0';
    e->object = w->lay.tables[i].callsite_name;
    return rd_scales_attach(file, w->callsite_ds[i], axes, &e->h5);
}

/* The scale datasets, and every dataset's axes attached to them; after the
 * headers were moved (a move would leave the references behind). */
int rd_writer_attach_scales(rd_writer *w, hid_t file, const rd_file_header *hdr, werr *e)
{
    if (!rd_scales_create(file, hdr->model, hdr->sketch_size, hdr->tables->n_block_sites,
                          w->schema >= 2, w->summary_ds[0] >= 0, &e->h5, &e->object))
        return 0;
    e->object = RD_STEPS_NAME;
    if (!rd_scales_set_record_scale(w->steps_ds, &e->h5))
        return 0;
    e->object = RD_STEP_TIME_NAME;
    if (!rd_scales_attach(file, w->time_ds, "step", &e->h5))
        return 0;
    for (int i = 0; i < RD_N_TABLES; i++) {
        for (int p = 0; p < MAX_PARTS; p++) {
            const table_part *pt = &w->part[i][p];
            if (pt->ds < 0)
                continue;
            /* A part with some of the fields gets the scale of those on its
             * field axis (labelled "field" still, as its axes attribute). */
            char axes[128];
            snprintf(axes, sizeof axes, "%s", w->lay.tables[i].axes);
            char *last = strrchr(axes, ',');
            if (pt->map && last)
                snprintf(last, sizeof axes - (size_t)(last - axes), ",%s",
                         pt->ft == RD_FT_COUNT ? "count_field" : "stat_field");
            e->object = pt->name;
            if (!rd_scales_attach(file, pt->ds, axes, &e->h5))
                return 0;
        }
        if (w->part[i][0].ds < 0)
            continue;
        if (w->callsite_ds[i] >= 0 && !attach_callsite_scales(w, file, i, e))
            return 0;
    }
    for (int i = 0; i < RD_N_SUMMARY; i++) {
        e->object = w->lay.summary[i].name;
        if (w->summary_ds[i] >= 0
            && !rd_scales_attach(file, w->summary_ds[i], w->lay.summary[i].axes, &e->h5))
            return 0;
    }
    e->object = NULL;
    return 1;
}
