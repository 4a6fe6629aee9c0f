/*
 * resdiag.c - the command-line tool: `resdiag <command> [args]`.
 *
 * Exit codes: 0 success, 1 a check did not hold, 2 bad usage or unusable
 * input (one line on stderr says why).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>
#include <resdiag.h>

#include "escape.h"
#include "h5_reader.h"
#include "html_report.h"
#include "plot.h"

#define EXIT_BAD 2

typedef int (*cmd_fn)(int argc, char **argv);

typedef struct command {
    const char *name;
    cmd_fn fn;
    const char *summary;
    const char *usage;
} command;

static int cmd_dump(int argc, char **argv);
static int cmd_report(int argc, char **argv);
static int cmd_check(int argc, char **argv);
static int cmd_diff(int argc, char **argv);
static int cmd_plot(int argc, char **argv);
static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const command commands[] = {
    { "report", cmd_report, "what the run says: placement verdict, depth laws, gradients",
      "usage: resdiag report [--step N | --last] [--json | --html FILE] [--max-growth X]\n"
      "                      RUN.h5\n"
      "\n"
      "Tells from the recorded data (never from the declaration) where the norms\n"
      "sit: pre-norm, post-norm, sandwich, deepnorm (with alpha), parallel, mixed\n"
      "(which layers), no norm, inconsistent or cannot tell; whether there is a\n"
      "final norm; the evidence (sketch relations between the sites, the\n"
      "normalization signature, the call order) with the trainer's file:line.\n"
      "Then the stream per layer with the fit ||x_k||^2 = a + b k and the log-log\n"
      "slope, the relative updates r_k per sublayer with fits, the gradients at\n"
      "the first recorded backward beside Xiong et al.'s prediction, the first\n"
      "non-finite value over all steps, and warnings.\n"
      "\n"
      "  --step N        analyse the recorded step with the trainer's number N\n"
      "                  (default: the first recorded step, initialization)\n"
      "  --last          analyse the last recorded step\n"
      "  --json          the same as JSON (keys: doc/REPORT-JSON.md)\n"
      "  --html FILE     the same as one self-contained HTML page with figures (inline\n"
      "                  SVG, no script, no network) written to FILE ('-' = stdout)\n"
      "  --max-growth X  warn when the stream grows more than X over depth [default=10]\n"
      "\n"
      "A run whose data contradict the declared placement gets a WARNING line at\n"
      "the top (a \"declared_contradicted\" key in JSON, a warning-coloured card in\n"
      "HTML) and still exits 0: the gate is `resdiag check --expect declared`.\n"
      "\n"
      "Exit 0 with a report, 2 with one line on stderr for unusable input.\n" },
    { "check", cmd_check, "exit 0/1/2: does the run have the expected placement?",
      "usage: resdiag check --expect P [--final-norm] [--max-growth X]\n"
      "                     [--step N | --last] RUN.h5\n"
      "\n"
      "P is pre-norm | post-norm | sandwich | deepnorm | parallel | mixed | none\n"
      "(pre and post are accepted too), or declared: the placement the trainer\n"
      "declared in the run file (with mixed, also its post-norm layers). Decides\n"
      "from the data as `resdiag report` does and prints one line saying why.\n"
      "`--expect declared` is the CI gate for a declaration: `resdiag report`\n"
      "exits 0 even when it warns that the data contradict it.\n"
      "\n"
      "  --final-norm    also require a final norm before the head\n"
      "  --max-growth X  also require the stream to grow at most X over depth\n"
      "\n"
      "Exit 0 it holds, 1 it does not, 2 cannot tell (e.g. stream-only evidence\n"
      "that does not separate the placements; with --expect declared, a run that\n"
      "declares nothing) or unusable input.\n" },
    { "diff", cmd_diff, "two runs side by side, the differences that matter first",
      "usage: resdiag diff [--step N | --last] [--html FILE] A.h5 B.h5\n"
      "\n"
      "Analyses both runs (as resdiag report does, at the first recorded step by\n"
      "default) and prints the differences that matter first - placement, final\n"
      "norm, stream growth, then the layers whose stream norm, relative update or\n"
      "first parameter gradient (mlp.w2 if recorded) differ most - then both runs\n"
      "per layer side by side. Made for controlled comparisons: pre- against\n"
      "post-norm on the same data and seed.\n"
      "\n"
      "  --step N   the recorded step with the trainer's number N in both runs\n"
      "  --last     the last recorded step of each run\n"
      "  --html FILE  also write an HTML page with both runs overlaid on the same\n"
      "             axes to FILE ('-' = stdout instead of the text)\n"
      "\n"
      "Exit 0 with the comparison, 2 with one line on stderr for unusable input.\n" },
    { "plot", cmd_plot, "one figure of a run as SVG (growth, updates, gradients)",
      "usage: resdiag plot --what growth|updates|gradients -o FILE.svg\n"
      "                    [--step N | --last] RUN.h5\n"
      "\n"
      "Draws one figure of the analysis (as resdiag report computes it) as a\n"
      "standalone SVG file, to paste into a paper or a pull request:\n"
      "\n"
      "  growth     the stream norm ||x_k|| over depth k with the fit\n"
      "             ||x_k||^2 = a + b k and the sqrt(d) level of a post-norm stream\n"
      "  updates    the relative updates r_k per sublayer on log-log axes with the\n"
      "             fitted power laws and the 1/sqrt(k) reference slope\n"
      "  gradients  gradient norms per layer (the first parameter, mlp.w2 if\n"
      "             recorded; the stream; the head) at the first recorded backward,\n"
      "             with the pre-norm shape 1/||x_k|| of Xiong et al.\n"
      "\n"
      "  --what W    the figure (required)\n"
      "  -o FILE     where to write it ('-' = stdout) (required)\n"
      "  --step N    analyse the recorded step with the trainer's number N\n"
      "  --last      analyse the last recorded step\n"
      "\n"
      "Exit 0 with the figure written, 2 with one line on stderr for unusable input\n"
      "(also when the run holds no data for the figure, e.g. no gradients).\n" },
    { "dump", cmd_dump, "print what a run file holds, step by step",
      "usage: resdiag dump [--step N | --all] RUN.h5\n"
      "\n"
      "Prints the run's model description and provenance, then for the first\n"
      "recorded step (or step N, or --all steps) a table of every observed site:\n"
      "tokens, Frobenius norm, per-token norm (mean, std), per-token RMS and mean,\n"
      "max |value| and its column, NaN/Inf counts, call order and the trainer's\n"
      "file:line; then the update ratios r = ||dx||/||x|| and parameter gradients.\n" },
    { "help", cmd_help, "show help for a command", "usage: resdiag help [COMMAND]\n" },
    { "version", cmd_version, "print the version", "usage: resdiag version\n" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* The library's messages: keep the first one since last_msg was emptied,
 * to print as the tool's one line. The first says what went wrong (e.g.
 * which dataset cannot be read); the ones after it only say who gave up. */
