/*
 * team.c - the team calls (resdiag_observe_team_at,
 * resdiag_param_grad_team_at, routed here by hooks.c once their target is
 * resolved): one observation whose rows the threads of the trainer's
 * parallel region compute, each thread its own part, gathered here and
 * recorded by the one ingestion (rd_ingest) when complete (team.h).
 *
 * Why the last part records: the threads of a region are running already,
 * so nothing has to wake them (the pool of split.c pays a wake-up per
 * part); and none of them may wait for another, or the region's cores
 * would idle as they do between regions. So each call computes its rows
 * into its own entry and counts itself done; the call that makes the count
 * n_parts merges every entry in row order and records, the others return
 * at once. Nothing is held while a part computes.
 *
 * The same bits as hook_threads = n_parts: the rows split as split.c
 * splits them for P = n_parts (part k from row k * rows / P; a tensor under
 * RD_SPLIT_MIN_BYTES, or of one row, is one part, read whole by the
 * completing call on the path of resdiag_observe_at), each part's
 * statistics are rd_stats_part_rows of its rows, and they merge into part 0
 * in row order (an empty part, when rows < n_parts, merges as nothing, as
 * split.c's P = rows parts of one row each). The completing call records through
 * rd_ingest as one call of the site (slot claim, repeat checks, CALL_SEQ,
 * call site, update ratio) with the merged statistics.
 *
 * The state of a slot's team (a site's or a parameter's), made by its
 * first team call (compare-and-swap of a pointer: a loser frees its own)
 * and freed at destroy:
 *  - seen: a bit per part given (an atomic OR): a part given twice finds it;
 *  - leader: the first call to have written its arguments into its entry
 *    (compare-and-swap from -1): its arguments are the team's, which every
 *    other call compares its own with, without waiting (the leader wrote
 *    them before its CAS, whose release publishes them);
 *  - done: parts computed (acquire-release: the completer sees every
 *    entry); the completer resets the team before it returns;
 *  - part[k]: the entry of part k, only touched by the call holding bit k
 *    (and the completer), made by it at its first use: at most n_parts
 *    entries a slot (RESDIAG_MAX_TEAM).
 * A call that is a client bug (part twice, another n_parts or tensor than
 * the team's) gives its bit back and records nothing, so the team can
 * still complete with the right call. A tensor read whole goes through the
 * same state (no part computes, the completer reads it): its calls are
 * checked alike, and nothing is recorded before every part came. A team of
 * one is resdiag_observe_at's call, refused only while a team is open
 * (n_open).
 *
 * Hooks never run at the same time as step_end, flush, close or destroy
 * (resdiag.h, "Threads"), so no call is inside a team then: step_end
 * resets an incomplete team (the step is written without it; a warning,
 * at RESDIAG_LOG_INFO as the library's warnings, and RESDIAG_E_STATE say
 * so), set_enabled acts at the next step_begin (no team is open then),
 * close inside a step drops that step and its teams with it, destroy
 * frees them. fork(): the state is plain memory and atomics, no lock and
 * no thread, so a child goes on from it; a team whose other threads
 * stayed in the parent is incomplete at the child's step_end.
 */
#include "record/team.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/hooks.h"
#include "stats/part.h"

#define SEEN_WORDS (RESDIAG_MAX_TEAM / 64)

/* What one call of a team brings; the leader's is the team's. */
typedef struct team_args {
    const void *data;
    int64_t rows, cols, row_stride; /* row_stride 0 made cols */
    resdiag_dtype dtype;
    int n_parts;
    int64_t row0;                   /* sign index of the tensor's row 0 */
    const char *file;
    int line;
} team_args;

typedef struct team_part {
    team_args args;
    rd_stats_part stats; /* of its rows */
    double *norms;       /* (norms_cap) its rows' per-token norms (team_site.norms) */
    int64_t norms_cap;
    int norms_kept;      /* 0: no memory for them */
} team_part;

/* Where a team call goes (its target resolved), and what its parts need. */
typedef struct team_site {
    rd_target target;
    int norms;              /* per-token norms kept (rd_hook_keeps_norms: an add's sides
                               pair by them, and a copy into one takes its source's) */
    rd_sketch_params sp;    /* row0: the rank's base */
} team_site;

