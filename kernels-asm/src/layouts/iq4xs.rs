//! IQ4_XSx8, the whole layout in one file: GGUF IQ4_XS super-blocks
//! repacked 8 rows at a time in exactly the GGUF bytes' size (4.25 bits per
//! weight), every value kept exactly (docs/kernels.md, "IQ4_XSx8"). Here
//! are its geometry and byte order, its repacker (its inverse, which only
//! the tests use, is `kestrel_tests::unpack_iq4_xs`), its scalar
//! specification ([`generic`]) and its kernels on aarch64 (a GEMV loop and
//! a 4-row tile of their own: `tbl` looks the nibbles' values up, `sdot`
//! by lane) and x86_64 (tiles that Q6_Kx8's driver `k8_gemm` runs: AVX2
//! `vpshufb` and `vpmaddubsw`, or `vpdpbusd` with a VNNI form), the one of
//! the build also named [`arch`].
//!
//! A GGUF IQ4_XS block (136 bytes, 256 weights) is `d: f16`, `scales_h:
//! u16`, `scales_l[4]`, `qs[128]`; sub-block `p` (0..8, 32 weights) has the
//! 6-bit scale `ls = (scales_l[p / 2] >> 4 (p % 2)) & 15 | ((scales_h >> 2p)
//! & 3) << 4`, and its weight `l` (0..16) is the low nibble of `qs[16p +
//! l]`, weight `l + 16` the high one; a weight's value is `d * (ls - 32) *
//! IQ4_NL_VALUES[nibble]` (as `dequantize_row_iq4_xs`).
//!
//! For row group `g` and super-block column `b` the IQ4_XSx8 super-block
//! (1088 bytes, at `(g * nb + b) * 1088`) is, with `s = 8p + r` the scale
//! of sub-block `p` of row `r` and `u(s) = ls ^ 32` (the 6-bit two's
//! complement of `ls - 32`):
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * `16 + k` (`k` 0..32): `u(k) & 15 | (u(k + 32) & 15) << 4`;
//! * `48 + k` (`k` 0..16): `u(k) >> 4 | (u(k + 16) >> 4) << 2 | (u(k + 32)
//!   >> 4) << 4 | (u(k + 48) >> 4) << 6`;
//! * at `64 + 128p + 64h` the 16-weight half `h` of sub-block `p`: for the
//!   chunk pair `c` (0, 1: chunks 0 and 1, 2 and 3 of four weights) at
//!   `32c + 4r + k` (`r` 0..8, `k` 0..4) the nibble of weight `w = 32p +
//!   16h + 8c + k` of row `r` in the low half and that of `w + 4` in the
//!   high one.
//!
//! So 32 bytes hold a chunk pair of all 8 rows (one row per 32-bit lane on
//! x86), 16 bytes one of 4 rows (an `sdot` operand on aarch64 per nibble
//! half), and the 64 scales unpack with 12 NEON instructions into `4 * (ls
//! - 32)` as `i8`: `(u << 2) as i8`.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`).

use crate::layout::QK_K;
use crate::shape::ShapeError;

pub use super::iq4nl::IQ4_NL_VALUES;

/// Bytes of one GGUF IQ4_XS super-block (256 weights).
pub const IQ4_XS_BLOCK_BYTES: usize = 2 + 2 + QK_K / 64 + QK_K / 2;
/// Rows in one IQ4_XSx8 row group.
pub const IQ4XSX8_ROWS: usize = 8;
/// Bytes of one IQ4_XSx8 32-weight sub-block (8 rows x 32 nibbles).
pub const IQ4XSX8_SUB_BYTES: usize = IQ4XSX8_ROWS * 32 / 2;
/// Offset of the quants in a super-block: after the 8 `d` and 48 bytes of
/// scales.
pub const IQ4XSX8_QUANTS_AT: usize = 2 * IQ4XSX8_ROWS + 48;
/// Bytes of one IQ4_XSx8 super-block (8 rows x 256 weights): 8 GGUF blocks'
/// worth.
pub const IQ4XSX8_BLOCK_BYTES: usize = IQ4XSX8_QUANTS_AT + (QK_K / 32) * IQ4XSX8_SUB_BYTES;

const _: () = assert!(IQ4_XS_BLOCK_BYTES == 136 && IQ4XSX8_SUB_BYTES == 128);
const _: () = assert!(IQ4XSX8_BLOCK_BYTES == IQ4XSX8_ROWS * IQ4_XS_BLOCK_BYTES);

/// Bytes of a `rows x cols` matrix in IQ4_XSx8, padding rows included
/// (`None`: it overflows).
pub fn iq4_xsx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, IQ4XSX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF IQ4_XS (`None`: it overflows).
pub fn iq4_xs_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, IQ4_XS_BLOCK_BYTES)
}

/// The 6-bit scale `ls` of sub-block `p` (0..8) of a GGUF IQ4_XS block.
#[inline]
pub fn gguf_scale(block: &[u8], p: usize) -> u8 {
    let lo = (block[4 + p / 2] >> (4 * (p % 2))) & 15;
    let hi = (u16::from_le_bytes([block[2], block[3]]) >> (2 * p)) as u8 & 3;
    lo | hi << 4
}

/// The nibble of weight `i` (0..256) of a GGUF IQ4_XS block.
#[inline]
pub fn gguf_nibble(block: &[u8], i: usize) -> u8 {
    let (p, l) = (i / 32, i % 32);
    (block[8 + 16 * p + l % 16] >> (4 * (l / 16))) & 15
}

