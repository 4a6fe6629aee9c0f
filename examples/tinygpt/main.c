/*
 * main.c - tinygpt's command line and training loop: synthetic data,
 * forward, backward, AdamW, with resdiag recording the run (instrument.c).
 *
 *   tinygpt [--placement pre|post|...] [--record full|stream|off] ...
 *
 * stdout: the configuration, the loss every --log-every steps and at the
 * end, then the time and tokens/s. The "step" lines depend only on the
 * flags (bitwise, for any --threads), never on timing.
 * Exit status: 0 done, 1 a run-time failure (memory, a recording that
 * failed, a loss that is not finite), 2 bad usage, 130 stopped by a signal
 * (--handle-signals stop).
 *
 * tinygpt-mpi (the same sources with -DTINYGPT_MPI, dist.h) trains data
 * parallel over the ranks of an MPI job: `mpirun -np W tinygpt-mpi
 * --batch B ...` computes the same gradients as `tinygpt --batch B`, each
 * rank B/W of the sequences; rank 0 prints, every rank records its file.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
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
#include "data.h"
#include "dist.h"
#include "instrument.h"
#include "model.h"

static const char usage[] =
    "usage: tinygpt [options]\n"
    "\n"
    "Trains a small GPT-style model on a synthetic token stream and records\n"
    "residual-stream diagnostics with libresdiag (read them with\n"
    "`resdiag report run.h5`). A value follows its option as the next word or\n"
    "after '=' (--layers 2, --layers=2); a unique beginning will do (--lay=2).\n"
    "\n"
    "model\n"
    "  --placement P     where the norms sit [default=pre]:\n"
    "                      pre        x + F(Norm(x))\n"
    "                      post       Norm(x + F(x))\n"
    "                      sandwich   x + Norm(F(Norm(x)))          (Peri-LN)\n"
    "                      deepnorm   Norm(a*x + F(x)), a = (2L)^(1/4), init scaled\n"
    "                                 by b = (8L)^(-1/4)            (DeepNet)\n"
    "                      mix:K      post-norm in layers 0..K-1, pre after (Mix-LN)\n"
    "                      parallel   x + Attn(Norm(x)) + MLP(Norm(x)) (GPT-J, PaLM)\n"
    "                      none       x + F(x), no norm in the blocks\n"
    "                      reordered  x + Norm(F(x)), the only norm on the branch's\n"
    "                                 output (OLMo 2, Swin v2 res-post-norm)\n"
    "                      hybrid     per sublayer: attention x + Attn(x) (no norm),\n"
    "                                 MLP Norm(x + MLP(x)) (post-norm)\n"
    "  --norm N          layernorm | rmsnorm [default=layernorm]\n"
    "  --final-norm S    on | off: a norm before the output head [default=on]\n"
    "  --layers L        blocks [default=4]\n"
    "  --d-model C       stream width [default=128]\n"
    "  --heads H         attention heads, dividing C [default=4]\n"
    "  --seq T           tokens per sequence [default=64]\n"
    "  --vocab V         vocabulary [default=64]\n"
    "  --init I          gpt2: N(0, 0.02), residual output projections (attn.wo,\n"
    "                    mlp.w2) scaled by 1/sqrt(2L); xavier: Glorot uniform\n"
    "                    [default=gpt2]\n"
    "\n"
    "training\n"
    "  --batch B         sequences per step [default=8]\n"
    "  --grad-accum N    gradient accumulation: each step runs N micro-batches of\n"
    "                    B/N sequences (N divides B), forward and backward each,\n"
    "                    every hook once per micro-batch, the loss of each\n"
    "                    scaled so that the gradients add up to the batch's;\n"
    "                    one AdamW update per step [default=1]\n"
    "  --steps S         optimizer steps [default=200]\n"
    "  --lr X            AdamW learning rate, constant [default=0.001]\n"
    "  --weight-decay X  AdamW decoupled weight decay on matrices [default=0]\n"
    "  --seed N          parameters and data [default=1]\n"
    "  --threads N       OpenMP threads [default=OpenMP's, e.g. OMP_NUM_THREADS or\n"
    "                    all cores]; the results do not depend on it\n"
    "  --hook-threads N  threads a resdiag hook may use for one large tensor\n"
    "                    (resdiag_options.hook_threads: 1..16, 0 = every CPU\n"
    "                    the process may run on) [default=the OpenMP threads, so\n"
    "                    that the hooks use the cores the matmuls use]\n"
    "  --hook-team S     on | off: each hook a team call (resdiag_observe_team_at)\n"
    "                    from an OpenMP parallel region of its own, every\n"
    "                    OpenMP thread reading its part of the tensor: the\n"
    "                    same numbers as --hook-threads of that many threads,\n"
    "                    with no thread to wake; resdiag's own hook threads\n"
    "                    then default to 1 [default=off]\n"
    "  --log-every N     print the loss every N steps [default=10]\n"
    "  --resdiag-log P   error | info | debug: the lowest priority of resdiag's\n"
    "                    messages printed on stderr (resdiag_set_log_priority);\n"
    "                    debug adds, at the end, what the hook threads computed\n"
    "                    [default=error]\n"
    "  --step-times FILE one line per step: \"step recorded cpu_s wall_s resdiag_s\n"
    "                    flushed resdiag_cpu_s\": recorded 0/1; the process's CPU\n"
    "                    seconds and the wall seconds of the whole step (batch,\n"
    "                    forward, backward, step_end with any write to the run\n"
    "                    file, AdamW); the wall seconds inside resdiag calls;\n"
    "                    flushed 1 when the run file grew in that step; the CPU\n"
    "                    seconds resdiag used (the calling thread's inside its\n"
    "                    calls, and its hook threads'). Ends with a line\n"
    "                    \"# close cpu_s wall_s\" for closing the run file. With\n"
    "                    --threads 1 and --record-every 2 the recorded and\n"
    "                    unrecorded steps interleave: resdiag-bench's overhead\n"
    "                    figure (doc/BENCHMARK.md)\n"
    "\n"
    "diagnostics\n"
    "  --out FILE        the run file [default=run.h5]; it must not exist yet\n"
    "  --overwrite       replace the run file if FILE is one already (a resdiag\n"
    "                    run that no one is writing); anything else at FILE is\n"
    "                    never replaced\n"
    "  --record R        full: every site forward and backward, parameter\n"
    "                    gradients; stream: the stream leaving each layer and\n"
    "                    the embedding; off: no run file, no resdiag calls\n"
    "                    [default=full]\n"
    "  --record-every N  record steps 0, N, 2N, ... [default=1]\n"
    "  --declare P       declare placement P in the run file instead of the\n"
    "                    model's own: pre, post, sandwich, deepnorm, parallel,\n"
    "                    none, reordered, per_sublayer, or undeclared (declare\n"
    "                    nothing); to test `resdiag check --expect declared`\n"
    "                    [default: --placement]\n"
    "  --flush-steps N   write the run file every N recorded steps [default=16]\n"
    "  --file-schema N   the run file's schema (resdiag_options.file_schema): 3,\n"
    "                    also the sites branch_in, out_norm_in, out_norm_out; 2,\n"
    "                    float32 statistics and integer counts, without those\n"
    "                    sites; 1, every value a float64 (what resdiag 0.1.x\n"
    "                    reads); 0 = the newest [default=0]\n"
    "  --compression N   schema 2: 0 = none, 1..9 = shuffle + deflate at that\n"
    "                    level (resdiag_options.compression) [default=1]\n"
    "  --flush-log FILE  append \"open\", then \"flushed S\" whenever step S became\n"
    "                    the last step in the run file (one write(2) per line)\n"
    "  --handle-signals M  SIGINT/SIGTERM: raise = close the run file, then die\n"
    "                    by the signal; stop = close it, stop training, print the\n"
    "                    final loss, exit 130 [default: resdiag does not catch them]\n"
    "  A run file that cannot be created is reported on stderr and training goes\n"
    "  on without recording; a recording that fails later is reported once and\n"
    "  training goes on; the exit status is 1, or 0 when it was for lack of\n"
    "  space (disk full, ulimit -f).\n"
    "\n"
    "  -h, --help        this text\n";

#ifdef TINYGPT_MPI
static const char usage_mpi[] =
    "\n"
    "tinygpt-mpi: data parallel over the ranks of an MPI job (mpirun -np W):\n"
    "every rank draws the same batches of --batch B sequences and trains\n"
    "sequences [r*B/W, (r+1)*B/W) of each (W*N divides B with --grad-accum N);\n"
    "the gradients are summed over the ranks (MPI_Allreduce), so the training\n"
    "is that of one process with --batch B. Each rank records its own file:\n"
    "rank 0 --out FILE, the others beside it (run.h5: run.rank00003.h5 for rank\n"
    "3); `resdiag report FILE` merges them. Only rank 0 prints. Faults, to test\n"
    "the report:\n"
    "  --kill-rank R     with --kill-step K: rank R kills itself with SIGKILL in\n"
    "  --kill-step K     step K, after the other ranks have recorded it and before\n"
    "                    it records it itself (the job then ends: mpirun stops it)\n"
    "  --nan-rank R      with --nan-step S: from step S on, rank R's copy of the\n"
    "  --nan-step S      token embedding holds a NaN where its first token reads\n";
#endif

_Noreturn static void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tinygpt: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry 'tinygpt --help'.\n", stderr);
    va_end(ap);
    exit(2);
}

static int parse_int(const char *flag, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die_usage("%s: expected an integer in [%ld, %ld], got '%s'", flag, lo, hi, s);
    return (int)v;
}

static double parse_double(const char *flag, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        die_usage("%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, s);
    return v;
}

/* Index of s in the NULL-terminated list names, or a usage error. */
static int parse_choice(const char *flag, const char *s, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0) return i;
    char list[256] = "";
    for (int i = 0; names[i]; i++) {
        strncat(list, i ? " | " : "", sizeof list - strlen(list) - 1);
        strncat(list, names[i], sizeof list - strlen(list) - 1);
    }
    die_usage("%s: expected %s, got '%s'", flag, list, s);
}

