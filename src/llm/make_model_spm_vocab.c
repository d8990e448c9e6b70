/* SPDX-License-Identifier: MIT */
/* Fucina llm: the model writer's SentencePiece vocabulary (Llama 2 style).
 *
 * A real SPM vocabulary is a list of pieces with scores: SentencePiece's BPE
 * trainer gives the k-th merge the score -k and the single characters lower
 * scores still, and the tokenizer merges adjacent symbols highest score
 * first. We do the same on a small built-in text (English, code, accented
 * Latin, CJK): the pieces are what a BPE trainer merges there, each scored
 * by its rank, so tokenizing other text exercises the real algorithm (the
 * best pair is rarely the leftmost, and merges chain across several
 * levels). Every seventh merge takes its predecessor's score, so equal
 * scores occur and llama.cpp's leftmost-first tie rule is exercised.
 *
 * As in Llama 2 and SentencePiece's defaults: words start with U+2581
 * ("▁"), pieces never cross a word start (a run of them stays with the
 * word after it, giving "▁▁" pieces), digits never merge (split_digits),
 * and newline and tab have no piece (they go through <0x0A> / <0x09>).
 * Everything is deterministic: no clock, no randomness. */
#include <stdlib.h>
#include <string.h>

#include "fucina/tokenizer.h"
#include "llm/make_model.h"

#define WB "\xE2\x96\x81" /* U+2581, SentencePiece's word boundary */
#define N_MERGES 640

/* The training text. Spaces and line starts become word boundaries. */
static const char *const k_text[] = {
    "The forge heats the metal until it glows, and the smith shapes it with a hammer.",
    "A tensor is an array of numbers with named axes; the runtime computes with tensors.",
    "The model reads the tokens, and the tokenizer turns the text into tokens again and again.",
    "Hello world! Hello there, how are you today? I'm fine, thanks; we're testing the tokenizer.",
    "They'll say it's the best thing: don't worry, she'd know what they've done.",
    "In the beginning the quick brown fox jumps over the lazy dog, then the dog sleeps.",
    "Numbers like 2026, 3.14159 and 1,000,000 are split into digits by the vocabulary.",
    "Questions, answers, reasons and seasons: everything has its time and its place.",
    "The function returns the value of the expression; the compiler checks the types.",
    "int main(void) { return printf(\"%d\\n\", a[i] + b->c); }",
    "for (int i = 0; i < n; i++) { sum += x[i] * y[i]; }",
    "def forward(self, x): return self.linear(x) + self.bias",
    "Caf\xC3\xA9 cr\xC3\xA8me br\xC3\xBBl\xC3\xA9" "e, na\xC3\xAFve fa\xC3\xA7" "ade, Stra\xC3\x9F" "e und \xC3\x9C" "bung.",
    "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81"             /* 你好，世界！ */
    "\xE8\xBF\x99\xE6\x98\xAF\xE4\xB8\x80\xE4\xB8\xAA\xE6\xB5\x8B\xE8\xAF\x95\xE3\x80\x82", /* 这是一个测试。 */
    "\xE4\xBD\xA0\xE5\xA5\xBD \xE4\xB8\x96\xE7\x95\x8C \xE6\xB5\x8B\xE8\xAF\x95 "           /* 你好 世界 测试 */
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88", /* 日本語のテキスト */
    "The smith and the model, the tensor and the token: the forge makes them all.",
    "Reading, writing, thinking, working, testing, tokenizing, forging, hammering.",
    "return value; return result; return tokens; the end of the line is near.",
    "    if (x) {",
    "        return  all  the  tokens;",
    "    }",
    "See the tree, feel the breeze, all is well: hello, good food, too cool, all will pass.",
};

/* Words the generated part of the text is made of (deterministic
 * sentences from a fixed pseudo-random sequence), so that pairs recur and
 * several hundred merges have counts above one, CJK ones included. */
