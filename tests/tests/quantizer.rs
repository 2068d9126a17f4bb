//! The searching Q4_0 quantizer (`Quantizer::Search`): on every block of
//! the test data its error (squared, or weighted: by the values'
//! magnitude in their row, and by the columns' importance from an
//! imatrix) is at most ggml's, it lowers the total error, and it writes
//! the same bytes on every architecture (the hashes below are checked on
//! x86_64 and, in the test command, under qemu aarch64). ggml's quantizer itself keeps its bit-exact tests
//! against gguf-py (`quant_vectors.rs`).

use kestrel_core::quant::q4_0::{self, mean_square, search_weights, BlockQ4_0};
use kestrel_core::quant::{Quantizer, QK};

/// A deterministic stream of pseudo-random numbers (64-bit LCG, high bits).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        self.next() as f32 / (1u64 << 31) as f32
    }

    /// Roughly normal (sum of four uniforms, centred).
    fn normal(&mut self) -> f32 {
        (self.unit() + self.unit() + self.unit() + self.unit() - 2.0) * 1.7
    }
}

/// Blocks of several shapes of data: normal, uniform, heavy-tailed (a few
/// large outliers), all positive, nearly constant, tiny and large scales,
/// and degenerate blocks (zeros, one non-zero value, two values).
fn blocks() -> Vec<[f32; QK]> {
    let mut rng = Rng(20261201);
    let mut out = Vec::new();
    for kind in 0..9 {
        for _ in 0..2000 {
            let mut b = [0.0f32; QK];
            for v in b.iter_mut() {
                *v = match kind {
                    0 => rng.normal() * 0.02,
                    1 => rng.unit() - 0.5,
                    2 => {
                        let x = rng.normal();
                        if rng.next().is_multiple_of(16) {
                            x * 8.0
                        } else {
                            x
                        }
                    }
                    3 => rng.unit() * 3.0,
                    4 => 1.0 + rng.unit() * 1e-3,
                    5 => rng.normal() * 1e-6,
                    6 => rng.normal() * 3000.0,
                    7 => 0.0,
                    _ => {
                        if rng.next().is_multiple_of(8) {
                            rng.normal()
                        } else {
                            0.0
                        }
                    }
                };
            }
            if kind == 7 && rng.next().is_multiple_of(2) {
                b[(rng.next() % 32) as usize] = rng.normal();
            }
            out.push(b);
        }
    }
    out
}

#[test]
fn the_search_is_never_worse_than_ggml_and_lowers_the_error() {
    let (mut total_ggml, mut total_search) = (0.0f64, 0.0f64);
    let (mut better, mut n) = (0usize, 0usize);
    for b in blocks() {
        let ggml = BlockQ4_0::quantize(&b);
        let search = BlockQ4_0::quantize_search(&b);
        let (eg, es) = (ggml.squared_error(&b), search.squared_error(&b));
        assert!(
            es <= eg,
            "search error {es} above ggml's {eg} on block {b:?}"
        );
        better += usize::from(es < eg);
        total_ggml += eg;
        total_search += es;
        n += 1;
    }
    let ratio = total_search / total_ggml;
    println!(
        "{n} blocks: search lowers the error on {better}; total squared error {ratio:.3}x ggml's"
    );
    assert!(ratio < 0.95, "the search barely helps: {ratio}");
    assert!(better > n / 2, "only {better} of {n} blocks improved");
}

#[test]
fn the_search_keeps_ggml_on_blocks_it_cannot_improve() {
    // Zeros, and a non-finite value: ggml's block, byte for byte.
    let zeros = [0.0f32; QK];
    assert_eq!(
        BlockQ4_0::quantize_search(&zeros),
        BlockQ4_0::quantize(&zeros)
    );
    let mut nan = [0.5f32; QK];
    nan[3] = f32::NAN;
    assert_eq!(BlockQ4_0::quantize_search(&nan), BlockQ4_0::quantize(&nan));
    let mut inf = [0.5f32; QK];
    inf[7] = f32::INFINITY;
    assert_eq!(BlockQ4_0::quantize_search(&inf), BlockQ4_0::quantize(&inf));
    // Values on the ggml grid exactly: nothing to gain.
    let mut grid = [0.0f32; QK];
    for (i, v) in grid.iter_mut().enumerate() {
        *v = ((i % 16) as f32 - 8.0) * 0.25;
    }
    let g = BlockQ4_0::quantize(&grid);
    assert_eq!(g.squared_error(&grid), 0.0);
    assert_eq!(BlockQ4_0::quantize_search(&grid).squared_error(&grid), 0.0);
}

/// FNV-1a 64.
fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[test]
fn the_search_writes_the_same_bytes_on_every_architecture() {
    let values: Vec<f32> = blocks().into_iter().flatten().collect();
    let mut out = vec![0u8; values.len() / QK * q4_0::BLOCK_BYTES];
    q4_0::quantize_row_bytes_with(Quantizer::Search, &values, None, &mut out).unwrap();
    let mut ggml = vec![0u8; out.len()];
    q4_0::quantize_row_bytes_with(Quantizer::Ggml, &values, None, &mut ggml).unwrap();
    let mut plain = vec![0u8; out.len()];
    q4_0::quantize_row_bytes(&values, &mut plain).unwrap();
    assert_eq!(ggml, plain, "Quantizer::Ggml is not quantize_row_bytes");
    // Computed on x86_64; the test command checks it under qemu aarch64.
    assert_eq!(
        fnv(&out),
        0x33d9_182a_816e_3cda,
        "the searched blocks differ from x86_64's: hash {:#018x}",
        fnv(&out)
    );
}

