/*
 * file_size.c - bytes per recorded step of each file layout, and the CPU
 * time the flush takes per recorded step, measured on the real trainer:
 * tinygpt with 96 layers of d = 32 (--layers 96 --d-model 32 --heads 2
 * --seq 16 --batch 2 --record-every 1, --threads 1), recorded as schema 1,
 * schema 2 at deflate level 1 (the default), 0 and 4.
 *
 * Bytes per step: the growth of the file between two runs of the same
 * configuration and seed, SHORT and LONG steps, over LONG - SHORT (what is
 * written once, the header and the datasets' creation, cancels out). Both
 * lengths are multiples of the flush (16 steps), so that every run ends
 * with a full batch. Flush CPU: from tinygpt's --step-times, the thread CPU
 * inside resdiag of each step whose step_end wrote the file, minus the
 * median of the recorded steps that wrote nothing (their hooks), summed
 * and divided by the recorded steps (LONG run).
 */
#include "file_size.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const LAYOUT_ARGS[FS_N_LAYOUTS] = {
    "--file-schema 1", "--file-schema 2 --compression 1", "--file-schema 2 --compression 0",
    "--file-schema 2 --compression 4" };
static const char *const LAYOUT_NAME[FS_N_LAYOUTS] = {
    "schema 1", "schema 2, deflate 1 (default)", "schema 2, no compression",
    "schema 2, deflate 4" };

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs tinygpt for steps steps in layout k into dir; the file's size, or
 * -1. With step_times, the flush CPU per recorded step into *flush_cpu. */
static double run_size(const char *exe, const char *dir, int k, int steps, double *flush_cpu)
{
    char out[700], times[700], cmd[2400];
    snprintf(out, sizeof out, "%s/size-%d-%d.h5", dir, k, steps);
    snprintf(times, sizeof times, "%s/size-%d-%d.txt", dir, k, steps);
    snprintf(cmd, sizeof cmd, "'%s' --layers 96 --d-model 32 --heads 2 --seq 16 --batch 2 "
             "--record-every 1 --threads 1 --flush-steps 16 --steps %d --log-every 100000 %s "
             "--out '%s' --step-times '%s' >/dev/null 2>&1", exe, steps, LAYOUT_ARGS[k], out,
             times);
    struct stat sb;
    double size = system(cmd) == 0 && stat(out, &sb) == 0 ? (double)sb.st_size : -1;
    unlink(out);
    if (flush_cpu) {
        *flush_cpu = NAN;
        FILE *f = fopen(times, "r");
        double *quiet = calloc((size_t)steps + 1, sizeof *quiet), loud = 0;
        int nq = 0, nl = 0, nrec = 0;
        char line[256];
        while (f && quiet && fgets(line, sizeof line, f)) {
            int step, rec, fl;
            double cpu, wall, in_rd, rd_cpu;
            if (line[0] == '#' || sscanf(line, "%d %d %lf %lf %lf %d %lf", &step, &rec, &cpu,
                                         &wall, &in_rd, &fl, &rd_cpu) != 7 || !rec)
                continue;
            nrec++;
            if (fl) {
                loud += rd_cpu;
                nl++;
            } else if (nq <= steps) {
                quiet[nq++] = rd_cpu;
            }
        }
        if (nq > 0 && nl > 0 && nrec > 0) {
            qsort(quiet, (size_t)nq, sizeof *quiet, cmp_d);
            double med = quiet[nq / 2];
            *flush_cpu = (loud - nl * med) / nrec;
        }
        free(quiet);
        if (f)
            fclose(f);
    }
    unlink(times);
    return size;
}

void bench_file_size(const char *build_root, int quick, fs_result *r)
{
    memset(r, 0, sizeof *r);
    char exe[600];
    snprintf(exe, sizeof exe, "%s/examples/tinygpt/tinygpt", build_root);
    printf("\n== file size: bytes per recorded step, tinygpt 96 layers d = 32 ==\n");
    if (access(exe, X_OK) != 0) {
        snprintf(r->note, sizeof r->note, "%.200s not built", exe);
        printf("  not measured (%s)\n", r->note);
        return;
    }
    char dir[] = "/tmp/resdiag-bench-size-XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(r->note, sizeof r->note, "no temporary directory");
        return;
    }
    r->short_steps = quick ? 16 : 32;
    r->long_steps = quick ? 32 : 96;
    for (int k = 0; k < FS_N_LAYOUTS; k++) {
        double a = run_size(exe, dir, k, r->short_steps, NULL);
        double b = run_size(exe, dir, k, r->long_steps, &r->flush_cpu_s[k]);
        if (a < 0 || b < 0) {
            snprintf(r->note, sizeof r->note, "tinygpt %s failed", LAYOUT_ARGS[k]);
            printf("  not measured (%s)\n", r->note);
            rmdir(dir);
            return;
        }
        r->bytes_per_step[k] = (b - a) / (double)(r->long_steps - r->short_steps);
        printf("  %-32s %9.0f bytes per recorded step (%.0f - %.0f bytes over %d - %d steps); "
               "flush %.1f us CPU per recorded step\n", LAYOUT_NAME[k], r->bytes_per_step[k], b,
               a, r->long_steps, r->short_steps, 1e6 * r->flush_cpu_s[k]);
    }
    rmdir(dir);
    r->valid = 1;
}

void file_size_targets(const fs_result *r)
{
    if (!r->valid) {
        printf("target bytes-per-step-vs-schema-1: not measured (%s)\n",
               r->note[0] ? r->note : "--no-size");
        return;
    }
    double ratio = r->bytes_per_step[FS_S2_DEFLATE1] / r->bytes_per_step[FS_S1];
    printf("target bytes-per-step-vs-schema-1: measured %.3f (schema 2 default %.0f bytes per "
           "recorded step against schema 1 %.0f; file growth from %d to %d steps, tinygpt 96 "
           "layers d = 32, every step recorded), goal <= 0.333, %s\n", ratio,
           r->bytes_per_step[FS_S2_DEFLATE1], r->bytes_per_step[FS_S1], r->short_steps,
           r->long_steps, ratio <= 0.333 ? "met" : "missed");
    static const int info[] = { FS_S2_PLAIN, FS_S2_DEFLATE4 };
    static const char *const label[] = { "compression 0", "compression 4" };
    for (int i = 0; i < 2; i++)
        printf("info bytes-per-step-vs-schema-1, %s: %.3f (%.0f bytes per recorded step)\n",
               label[i], r->bytes_per_step[info[i]] / r->bytes_per_step[FS_S1],
               r->bytes_per_step[info[i]]);
    printf("info flush CPU per recorded step: schema 1 %.1f us, schema 2 deflate 1 %.1f us, "
           "no compression %.1f us, deflate 4 %.1f us (thread CPU inside resdiag on the steps "
           "that wrote, less the hooks' median)\n", 1e6 * r->flush_cpu_s[FS_S1],
           1e6 * r->flush_cpu_s[FS_S2_DEFLATE1], 1e6 * r->flush_cpu_s[FS_S2_PLAIN],
           1e6 * r->flush_cpu_s[FS_S2_DEFLATE4]);
}
