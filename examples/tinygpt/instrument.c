/*
 * instrument.c - every libresdiag call of tinygpt: describing the model,
 * opening the run, bracketing the steps, and forwarding the hooks of
 * model.c with model.c's file and line.
 */
#include "instrument.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* tinygpt shows the advanced tier too: copies of a site's statistics
 * (same_as), team calls and the signal handlers. */
#define RESDIAG_ADVANCED_API
#include <resdiag.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* model.c uses tinygpt's own names for the sites; they must be resdiag's. */
_Static_assert((int)TG_STREAM_IN == (int)RESDIAG_STREAM_IN, "site");
_Static_assert((int)TG_NORM_IN == (int)RESDIAG_NORM_IN, "site");
_Static_assert((int)TG_NORM_OUT == (int)RESDIAG_NORM_OUT, "site");
_Static_assert((int)TG_BRANCH_OUT == (int)RESDIAG_BRANCH_OUT, "site");
_Static_assert((int)TG_STREAM_OUT == (int)RESDIAG_STREAM_OUT, "site");
_Static_assert((int)TG_BRANCH_IN == (int)RESDIAG_BRANCH_IN, "site");
_Static_assert((int)TG_OUT_NORM_IN == (int)RESDIAG_OUT_NORM_IN, "site");
_Static_assert((int)TG_OUT_NORM_OUT == (int)RESDIAG_OUT_NORM_OUT, "site");
_Static_assert((int)TG_EMBED_OUT == (int)RESDIAG_EMBED_OUT, "site");
_Static_assert((int)TG_FINAL_NORM_IN == (int)RESDIAG_FINAL_NORM_IN, "site");
_Static_assert((int)TG_FINAL_NORM_OUT == (int)RESDIAG_FINAL_NORM_OUT, "site");
_Static_assert((int)TG_LOGITS == (int)RESDIAG_LOGITS, "site");
_Static_assert((int)TG_FWD == (int)RESDIAG_FORWARD && (int)TG_BWD == (int)RESDIAG_BACKWARD,
               "direction");
_Static_assert(TG_MODEL_LEVEL == RESDIAG_MODEL_LEVEL, "model level");

struct tg_instr {
    resdiag *rd;
    tg_record record;
    int recording;               /* the current step is recorded */
    long failed;                 /* hook calls that returned an error */
    resdiag_status first_error;
    char first_error_msg[256];
    int64_t step;                /* the current step */
    int flush_fd;                /* --flush-log, or -1 */
    int64_t flushed;             /* last step reported there */
    int interrupted;             /* a signal closed the run */
    int alarmed;                 /* a --stop-on alarm fired */
    /* --step-times */
    int time_calls;
    int read_every_site;         /* TINYGPT_READ_EVERY_SITE: no copies (tg_hook_same) */
    double in_resdiag;           /* seconds inside resdiag since tg_instr_last_step */
    int was_recorded;            /* the last step begun was recorded */
    int64_t file_last;           /* resdiag_flushed_step before the step */
    int grew;                    /* ... and it changed during the step */
    double cpu_in_calls;         /* CPU seconds of the calling thread inside resdiag */
    int hook_team;               /* hooks are team calls (tg_instr_settings.hook_team) */
    int old_layout;              /* file_schema 1 or 2: no room for branch_in.. */
    int n_hook_threads;          /* the library's hook threads found at open */
    clockid_t hook_clock[16];    /* ... their CPU clocks */
    double hook_cpu_last;        /* ... their CPU seconds at tg_instr_last_step */
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double clock_seconds(clockid_t c)
{
    struct timespec ts;
    if (clock_gettime(c, &ts) != 0) return 0; /* a thread that has ended */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Bracket a resdiag call: TIC before, TOC after (no-ops unless timing). The
 * wall clock inside the CPU clock, whose reading is a system call. */
#define TIC(h) \
    double cpu_tic_ = (h)->time_calls ? clock_seconds(CLOCK_THREAD_CPUTIME_ID) : 0; \
    double tic_ = (h)->time_calls ? mono_now() : 0
#define TOC(h) do { if ((h)->time_calls) { \
        (h)->in_resdiag += mono_now() - tic_; \
        (h)->cpu_in_calls += clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu_tic_; } } while (0)

