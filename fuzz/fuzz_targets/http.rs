//! `kestrel serve`'s HTTP request-head parser and API-key comparison on
//! arbitrary bytes: an answer or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = kestrel::serve::http::parse_head(data) {
        assert!(h.path.starts_with('/'));
    }
    let _ = kestrel::serve::http::constant_time_eq(data, b"sekrit");
});
