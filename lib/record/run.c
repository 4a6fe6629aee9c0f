/*
 * run.c - the run handle: validation of every call, the step lifecycle, the
 * hooks, and the step buffer that the HDF5 writer appends in batches.
 *
 * A hook computes its statistics straight into the current step's record
 * (a slot per site, so hooks for different layers never touch the same
 * memory) and returns; only step_end, flush and close reach the writer.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5/writer.h"
#include "format/tables.h"
#include "common/log.h"
#include "resdiag.h"
#include "record/signals.h"
#include "stats/stats.h"
#include "common/utf8.h"

/* Client-bug messages are logged this many times per run, then suppressed,
 * so a hook misused in a loop does not flood the trainer's log. */
#define MAX_CLIENT_BUG_LOGS 20
#define MAX_LAYERS 1000000
#define MAX_D_MODEL (1 << 24)
#define MAX_META 256
#define MIN_TAU_LEN 4096

/* Per (layer, sublayer): what the update ratio needs from the two tensors
 * of the add, whichever hook comes first. A step may call each of them
 * several times (micro-batches, one token per call): the k-th STREAM_IN
 * call pairs with the k-th BRANCH_OUT call, and the per-token ratios of
 * every pair are summed. Only that layer's hooks touch it, one at a time:
 * busy is held by the STREAM_IN or BRANCH_OUT call that is using it (see
 * claim()). */
typedef struct add_state {
    double *in_norms;  /* (cap) per-token norms of the latest STREAM_IN call */
    double *br_norms;  /* (cap) per-token norms of the latest BRANCH_OUT call */
    int64_t cap;
    int64_t in_rows, br_rows;   /* rows of those calls; -1: their norms were not kept */
    uint64_t mark;              /* step serial that the counts below belong to */
    int64_t in_calls, br_calls; /* calls of each in that step */
    double tok_sum;             /* sum of ||dx_i|| / ||x_i|| over the paired rows */
    int64_t tok_n;              /* rows in tok_sum */
    int tok_unpaired;           /* a call found no partner of the same rows: no per-token mean */
    atomic_uchar busy;
} add_state;

struct resdiag {
    /* The model as given, with every string owned by the handle. */
    resdiag_model model;
    char **owned_strings;
    size_t n_owned;
    resdiag_options opt;
    rd_tables lay;
    float *tau;        /* (sp.tau_len) */
    rd_sketch_params sp;

    enum { RUN_OPEN, RUN_CLOSED } state;
    int enabled;
    int in_step;
    int recording;     /* the open step is recorded */
    int any_step;      /* a step has been begun */
    int64_t step;      /* number of the open (or last) step */
    uint64_t serial;   /* recorded steps begun, identifies the open one */
    atomic_int seq;    /* hook calls in the open step */

    /* Recorded steps not yet written: (opt.flush_steps, lay.record_len). */
    double *batch;
    int64_t *batch_steps; /* (opt.flush_steps) */
    double *batch_times;  /* (opt.flush_steps) */
    size_t n_batched;
    double *cur;          /* record of the open recorded step, inside batch */
    int64_t n_written;    /* steps on disk */
    int64_t flushed_step; /* trainer's number of the last step on disk, -1 if none */
    double t_open, t_last_flush;

    rd_callsite *callsites; /* (lay.n_slots) */
    atomic_int callsites_changed;
    atomic_uchar *slot_busy; /* (lay.n_slots) held by the hook writing that slot */
    add_state *adds;        /* (n_layers * n_sublayers) */

    rd_writer *writer;
    resdiag_status sticky;  /* the writer failed: hooks and steps return this */

    pthread_mutex_t msg_lock;
    char errmsg[512];
    atomic_int client_bugs;
    atomic_int outside_noted; /* a hook outside a step was logged (once, DEBUG) */
};

/* ------------------------------------------------------------- messages */

static void run_vlog(resdiag *r, resdiag_log_priority prio, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&r->msg_lock);
    if (prio >= RESDIAG_LOG_ERROR)
        snprintf(r->errmsg, sizeof r->errmsg, "%s", msg);
    pthread_mutex_unlock(&r->msg_lock);
    rd_log(r->opt.log_fn, r->opt.log_user_data, prio, "%s", msg);
}

static void run_log(resdiag *r, resdiag_log_priority prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    run_vlog(r, prio, fmt, ap);
    va_end(ap);
}

/* Logs "client bug: ..." (rate-limited) and returns status. */
static resdiag_status client_bug(resdiag *r, resdiag_status status, const char *fmt, ...)
{
    int n = atomic_fetch_add(&r->client_bugs, 1);
    if (n < MAX_CLIENT_BUG_LOGS) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        run_log(r, RESDIAG_LOG_ERROR, "client bug: %s%s", msg,
                n == MAX_CLIENT_BUG_LOGS - 1 ? " (further client-bug messages suppressed)"
                                             : "");
    } else {
        /* Still keep resdiag_errmsg() current. */
        pthread_mutex_lock(&r->msg_lock);
        va_list ap;
        va_start(ap, fmt);
        int k = snprintf(r->errmsg, sizeof r->errmsg, "client bug: ");
        vsnprintf(r->errmsg + k, sizeof r->errmsg - (size_t)k, fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&r->msg_lock);
    }
    return status;
}

const char *resdiag_errmsg(const resdiag *r)
{
    return r ? r->errmsg : "";
}

/* ------------------------------------------------------------- defaults */

void resdiag_model_init(resdiag_model *model)
{
    if (!model)
        return;
    memset(model, 0, sizeof *model);
    model->struct_size = sizeof *model;
}

