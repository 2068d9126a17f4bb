//! The Qwen3-VL vision tower, top to bottom: patch embedding, learned
//! position embedding interpolated to the patch grid, ViT blocks with 2-D
//! rotary attention over the whole image, the 2x2 patch merger, and the
//! DeepStack mergers whose features are added to the text model's residual
//! stream after its first layers.
//!
//! One call encodes one image: `pixel_values` (patches, 3 x T x P x P) in
//! merge-block order (the preprocessor's output), grid `(h, w)` in patches.
//! The memory comes from a caller-provided arena sized by
//! [`VisionArenaSizes::new`]; nothing allocates.

use super::attend;
use super::linear::Exec;
use super::ops;
use super::weights::Weights;
use crate::config::VisionConfig;
use crate::error::Error;
use crate::kernels::{Epilogue, Kernels};
use crate::parallel::{rows_parallel, Parallel, MAX_PARTS};
use crate::quant::repack::PackedMatrix;
use crate::state::{arena_total, attention_work, Carver, KvCache, KvType, Scratch};
use crate::tensors::{Role, NO_LAYER};

/// Rows one matrix multiply of the tower takes at a time.
pub const VISION_CHUNK: usize = 64;
/// LayerNorm epsilon of the tower and its mergers.
const LN_EPS: f32 = 1e-6;
/// Base of the 2-D rotary embedding.
const ROPE_THETA: f32 = 10_000.0;

/// Widths the tower needs.
struct Dims {
    /// ViT width.
    d: usize,
    /// MLP width.
    ffn: usize,
    /// Flattened patch (3 T P P).
    patch: usize,
    /// Merged row (merge^2 d).
    wide: usize,
    /// Merger output (text hidden).
    out: usize,
    heads: usize,
    head_dim: usize,
}

impl Dims {
    fn of(v: &VisionConfig) -> Dims {
        let d = v.hidden_size as usize;
        Dims {
            d,
            ffn: v.ffn_size as usize,
            patch: v.patch_values(),
            wide: v.merge_patches() * d,
            out: v.out_hidden as usize,
            heads: v.num_heads as usize,
            head_dim: v.head_dim(),
        }
    }

    /// The widest input of any multiply.
    fn max_in(&self) -> usize {
        self.patch.max(self.d).max(self.ffn).max(self.wide)
    }

    /// The most rows of any multiply.
    fn max_rows(&self) -> usize {
        (3 * self.d).max(self.ffn).max(self.wide).max(self.out)
    }
}

/// Byte sizes of the tower's buffers for images of up to `max_patches`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VisionArenaSizes {
    /// Bytes needed, including up to 63 bytes to align the start.
    pub total: usize,
    /// The largest image, in patches.
    pub max_patches: usize,
    kv: KvType,
    /// x: (patches, d) f32 residual stream.
    x: usize,
    /// xb: (patches, d) f32 normed input; the merged rows.
    xb: usize,
    /// qkv: (patches, 3 d) f32.
    qkv: usize,
    /// att: (patches, d) f32 attention output.
    att: usize,
    /// hb: (patches, ffn) f32 MLP hidden; the merger's fc1 output.
    hb: usize,
    /// keys: (patches, d) f16 or f32.
    keys: usize,
    /// values: (patches, d).
    values: usize,
    /// scores: (parts, QUERY_BLOCK, attention work per query row) f32:
    /// each part's block's work space (`model::attend`).
    scores: usize,
    /// rope: (patches, head_dim / 2) f32 cosines, then as many sines.
    rope: usize,
    /// tmp: (chunk, widest output) f32 matmul parts.
    tmp: usize,
    /// act_qs: (chunk, widest input) i8.
    act_qs: usize,
    /// act_d: (chunk, widest input / 32 + 1) f32.
    act_d: usize,
}

fn mul(a: usize, b: usize) -> Result<usize, Error> {
    a.checked_mul(b).ok_or(Error::Overflow {
        what: "vision arena size",
    })
}

