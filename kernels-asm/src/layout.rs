//! The block and repacked weight layouts, defined once for the whole
//! project: the kernels read them, `kestrel-core`'s quantizers and repacker
//! write them. docs/kernels.md specifies every byte.
//!
//! * The layouts themselves: one module each in `crate::layouts`.
//! * Activations: `qs` (`i8`, `m x cols`, row-major) and `d` (`f32`, one per
//!   32-block, the Q8_0 scale already rounded to f16 precision).
//! * Q8_K activations (for the k-quant layouts): `qs` (`i8`, `m x cols`),
//!   `d` (`f32`, one per 256-block, not rounded) and `sums` (`i16`, the sum
//!   of each 32 quants).

/// Weights per quantization block (every block format, every layout).
pub const QK: usize = 32;

/// Weights per k-quant super-block (Q4_K, Q5_K, Q6_K and Q8_K activations).
pub const QK_K: usize = 256;

// Q4_0x4 and Q8_0x8 (byte order: `crate::layouts::q4_0`, `q8_0`): their
// geometry constants stay here, below the architecture modules whose
// shared texts (the VNNI tiles, the prefetches) read them.

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

/// Rows in one row group of the 8-row K layouts (Q6_Kx8, Q3_Kx8, IQ4_XSx8,
/// Q2_Kx8 and the codebook layouts), whose kernels share one text per
/// architecture (`aarch64/k8.rs`, `x86_64/k8.rs`, `generic/k8.rs`).
pub const K8_ROWS: usize = 8;
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
