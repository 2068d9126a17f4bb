//! Kestrel's core: everything an inference needs, with no operating system and
//! no allocator. The caller brings the bytes (an mmap, a flash region, an
//! `include_bytes!`), the scratch memory, and the CPU features it detected.
//!
//! * [`quant`]: f16/bf16, Q8_0 and Q4_0 blocks (bit-identical to GGUF's), the
//!   repacked 4x4 / 8x8 layouts the kernels read, and the scalar reference
//!   kernels that define what every fast kernel must compute.
//! * [`gguf`]: a zero-copy, validating GGUF v2/v3 parser and ggml's
//!   dequantizers (F32, F16, BF16, Q4_0/1, Q5_0/1, Q8_0, Q2_K..Q8_K).
//! * [`kernels`]: the safe dispatch between the scalar reference and the
//!   architecture kernels of `kestrel-kernels`.
//! * [`json`]: a zero-copy, allocation-free JSON reader (config.json,
//!   tokenizer.json, request bodies) and a string escaper for writing JSON.
//! * [`safetensors`]: a zero-copy safetensors reader that validates the
//!   whole file once.
//! * `image` (feature `alloc`): PNG and JPEG decoding and the Qwen-VL
//!   image preprocessing.
//! * [`tokenizer`]: Qwen's byte-level BPE tokenizer (encode, decode, stream
//!   decode), exactly as Hugging Face `tokenizers` runs it, in caller memory.
#![no_std]
// The shipped build compiles this crate for size, its per-token path for
// speed (scripts/build-shipped.sh).
#![cfg_attr(kestrel_shipped, feature(optimize_attribute))]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod chat;
pub mod config;
pub mod constrain;
pub mod convert;
pub mod decimal;
pub mod embed;
pub mod error;
pub mod generate;
pub mod gguf;
#[cfg(feature = "alloc")]
pub mod image;
pub mod json;
pub mod kernels;
pub mod model;
pub mod parallel;
pub mod quant;
pub mod safetensors;
pub mod sampler;
pub mod saved;
pub mod sort;
pub mod speculate;
pub mod state;
pub mod tensors;
pub mod tokenizer;
pub mod vqf;

pub use error::Error;
