/*
 * main.c - tinygpt's training loop: synthetic data, forward, backward,
 * AdamW, with resdiag recording the run (instrument.c). The command line
 * and --help are in args.c.
 *
 *   tinygpt [--placement pre|post|...] [--record full|stream|off] ...
 *
 * stdout: the configuration, the loss every --log-every steps and at the
 * end, then the time and tokens/s. The "step" lines depend only on the
 * flags (bitwise, for any --threads), never on timing.
 * Exit status: 0 done, 1 a run-time failure (memory, a recording that
 * failed, a loss that is not finite), 2 bad usage, 3 stopped by an alarm
 * (--stop-on), 130 stopped by a signal (--handle-signals stop).
 *
 * tinygpt-mpi (the same sources with -DTINYGPT_MPI, dist.h) trains data
 * parallel over the ranks of an MPI job: `mpirun -np W tinygpt-mpi
 * --batch B ...` computes the same gradients as `tinygpt --batch B`, each
 * rank B/W of the sequences; rank 0 prints, every rank records its file.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "adamw.h"
#include "args.h"
#include "data.h"
#include "dist.h"
#include "instrument.h"
#include "model.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process, not of the calling thread: with
 * --threads 1 that is the training thread, and it also counts the hook
 * threads the library started (resdiag_options.hook_threads). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What a run needs besides its options: the model, the data, the
 * optimizer's state and this process's share of the batch. */
typedef struct trainer {
    const tg_options *o;
    const tg_dist *dist;
    tg_model model;       /* holds one micro-batch of this rank's share */
    tg_data data;
    tg_adamw opt;
    real *adam_m, *adam_v;
    int *inputs, *targets;
    size_t tokens;        /* the whole batch's, over every rank */
    int micro_batch;      /* sequences per micro-batch of this rank */
    int threads;          /* OpenMP's */
    int hook_threads;     /* resdiag_options.hook_threads */
    FILE *step_times;     /* --step-times, or NULL */
} trainer;

/* How the loop ended. */
typedef struct train_result {
    int rc;               /* 0, 1 (the loss is not finite), 130 (stopped by a signal) */
    int stopped;          /* a signal closed the run file */
    double tail;          /* the sum of the last (up to) 10 steps' losses */
    int tail_n;
    double elapsed, cpu;  /* wall and CPU seconds of the whole loop */
} train_result;

/* The configuration as words: for the first line and the run file. */
typedef struct config_words {
    char mix[32];         /* ":K" for mix:K, else "" */
    const char *norm, *init, *final_norm;
} config_words;

/* The run file's metadata, as text, and its description. */
typedef struct run_meta {
    char text[24][48];
    const char *pairs[2 * 24];
    int n;                /* pairs */
    char description[512];
} run_meta;

/* OpenMP's thread count, after --threads. */
static int set_threads(int requested)
{
#ifdef _OPENMP
    if (requested) omp_set_num_threads(requested);
    return omp_get_max_threads();
#else
    if (requested > 1)
        fprintf(stderr, "tinygpt: built without OpenMP, --threads %d runs on 1 thread\n",
                requested);
    return 1;
#endif
}

static void name_config(config_words *w, const tg_config *c)
{
    w->mix[0] = '\0';
    if (c->placement == TG_MIX) snprintf(w->mix, sizeof w->mix, ":%d", c->mix_layers);
    w->norm = c->norm == TG_LAYERNORM ? "layernorm" : "rmsnorm";
    w->init = c->init == TG_INIT_GPT2 ? "gpt2" : "xavier";
    w->final_norm = c->final_norm ? "on" : "off";
}

