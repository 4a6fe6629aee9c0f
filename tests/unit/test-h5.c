/*
 * test-h5.c - the run file written by rd_writer_* and read back by
 * resdiag_reader_*: every value, attribute and error path, SWMR reading
 * while the writer runs (in a forked writer), and a full disk (a forked
 * writer under RLIMIT_FSIZE).
 *
 * Values: element `off` of step index i's record is
 *   i * 100000 + off + 0.25              (exact in double)
 * except that some whole stats rows (unobserved sites) and some sketch
 * elements are NaN, by a pattern in (i, slot). Offsets are computed here
 * from the table offsets and the dims, not with the reader's helpers.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-one.h"
#include "analysis/analysis.h"
#include "fixture.h"
#include "h5/common.h"
#include "h5/writer.h"
#include "format/tables.h"
#include "resdiag.h"

#define F RESDIAG_N_FIELDS
#define U RESDIAG_N_UPDATE_FIELDS
/* The runs built here through the writer are schema 1: its 5 block sites
 * (stream_in..stream_out); runs made through resdiag_open are schema 3. */
#define B RD_OLD_BLOCK_SITES
#define M RESDIAG_N_MODEL_SITES

static char g_dir[256];

/* ------------------------------------------------------------ log capture */

static char g_log[4096];
static int g_nlog;

static void capture_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    snprintf(g_log, sizeof g_log, "%s", msg);
    g_nlog++;
}

static void log_reset(void)
{
    g_log[0] = '\0';
    g_nlog = 0;
}

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* ---------------------------------------------------------------- the run */

static const char *const SUB[] = { "attn", "mlp", "moe" };
static const char *const LP[] = { "attn.wo", "mlp.w2" };
static const char *const MP[] = { "head.w" };
static const char *const META[] = { "zeta", "comes first", "alpha", "\xc3\xbcnic\xc3\xb6" "de \xe2\x9c\x93",
                                     "lr", "3e-4" };

typedef struct spec {
    int L, S, P, Q, K, chunk;
    int meta; /* with metadata, description, declared things */
} spec;

typedef struct run {
    spec sp;
    resdiag_model m;
    rd_tables lay;
    rd_file_header hdr;
} run;

static const spec FULL = { 3, 2, 2, 1, 8, 4, 1 };
static const spec BARE = { 2, 3, 0, 0, 0, 3, 0 };

static void make_run(run *r, const spec *sp)
{
    memset(r, 0, sizeof *r);
    r->sp = *sp;
    resdiag_model *m = &r->m;
    m->struct_size = sizeof *m;
    m->n_layers = sp->L;
    m->d_model = 16;
    m->n_sublayers = sp->S;
    m->sublayer_names = SUB;
    m->n_layer_params = sp->P;
    m->layer_param_names = sp->P ? LP : NULL;
    m->n_model_params = sp->Q;
    m->model_param_names = sp->Q ? MP : NULL;
    if (sp->meta) {
        m->block = RESDIAG_BLOCK_PARALLEL;
        m->declared_placement = RESDIAG_PLACEMENT_MIXED;
        m->declared_mix_layers = 2;
        m->norm_kind = RESDIAG_NORM_RMSNORM;
        m->shard_cols = 8;
        m->n_meta = 3;
        m->meta = META;
        m->description = "tiny test model \xe2\x80\x94 3 layers";
    }
    rd_tables_init(&r->lay, sp->L, sp->S, sp->P, sp->Q, sp->K, rd_block_sites(1));
    r->hdr.model = &r->m;
    r->hdr.tables = &r->lay;
    r->hdr.sketch_size = sp->K;
    r->hdr.sketch_seed = 0xfedcba9876543210ull;
    r->hdr.record_chunk_steps = sp->chunk;
    /* Schema 1: every value as it is (any double), so these tests hold the
     * file to the record bit for bit; schema 2 has test-h5-schema2.c. */
    r->hdr.file_schema = 1;
}

static int64_t step_no(int64_t i) { return 1000 + 3 * i; }
static double step_time(int64_t i) { return 0.5 * (double)i + 0.125; }

/* Expected value of element `off` of step index i. */
static double expect(const rd_tables *lay, int64_t i, size_t off)
{
    for (int t = 0; t < RD_N_TABLES; t++) {
        const rd_table *tb = &lay->tables[t];
        if (off < tb->offset || off >= tb->offset + tb->count)
            continue;
        size_t rel = off - tb->offset;
        if (tb->kind == RD_KIND_STATS && ((rel / F) + (size_t)i) % 7 == 3)
            return NAN; /* site not observed in this step */
        if (tb->kind == RD_KIND_SKETCH && (rel + (size_t)i) % 11 == 5)
            return NAN;
        break;
    }
    return (double)i * 100000.0 + (double)off + 0.25;
}

static int same(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Call site of slot s, in version v of the trainer. */
#define LONG_DIR "/home/somebody/projects/a-rather-long-directory-name/and/another/" \
                 "level/of/nesting/that/goes/on/and/on/src/models/transformer/blocks/"
static rd_callsite callsite_of(size_t s, int v)
{
    rd_callsite c = { NULL, 0 };
    switch ((s + (size_t)v) % 3) {
    case 0:
        c.file = v ? "trainer_v1.c" : "trainer.c";
        c.line = 100 + (int)s + 1000 * v;
        break;
    case 1:
        break; /* never observed */
    default:
        c.file = LONG_DIR "attention_block.c";
        c.line = 7 + (int)s;
        break;
    }
    return c;
}

/* The string the file must hold for a call site, computed independently:
 * "file:line", or "..." and the last 124 bytes of it. */
static void expect_callsite(char *buf, size_t len, rd_callsite c)
{
    if (!c.file) {
        buf[0] = '\0';
        return;
    }
    char full[1024];
    snprintf(full, sizeof full, "%s:%d", c.file, c.line);
    size_t n = strlen(full);
    if (n <= RD_CALLSITE_LEN - 1)
        snprintf(buf, len, "%s", full);
    else
        snprintf(buf, len, "...%s", full + n - (RD_CALLSITE_LEN - 1 - 3));
}

static rd_callsite *make_callsites(const run *r, int v)
{
    rd_callsite *cs = calloc(r->lay.n_slots ? r->lay.n_slots : 1, sizeof *cs);
    ck_assert_ptr_nonnull(cs);
    for (size_t s = 0; s < r->lay.n_slots; s++)
        cs[s] = callsite_of(s, v);
    return cs;
}

static rd_writer *create_or_fail(const char *path, run *r)
{
    rd_writer *w = (rd_writer *)0x1;
    char err[1024] = "";
    resdiag_status st = rd_writer_create(&w, path, &r->hdr, err, sizeof err);
    ck_assert_msg(st == RESDIAG_OK, "create %s: %d %s", path, st, err);
    ck_assert_ptr_nonnull(w);
    return w;
}

/* Appends step indices [first, first + n). */
static resdiag_status append_steps(rd_writer *w, const run *r, int64_t first, size_t n,
                                   const rd_callsite *cs, int changed, char *err, size_t errlen)
{
    size_t L = r->lay.record_len;
    double *rec = malloc((n ? n : 1) * L * sizeof *rec);
    int64_t *steps = malloc((n ? n : 1) * sizeof *steps);
    double *times = malloc((n ? n : 1) * sizeof *times);
    ck_assert(rec && steps && times);
    for (size_t k = 0; k < n; k++) {
        int64_t i = first + (int64_t)k;
        steps[k] = step_no(i);
        times[k] = step_time(i);
        for (size_t off = 0; off < L; off++)
            rec[k * L + off] = expect(&r->lay, i, off);
    }
    resdiag_status st = rd_writer_append(w, steps, times, rec, n, cs, changed, err, errlen);
    free(rec);
    free(steps);
    free(times);
    return st;
}

static void append_ok(rd_writer *w, const run *r, int64_t first, size_t n, const rd_callsite *cs,
                      int changed)
{
    char err[1024] = "";
    resdiag_status st = append_steps(w, r, first, n, cs, changed, err, sizeof err);
    ck_assert_msg(st == RESDIAG_OK, "append %lld+%zu: %d %s", (long long)first, n, st, err);
}

static void close_ok(rd_writer *w)
{
    char err[1024] = "";
    resdiag_status st = rd_writer_close(w, err, sizeof err);
    ck_assert_msg(st == RESDIAG_OK, "close: %d %s", st, err);
}

/* Writes n_total steps in batches of 1, 5, 1, 3, ...; call sites v0 first,
 * v1 from the third batch on. */
static void write_run(const char *path, run *r, int64_t n_total)
{
    static const size_t batches[] = { 1, 5, 1, 3 };
    rd_writer *w = create_or_fail(path, r);
    rd_callsite *cs0 = make_callsites(r, 0), *cs1 = make_callsites(r, 1);
    int64_t done = 0;
    for (int b = 0; done < n_total; b++) {
        size_t n = batches[b % 4];
        if ((int64_t)n > n_total - done)
            n = (size_t)(n_total - done);
        append_ok(w, r, done, n, b >= 2 ? cs1 : cs0, b == 0 || b == 2);
        done += (int64_t)n;
    }
    close_ok(w);
    free(cs0);
    free(cs1);
}

static resdiag_reader *open_or_fail(const char *path)
{
    resdiag_reader *rd = NULL;
    log_reset();
    resdiag_status st = resdiag_reader_open(&rd, path);
    ck_assert_msg(st == RESDIAG_OK, "open %s: %d (%s)", path, st, g_log);
    ck_assert_ptr_nonnull(rd);
    return rd;
}

/* ----------------------------------------------------------- verification */

static void check_info(const resdiag_reader *rd, const run *r, int64_t n_steps)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    const resdiag_model *m = &r->m;
    ck_assert_ptr_nonnull(in);
    ck_assert_int_eq(in->schema_version, 1);
    ck_assert_str_eq(in->resdiag_version, RESDIAG_VERSION_STRING);
    ck_assert_int_eq(in->n_layers, m->n_layers);
    ck_assert_int_eq(in->d_model, m->d_model);
    ck_assert_int_eq(in->n_sublayers, m->n_sublayers);
    for (int s = 0; s < m->n_sublayers; s++)
        ck_assert_str_eq(in->sublayer_names[s], SUB[s]);
    ck_assert_int_eq(in->block, m->block);
    ck_assert_int_eq(in->declared_placement, m->declared_placement);
    ck_assert_int_eq(in->declared_mix_layers, m->declared_mix_layers);
    ck_assert_int_eq(in->norm_kind, m->norm_kind);
    ck_assert_int_eq(in->shard_cols, m->shard_cols);
    ck_assert_int_eq(in->n_layer_params, m->n_layer_params);
    for (int p = 0; p < m->n_layer_params; p++)
        ck_assert_str_eq(in->layer_param_names[p], LP[p]);
    ck_assert_int_eq(in->n_model_params, m->n_model_params);
    for (int q = 0; q < m->n_model_params; q++)
        ck_assert_str_eq(in->model_param_names[q], MP[q]);
    ck_assert_int_eq(in->sketch_size, r->sp.K);
    ck_assert_uint_eq(in->sketch_seed, 0xfedcba9876543210ull);
    ck_assert_int_eq(in->n_steps, n_steps);
    ck_assert_int_eq(in->n_meta, m->n_meta);
    /* in the trainer's order, not sorted */
    for (int k = 0; k < 2 * m->n_meta; k++)
        ck_assert_str_eq(in->meta[k], META[k]);
    ck_assert_str_eq(in->description, m->description ? m->description : "");
    /* provenance: "YYYY-MM-DDTHH:MM:SSZ", this program, this HDF5 */
    ck_assert_uint_eq(strlen(in->created_utc), 20);
    ck_assert(in->created_utc[4] == '-' && in->created_utc[10] == 'T'
              && in->created_utc[19] == 'Z');
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert(n > 0);
    exe[n] = '\0';
    ck_assert_str_eq(in->program, exe);
    char h5v[64];
    snprintf(h5v, sizeof h5v, "%d.%d.%d", H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE);
    ck_assert_str_eq(in->hdf5_version, h5v);
}

/* Offsets of things in the record, from the tables' dims. */
static size_t block_off(const run *r, int dir, int l, int s, int site, int sketch)
{
    int t = sketch ? (dir ? RD_T_BWD_SITE_SKETCH : RD_T_FWD_SITE_SKETCH)
                   : (dir ? RD_T_BWD_SITE : RD_T_FWD_SITE);
    size_t width = sketch ? (size_t)r->sp.K : F;
    return r->lay.tables[t].offset + ((size_t)(l * r->sp.S + s) * B + (size_t)site) * width;
}

static size_t model_off(const run *r, int dir, int m, int sketch)
{
    int t = sketch ? (dir ? RD_T_BWD_MODEL_SKETCH : RD_T_FWD_MODEL_SKETCH)
                   : (dir ? RD_T_BWD_MODEL : RD_T_FWD_MODEL);
    return r->lay.tables[t].offset + (size_t)m * (sketch ? (size_t)r->sp.K : F);
}

