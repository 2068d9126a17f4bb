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
//! [`iq2xxs_grid`], the second in bits `7l..7l + 7` their signs but the
//! last, whose sign makes the count of minus signs even, and in bits 28..32
//! the scale `ls`. Weight `8l + j` of sub-block `p` is `d * (0.5 + ls) *
//! 0.25 * g * sign`, `g` byte `j` of `iq2xxs_grid()[index]` (as
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
#[cfg_attr(kestrel_shipped, optimize(size))]
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
fn half_point(grid: &[u64; 256], sb: &[u8], r: usize, p: usize, c: usize) -> u32 {
    let point = grid[sb[index_place(r, 4 * p + c / 2)] as usize];
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
        let point = half_point(super::iq2xxs_grid(), sb, r, p, w / 4);
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
        /// [`gemv_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemv_q6_kx8_q8_k), with
        /// 528-byte super-blocks).
        q8_k gemv gemv_iq2_xxsx8_q8_k => gemm_iq2_xxsx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ2_XXSx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemm_q6_kx8_q8_k), with
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
    use super::{iq2xxs_grid, IQ2XXSX8_BLOCK_BYTES};
    use crate::layouts::iq3::aarch64::{
        iq2_sub_block, iq3_entry, iq3_finish, iq3_setup, xxs_signs, IQ3_CONSTANTS,
    };
    use crate::layouts::iq3::{decode_super_block, Decoded};

    /// A chunk pair's 8 indices, one byte a row (`x13`), into `x14`.
    #[rustfmt::skip]
    macro_rules! xxs2_prep {
        ($pair:literal) => { "ldr x14, [x13], #8\n" };
    }

    /// The address of row `$r`'s grid point (byte `$r` of `x14`, times 8)
    /// in `x15`.
    #[rustfmt::skip]
    macro_rules! xxs2_addr {
        ("0") => { xxs2_addr!("#0", 0) };
        ("1") => { xxs2_addr!("#8", 0) };
        ("2") => { xxs2_addr!("#16", 0) };
        ("3") => { xxs2_addr!("#24", 0) };
        ("4") => { xxs2_addr!("#32", 0) };
        ("5") => { xxs2_addr!("#40", 0) };
        ("6") => { xxs2_addr!("#48", 0) };
        ("7") => { xxs2_addr!("#56", 0) };
        ($shift:literal, 0) => { concat!(
            "ubfx x15, x14, ", $shift, ", #8\n",
            "add x15, {grid}, x15, lsl #3\n",
        ) };
    }

    /// The GEMV loop: `groups` row groups, each `nb` super-blocks.
    ///
    /// Per 32-weight sub-block (8 rows): 2 loads, 4 instructions for the
    /// scales `2 ls + 1`, 20 for the sign bytes, and per chunk pair 1 load
    /// of its 8 indices and 24 to load the 8 rows' points (`ld2`: both
    /// chunks' halves), then per chunk 8 to sign it and 2 `sdot`: about 210
    /// instructions for 8 x 32 weights (310 with a lookup per 4-byte half).
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
        // x a byte index: at most 2040, and `ld2` reads the 8 bytes there;
        // the grid has 2048), every store inside `out`: per super-block the loop
        // reads 528 bytes of `w` (16 + 8 x (32 + 32)), 256 bytes of `qs` and
        // 4 bytes of `d`, for nb super-blocks per group; each group stores
        // 32 bytes of `out`. Only the listed registers are written; no
        // stack is used.
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
                iq2_sub_block!(xxs2_addr, xxs2_prep, ["v14", "v15"]),
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
                grid = in(reg) iq2xxs_grid().as_ptr(),
                out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                out("x14") _, out("x15") _,
                out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                out("v10") _, out("v11") _, out("v12") _, out("v14") _, out("v15") _,
                out("v16") _,
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
        let grid = super::iq2xxs_grid();
        let point = |r, p, c| super::half_point(grid, sb, r, p, c);
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
            grid: super::iq2xxs_grid().as_ptr().cast(),
            factor: 0.125,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ2_XXS grid: point `i`'s component `k` is byte `k` of entry `i`
/// (the GGUF format's codebook, expanded at first use from its packed form
/// below).
pub fn iq2xxs_grid() -> &'static [u64; 256] {
    IQ2XXS_CELLS.points(&IQ2XXS_PACKED, &super::IQ2_CODES)
}

