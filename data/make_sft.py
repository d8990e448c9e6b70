#!/usr/bin/python3
"""Write a small synthetic chat set for `fucina sft`.

Every conversation is one JSON object per line:

  {"messages": [{"role": "system", "content": "..."},      (optional)
                {"role": "user", "content": "..."},
                {"role": "assistant", "content": "..."}, ...]}

The content is what a model of a few million parameters, trained for minutes
on a CPU, can learn: greetings and who-are-you answers, short fortunes from
the `fortunes` packages, one-sentence definitions from GCIDE (`dict-gcide`),
additions and subtractions of numbers below 100, some two-turn conversations
(a greeting, then a question) and some conversations with a system message.

Deterministic: a fixed seed, sorted inputs, so two runs give byte-identical
files. Standard library only; the fortune and dictionary readers are the ones
of prepare_corpus.py (same directory).
"""

import argparse
import collections
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prepare_corpus as pc  # noqa: E402

SEED = 20240611
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "sft", "chat.jsonl")

# --------------------------------------------------------------------------
# fixed turns

IDENTITY = ("I am a small language model trained from scratch with Fucina, "
            "a CPU tensor runtime and trainer.")
HELLO_REPLY = [
    "Hello! I am a small language model trained from scratch with Fucina. "
    "How can I help?",
    "Hi! I am a small model trained with Fucina. How can I help?",
    "Hello! How can I help you today?",
]
GREETINGS = [
    "Hello!", "Hello", "Hi!", "Hi", "Hi there!", "Hey!", "Hey there.",
    "Good morning!", "Good evening.", "Greetings!", "hello", "hi",
    "Hello, how are you?", "Hi, how are you doing?",
]
HOW_ARE_YOU_REPLY = ("I am fine, thank you! I am a small language model "
                     "trained with Fucina. How can I help?")
WHO = [
    "Who are you?", "What are you?", "Tell me about yourself.",
    "What is your name?", "Are you a person?", "who are you",
    "Introduce yourself.", "What kind of model are you?",
]
WHO_REPLY = [
    IDENTITY,
    IDENTITY + " I can greet you, tell you a fortune, define a word or do "
    "small sums.",
    "I am not a person. " + IDENTITY,
]
WHAT = [
    "What can you do?", "How can you help me?", "What are you good at?",
    "What do you know?", "Help", "What can I ask you?",
    "What can you help with?",
]
WHAT_REPLY = [
    "I can tell you a fortune, define a word, add or subtract small numbers, "
    "and chat a little. I am a small model, so keep it simple.",
    "I can tell you a fortune, define an English word, or do small sums like "
    "7 + 5. Just ask!",
]
THANKS = ["Thanks!", "Thank you.", "Thank you!", "thanks", "Great, thanks."]
THANKS_REPLY = ["You're welcome!", "You are welcome! Anything else?",
                "Glad to help!"]
BYE = ["Bye!", "Goodbye.", "See you later!", "bye"]
BYE_REPLY = ["Goodbye! Have a nice day.", "Bye! Come back any time."]

SYSTEMS = [
    "You are a helpful assistant.",
    "You are a small, friendly assistant. Answer briefly.",
    "You are a tiny language model trained with Fucina. Keep answers short.",
    "Answer in one sentence.",
]

FORTUNE_ASKS = [
    "Tell me a fortune.", "Give me a fortune.", "Tell me my fortune.",
    "Can I have a fortune cookie?", "Tell me a joke.", "Tell me something "
    "funny.", "Give me a quote.", "Say something wise.", "Quote of the day?",
    "I need some wisdom.", "fortune", "Got a fortune for me?",
    "Tell me something interesting.", "Cheer me up.",
]
DEFINE_ASKS = [
    "What does {w} mean?", "Define {w}.", "What is the meaning of {w}?",
    "define {w}", "What's the definition of {w}?", "Meaning of {w}?",
    "What is a definition of the word \"{w}\"?", "Can you define {w}?",
]
ADD_ASKS = [
    "What is {a} + {b}?", "What is {a} plus {b}?", "What's {a} + {b}?",
    "Calculate {a} + {b}.", "{a} + {b} = ?", "{a}+{b}", "Add {a} and {b}.",
    "How much is {a} plus {b}?", "What is the sum of {a} and {b}?",
]
SUB_ASKS = [
    "What is {a} - {b}?", "What is {a} minus {b}?", "What's {a} - {b}?",
    "Calculate {a} - {b}.", "{a} - {b} = ?", "{a}-{b}",
    "Subtract {b} from {a}.", "How much is {a} minus {b}?",
    "What is {b} less than {a}?",
]

