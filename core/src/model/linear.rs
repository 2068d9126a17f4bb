//! Matrix products as the forward passes call them: the execution context
//! (kernels and threads) and one call per product.

use crate::error::Error;
use crate::kernels::{Acts, Epilogue, Kernels};
use crate::parallel::Parallel;
use crate::quant::repack::{Layout, PackedMatrix};
use crate::state::Scratch;

/// What a step computes with: the kernels and the threads.
pub struct Exec<'a, P: Parallel> {
    /// The kernels (scalar or an architecture's).
    pub kernels: &'a Kernels,
    /// The threads.
    pub pool: &'a P,
}

impl<P: Parallel> Exec<'_, P> {
    /// `out = W x`, `out += W x` or `out = swiglu(W x)` (per `epi`) for
    /// `m` rows of `x` (`m x w.cols`), with Q8_0 activations quantized into
    /// `scratch` when `w`'s layout needs them.
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
        let acts = match w.layout {
            Layout::Q4_0x4 | Layout::Q8_0x8 => {
                let (qs, d) = (&mut scratch.act_qs[..n], &mut scratch.act_d[..n / 32]);
                self.kernels.quantize_acts(x, qs, d)?;
                Acts { x, qs, d }
            }
            Layout::F32 | Layout::F16 => Acts { x, qs: &[], d: &[] },
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
}