typedef struct options {
    tg_config cfg;
    int steps;
    double lr, weight_decay;
    uint64_t seed;
    int threads;        /* 0: OpenMP's default */
    int log_every;
    const char *out;
    tg_record record;
    int record_every;
    int flush_steps;    /* 0: resdiag's default */
    const char *flush_log;
    int signals;        /* 0 off, 1 raise, 2 stop */
    const char *step_times;
    int overwrite;      /* --overwrite: resdiag_options.overwrite */
    const char *declare; /* --declare: NULL, or the placement name to declare */
    int grad_accum;     /* --grad-accum: micro-batches per step */
    int hook_threads;   /* --hook-threads; -1: the OpenMP threads (1 with --hook-team on) */
    int hook_team;      /* --hook-team: hooks are team calls of the OpenMP threads */
    int file_schema;    /* --file-schema: resdiag_options.file_schema */
    int compression;    /* --compression: resdiag_options.compression */
    int resdiag_log;    /* --resdiag-log: 0 error, 1 info, 2 debug */
    /* tinygpt-mpi's faults: the rank and the step, -1 for none */
    int kill_rank, kill_step, nan_rank, nan_step;
} options;

static void parse_args(options *o, int argc, char **argv)
{
    static const char *const placements[] = { "pre", "post", "sandwich", "deepnorm",
                                              "mix:K", "parallel", "none", "reordered",
                                              "hybrid", NULL };
    static const char *const norms[] = { "layernorm", "rmsnorm", NULL };
    static const char *const onoff[] = { "off", "on", NULL };
    static const char *const inits[] = { "gpt2", "xavier", NULL };
    static const char *const records[] = { "off", "stream", "full", NULL };
    static const char *const sigmodes[] = { "off", "raise", "stop", NULL };
    static const char *const priorities[] = { "error", "info", "debug", NULL };
    const char *placement = "pre";
    tg_config *c = &o->cfg;

    /* getopt_long(3): "--flag value", "--flag=value" or a unique
     * abbreviation; every flag but --overwrite takes a value. Distinct
     * values, or glibc would take an abbreviation of two for the first. */
    static const struct option longs[] = {
        { "help", no_argument, NULL, 'h' },
        { "overwrite", no_argument, NULL, 'w' },
        { "placement", required_argument, NULL, 256 }, { "norm", required_argument, NULL, 257 },
        { "final-norm", required_argument, NULL, 258 }, { "layers", required_argument, NULL, 259 },
        { "d-model", required_argument, NULL, 260 }, { "heads", required_argument, NULL, 261 },
        { "seq", required_argument, NULL, 262 }, { "batch", required_argument, NULL, 263 },
        { "vocab", required_argument, NULL, 264 }, { "steps", required_argument, NULL, 265 },
        { "lr", required_argument, NULL, 266 }, { "seed", required_argument, NULL, 267 },
        { "init", required_argument, NULL, 268 }, { "out", required_argument, NULL, 269 },
        { "record", required_argument, NULL, 270 },
        { "record-every", required_argument, NULL, 271 },
        { "threads", required_argument, NULL, 272 }, { "log-every", required_argument, NULL, 273 },
        { "weight-decay", required_argument, NULL, 274 },
        { "flush-steps", required_argument, NULL, 275 },
        { "flush-log", required_argument, NULL, 276 },
        { "handle-signals", required_argument, NULL, 277 },
        { "step-times", required_argument, NULL, 278 }, { "declare", required_argument, NULL, 279 },
        { "grad-accum", required_argument, NULL, 280 },
        { "hook-threads", required_argument, NULL, 281 },
        { "file-schema", required_argument, NULL, 286 },
        { "compression", required_argument, NULL, 287 },
        { "hook-team", required_argument, NULL, 288 },
        { "resdiag-log", required_argument, NULL, 289 },
#ifdef TINYGPT_MPI
        { "kill-rank", required_argument, NULL, 282 }, { "kill-step", required_argument, NULL, 283 },
        { "nan-rank", required_argument, NULL, 284 }, { "nan-step", required_argument, NULL, 285 },
#endif
        { NULL, 0, NULL, 0 },
    };
    opterr = 0; /* the messages below say what went wrong, in one line */
    for (;;) {
        int at = optind, li = -1;
        int ch = getopt_long(argc, argv, ":h", longs, &li);
        if (ch == -1) break;
        if (ch == 'h') {
            fputs(usage, stdout);
#ifdef TINYGPT_MPI
            fputs(usage_mpi, stdout);
#endif
            exit(0);
        }
        if (ch == 'w') {
            o->overwrite = 1;
            continue;
        }
        if (ch == '?') {
            /* the refused argument is just before optind, unless getopt
             * stopped inside a cluster of short options */
            const char *arg = optind > at ? argv[optind - 1] : "";
            int is_long = strncmp(arg, "--", 2) == 0;
            if (is_long && optopt) /* a value given to --overwrite or --help */
                die_usage("%.*s takes no value", (int)strcspn(arg, "="), arg);
            if (is_long) die_usage("unknown option '%s'", arg);
            die_usage("unknown option '-%c'", optopt ? optopt : '?');
        }
        /* a missing value (the option came last): it is just before optind */
        if (ch == ':') die_usage("%s needs a value", argv[optind - 1]);
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", longs[li].name);
        const char *val = optarg;
#define IS(name) (strcmp(flag, name) == 0)
        if (IS("--placement")) placement = val;
        else if (IS("--norm")) c->norm = (tg_norm)parse_choice(flag, val, norms);
        else if (IS("--final-norm")) c->final_norm = parse_choice(flag, val, onoff);
        else if (IS("--layers")) c->n_layers = parse_int(flag, val, 1, 1024);
        else if (IS("--d-model")) c->d_model = parse_int(flag, val, 1, 16384);
        else if (IS("--heads")) c->n_heads = parse_int(flag, val, 1, 16384);
        else if (IS("--seq")) c->seq_len = parse_int(flag, val, 1, 65536);
        else if (IS("--batch")) c->batch = parse_int(flag, val, 1, 65536);
        else if (IS("--grad-accum")) o->grad_accum = parse_int(flag, val, 1, 65536);
        else if (IS("--kill-rank")) o->kill_rank = parse_int(flag, val, 0, INT_MAX);
        else if (IS("--kill-step")) o->kill_step = parse_int(flag, val, 0, INT_MAX);
        else if (IS("--nan-rank")) o->nan_rank = parse_int(flag, val, 0, INT_MAX);
        else if (IS("--nan-step")) o->nan_step = parse_int(flag, val, 0, INT_MAX);
        else if (IS("--vocab")) c->vocab = parse_int(flag, val, 2, 1 << 20);
        else if (IS("--steps")) o->steps = parse_int(flag, val, 1, INT_MAX);
        else if (IS("--lr")) o->lr = parse_double(flag, val, 0, 10);
        else if (IS("--weight-decay")) o->weight_decay = parse_double(flag, val, 0, 10);
        else if (IS("--seed")) o->seed = (uint64_t)parse_int(flag, val, 0, INT_MAX);
        else if (IS("--init")) c->init = (tg_init)parse_choice(flag, val, inits);
        else if (IS("--out")) {
            if (!*val) die_usage("--out needs a file name");
            o->out = val;
        } else if (IS("--record")) o->record = (tg_record)parse_choice(flag, val, records);
        else if (IS("--record-every")) o->record_every = parse_int(flag, val, 1, INT_MAX);
        else if (IS("--threads")) o->threads = parse_int(flag, val, 1, 4096);
        else if (IS("--hook-threads")) o->hook_threads = parse_int(flag, val, 0, 16);
        else if (IS("--hook-team")) o->hook_team = parse_choice(flag, val, onoff);
        else if (IS("--resdiag-log")) o->resdiag_log = parse_choice(flag, val, priorities);
        else if (IS("--file-schema")) o->file_schema = parse_int(flag, val, 0, 3);
        else if (IS("--compression")) o->compression = parse_int(flag, val, 0, 9);
        else if (IS("--log-every")) o->log_every = parse_int(flag, val, 1, INT_MAX);
        else if (IS("--flush-steps")) o->flush_steps = parse_int(flag, val, 1, 100000);
        else if (IS("--flush-log")) o->flush_log = val;
        else if (IS("--handle-signals")) o->signals = parse_choice(flag, val, sigmodes);
        else if (IS("--declare")) {
            static const char *const declares[] = { "pre", "post", "sandwich", "deepnorm",
                                                    "parallel", "none", "reordered",
                                                    "per_sublayer", "undeclared", NULL };
            o->declare = declares[parse_choice(flag, val, declares)];
        } else if (IS("--step-times")) {
            if (!*val) die_usage("--step-times needs a file name");
            o->step_times = val;
        }
#undef IS
    }
    if (optind < argc) die_usage("unexpected argument '%s'", argv[optind]);

    /* mix:K is the only placement with an argument. */
    if (strncmp(placement, "mix:", 4) == 0) {
        c->placement = TG_MIX;
        c->mix_layers = parse_int("--placement mix:K", placement + 4, 1, 1023);
    } else {
        int i = parse_choice("--placement", placement, placements);
        if (i == TG_MIX) die_usage("--placement mix:K needs a number K of post-norm layers");
        c->placement = (tg_placement)i;
    }
    const char *why = tg_config_check(c);
    if (why) die_usage("%s", why);
    if (c->batch % o->grad_accum != 0)
        die_usage("--grad-accum %d must divide --batch %d", o->grad_accum, c->batch);
    if ((o->kill_rank < 0) != (o->kill_step < 0))
        die_usage("--kill-rank and --kill-step go together");
    if ((o->nan_rank < 0) != (o->nan_step < 0))
        die_usage("--nan-rank and --nan-step go together");
}

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

