//! IQ2_XSx8, the whole layout in one file: GGUF IQ2_XS super-blocks
//! repacked 8 rows at a time in exactly the GGUF bytes' size (2.3125 bits
//! per weight), every value kept exactly (docs/kernels.md, "IQ2_XSx8").
//! Here are its grid, geometry and byte order, its repacker (its inverse,
//! which only the tests use, is `kestrel_tests::unpack_iq2_xs`), its scalar
//! specification ([`generic`]) and its kernels: a member of the codebook
//! family ([`super::iq3`]) like IQ2_XXS, with a 9-bit index into a grid of
//! 512 points and a scale per 16 weights: aarch64 a GEMV loop over the
//! family's sub-block text, x86_64 tiles over its body, the one of the
//! build also named [`arch`].
//!
//! A GGUF IQ2_XS block (74 bytes, 256 weights) is `d: f16`, 32
//! little-endian `u16` words `q` and 8 scale bytes. Word `4p + l` holds the
//! 8 weights `8l..8l + 8` of 32-weight sub-block `p`: bits 0..9 their index
//! into [`IQ2XS_GRID`], bits 9..16 their signs but the last, whose sign
//! makes the count of minus signs even. Scale byte `p` holds the scale `ls`
//! of the sub-block's first 16 weights (`l` 0, 1) in its low nibble, of the
//! last 16 in its high one. Weight `8l + j` of sub-block `p` is `d * (0.5 +
//! ls) * 0.25 * g * sign`, `g` byte `j` of `IQ2XS_GRID[index]` (as
//! `dequantize_row_iq2_xs`): `d * (2 ls + 1) * g * sign / 8`.
//!
//! For row group `g` and super-block column `b` the IQ2_XSx8 super-block
//! (592 bytes, at `(g * nb + b) * 592`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * `16 + 32p + 4r + l`: the high byte of word `4p + l` of row `r` (its 7
//!   sign bits above the index's ninth bit);
//! * `272 + 32p + 8l + r`: its low byte (the index's low 8 bits);
//! * `528 + 8p + r`: scale byte `p` of row `r` (copied).
//!
//! So a sub-block's high bytes are 8 rows' 32-bit lanes (the sign bytes of
//! IQ2_XXS's sign words once shifted down), and a pair of chunks' 8 low
//! index bytes are 8 consecutive bytes, as in IQ2_XXSx8.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`).

use super::iq3::IQ3_ROWS;
use crate::layout::QK_K;
use crate::shape::ShapeError;

/// Bytes of one GGUF IQ2_XS super-block (256 weights).
pub const IQ2_XS_BLOCK_BYTES: usize = 2 + QK_K / 4 + QK_K / 32;
/// Rows in one IQ2_XSx8 row group.
pub const IQ2XSX8_ROWS: usize = IQ3_ROWS;
/// Offset of the high bytes in a super-block.
pub const IQ2XSX8_HIGH_AT: usize = 2 * IQ2XSX8_ROWS;
/// Offset of the low index bytes.
pub const IQ2XSX8_INDEX_AT: usize = IQ2XSX8_HIGH_AT + IQ2XSX8_ROWS * QK_K / 8;
/// Offset of the scale bytes.
pub const IQ2XSX8_SCALES_AT: usize = IQ2XSX8_INDEX_AT + IQ2XSX8_ROWS * QK_K / 8;
/// Bytes of one IQ2_XSx8 super-block (8 rows x 256 weights): 8 GGUF blocks'
/// worth.
pub const IQ2XSX8_BLOCK_BYTES: usize = IQ2XSX8_SCALES_AT + IQ2XSX8_ROWS * QK_K / 32;

const _: () = assert!(IQ2_XS_BLOCK_BYTES == 74 && IQ2XSX8_INDEX_AT == 272);
const _: () = assert!(IQ2XSX8_SCALES_AT == 528);
const _: () = assert!(IQ2XSX8_BLOCK_BYTES == IQ2XSX8_ROWS * IQ2_XS_BLOCK_BYTES);

/// Bytes of a `rows x cols` matrix in IQ2_XSx8, padding rows included
/// (`None`: it overflows).
pub fn iq2_xsx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, IQ2XSX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF IQ2_XS (`None`: it
/// overflows).
pub fn iq2_xs_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, IQ2_XS_BLOCK_BYTES)
}

