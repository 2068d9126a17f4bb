//! Q2_Kx8, the whole layout in one file: GGUF Q2_K super-blocks repacked 8
//! rows at a time in exactly the GGUF bytes' size (2.625 bits per weight),
//! every value kept exactly (docs/kernels.md, "Q2_Kx8"). Here are its
//! geometry and byte order, its repacker (its inverse, which only the
//! tests use, is `kestrel_tests::unpack_q2_k`), its scalar specification
//! ([`generic`]) and its kernels on aarch64 (a GEMV loop and a 2-row pass
//! of its own, twice for the 4-row tile: `sdot` by lane on the 2-bit
//! quants, the minimums against each 16 activations' sum, `saddlv`) and
//! x86_64 (tiles that Q6_Kx8's driver `k8_gemm` runs: AVX2 `vpmaddubsw`,
//! or `vpdpbusd` with a VNNI form), the one of the build also named
//! [`arch`].
//!
//! A GGUF Q2_K block (84 bytes, 256 weights) is `scales[16]`, `qs[64]`, `d:
//! f16`, `dmin: f16`; weight `i = 128n + 32j + l` (`n` 0..2, `j` 0..4, `l`
//! 0..32) has the quant `q` = bits `2j, 2j + 1` of `qs[32n + l]`; with
//! `scales[i / 16]` = `sc | m << 4` its value is `(d * sc) * q - dmin * m`
//! (as `dequantize_row_q2_K`).
//!
//! For row group `g` and super-block column `b` the Q2_Kx8 super-block
//! (672 bytes, at `(g * nb + b) * 672`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r`; `16 + 2r`: its `dmin` (f16
//!   LE, copied);
//! * then per pair `p` (0..8) of 16-weight groups 80 bytes at `32 + 80p`:
//!   * `8h + r` (`h` 0..2): the scale byte `sc | m << 4` of group `j = 2p +
//!     h` of row `r` (copied);
//!   * at `16 + 32h + 4r + k` (`r` 0..8, `k` 0..4) with `w = 16j + k`:
//!     `q(w) | q(w + 4) << 2 | q(w + 8) << 4 | q(w + 12) << 6`.
//!
//! So a 16-byte register holds a group's 16 weights of 4 rows, and `and` /
//! `ushr` make its four `sdot` operands (the chunks of 4 weights); on x86 32
//! bytes hold a group of all 8 rows, one per 32-bit lane.
//!
//! Rows past `rows` in the last group are padding: all bytes zero.

use crate::layout::QK_K;
use crate::shape::ShapeError;

/// Bytes of one GGUF Q2_K super-block (256 weights).
pub const Q2_K_BLOCK_BYTES: usize = QK_K / 16 + QK_K / 4 + 2 + 2;
/// Rows in one Q2_Kx8 row group.
pub const Q2KX8_ROWS: usize = 8;
/// Bytes of one Q2_Kx8 pair of 16-weight groups: 16 scale bytes, two
/// 32-byte groups.
pub const Q2KX8_PAIR_BYTES: usize = 2 * Q2KX8_ROWS + 2 * 32;
/// Bytes of one Q2_Kx8 super-block (8 rows x 256 weights): 8 GGUF blocks'
/// worth.
pub const Q2KX8_BLOCK_BYTES: usize = 4 * Q2KX8_ROWS + (QK_K / 32) * Q2KX8_PAIR_BYTES;

const _: () = assert!(Q2_K_BLOCK_BYTES == 84 && Q2KX8_PAIR_BYTES == 80);
const _: () = assert!(Q2KX8_BLOCK_BYTES == Q2KX8_ROWS * Q2_K_BLOCK_BYTES);

/// Bytes of a `rows x cols` matrix in Q2_Kx8, padding rows included
/// (`None`: it overflows).
pub fn q2_kx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, Q2KX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF Q2_K (`None`: it overflows).
pub fn q2_k_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, Q2_K_BLOCK_BYTES)
}

/// The 2-bit quant of weight `i` (0..256) of a GGUF Q2_K block.
#[inline]
pub fn gguf_quant(block: &[u8], i: usize) -> u8 {
    let (n, j, l) = (i / 128, (i % 128) / 32, i % 32);
    (block[16 + 32 * n + l] >> (2 * j)) & 3
}

/// Where in a super-block the quant of weight `i` (0..256) of row `r`
/// (0..8) is: its byte and shift (the byte order above, which the tests'
/// inverse of the repacker reads too).
#[inline]
pub fn quant_place(r: usize, i: usize) -> (usize, u32) {
    let (j, w) = (i / 16, i % 16);
    let at = 4 * Q2KX8_ROWS + Q2KX8_PAIR_BYTES * (j / 2) + 2 * Q2KX8_ROWS + 32 * (j % 2);
    (at + 4 * r + w % 4, 2 * (w / 4) as u32)
}

