//! The GEMV loop text of the 4-row nibble layouts (Q4_0x4 in
//! `crate::layouts::q4_0`, IQ4_NLx4 in `crate::layouts::iq4nl`, each with
//! its nibble decoding) with one Q8_0 activation row: `sdot` over whole row
//! groups (the driver in `gemm.rs` runs it, also as the one-row step of the
//! GEMM).

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
