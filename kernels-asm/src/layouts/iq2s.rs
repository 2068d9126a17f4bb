//! IQ2_Sx8, the whole layout in one file: GGUF IQ2_S super-blocks
//! repacked 8 rows at a time in exactly the GGUF bytes' size (2.5625 bits
//! per weight), every value kept exactly (docs/kernels.md, "IQ2_Sx8").
//! Here are its grid, geometry and byte order, its repacker (its inverse,
//! which only the tests use, is `kestrel_tests::unpack_iq2_s`), its scalar
//! specification ([`generic`]) and its kernels: a member of the codebook
//! family ([`super::iq3`]) like IQ2_XS, with a 10-bit index into a grid of
//! 1024 points, a sign bit per weight and a scale per 16 weights: aarch64 a
//! GEMV loop over the family's sub-block text, x86_64 tiles over its body,
//! the one of the build also named [`arch`].
//!
//! A GGUF IQ2_S block (82 bytes, 256 weights) is `d: f16`, `qs[32]`,
//! `signs[32]`, `qh[8]` and 8 scale bytes. Byte `4p + l` of `qs` holds the
//! low 8 bits of the index into [`iq2s_grid`] of weights `8l..8l + 8` of
//! 32-weight sub-block `p`, bits `2l..2l + 2` of `qh[p]` its two high bits,
//! byte `4p + l` of `signs` their 8 signs (bit `j`: weight `8l + j`). Scale
//! byte `p` holds the scale `ls` of the sub-block's first 16 weights (`l`
//! 0, 1) in its low nibble, of the last 16 in its high one. Weight `8l +
//! j` of sub-block `p` is `d * (0.5 + ls) * 0.25 * g * sign`, `g` byte `j`
//! of `iq2s_grid()[index]` (as `dequantize_row_iq2_s`): `d * (2 ls + 1) * g
//! * sign / 8`.
//!
//! For row group `g` and super-block column `b` the IQ2_Sx8 super-block
//! (656 bytes, at `(g * nb + b) * 656`) is:
//!
//! * bytes `2r, 2r + 1`: `d` of row `8g + r` (f16 LE, copied);
//! * `16 + 32p + 4r + l`: sign byte `4p + l` of row `r`;
//! * `272 + 32p + 8l + r`: `qs[4p + l]` of row `r` (the index's low bits);
//! * `528 + 8p + r`: `qh[p]` of row `r`;
//! * `592 + 8p + r`: scale byte `p` of row `r`.
//!
//! So a sub-block's sign bytes are 8 rows' 32-bit sign words as the
//! family's kernels read them, and a pair of chunks' 8 low index bytes are
//! 8 consecutive bytes, as in IQ2_XSx8.
//!
//! Rows past `rows` in the last group are padding: all bytes zero (`d = 0`).

use super::iq3::IQ3_ROWS;
use crate::layout::QK_K;
use crate::shape::ShapeError;

/// Bytes of one GGUF IQ2_S super-block (256 weights).
pub const IQ2_S_BLOCK_BYTES: usize = 2 + QK_K / 4 + QK_K / 32 + QK_K / 32;
/// Rows in one IQ2_Sx8 row group.
pub const IQ2SX8_ROWS: usize = IQ3_ROWS;
/// Offset of the sign bytes in a super-block.
pub const IQ2SX8_SIGNS_AT: usize = 2 * IQ2SX8_ROWS;
/// Offset of the low index bytes.
pub const IQ2SX8_INDEX_AT: usize = IQ2SX8_SIGNS_AT + IQ2SX8_ROWS * QK_K / 8;
/// Offset of the high index bits (`qh`).
pub const IQ2SX8_HIGH_AT: usize = IQ2SX8_INDEX_AT + IQ2SX8_ROWS * QK_K / 8;
/// Offset of the scale bytes.
pub const IQ2SX8_SCALES_AT: usize = IQ2SX8_HIGH_AT + IQ2SX8_ROWS * QK_K / 32;
/// Bytes of one IQ2_Sx8 super-block (8 rows x 256 weights): 8 GGUF blocks'
/// worth.
pub const IQ2SX8_BLOCK_BYTES: usize = IQ2SX8_SCALES_AT + IQ2SX8_ROWS * QK_K / 32;

