/*
 * ipe.c - instructions per element from callgrind (ipe.h): the scenario
 * run under valgrind, and the runs and the figure printed by the bench.
 */
#include "ipe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "resdiag.h"
#include "stats/stats.h"

#define IPE_CALLS 4
#define IPE_ELEMS (64L * 1024) /* a 256 KiB f32 tensor; 2N = 512 KiB */

static int dtype_of(const char *s, resdiag_dtype *dt)
{
    static const resdiag_dtype all[] = { RESDIAG_DTYPE_F32, RESDIAG_DTYPE_BF16,
                                         RESDIAG_DTYPE_F16 };
    for (size_t k = 0; k < 3; k++)
        if (!strcmp(s, resdiag_dtype_name(all[k])))
            return *dt = all[k], 0;
    return -1;
}

int ipe_scenario(const char *path, const char *dtype, long elems, int cols)
{
    resdiag_dtype dt;
    int p = -1;
    for (int k = 0; k < RD_STATS_N_PATHS; k++)
        if (!strcmp(path, rd_stats_path_name((rd_stats_path)k)))
            p = k;
    if (p < 0 || dtype_of(dtype, &dt) != 0 || elems < cols)
        return 2;
    if (!rd_stats_path_available((rd_stats_path)p))
        return 3; /* valgrind's CPU has no AVX-512: the call would fall back */
    int64_t rows = elems / cols;
    size_t es = dt == RESDIAG_DTYPE_F32 ? 4 : 2;
    void *buf = aligned_alloc(64, ((size_t)rows * (size_t)cols * es + 63) / 64 * 64);
    double *norms = malloc((size_t)rows * sizeof *norms);
    float *tau = malloc((size_t)(cols + 1) * sizeof *tau);
    if (!buf || !norms || !tau)
        return 1;
    /* finite values of a few scales and both signs, mean near 0 like a
     * residual stream (rows dominated by their mean are handed to the
     * one-row path: a different loop); 0x3c00 (f16) and 0x3f80 (bf16) are
     * 1.0, bit 15 the sign */
    for (int64_t k = 0; k < rows * cols; k++) {
        uint32_t h = (uint32_t)k * 2654435761u;
        float v = (float)(h % 2001) / 1000.0f - 1.0f;
        if (es == 4)
            ((float *)buf)[k] = v;
        else
            ((uint16_t *)buf)[k] = (uint16_t)((dt == RESDIAG_DTYPE_BF16 ? 0x3f00 : 0x3800) +
                                              (k * 7) % 97 + (h >> 16 & 0x8000u));
    }
    rd_fill_column_signs(tau, (size_t)cols + 1, 0x5eed);
    rd_sketch_params sp = { 16, tau, (size_t)cols + 1, 0x5eed, 0, 0 };
    resdiag_tensor t = resdiag_tensor_make(buf, dt, rows, cols, 0);
    double f[RESDIAG_N_FIELDS], sk[16], s = 0;
    for (int c = 0; c < IPE_CALLS; c++) {
        rd_stats_compute_path((rd_stats_path)p, f, sk, norms, &t, &sp);
        s += f[RESDIAG_FIELD_FROB];
    }
    free(buf), free(norms), free(tau);
    return s > 0 ? 0 : 1;
}

/* Instructions inside rd_stats_compute_path of one run; -3 when the path
 * does not run under valgrind, -1 on another failure. */
static double count(const char *path, const char *dtype, long elems, int cols)
{
    char out[64], cmd[1024], self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    snprintf(out, sizeof out, "/tmp/rd-ipe-%ld.out", (long)getpid());
    snprintf(cmd, sizeof cmd, "valgrind --tool=callgrind --callgrind-out-file=%s "
             "--toggle-collect=rd_stats_compute_path '%s' --ipe %s %s %ld %d >/dev/null 2>&1",
             out, self, path, dtype, elems, cols);
    double total = -1;
    int rc = system(cmd);
    if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 3)
        total = -3;
    else if (rc == 0) {
        FILE *f = fopen(out, "r");
        char line[256];
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "totals:", 7) || !strncmp(line, "summary:", 8))
                total = strtod(strchr(line, ':') + 1, NULL);
        if (f)
            fclose(f);
    }
    unlink(out);
    return total;
}

void ipe_print(int cols)
{
    if (system("valgrind --version >/dev/null 2>&1") != 0) {
        printf("ipe: not measured (valgrind missing)\n");
        return;
    }
    static const char *const dts[3] = { "f32", "bf16", "f16" };
    for (int p = RD_STATS_N_PATHS - 1; p >= 0; p--) {
        if (!rd_stats_path_available((rd_stats_path)p))
            continue;
        const char *pn = rd_stats_path_name((rd_stats_path)p);
        for (int d = 0; d < 3; d++) {
            double a = count(pn, dts[d], IPE_ELEMS, cols);
            double b = a < 0 ? a : count(pn, dts[d], 2 * IPE_ELEMS, cols);
            if (a == -3)
                printf("ipe %s-%s: not measured (valgrind's CPU has no such path: it does "
                       "not run AVX-512)\n", dts[d], pn);
            else if (a < 0 || b < 0)
                printf("ipe %s-%s: not measured (callgrind failed)\n", dts[d], pn);
            else
                printf("ipe %s-%s: %.3f instructions per element (callgrind, inside "
                       "rd_stats_compute_path, %d calls of %ld and %ld elements, cols %d)\n",
                       dts[d], pn, (b - a) / ((double)IPE_ELEMS * IPE_CALLS), IPE_CALLS,
                       IPE_ELEMS, 2 * IPE_ELEMS, cols);
        }
    }
}