/// Where the high byte of word `l` (0..32 over the super-block) of row `r`
/// is in a super-block.
#[inline]
pub fn high_place(r: usize, l: usize) -> usize {
    IQ2XSX8_HIGH_AT + 32 * (l / 4) + 4 * r + l % 4
}

/// Where the low byte of word `l` of row `r` is.
#[inline]
pub fn index_place(r: usize, l: usize) -> usize {
    IQ2XSX8_INDEX_AT + 32 * (l / 4) + 8 * (l % 4) + r
}

/// Where scale byte `p` of row `r` is.
#[inline]
pub fn scale_place(r: usize, p: usize) -> usize {
    IQ2XSX8_SCALES_AT + 8 * p + r
}

/// Writes one IQ2_XSx8 super-block from up to 8 GGUF IQ2_XS blocks
/// (`src[r]` for row `r`; missing rows are padding).
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[..2]);
        for l in 0..QK_K / 8 {
            sb[index_place(r, l)] = block[2 + 2 * l];
            sb[high_place(r, l)] = block[3 + 2 * l];
        }
        for p in 0..QK_K / 32 {
            sb[scale_place(r, p)] = block[2 + QK_K / 4 + p];
        }
    }
}

/// Repacks a row-major GGUF IQ2_XS matrix (`rows x cols`, `cols` a
/// multiple of 256) into IQ2_XSx8 (`out`: [`iq2_xsx8_bytes`] bytes).
pub fn repack_iq2_xs(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "iq2_xs columns (a multiple of 256)",
            "iq2_xs source bytes",
            "iq2_xsx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (IQ2_XS_BLOCK_BYTES, IQ2XSX8_BLOCK_BYTES),
        pack_super_block,
    )
}

/// The sign word of sub-block `p` of row `r`: byte `l` the 7 sign bits of
/// word `4p + l` and their parity in bit 7.
#[inline]
fn sign_word(sb: &[u8], r: usize, p: usize) -> u32 {
    let at = high_place(r, 4 * p);
    let mut w = 0;
    for (k, &h) in sb[at..at + 4].iter().enumerate() {
        let s = u32::from(h >> 1);
        w |= (s | (s.count_ones() & 1) << 7) << (8 * k);
    }
    w
}

/// Half `c % 2` of the grid point of chunk `c` (0..8) of sub-block `p` of
/// row `r`: the 4 components of weights `4c..4c + 4`.
#[inline]
fn half_point(sb: &[u8], r: usize, p: usize, c: usize) -> u32 {
    let l = 4 * p + c / 2;
    let index = usize::from(sb[index_place(r, l)]) | usize::from(sb[high_place(r, l)] & 1) << 8;
    (IQ2XS_GRID[index] >> (32 * (c % 2))) as u32
}

/// The scale `2 ls + 1` (1..=31) of 16-weight run `h` (0..16) of row `r`.
#[inline]
fn run_scale(sb: &[u8], r: usize, h: usize) -> i32 {
    2 * ((sb[scale_place(r, h / 2)] >> (4 * (h % 2))) & 15) as i32 + 1
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::{half_point, sign_word, IQ2XSX8_BLOCK_BYTES, IQ2XSX8_ROWS};
    use crate::generic::gemm_k_groups;
    use crate::layouts::iq3::{component, signed};

    /// The signed value `g * sign` (-43..=43) of weight `i` (0..256) of row
    /// `r` (0..8) in an IQ2_XSx8 super-block.
    #[inline]
    pub fn iq2xsx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let (p, w) = (i / 32, i % 32);
        let point = half_point(sb, r, p, w / 4);
        signed(sign_word(sb, r, p), w, component(point, w % 4))
    }

    /// The scale `2 ls + 1` (1..=31) of 16-weight run `h` (0..16) of row
    /// `r`.
    #[inline]
    pub fn iq2xsx8_scale(sb: &[u8], r: usize, h: usize) -> i32 {
        super::run_scale(sb, r, h)
    }

    /// The eight rows of one IQ2_XSx8 row group dotted with one Q8_K
    /// activation row.
    pub fn iq2xsx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; IQ2XSX8_ROWS] {
        crate::layouts::iq3::group_dot(
            IQ2XSX8_BLOCK_BYTES,
            (iq2xsx8_weight, iq2xsx8_scale),
            3,
            group,
            act_qs,
            act_d,
        )
    }

    forwarding_entry!(
        /// GEMV, IQ2_XSx8 weights x one Q8_K activation row (shapes as
        /// [`gemv_q6_kx8_q8_k`](crate::generic::gemv_q6_kx8_q8_k), with
        /// 592-byte super-blocks).
        q8_k gemv gemv_iq2_xsx8_q8_k => gemm_iq2_xsx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ2_XSx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::generic::gemm_q6_kx8_q8_k), with
        /// 592-byte super-blocks).
        q8_k gemm gemm_iq2_xsx8_q8_k => gemm_k_groups [IQ2XSX8_BLOCK_BYTES, |g, q, d, _| iq2xsx8_group_dot(g, q, d)]
    );
}