/* Reads every value of steps [0, n) through the per-slot functions. */
static void check_values(const resdiag_reader *rd, const run *r, int64_t n, int cs_version)
{
    double out[F + RESDIAG_MAX_SKETCH];
    int K = r->sp.K;
    for (int64_t i = 0; i < n; i++) {
        for (int dir = 0; dir < 2; dir++) {
            for (int l = 0; l < r->sp.L; l++)
                for (int s = 0; s < r->sp.S; s++)
                    for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                        int obs = -1;
                        ck_assert_int_eq(resdiag_reader_site(rd, i, dir, l, s, site, out, &obs),
                                         RESDIAG_OK);
                        if (site >= B) { /* no room in schema 1: valid, never observed */
                            for (int f = 0; f < F; f++)
                                ck_assert(isnan(out[f]));
                            ck_assert_int_eq(obs, 0);
                            if (K > 0)
                                ck_assert_int_eq(resdiag_reader_sketch(rd, i, dir, l, s, site,
                                                                       out), RESDIAG_OK);
                            for (int k = 0; k < K; k++)
                                ck_assert(isnan(out[k]));
                            continue;
                        }
                        size_t off = block_off(r, dir, l, s, site, 0);
                        for (int f = 0; f < F; f++)
                            ck_assert_msg(same(out[f], expect(&r->lay, i, off + (size_t)f)),
                                          "site i=%lld dir=%d l=%d s=%d site=%d f=%d: %g",
                                          (long long)i, dir, l, s, site, f, out[f]);
                        ck_assert_int_eq(obs, !isnan(expect(&r->lay, i, off)));
                        if (K > 0) {
                            ck_assert_int_eq(resdiag_reader_sketch(rd, i, dir, l, s, site, out),
                                             RESDIAG_OK);
                            off = block_off(r, dir, l, s, site, 1);
                            for (int k = 0; k < K; k++)
                                ck_assert(same(out[k], expect(&r->lay, i, off + (size_t)k)));
                        }
                    }
            for (int m = 0; m < M; m++) {
                int obs = -1;
                /* model sites ignore layer and sublayer */
                ck_assert_int_eq(resdiag_reader_site(rd, i, dir, -7, 99, RESDIAG_EMBED_OUT + m,
                                                     out, &obs), RESDIAG_OK);
                size_t off = model_off(r, dir, m, 0);
                for (int f = 0; f < F; f++)
                    ck_assert(same(out[f], expect(&r->lay, i, off + (size_t)f)));
                ck_assert_int_eq(obs, !isnan(expect(&r->lay, i, off)));
                if (K > 0) {
                    ck_assert_int_eq(resdiag_reader_sketch(rd, i, dir, 12345, -1,
                                                           RESDIAG_EMBED_OUT + m, out),
                                     RESDIAG_OK);
                    off = model_off(r, dir, m, 1);
                    for (int k = 0; k < K; k++)
                        ck_assert(same(out[k], expect(&r->lay, i, off + (size_t)k)));
                }
            }
        }
        for (int l = 0; l < r->sp.L; l++) {
            for (int p = 0; p < r->sp.P; p++) {
                int obs = -1;
                ck_assert_int_eq(resdiag_reader_param(rd, i, l, LP[p], out, &obs), RESDIAG_OK);
                size_t off = r->lay.tables[RD_T_LAYER_PARAM].offset
                             + (size_t)(l * r->sp.P + p) * F;
                for (int f = 0; f < F; f++)
                    ck_assert(same(out[f], expect(&r->lay, i, off + (size_t)f)));
                ck_assert_int_eq(obs, !isnan(expect(&r->lay, i, off)));
            }
            for (int s = 0; s < r->sp.S; s++) {
                ck_assert_int_eq(resdiag_reader_update(rd, i, l, s, out), RESDIAG_OK);
                size_t off = r->lay.tables[RD_T_UPDATE].offset + (size_t)(l * r->sp.S + s) * U;
                for (int u = 0; u < U; u++)
                    ck_assert(same(out[u], expect(&r->lay, i, off + (size_t)u)));
            }
        }
        for (int q = 0; q < r->sp.Q; q++) {
            int obs = -1;
            ck_assert_int_eq(resdiag_reader_param(rd, i, RESDIAG_MODEL_LEVEL, MP[q], out, &obs),
                             RESDIAG_OK);
            size_t off = r->lay.tables[RD_T_MODEL_PARAM].offset + (size_t)q * F;
            for (int f = 0; f < F; f++)
                ck_assert(same(out[f], expect(&r->lay, i, off + (size_t)f)));
            ck_assert_int_eq(obs, !isnan(expect(&r->lay, i, off)));
        }
    }

    /* step numbers */
    int64_t *steps = malloc((size_t)(n ? n : 1) * sizeof *steps);
    ck_assert_int_eq(resdiag_reader_steps(rd, steps, n), RESDIAG_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert_int_eq(steps[i], step_no(i));
    free(steps);

    /* call sites */
    if (cs_version >= 0) {
        char want[RD_CALLSITE_LEN];
        for (int dir = 0; dir < 2; dir++) {
            int t = dir ? RD_T_BWD_SITE : RD_T_FWD_SITE;
            for (int l = 0; l < r->sp.L; l++)
                for (int s = 0; s < r->sp.S; s++)
                    for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                        if (site >= B) { /* no room in schema 1: no call site */
                            ck_assert_str_eq(resdiag_reader_callsite(rd, dir, l, s, site), "");
                            continue;
                        }
                        size_t slot = r->lay.tables[t].slot_offset
                                      + (size_t)(l * r->sp.S + s) * B + (size_t)site;
                        expect_callsite(want, sizeof want, callsite_of(slot, cs_version));
                        ck_assert_str_eq(resdiag_reader_callsite(rd, dir, l, s, site), want);
                    }
            t = dir ? RD_T_BWD_MODEL : RD_T_FWD_MODEL;
            for (int m = 0; m < M; m++) {
                expect_callsite(want, sizeof want,
                                callsite_of(r->lay.tables[t].slot_offset + (size_t)m, cs_version));
                ck_assert_str_eq(resdiag_reader_callsite(rd, dir, 0, 0, RESDIAG_EMBED_OUT + m),
                                 want);
            }
        }
    }
}

/* The summary of step index i (doc/FORMAT.md, /summary), computed here
 * from expect() and the tables' dims: nonfinite (3), observed (6),
 * stream_norm (L), update_ratio (L*S). */
static void expect_summary(const run *r, int64_t i, double nf[3], double obs[6], double *xn,
                           double *ur)
{
    nf[0] = nf[1] = nf[2] = 0;
    for (int t = 0; t < 6; t++) {
        const rd_table *tb = &r->lay.tables[RD_T_FWD_SITE + t];
        obs[t] = 0;
        for (size_t row = 0; row < tb->count / F; row++) {
            size_t off = tb->offset + row * F;
            if (isnan(expect(&r->lay, i, off + RESDIAG_FIELD_ROWS)))
                continue;
            obs[t] += 1;
            double nn = expect(&r->lay, i, off + RESDIAG_FIELD_NAN_COUNT);
            double ni = expect(&r->lay, i, off + RESDIAG_FIELD_INF_COUNT);
            nf[0] += nn;
            nf[1] += ni;
            nf[2] += nn > 0 || ni > 0;
        }
    }
    for (int l = 0; l < r->sp.L; l++) {
        xn[l] = expect(&r->lay, i, block_off(r, 0, l, r->sp.S - 1, RESDIAG_STREAM_OUT, 0)
                                       + RESDIAG_FIELD_TOK_NORM_MEAN);
        for (int s = 0; s < r->sp.S; s++)
            ur[l * r->sp.S + s] = expect(&r->lay, i, r->lay.tables[RD_T_UPDATE].offset
                                                         + (size_t)(l * r->sp.S + s) * U);
    }
}

static int close_to(double a, double b)
{
    return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-12 * fabs(b);
}

/* The /summary datasets through the generic reader, against expect_summary. */
static void check_summary(const resdiag_reader *rd, const run *r, int64_t n)
{
    int L = r->sp.L, S = r->sp.S;
    static const char *const names[4] = { "summary/nonfinite", "summary/observed",
                                          "summary/stream_norm", "summary/update_ratio" };
    const size_t width[4] = { 3, 6, (size_t)L, (size_t)L * S };
    double nf[3], obs[6], *xn = malloc((size_t)L * sizeof *xn),
                          *ur = malloc((size_t)L * S * sizeof *ur);
    for (int d = 0; d < 4; d++) {
        int64_t dims[8];
        int rank = 0;
        ck_assert_int_eq(resdiag_reader_dims(rd, names[d], dims, 8, &rank), RESDIAG_OK);
        ck_assert_int_eq(dims[0], n);
        size_t len = (size_t)n * width[d];
        double *v = malloc((len ? len : 1) * sizeof *v);
        ck_assert_int_eq(resdiag_reader_read(rd, names[d], 0, n, v, len), RESDIAG_OK);
        for (int64_t i = 0; i < n; i++) {
            expect_summary(r, i, nf, obs, xn, ur);
            const double *want = d == 0 ? nf : d == 1 ? obs : d == 2 ? xn : ur;
            for (size_t k = 0; k < width[d]; k++)
                ck_assert_msg(close_to(v[(size_t)i * width[d] + k], want[k]),
                              "%s step %lld [%zu]: %.17g, want %.17g", names[d], (long long)i,
                              k, v[(size_t)i * width[d] + k], want[k]);
        }
        free(v);
    }
    free(xn);
    free(ur);
}

/* Series of every field of every site, and every time series dataset
 * read whole through the generic functions. */
static void check_series_and_datasets(const resdiag_reader *rd, const run *r, int64_t n)
{
    double *out = malloc((size_t)(n + 1) * sizeof *out);
    for (int dir = 0; dir < 2; dir++) {
        for (int l = 0; l < r->sp.L; l++)
            for (int s = 0; s < r->sp.S; s++)
                for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++)
                    for (int f = 0; f < F; f++) {
                        ck_assert_int_eq(resdiag_reader_series(rd, dir, l, s, site, f, out, n),
                                         RESDIAG_OK);
                        /* a site schema 1 has no room for reads as never observed */
                        size_t off = site < B ? block_off(r, dir, l, s, site, 0) + (size_t)f : 0;
                        for (int64_t i = 0; i < n; i++)
                            ck_assert(site < B ? same(out[i], expect(&r->lay, i, off))
                                               : isnan(out[i]));
                    }
        for (int m = 0; m < M; m++)
            for (int f = 0; f < F; f++) {
                /* fewer steps than there are */
                int64_t nn = n > 1 ? n - 1 : n;
                ck_assert_int_eq(resdiag_reader_series(rd, dir, 0, 0, RESDIAG_EMBED_OUT + m, f,
                                                       out, nn), RESDIAG_OK);
                size_t off = model_off(r, dir, m, 0) + (size_t)f;
                for (int64_t i = 0; i < nn; i++)
                    ck_assert(same(out[i], expect(&r->lay, i, off)));
            }
    }
    free(out);

    /* generic access: steps, step_time, every table present, the summary */
    int want_n = 2 + RD_N_SUMMARY;
    for (int t = 0; t < RD_N_TABLES; t++)
        want_n += r->lay.tables[t].count > 0;
    ck_assert_int_eq(resdiag_reader_n_datasets(rd), want_n);
    ck_assert_str_eq(resdiag_reader_dataset_name(rd, 0), "steps");
    ck_assert_str_eq(resdiag_reader_dataset_name(rd, 1), "step_time");
    ck_assert_ptr_null(resdiag_reader_dataset_name(rd, want_n));
    ck_assert_ptr_null(resdiag_reader_dataset_name(rd, -1));
    int seen = 2;
    for (int t = 0; t < RD_N_TABLES; t++) {
        const rd_table *tb = &r->lay.tables[t];
        if (tb->count == 0)
            continue;
        ck_assert_str_eq(resdiag_reader_dataset_name(rd, seen++), tb->name);
        int64_t dims[8];
        int rank = 0;
        ck_assert_int_eq(resdiag_reader_dims(rd, tb->name, dims, 8, &rank), RESDIAG_OK);
        ck_assert_int_eq(rank, tb->rank + 1);
        ck_assert_int_eq(dims[0], n);
        for (int k = 0; k < tb->rank; k++)
            ck_assert_int_eq(dims[k + 1], tb->dims[k]);
        size_t len = (size_t)n * tb->count;
        double *all = malloc((len ? len : 1) * sizeof *all);
        ck_assert_int_eq(resdiag_reader_read(rd, tb->name, 0, n, all, len), RESDIAG_OK);
        for (int64_t i = 0; i < n; i++)
            for (size_t e = 0; e < tb->count; e++)
                ck_assert_msg(same(all[(size_t)i * tb->count + e],
                                   expect(&r->lay, i, tb->offset + e)),
                              "%s step %lld element %zu", tb->name, (long long)i, e);
        /* a window, with a leading slash */
        if (n >= 3) {
            char slashed[128];
            snprintf(slashed, sizeof slashed, "/%s", tb->name);
            ck_assert_int_eq(resdiag_reader_read(rd, slashed, 1, 2, all, 2 * tb->count),
                             RESDIAG_OK);
            for (int64_t i = 1; i < 3; i++)
                for (size_t e = 0; e < tb->count; e++)
                    ck_assert(same(all[(size_t)(i - 1) * tb->count + e],
                                   expect(&r->lay, i, tb->offset + e)));
        }
        free(all);
    }
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    int64_t dims[2];
    int rank = 0;
    ck_assert_int_eq(resdiag_reader_dims(rd, "steps", dims, 2, &rank), RESDIAG_OK);
    ck_assert_int_eq(rank, 1);
    ck_assert_int_eq(dims[0], n);
    ck_assert_int_eq(resdiag_reader_read(rd, "steps", 0, n, v, (size_t)n), RESDIAG_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert(v[i] == (double)step_no(i));
    ck_assert_int_eq(resdiag_reader_read(rd, "step_time", 0, n, v, (size_t)n), RESDIAG_OK);
    for (int64_t i = 0; i < n; i++)
        ck_assert(v[i] == step_time(i));
    free(v);
    check_summary(rd, r, n);
}

