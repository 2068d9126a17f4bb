//! Attention of a block of query rows over shared cached keys and values,
//! with an online softmax: the one definition the decoder (the heads of one
//! GQA group for a run of tokens of one sequence) and the vision tower (a
//! block of patches of one head) both use.
//!
//! The keys are taken in tiles of `state::KEY_TILE` rows, each read from
//! memory once for every query row of the block (then from cache for each
//! pass of the grouped kernels over the rows). Per tile and query
//! row: the scores (`dot8(q, k_j) * scale`, [`Kernels::attn_scores_heads`]),
//! the running maximum `m` taken over them and the exponentials `e^(s_j -
//! m)` with their sum in order ([`Kernels::softmax_rows_online`]), the
//! tile's output `t = sum_j e_j v_j` in order of `j` from zero
//! ([`Kernels::attn_values_heads`]); then with `a = e^(m_old - m)` (1 when
//! the maximum did not move) the row's running sum becomes `l * a +
//! sum_tile` and its output `o * a + t`, each a multiply then an add. After
//! the last tile the output is `o * (1 / l)`. A row of `len` keys takes
//! `min(KEY_TILE, len - j0)` keys of the tile at `j0`, so its result depends
//! only on its query, its length and the cache: not on the other rows of
//! the block nor on how many there are.
//!
//! Against the softmax formed whole (scores, then probabilities, then
//! outputs) the operations differ in order (the normalization comes last,
//! each tile's exponentials are from the maximum so far), so the bits of
//! every attention output moved when this replaced it; docs/kernels.md
//! ("Online softmax") gives the change in the models' quality. What it buys:
//! a block's scores take (rows, KEY_TILE) however long the rows are, and a
//! tile's keys and values are read from memory once for a whole block of
//! queries.

use super::ops::exp;
use crate::kernels::Kernels;
use crate::state::{KvView, KEY_TILE};

/// A block's work space, carved from `rows *
/// state::attention_work_per_row(head_dim)` f32 values.
pub struct Work<'a> {
    /// (rows, head_dim) queries: the caller writes them before [`attend`].
    pub qs: &'a mut [f32],
    /// (rows, head_dim) outputs: [`attend`] leaves them here.
    pub out: &'a mut [f32],
    /// (rows, KEY_TILE) a tile's scores, then its exponentials.
    scores: &'a mut [f32],
    /// (rows, head_dim) a tile's outputs.
    tile_out: &'a mut [f32],
    /// (rows) each row's running maximum.
    maxes: &'a mut [f32],
    /// (rows) the maxima before the tile.
    before: &'a mut [f32],
    /// (rows) each row's running sum.
    sums: &'a mut [f32],
    /// (rows) a tile's sums.
    tile_sums: &'a mut [f32],
}

impl<'a> Work<'a> {
    /// The work space of up to `rows` query rows of `head_dim` elements in
    /// `buf` (at least `rows * attention_work_per_row(head_dim)` values;
    /// the caller sizes it).
    pub fn carve(buf: &'a mut [f32], rows: usize, head_dim: usize) -> Work<'a> {
        let (qs, rest) = buf.split_at_mut(rows * head_dim);
        let (out, rest) = rest.split_at_mut(rows * head_dim);
        let (scores, rest) = rest.split_at_mut(rows * KEY_TILE);
        let (tile_out, rest) = rest.split_at_mut(rows * head_dim);
        let (maxes, rest) = rest.split_at_mut(rows);
        let (before, rest) = rest.split_at_mut(rows);
        let (sums, rest) = rest.split_at_mut(rows);
        let tile_sums = &mut rest[..rows];
        Work {
            qs,
            out,
            scores,
            tile_out,
            maxes,
            before,
            sums,
            tile_sums,
        }
    }
}

/// The cached rows a block attends over: row `j` of a head is the
/// `head_dim` elements at `j * stride` of `keys` and of `values` (views
/// starting at the head's first element).
#[derive(Clone, Copy)]
pub struct Cached<'a> {
    /// The keys, from the head's first element.
    pub keys: KvView<'a>,
    /// The values, from the head's first element.
    pub values: KvView<'a>,
    /// Elements from one cached row to the next.
    pub stride: usize,
}

/// Attention of the block's `rows` queries (`w.qs`, `head_dim` each) over
/// the cached rows: query row `i` over rows `0..len(i)` (at least one, all
/// in the cache), its output into `w.out` (see the module's text for the
/// operations).
#[cfg_attr(kestrel_shipped, optimize(speed))]
pub fn attend(
    k: &Kernels,
    cached: Cached,
    head_dim: usize,
    scale: f32,
    rows: usize,
    len: &dyn Fn(usize) -> usize,
    w: &mut Work,
) {
    let hd = head_dim;
    w.out[..rows * hd].fill(0.0);
    w.maxes[..rows].fill(f32::NEG_INFINITY);
    w.sums[..rows].fill(0.0);
    debug_assert!((0..rows).all(|i| len(i) >= 1), "a query row without keys");
    let longest = (0..rows).map(len).max().unwrap_or(0);
    for j0 in (0..longest).step_by(KEY_TILE) {
        // The rows take this tile's keys in runs of rows with the same
        // count (all of them but near the end of a causal block).
        let count = |i: usize| len(i).saturating_sub(j0).min(KEY_TILE);
        let mut r0 = 0;
        while r0 < rows {
            let keys = count(r0);
            let mut r1 = r0 + 1;
            while r1 < rows && count(r1) == keys {
                r1 += 1;
            }
            if keys > 0 {
                tile(k, cached, (hd, scale), (r0, r1), (j0, keys), w);
            }
            r0 = r1;
        }
    }
    for (o, &l) in w.out[..rows * hd].chunks_exact_mut(hd).zip(w.sums.iter()) {
        let inv = 1.0 / l;
        for v in o {
            *v *= inv;
        }
    }
}

/// Rows `r0..r1` of the block over the `keys` cached rows from `j0`: one
/// tile's step of [`attend`].
fn tile(
    k: &Kernels,
    c: Cached,
    (hd, scale): (usize, f32),
    (r0, r1): (usize, usize),
    (j0, keys): (usize, usize),
    w: &mut Work,
) {
    let g = r1 - r0;
    let scores = &mut w.scores[..g * keys];
    let qs = &w.qs[r0 * hd..r1 * hd];
    k.attn_scores_heads(qs, g, c.keys.from(j0 * c.stride), c.stride, scale, scores);
    w.before[r0..r1].copy_from_slice(&w.maxes[r0..r1]);
    let tile_sums = &mut w.tile_sums[..g];
    k.softmax_rows_online(scores, keys, &mut w.maxes[r0..r1], tile_sums);
    let tile_out = &mut w.tile_out[..g * hd];
    let values = c.values.from(j0 * c.stride);
    k.attn_values_heads(scores, g, values, c.stride, hd, tile_out, hd);
    for i in 0..g {
        let r = r0 + i;
        let (old, new) = (w.before[r], w.maxes[r]);
        let a = if old == new { 1.0 } else { exp(old - new) };
        w.sums[r] = w.sums[r] * a + w.tile_sums[i];
        let out = &mut w.out[r * hd..(r + 1) * hd];
        for (o, &t) in out.iter_mut().zip(&w.tile_out[i * hd..(i + 1) * hd]) {
            *o = *o * a + t;
        }
    }
}
