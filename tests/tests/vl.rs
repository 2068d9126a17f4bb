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
use kestrel_core::model::linear::Exec;
use kestrel_core::model::vision::{encode_image, Patches, VisionArenaSizes, VisionState};
use kestrel_core::parallel::Serial;
use kestrel_core::state::KvType;
use kestrel_core::vqf::Vqf;
use kestrel_tests::{detected_kernels, diff, fixtures, read_npy_f32, read_npy_i64, temp_dir};
use std::path::PathBuf;

const MODEL: &str = "dev_qwen3_vl";

fn fx() -> PathBuf {
    fixtures().join(MODEL)
}

fn convert_vl(dir: &std::path::Path, mode: WeightMode) -> Vec<u8> {
    std::fs::read(convert_vl_file(dir, mode, true)).unwrap()
}

/// The fixture converted to `dir` (with or without its vision tower).
fn convert_vl_file(dir: &std::path::Path, mode: WeightMode, vision: bool) -> PathBuf {
    let out = dir.join(format!("vl-{}-{vision}.vqf", mode.name()));
    convert_model(
        &fx().join("hf"),
        &out,
        mode,
        kestrel::convert::Quantize::default(),
        Some(256),
        false,
        if vision {
            kestrel::convert::Tower::FromSource
        } else {
            kestrel::convert::Tower::None
        },
    )
    .unwrap();
    out
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
    encode_case_on(bytes, case, kv, &detected_kernels(), &Serial)
}

