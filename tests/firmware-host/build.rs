//! Relinks when the link script changes; the embedded VQF and its path are
//! tracked by rustc itself (`include_bytes!`, `env!`).
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo:rerun-if-changed=link.ld");
    println!("cargo:rustc-link-search={dir}");
    println!("cargo:rerun-if-env-changed=KESTREL_FW_VQF");
}