static void print_config(const trainer *t, const config_words *w)
{
    const tg_config *c = &t->o->cfg;
    const int ranks = t->dist->world, accum = t->o->grad_accum;
    printf("tinygpt: %d layers, d_model %d, %d heads, seq %d, batch %d, vocab %d; "
           "%s%s, %s, final norm %s, %s init; %.3fM parameters\n",
           c->n_layers, c->d_model, c->n_heads, c->seq_len, c->batch, c->vocab,
           tg_placement_name(c->placement), w->mix, w->norm, w->final_norm, w->init,
           (double)t->model.n_params / 1e6);
    if (ranks > 1)
        printf("data parallel: %d ranks of %d sequences per step\n", ranks, c->batch / ranks);
    if (accum > 1)
        printf("gradient accumulation: %d micro-batches of %d sequences per step\n", accum,
               t->micro_batch);
    printf("data: walks on a sparse Markov chain (%d successors per token); "
           "uniform guess %.4f, best possible %.4f nats/token\n",
           TG_DATA_SUCCESSORS, log((double)c->vocab), tg_data_loss_floor(&t->data, c->seq_len));
    printf("threads: %d, hook threads: %d%s\n", t->threads, t->hook_threads,
           t->o->hook_team ? ", hook team: on" : "");
}

static void add_meta(run_meta *m, const char *key, const char *fmt, ...)
{
    if (m->n == (int)(sizeof m->text / sizeof *m->text)) return; /* text[] is sized for all */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text[m->n], sizeof m->text[m->n], fmt, ap);
    va_end(ap);
    m->pairs[2 * m->n] = key;
    m->pairs[2 * m->n + 1] = m->text[m->n];
    m->n++;
}

/* The run file: the configuration goes in as metadata, as text. */
static void describe_run(run_meta *m, const trainer *t, const config_words *w)
{
    const tg_options *o = t->o;
    const tg_config *c = &o->cfg;
    m->n = 0;
    add_meta(m, "tinygpt.placement", "%s%s", tg_placement_name(c->placement), w->mix);
    add_meta(m, "tinygpt.norm", "%s", w->norm);
    add_meta(m, "tinygpt.final_norm", "%s", w->final_norm);
    add_meta(m, "tinygpt.init", "%s", w->init);
    add_meta(m, "tinygpt.layers", "%d", c->n_layers);
    add_meta(m, "tinygpt.d_model", "%d", c->d_model);
    add_meta(m, "tinygpt.heads", "%d", c->n_heads);
    add_meta(m, "tinygpt.seq", "%d", c->seq_len);
    add_meta(m, "tinygpt.batch", "%d", c->batch);
    add_meta(m, "tinygpt.vocab", "%d", c->vocab);
    add_meta(m, "tinygpt.steps", "%d", o->steps);
    add_meta(m, "tinygpt.lr", "%.17g", o->lr);
    add_meta(m, "tinygpt.warmup", "%d", o->warmup);
    add_meta(m, "tinygpt.weight_decay", "%.17g", o->weight_decay);
    add_meta(m, "tinygpt.seed", "%llu", (unsigned long long)o->seed);
    add_meta(m, "tinygpt.threads", "%d", t->threads);
    add_meta(m, "tinygpt.record", "%s", o->record == TG_RECORD_FULL ? "full" : "stream");
    add_meta(m, "tinygpt.record_every", "%d", o->record_every);
    add_meta(m, "tinygpt.dtype", "%s", sizeof(real) == 8 ? "f64" : "f32");
    add_meta(m, "tinygpt.hook_threads", "%d", t->hook_threads);
    if (c->placement == TG_DEEPNORM)  /* alpha is meaningful for deepnorm only */
        add_meta(m, "tinygpt.deepnorm_alpha", "%.17g", tg_deepnorm_alpha(c->n_layers));
    if (o->hook_team) add_meta(m, "tinygpt.hook_team", "%s", "on");
    /* and the micro-batches, where there are any */
    if (o->grad_accum > 1) add_meta(m, "tinygpt.grad_accum", "%d", o->grad_accum);
    snprintf(m->description, sizeof m->description,
             "tinygpt (examples/tinygpt): GPT-style decoder, %d layers, d_model %d, %d heads, "
             "%s%s placement, %s, final norm %s, %s init, trained on a synthetic Markov chain",
             c->n_layers, c->d_model, c->n_heads, tg_placement_name(c->placement), w->mix,
             w->norm, w->final_norm, w->init);
}

