"""Prints the IQ3_XXS and IQ3_S codebooks as the Rust tables of
kernels-asm/src/layouts/iq3xxs.rs and iq3s.rs: entry i a u32 whose byte k is
component k of grid point i (the GGUF format's grids, as gguf-py 0.19.0
decodes them from its `grid_hex`). Run with gguf-py installed:
    python3 tests/vectors/gen_iq3_grids.py
"""
import numpy as np
from gguf import quants


def table(cls, name):
    cls.init_grid()
    grid = cls.grid.reshape(cls.grid_shape).astype(np.uint32)
    words = [int(sum(int(v) << (8 * k) for k, v in enumerate(row))) for row in grid]
    print(f"pub static {name}: [u32; {len(words)}] = [")
    for i in range(0, len(words), 8):
        print("    " + ", ".join(f"0x{w:08x}" for w in words[i:i + 8]) + ",")
    print("];")


table(quants.IQ3_XXS, "IQ3XXS_GRID")
table(quants.IQ3_S, "IQ3S_GRID")
