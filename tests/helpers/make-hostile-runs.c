/*
 * make-hostile-runs.c - writes run files that someone crafted on purpose:
 * each starts as a valid run written by the library, then the raw HDF5 API
 * swaps objects for ones that make a naive reader read outside the file,
 * hang, load code or work without bound (doc/FORMAT.md, "Reading files from
 * others"). tests/tool/test-hostile.sh and tests/unit/test-hostile.c feed them to the
 * tool and to the reader API; tests/fuzz/test-fuzz-replay.sh replays them.
 *
 *   base.h5              the valid run every other file starts from
 *   secret-target.h5     an HDF5 file holding the secret line as call sites
 *   external-callsite.h5 /forward/site_callsite stored in SECRET (H5Pset_external)
 *   external-table.h5    /forward/site_stats stored in SECRET
 *   elink-callsite.h5    /forward/site_callsite an external link into secret-target.h5
 *   elink-group.h5       /backward an external link to a group of secret-target.h5
 *   elink-fifo.h5        /forward/site_stats an external link into the FIFO
 *   softlink.h5          /forward/site_stats a soft link to /backward/site_stats
 *   vds-callsite.h5      /forward/site_callsite a virtual dataset over secret-target.h5
 *   vds-fifo.h5          /forward/site_stats a virtual dataset over the FIFO
 *   filter.h5            /forward/site_stats through filter 32123, which only
 *                        this program has (HDF5 looks for it in plugins)
 *   layers-100k.h5       n_layers = 100000 and every layer axis to match, no data
 *   layers-1m.h5         the same with 1000000 layers
 *   steps-100k.h5        512 layers and 100000 steps, data only in the
 *                        first, no /summary: valid, and must cost what it holds
 *   bad-chunk-index.h5   every v2 B-tree leaf (the tables' chunk indexes)
 *                        damaged, in a run written without compression: the
 *                        file opens, reading a table fails
 *   bad-chunk-index-deflated.h5  the same in a run written with compression:
 *                        refused at open (the reader walks a filtered index
 *                        to bound what its chunks can hold)
 *   scales-dangling.h5   every DIMENSION_LIST (the dimension scales) refers
 *                        to nothing: past the end of the file or the
 *                        superblock; /layer, a scale, removed: valid for
 *                        resdiag, which reads no scale
 *   scales-elink.h5      the /layer scale an external link into
 *                        secret-target.h5
 *
 * Schemas 2 and 3 (base.h5 is schema 3, the default, which stores as schema
 * 2 does: float32 statistics, int64 counts; of L = 5 layers, so that its
 * block-site tables are large enough to be deflated, through shuffle then
 * deflate; 8 block sites):
 *   s2-filter-blosc.h5   /forward/site_stats through shuffle then filter 32001
 *                        (Blosc's id; here an identity only this program has)
 *   s2-filter-order.h5   /forward/site_counts through deflate then shuffle
 *   s2-filter-extra.h5   /forward/site_sketch through shuffle, deflate, fletcher32
 *   s2-type-string.h5    /forward/site_stats of 4-byte strings
 *   s2-type-compound.h5  /forward/site_counts of a compound of two int64
 *   s2-type-double-counts.h5 /forward/site_counts of float64
 *   s2-counts-negative.h5 a row count of -5 (the only negative count is -1)
 *   s2-counts-huge.h5    a row count of 2^62 (no double holds it exactly)
 *   s2-calls-negative.h5 a call count of -3 in /forward/site_calls (int32)
 *   s2-alias-range.h5    an alias of 100 in /forward/site_alias (int8; 8 sites)
 *   s2-version-4.h5      schema_version 4 (newer than any this library reads)
 *   s2-bomb-chunk.h5     /forward/site_sketch in one chunk of 2^k steps that
 *                        deflates to a few hundred KB and inflates to 256 MiB
 *                        (the file holds 3 steps)
 *   s2-steps-3g.h5       every time series extended to 3e9 steps, no data
 *                        written: a few MB that claim billions of steps
 *   s2-chunk-trailing.h5 every chunk of /forward/site_stats its deflate
 *                        stream, whole, then 4 bytes more
 *   s2-damaged-last.h5   the deflated chunk of the last step (2) of
 *                        /forward/site_sketch damaged (bytes flipped): it
 *                        opens, and only what reads the last step's
 *                        sketches fails (the report: the last step beside
 *                        the first)
 *
 * Usage: make-hostile-runs DIR SECRET FIFO  (SECRET: an existing text file;
 * FIFO: a named pipe, never opened here)
 */
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "damage-chunk.h"
#include "fixture.h"
#include "resdiag.h"

