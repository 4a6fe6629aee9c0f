/*
 * cmd_report.c - `resdiag report`: the analysis as text, JSON or an HTML
 * page.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

#include "cli.h"
#include "command.h"
#include "run.h"

int cmd_report(int argc, char **argv)
{
    cli_args o;
    resdiag_reader *rd;
    resdiag_analysis *an;
    int rc;
    if (!start_analysis("report", argc, argv, &o, &rd, &an, &rc))
        return rc;
    if (o.html) {
        resdiag_html_options h;
        resdiag_html_options_init(&h);
        h.run_name = o.path;
        h.reader = rd;
        tool_last_msg[0] = 0;
        rc = write_output(o.html, resdiag_analysis_to_html(an, &h));
        end_analysis(an, rd);
        return rc;
    }
    char *text = o.json ? resdiag_analysis_to_json(an) : resdiag_analysis_to_text(an);
    if (!text) {
        fprintf(stderr, "resdiag: out of memory\n");
        rc = EXIT_BAD;
    } else {
        if (!o.json)
            printf("resdiag report %s\n", tool_printable(o.path));
        fputs(text, stdout);
    }
    resdiag_free(text);
    end_analysis(an, rd);
    return rc;
}
