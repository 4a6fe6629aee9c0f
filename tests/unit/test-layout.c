/*
 * test-layout.c - the step record's tables tile it exactly, and slots map
 * to distinct places; the per-step summary of a record.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check-one.h"
#include "format/tables.h"

START_TEST(layout_tables_tile_the_record_without_gaps)
{
    const int cases[][5] = { { 1, 1, 0, 0, 0 }, { 3, 2, 2, 1, 8 }, { 96, 2, 4, 2, 64 } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rd_tables lay;
        rd_tables_init(&lay, cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4],
                       c == 1 ? RD_OLD_BLOCK_SITES : RESDIAG_N_BLOCK_SITES);
        size_t off = 0, slots = 0;
        for (int t = 0; t < RD_N_TABLES; t++) {
            const rd_table *tb = &lay.tables[t];
            ck_assert_uint_eq(tb->offset, off);
            size_t n = 1;
            for (int k = 0; k < tb->rank; k++)
                n *= (size_t)tb->dims[k];
            ck_assert_uint_eq(tb->count, n);
            off += n;
            /* the axes attribute names the step and every other axis */
            int commas = 0;
            for (const char *p = tb->axes; *p; p++)
                commas += *p == ',';
            ck_assert_int_eq(commas, tb->rank);
            if (tb->kind == RD_KIND_STATS) {
                ck_assert_uint_eq(tb->slot_offset, slots);
                ck_assert_int_eq(tb->dims[tb->rank - 1], RESDIAG_N_FIELDS);
                ck_assert_ptr_nonnull(tb->callsite_name);
                slots += n / RESDIAG_N_FIELDS;
            }
        }
        ck_assert_uint_eq(lay.record_len, off);
        ck_assert_uint_eq(lay.n_slots, slots);
    }
}
END_TEST

START_TEST(layout_every_site_has_its_own_slot)
{
    rd_tables lay;
    const int L = 4, S = 3, K = 5;
    rd_tables_init(&lay, L, S, 1, 1, K, RESDIAG_N_BLOCK_SITES);
    unsigned char *used = calloc(lay.record_len, 1);
    for (int sketch = 0; sketch < 2; sketch++)
        for (int dir = 0; dir < 2; dir++) {
            for (int l = 0; l < L; l++)
                for (int s = 0; s < S; s++)
                    for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                        int t;
                        size_t slot;
                        rd_tables_site_slot(&lay, (resdiag_direction)dir, l, s,
                                            (resdiag_site)site, sketch, &t, &slot);
                        size_t w = (size_t)lay.tables[t].dims[lay.tables[t].rank - 1];
                        size_t o = rd_tables_offset(&lay, t, slot);
                        ck_assert_uint_le(o + w, lay.tables[t].offset + lay.tables[t].count);
                        for (size_t k = 0; k < w; k++) {
                            ck_assert_int_eq(used[o + k], 0);
                            used[o + k] = 1;
                        }
                    }
            for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++) {
                int t;
                size_t slot;
                rd_tables_site_slot(&lay, (resdiag_direction)dir, 99, 99,
                                    (resdiag_site)(RESDIAG_EMBED_OUT + m), sketch, &t, &slot);
                ck_assert_uint_eq(slot, (size_t)m);
                size_t w = (size_t)lay.tables[t].dims[lay.tables[t].rank - 1];
                size_t o = rd_tables_offset(&lay, t, slot);
                for (size_t k = 0; k < w; k++) {
                    ck_assert_int_eq(used[o + k], 0);
                    used[o + k] = 1;
                }
            }
        }
    free(used);
    ck_assert_int_eq(rd_model_site_index(RESDIAG_LOGITS), 3);
    ck_assert_int_eq(rd_model_site_index(RESDIAG_STREAM_OUT), -1);
    ck_assert_int_eq(rd_model_site_index((resdiag_site)20), -1);
}
END_TEST

START_TEST(layout_summary_tiles_its_record)
{
    rd_tables lay;
    rd_tables_init(&lay, 5, 3, 2, 1, 4, RESDIAG_N_BLOCK_SITES);
    const size_t want[RD_N_SUMMARY] = { 3, 6, 5, 15 };
    size_t off = 0;
    for (int i = 0; i < RD_N_SUMMARY; i++) {
        ck_assert_uint_eq(lay.summary[i].offset, off);
        ck_assert_uint_eq(lay.summary[i].count, want[i]);
        ck_assert_int_eq(strncmp(lay.summary[i].name, "summary/", 8), 0);
        off += want[i];
    }
    ck_assert_uint_eq(lay.summary_len, off);
    ck_assert_str_eq(rd_summary_observed_label(0), lay.tables[RD_T_FWD_SITE].name);
    ck_assert_str_eq(rd_summary_observed_label(5), lay.tables[RD_T_MODEL_PARAM].name);
    ck_assert_str_eq(rd_summary_nonfinite_label(2), "records");
    ck_assert_str_eq(rd_summary_nonfinite_label(3), "?");
}
END_TEST

