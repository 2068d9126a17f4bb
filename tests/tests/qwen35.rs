//! Qwen3.5's Gated DeltaNet layers (`kestrel_core::model::deltanet`)
//! against transformers, layer by layer, on the dense and the MoE
//! fixtures (`tests/fixtures/dev_qwen35_{dense,moe}`, PROVENANCE.md): each linear layer
//! runs the reference's input to that layer (the hidden state after the
//! layer before it, or the embeddings) through its norm, projections,
//! convolution, gates, delta rule, gated norm, output projection and MLP,
//! token by token, and must give the reference's output and its final
//! convolution window and recurrent state. The gated full-attention
//! layers (3 and 7) are written out here in plain f32 (the architecture's
//! facts, checked before the forward carries them), and the whole model
//! gives the reference's logits. The MoE feed-forward (softmax router over
//! every expert, top-k renormalised, a shared expert scaled by a sigmoid
//! gate) chooses the reference's experts. The projections here are plain
//! f32 loops. Then the engine itself: both fixtures converted from their
//! Hugging Face folders give transformers' logits, bits independent of the
//! chunking and its greedy tokens; the recurrent state across turns, saved
//! and restored, and reused as the server reuses a cached prefix.

use kestrel::engine::EngineArgs;
use kestrel::generate::Session;
use kestrel::logits::logits;
use kestrel_core::convert::WeightMode;
use kestrel_core::generate::{prefill, reusable_prefix, Prefill};
use kestrel_core::model::deltanet::{
    conv_step, gated_norm, gates, head_step, normalize_qk, DeltaShape,
};
use kestrel_core::model::forward::{forward_rows, Row};
use kestrel_core::safetensors::SafeTensors;
use kestrel_core::sampler::SamplerConfig;
use kestrel_tests::{diff, fixtures, loader, read_npy, read_npy_f32, temp_dir};

const HIDDEN: usize = 160;
const TOKENS: usize = 40;
const VOCAB: usize = 600;
const ROPE_THETA: f64 = 1e7;
const EPS: f32 = 1e-6;

/// One fixture: its tensors (as f32, on demand) and shapes.
struct Weights {
    file: Vec<u8>,
    /// `dev_qwen35_dense` or `dev_qwen35_moe`.
    name: &'static str,
    /// The linear layers' mixer.
    shape: DeltaShape,
    /// Full attention: query heads (each with its gate), KV heads, head
    /// dimension; RoPE on a quarter of it (`partial_rotary_factor`).
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    /// MoE: experts, and how many each token takes.
    experts: Option<(usize, usize)>,
}

impl Weights {
    /// The dense fixture: 2 key / 6 value heads of 32 in the linear
    /// layers, 4/2 heads of 64 in the full ones, SwiGLU 384.
    fn dense() -> Weights {
        Weights::open("dev_qwen35_dense", 6, (4, 2, 64), None)
    }

    /// The MoE fixture: 2 key / 4 value heads of 32, 8/2 heads of 32, 8
    /// experts of 64 (top 2) and a shared expert of 96.
    fn moe() -> Weights {
        Weights::open("dev_qwen35_moe", 4, (8, 2, 32), Some((8, 2)))
    }

    fn open(
        name: &'static str,
        value_heads: usize,
        (heads, kv_heads, head_dim): (usize, usize, usize),
        experts: Option<(usize, usize)>,
    ) -> Weights {
        let path = fixtures().join(name).join("hf_bf16/model.safetensors");
        Weights {
            file: std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            name,
            shape: DeltaShape {
                key_heads: 2,
                value_heads,
                key_dim: 32,
                value_dim: 32,
                conv_kernel: 4,
                tiled: false,
            },
            heads,
            kv_heads,
            head_dim,
            experts,
        }
    }

    fn reference(&self, file: &str) -> (Vec<usize>, Vec<f32>) {
        read_npy_f32(&fixtures().join(self.name).join("ref").join(file))
    }

    /// The text model's tensor `name` (under `model.language_model.`).
    fn get(&self, name: &str) -> Vec<f32> {
        self.get_full(&format!("model.language_model.{name}"))
    }

    fn get_full(&self, name: &str) -> Vec<f32> {
        let st = SafeTensors::parse(&self.file).unwrap();
        let t = st
            .tensor(name)
            .unwrap_or_else(|| panic!("no tensor {name}"));
        let mut out = vec![0f32; t.numel()];
        t.to_f32(&mut out).unwrap();
        out
    }
}

/// `w` [rows, cols] times `x` [cols].
fn matvec(w: &[f32], x: &[f32]) -> Vec<f32> {
    w.chunks_exact(x.len())
        .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

/// Qwen3.5's zero-centred RMSNorm: `x / rms(x) * (1 + w)`.
fn norm(x: &[f32], w: &[f32]) -> Vec<f32> {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let r = 1.0 / (ms + EPS).sqrt();
    x.iter().zip(w).map(|(v, w)| v * r * (1.0 + w)).collect()
}

fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Largest |a - b| over the largest |b|.
fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    let scale = b.iter().map(|y| y.abs()).fold(0f32, f32::max).max(1e-6);
    diff / scale
}

/// A layer's output rows for `input` [tokens, HIDDEN] (token by token:
/// the recurrent rule has no chunked form yet, so a prompt in chunks runs
/// the same steps), the convolution window and recurrent state it ends
/// with (linear layers) and each token's experts (MoE).
struct LayerRun {
    out: Vec<f32>,
    window: Vec<f32>,
    state: Vec<f32>,
    /// Per token, the experts it took and their weights (MoE).
    chosen: Vec<Vec<(usize, f32)>>,
}

