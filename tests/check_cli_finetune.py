"""`fucina finetune --lora`, end to end.

usage: check_cli_finetune.py FUCINA WORKDIR

- a random-weight qwen3 (make-model, untied) quantized to Q8_0, fine-tuned
  with LoRA on single-turn conversations (the default CHAT data): the CSV
  log's loss falls, the adapter runs in `fucina run --lora`, and --merge's
  model (f16 merged tensors over a q8_0 base: other weights, so the text is
  not compared; tests/runtime/test_lm_lora.c checks the numbers) runs in
  `fucina run`;
- --text on documents, with --targets and --rank, --dtype f16: the adapter
  loads in `fucina run --lora`;
- a checkpoint resumed to the same step count writes the same adapter bytes;
- misuse exits 2 naming the thing: a missing --lora, rank 0, an unknown
  target, a target the model lacks, an untrainable family (qwen3moe), an
  option of another command (--matrix-lr), --dtype q8_0, --merge onto the
  model.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cli_check  # noqa: E402

FUCINA, WORK = sys.argv[1], sys.argv[2]
failures, check, run, w, check_log = cli_check.helpers(FUCINA, WORK, timeout=300, errors="replace")

run("make-model", "--untied", "--seed", "3", w("base.gguf"))
run("quantize", w("base.gguf"), w("base_q8.gguf"), "Q8_0")
with open(w("chat.jsonl"), "w") as f:
    for i in range(60):
        f.write(json.dumps({"messages": [{"role": "user", "content": f"What is {i} plus {i}?"},
                                         {"role": "assistant", "content": f"It is {2 * i}."}]}) + "\n")
with open(w("text.jsonl"), "w") as f:
    for i in range(60):
        f.write(json.dumps({"text": f"the cat sees the mat. the dog likes ball number {i}."}) + "\n")

common = ["--seq", "48", "--batch", "4", "-t", "2", "--lora-lr", "1e-2"]
run("finetune", "--lora", w("base_q8.gguf"), "--data", w("chat.jsonl"), "--steps", "16", *common,
    "--log", w("log.csv"), "--save", w("ckpt.safetensors"), "--save-every", "8",
    "-o", w("adapter.gguf"), "--merge", w("merged.gguf"))
check_log(w("log.csv"), 16, 0.8)
gen = ["-p", "What is 3 plus 3?", "-n", "4", "--temp", "0"]
a = run("run", w("base_q8.gguf"), "--lora", w("adapter.gguf"), *gen)
m = run("run", w("merged.gguf"), *gen)
check(a.stdout.strip() != "", "fucina run --lora generates with the adapter")
check(m.stdout.strip() != "", "fucina run generates from the merged model")

# resume: the last checkpoint is at step 16; resuming it for 16 steps writes the same adapter
run("finetune", "--lora", w("base_q8.gguf"), "--data", w("chat.jsonl"), "--steps", "16", *common,
    "--resume", w("ckpt.safetensors"), "-o", w("adapter2.gguf"), "--quiet")
check(open(w("adapter.gguf"), "rb").read() == open(w("adapter2.gguf"), "rb").read(), "resumed adapter bytes equal")

run("finetune", "--lora", w("base.gguf"), "--text", "--data", w("text.jsonl"), "--steps", "4", *common,
    "--targets", "q,v,ffn_down", "--rank", "4", "--alpha", "8", "--dtype", "f16", "-o", w("text.gguf"))
run("run", w("base.gguf"), "--lora", w("text.gguf"), *gen)

# misuse
run("make-model", "--arch", "qwen3moe", w("moe.gguf"))
for args, needle in [
    (["finetune", "--data", w("chat.jsonl"), "-o", w("x.gguf")], "--lora"),
    (["finetune", "--lora", w("base.gguf"), "--data", w("chat.jsonl"), "--rank", "0", "-o", w("x.gguf")], "--rank"),
    (["finetune", "--lora", w("base.gguf"), "--data", w("chat.jsonl"), "--targets", "q,attn_z", "-o", w("x.gguf")],
     "attn_z"),
    (["finetune", "--lora", w("base.gguf"), "--data", w("chat.jsonl"), "--targets", "qkv", "-o", w("x.gguf")],
     "attn_qkv"),
    (["finetune", "--lora", w("moe.gguf"), "--data", w("chat.jsonl"), "-o", w("x.gguf")], "qwen3moe"),
    (["finetune", "--lora", w("base.gguf"), "--data", w("chat.jsonl"), "--matrix-lr", "1", "-o", w("x.gguf")],
     "--matrix-lr"),
    (["finetune", "--lora", w("base.gguf"), "--data", w("chat.jsonl"), "--dtype", "q8_0", "-o", w("x.gguf")], "q8_0"),
    (["finetune", "--lora", w("base.gguf"), "--data", w("chat.jsonl"), "-o", w("x.gguf"), "--merge", w("base.gguf")],
     "the model itself"),
]:
    p = run(*args, expect=2)
    check(needle in p.stderr, f"{' '.join(args[:4])}: stderr should name {needle}: {p.stderr[-300:]}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
