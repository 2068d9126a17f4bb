#![no_main]
//! The structured-output path: a JSON Schema and an instance (split at the
//! first NUL byte), compiled strict and best effort, the instance walked
//! through the constraint. The body is `kestrel_tests::exercise::schema`,
//! which tests/tests/regressions.rs also runs on every kept input
//! (tests/vectors/fuzz/schema/).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kestrel_tests::exercise::schema(data));
