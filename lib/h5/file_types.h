/*
 * file_types.h - how the values of a dataset are stored in a run file, and
 * the conversions between them and the doubles of a step record (NaN = not
 * observed), both ways. Schema 1 stores every value as a float64; schema 2
 * stores each at the precision it needs, with a sentinel for NaN where the
 * type is an integer (doc/FORMAT.md, "Schema 2"). The writer converts
 * itself, value by value, so that HDF5 never turns a NaN into an integer.
 */
#ifndef RESDIAG_H5_FILE_TYPES_H
#define RESDIAG_H5_FILE_TYPES_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "format/tables.h"

typedef enum rd_ftype {
    RD_FT_F64 = 0, /* float64: as it is (schema 1; metrics, /summary counts) */
    RD_FT_F32,     /* float32: rounded to nearest; NaN stays NaN */
    RD_FT_COUNT,   /* int64: an integer >= 0; -1 = NaN */
    RD_FT_CALLS,   /* int32: an integer 1..INT32_MAX; 0 = NaN */
    RD_FT_ALIAS,   /* int8: an integer 0..127; -1 = NaN (aliases, the step status flag) */
    RD_FT_BYTE     /* uint8: an integer 0..255 (the bytes of a string); NaN = 0 */
} rd_ftype;

/* The type in the file (little-endian, as resdiag writes it). */
hid_t rd_ftype_file(rd_ftype ft);
/* The native type of a packed buffer, and the bytes of one value. */
hid_t rd_ftype_memory(rd_ftype ft);
size_t rd_ftype_size(rd_ftype ft);
/* The fill value (what a chunk never written reads as), of the memory type. */
const void *rd_ftype_fill(rd_ftype ft);
/* 1 for the integer types, which the reader reads as int64. */
int rd_ftype_is_int(rd_ftype ft);
/* "float32", "int64", ... for messages and documentation. */
const char *rd_ftype_name(rd_ftype ft);

/* Converts n values into dst (n values of rd_ftype_memory): src[map[k]] for
 * k < n, or src[k] when map is NULL. Returns -1, or the index k of the
 * first value that the type cannot hold exactly (an integer type and a
 * value that is not an integer in its range): dst is then incomplete. */
long rd_ftype_pack(rd_ftype ft, const double *src, const int *map, size_t n, void *dst);

/* Integers read from the file (n int64 at src) back to doubles: the
 * sentinel of ft (any negative for RD_FT_COUNT and RD_FT_CALLS, and 0 for
 * the latter, since neither holds such values, and a count above 2^53,
 * which no double holds exactly; -1 for RD_FT_ALIAS, whose
 * other values the reader checks) becomes NaN; RD_FT_BYTE has no sentinel
 * (its readers take what is no byte 1..255 for the end). dst may be src's
 * memory. */
void rd_ftype_unpack_int(rd_ftype ft, const void *src, size_t n, double *dst);

/* The type of table t (id `table`)'s dataset in a file of that schema (1 or 2): of a
 * STATS table's real fields in schema 2 (its counts: RD_FT_COUNT). */
rd_ftype rd_table_ftype(int table, const rd_table *t, int schema);
/* The type of summary dataset i (enum rd_summary_id). */
rd_ftype rd_summary_ftype(int i, int schema);

#endif
