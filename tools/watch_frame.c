/*
 * watch_frame.c - one frame of `resdiag watch` (watch.h): the verdict at
 * the last step, the loss and metrics, the first non-finite value, the
 * ranks, then per layer ||x||, r per sublayer and the stream's gradient,
 * each with a sparkline over the last steps, and the warnings; every line
 * cut to the terminal's width, the layers to its height.
 */

#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

#include "command.h"
#include "watch.h"

#define SPARK_MAX 16 /* steps a sparkline shows at most */

void watch_state_init(watch_state *ws)
{
    ws->drawn_steps = -1;
    ws->drawn_state = RESDIAG_FILE_UNKNOWN;
    ws->nonfinite_rank = -1;
    ws->nonfinite_step = -1;
}

void watch_state_free(watch_state *ws) { (void)ws; }

/* UTF-8 blocks where the locale is UTF-8, else ASCII levels. */
static int utf8_locale(void)
{
    static int known = -1;
    if (known < 0) {
        setlocale(LC_CTYPE, "");
        known = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    }
    return known;
}

/* n values (NaN: a gap, shown '!') as width characters, scaled min..max. */
static void spark(FILE *f, const double *v, int n, int width)
{
    static const char *blocks[] = { "\u2581", "\u2582", "\u2583", "\u2584",
                                    "\u2585", "\u2586", "\u2587", "\u2588" };
    static const char ascii[] = "_.-=+*#@";
    int first = n > width ? n - width : 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = first; i < n; i++)
        if (isfinite(v[i])) {
            lo = fmin(lo, v[i]);
            hi = fmax(hi, v[i]);
        }
    for (int i = first; i < n; i++) {
        if (!isfinite(v[i])) {
            fputc(isnan(v[i]) ? ' ' : '!', f);
            continue;
        }
        int k = hi > lo ? (int)((v[i] - lo) / (hi - lo) * 7.999) : 3;
        if (utf8_locale())
            fputs(blocks[k], f);
        else
            fputc(ascii[k], f);
    }
    for (int i = n - first; i < width; i++)
        fputc(' ', f);
}

/* Appends line to out cut to cols characters (a UTF-8 sequence counts as
 * one; an ESC [ ... m sequence as none). */
static void put_line(FILE *out, const char *line, int cols, int colour, int tty)
{
    int shown = 0;
    for (const char *p = line; *p; p++) {
        if (*p == '\033') { /* colour codes are only written when colour is on */
            const char *m = strchr(p, 'm');
            if (!m)
                break;
            if (colour)
                fwrite(p, 1, (size_t)(m - p + 1), out);
            p = m;
            continue;
        }
        if (((unsigned char)*p & 0xC0) != 0x80 && shown++ >= cols)
            break;
        fputc(*p, out);
    }
    if (colour)
        fputs("\033[0m", out);
    fputs(tty ? "\033[K\n" : "\n", out);
}

/* The values of one column of the layer table over the last steps. */
typedef struct column {
    const char *title;
    resdiag_direction dir;
    int sublayer;   /* -1: the stream leaving the layer */
    int update;     /* 1: r of the sublayer */
} column;

/* values (n) of column c of layer l at step indices first .. first+n-1. */
static void column_values(const resdiag_reader *rd, const column *c, int l, int64_t first,
                          int n, double *values)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    double f[(int)RESDIAG_N_FIELDS + (int)RESDIAG_N_UPDATE_FIELDS];
    for (int i = 0; i < n; i++) {
        int seen = 0;
        values[i] = NAN;
        if (c->update) {
            if (resdiag_reader_update(rd, first + i, l, c->sublayer, f) == RESDIAG_OK)
                values[i] = f[RESDIAG_UPDATE_RATIO_FROB];
        } else if (resdiag_reader_site(rd, first + i, c->dir, l, in->n_sublayers - 1,
                                       RESDIAG_STREAM_OUT, f, &seen) == RESDIAG_OK &&
                   seen) {
            /* ||x||: the mean per-token norm, as the report's stream.norm;
             * the gradient: ||dL/dx||_F, as its gradients.stream */
            values[i] = c->dir == RESDIAG_FORWARD ? f[RESDIAG_FIELD_TOK_NORM_MEAN]
                                                  : f[RESDIAG_FIELD_FROB];
        }
    }
}

static const char *site_label(int site)
{
    return site < 0 ? "a parameter gradient" : resdiag_site_name((resdiag_site)site);
}

/* The rank whose own first non-finite value comes first (the lowest on a
 * tie), opening each rank's file once per new finding; -1 if unknown. */
