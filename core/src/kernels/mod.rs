//! Safe dispatch between the scalar reference kernels and the architecture
//! kernels of `kestrel-kernels`. The host detects the CPU's features and
//! hands in a token; the core never guesses.

use crate::error::Error;
use crate::quant::reference;
use crate::quant::repack::{Layout, PackedMatrix};

/// The kernel set an inference uses.
#[derive(Clone, Copy, Debug)]
pub enum Kernels {
    /// The scalar references: every architecture, every build.
    Scalar,
    /// aarch64 with dotprod: hand-written `sdot` kernels.
    #[cfg(target_arch = "aarch64")]
    Dotprod(kestrel_kernels::aarch64::Dotprod),
}

impl Kernels {
    /// A short name for logs and test output.
    pub fn name(&self) -> &'static str {
        match self {
            Kernels::Scalar => "scalar",
            #[cfg(target_arch = "aarch64")]
            Kernels::Dotprod(_) => "aarch64-dotprod",
        }
    }

    /// `out[t][r] = W[r] . act[t]` for `m` Q8_0 activation rows and a
    /// quantized weight (Q4_0x4 or Q8_0x8); `out` is `m x rows`.
    pub fn gemm_q8(
        &self,
        w: &PackedMatrix,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) -> Result<(), Error> {
        match (self, w.layout) {
            #[cfg(target_arch = "aarch64")]
            (Kernels::Dotprod(cpu), Layout::Q4_0x4) if m == 1 => {
                reference::check_gemm(w, Layout::Q4_0x4, act_qs, act_d, m, out)?;
                let ok = kestrel_kernels::aarch64::gemv_q4_0x4_q8_0(
                    *cpu, w.bytes, w.rows, w.cols, act_qs, act_d, out,
                );
                if ok {
                    Ok(())
                } else {
                    Err(Error::SizeMismatch {
                        what: "dotprod gemv arguments",
                        expected: w.rows,
                        actual: out.len(),
                    })
                }
            }
            (_, Layout::Q4_0x4) => reference::gemm_q4_0x4_q8_0(w, act_qs, act_d, m, out),
            (_, Layout::Q8_0x8) => reference::gemm_q8_0x8_q8_0(w, act_qs, act_d, m, out),
            (_, Layout::F32 | Layout::F16) => Err(Error::SizeMismatch {
                what: "gemm_q8 needs a quantized layout (group rows 4 or 8)",
                expected: 4,
                actual: w.layout.group_rows(),
            }),
        }
    }
}
