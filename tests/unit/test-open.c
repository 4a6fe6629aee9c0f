/*
 * test-open.c - what resdiag_open may do at the path it is given
 * (doc/FORMAT.md, "Creating a run file"): it creates a new file, or with
 * overwrite replaces a resdiag run file, and nothing else. Devices, FIFOs,
 * directories, symlinks, checkpoints and HDF5 files of other programs stay
 * byte for byte as they were; a file is removed after a failed create only
 * if that create made it; and a run that is being written (by this process
 * or, with real processes, by another) is refused as locked, its steps all
 * still there afterwards, while readers read on. A SIGKILLed writer leaves
 * no lock behind.
 *
 * The program is also its own helper writer: test-open --writer PATH N
 * READY_FD GO_FD records steps 100 .. 100+N-1, says "r" on READY_FD, waits
 * for a byte on GO_FD, records N more and closes.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "h5/writer.h"
#include "check-one.h"
#include "format/tables.h"
#include "resdiag.h"
#include "run-files.h"

/* ------------------------------------------------------------- helpers */

static char self_path[4096];

/* The last message (log_count counts them all). */
static char log_last[1024];
static void capture_last_log(resdiag_log_priority prio, const char *msg, void *user)
{
    (void)prio;
    (void)user;
    log_count++;
    snprintf(log_last, sizeof log_last, "%s", msg);
}

static void setup(void)
{
    ck_assert(check_one_make_dir(dir, sizeof dir, "open"));
    log_count = 0;
    log_last[0] = 0;
    resdiag_set_log_handler(capture_last_log, NULL);
    resdiag_set_log_priority(RESDIAG_LOG_ERROR);
}

static void teardown(void)
{
    remove_run_dir();
    resdiag_set_log_handler(NULL, NULL);
}

enum { L = 2, D = 8, T = 3 };

static resdiag_status try_open(resdiag **r, const char *path, int overwrite)
{
    resdiag_model m = mlp_model(L, D);
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 1; /* every step on disk at once */
    o.overwrite = overwrite;
    *r = (resdiag *)0x1;
    log_last[0] = 0;
    return resdiag_open(r, path, &m, &o);
}

/* Records steps first .. first+n-1 (one site each). */
static void record(resdiag *r, int64_t first, int n)
{
    float x[T * D];
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < T * D; i++)
            x[i] = (float)(first + k) + 0.25f * (float)i;
        ck_assert_int_eq(resdiag_step_begin(r, first + k), RESDIAG_OK);
        ck_assert_int_eq(RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)),
                         RESDIAG_OK);
        ck_assert_int_eq(resdiag_step_end(r), RESDIAG_OK);
    }
}

/* A finished run with steps first .. first+n-1 at path (which must be new). */
static void write_run(const char *path, int64_t first, int n)
{
    resdiag *r;
    ck_assert_int_eq(try_open(&r, path, 0), RESDIAG_OK);
    record(r, first, n);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
}

/* 1 if path is a run file holding exactly steps first .. first+n-1. */
static int holds_steps(const char *path, int64_t first, int n)
{
    resdiag_reader *rd = NULL;
    if (resdiag_reader_open(&rd, path) != RESDIAG_OK)
        return 0;
    int ok = resdiag_reader_info(rd)->n_steps == n;
    int64_t got[64];
    ok = ok && n <= 64 && resdiag_reader_steps(rd, got, n) == RESDIAG_OK;
    for (int k = 0; ok && k < n; k++)
        ok = got[k] == first + k;
    resdiag_reader_destroy(rd);
    return ok;
}

/* The whole content of a file (malloc'd), its length in *len. */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *len = n;
    return buf;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* path still holds exactly want (n bytes). */
static void assert_same_bytes(const char *path, const unsigned char *want, size_t n)
{
    size_t len;
    unsigned char *got = slurp(path, &len);
    ck_assert_msg(len == n && memcmp(got, want, n) == 0, "%s changed (%zu bytes, was %zu)",
                  path, len, n);
    free(got);
}

