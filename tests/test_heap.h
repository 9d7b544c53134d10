/* Tests that bound memory: the bytes the process holds in malloc'd
 * memory, large blocks included; the sanitizer's allocator's figure when
 * one replaced glibc's (glibc's mallinfo2 then sees nothing). */
#ifndef AFTP_TEST_HEAP_H
#define AFTP_TEST_HEAP_H

#include <malloc.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_HEAP_OF_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TEST_HEAP_OF_SANITIZER 1
#endif
#endif

#ifdef TEST_HEAP_OF_SANITIZER
/* The sanitizer runtime's (its header ships with clang, not with gcc). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

static inline size_t test_heap_in_use(void)
{
#ifdef TEST_HEAP_OF_SANITIZER
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#endif
}

/* The process's anonymous resident memory in KiB (RssAnon), 0 when
 * unknown: the pages it touched, for figures printed beside the heap's. */
static inline size_t test_rss_anon_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    size_t kib = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "RssAnon: %zu kB", &kib) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kib;
}

#endif /* AFTP_TEST_HEAP_H */
