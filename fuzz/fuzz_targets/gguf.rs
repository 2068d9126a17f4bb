#![no_main]
//! GGUF header, metadata, tensor infos, and dequantization of each tensor's
//! first row.
use kestrel_core::gguf::{dequantize_row, Gguf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = Gguf::parse(data) {
        for (_k, v) in g.kvs() {
            let _ = v.as_str();
            if let Some(a) = v.as_array() {
                for x in a.iter().take(64) {
                    let _ = x.as_str();
                }
            }
        }
        let mut row = vec![0f32; 4096];
        for t in g.tensors() {
            let n = t.row_len() as usize;
            if n <= row.len() {
                if let Some(bytes) = t.row(0) {
                    let _ = dequantize_row(t.ggml_type(), bytes, &mut row[..n]);
                }
            }
        }
    }
});