static char last_msg[1024];
static void keep_message(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    if (!last_msg[0])
        snprintf(last_msg, sizeof last_msg, "%s", msg);
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_overview(FILE *out)
{
    fprintf(out, "usage: resdiag <command> [args]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'resdiag help COMMAND' or 'resdiag COMMAND --help' for more.\n");
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        print_overview(stdout);
        return 0;
    }
    const command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "resdiag: no command '%s'\n", argv[1]);
        return EXIT_BAD;
    }
    fputs(c->usage, stdout);
    return 0;
}

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("resdiag %s\n", resdiag_version_string());
    return 0;
}

/* ----------------------------------------------------------------- dump */

static int parse_int64(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static void print_value(double v, int width)
{
    if (isnan(v))
        printf(" %*s", width, "-");
    else
        printf(" %*.*g", width, width > 9 ? 6 : 5, v);
}

/* dump prints the run file's strings (names, description, metadata, call
 * sites, provenance) through the text escaper (escape.h): a file cannot
 * write lines or terminal controls of its own. print_site_row gives 1 with
 * a row printed, 0 for a site not observed, -1 when it cannot be read
 * (logged). */
static int print_site_row(rd_esc_ring *esc, const resdiag_reader *rd, int64_t si,
                          resdiag_direction dir, int layer, int sub, resdiag_site site,
                          const char *label)
{
    double f[RESDIAG_N_FIELDS];
    int observed = 0;
    if (resdiag_reader_site(rd, si, dir, layer, sub, site, f, &observed) != RESDIAG_OK)
        return -1;
    if (!observed)
        return 0;
    printf("  %-22s %-14s", rd_esc_text(esc, label), resdiag_site_name(site));
    printf(" %7.0f", f[RESDIAG_FIELD_ROWS]);
    print_value(f[RESDIAG_FIELD_FROB], 11);
    print_value(f[RESDIAG_FIELD_TOK_NORM_MEAN], 11);
    print_value(f[RESDIAG_FIELD_TOK_NORM_STD], 10);
    print_value(f[RESDIAG_FIELD_TOK_RMS_MEAN], 10);
    print_value(f[RESDIAG_FIELD_TOK_MEAN_MEAN], 10);
    print_value(f[RESDIAG_FIELD_ABSMAX], 10);
    printf(" %5.0f", isnan(f[RESDIAG_FIELD_ABSMAX_COL]) ? -1 : f[RESDIAG_FIELD_ABSMAX_COL]);
    printf(" %5.0f %5.0f %4.0f  %s\n", f[RESDIAG_FIELD_NAN_COUNT], f[RESDIAG_FIELD_INF_COUNT],
           f[RESDIAG_FIELD_CALL_SEQ],
           rd_esc_text(esc, resdiag_reader_callsite(rd, dir, layer, sub, site)));
    return 1;
}

/* 0, or -1 at the first value that cannot be read (logged). stored 0: no
 * table stores anything of the step (only the headers are printed). */
static int dump_step(rd_esc_ring *esc, const resdiag_reader *rd, int64_t si, int64_t step,
                     int stored)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    printf("\nstep %lld (record %lld of %lld)\n", (long long)step, (long long)si + 1,
           (long long)in->n_steps);
    printf("  %-22s %-14s %7s %11s %11s %10s %10s %10s %10s %5s %5s %5s %4s  %s\n", "where",
           "site", "tokens", "||x||_F", "tok_norm", "tok_sd", "tok_rms", "tok_mean", "absmax",
           "col", "nan", "inf", "seq", "call site");
    if (!stored)
        return 0;
    for (int dir = 0; dir < 2; dir++) {
        const char *dname = dir == RESDIAG_FORWARD ? "fwd" : "grad";
        char label[96];
        for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++) {
            snprintf(label, sizeof label, "%s model", dname);
            if (print_site_row(esc, rd, si, (resdiag_direction)dir, 0, 0,
                               (resdiag_site)(RESDIAG_EMBED_OUT + m), label) < 0)
                return -1;
        }
        for (int l = 0; l < in->n_layers; l++)
            for (int s = 0; s < in->n_sublayers; s++)
                for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                    snprintf(label, sizeof label, "%s L%d %s", dname, l, in->sublayer_names[s]);
                    if (print_site_row(esc, rd, si, (resdiag_direction)dir, l, s,
                                       (resdiag_site)site, label) < 0)
                        return -1;
                }
    }
    int header = 0;
    for (int l = 0; l < in->n_layers; l++)
        for (int s = 0; s < in->n_sublayers; s++) {
            double u[RESDIAG_N_UPDATE_FIELDS];
            if (resdiag_reader_update(rd, si, l, s, u) != RESDIAG_OK)
                return -1;
            if (isnan(u[0]))
                continue;
            if (!header++)
                printf("  update ratio r = ||dx||/||x||:  %-16s %12s %14s\n", "where",
                       "frobenius", "mean per token");
            printf("  %32s  L%-3d %-11s %12.6g %14.6g\n", "", l,
                   rd_esc_text(esc, in->sublayer_names[s]), u[0], u[1]);
        }
    header = 0;
    for (int l = -1; l < in->n_layers; l++) {
        int np = l < 0 ? in->n_model_params : in->n_layer_params;
        const char *const *names = l < 0 ? in->model_param_names : in->layer_param_names;
        for (int p = 0; p < np; p++) {
            double f[RESDIAG_N_FIELDS];
            int observed = 0;
            if (resdiag_reader_param(rd, si, l < 0 ? RESDIAG_MODEL_LEVEL : l, names[p], f,
                                     &observed) != RESDIAG_OK)
                return -1;
            if (!observed)
                continue;
            if (!header++)
                printf("  parameter gradients:  %-20s %12s %12s %6s %6s\n", "where", "||g||_F",
                       "absmax", "nan", "inf");
            char where[96];
            if (l < 0)
                snprintf(where, sizeof where, "model %s", names[p]);
            else
                snprintf(where, sizeof where, "L%d %s", l, names[p]);
            printf("  %22s %-20s %12.6g %12.6g %6.0f %6.0f\n", "", rd_esc_text(esc, where),
                   f[RESDIAG_FIELD_FROB], f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_NAN_COUNT],
                   f[RESDIAG_FIELD_INF_COUNT]);
        }
    }
    return 0;
}