/* The CPU clocks of the threads the library started for its hooks
 * (resdiag_options.hook_threads; named "resdiag-split"): with them the
 * CPU time resdiag uses is the calling thread's plus theirs. The clock of
 * thread tid is Linux's encoding, as pthread_getcpuclockid() makes it. */
static int find_hook_threads(clockid_t *clocks, int max)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; n < max && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f) && strcmp(comm, "resdiag-split\n") == 0)
            clocks[n++] = (clockid_t)((~(clockid_t)atoi(e->d_name)) << 3) | 6;
        fclose(f);
    }
    closedir(d);
    return n;
}

static double hook_threads_cpu(const tg_instr *h)
{
    double sum = 0;
    for (int i = 0; i < h->n_hook_threads; i++) sum += clock_seconds(h->hook_clock[i]);
    return sum;
}

/* One write(2) per line, no stdio buffer: a line written is in the file
 * even if the process is killed right after. */
static void flush_log_line(tg_instr *h, const char *line)
{
    if (h->flush_fd < 0) return;
    size_t len = strlen(line);
    if (write(h->flush_fd, line, len) != (ssize_t)len) {
        close(h->flush_fd);
        h->flush_fd = -1;
    }
}

/* The test of a killed trainer compares the file with these lines. */
static void log_flushed(tg_instr *h)
{
    int64_t s;
    if (h->flush_fd < 0 || resdiag_flushed_step(h->rd, &s) != RESDIAG_OK || s == h->flushed)
        return;
    h->flushed = s;
    char line[64];
    snprintf(line, sizeof line, "flushed %lld\n", (long long)s);
    flush_log_line(h, line);
}

static const char *const sublayer_names[TG_N_SUBLAYERS] = { "attn", "mlp" };
/* Parameter gradients recorded per layer and for the whole model (the names
 * model.c passes to HOOK_PARAM). */
static const char *const layer_param_names[] = { "attn.wqkv", "attn.wo", "mlp.w1", "mlp.w2" };
static const char *const model_param_names[] = { "head.w", "embed.wte", "embed.wpe" };
static const char *const metric_names[] = { "loss", "lr" };

static resdiag_placement declared(tg_placement p)
{
    switch (p) {
    case TG_PRE: return RESDIAG_PLACEMENT_PRE;
    case TG_POST: return RESDIAG_PLACEMENT_POST;
    case TG_SANDWICH: return RESDIAG_PLACEMENT_SANDWICH;
    case TG_DEEPNORM: return RESDIAG_PLACEMENT_DEEPNORM;
    case TG_MIX: return RESDIAG_PLACEMENT_MIXED;
    case TG_PARALLEL: return RESDIAG_PLACEMENT_PARALLEL;
    case TG_NONE: return RESDIAG_PLACEMENT_NONE;
    case TG_REORDERED: return RESDIAG_PLACEMENT_REORDERED;
    case TG_HYBRID: return RESDIAG_PLACEMENT_PER_SUBLAYER;
    }
    return RESDIAG_PLACEMENT_UNDECLARED;
}

