/*
 * test-ranks-writer.c - the writing side of jobs of several ranks
 * (doc/RANKS.md, "Writing"): the rank files' names, the rank from explicit
 * fields or the launchers' environment in the documented order, the
 * checks of the rank fields, ranks that do not record, the rank
 * attributes of every file (read back with the HDF5 C API), the row signs
 * of data-parallel ranks, tensor-parallel shards whose sketches add up to
 * the whole tensor's, and the layers of a pipeline stage.
 *
 * The environment is changed in this process (setenv/unsetenv) between
 * opens: the library reads it at every open and caches nothing.
 */
#include <check.h>
#include <hdf5.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check-one.h"
#include "fixture.h"
#include "path-bounds.h"
#include "resdiag.h"
#include "run-files.h"
#include "stats/stats.h"

/* ------------------------------------------------------------- helpers */

/* Every variable that a launcher sets and the library reads. */
static const char *const launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid",
    "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID",
};

/* Unsets every launcher variable, then sets the NULL-terminated pairs. */
static void launcher_env(const char *const *kv)
{
    for (size_t i = 0; i < sizeof launcher_vars / sizeof *launcher_vars; i++)
        unsetenv(launcher_vars[i]);
    for (; kv && kv[0]; kv += 2)
        setenv(kv[0], kv[1], 1);
}

static void setup(void)
{
    ck_assert(check_one_make_dir(dir, sizeof dir, "ranks"));
    log_all[0] = 0;
    launcher_env(NULL);
    resdiag_set_log_handler(capture_log, NULL);
    resdiag_set_log_priority(RESDIAG_LOG_INFO);
}

static void teardown(void)
{
    remove_run_dir();
    launcher_env(NULL);
    resdiag_set_log_handler(NULL, NULL);
}

enum { L = 4, D = 40, T = 3, K = 16 };
static const char *const subs[1] = { "mlp" };

static resdiag_options options(void)
{
    resdiag_options o;
    resdiag_options_init(&o);
    o.file_schema = 1; /* the statistics to the double: schema 1 keeps them as computed */
    o.flush_steps = 1;
    o.sketch_size = K;
    return o;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Opens m at path, records one step with STREAM_IN of layer 0, closes. */
static resdiag_status open_and_close(const char *path, const resdiag_model *m,
                                     const resdiag_options *o)
{
    resdiag *r = NULL;
    resdiag_status st = resdiag_open(&r, path, m, o);
    if (st)
        return st;
    float x[T * D];
    for (int i = 0; i < T * D; i++)
        x[i] = 0.5f * (float)i - 7.0f;
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    st = resdiag_close(r);
    resdiag_destroy(r);
    return st;
}

/* The root attribute `name` of the run file at path: an int64 ... */
static long long attr_int(const char *path, const char *name)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_msg(f >= 0, "cannot open %s", path);
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    ck_assert_msg(a >= 0, "%s has no attribute %s", path, name);
    hid_t t = H5Aget_type(a);
    ck_assert_int_eq(H5Tget_class(t), H5T_INTEGER);
    ck_assert_int_eq((int)H5Tget_size(t), 8);
    ck_assert_int_eq(H5Tget_sign(t), H5T_SGN_2);
    long long v = -99;
    ck_assert_int_ge(H5Aread(a, H5T_NATIVE_LLONG, &v), 0);
    H5Tclose(t);
    H5Aclose(a);
    H5Fclose(f);
    return v;
}

/* ... or a UTF-8 string, into a static buffer. */
static const char *attr_str(const char *path, const char *name)
{
    static char out[4][512];
    static int next;
    char *o = out[next++ % 4];
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_msg(f >= 0, "cannot open %s", path);
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    ck_assert_msg(a >= 0, "%s has no attribute %s", path, name);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, H5T_CSET_UTF8);
    char *s = NULL;
    ck_assert_int_ge(H5Aread(a, mt, &s), 0);
    snprintf(o, 512, "%s", s ? s : "(null)");
    H5free_memory(s);
    H5Tclose(mt);
    H5Aclose(a);
    H5Fclose(f);
    return o;
}

/* The sketch of forward STREAM_IN of (layer, 0) at step index 0 of path. */
static void read_sketch(const char *path, int layer, double *sk, double *fields)
{
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, path), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_sketch(rd, 0, RESDIAG_FORWARD, layer, 0, RESDIAG_STREAM_IN,
                                           sk), RESDIAG_OK);
    int observed = 0;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, layer, 0, RESDIAG_STREAM_IN,
                                         fields, &observed), RESDIAG_OK);
    ck_assert_int_eq(observed, 1);
    resdiag_reader_destroy(rd);
}

/* ------------------------------------------------------ the file names */

