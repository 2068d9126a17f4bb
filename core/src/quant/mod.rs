//! Quantization: the block formats, their reference quantizers, and the
//! repacked layouts the kernels read. The layout constants are
//! `kestrel_kernels::layout`'s, the scalar kernels `kestrel_kernels::generic`
//! ([`mod@reference`] applies them to a [`repack::PackedMatrix`]).
//!
//! Block formats are GGUF's, byte for byte (see docs/kernels.md):
//! * Q8_0: 32 weights in 34 bytes: `d: f16 LE`, then 32 x `i8`; `x = d * q`.
//! * Q4_0: 32 weights in 18 bytes: `d: f16 LE`, then 16 bytes; byte `j` holds
//!   weight `j` in its low nibble and weight `j + 16` in its high nibble;
//!   `x = d * (nibble - 8)`.
//!
//! All arithmetic here is plain IEEE f32 in a fixed order (no fused
//! multiply-add, no reassociation), so every architecture produces the same bits.

pub mod f16;
pub mod kquant;
pub mod layout;
pub mod q4_0;
pub mod q8_0;
pub mod reference;
pub mod repack;

pub use kestrel_kernels::layout::{QK, QK_K};

/// How conversion turns values into Q4_0 blocks (the bytes, and so the
/// kernels, are the same either way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Quantizer {
    /// ggml's reference quantizer, bit for bit
    /// ([`q4_0::BlockQ4_0::quantize`]): the block's largest magnitude maps
    /// to -8, every value rounds to the nearest step.
    #[default]
    Ggml,
    /// A search over candidate scales for the least weighted squared
    /// error ([`q4_0::quantize_block_with`]): each value weighs by its
    /// magnitude in its row, and by its column's importance when an
    /// importance matrix is given ([`q4_0::search_weights`]); never worse
    /// than `Ggml` in that error on any block.
    Search,
}

impl Quantizer {
    /// The name on the command line (`ggml`, `search`).
    pub fn name(self) -> &'static str {
        match self {
            Quantizer::Ggml => "ggml",
            Quantizer::Search => "search",
        }
    }
}

/// Number of 32-weight blocks in `len` weights, or an error when `len` is not
/// a multiple of 32.
pub fn blocks_in(what: &'static str, len: usize) -> Result<usize, crate::Error> {
    if len.is_multiple_of(QK) {
        Ok(len / QK)
    } else {
        Err(crate::Error::NotBlockAligned { what, len })
    }
}

/// Number of 256-weight super-blocks in `len` weights (the k-quant
/// layouts), or an error when `len` is not a multiple of 256.
pub fn super_blocks_in(what: &'static str, len: usize) -> Result<usize, crate::Error> {
    if len.is_multiple_of(QK_K) {
        Ok(len / QK_K)
    } else {
        Err(crate::Error::NotBlockAligned { what, len })
    }
}
