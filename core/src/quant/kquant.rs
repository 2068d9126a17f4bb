//! Kestrel's quantizers into ggml's k-quant blocks (Q2_K, Q3_K, Q4_K, Q5_K,
//! Q6_K) and IQ4_XS (16 non-uniform levels), for `kestrel convert --fit`: rows of f32 values become GGUF block
//! bytes, which the converter then stores as a GGUF file's own blocks (the
//! layouts that keep them, read by the same kernels).
//!
//! Each super-block (256 weights) is fitted in two levels, minimising the
//! weighted squared error `sum w * (x - y)^2` ([`value_weights`]: a value's
//! magnitude in its row times its column's importance when an importance
//! matrix is given, as the Q4_0 search weighs):
//! 1. every group (16 or 32 weights) gets its own scale (and, for the
//!    types with a minimum, its offset): a search over candidate steps,
//!    each rounded and then refitted by weighted least squares;
//! 2. the group scales are quantized against the super-block's f16 scale(s),
//!    and every weight is rounded again to the group's stored step.
//!
//! These are not ggml's quantizers and do not give its bytes; the bytes
//! are valid blocks of the type, and `gguf::dequant::dequantize_row` is
//! their meaning. All arithmetic is plain f32 in a fixed order, so every
//! target gives the same bytes.

use super::f16::{f16_to_f32, f32_to_f16};
use super::q4_0::mean_square;
use super::QK_K;
use crate::error::check_len;
use crate::gguf::GgmlType;
use crate::Error;
use kestrel_kernels::layouts::iq4nl::IQ4_NL_VALUES;