impl VisionArenaSizes {
    /// The arena for images of up to `max_patches` patches, keys and values
    /// of the attention stored as `kv` (f16 by default, f32 for accuracy).
    pub fn new(
        v: &VisionConfig,
        max_patches: usize,
        kv: KvType,
        threads: usize,
    ) -> Result<VisionArenaSizes, Error> {
        let merge = v.merge_patches();
        if max_patches == 0 || !max_patches.is_multiple_of(merge) {
            return Err(Error::OutOfRange {
                what: "vision patches (a positive multiple of merge^2)",
                value: max_patches,
                max: usize::MAX,
            });
        }
        let dm = Dims::of(v);
        let n = max_patches;
        let f = 4;
        let kv_elem = if kv == KvType::F16 { 2 } else { 4 };
        let parts = threads.clamp(1, MAX_PARTS);
        let chunk = VISION_CHUNK;
        let mut sizes = VisionArenaSizes {
            total: 0,
            max_patches,
            kv,
            x: mul(mul(n, dm.d)?, f)?,
            xb: mul(mul(n, dm.d.max(dm.patch))?, f)?,
            qkv: mul(mul(n, 3 * dm.d)?, f)?,
            att: mul(mul(n, dm.d)?, f)?,
            hb: mul(mul(n, dm.ffn.max(dm.d))?, f)?,
            keys: mul(mul(n, dm.d)?, kv_elem)?,
            values: mul(mul(n, dm.d)?, kv_elem)?,
            scores: mul(
                mul(mul(parts, QUERY_BLOCK)?, attention_work(dm.head_dim)?)?,
                f,
            )?,
            rope: mul(mul(n, dm.head_dim)?, f)?,
            tmp: mul(mul(chunk, dm.max_rows())?, f)?,
            act_qs: mul(chunk, dm.max_in())?,
            act_d: mul(mul(chunk, dm.max_in() / 32 + 1)?, f)?,
        };
        sizes.total = arena_total(
            &[
                sizes.x,
                sizes.xb,
                sizes.qkv,
                sizes.att,
                sizes.hb,
                sizes.keys,
                sizes.values,
                sizes.scores,
                sizes.rope,
                sizes.tmp,
                sizes.act_qs,
                sizes.act_d,
            ],
            "vision arena size",
        )?;
        Ok(sizes)
    }
}

/// The tower's working memory, carved from an arena.
pub struct VisionState<'a> {
    layout: VisionArenaSizes,
    x: &'a mut [f32],
    xb: &'a mut [f32],
    qkv: &'a mut [f32],
    att: &'a mut [f32],
    hb: &'a mut [f32],
    keys: KvCache<'a>,
    values: KvCache<'a>,
    scores: &'a mut [f32],
    rope_cos: &'a mut [f32],
    rope_sin: &'a mut [f32],
    /// The scratch of the tower's matrix products (one chunk of rows).
    mats: Scratch<'a>,
}