fn encode_case_on<P: kestrel_core::parallel::Parallel>(
    bytes: &[u8],
    case: &str,
    kv: KvType,
    k: &kestrel_core::kernels::Kernels,
    pool: &P,
) -> (Vec<f32>, Vec<f32>) {
    if grids(case).is_empty() {
        return (Vec::new(), Vec::new());
    }
    let w = kestrel_tests::weights(Vqf::parse(bytes).unwrap(), true).unwrap();
    let v = w.cfg.vision.unwrap();
    let (_, pixels) = read_npy_f32(&fx().join(format!("ref/{case}_pixel_values.npy")));
    let patch = v.patch_values();
    let out = v.out_hidden as usize;
    let levels = v.deepstack().len();
    let layout = VisionArenaSizes::new(&v, 64, kv, pool.threads()).unwrap();
    let mut arena = vec![0u8; layout.total];
    let mut s = VisionState::new(layout, &mut arena).unwrap();
    let (mut embeds, mut deep_per_image) = (Vec::new(), Vec::new());
    let mut at = 0;
    for (h, wd) in grids(case) {
        let n = h * wd;
        let tokens = n / 4;
        let mut e = vec![0f32; tokens * out];
        let mut d = vec![0f32; levels * tokens * out];
        let image = Patches {
            values: &pixels[at * patch..(at + n) * patch],
            grid_h: h,
            grid_w: wd,
        };
        let cx = Exec { kernels: k, pool };
        encode_image(&w, &mut s, &cx, image, &mut e, &mut d).unwrap();
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

/// The tower with the detected kernels (its attention in blocks of patches
/// per head, the GEMMs in the CPU's tiles) on 1-3 threads gives the scalar
/// kernels' bits, f16 and f32 caches.
#[test]
fn vision_tower_gives_the_scalar_bits_on_any_thread_count() {
    let dir = temp_dir("vl-vision-bits");
    let bytes = convert_vl(&dir, WeightMode::Q8);
    let pools: Vec<kestrel::pool::Pool> = (1..=3).map(kestrel::pool::Pool::new).collect();
    for kv in [KvType::F16, KvType::F32] {
        for case in ["image", "two_images"] {
            let want = encode_case_on(
                &bytes,
                case,
                kv,
                &kestrel_core::kernels::Kernels::Scalar,
                &Serial,
            );
            assert!(!want.0.is_empty(), "{case}: no image");
            for pool in &pools {
                let got = encode_case_on(&bytes, case, kv, &detected_kernels(), pool);
                let same = |a: &[f32], b: &[f32]| {
                    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
                };
                assert!(
                    same(&got.0, &want.0) && same(&got.1, &want.1),
                    "{case} {kv:?} {} threads",
                    kestrel_core::parallel::Parallel::threads(pool)
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
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

/// An int64 .npy file's values.
struct Case {
    name: &'static str,
    prompt: Vec<u32>,
    greedy: Vec<u32>,
}

fn case(name: &'static str) -> Case {
    let refj: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx().join("ref/ref.json")).unwrap()).unwrap();
    let c = &refj["cases"][name];
    let ids = |k: &str| -> Vec<u32> {
        c[k].as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect()
    };
    Case {
        name,
        prompt: ids("input_ids"),
        greedy: ids("greedy_ids"),
    }
}

/// Merged token grids (rows, cols) of a case's images.
fn token_grids(name: &str) -> Vec<(usize, usize)> {
    grids(name).iter().map(|&(h, w)| (h / 2, w / 2)).collect()
}

#[test]
fn mrope_positions_match_the_reference() {
    use kestrel_core::model::vision::mrope_positions;
    for name in ["image", "two_images"] {
        let c = case(name);
        let n = c.prompt.len();
        let mut pos = vec![[0u32; 3]; n];
        let mut rows = vec![0u32; n];
        let delta =
            mrope_positions(&c.prompt, 482, &token_grids(name), &mut pos, &mut rows).unwrap();
        let want = read_npy_i64(&fx().join(format!("ref/{name}_position_ids_thw.npy")));
        for (t, p) in pos.iter().enumerate() {
            for axis in 0..3 {
                assert_eq!(
                    p[axis] as i64,
                    want[axis * n + t],
                    "{name} token {t} axis {axis}"
                );
            }
        }
        assert_eq!(delta, -3, "{name} rope_delta");
        println!("{name}: {n} positions equal the reference, rope_delta {delta}");
    }
    // Placeholder runs that do not match the images are errors.
    let c = case("image");
    let n = c.prompt.len();
    let (mut pos, mut rows) = (vec![[0u32; 3]; n], vec![0u32; n]);
    assert!(mrope_positions(&c.prompt, 482, &[(3, 3)], &mut pos, &mut rows).is_err());
    assert!(mrope_positions(&c.prompt, 482, &[(3, 2), (1, 1)], &mut pos, &mut rows).is_err());
    assert!(mrope_positions(&c.prompt, 482, &[], &mut pos, &mut rows).is_err());
}

/// Teacher-forced logits of a case: the prompt in one multimodal step
/// (every row), then the greedy ids one at a time.
fn case_logits(bytes: &[u8], c: &Case, kv: KvType) -> Vec<f32> {
    use kestrel_core::model::forward::{forward, forward_step, Multimodal, Rows, Step};
    use kestrel_core::model::vision::mrope_positions;
    use kestrel_core::state::{ArenaSizes, Options, State};
    let (embeds, deep) = encode_case(bytes, c.name, kv);
    let w = kestrel_tests::weights(Vqf::parse(bytes).unwrap(), true).unwrap();
    let opts = Options {
        max_seq: 128,
        max_batch: 64,
        kv,
        all_logits: true,
        slots: 1,
        draft: 0,
    };
    let mut arena = vec![0u8; ArenaSizes::new(&w.cfg, &opts).unwrap().total];
    let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
    let k = detected_kernels();
    let n = c.prompt.len();
    let (mut pos, mut rows) = (vec![[0u32; 3]; n], vec![0u32; n]);
    let delta = mrope_positions(&c.prompt, 482, &token_grids(c.name), &mut pos, &mut rows).unwrap();
    let mm = Multimodal {
        positions: &pos,
        image_rows: &rows,
        embeds: &embeds,
        deepstack: &deep,
    };
    // The prompt as one step of its copy with the images, every row's logits.
    let step = Step {
        rows: Rows::Run {
            slot: 0,
            pos: 0,
            tokens: &c.prompt,
            last_logits: true,
            then: &[],
        },
        copy: w.routing.for_batch(n),
        images: Some(&mm),
        logits: true,
        interrupt: None,
    };
    let mut out = forward_step(&w, &mut s, &k, &Serial, &step)
        .unwrap()
        .to_vec();
    s.pos = n;
    s.rope_delta[0] = delta;
    for &id in &c.greedy {
        out.extend_from_slice(forward(&w, &mut s, &k, &Serial, &[id]).unwrap());
    }
    out
}

#[test]
fn logits_match_the_reference() {
    let dir = temp_dir("vl-logits");
    let f32_file = convert_vl(&dir, WeightMode::F32);
    let q8_file = convert_vl(&dir, WeightMode::Q8);
    let dual_file = convert_vl(&dir, WeightMode::Dual);
    for name in ["text", "image", "two_images"] {
        let c = case(name);
        let (shape, want) = read_npy_f32(&fx().join(format!("ref/{name}_logits.npy")));
        let vocab = shape[1];
        for (label, bytes, kv, bound) in [
            ("f32", &f32_file, KvType::F32, 1e-3),
            ("f32 + f16 KV", &f32_file, KvType::F16, 0.05),
            ("q8", &q8_file, KvType::F16, f64::INFINITY),
            ("dual", &dual_file, KvType::F16, f64::INFINITY),
        ] {
            let got = case_logits(bytes, &c, kv);
            assert_eq!(got.len(), want.len(), "{name} {label}: rows");
            let (max, rel) = diff(&got, &want);
            let agree = kestrel_tests::argmax_agreement(&got, &want, vocab);
            println!(
                "logits {name} {label}: {} rows, max abs {max:.2e}, rel L2 {rel:.2e}, argmax agreement {:.0}%",
                shape[0],
                agree * 100.0
            );
            assert!(max <= bound, "{name} {label}: max abs {max}");
            if label == "q8" {
                assert!(
                    rel <= 0.05 && agree >= 0.85,
                    "{name} q8: rel {rel}, argmax {agree}"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn logits_from_the_png_files_match_the_reference() {
    // The whole path a user takes: PNG decode, smart resize (image B is
    // upscaled bicubically from 28x90 to 32x96), patchify, the tower, the
    // placeholder expansion and the multimodal prefill (batches of 16, so
    // images straddle batches), then greedy decode.
    use kestrel::engine::EngineArgs;
    use kestrel::logits::logits_with_images;
    let dir = temp_dir("vl-files");
    let out = convert_vl_file(&dir, WeightMode::F32, true);
    let args = EngineArgs {
        kv_f32: true,
        threads: Some(2),
        ..EngineArgs::default()
    };
    for (name, files, bound) in [
        ("image", vec!["image_a.png"], 1e-3),
        ("two_images", vec!["image_a.png", "image_b.png"], 1e-3),
    ] {
        let c = case(name);
        // The prompt with one placeholder per image, as a user writes it.
        let mut short = Vec::new();
        for &t in &c.prompt {
            if t != 482 || short.last() != Some(&482) {
                short.push(t);
            }
        }
        let paths: Vec<PathBuf> = files.iter().map(|f| fx().join("ref").join(f)).collect();
        let (rows, generated, expanded) =
            logits_with_images(&out, &short, &paths, None, c.greedy.len(), 16, &args).unwrap();
        assert_eq!(expanded, c.prompt, "{name}: expanded prompt");
        assert_eq!(generated, c.greedy, "{name}: greedy ids");
        let (_, want) = read_npy_f32(&fx().join(format!("ref/{name}_logits.npy")));
        let (max, rel) = diff(&rows, &want);
        println!("files {name}: max abs {max:.2e}, rel L2 {rel:.2e} (greedy ids equal)");
        assert!(max <= bound, "{name}: {max}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn text_only_conversion_and_the_vision_flag() {
    let dir = temp_dir("vl-text-only");
    let out = convert_vl_file(&dir, WeightMode::F32, false);
    let text_only = std::fs::read(&out).unwrap();
    let v = Vqf::parse(&text_only).unwrap();
    assert!(v.config().vision.is_none());
    assert_eq!(
        v.header().flags & kestrel_core::vqf::format::flags::VISION,
        0
    );
    // The text model alone gives the text case's logits.
    let c = case("text");
    let got = case_logits(&text_only, &c, KvType::F32);
    let (_, want) = read_npy_f32(&fx().join("ref/text_logits.npy"));
    let (max, _) = diff(&got, &want);
    println!("text-only file, text case: max abs {max:.2e}");
    assert!(max <= 1e-3);
    // A vision file whose VISION flag is cleared no longer parses.
    let mut full = convert_vl(&dir, WeightMode::Q8);
    full[16] &= !(kestrel_core::vqf::format::flags::VISION as u8);
    let err = Vqf::parse(&full).unwrap_err().to_string();
    assert!(err.contains("VISION flag"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
