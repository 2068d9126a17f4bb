//! `--wmode source`: a GGUF file's own blocks kept for the decode copy.
//! Every fixture GGUF converts; the decode copy holds the source rows byte
//! for byte wherever a layout holds their type (unpacked and compared with
//! the GGUF's rows); the file is tagged as docs/vqf.md says; batched and
//! token-by-token runs over the decode copy agree bit for bit (split QKV
//! included); and the decode copy is as close to the exact f32 computation
//! as the source's own blocks allow: closer than dual's Q4 copy.

use kestrel::convert::convert;
use kestrel_core::convert::WeightMode;
use kestrel_core::gguf::Gguf;
use kestrel_core::model::forward::forward;
use kestrel_core::parallel::Serial;
use kestrel_core::quant::repack::Layout;
use kestrel_core::state::{ArenaSizes, KvType, Options, State};
use kestrel_core::tensors::Role;
use kestrel_core::vqf::format::{copies, flags};
use kestrel_core::vqf::Vqf;
use kestrel_tests::{detected_kernels, diff, fixtures, temp_dir};
use std::path::PathBuf;

/// A GGUF file made of `base`'s metadata and tensors, but the tensors whose
/// name ends with one of `from_other` taken (type and data) from `other`:
/// a model whose matrices differ in type tensor by tensor, as llama.cpp's
/// k-quant mixes make them.
fn splice(base: &[u8], other: &[u8], from_other: &[&str]) -> Vec<u8> {
    let (a, b) = (Gguf::parse(base).unwrap(), Gguf::parse(other).unwrap());
    let infos: Vec<_> = a.tensors().collect();
    let align = a.alignment();
    let mut out = base[..infos[0].info_offset()].to_vec();
    let mut data: Vec<u8> = Vec::new();
    for t in &infos {
        let pick = if from_other.iter().any(|s| t.name().ends_with(s)) {
            b.tensor(t.name()).unwrap()
        } else {
            *t
        };
        out.extend_from_slice(&(t.name().len() as u64).to_le_bytes());
        out.extend_from_slice(t.name().as_bytes());
        out.extend_from_slice(&(t.dims().len() as u32).to_le_bytes());
        for d in t.dims() {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&(pick.ggml_type() as u32).to_le_bytes());
        data.resize(data.len().next_multiple_of(align), 0);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        data.extend_from_slice(pick.data());
    }
    out.resize(out.len().next_multiple_of(align), 0);
    out.extend_from_slice(&data);
    out
}

/// The Q4_0 dense fixture with every `attn_v` and every odd `ffn_down`
/// from its Q8_0 twin (QKV splits in the decode copy) and the model's own
/// fixtures. `test` names the calling test: each writes its own spliced
/// file (tests run in parallel, and a file rewritten while another test
/// maps it is an error).
fn gguf_fixtures(test: &str) -> Vec<PathBuf> {
    let dir = temp_dir(&format!("source-mode-inputs-{test}")).into_path();
    let g = fixtures().join("dev_qwen3_dense_untied").join("gguf");
    let mixed = dir.join("model-mixed.gguf");
    let bytes = splice(
        &std::fs::read(g.join("model-q4_0.gguf")).unwrap(),
        &std::fs::read(g.join("model-q8_0.gguf")).unwrap(),
        &["attn_v.weight", "1.ffn_down.weight"],
    );
    Gguf::parse(&bytes).unwrap();
    std::fs::write(&mixed, bytes).unwrap();
    let mut v = vec![mixed];
    v.extend(own_fixtures());
    v
}

fn own_fixtures() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for m in [
        "dev_qwen3_dense_tied",
        "dev_qwen3_dense_untied",
        "dev_qwen2_dense",
        "dev_qwen3_moe",
        "dev_qwen2_kquant",
        "dev_qwen35_dense",
        "dev_qwen35_moe",
    ] {
        for f in [
            "model-q8_0.gguf",
            "model-q4_0.gguf",
            "model-f32.gguf",
            "model-kquant-mix.gguf",
            "model-iq4_nl.gguf",
            "model-q3_k_m.gguf",
            "model-iq4_xs.gguf",
            "model-iq3_xxs.gguf",
            "model-iq3_s.gguf",
            "model-iq2_xxs.gguf",
            "model-iq2_xs.gguf",
            "model-iq2_s.gguf",
            "model-q2_k.gguf",
            "model-ssm-mix.gguf",
        ] {
            let p = fixtures().join(m).join("gguf").join(f);
            if p.exists() {
                v.push(p);
            }
        }
    }
    assert!(v.len() >= 15, "GGUF fixtures missing: {v:?}");
    v
}