tg_instr *tg_instr_open(const tg_config *cfg, const tg_instr_settings *s,
                        char *errbuf, int errlen)
{
    if (resdiag_version_number() / 10000 != RESDIAG_VERSION_NUMBER / 10000) {
        snprintf(errbuf, (size_t)errlen, "libresdiag %s does not match the header (%s)",
                 resdiag_version_string(), RESDIAG_VERSION_STRING);
        return NULL;
    }
    static const resdiag_log_priority priorities[] = { RESDIAG_LOG_ERROR, RESDIAG_LOG_INFO,
                                                       RESDIAG_LOG_DEBUG };
    if (s->log_priority >= 0 && s->log_priority <= 2) /* before any other resdiag call */
        resdiag_set_log_priority(priorities[s->log_priority]);
    tg_instr *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(errbuf, (size_t)errlen, "out of memory");
        return NULL;
    }
    h->record = s->record;
    const char *every = getenv("TINYGPT_READ_EVERY_SITE");
    h->read_every_site = every && *every && strcmp(every, "0") != 0;
    h->flush_fd = -1;
    h->flushed = -1;
    h->time_calls = s->time_calls;
    h->file_last = -1;
    h->hook_team = s->hook_team;
    h->old_layout = s->file_schema == 1 || s->file_schema == 2;

    resdiag_model model;
    resdiag_model_init(&model);
    model.n_layers = cfg->n_layers;
    model.d_model = cfg->d_model;
    model.n_sublayers = TG_N_SUBLAYERS;
    model.sublayer_names = sublayer_names;
    model.block = cfg->placement == TG_PARALLEL ? RESDIAG_BLOCK_PARALLEL
                                                : RESDIAG_BLOCK_SEQUENTIAL;
    model.declared_placement = declared(cfg->placement);
    model.declared_mix_layers = cfg->placement == TG_MIX ? cfg->mix_layers : 0;
    if (s->declare) { /* what the trainer claims, right or wrong: --declare */
        model.declared_placement = RESDIAG_PLACEMENT_UNDECLARED;
        model.declared_mix_layers = 0;
        /* 8..11 are verdicts only: named "?", never given */
        for (int p = RESDIAG_PLACEMENT_UNDECLARED; p <= RESDIAG_PLACEMENT_PER_SUBLAYER; p++)
            if (strcmp(s->declare, resdiag_placement_name((resdiag_placement)p)) == 0)
                model.declared_placement = (resdiag_placement)p;
    }
    /* No norm anywhere (no block norms, no final norm): nothing to declare. */
    if (cfg->placement == TG_NONE && !cfg->final_norm) model.norm_kind = RESDIAG_NORM_UNDECLARED;
    else model.norm_kind = cfg->norm == TG_LAYERNORM ? RESDIAG_NORM_LAYERNORM : RESDIAG_NORM_RMSNORM;
    model.n_layer_params = (int)(sizeof layer_param_names / sizeof *layer_param_names);
    model.layer_param_names = layer_param_names;
    model.n_model_params = (int)(sizeof model_param_names / sizeof *model_param_names);
    model.model_param_names = model_param_names;
    /* The roles: the output head, and the matrix that writes the MLP's
     * output into the stream. */
    model.head_param = "head.w";
    model.residual_param = "mlp.w2";
    model.n_metrics = 2; /* the loss curve of the report, and the schedule */
    model.metric_names = metric_names;
    model.n_meta = s->n_meta;
    model.meta = s->meta;
    model.description = s->description;
    /* A data-parallel job (tinygpt-mpi): the rank from MPI; each rank
     * writes its own file (resdiag_rank_path) and the reader merges them.
     * Without one, the library looks for a launcher in the environment. */
    if (s->world_size > 0) {
        model.rank = s->rank;
        model.world_size = s->world_size;
        model.split = s->world_size > 1 ? RESDIAG_SPLIT_DATA : RESDIAG_SPLIT_NONE;
    }

    resdiag_options opt;
    resdiag_options_init(&opt);
    opt.record_every = s->record_every;
    if (s->flush_steps > 0) opt.flush_steps = s->flush_steps;
    if (s->flush_seconds >= 0) opt.flush_seconds = s->flush_seconds;
    opt.overwrite = s->overwrite;
    opt.hook_threads = s->hook_threads;
    opt.file_schema = s->file_schema;
    opt.compression = s->compression;
    if (s->stop_on) tg_parse_stop_on(s->stop_on, &opt); /* checked by args.c */

    resdiag_status st = resdiag_open(&h->rd, s->path, &model, &opt);
    if (st != RESDIAG_OK) {
        snprintf(errbuf, (size_t)errlen, "cannot record to %s: %s", s->path,
                 resdiag_strerror(st));
        free(h);
        return NULL;
    }
    if (h->time_calls) {
        h->n_hook_threads = find_hook_threads(h->hook_clock, 16);
        h->hook_cpu_last = hook_threads_cpu(h);
    }
    if (s->signals) {
        st = resdiag_install_signal_handlers(h->rd, s->signals == 2 ? RESDIAG_SIGNALS_RETURN
                                                                     : RESDIAG_SIGNALS_RERAISE);
        if (st != RESDIAG_OK)
            fprintf(stderr, "tinygpt: no signal handlers: %s\n", resdiag_strerror(st));
    }
    if (s->flush_log) {
        h->flush_fd = open(s->flush_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (h->flush_fd < 0)
            fprintf(stderr, "tinygpt: cannot write %s; going on without it\n", s->flush_log);
        flush_log_line(h, "open\n");
    }
    return h;
}