void resdiag_options_init(resdiag_options *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
    options->record_every = 1;
    options->record_first = 0;
    options->record_last = INT64_MAX;
    options->sketch_size = 16;
    options->sketch_seed = 0x5eed;
    options->flush_steps = 16;
    options->flush_seconds = 10.0;
    options->hook_threads = 1;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ----------------------------------------------------------- validation */

/* Messages for open() go to the options' handler, or the global one. */
typedef struct open_ctx {
    resdiag_log_fn fn;
    void *user;
} open_ctx;

static resdiag_status open_fail(const open_ctx *c, resdiag_status st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rd_log(c->fn, c->user, RESDIAG_LOG_ERROR, "%s", msg);
    return st;
}

/* Every string of the model goes into the file and comes back out of it in
 * reports: valid UTF-8 (doc/FORMAT.md), and no control characters, so that
 * a name can never break a line or drive a terminal. Free text (the
 * description, meta values) may have newlines and tabs. The message names
 * the string but never prints it. */
static resdiag_status check_text(const open_ctx *c, const char *what, int index,
                                 const char *s, int allow_lines)
{
    size_t at = 0;
    rd_text_problem p = rd_utf8_check(s, allow_lines, &at);
    if (p == RD_TEXT_OK)
        return RESDIAG_OK;
    char name[96];
    if (index >= 0)
        snprintf(name, sizeof name, "%s[%d]", what, index);
    else
        snprintf(name, sizeof name, "%s", what);
    if (p == RD_TEXT_NOT_UTF8)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: %s is not valid UTF-8 (byte 0x%02x at "
                         "offset %zu)", name, (unsigned char)s[at], at);
    return open_fail(c, RESDIAG_E_INVALID,
                     "client bug: resdiag_open: %s contains a control character (byte 0x%02x "
                     "at offset %zu)%s", name, (unsigned char)s[at], at,
                     allow_lines ? "; only newline and tab are allowed" : "");
}

/* A list of n names: each non-NULL, non-empty, shorter than RESDIAG_MAX_NAME,
 * UTF-8 without control characters, and unique. */
static resdiag_status check_names(const open_ctx *c, const char *what,
                                  const char *const *names, int n, int stride)
{
    if (n > 0 && !names)
        return open_fail(c, RESDIAG_E_NULL, "client bug: resdiag_open: %s is NULL", what);
    for (int i = 0; i < n; i++) {
        const char *a = names[(size_t)i * (size_t)stride];
        if (!a)
            return open_fail(c, RESDIAG_E_NULL, "client bug: resdiag_open: %s[%d] is NULL",
                             what, i);
        size_t len = strlen(a);
        if (len == 0 || len >= RESDIAG_MAX_NAME)
            return open_fail(c, RESDIAG_E_INVALID,
                             "client bug: resdiag_open: %s[%d] must have 1 to %d bytes", what,
                             i, RESDIAG_MAX_NAME - 1);
        resdiag_status st = check_text(c, what, i, a, 0);
        if (st)
            return st;
        for (int j = 0; j < i; j++)
            if (strcmp(a, names[(size_t)j * (size_t)stride]) == 0)
                return open_fail(c, RESDIAG_E_INVALID,
                                 "client bug: resdiag_open: %s '%s' appears twice", what, a);
    }
    return RESDIAG_OK;
}

static resdiag_status check_model(const open_ctx *c, const resdiag_model *m)
{
    resdiag_status st;
    if (m->n_layers < 1 || m->n_layers > MAX_LAYERS)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: n_layers is %d, must be 1..%d",
                         m->n_layers, MAX_LAYERS);
    if (m->d_model < 1 || m->d_model > MAX_D_MODEL)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: d_model is %d, must be 1..%d", m->d_model,
                         MAX_D_MODEL);
    if (m->n_sublayers < 1 || m->n_sublayers > RESDIAG_MAX_SUBLAYERS)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: n_sublayers is %d, must be 1..%d",
                         m->n_sublayers, RESDIAG_MAX_SUBLAYERS);
    if ((st = check_names(c, "sublayer_names", m->sublayer_names, m->n_sublayers, 1)))
        return st;
    if ((unsigned)m->block > RESDIAG_BLOCK_PARALLEL)
        return open_fail(c, RESDIAG_E_INVALID, "client bug: resdiag_open: unknown block kind %d",
                         (int)m->block);
    if ((unsigned)m->declared_placement > RESDIAG_PLACEMENT_NONE)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: unknown declared placement %d",
                         (int)m->declared_placement);
    if (m->declared_mix_layers < 0 || m->declared_mix_layers > m->n_layers)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: declared_mix_layers is %d, must be 0..%d",
                         m->declared_mix_layers, m->n_layers);
    if ((unsigned)m->norm_kind > RESDIAG_NORM_RMSNORM)
        return open_fail(c, RESDIAG_E_INVALID, "client bug: resdiag_open: unknown norm kind %d",
                         (int)m->norm_kind);
    if ((unsigned)m->run_kind > RESDIAG_RUN_INFERENCE)
        return open_fail(c, RESDIAG_E_INVALID, "client bug: resdiag_open: unknown run kind %d",
                         (int)m->run_kind);
    if (m->shard_cols < 0 || m->shard_cols > MAX_D_MODEL)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: shard_cols is %d, must be 0..%d",
                         m->shard_cols, MAX_D_MODEL);
    if (m->n_layer_params < 0 || m->n_layer_params > RESDIAG_MAX_PARAMS ||
        m->n_model_params < 0 || m->n_model_params > RESDIAG_MAX_PARAMS)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: n_layer_params and n_model_params must be "
                         "0..%d", RESDIAG_MAX_PARAMS);
    if ((st = check_names(c, "layer_param_names", m->layer_param_names, m->n_layer_params, 1)))
        return st;
    if ((st = check_names(c, "model_param_names", m->model_param_names, m->n_model_params, 1)))
        return st;
    if (m->n_meta < 0 || m->n_meta > MAX_META)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: n_meta is %d, must be 0..%d", m->n_meta,
                         MAX_META);
    if ((st = check_names(c, "meta key", m->meta, m->n_meta, 2)))
        return st;
    for (int i = 0; i < m->n_meta; i++) {
        if (!m->meta[2 * i + 1])
            return open_fail(c, RESDIAG_E_NULL,
                             "client bug: resdiag_open: the value of meta key '%s' is NULL",
                             m->meta[2 * i]);
        if (strchr(m->meta[2 * i], '/'))
            return open_fail(c, RESDIAG_E_INVALID,
                             "client bug: resdiag_open: meta key '%s' may not contain '/'",
                             m->meta[2 * i]);
        char what[96];
        snprintf(what, sizeof what, "the value of meta key '%s'", m->meta[2 * i]);
        if ((st = check_text(c, what, -1, m->meta[2 * i + 1], 1)))
            return st;
    }
    if (m->description && (st = check_text(c, "description", -1, m->description, 1)))
        return st;
    return RESDIAG_OK;
}