/// aarch64: the GEMV loop (per sub-block the 8 rows' high bytes made sign
/// words and ninth index bits, the scales of both halves, then the
/// family's sub-block text, each chunk pair's 8 indices widened to byte
/// offsets into the grid, the second chunk's 4 bytes further, the first
/// half's sums scaled between the halves), and a tile that runs it per
/// activation row.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{IQ2XSX8_BLOCK_BYTES, IQ2XS_GRID};
    use crate::layouts::iq2xxs::aarch64::xxs2_lookup;
    use crate::layouts::iq3::aarch64::{
        iq3_entry, iq3_finish, iq3_setup, iq3_sub_block, IQ3_CONSTANTS,
    };
    use crate::layouts::iq3::{decode_super_block, Decoded};

    /// The `tbl` indices that gather a sub-block's high bytes (row `r`,
    /// pair `l` at `4r + l`) by pair (`8l + r`): pairs 0 and 1, then 2 and
    /// 3.
    static BY_PAIR: [u8; 32] = {
        let mut t = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            t[i] = (4 * (i % 8) + i / 8) as u8;
            i += 1;
        }
        t
    };

    /// A chunk pair's 8 indices as byte offsets into the grid: the low
    /// bytes (`x13`, 16 at a time: two pairs) zipped with the ninth bits
    /// (`v14`: pairs 0 and 1, `v15`: 2 and 3) into halfwords, times 8
    /// (`v10`), the second chunk's 4 more (`v11`, `v13` = 4).
    #[rustfmt::skip]
    macro_rules! xs_prep {
        ("0") => { concat!("ldr q12, [x13], #16\n", xs_prep!(zip1, "v14")) };
        ("1") => { xs_prep!(zip2, "v14") };
        ("2") => { concat!("ldr q12, [x13], #16\n", xs_prep!(zip1, "v15")) };
        ("3") => { xs_prep!(zip2, "v15") };
        ($zip:ident, $bits:literal) => { concat!(
            stringify!($zip), " v10.16b, v12.16b, ", $bits, ".16b\n",
            "shl v10.8h, v10.8h, #3\n",
            "add v11.8h, v10.8h, v13.8h\n",
        ) };
    }

    /// The GEMV loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// Per 32-weight sub-block (8 rows): 3 loads, 4 instructions for the
    /// ninth bits, 8 for the sign words, 13 for the scales of both halves,
    /// 3 or 4 per chunk pair for the offsets, 6 between the halves, and per
    /// chunk 24 to look up its 8 halves, 8 to sign them, 2 `sdot`: about
    /// 320 instructions for 8 x 32 weights.
    ///
    /// # Safety
    /// `w` must point to `groups * nb * 592` readable bytes, `qs` to `nb *
    /// 256`, `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb
    /// >= 1`, `groups >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemv_iq2xsx8_groups(
        w: *const u8,
        qs: *const i8,
        d: *const f32,
        _sums: *const i16,
        nb: usize,
        out: *mut f32,
        groups: usize,
    ) {
        // SAFETY: per the function contract, every load stays inside `w`,
        // `qs`, `d`, the 32 bytes of constants, the 32 of `BY_PAIR` and the
        // grid (an offset is 8 x a 9-bit index, + 4: at most 4092, and 4
        // bytes are read; the grid has 4096), every store inside `out`: per
        // super-block the loop reads 592 bytes of `w` (16 + 8 x (32 + 32 +
        // 8)), 256 bytes of `qs` and 4 bytes of `d`, for nb super-blocks per
        // group; each group stores 32 bytes of `out`. Only the listed
        // registers are written; no stack is used.
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
                "add x13, {w}, #256", // the low index bytes
                "add x14, {w}, #512", // the scales
                "movi v26.16b, #0", // sumi, rows 0-3
                "movi v25.16b, #0", // rows 4-7
                "mov x12, #8",
                "4:",
                "ld1 {{v0.16b, v1.16b}}, [{w}], #32", // high bytes, rows 0-3 / 4-7
                "ld1 {{v18.16b, v19.16b}}, [x9], #32", // 32 activations
                "ld1 {{v6.16b, v7.16b}}, [{by_pair}]",
                "tbl v14.16b, {{v0.16b, v1.16b}}, v6.16b", // by pair: 0, 1
                "tbl v15.16b, {{v0.16b, v1.16b}}, v7.16b", // 2, 3
                "and v14.16b, v14.16b, v22.16b", // the ninth bits
                "and v15.16b, v15.16b, v22.16b",
                "ushr v0.16b, v0.16b, #1", // the sign bytes, parity in bit 7
                "ushr v1.16b, v1.16b, #1",
                "cnt v10.16b, v0.16b",
                "cnt v11.16b, v1.16b",
                "shl v10.16b, v10.16b, #7",
                "shl v11.16b, v11.16b, #7",
                "orr v0.16b, v0.16b, v10.16b",
                "orr v1.16b, v1.16b, v11.16b",
                "ldr d2, [x14], #8", // the 8 rows' scale bytes
                "ushr v17.8b, v2.8b, #4", // second half: 2 ls + 1
                "shl v17.8b, v17.8b, #1",
                "orr v17.8b, v17.8b, v22.8b",
                "shl v2.8b, v2.8b, #4", // first half
                "ushr v2.8b, v2.8b, #3",
                "orr v2.8b, v2.8b, v22.8b",
                "uxtl v2.8h, v2.8b",
                "uxtl v17.8h, v17.8b",
                "uxtl2 v3.4s, v2.8h",
                "uxtl v2.4s, v2.4h",
                "uxtl2 v20.4s, v17.8h",
                "uxtl v17.4s, v17.4h",
                iq3_sub_block!(xxs2_lookup, xs_prep, concat!(
                    "mla v26.4s, v4.4s, v2.4s\n",
                    "mla v25.4s, v5.4s, v3.4s\n",
                    "movi v4.16b, #0\n",
                    "movi v5.16b, #0\n",
                    "mov v2.16b, v17.16b\n",
                    "mov v3.16b, v20.16b\n",
                )),
                "subs x12, x12, #1",
                "b.ne 4b",
                "add {w}, {w}, #320", // past the low bytes and scales
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
                by_pair = in(reg) BY_PAIR.as_ptr(),
                grid = in(reg) IQ2XS_GRID.as_ptr(),
                out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                out("x14") _, out("x15") _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
                out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                out("v20") _, out("v22") _, out("v23") _, out("v24") _,
                out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
                out("v30") _, out("v31") _,
                options(nostack),
            );
        }
    }

    /// Decodes one IQ2_XSx8 super-block for the prompt path.
    fn decode(sb: &[u8], out: &mut Decoded) {
        let front = |r, p| {
            let scales = [
                super::run_scale(sb, r, 2 * p),
                super::run_scale(sb, r, 2 * p + 1),
            ];
            (super::sign_word(sb, r, p), scales)
        };
        let point = |r, p, c| super::half_point(sb, r, p, c);
        decode_super_block(sb, out, front, point);
    }

    iq3_entry!(
        gemv_iq2_xsx8_q8_k,
        gemm_iq2_xsx8_q8_k,
        gemv_iq2xsx8_groups,
        decode,
        IQ2XSX8_BLOCK_BYTES,
        0.125,
        true
    );
}