static void dump_header(rd_esc_ring *esc, const char *path, const resdiag_run_info *in,
                        const int64_t *steps)
{
    printf("%s: resdiag run file, schema %d, written by resdiag %s with HDF5 %s\n",
           rd_esc_text(esc, path), in->schema_version, rd_esc_text(esc, in->resdiag_version),
           rd_esc_text(esc, in->hdf5_version));
    printf("  created %s by %s\n", rd_esc_text(esc, in->created_utc),
           rd_esc_text(esc, in->program));
    if (in->description[0])
        printf("  description: %s\n", rd_esc_text(esc, in->description));
    printf("  model: %d layers, d_model %d, %s block of", in->n_layers, in->d_model,
           in->block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential");
    for (int s = 0; s < in->n_sublayers; s++)
        printf(" %s", rd_esc_text(esc, in->sublayer_names[s]));
    printf("\n  declared: placement %s", resdiag_placement_name(in->declared_placement));
    if (in->declared_placement == RESDIAG_PLACEMENT_MIXED)
        printf(" (post-norm in layers 0..%d)", in->declared_mix_layers - 1);
    printf(", norm %s", resdiag_norm_kind_name(in->norm_kind));
    if (in->shard_cols)
        printf(", shard width %d", in->shard_cols);
    printf("\n  sketch: %d projections (seed %llu)\n", in->sketch_size,
           (unsigned long long)in->sketch_seed);
    for (int i = 0; i < in->n_meta; i++)
        printf("  meta %s = %s\n", rd_esc_text(esc, in->meta[2 * i]),
               rd_esc_text(esc, in->meta[2 * i + 1]));
    if (in->n_steps > 0)
        printf("  recorded: %lld steps, step %lld .. %lld\n", (long long)in->n_steps,
               (long long)steps[0], (long long)steps[in->n_steps - 1]);
    else
        printf("  recorded: no steps\n");
}

static int cmd_dump(int argc, char **argv)
{
    const char *path = NULL;
    long long want_step = -1;
    int all = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(find_command("dump")->usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--all") == 0) {
            all = 1;
        } else if (strcmp(argv[i], "--step") == 0) {
            if (i + 1 >= argc || parse_int64(argv[i + 1], &want_step) || want_step < 0) {
                fprintf(stderr, "resdiag dump: --step needs a step number >= 0\n");
                return EXIT_BAD;
            }
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "resdiag dump: unknown option '%s' (see resdiag dump --help)\n",
                    argv[i]);
            return EXIT_BAD;
        } else if (path) {
            fprintf(stderr, "resdiag dump: one run file at a time\n");
            return EXIT_BAD;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "resdiag dump: no run file given (see resdiag dump --help)\n");
        return EXIT_BAD;
    }
    resdiag_reader *rd = NULL;
    last_msg[0] = 0;
    if (resdiag_reader_open(&rd, path) != RESDIAG_OK) {
        fprintf(stderr, "resdiag: %s\n", last_msg[0] ? last_msg : "cannot read the run file");
        return EXIT_BAD;
    }
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int64_t n = in->n_steps;
    int64_t *steps = calloc(n > 0 ? (size_t)n : 1, sizeof *steps);
    last_msg[0] = 0;
    if (!steps || (n > 0 && resdiag_reader_steps(rd, steps, n) != RESDIAG_OK)) {
        fprintf(stderr, "resdiag: %s: %s\n", path,
                last_msg[0] ? last_msg : "cannot read the step numbers");
        free(steps);
        resdiag_reader_close(rd);
        return EXIT_BAD;
    }
    /* Find the step before printing anything: unusable input prints only
     * the one line on stderr. */
    int64_t first = 0, last = all ? n : (n > 0 ? 1 : 0);
    int rc = 0;
    if (want_step >= 0) {
        while (first < n && steps[first] != want_step)
            first++;
        last = first + 1;
        if (first == n) {
            fprintf(stderr, "resdiag: %s: step %lld was not recorded\n", path, want_step);
            rc = EXIT_BAD;
        }
    }
    if (rc == 0) {
        /* Into memory first: a value that cannot be read half-way through
         * makes the file unusable, and then only the one line is printed. */
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len), *out = stdout;
        if (!mem) {
            fprintf(stderr, "resdiag: out of memory\n");
            rc = EXIT_BAD;
        } else {
            stdout = mem;
            /* the tables dump_step reads: a step none of them stores
             * costs no reads (a run can declare far more than it holds) */
            static const char *const tables[] = {
                "forward/site_stats", "backward/site_stats", "forward/model_stats",
                "backward/model_stats", "forward/update", "backward/param_stats",
                "backward/model_param_stats" };
            enum { N_TABLES = sizeof tables / sizeof tables[0] };
            rd_stored_cursor cur[N_TABLES];
            for (int t = 0; t < N_TABLES; t++)
                rd_stored_init(rd, &cur[t], tables[t]);
            last_msg[0] = 0;
            rd_esc_ring esc = { 0 };
            dump_header(&esc, path, in, steps);
            for (int64_t si = first; si < last && rc == 0; si++) {
                int stored = 0;
                int64_t next;
                for (int t = 0; t < N_TABLES; t++)
                    stored |= rd_stored_at(rd, &cur[t], si, &next);
                if (dump_step(&esc, rd, si, steps[si], stored) != 0)
                    rc = EXIT_BAD;
            }
            rd_esc_ring_free(&esc);
            stdout = out;
            if (fclose(mem) != 0 && rc == 0) {
                fprintf(stderr, "resdiag: out of memory\n");
                rc = EXIT_BAD;
            } else if (rc != 0) {
                fprintf(stderr, "resdiag: %s\n", last_msg[0] ? last_msg : "cannot read the run file");
            } else {
                fwrite(text, 1, len, stdout);
            }
            free(text);
        }
    }
    free(steps);
    resdiag_reader_close(rd);
    return rc;
}

