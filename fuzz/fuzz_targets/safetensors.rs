#![no_main]
//! safetensors parsing and row conversion.
use kestrel_core::safetensors::SafeTensors;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(st) = SafeTensors::parse(data) {
        let mut row = [0f32; 64];
        for (_, t) in st.tensors() {
            let cols = t.cols();
            if cols > 0 && cols <= row.len() && t.rows() > 0 {
                let _ = t.to_f32_row(0, &mut row[..cols]);
                let _ = t.to_f32_row(t.rows() - 1, &mut row[..cols]);
            }
        }
        let _ = st.metadata("format");
    }
});
