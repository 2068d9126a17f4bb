//! IQ3_Sx8, the whole layout in one file: GGUF IQ3_S super-blocks repacked
//! 8 rows at a time in exactly the GGUF bytes' size (3.4375 bits per
//! weight), every value kept exactly (docs/kernels.md, "IQ3_XXSx8 and
//! IQ3_Sx8"). Here are its grid, geometry and byte order, its repacker (its
//! inverse, which only the tests use, is `kestrel_tests::unpack_iq3_s`),
//! its scalar specification ([`generic`]) and its kernels: aarch64 a GEMV
//! loop over the codebook family's sub-block text, x86_64 tiles over its
//! body ([`super::iq3`]), the one of the build also named [`arch`].
//!
//! A GGUF IQ3_S block (110 bytes, 256 weights) is `d: f16`, `qs[64]` (the
//! low 8 bits of each 4-weight chunk's index into [`IQ3S_GRID`]), `qh[8]`
//! (bit `c` of `qh[p]` the ninth bit of chunk `c` of sub-block `p`),
//! `signs[32]` (bit `j` of `signs[4p + k]` the sign of weight `8k + j` of
//! sub-block `p`) and `scales[4]` (the 4-bit scale `ls` of sub-block `p`
//! in nibble `p % 2` of `scales[p / 2]`). Weight `4c + j` of sub-block `p`
//! is `d * (1 + 2 ls) * g * sign`, `g` byte `j` of the chunk's grid point
//! (as `dequantize_row_iq3_s`).
//!
//! For row group `g` and super-block column `b` the IQ3_Sx8 super-block
//! (880 bytes, at `(g * nb + b) * 880`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * `16 + 32p + 4r + k` (`k` 0..4): `signs[4p + k]` of row `r`;
//! * `272 + 64p + 8c + r`: `qs[8p + c]` of row `r`;
//! * `784 + 8p + r`: `qh[p]` of row `r`;
//! * `848 + 4p + r % 4`: `ls` of sub-block `p` of row `r` in the low
//!   nibble (rows 0-3) or the high one (rows 4-7).
//!
//! So a sub-block's 8 sign words are one 256-bit load, a chunk's 8 low
//! index bytes are consecutive, and its 8 scales are 4 bytes.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`).

use super::iq3::{component, signed, IQ3_ROWS};
use crate::layout::QK_K;
use crate::shape::ShapeError;

/// Bytes of one GGUF IQ3_S super-block (256 weights).
pub const IQ3_S_BLOCK_BYTES: usize = 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64;
/// Rows in one IQ3_Sx8 row group.
pub const IQ3SX8_ROWS: usize = IQ3_ROWS;
/// Offset of the sign words in a super-block.
pub const IQ3SX8_WORDS_AT: usize = 2 * IQ3SX8_ROWS;
/// Offset of the chunk indices' low bytes.
pub const IQ3SX8_INDEX_AT: usize = IQ3SX8_WORDS_AT + IQ3SX8_ROWS * QK_K / 8;
/// Offset of the ninth index bits.
pub const IQ3SX8_HIGH_AT: usize = IQ3SX8_INDEX_AT + IQ3SX8_ROWS * QK_K / 4;
/// Offset of the scales.
pub const IQ3SX8_SCALES_AT: usize = IQ3SX8_HIGH_AT + IQ3SX8_ROWS * QK_K / 32;
/// Bytes of one IQ3_Sx8 super-block (8 rows x 256 weights): 8 GGUF blocks'
/// worth.
pub const IQ3SX8_BLOCK_BYTES: usize = IQ3SX8_SCALES_AT + IQ3SX8_ROWS * QK_K / 64;

const _: () = assert!(IQ3_S_BLOCK_BYTES == 110 && IQ3SX8_INDEX_AT == 272);
const _: () = assert!(IQ3SX8_HIGH_AT == 784 && IQ3SX8_SCALES_AT == 848);
const _: () = assert!(IQ3SX8_BLOCK_BYTES == IQ3SX8_ROWS * IQ3_S_BLOCK_BYTES);