/// f32 values as the little-endian bytes a VQF file stores.
fn le_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn run_linear_layer(w: &Weights, layer: usize, input: &[f32]) -> LayerRun {
    let p = |n: &str| w.get(&format!("layers.{layer}.{n}"));
    let ln1 = p("input_layernorm.weight");
    let (qkv_w, z_w) = (
        p("linear_attn.in_proj_qkv.weight"),
        p("linear_attn.in_proj_z.weight"),
    );
    let (a_w, b_w) = (
        p("linear_attn.in_proj_a.weight"),
        p("linear_attn.in_proj_b.weight"),
    );
    let (conv_w, a_log, dt_bias) = (
        p("linear_attn.conv1d.weight"),
        p("linear_attn.A_log"),
        p("linear_attn.dt_bias"),
    );
    let (norm_w, out_w) = (
        p("linear_attn.norm.weight"),
        p("linear_attn.out_proj.weight"),
    );
    let shape = w.shape;
    assert_eq!(conv_w.len(), shape.conv_channels() * shape.conv_kernel);
    let kernels = kestrel_tests::detected_kernels();
    let mut window = vec![0f32; shape.window_len()];
    let mut state = vec![0f32; shape.state_len()];
    let (mut out, mut chosen) = (Vec::with_capacity(input.len()), vec![]);
    let key = shape.key_heads * shape.key_dim;
    for x in input.chunks_exact(HIDDEN) {
        let h = norm(x, &ln1);
        let mut qkv = matvec(&qkv_w, &h);
        let z = matvec(&z_w, &h);
        let (a, b) = (matvec(&a_w, &h), matvec(&b_w, &h));
        conv_step(&shape, &mut window, &le_bytes(&conv_w), &mut qkv);
        let heads = shape.value_heads;
        // [b | a] becomes [beta | g].
        let mut ba: Vec<f32> = b.iter().chain(&a).copied().collect();
        let rate: Vec<f32> = a_log.iter().map(|&x| -x.exp()).collect();
        gates(&mut ba, &le_bytes(&rate), &le_bytes(&dt_bias));
        let (beta, g) = ba.split_at(heads);
        let (q, rest) = qkv.split_at_mut(key);
        let (k, v) = rest.split_at_mut(key);
        let mut o = vec![0f32; shape.value_len()];
        // The rule per value head, as the forward's delta rows run it.
        normalize_qk(&shape, q, k);
        let (dk, dv) = (shape.key_dim, shape.value_dim);
        for h in 0..heads {
            let kh = shape.key_head_of(h);
            head_step(
                &kernels,
                &mut state[h * dk * dv..(h + 1) * dk * dv],
                &q[kh * dk..(kh + 1) * dk],
                &k[kh * dk..(kh + 1) * dk],
                &v[h * dv..(h + 1) * dv],
                g[h],
                beta[h],
                &mut o[h * dv..(h + 1) * dv],
            );
        }
        gated_norm(&shape, &mut o, &z, &le_bytes(&norm_w), EPS);
        let mixed = matvec(&out_w, &o);
        chosen.push(residual_and_ffn(w, layer, x, &mixed, &mut out));
    }
    LayerRun {
        out,
        window,
        state,
        chosen,
    }
}

/// A token's layer output after its mixer gave `mixed`: the residual `x +
/// mixed` through [`ffn_block`], appended to `out`; the experts it took.
fn residual_and_ffn(
    w: &Weights,
    layer: usize,
    x: &[f32],
    mixed: &[f32],
    out: &mut Vec<f32>,
) -> Vec<(usize, f32)> {
    let r: Vec<f32> = x.iter().zip(mixed).map(|(a, b)| a + b).collect();
    let (y, experts) = ffn_block(w, layer, &r);
    out.extend(y);
    experts
}

/// SwiGLU: `down(silu(gate(h)) * up(h))` of the matrices under `at`.
fn swiglu(w: &Weights, at: &str, h: &[f32]) -> Vec<f32> {
    let (gate, up) = (
        matvec(&w.get(&format!("{at}.gate_proj.weight")), h),
        matvec(&w.get(&format!("{at}.up_proj.weight")), h),
    );
    let act: Vec<f32> = gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
    matvec(&w.get(&format!("{at}.down_proj.weight")), &act)
}

/// The feed-forward block after a mixer: `r` (the residual after the
/// mixer) plus the MLP of its post-attention norm, and (MoE) the experts
/// the token took with their weights. MoE: a softmax over every expert's
/// router logit, the top k renormalised, their SwiGLUs weighted, plus the
/// shared expert times `sigmoid(shared_expert_gate(h))`.
fn ffn_block(w: &Weights, layer: usize, r: &[f32]) -> (Vec<f32>, Vec<(usize, f32)>) {
    let at = format!("layers.{layer}.mlp");
    let h = norm(
        r,
        &w.get(&format!("layers.{layer}.post_attention_layernorm.weight")),
    );
    let (down, chosen) = match w.experts {
        None => (swiglu(w, &at, &h), vec![]),
        Some((n, top)) => {
            let logits = matvec(&w.get(&format!("{at}.gate.weight")), &h);
            assert_eq!(logits.len(), n);
            let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
            let sum: f32 = e.iter().sum();
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| e[b].partial_cmp(&e[a]).unwrap().then(a.cmp(&b)));
            let picked: f32 = order[..top].iter().map(|&i| e[i] / sum).sum();
            let chosen: Vec<(usize, f32)> = order[..top]
                .iter()
                .map(|&i| (i, e[i] / sum / picked))
                .collect();
            let mut down = vec![0f32; HIDDEN];
            for &(i, weight) in &chosen {
                let y = swiglu(w, &format!("{at}.experts.{i}"), &h);
                down.iter_mut().zip(&y).for_each(|(d, v)| *d += weight * v);
            }
            let shared = swiglu(w, &format!("{at}.shared_expert"), &h);
            let gate = matvec(&w.get(&format!("{at}.shared_expert_gate.weight")), &h)[0];
            let g = 1.0 / (1.0 + (-gate).exp());
            down.iter_mut().zip(&shared).for_each(|(d, v)| *d += g * v);
            (down, chosen)
        }
    };
    (r.iter().zip(&down).map(|(a, b)| a + b).collect(), chosen)
}

