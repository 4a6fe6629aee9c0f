/*
 * file_types.c - the value types of a run file and the conversions from
 * and to a step record's doubles (file_types.h).
 */
#include "h5/file_types.h"

#include <math.h>
#include <string.h>

hid_t rd_ftype_file(rd_ftype ft)
{
    switch (ft) {
    case RD_FT_F32: return H5T_IEEE_F32LE;
    case RD_FT_COUNT: return H5T_STD_I64LE;
    case RD_FT_CALLS: return H5T_STD_I32LE;
    case RD_FT_ALIAS: return H5T_STD_I8LE;
    case RD_FT_BYTE: return H5T_STD_U8LE;
    case RD_FT_F64: break;
    }
    return H5T_IEEE_F64LE;
}

hid_t rd_ftype_memory(rd_ftype ft)
{
    switch (ft) {
    case RD_FT_F32: return H5T_NATIVE_FLOAT;
    case RD_FT_COUNT: return H5T_NATIVE_INT64;
    case RD_FT_CALLS: return H5T_NATIVE_INT32;
    case RD_FT_ALIAS: return H5T_NATIVE_INT8;
    case RD_FT_BYTE: return H5T_NATIVE_UINT8;
    case RD_FT_F64: break;
    }
    return H5T_NATIVE_DOUBLE;
}

size_t rd_ftype_size(rd_ftype ft)
{
    switch (ft) {
    case RD_FT_F32: return 4;
    case RD_FT_CALLS: return 4;
    case RD_FT_ALIAS: case RD_FT_BYTE: return 1;
    case RD_FT_COUNT: case RD_FT_F64: break;
    }
    return 8;
}

const void *rd_ftype_fill(rd_ftype ft)
{
    static const double f64 = NAN;
    static const float f32 = NAN;
    static const int64_t count = -1;
    static const int32_t calls = 0;
    static const int8_t alias = -1;
    static const uint8_t byte = 0;
    switch (ft) {
    case RD_FT_F32: return &f32;
    case RD_FT_COUNT: return &count;
    case RD_FT_CALLS: return &calls;
    case RD_FT_ALIAS: return &alias;
    case RD_FT_BYTE: return &byte;
    case RD_FT_F64: break;
    }
    return &f64;
}

int rd_ftype_is_int(rd_ftype ft)
{
    return ft == RD_FT_COUNT || ft == RD_FT_CALLS || ft == RD_FT_ALIAS || ft == RD_FT_BYTE;
}

const char *rd_ftype_name(rd_ftype ft)
{
    static const char *const names[] = { "float64", "float32", "int64", "int32", "int8",
                                           "uint8" };
    return (unsigned)ft < sizeof names / sizeof names[0] ? names[ft] : "?";
}

/* v as an integer in [lo, hi], or 0 with *ok cleared. (2^63 itself is the
 * first double past INT64_MAX, so "< 0x1p63" is the exact test.) */
static int64_t integer_in(double v, double lo, double hi, int *ok)
{
    if (!(v >= lo && v <= hi && v < 0x1p63) || v != floor(v)) {
        *ok = 0;
        return 0;
    }
    return (int64_t)v;
}

long rd_ftype_pack(rd_ftype ft, const double *src, const int *map, size_t n, void *dst)
{
    for (size_t k = 0; k < n; k++) {
        double v = src[map ? (size_t)map[k] : k];
        int ok = 1;
        switch (ft) {
        case RD_FT_F64:
            ((double *)dst)[k] = v;
            break;
        case RD_FT_F32:
            ((float *)dst)[k] = (float)v; /* NaN and +-Inf stay what they are */
            break;
        case RD_FT_COUNT:
            ((int64_t *)dst)[k] = isnan(v) ? -1 : integer_in(v, 0, 0x1p63, &ok);
            break;
        case RD_FT_CALLS:
            ((int32_t *)dst)[k] = isnan(v) ? 0 : (int32_t)integer_in(v, 1, INT32_MAX, &ok);
            break;
        case RD_FT_ALIAS:
            ((int8_t *)dst)[k] = isnan(v) ? -1 : (int8_t)integer_in(v, 0, INT8_MAX, &ok);
            break;
        case RD_FT_BYTE:
            ((uint8_t *)dst)[k] = isnan(v) ? 0 : (uint8_t)integer_in(v, 0, UINT8_MAX, &ok);
            break;
        }
        if (!ok)
            return (long)k;
    }
    return -1;
}

void rd_ftype_unpack_int(rd_ftype ft, const void *src, size_t n, double *dst)
{
    for (size_t k = 0; k < n; k++) {
        int64_t v;
        memcpy(&v, (const char *)src + k * sizeof v, sizeof v); /* (dst may be src) */
        int none = ft == RD_FT_BYTE ? 0 : ft == RD_FT_ALIAS ? v == -1 : ft == RD_FT_CALLS ? v <= 0
                   : v < 0 || v > (int64_t)1 << 53; /* past 2^53: no double holds it */
        dst[k] = none ? NAN : (double)v;
    }
}

rd_ftype rd_table_ftype(int table, const rd_table *t, int schema)
{
    if (schema < 2)
        return RD_FT_F64;
    /* The model sites' sketches stay float64: the final norm's output is
     * told from its input by their difference, which after a norm of an
     * already normalized stream (post-norm) is far below float32's
     * resolution (doc/FORMAT.md); they are 2 x 4 rows per step. */
    if (table == RD_T_FWD_MODEL_SKETCH || table == RD_T_BWD_MODEL_SKETCH)
        return RD_FT_F64;
    switch (t->kind) {
    case RD_KIND_STATS: case RD_KIND_SKETCH: case RD_KIND_UPDATE: return RD_FT_F32;
    case RD_KIND_CALLS: return RD_FT_CALLS;
    case RD_KIND_ALIAS: case RD_KIND_FLAG: return RD_FT_ALIAS;
    case RD_KIND_TEXT: return RD_FT_BYTE;
    case RD_KIND_METRIC: break; /* the trainer's own numbers, as given */
    }
    return RD_FT_F64;
}

rd_ftype rd_summary_ftype(int i, int schema)
{
    /* the copies of float32 fields are float32; the sums of counts stay
     * float64, exact up to 2^53 */
    return schema >= 2 && (i == RD_S_STREAM_NORM || i == RD_S_UPDATE_RATIO) ? RD_FT_F32
                                                                             : RD_FT_F64;
}