static resdiag_status check_options(const open_ctx *c, const resdiag_options *o)
{
    if (o->record_every < 1)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: record_every is %lld, must be >= 1",
                         (long long)o->record_every);
    if (o->record_first < 0 || o->record_last < o->record_first)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: need 0 <= record_first <= record_last "
                         "(got %lld, %lld)",
                         (long long)o->record_first, (long long)o->record_last);
    if (o->sketch_size < 0 || o->sketch_size > RESDIAG_MAX_SKETCH)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: sketch_size is %d, must be 0..%d",
                         o->sketch_size, RESDIAG_MAX_SKETCH);
    if (o->flush_steps < 1 || o->flush_steps > 100000)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: flush_steps is %d, must be 1..100000",
                         o->flush_steps);
    if (!(o->flush_seconds >= 0.0) || isinf(o->flush_seconds))
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: flush_seconds must be finite and >= 0");
    if (o->hook_threads < 1 || o->hook_threads > 2)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: hook_threads is %d, must be 1 or 2",
                         o->hook_threads);
    if (o->overwrite != 0 && o->overwrite != 1)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: overwrite is %d, must be 0 or 1",
                         o->overwrite);
    if (o->one_call_per_site != 0 && o->one_call_per_site != 1)
        return open_fail(c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: one_call_per_site is %d, must be 0 or 1",
                         o->one_call_per_site);
    return RESDIAG_OK;
}

/* Copies a struct that carries its own size: newer fields the caller does
 * not know stay at the defaults already in *dst. */
static int copy_sized(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    if (src_size < sizeof(size_t) || src_size > dst_size)
        return -1;
    memcpy(dst, src, src_size);
    return 0;
}

/* ---------------------------------------------------------- open, close */

static char *own_string(resdiag *r, const char *s)
{
    if (!s)
        return NULL;
    char *copy = strdup(s);
    if (!copy)
        return NULL;
    char **grown = realloc(r->owned_strings, (r->n_owned + 1) * sizeof *grown);
    if (!grown) {
        free(copy);
        return NULL;
    }
    r->owned_strings = grown;
    r->owned_strings[r->n_owned++] = copy;
    return copy;
}

/* Replaces the caller's name arrays by copies the handle owns. */
static const char *const *own_names(resdiag *r, const char *const *names, int n, int *ok)
{
    if (n == 0)
        return NULL;
    char **arr = calloc((size_t)n, sizeof *arr);
    if (!arr || !own_string(r, "")) { /* reserve a slot to own arr itself */
        free(arr);
        *ok = 0;
        return NULL;
    }
    free(r->owned_strings[r->n_owned - 1]);
    r->owned_strings[r->n_owned - 1] = (char *)arr;
    for (int i = 0; i < n; i++)
        if (!(arr[i] = own_string(r, names[i])))
            *ok = 0;
    return (const char *const *)arr;
}

static void free_run(resdiag *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_owned; i++)
        free(r->owned_strings[i]);
    free(r->owned_strings);
    if (r->adds) {
        size_t n = (size_t)r->model.n_layers * (size_t)r->model.n_sublayers;
        for (size_t i = 0; i < n; i++) {
            free(r->adds[i].in_norms);
            free(r->adds[i].br_norms);
        }
    }
    free(r->adds);
    free(r->tau);
    free(r->batch);
    free(r->batch_steps);
    free(r->batch_times);
    free(r->callsites);
    free(r->slot_busy);
    pthread_mutex_destroy(&r->msg_lock);
    free(r);
}

