/*
 * cmd_dump.c - `resdiag dump`: what a run file holds, step by step
 * (resdiag_reader_dump).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

#include "cli.h"
#include "command.h"
#include "run.h"

int cmd_dump(int argc, char **argv)
{
    cli_args o;
    int rc = parse_cli_args("dump", argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    resdiag_reader *rd = NULL;
    tool_last_msg[0] = 0;
    if (resdiag_reader_open_rank(&rd, o.path, o.rank) != RESDIAG_OK) {
        fprintf(stderr, "resdiag: %s\n",
                tool_last_msg[0] ? tool_last_msg : "cannot read the run file");
        return EXIT_BAD;
    }
    /* Find the step before printing anything: unusable input prints only
     * the one line on stderr. */
    resdiag_dump_options d;
    resdiag_dump_options_init(&d);
    d.run_name = o.path;
    resdiag_rank_info ri = { .struct_size = sizeof ri };
    if (o.rank >= 0 && resdiag_reader_rank(rd, 0, &ri) == RESDIAG_OK)
        d.run_name = ri.path; /* that rank's own file */
    d.n_steps = o.all ? -1 : 1;
    if (find_step(rd, o.path, o.want_step, &d.first_index) != 0) {
        resdiag_reader_destroy(rd);
        return EXIT_BAD;
    }
    char *text = NULL;
    tool_last_msg[0] = 0;
    resdiag_status st = resdiag_reader_dump(rd, &d, &text);
    if (st == RESDIAG_OK)
        fputs(text, stdout);
    else if (st == RESDIAG_E_NOMEM)
        fprintf(stderr, "resdiag: out of memory\n");
    else
        fprintf(stderr, "resdiag: %s\n",
                tool_last_msg[0] ? tool_last_msg : "cannot read the run file");
    resdiag_free(text);
    resdiag_reader_destroy(rd);
    return st == RESDIAG_OK ? 0 : EXIT_BAD;
}