START_TEST(rank_path_names)
{
    char out[64];
    ck_assert_int_eq(resdiag_rank_path(out, sizeof out, "dir/run.h5", 0), RESDIAG_OK);
    ck_assert_str_eq(out, "dir/run.h5");
    ck_assert_int_eq(resdiag_rank_path(out, sizeof out, "dir/run.h5", 3), RESDIAG_OK);
    ck_assert_str_eq(out, "dir/run.rank00003.h5");
    ck_assert_int_eq(resdiag_rank_path(out, sizeof out, "dir/run", 3), RESDIAG_OK);
    ck_assert_str_eq(out, "dir/run.rank00003");
    ck_assert_int_eq(resdiag_rank_path(out, sizeof out, "run.h5", 123456), RESDIAG_OK);
    ck_assert_str_eq(out, "run.rank123456.h5");
    ck_assert_int_eq(resdiag_rank_path(out, sizeof out, ".h5", 2), RESDIAG_OK);
    ck_assert_str_eq(out, ".h5.rank00002");
    /* "run.rank00003.h5" needs 17 bytes with its NUL */
    ck_assert_int_eq(resdiag_rank_path(out, 16, "run.h5", 3), RESDIAG_E_RANGE);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(resdiag_rank_path(out, 17, "run.h5", 3), RESDIAG_OK);
    ck_assert_int_eq(resdiag_rank_path(out, 6, "run.h5", 0), RESDIAG_E_RANGE);
    ck_assert_int_eq(resdiag_rank_path(out, sizeof out, "run.h5", -1), RESDIAG_E_INVALID);
    ck_assert_int_eq(resdiag_rank_path(NULL, 8, "run.h5", 0), RESDIAG_E_NULL);
    ck_assert_int_eq(resdiag_rank_path(out, sizeof out, NULL, 0), RESDIAG_E_NULL);
}
END_TEST

/* --------------------------------------------------- the rank detected */

typedef struct env_case {
    const char *env[24];   /* pairs, NULL-terminated */
    int rank, world, local;
    const char *source, *job_id;
} env_case;