resdiag_status resdiag_open(resdiag **out, const char *path, const resdiag_model *model,
                            const resdiag_options *options)
{
    open_ctx c = { NULL, NULL };
    if (out)
        *out = NULL;
    resdiag_options opt;
    resdiag_options_init(&opt);
    if (options) {
        if (copy_sized(&opt, sizeof opt, options, options->struct_size))
            return open_fail(&c, RESDIAG_E_INVALID,
                             "client bug: resdiag_open: options were not set up with "
                             "resdiag_options_init (struct_size %zu)", options->struct_size);
        c.fn = opt.log_fn;
        c.user = opt.log_user_data;
    }
    if (!out)
        return open_fail(&c, RESDIAG_E_NULL, "client bug: resdiag_open: out is NULL");
    *out = NULL;
    if (!path || !model)
        return open_fail(&c, RESDIAG_E_NULL, "client bug: resdiag_open: %s is NULL",
                         !path ? "path" : "model");
    resdiag_model m;
    resdiag_model_init(&m);
    if (copy_sized(&m, sizeof m, model, model->struct_size))
        return open_fail(&c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: model was not set up with "
                         "resdiag_model_init (struct_size %zu)", model->struct_size);
    m.struct_size = sizeof m;
    resdiag_status st = check_model(&c, &m);
    if (!st)
        st = check_options(&c, &opt);
    if (st)
        return st;

    resdiag *r = calloc(1, sizeof *r);
    if (!r)
        return open_fail(&c, RESDIAG_E_NOMEM, "resdiag_open: out of memory");
    pthread_mutex_init(&r->msg_lock, NULL);
    r->opt = opt;
    r->model = m;
    int ok = 1;
    r->model.sublayer_names = own_names(r, m.sublayer_names, m.n_sublayers, &ok);
    r->model.layer_param_names = own_names(r, m.layer_param_names, m.n_layer_params, &ok);
    r->model.model_param_names = own_names(r, m.model_param_names, m.n_model_params, &ok);
    r->model.meta = own_names(r, m.meta, 2 * m.n_meta, &ok);
    r->model.description = m.description ? own_string(r, m.description) : NULL;
    if (m.description && !r->model.description)
        ok = 0;

    rd_tables_init(&r->lay, m.n_layers, m.n_sublayers, m.n_layer_params, m.n_model_params,
                   opt.sketch_size);
    /* A batch larger than 4 GiB is a configuration mistake, not a plan. */
    if ((double)r->lay.record_len * (double)opt.flush_steps * sizeof(double) > 4294967296.0) {
        free_run(r);
        return open_fail(&c, RESDIAG_E_INVALID,
                         "client bug: resdiag_open: %d layers x flush_steps %d need more than "
                         "4 GiB of step buffer; lower flush_steps or sketch_size",
                         m.n_layers, opt.flush_steps);
    }
    size_t n_adds = (size_t)m.n_layers * (size_t)m.n_sublayers;
    r->sp.k = opt.sketch_size;
    r->sp.seed = opt.sketch_seed;
    r->sp.tau_len = (size_t)(m.d_model > m.shard_cols ? m.d_model : m.shard_cols);
    if (r->sp.tau_len < MIN_TAU_LEN)
        r->sp.tau_len = MIN_TAU_LEN;
    /* An odd table length makes lcm(K, tau_len) = K * tau_len for K a power
     * of two, so columns beyond the table (logits) wrap onto other buckets
     * and the sketch stays unbiased for widths up to K * tau_len. */
    r->sp.tau_len |= 1;
    r->tau = malloc(r->sp.tau_len * sizeof *r->tau);
    r->batch = malloc((size_t)opt.flush_steps * r->lay.record_len * sizeof *r->batch);
    r->batch_steps = malloc((size_t)opt.flush_steps * sizeof *r->batch_steps);
    r->batch_times = malloc((size_t)opt.flush_steps * sizeof *r->batch_times);
    r->callsites = calloc(r->lay.n_slots, sizeof *r->callsites);
    r->adds = calloc(n_adds, sizeof *r->adds);
    r->slot_busy = calloc(r->lay.n_slots, sizeof *r->slot_busy);
    if (!ok || !r->tau || !r->batch || !r->batch_steps || !r->batch_times || !r->callsites ||
        !r->adds || !r->slot_busy) {
        free_run(r);
        return open_fail(&c, RESDIAG_E_NOMEM, "resdiag_open: out of memory");
    }
    rd_fill_column_signs(r->tau, r->sp.tau_len, opt.sketch_seed);
    r->sp.tau = r->tau;

    rd_file_header hdr = { &r->model, &r->lay, opt.sketch_size, opt.sketch_seed,
                           opt.flush_steps, opt.overwrite };
    char err[512];
    st = rd_writer_create(&r->writer, path, &hdr, err, sizeof err);
    if (st) {
        free_run(r);
        return open_fail(&c, st, "cannot create run file '%s': %s", path, err);
    }
    r->state = RUN_OPEN;
    r->enabled = 1;
    r->step = -1;
    r->flushed_step = -1;
    r->t_open = r->t_last_flush = now_seconds();
    *out = r;
    return RESDIAG_OK;
}

/* Appends the buffered steps. On failure the run stops recording for good
 * (sticky error), says so once, and drops the unwritten steps; what is on
 * disk stays readable. */
static resdiag_status write_batch(resdiag *r)
{
    if (r->sticky)
        return r->sticky;
    if (r->n_batched == 0)
        return RESDIAG_OK;
    char err[512];
    int changed = atomic_exchange(&r->callsites_changed, 0);
    resdiag_status st = rd_writer_append(r->writer, r->batch_steps, r->batch_times, r->batch,
                                         r->n_batched, r->callsites, changed, err, sizeof err);
    if (st) {
        r->sticky = st;
        run_log(r, RESDIAG_LOG_ERROR,
                "writing the run file failed after %lld steps: %s; recording stops here, "
                "the trainer is not affected and the steps already written stay readable",
                (long long)r->n_written, err);
    } else {
        r->n_written += (int64_t)r->n_batched;
        r->flushed_step = r->batch_steps[r->n_batched - 1];
    }
    r->n_batched = 0;
    r->t_last_flush = now_seconds();
    /* Inside a recorded step (resdiag_flush), the open record moves to the
     * front of the emptied batch. */
    if (r->recording) {
        memmove(r->batch, r->cur, r->lay.record_len * sizeof *r->batch);
        r->cur = r->batch;
    }
    return st;
}

resdiag_status resdiag_flushed_step(const resdiag *r, int64_t *step)
{
    if (!r || !step)
        return RESDIAG_E_NULL;
    *step = r->flushed_step;
    return RESDIAG_OK;
}

/* A SIGINT/SIGTERM caught for this run (lib/signals.c): write what is
 * buffered, close the file cleanly, then raise the signal again or make
 * every later call return RESDIAG_E_INTERRUPTED. Only from step_begin and
 * step_end, which never run concurrently with hooks. */
static resdiag_status take_signal(resdiag *r)
{
    int reraise = 0;
    int sig = rd_signal_take(r, &reraise);
    if (!sig)
        return RESDIAG_OK;
    r->recording = 0;
    r->cur = NULL;
    write_batch(r);
    if (r->writer) {
        char err[512];
        resdiag_status cst = rd_writer_close(r->writer, err, sizeof err);
        if (cst && !r->sticky)
            run_log(r, RESDIAG_LOG_ERROR, "closing the run file failed: %s", err);
        r->writer = NULL;
    }
    run_log(r, RESDIAG_LOG_INFO, "signal %d: run file closed with %lld steps%s", sig,
            (long long)r->n_written, reraise ? ", raising the signal again" : "");
    r->sticky = RESDIAG_E_INTERRUPTED;
    if (reraise)
        rd_signal_reraise(r, sig);
    else
        rd_signals_release(r);
    return RESDIAG_E_INTERRUPTED;
}

resdiag_status resdiag_flush(resdiag *r)
{
    if (!r)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return client_bug(r, RESDIAG_E_STATE, "resdiag_flush after resdiag_close");
    /* Inside a recorded step only the steps before it are written: the open
     * one is not complete. */
    return write_batch(r);
}

