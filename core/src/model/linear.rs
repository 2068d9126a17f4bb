//! Matrix products as the forward passes call them: the execution context
//! (kernels and threads) and one call per product.

use crate::error::Error;
use crate::kernels::{Acts, Epilogue, Kernels};
use crate::parallel::Parallel;
use crate::quant::repack::{ActFormat, PackedMatrix};
use crate::quant::{QK, QK_K};
use crate::state::Scratch;

use super::weights::Qkv;

/// What a step computes with: the kernels and the threads.
pub struct Exec<'a, P: Parallel> {
    /// The kernels (scalar or an architecture's).
    pub kernels: &'a Kernels,
    /// The threads.
    pub pool: &'a P,
}

impl<P: Parallel> Exec<'_, P> {
    /// `out = W x`, `out += W x` or `out = swiglu(W x)` (per `epi`) for
    /// `m` rows of `x` (`m x w.cols`), with the activations quantized into
    /// `scratch` in the format `w`'s layout multiplies (Q8_0 or Q8_K).
    pub fn linear(
        &self,
        w: &PackedMatrix,
        x: &[f32],
        m: usize,
        scratch: &mut Scratch,
        epi: Epilogue,
        out: &mut [f32],
    ) -> Result<(), Error> {
        let n = m * w.cols;
        let x = &x[..n];
        let acts = match w.layout.acts() {
            ActFormat::Q8_0 => {
                let (qs, d) = (&mut scratch.act_qs[..n], &mut scratch.act_d[..n / QK]);
                self.kernels.quantize_acts(x, qs, d)?;
                Acts {
                    x,
                    qs,
                    d,
                    sums: &[],
                }
            }
            ActFormat::Q8K => {
                let (qs, d) = (&mut scratch.act_qs[..n], &mut scratch.act_d[..n / QK_K]);
                let sums = &mut scratch.act_sums[..n / QK];
                self.kernels.quantize_acts_k(x, qs, d, sums)?;
                Acts { x, qs, d, sums }
            }
            ActFormat::Float => Acts {
                x,
                qs: &[],
                d: &[],
                sums: &[],
            },
        };
        let width = if epi == Epilogue::SwiGlu {
            w.rows / 2
        } else {
            w.rows
        };
        self.kernels.matmul_into(
            self.pool,
            w,
            &acts,
            m,
            epi,
            &mut out[..m * width],
            scratch.tmp,
        )
    }

    /// `out = Wqkv x` (`m x (q_dim + 2 kv_dim)`, Q then K then V rows per
    /// token) for a fused or a split QKV. A split QKV multiplies each part
    /// for all `m` tokens into `spare` (at least `m x` the widest part's
    /// rows), then places each token's rows (a row's result does not depend
    /// on the batch: every kernel computes rows independently).
    pub fn linear_qkv(
        &self,
        qkv: &Qkv,
        x: &[f32],
        m: usize,
        scratch: &mut Scratch,
        spare: &mut [f32],
        out: &mut [f32],
    ) -> Result<(), Error> {
        let parts = match qkv {
            Qkv::Fused(w) => return self.linear(w, x, m, scratch, Epilogue::Store, out),
            Qkv::Split(parts) => parts,
        };
        let cols = parts[0].cols;
        let width: usize = parts.iter().map(|p| p.rows).sum();
        let need = m * width;
        let have = out.len();
        let out = out.get_mut(..need).ok_or(Error::SizeMismatch {
            what: "qkv output",
            expected: need,
            actual: have,
        })?;
        let have = x.len();
        let x = x.get(..m * cols).ok_or(Error::SizeMismatch {
            what: "qkv input",
            expected: m * cols,
            actual: have,
        })?;
        let mut at = 0;
        for p in parts {
            let have = spare.len();
            let part_out = spare.get_mut(..m * p.rows).ok_or(Error::SizeMismatch {
                what: "qkv part output",
                expected: m * p.rows,
                actual: have,
            })?;
            self.linear(p, x, m, scratch, Epilogue::Store, part_out)?;
            for (src, row) in part_out
                .chunks_exact(p.rows)
                .zip(out.chunks_exact_mut(width))
            {
                row[at..at + p.rows].copy_from_slice(src);
            }
            at += p.rows;
        }
        Ok(())
    }
}
