/*
 * common.c - helpers shared by the HDF5 code: the stored spelling of the
 * block kind and the field units, HDF5 error stacks turned into one line
 * of text, and the reader's logged failures.
 */
#include "h5/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

const char *rd_h5_block_name(resdiag_block_kind kind)
{
    switch (kind) {
    case RESDIAG_BLOCK_SEQUENTIAL:
        return "sequential";
    case RESDIAG_BLOCK_PARALLEL:
        return "parallel";
    }
    return NULL;
}

const char *rd_h5_field_unit(int field)
{
    switch (field) {
    case RESDIAG_FIELD_ROWS:
        return "tokens";
    case RESDIAG_FIELD_COLS:
        return "columns";
    case RESDIAG_FIELD_ABSMAX_COL:
    case RESDIAG_FIELD_CALL_SEQ:
        return "index";
    case RESDIAG_FIELD_NAN_COUNT:
    case RESDIAG_FIELD_INF_COUNT:
        return "count";
    default:
        return field >= 0 && field < RESDIAG_N_FIELDS ? "same units as the tensor" : "?";
    }
}

/* HDF5 reports a failed system call as "..., errno = N, error message = '...'". */
static int errno_in(const char *desc)
{
    const char *p = desc ? strstr(desc, "errno = ") : NULL;
    if (!p)
        return 0;
    long v = strtol(p + 8, NULL, 10);
    return v > 0 && v < 4096 ? (int)v : 0;
}

static herr_t walk_cb(unsigned n, const H5E_error2_t *d, void *data)
{
    rd_h5_error *e = data;
    if (n == 0) {
        /* Walked upward, entry 0 is where the error was first detected. */
        char minor[128] = "";
        if (H5Eget_msg(d->min_num, NULL, minor, sizeof minor) < 0)
            minor[0] = '\0';
        const char *desc = d->desc && d->desc[0] ? d->desc : minor;
        snprintf(e->msg, sizeof e->msg, "%s (HDF5 %s)", desc[0] ? desc : "unknown error",
                 d->func_name ? d->func_name : "?");
    }
    if (!e->sys_errno)
        e->sys_errno = errno_in(d->desc);
    return 0;
}

void rd_h5_capture(rd_h5_error *e, int errno_at_call)
{
    if (e->captured)
        return;
    e->captured = 1;
    e->sys_errno = 0;
    e->msg[0] = '\0';
    /* H5Ewalk2 is an API call, but it does not clear the stack it walks. */
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, e);
    if (!e->sys_errno)
        e->sys_errno = errno_at_call;
    if (!e->msg[0])
        snprintf(e->msg, sizeof e->msg, "%s",
                 errno_at_call ? strerror(errno_at_call) : "unknown HDF5 error");
    for (char *p = e->msg; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
}

int rd_h5_error_is_nospace(const rd_h5_error *e)
{
    if (!e->captured)
        return 0;
    switch (e->sys_errno) {
    case ENOSPC:
    case EFBIG:
#ifdef EDQUOT
    case EDQUOT:
#endif
        return 1;
    default:
        return 0;
    }
}

hid_t rd_h5_vlen_string_type(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return H5I_INVALID_HID;
    if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0
        || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

hid_t rd_h5_fixed_string_type(size_t len)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return H5I_INVALID_HID;
    if (H5Tset_size(t, len) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0
        || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

/* rd_h5_hold_failures: where this thread's failures go instead of the log. */
static _Thread_local char *held_msg;
static _Thread_local size_t held_len;

void rd_h5_hold_failures(char *buf, size_t len)
{
    held_msg = buf;
    held_len = len;
    if (buf && len)
        buf[0] = '\0';
}

resdiag_status rd_h5_fail(resdiag_status st, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (held_msg) {
        if (!held_msg[0]) /* the first failure says why */
            snprintf(held_msg, held_len, "%s", msg);
        return st;
    }
    rd_log(NULL, NULL, RESDIAG_LOG_ERROR, "%s", msg);
    return st;
}

resdiag_status rd_h5_fail_call(const char *path, const char *what)
{
    rd_h5_error e;
    memset(&e, 0, sizeof e);
    rd_h5_capture(&e, 0);
    return rd_h5_fail(RESDIAG_E_IO, "run file %s: %s: %s", path, what, e.msg);
}

const char *rd_h5_msg_name(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    for (; *s && o + 4 < len && o < 80; s++)
        buf[o++] = *s;
    if (*s && o + 4 < len)
        o += (size_t)snprintf(buf + o, len - o, "...");
    buf[o] = '\0';
    return buf;
}
