//! Helpers shared by the integration tests: test data generators, the
//! kernel set the current CPU gets, and what each fuzz target does with an
//! input ([`exercise`], shared with fuzz/).

use kestrel_core::kernels::Kernels;

pub mod exercise;
pub mod loader;

/// The kernel set for this CPU, as the shell would choose it
/// (`KESTREL_KERNELS=scalar` forces the references).
pub fn detected_kernels() -> Kernels {
    kestrel::cpu::detect_kernels()
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

use kestrel_core::config::{Arch, Config, MAX_EOS};
use kestrel_core::convert::{self, TensorSource, WeightMode};
use kestrel_core::vqf::format::{Entry, CHECKSUM_AT};
use kestrel_core::vqf::write::Sink;

/// A sink into a `Vec<u8>`.
#[derive(Default)]
pub struct VecSink(pub Vec<u8>);

impl Sink for VecSink {
    fn write(&mut self, bytes: &[u8]) -> Result<(), kestrel_core::Error> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// A small dense config (Qwen3-like by default).
pub fn tiny_config(arch: Arch) -> Config {
    let mut eos = [0u32; MAX_EOS];
    eos[0] = 7;
    eos[1] = 9;
    Config {
        arch,
        vocab_size: 40,
        hidden_size: 64,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 16,
        ffn_size: 96,
        rope_theta: 1e6,
        rms_norm_eps: 1e-6,
        max_position: 4096,
        tied_embeddings: false,
        qkv_bias: arch == Arch::Qwen2,
        qk_norm: arch != Arch::Qwen2,
        moe: None,
        mrope_section: [0; 3],
        rotary_dim: 16,
        linear: None,
        vision: None,
        bos_token_id: None,
        eos_token_ids: eos,
        eos_count: 2,
    }
}

/// The engine settings of the fixture tests: 2 threads, the KV cache in f32
/// or f16.
pub fn engine_args(kv_f32: bool) -> kestrel::engine::EngineArgs {
    kestrel::engine::EngineArgs {
        threads: Some(2),
        kv_f32,
        ..kestrel::engine::EngineArgs::default()
    }
}

/// Deterministic weights for any config (shared with `kestrel bench`).
pub use kestrel::bench::synthetic::SyntheticSource;

/// Converts `src` into an in-memory VQF with the checksum patched in.
pub fn build_vqf(cfg: &Config, mode: WeightMode, src: &dyn TensorSource) -> Vec<u8> {
    let n = convert::entry_count(cfg, mode, Some(src)).unwrap();
    let mut entries = vec![Entry::EMPTY; n];
    let mut scratch = vec![0f32; convert::scratch_len(cfg).unwrap()];
    let mut sink = VecSink::default();
    let written = convert::write_vqf(
        cfg,
        mode,
        kestrel_core::quant::Quantizer::Ggml,
        None,
        512,
        None,
        src,
        &mut entries,
        &mut scratch,
        &mut sink,
        &mut |_| {},
    )
    .unwrap();
    let mut bytes = sink.0;
    bytes[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&written.memsum.to_le_bytes());
    assert_eq!(
        kestrel_core::vqf::checksum(&bytes),
        written.memsum,
        "memsum == file_sum"
    );
    bytes
}

/// Reads a little-endian int64 `.npy` file's values.
pub fn read_npy_i64(path: &std::path::Path) -> Vec<i64> {
    read_npy(path, "<i8")
        .1
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Reads a little-endian float32 `.npy` file: (shape, values).
pub fn read_npy_f32(path: &std::path::Path) -> (Vec<usize>, Vec<f32>) {
    let (shape, data) = read_npy(path, "<f4");
    (shape, f32s(&data))
}

/// A little-endian, C-order `.npy` file of dtype `descr` (`<f4`, `|u1`,
/// `<i8`): (shape, raw data bytes).
pub fn read_npy(path: &std::path::Path, descr: &str) -> (Vec<usize>, Vec<u8>) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&b[..6], b"\x93NUMPY", "{}: not .npy", path.display());
    let (hlen, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    assert!(
        header.contains(&format!("'descr': '{descr}'"))
            && header.contains("'fortran_order': False"),
        "{}: {header}",
        path.display()
    );
    let shape_txt = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape: Vec<usize> = shape_txt
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    (shape, b[start + hlen..].to_vec())
}

/// The repository's tests/fixtures directory.
pub fn fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// The tied Qwen3 fixture (`dev_qwen3_dense_tied`) converted with `mode`
/// (256 positions) to `dir/m.vqf`.
pub fn tied_fixture(
    dir: &std::path::Path,
    mode: kestrel_core::convert::WeightMode,
) -> std::path::PathBuf {
    let vqf = dir.join("m.vqf");
    kestrel::convert::convert(
        &fixtures().join("dev_qwen3_dense_tied/hf"),
        &vqf,
        mode,
        Some(256),
        false,
    )
    .unwrap();
    vqf
}

/// A fresh temporary directory for one test, removed with what it holds
/// when dropped. Each call has its own (a per-process count in the name):
/// tests run in parallel threads, and a helper that two of them call must
/// not hand both the same folder, which the first to finish removes.
pub fn temp_dir(name: &str) -> ScratchDir {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    sweep_stale();
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("kestrel-test-{}-{name}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    ScratchDir(d)
}

/// A fresh temporary directory for `bytes` of test output (the real model's
/// converted files: up to 2.1 GB): under the temp directory when its file
/// system has that much free, else under /dev/shm (memory) when it has;
/// panics naming both places and their free space when neither has, so a
/// small disk is reported as such, not as a failed conversion. Removed when
/// dropped, a failing test's too (memory is not given back otherwise).
pub fn scratch_dir(name: &str, bytes: u64) -> ScratchDir {
    sweep_stale();
    let places = [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")];
    let mut seen = Vec::new();
    for place in &places {
        let free = free_bytes(place);
        if free.is_some_and(|f| f >= bytes) {
            let d = place.join(format!("kestrel-test-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            return ScratchDir(d);
        }
        seen.push(format!("{}: {free:?} bytes free", place.display()));
    }
    panic!(
        "{name} needs {bytes} bytes of scratch space; {}",
        seen.join(", ")
    );
}

/// Removes, once per process, the folders earlier test processes left in
/// the temp directory and /dev/shm: `kestrel-test-<pid>-*` of a process
/// that is no longer running (a folder kept for a whole test binary by
/// [`ScratchDir::into_path`], or any folder of a run that was killed).
/// Where `/proc` does not show which processes run, nothing is removed.
fn sweep_stale() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if !std::path::Path::new("/proc/self").exists() {
            return;
        }
        for place in [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")] {
            let Ok(entries) = std::fs::read_dir(&place) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("kestrel-test-")) else {
                    continue;
                };
                let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                    continue;
                };
                let running = std::path::Path::new(&format!("/proc/{pid}")).exists();
                if pid != std::process::id() && !running {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    });
}

/// A folder from [`scratch_dir`], removed with what it holds when dropped.
pub struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    /// The folder's path, kept after the test (for a file a helper hands
    /// on, or a conversion shared by a test binary's tests).
    pub fn into_path(self) -> std::path::PathBuf {
        let d = self.0.clone();
        std::mem::forget(self);
        d
    }
}

impl AsRef<std::path::Path> for ScratchDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Free bytes on the file system holding `path` (by `df`), `None` when it
/// cannot be read.
fn free_bytes(path: &std::path::Path) -> Option<u64> {
    let out = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

/// Integer array `key` of a JSON document.
pub fn json_ids(doc: &[u8], key: &str) -> Vec<u32> {
    let root = kestrel_core::json::parse(doc).unwrap();
    root.get(key)
        .and_then(|v| v.iter_array())
        .unwrap_or_else(|| panic!("{key} missing"))
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

/// Float array `key` of a JSON document.
pub fn json_f64s(doc: &[u8], key: &str) -> Vec<f64> {
    let root = kestrel_core::json::parse(doc).unwrap();
    root.get(key)
        .and_then(|v| v.iter_array())
        .unwrap()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// max |a - b| and ||a - b|| / ||b||.
pub fn diff(a: &[f32], b: &[f32]) -> (f64, f64) {
    assert_eq!(a.len(), b.len());
    let mut max = 0f64;
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let d = (x as f64 - y as f64).abs();
        max = max.max(d);
        num += d * d;
        den += (y as f64) * (y as f64);
    }
    (max, (num / den.max(1e-30)).sqrt())
}

/// Every tensor of a VQF file: (name, stored bytes), in directory order.
pub fn tensors_of(path: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let v = kestrel_core::vqf::Vqf::parse(&bytes).unwrap();
    v.entries()
        .map(|e| (e.name_str().to_string(), v.data(&e).to_vec()))
        .collect()
}

/// The share of rows (`vocab` logits each) whose argmax is the same in `a`
/// and `b`.
pub fn argmax_agreement(a: &[f32], b: &[f32], vocab: usize) -> f64 {
    let rows = a.len() / vocab;
    let same = a
        .chunks(vocab)
        .zip(b.chunks(vocab))
        .filter(|(x, y)| kestrel_core::sampler::argmax(x) == kestrel_core::sampler::argmax(y))
        .count();
    same as f64 / rows as f64
}

/// `Weights::new` with its layer storage sized from the file's config and
/// leaked (a test opens a handful of models).
pub fn weights(
    v: kestrel_core::vqf::Vqf<'_>,
    prefill_q8: bool,
) -> Result<kestrel_core::model::weights::Weights<'_>, kestrel_core::Error> {
    use kestrel_core::model::weights::{LayerWeights, Weights};
    let n = Weights::layer_slots(v.config());
    let layers = Box::leak(vec![LayerWeights::EMPTY; n].into_boxed_slice());
    Weights::new(v, prefill_q8, layers)
}

/// The GGUF rows (row-major blocks, padding dropped) a matrix in a layout
/// that keeps source blocks holds: the inverse of the repack, for checking
/// that a file holds a source's blocks byte for byte. `None` for the plain
/// layouts.
pub fn unpack_rows(m: &kestrel_core::quant::repack::PackedMatrix) -> Option<Vec<u8>> {
    use kestrel_core::quant::repack::Layout;
    type Whole = fn(&[u8], usize, usize, &mut [u8]) -> Result<(), kestrel_core::Error>;
    let ty = kestrel_core::gguf::GgmlType::from_id(m.layout.spec().kept?.ggml_id)?;
    let row_bytes = ty.row_bytes(m.cols as u64).unwrap();
    let mut out = vec![0u8; m.rows * row_bytes];
    let unpack: Whole = match m.layout {
        Layout::Q4_0x4 => unpack_q4_0,
        Layout::Q8_0x8 => unpack_q8_0,
        Layout::Iq4Nlx4 => unpack_iq4_nl,
        Layout::Q5_0x4 => unpack_q5_0,
        Layout::Q5_1x4 => unpack_q5_1,
        Layout::Q4Kx4 => unpack_q4_k,
        Layout::Q5Kx4 => unpack_q5_k,
        Layout::Q6Kx8 => unpack_q6_k,
        Layout::Q3Kx8 => unpack_q3_k,
        Layout::Iq4Xsx8 => unpack_iq4_xs,
        Layout::Q2Kx8 => unpack_q2_k,
        Layout::Iq3Xxsx8 => unpack_iq3_xxs,
        Layout::Iq2Xxsx8 => unpack_iq2_xxs,
        Layout::Iq2Xsx8 => unpack_iq2_xs,
        Layout::Iq2Sx8 => unpack_iq2_s,
        Layout::Iq3Sx8 => unpack_iq3_s,
        Layout::F32 | Layout::F16 | Layout::GgufRows => return None,
    };
    unpack(m.bytes, m.rows, m.cols, &mut out).unwrap();
    Some(out)
}

/// The inverse of a 4-row nibble layout's repacking
/// (`kestrel_kernels::layouts::q4_0::repack_nibble_x4` with `xor`): the
/// packed matrix's real rows back as GGUF blocks of 18 bytes.
fn unpack_nibble_x4(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
    xor: u8,
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::q4_0::{Q4X4_BLOCK_BYTES, Q4X4_ROWS, Q4_0_BLOCK_BYTES};
    let nb = cols / 32;
    let expected = rows.div_ceil(Q4X4_ROWS) * nb * Q4X4_BLOCK_BYTES;
    fits_32("q4_0x4 matrix bytes", cols, expected, packed.len())?;
    fits_32(
        "q4_0 rows bytes",
        cols,
        rows * nb * Q4_0_BLOCK_BYTES,
        out.len(),
    )?;
    for row in 0..rows {
        for b in 0..nb {
            let sb = &packed[((row / 4) * nb + b) * Q4X4_BLOCK_BYTES..][..Q4X4_BLOCK_BYTES];
            let r = row % 4;
            let dst = &mut out[(row * nb + b) * Q4_0_BLOCK_BYTES..][..Q4_0_BLOCK_BYTES];
            dst[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for c in 0..4 {
                for k in 0..4 {
                    dst[2 + 4 * c + k] = sb[8 + 16 * c + 4 * r + k] ^ xor;
                }
            }
        }
    }
    Ok(())
}

/// The inverse of `kestrel_kernels::layouts::q4_0::repack_q4_0`.
pub fn unpack_q4_0(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    let xor = kestrel_kernels::layouts::q4_0::Q4_0X4_XOR;
    unpack_nibble_x4(packed, rows, cols, out, xor)
}

/// The inverse of `kestrel_kernels::layouts::iq4nl::repack_iq4_nl`.
pub fn unpack_iq4_nl(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    let xor = kestrel_kernels::layouts::iq4nl::IQ4_NLX4_XOR;
    unpack_nibble_x4(packed, rows, cols, out, xor)
}

/// The inverse of `kestrel_kernels::layouts::q8_0::repack_q8_0`.
pub fn unpack_q8_0(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::q8_0::{Q8X8_BLOCK_BYTES, Q8X8_ROWS, Q8_0_BLOCK_BYTES};
    let nb = cols / 32;
    let expected = rows.div_ceil(Q8X8_ROWS) * nb * Q8X8_BLOCK_BYTES;
    fits_32("q8_0x8 matrix bytes", cols, expected, packed.len())?;
    fits_32(
        "q8_0 rows bytes",
        cols,
        rows * nb * Q8_0_BLOCK_BYTES,
        out.len(),
    )?;
    for row in 0..rows {
        for b in 0..nb {
            let sb = &packed[((row / 8) * nb + b) * Q8X8_BLOCK_BYTES..][..Q8X8_BLOCK_BYTES];
            let r = row % 8;
            let dst = &mut out[(row * nb + b) * Q8_0_BLOCK_BYTES..][..Q8_0_BLOCK_BYTES];
            dst[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for c in 0..8 {
                dst[2 + 4 * c..][..4].copy_from_slice(&sb[16 + 32 * c + 4 * r..][..4]);
            }
        }
    }
    Ok(())
}

/// An inverse's size check for rows of 32-weight blocks: `actual` bytes
/// where `expected` are due, `cols` a multiple of 32.
fn fits_32(
    what: &'static str,
    cols: usize,
    expected: usize,
    actual: usize,
) -> Result<(), kestrel_core::Error> {
    if expected == actual && cols.is_multiple_of(32) {
        Ok(())
    } else {
        Err(kestrel_core::Error::SizeMismatch {
            what,
            expected,
            actual,
        })
    }
}

// The inverse of Q3_Kx8's repacker (`kestrel_kernels::layouts::q3k`), for
// the tests alone.

use kestrel_kernels::layout::QK_K;
use kestrel_kernels::layouts::q3k::{
    pair_scale, places, q3_k_bytes, q3_kx8_bytes, Q3KX8_BLOCK_BYTES, Q3KX8_PAIR_BYTES, Q3KX8_ROWS,
    Q3_K_BLOCK_BYTES,
};

/// An inverse's size check: `actual` bytes where `expected` (`None`: it
/// overflows) are due, for rows of `cols` (a multiple of 256).
fn fits_k(
    what: &'static str,
    cols: usize,
    expected: Option<usize>,
    actual: usize,
) -> Result<(), kestrel_core::Error> {
    match expected {
        Some(e) if e == actual && cols.is_multiple_of(QK_K) => Ok(()),
        _ => Err(kestrel_core::Error::SizeMismatch {
            what,
            expected: expected.unwrap_or(usize::MAX),
            actual,
        }),
    }
}

/// Sets the 6-bit quant of weight `i` in a GGUF Q6_K block (its `ql` nibble
/// and `qh` bits, leaving the others).
#[inline]
fn set_gguf_q6(block: &mut [u8], i: usize, q: u8) {
    let (n, c, l) = (i / 128, (i % 128) / 32, i % 32);
    let at = 64 * n + 32 * (c & 1) + l;
    block[at] = if c < 2 {
        (block[at] & 0xf0) | (q & 0x0f)
    } else {
        (block[at] & 0x0f) | (q << 4)
    };
    let at = 128 + 32 * n + l;
    block[at] = (block[at] & !(3 << (2 * c))) | (((q >> 4) & 3) << (2 * c));
}

/// Writes back the GGUF Q6_K block of row `r` of a Q6_Kx8 super-block.
fn unpack_q6_super_block(sb: &[u8], r: usize, block: &mut [u8]) {
    use kestrel_kernels::layouts::q6k::{Q6KX8_PAIR_BYTES, Q6KX8_ROWS};
    block[208..210].copy_from_slice(&sb[2 * r..2 * r + 2]);
    for p in 0..QK_K / 32 {
        let pb = &sb[2 * Q6KX8_ROWS + Q6KX8_PAIR_BYTES * p..][..Q6KX8_PAIR_BYTES];
        for h in 0..2 {
            let j = 2 * p + h;
            block[192 + j] = pb[8 * h + r];
            let g = &pb[16 + 96 * h..][..96];
            for k in 0..4 {
                let at = |s: usize| g[32 * s + 4 * r + k];
                for s in 0..3 {
                    set_gguf_q6(block, 16 * j + 4 * s + k, (at(s) >> 2) ^ 32);
                }
                let d = ((at(0) & 3) << 4) | ((at(1) & 3) << 2) | (at(2) & 3);
                set_gguf_q6(block, 16 * j + 12 + k, d ^ 32);
            }
        }
    }
}

/// The inverse of `kestrel_kernels::layouts::q6k::repack_q6_k`: the `rows`
/// real rows of a Q6_Kx8 matrix as row-major GGUF Q6_K bytes.
pub fn unpack_q6_k(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::q6k::*;
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "q6_kx8 matrix bytes",
        q6_kx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("q6_k output bytes", q6_k_bytes(rows, cols), out.len())?;
    let row_len = nb * Q6_K_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / Q6KX8_ROWS, row % Q6KX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * Q6KX8_BLOCK_BYTES..][..Q6KX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * Q6_K_BLOCK_BYTES..][..Q6_K_BLOCK_BYTES];
            unpack_q6_super_block(sb, r, block);
        }
    }
    Ok(())
}

/// The inverse of a Q5 layout's repacker: the real rows of a Q5_0x4 or
/// Q5_1x4 matrix written back as row-major GGUF blocks, byte for byte.
fn unpack_q5(
    f: kestrel_kernels::layouts::q5::Q5Format,
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::q5::{check, Q5X4_ROWS};
    let (nb, row_len) = check(f, out.len(), packed.len(), rows, cols)?;
    let head = 2 * f.f16s;
    for (i, sb) in packed.chunks_exact(f.super_bytes).enumerate() {
        let (g, b) = (i / nb, i % nb);
        for r in 0..Q5X4_ROWS.min(rows - g * Q5X4_ROWS) {
            let row = g * Q5X4_ROWS + r;
            let blk = &mut out[row * row_len + b * f.block_bytes..][..f.block_bytes];
            for h in 0..f.f16s {
                blk[2 * h..2 * h + 2].copy_from_slice(&sb[8 * h + 2 * r..][..2]);
            }
            let quants = &sb[4 * head..];
            let mut qh = 0u32;
            for k in 0..4 {
                let plane = !quants[64 + 4 * r + k];
                for p in 0..8 {
                    qh |= ((plane >> p) as u32 & 1) << (4 * p + k);
                }
                for c in 0..4 {
                    blk[head + 4 + 4 * c + k] = quants[16 * c + 4 * r + k];
                }
            }
            blk[head..head + 4].copy_from_slice(&qh.to_le_bytes());
        }
    }
    Ok(())
}

/// The inverse of `kestrel_kernels::layouts::q5::repack_q5_0`.
pub fn unpack_q5_0(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    unpack_q5(kestrel_kernels::layouts::q5::Q5_0, packed, rows, cols, out)
}

/// The inverse of `kestrel_kernels::layouts::q5::repack_q5_1`.
pub fn unpack_q5_1(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    unpack_q5(kestrel_kernels::layouts::q5::Q5_1, packed, rows, cols, out)
}

/// The inverse of a layout that permutes its rows' GGUF bytes (Q4_Kx4,
/// Q5_Kx4): the `rows` real rows of a packed matrix of `group_rows`-row
/// groups of `super_bytes`-byte super-blocks written back as GGUF blocks
/// of `block_bytes` (`out`), byte `i` of row `r`'s block read at
/// `offset(r, i)` of its super-block.
#[allow(clippy::too_many_arguments)]
fn unpack_scattered(
    names: [&'static str; 2],
    packed: &[u8],
    (rows, cols): (usize, usize),
    out: &mut [u8],
    (group_rows, block_bytes, super_bytes): (usize, usize, usize),
    offset: fn(usize, usize) -> usize,
) -> Result<(), kestrel_core::Error> {
    let nb = cols / QK_K;
    let groups_bytes = rows
        .div_ceil(group_rows)
        .checked_mul(nb)
        .and_then(|n| n.checked_mul(super_bytes));
    fits_k(names[0], cols, groups_bytes, packed.len())?;
    let row_len = nb * block_bytes;
    fits_k(names[1], cols, rows.checked_mul(row_len), out.len())?;
    for (row, dst_row) in out.chunks_exact_mut(row_len.max(1)).enumerate().take(rows) {
        let (g, r) = (row / group_rows, row % group_rows);
        for (b, dst) in dst_row.chunks_exact_mut(block_bytes).enumerate() {
            let sb = &packed[(g * nb + b) * super_bytes..][..super_bytes];
            for (i, byte) in dst.iter_mut().enumerate() {
                *byte = sb[offset(r, i)];
            }
        }
    }
    Ok(())
}

/// The inverse of `kestrel_kernels::layouts::q4k::repack_q4_k`.
pub fn unpack_q4_k(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::q4k::*;
    unpack_scattered(
        ["q4_kx4 matrix bytes", "q4_k matrix bytes"],
        packed,
        (rows, cols),
        out,
        (Q4KX4_ROWS, Q4_K_BLOCK_BYTES, Q4KX4_BLOCK_BYTES),
        q4_kx4_offset,
    )
}

/// The inverse of `kestrel_kernels::layouts::q5k::repack_q5_k`.
pub fn unpack_q5_k(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::q5k::*;
    unpack_scattered(
        ["q5_kx4 matrix bytes", "q5_k matrix bytes"],
        packed,
        (rows, cols),
        out,
        (Q5KX4_ROWS, Q5_K_BLOCK_BYTES, Q5KX4_BLOCK_BYTES),
        q5_kx4_offset,
    )
}

/// Sets weight `i` of a GGUF Q3_K block to the 3-bit `f` (its `qs` and
/// `hmask` bits, leaving the others).
#[inline]
fn set_gguf_f(block: &mut [u8], i: usize, f: u8) {
    let (n, j, l) = (i / 128, (i % 128) / 32, i % 32);
    let at = 32 + 32 * n + l;
    block[at] = (block[at] & !(3 << (2 * j))) | ((f & 3) << (2 * j));
    let bit = 1 << (4 * n + j);
    block[l] = if f & 4 == 0 {
        block[l] | bit
    } else {
        block[l] & !bit
    };
}

/// Sets scale `s` of a GGUF Q3_K block to `v` (0..64).
#[inline]
fn set_gguf_scale(block: &mut [u8], s: usize, v: u8) {
    if s < 8 {
        block[96 + s] = (block[96 + s] & 0xf0) | (v & 0x0f);
    } else {
        block[88 + s] = (block[88 + s] & 0x0f) | (v << 4);
    }
    let (at, shift) = (104 + s % 4, 2 * (s / 4));
    block[at] = (block[at] & !(3 << shift)) | (((v >> 4) & 3) << shift);
}

/// Writes back the GGUF Q3_K block of row `r` of a Q3_Kx8 super-block.
fn unpack_super_block(sb: &[u8], r: usize, block: &mut [u8]) {
    block[108..110].copy_from_slice(&sb[2 * r..2 * r + 2]);
    for j in 0..QK_K / 16 {
        let pair = &sb[2 * Q3KX8_ROWS + Q3KX8_PAIR_BYTES * (j / 2)..];
        set_gguf_scale(block, j, pair_scale(pair, Q3KX8_ROWS * (j % 2) + r) ^ 32);
        for k in 0..4 {
            let w = 16 * j + k;
            let (ra, na, shift) = places(r, w);
            let (rb, nb) = (sb[ra], sb[na] >> shift);
            set_gguf_f(block, w, rb >> 5);
            set_gguf_f(block, w + 4, (rb >> 2) & 7);
            set_gguf_f(block, w + 8, (rb & 3) | ((nb >> 3) & 1) << 2);
            set_gguf_f(block, w + 12, nb & 7);
        }
    }
}

/// Inverse of [`q3k::repack_q3_k`]: the `rows` real rows as row-major GGUF Q3_K
/// bytes, identical to the bytes that were repacked.
pub fn unpack_q3_k(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "q3_kx8 matrix bytes",
        q3_kx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("q3_k output bytes", q3_k_bytes(rows, cols), out.len())?;
    let row_len = nb * Q3_K_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / Q3KX8_ROWS, row % Q3KX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * Q3KX8_BLOCK_BYTES..][..Q3KX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * Q3_K_BLOCK_BYTES..][..Q3_K_BLOCK_BYTES];
            unpack_super_block(sb, r, block);
        }
    }
    Ok(())
}

