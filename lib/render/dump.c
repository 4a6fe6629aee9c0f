/*
 * dump.c - what a run file holds, step by step, as text
 * (resdiag_reader_dump in resdiag.h): the model and provenance, then per
 * step every observed site, the update ratios and the parameter gradients.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

#include "common/escape.h"
#include "common/log.h"
#include "common/sized_struct.h"
#include "format/format.h"
#include "h5/reader.h"
#include "render/ranks.h"

static void print_value(FILE *out, double v, int width)
{
    if (isnan(v))
        fprintf(out, " %*s", width, "-");
    else
        fprintf(out, " %*.*g", width, width > 9 ? 6 : 5, v);
}

/* dump prints the run file's strings (names, description, metadata, call
 * sites, provenance) through the text escaper (escape.h): a file cannot
 * write lines or terminal controls of its own. print_site_row gives 1 with
 * a row printed, 0 for a site not observed, -1 when it cannot be read
 * (logged). */
static int print_site_row(FILE *out, rd_esc_ring *esc, const resdiag_reader *rd, int64_t si,
                          resdiag_direction dir, int layer, int sub, resdiag_site site,
                          const char *label)
{
    double f[RESDIAG_N_FIELDS];
    int observed = 0;
    if (resdiag_reader_site(rd, si, dir, layer, sub, site, f, &observed) != RESDIAG_OK)
        return -1;
    if (!observed)
        return 0;
    fprintf(out, "  %-22s %-14s", rd_esc_text(esc, label), resdiag_site_name(site));
    fprintf(out, " %7.0f", f[RESDIAG_FIELD_ROWS]);
    print_value(out, f[RESDIAG_FIELD_FROB], 11);
    print_value(out, f[RESDIAG_FIELD_TOK_NORM_MEAN], 11);
    print_value(out, f[RESDIAG_FIELD_TOK_NORM_STD], 10);
    print_value(out, f[RESDIAG_FIELD_TOK_RMS_MEAN], 10);
    print_value(out, f[RESDIAG_FIELD_TOK_MEAN_MEAN], 10);
    print_value(out, f[RESDIAG_FIELD_ABSMAX], 10);
    fprintf(out, " %5.0f", isnan(f[RESDIAG_FIELD_ABSMAX_COL]) ? -1 : f[RESDIAG_FIELD_ABSMAX_COL]);
    fprintf(out, " %5.0f %5.0f %4.0f  %s\n", f[RESDIAG_FIELD_NAN_COUNT], f[RESDIAG_FIELD_INF_COUNT],
            f[RESDIAG_FIELD_CALL_SEQ],
            rd_esc_text(esc, resdiag_reader_callsite(rd, dir, layer, sub, site)));
    return 1;
}

/* 0, or -1 at the first value that cannot be read (logged). stored 0: no
 * table stores anything of the step (only the headers are printed). */
