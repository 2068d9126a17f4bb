//! Shared by the CLI tests: how to start the `kestrel` binary.

use std::path::{Path, PathBuf};
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

/// A file under tests/fixtures.
#[allow(dead_code)]
pub fn fixture(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(rel)
}

/// `kestrel convert` of the fixture at `rel` in f32 mode into a temporary
/// file named `name` (once per test binary and name: callers keep it in a
/// `OnceLock`).
#[allow(dead_code)]
pub fn convert_f32(rel: &str, name: &str) -> std::path::PathBuf {
    // Under the build's own temp folder, not the system's: these files
    // serve a whole test binary (statics are never dropped), so a folder
    // left by an earlier run whose process is gone is removed here.
    let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let prefix = format!("kestrel-{name}-");
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = e.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = root.join(format!("{prefix}{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{name}.vqf"));
    let st = kestrel()
        .arg("convert")
        .arg(fixture(rel))
        .arg("-o")
        .arg(&out)
        .args(["--wmode", "f32"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    out
}

/// A test's scratch directory, removed when the test ends, a failing
/// test's too (the conversion tests write about 200 MB each).
pub struct Temp(PathBuf);

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl AsRef<Path> for Temp {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Temp {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

#[allow(dead_code)]
pub fn temp(name: &str) -> Temp {
    let d = std::env::temp_dir().join(format!("kestrel-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Temp(d)
}

/// The prompt tokens of each answer's `[kestrel] ... prefill N tok` line on
/// stderr, in order.
#[allow(dead_code)]
pub fn prefills(stderr: &str) -> Vec<usize> {
    stderr
        .lines()
        .filter(|l| l.starts_with("[kestrel]"))
        .filter_map(|l| l.split("prefill ").nth(1)?.split(' ').next()?.parse().ok())
        .collect()
}