/// A gated full-attention layer over `input` [TOKENS, HIDDEN] (positions
/// 0..): `q_proj` gives each head's query and then its gate; per-head
/// zero-centred q/k norms; RoPE on the first quarter of each head (text positions: the three M-RoPE sections agree), halves
/// rotated; causal softmax attention (query head `h` reads KV head `h /
/// 2`); the output times `sigmoid(gate)` into `o_proj`; then the MLP.
fn run_attention_layer(w: &Weights, layer: usize, input: &[f32]) -> LayerRun {
    let p = |n: &str| w.get(&format!("layers.{layer}.{n}"));
    let ln1 = p("input_layernorm.weight");
    let (q_w, k_w, v_w, o_w) = (
        p("self_attn.q_proj.weight"),
        p("self_attn.k_proj.weight"),
        p("self_attn.v_proj.weight"),
        p("self_attn.o_proj.weight"),
    );
    let (q_norm, k_norm) = (p("self_attn.q_norm.weight"), p("self_attn.k_norm.weight"));
    let (heads, kv_heads, head_dim) = (w.heads, w.kv_heads, w.head_dim);
    let rotary = head_dim / 4;
    let rope = |x: &mut [f32], pos: usize| {
        let half = rotary / 2;
        for i in 0..half {
            let inv = 1.0 / ROPE_THETA.powf(2.0 * i as f64 / rotary as f64);
            let angle = (pos as f64 * inv) as f32;
            let (sin, cos) = angle.sin_cos();
            let (a, b) = (x[i], x[i + half]);
            x[i] = a * cos - b * sin;
            x[i + half] = b * cos + a * sin;
        }
    };
    let (mut qs, mut gates, mut ks, mut vs) = (vec![], vec![], vec![], vec![]);
    for (pos, x) in input.chunks_exact(HIDDEN).enumerate() {
        let h = norm(x, &ln1);
        let q = matvec(&q_w, &h);
        let (k, v) = (matvec(&k_w, &h), matvec(&v_w, &h));
        for head in 0..heads {
            let at = head * 2 * head_dim;
            let mut qh = norm(&q[at..at + head_dim], &q_norm);
            rope(&mut qh, pos);
            qs.push(qh);
            gates.push(q[at + head_dim..at + 2 * head_dim].to_vec());
        }
        for head in 0..kv_heads {
            let mut kh = norm(&k[head * head_dim..(head + 1) * head_dim], &k_norm);
            rope(&mut kh, pos);
            ks.push(kh);
            vs.push(v[head * head_dim..(head + 1) * head_dim].to_vec());
        }
    }
    let scale = 1.0 / (head_dim as f32).sqrt();
    let (mut out, mut chosen) = (Vec::with_capacity(input.len()), vec![]);
    for (pos, x) in input.chunks_exact(HIDDEN).enumerate() {
        let mut attended = Vec::with_capacity(heads * head_dim);
        for head in 0..heads {
            let q = &qs[pos * heads + head];
            let kv = head / (heads / kv_heads);
            let scores: Vec<f32> = (0..=pos)
                .map(|j| {
                    let k = &ks[j * kv_heads + kv];
                    q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
                })
                .collect();
            let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f32 = e.iter().sum();
            let gate = &gates[pos * heads + head];
            for d in 0..head_dim {
                let v: f32 = (0..=pos)
                    .map(|j| e[j] / sum * vs[j * kv_heads + kv][d])
                    .sum();
                attended.push(v / (1.0 + (-gate[d]).exp()));
            }
        }
        let mixed = matvec(&o_w, &attended);
        chosen.push(residual_and_ffn(w, layer, x, &mixed, &mut out));
    }
    LayerRun {
        out,
        window: vec![],
        state: vec![],
        chosen,
    }
}

#[test]
fn attention_layers_and_the_whole_model_match_transformers() {
    for w in [Weights::dense(), Weights::moe()] {
        let (_, after) = w.reference("p40_hidden_after_layer.npy");
        let layer_rows = |l: usize| &after[l * TOKENS * HIDDEN..(l + 1) * TOKENS * HIDDEN];
        for layer in [3, 7] {
            let out = run_attention_layer(&w, layer, layer_rows(layer - 1)).out;
            let err = rel_err(&out, layer_rows(layer));
            eprintln!(
                "{} layer {layer} (attention): output error {err:.2e}",
                w.name
            );
            assert!(err < 2e-5, "{} layer {layer}: output error {err}", w.name);
        }
        // Every layer on the last one's output, the final (zero-centred)
        // norm, the lm_head: the reference's logits.
        let (_, mut x) = w.reference("p40_embeddings.npy");
        for layer in 0..8 {
            x = match layer % 4 {
                3 => run_attention_layer(&w, layer, &x).out,
                _ => run_linear_layer(&w, layer, &x).out,
            };
        }
        let (final_norm, head) = (w.get("norm.weight"), w.get_full("lm_head.weight"));
        let logits: Vec<f32> = x
            .chunks_exact(HIDDEN)
            .flat_map(|row| matvec(&head, &norm(row, &final_norm)))
            .collect();
        let (shape, want) = w.reference("logits_p40.npy");
        assert_eq!(shape, [TOKENS, VOCAB]);
        let max = logits
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        eprintln!("{} logits: max |diff| {max:.2e}", w.name);
        assert!(max <= 1e-3, "{} logits: max |diff| {max}", w.name);
    }
}

#[test]
fn linear_layers_and_their_states_match_transformers() {
    for w in [Weights::dense(), Weights::moe()] {
        let (shape, after) = w.reference("p40_hidden_after_layer.npy");
        assert_eq!(shape, [8, TOKENS, HIDDEN]);
        let (_, embeddings) = w.reference("p40_embeddings.npy");
        let layer_rows = |l: usize| &after[l * TOKENS * HIDDEN..(l + 1) * TOKENS * HIDDEN];
        for layer in [0, 1, 2, 4, 5, 6] {
            let input = match layer {
                0 => &embeddings[..],
                _ => layer_rows(layer - 1),
            };
            let whole = run_linear_layer(&w, layer, input);
            let err = rel_err(&whole.out, layer_rows(layer));
            eprintln!("{} layer {layer}: output error {err:.2e}", w.name);
            assert!(err < 2e-5, "{} layer {layer}: output error {err}", w.name);
            // The states it ends with (the dense fixture keeps them): the
            // window is the last 3 of the 4 inputs transformers keeps ([1,
            // channels, 4]).
            if w.experts.is_some() {
                continue;
            }
            let (_, conv) = w.reference(&format!("p40_state_L{layer}_conv.npy"));
            let c = w.shape.conv_channels();
            let want_window: Vec<f32> = (1..4)
                .flat_map(|t| (0..c).map(move |ch| (ch, t)))
                .map(|(ch, t)| conv[ch * 4 + t])
                .collect();
            let err = rel_err(&whole.window, &want_window);
            assert!(err < 2e-5, "layer {layer}: the window: error {err}");
            let (_, recurrent) = w.reference(&format!("p40_state_L{layer}_recurrent.npy"));
            let err = rel_err(&whole.state, &recurrent);
            assert!(err < 2e-5, "layer {layer}: recurrent state error {err}");
        }
    }
}

#[test]
fn moe_layers_choose_the_references_experts() {
    let w = Weights::moe();
    let (_, after) = w.reference("p40_hidden_after_layer.npy");
    let (_, embeddings) = w.reference("p40_embeddings.npy");
    let layer_rows = |l: usize| &after[l * TOKENS * HIDDEN..(l + 1) * TOKENS * HIDDEN];
    let dir = fixtures().join(w.name).join("ref");
    let (shape, experts) = read_npy(&dir.join("p40_router_topk_experts.npy"), "<i8");
    assert_eq!(shape, [8, TOKENS, 2]);
    let experts: Vec<i64> = experts
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let (_, weights) = w.reference("p40_router_topk_weights.npy");
    for layer in 0..8 {
        // The reference's input to the layer, through its mixer and router.
        let input = match layer {
            0 => &embeddings[..],
            _ => layer_rows(layer - 1),
        };
        let out = match layer % 4 {
            3 => run_attention_layer(&w, layer, input).chosen,
            _ => run_linear_layer(&w, layer, input).chosen,
        };
        for (t, chosen) in out.iter().enumerate() {
            let at = (layer * TOKENS + t) * 2;
            let got: Vec<i64> = chosen.iter().map(|&(i, _)| i as i64).collect();
            assert_eq!(got, experts[at..at + 2], "layer {layer} token {t}");
            for (k, &(_, weight)) in chosen.iter().enumerate() {
                let want = weights[at + k];
                assert!(
                    (weight - want).abs() < 1e-5,
                    "layer {layer} token {t}: {weight} {want}"
                );
            }
        }
    }
}

