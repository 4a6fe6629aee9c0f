/*
 * test-layout.c - the step record's tables tile it exactly, and slots map
 * to distinct places.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

START_TEST(layout_tables_tile_the_record_without_gaps)
{
    const int cases[][5] = { { 1, 1, 0, 0, 0 }, { 3, 2, 2, 1, 8 }, { 96, 2, 4, 2, 64 } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rd_layout lay;
        rd_layout_init(&lay, cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4]);
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
    rd_layout lay;
    const int L = 4, S = 3, K = 5;
    rd_layout_init(&lay, L, S, 1, 1, K);
    unsigned char *used = calloc(lay.record_len, 1);
    for (int sketch = 0; sketch < 2; sketch++)
        for (int dir = 0; dir < 2; dir++) {
            for (int l = 0; l < L; l++)
                for (int s = 0; s < S; s++)
                    for (int site = 0; site < RESDIAG_N_BLOCK_SITES; site++) {
                        int t;
                        size_t slot;
                        rd_layout_site_slot(&lay, (resdiag_direction)dir, l, s,
                                            (resdiag_site)site, sketch, &t, &slot);
                        size_t w = (size_t)lay.tables[t].dims[lay.tables[t].rank - 1];
                        size_t o = rd_layout_offset(&lay, t, slot);
                        ck_assert_uint_le(o + w, lay.tables[t].offset + lay.tables[t].count);
                        for (size_t k = 0; k < w; k++) {
                            ck_assert_int_eq(used[o + k], 0);
                            used[o + k] = 1;
                        }
                    }
            for (int m = 0; m < RESDIAG_N_MODEL_SITES; m++) {
                int t;
                size_t slot;
                rd_layout_site_slot(&lay, (resdiag_direction)dir, 99, 99,
                                    (resdiag_site)(RESDIAG_EMBED_OUT + m), sketch, &t, &slot);
                ck_assert_uint_eq(slot, (size_t)m);
                size_t w = (size_t)lay.tables[t].dims[lay.tables[t].rank - 1];
                size_t o = rd_layout_offset(&lay, t, slot);
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

int main(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, layout_tables_tile_the_record_without_gaps);
    tcase_add_test(tc, layout_every_site_has_its_own_slot);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
