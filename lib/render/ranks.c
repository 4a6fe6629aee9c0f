/*
 * ranks.c - the ranks part of the report (ranks.h): what
 * lib/analysis/ranks.c found, in words and as JSON. Strings from the run
 * files (the reasons, the sentences that quote names) are escaped here.
 */
#include "render/ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "h5/merge.h"
#include "render/svg.h"

#define E(s) rd_esc_text(esc, (s))

const char *rd_ranks_split_name(resdiag_split s)
{
    const char *name = rd_split_name((int)s);
    return name ? name : "?";
}

static const char *state_name(resdiag_rank_state s)
{
    static const char *const names[] = { "merged", "ended_early", "missing", "not_recorded",
                                         "rejected" };
    return (int)s >= 0 && (int)s < 5 ? names[s] : "?";
}

/* "found 3 of 4 expected ranks (world size 5, data split)" */
static void summary(rd_strbuf *b, const rd_ranks *k)
{
    int expected = k->world_size - k->n_not_recorded;
    rd_strbuf_printf(b, "%d of %d expected rank files found (world size %d, %s split), %d merged",
                     k->n_merged + k->n_rejected, expected, k->world_size,
                     rd_ranks_split_name(k->split), k->n_merged);
}

static void missing_list(rd_strbuf *b, const rd_ranks *k)
{
    for (int i = 0; i < k->n_missing && i < RD_RANKS_LISTED; i++)
        rd_strbuf_printf(b, "%s%d", i ? ", " : "", k->missing[i]);
    if (k->n_missing > RD_RANKS_LISTED)
        rd_strbuf_printf(b, " and %d more", k->n_missing - RD_RANKS_LISTED);
}

#define RUNS_LISTED 32 /* runs of steps with fewer ranks listed (the rest counted) */

/* The end (exclusive) of the run of steps from index s held by the same
 * ranks. */
static int64_t run_end(const rd_ranks *k, int64_t s)
{
    int64_t e = s + 1;
    while (e < k->n_steps && !memcmp(&k->has[e * k->n_rows], &k->has[s * k->n_rows],
                                     (size_t)k->n_rows))
        e++;
    return e;
}

/* "1, 3-5": the merged ranks step index s lacks, runs of ranks compacted. */
static void missing_at(rd_strbuf *b, const rd_ranks *k, int64_t s)
{
    int n = 0;
    for (int i = 0; i < k->n_rows; i++) {
        if (k->rows[i].state == RESDIAG_RANK_REJECTED || k->has[s * k->n_rows + i])
            continue;
        int j = i;
        while (j + 1 < k->n_rows && k->rows[j + 1].state != RESDIAG_RANK_REJECTED &&
               !k->has[s * k->n_rows + j + 1] && k->rows[j + 1].rank == k->rows[j].rank + 1)
            j++;
        rd_strbuf_printf(b, "%s%d", n++ ? ", " : "", k->rows[i].rank);
        if (j > i)
            rd_strbuf_printf(b, "-%d", k->rows[j].rank);
        i = j;
    }
}

/* Which steps fewer than every merged rank hold, in runs of steps held by
 * the same ranks, and whether the compared steps hold the same ranks. */
static void steps_text(rd_strbuf *b, const rd_analysis *a, const rd_ranks *k)
{
    if (!k->present)
        return;
    rd_strbuf_printf(b, "  steps held by all %d merged ranks: %lld of %lld\n", k->n_merged,
                     (long long)(k->n_steps - k->n_partial), (long long)k->n_steps);
    int runs = 0, more = 0;
    for (int64_t s = 0; s < k->n_steps; s = run_end(k, s)) {
        if (k->present[s] >= k->n_merged)
            continue;
        if (runs++ >= RUNS_LISTED) {
            more++;
            continue;
        }
        int64_t e = run_end(k, s) - 1;
        if (e > s)
            rd_strbuf_printf(b, "  - steps %lld-%lld", (long long)a->load.steps[s],
                             (long long)a->load.steps[e]);
        else
            rd_strbuf_printf(b, "  - step %lld", (long long)a->load.steps[s]);
        rd_strbuf_printf(b, ": %d of %d ranks present, missing rank ", k->present[s], k->n_merged);
        missing_at(b, k, s);
        rd_strbuf_printf(b, "\n");
    }
    if (more)
        rd_strbuf_printf(b, "  - ... and %d more runs of steps\n", more);
    int64_t f = a->aborted.first_index, l = a->aborted.last_index;
    if (!k->compare_same)
        rd_strbuf_printf(b, "  the first and the last complete step (%lld, %lld) hold different "
                         "ranks (%d and %d present): the growth and over-training comparisons "
                         "between them mix ranks\n", (long long)a->load.steps[f],
                         (long long)a->load.steps[l], k->present[f], k->present[l]);
    if (!k->judged_whole)
        rd_strbuf_printf(b, "  the analysed step %lld holds %d of %d merged ranks\n",
                         (long long)a->load.step, k->present[a->load.step_index], k->n_merged);
}

