/*
 * run_file_guard.c - claims the path of a new run file before HDF5 sees it
 * (run_file_guard.h). HDF5's H5Fcreate(H5F_ACC_TRUNC) would truncate
 * whatever the path names (a checkpoint, another run, the target of a
 * symlink) and, handed a device or a FIFO, write into it, block on it, or
 * fail and leak; so the path's type is checked with lstat/fstat, a new
 * file is created with O_EXCL, and HDF5 only ever opens a regular file
 * that this code has opened, locked and checked.
 *
 * The lock. A write lock on the whole file, taken with F_OFD_SETLK on a
 * descriptor that the writer keeps open for the life of the run. It dies
 * with the descriptor, so a killed trainer leaves no stale lock. An
 * open-file-description lock, not flock() and not a classic POSIX lock:
 * HDF5 (1.10.7 and later, file locking on) takes flock() on its own
 * descriptor of the same file, and flock locks conflict between two
 * descriptors even in one process, while on Linux local file systems OFD
 * locks and flock locks do not interact; and unlike a classic POSIX lock,
 * an OFD lock conflicts with a second description in the same process, so
 * a second handle on the path is refused too, and closing some other
 * descriptor of the file (HDF5's) does not drop it. (The writer asks HDF5
 * not to lock while this lock is held: it would add nothing, and where
 * flock is emulated with byte-range locks, NFS, the two would conflict;
 * HDF5_USE_FILE_LOCKING=TRUE in the environment still turns it on, which
 * is why the lock must not be a flock.) Readers (SWMR) take no lock of
 * this kind and are never blocked. A child forked (without exec:
 * the descriptor is O_CLOEXEC) by the trainer shares the description, and
 * so the lock, until it exits.
 *
 * HDF5 is given /proc/self/fd/N, where N is the claimed descriptor: opening
 * it opens the very file that was checked and locked, whatever the path
 * names by then. Where /proc is not mounted HDF5 gets the path itself, and
 * a path swapped between the check and HDF5's open (a symlink put there)
 * would be followed; the writer then sees, after H5Fcreate, that HDF5's
 * descriptor is not the claimed file and gives up, but the truncation has
 * happened. That window is the one race left.
 */
#include "h5/run_file_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5/common.h"
#include "h5/file_fd.h"

/* Tries of the whole claim while the path changes under it (a file created
 * or removed there by someone else between two steps). */
#define CLAIM_TRIES 4

static void set_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
}

static const char *kind_name(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a regular file";
}

static resdiag_status refuse_symlink(const char *path, char *err, size_t errlen)
{
    set_err(err, errlen,
            "%s is a symbolic link: a run file is never written through one; "
            "give the path of a new file (or of the link's target)", path);
    return RESDIAG_E_EXISTS;
}

/* 1 while path names the file (dev, ino), a regular file. */
static int path_is(const char *path, dev_t dev, ino_t ino)
{
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_dev == dev && sb.st_ino == ino;
}

/* The write lock on all of fd's file: 1 taken, 0 held by another writer,
 * -1 the file system has no such locks (the run goes on without). */
static int take_lock(int fd)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET; /* l_start = l_len = 0: the whole file, as it grows too */
    int r;
    do
        r = fcntl(fd, F_OFD_SETLK, &fl);
    while (r != 0 && errno == EINTR);
    if (r == 0)
        return 1;
    return errno == EAGAIN || errno == EACCES ? 0 : -1;
}

/* 1 if the file open at fd (h5_path names it) is a resdiag run file: the
 * HDF5 signature at byte 0 (resdiag writes no user block) and the root
 * attributes schema_version (an integer) and resdiag_version (a string).
 * Else 0, with what it lacks in why. */
static int is_run_file(int fd, const char *h5_path, int hdf5_lock, char *why, size_t whylen)
{
    char sig[RD_H5_SIGNATURE_LEN];
    if (pread(fd, sig, sizeof sig, 0) != (ssize_t)sizeof sig
        || memcmp(sig, RD_H5_SIGNATURE, RD_H5_SIGNATURE_LEN) != 0) {
        snprintf(why, whylen, "not an HDF5 file");
        return 0;
    }
    rd_h5_quiet q;
    rd_h5_quiet_begin(&q);
    int ok = 0;
    hid_t file = H5I_INVALID_HID;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        snprintf(why, whylen, "HDF5 cannot set up opening it");
        goto done;
    }
    /* As the reader does: a damaged file must not hang the SWMR retries. */
    H5Pset_metadata_read_attempts(fapl, 20);
#if H5_VERSION_GE(1, 10, 7)
    /* HDF5's shared flock would conflict with the claim's own lock where
     * flock is emulated with byte-range locks (NFS): only without it. */
    H5Pset_file_locking(fapl, hdf5_lock, 1);