/// The k-quant types [`quantize_row`] writes.
pub const TYPES: [GgmlType; 6] = [
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::IQ4_XS,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// Candidate steps tried per group: the range's step times `1 + k / 10`
/// for `k` in `-STEPS..=STEPS` (and the range's own step).
const STEPS: i32 = 9;

/// Quantizes one row `x` (a multiple of 256 values) into `out`, the row's
/// bytes of type `ty` (one of [`TYPES`]); `importance`: one weight per
/// value of `x`, its column's. Non-finite values are refused.
pub fn quantize_row(
    ty: GgmlType,
    x: &[f32],
    importance: Option<&[f32]>,
    out: &mut [u8],
) -> Result<(), Error> {
    let nb = super::super_blocks_in("k-quant row", x.len())?;
    check_len("k-quant output bytes", nb * ty.type_size(), out.len())?;
    if let Some(w) = importance {
        check_len("k-quant importance values", x.len(), w.len())?;
    }
    if x.iter().any(|v| !v.is_finite()) {
        return Err(Error::Unsupported {
            what: "a non-finite weight value in a row to quantize",
            value: 0,
        });
    }
    let ms = mean_square(x);
    for (b, (xb, o)) in x
        .chunks_exact(QK_K)
        .zip(out.chunks_exact_mut(ty.type_size()))
        .enumerate()
    {
        let xb: &[f32; QK_K] = xb.try_into().map_err(|_| Error::Unsupported {
            what: "k-quant super-block",
            value: 0,
        })?;
        let imp = importance.map(|w| &w[b * QK_K..(b + 1) * QK_K]);
        let w = value_weights(xb, ms, imp);
        match ty {
            GgmlType::Q2_K => q2_k(xb, &w, o),
            GgmlType::Q3_K => q3_k(xb, &w, o),
            GgmlType::Q4_K => q45_k(xb, &w, o, false),
            GgmlType::Q5_K => q45_k(xb, &w, o, true),
            GgmlType::Q6_K => q6_k(xb, &w, o),
            GgmlType::IQ4_XS => iq4_xs(xb, &w, o),
            _ => {
                return Err(Error::Unsupported {
                    what: "k-quant quantizer for ggml type",
                    value: ty.id().into(),
                })
            }
        }
    }
    Ok(())
}

/// The weight of each value in the error: `sqrt(s + x^2)`, `s` the row's
/// mean square, times the column's importance when there is one (as
/// [`super::q4_0::search_weights`]).
pub fn value_weights(
    x: &[f32; QK_K],
    row_mean_square: f32,
    importance: Option<&[f32]>,
) -> [f32; QK_K] {
    let mut w = [0.0f32; QK_K];
    for (j, o) in w.iter_mut().enumerate() {
        let magnitude = libm::sqrtf(row_mean_square + x[j] * x[j]);
        *o = match importance {
            Some(c) => c[j].max(0.0) * magnitude,
            None => magnitude,
        };
    }
    w
}

/// `round(v)` clamped to `lo..=hi`.
#[inline]
fn level(v: f32, lo: i32, hi: i32) -> i32 {
    (libm::roundf(v) as i32).clamp(lo, hi)
}

/// The weighted squared error of `y = s * l + o` against `x`.
fn affine_error(x: &[f32], w: &[f32], l: &[i32], s: f32, o: f32) -> f32 {
    let mut e = 0.0f32;
    for i in 0..x.len() {
        let d = s * l[i] as f32 + o - x[i];
        e += w[i] * d * d;
    }
    e
}

/// Group fit with an offset: `x ~ s * l + o`, `l` in `0..=nmax`, `s >= 0`,
/// `o <= 0` (k-quants store `-dmin * m` with `m >= 0`). Returns `(s, -o)`.
/// Each candidate's levels are refitted by weighted least squares, whose
/// error is `sum w x^2 - s * sum w l x - o * sum w x` (the normal
/// equations), so a candidate costs one pass.
fn fit_affine(x: &[f32], w: &[f32], nmax: i32) -> (f32, f32) {
    let mut lo = 0.0f32;
    let mut hi = f32::MIN;
    let (mut sw, mut swx, mut swxx) = (0.0f32, 0.0f32, 0.0f32);
    for (&v, &wi) in x.iter().zip(w) {
        lo = lo.min(v);
        hi = hi.max(v);
        sw += wi;
        swx += wi * v;
        swxx += wi * v * v;
    }
    if hi <= lo {
        return (0.0, -lo);
    }
    let mut l = [0i32; 32];
    let l = &mut l[..x.len()];
    let mut best = ((hi - lo) / nmax as f32, -lo);
    for (i, li) in l.iter_mut().enumerate() {
        *li = level((x[i] - lo) / best.0, 0, nmax);
    }
    let mut best_err = affine_error(x, w, l, best.0, lo);
    for k in -STEPS..=STEPS {
        let iscale = (nmax as f32 + k as f32 / 10.0) / (hi - lo);
        let (mut swl, mut swll, mut swlx) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..x.len() {
            let lf = level(iscale * (x[i] - lo), 0, nmax) as f32;
            swl += w[i] * lf;
            swll += w[i] * lf * lf;
            swlx += w[i] * lf * x[i];
        }
        let det = sw * swll - swl * swl;
        if det <= 0.0 {
            continue;
        }
        let mut s = (sw * swlx - swl * swx) / det;
        let mut o = (swll * swx - swl * swlx) / det;
        if o > 0.0 {
            o = 0.0;
            s = if swll > 0.0 { swlx / swll } else { 0.0 };
        }
        if s <= 0.0 {
            continue;
        }
        // Rounding can take the closed form below zero: no better than exact.
        let e = (swxx - s * swlx - o * swx).max(0.0);
        if e < best_err {
            best_err = e;
            best = (s, -o);
        }
    }
    best
}

/// The value of largest magnitude, with its sign (the first of equals).
fn signed_max(x: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax.abs() {
            amax = v;
        }
    }
    amax
}

