/*
 * svg-axis.h - reading back the axis mapping that every resdiag SVG plot
 * declares (data-x-lo/hi/p0/p1, data-y-...), so a test can put a data
 * value where the figure must have drawn it. For Check tests.
 */
#ifndef RESDIAG_TEST_SVG_AXIS_H
#define RESDIAG_TEST_SVG_AXIS_H

#include <check.h>
#include <stdio.h>
#include <string.h>

/* data-NAME-lo/hi/p0/p1 of the first plot in svg, into v. */
static inline void read_axis(const char *svg, const char *name, double v[4])
{
    static const char *const keys[4] = { "lo", "hi", "p0", "p1" };
    for (int i = 0; i < 4; i++) {
        char attr[32];
        snprintf(attr, sizeof attr, "data-%s-%s=\"", name, keys[i]);
        const char *p = strstr(svg, attr);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(sscanf(p + strlen(attr), "%lf", &v[i]), 1);
    }
}

/* The pixel of data value v on an axis read by read_axis (linear axes). */
static inline double axis_pixel(const double ax[4], double v)
{
    return ax[2] + (v - ax[0]) / (ax[1] - ax[0]) * (ax[3] - ax[2]);
}

#endif
