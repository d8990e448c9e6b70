/* SPDX-License-Identifier: MIT */
/* A strict JSON reader for any document (numbers with fractions too) and a
 * JSON writer: the server's requests and responses, JSON Schemas.
 *
 * The reader takes RFC 8259 JSON and nothing else: no comments, no trailing
 * commas, no NaN/Infinity, no leading zeros, no raw control characters in
 * strings, no invalid UTF-8, no lone surrogates (\ud800 alone), no
 * duplicate object keys (a request where "max_tokens" appears twice has no
 * one meaning). Nesting deeper than the limit and text longer than the
 * limit are refused before any work that grows with them. A document lives
 * in one arena: free it with fj_free.
 *
 * The writer appends to a growable buffer and always produces valid JSON:
 * strings are escaped, and bytes that are not valid UTF-8 (a model may emit
 * half a character only as part of a larger stream; we never pass such
 * halves, but a byte token on its own is possible) become U+FFFD. */
#ifndef FC_IO_JSON_VALUE_H
#define FC_IO_JSON_VALUE_H

#include <stddef.h>
#include <stdint.h>

typedef enum fj_type {
    FJ_NULL = 0,
    FJ_BOOL = 1,
    FJ_NUM = 2,
    FJ_STR = 3,
    FJ_ARR = 4,
    FJ_OBJ = 5,
} fj_type;

typedef struct fj_val fj_val;
struct fj_val {
    fj_type type;
    int boolean;     /* FJ_BOOL */
    double num;      /* FJ_NUM */
    int is_int;      /* FJ_NUM written without fraction or exponent, and within int64 */
    int64_t i;       /* FJ_NUM when is_int */
    const char *str; /* FJ_STR: NUL-terminated (may hold NULs: use len) */
    size_t len;      /* FJ_STR bytes; FJ_ARR / FJ_OBJ items */
    fj_val **items;  /* FJ_ARR values; FJ_OBJ values */
    const char **keys; /* FJ_OBJ keys (NUL-terminated) */
    size_t *key_lens;
};

typedef struct fj_limits {
    size_t max_bytes; /* 0: 16 MiB */
    int max_depth;    /* 0: 64 */
} fj_limits;

typedef struct fj_doc fj_doc;

/* Parse text[0..len); NULL with a message in err ("byte 17: expected ':'
 * after an object key") on any deviation, or when out of memory. */
fj_doc *fj_parse(const char *text, size_t len, const fj_limits *lim, char *err, size_t errlen);
const fj_val *fj_root(const fj_doc *d);
void fj_free(fj_doc *d);

/* The member of an object by key; NULL when v is not an object or lacks it. */
const fj_val *fj_get(const fj_val *v, const char *key);
const char *fj_type_name(fj_type t);

/* ---- writing ---- */
typedef struct fj_buf {
    char *p;
    size_t n, cap;
    int oom; /* a growth failed: the content is truncated; check before use */
} fj_buf;

void fj_buf_free(fj_buf *b);
void fj_raw(fj_buf *b, const char *s, size_t n);
void fj_raws(fj_buf *b, const char *s);
void fj_printf(fj_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of s[0..n), quotes included. */
void fj_str(fj_buf *b, const char *s, size_t n);
void fj_strs(fj_buf *b, const char *s);
/* A number: integers exactly, others with 17 significant digits (round
 * trip); NaN and infinities, which JSON cannot hold, as null. */
void fj_num(fj_buf *b, double v);
void fj_int(fj_buf *b, int64_t v);
/* A float: the shortest of 6-9 significant digits that reads back as v. */
void fj_numf(fj_buf *b, float v);
/* A parsed value written back as compact JSON (keys in their order). */
void fj_value(fj_buf *b, const fj_val *v);
/* "key": (with the quotes and the colon) */
void fj_key(fj_buf *b, const char *key);

#endif
