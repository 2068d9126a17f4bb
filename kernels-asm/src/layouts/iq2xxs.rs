//! IQ2_XXSx8, the whole layout in one file: GGUF IQ2_XXS super-blocks
//! repacked 8 rows at a time in exactly the GGUF bytes' size (2.0625 bits
//! per weight), every value kept exactly (docs/kernels.md, "IQ2_XXSx8").
//! Here are its grid, geometry and byte order, its repacker (its inverse,
//! which only the tests use, is `kestrel_tests::unpack_iq2_xxs`), its scalar
//! specification ([`generic`]) and its kernels: a member of the codebook
//! family ([`super::iq3`]), whose 4-weight chunks it reads as the halves of
//! its 8-weight grid points: aarch64 a GEMV loop over the family's
//! sub-block text, x86_64 tiles over its body, the one of the build also
//! named [`arch`].
//!
//! A GGUF IQ2_XXS block (66 bytes, 256 weights) is `d: f16` and 8 pairs of
//! little-endian `u32` words, one pair per 32-weight sub-block `p`: the
//! first holds in byte `l` (0..4) the index of weights `8l..8l + 8` into
//! [`IQ2XXS_GRID`], the second in bits `7l..7l + 7` their signs but the
//! last, whose sign makes the count of minus signs even, and in bits 28..32
//! the scale `ls`. Weight `8l + j` of sub-block `p` is `d * (0.5 + ls) *
//! 0.25 * g * sign`, `g` byte `j` of `IQ2XXS_GRID[index]` (as
//! `dequantize_row_iq2_xxs`): `d * (2 ls + 1) * g * sign / 8`.
//!
//! For row group `g` and super-block column `b` the IQ2_XXSx8 super-block
//! (528 bytes, at `(g * nb + b) * 528`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * `16 + 32p + 4r`: the sign-and-scale word of sub-block `p` of row `r`
//!   (copied);
//! * `272 + 32p + 8l + r`: the index of weights `8l..8l + 8` of sub-block
//!   `p` of row `r`.
//!
//! So a sub-block's 8 words are one 256-bit load (a row per lane on x86),
//! and a pair of chunks' 8 indices are 8 consecutive bytes. The words have
//! IQ3_XXS's format, so the family's IQ3_XXS sign and scale code serves.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`).

use super::iq3::IQ3_ROWS;
use crate::layout::QK_K;
use crate::shape::ShapeError;

/// Bytes of one GGUF IQ2_XXS super-block (256 weights).
pub const IQ2_XXS_BLOCK_BYTES: usize = 2 + QK_K / 4;
/// Rows in one IQ2_XXSx8 row group.
pub const IQ2XXSX8_ROWS: usize = IQ3_ROWS;
/// Offset of the sign-and-scale words in a super-block.
pub const IQ2XXSX8_WORDS_AT: usize = 2 * IQ2XXSX8_ROWS;
/// Offset of the grid indices.
pub const IQ2XXSX8_INDEX_AT: usize = IQ2XXSX8_WORDS_AT + 4 * IQ2XXSX8_ROWS * QK_K / 32;
/// Bytes of one IQ2_XXSx8 super-block (8 rows x 256 weights): 8 GGUF
/// blocks' worth.
pub const IQ2XXSX8_BLOCK_BYTES: usize = IQ2XXSX8_INDEX_AT + IQ2XXSX8_ROWS * QK_K / 8;

const _: () = assert!(IQ2_XXS_BLOCK_BYTES == 66 && IQ2XXSX8_INDEX_AT == 272);
const _: () = assert!(IQ2XXSX8_BLOCK_BYTES == IQ2XXSX8_ROWS * IQ2_XXS_BLOCK_BYTES);

/// Bytes of a `rows x cols` matrix in IQ2_XXSx8, padding rows included
/// (`None`: it overflows).
pub fn iq2_xxsx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, IQ2XXSX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF IQ2_XXS (`None`: it
/// overflows).
pub fn iq2_xxs_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, IQ2_XXS_BLOCK_BYTES)
}

/// Where the index of weights `8l..8l + 8` (`l` 0..32 over the super-block)
/// of row `r` is in a super-block.
#[inline]
pub fn index_place(r: usize, l: usize) -> usize {
    IQ2XXSX8_INDEX_AT + 32 * (l / 4) + 8 * (l % 4) + r
}

/// Where the sign-and-scale word of sub-block `p` of row `r` begins.
#[inline]
pub fn word_place(r: usize, p: usize) -> usize {
    IQ2XXSX8_WORDS_AT + 32 * p + 4 * r
}

