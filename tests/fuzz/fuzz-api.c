/*
 * fuzz-api.c - libFuzzer harness: the input bytes drive a sequence of
 * public API calls with arbitrary arguments (model and options, step
 * numbers, layer/sublayer/site/direction, tensor shapes, strides and
 * dtypes over a buffer this harness owns, NULLs, close/destroy order,
 * flush, pause). The library must never crash, must refuse what the header
 * forbids with an error, and what it accepted must be in the file: after a
 * clean close the reader finds every recorded step and, at each observed
 * site, the rows of the step's accepted calls and their cols.
 *
 * Tensor pointers always point into the harness's buffer, and shapes the
 * header allows are clamped to fit it: reading past a caller's tensor is
 * the caller's bug, reading past it after refusing it is the library's.
 *
 * Built twice from this file: with -fsanitize=fuzzer (-Dfuzz=true, clang)
 * and, with tests/fuzz/replay-main.c, as a plain program that replays
 * tests/fuzz/corpus/api in `meson test`.
 */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resdiag.h"

/* ------------------------------------------------------------ input */

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

/* Bytes run out as zeros, so every input is a complete program. */
static unsigned u8(input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static unsigned u16(input *in) { return u8(in) | u8(in) << 8; }

static int64_t i64(input *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)u8(in) << (8 * i);
    return (int64_t)v;
}

/* Mostly small values near the interesting range, now and then anything. */
static int pick_int(input *in, int lo, int hi)
{
    unsigned b = u8(in);
    if (hi < lo)
        hi = lo;
    if (b < 240)
        return lo + (int)(b % (unsigned)(hi - lo + 1));
    static const int odd[] = { -1, 0, -2147483647 - 1, 2147483647, 1 << 20, -7, 17, 64,
                               65, 100000, 100001, 1000001, 3, 1, 2, 16 };
    return odd[b - 240];
}

/* ------------------------------------------------------------ state */

enum { MAX_L = 4, MAX_S = 3, MAX_REC = 24, MAX_OPS = 256, BUF_BYTES = 1 << 16 };

static const char *const name_pool[] = { "attn", "mlp", "moe", "", "attn", NULL,
    "x23456789012345678901234567890123456789012345678901234567890123", /* 63: longest */
    "x234567890123456789012345678901234567890123456789012345678901234" /* 64: too long */ };
static const char *const param_pool[] = { "attn.wo", "mlp.w2", "head.w", "embed", NULL, "" };

/* What the file must show for one recorded step: rows, cols of the last
 * accepted call per site (cols 0 = never accepted). */
typedef struct expect_step {
    int64_t step;
    int64_t rows[2][MAX_L][MAX_S][RESDIAG_N_BLOCK_SITES], cols[2][MAX_L][MAX_S][RESDIAG_N_BLOCK_SITES];
    int64_t mrows[2][RESDIAG_N_MODEL_SITES], mcols[2][RESDIAG_N_MODEL_SITES];
} expect_step;

static expect_step rec[MAX_REC];
static _Alignas(64) unsigned char buf[BUF_BYTES];
static char path[4096];
static long log_lines;
static int trace; /* FUZZ_API_TRACE=1: one line per input on stderr */

static void quiet_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    /* Every message is a complete line. */
    if (!msg || strchr(msg, '\n'))
        abort();
    if (trace)
        fprintf(stderr, "  log: %s\n", msg);
    log_lines++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    resdiag_set_log_handler(quiet_log, NULL);
    resdiag_set_log_priority(RESDIAG_LOG_DEBUG);
    trace = getenv("FUZZ_API_TRACE") != NULL;
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/fuzz-api-%ld.h5", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    return 0;
}

static size_t dtype_size(int dt)
{
    return dt == RESDIAG_DTYPE_F64 ? 8 : dt == RESDIAG_DTYPE_F32 ? 4 : 2;
}

/* A tensor over buf: arbitrary fields; when the header allows them, the
 * rows are cut so that every element lies in buf. *valid says whether the
 * library must accept it (given a good site and width). */
