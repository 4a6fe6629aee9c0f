/*
 * resdiag.c - the command-line tool: `resdiag <command> [args]`.
 *
 * Exit codes: 0 success, 1 a check did not hold, 2 bad usage or unusable
 * input (one line on stderr says why).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resdiag.h>

#define EXIT_BAD 2

typedef int (*cmd_fn)(int argc, char **argv);

typedef struct command {
    const char *name;
    cmd_fn fn;
    const char *summary;
    const char *usage;
} command;

static int cmd_dump(int argc, char **argv);
static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const command commands[] = {
    { "dump", cmd_dump, "print what a run file holds, step by step",
      "usage: resdiag dump [--step N | --all] RUN.h5\n"
      "\n"
      "Prints the run's model description and provenance, then for the first\n"
      "recorded step (or step N, or --all steps) a table of every observed site:\n"
      "tokens, Frobenius norm, per-token norm (mean, std), per-token RMS and mean,\n"
      "max |value| and its column, NaN/Inf counts, call order and the trainer's\n"
      "file:line; then the update ratios r = ||dx||/||x|| and parameter gradients.\n" },
    { "help", cmd_help, "show help for a command", "usage: resdiag help [COMMAND]\n" },
    { "version", cmd_version, "print the version", "usage: resdiag version\n" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* The library's messages: keep the last one, to print as the tool's one line. */
static char last_msg[1024];
static void keep_message(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    snprintf(last_msg, sizeof last_msg, "%s", msg);
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_overview(FILE *out)
{
    fprintf(out, "usage: resdiag <command> [args]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'resdiag help COMMAND' or 'resdiag COMMAND --help' for more.\n");
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        print_overview(stdout);
        return 0;
    }
    const command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "resdiag: no command '%s'\n", argv[1]);
        return EXIT_BAD;
    }
    fputs(c->usage, stdout);
    return 0;
}

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("resdiag %s\n", resdiag_version_string());
    return 0;
}

/* ----------------------------------------------------------------- dump */

static int parse_int64(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static void print_value(double v, int width)
{
    if (isnan(v))
        printf(" %*s", width, "-");
    else
        printf(" %*.*g", width, width > 9 ? 6 : 5, v);
}

static int print_site_row(const resdiag_reader *rd, int64_t si, resdiag_direction dir,
                          int layer, int sub, resdiag_site site, const char *label)
{
    double f[RESDIAG_N_FIELDS];
    int observed = 0;
    if (resdiag_reader_site(rd, si, dir, layer, sub, site, f, &observed) || !observed)
        return 0;
    printf("  %-22s %-14s", label, resdiag_site_name(site));
    printf(" %7.0f", f[RESDIAG_FIELD_ROWS]);
    print_value(f[RESDIAG_FIELD_FROB], 11);
    print_value(f[RESDIAG_FIELD_TOK_NORM_MEAN], 11);
    print_value(f[RESDIAG_FIELD_TOK_NORM_STD], 10);
    print_value(f[RESDIAG_FIELD_TOK_RMS_MEAN], 10);
    print_value(f[RESDIAG_FIELD_TOK_MEAN_MEAN], 10);
    print_value(f[RESDIAG_FIELD_ABSMAX], 10);
    printf(" %5.0f", isnan(f[RESDIAG_FIELD_ABSMAX_COL]) ? -1 : f[RESDIAG_FIELD_ABSMAX_COL]);
    printf(" %5.0f %5.0f %4.0f  %s\n", f[RESDIAG_FIELD_NAN_COUNT], f[RESDIAG_FIELD_INF_COUNT],
           f[RESDIAG_FIELD_CALL_SEQ], resdiag_reader_callsite(rd, dir, layer, sub, site));
    return 1;
}

static void dump_step(const resdiag_reader *rd, int64_t si, int64_t step)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    printf("\nstep %lld (record %lld of %lld)\n", (long long)step, (long long)si + 1,
           (long long)in->n_steps);
    printf("  %-22s %-14s %7s %11s %11s %10s %10s %10s %10s %5s %5s %5s %4s  %s\n", "where",
           "site", "tokens", "||x||_F", "tok_norm", "tok_sd", "tok_rms", "tok_mean", "absmax",
           "col", "nan", "inf", "seq", "call site");
    for (int dir = 0; dir < 2; dir++) {
        const char *dname = dir == RESDIAG_FORWARD ? "fwd" : "grad";
        char label[96];
        for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++) {
            snprintf(label, sizeof label, "%s model", dname);
            print_site_row(rd, si, (resdiag_direction)dir, 0, 0,
                           (resdiag_site)(RESDIAG_EMBED_OUT + m), label);
        }
        for (int l = 0; l < in->n_layers; l++)
            for (int s = 0; s < in->n_sublayers; s++)
                for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                    snprintf(label, sizeof label, "%s L%d %s", dname, l, in->sublayer_names[s]);
                    print_site_row(rd, si, (resdiag_direction)dir, l, s, (resdiag_site)site,
                                   label);
                }
    }
    int header = 0;
    for (int l = 0; l < in->n_layers; l++)
        for (int s = 0; s < in->n_sublayers; s++) {
            double u[RESDIAG_N_UPDATE_FIELDS];
            if (resdiag_reader_update(rd, si, l, s, u) || isnan(u[0]))
                continue;
            if (!header++)
                printf("  update ratio r = ||dx||/||x||:  %-16s %12s %14s\n", "where",
                       "frobenius", "mean per token");
            printf("  %32s  L%-3d %-11s %12.6g %14.6g\n", "", l, in->sublayer_names[s], u[0],
                   u[1]);
        }
    header = 0;
    for (int l = -1; l < in->n_layers; l++) {
        int np = l < 0 ? in->n_model_params : in->n_layer_params;
        const char *const *names = l < 0 ? in->model_param_names : in->layer_param_names;
        for (int p = 0; p < np; p++) {
            double f[RESDIAG_N_FIELDS];
            int observed = 0;
            if (resdiag_reader_param(rd, si, l < 0 ? RESDIAG_MODEL_LEVEL : l, names[p], f,
                                     &observed) || !observed)
                continue;
            if (!header++)
                printf("  parameter gradients:  %-20s %12s %12s %6s %6s\n", "where", "||g||_F",
                       "absmax", "nan", "inf");
            char where[96];
            if (l < 0)
                snprintf(where, sizeof where, "model %s", names[p]);
            else
                snprintf(where, sizeof where, "L%d %s", l, names[p]);
            printf("  %22s %-20s %12.6g %12.6g %6.0f %6.0f\n", "", where,
                   f[RESDIAG_FIELD_FROB], f[RESDIAG_FIELD_ABSMAX], f[RESDIAG_FIELD_NAN_COUNT],
                   f[RESDIAG_FIELD_INF_COUNT]);
        }
    }
}