/// The GGUF tensor name of stored role `role` (one source part) of `layer`.
fn source_name(role: Role, layer: u16, tied: bool) -> Option<String> {
    let l = format!("blk.{layer}.");
    Some(match role {
        Role::AttnQ => format!("{l}attn_q.weight"),
        Role::AttnK => format!("{l}attn_k.weight"),
        Role::AttnV => format!("{l}attn_v.weight"),
        Role::AttnGate => format!("{l}attn_q.weight"),
        Role::AttnOutput => format!("{l}attn_output.weight"),
        Role::FfnDown => format!("{l}ffn_down.weight"),
        Role::FfnDownShexp => format!("{l}ffn_down_shexp.weight"),
        Role::LinOut => format!("{l}ssm_out.weight"),
        Role::LinQkv => format!("{l}attn_qkv.weight"),
        Role::LinZ => format!("{l}attn_gate.weight"),
        Role::Output if tied => "token_embd.weight".into(),
        Role::Output => "output.weight".into(),
        _ => return None,
    })
}

#[test]
fn the_decode_copy_holds_the_source_blocks_byte_for_byte() {
    let dir = temp_dir("source-mode");
    let mut kept = 0usize;
    for src in gguf_fixtures("blocks") {
        let out = dir.join("s.vqf");
        convert(&src, &out, WeightMode::Source, None, false)
            .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        let bytes = std::fs::read(&out).unwrap();
        let v = Vqf::parse(&bytes).unwrap();
        let f = v.header().flags;
        assert_eq!(
            f & (flags::COPY_TAGS | flags::COPIES),
            flags::COPY_TAGS | flags::Q8_8X8
        );
        let gbytes = std::fs::read(&src).unwrap();
        let g = Gguf::parse(&gbytes).unwrap();
        let tied = v.config().tied_embeddings;
        for e in v.entries() {
            let linear = !kestrel_core::convert::parts_of(e.role).is_empty();
            assert_eq!(e.copies != 0, linear, "{}: copies tag", e.name_str());
            if e.copies & copies::PREFILL != 0 {
                assert_eq!(e.layout, Layout::Q8_0x8, "{}", e.name_str());
            }
            if e.copies & copies::DECODE == 0 || e.ndim != 2 {
                continue;
            }
            let Some(name) = source_name(e.role, e.layer, tied) else {
                continue;
            };
            let t = g.tensor(&name).unwrap();
            let m = v.matrix(&e, 0).unwrap();
            let want = kestrel_core::convert::exact_layout(t.ggml_type(), m.cols);
            if want != Some(e.layout) {
                // A type without an exact layout decodes from the Q8 copy.
                assert!(
                    want.is_none() || e.copies == copies::BOTH,
                    "{}",
                    e.name_str()
                );
                continue;
            }
            let rows = kestrel_tests::unpack_rows(&m).unwrap();
            // Gated attention: the source's Q rows hold each head's query
            // then its gate; the stored Q and gate parts each take theirs.
            let gate = match e.role {
                Role::AttnQ => Some(0),
                Role::AttnGate => Some(1),
                _ => None,
            };
            let cfg = v.config();
            let want: Vec<u8> = match gate.filter(|_| cfg.attn_gate()) {
                Some(g) => {
                    let hd = cfg.head_dim as usize;
                    let row_bytes = rows.len() / m.rows;
                    (0..m.rows)
                        .flat_map(|r| {
                            let src = r / hd * 2 * hd + g * hd + r % hd;
                            t.data()[src * row_bytes..(src + 1) * row_bytes]
                                .iter()
                                .copied()
                        })
                        .collect()
                }
                None => t.data().to_vec(),
            };
            assert_eq!(rows, want, "{}: not the source's blocks", e.name_str());
            kept += 1;
        }
    }
    assert!(kept > 20, "only {kept} matrices checked");
    println!("{kept} decode-copy matrices equal their GGUF rows byte for byte");
}

