/* SPDX-License-Identifier: MIT */
/* Fucina llm: UTF-8 with llama.cpp's decoding rules, codepoint classes, and
 * GPT-2's byte <-> codepoint mapping. */
#include "llm/unicode.h"

uint16_t fcu_flags(uint32_t cpt) {
    if (cpt >= 0x110000u) return FCU_UNDEFINED;
    /* Last range whose start <= cpt (ranges[0].start == 0). */
    uint32_t lo = 0, hi = fcu_range_count;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (fcu_ranges[mid].start <= cpt) lo = mid;
        else hi = mid;
    }
    return fcu_ranges[lo].flags;
}

static int is_cont(unsigned char b) { return (b & 0xC0) == 0x80; }

uint32_t fcu_decode(const unsigned char *s, size_t n, size_t *i) {
    size_t k = *i;
    unsigned char b = s[k];
    if (b < 0x80) {
        *i = k + 1;
        return b;
    }
    /* llama.cpp tests the lead's bits in this order; a bare continuation
     * byte (10xxxxxx) and F8..FF are invalid. */
    uint32_t cpt = 0;
    size_t len = 0;
    if (!(b & 0x40)) {
        len = 0;
    } else if (!(b & 0x20)) {
        if (k + 1 < n && is_cont(s[k + 1])) {
            cpt = ((uint32_t)(b & 0x1F) << 6) | (s[k + 1] & 0x3Fu);
            len = 2;
        }
    } else if (!(b & 0x10)) {
        if (k + 2 < n && is_cont(s[k + 1]) && is_cont(s[k + 2])) {
            cpt = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[k + 1] & 0x3F) << 6) | (s[k + 2] & 0x3Fu);
            len = 3;
        }
    } else if (!(b & 0x08)) {
        if (k + 3 < n && is_cont(s[k + 1]) && is_cont(s[k + 2]) && is_cont(s[k + 3])) {
            cpt = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[k + 1] & 0x3F) << 12) |
                  ((uint32_t)(s[k + 2] & 0x3F) << 6) | (s[k + 3] & 0x3Fu);
            len = 4;
            /* Above U+10FFFF llama.cpp throws while re-encoding; we take the
             * same path as any other invalid byte. */
            if (cpt > 0x10FFFFu) len = 0;
        }
    }
    if (len == 0) {
        *i = k + 1;
        return FCU_REPLACEMENT;
    }
    *i = k + len;
    return cpt;
}

int fcu_encode(uint32_t cpt, unsigned char out[4]) {
    if (cpt < 0x80) {
        out[0] = (unsigned char)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cpt >> 6));
        out[1] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cpt >> 12));
        out[1] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | ((cpt >> 18) & 0x07));
    out[1] = (unsigned char)(0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cpt & 0x3F));
    return 4;
}

int fcu_utf8_lead_len(unsigned char b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

/* GPT-2: the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
 * themselves; the other 68 bytes, in increasing order, take U+0100.. so
 * every byte has a visible, non-space spelling. */
static int byte_is_self(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t fcu_byte_to_cpt(uint8_t b) {
    if (byte_is_self(b)) return b;
    uint32_t n = 0; /* how many non-self bytes come before b */
    for (unsigned c = 0; c < b; c++) n += !byte_is_self(c);
    return 0x100 + n;
}

int fcu_cpt_to_byte(uint32_t cpt) {
    if (cpt < 0x100) return byte_is_self(cpt) ? (int)cpt : -1;
    if (cpt >= 0x100 + 68) return -1;
    uint32_t n = cpt - 0x100;
    for (unsigned c = 0; c < 256; c++) {
        if (!byte_is_self(c)) {
            if (n == 0) return (int)c;
            n--;
        }
    }
    return -1;
}