/// x86_64: tiles of one row group (8 rows, one per 32-bit lane) x up to 4
/// activation rows over the codebook family's body with IQ2_XS's front
/// end, run by Q6_Kx8's driver (`k8_gemm`).
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::{IQ2XSX8_BLOCK_BYTES, IQ2XSX8_HIGH_AT, IQ2XSX8_INDEX_AT, IQ2XSX8_SCALES_AT};
    use crate::layouts::iq3::x86_64::{iq3_entry, Front, FRONT_IQ2_XS};

    iq3_entry!(
        "IQ2_XSx8",
        gemv_iq2_xsx8_q8_k,
        gemm_iq2_xsx8_q8_k,
        gemm_iq2_xsx8_q8_k_tiles,
        IQ2XS,
        [iq2xs_tile, iq2xs_tile_avx_vnni, iq2xs_tile_avx512_vnni],
        iq2xs_tile_body,
        IQ2XSX8_BLOCK_BYTES,
        FRONT_IQ2_XS
    );

    /// The layout's places for the family's x86 code.
    fn front() -> Front {
        Front {
            bytes: IQ2XSX8_BLOCK_BYTES,
            index_at: IQ2XSX8_INDEX_AT,
            words_at: IQ2XSX8_HIGH_AT,
            high_at: 0,
            scales_at: IQ2XSX8_SCALES_AT,
            grid: super::IQ2XS_GRID.as_ptr().cast(),
            factor: 0.125,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ2_XS grid: point `i`'s component `k` is byte `k` of entry `i`
/// (the GGUF format's codebook; `tests/vectors/gen_iq3_grids.py` prints it
/// from gguf-py's copy).
pub static IQ2XS_GRID: [u64; 512] = [
    0x0808080808080808,
    0x080808080808082b,
    0x0808080808081919,
    0x0808080808082b08,
    0x0808080808082b2b,
    0x0808080808190819,
    0x0808080808191908,
    0x080808080819192b,
    0x0808080808192b19,
    0x08080808082b0808,
    0x08080808082b082b,
    0x08080808082b1919,
    0x08080808082b2b08,
    0x0808080819080819,
    0x0808080819081908,
    0x080808081908192b,
    0x0808080819082b19,
    0x0808080819190808,
    0x080808081919082b,
    0x0808080819191919,
    0x0808080819192b08,
    0x08080808192b0819,
    0x08080808192b1908,
    0x080808082b080808,
    0x080808082b08082b,
    0x080808082b081919,
    0x080808082b082b08,
    0x080808082b190819,
    0x080808082b191908,
    0x080808082b192b19,
    0x080808082b2b0808,
    0x0808081908080819,
    0x0808081908081908,
    0x080808190808192b,
    0x0808081908082b19,
    0x0808081908190808,
    0x080808190819082b,
    0x0808081908191919,
    0x0808081908192b08,
    0x0808081908192b2b,
    0x08080819082b0819,
    0x08080819082b1908,
    0x0808081919080808,
    0x080808191908082b,
    0x0808081919081919,
    0x0808081919082b08,
    0x0808081919190819,
    0x0808081919191908,
    0x08080819192b0808,
    0x08080819192b2b08,
    0x080808192b080819,
    0x080808192b081908,
    0x080808192b190808,
    0x0808082b08080808,
    0x0808082b0808082b,
    0x0808082b08081919,
    0x0808082b08082b08,
    0x0808082b08190819,
    0x0808082b08191908,
    0x0808082b082b0808,
    0x0808082b19080819,
    0x0808082b19081908,
    0x0808082b19190808,
    0x0808082b19191919,
    0x0808082b2b080808,
    0x0808082b2b082b2b,
    0x0808190808080819,
    0x0808190808081908,
    0x080819080808192b,
    0x0808190808082b19,
    0x0808190808190808,
    0x080819080819082b,
    0x0808190808191919,
    0x0808190808192b08,
    0x08081908082b0819,
    0x08081908082b1908,
    0x0808190819080808,
    0x080819081908082b,
    0x0808190819081919,
    0x0808190819082b08,
    0x0808190819190819,
    0x0808190819191908,
    0x080819081919192b,
    0x08081908192b0808,
    0x080819082b080819,
    0x080819082b081908,
    0x080819082b190808,
    0x0808191908080808,
    0x080819190808082b,
    0x0808191908081919,
    0x0808191908082b08,
    0x0808191908190819,
    0x0808191908191908,
    0x08081919082b0808,
    0x0808191919080819,
    0x0808191919081908,
    0x0808191919190808,
    0x08081919192b0819,
    0x080819192b080808,
    0x0808192b08080819,
    0x0808192b08081908,
    0x0808192b08190808,
    0x0808192b082b192b,
    0x0808192b19080808,
    0x0808192b1908082b,
    0x0808192b2b081908,
    0x08082b0808080808,
    0x08082b080808082b,
    0x08082b0808081919,
    0x08082b0808082b08,
    0x08082b0808082b2b,
    0x08082b0808190819,
    0x08082b0808191908,
    0x08082b08082b0808,
    0x08082b08082b1919,
    0x08082b0819080819,
    0x08082b0819081908,
    0x08082b0819190808,
    0x08082b0819192b08,
    0x08082b082b080808,
    0x08082b082b2b0808,
    0x08082b082b2b2b2b,
    0x08082b1908080819,
    0x08082b1908081908,
    0x08082b1908190808,
    0x08082b1919080808,
    0x08082b192b080819,
    0x08082b192b082b19,
    0x08082b2b08080808,
    0x08082b2b082b0808,
    0x08082b2b082b2b08,
    0x08082b2b2b19192b,
    0x08082b2b2b2b0808,
    0x0819080808080819,
    0x0819080808081908,
    0x081908080808192b,
    0x0819080808082b19,
    0x0819080808190808,
    0x081908080819082b,
    0x0819080808191919,
    0x0819080808192b08,
    0x08190808082b0819,
    0x08190808082b1908,
    0x0819080819080808,
    0x081908081908082b,
    0x0819080819081919,
    0x0819080819082b08,
    0x0819080819190819,
    0x0819080819191908,
    0x08190808192b0808,
    0x08190808192b2b2b,
    0x081908082b080819,
    0x081908082b081908,
    0x081908082b190808,
    0x0819081908080808,
    0x081908190808082b,
    0x0819081908081919,
    0x0819081908082b08,
    0x0819081908190819,
    0x0819081908191908,
    0x08190819082b0808,
    0x0819081919080819,
    0x0819081919081908,
    0x0819081919190808,
    0x081908192b080808,
    0x081908192b191908,
    0x081908192b19192b,
    0x0819082b08080819,
    0x0819082b08081908,
    0x0819082b0808192b,
    0x0819082b08190808,
    0x0819082b19080808,
    0x0819082b192b0808,
    0x0819190808080808,
    0x081919080808082b,
    0x0819190808081919,
    0x0819190808082b08,
    0x0819190808190819,
    0x0819190808191908,
    0x08191908082b0808,
    0x0819190819080819,
    0x0819190819081908,
    0x0819190819082b19,
    0x0819190819190808,
    0x08191908192b1908,
    0x081919082b080808,
    0x0819191908080819,
    0x0819191908081908,
    0x0819191908190808,
    0x0819191919080808,
    0x0819192b08080808,
    0x0819192b08191908,
    0x0819192b19082b19,
    0x08192b0808080819,
    0x08192b0808081908,
    0x08192b0808190808,
    0x08192b080819082b,
    0x08192b0819080808,
    0x08192b0819191908,
    0x08192b082b08192b,
    0x08192b1908080808,
    0x08192b1908081919,
    0x08192b19192b192b,
    0x08192b2b19190819,
    0x08192b2b2b2b2b19,
    0x082b080808080808,
    0x082b08080808082b,
    0x082b080808081919,
    0x082b080808082b08,
    0x082b080808082b2b,
    0x082b080808190819,
    0x082b080808191908,
    0x082b0808082b0808,
    0x082b080819080819,
    0x082b080819081908,
    0x082b080819190808,
    0x082b08082b080808,
    0x082b08082b2b0808,
    0x082b081908080819,
    0x082b081908081908,
    0x082b081908190808,
    0x082b081919080808,
    0x082b081919082b08,
    0x082b0819192b1919,
    0x082b082b08080808,
    0x082b082b082b082b,
    0x082b082b2b080808,
    0x082b082b2b2b2b08,
    0x082b190808080819,
    0x082b190808081908,
    0x082b190808190808,
    0x082b1908082b2b19,
    0x082b190819080808,
    0x082b191908080808,
    0x082b191919080819,
    0x082b19191919082b,
    0x082b19192b192b19,
    0x082b192b08080819,
    0x082b192b08192b2b,
    0x082b192b2b2b192b,
    0x082b2b0808080808,
    0x082b2b0808082b08,
    0x082b2b0808082b2b,
    0x082b2b08082b0808,
    0x082b2b0819191919,
    0x082b2b082b082b08,
    0x082b2b082b2b082b,
    0x082b2b19192b2b08,
    0x082b2b192b190808,
    0x082b2b2b08082b08,
    0x082b2b2b082b0808,
    0x082b2b2b2b08082b,
    0x082b2b2b2b082b08,
    0x082b2b2b2b082b2b,
    0x1908080808080819,
    0x1908080808081908,
    0x190808080808192b,
    0x1908080808082b19,
    0x1908080808190808,
    0x190808080819082b,
    0x1908080808191919,
    0x1908080808192b08,
    0x19080808082b0819,
    0x19080808082b1908,
    0x1908080819080808,
    0x190808081908082b,
    0x1908080819081919,
    0x1908080819082b08,
    0x1908080819082b2b,
    0x1908080819190819,
    0x1908080819191908,
    0x19080808192b0808,
    0x19080808192b1919,
    0x190808082b080819,
    0x190808082b081908,
    0x190808082b190808,
    0x1908081908080808,
    0x190808190808082b,
    0x1908081908081919,
    0x1908081908082b08,
    0x1908081908190819,
    0x1908081908191908,
    0x19080819082b0808,
    0x1908081919080819,
    0x1908081919081908,
    0x1908081919190808,
    0x190808192b080808,
    0x190808192b081919,
    0x190808192b2b082b,
    0x1908082b08080819,
    0x1908082b08081908,
    0x1908082b08190808,
    0x1908082b0819082b,
    0x1908082b082b2b19,
    0x1908082b19080808,
    0x1908190808080808,
    0x190819080808082b,
    0x1908190808081919,
    0x1908190808082b08,
    0x1908190808190819,
    0x1908190808191908,
    0x1908190808192b19,
    0x19081908082b0808,
    0x1908190819080819,
    0x1908190819081908,
    0x1908190819190808,
    0x190819082b080808,
    0x190819082b191908,
    0x1908191908080819,
    0x1908191908081908,
    0x1908191908190808,
    0x19081919082b1908,
    0x1908191919080808,
    0x190819192b192b2b,
    0x1908192b08080808,
    0x1908192b08082b2b,
    0x1908192b19081908,
    0x1908192b19190808,
    0x19082b0808080819,
    0x19082b0808081908,
    0x19082b0808190808,
    0x19082b0819080808,
    0x19082b0819081919,
    0x19082b0819191908,
    0x19082b08192b082b,
    0x19082b1908080808,
    0x19082b1908190819,
    0x19082b1919081908,
    0x19082b1919190808,
    0x19082b19192b2b19,
    0x19082b2b08081908,
    0x1919080808080808,
    0x191908080808082b,
    0x1919080808081919,
    0x1919080808082b08,
    0x1919080808190819,
    0x1919080808191908,
    0x19190808082b0808,
    0x19190808082b2b08,
    0x1919080819080819,
    0x1919080819081908,
    0x1919080819190808,
    0x191908082b080808,
    0x1919081908080819,
    0x1919081908081908,
    0x1919081908190808,
    0x1919081908191919,
    0x1919081919080808,
    0x191908191908082b,
    0x1919082b08080808,
    0x1919082b19081908,
    0x1919082b2b2b2b2b,
    0x1919190808080819,
    0x1919190808081908,
    0x1919190808190808,
    0x19191908082b0819,
    0x1919190819080808,
    0x19191908192b0808,
    0x191919082b080819,
    0x191919082b2b0819,
    0x1919191908080808,
    0x1919191908082b08,
    0x191919192b080808,
    0x191919192b082b08,
    0x1919192b082b0819,
    0x1919192b192b2b08,
    0x1919192b2b2b0819,
    0x19192b0808080808,
    0x19192b0808191908,
    0x19192b0819080819,
    0x19192b0819190808,
    0x19192b082b192b19,
    0x19192b1908192b2b,
    0x19192b1919080808,
    0x19192b191908082b,
    0x19192b2b2b081919,
    0x192b080808080819,
    0x192b080808081908,
    0x192b080808190808,
    0x192b080819080808,
    0x192b080819191908,
    0x192b0808192b082b,
    0x192b08082b08192b,
    0x192b08082b2b2b19,
    0x192b081908080808,
    0x192b082b082b1908,
    0x192b082b19082b2b,
    0x192b082b2b19082b,
    0x192b190808080808,
    0x192b19080819192b,
    0x192b191908190808,
    0x192b191919080808,
    0x192b191919081919,
    0x192b19192b2b1908,
    0x192b2b0808080819,
    0x192b2b08192b2b2b,
    0x192b2b19082b1919,
    0x192b2b2b0808192b,
    0x192b2b2b19191908,
    0x192b2b2b192b082b,
    0x2b08080808080808,
    0x2b0808080808082b,
    0x2b08080808081919,
    0x2b08080808082b08,
    0x2b08080808190819,
    0x2b08080808191908,
    0x2b080808082b0808,
    0x2b080808082b2b2b,
    0x2b08080819080819,
    0x2b08080819081908,
    0x2b08080819190808,
    0x2b0808082b080808,
    0x2b0808082b08082b,
    0x2b0808082b2b2b08,
    0x2b0808082b2b2b2b,
    0x2b08081908080819,
    0x2b08081908081908,
    0x2b0808190808192b,
    0x2b08081908190808,
    0x2b08081919080808,
    0x2b08081919190819,
    0x2b08081919192b19,
    0x2b08082b08080808,
    0x2b08082b082b0808,
    0x2b08082b2b080808,
    0x2b08082b2b08082b,
    0x2b08082b2b2b0808,
    0x2b08082b2b2b2b08,
    0x2b08190808080819,
    0x2b08190808081908,
    0x2b08190808190808,
    0x2b0819080819082b,
    0x2b08190808191919,
    0x2b08190819080808,
    0x2b081908192b0808,
    0x2b0819082b082b19,
    0x2b08191908080808,
    0x2b08191919081908,
    0x2b0819192b2b1919,
    0x2b08192b08192b08,
    0x2b08192b192b2b2b,
    0x2b082b0808080808,
    0x2b082b0808082b08,
    0x2b082b08082b1919,
    0x2b082b0819192b2b,
    0x2b082b082b080808,
    0x2b082b082b08082b,
    0x2b082b082b2b2b08,
    0x2b082b190808192b,
    0x2b082b2b082b082b,
    0x2b082b2b2b080808,
    0x2b082b2b2b082b08,
    0x2b082b2b2b19192b,
    0x2b082b2b2b2b2b08,
    0x2b19080808080819,
    0x2b19080808081908,
    0x2b19080808190808,
    0x2b19080819080808,
    0x2b1908081919192b,
    0x2b1908082b081908,
    0x2b19081908080808,
    0x2b190819082b082b,
    0x2b190819192b1908,
    0x2b19082b1919192b,
    0x2b19082b2b082b19,
    0x2b19190808080808,
    0x2b19190808081919,
    0x2b19190819081908,
    0x2b19190819190808,
    0x2b19190819192b08,
    0x2b191919082b2b19,
    0x2b1919192b190808,
    0x2b1919192b19082b,
    0x2b19192b19080819,
    0x2b192b0819190819,
    0x2b192b082b2b192b,
    0x2b192b1919082b19,
    0x2b192b2b08191919,
    0x2b192b2b192b0808,
    0x2b2b080808080808,
    0x2b2b08080808082b,
    0x2b2b080808082b08,
    0x2b2b080808082b2b,
    0x2b2b0808082b0808,
    0x2b2b0808082b2b2b,
    0x2b2b08082b2b0808,
    0x2b2b081919190819,
    0x2b2b081919192b19,
    0x2b2b08192b2b192b,
    0x2b2b082b08080808,
    0x2b2b082b0808082b,
    0x2b2b082b08082b08,
    0x2b2b082b082b2b2b,
    0x2b2b082b2b080808,
    0x2b2b082b2b2b0808,
    0x2b2b190819080808,
    0x2b2b19082b191919,
    0x2b2b192b192b1919,
    0x2b2b192b2b192b08,
    0x2b2b2b0808082b2b,
    0x2b2b2b08082b0808,
    0x2b2b2b08082b082b,
    0x2b2b2b08082b2b08,
    0x2b2b2b082b2b0808,
    0x2b2b2b082b2b2b08,
    0x2b2b2b1908081908,
    0x2b2b2b192b081908,
    0x2b2b2b192b08192b,
    0x2b2b2b2b082b2b08,
    0x2b2b2b2b082b2b2b,
    0x2b2b2b2b2b190819,
    0x2b2b2b2b2b2b2b2b,
];
