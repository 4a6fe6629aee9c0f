/*
 * cmd_check.c - `resdiag check`: exit 0, 1 or 2 as the run has the
 * expected placement, does not, or cannot tell; one line saying why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

#include "cli.h"
#include "command.h"
#include "run.h"

int cmd_check(int argc, char **argv)
{
    cli_args o;
    resdiag_reader *rd;
    resdiag_analysis *an;
    int rc;
    if (!start_analysis("check", argc, argv, &o, &rd, &an, &rc))
        return rc;
    resdiag_check_options c;
    resdiag_check_options_init(&c);
    c.expect = o.expect;
    c.require_final_norm = o.final_norm;
    c.max_growth = o.have_growth ? o.max_growth : 0;
    char why[512];
    resdiag_check_result r = resdiag_analysis_check(an, &c, why, sizeof why);
    /* the verdict is the command's output: one line on stdout whatever it
     * says (holds, does not, cannot tell); stderr is for errors and usage */
    fprintf(stdout, "resdiag check: %s: %s\n", tool_printable(o.path),
            why); /* why comes escaped */
    end_analysis(an, rd);
    return (int)r;
}
