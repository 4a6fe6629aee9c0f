/*
 * reader_strings.c - string interning for the reader (reader_strings.h):
 * a hash table of open addressing over strings copied into 64 KiB blocks.
 */
#include "h5/reader_strings.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

const char *rd_intern_str(rd_intern *in, const char *s)
{
    if (!s[0])
        return "";
    if (in->count * 2 >= in->hcap) {
        size_t ncap = in->hcap ? in->hcap * 2 : 64;
        const char **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return NULL;
        for (size_t i = 0; i < in->hcap; i++) {
            if (!in->table[i])
                continue;
            size_t j = (size_t)hash_str(in->table[i]) & (ncap - 1);
            while (nt[j])
                j = (j + 1) & (ncap - 1);
            nt[j] = in->table[i];
        }
        free(in->table);
        in->table = nt;
        in->hcap = ncap;
    }
    size_t j = (size_t)hash_str(s) & (in->hcap - 1);
    while (in->table[j]) {
        if (strcmp(in->table[j], s) == 0)
            return in->table[j];
        j = (j + 1) & (in->hcap - 1);
    }
    size_t len = strlen(s) + 1;
    rd_intern_block *b = in->blocks;
    if (!b || b->cap - b->used < len) {
        size_t cap = len > 65536 ? len : 65536;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = in->blocks;
        in->blocks = b;
    }
    char *dst = b->data + b->used;
    memcpy(dst, s, len);
    b->used += len;
    in->table[j] = dst;
    in->count++;
    return dst;
}

void rd_intern_free(rd_intern *in)
{
    while (in->blocks) {
        rd_intern_block *n = in->blocks->next;
        free(in->blocks);
        in->blocks = n;
    }
    free(in->table);
    in->table = NULL;
    in->hcap = in->count = 0;
}