enum { L = 5, S = 1, D = 16, ROWS = 8, STEPS = 3, CALLSITE_LEN = 128, WIDE_LAYERS = 512 };
#define FILTER_ID 32123
#define BLOSC_ID 32001

static const char *dir;
static char secret[PATH_MAX], fifo[PATH_MAX];

static void die(const char *what)
{
    fprintf(stderr, "make-hostile-runs: %s\n", what);
    exit(1);
}

static char *path(const char *name)
{
    static char p[4][PATH_MAX + 64];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* A pre-norm run of `layers` layers, every site observed at every step
 * (STEPS steps; one when wider than base.h5), at that compression. */
static void write_base(const char *p, int layers, int compression)
{
    static const char *const names[S] = { "mlp" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = layers, .cols = D,
        .sublayers = S, .sublayer_names = names });
    m.declared_placement = RESDIAG_PLACEMENT_PRE;
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 1;
    o.compression = compression;
    resdiag *r = NULL;
    if (resdiag_open(&r, p, &m, &o) != RESDIAG_OK)
        die("resdiag_open");
    float x[ROWS * D], f[ROWS * D], y[ROWS * D], n[ROWS * D];
    for (int s = 0; s < (layers > L ? 1 : STEPS); s++) {
        for (int i = 0; i < ROWS * D; i++) {
            x[i] = (float)sin(i + 0.1 * s);
            f[i] = (float)(0.1 * cos(3.0 * i));
            n[i] = (float)((i % 2) ? 1 : -1);
        }
        if (resdiag_step_begin(r, s) != RESDIAG_OK)
            die("step_begin");
        for (int l = 0; l < layers; l++) {
            for (int i = 0; i < ROWS * D; i++)
                y[i] = x[i] + f[i];
            RESDIAG_FWD(r, l, 0, RESDIAG_STREAM_IN, resdiag_f32(x, ROWS, D));
            RESDIAG_FWD(r, l, 0, RESDIAG_NORM_IN, resdiag_f32(x, ROWS, D));
            RESDIAG_FWD(r, l, 0, RESDIAG_NORM_OUT, resdiag_f32(n, ROWS, D));
            RESDIAG_FWD(r, l, 0, RESDIAG_BRANCH_OUT, resdiag_f32(f, ROWS, D));
            RESDIAG_FWD(r, l, 0, RESDIAG_STREAM_OUT, resdiag_f32(y, ROWS, D));
            RESDIAG_BWD(r, l, 0, RESDIAG_STREAM_OUT, resdiag_f32(f, ROWS, D));
            memcpy(x, y, sizeof x);
        }
        if (resdiag_step_end(r) != RESDIAG_OK)
            die("step_end");
    }
    if (resdiag_close(r) != RESDIAG_OK)
        die("resdiag_close");
    resdiag_destroy(r);
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wbx");
    if (!a || !b)
        die("cannot copy base.h5 (does the output exist already?)");
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, n, b) != n)
            die("write");
    if (ferror(a) || fclose(b) != 0)
        die("copy");
    fclose(a);
}