const _: () = assert!(IQ2_S_BLOCK_BYTES == 82 && IQ2SX8_INDEX_AT == 272);
const _: () = assert!(IQ2SX8_HIGH_AT == 528 && IQ2SX8_SCALES_AT == 592);
const _: () = assert!(IQ2SX8_BLOCK_BYTES == IQ2SX8_ROWS * IQ2_S_BLOCK_BYTES);

/// Bytes of a `rows x cols` matrix in IQ2_Sx8, padding rows included
/// (`None`: it overflows).
pub fn iq2_sx8_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::x8_bytes(rows, cols, IQ2SX8_BLOCK_BYTES)
}

/// Bytes of the same matrix as row-major GGUF IQ2_S (`None`: it
/// overflows).
pub fn iq2_s_bytes(rows: usize, cols: usize) -> Option<usize> {
    super::gguf_bytes(rows, cols, IQ2_S_BLOCK_BYTES)
}

/// Where sign byte `l` (0..32 over the super-block) of row `r` is in a
/// super-block.
#[inline]
pub fn sign_place(r: usize, l: usize) -> usize {
    IQ2SX8_SIGNS_AT + 32 * (l / 4) + 4 * r + l % 4
}

/// Where `qs[l]` of row `r` is.
#[inline]
pub fn index_place(r: usize, l: usize) -> usize {
    IQ2SX8_INDEX_AT + 32 * (l / 4) + 8 * (l % 4) + r
}

/// Where `qh[p]` of row `r` is.
#[inline]
pub fn high_place(r: usize, p: usize) -> usize {
    IQ2SX8_HIGH_AT + 8 * p + r
}

/// Where scale byte `p` of row `r` is.
#[inline]
pub fn scale_place(r: usize, p: usize) -> usize {
    IQ2SX8_SCALES_AT + 8 * p + r
}

/// Writes one IQ2_Sx8 super-block from up to 8 GGUF IQ2_S blocks (`src[r]`
/// for row `r`; missing rows are padding).
#[cfg_attr(kestrel_shipped, optimize(size))]
fn pack_super_block(src: &[&[u8]], sb: &mut [u8]) {
    sb.fill(0);
    for (r, block) in src.iter().enumerate() {
        sb[2 * r..2 * r + 2].copy_from_slice(&block[..2]);
        for l in 0..QK_K / 8 {
            sb[index_place(r, l)] = block[2 + l];
            sb[sign_place(r, l)] = block[2 + QK_K / 8 + l];
        }
        for p in 0..QK_K / 32 {
            sb[high_place(r, p)] = block[2 + QK_K / 4 + p];
            sb[scale_place(r, p)] = block[2 + QK_K / 4 + QK_K / 32 + p];
        }
    }
}

/// Repacks a row-major GGUF IQ2_S matrix (`rows x cols`, `cols` a
/// multiple of 256) into IQ2_Sx8 (`out`: [`iq2_sx8_bytes`] bytes).
pub fn repack_iq2_s(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), ShapeError> {
    super::repack_row_groups(
        [
            "iq2_s columns (a multiple of 256)",
            "iq2_s source bytes",
            "iq2_sx8 output bytes",
        ],
        src,
        (rows, cols),
        out,
        (IQ2_S_BLOCK_BYTES, IQ2SX8_BLOCK_BYTES),
        pack_super_block,
    )
}

/// The sign word of sub-block `p` of row `r`: byte `l` the signs of
/// weights `8l..8l + 8`.
#[inline]
fn sign_word(sb: &[u8], r: usize, p: usize) -> u32 {
    let at = sign_place(r, 4 * p);
    u32::from_le_bytes([sb[at], sb[at + 1], sb[at + 2], sb[at + 3]])
}