/// Group fit without an offset: `x ~ s * l`, `l` in `lo..=hi` (`lo < 0 <
/// hi`), `s` of either sign (the value of largest magnitude may take the
/// longer side). Returns `s` ([`best_scale`]).
fn fit_symmetric(x: &[f32], w: &[f32], lo: i32, hi: i32) -> f32 {
    let amax = signed_max(x);
    if amax == 0.0 {
        return 0.0;
    }
    let candidates = [(-lo, -1.0f32), (hi, 1.0)]
        .into_iter()
        .flat_map(|(side, sign)| {
            (-STEPS..=STEPS).map(move |k| sign * (side as f32 + k as f32 / 10.0) / amax)
        });
    best_scale(x, w, candidates, |v| level(v, lo, hi) as f32)
}

/// The least-squares scale of the best of `candidates` (inverse scales):
/// each maps `x` to levels (`value` gives a scaled value's level), the
/// scale is refitted, and its error is `sum w x^2 - (sum w v x)^2 / sum w
/// v^2`: the best candidate has the largest `(sum w v x)^2 / sum w v^2`.
fn best_scale(
    x: &[f32],
    w: &[f32],
    candidates: impl Iterator<Item = f32>,
    value: impl Fn(f32) -> f32,
) -> f32 {
    let mut best = (0.0f32, 0.0f32);
    for iscale in candidates {
        let (mut svv, mut svx) = (0.0f32, 0.0f32);
        for i in 0..x.len() {
            let v = value(iscale * x[i]);
            svv += w[i] * v * v;
            svx += w[i] * v * x[i];
        }
        if svv <= 0.0 {
            continue;
        }
        let gain = svx * svx / svv;
        if gain > best.1 {
            best = (svx / svv, gain);
        }
    }
    best.0
}

/// The super-block step for group scales `s` stored as integers in
/// `lo..=hi` with `s = step * q`: the scale of largest magnitude takes the
/// longer side (the step takes its sign). Returns the f16 bits and their value.
fn super_step(s: &[f32], lo: i32, hi: i32) -> (u16, f32) {
    let amax = signed_max(s);
    let side = if -lo > hi { lo } else { hi };
    let bits = if amax == 0.0 {
        0
    } else {
        f32_to_f16(amax / side as f32)
    };
    (bits, f16_to_f32(bits))
}

/// The stored integer of group scale `s` against the super-block `step`.
#[inline]
fn stored(s: f32, step: f32, lo: i32, hi: i32) -> i32 {
    if step == 0.0 {
        0
    } else {
        level(s / step, lo, hi)
    }
}

/// Affine super-block: `G` groups of `N` weights, levels `0..=nmax`, scales
/// and minimums stored in `0..=smax`. Returns the f16 `d`, `dmin`, each
/// group's stored scale and minimum, and each weight's level.
fn affine_super_block<const G: usize, const N: usize>(
    x: &[f32; QK_K],
    w: &[f32; QK_K],
    nmax: i32,
    smax: i32,
) -> (u16, u16, [i32; G], [i32; G], [i32; QK_K]) {
    let mut scales = [0.0f32; G];
    let mut mins = [0.0f32; G];
    for g in 0..G {
        let r = g * N..(g + 1) * N;
        (scales[g], mins[g]) = fit_affine(&x[r.clone()], &w[r], nmax);
    }
    let (d_bits, d) = super_step(&scales, 0, smax);
    let (m_bits, dmin) = super_step(&mins, 0, smax);
    let mut sc = [0i32; G];
    let mut mn = [0i32; G];
    let mut l = [0i32; QK_K];
    for g in 0..G {
        sc[g] = stored(scales[g], d, 0, smax);
        mn[g] = stored(mins[g], dmin, 0, smax);
        let s = d * sc[g] as f32;
        let m = dmin * mn[g] as f32;
        for i in g * N..(g + 1) * N {
            l[i] = if s == 0.0 {
                0
            } else {
                level((x[i] + m) / s, 0, nmax)
            };
        }
    }
    (d_bits, m_bits, sc, mn, l)
}