/// Logits of `tokens` through a file's decode copy (`prefill_q8` false),
/// in batches of `batch`.
fn decode_logits(bytes: &[u8], tokens: &[u32], batch: usize, prefill_q8: bool) -> Vec<f32> {
    let v = Vqf::parse(bytes).unwrap();
    let w = kestrel_tests::weights(v, prefill_q8).unwrap();
    let opts = Options {
        max_seq: 32,
        max_batch: batch,
        kv: KvType::F32,
        all_logits: true,
        slots: 1,
        draft: 0,
    };
    let mut arena = vec![0u8; ArenaSizes::new(&w.cfg, &opts).unwrap().total];
    let mut s = State::new(&w.cfg, opts, &mut arena).unwrap();
    let k = detected_kernels();
    let mut out = Vec::new();
    for chunk in tokens.chunks(batch) {
        out.extend_from_slice(forward(&w, &mut s, &k, &Serial, chunk).unwrap());
    }
    out
}

#[test]
fn the_decode_copy_runs_batched_as_stepped_and_closer_to_f32_than_dual() {
    let dir = temp_dir("source-logits");
    let tokens = [1u32, 5, 9, 2, 33, 7, 0, 39, 12, 3];
    let (mut split, mut split_qkvz) = (0, 0);
    for src in gguf_fixtures("logits") {
        let file = |mode: WeightMode| {
            let p = dir.join(format!("{}.vqf", mode.name()));
            convert(&src, &p, mode, None, false).unwrap();
            std::fs::read(&p).unwrap()
        };
        let (source, dual, exact) = (
            file(WeightMode::Source),
            file(WeightMode::Dual),
            file(WeightMode::F32),
        );
        let v = Vqf::parse(&source).unwrap();
        split += v.entries().filter(|e| e.role == Role::AttnQ).count();
        split_qkvz += v.entries().filter(|e| e.role == Role::LinQkv).count();
        let stepped = decode_logits(&source, &tokens, 1, false);
        let batched = decode_logits(&source, &tokens, 5, false);
        assert!(
            stepped
                .iter()
                .zip(&batched)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{}: batched and stepped decode-copy runs differ",
            src.display()
        );
        let want = decode_logits(&exact, &tokens, 1, false);
        let (_, rel_source) = diff(&stepped, &want);
        let (_, rel_dual) = diff(&decode_logits(&dual, &tokens, 1, false), &want);
        println!(
            "{}: decode copy rel L2 vs f32: source {rel_source:.2e}, dual {rel_dual:.2e}",
            src.display()
        );
        // MoE routing flips on near ties once weights are 4-bit: a looser
        // bound. The Qwen3.5 fixtures' random weights amplify rounding
        // through the recurrent state: Q8_0 activations alone move the
        // dense one's logits 0.11, and flip the MoE one's routing (0.52);
        // what holds there is the bits and the order against dual. The IQ2 fixtures (random blocks requantized to 2 bits)
        // amplify rounding: IQ2_XXS's `q8` file is 6.5% off f32 too
        // (IQ3_XXS's: 1.0%), and Q8_K activations round more than Q8_0's.
        let iq2 = [
            "model-iq2_xxs.gguf",
            "model-iq2_xs.gguf",
            "model-iq2_s.gguf",
        ]
        .iter()
        .any(|f| src.ends_with(f));
        // The Qwen3.5 file whose fused projections split (gated attention's
        // Q and gate rows Q8_0, its K and V Q5_0; a DeltaNet layer's q|k|v
        // Q5_0 and z Q4_0): 0.15 with every part where the forward reads
        // it, 0.39 with the query and gate rows swapped.
        let ssm_mix = src.ends_with("model-ssm-mix.gguf");
        let bound = match (v.config().moe.is_some(), iq2) {
            _ if ssm_mix => 0.25,
            _ if v.config().arch.is_qwen35() => 0.6,
            (true, _) => 0.3,
            (false, true) => 0.15,
            _ => 0.05,
        };
        assert!(rel_source < bound, "{}: {rel_source}", src.display());
        assert!(
            rel_source <= rel_dual * 1.0001,
            "{}: source {rel_source} > dual {rel_dual}",
            src.display()
        );
    }
    assert!(split > 0, "no fixture exercised a split QKV");
    assert!(
        split_qkvz > 0,
        "no fixture exercised a split Gated DeltaNet projection"
    );
}

