//! Kestrel's core: everything an inference needs, with no operating system and
//! no allocator. The caller brings the bytes (an mmap, a flash region, an
//! `include_bytes!`), the scratch memory, and the CPU features it detected.
//!
//! * [`quant`]: f16/bf16, Q8_0 and Q4_0 blocks (bit-identical to GGUF's), the
//!   repacked 4x4 / 8x8 layouts the kernels read, and the scalar reference
//!   kernels that define what every fast kernel must compute.
//! * [`kernels`]: the safe dispatch between the scalar reference and the
//!   architecture kernels of `kestrel-kernels`.
//! * [`tokenizer`]: Qwen's byte-level BPE tokenizer (encode, decode, stream
//!   decode), exactly as Hugging Face `tokenizers` runs it, in caller memory.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod convert;
pub mod error;
pub mod kernels;
pub mod model;
pub mod quant;
pub mod tokenizer;
pub mod vqf;

pub use error::Error;
