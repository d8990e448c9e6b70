/* SPDX-License-Identifier: MIT */
/* Fucina llm: the Unicode pieces byte-level BPE needs.
 *
 * - UTF-8 decoding with llama.cpp's rules (they decide token ids, so they are
 *   part of the format): a lead byte fixes the length, only the continuation
 *   bytes' top bits are checked (overlong forms and surrogates decode), and a
 *   byte that does not start a complete sequence becomes U+FFFD and consumes
 *   one byte. Unlike llama.cpp, a sequence decoding above U+10FFFF (F4 90..,
 *   F5..F7 leads) is also U+FFFD + one byte: llama.cpp throws there.
 * - Codepoint classes from the generated range table (unicode_data.c).
 * - GPT-2's byte <-> printable-codepoint mapping used by byte-level BPE
 *   vocabularies (so a byte string is spelled with printable characters). */
#ifndef FUCINA_LLM_UNICODE_H
#define FUCINA_LLM_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Same bit values as llama.cpp's unicode_cpt_flags (categories + White_Space). */
enum {
    FCU_UNDEFINED = 0x001,
    FCU_NUMBER = 0x002,      /* \p{N} */
    FCU_LETTER = 0x004,      /* \p{L} */
    FCU_SEPARATOR = 0x008,   /* \p{Z} */
    FCU_MARK = 0x010,        /* \p{M} */
    FCU_PUNCTUATION = 0x020, /* \p{P} */
    FCU_SYMBOL = 0x040,      /* \p{S} */
    FCU_CONTROL = 0x080,     /* \p{C} */
    FCU_WHITESPACE = 0x100,  /* \s (White_Space) */
};

typedef struct fcu_range {
    uint32_t start;
    uint16_t flags;
} fcu_range;

extern const char fcu_unicode_version[];
extern const uint32_t fcu_range_count;
extern const fcu_range fcu_ranges[];

#define FCU_REPLACEMENT 0xFFFDu

/* Flags of a codepoint; FCU_UNDEFINED above U+10FFFF. */
uint16_t fcu_flags(uint32_t cpt);

/* Decode one codepoint at s[*i] (i < n) with the rules above; advances *i. */
uint32_t fcu_decode(const unsigned char *s, size_t n, size_t *i);

/* Encode cpt (<= 0x10FFFF) into out (4 bytes); returns the length. */
int fcu_encode(uint32_t cpt, unsigned char out[4]);

/* Length of a complete UTF-8 character starting with byte b, per the lead
 * byte (C2..DF: 2, E0..EF: 3, F0..F4: 4, ASCII: 1); 0 when b cannot start one. */
int fcu_utf8_lead_len(unsigned char b);

/* GPT-2 byte mapping: byte -> codepoint, and codepoint -> byte (-1 when cpt
 * is not the image of a byte). */
uint32_t fcu_byte_to_cpt(uint8_t b);
int fcu_cpt_to_byte(uint32_t cpt);

#endif
