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
//! into [`iq2xs_grid`], bits 9..16 their signs but the last, whose sign
//! makes the count of minus signs even. Scale byte `p` holds the scale `ls`
//! of the sub-block's first 16 weights (`l` 0, 1) in its low nibble, of the
//! last 16 in its high one. Weight `8l + j` of sub-block `p` is `d * (0.5 +
//! ls) * 0.25 * g * sign`, `g` byte `j` of `iq2xs_grid()[index]` (as
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
#[cfg_attr(kestrel_shipped, optimize(size))]
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
fn half_point(grid: &[u64; 512], sb: &[u8], r: usize, p: usize, c: usize) -> u32 {
    let l = 4 * p + c / 2;
    let index = usize::from(sb[index_place(r, l)]) | usize::from(sb[high_place(r, l)] & 1) << 8;
    (grid[index] >> (32 * (c % 2))) as u32
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
        let point = half_point(super::iq2xs_grid(), sb, r, p, w / 4);
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
        /// [`gemv_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemv_q6_kx8_q8_k), with
        /// 592-byte super-blocks).
        q8_k gemv gemv_iq2_xsx8_q8_k => gemm_iq2_xsx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ2_XSx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemm_q6_kx8_q8_k), with
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
    use super::{iq2xs_grid, IQ2XSX8_BLOCK_BYTES};
    use crate::layouts::iq3::aarch64::{
        iq2_sub_block, iq3_entry, iq3_finish, iq3_setup, IQ3_CONSTANTS,
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
    /// (`v14`: pairs 0 and 1, `v15`: 2 and 3; IQ2_S: its two high bits)
    /// into halfwords, times 8 (`v10`).
    #[rustfmt::skip]
    macro_rules! xs_prep {
        ("0") => { concat!("ldr q12, [x13], #16\n", xs_prep!(zip1, "v14")) };
        ("1") => { xs_prep!(zip2, "v14") };
        ("2") => { concat!("ldr q12, [x13], #16\n", xs_prep!(zip1, "v15")) };
        ("3") => { xs_prep!(zip2, "v15") };
        ($zip:ident, $bits:literal) => { concat!(
            stringify!($zip), " v10.16b, v12.16b, ", $bits, ".16b\n",
            "shl v10.8h, v10.8h, #3\n",
        ) };
    }
    pub(crate) use xs_prep;

    /// The address of row `$r`'s grid point (halfword `$r` of `v10`, its
    /// byte offset) in `x15`.
    #[rustfmt::skip]
    macro_rules! xs_addr {
        ($r:literal) => { concat!(
            "umov w15, v10.h[", $r, "]\n",
            "add x15, {grid}, x15\n",
        ) };
    }
    pub(crate) use xs_addr;

    /// The scale bytes of a sub-block's 8 rows (`v2`, one byte a row) made
    /// the scales `2 ls + 1` of its halves: the first's in `v2` (rows 0-3)
    /// and `v3` (4-7), the second's in `v17` and `v11` (`v22` = 1).
    #[rustfmt::skip]
    macro_rules! iq2_scales {
        () => { concat!(
            "ushr v17.8b, v2.8b, #4\n",
            "shl v17.8b, v17.8b, #1\n",
            "orr v17.8b, v17.8b, v22.8b\n",
            "shl v2.8b, v2.8b, #4\n",
            "ushr v2.8b, v2.8b, #3\n",
            "orr v2.8b, v2.8b, v22.8b\n",
            "uxtl v2.8h, v2.8b\n",
            "uxtl v17.8h, v17.8b\n",
            "uxtl2 v3.4s, v2.8h\n",
            "uxtl v2.4s, v2.4h\n",
            "uxtl2 v11.4s, v17.8h\n",
            "uxtl v17.4s, v17.4h\n",
        ) };
    }
    pub(crate) use iq2_scales;

    /// Between a sub-block's halves (the sub-block text's `mid`): the first
    /// half's sums scaled, then the second half's scales in `v2` / `v3`.
    #[rustfmt::skip]
    macro_rules! iq2_half_scales {
        () => { concat!(
            "mla v26.4s, v4.4s, v2.4s\n",
            "mla v25.4s, v5.4s, v3.4s\n",
            "movi v4.16b, #0\n",
            "movi v5.16b, #0\n",
            "mov v2.16b, v17.16b\n",
            "mov v3.16b, v11.16b\n",
        ) };
    }
    pub(crate) use iq2_half_scales;

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
        // grid (an offset is 8 x a 9-bit index: at most 4088, and `ld2`
        // reads the 8 bytes there; the grid has 4096), every store inside `out`: per
        // super-block the loop reads 592 bytes of `w` (16 + 8 x (32 + 32 +
        // 8)), 256 bytes of `qs` and 4 bytes of `d`, for nb super-blocks per
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
                iq2_scales!(),
                iq2_sub_block!(xs_addr, xs_prep, ["v20", "v21"], iq2_half_scales!()),
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
                grid = in(reg) iq2xs_grid().as_ptr(),
                out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                out("x14") _, out("x15") _,
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

    /// Decodes one IQ2_XSx8 super-block for the prompt path.
    fn decode(sb: &[u8], out: &mut Decoded) {
        let front = |r, p| {
            let scales = [
                super::run_scale(sb, r, 2 * p),
                super::run_scale(sb, r, 2 * p + 1),
            ];
            (super::sign_word(sb, r, p), scales)
        };
        let grid = super::iq2xs_grid();
        let point = |r, p, c| super::half_point(grid, sb, r, p, c);
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
            grid: super::iq2xs_grid().as_ptr().cast(),
            factor: 0.125,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ2_XS grid: point `i`'s component `k` is byte `k` of entry `i`
/// (the GGUF format's codebook, expanded at first use from its packed form
/// below).
pub fn iq2xs_grid() -> &'static [u64; 512] {
    IQ2XS_CELLS.points(&IQ2XS_PACKED, &super::IQ2_CODES)
}

static IQ2XS_CELLS: super::GridCells<u64, 512> = super::GridCells::new();

/// The grid's 2-bit codes (`super::GridCells`; `tests/vectors/gen_iq3_grids.py`
/// prints them from gguf-py's copy).
static IQ2XS_PACKED: [u16; 512] = [
    0x0000, 0x0002, 0x0005, 0x0008, 0x000a, 0x0011, 0x0014, 0x0016, 0x0019, 0x0020, 0x0022, 0x0025,
    0x0028, 0x0041, 0x0044, 0x0046, 0x0049, 0x0050, 0x0052, 0x0055, 0x0058, 0x0061, 0x0064, 0x0080,
    0x0082, 0x0085, 0x0088, 0x0091, 0x0094, 0x0099, 0x00a0, 0x0101, 0x0104, 0x0106, 0x0109, 0x0110,
    0x0112, 0x0115, 0x0118, 0x011a, 0x0121, 0x0124, 0x0140, 0x0142, 0x0145, 0x0148, 0x0151, 0x0154,
    0x0160, 0x0168, 0x0181, 0x0184, 0x0190, 0x0200, 0x0202, 0x0205, 0x0208, 0x0211, 0x0214, 0x0220,
    0x0241, 0x0244, 0x0250, 0x0255, 0x0280, 0x028a, 0x0401, 0x0404, 0x0406, 0x0409, 0x0410, 0x0412,
    0x0415, 0x0418, 0x0421, 0x0424, 0x0440, 0x0442, 0x0445, 0x0448, 0x0451, 0x0454, 0x0456, 0x0460,
    0x0481, 0x0484, 0x0490, 0x0500, 0x0502, 0x0505, 0x0508, 0x0511, 0x0514, 0x0520, 0x0541, 0x0544,
    0x0550, 0x0561, 0x0580, 0x0601, 0x0604, 0x0610, 0x0626, 0x0640, 0x0642, 0x0684, 0x0800, 0x0802,
    0x0805, 0x0808, 0x080a, 0x0811, 0x0814, 0x0820, 0x0825, 0x0841, 0x0844, 0x0850, 0x0858, 0x0880,
    0x08a0, 0x08aa, 0x0901, 0x0904, 0x0910, 0x0940, 0x0981, 0x0989, 0x0a00, 0x0a20, 0x0a28, 0x0a96,
    0x0aa0, 0x1001, 0x1004, 0x1006, 0x1009, 0x1010, 0x1012, 0x1015, 0x1018, 0x1021, 0x1024, 0x1040,
    0x1042, 0x1045, 0x1048, 0x1051, 0x1054, 0x1060, 0x106a, 0x1081, 0x1084, 0x1090, 0x1100, 0x1102,
    0x1105, 0x1108, 0x1111, 0x1114, 0x1120, 0x1141, 0x1144, 0x1150, 0x1180, 0x1194, 0x1196, 0x1201,
    0x1204, 0x1206, 0x1210, 0x1240, 0x1260, 0x1400, 0x1402, 0x1405, 0x1408, 0x1411, 0x1414, 0x1420,
    0x1441, 0x1444, 0x1449, 0x1450, 0x1464, 0x1480, 0x1501, 0x1504, 0x1510, 0x1540, 0x1600, 0x1614,
    0x1649, 0x1801, 0x1804, 0x1810, 0x1812, 0x1840, 0x1854, 0x1886, 0x1900, 0x1905, 0x1966, 0x1a51,
    0x1aa9, 0x2000, 0x2002, 0x2005, 0x2008, 0x200a, 0x2011, 0x2014, 0x2020, 0x2041, 0x2044, 0x2050,
    0x2080, 0x20a0, 0x2101, 0x2104, 0x2110, 0x2140, 0x2148, 0x2165, 0x2200, 0x2222, 0x2280, 0x22a8,
    0x2401, 0x2404, 0x2410, 0x2429, 0x2440, 0x2500, 0x2541, 0x2552, 0x2599, 0x2601, 0x261a, 0x26a6,
    0x2800, 0x2808, 0x280a, 0x2820, 0x2855, 0x2888, 0x28a2, 0x2968, 0x2990, 0x2a08, 0x2a20, 0x2a82,
    0x2a88, 0x2a8a, 0x4001, 0x4004, 0x4006, 0x4009, 0x4010, 0x4012, 0x4015, 0x4018, 0x4021, 0x4024,
    0x4040, 0x4042, 0x4045, 0x4048, 0x404a, 0x4051, 0x4054, 0x4060, 0x4065, 0x4081, 0x4084, 0x4090,
    0x4100, 0x4102, 0x4105, 0x4108, 0x4111, 0x4114, 0x4120, 0x4141, 0x4144, 0x4150, 0x4180, 0x4185,
    0x41a2, 0x4201, 0x4204, 0x4210, 0x4212, 0x4229, 0x4240, 0x4400, 0x4402, 0x4405, 0x4408, 0x4411,
    0x4414, 0x4419, 0x4420, 0x4441, 0x4444, 0x4450, 0x4480, 0x4494, 0x4501, 0x4504, 0x4510, 0x4524,
    0x4540, 0x459a, 0x4600, 0x460a, 0x4644, 0x4650, 0x4801, 0x4804, 0x4810, 0x4840, 0x4845, 0x4854,
    0x4862, 0x4900, 0x4911, 0x4944, 0x4950, 0x4969, 0x4a04, 0x5000, 0x5002, 0x5005, 0x5008, 0x5011,
    0x5014, 0x5020, 0x5028, 0x5041, 0x5044, 0x5050, 0x5080, 0x5101, 0x5104, 0x5110, 0x5115, 0x5140,
    0x5142, 0x5200, 0x5244, 0x52aa, 0x5401, 0x5404, 0x5410, 0x5421, 0x5440, 0x5460, 0x5481, 0x54a1,
    0x5500, 0x5508, 0x5580, 0x5588, 0x5621, 0x5668, 0x56a1, 0x5800, 0x5814, 0x5841, 0x5850, 0x5899,
    0x591a, 0x5940, 0x5942, 0x5a85, 0x6001, 0x6004, 0x6010, 0x6040, 0x6054, 0x6062, 0x6086, 0x60a9,
    0x6100, 0x6224, 0x624a, 0x6292, 0x6400, 0x6416, 0x6510, 0x6540, 0x6545, 0x65a4, 0x6801, 0x686a,
    0x6925, 0x6a06, 0x6a54, 0x6a62, 0x8000, 0x8002, 0x8005, 0x8008, 0x8011, 0x8014, 0x8020, 0x802a,
    0x8041, 0x8044, 0x8050, 0x8080, 0x8082, 0x80a8, 0x80aa, 0x8101, 0x8104, 0x8106, 0x8110, 0x8140,
    0x8151, 0x8159, 0x8200, 0x8220, 0x8280, 0x8282, 0x82a0, 0x82a8, 0x8401, 0x8404, 0x8410, 0x8412,
    0x8415, 0x8440, 0x8460, 0x8489, 0x8500, 0x8544, 0x85a5, 0x8618, 0x866a, 0x8800, 0x8808, 0x8825,
    0x885a, 0x8880, 0x8882, 0x88a8, 0x8906, 0x8a22, 0x8a80, 0x8a88, 0x8a96, 0x8aa8, 0x9001, 0x9004,
    0x9010, 0x9040, 0x9056, 0x9084, 0x9100, 0x9122, 0x9164, 0x9256, 0x9289, 0x9400, 0x9405, 0x9444,
    0x9450, 0x9458, 0x9529, 0x9590, 0x9592, 0x9641, 0x9851, 0x98a6, 0x9949, 0x9a15, 0x9a60, 0xa000,
    0xa002, 0xa008, 0xa00a, 0xa020, 0xa02a, 0xa0a0, 0xa151, 0xa159, 0xa1a6, 0xa200, 0xa202, 0xa208,
    0xa22a, 0xa280, 0xa2a0, 0xa440, 0xa495, 0xa665, 0xa698, 0xa80a, 0xa820, 0xa822, 0xa828, 0xa8a0,
    0xa8a8, 0xa904, 0xa984, 0xa986, 0xaa28, 0xaa2a, 0xaa91, 0xaaaa,
];