static IQ2XXS_CELLS: super::GridCells<u64, 256> = super::GridCells::new();

/// The grid's 2-bit codes (`super::GridCells`; `tests/vectors/gen_iq3_grids.py`
/// prints them from gguf-py's copy).
static IQ2XXS_PACKED: [u16; 256] = [
    0x0000, 0x0002, 0x0005, 0x0008, 0x000a, 0x0011, 0x0014, 0x0020, 0x0022, 0x0028, 0x002a, 0x0041,
    0x0044, 0x0050, 0x0058, 0x0061, 0x0064, 0x0080, 0x0082, 0x008a, 0x00a2, 0x0101, 0x0104, 0x0110,
    0x0115, 0x0140, 0x0184, 0x0198, 0x0200, 0x0202, 0x0222, 0x0282, 0x0401, 0x0404, 0x0410, 0x0421,
    0x0424, 0x0440, 0x0442, 0x0448, 0x0460, 0x0481, 0x0484, 0x0490, 0x04a4, 0x0500, 0x0502, 0x0508,
    0x0520, 0x0546, 0x0569, 0x0580, 0x0591, 0x0609, 0x0610, 0x0640, 0x0684, 0x06a4, 0x0800, 0x0805,
    0x0808, 0x0814, 0x0828, 0x0841, 0x0844, 0x0850, 0x0852, 0x0888, 0x0904, 0x0940, 0x0a02, 0x0a14,
    0x1001, 0x1004, 0x1010, 0x1021, 0x1040, 0x1060, 0x1084, 0x1090, 0x1095, 0x1100, 0x1108, 0x1120,
    0x1150, 0x115a, 0x1180, 0x1224, 0x1245, 0x1400, 0x1408, 0x1420, 0x1425, 0x1449, 0x1480, 0x1518,
    0x1562, 0x1600, 0x1616, 0x1801, 0x1804, 0x1810, 0x1840, 0x1881, 0x1900, 0x1905, 0x19a0, 0x1a51,
    0x2000, 0x2002, 0x200a, 0x2044, 0x2061, 0x2080, 0x2082, 0x2129, 0x2148, 0x2200, 0x2202, 0x2401,
    0x2404, 0x2410, 0x2440, 0x2456, 0x2500, 0x2541, 0x2564, 0x2690, 0x2808, 0x2820, 0x2894, 0x2a44,
    0x4001, 0x4004, 0x4010, 0x4018, 0x4021, 0x4024, 0x4040, 0x4048, 0x4056, 0x4060, 0x4081, 0x4084,
    0x4090, 0x4100, 0x4120, 0x4161, 0x4180, 0x4185, 0x4201, 0x4210, 0x4248, 0x4256, 0x4268, 0x4400,
    0x4408, 0x4420, 0x4480, 0x4499, 0x4512, 0x4524, 0x4600, 0x4801, 0x4804, 0x4810, 0x4840, 0x4845,
    0x4900, 0x4958, 0x4961, 0x4982, 0x4a45, 0x4a90, 0x5000, 0x5008, 0x5011, 0x5019, 0x5020, 0x5080,
    0x5088, 0x5104, 0x5142, 0x51a4, 0x5291, 0x5490, 0x5492, 0x550a, 0x5601, 0x5654, 0x5800, 0x5811,
    0x5819, 0x5864, 0x5940, 0x5a08, 0x6004, 0x6010, 0x6040, 0x6068, 0x6100, 0x6155, 0x6218, 0x6260,
    0x6400, 0x6405, 0x6510, 0x6512, 0x6584, 0x6842, 0x8000, 0x8002, 0x800a, 0x8041, 0x8082, 0x8104,
    0x8118, 0x8140, 0x8211, 0x8401, 0x8404, 0x8410, 0x8415, 0x8440, 0x8460, 0x8500, 0x8546, 0x8594,
    0x8609, 0x8640, 0x8660, 0x8802, 0x8904, 0x8a11, 0x9004, 0x9010, 0x9024, 0x9040, 0x90a1, 0x9116,
    0x9180, 0x9245, 0x9400, 0x9422, 0x9444, 0x9551, 0x9881, 0x9920, 0xa002, 0xa050, 0xa085, 0xa109,
    0xa200, 0xa418, 0xa850, 0xa904,
];
