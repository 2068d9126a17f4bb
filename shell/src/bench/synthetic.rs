//! Synthetic data for the benches and the tests: pseudo-random values,
//! packed matrices, and [`SyntheticSource`], deterministic weights for any
//! model config (the integration tests build their VQF files from it too).

use crate::error::Result;
use kestrel_core::config::Config;
use kestrel_core::convert::{Part, TensorSource};
use kestrel_core::quant::{q4_0, q8_0, repack};

/// Deterministic pseudo-random values in [-1, 1).
pub(super) fn synthetic(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A packed `rows x cols` matrix in `layout`, built by quantizing one tile of
/// synthetic rows and repeating it (the bytes a kernel streams are what
/// matters for timing, not their variety).
pub(super) fn synthetic_packed(
    layout: repack::Layout,
    rows: usize,
    cols: usize,
) -> Result<Vec<u8>> {
    const TILE: usize = 64;
    let nb = cols / 32;
    let tile_rows = TILE.min(rows);
    let w = synthetic(tile_rows * cols, rows as u64 ^ cols as u64);
    let (bb, src_len) = match layout {
        repack::Layout::Q4_0x4 => (q4_0::BLOCK_BYTES, tile_rows * nb * q4_0::BLOCK_BYTES),
        _ => (q8_0::BLOCK_BYTES, tile_rows * nb * q8_0::BLOCK_BYTES),
    };
    let mut src = vec![0u8; src_len];
    for r in 0..tile_rows {
        let row = &w[r * cols..(r + 1) * cols];
        let dst = &mut src[r * nb * bb..(r + 1) * nb * bb];
        match layout {
            repack::Layout::Q4_0x4 => q4_0::quantize_row_bytes(row, dst)?,
            _ => q8_0::quantize_row_bytes(row, dst)?,
        }
    }
    let mut tile = vec![0u8; layout.matrix_bytes(tile_rows, cols)?];
    repack::repack(layout, &src, tile_rows, cols, &mut tile)?;
    let total = layout.matrix_bytes(rows, cols)?;
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        let n = tile.len().min(total - out.len());
        out.extend_from_slice(&tile[..n]);
    }
    Ok(out)
}

/// Deterministic weights: value = f(part, layer, expert, row, col), in
/// [-0.5, 0.5) (norm weights in [0.8, 1.2)). The integration tests build
/// their VQF files from it (their expected values call
/// [`SyntheticSource::value`]); `bench --vision` builds its tower from it.
/// [`SyntheticSource::cols`] knows the text model's widths; a vision tensor
/// is read as rows of `hidden_size` values, still deterministic.
pub struct SyntheticSource {
    /// The model's config (widths of each part).
    pub cfg: Config,
}

impl SyntheticSource {
    /// Row width of a part.
    pub fn cols(&self, part: Part) -> usize {
        let c = &self.cfg;
        match part {
            Part::O => c.q_dim(),
            Part::Down => c.ffn_size as usize,
            Part::ExpDown => c.moe.map(|m| m.moe_ffn_size as usize).unwrap_or(0),
            Part::QNorm | Part::KNorm => c.head_dim as usize,
            Part::QBias => c.q_dim(),
            Part::KBias | Part::VBias => c.kv_dim(),
            _ => c.hidden_size as usize,
        }
    }

    /// The value at (part, layer, expert, row, col).
    pub fn value(part: Part, layer: u16, expert: usize, row: usize, col: usize) -> f32 {
        // The part's index in declaration order (as before Part carried data).
        use Part::*;
        let id = match part {
            Vision(role) => 1000 + role as u64,
            p => [
                Embed, LmHead, FinalNorm, AttnNorm, Q, K, V, QBias, KBias, VBias, QNorm, KNorm, O,
                FfnNorm, Gate, Up, Down, Router, ExpGate, ExpUp, ExpDown,
            ]
            .iter()
            .position(|&x| x == p)
            .unwrap_or(0) as u64,
        };
        let mut h = (id + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for v in [layer as u64, expert as u64, row as u64, col as u64] {
            h = (h ^ v).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h ^= h >> 31;
        }
        let unit = (h >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
        match part {
            Part::AttnNorm | Part::FfnNorm | Part::FinalNorm | Part::QNorm | Part::KNorm => {
                1.0 + 0.2 * unit
            }
            _ => unit * 0.5,
        }
    }
}

impl TensorSource for SyntheticSource {
    fn read_rows(
        &self,
        part: Part,
        layer: u16,
        expert: usize,
        row0: usize,
        out: &mut [f32],
    ) -> Result<(), kestrel_core::Error> {
        let part = if part == Part::LmHead && self.cfg.tied_embeddings {
            Part::Embed
        } else {
            part
        };
        let cols = self.cols(part);
        for (i, o) in out.iter_mut().enumerate() {
            *o = Self::value(part, layer, expert, row0 + i / cols, i % cols);
        }
        Ok(())
    }
}