// --- The engine on the converted fixtures ---

/// A fixture's prompt `name` (`p1`, `p7`, `p40`) from ref.json: its ids
/// and transformers' 16 greedy tokens after it.
fn prompt(model: &str, name: &str) -> (Vec<u32>, Vec<u32>) {
    let doc = std::fs::read(fixtures().join(model).join("ref/ref.json")).unwrap();
    let root = kestrel_core::json::parse(&doc).unwrap();
    let p = root.get("prompts").and_then(|p| p.get(name)).unwrap();
    let ids = |key: &str| -> Vec<u32> {
        p.get(key)
            .and_then(|v| v.iter_array())
            .unwrap_or_else(|| panic!("{model} {name}: no {key}"))
            .map(|v| v.as_u64().unwrap() as u32)
            .collect()
    };
    (ids("token_ids"), ids("greedy_tokens"))
}

/// `model`'s Hugging Face folder converted in `mode` into `dir`.
fn converted(model: &str, dir: &std::path::Path, mode: WeightMode) -> std::path::PathBuf {
    converted_from(model, HF, dir, mode)
}

/// The fixture's Hugging Face folder, and the GGUF llama.cpp's converter
/// wrote of it (BF16, the same values; `gguf/PROVENANCE`).
const HF: &str = "hf_bf16";
const GGUF: &str = "gguf/model-bf16.gguf";

/// `model`'s `source` (`HF` or `GGUF`) converted in `mode` into `dir`.
fn converted_from(
    model: &str,
    source: &str,
    dir: &std::path::Path,
    mode: WeightMode,
) -> std::path::PathBuf {
    let kind = if source == HF { "hf" } else { "gguf" };
    let vqf = dir.join(format!("{model}-{kind}-{}.vqf", mode.name()));
    kestrel::convert::convert(
        &fixtures().join(model).join(source),
        &vqf,
        mode,
        None,
        false,
    )
    .unwrap();
    vqf
}

use kestrel_tests::engine_args as engine;

/// Both fixtures converted (f32) from their Hugging Face folders and from
/// the GGUF files llama.cpp's converter wrote of them (`qwen35`,
/// `qwen35moe`: value heads in its tiled order, `ssm_a` = `-exp(A_log)`,
/// norms with their `+ 1`), through `kestrel logits`: every row of the
/// 40-token prompt within 1e-3 of transformers' logits with the f32 KV
/// cache (relative L2 at most 2e-3 with f16), the same bits whether the
/// prompt runs in chunks of 40, 7 or 1 (the Gated DeltaNet rule runs token
/// by token in every chunking) and on 1, 2 or 3 threads (the value heads
/// split over them), and transformers' 16 greedy tokens after each of the
/// prompts p1, p7 and p40.
#[test]
fn converted_fixtures_match_transformers() {
    let dir = temp_dir("qwen35-convert");
    let models = ["dev_qwen35_dense", "dev_qwen35_moe"];
    for (model, source) in models.iter().flat_map(|m| [(*m, HF), (*m, GGUF)]) {
        let vqf = converted_from(model, source, &dir, WeightMode::F32);
        let (tokens, _) = prompt(model, "p40");
        let (_, want) = read_npy_f32(&fixtures().join(model).join("ref/logits_p40.npy"));
        let (rows, _) = logits(&vqf, &tokens, 0, 40, &engine(true)).unwrap();
        let (max, rel) = diff(&rows, &want);
        let model = format!("{model} from {source}");
        eprintln!("{model}: f32 KV max |diff| {max:.2e}, rel L2 {rel:.2e}");
        assert!(max <= 1e-3, "{model}: max |diff| {max}");
        for batch in [7, 1] {
            let (chunked, _) = logits(&vqf, &tokens, 0, batch, &engine(true)).unwrap();
            assert!(
                chunked
                    .iter()
                    .zip(&rows)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{model}: chunks of {batch} differ from one chunk"
            );
        }
        // The value heads split over 1, 2 (above) or 3 threads: the same bits.
        for threads in [1, 3] {
            let args = kestrel::engine::EngineArgs {
                threads: Some(threads),
                ..engine(true)
            };
            let (split, _) = logits(&vqf, &tokens, 0, 40, &args).unwrap();
            assert!(
                split
                    .iter()
                    .zip(&rows)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{model}: {threads} threads differ from 2"
            );
        }
        let (rows, _) = logits(&vqf, &tokens, 0, 40, &engine(false)).unwrap();
        let (max, rel) = diff(&rows, &want);
        eprintln!("{model}: f16 KV max |diff| {max:.2e}, rel L2 {rel:.2e}");
        assert!(rel <= 2e-3, "{model}: f16 KV rel L2 {rel}");
        for name in ["p1", "p7", "p40"] {
            let (ids, greedy) = prompt(&model[..model.find(' ').unwrap()], name);
            let (_, got) = logits(&vqf, &ids, greedy.len(), 32, &engine(true)).unwrap();
            assert_eq!(got, greedy, "{model} {name}: greedy tokens");
        }
    }
}

