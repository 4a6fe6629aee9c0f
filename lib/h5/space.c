/*
 * space.c - keeping HDF5 away from a full disk and from torn pages, for the
 * writer (the reasons: writer_space.c, writer_datasets.c): space reserved
 * with fallocate(2) before each write phase and given back after, the file
 * size limit (RLIMIT_FSIZE) treated as the end of the disk, detaching
 * HDF5's descriptor after a failed write, and moving a growing dataset's
 * object header until it lies inside one page.
 */
#include "h5/space.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int rd_h5_writer_reserve = 1;
int rd_h5_writer_size_limit = 1;

/* ----------------------------------------------------- headers and SIGKILL */

/* 1 if the object header of ds crosses a 4 KiB page boundary, 0 if not,
 * -1 on error. HDF5 rewrites a growing dataset's header in place at every
 * append (its dataspace), and Linux checks for a fatal signal between the
 * pages of one write(): a SIGKILL there leaves the header half new, half
 * old, and the file unreadable for ever (seen in test-kill, about once in
 * 350 kills under ASan). A header inside one page is written whole. */
#define HEADER_MARGIN 64

static int header_crosses_page(hid_t ds)
{
#if H5_VERSION_GE(1, 12, 0)
    (void)ds;
    return 0; /* addresses are tokens there: not checked */
#else
    H5O_info_t info;
    if (H5Oget_info2(ds, &info, H5O_INFO_BASIC | H5O_INFO_HDR) < 0)
        return -1;
    /* all chunks together: an upper bound of the first one's size, which
     * holds the dataspace; plus a margin, as a moved header can still grow
     * by a few bytes when it is opened again (9 bytes seen) */
    haddr_t first = info.addr, last = info.addr + info.hdr.space.total - 1 + HEADER_MARGIN;
    return first / 4096 != last / 4096;
#endif
}

/* Moves dataset *ds (at path name, not yet written) until its header lies
 * inside one page, reopening *ds: each try copies it to a new name while
 * the earlier copies stay, so that the copy cannot land in their space;
 * the original and the copies that crossed are deleted at the end. Gives
 * up quietly after a few tries (the file is as good as before). */
int rd_space_keep_header_in_one_page(hid_t file, hid_t *ds, const char *name, rd_h5_error *e)
{
    enum { TRIES = 16 }; /* 9 seen needed, with the rank attributes on the root */
    char tmp[TRIES][128]; /* table paths are short literals (format/tables.c) */
    int n_tmp = 0, found = -1;
    hid_t dapl = H5I_INVALID_HID;
    int c = header_crosses_page(*ds);
    if (c <= 0)
        return c == 0;
    for (int t = 0; t < TRIES && found < 0; t++) {
        snprintf(tmp[t], sizeof tmp[t], "%s.moving%d", name, t);
        RD_H5_CHECK(H5Ocopy(file, name, file, tmp[t], H5P_DEFAULT, H5P_DEFAULT), e);
        n_tmp = t + 1;
        hid_t copy = H5Dopen2(file, tmp[t], H5P_DEFAULT);
        if (copy < 0)
            RD_H5_FAIL(e);
        c = header_crosses_page(copy);
        H5Dclose(copy);
        if (c < 0)
            RD_H5_FAIL(e);
        if (c == 0)
            found = t;
    }
    if (found >= 0) {
        if ((dapl = H5Dget_access_plist(*ds)) < 0)
            RD_H5_FAIL(e);
        H5Dclose(*ds);
        *ds = H5I_INVALID_HID;
        RD_H5_CHECK(H5Ldelete(file, name, H5P_DEFAULT), e);
        RD_H5_CHECK(H5Lmove(file, tmp[found], file, name, H5P_DEFAULT, H5P_DEFAULT), e);
        if ((*ds = H5Dopen2(file, name, dapl)) < 0)
            RD_H5_FAIL(e);
        H5Pclose(dapl);
        dapl = H5I_INVALID_HID;
    }
    for (int t = 0; t < n_tmp; t++)
        if (t != found)
            RD_H5_CHECK(H5Ldelete(file, tmp[t], H5P_DEFAULT), e);
    return 1;
cleanup:
    if (dapl >= 0)
        H5Pclose(dapl);
    return 0;
}

/* -------------------------------------------------------------- disk space */

/* The soft file size limit (RLIMIT_FSIZE) in bytes, or -1 if there is
 * none. Read anew for every phase (a getrlimit is cheap): the trainer may
 * change it while it runs. */
static off_t file_size_limit(void)
{
    struct rlimit rl;
    if (!rd_h5_writer_size_limit || getrlimit(RLIMIT_FSIZE, &rl) != 0
        || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)INT64_MAX)
        return -1;
    return (off_t)rl.rlim_cur;
}

/* 0 (and e filled) if a phase that starts at HDF5's end of file `size` and
 * may allocate `need` bytes could take the file past the file size limit.
 * Any write, fallocate or ftruncate past it raises SIGXFSZ, which kills the
 * trainer (the library leaves signal dispositions alone): so the writer
 * treats the limit like the end of the disk and stops before. */
int rd_space_within_limit(off_t size, off_t need, rd_h5_error *e, long long *size_limit)
{
    off_t limit = file_size_limit();
    if (limit < 0 || (size <= limit && need <= limit - size))
        return 1;
    e->captured = 1;
    e->sys_errno = EFBIG;
    *size_limit = (long long)limit;
    snprintf(e->msg, sizeof e->msg,
             "file size limit (ulimit -f) of %lld bytes reached: the file (%lld bytes) could "
             "grow by %lld bytes",
             (long long)limit, (long long)size, (long long)need);
    return 0;
}

