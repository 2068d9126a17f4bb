//! The gated delta rule of one value head for one token (Qwen3.5's Gated
//! DeltaNet): the specification its architecture twins match bit for bit.

use crate::shape::{check_len, ShapeError};

/// Checks the slices of [`delta_rule`]: `state` [k.len(), v.len()],
/// `q` as long as `k`, `out` as long as `v`. Shared by every architecture.
pub(crate) fn delta_rule_shape(
    state: &[f32],
    k: &[f32],
    q: &[f32],
    v: &[f32],
    out: &[f32],
) -> Result<(), ShapeError> {
    check_len(
        "delta rule state",
        k.len().checked_mul(v.len()),
        state.len(),
    )?;
    check_len("delta rule query", Some(k.len()), q.len())?;
    check_len("delta rule output", Some(v.len()), out.len())
}

/// One value head of the gated delta rule for one token: the state `state`
/// [dk, dv] (row `i` for key dimension `i`) decays by `decay`, takes the
/// write `state += k (beta (v - state^T k))^T`, and `out` [dv] gets
/// `state^T q` of the new state (`k` and `q` [dk], normalised by the
/// caller; `v` [dv]).
///
/// Column by column (each column of the state is independent), in two
/// passes over the rows, each element's operations in this order (plain
/// IEEE f32, no fused multiply-add; every sum from `+0.0`, over the rows in
/// order): pass 1, per row `i`, `s *= decay` then `kv += s * k[i]`; then
/// `delta = (v - kv) * beta`; pass 2, per row `i`, `s += k[i] * delta`
/// then `o += s * q[i]`. The architecture kernels take the columns in
/// vector lanes, each lane the same sequence.
pub fn delta_rule(
    state: &mut [f32],
    k: &[f32],
    q: &[f32],
    v: &[f32],
    decay: f32,
    beta: f32,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    delta_rule_shape(state, k, q, v, out)?;
    delta_rule_columns(state, k, q, v, decay, beta, out, 0);
    Ok(())
}

/// [`delta_rule`] on the columns `from..` only (a vector kernel's tail);
/// the shapes checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn delta_rule_columns(
    state: &mut [f32],
    k: &[f32],
    q: &[f32],
    v: &[f32],
    decay: f32,
    beta: f32,
    out: &mut [f32],
    from: usize,
) {
    let dv = v.len();
    for j in from..dv {
        let mut kv = 0.0f32;
        for (i, &ki) in k.iter().enumerate() {
            let s = &mut state[i * dv + j];
            *s *= decay;
            kv += *s * ki;
        }
        let delta = (v[j] - kv) * beta;
        let mut o = 0.0f32;
        for (i, (&ki, &qi)) in k.iter().zip(q).enumerate() {
            let s = &mut state[i * dv + j];
            *s += ki * delta;
            o += *s * qi;
        }
        out[j] = o;
    }
}

#[cfg(test)]
mod tests {
    use std::vec;
    use std::vec::Vec;

    /// The rule as transformers writes it, four loops over the state (decay,
    /// `kv = S^T k`, the write, `out = S^T q`): [`super::delta_rule`]'s two
    /// passes give the same bits.
    #[test]
    fn two_passes_are_the_four_steps() {
        let (dk, dv) = (5usize, 70usize);
        let f = |i: usize, s: f32| (i as f32 * 0.37 + s).sin() * 1.7;
        let state: Vec<f32> = (0..dk * dv).map(|i| f(i, 0.1)).collect();
        let k: Vec<f32> = (0..dk).map(|i| f(i, 1.0)).collect();
        let q: Vec<f32> = (0..dk).map(|i| f(i, 2.0)).collect();
        let v: Vec<f32> = (0..dv).map(|i| f(i, 3.0)).collect();
        let (decay, beta) = (0.81f32, 0.43f32);
        let mut want_s = state.clone();
        want_s.iter_mut().for_each(|x| *x *= decay);
        let mut kv = vec![0f32; dv];
        for (row, &ki) in want_s.chunks_exact(dv).zip(&k) {
            for (o, &x) in kv.iter_mut().zip(row) {
                *o += x * ki;
            }
        }
        let delta: Vec<f32> = kv.iter().zip(&v).map(|(o, x)| (x - o) * beta).collect();
        for (row, &ki) in want_s.chunks_exact_mut(dv).zip(&k) {
            for (x, &d) in row.iter_mut().zip(&delta) {
                *x += ki * d;
            }
        }
        let mut want_o = vec![0f32; dv];
        for (row, &qi) in want_s.chunks_exact(dv).zip(&q) {
            for (o, &x) in want_o.iter_mut().zip(row) {
                *o += x * qi;
            }
        }
        let (mut s, mut o) = (state, vec![f32::NAN; dv]);
        super::delta_rule(&mut s, &k, &q, &v, decay, beta, &mut o).unwrap();
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&s), bits(&want_s));
        assert_eq!(bits(&o), bits(&want_o));
    }
}
