//! Qwen3.5's Gated DeltaNet layers (`kestrel_core::model::deltanet`)
//! against transformers, layer by layer, on the dense fixture
//! (`tests/fixtures/dev_qwen35_dense`, PROVENANCE.md): each linear layer
//! runs the reference's input to that layer (the hidden state after the
//! layer before it, or the embeddings) through its norm, projections,
//! convolution, gates, delta rule, gated norm, output projection and MLP,
//! token by token, and must give the reference's output and its final
//! convolution window and recurrent state. The gated full-attention
//! layers (3 and 7) are written out here in plain f32 (the architecture's
//! facts, checked before the forward carries them), and the whole model
//! gives the reference's logits. The projections here are plain f32 loops
//! (the forward will use the matrix layouts).

use kestrel_core::model::deltanet::{conv_step, delta_step, gated_norm, gates, DeltaShape};
use kestrel_core::safetensors::SafeTensors;
use kestrel_tests::{fixtures, read_npy_f32};

const HIDDEN: usize = 160;
const TOKENS: usize = 40;
const VOCAB: usize = 600;
/// Full attention: 4 query heads (each with its gate), 2 KV heads, of 64.
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = 64;
/// Rotated dimensions: a quarter of the head (`partial_rotary_factor`).
const ROTARY: usize = 16;
const ROPE_THETA: f64 = 1e7;
const FFN: usize = 384;
const EPS: f32 = 1e-6;
const SHAPE: DeltaShape = DeltaShape {
    key_heads: 2,
    value_heads: 6,
    key_dim: 32,
    value_dim: 32,
    conv_kernel: 4,
};

/// The fixture's tensors as f32.
struct Weights {
    file: Vec<u8>,
}

