/* SPDX-License-Identifier: MIT */
/* The server's JSON reader and writer (src/io/json_value.c) against RFC 8259:
 * what it must accept (with the values the RFC gives them), what it must
 * refuse (each with the reason in the message), its limits, and a writer
 * whose output every reader accepts and reads back as the input. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_value.h"

static fj_doc *parse(const char *s, char *err, size_t n) { return fj_parse(s, strlen(s), NULL, err, n); }

static void refuse(const char *text, size_t len, const char *why) {
    char err[256];
    fj_doc *d = fj_parse(text, len, NULL, err, sizeof err);
    cr_assert_null(d, "accepted %.*s", (int)len, text);
    cr_assert(strstr(err, why), "'%.*s': message '%s' lacks '%s'", (int)len, text, err, why);
}
#define REFUSE(lit, why) refuse(lit, sizeof(lit) - 1, why)

Test(serve_json, values_as_the_rfc_reads_them) {
    char err[256];
    fj_doc *d = parse(" {\"a\": [1, -0, 2.5e3, -1E-2, true, false, null], \"s\": \"x\\u00e9\\ud83d\\ude00\\n\\\"\","
                      " \"big\": 123456789012345678901234, \"i\": -9223372036854775808} ",
                      err, sizeof err);
    cr_assert_not_null(d, "%s", err);
    const fj_val *r = fj_root(d);
    cr_assert_eq(r->type, FJ_OBJ);
    cr_assert_eq(r->len, 4);
    const fj_val *a = fj_get(r, "a");
    cr_assert_eq(a->type, FJ_ARR);
    cr_assert_eq(a->len, 7);
    cr_assert(a->items[0]->is_int && a->items[0]->i == 1);
    cr_assert(a->items[1]->is_int && a->items[1]->i == 0);
    cr_assert(!a->items[2]->is_int && a->items[2]->num == 2500.0);
    cr_assert(!a->items[3]->is_int && a->items[3]->num == -0.01);
    cr_assert(a->items[4]->type == FJ_BOOL && a->items[4]->boolean == 1);
    cr_assert(a->items[5]->type == FJ_BOOL && a->items[5]->boolean == 0);
    cr_assert_eq(a->items[6]->type, FJ_NULL);
    const fj_val *s = fj_get(r, "s");
    /* x, U+00E9 (C3 A9), U+1F600 from a surrogate pair (F0 9F 98 80), LF, quote */
    cr_assert_eq(s->len, 9);
    cr_assert(!memcmp(s->str, "x\xC3\xA9\xF0\x9F\x98\x80\n\"", 9));
    const fj_val *big = fj_get(r, "big");
    cr_assert(!big->is_int, "an integer beyond int64 is not read as one");
    cr_assert_float_eq(big->num, 1.2345678901234568e23, 1e8);
    const fj_val *i = fj_get(r, "i");
    cr_assert(i->is_int && i->i == INT64_MIN);
    cr_assert_null(fj_get(r, "missing"));
    cr_assert_null(fj_get(a, "a"), "an array has no members");
    fj_free(d);
    /* a NUL written as \u0000 is kept, with the length */
    d = parse("\"a\\u0000b\"", err, sizeof err);
    cr_assert_not_null(d, "%s", err);
    cr_assert_eq(fj_root(d)->len, 3);
    cr_assert_eq(fj_root(d)->str[1], 0);
    fj_free(d);
}

Test(serve_json, what_it_refuses) {
    REFUSE("", "end of the text");
    REFUSE("   ", "end of the text");
    REFUSE("[1,]", "expected a JSON value");
    REFUSE("{\"a\":1,}", "string key");
    REFUSE("01", "text after the JSON value");
    REFUSE("1.", "digit must follow '.'");
    REFUSE("1e", "digit must follow the exponent");
    REFUSE("-", "invalid number");
    REFUSE("NaN", "expected a JSON value");
    REFUSE("Infinity", "expected a JSON value");
    REFUSE("[1] // c", "text after");
    REFUSE("{'a':1}", "string key");
    REFUSE("\"tab\there\"", "control character");
    REFUSE("\"\\x41\"", "unknown escape");
    REFUSE("\"\\u12\"", "four hex digits");
    REFUSE("\"\\ud800\"", "high surrogate");
    REFUSE("\"\\ud800\\u0041\"", "high surrogate");
    REFUSE("\"\\udc00\"", "lone low surrogate");
    REFUSE("\"\xC0\x80\"", "invalid UTF-8");      /* overlong NUL */
    REFUSE("\"\xED\xA0\x80\"", "invalid UTF-8");  /* an encoded surrogate */
    REFUSE("\"\xF4\x90\x80\x80\"", "invalid UTF-8"); /* beyond U+10FFFF */
    REFUSE("\"\x80\"", "invalid UTF-8");
    REFUSE("\"\xE2\x82\"", "invalid UTF-8");      /* cut short */
    REFUSE("\"abc", "unterminated string");
    REFUSE("{\"a\":1,\"a\":2}", "duplicate object key");
    REFUSE("{\"a\" 1}", "expected ':'");
    REFUSE("[1 2]", "expected ',' or ']'");
    REFUSE("tru", "expected a JSON value");
    REFUSE("{\"a\":1} x", "text after the JSON value");
    REFUSE("[1]\0", "text after the JSON value");
}