/// `--wmode exact`: `source`'s decode copy alone, which prompts read too.
/// The file is one copy (COPY_TAGS with Q4_4X4), every linear weight in
/// both copies; its entries are the `source` file's decode-copy entries
/// byte for byte; its logits, batched or stepped, are that decode copy's
/// bit for bit (`source` with `--prefill-q8 false`); and it is smaller.
#[test]
fn an_exact_file_is_the_source_decode_copy_alone() {
    let dir = temp_dir("exact-mode");
    let tokens = [1u32, 5, 9, 2, 33, 7, 0, 39, 12, 3];
    let mut lossless = 0usize;
    for src in gguf_fixtures("exact") {
        let file = |mode: WeightMode| {
            let p = dir.join(format!("{}.vqf", mode.name()));
            convert(&src, &p, mode, None, false)
                .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            std::fs::read(&p).unwrap()
        };
        let (source, exact) = (file(WeightMode::Source), file(WeightMode::Exact));
        let (s, e) = (Vqf::parse(&source).unwrap(), Vqf::parse(&exact).unwrap());
        // Smaller by the prefill copy's entries that decode does not read
        // (none when every source matrix is Q8_0).
        let prefill_only = s.entries().any(|x| x.copies == copies::PREFILL);
        assert_eq!(
            exact.len() < source.len(),
            prefill_only,
            "{}",
            src.display()
        );
        assert!(exact.len() <= source.len(), "{}", src.display());
        assert_eq!(
            e.header().flags & (flags::COPY_TAGS | flags::COPIES),
            flags::COPY_TAGS | flags::Q4_4X4,
            "{}",
            src.display()
        );
        let decode: Vec<_> = s
            .entries()
            .filter(|x| x.copies & copies::DECODE != 0)
            .collect();
        let linear: Vec<_> = e.entries().filter(|x| x.copies != 0).collect();
        assert_eq!(linear.len(), decode.len(), "{}", src.display());
        for (a, b) in linear.iter().zip(&decode) {
            let name = a.name_str();
            assert_eq!(a.copies, copies::BOTH, "{}: {name}", src.display());
            assert_eq!((a.role, a.layer, a.layout), (b.role, b.layer, b.layout));
            assert_eq!(e.data(a), s.data(b), "{}: {name}", src.display());
            lossless += usize::from(!matches!(a.layout, Layout::Q8_0x8 | Layout::Q4_0x4));
        }
        let want = decode_logits(&source, &tokens, 1, false);
        for batch in [1, 5] {
            let got = decode_logits(&exact, &tokens, batch, true);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{}: the exact file differs from source's decode copy (batch {batch})",
                src.display()
            );
        }
    }
    assert!(lossless > 10, "only {lossless} k-quant or Q5 matrices seen");
}

