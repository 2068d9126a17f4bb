//! The block and repacked weight layouts, defined once for the whole
//! project: the kernels read them, `kestrel-core`'s quantizers and repacker
//! write them. docs/kernels.md specifies every byte.
//!
//! * Q8_0 (GGUF): 32 weights in 34 bytes: `d: f16 LE`, then 32 x `i8`.
//! * Q4_0 (GGUF): 32 weights in 18 bytes: `d: f16 LE`, then 16 bytes; byte
//!   `j` holds weight `j` in its low nibble and weight `j + 16` in its high
//!   nibble.
//! * Q4_0x4: 72-byte super-blocks of 4 rows x 32 weights: the four f16
//!   scales, then 64 nibble bytes (XOR 0x88) in 16-byte chunks of 4 rows x 4
//!   weights.
//! * Q8_0x8: 272-byte super-blocks of 8 rows x 32 weights: eight f16 scales,
//!   then 256 quant bytes in 32-byte chunks of 8 rows x 4 weights.
//! * Activations: `qs` (`i8`, `m x cols`, row-major) and `d` (`f32`, one per
//!   32-block, the Q8_0 scale already rounded to f16 precision).
//! * Q8_K activations (for the k-quant layouts): `qs` (`i8`, `m x cols`),
//!   `d` (`f32`, one per 256-block, not rounded) and `sums` (`i16`, the sum
//!   of each 32 quants).

/// Weights per quantization block (every block format, every layout).
pub const QK: usize = 32;

/// Weights per k-quant super-block (Q4_K, Q5_K, Q6_K and Q8_K activations).
pub const QK_K: usize = 256;

/// Bytes of one GGUF Q4_0 block.
pub const Q4_0_BLOCK_BYTES: usize = 2 + QK / 2;
/// Bytes of one GGUF Q8_0 block.
pub const Q8_0_BLOCK_BYTES: usize = 2 + QK;

/// Rows in one Q4_0x4 row group.
pub const Q4X4_ROWS: usize = 4;
/// Bytes of one Q4_0x4 super-block (4 rows x 32 weights): 4 f16 scales, then
/// 64 quant bytes.
pub const Q4X4_BLOCK_BYTES: usize = 2 * Q4X4_ROWS + Q4X4_ROWS * QK / 2;
/// Rows in one Q8_0x8 row group.
pub const Q8X8_ROWS: usize = 8;
/// Bytes of one Q8_0x8 super-block (8 rows x 32 weights): 8 f16 scales, then
/// 256 quant bytes.
pub const Q8X8_BLOCK_BYTES: usize = 2 * Q8X8_ROWS + Q8X8_ROWS * QK;

const _: () = assert!(Q4_0_BLOCK_BYTES == 18 && Q8_0_BLOCK_BYTES == 34);
const _: () = assert!(Q4X4_BLOCK_BYTES == 72 && Q8X8_BLOCK_BYTES == 272);

/// Bytes of one GGUF Q6_K super-block (256 weights): `ql[128]` (low 4 bits),
/// `qh[64]` (high 2 bits), `scales[16]` (`i8`, one per 16 weights), `d`
/// (f16 LE); weight `i` is `d * scales[i / 16] * (q - 32)`, `q` in 0..64.
pub const Q6_K_BLOCK_BYTES: usize = 128 + 64 + 16 + 2;

/// Rows in one Q6_Kx8 row group.
pub const Q6KX8_ROWS: usize = 8;
/// Bytes of one Q6_Kx8 32-weight block (8 rows x 32 weights): the 16 scales
/// of its two 16-weight groups (`8h + r`: group `h`, row `r`), then two
/// 96-byte groups of packed 6-bit quants.
pub const Q6KX8_PAIR_BYTES: usize = 2 * Q6KX8_ROWS + 2 * 3 * 4 * Q6KX8_ROWS;
/// Bytes of one Q6_Kx8 super-block (8 rows x 256 weights): the 8 rows' f16
/// `d`, then 8 blocks of [`Q6KX8_PAIR_BYTES`]: exactly 8 GGUF Q6_K blocks'
/// worth (6.5625 bits per weight).
///
/// Q6_Kx8 holds the GGUF values exactly, rearranged for `sdot` / AVX2: in
/// the 96 bytes of 16-weight group `j` (row `r`, `k` in 0..4), byte `32s +
/// 4r + k` for `s` in 0..3 is `((q ^ 32) << 2) | t` with `q` weight `16j +
/// 4s + k`'s 6-bit quant, so `and 0xFC` makes it the `i8` `4 * (q - 32)`;
/// its two low bits `t` are bits `5 - 2s, 4 - 2s` of `q' ^ 32`, `q'` the
/// quant of weight `16j + 12 + k`, which `shl`/`sli`/`sli` reassemble the
/// same way. docs/kernels.md gives every byte.
pub const Q6KX8_BLOCK_BYTES: usize = 2 * Q6KX8_ROWS + (QK_K / QK) * Q6KX8_PAIR_BYTES;