impl<'a> VisionState<'a> {
    /// Carves the state out of `arena` (at least `layout.total` bytes).
    pub fn new(layout: VisionArenaSizes, arena: &'a mut [u8]) -> Result<VisionState<'a>, Error> {
        let mut arena = Carver::new(arena, layout.total)?;
        let s = layout;
        let x = arena.f32s(s.x)?;
        let xb = arena.f32s(s.xb)?;
        let qkv = arena.f32s(s.qkv)?;
        let att = arena.f32s(s.att)?;
        let hb = arena.f32s(s.hb)?;
        let keys = arena.kv(s.keys, layout.kv)?;
        let values = arena.kv(s.values, layout.kv)?;
        let scores = arena.f32s(s.scores)?;
        let rope = arena.f32s(s.rope)?;
        let (rope_cos, rope_sin) = rope.split_at_mut(rope.len() / 2);
        let tmp = arena.f32s(s.tmp)?;
        let act_qs = arena.i8s(s.act_qs);
        let act_d = arena.f32s(s.act_d)?;
        Ok(VisionState {
            layout,
            x,
            xb,
            qkv,
            att,
            hb,
            keys,
            values,
            scores,
            rope_cos,
            rope_sin,
            mats: Scratch {
                tmp,
                act_qs,
                act_d,
                // The tower multiplies Q8_0x8, F32 and F16 weights only.
                act_sums: &mut [],
            },
        })
    }
}

/// One ViT block's tensors.
struct Block<'a> {
    norm1: (&'a [u8], &'a [u8]),
    /// (3 d, d) q, k, v rows.
    qkv: PackedMatrix<'a>,
    qkv_bias: &'a [u8],
    /// (d, d).
    proj: PackedMatrix<'a>,
    proj_bias: &'a [u8],
    norm2: (&'a [u8], &'a [u8]),
    /// (ffn, d).
    fc1: PackedMatrix<'a>,
    fc1_bias: &'a [u8],
    /// (d, ffn).
    fc2: PackedMatrix<'a>,
    fc2_bias: &'a [u8],
}

/// A patch merger's tensors.
struct Merger<'a> {
    /// LayerNorm over d (final merger) or merge^2 d (DeepStack).
    norm: (&'a [u8], &'a [u8]),
    /// (merge^2 d, merge^2 d).
    fc1: PackedMatrix<'a>,
    fc1_bias: &'a [u8],
    /// (out, merge^2 d).
    fc2: PackedMatrix<'a>,
    fc2_bias: &'a [u8],
}

impl<'a> Weights<'a> {
    /// A vision matrix, in the one layout the file stores it in.
    fn vision_matrix(&self, layer: u16, role: Role) -> Result<PackedMatrix<'a>, Error> {
        for layout in [
            crate::quant::repack::Layout::Q8_0x8,
            crate::quant::repack::Layout::F32,
            crate::quant::repack::Layout::F16,
        ] {
            if let Some(e) = self.vqf.find(layer, role, layout) {
                return self.vqf.matrix(&e, 0);
            }
        }
        Err(Error::MissingTensor {
            role: role.stem(),
            layer,
        })
    }

    fn vision_block(&self, l: u16) -> Result<Block<'a>, Error> {
        Ok(Block {
            norm1: (
                self.vector(l, Role::VNorm1)?,
                self.vector(l, Role::VNorm1Bias)?,
            ),
            qkv: self.vision_matrix(l, Role::VQkv)?,
            qkv_bias: self.vector(l, Role::VQkvBias)?,
            proj: self.vision_matrix(l, Role::VProj)?,
            proj_bias: self.vector(l, Role::VProjBias)?,
            norm2: (
                self.vector(l, Role::VNorm2)?,
                self.vector(l, Role::VNorm2Bias)?,
            ),
            fc1: self.vision_matrix(l, Role::VFc1)?,
            fc1_bias: self.vector(l, Role::VFc1Bias)?,
            fc2: self.vision_matrix(l, Role::VFc2)?,
            fc2_bias: self.vector(l, Role::VFc2Bias)?,
        })
    }

    /// The final merger (`None`) or DeepStack merger `k`.
    fn merger(&self, k: Option<u16>) -> Result<Merger<'a>, Error> {
        let (layer, roles) = match k {
            None => (NO_LAYER, Role::MERGER),
            Some(k) => (k, Role::DEEPSTACK_MERGER),
        };
        Ok(Merger {
            norm: (self.vector(layer, roles[0])?, self.vector(layer, roles[1])?),
            fc1: self.vision_matrix(layer, roles[2])?,
            fc1_bias: self.vector(layer, roles[3])?,
            fc2: self.vision_matrix(layer, roles[4])?,
            fc2_bias: self.vector(layer, roles[5])?,
        })
    }
}