static void assert_logged(const char *a, const char *b)
{
    ck_assert_msg(strstr(log_last, a) != NULL, "'%s' not in the log: %s", a, log_last);
    if (b)
        ck_assert_msg(strstr(log_last, b) != NULL, "'%s' not in the log: %s", b, log_last);
}

/* --------------------------------------------- what is not a run file */

/* Character devices (copies of /dev/null's and /dev/full's nodes, made
 * here: the real ones must not be at stake) are refused, not deleted, and
 * never reach HDF5 (whose failed open of /dev/full leaks). The old writer
 * truncated /dev/null, failed and unlinked it. Needs CAP_MKNOD (root). */
START_TEST(device_node_is_refused_and_kept)
{
    static const struct {
        const char *name;
        unsigned minor;
    } devs[] = { { "null", 3 }, { "full", 7 } };
    for (int i = 0; i < 2; i++) {
        const char *path = run_path(devs[i].name);
        dev_t rdev = makedev(1, devs[i].minor);
        if (mknod(path, S_IFCHR | 0666, rdev) != 0) {
            fprintf(stderr, "device_node_is_refused_and_kept: mknod: %s (not root?): not run\n",
                    strerror(errno));
            return;
        }
        for (int ow = 0; ow <= 1; ow++) {
            resdiag *r;
            ck_assert_int_eq(try_open(&r, path, ow), RESDIAG_E_EXISTS);
            ck_assert_ptr_null(r);
            assert_logged(path, "character device");
            struct stat sb;
            ck_assert_int_eq(lstat(path, &sb), 0);
            ck_assert(S_ISCHR(sb.st_mode));
            ck_assert_uint_eq(sb.st_rdev, rdev);
        }
    }
}
END_TEST

/* A FIFO: refused at once (no writer waited for), still there. */
START_TEST(fifo_is_refused_without_blocking)
{
    const char *path = run_path("fifo");
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    alarm(20); /* a hang fails the test instead of the suite's timeout */
    for (int ow = 0; ow <= 1; ow++) {
        resdiag *r;
        ck_assert_int_eq(try_open(&r, path, ow), RESDIAG_E_EXISTS);
        ck_assert_ptr_null(r);
        assert_logged(path, "FIFO");
    }
    alarm(0);
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISFIFO(sb.st_mode));
}
END_TEST

START_TEST(directory_is_refused)
{
    const char *path = run_path("adir");
    ck_assert_int_eq(mkdir(path, 0700), 0);
    for (int ow = 0; ow <= 1; ow++) {
        resdiag *r;
        ck_assert_int_eq(try_open(&r, path, ow), RESDIAG_E_EXISTS);
        assert_logged(path, "directory");
        struct stat sb;
        ck_assert_int_eq(lstat(path, &sb), 0);
        ck_assert(S_ISDIR(sb.st_mode));
    }
}
END_TEST

/* A checkpoint passed by mistake, and an empty file: never replaced. */
START_TEST(other_files_are_never_replaced)
{
    static const char ckpt[] = "CHECKPOINT step 4000\0\1\2\3 weights follow";
    const char *path = run_path("model.ckpt");
    write_bytes(path, ckpt, sizeof ckpt);
    const char *empty = run_path("empty");
    write_bytes(empty, "", 0);
    resdiag *r;
    ck_assert_int_eq(try_open(&r, path, 0), RESDIAG_E_EXISTS);
    ck_assert_ptr_null(r);
    assert_logged(path, "overwrite");
    assert_same_bytes(path, (const unsigned char *)ckpt, sizeof ckpt);
    ck_assert_int_eq(try_open(&r, path, 1), RESDIAG_E_EXISTS);
    ck_assert_ptr_null(r);
    assert_logged(path, "not a resdiag run file");
    assert_same_bytes(path, (const unsigned char *)ckpt, sizeof ckpt);
    ck_assert_int_eq(try_open(&r, empty, 1), RESDIAG_E_EXISTS);
    assert_same_bytes(empty, (const unsigned char *)"", 0);
}
END_TEST

