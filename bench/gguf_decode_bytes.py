"""Bytes of weights llama.cpp reads per decoded token from a GGUF file:
every tensor but the token embedding, plus one embedding row (the whole
embedding instead when the file has no `output.weight`: the tied lm_head
reads it every token), and of each expert stack (`*_exps`) the
`expert_used_count` chosen experts' share
(what `kestrel bench` reports as decode_bytes for a VQF file).
    python3 bench/gguf_decode_bytes.py FILE.gguf"""
import struct
import sys

# ggml type -> (block elements, block bytes)
SIZES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50),
         20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 29: (256, 56),
         30: (1, 2)}


def main(path):
    f = open(path, "rb")
    rd = lambda n: f.read(n)
    u32 = lambda: struct.unpack("<I", rd(4))[0]
    u64 = lambda: struct.unpack("<Q", rd(8))[0]
    assert rd(4) == b"GGUF", "not a GGUF file"
    u32()
    n_tensors, n_kv = u64(), u64()

    def string():
        return rd(u64()).decode()

    def value(t):
        fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        if t in fixed:
            b = rd(fixed[t])
            return int.from_bytes(b, "little") if t in (4, 10) else None
        elif t == 8:
            string()
        elif t == 9:
            et, n = u32(), u64()
            for _ in range(n):
                value(et)
        else:
            raise ValueError(f"metadata type {t}")

    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key.rsplit(".", 1)[-1]] = value(u32())
    experts, used = meta.get("expert_count"), meta.get("expert_used_count")
    total, embd, row, tied = 0, 0, 0, True
    for _ in range(n_tensors):
        name = string()
        dims = [u64() for _ in range(u32())]
        t = u32()
        u64()
        per, size = SIZES[t]
        n = 1
        for d in dims:
            n *= d
        if name == "output.weight":
            tied = False
        if name == "token_embd.weight":
            row = dims[0] // per * size  # one row
            total += row
            embd = n // per * size
        elif "_exps." in name and experts and used:
            total += n // per * size // experts * used
        else:
            total += n // per * size
    print(total - row + embd if tied else total)


main(sys.argv[1])