/* A copy of `from` called name, opened for writing. */
static hid_t open_copy_of(const char *from, const char *name)
{
    copy_file(path(from), path(name));
    hid_t f = H5Fopen(path(name), H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        die(name);
    return f;
}

static hid_t open_copy(const char *name)
{
    return open_copy_of("base.h5", name);
}

/* Reads all of dataset name: its type, space and data (free the data). */
static void *read_all(hid_t f, const char *name, hid_t *type, hid_t *space)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0)
        die(name);
    *type = H5Dget_type(ds);
    *space = H5Dget_space(ds);
    hssize_t np = H5Sget_simple_extent_npoints(*space);
    void *buf = calloc((size_t)np + 1, H5Tget_size(*type));
    if (!buf || H5Dread(ds, *type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        die(name);
    H5Dclose(ds);
    return buf;
}

/* The space of `space` with fixed extents (contiguous and virtual layouts). */
static hid_t fixed_space(hid_t space)
{
    hsize_t dims[8];
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    return H5Screate_simple(rank, dims, NULL);
}

/* Replaces dataset name by one with creation properties dcpl; writes data
 * unless NULL. */
static void recreate(hid_t f, const char *name, hid_t type, hid_t space, hid_t dcpl,
                     const void *data)
{
    if (H5Ldelete(f, name, H5P_DEFAULT) < 0)
        die(name);
    hid_t ds = H5Dcreate2(f, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds < 0 || (data && H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0))
        die(name);
    H5Dclose(ds);
}

/* Dataset name stored in SECRET, from byte 0 on. */
static void make_external(const char *file, const char *name)
{
    hid_t f = open_copy(file), type, space;
    free(read_all(f, name, &type, &space));
    hid_t fs = fixed_space(space), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (H5Pset_external(dcpl, secret, 0, H5F_UNLIMITED) < 0)
        die("H5Pset_external");
    recreate(f, name, type, fs, dcpl, NULL);
    H5Pclose(dcpl);
    H5Sclose(fs);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
}

/* secret-target.h5: /site_callsite and /backward/site_callsite shaped like
 * base.h5's call sites, every element the first line of SECRET. */
static void make_secret_target(void)
{
    char line[CALLSITE_LEN] = { 0 };
    FILE *s = fopen(secret, "r");
    if (!s || !fgets(line, sizeof line, s))
        die("cannot read SECRET");
    fclose(s);
    line[strcspn(line, "\n")] = '\0';
    hid_t f = H5Fcreate(path("secret-target.h5"), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        die("secret-target.h5");
    hsize_t dims[3] = { L, S, RESDIAG_N_BLOCK_SITES };
    char *data = calloc(L * S * RESDIAG_N_BLOCK_SITES, CALLSITE_LEN);
    for (int i = 0; i < L * S * RESDIAG_N_BLOCK_SITES; i++)
        memcpy(data + (size_t)i * CALLSITE_LEN, line, sizeof line);
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate_simple(3, dims, NULL);
    H5Tset_size(t, CALLSITE_LEN);
    H5Tset_cset(t, H5T_CSET_UTF8); /* as resdiag's own call sites */
    hid_t g = H5Gcreate2(f, "backward", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char *names[2] = { "site_callsite", "backward/site_callsite" };
    for (int i = 0; i < 2; i++) {
        hid_t ds = H5Dcreate2(f, names[i], t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (ds < 0 || H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
            die("secret-target.h5 dataset");
        H5Dclose(ds);
    }
    H5Gclose(g);
    H5Sclose(sp);
    H5Tclose(t);
    free(data);
    H5Fclose(f);
}

/* Dataset name replaced by an external link to target_file:target. */
static void make_elink(const char *file, const char *name, const char *target_file,
                       const char *target)
{
    hid_t f = open_copy(file);
    if (H5Ldelete(f, name, H5P_DEFAULT) < 0
        || H5Lcreate_external(target_file, target, f, name, H5P_DEFAULT, H5P_DEFAULT) < 0)
        die(file);
    H5Fclose(f);
}

/* Dataset name replaced by a virtual dataset of the same shape over
 * source_file:source (the whole extent, one to one). */
static void make_vds(const char *file, const char *name, const char *source_file,
                     const char *source)
{
    hid_t f = open_copy(file), type, space;
    free(read_all(f, name, &type, &space));
    hid_t fs = fixed_space(space), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (H5Pset_virtual(dcpl, fs, source_file, source, fs) < 0)
        die("H5Pset_virtual");
    recreate(f, name, type, fs, dcpl, NULL);
    H5Pclose(dcpl);
    H5Sclose(fs);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
}

static size_t identity_filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[],
                              size_t nbytes, size_t *buf_size, void **buf)
{
    (void)flags;
    (void)cd_nelmts;
    (void)cd_values;
    (void)buf_size;
    (void)buf;
    return nbytes;
}

/* /forward/site_stats written through a filter that only this process has
 * (alone: base.h5's own filters, schema 2's shuffle and deflate, removed). */
static void make_filter(void)
{
    static const H5Z_class2_t cls = { H5Z_CLASS_T_VERS, (H5Z_filter_t)FILTER_ID, 1, 1,
                                      "resdiag test filter", NULL, NULL, identity_filter };
    if (H5Zregister(&cls) < 0)
        die("H5Zregister");
    const char *name = "forward/site_stats";
    hid_t f = open_copy("filter.h5"), type, space;
    void *data = read_all(f, name, &type, &space);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(ds);
    H5Dclose(ds);
    if (H5Premove_filter(dcpl, H5Z_FILTER_ALL) < 0
        || H5Pset_filter(dcpl, (H5Z_filter_t)FILTER_ID, H5Z_FLAG_MANDATORY, 0, NULL) < 0)
        die("H5Pset_filter");
    recreate(f, name, type, space, dcpl, data);
    free(data);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
}

/* ---------------------------------------------------- declared layers */

typedef struct grow_ctx {
    hid_t file;
    long long layers;
    char names[64][64];
    int n;
} grow_ctx;

static herr_t collect(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    (void)obj;
    grow_ctx *c = data;
    if (info->type == H5O_TYPE_DATASET && c->n < 64)
        snprintf(c->names[c->n++], sizeof c->names[0], "%s", name);
    return 0;
}

/* Position of "layer" in the comma-separated axes attribute, or -1. */
static int layer_axis(hid_t ds)
{
    hid_t a = H5Aopen(ds, "axes", H5P_DEFAULT), t = H5Aget_type(a);
    char *axes = NULL;
    if (a < 0 || H5Aread(a, t, &axes) < 0)
        die("axes");
    int pos = -1, k = 0;
    for (char *tok = strtok(axes, ","); tok; tok = strtok(NULL, ","), k++)
        if (strcmp(tok, "layer") == 0)
            pos = k;
    H5free_memory(axes);
    H5Tclose(t);
    H5Aclose(a);
    return pos;
}

/* n_layers raised to `layers`, and every dataset with a layer axis made
 * again with that many layers, chunked, without data: a small file that
 * declares a huge model. */
static void make_layers(const char *file, long long layers)
{
    grow_ctx c = { open_copy(file), layers, { { 0 } }, 0 };
    if (H5Ovisit(c.file, H5_INDEX_NAME, H5_ITER_INC, collect, &c) < 0)
        die("H5Ovisit");
    for (int i = 0; i < c.n; i++) {
        hid_t ds = H5Dopen2(c.file, c.names[i], H5P_DEFAULT);
        int axis = layer_axis(ds);
        if (axis < 0) {
            H5Dclose(ds);
            continue;
        }
        hid_t type = H5Dget_type(ds), space = H5Dget_space(ds), dcpl = H5Dget_create_plist(ds);
        H5Dclose(ds);
        hsize_t dims[8], max[8], chunk[8];
        int rank = H5Sget_simple_extent_dims(space, dims, max);
        if (H5Pget_layout(dcpl) != H5D_CHUNKED) {
            /* the /layer scale: the reader never reads it */
            H5Pclose(dcpl);
            H5Sclose(space);
            H5Tclose(type);
            continue;
        }
        if (H5Pget_chunk(dcpl, rank, chunk) != rank)
            die("chunk");
        dims[axis] = (hsize_t)layers;
        if (max[axis] != H5S_UNLIMITED)
            max[axis] = (hsize_t)layers;
        chunk[axis] = 1024;
        hid_t ns = H5Screate_simple(rank, dims, max);
        if (H5Pset_chunk(dcpl, rank, chunk) < 0 || H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_INCR) < 0)
            die("dcpl");
        recreate(c.file, c.names[i], type, ns, dcpl, NULL);
        H5Sclose(ns);
        H5Pclose(dcpl);
        H5Sclose(space);
        H5Tclose(type);
    }
    int v = (int)layers;
    hid_t a = H5Aopen(c.file, "n_layers", H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, H5T_NATIVE_INT, &v) < 0)
        die("n_layers");
    H5Aclose(a);
    H5Fclose(c.file);
}

/* /steps and /step_time rewritten with n steps, every other time series
 * extended to n steps without data (fill: nothing observed after the
 * first ones), and no /summary (as resdiag 0.1.0 wrote): a few MB that
 * make a reader go over n steps of every table. */
static void make_steps(const char *file, hsize_t n)
{
    /* wide enough that reading every table at every step costs much */
    write_base(path("wide.h5"), WIDE_LAYERS, 1);
    grow_ctx c = { open_copy_of("wide.h5", file), 0, { { 0 } }, 0 };
    if (H5Ldelete(c.file, "summary", H5P_DEFAULT) < 0
        || H5Ovisit(c.file, H5_INDEX_NAME, H5_ITER_INC, collect, &c) < 0)
        die("steps");
    int64_t *steps = malloc(n * sizeof *steps);
    double *times = malloc(n * sizeof *times);
    for (hsize_t i = 0; i < n; i++) {
        steps[i] = (int64_t)i;
        times[i] = 0.001 * (double)i;
    }
    for (int i = 0; i < c.n; i++) {
        hid_t ds = H5Dopen2(c.file, c.names[i], H5P_DEFAULT), sp = H5Dget_space(ds);
        hsize_t dims[8], max[8];
        int rank = H5Sget_simple_extent_dims(sp, dims, max);
        H5Sclose(sp);
        if (max[0] == H5S_UNLIMITED) {
            dims[0] = n;
            if (H5Dset_extent(ds, dims) < 0)
                die("H5Dset_extent");
        }
        (void)rank;
        if (strcmp(c.names[i], "steps") == 0
            && H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, steps) < 0)
            die("steps");
        if (strcmp(c.names[i], "step_time") == 0
            && H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, times) < 0)
            die("step_time");
        H5Dclose(ds);
    }
    free(steps);
    free(times);
    H5Fclose(c.file);
    remove(path("wide.h5"));
}