static int nonfinite_rank(const resdiag_reader *rd, const char *path, watch_state *ws,
                          int64_t step)
{
    if (ws->nonfinite_step == step)
        return ws->nonfinite_rank;
    int n = resdiag_reader_n_ranks(rd), best = -1;
    int64_t best_step = INT64_MAX;
    if (n <= 1) {
        int r = resdiag_reader_info(rd)->rank;
        best = r < 0 ? 0 : r;
    }
    for (int r = 0; n > 1 && r < n; r++) {
        resdiag_reader *one = NULL;
        resdiag_analysis *a = NULL;
        int64_t s;
        if (resdiag_reader_open_rank(&one, path, r) == RESDIAG_OK &&
            resdiag_analyze(one, NULL, &a) == RESDIAG_OK &&
            resdiag_analysis_first_nonfinite(a, &s, NULL, NULL, NULL, NULL) && s < best_step) {
            best_step = s;
            best = r;
        }
        resdiag_analysis_destroy(a);
        resdiag_reader_destroy(one);
    }
    ws->nonfinite_step = step;
    ws->nonfinite_rank = best;
    return best;
}

/* The header lines: the run, the verdict, the metrics, the first
 * non-finite value, the ranks. */
static void head_lines(FILE *f, const resdiag_reader *rd, const resdiag_analysis *an,
                       const watch_opts *w, watch_state *ws, int64_t n, int width)
{
    static const char *states[] = { "closed", "writing", "ended without closing", "?" };
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int64_t step = resdiag_analysis_step(an);
    /* the path last: a long one is what the width cuts */
    fprintf(f, "resdiag watch  step %lld (%lld recorded)  %s", (long long)step, (long long)n,
            states[w->file_state >= 0 && w->file_state <= 3 ? w->file_state : 3]);
    if (w->rows > 0)
        fprintf(f, "  [%dx%d]", w->cols, w->rows);
    fprintf(f, "  %s\n%sverdict: %s (%s)%s at step %lld\n", tool_printable(w->path),
            w->colour ? "\033[1m" : "",
            resdiag_verdict_name(resdiag_analysis_verdict(an)),
            resdiag_confidence_name(resdiag_analysis_confidence(an)), w->colour ? "\033[0m" : "",
            (long long)step);
    int m_n = (int)(n < SPARK_MAX ? n : SPARK_MAX);
    double v[SPARK_MAX];
    for (int m = 0; m < in->n_metrics; m++) {
        if (resdiag_reader_metric(rd, m, n - m_n, m_n, v) != RESDIAG_OK)
            continue;
        char *name = resdiag_escape_text(in->metric_names[m]);
        fprintf(f, "%-10s %10.5g  ", name ? name : "?", v[m_n - 1]);
        resdiag_free(name);
        spark(f, v, m_n, width);
        fputc('\n', f);
    }
    int64_t nf_step;
    int layer, sub, site;
    resdiag_direction dir;
    if (resdiag_analysis_first_nonfinite(an, &nf_step, &layer, &sub, &site, &dir)) {
        int r = nonfinite_rank(rd, w->path, ws, nf_step);
        fprintf(f, "%sfirst non-finite: step %lld, ", w->colour ? "\033[1;31m" : "",
                (long long)nf_step);
        if (layer == RESDIAG_MODEL_LEVEL)
            fprintf(f, "model, %s", site_label(site));
        else
            fprintf(f, "layer %d, %s %s", layer,
                    sub >= 0 && sub < in->n_sublayers ? in->sublayer_names[sub] : "?",
                    site_label(site));
        fprintf(f, ", %s", dir == RESDIAG_BACKWARD ? "backward" : "forward");
        if (r >= 0)
            fprintf(f, ", rank %d", r);
        fputs(w->colour ? "\033[0m\n" : "\n", f);
    } else {
        fputs("first non-finite: none\n", f);
    }
    int nr = resdiag_reader_n_ranks(rd), early = 0;
    for (int r = 0; r < nr; r++) {
        resdiag_rank_info ri = { .struct_size = sizeof ri };
        if (resdiag_reader_rank(rd, r, &ri) == RESDIAG_OK && ri.state == RESDIAG_RANK_ENDED_EARLY)
            early++;
    }
    fprintf(f, "ranks: %d found, %d ended early\n", in->n_ranks_merged, early);
}