// The inverse of IQ4_XSx8's repacker (`kestrel_kernels::layouts::iq4xs`),
// for the tests alone.

/// Unpacks an IQ4_XSx8 matrix (`rows x cols`) into row-major GGUF IQ4_XS
/// blocks (`out`: `rows * cols / 256 * 136` bytes), the inverse of
/// `repack_iq4_xs`.
pub fn unpack_iq4_xs(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::iq4xs::{
        iq4_xs_bytes, iq4_xsx8_bytes, nibble_place, scale_places, IQ4XSX8_BLOCK_BYTES,
        IQ4XSX8_ROWS, IQ4_XS_BLOCK_BYTES,
    };
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "iq4_xsx8 matrix bytes",
        iq4_xsx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("iq4_xs output bytes", iq4_xs_bytes(rows, cols), out.len())?;
    let row_len = nb * IQ4_XS_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / IQ4XSX8_ROWS, row % IQ4XSX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * IQ4XSX8_BLOCK_BYTES..][..IQ4XSX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * IQ4_XS_BLOCK_BYTES..][..IQ4_XS_BLOCK_BYTES];
            block.fill(0);
            block[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            let mut scales_h = 0u16;
            for p in 0..QK_K / 32 {
                let ((lo_at, lo_shift), (hi_at, hi_shift)) = scale_places(8 * p + r);
                let u = (sb[lo_at] >> lo_shift) & 15 | ((sb[hi_at] >> hi_shift) & 3) << 4;
                let ls = u ^ 32;
                block[4 + p / 2] |= (ls & 15) << (4 * (p % 2));
                scales_h |= ((ls >> 4) as u16) << (2 * p);
            }
            block[2..4].copy_from_slice(&scales_h.to_le_bytes());
            for i in 0..QK_K {
                let (at, shift) = nibble_place(r, i);
                let n = (sb[at] >> shift) & 15;
                let (p, l) = (i / 32, i % 32);
                block[8 + 16 * p + l % 16] |= n << (4 * (l / 16));
            }
        }
    }
    Ok(())
}

