//! The GEMV loops of Q4_0x4 (and, by its nibble decoding, IQ4_NLx4 in
//! `crate::layouts::iq4nl`) and Q8_0x8 weights with one Q8_0
//! activation row: `sdot` over whole row groups (the driver in `gemm.rs`
//! runs them, also as the one-row step of the GEMM).

use core::arch::asm;

/// The nibble decoding of a 4-row nibble layout (Q4_0x4 here), one
/// 16-byte chunk `$src` into the `i8` weights of its low nibbles (`$lo`)
/// and high nibbles (`$hi`). Q4_0x4 (XOR 0x88, `v31` = 0xf0): `shl #4` and
/// `and 0xf0` give `16 (q - 8)`, which `scvtf #4` divides back exactly.
#[rustfmt::skip]
macro_rules! q4_0_nibbles {
    (setup) => { "movi v31.16b, #0xf0" };
    (fbits) => { ", #4" };
    ($lo:literal, $hi:literal, $src:literal) => { concat!(
        "shl ", $lo, ".16b, ", $src, ".16b, #4\n",
        "and ", $hi, ".16b, ", $src, ".16b, v31.16b",
    ) };
}
pub(crate) use q4_0_nibbles;

/// `$name`: the GEMV asm loop of a 4-row nibble layout whose nibbles
/// `$nib!` decodes (its extra operands `$extra`): `groups` row groups, each
/// `nb` super-blocks.
macro_rules! nibble_gemv_loop {
    ($name:ident, $nib:ident, [$($extra:tt)*]) => {
        /// The asm loop: `groups` row groups, each `nb` super-blocks
        /// (`nibble_gemv_loop!`).
        ///
        /// # Safety
        /// `w` must point to `groups * nb * 72` readable bytes, `qs` to `nb *
        /// 32`, `d` to `nb` floats, `out` to `groups * 4` writable floats,
        /// `nb >= 1`, and the CPU must implement dotprod.
        #[inline(never)]
        #[target_feature(enable = "neon,dotprod")]
        pub(crate) unsafe fn $name(
            w: *const u8,
            qs: *const i8,
            d: *const f32,
            _sums: *const i16,
            nb: usize,
            out: *mut f32,
            groups: usize,
        ) {
            // SAFETY: per the function contract, every load stays inside `w`,
            // `qs`, `d` (and the 16-byte table `$extra` names) and every store
            // inside `out`: the inner loop reads 72 bytes of `w`, 32 bytes of
            // `qs` and 4 bytes of `d` per block, for nb blocks; the outer loop
            // stores 16 bytes of `out` per group. Only the listed registers
            // are written; no stack is used.
            unsafe {
                core::arch::asm!(
                    $nib!(setup),
                    "2:",
                    "movi v16.16b, #0",          // acc16 (4 rows) = 0
                    "mov x9, {qs}",
                    "mov x10, {d}",
                    "mov x11, {nb}",
                    "3:",
                    "ld1 {{v0.4h}}, [{w}], #8",                         // 4 row scales (f16)
                    "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // 4 chunks
                    "ld1 {{v5.16b, v6.16b}}, [x9], #32",                // act quants 0..15, 16..31
                    "ld1r {{v7.4s}}, [x10], #4",                        // act scale
                    "movi v8.16b, #0",
                    $nib!("v17", "v18", "v1"),
                    $nib!("v19", "v20", "v2"),
                    $nib!("v21", "v22", "v3"),
                    $nib!("v23", "v24", "v4"),
                    "sdot v8.4s, v17.16b, v5.4b[0]",
                    "sdot v8.4s, v18.16b, v6.4b[0]",
                    "sdot v8.4s, v19.16b, v5.4b[1]",
                    "sdot v8.4s, v20.16b, v6.4b[1]",
                    "sdot v8.4s, v21.16b, v5.4b[2]",
                    "sdot v8.4s, v22.16b, v6.4b[2]",
                    "sdot v8.4s, v23.16b, v5.4b[3]",
                    "sdot v8.4s, v24.16b, v6.4b[3]",
                    "fcvtl v0.4s, v0.4h",
                    concat!("scvtf v8.4s, v8.4s", $nib!(fbits)), // isum as f32: exact
                    "fmul v0.4s, v0.4s, v7.4s",  // d_w * d_a
                    "fmul v8.4s, v8.4s, v0.4s",
                    "fadd v16.4s, v16.4s, v8.4s",
                    "subs x11, x11, #1",
                    "b.ne 3b",
                    "st1 {{v16.4s}}, [{out}], #16",
                    "subs {groups}, {groups}, #1",
                    "b.ne 2b",
                    w = inout(reg) w => _,
                    out = inout(reg) out => _,
                    groups = inout(reg) groups => _,
                    qs = in(reg) qs,
                    d = in(reg) d,
                    nb = in(reg) nb,
                    $($extra)*
                    out("x9") _, out("x10") _, out("x11") _,
                    out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                    out("v5") _, out("v6") _, out("v7") _, out("v8") _,
                    out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
                    out("v21") _, out("v22") _, out("v23") _, out("v24") _,
                    out("v31") _,
                    options(nostack),
                );
            }
        }
    };
}
pub(crate) use nibble_gemv_loop;

