//! IQ3_XXSx8, the whole layout in one file: GGUF IQ3_XXS super-blocks
//! repacked 8 rows at a time in exactly the GGUF bytes' size (3.0625 bits
//! per weight), every value kept exactly (docs/kernels.md, "IQ3_XXSx8 and
//! IQ3_Sx8"). Here are its grid, geometry and byte order, its repacker (its
//! inverse, which only the tests use, is `kestrel_tests::unpack_iq3_xxs`),
//! its scalar specification ([`generic`]) and its kernels: aarch64 a GEMV
//! loop over the codebook family's sub-block text, x86_64 tiles over its
//! body ([`super::iq3`]), the one of the build also named [`arch`].
//!
//! A GGUF IQ3_XXS block (98 bytes, 256 weights) is `d: f16`, `qs[64]` (the
//! index of each 4-weight chunk into [`IQ3XXS_GRID`]) and 8 little-endian
//! `u32` words, one per 32-weight sub-block `p`: bits `7k..7k + 7` (`k`
//! 0..4) the signs of its weights `8k..8k + 7` but the last, whose sign
//! makes the count of minus signs even, and bits 28..32 the scale `ls`.
//! Weight `4c + j` of sub-block `p` (chunk `c` 0..8) is `d * (0.5 + ls) *
//! 0.5 * g * sign`, `g` byte `j` of `IQ3XXS_GRID[qs[8p + c]]` (as
//! `dequantize_row_iq3_xxs`).
//!
//! For row group `g` and super-block column `b` the IQ3_XXSx8 super-block
//! (784 bytes, at `(g * nb + b) * 784`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * `16 + 32p + 4r`: the sign-and-scale word of sub-block `p` of row `r`
//!   (copied);
//! * `272 + 64p + 8c + r`: the index of chunk `c` of sub-block `p` of row
//!   `r`.
//!
//! So a sub-block's 8 words are one 256-bit load (a row per lane on x86),
//! and a chunk's 8 indices are 8 consecutive bytes.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`).

use super::iq3::{component, signed, IQ3_ROWS};
use crate::layout::QK_K;
use crate::shape::ShapeError;

/// Bytes of one GGUF IQ3_XXS super-block (256 weights).
pub const IQ3_XXS_BLOCK_BYTES: usize = 2 + 3 * QK_K / 8;
/// Rows in one IQ3_XXSx8 row group.
pub const IQ3XXSX8_ROWS: usize = IQ3_ROWS;
/// Offset of the sign-and-scale words in a super-block.
pub const IQ3XXSX8_WORDS_AT: usize = 2 * IQ3XXSX8_ROWS;
/// Offset of the chunk indices.
pub const IQ3XXSX8_INDEX_AT: usize = IQ3XXSX8_WORDS_AT + 4 * IQ3XXSX8_ROWS * QK_K / 32;
/// Bytes of one IQ3_XXSx8 super-block (8 rows x 256 weights): 8 GGUF
/// blocks' worth.
pub const IQ3XXSX8_BLOCK_BYTES: usize = IQ3XXSX8_INDEX_AT + IQ3XXSX8_ROWS * QK_K / 4;

const _: () = assert!(IQ3_XXS_BLOCK_BYTES == 98 && IQ3XXSX8_INDEX_AT == 272);
const _: () = assert!(IQ3XXSX8_BLOCK_BYTES == IQ3XXSX8_ROWS * IQ3_XXS_BLOCK_BYTES);

/// Bytes of a `rows x cols` matrix in IQ3_XXSx8, padding rows included
/// (`None`: it overflows).
pub fn iq3_xxsx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, IQ3XXSX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF IQ3_XXS (`None`: it
/// overflows).
pub fn iq3_xxs_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, IQ3_XXS_BLOCK_BYTES)
}

/// Where the index of chunk `c` (0..64) of row `r` is in a super-block.
#[inline]
pub fn index_place(r: usize, c: usize) -> usize {
    IQ3XXSX8_INDEX_AT + 64 * (c / 8) + 8 * (c % 8) + r
}

