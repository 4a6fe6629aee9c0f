/*
 * cmd_diff.c - `resdiag diff`: two runs side by side as text, and with
 * --html as a page with both runs on the same axes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

#include "cli.h"
#include "command.h"
#include "run.h"

int cmd_diff(int argc, char **argv)
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
        tool_last_msg[0] = 0;
        rc = write_output(html, resdiag_analysis_diff_html(an[0], an[1], paths[0], paths[1]));
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
    for (int k = 0; k < 2; k++)
        end_analysis(an[k], rd[k]);
    return rc;
}