/* --step-times: the file and its header line, or NULL after a message. */
static FILE *open_step_times(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "tinygpt: cannot write %s: %s\n", path, strerror(errno));
        return NULL;
    }
    fputs("# step recorded cpu_s wall_s resdiag_s flushed resdiag_cpu_s\n", f);
    return f;
}

/* Opens the run file into model.hooks; without one, training goes on. */
static void open_recording(trainer *t, const run_meta *m)
{
    const tg_options *o = t->o;
    if (o->record == TG_RECORD_OFF) {
        printf("recording: off\n");
        return;
    }
    const int ranks = t->dist->world;
    tg_instr_settings s = { o->out, o->record, o->record_every, m->n, m->pairs,
                            m->description, o->flush_steps, o->flush_log, o->signals,
                            o->step_times != NULL, o->overwrite, o->declare, t->hook_threads,
                            t->dist->rank, ranks > 1 ? ranks : 0, o->file_schema,
                            o->compression, o->hook_team, o->resdiag_log, o->stop_on,
                            o->flush_seconds };
    char err[512];
    t->model.hooks = tg_instr_open(&o->cfg, &s, err, sizeof err);
    if (!t->model.hooks) {
        /* Diagnostics are never the reason a training run does not happen. */
        fprintf(stderr, "tinygpt: %s; training without recording\n", err);
        printf("recording: off (cannot create %s)\n", o->out);
    } else {
        printf("recording: %s, every %d steps, to %s\n",
               o->record == TG_RECORD_FULL ? "full" : "stream", o->record_every, o->out);
    }
}

/* Forward and backward of one step's batch: its mean loss, and the
 * parameter gradients summed over the micro-batches and the ranks. */
static double forward_backward(trainer *t, int step)
{
    const tg_options *o = t->o;
    const tg_dist *dist = t->dist;
    tg_model *model = &t->model;
    const int ranks = dist->world, accum = o->grad_accum;
    const size_t N = t->tokens;
    double loss = 0;
    /* Micro-batch k is sequences [k*B/N, (k+1)*B/N) of the batch. Each
     * backward computes the gradient of the whole batch's mean loss
     * restricted to its tokens (1/N of its own mean's), so its hooks
     * see the batch's gradients row for row; the parameter gradients
     * add up, and their hooks run in the last backward, on the sums. */
    /* With ranks, the same holds for rank r's share, sequences
     * [r*B/W, (r+1)*B/W): its gradients sum over the ranks to the
     * batch's, and are recorded once summed. */
    const size_t micro_tokens = (size_t)t->micro_batch * o->cfg.seq_len;
    const size_t share = (size_t)dist->rank * (N / (size_t)ranks);
    /* --nan-step without --nan-rank is rank 0's (args.c) */
    if (o->nan_step >= 0 && step >= o->nan_step && dist->rank == o->nan_rank)
        model->w.wte[(size_t)t->inputs[share] * (size_t)o->cfg.d_model] = NAN;
    model->loss_tokens = accum > 1 || ranks > 1 ? (int)N : 0;
    for (int k = 0; k < accum; k++) {
        model->accumulate = k > 0;
        model->param_hooks = ranks == 1 && k == accum - 1;
        loss += tg_forward(model, t->inputs + share + (size_t)k * micro_tokens,
                           t->targets + share + (size_t)k * micro_tokens);
        tg_backward(model);
    }
    if (ranks > 1) {
        /* the batch's mean: each micro-batch's mean weighs its tokens */
        loss = tg_dist_sum_double(dist, loss * (double)micro_tokens) / (double)N;
        tg_dist_sum(dist, model->grads, model->n_params);
        tg_param_grad_hooks(model);
    } else {
        loss /= accum;
    }
    return loss;
}