/// Where the sign-and-scale word of sub-block `p` of row `r` begins.
#[inline]
pub fn word_place(r: usize, p: usize) -> usize {
    IQ3XXSX8_WORDS_AT + 32 * p + 4 * r
}

/// Writes one IQ3_XXSx8 super-block from up to 8 GGUF IQ3_XXS blocks
/// (`src[r]` for row `r`; missing rows are padding).
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[..2]);
        for c in 0..QK_K / 4 {
            sb[index_place(r, c)] = block[2 + c];
        }
        for p in 0..QK_K / 32 {
            let at = 2 + QK_K / 4 + 4 * p;
            sb[word_place(r, p)..][..4].copy_from_slice(&block[at..at + 4]);
        }
    }
}

/// Repacks a row-major GGUF IQ3_XXS matrix (`rows x cols`, `cols` a
/// multiple of 256) into IQ3_XXSx8 (`out`: [`iq3_xxsx8_bytes`] bytes).
pub fn repack_iq3_xxs(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "iq3_xxs columns (a multiple of 256)",
            "iq3_xxs source bytes",
            "iq3_xxsx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (IQ3_XXS_BLOCK_BYTES, IQ3XXSX8_BLOCK_BYTES),
        pack_super_block,
    )
}

/// The sign-and-scale word of sub-block `p` of row `r`.
#[inline]
fn word(sb: &[u8], r: usize, p: usize) -> u32 {
    let at = word_place(r, p);
    u32::from_le_bytes([sb[at], sb[at + 1], sb[at + 2], sb[at + 3]])
}

/// The sign word of a sign-and-scale word: byte `k` the 7 stored signs of
/// weights `8k..8k + 7` and, in bit 7, their parity.
#[inline]
pub fn sign_word(aux: u32) -> u32 {
    let mut out = 0;
    for k in 0..4 {
        let code = (aux >> (7 * k)) & 0x7f;
        out |= (code | (code.count_ones() & 1) << 7) << (8 * k);
    }
    out
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::{component, index_place, sign_word, signed, word, IQ3XXSX8_BLOCK_BYTES};
    use super::{IQ3XXSX8_ROWS, IQ3XXS_GRID};
    use crate::generic::gemm_k_groups;

    /// The signed value `g * sign` (-62..=62) of weight `i` (0..256) of row
    /// `r` (0..8) in an IQ3_XXSx8 super-block.
    #[inline]
    pub fn iq3xxsx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let (p, w) = (i / 32, i % 32);
        let point = IQ3XXS_GRID[sb[index_place(r, 8 * p + w / 4)] as usize];
        signed(sign_word(word(sb, r, p)), w, component(point, w % 4))
    }

    /// The scale `2 ls + 1` (1..=31) of sub-block `p` (0..8) of row `r`.
    #[inline]
    pub fn iq3xxsx8_scale(sb: &[u8], r: usize, p: usize) -> i32 {
        2 * (word(sb, r, p) >> 28) as i32 + 1
    }

    /// The eight rows of one IQ3_XXSx8 row group dotted with one Q8_K
    /// activation row.
    pub fn iq3xxsx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; IQ3XXSX8_ROWS] {
        crate::layouts::iq3::group_dot(
            IQ3XXSX8_BLOCK_BYTES,
            (iq3xxsx8_weight, |sb, r, h| iq3xxsx8_scale(sb, r, h / 2)),
            2,
            group,
            act_qs,
            act_d,
        )
    }

    forwarding_entry!(
        /// GEMV, IQ3_XXSx8 weights x one Q8_K activation row (shapes as
        /// [`gemv_q6_kx8_q8_k`](crate::generic::gemv_q6_kx8_q8_k), with
        /// 784-byte super-blocks).
        q8_k gemv gemv_iq3_xxsx8_q8_k => gemm_iq3_xxsx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ3_XXSx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::generic::gemm_q6_kx8_q8_k), with
        /// 784-byte super-blocks).
        q8_k gemm gemm_iq3_xxsx8_q8_k => gemm_k_groups [IQ3XXSX8_BLOCK_BYTES, |g, q, d, _| iq3xxsx8_group_dot(g, q, d)]
    );
}

