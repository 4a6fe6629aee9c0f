/*
 * main.c - the command-line tool: `resdiag <command> [args]` runs the
 * command of that name (help.c lists them, one file per command).
 *
 * Exit codes: 0 success, 1 a check did not hold, 2 bad usage or unusable
 * input (one line on stderr says why).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>
#include <resdiag.h>

#include "command.h"

int main(int argc, char **argv)
{
    /* A run file names its filters: HDF5 would look for one it does not
     * have among the shared objects in HDF5_PLUGIN_PATH and run their code.
     * resdiag writes no filters, and the reader refuses files with any. */
    H5PLset_loading_state(0);
    tool_keep_messages();
    if (argc < 2) {
        fprintf(stderr, "resdiag: no command given (see resdiag --help)\n");
        return EXIT_BAD;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return cmd_help(1, argv);
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(1, argv);
    const command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "resdiag: '%s' is not a command (see resdiag --help)\n", argv[1]);
        return EXIT_BAD;
    }
    int rc = c->fn(argc - 1, argv + 1);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "resdiag: cannot write the output: %s\n", strerror(errno));
        return EXIT_BAD;
    }
    /* After some damaged files HDF5 cannot shut down, and its exit handler
     * prints "HDF5: infinite loop closing library" (tests/fuzz): a refused
     * file ends with the tool's one line. Only reads happened: nothing is
     * left to write. */
    if (rc == EXIT_BAD) {
        fflush(stderr);
        _exit(rc);
    }
    return rc;
}
