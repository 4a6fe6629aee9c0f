/*
 * test-h5-schema2.c - run files of schema 2 (doc/FORMAT.md, "Schema 2"):
 * every value written by rd_writer_* and read back by resdiag_reader_*
 * with compression 0 and 1 (real fields within float32's rounding, counts,
 * calls and aliases exact, NaN and the sentinels, slots never observed),
 * the layout in the file read with the HDF5 API (types, fill values,
 * field_names, filters), schema 1 still written on request, the options,
 * the site axes of each schema (8 block sites from schema 3, 5 before; the
 * sites an older file has no room for read as never observed),
 * and the files the reader refuses: a filter resdiag does not write, a
 * filtered dataset claiming more than its bytes can hold, a type that is
 * not the schema's, a newer schema.
 *
 * Values: element `off` of step index i's record is, by the table it lies
 * in (computed here from the table offsets, not with the reader's help):
 * a real value (i * 100000 + off + 0.25) / 3, which float32 cannot hold;
 * for the integer fields of a STATS row, the calls and the aliases, whole
 * numbers in the type's range; NaN for whole rows never observed, some
 * absmax_col (no finite value), some sketch elements, calls and aliases.
 */
#include <check.h>
#include <hdf5.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "check-one.h"
#include "fixture.h"
#include "format/format.h"
#include "format/tables.h"
#include "h5/writer.h"
#include "resdiag.h"

#define F RESDIAG_N_FIELDS
/* Block sites of a schema's layout, written out here rather than taken from
 * the library: 5 (stream_in..stream_out) in schemas 1 and 2, 8 from 3. */
static int sites_of(int schema)
{
    return schema >= 3 ? RESDIAG_N_BLOCK_SITES : RD_OLD_BLOCK_SITES;
}
/* The runs built through the writer here are schema 2 unless one says. */
#define B RD_OLD_BLOCK_SITES
enum { L = 3, S = 2, P = 2, Q = 1, K = 8, STEPS = 11 };

static const char *const SUB[S] = { "attn", "mlp" };
static const char *const LP[P] = { "w1", "w2" };
static const char *const MP[Q] = { "head" };
static char g_dir[256];
static char g_log[4096];

static void capture_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    snprintf(g_log, sizeof g_log, "%s", msg);
}

