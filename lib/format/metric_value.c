/*
 * metric_value.c - the given NaN of /metrics/values (metric_value.h) and
 * the public test for it, resdiag_metric_given.
 */
#include <math.h>
#include <string.h>

#include "format/metric_value.h"
#include "resdiag.h"

double rd_metric_stored(double given)
{
    if (!isnan(given))
        return given;
    uint64_t bits = RD_METRIC_NAN_BITS;
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

int rd_metric_is_given(double stored)
{
    if (!isnan(stored))
        return 1;
    uint64_t bits;
    memcpy(&bits, &stored, sizeof bits);
    return bits == RD_METRIC_NAN_BITS;
}

int resdiag_metric_given(double value)
{
    return rd_metric_is_given(value);
}
