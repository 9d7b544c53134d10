/*
 * AFTP_EXTERN marks the functions of aftp's public API. Everything else in
 * the library is built with hidden visibility, so a shared libaftp exports
 * exactly the functions declared with AFTP_EXTERN in include/aftp/.
 * AFTP_BUILDING is defined only while the library itself is compiled.
 */
#ifndef AFTP_EXPORT_H
#define AFTP_EXPORT_H

#if defined(AFTP_BUILDING) && defined(__GNUC__)
#define AFTP_EXTERN __attribute__((visibility("default")))
#else
#define AFTP_EXTERN
#endif

#endif /* AFTP_EXPORT_H */
