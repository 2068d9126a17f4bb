"""Writes a random-weight Hugging Face checkpoint of Qwen3.5-2B's text
model, for speed comparisons at the real shape without the real weights
(none are reachable here): its public config (hidden 2048, 24 layers, three
in four Gated DeltaNet with 16 key / 16 value heads of 128 and a kernel-4
convolution, the fourth gated attention with 8 query / 2 KV heads of 256
and a quarter of each head rotated, SwiGLU 6144, vocabulary 248,320, tied
embedding), `Qwen3_5ForCausalLM`, BF16 safetensors. llama.cpp's
`convert_hf_to_gguf.py` turns it into its `qwen35` GGUF (bench/prepare.sh,
model `q35-2b`); Kestrel converts that file.

    python3 bench/qwen35_checkpoint.py --tokenizer-from DIR -o OUT_DIR

The tokenizer files are copied from DIR (the Qwen3.5 fixture's tiny one:
llama.cpp pads the vocabulary to 248,320). Weights are N(0, 0.02); the
zero-centred norms 0 (a scale of 1), the DeltaNet output norm 1, `A_log`
log(1..16), `dt_bias` 0: values only the speed measured here needs.
Tensors are written one at a time (one tensor in f32 in memory at most).
Needs numpy only."""
import argparse
import json
import os
import shutil
import struct

import numpy as np

CONFIG = {
    "architectures": ["Qwen3_5ForCausalLM"],
    "model_type": "qwen3_5_text",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 24,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 16,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "full_attention_interval": 4,
    "vocab_size": 248320,
    "max_position_embeddings": 262144,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "attn_output_gate": True,
    "attention_bias": False,
    "hidden_act": "silu",
    "mtp_num_hidden_layers": 0,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10000000.0,
        "partial_rotary_factor": 0.25,
        "mrope_interleaved": True,
        "mrope_section": [11, 11, 10],
    },
    "dtype": "bfloat16",
}


def tensors(c):
    """(name, shape, kind) of every tensor, in file order."""
    h, ffn = c["hidden_size"], c["intermediate_size"]
    kd, vd = c["linear_key_head_dim"], c["linear_value_head_dim"]
    kh, vh = c["linear_num_key_heads"], c["linear_num_value_heads"]
    conv = 2 * kh * kd + vh * vd
    heads, kv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    out = [("model.embed_tokens.weight", (c["vocab_size"], h), "w"), ("model.norm.weight", (h,), "zero")]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (h,), "zero"), (p + "post_attention_layernorm.weight", (h,), "zero")]
        if (l + 1) % c["full_attention_interval"]:
            a = p + "linear_attn."
            out += [
                (a + "in_proj_qkv.weight", (conv, h), "w"),
                (a + "in_proj_z.weight", (vh * vd, h), "w"),
                (a + "in_proj_b.weight", (vh, h), "w"),
                (a + "in_proj_a.weight", (vh, h), "w"),
                (a + "conv1d.weight", (conv, 1, c["linear_conv_kernel_dim"]), "w"),
                (a + "A_log", (vh,), "a_log"),
                (a + "dt_bias", (vh,), "zero"),
                (a + "norm.weight", (vd,), "one"),
                (a + "out_proj.weight", (h, vh * vd), "w"),
            ]
        else:
            a = p + "self_attn."
            out += [
                (a + "q_proj.weight", (2 * heads * hd, h), "w"),
                (a + "k_proj.weight", (kv * hd, h), "w"),
                (a + "v_proj.weight", (kv * hd, h), "w"),
                (a + "o_proj.weight", (h, heads * hd), "w"),
                (a + "q_norm.weight", (hd,), "zero"),
                (a + "k_norm.weight", (hd,), "zero"),
            ]
        m = p + "mlp."
        out += [(m + "gate_proj.weight", (ffn, h), "w"), (m + "up_proj.weight", (ffn, h), "w"),
                (m + "down_proj.weight", (h, ffn), "w")]
    return out


def bf16(x):
    """float32 -> bfloat16 bits, round to nearest even."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer-from", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    specs = tensors(CONFIG)
    header, at = {}, 0
    for name, shape, _ in specs:
        n = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [at, at + n]}
        at += n
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path = os.path.join(a.out, "model.safetensors")
    with open(path + ".partial", "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for name, shape, kind in specs:
            if kind == "w":
                x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            elif kind == "a_log":
                x = np.log(np.linspace(1.0, 16.0, shape[0], dtype=np.float32))
            else:
                x = np.full(shape, 1.0 if kind == "one" else 0.0, dtype=np.float32)
            f.write(bf16(x).tobytes())
    os.replace(path + ".partial", path)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=1)
    for t in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer_from, t), a.out)
    print(f"{a.out}: {len(specs)} tensors, {at / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
