/*
 * Reader for the test-vector files of spec/vectors (format in
 * spec/vectors/README.md): records of `key = value` lines, and the value
 * syntaxes (integers, byte strings, range lists, word lists).
 */
#ifndef AFTP_VEC_PARSE_H
#define AFTP_VEC_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/aftp_wire.h"

typedef struct vec_field {
    char *key;
    char *value; /* continuation lines already joined */
    int used;    /* set by vec_get, so unread (misspelt) keys can be found */
} vec_field;

typedef struct vec_record {
    vec_field *fields;
    size_t count;
    unsigned line; /* first line of the record in its file */
} vec_record;

typedef struct vec_file {
    vec_record *records;
    size_t count;
    char *text; /* the whole file; fields point into it */
} vec_file;

/* Loads and splits a file into records. Returns 0, or -1 with a message
 * in err (file, line, what). */
int vec_file_load(const char *path, vec_file *out, char *err, size_t err_len);
void vec_file_free(vec_file *f);

/* The value of `key` (marked used), or NULL when the record lacks it. */
const char *vec_get(vec_record *r, const char *key);
/* The first key nobody asked for, or NULL. */
const char *vec_unused_key(const vec_record *r);

/* Value parsers: 0 on success, -1 on a syntax or range error. */
int vec_parse_u64(const char *s, uint64_t *v);
int vec_parse_i64(const char *s, int64_t *v);
/* Bytes: "text" or hex tokens (HH.., HH*N). *out is malloc'd (free it). */
int vec_parse_bytes(const char *s, uint8_t **out, size_t *len);
/* "start+len ..." into a malloc'd array. */
int vec_parse_ranges(const char *s, aftp_wire_range **out, size_t *count);
/* Splits a space-separated list in place: *words[i] point into s. At most
 * max words; returns the count or -1. */
int vec_split_words(char *s, char **words, int max);

#endif /* AFTP_VEC_PARSE_H */
