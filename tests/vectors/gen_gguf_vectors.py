#!/usr/bin/env python3
"""Generates the GGUF test data in tests/vectors/gguf/ with gguf-py
(gguf==0.19.0) and numpy. Used by tests/tests/gguf.rs.

1. Dequantization vectors, for every ggml type kestrel dequantizes:
     <type>.bin   the block bytes (N_VALUES weights' worth)
     <type>.f32   the expected little-endian f32 output
   * Types gguf-py can quantize (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0):
     the first half is gguf.quants.quantize() of deterministic data, the second
     half random block bytes.
   * K-quants (Q2_K..Q6_K): gguf-py only dequantizes them, so all blocks are
     random bytes.
   * Every f16 scale field in random blocks is made finite (an all-ones
     exponent loses its top bit). Random F16 values may be +-inf or quiet
     NaN, but no signalling NaN: numpy widens an f16 sNaN keeping it
     signalling, while ggml's GGML_FP16_TO_FP32 (F16C, ARM fcvt, or its
     software path) quiets it, as kestrel does.
   * IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS: random blocks from
     generators of their own (added later).
   Expected outputs are gguf.quants.dequantize(), except Q8_K, which gguf-py
   does not implement: it is computed here as ggml's dequantize_row_q8_K does,
   y = d * q in f32 (d an f32, q an i8).

2. Small GGUF files written with gguf.GGUFWriter (version 3):
     meta_all.gguf  metadata of every value type (incl. arrays of each type and
                    a string array) and one tensor of each supported ggml type
     align64.gguf   general.alignment = 64 and three tensors
     empty.gguf     metadata only, no tensors
   Tensor k's bytes are pattern(k, n): byte j = (j*31 + k*17 + 5) % 251, so the
   Rust test can rebuild them; the metadata values are repeated as constants
   in tests/tests/gguf.rs.

3. gguf_vectors.json: versions, shapes and the sha256 of every file.

Run: pip install gguf==0.19.0 numpy && python3 tests/vectors/gen_gguf_vectors.py
Deterministic: the same bytes on every run.
"""
import hashlib
import json
import os
from importlib.metadata import version as pkg_version

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V
from gguf.constants import GGML_QUANT_SIZES

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gguf")
os.makedirs(here, exist_ok=True)
rng = np.random.default_rng(20261130)
files = {}

N_VALUES = 2048  # per type

# Byte offsets of the f16 scale fields in each block type (made finite).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
QUANTIZABLE = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
K_QUANTS = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K]


def write(name, data: bytes):
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
    files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def deterministic_rows(n):
    """n values (a multiple of 256) of varied data, 256 per row."""
    i = np.arange(256, dtype=np.float32)
    rows = [
        0.1 + 2.0 * np.cos(i),                                   # ggml's test data
        rng.standard_normal(256) * 0.02,                          # weight-like
        np.concatenate([np.zeros(32), np.full(32, -3.0), i[:64] / 64,
                        rng.standard_normal(64) * 1e-6,           # f16-subnormal scales
                        rng.standard_normal(64) * 300.0]),
        np.where(np.arange(256) % 32 == 5, 100.0, rng.uniform(-1, 1, 256)),  # spikes
    ]
    x = np.concatenate(rows).astype(np.float32)
    assert len(x) >= n
    return x[:n]


def special_f32(n):
    """f32 values for the float types: specials, subnormals, extremes, noise."""
    s = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0,
                  1e-8, -6e-8, 3e-5, 1e38, -1e-40, 3.4028235e38, 1.1754944e-38],
                 dtype=np.float32)
    x = np.concatenate([s, (rng.standard_normal(n - len(s)) *
                            np.exp(rng.uniform(-20, 20, n - len(s))))]).astype(np.float32)
    return x


def random_blocks(qtype, n_blocks):
    bs, ts = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    if qtype == T.F16:
        h = b.reshape(-1).view(np.uint16).copy()
        snan = ((h & 0x7C00) == 0x7C00) & ((h & 0x03FF) != 0) & ((h & 0x0200) == 0)
        h[snan] |= 0x0200  # signalling -> quiet NaN (see the docstring)
        b = h.view(np.uint8).reshape(n_blocks, ts)
    for off in F16_FIELDS.get(qtype, []):
        h = b[:, off:off + 2].copy().view(np.uint16)
        h = np.where((h & 0x7C00) == 0x7C00, h & ~np.uint16(0x4000), h).astype(np.uint16)
        b[:, off:off + 2] = h.view(np.uint8)
    if qtype == T.Q8_K:
        d = (rng.standard_normal(n_blocks) * 0.01).astype("<f4")
        b[:, 0:4] = d.view(np.uint8).reshape(n_blocks, 4)
    return b


def dequant(qtype, blocks):
    if qtype == T.Q8_K:
        d = blocks[:, 0:4].copy().view("<f4")                    # (n, 1)
        q = blocks[:, 4:4 + 256].view(np.int8).astype(np.float32)
        return (d * q).astype(np.float32).reshape(-1)
    return gguf.quants.dequantize(blocks.reshape(-1), qtype).astype(np.float32).reshape(-1)