/* Every leaf of a v2 B-tree that indexes chunks (record type 10, or 11 for
 * filtered chunks: the tables') damaged one byte after its signature: its
 * checksum fails when a table is read; of unfiltered chunks, everything the
 * reader checks at open still reads. */
static void make_bad_chunk_index(const char *from, const char *name)
{
    copy_file(path(from), path(name));
    FILE *fp = fopen(path(name), "r+b");
    if (!fp || fseek(fp, 0, SEEK_END) != 0)
        die(name);
    long len = ftell(fp);
    unsigned char *b = malloc((size_t)len);
    rewind(fp);
    if (!b || fread(b, 1, (size_t)len, fp) != (size_t)len)
        die("read");
    int hits = 0;
    for (long i = 0; i + 8 <= len; i++)
        if (memcmp(b + i, "BTLF", 4) == 0 && (b[i + 5] == 10 || b[i + 5] == 11)) {
            b[i + 6] ^= 0x5a;
            hits++;
        }
    if (hits == 0)
        die("no v2 B-tree leaf in the base run");
    rewind(fp);
    if (fwrite(b, 1, (size_t)len, fp) != (size_t)len || fclose(fp) != 0)
        die("write");
    free(b);
}

/* ----------------------------------------------------- dimension scales */

static herr_t collect_dim_lists(hid_t obj, const char *name, const H5O_info_t *info, void *data)
{
    grow_ctx *c = data;
    if (info->type == H5O_TYPE_DATASET && c->n < 64 && H5Aexists_by_name(obj, name,
                                                                       "DIMENSION_LIST",
                                                                       H5P_DEFAULT) > 0)
        snprintf(c->names[c->n++], sizeof c->names[0], "%s", name);
    return 0;
}

