//! GEMV and GEMM of Q5_Kx4 weights (GGUF Q5_K, 4 rows interleaved) with
//! Q8_K activations: the Q5_Kx4 kernels (`q4k.rs`) with each extracted
//! nibble given its fifth bit from the `qh` chunk of the same 4 rows x 4
//! positions (`shl`/`ushr` moves bit `j` to bit 4, `bit` inserts it under
//! the mask 0x10); quants 0..31 are valid `sdot` operands (docs/kernels.md,
//! "Q5_Kx4").

use super::ktile::{
    gemv_q5k_chunk, gemv_q5k_half, gemv_q5k_quarter, gemv_scale_sums, k_entry_points, k_gemm,
    k_gemm_tile, k_gemv, nibble_chunk, q5k_chunk, q5k_fifth_bits, q5k_nibbles, quarter_scales,
    row_dot, row_end, rows_dot, rows_end, GemvFn, GenericGemm, GenericGemv, KLayout, TileFn,
};
use super::Dotprod;
use crate::generic;
use crate::layout::{Q5KX4_BLOCK_BYTES, QK_K};
use crate::shape::ShapeError;
use core::arch::asm;

/// Q5_Kx4 for the K-quant driver (`ktile.rs`).
struct Q5K;

impl KLayout for Q5K {
    const BLOCK_BYTES: usize = Q5KX4_BLOCK_BYTES;
    const GEMV_GROUPS: GemvFn = gemv_q5kx4_groups;
    const TILES: [TileFn; 3] = [gemm_q5kx4_tile2, gemm_q5kx4_tile3, gemm_q5kx4_tile4];
    const GENERIC_GEMV: GenericGemv = generic::gemv_q5_kx4_q8_k;
    const GENERIC_GEMM: GenericGemm = generic::gemm_q5_kx4_q8_k;
}

k_entry_points!(Q5K, gemv_q5_kx4_q8_k, gemm_q5_kx4_q8_k);

