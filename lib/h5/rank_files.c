/*
 * rank_files.c - finds the files of a job's ranks beside rank 0's, checks
 * that each is of the same run, and classifies every rank (merge.h,
 * doc/RANKS.md "Reading and merging").
 *
 * Rank 0's file is input from strangers too: its world_size is bounded
 * (RD_MAX_WORLD_SIZE, reader_root.c); up to PROBE_BY_NAME ranks each name
 * is probed by one lstat() (only ranks that record by record_rank_every),
 * beyond that the directory is listed once and only the names that are a
 * rank's name are probed (a file cannot make the reader stat a million
 * names that are not there); only regular files are opened, so the files
 * kept open and the memory held follow what is really there. A symbolic link, anything but
 * a regular file, a file that cannot be read or one of another run is
 * rejected with its reason, never merged. Each file is opened and read by
 * the reader of one file (reader_file.h), which knows nothing of ranks;
 * the public reader (reader.c) opens the merge.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "h5/common.h"
#include "h5/merge.h"
#include "h5/reader_file.h"
#include "h5/reader_stored.h"
#include "format/tables.h"

#define WHY_LEN 512
#define PROBE_BY_NAME 65536 /* worlds up to this size: one lstat per rank */
#define CHECK_DOUBLES 65536 /* values read at a time when checking a rank's data */

static int same_names(const char *const *a, const char *const *b, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return 1;
}

/* The datasets of two readers: the same names in the same order. */
static int same_datasets(const resdiag_reader *a, const resdiag_reader *b)
{
    int n = rd_file_n_datasets(a);
    if (n != rd_file_n_datasets(b))
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(rd_file_dataset_name(a, i), rd_file_dataset_name(b, i)) != 0)
            return 0;
    return 1;
}

/* "" when rank r's file (reader b) is of the same run as rank 0's (a);
 * else why not, into why. */
static void check_same_run(const resdiag_reader *ra, const resdiag_reader *rb, int r, char *why,
                           size_t len)
{
    const resdiag_run_info *a = rd_file_info(ra), *b = rd_file_info(rb);
    why[0] = '\0';
#define DIFF(cond, ...)                          \
    if (cond) {                                  \
        snprintf(why, len, __VA_ARGS__);         \
        return;                                  \
    }
    DIFF(b->rank != r, "its rank attribute is %d, not %d", b->rank, r)
    DIFF(b->world_size != a->world_size, "world_size %d, rank 0's is %d", b->world_size,
         a->world_size)
    DIFF(a->job_id[0] && b->job_id[0] && strcmp(a->job_id, b->job_id) != 0,
         "job id \"%.80s\", rank 0's is \"%.80s\"", b->job_id, a->job_id)
    DIFF(b->split != a->split, "another split than rank 0's")
    DIFF(b->record_rank_every != a->record_rank_every, "record_rank_every %d, rank 0's is %d",
         b->record_rank_every, a->record_rank_every)
    DIFF(b->n_layers != a->n_layers || b->d_model != a->d_model
             || b->n_sublayers != a->n_sublayers || b->shard_cols != a->shard_cols,
         "another model shape (%d layers, d_model %d, %d sublayers; rank 0's: %d, %d, %d)",
         b->n_layers, b->d_model, b->n_sublayers, a->n_layers, a->d_model, a->n_sublayers)
    DIFF(!same_names(a->sublayer_names, b->sublayer_names, a->n_sublayers),
         "other sublayer names than rank 0's")
    DIFF(b->n_layer_params != a->n_layer_params || b->n_model_params != a->n_model_params
             || !same_names(a->layer_param_names, b->layer_param_names, a->n_layer_params)
             || !same_names(a->model_param_names, b->model_param_names, a->n_model_params),
         "other parameters than rank 0's")
    DIFF(b->n_metrics != a->n_metrics
             || !same_names(a->metric_names, b->metric_names, a->n_metrics),
         "other metrics than rank 0's")
    DIFF(b->sketch_size != a->sketch_size || b->sketch_seed != a->sketch_seed,
         "another sketch (size %d, seed %llu) than rank 0's (%d, %llu)", b->sketch_size,
         (unsigned long long)b->sketch_seed, a->sketch_size, (unsigned long long)a->sketch_seed)
    DIFF(!same_datasets(ra, rb), "other datasets than rank 0's")
#undef DIFF
}

