/* SPDX-License-Identifier: MIT */
/* A small strict JSON parser for file headers (safetensors, later GGUF
 * side files): objects, arrays, strings, integers, true/false/null.
 *
 * Strict means: RFC 8259 syntax only (no comments, trailing commas, NaN,
 * leading zeros or bytes after the root value other than whitespace);
 * strings must be valid UTF-8 without raw control characters; \uXXXX escapes
 * must pair surrogates correctly; duplicate keys in one object are an error.
 * Numbers with a fraction or an exponent are rejected: headers only carry
 * integers, and a float there is a malformed file, not something to round.
 *
 * The result is a tree of values in one array (indices, not pointers, so the
 * array can grow while parsing); strings are decoded into one buffer that is
 * allocated once, so their pointers stay valid until fc_json_free. Every
 * value remembers the byte offset where it starts, for error messages. */
#ifndef FC_IO_JSON_H
#define FC_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum fc_json_kind {
    FC_JSON_NULL = 0,
    FC_JSON_BOOL,
    FC_JSON_INT,
    FC_JSON_STRING,
    FC_JSON_ARRAY,
    FC_JSON_OBJECT,
} fc_json_kind;

#define FC_JSON_NONE UINT32_MAX /* "no value" index */

typedef struct fc_json_value {
    fc_json_kind kind;
    uint32_t offset;  /* byte offset of the value's first character */
    uint32_t next;    /* next sibling in the parent array/object, or FC_JSON_NONE */
    /* For members of an object: the decoded key and its offset. */
    uint32_t key;     /* offset into fc_json_doc.strings, FC_JSON_NONE otherwise */
    uint32_t key_len;
    uint32_t key_offset;
    union {
        int64_t i;                               /* INT, BOOL (0/1) */
        struct { uint32_t at, len; } s;          /* STRING: decoded, NUL-terminated */
        struct { uint32_t first, count; } c;     /* ARRAY, OBJECT */
    } u;
} fc_json_value;

typedef struct fc_json_limits {
    size_t max_bytes;  /* input size cap (at most 1 GiB: offsets are 32-bit) */
    int max_depth;     /* nesting of arrays/objects */
    uint32_t max_values;
} fc_json_limits;

typedef struct fc_json_doc {
    fc_json_value *v; /* v[0] is the root */
    uint32_t n;
    uint32_t cap;
    char *strings;    /* every decoded string, NUL-terminated */
} fc_json_doc;

/* Parse text[0..len). On success returns 1 and fills doc (free with
 * fc_json_free). On failure returns 0, leaves doc empty, writes the reason to
 * err and the byte offset where it was found to *err_offset. */
int fc_json_parse(const char *text, size_t len, const fc_json_limits *lim, fc_json_doc *doc,
                  char *err, size_t errlen, size_t *err_offset);
void fc_json_free(fc_json_doc *doc);

static inline const fc_json_value *fc_json_at(const fc_json_doc *d, uint32_t i)
{
    return i == FC_JSON_NONE ? NULL : &d->v[i];
}
static inline const char *fc_json_str(const fc_json_doc *d, const fc_json_value *v)
{
    return d->strings + v->u.s.at;
}
static inline const char *fc_json_key(const fc_json_doc *d, const fc_json_value *v)
{
    return d->strings + v->key;
}
/* First child of an array/object and the next sibling; NULL at the end. */
static inline const fc_json_value *fc_json_first(const fc_json_doc *d, const fc_json_value *v)
{
    return fc_json_at(d, v->u.c.first);
}
static inline const fc_json_value *fc_json_next(const fc_json_doc *d, const fc_json_value *v)
{
    return fc_json_at(d, v->next);
}
/* The member `key` of object obj, or NULL. */
const fc_json_value *fc_json_get(const fc_json_doc *d, const fc_json_value *obj, const char *key);
/* "object", "array", "string", "integer", "boolean", "null". */
const char *fc_json_kind_name(fc_json_kind k);

/* Length of the valid UTF-8 sequence at p (1..4; at most `avail` bytes
 * read), or 0 when it is not one: overlong forms, surrogates and code points
 * above U+10FFFF are invalid. */
size_t fc_utf8_seq(const unsigned char *p, size_t avail);
/* Is s[0..len) valid UTF-8? On failure *bad (may be NULL) gets the offset. */
int fc_utf8_valid(const char *s, size_t len, size_t *bad);
/* s[0..len) for a message: at most `cap`-1 bytes, NUL-terminated, control
 * bytes shown as '?', cut at a UTF-8 boundary with "..." when too long.
 * Returns dst. */
char *fc_json_quote(char *dst, size_t cap, const char *s, size_t len);

/* --- writing ---
 * A growable output buffer; after an allocation failure it stops growing and
 * keeps oom set, so a writer checks once at the end. */
typedef struct fc_json_buf {
    char *p;
    size_t n, cap;
    int oom;
} fc_json_buf;
void fc_json_buf_raw(fc_json_buf *b, const char *s, size_t n);
/* s[0..len) as a JSON string: quotes added, '"' '\\' and control bytes escaped
 * (other bytes are copied, so s must be valid UTF-8). */
void fc_json_buf_string(fc_json_buf *b, const char *s, size_t len);
void fc_json_buf_int(fc_json_buf *b, int64_t v);
void fc_json_buf_free(fc_json_buf *b);

#endif
