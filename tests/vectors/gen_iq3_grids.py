"""Prints the IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS and IQ2_S codebooks as the Rust tables of
kernels-asm/src/layouts/iq3xxs.rs, iq3s.rs, iq2xxs.rs, iq2xs.rs and iq2s.rs: entry i
grid point i packed in a u16 of 3-bit (IQ3) or 2-bit (IQ2) codes, one per
component, which layouts::GridCells expands (the GGUF format's grids, as gguf-py 0.19.0 decodes them from its `grid_hex`). Run
with gguf-py installed:
    python3 tests/vectors/gen_iq3_grids.py
"""
import numpy as np
from gguf import quants


def packed(cls, name):
    """A grid packed: component k's code (its index in the type's
    `grid_map`) at bits b*k..b*k+b of a u16, b = 2 for the three values of
    IQ2, 3 for the eight of IQ3 (layouts::GridCells expands them)."""
    cls.init_grid()
    grid = cls.grid.reshape(cls.grid_shape)
    code = {v: i for i, v in enumerate(cls.grid_map)}
    bits = 2 if len(cls.grid_map) == 3 else 3
    words = [sum(code[int(v)] << (bits * k) for k, v in enumerate(row)) for row in grid]
    assert max(words) < 1 << 16
    print(f"static {name}: [u16; {len(words)}] = [")
    for i in range(0, len(words), 12):
        print("    " + ", ".join(f"0x{w:04x}" for w in words[i:i + 12]) + ",")
    print("];")


packed(quants.IQ3_XXS, "IQ3XXS_PACKED")
packed(quants.IQ3_S, "IQ3S_PACKED")
packed(quants.IQ2_XXS, "IQ2XXS_PACKED")
packed(quants.IQ2_XS, "IQ2XS_PACKED")
packed(quants.IQ2_S, "IQ2S_PACKED")
