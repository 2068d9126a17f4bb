//! `--moe`: one MoE layer at the Qwen3-30B-A3B shape.

use super::median_ms;
use super::synthetic::{synthetic, synthetic_packed};
use crate::error::Result;
use crate::pool::Pool;
use kestrel_core::kernels::Kernels;
use kestrel_core::model::forward::NoObserver;
use kestrel_core::parallel::Parallel;
use kestrel_core::quant::repack;

/// `--moe`: one MoE layer at the Qwen3-30B-A3B shape through the engine's
/// MoE block (router, top-8, grouped experts): decode reads the Q4 copy,
/// prefill (M=32) the Q8 copy, as a dual file does. Bytes touched = the F32
/// router plus the expert matrices multiplied (counted by the state).
pub(super) fn moe(kernels: &Kernels, pool: &Pool, repeats: usize) -> Result<()> {
    use kestrel_core::config::{Arch, Config, MoeConfig, MAX_EOS, MAX_LAYERS};
    use kestrel_core::model::linear::Exec;
    use kestrel_core::model::moe::ffn;
    use kestrel_core::model::weights::MoeLayer;
    use kestrel_core::state::{ArenaSizes, KvType, Options, State};
    use repack::Layout;
    const H: usize = 2048;
    const E: usize = 128;
    const F: usize = 768;
    const K: usize = 8;
    let cfg = Config {
        arch: Arch::Qwen3Moe,
        vocab_size: 32,
        hidden_size: H as u32,
        num_layers: 1,
        num_heads: 32,
        num_kv_heads: 4,
        head_dim: 128,
        ffn_size: F as u32,
        rope_theta: 1e6,
        rms_norm_eps: 1e-6,
        max_position: 32,
        tied_embeddings: false,
        qkv_bias: false,
        qk_norm: true,
        moe: Some(MoeConfig {
            num_experts: E as u32,
            experts_per_token: K as u32,
            moe_ffn_size: F as u32,
            norm_topk_prob: true,
            decoder_sparse_step: 1,
            mlp_only_layers: [0; MAX_LAYERS / 64],
            shared_ffn_size: 0,
        }),
        mrope_section: [0; 3],
        rotary_dim: 128,
        linear: None,
        vision: None,
        bos_token_id: None,
        eos_token_ids: [0; MAX_EOS],
        eos_count: 0,
    };
    let rb: Vec<u8> = synthetic(E * H, 11)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let router = repack::PackedMatrix::new(Layout::F32, E, H, &rb)?;
    let x = synthetic(32 * H, 5);
    println!(
        "=== MoE layer, Qwen3-30B-A3B shape: hidden {H}, {E} experts x FFN {F}, top-{K} ({}, {} threads) ===",
        kernels.name(),
        pool.threads()
    );
    for (m, layout, name) in [(1usize, Layout::Q4_0x4, "Q4"), (32, Layout::Q8_0x8, "Q8")] {
        let gu = synthetic_packed(layout, 2 * F, H)?.repeat(E);
        let dn = synthetic_packed(layout, H, F)?.repeat(E);
        let layer = MoeLayer {
            shared: None,
            router,
            gate_up: &gu,
            down: &dn,
            gate_up_layout: layout,
            down_layout: layout,
            experts: E,
            top_k: K,
            ffn: F,
            hidden: H,
            norm_topk_prob: true,
        };
        let opts = Options {
            max_seq: 1,
            max_batch: 32,
            kv: KvType::F16,
            all_logits: false,
            slots: 1,
            draft: 0,
        };
        let mut arena = vec![0u8; ArenaSizes::new(&cfg, &opts)?.total];
        let mut s = State::new(&cfg, opts, &mut arena)?;
        let (mut runs, mut err) = (0usize, Ok(()));
        let ms = median_ms(repeats, || {
            // Decode: a different token each run (its own 8 experts).
            let t = runs % 32;
            let src = if m == 1 {
                &x[t * H..(t + 1) * H]
            } else {
                &x[..]
            };
            s.xb[..m * H].copy_from_slice(src);
            s.x[..m * H].fill(0.0);
            if let Err(x) = ffn(
                &Exec { kernels, pool },
                &layer,
                &mut s,
                0,
                m,
                &mut NoObserver,
            ) {
                err = Err(x);
            }
            runs += 1;
        });
        err?;
        let calls = s.moe.expert_calls as f64 / runs as f64;
        let bytes = s.moe.expert_bytes as f64 / runs as f64 + rb.len() as f64;
        println!(
            "{:<8} M={m:<2} {name}: {ms:>8.3} ms/step {:>8.3} ms/token  experts run {calls:>5.1}  bytes touched {:>6.2} MB/step {:>6.2} MB/token  ({:.1} GB/s)",
            if m == 1 { "decode" } else { "prefill" },
            ms / m as f64,
            bytes / 1e6,
            bytes / 1e6 / m as f64,
            bytes / (ms * 1e-3) / 1e9
        );
    }
    println!(
        "(router F32 {:.2} MB read once per step; synthetic router: uniform-ish routing)",
        rb.len() as f64 / 1e6
    );
    Ok(())
}