/* What was never observed takes no space: a run that observes stream_out
 * everywhere and norm_in of (0, 0) at one step only, nothing backward. */
START_TEST(h5_unobserved_sites_take_no_space)
{
    run r;
    make_run(&r, &BARE);
    r.hdr.record_chunk_steps = 16;
    const char *path = tpath("sparse.h5");
    const int N = 40, ONLY = 21;
    const size_t len = r.lay.record_len;
    rd_writer *w = create_or_fail(path, &r);
    double *rec = malloc((size_t)N * len * sizeof *rec);
    int64_t steps[40];
    double times[40];
    for (int i = 0; i < N; i++) {
        steps[i] = i;
        times[i] = i;
        for (size_t k = 0; k < len; k++)
            rec[(size_t)i * len + k] = NAN;
        for (int l = 0; l < r.sp.L; l++)
            for (int s = 0; s < r.sp.S; s++)
                for (int f = 0; f < F; f++)
                    rec[(size_t)i * len + block_off(&r, 0, l, s, RESDIAG_STREAM_OUT, 0) + f] =
                        1000.0 * i + f;
        if (i == ONLY)
            for (int f = 0; f < F; f++)
                rec[(size_t)i * len + block_off(&r, 0, 0, 0, RESDIAG_NORM_IN, 0) + f] = -1.0 - f;
    }
    char err[512];
    for (int i = 0; i < N; i += 7) {
        size_t n = N - i < 7 ? (size_t)(N - i) : 7;
        ck_assert_int_eq(rd_writer_append(w, steps + i, times + i, rec + (size_t)i * len, n,
                                          NULL, 0, err, sizeof err), RESDIAG_OK);
    }
    close_ok(w);

    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    static const char *const empty[] = { "backward/site_stats", "backward/model_stats",
                                         "forward/model_stats", "forward/update" };
    for (int k = 0; k < 4; k++) {
        hid_t d = H5Dopen2(f, empty[k], H5P_DEFAULT);
        ck_assert_msg(H5Dget_storage_size(d) == 0, "%s", empty[k]);
        H5Dclose(d);
    }
    /* forward/site_stats: the chunks that hold stream_out of every step and
     * the one that holds norm_in at step ONLY, whatever the chunk shape */
    hid_t d = H5Dopen2(f, "forward/site_stats", H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d);
    hsize_t ch[5];
    ck_assert_int_eq(H5Pget_chunk(dcpl, 5, ch), 5);
    hsize_t chunk_bytes = ch[0] * ch[1] * ch[2] * ch[3] * ch[4] * 8;
    int per_site = ch[3] == 1; /* chunks per site, or sites share them */
    hsize_t steps_chunks = ((hsize_t)N + ch[0] - 1) / ch[0];
    hsize_t want = per_site ? (steps_chunks + 1) * chunk_bytes : steps_chunks * chunk_bytes;
    ck_assert_uint_eq(H5Dget_storage_size(d), want);
    ck_assert_uint_lt(H5Dget_storage_size(d), (hsize_t)N * (hsize_t)r.lay.tables[0].count * 8);
    H5Pclose(dcpl);
    H5Dclose(d);
    H5Fclose(f);

    /* and it reads back as written, NaN where nothing was */
    resdiag_reader *rd = open_or_fail(path);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, N);
    double out[F];
    int obs = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(resdiag_reader_site(rd, i, RESDIAG_FORWARD, 1, 2, RESDIAG_STREAM_OUT,
                                             out, &obs), RESDIAG_OK);
        ck_assert(obs && out[0] == 1000.0 * i && out[F - 1] == 1000.0 * i + F - 1);
        ck_assert_int_eq(resdiag_reader_site(rd, i, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_IN, out,
                                             &obs), RESDIAG_OK);
        ck_assert_int_eq(obs, i == ONLY);
        ck_assert(i == ONLY ? out[3] == -4.0 : isnan(out[3]));
        ck_assert_int_eq(resdiag_reader_site(rd, i, RESDIAG_BACKWARD, 0, 0, RESDIAG_STREAM_OUT,
                                             out, &obs), RESDIAG_OK);
        ck_assert(!obs && isnan(out[RESDIAG_FIELD_FROB]));
    }
    resdiag_reader_destroy(rd);
    free(rec);
}
END_TEST

/* ---------------------------------------------------------- the summary */

/* A run through the public API: 3 layers x (attn, mlp), every forward site
 * at every step, backward sites and a parameter gradient only at odd steps
 * from index 3 on, and non-finite values at step indices 17 (a NaN in the
 * forward norm_out of layer 1 attn, two Infs in the layer-0 gradient) and
 * 25 (three NaNs in the embedding). */
enum { SM_L = 3, SM_S = 2, SM_T = 4, SM_D = 8, SM_STEPS = 40 };

