//! GEMV and GEMM of the 8-row K layouts with Q8_K activations: one text,
//! `k8_kernels!`, the quant decoding a parameter (Q6_Kx8's in
//! `crate::layouts::q6k`, Q3_Kx8's in `crate::layouts::q3k`): `sdot` by
//! lane on the decoded `i8` quants, the 16 `i8` scales of a 32-weight block
//! applied exactly with `mla` on `i32` lanes, `scvtf` with the layout's
//! fraction bits undoing the decoding's factor.

/// One 16-weight group of the Q6_Kx8 / Q3_Kx8 tile: its quant loads made
/// into 8 `sdot` operands `v4`..`v11` by `$nib!` (`q6k_quants!`,
/// `q3k_quants!`), each
/// activation row's 8 `sdot` by lane, the two sums scaled by the group's
/// scales of rows 0-3 (`$lo`) and 4-7 (`$hi`) into that row's accumulators.
#[rustfmt::skip]
macro_rules! q6k_group {
    ($nib:ident, $lo:literal, $hi:literal) => { concat!(
        $nib!(tile_load),
        "ld1 {{v12.16b}}, [{q0}], #16\n", // activations
        "ld1 {{v13.16b}}, [{q1}], #16\n",
        "ld1 {{v14.16b}}, [{q2}], #16\n",
        "ld1 {{v15.16b}}, [{q3}], #16\n",
        $nib!(tile_decode),
        "movi v16.16b, #0\n",
        "movi v17.16b, #0\n",
        "sdot v16.4s, v4.16b, v12.4b[0]\n",
        "sdot v17.4s, v5.16b, v12.4b[0]\n",
        "sdot v16.4s, v6.16b, v12.4b[1]\n",
        "sdot v17.4s, v7.16b, v12.4b[1]\n",
        "sdot v16.4s, v8.16b, v12.4b[2]\n",
        "sdot v17.4s, v9.16b, v12.4b[2]\n",
        "sdot v16.4s, v10.16b, v12.4b[3]\n",
        "sdot v17.4s, v11.16b, v12.4b[3]\n",
        "mla v20.4s, v16.4s, ", $lo, ".4s\n",
        "mla v21.4s, v17.4s, ", $hi, ".4s\n",
        "movi v18.16b, #0\n",
        "movi v19.16b, #0\n",
        "sdot v18.4s, v4.16b, v13.4b[0]\n",
        "sdot v19.4s, v5.16b, v13.4b[0]\n",
        "sdot v18.4s, v6.16b, v13.4b[1]\n",
        "sdot v19.4s, v7.16b, v13.4b[1]\n",
        "sdot v18.4s, v8.16b, v13.4b[2]\n",
        "sdot v19.4s, v9.16b, v13.4b[2]\n",
        "sdot v18.4s, v10.16b, v13.4b[3]\n",
        "sdot v19.4s, v11.16b, v13.4b[3]\n",
        "mla v22.4s, v18.4s, ", $lo, ".4s\n",
        "mla v23.4s, v19.4s, ", $hi, ".4s\n",
        "movi v28.16b, #0\n",
        "movi v29.16b, #0\n",
        "sdot v28.4s, v4.16b, v14.4b[0]\n",
        "sdot v29.4s, v5.16b, v14.4b[0]\n",
        "sdot v28.4s, v6.16b, v14.4b[1]\n",
        "sdot v29.4s, v7.16b, v14.4b[1]\n",
        "sdot v28.4s, v8.16b, v14.4b[2]\n",
        "sdot v29.4s, v9.16b, v14.4b[2]\n",
        "sdot v28.4s, v10.16b, v14.4b[3]\n",
        "sdot v29.4s, v11.16b, v14.4b[3]\n",
        "mla v24.4s, v28.4s, ", $lo, ".4s\n",
        "mla v25.4s, v29.4s, ", $hi, ".4s\n",
        "movi v30.16b, #0\n",
        "movi v17.16b, #0\n",
        "sdot v30.4s, v4.16b, v15.4b[0]\n",
        "sdot v17.4s, v5.16b, v15.4b[0]\n",
        "sdot v30.4s, v6.16b, v15.4b[1]\n",
        "sdot v17.4s, v7.16b, v15.4b[1]\n",
        "sdot v30.4s, v8.16b, v15.4b[2]\n",
        "sdot v17.4s, v9.16b, v15.4b[2]\n",
        "sdot v30.4s, v10.16b, v15.4b[3]\n",
        "sdot v17.4s, v11.16b, v15.4b[3]\n",
        "mla v26.4s, v30.4s, ", $lo, ".4s\n",
        "mla v27.4s, v17.4s, ", $hi, ".4s\n",
    ) };
}
pub(crate) use q6k_group;