void rd_ranks_compare_note(rd_strbuf *b, const rd_analysis *a)
{
    const rd_ranks *k = a->ranks;
    if (!k || !k->present || k->compare_same)
        return;
    rd_strbuf_printf(b, "  not the same ranks: %d of %d merged at the first step, %d at the last "
                     "(see Ranks)\n", k->present[a->aborted.first_index], k->n_merged,
                     k->present[a->aborted.last_index]);
}

void rd_ranks_text(rd_strbuf *b, rd_esc_ring *esc, const rd_analysis *a)
{
    const rd_ranks *k = a->ranks;
    if (!k && a->load.file_world > 1)
        rd_strbuf_printf(b,
                         "\nRanks: this file is rank %d of %d (%s split), read alone; the "
                         "report of rank 0's file merges every rank's\n",
                         a->load.file_rank, a->load.file_world,
                         rd_ranks_split_name(a->load.file_split));
    if (!k)
        return;
    rd_strbuf_printf(b, "\nRanks: ");
    summary(b, k);
    rd_strbuf_printf(b, "\n");
    if (k->n_missing) {
        rd_strbuf_printf(b, "  missing (no file): ");
        missing_list(b, k);
        rd_strbuf_printf(b, "\n");
    }
    if (k->n_not_recorded)
        rd_strbuf_printf(b, "  not recorded (record_rank_every): %d rank(s)\n", k->n_not_recorded);
    for (int i = 0; i < k->n_rows; i++) {
        const rd_rank_row *w = &k->rows[i];
        if (w->state == RESDIAG_RANK_REJECTED)
            rd_strbuf_printf(b, "  rejected: rank %d: %s\n", w->rank, E(w->why));
        else if (w->state == RESDIAG_RANK_ENDED_EARLY)
            rd_strbuf_printf(b, "  ended early: rank %d at step %lld (the others at step %lld)\n",
                             w->rank, (long long)w->last_step, (long long)k->last_step);
    }
    steps_text(b, a, k);
    if (k->per_shard) {
        rd_strbuf_printf(b, "  per shard (tensor split, not merged: NaN):");
        for (int i = 0; i < RD_MERGE_N_PER_SHARD; i++)
            rd_strbuf_printf(b, " %s", resdiag_field_name(rd_merge_per_shard_fields[i]));
        rd_strbuf_printf(b, "\n");
    }
    rd_strbuf_printf(b, "  where the ranks disagree:%s\n", k->n_lines ? "" : " nowhere");
    for (int i = 0; i < k->n_lines; i++)
        rd_strbuf_printf(b, "  - %s\n", E(k->lines[i]));
    if (k->n_lines_all > k->n_lines)
        rd_strbuf_printf(b, "  - ... and %d more\n", k->n_lines_all - k->n_lines);
}

static void json_rows(rd_strbuf *b, const rd_ranks *k, resdiag_rank_state want, const char *key)
{
    int n = 0;
    rd_strbuf_printf(b, ", \"%s\": [", key);
    for (int i = 0; i < k->n_rows; i++) {
        const rd_rank_row *w = &k->rows[i];
        if (w->state != want)
            continue;
        rd_strbuf_printf(b, "%s{\"rank\": %d", n++ ? ", " : "", w->rank);
        if (want == RESDIAG_RANK_REJECTED) {
            rd_strbuf_printf(b, ", \"why\": ");
            rd_strbuf_put_json(b, w->why);
        } else {
            rd_strbuf_printf(b, ", \"last_step\": %lld", (long long)w->last_step);
        }
        rd_strbuf_printf(b, "}");
    }
    rd_strbuf_printf(b, "]");
}

/* The ranks each merged step holds: counts per step, the runs of steps
 * held by fewer than every merged rank, and the compared steps. */
static void json_steps(rd_strbuf *b, const rd_analysis *a, const rd_ranks *k)
{
    if (!k->present)
        return;
    rd_strbuf_printf(b, ", \"present_per_step\": [");
    for (int64_t s = 0; s < k->n_steps; s++)
        rd_strbuf_printf(b, "%s%d", s ? ", " : "", k->present[s]);
    rd_strbuf_printf(b, "], \"steps_all_ranks\": %lld, \"n_steps_fewer_ranks\": %lld, "
                     "\"steps_fewer_ranks\": [", (long long)(k->n_steps - k->n_partial),
                     (long long)k->n_partial);
    int runs = 0;
    for (int64_t s = 0; s < k->n_steps; s = run_end(k, s)) {
        if (k->present[s] >= k->n_merged)
            continue;
        rd_strbuf_printf(b, "%s\n      {\"first_step\": %lld, \"last_step\": %lld, "
                         "\"present\": %d, \"missing\": [", runs++ ? "," : "",
                         (long long)a->load.steps[s], (long long)a->load.steps[run_end(k, s) - 1],
                         k->present[s]);
        int n = 0;
        for (int i = 0; i < k->n_rows; i++)
            if (k->rows[i].state != RESDIAG_RANK_REJECTED && !k->has[s * k->n_rows + i])
                rd_strbuf_printf(b, "%s%d", n++ ? ", " : "", k->rows[i].rank);
        rd_strbuf_printf(b, "]}");
    }
    rd_strbuf_printf(b, "], \"compared_steps_same_ranks\": %s, \"analysed_step_all_ranks\": %s",
                     k->compare_same ? "true" : "false", k->judged_whole ? "true" : "false");
}