int main(int argc, char **argv)
{
    options o = {
        .cfg = { .n_layers = 4, .d_model = 128, .n_heads = 4, .seq_len = 64, .batch = 8,
                 .vocab = 64, .placement = TG_PRE, .norm = TG_LAYERNORM, .final_norm = 1,
                 .init = TG_INIT_GPT2 },
        .steps = 200, .lr = 1e-3, .weight_decay = 0, .seed = 1, .threads = 0,
        .log_every = 10, .out = "run.h5", .record = TG_RECORD_FULL, .record_every = 1,
        .grad_accum = 1, .hook_threads = -1, .compression = 1, .kill_rank = -1, .kill_step = -1, .nan_rank = -1,
        .nan_step = -1,
    };
    tg_dist dist;
    tg_dist_init(&dist, &argc, &argv);
    parse_args(&o, argc, argv);
    const tg_config *c = &o.cfg;
    const int ranks = dist.world;
    if (c->batch % (ranks * o.grad_accum) != 0)
        die_usage("%d ranks x --grad-accum %d must divide --batch %d", ranks, o.grad_accum,
                  c->batch);
    /* The job prints once: rank 0's lines (the others' are the same). */
    if (dist.rank > 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "tinygpt: rank %d: cannot quiet stdout\n", dist.rank);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);  /* progress lines appear as they happen */

    int threads = 1;