static void dump_header(const char *path, const resdiag_run_info *in, const int64_t *steps)
{
    printf("%s: resdiag run file, schema %d, written by resdiag %s with HDF5 %s\n", path,
           in->schema_version, in->resdiag_version, in->hdf5_version);
    printf("  created %s by %s\n", in->created_utc, in->program);
    if (in->description[0])
        printf("  description: %s\n", in->description);
    printf("  model: %d layers, d_model %d, %s block of", in->n_layers, in->d_model,
           in->block == RESDIAG_BLOCK_PARALLEL ? "parallel" : "sequential");
    for (int s = 0; s < in->n_sublayers; s++)
        printf(" %s", in->sublayer_names[s]);
    printf("\n  declared: placement %s", resdiag_placement_name(in->declared_placement));
    if (in->declared_placement == RESDIAG_PLACEMENT_MIXED)
        printf(" (post-norm in layers 0..%d)", in->declared_mix_layers - 1);
    printf(", norm %s", resdiag_norm_kind_name(in->norm_kind));
    if (in->shard_cols)
        printf(", shard width %d", in->shard_cols);
    printf("\n  sketch: %d projections (seed %llu)\n", in->sketch_size,
           (unsigned long long)in->sketch_seed);
    for (int i = 0; i < in->n_meta; i++)
        printf("  meta %s = %s\n", in->meta[2 * i], in->meta[2 * i + 1]);
    if (in->n_steps > 0)
        printf("  recorded: %lld steps, step %lld .. %lld\n", (long long)in->n_steps,
               (long long)steps[0], (long long)steps[in->n_steps - 1]);
    else
        printf("  recorded: no steps\n");
}

static int cmd_dump(int argc, char **argv)
{
    const char *path = NULL;
    long long want_step = -1;
    int all = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(find_command("dump")->usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--all") == 0) {
            all = 1;
        } else if (strcmp(argv[i], "--step") == 0) {
            if (i + 1 >= argc || parse_int64(argv[i + 1], &want_step) || want_step < 0) {
                fprintf(stderr, "resdiag dump: --step needs a step number >= 0\n");
                return EXIT_BAD;
            }
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "resdiag dump: unknown option '%s' (see resdiag dump --help)\n",
                    argv[i]);
            return EXIT_BAD;
        } else if (path) {
            fprintf(stderr, "resdiag dump: one run file at a time\n");
            return EXIT_BAD;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "resdiag dump: no run file given (see resdiag dump --help)\n");
        return EXIT_BAD;
    }
    resdiag_reader *rd = NULL;
    if (resdiag_reader_open(&rd, path) != RESDIAG_OK) {
        fprintf(stderr, "resdiag: %s\n", last_msg[0] ? last_msg : "cannot read the run file");
        return EXIT_BAD;
    }
    const resdiag_run_info *in = resdiag_reader_info(rd);
    int64_t n = in->n_steps;
    int64_t *steps = calloc(n > 0 ? (size_t)n : 1, sizeof *steps);
    if (!steps || (n > 0 && resdiag_reader_steps(rd, steps, n) != RESDIAG_OK)) {
        fprintf(stderr, "resdiag: %s: cannot read the step numbers\n", path);
        free(steps);
        resdiag_reader_close(rd);
        return EXIT_BAD;
    }
    dump_header(path, in, steps);
    int rc = 0;
    if (want_step >= 0) {
        int64_t si = 0;
        while (si < n && steps[si] != want_step)
            si++;
        if (si == n) {
            fprintf(stderr, "resdiag: %s: step %lld was not recorded\n", path, want_step);
            rc = EXIT_BAD;
        } else {
            dump_step(rd, si, steps[si]);
        }
    } else {
        for (int64_t si = 0; si < (all ? n : (n > 0 ? 1 : 0)); si++)
            dump_step(rd, si, steps[si]);
    }
    free(steps);
    resdiag_reader_close(rd);
    return rc;
}

int main(int argc, char **argv)
{
    resdiag_set_log_handler(keep_message, NULL);
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
    return rc;
}
