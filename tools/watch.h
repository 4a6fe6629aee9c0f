/*
 * watch.h - what `resdiag watch`'s loop (cmd_watch.c) and its frame
 * (watch_frame.c) share.
 */
#ifndef RESDIAG_TOOL_WATCH_H
#define RESDIAG_TOOL_WATCH_H

#include <stdint.h>

#include <resdiag.h>

typedef struct watch_opts {
    const char *path;
    int once;                  /* --once: one frame, no terminal codes */
    double interval;           /* --interval S */
    int colour;                /* a terminal and no NO_COLOR */
    int cols, rows;            /* the terminal's size; rows 0: no limit */
    resdiag_file_state file_state;
} watch_opts;

/* What one frame leaves for the next. */
typedef struct watch_state {
    int64_t drawn_steps;       /* steps in the last frame, -1 before the first */
    resdiag_file_state drawn_state;
    int nonfinite_rank;        /* the rank of the first non-finite value, -1: not known */
    int64_t nonfinite_step;    /* the step it was found for, -1: none yet */
} watch_state;

void watch_state_init(watch_state *ws);
void watch_state_free(watch_state *ws);

/* The frame for the run behind rd as it is now into *out (malloc'd; lines
 * fit w->cols, at most w->rows). 0, or EXIT_BAD after one line on stderr. */
int watch_frame(resdiag_reader *rd, const watch_opts *w, watch_state *ws, char **out);

#endif