const _: () = assert!(Q6_K_BLOCK_BYTES == 210 && Q6KX8_PAIR_BYTES == 208);
const _: () = assert!(Q6KX8_BLOCK_BYTES == Q6KX8_ROWS * Q6_K_BLOCK_BYTES);
// Q5_0x4 and Q5_1x4 (docs/kernels.md "Q5_0x4 and Q5_1x4"): GGUF Q5_0 /
// Q5_1 blocks, 4 rows interleaved. A super-block is the rows' f16 scales
// (Q5_1: then their f16 minimums), then 64 nibble bytes in the Q4_0x4 chunk
// order but raw (no XOR): byte `16c + 4r + k` holds the low 4 bits of row
// `r`'s weights `4c + k` (low nibble) and `16 + 4c + k` (high nibble); then
// 16 *fifth-bit plane* bytes: bit `p` of byte `4r + k` is the fifth bit of
// row `r`'s weight `4p + k`, inverted (1 where the GGUF `qh` bit is 0).
// Inverted, it is the sign bit of the two's-complement 5-bit value `q - 16`:
// a kernel turns plane bit `p` into a byte mask (`cmtst`) and merges the
// nibble under it (`bit` / `sri`), giving `q - 16` as an `i8` in two
// instructions per 16 weights. Padding rows are all-zero bytes (scale 0,
// and `q - 16 = 0`).

/// Bytes of one GGUF Q5_0 block: `d: f16`, `qh: u32 LE`, 16 nibble bytes.
pub const Q5_0_BLOCK_BYTES: usize = 2 + 4 + QK / 2;
/// Bytes of one GGUF Q5_1 block: `d: f16`, `m: f16`, `qh: u32 LE`, 16
/// nibble bytes.
pub const Q5_1_BLOCK_BYTES: usize = 2 + 2 + 4 + QK / 2;
/// Rows in one Q5_0x4 / Q5_1x4 row group.
pub const Q5X4_ROWS: usize = 4;
/// Bytes of the nibbles and the fifth-bit plane of 4 rows x 32 weights.
const Q5X4_QUANT_BYTES: usize = Q5X4_ROWS * QK / 2 + Q5X4_ROWS * QK / 8;
/// Bytes of one Q5_0x4 super-block (4 rows x 32 weights): 4 f16 scales, 64
/// nibble bytes, 16 plane bytes.
pub const Q5_0X4_BLOCK_BYTES: usize = 2 * Q5X4_ROWS + Q5X4_QUANT_BYTES;
/// Bytes of one Q5_1x4 super-block (4 rows x 32 weights): 4 f16 scales, 4
/// f16 minimums, 64 nibble bytes, 16 plane bytes.
pub const Q5_1X4_BLOCK_BYTES: usize = 4 * Q5X4_ROWS + Q5X4_QUANT_BYTES;
/// Offset of the nibble bytes in a Q5_0x4 super-block (Q5_1x4: `+ 8`).
pub const Q5_0X4_NIBBLES: usize = 2 * Q5X4_ROWS;
/// Offset of the fifth-bit plane in a Q5_0x4 super-block (Q5_1x4: `+ 8`).
pub const Q5_0X4_PLANE: usize = Q5_0X4_NIBBLES + Q5X4_ROWS * QK / 2;
/// Offset of the minimums in a Q5_1x4 super-block (after the 4 scales).
pub const Q5_1X4_MINS: usize = 2 * Q5X4_ROWS;
/// Offset of the nibble bytes in a Q5_1x4 super-block.
pub const Q5_1X4_NIBBLES: usize = Q5_0X4_NIBBLES + 2 * Q5X4_ROWS;
/// Offset of the fifth-bit plane in a Q5_1x4 super-block.
pub const Q5_1X4_PLANE: usize = Q5_0X4_PLANE + 2 * Q5X4_ROWS;