#endif
    /* SWMR reading opens a run still marked as being written (its writer
     * was killed); a plain open, a run rewritten by another program. */
    file = H5Fopen(h5_path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    if (file < 0)
        file = H5Fopen(h5_path, H5F_ACC_RDONLY, fapl);
    if (file >= 0)
        rd_h5_file_cloexec(file); /* open only for this check; read-only */
    if (file < 0) {
        rd_h5_error e;
        memset(&e, 0, sizeof e);
        rd_h5_capture(&e, 0);
        snprintf(why, whylen, "an HDF5 file that cannot be opened: %s", e.msg);
        goto done;
    }
    static const struct {
        const char *name;
        H5T_class_t cls;
    } need[] = { { RD_ATTR_SCHEMA_VERSION, H5T_INTEGER },
                 { RD_ATTR_RESDIAG_VERSION, H5T_STRING } };
    ok = 1;
    for (size_t i = 0; i < sizeof need / sizeof need[0] && ok; i++) {
        hid_t a = H5Aexists(file, need[i].name) > 0 ? H5Aopen(file, need[i].name, H5P_DEFAULT)
                                                     : H5I_INVALID_HID;
        hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
        ok = t >= 0 && H5Tget_class(t) == need[i].cls;
        if (!ok)
            snprintf(why, whylen, "an HDF5 file without the root attribute %s of a run file",
                     need[i].name);
        if (t >= 0)
            H5Tclose(t);
        if (a >= 0)
            H5Aclose(a);
    }
done:
    if (file >= 0)
        H5Fclose(file);
    if (fapl >= 0)
        H5Pclose(fapl);
    rd_h5_quiet_end(&q);
    return ok;
}

/* One try of the claim: 1 done (ok or refused, *st says which), 0 the path
 * changed under it (try again). */
static int claim_once(rd_run_claim *c, const char *path, int overwrite, resdiag_status *st,
                      char *err, size_t errlen)
{
    struct stat ls, fs;
    int fd;
    if (lstat(path, &ls) != 0) {
        if (errno != ENOENT) {
            set_err(err, errlen, "cannot create run file %s: %s", path, strerror(errno));
            *st = RESDIAG_E_IO;
            return 1;
        }
        /* O_EXCL: fails on anything there, a dangling symlink included. */
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) {
            if (errno == EEXIST)
                return 0;
            set_err(err, errlen, "cannot create run file %s: %s", path, strerror(errno));
            *st = RESDIAG_E_IO;
            return 1;
        }
        c->created = 1;
    } else {
        if (S_ISLNK(ls.st_mode)) {
            *st = refuse_symlink(path, err, errlen);
            return 1;
        }
        if (!S_ISREG(ls.st_mode)) {
            set_err(err, errlen,
                    "%s is %s, not a run file: it is never opened or replaced; "
                    "give the path of a new file", path, kind_name(ls.st_mode));
            *st = RESDIAG_E_EXISTS;
            return 1;
        }
        /* O_NONBLOCK: should a FIFO have taken the file's place, opening
         * it does not wait for a writer (and it fails the check below). */
        fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == ENOENT)
                return 0;
            if (e == ELOOP) {
                *st = refuse_symlink(path, err, errlen);
                return 1;
            }
            if (overwrite) {
                set_err(err, errlen, "cannot open %s to replace it: %s", path, strerror(e));
                *st = RESDIAG_E_IO;
            } else {
                set_err(err, errlen,
                        "%s already exists; pass overwrite = 1 (--overwrite) to replace a "
                        "resdiag run file there, or give a new path", path);
                *st = RESDIAG_E_EXISTS;
            }
            return 1;
        }
    }
    if (fstat(fd, &fs) != 0 || !S_ISREG(fs.st_mode)
        || (!c->created && (fs.st_dev != ls.st_dev || fs.st_ino != ls.st_ino))) {
        close(fd);
        c->created = 0;
        return 0;
    }
    c->fd = fd;
    c->dev = fs.st_dev;
    c->ino = fs.st_ino;

    /* The lock before anything is read or replaced: a live writer's file
     * is LOCKED whatever the mode. */
    int lk = take_lock(fd);
    if (lk == 0) {
        set_err(err, errlen,
                "%s is being written by another run (in this process or another); "
                "give a new path, or wait until that run is closed", path);
        *st = RESDIAG_E_LOCKED;
        c->created = 0; /* someone else holds it now: never removed here */
        rd_run_claim_release(c);
        return 1;
    }
    c->locked = lk == 1;
    /* Still the file at path (not renamed away or over meanwhile)? */
    if (!path_is(path, c->dev, c->ino)) {
        c->created = 0;
        rd_run_claim_release(c);
        return 0;
    }
    snprintf(c->h5_path, sizeof c->h5_path, "/proc/self/fd/%d", fd);
    struct stat ps;
    if (stat(c->h5_path, &ps) != 0 || ps.st_dev != c->dev || ps.st_ino != c->ino)
        snprintf(c->h5_path, sizeof c->h5_path, "%s", "");

    if (!c->created) {
        char why[640];
        if (!overwrite) {
            set_err(err, errlen,
                    "%s already exists; pass overwrite = 1 (--overwrite) to replace a "
                    "resdiag run file there, or give a new path", path);
            *st = RESDIAG_E_EXISTS;
        } else if (!is_run_file(fd, c->h5_path[0] ? c->h5_path : path, !c->locked, why,
                                sizeof why)) {
            set_err(err, errlen,
                    "%s exists and is not a resdiag run file (%s): it is never replaced, "
                    "not even with overwrite; give a new path", path, why);
            *st = RESDIAG_E_EXISTS;
        } else {
            *st = RESDIAG_OK;
            return 1;
        }
        rd_run_claim_release(c);
        return 1;
    }
    *st = RESDIAG_OK;
    return 1;
}