/* Every dataset's DIMENSION_LIST rewritten to refer to addresses where no
 * object is (past the end of the file, the superblock), and the /layer
 * scale deleted: a reader that followed a scale would read garbage. */
static void make_dangling_scales(void)
{
    grow_ctx c = { open_copy("scales-dangling.h5"), 0, { { 0 } }, 0 };
    if (H5Ovisit(c.file, H5_INDEX_NAME, H5_ITER_INC, collect_dim_lists, &c) < 0 || c.n < 10)
        die("scales-dangling.h5: DIMENSION_LIST");
    hid_t vt = H5Tvlen_create(H5T_STD_REF_OBJ);
    for (int i = 0; i < c.n; i++) {
        hid_t ds = H5Dopen2(c.file, c.names[i], H5P_DEFAULT);
        hid_t a = H5Aopen(ds, "DIMENSION_LIST", H5P_DEFAULT), sp = H5Aget_space(a);
        hsize_t rank = 0;
        H5Sget_simple_extent_dims(sp, &rank, NULL);
        H5Aclose(a);
        hobj_ref_t refs[8];
        hvl_t lists[8];
        for (hsize_t k = 0; k < rank && k < 8; k++) {
            refs[k] = k % 2 ? (hobj_ref_t)0 : (hobj_ref_t)1 << 40;
            lists[k].len = 1;
            lists[k].p = &refs[k];
        }
        if (H5Adelete(ds, "DIMENSION_LIST") < 0
            || (a = H5Acreate2(ds, "DIMENSION_LIST", vt, sp, H5P_DEFAULT, H5P_DEFAULT)) < 0
            || H5Awrite(a, vt, lists) < 0)
            die("scales-dangling.h5: rewriting DIMENSION_LIST");
        H5Aclose(a);
        H5Sclose(sp);
        H5Dclose(ds);
    }
    H5Tclose(vt);
    if (H5Ldelete(c.file, "layer", H5P_DEFAULT) < 0)
        die("scales-dangling.h5: /layer");
    H5Fclose(c.file);
}