/// Importance weights like a calibration's: mean squares spread over
/// several orders of magnitude, some columns zero (dead inputs).
fn weights(rng: &mut Rng) -> [f32; QK] {
    let mut w = [0.0f32; QK];
    for v in w.iter_mut() {
        let x = rng.normal();
        *v = if rng.next().is_multiple_of(10) {
            0.0
        } else {
            x * x * 10f32.powi((rng.next() % 5) as i32 - 2)
        };
    }
    w
}

#[test]
fn the_weighted_search_is_never_worse_than_ggml_and_with_unit_weights_is_the_search() {
    let mut rng = Rng(17);
    let (mut total_ggml, mut total_weighted, mut total_unweighted) = (0.0f64, 0.0f64, 0.0f64);
    for b in blocks() {
        let w = weights(&mut rng);
        let ggml = BlockQ4_0::quantize(&b);
        let weighted = BlockQ4_0::quantize_weighted(&b, &w);
        let search = BlockQ4_0::quantize_search(&b);
        let (eg, ew) = (ggml.weighted_error(&b, &w), weighted.weighted_error(&b, &w));
        assert!(
            ew <= eg,
            "weighted error {ew} above ggml's {eg} on block {b:?}, weights {w:?}"
        );
        total_ggml += eg;
        total_weighted += ew;
        total_unweighted += search.weighted_error(&b, &w);
        assert_eq!(
            BlockQ4_0::quantize_weighted(&b, &[1.0; QK]),
            search,
            "unit weights are not the unweighted search"
        );
    }
    println!(
        "weighted error: ggml {total_ggml:.4e}, unweighted search {total_unweighted:.4e}, weighted search {total_weighted:.4e}"
    );
    assert!(
        total_weighted < 0.97 * total_unweighted,
        "the weights barely change the weighted error: {total_weighted} against {total_unweighted}"
    );
}

#[test]
fn unusable_weights_give_ggmls_block() {
    let mut rng = Rng(5);
    let b: [f32; QK] = core::array::from_fn(|_| rng.normal());
    let ggml = BlockQ4_0::quantize(&b);
    for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let mut w = [1.0f32; QK];
        if bad == 0.0 {
            w = [0.0; QK];
        } else {
            w[9] = bad;
        }
        assert_eq!(
            BlockQ4_0::quantize_weighted(&b, &w),
            ggml,
            "weights with {bad}"
        );
    }
}

#[test]
fn the_weighted_search_writes_the_same_bytes_on_every_architecture() {
    let values: Vec<f32> = blocks().into_iter().flatten().collect();
    let mut rng = Rng(99);
    let importance: Vec<f32> = (0..values.len() / QK)
        .flat_map(|_| weights(&mut rng))
        .collect();
    let mut out = vec![0u8; values.len() / QK * q4_0::BLOCK_BYTES];
    q4_0::quantize_row_bytes_with(Quantizer::Search, &values, Some(&importance), &mut out).unwrap();
    // The ggml quantizer takes no importance; a wrong length is an error.
    assert!(
        q4_0::quantize_row_bytes_with(Quantizer::Ggml, &values, Some(&importance), &mut out)
            .is_err()
    );
    assert!(q4_0::quantize_row_bytes_with(
        Quantizer::Search,
        &values,
        Some(&importance[1..]),
        &mut out
    )
    .is_err());
    q4_0::quantize_row_bytes_with(Quantizer::Search, &values, Some(&importance), &mut out).unwrap();
    // Computed on x86_64; the test command checks it under qemu aarch64.
    assert_eq!(
        fnv(&out),
        0x85f3_cf1f_46e8_268d,
        "the weighted blocks differ from x86_64's: hash {:#018x}",
        fnv(&out)
    );
}

#[test]
fn a_rows_search_is_never_worse_than_ggml_in_the_error_it_minimizes() {
    // Rows of 8 blocks, with and without an importance per column: each
    // block's weighted error (the row's search weights) is at most ggml's.
    let mut rng = Rng(41);
    let values: Vec<f32> = blocks().into_iter().flatten().collect();
    let cols = 8 * QK;
    let (mut total_ggml, mut total_search) = (0.0f64, 0.0f64);
    for (r, row) in values.chunks_exact(cols).enumerate() {
        let importance: Vec<f32> = (0..8).flat_map(|_| weights(&mut rng)).collect();
        let imp = (r % 2 == 1).then_some(&importance[..]);
        let mut out = vec![0u8; 8 * q4_0::BLOCK_BYTES];
        q4_0::quantize_row_bytes_with(Quantizer::Search, row, imp, &mut out).unwrap();
        let ms = mean_square(row);
        for b in 0..8 {
            let x: [f32; QK] = row[b * QK..(b + 1) * QK].try_into().unwrap();
            let c: Option<[f32; QK]> = imp.map(|c| c[b * QK..(b + 1) * QK].try_into().unwrap());
            let w = search_weights(&x, ms, c.as_ref());
            let bytes: [u8; q4_0::BLOCK_BYTES] = out
                [b * q4_0::BLOCK_BYTES..(b + 1) * q4_0::BLOCK_BYTES]
                .try_into()
                .unwrap();
            let search = BlockQ4_0::from_bytes(&bytes);
            let ggml = BlockQ4_0::quantize(&x);
            let (es, eg) = (search.weighted_error(&x, &w), ggml.weighted_error(&x, &w));
            assert!(es <= eg, "row {r} block {b}: {es} above ggml's {eg}");
            total_ggml += eg;
            total_search += es;
        }
    }
    assert!(
        total_search < 0.95 * total_ggml,
        "the row search barely helps: {total_search} against {total_ggml}"
    );
}
