"""`fucina train-tokenizer`, `fucina pretrain` and `fucina sft`, end to end.

usage: check_cli_train.py FUCINA WORKDIR SOURCE_DIR

- a tokenizer trained on the adversarial fixture corpus, a tiny qwen3 model
  pretrained on it for a few dozen steps: the CSV log's loss falls, the SVG
  plot parses as XML with one polyline, the exported GGUF runs in
  `fucina run` (the metadata read back by `fucina info`);
- the pretrained model fine-tuned with `fucina sft` on the shipped chat set
  (data/sft/chat.jsonl) and saved as f16: it loads and chats;
- a checkpoint resumed to the same step count writes the same model bytes;
- misuse exits 2 naming the thing: an unknown flag, a missing --tokenizer,
  --accum not dividing --batch, a malformed JSONL line (file:line), --dtype q4_0.
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_check  # noqa: E402

FUCINA, WORK, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
failures, check, run, w, check_log = cli_check.helpers(FUCINA, WORK, timeout=600)
CORPUS = os.path.join(SRC, "tests", "runtime", "data", "bpe_corpus.txt")
CHAT = os.path.join(SRC, "data", "sft", "chat.jsonl")

run("train-tokenizer", "-o", w("tok.gguf"), "--vocab-size", "600", CORPUS)
common = ["--n-embd", "64", "--n-layer", "2", "--seq", "64", "--batch", "4", "-t", "2"]
run("pretrain", "--tokenizer", w("tok.gguf"), "--train", CORPUS, "--val", CORPUS, "--steps", "40",
    "--eval-every", "20", "--eval-tokens", "512", *common, "--log", w("log.csv"), "--plot", w("loss.svg"),
    "--save", w("ckpt.safetensors"), "-o", w("pre.gguf"))
rows = check_log(w("log.csv"), 40, 0.6)
if rows:
    check(rows[19]["val_bpb"] and rows[-1]["val_bpb"], "held-out bits per byte at steps 20 and 40")
svg = ET.parse(w("loss.svg")).getroot()
check(len(svg.findall(".//{http://www.w3.org/2000/svg}polyline")) == 1, "one loss polyline in the plot")
info = run("info", w("pre.gguf")).stdout
check("qwen3" in info, "fucina info reads the exported model")
gen = run("run", w("pre.gguf"), "-p", "The", "-n", "8", "--temp", "0")
check(gen.stdout.strip() != "", "fucina run generates from the pretrained model")

# resume: the last checkpoint is at step 40; resuming it for 40 steps changes nothing
run("pretrain", "--tokenizer", w("tok.gguf"), "--train", CORPUS, "--steps", "40", *common,
    "--resume", w("ckpt.safetensors"), "-o", w("pre2.gguf"), "--quiet")
check(open(w("pre.gguf"), "rb").read() == open(w("pre2.gguf"), "rb").read(), "resumed model bytes equal")

run("sft", w("pre.gguf"), "--data", CHAT, "--steps", "10", "--seq", "96", "--batch", "4", "-t", "2",
    "--dtype", "f16", "-o", w("sft.gguf"))
chat = subprocess.run([FUCINA, "chat", w("sft.gguf"), "-n", "8", "--temp", "0"], input="Hello!\n",
                      capture_output=True, text=True, timeout=120)
check(chat.returncode == 0, f"fucina chat on the SFT model: exit {chat.returncode}: {chat.stderr[-300:]}")

# misuse
for args, needle in [
    (["pretrain", "--bogus"], "--bogus"),
    (["pretrain", "--train", CORPUS, "-o", w("x.gguf")], "--tokenizer"),
    (["pretrain", "--tokenizer", w("tok.gguf"), "--train", CORPUS, "--batch", "6", "--accum", "4",
      "-o", w("x.gguf")], "accum"),
    (["pretrain", "--tokenizer", w("tok.gguf"), "--train", CORPUS, "--dtype", "q4_0", "-o", w("x.gguf")], "q4_0"),
    (["sft", w("pre.gguf"), "--train", CHAT, "-o", w("x.gguf")], "--train"),
]:
    p = run(*args, expect=2)
    check(needle in p.stderr, f"{args[:2]}: the error names {needle}: {p.stderr.strip()}")
bad = w("bad.jsonl")
open(bad, "w").write('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
                     '{"messages": 3}\n')
p = run("sft", w("pre.gguf"), "--data", bad, "--steps", "1", "-o", w("x.gguf"), expect=2)
check("bad.jsonl:2" in p.stderr, f"malformed line named: {p.stderr.strip()}")
check(not os.path.exists(w("x.gguf")), "nothing written on failure")

print(f"cli_train: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
