//! The forward pass of the dense Qwen2/Qwen3 decoder, top to bottom.
//!
//! One call processes a batch of `m` tokens (1 for decode, up to
//! `max_batch` for prefill) at positions `state.pos ..`, writes their keys
//! and values into the cache, and leaves the logits of the last token (or of
//! every token, with `all_logits`) in `state.logits`.

use super::ops;
use super::weights::{LayerWeights, Weights};
use crate::error::Error;
use crate::kernels::{Acts, Kernels};
use crate::parallel::Parallel;
use crate::quant::repack::{Layout, PackedMatrix};
use crate::state::State;

/// Quantizes `m` rows of `x` (`m x cols`) into the state's activation
/// buffers when `layout` needs Q8_0 activations.
fn prepare_acts<'s>(
    k: &Kernels,
    layout: Layout,
    x: &'s [f32],
    act_qs: &'s mut [i8],
    act_d: &'s mut [f32],
    m: usize,
    cols: usize,
) -> Result<Acts<'s>, Error> {
    let n = m * cols;
    match layout {
        Layout::Q4_0x4 | Layout::Q8_0x8 => {
            k.quantize_acts(&x[..n], &mut act_qs[..n], &mut act_d[..n / 32])?;
            Ok(Acts {
                x: &x[..n],
                qs: &act_qs[..n],
                d: &act_d[..n / 32],
            })
        }
        Layout::F32 | Layout::F16 => Ok(Acts {
            x: &x[..n],
            qs: &[],
            d: &[],
        }),
    }
}

/// `out = W x` for `m` rows of `x`.
#[allow(clippy::too_many_arguments)]
pub(super) fn linear<P: Parallel>(
    k: &Kernels,
    pool: &P,
    w: &PackedMatrix,
    x: &[f32],
    m: usize,
    act_qs: &mut [i8],
    act_d: &mut [f32],
    tmp: &mut [f32],
    out: &mut [f32],
) -> Result<(), Error> {
    let acts = prepare_acts(k, w.layout, x, act_qs, act_d, m, w.cols)?;
    k.matmul(pool, w, &acts, m, &mut out[..m * w.rows], tmp)
}