static const env_case env_cases[] = {
    { { NULL }, 0, 1, -1, "single", "" },
    { { "SLURM_PROCID", "2", "SLURM_NTASKS", "4", "SLURM_LOCALID", "1", "SLURM_JOB_ID", "77",
        NULL }, 2, 4, 1, "slurm", "77" },
    { { "PMI_RANK", "1", "PMI_SIZE", "3", "MPI_LOCALRANKID", "0",
        "SLURM_PROCID", "2", "SLURM_NTASKS", "4", NULL }, 1, 3, 0, "pmi", "" },
    { { "OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE", "8",
        "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_MCA_ess_base_jobid", "4242",
        "PMI_RANK", "1", "PMI_SIZE", "3", "SLURM_PROCID", "2", "SLURM_NTASKS", "4", NULL },
      5, 8, 1, "openmpi", "4242" },
    { { "OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2",
        "OMPI_MCA_orte_ess_jobid", "orte-1", "OMPI_MCA_ess_base_jobid", "4242", NULL },
      1, 2, -1, "openmpi", "orte-1" },
    { { "RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "3", "TORCHELASTIC_RUN_ID", "job-x",
        "OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE", "8",
        "PMI_RANK", "1", "PMI_SIZE", "3", "SLURM_PROCID", "2", "SLURM_NTASKS", "4", NULL },
      3, 4, 3, "torchrun", "job-x" },
    /* malformed torchrun values fall through to the next launcher */
    { { "RANK", "1x", "WORLD_SIZE", "4", "PMI_RANK", "1", "PMI_SIZE", "2", NULL },
      1, 2, -1, "pmi", "" },
    { { "RANK", "4", "WORLD_SIZE", "4", "PMI_RANK", "1", "PMI_SIZE", "2", NULL },
      1, 2, -1, "pmi", "" },
    { { "RANK", "1", "PMI_RANK", "1", "PMI_SIZE", "2", NULL }, 1, 2, -1, "pmi", "" },
    { { "RANK", "-1", "WORLD_SIZE", "4", "SLURM_PROCID", "1", "SLURM_NTASKS", "2", NULL },
      1, 2, -1, "slurm", "" },
    { { "RANK", " 1", "WORLD_SIZE", "4", NULL }, 0, 1, -1, "single", "" },
    { { "RANK", "1", "WORLD_SIZE", "99999999999", NULL }, 0, 1, -1, "single", "" },
    /* a malformed local rank is unknown; the rank still counts */
    { { "RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "x", NULL }, 1, 2, -1, "torchrun", "" },
    /* a job id that is not text is dropped */
    { { "RANK", "1", "WORLD_SIZE", "2", "TORCHELASTIC_RUN_ID", "a\tb", NULL },
      1, 2, -1, "torchrun", "" },
    { { "RANK", "1", "WORLD_SIZE", "2", "TORCHELASTIC_RUN_ID", "\xff", NULL },
      1, 2, -1, "torchrun", "" },
};

START_TEST(environment_gives_the_rank_in_order)
{
    const env_case *c = &env_cases[_i];
    launcher_env(c->env);
    char name[32], file[600];
    snprintf(name, sizeof name, "run%d.h5", _i);
    const char *path = run_path(name);
    resdiag_model m = mlp_model(L, D);
    resdiag_options o = options();
    log_all[0] = 0;
    ck_assert_int_eq(open_and_close(path, &m, &o), RESDIAG_OK);
    ck_assert_int_eq(resdiag_rank_path(file, sizeof file, path, c->rank), RESDIAG_OK);
    ck_assert_msg(exists(file), "case %d: no file %s", _i, file);
    if (c->rank != 0)
        ck_assert_msg(!exists(path), "case %d: rank %d wrote rank 0's file", _i, c->rank);
    ck_assert_int_eq(attr_int(file, "rank"), c->rank);
    ck_assert_int_eq(attr_int(file, "world_size"), c->world);
    ck_assert_int_eq(attr_int(file, "local_rank"), c->local);
    ck_assert_str_eq(attr_str(file, "rank_source"), c->source);
    ck_assert_str_eq(attr_str(file, "job_id"), c->job_id);
    ck_assert_str_eq(attr_str(file, "split"), c->world > 1 ? "data" : "none");
    ck_assert_int_eq(attr_int(file, "record_rank_every"), 1);
    ck_assert_int_eq(attr_int(file, "shard_col_offset"), 0);
    ck_assert_int_eq(attr_int(file, "layer_first"), 0);
    ck_assert_int_eq(attr_int(file, "layer_count"), 0);
    /* a malformed pair or job id is said */
    int malformed = 0;
    for (int k = 0; c->env[k]; k += 2)
        if (strcmp(c->env[k], "RANK") == 0 && strcmp(c->source, "torchrun") != 0)
            malformed = 1;
    if (malformed)
        ck_assert_msg(strstr(log_all, "not taken from torchrun"), "case %d: log: %s", _i,
                      log_all);
    if (strcmp(c->source, "torchrun") == 0 && strcmp(c->job_id, "") == 0 && c->env[4] &&
        strcmp(c->env[4], "TORCHELASTIC_RUN_ID") == 0)
        ck_assert_msg(strstr(log_all, "no job id"), "case %d: log: %s", _i, log_all);
}
END_TEST

START_TEST(explicit_rank_overrides_environment)
{
    static const char *const env[] = { "RANK", "3", "WORLD_SIZE", "4", "TORCHELASTIC_RUN_ID",
                                       "j", NULL };
    launcher_env(env);
    resdiag_model m = mlp_model(L, D);
    m.rank = 1;
    m.world_size = 2;
    resdiag_options o = options();
    ck_assert_int_eq(open_and_close(run_path("run.h5"), &m, &o), RESDIAG_OK);
    const char *file = run_path("run.rank00001.h5");
    ck_assert(exists(file));
    ck_assert(!exists(run_path("run.rank00003.h5")));
    ck_assert_int_eq(attr_int(file, "rank"), 1);
    ck_assert_int_eq(attr_int(file, "world_size"), 2);
    ck_assert_int_eq(attr_int(file, "local_rank"), -1);
    ck_assert_str_eq(attr_str(file, "rank_source"), "explicit");
    ck_assert_str_eq(attr_str(file, "job_id"), "");
    /* the library reads the environment again at every open */
    static const char *const env2[] = { "RANK", "2", "WORLD_SIZE", "4", NULL };
    launcher_env(env2);
    m = mlp_model(L, D);
    ck_assert_int_eq(open_and_close(run_path("run.h5"), &m, &o), RESDIAG_OK);
    ck_assert(exists(run_path("run.rank00002.h5")));
    /* a world size given with a detected rank must agree with the launcher */
    m.world_size = 3;
    ck_assert_int_eq(open_and_close(run_path("other.h5"), &m, &o), RESDIAG_E_INVALID);
    ck_assert(!exists(run_path("other.rank00002.h5")));
    m.world_size = 4;
    ck_assert_int_eq(open_and_close(run_path("other.h5"), &m, &o), RESDIAG_OK);
    ck_assert(exists(run_path("other.rank00002.h5")));
}
END_TEST

/* A model of an older header (without the rank fields) detects the rank;
 * options without record_rank_every record every rank. */
START_TEST(old_struct_size_gets_the_defaults)
{
    resdiag_model m0;
    resdiag_model_init(&m0);
    ck_assert_int_eq(m0.rank, RESDIAG_RANK_DETECT);
    ck_assert_int_eq(m0.world_size, 0);
    resdiag_options o0;
    resdiag_options_init(&o0);
    ck_assert_int_eq(o0.record_rank_every, 1);

    static const char *const env[] = { "RANK", "1", "WORLD_SIZE", "2", NULL };
    launcher_env(env);
    resdiag_model m;
    memset(&m, 0, sizeof m); /* rank 0 here would be an explicit rank without world_size */
    m.struct_size = offsetof(resdiag_model, rank);
    m.n_layers = L;
    m.d_model = D;
    m.n_sublayers = 1;
    m.sublayer_names = subs;
    resdiag_options o;
    memset(&o, 0, sizeof o);
    resdiag_options_init(&o);
    o.struct_size = offsetof(resdiag_options, record_rank_every);
    o.record_rank_every = 0;
    ck_assert_int_eq(open_and_close(run_path("old.h5"), &m, &o), RESDIAG_OK);
    const char *file = run_path("old.rank00001.h5");
    ck_assert(exists(file));
    ck_assert_str_eq(attr_str(file, "rank_source"), "torchrun");
    ck_assert_int_eq(attr_int(file, "record_rank_every"), 1);
}
END_TEST

/* ------------------------------------------------------- bad rank fields */

typedef struct bad_case {
    int rank, world, split, shard_cols, offset, first, count, every;
    const char *says;
} bad_case;

static const bad_case bad_cases[] = {
    { 2, 2, 0, 0, 0, 0, 0, 1, "rank is 2, must be below world_size 2" },
    { 0, -1, 0, 0, 0, 0, 0, 1, "world_size is -1" },
    { 1, 0, 0, 0, 0, 0, 0, 1, "without world_size" },
    { -2, 0, 0, 0, 0, 0, 0, 1, "rank is -2" },
    { 0, 2, 5, 0, 0, 0, 0, 1, "unknown split 5" },
    { 0, 2, -1, 0, 0, 0, 0, 1, "unknown split -1" },
    { 0, 2, RESDIAG_SPLIT_TENSOR, 0, 0, 0, 0, 1, "needs shard_cols" },
    { 0, 2, RESDIAG_SPLIT_TENSOR, 20, 21, 0, 0, 1, "shard_col_offset 21" },
    { 0, 2, RESDIAG_SPLIT_TENSOR, 20, -1, 0, 0, 1, "shard_col_offset -1" },
    { 0, 2, RESDIAG_SPLIT_DATA, 0, 4, 0, 0, 1, "for split TENSOR only" },
    { 0, 2, RESDIAG_SPLIT_PIPELINE, 0, 0, 3, 2, 1, "layer_first 3, layer_count 2" },
    { 0, 2, RESDIAG_SPLIT_PIPELINE, 0, 0, -1, 2, 1, "layer_first -1" },
    { 0, 2, RESDIAG_SPLIT_PIPELINE, 0, 0, 0, -1, 1, "layer_count -1" },
    { 0, 2, RESDIAG_SPLIT_PIPELINE, 0, 0, 1, 0, 1, "layer_first 1, layer_count 0" },
    { 0, 2, RESDIAG_SPLIT_DATA, 0, 0, 1, 1, 1, "for split PIPELINE only" },
    { 0, 2, 0, 0, 0, 0, 0, 0, "record_rank_every is 0" },
    { 0, 2, 0, 0, 0, 0, 0, -3, "record_rank_every is -3" },
};

START_TEST(bad_rank_fields_are_invalid)
{
    const bad_case *c = &bad_cases[_i];
    resdiag_model m = mlp_model(L, D);
    m.rank = c->rank;
    m.world_size = c->world;
    m.split = (resdiag_split)c->split;
    m.shard_cols = c->shard_cols;
    m.shard_col_offset = c->offset;
    m.layer_first = c->first;
    m.layer_count = c->count;
    resdiag_options o = options();
    o.record_rank_every = c->every;
    log_all[0] = 0;
    resdiag *r = (resdiag *)0x1;
    ck_assert_int_eq(resdiag_open(&r, run_path("bad.h5"), &m, &o), RESDIAG_E_INVALID);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(log_all, c->says), "case %d: log says: %s", _i, log_all);
    ck_assert(!exists(run_path("bad.h5")));
    ck_assert(!exists(run_path("bad.rank00001.h5")));
}
END_TEST

/* ------------------------------------------------- ranks that do not record */

START_TEST(record_rank_every_skips_ranks)
{
    for (int rank = 0; rank < 5; rank++) {
        resdiag_model m = mlp_model(L, D);
        m.rank = rank;
        m.world_size = 5;
        resdiag_options o = options();
        o.record_rank_every = 2;
        resdiag *r = NULL;
        log_all[0] = 0;
        ck_assert_int_eq(resdiag_open(&r, run_path("run.h5"), &m, &o), RESDIAG_OK);
        ck_assert_ptr_nonnull(r);
        char file[600];
        ck_assert_int_eq(resdiag_rank_path(file, sizeof file, run_path("run.h5"), rank), RESDIAG_OK);
        int records = rank % 2 == 0;
        ck_assert_int_eq(exists(file), records);
        if (!records)
            ck_assert_msg(strstr(log_all, "does not record"), "log: %s", log_all);
        float x[T * D] = { 0 };
        /* every call OK, even ones that would be bugs on a recording rank:
         * the trainer runs the same code on every rank */
        for (int64_t step = 0; step < 3; step++) {
            ck_assert_int_eq(resdiag_step_begin(r, records ? step : 7 - step), RESDIAG_OK);
            ck_assert_int_eq(resdiag_step_is_recorded(r), records);
            ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)),
                             RESDIAG_OK);
            if (!records)
                ck_assert_int_eq(RESDIAG_FWD(r, 99, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, 3)),
                                 RESDIAG_OK);
            ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
        }
        ck_assert_int_eq(resdiag_flush(r), RESDIAG_OK);
        int64_t flushed = 99;
        ck_assert_int_eq(resdiag_flushed_step(r, &flushed), RESDIAG_OK);
        ck_assert_int_eq(flushed, records ? 2 : -1);
        ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
        if (!records)
            ck_assert_int_eq(resdiag_step_begin(r, 9), RESDIAG_OK);
        resdiag_destroy(r);
        ck_assert_int_eq(exists(file), records);
        if (records) {
            ck_assert_int_eq(attr_int(file, "record_rank_every"), 2);
            ck_assert_int_eq(attr_int(file, "rank"), rank);
        }
    }
}
END_TEST