/* An HDF5 file of another program (it even has an integer schema_version,
 * but no resdiag_version): refused with overwrite, unchanged. */
START_TEST(foreign_hdf5_file_is_never_replaced)
{
    const char *path = run_path("other.h5");
    hid_t f = H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(f >= 0);
    hid_t sp = H5Screate(H5S_SCALAR);
    int v = 1;
    hid_t a = H5Acreate2(f, "schema_version", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(a >= 0 && H5Awrite(a, H5T_NATIVE_INT, &v) >= 0);
    H5Aclose(a);
    hsize_t n = 16;
    hid_t ds_sp = H5Screate_simple(1, &n, NULL);
    hid_t ds = H5Dcreate2(f, "weights", H5T_NATIVE_DOUBLE, ds_sp, H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT);
    double w[16];
    for (int i = 0; i < 16; i++)
        w[i] = i * 0.5;
    ck_assert(ds >= 0 && H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, w) >= 0);
    H5Dclose(ds);
    H5Sclose(ds_sp);
    H5Sclose(sp);
    ck_assert_int_ge(H5Fclose(f), 0);
    size_t len;
    unsigned char *before = slurp(path, &len);
    for (int ow = 0; ow <= 1; ow++) {
        resdiag *r;
        ck_assert_int_eq(try_open(&r, path, ow), RESDIAG_E_EXISTS);
        ck_assert_ptr_null(r);
        assert_logged(path, ow ? "resdiag_version" : "overwrite");
        assert_same_bytes(path, before, len);
    }
    free(before);
}
END_TEST

/* ------------------------------------------------ replacing a run file */

START_TEST(run_file_is_replaced_only_with_overwrite)
{
    const char *path = run_path("run.h5");
    write_run(path, 100, 3);
    size_t len;
    unsigned char *before = slurp(path, &len);
    resdiag *r;
    ck_assert_int_eq(try_open(&r, path, 0), RESDIAG_E_EXISTS);
    ck_assert_ptr_null(r);
    assert_logged(path, "overwrite");
    assert_same_bytes(path, before, len);
    free(before);
    ck_assert(holds_steps(path, 100, 3));

    ck_assert_int_eq(try_open(&r, path, 1), RESDIAG_OK);
    ck_assert_ptr_nonnull(r);
    record(r, 0, 5);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    ck_assert(holds_steps(path, 0, 5));
}
END_TEST

START_TEST(overwrite_must_be_0_or_1)
{
    const char *path = run_path("run.h5");
    int bad[] = { 2, -1, 1 << 30 };
    for (int i = 0; i < 3; i++) {
        resdiag *r;
        ck_assert_int_eq(try_open(&r, path, bad[i]), RESDIAG_E_INVALID);
        ck_assert_ptr_null(r);
        assert_logged("overwrite", NULL);
        ck_assert_int_ne(access(path, F_OK), 0);
    }
}
END_TEST

/* A symlink as the last component is refused in both modes, whether it
 * points at a run file, at another file or nowhere; the target stays. */
START_TEST(symlink_is_refused_and_target_kept)
{
    const char *run = run_path("target.h5");
    write_run(run, 100, 2);
    size_t len;
    unsigned char *before = slurp(run, &len);
    const char *link_run = run_path("link.h5");
    ck_assert_int_eq(symlink(run, link_run), 0);
    const char *dangling = run_path("dangling.h5");
    const char *nowhere = run_path("nowhere.h5");
    ck_assert_int_eq(symlink(nowhere, dangling), 0);
    for (int ow = 0; ow <= 1; ow++) {
        resdiag *r;
        ck_assert_int_eq(try_open(&r, link_run, ow), RESDIAG_E_EXISTS);
        ck_assert_ptr_null(r);
        assert_logged(link_run, "symbolic link");
        assert_same_bytes(run, before, len);
        ck_assert_int_eq(try_open(&r, dangling, ow), RESDIAG_E_EXISTS);
        assert_logged(dangling, "symbolic link");
        ck_assert_int_ne(access(nowhere, F_OK), 0);
        struct stat sb;
        ck_assert_int_eq(lstat(link_run, &sb), 0);
        ck_assert(S_ISLNK(sb.st_mode));
    }
    free(before);
    ck_assert(holds_steps(run, 100, 2));
}
END_TEST