nibble_gemv_loop!(gemv_q4x4_groups, q4_0_nibbles, []);

/// The Q8_0x8 GEMV asm loop: `groups` row groups, each `nb` super-blocks.
///
/// # Safety
/// `w` must point to `groups * nb * 272` readable bytes, `qs` to `nb * 32`,
/// `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb >= 1`,
/// `groups >= 1`, and the CPU must implement dotprod.
#[inline(never)]
#[target_feature(enable = "neon,dotprod")]
pub(super) unsafe fn gemv_q8x8_groups(
    w: *const u8,
    qs: *const i8,
    d: *const f32,
    _sums: *const i16,
    nb: usize,
    out: *mut f32,
    groups: usize,
) {
    // SAFETY: per the function contract, every load stays inside `w`, `qs`,
    // `d` and every store inside `out`: the inner loop reads 272 bytes of
    // `w`, 32 bytes of `qs` and 4 bytes of `d` per block, for nb blocks; the
    // outer loop stores 32 bytes of `out` per group. Only the listed
    // registers are written; no stack is used.
    unsafe {
        asm!(
            "2:",
            "movi v28.16b, #0",          // rows 0-3 sums
            "movi v29.16b, #0",          // rows 4-7 sums
            "mov x9, {qs}",
            "mov x10, {d}",
            "mov x11, {nb}",
            "3:",
            "ld1 {{v0.8h}}, [{w}], #16",                           // 8 row scales (f16)
            "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64",     // chunks 0, 1
            "ld1 {{v5.16b, v6.16b, v7.16b, v8.16b}}, [{w}], #64",     // chunks 2, 3
            "ld1 {{v9.16b, v10.16b, v11.16b, v12.16b}}, [{w}], #64",  // chunks 4, 5
            "ld1 {{v13.16b, v14.16b, v15.16b, v16.16b}}, [{w}], #64", // chunks 6, 7
            "ld1 {{v17.16b, v18.16b}}, [x9], #32",                 // act quants
            "ld1r {{v19.4s}}, [x10], #4",                          // act scale
            "movi v20.16b, #0",
            "movi v21.16b, #0",
            "sdot v20.4s, v1.16b, v17.4b[0]",
            "sdot v21.4s, v2.16b, v17.4b[0]",
            "sdot v20.4s, v3.16b, v17.4b[1]",
            "sdot v21.4s, v4.16b, v17.4b[1]",
            "sdot v20.4s, v5.16b, v17.4b[2]",
            "sdot v21.4s, v6.16b, v17.4b[2]",
            "sdot v20.4s, v7.16b, v17.4b[3]",
            "sdot v21.4s, v8.16b, v17.4b[3]",
            "sdot v20.4s, v9.16b, v18.4b[0]",
            "sdot v21.4s, v10.16b, v18.4b[0]",
            "sdot v20.4s, v11.16b, v18.4b[1]",
            "sdot v21.4s, v12.16b, v18.4b[1]",
            "sdot v20.4s, v13.16b, v18.4b[2]",
            "sdot v21.4s, v14.16b, v18.4b[2]",
            "sdot v20.4s, v15.16b, v18.4b[3]",
            "sdot v21.4s, v16.16b, v18.4b[3]",
            "fcvtl v22.4s, v0.4h",
            "fcvtl2 v23.4s, v0.8h",
            "scvtf v20.4s, v20.4s",
            "scvtf v21.4s, v21.4s",
            "fmul v22.4s, v22.4s, v19.4s", // d_w * d_a
            "fmul v23.4s, v23.4s, v19.4s",
            "fmul v20.4s, v20.4s, v22.4s",
            "fmul v21.4s, v21.4s, v23.4s",
            "fadd v28.4s, v28.4s, v20.4s",
            "fadd v29.4s, v29.4s, v21.4s",
            "subs x11, x11, #1",
            "b.ne 3b",
            "st1 {{v28.4s, v29.4s}}, [{out}], #32",
            "subs {groups}, {groups}, #1",
            "b.ne 2b",
            w = inout(reg) w => _,
            out = inout(reg) out => _,
            groups = inout(reg) groups => _,
            qs = in(reg) qs,
            d = in(reg) d,
            nb = in(reg) nb,
            out("x9") _, out("x10") _, out("x11") _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
            out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
            out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _,
            out("v28") _, out("v29") _,
            options(nostack),
        );
    }
}