// The inverse of Q2_Kx8's repacker (`kestrel_kernels::layouts::q2k`), for
// the tests alone.

/// Unpacks a Q2_Kx8 matrix (`rows x cols`) into row-major GGUF Q2_K blocks
/// (`out`: `rows * cols / 256 * 84` bytes), the inverse of `repack_q2_k`.
pub fn unpack_q2_k(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::q2k::{
        q2_k_bytes, q2_kx8_bytes, quant_place, scale_place, Q2KX8_BLOCK_BYTES, Q2KX8_ROWS,
        Q2_K_BLOCK_BYTES,
    };
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "q2_kx8 matrix bytes",
        q2_kx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("q2_k output bytes", q2_k_bytes(rows, cols), out.len())?;
    let row_len = nb * Q2_K_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / Q2KX8_ROWS, row % Q2KX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * Q2KX8_BLOCK_BYTES..][..Q2KX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * Q2_K_BLOCK_BYTES..][..Q2_K_BLOCK_BYTES];
            block.fill(0);
            block[80..82].copy_from_slice(&sb[2 * r..2 * r + 2]);
            block[82..84].copy_from_slice(&sb[16 + 2 * r..18 + 2 * r]);
            for j in 0..QK_K / 16 {
                block[j] = sb[scale_place(r, j)];
            }
            for i in 0..QK_K {
                let (at, shift) = quant_place(r, i);
                let q = (sb[at] >> shift) & 3;
                let (n, j, l) = (i / 128, (i % 128) / 32, i % 32);
                block[16 + 32 * n + l] |= q << (2 * j);
            }
        }
    }
    Ok(())
}