/// The Gated DeltaNet state across calls: a prompt fed in two turns is the
/// prompt fed in one, bit for bit; a state saved after 40 tokens and
/// restored into a new session goes on as the session that kept it; a
/// cached prefix the prefill keeps continues the state when the state
/// holds exactly that prefix, and runs again from the start when it holds
/// more (a recurrent state is not cut back); a step that would rewind it
/// is refused and leaves it as it was.
#[test]
fn the_recurrent_state_across_turns_saves_and_reuse() {
    let dir = temp_dir("qwen35-state");
    let vqf = converted("dev_qwen35_dense", &dir, WeightMode::F32);
    let model = loader::Model::open(&vqf).unwrap();
    let mut layers = Vec::new();
    let w = model.weights(true, &mut layers).unwrap();
    let (k, pool, opts) = loader::setup(&w, &engine(true), false, 32);
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let (tokens, _) = prompt("dev_qwen35_dense", "p40");
    let (more, _) = prompt("dev_qwen35_dense", "p7");
    let all: Vec<u32> = tokens.iter().chain(&more).copied().collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let mut arenas: Vec<Vec<u8>> = (0..3).map(|_| loader::arena(&w, &opts).unwrap()).collect();
    let [a0, a1, a2] = &mut arenas[..] else {
        unreachable!()
    };
    let session = |arena| {
        Session::new(
            &w,
            k,
            &pool,
            loader::state(&w, opts, arena).unwrap(),
            greedy,
        )
        .unwrap()
    };

    // One turn of 47 tokens; the same in turns of 23, 17 and 7.
    let mut whole = session(a0);
    whole.feed(&all).unwrap();
    let want = bits(whole.gen.last_logits());
    let mut turns = session(a1);
    for part in [&tokens[..23], &tokens[23..], &more[..]] {
        turns.feed(part).unwrap();
    }
    assert_eq!(bits(turns.gen.last_logits()), want, "turns");

    // Saved after 40 tokens, restored into a new session, then 7 more.
    turns.reset();
    turns.feed(&tokens).unwrap();
    let mut saved = vec![0u8; turns.gen.state_size(false).unwrap()];
    let n = turns.gen.save_state(false, &mut saved).unwrap();
    let mut restored = session(a2);
    restored.gen.restore_state(&saved[..n]).unwrap();
    restored.feed(&more).unwrap();
    assert_eq!(bits(restored.gen.last_logits()), want, "restored");

    // A rewind is refused, the state unchanged: the next token goes on.
    let rewind = [Row {
        slot: 0,
        pos: 10,
        token: 5,
        logits: true,
    }];
    let err = forward_rows(
        &w,
        &mut turns.gen.state,
        &k,
        &pool,
        &rewind,
        w.routing.decode,
        None,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            kestrel_core::Error::RecurrentState {
                pos: 10,
                holds: 40,
                ..
            }
        ),
        "{err}"
    );
    turns.feed(&more).unwrap();
    assert_eq!(
        bits(turns.gen.last_logits()),
        want,
        "after a refused rewind"
    );

    // Prefix reuse (the server's `reusable_prefix`): the state holds 47
    // tokens. A prompt that extends them keeps all 47 and runs only the
    // rest; one that shares only the first 30 keeps none (the state is not
    // cut back), and a prefill told to keep 30 anyway is refused. After an
    // answer of 5 tokens, a prompt that takes another turn there keeps the
    // 47 of the snapshot the prompt left (the turn's boundary).
    let longer: Vec<u32> = all.iter().chain(&tokens[..5]).copied().collect();
    let diverging: Vec<u32> = all[..30].iter().chain(&more).copied().collect();
    let vocab = w.cfg.vocab_size as usize;
    for (prompt, want_keep, answer) in [(&longer, 47, 0), (&diverging, 0, 0), (&longer, 47, 5)] {
        let mut arena = loader::arena(&w, &opts).unwrap();
        let state = loader::state(&w, opts, &mut arena).unwrap();
        let mut fresh = Session::new(&w, k, &pool, state, greedy).unwrap();
        fresh.feed(prompt).unwrap();
        let want = bits(fresh.gen.last_logits());
        drop(fresh);
        let state = loader::state(&w, opts, &mut arena).unwrap();
        let mut s = Session::new(&w, k, &pool, state, greedy).unwrap();
        let no = std::sync::atomic::AtomicBool::new(false);
        s.generate(&all, answer, &no, &mut |_| {}).unwrap();
        let state = &s.gen.state;
        assert_eq!(state.snapshot_pos[0], 47);
        assert_eq!(state.recurrent_pos[0], 47 + answer);
        let holds = Some((state.recurrent_pos[0], state.snapshot_pos[0]));
        let cached = s.history().to_vec();
        let copies = vec![w.routing.decode; cached.len()];
        let keep = reusable_prefix(&w.routing, 32, &cached, &copies, usize::MAX, prompt, holds);
        assert_eq!(keep, want_keep, "answer of {answer}");
        let plan = |keep| Prefill {
            slot: 0,
            base: 0,
            prompt,
            keep,
            chunk: 32,
            images: None,
            interrupt: None,
        };
        if keep == 0 {
            let err = prefill(
                &w,
                &mut s.gen.state,
                &k,
                &pool,
                &mut plan(30),
                &mut |_, _| {},
            );
            assert!(matches!(
                err,
                Err(kestrel_core::Error::RecurrentState { pos: 30, .. })
            ));
        }
        let mut starts = Vec::new();
        let at = prefill(
            &w,
            &mut s.gen.state,
            &k,
            &pool,
            &mut plan(keep),
            &mut |c, _| starts.push(c.start),
        )
        .unwrap();
        assert_eq!(starts[0], keep, "the first row run");
        assert_eq!(
            bits(&s.gen.state.logits[at..at + vocab]),
            want,
            "keep {keep}"
        );
    }
}

/// The mixed files (`mix`, `small`: Q4 queries, Q8 keys and values by the
/// default recipe) store gated attention's QKV in its four parts (Q, K, V,
/// the gate rows after V, as the fused QKV holds them), each in its
/// recipe's type, and their decode copy gives logits near transformers'
/// (this random fixture does not take Q4 well: its emulated Q4 weights
/// alone are 0.99 away in relative L2; a QKV whose gate rows are not where
/// the forward reads them is not near at all).
#[test]
fn mixed_files_split_the_gated_qkv() {
    use kestrel_core::convert::Recipe;
    use kestrel_core::quant::repack::Layout;
    use kestrel_core::tensors::Role;
    let dir = temp_dir("qwen35-mixed");
    let (tokens, _) = prompt("dev_qwen35_dense", "p40");
    let (_, want) = read_npy_f32(&fixtures().join("dev_qwen35_dense/ref/logits_p40.npy"));
    for mode in [
        WeightMode::Mix(Recipe::DEFAULT),
        WeightMode::Small(Recipe::DEFAULT),
    ] {
        let vqf = converted("dev_qwen35_dense", &dir, mode);
        let bytes = std::fs::read(&vqf).unwrap();
        let v = kestrel_core::vqf::Vqf::parse(&bytes).unwrap();
        for layer in [3u16, 7] {
            let part = |role| {
                let e = v
                    .entries()
                    .find(|e| e.layer == layer && e.role == role)
                    .unwrap_or_else(|| panic!("{} layer {layer}: no {role:?}", mode.name()));
                (e.shape[0], e.layout)
            };
            assert_eq!(part(Role::AttnQ), (256, Layout::Q4_0x4));
            assert_eq!(part(Role::AttnK), (128, Layout::Q8_0x8));
            assert_eq!(part(Role::AttnV), (128, Layout::Q8_0x8));
            assert_eq!(part(Role::AttnGate), (256, Layout::Q4_0x4));
        }
        // One token a step: the decode copy.
        let (rows, _) = logits(&vqf, &tokens, 0, 1, &engine(true)).unwrap();
        let (_, rel) = diff(&rows, &want);
        eprintln!("{}: decode copy rel L2 {rel:.3}", mode.name());
        assert!(rel < 0.8, "{}: rel L2 {rel}", mode.name());
    }
}