/* --------------------------------------- two ranks, one path, two files */

START_TEST(two_ranks_on_one_path_write_two_files)
{
    const char *path = run_path("job.h5");
    resdiag *r[2] = { NULL, NULL };
    for (int k = 0; k < 2; k++) {
        resdiag_model m = mlp_model(L, D);
        m.rank = k;
        m.world_size = 2;
        m.split = RESDIAG_SPLIT_SEQUENCE;
        resdiag_options o = options();
        ck_assert_int_eq(resdiag_open(&r[k], path, &m, &o), RESDIAG_OK);
    }
    float x[T * D];
    for (int i = 0; i < T * D; i++)
        x[i] = (float)i;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(resdiag_step_begin(r[k], 5), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r[k], 1, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T - k, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r[k]), RESDIAG_OK);
    }
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(resdiag_close(r[k]), RESDIAG_OK);
        resdiag_destroy(r[k]);
    }
    const char *files[2] = { path, run_path("job.rank00001.h5") };
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(attr_int(files[k], "rank"), k);
        ck_assert_int_eq(attr_int(files[k], "world_size"), 2);
        ck_assert_str_eq(attr_str(files[k], "split"), "sequence");
        ck_assert_str_eq(attr_str(files[k], "rank_source"), "explicit");
        resdiag_reader *rd = NULL;
        ck_assert_int_eq(resdiag_reader_open(&rd, files[k]), RESDIAG_OK);
        ck_assert_int_ge(resdiag_reader_info(rd)->n_steps, 1);
        resdiag_reader_destroy(rd);
    }
    /* rank 1's own rows, read from its own file */
    double sk[K], f[RESDIAG_N_FIELDS];
    read_sketch(files[1], 1, sk, f);
    ck_assert_double_eq(f[RESDIAG_FIELD_ROWS], T - 1);
}
END_TEST