// The inverses of the codebook layouts' repackers
// (`kestrel_kernels::layouts::{iq3xxs, iq3s}`), for the tests alone.

/// Unpacks an IQ3_XXSx8 matrix (`rows x cols`) into row-major GGUF IQ3_XXS
/// blocks (`out`: `rows * cols / 256 * 98` bytes), the inverse of
/// `repack_iq3_xxs`.
pub fn unpack_iq3_xxs(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::iq3xxs::{
        index_place, iq3_xxs_bytes, iq3_xxsx8_bytes, word_place, IQ3XXSX8_BLOCK_BYTES,
        IQ3XXSX8_ROWS, IQ3_XXS_BLOCK_BYTES,
    };
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "iq3_xxsx8 matrix bytes",
        iq3_xxsx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("iq3_xxs output bytes", iq3_xxs_bytes(rows, cols), out.len())?;
    let row_len = nb * IQ3_XXS_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / IQ3XXSX8_ROWS, row % IQ3XXSX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * IQ3XXSX8_BLOCK_BYTES..][..IQ3XXSX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * IQ3_XXS_BLOCK_BYTES..][..IQ3_XXS_BLOCK_BYTES];
            block[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for c in 0..QK_K / 4 {
                block[2 + c] = sb[index_place(r, c)];
            }
            for p in 0..QK_K / 32 {
                let at = 2 + QK_K / 4 + 4 * p;
                block[at..at + 4].copy_from_slice(&sb[word_place(r, p)..][..4]);
            }
        }
    }
    Ok(())
}