/* ------------------------------------------ failing after the creation */

/* rd_writer_create with a header that fails after HDF5 created the file
 * (an empty metadata key, which resdiag_open would have refused before). */
typedef struct bad_run {
    resdiag_model m;
    rd_tables lay;
    rd_file_header hdr;
} bad_run;

static void make_bad_run(bad_run *b, int overwrite)
{
    static const char *const bad_meta[] = { "", "v" };
    b->m = mlp_model(L, D);
    b->m.meta = bad_meta;
    b->m.n_meta = 1;
    rd_tables_init(&b->lay, L, 1, 0, 0, 4, RESDIAG_N_BLOCK_SITES);
    memset(&b->hdr, 0, sizeof b->hdr);
    b->hdr.model = &b->m;
    b->hdr.tables = &b->lay;
    b->hdr.sketch_size = 4;
    b->hdr.record_chunk_steps = 4;
    b->hdr.overwrite = overwrite;
}

START_TEST(failed_create_removes_only_its_own_file)
{
    bad_run b;
    char err[1024];
    rd_writer *w = NULL;
    /* a new file: made by this call, so removed */
    make_bad_run(&b, 0);
    const char *fresh = run_path("fresh.h5");
    ck_assert_int_eq(rd_writer_create(&w, fresh, &b.hdr, err, sizeof err), RESDIAG_E_INVALID);
    ck_assert_ptr_null(w);
    ck_assert_msg(access(fresh, F_OK) != 0, "%s left behind", fresh);
    /* a run file replaced with overwrite: not made by this call, so it
     * stays (the old writer unlinked it) */
    const char *old = run_path("old.h5");
    write_run(old, 100, 2);
    make_bad_run(&b, 1);
    ck_assert_int_eq(rd_writer_create(&w, old, &b.hdr, err, sizeof err), RESDIAG_E_INVALID);
    ck_assert_ptr_null(w);
    ck_assert_msg(access(old, F_OK) == 0, "%s was removed", old);
}
END_TEST

/* The path changes between the claim and HDF5's create: the writer stops,
 * and neither the file now at the path nor a file a symlink there points
 * at is touched or removed. */
static const char *swap_from, *move_to;
static void swap_path(const char *path)
{
    if (move_to)
        ck_assert_int_eq(rename(path, move_to), 0);
    if (swap_from)
        ck_assert_int_eq(rename(swap_from, path), 0);
}

