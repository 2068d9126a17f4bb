#![no_main]
//! config.json through the converter's reader, and what a valid config drives.
//! The body is `kestrel_tests::exercise::config`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/config/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::config(data));