/// The context policy that drops the oldest turns (`kestrel chat --keep`,
/// the C ABI's `DROP_OLDEST`) on Qwen3.5: the kept first tokens run again
/// with the kept turns (the state is not cut back), so the next logits are
/// a fresh feed's of what was kept; a feed cancelled before its step
/// leaves the state as it was.
#[test]
fn dropped_turns_and_a_cancelled_feed() {
    use std::sync::atomic::AtomicBool;
    let dir = temp_dir("qwen35-room");
    let vqf = converted("dev_qwen35_dense", &dir, WeightMode::F32);
    let model = loader::Model::open(&vqf).unwrap();
    let mut layers = Vec::new();
    let w = model.weights(true, &mut layers).unwrap();
    let args = EngineArgs {
        ctx: Some(96),
        ..engine(true)
    };
    let (k, pool, opts) = loader::setup(&w, &args, false, 32);
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let (tokens, _) = prompt("dev_qwen35_dense", "p40");
    let (more, _) = prompt("dev_qwen35_dense", "p7");
    let mut arena = loader::arena(&w, &opts).unwrap();
    let state = loader::state(&w, opts, &mut arena).unwrap();
    let mut s = Session::new(&w, k, &pool, state, greedy).unwrap();
    s.feed(&tokens).unwrap();
    // Room for 60 more keeping the first 8: the prompt is one turn (no
    // `<|im_start|>` after its first token), so all of it after them goes.
    let dropped = s.gen.make_room(60, 8).unwrap();
    let kept = s.history().to_vec();
    assert_eq!((kept.len(), dropped), (8, 32));
    assert_eq!(&kept[..8], &tokens[..8]);
    s.feed(&more).unwrap();
    let got: Vec<u32> = s.gen.last_logits().iter().map(|x| x.to_bits()).collect();
    let mut arena2 = loader::arena(&w, &opts).unwrap();
    let state = loader::state(&w, opts, &mut arena2).unwrap();
    let mut fresh = Session::new(&w, k, &pool, state, greedy).unwrap();
    fresh.feed(&[&kept[..], &more[..]].concat()).unwrap();
    let want: Vec<u32> = fresh
        .gen
        .last_logits()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(got, want, "after dropping {dropped} tokens");

    // A cancel seen before the step: nothing ran, the state goes on.
    let holds = fresh.gen.state.recurrent_pos[0];
    let stop = AtomicBool::new(true);
    let n = fresh.history().len();
    let mut p = Prefill {
        slot: 0,
        base: n,
        prompt: &more,
        keep: 0,
        chunk: 32,
        images: None,
        interrupt: Some(&stop),
    };
    let r = prefill(&w, &mut fresh.gen.state, &k, &pool, &mut p, &mut |_, _| {});
    assert!(matches!(r, Err(kestrel_core::Error::Cancelled)));
    assert_eq!(fresh.gen.state.recurrent_pos[0], holds);
}

/// llama.cpp's Qwen3.5 GGUF metadata that disagrees with itself is refused
/// by name: a `recurrent_layers` entry that `full_attention_interval`
/// contradicts, and a Qwen3.5-MoE file without its shared expert's width
/// (its `*_shexp` tensors would be left out).
#[test]
fn qwen35_gguf_metadata_is_checked() {
    let dir = temp_dir("qwen35-gguf-meta");
    let patched = |model: &str, name: &str, patch: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = std::fs::read(fixtures().join(model).join(GGUF)).unwrap();
        patch(&mut bytes);
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = dir.join(format!("{name}.vqf"));
        kestrel::convert::convert(&path, &out, WeightMode::F32, None, false)
            .err()
            .map(|e| e.to_string())
    };
    let find = |bytes: &[u8], what: &[u8]| {
        bytes
            .windows(what.len())
            .position(|w| w == what)
            .unwrap_or_else(|| panic!("{} not in the fixture", String::from_utf8_lossy(what)))
    };
    // The array: key, type 9 (array), element type 7 (bool), count 8, then
    // one byte a layer; layer 0 made a full-attention layer.
    let key = b"qwen35.attention.recurrent_layers";
    let err = patched("dev_qwen35_dense", "layers.gguf", &|b| {
        let at = find(b, key) + key.len() + 4 + 4 + 8;
        assert_eq!(b[at], 1, "layer 0 is recurrent in the fixture");
        b[at] = 0;
    });
    let err = err.expect("a contradicted recurrent layer was accepted");
    assert!(err.contains("recurrent_layers: layer 0"), "{err}");
    let key = b"qwen35moe.expert_shared_feed_forward_length";
    let err = patched("dev_qwen35_moe", "shared.gguf", &|b| {
        let at = find(b, key);
        b[at + key.len() - 1] = b'X';
    });
    let err = err.expect("a Qwen3.5-MoE file without its shared expert's width was accepted");
    assert!(
        err.contains("expert_shared_feed_forward_length missing"),
        "{err}"
    );
    assert!(patched("dev_qwen35_dense", "same.gguf", &|_| {}).is_none());
}

/// `model`'s BF16 GGUF with the mmproj file llama.cpp's `--mmproj` wrote
/// of its vision tower, converted (f32) into `dir`.
fn converted_with_mmproj(model: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let vqf = dir.join(format!("{model}-gguf-mmproj.vqf"));
    let mmproj = fixtures().join(model).join("gguf/mmproj-bf16.gguf");
    kestrel::convert::convert_model(
        &fixtures().join(model).join(GGUF),
        &vqf,
        WeightMode::F32,
        kestrel::convert::Quantize::default(),
        None,
        false,
        // The checkpoint's preprocessor allows 4 image tokens at least;
        // llama.cpp's default for this tower is 8.
        kestrel::convert::Tower::Mmproj(
            &mmproj,
            kestrel::convert::gguf::ImageTokens {
                min: Some(4),
                max: None,
            },
        ),
    )
    .unwrap();
    vqf
}