/// The GEMV `$gemv` and the GEMM `$gemm` (through the driver in `gemm.rs`),
/// the GEMV asm loop `$loop` and the 4-row tile `$tile` of an 8-row K
/// layout of `$bytes`-byte super-blocks (Q6_Kx8, Q3_Kx8) whose quants
/// `$nib!` decodes (`q6k_quants!`, `q3k_quants!`), their generic twins
/// `crate::generic`'s or those of the module in brackets; the figures in
/// the comments are Q6_Kx8's.
macro_rules! k8_kernels {
    ($gemv:ident, $gemm:ident, $loop:ident, $tile:ident, $nib:ident, $bytes:expr) => {
        $crate::aarch64::k8::k8_kernels!([crate::generic] $gemv, $gemm, $loop, $tile, $nib, $bytes);
    };
    ([$($g:ident)::+] $gemv:ident, $gemm:ident, $loop:ident, $tile:ident, $nib:ident, $bytes:expr) => {
        $crate::aarch64::gemm::entry_points!(
            q8_k [$($g)::+],
            $gemv,
            $gemm,
            $crate::aarch64::gemm::GemmKernels {
                group_rows: $crate::layout::K8_ROWS,
                block_bytes: $bytes,
                row: $loop,
                tile4: Some($tile),
                small_tiles: None,
                strided: false,
            }
        );

        /// The GEMV asm loop: `groups` row groups, each `nb` super-blocks.
        ///
        /// Per 32-weight block (8 rows x 32 weights, 208 bytes) the loop body is 61
        /// instructions: 5 loads, 6 `sxtl` (scales to i32), 24 to unpack the 12
        /// quant registers into 16 `sdot` operands, 4 `movi`, 16 `sdot`, 4 `mla`,
        /// the counter and the branch.
        ///
        /// # Safety
        /// `w` must point to `groups * nb * $bytes` readable bytes, `qs` to `nb * 256`,
        /// `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb >= 1`,
        /// `groups >= 1`, and the CPU must implement dotprod.
        #[inline(never)]
        #[target_feature(enable = "neon,dotprod")]
        unsafe fn $loop(
            w: *const u8,
            qs: *const i8,
            d: *const f32,
            _sums: *const i16,
            nb: usize,
            out: *mut f32,
            groups: usize,
        ) {
            // SAFETY: per the function contract, every load stays inside `w`, `qs`,
            // `d` and every store inside `out`: per super-block the loop reads $bytes bytes of `w`, 256 bytes of `qs` and 4 bytes of `d`, for
            // nb super-blocks per group; each group stores 32 bytes of `out`. Only
            // the listed registers are written; no stack is used.
            unsafe {
                core::arch::asm!(
                    $nib!(setup),
                    "2:",
                    "movi v28.16b, #0", // float sums, rows 0-3
                    "movi v29.16b, #0", // rows 4-7
                    "mov x9, {qs}",
                    "mov x10, {d}",
                    "mov x11, {nb}",
                    "3:",
                    "ld1 {{v30.8h}}, [{w}], #16", // d of the 8 rows (f16)
                    "movi v26.16b, #0", // 4 * sumi, rows 0-3
                    "movi v27.16b, #0", // rows 4-7
                    "mov x12, #8",
                    "4:",
                    $nib!(scales), // scales: group 2p (8 rows), 2p + 1
                    $nib!(gemv_load),
                    "ld1 {{v13.16b, v14.16b}}, [x9], #32", // activations of g0, g1
                    "sxtl2 v16.8h, v0.16b", // scales to i32
                    "sxtl v15.8h, v0.8b",
                    "sxtl v17.4s, v15.4h",
                    "sxtl2 v18.4s, v15.8h",
                    "sxtl v19.4s, v16.4h",
                    "sxtl2 v20.4s, v16.8h",
                    $nib!(gemv_dec0),
                    "movi v23.16b, #0",
                    "movi v24.16b, #0",
                    "sdot v23.4s, v1.16b, v13.4b[0]",
                    "sdot v24.4s, v2.16b, v13.4b[0]",
                    "sdot v23.4s, v3.16b, v13.4b[1]",
                    "sdot v24.4s, v4.16b, v13.4b[1]",
                    "sdot v23.4s, v5.16b, v13.4b[2]",
                    "sdot v24.4s, v6.16b, v13.4b[2]",
                    "sdot v23.4s, v21.16b, v13.4b[3]",
                    "sdot v24.4s, v22.16b, v13.4b[3]",
                    "mla v26.4s, v23.4s, v17.4s", // sumi += scale * isum
                    "mla v27.4s, v24.4s, v18.4s",
                    $nib!(gemv_dec1),
                    "movi v16.16b, #0",
                    "movi v25.16b, #0",
                    "sdot v16.4s, v7.16b, v14.4b[0]",
                    "sdot v25.4s, v8.16b, v14.4b[0]",
                    "sdot v16.4s, v9.16b, v14.4b[1]",
                    "sdot v25.4s, v10.16b, v14.4b[1]",
                    "sdot v16.4s, v11.16b, v14.4b[2]",
                    "sdot v25.4s, v12.16b, v14.4b[2]",
                    "sdot v16.4s, v0.16b, v14.4b[3]",
                    "sdot v25.4s, v15.16b, v14.4b[3]",
                    "mla v26.4s, v16.4s, v19.4s", // sumi += scale * isum
                    "mla v27.4s, v25.4s, v20.4s",
                    "subs x12, x12, #1",
                    "b.ne 4b",
                    "ld1r {{v0.4s}}, [x10], #4", // d_a
                    "fcvtl v1.4s, v30.4h",
                    "fcvtl2 v2.4s, v30.8h",
                    concat!("scvtf v26.4s, v26.4s", $nib!(fbits)), // sumi as f32, rounded once
                    concat!("scvtf v27.4s, v27.4s", $nib!(fbits)),
                    "fmul v1.4s, v1.4s, v0.4s", // d_w * d_a
                    "fmul v2.4s, v2.4s, v0.4s",
                    "fmul v26.4s, v1.4s, v26.4s",
                    "fmul v27.4s, v2.4s, v27.4s",
                    "fadd v28.4s, v28.4s, v26.4s",
                    "fadd v29.4s, v29.4s, v27.4s",
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
                    out("x9") _, out("x10") _, out("x11") _, out("x12") _,
                    out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                    out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                    out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
                    out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                    out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
                    out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
                    out("v30") _, out("v31") _,
                    options(nostack),
                );
            }
        }

        /// One row group x 4 activation rows: `acc[8i + r]` += row `r` . act
        /// row `i` (`acc` holds the running float sums between super-blocks).
        ///
        /// Per 32-weight block: the weights are loaded and unpacked once (5 + 24
        /// instructions, 6 `sxtl` for the scales), then per activation row 2 loads,
        /// 4 `movi`, 16 `sdot`, 4 `mla`: 141 instructions for 8 x 4 x 32 (with
        /// the counter and the branch).
        ///
        /// # Safety
        /// `w` must point to `nb * $bytes` readable bytes, `qs` and `d` to 4
        /// consecutive activation rows of `nb * 256` quants and `nb` floats,
        /// `acc` to 32 readable and writable
        /// floats, `nb >= 1`, and the CPU must implement dotprod.
        #[inline(never)]
        #[target_feature(enable = "neon,dotprod")]
        unsafe fn $tile(
            w: *const u8,
            qs: *const i8,
            d: *const f32,
            _sums: *const i16,
            nb: usize,
            acc: *mut f32,
            _stride: usize,
        ) {
            // SAFETY: per the function contract: per super-block the loop reads $bytes
            // bytes of `w`, 256 bytes of each activation row's quants and 4 bytes of its scales, for
            // nb super-blocks, and reads and writes the 128 bytes at `acc`. Only the
            // listed registers are written; no stack is used.
            unsafe {
                core::arch::asm!(
                    $nib!(setup),
                    "add x16, {acc}, #64",
                    "3:",
                    "mov x15, {w}", // the super-block's d
                    "add {w}, {w}, #16",
                    "movi v20.16b, #0", // 4 * sumi: act row i -> v(20+2i), v(21+2i)
                    "movi v21.16b, #0",
                    "movi v22.16b, #0",
                    "movi v23.16b, #0",
                    "movi v24.16b, #0",
                    "movi v25.16b, #0",
                    "movi v26.16b, #0",
                    "movi v27.16b, #0",
                    "mov x12, #8",
                    "4:",
                    $nib!(scales), // scales of groups 2p, 2p + 1
                    "sxtl2 v1.8h, v0.16b",
                    "sxtl v0.8h, v0.8b",
                    "sxtl v2.4s, v0.4h", // group 2p, rows 0-3
                    "sxtl2 v3.4s, v0.8h",
                    "sxtl v0.4s, v1.4h", // group 2p + 1, rows 0-3
                    "sxtl2 v1.4s, v1.8h",
                    $crate::aarch64::k8::q6k_group!($nib, "v2", "v3"), // group 2p + 0
                    $crate::aarch64::k8::q6k_group!($nib, "v0", "v1"), // group 2p + 1
                    "subs x12, x12, #1",
                    "b.ne 4b",
                    "ld1 {{v4.8h}}, [x15]", // d_w
                    "fcvtl v5.4s, v4.4h",
                    "fcvtl2 v6.4s, v4.8h",
                    "ld1 {{v7.s}}[0], [{d0}], #4", // d_a of the 4 act rows
                    "ld1 {{v7.s}}[1], [{d1}], #4",
                    "ld1 {{v7.s}}[2], [{d2}], #4",
                    "ld1 {{v7.s}}[3], [{d3}], #4",
                    "ld1 {{v8.4s, v9.4s, v10.4s, v11.4s}}, [{acc}]", // float sums, act rows 0-1
                    "ld1 {{v12.4s, v13.4s, v14.4s, v15.4s}}, [x16]", // act rows 2-3
                    "fmul v16.4s, v5.4s, v7.s[0]", // d_w * d_a
                    "fmul v17.4s, v6.4s, v7.s[0]",
                    concat!("scvtf v20.4s, v20.4s", $nib!(fbits)),
                    concat!("scvtf v21.4s, v21.4s", $nib!(fbits)),
                    "fmul v20.4s, v16.4s, v20.4s",
                    "fmul v21.4s, v17.4s, v21.4s",
                    "fadd v8.4s, v8.4s, v20.4s",
                    "fadd v9.4s, v9.4s, v21.4s",
                    "fmul v16.4s, v5.4s, v7.s[1]",
                    "fmul v17.4s, v6.4s, v7.s[1]",
                    concat!("scvtf v22.4s, v22.4s", $nib!(fbits)),
                    concat!("scvtf v23.4s, v23.4s", $nib!(fbits)),
                    "fmul v22.4s, v16.4s, v22.4s",
                    "fmul v23.4s, v17.4s, v23.4s",
                    "fadd v10.4s, v10.4s, v22.4s",
                    "fadd v11.4s, v11.4s, v23.4s",
                    "fmul v16.4s, v5.4s, v7.s[2]",
                    "fmul v17.4s, v6.4s, v7.s[2]",
                    concat!("scvtf v24.4s, v24.4s", $nib!(fbits)),
                    concat!("scvtf v25.4s, v25.4s", $nib!(fbits)),
                    "fmul v24.4s, v16.4s, v24.4s",
                    "fmul v25.4s, v17.4s, v25.4s",
                    "fadd v12.4s, v12.4s, v24.4s",
                    "fadd v13.4s, v13.4s, v25.4s",
                    "fmul v16.4s, v5.4s, v7.s[3]",
                    "fmul v17.4s, v6.4s, v7.s[3]",
                    concat!("scvtf v26.4s, v26.4s", $nib!(fbits)),
                    concat!("scvtf v27.4s, v27.4s", $nib!(fbits)),
                    "fmul v26.4s, v16.4s, v26.4s",
                    "fmul v27.4s, v17.4s, v27.4s",
                    "fadd v14.4s, v14.4s, v26.4s",
                    "fadd v15.4s, v15.4s, v27.4s",
                    "st1 {{v8.4s, v9.4s, v10.4s, v11.4s}}, [{acc}]",
                    "st1 {{v12.4s, v13.4s, v14.4s, v15.4s}}, [x16]",
                    "subs {nb}, {nb}, #1",
                    "b.ne 3b",
                    w = inout(reg) w => _,
                    q0 = inout(reg) qs => _,
                    q1 = inout(reg) qs.wrapping_add(nb * 256) => _,
                    q2 = inout(reg) qs.wrapping_add(nb * 512) => _,
                    q3 = inout(reg) qs.wrapping_add(nb * 768) => _,
                    d0 = inout(reg) d => _,
                    d1 = inout(reg) d.wrapping_add(nb) => _,
                    d2 = inout(reg) d.wrapping_add(nb * 2) => _,
                    d3 = inout(reg) d.wrapping_add(nb * 3) => _,
                    nb = inout(reg) nb => _,
                    acc = in(reg) acc,
                    out("x12") _, out("x15") _, out("x16") _,
                    out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                    out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                    out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
                    out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                    out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
                    out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
                    out("v30") _, out("v31") _,
                    options(nostack),
                );
            }
        }
    };
}
pub(crate) use k8_kernels;