static int read_steps(rd_rank_entry *e)
{
    const resdiag_run_info *in = rd_file_info(e->rd);
    free(e->steps);
    e->steps = malloc((size_t)(in->n_steps ? in->n_steps : 1) * sizeof *e->steps);
    if (!e->steps)
        return -1;
    if (rd_file_steps(e->rd, e->steps, in->n_steps) != RESDIAG_OK)
        return -1;
    e->n_steps = in->n_steps;
    e->last_step = e->n_steps > 0 ? e->steps[e->n_steps - 1] : -1;
    return 0;
}

/* Reads every stored step of dataset name of e's file from step index
 * first on, CHECK_DOUBLES values at a time (one step when a step holds
 * more); unstored stretches are skipped, so the work follows what the
 * file holds. 0, or -1 (the reader's failure held as why, or no memory). */
static int check_dataset(const rd_rank_entry *e, const char *name, int64_t first)
{
    int64_t dims[RD_MAX_RANK + 1], next = 0;
    int axes = 0;
    size_t per = 1;
    if (rd_file_dims(e->rd, name, dims, RD_MAX_RANK + 1, &axes) != RESDIAG_OK)
        return -1;
    for (int k = 1; k < axes; k++)
        per *= (size_t)dims[k];
    int64_t block = per < CHECK_DOUBLES ? (int64_t)(CHECK_DOUBLES / per) : 1;
    double *buf = malloc((size_t)block * per * sizeof *buf);
    if (!buf)
        return -1;
    rd_stored_cursor c;
    rd_file_stored_init(e->rd, &c, name);
    int rc = 0;
    for (int64_t si = first; rc == 0 && si < e->n_steps; si = next) {
        if (!rd_stored_at(e->rd, &c, si, &next))
            continue;
        int64_t n = e->n_steps - si < block ? e->n_steps - si : block;
        next = si + n;
        if (rd_file_read(e->rd, name, si, n, buf, (size_t)n * per) != RESDIAG_OK)
            rc = -1;
    }
    free(buf);
    return rc;
}

/* Every dataset of e's file reads from step index first on: a damaged
 * chunk (a deflate stream that does not inflate, a broken chunk index)
 * then rejects the rank here, the reader's line its why, instead of
 * failing every read of the merged ranks later. Called with the reader's
 * failures held into why; 0, or -1 with why set. */
static int check_data(const rd_rank_entry *e, int64_t first, char *why, size_t len)
{
    for (int i = 0; i < rd_file_n_datasets(e->rd); i++)
        if (check_dataset(e, rd_file_dataset_name(e->rd, i), first) != 0) {
            if (!why[0])
                snprintf(why, len, "its data cannot be read (out of memory)");
            return -1;
        }
    return 0;
}

static void reject(rd_rank_entry *e, const char *why)
{
    e->state = RESDIAG_RANK_REJECTED;
    free(e->why);
    e->why = strdup(why[0] ? why : "cannot be read");
    rd_file_destroy(e->rd);
    e->rd = NULL;
    free(e->steps);
    e->steps = NULL;
    e->n_steps = 0;
    e->last_step = -1;
}

