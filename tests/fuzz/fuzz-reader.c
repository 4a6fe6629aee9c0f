/*
 * fuzz-reader.c - libFuzzer harness: the input bytes are a run file. It is
 * opened with resdiag_reader_open and read through every reader call (info,
 * steps, sites, sketches, parameters, updates, callsites, series, the
 * generic datasets), analysed at the first and the last step, and printed
 * as text, JSON, a check and a diff: everything `resdiag report`, `check`,
 * `diff` and `dump` do, in one process. The library must not crash, must
 * answer every call with a status, and must leave no HDF5 object open; what
 * it prints (reports, the check's line, log messages) must be valid UTF-8
 * without control characters but the report's own newlines, whatever
 * strings the file holds.
 *
 * Built twice from this file: with -fsanitize=fuzzer (-Dfuzz=true, clang)
 * and, with tests/fuzz/replay-main.c, as a plain program for `meson test`.
 */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resdiag.h"
#include "common/utf8.h"

/* Loops over what the file declares are cut here, so that a file claiming
 * a million layers costs time once in the reader, not per site here. */
enum { CAP_LAYERS = 6, CAP_SUBLAYERS = 4, CAP_STEPS = 1 << 16, CAP_VALUES = 1 << 20 };

static char path[4096];
static volatile size_t sink; /* keeps the reads of strings from being dropped */
static int trace; /* FUZZ_READER_TRACE=1: the library's messages on stderr */

static void quiet_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    if (!msg || rd_utf8_check(msg, 0, NULL) != RD_TEXT_OK)
        abort();
    if (trace)
        fprintf(stderr, "  log: %s\n", msg);
    sink += strlen(msg);
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz-reader: %s\n", what);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    resdiag_set_log_handler(quiet_log, NULL);
    resdiag_set_log_priority(RESDIAG_LOG_DEBUG);
    trace = getenv("FUZZ_READER_TRACE") != NULL;
    /* The file lives in memory where /dev/shm exists: no disk traffic.
     * (Not a memfd: HDF5 wants the real path of what it opens.) */
    const char *tmp = getenv("TMPDIR");
    if (access("/dev/shm", W_OK) == 0)
        tmp = "/dev/shm";
    snprintf(path, sizeof path, "%s/fuzz-reader-%ld.h5", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
    return 0;
}

static int write_input(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, size, f);
    return fclose(f) == 0 && w == size ? 0 : -1;
}

static void touch(const char *s)
{
    if (!s)
        fail("a string of the reader is NULL");
    sink += strlen(s);
}

/* Printed output: valid UTF-8, no control character but newlines (and
 * tabs) of its own; lines = 0 for one line. */
static void touch_output(const char *s, int lines)
{
    touch(s);
    if (rd_utf8_check(s, lines, NULL) != RD_TEXT_OK)
        fail("the output holds a control character or is not UTF-8");
}

static void touch_names(const char *const *v, int n)
{
    if (n > 0 && !v)
        fail("a name list is NULL");
    for (int i = 0; i < n; i++)
        touch(v[i]);
}

static void analyse(const resdiag_reader *rd, int64_t which, resdiag_analysis **keep)
{
    resdiag_analyze_options ao;
    resdiag_analyze_options_init(&ao);
    ao.step_index = which;
    resdiag_analysis *a = NULL;
    resdiag_status st = resdiag_analyze(rd, &ao, &a);
    if ((st == RESDIAG_OK) != (a != NULL))
        fail("resdiag_analyze: status and result disagree");
    if (!a)
        return;
    char *text = resdiag_analysis_to_text(a), *json = resdiag_analysis_to_json(a);
    touch_output(text, 1);
    touch_output(json, 1);
    resdiag_free(text);
    resdiag_free(json);
    for (int p = RESDIAG_PLACEMENT_PRE; p <= RESDIAG_PLACEMENT_NONE; p++) {
        resdiag_check_options co;
        resdiag_check_options_init(&co);
        co.expect = (resdiag_placement)p;
        co.require_final_norm = p & 1;
        co.max_growth = p == 2 ? 3 : 0;
        char why[512];
        resdiag_check_result cr = resdiag_analysis_check(a, &co, why, sizeof why);
        if ((unsigned)cr > RESDIAG_CHECK_CANNOT_TELL)
            fail("check result out of range");
        touch_output(why, 0);
    }
    int64_t step;
    int layer, sub, site;
    resdiag_direction dir;
    resdiag_analysis_first_nonfinite(a, &step, &layer, &sub, &site, &dir);
    for (int l = -1; l <= CAP_LAYERS; l++)
        for (int s = -1; s <= CAP_SUBLAYERS; s++) {
            double alpha;
            touch(resdiag_verdict_name(resdiag_analysis_sublayer(a, l, s, &alpha)));
        }
    touch(resdiag_verdict_name(resdiag_analysis_verdict(a)));
    touch(resdiag_confidence_name(resdiag_analysis_confidence(a)));
    sink += (size_t)resdiag_analysis_mix_layers(a) + (size_t)resdiag_analysis_final_norm(a) +
            (size_t)resdiag_analysis_stream_only(a) + (size_t)resdiag_analysis_step(a);
    if (*keep) {
        char *diff = resdiag_analysis_diff_text(*keep, a, "first", NULL);
        touch_output(diff, 1);
        resdiag_free(diff);
        resdiag_analysis_destroy(a);
    } else {
        *keep = a;
    }
}