resdiag_status resdiag_close(resdiag *r)
{
    if (!r)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return client_bug(r, RESDIAG_E_STATE, "resdiag_close called twice");
    if (r->in_step)
        run_log(r, RESDIAG_LOG_INFO, "closing inside step %lld: that step is not recorded",
                (long long)r->step);
    r->in_step = r->recording = 0;
    r->cur = NULL;
    resdiag_status st = write_batch(r);
    /* After a signal the file was closed already, and cleanly. */
    if (st == RESDIAG_E_INTERRUPTED)
        st = RESDIAG_OK;
    char err[512];
    resdiag_status cst = r->writer ? rd_writer_close(r->writer, err, sizeof err) : RESDIAG_OK;
    r->writer = NULL;
    if (cst) {
        /* After a failed write the close fails for the same reason, which
         * has been said already. */
        if (!r->sticky)
            run_log(r, RESDIAG_LOG_ERROR, "closing the run file failed: %s", err);
        if (!st)
            st = cst;
    }
    r->state = RUN_CLOSED;
    return st;
}

void resdiag_destroy(resdiag *r)
{
    if (!r)
        return;
    if (r->state == RUN_OPEN)
        resdiag_close(r);
    rd_signals_release(r);
    free_run(r);
}

/* ---------------------------------------------------------------- steps */

static int step_selected(const resdiag *r, int64_t step)
{
    const resdiag_options *o = &r->opt;
    if (o->record_init_only)
        return !r->any_step;
    return step >= o->record_first && step <= o->record_last &&
           (step - o->record_first) % o->record_every == 0;
}

resdiag_status resdiag_step_begin(resdiag *r, int64_t step)
{
    if (!r)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return client_bug(r, RESDIAG_E_STATE, "resdiag_step_begin after resdiag_close");
    if (r->in_step)
        return client_bug(r, RESDIAG_E_STATE,
                          "resdiag_step_begin(%lld) while step %lld is still open",
                          (long long)step, (long long)r->step);
    if (step < 0 || (r->any_step && step <= r->step))
        return client_bug(r, RESDIAG_E_INVALID,
                          "resdiag_step_begin(%lld): step numbers must be >= 0 and increase "
                          "(last was %lld); number steps with a counter that keeps increasing "
                          "across sequences/epochs, e.g. step = seq * T + pos",
                          (long long)step, (long long)r->step);
    int selected = r->enabled && step_selected(r, step);
    r->any_step = 1;
    r->step = step;
    r->in_step = 1;
    if (take_signal(r))
        return RESDIAG_E_INTERRUPTED;
    if (r->sticky)
        return r->sticky;
    if (selected) {
        r->serial++;
        r->cur = r->batch + r->n_batched * r->lay.record_len;
        for (size_t i = 0; i < r->lay.record_len; i++)
            r->cur[i] = NAN;
        atomic_store(&r->seq, 0);
        r->recording = 1;
    }
    return RESDIAG_OK;
}

resdiag_status resdiag_step_end(resdiag *r)
{
    if (!r)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return client_bug(r, RESDIAG_E_STATE, "resdiag_step_end after resdiag_close");
    if (!r->in_step)
        return client_bug(r, RESDIAG_E_STATE, "resdiag_step_end without resdiag_step_begin");
    r->in_step = 0;
    if (!r->recording)
        return take_signal(r) ? RESDIAG_E_INTERRUPTED : r->sticky;
    r->recording = 0;
    r->cur = NULL;
    double now = now_seconds();
    r->batch_steps[r->n_batched] = r->step;
    r->batch_times[r->n_batched] = now - r->t_open;
    r->n_batched++;
    if (take_signal(r))
        return RESDIAG_E_INTERRUPTED;
    /* The first recorded step (initialization) is the most precious: write it at once. */
    if (r->n_written == 0 || r->n_batched == (size_t)r->opt.flush_steps ||
        (r->opt.flush_seconds > 0 && now - r->t_last_flush >= r->opt.flush_seconds))
        return write_batch(r);
    return RESDIAG_OK;
}

int resdiag_step_is_recorded(const resdiag *r)
{
    return r && r->recording;
}

resdiag_status resdiag_set_enabled(resdiag *r, int enabled)
{
    if (!r)
        return RESDIAG_OK;
    if (r->state != RUN_OPEN)
        return client_bug(r, RESDIAG_E_STATE, "resdiag_set_enabled after resdiag_close");
    r->enabled = enabled != 0;
    return RESDIAG_OK;
}

/* ---------------------------------------------------------------- hooks */

/* The common checks of every hook. Returns OK with *go = 1 when the hook
 * must record, OK with *go = 0 when it is a no-op. A hook outside a step
 * is a no-op, not a bug: trainers run the same forward for validation and
 * sampling between training steps. It says so once, at DEBUG level. */
static resdiag_status hook_gate(resdiag *r, const char *fn, const char *file, int line,
                                int *go)
{
    *go = 0;
    if (r->state != RUN_OPEN)
        return client_bug(r, RESDIAG_E_STATE, "%s after resdiag_close (%s:%d)", fn,
                          file ? file : "?", line);
    if (r->sticky)
        return r->sticky;
    if (!r->in_step) {
        if (!atomic_exchange(&r->outside_noted, 1))
            run_log(r, RESDIAG_LOG_DEBUG, "%s outside a step (%s:%d): not recorded, as every "
                    "hook outside a step", fn, file ? file : "?", line);
        return RESDIAG_OK;
    }
    *go = r->recording;
    return RESDIAG_OK;
}

static resdiag_status check_tensor(resdiag *r, const char *fn, const resdiag_tensor *t,
                                   const char *file, int line)
{
    const char *f = file ? file : "?";
    if ((unsigned)t->dtype > RESDIAG_DTYPE_BF16)
        return client_bug(r, RESDIAG_E_DTYPE, "%s: unknown dtype %d (%s:%d)", fn, (int)t->dtype,
                          f, line);
    if (t->rows < 0 || t->cols < 1)
        return client_bug(r, RESDIAG_E_SHAPE, "%s: tensor is (%lld, %lld); need rows >= 0, "
                          "cols >= 1 (%s:%d)", fn, (long long)t->rows, (long long)t->cols, f,
                          line);
    if (t->row_stride != 0 && t->row_stride < t->cols)
        return client_bug(r, RESDIAG_E_SHAPE, "%s: row_stride %lld is less than cols %lld "
                          "(%s:%d)", fn, (long long)t->row_stride, (long long)t->cols, f, line);
    int64_t stride = t->row_stride ? t->row_stride : t->cols;
    if (t->rows > 0 && stride > INT64_MAX / 8 / t->rows)
        return client_bug(r, RESDIAG_E_SHAPE, "%s: tensor of %lld rows x %lld stride is too "
                          "large to address (%s:%d)", fn, (long long)t->rows, (long long)stride,
                          f, line);
    if (t->rows > 0 && !t->data)
        return client_bug(r, RESDIAG_E_NULL, "%s: tensor data is NULL (%s:%d)", fn, f, line);
    return RESDIAG_OK;
}