/// Where the scale byte of group `j` (0..16) of row `r` is.
#[inline]
pub fn scale_place(r: usize, j: usize) -> usize {
    4 * Q2KX8_ROWS + Q2KX8_PAIR_BYTES * (j / 2) + Q2KX8_ROWS * (j % 2) + r
}

/// Writes one Q2_Kx8 super-block from up to 8 GGUF Q2_K blocks (`src[r]`
/// for row `r`; missing rows are padding).
#[cfg_attr(kestrel_shipped, optimize(size))]
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[80..82]);
        sb[16 + 2 * r..18 + 2 * r].copy_from_slice(&block[82..84]);
        for j in 0..QK_K / 16 {
            sb[scale_place(r, j)] = block[j];
        }
        for i in 0..QK_K {
            let (at, shift) = quant_place(r, i);
            sb[at] |= gguf_quant(block, i) << shift;
        }
    }
}

/// Repacks a row-major GGUF Q2_K matrix (`rows x cols`, `cols` a multiple
/// of 256) into Q2_Kx8 (`out`: [`q2_kx8_bytes`] bytes).
pub fn repack_q2_k(src: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "q2_k columns (a multiple of 256)",
            "q2_k source bytes",
            "q2_kx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (Q2_K_BLOCK_BYTES, Q2KX8_BLOCK_BYTES),
        pack_super_block,
    )
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
///
/// Per row and super-block: the exact integer sums `sumi = sum_j sc_j *
/// isum_j` (`isum_j` the dot of group `j`'s 16 quants with its activation
/// quants) and `summ = sum_j m_j * asum_j` (`asum_j` the sum of those 16
/// activation quants), then `acc = acc + (d_w * d_a) * sumi`, `acc = acc -
/// (dmin_w * d_a) * summ`, each a separate IEEE f32 rounding, super-blocks
/// in order (Q4_Kx4's order).
pub mod generic {
    use super::{quant_place, scale_place, Q2KX8_BLOCK_BYTES, Q2KX8_ROWS};
    use crate::generic::{gemm_k_groups, read_f16};
    use crate::layout::QK_K;

    /// The 2-bit quant (0..=3) of weight `i` (0..256) of row `r` (0..8) in a
    /// Q2_Kx8 super-block.
    #[inline]
    pub fn q2kx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let (at, shift) = quant_place(r, i);
        ((sb[at] >> shift) & 3) as i32
    }

    /// The scale (0..16) and minimum (0..16) of 16-weight group `j` (0..16)
    /// of row `r` in a Q2_Kx8 super-block.
    #[inline]
    pub fn q2kx8_scale_min(sb: &[u8], r: usize, j: usize) -> (i32, i32) {
        let s = sb[scale_place(r, j)];
        ((s & 15) as i32, (s >> 4) as i32)
    }

    /// The eight rows of one Q2_Kx8 row group dotted with one Q8_K
    /// activation row (`act_qs`: its quants, `act_d`: its per-256 scales).
    pub fn q2kx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q2KX8_ROWS] {
        let mut acc = [0.0f32; Q2KX8_ROWS];
        let blocks = group
            .chunks_exact(Q2KX8_BLOCK_BYTES)
            .zip(act_qs.chunks_exact(QK_K))
            .zip(act_d);
        for ((sb, a), &da) in blocks {
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let (mut sumi, mut summ) = (0i32, 0i32);
                for j in 0..QK_K / 16 {
                    let (sc, m) = q2kx8_scale_min(sb, r, j);
                    let (mut isum, mut asum) = (0i32, 0i32);
                    for (t, &at) in a.iter().enumerate().skip(16 * j).take(16) {
                        isum += q2kx8_weight(sb, r, t) * at as i32;
                        asum += at as i32;
                    }
                    sumi += sc * isum;
                    summ += m * asum;
                }
                let dd = read_f16(sb, 2 * r) * da;
                let dm = read_f16(sb, 16 + 2 * r) * da;
                *acc_r += dd * sumi as f32;
                *acc_r -= dm * summ as f32;
            }
        }
        acc
    }

    forwarding_entry!(
        /// GEMV, Q2_Kx8 weights x one Q8_K activation row (shapes as
        /// [`gemv_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemv_q6_kx8_q8_k), with
        /// 672-byte super-blocks).
        q8_k gemv gemv_q2_kx8_q8_k => gemm_q2_kx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, Q2_Kx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemm_q6_kx8_q8_k), with
        /// 672-byte super-blocks).
        q8_k gemm gemm_q2_kx8_q8_k => gemm_k_groups [Q2KX8_BLOCK_BYTES, |g, q, d, _| q2kx8_group_dot(g, q, d)]
    );
}