# Non-offensive fortune files whose short records read well as answers.
FORTUNE_FILES = {
    "fortunes", "literature", "riddles", "wisdom", "people", "humorists",
    "computers", "science", "work", "platitudes", "pets", "food", "kids",
    "art", "education", "love", "songs-poems", "tao", "magic", "linux",
    "goedel", "miscellaneous", "cookie", "startrek", "pratchett", "sports",
    "paradoxum", "definitions", "law", "medicine", "news",
}
FORTUNE_MAX = 72
DEFINITION_MAX = 72

# --------------------------------------------------------------------------
# material from the packages


def short_fortunes():
    """Sorted, distinct fortunes of at most FORTUNE_MAX characters, at most
    two lines, joined into one line."""
    out = set()
    for name, text in pc.read_fortunes():
        if name not in FORTUNE_FILES:
            continue
        lines = [l.strip() for l in text.split("\n") if l.strip()]
        if not lines or len(lines) > 2:
            continue
        one = re.sub(r"\s+", " ", " ".join(lines))
        if len(one) > FORTUNE_MAX or len(one) < 12:
            continue
        if not re.search(r"[A-Za-z]", one) or "http" in one or "@" in one:
            continue
        out.add(one)
    return sorted(out)


_DEF_SKIP = re.compile(
    r"^(?:See |Same as|Alt\. of|pl\. of|imp\. of|p\. p\.|"
    r"p\. pr\.|obs\.|A variant|An obsolete|Obsolete|Plural of|of |"
    r"var\. of|superl\.|compar\.)", re.IGNORECASE)
_DEF_BAD = re.compile(r"\[(?:Obs|R\.|Archaic|Prov|Scot|Colloq|Slang|Poetic|"
                      r"Local|Cant|Low|vulgar|Dial)", re.IGNORECASE)


def _first_sentence(sense):
    s = re.sub(r"^\d+\.\s*", "", sense)
    s = re.sub(r"^\([a-z]\)\s*", "", s)
    s = re.sub(r"^(?:\([^()]*\)\s*)+", "", s)  # (Zool.) (Bot.) labels
    if _DEF_SKIP.match(s) or _DEF_BAD.search(s):
        return None
    m = re.match(r"(.+?[a-z)\]])[.;](?:\s|$)", s)
    if not m:
        return None
    s = m.group(1).strip()
    if ("--" in s or '"' in s or ":" in s or "&" in s or " fr." in s
            or len(s) < 8 or len(s.split()) < 3):
        return None
    if re.match(r"(?:[A-Za-z]{1,4}\.\s)", s):  # "A. & n., fr." header debris
        return None
    return s[0].upper() + s[1:] + "."


def common_words(texts, min_count=3):
    """Lower-case words seen at least min_count times in lower case."""
    c = collections.Counter()
    for t in texts:
        c.update(re.findall(r"\b[a-z]{3,12}\b", t))
    return {w for w, n in c.items() if n >= min_count}


def short_definitions(common):
    """Sorted (word, definition) pairs: the first sense of the first entry of
    each common word, when it is one short sentence."""
    seen = {}
    for raw in pc.gcide_entries():
        parsed = pc.parse_gcide_entry(raw)
        if parsed is None:
            continue
        head, pos, senses = parsed
        w = head.lower()
        if w in seen or w not in common or not re.fullmatch(r"[a-z]+", w):
            continue
        d = _first_sentence(senses[0])
        seen[w] = d  # the first entry decides, even when it is unusable
    return sorted((w, d) for w, d in seen.items()
                  if d is not None and len(d) <= DEFINITION_MAX)


# --------------------------------------------------------------------------
# conversations


def turn(role, content):
    return {"role": role, "content": content}