/// Writes one IQ2_XXSx8 super-block from up to 8 GGUF IQ2_XXS blocks
/// (`src[r]` for row `r`; missing rows are padding).
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[..2]);
        // Index `l` of sub-block `p` is byte `2 + 8p + l` of the block.
        for l in 0..QK_K / 8 {
            sb[index_place(r, l)] = block[2 + 8 * (l / 4) + l % 4];
        }
        for p in 0..QK_K / 32 {
            let at = 2 + 8 * p + 4;
            sb[word_place(r, p)..][..4].copy_from_slice(&block[at..at + 4]);
        }
    }
}

/// Repacks a row-major GGUF IQ2_XXS matrix (`rows x cols`, `cols` a
/// multiple of 256) into IQ2_XXSx8 (`out`: [`iq2_xxsx8_bytes`] bytes).
pub fn repack_iq2_xxs(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "iq2_xxs columns (a multiple of 256)",
            "iq2_xxs source bytes",
            "iq2_xxsx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (IQ2_XXS_BLOCK_BYTES, IQ2XXSX8_BLOCK_BYTES),
        pack_super_block,
    )
}

/// The sign-and-scale word of sub-block `p` of row `r`.
#[inline]
fn word(sb: &[u8], r: usize, p: usize) -> u32 {
    let at = word_place(r, p);
    u32::from_le_bytes([sb[at], sb[at + 1], sb[at + 2], sb[at + 3]])
}

/// Half `c % 2` of the grid point of chunk `c` (0..8) of sub-block `p` of
/// row `r`: the 4 components of weights `4c..4c + 4`.
#[inline]
fn half_point(sb: &[u8], r: usize, p: usize, c: usize) -> u32 {
    let point = IQ2XXS_GRID[sb[index_place(r, 4 * p + c / 2)] as usize];
    (point >> (32 * (c % 2))) as u32
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::{half_point, word, IQ2XXSX8_BLOCK_BYTES, IQ2XXSX8_ROWS};
    use crate::generic::gemm_k_groups;
    use crate::layouts::iq3::{component, signed};
    use crate::layouts::iq3xxs::sign_word;

    /// The signed value `g * sign` (-43..=43) of weight `i` (0..256) of row
    /// `r` (0..8) in an IQ2_XXSx8 super-block.
    #[inline]
    pub fn iq2xxsx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let (p, w) = (i / 32, i % 32);
        let point = half_point(sb, r, p, w / 4);
        signed(sign_word(word(sb, r, p)), w, component(point, w % 4))
    }

    /// The scale `2 ls + 1` (1..=31) of sub-block `p` (0..8) of row `r`.
    #[inline]
    pub fn iq2xxsx8_scale(sb: &[u8], r: usize, p: usize) -> i32 {
        2 * (word(sb, r, p) >> 28) as i32 + 1
    }

    /// The eight rows of one IQ2_XXSx8 row group dotted with one Q8_K
    /// activation row.
    pub fn iq2xxsx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; IQ2XXSX8_ROWS] {
        crate::layouts::iq3::group_dot(
            IQ2XXSX8_BLOCK_BYTES,
            (iq2xxsx8_weight, |sb, r, h| iq2xxsx8_scale(sb, r, h / 2)),
            3,
            group,
            act_qs,
            act_d,
        )
    }

    forwarding_entry!(
        /// GEMV, IQ2_XXSx8 weights x one Q8_K activation row (shapes as
        /// [`gemv_q6_kx8_q8_k`](crate::generic::gemv_q6_kx8_q8_k), with
        /// 528-byte super-blocks).
        q8_k gemv gemv_iq2_xxsx8_q8_k => gemm_iq2_xxsx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ2_XXSx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::generic::gemm_q6_kx8_q8_k), with
        /// 528-byte super-blocks).
        q8_k gemm gemm_iq2_xxsx8_q8_k => gemm_k_groups [IQ2XXSX8_BLOCK_BYTES, |g, q, d, _| iq2xxsx8_group_dot(g, q, d)]
    );
}

