/*
 * args.c - tinygpt's command line: the --help text, the defaults, reading
 * each option's value (getopt_long) and the checks between the options.
 * Every bad command line ends in tg_die_usage: one line on stderr, exit 2.
 */
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

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
    "  --lr X            AdamW's peak learning rate [default=0.001]\n"
    "  --warmup N        linear warm-up: step s (from 0) trains at\n"
    "                    X * min(1, (s + 1) / N), then X; 0 = X from the start.\n"
    "                    The rate of each step is the run's metric \"lr\"\n"
    "                    [default=0]\n"
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
    "  --flush-seconds S ... or at the first step end S seconds after the last\n"
    "                    write; 0: no time limit [default=1]\n"
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
    "  --stop-on LIST    stop (exit 3) when a resdiag alarm fires: nonfinite, r>B,\n"
    "                    growth>B, grad>B, comma-separated (doc/INSTRUMENTING.md)\n"
    "  --nan-step S      from step S on, the token embedding holds a NaN where\n"
    "                    the first token reads (a fault, to test the report)\n"
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
    "  --nan-rank R      with --nan-step S: the NaN of --nan-step in rank R's copy\n"
    "                    of the embedding only [default=0]\n";
#endif

_Noreturn void tg_die_usage(const char *fmt, ...)
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
        tg_die_usage("%s: expected an integer in [%ld, %ld], got '%s'", flag, lo, hi, s);
    return (int)v;
}

static double parse_double(const char *flag, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        tg_die_usage("%s: expected a number in [%g, %g], got '%s'", flag, lo, hi, s);
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
    tg_die_usage("%s: expected %s, got '%s'", flag, list, s);
}

static const char *const placements[] = { "pre", "post", "sandwich", "deepnorm", "mix:K",
                                          "parallel", "none", "reordered", "hybrid", NULL };
static const char *const norms[] = { "layernorm", "rmsnorm", NULL };
static const char *const onoff[] = { "off", "on", NULL };
static const char *const inits[] = { "gpt2", "xavier", NULL };
static const char *const records[] = { "off", "stream", "full", NULL };
static const char *const sigmodes[] = { "off", "raise", "stop", NULL };
static const char *const priorities[] = { "error", "info", "debug", NULL };

/* getopt_long(3): "--flag value", "--flag=value" or a unique
 * abbreviation; every flag but --overwrite takes a value. Distinct
 * values, or glibc would take an abbreviation of two for the first. */
static const struct option long_options[] = {
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
    { "flush-seconds", required_argument, NULL, 295 },
    { "handle-signals", required_argument, NULL, 277 },
    { "step-times", required_argument, NULL, 278 }, { "declare", required_argument, NULL, 279 },
    { "grad-accum", required_argument, NULL, 280 },
    { "hook-threads", required_argument, NULL, 281 },
    { "file-schema", required_argument, NULL, 286 },
    { "compression", required_argument, NULL, 287 },
    { "hook-team", required_argument, NULL, 288 },
    { "resdiag-log", required_argument, NULL, 289 },
    { "warmup", required_argument, NULL, 290 },
#ifdef TINYGPT_MPI
    { "kill-rank", required_argument, NULL, 282 }, { "kill-step", required_argument, NULL, 283 },
    { "nan-rank", required_argument, NULL, 284 },
#endif
    { "nan-step", required_argument, NULL, 285 }, { "stop-on", required_argument, NULL, 291 },
    { NULL, 0, NULL, 0 },
};

static void set_defaults(tg_options *o)
{
    *o = (tg_options){
        .cfg = { .n_layers = 4, .d_model = 128, .n_heads = 4, .seq_len = 64, .batch = 8,
                 .vocab = 64, .placement = TG_PRE, .norm = TG_LAYERNORM, .final_norm = 1,
                 .init = TG_INIT_GPT2 },
        .steps = 200, .lr = 1e-3, .weight_decay = 0, .seed = 1, .threads = 0,
        .log_every = 10, .out = "run.h5", .record = TG_RECORD_FULL, .record_every = 1,
        .grad_accum = 1, .hook_threads = -1, .compression = 1, .kill_rank = -1, .kill_step = -1,
        .nan_rank = -1, .nan_step = -1, .flush_seconds = -1,
    };
}

/* What getopt_long refused ('?'): an unknown option, or a value given to
 * one that takes none. `at` is optind before the call. */
