//! Qwen3.5's Gated DeltaNet layers (`kestrel_core::model::deltanet`)
//! against transformers, layer by layer, on the dense fixture
//! (`tests/fixtures/dev_qwen35_dense`, PROVENANCE.md): each linear layer
//! runs the reference's input to that layer (the hidden state after the
//! layer before it, or the embeddings) through its norm, projections,
//! convolution, gates, delta rule, gated norm, output projection and MLP,
//! token by token, and must give the reference's output and its final
//! convolution window and recurrent state. The projections here are plain
//! f32 loops (the forward will use the matrix layouts).

use kestrel_core::model::deltanet::{conv_step, delta_step, gated_norm, gates, DeltaShape};
use kestrel_core::safetensors::SafeTensors;
use kestrel_tests::{fixtures, read_npy_f32};

const HIDDEN: usize = 160;
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

    fn get(&self, name: &str) -> Vec<f32> {
        let st = SafeTensors::parse(&self.file).unwrap();
        let t = st
            .tensor(&format!("model.language_model.{name}"))
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
