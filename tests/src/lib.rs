//! Helpers shared by the integration tests: test data generators and the
//! kernel set the current CPU gets.

use kestrel_core::kernels::Kernels;

/// The kernel set for this CPU, as the shell would choose it
/// (`KESTREL_KERNELS=scalar` forces the references).
pub fn detected_kernels() -> Kernels {
    if std::env::var("KESTREL_KERNELS").as_deref() == Ok("scalar") {
        return Kernels::Scalar;
    }
    #[cfg(target_arch = "aarch64")]
    if let Some(cpu) = kestrel_kernels::aarch64::Dotprod::detect() {
        return Kernels::Dotprod(cpu);
    }
    Kernels::Scalar
}

/// ggml's test data: `0.1 + 2 cos(i + offset)`.
pub fn cosine(n: usize, offset: f32) -> Vec<f32> {
    (0..n)
        .map(|i| 0.1 + 2.0 * (i as f32 + offset).cos())
        .collect()
}

/// The ramp `i / n`.
pub fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 / n as f32).collect()
}

/// Deterministic pseudo-random values in `[-scale, scale)`.
pub fn noise(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Reads little-endian f32 values.
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}