/* ----------------------------------------------------------- schema 2 */

/* Dataset name made again with the filters ids (n of them, each with the
 * client data of HDF5's own where it has one), data kept. */
static void make_filters(const char *file, const char *name, const int *ids, int n)
{
    hid_t f = open_copy(file), type, space;
    void *data = read_all(f, name, &type, &space);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(ds);
    H5Dclose(ds);
    if (H5Premove_filter(dcpl, H5Z_FILTER_ALL) < 0)
        die("H5Premove_filter");
    for (int i = 0; i < n; i++) {
        herr_t e = ids[i] == H5Z_FILTER_DEFLATE ? H5Pset_deflate(dcpl, 1)
                   : ids[i] == H5Z_FILTER_SHUFFLE ? H5Pset_shuffle(dcpl)
                   : ids[i] == H5Z_FILTER_FLETCHER32 ? H5Pset_fletcher32(dcpl)
                   : H5Pset_filter(dcpl, (H5Z_filter_t)ids[i], H5Z_FLAG_MANDATORY, 0, NULL);
        if (e < 0)
            die("a filter");
    }
    recreate(f, name, type, space, dcpl, data);
    free(data);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
}

static void make_foreign_filters(void)
{
    static const H5Z_class2_t blosc = { H5Z_CLASS_T_VERS, (H5Z_filter_t)BLOSC_ID, 1, 1,
                                        "not blosc", NULL, NULL, identity_filter };
    if (H5Zregister(&blosc) < 0)
        die("H5Zregister");
    const int foreign[] = { H5Z_FILTER_SHUFFLE, BLOSC_ID };
    make_filters("s2-filter-blosc.h5", "forward/site_stats", foreign, 2);
    const int swapped[] = { H5Z_FILTER_DEFLATE, H5Z_FILTER_SHUFFLE };
    make_filters("s2-filter-order.h5", "forward/site_counts", swapped, 2);
    const int extra[] = { H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE, H5Z_FILTER_FLETCHER32 };
    make_filters("s2-filter-extra.h5", "forward/site_sketch", extra, 3);
}

/* Dataset name made again with values of another type (no data written:
 * every element reads as that type's fill value). */
static void make_type(const char *file, const char *name, hid_t type)
{
    hid_t f = open_copy(file), old, space;
    free(read_all(f, name, &old, &space));
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(ds);
    H5Dclose(ds);
    if (H5Premove_filter(dcpl, H5Z_FILTER_ALL) < 0 || H5Pset_fill_value(dcpl, type, NULL) < 0)
        die("dcpl");
    recreate(f, name, type, space, dcpl, NULL);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(old);
    H5Fclose(f);
}

static void make_wrong_types(void)
{
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 4);
    make_type("s2-type-string.h5", "forward/site_stats", str);
    H5Tclose(str);
    hid_t cmp = H5Tcreate(H5T_COMPOUND, 16);
    H5Tinsert(cmp, "a", 0, H5T_STD_I64LE);
    H5Tinsert(cmp, "b", 8, H5T_STD_I64LE);
    make_type("s2-type-compound.h5", "forward/site_counts", cmp);
    H5Tclose(cmp);
    make_type("s2-type-double-counts.h5", "forward/site_counts", H5T_IEEE_F64LE);
}