typedef struct rd_team {
    atomic_uint_least64_t seen[SEEN_WORDS];
    atomic_int leader;
    atomic_int done;
    atomic_int n_open;        /* the leader's n_parts once it leads, else 0 */
    team_site site;           /* for step_end's message */
    double *gather;           /* (gather_cap) the completer's norms of every row */
    int64_t gather_cap;
    team_part *part[RESDIAG_MAX_TEAM];
} rd_team;

struct rd_teams {
    size_t n;                 /* lay.n_slots */
    _Atomic(rd_team *) team[];
};

/* ------------------------------------------------------------ the state */

static void team_free(rd_team *tm)
{
    if (!tm)
        return;
    for (int k = 0; k < RESDIAG_MAX_TEAM; k++)
        if (tm->part[k]) {
            free(tm->part[k]->norms);
            free(tm->part[k]);
        }
    free(tm->gather);
    free(tm);
}

void rd_teams_free(resdiag *r)
{
    struct rd_teams *all = atomic_load(&r->teams);
    if (!all)
        return;
    for (size_t i = 0; i < all->n; i++)
        team_free(atomic_load(&all->team[i]));
    free(all);
}

/* The table of every slot's team, made by the first team call of the run. */
static struct rd_teams *teams_of(resdiag *r)
{
    struct rd_teams *all = atomic_load_explicit(&r->teams, memory_order_acquire);
    if (all)
        return all;
    struct rd_teams *mine = calloc(1, sizeof *mine + r->lay.n_slots * sizeof mine->team[0]);
    if (!mine)
        return NULL;
    mine->n = r->lay.n_slots;
    for (size_t i = 0; i < mine->n; i++)
        atomic_init(&mine->team[i], NULL);
    if (atomic_compare_exchange_strong_explicit(&r->teams, &all, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    free(mine); /* another thread's came first */
    return all;
}

static void team_reset(rd_team *tm)
{
    atomic_store_explicit(&tm->done, 0, memory_order_relaxed);
    atomic_store_explicit(&tm->n_open, 0, memory_order_relaxed);
    atomic_store_explicit(&tm->leader, -1, memory_order_relaxed);
    /* release: the next team's first claim of a bit sees the three above */
    for (int w = 0; w < SEEN_WORDS; w++)
        atomic_store_explicit(&tm->seen[w], 0, memory_order_release);
}

/* The team of slot cs (of site ts), made on first use; NULL: no memory. */
static rd_team *team_of(resdiag *r, size_t cs, const team_site *ts)
{
    struct rd_teams *all = teams_of(r);
    if (!all)
        return NULL;
    rd_team *tm = atomic_load_explicit(&all->team[cs], memory_order_acquire);
    if (tm)
        return tm;
    rd_team *mine = calloc(1, sizeof *mine);
    if (!mine)
        return NULL;
    mine->site = *ts;
    team_reset(mine);
    if (atomic_compare_exchange_strong_explicit(&all->team[cs], &tm, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    free(mine);
    return tm;
}

/* ------------------------------------------------------------ messages */

/* What team messages call the slot: the target's label, but with a
 * site named as a model site only when its layer is RESDIAG_MODEL_LEVEL
 * (a model site given another layer is named with it, as team messages
 * have always named it). */
static void site_text(char *out, size_t len, const team_site *ts)
{
    rd_target named = ts->target;
    if (named.kind == RD_TARGET_SITE)
        named.model = named.layer == RESDIAG_MODEL_LEVEL;
    rd_target_label(out, len, &named);
}

/* Why args differ from the team's (NULL: they do not); row0 is the
 * leader's to say. */
static const char *args_differ(const team_args *a, const team_args *team)
{
    if (a->n_parts != team->n_parts)
        return "n_parts";
    if (a->data != team->data || a->rows != team->rows || a->cols != team->cols ||
        a->row_stride != team->row_stride || a->dtype != team->dtype)
        return "tensor";
    return NULL;
}

static resdiag_status team_bug(resdiag *r, const char *fn, const team_site *ts, int part,
                               const team_args *a, const team_args *team, const char *what)
{
    char where[RESDIAG_MAX_NAME + 64];
    site_text(where, sizeof where, ts);
    const char *f = a->file ? a->file : "?";
    if (!team)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: part %d of %d of the team observing "
                             "%s was given twice in one team; this call is not recorded (%s:%d)",
                             fn, part, a->n_parts, where, f, a->line);
    if (strcmp(what, "n_parts") == 0)
        return rd_client_bug(r, RESDIAG_E_INVALID, "%s: part %d says n_parts %d, the team "
                             "observing %s has %d; this call is not recorded (%s:%d)", fn, part,
                             a->n_parts, where, team->n_parts, f, a->line);
    return rd_client_bug(r, RESDIAG_E_INVALID, "%s: part %d of the team observing %s gives "
                         "another tensor (%lld x %lld at %p) than the team's (%lld x %lld at "
                         "%p); every part gives the same; this call is not recorded (%s:%d)",
                         fn, part, where, (long long)a->rows, (long long)a->cols, a->data,
                         (long long)team->rows, (long long)team->cols, team->data, f, a->line);
}

/* ------------------------------------------------------------ one call */

/* The rows the slot has seen in this step: a later call's sketch numbers
 * its rows after them (as ingest.c's observe_slot does). The slot is
 * written only by calls of this site, which the team's calls follow. */
static int64_t rows_seen(const resdiag *r, const team_site *ts)
{
    const double calls = r->cur[ts->target.calls];
    if (calls != calls) /* NaN: not observed yet */
        return 0;
    return (int64_t)r->cur[ts->target.fields + RESDIAG_FIELD_ROWS];
}

/* Whether a team's tensor is split into its parts' rows: as split.c splits
 * it (a tensor under RD_SPLIT_MIN_BYTES, or of one row, is read whole). */
static int team_splits(const resdiag_tensor *t)
{
    const double bytes = (double)t->rows * (double)t->cols *
                         (double)rd_stats_dtype_size(t->dtype);
    return t->rows > 1 && bytes >= RD_SPLIT_MIN_BYTES;
}

/* Part `part` of t's rows into e, as split.c computes it: a view of its
 * rows (the kernels start their blocks at a part's first row either way)
 * with the sketch signs of their place in t. */
static void part_compute(team_part *e, const resdiag_tensor *t, int part, const team_args *team,
                         const team_site *ts)
{
    const int64_t r0 = t->rows * part / team->n_parts, r1 = t->rows * (part + 1) / team->n_parts;
    const size_t row_bytes = (size_t)team->row_stride * rd_stats_dtype_size(t->dtype);
    resdiag_tensor mine = *t;
    mine.data = (const char *)t->data + (size_t)r0 * row_bytes;
    mine.rows = r1 - r0;
    rd_sketch_params sp = ts->sp;
    sp.row0 = team->row0 + r0;
    double *norms = NULL;
    e->norms_kept = 1;
    if (ts->norms && r1 > r0) {
        if (e->norms_cap < r1 - r0) {
            double *grown = realloc(e->norms, (size_t)(r1 - r0) * sizeof *grown);
            if (grown) {
                e->norms = grown;
                e->norms_cap = r1 - r0;
            }
        }
        e->norms_kept = e->norms_cap >= r1 - r0;
        norms = e->norms_kept ? e->norms : NULL;
    }
    rd_stats_part_rows(&e->stats, rd_stats_active_path(), norms, &mine, &sp, 0, r1 - r0);
}

/* Records one call of the site with data d, from file:line (rd_ingest). */
static resdiag_status record(resdiag *r, const team_site *ts, const rd_hook_data *d,
                             const char *file, int line)
{
    rd_target at = ts->target;
    at.file = file;
    at.line = line;
    return rd_ingest(r, &at, d);
}

/* The completing call: merges the parts in row order, gathers the norms,
 * records, and readies the team for its next use. */
static resdiag_status team_complete(resdiag *r, rd_team *tm, const resdiag_tensor *t,
                                    const team_args *team)
{
    const team_site *ts = &tm->site;
    if (!team_splits(t)) {
        const rd_hook_data whole = { .kind = RD_SOURCE_TENSOR, .t = t };
        resdiag_status st = record(r, ts, &whole, team->file, team->line);
        team_reset(tm);
        return st;
    }
    rd_stats_part merged = tm->part[0]->stats;
    for (int k = 1; k < team->n_parts; k++)
        rd_stats_part_merge(&merged, &tm->part[k]->stats, &ts->sp);
    const double *norms = NULL;
    if (ts->norms && t->rows > 0) {
        int kept = 1;
        for (int k = 0; k < team->n_parts; k++)
            kept &= tm->part[k]->norms_kept;
        if (kept && tm->gather_cap < t->rows) {
            double *grown = realloc(tm->gather, (size_t)t->rows * sizeof *grown);
            if (grown) {
                tm->gather = grown;
                tm->gather_cap = t->rows;
            }
        }
        if (kept && tm->gather_cap >= t->rows) {
            for (int k = 0; k < team->n_parts; k++) {
                const int64_t r0 = t->rows * k / team->n_parts;
                const int64_t r1 = t->rows * (k + 1) / team->n_parts;
                if (r1 > r0)
                    memcpy(tm->gather + r0, tm->part[k]->norms, (size_t)(r1 - r0) * sizeof *norms);
            }
            norms = tm->gather;
        }
    }
    const rd_hook_data d = { .kind = RD_SOURCE_TEAM_DONE, .t = t, .row_norms = norms,
                             .part = &merged };
    /* no memory for the norms: rd_ingest records the statistics and says so */
    resdiag_status st = record(r, ts, &d, team->file, team->line);
    team_reset(tm);
    return st;
}

/* The entry of part k (its bit held), made on first use; NULL: no memory. */
static team_part *entry_of(rd_team *tm, int k)
{
    if (!tm->part[k])
        tm->part[k] = calloc(1, sizeof *tm->part[k]);
    return tm->part[k];
}

/* A team of one (t checked, ts its slot): resdiag_observe_at's call,
 * unless the slot's team is open, of which it would be a part with another
 * n_parts. */
static resdiag_status team_of_one(resdiag *r, const team_site *ts, const resdiag_tensor *t)
{
    const rd_target *at = &ts->target;
    struct rd_teams *all = atomic_load_explicit(&r->teams, memory_order_acquire);
    rd_team *tm = all ? atomic_load_explicit(&all->team[at->cs], memory_order_acquire) : NULL;
    const int open = tm ? atomic_load_explicit(&tm->n_open, memory_order_relaxed) : 0;
    if (open > 0) {
        const team_args mine = { t->data, t->rows, t->cols, t->row_stride, t->dtype, 1, 0,
                                 at->file, at->line };
        const team_args team = { .n_parts = open };
        return team_bug(r, at->fn, ts, 0, &mine, &team, "n_parts");
    }
    const rd_hook_data d = { .kind = RD_SOURCE_TENSOR, .t = t };
    return rd_ingest(r, at, &d);
}

/* A checked team call (t checked, ts its slot, 0 <= part < n_parts). */
static resdiag_status team_call(resdiag *r, const team_site *ts, const resdiag_tensor *t,
                                int part, int n_parts)
{
    const char *fn = ts->target.fn, *file = ts->target.file;
    const int line = ts->target.line;
    if (n_parts == 1)
        return team_of_one(r, ts, t);
    rd_team *tm = team_of(r, ts->target.cs, ts);
    if (!tm)
        return rd_client_bug(r, RESDIAG_E_NOMEM, "%s: no memory for the state of a team; not "
                             "recorded (%s:%d)", fn, file ? file : "?", line);
    const uint_least64_t bit = (uint_least64_t)1 << (part % 64);
    atomic_uint_least64_t *word = &tm->seen[part / 64];
    team_args mine = { t->data, t->rows, t->cols, t->row_stride ? t->row_stride : t->cols,
                       t->dtype, n_parts, 0, file, line };
    if (atomic_fetch_or_explicit(word, bit, memory_order_acquire) & bit)
        return team_bug(r, fn, ts, part, &mine, NULL, NULL);
    team_part *e = entry_of(tm, part);
    if (!e) {
        atomic_fetch_and_explicit(word, ~bit, memory_order_release);
        return rd_client_bug(r, RESDIAG_E_NOMEM, "%s: no memory for part %d of a team; not "
                             "recorded (%s:%d)", fn, part, file ? file : "?", line);
    }
    /* only a leader's arguments are read: a call that finds one writes
     * none (and reads no slot for row0, which only parts use) */
    const int splits = team_splits(t);
    int lead = atomic_load_explicit(&tm->leader, memory_order_acquire);
    if (lead < 0) {
        if (splits)
            mine.row0 = ts->sp.row0 + rows_seen(r, ts);
        e->args = mine;
        if (atomic_compare_exchange_strong_explicit(&tm->leader, &lead, part,
                                                    memory_order_acq_rel, memory_order_acquire))
            atomic_store_explicit(&tm->n_open, n_parts, memory_order_relaxed);
    }
    if (lead >= 0) {
        const char *why = args_differ(&mine, &tm->part[lead]->args);
        if (why) {
            atomic_fetch_and_explicit(word, ~bit, memory_order_release);
            return team_bug(r, fn, ts, part, &mine, &tm->part[lead]->args, why);
        }
    }
    const team_args *team = &tm->part[lead < 0 ? part : lead]->args;
    if (splits) /* else the completer reads it whole */
        part_compute(e, t, part, team, ts);
    if (atomic_fetch_add_explicit(&tm->done, 1, memory_order_acq_rel) + 1 < n_parts)
        return RESDIAG_OK; /* the last part to finish records */
    return team_complete(r, tm, t, team);
}

/* ------------------------------------------------------------ step end */

resdiag_status rd_teams_step_end(resdiag *r)
{
    struct rd_teams *all = atomic_load_explicit(&r->teams, memory_order_acquire);
    resdiag_status st = RESDIAG_OK;
    for (size_t i = 0; all && i < all->n; i++) {
        rd_team *tm = atomic_load_explicit(&all->team[i], memory_order_acquire);
        if (!tm)
            continue;
        int given = 0;
        for (int w = 0; w < SEEN_WORDS; w++)
            given += __builtin_popcountll(atomic_load_explicit(&tm->seen[w],
                                                               memory_order_acquire));
        const int lead = atomic_load_explicit(&tm->leader, memory_order_acquire);
        if (given == 0 && lead < 0)
            continue;
        char where[RESDIAG_MAX_NAME + 64];
        site_text(where, sizeof where, &tm->site);
        const team_args *a = lead >= 0 ? &tm->part[lead]->args : NULL;
        char msg[400];
        snprintf(msg, sizeof msg, "warning: resdiag_step_end: the team observing %s in step %lld got %d "
                 "of its %d parts: not recorded (the calls of a team all come in the step) "
                 "(%s:%d)", where, (long long)r->step, atomic_load(&tm->done),
                 a ? a->n_parts : 0, a && a->file ? a->file : "?", a ? a->line : 0);
        rd_run_log(r, RESDIAG_LOG_INFO, "%s", msg);
        pthread_mutex_lock(&r->msg_lock); /* what resdiag_errmsg says of RESDIAG_E_STATE */
        snprintf(r->errmsg, sizeof r->errmsg, "%s", msg);
        pthread_mutex_unlock(&r->msg_lock);
        team_reset(tm);
        st = RESDIAG_E_STATE;
    }
    return st;
}

/* ------------------------------------------------------------ a call */

resdiag_status rd_team_write(resdiag *r, const rd_target *t, const rd_hook_data *d)
{
    resdiag_status st = rd_ingest_check(r, t, d);
    if (st)
        return st;
    team_site ts = { *t, 0, { 0, NULL, 0, 0, 0, 0 } };
    if (t->kind == RD_TARGET_SITE) {
        ts.sp = rd_hook_sketch(r, t->site == RESDIAG_LOGITS ? 0 : d->t->cols);
        ts.norms = rd_hook_keeps_norms(0, t->dir, t->site);
    }
    return team_call(r, &ts, d->t, d->team_part, d->n_parts);
}