static void json_per_rank(rd_strbuf *b, const rd_ranks *k)
{
    rd_strbuf_printf(b, ", \"per_rank\": [");
    for (int i = 0; i < k->n_rows; i++) {
        const rd_rank_row *w = &k->rows[i];
        rd_strbuf_printf(b, "%s\n      {\"rank\": %d, \"state\": \"%s\", \"steps\": %lld, "
                         "\"last_step\": %lld, \"verdict\": ", i ? "," : "", w->rank,
                         state_name(w->state), (long long)w->n_steps, (long long)w->last_step);
        if (w->verdict >= 0)
            rd_strbuf_printf(b, "\"%s\"", resdiag_verdict_name((resdiag_verdict)w->verdict));
        else
            rd_strbuf_printf(b, "null");
        if (w->nf_found)
            rd_strbuf_printf(b, ", \"first_nonfinite_step\": %lld}", (long long)w->nf_step);
        else
            rd_strbuf_printf(b, ", \"first_nonfinite_step\": null}");
    }
    rd_strbuf_printf(b, "]");
}

void rd_ranks_json(rd_strbuf *b, const rd_analysis *a)
{
    const rd_ranks *k = a->ranks;
    if (!k && a->load.file_world > 1)
        rd_strbuf_printf(b,
                         ",\n  \"rank_file\": {\"rank\": %d, \"world_size\": %d, \"split\": "
                         "\"%s\"}",
                         a->load.file_rank, a->load.file_world,
                         rd_ranks_split_name(a->load.file_split));
    if (!k)
        return;
    rd_strbuf_printf(b, ",\n  \"ranks\": {\"world_size\": %d, \"split\": \"%s\", \"expected\": %d, "
                     "\"found\": %d, \"merged\": [", k->world_size, rd_ranks_split_name(k->split),
                     k->world_size - k->n_not_recorded, k->n_merged + k->n_rejected);
    int n = 0;
    for (int i = 0; i < k->n_rows; i++)
        if (k->rows[i].state != RESDIAG_RANK_REJECTED)
            rd_strbuf_printf(b, "%s%d", n++ ? ", " : "", k->rows[i].rank);
    rd_strbuf_printf(b, "], \"missing\": [");
    for (int i = 0; i < k->n_missing && i < RD_RANKS_LISTED; i++)
        rd_strbuf_printf(b, "%s%d", i ? ", " : "", k->missing[i]);
    rd_strbuf_printf(b, "], \"n_missing\": %d, \"not_recorded\": %d", k->n_missing,
                     k->n_not_recorded);
    json_rows(b, k, RESDIAG_RANK_ENDED_EARLY, "ended_early");
    rd_strbuf_printf(b, ", \"last_step\": %lld", (long long)k->last_step);
    json_rows(b, k, RESDIAG_RANK_REJECTED, "rejected");
    rd_strbuf_printf(b, ", \"per_shard\": [");
    for (int i = 0; k->per_shard && i < RD_MERGE_N_PER_SHARD; i++)
        rd_strbuf_printf(b, "%s\"%s\"", i ? ", " : "",
                         resdiag_field_name(rd_merge_per_shard_fields[i]));
    rd_strbuf_printf(b, "], \"first_nonfinite_rank\": ");
    if (k->first_nf_rank >= 0)
        rd_strbuf_printf(b, "%d", k->first_nf_rank);
    else
        rd_strbuf_printf(b, "null");
    rd_strbuf_printf(b, ", \"disagreements\": [");
    for (int i = 0; i < k->n_lines; i++) {
        rd_strbuf_printf(b, "%s\n      ", i ? "," : "");
        rd_strbuf_put_json(b, k->lines[i]);
    }
    rd_strbuf_printf(b, "], \"n_disagreements\": %d", k->n_lines_all);
    json_steps(b, a, k);
    json_per_rank(b, k);
    rd_strbuf_printf(b, "}");
}

void rd_ranks_html(rd_strbuf *b, const rd_analysis *a)
{
    const rd_ranks *k = a->ranks;
    if (!k)
        return;
    rd_strbuf s = { 0 };
    rd_esc_ring ring = { 0 };
    rd_ranks_text(&s, &ring, a);
    char *text = rd_strbuf_finish(&s);
    svg_printf(b, "<section class=\"card%s\" id=\"ranks\">\n<h2>Ranks</h2>\n<pre>",
               k->n_lines || k->n_missing || k->n_rejected || k->n_partial ? " bad" : "");
    svg_escape(b, text ? text + 1 : ""); /* (without the text's leading blank line) */
    svg_printf(b, "</pre>\n</section>\n");
    free(text);
    rd_esc_ring_free(&ring);
}