/* Element `at` of integer dataset name (read and written as int64, its
 * filters kept) set to value. */
static void make_int_value(const char *file, const char *name, size_t at, int64_t value)
{
    hid_t f = open_copy(file);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), sp = H5Dget_space(ds);
    hssize_t np = H5Sget_simple_extent_npoints(sp);
    int64_t *v = calloc((size_t)np + 1, sizeof *v);
    if (ds < 0 || !v || (size_t)np <= at
        || H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        die(name);
    v[at] = value;
    if (H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        die(name);
    free(v);
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
}

/* A zlib stream (what HDF5's deflate filter writes) of n zero bytes:
 * shuffled zeros are zeros, so it is a shuffle+deflate chunk of zeros. */
static unsigned char *deflated_zeros(size_t n, size_t *len)
{
    static unsigned char zeros[1 << 20];
    size_t cap = n / 500 + 65536;
    unsigned char *out = malloc(cap);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (!out || deflateInit(&z, 9) != Z_OK)
        die("deflateInit");
    z.next_out = out;
    z.avail_out = (uInt)cap;
    size_t left = n;
    int rc;
    do {
        size_t k = left < sizeof zeros ? left : sizeof zeros;
        z.next_in = zeros;
        z.avail_in = (uInt)k;
        left -= k;
        rc = deflate(&z, left ? Z_NO_FLUSH : Z_FINISH);
        if (rc == Z_STREAM_ERROR || z.avail_out == 0)
            die("deflate");
    } while (left || rc != Z_STREAM_END);
    *len = z.total_out;
    deflateEnd(&z);
    return out;
}

/* /forward/site_sketch made again in chunks of as many steps as make 256
 * MiB, its first chunk (the 3 steps there are and the rest of the chunk)
 * written as it is in the file: all zeros, deflated. */
static void make_chunk_bomb(void)
{
    const char *name = "forward/site_sketch";
    hid_t f = open_copy("s2-bomb-chunk.h5"), type, space;
    free(read_all(f, name, &type, &space));
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(ds);
    H5Dclose(ds);
    hsize_t dims[8], chunk[8];
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    size_t step_bytes = H5Tget_size(type);
    for (int k = 1; k < rank; k++) {
        chunk[k] = dims[k];
        step_bytes *= dims[k];
    }
    chunk[0] = 1;
    while (chunk[0] * 2 * step_bytes <= ((size_t)256 << 20))
        chunk[0] *= 2;
    if (H5Pset_chunk(dcpl, rank, chunk) < 0)
        die("H5Pset_chunk");
    recreate(f, name, type, space, dcpl, NULL);
    size_t len = 0;
    unsigned char *z = deflated_zeros(chunk[0] * step_bytes, &len);
    hsize_t origin[8] = { 0 };
    ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0 || H5Dwrite_chunk(ds, H5P_DEFAULT, 0, origin, len, z) < 0)
        die("H5Dwrite_chunk");
    H5Dclose(ds);
    free(z);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
}

/* Every chunk of dataset name rewritten as it is stored (the same filter
 * mask), followed by `extra` bytes that belong to no stream. */
static void make_trailing_bytes(const char *file, const char *name, size_t extra)
{
    hid_t f = open_copy(file);
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), sp = H5Dget_space(ds);
    hsize_t n = 0;
    if (ds < 0 || sp < 0 || H5Dget_num_chunks(ds, sp, &n) < 0 || n == 0)
        die(name);
    for (hsize_t i = 0; i < n; i++) {
        hsize_t off[8], size = 0;
        unsigned mask = 0;
        haddr_t addr;
        if (H5Dget_chunk_info(ds, sp, i, off, &mask, &addr, &size) < 0)
            die("H5Dget_chunk_info");
        unsigned char *buf = malloc((size_t)size + extra);
        uint32_t read_mask = 0;
        if (!buf || H5Dread_chunk(ds, H5P_DEFAULT, off, &read_mask, buf) < 0)
            die("H5Dread_chunk");
        memset(buf + size, 0x5a, extra);
        if (H5Dwrite_chunk(ds, H5P_DEFAULT, read_mask, off, (size_t)size + extra, buf) < 0)
            die("H5Dwrite_chunk");
        free(buf);
    }
    H5Sclose(sp);
    H5Dclose(ds);
    H5Fclose(f);
}