static int dump_step(FILE *out, rd_esc_ring *esc, const resdiag_reader *rd, int64_t si,
                     int64_t step, int stored)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    fprintf(out, "\nstep %lld (record %lld of %lld)\n", (long long)step, (long long)si + 1,
            (long long)in->n_steps);
    fprintf(out, "  %-22s %-14s %7s %11s %11s %10s %10s %10s %10s %5s %5s %5s %4s  %s\n", "where",
            "site", "tokens", "||x||_F", "tok_norm", "tok_sd", "tok_rms", "tok_mean", "absmax",
            "col", "nan", "inf", "seq", "call site");
    if (!stored)
        return 0;
    for (int dir = 0; dir < 2; dir++) {
        const char *dname = dir == RESDIAG_FORWARD ? "fwd" : "grad";
        char label[96];
        for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++) {
            snprintf(label, sizeof label, "%s model", dname);
            if (print_site_row(out, esc, rd, si, (resdiag_direction)dir, 0, 0,
                               (resdiag_site)(RESDIAG_EMBED_OUT + m), label) < 0)
                return -1;
        }
        for (int l = 0; l < in->n_layers; l++)
            for (int s = 0; s < in->n_sublayers; s++)
                for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                    snprintf(label, sizeof label, "%s L%d %s", dname, l, in->sublayer_names[s]);
                    if (print_site_row(out, esc, rd, si, (resdiag_direction)dir, l, s,
                                       (resdiag_site)site, label) < 0)
                        return -1;
                }
    }
    int header = 0;
    for (int l = 0; l < in->n_layers; l++)
        for (int s = 0; s < in->n_sublayers; s++) {
            double u[RESDIAG_N_UPDATE_FIELDS];
            if (resdiag_reader_update(rd, si, l, s, u) != RESDIAG_OK)
                return -1;
            if (isnan(u[0]))
                continue;
            if (!header++)
                fprintf(out, "  update ratio r = ||dx||/||x||:  %-16s %12s %14s\n", "where",
                        "frobenius", "mean per token");
            fprintf(out, "  %32s  L%-3d %-11s %12.6g %14.6g\n", "", l,
                    rd_esc_text(esc, in->sublayer_names[s]), u[0], u[1]);
        }
    header = 0;
    for (int l = -1; l < in->n_layers; l++) {
        int np = l < 0 ? in->n_model_params : in->n_layer_params;
        const char *const *names = l < 0 ? in->model_param_names : in->layer_param_names;
        for (int p = 0; p < np; p++) {
            double f[RESDIAG_N_FIELDS];
            int observed = 0;
            if (resdiag_reader_param(rd, si, l < 0 ? RESDIAG_MODEL_LEVEL : l, names[p], f,
                                     &observed) != RESDIAG_OK)
                return -1;
            if (!observed)
                continue;
            if (!header++)
                fprintf(out, "  parameter gradients:  %-20s %12s %12s %6s %6s\n", "where",
                        "||g||_F", "absmax", "nan", "inf");
            char where[96];
            if (l < 0)
                snprintf(where, sizeof where, "model %s", names[p]);
            else
                snprintf(where, sizeof where, "L%d %s", l, names[p]);
            fprintf(out, "  %22s %-20s %12.6g %12.6g %6.0f %6.0f\n", "", rd_esc_text(esc, where),
                    f[RESDIAG_FIELD_FROB], f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_NAN_COUNT],
                    f[RESDIAG_FIELD_INF_COUNT]);
        }
    }
    return 0;
}