impl Weights {
    fn open() -> Weights {
        let path = fixtures().join("dev_qwen35_dense/hf_bf16/model.safetensors");
        Weights {
            file: std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        }
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

/// The final states of layer `layer` after `tokens` rows of `input`
/// [tokens, HIDDEN], fed in chunks of the sizes `chunks` (summing to the
/// rows), and its output rows.
struct LayerRun {
    out: Vec<f32>,
    window: Vec<f32>,
    state: Vec<f32>,
}

fn run_linear_layer(w: &Weights, layer: usize, input: &[f32], chunks: &[usize]) -> LayerRun {
    let p = |n: &str| w.get(&format!("layers.{layer}.{n}"));
    let (ln1, ln2) = (
        p("input_layernorm.weight"),
        p("post_attention_layernorm.weight"),
    );
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
    let (gate_w, up_w, down_w) = (
        p("mlp.gate_proj.weight"),
        p("mlp.up_proj.weight"),
        p("mlp.down_proj.weight"),
    );
    assert_eq!(conv_w.len(), SHAPE.conv_channels() * SHAPE.conv_kernel);
    let mut window = vec![0f32; SHAPE.window_len()];
    let mut state = vec![0f32; SHAPE.state_len()];
    let mut out = Vec::with_capacity(input.len());
    let key = SHAPE.key_heads * SHAPE.key_dim;
    let mut rows = input.chunks_exact(HIDDEN);
    for &chunk in chunks {
        // A chunk's rows in order: the state carries over between chunks
        // as between tokens.
        for x in rows.by_ref().take(chunk) {
            let h = norm(x, &ln1);
            let mut qkv = matvec(&qkv_w, &h);
            let z = matvec(&z_w, &h);
            let (a, b) = (matvec(&a_w, &h), matvec(&b_w, &h));
            conv_step(&SHAPE, &mut window, &conv_w, &mut qkv);
            let (mut g, mut beta) = (vec![0f32; 6], vec![0f32; 6]);
            gates(&a, &b, &a_log, &dt_bias, &mut g, &mut beta);
            let (q, rest) = qkv.split_at_mut(key);
            let (k, v) = rest.split_at_mut(key);
            let mut o = vec![0f32; SHAPE.value_len()];
            delta_step(&SHAPE, &mut state, q, k, v, &g, &beta, &mut o);
            gated_norm(&SHAPE, &mut o, &z, &norm_w, EPS);
            let mixed = matvec(&out_w, &o);
            let r: Vec<f32> = x.iter().zip(&mixed).map(|(a, b)| a + b).collect();
            let h = norm(&r, &ln2);
            let (gate, up) = (matvec(&gate_w, &h), matvec(&up_w, &h));
            let act: Vec<f32> = gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
            let down = matvec(&down_w, &act);
            assert_eq!(down.len(), HIDDEN);
            out.extend(r.iter().zip(&down).map(|(a, b)| a + b));
        }
    }
    LayerRun { out, window, state }
}

/// The MLP block after a mixer: `r` (the residual after the mixer) plus
/// the SwiGLU of its post-attention norm.
fn mlp_block(w: &Weights, layer: usize, r: &[f32]) -> Vec<f32> {
    let p = |n: &str| w.get(&format!("layers.{layer}.{n}"));
    let h = norm(r, &p("post_attention_layernorm.weight"));
    let (gate, up) = (
        matvec(&p("mlp.gate_proj.weight"), &h),
        matvec(&p("mlp.up_proj.weight"), &h),
    );
    let act: Vec<f32> = gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
    let down = matvec(&p("mlp.down_proj.weight"), &act);
    r.iter().zip(&down).map(|(a, b)| a + b).collect()
}

/// A gated full-attention layer over `input` [TOKENS, HIDDEN] (positions
/// 0..): `q_proj` gives each head's query and then its gate; per-head
/// zero-centred q/k norms; RoPE on the first [`ROTARY`] dimensions of
/// each head (text positions: the three M-RoPE sections agree), halves
/// rotated; causal softmax attention (query head `h` reads KV head `h /
/// 2`); the output times `sigmoid(gate)` into `o_proj`; then the MLP.
fn run_attention_layer(w: &Weights, layer: usize, input: &[f32]) -> Vec<f32> {
    let p = |n: &str| w.get(&format!("layers.{layer}.{n}"));
    let ln1 = p("input_layernorm.weight");
    let (q_w, k_w, v_w, o_w) = (
        p("self_attn.q_proj.weight"),
        p("self_attn.k_proj.weight"),
        p("self_attn.v_proj.weight"),
        p("self_attn.o_proj.weight"),
    );
    let (q_norm, k_norm) = (p("self_attn.q_norm.weight"), p("self_attn.k_norm.weight"));
    let rope = |x: &mut [f32], pos: usize| {
        let half = ROTARY / 2;
        for i in 0..half {
            let inv = 1.0 / ROPE_THETA.powf(2.0 * i as f64 / ROTARY as f64);
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
        for head in 0..HEADS {
            let at = head * 2 * HEAD_DIM;
            let mut qh = norm(&q[at..at + HEAD_DIM], &q_norm);
            rope(&mut qh, pos);
            qs.push(qh);
            gates.push(q[at + HEAD_DIM..at + 2 * HEAD_DIM].to_vec());
        }
        for head in 0..KV_HEADS {
            let mut kh = norm(&k[head * HEAD_DIM..(head + 1) * HEAD_DIM], &k_norm);
            rope(&mut kh, pos);
            ks.push(kh);
            vs.push(v[head * HEAD_DIM..(head + 1) * HEAD_DIM].to_vec());
        }
    }
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    let mut out = Vec::with_capacity(input.len());
    for (pos, x) in input.chunks_exact(HIDDEN).enumerate() {
        let mut attended = Vec::with_capacity(HEADS * HEAD_DIM);
        for head in 0..HEADS {
            let q = &qs[pos * HEADS + head];
            let kv = head / (HEADS / KV_HEADS);
            let scores: Vec<f32> = (0..=pos)
                .map(|j| {
                    let k = &ks[j * KV_HEADS + kv];
                    q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
                })
                .collect();
            let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f32 = e.iter().sum();
            let gate = &gates[pos * HEADS + head];
            for d in 0..HEAD_DIM {
                let v: f32 = (0..=pos)
                    .map(|j| e[j] / sum * vs[j * KV_HEADS + kv][d])
                    .sum();
                attended.push(v / (1.0 + (-gate[d]).exp()));
            }
        }
        let mixed = matvec(&o_w, &attended);
        let r: Vec<f32> = x.iter().zip(&mixed).map(|(a, b)| a + b).collect();
        out.extend(mlp_block(w, layer, &r));
    }
    out
}

#[test]
fn attention_layers_and_the_whole_model_match_transformers() {
    let w = Weights::open();
    let ref_dir = fixtures().join("dev_qwen35_dense/ref");
    let (_, after) = read_npy_f32(&ref_dir.join("p40_hidden_after_layer.npy"));
    let layer_rows = |l: usize| &after[l * TOKENS * HIDDEN..(l + 1) * TOKENS * HIDDEN];
    for layer in [3, 7] {
        let out = run_attention_layer(&w, layer, layer_rows(layer - 1));
        let err = rel_err(&out, layer_rows(layer));
        eprintln!("layer {layer} (attention): output error {err:.2e} of its largest value");
        assert!(err < 2e-5, "layer {layer}: output error {err}");
    }
    // Every layer on the last one's output, the final (zero-centred)
    // norm, the lm_head: the reference's logits.
    let (_, mut x) = read_npy_f32(&ref_dir.join("p40_embeddings.npy"));
    for layer in 0..8 {
        x = match layer % 4 {
            3 => run_attention_layer(&w, layer, &x),
            _ => run_linear_layer(&w, layer, &x, &[TOKENS]).out,
        };
    }
    let (final_norm, head) = (w.get("norm.weight"), w.get_full("lm_head.weight"));
    let logits: Vec<f32> = x
        .chunks_exact(HIDDEN)
        .flat_map(|row| matvec(&head, &norm(row, &final_norm)))
        .collect();
    let (shape, want) = read_npy_f32(&ref_dir.join("logits_p40.npy"));
    assert_eq!(shape, [TOKENS, VOCAB]);
    let max = logits
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!("logits: max |diff| {max:.2e}");
    assert!(max <= 1e-3, "logits: max |diff| {max}");
}

#[test]
fn linear_layers_match_transformers_and_any_chunking() {
    let w = Weights::open();
    let ref_dir = fixtures().join("dev_qwen35_dense/ref");
    let (shape, after) = read_npy_f32(&ref_dir.join("p40_hidden_after_layer.npy"));
    assert_eq!(shape, [8, 40, HIDDEN]);
    let (_, embeddings) = read_npy_f32(&ref_dir.join("p40_embeddings.npy"));
    let layer_rows = |l: usize| &after[l * 40 * HIDDEN..(l + 1) * 40 * HIDDEN];
    assert_eq!(FFN * HIDDEN, w.get("layers.0.mlp.up_proj.weight").len());
    for layer in [0, 1, 2, 4, 5, 6] {
        let input = match layer {
            0 => &embeddings[..],
            _ => layer_rows(layer - 1),
        };
        let whole = run_linear_layer(&w, layer, input, &[40]);
        let err = rel_err(&whole.out, layer_rows(layer));
        eprintln!("layer {layer}: output error {err:.2e} of its largest value");
        assert!(err < 2e-5, "layer {layer}: output error {err}");
        // The states it ends with: the window is the last 3 of the 4
        // inputs transformers keeps ([1, channels, 4]).
        let (_, conv) = read_npy_f32(&ref_dir.join(format!("p40_state_L{layer}_conv.npy")));
        let c = SHAPE.conv_channels();
        let want_window: Vec<f32> = (1..4)
            .flat_map(|t| (0..c).map(move |ch| (ch, t)))
            .map(|(ch, t)| conv[ch * 4 + t])
            .collect();
        let err = rel_err(&whole.window, &want_window);
        assert!(
            err < 2e-5,
            "layer {layer}: the window holds the inputs: error {err}"
        );
        let (_, recurrent) =
            read_npy_f32(&ref_dir.join(format!("p40_state_L{layer}_recurrent.npy")));
        let err = rel_err(&whole.state, &recurrent);
        assert!(err < 2e-5, "layer {layer}: recurrent state error {err}");
        // Fed in chunks (as the fixture's chunked references split the
        // prompt, and one token at a time): the same bits.
        for chunks in [&[23, 17][..], &[16, 1, 1, 22], &[1; 40]] {
            let split = run_linear_layer(&w, layer, input, chunks);
            assert_eq!(split.out, whole.out, "layer {layer}, chunks {chunks:?}");
            assert_eq!(split.state, whole.state, "layer {layer}, chunks {chunks:?}");
        }
    }
}