static const char *path(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

typedef struct run {
    resdiag_model m;
    rd_tables lay;
    rd_file_header hdr;
} run;

static void make_run(run *r, int schema, int compression)
{
    memset(r, 0, sizeof *r);
    resdiag_model_init(&r->m);
    r->m.n_layers = L;
    r->m.d_model = 16;
    r->m.n_sublayers = S;
    r->m.sublayer_names = SUB;
    r->m.n_layer_params = P;
    r->m.layer_param_names = LP;
    r->m.n_model_params = Q;
    r->m.model_param_names = MP;
    rd_tables_init(&r->lay, L, S, P, Q, K, sites_of(schema ? schema : RD_SCHEMA_VERSION));
    r->hdr.model = &r->m;
    r->hdr.tables = &r->lay;
    r->hdr.sketch_size = K;
    r->hdr.sketch_seed = 5;
    r->hdr.record_chunk_steps = 4;
    r->hdr.file_schema = schema;
    r->hdr.compression = compression;
}

static int is_count_field(int f)
{
    for (int k = 0; k < RD_N_COUNT_FIELDS; k++)
        if (rd_count_fields[k] == f)
            return 1;
    return 0;
}

/* The table element `off` lies in. */
static int table_of(const rd_tables *lay, size_t off)
{
    for (int t = 0; t < RD_N_TABLES; t++)
        if (off >= lay->tables[t].offset && off < lay->tables[t].offset + lay->tables[t].count)
            return t;
    return -1;
}

/* The value element `off` of step index i holds in the record. */
static double value(const rd_tables *lay, int64_t i, size_t off)
{
    int t = table_of(lay, off);
    const rd_table *tb = &lay->tables[t];
    size_t rel = off - tb->offset, u = (size_t)i, nb = (size_t)lay->n_block_sites;
    switch (tb->kind) {
    case RD_KIND_STATS: {
        size_t row = rel / F;
        int f = (int)(rel % F);
        if ((row + u) % 7 == 3)
            return NAN; /* not observed in this step */
        if (f == RESDIAG_FIELD_ABSMAX_COL && (row + u) % 5 == 1)
            return NAN; /* no finite value */
        if (is_count_field(f))
            return (double)((u * 1000 + rel) % 100000);
        break;
    }
    case RD_KIND_SKETCH:
        if ((rel + u) % 11 == 5)
            return NAN;
        break;
    case RD_KIND_CALLS:
        return (rel + u) % 4 == 0 ? NAN : (double)(1 + (rel + u) % 9);
    case RD_KIND_ALIAS: /* another site of the same sublayer, or its own */
        return (rel + u) % 6 == 1 ? (double)((rel % nb + 1) % nb) : NAN;
    case RD_KIND_FLAG: /* aborted, complete, or not written */
        return (rel + u) % 3 == 2 ? NAN : (double)((rel + u) % 3);
    case RD_KIND_TEXT: /* bytes, and NaN, which is stored as 0 */
        return (rel + u) % 5 == 0 ? NAN : (double)(1 + (rel * 7 + u) % 255);
    default:
        break;
    }
    return ((double)i * 100000.0 + (double)off + 0.25) / 3.0;
}

/* What the reader must give for it: float32's rounding of the real fields,
 * the sketches of the block sites and the updates; the rest exactly. */
static double stored(const rd_tables *lay, int64_t i, size_t off)
{
    double v = value(lay, i, off);
    int t = table_of(lay, off);
    const rd_table *tb = &lay->tables[t];
    int f32 = (tb->kind == RD_KIND_STATS && !is_count_field((int)((off - tb->offset) % F)))
              || t == RD_T_FWD_SITE_SKETCH || t == RD_T_BWD_SITE_SKETCH
              || tb->kind == RD_KIND_UPDATE;
    if (tb->kind == RD_KIND_TEXT && isnan(v))
        return 0;
    return f32 ? (double)(float)v : v;
}

static void write_steps(const char *p, run *r, int64_t n, int bad_count)
{
    rd_writer *w = NULL;
    char err[1024] = "";
    ck_assert_msg(rd_writer_create(&w, p, &r->hdr, err, sizeof err) == RESDIAG_OK, "%s", err);
    size_t len = r->lay.record_len;
    double *rec = malloc((size_t)n * len * sizeof *rec);
    int64_t *steps = malloc((size_t)n * sizeof *steps);
    double *times = malloc((size_t)n * sizeof *times);
    rd_callsite *cs = calloc(r->lay.n_slots, sizeof *cs);
    ck_assert(rec && steps && times && cs);
    for (int64_t i = 0; i < n; i++) {
        steps[i] = 10 + i;
        times[i] = (double)i;
        for (size_t off = 0; off < len; off++)
            rec[(size_t)i * len + off] = value(&r->lay, i, off);
    }
    /* batches of 1, 3, 7 steps: chunks of one step and of four, started
     * anywhere */
    int64_t done = 0;
    for (int64_t b = 1; done < n; b += 2) {
        int64_t k = b < n - done ? b : n - done;
        ck_assert_msg(rd_writer_append(w, steps + done, times + done, rec + (size_t)done * len,
                                       (size_t)k, cs, done == 0, err, sizeof err) == RESDIAG_OK,
                      "append: %s", err);
        done += k;
    }
    if (bad_count) { /* a count that is not an integer: refused, nothing written */
        size_t rows = r->lay.tables[RD_T_FWD_SITE].offset + RESDIAG_FIELD_ROWS;
        for (size_t off = 0; off < len; off++)
            rec[off] = value(&r->lay, n, off);
        rec[rows] = 0.5;
        int64_t step = 10 + n;
        double t = 0;
        ck_assert_int_eq(rd_writer_append(w, &step, &t, rec, 1, cs, 0, err, sizeof err),
                         RESDIAG_E_INVALID);
        ck_assert_msg(strstr(err, "forward/site_counts") && strstr(err, "0.5"), "%s", err);
    }
    resdiag_status st = rd_writer_close(w, err, sizeof err);
    ck_assert_int_eq(st, bad_count ? RESDIAG_E_INVALID : RESDIAG_OK);
    free(rec);
    free(steps);
    free(times);
    free(cs);
}

static resdiag_reader *open_ok(const char *p)
{
    resdiag_reader *rd = NULL;
    g_log[0] = '\0';
    resdiag_status st = resdiag_reader_open(&rd, p);
    ck_assert_msg(st == RESDIAG_OK, "open %s: %d %s", p, st, g_log);
    return rd;
}

static int same(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* Every table of every step through resdiag_reader_read, against stored()
 * and (for the floats) within half a float32 step of value(). */
static void check_tables(const resdiag_reader *rd, const rd_tables *lay, int64_t n)
{
    for (int t = 0; t < RD_N_TABLES; t++) {
        const rd_table *tb = &lay->tables[t];
        if (tb->count == 0)
            continue;
        double *got = malloc((size_t)n * tb->count * sizeof *got);
        ck_assert_ptr_nonnull(got);
        ck_assert_int_eq(resdiag_reader_read(rd, tb->name, 0, n, got, (size_t)n * tb->count),
                         RESDIAG_OK);
        for (int64_t i = 0; i < n; i++)
            for (size_t e = 0; e < tb->count; e++) {
                double g = got[(size_t)i * tb->count + e];
                double want = stored(lay, i, tb->offset + e), v = value(lay, i, tb->offset + e);
                ck_assert_msg(same(g, want), "%s step %lld element %zu: %.17g, want %.17g",
                              tb->name, (long long)i, e, g, want);
                ck_assert(isnan(v) || fabs(g - v) <= 0x1p-24 * fabs(v));
            }
        free(got);
    }
}

/* The public per-slot calls agree with the tables. */
static void check_calls(const resdiag_reader *rd, const rd_tables *lay, int64_t n)
{
    const int nb = lay->n_block_sites;
    for (int64_t i = 0; i < n; i++)
        for (int l = 0; l < L; l++)
            for (int s = 0; s < S; s++)
                for (int b = 0; b < nb; b++) {
                    double f[F], sk[K];
                    int obs = -1;
                    size_t slot = ((size_t)l * S + (size_t)s) * (size_t)nb + (size_t)b;
                    size_t at = lay->tables[RD_T_BWD_SITE].offset + slot * F;
                    ck_assert_int_eq(resdiag_reader_site(rd, i, RESDIAG_BACKWARD, l, s,
                                                         (resdiag_site)b, f, &obs), RESDIAG_OK);
                    ck_assert_int_eq(obs, !isnan(value(lay, i, at + RESDIAG_FIELD_ROWS)));
                    for (int k = 0; k < F; k++)
                        ck_assert(same(f[k], stored(lay, i, at + (size_t)k)));
                    at = lay->tables[RD_T_FWD_SITE_SKETCH].offset + slot * K;
                    ck_assert_int_eq(resdiag_reader_sketch(rd, i, RESDIAG_FORWARD, l, s,
                                                           (resdiag_site)b, sk), RESDIAG_OK);
                    for (int k = 0; k < K; k++)
                        ck_assert(same(sk[k], stored(lay, i, at + (size_t)k)));
                    int as = -2;
                    double a = value(lay, i, lay->tables[RD_T_FWD_ALIAS].offset + slot);
                    ck_assert_int_eq(resdiag_reader_alias(rd, i, RESDIAG_FORWARD, l, s,
                                                          (resdiag_site)b, &as), RESDIAG_OK);
                    ck_assert_int_eq(as, isnan(a) ? -1 : (int)a);
                }
    /* one field over every step, the series call */
    double *ser = malloc((size_t)n * sizeof *ser);
    ck_assert_int_eq(resdiag_reader_series(rd, RESDIAG_FORWARD, 1, 1, RESDIAG_NORM_OUT,
                                           RESDIAG_FIELD_INF_COUNT, ser, n), RESDIAG_OK);
    for (int64_t i = 0; i < n; i++) {
        size_t at = lay->tables[RD_T_FWD_SITE].offset
                    + (((size_t)1 * S + 1) * (size_t)nb + RESDIAG_NORM_OUT) * F
                    + RESDIAG_FIELD_INF_COUNT;
        ck_assert(same(ser[i], stored(lay, i, at)));
    }
    free(ser);
}

/* ------------------------------------------------- the layout in the file */

static int n_strings(hid_t ds, const char *attr, const char *const *want, int n)
{
    hid_t a = H5Aopen(ds, attr, H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    hid_t sp = H5Aget_space(a), t = H5Aget_type(a);
    int got = (int)H5Sget_simple_extent_npoints(sp);
    if (got == n) {
        char **v = calloc((size_t)n, sizeof *v);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5T_CSET_UTF8);
        ck_assert_int_ge(H5Aread(a, mt, v), 0);
        for (int k = 0; k < n; k++)
            ck_assert_str_eq(v[k], want[k]);
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, v);
        H5Tclose(mt);
        free(v);
    }
    H5Tclose(t);
    H5Sclose(sp);
    H5Aclose(a);
    return got;
}

/* Dataset name: its type class and size, last axis, fill value (as a
 * double), and filters: with level > 0, shuffle then deflate at `level`
 * when one step of it takes at least RD_FILTER_MIN_STEP_BYTES (computed
 * here from its shape and type), in chunks of one step; else none, and a
 * table in a file with filters then has chunks of many steps. Returns
 * whether it is filtered. */
static int check_dataset(hid_t f, const char *name, H5T_class_t cls, size_t size, hsize_t last,
                         double fill, int level)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    ck_assert_msg(ds >= 0, "%s missing", name);
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds), dcpl = H5Dget_create_plist(ds);
    ck_assert_msg(H5Tget_class(t) == cls && H5Tget_size(t) == size, "%s: type", name);
    hsize_t dims[8], chunk[8];
    int nd = H5Sget_simple_extent_dims(sp, dims, NULL);
    ck_assert_msg(dims[nd - 1] == last, "%s: last axis %llu", name,
                  (unsigned long long)dims[nd - 1]);
    size_t step_bytes = size;
    for (int k = 1; k < nd; k++)
        step_bytes *= (size_t)dims[k];
    int want = level > 0 && step_bytes >= RD_FILTER_MIN_STEP_BYTES ? level : 0;
    ck_assert_int_eq(H5Pget_chunk(dcpl, nd, chunk), nd);
    if (want > 0)
        ck_assert_msg(chunk[0] == 1, "%s: %llu steps per deflated chunk", name,
                      (unsigned long long)chunk[0]);
    else if (level > 0 && strncmp(name, "summary/", 8) != 0)
        ck_assert_msg(chunk[0] >= 32, "%s (%zu bytes a step): %llu steps per plain chunk", name,
                      step_bytes, (unsigned long long)chunk[0]);
    double fv = 0;
    ck_assert_int_ge(H5Pget_fill_value(dcpl, H5T_NATIVE_DOUBLE, &fv), 0);
    ck_assert_msg(same(fv, fill), "%s: fill %g", name, fv);
    int nf = H5Pget_nfilters(dcpl);
    ck_assert_msg(nf == (want > 0 ? 2 : 0), "%s (%zu bytes a step): %d filters", name, step_bytes,
                  nf);
    for (int k = 0; k < nf; k++) {
        unsigned flags, cd[4];
        size_t ncd = 4;
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)k, &flags, &ncd, cd, 0, NULL, NULL);
        ck_assert_int_eq(id, k == 0 ? H5Z_FILTER_SHUFFLE : H5Z_FILTER_DEFLATE);
        if (k == 1)
            ck_assert_uint_eq(cd[0], (unsigned)level);
    }
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Tclose(t);
    H5Dclose(ds);
    return nf > 0;
}