static void note_callsite(resdiag *r, size_t slot, const char *file, int line)
{
    rd_callsite *c = &r->callsites[slot];
    if (c->file != file || c->line != line) {
        c->file = file;
        c->line = line;
        atomic_store_explicit(&r->callsites_changed, 1, memory_order_relaxed);
    }
}

/* Two calls at once must not write one slot, nor the add_state of one
 * sublayer (resdiag.h allows concurrent hooks on different layers only).
 * One atomic exchange per call tells: the second of two overlapping calls
 * finds the flag taken and records nothing, so the slot keeps the first
 * call's complete result. Acquire and release order one call's writes
 * before those of the next call that takes the flag, from any thread. */
static int claim(atomic_uchar *flag)
{
    return atomic_exchange_explicit(flag, 1, memory_order_acquire) == 0;
}

static void release(atomic_uchar *flag)
{
    atomic_store_explicit(flag, 0, memory_order_release);
}

static resdiag_status busy_bug(resdiag *r, const char *fn, const char *what, int add,
                               const char *file, int line)
{
    return client_bug(r, RESDIAG_E_BUSY,
                      "%s: %s is being observed by another thread at this moment%s; this "
                      "call is not recorded (hooks may run concurrently on different layers "
                      "only) (%s:%d)", fn, what,
                      add ? " (or the other tensor of its residual add is)" : "",
                      file ? file : "?", line);
}

/* Grows one add_state buffer to hold rows norms; only when a larger tensor
 * than ever before arrives. */
static int add_reserve(add_state *a, int64_t rows)
{
    if (rows <= a->cap)
        return 0;
    double *in = realloc(a->in_norms, (size_t)rows * sizeof *in);
    if (!in)
        return -1;
    a->in_norms = in;
    double *br = realloc(a->br_norms, (size_t)rows * sizeof *br);
    if (!br)
        return -1;
    a->br_norms = br;
    a->cap = rows;
    return 0;
}

/* One more call for the add of (layer, sublayer): notes its per-token
 * norms, and when it completes a pair (as many STREAM_IN as BRANCH_OUT
 * calls in the step) updates the step's ratios over every pair so far:
 * ||dx||_F / ||x||_F from the merged fields, the mean per-token ratio from
 * the paired rows. */
static void add_observed(resdiag *r, int layer, int sublayer, add_state *a, int is_in,
                         int64_t rows)
{
    if (a->mark != r->serial) {
        a->mark = r->serial;
        a->in_calls = a->br_calls = 0;
        a->tok_sum = 0;
        a->tok_n = 0;
        a->tok_unpaired = 0;
    }
    /* a second call of one side before the other side's: the first one's
     * norms are gone, so its rows cannot be paired */
    if (is_in ? a->in_calls > a->br_calls : a->br_calls > a->in_calls)
        a->tok_unpaired = 1;
    if (is_in) {
        a->in_rows = rows;
        a->in_calls++;
    } else {
        a->br_rows = rows;
        a->br_calls++;
    }
    if (a->in_calls != a->br_calls)
        return;
    if (a->in_rows == a->br_rows && a->in_rows >= 0) {
        for (int64_t i = 0; i < a->in_rows; i++)
            if (a->in_norms[i] > 0) {
                a->tok_sum += a->br_norms[i] / a->in_norms[i];
                a->tok_n++;
            }
    } else {
        a->tok_unpaired = 1;
    }

    const rd_tables *lay = &r->lay;
    size_t slot_in, slot_br;
    int table;
    rd_tables_site_slot(lay, RESDIAG_FORWARD, layer, sublayer, RESDIAG_STREAM_IN, 0, &table,
                        &slot_in);
    rd_tables_site_slot(lay, RESDIAG_FORWARD, layer, sublayer, RESDIAG_BRANCH_OUT, 0, &table,
                        &slot_br);
    double x_frob = r->cur[rd_tables_offset(lay, table, slot_in) + RESDIAG_FIELD_FROB];
    double dx_frob = r->cur[rd_tables_offset(lay, table, slot_br) + RESDIAG_FIELD_FROB];
    double *u = r->cur + rd_tables_offset(lay, RD_T_UPDATE,
                                          (size_t)layer * (size_t)r->model.n_sublayers +
                                              (size_t)sublayer);
    u[RESDIAG_UPDATE_RATIO_FROB] = x_frob > 0 ? dx_frob / x_frob : NAN;
    u[RESDIAG_UPDATE_RATIO_TOK_MEAN] =
        !a->tok_unpaired && a->tok_n > 0 ? a->tok_sum / (double)a->tok_n : NAN;
}

/* "forward stream_in of layer 3 sublayer 1" */
static void site_label(char *out, size_t len, resdiag_direction dir, int layer, int sublayer,
                       resdiag_site site)
{
    if (rd_model_site_index(site) >= 0)
        snprintf(out, len, "%s %s", dir ? "backward" : "forward", resdiag_site_name(site));
    else
        snprintf(out, len, "%s %s of layer %d sublayer %d", dir ? "backward" : "forward",
                 resdiag_site_name(site), layer, sublayer);
}

/* Whether a call may go into a slot that already holds calls of this step
 * (*calls is not NaN): not with one_call_per_site, and only with the same
 * width. Returns OK, or the client bug. The slot keeps what it has. */