/* ------------------------------------------------------------ sketches */

/* The sketch of x (rows, cols) as stats.h defines it, from the row sign
 * index row0 on and with the columns at col0 of the full width: the
 * column signs of the run's table (the seed's, of length 4097 for
 * d_model <= 4096: max(d_model, 4096) made odd). */
static void reference_sketch(double *out, const float *x, int rows, int cols, int ld,
                             int64_t row0, int col0, uint64_t seed)
{
    enum { TAU_LEN = 4097 };
    static float tau[TAU_LEN];
    rd_fill_column_signs(tau, TAU_LEN, seed);
    for (int m = 0; m < K; m++)
        out[m] = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            int g = col0 + j;
            out[g % K] += rd_row_sign(seed, row0 + i) * (double)tau[g % TAU_LEN] *
                          (double)x[(size_t)i * (size_t)ld + (size_t)j];
        }
}

/* The bound of a recorded sketch bucket against the reference, on the
 * path that ran: one row sum's bound of the sum of the bucket's |terms|
 * (the columns of x, rows x cols at stride ld, that fall in bucket m of
 * the full width from col0 on), times `sums` for a value that adds that
 * many recorded sums. */
static double sketch_tol(const float *x, int rows, int cols, int ld, int col0, int m, int sums)
{
    long double l1 = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            if ((col0 + j) % K == m)
                l1 += fabsl((long double)x[(size_t)i * (size_t)ld + (size_t)j]);
    return (double)(sums * rd_test_active_sum_tol(RESDIAG_DTYPE_F32) * l1) + 1e-300;
}

static void fill(float *x, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((int)(seed >> 16) % 2001 - 1000) / 256.0f;
    }
}

/* A data-parallel rank r signs its rows r * 2^40 + i, over several calls of
 * a step too. */