/* ------------------------------------------------------ report / check */

typedef struct analysis_args {
    const char *path;
    long long want_step; /* -1: none */
    int last;
    int json;
    const char *html; /* report --html FILE, NULL: none */
    double max_growth;
    int have_growth;
    resdiag_placement expect;
    int final_norm;
} analysis_args;

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static resdiag_placement parse_placement(const char *s)
{
    static const struct { const char *name; resdiag_placement p; } t[] = {
        { "pre-norm", RESDIAG_PLACEMENT_PRE },   { "pre", RESDIAG_PLACEMENT_PRE },
        { "post-norm", RESDIAG_PLACEMENT_POST }, { "post", RESDIAG_PLACEMENT_POST },
        { "sandwich", RESDIAG_PLACEMENT_SANDWICH }, { "peri-ln", RESDIAG_PLACEMENT_SANDWICH },
        { "deepnorm", RESDIAG_PLACEMENT_DEEPNORM }, { "mixed", RESDIAG_PLACEMENT_MIXED },
        { "parallel", RESDIAG_PLACEMENT_PARALLEL }, { "none", RESDIAG_PLACEMENT_NONE },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i].name) == 0)
            return t[i].p;
    return RESDIAG_PLACEMENT_UNDECLARED;
}

/* Parses the options shared by report and check. Returns -1 after printing
 * help, EXIT_BAD after one line on stderr, 0 to go on. */