static int root_schema(hid_t f)
{
    int v = -1;
    hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
    ck_assert_int_ge(H5Aread(a, H5T_NATIVE_INT, &v), 0);
    H5Aclose(a);
    return v;
}

static void check_layout(const char *p, int level, int schema)
{
    const hsize_t nb = (hsize_t)sites_of(schema);
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    ck_assert_int_eq(root_schema(f), schema);
    /* L x S x B x 12 float32 = 1440 bytes a step (2304 with 8 sites):
     * deflated; L x S x B x K float32 = 960: plain, 1536 with 8 sites:
     * deflated */
    ck_assert_int_eq(check_dataset(f, "forward/site_stats", H5T_FLOAT, 4, RD_N_REAL_FIELDS, NAN,
                                   level), level > 0);
    ck_assert_int_eq(check_dataset(f, "forward/site_counts", H5T_INTEGER, 8, RD_N_COUNT_FIELDS,
                                   -1, level), level > 0);
    check_dataset(f, "backward/param_counts", H5T_INTEGER, 8, RD_N_COUNT_FIELDS, -1, level);
    ck_assert_int_eq(check_dataset(f, "backward/site_sketch", H5T_FLOAT, 4, K, NAN, level),
                     level > 0 && nb == 8);
    check_dataset(f, "forward/model_sketch", H5T_FLOAT, 8, K, NAN, level);
    check_dataset(f, "forward/update", H5T_FLOAT, 4, RESDIAG_N_UPDATE_FIELDS, NAN, level);
    check_dataset(f, "forward/site_calls", H5T_INTEGER, 4, nb, 0, level);
    check_dataset(f, "backward/site_alias", H5T_INTEGER, 1, nb, -1, level);
    check_dataset(f, "summary/stream_norm", H5T_FLOAT, 4, L, NAN, 0);
    check_dataset(f, "summary/nonfinite", H5T_FLOAT, 8, 3, NAN, 0);
    /* the labels of each part's field axis */
    const char *real[RD_N_REAL_FIELDS], *count[RD_N_COUNT_FIELDS], *all[F];
    for (int k = 0; k < RD_N_REAL_FIELDS; k++)
        real[k] = resdiag_field_name((resdiag_field)rd_real_fields[k]);
    for (int k = 0; k < RD_N_COUNT_FIELDS; k++)
        count[k] = resdiag_field_name((resdiag_field)rd_count_fields[k]);
    for (int k = 0; k < F; k++)
        all[k] = resdiag_field_name((resdiag_field)k);
    ck_assert_str_eq(real[0], "frob");
    ck_assert_str_eq(count[2], "absmax_col");
    hid_t ds = H5Dopen2(f, "forward/model_stats", H5P_DEFAULT);
    ck_assert_int_eq(n_strings(ds, "field_names", real, RD_N_REAL_FIELDS), RD_N_REAL_FIELDS);
    H5Dclose(ds);
    ds = H5Dopen2(f, "forward/model_counts", H5P_DEFAULT);
    ck_assert_int_eq(n_strings(ds, "field_names", count, RD_N_COUNT_FIELDS), RD_N_COUNT_FIELDS);
    H5Dclose(ds);
    ck_assert_int_eq(n_strings(f, "field_names", all, F), F); /* the API's, at the root */
    H5Fclose(f);
}

static void round_trip(int level, int schema)
{
    run r;
    make_run(&r, schema, level);
    char name[64];
    snprintf(name, sizeof name, "%s-%d.h5", level ? "deflate" : "plain", schema);
    const char *p = path(name);
    write_steps(p, &r, STEPS, 0);
    check_layout(p, level, schema);
    resdiag_reader *rd = open_ok(p);
    ck_assert_int_eq(resdiag_reader_info(rd)->schema_version, schema);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, STEPS);
    check_tables(rd, &r.lay, STEPS);
    check_calls(rd, &r.lay, STEPS);
    /* the datasets a reader lists are the schema-1 names, counts merged */
    for (int k = 0; k < resdiag_reader_n_datasets(rd); k++)
        ck_assert_ptr_null(strstr(resdiag_reader_dataset_name(rd, k), "_counts"));
    int64_t dims[8];
    int rank = 0;
    ck_assert_int_eq(resdiag_reader_dims(rd, "forward/site_stats", dims, 8, &rank), RESDIAG_OK);
    ck_assert_int_eq(rank, 5);
    ck_assert_int_eq(dims[3], sites_of(schema));
    ck_assert_int_eq(dims[4], F);
    resdiag_reader_destroy(rd);
}

START_TEST(values_round_trip_uncompressed)
{
    round_trip(0, 2);
}
END_TEST