/// aarch64: a GEMV loop and a 2-activation-row pass of this layout's own
/// (the 4-row tile runs the pass twice), run by the K driver.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{Q2KX8_BLOCK_BYTES, Q2KX8_ROWS};
    use crate::aarch64::gemm::{entry_points, GemmKernels};
    use crate::layout::QK_K;

    /// The 16 bytes `$src` of one group (4 rows) into its four `sdot`
    /// operands: `$c0`, `$c1`, `$c2` (bits 0-1, 2-3, 4-5) and `$src` itself
    /// (bits 6-7), `v31` = 3.
    #[rustfmt::skip]
    macro_rules! q2k_chunks {
        ($src:literal, $c0:literal, $c1:literal, $c2:literal) => { concat!(
            "and ", $c0, ".16b, ", $src, ".16b, v31.16b\n",
            "ushr ", $c1, ".16b, ", $src, ".16b, #2\n",
            "ushr ", $c2, ".16b, ", $src, ".16b, #4\n",
            "ushr ", $src, ".16b, ", $src, ".16b, #6\n",
            "and ", $c1, ".16b, ", $c1, ".16b, v31.16b\n",
            "and ", $c2, ".16b, ", $c2, ".16b, v31.16b\n",
        ) };
    }

    /// 8 `sdot` by lane of activation register `$a` into `$s0` (rows 0-3,
    /// operands `$a0`..`$a3`) and `$s1` (rows 4-7, `$b0`..`$b3`), both
    /// zeroed first.
    #[rustfmt::skip]
    macro_rules! q2k_sdots {
        ($s0:literal, $s1:literal, $a:literal,
         $a0:literal, $a1:literal, $a2:literal, $a3:literal,
         $b0:literal, $b1:literal, $b2:literal, $b3:literal) => { concat!(
            "movi ", $s0, ".16b, #0\n",
            "movi ", $s1, ".16b, #0\n",
            "sdot ", $s0, ".4s, ", $a0, ".16b, ", $a, ".4b[0]\n",
            "sdot ", $s1, ".4s, ", $b0, ".16b, ", $a, ".4b[0]\n",
            "sdot ", $s0, ".4s, ", $a1, ".16b, ", $a, ".4b[1]\n",
            "sdot ", $s1, ".4s, ", $b1, ".16b, ", $a, ".4b[1]\n",
            "sdot ", $s0, ".4s, ", $a2, ".16b, ", $a, ".4b[2]\n",
            "sdot ", $s1, ".4s, ", $b2, ".16b, ", $a, ".4b[2]\n",
            "sdot ", $s0, ".4s, ", $a3, ".16b, ", $a, ".4b[3]\n",
            "sdot ", $s1, ".4s, ", $b3, ".16b, ", $a, ".4b[3]\n",
        ) };
    }

    /// The GEMV loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// Per pair of 16-weight groups (8 rows x 32 weights): 3 loads, 2
    /// `saddlv` (the activations' sums), 3 + 4 `smlal` for the minimums, 7
    /// to widen the scales, 24 to make the 16 `sdot` operands, 4 `movi`, 16
    /// `sdot`, 4 `mla`, the counter and the branch: 69 instructions.
    ///
    /// # Safety
    /// `w` must point to `groups * nb * 672` readable bytes, `qs` to `nb *
    /// 256`, `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb
    /// >= 1`, `groups >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemv_q2kx8_groups(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        out: *mut f32,
        groups: usize,
    ) {
        // SAFETY: per the function contract, every load stays inside `w`,
        // `qs` and `d`, every store inside `out`: per super-block the loop
        // reads 672 bytes of `w` (32 + 8 x 80), 256 bytes of `qs` and 4 bytes
        // of `d`, for nb super-blocks per group; each group stores 32 bytes
        // of `out`. Only the listed registers are written; no stack is used.
        unsafe {
            core::arch::asm!(
                "movi v31.16b, #3",
                "movi v30.16b, #0x0f",
                "2:",
                "movi v27.16b, #0", // float sums, rows 0-3
                "movi v26.16b, #0", // rows 4-7
                "mov x9, {qs}",
                "mov x10, {d}",
                "mov x11, {nb}",
                "3:",
                "ld1 {{v29.8h}}, [{w}], #16", // d of the 8 rows (f16)
                "ld1 {{v28.8h}}, [{w}], #16", // dmin
                "movi v25.16b, #0", // sumi, rows 0-3
                "movi v24.16b, #0", // rows 4-7
                "movi v23.16b, #0", // summ, rows 0-3
                "movi v22.16b, #0", // rows 4-7
                "mov x12, #8",
                "4:",
                "ld1 {{v0.16b}}, [{w}], #16", // scale bytes: group 2p (8 rows), 2p + 1
                "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // the two groups' quants
                "ld1 {{v5.16b, v6.16b}}, [x9], #32", // their activations
                "saddlv h7, v5.16b", // the activations' sums
                "saddlv h8, v6.16b",
                "ushr v9.16b, v0.16b, #4", // the minimums
                "uxtl v10.8h, v9.8b",
                "uxtl2 v11.8h, v9.16b",
                "smlal v23.4s, v10.4h, v7.h[0]", // summ += m * asum
                "smlal2 v22.4s, v10.8h, v7.h[0]",
                "smlal v23.4s, v11.4h, v8.h[0]",
                "smlal2 v22.4s, v11.8h, v8.h[0]",
                "and v0.16b, v0.16b, v30.16b", // the scales, to i32
                "uxtl v9.8h, v0.8b",
                "uxtl2 v10.8h, v0.16b",
                "uxtl v11.4s, v9.4h",
                "uxtl2 v12.4s, v9.8h",
                "uxtl v13.4s, v10.4h",
                "uxtl2 v14.4s, v10.8h",
                q2k_chunks!("v1", "v15", "v16", "v17"),
                q2k_chunks!("v2", "v18", "v19", "v20"),
                q2k_sdots!("v9", "v10", "v5", "v15", "v16", "v17", "v1", "v18", "v19", "v20", "v2"),
                "mla v25.4s, v9.4s, v11.4s", // sumi += sc * isum
                "mla v24.4s, v10.4s, v12.4s",
                q2k_chunks!("v3", "v15", "v16", "v17"),
                q2k_chunks!("v4", "v18", "v19", "v20"),
                q2k_sdots!("v9", "v10", "v6", "v15", "v16", "v17", "v3", "v18", "v19", "v20", "v4"),
                "mla v25.4s, v9.4s, v13.4s",
                "mla v24.4s, v10.4s, v14.4s",
                "subs x12, x12, #1",
                "b.ne 4b",
                "ld1r {{v0.4s}}, [x10], #4", // d_a
                "fcvtl v1.4s, v29.4h", // d_w
                "fcvtl2 v2.4s, v29.8h",
                "fcvtl v4.4s, v28.4h", // dmin_w
                "fcvtl2 v5.4s, v28.8h",
                "fmul v1.4s, v1.4s, v0.4s", // d_w * d_a
                "fmul v2.4s, v2.4s, v0.4s",
                "fmul v4.4s, v4.4s, v0.4s", // dmin_w * d_a
                "fmul v5.4s, v5.4s, v0.4s",
                "scvtf v25.4s, v25.4s",
                "scvtf v24.4s, v24.4s",
                "scvtf v23.4s, v23.4s",
                "scvtf v22.4s, v22.4s",
                "fmul v25.4s, v1.4s, v25.4s",
                "fmul v24.4s, v2.4s, v24.4s",
                "fmul v23.4s, v4.4s, v23.4s",
                "fmul v22.4s, v5.4s, v22.4s",
                "fadd v27.4s, v27.4s, v25.4s",
                "fadd v26.4s, v26.4s, v24.4s",
                "fsub v27.4s, v27.4s, v23.4s",
                "fsub v26.4s, v26.4s, v22.4s",
                "subs x11, x11, #1",
                "b.ne 3b",
                "st1 {{v27.4s}}, [{out}], #16",
                "st1 {{v26.4s}}, [{out}], #16",
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

    /// One row group x 2 activation rows (`q0`, `q1`; `d0`, `d1`):
    /// `acc[8i + r]` += row `r` . act row `i` (`acc` holds the running
    /// float sums between super-blocks).
    ///
    /// # Safety
    /// `w` must point to `nb * 672` readable bytes, `q0`, `q1` to `nb * 256`
    /// quants, `d0`, `d1` to `nb` floats, `acc` to 16 readable and writable
    /// floats, `nb >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn q2kx8_pass2(
        w: *const u8,
        q: [*const i8; 2],
        d: [*const f32; 2],
        nb: usize,
        acc: *mut f32,
    ) {
        // SAFETY: per the function contract: per super-block the loop reads
        // 672 bytes of `w`, 256 bytes of each activation row's quants and 4
        // bytes of its scales, for nb super-blocks, and reads and writes the
        // 64 bytes at `acc`. Only the listed registers are written; no stack
        // is used.
        unsafe {
            core::arch::asm!(
                "movi v31.16b, #3",
                "movi v30.16b, #0x0f",
                "3:",
                "ld1 {{v29.8h}}, [{w}], #16", // d of the 8 rows (f16)
                "ld1 {{v28.8h}}, [{w}], #16", // dmin
                "movi v27.16b, #0", // sumi: act row 0 rows 0-3, 4-7; act row 1
                "movi v26.16b, #0",
                "movi v25.16b, #0",
                "movi v24.16b, #0",
                "movi v23.16b, #0", // summ, the same
                "movi v22.16b, #0",
                "movi v21.16b, #0",
                "movi v20.16b, #0",
                "mov x12, #8",
                "4:",
                "ld1 {{v0.16b}}, [{w}], #16", // scale bytes of groups 2p, 2p + 1
                "ld1 {{v1.16b, v2.16b, v3.16b, v4.16b}}, [{w}], #64", // their quants
                "ld1 {{v5.16b, v6.16b}}, [{q0}], #32", // act row 0
                "ld1 {{v7.16b, v8.16b}}, [{q1}], #32", // act row 1
                "saddlv h9, v5.16b", // the activations' sums
                "saddlv h10, v6.16b",
                "saddlv h11, v7.16b",
                "saddlv h12, v8.16b",
                "ushr v13.16b, v0.16b, #4", // the minimums
                "uxtl v14.8h, v13.8b",
                "uxtl2 v15.8h, v13.16b",
                "smlal v23.4s, v14.4h, v9.h[0]",
                "smlal2 v22.4s, v14.8h, v9.h[0]",
                "smlal v23.4s, v15.4h, v10.h[0]",
                "smlal2 v22.4s, v15.8h, v10.h[0]",
                "smlal v21.4s, v14.4h, v11.h[0]",
                "smlal2 v20.4s, v14.8h, v11.h[0]",
                "smlal v21.4s, v15.4h, v12.h[0]",
                "smlal2 v20.4s, v15.8h, v12.h[0]",
                "and v0.16b, v0.16b, v30.16b", // the scales, to i32
                "uxtl v13.8h, v0.8b",
                "uxtl2 v14.8h, v0.16b",
                "uxtl v9.4s, v13.4h",
                "uxtl2 v10.4s, v13.8h",
                "uxtl v11.4s, v14.4h",
                "uxtl2 v12.4s, v14.8h",
                q2k_chunks!("v1", "v13", "v15", "v17"),
                q2k_chunks!("v2", "v14", "v16", "v18"),
                q2k_sdots!("v0", "v19", "v5", "v13", "v15", "v17", "v1", "v14", "v16", "v18", "v2"),
                "mla v27.4s, v0.4s, v9.4s",
                "mla v26.4s, v19.4s, v10.4s",
                q2k_sdots!("v0", "v19", "v7", "v13", "v15", "v17", "v1", "v14", "v16", "v18", "v2"),
                "mla v25.4s, v0.4s, v9.4s",
                "mla v24.4s, v19.4s, v10.4s",
                q2k_chunks!("v3", "v13", "v15", "v17"),
                q2k_chunks!("v4", "v14", "v16", "v18"),
                q2k_sdots!("v0", "v19", "v6", "v13", "v15", "v17", "v3", "v14", "v16", "v18", "v4"),
                "mla v27.4s, v0.4s, v11.4s",
                "mla v26.4s, v19.4s, v12.4s",
                q2k_sdots!("v0", "v19", "v8", "v13", "v15", "v17", "v3", "v14", "v16", "v18", "v4"),
                "mla v25.4s, v0.4s, v11.4s",
                "mla v24.4s, v19.4s, v12.4s",
                "subs x12, x12, #1",
                "b.ne 4b",
                "ld1r {{v0.4s}}, [{d0}], #4", // d_a of the 2 act rows
                "ld1r {{v1.4s}}, [{d1}], #4",
                "fcvtl v2.4s, v29.4h", // d_w
                "fcvtl2 v3.4s, v29.8h",
                "fcvtl v4.4s, v28.4h", // dmin_w
                "fcvtl2 v5.4s, v28.8h",
                "ld1 {{v6.4s, v7.4s, v8.4s, v9.4s}}, [{acc}]",
                "scvtf v27.4s, v27.4s",
                "scvtf v26.4s, v26.4s",
                "scvtf v25.4s, v25.4s",
                "scvtf v24.4s, v24.4s",
                "scvtf v23.4s, v23.4s",
                "scvtf v22.4s, v22.4s",
                "scvtf v21.4s, v21.4s",
                "scvtf v20.4s, v20.4s",
                "fmul v10.4s, v2.4s, v0.4s", // act row 0: d_w * d_a, dmin_w * d_a
                "fmul v11.4s, v3.4s, v0.4s",
                "fmul v12.4s, v4.4s, v0.4s",
                "fmul v13.4s, v5.4s, v0.4s",
                "fmul v27.4s, v10.4s, v27.4s",
                "fmul v26.4s, v11.4s, v26.4s",
                "fmul v23.4s, v12.4s, v23.4s",
                "fmul v22.4s, v13.4s, v22.4s",
                "fadd v6.4s, v6.4s, v27.4s",
                "fadd v7.4s, v7.4s, v26.4s",
                "fsub v6.4s, v6.4s, v23.4s",
                "fsub v7.4s, v7.4s, v22.4s",
                "fmul v10.4s, v2.4s, v1.4s", // act row 1
                "fmul v11.4s, v3.4s, v1.4s",
                "fmul v12.4s, v4.4s, v1.4s",
                "fmul v13.4s, v5.4s, v1.4s",
                "fmul v25.4s, v10.4s, v25.4s",
                "fmul v24.4s, v11.4s, v24.4s",
                "fmul v21.4s, v12.4s, v21.4s",
                "fmul v20.4s, v13.4s, v20.4s",
                "fadd v8.4s, v8.4s, v25.4s",
                "fadd v9.4s, v9.4s, v24.4s",
                "fsub v8.4s, v8.4s, v21.4s",
                "fsub v9.4s, v9.4s, v20.4s",
                "st1 {{v6.4s, v7.4s, v8.4s, v9.4s}}, [{acc}]",
                "subs {nb}, {nb}, #1",
                "b.ne 3b",
                w = inout(reg) w => _,
                q0 = inout(reg) q[0] => _,
                q1 = inout(reg) q[1] => _,
                d0 = inout(reg) d[0] => _,
                d1 = inout(reg) d[1] => _,
                nb = inout(reg) nb => _,
                acc = in(reg) acc,
                out("x12") _,
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

    /// One row group x 4 activation rows: [`q2kx8_pass2`] for rows 0-1,
    /// then 2-3 (the weights decoded twice: the minimums' sums leave too few
    /// registers for four rows at once).
    ///
    /// # Safety
    /// `w` must point to `nb * 672` readable bytes, `qs` and `d` to 4
    /// consecutive activation rows of `nb * 256` quants and `nb` floats,
    /// `acc` to 32 readable and writable floats, `nb >= 1`, and the CPU must
    /// implement dotprod.
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemm_q2kx8_tile4(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        acc: *mut f32,
        _stride: usize,
    ) {
        let row = |t: usize| qs.wrapping_add(t * nb * QK_K);
        let ds = |t: usize| d.wrapping_add(t * nb);
        // SAFETY: the function contract gives each pass its rows (`nb *
        // 256` quants and `nb` floats each, consecutive) and its 16 floats
        // of `acc`.
        unsafe {
            q2kx8_pass2(w, [row(0), row(1)], [ds(0), ds(1)], nb, acc);
            q2kx8_pass2(w, [row(2), row(3)], [ds(2), ds(3)], nb, acc.add(16));
        }
    }

    entry_points!(
        q8_k[super::generic],
        gemv_q2_kx8_q8_k,
        gemm_q2_kx8_q8_k,
        GemmKernels {
            group_rows: Q2KX8_ROWS,
            block_bytes: Q2KX8_BLOCK_BYTES,
            row: gemv_q2kx8_groups,
            tile4: Some(gemm_q2kx8_tile4),
            small_tiles: None,
            strided: false,
        }
    );
}

/// x86_64: tiles of one row group (8 rows, one per 32-bit lane) x up to 4
/// activation rows, run by Q6_Kx8's driver (`k8_gemm`); AVX2
/// (`vpmaddubsw`: the quants are unsigned), or `vpdpbusd` with a VNNI form.
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::generic;
    use super::{Q2KX8_BLOCK_BYTES, Q2KX8_PAIR_BYTES, Q2KX8_ROWS};
    use crate::layout::QK_K;
    use crate::x86_64::k8::{k8_entry, TILE_M};
    use crate::x86_64::Dot;
    use core::arch::x86_64::*;

    k8_entry!(
        "Q2_Kx8",
        gemv_q2_kx8_q8_k,
        gemm_q2_kx8_q8_k,
        Q2K,
        [q2k_tile, q2k_tile_avx_vnni, q2k_tile_avx512_vnni],
        q2k_tile_body,
        Q2KX8_BLOCK_BYTES,
        false,
        generic::gemm_q2_kx8_q8_k,
        wide = avx512::q2kx8_tile
    );

    /// The body of the three tiles, inlined into each so that it is
    /// compiled with its caller's features (`DOT`: a [`Dot`] constant).
    ///
    /// Per 16-weight group: one 32-byte load (a row per 32-bit lane), the
    /// four chunks by 16-bit shifts and a mask of 3; per activation row the
    /// broadcast dword of each chunk, `vpmaddubsw` + `vpmaddwd` (or
    /// `vpdpbusd`) give `isum` exactly, `sumi += sc * isum`; the 16
    /// activations' sum (`vpsadbw` of `a ^ 0x80`, less 16 x 128) times each
    /// row's minimum into `summ`. Per super-block `acc += (d_w * d_a) *
    /// sumi`, `acc -= (dmin_w * d_a) * summ`, the reference's order.
    ///
    /// # Safety
    /// The AVX2 tile's contract, and the CPU must implement the `DOT` form.
    #[inline(always)]
    unsafe fn q2k_tile_body<const T: usize, const DOT: u8>(
        wg: &[u8],
        qs: &[i8],
        d: &[f32],
        _offsets: &[i32],
        nb: usize,
        res: &mut [[f32; Q2KX8_ROWS]; TILE_M],
    ) {
        // SAFETY: the loads read super-block `b < nb` of `wg` (its `d`,
        // `dmin`, scale bytes and quants at their offsets inside 672 bytes)
        // and block `b` of rows `t < T` of `qs` and `d` (the function
        // contract); unaligned; the CPU implements AVX2, FMA, F16C and the
        // `DOT` form.
        unsafe {
            debug_assert!(wg.len() >= nb * Q2KX8_BLOCK_BYTES && qs.len() >= T * nb * QK_K);
            let cols = nb * QK_K;
            let m3 = _mm256_set1_epi8(3);
            let ones = _mm256_set1_epi16(1);
            let flip = _mm_set1_epi8(i8::MIN);
            let mut acc = [_mm256_setzero_ps(); T];
            for b in 0..nb {
                let sb = wg.as_ptr().add(b * Q2KX8_BLOCK_BYTES);
                let mut sumi = [_mm256_setzero_si256(); T];
                let mut summ = [_mm256_setzero_si256(); T];
                for j in 0..QK_K / 16 {
                    let pair = sb.add(4 * Q2KX8_ROWS + Q2KX8_PAIR_BYTES * (j / 2));
                    let s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(pair.add(8 * (j % 2)).cast()));
                    let sc = _mm256_and_si256(s, _mm256_set1_epi32(15));
                    let mn = _mm256_srli_epi32::<4>(s);
                    let q = _mm256_loadu_si256(pair.add(2 * Q2KX8_ROWS + 32 * (j % 2)).cast());
                    let c = [
                        _mm256_and_si256(q, m3),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(q), m3),
                        _mm256_and_si256(_mm256_srli_epi16::<4>(q), m3),
                        _mm256_and_si256(_mm256_srli_epi16::<6>(q), m3),
                    ];
                    for t in 0..T {
                        let a = qs.as_ptr().add(t * cols + b * QK_K + 16 * j);
                        let mut isum = _mm256_setzero_si256();
                        if DOT == Dot::MADDUBS {
                            let mut p = _mm256_setzero_si256();
                            for (k, ck) in c.iter().enumerate() {
                                let av =
                                    _mm256_set1_epi32(a.add(4 * k).cast::<i32>().read_unaligned());
                                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(*ck, av));
                            }
                            isum = _mm256_madd_epi16(p, ones);
                        } else {
                            for (k, ck) in c.iter().enumerate() {
                                let av =
                                    _mm256_set1_epi32(a.add(4 * k).cast::<i32>().read_unaligned());
                                isum = if DOT == Dot::AVX_VNNI {
                                    crate::x86_64::dpbusd_vex(isum, *ck, av)
                                } else {
                                    _mm256_dpbusd_epi32(isum, *ck, av)
                                };
                            }
                        }
                        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(sc, isum));
                        let sad = _mm_sad_epu8(
                            _mm_xor_si128(_mm_loadu_si128(a.cast()), flip),
                            _mm_setzero_si128(),
                        );
                        let asum = _mm_cvtsi128_si32(sad) + _mm_extract_epi16::<4>(sad) - 16 * 128;
                        let am = _mm256_mullo_epi32(mn, _mm256_set1_epi32(asum));
                        summ[t] = _mm256_add_epi32(summ[t], am);
                    }
                }
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
                let dmw = _mm256_cvtph_ps(_mm_loadu_si128(sb.add(16).cast()));
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                    let dd = _mm256_mul_ps(dw, da);
                    let dm = _mm256_mul_ps(dmw, da);
                    let v = _mm256_mul_ps(dd, _mm256_cvtepi32_ps(sumi[t]));
                    *acc_t = _mm256_add_ps(*acc_t, v);
                    let v = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(summ[t]));
                    *acc_t = _mm256_sub_ps(*acc_t, v);
                }
            }
            for (r, a) in res.iter_mut().zip(acc) {
                _mm256_storeu_ps(r.as_mut_ptr(), a);
            }
        }
    }

    /// The 512-bit GEMM: two row groups per vector, up to 8 activation
    /// rows per tile.
    pub(crate) mod avx512 {
        use crate::layout::QK_K;
        use crate::layouts::q2k::{Q2KX8_BLOCK_BYTES, Q2KX8_PAIR_BYTES, Q2KX8_ROWS};
        use crate::x86_64::gemm_vnni::avx512::{
            pair_blocks, pair_f16, pair_halves, run_dot, store_pair_rows,
        };
        use crate::x86_64::gemm_vnni::{for_each_row, TILE_M};
        use core::arch::x86_64::*;

        /// Two Q2_Kx8 row groups `wa`, `wb` (16 rows) against `T` activation
        /// rows: `res[t]` = the 8 rows of `wa`, then the 8 of `wb`.
        ///
        /// The 256-bit tile's arithmetic on twice the rows: per 16-weight
        /// group the quants of `wa` and of `wb` fill the two 256-bit halves
        /// of one register (lane `i` = row `i`), the four chunks by 16-bit
        /// shifts and a mask of 3 (unsigned, no offset); per activation row
        /// four `vpdpbusd` give `isum`, `sumi += sc * isum`, and the 16
        /// activations' sum (`vpsadbw` of `a ^ 0x80`, less 16 x 128) times
        /// each row's minimum into `summ`. Per super-block `acc += (d_w *
        /// d_a) * sumi`, `acc -= (dmin_w * d_a) * summ`, the reference's
        /// order.
        ///
        /// # Safety
        /// `wa.len()` and `wb.len()` must be at least `nb * 672`, `qs.len()` at
        /// least `T * nb * 256`, `d.len()` at least `T * nb`, `1 <= T <=
        /// TILE_M`, and the CPU must implement AVX512-VNNI with AVX512
        /// F/BW/VL.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn q2kx8_tile<const T: usize>(
            wa: &[u8],
            wb: &[u8],
            qs: &[i8],
            d: &[f32],
            _offsets: &[i32],
            nb: usize,
            res: &mut [[f32; 16]; TILE_M],
        ) {
            debug_assert!(T <= TILE_M);
            debug_assert!(wa.len() >= nb * Q2KX8_BLOCK_BYTES && wb.len() >= nb * Q2KX8_BLOCK_BYTES);
            debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb);
            let cols = nb * QK_K;
            let m3 = _mm512_set1_epi8(3);
            let flip = _mm_set1_epi8(i8::MIN);
            let mut acc = [_mm512_setzero_ps(); T];
            for b in 0..nb {
                // SAFETY: b < nb, both groups hold `nb` super-blocks (the
                // function contract).
                let (sa, sb) = unsafe { pair_blocks(wa, wb, b, nb, Q2KX8_BLOCK_BYTES) };
                let mut sumi = [_mm512_setzero_si512(); T];
                let mut summ = [_mm512_setzero_si512(); T];
                for j in 0..QK_K / 16 {
                    let at = 4 * Q2KX8_ROWS + Q2KX8_PAIR_BYTES * (j / 2);
                    // SAFETY: group j's 8 scale bytes and 32 quant bytes of
                    // both super-blocks (inside their 672); unaligned loads.
                    let (s, q) = unsafe {
                        let (ga, gb) = (sa.add(at), sb.add(at));
                        let s = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(
                            _mm_loadl_epi64(ga.add(8 * (j % 2)).cast()),
                            _mm_loadl_epi64(gb.add(8 * (j % 2)).cast()),
                        ));
                        let g = 2 * Q2KX8_ROWS + 32 * (j % 2);
                        let q = pair_halves(ga.add(g), gb.add(g));
                        (s, q)
                    };
                    let sc = _mm512_and_si512(s, _mm512_set1_epi32(15));
                    let mn = _mm512_srli_epi32::<4>(s);
                    let c = [
                        _mm512_and_si512(q, m3),
                        _mm512_and_si512(_mm512_srli_epi16::<2>(q), m3),
                        _mm512_and_si512(_mm512_srli_epi16::<4>(q), m3),
                        _mm512_and_si512(_mm512_srli_epi16::<6>(q), m3),
                    ];
                    for_each_row!(T, |t| {
                        // SAFETY: row t < T: bytes `t * cols + 256b + 16j ..`
                        // + 16 of `qs` (the function contract); unaligned
                        // reads.
                        let ap = unsafe { qs.as_ptr().add(t * cols + b * QK_K + 16 * j) };
                        // SAFETY: the group's 16 bytes (above).
                        let isum = unsafe { run_dot(0, ap.cast(), &c) };
                        sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(sc, isum));
                        // SAFETY: the group's 16 bytes (above); unaligned.
                        let a16 = unsafe { _mm_loadu_si128(ap.cast()) };
                        let sad = _mm_sad_epu8(_mm_xor_si128(a16, flip), _mm_setzero_si128());
                        let asum = _mm_cvtsi128_si32(sad) + _mm_extract_epi16::<4>(sad) - 16 * 128;
                        let am = _mm512_mullo_epi32(mn, _mm512_set1_epi32(asum));
                        summ[t] = _mm512_add_epi32(summ[t], am);
                    });
                }
                // SAFETY: bytes 0..32 of both super-blocks: the rows' f16 `d`
                // and `dmin`.
                let (dw, dmw) = unsafe { (pair_f16(sa, sb), pair_f16(sa.add(16), sb.add(16))) };
                for_each_row!(T, |t| {
                    // SAFETY: t < T, b < nb (the function contract).
                    let da = _mm512_set1_ps(unsafe { *d.get_unchecked(t * nb + b) });
                    let (dd, dm) = (_mm512_mul_ps(dw, da), _mm512_mul_ps(dmw, da));
                    acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sumi[t])));
                    acc[t] = _mm512_sub_ps(acc[t], _mm512_mul_ps(dm, _mm512_cvtepi32_ps(summ[t])));
                });
            }
            store_pair_rows(res, acc);
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
