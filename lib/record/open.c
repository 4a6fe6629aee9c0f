/*
 * open.c - the life of a handle: the defaults of the model and options,
 * resdiag_open (copy what the trainer gave, check it, find the rank,
 * allocate the step buffer, create the rank's file), resdiag_close and
 * resdiag_destroy.
 */
#include <stdlib.h>
#include <string.h>

#include "common/sized_struct.h"
#include "format/format.h"
#include "record/handle.h"
#include "record/ranks.h"
#include "record/same_as.h"
#include "record/signals.h"
#include "record/team.h"
#include "record/validate.h"

#define MIN_TAU_LEN 4096

/* ------------------------------------------------------------- defaults */

void resdiag_model_init(resdiag_model *model)
{
    if (!model)
        return;
    memset(model, 0, sizeof *model);
    model->struct_size = sizeof *model;
    model->rank = RESDIAG_RANK_DETECT;
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
    options->flush_seconds = 1.0;
    options->hook_threads = 1;
    options->record_rank_every = 1;
    options->file_schema = 0;
    options->compression = 1;
}

/* ---------------------------------------------------------------- open */

/* A copy of s that free_run frees; NULL when memory ran out. */
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

/* What the hooks split into parts over the run, at debug priority: the
 * way to see from outside that hook_threads reached the library and that
 * its workers computed parts (tests/tinygpt, doc/USING.md). */
static void log_split_counts(resdiag *r)
{
    if (!r->split)
        return;
    rd_split_counts c;
    rd_split_pool_counts(r->split, &c);
    rd_run_log(r, RESDIAG_LOG_DEBUG, "hook_threads %d: %lld tensors split into %lld parts, "
               "%lld of them computed by the workers", r->opt.hook_threads, c.tensors, c.parts,
               c.by_workers);
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
    rd_same_free(r);
    log_split_counts(r);
    rd_split_pool_destroy(r->split);
    rd_teams_free(r);
    pthread_mutex_destroy(&r->msg_lock);
    free(r);
}


/* Points every string of r->model at a copy the handle owns, so that the
 * trainer may free its own after open and the writer reads them from the
 * model. Returns 0, or -1 when memory ran out. */
static int own_model_strings(resdiag *r)
{
    const resdiag_model m = r->model;
    int ok = 1;
    r->model.sublayer_names = own_names(r, m.sublayer_names, m.n_sublayers, &ok);
    r->model.layer_param_names = own_names(r, m.layer_param_names, m.n_layer_params, &ok);
    r->model.model_param_names = own_names(r, m.model_param_names, m.n_model_params, &ok);
    r->model.meta = own_names(r, m.meta, 2 * m.n_meta, &ok);
    r->model.metric_names = own_names(r, m.metric_names, m.n_metrics, &ok);
    const char **one[] = { &r->model.description, &r->model.head_param,
                           &r->model.residual_param };
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        if (*one[i] && !(*one[i] = own_string(r, *one[i])))
            ok = 0;
    return ok ? 0 : -1;
}

/* The column signs of the sketch and the step buffer. Returns OK,
 * RESDIAG_E_INVALID for a buffer too large to be meant, or
 * RESDIAG_E_NOMEM. */
static resdiag_status alloc_buffers(resdiag *r, const open_ctx *c)
{
    const resdiag_model *m = &r->model;
    const resdiag_options *opt = &r->opt;
    rd_tables_init(&r->lay, m->n_layers, m->n_sublayers, m->n_layer_params, m->n_model_params,
                   opt->sketch_size,
                   rd_block_sites(opt->file_schema == 0 ? RD_SCHEMA_VERSION : opt->file_schema));
    rd_tables_set_metrics(&r->lay, m->n_metrics);
    /* A batch larger than 4 GiB is a configuration mistake, not a plan. */
    if ((double)r->lay.record_len * (double)opt->flush_steps * sizeof(double) > 4294967296.0)
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: %d layers x flush_steps %d need more "
                            "than 4 GiB of step buffer; lower flush_steps or sketch_size",
                            m->n_layers, opt->flush_steps);
    size_t n_adds = (size_t)m->n_layers * (size_t)m->n_sublayers;
    r->sp.k = opt->sketch_size;
    r->sp.seed = opt->sketch_seed;
    r->row_sign_base = 0; /* one process: rows are numbered from 0 */
    r->sp.tau_len = (size_t)(m->d_model > m->shard_cols ? m->d_model : m->shard_cols);
    if (r->sp.tau_len < MIN_TAU_LEN)
        r->sp.tau_len = MIN_TAU_LEN;
    /* An odd table length makes lcm(K, tau_len) = K * tau_len for K a power
     * of two, so columns beyond the table (logits) wrap onto other buckets
     * and the sketch stays unbiased for widths up to K * tau_len. */
    r->sp.tau_len |= 1;
    r->tau = malloc(2 * r->sp.tau_len * sizeof *r->tau);
    r->batch = malloc((size_t)opt->flush_steps * r->lay.record_len * sizeof *r->batch);
    r->batch_steps = malloc((size_t)opt->flush_steps * sizeof *r->batch_steps);
    r->batch_times = malloc((size_t)opt->flush_steps * sizeof *r->batch_times);
    r->callsites = calloc(r->lay.n_slots, sizeof *r->callsites);
    r->adds = calloc(n_adds, sizeof *r->adds);
    r->slot_busy = calloc(r->lay.n_slots, sizeof *r->slot_busy);
    if (!r->tau || !r->batch || !r->batch_steps || !r->batch_times || !r->callsites ||
        !r->adds || !r->slot_busy || rd_same_init(r) != 0)
        return rd_open_fail(c, RESDIAG_E_NOMEM, "resdiag_open: out of memory");
    rd_fill_column_signs(r->tau, r->sp.tau_len, opt->sketch_seed);
    memcpy(r->tau + r->sp.tau_len, r->tau, r->sp.tau_len * sizeof *r->tau);
    r->sp.tau = r->tau;
    return RESDIAG_OK;
}

