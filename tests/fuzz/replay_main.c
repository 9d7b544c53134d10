/*
 * Standalone driver for a fuzz harness: runs LLVMFuzzerTestOneInput once on
 * every file named on the command line and on every file inside each
 * directory named there. Linked with every harness in every build (gcc or
 * clang, with or without sanitizers) so the checked-in corpus is a
 * regression test everywhere, and so a crash file can be reproduced without
 * libFuzzer:  replay_<name> tests/fuzz/corpus/<name>  or  replay_<name> crash-...
 *
 * Each input is read into a heap buffer of exactly its size, so a sanitizer
 * catches any read past its end. Directory entries run in name order to keep
 * runs repeatable. Fails when an input cannot be read or when nothing at all
 * ran (a missing corpus must not pass silently).
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_harness.h"

/* Reads the whole file into a buffer of exactly its size; *data is freed by the caller. */
static int read_input(const char *path, uint8_t **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (f == NULL || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        if (f != NULL)
            fclose(f);
        return -1;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n > 0 ? n : 1);
    int ok = buf != NULL && fread(buf, 1, n, f) == n;
    fclose(f);
    if (!ok) {
        fprintf(stderr, "replay: %s: short read\n", path);
        free(buf);
        return -1;
    }
    *data = buf;
    *size = n;
    return 0;
}

static int run_file(const char *path)
{
    uint8_t *data;
    size_t size;
    if (read_input(path, &data, &size) != 0)
        return -1;
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int visible_entry(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

static int run_dir_entry(const char *dir, const char *name)
{
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (len < 0 || (size_t)len >= sizeof path) {
        fprintf(stderr, "replay: %s/%s: path too long\n", dir, name);
        return -1;
    }
    return run_file(path);
}

/* Runs every file in dir; returns how many ran, or -1 on error. */
static long run_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, visible_entry, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    long ran = 0;
    for (int i = 0; i < n; i++) {
        if (ran >= 0)
            ran = run_dir_entry(dir, names[i]->d_name) == 0 ? ran + 1 : -1;
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv)
{
    long total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        long ran = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : (run_file(argv[i]) == 0 ? 1 : -1);
        if (ran < 0)
            return 1;
        total += ran;
    }
    if (total == 0) {
        fprintf(stderr, "replay: no inputs (usage: %s DIR|FILE...)\n", argv[0]);
        return 1;
    }
    printf("replay: %ld inputs, no property violated\n", total);
    return 0;
}
