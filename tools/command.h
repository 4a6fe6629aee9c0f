/*
 * command.h - what the tool's commands share: the table of commands with
 * their help, the exit code for unusable input, and the library's first
 * message kept for the tool's one line on stderr.
 */
#ifndef RESDIAG_TOOL_COMMAND_H
#define RESDIAG_TOOL_COMMAND_H

#include <stdio.h>

/* Exit codes: 0 success, 1 a check did not hold, 2 bad usage or unusable
 * input (one line on stderr says why). */
#define EXIT_BAD 2

typedef int (*cmd_fn)(int argc, char **argv);

typedef struct command {
    const char *name;
    cmd_fn fn;
    const char *summary;
    const char *usage;
} command;

/* Each takes argv[0] = its own name; returns the exit code. */
int cmd_report(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_version(int argc, char **argv);

/* The command of that name, or NULL. */
const command *find_command(const char *name);

/* The library's first message since tool_last_msg[0] was set to 0: what
 * went wrong (e.g. which dataset cannot be read); the ones after it only
 * say who gave up. tool_keep_messages installs the handler. */
extern char tool_last_msg[1024];
void tool_keep_messages(void);

/* The path as the tool prints it: a file name is any bytes (escaped by the
 * library); "?" when memory runs out. Frees the previous one: valid until
 * the next call. */
const char *tool_printable(const char *path);

#endif