static int parse_analysis_args(const char *cmd, int argc, char **argv, analysis_args *o)
{
    memset(o, 0, sizeof *o);
    o->want_step = -1;
    int is_check = strcmp(cmd, "check") == 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(find_command(cmd)->usage, stdout);
            return -1;
        } else if (strcmp(a, "--last") == 0) {
            o->last = 1;
        } else if (!is_check && strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (!is_check && strcmp(a, "--html") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "resdiag %s: --html needs an output file name\n", cmd);
                return EXIT_BAD;
            }
            o->html = argv[++i];
        } else if (is_check && strcmp(a, "--final-norm") == 0) {
            o->final_norm = 1;
        } else if (strcmp(a, "--step") == 0) {
            if (i + 1 >= argc || parse_int64(argv[i + 1], &o->want_step) || o->want_step < 0) {
                fprintf(stderr, "resdiag %s: --step needs a step number >= 0\n", cmd);
                return EXIT_BAD;
            }
            i++;
        } else if (strcmp(a, "--max-growth") == 0) {
            if (i + 1 >= argc || parse_double(argv[i + 1], &o->max_growth) || o->max_growth <= 0) {
                fprintf(stderr, "resdiag %s: --max-growth needs a number > 0\n", cmd);
                return EXIT_BAD;
            }
            o->have_growth = 1;
            i++;
        } else if (is_check && strcmp(a, "--expect") == 0) {
            if (i + 1 < argc && strcmp(argv[i + 1], "declared") == 0)
                o->expect = RESDIAG_EXPECT_DECLARED;
            else if (i + 1 >= argc ||
                     (o->expect = parse_placement(argv[i + 1])) == RESDIAG_PLACEMENT_UNDECLARED) {
                fprintf(stderr, "resdiag check: --expect needs pre-norm, post-norm, sandwich, "
                                "deepnorm, parallel, mixed, none or declared\n");
                return EXIT_BAD;
            }
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "resdiag %s: unknown option '%s' (see resdiag %s --help)\n", cmd, a,
                    cmd);
            return EXIT_BAD;
        } else if (o->path) {
            fprintf(stderr, "resdiag %s: one run file at a time\n", cmd);
            return EXIT_BAD;
        } else {
            o->path = a;
        }
    }
    if (o->last && o->want_step >= 0) {
        fprintf(stderr, "resdiag %s: --step and --last exclude each other\n", cmd);
        return EXIT_BAD;
    }
    if (o->json && o->html) {
        fprintf(stderr, "resdiag %s: --json and --html exclude each other\n", cmd);
        return EXIT_BAD;
    }
    if (!o->path) {
        fprintf(stderr, "resdiag %s: no run file given (see resdiag %s --help)\n", cmd, cmd);
        return EXIT_BAD;
    }
    if (is_check && o->expect == RESDIAG_PLACEMENT_UNDECLARED) {
        fprintf(stderr, "resdiag check: --expect PLACEMENT is required (see resdiag check "
                        "--help)\n");
        return EXIT_BAD;
    }
    return 0;
}