START_TEST(data_rank_uses_its_own_row_signs)
{
    const int rank = 3;
    float a[T * D], b[2 * D];
    fill(a, T * D, 1);
    fill(b, 2 * D, 2);
    resdiag_model m = mlp_model(L, D);
    m.rank = rank;
    m.world_size = 4;
    resdiag_options o = options();
    resdiag *r = fixture_open(run_path("dp.h5"), &m, &o);
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 2, 0, RESDIAG_STREAM_IN, resdiag_f32(a, T, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 2, 0, RESDIAG_STREAM_IN, resdiag_f32(b, 2, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    const char *file = run_path("dp.rank00003.h5");
    ck_assert_str_eq(attr_str(file, "split"), "data");
    double got[K], f[RESDIAG_N_FIELDS], want[K], more[K];
    read_sketch(file, 2, got, f);
    const int64_t base = (int64_t)rank << 40;
    reference_sketch(want, a, T, D, D, base, 0, o.sketch_seed);
    reference_sketch(more, b, 2, D, D, base + T, 0, o.sketch_seed);
    double other[K];
    reference_sketch(other, a, T, D, D, 0, 0, o.sketch_seed);
    int differs = 0;
    for (int k = 0; k < K; k++) {
        want[k] += more[k];
        const double tol = sketch_tol(a, T, D, D, 0, k, 1) + sketch_tol(b, 2, D, D, 0, k, 1);
        ck_assert_msg(fabs(got[k] - want[k]) <= tol,
                      "bucket %d: %g, want %g", k, got[k], want[k]);
        differs |= fabs(other[k] - want[k]) > 1e-6;
    }
    ck_assert_msg(differs, "the reference does not depend on the rank's base");
}
END_TEST

/* On a rank, a tensor's partial statistics (resdiag_partial_compute, as
 * device code would compute them with resdiag_sketch_layout) record what
 * the tensor records: the rank's row signs on a data rank, the shard's
 * global columns (sketch and ABSMAX_COL) on a tensor-parallel rank. */
START_TEST(partials_on_ranks_record_what_the_tensor_records)
{
    float x[T * D];
    fill(x, T * D, 5);
    x[2 * D + 7] = -500.0f; /* the largest |x|: row 2, local column 7 */
    resdiag_options o = options();
    for (int kind = 0; kind < 2; kind++) {
        resdiag_model m = mlp_model(L, D);
        m.rank = 1;
        m.world_size = 2;
        int cols = D;
        if (kind == 1) {
            m.split = RESDIAG_SPLIT_TENSOR;
            m.shard_cols = cols = D / 2;
            m.shard_col_offset = D / 2;
        }
        const char *name = kind ? "tp-partial.h5" : "dp-partial.h5";
        resdiag *r = fixture_open(run_path(name), &m, &o);
        ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
        resdiag_tensor t = resdiag_tensor_make(x, RESDIAG_DTYPE_F32, T, cols, D);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, t), RESDIAG_OK);
        resdiag_partial p;
        ck_assert_int_eq(resdiag_partial_compute(r, t, 0, &p, NULL), RESDIAG_OK);
        ck_assert_double_eq(p.absmax_col, 7); /* the tensor's own column */
        ck_assert_int_eq(resdiag_observe_partial(r, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_IN, &p,
                                                 __FILE__, __LINE__), RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
        ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
        resdiag_destroy(r);
        char file[600];
        ck_assert_int_eq(resdiag_rank_path(file, sizeof file, run_path(name), 1), RESDIAG_OK);
        double sk_t[K], sk_p[K], f_t[RESDIAG_N_FIELDS], f_p[RESDIAG_N_FIELDS], want[K];
        read_sketch(file, 0, sk_t, f_t);
        read_sketch(file, 1, sk_p, f_p);
        reference_sketch(want, x, T, cols, D, kind ? 0 : (int64_t)1 << 40, kind ? D / 2 : 0,
                         o.sketch_seed);
        for (int k = 0; k < K; k++) {
            ck_assert_msg(fabs(sk_p[k] - want[k]) <= sketch_tol(x, T, cols, D, kind ? D / 2 : 0,
                                                               k, 1),
                          "%s, bucket %d: partial %g, want %g", name, k, sk_p[k], want[k]);
            ck_assert_double_eq(sk_p[k], sk_t[k]);
        }
        ck_assert_double_eq(f_p[RESDIAG_FIELD_ABSMAX_COL], (kind ? D / 2 : 0) + 7);
        ck_assert_double_eq(f_t[RESDIAG_FIELD_ABSMAX_COL], (kind ? D / 2 : 0) + 7);
        for (int f = 0; f < RESDIAG_N_FIELDS; f++)
            if (f != RESDIAG_FIELD_CALL_SEQ)
                ck_assert_msg(fabs(f_p[f] - f_t[f]) <= 1e-12 * (1 + fabs(f_t[f])),
                              "%s, field %s: partial %g, tensor %g", name,
                              resdiag_field_name((resdiag_field)f), f_p[f], f_t[f]);
    }
}
END_TEST

/* Two tensor-parallel shards' sketches add up to the sketch of the whole
 * tensor; ABSMAX_COL is the global column; a tensor of full width on such
 * a rank is recorded as is. Ranks 1 and 2 of 3 hold the two halves. */
START_TEST(tensor_shards_add_up_to_the_whole)
{
    const int half = D / 2; /* 20: the second shard starts at 20 mod 16 = 4 */
    float x[T * D], shard[2][T * (D / 2)];
    fill(x, T * D, 3);
    x[1 * D + half + 3] = 1000.0f; /* the largest |x|: row 1, column 23 */
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < T; i++)
            memcpy(&shard[s][i * half], &x[i * D + s * half], (size_t)half * sizeof(float));
    resdiag_options o = options();
    resdiag_model full = mlp_model(L, D);
    resdiag *w = fixture_open(run_path("whole.h5"), &full, &o);
    ck_assert_int_eq(resdiag_step_begin(w, 0), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(w, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(w), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(w), RESDIAG_OK);
    resdiag_destroy(w);
    for (int s = 0; s < 2; s++) {
        resdiag_model m = mlp_model(L, D);
        m.rank = 1 + s;
        m.world_size = 3;
        m.split = RESDIAG_SPLIT_TENSOR;
        m.shard_cols = half;
        m.shard_col_offset = s * half;
        resdiag *r = fixture_open(run_path("tp.h5"), &m, &o);
        ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(shard[s], T, half)),
                         RESDIAG_OK);
        /* replicated: the whole stream, the same on every rank */
        ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
        ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
        resdiag_destroy(r);
    }
    const char *f1 = run_path("tp.rank00001.h5"), *f2 = run_path("tp.rank00002.h5");
    ck_assert_str_eq(attr_str(f2, "split"), "tensor");
    ck_assert_int_eq(attr_int(f2, "shard_col_offset"), half);
    double whole[K], a[K], b[K], rep[K], fw[RESDIAG_N_FIELDS], fa[RESDIAG_N_FIELDS],
        fb[RESDIAG_N_FIELDS], fr[RESDIAG_N_FIELDS], want[K];
    read_sketch(run_path("whole.h5"), 0, whole, fw);
    read_sketch(f1, 0, a, fa);
    read_sketch(f2, 0, b, fb);
    read_sketch(f2, 1, rep, fr);
    reference_sketch(want, x, T, D, D, 0, 0, o.sketch_seed);
    for (int k = 0; k < K; k++) {
        /* the shards' |terms| make the whole one's: two recorded sums on a side */
        const double tol = sketch_tol(x, T, D, D, 0, k, 1);
        ck_assert_msg(fabs(whole[k] - want[k]) <= tol,
                      "whole, bucket %d: %g, want %g", k, whole[k], want[k]);
        ck_assert_msg(fabs(a[k] + b[k] - whole[k]) <= 2 * tol,
                      "shards, bucket %d: %g + %g, whole %g", k, a[k], b[k], whole[k]);
        ck_assert_msg(fabs(rep[k] - whole[k]) <= 2 * tol,
                      "replicated, bucket %d: %g, whole %g", k, rep[k], whole[k]);
    }
    /* each shard alone against the reference at its offset */
    double ref2[K];
    reference_sketch(ref2, shard[1], T, half, half, 0, half, o.sketch_seed);
    for (int k = 0; k < K; k++)
        ck_assert_msg(fabs(b[k] - ref2[k]) <= sketch_tol(shard[1], T, half, half, half, k, 1),
                      "shard 2, bucket %d: %g, want %g", k, b[k], ref2[k]);
    ck_assert_double_eq(fw[RESDIAG_FIELD_ABSMAX_COL], half + 3);
    ck_assert_double_eq(fb[RESDIAG_FIELD_ABSMAX_COL], half + 3);
    ck_assert_double_eq(fr[RESDIAG_FIELD_ABSMAX_COL], half + 3);
    ck_assert_double_eq(fb[RESDIAG_FIELD_COLS], half);
    ck_assert_double_le(fa[RESDIAG_FIELD_ABSMAX_COL], half - 1);
    /* The Frobenius norms of the shards make the whole one's. Each is the
     * root of row sums of squares, within half a row sum's bound of its
     * value on the path that ran, so the two sides differ by at most that
     * bound (the root of two squares keeps a relative error). */
    double frob2 = fa[RESDIAG_FIELD_FROB] * fa[RESDIAG_FIELD_FROB] +
                   fb[RESDIAG_FIELD_FROB] * fb[RESDIAG_FIELD_FROB];
    const double tol = (double)rd_test_active_sum_tol(RESDIAG_DTYPE_F32);
    ck_assert_double_eq_tol(sqrt(frob2), fw[RESDIAG_FIELD_FROB], tol * fw[RESDIAG_FIELD_FROB]);
}
END_TEST