static void read_everything(resdiag_reader *rd)
{
    const resdiag_run_info *in = resdiag_reader_info(rd);
    if (!in)
        fail("reader_info is NULL");
    touch(in->resdiag_version);
    touch(in->description);
    touch(in->created_utc);
    touch(in->program);
    touch(in->hdf5_version);
    touch_names(in->sublayer_names, in->n_sublayers);
    touch_names(in->layer_param_names, in->n_layer_params);
    touch_names(in->model_param_names, in->n_model_params);
    touch_names(in->meta, 2 * in->n_meta);
    if (in->n_steps < 0 || in->sketch_size < 0 || in->sketch_size > RESDIAG_MAX_SKETCH)
        fail("info out of range");

    int64_t n = in->n_steps < CAP_STEPS ? in->n_steps : CAP_STEPS;
    int64_t *steps = calloc((size_t)n + 1, sizeof *steps);
    double *series = calloc((size_t)n + 1, sizeof *series);
    if (!steps || !series)
        fail("out of memory");
    resdiag_reader_steps(rd, steps, n);
    resdiag_reader_steps(rd, steps, n + 1); /* one too many: refused, not overrun */

    int L = in->n_layers < CAP_LAYERS ? in->n_layers : CAP_LAYERS;
    int S = in->n_sublayers < CAP_SUBLAYERS ? in->n_sublayers : CAP_SUBLAYERS;
    int64_t picks[3] = { 0, n / 2, n - 1 };
    double out[RESDIAG_N_FIELDS + RESDIAG_MAX_SKETCH];
    static const int sites[] = { 0, 1, 2, 3, 4, 16, 17, 18, 19, 5, -1 };
    for (int d = 0; d <= 2; d++)
        for (int l = -1; l <= L; l++)
            for (int s = -1; s <= S; s++)
                for (size_t k = 0; k < sizeof sites / sizeof *sites; k++) {
                    resdiag_direction dir = (resdiag_direction)d;
                    resdiag_site site = (resdiag_site)sites[k];
                    int obs;
                    for (int p = 0; p < 3; p++) {
                        resdiag_reader_site(rd, picks[p], dir, l, s, site, out, &obs);
                        resdiag_reader_sketch(rd, picks[p], dir, l, s, site, out);
                    }
                    const char *cs = resdiag_reader_callsite(rd, dir, l, s, site);
                    if (cs)
                        touch(cs);
                    if (k < 5 || k == 8)
                        resdiag_reader_series(rd, dir, l, s, site,
                                              (resdiag_field)((l + s + (int)k) & 15), series, n);
                }
    for (int l = -1; l <= L; l++) {
        int obs;
        for (int i = 0; i < in->n_layer_params && i < 4; i++)
            resdiag_reader_param(rd, picks[2], l, in->layer_param_names[i], out, &obs);
        for (int i = 0; i < in->n_model_params && i < 4; i++)
            resdiag_reader_param(rd, 0, RESDIAG_MODEL_LEVEL, in->model_param_names[i], out,
                                 &obs);
        resdiag_reader_param(rd, 0, l, "no.such", out, &obs);
        for (int s = -1; s <= S; s++)
            resdiag_reader_update(rd, picks[1], l, s, out);
    }

    int nd = resdiag_reader_n_datasets(rd);
    for (int i = -1; i <= nd; i++) {
        const char *name = resdiag_reader_dataset_name(rd, i);
        if (!name)
            continue;
        touch(name);
        int64_t dims[8];
        int rank = 0;
        if (resdiag_reader_dims(rd, name, dims, 8, &rank) != RESDIAG_OK)
            continue;
        if (rank < 1 || rank > 8)
            fail("reader_dims: rank out of range");
        double per = 1;
        for (int k = 1; k < rank; k++)
            per *= (double)dims[k];
        int64_t count = n < 3 ? n : 3;
        if (per * (double)(count + 1) > CAP_VALUES)
            continue;
        size_t len = (size_t)per * (size_t)(count + 1);
        double *v = malloc((len + 1) * sizeof *v);
        if (!v)
            fail("out of memory");
        resdiag_reader_read(rd, name, 0, count, v, len);
        resdiag_reader_read(rd, name, n - count, count, v, len);
        resdiag_reader_read(rd, name, 0, count + 1, v, len); /* past the end */
        resdiag_reader_read(rd, name, 0, count, v, 0);        /* no room */
        free(v);
    }

    resdiag_analysis *first = NULL;
    analyse(rd, RESDIAG_STEP_FIRST, &first);
    analyse(rd, RESDIAG_STEP_LAST, &first);
    analyse(rd, n / 2, &first);
    resdiag_analysis_destroy(first);
    free(steps);
    free(series);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0])
        LLVMFuzzerInitialize(NULL, NULL);
    if (write_input(data, size) != 0)
        return 0;
    resdiag_reader *rd = NULL;
    resdiag_status st = resdiag_reader_open(&rd, path);
    if ((st == RESDIAG_OK) != (rd != NULL))
        fail("reader_open: status and result disagree");
    if (rd) {
        read_everything(rd);
        resdiag_reader_refresh(rd);
        read_everything(rd);
        resdiag_reader_destroy(rd);
    }
    if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0)
        fail("HDF5 objects left open after resdiag_reader_destroy");
    unlink(path);
    return 0;
}