/* Opens and analyses the run; on failure prints one line and returns NULL. */
static resdiag_analysis *open_analysis(const analysis_args *o, resdiag_reader **rdp)
{
    resdiag_reader *rd = NULL;
    *rdp = NULL;
    last_msg[0] = 0;
    if (resdiag_reader_open(&rd, o->path) != RESDIAG_OK) {
        fprintf(stderr, "resdiag: %s\n", last_msg[0] ? last_msg : "cannot read the run file");
        return NULL;
    }
    const resdiag_run_info *in = resdiag_reader_info(rd);
    resdiag_analyze_options opt;
    resdiag_analyze_options_init(&opt);
    if (o->last)
        opt.step_index = RESDIAG_STEP_LAST;
    if (o->have_growth)
        opt.max_growth = o->max_growth;
    if (o->want_step >= 0) {
        int64_t n = in->n_steps;
        int64_t *steps = calloc(n > 0 ? (size_t)n : 1, sizeof *steps);
        int64_t si = -1;
        last_msg[0] = 0;
        if (!steps || (n > 0 && resdiag_reader_steps(rd, steps, n) != RESDIAG_OK)) {
            fprintf(stderr, "resdiag: %s: %s\n", o->path,
                    last_msg[0] ? last_msg : "cannot read the step numbers");
            free(steps);
            resdiag_reader_close(rd);
            return NULL;
        }
        for (int64_t i = 0; i < n; i++)
            if (steps[i] == o->want_step)
                si = i;
        free(steps);
        if (si < 0) {
            fprintf(stderr, "resdiag: %s: step %lld was not recorded\n", o->path, o->want_step);
            resdiag_reader_close(rd);
            return NULL;
        }
        opt.step_index = si;
    }
    if (in->n_steps == 0) {
        fprintf(stderr, "resdiag: %s: the run holds no recorded steps (empty run, or the trainer "
                        "was stopped before its first step ended)\n", o->path);
        resdiag_reader_close(rd);
        return NULL;
    }
    resdiag_analysis *an = NULL;
    last_msg[0] = 0;
    if (resdiag_analyze(rd, &opt, &an) != RESDIAG_OK) {
        fprintf(stderr, "resdiag: %s: %s\n", o->path,
                last_msg[0] ? last_msg : "cannot analyse the run");
        resdiag_reader_close(rd);
        return NULL;
    }
    *rdp = rd;
    return an;
}

/* Writes a page or figure (NULL: out of memory) and frees it; 0 or EXIT_BAD
 * after one line on stderr. */
