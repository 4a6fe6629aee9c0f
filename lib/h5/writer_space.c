/*
 * writer_space.c - the disk space around each of the writer's write
 * phases: the room reserved before HDF5 writes (space.c does it), what a
 * phase may allocate beyond its chunks, and detaching after a failed
 * write, each with its failure recorded for the writer's message.
 *
 * Disk full. HDF5 1.10 does not survive a failed write: a file whose cache
 * cannot be flushed cannot be closed, the failed H5Fclose leaves a dangling
 * identifier, and the library then crashes the process at exit (in
 * H5_term_library), whether or not H5Fclose was called. So HDF5 must never
 * see a full disk:
 *   1. Before each write phase the writer reserves, with fallocate(2), more
 *      file space past HDF5's end of file than the phase can allocate (new
 *      chunks plus a margin for metadata). If the reservation fails with
 *      ENOSPC / EFBIG / EDQUOT the append returns RESDIAG_E_NOSPACE before
 *      HDF5 writes anything: the file stays consistent and closes cleanly
 *      with every step appended before.
 *   2. The file size limit (RLIMIT_FSIZE) is treated as the end of the
 *      disk, with or without fallocate: before each phase (and before the
 *      file is created) the writer checks that the same estimate stays
 *      within it, and fails the same way if not. A write, fallocate or
 *      ftruncate past the limit would raise SIGXFSZ, which kills the
 *      trainer, and the library leaves signal dispositions alone.
 *   3. Where fallocate is not supported (or the estimate was short) and an
 *      HDF5 write fails anyway, the writer "detaches" at once: it points
 *      HDF5's file descriptor at /dev/null (dup2), so that everything HDF5
 *      still writes, at close or at exit, is discarded and succeeds, and
 *      flushes once there, which HDF5's cache needs after a failed
 *      metadata write before it can close the file (rd_space_detach). The
 *      run file stays as the failed flush left it, still marked as being
 *      written for SWMR, which is how a reader opens it (like a killed
 *      writer's).
 * Either way the writer then returns the first error to every later call
 * (writer_append.c).
 */
#include "format/tables.h"
#include "h5/space.h"
#include "h5/writer_state.h"

/* Space reserved for the metadata that one write phase may allocate (index
 * blocks, aggregator blocks): a base plus a share per dataset. Measured:
 * at most ~1.2 KiB per dataset and phase (23 KiB for 19 datasets, over
 * chunk sizes 1..64 and batches 1..70); the margin covers the larger
 * index blocks of long runs. */
#define RESERVE_BASE ((off_t)64 << 10)
#define RESERVE_PER_DATASET ((off_t)24 << 10)

/* Reserves room for a phase (space.h); 0 with e filled when there is none:
 * HDF5 has not written anything of the phase yet. */
int rd_writer_reserve_room(rd_writer *w, off_t need, werr *e)
{
    if (rd_space_reserve(&w->space, need, &e->h5, &e->size_limit))
        return 1;
    e->object = "file (reserving space)";
    e->before_hdf5 = 1;
    return 0;
}

void rd_writer_release_room(rd_writer *w)
{
    rd_space_release(&w->space);
}

void rd_writer_detach(rd_writer *w)
{
    rd_space_detach(&w->space);
}

int rd_writer_keep_header_in_one_page(hid_t file, hid_t *ds, const char *name, werr *e)
{
    if (rd_space_keep_header_in_one_page(file, ds, name, &e->h5))
        return 1;
    e->object = name;
    return 0;
}

off_t rd_writer_metadata_margin(const rd_writer *w)
{
    return RESERVE_BASE + RESERVE_PER_DATASET * (off_t)w->n_datasets;
}

/* What the tables' chunks cost beyond their bytes when n steps are
 * appended: each new chunk adds a record to the table's v2 B-tree (at most
 * ~60 B; 256 B covers the nodes' slack), a split can add a node at each
 * level (a page each, for a tree of up to four levels), and on a paged
 * file a chunk can round up to a whole page. Reserved on top of
 * metadata_margin. */
off_t rd_writer_index_margin(const rd_writer *w, hsize_t n)
{
    off_t m = 0;
    for (int i = 0; i < RD_N_TABLES; i++)
        for (int p = 0; p < MAX_PARTS; p++) {
            const rd_table *t = &w->lay.tables[i];
            const rd_chunk_info *c = &w->part[i][p].chunk;
            if (t->count == 0 || w->part[i][p].ds < 0 || c->steps == 0 || n == 0)
                continue;
            int ax = rd_writer_site_axis(w, i);
            hsize_t per_step = ax < 0 ? 1 : (hsize_t)t->dims[ax];
            hsize_t first = w->n_written / c->steps, last = (w->n_written + n - 1) / c->steps;
            hsize_t pieces = (last - first + 1) * per_step;
            m += (off_t)pieces * (256 + (w->space.paged ? RD_FILE_PAGE : 0)) + 4 * RD_FILE_PAGE;
        }
    return m;
}
