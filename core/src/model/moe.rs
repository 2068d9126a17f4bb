//! The Qwen3-MoE feed-forward block: router, top-k, and the selected experts.
//!
//! * Router logits in f32 (the router is stored F32), softmax over all
//!   experts, then the top `k` by probability. Ties go to the lowest expert
//!   index (the convention the issue fixes for the reference; the fixture's
//!   router never ties: its top-k gap is >= 1e-3); the chosen experts are
//!   kept in decreasing probability order, as `ref.json` lists them.
//!   With `norm_topk_prob` the `k` weights are divided by their sum.
//! * The batch's `(token, choice)` slots are grouped by expert (tokens in
//!   ascending order inside a group). Each expert with at least one token
//!   runs once over its gathered rows: fused gate+up, SwiGLU, down. Experts
//!   nobody chose are never read: a decode step (one token) touches exactly
//!   `k` experts' bytes.
//! * The weighted outputs are summed per token in ascending expert order
//!   (the order of Hugging Face's `index_add_` loop), then added to the
//!   residual stream. Decode and prefill therefore sum in the same order.

use super::linear::Exec;
use super::observe::{Input, Observer};
use super::ops;
use super::weights::MoeLayer;
use crate::error::Error;
use crate::kernels::Epilogue;
use crate::parallel::Parallel;
use crate::state::State;

/// Picks the top `k` of `probs` (ties: lowest index first) into `sel`, in
/// decreasing order, and their probabilities into `w` (renormalized when
/// `norm`).
pub fn top_k(probs: &[f32], sel: &mut [u32], w: &mut [f32], norm: bool) {
    let k = sel.len().min(w.len());
    for j in 0..k {
        let mut best: Option<usize> = None;
        for (e, &p) in probs.iter().enumerate() {
            if sel[..j].contains(&(e as u32)) {
                continue;
            }
            // Strictly greater: an equal later expert never displaces an
            // earlier one, and (comparisons with NaN being false) a NaN
            // neither displaces nor is displaced: no panic, some choice.
            let better = match best {
                None => true,
                Some(b) => p > probs[b],
            };
            if better {
                best = Some(e);
            }
        }
        let b = best.unwrap_or(0);
        sel[j] = b as u32;
        w[j] = probs.get(b).copied().unwrap_or(0.0);
    }
    if norm {
        let mut sum = 0.0f32;
        for &v in &w[..k] {
            sum += v;
        }
        for v in &mut w[..k] {
            *v /= sum;
        }
    }
}