/* Whether the directory of path gives files space with fallocate: asked
 * of an unnamed file there (O_TMPFILE), before the run file exists. */
int rd_space_dir_can_fallocate(const char *path)
{
    off_t limit = file_size_limit();
    if (limit >= 0 && limit < RD_FILE_PAGE)
        return 0; /* the probe itself would cross the file size limit */
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return 0;
    int r;
    do
        r = fallocate(fd, 0, 0, RD_FILE_PAGE);
    while (r != 0 && errno == EINTR);
    close(fd);
    return r == 0;
}

/* Makes sure that HDF5's next writes, which may allocate `need` bytes past
 * its end of file, can neither cross the file size limit nor run out of
 * disk space: checks the limit, then allocates the bytes on disk. Returns
 * 0 (and fills e) only when there is no room; where fallocate is not
 * supported it checks the limit only. */
int rd_space_reserve(rd_space *s, off_t need, rd_h5_error *e, long long *size_limit)
{
    if (s->detached)
        return 1;
    hsize_t size = 0;
    if (H5Fget_filesize(s->file, &size) < 0)
        return 1;
    if (!rd_space_within_limit((off_t)size, need, e, size_limit))
        return 0;
    if (!s->reserve || s->fd < 0 || !rd_h5_writer_reserve)
        return 1;
    int r;
    do
        r = fallocate(s->fd, 0, (off_t)size, need);
    while (r != 0 && errno == EINTR);
    if (r == 0)
        return 1;
    int err = errno;
    if (err == ENOSPC || err == EFBIG
#ifdef EDQUOT
        || err == EDQUOT
#endif
    ) {
        e->captured = 1;
        e->sys_errno = err;
        snprintf(e->msg, sizeof e->msg, "cannot reserve %lld bytes at offset %llu: %s",
                 (long long)need, (unsigned long long)size, strerror(err));
        return 0;
    }
    s->reserve = 0; /* EOPNOTSUPP and the like: carry on without */
    return 1;
}

/* Gives back what a phase did not use: the file ends where HDF5's does.
 * It only ever shrinks the file, which the file size limit allows. */
void rd_space_release(rd_space *s)
{
    if (!s->reserve || s->detached || s->fd < 0 || !rd_h5_writer_reserve)
        return;
    hsize_t size = 0;
    struct stat sb;
    if (H5Fget_filesize(s->file, &size) < 0 || fstat(s->fd, &sb) != 0
        || (hsize_t)sb.st_size <= size)
        return;
    while (ftruncate(s->fd, (off_t)size) != 0 && errno == EINTR)
        ;
}

/* After HDF5 failed to write: let everything it still writes go to
 * /dev/null, so that closing the file (now or at exit) succeeds.
 *
 * Closing a paged file also sets its size with ftruncate, which /dev/null
 * refuses: that goes to an anonymous file in memory instead. RLIMIT_FSIZE
 * limits that one too, but HDF5 only writes below its end of allocation
 * there (and truncates to it), which every phase has kept within the limit;
 * should it be past the limit already, /dev/null it is (a write there would
 * raise SIGXFSZ).
 *
 * Then the metadata cache has to be settled. HDF5 1.10.8 keeps a list of
 * the dirty entries (its "slist") only during a flush: the flush turns it
 * on, writes every entry and turns it off, which it refuses while an entry
 * is still dirty. When the write that failed was a metadata entry's, the
 * entry stays dirty and the list stays on, and every later flush, the one
 * in H5Fclose included, fails at its start ("slist already enabled?")
 * wherever the descriptor points: the file identifier can never be closed,
 * and H5_term_library crashes on it at exit (SIGSEGV in H5F__close_cb).
 * When only raw data failed, the list was turned off and closing worked,
 * so the crash came and went with where in the file the space ran out.
 * One flush after detaching writes the dirty entries to /dev/null and
 * turns the list off (it still reports the stale list); the next one then
 * has nothing left to fail on. */
void rd_space_detach(rd_space *s)
{
    if (s->detached || s->fd < 0)
        return;
    int nfd = -1;
    if (s->paged) {
        hsize_t size = 0;
        off_t limit = file_size_limit();
        if (limit < 0 || (H5Fget_filesize(s->file, &size) >= 0 && (off_t)size <= limit))
            nfd = memfd_create("resdiag-detached", MFD_CLOEXEC);
    }
    if (nfd < 0)
        nfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nfd < 0)
        return;
    if (dup3(nfd, s->fd, O_CLOEXEC) >= 0)
        s->detached = 1;
    close(nfd);
    if (s->detached && H5Fflush(s->file, H5F_SCOPE_GLOBAL) < 0)
        H5Fflush(s->file, H5F_SCOPE_GLOBAL);
}

/* Bytes of new chunks that appending n steps after n_old allocates (a
 * chunk already written is rewritten in place). */
off_t rd_space_new_chunk_bytes(const rd_chunk_info *c, hsize_t n_old, hsize_t n)
{
    if (n == 0 || c->steps == 0)
        return 0;
    hsize_t first = n_old / c->steps, last = (n_old + n - 1) / c->steps;
    hsize_t chunks = last - first + 1 - (n_old % c->steps ? 1 : 0);
    return (off_t)chunks * c->bytes;
}