Test(serve_json, depth_and_size_limits) {
    char err[256];
    char deep[200];
    for (int n = 63; n <= 65; n++) {
        memset(deep, '[', (size_t)n);
        memset(deep + n, ']', (size_t)n);
        fj_doc *d = fj_parse(deep, 2 * (size_t)n, &(fj_limits){.max_depth = 64}, err, sizeof err);
        if (n <= 64) {
            cr_assert_not_null(d, "depth %d: %s", n, err);
            fj_free(d);
        } else {
            cr_assert_null(d, "depth %d accepted", n);
            cr_assert(strstr(err, "nested deeper"), "%s", err);
        }
    }
    /* a hostile depth fails fast at the limit, whatever the text's length */
    const size_t huge = 1 << 20;
    char *p = malloc(huge);
    memset(p, '[', huge);
    cr_assert_null(fj_parse(p, huge, NULL, err, sizeof err));
    cr_assert(strstr(err, "nested deeper"), "%s", err);
    free(p);
    cr_assert_null(fj_parse("[1,2,3]", 7, &(fj_limits){.max_bytes = 6}, err, sizeof err));
    cr_assert(strstr(err, "longer than the limit"), "%s", err);
}

static char *write_string(const char *s, size_t n) {
    fj_buf b = {0};
    fj_str(&b, s, n);
    cr_assert(!b.oom);
    return b.p;
}

Test(serve_json, the_writer_escapes_and_repairs) {
    char *w = write_string("a\"b\\c\n\t\x01\x1f/", 10);
    cr_assert_str_eq(w, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f/\"");
    free(w);
    /* bytes that start no valid character become U+FFFD, valid ones stay */
    w = write_string("\xC3\xA9\xFF\xE2\x82x", 6);
    cr_assert_str_eq(w, "\"\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx\"");
    free(w);
    fj_buf b = {0};
    fj_num(&b, 0.1);
    fj_raws(&b, " ");
    fj_num(&b, 1e300);
    fj_raws(&b, " ");
    fj_num(&b, NAN);
    fj_raws(&b, " ");
    fj_num(&b, -3);
    fj_raws(&b, " ");
    fj_numf(&b, 0.7f);
    fj_raws(&b, " ");
    fj_numf(&b, -8.72259625e-05f);
    fj_raws(&b, " ");
    fj_int(&b, INT64_MIN);
    /* the shortest forms that read back (Python's repr of the double, and of numpy.float32) */
    cr_assert_str_eq(b.p, "0.1 1e+300 null -3 0.7 -8.722596e-05 -9223372036854775808");
    fj_buf_free(&b);
}

/* Any bytes written as a string read back as themselves when they are
 * valid UTF-8, and always read back as valid JSON. */
Test(serve_json, the_writer_round_trips_through_the_reader) {
    unsigned seed = 12345;
    char err[256];
    for (int t = 0; t < 2000; t++) {
        unsigned char s[64];
        const size_t n = (size_t)(t % 64);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            /* mostly ASCII and a few multi-byte lead/continuation bytes */
            const unsigned r = seed >> 16;
            s[i] = (unsigned char)(r % 7 == 0 ? 0x80 + r % 0x80 : r % 0x80);
        }
        char *w = write_string((const char *)s, n);
        fj_doc *d = fj_parse(w, strlen(w), NULL, err, sizeof err);
        cr_assert_not_null(d, "the writer's output '%s' is refused: %s", w, err);
        int valid = 1;
        for (size_t i = 0; i < n; i++) valid &= s[i] < 0x80;
        if (valid) {
            cr_assert_eq(fj_root(d)->len, n);
            cr_assert(!memcmp(fj_root(d)->str, s, n));
        }
        fj_free(d);
        free(w);
    }
}
