#![no_main]
//! VQF parsing plus building the model views over whatever parses.
//! The body is `kestrel_tests::exercise::vqf`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/vqf/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::vqf(data));