/* Probes rank r's name; 0: no entry (missing), 1: *e filled, -1: out of memory. */
static int probe_rank(const resdiag_reader *rd0, int r, rd_rank_entry *e)
{
    char path[PATH_MAX + 32], why[WHY_LEN] = "";
    if (resdiag_rank_path(path, sizeof path, rd_file_path(rd0), r) != RESDIAG_OK)
        return 0;
    struct stat sb;
    int err = lstat(path, &sb) != 0 ? errno : 0;
    if (err == ENOENT || err == ENOTDIR)
        return 0;
    memset(e, 0, sizeof *e);
    e->rank = r;
    e->state = RESDIAG_RANK_MERGED;
    e->last_step = -1;
    if (!(e->path = strdup(path)) || !(e->why = strdup("")))
        return -1;
    if (err)
        snprintf(why, sizeof why, "cannot be examined: %s", strerror(err));
    else if (S_ISLNK(sb.st_mode))
        snprintf(why, sizeof why, "a symbolic link (resdiag opens only regular files)");
    else if (!S_ISREG(sb.st_mode))
        snprintf(why, sizeof why, "not a regular file");
    if (why[0]) {
        reject(e, why);
        return e->why ? 1 : -1;
    }
    rd_h5_hold_failures(why, sizeof why);
    resdiag_status st = rd_file_open(&e->rd, path);
    if (st == RESDIAG_OK)
        check_same_run(rd0, e->rd, r, why, sizeof why);
    if (st == RESDIAG_OK && !why[0] && read_steps(e) != 0)
        snprintf(why, sizeof why, "its steps cannot be read");
    if (st == RESDIAG_OK && !why[0])
        check_data(e, 0, why, sizeof why);
    rd_h5_hold_failures(NULL, 0);
    if (st != RESDIAG_OK || why[0])
        reject(e, why);
    return e->why ? 1 : -1;
}

/* The sorted union of the merged ranks' steps, the merged list, and which
 * ranks ended early. */
static resdiag_status build_union(rd_merge *m)
{
    int64_t total = 0, max_last = -1;
    m->n_merged = 0;
    for (int i = 0; i < m->n_entries; i++) {
        rd_rank_entry *e = &m->entries[i];
        if (e->state == RESDIAG_RANK_REJECTED)
            continue;
        m->merged[m->n_merged++] = e;
        total += e->n_steps;
        if (e->last_step > max_last)
            max_last = e->last_step;
    }
    int64_t *u = malloc((size_t)(total ? total : 1) * sizeof *u), n = 0;
    if (!u)
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory",
                          m->merged[0]->path);
    /* k-way merge by repeated minimum: k is small next to the steps */
    int64_t *at = calloc((size_t)m->n_merged, sizeof *at);
    if (!at) {
        free(u);
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", m->merged[0]->path);
    }
    for (;;) {
        int64_t best = INT64_MAX;
        for (int k = 0; k < m->n_merged; k++)
            if (at[k] < m->merged[k]->n_steps && m->merged[k]->steps[at[k]] < best)
                best = m->merged[k]->steps[at[k]];
        if (best == INT64_MAX)
            break;
        u[n++] = best;
        for (int k = 0; k < m->n_merged; k++)
            if (at[k] < m->merged[k]->n_steps && m->merged[k]->steps[at[k]] == best)
                at[k]++;
    }
    free(at);
    free(m->steps);
    m->steps = u;
    m->info.n_steps = n;
    m->info.n_ranks_merged = m->n_merged;
    for (int k = 0; k < m->n_merged; k++)
        m->merged[k]->state =
            m->merged[k]->last_step < max_last ? RESDIAG_RANK_ENDED_EARLY : RESDIAG_RANK_MERGED;
    return RESDIAG_OK;
}

/* The time series the merged view serves: rank 0's but the per-step
 * summary, which is derived per file (the analysis then reads the tables). */
static resdiag_status list_datasets(rd_merge *m, const resdiag_reader *rd0)
{
    int n = rd_file_n_datasets(rd0);
    m->datasets = calloc((size_t)n + 1, sizeof *m->datasets);
    if (!m->datasets)
        return RESDIAG_E_NOMEM;
    for (int i = 0; i < n; i++) {
        const char *name = rd_file_dataset_name(rd0, i);
        if (strncmp(name, "summary/", 8) == 0)
            continue;
        if (!(m->datasets[m->n_datasets++] = strdup(name)))
            return RESDIAG_E_NOMEM;
    }
    return RESDIAG_OK;
}