/// aarch64: the GEMV loop (per sub-block the signs and scales unpacked
/// from the 8 rows' words, then the family's sub-block text with a byte
/// index per lookup), and a tile that runs it per activation row.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{IQ3XXSX8_BLOCK_BYTES, IQ3XXS_GRID};
    use crate::layouts::iq3::aarch64::{
        iq3_entry, iq3_finish, iq3_setup, iq3_sub_block, xxs_signs, IQ3_CONSTANTS,
    };
    use crate::layouts::iq3::{decode_super_block, Decoded};

    /// One grid point: the next index byte (`x13`), the point, into lane
    /// `$lane` of `$dst`.
    #[rustfmt::skip]
    macro_rules! xxs_lookup {
        ($src:literal, $dst:literal, $lane:literal, $index:literal) => { concat!(
            "ldrb w15, [x13], #1\n",
            "ldr w15, [{grid}, x15, lsl #2]\n",
            "mov ", $dst, ".s[", $lane, "], w15\n",
        ) };
    }

    /// IQ3_XXS needs no preparation of a chunk pair's indices.
    macro_rules! xxs_no_prep {
        ($pair:literal) => {
            ""
        };
    }

    /// The GEMV loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// Per 32-weight sub-block (8 rows): 2 loads, 4 instructions for the
    /// scales `2 ls + 1` (`ushr #27`, `orr #1`), 20 for the sign bytes, and
    /// per chunk 24 to look up its 8 points, 8 to sign them, 2 `sdot`:
    /// about 310 instructions for 8 x 32 weights.
    ///
    /// # Safety
    /// `w` must point to `groups * nb * 784` readable bytes, `qs` to `nb *
    /// 256`, `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb
    /// >= 1`, `groups >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemv_iq3xxsx8_groups(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        out: *mut f32,
        groups: usize,
    ) {
        // SAFETY: per the function contract, every load stays inside `w`,
        // `qs`, `d`, the 32 bytes of constants and the grid (indices are
        // bytes, the grid has 256 points), every store inside `out`: per
        // super-block the loop reads 784 bytes of `w` (16 + 8 x (32 + 64)),
        // 256 bytes of `qs` and 4 bytes of `d`, for nb super-blocks per
        // group; each group stores 32 bytes of `out`. Only the listed
        // registers are written; no stack is used.
        unsafe {
            core::arch::asm!(
                iq3_setup!(),
                "2:",
                "movi v28.16b, #0", // float sums, rows 0-3
                "movi v27.16b, #0", // rows 4-7
                "mov x9, {qs}",
                "mov x10, {d}",
                "mov x11, {nb}",
                "3:",
                "ld1 {{v29.8h}}, [{w}], #16", // d of the 8 rows (f16)
                "add x13, {w}, #256", // the chunk indices
                "movi v26.16b, #0", // sumi, rows 0-3
                "movi v25.16b, #0", // rows 4-7
                "mov x12, #8",
                "4:",
                "ld1 {{v0.4s, v1.4s}}, [{w}], #32", // the words, rows 0-3 / 4-7
                "ld1 {{v18.16b, v19.16b}}, [x9], #32", // 32 activations
                "ushr v2.4s, v0.4s, #27", // 2 ls + 1
                "orr v2.4s, #1",
                "ushr v3.4s, v1.4s, #27",
                "orr v3.4s, #1",
                xxs_signs!("v0"),
                xxs_signs!("v1"),
                iq3_sub_block!(xxs_lookup, xxs_no_prep),
                "subs x12, x12, #1",
                "b.ne 4b",
                "mov {w}, x13", // the next super-block
                iq3_finish!(", #2"),
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
                grid = in(reg) IQ3XXS_GRID.as_ptr(),
                out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                out("x15") _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                out("v10") _, out("v11") _, out("v12") _, out("v16") _,
                out("v18") _, out("v19") _, out("v22") _, out("v23") _, out("v24") _,
                out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
                out("v30") _, out("v31") _,
                options(nostack),
            );
        }
    }

    /// Decodes one IQ3_XXSx8 super-block for the prompt path.
    fn decode(sb: &[u8], out: &mut Decoded) {
        let front = |r, p| {
            let aux = super::word(sb, r, p);
            (super::sign_word(aux), [2 * (aux >> 28) as i32 + 1; 2])
        };
        let point = |r, p, c| IQ3XXS_GRID[sb[super::index_place(r, 8 * p + c)] as usize];
        decode_super_block(sb, out, front, point);
    }

    iq3_entry!(
        gemv_iq3_xxsx8_q8_k,
        gemm_iq3_xxsx8_q8_k,
        gemv_iq3xxsx8_groups,
        decode,
        IQ3XXSX8_BLOCK_BYTES,
        0.25
    );
}