START_TEST(values_round_trip_deflated)
{
    round_trip(1, 2);
}
END_TEST

/* Schema 3: the same values, with the 8 block sites of its layout. */
START_TEST(values_round_trip_in_schema_3)
{
    round_trip(0, 3);
    round_trip(1, 3);
}
END_TEST

/* A count that is not an integer is refused before anything of its step
 * is committed; the steps before stay readable. */
START_TEST(a_count_that_is_no_integer_is_refused)
{
    run r;
    make_run(&r, 2, 1);
    write_steps(path("bad-count.h5"), &r, 4, 1);
    resdiag_reader *rd = open_ok(path("bad-count.h5"));
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 4);
    check_tables(rd, &r.lay, 4);
    resdiag_reader_destroy(rd);
}
END_TEST

/* ------------------------------------------------ through resdiag_open */

static resdiag_status open_with(const char *p, const resdiag_options *o)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 2, .cols = 8, .sublayers = 1,
        .sublayer_names = SUB });
    resdiag *r = NULL;
    g_log[0] = '\0';
    resdiag_status st = resdiag_open(&r, p, &m, o);
    if (st != RESDIAG_OK)
        return st;
    float x[4 * 8];
    for (int k = 0; k < 32; k++)
        x[k] = (float)k / 7.0f;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, 4, 8)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    return RESDIAG_OK;
}

