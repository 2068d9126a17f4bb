#!/usr/bin/env python3
"""Independent reference for the real model: Qwen2 forward in float64 numpy on
the GGUF's weights dequantized by gguf-py (not Kestrel's code), greedy
decoding of a chat prompt. Writes tests/fixtures/real_qwen25_coder_greedy.json
with the prompt ids, the greedy ids, and each step's top-1 minus top-2 logit
gap (steps with tiny gaps may legitimately differ between implementations).

Run: pip install gguf==0.19.0 numpy tokenizers==0.23.3
     python3 tests/real/qwen2_gguf_reference.py MODEL.gguf QWEN3_TOKENIZER_JSON [STEPS]
(The Qwen3 tokenizer.json has the same BPE and the same ids for the chat
tokens as Qwen2.5's; only 4 added tokens differ.)
"""
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
from tokenizers import Tokenizer

PROMPT = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
          "<|im_start|>user\nWrite a Python function that returns the factorial of n.<|im_end|>\n"
          "<|im_start|>assistant\n")


def main():
    gguf_path, tok_path = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    r = GGUFReader(gguf_path)

    def meta(key):
        f = r.fields[key]
        return f.parts[f.data[0]].tolist()[0] if len(f.data) == 1 else None

    H = meta("qwen2.embedding_length")
    L = meta("qwen2.block_count")
    NH = meta("qwen2.attention.head_count")
    NKV = meta("qwen2.attention.head_count_kv")
    theta = meta("qwen2.rope.freq_base")
    eps = meta("qwen2.attention.layer_norm_rms_epsilon")
    hd = H // NH
    W = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        W[t.name] = a.reshape([int(x) for x in reversed(t.shape.tolist())]) if a.ndim == 1 and len(t.shape) > 1 else a
    ids = Tokenizer.from_file(tok_path).encode(PROMPT, add_special_tokens=False).ids
    inv_freq = 1.0 / (theta ** (np.arange(0, hd, 2) / hd))

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(x, pos):  # x [heads, hd]
        ang = pos * inv_freq
        c, s = np.cos(np.concatenate([ang, ang])), np.sin(np.concatenate([ang, ang]))
        rot = np.concatenate([-x[:, hd // 2:], x[:, :hd // 2]], -1)
        return x * c + rot * s

    kc = [[] for _ in range(L)]
    vc = [[] for _ in range(L)]

    def step(tok, pos):
        x = W["token_embd.weight"][tok].copy()
        for l in range(L):
            p = f"blk.{l}."
            xb = rms(x, W[p + "attn_norm.weight"])
            q = W[p + "attn_q.weight"] @ xb + W[p + "attn_q.bias"]
            k = W[p + "attn_k.weight"] @ xb + W[p + "attn_k.bias"]
            v = W[p + "attn_v.weight"] @ xb + W[p + "attn_v.bias"]
            q = rope(q.reshape(NH, hd), pos)
            k = rope(k.reshape(NKV, hd), pos)
            kc[l].append(k)
            vc[l].append(v.reshape(NKV, hd))
            K, V = np.stack(kc[l]), np.stack(vc[l])  # [S, NKV, hd]
            out = np.zeros((NH, hd))
            for h in range(NH):
                g = h // (NH // NKV)
                s = K[:, g, :] @ q[h] / np.sqrt(hd)
                pr = np.exp(s - s.max())
                pr /= pr.sum()
                out[h] = pr @ V[:, g, :]
            x = x + W[p + "attn_output.weight"] @ out.reshape(-1)
            xb = rms(x, W[p + "ffn_norm.weight"])
            g_ = W[p + "ffn_gate.weight"] @ xb
            u = W[p + "ffn_up.weight"] @ xb
            x = x + W[p + "ffn_down.weight"] @ (g_ / (1 + np.exp(-g_)) * u)
        x = rms(x, W["output_norm.weight"])
        return W["output.weight"] @ x

    logits = None
    for i, t in enumerate(ids):
        logits = step(t, i)
    greedy, gaps = [], []
    for n in range(steps):
        top = np.argsort(-logits)[:2]
        greedy.append(int(top[0]))
        gaps.append(float(logits[top[0]] - logits[top[1]]))
        if n + 1 < steps:
            logits = step(int(top[0]), len(ids) + n)
    out = {
        "generator": "tests/real/qwen2_gguf_reference.py (numpy float64 on gguf-py dequantized weights)",
        "model_sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "prompt": PROMPT,
        "prompt_ids": ids,
        "greedy_ids": greedy,
        "top1_minus_top2": gaps,
        "greedy_text": Tokenizer.from_file(tok_path).decode(greedy, skip_special_tokens=False),
    }
    dst = Path(__file__).resolve().parents[1] / "fixtures" / "real_qwen25_coder_greedy.json"
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("greedy_text", "top1_minus_top2")}, indent=1))


if __name__ == "__main__":
    main()
