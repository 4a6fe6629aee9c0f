/*
 * split.c - one large tensor's statistics on two threads (split.h): the
 * caller computes rows [0, rows/2), a persistent worker rows [rows/2,
 * rows), and the two parts merge in row order (part.h).
 *
 * Why one worker per run, serving one tensor at a time, and not one per
 * trainer thread: a trainer that calls hooks from several threads already
 * keeps that many cores busy with them, so a second worker would have no
 * core to run on; one worker bounds the threads a run adds to one, which
 * resdiag_destroy can join (a per-thread worker would outlive its handle
 * or need the trainer's threads to end). A hook that finds the worker
 * taken does both halves itself: the same split and merge, so the same
 * bits, and it never waits behind another layer's hook.
 *
 * The hand-over is a mutex and two condition variables: half of a tensor
 * worth splitting is at least 512 KiB, tens of microseconds or more, so
 * a wake-up costs little, and a spinning worker would take a core from
 * the trainer between hooks. A caller that is done with its half before
 * the worker has begun the other (its core busy with other work) takes
 * that half back, so a hook with hook_threads 2 takes about as long as
 * with 1 at worst, plus a wake-up.
 *
 * fork(): the child has no copy of the worker thread, and the worker's
 * mutex may have been held at the fork, so the child never touches it: a
 * worker remembers its process, and in another one rd_split_compute
 * computes alone and rd_split_worker_destroy only frees the memory (no
 * pthread_atfork, whose handlers would outlive an unloaded library).
 */
#include "stats/split.h"
#include "stats/part.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* Below this many bytes a second thread costs more than it saves. */
#define SPLIT_MIN_BYTES (1u << 20)

/* The upper half of one tensor, as handed to the worker. */
typedef struct half {
    rd_stats_part part; /* out */
    rd_stats_path path;
    double *row_norms;
    const resdiag_tensor *t;
    const rd_sketch_params *sp;
    int64_t r0, r1;
} half;

struct rd_split_worker {
    pthread_mutex_t lock;
    pthread_cond_t posted;  /* to the worker: a job, or quit */
    pthread_cond_t done_cv; /* to the caller: the job is done */
    half *job;              /* under lock: posted and not yet taken up */
    int done, quit;         /* under lock */
    atomic_int taken;       /* a caller holds the worker, for one tensor */
    pthread_t thread;
    pid_t pid;              /* the process the thread belongs to */
};

static void half_compute(half *h)
{
    rd_stats_part_rows(&h->part, h->path, h->row_norms, h->t, h->sp, h->r0, h->r1);
}

static void *worker_main(void *arg)
{
    rd_split_worker *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->job && !w->quit)
            pthread_cond_wait(&w->posted, &w->lock);
        if (!w->job) /* quit, and no tensor in hand (destroy waits for none) */
            break;
        half *h = w->job;
        w->job = NULL;
        pthread_mutex_unlock(&w->lock);
        half_compute(h);
        pthread_mutex_lock(&w->lock);
        w->done = 1;
        pthread_cond_signal(&w->done_cv);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void free_sync(rd_split_worker *w)
{
    pthread_cond_destroy(&w->done_cv);
    pthread_cond_destroy(&w->posted);
    pthread_mutex_destroy(&w->lock);
}

int rd_split_worker_create(rd_split_worker **out)
{
    *out = NULL;
    rd_split_worker *w = calloc(1, sizeof *w);
    if (!w)
        return ENOMEM;
    int err = pthread_mutex_init(&w->lock, NULL);
    if (err) {
        free(w);
        return err;
    }
    if ((err = pthread_cond_init(&w->posted, NULL))) {
        pthread_mutex_destroy(&w->lock);
        free(w);
        return err;
    }
    if ((err = pthread_cond_init(&w->done_cv, NULL))) {
        pthread_cond_destroy(&w->posted);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return err;
    }
    atomic_init(&w->taken, 0);
    w->pid = getpid();
    /* The thread starts with the mask in force at pthread_create: every
     * signal blocked, so that none is ever delivered to it, and the
     * caller's mask is put back at once (no disposition changes). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&w->thread, NULL, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        free_sync(w);
        free(w);
        return err;
    }
    pthread_setname_np(w->thread, "resdiag-split"); /* for top and gdb; may fail */
    *out = w;
    return 0;
}

void rd_split_worker_destroy(rd_split_worker *w)
{
    if (!w)
        return;
    if (getpid() == w->pid) {
        pthread_mutex_lock(&w->lock);
        w->quit = 1;
        pthread_cond_signal(&w->posted);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        free_sync(w);
    }
    free(w);
}

/* Hands h to the worker if it is free (and is this process's). Returns 1
 * if it took it: then wait_done() must follow. */
static int post(rd_split_worker *w, half *h)
{
    if (!w || getpid() != w->pid)
        return 0;
    if (atomic_exchange_explicit(&w->taken, 1, memory_order_acquire))
        return 0; /* another tensor is on it: no waiting */
    pthread_mutex_lock(&w->lock);
    w->job = h;
    w->done = 0;
    pthread_cond_signal(&w->posted);
    pthread_mutex_unlock(&w->lock);
    return 1;
}

/* After post(): waits for the worker to finish its half, or, if it has
 * not begun it yet (its core busy with other work), takes the half back.
 * Returns 1 when the worker computed it, 0 when the caller must. */
static int wait_done(rd_split_worker *w)
{
    pthread_mutex_lock(&w->lock);
    const int begun = w->job == NULL;
    w->job = NULL;
    while (begun && !w->done)
        pthread_cond_wait(&w->done_cv, &w->lock);
    pthread_mutex_unlock(&w->lock);
    atomic_store_explicit(&w->taken, 0, memory_order_release);
    return begun;
}

static int worth_splitting(const resdiag_tensor *t)
{
    return t->rows / 2 > 0 && (double)t->rows * (double)t->cols *
                                      (double)rd_stats_dtype_size(t->dtype) >= SPLIT_MIN_BYTES;
}

void rd_split_compute(rd_split_worker *w, double *fields, double *sketch, double *row_norms,
                      const resdiag_tensor *t, const rd_sketch_params *sp)
{
    if (!worth_splitting(t)) {
        rd_stats_compute(fields, sketch, row_norms, t, sp);
        return;
    }
    /* The split is fixed and merged in row order whichever thread computed
     * which half, so the bits do not depend on timing or on the worker. */
    const rd_stats_path path = rd_stats_active_path();
    half hi = { .path = path, .row_norms = row_norms, .t = t, .sp = sp,
                .r0 = t->rows / 2, .r1 = t->rows };
    rd_stats_part lo;
    int posted = post(w, &hi);
    rd_stats_part_rows(&lo, path, row_norms, t, sp, 0, hi.r0);
    if (!posted || !wait_done(w))
        half_compute(&hi);
    rd_stats_part_fields(fields, sketch, &lo, &hi.part, t, sp);
}

void rd_stats_compute_split(int threads, double *fields, double *sketch, double *row_norms,
                            const resdiag_tensor *t, const rd_sketch_params *sp)
{
    if (threads <= 1 || !worth_splitting(t)) {
        rd_stats_compute(fields, sketch, row_norms, t, sp);
        return;
    }
    rd_split_worker *w = NULL;
    (void)rd_split_worker_create(&w); /* none: this thread does both halves */
    rd_split_compute(w, fields, sketch, row_norms, t, sp);
    rd_split_worker_destroy(w);
}
