/*
 * resdiag.c - the command-line tool: `resdiag <command> [args]`.
 *
 * Exit codes: 0 success, 1 a check did not hold, 2 bad usage or unusable
 * input (one line on stderr says why).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>
#include <resdiag.h>

#include "common/escape.h"
#include "h5/reader.h"
#include "render/html.h"
#include "render/plot.h"

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
      "declares nothing) or unusable input. The line saying why is on stdout in\n"
      "every case; only unusable input and bad usage write (one line) to stderr.\n" },
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
    fprintf(out, "\n'resdiag help COMMAND' or 'resdiag COMMAND --help' for more. A value\n"
                 "follows its option as the next word or after '=' (--step 3, --step=3).\n");
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

/* ---------------------------------------------------- the command line */

/* What the commands' options say; each command reads the fields it has. */
typedef struct cli_args {
    const char *path;
    const char *path2;   /* diff: the second run */
    long long want_step; /* -1: none */
    int last;
    int all;             /* dump --all */
    int json;
    const char *html;    /* report/diff --html FILE, NULL: none */
    double max_growth;
    int have_growth;
    resdiag_placement expect;
    int final_norm;
    int what;            /* plot --what, -1: none */
    const char *out;     /* plot -o FILE */
} cli_args;

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

enum {
    OPT_STEP = 256, OPT_LAST, OPT_ALL, OPT_JSON, OPT_HTML, OPT_MAX_GROWTH, OPT_EXPECT,
    OPT_FINAL_NORM, OPT_WHAT,
};

#define OPT_HELP_ENTRY { "help", no_argument, NULL, 'h' }
#define OPT_END { NULL, 0, NULL, 0 }

/* Each command's options, as getopt_long(3) reads them: "--step 3" and
 * "--step=3" (or a unique abbreviation), before or after the file names;
 * "--" ends the options. tools/resdiag-completion.bash completes the same. */
static const struct option report_options[] = {
    OPT_HELP_ENTRY,
    { "step", required_argument, NULL, OPT_STEP },
    { "last", no_argument, NULL, OPT_LAST },
    { "json", no_argument, NULL, OPT_JSON },
    { "html", required_argument, NULL, OPT_HTML },
    { "max-growth", required_argument, NULL, OPT_MAX_GROWTH },
    OPT_END,
};
static const struct option check_options[] = {
    OPT_HELP_ENTRY,
    { "expect", required_argument, NULL, OPT_EXPECT },
    { "final-norm", no_argument, NULL, OPT_FINAL_NORM },
    { "max-growth", required_argument, NULL, OPT_MAX_GROWTH },
    { "step", required_argument, NULL, OPT_STEP },
    { "last", no_argument, NULL, OPT_LAST },
    OPT_END,
};
static const struct option diff_options[] = {
    OPT_HELP_ENTRY,
    { "step", required_argument, NULL, OPT_STEP },
    { "last", no_argument, NULL, OPT_LAST },
    { "html", required_argument, NULL, OPT_HTML },
    OPT_END,
};
static const struct option plot_options[] = {
    OPT_HELP_ENTRY,
    { "what", required_argument, NULL, OPT_WHAT },
    { "output", required_argument, NULL, 'o' },
    { "step", required_argument, NULL, OPT_STEP },
    { "last", no_argument, NULL, OPT_LAST },
    OPT_END,
};
static const struct option dump_options[] = {
    OPT_HELP_ENTRY,
    { "step", required_argument, NULL, OPT_STEP },
    { "all", no_argument, NULL, OPT_ALL },
    OPT_END,
};

/* The one line for an option getopt_long refused (opterr is 0, so it said
 * nothing): unknown, ambiguous (an abbreviation of two), or a value given to
 * a flag. arg is the argument it stopped at, NULL inside "-xyz". */