/// `out = (x - mean) / sqrt(var + eps) * w + b` (w, b: f32 bytes).
pub fn layernorm(out: &mut [f32], x: &[f32], w: &[u8], b: &[u8]) {
    let n = x.len() as f32;
    let mut sum = 0.0f32;
    for &v in x {
        sum += v;
    }
    let mean = sum / n;
    let mut var = 0.0f32;
    for &v in x {
        var += (v - mean) * (v - mean);
    }
    let inv = 1.0 / libm::sqrtf(var / n + LN_EPS);
    for (i, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        *o = (v - mean) * inv * ops::f32_at(w, i) + ops::f32_at(b, i);
    }
}

/// [`layernorm`] of every `width`-wide row of `x` into `out`, the rows
/// split over the pool.
fn layernorm_rows<P: Parallel>(
    pool: &P,
    out: &mut [f32],
    x: &[f32],
    width: usize,
    (w, b): (&[u8], &[u8]),
) {
    rows_parallel(pool, out, width, &|first, part| {
        let src = &x[first * width..first * width + part.len()];
        for (dst, src) in part.chunks_exact_mut(width).zip(src.chunks_exact(width)) {
            layernorm(dst, src, w, b);
        }
    });
}

/// `x = gelu_tanh(x)` over (rows, width) values, the rows split over the
/// pool.
fn gelu_rows<P: Parallel>(cx: &Exec<'_, P>, x: &mut [f32], width: usize) {
    rows_parallel(cx.pool, x, width, &|_, part| cx.kernels.gelu_tanh(part));
}

/// GELU, exact (erf).
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * core::f32::consts::FRAC_1_SQRT_2))
}

fn add_bias(rows: &mut [f32], bias: &[u8]) {
    let n = bias.len() / 4;
    for row in rows.chunks_exact_mut(n) {
        for (v, b) in row.iter_mut().zip(bias.chunks_exact(4)) {
            *v += f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    }
}

/// `out (m, w.rows) = x (m, w.cols) W^T (+= when `add`), then + bias`,
/// [`VISION_CHUNK`] rows at a time.
fn project<P: Parallel>(
    cx: &Exec<P>,
    scratch: &mut Scratch,
    (w, bias): (&PackedMatrix, &[u8]),
    x: &[f32],
    m: usize,
    add: bool,
    out: &mut [f32],
) -> Result<(), Error> {
    let (cols, rows) = (w.cols, w.rows);
    let epi = if add { Epilogue::Add } else { Epilogue::Store };
    let mut t0 = 0;
    while t0 < m {
        let n = VISION_CHUNK.min(m - t0);
        let dst = &mut out[t0 * rows..(t0 + n) * rows];
        cx.linear(w, &x[t0 * cols..(t0 + n) * cols], n, scratch, epi, dst)?;
        rows_parallel(cx.pool, dst, rows, &|_, part| add_bias(part, bias));
        t0 += n;
    }
    Ok(())
}

/// The row and column (in patches) of each patch in merge-block order:
/// (block_row, block_col, r_in_block, c_in_block), column fastest.
pub fn patch_coords(i: usize, w: usize, merge: usize) -> (usize, usize) {
    let per_block = merge * merge;
    let blocks_per_row = w / merge;
    let (block, within) = (i / per_block, i % per_block);
    let (br, bc) = (block / blocks_per_row, block % blocks_per_row);
    (br * merge + within / merge, bc * merge + within % merge)
}

/// One preprocessed image: its patches' pixel values and grid.
#[derive(Clone, Copy, Debug)]
pub struct Patches<'a> {
    /// (patches, 3 T P P) in merge-block order.
    pub values: &'a [f32],
    /// Patch rows (a multiple of the merge size).
    pub grid_h: usize,
    /// Patch columns (a multiple of the merge size).
    pub grid_w: usize,
}