/// Where in a super-block the nibble of weight `i` (0..256) of row `r`
/// (0..8) is: its byte and shift (the byte order above, which the tests'
/// inverse of the repacker reads too).
#[inline]
pub fn nibble_place(r: usize, i: usize) -> (usize, u32) {
    let (p, h, w) = (i / 32, (i / 16) % 2, i % 16);
    let (c, k) = (w / 4, w % 4);
    let at = IQ4XSX8_QUANTS_AT + IQ4XSX8_SUB_BYTES * p + 64 * h + 32 * (c / 2) + 4 * r + k;
    (at, 4 * (c % 2) as u32)
}

/// Where the scale `s = 8p + r` is: the byte and shift of its low 4 bits,
/// and of its high 2 bits.
#[inline]
pub fn scale_places(s: usize) -> ((usize, u32), (usize, u32)) {
    (
        (16 + s % 32, 4 * (s / 32) as u32),
        (48 + s % 16, 2 * (s / 16) as u32),
    )
}

/// Writes one IQ4_XSx8 super-block from up to 8 GGUF IQ4_XS blocks
/// (`src[r]` for row `r`; missing rows are padding).
#[cfg_attr(kestrel_shipped, optimize(size))]
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[..2]);
        for p in 0..QK_K / 32 {
            let u = gguf_scale(block, p) ^ 32;
            let ((lo_at, lo_shift), (hi_at, hi_shift)) = scale_places(8 * p + r);
            sb[lo_at] |= (u & 15) << lo_shift;
            sb[hi_at] |= (u >> 4) << hi_shift;
        }
        for i in 0..QK_K {
            let (at, shift) = nibble_place(r, i);
            sb[at] |= gguf_nibble(block, i) << shift;
        }
    }
}

/// Repacks a row-major GGUF IQ4_XS matrix (`rows x cols`, `cols` a multiple
/// of 256) into IQ4_XSx8 (`out`: [`iq4_xsx8_bytes`] bytes).
pub fn repack_iq4_xs(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "iq4_xs columns (a multiple of 256)",
            "iq4_xs source bytes",
            "iq4_xsx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (IQ4_XS_BLOCK_BYTES, IQ4XSX8_BLOCK_BYTES),
        pack_super_block,
    )
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::{nibble_place, scale_places, IQ4XSX8_BLOCK_BYTES, IQ4XSX8_ROWS, IQ4_NL_VALUES};
    use crate::generic::{gemm_k_groups, k8_group_dot};

    /// The value (an [`IQ4_NL_VALUES`] entry) of weight `i` (0..256) of row
    /// `r` (0..8) in an IQ4_XSx8 super-block.
    #[inline]
    pub fn iq4xsx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let (at, shift) = nibble_place(r, i);
        IQ4_NL_VALUES[((sb[at] >> shift) & 15) as usize] as i32
    }

    /// The scale `ls - 32` (-32..=31) of 16-weight group `j` (0..16; the
    /// scale of sub-block `j / 2`) of row `r` in an IQ4_XSx8 super-block.
    #[inline]
    pub fn iq4xsx8_scale(sb: &[u8], r: usize, j: usize) -> i32 {
        let ((lo_at, lo_shift), (hi_at, hi_shift)) = scale_places(8 * (j / 2) + r);
        let u = (sb[lo_at] >> lo_shift) & 15 | ((sb[hi_at] >> hi_shift) & 3) << 4;
        ((u << 2) as i8 >> 2) as i32
    }

    /// The eight rows of one IQ4_XSx8 row group dotted with one Q8_K
    /// activation row.
    pub fn iq4xsx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; IQ4XSX8_ROWS] {
        k8_group_dot(
            IQ4XSX8_BLOCK_BYTES,
            (iq4xsx8_weight, iq4xsx8_scale),
            group,
            act_qs,
            act_d,
        )
    }

    forwarding_entry!(
        /// GEMV, IQ4_XSx8 weights x one Q8_K activation row (shapes as
        /// [`gemv_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemv_q6_kx8_q8_k), with
        /// 1088-byte super-blocks).
        q8_k gemv gemv_iq4_xsx8_q8_k => gemm_iq4_xsx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ4_XSx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemm_q6_kx8_q8_k), with
        /// 1088-byte super-blocks).
        q8_k gemm gemm_iq4_xsx8_q8_k => gemm_k_groups [IQ4XSX8_BLOCK_BYTES, |g, q, d, _| iq4xsx8_group_dot(g, q, d)]
    );
}

