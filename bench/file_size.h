/*
 * file_size.h - the benchmark's file-size figures (file_size.c): bytes per
 * recorded step of schema 1 and of schema 2 at deflate levels 1, 0 and 4,
 * and the flush's CPU time per recorded step, on tinygpt's 96-layer run.
 */
#ifndef RD_BENCH_FILE_SIZE_H
#define RD_BENCH_FILE_SIZE_H

enum { FS_S1 = 0, FS_S2_DEFLATE1, FS_S2_PLAIN, FS_S2_DEFLATE4, FS_N_LAYOUTS };

typedef struct fs_result {
    int valid;
    int short_steps, long_steps;           /* the two runs' lengths */
    double bytes_per_step[FS_N_LAYOUTS];   /* file growth per recorded step */
    double flush_cpu_s[FS_N_LAYOUTS];      /* flush CPU seconds per recorded step */
    char note[256];                        /* why not measured */
} fs_result;

/* Runs the tinygpt of build_root in every layout (quick: shorter runs)
 * and prints one line each. */
void bench_file_size(const char *build_root, int quick, fs_result *r);

/* The target line bytes-per-step-vs-schema-1 and the informational lines. */
void file_size_targets(const fs_result *r);

#endif