static void dump_header(FILE *out, rd_esc_ring *esc, const char *path,
                        const resdiag_run_info *in, const int64_t *steps)
{
    fprintf(out, "%s: resdiag run file, schema %d, written by resdiag %s with HDF5 %s\n",
            rd_esc_text(esc, path), in->schema_version, rd_esc_text(esc, in->resdiag_version),
            rd_esc_text(esc, in->hdf5_version));
    fprintf(out, "  created %s by %s\n", rd_esc_text(esc, in->created_utc),
            rd_esc_text(esc, in->program));
    if (in->description[0])
        fprintf(out, "  description: %s\n", rd_esc_text(esc, in->description));
    fprintf(out, "  model: %d layers, d_model %d, %s block of", in->n_layers, in->d_model,
            in->block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential");
    for (int s = 0; s < in->n_sublayers; s++)
        fprintf(out, " %s", rd_esc_text(esc, in->sublayer_names[s]));
    fprintf(out, "\n  declared: placement %s", resdiag_placement_name(in->declared_placement));
    if (in->declared_placement == RESDIAG_PLACEMENT_MIXED)
        fprintf(out, " (post-norm in layers 0..%d)", in->declared_mix_layers - 1);
    fprintf(out, ", norm %s", resdiag_norm_kind_name(in->norm_kind));
    if (in->shard_cols)
        fprintf(out, ", shard width %d", in->shard_cols);
    fprintf(out, "\n  sketch: %d projections (seed %llu)\n", in->sketch_size,
            (unsigned long long)in->sketch_seed);
    const char *split = rd_ranks_split_name(in->split);
    if (in->world_size > 1 && in->n_ranks_merged > 1)
        fprintf(out, "  job: %d ranks, %s split; the files of %d of them merged\n",
                in->world_size, split, in->n_ranks_merged);
    else if (in->world_size > 1)
        fprintf(out, "  job: rank %d of %d, %s split (rank from %s)\n", in->rank, in->world_size,
                split, rd_esc_text(esc, in->rank_source));
    for (int i = 0; i < in->n_meta; i++)
        fprintf(out, "  meta %s = %s\n", rd_esc_text(esc, in->meta[2 * i]),
                rd_esc_text(esc, in->meta[2 * i + 1]));
    if (in->n_steps > 0)
        fprintf(out, "  recorded: %lld steps, step %lld .. %lld\n", (long long)in->n_steps,
                (long long)steps[0], (long long)steps[in->n_steps - 1]);
    else
        fprintf(out, "  recorded: no steps\n");
}

void resdiag_dump_options_init(resdiag_dump_options *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
    options->n_steps = 1;
}

/* The steps first .. last-1 after the header into out; 0, or -1 at the
 * first value that cannot be read (logged). */
static int dump_steps(FILE *out, rd_esc_ring *esc, const resdiag_reader *rd, const char *name,
                      const int64_t *steps, int64_t first, int64_t last)
{
    /* the tables dump_step reads: a step none of them stores costs no
     * reads (a run can declare far more than it holds) */
    static const char *const tables[] = {
        RD_DS_FWD_SITE_STATS, RD_DS_BWD_SITE_STATS,    RD_DS_FWD_MODEL_STATS,
        RD_DS_BWD_MODEL_STATS, RD_DS_UPDATE, RD_DS_LAYER_PARAM_STATS,
        RD_DS_MODEL_PARAM_STATS };
    enum { N_TABLES = sizeof tables / sizeof tables[0] };
    rd_stored_cursor cur[N_TABLES];
    for (int t = 0; t < N_TABLES; t++)
        rd_stored_init(rd, &cur[t], tables[t]);
    dump_header(out, esc, name, resdiag_reader_info(rd), steps);
    for (int64_t si = first; si < last; si++) {
        int stored = 0;
        int64_t next;
        for (int t = 0; t < N_TABLES; t++)
            stored |= rd_stored_at(rd, &cur[t], si, &next);
        if (dump_step(out, esc, rd, si, steps[si], stored) != 0)
            return -1;
    }
    return 0;
}

resdiag_status resdiag_reader_dump(const resdiag_reader *rd, const resdiag_dump_options *options,
                                   char **text)
{
    static const char fn[] = "resdiag_reader_dump";
    resdiag_dump_options o;
    resdiag_dump_options_init(&o);
    if (text)
        *text = NULL;
    if (!rd || !text) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: %s is NULL", fn,
               rd ? "text" : "the reader");
        return RESDIAG_E_NULL;
    }
    if (options && rd_copy_sized(&o, sizeof o, options, options->struct_size, 0) != 0) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: options.struct_size %zu "
               "(call resdiag_dump_options_init)", fn, options->struct_size);
        return RESDIAG_E_INVALID;
    }
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int64_t n = in->n_steps;
    if (o.first_index < 0 || (o.first_index >= n && n > 0) || o.n_steps < -1) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "client bug: %s: steps from index %lld (%lld of "
               "them) in a run of %lld", fn, (long long)o.first_index, (long long)o.n_steps,
               (long long)n);
        return RESDIAG_E_RANGE;
    }
    int64_t first = n > 0 ? o.first_index : 0;
    int64_t last = o.n_steps < 0 || o.n_steps > n - first ? n : first + o.n_steps;
    int64_t *steps = calloc(n > 0 ? (size_t)n : 1, sizeof *steps);
    if (!steps) {
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: out of memory", fn);
        return RESDIAG_E_NOMEM;
    }
    resdiag_status st = n > 0 ? resdiag_reader_steps(rd, steps, n) : RESDIAG_OK;
    /* Into memory first: a value that cannot be read half-way through gives
     * no text at all. */
    size_t len = 0;
    FILE *mem = st == RESDIAG_OK ? open_memstream(text, &len) : NULL;
    if (st == RESDIAG_OK && !mem)
        st = RESDIAG_E_NOMEM;
    if (mem) {
        rd_esc_ring esc = { 0 };
        if (dump_steps(mem, &esc, rd, o.run_name ? o.run_name : "run", steps, first, last) != 0)
            st = RESDIAG_E_FORMAT;
        rd_esc_ring_free(&esc);
        if (fclose(mem) != 0 && st == RESDIAG_OK)
            st = RESDIAG_E_NOMEM;
    }
    if (st == RESDIAG_E_NOMEM)
        rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s: out of memory", fn);
    if (st != RESDIAG_OK) {
        free(*text);
        *text = NULL;
    }
    free(steps);
    return st;
}