START_TEST(options_are_checked_and_default_to_schema_3_deflate_1)
{
    resdiag_options o;
    resdiag_options_init(&o);
    ck_assert_int_eq(o.file_schema, 0);
    ck_assert_int_eq(o.compression, 1);
    static const struct { int schema, level; const char *says; } bad[] = {
        { 4, 1, "file_schema is 4" }, { -1, 1, "file_schema is -1" },
        { 0, 10, "compression is 10" }, { 2, -1, "compression is -1" } };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        resdiag_options_init(&o);
        o.file_schema = bad[k].schema;
        o.compression = bad[k].level;
        ck_assert_int_eq(open_with(path("bad-option.h5"), &o), RESDIAG_E_INVALID);
        ck_assert_msg(strstr(g_log, bad[k].says), "%s", g_log);
        ck_assert_int_ne(access(path("bad-option.h5"), F_OK), 0);
    }
    /* a caller built against the options before these fields: its garbage
     * past struct_size is not read, it gets the defaults */
    resdiag_options_init(&o);
    o.struct_size = offsetof(resdiag_options, file_schema);
    o.file_schema = 7;
    o.compression = 99;
    ck_assert_int_eq(open_with(path("old-caller.h5"), &o), RESDIAG_OK);
    hid_t f = H5Fopen(path("old-caller.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_eq(root_schema(f), 3);
    check_dataset(f, "forward/site_stats", H5T_FLOAT, 4, RD_N_REAL_FIELDS, NAN, 1);
    H5Fclose(f);
    /* compression 4 */
    resdiag_options_init(&o);
    o.compression = 4;
    ck_assert_int_eq(open_with(path("level4.h5"), &o), RESDIAG_OK);
    f = H5Fopen(path("level4.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    check_dataset(f, "forward/site_sketch", H5T_FLOAT, 4, 16, NAN, 4);
    H5Fclose(f);
}
END_TEST

/* file_schema 1: float64 everywhere, no filters whatever compression says,
 * no counts datasets: what resdiag 0.1 reads; and read the same. */
START_TEST(schema_1_on_request)
{
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1;
    o.compression = 9;
    ck_assert_int_eq(open_with(path("one.h5"), &o), RESDIAG_OK);
    resdiag_options_init(&o);
    ck_assert_int_eq(open_with(path("default.h5"), &o), RESDIAG_OK);
    hid_t f = H5Fopen(path("one.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_eq(root_schema(f), 1);
    check_dataset(f, "forward/site_stats", H5T_FLOAT, 8, F, NAN, 0);
    check_dataset(f, "forward/site_calls", H5T_FLOAT, 8, B, NAN, 0);
    check_dataset(f, "forward/site_alias", H5T_FLOAT, 8, B, NAN, 0);
    check_dataset(f, "summary/stream_norm", H5T_FLOAT, 8, 2, NAN, 0);
    ck_assert_int_eq(H5Lexists(f, "forward/site_counts", H5P_DEFAULT), 0);
    H5Fclose(f);
    resdiag_reader *r1 = open_ok(path("one.h5")), *r2 = open_ok(path("default.h5"));
    ck_assert_int_eq(resdiag_reader_info(r1)->schema_version, 1);
    double a[F], b[F];
    int oa = 0, ob = 0;
    ck_assert_int_eq(resdiag_reader_site(r1, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, a,
                                         &oa), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_site(r2, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_OUT, b,
                                         &ob), RESDIAG_OK);
    ck_assert(oa && ob);
    for (int k = 0; k < F; k++)
        ck_assert_msg(same(b[k], is_count_field(k) ? a[k] : (double)(float)a[k]),
                      "field %d: schema 1 %.17g, schema 3 %.17g", k, a[k], b[k]);
    resdiag_reader_destroy(r1);
    resdiag_reader_destroy(r2);
}
END_TEST

/* ------------------------------------------ the site axis of each schema */

/* A run of 2 layers x 1 sublayer through resdiag_open with file_schema
 * `schema`, 2 steps: every block site the schema has room for observed
 * forward and backward (a tensor of its own each), norm_out an alias of
 * stream_out. */
static void record_every_site(const char *p, int schema)
{
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = 2, .cols = 8, .sublayers = 1,
        .sublayer_names = SUB });
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = schema;
    resdiag *r = fixture_open(p, &m, &o);
    float x[4 * 8];
    for (int step = 0; step < 2; step++) {
        ck_assert_int_eq(resdiag_step_begin(r, step), RESDIAG_OK);
        for (int dir = 0; dir < 2; dir++)
            for (int l = 0; l < 2; l++)
                for (int b = 0; b < sites_of(schema ? schema : 3); b++) {
                    for (int k = 0; k < 32; k++)
                        x[k] = (float)(k + 40 * b + 400 * l + 4000 * dir + 9000 * step) / 7.0f;
                    ck_assert_int_eq(resdiag_observe_at(r, (resdiag_direction)dir, l, 0,
                                                        (resdiag_site)b, resdiag_f32(x, 4, 8),
                                                        "t.c", 10 + b), RESDIAG_OK);
                }
        ck_assert_int_eq(resdiag_observe_alias(r, RESDIAG_FORWARD, 1, 0, RESDIAG_NORM_OUT,
                                               RESDIAG_STREAM_OUT), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
}

/* The index of axis "site" in a comma-separated axes list, or -1. */
static int site_axis(const char *axes)
{
    int k = 0;
    for (const char *a = axes; a; k++) {
        const char *end = strchr(a, ',');
        size_t len = end ? (size_t)(end - a) : strlen(a);
        if (len == 4 && strncmp(a, "site", 4) == 0)
            return k;
        a = end ? end + 1 : NULL;
    }
    return -1;
}

typedef struct site_axes {
    hsize_t want;  /* entries each site axis must have */
    char seen[32][64];
    int n_seen;
} site_axes;

/* H5Ovisit callback: every dataset with an "axes" attribute naming "site"
 * has `want` entries on that axis and, where it labels it, that many
 * site_names, the sites' names in index order. */
static herr_t check_site_axis(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    site_axes *sa = data;
    if (info->type != H5O_TYPE_DATASET || H5Aexists_by_name(obj, name, "axes", H5P_DEFAULT) <= 0)
        return 0;
    hid_t ds = H5Dopen2(obj, name, H5P_DEFAULT);
    hid_t a = H5Aopen(ds, "axes", H5P_DEFAULT), t = H5Aget_type(a);
    char axes[256] = "";
    hid_t mt = H5Tcopy(H5T_C_S1);
    if (H5Tis_variable_str(t) > 0) {
        char *v = NULL;
        H5Tset_size(mt, H5T_VARIABLE);
        ck_assert_int_ge(H5Aread(a, mt, &v), 0);
        snprintf(axes, sizeof axes, "%s", v);
        H5free_memory(v);
    } else {
        H5Tset_size(mt, sizeof axes - 1);
        ck_assert_int_ge(H5Aread(a, mt, axes), 0);
    }
    H5Tclose(mt);
    H5Tclose(t);
    H5Aclose(a);
    int k = site_axis(axes);
    if (k >= 0) {
        hid_t sp = H5Dget_space(ds);
        hsize_t dims[8];
        int nd = H5Sget_simple_extent_dims(sp, dims, NULL);
        ck_assert_msg(k < nd && dims[k] == sa->want, "/%s (%s): site axis of %llu, want %llu",
                      name, axes, (unsigned long long)(k < nd ? dims[k] : 0),
                      (unsigned long long)sa->want);
        H5Sclose(sp);
        if (H5Aexists(ds, "site_names") > 0) {
            const char *names[RESDIAG_N_BLOCK_SITES];
            for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
                names[b] = resdiag_site_name((resdiag_site)b);
            ck_assert_int_eq(n_strings(ds, "site_names", names, (int)sa->want), (int)sa->want);
        }
        if (sa->n_seen < 32)
            snprintf(sa->seen[sa->n_seen++], sizeof sa->seen[0], "%s", name);
    }
    H5Dclose(ds);
    return 0;
}

static int was_seen(const site_axes *sa, const char *name)
{
    for (int k = 0; k < sa->n_seen; k++)
        if (strcmp(sa->seen[k], name) == 0)
            return 1;
    return 0;
}

/* Every site axis of a file: 8 entries in schema 3 (the default), 5 in
 * schemas 1 and 2; the /site scale and the root's site_names alike. */
START_TEST(site_axes_hold_the_schemas_block_sites)
{
    static const int schemas[] = { 0, 3, 2, 1 };
    const char *names[RESDIAG_N_BLOCK_SITES];
    for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++)
        names[b] = resdiag_site_name((resdiag_site)b);
    ck_assert_str_eq(names[5], "branch_in");
    ck_assert_str_eq(names[7], "out_norm_out");
    for (size_t c = 0; c < sizeof schemas / sizeof schemas[0]; c++) {
        int schema = schemas[c], file_schema = schema ? schema : 3;
        int want = file_schema >= 3 ? 8 : 5;
        char name[64];
        snprintf(name, sizeof name, "axes-%d.h5", schema);
        const char *p = path(name);
        record_every_site(p, schema);
        hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
        ck_assert_int_ge(f, 0);
        ck_assert_int_eq(root_schema(f), file_schema);
        ck_assert_int_eq(n_strings(f, "site_names", names, want), want);
        hid_t sc = H5Dopen2(f, "/site", H5P_DEFAULT);
        ck_assert_int_ge(sc, 0);
        hid_t sp = H5Dget_space(sc);
        ck_assert_int_eq(H5Sget_simple_extent_npoints(sp), want);
        H5Sclose(sp);
        H5Dclose(sc);
        site_axes sa = { (hsize_t)want, { { 0 } }, 0 };
        ck_assert_int_ge(H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, check_site_axis, &sa,
                                   H5O_INFO_BASIC), 0);
        /* the tables with a site axis: none may go unchecked */
        static const char *const tables[] = { "site_stats", "site_sketch", "site_calls",
                                              "site_alias", "site_callsite", "site_counts" };
        for (int dir = 0; dir < 2; dir++)
            for (int t = 0; t < 6; t++) {
                if (t == 5 && file_schema == 1)
                    continue; /* schema 1 has no counts datasets */
                char ds[64];
                snprintf(ds, sizeof ds, "%s/%s", dir ? "backward" : "forward", tables[t]);
                ck_assert_msg(was_seen(&sa, ds), "schema %d: /%s has no site axis", file_schema,
                              ds);
            }
        H5Fclose(f);
        resdiag_reader *rd = open_ok(p);
        int64_t dims[8];
        int rank = 0;
        ck_assert_int_eq(resdiag_reader_dims(rd, "backward/site_stats", dims, 8, &rank),
                         RESDIAG_OK);
        ck_assert_int_eq(rank, 5);
        ck_assert_int_eq(dims[3], want);
        resdiag_reader_destroy(rd);
    }
}
END_TEST

/* The reader of a schema 2 file: its sites 0..4 as recorded, the sites it
 * has no room for (branch_in, out_norm_in, out_norm_out) valid and never
 * observed: NaN statistics and sketch, no call site, no alias. In a
 * schema 3 file the same sites read as recorded. */
START_TEST(a_schema_2_file_reads_its_missing_sites_as_not_observed)
{
    const char *p2 = path("sites-2.h5"), *p3 = path("sites-3.h5");
    record_every_site(p2, 2);
    record_every_site(p3, 3);
    resdiag_reader *r2 = open_ok(p2), *r3 = open_ok(p3);
    ck_assert_int_eq(resdiag_reader_info(r2)->schema_version, 2);
    ck_assert_int_eq(resdiag_reader_info(r3)->schema_version, 3);
    const int sk_size = resdiag_reader_info(r2)->sketch_size;
    ck_assert_int_gt(sk_size, 0);
    double f[F], *sk = malloc((size_t)sk_size * sizeof *sk), ser[2];
    for (int64_t i = 0; i < 2; i++)
        for (int dir = 0; dir < 2; dir++)
            for (int l = 0; l < 2; l++)
                for (int b = 0; b < RESDIAG_N_BLOCK_SITES; b++) {
                    const resdiag_site site = (resdiag_site)b;
                    char want_cs[32];
                    snprintf(want_cs, sizeof want_cs, "t.c:%d", 10 + b);
                    for (int v = 0; v < 2; v++) {
                        const resdiag_reader *rd = v ? r3 : r2;
                        int in_file = v || b < RD_OLD_BLOCK_SITES, obs = -1, as = -2;
                        ck_assert_int_eq(resdiag_reader_site(rd, i, dir, l, 0, site, f, &obs),
                                         RESDIAG_OK);
                        ck_assert_int_eq(obs, in_file);
                        /* 4 rows of 8 values, each observed once */
                        ck_assert_msg(in_file ? f[RESDIAG_FIELD_ROWS] == 4 : isnan(f[0]),
                                      "schema %d step %lld dir %d layer %d %s: rows %g",
                                      v ? 3 : 2, (long long)i, dir, l, resdiag_site_name(site),
                                      f[RESDIAG_FIELD_ROWS]);
                        for (int k = 0; k < F && !in_file; k++)
                            ck_assert(isnan(f[k]));
                        ck_assert_int_eq(resdiag_reader_sketch(rd, i, dir, l, 0, site, sk),
                                         RESDIAG_OK);
                        int finite = 0;
                        for (int k = 0; k < sk_size; k++)
                            finite += !isnan(sk[k]);
                        ck_assert_int_eq(finite, in_file ? sk_size : 0);
                        ck_assert_str_eq(resdiag_reader_callsite(rd, dir, l, 0, site),
                                         in_file ? want_cs : "");
                        ck_assert_int_eq(resdiag_reader_alias(rd, i, dir, l, 0, site, &as),
                                         RESDIAG_OK);
                        int alias = dir == 0 && l == 1 && b == RESDIAG_NORM_OUT;
                        ck_assert_int_eq(as, alias ? RESDIAG_STREAM_OUT : -1);
                        ck_assert_int_eq(resdiag_reader_series(rd, dir, l, 0, site,
                                                               RESDIAG_FIELD_ROWS, ser, 2),
                                         RESDIAG_OK);
                        ck_assert(in_file ? ser[0] == 4 && ser[1] == 4
                                          : isnan(ser[0]) && isnan(ser[1]));
                    }
                }
    /* past the last site: a client bug in either */
    int obs = 0;
    ck_assert_int_eq(resdiag_reader_site(r2, 0, 0, 0, 0, (resdiag_site)RESDIAG_N_BLOCK_SITES, f,
                                         &obs), RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_reader_site(r3, 0, 0, 0, 0, (resdiag_site)RESDIAG_N_BLOCK_SITES, f,
                                         &obs), RESDIAG_E_RANGE);
    free(sk);
    resdiag_reader_destroy(r2);
    resdiag_reader_destroy(r3);
}
END_TEST

/* ------------------------------------------------------- refused files */

/* Replaces dataset name of p by one of its shape and type, chunked as
 * chunk0 steps, through the filters ids (n), holding nothing; with
 * raw_chunk, one chunk written as it is (H5Dwrite_chunk) of that size. */
static void replace_dataset(const char *p, const char *name, hid_t type, hsize_t chunk0,
                            const H5Z_filter_t *ids, int n, size_t raw_chunk)
{
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t sp = H5Dget_space(ds);
    hsize_t dims[8], maxd[8], chunk[8];
    int nd = H5Sget_simple_extent_dims(sp, dims, maxd);
    H5Dclose(ds);
    ck_assert_int_ge(H5Ldelete(f, name, H5P_DEFAULT), 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    for (int k = 0; k < nd; k++)
        chunk[k] = dims[k] ? dims[k] : 1;
    chunk[0] = chunk0;
    ck_assert_int_ge(H5Pset_chunk(dcpl, nd, chunk), 0);
    for (int k = 0; k < n; k++) {
        unsigned cd[1] = { 1 };
        ck_assert_int_ge(H5Pset_filter(dcpl, ids[k], H5Z_FLAG_OPTIONAL, ids[k] == H5Z_FILTER_DEFLATE,
                                       cd), 0);
    }
    ds = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ck_assert_int_ge(ds, 0);
    if (raw_chunk) {
        hsize_t at[8] = { 0 };
        char junk[64] = { 0 };
        ck_assert_int_ge(H5Dwrite_chunk(ds, H5P_DEFAULT, 0, at, raw_chunk, junk), 0);
    }
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
}

static void expect_refused(const char *p, resdiag_status want, const char *says1,
                           const char *says2)
{
    resdiag_reader *rd = (resdiag_reader *)1;
    g_log[0] = '\0';
    ck_assert_int_eq(resdiag_reader_open(&rd, p), want);
    ck_assert_ptr_null(rd);
    ck_assert_msg(strstr(g_log, says1) && strstr(g_log, says2), "message: %s", g_log);
    ck_assert_ptr_null(strchr(g_log, '\n'));
}

static const char *fresh(const char *name)
{
    run r;
    make_run(&r, 2, 1);
    const char *p = path(name);
    write_steps(p, &r, 3, 0);
    return p;
}

START_TEST(a_filter_resdiag_does_not_write_is_refused)
{
    static const H5Z_filter_t reversed[] = { H5Z_FILTER_DEFLATE, H5Z_FILTER_SHUFFLE };
    const char *p = fresh("reversed.h5");
    replace_dataset(p, "forward/site_stats", H5T_IEEE_F32LE, 1, reversed, 2, 0);
    expect_refused(p, RESDIAG_E_FORMAT, "dataset /forward/site_stats", "starting with filter 1");
    static const H5Z_filter_t checksum[] = { H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE,
                                             H5Z_FILTER_FLETCHER32 };
    p = fresh("fletcher.h5");
    replace_dataset(p, "backward/site_counts", H5T_STD_I64LE, 1, checksum, 3, 0);
    expect_refused(p, RESDIAG_E_FORMAT, "dataset /backward/site_counts",
                   "HDF5 filter 3");
    static const H5Z_filter_t deflate_only[] = { H5Z_FILTER_DEFLATE };
    p = fresh("deflate-only.h5");
    replace_dataset(p, "forward/site_sketch", H5T_IEEE_F32LE, 1, deflate_only, 1, 0);
    expect_refused(p, RESDIAG_E_FORMAT, "dataset /forward/site_sketch", "1 HDF5 filters");
}
END_TEST

/* One deflated chunk of 4096 steps (L x S x B x 12 float32 each: 2.9 MB
 * inflated) stored in 16 bytes: more than deflate's 1032:1 allows. */
START_TEST(a_filtered_dataset_that_claims_more_than_it_holds_is_refused)
{
    static const H5Z_filter_t pipeline[] = { H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE };
    const char *p = fresh("bomb.h5");
    replace_dataset(p, "forward/site_stats", H5T_IEEE_F32LE, 4096, pipeline, 2, 16);
    expect_refused(p, RESDIAG_E_FORMAT, "dataset /forward/site_stats",
                   "more than deflate can hold (1032:1)");
    /* as many bytes as the bound allows: opens */
    size_t inflated = (size_t)4 * L * S * B * RD_N_REAL_FIELDS;
    p = fresh("within.h5");
    replace_dataset(p, "forward/site_stats", H5T_IEEE_F32LE, 1, pipeline, 2,
                    (inflated + 1031) / 1032);
    resdiag_reader_destroy(open_ok(p));
}
END_TEST

/* ------------------------------------------- chunks the reader decodes */

/* Elements of one step of dataset name of p (axes after the first). */
static size_t step_elems(const char *p, const char *name)
{
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), sp = H5Dget_space(ds);
    hsize_t dims[8];
    int nd = H5Sget_simple_extent_dims(sp, dims, NULL);
    size_t n = 1;
    for (int k = 1; k < nd; k++)
        n *= (size_t)dims[k];
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
    return n;
}

/* Writes the chunk of step 0 of dataset name of p as it is, with mask. */
static void put_chunk(const char *p, const char *name, uint32_t mask, const void *buf,
                      size_t len)
{
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    hsize_t at[8] = { 0 };
    ck_assert_int_ge(H5Dwrite_chunk(ds, H5P_DEFAULT, mask, at, len, buf), 0);
    H5Dclose(ds);
    H5Fclose(f);
}

/* n values of esz bytes shuffled as HDF5's shuffle filter does. */
static unsigned char *shuffled(const unsigned char *v, size_t n, size_t esz)
{
    unsigned char *out = malloc(n * esz);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < esz; j++)
            out[j * n + i] = v[i * esz + j];
    return out;
}

/* The bytes of value x (float32 or int32) in big-endian or little order. */
static void put4(unsigned char *at, uint32_t bits, int big)
{
    for (int j = 0; j < 4; j++)
        at[j] = (unsigned char)(bits >> (big ? 8 * (3 - j) : 8 * j));
}

/* A float32 site_sketch (or, counts, an int32 site_calls) of byte order
 * big, its step 0 stored by hand: deflated unless raw (the optional
 * filter skipped, mask bit 1). Read back against the values written. */
static void crafted_chunk_reads(const char *file, int counts, int big, int raw)
{
    static const H5Z_filter_t pipeline[] = { H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE };
    const char *name = counts ? "forward/site_calls" : "forward/site_sketch";
    const char *p = fresh(file);
    hid_t type = counts ? (big ? H5T_STD_I32BE : H5T_STD_I32LE)
                        : (big ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
    replace_dataset(p, name, type, 1, pipeline, 2, 0);
    size_t n = step_elems(p, name);
    unsigned char *v = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        float x = (float)i * 0.25f - 3.0f;
        uint32_t bits = (uint32_t)(i % 1000 + 1);
        if (!counts)
            memcpy(&bits, &x, 4);
        put4(v + 4 * i, bits, big);
    }
    unsigned char *sh = shuffled(v, n, 4);
    uLongf len = compressBound((uLong)(n * 4));
    unsigned char *z = malloc(len);
    ck_assert_int_eq(compress2(z, &len, sh, (uLong)(n * 4), 1), Z_OK);
    if (raw)
        put_chunk(p, name, 2u, sh, n * 4);
    else
        put_chunk(p, name, 0, z, len);
    resdiag_reader *rd = open_ok(p);
    double *got = malloc(n * sizeof *got);
    g_log[0] = '\0';
    ck_assert_msg(resdiag_reader_read(rd, name, 0, 1, got, (int64_t)n) == RESDIAG_OK, "%s: %s",
                  file, g_log);
    for (size_t i = 0; i < n; i++) {
        double want = counts ? (double)(i % 1000 + 1) : (double)((float)i * 0.25f - 3.0f);
        ck_assert_msg(got[i] == want, "%s value %zu: %g, wrote %g", file, i, got[i], want);
    }
    /* step 1 was never written: the fill value (0; calls: 0 = not observed) */
    ck_assert_int_eq(resdiag_reader_read(rd, name, 1, 1, got, (int64_t)n), RESDIAG_OK);
    ck_assert_msg(counts ? isnan(got[0]) : got[0] == 0, "%s step 1: %g", file, got[0]);
    resdiag_reader_destroy(rd);
    free(got);
    free(z);
    free(sh);
    free(v);
}

START_TEST(chunks_stored_raw_or_big_endian_read_as_written)
{
    crafted_chunk_reads("raw-chunk.h5", 0, 0, 1);
    crafted_chunk_reads("deflated-le.h5", 0, 0, 0);
    crafted_chunk_reads("f32be.h5", 0, 1, 0);
    crafted_chunk_reads("i32be.h5", 1, 1, 0);
    crafted_chunk_reads("i32be-raw.h5", 1, 1, 1);
}
END_TEST

/* Step 0 of site_sketch stored as the deflate of `logical` bytes (cut to
 * keep bytes of the stream when keep > 0), or as `junk` bytes of zeros. */
static void expect_chunk_refused(const char *file, size_t logical, size_t keep, size_t junk,
                                 const char *says)
{
    static const H5Z_filter_t pipeline[] = { H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE };
    const char *name = "forward/site_sketch";
    const char *p = fresh(file);
    replace_dataset(p, name, H5T_IEEE_F32LE, 1, pipeline, 2, 0);
    size_t n = step_elems(p, name), size = logical ? logical : junk;
    unsigned char *zeros = calloc(1, size + 1);
    uLongf len = compressBound((uLong)size);
    unsigned char *z = calloc(1, len);
    if (logical)
        ck_assert_int_eq(compress2(z, &len, zeros, (uLong)logical, 1), Z_OK);
    else
        len = (uLongf)junk;
    put_chunk(p, name, 0, logical ? z : zeros, keep ? keep : len);
    resdiag_reader *rd = open_ok(p);
    double *got = malloc(n * sizeof *got);
    g_log[0] = '\0';
    ck_assert_int_eq(resdiag_reader_read(rd, name, 0, 1, got, (int64_t)n), RESDIAG_E_FORMAT);
    ck_assert_msg(strstr(g_log, "dataset /forward/site_sketch, step 0") && strstr(g_log, says),
                  "%s: message: %s", file, g_log);
    resdiag_reader_destroy(rd);
    free(got);
    free(z);
    free(zeros);
}

START_TEST(a_chunk_that_does_not_inflate_to_its_size_is_refused)
{
    const char *p = fresh("probe.h5");
    size_t bytes = step_elems(p, "forward/site_sketch") * 4;
    expect_chunk_refused("past.h5", 2 * bytes, 0, 0, "inflates to more than its");
    /* one byte more: its last output is what the extra inflate call finds */
    expect_chunk_refused("past1.h5", bytes + 1, 0, 0, "inflates to more than its");
    /* a stream of 64 MiB in a chunk of 960 bytes (HDF5 inflates it all) */
    expect_chunk_refused("bomb64.h5", (size_t)64 << 20, 0, 0, "more than deflate of its");
    expect_chunk_refused("short.h5", bytes / 2, 0, 0, "inflates to");
    expect_chunk_refused("cut.h5", bytes, 6, 0, "cut short");
    expect_chunk_refused("oversize.h5", 0, 0, (size_t)compressBound((uLong)bytes) + 1,
                         "more than deflate of its");
}
END_TEST

START_TEST(a_filtered_chunk_shape_resdiag_does_not_write_is_refused)
{
    static const H5Z_filter_t pipeline[] = { H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE };
    const char *p = fresh("two-steps.h5");
    replace_dataset(p, "forward/site_sketch", H5T_IEEE_F32LE, 2, pipeline, 2, 0);
    expect_refused(p, RESDIAG_E_FORMAT, "dataset /forward/site_sketch",
                   "more than one step");
}
END_TEST

/* Appends steps [from, to) of value() (one batch). */
static void append_range(rd_writer *w, run *r, int64_t from, int64_t to)
{
    char err[1024] = "";
    size_t len = r->lay.record_len, k = (size_t)(to - from);
    double *rec = malloc(k * len * sizeof *rec), *times = malloc(k * sizeof *times);
    int64_t *steps = malloc(k * sizeof *steps);
    rd_callsite *cs = calloc(r->lay.n_slots, sizeof *cs);
    for (int64_t i = from; i < to; i++) {
        steps[i - from] = 10 + i;
        times[i - from] = (double)i;
        for (size_t off = 0; off < len; off++)
            rec[(size_t)(i - from) * len + off] = value(&r->lay, i, off);
    }
    ck_assert_msg(rd_writer_append(w, steps, times, rec, k, cs, from == 0, err, sizeof err)
                  == RESDIAG_OK, "append: %s", err);
    free(rec);
    free(times);
    free(steps);
    free(cs);
}

/* A deflated file read while it is written (SWMR): the step the reader
 * keeps decoded is forgotten at refresh, and every step reads as written. */
START_TEST(a_deflated_file_reads_across_refresh_while_written)
{
    run r;
    make_run(&r, 2, 1);
    const char *p = path("swmr-deflated.h5");
    int c2p[2], p2c[2];
    ck_assert_int_eq(pipe(c2p), 0);
    ck_assert_int_eq(pipe(p2c), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char err[1024], c = 0;
        rd_writer *w = NULL;
        int ok = rd_writer_create(&w, p, &r.hdr, err, sizeof err) == RESDIAG_OK;
        if (ok)
            append_range(w, &r, 0, 3);
        ok = ok && write(c2p[1], "a", 1) == 1 && read(p2c[0], &c, 1) == 1;
        if (ok)
            append_range(w, &r, 3, 7);
        ok = ok && write(c2p[1], "b", 1) == 1 && read(p2c[0], &c, 1) == 1;
        ok = ok && rd_writer_close(w, err, sizeof err) == RESDIAG_OK;
        _exit(ok ? 0 : 1);
    }
    char c = 0;
    ck_assert_int_eq(read(c2p[0], &c, 1), 1);
    ck_assert_int_eq(c, 'a');
    resdiag_reader *rd = open_ok(p);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 3);
    check_tables(rd, &r.lay, 3);
    ck_assert_int_eq(write(p2c[1], "g", 1), 1);
    ck_assert_int_eq(read(c2p[0], &c, 1), 1);
    ck_assert_int_eq(c, 'b');
    ck_assert_int_eq(resdiag_reader_refresh(rd), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 7);
    check_tables(rd, &r.lay, 7);
    ck_assert_int_eq(write(p2c[1], "g", 1), 1);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(resdiag_reader_refresh(rd), RESDIAG_OK);
    check_tables(rd, &r.lay, 7);
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(a_type_that_is_not_the_schemas_is_refused)
{
    const char *p = fresh("string-counts.h5");
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 8);
    replace_dataset(p, "forward/model_counts", str, 1, NULL, 0, 0);
    H5Tclose(str);
    expect_refused(p, RESDIAG_E_FORMAT, "dataset /forward/model_counts", "integers of shape");
    p = fresh("float-calls.h5");
    replace_dataset(p, "forward/site_calls", H5T_IEEE_F64LE, 1, NULL, 0, 0);
    expect_refused(p, RESDIAG_E_FORMAT, "dataset /forward/site_calls", "integers of shape");
    /* any float where float32 is the schema's: read as it is */
    p = fresh("f64-sketch.h5");
    replace_dataset(p, "forward/site_sketch", H5T_IEEE_F64LE, 1, NULL, 0, 0);
    resdiag_reader *rd = open_ok(p);
    double sk[K];
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, 0, 0, RESDIAG_STREAM_IN, sk),
                     RESDIAG_OK);
    ck_assert(sk[0] == 0); /* HDF5's default fill value */
    resdiag_reader_destroy(rd);
}
END_TEST