const _: () = assert!(Q5_0_BLOCK_BYTES == 22 && Q5_1_BLOCK_BYTES == 24);
const _: () = assert!(Q5_0X4_BLOCK_BYTES == 4 * Q5_0_BLOCK_BYTES);
const _: () = assert!(Q5_1X4_BLOCK_BYTES == 4 * Q5_1_BLOCK_BYTES);
const _: () = assert!(Q5_0X4_NIBBLES == 8 && Q5_0X4_PLANE == 72);
const _: () = assert!(Q5_1X4_MINS == 8 && Q5_1X4_NIBBLES == 16 && Q5_1X4_PLANE == 80);
// Q4_K (GGUF k-quant) and its repacked 4-row layout Q4_Kx4.
//
// * Q4_K (GGUF): 256 weights in 144 bytes: `d: f16 LE`, `dmin: f16 LE`, 12
//   bytes of 6-bit scales and mins of the eight 32-weight sub-blocks (ggml's
//   `get_scale_min_k4` packing), 128 nibble bytes: for each 64-weight half
//   `j`, byte `32j + i` holds weight `64j + i` in its low nibble and weight
//   `64j + 32 + i` in its high nibble. `x = d * sc * q - dmin * m`.
// * Q4_Kx4: 576-byte super-blocks of 4 rows x 256 weights, holding exactly
//   the four rows' GGUF bytes, permuted (docs/kernels.md, "Q4_Kx4"):
//   the four `d` (8 bytes), the four `dmin` (8 bytes), the scale bytes in
//   16-byte words of 4 rows x 4 bytes (48 bytes), then the nibble bytes in
//   16-byte chunks of 4 rows x 4 bytes (512 bytes, unchanged).

/// Bytes of one GGUF Q4_K super-block (256 weights).
pub const Q4_K_BLOCK_BYTES: usize = 4 + K_SCALE_BYTES + QK_K / 2;
/// Bytes of packed 6-bit scales and mins in a Q4_K / Q5_K super-block.
pub const K_SCALE_BYTES: usize = 12;
/// Rows in one Q4_Kx4 row group.
pub const Q4KX4_ROWS: usize = 4;
/// Bytes of one Q4_Kx4 super-block (4 rows x 256 weights): 4 `d`, 4 `dmin`
/// (f16), 48 scale bytes, 512 nibble bytes; 4.5 bits per weight, as GGUF.
pub const Q4KX4_BLOCK_BYTES: usize = Q4KX4_ROWS * Q4_K_BLOCK_BYTES;
/// Offset of the scale words in a Q4_Kx4 super-block.
pub const Q4KX4_SCALES_AT: usize = 4 * Q4KX4_ROWS;
/// Offset of the nibble chunks in a Q4_Kx4 super-block.
pub const Q4KX4_QS_AT: usize = Q4KX4_SCALES_AT + Q4KX4_ROWS * K_SCALE_BYTES;

const _: () = assert!(Q4_K_BLOCK_BYTES == 144 && Q4KX4_BLOCK_BYTES == 576);
const _: () = assert!(Q4KX4_SCALES_AT == 16 && Q4KX4_QS_AT == 64);

// Q5_K (GGUF) and Q5_Kx4.
//
// * Q5_K (GGUF): 256 weights in 176 bytes: `d`, `dmin` (f16 LE), the 12
//   scale bytes of Q4_K, `qh[32]` (bit `j` of `qh[i]` is the fifth bit of
//   weight `i` of sub-block `j`), `qs[128]` nibbles as in Q4_K.
//   `x = d * sc * q - dmin * m`, `q` 0..31.
// * Q5_Kx4: 704-byte super-blocks of 4 rows x 256 weights: the Q4_Kx4
//   header (d, dmin, scale words: 64 bytes), the `qh` bytes in 16-byte
//   chunks of 4 rows x 4 bytes (128 bytes), then the nibble chunks (512
//   bytes), every GGUF byte kept (docs/kernels.md, "Q5_Kx4").

/// Bytes of one GGUF Q5_K super-block (256 weights).
pub const Q5_K_BLOCK_BYTES: usize = 4 + K_SCALE_BYTES + QK_K / 8 + QK_K / 2;
/// Rows in one Q5_Kx4 row group.
pub const Q5KX4_ROWS: usize = 4;
/// Bytes of one Q5_Kx4 super-block (4 rows x 256 weights); 5.5 bits per
/// weight, as GGUF.
pub const Q5KX4_BLOCK_BYTES: usize = Q5KX4_ROWS * Q5_K_BLOCK_BYTES;
/// Offset of the `qh` chunks in a Q5_Kx4 super-block.
pub const Q5KX4_QH_AT: usize = Q4KX4_QS_AT;
/// Offset of the nibble chunks in a Q5_Kx4 super-block.
pub const Q5KX4_QS_AT: usize = Q5KX4_QH_AT + Q5KX4_ROWS * QK_K / 8;

const _: () = assert!(Q5_K_BLOCK_BYTES == 176 && Q5KX4_BLOCK_BYTES == 704);
const _: () = assert!(Q5KX4_QH_AT == 64 && Q5KX4_QS_AT == 192);
