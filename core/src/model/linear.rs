//! Matrix products as the forward passes call them: the execution context
//! (kernels and threads) and one call per product.

use crate::error::Error;
use crate::kernels::{Acts, Epilogue, Kernels};
use crate::parallel::{Parallel, MAX_PARTS, MIN_ROWS_PER_PART};
use crate::quant::repack::{ActFormat, PackedMatrix};
use crate::quant::{QK, QK_K};
use crate::state::Scratch;

use super::weights::Fusable;

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
    #[cfg_attr(kestrel_shipped, optimize(speed))]
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
        let format = w.layout.acts();
        let (qs, d, sums) = match format {
            ActFormat::Q8_0 => (
                &mut scratch.act_qs[..n],
                &mut scratch.act_d[..n / QK],
                &mut [][..],
            ),
            ActFormat::Q8K => (
                &mut scratch.act_qs[..n],
                &mut scratch.act_d[..n / QK_K],
                &mut scratch.act_sums[..n / QK],
            ),
            ActFormat::Float => (&mut [][..], &mut [][..], &mut [][..]),
        };
        self.quantize_rows(format, x, m, (&mut *qs, &mut *d, &mut *sums))?;
        let acts = Acts { x, qs, d, sums };
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

    /// Quantizes the `m` rows of `x` into `format` (nothing for float
    /// weights): quants, scales and (Q8_K) sums, the same bytes as one
    /// call over all rows. Rows split over the pool when there are enough
    /// of them (a prefill's or the vision tower's batch); the blocks never
    /// straddle rows (every quantized matrix's rows are whole blocks).
    fn quantize_rows(
        &self,
        format: ActFormat,
        x: &[f32],
        m: usize,
        (qs, d, sums): (&mut [i8], &mut [f32], &mut [i16]),
    ) -> Result<(), Error> {
        let quantize = |x: &[f32], qs: &mut [i8], d: &mut [f32], sums: &mut [i16]| match format {
            ActFormat::Q8_0 => self.kernels.quantize_acts(x, qs, d),
            ActFormat::Q8K => self.kernels.quantize_acts_k(x, qs, d, sums),
            ActFormat::Float => Ok(()),
        };
        let parts = self
            .pool
            .threads()
            .clamp(1, MAX_PARTS)
            .min(m / MIN_ROWS_PER_PART);
        if parts <= 1 || format == ActFormat::Float {
            return quantize(x, qs, d, sums);
        }
        // Per row: its values and quants, scales and sums.
        let cols = x.len() / m;
        let per = |len: usize| len / m;
        let (d_per, sums_per) = (per(d.len()), per(sums.len()));
        type Part<'a> = (
            &'a [f32],
            &'a mut [i8],
            &'a mut [f32],
            &'a mut [i16],
            Result<(), Error>,
        );
        let mut items: heapless::Vec<Part<'_>, MAX_PARTS> = heapless::Vec::new();
        let (mut x_rest, mut qs_rest, mut d_rest, mut sums_rest) = (x, qs, d, sums);
        for p in 0..parts {
            let rows = m * (p + 1) / parts - m * p / parts;
            let (xp, rest) = x_rest.split_at(rows * cols);
            x_rest = rest;
            let (qp, rest) = core::mem::take(&mut qs_rest).split_at_mut(rows * cols);
            qs_rest = rest;
            let (dp, rest) = core::mem::take(&mut d_rest).split_at_mut(rows * d_per);
            d_rest = rest;
            let (sp, rest) = core::mem::take(&mut sums_rest).split_at_mut(rows * sums_per);
            sums_rest = rest;
            let _ = items.push((xp, qp, dp, sp, Ok(())));
        }
        self.pool
            .for_each_mut(&mut items, &|_, (x, qs, d, sums, result)| {
                *result = quantize(x, qs, d, sums);
            });
        items.into_iter().try_for_each(|item| item.4)
    }

    /// `out = W x` for a fused projection whole or split (the attention's
    /// QKV: `m x (q_dim + 2 kv_dim)`, Q then K then V rows per token, then
    /// gated attention's gate rows; a
    /// Gated DeltaNet layer's q|k|v then z). Split, each part multiplies
    /// all `m` tokens into `spare` (at least `m x` the widest part's rows),
    /// then each token's rows are placed (a row's result does not depend
    /// on the batch: every kernel computes rows independently).
    #[cfg_attr(kestrel_shipped, optimize(speed))]
    pub fn linear_fusable(
        &self,
        qkv: &Fusable,
        x: &[f32],
        m: usize,
        scratch: &mut Scratch,
        spare: &mut [f32],
        out: &mut [f32],
    ) -> Result<(), Error> {
        let parts = match qkv {
            Fusable::Fused(w) => return self.linear(w, x, m, scratch, Epilogue::Store, out),
            Fusable::Split(parts) => parts,
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
        for p in parts.iter().filter(|p| p.rows > 0) {
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