static resdiag_status merge_init(rd_merge *m, resdiag_reader *rd0)
{
    const resdiag_run_info *in0 = rd_file_info(rd0);
    m->info = *in0;
    m->world_size = in0->world_size;
    m->every = in0->record_rank_every;
    m->split = in0->split == RESDIAG_SPLIT_NONE ? RESDIAG_SPLIT_DATA : in0->split;
    rd_tables_init(&m->lay, in0->n_layers, in0->n_sublayers, in0->n_layer_params,
                   in0->n_model_params, in0->sketch_size, rd_block_sites(in0->schema_version));
    rd_tables_set_metrics(&m->lay, in0->n_metrics);
    m->entries = calloc(1, sizeof *m->entries);
    if (!m->entries)
        return RESDIAG_E_NOMEM;
    rd_rank_entry *e0 = &m->entries[0];
    m->n_entries = 1;
    e0->rd = rd0;
    e0->state = RESDIAG_RANK_MERGED;
    if (!(e0->path = strdup(rd_file_path(rd0))) || !(e0->why = strdup("")) || read_steps(e0))
        return RESDIAG_E_NOMEM;
    return list_datasets(m, rd0);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The ranks 1..world-1 whose names (resdiag_rank_path, exactly) are in the
 * directory of rank 0's path, sorted: *out (*n), malloc'd. */
static resdiag_status list_rank_names(const rd_merge *m, const char *path, int **out, size_t *n)
{
    const char *slash = strrchr(path, '/');
    char dirname[PATH_MAX];
    snprintf(dirname, sizeof dirname, "%.*s", slash ? (int)(slash - path + 1) : 1,
             slash ? path : ".");
    const char *base = slash ? slash + 1 : path;
    size_t stem = strlen(base) > 3 && strcmp(base + strlen(base) - 3, ".h5") == 0
                      ? strlen(base) - 3 : strlen(base);
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dirname);
    if (!d)
        return RESDIAG_OK; /* nothing can be found: every rank is missing */
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (strncmp(nm, base, stem) != 0 || strncmp(nm + stem, ".rank", 5) != 0)
            continue;
        long r = strtol(nm + stem + 5, NULL, 10);
        char want[PATH_MAX + 32];
        if (r < 1 || r >= m->world_size
            || resdiag_rank_path(want, sizeof want, base, (int)r) != RESDIAG_OK
            || strcmp(want, nm) != 0)
            continue;
        if (*n == cap) {
            int *nv = realloc(*out, (cap = cap ? cap * 2 : 64) * sizeof *nv);
            if (!nv) {
                closedir(d);
                return RESDIAG_E_NOMEM;
            }
            *out = nv;
        }
        (*out)[(*n)++] = (int)r;
    }
    closedir(d);
    if (*n)
        qsort(*out, *n, sizeof **out, cmp_int);
    return RESDIAG_OK;
}

static resdiag_status add_entry(rd_merge *m, size_t *cap, rd_rank_entry *e)
{
    if ((size_t)m->n_entries == *cap) {
        rd_rank_entry *ne = realloc(m->entries, *cap * 2 * sizeof *ne);
        if (!ne) {
            free(e->path);
            free(e->why);
            rd_file_destroy(e->rd);
            free(e->steps);
            return RESDIAG_E_NOMEM;
        }
        m->entries = ne;
        *cap *= 2;
    }
    m->entries[m->n_entries++] = *e;
    return RESDIAG_OK;
}

