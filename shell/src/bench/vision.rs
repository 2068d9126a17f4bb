//! `--vision`: the vision tower at the Qwen3-VL-2B shape on synthetic
//! weights.

use super::median_ms;
use super::synthetic::{synthetic, SyntheticSource};
use crate::error::Result;
use crate::pool::Pool;
use kestrel_core::kernels::Kernels;
use kestrel_core::parallel::Parallel;
use std::time::Instant;

/// `--vision`: one image through a vision tower at the Qwen3-VL-2B shape
/// (depth 24, hidden 1024, 16 heads, MLP 4096, DeepStack after blocks 5, 11
/// and 17, merger to 2048) with synthetic weights in a Q8 file (the vision
/// matrices' copy in quantized files): an `side x side` image is
/// `(side / 16)^2` patches and a quarter as many LLM tokens.
pub(super) fn vision(kernels: &Kernels, pool: &Pool, repeats: usize, side: usize) -> Result<()> {
    use kestrel_core::config::{Arch, Config, VisionConfig, MAX_EOS};
    use kestrel_core::convert::{write_vqf, WeightMode};
    use kestrel_core::model::linear::Exec;
    use kestrel_core::model::vision::{encode_image, Patches, VisionArenaSizes, VisionState};
    use kestrel_core::state::KvType;
    use kestrel_core::vqf::format::Entry;
    if side == 0 || !side.is_multiple_of(32) {
        return Err(format!(
            "bench --vision: the image side must be a multiple of 32 (got {side})"
        )
        .into());
    }
    let mut deepstack = [0u32; 8];
    deepstack[..3].copy_from_slice(&[5, 11, 17]);
    let vision = VisionConfig {
        depth: 24,
        hidden_size: 1024,
        num_heads: 16,
        ffn_size: 4096,
        patch_size: 16,
        temporal_patch: 2,
        spatial_merge: 2,
        out_hidden: 2048,
        num_position_embeddings: 2304,
        deepstack_layers: deepstack,
        deepstack_count: 3,
        image_token_id: 30,
        vision_start_token_id: 28,
        vision_end_token_id: 29,
        min_pixels: 1024,
        max_pixels: 16_777_216,
        image_mean: [0.5; 3],
        image_std: [0.5; 3],
        rescale_factor: 1.0 / 255.0,
    };
    // A one-layer text model of the 2B's width (the tower's output size).
    let cfg = Config {
        arch: Arch::Qwen3Vl,
        vocab_size: 32,
        hidden_size: 2048,
        num_layers: 1,
        num_heads: 16,
        num_kv_heads: 8,
        head_dim: 128,
        ffn_size: 64,
        rope_theta: 5e6,
        rms_norm_eps: 1e-6,
        max_position: 256,
        tied_embeddings: true,
        qkv_bias: false,
        qk_norm: true,
        moe: None,
        mrope_section: [24, 20, 20],
        rotary_dim: 128,
        linear: None,
        vision: Some(vision),
        bos_token_id: None,
        eos_token_ids: [0; MAX_EOS],
        eos_count: 0,
    };
    let t = Instant::now();
    let n = kestrel_core::convert::entry_count(&cfg, WeightMode::Q8, None)?;
    let mut entries = vec![Entry::EMPTY; n];
    let mut scratch = vec![0f32; kestrel_core::convert::scratch_len(&cfg)?];
    struct VecSink(Vec<u8>);
    impl kestrel_core::vqf::write::Sink for VecSink {
        fn write(&mut self, bytes: &[u8]) -> Result<(), kestrel_core::Error> {
            self.0.extend_from_slice(bytes);
            Ok(())
        }
    }
    let mut sink = VecSink(Vec::new());
    write_vqf(
        &cfg,
        WeightMode::Q8,
        kestrel_core::quant::Quantizer::Ggml,
        None,
        256,
        None,
        &SyntheticSource { cfg },
        &mut entries,
        &mut scratch,
        &mut sink,
        &mut |_| {},
    )?;
    let file = sink.0;
    let vision_bytes: u64 = entries
        .iter()
        .filter(|x| x.role.is_vision())
        .map(|x| x.nbytes)
        .sum();
    // The file 64-byte aligned, as a map is (the loader reads tensors in
    // place).
    let mut aligned = vec![0u8; file.len() + 63];
    let at = aligned.as_ptr().align_offset(64);
    aligned[at..at + file.len()].copy_from_slice(&file);
    let vqf = kestrel_core::vqf::Vqf::parse(&aligned[at..at + file.len()])?;
    use kestrel_core::model::weights::{LayerWeights, Weights};
    let mut layers = vec![LayerWeights::EMPTY; Weights::layer_slots(vqf.config())];
    let w = kestrel_core::embed::Model::of(vqf, &mut layers)?.weights;
    let grid = side / 16;
    let patches = grid * grid;
    let tokens = patches / 4;
    let pixels = synthetic(patches * vision.patch_values(), 9);
    let layout = VisionArenaSizes::new(&vision, patches, KvType::F16, pool.threads())?;
    let mut arena = vec![0u8; layout.total];
    let mut s = VisionState::new(layout, &mut arena)?;
    let mut embeds = vec![0f32; tokens * 2048];
    let mut deep = vec![0f32; 3 * tokens * 2048];
    println!(
        "=== vision tower, Qwen3-VL-2B shape: depth 24, hidden 1024, MLP 4096, Q8 matrices ({:.0} MB; built in {:.1} s) ===",
        vision_bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let mut err = Ok(());
    let ms = median_ms(repeats, || {
        let image = Patches {
            values: &pixels,
            grid_h: grid,
            grid_w: grid,
        };
        let cx = Exec { kernels, pool };
        if let Err(x) = encode_image(&w, &mut s, &cx, image, &mut embeds, &mut deep) {
            err = Err(x);
        }
    });
    err?;
    // Multiply-adds: patch embed, per block qkv + proj + MLP and attention
    // (QK^T and PV), the mergers.
    let (p, d, f) = (patches as f64, 1024f64, 4096f64);
    let macs = p * 1536.0 * d
        + 24.0 * (p * (4.0 * d * d + 2.0 * d * f) + 2.0 * p * p * d)
        + 4.0 * (tokens as f64) * (4096.0 * 4096.0 + 4096.0 * 2048.0);
    println!(
        "image {side}x{side}: {patches} patches -> {tokens} tokens: {:.0} ms ({:.2} s) median of {repeats}, {:.1} GMAC/s, {} kernels, {} threads",
        ms,
        ms / 1e3,
        macs / (ms * 1e-3) / 1e9,
        kernels.name(),
        pool.threads()
    );
    Ok(())
}
