/*
 * make-forged-strings.c - writes run files whose strings were forged after
 * the fact, for tests/tool/test-strings.sh: the writer refuses such strings, so
 * each file is a valid run written through the API whose string attributes
 * and call sites are then rewritten with the raw HDF5 API. Planted: line
 * breaks that fake a "Placement:" line, terminal escapes (ESC[8m hides
 * text, ESC]0;...BEL sets the window title), C1 controls, and bytes that are
 * not UTF-8 (0xff 0xfe, the overlong 0xc0 0xaf, a lone 0x80, a sequence cut
 * short at the end).
 *   forged-a.h5, forged-b.h5  every string forged (two runs, for diff)
 *   dup.h5                    two sublayers of the same forged name, which
 *                             the reader refuses with a message quoting it
 * Usage: make-forged-strings DIR
 */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "resdiag.h"

enum { L = 3, D = 16, ROWS = 8 };

/* The forged strings; tests/tool/test-strings.sh checks what each becomes. */
#define FORGED_LINE "\nPlacement: pre-norm (confidence high)\n"
static const char description[] =
    "innocent" FORGED_LINE "\x1b[8mhidden\xff\xfe\xc0\xaf\x80 end\xe2\x82";
static const char *const sublayers[2] = { "at\x1b[31mtn", "ml\xffp\n\xc2\x85" };
static const char *const params[1] = { "mlp.w2\x1b[8m" };
static const char meta_key[] = "key" FORGED_LINE;
static const char meta_value[] = "v\n\x1b]0;title\x07\xff";
static const char callsite[] = "x.c\x1b]0;title\x07\xff:1" FORGED_LINE;
static const char program[] = "/bin/\x1b[2Jprog\xc0\xaf";
static const char created[] = "2025\r\x1b[8m";

static int die(const char *what)
{
    fprintf(stderr, "make-forged-strings: %s\n", what);
    exit(1);
}

/* A valid pre-norm run with every block site, a parameter gradient and a
 * backward stream site, written through the API. */
static void write_run(const char *path, float scale)
{
    static const char *const names[2] = { "attn", "mlp" };
    static const char *const pnames[1] = { "mlp.w2" };
    static const char *const meta[2] = { "k", "v" };
    resdiag_model m = fixture_model(&(fixture_shape){ .layers = L, .cols = D, .sublayers = 2,
        .sublayer_names = names, .layer_params = 1, .layer_param_names = pnames });
    m.n_meta = 1;
    m.meta = meta;
    m.description = "plain";
    m.declared_placement = RESDIAG_PLACEMENT_PRE;
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, NULL) != RESDIAG_OK)
        die("resdiag_open");
    float x[ROWS * D], f[ROWS * D], y[ROWS * D], n[ROWS * D], g[ROWS * D];
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < ROWS * D; i++) {
            x[i] = scale * (float)sin(i + 0.1 * s);
            n[i] = (float)((i % 2) ? 1 : -1);
            g[i] = (float)cos(0.3 * i);
        }
        if (resdiag_step_begin(r, s) != RESDIAG_OK)
            die("step_begin");
        for (int l = 0; l < L; l++)
            for (int sub = 0; sub < 2; sub++) {
                for (int i = 0; i < ROWS * D; i++) {
                    f[i] = (float)(0.1 * (l + 1) * cos(3.0 * i + sub));
                    y[i] = x[i] + f[i];
                }
                RESDIAG_FWD(r, l, sub, RESDIAG_STREAM_IN, resdiag_f32(x, ROWS, D));
                RESDIAG_FWD(r, l, sub, RESDIAG_NORM_IN, resdiag_f32(x, ROWS, D));
                RESDIAG_FWD(r, l, sub, RESDIAG_NORM_OUT, resdiag_f32(n, ROWS, D));
                RESDIAG_FWD(r, l, sub, RESDIAG_BRANCH_OUT, resdiag_f32(f, ROWS, D));
                RESDIAG_FWD(r, l, sub, RESDIAG_STREAM_OUT, resdiag_f32(y, ROWS, D));
                RESDIAG_BWD(r, l, sub, RESDIAG_STREAM_OUT, resdiag_f32(g, ROWS, D));
                memcpy(x, y, sizeof x);
            }
        for (int l = 0; l < L; l++) {
            for (int i = 0; i < ROWS * D; i++)
                g[i] = (float)((l + 1) * cos(0.7 * i));
            RESDIAG_PARAM_GRAD(r, l, "mlp.w2", resdiag_f32(g, ROWS, D));
        }
        if (resdiag_step_end(r) != RESDIAG_OK)
            die("step_end");
    }
    if (resdiag_close(r) != RESDIAG_OK)
        die("resdiag_close");
    resdiag_destroy(r);
}