static resdiag_status check_repeat(resdiag *r, const char *fn, const char *what,
                                   const double *fields, double calls, const resdiag_tensor *t,
                                   const char *file, int line)
{
    if (isnan(calls))
        return RESDIAG_OK;
    if (r->opt.one_call_per_site)
        return client_bug(r, RESDIAG_E_STATE,
                          "%s: %s observed again in step %lld (call %.0f; one_call_per_site is "
                          "set): this call is not recorded, the step keeps the first call's "
                          "values (%s:%d)", fn, what, (long long)r->step, calls + 1,
                          file ? file : "?", line);
    if (fields[RESDIAG_FIELD_COLS] != (double)t->cols)
        return client_bug(r, RESDIAG_E_SHAPE,
                          "%s: %s has %lld columns, its earlier calls in step %lld had %.0f; "
                          "calls of one step merge only tensors of one width: this call is "
                          "not recorded (%s:%d)", fn, what, (long long)t->cols,
                          (long long)r->step, fields[RESDIAG_FIELD_COLS], file ? file : "?",
                          line);
    return RESDIAG_OK;
}

/* The statistics of t into a slot (fields, sketch, *calls): the first call
 * of the step computes them in place; a later one computes its own, with
 * the sketch's rows numbered after the rows seen, and merges them in, so
 * the slot holds the statistics of all the rows of the step's calls. The
 * call site and CALL_SEQ are those of the first call. */
static void observe_slot(resdiag *r, double *fields, double *sketch, double *calls,
                         double *row_norms, const resdiag_tensor *t, const rd_sketch_params *sp,
                         size_t cs, const char *file, int line)
{
    int seq = atomic_fetch_add(&r->seq, 1);
    if (isnan(*calls)) {
        rd_stats_compute_split(r->opt.hook_threads, fields, sketch, row_norms, t, sp);
        fields[RESDIAG_FIELD_CALL_SEQ] = (double)seq;
        *calls = 1;
        note_callsite(r, cs, file, line);
        return;
    }
    double more[RESDIAG_N_FIELDS], more_sketch[RESDIAG_MAX_SKETCH];
    rd_sketch_params later = *sp;
    later.row0 = (int64_t)fields[RESDIAG_FIELD_ROWS];
    rd_stats_compute_split(r->opt.hook_threads, more, sketch ? more_sketch : NULL, row_norms,
                           t, &later);
    rd_stats_merge(fields, sketch, more, more_sketch, sketch ? sp->k : 0);
    *calls += 1;
}

resdiag_status resdiag_observe_at(resdiag *r, resdiag_direction dir, int layer, int sublayer,
                                  resdiag_site site, resdiag_tensor t, const char *file,
                                  int line)
{
    static const char fn[] = "resdiag_observe_at";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording) {
        int go;
        return hook_gate(r, fn, file, line, &go);
    }
    if ((unsigned)dir > RESDIAG_BACKWARD)
        return client_bug(r, RESDIAG_E_INVALID, "%s: unknown direction %d (%s:%d)", fn,
                          (int)dir, file ? file : "?", line);
    int msite = rd_model_site_index(site);
    if (msite < 0) {
        if ((unsigned)site >= RESDIAG_N_BLOCK_SITES)
            return client_bug(r, RESDIAG_E_RANGE, "%s: unknown site %d (%s:%d)", fn,
                              (int)site, file ? file : "?", line);
        if (layer < 0 || layer >= r->model.n_layers)
            return client_bug(r, RESDIAG_E_RANGE, "%s: layer %d out of range 0..%d (%s:%d)",
                              fn, layer, r->model.n_layers - 1, file ? file : "?", line);
        if (sublayer < 0 || sublayer >= r->model.n_sublayers)
            return client_bug(r, RESDIAG_E_RANGE,
                              "%s: sublayer %d out of range 0..%d (%s:%d)", fn, sublayer,
                              r->model.n_sublayers - 1, file ? file : "?", line);
    }
    resdiag_status st = check_tensor(r, fn, &t, file, line);
    if (st)
        return st;
    if (site != RESDIAG_LOGITS && t.cols != r->model.d_model &&
        (r->model.shard_cols == 0 || t.cols != r->model.shard_cols))
        return client_bug(r, RESDIAG_E_SHAPE,
                          "%s: %s has %lld columns, the model's d_model is %d (%s:%d)", fn,
                          resdiag_site_name(site), (long long)t.cols, r->model.d_model,
                          file ? file : "?", line);

    const rd_tables *lay = &r->lay;
    int table, sk_table;
    size_t slot, sk_slot;
    rd_tables_site_slot(lay, dir, layer, sublayer, site, 0, &table, &slot);
    rd_tables_site_slot(lay, dir, layer, sublayer, site, 1, &sk_table, &sk_slot);
    double *fields = r->cur + rd_tables_offset(lay, table, slot);
    double *sketch = r->sp.k ? r->cur + rd_tables_offset(lay, sk_table, sk_slot) : NULL;
    double *calls = r->cur + rd_tables_calls_offset(lay, table, slot);
    const size_t cs = lay->tables[table].slot_offset + slot;

    /* The add's two tensors keep their per-token norms for the update ratio;
     * the call holds the add_state as well as its slot, as the update ratio
     * reads the other tensor's fields and norms. */
    add_state *a = NULL;
    if (dir == RESDIAG_FORWARD && (site == RESDIAG_STREAM_IN || site == RESDIAG_BRANCH_OUT))
        a = &r->adds[(size_t)layer * (size_t)r->model.n_sublayers + (size_t)sublayer];
    int claimed = claim(&r->slot_busy[cs]);
    if (claimed && a && !claim(&a->busy)) {
        release(&r->slot_busy[cs]);
        claimed = 0;
    }
    char what[96];
    if (!claimed) {
        site_label(what, sizeof what, dir, layer, sublayer, site);
        return busy_bug(r, fn, what, a != NULL, file, line);
    }
    if (!isnan(*calls)) {
        site_label(what, sizeof what, dir, layer, sublayer, site);
        st = check_repeat(r, fn, what, fields, *calls, &t, file, line);
        if (st) {
            if (a)
                release(&a->busy);
            release(&r->slot_busy[cs]);
            return st;
        }
    }
    double *row_norms = NULL;
    int have_norms = 0; /* rows == 0 needs no buffer */
    if (a && add_reserve(a, t.rows) == 0) {
        have_norms = 1;
        row_norms = site == RESDIAG_STREAM_IN ? a->in_norms : a->br_norms;
    }
    observe_slot(r, fields, sketch, calls, row_norms, &t, &r->sp, cs, file, line);

    if (a) {
        add_observed(r, layer, sublayer, a, site == RESDIAG_STREAM_IN,
                     have_norms ? t.rows : -1);
        release(&a->busy);
    }
    release(&r->slot_busy[cs]);
    if (a && !have_norms)
        return client_bug(r, RESDIAG_E_NOMEM,
                          "%s: no memory for %lld per-token norms; update ratio per "
                          "token not recorded (%s:%d)", fn, (long long)t.rows,
                          file ? file : "?", line);
    return RESDIAG_OK;
}

