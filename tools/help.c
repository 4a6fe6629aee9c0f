/*
 * help.c - the commands, their one-line summaries and their help texts;
 * `resdiag help`, `resdiag version`.
 */
#include <stdio.h>
#include <string.h>

#include <resdiag.h>

#include "command.h"

#ifndef RESDIAG_DOCDIR /* set by the build: where the docs are installed */
#define RESDIAG_DOCDIR "/usr/local/share/doc/resdiag"
#endif

static const command commands[] = {
    { "report", cmd_report, "what the run says: placement verdict, depth laws, gradients",
      "usage: resdiag report [--step N | --last] [--json | --html FILE] [--max-growth X]\n"
      "                      [--no-consequences] [--rank N] RUN.h5\n"
      "\n"
      "Tells from the recorded data (never from the declaration) where the norms\n"
      "sit: pre-norm, post-norm, sandwich, reordered, deepnorm (with alpha),\n"
      "parallel, mixed (which layers), a per-sublayer scheme, no norm, zero\n"
      "branches, inconsistent or cannot tell (naming the site that would\n"
      "decide); whether there is a\n"
      "final norm; the evidence (sketch relations between the sites, the\n"
      "normalization signature, the call order) with the trainer's file:line.\n"
      "Then the stream per layer with the fit ||x_k||^2 = a + b k and the log-log\n"
      "slope, the relative updates r_k per sublayer with fits, the gradients at\n"
      "the first recorded backward beside Xiong et al.'s prediction, the first\n"
      "non-finite value over all steps, the consequences (what the sources found\n"
      "where the measured run meets their condition: placement, depth, warm-up in\n"
      "the `lr` metric, branch scale at init), and warnings.\n"
      "\n"
      "  --step N        analyse the recorded step with the trainer's number N\n"
      "                  (default: the first recorded step, initialization)\n"
      "  --last          analyse the last recorded step\n"
      "  --json          the same as JSON (keys: doc/REPORT-JSON.md)\n"
      "  --html FILE     the same as one self-contained HTML page with figures (inline\n"
      "                  SVG, no script, no network) written to FILE ('-' = stdout)\n"
      "  --max-growth X  warn when the stream grows more than X over depth [default=10]\n"
      "  --no-consequences\n"
      "                  leave the Consequences section out\n"
      "  --rank N        the file of rank N of a job alone (default: rank 0's file\n"
      "                  with the other ranks' files beside it, merged)\n"
      "\n"
      "A job of several processes (ranks) is read from rank 0's file: the report\n"
      "merges the ranks' files beside it and says which were found, missing,\n"
      "rejected or ended early, and where the ranks disagree (doc/RANKS.md).\n"
      "\n"
      "A run whose data contradict the declared placement gets a WARNING line at\n"
      "the top (a \"declared_contradicted\" key in JSON, a warning-coloured card in\n"
      "HTML) and still exits 0: the gate is `resdiag check --expect declared`.\n"
      "\n"
      "Exit 0 with a report, 2 with one line on stderr for unusable input.\n"
      "\n"
      "How to read each part, and what to do after \"cannot tell\", \"low\" or\n"
      "\"medium\": doc/REPORT.md. The doc/ pages named here are installed in\n"
      RESDIAG_DOCDIR "/doc.\n" },
    { "check", cmd_check, "exit 0/1/2: does the run have the expected placement?",
      "usage: resdiag check --expect P [--final-norm] [--max-growth X]\n"
      "                     [--step N | --last] [--rank N] RUN.h5\n"
      "\n"
      "P is pre-norm | post-norm | sandwich | deepnorm | parallel | mixed | none\n"
      "| reordered | per-sublayer (pre and post are accepted too), or declared:\n"
      "the placement the trainer declared in the run file (with mixed, also its\n"
      "post-norm layers). Decides from the data as `resdiag report` does and\n"
      "prints one line saying why. Confidence high or medium: exit 0 or 1; low\n"
      "or cannot tell: exit 2 with the reason.\n"
      "`--expect declared` is the CI gate for a declaration: `resdiag report`\n"
      "exits 0 even when it warns that the data contradict it.\n"
      "\n"
      "  --final-norm    also require a final norm before the head\n"
      "  --max-growth X  also require the stream to grow at most X over depth\n"
      "  --rank N        check the file of rank N of a job alone (default: merged)\n"
      "\n"
      "Exit 0 it holds, 1 it does not, 2 cannot tell (e.g. stream-only evidence\n"
      "that does not separate the placements; with --expect declared, a run that\n"
      "declares nothing) or unusable input. The line saying why is on stdout in\n"
      "every case; only unusable input and bad usage write (one line) to stderr.\n" },
    { "diff", cmd_diff, "two runs side by side, the differences that matter first",
      "usage: resdiag diff [--step N | --last] [--html FILE] [--no-consequences]\n"
      "                    [--rank N] A.h5 B.h5\n"
      "\n"
      "Analyses both runs (as resdiag report does, at the first recorded step by\n"
      "default) and prints the differences that matter first - placement, final\n"
      "norm, stream growth, then the layers whose stream norm, relative update or\n"
      "first parameter gradient (the residual-write parameter, e.g. mlp.w2, if\n"
      "recorded) differ most - then both runs per layer side by side, then what\n"
      "the sources say matters (placement, warm-up, depth, branch scale at init,\n"
      "gradient exponent) for both and each run's consequences. Made for\n"
      "controlled comparisons: pre- against post-norm on the same data and seed.\n"
      "\n"
      "  --step N     the recorded step with the trainer's number N in both runs\n"
      "  --last       the last recorded step of each run\n"
      "  --html FILE  also write an HTML page with both runs overlaid on the same\n"
      "               axes to FILE ('-' = stdout instead of the text)\n"
      "  --no-consequences\n"
      "               leave the sources' comparison and consequences out\n"
      "  --rank N     the files of rank N of both jobs alone (default: merged)\n"
      "\n"
      "Exit 0 with the comparison, 2 with one line on stderr for unusable input.\n" },
    { "plot", cmd_plot, "one figure of a run as SVG (growth, updates, gradients, loss)",
      "usage: resdiag plot --what growth|updates|gradients|loss -o FILE.svg\n"
      "                    [--step N | --last] [--rank N] RUN.h5\n"
      "\n"
      "Draws one figure of the analysis (as resdiag report computes it) as a\n"
      "standalone SVG file, to paste into a paper or a pull request:\n"
      "\n"
      "  growth     the stream norm ||x_k|| over depth k with the fit\n"
      "             ||x_k||^2 = a + b k and the sqrt(d) level of a post-norm stream\n"
      "  updates    the relative updates r_k per sublayer on log-log axes with the\n"
      "             fitted power laws and the 1/sqrt(k) reference slope\n"
      "  gradients  gradient norms per layer (the first parameter: the\n"
      "             residual-write one, e.g. mlp.w2, if recorded; the stream; the\n"
      "             head) at the first recorded backward, with the pre-norm\n"
      "             shape 1/||x_k|| of Xiong et al.\n"
      "  loss       the trainer's loss over the recorded steps (the metric it\n"
      "             gives with resdiag_step_metric: \"loss\", else the first)\n"
      "\n"
      "  --what W    the figure (required)\n"
      "  -o FILE     where to write it ('-' = stdout) (required)\n"
      "  --step N    analyse the recorded step with the trainer's number N\n"
      "  --last      analyse the last recorded step\n"
      "  --rank N    the file of rank N of a job alone (default: merged)\n"
      "\n"
      "Exit 0 with the figure written, 2 with one line on stderr for unusable input\n"
      "(also when the run holds no data for the figure, e.g. no gradients).\n" },
    { "dump", cmd_dump, "print what a run file holds, step by step",
      "usage: resdiag dump [--step N | --all] [--rank N] RUN.h5\n"
      "\n"
      "Prints the run's model description and provenance, then for the first\n"
      "recorded step (or step N, or --all steps) a table of every observed site:\n"
      "tokens, Frobenius norm, per-token norm (mean, std), per-token RMS and mean,\n"
      "max |value| and its column, NaN/Inf counts, call order and the trainer's\n"
      "file:line; then the update ratios r = ||dx||/||x|| and parameter gradients.\n"
      "A job's rank 0 file shows the ranks merged; --rank N shows rank N's file.\n"
      "\n"
      "  --step N   the recorded step with the trainer's number N\n"
      "  --all      every recorded step (not with --step)\n"
      "  --rank N   the file of rank N of a job alone (default: merged)\n"
      "\n"
      "Exit 0 with the dump, 2 with one line on stderr for bad usage or unusable\n"
      "input (also a step the run did not record).\n" },
    { "watch", cmd_watch, "follow a run while it is written, in the terminal",
      "usage: resdiag watch [--once] [--interval S] RUN.h5\n"
      "\n"
      "A terminal view of a run that follows the file while the trainer writes\n"
      "it (a reader only: the trainer pays nothing), redrawn as steps are flushed:\n"
      "the verdict and its confidence at the last step, the loss and every\n"
      "declared metric, the first non-finite value (step, layer, site, direction,\n"
      "rank), the ranks found and those that ended early, then per layer the\n"
      "stream norm ||x||, r per sublayer and the stream's gradient, each with a\n"
      "sparkline of the last steps, and the warnings. A job's rank 0 file shows\n"
      "the ranks merged, as the report does. It exits when the writer closes the\n"
      "file (or ends without closing it), or on q or Ctrl-C. No colour when the\n"
      "output is not a terminal or NO_COLOR is set.\n"
      "\n"
      "  --once        print one frame and exit (no terminal codes; for scripts)\n"
      "  --interval S  seconds between refreshes (default 1)\n"
      "\n"
      "Exit 0 when the run ended or on q, 130 on Ctrl-C, 2 with one line on\n"
      "stderr for bad usage or unusable input.\n" },
    { "help", cmd_help, "show help for a command",
      "usage: resdiag help [COMMAND]\n"
      "\n"
      "Without COMMAND: the commands with one line each. With one: its help, the\n"
      "same text as `resdiag COMMAND --help`.\n"
      "\n"
      "Exit 0 with the help, 2 with one line on stderr for a command that does\n"
      "not exist.\n" },
    { "version", cmd_version, "print the version",
      "usage: resdiag version\n"
      "\n"
      "Prints \"resdiag X.Y.Z\": the version of the library the tool runs with\n"
      "(resdiag --version prints the same).\n"
      "\n"
      "Exit 0; 2 with one line on stderr for an argument it does not take.\n" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

const command *find_command(const char *name)
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
                 "follows its option as the next word or after '=' (--step 3, --step=3).\n"
                 "Reading a report: doc/REPORT.md; the docs are in " RESDIAG_DOCDIR ".\n");
}