static void sm_fill(float *x, int n, unsigned seed)
{
    for (int k = 0; k < n; k++) {
        seed = seed * 1103515245u + 12345u;
        x[k] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

static void write_summary_run(const char *path)
{
    static const char *const subs[] = { "attn", "mlp" };
    static const char *const lp[] = { "mlp.w2" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = SM_L, .cols = SM_D,
        .sublayers = SM_S, .sublayer_names = subs, .layer_params = 1,
        .layer_param_names = lp });
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 4;
    o.flush_seconds = 0;
    o.sketch_size = 8;
    resdiag *r = fixture_open(path, &m, &o);
    float x[SM_T * SM_D];
    for (int i = 0; i < SM_STEPS; i++) {
        ck_assert_int_eq(resdiag_step_begin(r, 10 * i), RESDIAG_OK);
        sm_fill(x, SM_T * SM_D, 7u * (unsigned)i + 1u);
        if (i == 25)
            x[0] = x[5] = x[9] = NAN;
        RESDIAG_MODEL_FWD(r, RESDIAG_EMBED_OUT, resdiag_f32(x, SM_T, SM_D));
        for (int l = 0; l < SM_L; l++)
            for (int s = 0; s < SM_S; s++)
                for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++) {
                    sm_fill(x, SM_T * SM_D, (unsigned)(1000 * i + 100 * l + 10 * s + b));
                    if (i == 17 && l == 1 && s == 0 && b == RESDIAG_NORM_OUT)
                        x[3] = NAN;
                    RESDIAG_FWD(r, l, s, (resdiag_site)b, resdiag_f32(x, SM_T, SM_D));
                }
        if (i >= 3 && i % 2 == 1)
            for (int l = SM_L - 1; l >= 0; l--) {
                for (int s = SM_S - 1; s >= 0; s--)
                    for (int b = RESDIAG_N_BLOCK_SITES - 1; b >= 0; b--) {
                        sm_fill(x, SM_T * SM_D, (unsigned)(5000 * i + 100 * l + 10 * s + b));
                        RESDIAG_BWD(r, l, s, (resdiag_site)b, resdiag_f32(x, SM_T, SM_D));
                    }
                sm_fill(x, SM_T * SM_D, (unsigned)(9000 * i + l));
                if (i == 17 && l == 0)
                    x[1] = x[2] = INFINITY;
                RESDIAG_PARAM_GRAD(r, l, "mlp.w2", resdiag_f32(x, SM_T, SM_D));
            }
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
}

/* Analyses path; with_summary = 0 makes the reader ignore /summary. */
static resdiag_analysis *analyse(const char *path, int with_summary, int64_t step_index)
{
    rd_h5_reader_summary = with_summary;
    resdiag_reader *rd = open_or_fail(path);
    rd_h5_reader_summary = 1;
    int has = 0;
    for (int i = 0; i < resdiag_reader_n_datasets(rd); i++)
        has |= strcmp(resdiag_reader_dataset_name(rd, i), "summary/nonfinite") == 0;
    ck_assert_int_eq(has, with_summary);
    resdiag_analyze_options o;
    resdiag_analyze_options_init(&o);
    o.step_index = step_index;
    resdiag_analysis *a = NULL;
    ck_assert_int_eq(resdiag_analyze(rd, &o, &a), RESDIAG_OK);
    resdiag_reader_destroy(rd);
    return a;
}

/* The text report without its "created ... by ..." provenance line. */
static char *report_text(const resdiag_analysis *a)
{
    char *t = resdiag_analysis_to_text(a);
    ck_assert_ptr_nonnull(t);
    char *c = strstr(t, "\n  created ");
    if (c) {
        char *e = strchr(c + 1, '\n');
        memmove(c, e ? e : c + strlen(c), strlen(e ? e : c + strlen(c)) + 1);
    }
    return t;
}

static void expect_same_analysis(const resdiag_analysis *x, const resdiag_analysis *y)
{
    char *tx = report_text(x), *ty = report_text(y);
    size_t d = 0;
    while (tx[d] && tx[d] == ty[d])
        d++;
    /* (the reports are too long for Check's message: say where they part) */
    ck_assert_msg(tx[d] == ty[d], "reports differ at byte %zu: \"%.60s\" vs \"%.60s\"", d,
                  tx + d, ty + d);
    free(tx);
    free(ty);
    ck_assert_int_eq(x->nonfinite.found, y->nonfinite.found);
    ck_assert_int_eq(x->nonfinite.step, y->nonfinite.step);
    ck_assert_int_eq(x->nonfinite.n_bad_steps, y->nonfinite.n_bad_steps);
    ck_assert_int_eq(x->nonfinite.layer, y->nonfinite.layer);
    ck_assert_int_eq(x->nonfinite.sub, y->nonfinite.sub);
    ck_assert_int_eq(x->nonfinite.site, y->nonfinite.site);
    ck_assert_int_eq(x->nonfinite.param, y->nonfinite.param);
    ck_assert_int_eq(x->nonfinite.dir, y->nonfinite.dir);
    ck_assert(x->nonfinite.nan_total == y->nonfinite.nan_total && x->nonfinite.inf_total == y->nonfinite.inf_total);
    ck_assert(x->nonfinite.nan_count == y->nonfinite.nan_count && x->nonfinite.inf_count == y->nonfinite.inf_count);
    ck_assert_int_eq(x->gradients.step, y->gradients.step);
}

START_TEST(h5_summary_gives_the_report_of_the_full_tables)
{
    const char *with = tpath("summary.h5"), *old = tpath("no-summary.h5");
    write_summary_run(with);
    rd_h5_writer_summary = 0; /* a file as resdiag 0.1.0 wrote it */
    write_summary_run(old);
    rd_h5_writer_summary = 1;
    hid_t f = H5Fopen(old, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    ck_assert_int_eq(H5Lexists(f, "summary", H5P_DEFAULT), 0);
    H5Fclose(f);

    /* the summary against the full tables of the same file */
    resdiag_reader *rd = open_or_fail(with);
    int64_t n = resdiag_reader_info(rd)->n_steps;
    ck_assert_int_eq(n, SM_STEPS);
    static const char *const stats[6] = { "forward/site_stats", "backward/site_stats",
                                          "forward/model_stats", "backward/model_stats",
                                          "backward/param_stats", "backward/model_param_stats" };
    double *nf = malloc((size_t)n * 3 * sizeof *nf), *ob = malloc((size_t)n * 6 * sizeof *ob);
    double *xn = malloc((size_t)n * SM_L * sizeof *xn);
    double *ur = malloc((size_t)n * SM_L * SM_S * sizeof *ur);
    ck_assert_int_eq(resdiag_reader_read(rd, "summary/nonfinite", 0, n, nf, (size_t)n * 3), 0);
    ck_assert_int_eq(resdiag_reader_read(rd, "summary/observed", 0, n, ob, (size_t)n * 6), 0);
    ck_assert_int_eq(resdiag_reader_read(rd, "summary/stream_norm", 0, n, xn,
                                         (size_t)n * SM_L), 0);
    ck_assert_int_eq(resdiag_reader_read(rd, "summary/update_ratio", 0, n, ur,
                                         (size_t)n * SM_L * SM_S), 0);
    double big[SM_L * SM_S * RESDIAG_N_BLOCK_SITES * F];
    for (int64_t i = 0; i < n; i++) {
        double nan_sum = 0, inf_sum = 0, bad = 0;
        for (int t = 0; t < 6; t++) {
            int64_t dims[8];
            int rank = 0;
            double seen = 0;
            if (t == 5) { /* no model-level parameters in this run */
                ck_assert_double_eq(ob[i * 6 + t], 0);
                continue;
            }
            ck_assert_int_eq(resdiag_reader_dims(rd, stats[t], dims, 8, &rank), RESDIAG_OK);
            size_t per = 1;
            for (int k = 1; k < rank; k++)
                per *= (size_t)dims[k];
            ck_assert_int_eq(resdiag_reader_read(rd, stats[t], i, 1, big, per), RESDIAG_OK);
            for (size_t row = 0; row < per / F; row++) {
                const double *v = big + row * F;
                if (isnan(v[RESDIAG_FIELD_ROWS]))
                    continue;
                seen++;
                nan_sum += v[RESDIAG_FIELD_NAN_COUNT];
                inf_sum += v[RESDIAG_FIELD_INF_COUNT];
                bad += v[RESDIAG_FIELD_NAN_COUNT] + v[RESDIAG_FIELD_INF_COUNT] > 0;
            }
            ck_assert_double_eq(ob[i * 6 + t], seen);
        }
        ck_assert_double_eq(nf[i * 3 + 0], nan_sum);
        ck_assert_double_eq(nf[i * 3 + 1], inf_sum);
        ck_assert_double_eq(nf[i * 3 + 2], bad);
        /* what this run recorded: the NaNs and Infs put in, the sites observed */
        ck_assert_double_eq(nan_sum, i == 17 ? 1 : i == 25 ? 3 : 0);
        ck_assert_double_eq(inf_sum, i == 17 ? 2 : 0);
        int bwd = i >= 3 && i % 2 == 1;
        /* a run through resdiag_open: schema 3, every block site */
        ck_assert_double_eq(ob[i * 6 + 0], SM_L * SM_S * RESDIAG_N_BLOCK_SITES);
        ck_assert_double_eq(ob[i * 6 + 1], bwd ? SM_L * SM_S * RESDIAG_N_BLOCK_SITES : 0);
        ck_assert_double_eq(ob[i * 6 + 2], 1);
        ck_assert_double_eq(ob[i * 6 + 4], bwd ? SM_L : 0);
        for (int l = 0; l < SM_L; l++) {
            double f[F], u[U];
            int obs = 0;
            ck_assert_int_eq(resdiag_reader_site(rd, i, RESDIAG_FORWARD, l, SM_S - 1,
                                                 RESDIAG_STREAM_OUT, f, &obs), RESDIAG_OK);
            ck_assert(obs && xn[i * SM_L + l] == f[RESDIAG_FIELD_TOK_NORM_MEAN]);
            for (int s = 0; s < SM_S; s++) {
                ck_assert_int_eq(resdiag_reader_update(rd, i, l, s, u), RESDIAG_OK);
                ck_assert(isfinite(u[0]) && ur[(i * SM_L + l) * SM_S + s] == u[0]);
            }
        }
    }
    free(nf);
    free(ob);
    free(xn);
    free(ur);
    resdiag_reader_destroy(rd);

    /* the analysis: summary, summary ignored, no summary in the file */
    static const int64_t at[3] = { RESDIAG_STEP_FIRST, 20, RESDIAG_STEP_LAST };
    for (int k = 0; k < 3; k++) {
        resdiag_analysis *a = analyse(with, 1, at[k]), *b = analyse(with, 0, at[k]),
                         *c = analyse(old, 0, at[k]);
        expect_same_analysis(a, b);
        expect_same_analysis(a, c);
        /* and what was put in */
        int64_t step = -1;
        int layer = -9, sub = -9, site = -9;
        resdiag_direction dir = RESDIAG_BACKWARD;
        ck_assert_int_eq(resdiag_analysis_first_nonfinite(a, &step, &layer, &sub, &site, &dir),
                         1);
        ck_assert_int_eq(step, 170);
        ck_assert_int_eq(layer, 1);
        ck_assert_int_eq(sub, 0);
        ck_assert_int_eq(site, RESDIAG_NORM_OUT);
        ck_assert_int_eq(dir, RESDIAG_FORWARD);
        ck_assert_int_eq(a->nonfinite.n_bad_steps, 2);
        ck_assert(a->nonfinite.nan_total == 4 && a->nonfinite.inf_total == 2);
        /* gradients: the analysed step if it has them, else the first that has */
        ck_assert_int_eq(a->gradients.step, k == 0 ? 3 : k == 1 ? 3 : SM_STEPS - 1);
        resdiag_analysis_destroy(a);
        resdiag_analysis_destroy(b);
        resdiag_analysis_destroy(c);
    }
    /* a damaged summary that claims a non-finite value the tables do not
     * have: the analysis notices and takes the full tables */
    hid_t f2 = H5Fopen(with, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f2 >= 0);
    hid_t d = H5Dopen2(f2, "summary/nonfinite", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t start[2] = { 10, 0 }, cnt[2] = { 1, 3 };
    H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, cnt, NULL);
    hid_t ms = H5Screate_simple(2, cnt, NULL);
    const double lie[3] = { 7, 0, 1 };
    ck_assert_int_ge(H5Dwrite(d, H5T_NATIVE_DOUBLE, ms, sp, H5P_DEFAULT, lie), 0);
    H5Sclose(ms);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f2);
    resdiag_analysis *a = analyse(with, 1, RESDIAG_STEP_FIRST),
                     *c = analyse(old, 0, RESDIAG_STEP_FIRST);
    expect_same_analysis(a, c);
    resdiag_analysis_destroy(a);
    resdiag_analysis_destroy(c);

    /* the environment variable does what rd_h5_reader_summary = 0 does */
    setenv("RESDIAG_IGNORE_SUMMARY", "1", 1);
    resdiag_reader *e = open_or_fail(with);
    unsetenv("RESDIAG_IGNORE_SUMMARY");
    for (int i = 0; i < resdiag_reader_n_datasets(e); i++)
        ck_assert_ptr_null(strstr(resdiag_reader_dataset_name(e, i), "summary"));
    resdiag_reader_destroy(e);
}
END_TEST

/* ------------------------------------------------------------ round trip */

/* The on-disk size of the first chunk of the object header at addr
 * (version 2 header, "OHDR"), read from the file's bytes; 0 if not one. */
static long long ohdr_chunk0_bytes(FILE *fp, long long addr)
{
    unsigned char b[32];
    if (fseek(fp, (long)addr, SEEK_SET) != 0 || fread(b, 1, sizeof b, fp) != sizeof b
        || memcmp(b, "OHDR", 4) != 0)
        return 0;
    int flags = b[5], p = 6;
    if (flags & 0x20)
        p += 16; /* times */
    if (flags & 0x10)
        p += 4; /* attribute phase change */
    int n = 1 << (flags & 3);
    long long size = 0;
    for (int i = n - 1; i >= 0; i--)
        size = size * 256 + b[p + i];
    return p + n + size + 4; /* prefix, messages, checksum */
}

typedef struct header_scan {
    FILE *fp;
    int growing, crossing;
    char names[512];
} header_scan;

static herr_t scan_header(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    header_scan *hs = data;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    ck_assert_msg(strstr(name, ".moving") == NULL, "temporary dataset left: %s", name);
    hid_t ds = H5Dopen2(obj, name, H5P_DEFAULT);
    hid_t sp = H5Dget_space(ds);
    hsize_t cur[8], max[8];
    int rank = H5Sget_simple_extent_dims(sp, cur, max);
    H5Sclose(sp);
    H5Dclose(ds);
    if (rank < 1 || max[0] != H5S_UNLIMITED)
        return 0; /* never rewritten after creation */
    long long len = ohdr_chunk0_bytes(hs->fp, (long long)info->addr);
    ck_assert_msg(len > 0, "%s: no object header at %llu", name, (unsigned long long)info->addr);
    hs->growing++;
    if ((long long)info->addr / 4096 != ((long long)info->addr + len - 1) / 4096) {
        hs->crossing++;
        size_t used = strlen(hs->names);
        snprintf(hs->names + used, sizeof hs->names - used, " %s@%llu+%lld", name,
                 (unsigned long long)info->addr, len);
    }
    return 0;
}

/* HDF5 rewrites a growing dataset's header at every append; a header that
 * crosses a page boundary can be torn by a SIGKILL between the pages of
 * that write (a run file lost in test-kill, about once in 350 kills). */
START_TEST(h5_growing_headers_stay_in_one_page)
{
    int growing = 0, reserve = rd_h5_writer_reserve;
    rd_h5_writer_reserve = _i; /* paged aggregation, and the default layout */
    for (int L = 1; L <= 4; L++)
        for (int S = 1; S <= 3; S++)
            for (int v = 0; v < 4; v++) {
                spec sp = { L, S, v & 1 ? 2 : 0, v & 1 ? 1 : 0, v & 2 ? 8 : 0, 1 + v, v == 3 };
                run r;
                make_run(&r, &sp);
                const char *path = tpath(_i ? "headers-paged.h5" : "headers.h5");
                write_run(path, &r, 2);
                header_scan hs = { fopen(path, "rb"), 0, 0, "" };
                ck_assert_ptr_nonnull(hs.fp);
                hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
                ck_assert(f >= 0);
                ck_assert(H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, scan_header, &hs,
                                    H5O_INFO_BASIC) >= 0);
                H5Fclose(f);
                fclose(hs.fp);
                ck_assert_msg(hs.crossing == 0, "L %d S %d v %d: headers crossing a page:%s", L,
                              S, v, hs.names);
                growing += hs.growing;
                unlink(path);
            }
    ck_assert_int_gt(growing, 48 * 5); /* the scan saw the tables */
    rd_h5_writer_reserve = reserve;
}
END_TEST

/* ------------------------------------------------------- dimension scales */

/* What every axis name of the `axes` attribute must get, written out here
 * rather than taken from the writer: its scale dataset and its label. */
static const char *const AXIS_SCALE[][3] = {
    { "step", "/steps", "step" },
    { "layer", "/layer", "layer" },
    { "sublayer", "/sublayer", "sublayer" },
    { "site", "/site", "site" },
    { "model_site", "/model_site", "model_site" },
    { "param", "/param", "param" },
    { "model_param", "/model_param", "model_param" },
    { "field", "/field", "field" },
    { "update_field", "/update_field", "update_field" },
    { "nonfinite_field", "/nonfinite_field", "nonfinite_field" },
    { "stats_table", "/stats_table", "stats_table" },
    { "sketch", "/sketch", "sketch" },
    { "status", "/status", "status" },
    { "reason_byte", "/reason_byte", "reason_byte" },
};

static herr_t scale_name_cb(hid_t did, unsigned dim, hid_t dsid, void *data)
{
    (void)did;
    (void)dim;
    char *name = data;
    ck_assert_int_gt(H5Iget_name(dsid, name, 128), 0);
    return 1; /* the first scale is enough: there is one */
}

/* Axis `idx` of dataset `name` has exactly one scale, `scale`, attached
 * both ways, and the label `label`; the scale is as long as the axis. */
static void expect_axis_scale(hid_t f, const char *name, unsigned idx, const char *scale,
                              const char *label)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), sc = H5Dopen2(f, scale, H5P_DEFAULT);
    ck_assert_msg(ds >= 0 && sc >= 0, "%s, %s", name, scale);
    ck_assert_int_gt(H5DSis_scale(sc), 0);
    ck_assert_int_eq(H5DSis_scale(ds), 0);
    ck_assert_msg(H5DSget_num_scales(ds, idx) == 1, "%s axis %u: %d scales", name, idx,
                  H5DSget_num_scales(ds, idx));
    char got[128] = "";
    int it = 0;
    ck_assert_int_ge(H5DSiterate_scales(ds, idx, &it, scale_name_cb, got), 0);
    ck_assert_msg(strcmp(got, scale) == 0, "%s axis %u: scale %s, not %s", name, idx, got, scale);
    ck_assert_int_gt(H5DSis_attached(ds, sc, idx), 0);
    char lab[64] = "";
    ck_assert_int_gt(H5DSget_label(ds, idx, lab, sizeof lab), 0);
    ck_assert_msg(strcmp(lab, label) == 0, "%s axis %u: label %s, not %s", name, idx, lab, label);
    hsize_t dims[8], sdim = 0;
    hid_t sp = H5Dget_space(ds), ssp = H5Dget_space(sc);
    ck_assert_int_gt(H5Sget_simple_extent_dims(sp, dims, NULL), (int)idx);
    ck_assert_int_eq(H5Sget_simple_extent_dims(ssp, &sdim, NULL), 1);
    ck_assert_msg(sdim == dims[idx], "%s axis %u: %llu long, its scale %llu", name, idx,
                  (unsigned long long)dims[idx], (unsigned long long)sdim);
    H5Sclose(sp);
    H5Sclose(ssp);
    ck_assert_int_eq(H5Aexists(ds, "resdiag_scale_room"), 0);
    H5Dclose(sc);
    H5Dclose(ds);
}

/* Every axis of dataset name, by its axes attribute; the number checked. */
static int expect_scales_of(hid_t f, const char *name)
{
    char axes[256];
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    ck_assert_msg(ds >= 0, "%s", name);
    hid_t a = H5Aopen(ds, "axes", H5P_DEFAULT), t = H5Aget_type(a);
    char *v = NULL;
    ck_assert_int_ge(H5Aread(a, t, &v), 0);
    snprintf(axes, sizeof axes, "%s", v);
    H5free_memory(v);
    H5Tclose(t);
    H5Aclose(a);
    H5Dclose(ds);
    unsigned idx = 0;
    for (char *tok = strtok(axes, ","); tok; tok = strtok(NULL, ","), idx++) {
        size_t k = 0;
        while (k < sizeof AXIS_SCALE / sizeof AXIS_SCALE[0] && strcmp(AXIS_SCALE[k][0], tok))
            k++;
        ck_assert_msg(k < sizeof AXIS_SCALE / sizeof AXIS_SCALE[0], "%s: axis %s", name, tok);
        expect_axis_scale(f, name, idx, AXIS_SCALE[k][1], AXIS_SCALE[k][2]);
    }
    return (int)idx;
}

