/*
 * hostile-plugin.c - a shared object that a crafted run file could make
 * HDF5 load as a filter plugin: its constructor writes the file named by
 * RESDIAG_TEST_PLUGIN_MARKER. tests/tool/test-hostile.sh and tests/unit/test-hostile.c
 * put it in HDF5_PLUGIN_PATH and check that resdiag never loads it (and
 * that h5dump, which loads plugins, does: the control).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void mark_loaded(void)
{
    const char *marker = getenv("RESDIAG_TEST_PLUGIN_MARKER");
    if (!marker)
        return;
    int fd = open(marker, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, "loaded\n", 7);
        close(fd);
    }
}