/// Symmetric super-block: 16 groups of 16, levels `lo..=hi`, group scales
/// stored in `slo..=shi`. Returns the f16 `d`, each group's stored scale
/// and each weight's level.
fn symmetric_super_block(
    x: &[f32; QK_K],
    w: &[f32; QK_K],
    (lo, hi): (i32, i32),
    (slo, shi): (i32, i32),
) -> (u16, [i32; 16], [i32; QK_K]) {
    let mut scales = [0.0f32; 16];
    for (g, s) in scales.iter_mut().enumerate() {
        let r = g * 16..(g + 1) * 16;
        *s = fit_symmetric(&x[r.clone()], &w[r], lo, hi);
    }
    let (d_bits, d) = super_step(&scales, slo, shi);
    let mut sc = [0i32; 16];
    let mut l = [0i32; QK_K];
    for g in 0..16 {
        sc[g] = stored(scales[g], d, slo, shi);
        let s = d * sc[g] as f32;
        for i in g * 16..(g + 1) * 16 {
            l[i] = if s == 0.0 { 0 } else { level(x[i] / s, lo, hi) };
        }
    }
    (d_bits, sc, l)
}

/// Q2_K: `scales[16], qs[64], d, dmin` (see `gguf::dequant::q2_k`).
fn q2_k(x: &[f32; QK_K], w: &[f32; QK_K], o: &mut [u8]) {
    let (d, dmin, sc, mn, l) = affine_super_block::<16, 16>(x, w, 3, 15);
    o.fill(0);
    for g in 0..16 {
        o[g] = (sc[g] | mn[g] << 4) as u8;
    }
    for (y, &q) in l.iter().enumerate() {
        let (n, j, k) = (y / 128, (y / 32) % 4, y % 32);
        o[16 + 32 * n + k] |= (q as u8) << (2 * j);
    }
    o[80..82].copy_from_slice(&d.to_le_bytes());
    o[82..84].copy_from_slice(&dmin.to_le_bytes());
}

/// Q3_K: `hmask[32], qs[64], scales[12], d` (see `gguf::dequant::q3_k`).
fn q3_k(x: &[f32; QK_K], w: &[f32; QK_K], o: &mut [u8]) {
    let (d, sc, l) = symmetric_super_block(x, w, (-4, 3), (-32, 31));
    o.fill(0);
    for (y, &q) in l.iter().enumerate() {
        let (n, j, k) = (y / 128, (y / 32) % 4, y % 32);
        let u = (q + 4) as u8;
        o[32 + 32 * n + k] |= (u & 3) << (2 * j);
        if u & 4 != 0 {
            o[k] |= 1 << (4 * n + j);
        }
    }
    for (s, &v) in sc.iter().enumerate() {
        let u = (v + 32) as u8;
        if s < 8 {
            o[96 + s] |= u & 0x0f;
        } else {
            o[96 + s - 8] |= (u & 0x0f) << 4;
        }
        o[104 + s % 4] |= (u >> 4) << (2 * (s / 4));
    }
    o[108..110].copy_from_slice(&d.to_le_bytes());
}

/// Q4_K (`d, dmin, scales[12], qs[128]`) or, with `fifth`, Q5_K (`d, dmin,
/// scales[12], qh[32], qs[128]`) (see `gguf::dequant::q4_k`, `q5_k`).
fn q45_k(x: &[f32; QK_K], w: &[f32; QK_K], o: &mut [u8], fifth: bool) {
    let nmax = if fifth { 31 } else { 15 };
    let (d, dmin, sc, mn, l) = affine_super_block::<8, 32>(x, w, nmax, 63);
    o.fill(0);
    o[0..2].copy_from_slice(&d.to_le_bytes());
    o[2..4].copy_from_slice(&dmin.to_le_bytes());
    for j in 0..8 {
        let (s, m) = (sc[j] as u8, mn[j] as u8);
        if j < 4 {
            o[4 + j] |= s;
            o[4 + j + 4] |= m;
        } else {
            o[4 + j + 4] = (s & 0x0f) | (m & 0x0f) << 4;
            o[4 + j - 4] |= (s >> 4) << 6;
            o[4 + j] |= (m >> 4) << 6;
        }
    }
    let qs = if fifth { 48 } else { 16 };
    for (y, &q) in l.iter().enumerate() {
        let (k, hi, i) = (y / 64, (y / 32) % 2, y % 32);
        let q = q as u8;
        o[qs + 32 * k + i] |= (q & 0x0f) << (4 * hi);
        if fifth && q & 16 != 0 {
            o[16 + i] |= 1 << (2 * k + hi);
        }
    }
}

