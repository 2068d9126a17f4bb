#![no_main]
//! `kestrel serve`'s HTTP request-head parser and API-key comparison.
//! The body is `kestrel_tests::exercise::http`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/http/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::http(data));
