"""Prints the IQ3_XXS, IQ3_S, IQ2_XXS and IQ2_XS codebooks as the Rust tables of
kernels-asm/src/layouts/iq3xxs.rs, iq3s.rs, iq2xxs.rs and iq2xs.rs: entry i a u32
(IQ2_XXS, IQ2_XS: a u16 of 2-bit codes, `packed` below) whose byte k is
component k of grid point i (the GGUF format's grids, as gguf-py 0.19.0 decodes them from its `grid_hex`). Run
with gguf-py installed:
    python3 tests/vectors/gen_iq3_grids.py
"""
import numpy as np
from gguf import quants


def table(cls, name):
    cls.init_grid()
    grid = cls.grid.reshape(cls.grid_shape).astype(np.uint64)
    words = [int(sum(int(v) << (8 * k) for k, v in enumerate(row))) for row in grid]
    width, per_line = (8, 8) if cls.grid_shape[1] == 4 else (16, 4)
    print(f"pub static {name}: [u{4 * width}; {len(words)}] = [")
    for i in range(0, len(words), per_line):
        print("    " + ", ".join(f"0x{w:0{width}x}" for w in words[i:i + per_line]) + ",")
    print("];")


def packed(cls, name):
    """The 2-bit grids packed: component k's code (8 -> 0, 25 -> 1, 43 -> 2)
    at bits 2k..2k+2 of a u16 (layouts::GridCells expands them)."""
    cls.init_grid()
    grid = cls.grid.reshape(cls.grid_shape)
    code = {8: 0, 25: 1, 43: 2}
    words = [sum(code[int(v)] << (2 * k) for k, v in enumerate(row)) for row in grid]
    print(f"static {name}: [u16; {len(words)}] = [")
    for i in range(0, len(words), 12):
        print("    " + ", ".join(f"0x{w:04x}" for w in words[i:i + 12]) + ",")
    print("];")


table(quants.IQ3_XXS, "IQ3XXS_GRID")
table(quants.IQ3_S, "IQ3S_GRID")
packed(quants.IQ2_XXS, "IQ2XXS_PACKED")
packed(quants.IQ2_XS, "IQ2XS_PACKED")