/// Encodes one image. Writes the merger output to `embeds` ((patches /
/// merge^2, out)) and DeepStack feature `j` to `deepstack[j * tokens *
/// out ..]` ((deepstack, tokens, out)).
pub fn encode_image<P: Parallel>(
    w: &Weights,
    s: &mut VisionState,
    cx: &Exec<P>,
    image: Patches,
    embeds: &mut [f32],
    deepstack: &mut [f32],
) -> Result<(), Error> {
    let v = w.cfg.vision.ok_or(Error::BadConfig {
        what: "the model has no vision tower",
    })?;
    let dm = Dims::of(&v);
    let Patches {
        values: pixels,
        grid_h,
        grid_w,
    } = image;
    let (k, pool) = (cx.kernels, cx.pool);
    let merge = v.spatial_merge as usize;
    let n = grid_h.checked_mul(grid_w).ok_or(Error::Overflow {
        what: "image patches",
    })?;
    if n == 0
        || !grid_h.is_multiple_of(merge)
        || !grid_w.is_multiple_of(merge)
        || n > s.layout.max_patches
    {
        return Err(Error::OutOfRange {
            what: "image patches (grid sides multiples of the merge size)",
            value: n,
            max: s.layout.max_patches,
        });
    }
    let tokens = n / v.merge_patches();
    let levels = v.deepstack().len();
    let check = crate::error::check_len;
    check("pixel values", n * dm.patch, pixels.len())?;
    check("image embeddings", tokens * dm.out, embeds.len())?;
    check(
        "deepstack features",
        levels * tokens * dm.out,
        deepstack.len(),
    )?;
    let d = dm.d;

    // x (n, d) = patches W_patch^T + b: the Conv3d as a matmul.
    let patch_w = w.vision_matrix(NO_LAYER, Role::VPatchEmbd)?;
    let patch_b = w.vector(NO_LAYER, Role::VPatchBias)?;
    project(
        cx,
        &mut s.mats,
        (&patch_w, patch_b),
        pixels,
        n,
        false,
        &mut s.x[..n * d],
    )?;
    // + the learned (side x side) position embedding, bilinearly
    // interpolated to the grid (align_corners), in merge-block order.
    let pos = w.vector(NO_LAYER, Role::VPosEmbd)?;
    let side = crate::config::isqrt(v.num_position_embeddings) as usize;
    let taps = |idx: usize, size: usize| -> (usize, usize, f32) {
        let src = if size > 1 {
            (idx as f64 * (side - 1) as f64 / (size - 1) as f64) as f32
        } else {
            0.0
        };
        let lo = (libm::floorf(src) as usize).min(side - 1);
        let hi = (lo + 1).min(side - 1);
        (lo, hi, src - lo as f32)
    };
    for i in 0..n {
        let (r, c) = patch_coords(i, grid_w, merge);
        let (r0, r1, fr) = taps(r, grid_h);
        let (c0, c1, fc) = taps(c, grid_w);
        let corners = [
            (r0 * side + c0, (1.0 - fr) * (1.0 - fc)),
            (r0 * side + c1, (1.0 - fr) * fc),
            (r1 * side + c0, fr * (1.0 - fc)),
            (r1 * side + c1, fr * fc),
        ];
        let row = &mut s.x[i * d..(i + 1) * d];
        for (j, o) in row.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for (at, wt) in corners {
                acc += wt * ops::f32_at(pos, at * d + j);
            }
            *o += acc;
        }
    }
    // 2-D rotary tables: (n, head_dim / 2) = [row f_0.., col f_0..].
    let hd = dm.head_dim;
    let quarter = hd / 4;
    for i in 0..n {
        let (r, c) = patch_coords(i, grid_w, merge);
        for j in 0..quarter {
            let inv = 1.0 / libm::powf(ROPE_THETA, (2 * j) as f32 / (hd / 2) as f32);
            for (slot, p) in [(j, r), (quarter + j, c)] {
                let angle = p as f32 * inv;
                s.rope_cos[i * hd / 2 + slot] = libm::cos(angle as f64) as f32;
                s.rope_sin[i * hd / 2 + slot] = libm::sin(angle as f64) as f32;
            }
        }
    }

    for l in 0..v.depth as usize {
        let b = w.vision_block(l as u16)?;
        // Attention: xb = LN1(x); qkv = xb Wqkv^T + b; rotate q and k.
        layernorm_rows(
            pool,
            &mut s.xb[..n * d],
            &s.x[..n * d],
            d,
            (b.norm1.0, b.norm1.1),
        );
        project(
            cx,
            &mut s.mats,
            (&b.qkv, b.qkv_bias),
            s.xb,
            n,
            false,
            &mut s.qkv[..n * 3 * d],
        )?;
        rope_and_cache(&dm, s, pool, n);
        attention(&dm, s, k, pool, n);
        // x += att Wproj^T + b
        project(
            cx,
            &mut s.mats,
            (&b.proj, b.proj_bias),
            s.att,
            n,
            true,
            &mut s.x[..n * d],
        )?;
        // MLP: x += fc2(gelu_tanh(fc1(LN2(x))))
        layernorm_rows(
            pool,
            &mut s.xb[..n * d],
            &s.x[..n * d],
            d,
            (b.norm2.0, b.norm2.1),
        );
        project(
            cx,
            &mut s.mats,
            (&b.fc1, b.fc1_bias),
            s.xb,
            n,
            false,
            &mut s.hb[..n * dm.ffn],
        )?;
        gelu_rows(cx, &mut s.hb[..n * dm.ffn], dm.ffn);
        project(
            cx,
            &mut s.mats,
            (&b.fc2, b.fc2_bias),
            s.hb,
            n,
            true,
            &mut s.x[..n * d],
        )?;
        if let Some(level) = v.deepstack().iter().position(|&b| b as usize == l) {
            // DeepStack: merge 2x2 blocks first, then LN over merge^2 d.
            let m = w.merger(Some(level as u16))?;
            layernorm_rows(pool, &mut s.xb[..n * d], &s.x[..n * d], dm.wide, m.norm);
            let out = &mut deepstack[level * tokens * dm.out..(level + 1) * tokens * dm.out];
            merge_mlp(&m, &dm, s, cx, tokens, out)?;
        }
    }
    // The final merger: LN over d per patch, then merge 2x2 blocks.
    let m = w.merger(None)?;
    layernorm_rows(
        pool,
        &mut s.xb[..n * d],
        &s.x[..n * d],
        d,
        (m.norm.0, m.norm.1),
    );
    merge_mlp(&m, &dm, s, cx, tokens, embeds)
}