const char *tg_parse_stop_on(const char *list, resdiag_options *o)
{
    static char why[160];
    const char *p = list;
    do {
        size_t n = strcspn(p, ",");
        double *bound = NULL;
        size_t k = 0;
        if (n == 9 && strncmp(p, "nonfinite", 9) == 0) o->alarm_nonfinite = 1;
        else if (strncmp(p, "r>", k = 2) == 0) bound = &o->alarm_update_ratio;
        else if (strncmp(p, "growth>", k = 7) == 0) bound = &o->alarm_growth;
        else if (strncmp(p, "grad>", k = 5) == 0) bound = &o->alarm_grad_norm;
        else {
            snprintf(why, sizeof why, "'%.*s' is none of nonfinite, r>B, growth>B, grad>B",
                     (int)n, p);
            return why;
        }
        if (bound) {
            char num[64], *end;
            snprintf(num, sizeof num, "%.*s", (int)(n - k), p + k);
            *bound = strtod(num, &end);
            if (!num[0] || *end || !(*bound > 0) || isinf(*bound)) {
                snprintf(why, sizeof why, "'%.*s': the bound must be a number > 0", (int)n, p);
                return why;
            }
        }
        p += n;
    } while (*p++ == ',');
    return NULL;
}

/* One line on stderr for each alarm fired at this step_end. */
static void say_alarms(tg_instr *h)
{
    static const char *const kinds[] = { "nonfinite", "r", "growth", "grad" };
    for (int i = h->alarmed; i < resdiag_alarm_count(h->rd); i++) {
        resdiag_alarm a;
        if (resdiag_alarm_get(h->rd, i, &a) != RESDIAG_OK) break;
        fprintf(stderr, "tinygpt: alarm %s at step %lld: rank %d, %s, layer %d, sublayer %d, "
                        "%s %s: value %g (bound %g); stopping, the run file holds the step\n",
                kinds[a.kind], (long long)a.step, a.rank,
                a.direction == RESDIAG_FORWARD ? "forward" : "backward", a.layer, a.sublayer,
                a.param ? "param" : "site",
                a.param ? a.param : resdiag_site_name((resdiag_site)a.site), a.value, a.bound);
        h->alarmed = i + 1;
    }
}

static void note(tg_instr *h, resdiag_status st)
{
    if (st == RESDIAG_OK) return;
    if (st == RESDIAG_ALARM) {
        say_alarms(h);
        return;
    }
    if (st == RESDIAG_E_INTERRUPTED) {
        h->interrupted = 1;
        return;
    }
    if (h->failed++ == 0) {
        h->first_error = st;
        snprintf(h->first_error_msg, sizeof h->first_error_msg, "%s", resdiag_errmsg(h->rd));
        /* Said once, at once; recording stops, training does not. */
        fprintf(stderr, "tinygpt: recording failed at step %lld (%s); training goes on, the "
                        "run file keeps the steps written before\n",
                (long long)h->step, resdiag_strerror(st));
    }
}

void tg_instr_step_begin(tg_instr *h, int64_t step)
{
    if (!h) return;
    h->step = step;
    TIC(h);
    resdiag_status st = resdiag_step_begin(h->rd, step);
    /* Hooks in steps that are not recorded return before calling resdiag. */
    h->recording = resdiag_step_is_recorded(h->rd);
    TOC(h);
    note(h, st);
    h->was_recorded = h->recording;
}

void tg_instr_metrics(tg_instr *h, double loss, double lr)
{
    if (!h) return;
    TIC(h);
    resdiag_status st = resdiag_step_metric(h->rd, "loss", loss);
    if (st == RESDIAG_OK) st = resdiag_step_metric(h->rd, "lr", lr);
    TOC(h);
    note(h, st);
}

int tg_instr_step_end(tg_instr *h)
{
    if (!h) return 0;
    TIC(h);
    resdiag_status st = resdiag_step_end(h->rd);  /* writes the buffered steps when due */
    TOC(h);
    note(h, st);
    h->recording = 0;
    if (h->time_calls) {
        int64_t s;
        h->grew = resdiag_flushed_step(h->rd, &s) == RESDIAG_OK && s != h->file_last;
        if (h->grew) h->file_last = s;
    }
    log_flushed(h);
    return h->interrupted ? 1 : h->alarmed ? 2 : 0;
}

