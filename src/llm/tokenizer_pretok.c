/* SPDX-License-Identifier: MIT */
/* Fucina llm: pre-tokenizers, written by hand as llama.cpp does for the
 * regexes it knows (std::regex is not an option in C, and a hand matcher is
 * what llama.cpp really runs, so its quirks are the reference).
 *
 * qwen2 (tokenizer.json's regex, alternatives tried left to right):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * Numbers are split into single digits.
 *
 * llama3 (llama-bpe and its aliases): the same regex with \p{N}{1,3}, i.e.
 * a digit run is cut into groups of three from its start ("12345" is
 * "123" "45"); llama.cpp's unicode_regex_split_custom_llama3.
 *
 * gpt2: 's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+
 *   | \s+(?!\S) | \s+ (contractions case-sensitive, no newline rules);
 * llama.cpp's unicode_regex_split_custom_gpt2. */
#include "llm/tokenizer_internal.h"
#include "llm/unicode.h"

#define OUT_OF_RANGE 0xFFFFFFFFu

typedef struct span {
    const uint32_t *cpts;
    size_t n;
} span;

static uint32_t cpt_at(const span *s, size_t pos) { return pos < s->n ? s->cpts[pos] : OUT_OF_RANGE; }

/* Past the end the flags are 0: no class at all (not even "undefined"),
 * which the punctuation rule below relies on to stop. */
static uint16_t flags_at(const span *s, size_t pos) { return pos < s->n ? fcu_flags(s->cpts[pos]) : 0; }

/* The contraction rule lowercases with Unicode's simple mapping; only ASCII
 * letters can lowercase to s t m d r e v l (gen/unicode_tables.py checks it). */
static uint32_t lower_ascii(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* The end of the word at pos when the alternatives before failed and nws
 * whitespace codepoints start there: \s+(?!\S) leaves the last space to the
 * word that follows, \s+ takes a run at the end of the text, and a
 * codepoint nothing matched is a word on its own. */
static size_t space_run(const span *s, size_t pos, size_t nws) {
    if (nws > 1 && cpt_at(s, pos + nws) != OUT_OF_RANGE) return pos + nws - 1;
    if (nws > 0) return pos + nws;
    return pos + 1;
}

/* qwen2 and llama3 differ only in how many digits a number word takes:
 * 1 (qwen2) or up to 3 (llama3). */
static size_t qwen2_like(const uint32_t *cpts, size_t n, size_t *ends, size_t max_digits) {
    const span s = {cpts, n};
    size_t nw = 0;
    size_t pos = 0;
    while (pos < n) {
        const uint32_t cpt = cpt_at(&s, pos);
        const uint16_t fl = flags_at(&s, pos);

        /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
        if (cpt == '\'' && pos + 1 < n) {
            uint32_t c1 = lower_ascii(cpt_at(&s, pos + 1));
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                pos += 2;
                ends[nw++] = pos;
                continue;
            }
            if (pos + 2 < n) {
                uint32_t c2 = lower_ascii(cpt_at(&s, pos + 2));
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    pos += 3;
                    ends[nw++] = pos;
                    continue;
                }
            }
        }

        /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (!(cpt == '\r' || cpt == '\n' || (fl & FCU_NUMBER))) {
            if ((fl & FCU_LETTER) || (flags_at(&s, pos + 1) & FCU_LETTER)) {
                pos++;
                while (flags_at(&s, pos) & FCU_LETTER) pos++;
                ends[nw++] = pos;
                continue;
            }
        }

        /* \p{N} (qwen2) or \p{N}{1,3} (llama3): a run of digits in groups */
        if (fl & FCU_NUMBER) {
            size_t k = 0;
            while (k < max_digits && (flags_at(&s, pos) & FCU_NUMBER)) pos++, k++;
            ends[nw++] = pos;
            continue;
        }

        /* <space>?[^\s\p{L}\p{N}]+[\r\n]* */
        uint16_t fl2 = cpt == ' ' ? flags_at(&s, pos + 1) : fl;
        if (!(fl2 & (FCU_WHITESPACE | FCU_LETTER | FCU_NUMBER)) && fl) {
            pos += cpt == ' ';
            while (!(fl2 & (FCU_WHITESPACE | FCU_LETTER | FCU_NUMBER)) && fl2) fl2 = flags_at(&s, ++pos);
            uint32_t c2 = cpt_at(&s, pos);
            while (c2 == '\r' || c2 == '\n') c2 = cpt_at(&s, ++pos);
            ends[nw++] = pos;
            continue;
        }

        size_t nws = 0, last_rn_end = 0;
        while (flags_at(&s, pos + nws) & FCU_WHITESPACE) {
            uint32_t c2 = cpt_at(&s, pos + nws);
            if (c2 == '\r' || c2 == '\n') last_rn_end = pos + nws + 1;
            nws++;
        }
        /* \s*[\r\n]+ : up to the last newline of the run */
        if (last_rn_end > 0) {
            pos = last_rn_end;
            ends[nw++] = pos;
            continue;
        }
        pos = space_run(&s, pos, nws);
        ends[nw++] = pos;
    }
    return nw;
}