/// `out (tokens, out) = fc2(gelu_erf(fc1(xb viewed as (tokens, merge^2 d))))`.
fn merge_mlp<P: Parallel>(
    m: &Merger,
    dm: &Dims,
    s: &mut VisionState,
    cx: &Exec<P>,
    tokens: usize,
    out: &mut [f32],
) -> Result<(), Error> {
    let wide = dm.wide;
    project(
        cx,
        &mut s.mats,
        (&m.fc1, m.fc1_bias),
        s.xb,
        tokens,
        false,
        &mut s.hb[..tokens * wide],
    )?;
    for h in s.hb[..tokens * wide].iter_mut() {
        *h = gelu_erf(*h);
    }
    project(
        cx,
        &mut s.mats,
        (&m.fc2, m.fc2_bias),
        s.hb,
        tokens,
        false,
        out,
    )
}

/// Queries of one head computed together against each key and value row
/// (the grouped attention kernels: each cached row loaded once per block).
const QUERY_BLOCK: usize = 8;

/// The rows of `q` and `k` in `qkv` rotated, and the keys and values
/// stored in the tower's caches: patches split over the pool.
fn rope_and_cache<P: Parallel>(dm: &Dims, s: &mut VisionState, pool: &P, n: usize) {
    let (d, hd) = (dm.d, dm.head_dim);
    let parts = pool.threads().clamp(1, MAX_PARTS).min(n);
    // (first patch, its qkv rows, its keys, its values).
    type Part<'a> = (usize, &'a mut [f32], KvCache<'a>, KvCache<'a>);
    let mut items: heapless::Vec<Part<'_>, MAX_PARTS> = heapless::Vec::new();
    let mut qkv_rest: &mut [f32] = &mut s.qkv[..n * 3 * d];
    let (mut keys_rest, mut values_rest) = (s.keys.reborrow(), s.values.reborrow());
    for p in 0..parts {
        let (first, end) = (n * p / parts, n * (p + 1) / parts);
        let (qkv, rest) = core::mem::take(&mut qkv_rest).split_at_mut((end - first) * 3 * d);
        qkv_rest = rest;
        let (keys, rest) = keys_rest.split_at((end - first) * d);
        keys_rest = rest;
        let (values, rest) = values_rest.split_at((end - first) * d);
        values_rest = rest;
        let _ = items.push((first, qkv, keys, values));
    }
    let (cos_all, sin_all): (&[f32], &[f32]) = (s.rope_cos, s.rope_sin);
    pool.for_each_mut(&mut items, &|_, (first, qkv, keys, values)| {
        for (i, row) in qkv.chunks_exact_mut(3 * d).enumerate() {
            let at = (*first + i) * hd / 2;
            let (cos, sin) = (&cos_all[at..at + hd / 2], &sin_all[at..at + hd / 2]);
            for head in row[..2 * d].chunks_exact_mut(hd) {
                ops::rope(head, cos, sin);
            }
            keys.store(i * d, &row[d..2 * d]);
            values.store(i * d, &row[2 * d..]);
        }
    });
}