/// `--wmode mix`: the recipe's matrices decode from the Q8 prefill copy,
/// the rest from Q4_0 entries; an all-Q4 recipe decodes exactly as `dual`;
/// batched and stepped runs agree; keeping matrices in Q8 moves the decode
/// copy closer to the f32 computation. `--wmode small` is that decode copy
/// alone, for prompts too.
#[test]
fn a_mix_file_decodes_its_recipe() {
    use kestrel_core::convert::{Recipe, RecipePart};
    let dir = temp_dir("mix-mode");
    let tokens = [1u32, 5, 9, 2, 33, 7, 0, 39, 12, 3];
    let attention = Recipe::ALL_Q4
        .with_q8(RecipePart::AttnQ)
        .with_q8(RecipePart::AttnK)
        .with_q8(RecipePart::AttnV)
        .with_q8(RecipePart::AttnOutput);
    let kv = Recipe::ALL_Q4
        .with_q8(RecipePart::AttnK)
        .with_q8(RecipePart::AttnV)
        .with_q8(RecipePart::Output);
    let sources = [
        fixtures().join("dev_qwen3_dense_untied/hf"),
        fixtures().join("dev_qwen2_dense/gguf/model-q8_0.gguf"),
        fixtures().join("dev_qwen2_kquant/gguf/model-kquant-mix.gguf"),
    ];
    for src in &sources {
        let file = |mode: WeightMode| {
            let p = dir.join(format!("{}.vqf", mode.name()));
            convert(src, &p, mode, None, false)
                .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            std::fs::read(&p).unwrap()
        };
        let exact = decode_logits(&file(WeightMode::F32), &tokens, 1, false);
        let dual = decode_logits(&file(WeightMode::Dual), &tokens, 1, false);
        let all_q4 = decode_logits(&file(WeightMode::Mix(Recipe::ALL_Q4)), &tokens, 1, false);
        assert!(
            all_q4
                .iter()
                .zip(&dual)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{}: an all-Q4 mix file does not decode as dual",
            src.display()
        );
        let (_, rel_dual) = diff(&dual, &exact);
        for (name, recipe) in [("attention", attention), ("kv+output", kv)] {
            let bytes = file(WeightMode::Mix(recipe));
            let v = Vqf::parse(&bytes).unwrap();
            for e in v.entries().filter(|e| e.copies & copies::DECODE != 0) {
                let part = match e.role {
                    Role::AttnQkv => Some(RecipePart::AttnQ),
                    Role::AttnQ => Some(RecipePart::AttnQ),
                    Role::AttnK => Some(RecipePart::AttnK),
                    Role::AttnV => Some(RecipePart::AttnV),
                    Role::AttnOutput => Some(RecipePart::AttnOutput),
                    Role::FfnGateUp => Some(RecipePart::FfnGateUp),
                    Role::FfnDown => Some(RecipePart::FfnDown),
                    Role::Output => Some(RecipePart::Output),
                    _ => None,
                };
                let Some(part) = part else { continue };
                let want = if recipe.keeps_q8(part) {
                    Layout::Q8_0x8
                } else {
                    Layout::Q4_0x4
                };
                assert_eq!(e.layout, want, "{}: {} {name}", src.display(), e.name_str());
            }
            let split = v.entries().any(|e| e.role == Role::AttnQ);
            assert_eq!(split, name == "kv+output", "{}: {name}", src.display());
            let stepped = decode_logits(&bytes, &tokens, 1, false);
            let batched = decode_logits(&bytes, &tokens, 5, false);
            assert!(
                stepped
                    .iter()
                    .zip(&batched)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{}: {name}: batched and stepped runs differ",
                src.display()
            );
            // `small`: the decode copy alone, which prompts read too: the
            // mix file's decode-copy logits bit for bit, batched or not.
            let small = file(WeightMode::Small(recipe));
            assert!(small.len() < bytes.len(), "{}: {name}", src.display());
            for batch in [1, 5] {
                let got = decode_logits(&small, &tokens, batch, true);
                assert!(
                    got.iter()
                        .zip(&stepped)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{}: {name}: the small file differs from mix's decode copy (batch {batch})",
                    src.display()
                );
            }
            let (_, rel) = diff(&stepped, &exact);
            println!(
                "{}: {name}: decode copy rel L2 vs f32 {rel:.2e} (dual {rel_dual:.2e})",
                src.display()
            );
            assert!(
                rel < rel_dual,
                "{}: {name}: {rel} >= dual {rel_dual}",
                src.display()
            );
        }
    }
}

