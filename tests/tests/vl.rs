//! The Qwen3-VL dev fixture (vision depth 3, hidden 48, DeepStack after
//! blocks 0 and 1; text 2 layers, interleaved M-RoPE [4, 2, 2]) against its
//! Hugging Face references:
//!
//! * the vision tower: the last block's output is internal, so the merger
//!   output (image embeddings) and the DeepStack features are compared, for
//!   one image (6x4 patches) and two (6x4 and 2x6), in f32 and Q8 modes;
//! * M-RoPE position ids;
//! * logits of the text-only, one-image and two-image cases, prefill and
//!   decode rows.

use kestrel::convert::convert_model;
use kestrel_core::convert::WeightMode;
use kestrel_core::model::vision::{encode_image, VisionLayout, VisionState};
use kestrel_core::model::weights::Weights;
use kestrel_core::parallel::Serial;
use kestrel_core::state::KvType;
use kestrel_core::vqf::Vqf;
use kestrel_tests::{detected_kernels, diff, fixtures, read_npy_f32, temp_dir};
use std::path::PathBuf;

const MODEL: &str = "dev_qwen3_vl";

fn fx() -> PathBuf {
    fixtures().join(MODEL)
}

fn convert_vl(dir: &std::path::Path, mode: WeightMode) -> Vec<u8> {
    let out = dir.join(format!("vl-{}.vqf", mode.name()));
    convert_model(&fx().join("hf"), &out, mode, Some(256), false, true).unwrap();
    std::fs::read(&out).unwrap()
}

/// The image grids (h, w) in patches of each case.
fn grids(case: &str) -> Vec<(usize, usize)> {
    match case {
        "image" => vec![(6, 4)],
        "two_images" => vec![(6, 4), (2, 6)],
        _ => vec![],
    }
}

/// Encodes the case's images from the reference pixel values; returns
/// (image embeddings, deepstack (levels, tokens, out)) over all images.
fn encode_case(bytes: &[u8], case: &str, kv: KvType) -> (Vec<f32>, Vec<f32>) {
    let w = Weights::new(Vqf::parse(bytes).unwrap(), true).unwrap();
    let v = w.cfg.vision.unwrap();
    let (_, pixels) = read_npy_f32(&fx().join(format!("ref/{case}_pixel_values.npy")));
    let patch = v.patch_values();
    let out = v.out_hidden as usize;
    let levels = v.deepstack().len();
    let layout = VisionLayout::new(&v, 64, kv, 1).unwrap();
    let mut arena = vec![0u8; layout.total];
    let mut s = VisionState::new(layout, &mut arena).unwrap();
    let k = detected_kernels();
    let (mut embeds, mut deep_per_image) = (Vec::new(), Vec::new());
    let mut at = 0;
    for (h, wd) in grids(case) {
        let n = h * wd;
        let tokens = n / 4;
        let mut e = vec![0f32; tokens * out];
        let mut d = vec![0f32; levels * tokens * out];
        encode_image(
            &w,
            &mut s,
            &k,
            &Serial,
            &pixels[at * patch..(at + n) * patch],
            h,
            wd,
            &mut e,
            &mut d,
        )
        .unwrap();
        at += n;
        embeds.extend_from_slice(&e);
        deep_per_image.push(d);
    }
    // deepstack as (levels, all tokens, out), as the reference stores it.
    let mut deep = Vec::new();
    for l in 0..levels {
        for d in &deep_per_image {
            let tokens = d.len() / levels / out;
            deep.extend_from_slice(&d[l * tokens * out..(l + 1) * tokens * out]);
        }
    }
    (embeds, deep)
}

#[test]
fn vision_tower_matches_the_reference() {
    let dir = temp_dir("vl-vision");
    for (mode, kv, bound) in [
        (WeightMode::F32, KvType::F32, 1e-4),
        (WeightMode::F32, KvType::F16, 2e-2),
        (WeightMode::Q8, KvType::F16, 0.25),
    ] {
        let bytes = convert_vl(&dir, mode);
        for case in ["image", "two_images"] {
            let (embeds, deep) = encode_case(&bytes, case, kv);
            let (shape, want) = read_npy_f32(&fx().join(format!("ref/{case}_image_embeds.npy")));
            assert_eq!(embeds.len(), want.len(), "{case} embeds {shape:?}");
            let (e_max, e_rel) = diff(&embeds, &want);
            let (_, want_d) = read_npy_f32(&fx().join(format!("ref/{case}_deepstack.npy")));
            assert_eq!(deep.len(), want_d.len(), "{case} deepstack");
            let (d_max, d_rel) = diff(&deep, &want_d);
            println!(
                "vision {case} {} kv {kv:?}: image embeds max abs {e_max:.2e} (rel L2 {e_rel:.2e}), \
                 deepstack max abs {d_max:.2e} (rel L2 {d_rel:.2e})",
                mode.name()
            );
            assert!(e_max <= bound && d_max <= bound, "{case} {}", mode.name());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