/// Runs `tokens` (at most `max_batch`) through the model at positions
/// `state.pos ..` and advances `state.pos`. Returns the logits: the last
/// token's row, or one row per token when the state keeps all logits.
pub fn forward<'s, P: Parallel>(
    w: &Weights,
    s: &'s mut State,
    k: &Kernels,
    pool: &P,
    tokens: &[u32],
) -> Result<&'s [f32], Error> {
    let cfg = &w.cfg;
    let m = tokens.len();
    if m == 0 || m > s.opts.max_batch {
        return Err(Error::OutOfRange {
            what: "tokens in one forward step",
            value: m,
            max: s.opts.max_batch,
        });
    }
    let pos = s.pos;
    if pos + m > s.opts.max_seq {
        return Err(Error::ContextFull {
            need: pos + m,
            max: s.opts.max_seq,
        });
    }
    let h = cfg.hidden_size as usize;
    let hd = cfg.head_dim as usize;
    let (q_dim, kv_dim) = (cfg.q_dim(), cfg.kv_dim());
    let qkv_rows = cfg.qkv_rows();
    let ffn = cfg.ffn_size as usize;
    let eps = cfg.rms_norm_eps as f32;
    let layout = w.routing.for_batch(m);

    // x: (m, hidden) <- embedding rows.
    let emb = w.embedding()?;
    for (t, &id) in tokens.iter().enumerate() {
        if id >= cfg.vocab_size {
            return Err(Error::BadToken {
                id,
                vocab: cfg.vocab_size,
            });
        }
        let row = &mut s.x[t * h..(t + 1) * h];
        let base = id as usize * h;
        match w.embedding {
            Layout::F16 => {
                for (i, v) in row.iter_mut().enumerate() {
                    *v = crate::quant::f16::read_f16(emb, 2 * (base + i));
                }
            }
            _ => {
                for (i, v) in row.iter_mut().enumerate() {
                    *v = ops::f32_at(emb, base + i);
                }
            }
        }
    }

    for l in 0..cfg.num_layers as usize {
        let lw: LayerWeights = w.layer(l, layout)?;

        // --- attention ---
        // xb = rmsnorm(x); qkv (m, q_dim + 2 kv_dim) = Wqkv xb (+ bias)
        for t in 0..m {
            ops::rmsnorm(
                &mut s.xb[t * h..(t + 1) * h],
                &s.x[t * h..(t + 1) * h],
                lw.attn_norm,
                eps,
            );
        }
        linear(k, pool, &lw.qkv, s.xb, m, s.act_qs, s.act_d, s.tmp, s.qkv)?;
        for t in 0..m {
            let row = &mut s.qkv[t * qkv_rows..(t + 1) * qkv_rows];
            if let Some(b) = lw.qkv_bias {
                for (i, v) in row.iter_mut().enumerate() {
                    *v += ops::f32_at(b, i);
                }
            }
            let p = pos + t;
            let (q, kv) = row.split_at_mut(q_dim);
            let (kk, vv) = kv.split_at_mut(kv_dim);
            let cos = &s.rope_cos[p * hd / 2..(p + 1) * hd / 2];
            let sin = &s.rope_sin[p * hd / 2..(p + 1) * hd / 2];
            for head in q.chunks_exact_mut(hd) {
                if let Some(n) = lw.q_norm {
                    ops::rmsnorm_in_place(head, n, eps);
                }
                ops::rope(head, cos, sin);
            }
            for head in kk.chunks_exact_mut(hd) {
                if let Some(n) = lw.k_norm {
                    ops::rmsnorm_in_place(head, n, eps);
                }
                ops::rope(head, cos, sin);
            }
            // Cache: (layer, seq, kv_dim).
            let at = (l * s.opts.max_seq + p) * kv_dim;
            s.k_cache.store(at, kk);
            s.v_cache.store(at, vv);
        }
        // att (m, q_dim): causal attention of each token over the cache.
        attention(w, s, l, pos, m)?;
        // x += Wo att
        linear(k, pool, &lw.o, s.att, m, s.act_qs, s.act_d, s.tmp, s.proj)?;
        ops::add_in_place(&mut s.x[..m * h], &s.proj[..m * h]);

        // --- feed-forward ---
        for t in 0..m {
            ops::rmsnorm(
                &mut s.xb[t * h..(t + 1) * h],
                &s.x[t * h..(t + 1) * h],
                lw.ffn_norm,
                eps,
            );
        }
        if let Some(experts) = &lw.moe {
            super::moe::ffn(k, pool, experts, s, l, m)?;
            continue;
        }
        linear(
            k,
            pool,
            &lw.gate_up,
            s.xb,
            m,
            s.act_qs,
            s.act_d,
            s.tmp,
            s.gate_up,
        )?;
        for t in 0..m {
            ops::swiglu_runs(
                &mut s.hb[t * ffn..(t + 1) * ffn],
                &s.gate_up[t * 2 * ffn..(t + 1) * 2 * ffn],
            );
        }
        linear(k, pool, &lw.down, s.hb, m, s.act_qs, s.act_d, s.tmp, s.proj)?;
        ops::add_in_place(&mut s.x[..m * h], &s.proj[..m * h]);
    }

    // Final norm, then the lm_head over the rows whose logits are kept.
    let first = if s.opts.all_logits { 0 } else { m - 1 };
    let rows = m - first;
    let norm = w.output_norm()?;
    for t in 0..rows {
        let src = (first + t) * h;
        ops::rmsnorm(&mut s.xb[t * h..(t + 1) * h], &s.x[src..src + h], norm, eps);
    }
    let head = w.output(layout)?;
    linear(
        k, pool, &head, s.xb, rows, s.act_qs, s.act_d, s.tmp, s.logits,
    )?;
    s.pos = pos + m;
    Ok(&s.logits[..rows * cfg.vocab_size as usize])
}

/// Causal grouped-query attention for the batch's `m` tokens at positions
/// `pos ..`: query head `h` reads kv head `h / (heads / kv_heads)`.
fn attention(w: &Weights, s: &mut State, l: usize, pos: usize, m: usize) -> Result<(), Error> {
    let cfg = &w.cfg;
    let hd = cfg.head_dim as usize;
    let (q_dim, kv_dim) = (cfg.q_dim(), cfg.kv_dim());
    let qkv_rows = cfg.qkv_rows();
    let group = (cfg.num_heads / cfg.num_kv_heads) as usize;
    let scale = 1.0 / libm::sqrtf(hd as f32);
    let base = l * s.opts.max_seq * kv_dim;
    for t in 0..m {
        let p = pos + t;
        let q_row = &s.qkv[t * qkv_rows..t * qkv_rows + q_dim];
        let out_row = &mut s.att[t * q_dim..(t + 1) * q_dim];
        for (hq, (q, out)) in q_row
            .chunks_exact(hd)
            .zip(out_row.chunks_exact_mut(hd))
            .enumerate()
        {
            let kvh = hq / group;
            let scores = &mut s.scores[..p + 1];
            for (j, sc) in scores.iter_mut().enumerate() {
                let at = base + j * kv_dim + kvh * hd;
                let mut dot = 0.0f32;
                for (i, &qi) in q.iter().enumerate() {
                    dot += qi * s.k_cache.get(at + i);
                }
                *sc = dot * scale;
            }
            ops::softmax(scores);
            out.fill(0.0);
            for (j, &pj) in scores.iter().enumerate() {
                let at = base + j * kv_dim + kvh * hd;
                for (i, o) in out.iter_mut().enumerate() {
                    *o += pj * s.v_cache.get(at + i);
                }
            }
        }
    }
    Ok(())
}
