#!/usr/bin/env python3
"""Generates the Q8_0 / Q4_0 quantization test vectors with gguf-py's numpy
ports of ggml's reference quantizers (gguf==0.19.0, `gguf.quants`).

Writes, next to this script:
  quant_input.f32   the inputs: ROWS x COLS little-endian f32
  q8_0.bin          gguf.quants.quantize(input, Q8_0): ROWS x (COLS/32*34) bytes
  q4_0.bin          gguf.quants.quantize(input, Q4_0): ROWS x (COLS/32*18) bytes
  q8_0_deq.f32      gguf.quants.dequantize(q8_0.bin) as f32
  q4_0_deq.f32      gguf.quants.dequantize(q4_0.bin) as f32
  vectors.json      shapes and the sha256 of each file

Run: pip install gguf==0.19.0 numpy && python3 tests/vectors/gen_quant_vectors.py
Deterministic: the same files on every run.
"""
import hashlib
import json
import os

import numpy as np
from gguf import quants
from gguf.constants import GGMLQuantizationType as T

COLS = 256
here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261129)
rows = []
i = np.arange(COLS, dtype=np.float32)
# ggml test-quantize-fns data: 0.1 + 2 cos(i + offset)
for off in (0.0, 1.0, 7.5):
    rows.append((0.1 + 2.0 * np.cos(i + off)).astype(np.float32))
# an i/n ramp, and its negation
rows.append((i / COLS).astype(np.float32))
rows.append((-i / COLS).astype(np.float32))
# Gaussian at several scales (tiny ones give f16-subnormal or zero scales)
for scale in (1.0, 0.02, 1e-3, 1e-6, 1e-9, 37.0, 3000.0):
    rows.append((rng.standard_normal(COLS) * scale).astype(np.float32))
# all zeros, all equal (positive and negative), one spike per block
rows.append(np.zeros(COLS, np.float32))
rows.append(np.full(COLS, 0.75, np.float32))
rows.append(np.full(COLS, -3.0, np.float32))
spike = np.zeros(COLS, np.float32)
spike[5::32] = 127.0
spike[9::32] = -128.0
rows.append(spike)
# integers -128..127: Q8_0 scale 128/127, exercises saturation-free extremes
rows.append(np.resize(np.arange(-128, 128, dtype=np.float32), COLS))
# magnitude ties: +m and -m in the same block (Q4_0 takes the first)
ties = rng.standard_normal(COLS).astype(np.float32) * 0.1
ties[0::32] = -2.0
ties[3::32] = 2.0
rows.append(ties)
# values landing exactly on x/d = k + 0.5 for Q8_0 (127 * (k + 0.5) / 127.5 style)
half = np.resize((np.arange(-64, 64, dtype=np.float32) + 0.5), COLS)
half[31::32] = 127.0
rows.append(half.astype(np.float32))
# uniform in [-1, 1)
for _ in range(6):
    rows.append(rng.uniform(-1, 1, COLS).astype(np.float32))

x = np.stack(rows).astype(np.float32)
files = {}


def write(name, arr):
    data = np.ascontiguousarray(arr).tobytes()
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
    files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


write("quant_input.f32", x.astype("<f4"))
q8 = quants.quantize(x, T.Q8_0)
q4 = quants.quantize(x, T.Q4_0)
write("q8_0.bin", q8)
write("q4_0.bin", q4)
write("q8_0_deq.f32", quants.dequantize(q8, T.Q8_0).astype("<f4"))
write("q4_0_deq.f32", quants.dequantize(q4, T.Q4_0).astype("<f4"))
from importlib.metadata import version as pkg_version

meta = {
    "generator": "tests/vectors/gen_quant_vectors.py",
    "gguf_version": pkg_version("gguf"),
    "numpy_version": np.__version__,
    "rows": int(x.shape[0]),
    "cols": COLS,
    "files": files,
}
with open(os.path.join(here, "vectors.json"), "w") as f:
    json.dump(meta, f, indent=2, sort_keys=True)
    f.write("\n")
print(json.dumps(meta, indent=2))
