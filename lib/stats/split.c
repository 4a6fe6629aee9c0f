/*
 * split.c - one large tensor's statistics on several threads (split.h):
 * its rows in P fixed parts, part 0 on the caller's thread, parts 1.. on
 * the free workers of a persistent pool (or the caller), merged in row
 * order (part.h).
 *
 * Why a pool that a run starts once, of hook_threads - 1 workers: a hook
 * runs between the trainer's parallel regions, on one of its threads,
 * while the cores that ran the trainer's compute wait; with as many
 * threads as the trainer computes on, the hook's share of the wall time
 * is its share of the CPU time. Started once at open, because a thread
 * start per tensor costs about what a part of one computes; one pool per
 * run, not per trainer thread, so that resdiag_destroy can join every
 * thread the run added (a per-thread pool would outlive its handle or need
 * the trainer's threads to end) and their number is the one asked for.
 *
 * Why a caller never waits for a busy worker: a trainer that calls hooks
 * from several threads at once already keeps that many cores busy with
 * them; a hook that found every worker taken by other layers' tensors and
 * waited would serialise those hooks. It computes the parts that no free
 * worker took itself instead: the same parts and merge, so the same bits.
 *
 * The hand-over is a mutex and two condition variables per worker: a part
 * of a tensor worth splitting is at least 1 MiB / hook_threads (64 KiB,
 * some microseconds of work, at the most threads), a wake-up costs the
 * caller a few microseconds, and a spinning worker would take a core from
 * the trainer between hooks. A caller that is done with its own parts
 * before a worker has begun its part (that worker's core busy with other
 * work) takes the part back. A part a worker has begun must be waited
 * for, as the worker reads the trainer's tensor, which the hook may not
 * return before: on a machine whose cores other jobs keep busy, a worker
 * preempted in its part makes the hook wait (doc/USING.md).
 *
 * fork(): the child has no copy of the worker threads, and a worker's
 * mutex may have been held at the fork, so the child never touches them: a
 * pool remembers its process, and in another one rd_split_compute computes
 * alone and rd_split_pool_destroy only frees the memory (no pthread_atfork,
 * whose handlers would outlive an unloaded library).
 */
#include "stats/split.h"
#include "stats/part.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* One part of one tensor, as handed to a worker. */
typedef struct part_job {
    rd_stats_part part; /* out */
    rd_stats_path path;
    double *row_norms;
    const resdiag_tensor *t;
    const rd_sketch_params *sp;
    int64_t r0, r1;
} part_job;

typedef struct pool_worker {
    pthread_mutex_t lock;
    pthread_cond_t posted;  /* to the worker: a part, or quit */
    pthread_cond_t done_cv; /* to the caller: the part is done */
    part_job *job;          /* under lock: posted and not yet taken up */
    int done, quit;         /* under lock */
    atomic_int taken;       /* a caller holds the worker, for one part */
    pthread_t thread;
} pool_worker;

struct rd_split_pool {
    pid_t pid;  /* the process the threads belong to */
    int n;      /* workers running: w[0 .. n) */
    atomic_llong tensors, parts, by_workers; /* rd_split_counts */
    pool_worker w[];
};

static void job_compute(part_job *j)
{
    rd_stats_part_rows(&j->part, j->path, j->row_norms, j->t, j->sp, j->r0, j->r1);
}

static void *worker_main(void *arg)
{
    pool_worker *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->job && !w->quit)
            pthread_cond_wait(&w->posted, &w->lock);
        if (!w->job) /* quit, and no part in hand (destroy waits for none) */
            break;
        part_job *j = w->job;
        w->job = NULL;
        pthread_mutex_unlock(&w->lock);
        job_compute(j);
        pthread_mutex_lock(&w->lock);
        w->done = 1;
        pthread_cond_signal(&w->done_cv);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void free_sync(pool_worker *w)
{
    pthread_cond_destroy(&w->done_cv);
    pthread_cond_destroy(&w->posted);
    pthread_mutex_destroy(&w->lock);
}