/// Unpacks an IQ2_XXSx8 matrix (`rows x cols`) into row-major GGUF IQ2_XXS
/// blocks (`out`: `rows * cols / 256 * 66` bytes), the inverse of
/// `repack_iq2_xxs`.
pub fn unpack_iq2_xxs(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::iq2xxs::{
        index_place, iq2_xxs_bytes, iq2_xxsx8_bytes, word_place, IQ2XXSX8_BLOCK_BYTES,
        IQ2XXSX8_ROWS, IQ2_XXS_BLOCK_BYTES,
    };
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "iq2_xxsx8 matrix bytes",
        iq2_xxsx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("iq2_xxs output bytes", iq2_xxs_bytes(rows, cols), out.len())?;
    let row_len = nb * IQ2_XXS_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / IQ2XXSX8_ROWS, row % IQ2XXSX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * IQ2XXSX8_BLOCK_BYTES..][..IQ2XXSX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * IQ2_XXS_BLOCK_BYTES..][..IQ2_XXS_BLOCK_BYTES];
            block[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for p in 0..QK_K / 32 {
                let at = 2 + 8 * p;
                for l in 0..4 {
                    block[at + l] = sb[index_place(r, 4 * p + l)];
                }
                block[at + 4..at + 8].copy_from_slice(&sb[word_place(r, p)..][..4]);
            }
        }
    }
    Ok(())
}