/// aarch64: the GEMV loop (per sub-block the signs and scales unpacked
/// from the 8 rows' words as IQ3_XXS's, then the family's sub-block text,
/// each chunk pair's 8 indices widened to byte offsets into the grid, the
/// second chunk's 4 bytes further), and a tile that runs it per activation
/// row.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{IQ2XXSX8_BLOCK_BYTES, IQ2XXS_GRID};
    use crate::layouts::iq3::aarch64::{
        iq3_entry, iq3_finish, iq3_setup, iq3_sub_block, xxs_signs, IQ3_CONSTANTS,
    };
    use crate::layouts::iq3::{decode_super_block, Decoded};

    /// One grid half: halfword `$index` of `$src` (its byte offset in the
    /// grid), the 4 bytes there, into lane `$lane` of `$dst`.
    #[rustfmt::skip]
    macro_rules! xxs2_lookup {
        ($src:literal, $dst:literal, $lane:literal, $index:literal) => { concat!(
            "umov w15, ", $src, ".h[", $index, "]\n",
            "ldr w15, [{grid}, x15]\n",
            "mov ", $dst, ".s[", $lane, "], w15\n",
        ) };
    }
    pub(crate) use xxs2_lookup;

    /// A chunk pair's 8 indices (`x13`) as byte offsets into the grid: `v10`
    /// the first chunk's (8 x index), `v11` the second's (4 more: `v13`).
    #[rustfmt::skip]
    macro_rules! xxs2_prep {
        ($pair:literal) => { concat!(
            "ldr d12, [x13], #8\n",
            "ushll v10.8h, v12.8b, #3\n",
            "add v11.8h, v10.8h, v13.8h\n",
        ) };
    }

    /// The GEMV loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// Per 32-weight sub-block (8 rows): 2 loads, 4 instructions for the
    /// scales `2 ls + 1`, 20 for the sign bytes, 3 per chunk pair for the
    /// offsets, and per chunk 24 to look up its 8 halves, 8 to sign them, 2
    /// `sdot`: about 310 instructions for 8 x 32 weights.
    ///
    /// # Safety
    /// `w` must point to `groups * nb * 528` readable bytes, `qs` to `nb *
    /// 256`, `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb
    /// >= 1`, `groups >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemv_iq2xxsx8_groups(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        out: *mut f32,
        groups: usize,
    ) {
        // SAFETY: per the function contract, every load stays inside `w`,
        // `qs`, `d`, the 32 bytes of constants and the grid (an offset is 8
        // x a byte index, + 4: at most 2044, and 4 bytes are read; the grid
        // has 2048), every store inside `out`: per super-block the loop
        // reads 528 bytes of `w` (16 + 8 x (32 + 32)), 256 bytes of `qs` and
        // 4 bytes of `d`, for nb super-blocks per group; each group stores
        // 32 bytes of `out`. Only the listed registers are written; no
        // stack is used.
        unsafe {
            core::arch::asm!(
                iq3_setup!(),
                "movi v13.8h, #4", // the second chunk's half
                "2:",
                "movi v28.16b, #0", // float sums, rows 0-3
                "movi v27.16b, #0", // rows 4-7
                "mov x9, {qs}",
                "mov x10, {d}",
                "mov x11, {nb}",
                "3:",
                "ld1 {{v29.8h}}, [{w}], #16", // d of the 8 rows (f16)
                "add x13, {w}, #256", // the grid indices
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
                iq3_sub_block!(xxs2_lookup, xxs2_prep),
                "subs x12, x12, #1",
                "b.ne 4b",
                "mov {w}, x13", // the next super-block
                iq3_finish!(", #3"),
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
                grid = in(reg) IQ2XXS_GRID.as_ptr(),
                out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                out("x15") _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v16") _,
                out("v18") _, out("v19") _, out("v22") _, out("v23") _, out("v24") _,
                out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
                out("v30") _, out("v31") _,
                options(nostack),
            );
        }
    }

    /// Decodes one IQ2_XXSx8 super-block for the prompt path.
    fn decode(sb: &[u8], out: &mut Decoded) {
        let front = |r, p| {
            let aux = super::word(sb, r, p);
            (
                crate::layouts::iq3xxs::sign_word(aux),
                [2 * (aux >> 28) as i32 + 1; 2],
            )
        };
        let point = |r, p, c| super::half_point(sb, r, p, c);
        decode_super_block(sb, out, front, point);
    }

    iq3_entry!(
        gemv_iq2_xxsx8_q8_k,
        gemm_iq2_xxsx8_q8_k,
        gemv_iq2xxsx8_groups,
        decode,
        IQ2XXSX8_BLOCK_BYTES,
        0.125
    );
}