static resdiag_status probe_all(rd_merge *m)
{
    size_t cap = 1, n = 0;
    int *ranks = NULL;
    int by_name = m->world_size <= PROBE_BY_NAME;
    resdiag_status st = RESDIAG_OK;
    if (!by_name && (st = list_rank_names(m, m->entries[0].path, &ranks, &n)) != RESDIAG_OK)
        return st;
    for (size_t i = 0; st == RESDIAG_OK && i < (by_name ? (size_t)m->world_size - 1 : n); i++) {
        int r = by_name ? (int)i + 1 : ranks[i];
        if (r % m->every != 0 || (!by_name && i > 0 && ranks[i - 1] == r))
            continue;
        rd_rank_entry e;
        int got = probe_rank(m->entries[0].rd, r, &e);
        if (got < 0)
            st = RESDIAG_E_NOMEM;
        else if (got > 0)
            st = add_entry(m, &cap, &e);
    }
    free(ranks);
    return st;
}

resdiag_status rd_merge_open(rd_merge **out, resdiag_reader *rd0)
{
    *out = NULL;
    const char *P = rd_file_path(rd0);
    rd_merge *m = calloc(1, sizeof *m);
    if (!m) {
        rd_file_destroy(rd0);
        return rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", P);
    }
    resdiag_status st = merge_init(m, rd0);
    if (st == RESDIAG_OK)
        st = probe_all(m);
    if (st == RESDIAG_OK && !(m->merged = calloc((size_t)m->n_entries, sizeof *m->merged)))
        st = RESDIAG_E_NOMEM;
    if (st == RESDIAG_E_NOMEM)
        st = rd_h5_fail(RESDIAG_E_NOMEM, "run file %s: out of memory", m->entries[0].path);
    if (st == RESDIAG_OK)
        st = build_union(m);
    if (st != RESDIAG_OK) {
        if (!m->entries) /* merge_init failed before taking rd0 */
            rd_file_destroy(rd0);
        rd_merge_free(m);
        return st;
    }
    *out = m;
    return RESDIAG_OK;
}

void rd_merge_free(rd_merge *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_entries; i++) {
        rd_rank_entry *e = &m->entries[i];
        rd_file_destroy(e->rd);
        free(e->path);
        free(e->why);
        free(e->steps);
    }
    for (int i = 0; i < m->n_datasets; i++)
        free(m->datasets[i]);
    free(m->datasets);
    free(m->entries);
    free(m->merged);
    free(m->steps);
    free(m);
}

resdiag_status rd_merge_refresh(rd_merge *m)
{
    for (int k = 0; k < m->n_merged; k++) {
        rd_rank_entry *e = m->merged[k];
        int64_t had = e->n_steps;
        resdiag_status st = rd_file_refresh(e->rd);
        if (st != RESDIAG_OK)
            return st;
        if (read_steps(e) != 0)
            return rd_h5_fail(RESDIAG_E_IO, "run file %s: its steps cannot be read", e->path);
        char why[WHY_LEN];
        rd_h5_hold_failures(why, sizeof why);
        int bad = e->rank > 0 && check_data(e, had, why, sizeof why) != 0;
        rd_h5_hold_failures(NULL, 0);
        if (bad) /* its new steps are damaged: left out, as at open */
            reject(e, why);
    }
    return build_union(m);
}

const rd_rank_entry *rd_merge_entry(const rd_merge *m, int r)
{
    int lo = 0, hi = m->n_entries - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (m->entries[mid].rank == r)
            return &m->entries[mid];
        if (m->entries[mid].rank < r)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

int64_t rd_merge_rank_index(const rd_rank_entry *e, int64_t step)
{
    int64_t lo = 0, hi = e->n_steps - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (e->steps[mid] == step)
            return mid;
        if (e->steps[mid] < step)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

void rd_merge_rank_info(const rd_merge *m, int r, resdiag_rank_info *out)
{
    const rd_rank_entry *e = rd_merge_entry(m, r);
    out->rank = r;
    out->path = e ? e->path : "";
    out->why = e ? e->why : "";
    out->n_steps = e ? e->n_steps : 0;
    out->last_step = e ? e->last_step : -1;
    out->state = e ? e->state
                   : r % m->every ? RESDIAG_RANK_NOT_RECORDED : RESDIAG_RANK_MISSING;
}
