/*
 * run.h - what the commands do with a run file alike: open and analyse it
 * at the step the options name, and write a page or figure to a file.
 */
#ifndef RESDIAG_TOOL_RUN_H
#define RESDIAG_TOOL_RUN_H

#include <stdint.h>

#include <resdiag.h>

#include "cli.h"

/* Opens and analyses the run o->path at the step of --step / --last, with
 * --max-growth; on failure prints one line on stderr and returns NULL.
 * *rdp: the open reader, for the caller to close after the analysis. */
resdiag_analysis *open_analysis(const cli_args *o, resdiag_reader **rdp);

/* The start of report, check and plot: parses the options of cmd, then
 * opens and analyses its run. 1 to go on with *an and *rd (for
 * end_analysis); else 0 with *rc the exit code (after the help, or
 * EXIT_BAD after one line on stderr). */
int start_analysis(const char *cmd, int argc, char **argv, cli_args *o, resdiag_reader **rd,
                   resdiag_analysis **an, int *rc);
void end_analysis(resdiag_analysis *an, resdiag_reader *rd);

/* Finds the index of the recorded step want_step of rd (< 0: none, *index
 * 0, only the step numbers are read); 0 with *index, or EXIT_BAD after one
 * line on stderr ("step N was not recorded", or the step numbers cannot
 * be read). */
int find_step(const resdiag_reader *rd, const char *path, long long want_step,
              int64_t *index);

/* Writes a page or figure (NULL: it could not be made) to path ('-' =
 * stdout) and frees it with resdiag_free; 0, or EXIT_BAD after one line on
 * stderr. */
int write_output(const char *path, char *text);

#endif