/// A recipe part limited to the first and last N layers (`PART@endsN`)
/// keeps those layers in Q8_0 and the others in Q4_0; the lm_head ignores
/// the limit.
#[test]
fn a_recipe_can_keep_only_the_end_layers() {
    use kestrel_core::convert::{Recipe, RecipePart, SourcePlan};
    let r = Recipe::ALL_Q4
        .with_q8_ends(RecipePart::FfnDown, 2)
        .with_q8_ends(RecipePart::AttnV, 1)
        .with_q8_ends(RecipePart::Output, 3);
    let layers = 8;
    for layer in 0..8u16 {
        let down = r.plan(Role::FfnDown, layer, layers);
        let end2 = !(2..6).contains(&layer);
        assert_eq!(
            down,
            if end2 {
                SourcePlan::Shared
            } else {
                SourcePlan::Decode(Layout::Q4_0x4)
            },
            "ffn_down layer {layer}"
        );
        let qkv = r.plan(Role::AttnQkv, layer, layers);
        let end1 = layer == 0 || layer == 7;
        assert_eq!(
            qkv,
            if end1 {
                SourcePlan::Split([
                    Layout::Q4_0x4,
                    Layout::Q4_0x4,
                    Layout::Q8_0x8,
                    Layout::Q4_0x4,
                ])
            } else {
                SourcePlan::Decode(Layout::Q4_0x4)
            },
            "attn_qkv layer {layer}"
        );
        assert_eq!(
            r.plan(Role::FfnGateUp, layer, layers),
            SourcePlan::Decode(Layout::Q4_0x4)
        );
    }
    assert_eq!(r.plan(Role::Output, 0xFFFF, layers), SourcePlan::Shared);
    // The default recipe (docs/benchmarks.md, "Recipes").
    let d = Recipe::DEFAULT;
    for (part, q8) in [
        (RecipePart::Output, false),
        (RecipePart::AttnQ, false),
        (RecipePart::AttnK, true),
        (RecipePart::AttnV, true),
        (RecipePart::AttnOutput, true),
        (RecipePart::FfnGateUp, false),
        (RecipePart::FfnDown, true),
    ] {
        assert_eq!(d.keeps_q8(part), q8, "{}", part.name());
    }
    assert!(d.keeps_q8_in(RecipePart::FfnDown, 7, layers));
    assert!(!d.keeps_q8_in(RecipePart::FfnDown, 3, layers));
    // With every layer (N = 0) the plan does not depend on the layer.
    let all = Recipe::ALL_Q4.with_q8(RecipePart::FfnDown);
    assert!((0..8).all(|l| all.plan(Role::FfnDown, l, layers) == SourcePlan::Shared));
}

/// A `source` or `exact` file of a quantized GGUF keeps `token_embd` as
/// the GGUF holds it (flag EMB_BLOCKS; its bytes unchanged) and a token's
/// row is ggml's dequantization of the GGUF row, bit for bit; a float
/// embedding, and every other mode, stays F16.
#[test]
fn the_embedding_keeps_the_source_blocks_and_their_values() {
    use kestrel_core::gguf::{dequantize_row, GgmlType};
    let dir = temp_dir("source-embedding");
    let mut kept = 0usize;
    for src in own_fixtures() {
        let gbytes = std::fs::read(&src).unwrap();
        let g = Gguf::parse(&gbytes).unwrap();
        let t = g.tensor("token_embd.weight").unwrap();
        let quantized = !matches!(
            t.ggml_type(),
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16
        );
        for mode in [WeightMode::Source, WeightMode::Exact, WeightMode::Dual] {
            let out = dir.join(format!("{}.vqf", mode.name()));
            convert(&src, &out, mode, None, false)
                .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            let bytes = std::fs::read(&out).unwrap();
            let v = Vqf::parse(&bytes).unwrap();
            let f = v.header().flags;
            let e = v.entries().find(|e| e.role == Role::TokenEmbd).unwrap();
            let what = format!("{} {}", src.display(), mode.name());
            if !(quantized && mode != WeightMode::Dual) {
                assert_eq!(
                    f & (flags::EMB_F16 | flags::EMB_BLOCKS),
                    flags::EMB_F16,
                    "{what}"
                );
                assert_eq!(e.layout, Layout::F16, "{what}");
                continue;
            }
            assert_eq!(
                f & (flags::EMB_F16 | flags::EMB_BLOCKS),
                flags::EMB_BLOCKS,
                "{what}"
            );
            assert_eq!(e.layout, Layout::GgufRows, "{what}");
            assert_eq!(e.block_type(), Some(t.ggml_type()), "{what}");
            assert_eq!(v.data(&e), t.data(), "{what}: not the GGUF's bytes");
            let w = kestrel_tests::weights(v, true).unwrap();
            let (vocab, h) = (w.cfg.vocab_size, w.cfg.hidden_size as usize);
            assert_eq!(w.embedding_row_bytes() as usize, t.row_bytes(), "{what}");
            let (mut got, mut want) = (vec![0f32; h], vec![0f32; h]);
            for id in [0, 1, vocab / 2, vocab - 1] {
                w.embedding_row(id, &mut got).unwrap();
                dequantize_row(t.ggml_type(), t.row(id as u64).unwrap(), &mut want).unwrap();
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{what}: row {id}");
            }
            assert!(w.embedding_row(vocab, &mut got).is_err(), "{what}");
            kept += 1;
        }
    }
    assert!(kept >= 16, "only {kept} embeddings kept as GGUF rows");
    println!("{kept} files keep the embedding as the GGUF's rows");
}
