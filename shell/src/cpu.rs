//! CPU feature detection: the shell asks the operating system, the core is told.

use kestrel_core::kernels::Kernels;

/// The fastest kernel set this CPU supports (`KESTREL_KERNELS=scalar` forces
/// the scalar references; on x86_64 `KESTREL_KERNELS=avx2` the AVX2 tiles
/// where the CPU also has a VNNI form, `KESTREL_KERNELS=avx-vnni` the
/// AVX-VNNI tiles where it has AVX512-VNNI too).
pub fn detect_kernels() -> Kernels {
    let forced = std::env::var("KESTREL_KERNELS");
    if forced.as_deref() == Ok("scalar") {
        return Kernels::Scalar;
    }
    #[cfg(target_arch = "aarch64")]
    if let Some(cpu) = kestrel_kernels::aarch64::Dotprod::detect() {
        return Kernels::Dotprod(cpu);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(cpu) = kestrel_kernels::x86_64::Avx2::detect() {
        match forced.as_deref() {
            Ok("avx2") => return Kernels::Avx2(cpu.without_vnni()),
            Ok("avx-vnni") => return Kernels::Avx2(cpu.with_avx_vnni().unwrap_or(cpu)),
            _ => {}
        }
        return Kernels::Avx2(cpu);
    }
    Kernels::Scalar
}
