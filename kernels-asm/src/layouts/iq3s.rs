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
//! low 8 bits of each 4-weight chunk's index into [`iq3s_grid`]), `qh[8]`
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
#[cfg_attr(kestrel_shipped, optimize(size))]
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
    use super::{iq3s_grid, IQ3SX8_BLOCK_BYTES, IQ3SX8_ROWS};
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
        signed(word, w, component(iq3s_grid()[index], w % 4))
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
        /// [`gemv_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemv_q6_kx8_q8_k), with
        /// 880-byte super-blocks).
        q8_k gemv gemv_iq3_sx8_q8_k => gemm_iq3_sx8_q8_k
    );

    forwarding_entry!(
        /// GEMM, IQ3_Sx8 weights x `m` Q8_K activation rows (shapes as
        /// [`gemm_q6_kx8_q8_k`](crate::layouts::q6k::generic::gemm_q6_kx8_q8_k), with
        /// 880-byte super-blocks).
        q8_k gemm gemm_iq3_sx8_q8_k => gemm_k_groups [IQ3SX8_BLOCK_BYTES, |g, q, d, _| iq3sx8_group_dot(g, q, d)]
    );
}

/// aarch64: the GEMV loop (per sub-block the scales from 4 bytes, per chunk
/// pair the 9-bit indices made halfwords with `zip`, then the family's
/// sub-block text), and a tile that runs it per activation row.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::{iq3s_grid, IQ3SX8_BLOCK_BYTES};
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
                grid = in(reg) iq3s_grid().as_ptr(),
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
        let grid = iq3s_grid();
        let point = |r, p, c: usize| {
            let high = (sb[super::high_place(r, p)] >> c) as usize & 1;
            grid[sb[super::index_place(r, 8 * p + c)] as usize | high << 8]
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
            grid: super::iq3s_grid().as_ptr().cast(),
            factor: 1.0,
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;

/// The IQ3_S grid: point `i`'s component `k` is byte `k` of entry `i`
/// (the GGUF format's codebook, expanded at first use from its packed form
/// below).
pub fn iq3s_grid() -> &'static [u32; 512] {
    IQ3S_CELLS.points(&IQ3S_PACKED, &CODES)
}

static IQ3S_CELLS: super::GridCells<u32, 512> = super::GridCells::new();

/// The grid's codebook: 3-bit codes of 8 values.
const CODES: super::Codebook = super::Codebook {
    bits: 3,
    levels: [1, 3, 5, 7, 9, 11, 13, 15],
};