/* A record that observes a few rows, with NaN / Inf counts put in by hand
 * at offsets computed here from the dims (L = 2, S = 2, P = 1, Q = 1). */
START_TEST(layout_summary_of_a_record)
{
    enum { L = 2, S = 2, B = RESDIAG_N_BLOCK_SITES, F = RESDIAG_N_FIELDS };
    rd_tables lay;
    rd_tables_init(&lay, L, S, 1, 1, 4, RESDIAG_N_BLOCK_SITES);
    double *rec = malloc(lay.record_len * sizeof *rec);
    double *out = malloc(lay.summary_len * sizeof *out);
    for (size_t k = 0; k < lay.record_len; k++)
        rec[k] = NAN;
    /* observed: forward (l=1, s=1, stream_out) and (l=0, s=1, stream_out),
     * backward (l=0, s=0, norm_in), the embedding, the model parameter */
    size_t fso = ((size_t)(1 * S + 1) * B + RESDIAG_STREAM_OUT) * F;
    size_t fs0 = ((size_t)(0 * S + 1) * B + RESDIAG_STREAM_OUT) * F;
    size_t bni = ((size_t)0 * B + RESDIAG_NORM_IN) * F;
    double *r1 = rec + lay.tables[RD_T_FWD_SITE].offset + fso;
    double *r0 = rec + lay.tables[RD_T_FWD_SITE].offset + fs0;
    double *rb = rec + lay.tables[RD_T_BWD_SITE].offset + bni;
    double *re = rec + lay.tables[RD_T_FWD_MODEL].offset;
    double *rq = rec + lay.tables[RD_T_MODEL_PARAM].offset;
    double *rows[5] = { r1, r0, rb, re, rq };
    for (int i = 0; i < 5; i++) {
        for (int f = 0; f < F; f++)
            rows[i][f] = 0;
        rows[i][RESDIAG_FIELD_ROWS] = 4;
    }
    r1[RESDIAG_FIELD_TOK_NORM_MEAN] = 2.5;
    r0[RESDIAG_FIELD_TOK_NORM_MEAN] = 1.25;
    r1[RESDIAG_FIELD_NAN_COUNT] = 3;
    rb[RESDIAG_FIELD_INF_COUNT] = 2;
    rq[RESDIAG_FIELD_NAN_COUNT] = 1;
    rq[RESDIAG_FIELD_INF_COUNT] = 5;
    /* update ratios of (0, 1) and (1, 0) */
    double *u = rec + lay.tables[RD_T_UPDATE].offset;
    u[(0 * S + 1) * RESDIAG_N_UPDATE_FIELDS + RESDIAG_UPDATE_RATIO_FROB] = 0.5;
    u[(1 * S + 0) * RESDIAG_N_UPDATE_FIELDS + RESDIAG_UPDATE_RATIO_FROB] = 0.125;
    rd_tables_summarize(&lay, rec, out);
    const double *nf = out + lay.summary[RD_S_NONFINITE].offset;
    ck_assert(nf[RD_SUM_NAN] == 4 && nf[RD_SUM_INF] == 7 && nf[RD_SUM_RECORDS] == 3);
    const double *ob = out + lay.summary[RD_S_OBSERVED].offset;
    const double want_obs[6] = { 2, 1, 1, 0, 0, 1 };
    for (int i = 0; i < 6; i++)
        ck_assert_msg(ob[i] == want_obs[i], "observed[%d] = %g", i, ob[i]);
    const double *xn = out + lay.summary[RD_S_STREAM_NORM].offset;
    ck_assert(xn[0] == 1.25 && xn[1] == 2.5);
    const double *ur = out + lay.summary[RD_S_UPDATE_RATIO].offset;
    ck_assert(isnan(ur[0]) && ur[1] == 0.5 && ur[2] == 0.125 && isnan(ur[3]));
    free(rec);
    free(out);
}
END_TEST

static const check_program program = {
    .name = "layout",
};
CHECK_MAIN(&program,
           CHECK_TEST(layout_tables_tile_the_record_without_gaps),
           CHECK_TEST(layout_every_site_has_its_own_slot),
           CHECK_TEST(layout_summary_tiles_its_record),
           CHECK_TEST(layout_summary_of_a_record))