START_TEST(a_newer_schema_is_refused_with_e_version)
{
    const char *p = fresh("four.h5");
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
    int v = 4;
    ck_assert_int_ge(H5Awrite(a, H5T_NATIVE_INT, &v), 0);
    H5Aclose(a);
    H5Fclose(f);
    expect_refused(p, RESDIAG_E_VERSION, "schema version 4", "reads up to 3");
}
END_TEST

static void capture_every_log(void)
{
    resdiag_set_log_handler(capture_log, NULL);
}

static const check_program program = {
    .name = "h5-schema2",
    .scratch = g_dir,
    .scratch_size = sizeof g_dir,
    .remove_files = 1,
    .prepare = capture_every_log,
};
CHECK_MAIN(&program,
           CHECK_CASE("schema2", 60),
               CHECK_TEST(values_round_trip_uncompressed),
               CHECK_TEST(values_round_trip_deflated),
               CHECK_TEST(a_count_that_is_no_integer_is_refused),
               CHECK_TEST(options_are_checked_and_default_to_schema_3_deflate_1),
               CHECK_TEST(schema_1_on_request),
               CHECK_TEST(values_round_trip_in_schema_3),
               CHECK_TEST(site_axes_hold_the_schemas_block_sites),
               CHECK_TEST(a_schema_2_file_reads_its_missing_sites_as_not_observed),
               CHECK_TEST(a_filter_resdiag_does_not_write_is_refused),
               CHECK_TEST(a_filtered_dataset_that_claims_more_than_it_holds_is_refused),
               CHECK_TEST(a_type_that_is_not_the_schemas_is_refused),
               CHECK_TEST(chunks_stored_raw_or_big_endian_read_as_written),
               CHECK_TEST(a_chunk_that_does_not_inflate_to_its_size_is_refused),
               CHECK_TEST(a_filtered_chunk_shape_resdiag_does_not_write_is_refused),
               CHECK_TEST(a_deflated_file_reads_across_refresh_while_written),
               CHECK_TEST(a_newer_schema_is_refused_with_e_version))
