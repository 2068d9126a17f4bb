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
//! index of each 4-weight chunk into [`iq3xxs_grid`]) and 8 little-endian
//! `u32` words, one per 32-weight sub-block `p`: bits `7k..7k + 7` (`k`
//! 0..4) the signs of its weights `8k..8k + 7` but the last, whose sign
//! makes the count of minus signs even, and bits 28..32 the scale `ls`.
//! Weight `4c + j` of sub-block `p` (chunk `c` 0..8) is `d * (0.5 + ls) *
//! 0.5 * g * sign`, `g` byte `j` of `iq3xxs_grid()[qs[8p + c]]` (as
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
#[cfg_attr(kestrel_shipped, optimize(size))]
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
    use super::{iq3xxs_grid, IQ3XXSX8_ROWS};
    use crate::generic::gemm_k_groups;

    /// The signed value `g * sign` (-62..=62) of weight `i` (0..256) of row
    /// `r` (0..8) in an IQ3_XXSx8 super-block.
    #[inline]
    pub fn iq3xxsx8_weight(sb: &[u8], r: usize, i: usize) -> i32 {
        let (p, w) = (i / 32, i % 32);
        let point = iq3xxs_grid()[sb[index_place(r, 8 * p + w / 4)] as usize];
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
        /// [`gemv_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemv_q6_kx8_q8_k), with
        /// 784-byte super-blocks).
        q8_k gemv gemv_iq3_xxsx8_q8_k => gemm_iq3_xxsx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ3_XXSx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemm_q6_kx8_q8_k), with
        /// 784-byte super-blocks).
        q8_k gemm gemm_iq3_xxsx8_q8_k => gemm_k_groups [IQ3XXSX8_BLOCK_BYTES, |g, q, d, _| iq3xxsx8_group_dot(g, q, d)]
    );
}

/// aarch64: the GEMV loop (per sub-block the signs and scales unpacked
/// from the 8 rows' words, then the family's sub-block text with a byte
/// index per lookup), and a tile that runs it per activation row.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{iq3xxs_grid, IQ3XXSX8_BLOCK_BYTES};
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
                grid = in(reg) iq3xxs_grid().as_ptr(),
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
        let grid = iq3xxs_grid();
        let point = |r, p, c| grid[sb[super::index_place(r, 8 * p + c)] as usize];
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
            grid: super::iq3xxs_grid().as_ptr().cast(),
            factor: 0.25,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ3_XXS grid: point `i`'s component `k` is byte `k` of entry `i`
/// (the GGUF format's codebook, expanded at first use from its packed form
/// below).
pub fn iq3xxs_grid() -> &'static [u32; 256] {
    IQ3XXS_CELLS.points(&IQ3XXS_PACKED, &CODES)
}

static IQ3XXS_CELLS: super::GridCells<u32, 256> = super::GridCells::new();

/// The grid's codebook: 3-bit codes of 8 values.
const CODES: super::Codebook = super::Codebook {
    bits: 3,
    levels: [4, 12, 20, 28, 36, 44, 52, 62],
};

/// The grid's 3-bit codes (`super::GridCells`; `tests/vectors/gen_iq3_grids.py`
/// prints them from gguf-py's copy).
static IQ3XXS_PACKED: [u16; 256] = [
    0x0000, 0x0002, 0x0004, 0x0009, 0x000b, 0x000f, 0x0010, 0x0012, 0x0019, 0x0022, 0x003b, 0x003d,
    0x0041, 0x0043, 0x0048, 0x004a, 0x0051, 0x0055, 0x0058, 0x005a, 0x0061, 0x006c, 0x0078, 0x0080,
    0x0082, 0x0084, 0x0089, 0x0090, 0x0092, 0x0099, 0x009b, 0x009f, 0x00a9, 0x00af, 0x00bd, 0x00c1,
    0x00c7, 0x00c8, 0x00ca, 0x00d5, 0x00f8, 0x010b, 0x011f, 0x0124, 0x012f, 0x013b, 0x013d, 0x0141,
    0x0147, 0x015a, 0x016a, 0x019d, 0x01b4, 0x01c8, 0x01cc, 0x01ce, 0x01e3, 0x01f1, 0x0201, 0x0203,
    0x0208, 0x020a, 0x0211, 0x0213, 0x0218, 0x021a, 0x021c, 0x0227, 0x0228, 0x0240, 0x0242, 0x0249,
    0x0250, 0x0252, 0x0281, 0x0283, 0x0288, 0x028a, 0x0291, 0x0298, 0x02ba, 0x02c0, 0x02c2, 0x02d0,
    0x02d9, 0x02e6, 0x02f6, 0x0301, 0x0305, 0x0328, 0x0350, 0x0354, 0x0366, 0x0379, 0x0385, 0x03d2,
    0x03e0, 0x0400, 0x0402, 0x0409, 0x040b, 0x0410, 0x0412, 0x0416, 0x0419, 0x0422, 0x0441, 0x0443,
    0x0445, 0x0448, 0x044a, 0x0451, 0x0458, 0x0473, 0x0477, 0x0478, 0x0480, 0x0482, 0x0489, 0x048f,
    0x0490, 0x0492, 0x049f, 0x04a0, 0x04ad, 0x04c1, 0x04c8, 0x04cc, 0x04f8, 0x04fc, 0x051d, 0x052b,
    0x0543, 0x0557, 0x0561, 0x057c, 0x05c1, 0x05c3, 0x05ce, 0x05e5, 0x0601, 0x0608, 0x060a, 0x0611,
    0x0613, 0x0628, 0x0635, 0x063a, 0x0640, 0x0642, 0x0650, 0x0659, 0x0664, 0x0666, 0x0681, 0x0683,
    0x0688, 0x0695, 0x06aa, 0x06ba, 0x06c9, 0x06db, 0x0718, 0x0727, 0x073a, 0x0740, 0x0746, 0x0752,
    0x076d, 0x078c, 0x079e, 0x07b3, 0x07db, 0x07f0, 0x0804, 0x080f, 0x081d, 0x081f, 0x082b, 0x082f,
    0x087c, 0x0890, 0x089f, 0x08a0, 0x08b0, 0x08b6, 0x08c7, 0x08e5, 0x0904, 0x0929, 0x0934, 0x0955,
    0x0963, 0x0978, 0x09c5, 0x09c8, 0x09ca, 0x09d8, 0x0a0a, 0x0a21, 0x0a38, 0x0a40, 0x0a46, 0x0a56,
    0x0a6d, 0x0a8c, 0x0a9a, 0x0aba, 0x0ac2, 0x0aeb, 0x0b08, 0x0b13, 0x0b17, 0x0b3a, 0x0b42, 0x0b59,
    0x0ba8, 0x0bd4, 0x0be2, 0x0c14, 0x0c24, 0x0c26, 0x0c34, 0x0c51, 0x0c71, 0x0c8f, 0x0cb4, 0x0cd8,
    0x0cde, 0x0d24, 0x0d45, 0x0d6a, 0x0d9b, 0x0dc3, 0x0dd1, 0x0e03, 0x0e05, 0x0e07, 0x0e08, 0x0e1a,
    0x0e2a, 0x0e56, 0x0e60, 0x0e8a, 0x0ea5, 0x0eaa, 0x0ec0, 0x0ecd, 0x0edb, 0x0ef0, 0x0f11, 0x0f21,
    0x0f40, 0x0f42, 0x0f54, 0x0f98,
];