/// The patches of one part of the tower's attention and their rows of
/// the output.
struct QueryRows<'a> {
    /// The part's first patch (a multiple of [`QUERY_BLOCK`]).
    first: usize,
    /// (QUERY_BLOCK, attention work per query row): the block's work space
    /// ([`crate::state::attention_work_per_row`] each).
    work: &'a mut [f32],
    /// (rows, d): the part's rows of `att`.
    out: &'a mut [f32],
}

/// Full (non-causal) attention of every patch over the image's `n`
/// patches into `att` (n, d): the patches split over the pool in blocks
/// of [`QUERY_BLOCK`], each part writing its own rows of `att`; head by
/// head (its keys and values stay in cache), a block of the part's patches
/// is one block of [`attend::attend`].
fn attention<P: Parallel>(dm: &Dims, s: &mut VisionState, k: &Kernels, pool: &P, n: usize) {
    let (d, hd, heads) = (dm.d, dm.head_dim, dm.heads);
    let scale = 1.0 / libm::sqrtf(hd as f32);
    let blocks = n.div_ceil(QUERY_BLOCK);
    let parts = pool.threads().clamp(1, MAX_PARTS).min(blocks);
    // The arena was sized with it (`attention_work`), so it fits.
    let per_row = attention_work(hd).unwrap_or(0);
    let mut items: heapless::Vec<QueryRows<'_>, MAX_PARTS> = heapless::Vec::new();
    let mut work_rest: &mut [f32] = s.scores;
    let mut out_rest: &mut [f32] = &mut s.att[..n * d];
    for p in 0..parts {
        let first = blocks * p / parts * QUERY_BLOCK;
        let end = (blocks * (p + 1) / parts * QUERY_BLOCK).min(n);
        let (work, rest) = core::mem::take(&mut work_rest).split_at_mut(QUERY_BLOCK * per_row);
        work_rest = rest;
        let (out, rest) = core::mem::take(&mut out_rest).split_at_mut((end - first) * d);
        out_rest = rest;
        let _ = items.push(QueryRows { first, work, out });
    }
    let qkv: &[f32] = s.qkv;
    let (keys, values) = (s.keys.view(0..n * d), s.values.view(0..n * d));
    pool.for_each_mut(&mut items, &|_, part| {
        let rows = part.out.len() / d;
        for h in 0..heads {
            let cached = attend::Cached {
                keys: keys.from(h * hd),
                values: values.from(h * hd),
                stride: d,
            };
            for b0 in (0..rows).step_by(QUERY_BLOCK) {
                let g = (rows - b0).min(QUERY_BLOCK);
                let mut work = attend::Work::carve(part.work, g, hd);
                for (i, q) in work.qs.chunks_exact_mut(hd).take(g).enumerate() {
                    let at = (part.first + b0 + i) * 3 * d + h * hd;
                    q.copy_from_slice(&qkv[at..at + hd]);
                }
                attend::attend(k, cached, hd, scale, g, &|_| n, &mut work);
                for (i, o) in work.out.chunks_exact(hd).take(g).enumerate() {
                    let at = (b0 + i) * d + h * hd;
                    part.out[at..at + hd].copy_from_slice(o);
                }
            }
        }
    });
}