static void say_bad_option(const char *cmd, const struct option *longs, const char *arg,
                           int short_opt)
{
    if (arg && arg[0] == '-' && arg[1] == '-') {
        const char *eq = strchr(arg + 2, '=');
        size_t len = eq ? (size_t)(eq - (arg + 2)) : strlen(arg + 2);
        int matches = 0, exact = 0;
        for (const struct option *l = longs; l->name; l++)
            if (strncmp(l->name, arg + 2, len) == 0) {
                matches++;
                exact |= strlen(l->name) == len;
            }
        if (eq && (exact || matches == 1)) {
            fprintf(stderr, "resdiag %s: --%.*s takes no value (see resdiag %s --help)\n", cmd,
                    (int)len, arg + 2, cmd);
            return;
        }
        if (matches > 1 && !exact) {
            fprintf(stderr, "resdiag %s: ambiguous option '%.*s' (see resdiag %s --help)\n", cmd,
                    (int)len + 2, arg, cmd);
            return;
        }
        fprintf(stderr, "resdiag %s: unknown option '%s' (see resdiag %s --help)\n", cmd, arg,
                cmd);
        return;
    }
    fprintf(stderr, "resdiag %s: unknown option '-%c' (see resdiag %s --help)\n", cmd,
            short_opt > 0 && short_opt < 128 ? short_opt : '?', cmd);
}

/* Parses the options of report, check, diff, plot and dump, and checks
 * what they need together. Returns -1 after printing help, EXIT_BAD after
 * one line on stderr, 0 to go on. */