/// Unpacks an IQ2_XSx8 matrix (`rows x cols`) into row-major GGUF IQ2_XS
/// blocks (`out`: `rows * cols / 256 * 74` bytes), the inverse of
/// `repack_iq2_xs`.
pub fn unpack_iq2_xs(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::iq2xs::{
        high_place, index_place, iq2_xs_bytes, iq2_xsx8_bytes, scale_place, IQ2XSX8_BLOCK_BYTES,
        IQ2XSX8_ROWS, IQ2_XS_BLOCK_BYTES,
    };
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "iq2_xsx8 matrix bytes",
        iq2_xsx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("iq2_xs output bytes", iq2_xs_bytes(rows, cols), out.len())?;
    let row_len = nb * IQ2_XS_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / IQ2XSX8_ROWS, row % IQ2XSX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * IQ2XSX8_BLOCK_BYTES..][..IQ2XSX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * IQ2_XS_BLOCK_BYTES..][..IQ2_XS_BLOCK_BYTES];
            block[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for l in 0..QK_K / 8 {
                block[2 + 2 * l] = sb[index_place(r, l)];
                block[3 + 2 * l] = sb[high_place(r, l)];
            }
            for p in 0..QK_K / 32 {
                block[2 + QK_K / 4 + p] = sb[scale_place(r, p)];
            }
        }
    }
    Ok(())
}