static void expect_names_scale(hid_t f, const char *scale, const char *const *want, int n)
{
    hid_t ds = H5Dopen2(f, scale, H5P_DEFAULT);
    ck_assert_msg(ds >= 0, "%s", scale);
    char *got[32] = { 0 };
    ck_assert_int_le(n, 32);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    ck_assert_int_ge(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, got), 0);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(got[i] && strcmp(got[i], want[i]) == 0, "%s[%d] = %s, not %s", scale, i,
                      got[i] ? got[i] : "NULL", want[i]);
        H5free_memory(got[i]);
    }
    H5Tclose(t);
    H5Dclose(ds);
}

static void expect_int_scale(hid_t f, const char *scale, const long long *want, size_t n)
{
    hid_t ds = H5Dopen2(f, scale, H5P_DEFAULT);
    ck_assert_msg(ds >= 0, "%s", scale);
    long long got[64];
    ck_assert_uint_le(n, 64);
    ck_assert_int_ge(H5Dread(ds, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, got), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%zu] = %lld, not %lld", scale, i, got[i], want[i]);
    H5Dclose(ds);
}

/* h5py, xarray and HDFView name axes by HDF5 dimension scales: every axis
 * of every dataset has its scale and label, the record axis the step
 * numbers (1000, 1003, ...: recorded every third step), with and without
 * paged aggregation (the room kept for the scales in growing headers). */
START_TEST(h5_every_axis_has_its_dimension_scale)
{
    const spec *specs[] = { &FULL, &BARE };
    int reserve = rd_h5_writer_reserve;
    rd_h5_writer_reserve = _i;
    for (int v = 0; v < 2; v++) {
        run r;
        make_run(&r, specs[v]);
        const char *path = tpath(_i ? "scales-paged.h5" : "scales.h5");
        write_run(path, &r, 7);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        ck_assert(f >= 0);
        int axes = expect_scales_of(f, "step_time");
        for (int t = 0; t < RD_N_SUMMARY; t++)
            axes += expect_scales_of(f, r.lay.summary[t].name);
        for (int t = 0; t < RD_N_TABLES; t++) {
            if (r.lay.tables[t].count == 0)
                continue;
            axes += expect_scales_of(f, r.lay.tables[t].name);
            if (r.lay.tables[t].callsite_name)
                axes += expect_scales_of(f, r.lay.tables[t].callsite_name);
        }
        ck_assert_int_gt(axes, v == 0 ? 80 : 50);
        long long steps[7], layers[8], buckets[8];
        for (int i = 0; i < 7; i++)
            steps[i] = 1000 + 3 * i;
        for (int i = 0; i < 8; i++)
            layers[i] = buckets[i] = i;
        expect_int_scale(f, "/steps", steps, 7);
        expect_int_scale(f, "/layer", layers, (size_t)r.sp.L);
        expect_names_scale(f, "/sublayer", SUB, r.sp.S);
        const char *sites[B], *msites[M], *fields[F];
        for (int i = 0; i < B; i++)
            sites[i] = resdiag_site_name((resdiag_site)i);
        for (int i = 0; i < M; i++)
            msites[i] = resdiag_site_name((resdiag_site)(RESDIAG_EMBED_OUT + i));
        for (int i = 0; i < F; i++)
            fields[i] = resdiag_field_name((resdiag_field)i);
        expect_names_scale(f, "/site", sites, B);
        expect_names_scale(f, "/model_site", msites, M);
        expect_names_scale(f, "/field", fields, F);
        if (r.sp.P) {
            expect_names_scale(f, "/param", LP, r.sp.P);
            expect_names_scale(f, "/model_param", MP, r.sp.Q);
            expect_int_scale(f, "/sketch", buckets, (size_t)r.sp.K);
        } else {
            ck_assert_int_eq(H5Lexists(f, "param", H5P_DEFAULT), 0);
            ck_assert_int_eq(H5Lexists(f, "sketch", H5P_DEFAULT), 0);
        }
        /* the layer scale says what the report calls the layer */
        hid_t ly = H5Dopen2(f, "/layer", H5P_DEFAULT);
        hid_t a = H5Aopen(ly, "description", H5P_DEFAULT), t = H5Aget_type(a);
        char *desc = NULL;
        ck_assert_int_ge(H5Aread(a, t, &desc), 0);
        ck_assert_ptr_nonnull(strstr(desc, "k is layer + 1"));
        H5free_memory(desc);
        H5Tclose(t);
        H5Aclose(a);
        H5Dclose(ly);
        ck_assert_int_eq(H5Aexists(f, "resdiag_scale_room"), 0);
        H5Fclose(f);
        /* and the reader reads it as before */
        resdiag_reader *rd = open_or_fail(path);
        check_values(rd, &r, 7, 1);
        resdiag_reader_destroy(rd);
        unlink(path);
    }
    rd_h5_writer_reserve = reserve;
}
END_TEST

START_TEST(h5_roundtrip_every_value_and_attribute)
{
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("roundtrip.h5");
    write_run(path, &r, 10);
    resdiag_reader *rd = open_or_fail(path);
    check_info(rd, &r, 10);
    check_values(rd, &r, 10, 1);
    check_series_and_datasets(rd, &r, 10);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(h5_roundtrip_without_sketch_or_params)
{
    run r;
    make_run(&r, &BARE);
    const char *path = tpath("bare.h5");
    write_run(path, &r, 7);
    resdiag_reader *rd = open_or_fail(path);
    check_info(rd, &r, 7);
    const resdiag_run_info *in = resdiag_reader_info(rd);
    ck_assert_int_eq(in->n_layer_params, 0);
    ck_assert_int_eq(in->n_model_params, 0);
    ck_assert_int_eq(in->n_meta, 0);
    ck_assert_str_eq(in->description, "");
    ck_assert_int_eq(in->block, RESDIAG_BLOCK_SEQUENTIAL);
    ck_assert_int_eq(in->declared_placement, RESDIAG_PLACEMENT_UNDECLARED);
    ck_assert_int_eq(in->norm_kind, RESDIAG_NORM_UNDECLARED);
    check_values(rd, &r, 7, 1);
    check_series_and_datasets(rd, &r, 7);
    double out[F];
    int obs = 1;
    log_reset();
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, out),
                     RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(g_nlog, 1);
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, RESDIAG_BACKWARD, 0, 0, RESDIAG_LOGITS, out),
                     RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, 0, "mlp.w2", out, &obs), RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(obs, 0);
    ck_assert_int_eq(resdiag_reader_param(rd, 0, RESDIAG_MODEL_LEVEL, "head.w", out, NULL),
                     RESDIAG_E_NOT_FOUND);
    int64_t dims[8];
    int rank;
    ck_assert_int_eq(resdiag_reader_dims(rd, "forward/site_sketch", dims, 8, &rank),
                     RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(resdiag_reader_dims(rd, "backward/param_stats", dims, 8, &rank),
                     RESDIAG_E_NOT_FOUND);
    resdiag_reader_destroy(rd);

    /* the absent tables are absent from the file too; the empty name lists
     * are zero-length */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    ck_assert_int_eq(H5Lexists(f, "backward/param_stats", H5P_DEFAULT), 0);
    ck_assert_int_eq(H5Lexists(f, "forward/site_sketch", H5P_DEFAULT), 0);
    hid_t a = H5Aopen(f, "layer_param_names", H5P_DEFAULT);
    hid_t sp = H5Aget_space(a);
    ck_assert_int_eq(H5Sget_simple_extent_npoints(sp), 0);
    H5Sclose(sp);
    H5Aclose(a);
    H5Fclose(f);
}
END_TEST

START_TEST(h5_zero_steps_file_opens_with_no_steps)
{
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("empty-run.h5");
    rd_writer *w = create_or_fail(path, &r);
    close_ok(w);
    resdiag_reader *rd = open_or_fail(path);
    check_info(rd, &r, 0);
    double out[F];
    ck_assert_int_eq(resdiag_reader_site(rd, 0, 0, 0, 0, 0, out, NULL), RESDIAG_E_NOT_FOUND);
    ck_assert_int_eq(resdiag_reader_steps(rd, NULL, 0), RESDIAG_OK);
    ck_assert_str_eq(resdiag_reader_callsite(rd, 0, 0, 0, RESDIAG_NORM_IN), "");
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(h5_callsites_keep_the_end_of_long_paths)
{
    run r;
    make_run(&r, &BARE);
    const char *path = tpath("callsites.h5");
    rd_callsite *cs = make_callsites(&r, 0);
    /* a path that is cut inside a multi-byte character: "é" is 2 bytes */
    char longp[400] = "/";
    while (strlen(longp) < 300)
        strcat(longp, "\xc3\xa9");
    strcat(longp, "/end.c");
    cs[0].file = longp;
    cs[0].line = 123456;
    cs[1].file = "";
    cs[1].line = 5;
    char exact[RD_CALLSITE_LEN];
    memset(exact, 'x', sizeof exact);
    exact[RD_CALLSITE_LEN - 1 - 3] = '\0'; /* 124 bytes + ":42" = 127: fits exactly */
    cs[2].file = exact;
    cs[2].line = 42;
    rd_writer *w = create_or_fail(path, &r);
    append_ok(w, &r, 0, 1, cs, 1);
    close_ok(w);
    resdiag_reader *rd = open_or_fail(path);
    /* slot 0 = forward, layer 0, sublayer 0, stream_in */
    const char *got = resdiag_reader_callsite(rd, 0, 0, 0, RESDIAG_STREAM_IN);
    ck_assert_uint_le(strlen(got), RD_CALLSITE_LEN - 1);
    ck_assert_int_eq(strncmp(got, "...", 3), 0);
    ck_assert((got[3] & 0xC0) != 0x80); /* starts at a whole character */
    ck_assert_str_eq(got + strlen(got) - strlen("/end.c:123456"), "/end.c:123456");
    ck_assert_str_eq(resdiag_reader_callsite(rd, 0, 0, 0, RESDIAG_NORM_IN), ":5");
    char want[RD_CALLSITE_LEN + 8];
    snprintf(want, sizeof want, "%s:42", exact);
    ck_assert_uint_eq(strlen(want), RD_CALLSITE_LEN - 1);
    ck_assert_str_eq(resdiag_reader_callsite(rd, 0, 0, 0, RESDIAG_NORM_OUT), want);
    resdiag_reader_destroy(rd);
    free(cs);
}
END_TEST

/* The file explains itself to h5py / h5dump users. */
START_TEST(h5_every_dataset_is_self_describing)
{
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("described.h5");
    write_run(path, &r, 2);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    const char *names[2 * RD_N_TABLES + RD_N_SUMMARY + 2];
    int n = 0;
    names[n++] = "steps";
    names[n++] = "step_time";
    for (int t = 0; t < RD_N_SUMMARY; t++)
        names[n++] = r.lay.summary[t].name;
    for (int t = 0; t < RD_N_TABLES; t++) {
        if (r.lay.tables[t].count == 0)
            continue;
        names[n++] = r.lay.tables[t].name;
        if (r.lay.tables[t].callsite_name)
            names[n++] = r.lay.tables[t].callsite_name;
    }
    for (int i = 0; i < n; i++) {
        hid_t d = H5Dopen2(f, names[i], H5P_DEFAULT);
        ck_assert_msg(d >= 0, "%s", names[i]);
        ck_assert_int_gt(H5Aexists(d, "description"), 0);
        ck_assert_int_gt(H5Aexists(d, "units"), 0);
        ck_assert_int_gt(H5Aexists(d, "axes"), 0);
        hid_t dcpl = H5Dget_create_plist(d);
        ck_assert_int_eq(H5Pget_layout(dcpl), H5D_CHUNKED);
        H5Pclose(dcpl);
        H5Dclose(d);
    }
    /* a stats table: NaN fill, unlimited steps, field names */
    hid_t d = H5Dopen2(f, "forward/site_stats", H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d);
    double fill = 0;
    ck_assert_int_ge(H5Pget_fill_value(dcpl, H5T_NATIVE_DOUBLE, &fill), 0);
    ck_assert(isnan(fill));
    hid_t sp = H5Dget_space(d);
    hsize_t cur[5], max[5];
    ck_assert_int_eq(H5Sget_simple_extent_dims(sp, cur, max), 5);
    ck_assert(max[0] == H5S_UNLIMITED);
    ck_assert(cur[0] == 2 && cur[1] == 3 && cur[2] == 2 && cur[3] == B && cur[4] == F);
    ck_assert_int_gt(H5Aexists(d, "field_names"), 0);
    ck_assert_int_gt(H5Aexists(d, "field_units"), 0);
    ck_assert_int_gt(H5Aexists(d, "site_names"), 0);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Dclose(d);
    d = H5Dopen2(f, "forward/update", H5P_DEFAULT);
    ck_assert_int_gt(H5Aexists(d, "update_field_names"), 0);
    H5Dclose(d);
    d = H5Dopen2(f, "summary/nonfinite", H5P_DEFAULT);
    ck_assert_int_gt(H5Aexists(d, "nonfinite_field_names"), 0);
    H5Dclose(d);
    d = H5Dopen2(f, "summary/observed", H5P_DEFAULT);
    ck_assert_int_gt(H5Aexists(d, "stats_table_names"), 0);
    H5Dclose(d);
    d = H5Dopen2(f, "summary/update_ratio", H5P_DEFAULT);
    ck_assert_int_gt(H5Aexists(d, "sublayer_names"), 0);
    H5Dclose(d);
    /* no modification times anywhere: reproducible files */
    H5O_info_t oi;
    ck_assert_int_ge(H5Oget_info_by_name2(f, "forward/site_stats", &oi, H5O_INFO_TIME,
                                          H5P_DEFAULT), 0);
    ck_assert_int_eq(oi.mtime, 0);
    ck_assert_int_eq(oi.ctime, 0);
    ck_assert_int_ge(H5Oget_info_by_name2(f, "meta", &oi, H5O_INFO_TIME, H5P_DEFAULT), 0);
    ck_assert_int_eq(oi.mtime, 0);
    /* root attributes that the API does not expose */
    const char *root[] = { "host", "site_names", "model_site_names", "field_names",
                           "field_units" };
    for (size_t i = 0; i < sizeof root / sizeof root[0]; i++)
        ck_assert_int_gt(H5Aexists(f, root[i]), 0);
    H5Fclose(f);

    /* a cleanly closed file ends where HDF5's allocation ends: the space
     * reserved while writing was given back */
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hsize_t h5size = 0;
    ck_assert_int_ge(H5Fget_filesize(f, &h5size), 0);
    H5Fclose(f);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq((hsize_t)sb.st_size, h5size);
}
END_TEST

/* A file as a dying writer may leave it: datasets longer than what was
 * committed. Only steps whose step number was written count, and never
 * more than the shortest dataset. */
static void set_extent(hid_t f, const char *name, hsize_t n)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    ck_assert_msg(d >= 0, "%s", name);
    hid_t sp = H5Dget_space(d);
    hsize_t dims[8];
    int rank = H5Sget_simple_extent_dims(sp, dims, NULL);
    ck_assert_int_gt(rank, 0);
    dims[0] = n;
    ck_assert_int_ge(H5Dset_extent(d, dims), 0);
    H5Sclose(sp);
    H5Dclose(d);
}

