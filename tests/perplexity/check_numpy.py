"""`kestrel perplexity` against numpy: the same quantities computed from the
logits `kestrel logits` writes for each chunk (llama-perplexity's protocol:
chunks of CTX tokens, the second half scored).

usage: check_numpy.py KESTREL BASE.vqf OTHER.vqf TEXT CTX CHUNKS TMPDIR [FLAG...]
FLAGs (e.g. `--prefill-q8 false`) go to every `logits` and `perplexity` run. Runs `kestrel perplexity` on BASE (--kl-base) and OTHER (--kl), parses what
it prints, and fails unless every figure equals numpy's to its printed
precision."""
import re
import subprocess
import sys

import numpy as np

kestrel, base, other, text, ctx, chunks, tmp = sys.argv[1:8]
flags = sys.argv[8:]
ctx, chunks = int(ctx), int(chunks)


def run(*args):
    return subprocess.run([kestrel, *args], check=True, capture_output=True, text=True).stdout


ids_text = run("tokenize", base, open(text, encoding="utf-8").read())
ids = [int(x) for x in ids_text.strip().strip("[]").split(",")]
assert len(ids) >= chunks * ctx, (len(ids), chunks * ctx)


def log_probs(model):
    """(positions, vocab) float64 log-softmax of the scored rows, and the next tokens."""
    rows, nexts = [], []
    for c in range(chunks):
        chunk = ids[c * ctx:(c + 1) * ctx]
        out = f"{tmp}/logits.bin"
        run("logits", model, "--tokens", ",".join(map(str, chunk)), "--batch", "128",
            "--ctx", str(ctx), "-t", "2", "--out", out, *flags)
        logits = np.fromfile(out, dtype="<f4").astype(np.float64).reshape(ctx, -1)
        for j in range(ctx // 2, ctx - 1):
            row = logits[j]
            m = row.max()
            rows.append(row - m - np.log(np.exp(row - m).sum()))
            nexts.append(chunk[j + 1])
    return np.array(rows), np.array(nexts)


def ppl_and_err(lp, nexts):
    nll = -lp[np.arange(len(nexts)), nexts]
    mean = nll.mean()
    err = np.sqrt(max(0.0, (nll * nll).mean() - mean * mean) / (len(nll) - 1))
    return np.exp(mean), np.exp(mean) * err


common = ["-f", text, "--ctx", str(ctx), "--chunks", str(chunks), "-t", "2", *flags]
out_base = run("perplexity", base, *common, "--kl-base", f"{tmp}/base.bin")
out_other = run("perplexity", other, *common, "--kl", f"{tmp}/base.bin")

lb, nexts = log_probs(base)
lo, _ = log_probs(other)
lb32 = lb.astype(np.float32).astype(np.float64)  # the base file holds f32
expect = {}
expect["base_ppl"], expect["base_err"] = ppl_and_err(lb, nexts)
expect["ppl"], expect["err"] = ppl_and_err(lo, nexts)
kl = np.maximum((np.exp(lb32) * (lb32 - lo)).sum(axis=1), 0.0)
expect["kl"] = kl.mean()
expect["kl_err"] = np.sqrt(max(0.0, (kl * kl).mean() - kl.mean() ** 2) / (len(kl) - 1))
expect["p99"] = np.sort(kl)[int(round((len(kl) - 1) * 0.99))]
top = lb32.argmax(axis=1)
expect["top1"] = 100.0 * (lo.argmax(axis=1) == top).mean()
idx = np.arange(len(top))
expect["rms"] = np.sqrt(((np.exp(lo[idx, top]) - np.exp(lb32[idx, top])) ** 2).mean())
base_ppl_file = np.exp((-lb32[idx, nexts]).mean())
expect["ratio"] = expect["ppl"] / base_ppl_file

num = r"([0-9.]+)"
got = {}
got["base_ppl"], got["base_err"] = map(float, re.search(rf"PPL = {num} \+/- {num}", out_base).groups())
got["ppl"], got["err"] = map(float, re.search(rf"PPL = {num} \+/- {num}", out_other).groups())
m = re.search(rf"KL mean = {num} \+/- {num}, p99 = {num}; top-1 agreement = {num}%; "
              rf"RMS dp\(top\) = {num}; PPL ratio = {num}", out_other)
for k, v in zip(["kl", "kl_err", "p99", "top1", "rms", "ratio"], m.groups()):
    got[k] = float(v)

bad = []
for k, v in got.items():
    # the command prints 4-6 decimals: equal to that precision (and 1e-6 relative)
    tol = max(0.6 * 10 ** -6, 1e-6 * abs(expect[k]))
    if k in ("base_ppl", "ppl", "ratio", "rms"):
        tol = max(tol, 0.6e-4)
    if k in ("base_err", "err"):
        tol = max(tol, 0.6e-5)
    if k == "top1":
        tol = 0.006
    if abs(v - expect[k]) > tol:
        bad.append(f"{k}: kestrel {v}, numpy {expect[k]}")
    print(f"{k:>8}: kestrel {v:<14} numpy {expect[k]:.6f}")
if bad:
    sys.exit("perplexity differs from numpy: " + "; ".join(bad))
print(f"perplexity {' '.join(flags)}: {len(got)} figures equal numpy's ({len(kl)} positions, {chunks} chunks of {ctx})")