START_TEST(path_swapped_under_the_writer_is_left_alone)
{
    static const char decoy[] = "someone else's file";
    bad_run b;
    make_bad_run(&b, 0);
    b.m.n_meta = 0; /* a good header: only the swap can make it fail */
    char err[1024];
    rd_writer *w = NULL;
    const char *path = run_path("run.h5");
    /* the claimed file moved away and another put at the path: HDF5
     * creates the run in the claimed file, which the path no longer
     * names, so the writer gives up */
    const char *other = run_path("decoy");
    write_bytes(other, decoy, sizeof decoy);
    swap_from = other;
    move_to = run_path("moved.h5");
    rd_h5_writer_before_create = swap_path;
    resdiag_status st = rd_writer_create(&w, path, &b.hdr, err, sizeof err);
    ck_assert_msg(st == RESDIAG_E_EXISTS, "%d %s", st, err);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(err, path) && strstr(err, "replaced"), "%s", err);
    assert_same_bytes(path, (const unsigned char *)decoy, sizeof decoy);
    ck_assert_int_eq(unlink(path), 0);
    move_to = NULL;
    /* a symlink to a victim renamed over the path: HDF5 is given the
     * claimed file, not the path, so the victim is not truncated (HDF5
     * fails on the claimed file, which no name reaches any more) */
    const char *victim = run_path("victim");
    write_bytes(victim, decoy, sizeof decoy);
    const char *link = run_path("link");
    ck_assert_int_eq(symlink(victim, link), 0);
    swap_from = link;
    st = rd_writer_create(&w, path, &b.hdr, err, sizeof err);
    rd_h5_writer_before_create = NULL;
    swap_from = NULL;
    ck_assert_msg(st != RESDIAG_OK, "%d %s", st, err);
    ck_assert_ptr_null(w);
    assert_same_bytes(victim, (const unsigned char *)decoy, sizeof decoy);
    struct stat sb;
    ck_assert_int_eq(lstat(path, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
}
END_TEST

/* -------------------------------------------------------- two writers */

/* A second handle on the path in the same process: LOCKED, either mode;
 * the first run goes on and keeps every step; once it is closed, the path
 * may be replaced. */
START_TEST(second_handle_in_one_process_is_locked)
{
    const char *path = run_path("run.h5");
    resdiag *a, *b;
    ck_assert_int_eq(try_open(&a, path, 0), RESDIAG_OK);
    record(a, 100, 2);
    for (int ow = 0; ow <= 1; ow++) {
        ck_assert_int_eq(try_open(&b, path, ow), RESDIAG_E_LOCKED);
        ck_assert_ptr_null(b);
        assert_logged(path, "being written");
    }
    record(a, 102, 2);
    ck_assert_int_eq(resdiag_close(a), RESDIAG_OK);
    resdiag_destroy(a);
    ck_assert(holds_steps(path, 100, 4));
    ck_assert_int_eq(try_open(&b, path, 1), RESDIAG_OK);
    record(b, 0, 1);
    ck_assert_int_eq(resdiag_close(b), RESDIAG_OK);
    resdiag_destroy(b);
    ck_assert(holds_steps(path, 0, 1));
}
END_TEST

/* The helper writer (main, --writer). */
static int writer_main(const char *path, int n, int ready_fd, int go_fd)
{
    resdiag_model m = mlp_model(L, D);
    resdiag_options o;
    resdiag_options_init(&o);
    o.flush_steps = 1;
    resdiag *r = NULL;
    if (resdiag_open(&r, path, &m, &o) != RESDIAG_OK)
        return 10;
    float x[T * D];
    for (int k = 0; k < 2 * n; k++) {
        if (k == n) {
            char c;
            if (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) != 1)
                return 11;
        }
        for (int i = 0; i < T * D; i++)
            x[i] = (float)k;
        if (resdiag_step_begin(r, 100 + k) != RESDIAG_OK
            || RESDIAG_FWD(r, 0, 0, RESDIAG_STREAM_IN, resdiag_f32(x, T, D)) != RESDIAG_OK
            || resdiag_step_end(r) != RESDIAG_OK)
            return 12;
    }
    resdiag_status st = resdiag_close(r);
    resdiag_destroy(r);
    return st == RESDIAG_OK ? 0 : 13;
}

typedef struct writer_proc {
    pid_t pid;
    int ready; /* read end: "r" once n steps are on disk */
    int go;    /* write end: a byte lets it go on */
} writer_proc;

static writer_proc start_writer(const char *path, int n)
{
    int ready[2], go[2];
    ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(go, O_CLOEXEC), 0);
    writer_proc p;
    p.pid = fork();
    ck_assert_int_ge(p.pid, 0);
    if (p.pid == 0) {
        fcntl(ready[1], F_SETFD, 0);
        fcntl(go[0], F_SETFD, 0);
        char ns[16], rs[16], gs[16];
        snprintf(ns, sizeof ns, "%d", n);
        snprintf(rs, sizeof rs, "%d", ready[1]);
        snprintf(gs, sizeof gs, "%d", go[0]);
        execl(self_path, self_path, "--writer", path, ns, rs, gs, (char *)NULL);
        _exit(127);
    }
    close(ready[1]);
    close(go[0]);
    p.ready = ready[0];
    p.go = go[1];
    char c = 0;
    ck_assert_msg(read(p.ready, &c, 1) == 1 && c == 'r', "the writer did not get ready");
    return p;
}