static void set_step(hid_t f, hsize_t i, long long v)
{
    hid_t d = H5Dopen2(f, "steps", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t one = 1;
    H5Sselect_hyperslab(sp, H5S_SELECT_SET, &i, NULL, &one, NULL);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    ck_assert_int_ge(H5Dwrite(d, H5T_NATIVE_LLONG, ms, sp, H5P_DEFAULT, &v), 0);
    H5Sclose(ms);
    H5Sclose(sp);
    H5Dclose(d);
}

static int64_t n_steps_of(const char *path)
{
    resdiag_reader *rd = open_or_fail(path);
    int64_t n = resdiag_reader_info(rd)->n_steps;
    resdiag_reader_destroy(rd);
    return n;
}

START_TEST(h5_reader_counts_only_committed_steps)
{
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("partial.h5");
    write_run(path, &r, 5);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f >= 0);
    /* every dataset 3 steps longer, nothing written there: fill values */
    set_extent(f, "steps", 8);
    set_extent(f, "step_time", 8);
    for (int t = 0; t < RD_N_TABLES; t++)
        if (r.lay.tables[t].count > 0)
            set_extent(f, r.lay.tables[t].name, 8);
    for (int t = 0; t < RD_N_SUMMARY; t++)
        set_extent(f, r.lay.summary[t].name, 8);
    H5Fclose(f);
    ck_assert_int_eq(n_steps_of(path), 5);

    /* one more step number: it counts */
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    set_step(f, 5, step_no(5));
    H5Fclose(f);
    ck_assert_int_eq(n_steps_of(path), 6);

    /* a step number that does not increase (zeros read past the end of a
     * damaged file look like that) ends the steps, even with a valid one
     * after it */
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    set_step(f, 6, step_no(5));
    set_step(f, 7, step_no(7));
    H5Fclose(f);
    ck_assert_int_eq(n_steps_of(path), 6);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    set_step(f, 6, 0);
    H5Fclose(f);
    ck_assert_int_eq(n_steps_of(path), 6);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    set_step(f, 6, step_no(6));
    H5Fclose(f);
    ck_assert_int_eq(n_steps_of(path), 8);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    set_step(f, 6, -1);
    H5Fclose(f);
    ck_assert_int_eq(n_steps_of(path), 6);

    /* the shortest dataset bounds them */
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    set_extent(f, "forward/update", 4);
    H5Fclose(f);
    resdiag_reader *rd = open_or_fail(path);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 4);
    check_values(rd, &r, 4, 0); /* 5 steps = batches 1 + 4: call sites v0 */
    double out[F];
    ck_assert_int_eq(resdiag_reader_site(rd, 4, 0, 0, 0, 0, out, NULL), RESDIAG_E_NOT_FOUND);
    resdiag_reader_destroy(rd);
}
END_TEST

/* ---------------------------------------------------------------- errors */

static void expect_open_error(const char *path, resdiag_status want, const char *in_msg)
{
    resdiag_reader *rd = (resdiag_reader *)0x1;
    log_reset();
    resdiag_status st = resdiag_reader_open(&rd, path);
    ck_assert_msg(st == want, "%s: got %d want %d (%s)", path, st, want, g_log);
    ck_assert_ptr_null(rd);
    ck_assert_int_eq(g_nlog, 1);
    ck_assert_msg(strstr(g_log, in_msg) != NULL, "log '%s' lacks '%s'", g_log, in_msg);
}

START_TEST(h5_reader_rejects_what_is_not_a_run_file)
{
    expect_open_error(tpath("no-such-file.h5"), RESDIAG_E_IO, "no-such-file.h5");
    const char *txt = tpath("text.h5");
    FILE *fp = fopen(txt, "w");
    fputs("step,loss\n1,2.5\n", fp);
    fclose(fp);
    expect_open_error(txt, RESDIAG_E_FORMAT, "not an HDF5 file");
    const char *empty = tpath("zero-bytes.h5");
    fclose(fopen(empty, "w"));
    expect_open_error(empty, RESDIAG_E_FORMAT, "not an HDF5 file");
    expect_open_error(g_dir, RESDIAG_E_FORMAT, "not a regular file");
    /* the signature, then garbage */
    const char *junk = tpath("junk.h5");
    fp = fopen(junk, "wb");
    fwrite(RD_H5_SIGNATURE, 1, 8, fp);
    for (int i = 0; i < 2000; i++)
        fputc(i * 7 + 3, fp);
    fclose(fp);
    expect_open_error(junk, RESDIAG_E_FORMAT, "junk.h5");
    expect_open_error(NULL, RESDIAG_E_NULL, "client bug");
    log_reset();
    ck_assert_int_eq(resdiag_reader_open(NULL, txt), RESDIAG_E_NULL);
    ck_assert_int_eq(g_nlog, 1);
}
END_TEST

START_TEST(h5_reader_rejects_plain_hdf5_files)
{
    /* a valid HDF5 file, with a 512-byte user block so that the signature
     * is not at offset 0 */
    const char *path = tpath("plain.h5");
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_userblock(fcpl, 512);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    ck_assert(f >= 0);
    hsize_t d = 4;
    hid_t sp = H5Screate_simple(1, &d, NULL);
    hid_t ds = H5Dcreate2(f, "x", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
    H5Pclose(fcpl);
    expect_open_error(path, RESDIAG_E_FORMAT, "not a resdiag run file");
}
END_TEST

/* Rewrites root attribute `name` of a run file as a scalar int. */
static void set_int_attr(const char *path, const char *name, int v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f >= 0);
    if (H5Aexists(f, name) > 0)
        ck_assert_int_ge(H5Adelete(f, name), 0);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(a >= 0);
    ck_assert_int_ge(H5Awrite(a, H5T_NATIVE_INT, &v), 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(f);
}

static void delete_attr(const char *path, const char *obj, const char *name)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f >= 0);
    ck_assert_int_ge(H5Adelete_by_name(f, obj, name, H5P_DEFAULT), 0);
    H5Fclose(f);
}

START_TEST(h5_reader_checks_versions_and_attributes)
{
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("tampered.h5");
    r.hdr.overwrite = 1; /* one path, written again for each case */

    write_run(path, &r, 2);
    set_int_attr(path, "schema_version", 99);
    expect_open_error(path, RESDIAG_E_VERSION, "schema version 99");

    write_run(path, &r, 2);
    set_int_attr(path, "schema_version", 0);
    expect_open_error(path, RESDIAG_E_FORMAT, "schema_version");

    /* out of range */
    write_run(path, &r, 2);
    set_int_attr(path, "n_layers", 0);
    expect_open_error(path, RESDIAG_E_FORMAT, "n_layers");
    write_run(path, &r, 2);
    set_int_attr(path, "sketch_size", 65);
    expect_open_error(path, RESDIAG_E_FORMAT, "sketch_size");
    write_run(path, &r, 2);
    set_int_attr(path, "declared_mix_layers", 4);
    expect_open_error(path, RESDIAG_E_FORMAT, "declared_mix_layers");

    /* a string where an int belongs, and the other way round */
    write_run(path, &r, 2);
    set_int_attr(path, "sublayer_names", 2);
    expect_open_error(path, RESDIAG_E_FORMAT, "sublayer_names");
    write_run(path, &r, 2);
    set_int_attr(path, "block", 1);
    expect_open_error(path, RESDIAG_E_FORMAT, "block");

    /* missing attributes */
    write_run(path, &r, 2);
    delete_attr(path, ".", "field_names");
    expect_open_error(path, RESDIAG_E_FORMAT, "field_names");
    write_run(path, &r, 2);
    delete_attr(path, ".", "created_utc");
    expect_open_error(path, RESDIAG_E_FORMAT, "created_utc");

    /* the datasets no longer match the model the attributes describe */
    write_run(path, &r, 2);
    set_int_attr(path, "n_layers", 4);
    expect_open_error(path, RESDIAG_E_FORMAT, "forward/site_stats");
    write_run(path, &r, 2);
    set_int_attr(path, "sketch_size", 4);
    expect_open_error(path, RESDIAG_E_FORMAT, "forward/site_sketch");

    /* a dataset gone */
    write_run(path, &r, 2);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(H5Ldelete(f, "backward/model_callsite", H5P_DEFAULT), 0);
    H5Fclose(f);
    expect_open_error(path, RESDIAG_E_FORMAT, "backward/model_callsite");

    /* a non-string metadata value */
    write_run(path, &r, 2);
    f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gopen2(f, "meta", H5P_DEFAULT);
    hid_t sp = H5Screate(H5S_SCALAR);
    int v = 3;
    hid_t a = H5Acreate2(g, "epochs", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, &v);
    H5Aclose(a);
    H5Sclose(sp);
    H5Gclose(g);
    H5Fclose(f);
    expect_open_error(path, RESDIAG_E_FORMAT, "epochs");
}
END_TEST

