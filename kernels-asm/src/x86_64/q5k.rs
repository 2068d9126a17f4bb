//! GEMV and GEMM of Q5_Kx4 weights (GGUF Q5_K, 4 rows interleaved) with
//! Q8_K activations: the Q4_Kx4 tiles of `q4k.rs` with the fifth bit of
//! each quant or'ed in from the `qh` chunks (docs/kernels.md, "Q5_Kx4").

use super::q4k::{k_entry_points, k_gemm};
use super::Avx2;
use crate::shape::ShapeError;

k_entry_points!(gemv_q5_kx4_q8_k, gemm_q5_kx4_q8_k, true);
