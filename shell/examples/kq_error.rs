//! Development probe (not shipped): the relative squared error of one GGUF
//! tensor quantized by Kestrel's k-quant quantizers, against the same
//! tensor in other GGUF files (llama.cpp's): `cargo run --release -p
//! kestrel --example kq_error -- F32.gguf TENSOR [OTHER.gguf ...]`.
use kestrel_core::gguf::{dequantize_row, GgmlType, Gguf};
use kestrel_core::quant::kquant;

fn rows(g: &Gguf, name: &str) -> (Vec<f32>, usize) {
    let t = g.tensor(name).expect("tensor");
    let cols = t.row_len() as usize;
    let mut v = vec![0.0f32; t.n_elements() as usize];
    for (i, o) in v.chunks_exact_mut(cols).enumerate() {
        dequantize_row(t.ggml_type(), t.row(i as u64).unwrap(), o).unwrap();
    }
    (v, cols)
}

fn rel(x: &[f32], y: &[f32]) -> f64 {
    let (mut e, mut s) = (0.0f64, 0.0f64);
    for (a, b) in x.iter().zip(y) {
        e += ((a - b) as f64).powi(2);
        s += (*a as f64).powi(2);
    }
    e / s
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let f = std::fs::read(&a[1]).unwrap();
    let g = Gguf::parse(&f).unwrap();
    let (x, cols) = rows(&g, &a[2]);
    for ty in kquant::TYPES {
        let mut y = vec![0.0f32; x.len()];
        let mut b = vec![0u8; cols / 256 * ty.type_size()];
        for (xr, yr) in x.chunks_exact(cols).zip(y.chunks_exact_mut(cols)) {
            kquant::quantize_row(ty, xr, None, &mut b).unwrap();
            dequantize_row(ty, &b, yr).unwrap();
        }
        println!("kestrel {ty:?}: {:.6}", rel(&x, &y));
    }
    for other in &a[3..] {
        let f = std::fs::read(other).unwrap();
        let g = Gguf::parse(&f).unwrap();
        let ty: GgmlType = g.tensor(&a[2]).unwrap().ggml_type();
        let (y, _) = rows(&g, &a[2]);
        println!("{other} {ty:?}: {:.6}", rel(&x, &y));
    }
}
