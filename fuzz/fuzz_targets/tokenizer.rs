#![no_main]
//! The tokenizer: the input as tokenizer.json, and as text and ids for the fixture tokenizer.
//! The body is `kestrel_tests::exercise::tokenizer`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/tokenizer/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::tokenizer(data));