static const char *const k_words[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "as", "on", "was", "he", "be", "at", "by",
    "this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you", "were", "her",
    "all", "she", "there", "would", "their", "we", "him", "been", "has", "when", "who", "will", "more", "no", "if",
    "out", "so", "said", "what", "up", "its", "about", "into", "than", "them", "can", "only", "other", "new",
    "some", "could", "time", "these", "two", "may", "then", "do", "first", "any", "my", "now", "such", "like",
    "our", "over", "man", "me", "even", "most", "made", "after", "also", "did", "many", "before", "must",
    "through", "back", "years", "where", "much", "your", "way", "well", "down", "should", "because", "each",
    "just", "those", "people", "how", "too", "little", "state", "good", "very", "make", "world", "still", "own",
    "see", "men", "work", "long", "get", "here", "between", "both", "life", "being", "under", "never", "day",
    "same", "another", "know", "while", "last", "might", "us", "great", "old", "year", "off", "come", "since",
    "against", "go", "came", "right", "used", "take", "three", "tensor", "tensors", "token", "tokens", "model",
    "models", "forge", "forging", "hammer", "metal", "kernel", "kernels", "matrix", "vector", "layer", "layers",
    "attention", "running", "testing", "reading", "writing", "thinking", "working", "computing", "tokenizer",
    "tokenizing", "quickly", "slowly", "really", "nation", "station", "creation", "question", "answer",
    "caf\xC3\xA9", "na\xC3\xAFve", "\xC3\xBC" "ber", "gr\xC3\xB6\xC3\x9F" "er",
    "\xE4\xBD\xA0\xE5\xA5\xBD", "\xE4\xB8\x96\xE7\x95\x8C", "\xE6\xB5\x8B\xE8\xAF\x95",
    "\xE4\xB8\xAD\xE6\x96\x87", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
    "\xE6\x88\x91\xE4\xBB\xAC\xE7\x9A\x84", "\xE4\xB8\x80\xE4\xB8\xAA\xE4\xBA\xBA",
};
#define N_SENTENCES 240

/* ---- symbols: interned UTF-8 strings ---------------------------------------- */

typedef struct symtab {
    char **s;
    int n, cap;
} symtab;

static int sym_id(symtab *t, const char *s, size_t len)
{
    for (int i = 0; i < t->n; i++)
        if (strlen(t->s[i]) == len && memcmp(t->s[i], s, len) == 0) return i;
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 256;
        char **p = realloc(t->s, (size_t)cap * sizeof *p);
        if (!p) return -1;
        t->s = p;
        t->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, s, len);
    c[len] = 0;
    t->s[t->n] = c;
    return t->n++;
}

/* ---- words: symbol sequences with counts ------------------------------------ */

typedef struct word {
    int *sym;
    int n;
    int count;
} word;

typedef struct words {
    word *w;
    int n, cap;
} words;