void tg_instr_last_step(tg_instr *h, int *recorded, double *resdiag_s, int *flushed,
                        double *resdiag_cpu_s)
{
    *recorded = h ? h->was_recorded : 0;
    *resdiag_s = h ? h->in_resdiag : 0;
    *flushed = h ? h->grew : 0;
    *resdiag_cpu_s = 0;
    if (!h) return;
    h->in_resdiag = 0;
    if (h->time_calls) {
        double hook_cpu = hook_threads_cpu(h);
        *resdiag_cpu_s = h->cpu_in_calls + (hook_cpu - h->hook_cpu_last);
        h->hook_cpu_last = hook_cpu;
        h->cpu_in_calls = 0;
    }
}

int tg_instr_close(tg_instr *h, char *errbuf, int errlen)
{
    if (!h) return 0;
    resdiag_status st = resdiag_close(h->rd);
    log_flushed(h);
    if (h->flush_fd >= 0) close(h->flush_fd);
    int rc = 0;
    if (st != RESDIAG_OK && h->failed && st == h->first_error) {
        /* The failure was said when it happened: only the outcome here. */
        snprintf(errbuf, (size_t)errlen, "the run file holds the steps written before the "
                 "failure (%ld resdiag calls failed)", h->failed);
        rc = st == RESDIAG_E_NOSPACE ? 1 : -1;
    } else if (st != RESDIAG_OK) {
        snprintf(errbuf, (size_t)errlen, "closing the run file: %s: %s", resdiag_strerror(st),
                 resdiag_errmsg(h->rd));
        rc = -1;
    } else if (h->failed) {
        snprintf(errbuf, (size_t)errlen, "%ld resdiag calls failed, the first with %s: %s",
                 h->failed, resdiag_strerror(h->first_error), h->first_error_msg);
        rc = -1;
    }
    resdiag_destroy(h->rd);
    free(h);
    return rc;
}

static resdiag_tensor view(const real *x, int64_t rows, int64_t cols)
{
#ifdef TINYGPT_DOUBLE
    return resdiag_f64(x, rows, cols);
#else
    return resdiag_f32(x, rows, cols);
#endif
}

/* One hook as a team call (--hook-team on): the OpenMP threads each give
 * their part from a parallel region of their own. The trainer's threads
 * have just left the region of a matmul and still spin waiting for the
 * next one (OpenMP's wait policy), so this region wakes no thread: the
 * hook's rows are read by every core the matmuls use, where a hook called
 * between regions runs on one while the others wait (the library's own
 * hook_threads wake a worker per part). The same bits as
 * resdiag_options.hook_threads = the OpenMP threads. The CPU time is every
 * member's inside its call. */
typedef struct tg_team_call {
    int dir, layer, sublayer;
    tg_site site;
    const char *param; /* a parameter gradient's name, else NULL */
    resdiag_tensor t;
    const char *file;
    int line;
} tg_team_call;

static void team_call(tg_instr *h, const tg_team_call *c)
{
    /* A tensor under 1 MiB, or of one row, is read whole by one call
     * (resdiag.h): a region for it would only make the threads meet. */
    if (c->t.rows < 2 || (double)c->t.rows * (double)c->t.cols * sizeof(real) < 1048576.0) {
        TIC(h);
        resdiag_status st =
            c->param ? resdiag_param_grad_team_at(h->rd, c->layer, c->param, c->t, 0, 1, c->file,
                                                  c->line)
                     : resdiag_observe_team_at(h->rd, (resdiag_direction)c->dir, c->layer,
                                               c->sublayer, (resdiag_site)c->site, c->t, 0, 1,
                                               c->file, c->line);
        TOC(h);
        note(h, st);
        return;
    }
    const double tic = h->time_calls ? mono_now() : 0;
    double cpu = 0;
    resdiag_status first = RESDIAG_OK;
#ifdef _OPENMP
#pragma omp parallel reduction(+ : cpu)
#endif
    {
#ifdef _OPENMP
        const int part = omp_get_thread_num(), n_parts = omp_get_num_threads();
#else
        const int part = 0, n_parts = 1;
#endif
        const double c0 = h->time_calls ? clock_seconds(CLOCK_THREAD_CPUTIME_ID) : 0;
        resdiag_status st =
            c->param ? resdiag_param_grad_team_at(h->rd, c->layer, c->param, c->t, part, n_parts,
                                                  c->file, c->line)
                     : resdiag_observe_team_at(h->rd, (resdiag_direction)c->dir, c->layer,
                                               c->sublayer, (resdiag_site)c->site, c->t, part,
                                               n_parts, c->file, c->line);
        if (h->time_calls) cpu += clock_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
        if (st != RESDIAG_OK) {
#ifdef _OPENMP
#pragma omp critical(tg_team_status)
#endif
            if (first == RESDIAG_OK) first = st;
        }
    }
    if (h->time_calls) {
        h->in_resdiag += mono_now() - tic;
        h->cpu_in_calls += cpu;
    }
    note(h, first);
}