static resdiag_tensor make_tensor(input *in, int d_model, int *valid)
{
    resdiag_tensor t;
    unsigned kind = u8(in);
    t.dtype = (resdiag_dtype)(kind % 8 < 6 ? (int)(kind % 4) : kind % 8 == 6 ? 4 : -1);
    t.rows = pick_int(in, 0, 40);
    t.cols = (kind & 0x30) == 0 ? pick_int(in, 0, 70) : d_model;
    unsigned s = u8(in);
    t.row_stride = s < 128 ? 0 : s < 250 ? t.cols + (s & 7) : (int64_t)pick_int(in, -3, 5);
    if ((kind & 0xc0) == 0xc0) /* any value: refused if negative, else cut below */
        t.rows = i64(in);
    int ok = (unsigned)t.dtype <= RESDIAG_DTYPE_BF16 && t.rows >= 0 && t.cols >= 1 &&
             (t.row_stride == 0 || t.row_stride >= t.cols);
    size_t esize = ok ? dtype_size(t.dtype) : 8;
    /* element-aligned offsets into buf, so that C's alignment rules hold */
    size_t off = (u8(in) % 16) * esize;
    t.data = buf + off;
    if (ok) {
        int64_t stride = t.row_stride ? t.row_stride : t.cols;
        int64_t room = (int64_t)((BUF_BYTES - off) / esize);
        if (t.cols > room)
            t.cols = room, t.row_stride = 0, stride = t.cols;
        if (t.rows > 0 && t.rows - 1 > (room - t.cols) / stride)
            t.rows = (room - t.cols) / stride + 1;
    }
    if (u8(in) == 0xee) { /* NULL data: allowed for rows == 0 only */
        t.data = NULL;
        ok = ok && t.rows == 0;
    }
    *valid = ok;
    return t;
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz-api: %s\n", what);
    abort();
}

/* Sizes the library accepts but that would make a run slow are brought
 * down to a value just past what the harness tracks. */
static int tame(int v, int tracked, int allowed)
{
    return v > tracked && v <= allowed ? tracked + 1 : v;
}

/* Statuses the API may return for arguments; I/O errors end the check. */
static int io_error(resdiag_status s)
{
    return s == RESDIAG_E_IO || s == RESDIAG_E_NOSPACE || s == RESDIAG_E_NOMEM;
}