static int utf8_len(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

static int is_digit(const char *c) { return *c >= '0' && *c <= '9'; }

/* Adds the word made of the characters s[0..len) (merged with an identical
 * earlier word: counts instead of copies). */
static int add_word(symtab *st, words *ws, const char *s, size_t len)
{
    int tmp[256], n = 0;
    for (size_t i = 0; i < len && n < 256;) {
        int l = utf8_len((unsigned char)s[i]);
        int id = sym_id(st, s + i, (size_t)l);
        if (id < 0) return -1;
        tmp[n++] = id;
        i += (size_t)l;
    }
    if (!n) return 0;
    for (int k = 0; k < ws->n; k++)
        if (ws->w[k].n == n && memcmp(ws->w[k].sym, tmp, (size_t)n * sizeof *tmp) == 0) {
            ws->w[k].count++;
            return 0;
        }
    if (ws->n == ws->cap) {
        int cap = ws->cap ? ws->cap * 2 : 256;
        word *p = realloc(ws->w, (size_t)cap * sizeof *p);
        if (!p) return -1;
        ws->w = p;
        ws->cap = cap;
    }
    word *w = &ws->w[ws->n];
    w->sym = malloc((size_t)n * sizeof *w->sym);
    if (!w->sym) return -1;
    memcpy(w->sym, tmp, (size_t)n * sizeof *tmp);
    w->n = n;
    w->count = 1;
    ws->n++;
    return 0;
}

/* One line of training text: "▁" + the line with spaces as "▁", cut before
 * every "▁" and around every digit. */
static int add_line(symtab *st, words *ws, const char *line)
{
    char buf[1024];
    size_t n = 0;
    memcpy(buf, WB, 3);
    n = 3;
    for (const char *p = line; *p && n + 3 < sizeof buf; p++) {
        if (*p == ' ') {
            memcpy(buf + n, WB, 3);
            n += 3;
        } else {
            buf[n++] = *p;
        }
    }
    size_t start = 0;
    for (size_t i = 0; i <= n;) {
        /* a run of word boundaries stays with the word after it, so "▁▁"
         * pieces exist (Llama's indentation pieces) */
        int wb = i < n && memcmp(buf + i, WB, 3) == 0;
        int prev_wb = i >= 3 && memcmp(buf + i - 3, WB, 3) == 0;
        int cut = i == n || (i > start && wb && !prev_wb) || (i > start && is_digit(buf + i)) ||
                  (i > start && is_digit(buf + i - 1));
        if (cut) {
            if (add_word(st, ws, buf + start, i - start)) return -1;
            start = i;
            if (i == n) break;
        }
        i += (size_t)utf8_len((unsigned char)buf[i]);
    }
    return 0;
}

static void words_free(words *ws)
{
    for (int i = 0; i < ws->n; i++) free(ws->w[i].sym);
    free(ws->w);
}

static void symtab_free(symtab *st)
{
    for (int i = 0; i < st->n; i++) free(st->s[i]);
    free(st->s);
}

/* Pair counts in an open-addressing table, with the order pairs were first
 * seen so that ties go to the earliest (deterministic). */
#define PAIR_CAP 16384 /* > 2 x the pairs of the training text */

typedef struct pairs {
    uint32_t key[PAIR_CAP]; /* (x << 16 | y) + 1; 0 = empty */
    int count[PAIR_CAP];
    int first[PAIR_CAP];
} pairs;

/* The most frequent adjacent pair (the first seen on ties); pairs with a
 * digit never merge. Returns its count (0: none). */
static int best_pair(pairs *pt, const symtab *st, const words *ws, int *a, int *b)
{
    memset(pt->key, 0, sizeof pt->key);
    int seen = 0, best = 0, best_first = 0;
    for (int i = 0; i < ws->n; i++)
        for (int k = 0; k + 1 < ws->w[i].n; k++) {
            int x = ws->w[i].sym[k], y = ws->w[i].sym[k + 1];
            if (is_digit(st->s[x]) || is_digit(st->s[y])) continue;
            uint32_t key = ((uint32_t)x << 16 | (uint32_t)y) + 1;
            uint32_t h = (key * 2654435761u) & (PAIR_CAP - 1);
            while (pt->key[h] && pt->key[h] != key) h = (h + 1) & (PAIR_CAP - 1);
            if (!pt->key[h]) {
                pt->key[h] = key;
                pt->count[h] = 0;
                pt->first[h] = seen++;
            }
            pt->count[h] += ws->w[i].count;
            int c = pt->count[h];
            if (c > best || (c == best && pt->first[h] < best_first)) {
                best = c;
                best_first = pt->first[h];
                *a = x;
                *b = y;
            }
        }
    return best;
}

static void apply_merge(words *ws, int a, int b, int ab)
{
    for (int i = 0; i < ws->n; i++) {
        word *w = &ws->w[i];
        int o = 0;
        for (int k = 0; k < w->n; k++) {
            if (k + 1 < w->n && w->sym[k] == a && w->sym[k + 1] == b) {
                w->sym[o++] = ab;
                k++;
            } else {
                w->sym[o++] = w->sym[k];
            }
        }
        w->n = o;
    }
}

/* Chat tokens of the families that use SPM; control tokens match only
 * with parse_special, user-defined ones always (llama.cpp's rule). */
static const struct {
    const char *text;
    int32_t type;
} k_chat[] = {
    {"<start_of_turn>", FC_TOKEN_TYPE_CONTROL}, {"<end_of_turn>", FC_TOKEN_TYPE_CONTROL},
    {"[INST]", FC_TOKEN_TYPE_CONTROL},          {"[/INST]", FC_TOKEN_TYPE_CONTROL},
    {"<|system|>", FC_TOKEN_TYPE_CONTROL},      {"<|end|>", FC_TOKEN_TYPE_CONTROL},
    {"<|user|>", FC_TOKEN_TYPE_USER_DEFINED},   {"<|assistant|>", FC_TOKEN_TYPE_USER_DEFINED},
    {"<|placeholder1|>", FC_TOKEN_TYPE_UNUSED},
    /* Mistral's tool markup (v3 vocabularies) */
    {"[AVAILABLE_TOOLS]", FC_TOKEN_TYPE_CONTROL}, {"[/AVAILABLE_TOOLS]", FC_TOKEN_TYPE_CONTROL},
    {"[TOOL_CALLS]", FC_TOKEN_TYPE_CONTROL},      {"[TOOL_RESULTS]", FC_TOKEN_TYPE_CONTROL},
    {"[/TOOL_RESULTS]", FC_TOKEN_TYPE_CONTROL},
};

int mm_spm_vocab_build(mm_vocab *v)
{
    memset(v, 0, sizeof *v);
    v->kind = MM_VOCAB_SPM;
    symtab st = {0};
    words ws = {0};
    int *char_count = NULL;
    int n_chars = 0;
    pairs *pt = malloc(sizeof *pt);
    if (!pt) goto oom;
    if (mm_vocab_add(v, "<unk>", FC_TOKEN_TYPE_UNKNOWN, 0.0f) || mm_vocab_add(v, "<s>", FC_TOKEN_TYPE_CONTROL, 0.0f) ||
        mm_vocab_add(v, "</s>", FC_TOKEN_TYPE_CONTROL, 0.0f))
        goto oom;
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char s[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        if (mm_vocab_add(v, s, FC_TOKEN_TYPE_BYTE, 0.0f)) goto oom;
    }

    for (size_t i = 0; i < sizeof k_text / sizeof k_text[0]; i++)
        if (add_line(&st, &ws, k_text[i])) goto oom;
    /* the generated sentences: 6..13 words each, from a 32-bit LCG
     * (Numerical Recipes' constants), the first word capitalized */
    uint32_t rng = 20240601u;
    const uint32_t n_words = (uint32_t)(sizeof k_words / sizeof k_words[0]);
    for (int k = 0; k < N_SENTENCES; k++) {
        char line[512];
        size_t n = 0;
        rng = rng * 1664525u + 1013904223u;
        int len = 6 + (int)((rng >> 16) % 8);
        for (int w = 0; w < len; w++) {
            rng = rng * 1664525u + 1013904223u;
            const char *wd = k_words[(rng >> 8) % n_words];
            size_t wl = strlen(wd);
            if (n + wl + 2 >= sizeof line) break;
            if (w) line[n++] = ' ';
            memcpy(line + n, wd, wl);
            if (w == 0 && line[n] >= 'a' && line[n] <= 'z') line[n] = (char)(line[n] - 32);
            n += wl;
        }
        line[n++] = (rng >> 4) % 3 ? '.' : ',';
        line[n] = 0;
        if (add_line(&st, &ws, line)) goto oom;
    }
    n_chars = st.n; /* every symbol so far is a single character */
    char_count = calloc((size_t)n_chars, sizeof *char_count);
    if (!char_count) goto oom;
    for (int i = 0; i < ws.n; i++)
        for (int k = 0; k < ws.w[i].n; k++) char_count[ws.w[i].sym[k]] += ws.w[i].count;

    /* merges, scored by rank; every seventh ties with the one before */
    float score = 0.0f;
    for (int m = 0; m < N_MERGES; m++) {
        int a = 0, b = 0;
        if (best_pair(pt, &st, &ws, &a, &b) < 2) break;
        size_t la = strlen(st.s[a]), lb = strlen(st.s[b]);
        char joined[512];
        if (la + lb >= sizeof joined) break;
        memcpy(joined, st.s[a], la);
        memcpy(joined + la, st.s[b], lb);
        joined[la + lb] = 0;
        int ab = sym_id(&st, joined, la + lb);
        if (ab < 0) goto oom;
        apply_merge(&ws, a, b, ab);
        if (m % 7 != 6) score = -(float)m;
        if (mm_vocab_find(v, joined) < 0 && mm_vocab_add(v, joined, FC_TOKEN_TYPE_NORMAL, score)) goto oom;
    }
    /* the single characters, most frequent first, below every merge */
    float low = -(float)N_MERGES;
    for (int done = 0; done < n_chars; done++) {
        int best = -1;
        for (int c = 0; c < n_chars; c++)
            if (char_count[c] >= 0 && (best < 0 || char_count[c] > char_count[best])) best = c;
        char_count[best] = -1;
        if (mm_vocab_find(v, st.s[best]) >= 0) continue;
        low -= 1.0f;
        if (mm_vocab_add(v, st.s[best], FC_TOKEN_TYPE_NORMAL, low)) goto oom;
    }
    for (size_t i = 0; i < sizeof k_chat / sizeof k_chat[0]; i++)
        if (mm_vocab_add(v, k_chat[i].text, k_chat[i].type, 0.0f)) goto oom;

    free(pt);
    free(char_count);
    words_free(&ws);
    symtab_free(&st);
    v->pre = NULL;
    v->unk = 0;
    v->bos = 1;
    v->eos = 2;
    v->pad = -1;
    v->add_bos = 1;
    v->add_eos = 0;
    v->add_space_prefix = 1;
    return 0;
oom:
    free(pt);
    free(char_count);
    words_free(&ws);
    symtab_free(&st);
    mm_vocab_free(v);
    return -1;
}