/// The M-RoPE positions of a prompt with images, as the reference's
/// `get_rope_index` computes them: a text token advances (t, h, w) by one;
/// the `rows x cols` tokens of image `i` (its merged grid, `grids[i]`),
/// starting at position `s`, take `(s, s + row, s + col)`, and the next text
/// token continues at `s + max(rows, cols)`. Each image is one run of
/// `rows x cols` consecutive `image_token` ids. Fills `positions` and
/// `image_rows` ((tokens) each: the image-token index, or [`TEXT_ROW`]) and
/// returns `rope_delta` (the last position + 1 - tokens), the offset of the
/// rotary position from the sequence position for the tokens that follow.
///
/// [`TEXT_ROW`]: super::forward::TEXT_ROW
pub fn mrope_positions(
    ids: &[u32],
    image_token: u32,
    grids: &[(usize, usize)],
    positions: &mut [[u32; 3]],
    image_rows: &mut [u32],
) -> Result<i64, Error> {
    use super::forward::TEXT_ROW;
    let n = ids.len();
    if positions.len() != n || image_rows.len() != n {
        return Err(Error::SizeMismatch {
            what: "M-RoPE position rows",
            expected: n,
            actual: positions.len().min(image_rows.len()),
        });
    }
    let too_long = Error::Overflow {
        what: "M-RoPE position",
    };
    let (mut i, mut cur, mut image, mut image_row) = (0usize, 0u32, 0usize, 0u32);
    while i < n {
        if ids[i] != image_token {
            positions[i] = [cur; 3];
            image_rows[i] = TEXT_ROW;
            cur = cur.checked_add(1).ok_or(too_long)?;
            i += 1;
            continue;
        }
        let &(rows, cols) = grids.get(image).ok_or(Error::OutOfRange {
            what: "image placeholders (more runs than images)",
            value: image + 1,
            max: grids.len(),
        })?;
        let count = rows.checked_mul(cols).ok_or(too_long)?;
        let run = ids[i..].iter().take_while(|&&id| id == image_token).count();
        if run < count {
            return Err(Error::SizeMismatch {
                what: "image placeholder tokens for an image",
                expected: count,
                actual: run,
            });
        }
        for r in 0..rows {
            for c in 0..cols {
                let at = i + r * cols + c;
                let add = |x: usize| {
                    u32::try_from(x)
                        .ok()
                        .and_then(|x| cur.checked_add(x))
                        .ok_or(too_long)
                };
                positions[at] = [cur, add(r)?, add(c)?];
                image_rows[at] = image_row;
                image_row = image_row.checked_add(1).ok_or(too_long)?;
            }
        }
        let span = u32::try_from(rows.max(cols)).map_err(|_| too_long)?;
        cur = cur.checked_add(span).ok_or(too_long)?;
        i += count;
        image += 1;
    }
    if image != grids.len() {
        return Err(Error::SizeMismatch {
            what: "images in the prompt (runs of image placeholders)",
            expected: grids.len(),
            actual: image,
        });
    }
    Ok(cur as i64 - n as i64)
}