/// Half `c % 2` of the grid point of chunk `c` (0..8) of sub-block `p` of
/// row `r`: the 4 components of weights `4c..4c + 4`.
#[inline]
fn half_point(grid: &[u64; 1024], sb: &[u8], r: usize, p: usize, c: usize) -> u32 {
    let high = usize::from(sb[high_place(r, p)] >> (c / 2 * 2)) & 3;
    let index = usize::from(sb[index_place(r, 4 * p + c / 2)]) | high << 8;
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
    use super::{half_point, sign_word, IQ2SX8_BLOCK_BYTES, IQ2SX8_ROWS};
    use crate::generic::gemm_k_groups;
    use crate::layouts::iq3::{component, signed};

    /// The signed value `g * sign` (-43..=43) of weight `i` (0..256) of row
    /// `r` (0..8) in an IQ2_Sx8 super-block.
    #[inline]
    pub fn iq2sx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let (p, w) = (i / 32, i % 32);
        let point = half_point(super::iq2s_grid(), sb, r, p, w / 4);
        signed(sign_word(sb, r, p), w, component(point, w % 4))
    }

    /// The scale `2 ls + 1` (1..=31) of 16-weight run `h` (0..16) of row
    /// `r`.
    #[inline]
    pub fn iq2sx8_scale(sb: &[u8], r: usize, h: usize) -> i32 {
        super::run_scale(sb, r, h)
    }

    /// The eight rows of one IQ2_Sx8 row group dotted with one Q8_K
    /// activation row.
    pub fn iq2sx8_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; IQ2SX8_ROWS] {
        crate::layouts::iq3::group_dot(
            IQ2SX8_BLOCK_BYTES,
            (iq2sx8_weight, iq2sx8_scale),
            3,
            group,
            act_qs,
            act_d,
        )
    }

    forwarding_entry!(
        /// GEMV, IQ2_Sx8 weights x one Q8_K activation row (shapes as
        /// [`gemv_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemv_q6_kx8_q8_k), with
        /// 656-byte super-blocks).
        q8_k gemv gemv_iq2_sx8_q8_k => gemm_iq2_sx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ2_Sx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemm_q6_kx8_q8_k), with
        /// 656-byte super-blocks).
        q8_k gemm gemm_iq2_sx8_q8_k => gemm_k_groups [IQ2SX8_BLOCK_BYTES, |g, q, d, _| iq2sx8_group_dot(g, q, d)]
    );
}

