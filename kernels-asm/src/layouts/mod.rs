//! Layouts written whole, one module each: a layout's geometry and byte
//! order, its repacker (and the inverse the tests use), its scalar
//! specification (`generic`) and each architecture's kernels (`aarch64`,
//! `x86_64`, the one of the build also named `arch`), which instantiate the
//! block families' shared texts of the architecture modules. Adding a
//! layout is a module here and its row in the core's layout table
//! (docs/architecture.md, "Adding a layout").

pub mod iq3;
pub mod iq3s;
pub mod iq3xxs;
pub mod iq4nl;
pub mod iq4xs;
pub mod q2k;
pub mod q3k;

/// The repacking loop of an 8-row K layout (`q3k`, `iq4xs`, `q2k`): for
/// each row group and super-block column of `out` (`super_bytes` each), the
/// GGUF blocks (`block_bytes` each) of its up to 8 real rows of the
/// row-major `src` through `pack` (missing rows are padding). The caller
/// has checked the sizes: `src` holds `rows` rows of `cols / 256` blocks and
/// `out` whole row groups of them.
pub(crate) fn repack_row_groups(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
    (block_bytes, super_bytes): (usize, usize),
    pack: fn(&[&[u8]], &mut [u8]),
) {
    const ROWS: usize = 8;
    let nb = cols / crate::layout::QK_K;
    let row_len = nb * block_bytes;
    for (i, sb) in out.chunks_exact_mut(super_bytes).enumerate() {
        let (g, b) = (i / nb, i % nb);
        let n = (rows - g * ROWS).min(ROWS);
        let mut blocks: [&[u8]; ROWS] = [&[]; ROWS];
        for (r, blk) in blocks.iter_mut().enumerate().take(n) {
            let row = g * ROWS + r;
            *blk = &src[row * row_len + b * block_bytes..][..block_bytes];
        }
        pack(&blocks[..n], sb);
    }
}