/// Q6_K: `ql[128], qh[64], scales[16]: i8, d` (see `gguf::dequant::q6_k`).
fn q6_k(x: &[f32; QK_K], w: &[f32; QK_K], o: &mut [u8]) {
    let (d, sc, l) = symmetric_super_block(x, w, (-32, 31), (-128, 127));
    o.fill(0);
    for (y, &q) in l.iter().enumerate() {
        let (n, m, i) = (y / 128, (y / 32) % 4, y % 32);
        let u = (q + 32) as u8;
        // m: 0 -> ql[i] low, 1 -> ql[i + 32] low, 2 -> ql[i] high, 3 -> ql[i + 32] high.
        let ql = 64 * n + i + 32 * (m % 2);
        o[ql] |= (u & 0x0f) << (4 * (m / 2));
        o[128 + 32 * n + i] |= (u >> 4) << (2 * m);
    }
    for (g, &v) in sc.iter().enumerate() {
        o[192 + g] = v as i8 as u8;
    }
    o[208..210].copy_from_slice(&d.to_le_bytes());
}

/// The IQ4_NL level nearest `v` (levels ascending).
fn nearest_level(v: f32) -> usize {
    let levels = &IQ4_NL_VALUES;
    let mut i = levels.partition_point(|&l| (l as f32) < v);
    if i == levels.len() || (i > 0 && v - levels[i - 1] as f32 <= levels[i] as f32 - v) {
        i -= 1;
    }
    i
}

/// IQ4_XS group fit: `x ~ s * IQ4_NL_VALUES[q]`, the least weighted
/// squared error over candidate scales (the value of largest magnitude on
/// either end of the levels, then refitted). Returns `s` ([`best_scale`]).
fn fit_iq4(x: &[f32], w: &[f32]) -> f32 {
    let amax = signed_max(x);
    if amax == 0.0 {
        return 0.0;
    }
    let candidates = [IQ4_NL_VALUES[0], IQ4_NL_VALUES[15]]
        .into_iter()
        .flat_map(|end| {
            (-STEPS..=STEPS)
                .map(move |k| (end as f32 + k as f32 * end.signum() as f32 * 4.0) / amax)
        });
    best_scale(x, w, candidates, |v| IQ4_NL_VALUES[nearest_level(v)] as f32)
}