START_TEST(h5_reader_checks_every_argument)
{
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("args.h5");
    write_run(path, &r, 3);
    resdiag_reader *rd = open_or_fail(path);
    double out[64];
    int obs = 7;
#define EXPECT(call, want)                                                  \
    do {                                                                    \
        log_reset();                                                        \
        resdiag_status st_ = (call);                                        \
        ck_assert_msg(st_ == (want), "%s: %d", #call, st_);                 \
        ck_assert_int_eq(g_nlog, 1);                                        \
    } while (0)
    EXPECT(resdiag_reader_site(rd, 0, 0, -1, 0, RESDIAG_STREAM_OUT, out, &obs), RESDIAG_E_RANGE);
    ck_assert_int_eq(obs, 0);
    ck_assert(strstr(g_log, "layer -1") != NULL);
    EXPECT(resdiag_reader_site(rd, 0, 0, 3, 0, RESDIAG_STREAM_OUT, out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 0, 0, 0, 2, RESDIAG_STREAM_OUT, out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 0, 0, 0, -1, RESDIAG_STREAM_OUT, out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 0, 0, 0, 0, (resdiag_site)RESDIAG_N_BLOCK_SITES, out, &obs),
           RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 0, 0, 0, 0, (resdiag_site)99, out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 0, 0, 0, 0, (resdiag_site)15, out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 0, 0, 0, 0, (resdiag_site)20, out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 0, 0, 0, 0, (resdiag_site)-1, out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 0, (resdiag_direction)2, 0, 0, 0, out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_site(rd, 3, 0, 0, 0, 0, out, &obs), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_site(rd, -1, 0, 0, 0, 0, out, &obs), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_site(rd, 0, 0, 0, 0, 0, NULL, &obs), RESDIAG_E_NULL);
    EXPECT(resdiag_reader_site(NULL, 0, 0, 0, 0, 0, out, &obs), RESDIAG_E_NULL);
    EXPECT(resdiag_reader_sketch(rd, 0, 0, 3, 0, 0, out), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_sketch(rd, 3, 0, 0, 0, 0, out), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_param(rd, 0, 3, "mlp.w2", out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_param(rd, 0, -2, "mlp.w2", out, &obs), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_param(rd, 0, 0, "mlp.w3", out, &obs), RESDIAG_E_NOT_FOUND);
    ck_assert(strstr(g_log, "mlp.w3") != NULL);
    EXPECT(resdiag_reader_param(rd, 0, 0, "head.w", out, &obs), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_param(rd, 0, RESDIAG_MODEL_LEVEL, "mlp.w2", out, &obs),
           RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_param(rd, 9, 0, "mlp.w2", out, &obs), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_param(rd, 0, 0, NULL, out, &obs), RESDIAG_E_NULL);
    EXPECT(resdiag_reader_update(rd, 0, 0, 2, out), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_update(rd, 0, 3, 0, out), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_update(rd, 3, 0, 0, out), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_series(rd, 0, 0, 0, 0, (resdiag_field)F, out, 3), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_series(rd, 0, 0, 0, 0, (resdiag_field)-1, out, 3), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_series(rd, 0, 0, 0, 0, 0, out, 4), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_series(rd, 0, 0, 0, 0, 0, out, -1), RESDIAG_E_INVALID);
    EXPECT(resdiag_reader_series(rd, 0, 7, 0, 0, 0, out, 1), RESDIAG_E_RANGE);
    EXPECT(resdiag_reader_steps(rd, (int64_t *)out, 4), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_steps(rd, (int64_t *)out, -1), RESDIAG_E_INVALID);
    int64_t dims[8];
    int rank = 0;
    EXPECT(resdiag_reader_dims(rd, "forward/nothing", dims, 8, &rank), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_dims(rd, "forward/site_stats", dims, 4, &rank), RESDIAG_E_INVALID);
    ck_assert_int_eq(rank, 5);
    EXPECT(resdiag_reader_read(rd, "forward/model_stats", 0, 1, out, 4 * F - 1),
           RESDIAG_E_INVALID);
    EXPECT(resdiag_reader_read(rd, "forward/model_stats", 2, 2, out, 64), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_read(rd, "forward/model_stats", -1, 1, out, 64), RESDIAG_E_INVALID);
    EXPECT(resdiag_reader_read(rd, "forward/site_callsite", 0, 1, out, 64), RESDIAG_E_NOT_FOUND);
    EXPECT(resdiag_reader_refresh(NULL), RESDIAG_E_NULL);
#undef EXPECT
    /* the call site of a bad site is "" and a logged client bug */
    log_reset();
    ck_assert_str_eq(resdiag_reader_callsite(rd, 0, 5, 0, 0), "");
    ck_assert_int_eq(g_nlog, 1);
    ck_assert_str_eq(resdiag_reader_callsite(NULL, 0, 0, 0, 0), "");
    /* a window that ends exactly at the last step is fine */
    double two[2 * M * F];
    ck_assert_int_eq(resdiag_reader_read(rd, "forward/model_stats", 1, 2, two, 2 * M * F),
                     RESDIAG_OK);
    ck_assert(same(two[M * F + 1], expect(&r.lay, 2, r.lay.tables[RD_T_FWD_MODEL].offset + 1)));
    ck_assert_int_eq(resdiag_reader_n_datasets(NULL), 0);
    ck_assert_ptr_null(resdiag_reader_info(NULL));
    resdiag_reader_destroy(rd);
    resdiag_reader_destroy(NULL);
}
END_TEST

START_TEST(h5_hdf5_never_prints_and_caller_setting_survives)
{
    run r;
    make_run(&r, &BARE);
    const char *path = tpath("quiet.h5");
    write_run(path, &r, 1);
    set_int_attr(path, "n_layers", 9); /* shape errors inside HDF5 calls */
    const char *plain = tpath("quiet-plain.h5");
    hid_t f = H5Fcreate(plain, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);

    /* HDF5 printing its stack would go to fd 2 */
    fflush(stderr);
    int saved = dup(2);
    const char *errf = tpath("stderr.txt");
    int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    H5Eset_auto2(H5E_DEFAULT, (H5E_auto2_t)H5Eprint2, stderr);
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, path), RESDIAG_E_FORMAT);
    ck_assert_int_eq(resdiag_reader_open(&rd, plain), RESDIAG_E_FORMAT);
    ck_assert_int_eq(resdiag_reader_open(&rd, tpath("missing-dir/x.h5")), RESDIAG_E_IO);
    rd_writer *w = NULL;
    char err[1024];
    ck_assert_int_eq(rd_writer_create(&w, tpath("missing-dir/x.h5"), &r.hdr, err, sizeof err),
                     RESDIAG_E_IO);
    H5E_auto2_t fn = NULL;
    void *data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &fn, &data);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    ck_assert_ptr_eq((void *)fn, (void *)H5Eprint2);
    ck_assert_ptr_eq(data, stderr);
    struct stat sb;
    ck_assert_int_eq(stat(errf, &sb), 0);
    ck_assert_int_eq(sb.st_size, 0);
}
END_TEST

START_TEST(h5_writer_errors)
{
    run r;
    make_run(&r, &FULL);
    rd_writer *w = (rd_writer *)0x1;
    char err[1024] = "";
    ck_assert_int_eq(rd_writer_create(&w, tpath("nodir/run.h5"), &r.hdr, err, sizeof err),
                     RESDIAG_E_IO);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(err, "nodir/run.h5") && strstr(err, "No such file"), "%s", err);
    ck_assert_ptr_null(strchr(err, '\n'));
    ck_assert_int_eq(rd_writer_create(&w, NULL, &r.hdr, err, sizeof err), RESDIAG_E_NULL);
    r.hdr.record_chunk_steps = 0;
    ck_assert_int_eq(rd_writer_create(&w, tpath("x.h5"), &r.hdr, err, sizeof err),
                     RESDIAG_E_INVALID);
    r.hdr.record_chunk_steps = 4;
    /* an empty metadata key */
    const char *bad_meta[] = { "", "v" };
    r.m.meta = bad_meta;
    r.m.n_meta = 1;
    ck_assert_int_eq(rd_writer_create(&w, tpath("badmeta.h5"), &r.hdr, err, sizeof err),
                     RESDIAG_E_INVALID);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(err, "metadata key 0") != NULL, "%s", err);
    r.m.meta = META;
    r.m.n_meta = 3;
    ck_assert_int_eq(rd_writer_append(NULL, NULL, NULL, NULL, 1, NULL, 0, err, sizeof err),
                     RESDIAG_E_NULL);
    ck_assert_int_eq(rd_writer_close(NULL, err, sizeof err), RESDIAG_OK);
    w = create_or_fail(tpath("nulls.h5"), &r);
    ck_assert_int_eq(rd_writer_append(w, NULL, NULL, NULL, 1, NULL, 0, err, sizeof err),
                     RESDIAG_E_NULL);
    ck_assert_int_eq(rd_writer_append(w, NULL, NULL, NULL, 0, NULL, 1, err, sizeof err),
                     RESDIAG_E_NULL);
    /* nothing to do */
    ck_assert_int_eq(rd_writer_append(w, NULL, NULL, NULL, 0, NULL, 0, err, sizeof err),
                     RESDIAG_OK);
    close_ok(w);
}
END_TEST

/* ------------------------------------------------------- SWMR, two processes */

static void xwrite(int fd, char c)
{
    ck_assert_int_eq(write(fd, &c, 1), 1);
}

static char xread(int fd)
{
    char c = 0;
    ssize_t n;
    do
        n = read(fd, &c, 1);
    while (n < 0 && errno == EINTR);
    return n == 1 ? c : 0;
}

START_TEST(h5_reader_follows_a_writer_in_another_process)
{
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("swmr.h5");
    int c2p[2], p2c[2];
    ck_assert_int_eq(pipe(c2p), 0);
    ck_assert_int_eq(pipe(p2c), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(c2p[0]);
        close(p2c[1]);
        char err[1024];
        rd_writer *w = NULL;
        rd_callsite *cs0 = make_callsites(&r, 0), *cs1 = make_callsites(&r, 1);
        int ok = rd_writer_create(&w, path, &r.hdr, err, sizeof err) == RESDIAG_OK
                 && append_steps(w, &r, 0, 3, cs0, 1, err, sizeof err) == RESDIAG_OK;
        xwrite(c2p[1], ok ? 'a' : 'E');
        xread(p2c[0]);
        /* step 3 lands in the chunk (4 steps) the reader has already seen */
        ok = ok && append_steps(w, &r, 3, 4, cs1, 1, err, sizeof err) == RESDIAG_OK;
        xwrite(c2p[1], ok ? 'b' : 'E');
        xread(p2c[0]);
        ok = ok && rd_writer_close(w, err, sizeof err) == RESDIAG_OK;
        xwrite(c2p[1], ok ? 'c' : 'E');
        free(cs0);
        free(cs1);
        exit(ok ? 0 : 1);
    }
    close(c2p[1]);
    close(p2c[0]);
    ck_assert_int_eq(xread(c2p[0]), 'a');
    resdiag_reader *rd = open_or_fail(path);
    check_info(rd, &r, 3);
    check_values(rd, &r, 3, 0);
    xwrite(p2c[1], 'g');
    ck_assert_int_eq(xread(c2p[0]), 'b');
    /* nothing changes until refresh */
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 3);
    ck_assert_int_eq(resdiag_reader_refresh(rd), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 7);
    check_values(rd, &r, 7, 1);
    check_series_and_datasets(rd, &r, 7);
    xwrite(p2c[1], 'g');
    ck_assert_int_eq(xread(c2p[0]), 'c');
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(resdiag_reader_refresh(rd), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 7);
    resdiag_reader_destroy(rd);
    close(c2p[0]);
    close(p2c[1]);
    /* and after the writer closed, a plain HDF5 open works too */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    H5Fclose(f);
}
END_TEST

/* ------------------------------------------------------------- disk full */

typedef struct full_result {
    int created;
    long long committed;   /* steps whose append returned OK */
    int st_fail, st_again, st_close;
    long long limit;       /* RLIMIT_FSIZE set after the first step */
    char err[600];
} full_result;

/* Whether files in the test directory can be given space with fallocate
 * (ext4, xfs, btrfs, tmpfs: yes; some network file systems: no). */
static int dir_has_fallocate(void)
{
    const char *p = tpath("fallocate-probe");
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    int ok = fallocate(fd, 0, 0, 4096) == 0;
    close(fd);
    unlink(p);
    return ok;
}

/* How a disk-full case provokes the failure. */
typedef struct full_mode {
    int reserve;    /* rd_h5_writer_reserve: fallocate before each phase */
    int size_check; /* rd_h5_writer_size_limit: the writer checks RLIMIT_FSIZE */
    int sig_ignore; /* SIGXFSZ ignored, so that a write past the limit fails with
                       EFBIG; else it keeps its default action (killing) */
} full_mode;

/* In a child: create, limit the file size to its size + headroom, append
 * `batch` steps at a time until an append fails, close, exit(0) so that
 * HDF5's exit handler runs too. The parent then reads what is there. */
static void disk_full_case(full_mode mode, long headroom, size_t batch)
{
    run r;
    make_run(&r, &FULL);
    char name[64];
    snprintf(name, sizeof name, "full-%d%d%d-%ld-%zu.h5", mode.reserve, mode.size_check,
             mode.sig_ignore, headroom, batch);
    const char *path = tpath(name);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        full_result res;
        memset(&res, 0, sizeof res);
        rd_h5_writer_reserve = mode.reserve;
        rd_h5_writer_size_limit = mode.size_check;
        rd_writer *w = NULL;
        char err[1024];
        rd_callsite *cs = make_callsites(&r, 0);
        /* one step before the limit, so that there is always something
         * to keep */
        if (rd_writer_create(&w, path, &r.hdr, err, sizeof err) == RESDIAG_OK
            && append_steps(w, &r, 0, 1, cs, 1, err, sizeof err) == RESDIAG_OK) {
            res.created = 1;
            res.committed = 1;
            struct stat sb;
            stat(path, &sb);
            res.limit = (long long)sb.st_size + headroom;
            struct rlimit rl = { (rlim_t)res.limit, (rlim_t)res.limit };
            signal(SIGXFSZ, mode.sig_ignore ? SIG_IGN : SIG_DFL);
            setrlimit(RLIMIT_FSIZE, &rl);
            resdiag_status st = RESDIAG_OK;
            while (res.committed < 100000) {
                st = append_steps(w, &r, res.committed, batch, cs, 0, err, sizeof err);
                if (st != RESDIAG_OK)
                    break;
                res.committed += (long long)batch;
            }
            res.st_fail = st;
            snprintf(res.err, sizeof res.err, "%.590s", err);
            res.st_again = append_steps(w, &r, res.committed, 1, cs, 0, err, sizeof err);
            res.st_close = rd_writer_close(w, err, sizeof err);
        }
        ssize_t n = write(fds[1], &res, sizeof res);
        free(cs);
        exit(n == (ssize_t)sizeof res ? 0 : 1);
    }
    close(fds[1]);
    full_result res;
    memset(&res, 0, sizeof res);
    ssize_t got = read(fds[0], &res, sizeof res);
    close(fds[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    /* no crash, also not in HDF5's exit handler, and no SIGXFSZ */
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer died: status %#x",
                  status);
    ck_assert_int_eq(got, (ssize_t)sizeof res);
    ck_assert(res.created);
    ck_assert_msg(res.st_fail == RESDIAG_E_NOSPACE, "append failed with %d: %s", res.st_fail,
                  res.err);
    ck_assert_msg(strstr(res.err, path), "%s", res.err);
    ck_assert_int_eq(res.st_again, RESDIAG_E_NOSPACE);
    ck_assert_int_eq(res.st_close, RESDIAG_E_NOSPACE);
    ck_assert_int_gt(res.committed, 0);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_msg((long long)sb.st_size <= res.limit, "file %lld bytes, limit %lld",
                  (long long)sb.st_size, res.limit);

    /* every step appended before the failure is there, exactly */
    resdiag_reader *rd = open_or_fail(path);
    int64_t n = resdiag_reader_info(rd)->n_steps;
    ck_assert_msg(n >= res.committed && n <= res.committed + (long long)batch,
                  "n_steps %lld, committed %lld", (long long)n, res.committed);
    check_values(rd, &r, n, 0);
    check_series_and_datasets(rd, &r, n);
    resdiag_reader_destroy(rd);
    int stopped_before = mode.size_check || (mode.reserve && dir_has_fallocate());
    if (stopped_before) {
        /* nothing reached HDF5: the file was closed cleanly, exactly the
         * committed steps are there, and any HDF5 program opens it */
        ck_assert_int_eq(n, res.committed);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        ck_assert(f >= 0);
        H5Fclose(f);
    }
    if (mode.size_check) {
        char want[128];
        snprintf(want, sizeof want, "file size limit (ulimit -f) of %lld bytes reached",
                 res.limit);
        ck_assert_msg(strstr(res.err, want) != NULL, "%s", res.err);
    } else {
        ck_assert_msg(strstr(res.err, "File too large"), "%s", res.err);
        if (stopped_before)
            ck_assert_msg(strstr(res.err, "reserving") != NULL, "%s", res.err);
    }
}