static int write_html(const char *path, char *text)
{
    int rc = 0;
    if (!text) {
        fprintf(stderr, "resdiag: cannot make the page: %s\n",
                last_msg[0] ? last_msg : "out of memory");
        rc = EXIT_BAD;
    } else if (html_write_file(path, text) != 0) {
        fprintf(stderr, "resdiag: cannot write %s: %s\n", path, strerror(errno));
        rc = EXIT_BAD;
    }
    free(text);
    return rc;
}

static int cmd_report(int argc, char **argv)
{
    analysis_args o;
    int rc = parse_analysis_args("report", argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    resdiag_reader *rd;
    resdiag_analysis *an = open_analysis(&o, &rd);
    if (!an)
        return EXIT_BAD;
    if (o.html) {
        last_msg[0] = 0;
        rc = write_html(o.html, html_report(an, rd, o.path));
        resdiag_analysis_free(an);
        resdiag_reader_close(rd);
        return rc;
    }
    char *text = o.json ? resdiag_analysis_to_json(an) : resdiag_analysis_to_text(an);
    if (!text) {
        fprintf(stderr, "resdiag: out of memory\n");
        rc = EXIT_BAD;
    } else {
        if (!o.json) {
            rd_esc_ring esc = { 0 };
            printf("resdiag report %s\n", rd_esc_text(&esc, o.path)); /* a file name is any bytes */
            rd_esc_ring_free(&esc);
        }
        fputs(text, stdout);
    }
    resdiag_free(text);
    resdiag_analysis_free(an);
    resdiag_reader_close(rd);
    return rc;
}

static int cmd_check(int argc, char **argv)
{
    analysis_args o;
    int rc = parse_analysis_args("check", argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    resdiag_reader *rd;
    resdiag_analysis *an = open_analysis(&o, &rd);
    if (!an)
        return EXIT_BAD;
    resdiag_check_options c;
    resdiag_check_options_init(&c);
    c.expect = o.expect;
    c.require_final_norm = o.final_norm;
    c.max_growth = o.have_growth ? o.max_growth : 0;
    char why[512];
    resdiag_check_result r = resdiag_analysis_check(an, &c, why, sizeof why);
    /* holds goes to stdout; does not hold and cannot tell to stderr, one line */
    rd_esc_ring esc = { 0 };
    fprintf(r == RESDIAG_CHECK_HOLDS ? stdout : stderr, "resdiag check: %s: %s\n",
            rd_esc_text(&esc, o.path), why); /* why comes escaped */
    rd_esc_ring_free(&esc);
    resdiag_analysis_free(an);
    resdiag_reader_close(rd);
    return (int)r;
}

static int cmd_diff(int argc, char **argv)
{
    analysis_args o[2];
    const char *paths[2] = { NULL, NULL };
    int np = 0;
    char *rest[8];
    int nrest = 0;
    const char *html = NULL;
    /* split the two paths from the options, then parse like report */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(find_command("diff")->usage, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--step") == 0 && i + 1 < argc) {
            if (nrest + 2 > 8)
                break;
            rest[nrest++] = argv[i];
            rest[nrest++] = argv[++i];
        } else if (strcmp(argv[i], "--html") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "resdiag diff: --html needs an output file name\n");
                return EXIT_BAD;
            }
            html = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            if (strcmp(argv[i], "--last") != 0) {
                fprintf(stderr, "resdiag diff: unknown option '%s' (see resdiag diff --help)\n",
                        argv[i]);
                return EXIT_BAD;
            }
            if (nrest < 8)
                rest[nrest++] = argv[i];
        } else if (np < 2) {
            paths[np++] = argv[i];
        } else {
            fprintf(stderr, "resdiag diff: two run files, not more\n");
            return EXIT_BAD;
        }
    }
    if (np != 2) {
        fprintf(stderr, "resdiag diff: needs two run files (see resdiag diff --help)\n");
        return EXIT_BAD;
    }
    resdiag_reader *rd[2] = { NULL, NULL };
    resdiag_analysis *an[2] = { NULL, NULL };
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        char *av[12];
        int ac = 0;
        av[ac++] = "report";
        for (int i = 0; i < nrest; i++)
            av[ac++] = rest[i];
        av[ac++] = (char *)paths[k];
        int r = parse_analysis_args("report", ac, av, &o[k]);
        if (r) {
            rc = r < 0 ? 0 : r;
            goto out;
        }
        if (!(an[k] = open_analysis(&o[k], &rd[k]))) {
            rc = EXIT_BAD;
            goto out;
        }
    }
    if (html) {
        rc = write_html(html, html_diff(an[0], an[1], paths[0], paths[1]));
        /* the page goes to stdout: the text comparison stays out of it */
        if (rc || strcmp(html, "-") == 0)
            goto out;
    }
    char *text = resdiag_analysis_diff_text(an[0], an[1], paths[0], paths[1]);
    if (!text) {
        fprintf(stderr, "resdiag: out of memory\n");
        rc = EXIT_BAD;
    } else {
        fputs(text, stdout);
    }
    resdiag_free(text);
