//! Q8_0 / Q4_0 quantization must be bit-identical to ggml's reference
//! quantizers. The vectors in tests/vectors were made by gguf-py's numpy
//! ports (tests/vectors/gen_quant_vectors.py); the same assertions run on
//! x86_64 and on aarch64 under qemu.

use kestrel_core::quant::{q4_0, q8_0};
use kestrel_tests::f32s;

const COLS: usize = 256;
static INPUT: &[u8] = include_bytes!("../vectors/quant_input.f32");
static Q8: &[u8] = include_bytes!("../vectors/q8_0.bin");
static Q4: &[u8] = include_bytes!("../vectors/q4_0.bin");
static Q8_DEQ: &[u8] = include_bytes!("../vectors/q8_0_deq.f32");
static Q4_DEQ: &[u8] = include_bytes!("../vectors/q4_0_deq.f32");

fn rows() -> Vec<Vec<f32>> {
    f32s(INPUT).chunks(COLS).map(|c| c.to_vec()).collect()
}

#[test]
fn q8_0_matches_gguf_bit_for_bit() {
    let row_bytes = COLS / 32 * q8_0::BLOCK_BYTES;
    let rows = rows();
    assert_eq!(rows.len() * row_bytes, Q8.len());
    for (i, row) in rows.iter().enumerate() {
        let mut out = vec![0u8; row_bytes];
        q8_0::quantize_row_bytes(row, &mut out).unwrap();
        assert_eq!(out, &Q8[i * row_bytes..(i + 1) * row_bytes], "row {i}");
        // The activation quantizer produces the same blocks.
        let mut qs = vec![0i8; COLS];
        let mut d = vec![0f32; COLS / 32];
        q8_0::quantize_acts(row, &mut qs, &mut d).unwrap();
        for b in 0..COLS / 32 {
            let block = q8_0::BlockQ8_0::from_bytes(out[b * 34..(b + 1) * 34].try_into().unwrap());
            assert_eq!(&qs[b * 32..(b + 1) * 32], &block.qs);
            assert_eq!(d[b].to_bits(), block.scale().to_bits());
        }
    }
    println!(
        "q8_0: {} rows x {COLS} bit-identical to gguf-py on {}",
        rows.len(),
        std::env::consts::ARCH
    );
}

#[test]
fn q4_0_matches_gguf_bit_for_bit() {
    let row_bytes = COLS / 32 * q4_0::BLOCK_BYTES;
    let rows = rows();
    assert_eq!(rows.len() * row_bytes, Q4.len());
    for (i, row) in rows.iter().enumerate() {
        let mut out = vec![0u8; row_bytes];
        q4_0::quantize_row_bytes(row, &mut out).unwrap();
        assert_eq!(out, &Q4[i * row_bytes..(i + 1) * row_bytes], "row {i}");
    }
    println!(
        "q4_0: {} rows x {COLS} bit-identical to gguf-py on {}",
        rows.len(),
        std::env::consts::ARCH
    );
}

#[test]
fn dequantization_matches_gguf_bit_for_bit() {
    let want8 = f32s(Q8_DEQ);
    let mut got8 = vec![0f32; want8.len()];
    q8_0::dequantize_row_bytes(Q8, &mut got8).unwrap();
    let want4 = f32s(Q4_DEQ);
    let mut got4 = vec![0f32; want4.len()];
    q4_0::dequantize_row_bytes(Q4, &mut got4).unwrap();
    for (g, w) in got8.iter().zip(&want8).chain(got4.iter().zip(&want4)) {
        assert_eq!(g.to_bits(), w.to_bits(), "{g} vs {w}");
    }
}

#[test]
fn quantization_error_within_ggml_bounds() {
    // ggml's test-quantize-fns error measure, `sqrt(sum (x - deq)^2) / n`,
    // on its cosine data (n = 4096), against the per-type bounds candle's
    // tests use for ggml's formats: Q4_0 0.001143, Q8_0 0.000092.
    let x = kestrel_tests::cosine(32 * 128, 0.0);
    let rms = |deq: &[f32]| {
        let s: f64 = x
            .iter()
            .zip(deq)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum();
        s.sqrt() / x.len() as f64
    };
    let mut b8 = vec![0u8; x.len() / 32 * 34];
    let mut b4 = vec![0u8; x.len() / 32 * 18];
    let mut d = vec![0f32; x.len()];
    q8_0::quantize_row_bytes(&x, &mut b8).unwrap();
    q8_0::dequantize_row_bytes(&b8, &mut d).unwrap();
    let e8 = rms(&d);
    q4_0::quantize_row_bytes(&x, &mut b4).unwrap();
    q4_0::dequantize_row_bytes(&b4, &mut d).unwrap();
    let e4 = rms(&d);
    println!("quantization error on ggml cosine data: q8_0 {e8:.7}, q4_0 {e4:.7}");
    assert!(e8 < 0.000092 && e4 < 0.001143, "q8_0 {e8} q4_0 {e4}");
    assert!(e8 < e4);
}