/// Bytes of a `rows x cols` matrix in IQ3_Sx8, padding rows included
/// (`None`: it overflows).
pub fn iq3_sx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, IQ3SX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF IQ3_S (`None`: it
/// overflows).
pub fn iq3_s_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, IQ3_S_BLOCK_BYTES)
}

/// Where the low index byte of chunk `c` (0..64) of row `r` is.
#[inline]
pub fn index_place(r: usize, c: usize) -> usize {
    IQ3SX8_INDEX_AT + 64 * (c / 8) + 8 * (c % 8) + r
}

/// Where sign byte `k` (0..32, GGUF `signs[k]`) of row `r` is.
#[inline]
pub fn sign_place(r: usize, k: usize) -> usize {
    IQ3SX8_WORDS_AT + 32 * (k / 4) + 4 * r + k % 4
}

/// Where `qh[p]` of row `r` is.
#[inline]
pub fn high_place(r: usize, p: usize) -> usize {
    IQ3SX8_HIGH_AT + 8 * p + r
}

/// Where the scale of sub-block `p` of row `r` is: its byte and shift.
#[inline]
pub fn scale_place(r: usize, p: usize) -> (usize, u32) {
    (IQ3SX8_SCALES_AT + 4 * p + r % 4, 4 * (r / 4) as u32)
}

/// Writes one IQ3_Sx8 super-block from up to 8 GGUF IQ3_S blocks (`src[r]`
/// for row `r`; missing rows are padding).
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[..2]);
        for c in 0..QK_K / 4 {
            sb[index_place(r, c)] = block[2 + c];
        }
        for p in 0..QK_K / 32 {
            sb[high_place(r, p)] = block[66 + p];
            let (at, shift) = scale_place(r, p);
            sb[at] |= ((block[106 + p / 2] >> (4 * (p % 2))) & 15) << shift;
        }
        for k in 0..QK_K / 8 {
            sb[sign_place(r, k)] = block[74 + k];
        }
    }
}

/// Repacks a row-major GGUF IQ3_S matrix (`rows x cols`, `cols` a multiple
/// of 256) into IQ3_Sx8 (`out`: [`iq3_sx8_bytes`] bytes).
pub fn repack_iq3_s(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "iq3_s columns (a multiple of 256)",
            "iq3_s source bytes",
            "iq3_sx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (IQ3_S_BLOCK_BYTES, IQ3SX8_BLOCK_BYTES),
        pack_super_block,
    )
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::{component, high_place, index_place, scale_place, sign_place, signed};
    use super::{IQ3SX8_BLOCK_BYTES, IQ3SX8_ROWS, IQ3S_GRID};
    use crate::generic::gemm_k_groups;

    /// The signed value `g * sign` (-15..=15) of weight `i` (0..256) of row
    /// `r` (0..8) in an IQ3_Sx8 super-block.
    #[inline]
    pub fn iq3sx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let (p, w) = (i / 32, i % 32);
        let c = w / 4;
        let high = (sb[high_place(r, p)] >> c) & 1;
        let index = sb[index_place(r, 8 * p + c)] as usize | (high as usize) << 8;
        let at = sign_place(r, 4 * p);
        let word = u32::from_le_bytes([sb[at], sb[at + 1], sb[at + 2], sb[at + 3]]);
        signed(word, w, component(IQ3S_GRID[index], w % 4))
    }

    /// The scale `2 ls + 1` (1..=31) of sub-block `p` (0..8) of row `r`.
    #[inline]
    pub fn iq3sx8_scale(sb: &[u8], r: usize, p: usize) -> i32 {
        let (at, shift) = scale_place(r, p);
        2 * ((sb[at] >> shift) & 15) as i32 + 1
    }

    /// The eight rows of one IQ3_Sx8 row group dotted with one Q8_K
    /// activation row.
    pub fn iq3sx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; IQ3SX8_ROWS] {
        crate::layouts::iq3::group_dot(
            IQ3SX8_BLOCK_BYTES,
            (iq3sx8_weight, |sb, r, h| iq3sx8_scale(sb, r, h / 2)),
            0,
            group,
            act_qs,
            act_d,
        )
    }

    forwarding_entry!(
        /// GEMV, IQ3_Sx8 weights x one Q8_K activation row (shapes as
        /// [`gemv_q6_kx8_q8_k`](crate::generic::gemv_q6_kx8_q8_k), with
        /// 880-byte super-blocks).
        q8_k gemv gemv_iq3_sx8_q8_k => gemm_iq3_sx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ3_Sx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::generic::gemm_q6_kx8_q8_k), with
        /// 880-byte super-blocks).
        q8_k gemm gemm_iq3_sx8_q8_k => gemm_k_groups [IQ3SX8_BLOCK_BYTES, |g, q, d, _| iq3sx8_group_dot(g, q, d)]
    );
}