/* The caller's options over the defaults (sized_struct.h); open's
 * messages go to their handler from here on. */
static resdiag_status copy_options(open_ctx *c, resdiag_options *opt,
                                   const resdiag_options *options)
{
    resdiag_options_init(opt);
    if (!options)
        return RESDIAG_OK;
    if (rd_copy_sized(opt, sizeof *opt, options, options->struct_size, 0))
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: options were not set up with "
                            "resdiag_options_init (struct_size %zu)", options->struct_size);
    c->fn = opt->log_fn;
    c->user = opt->log_user_data;
    return RESDIAG_OK;
}

/* The caller's model over the defaults: a model of an older header keeps
 * the defaults of the fields it does not know. */
static resdiag_status copy_model(const open_ctx *c, resdiag_model *m,
                                 const resdiag_model *model)
{
    resdiag_model_init(m);
    if (rd_copy_sized(m, sizeof *m, model, model->struct_size, 0))
        return rd_open_fail(c, RESDIAG_E_INVALID,
                            "client bug: resdiag_open: model was not set up with "
                            "resdiag_model_init (struct_size %zu)", model->struct_size);
    return RESDIAG_OK;
}

/* What the rank changes in the handle (handle.h): the row signs' base,
 * the shard's columns, the pipeline stage's layers, whether it records. */
static void apply_rank(resdiag *r, const rd_rank *rk, resdiag_split split)
{
    const resdiag_model *m = &r->model;
    r->row_sign_base = 0;
    if (split == RESDIAG_SPLIT_DATA || split == RESDIAG_SPLIT_SEQUENCE)
        r->row_sign_base = (int64_t)rk->rank << 40;
    r->shard_col0 = -1;
    if (split == RESDIAG_SPLIT_TENSOR && m->shard_cols != m->d_model)
        r->shard_col0 = m->shard_col_offset;
    r->layer_lo = 0;
    r->layer_hi = m->n_layers;
    if (split == RESDIAG_SPLIT_PIPELINE && m->layer_count > 0) {
        r->layer_lo = m->layer_first;
        r->layer_hi = m->layer_first + m->layer_count;
    }
    r->rank_idle = rk->rank % r->opt.record_rank_every != 0;
    r->rank = rk->rank;
}

/* Creates the rank's file, or (a rank that does not record) says so. */
static resdiag_status create_file(resdiag *r, const open_ctx *c, const char *path,
                                  const rd_rank *rk, resdiag_split split)
{
    const resdiag_options *opt = &r->opt;
    if (r->rank_idle) {
        rd_run_log(r, RESDIAG_LOG_INFO,
                   "rank %d of %d does not record (record_rank_every %d): no run file, every "
                   "call on this handle is a no-op", rk->rank, rk->world_size,
                   opt->record_rank_every);
        return RESDIAG_OK;
    }
    size_t len = strlen(path) + 32;
    char *file = malloc(len);
    if (!file)
        return rd_open_fail(c, RESDIAG_E_NOMEM, "resdiag_open: out of memory");
    resdiag_rank_path(file, len, path, rk->rank);
    const rd_rank_attrs ra = { rk->rank, rk->world_size, rk->local_rank, rk->source,
                               rd_split_name(split), r->model.shard_col_offset,
                               r->model.layer_first, r->model.layer_count,
                               opt->record_rank_every, rk->job_id };
    rd_file_header hdr = { &r->model, &r->lay, opt->sketch_size, opt->sketch_seed,
                           opt->flush_steps, opt->overwrite, &ra,
                           opt->file_schema == 0 ? RD_SCHEMA_VERSION : opt->file_schema,
                           opt->compression };
    char err[512];
    resdiag_status st = rd_writer_create(&r->writer, file, &hdr, err, sizeof err);
    if (st)
        rd_open_fail(c, st, "cannot create run file '%s': %s", file, err);
    free(file);
    return st;
}