/// IQ4_XS: `d, scales_h: u16, scales_l[4], qs[128]` (see
/// `gguf::dequant::iq4_xs`): eight groups of 32, 6-bit scales (offset 32).
fn iq4_xs(x: &[f32; QK_K], w: &[f32; QK_K], o: &mut [u8]) {
    let mut scales = [0.0f32; 8];
    for (g, s) in scales.iter_mut().enumerate() {
        let r = g * 32..(g + 1) * 32;
        *s = fit_iq4(&x[r.clone()], &w[r]);
    }
    let (d_bits, d) = super_step(&scales, -32, 31);
    o.fill(0);
    o[0..2].copy_from_slice(&d_bits.to_le_bytes());
    let mut scales_h = 0u16;
    for g in 0..8 {
        let ls = (stored(scales[g], d, -32, 31) + 32) as u8;
        o[4 + g / 2] |= (ls & 0x0f) << (4 * (g % 2));
        scales_h |= ((ls >> 4) as u16) << (2 * g);
        let s = d * (ls as i32 - 32) as f32;
        for l in 0..32 {
            let q = if s == 0.0 {
                nearest_level(0.0)
            } else {
                nearest_level(x[32 * g + l] / s)
            } as u8;
            o[8 + 16 * g + l % 16] |= q << (4 * (l / 16));
        }
    }
    o[2..4].copy_from_slice(&scales_h.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::dequantize_row;

    /// A deterministic row: a smooth part, noise, and a few outliers.
    fn row(n: usize, seed: u32) -> [f32; 1024] {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        let mut x = [0.0f32; 1024];
        for (i, v) in x.iter_mut().enumerate().take(n) {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let u = (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
            *v = u * 0.1 + if i % 97 == 3 { 0.4 } else { 0.0 } + (i % 7) as f32 * 0.003;
        }
        x
    }

    fn error(ty: GgmlType, x: &[f32]) -> f32 {
        let mut bytes = [0u8; 4 * 210];
        let nb = x.len() / QK_K;
        let bytes = &mut bytes[..nb * ty.type_size()];
        quantize_row(ty, x, None, bytes).unwrap();
        let mut y = [0.0f32; 1024];
        dequantize_row(ty, bytes, &mut y[..x.len()]).unwrap();
        let mut e = 0.0f32;
        for i in 0..x.len() {
            e += (x[i] - y[i]) * (x[i] - y[i]);
        }
        e / x.len() as f32
    }

    /// Every type decodes to values near the input, and more bits give
    /// less error (the bytes are read by ggml's dequantizer: a packing
    /// mistake shows as a large error).
    #[test]
    fn each_type_approximates_and_more_bits_help() {
        let x = row(1024, 7);
        let ms = mean_square(&x);
        let mut last = f32::MAX;
        for ty in TYPES {
            let e = error(ty, &x);
            assert!(e < ms * 0.2, "{ty:?}: {e} against {ms}");
            assert!(e < last, "{ty:?}: {e} not below {last}");
            last = e;
        }
        assert!(last < ms * 0.001, "Q6_K: {last}");
    }

    /// Each level and each group scale lands where the dequantizer reads
    /// it: a row whose groups are exactly on the grid comes back exactly.
    #[test]
    fn values_on_the_grid_come_back_exactly() {
        for ty in TYPES {
            // The step: a stored group scale times an f16 super-block step.
            let (lo, hi, step) = match ty {
                GgmlType::Q2_K => (0, 3, 15.0 / 256.0),
                GgmlType::Q3_K => (-4, 3, 0.25),
                GgmlType::Q4_K => (0, 15, 63.0 / 256.0),
                GgmlType::Q5_K => (0, 31, 63.0 / 256.0),
                GgmlType::IQ4_XS => (0, 15, 0.25),
                _ => (-32, 31, 0.25),
            };
            let mut x = [0.0f32; QK_K];
            for (i, v) in x.iter_mut().enumerate() {
                // Every level in every group, the group's end points present.
                let span = (hi - lo + 1) as usize;
                let q = lo + ((i * 7 + i / 16) % span) as i32;
                let q = if i % 16 == 0 {
                    lo
                } else if i % 16 == 1 {
                    hi
                } else {
                    q
                };
                *v = match ty {
                    // The level's value, the group's scale -32 * step.
                    GgmlType::IQ4_XS => IQ4_NL_VALUES[q as usize] as f32 * -32.0 * step,
                    _ => q as f32 * step,
                };
            }
            assert_eq!(error(ty, &x), 0.0, "{ty:?}");
        }
    }

    #[test]
    fn refuses_bad_rows() {
        let mut out = [0u8; 144];
        let mut x = [0.5f32; QK_K];
        assert!(quantize_row(GgmlType::Q4_K, &x[..128], None, &mut out).is_err());
        assert!(quantize_row(GgmlType::Q4_0, &x, None, &mut out).is_err());
        x[3] = f32::NAN;
        assert!(quantize_row(GgmlType::Q4_K, &x, None, &mut out).is_err());
        assert!(quantize_row(GgmlType::Q4_K, &[0.0; QK_K], None, &mut out).is_ok());
    }
}