/// aarch64: the GEMV loop (per sub-block the 8 rows' sign words loaded as
/// they are, their high index bits spread by pair, the scales of both
/// halves, then the family's sub-block text, each chunk pair's 8 indices
/// widened to byte offsets into the grid, the second chunk's 4 bytes
/// further, the first half's sums scaled between the halves), and a tile
/// that runs it per activation row.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{iq2s_grid, IQ2SX8_BLOCK_BYTES};
    use crate::layouts::iq2xs::aarch64::{iq2_half_scales, iq2_scales, xs_addr, xs_prep};
    use crate::layouts::iq3::aarch64::{
        iq2_sub_block, iq3_entry, iq3_finish, iq3_setup, IQ3_CONSTANTS,
    };
    use crate::layouts::iq3::{decode_super_block, Decoded};

    /// The GEMV loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// Per 32-weight sub-block (8 rows): 4 loads, 8 instructions for the
    /// high index bits, 13 for the scales of both halves, 3 or 4 per chunk
    /// pair for the offsets, 6 between the halves, and per chunk 24 to
    /// look up its 8 halves, 8 to sign them, 2 `sdot`: about 315
    /// instructions for 8 x 32 weights.
    ///
    /// # Safety
    /// `w` must point to `groups * nb * 656` readable bytes, `qs` to `nb *
    /// 256`, `d` to `nb` floats, `out` to `groups * 8` writable floats, `nb
    /// >= 1`, `groups >= 1`, and the CPU must implement dotprod.
    #[inline(never)]
    #[target_feature(enable = "neon,dotprod")]
    unsafe fn gemv_iq2sx8_groups(
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
        // x a 10-bit index: at most 8184, and `ld2` reads the 8 bytes
        // there; the grid has 8192), every store inside `out`: per super-block the
        // loop reads 656 bytes of `w` (16 + 8 x (32 + 32 + 8 + 8)), 256
        // bytes of `qs` and 4 bytes of `d`, for nb super-blocks per group;
        // each group stores 32 bytes of `out`. Only the listed registers are
        // written; no stack is used.
        unsafe {
            core::arch::asm!(
                iq3_setup!(),
                "movi v13.16b, #3", // two high index bits
                "2:",
                "movi v28.16b, #0", // float sums, rows 0-3
                "movi v27.16b, #0", // rows 4-7
                "mov x9, {qs}",
                "mov x10, {d}",
                "mov x11, {nb}",
                "3:",
                "ld1 {{v29.8h}}, [{w}], #16", // d of the 8 rows (f16)
                "add x13, {w}, #256", // the low index bytes
                "add x14, {w}, #512", // qh, then the scales 64 bytes on
                "movi v26.16b, #0", // sumi, rows 0-3
                "movi v25.16b, #0", // rows 4-7
                "mov x12, #8",
                "4:",
                "ld1 {{v0.16b, v1.16b}}, [{w}], #32", // sign words, rows 0-3 / 4-7
                "ld1 {{v18.16b, v19.16b}}, [x9], #32", // 32 activations
                "ldr d2, [x14, #64]", // the 8 rows' scale bytes
                "ldr d14, [x14], #8", // the 8 rows' qh
                "ushr v12.8b, v14.8b, #2", // by pair: 0, 1 in v14; 2, 3 in v15
                "ushr v15.8b, v14.8b, #4",
                "ushr v10.8b, v14.8b, #6",
                "mov v14.d[1], v12.d[0]",
                "mov v15.d[1], v10.d[0]",
                "and v14.16b, v14.16b, v13.16b",
                "and v15.16b, v15.16b, v13.16b",
                iq2_scales!(),
                iq2_sub_block!(xs_addr, xs_prep, ["v20", "v21"], iq2_half_scales!()),
                "subs x12, x12, #1",
                "b.ne 4b",
                "add {w}, {w}, #384", // past the low bytes, qh and scales
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
                grid = in(reg) iq2s_grid().as_ptr(),
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

    /// Decodes one IQ2_Sx8 super-block for the prompt path.
    fn decode(sb: &[u8], out: &mut Decoded) {
        let front = |r, p| {
            let scales = [
                super::run_scale(sb, r, 2 * p),
                super::run_scale(sb, r, 2 * p + 1),
            ];
            (super::sign_word(sb, r, p), scales)
        };
        let grid = super::iq2s_grid();
        let point = |r, p, c| super::half_point(grid, sb, r, p, c);
        decode_super_block(sb, out, front, point);
    }

    iq3_entry!(
        gemv_iq2_sx8_q8_k,
        gemm_iq2_sx8_q8_k,
        gemv_iq2sx8_groups,
        decode,
        IQ2SX8_BLOCK_BYTES,
        0.125,
        true
    );
}

/// x86_64: tiles of one row group (8 rows, one per 32-bit lane) x up to 4
/// activation rows over the codebook family's body with IQ2_S's front
/// end, run by Q6_Kx8's driver (`k8_gemm`).
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::{
        IQ2SX8_BLOCK_BYTES, IQ2SX8_HIGH_AT, IQ2SX8_INDEX_AT, IQ2SX8_SCALES_AT, IQ2SX8_SIGNS_AT,
    };
    use crate::layouts::iq3::x86_64::{iq3_entry, Front, FRONT_IQ2_S};

    iq3_entry!(
        "IQ2_Sx8",
        gemv_iq2_sx8_q8_k,
        gemm_iq2_sx8_q8_k,
        gemm_iq2_sx8_q8_k_tiles,
        IQ2S,
        [iq2s_tile, iq2s_tile_avx_vnni, iq2s_tile_avx512_vnni],
        iq2s_tile_body,
        IQ2SX8_BLOCK_BYTES,
        FRONT_IQ2_S
    );

    /// The layout's places for the family's x86 code.
    fn front() -> Front {
        Front {
            bytes: IQ2SX8_BLOCK_BYTES,
            index_at: IQ2SX8_INDEX_AT,
            words_at: IQ2SX8_SIGNS_AT,
            high_at: IQ2SX8_HIGH_AT,
            scales_at: IQ2SX8_SCALES_AT,
            grid: super::iq2s_grid().as_ptr().cast(),
            factor: 0.125,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ2_S grid: point `i`'s component `k` is byte `k` of entry `i`
/// (the GGUF format's codebook, expanded at first use from its packed form
/// below).
pub fn iq2s_grid() -> &'static [u64; 1024] {
    IQ2S_CELLS.points(&IQ2S_PACKED, &super::IQ2_CODES)
}

static IQ2S_CELLS: super::GridCells<u64, 1024> = super::GridCells::new();

/// The grid's 2-bit codes (`super::GridCells`; `tests/vectors/gen_iq3_grids.py`
/// prints them from gguf-py's copy).
static IQ2S_PACKED: [u16; 1024] = [
    0x0000, 0x0002, 0x0005, 0x0008, 0x000a, 0x0011, 0x0014, 0x0016, 0x0019, 0x0020, 0x0022, 0x0025,
    0x0028, 0x0041, 0x0044, 0x0046, 0x0049, 0x0050, 0x0052, 0x0055, 0x0058, 0x0061, 0x0064, 0x0066,
    0x0069, 0x0080, 0x0082, 0x0085, 0x0088, 0x0091, 0x0094, 0x00a0, 0x00a5, 0x00aa, 0x0101, 0x0104,
    0x0106, 0x0109, 0x0110, 0x0112, 0x0115, 0x0118, 0x0121, 0x0124, 0x0140, 0x0142, 0x0145, 0x0148,
    0x0151, 0x0154, 0x0156, 0x0159, 0x0160, 0x0165, 0x0168, 0x0181, 0x0184, 0x0190, 0x0192, 0x0195,
    0x01a1, 0x01a4, 0x0200, 0x0202, 0x0205, 0x0208, 0x0211, 0x0214, 0x0220, 0x022a, 0x0241, 0x0244,
    0x0246, 0x0249, 0x0250, 0x0255, 0x0280, 0x0285, 0x028a, 0x0294, 0x02a2, 0x0401, 0x0404, 0x0406,
    0x0409, 0x0410, 0x0412, 0x0415, 0x0418, 0x0421, 0x0424, 0x0426, 0x0429, 0x0440, 0x0442, 0x0445,
    0x0448, 0x044a, 0x0451, 0x0454, 0x0456, 0x0459, 0x0460, 0x0462, 0x0465, 0x0481, 0x0484, 0x0486,
    0x0489, 0x0490, 0x0495, 0x0498, 0x04a1, 0x04a4, 0x0500, 0x0502, 0x0505, 0x0508, 0x050a, 0x0511,
    0x0514, 0x0516, 0x0519, 0x0520, 0x0525, 0x0528, 0x0541, 0x0544, 0x0546, 0x0549, 0x0550, 0x0552,
    0x0555, 0x0558, 0x0561, 0x0564, 0x0580, 0x0582, 0x0585, 0x0588, 0x0591, 0x0594, 0x05a0, 0x0601,
    0x0604, 0x0606, 0x0609, 0x0610, 0x0615, 0x0640, 0x0645, 0x0648, 0x0651, 0x0654, 0x0660, 0x0681,
    0x0684, 0x0690, 0x0800, 0x0802, 0x0805, 0x0808, 0x0811, 0x0814, 0x0816, 0x0819, 0x0820, 0x0825,
    0x082a, 0x0841, 0x0844, 0x0846, 0x0849, 0x0850, 0x0852, 0x0855, 0x0858, 0x0861, 0x0864, 0x0880,
    0x0885, 0x0894, 0x08aa, 0x0901, 0x0904, 0x0910, 0x0912, 0x0915, 0x0918, 0x0921, 0x0940, 0x0945,
    0x0948, 0x0951, 0x0954, 0x0960, 0x0981, 0x0990, 0x0a00, 0x0a11, 0x0a14, 0x0a22, 0x0a28, 0x0a2a,
    0x0a50, 0x0a99, 0x1001, 0x1004, 0x1006, 0x1009, 0x1010, 0x1012, 0x1015, 0x1018, 0x1021, 0x1024,
    0x1026, 0x1040, 0x1042, 0x1045, 0x1048, 0x1051, 0x1054, 0x1056, 0x1059, 0x1060, 0x1062, 0x1065,
    0x1068, 0x1081, 0x1084, 0x1086, 0x1090, 0x1095, 0x1098, 0x10a1, 0x10a4, 0x1100, 0x1102, 0x1105,
    0x1108, 0x110a, 0x1111, 0x1114, 0x1116, 0x1119, 0x1120, 0x1122, 0x1125, 0x1128, 0x1141, 0x1144,
    0x1146, 0x1149, 0x1150, 0x1152, 0x1155, 0x1158, 0x1161, 0x1164, 0x1180, 0x1182, 0x1185, 0x1188,
    0x1191, 0x1194, 0x1201, 0x1204, 0x1209, 0x1210, 0x1215, 0x1221, 0x1224, 0x1240, 0x1245, 0x1251,
    0x1254, 0x1281, 0x1284, 0x1290, 0x1400, 0x1402, 0x1405, 0x1408, 0x1411, 0x1414, 0x1416, 0x1419,
    0x1420, 0x1425, 0x1428, 0x1441, 0x1444, 0x1446, 0x1449, 0x1450, 0x1452, 0x1455, 0x1458, 0x1461,
    0x1464, 0x1480, 0x1482, 0x1485, 0x1488, 0x1491, 0x1494, 0x14a0, 0x1501, 0x1504, 0x1506, 0x1509,
    0x1510, 0x1512, 0x1515, 0x1518, 0x1521, 0x1524, 0x1540, 0x1542, 0x1545, 0x1548, 0x1551, 0x1554,
    0x1560, 0x1581, 0x1584, 0x1590, 0x1600, 0x1605, 0x1608, 0x1611, 0x1614, 0x1620, 0x1641, 0x1644,
    0x1650, 0x1680, 0x16aa, 0x1801, 0x1804, 0x1806, 0x1809, 0x1810, 0x1815, 0x1818, 0x1821, 0x1840,
    0x1842, 0x1845, 0x1848, 0x1851, 0x1854, 0x1860, 0x1881, 0x1884, 0x1900, 0x1902, 0x1905, 0x1908,
    0x1911, 0x1914, 0x1920, 0x1941, 0x1944, 0x1950, 0x1969, 0x19a2, 0x1a04, 0x1a10, 0x1a40, 0x1a56,
    0x2000, 0x2002, 0x2005, 0x2008, 0x2011, 0x2014, 0x2016, 0x2019, 0x2020, 0x2025, 0x202a, 0x2041,
    0x2044, 0x2050, 0x2052, 0x2055, 0x2064, 0x2080, 0x208a, 0x2094, 0x20aa, 0x2101, 0x2104, 0x2110,
    0x2112, 0x2115, 0x2121, 0x2140, 0x2142, 0x2145, 0x2151, 0x2154, 0x2160, 0x2181, 0x2184, 0x2190,
    0x2200, 0x220a, 0x2222, 0x2228, 0x222a, 0x2244, 0x2250, 0x2288, 0x228a, 0x22a8, 0x2401, 0x2404,
    0x2406, 0x2409, 0x2410, 0x2415, 0x2418, 0x2421, 0x2424, 0x2440, 0x2442, 0x2445, 0x2448, 0x2451,
    0x2454, 0x2460, 0x2481, 0x2484, 0x2490, 0x2500, 0x2505, 0x2508, 0x2511, 0x2514, 0x2520, 0x2541,
    0x2544, 0x2550, 0x2566, 0x2580, 0x2601, 0x2604, 0x2610, 0x2640, 0x2659, 0x2800, 0x2805, 0x2811,
    0x2814, 0x2841, 0x2844, 0x2850, 0x288a, 0x28aa, 0x2901, 0x2904, 0x2910, 0x2995, 0x2a0a, 0x2a22,
    0x2a64, 0x2a88, 0x2a8a, 0x4001, 0x4004, 0x4006, 0x4009, 0x4010, 0x4012, 0x4015, 0x4018, 0x401a,
    0x4021, 0x4024, 0x4026, 0x4040, 0x4042, 0x4045, 0x4048, 0x404a, 0x4051, 0x4054, 0x4056, 0x4059,
    0x4060, 0x4062, 0x4065, 0x4081, 0x4084, 0x4090, 0x4095, 0x4098, 0x40a1, 0x40a4, 0x4100, 0x4102,
    0x4105, 0x4108, 0x4111, 0x4114, 0x4116, 0x4119, 0x4120, 0x4122, 0x4125, 0x4141, 0x4144, 0x4146,
    0x4149, 0x4150, 0x4152, 0x4155, 0x4158, 0x4161, 0x4164, 0x4180, 0x4182, 0x4185, 0x4188, 0x4191,
    0x4194, 0x41a0, 0x4201, 0x4204, 0x4210, 0x4212, 0x4215, 0x4218, 0x4224, 0x4240, 0x4245, 0x4248,
    0x4251, 0x4254, 0x4260, 0x4281, 0x4284, 0x4400, 0x4402, 0x4405, 0x4408, 0x440a, 0x4411, 0x4414,
    0x4416, 0x4419, 0x4420, 0x4422, 0x4425, 0x4428, 0x4441, 0x4444, 0x4446, 0x4449, 0x4450, 0x4452,
    0x4455, 0x4458, 0x4461, 0x4464, 0x4480, 0x4482, 0x4485, 0x4488, 0x4491, 0x4494, 0x44a0, 0x4501,
    0x4504, 0x4506, 0x4509, 0x4510, 0x4512, 0x4515, 0x4518, 0x4521, 0x4524, 0x4540, 0x4542, 0x4545,
    0x4548, 0x4551, 0x4554, 0x4560, 0x456a, 0x4581, 0x4584, 0x4590, 0x4600, 0x4602, 0x4605, 0x4608,
    0x4611, 0x4614, 0x4620, 0x4641, 0x4644, 0x4650, 0x4680, 0x46a5, 0x4801, 0x4804, 0x4809, 0x4810,
    0x4812, 0x4815, 0x4818, 0x4821, 0x4824, 0x4840, 0x4842, 0x4845, 0x4848, 0x4851, 0x4854, 0x4860,
    0x4884, 0x4890, 0x4900, 0x4902, 0x4905, 0x4908, 0x4911, 0x4914, 0x4920, 0x4941, 0x4944, 0x4950,
    0x4980, 0x4996, 0x4a01, 0x4a04, 0x4a10, 0x4a40, 0x5000, 0x5002, 0x5005, 0x5008, 0x5011, 0x5014,
    0x5016, 0x5019, 0x5020, 0x5022, 0x5025, 0x5028, 0x5041, 0x5044, 0x5046, 0x5049, 0x5050, 0x5052,
    0x5055, 0x5058, 0x5061, 0x5064, 0x5080, 0x5082, 0x5085, 0x5088, 0x5091, 0x5094, 0x5101, 0x5104,
    0x5106, 0x5109, 0x5110, 0x5112, 0x5115, 0x5118, 0x5121, 0x5124, 0x5140, 0x5142, 0x5145, 0x5148,
    0x5151, 0x5154, 0x5160, 0x5181, 0x5184, 0x5190, 0x5200, 0x5205, 0x5208, 0x5211, 0x5214, 0x5220,
    0x5241, 0x5244, 0x5250, 0x5269, 0x5280, 0x5401, 0x5404, 0x5406, 0x5409, 0x5410, 0x5412, 0x5415,
    0x5418, 0x5421, 0x5424, 0x5440, 0x5442, 0x5445, 0x5448, 0x5451, 0x5454, 0x5460, 0x5481, 0x5484,
    0x5490, 0x5500, 0x5502, 0x5505, 0x5508, 0x5511, 0x5514, 0x5520, 0x5541, 0x5544, 0x5550, 0x5580,
    0x5601, 0x5604, 0x5610, 0x5626, 0x5640, 0x5800, 0x5802, 0x5805, 0x5808, 0x5811, 0x5814, 0x5820,
    0x5841, 0x5844, 0x5850, 0x585a, 0x5880, 0x5901, 0x5904, 0x5910, 0x5940, 0x5a00, 0x5a19, 0x5a85,
    0x5aa8, 0x6001, 0x6004, 0x6006, 0x6010, 0x6012, 0x6015, 0x6018, 0x6021, 0x6024, 0x6040, 0x6045,
    0x6048, 0x6051, 0x6054, 0x6060, 0x6084, 0x6090, 0x6100, 0x6102, 0x6105, 0x6108, 0x6111, 0x6114,
    0x6120, 0x6141, 0x6144, 0x6150, 0x6180, 0x6199, 0x6204, 0x6210, 0x6240, 0x6256, 0x62a1, 0x6400,
    0x6405, 0x6408, 0x6411, 0x6414, 0x6420, 0x6441, 0x6444, 0x6450, 0x6480, 0x6501, 0x6504, 0x6510,
    0x6540, 0x654a, 0x6568, 0x6592, 0x6600, 0x6694, 0x6801, 0x6804, 0x6810, 0x6865, 0x6898, 0x6900,
    0x692a, 0x6a42, 0x6aa1, 0x8000, 0x8002, 0x8005, 0x8008, 0x8011, 0x8014, 0x8019, 0x8020, 0x8025,
    0x8041, 0x8044, 0x8050, 0x8052, 0x8055, 0x8058, 0x8061, 0x8080, 0x8085, 0x8091, 0x8094, 0x8101,
    0x8104, 0x8109, 0x8110, 0x8112, 0x8115, 0x8118, 0x8121, 0x8124, 0x8140, 0x8142, 0x8145, 0x8148,
    0x8151, 0x8154, 0x8181, 0x8184, 0x8190, 0x81a9, 0x8200, 0x8205, 0x820a, 0x8211, 0x8214, 0x8241,
    0x8244, 0x8250, 0x8401, 0x8404, 0x8406, 0x8409, 0x8410, 0x8412, 0x8415, 0x8418, 0x8421, 0x8440,
    0x8442, 0x8445, 0x8448, 0x8451, 0x8454, 0x8460, 0x8481, 0x8484, 0x8490, 0x8500, 0x8502, 0x8505,
    0x8508, 0x8511, 0x8514, 0x8520, 0x8541, 0x8544, 0x8550, 0x8580, 0x858a, 0x8601, 0x8604, 0x8610,
    0x8629, 0x8640, 0x8800, 0x8805, 0x8811, 0x8814, 0x8841, 0x8844, 0x8850, 0x88a2, 0x8901, 0x8904,
    0x8940, 0x8965, 0x8a22, 0x8a58, 0x8a5a, 0x8a82, 0x8aa2, 0x9001, 0x9004, 0x9009, 0x9010, 0x9012,
    0x9015, 0x9018, 0x9024, 0x9040, 0x9042, 0x9045, 0x9048, 0x9051, 0x9054, 0x9060, 0x9081, 0x9084,
    0x9090, 0x9100, 0x9105, 0x9111, 0x9114, 0x9141, 0x9144, 0x9150, 0x915a, 0x9201, 0x9204, 0x9210,
    0x9240, 0x92a6, 0x9400, 0x9402, 0x9405, 0x9408, 0x9411, 0x9414, 0x9420, 0x9441, 0x9444, 0x9450,
    0x9480, 0x9496, 0x9501, 0x9504, 0x9510, 0x9540, 0x9598, 0x95a1, 0x9600, 0x9646, 0x9664, 0x9801,
    0x9804, 0x9810, 0x9826, 0x9840, 0x98a9, 0x9900, 0x9949, 0x9952, 0x9a90, 0xa000, 0xa005, 0xa00a,
    0xa014, 0xa022, 0xa02a, 0xa041, 0xa044, 0xa050, 0xa0a2, 0xa0aa, 0xa140, 0xa165, 0xa202, 0xa20a,
    0xa222, 0xa228, 0xa22a, 0xa282, 0xa288, 0xa28a, 0xa2a8, 0xa401, 0xa404, 0xa410, 0xa440, 0xa489,
    0xa4a4, 0xa500, 0xa519, 0xa651, 0xa80a, 0xa828, 0xa8a2, 0xa954, 0xa986, 0xaa08, 0xaa0a, 0xaa20,
    0xaa22, 0xaa28, 0xaa88, 0xaaaa,
];