/// The MoE feed-forward of layer `l` for the batch's `m` tokens: reads the
/// normed input `s.xb`, adds the experts' weighted outputs to `s.x`, and
/// records the routing in `s.moe.routes`; shows `observer` each chosen
/// expert's inputs.
pub fn ffn<P: Parallel>(
    cx: &Exec<P>,
    lw: &MoeLayer,
    s: &mut State,
    l: usize,
    m: usize,
    observer: &mut dyn Observer,
) -> Result<(), Error> {
    let (h, e_n, top) = (lw.hidden, lw.experts, lw.top_k);
    let b = s.opts.max_batch;
    let short = |what: &'static str| Error::SizeMismatch {
        what,
        expected: m,
        actual: b,
    };
    if m > b || top == 0 || top > e_n {
        return Err(short("MoE batch or top-k"));
    }
    // 1. Router logits (m, experts) in f32, softmax, top-k.
    let router = s
        .moe
        .router
        .get_mut(..m * e_n)
        .ok_or(short("MoE router scratch"))?;
    cx.linear(&lw.router, s.xb, m, &mut s.scratch, Epilogue::Store, router)?;
    let base = l
        .checked_mul(b)
        .and_then(|v| v.checked_mul(top))
        .ok_or(Error::Overflow {
            what: "routes index",
        })?;
    let routes = s
        .moe
        .routes
        .get_mut(base..base + b * top)
        .ok_or(short("MoE routes"))?;
    let route_w = s
        .moe
        .route_w
        .get_mut(base..base + b * top)
        .ok_or(short("MoE route weights"))?;
    for t in 0..m {
        let probs = &mut router[t * e_n..(t + 1) * e_n];
        ops::softmax(probs);
        top_k(
            probs,
            &mut routes[t * top..(t + 1) * top],
            &mut route_w[t * top..(t + 1) * top],
            lw.norm_topk_prob,
        );
    }
    // 2. Group the (token, choice) slots by expert: a stable counting sort.
    // `starts[e]` first holds where group e begins; filling advances it to
    // where group e ends (= where e + 1 begins), so afterwards group e is
    // `starts[e - 1] .. starts[e]` (from 0 for e = 0).
    let (slots, starts) = s.moe.groups.split_at_mut(b * top);
    let starts = starts.get_mut(..e_n + 1).ok_or(short("MoE groups"))?;
    starts.fill(0);
    for &e in &routes[..m * top] {
        starts[e as usize + 1] += 1;
    }
    for e in 0..e_n {
        starts[e + 1] += starts[e];
    }
    for (slot, &e) in routes[..m * top].iter().enumerate() {
        let at = &mut starts[e as usize];
        slots[*at as usize] = slot as u32;
        *at += 1;
    }
    // 3. Each chosen expert once over its tokens; weighted sum in expert order.
    let acc = &mut s.moe.acc[..m * h];
    acc.fill(0.0);
    for e in 0..e_n {
        let lo = if e == 0 { 0 } else { starts[e - 1] as usize };
        let hi = starts[e] as usize;
        let n = hi - lo;
        if n == 0 {
            continue;
        }
        for (i, &slot) in slots[lo..hi].iter().enumerate() {
            let t = slot as usize / top;
            s.moe.x_in[i * h..(i + 1) * h].copy_from_slice(&s.xb[t * h..(t + 1) * h]);
        }
        let (gu, dn) = lw.expert(e)?;
        let ffn = lw.ffn;
        observer.observe(l, Input::ExpertGateUp(e), &s.moe.x_in[..n * h]);
        // hb (n, ffn) = swiglu(Wgate_up x_in); proj (n, hidden) = Wdown hb
        cx.linear(
            &gu,
            s.moe.x_in,
            n,
            &mut s.scratch,
            Epilogue::SwiGlu,
            &mut s.hb[..n * ffn],
        )?;
        observer.observe(l, Input::ExpertDown(e), &s.hb[..n * ffn]);
        cx.linear(&dn, s.hb, n, &mut s.scratch, Epilogue::Store, s.proj)?;
        for (i, &slot) in slots[lo..hi].iter().enumerate() {
            let t = slot as usize / top;
            let wt = route_w[slot as usize];
            let out = &s.proj[i * h..(i + 1) * h];
            for (a, &o) in acc[t * h..(t + 1) * h].iter_mut().zip(out) {
                *a += o * wt;
            }
        }
        s.moe.expert_calls += 1;
        s.moe.expert_bytes += (gu.bytes.len() + dn.bytes.len()) as u64;
    }
    // 4. Qwen3.5-MoE's shared expert, every token: its output scaled by
    // sigmoid(gate . xb), added to the experts' sum.
    if let Some(sh) = &lw.shared {
        let ffn = sh.down.cols;
        observer.observe(l, Input::SharedGateUp, &s.xb[..m * h]);
        cx.linear(
            &sh.gate_up,
            s.xb,
            m,
            &mut s.scratch,
            Epilogue::SwiGlu,
            &mut s.hb[..m * ffn],
        )?;
        observer.observe(l, Input::SharedDown, &s.hb[..m * ffn]);
        cx.linear(&sh.down, s.hb, m, &mut s.scratch, Epilogue::Store, s.proj)?;
        for t in 0..m {
            let xb = &s.xb[t * h..(t + 1) * h];
            let mut dot = 0.0f32;
            for (j, &v) in xb.iter().enumerate() {
                dot += ops::f32_at(sh.gate, j) * v;
            }
            let gate = 1.0 / (1.0 + libm::expf(-dot));
            let out = &s.proj[t * h..(t + 1) * h];
            for (a, &o) in acc[t * h..(t + 1) * h].iter_mut().zip(out) {
                *a += o * gate;
            }
        }
    }
    ops::add_in_place(&mut s.x[..m * h], acc);
    Ok(())
}