/* Every time series extended to n steps (nothing written: the fill value). */
static void make_many_steps(const char *file, hsize_t n)
{
    grow_ctx c = { open_copy(file), 0, { { 0 } }, 0 };
    if (H5Ovisit(c.file, H5_INDEX_NAME, H5_ITER_INC, collect, &c) < 0)
        die("steps");
    for (int i = 0; i < c.n; i++) {
        hid_t ds = H5Dopen2(c.file, c.names[i], H5P_DEFAULT), sp = H5Dget_space(ds);
        hsize_t dims[8], max[8];
        H5Sget_simple_extent_dims(sp, dims, max);
        H5Sclose(sp);
        dims[0] = n;
        if (max[0] == H5S_UNLIMITED && H5Dset_extent(ds, dims) < 0)
            die("H5Dset_extent");
        H5Dclose(ds);
    }
    H5Fclose(c.file);
}

static void make_schema2(void)
{
    make_foreign_filters();
    make_wrong_types();
    /* element 0 of /forward/site_counts: the row count of layer 0's
     * STREAM_IN at step 0 (RD_COUNT fields in order: rows, cols, ...) */
    make_int_value("s2-counts-negative.h5", "forward/site_counts", 0, -5);
    make_int_value("s2-counts-huge.h5", "forward/site_counts", 0, (int64_t)1 << 62);
    make_int_value("s2-calls-negative.h5", "forward/site_calls", 0, -3);
    make_int_value("s2-alias-range.h5", "forward/site_alias", 0, 100);
    hid_t f = open_copy("s2-version-4.h5");
    hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
    int v = 4;
    if (a < 0 || H5Awrite(a, H5T_NATIVE_INT, &v) < 0)
        die("schema_version");
    H5Aclose(a);
    H5Fclose(f);
    make_chunk_bomb();
    make_many_steps("s2-steps-3g.h5", 3000000000ull);
    make_trailing_bytes("s2-chunk-trailing.h5", "forward/site_stats", 4);
    copy_file(path("base.h5"), path("s2-damaged-last.h5"));
    if (dc_damage_chunk(path("s2-damaged-last.h5"), "/forward/site_sketch", STEPS - 1) != 0)
        die("s2-damaged-last.h5");
}

int main(int argc, char **argv)
{
    if (argc != 4)
        die("usage: make-hostile-runs DIR SECRET FIFO");
    dir = argv[1];
    if (!realpath(argv[2], secret))
        die("SECRET does not exist");
    /* the FIFO is named, never opened: a reader that follows it hangs */
    if (!realpath(argv[3], fifo))
        die("FIFO does not exist");
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);
    write_base(path("base.h5"), L, 1);
    write_base(path("base-plain.h5"), L, 0);
    make_secret_target();
    char target[PATH_MAX + 64];
    if (!realpath(path("secret-target.h5"), target))
        die("secret-target.h5");

    make_external("external-callsite.h5", "forward/site_callsite");
    make_external("external-table.h5", "forward/site_stats");
    make_elink("elink-callsite.h5", "forward/site_callsite", target, "/site_callsite");
    make_elink("elink-group.h5", "backward", target, "/backward");
    make_elink("elink-fifo.h5", "forward/site_stats", fifo, "/forward/site_stats");
    hid_t f = open_copy("softlink.h5");
    if (H5Ldelete(f, "forward/site_stats", H5P_DEFAULT) < 0
        || H5Lcreate_soft("/backward/site_stats", f, "forward/site_stats", H5P_DEFAULT,
                          H5P_DEFAULT) < 0)
        die("softlink.h5");
    H5Fclose(f);
    make_vds("vds-callsite.h5", "forward/site_callsite", target, "/site_callsite");
    make_vds("vds-fifo.h5", "forward/site_stats", fifo, "/forward/site_stats");
    make_filter();
    make_layers("layers-100k.h5", 100000);
    make_layers("layers-1m.h5", 1000000);
    make_steps("steps-100k.h5", 100000);
    make_bad_chunk_index("base-plain.h5", "bad-chunk-index.h5");
    make_bad_chunk_index("base.h5", "bad-chunk-index-deflated.h5");
    make_dangling_scales();
    make_elink("scales-elink.h5", "layer", target, "/site_callsite");
    make_schema2();
    return 0;
}
