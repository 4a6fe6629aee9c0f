/*
 * reader_strings.h - string interning for the reader (reader_strings.c):
 * each distinct string is stored once, in blocks freed together, so that
 * the call sites of a file (one per slot of its tables, most of them
 * alike) cost what their distinct texts cost.
 */
#ifndef RESDIAG_H5_READER_STRINGS_H
#define RESDIAG_H5_READER_STRINGS_H

#include <stddef.h>

/* Interned strings: pointers stay valid until the reader closes. */
typedef struct rd_intern_block {
    struct rd_intern_block *next;
    size_t used, cap;
    char data[];
} rd_intern_block;

typedef struct rd_intern {
    rd_intern_block *blocks;
    const char **table; /* open addressing, hcap entries */
    size_t hcap, count;
} rd_intern;

/* The one stored copy of s ("" for the empty string); NULL when out of
 * memory. A zeroed rd_intern is an empty pool. */
const char *rd_intern_str(rd_intern *in, const char *s);

/* Frees every string of the pool, which is then empty again. */
void rd_intern_free(rd_intern *in);

#endif
