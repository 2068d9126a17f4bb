#![no_main]
//! The C ABI's open (`kestrel_memory_size`, `kestrel_open`) over the input
//! as a model file, then a few calls on what opens. The body is
//! `kestrel_tests::exercise::capi_open`, which tests/tests/regressions.rs
//! also runs on every kept input (tests/vectors/fuzz/capi_open/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::capi_open(data));
