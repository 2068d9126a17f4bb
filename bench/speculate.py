#!/usr/bin/env python3
"""Speculative decoding against plain decoding (and llama.cpp), side by side.

For each prompt of bench/spec-prompts/tasks.txt (a function of 40-50 lines
and an edit to make: rename a variable, add type hints, add a docstring),
every mode runs the same chat-formatted text, greedy, in turn, for several
rounds; a mode's speed in a round is its answer tokens over its decode
seconds summed over the prompts; the table gives each mode's median over
the rounds and its ratio to plain decoding's median (and the median of the
per-round ratios). The answers of kestrel's modes are compared: they must be
the same tokens (speculation does not change the output).

  python3 bench/speculate.py --model .cache/vqf/0.5b-source.vqf \
      [--mode lookup] [--mode "draft:.cache/vqf/0.5b-small.vqf"] \
      [--gguf .cache/model/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --llama-bin DIR] \
      [--rounds 3] [-n 512] [-t 2] [--draft-max 8]

Modes: plain (always), lookup (--lookup), draft:FILE (--draft FILE),
prediction (a running `kestrel serve` on --port, with the original
function as OpenAI's `prediction`), serve-plain (the same server without
it). --generate: the code-generation prompts of
bench/spec-prompts/generate.txt instead of the edits. With --gguf and --llama-bin: llama.cpp's
llama-lookup (and llama-speculative with --llama-draft GGUF) on the same
text, threads and token limit. Prints one JSON line per run on stderr.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def prompts(generate=False):
    """(name, task, code): the editing tasks, or with `generate` the
    code-generation prompts (no code)."""
    out = []
    if generate:
        with open(os.path.join(HERE, "spec-prompts", "generate.txt")) as f:
            return [(f"gen{i}", line.strip(), "") for i, line in enumerate(f) if line.strip()]
    with open(os.path.join(HERE, "spec-prompts", "tasks.txt")) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, task = line.split("\t", 1)
            with open(os.path.join(HERE, "spec-prompts", name)) as g:
                code = g.read()
            out.append((name, task, code))
    return out


def chat_text(task, code):
    user = f"```python\n{code}```\n\n{task}" if code else task
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )


DECODE = re.compile(r"decode (\d+) tok in ([0-9.]+) s")
SPEC = re.compile(r"drafted (\d+) tok, accepted (\d+)")


def run_kestrel(a, text, extra):
    cmd = [a.kestrel, "run", a.model, "--raw", "-p", text, "-n", str(a.n),
           "--temp", "0", "--ids", "-t", str(a.threads)] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = DECODE.search(p.stderr)
    ids = p.stdout.strip().splitlines()[-1]
    s = SPEC.search(p.stderr)
    drafted, accepted = (int(s.group(1)), int(s.group(2))) if s else (0, 0)
    return int(m.group(1)), float(m.group(2)), ids, drafted, accepted


LLAMA_DECODE = re.compile(r"decoded\s+(\d+) tokens in\s+([0-9.]+) seconds")
LLAMA_ACCEPT = re.compile(r"n_accept\s*=\s*(\d+)")
LLAMA_DRAFT = re.compile(r"n_drafted\s*=\s*(\d+)")


def run_llama(a, text, tool, draft=None):
    cmd = [os.path.join(a.llama_bin, tool), "-m", a.gguf, "-p", text, "-n", str(a.n),
           "--temp", "0", "-t", str(a.threads), "--spec-draft-n-max", str(a.draft_max),
           "-c", "4096"]
    if draft:
        cmd += ["-md", draft, "-td", str(a.threads)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    out = p.stdout + p.stderr
    m = LLAMA_DECODE.search(out)
    if not m:
        raise RuntimeError(f"{tool}: no speed line\n{out[-2000:]}")
    acc = LLAMA_ACCEPT.search(out)
    dr = LLAMA_DRAFT.search(out)
    return (int(m.group(1)), float(m.group(2)), None,
            int(dr.group(1)) if dr else 0, int(acc.group(1)) if acc else 0)


def run_serve(a, text, code):
    """One streamed request to a running `kestrel serve`, with `prediction`
    unless `code` is None. Decode time: first streamed token to the last
    (the prompt's prefill, which the server may reuse from the previous
    request of the same prompt, is left out as `kestrel run`'s decode
    figure leaves it out)."""
    body = {
        "model": "m",
        "prompt": text,
        "max_tokens": a.n,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if code is not None:
        body["prediction"] = {"type": "content", "content": code}
    req = urllib.request.Request(
        f"http://127.0.0.1:{a.port}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    first = last = None
    parts, usage = [], None
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            for c in chunk.get("choices", []):
                if c.get("text"):
                    now = time.time()
                    first = first or now
                    last = now
                    parts.append(c["text"])
    det = usage.get("completion_tokens_details", {})
    acc = det.get("accepted_prediction_tokens", 0)
    rej = det.get("rejected_prediction_tokens", 0)
    n = usage["completion_tokens"]
    # The first token's time is the prefill's; the rest are decode steps.
    return n - 1, (last - first), "".join(parts), acc + rej, acc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kestrel", default="target/release/kestrel")
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", action="append", default=[])
    ap.add_argument("--gguf")
    ap.add_argument("--llama-bin")
    ap.add_argument("--llama-draft")
    ap.add_argument("--port", type=int, default=8089)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=512)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--limit", type=int, default=0, help="first N prompts only")
    ap.add_argument("--generate", action="store_true",
                    help="the code-generation prompts instead of the edits")
    a = ap.parse_args()
    ps = prompts(a.generate)
    if a.limit:
        ps = ps[: a.limit]
    modes = ["plain"] + a.mode
    if a.gguf and a.llama_bin:
        modes.append("llama-lookup")
        if a.llama_draft:
            modes.append("llama-speculative")
    speed = {m: [] for m in modes}
    rate = {m: [] for m in modes}
    for r in range(a.rounds):
        tot = {m: [0, 0.0, 0, 0] for m in modes}
        for name, task, code in ps:
            text = chat_text(task, code)
            refs = {}
            for m in modes:
                if m == "plain":
                    res = run_kestrel(a, text, [])
                elif m == "lookup":
                    res = run_kestrel(a, text, ["--lookup", "--draft-max", str(a.draft_max)])
                elif m.startswith("draft:"):
                    res = run_kestrel(a, text, ["--draft", m[6:], "--draft-max", str(a.draft_max)])
                elif m == "prediction":
                    res = run_serve(a, text, code)
                elif m == "serve-plain":
                    res = run_serve(a, text, None)
                elif m == "llama-lookup":
                    res = run_llama(a, text, "llama-lookup")
                elif m == "llama-speculative":
                    res = run_llama(a, text, "llama-speculative", a.llama_draft)
                else:
                    sys.exit(f"unknown mode {m}")
                n, s, ids, drafted, accepted = res
                # kestrel's runs must give the same tokens, the server's the
                # same text (serve-plain's is the reference for prediction).
                key = "serve" if m in ("prediction", "serve-plain") else "run"
                if ids is not None:
                    if key not in refs:
                        refs[key] = ids
                    elif ids != refs[key]:
                        sys.exit(f"{m} on {name}: the answer differs from plain decoding's")
                t = tot[m]
                t[0] += n
                t[1] += s
                t[2] += drafted
                t[3] += accepted
                print(json.dumps({"round": r, "prompt": name, "task": task[:30], "mode": m,
                                  "tokens": n, "seconds": s, "tok_s": n / s,
                                  "drafted": drafted, "accepted": accepted}),
                      file=sys.stderr, flush=True)
        for m in modes:
            n, s, d, acc = tot[m]
            speed[m].append(n / s)
            rate[m].append(acc / d if d else 0.0)
    base = statistics.median(speed["plain"])
    print(f"{'mode':<40} {'median tok/s':>12} {'x plain':>8} {'per-round x':>12} {'accept':>7}")
    for m in modes:
        med = statistics.median(speed[m])
        per = statistics.median(x / y for x, y in zip(speed[m], speed["plain"]))
        print(f"{m:<40} {med:12.2f} {med / base:8.2f} {per:12.2f} {statistics.median(rate[m]):7.2f}")
    print("rounds: " + "; ".join(
        m + " " + " ".join(f"{x:.2f}" for x in speed[m]) for m in modes))


if __name__ == "__main__":
    main()