/// Qwen3.5's vision tower (Qwen3-VL's without DeepStack) and its
/// interleaved M-RoPE over the rotary quarter of head_dim, on both
/// fixtures converted with the tower from their Hugging Face folders and
/// from llama.cpp's GGUF and mmproj files: the path a user takes (the PNG decoded, patchified, encoded, its
/// placeholder expanded to the image's 4 tokens, the prompt fed in chunks
/// of 8 so the image straddles two, then greedy decode) gives
/// transformers' logits for every prompt row and every greedy step within
/// 1e-3 and its 16 greedy tokens; one chunk gives the same bits.
#[test]
fn image_prompts_match_transformers() {
    use kestrel::logits::logits_with_images;
    const IMAGE_PAD: u32 = 524;
    let dir = temp_dir("qwen35-image");
    let png = fixtures().join("dev_qwen35_dense/image/test_image_64x64.png");
    let models = ["dev_qwen35_dense", "dev_qwen35_moe"];
    for (model, source) in models.iter().flat_map(|m| [(*m, HF), (*m, GGUF)]) {
        let vqf = match source {
            HF => converted(model, &dir, WeightMode::F32),
            _ => converted_with_mmproj(model, &dir),
        };
        let file = std::fs::read(&vqf).unwrap();
        let parsed = kestrel_core::vqf::Vqf::parse(&file).unwrap();
        let cfg = parsed.config();
        let v = cfg.vision.expect("the tower is converted by default");
        assert!(v.deepstack().is_empty(), "{model}: no DeepStack");
        let sections: u32 = cfg.mrope_section.iter().sum();
        assert_eq!(sections, cfg.rotary_dim / 2, "{model}: M-RoPE sections");
        let doc = std::fs::read(fixtures().join(model).join("ref/ref.json")).unwrap();
        let root = kestrel_core::json::parse(&doc).unwrap();
        let image = root.get("image").unwrap();
        let ids = |key: &str| -> Vec<u32> {
            image
                .get(key)
                .and_then(|v| v.iter_array())
                .unwrap()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect()
        };
        let (expanded, greedy) = (ids("token_ids"), ids("greedy_tokens"));
        // The prompt as a user writes it: one placeholder for the image.
        let mut short: Vec<u32> = Vec::new();
        for &t in &expanded {
            if t != IMAGE_PAD || short.last() != Some(&IMAGE_PAD) {
                short.push(t);
            }
        }
        let run = |batch: usize| {
            logits_with_images(
                &vqf,
                &short,
                std::slice::from_ref(&png),
                None,
                greedy.len(),
                batch,
                &engine(true),
            )
            .unwrap()
        };
        let (rows, generated, tokens) = run(8);
        assert_eq!(tokens, expanded, "{model}: the expanded prompt");
        assert_eq!(generated, greedy, "{model}: greedy tokens");
        let (_, prompt_rows) = read_npy_f32(&fixtures().join(model).join("ref/image_logits.npy"));
        let (_, steps) = read_npy_f32(&fixtures().join(model).join("ref/image_greedy_logits.npy"));
        // Step i's logits chose greedy token i: step 0 is the prompt's last
        // row; the rows after the prompt are steps 1.. (the last token fed
        // has no step in the reference).
        let mut want = prompt_rows.clone();
        want.extend_from_slice(&steps[VOCAB..]);
        let got = &rows[..want.len()];
        let (max, rel) = diff(got, &want);
        let label = format!("{model} from {source}");
        eprintln!("{label} image prompt: max |diff| {max:.2e}, rel L2 {rel:.2e}");
        assert!(max <= 1e-3, "{label}: image prompt max |diff| {max}");
        let (whole, _, _) = run(64);
        assert!(
            whole
                .iter()
                .zip(&rows)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{model}: one chunk differs from chunks of 8"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Below the logits: the tower's output for the reference's 16 patches
/// (4 merged rows) and the prompt's M-RoPE positions (the image's 2x2
/// tokens at t 6, rows and columns 6-7; the text after it at 8, a rope
/// delta of -2), for both fixtures.
#[test]
fn vision_tower_and_image_positions_match_transformers() {
    use kestrel_core::model::linear::Exec;
    use kestrel_core::model::vision::{
        encode_image, mrope_positions, Patches, VisionArenaSizes, VisionState,
    };
    use kestrel_core::parallel::Serial;
    use kestrel_core::state::KvType;
    let dir = temp_dir("qwen35-tower");
    for model in ["dev_qwen35_dense", "dev_qwen35_moe"] {
        let vqf = converted(model, &dir, WeightMode::F32);
        let file = std::fs::read(&vqf).unwrap();
        let w =
            kestrel_tests::weights(kestrel_core::vqf::Vqf::parse(&file).unwrap(), true).unwrap();
        let v = w.cfg.vision.unwrap();
        let at = |f: &str| fixtures().join(model).join("ref").join(f);
        let (shape, pixels) = read_npy_f32(&at("image_pixel_values.npy"));
        assert_eq!(shape, [16, v.patch_values()], "{model}: patches");
        let layout = VisionArenaSizes::new(&v, 16, KvType::F32, 1).unwrap();
        let mut arena = vec![0u8; layout.total];
        let mut s = VisionState::new(layout, &mut arena).unwrap();
        let mut embeds = vec![0f32; 4 * HIDDEN];
        let k = kestrel_tests::detected_kernels();
        let cx = Exec {
            kernels: &k,
            pool: &Serial,
        };
        let image = Patches {
            values: &pixels,
            grid_h: 4,
            grid_w: 4,
        };
        encode_image(&w, &mut s, &cx, image, &mut embeds, &mut []).unwrap();
        let (_, want) = read_npy_f32(&at("image_embeds.npy"));
        let (max, rel) = diff(&embeds, &want);
        eprintln!("{model} tower: max |diff| {max:.2e}, rel L2 {rel:.2e}");
        assert!(max <= 1e-4, "{model}: tower max |diff| {max}");
        // The positions of the expanded prompt.
        let doc = std::fs::read(at("ref.json")).unwrap();
        let root = kestrel_core::json::parse(&doc).unwrap();
        let prompt: Vec<u32> = root
            .get("image")
            .and_then(|i| i.get("token_ids"))
            .and_then(|v| v.iter_array())
            .unwrap()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let n = prompt.len();
        let (mut pos, mut rows) = (vec![[0u32; 3]; n], vec![0u32; n]);
        let delta =
            mrope_positions(&prompt, v.image_token_id, &[(2, 2)], &mut pos, &mut rows).unwrap();
        let want = kestrel_tests::read_npy_i64(&at("image_position_ids.npy"));
        for (t, p) in pos.iter().enumerate() {
            for axis in 0..3 {
                assert_eq!(
                    p[axis] as i64,
                    want[axis * n + t],
                    "{model} row {t} axis {axis}"
                );
            }
        }
        assert_eq!(delta, -2, "{model}: rope delta");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Speculative decoding on the hybrid layers: a verify step records its
/// rows, and when the sampler drops drafts the Gated DeltaNet states go
/// back to the kept rows (the states before the step, the kept rows
/// replayed). On both fixtures, greedy and sampled (same seed), prompt
/// lookup (8 and 3 drafts) and a prediction (the plain answer's first
/// half, then noise) give plain decoding's tokens, leave the windows and
/// states plain decoding leaves, bit for bit, with drafts both kept and
/// dropped; and a follow-up turn after the speculative answer runs only
/// its own tokens and gives plain decoding's next logits.
#[test]
fn speculative_answers_equal_plain_decoding() {
    use kestrel::engine::{self, Need};
    use kestrel::generate::SpecArgs;
    use kestrel_core::speculate::{Adaptive, Lookup, SpecStats, Speculation};
    use std::sync::atomic::AtomicBool;
    struct Run {
        ids: Vec<u32>,
        stats: SpecStats,
        states: Vec<u32>,
        next: Vec<u32>,
    }
    let dir = temp_dir("qwen35-speculate");
    let run = |vqf: &std::path::Path,
               sample: SamplerConfig,
               prompt: &[u32],
               lookup: Option<usize>,
               prediction: Option<&[u32]>| {
        let spec = SpecArgs {
            lookup: lookup.is_some(),
            draft: None,
            draft_max: lookup.unwrap_or(8),
        };
        let need = Need {
            draft: 8,
            ..Need::one(32)
        };
        engine::open(vqf, &engine(true), need, None, |e| {
            let mut s = Session::of_model(e, sample, &spec).unwrap();
            let no = AtomicBool::new(false);
            let stats = match prediction {
                Some(p) => {
                    s.feed(prompt).unwrap();
                    let mut lookup = Lookup::with_prediction(p);
                    let mut spec_state = Speculation {
                        drafter: &mut lookup,
                        length: Adaptive::new(8),
                    };
                    let mut counts = SpecStats::default();
                    s.gen
                        .decode_speculative(
                            40,
                            &no,
                            &mut |_| {},
                            None,
                            &mut spec_state,
                            &mut counts,
                        )
                        .unwrap();
                    counts
                }
                None => s.generate(prompt, 40, &no, &mut |_| {}).unwrap().spec,
            };
            let st = &s.gen.state;
            assert_eq!(
                st.recurrent_pos[0],
                s.history().len(),
                "the states hold the history"
            );
            let states = st
                .conv_windows
                .iter()
                .chain(st.recurrent.iter())
                .map(|x| x.to_bits())
                .collect();
            let ids = s.history()[prompt.len()..].to_vec();
            // A follow-up turn: only its tokens run.
            let before = s.gen.state.pos;
            let more = [7u32, 8, 9];
            s.feed(&more).unwrap();
            let logits = s.gen.last_logits();
            assert_eq!(s.gen.state.pos, before + more.len());
            assert_eq!(
                s.gen.state.verify[0],
                (0, 0),
                "a prompt chunk of 3 rows is not recorded as a verify step"
            );
            Ok(Run {
                ids,
                stats,
                states,
                next: logits.iter().map(|x| x.to_bits()).collect(),
            })
        })
        .unwrap()
    };
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    };
    let sampled = SamplerConfig {
        temperature: 0.9,
        top_k: 20,
        top_p: 0.95,
        seed: 7,
        ..SamplerConfig::default()
    };
    let (mut kept, mut dropped) = (0, 0);
    for model in ["dev_qwen35_dense", "dev_qwen35_moe"] {
        let vqf = converted(model, &dir, WeightMode::F32);
        let (p40, _) = prompt(model, "p40");
        let twice = [p40.clone(), p40].concat();
        for sample in [greedy, sampled] {
            let plain = run(&vqf, sample, &twice, None, None);
            assert_eq!(plain.stats, SpecStats::default());
            let mut pred = plain.ids[..20].to_vec();
            pred.extend([5u32, 6, 7, 8]);
            for (what, lookup, prediction) in [
                ("lookup 8", Some(8), None),
                ("lookup 3", Some(3), None),
                ("prediction", None, Some(&pred[..])),
            ] {
                let s = run(&vqf, sample, &twice, lookup, prediction);
                let what = format!("{model} {what} t={}", sample.temperature);
                assert_eq!(s.ids, plain.ids, "{what}: tokens");
                assert!(s.states == plain.states, "{what}: windows and states");
                assert!(s.next == plain.next, "{what}: the follow-up's logits");
                kept += s.stats.accepted;
                dropped += s.stats.drafted - s.stats.accepted;
                eprintln!("{what}: {:?}", s.stats);
            }
        }
    }
    assert!(kept > 0 && dropped > 0, "kept {kept}, dropped {dropped}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kestrel convert --fit` on Qwen3.5: the plan takes every matrix (a
/// Gated DeltaNet layer's q|k|v, z and output projection, gated attention's
/// Q with its gate rows, a MoE layer's shared expert), the file is within
/// the budget with DeltaNet matrices in fewer bits than Q8_0, and it runs.
/// These random fixtures take 4 bits badly (an all-Q4 file is 1.0 away
/// from transformers in relative L2): only the dense file at a budget
/// that leaves most matrices in Q8_0 is held near transformers' logits,
/// by the `mix` files' bound.
#[test]
fn fit_plans_every_qwen35_matrix() {
    use kestrel::cli::CommandArgs;
    use kestrel_core::quant::repack::Layout;
    use kestrel_core::tensors::Role;
    let dir = temp_dir("qwen35-fit");
    for (model, budget, bound) in [
        ("dev_qwen35_dense", 2_000_000u64, None),
        ("dev_qwen35_dense", 2_700_000, Some(0.8)),
        ("dev_qwen35_moe", 2_100_000, None),
    ] {
        let hf = fixtures().join(model).join("hf_bf16");
        let out = dir.join(format!("{model}-fit.vqf"));
        let argv: Vec<String> = [
            hf.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--fit",
            &budget.to_string(),
            "--text-only",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        kestrel::convert::run(&kestrel::convert::ConvertArgs::parse(&argv).unwrap()).unwrap();
        let bytes = std::fs::read(&out).unwrap();
        assert!(
            bytes.len() as u64 <= budget,
            "{model}: {} bytes",
            bytes.len()
        );
        let v = kestrel_core::vqf::Vqf::parse(&bytes).unwrap();
        let below_q8 = |roles: &[Role]| {
            v.entries()
                .filter(|e| roles.contains(&e.role) && e.layout != Layout::Q8_0x8)
                .count()
        };
        let delta = below_q8(&[Role::LinQkvz, Role::LinQkv, Role::LinZ, Role::LinOut]);
        assert!(
            delta > 0,
            "{model} --fit {budget}: every DeltaNet matrix in Q8_0"
        );
        if v.config().moe.is_some() {
            let shared = below_q8(&[Role::FfnGateUpShexp, Role::FfnDownShexp]);
            assert!(
                shared > 0,
                "{model} --fit {budget}: every shared expert in Q8_0"
            );
        }
        let (tokens, _) = prompt(model, "p40");
        let (_, want) = read_npy_f32(&fixtures().join(model).join("ref/logits_p40.npy"));
        let (rows, _) = logits(&out, &tokens, 0, 1, &engine(true)).unwrap();
        assert!(rows.iter().all(|x| x.is_finite()), "{model}");
        let (_, rel) = diff(&rows, &want);
        eprintln!(
            "{model} --fit {budget}: {} bytes, {delta} DeltaNet matrices below Q8_0, decode copy rel L2 {rel:.3}",
            bytes.len()
        );
        if let Some(bound) = bound {
            assert!(rel < bound, "{model}: rel L2 {rel}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