#ifdef _OPENMP
    if (o.threads) omp_set_num_threads(o.threads);
    threads = omp_get_max_threads();
#else
    if (o.threads > 1)
        fprintf(stderr, "tinygpt: built without OpenMP, --threads %d runs on 1 thread\n",
                o.threads);
#endif

    /* The model holds one micro-batch of this rank's share of the batch;
     * a step runs grad_accum of them. */
    const int accum = o.grad_accum;
    tg_config micro = *c;
    micro.batch = c->batch / (ranks * accum);
    tg_model model;
    if (tg_model_create(&model, &micro) != 0) {
        fprintf(stderr, "tinygpt: out of memory for the model\n");
        return 1;
    }
    /* Distinct streams for parameters and data, both from --seed. */
    tg_model_init_params(&model, o.seed ^ 0x9a3a5e7b1d2c4f60ull);
    tg_data data;
    if (tg_data_create(&data, c->vocab, o.seed) != 0) {
        fprintf(stderr, "tinygpt: out of memory for the data\n");
        tg_model_free(&model);
        return 1;
    }

    char mix[32] = "";
    if (c->placement == TG_MIX) snprintf(mix, sizeof mix, ":%d", c->mix_layers);
    const char *norm = c->norm == TG_LAYERNORM ? "layernorm" : "rmsnorm";
    const char *init = c->init == TG_INIT_GPT2 ? "gpt2" : "xavier";
    printf("tinygpt: %d layers, d_model %d, %d heads, seq %d, batch %d, vocab %d; "
           "%s%s, %s, final norm %s, %s init; %.3fM parameters\n",
           c->n_layers, c->d_model, c->n_heads, c->seq_len, c->batch, c->vocab,
           tg_placement_name(c->placement), mix, norm, c->final_norm ? "on" : "off", init,
           (double)model.n_params / 1e6);
    if (ranks > 1)
        printf("data parallel: %d ranks of %d sequences per step\n", ranks, c->batch / ranks);
    if (accum > 1)
        printf("gradient accumulation: %d micro-batches of %d sequences per step\n", accum,
               micro.batch);
    printf("data: walks on a sparse Markov chain (%d successors per token); "
           "uniform guess %.4f, best possible %.4f nats/token\n",
           TG_DATA_SUCCESSORS, log((double)c->vocab), tg_data_loss_floor(&data, c->seq_len));
    /* the hooks run between the matmuls, on as many cores as they use */
    const int hook_threads = o.hook_threads >= 0 ? o.hook_threads
                             : o.hook_team ? 1 : threads < 16 ? threads : 16;
    printf("threads: %d, hook threads: %d%s\n", threads, hook_threads,
           o.hook_team ? ", hook team: on" : "");

    /* The run file: the configuration goes in as metadata, as text. */
    char v[20][48];
    snprintf(v[0], sizeof v[0], "%s%s", tg_placement_name(c->placement), mix);
    snprintf(v[1], sizeof v[1], "%s", norm);
    snprintf(v[2], sizeof v[2], "%s", c->final_norm ? "on" : "off");
    snprintf(v[3], sizeof v[3], "%s", init);
    snprintf(v[4], sizeof v[4], "%d", c->n_layers);
    snprintf(v[5], sizeof v[5], "%d", c->d_model);
    snprintf(v[6], sizeof v[6], "%d", c->n_heads);
    snprintf(v[7], sizeof v[7], "%d", c->seq_len);
    snprintf(v[8], sizeof v[8], "%d", c->batch);
    snprintf(v[9], sizeof v[9], "%d", c->vocab);
    snprintf(v[10], sizeof v[10], "%d", o.steps);
    snprintf(v[11], sizeof v[11], "%.17g", o.lr);
    snprintf(v[12], sizeof v[12], "%.17g", o.weight_decay);
    snprintf(v[13], sizeof v[13], "%llu", (unsigned long long)o.seed);
    snprintf(v[14], sizeof v[14], "%d", threads);
    snprintf(v[15], sizeof v[15], "%s", o.record == TG_RECORD_FULL ? "full" : "stream");
    snprintf(v[16], sizeof v[16], "%d", o.record_every);
    snprintf(v[17], sizeof v[17], "%s", sizeof(real) == 8 ? "f64" : "f32");
    snprintf(v[18], sizeof v[18], "%d", hook_threads);
    snprintf(v[19], sizeof v[19], "%.17g", tg_deepnorm_alpha(c->n_layers));
    const char *meta[] = {
        "tinygpt.placement", v[0], "tinygpt.norm", v[1], "tinygpt.final_norm", v[2],
        "tinygpt.init", v[3], "tinygpt.layers", v[4], "tinygpt.d_model", v[5],
        "tinygpt.heads", v[6], "tinygpt.seq", v[7], "tinygpt.batch", v[8],
        "tinygpt.vocab", v[9], "tinygpt.steps", v[10], "tinygpt.lr", v[11],
        "tinygpt.weight_decay", v[12], "tinygpt.seed", v[13], "tinygpt.threads", v[14],
        "tinygpt.record", v[15], "tinygpt.record_every", v[16], "tinygpt.dtype", v[17],
        "tinygpt.hook_threads", v[18], "tinygpt.deepnorm_alpha", v[19],
    };
    int n_meta = (int)(sizeof meta / sizeof *meta) / 2;
    if (c->placement != TG_DEEPNORM) n_meta--;  /* alpha is meaningful for deepnorm only */
    /* and the micro-batches, where there are any */
    const char *meta_all[2 * (sizeof meta / sizeof *meta / 2 + 2)];
    memcpy(meta_all, meta, (size_t)n_meta * 2 * sizeof *meta);
    if (o.hook_team) {
        meta_all[2 * n_meta] = "tinygpt.hook_team";
        meta_all[2 * n_meta + 1] = "on";
        n_meta++;
    }
    char accum_text[16];
    if (accum > 1) {
        snprintf(accum_text, sizeof accum_text, "%d", accum);
        meta_all[2 * n_meta] = "tinygpt.grad_accum";
        meta_all[2 * n_meta + 1] = accum_text;
        n_meta++;
    }
    char description[512];
    snprintf(description, sizeof description,
             "tinygpt (examples/tinygpt): GPT-style decoder, %d layers, d_model %d, %d heads, "
             "%s%s placement, %s, final norm %s, %s init, trained on a synthetic Markov chain",
             c->n_layers, c->d_model, c->n_heads, tg_placement_name(c->placement), mix, norm,
             c->final_norm ? "on" : "off", init);

    /* before the run file, which an early exit would leave unclosed */
    FILE *step_times = NULL;
    if (o.step_times) {
        step_times = fopen(o.step_times, "w");
        if (!step_times) {
            fprintf(stderr, "tinygpt: cannot write %s: %s\n", o.step_times, strerror(errno));
            tg_data_free(&data);
            tg_model_free(&model);
            return 1;
        }
        fputs("# step recorded cpu_s wall_s resdiag_s flushed resdiag_cpu_s\n", step_times);
    }

    char err[512];
    if (o.record != TG_RECORD_OFF) {
        tg_instr_settings s = { o.out, o.record, o.record_every, n_meta, meta_all, description,
                                o.flush_steps, o.flush_log, o.signals, o.step_times != NULL,
                                o.overwrite, o.declare, hook_threads, dist.rank,
                                ranks > 1 ? ranks : 0, o.file_schema, o.compression,
                                o.hook_team, o.resdiag_log };
        model.hooks = tg_instr_open(c, &s, err, sizeof err);
        if (!model.hooks) {
            /* Diagnostics are never the reason a training run does not happen. */
            fprintf(stderr, "tinygpt: %s; training without recording\n", err);
            printf("recording: off (cannot create %s)\n", o.out);
        } else {
            printf("recording: %s, every %d steps, to %s\n", v[15], o.record_every, o.out);
        }
    } else {
        printf("recording: off\n");
    }

    tg_adamw opt = { .lr = o.lr, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                     .weight_decay = o.weight_decay, .t = 0 };
    real *adam_m = calloc(model.n_params, sizeof *adam_m);
    real *adam_v = calloc(model.n_params, sizeof *adam_v);
    size_t N = (size_t)c->batch * c->seq_len;
    int *inputs = malloc(N * sizeof *inputs), *targets = malloc(N * sizeof *targets);
    if (!adam_m || !adam_v || !inputs || !targets) {
        fprintf(stderr, "tinygpt: out of memory for the optimizer\n");
        return 1;
    }

    int rc = 0, stopped = 0;
    double tail = 0;  /* mean loss of the last (up to) 10 steps */
    int tail_n = 0;
    double t0 = now();
    clock_t cpu0 = clock();  /* CPU time of all threads: tells a busy machine from a slow run */
    for (int step = 0; step < o.steps; step++) {
        double step_cpu = step_times ? cpu_now() : 0, step_wall = step_times ? now() : 0;
        tg_data_batch(&data, inputs, targets, c->batch, c->seq_len);
        /* Recorded steps cover forward and backward, and end before the
         * update: step 0 is the model at initialization. */
        tg_instr_step_begin(model.hooks, step);
        double loss = 0;
        /* Micro-batch k is sequences [k*B/N, (k+1)*B/N) of the batch. Each
         * backward computes the gradient of the whole batch's mean loss
         * restricted to its tokens (1/N of its own mean's), so its hooks
         * see the batch's gradients row for row; the parameter gradients
         * add up, and their hooks run in the last backward, on the sums. */
        /* With ranks, the same holds for rank r's share, sequences
         * [r*B/W, (r+1)*B/W): its gradients sum over the ranks to the
         * batch's, and are recorded once summed. */
        const size_t micro_tokens = (size_t)micro.batch * c->seq_len;
        const size_t share = (size_t)dist.rank * (N / (size_t)ranks);
        if (step >= o.nan_step && dist.rank == o.nan_rank)
            model.w.wte[(size_t)inputs[share] * (size_t)c->d_model] = NAN;
        model.loss_tokens = accum > 1 || ranks > 1 ? (int)N : 0;
        for (int k = 0; k < accum; k++) {
            model.accumulate = k > 0;
            model.param_hooks = ranks == 1 && k == accum - 1;
            loss += tg_forward(&model, inputs + share + (size_t)k * micro_tokens,
                               targets + share + (size_t)k * micro_tokens);
            tg_backward(&model);
        }
        if (ranks > 1) {
            /* the batch's mean: each micro-batch's mean weighs its tokens */
            loss = tg_dist_sum_double(&dist, loss * (double)micro_tokens) / (double)N;
            tg_dist_sum(&dist, model.grads, model.n_params);
            tg_param_grad_hooks(&model);
        } else {
            loss /= accum;
        }
        tg_instr_loss(model.hooks, loss);
        /* --kill-step: the others write step K before rank R dies */
        int dies = step == o.kill_step && dist.rank == o.kill_rank;
        if (!dies) stopped = tg_instr_step_end(model.hooks);
        if (step == o.kill_step) {
            tg_dist_barrier(&dist);
            if (dies) raise(SIGKILL);
        }

        opt.t++;
        for (int t = 0; t < model.n_tensors; t++) {
            const tg_param *p = &model.tensors[t];
            size_t n = (size_t)p->rows * p->cols;
            adamw_update(model.params + p->offset, adam_m + p->offset, adam_v + p->offset,
                         model.grads + p->offset, n, &opt, opt.t, p->kind == TG_KIND_MATRIX);
        }

        if (step_times) {
            /* Read the clocks first: writing the line is no part of the step. */
            step_cpu = cpu_now() - step_cpu;
            step_wall = now() - step_wall;
            int recorded, flushed;
            double in_resdiag, resdiag_cpu;
            tg_instr_last_step(model.hooks, &recorded, &in_resdiag, &flushed, &resdiag_cpu);
            fprintf(step_times, "%d %d %.9f %.9f %.9f %d %.9f\n", step, recorded, step_cpu,
                    step_wall, in_resdiag, flushed, resdiag_cpu);
        }

        if (step >= o.steps - 10) {
            tail += loss;
            tail_n++;
        }
        if (step % o.log_every == 0 || step == o.steps - 1)
            printf("step %5d loss %.6f\n", step, loss);
        if (!isfinite(loss)) {
            fprintf(stderr, "tinygpt: the loss is not finite at step %d; stopping "
                            "(the run file keeps what was recorded)\n", step);
            rc = 1;
            break;
        }
        if (stopped) {
            fprintf(stderr, "tinygpt: stopped by a signal after step %d; the run file is "
                            "closed\n", step);
            printf("final loss %.6f (step %d, stopped by a signal)\n", loss, step);
            rc = 130;
            break;
        }
    }
    double elapsed = now() - t0;
    double cpu = (double)(clock() - cpu0) / CLOCKS_PER_SEC;

    double close_cpu = cpu_now(), close_wall = now();
    int closed = tg_instr_close(model.hooks, err, sizeof err);
    if (closed != 0)
        fprintf(stderr, "tinygpt: %s\n", err);
    if (closed < 0 && !rc)
        rc = 1;
    model.hooks = NULL;
    if (step_times) {
        fprintf(step_times, "# close %.9f %.9f\n", cpu_now() - close_cpu, now() - close_wall);
        if (fclose(step_times) != 0) {
            fprintf(stderr, "tinygpt: cannot write %s\n", o.step_times);
            if (!rc) rc = 1;
        }
    }
    /* A failed recording does not hide the training's own result. */
    if (!stopped && tail_n > 0 && isfinite(tail)) {
        printf("final loss %.6f (mean of the last %d steps)\n", tail / tail_n, tail_n);
        printf("time: %.3f s for %d steps (CPU %.3f s), %.0f tokens/s\n", elapsed, o.steps,
               cpu, (double)N * o.steps / elapsed);
    }
    free(adam_m);
    free(adam_v);
    free(inputs);
    free(targets);
    tg_data_free(&data);
    tg_model_free(&model);
    tg_dist_finalize(&dist);
    return rc;
}