/* fallocate meets the limit (the writer's own check off): EFBIG there. */
START_TEST(h5_disk_full_reserved_space_stops_cleanly)
{
    static const long headroom[] = { 700000, 1000000, 1500000 };
    static const size_t batch[] = { 1, 5, 3 };
    disk_full_case((full_mode){ 1, 0, 1 }, headroom[_i], batch[_i]);
}
END_TEST

/* No reservation and no check: HDF5's own writes meet the limit, as they
 * meet a full disk where fallocate is not supported. The last three put
 * the limit inside a metadata write of a flush (measured: HDF5's error
 * stack then ends in its metadata cache), which left HDF5 unable to close
 * the file and the process crashing at exit (see detach()); the others
 * inside raw data. */
START_TEST(h5_disk_full_inside_hdf5_keeps_flushed_steps)
{
    static const long headroom[] = { 1000, 16384, 65536, 150000, 400000, 32500, 47000, 47400 };
    static const size_t batch[] = { 1, 1, 5, 2, 3, 2, 1, 3 };
    disk_full_case((full_mode){ 0, 0, 1 }, headroom[_i], batch[_i]);
}
END_TEST

/* The file size limit with SIGXFSZ at its default action (as in a shell
 * with `ulimit -f`): the writer stops before it, with and without
 * reservation; the process is not killed and the file holds every step. */
START_TEST(h5_size_limit_stops_before_sigxfsz)
{
    static const long headroom[] = { 1000, 300000, 1500000, 1000, 300000, 1500000 };
    static const size_t batch[] = { 1, 3, 5, 1, 3, 5 };
    disk_full_case((full_mode){ _i < 3, 1, 0 }, headroom[_i], batch[_i]);
}
END_TEST

/* A file size limit below what creating the file needs: the create fails
 * with NOSPACE and says so, the process is not killed (SIGXFSZ at its
 * default action), and no file is left. */
START_TEST(h5_size_limit_below_creation_fails_cleanly)
{
    static const long limits[] = { 0, 4096, 200000 };
    run r;
    make_run(&r, &FULL);
    char name[64];
    snprintf(name, sizeof name, "tiny-limit-%ld.h5", limits[_i]);
    const char *path = tpath(name);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        full_result res;
        memset(&res, 0, sizeof res);
        rd_h5_writer_reserve = _i != 1; /* and without reservation */
        signal(SIGXFSZ, SIG_DFL);
        struct rlimit rl = { (rlim_t)limits[_i], (rlim_t)limits[_i] };
        setrlimit(RLIMIT_FSIZE, &rl);
        rd_writer *w = NULL;
        res.st_fail = rd_writer_create(&w, path, &r.hdr, res.err, sizeof res.err);
        res.created = w != NULL;
        rd_writer_close(w, NULL, 0);
        ssize_t n = write(fds[1], &res, sizeof res);
        exit(n == (ssize_t)sizeof res ? 0 : 1);
    }
    close(fds[1]);
    full_result res;
    memset(&res, 0, sizeof res);
    ssize_t got = read(fds[0], &res, sizeof res);
    close(fds[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer died: status %#x",
                  status);
    ck_assert_int_eq(got, (ssize_t)sizeof res);
    ck_assert(!res.created);
    ck_assert_msg(res.st_fail == RESDIAG_E_NOSPACE, "create failed with %d: %s", res.st_fail,
                  res.err);
    char want[128];
    snprintf(want, sizeof want, "file size limit (ulimit -f) of %ld bytes reached", limits[_i]);
    ck_assert_msg(strstr(res.err, want) && strstr(res.err, path), "%s", res.err);
    ck_assert_msg(access(path, F_OK) != 0, "%s is left behind", path);
}
END_TEST

/* ------------------------------------------------------------------ roles */

/* Rewrites root attribute `name` of a run file as a scalar UTF-8 string. */
static void set_str_attr(const char *path, const char *name, const char *v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f >= 0);
    if (H5Aexists(f, name) > 0)
        ck_assert_int_ge(H5Adelete(f, name), 0);
    hid_t t = H5Tcopy(H5T_C_S1);
    ck_assert_int_ge(H5Tset_size(t, H5T_VARIABLE), 0);
    ck_assert_int_ge(H5Tset_cset(t, H5T_CSET_UTF8), 0);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(a >= 0);
    ck_assert_int_ge(H5Awrite(a, t, &v), 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
}

/* 1 if the root of the file at path has attribute name. */
static int has_root_attr(const char *path, const char *name)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    htri_t ex = H5Aexists(f, name);
    H5Fclose(f);
    ck_assert_int_ge(ex, 0);
    return ex > 0;
}

static void expect_roles(const char *path, const char *head, const char *residual)
{
    resdiag_reader *rd = open_or_fail(path);
    const resdiag_run_info *in = resdiag_reader_info(rd);
    if (head)
        ck_assert_pstr_eq(in->head_param, head);
    else
        ck_assert_ptr_null(in->head_param);
    if (residual)
        ck_assert_pstr_eq(in->residual_param, residual);
    else
        ck_assert_ptr_null(in->residual_param);
    resdiag_reader_destroy(rd);
}

static const char *const ROLE_LP[] = { "attn.out", "ffn.down" };
static const char *const ROLE_MP[] = { "out.proj" };

START_TEST(h5_declared_roles_are_stored_and_read_back)
{
    run r;
    make_run(&r, &FULL);
    r.m.layer_param_names = ROLE_LP;
    r.m.model_param_names = ROLE_MP;
    r.m.head_param = "out.proj";
    r.m.residual_param = "ffn.down";
    const char *path = tpath("roles.h5");
    write_run(path, &r, 2);
    ck_assert(has_root_attr(path, "head_param"));
    ck_assert(has_root_attr(path, "residual_param"));
    expect_roles(path, "out.proj", "ffn.down");

    /* one role declared: the other stays none (no conventional name here) */
    r.m.residual_param = NULL;
    r.hdr.overwrite = 1;
    write_run(path, &r, 2);
    ck_assert(!has_root_attr(path, "residual_param"));
    expect_roles(path, "out.proj", NULL);
}
END_TEST

START_TEST(h5_files_without_roles_get_the_conventional_names)
{
    /* FULL's parameters are named attn.wo, mlp.w2 and head.w */
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("roles-fallback.h5");
    write_run(path, &r, 2);
    ck_assert(!has_root_attr(path, "head_param"));
    ck_assert(!has_root_attr(path, "residual_param"));
    expect_roles(path, "head.w", "mlp.w2");

    /* no parameters at all */
    make_run(&r, &BARE);
    path = tpath("roles-none.h5");
    write_run(path, &r, 2);
    expect_roles(path, NULL, NULL);

    /* parameters, but none of the conventional names */
    make_run(&r, &FULL);
    r.m.layer_param_names = ROLE_LP;
    r.m.model_param_names = ROLE_MP;
    path = tpath("roles-other-names.h5");
    write_run(path, &r, 2);
    expect_roles(path, NULL, NULL);
}
END_TEST

START_TEST(h5_writer_refuses_a_role_that_names_no_parameter)
{
    run r;
    make_run(&r, &FULL);
    char err[512] = "";
    rd_writer *w = (rd_writer *)0x1;
    const char *path = tpath("roles-refused.h5");
    r.m.head_param = "mlp.w2"; /* a layer parameter, not a model one */
    ck_assert_int_eq(rd_writer_create(&w, path, &r.hdr, err, sizeof err), RESDIAG_E_INVALID);
    ck_assert_ptr_null(w);
    ck_assert_ptr_nonnull(strstr(err, "head_param"));
    r.m.head_param = NULL;
    r.m.residual_param = "no.such.param";
    ck_assert_int_eq(rd_writer_create(&w, path, &r.hdr, err, sizeof err), RESDIAG_E_INVALID);
    ck_assert_ptr_nonnull(strstr(err, "residual_param"));
    ck_assert_int_ne(access(path, F_OK), 0); /* nothing created */
}
END_TEST

START_TEST(h5_reader_rejects_a_role_that_names_no_parameter)
{
    run r;
    make_run(&r, &FULL);
    const char *path = tpath("roles-hostile.h5");
    r.hdr.overwrite = 1;

    write_run(path, &r, 2);
    set_str_attr(path, "head_param", "no.such.param");
    expect_open_error(path, RESDIAG_E_FORMAT, "head_param");
    /* a layer parameter is not a model parameter, and the other way round */
    write_run(path, &r, 2);
    set_str_attr(path, "head_param", "mlp.w2");
    expect_open_error(path, RESDIAG_E_FORMAT, "head_param");
    write_run(path, &r, 2);
    set_str_attr(path, "residual_param", "head.w");
    expect_open_error(path, RESDIAG_E_FORMAT, "residual_param");
    write_run(path, &r, 2);
    set_str_attr(path, "residual_param", "");
    expect_open_error(path, RESDIAG_E_FORMAT, "residual_param");
    /* not UTF-8 */
    write_run(path, &r, 2);
    set_str_attr(path, "residual_param", "mlp.\xff\xfe");
    expect_open_error(path, RESDIAG_E_FORMAT, "not UTF-8");
    /* not a string */
    write_run(path, &r, 2);
    set_int_attr(path, "head_param", 3);
    expect_open_error(path, RESDIAG_E_FORMAT, "head_param");
}
END_TEST

/* ------------------------------------------------------------------ main */

static void capture_every_log(void)
{
    resdiag_set_log_handler(capture_log, NULL);
}

static const check_program program = {
    .name = "h5",
    .scratch = g_dir,
    .scratch_size = sizeof g_dir,
    .remove_files = 1,
    .prepare = capture_every_log,
};
CHECK_MAIN(&program,
           CHECK_CASE("roundtrip", 120),
               CHECK_TEST(h5_roundtrip_every_value_and_attribute),
               CHECK_TEST(h5_roundtrip_without_sketch_or_params),
               CHECK_LOOP(h5_growing_headers_stay_in_one_page, 0, 2),
               CHECK_LOOP(h5_every_axis_has_its_dimension_scale, 0, 2),
               CHECK_TEST(h5_zero_steps_file_opens_with_no_steps),
               CHECK_TEST(h5_callsites_keep_the_end_of_long_paths),
               CHECK_TEST(h5_every_dataset_is_self_describing),
               CHECK_TEST(h5_reader_counts_only_committed_steps),
               CHECK_TEST(h5_summary_gives_the_report_of_the_full_tables),
               CHECK_TEST(h5_unobserved_sites_take_no_space),
           CHECK_CASE("errors", 120),
               CHECK_TEST(h5_reader_rejects_what_is_not_a_run_file),
               CHECK_TEST(h5_reader_rejects_plain_hdf5_files),
               CHECK_TEST(h5_reader_checks_versions_and_attributes),
               CHECK_TEST(h5_declared_roles_are_stored_and_read_back),
               CHECK_TEST(h5_files_without_roles_get_the_conventional_names),
               CHECK_TEST(h5_reader_rejects_a_role_that_names_no_parameter),
               CHECK_TEST(h5_writer_refuses_a_role_that_names_no_parameter),
               CHECK_TEST(h5_reader_checks_every_argument),
               CHECK_TEST(h5_hdf5_never_prints_and_caller_setting_survives),
               CHECK_TEST(h5_writer_errors),
           CHECK_CASE("processes", 300),
               CHECK_TEST(h5_reader_follows_a_writer_in_another_process),
               CHECK_LOOP(h5_disk_full_reserved_space_stops_cleanly, 0, 3),
               CHECK_LOOP(h5_disk_full_inside_hdf5_keeps_flushed_steps, 0, 8),
               CHECK_LOOP(h5_size_limit_stops_before_sigxfsz, 0, 6),
               CHECK_LOOP(h5_size_limit_below_creation_fails_cleanly, 0, 3))
