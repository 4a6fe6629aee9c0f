/*
 * cmd_plot.c - `resdiag plot`: one figure of a run as a standalone SVG
 * file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

#include "cli.h"
#include "command.h"
#include "run.h"

int cmd_plot(int argc, char **argv)
{
    cli_args o;
    resdiag_reader *rd;
    resdiag_analysis *an;
    int rc;
    if (!start_analysis("plot", argc, argv, &o, &rd, &an, &rc))
        return rc;
    char *svg = NULL;
    tool_last_msg[0] = 0;
    resdiag_figure what = (resdiag_figure)o.what;
    if (resdiag_analysis_figure_svg(an, what, &svg) == RESDIAG_E_NOT_FOUND) {
        fprintf(stderr, "resdiag plot: %s: the run holds no data for the %s figure\n", o.path,
                resdiag_figure_name(what));
        rc = EXIT_BAD;
    } else {
        rc = write_output(o.out, svg);
    }
    end_analysis(an, rd);
    return rc;
}