/* The kernels' entry points honour col0 alike: one thread, two threads (a
 * tensor of over 1 MiB, split by rows) and the reference agree. */
START_TEST(shard_columns_on_every_path)
{
    enum { R = 1100, C = 256, TL = 4097 };
    const int64_t col0 = 4003; /* past the end of the column-sign table, 3 mod K */
    float *x = malloc(sizeof(float) * R * C), *tau = malloc(sizeof(float) * 2 * TL);
    ck_assert(x && tau);
    fill(x, R * C, 9);
    x[7 * C + 5] = -3000.0f;
    rd_fill_column_signs(tau, TL, 0x5eed);
    memcpy(tau + TL, tau, TL * sizeof *tau);
    rd_sketch_params sp = { K, tau, TL, 0x5eed, 0, col0 };
    resdiag_tensor t = resdiag_f32(x, R, C);
    double f1[RESDIAG_N_FIELDS], f2[RESDIAG_N_FIELDS], s1[K], s2[K], want[K];
    rd_stats_compute(f1, s1, NULL, &t, &sp);
    rd_stats_compute_split(2, f2, s2, NULL, &t, &sp);
    double want_k[K] = { 0 };
    for (int i = 0; i < R; i++) {
        double sig = rd_row_sign(0x5eed, i);
        for (int j = 0; j < C; j++)
            want_k[(col0 + j) % K] += sig * (double)tau[(col0 + j) % TL] * (double)x[i * C + j];
    }
    memcpy(want, want_k, sizeof want);
    for (int k = 0; k < K; k++) {
        ck_assert_msg(fabs(s1[k] - want[k]) <= 1e-3 * (1 + fabs(want[k])), "bucket %d: %g, %g",
                      k, s1[k], want[k]);
        ck_assert_msg(fabs(s2[k] - want[k]) <= 1e-3 * (1 + fabs(want[k])), "bucket %d: %g, %g",
                      k, s2[k], want[k]);
    }
    ck_assert_double_eq(f1[RESDIAG_FIELD_ABSMAX_COL], col0 + 5);
    ck_assert_double_eq(f2[RESDIAG_FIELD_ABSMAX_COL], col0 + 5);
    free(x);
    free(tau);
}
END_TEST

