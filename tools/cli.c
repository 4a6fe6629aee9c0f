/*
 * cli.c - the options of report, check, diff, plot and dump as
 * getopt_long(3) reads them (cli.h), with one line on stderr for each
 * mistake.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"

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

/* A figure's name as resdiag_figure_name gives it; -1 for another. */
static int parse_figure(const char *s)
{
    for (int f = 0; f < RESDIAG_N_FIGURES; f++)
        if (strcmp(s, resdiag_figure_name((resdiag_figure)f)) == 0)
            return f;
    return -1;
}

static resdiag_placement parse_placement(const char *s)
{
    static const struct { const char *name; resdiag_placement p; } t[] = {
        { "pre-norm", RESDIAG_PLACEMENT_PRE },   { "pre", RESDIAG_PLACEMENT_PRE },
        { "post-norm", RESDIAG_PLACEMENT_POST }, { "post", RESDIAG_PLACEMENT_POST },
        { "sandwich", RESDIAG_PLACEMENT_SANDWICH }, { "peri-ln", RESDIAG_PLACEMENT_SANDWICH },
        { "deepnorm", RESDIAG_PLACEMENT_DEEPNORM }, { "mixed", RESDIAG_PLACEMENT_MIXED },
        { "parallel", RESDIAG_PLACEMENT_PARALLEL }, { "none", RESDIAG_PLACEMENT_NONE },
        { "reordered", RESDIAG_PLACEMENT_REORDERED },
        { "per-sublayer", RESDIAG_PLACEMENT_PER_SUBLAYER },
        { "per_sublayer", RESDIAG_PLACEMENT_PER_SUBLAYER },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i].name) == 0)
            return t[i].p;
    return RESDIAG_PLACEMENT_UNDECLARED;
}

enum {
    OPT_STEP = 256, OPT_LAST, OPT_ALL, OPT_JSON, OPT_HTML, OPT_MAX_GROWTH, OPT_EXPECT,
    OPT_FINAL_NORM, OPT_WHAT, OPT_RANK, OPT_NO_CONSEQUENCES,
};

#define OPT_HELP_ENTRY { "help", no_argument, NULL, 'h' }
#define OPT_RANK_ENTRY { "rank", required_argument, NULL, OPT_RANK }
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
    { "no-consequences", no_argument, NULL, OPT_NO_CONSEQUENCES },
    OPT_RANK_ENTRY,
    OPT_END,
};
static const struct option check_options[] = {
    OPT_HELP_ENTRY,
    { "expect", required_argument, NULL, OPT_EXPECT },
    { "final-norm", no_argument, NULL, OPT_FINAL_NORM },
    { "max-growth", required_argument, NULL, OPT_MAX_GROWTH },
    { "step", required_argument, NULL, OPT_STEP },
    { "last", no_argument, NULL, OPT_LAST },
    OPT_RANK_ENTRY,
    OPT_END,
};
static const struct option diff_options[] = {
    OPT_HELP_ENTRY,
    { "step", required_argument, NULL, OPT_STEP },
    { "last", no_argument, NULL, OPT_LAST },
    { "html", required_argument, NULL, OPT_HTML },
    { "no-consequences", no_argument, NULL, OPT_NO_CONSEQUENCES },
    OPT_RANK_ENTRY,
    OPT_END,
};
static const struct option plot_options[] = {
    OPT_HELP_ENTRY,
    { "what", required_argument, NULL, OPT_WHAT },
    { "output", required_argument, NULL, 'o' },
    { "step", required_argument, NULL, OPT_STEP },
    { "last", no_argument, NULL, OPT_LAST },
    OPT_RANK_ENTRY,
    OPT_END,
};
static const struct option dump_options[] = {
    OPT_HELP_ENTRY,
    { "step", required_argument, NULL, OPT_STEP },
    { "all", no_argument, NULL, OPT_ALL },
    OPT_RANK_ENTRY,
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

/* What the options and files of a command need together; 0, or EXIT_BAD
 * after one line on stderr. */
static int check_together(const char *cmd, const cli_args *o, int is_plot, int is_diff,
                          int is_check, int n_files)
{
    if (is_plot && (o->what < 0 || !o->out || !o->path)) {
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
    if (o->all && o->want_step >= 0) {
        fprintf(stderr, "resdiag %s: --step and --all exclude each other\n", cmd);
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

/* Parses the options of report, check, diff, plot and dump, and checks
 * what they need together. Returns -1 after printing help, EXIT_BAD after
 * one line on stderr, 0 to go on. */
int parse_cli_args(const char *cmd, int argc, char **argv, cli_args *o)
{
    memset(o, 0, sizeof *o);
    o->want_step = -1;
    o->what = -1;
    o->rank = RESDIAG_RANK_ALL;
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
        case OPT_NO_CONSEQUENCES:
            o->no_consequences = 1;
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
        case OPT_RANK: {
            long long r = -1;
            if (!val || parse_int64(val, &r) || r < 0 || r > INT_MAX) {
                fprintf(stderr, "resdiag %s: --rank needs a rank number >= 0\n", cmd);
                return EXIT_BAD;
            }
            o->rank = (int)r;
            break;
        }
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
                                "deepnorm, parallel, mixed, none, reordered, per-sublayer "
                                "or declared\n");
                return EXIT_BAD;
            }
            break;
        case OPT_WHAT:
            if (!val || (o->what = parse_figure(val)) < 0) {
                fprintf(stderr, "resdiag plot: --what needs growth, updates, gradients or loss\n");
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
    return check_together(cmd, o, longs == plot_options, is_diff, is_check, n_files);
}

/* ----------------------------------------------------------------- dump */