#![no_main]
//! `kestrel serve`'s request-body parsers and the stop-string scan.
//! The body is `kestrel_tests::exercise::serve_api`, which
//! tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/serve_api/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::serve_api(data));
