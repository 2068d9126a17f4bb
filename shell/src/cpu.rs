//! CPU feature detection: the shell asks the operating system, the core is told.

use kestrel_core::kernels::Kernels;

/// The fastest kernel set this CPU supports (`KESTREL_KERNELS=scalar` forces
/// the scalar references).
pub fn detect_kernels() -> Kernels {
    if std::env::var("KESTREL_KERNELS").as_deref() == Ok("scalar") {
        return Kernels::Scalar;
    }
    #[cfg(target_arch = "aarch64")]
    if let Some(cpu) = kestrel_kernels::aarch64::Dotprod::detect() {
        return Kernels::Dotprod(cpu);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(cpu) = kestrel_kernels::x86_64::Avx2::detect() {
        return Kernels::Avx2(cpu);
    }
    Kernels::Scalar
}
