/*
 * cli.h - the command line of the commands that read run files: their
 * options and file names, parsed and checked together.
 */
#ifndef RESDIAG_TOOL_CLI_H
#define RESDIAG_TOOL_CLI_H

#include <resdiag.h>

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
    int what;            /* plot --what (a resdiag_figure), -1: none */
    const char *out;     /* plot -o FILE */
    int no_consequences; /* report/diff --no-consequences */
    int rank;            /* --rank N: that rank's file alone; RESDIAG_RANK_ALL: the job */
} cli_args;

/* Parses the options of cmd ("report", "check", "diff", "plot" or "dump";
 * argv[0] is the command's name) and checks what they need together.
 * Returns -1 after printing help, EXIT_BAD after one line on stderr, 0 to
 * go on. */
int parse_cli_args(const char *cmd, int argc, char **argv, cli_args *o);

#endif