resdiag_status rd_run_claim_path(rd_run_claim *c, const char *path, int overwrite, char *err,
                                 size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    resdiag_status st = RESDIAG_OK;
    for (int i = 0; i < CLAIM_TRIES; i++) {
        if (claim_once(c, path, overwrite, &st, err, errlen))
            return st;
    }
    set_err(err, errlen, "%s kept changing while the run file was being created there; "
                         "give a path that no one else uses", path);
    return RESDIAG_E_EXISTS;
}

int rd_run_claim_check(const rd_run_claim *c, const char *path, int fd, char *err,
                       size_t errlen)
{
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_dev != c->dev || sb.st_ino != c->ino) {
        set_err(err, errlen, "HDF5 opened another file than the one checked at the path "
                             "(was the path replaced meanwhile?)");
        return 0;
    }
    if (!path_is(path, c->dev, c->ino)) {
        set_err(err, errlen, "the path was removed or replaced while the file was being "
                             "created");
        return 0;
    }
    return 1;
}

void rd_run_claim_abandon(rd_run_claim *c, const char *path)
{
    /* Still holding the lock, so no other resdiag writer can have taken
     * the path; only a rename over it between this check and the unlink
     * could make it remove another file. */
    if (c->fd >= 0 && c->created && path_is(path, c->dev, c->ino))
        unlink(path);
    rd_run_claim_release(c);
}

void rd_run_claim_release(rd_run_claim *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->locked = 0;
}

/* ------------------------------------------------------ the writer's state */

/* 1 if a writer holds its lock on fd's file, 0 if none does, -1 the file
 * system cannot say. A read lock is only asked about, never taken: it
 * conflicts with the writers' write lock and with nothing else. */
static int lock_held(int fd)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_RDLCK;
    fl.l_whence = SEEK_SET;
    int r;
    do
        r = fcntl(fd, F_OFD_GETLK, &fl);
    while (r != 0 && errno == EINTR);
    if (r != 0)
        return -1;
    return fl.l_type != F_UNLCK;
}

resdiag_file_state rd_run_file_state(const char *path)
{
    if (!path)
        return RESDIAG_FILE_UNKNOWN;
    /* O_NONBLOCK: a FIFO put at the path must not hang the reader. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return RESDIAG_FILE_UNKNOWN;
    struct stat sb;
    unsigned char sup[RD_H5_SIGNATURE_LEN + 4];
    int flags = -1;
    int held = -1;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        held = lock_held(fd);
        /* Superblock versions 2 and 3 keep the status flags in the byte
         * after the version and the two sizes; 0 and 1 keep none that
         * HDF5 uses, and resdiag never writes them (SWMR needs 3). */
        if (pread(fd, sup, sizeof sup, 0) == (ssize_t)sizeof sup
            && memcmp(sup, RD_H5_SIGNATURE, RD_H5_SIGNATURE_LEN) == 0
            && sup[RD_H5_SIGNATURE_LEN] >= 2)
            flags = sup[RD_H5_SIGNATURE_LEN + 3];
    }
    close(fd);
    if (held == 1)
        return RESDIAG_FILE_WRITING;
    if (flags == 0)
        return RESDIAG_FILE_CLOSED;
    if (flags > 0 && held == 0)
        return RESDIAG_FILE_NOT_CLOSED;
    return RESDIAG_FILE_UNKNOWN;
}