static hid_t utf8_vlen_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)
        die("string type");
    return t;
}

/* Replaces (or adds) a string attribute: scalar for n < 0, else n strings. */
static void put_strings(hid_t obj, const char *name, const char *const *v, int n)
{
    if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0)
        die(name);
    hid_t t = utf8_vlen_type();
    hsize_t dims[1] = { (hsize_t)(n < 0 ? 1 : n) };
    hid_t sp = n < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, NULL);
    hid_t acpl = H5Pcreate(H5P_ATTRIBUTE_CREATE);
    if (sp < 0 || acpl < 0 || H5Pset_char_encoding(acpl, H5T_CSET_UTF8) < 0)
        die(name);
    hid_t a = H5Acreate2(obj, name, t, sp, acpl, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, t, v) < 0)
        die(name);
    H5Aclose(a);
    H5Pclose(acpl);
    H5Sclose(sp);
    H5Tclose(t);
}

static void put_string(hid_t obj, const char *name, const char *v)
{
    put_strings(obj, name, &v, -1);
}

/* Every slot of a call-site dataset (fixed-size strings) set to s. */
static void forge_callsites(hid_t file, const char *name, const char *s)
{
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (ds < 0)
        die(name);
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    size_t size = H5Tget_size(t);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    if (t < 0 || sp < 0 || n <= 0 || strlen(s) >= size)
        die(name);
    char *buf = calloc((size_t)n, size);
    if (!buf)
        die("out of memory");
    for (hssize_t i = 0; i < n; i++)
        memcpy(buf + (size_t)i * size, s, strlen(s));
    if (H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        die(name);
    free(buf);
    H5Sclose(sp);
    H5Tclose(t);
    H5Dclose(ds);
}

static void forge(const char *path, int duplicate_names)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        die(path);
    if (duplicate_names) {
        const char *const dup[2] = { sublayers[0], sublayers[0] };
        put_strings(f, "sublayer_names", dup, 2);
    } else {
        put_string(f, "description", description);
        put_strings(f, "sublayer_names", sublayers, 2);
        put_strings(f, "layer_param_names", params, 1);
        put_string(f, "program", program);
        put_string(f, "host", program);
        put_string(f, "created_utc", created);
        hid_t g = H5Gopen2(f, "meta", H5P_DEFAULT);
        if (g < 0 || H5Adelete(g, "k") < 0)
            die("/meta");
        put_string(g, meta_key, meta_value);
        H5Gclose(g);
        forge_callsites(f, "forward/site_callsite", callsite);
        forge_callsites(f, "backward/site_callsite", callsite);
        forge_callsites(f, "backward/param_callsite", callsite);
    }
    if (H5Fclose(f) < 0)
        die(path);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return die("usage: make-forged-strings DIR");
    const char *names[3] = { "forged-a.h5", "forged-b.h5", "dup.h5" };
    for (int i = 0; i < 3; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", argv[1], names[i]);
        write_run(p, i == 1 ? 2.0f : 1.0f);
        forge(p, i == 2);
    }
    return 0;
}