static int parse_cli_args(const char *cmd, int argc, char **argv, cli_args *o)
{
    memset(o, 0, sizeof *o);
    o->want_step = -1;
    o->what = -1;
    const struct option *longs = strcmp(cmd, "report") == 0 ? report_options
                                 : strcmp(cmd, "check") == 0 ? check_options
                                 : strcmp(cmd, "diff") == 0  ? diff_options
                                 : strcmp(cmd, "plot") == 0  ? plot_options
                                                             : dump_options;
    /* ':' first: a missing value comes back as ':', not as '?' */
    const char *shorts = longs == plot_options ? ":ho:" : ":h";
    int is_check = longs == check_options, is_diff = longs == diff_options;
    const char *files[2] = { NULL, NULL };
    int n_files = 0;

    opterr = 0;
    optind = 0; /* glibc: start afresh */
    for (;;) {
        int at = optind ? optind : 1;
        int c = getopt_long(argc, argv, shorts, longs, NULL);
        if (c == -1)
            break;
        if (c == '?') {
            /* the refused argument is just before optind, unless getopt
             * stopped inside a cluster of short options */
            say_bad_option(cmd, longs, optind > at ? argv[optind - 1] : NULL, optopt);
            return EXIT_BAD;
        }
        const char *val = optarg;
        if (c == ':') { /* a value is missing: the option's own line says what it needs */
            c = optopt;
            val = NULL;
        }
        switch (c) {
        case 'h':
            fputs(find_command(cmd)->usage, stdout);
            return -1;
        case OPT_LAST:
            o->last = 1;
            break;
        case OPT_ALL:
            o->all = 1;
            break;
        case OPT_JSON:
            o->json = 1;
            break;
        case OPT_FINAL_NORM:
            o->final_norm = 1;
            break;
        case OPT_HTML:
            if (!val || !val[0]) {
                fprintf(stderr, "resdiag %s: --html needs an output file name\n", cmd);
                return EXIT_BAD;
            }
            o->html = val;
            break;
        case 'o':
            if (!val || !val[0]) {
                fprintf(stderr, "resdiag %s: -o needs an output file name\n", cmd);
                return EXIT_BAD;
            }
            o->out = val;
            break;
        case OPT_STEP:
            if (!val || parse_int64(val, &o->want_step) || o->want_step < 0) {
                fprintf(stderr, "resdiag %s: --step needs a step number >= 0\n", cmd);
                return EXIT_BAD;
            }
            break;
        case OPT_MAX_GROWTH:
            if (!val || parse_double(val, &o->max_growth) || o->max_growth <= 0) {
                fprintf(stderr, "resdiag %s: --max-growth needs a number > 0\n", cmd);
                return EXIT_BAD;
            }
            o->have_growth = 1;
            break;
        case OPT_EXPECT:
            if (val && strcmp(val, "declared") == 0)
                o->expect = RESDIAG_EXPECT_DECLARED;
            else if (!val || (o->expect = parse_placement(val)) == RESDIAG_PLACEMENT_UNDECLARED) {
                fprintf(stderr, "resdiag check: --expect needs pre-norm, post-norm, sandwich, "
                                "deepnorm, parallel, mixed, none or declared\n");
                return EXIT_BAD;
            }
            break;
        case OPT_WHAT:
            if (!val || (o->what = plot_what_parse(val)) < 0) {
                fprintf(stderr, "resdiag plot: --what needs growth, updates or gradients\n");
                return EXIT_BAD;
            }
            break;
        default: /* not reached: the tables hold only the options above */
            fprintf(stderr, "resdiag %s: cannot parse the options\n", cmd);
            return EXIT_BAD;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (n_files == (is_diff ? 2 : 1)) {
            if (is_diff)
                fprintf(stderr, "resdiag diff: two run files, not more\n");
            else
                fprintf(stderr, "resdiag %s: one run file at a time\n", cmd);
            return EXIT_BAD;
        }
        files[n_files++] = argv[i];
    }
    o->path = files[0];
    o->path2 = files[1];
    if (longs == plot_options && (o->what < 0 || !o->out || !o->path)) {
        fprintf(stderr, "resdiag plot: needs --what, -o FILE and a run file (see resdiag plot "
                        "--help)\n");
        return EXIT_BAD;
    }
    if (is_diff && n_files != 2) {
        fprintf(stderr, "resdiag diff: needs two run files (see resdiag diff --help)\n");
        return EXIT_BAD;
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

/* ----------------------------------------------------------------- dump */

static void print_value(FILE *out, double v, int width)
{
    if (isnan(v))
        fprintf(out, " %*s", width, "-");
    else
        fprintf(out, " %*.*g", width, width > 9 ? 6 : 5, v);
}

/* dump prints the run file's strings (names, description, metadata, call
 * sites, provenance) through the text escaper (escape.h): a file cannot
 * write lines or terminal controls of its own. print_site_row gives 1 with
 * a row printed, 0 for a site not observed, -1 when it cannot be read
 * (logged). */
static int print_site_row(FILE *out, rd_esc_ring *esc, const resdiag_reader *rd, int64_t si,
                          resdiag_direction dir, int layer, int sub, resdiag_site site,
                          const char *label)
{
    double f[RESDIAG_N_FIELDS];
    int observed = 0;
    if (resdiag_reader_site(rd, si, dir, layer, sub, site, f, &observed) != RESDIAG_OK)
        return -1;
    if (!observed)
        return 0;
    fprintf(out, "  %-22s %-14s", rd_esc_text(esc, label), resdiag_site_name(site));
    fprintf(out, " %7.0f", f[RESDIAG_FIELD_ROWS]);
    print_value(out, f[RESDIAG_FIELD_FROB], 11);
    print_value(out, f[RESDIAG_FIELD_TOK_NORM_MEAN], 11);
    print_value(out, f[RESDIAG_FIELD_TOK_NORM_STD], 10);
    print_value(out, f[RESDIAG_FIELD_TOK_RMS_MEAN], 10);
    print_value(out, f[RESDIAG_FIELD_TOK_MEAN_MEAN], 10);
    print_value(out, f[RESDIAG_FIELD_ABSMAX], 10);
    fprintf(out, " %5.0f", isnan(f[RESDIAG_FIELD_ABSMAX_COL]) ? -1 : f[RESDIAG_FIELD_ABSMAX_COL]);
    fprintf(out, " %5.0f %5.0f %4.0f  %s\n", f[RESDIAG_FIELD_NAN_COUNT], f[RESDIAG_FIELD_INF_COUNT],
            f[RESDIAG_FIELD_CALL_SEQ],
            rd_esc_text(esc, resdiag_reader_callsite(rd, dir, layer, sub, site)));
    return 1;
}

/* 0, or -1 at the first value that cannot be read (logged). stored 0: no
 * table stores anything of the step (only the headers are printed). */
static int dump_step(FILE *out, rd_esc_ring *esc, const resdiag_reader *rd, int64_t si,
                     int64_t step, int stored)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    fprintf(out, "\nstep %lld (record %lld of %lld)\n", (long long)step, (long long)si + 1,
            (long long)in->n_steps);
    fprintf(out, "  %-22s %-14s %7s %11s %11s %10s %10s %10s %10s %5s %5s %5s %4s  %s\n", "where",
            "site", "tokens", "||x||_F", "tok_norm", "tok_sd", "tok_rms", "tok_mean", "absmax",
            "col", "nan", "inf", "seq", "call site");
    if (!stored)
        return 0;
    for (int dir = 0; dir < 2; dir++) {
        const char *dname = dir == RESDIAG_FORWARD ? "fwd" : "grad";
        char label[96];
        for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++) {
            snprintf(label, sizeof label, "%s model", dname);
            if (print_site_row(out, esc, rd, si, (resdiag_direction)dir, 0, 0,
                               (resdiag_site)(RESDIAG_EMBED_OUT + m), label) < 0)
                return -1;
        }
        for (int l = 0; l < in->n_layers; l++)
            for (int s = 0; s < in->n_sublayers; s++)
                for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                    snprintf(label, sizeof label, "%s L%d %s", dname, l, in->sublayer_names[s]);
                    if (print_site_row(out, esc, rd, si, (resdiag_direction)dir, l, s,
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
                fprintf(out, "  update ratio r = ||dx||/||x||:  %-16s %12s %14s\n", "where",
                        "frobenius", "mean per token");
            fprintf(out, "  %32s  L%-3d %-11s %12.6g %14.6g\n", "", l,
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
                fprintf(out, "  parameter gradients:  %-20s %12s %12s %6s %6s\n", "where",
                        "||g||_F", "absmax", "nan", "inf");
            char where[96];
            if (l < 0)
                snprintf(where, sizeof where, "model %s", names[p]);
            else
                snprintf(where, sizeof where, "L%d %s", l, names[p]);
            fprintf(out, "  %22s %-20s %12.6g %12.6g %6.0f %6.0f\n", "", rd_esc_text(esc, where),
                    f[RESDIAG_FIELD_FROB], f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_NAN_COUNT],
                    f[RESDIAG_FIELD_INF_COUNT]);
        }
    }
    return 0;
}

static void dump_header(FILE *out, rd_esc_ring *esc, const char *path,
                        const resdiag_run_info *in, const int64_t *steps)
{
    fprintf(out, "%s: resdiag run file, schema %d, written by resdiag %s with HDF5 %s\n",
            rd_esc_text(esc, path), in->schema_version, rd_esc_text(esc, in->resdiag_version),
            rd_esc_text(esc, in->hdf5_version));
    fprintf(out, "  created %s by %s\n", rd_esc_text(esc, in->created_utc),
            rd_esc_text(esc, in->program));
    if (in->description[0])
        fprintf(out, "  description: %s\n", rd_esc_text(esc, in->description));
    fprintf(out, "  model: %d layers, d_model %d, %s block of", in->n_layers, in->d_model,
            in->block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential");
    for (int s = 0; s < in->n_sublayers; s++)
        fprintf(out, " %s", rd_esc_text(esc, in->sublayer_names[s]));
    fprintf(out, "\n  declared: placement %s", resdiag_placement_name(in->declared_placement));
    if (in->declared_placement == RESDIAG_PLACEMENT_MIXED)
        fprintf(out, " (post-norm in layers 0..%d)", in->declared_mix_layers - 1);
    fprintf(out, ", norm %s", resdiag_norm_kind_name(in->norm_kind));
    if (in->shard_cols)
        fprintf(out, ", shard width %d", in->shard_cols);
    fprintf(out, "\n  sketch: %d projections (seed %llu)\n", in->sketch_size,
            (unsigned long long)in->sketch_seed);
    for (int i = 0; i < in->n_meta; i++)
        fprintf(out, "  meta %s = %s\n", rd_esc_text(esc, in->meta[2 * i]),
                rd_esc_text(esc, in->meta[2 * i + 1]));
    if (in->n_steps > 0)
        fprintf(out, "  recorded: %lld steps, step %lld .. %lld\n", (long long)in->n_steps,
                (long long)steps[0], (long long)steps[in->n_steps - 1]);
    else
        fprintf(out, "  recorded: no steps\n");
}

static int cmd_dump(int argc, char **argv)
{
    cli_args o;
    int rc = parse_cli_args("dump", argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    const char *path = o.path;
    long long want_step = o.want_step;
    int all = o.all;
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
    rc = 0;
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
        FILE *mem = open_memstream(&text, &len);
        if (!mem) {
            fprintf(stderr, "resdiag: out of memory\n");
            rc = EXIT_BAD;
        } else {
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
            dump_header(mem, &esc, path, in, steps);
            for (int64_t si = first; si < last && rc == 0; si++) {
                int stored = 0;
                int64_t next;
                for (int t = 0; t < N_TABLES; t++)
                    stored |= rd_stored_at(rd, &cur[t], si, &next);
                if (dump_step(mem, &esc, rd, si, steps[si], stored) != 0)
                    rc = EXIT_BAD;
            }
            rd_esc_ring_free(&esc);
            if (fclose(mem) != 0 && rc == 0) {
                fprintf(stderr, "resdiag: out of memory\n");
                rc = EXIT_BAD;
            } else if (rc != 0) {
                fprintf(stderr, "resdiag: %s\n",
                        last_msg[0] ? last_msg : "cannot read the run file");
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

/* Opens and analyses the run; on failure prints one line and returns NULL. */
static resdiag_analysis *open_analysis(const cli_args *o, resdiag_reader **rdp)
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
    cli_args o;
    int rc = parse_cli_args("report", argc, argv, &o);
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
    cli_args o;
    int rc = parse_cli_args("check", argc, argv, &o);
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
    /* the verdict is the command's output: one line on stdout whatever it
     * says (holds, does not, cannot tell); stderr is for errors and usage */
    rd_esc_ring esc = { 0 };
    fprintf(stdout, "resdiag check: %s: %s\n",
            rd_esc_text(&esc, o.path), why); /* why comes escaped */
    rd_esc_ring_free(&esc);
    resdiag_analysis_free(an);
    resdiag_reader_close(rd);
    return (int)r;
}

static int cmd_diff(int argc, char **argv)
{
    cli_args o[2];
    int rc = parse_cli_args("diff", argc, argv, &o[0]);
    if (rc)
        return rc < 0 ? 0 : rc;
    o[1] = o[0];
    o[1].path = o[0].path2;
    const char *paths[2] = { o[0].path, o[1].path };
    const char *html = o[0].html;
    resdiag_reader *rd[2] = { NULL, NULL };
    resdiag_analysis *an[2] = { NULL, NULL };
    for (int k = 0; k < 2; k++) {
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
    cli_args o;
    int rc = parse_cli_args("plot", argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    int what = o.what;
    const char *out = o.out;
    resdiag_reader *rd;
    resdiag_analysis *an = open_analysis(&o, &rd);
    if (!an)
        return EXIT_BAD;
    svg_buf b = { 0 };
    const resdiag_analysis *one[1] = { an };
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
