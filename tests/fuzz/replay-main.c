/*
 * replay-main.c - a main() for the fuzz harnesses without libFuzzer: feeds
 * each file named (or each file in each folder named, in name order) to
 * LLVMFuzzerTestOneInput once. A harness signals a finding by crashing or
 * aborting, so exit 0 means every input passed; an input that runs for
 * 60 s ends the replay with SIGALRM.
 * Usage: replay-<harness> FILE|DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long replayed;
static int verbose; /* REPLAY_VERBOSE=1: name each input before it runs */

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *data = malloc(cap);
    size_t got;
    while (data && (got = fread(data + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *bigger = realloc(data, cap *= 2);
            if (!bigger)
                free(data);
            data = bigger;
        }
    }
    fclose(f);
    if (!data) {
        fprintf(stderr, "replay: out of memory for %s\n", path);
        return 1;
    }
    if (verbose)
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    alarm(60); /* a hang ends the replay (SIGALRM), as libFuzzer's -timeout does */
    LLVMFuzzerTestOneInput(data, n);
    alarm(0);
    free(data);
    replayed++;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return replay_file(dir);
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        if (!more)
            break;
        names = more;
        names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!names[n])
            break;
        sprintf(names[n], "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            bad |= replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    verbose = getenv("REPLAY_VERBOSE") != NULL;
    LLVMFuzzerInitialize(&argc, &argv);
    int bad = 0;
    for (int i = 1; i < argc; i++)
        bad |= replay_dir(argv[i]);
    printf("replayed %ld inputs\n", replayed);
    return bad || replayed == 0 ? 1 : 0;
}
