#![no_main]
//! The JSON reader: parse, then walk everything lazily.
use kestrel_core::json::{self, Value};
use libfuzzer_sys::fuzz_target;

fn walk(v: &Value, depth: usize) {
    if depth > 200 {
        return;
    }
    let _ = v.as_f64();
    let _ = v.as_u64();
    let mut buf = [0u8; 256];
    let _ = v.unescape_into(&mut buf);
    if let Some(it) = v.iter_array() {
        for x in it {
            walk(&x, depth + 1);
        }
    }
    if let Some(it) = v.iter_object() {
        for (k, x) in it {
            let _ = k.chars().count();
            walk(&x, depth + 1);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = json::parse(data) {
        walk(&v, 0);
    }
});