/// Unpacks an IQ2_Sx8 matrix (`rows x cols`) into row-major GGUF IQ2_S
/// blocks (`out`: `rows * cols / 256 * 82` bytes), the inverse of
/// `repack_iq2_s`.
pub fn unpack_iq2_s(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::iq2s::{
        high_place, index_place, iq2_s_bytes, iq2_sx8_bytes, scale_place, sign_place,
        IQ2SX8_BLOCK_BYTES, IQ2SX8_ROWS, IQ2_S_BLOCK_BYTES,
    };
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "iq2_sx8 matrix bytes",
        iq2_sx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("iq2_s output bytes", iq2_s_bytes(rows, cols), out.len())?;
    let row_len = nb * IQ2_S_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / IQ2SX8_ROWS, row % IQ2SX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * IQ2SX8_BLOCK_BYTES..][..IQ2SX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * IQ2_S_BLOCK_BYTES..][..IQ2_S_BLOCK_BYTES];
            block[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for l in 0..QK_K / 8 {
                block[2 + l] = sb[index_place(r, l)];
                block[2 + QK_K / 8 + l] = sb[sign_place(r, l)];
            }
            for p in 0..QK_K / 32 {
                block[2 + QK_K / 4 + p] = sb[high_place(r, p)];
                block[2 + QK_K / 4 + QK_K / 32 + p] = sb[scale_place(r, p)];
            }
        }
    }
    Ok(())
}

