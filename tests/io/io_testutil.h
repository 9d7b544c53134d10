/* Helpers of the io tests: scratch directories, small files, addresses. */
#ifndef IO_TESTUTIL_H
#define IO_TESTUTIL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "aftp_mapguard.h"

/* Creates a fresh directory under $TMPDIR (or /tmp); returns its path
 * (static buffer per call slot) and an open fd in *fd. */
char *io_test_mkdtemp(int *fd);
/* Removes the tree. */
void io_test_rmtree(const char *path);
/* cmocka setup and teardown of a fresh scratch directory per test;
 * io_test_scratch_fd(state) is its fd, io_test_scratch_path(state) its path. */
int io_test_scratch_setup(void **state);
int io_test_scratch_teardown(void **state);
int io_test_scratch_fd(void **state);
const char *io_test_scratch_path(void **state);
#define IO_TEST_SCRATCH(test) \
    cmocka_unit_test_setup_teardown(test, io_test_scratch_setup, io_test_scratch_teardown)
/* Writes len bytes of a deterministic pattern seeded by seed. */
void io_test_pattern(uint8_t *buf, size_t len, uint32_t seed);
/* Writes `size` pattern bytes (seed) to a new file `name` beneath dirfd,
 * with `mode` and mtime `mtime_ns`. */
void io_test_write_file(int dirfd, const char *name, uint64_t size, uint32_t seed,
                        unsigned mode, int64_t mtime_ns);
/* Whether `name` exists beneath dirfd (without following symlinks). */
int io_test_exists(int dirfd, const char *name);
/* Whether the files at paths a and b hold the same bytes (1), else 0
 * (either missing or unreadable: 0). */
int io_test_same_file(const char *a, const char *b);
/* Number of entries in dirfd other than . and .. */
int io_test_count_entries(int dirfd);

/* Descriptors this process has open (entries of /proc/self/fd). */
int io_test_count_open_fds(void);

/* Walks src (an aftp_tree SRC argument) and checks that each entry
 * placed beneath dst is its source's copy: kind, bytes, holes (give or
 * take 8 KiB), permission bits masked by the default placement policy,
 * mtime, a link's target. Returns the number of entries. */
size_t io_test_expect_tree_copies(const char *src, int dst);

/* Skips the calling cmocka test, saying why, in a build without the
 * test-only hooks (CMake option AFTP_TEST_HOOKS) it needs. */
void io_test_needs_hooks(void);

/* Reads *p under the guard g, as the sending driver reads a source: 1
 * when the read faulted and came back, 0 when it read *out. */
int io_test_guarded_read(aftp_mapguard *g, const volatile uint8_t *p, uint8_t *out);

/* Mounts a private tmpfs of `size` ("32m") on `dir`, in a mount namespace
 * of this process's own; 0 when this process may not (needs root). */
int io_test_mount_private_tmpfs(const char *dir, const char *size);

/* 127.0.0.1:port. */
struct sockaddr_in io_test_loopback(uint16_t port);

#endif
