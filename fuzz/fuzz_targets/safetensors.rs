#![no_main]
//! safetensors parsing and row conversion.
//! The body is `kestrel_tests::exercise::safetensors`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/safetensors/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::safetensors(data));