/// Unpacks an IQ3_Sx8 matrix (`rows x cols`) into row-major GGUF IQ3_S
/// blocks (`out`: `rows * cols / 256 * 110` bytes), the inverse of
/// `repack_iq3_s`.
pub fn unpack_iq3_s(
    packed: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), kestrel_core::Error> {
    use kestrel_kernels::layouts::iq3s::{
        high_place, index_place, iq3_s_bytes, iq3_sx8_bytes, scale_place, sign_place,
        IQ3SX8_BLOCK_BYTES, IQ3SX8_ROWS, IQ3_S_BLOCK_BYTES,
    };
    let nb = cols / QK_K;
    let fits = |what, expected, actual| fits_k(what, cols, expected, actual);
    fits(
        "iq3_sx8 matrix bytes",
        iq3_sx8_bytes(rows, cols),
        packed.len(),
    )?;
    fits("iq3_s output bytes", iq3_s_bytes(rows, cols), out.len())?;
    let row_len = nb * IQ3_S_BLOCK_BYTES;
    for row in 0..rows {
        let (g, r) = (row / IQ3SX8_ROWS, row % IQ3SX8_ROWS);
        for b in 0..nb {
            let sb = &packed[(g * nb + b) * IQ3SX8_BLOCK_BYTES..][..IQ3SX8_BLOCK_BYTES];
            let block = &mut out[row * row_len + b * IQ3_S_BLOCK_BYTES..][..IQ3_S_BLOCK_BYTES];
            block.fill(0);
            block[..2].copy_from_slice(&sb[2 * r..2 * r + 2]);
            for c in 0..QK_K / 4 {
                block[2 + c] = sb[index_place(r, c)];
            }
            for p in 0..QK_K / 32 {
                block[66 + p] = sb[high_place(r, p)];
                let (at, shift) = scale_place(r, p);
                block[106 + p / 2] |= ((sb[at] >> shift) & 15) << (4 * (p % 2));
            }
            for k in 0..QK_K / 8 {
                block[74 + k] = sb[sign_place(r, k)];
            }
        }
    }
    Ok(())
}
