"""Writes a random-weight GGUF of Qwen3-30B-A3B's layer shape, for speed
comparisons at the real shape without the real weights (none are reachable
here): hidden 2048, 32 query / 4 KV heads of dim 128, 128 experts of FFN
768, top-8, llama.cpp's `qwen3moe` tensor names and metadata, F16 weights
(llama-quantize makes the other types from it). The vocabulary and
tokenizer are copied from another GGUF (Qwen2.5's: 151,936 tokens, as
Qwen3's), so the embedding and the lm_head have the real shape too.

    python3 bench/moe_gguf.py --layers 6 --tokenizer-from Q.gguf -o moe6-F16.gguf

Weights are N(0, 0.02) (norms 1): the router is then close to uniform, so
each token picks 8 of the 128 experts almost at random, which only the
speed measured here needs. Tensors are written one at a time (a few GB of
memory at most: one expert stack in f32)."""
import argparse

import gguf
import numpy as np

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 2048, 32, 4, 128
EXPERTS, USED, EXPERT_FFN = 128, 8, 768


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--tokenizer-from", required=True, help="a GGUF whose tokenizer to copy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    src = gguf.GGUFReader(a.tokenizer_from)
    tokens = src.fields["tokenizer.ggml.tokens"].contents()
    vocab = len(tokens)

    w = gguf.GGUFWriter(a.out, "qwen3moe")
    w.add_name(f"random Qwen3-30B-A3B shape, {a.layers} layers")
    w.add_context_length(40960)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(6144)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(USED)
    w.add_expert_feed_forward_length(EXPERT_FFN)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model(src.fields["tokenizer.ggml.model"].contents())
    w.add_tokenizer_pre(src.fields["tokenizer.ggml.pre"].contents())
    w.add_token_list(tokens)
    w.add_token_types(src.fields["tokenizer.ggml.token_type"].contents())
    w.add_token_merges(src.fields["tokenizer.ggml.merges"].contents())
    for key, add in [
        ("tokenizer.ggml.bos_token_id", w.add_bos_token_id),
        ("tokenizer.ggml.eos_token_id", w.add_eos_token_id),
        ("tokenizer.ggml.padding_token_id", w.add_pad_token_id),
        ("tokenizer.ggml.add_bos_token", w.add_add_bos_token),
        ("tokenizer.chat_template", w.add_chat_template),
    ]:
        if key in src.fields:
            add(src.fields[key].contents())

    # (name, numpy shape (outermost first: ggml's ne reversed), kind)
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    tensors = [("token_embd.weight", (vocab, HIDDEN), "w")]
    for l in range(a.layers):
        b = f"blk.{l}."
        tensors += [
            (b + "attn_norm.weight", (HIDDEN,), "norm"),
            (b + "attn_q.weight", (q, HIDDEN), "w"),
            (b + "attn_k.weight", (kv, HIDDEN), "w"),
            (b + "attn_v.weight", (kv, HIDDEN), "w"),
            (b + "attn_q_norm.weight", (HEAD_DIM,), "norm"),
            (b + "attn_k_norm.weight", (HEAD_DIM,), "norm"),
            (b + "attn_output.weight", (HIDDEN, q), "w"),
            (b + "ffn_norm.weight", (HIDDEN,), "norm"),
            (b + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), "router"),
            (b + "ffn_gate_exps.weight", (EXPERTS, EXPERT_FFN, HIDDEN), "w"),
            (b + "ffn_up_exps.weight", (EXPERTS, EXPERT_FFN, HIDDEN), "w"),
            (b + "ffn_down_exps.weight", (EXPERTS, HIDDEN, EXPERT_FFN), "w"),
        ]
    tensors += [("output_norm.weight", (HIDDEN,), "norm"), ("output.weight", (vocab, HIDDEN), "w")]

    def dtype(kind):
        return np.float16 if kind == "w" else np.float32

    for name, shape, kind in tensors:
        n = int(np.prod(shape)) * np.dtype(dtype(kind)).itemsize
        w.add_tensor_info(name, shape, np.dtype(dtype(kind)), n)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(a.seed)
    for name, shape, kind in tensors:
        if kind == "norm":
            x = np.ones(shape, np.float32)
        else:
            x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        w.write_tensor_data(x.astype(dtype(kind)))
        del x
    w.close()
    print(a.out)


if __name__ == "__main__":
    main()
