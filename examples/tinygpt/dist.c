/*
 * dist.c - tinygpt's ranks over MPI (dist.h); with -DTINYGPT_MPI only, a
 * job of one process otherwise.
 */
#include "dist.h"

#include <limits.h>

#ifdef TINYGPT_MPI
#include <mpi.h>

#ifdef TINYGPT_DOUBLE
#define TG_MPI_REAL MPI_DOUBLE
#else
#define TG_MPI_REAL MPI_FLOAT
#endif

void tg_dist_init(tg_dist *d, int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world);
}

void tg_dist_finalize(tg_dist *d)
{
    (void)d;
    MPI_Finalize();
}

void tg_dist_sum(const tg_dist *d, real *x, size_t n)
{
    if (d->world == 1) return;
    /* MPI counts are ints: a larger buffer goes in pieces. */
    while (n > 0) {
        int k = n > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)n;
        MPI_Allreduce(MPI_IN_PLACE, x, k, TG_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
        x += k;
        n -= (size_t)k;
    }
}

double tg_dist_sum_double(const tg_dist *d, double x)
{
    if (d->world == 1) return x;
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

void tg_dist_barrier(const tg_dist *d)
{
    if (d->world > 1) MPI_Barrier(MPI_COMM_WORLD);
}

#else /* one process */

void tg_dist_init(tg_dist *d, int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    d->rank = 0;
    d->world = 1;
}

void tg_dist_finalize(tg_dist *d)
{
    (void)d;
}

void tg_dist_sum(const tg_dist *d, real *x, size_t n)
{
    (void)d;
    (void)x;
    (void)n;
}

double tg_dist_sum_double(const tg_dist *d, double x)
{
    (void)d;
    return x;
}

void tg_dist_barrier(const tg_dist *d)
{
    (void)d;
}

#endif