resdiag_status resdiag_observe_alias(resdiag *r, resdiag_direction dir, int layer, int sublayer,
                                     resdiag_site site, resdiag_site same_as)
{
    static const char fn[] = "resdiag_observe_alias";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording) {
        int go;
        return hook_gate(r, fn, NULL, 0, &go);
    }
    if ((unsigned)dir > RESDIAG_BACKWARD)
        return client_bug(r, RESDIAG_E_INVALID, "%s: unknown direction %d", fn, (int)dir);
    if ((unsigned)site >= RESDIAG_N_BLOCK_SITES || (unsigned)same_as >= RESDIAG_N_BLOCK_SITES)
        return client_bug(r, RESDIAG_E_RANGE, "%s: sites %d and %d: both must be block sites "
                          "(0..%d)", fn, (int)site, (int)same_as, RESDIAG_N_BLOCK_SITES - 1);
    if (site == same_as)
        return client_bug(r, RESDIAG_E_INVALID, "%s: %s cannot be an alias of itself", fn,
                          resdiag_site_name(site));
    if (layer < 0 || layer >= r->model.n_layers)
        return client_bug(r, RESDIAG_E_RANGE, "%s: layer %d out of range 0..%d", fn, layer,
                          r->model.n_layers - 1);
    if (sublayer < 0 || sublayer >= r->model.n_sublayers)
        return client_bug(r, RESDIAG_E_RANGE, "%s: sublayer %d out of range 0..%d", fn,
                          sublayer, r->model.n_sublayers - 1);
    const rd_tables *lay = &r->lay;
    int table;
    size_t slot;
    rd_tables_site_slot(lay, dir, layer, sublayer, site, 0, &table, &slot);
    const size_t cs = lay->tables[table].slot_offset + slot;
    if (!claim(&r->slot_busy[cs])) {
        char what[96];
        snprintf(what, sizeof what, "%s %s of layer %d sublayer %d", dir ? "backward" : "forward",
                 resdiag_site_name(site), layer, sublayer);
        return busy_bug(r, fn, what, 0, NULL, 0);
    }
    int at = dir == RESDIAG_FORWARD ? RD_T_FWD_ALIAS : RD_T_BWD_ALIAS;
    r->cur[rd_tables_offset(lay, at, (size_t)layer * (size_t)r->model.n_sublayers + sublayer)
           + (size_t)site] = (double)same_as;
    release(&r->slot_busy[cs]);
    return RESDIAG_OK;
}

resdiag_status resdiag_param_grad_at(resdiag *r, int layer, const char *name, resdiag_tensor t,
                                     const char *file, int line)
{
    static const char fn[] = "resdiag_param_grad_at";
    if (!r)
        return RESDIAG_OK;
    if (!r->recording) {
        int go;
        return hook_gate(r, fn, file, line, &go);
    }
    if (!name)
        return client_bug(r, RESDIAG_E_NULL, "%s: name is NULL (%s:%d)", fn,
                          file ? file : "?", line);
    int model_level = layer == RESDIAG_MODEL_LEVEL;
    if (!model_level && (layer < 0 || layer >= r->model.n_layers))
        return client_bug(r, RESDIAG_E_RANGE, "%s: layer %d out of range 0..%d or "
                          "RESDIAG_MODEL_LEVEL (%s:%d)", fn, layer, r->model.n_layers - 1,
                          file ? file : "?", line);
    int n = model_level ? r->model.n_model_params : r->model.n_layer_params;
    const char *const *names =
        model_level ? r->model.model_param_names : r->model.layer_param_names;
    int p = 0;
    while (p < n && strcmp(names[p], name) != 0)
        p++;
    if (p == n)
        return client_bug(r, RESDIAG_E_RANGE, "%s: '%s' is not a declared %s parameter "
                          "(%s:%d)", fn, name, model_level ? "model-level" : "per-layer",
                          file ? file : "?", line);
    resdiag_status st = check_tensor(r, fn, &t, file, line);
    if (st)
        return st;
    int table = model_level ? RD_T_MODEL_PARAM : RD_T_LAYER_PARAM;
    size_t slot = model_level ? (size_t)p : (size_t)layer * (size_t)n + (size_t)p;
    double *fields = r->cur + rd_tables_offset(&r->lay, table, slot);
    double *calls = r->cur + rd_tables_calls_offset(&r->lay, table, slot);
    const size_t cs = r->lay.tables[table].slot_offset + slot;
    char what[RESDIAG_MAX_NAME + 64];
    if (model_level)
        snprintf(what, sizeof what, "the gradient of model parameter '%s'", name);
    else
        snprintf(what, sizeof what, "the gradient of '%s' in layer %d", name, layer);
    if (!claim(&r->slot_busy[cs]))
        return busy_bug(r, fn, what, 0, file, line);
    if ((st = check_repeat(r, fn, what, fields, *calls, &t, file, line))) {
        release(&r->slot_busy[cs]);
        return st;
    }
    rd_sketch_params none = { 0, NULL, 0, 0, 0 };
    observe_slot(r, fields, NULL, calls, NULL, &t, &none, cs, file, line);
    release(&r->slot_busy[cs]);
    return RESDIAG_OK;
}
