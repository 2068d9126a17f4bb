#![no_main]
//! GGUF header, metadata, tensor infos, and dequantization of every row of
//! every tensor (bounded per input).
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
        // Every row of every tensor, up to 2^20 dequantized values per input
        // (rows longer than 4096 values are skipped).
        let mut row = vec![0f32; 4096];
        let mut budget = 1usize << 20;
        for t in g.tensors() {
            let n = t.row_len() as usize;
            if n == 0 || n > row.len() {
                continue;
            }
            for i in 0..t.n_rows() {
                if budget < n {
                    break;
                }
                budget -= n;
                if let Some(bytes) = t.row(i) {
                    let _ = dequantize_row(t.ggml_type(), bytes, &mut row[..n]);
                }
            }
            // Past the last row: no bytes.
            assert!(t.row(t.n_rows()).is_none(), "row past the end");
        }
    }
});