/// The grid's 3-bit codes (`super::GridCells`; `tests/vectors/gen_iq3_grids.py`
/// prints them from gguf-py's copy).
static IQ3S_PACKED: [u16; 512] = [
    0x0000, 0x0001, 0x0002, 0x0005, 0x0007, 0x0008, 0x0009, 0x000a, 0x000c, 0x000e, 0x0010, 0x0011,
    0x0015, 0x001b, 0x0020, 0x0022, 0x0025, 0x0027, 0x0029, 0x002b, 0x0030, 0x0032, 0x0039, 0x003c,
    0x003f, 0x0040, 0x0041, 0x0042, 0x0044, 0x0048, 0x0049, 0x004d, 0x0050, 0x0053, 0x0057, 0x0059,
    0x005d, 0x0064, 0x0071, 0x0075, 0x007a, 0x0080, 0x0081, 0x0085, 0x0087, 0x0088, 0x008b, 0x008e,
    0x0091, 0x0095, 0x0098, 0x009c, 0x00a2, 0x00a5, 0x00a7, 0x00a9, 0x00ab, 0x00b8, 0x00bb, 0x00c3,
    0x00c9, 0x00cd, 0x00d0, 0x00d2, 0x00d9, 0x00db, 0x00de, 0x00e4, 0x00e8, 0x00ea, 0x00f7, 0x00f9,
    0x00fd, 0x0100, 0x010b, 0x010f, 0x0111, 0x0114, 0x011a, 0x0120, 0x0123, 0x0129, 0x0138, 0x0142,
    0x0144, 0x0150, 0x0152, 0x0156, 0x015b, 0x0161, 0x0165, 0x0167, 0x0176, 0x017b, 0x0186, 0x0189,
    0x018b, 0x0199, 0x01aa, 0x01b9, 0x01c0, 0x01c2, 0x01c4, 0x01d0, 0x01d2, 0x01d6, 0x01db, 0x01e8,
    0x01ec, 0x0200, 0x0201, 0x0202, 0x0204, 0x0208, 0x0209, 0x020b, 0x020d, 0x020f, 0x0210, 0x0212,
    0x0219, 0x021c, 0x021e, 0x022c, 0x022e, 0x0231, 0x023a, 0x0240, 0x0241, 0x0243, 0x0246, 0x0248,
    0x024c, 0x0251, 0x0258, 0x025b, 0x0261, 0x0268, 0x026a, 0x0278, 0x027e, 0x0280, 0x028a, 0x028d,
    0x028f, 0x0290, 0x0294, 0x029a, 0x02a0, 0x02a3, 0x02ad, 0x02b0, 0x02ba, 0x02c1, 0x02c4, 0x02c7,
    0x02c8, 0x02cb, 0x02d1, 0x02d7, 0x02d8, 0x02dc, 0x02e1, 0x02f2, 0x02f8, 0x0303, 0x0305, 0x030a,
    0x030c, 0x0319, 0x031b, 0x0322, 0x0326, 0x0328, 0x032c, 0x0341, 0x0348, 0x034b, 0x0351, 0x0358,
    0x035a, 0x0369, 0x0390, 0x0394, 0x0397, 0x03a4, 0x03a6, 0x03c1, 0x03c3, 0x03c8, 0x03ca, 0x03d1,
    0x03dd, 0x03e1, 0x03f2, 0x03f8, 0x0400, 0x0401, 0x0403, 0x0405, 0x0407, 0x0408, 0x040a, 0x040c,
    0x040e, 0x0411, 0x0413, 0x0417, 0x0418, 0x041a, 0x0421, 0x0423, 0x0425, 0x0428, 0x042a, 0x0437,
    0x0438, 0x043b, 0x043d, 0x0440, 0x0442, 0x0448, 0x044b, 0x044f, 0x0452, 0x0455, 0x0459, 0x045c,
    0x0462, 0x0469, 0x0481, 0x0484, 0x0487, 0x0491, 0x0493, 0x0498, 0x049f, 0x04a1, 0x04ab, 0x04af,
    0x04b9, 0x04bc, 0x04c0, 0x04c2, 0x04c5, 0x04c9, 0x04d2, 0x04d4, 0x04d9, 0x04db, 0x04e2, 0x04e8,
    0x04f6, 0x0501, 0x0507, 0x0510, 0x0513, 0x051a, 0x051d, 0x0521, 0x053a, 0x053d, 0x0544, 0x0549,
    0x0552, 0x055f, 0x0560, 0x056b, 0x0578, 0x0580, 0x0582, 0x0587, 0x0591, 0x05ad, 0x05b1, 0x05c5,
    0x05c9, 0x05d6, 0x05d8, 0x05e3, 0x05e8, 0x0602, 0x0609, 0x060b, 0x060d, 0x060f, 0x0612, 0x0619,
    0x061b, 0x061d, 0x0622, 0x0624, 0x0627, 0x0629, 0x0633, 0x0639, 0x0641, 0x0643, 0x0645, 0x064c,
    0x0651, 0x0653, 0x0660, 0x0670, 0x067a, 0x067e, 0x0680, 0x068a, 0x0690, 0x069a, 0x069c, 0x06a8,
    0x06c1, 0x06c8, 0x06cc, 0x06d1, 0x06d3, 0x06d7, 0x06d8, 0x06e1, 0x06e3, 0x06e7, 0x06ed, 0x06fb,
    0x0703, 0x0709, 0x070e, 0x0712, 0x0719, 0x072a, 0x0730, 0x0734, 0x0741, 0x0748, 0x074a, 0x0755,
    0x075a, 0x0764, 0x076e, 0x077b, 0x078e, 0x07a1, 0x07c1, 0x07c3, 0x07d0, 0x07d2, 0x07dd, 0x0800,
    0x0804, 0x080a, 0x0810, 0x0814, 0x0817, 0x081a, 0x0821, 0x0828, 0x0838, 0x0842, 0x0847, 0x0849,
    0x084b, 0x0852, 0x0858, 0x085d, 0x0863, 0x0869, 0x086d, 0x0881, 0x0883, 0x0888, 0x088d, 0x0891,
    0x089b, 0x08a0, 0x08af, 0x08b2, 0x08b8, 0x08c4, 0x08c9, 0x08cb, 0x08d0, 0x08d2, 0x08d9, 0x08dd,
    0x0900, 0x0902, 0x0914, 0x091f, 0x0920, 0x0939, 0x0945, 0x0947, 0x0951, 0x0972, 0x098b, 0x099c,
    0x09b0, 0x09c8, 0x09cd, 0x09d8, 0x09e3, 0x09e9, 0x0a02, 0x0a08, 0x0a0c, 0x0a12, 0x0a20, 0x0a24,
    0x0a27, 0x0a2a, 0x0a36, 0x0a3c, 0x0a41, 0x0a43, 0x0a45, 0x0a4a, 0x0a51, 0x0a5a, 0x0a7a, 0x0a80,
    0x0a89, 0x0a93, 0x0a98, 0x0a9e, 0x0aab, 0x0ac2, 0x0ac7, 0x0ac8, 0x0ad7, 0x0ae4, 0x0ae9, 0x0af5,
    0x0afb, 0x0b01, 0x0b04, 0x0b10, 0x0b1a, 0x0b26, 0x0b4a, 0x0b56, 0x0b69, 0x0b6b, 0x0ba2, 0x0bc2,
    0x0bc4, 0x0bd2, 0x0c09, 0x0c0b, 0x0c0d, 0x0c19, 0x0c1b, 0x0c30, 0x0c40, 0x0c50, 0x0c57, 0x0c74,
    0x0c8a, 0x0c9c, 0x0ca2, 0x0cad, 0x0cb2, 0x0cb8, 0x0cc0, 0x0ccc, 0x0cd1, 0x0ce0, 0x0d15, 0x0d23,
    0x0d32, 0x0d40, 0x0d43, 0x0d5c, 0x0d70, 0x0d85, 0x0da0, 0x0dc9, 0x0dcb, 0x0e00, 0x0e04, 0x0e07,
    0x0e10, 0x0e12, 0x0e1e, 0x0e20, 0x0e2c, 0x0e32, 0x0e42, 0x0e49, 0x0e54, 0x0e63, 0x0e65, 0x0e81,
    0x0e84, 0x0e88, 0x0e8e, 0x0e91, 0x0e98, 0x0ea9, 0x0ec2, 0x0eda, 0x0edd, 0x0eeb, 0x0f01, 0x0f05,
    0x0f0b, 0x0f10, 0x0f28, 0x0f52, 0x0f62, 0x0f82, 0x0f99, 0x0fc0,
];