/// aarch64: the GEMV loop (per sub-block the scales from 4 bytes, per chunk
/// pair the 9-bit indices made halfwords with `zip`, then the family's
/// sub-block text), and a tile that runs it per activation row.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{IQ3SX8_BLOCK_BYTES, IQ3S_GRID};
    use crate::layouts::iq3::aarch64::{
        iq3_entry, iq3_finish, iq3_setup, iq3_sub_block, IQ3_CONSTANTS,
    };
    use crate::layouts::iq3::{decode_super_block, Decoded};

    /// One grid point: halfword `$index` of `$src` (its 9-bit index), the
    /// point, into lane `$lane` of `$dst`.
    #[rustfmt::skip]
    macro_rules! s_lookup {
        ($src:literal, $dst:literal, $lane:literal, $index:literal) => { concat!(
            "umov w15, ", $src, ".h[", $index, "]\n",
            "ldr w15, [{grid}, x15, lsl #2]\n",
            "mov ", $dst, ".s[", $lane, "], w15\n",
        ) };
    }

    /// A chunk pair's indices: its 16 low bytes (`x13`: the first chunk's 8
    /// rows, then the second's) and the ninth bits (`v13`: the 8 rows' `qh`
    /// twice, shifted right 2 per pair; `v21` shifts the second copy one
    /// more, `v22` = 1) zipped into halfwords, `v10` the first chunk's, `v11`
    /// the second's.
    #[rustfmt::skip]
    macro_rules! s_prep {
        ($pair:literal) => { concat!(
            "ld1 {{v12.16b}}, [x13], #16\n",
            "ushl v15.16b, v13.16b, v21.16b\n",
            "and v15.16b, v15.16b, v22.16b\n",
            "zip1 v10.16b, v12.16b, v15.16b\n",
            "zip2 v11.16b, v12.16b, v15.16b\n",
            "ushr v13.16b, v13.16b, #2\n",
        ) };
    }

    /// The GEMV loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// Per 32-weight sub-block (8 rows): 4 loads, 10 instructions for the
    /// scales `2 ls + 1`, 6 per chunk pair for the indices, and per chunk 24
    /// to look up its 8 points, 8 to sign them, 2 `sdot`: about 310
    /// instructions for 8 x 32 weights.
    ///
    /// # Safety
    /// `w` must point to `groups * nb * 880` readable bytes, `qs` to `nb *
    /// 256`, `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb
    /// >= 1`, `groups >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemv_iq3sx8_groups(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        out: *mut f32,
        groups: usize,
    ) {
        // SAFETY: per the function contract, every load stays inside `w`,
        // `qs`, `d`, the 32 bytes of constants and the grid (indices have 9
        // bits, the grid has 512 points), every store inside `out`: per
        // super-block the loop reads 880 bytes of `w` (16 + 8 x (32 + 64 +
        // 8 + 4)), 256 bytes of `qs` and 4 bytes of `d`, for nb super-blocks
        // per group; each group stores 32 bytes of `out`. Only the listed
        // registers are written; no stack is used.
        unsafe {
            core::arch::asm!(
                iq3_setup!(),
                "movi v20.16b, #0x0f",
                "movi v21.2d, #0xffffffffffffffff", // shifts: 0 (bytes 0-7), 1 (8-15)
                "mov v21.d[0], xzr",
                "2:",
                "movi v28.16b, #0", // float sums, rows 0-3
                "movi v27.16b, #0", // rows 4-7
                "mov x9, {qs}",
                "mov x10, {d}",
                "mov x11, {nb}",
                "3:",
                "ld1 {{v29.8h}}, [{w}], #16", // d of the 8 rows (f16)
                "add x13, {w}, #256", // low index bytes
                "add x14, {w}, #768", // ninth bits
                "add x16, {w}, #832", // scales
                "movi v26.16b, #0", // sumi, rows 0-3
                "movi v25.16b, #0", // rows 4-7
                "mov x12, #8",
                "4:",
                "ld1 {{v0.4s, v1.4s}}, [{w}], #32", // sign words, rows 0-3 / 4-7
                "ld1 {{v18.16b, v19.16b}}, [x9], #32", // 32 activations
                "ld1r {{v13.2d}}, [x14], #8", // qh of the 8 rows, twice
                "ldr s17, [x16], #4", // the 8 scales' nibbles
                "and v2.8b, v17.8b, v20.8b",
                "ushr v3.8b, v17.8b, #4",
                "uxtl v2.8h, v2.8b",
                "uxtl v3.8h, v3.8b",
                "uxtl v2.4s, v2.4h",
                "uxtl v3.4s, v3.4h",
                "shl v2.4s, v2.4s, #1", // 2 ls + 1
                "shl v3.4s, v3.4s, #1",
                "orr v2.4s, #1",
                "orr v3.4s, #1",
                iq3_sub_block!(s_lookup, s_prep),
                "subs x12, x12, #1",
                "b.ne 4b",
                "mov {w}, x16", // the next super-block
                iq3_finish!(""),
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
                kc = in(reg) IQ3_CONSTANTS.as_ptr(),
                grid = in(reg) IQ3S_GRID.as_ptr(),
                out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                out("x14") _, out("x15") _, out("x16") _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v15") _,
                out("v16") _, out("v17") _, out("v18") _, out("v19") _, out("v20") _,
                out("v21") _, out("v22") _, out("v23") _, out("v24") _,
                out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
                out("v30") _, out("v31") _,
                options(nostack),
            );
        }
    }

    /// Decodes one IQ3_Sx8 super-block for the prompt path.
    fn decode(sb: &[u8], out: &mut Decoded) {
        let front = |r, p| {
            let at = super::sign_place(r, 4 * p);
            let word = u32::from_le_bytes([sb[at], sb[at + 1], sb[at + 2], sb[at + 3]]);
            let (s, shift) = super::scale_place(r, p);
            let scale = 2 * ((sb[s] >> shift) & 15) as i32 + 1;
            (word, [scale; 2])
        };
        let point = |r, p, c: usize| {
            let high = (sb[super::high_place(r, p)] >> c) as usize & 1;
            IQ3S_GRID[sb[super::index_place(r, 8 * p + c)] as usize | high << 8]
        };
        decode_super_block(sb, out, front, point);
    }

    iq3_entry!(
        gemv_iq3_sx8_q8_k,
        gemm_iq3_sx8_q8_k,
        gemv_iq3sx8_groups,
        decode,
        IQ3SX8_BLOCK_BYTES,
        1.0
    );
}

