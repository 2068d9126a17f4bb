#![no_main]
//! GGUF header, metadata, tensor infos, and dequantization of every row.
//! The body is `kestrel_tests::exercise::gguf`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/gguf/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::gguf(data));