class Maker:
    def __init__(self, rng, fortunes, definitions):
        self.rng = rng
        self.fortunes = fortunes
        self.definitions = definitions
        self._fortune_bag = []
        self._define_bag = []

    def _draw(self, bag, pool):
        """Without replacement until the pool is used up, then again."""
        if not bag:
            bag.extend(pool)
            self.rng.shuffle(bag)
        return bag.pop()

    def greeting(self):
        g = self.rng.choice(GREETINGS)
        if "how are you" in g.lower():
            return [turn("user", g), turn("assistant", HOW_ARE_YOU_REPLY)]
        return [turn("user", g), turn("assistant", self.rng.choice(HELLO_REPLY))]

    def identity(self):
        r = self.rng.random()
        if r < 0.45:
            return [turn("user", self.rng.choice(WHO)),
                    turn("assistant", self.rng.choice(WHO_REPLY))]
        if r < 0.8:
            return [turn("user", self.rng.choice(WHAT)),
                    turn("assistant", self.rng.choice(WHAT_REPLY))]
        if r < 0.9:
            return [turn("user", self.rng.choice(THANKS)),
                    turn("assistant", self.rng.choice(THANKS_REPLY))]
        return [turn("user", self.rng.choice(BYE)),
                turn("assistant", self.rng.choice(BYE_REPLY))]

    def fortune(self):
        f = self._draw(self._fortune_bag, self.fortunes)
        return [turn("user", self.rng.choice(FORTUNE_ASKS)),
                turn("assistant", f)]

    def define(self):
        w, d = self._draw(self._define_bag, self.definitions)
        return [turn("user", self.rng.choice(DEFINE_ASKS).format(w=w)),
                turn("assistant", "%s: %s" % (w, d))]

    def arithmetic(self):
        a = self.rng.randrange(0, 100)
        b = self.rng.randrange(0, 100)
        if self.rng.random() < 0.5:
            q = self.rng.choice(ADD_ASKS).format(a=a, b=b)
            return [turn("user", q),
                    turn("assistant", "%d + %d = %d." % (a, b, a + b))]
        if a < b:
            a, b = b, a
        q = self.rng.choice(SUB_ASKS).format(a=a, b=b)
        return [turn("user", q),
                turn("assistant", "%d - %d = %d." % (a, b, a - b))]

    def two_turn(self):
        second = self.rng.choice([k for k in ("fortune", "define",
                                              "arithmetic", "identity")
                                  if self.available(k)])
        return self.greeting() + getattr(self, second)()

    def available(self, kind):
        if kind == "fortune":
            return bool(self.fortunes)
        if kind == "define":
            return bool(self.definitions)
        return True


# share of each kind of conversation
MIX = [("greeting", 0.10), ("identity", 0.10), ("fortune", 0.20),
       ("define", 0.23), ("arithmetic", 0.25), ("two_turn", 0.12)]
SYSTEM_SHARE = 0.12


def build(count, seed, fortunes, definitions):
    rng = random.Random(seed)
    maker = Maker(rng, fortunes, definitions)
    kinds = [(k, w) for k, w in MIX if maker.available(k)]
    total = sum(w for _, w in kinds)
    # exact quotas (largest remainder), then a seeded shuffle of the order
    raw = [(k, count * w / total) for k, w in kinds]
    quota = {k: int(x) for k, x in raw}
    rest = count - sum(quota.values())
    for k, x in sorted(raw, key=lambda kx: (-(kx[1] - int(kx[1])), kx[0])):
        if rest <= 0:
            break
        quota[k] += 1
        rest -= 1
    order = [k for k, _ in kinds for _ in range(quota[k])]
    rng.shuffle(order)
    convs = []
    for k in order:
        msgs = getattr(maker, k)()
        if rng.random() < SYSTEM_SHARE:
            msgs = [turn("system", rng.choice(SYSTEMS))] + msgs
        convs.append((k, msgs))
    return convs, quota


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Write a synthetic chat set ({\"messages\": [...]} per "
                    "line) for fucina sft.")
    ap.add_argument("--out", default=DEFAULT_OUT,
                    help="output file (default: data/sft/chat.jsonl)")
    ap.add_argument("--count", type=int, default=3000,
                    help="number of conversations (default: 3000)")
    ap.add_argument("--seed", type=int, default=SEED,
                    help="RNG seed (default: %d)" % SEED)
    args = ap.parse_args(argv)
    if args.count < 1:
        ap.error("--count must be at least 1")

    fortunes, definitions = [], []
    if pc.installed("fortunes"):
        fortunes = short_fortunes()
    else:
        print("no fortunes: %s" % pc.missing_reason("fortunes"),
              file=sys.stderr)
    if pc.installed("gcide"):
        common = None
        if pc.installed("fortunes"):
            common = common_words(t for _, t in pc.read_fortunes())
        if common is None:
            print("no fortunes to pick common words from: definitions "
                  "skipped", file=sys.stderr)
        else:
            definitions = short_definitions(common)
    else:
        print("no definitions: %s" % pc.missing_reason("gcide"),
              file=sys.stderr)

    convs, quota = build(args.count, args.seed, fortunes, definitions)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for _, msgs in convs:
            f.write(json.dumps({"messages": msgs}, ensure_ascii=False,
                               separators=(",", ":")) + "\n")
    os.replace(tmp, args.out)
    nsys = sum(1 for _, m in convs if m[0]["role"] == "system")
    print("pools: %d short fortunes, %d short definitions"
          % (len(fortunes), len(definitions)))
    print("conversations: %d (%s); %d with a system message"
          % (len(convs), ", ".join("%s %d" % (k, quota[k]) for k in quota),
             nsys))
    print("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