/// aarch64: a GEMV loop and a 4-row tile of this layout's own (the scales
/// unpacked once per super-block, the nibbles looked up with `tbl`, `sdot`
/// by lane, the scales applied exactly with `mla` on `i32` lanes as `4 (ls -
/// 32)`, `scvtf #2` undoing the factor 4), run by the K driver.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{IQ4XSX8_BLOCK_BYTES, IQ4XSX8_ROWS, IQ4_NL_VALUES};
    use crate::aarch64::gemm::{entry_points, GemmKernels};

    /// The IQ4_NL values where the kernels load them from.
    static IQ4_NL_TABLE: [i8; 16] = IQ4_NL_VALUES;

    /// The 64 scales of a super-block from their 48 bytes (`$l0`, `$l1`: the
    /// low nibbles, `$h`: the high bits; `v30` = 0x0f) into `v0`..`v3`, byte
    /// `b` of `v{m}` the `i8` `4 (ls - 32)` of scale `16m + b`, `$t` scratch:
    /// the high bits shifted to bits 6-7, the low nibble inserted below them
    /// at bits 2-5 (`sri #2` of the nibble placed at bits 4-7).
    #[rustfmt::skip]
    macro_rules! iq4xs_scales {
        ($l0:literal, $l1:literal, $h:literal, $t:literal) => { concat!(
            "shl v0.16b, ", $h, ".16b, #6\n",
            "shl ", $t, ".16b, ", $l0, ".16b, #4\n",
            "sri v0.16b, ", $t, ".16b, #2\n",
            "shl v1.16b, ", $h, ".16b, #4\n",
            "shl ", $t, ".16b, ", $l1, ".16b, #4\n",
            "sri v1.16b, ", $t, ".16b, #2\n",
            "shl v2.16b, ", $h, ".16b, #2\n",
            "bic ", $t, ".16b, ", $l0, ".16b, v30.16b\n",
            "sri v2.16b, ", $t, ".16b, #2\n",
            "mov v3.16b, ", $h, ".16b\n",
            "bic ", $t, ".16b, ", $l1, ".16b, v30.16b\n",
            "sri v3.16b, ", $t, ".16b, #2\n",
        ) };
    }

    /// One 16-weight half's chunk-pair register `$src` (4 rows) into the
    /// values of its two chunks: `$lo` (the low nibbles) and `$src` itself
    /// (the high ones), `v30` = 0x0f, `v31` the values.
    #[rustfmt::skip]
    macro_rules! iq4xs_pair {
        ($lo:literal, $src:literal) => { concat!(
            "and ", $lo, ".16b, ", $src, ".16b, v30.16b\n",
            "ushr ", $src, ".16b, ", $src, ".16b, #4\n",
            "tbl ", $lo, ".16b, {{v31.16b}}, ", $lo, ".16b\n",
            "tbl ", $src, ".16b, {{v31.16b}}, ", $src, ".16b\n",
        ) };
    }

    /// One half's 8 `sdot` of one activation register `$a` into `$s0` (rows
    /// 0-3) and `$s1` (rows 4-7), the half's values in `v20` (chunk 0, rows
    /// 0-3), `v21` (rows 4-7), `$c1a`, `$c1b` (chunk 1), `v22`, `v23` (chunk
    /// 2), `$c3a`, `$c3b` (chunk 3).
    #[rustfmt::skip]
    macro_rules! iq4xs_sdots {
        ($s0:literal, $s1:literal, $a:literal, $c1a:literal, $c1b:literal, $c3a:literal, $c3b:literal) => { concat!(
            "sdot ", $s0, ".4s, v20.16b, ", $a, ".4b[0]\n",
            "sdot ", $s1, ".4s, v21.16b, ", $a, ".4b[0]\n",
            "sdot ", $s0, ".4s, ", $c1a, ".16b, ", $a, ".4b[1]\n",
            "sdot ", $s1, ".4s, ", $c1b, ".16b, ", $a, ".4b[1]\n",
            "sdot ", $s0, ".4s, v22.16b, ", $a, ".4b[2]\n",
            "sdot ", $s1, ".4s, v23.16b, ", $a, ".4b[2]\n",
            "sdot ", $s0, ".4s, ", $c3a, ".16b, ", $a, ".4b[3]\n",
            "sdot ", $s1, ".4s, ", $c3b, ".16b, ", $a, ".4b[3]\n",
        ) };
    }

    /// One sub-block of the GEMV: its 128 quant bytes and 32 activations
    /// (`x9`), both halves' `sdot` into `v4` / `v5`, scaled by `$sa` /
    /// `$sb` (rows 0-3 / 4-7, `i32`) into `v26` / `v25`.
    #[rustfmt::skip]
    macro_rules! iq4xs_gemv_sub {
        ($sa:literal, $sb:literal) => { concat!(
            "ld1 {{v10.16b, v11.16b, v12.16b, v13.16b}}, [{w}], #64\n",
            "ld1 {{v14.16b, v15.16b, v16.16b, v17.16b}}, [{w}], #64\n",
            "ld1 {{v18.16b, v19.16b}}, [x9], #32\n",
            "movi v4.16b, #0\n",
            "movi v5.16b, #0\n",
            iq4xs_pair!("v20", "v10"),
            iq4xs_pair!("v21", "v11"),
            iq4xs_pair!("v22", "v12"),
            iq4xs_pair!("v23", "v13"),
            iq4xs_sdots!("v4", "v5", "v18", "v10", "v11", "v12", "v13"),
            iq4xs_pair!("v20", "v14"),
            iq4xs_pair!("v21", "v15"),
            iq4xs_pair!("v22", "v16"),
            iq4xs_pair!("v23", "v17"),
            iq4xs_sdots!("v4", "v5", "v19", "v14", "v15", "v16", "v17"),
            "mla v26.4s, v4.4s, ", $sa, ".4s\n",
            "mla v25.4s, v5.4s, ", $sb, ".4s\n",
        ) };
    }

    /// The GEMV loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// Per super-block: 1 + 12 instructions unpack the 64 scales; per
    /// 32-weight sub-block (8 rows) 3 loads, 3 `sxtl` (scales to i32), 32
    /// to look up the 16 `sdot` operands, 2 `movi`, 16 `sdot`, 2 `mla`, and
    /// per two of them 3 `mov` (the next scales), the counter and the
    /// branch: about 60 instructions for 256 weights.
    ///
    /// # Safety
    /// `w` must point to `groups * nb * 1088` readable bytes, `qs` to `nb *
    /// 256`, `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb
    /// >= 1`, `groups >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemv_iq4xsx8_groups(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        out: *mut f32,
        groups: usize,
    ) {
        // SAFETY: per the function contract, every load stays inside `w`,
        // `qs`, `d` and the 16-byte table, every store inside `out`: per
        // super-block the loop reads 1088 bytes of `w` (16 + 48 + 8 x 128),
        // 256 bytes of `qs` and 4 bytes of `d`, for nb super-blocks per
        // group; each group stores 32 bytes of `out`. Only the listed
        // registers are written; no stack is used.
        unsafe {
            core::arch::asm!(
                "movi v30.16b, #0x0f",
                "ld1 {{v31.16b}}, [{kv}]",
                "2:",
                "movi v28.16b, #0", // float sums, rows 0-3
                "movi v27.16b, #0", // rows 4-7
                "mov x9, {qs}",
                "mov x10, {d}",
                "mov x11, {nb}",
                "3:",
                "ld1 {{v29.8h}}, [{w}], #16", // d of the 8 rows (f16)
                "ld1 {{v10.16b, v11.16b, v12.16b}}, [{w}], #48", // the scales' bytes
                iq4xs_scales!("v10", "v11", "v12", "v13"),
                "movi v26.16b, #0", // 4 * sumi, rows 0-3
                "movi v25.16b, #0", // rows 4-7
                "mov x12, #4",
                "4:",
                "sxtl v4.8h, v0.8b", // sub-block 2i's scales, 2i + 1's
                "sxtl2 v5.8h, v0.16b",
                "sxtl v6.4s, v4.4h",
                "sxtl2 v7.4s, v4.8h",
                "sxtl v8.4s, v5.4h",
                "sxtl2 v9.4s, v5.8h",
                iq4xs_gemv_sub!("v6", "v7"),
                iq4xs_gemv_sub!("v8", "v9"),
                "mov v0.16b, v1.16b", // the next two sub-blocks' scales
                "mov v1.16b, v2.16b",
                "mov v2.16b, v3.16b",
                "subs x12, x12, #1",
                "b.ne 4b",
                "ld1r {{v4.4s}}, [x10], #4", // d_a
                "fcvtl v5.4s, v29.4h",
                "fcvtl2 v6.4s, v29.8h",
                "scvtf v26.4s, v26.4s, #2", // sumi as f32, rounded once
                "scvtf v25.4s, v25.4s, #2",
                "fmul v5.4s, v5.4s, v4.4s", // d_w * d_a
                "fmul v6.4s, v6.4s, v4.4s",
                "fmul v26.4s, v5.4s, v26.4s",
                "fmul v25.4s, v6.4s, v25.4s",
                "fadd v28.4s, v28.4s, v26.4s",
                "fadd v27.4s, v27.4s, v25.4s",
                "subs x11, x11, #1",
                "b.ne 3b",
                "st1 {{v28.4s}}, [{out}], #16",
                "st1 {{v27.4s}}, [{out}], #16",
                "subs {groups}, {groups}, #1",
                "b.ne 2b",
                w = inout(reg) w => _,
                out = inout(reg) out => _,
                groups = inout(reg) groups => _,
                qs = in(reg) qs,
                d = in(reg) d,
                nb = in(reg) nb,
                kv = in(reg) IQ4_NL_TABLE.as_ptr(),
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

    /// One half (16 weights) of a sub-block in the tile: its 64 quant bytes
    /// looked up into `v20`..`v23` and `v8`..`v11`, each activation row's 16
    /// bytes (`q0`..`q3`), 8 `sdot` into two scratch sums, scaled by `v28`
    /// / `v29` (rows 0-3 / 4-7) into that row's accumulators (`v12 + 2i`,
    /// `v13 + 2i` for activation row `i`).
    #[rustfmt::skip]
    macro_rules! iq4xs_tile_half {
        () => { concat!(
            "ld1 {{v8.16b, v9.16b, v10.16b, v11.16b}}, [{w}], #64\n",
            "ld1 {{v4.16b}}, [{q0}], #16\n", // activations
            "ld1 {{v5.16b}}, [{q1}], #16\n",
            "ld1 {{v6.16b}}, [{q2}], #16\n",
            "ld1 {{v7.16b}}, [{q3}], #16\n",
            iq4xs_pair!("v20", "v8"),
            iq4xs_pair!("v21", "v9"),
            iq4xs_pair!("v22", "v10"),
            iq4xs_pair!("v23", "v11"),
            "movi v24.16b, #0\n",
            "movi v25.16b, #0\n",
            iq4xs_sdots!("v24", "v25", "v4", "v8", "v9", "v10", "v11"),
            "mla v12.4s, v24.4s, v28.4s\n",
            "mla v13.4s, v25.4s, v29.4s\n",
            "movi v26.16b, #0\n",
            "movi v27.16b, #0\n",
            iq4xs_sdots!("v26", "v27", "v5", "v8", "v9", "v10", "v11"),
            "mla v14.4s, v26.4s, v28.4s\n",
            "mla v15.4s, v27.4s, v29.4s\n",
            "movi v24.16b, #0\n",
            "movi v25.16b, #0\n",
            iq4xs_sdots!("v24", "v25", "v6", "v8", "v9", "v10", "v11"),
            "mla v16.4s, v24.4s, v28.4s\n",
            "mla v17.4s, v25.4s, v29.4s\n",
            "movi v26.16b, #0\n",
            "movi v27.16b, #0\n",
            iq4xs_sdots!("v26", "v27", "v7", "v8", "v9", "v10", "v11"),
            "mla v18.4s, v26.4s, v28.4s\n",
            "mla v19.4s, v27.4s, v29.4s\n",
        ) };
    }

    /// One row group x 4 activation rows: `acc[8i + r]` += row `r` . act
    /// row `i` (`acc` holds the running float sums between super-blocks).
    ///
    /// Per 32-weight sub-block: 2 x (1 + 4) loads, 3 `sxtl` (its scales
    /// to i32), 2 x 16 to look up the operands, then per activation row 4
    /// `movi`, 16 `sdot`, 4 `mla`: about 140 instructions for 8 x 4 x 32.
    ///
    /// # Safety
    /// `w` must point to `nb * 1088` readable bytes, `qs` and `d` to 4
    /// consecutive activation rows of `nb * 256` quants and `nb` floats,
    /// `acc` to 32 readable and writable floats, `nb >= 1`, and the CPU
    /// must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemm_iq4xsx8_tile4(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        acc: *mut f32,
        _stride: usize,
    ) {
        // SAFETY: per the function contract: per super-block the loop reads
        // 1088 bytes of `w`, 256 bytes of each activation row's quants and 4
        // bytes of its scales, for nb super-blocks, the 16-byte table, and
        // reads and writes the 128 bytes at `acc`. Only the listed registers
        // are written; no stack is used.
        unsafe {
            core::arch::asm!(
                "movi v30.16b, #0x0f",
                "ld1 {{v31.16b}}, [{kv}]",
                "add x16, {acc}, #64",
                "3:",
                "mov x15, {w}", // the super-block's d
                "add {w}, {w}, #16",
                "ld1 {{v4.16b, v5.16b, v6.16b}}, [{w}], #48", // the scales' bytes
                iq4xs_scales!("v4", "v5", "v6", "v7"),
                "movi v12.16b, #0", // 4 * sumi: act row i -> v(12+2i), v(13+2i)
                "movi v13.16b, #0",
                "movi v14.16b, #0",
                "movi v15.16b, #0",
                "movi v16.16b, #0",
                "movi v17.16b, #0",
                "movi v18.16b, #0",
                "movi v19.16b, #0",
                "mov x12, #4",
                "4:",
                "sxtl v28.8h, v0.8b", // sub-block 2i's scales
                "sxtl2 v29.4s, v28.8h",
                "sxtl v28.4s, v28.4h",
                iq4xs_tile_half!(),
                iq4xs_tile_half!(),
                "sxtl2 v28.8h, v0.16b", // sub-block 2i + 1's scales
                "sxtl2 v29.4s, v28.8h",
                "sxtl v28.4s, v28.4h",
                iq4xs_tile_half!(),
                iq4xs_tile_half!(),
                "mov v0.16b, v1.16b", // the next two sub-blocks' scales
                "mov v1.16b, v2.16b",
                "mov v2.16b, v3.16b",
                "subs x12, x12, #1",
                "b.ne 4b",
                "ld1 {{v4.8h}}, [x15]", // d_w
                "fcvtl v5.4s, v4.4h",
                "fcvtl2 v6.4s, v4.8h",
                "ld1 {{v7.s}}[0], [{d0}], #4", // d_a of the 4 act rows
                "ld1 {{v7.s}}[1], [{d1}], #4",
                "ld1 {{v7.s}}[2], [{d2}], #4",
                "ld1 {{v7.s}}[3], [{d3}], #4",
                "ld1 {{v20.4s, v21.4s, v22.4s, v23.4s}}, [{acc}]", // float sums, act rows 0-1
                "ld1 {{v24.4s, v25.4s, v26.4s, v27.4s}}, [x16]", // act rows 2-3
                "scvtf v12.4s, v12.4s, #2", // sumi as f32, rounded once
                "scvtf v13.4s, v13.4s, #2",
                "scvtf v14.4s, v14.4s, #2",
                "scvtf v15.4s, v15.4s, #2",
                "scvtf v16.4s, v16.4s, #2",
                "scvtf v17.4s, v17.4s, #2",
                "scvtf v18.4s, v18.4s, #2",
                "scvtf v19.4s, v19.4s, #2",
                "fmul v8.4s, v5.4s, v7.s[0]", // d_w * d_a
                "fmul v9.4s, v6.4s, v7.s[0]",
                "fmul v12.4s, v8.4s, v12.4s",
                "fmul v13.4s, v9.4s, v13.4s",
                "fadd v20.4s, v20.4s, v12.4s",
                "fadd v21.4s, v21.4s, v13.4s",
                "fmul v8.4s, v5.4s, v7.s[1]",
                "fmul v9.4s, v6.4s, v7.s[1]",
                "fmul v14.4s, v8.4s, v14.4s",
                "fmul v15.4s, v9.4s, v15.4s",
                "fadd v22.4s, v22.4s, v14.4s",
                "fadd v23.4s, v23.4s, v15.4s",
                "fmul v8.4s, v5.4s, v7.s[2]",
                "fmul v9.4s, v6.4s, v7.s[2]",
                "fmul v16.4s, v8.4s, v16.4s",
                "fmul v17.4s, v9.4s, v17.4s",
                "fadd v24.4s, v24.4s, v16.4s",
                "fadd v25.4s, v25.4s, v17.4s",
                "fmul v8.4s, v5.4s, v7.s[3]",
                "fmul v9.4s, v6.4s, v7.s[3]",
                "fmul v18.4s, v8.4s, v18.4s",
                "fmul v19.4s, v9.4s, v19.4s",
                "fadd v26.4s, v26.4s, v18.4s",
                "fadd v27.4s, v27.4s, v19.4s",
                "st1 {{v20.4s, v21.4s, v22.4s, v23.4s}}, [{acc}]",
                "st1 {{v24.4s, v25.4s, v26.4s, v27.4s}}, [x16]",
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
                kv = in(reg) IQ4_NL_TABLE.as_ptr(),
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

    entry_points!(
        q8_k[super::generic],
        gemv_iq4_xsx8_q8_k,
        gemm_iq4_xsx8_q8_k,
        GemmKernels {
            group_rows: IQ4XSX8_ROWS,
            block_bytes: IQ4XSX8_BLOCK_BYTES,
            row: gemv_iq4xsx8_groups,
            tile4: Some(gemm_iq4xsx8_tile4),
            small_tiles: None,
            strided: false,
        }
    );
}

/// x86_64: tiles of one row group (8 rows, one per 32-bit lane) x up to 4
/// activation rows, run by Q6_Kx8's driver (`k8_gemm`); AVX2 (`vpshufb`
/// looks the values up, `vpmaddubsw` with the sign trick), or `vpdpbusd`
/// with a VNNI form.
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::generic;
    use super::IQ4_NL_VALUES;
    use super::{IQ4XSX8_BLOCK_BYTES, IQ4XSX8_QUANTS_AT, IQ4XSX8_ROWS, IQ4XSX8_SUB_BYTES};
    use crate::layout::QK_K;
    use crate::x86_64::k8::{k8_entry, TILE_M};
    use crate::x86_64::{Dot, RUN};
    use core::arch::x86_64::*;

    k8_entry!(
        "IQ4_XSx8",
        gemv_iq4_xsx8_q8_k,
        gemm_iq4_xsx8_q8_k,
        IQ4XS,
        [iq4xs_tile, iq4xs_tile_avx_vnni, iq4xs_tile_avx512_vnni],
        iq4xs_tile_body,
        IQ4XSX8_BLOCK_BYTES,
        true,
        generic::gemm_iq4_xsx8_q8_k,
        wide = avx512::iq4xsx8_tile
    );

    /// The 64 scales of super-block `sb` as `i8` `ls - 32`, scale `8p + r`
    /// at index `8p + r`.
    ///
    /// # Safety
    /// `sb` must point to a whole super-block; SSE2 (the x86_64 baseline).
    #[inline(always)]
    unsafe fn scales(sb: *const u8) -> [i8; 64] {
        // SAFETY: the 48 bytes at 16..64 are inside the super-block (the
        // function contract); unaligned loads.
        unsafe {
            let l0 = _mm_loadu_si128(sb.add(16).cast());
            let l1 = _mm_loadu_si128(sb.add(32).cast());
            let h = _mm_loadu_si128(sb.add(48).cast());
            let m4 = _mm_set1_epi8(15);
            let m2 = _mm_set1_epi8(3);
            let lo = [
                _mm_and_si128(l0, m4),
                _mm_and_si128(l1, m4),
                _mm_and_si128(_mm_srli_epi16::<4>(l0), m4),
                _mm_and_si128(_mm_srli_epi16::<4>(l1), m4),
            ];
            let hi = [
                _mm_and_si128(h, m2),
                _mm_and_si128(_mm_srli_epi16::<2>(h), m2),
                _mm_and_si128(_mm_srli_epi16::<4>(h), m2),
                _mm_and_si128(_mm_srli_epi16::<6>(h), m2),
            ];
            let mut out = [0i8; 64];
            for m in 0..4 {
                // u = lo | hi << 4 = ls ^ 32, so (u ^ 32) - 32 = ls - 32.
                let u = _mm_or_si128(lo[m], _mm_slli_epi16::<4>(hi[m]));
                let v = _mm_sub_epi8(_mm_xor_si128(u, _mm_set1_epi8(32)), _mm_set1_epi8(32));
                _mm_storeu_si128(out.as_mut_ptr().add(16 * m).cast(), v);
            }
            out
        }
    }

    /// The body of the three tiles, inlined into each so that it is
    /// compiled with its caller's features (`DOT`: a [`Dot`] constant).
    ///
    /// Per 16-weight half: two 32-byte loads (chunk pairs 0-1 and 2-3, a row
    /// per 32-bit lane), `vpshufb` looks the nibbles' values up. AVX2: per
    /// chunk and activation row `vpmaddubsw(|v|, a sign(v))` (pairs at most
    /// 2 x 127 x 127 in magnitude, with no -128 activation), `vpmaddwd` to
    /// i32; the VNNI forms take `v + 128` as the unsigned byte and start
    /// each half from its run's `offsets` entry (`-128 * sum(a)`). Either
    /// gives the exact isum of the sub-block; `sumi += scale * isum`
    /// (`vpmulld`), per super-block `acc += (d_w * d_a) * sumi`, the
    /// reference's order.
    ///
    /// # Safety
    /// The AVX2 tile's contract; with a VNNI form `offsets` must hold `T *
    /// nb * 16` entries (row `t`'s run `k` at `t * nb * 16 + k`), and the
    /// CPU must implement the `DOT` form.
    #[inline(always)]
    unsafe fn iq4xs_tile_body<const T: usize, const DOT: u8>(
        wg: &[u8],
        qs: &[i8],
        d: &[f32],
        offsets: &[i32],
        nb: usize,
        res: &mut [[f32; IQ4XSX8_ROWS]; TILE_M],
    ) {
        // SAFETY: the loads read super-block `b < nb` of `wg` (its `d`,
        // scales and quants at their offsets inside 1088 bytes) and block
        // `b` of rows `t < T` of `qs`, `d` and (VNNI) `offsets` (the
        // function contract); unaligned; the CPU implements AVX2, FMA, F16C
        // and the `DOT` form.
        unsafe {
            debug_assert!(wg.len() >= nb * IQ4XSX8_BLOCK_BYTES && qs.len() >= T * nb * QK_K);
            debug_assert!(DOT == Dot::MADDUBS || offsets.len() >= T * nb * QK_K / RUN);
            let cols = nb * QK_K;
            let m4 = _mm256_set1_epi8(15);
            let values = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr().cast());
            let values = if DOT == Dot::MADDUBS {
                values
            } else {
                _mm_xor_si128(values, _mm_set1_epi8(i8::MIN))
            };
            let table = _mm256_setr_m128i(values, values);
            let ones = _mm256_set1_epi16(1);
            let mut acc = [_mm256_setzero_ps(); T];
            for b in 0..nb {
                let sb = wg.as_ptr().add(b * IQ4XSX8_BLOCK_BYTES);
                let sc = scales(sb);
                let mut sumi = [_mm256_setzero_si256(); T];
                for p in 0..QK_K / 32 {
                    let scale =
                        _mm256_cvtepi8_epi32(_mm_loadl_epi64(sc.as_ptr().add(8 * p).cast()));
                    let sub = sb.add(IQ4XSX8_QUANTS_AT + IQ4XSX8_SUB_BYTES * p);
                    let mut isum = [_mm256_setzero_si256(); T];
                    for h in 0..2 {
                        let q01 = _mm256_loadu_si256(sub.add(64 * h).cast());
                        let q23 = _mm256_loadu_si256(sub.add(64 * h + 32).cast());
                        let v = [
                            _mm256_shuffle_epi8(table, _mm256_and_si256(q01, m4)),
                            _mm256_shuffle_epi8(
                                table,
                                _mm256_and_si256(_mm256_srli_epi16::<4>(q01), m4),
                            ),
                            _mm256_shuffle_epi8(table, _mm256_and_si256(q23, m4)),
                            _mm256_shuffle_epi8(
                                table,
                                _mm256_and_si256(_mm256_srli_epi16::<4>(q23), m4),
                            ),
                        ];
                        let at = b * QK_K + 32 * p + 16 * h;
                        if DOT == Dot::MADDUBS {
                            let abs = v.map(|x| _mm256_sign_epi8(x, x));
                            for (t, isum_t) in isum.iter_mut().enumerate() {
                                let a = qs.as_ptr().add(t * cols + at);
                                for c in 0..4 {
                                    let av = _mm256_set1_epi32(
                                        a.add(4 * c).cast::<i32>().read_unaligned(),
                                    );
                                    let pr =
                                        _mm256_maddubs_epi16(abs[c], _mm256_sign_epi8(av, v[c]));
                                    *isum_t =
                                        _mm256_add_epi32(*isum_t, _mm256_madd_epi16(pr, ones));
                                }
                            }
                        } else {
                            for (t, isum_t) in isum.iter_mut().enumerate() {
                                let a = qs.as_ptr().add(t * cols + at);
                                let run = (t * cols + at) / RUN;
                                let mut s = _mm256_set1_epi32(*offsets.get_unchecked(run));
                                for (c, vc) in v.iter().enumerate() {
                                    let av = _mm256_set1_epi32(
                                        a.add(4 * c).cast::<i32>().read_unaligned(),
                                    );
                                    s = if DOT == Dot::AVX_VNNI {
                                        crate::x86_64::dpbusd_vex(s, *vc, av)
                                    } else {
                                        _mm256_dpbusd_epi32(s, *vc, av)
                                    };
                                }
                                *isum_t = _mm256_add_epi32(*isum_t, s);
                            }
                        }
                    }
                    for (sumi_t, isum_t) in sumi.iter_mut().zip(isum) {
                        *sumi_t = _mm256_add_epi32(*sumi_t, _mm256_mullo_epi32(scale, isum_t));
                    }
                }
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                    let v = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi[t]));
                    *acc_t = _mm256_add_ps(*acc_t, v);
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
        use super::{scales, IQ4_NL_VALUES};
        use crate::layout::QK_K;
        use crate::layouts::iq4xs::{IQ4XSX8_BLOCK_BYTES, IQ4XSX8_QUANTS_AT, IQ4XSX8_SUB_BYTES};
        use crate::x86_64::gemm_vnni::avx512::{
            pair_blocks, pair_f16, pair_halves, run_dot, store_pair_rows,
        };
        use crate::x86_64::gemm_vnni::{for_each_row, TILE_M};
        use crate::x86_64::RUN;
        use core::arch::x86_64::*;

        /// Two IQ4_XSx8 row groups `wa`, `wb` (16 rows) against `T`
        /// activation rows: `res[t]` = the 8 rows of `wa`, then the 8 of
        /// `wb`.
        ///
        /// The 256-bit VNNI tile's arithmetic on twice the rows: per
        /// 16-weight half, the chunk pairs of `wa` and of `wb` fill the two
        /// 256-bit halves of one register (lane `i` = row `i`), `vpshufb`
        /// looks the nibbles up as `v + 128` (unsigned); per activation row
        /// four `vpdpbusd` from the run's `offsets` entry (`-128 * sum(a)`)
        /// give the exact `isum`; per 32-weight sub-block `sumi += scale *
        /// isum` (`vpmulld`), per super-block `acc + (d_w * d_a) * sumi`, the
        /// reference's order.
        ///
        /// # Safety
        /// `wa.len()` and `wb.len()` must be at least `nb * 1088`, `qs.len()`
        /// at least `T * nb * 256`, `d.len()` at least `T * nb`,
        /// `offsets.len()` at least `T * nb * 16` (row `t`'s run `k` at `t *
        /// nb * 16 + k`), `1 <= T <= TILE_M`, and the CPU must implement
        /// AVX512-VNNI with AVX512 F/BW/VL.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        pub(crate) unsafe fn iq4xsx8_tile<const T: usize>(
            wa: &[u8],
            wb: &[u8],
            qs: &[i8],
            d: &[f32],
            offsets: &[i32],
            nb: usize,
            res: &mut [[f32; 16]; TILE_M],
        ) {
            debug_assert!(T <= TILE_M);
            debug_assert!(
                wa.len() >= nb * IQ4XSX8_BLOCK_BYTES && wb.len() >= nb * IQ4XSX8_BLOCK_BYTES
            );
            debug_assert!(qs.len() >= T * nb * QK_K && d.len() >= T * nb);
            debug_assert!(offsets.len() >= T * nb * QK_K / RUN);
            let (cols, runs) = (nb * QK_K, nb * QK_K / RUN);
            let m4 = _mm512_set1_epi8(15);
            // SAFETY: the 16 values are readable.
            let values = unsafe { _mm_loadu_si128(IQ4_NL_VALUES.as_ptr().cast()) };
            let table = _mm512_broadcast_i32x4(_mm_xor_si128(values, _mm_set1_epi8(i8::MIN)));
            let mut acc = [_mm512_setzero_ps(); T];
            for b in 0..nb {
                // SAFETY: b < nb, both groups hold `nb` super-blocks (the
                // function contract).
                let (sa, sb) = unsafe { pair_blocks(wa, wb, b, nb, IQ4XSX8_BLOCK_BYTES) };
                // SAFETY: whole super-blocks (above).
                let (sca, scb) = unsafe { (scales(sa), scales(sb)) };
                let mut sumi = [_mm512_setzero_si512(); T];
                for p in 0..QK_K / 32 {
                    // SAFETY: scales 8p .. 8p + 8 of each (p < 8).
                    let scale = unsafe {
                        _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(
                            _mm_loadl_epi64(sca.as_ptr().add(8 * p).cast()),
                            _mm_loadl_epi64(scb.as_ptr().add(8 * p).cast()),
                        ))
                    };
                    let sub = IQ4XSX8_QUANTS_AT + IQ4XSX8_SUB_BYTES * p;
                    let mut isum = [_mm512_setzero_si512(); T];
                    for h in 0..2 {
                        // SAFETY: the half's 64 bytes at `sub + 64h` of both
                        // super-blocks (inside their 1088); unaligned loads.
                        let (q01, q23) = unsafe {
                            let (ga, gb) = (sa.add(sub + 64 * h), sb.add(sub + 64 * h));
                            (pair_halves(ga, gb), pair_halves(ga.add(32), gb.add(32)))
                        };
                        let v = [
                            _mm512_shuffle_epi8(table, _mm512_and_si512(q01, m4)),
                            _mm512_shuffle_epi8(
                                table,
                                _mm512_and_si512(_mm512_srli_epi16::<4>(q01), m4),
                            ),
                            _mm512_shuffle_epi8(table, _mm512_and_si512(q23, m4)),
                            _mm512_shuffle_epi8(
                                table,
                                _mm512_and_si512(_mm512_srli_epi16::<4>(q23), m4),
                            ),
                        ];
                        let at = b * QK_K + 32 * p + 16 * h;
                        for_each_row!(T, |t| {
                            // SAFETY: row t < T, run `(t * cols + at) / 16` <
                            // its offsets and bytes `t * cols + at ..` + 16 of
                            // `qs` (the function contract); unaligned reads.
                            let (off, ap) = unsafe {
                                (
                                    *offsets.get_unchecked(t * runs + at / RUN),
                                    qs.as_ptr().add(t * cols + at).cast::<i32>(),
                                )
                            };
                            // SAFETY: the run's 16 bytes (above).
                            let s = unsafe { run_dot(off, ap, &v) };
                            isum[t] = _mm512_add_epi32(isum[t], s);
                        });
                    }
                    for_each_row!(T, |t| {
                        sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(scale, isum[t]));
                    });
                }
                // SAFETY: bytes 0..16 of both super-blocks: the rows' f16 `d`.
                let dw = unsafe { pair_f16(sa, sb) };
                for_each_row!(T, |t| {
                    // SAFETY: t < T, b < nb (the function contract).
                    let da = _mm512_set1_ps(unsafe { *d.get_unchecked(t * nb + b) });
                    let v = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(sumi[t]));
                    acc[t] = _mm512_add_ps(acc[t], v);
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