out:
    for (int k = 0; k < 2; k++) {
        resdiag_analysis_free(an[k]);
        resdiag_reader_close(rd[k]);
    }
    return rc;
}

/* ----------------------------------------------------------------- plot */

static int cmd_plot(int argc, char **argv)
{
    analysis_args o;
    memset(&o, 0, sizeof o);
    o.want_step = -1;
    int what = -1;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(find_command("plot")->usage, stdout);
            return 0;
        } else if (strcmp(a, "--what") == 0) {
            if (i + 1 >= argc || (what = plot_what_parse(argv[i + 1])) < 0) {
                fprintf(stderr, "resdiag plot: --what needs growth, updates or gradients\n");
                return EXIT_BAD;
            }
            i++;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "resdiag plot: -o needs an output file name\n");
                return EXIT_BAD;
            }
            out = argv[++i];
        } else if (strcmp(a, "--last") == 0) {
            o.last = 1;
        } else if (strcmp(a, "--step") == 0) {
            if (i + 1 >= argc || parse_int64(argv[i + 1], &o.want_step) || o.want_step < 0) {
                fprintf(stderr, "resdiag plot: --step needs a step number >= 0\n");
                return EXIT_BAD;
            }
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "resdiag plot: unknown option '%s' (see resdiag plot --help)\n", a);
            return EXIT_BAD;
        } else if (o.path) {
            fprintf(stderr, "resdiag plot: one run file at a time\n");
            return EXIT_BAD;
        } else {
            o.path = a;
        }
    }
    if (what < 0 || !out || !o.path) {
        fprintf(stderr, "resdiag plot: needs --what, -o FILE and a run file (see resdiag plot "
                        "--help)\n");
        return EXIT_BAD;
    }
    if (o.last && o.want_step >= 0) {
        fprintf(stderr, "resdiag plot: --step and --last exclude each other\n");
        return EXIT_BAD;
    }
    resdiag_reader *rd;
    resdiag_analysis *an = open_analysis(&o, &rd);
    if (!an)
        return EXIT_BAD;
    svg_buf b = { 0 };
    const resdiag_analysis *one[1] = { an };
    int rc = 0;
    if (plot_figure(&b, (plot_what)what, one, NULL, 1) != 0 && !b.failed) {
        static const char *const names[PLOT_N] = { "growth", "updates", "gradients" };
        fprintf(stderr, "resdiag plot: %s: the run holds no data for the %s figure\n", o.path,
                names[what]);
        free(b.s);
        rc = EXIT_BAD;
    } else {
        rc = write_html(out, svg_finish(&b));
    }
    resdiag_analysis_free(an);
    resdiag_reader_close(rd);
    return rc;
}

int main(int argc, char **argv)
{
    /* A run file names its filters: HDF5 would look for one it does not
     * have among the shared objects in HDF5_PLUGIN_PATH and run their code.
     * resdiag writes no filters, and the reader refuses files with any. */
    H5PLset_loading_state(0);
    resdiag_set_log_handler(keep_message, NULL);
    if (argc < 2) {
        fprintf(stderr, "resdiag: no command given (see resdiag --help)\n");
        return EXIT_BAD;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return cmd_help(1, argv);
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(1, argv);
    const command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "resdiag: '%s' is not a command (see resdiag --help)\n", argv[1]);
        return EXIT_BAD;
    }
    int rc = c->fn(argc - 1, argv + 1);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "resdiag: cannot write the output: %s\n", strerror(errno));
        return EXIT_BAD;
    }
    /* After some damaged files HDF5 cannot shut down, and its exit handler
     * prints "HDF5: infinite loop closing library" (tests/fuzz): a refused
     * file ends with the tool's one line. Only reads happened: nothing is
     * left to write. */
    if (rc == EXIT_BAD) {
        fflush(stderr);
        _exit(rc);
    }
    return rc;
}