static void check_file(int n_rec, int L, int S)
{
    resdiag_reader *rd = NULL;
    if (resdiag_reader_open(&rd, path) != RESDIAG_OK)
        fail("a run closed without error does not open");
    const resdiag_run_info *in = resdiag_reader_info(rd);
    if (in->n_steps != n_rec || in->n_layers != L || in->n_sublayers != S)
        fail("the file's steps or model differ from what was recorded");
    int64_t steps[MAX_REC];
    if (n_rec > 0 && resdiag_reader_steps(rd, steps, n_rec) != RESDIAG_OK)
        fail("reader_steps");
    double out[RESDIAG_N_FIELDS];
    for (int i = 0; i < n_rec; i++) {
        const expect_step *e = &rec[i];
        if (steps[i] != e->step)
            fail("step numbers differ");
        for (int d = 0; d < 2; d++) {
            for (int l = 0; l < L; l++)
                for (int s = 0; s < S; s++)
                    for (int k = 0; k < RESDIAG_N_BLOCK_SITES; k++) {
                        int obs = -1;
                        if (resdiag_reader_site(rd, i, (resdiag_direction)d, l, s,
                                                (resdiag_site)k, out, &obs) != RESDIAG_OK)
                            fail("reader_site");
                        if (obs != (e->cols[d][l][s][k] != 0))
                            fail("a site's observed flag differs from the calls accepted");
                        if (obs && (out[RESDIAG_FIELD_ROWS] != (double)e->rows[d][l][s][k] ||
                                    out[RESDIAG_FIELD_COLS] != (double)e->cols[d][l][s][k]))
                            fail("a site's rows or cols differ from the step's accepted calls");
                    }
            for (int k = 0; k < RESDIAG_N_MODEL_SITES; k++) {
                int obs = -1;
                if (resdiag_reader_site(rd, i, (resdiag_direction)d, 0, 0,
                                        (resdiag_site)(RESDIAG_EMBED_OUT + k), out,
                                        &obs) != RESDIAG_OK)
                    fail("reader_site (model)");
                if (obs != (e->mcols[d][k] != 0))
                    fail("a model site's observed flag differs from the calls accepted");
                if (obs && (out[RESDIAG_FIELD_ROWS] != (double)e->mrows[d][k] ||
                            out[RESDIAG_FIELD_COLS] != (double)e->mcols[d][k]))
                    fail("a model site's rows or cols differ from the step's accepted calls");
            }
        }
    }
    resdiag_reader_destroy(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0])
        LLVMFuzzerInitialize(NULL, NULL);
    input in = { data, size };
    /* the tensor bytes: the input's head, so NaN, Inf, denormals all occur */
    for (size_t i = 0; i < BUF_BYTES; i++)
        buf[i] = size ? data[i % size] ^ (unsigned char)(i >> 8) : 0;

    /* ----------------------------------------------------- the model */
    resdiag_model m;
    resdiag_model_init(&m);
    unsigned mk = u8(&in);
    m.n_layers = tame(pick_int(&in, 1, MAX_L), MAX_L, 1000000);
    m.d_model = tame(pick_int(&in, 1, 16), 64, 1 << 24);
    m.n_sublayers = pick_int(&in, 1, MAX_S);
    const char *subs[20], *lparams[4], *mparams[4], *meta[4];
    for (int i = 0; i < 20; i++)
        subs[i] = (mk & 1) ? name_pool[u8(&in) % 8] : name_pool[i % 3];
    if ((mk & 1) == 0 && m.n_sublayers > 3)
        subs[3] = "x4", subs[4] = "x5"; /* keep the default names unique up to 5 */
    m.sublayer_names = (mk & 2) ? NULL : subs;
    m.block = (resdiag_block_kind)pick_int(&in, 0, 1);
    m.declared_placement = (resdiag_placement)pick_int(&in, 0, 7);
    m.declared_mix_layers = pick_int(&in, 0, m.n_layers);
    m.norm_kind = (resdiag_norm_kind)pick_int(&in, 0, 2);
    m.shard_cols = (mk & 4) ? pick_int(&in, 0, 16) : 0;
    m.n_layer_params = pick_int(&in, 0, 2);
    for (int i = 0; i < 4; i++)
        lparams[i] = (mk & 8) ? param_pool[u8(&in) % 6] : param_pool[i % 2];
    m.layer_param_names = lparams;
    m.n_model_params = pick_int(&in, 0, 1);
    for (int i = 0; i < 4; i++)
        mparams[i] = (mk & 8) ? param_pool[u8(&in) % 6] : param_pool[2 + i % 2];
    m.model_param_names = mparams;
    static const char *const metrics[1] = { "loss" };
    m.n_metrics = (mk & 8) ? 1 : 0;
    m.metric_names = metrics;
    m.n_meta = (mk & 16) ? pick_int(&in, 0, 2) : 0;
    meta[0] = "k", meta[1] = "v", meta[2] = (mk & 32) ? NULL : "k2", meta[3] = "";
    m.meta = meta;
    m.description = (mk & 64) ? "fuzz" : NULL;
    if (mk == 0xff)
        m.struct_size = u8(&in); /* not set up by resdiag_model_init */

    resdiag_options o;
    resdiag_options_init(&o);
    unsigned ok_ = u8(&in);
    if (ok_ & 1) {
        o.record_every = pick_int(&in, 1, 3);
        o.record_first = pick_int(&in, 0, 4);
        o.record_last = (ok_ & 2) ? pick_int(&in, 0, 40) : INT64_MAX;
        o.record_init_only = (ok_ & 4) != 0;
        o.sketch_size = pick_int(&in, 0, 8);
        o.sketch_seed = (uint64_t)i64(&in);
        o.flush_steps = pick_int(&in, 1, 5);
        unsigned fs = u8(&in);
        o.flush_seconds = fs < 200 ? 0.0 : fs < 250 ? 1e-9 : fs == 250 ? NAN : fs == 251 ? -1 : INFINITY;
        o.hook_threads = pick_int(&in, 0, 4);
        o.one_call_per_site = (ok_ & 8) != 0;
    }
    if (ok_ == 0xff)
        o.struct_size = 7;
    o.sketch_size = o.sketch_size > 8 && o.sketch_size <= RESDIAG_MAX_SKETCH ? 8 : o.sketch_size;

    resdiag *r = NULL;
    unsigned how = u8(&in);
    resdiag_status st = resdiag_open(how == 1 ? NULL : &r, how == 2 ? NULL : path,
                                     how == 3 ? NULL : &m, (ok_ & 8) ? &o : NULL);
    if (how >= 1 && how <= 3 && st == RESDIAG_OK)
        fail("resdiag_open accepted a NULL argument");
    if (st != RESDIAG_OK && r)
        fail("resdiag_open failed but left a handle");
    if (st == RESDIAG_OK && !r)
        fail("resdiag_open succeeded without a handle");
    int L = m.n_layers, S = m.n_sublayers, D = m.d_model;
    /* Rules are checked as long as the harness can follow the run. */
    int trusted = L <= MAX_L && S <= MAX_S;

    /* ----------------------------------------------------- the calls */
    int n_rec = 0, open_ = r != NULL, in_step = 0, recording = 0, any = 0;
    int enabled = 1;
    int64_t last_step = -1;
    expect_step *cur = NULL;
    for (int op = 0; op < MAX_OPS && in.n > 0; op++) {
        unsigned c = u8(&in);
        switch (c % 10) {
        case 0: { /* step_begin */
            int64_t s = (c & 0x80) ? i64(&in) : last_step + 1 + (int64_t)(u8(&in) % 3);
            st = resdiag_step_begin(r, s);
            if (!r)
                break;
            int good = open_ && !in_step && s >= 0 && (!any || s > last_step);
            if (trusted && good != (st == RESDIAG_OK) && !io_error(st))
                fail("step_begin: accepted or refused against the rules");
            if (io_error(st))
                trusted = 0;
            if (good) {
                any = 1;
                last_step = s;
                in_step = 1;
                recording = resdiag_step_is_recorded(r);
                if (trusted && recording && !enabled)
                    fail("a step begun while paused is recorded");
                if (recording && n_rec < MAX_REC) {
                    cur = &rec[n_rec];
                    memset(cur, 0, sizeof *cur);
                    cur->step = s;
                } else if (recording) {
                    trusted = 0, cur = NULL;
                }
            }
            break;
        }
        case 1: { /* step_end */
            st = resdiag_step_end(r);
            if (!r)
                break;
            if (trusted && (open_ && in_step) != (st == RESDIAG_OK) && !io_error(st))
                fail("step_end: accepted or refused against the rules");
            if (io_error(st))
                trusted = 0;
            if (open_ && in_step && recording && cur)
                n_rec++;
            in_step = recording = 0;
            cur = NULL;
            break;
        }
        case 2:
        case 3:
        case 4: { /* observe at a block or model site */
            int dir = pick_int(&in, 0, 1), layer = pick_int(&in, 0, L - 1);
            int sub = pick_int(&in, 0, S - 1);
            unsigned sk = u8(&in);
            /* a block site (the run is schema 3: all 8), a model site, or none (10..15) */
            int site = sk < 200 ? (int)(sk % RESDIAG_N_BLOCK_SITES)
                                : sk < 250 ? 16 + (int)(sk % 4) : (int)sk - 240;
            int valid;
            resdiag_tensor t = make_tensor(&in, D, &valid);
            st = resdiag_observe_at(r, (resdiag_direction)dir, layer, sub, (resdiag_site)site, t,
                                    (c & 0x40) ? NULL : "fuzz-api.c", (int)u16(&in));
            if (!r)
                break;
            int model_site = site >= 16 && site <= 19;
            int good = recording && valid && dir >= 0 && dir <= 1 &&
                       (model_site || (site >= 0 && site < RESDIAG_N_BLOCK_SITES &&
                                       layer >= 0 && layer < L && sub >= 0 && sub < S)) &&
                       (site == RESDIAG_LOGITS || t.cols == D ||
                        (m.shard_cols > 0 && t.cols == m.shard_cols));
            /* a later call of the step merges, with the same width, unless
             * one_call_per_site refuses it */
            int64_t *prev_rows = NULL, *prev_cols = NULL;
            if (good && cur) {
                prev_rows = model_site ? &cur->mrows[dir][site - 16]
                                       : &cur->rows[dir][layer][sub][site];
                prev_cols = model_site ? &cur->mcols[dir][site - 16]
                                       : &cur->cols[dir][layer][sub][site];
                if (*prev_cols != 0 && (o.one_call_per_site || *prev_cols != t.cols))
                    good = 0;
            }
            if (trusted && good && st != RESDIAG_OK && !io_error(st))
                fail("observe refused a call the header allows");
            if (trusted && !good && recording && st == RESDIAG_OK)
                fail("observe accepted a call the header forbids");
            if (trusted && good && st == RESDIAG_OK && prev_rows) {
                *prev_rows += t.rows;
                *prev_cols = t.cols;
            }
            if (io_error(st))
                trusted = 0;
            break;
        }
        case 5: { /* parameter gradient, or a metric of the step */
            if (c & 0x40) {
                /* "lr" is never declared: refused, without harm to the run */
                st = resdiag_step_metric(r, (c & 0x20) ? "loss" : "lr", (double)u8(&in) - 128);
                if (io_error(st))
                    trusted = 0;
                break;
            }
            int layer = (c & 0x80) ? RESDIAG_MODEL_LEVEL : pick_int(&in, 0, L - 1);
            int valid;
            resdiag_tensor t = make_tensor(&in, D, &valid);
            st = resdiag_param_grad_at(r, layer, param_pool[u8(&in) % 6], t, "fuzz-api.c", 1);
            if (io_error(st))
                trusted = 0;
            break;
        }
        case 6: /* flush */
            st = resdiag_flush(r);
            if (trusted && r && open_ != (st == RESDIAG_OK) && !io_error(st))
                fail("flush: accepted or refused against the rules");
            if (io_error(st))
                trusted = 0;
            break;
        case 7: /* pause / resume */
            if (resdiag_set_enabled(r, (int)(c >> 4) - 4) == RESDIAG_OK && r && open_)
                enabled = (int)(c >> 4) - 4 != 0;
            break;
        case 8: /* close (twice is an error) */
            st = resdiag_close(r);
            if (trusted && r && open_ == (st == RESDIAG_E_STATE))
                fail("close: accepted or refused against the rules");
            if (r && open_ && st != RESDIAG_OK)
                trusted = 0;
            if (r && open_ && in_step && recording && cur)
                cur = NULL; /* a step open at close is not recorded */
            open_ = in_step = recording = 0;
            break;
        default: /* the little queries, on anything */
            if (trusted && resdiag_step_is_recorded(r) != (r && recording))
                fail("step_is_recorded disagrees with the calls made");
            if (strlen(resdiag_errmsg(r)) > 4096 || !resdiag_strerror((resdiag_status)(c - 3)))
                fail("errmsg / strerror");
            break;
        }
    }

    /* ------------------------------------ end: close, then read it back */
    if (r && open_) {
        st = resdiag_close(r);
        if (st != RESDIAG_OK)
            trusted = 0;
        open_ = 0;
    }
    resdiag_destroy(r);
    if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0)
        fail("HDF5 objects left open after resdiag_destroy");
    if (r && trusted)
        check_file(n_rec, L, S);
    if (trace)
        fprintf(stderr, "fuzz-api: open %s, %d steps recorded, %s, %ld log lines\n",
                r ? "ok" : "refused", n_rec, trusted ? "file checked" : "file not checked",
                log_lines);
    if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0)
        fail("HDF5 objects left open after resdiag_reader_destroy");
    unlink(path);
    return 0;
}
