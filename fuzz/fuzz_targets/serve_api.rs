//! `kestrel serve`'s request-body parsers (chat and completions, data URIs,
//! base64) and the stop-string scan on arbitrary bytes: a request or a
//! message, never a panic.
#![no_main]
use kestrel::serve::api;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = api::parse_chat(data);
    let _ = api::parse_completion(data);
    let _ = api::base64_decode(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = api::data_uri_bytes(s);
        let stops = ["\n\n".to_string(), "é!".to_string(), "<|im".to_string()];
        let (send, _) = kestrel::serve::stop_scan(s, &stops);
        assert!(s.is_char_boundary(send));
    }
});
