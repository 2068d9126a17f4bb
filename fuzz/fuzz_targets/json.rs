#![no_main]
//! The JSON reader: parse, then walk everything lazily.
//! The body is `kestrel_tests::exercise::json`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/json/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::json(data));