deq_types = QUANTIZABLE + K_QUANTS
for qtype in deq_types:
    bs, ts = GGML_QUANT_SIZES[qtype]
    parts = []
    if qtype in QUANTIZABLE:
        half = N_VALUES // 2
        x = special_f32(half) if qtype in (T.F32, T.F16, T.BF16) else deterministic_rows(half)
        with np.errstate(over="ignore"):  # f32 -> f16 overflow to inf is intended
            q = gguf.quants.quantize(x.reshape(-1, 256), qtype)
        parts.append(np.ascontiguousarray(q).view(np.uint8).reshape(-1, ts))
        parts.append(random_blocks(qtype, half // bs))
    else:
        parts.append(random_blocks(qtype, N_VALUES // bs))
    blocks = np.concatenate(parts)
    y = dequant(qtype, blocks)
    assert y.shape == (N_VALUES,), (qtype, y.shape)
    name = qtype.name.lower()
    write(f"{name}.bin", blocks.tobytes())
    write(f"{name}.f32", y.astype("<f4").tobytes())

# IQ4_NL (added 2026-12-04): random blocks from a generator of its own, so
# every vector above keeps its bytes.
saved = rng.bit_generator.state
rng = np.random.default_rng(20261204)
F16_FIELDS[T.IQ4_NL] = [0]
blocks = random_blocks(T.IQ4_NL, N_VALUES // 32)
write("iq4_nl.bin", blocks.tobytes())
write("iq4_nl.f32", dequant(T.IQ4_NL, blocks).astype("<f4").tobytes())
deq_types = deq_types + [T.IQ4_NL]
# IQ4_XS (added 2026-12-05): the same, from a generator of its own.
rng = np.random.default_rng(20261205)
F16_FIELDS[T.IQ4_XS] = [0]
blocks = random_blocks(T.IQ4_XS, N_VALUES // 256)
write("iq4_xs.bin", blocks.tobytes())
write("iq4_xs.f32", dequant(T.IQ4_XS, blocks).astype("<f4").tobytes())
deq_types = deq_types + [T.IQ4_XS]
# IQ3_XXS and IQ3_S (added 2026-12-05, later): the same, a generator each.
for seed, qtype, name in [(202612051, T.IQ3_XXS, "iq3_xxs"), (202612052, T.IQ3_S, "iq3_s")]:
    rng = np.random.default_rng(seed)
    F16_FIELDS[qtype] = [0]
    blocks = random_blocks(qtype, N_VALUES // 256)
    write(f"{name}.bin", blocks.tobytes())
    write(f"{name}.f32", dequant(qtype, blocks).astype("<f4").tobytes())
    deq_types = deq_types + [qtype]
# IQ2_XXS (added 2026-12-06): the same, a generator of its own.
rng = np.random.default_rng(202612061)
F16_FIELDS[T.IQ2_XXS] = [0]
blocks = random_blocks(T.IQ2_XXS, N_VALUES // 256)
write("iq2_xxs.bin", blocks.tobytes())
write("iq2_xxs.f32", dequant(T.IQ2_XXS, blocks).astype("<f4").tobytes())
deq_types = deq_types + [T.IQ2_XXS]
# IQ2_XS (added 2026-12-06, later): the same, a generator of its own.
rng = np.random.default_rng(202612062)
F16_FIELDS[T.IQ2_XS] = [0]
blocks = random_blocks(T.IQ2_XS, N_VALUES // 256)
write("iq2_xs.bin", blocks.tobytes())
write("iq2_xs.f32", dequant(T.IQ2_XS, blocks).astype("<f4").tobytes())
deq_types = deq_types + [T.IQ2_XS]
# IQ2_S (added 2026-12-06, later still): the same, a generator of its own.
rng = np.random.default_rng(202612063)
F16_FIELDS[T.IQ2_S] = [0]
blocks = random_blocks(T.IQ2_S, N_VALUES // 256)
write("iq2_s.bin", blocks.tobytes())
write("iq2_s.f32", dequant(T.IQ2_S, blocks).astype("<f4").tobytes())
deq_types = deq_types + [T.IQ2_S]
rng = np.random.default_rng()
rng.bit_generator.state = saved


# ---- GGUF files ----------------------------------------------------------

def pattern(k, n):
    j = np.arange(n, dtype=np.int64)
    return ((j * 31 + k * 17 + 5) % 251).astype(np.uint8)


# (name, type, ne) with ne[0] fastest-varying, as ggml.
TENSORS = [
    ("t.f32", T.F32, [7]),
    ("t.f16", T.F16, [8, 2, 2]),
    ("t.q4_0", T.Q4_0, [64, 2]),
    ("t.q4_1", T.Q4_1, [32, 3]),
    ("t.q5_0", T.Q5_0, [32, 1, 2]),
    ("t.q5_1", T.Q5_1, [96]),
    ("t.q8_0", T.Q8_0, [64, 3]),
    ("t.q8_1", T.Q8_1, [32, 2]),
    ("t.q2_k", T.Q2_K, [256]),
    ("t.q3_k", T.Q3_K, [256, 2]),
    ("t.q4_k", T.Q4_K, [512, 1]),
    ("t.q5_k", T.Q5_K, [256, 1, 1, 2]),
    ("t.q6_k", T.Q6_K, [256, 2]),
    ("t.q8_k", T.Q8_K, [256]),
    ("t.bf16", T.BF16, [6, 5]),
]


def type_size(qtype):
    # gguf-py 0.19.0 lists Q8_1 as 40 bytes (4 + 4 + 32, the old layout with two
    # f32); ggml's block_q8_1 is two f16 and 32 i8, 36 bytes, which is what
    # llama.cpp and kestrel use.
    return 36 if qtype == T.Q8_1 else GGML_QUANT_SIZES[qtype][1]


def add_tensor(w, k, name, qtype, ne):
    bs, ts = GGML_QUANT_SIZES[qtype][0], type_size(qtype)
    rows = int(np.prod(ne[1:])) if len(ne) > 1 else 1
    row_bytes = ne[0] // bs * ts
    data = pattern(k, rows * row_bytes)
    shape = list(reversed(ne))  # numpy order: slowest first
    if qtype == T.F32:
        w.add_tensor(name, data.view(np.float32).reshape(shape))
    elif qtype == T.F16:
        w.add_tensor(name, data.view(np.float16).reshape(shape))
    elif qtype == T.Q8_1:
        # Not uint8, so the writer takes raw_shape as given instead of
        # converting it with its 40-byte Q8_1 size.
        w.add_tensor(name, data.view(np.int8), raw_shape=shape, raw_dtype=qtype)
    else:
        byte_shape = shape[:-1] + [row_bytes]
        w.add_tensor(name, data.reshape(byte_shape), raw_dtype=qtype)


def finish(w, name):
    path = os.path.join(here, name)
    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    write(name, data)


w = gguf.GGUFWriter(None, "kestrel-test")
kv = [
    ("t.u8", 200, V.UINT8), ("t.i8", -100, V.INT8),
    ("t.u16", 60000, V.UINT16), ("t.i16", -30000, V.INT16),
    ("t.u32", 4000000000, V.UINT32), ("t.i32", -2000000000, V.INT32),
    ("t.u64", 2**63 + 5, V.UINT64), ("t.i64", -(2**62) - 3, V.INT64),
    ("t.f32", 0.1, V.FLOAT32), ("t.f64", -2.5e-300, V.FLOAT64),
    ("t.true", True, V.BOOL), ("t.false", False, V.BOOL),
    ("t.str", "héllo wörld ✓", V.STRING), ("t.empty_str", "", V.STRING),
    ("t.small", 7, V.UINT8), ("t.neg", -1, V.INT32),
]
for key, val, vt in kv:
    w.add_key_value(key, val, vt)
arrays = [
    ("t.arr.u8", [0, 1, 255], V.UINT8), ("t.arr.i8", [-128, 0, 127], V.INT8),
    ("t.arr.u16", [0, 65535], V.UINT16), ("t.arr.i16", [-32768, 32767], V.INT16),
    ("t.arr.u32", [0, 4294967295], V.UINT32),
    ("t.arr.i32", [-2147483648, 2147483647, 0], V.INT32),
    ("t.arr.u64", [0, 2**64 - 1], V.UINT64), ("t.arr.i64", [-(2**63), 2**63 - 1], V.INT64),
    ("t.arr.f32", [0.5, -1.25, 1e30], V.FLOAT32), ("t.arr.f64", [0.1, -1e300], V.FLOAT64),
    ("t.arr.bool", [True, False, True], V.BOOL),
    ("t.arr.str", ["a", "", "ünï ✓", "tab\tnl\n"], V.STRING),
]
for key, val, sub in arrays:
    w.add_key_value(key, val, V.ARRAY, sub_type=sub)
for k, (name, qtype, ne) in enumerate(TENSORS):
    add_tensor(w, k, name, qtype, ne)
finish(w, "meta_all.gguf")

w = gguf.GGUFWriter(None, "kestrel-align")
w.add_custom_alignment(64)
for k, (name, qtype, ne) in enumerate([("a.f32", T.F32, [5]), ("a.q8_0", T.Q8_0, [32]),
                                       ("a.f16", T.F16, [3])]):
    add_tensor(w, k, name, qtype, ne)
finish(w, "align64.gguf")

w = gguf.GGUFWriter(None, "kestrel-empty")
w.add_uint32("e.count", 0)
finish(w, "empty.gguf")

meta = {
    "generator": "tests/vectors/gen_gguf_vectors.py",
    "gguf_version": pkg_version("gguf"),
    "numpy_version": np.__version__,
    "values_per_type": N_VALUES,
    "dequant_types": [t.name for t in deq_types],
    "tensors": [[n, t.name, ne] for n, t, ne in TENSORS],
    "files": files,
}
with open(os.path.join(here, "gguf_vectors.json"), "w") as f:
    json.dump(meta, f, indent=2, sort_keys=True)
    f.write("\n")
print(sum(v["bytes"] for v in files.values()), "bytes in", len(files), "files")
