//! Shared by the CLI tests: how to start the `kestrel` binary.

use std::process::Command;

/// A command running the `kestrel` binary under test. When the tests
/// themselves run under qemu user mode (aarch64 on an x86_64 host; no
/// binfmt), the binary is started through qemu explicitly, with the same CPU
/// model (`KESTREL_QEMU_CPU`, set by scripts/test.sh).
pub fn kestrel() -> Command {
    let bin = env!("CARGO_BIN_EXE_kestrel");
    match std::env::var("KESTREL_QEMU_CPU") {
        Ok(cpu) if cfg!(target_arch = "aarch64") => {
            let mut c = Command::new("qemu-aarch64");
            c.args(["-cpu", &cpu, "-L", "/usr/aarch64-linux-gnu", bin]);
            c
        }
        _ => Command::new(bin),
    }
}