/// x86_64: tiles of one row group (8 rows, one per 32-bit lane) x up to 4
/// activation rows over the codebook family's body, run by Q6_Kx8's driver
/// (`k8_gemm`).
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::{IQ3SX8_BLOCK_BYTES, IQ3SX8_HIGH_AT, IQ3SX8_INDEX_AT};
    use super::{IQ3SX8_SCALES_AT, IQ3SX8_WORDS_AT};
    use crate::layouts::iq3::x86_64::{iq3_entry, Front, FRONT_S};

    iq3_entry!(
        "IQ3_Sx8",
        gemv_iq3_sx8_q8_k,
        gemm_iq3_sx8_q8_k,
        gemm_iq3_sx8_q8_k_tiles,
        IQ3S,
        [iq3s_tile, iq3s_tile_avx_vnni, iq3s_tile_avx512_vnni],
        iq3s_tile_body,
        IQ3SX8_BLOCK_BYTES,
        FRONT_S
    );

    /// The layout's places for the family's x86 code.
    fn front() -> Front {
        Front {
            bytes: IQ3SX8_BLOCK_BYTES,
            index_at: IQ3SX8_INDEX_AT,
            words_at: IQ3SX8_WORDS_AT,
            high_at: IQ3SX8_HIGH_AT,
            scales_at: IQ3SX8_SCALES_AT,
            grid: super::IQ3S_GRID.as_ptr().cast(),
            factor: 1.0,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ3_S grid: point `i`'s component `k` is byte `k` of entry `i` (the
/// GGUF format's codebook; `tests/vectors/gen_iq3_grids.py` prints it from
/// gguf-py's copy).
pub static IQ3S_GRID: [u32; 512] = [
    0x01010101, 0x01010103, 0x01010105, 0x0101010b, 0x0101010f, 0x01010301, 0x01010303, 0x01010305,
    0x01010309, 0x0101030d, 0x01010501, 0x01010503, 0x0101050b, 0x01010707, 0x01010901, 0x01010905,
    0x0101090b, 0x0101090f, 0x01010b03, 0x01010b07, 0x01010d01, 0x01010d05, 0x01010f03, 0x01010f09,
    0x01010f0f, 0x01030101, 0x01030103, 0x01030105, 0x01030109, 0x01030301, 0x01030303, 0x0103030b,
    0x01030501, 0x01030507, 0x0103050f, 0x01030703, 0x0103070b, 0x01030909, 0x01030d03, 0x01030d0b,
    0x01030f05, 0x01050101, 0x01050103, 0x0105010b, 0x0105010f, 0x01050301, 0x01050307, 0x0105030d,
    0x01050503, 0x0105050b, 0x01050701, 0x01050709, 0x01050905, 0x0105090b, 0x0105090f, 0x01050b03,
    0x01050b07, 0x01050f01, 0x01050f07, 0x01070107, 0x01070303, 0x0107030b, 0x01070501, 0x01070505,
    0x01070703, 0x01070707, 0x0107070d, 0x01070909, 0x01070b01, 0x01070b05, 0x01070d0f, 0x01070f03,
    0x01070f0b, 0x01090101, 0x01090307, 0x0109030f, 0x01090503, 0x01090509, 0x01090705, 0x01090901,
    0x01090907, 0x01090b03, 0x01090f01, 0x010b0105, 0x010b0109, 0x010b0501, 0x010b0505, 0x010b050d,
    0x010b0707, 0x010b0903, 0x010b090b, 0x010b090f, 0x010b0d0d, 0x010b0f07, 0x010d010d, 0x010d0303,
    0x010d0307, 0x010d0703, 0x010d0b05, 0x010d0f03, 0x010f0101, 0x010f0105, 0x010f0109, 0x010f0501,
    0x010f0505, 0x010f050d, 0x010f0707, 0x010f0b01, 0x010f0b09, 0x03010101, 0x03010103, 0x03010105,
    0x03010109, 0x03010301, 0x03010303, 0x03010307, 0x0301030b, 0x0301030f, 0x03010501, 0x03010505,
    0x03010703, 0x03010709, 0x0301070d, 0x03010b09, 0x03010b0d, 0x03010d03, 0x03010f05, 0x03030101,
    0x03030103, 0x03030107, 0x0303010d, 0x03030301, 0x03030309, 0x03030503, 0x03030701, 0x03030707,
    0x03030903, 0x03030b01, 0x03030b05, 0x03030f01, 0x03030f0d, 0x03050101, 0x03050305, 0x0305030b,
    0x0305030f, 0x03050501, 0x03050509, 0x03050705, 0x03050901, 0x03050907, 0x03050b0b, 0x03050d01,
    0x03050f05, 0x03070103, 0x03070109, 0x0307010f, 0x03070301, 0x03070307, 0x03070503, 0x0307050f,
    0x03070701, 0x03070709, 0x03070903, 0x03070d05, 0x03070f01, 0x03090107, 0x0309010b, 0x03090305,
    0x03090309, 0x03090703, 0x03090707, 0x03090905, 0x0309090d, 0x03090b01, 0x03090b09, 0x030b0103,
    0x030b0301, 0x030b0307, 0x030b0503, 0x030b0701, 0x030b0705, 0x030b0b03, 0x030d0501, 0x030d0509,
    0x030d050f, 0x030d0909, 0x030d090d, 0x030f0103, 0x030f0107, 0x030f0301, 0x030f0305, 0x030f0503,
    0x030f070b, 0x030f0903, 0x030f0d05, 0x030f0f01, 0x05010101, 0x05010103, 0x05010107, 0x0501010b,
    0x0501010f, 0x05010301, 0x05010305, 0x05010309, 0x0501030d, 0x05010503, 0x05010507, 0x0501050f,
    0x05010701, 0x05010705, 0x05010903, 0x05010907, 0x0501090b, 0x05010b01, 0x05010b05, 0x05010d0f,
    0x05010f01, 0x05010f07, 0x05010f0b, 0x05030101, 0x05030105, 0x05030301, 0x05030307, 0x0503030f,
    0x05030505, 0x0503050b, 0x05030703, 0x05030709, 0x05030905, 0x05030b03, 0x05050103, 0x05050109,
    0x0505010f, 0x05050503, 0x05050507, 0x05050701, 0x0505070f, 0x05050903, 0x05050b07, 0x05050b0f,
    0x05050f03, 0x05050f09, 0x05070101, 0x05070105, 0x0507010b, 0x05070303, 0x05070505, 0x05070509,
    0x05070703, 0x05070707, 0x05070905, 0x05070b01, 0x05070d0d, 0x05090103, 0x0509010f, 0x05090501,
    0x05090507, 0x05090705, 0x0509070b, 0x05090903, 0x05090f05, 0x05090f0b, 0x050b0109, 0x050b0303,
    0x050b0505, 0x050b070f, 0x050b0901, 0x050b0b07, 0x050b0f01, 0x050d0101, 0x050d0105, 0x050d010f,
    0x050d0503, 0x050d0b0b, 0x050d0d03, 0x050f010b, 0x050f0303, 0x050f050d, 0x050f0701, 0x050f0907,
    0x050f0b01, 0x07010105, 0x07010303, 0x07010307, 0x0701030b, 0x0701030f, 0x07010505, 0x07010703,
    0x07010707, 0x0701070b, 0x07010905, 0x07010909, 0x0701090f, 0x07010b03, 0x07010d07, 0x07010f03,
    0x07030103, 0x07030107, 0x0703010b, 0x07030309, 0x07030503, 0x07030507, 0x07030901, 0x07030d01,
    0x07030f05, 0x07030f0d, 0x07050101, 0x07050305, 0x07050501, 0x07050705, 0x07050709, 0x07050b01,
    0x07070103, 0x07070301, 0x07070309, 0x07070503, 0x07070507, 0x0707050f, 0x07070701, 0x07070903,
    0x07070907, 0x0707090f, 0x07070b0b, 0x07070f07, 0x07090107, 0x07090303, 0x0709030d, 0x07090505,
    0x07090703, 0x07090b05, 0x07090d01, 0x07090d09, 0x070b0103, 0x070b0301, 0x070b0305, 0x070b050b,
    0x070b0705, 0x070b0909, 0x070b0b0d, 0x070b0f07, 0x070d030d, 0x070d0903, 0x070f0103, 0x070f0107,
    0x070f0501, 0x070f0505, 0x070f070b, 0x09010101, 0x09010109, 0x09010305, 0x09010501, 0x09010509,
    0x0901050f, 0x09010705, 0x09010903, 0x09010b01, 0x09010f01, 0x09030105, 0x0903010f, 0x09030303,
    0x09030307, 0x09030505, 0x09030701, 0x0903070b, 0x09030907, 0x09030b03, 0x09030b0b, 0x09050103,
    0x09050107, 0x09050301, 0x0905030b, 0x09050503, 0x09050707, 0x09050901, 0x09050b0f, 0x09050d05,
    0x09050f01, 0x09070109, 0x09070303, 0x09070307, 0x09070501, 0x09070505, 0x09070703, 0x0907070b,
    0x09090101, 0x09090105, 0x09090509, 0x0909070f, 0x09090901, 0x09090f03, 0x090b010b, 0x090b010f,
    0x090b0503, 0x090b0d05, 0x090d0307, 0x090d0709, 0x090d0d01, 0x090f0301, 0x090f030b, 0x090f0701,
    0x090f0907, 0x090f0b03, 0x0b010105, 0x0b010301, 0x0b010309, 0x0b010505, 0x0b010901, 0x0b010909,
    0x0b01090f, 0x0b010b05, 0x0b010d0d, 0x0b010f09, 0x0b030103, 0x0b030107, 0x0b03010b, 0x0b030305,
    0x0b030503, 0x0b030705, 0x0b030f05, 0x0b050101, 0x0b050303, 0x0b050507, 0x0b050701, 0x0b05070d,
    0x0b050b07, 0x0b070105, 0x0b07010f, 0x0b070301, 0x0b07050f, 0x0b070909, 0x0b070b03, 0x0b070d0b,
    0x0b070f07, 0x0b090103, 0x0b090109, 0x0b090501, 0x0b090705, 0x0b09090d, 0x0b0b0305, 0x0b0b050d,
    0x0b0b0b03, 0x0b0b0b07, 0x0b0d0905, 0x0b0f0105, 0x0b0f0109, 0x0b0f0505, 0x0d010303, 0x0d010307,
    0x0d01030b, 0x0d010703, 0x0d010707, 0x0d010d01, 0x0d030101, 0x0d030501, 0x0d03050f, 0x0d030d09,
    0x0d050305, 0x0d050709, 0x0d050905, 0x0d050b0b, 0x0d050d05, 0x0d050f01, 0x0d070101, 0x0d070309,
    0x0d070503, 0x0d070901, 0x0d09050b, 0x0d090907, 0x0d090d05, 0x0d0b0101, 0x0d0b0107, 0x0d0b0709,
    0x0d0b0d01, 0x0d0d010b, 0x0d0d0901, 0x0d0f0303, 0x0d0f0307, 0x0f010101, 0x0f010109, 0x0f01010f,
    0x0f010501, 0x0f010505, 0x0f01070d, 0x0f010901, 0x0f010b09, 0x0f010d05, 0x0f030105, 0x0f030303,
    0x0f030509, 0x0f030907, 0x0f03090b, 0x0f050103, 0x0f050109, 0x0f050301, 0x0f05030d, 0x0f050503,
    0x0f050701, 0x0f050b03, 0x0f070105, 0x0f070705, 0x0f07070b, 0x0f070b07, 0x0f090103, 0x0f09010b,
    0x0f090307, 0x0f090501, 0x0f090b01, 0x0f0b0505, 0x0f0b0905, 0x0f0d0105, 0x0f0d0703, 0x0f0f0101,
];
