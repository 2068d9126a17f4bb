//! The DRAM wall probe: the same bytes streamed compact (18- and 34-byte
//! blocks, as Q4_0 and Q8_0 rows are) and at a 64-byte pitch, on the pool.

use super::median_ms;
use crate::pool::Pool;
use kestrel_core::parallel::Parallel;

/// One DRAM probe result.
pub(super) struct Probe {
    pub(super) name: &'static str,
    pub(super) ms: f64,
    pub(super) payload_gbs: f64,
    pub(super) raw_gbs: f64,
}

/// Reads the `block`-byte payloads at a `stride`-byte pitch over `buf`
/// (`kestrel_kernels::read_sum`, SIMD loads), split over the pool (each
/// thread a contiguous range of whole steps).
fn stream_sum(pool: &Pool, buf: &[u8], stride: usize, block: usize) -> u64 {
    let n = buf.len() / stride;
    let parts = pool.threads().max(1);
    let mut items: Vec<u64> = vec![0; parts];
    pool.for_each_mut(&mut items, &|p, acc| {
        let (b0, b1) = (n * p / parts, n * (p + 1) / parts);
        *acc = kestrel_kernels::read_sum(&buf[b0 * stride..b1 * stride], stride, block);
    });
    items.iter().fold(0u64, |a, &b| a.wrapping_add(b))
}

/// Bytes of memory available now (`MemAvailable` of /proc/meminfo), if
/// known.
fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The probe's rows: `rows` of `blocks` 64-byte steps (its largest
/// buffer is `rows * blocks * 64` bytes: 1 GiB by default), fewer when
/// that is more than a quarter of the memory available now, so that a
/// board with little RAM and a model mapped still runs it (said on
/// stderr).
fn probe_rows(rows: usize, blocks: usize) -> usize {
    let Some(avail) = mem_available() else {
        return rows;
    };
    let step = (blocks.max(1) * 64) as u64;
    let fit = (avail / 4 / step).max(1024) as usize;
    if fit < rows {
        eprintln!(
            "[kestrel] bench: DRAM probe on {fit} rows instead of {rows} ({} MB, a quarter of the {} MB available)",
            (fit as u64 * step) >> 20,
            avail >> 20
        );
        fit
    } else {
        rows
    }
}

/// Runs the probe over `rows` (at most what [`probe_rows`] allows) of
/// `blocks` blocks; returns the rows used and the results (none for no
/// rows: `--probe-rows 0` turns the probe off).
pub(super) fn dram_probe(
    pool: &Pool,
    rows: usize,
    blocks: usize,
    repeats: usize,
) -> (usize, Vec<Probe>) {
    let rows = probe_rows(rows, blocks);
    let n = rows * blocks;
    let mut out = Vec::new();
    if n == 0 {
        return (rows, out);
    }
    for (name, stride, block) in [
        ("compact 18B/block", 18usize, 18usize),
        ("compact 34B/block", 34, 34),
        ("64B-aligned/block", 64, 18),
    ] {
        let buf: Vec<u8> = (0..n * stride).map(|i| (i * 31 + 7) as u8).collect();
        let mut sink = 0u64;
        let ms = median_ms(repeats, || {
            sink = sink.wrapping_add(stream_sum(pool, &buf, stride, block));
        });
        std::hint::black_box(sink);
        let secs = ms * 1e-3;
        out.push(Probe {
            name,
            ms,
            payload_gbs: (n * block) as f64 / secs / 1e9,
            raw_gbs: (n * stride) as f64 / secs / 1e9,
        });
    }
    (rows, out)
}