/* hook_threads: 0 becomes the CPUs the process may run on; from 2 on, the
 * pool of hook_threads - 1 workers (split.h). A worker that cannot start
 * is no failure: the hooks compute its parts, with the same results. */
static void start_hook_threads(resdiag *r)
{
    if (r->opt.hook_threads == 0) {
        r->opt.hook_threads = rd_split_threads_available();
        rd_run_log(r, RESDIAG_LOG_INFO, "hook_threads 0: %d, the CPUs this process may run on",
                   r->opt.hook_threads);
    }
    const int want = r->opt.hook_threads - 1;
    int started = 0;
    int err = want >= 1 ? rd_split_pool_create(&r->split, want, &started) : 0;
    if (err)
        rd_run_log(r, RESDIAG_LOG_INFO,
                   "warning: hook_threads %d: cannot start %d of the hooks' %d worker threads "
                   "(%s); hooks compute their parts on the caller's thread, with the same "
                   "results", r->opt.hook_threads, want - started, want, strerror(err));
}

resdiag_status resdiag_open(resdiag **out, const char *path, const resdiag_model *model,
                            const resdiag_options *options)
{
    open_ctx c = { NULL, NULL };
    if (out)
        *out = NULL;
    resdiag_options opt;
    resdiag_model m;
    resdiag_status st = copy_options(&c, &opt, options);
    if (st)
        return st;
    if (!out)
        return rd_open_fail(&c, RESDIAG_E_NULL, "client bug: resdiag_open: out is NULL");
    if (!path || !model)
        return rd_open_fail(&c, RESDIAG_E_NULL, "client bug: resdiag_open: %s is NULL",
                            !path ? "path" : "model");
    rd_rank rk;
    if ((st = copy_model(&c, &m, model)) || (st = rd_check_model(&c, &m)) ||
        (st = rd_check_options(&c, &opt)) || (st = rd_resolve_rank(&c, &m, &rk)))
        return st;
    /* Several ranks without a split are data parallel (resdiag.h). */
    resdiag_split split = m.split;
    if (split == RESDIAG_SPLIT_NONE && rk.world_size > 1)
        split = RESDIAG_SPLIT_DATA;

    resdiag *r = calloc(1, sizeof *r);
    if (!r)
        return rd_open_fail(&c, RESDIAG_E_NOMEM, "resdiag_open: out of memory");
    pthread_mutex_init(&r->msg_lock, NULL);
    r->opt = opt;
    r->model = m;
    if (own_model_strings(r)) {
        free_run(r);
        return rd_open_fail(&c, RESDIAG_E_NOMEM, "resdiag_open: out of memory");
    }
    if ((st = alloc_buffers(r, &c))) {
        free_run(r);
        return st;
    }
    apply_rank(r, &rk, split);
    if ((st = create_file(r, &c, path, &rk, split))) {
        free_run(r);
        return st;
    }
    if (!r->rank_idle) /* last, so that no failure above has a thread to join */
        start_hook_threads(r);
    r->state = RUN_OPEN;
    r->enabled = 1;
    r->step = -1;
    r->flushed_step = -1;
    r->t_open = r->t_last_flush = rd_now_seconds();
    *out = r;
    return RESDIAG_OK;
}

/* --------------------------------------------------------- close, destroy */

resdiag_status resdiag_close(resdiag *r)
{
    if (!r)
        return RESDIAG_OK;
    if (r->rank_idle) {
        r->state = RUN_CLOSED;
        return RESDIAG_OK;
    }
    if (r->state != RUN_OPEN)
        return rd_client_bug(r, RESDIAG_E_STATE, "resdiag_close called twice");
    if (r->in_step)
        rd_run_log(r, RESDIAG_LOG_INFO, "closing inside step %lld: that step is not recorded",
                   (long long)r->step);
    r->in_step = r->recording = 0;
    r->cur = NULL;
    resdiag_status st = rd_write_batch(r);
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
            rd_run_log(r, RESDIAG_LOG_ERROR, "closing the run file failed: %s", err);
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
