/*
 * cmd_watch.c - `resdiag watch`: a terminal view that follows a run while
 * it is written (a reader only: the trainer pays nothing), redrawn as
 * steps are flushed, until the writer closes the file or the user presses
 * q or Ctrl-C. The frame itself is made in watch_frame.c.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <resdiag.h>

#include "command.h"
#include "watch.h"

static volatile sig_atomic_t got_stop;   /* SIGINT, SIGTERM, SIGHUP: the signal */
static volatile sig_atomic_t got_resize; /* SIGWINCH */

static struct termios saved_tio;
static int tio_saved;

static void on_stop(int sig) { got_stop = sig; }
static void on_resize(int sig) { (void)sig; got_resize = 1; }

/* The terminal as it was; the cursor shown again. Safe to call twice. */
static void restore_terminal(void)
{
    if (tio_saved) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
        tio_saved = 0;
    }
}

/* Keys one at a time, unechoed, only when stdin is a terminal; ISIG stays,
 * so Ctrl-C is SIGINT. */
static void raw_keys(void)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio) != 0)
        return;
    struct termios t = saved_tio;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
        tio_saved = 1;
    atexit(restore_terminal);
}

/* The tool's own handlers (it is the tool, not the library): no
 * SA_RESTART, so poll wakes at once. */
static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_resize;
    sigaction(SIGWINCH, &sa, NULL);
}

static void term_size(int tty, int *cols, int *rows)
{
    struct winsize ws;
    *cols = 100;
    *rows = 0; /* not a terminal: no height limit */
    if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        *cols = ws.ws_col;
        *rows = ws.ws_row;
    }
}

/* Waits up to ms for a key; 1 when q (or Q) was pressed. */
static int wait_key(int ms)
{
    if (!tio_saved) {
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL); /* a signal ends it early */
        return 0;
    }
    struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char c[16];
    ssize_t n = read(STDIN_FILENO, c, sizeof c);
    for (ssize_t i = 0; i < n; i++)
        if (c[i] == 'q' || c[i] == 'Q')
            return 1;
    return 0;
}

static int parse_args(int argc, char **argv, watch_opts *w)
{
    static const struct option longs[] = {
        { "help", no_argument, NULL, 'h' },
        { "once", no_argument, NULL, 'O' },
        { "interval", required_argument, NULL, 'I' },
        { NULL, 0, NULL, 0 },
    };
    memset(w, 0, sizeof *w);
    w->interval = 1.0;
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'h':
            fputs(find_command("watch")->usage, stdout);
            return -1;
        case 'O':
            w->once = 1;
            break;
        case 'I':
            errno = 0;
            w->interval = strtod(optarg, &end);
            if (errno || end == optarg || *end || !isfinite(w->interval) ||
                w->interval < 0.05 || w->interval > 3600) {
                fprintf(stderr, "resdiag watch: --interval needs seconds from 0.05 to 3600\n");
                return EXIT_BAD;
            }
            break;
        case ':':
            fprintf(stderr, "resdiag watch: --interval needs seconds from 0.05 to 3600\n");
            return EXIT_BAD;
        default:
            fprintf(stderr, "resdiag watch: unknown option '%s' (see resdiag watch --help)\n",
                    argv[optind - 1]);
            return EXIT_BAD;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "resdiag watch: no run file given (see resdiag watch --help)\n");
        return EXIT_BAD;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "resdiag watch: one run file at a time\n");
        return EXIT_BAD;
    }
    w->path = argv[optind];
    return 0;
}

/* Draws one frame; EXIT_BAD after one line on stderr when the file cannot
 * be read (before any frame: a bad file prints nothing else). */
static int draw(resdiag_reader *rd, watch_opts *w, watch_state *ws, int tty)
{
    term_size(tty, &w->cols, &w->rows);
    char *frame = NULL;
    if (watch_frame(rd, w, ws, &frame) != 0)
        return EXIT_BAD;
    if (tty)
        fputs("\033[H", stdout);
    fputs(frame, stdout);
    if (tty)
        fputs("\033[J", stdout);
    else if (!w->once)
        fputs("\n", stdout);
    fflush(stdout);
    free(frame);
    return 0;
}

int cmd_watch(int argc, char **argv)
{
    watch_opts w;
    int rc = parse_args(argc, argv, &w);
    if (rc)
        return rc < 0 ? 0 : rc;
    resdiag_reader *rd = NULL;
    tool_last_msg[0] = 0;
    if (resdiag_reader_open(&rd, w.path) != RESDIAG_OK) {
        fprintf(stderr, "resdiag: %s\n",
                tool_last_msg[0] ? tool_last_msg : "cannot read the run file");
        return EXIT_BAD;
    }
    int tty = isatty(STDOUT_FILENO) && !w.once;
    const char *nc = getenv("NO_COLOR");
    w.colour = tty && !(nc && nc[0]);
    watch_state ws;
    watch_state_init(&ws);
    if (w.once) {
        rc = draw(rd, &w, &ws, 0);
        goto out;
    }
    install_signals();
    raw_keys();
    if (tty)
        fputs("\033[2J", stdout);
    for (;;) {
        resdiag_file_state fs = RESDIAG_FILE_UNKNOWN;
        resdiag_reader_file_state(rd, &fs);  /* before the refresh: no step is missed */
        if (resdiag_reader_refresh(rd) != RESDIAG_OK) {
            fprintf(stderr, "resdiag: %s\n",
                    tool_last_msg[0] ? tool_last_msg : "cannot read the run file");
            rc = EXIT_BAD;
            break;
        }
        w.file_state = fs;
        int64_t n = resdiag_reader_info(rd)->n_steps;
        if (n != ws.drawn_steps || got_resize || fs != ws.drawn_state) {
            got_resize = 0;
            if ((rc = draw(rd, &w, &ws, tty)) != 0)
                break;
        }
        if (fs == RESDIAG_FILE_CLOSED || fs == RESDIAG_FILE_NOT_CLOSED || got_stop)
            break; /* the writer is done (or gone): the last frame stays */
        if (wait_key((int)(w.interval * 1000)) || got_stop)
            break;
    }
    restore_terminal();
    if (got_stop == SIGINT)
        rc = rc ? rc : 130;
out:
    watch_state_free(&ws);
    resdiag_reader_destroy(rd);
    return rc;
}