static void adamw_step(trainer *t)
{
    tg_model *model = &t->model;
    t->opt.t++;
    for (int i = 0; i < model->n_tensors; i++) {
        const tg_param *p = &model->tensors[i];
        size_t n = (size_t)p->rows * p->cols;
        adamw_update(model->params + p->offset, t->adam_m + p->offset, t->adam_v + p->offset,
                     model->grads + p->offset, n, &t->opt, t->opt.t, p->kind == TG_KIND_MATRIX);
    }
}

/* --warmup: the learning rate of step s (from 0), linear up to --lr. */
static double scheduled_lr(const tg_options *o, int step)
{
    if (o->warmup <= 0 || step + 1 >= o->warmup) return o->lr;
    return o->lr * (double)(step + 1) / (double)o->warmup;
}

/* One optimizer step; returns its loss, *stopped 1 when a signal closed
 * the run file in it. */
static double train_step(trainer *t, int step, int *stopped)
{
    const tg_options *o = t->o;
    double step_cpu = t->step_times ? cpu_now() : 0, step_wall = t->step_times ? now() : 0;
    tg_data_batch(&t->data, t->inputs, t->targets, o->cfg.batch, o->cfg.seq_len);
    /* Recorded steps cover forward and backward, and end before the
     * update: step 0 is the model at initialization. */
    tg_instr_step_begin(t->model.hooks, step);
    double loss = forward_backward(t, step);
    t->opt.lr = scheduled_lr(o, step);
    tg_instr_metrics(t->model.hooks, loss, t->opt.lr);
    /* --kill-step: the others write step K before rank R dies */
    int dies = step == o->kill_step && t->dist->rank == o->kill_rank;
    if (!dies) *stopped = tg_instr_step_end(t->model.hooks);
    if (step == o->kill_step) {
        tg_dist_barrier(t->dist);
        if (dies) raise(SIGKILL);
    }
    adamw_step(t);
    if (t->step_times) {
        /* Read the clocks first: writing the line is no part of the step. */
        step_cpu = cpu_now() - step_cpu;
        step_wall = now() - step_wall;
        int recorded, flushed;
        double in_resdiag, resdiag_cpu;
        tg_instr_last_step(t->model.hooks, &recorded, &in_resdiag, &flushed, &resdiag_cpu);
        fprintf(t->step_times, "%d %d %.9f %.9f %.9f %d %.9f\n", step, recorded, step_cpu,
                step_wall, in_resdiag, flushed, resdiag_cpu);
    }
    return loss;
}

static train_result train(trainer *t)
{
    const tg_options *o = t->o;
    train_result r = { 0 };
    double t0 = now();
    clock_t cpu0 = clock();  /* CPU time of all threads: tells a busy machine from a slow run */
    for (int step = 0; step < o->steps; step++) {
        double loss = train_step(t, step, &r.stopped);
        if (step >= o->steps - 10) {
            r.tail += loss;
            r.tail_n++;
        }
        if (step % o->log_every == 0 || step == o->steps - 1)
            printf("step %5d loss %.6f\n", step, loss);
        if (r.stopped == 2) { /* the alarm was said at step_end */
            r.rc = 3;
            break;
        }
        if (!isfinite(loss)) {
            fprintf(stderr, "tinygpt: the loss is not finite at step %d; stopping "
                            "(the run file keeps what was recorded)\n", step);
            r.rc = 1;
            break;
        }
        if (r.stopped) {
            fprintf(stderr, "tinygpt: stopped by a signal after step %d; the run file is "
                            "closed\n", step);
            printf("final loss %.6f (step %d, stopped by a signal)\n", loss, step);
            r.rc = 130;
            break;
        }
    }
    r.elapsed = now() - t0;
    r.cpu = (double)(clock() - cpu0) / CLOCKS_PER_SEC;
    return r;
}