/// The GEMV asm loop: `groups` row groups, each `nb` super-blocks.
///
/// Per super-block: the four `d`/`dmin` (one `ld1 .8h`), the 48 scale bytes
/// (rows as 32-bit lanes, sub-blocks as bytes) unpacked to scales and mins
/// with `and`/`ushr`/`sli`; the mins dotted with the 8 activation sums
/// (`smull`/`smlal` on halfwords, `addp`); per 64-weight half 8 nibble
/// chunks, `and 0x0F` / `ushr #4` and 16 `sdot` by lane into two sums (the
/// half's two sub-blocks, 4 rows each), `mla` by the sub-block's scale
/// (byte `k` of each lane: `ushr`/`and`); then `acc + (d * d_a) * sumi` and
/// `- (dmin * d_a) * summ`, separate `fmul`, `fadd`, `fsub`.
///
/// # Safety
/// `w` must point to `groups * nb * 704` readable bytes, `qs` to `nb * 256`,
/// `d` to `nb` floats, `s` to `nb * 8` i16, `out` to `groups * 4` writable
/// floats, `nb >= 1`, `groups >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
unsafe fn gemv_q5kx4_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
    sums: *const i16,
    nb: usize,
    out: *mut f32,
    groups: usize,
) {
    // SAFETY: per the function contract, every load stays inside `w`, `qs`,
    // `d`, `sums` and every store inside `out`: the inner loop reads 704
    // bytes of `w`, 256 bytes of `qs`, 16 bytes of `sums` and 4 bytes of `d`
    // per super-block, for nb super-blocks; the outer loop stores 16 bytes
    // of `out` per group and restarts the activation pointers. Only the
    // listed registers are written; no stack is used.
    unsafe {
        asm!(
            "movi v31.16b, #0x0f",
            "movi v30.16b, #0x10",
            "movi v29.4s, #0xff",
            "2:",
            "movi v20.16b, #0",
            "mov x9, {qs}",
            "mov x10, {d}",
            "mov x11, {nb}",
            "mov x12, {sums}",
            "3:",
            "ld1 {{v0.8h}}, [{w}], #16",
            "ld1 {{v1.16b, v2.16b, v3.16b}}, [{w}], #48",
            "mov x13, {w}",
            "add {w}, {w}, #128",
            "ld1 {{v21.8h}}, [x12], #16",
            "ld1r {{v7.4s}}, [x10], #4",
            "movi v28.16b, #0x3f",
            "and v16.16b, v2.16b, v28.16b",
            "ushr v17.16b, v3.16b, #4",
            "ushr v18.16b, v2.16b, #6",
            "sli v17.16b, v18.16b, #4",
            "and v2.16b, v3.16b, v31.16b",
            "ushr v18.16b, v1.16b, #6",
            "sli v2.16b, v18.16b, #4",
            "and v1.16b, v1.16b, v28.16b",
            "dup v22.2d, v21.d[0]",
            "dup v23.2d, v21.d[1]",
            "uxtl v18.8h, v16.8b",
            "uxtl2 v19.8h, v16.16b",
            "uxtl v16.8h, v17.8b",
            "uxtl2 v17.8h, v17.16b",
            "smull v3.4s, v18.4h, v22.4h",
            "smlal v3.4s, v16.4h, v23.4h",
            "smull2 v4.4s, v18.8h, v22.8h",
            "smlal2 v4.4s, v16.8h, v23.8h",
            "smull v5.4s, v19.4h, v22.4h",
            "smlal v5.4s, v17.4h, v23.4h",
            "smull2 v6.4s, v19.8h, v22.8h",
            "smlal2 v6.4s, v17.8h, v23.8h",
            "addp v3.4s, v3.4s, v4.4s",
            "addp v5.4s, v5.4s, v6.4s",
            "addp v3.4s, v3.4s, v5.4s",
            "movi v4.16b, #0",
            gemv_q5k_quarter!(0, low, "v1"),
            gemv_q5k_quarter!(1, high, "v1"),
            gemv_q5k_quarter!(2, low, "v2"),
            gemv_q5k_quarter!(3, high, "v2"),
            "fcvtl v16.4s, v0.4h",
            "fcvtl2 v17.4s, v0.8h",
            "fmul v16.4s, v16.4s, v7.4s",
            "fmul v17.4s, v17.4s, v7.4s",
            "scvtf v18.4s, v4.4s",
            "scvtf v19.4s, v3.4s",
            "fmul v18.4s, v16.4s, v18.4s",
            "fmul v19.4s, v17.4s, v19.4s",
            "fadd v20.4s, v20.4s, v18.4s",
            "fsub v20.4s, v20.4s, v19.4s",
            "subs x11, x11, #1",
            "b.ne 3b",
            "st1 {{v20.4s}}, [{out}], #16",
            "subs {groups}, {groups}, #1",
            "b.ne 2b",
            w = inout(reg) w => _,
            out = inout(reg) out => _,
            groups = inout(reg) groups => _,
            qs = in(reg) qs,
            d = in(reg) d,
            sums = in(reg) sums,
            nb = in(reg) nb,
            out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
            out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
            out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v25") _, out("v26") _, out("v27") _, out("v28") _,
            out("v29") _, out("v30") _, out("v31") _,
            options(nostack),
        );
    }
}

k_gemm_tile! {
    fn gemm_q5kx4_tile2, rows "2", block "704",
    setup "add x14, {w}, #64\n", advance "192", nibbles q5k_nibbles,
    sums ["v2" @ "0", "v4" @ "16"],
    clobber [out("x14") _,]
}

k_gemm_tile! {
    fn gemm_q5kx4_tile3, rows "3", block "704",
    setup "add x14, {w}, #64\n", advance "192", nibbles q5k_nibbles,
    sums ["v2" @ "0", "v4" @ "16", "v28" @ "32"],
    clobber [out("x14") _,]
}

k_gemm_tile! {
    fn gemm_q5kx4_tile4, rows "4", block "704",
    setup "add x14, {w}, #64\n", advance "192", nibbles q5k_nibbles,
    sums ["v2" @ "0", "v4" @ "16", "v28" @ "32", "v30" @ "48"],
    clobber [out("x14") _,]
}
