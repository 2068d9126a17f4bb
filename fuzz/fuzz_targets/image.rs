#![no_main]
//! Image decoding (PNG / JPEG), then the Qwen-VL preprocessing.
//! The body is `kestrel_tests::exercise::image`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/image/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::image(data));
