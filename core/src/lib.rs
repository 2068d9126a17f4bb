//! Kestrel's core: everything an inference needs, with no operating system and
//! no allocator. The caller brings the bytes (an mmap, a flash region, an
//! `include_bytes!`), the scratch memory, and the CPU features it detected.
//!
//! * [`quant`]: f16/bf16, Q8_0 and Q4_0 blocks (bit-identical to GGUF's), the
//!   repacked 4x4 / 8x8 layouts the kernels read, and the scalar reference
//!   kernels that define what every fast kernel must compute.
//! * [`kernels`]: the safe dispatch between the scalar reference and the
//!   architecture kernels of `kestrel-kernels`.
//! * [`json`]: a zero-copy, allocation-free JSON reader (config.json,
//!   tokenizer.json, request bodies) and a string escaper for writing JSON.
//! * [`safetensors`]: a zero-copy safetensors reader that validates the
//!   whole file once.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod error;
pub mod json;
pub mod kernels;
pub mod quant;
pub mod safetensors;

pub use error::Error;