/* The sites of schema 3 (branch_in, out_norm_in, out_norm_out), which a
 * file of schema 1 or 2 has no room for: left out there. */
static int site_in_layout(const tg_instr *h, tg_site site)
{
    return !h->old_layout || site < TG_BRANCH_IN || site > TG_OUT_NORM_OUT;
}

void tg_hook_tensor(tg_instr *h, int dir, int layer, int sublayer, tg_site site,
                    const real *x, int64_t rows, int64_t cols, const char *file, int line)
{
    if (!h || !h->recording || !site_in_layout(h, site)) return;
    if (h->record == TG_RECORD_STREAM) {
        /* Only the stream leaving each layer (STREAM_OUT of its last
         * sublayer) and the embedding that enters layer 0, forward. */
        int keep = dir == TG_FWD && (site == TG_EMBED_OUT ||
                                     (site == TG_STREAM_OUT && sublayer == TG_N_SUBLAYERS - 1));
        if (!keep) return;
    }
    if (h->hook_team) {
        const tg_team_call c = { dir, layer, sublayer, site, NULL, view(x, rows, cols), file,
                                 line };
        team_call(h, &c);
        return;
    }
    TIC(h);
    resdiag_status st = resdiag_observe_at(h->rd, (resdiag_direction)dir, layer, sublayer,
                                           (resdiag_site)site, view(x, rows, cols), file, line);
    TOC(h);
    note(h, st);
}

/* The sites that --record stream keeps. */
static int stream_keeps(int dir, int sublayer, tg_site site)
{
    return dir == TG_FWD && (site == TG_EMBED_OUT ||
                             (site == TG_STREAM_OUT && sublayer == TG_N_SUBLAYERS - 1));
}

void tg_hook_same(tg_instr *h, int dir, int layer, int sublayer, tg_site site, const real *x,
                  int64_t rows, int64_t cols, int from_layer, int from_sublayer,
                  tg_site from_site, const char *file, int line)
{
    if (!h || !h->recording || !site_in_layout(h, site)) return;
    /* a source that --record stream, or a file of schema 1 or 2, leaves
     * out is not there to copy */
    if (h->read_every_site || !site_in_layout(h, from_site) ||
        (h->record == TG_RECORD_STREAM && !stream_keeps(dir, from_sublayer, from_site))) {
        tg_hook_tensor(h, dir, layer, sublayer, site, x, rows, cols, file, line);
        return;
    }
    if (h->record == TG_RECORD_STREAM && !stream_keeps(dir, sublayer, site)) return;
    TIC(h);
    resdiag_status st = resdiag_observe_same_as(h->rd, (resdiag_direction)dir, layer, sublayer,
                                                (resdiag_site)site, from_layer, from_sublayer,
                                                (resdiag_site)from_site, file, line);
    TOC(h);
    note(h, st);
}

void tg_hook_param(tg_instr *h, int layer, const char *name, const real *g,
                   int64_t rows, int64_t cols, const char *file, int line)
{
    if (!h || !h->recording || h->record != TG_RECORD_FULL) return;
    if (h->hook_team) {
        const tg_team_call c = { 0, layer, 0, TG_STREAM_IN, name, view(g, rows, cols), file,
                                 line };
        team_call(h, &c);
        return;
    }
    TIC(h);
    resdiag_status st = resdiag_param_grad_at(h->rd, layer, name, view(g, rows, cols), file,
                                              line);
    TOC(h);
    note(h, st);
}