/* Closes the run file and --step-times, prints the result; the exit status. */
static int finish(trainer *t, const train_result *r)
{
    const tg_options *o = t->o;
    int rc = r->rc;
    char err[512];
    double close_cpu = cpu_now(), close_wall = now();
    int closed = tg_instr_close(t->model.hooks, err, sizeof err);
    if (closed != 0)
        fprintf(stderr, "tinygpt: %s\n", err);
    if (closed < 0 && !rc)
        rc = 1;
    t->model.hooks = NULL;
    if (t->step_times) {
        fprintf(t->step_times, "# close %.9f %.9f\n", cpu_now() - close_cpu, now() - close_wall);
        if (fclose(t->step_times) != 0) {
            fprintf(stderr, "tinygpt: cannot write %s\n", o->step_times);
            if (!rc) rc = 1;
        }
    }
    /* A failed recording does not hide the training's own result. */
    if (!r->stopped && r->tail_n > 0 && isfinite(r->tail)) {
        printf("final loss %.6f (mean of the last %d steps)\n", r->tail / r->tail_n, r->tail_n);
        printf("time: %.3f s for %d steps (CPU %.3f s), %.0f tokens/s\n", r->elapsed, o->steps,
               r->cpu, (double)t->tokens * o->steps / r->elapsed);
    }
    return rc;
}

int main(int argc, char **argv)
{
    tg_options o;
    tg_dist dist;
    tg_dist_init(&dist, &argc, &argv);
    tg_parse_args(&o, argc, argv);
    const tg_config *c = &o.cfg;
    const int ranks = dist.world;
    if (c->batch % (ranks * o.grad_accum) != 0)
        tg_die_usage("%d ranks x --grad-accum %d must divide --batch %d", ranks, o.grad_accum,
                     c->batch);
    /* The job prints once: rank 0's lines (the others' are the same). */
    if (dist.rank > 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "tinygpt: rank %d: cannot quiet stdout\n", dist.rank);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);  /* progress lines appear as they happen */

    trainer t = { .o = &o, .dist = &dist, .threads = set_threads(o.threads) };
    /* The model holds one micro-batch of this rank's share of the batch;
     * a step runs grad_accum of them. */
    tg_config micro = *c;
    micro.batch = t.micro_batch = c->batch / (ranks * o.grad_accum);
    if (tg_model_create(&t.model, &micro) != 0) {
        fprintf(stderr, "tinygpt: out of memory for the model\n");
        return 1;
    }
    /* Distinct streams for parameters and data, both from --seed. */
    tg_model_init_params(&t.model, o.seed ^ 0x9a3a5e7b1d2c4f60ull);
    if (tg_data_create(&t.data, c->vocab, o.seed) != 0) {
        fprintf(stderr, "tinygpt: out of memory for the data\n");
        tg_model_free(&t.model);
        return 1;
    }
    /* the hooks run between the matmuls, on as many cores as they use */
    t.hook_threads = o.hook_threads >= 0 ? o.hook_threads
                     : o.hook_team ? 1 : t.threads < 16 ? t.threads : 16;
    config_words words;
    name_config(&words, c);
    print_config(&t, &words);
    run_meta meta;
    describe_run(&meta, &t, &words);

    /* before the run file, which an early exit would leave unclosed */
    if (o.step_times && !(t.step_times = open_step_times(o.step_times))) {
        tg_data_free(&t.data);
        tg_model_free(&t.model);
        return 1;
    }
    open_recording(&t, &meta);

    t.opt = (tg_adamw){ .lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                        .weight_decay = o.weight_decay, .t = 0 };
    t.adam_m = calloc(t.model.n_params, sizeof *t.adam_m);
    t.adam_v = calloc(t.model.n_params, sizeof *t.adam_v);
    t.tokens = (size_t)c->batch * c->seq_len;
    t.inputs = malloc(t.tokens * sizeof *t.inputs);
    t.targets = malloc(t.tokens * sizeof *t.targets);
    if (!t.adam_m || !t.adam_v || !t.inputs || !t.targets) {
        fprintf(stderr, "tinygpt: out of memory for the optimizer\n");
        return 1;
    }

    train_result result = train(&t);
    int rc = finish(&t, &result);
    free(t.adam_m);
    free(t.adam_v);
    free(t.inputs);
    free(t.targets);
    tg_data_free(&t.data);
    tg_model_free(&t.model);
    tg_dist_finalize(&dist);
    return rc;
}