/// x86_64: tiles of one row group (8 rows, one per 32-bit lane) x up to 4
/// activation rows over the codebook family's body with IQ2_XXS's front
/// end, run by Q6_Kx8's driver (`k8_gemm`).
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::{IQ2XXSX8_BLOCK_BYTES, IQ2XXSX8_INDEX_AT, IQ2XXSX8_WORDS_AT};
    use crate::layouts::iq3::x86_64::{iq3_entry, Front, FRONT_IQ2_XXS};

    iq3_entry!(
        "IQ2_XXSx8",
        gemv_iq2_xxsx8_q8_k,
        gemm_iq2_xxsx8_q8_k,
        gemm_iq2_xxsx8_q8_k_tiles,
        IQ2XXS,
        [iq2xxs_tile, iq2xxs_tile_avx_vnni, iq2xxs_tile_avx512_vnni],
        iq2xxs_tile_body,
        IQ2XXSX8_BLOCK_BYTES,
        FRONT_IQ2_XXS
    );

    /// The layout's places for the family's x86 code.
    fn front() -> Front {
        Front {
            bytes: IQ2XXSX8_BLOCK_BYTES,
            index_at: IQ2XXSX8_INDEX_AT,
            words_at: IQ2XXSX8_WORDS_AT,
            high_at: 0,
            scales_at: 0,
            grid: super::IQ2XXS_GRID.as_ptr().cast(),
            factor: 0.125,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ2_XXS grid: point `i`'s component `k` is byte `k` of entry `i`
/// (the GGUF format's codebook; `tests/vectors/gen_iq3_grids.py` prints it
/// from gguf-py's copy).
pub static IQ2XXS_GRID: [u64; 256] = [
    0x0808080808080808,
    0x080808080808082b,
    0x0808080808081919,
    0x0808080808082b08,
    0x0808080808082b2b,
    0x0808080808190819,
    0x0808080808191908,
    0x08080808082b0808,
    0x08080808082b082b,
    0x08080808082b2b08,
    0x08080808082b2b2b,
    0x0808080819080819,
    0x0808080819081908,
    0x0808080819190808,
    0x0808080819192b08,
    0x08080808192b0819,
    0x08080808192b1908,
    0x080808082b080808,
    0x080808082b08082b,
    0x080808082b082b2b,
    0x080808082b2b082b,
    0x0808081908080819,
    0x0808081908081908,
    0x0808081908190808,
    0x0808081908191919,
    0x0808081919080808,
    0x080808192b081908,
    0x080808192b192b08,
    0x0808082b08080808,
    0x0808082b0808082b,
    0x0808082b082b082b,
    0x0808082b2b08082b,
    0x0808190808080819,
    0x0808190808081908,
    0x0808190808190808,
    0x08081908082b0819,
    0x08081908082b1908,
    0x0808190819080808,
    0x080819081908082b,
    0x0808190819082b08,
    0x08081908192b0808,
    0x080819082b080819,
    0x080819082b081908,
    0x080819082b190808,
    0x080819082b2b1908,
    0x0808191908080808,
    0x080819190808082b,
    0x0808191908082b08,
    0x08081919082b0808,
    0x080819191908192b,
    0x08081919192b2b19,
    0x080819192b080808,
    0x080819192b190819,
    0x0808192b08082b19,
    0x0808192b08190808,
    0x0808192b19080808,
    0x0808192b2b081908,
    0x0808192b2b2b1908,
    0x08082b0808080808,
    0x08082b0808081919,
    0x08082b0808082b08,
    0x08082b0808191908,
    0x08082b08082b2b08,
    0x08082b0819080819,
    0x08082b0819081908,
    0x08082b0819190808,
    0x08082b081919082b,
    0x08082b082b082b08,
    0x08082b1908081908,
    0x08082b1919080808,
    0x08082b2b0808082b,
    0x08082b2b08191908,
    0x0819080808080819,
    0x0819080808081908,
    0x0819080808190808,
    0x08190808082b0819,
    0x0819080819080808,
    0x08190808192b0808,
    0x081908082b081908,
    0x081908082b190808,
    0x081908082b191919,
    0x0819081908080808,
    0x0819081908082b08,
    0x08190819082b0808,
    0x0819081919190808,
    0x0819081919192b2b,
    0x081908192b080808,
    0x0819082b082b1908,
    0x0819082b19081919,
    0x0819190808080808,
    0x0819190808082b08,
    0x08191908082b0808,
    0x08191908082b1919,
    0x0819190819082b19,
    0x081919082b080808,
    0x0819191908192b08,
    0x08191919192b082b,
    0x0819192b08080808,
    0x0819192b0819192b,
    0x08192b0808080819,
    0x08192b0808081908,
    0x08192b0808190808,
    0x08192b0819080808,
    0x08192b082b080819,
    0x08192b1908080808,
    0x08192b1908081919,
    0x08192b192b2b0808,
    0x08192b2b19190819,
    0x082b080808080808,
    0x082b08080808082b,
    0x082b080808082b2b,
    0x082b080819081908,
    0x082b0808192b0819,
    0x082b08082b080808,
    0x082b08082b08082b,
    0x082b0819082b2b19,
    0x082b081919082b08,
    0x082b082b08080808,
    0x082b082b0808082b,
    0x082b190808080819,
    0x082b190808081908,
    0x082b190808190808,
    0x082b190819080808,
    0x082b19081919192b,
    0x082b191908080808,
    0x082b191919080819,
    0x082b1919192b1908,
    0x082b192b2b190808,
    0x082b2b0808082b08,
    0x082b2b08082b0808,
    0x082b2b082b191908,
    0x082b2b2b19081908,
    0x1908080808080819,
    0x1908080808081908,
    0x1908080808190808,
    0x1908080808192b08,
    0x19080808082b0819,
    0x19080808082b1908,
    0x1908080819080808,
    0x1908080819082b08,
    0x190808081919192b,
    0x19080808192b0808,
    0x190808082b080819,
    0x190808082b081908,
    0x190808082b190808,
    0x1908081908080808,
    0x19080819082b0808,
    0x19080819192b0819,
    0x190808192b080808,
    0x190808192b081919,
    0x1908082b08080819,
    0x1908082b08190808,
    0x1908082b19082b08,
    0x1908082b1919192b,
    0x1908082b192b2b08,
    0x1908190808080808,
    0x1908190808082b08,
    0x19081908082b0808,
    0x190819082b080808,
    0x190819082b192b19,
    0x190819190819082b,
    0x19081919082b1908,
    0x1908192b08080808,
    0x19082b0808080819,
    0x19082b0808081908,
    0x19082b0808190808,
    0x19082b0819080808,
    0x19082b0819081919,
    0x19082b1908080808,
    0x19082b1919192b08,
    0x19082b19192b0819,
    0x19082b192b08082b,
    0x19082b2b19081919,
    0x19082b2b2b190808,
    0x1919080808080808,
    0x1919080808082b08,
    0x1919080808190819,
    0x1919080808192b19,
    0x19190808082b0808,
    0x191908082b080808,
    0x191908082b082b08,
    0x1919081908081908,
    0x191908191908082b,
    0x191908192b2b1908,
    0x1919082b2b190819,
    0x191919082b190808,
    0x191919082b19082b,
    0x1919191908082b2b,
    0x1919192b08080819,
    0x1919192b19191908,
    0x19192b0808080808,
    0x19192b0808190819,
    0x19192b0808192b19,
    0x19192b08192b1908,
    0x19192b1919080808,
    0x19192b2b08082b08,
    0x192b080808081908,
    0x192b080808190808,
    0x192b080819080808,
    0x192b0808192b2b08,
    0x192b081908080808,
    0x192b081919191919,
    0x192b082b08192b08,
    0x192b082b192b0808,
    0x192b190808080808,
    0x192b190808081919,
    0x192b191908190808,
    0x192b19190819082b,
    0x192b19192b081908,
    0x192b2b081908082b,
    0x2b08080808080808,
    0x2b0808080808082b,
    0x2b08080808082b2b,
    0x2b08080819080819,
    0x2b0808082b08082b,
    0x2b08081908081908,
    0x2b08081908192b08,
    0x2b08081919080808,
    0x2b08082b08190819,
    0x2b08190808080819,
    0x2b08190808081908,
    0x2b08190808190808,
    0x2b08190808191919,
    0x2b08190819080808,
    0x2b081908192b0808,
    0x2b08191908080808,
    0x2b0819191908192b,
    0x2b0819192b191908,
    0x2b08192b08082b19,
    0x2b08192b19080808,
    0x2b08192b192b0808,
    0x2b082b080808082b,
    0x2b082b1908081908,
    0x2b082b2b08190819,
    0x2b19080808081908,
    0x2b19080808190808,
    0x2b190808082b1908,
    0x2b19080819080808,
    0x2b1908082b2b0819,
    0x2b1908190819192b,
    0x2b1908192b080808,
    0x2b19082b19081919,
    0x2b19190808080808,
    0x2b191908082b082b,
    0x2b19190819081908,
    0x2b19191919190819,
    0x2b192b082b080819,
    0x2b192b19082b0808,
    0x2b2b08080808082b,
    0x2b2b080819190808,
    0x2b2b08082b081919,
    0x2b2b081908082b19,
    0x2b2b082b08080808,
    0x2b2b190808192b08,
    0x2b2b2b0819190808,
    0x2b2b2b1908081908,
];