_Noreturn static void refuse_option(char **argv, int at)
{
    /* the refused argument is just before optind, unless getopt
     * stopped inside a cluster of short options */
    const char *arg = optind > at ? argv[optind - 1] : "";
    int is_long = strncmp(arg, "--", 2) == 0;
    if (is_long && optopt) /* a value given to --overwrite or --help */
        tg_die_usage("%.*s takes no value", (int)strcspn(arg, "="), arg);
    if (is_long) tg_die_usage("unknown option '%s'", arg);
    tg_die_usage("unknown option '-%c'", optopt ? optopt : '?');
}

/* One option with a value: flag is its full name ("--layers"), val the
 * value; --placement is kept as text until every option is read. */
static void set_option(tg_options *o, const char **placement, const char *flag,
                       const char *val)
{
    tg_config *c = &o->cfg;
#define IS(name) (strcmp(flag, name) == 0)
    if (IS("--placement")) *placement = val;
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
    else if (IS("--stop-on")) {
        resdiag_options ao;
        const char *why = tg_parse_stop_on(val, &ao);
        if (why) tg_die_usage("--stop-on %s", why);
        o->stop_on = val;
    }
    else if (IS("--vocab")) c->vocab = parse_int(flag, val, 2, 1 << 20);
    else if (IS("--steps")) o->steps = parse_int(flag, val, 1, INT_MAX);
    else if (IS("--lr")) o->lr = parse_double(flag, val, 0, 10);
    else if (IS("--warmup")) o->warmup = parse_int(flag, val, 0, INT_MAX);
    else if (IS("--weight-decay")) o->weight_decay = parse_double(flag, val, 0, 10);
    else if (IS("--seed")) o->seed = (uint64_t)parse_int(flag, val, 0, INT_MAX);
    else if (IS("--init")) c->init = (tg_init)parse_choice(flag, val, inits);
    else if (IS("--out")) {
        if (!*val) tg_die_usage("--out needs a file name");
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
    else if (IS("--flush-seconds")) o->flush_seconds = parse_double(flag, val, 0, 86400);
    else if (IS("--handle-signals")) o->signals = parse_choice(flag, val, sigmodes);
    else if (IS("--declare")) {
        static const char *const declares[] = { "pre", "post", "sandwich", "deepnorm",
                                                "parallel", "none", "reordered",
                                                "per_sublayer", "undeclared", NULL };
        o->declare = declares[parse_choice(flag, val, declares)];
    } else if (IS("--step-times")) {
        if (!*val) tg_die_usage("--step-times needs a file name");
        o->step_times = val;
    }
#undef IS
}

/* mix:K is the only placement with an argument. */
static void set_placement(tg_config *c, const char *placement)
{
    if (strncmp(placement, "mix:", 4) == 0) {
        c->placement = TG_MIX;
        c->mix_layers = parse_int("--placement mix:K", placement + 4, 1, 1023);
    } else {
        int i = parse_choice("--placement", placement, placements);
        if (i == TG_MIX) tg_die_usage("--placement mix:K needs a number K of post-norm layers");
        c->placement = (tg_placement)i;
    }
}

/* The checks that take two options at once. */
static void check_options(const tg_options *o)
{
    const tg_config *c = &o->cfg;
    const char *why = tg_config_check(c);
    if (why) tg_die_usage("%s", why);
    if (c->batch % o->grad_accum != 0)
        tg_die_usage("--grad-accum %d must divide --batch %d", o->grad_accum, c->batch);
    if ((o->kill_rank < 0) != (o->kill_step < 0))
        tg_die_usage("--kill-rank and --kill-step go together");
    if (o->nan_rank >= 0 && o->nan_step < 0)
        tg_die_usage("--nan-rank needs --nan-step");
}

void tg_parse_args(tg_options *o, int argc, char **argv)
{
    const char *placement = "pre";
    set_defaults(o);
    opterr = 0; /* the messages below say what went wrong, in one line */
    for (;;) {
        int at = optind, li = -1;
        int ch = getopt_long(argc, argv, ":h", long_options, &li);
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
        if (ch == '?') refuse_option(argv, at);
        /* a missing value (the option came last): it is just before optind */
        if (ch == ':') tg_die_usage("%s needs a value", argv[optind - 1]);
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", long_options[li].name);
        set_option(o, &placement, flag, optarg);
    }
    if (optind < argc) tg_die_usage("unexpected argument '%s'", argv[optind]);
    set_placement(&o->cfg, placement);
    check_options(o);
    if (o->nan_step >= 0 && o->nan_rank < 0) o->nan_rank = 0; /* one process: rank 0 */
}