static size_t gpt2(const uint32_t *cpts, size_t n, size_t *ends) {
    const span s = {cpts, n};
    size_t nw = 0;
    size_t pos = 0;
    while (pos < n) {
        const uint32_t cpt = cpt_at(&s, pos);
        const uint16_t fl = flags_at(&s, pos);

        /* 's|'t|'re|'ve|'m|'ll|'d, lowercase only */
        if (cpt == '\'' && pos + 1 < n) {
            uint32_t c1 = cpt_at(&s, pos + 1);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                pos += 2;
                ends[nw++] = pos;
                continue;
            }
            if (pos + 2 < n) {
                uint32_t c2 = cpt_at(&s, pos + 2);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    pos += 3;
                    ends[nw++] = pos;
                    continue;
                }
            }
        }

        /* <space>?\p{L}+, <space>?\p{N}+, <space>?[^\s\p{L}\p{N}]+ : the class
         * is that of the codepoint after an optional space */
        uint16_t fl2 = cpt == ' ' ? flags_at(&s, pos + 1) : fl;
        uint16_t want = (fl2 & FCU_LETTER) ? FCU_LETTER : (fl2 & FCU_NUMBER) ? FCU_NUMBER : 0;
        if (want) {
            pos += cpt == ' ';
            while (fl2 & want) fl2 = flags_at(&s, ++pos);
            ends[nw++] = pos;
            continue;
        }
        if (!(fl2 & (FCU_WHITESPACE | FCU_LETTER | FCU_NUMBER)) && fl2) {
            pos += cpt == ' ';
            while (!(fl2 & (FCU_WHITESPACE | FCU_LETTER | FCU_NUMBER)) && fl2) fl2 = flags_at(&s, ++pos);
            ends[nw++] = pos;
            continue;
        }

        size_t nws = 0;
        while (flags_at(&s, pos + nws) & FCU_WHITESPACE) nws++;
        pos = space_run(&s, pos, nws);
        ends[nw++] = pos;
    }
    return nw;
}

size_t fctk_pretokenize(fctk_pre pre, const uint32_t *cpts, size_t n, size_t *ends) {
    switch (pre) {
    case FCTK_PRE_QWEN2:
        return qwen2_like(cpts, n, ends, 1);
    case FCTK_PRE_LLAMA3:
        return qwen2_like(cpts, n, ends, 3);
    case FCTK_PRE_GPT2:
        return gpt2(cpts, n, ends);
    case FCTK_PRE_NONE:
        break;
    }
    /* no pre-tokenizer: the whole text is one word */
    if (n) ends[0] = n;
    return n ? 1 : 0;
}