static int init_sync(pool_worker *w)
{
    int err = pthread_mutex_init(&w->lock, NULL);
    if (err)
        return err;
    if ((err = pthread_cond_init(&w->posted, NULL))) {
        pthread_mutex_destroy(&w->lock);
        return err;
    }
    if ((err = pthread_cond_init(&w->done_cv, NULL))) {
        pthread_cond_destroy(&w->posted);
        pthread_mutex_destroy(&w->lock);
        return err;
    }
    atomic_init(&w->taken, 0);
    return 0;
}

/* Starts worker w (its sync objects ready), or returns an errno value. */
static int start_worker(pool_worker *w)
{
    int err = init_sync(w);
    if (err)
        return err;
    if ((err = pthread_create(&w->thread, NULL, worker_main, w))) {
        free_sync(w);
        return err;
    }
    pthread_setname_np(w->thread, "resdiag-split"); /* for top and gdb; may fail */
    return 0;
}

int rd_split_pool_create(rd_split_pool **out, int workers, int *started)
{
    *out = NULL;
    *started = 0;
    if (workers < 1 || workers > RESDIAG_MAX_HOOK_THREADS - 1)
        return EINVAL;
    rd_split_pool *pool = calloc(1, sizeof *pool + (size_t)workers * sizeof pool->w[0]);
    if (!pool)
        return ENOMEM;
    pool->pid = getpid();
    atomic_init(&pool->tensors, 0);
    atomic_init(&pool->parts, 0);
    atomic_init(&pool->by_workers, 0);
    /* The threads start with the mask in force at pthread_create: every
     * signal blocked, so that none is ever delivered to them, and the
     * caller's mask is put back at once (no disposition changes). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = 0;
    while (pool->n < workers && !(err = start_worker(&pool->w[pool->n])))
        pool->n++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *started = pool->n;
    if (pool->n == 0) {
        free(pool);
        return err;
    }
    *out = pool;
    return err;
}

void rd_split_pool_destroy(rd_split_pool *pool)
{
    if (!pool)
        return;
    if (getpid() == pool->pid) {
        for (int i = 0; i < pool->n; i++) {
            pool_worker *w = &pool->w[i];
            pthread_mutex_lock(&w->lock);
            w->quit = 1;
            pthread_cond_signal(&w->posted);
            pthread_mutex_unlock(&w->lock);
        }
        for (int i = 0; i < pool->n; i++) {
            pthread_join(pool->w[i].thread, NULL);
            free_sync(&pool->w[i]);
        }
    }
    free(pool);
}

/* Hands j to the first free worker from w[*next] on and returns it, moving
 * *next past it; NULL when every one from there is taken (no waiting).
 * A worker returned must see take_back() or wait_done() next. */
static pool_worker *post(rd_split_pool *pool, int *next, part_job *j)
{
    for (; *next < pool->n; (*next)++) {
        pool_worker *w = &pool->w[*next];
        if (atomic_load_explicit(&w->taken, memory_order_relaxed) ||
            atomic_exchange_explicit(&w->taken, 1, memory_order_acquire))
            continue; /* another tensor's part is on it */
        pthread_mutex_lock(&w->lock);
        w->job = j;
        w->done = 0;
        pthread_cond_signal(&w->posted);
        pthread_mutex_unlock(&w->lock);
        (*next)++;
        return w;
    }
    return NULL;
}

static void release(pool_worker *w)
{
    atomic_store_explicit(&w->taken, 0, memory_order_release);
}

/* After post(): if w has not begun its part yet (its core busy with other
 * work), takes it back and returns 1: the caller computes it. */
static int take_back(pool_worker *w)
{
    pthread_mutex_lock(&w->lock);
    const int waiting = w->job != NULL;
    w->job = NULL;
    pthread_mutex_unlock(&w->lock);
    if (waiting)
        release(w);
    return waiting;
}

/* After post() and a take_back() that returned 0: waits for the part. */
static void wait_done(pool_worker *w)
{
    pthread_mutex_lock(&w->lock);
    while (!w->done)
        pthread_cond_wait(&w->done_cv, &w->lock);
    pthread_mutex_unlock(&w->lock);
    release(w);
}

/* The number of parts of t with `threads` threads: 1 for a small tensor. */
static int parts_of(const resdiag_tensor *t, int threads)
{
    if (threads <= 1 || (double)t->rows * (double)t->cols *
                                (double)rd_stats_dtype_size(t->dtype) < RD_SPLIT_MIN_BYTES)
        return 1;
    if (threads > RESDIAG_MAX_HOOK_THREADS)
        threads = RESDIAG_MAX_HOOK_THREADS;
    return t->rows < threads ? (int)t->rows : threads;
}

void rd_split_compute(rd_split_pool *pool, int threads, double *fields, double *sketch,
                      double *row_norms, const resdiag_tensor *t, const rd_sketch_params *sp)
{
    const int P = parts_of(t, threads);
    if (P <= 1) {
        rd_stats_compute(fields, sketch, row_norms, t, sp);
        return;
    }
    /* The parts are fixed and merged in row order whichever thread computed
     * which, so the bits do not depend on timing or on the pool. */
    const rd_stats_path path = rd_stats_active_path();
    part_job job[RESDIAG_MAX_HOOK_THREADS];
    pool_worker *on[RESDIAG_MAX_HOOK_THREADS] = { NULL }; /* job k's worker */
    for (int k = 0; k < P; k++)
        job[k] = (part_job){ .path = path, .row_norms = row_norms, .t = t, .sp = sp,
                             .r0 = t->rows * k / P, .r1 = t->rows * (k + 1) / P };
    if (pool && getpid() == pool->pid)
        for (int k = 1, next = 0; k < P && next < pool->n; k++)
            on[k] = post(pool, &next, &job[k]);
    for (int k = 0; k < P; k++)
        if (!on[k])
            job_compute(&job[k]);
    for (int k = 1; k < P; k++)
        if (on[k] && take_back(on[k])) {
            on[k] = NULL;
            job_compute(&job[k]);
        }
    int by_workers = 0;
    for (int k = 1; k < P; k++)
        if (on[k]) {
            wait_done(on[k]);
            by_workers++;
        }
    if (pool) {
        atomic_fetch_add_explicit(&pool->tensors, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&pool->parts, P, memory_order_relaxed);
        atomic_fetch_add_explicit(&pool->by_workers, by_workers, memory_order_relaxed);
    }
    for (int k = 1; k < P; k++)
        rd_stats_part_merge(&job[0].part, &job[k].part, sp);
    rd_stats_part_fields(fields, sketch, &job[0].part, NULL, t, sp);
}

void rd_stats_compute_split(int threads, double *fields, double *sketch, double *row_norms,
                            const resdiag_tensor *t, const rd_sketch_params *sp)
{
    if (parts_of(t, threads) <= 1) {
        rd_stats_compute(fields, sketch, row_norms, t, sp);
        return;
    }
    rd_split_pool *pool = NULL;
    int started;
    /* none or fewer: this thread computes their parts */
    (void)rd_split_pool_create(&pool, parts_of(t, threads) - 1, &started);
    rd_split_compute(pool, threads, fields, sketch, row_norms, t, sp);
    rd_split_pool_destroy(pool);
}

void rd_split_pool_counts(const rd_split_pool *pool, rd_split_counts *out)
{
    *out = (rd_split_counts){ 0, 0, 0 };
    if (!pool)
        return;
    rd_split_pool *p = (rd_split_pool *)pool; /* atomic loads take non-const pointers */
    out->tensors = atomic_load_explicit(&p->tensors, memory_order_relaxed);
    out->parts = atomic_load_explicit(&p->parts, memory_order_relaxed);
    out->by_workers = atomic_load_explicit(&p->by_workers, memory_order_relaxed);
}

int rd_split_threads_available(void)
{
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                          : sysconf(_SC_NPROCESSORS_ONLN);
    /* EINVAL: more CPUs than a cpu_set_t holds, far more than the cap */
    return n < 1 ? 1 : n > RESDIAG_MAX_HOOK_THREADS ? RESDIAG_MAX_HOOK_THREADS : (int)n;
}