static int finish_writer(writer_proc *p)
{
    ck_assert_int_eq(write(p->go, "g", 1), 1);
    int status = 0;
    ck_assert_int_eq(waitpid(p->pid, &status, 0), p->pid);
    close(p->ready);
    close(p->go);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Another process writing the path: LOCKED in both modes, the run file
 * untouched; a reader follows it all the while; in the end it holds every
 * step of that run. The old writer truncated it under the first run. */
START_TEST(second_process_is_locked_out)
{
    const char *path = run_path("run.h5");
    writer_proc p = start_writer(path, 3);
    resdiag_reader *rd = NULL;
    ck_assert_int_eq(resdiag_reader_open(&rd, path), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 3);
    for (int ow = 0; ow <= 1; ow++) {
        resdiag *r;
        ck_assert_int_eq(try_open(&r, path, ow), RESDIAG_E_LOCKED);
        ck_assert_ptr_null(r);
        assert_logged(path, "being written");
    }
    ck_assert(holds_steps(path, 100, 3));
    ck_assert_int_eq(finish_writer(&p), 0);
    ck_assert_int_eq(resdiag_reader_refresh(rd), RESDIAG_OK);
    ck_assert_int_eq(resdiag_reader_info(rd)->n_steps, 6);
    resdiag_reader_destroy(rd);
    ck_assert(holds_steps(path, 100, 6));
}
END_TEST

/* A SIGKILLed writer's lock dies with it: the path may be replaced at once
 * (its file, still marked as being written, is a run file). */
START_TEST(killed_writer_leaves_no_lock)
{
    const char *path = run_path("run.h5");
    writer_proc p = start_writer(path, 2);
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(p.pid, &status, 0), p.pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(p.ready);
    close(p.go);
    ck_assert(holds_steps(path, 100, 2));
    resdiag *r;
    ck_assert_int_eq(try_open(&r, path, 0), RESDIAG_E_EXISTS);
    ck_assert_int_eq(try_open(&r, path, 1), RESDIAG_OK);
    record(r, 0, 3);
    ck_assert_int_eq(resdiag_close(r), RESDIAG_OK);
    resdiag_destroy(r);
    ck_assert(holds_steps(path, 0, 3));
}
END_TEST

/* The writer the lock tests run in a child; else where this program is. */
static int child_mode_or_self_path(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--writer") == 0)
        return writer_main(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    return realpath(argv[0], self_path) ? CHECK_GO_ON : EXIT_FAILURE;
}

static const check_program program = {
    .name = "open",
    .start = child_mode_or_self_path,
};
CHECK_MAIN(&program,
           CHECK_CASE_FIXTURE("path", 60, setup, teardown),
               CHECK_TEST(device_node_is_refused_and_kept),
               CHECK_TEST(fifo_is_refused_without_blocking),
               CHECK_TEST(directory_is_refused),
               CHECK_TEST(other_files_are_never_replaced),
               CHECK_TEST(foreign_hdf5_file_is_never_replaced),
               CHECK_TEST(run_file_is_replaced_only_with_overwrite),
               CHECK_TEST(overwrite_must_be_0_or_1),
               CHECK_TEST(symlink_is_refused_and_target_kept),
               CHECK_TEST(failed_create_removes_only_its_own_file),
               CHECK_TEST(path_swapped_under_the_writer_is_left_alone),
           CHECK_CASE_FIXTURE("lock", 60, setup, teardown),
               CHECK_TEST(second_handle_in_one_process_is_locked),
               CHECK_TEST(second_process_is_locked_out),
               CHECK_TEST(killed_writer_leaves_no_lock))