/* 1 for -h, --help or a unique abbreviation of --help ("--he"), as
 * getopt_long reads it in the other commands. */
static int is_help_option(const char *arg)
{
    return strcmp(arg, "-h") == 0 ||
           (strncmp(arg, "--help", strlen(arg)) == 0 && strlen(arg) > 2);
}

/* The one line for arguments a command without options does not take;
 * EXIT_BAD. */
static int too_many(const char *cmd, int argc, char **argv, int most)
{
    if (argc - 1 <= most)
        return 0;
    const char *arg = argv[most + 1];
    if (arg[0] == '-' && arg[1])
        fprintf(stderr, "resdiag %s: unknown option '%s' (see resdiag %s --help)\n", cmd, arg,
                cmd);
    else
        fprintf(stderr, "resdiag %s: unexpected argument '%s' (see resdiag %s --help)\n", cmd,
                arg, cmd);
    return EXIT_BAD;
}

int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        print_overview(stdout);
        return 0;
    }
    if (is_help_option(argv[1])) { /* resdiag help --help: help's own */
        fputs(find_command("help")->usage, stdout);
        return 0;
    }
    if (too_many("help", argc, argv, 1))
        return EXIT_BAD;
    const command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "resdiag: no command '%s'\n", argv[1]);
        return EXIT_BAD;
    }
    fputs(c->usage, stdout);
    return 0;
}

int cmd_version(int argc, char **argv)
{
    if (argc >= 2 && is_help_option(argv[1])) {
        fputs(find_command("version")->usage, stdout);
        return 0;
    }
    if (too_many("version", argc, argv, 0))
        return EXIT_BAD;
    printf("resdiag %s\n", resdiag_version_string());
    return 0;
}
