/* Bounded residency of a file mapping: touches in order (first
 * transmissions), then scattered touches behind (repairs); the pages the
 * process has mapped stay bounded, read through /proc/self/smaps. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "aftp_resident.h"
#include "io_testutil.h"

#define FILE_LEN (UINT64_C(256) << 20)
#define KEEP (UINT64_C(8) << 20)
/* the window (2 KEEP), strays (KEEP), and the folio of the last touch */
#define BOUND_KB ((long)((3 * KEEP + (UINT64_C(2) << 20)) / 1024))

/* Resident kB of the mapping that starts at `base`. */
static long mapped_kb(const void *base)
{
    char line[256], start[32];
    snprintf(start, sizeof start, "%lx-", (unsigned long)(uintptr_t)base);
    FILE *f = fopen("/proc/self/smaps", "r");
    long kb = -1;
    int in = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, start, strlen(start)) == 0)
            in = 1;
        else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1)
            break;
    }
    if (f)
        fclose(f);
    return kb;
}

static void test_residency_stays_bounded(void **state)
{
    (void)state;
    int dfd;
    char *dir = io_test_mkdtemp(&dfd);
    int fd = openat(dfd, "f", O_CREAT | O_RDWR, 0600);
    assert_int_equal(ftruncate(fd, (off_t)FILE_LEN), 0);
    uint8_t *map = mmap(NULL, FILE_LEN, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(map != MAP_FAILED);
    aftp_resident r;
    aftp_resident_init(&r, map, FILE_LEN, KEEP, MADV_POPULATE_READ);
    volatile uint8_t sink = 0;
    long peak = 0;
    for (uint64_t off = 0; off + 1408 <= FILE_LEN; off += 1408) {
        aftp_resident_touch(&r, off, 1408);
        sink ^= map[off];
        aftp_resident_settle(&r);
        if (off % (UINT64_C(4) << 20) < 1408) {
            long kb = mapped_kb(map);
            peak = kb > peak ? kb : peak;
        }
    }
    assert_true(peak > 0);
    assert_true(peak <= BOUND_KB); /* window + slack */
    /* repairs: scattered touches behind the window */
    uint64_t x = 12345;
    for (int i = 0; i < 20000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        uint64_t off = (x >> 20) % (FILE_LEN - 2 * KEEP) / 1408 * 1408;
        aftp_resident_touch(&r, off, 1408);
        sink ^= map[off];
        aftp_resident_settle(&r);
        if (i % 1000 == 999) {
            long kb = mapped_kb(map);
            peak = kb > peak ? kb : peak;
        }
    }
    assert_true(peak <= BOUND_KB);
    assert_true(r.release_calls > 0);
    (void)sink;
    munmap(map, FILE_LEN);
    close(fd);
    io_test_rmtree(dir);
    close(dfd);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_residency_stays_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
