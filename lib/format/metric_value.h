/*
 * metric_value.h - how the file tells a trainer's NaN from "not given" in
 * /metrics/values: both are NaN, and a NaN the trainer gave is stored as
 * the one quiet NaN RD_METRIC_NAN_BITS, which no fill or NAN produces
 * (doc/FORMAT.md, "The trainer's metrics").
 */
#ifndef RESDIAG_FORMAT_METRIC_VALUE_H
#define RESDIAG_FORMAT_METRIC_VALUE_H

#include <stdint.h>

/* positive, quiet, payload 1: the fill value NAN has payload 0 */
#define RD_METRIC_NAN_BITS UINT64_C(0x7ff8000000000001)

/* The value to store for a value the trainer gave: itself, or the given
 * NaN for any NaN. */
double rd_metric_stored(double given);

/* 1 for a value the trainer gave (a number, ±Inf or the given NaN), 0 for
 * any other NaN (not given). */
int rd_metric_is_given(double stored);

#endif