/* The layer table, at most max_layers rows of it. */
static void layer_lines(FILE *f, const resdiag_reader *rd, int64_t n, int cols,
                        int max_layers)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    column c[2 + 8];
    int nc = 0;
    c[nc++] = (column){ "||x||", RESDIAG_FORWARD, -1, 0 };
    for (int s = 0; s < in->n_sublayers && s < 8; s++)
        c[nc++] = (column){ in->sublayer_names[s], RESDIAG_FORWARD, s, 1 };
    c[nc++] = (column){ "grad", RESDIAG_BACKWARD, -1, 0 };
    /* each column: a value of 9, a space, the sparkline, two spaces */
    int width = (cols - 5) / nc - 13;
    width = width < 0 ? 0 : width > SPARK_MAX ? SPARK_MAX : width;
    int k = (int)(n < width ? n : width);
    fprintf(f, "layer");
    for (int i = 0; i < nc; i++) {
        char label[48];
        snprintf(label, sizeof label, "%s%.30s", c[i].update ? "r " : "", c[i].title);
        fprintf(f, " %9s %*s  ", label, width, "");
    }
    fputc('\n', f);
    double v[SPARK_MAX];
    int shown = in->n_layers < max_layers ? in->n_layers : max_layers;
    for (int l = 0; l < shown; l++) {
        fprintf(f, "%5d", l);
        for (int i = 0; i < nc; i++) {
            column_values(rd, &c[i], l, n - (k > 0 ? k : 1), k > 0 ? k : 1, v);
            fprintf(f, " %9.4g ", v[(k > 0 ? k : 1) - 1]);
            spark(f, v, k, width);
            fputs("  ", f);
        }
        fputc('\n', f);
    }
    if (shown < in->n_layers)
        fprintf(f, "  ... %d more layers (a taller terminal shows them)\n",
                in->n_layers - shown);
}

/* The warnings of the report's text, its "Warnings:" part. */
static void warning_lines(FILE *f, const resdiag_analysis *an, int max_lines)
{
    char *text = resdiag_analysis_to_text(an);
    const char *p = text ? strstr(text, "\nWarnings:") : NULL;
    if (!p) {
        resdiag_free(text);
        return;
    }
    p++;
    for (int i = 0; *p && i < max_lines; i++) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (i > 0 && strncmp(p, "  - ", 4) != 0)
            break;
        fprintf(f, "%.*s\n", (int)len, p);
        p += len + (e != NULL);
    }
    resdiag_free(text);
}

int watch_frame(resdiag_reader *rd, const watch_opts *w, watch_state *ws, char **out)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int64_t n = in->n_steps;
    char *raw = NULL;
    size_t raw_len = 0;
    FILE *f = open_memstream(&raw, &raw_len);
    if (!f) {
        fprintf(stderr, "resdiag: out of memory\n");
        return EXIT_BAD;
    }
    resdiag_analysis *an = NULL;
    if (n == 0) {
        fprintf(f, "resdiag watch %s  waiting for the first step to be written\n",
                tool_printable(w->path));
    } else {
        resdiag_analyze_options opt;
        resdiag_analyze_options_init(&opt);
        opt.step_index = RESDIAG_STEP_LAST;
        tool_last_msg[0] = 0;
        if (resdiag_analyze(rd, &opt, &an) != RESDIAG_OK) {
            fclose(f);
            free(raw);
            fprintf(stderr, "resdiag: %s: %s\n", tool_printable(w->path),
                    tool_last_msg[0] ? tool_last_msg : "cannot analyse the run");
            return EXIT_BAD;
        }
        head_lines(f, rd, an, w, ws, n, 16);
        /* the rows left after the head (~5+metrics), the table's title,
         * and a few warnings */
        int max_layers = w->rows > 0 ? w->rows - (7 + in->n_metrics) - 3 : in->n_layers;
        layer_lines(f, rd, n, w->cols, max_layers < 1 ? 1 : max_layers);
        warning_lines(f, an, w->rows > 0 ? 3 : 1000);
        resdiag_analysis_destroy(an);
    }
    fclose(f);
    /* cut each line to the width, and the frame to the height */
    char *res = NULL;
    size_t res_len = 0;
    FILE *o = open_memstream(&res, &res_len);
    if (!o) {
        free(raw);
        fprintf(stderr, "resdiag: out of memory\n");
        return EXIT_BAD;
    }
    int lines = 0;
    for (char *p = raw; p && *p && (w->rows <= 0 || lines < w->rows - 1); lines++) {
        char *e = strchr(p, '\n');
        if (e)
            *e = 0;
        put_line(o, p, w->cols, w->colour, w->rows > 0);
        p = e ? e + 1 : NULL;
    }
    fclose(o);
    free(raw);
    ws->drawn_steps = n;
    ws->drawn_state = w->file_state;
    *out = res;
    return 0;
}