/* ------------------------------------------------------------ pipelines */

START_TEST(pipeline_stage_records_its_layers_only)
{
    resdiag_model m = mlp_model(L, D);
    static const char *const params[1] = { "w" };
    m.n_layer_params = 1;
    m.layer_param_names = params;
    m.rank = 1;
    m.world_size = 2;
    m.split = RESDIAG_SPLIT_PIPELINE;
    m.layer_first = 2;
    m.layer_count = 2;
    resdiag_options o = options();
    resdiag *r = fixture_open(run_path("pp.h5"), &m, &o);
    float x[T * D] = { 1 };
    ck_assert_int_eq(resdiag_step_begin(r, 0), RESDIAG_OK);
    log_all[0] = 0;
    ck_assert_int_eq(RESDIAG_FWD(r, 1, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)),
                     RESDIAG_E_RANGE);
    ck_assert_msg(strstr(log_all, "pipeline stage"), "log: %s", log_all);
    ck_assert_int_eq(RESDIAG_FWD(r, 2, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 3, 0, RESDIAG_STREAM_OUT, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_observe_alias(r, RESDIAG_FORWARD, 0, 0, RESDIAG_NORM_IN,
                                           RESDIAG_STREAM_IN), RESDIAG_E_RANGE);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 0, "w", resdiag_f32(x, T, D)), RESDIAG_E_RANGE);
    ck_assert_int_eq(RESDIAG_PARAM_GRAD(r, 2, "w", resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_EMBED_OUT, resdiag_f32(x, T, D)), RESDIAG_OK);
    ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    const char *file = run_path("pp.rank00001.h5");
    ck_assert_str_eq(attr_str(file, "split"), "pipeline");
    ck_assert_int_eq(attr_int(file, "layer_first"), 2);
    ck_assert_int_eq(attr_int(file, "layer_count"), 2);
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, file), RESDIAG_OK);
    double f[RESDIAG_N_FIELDS];
    int observed = -1;
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 1, 0, RESDIAG_STREAM_IN, f,
                                         &observed), RESDIAG_OK);
    ck_assert_int_eq(observed, 0);
    ck_assert_int_eq(resdiag_reader_site(rd, 0, RESDIAG_FORWARD, 2, 0, RESDIAG_STREAM_IN, f,
                                         &observed), RESDIAG_OK);
    ck_assert_int_eq(observed, 1);
    resdiag_reader_destroy(rd);
}
END_TEST

static const check_program program = {
    .name = "ranks-writer",
};
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("ranks", 60, setup, teardown),
               CHECK_TEST(rank_path_names),
               CHECK_LOOP(environment_gives_the_rank_in_order, 0, (int)(sizeof env_cases / sizeof *env_cases)),
               CHECK_TEST(explicit_rank_overrides_environment),
               CHECK_TEST(old_struct_size_gets_the_defaults),
               CHECK_LOOP(bad_rank_fields_are_invalid, 0, (int)(sizeof bad_cases / sizeof *bad_cases)),
               CHECK_TEST(record_rank_every_skips_ranks),
               CHECK_TEST(two_ranks_on_one_path_write_two_files),
               CHECK_TEST(data_rank_uses_its_own_row_signs),
               CHECK_TEST(tensor_shards_add_up_to_the_whole),
               CHECK_TEST(partials_on_ranks_record_what_the_tensor_records),
               CHECK_TEST(shard_columns_on_every_path),
               CHECK_TEST(pipeline_stage_records_its_layers_only))