/// x86_64: tiles of one row group (8 rows, one per 32-bit lane) x up to 4
/// activation rows over the codebook family's body, run by Q6_Kx8's driver
/// (`k8_gemm`).
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::{IQ3XXSX8_BLOCK_BYTES, IQ3XXSX8_INDEX_AT, IQ3XXSX8_WORDS_AT};
    use crate::layouts::iq3::x86_64::{iq3_entry, Front, FRONT_XXS};

    iq3_entry!(
        "IQ3_XXSx8",
        gemv_iq3_xxsx8_q8_k,
        gemm_iq3_xxsx8_q8_k,
        gemm_iq3_xxsx8_q8_k_tiles,
        IQ3XXS,
        [iq3xxs_tile, iq3xxs_tile_avx_vnni, iq3xxs_tile_avx512_vnni],
        iq3xxs_tile_body,
        IQ3XXSX8_BLOCK_BYTES,
        FRONT_XXS
    );

    /// The layout's places for the family's x86 code.
    fn front() -> Front {
        Front {
            bytes: IQ3XXSX8_BLOCK_BYTES,
            index_at: IQ3XXSX8_INDEX_AT,
            words_at: IQ3XXSX8_WORDS_AT,
            high_at: 0,
            scales_at: 0,
            grid: super::IQ3XXS_GRID.as_ptr().cast(),
            factor: 0.25,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ3_XXS grid: point `i`'s component `k` is byte `k` of entry `i`
/// (the GGUF format's codebook; `tests/vectors/gen_iq3_grids.py` prints it
/// from gguf-py's copy).
pub static IQ3XXS_GRID: [u32; 256] = [
    0x04040404, 0x04040414, 0x04040424, 0x04040c0c, 0x04040c1c, 0x04040c3e, 0x04041404, 0x04041414,
    0x04041c0c, 0x04042414, 0x04043e1c, 0x04043e2c, 0x040c040c, 0x040c041c, 0x040c0c04, 0x040c0c14,
    0x040c140c, 0x040c142c, 0x040c1c04, 0x040c1c14, 0x040c240c, 0x040c2c24, 0x040c3e04, 0x04140404,
    0x04140414, 0x04140424, 0x04140c0c, 0x04141404, 0x04141414, 0x04141c0c, 0x04141c1c, 0x04141c3e,
    0x04142c0c, 0x04142c3e, 0x04143e2c, 0x041c040c, 0x041c043e, 0x041c0c04, 0x041c0c14, 0x041c142c,
    0x041c3e04, 0x04240c1c, 0x04241c3e, 0x04242424, 0x04242c3e, 0x04243e1c, 0x04243e2c, 0x042c040c,
    0x042c043e, 0x042c1c14, 0x042c2c14, 0x04341c2c, 0x04343424, 0x043e0c04, 0x043e0c24, 0x043e0c34,
    0x043e241c, 0x043e340c, 0x0c04040c, 0x0c04041c, 0x0c040c04, 0x0c040c14, 0x0c04140c, 0x0c04141c,
    0x0c041c04, 0x0c041c14, 0x0c041c24, 0x0c04243e, 0x0c042c04, 0x0c0c0404, 0x0c0c0414, 0x0c0c0c0c,
    0x0c0c1404, 0x0c0c1414, 0x0c14040c, 0x0c14041c, 0x0c140c04, 0x0c140c14, 0x0c14140c, 0x0c141c04,
    0x0c143e14, 0x0c1c0404, 0x0c1c0414, 0x0c1c1404, 0x0c1c1c0c, 0x0c1c2434, 0x0c1c3434, 0x0c24040c,
    0x0c24042c, 0x0c242c04, 0x0c2c1404, 0x0c2c1424, 0x0c2c2434, 0x0c2c3e0c, 0x0c34042c, 0x0c3e1414,
    0x0c3e2404, 0x14040404, 0x14040414, 0x14040c0c, 0x14040c1c, 0x14041404, 0x14041414, 0x14041434,
    0x14041c0c, 0x14042414, 0x140c040c, 0x140c041c, 0x140c042c, 0x140c0c04, 0x140c0c14, 0x140c140c,
    0x140c1c04, 0x140c341c, 0x140c343e, 0x140c3e04, 0x14140404, 0x14140414, 0x14140c0c, 0x14140c3e,
    0x14141404, 0x14141414, 0x14141c3e, 0x14142404, 0x14142c2c, 0x141c040c, 0x141c0c04, 0x141c0c24,
    0x141c3e04, 0x141c3e24, 0x14241c2c, 0x14242c1c, 0x142c041c, 0x142c143e, 0x142c240c, 0x142c3e24,
    0x143e040c, 0x143e041c, 0x143e0c34, 0x143e242c, 0x1c04040c, 0x1c040c04, 0x1c040c14, 0x1c04140c,
    0x1c04141c, 0x1c042c04, 0x1c04342c, 0x1c043e14, 0x1c0c0404, 0x1c0c0414, 0x1c0c1404, 0x1c0c1c0c,
    0x1c0c2424, 0x1c0c2434, 0x1c14040c, 0x1c14041c, 0x1c140c04, 0x1c14142c, 0x1c142c14, 0x1c143e14,
    0x1c1c0c0c, 0x1c1c1c1c, 0x1c241c04, 0x1c24243e, 0x1c243e14, 0x1c2c0404, 0x1c2c0434, 0x1c2c1414,
    0x1c2c2c2c, 0x1c340c24, 0x1c341c34, 0x1c34341c, 0x1c3e1c1c, 0x1c3e3404, 0x24040424, 0x24040c3e,
    0x24041c2c, 0x24041c3e, 0x24042c1c, 0x24042c3e, 0x240c3e24, 0x24141404, 0x24141c3e, 0x24142404,
    0x24143404, 0x24143434, 0x241c043e, 0x241c242c, 0x24240424, 0x24242c0c, 0x24243424, 0x242c142c,
    0x242c241c, 0x242c3e04, 0x243e042c, 0x243e0c04, 0x243e0c14, 0x243e1c04, 0x2c040c14, 0x2c04240c,
    0x2c043e04, 0x2c0c0404, 0x2c0c0434, 0x2c0c1434, 0x2c0c2c2c, 0x2c140c24, 0x2c141c14, 0x2c143e14,
    0x2c1c0414, 0x2c1c2c1c, 0x2c240c04, 0x2c24141c, 0x2c24143e, 0x2c243e14, 0x2c2c0414, 0x2c2c1c0c,
    0x2c342c04, 0x2c3e1424, 0x2c3e2414, 0x34041424, 0x34042424, 0x34042434, 0x34043424, 0x340c140c,
    0x340c340c, 0x34140c3e, 0x34143424, 0x341c1c04, 0x341c1c34, 0x34242424, 0x342c042c, 0x342c2c14,
    0x34341c1c, 0x343e041c, 0x343e140c, 0x3e04041c, 0x3e04042c, 0x3e04043e, 0x3e040c04, 0x3e041c14,
    0x3e042c14, 0x3e0c1434, 0x3e0c2404, 0x3e140c14, 0x3e14242c, 0x3e142c14, 0x3e1c0404, 0x3e1c0c2c,
    0x3e1c1c1c, 0x3e1c3404, 0x3e24140c, 0x3e24240c, 0x3e2c0404, 0x3e2c0414, 0x3e2c1424, 0x3e341c04,
];
