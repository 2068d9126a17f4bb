//! Layouts written whole, one module each: a layout's geometry and byte
//! order, its repacker (and the inverse the tests use), its scalar
//! specification (`generic`) and each architecture's kernels (`aarch64`,
//! `x86_64`, the one of the build also named `arch`), which instantiate the
//! block families' shared texts of the architecture modules. Adding a
//! layout is a module here and its row in the core's layout table
//! (docs/architecture/kernels.md, "Adding a layout").

pub mod iq2s;
pub mod iq2xs;
pub mod iq2xxs;
pub mod iq3;
pub mod iq3s;
pub mod iq3xxs;
pub mod iq4nl;
pub mod iq4xs;
pub mod q2k;
pub mod q3k;
pub mod q4_0;
pub mod q4k;
pub mod q5;
pub mod q5k;
pub mod q6k;
pub mod q8_0;

/// Bytes of a `rows x cols` matrix in an 8-row layout of `super_bytes`-byte
/// super-blocks (256 weights of 8 rows), padding rows included (`None`: it
/// overflows).
pub(crate) fn x8_bytes(rows: usize, cols: usize, super_bytes: usize) -> Option<usize> {
    row_group_bytes(rows, cols, 8, super_bytes)
}

/// Bytes of a `rows x cols` matrix in a layout of `group_rows`-row groups
/// of `super_bytes`-byte super-blocks (256 weights of each row), padding
/// rows included (`None`: it overflows).
pub(crate) fn row_group_bytes(
    rows: usize,
    cols: usize,
    group_rows: usize,
    super_bytes: usize,
) -> Option<usize> {
    rows.div_ceil(group_rows)
        .checked_mul(cols / crate::layout::QK_K)?
        .checked_mul(super_bytes)
}

/// Bytes of a `rows x cols` matrix of row-major GGUF `block_bytes`-byte
/// blocks of 256 weights (`None`: it overflows).
pub(crate) fn gguf_bytes(rows: usize, cols: usize, block_bytes: usize) -> Option<usize> {
    rows.checked_mul(cols / crate::layout::QK_K)?
        .checked_mul(block_bytes)
}

/// The repacking of an 8-row K layout (`q3k`, `iq4xs`, `q2k`, `iq2xxs`, `iq3xxs`,
/// `iq3s`): after checking that `cols` is a multiple of 256, `src` holds
/// `rows` rows of GGUF blocks (`block_bytes` each) and `out` the packed
/// matrix (`names`: the three lengths' names for the errors), each row
/// group and super-block column of `out` (`super_bytes` each) from the
/// blocks of its up to 8 real rows through `pack` (missing rows are
/// padding).
#[cfg_attr(kestrel_shipped, optimize(size))]
pub(crate) fn repack_row_groups(
    names: [&'static str; 3],
    src: &[u8],
    (rows, cols): (usize, usize),
    out: &mut [u8],
    (block_bytes, super_bytes): (usize, usize),
    pack: fn(&[&[u8]], &mut [u8]),
) -> Result<(), crate::shape::ShapeError> {
    repack_row_groups_of(
        8,
        crate::layout::QK_K,
        names,
        src,
        (rows, cols),
        out,
        (block_bytes, super_bytes),
        pack,
    )
}

/// [`repack_row_groups`] for groups of `group_rows` rows (at most 8) and
/// super-blocks of `block_cols` columns (32 or 256) of each row.
#[allow(clippy::too_many_arguments)]
#[inline(never)] // one copy for every layout (it runs only at conversion)
#[cfg_attr(kestrel_shipped, optimize(size))]
pub(crate) fn repack_row_groups_of(
    group_rows: usize,
    block_cols: usize,
    names: [&'static str; 3],
    src: &[u8],
    (rows, cols): (usize, usize),
    out: &mut [u8],
    (block_bytes, super_bytes): (usize, usize),
    pack: fn(&[&[u8]], &mut [u8]),
) -> Result<(), crate::shape::ShapeError> {
    use crate::shape::check_len;
    const MAX_ROWS: usize = 8;
    let rows_per_group = group_rows.min(MAX_ROWS);
    let nb = cols / block_cols;
    check_len(names[0], Some(nb * block_cols), cols)?;
    check_len(names[1], rows.checked_mul(nb * block_bytes), src.len())?;
    let packed = rows.div_ceil(rows_per_group).checked_mul(nb * super_bytes);
    check_len(names[2], packed, out.len())?;
    let row_len = nb * block_bytes;
    for (i, sb) in out.chunks_exact_mut(super_bytes).enumerate() {
        let (g, b) = (i / nb, i % nb);
        let n = (rows - g * rows_per_group).min(rows_per_group);
        let mut blocks: [&[u8]; MAX_ROWS] = [&[]; MAX_ROWS];
        for (r, blk) in blocks.iter_mut().enumerate().take(n) {
            let row = g * rows_per_group + r;
            *blk = &src[row * row_len + b * block_bytes..][..block_bytes];
        }
        pack(&blocks[..n], sb);
    }
    Ok(())
}

/// A super-block of a layout that permutes its rows' GGUF bytes: zeros,
/// then byte `i` of row `r`'s block (`blocks[r]`) at `offset(r, i)`.
pub(crate) fn scatter_rows(blocks: &[&[u8]], sb: &mut [u8], offset: fn(usize, usize) -> usize) {
    sb.fill(0);
    for (r, block) in blocks.iter().enumerate() {
        for (i, &byte) in block.iter().enumerate() {
            sb[offset(r, i)] = byte;
        }
    }
}

/// A codebook's grid points: the 4 (`u32`) or 8 (`u64`) components in
/// bytes, component `k` in byte `k` of the point's memory (the targets are
/// little-endian: byte `k` of the integer).
pub trait GridPoint: Copy + 'static {
    /// All components zero.
    const ZERO: Self;
}

impl GridPoint for u32 {
    const ZERO: Self = 0;
}

impl GridPoint for u64 {
    const ZERO: Self = 0;
}

#[cfg(target_endian = "big")]
compile_error!("the codebook grids are laid out for little-endian targets");

/// How a grid is packed: each point a `u16` of `size_of::<T>()` codes of
/// `bits` bits (component `k` at bits `bits * k`), a code the index of the
/// component's value in `levels`.
pub struct Codebook {
    /// Bits per code: 2 (IQ2, 3 values) or 3 (IQ3, 8 values).
    pub bits: u32,
    /// The component values.
    pub levels: [u8; 8],
}

/// The IQ2 grids' codebook: 2-bit codes of 8, 25 and 43.
pub(crate) const IQ2_CODES: Codebook = Codebook {
    bits: 2,
    levels: [8, 25, 43, 0, 0, 0, 0, 0],
};

/// A codebook's grid expanded at first use from its packed form (IQ2_XXS,
/// IQ2_XS, IQ3_XXS, IQ3_S): the binary holds 2 bytes a point instead of 4
/// or 8; the cells are zero (`.bss`) until the first caller fills them.
pub struct GridCells<T, const N: usize> {
    points: core::cell::UnsafeCell<[T; N]>,
    state: core::sync::atomic::AtomicU8,
}

// SAFETY: the cells are written once, by the one thread that moves `state`
// from EMPTY to WRITING, and read only after READY is seen with Acquire
// (the writer's Release store of READY follows its last write).
unsafe impl<T, const N: usize> Sync for GridCells<T, N> {}

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

impl<T: GridPoint, const N: usize> GridCells<T, N> {
    /// Empty cells.
    pub const fn new() -> Self {
        GridCells {
            points: core::cell::UnsafeCell::new([T::ZERO; N]),
            state: core::sync::atomic::AtomicU8::new(EMPTY),
        }
    }

    /// The expanded grid of `packed` (always the same table and codebook
    /// for the same cells).
    #[inline]
    pub fn points(&self, packed: &[u16; N], codes: &Codebook) -> &[T; N] {
        use core::sync::atomic::Ordering::Acquire;
        if self.state.load(Acquire) != READY {
            self.expand(packed, codes);
        }
        // SAFETY: READY was seen with Acquire (above or in `expand`): the
        // writer is done and nothing writes the cells again.
        unsafe { &*self.points.get() }
    }

    #[cold]
    fn expand(&self, packed: &[u16; N], codes: &Codebook) {
        use core::sync::atomic::Ordering::{Acquire, Release};
        if self
            .state
            .compare_exchange(EMPTY, WRITING, Acquire, Acquire)
            .is_ok()
        {
            // SAFETY: this thread alone moved EMPTY to WRITING; no reference
            // to the cells exists before READY.
            let points = unsafe { &mut *self.points.get() };
            let width = core::mem::size_of::<T>();
            // SAFETY: `T` is `u32` or `u64` (GridPoint's impls): plain bytes
            // without padding, any byte pattern a value; the view covers the
            // array exactly and ends before it is read as `[T; N]`.
            let bytes = unsafe {
                core::slice::from_raw_parts_mut(points.as_mut_ptr().cast::<u8>(), width * N)
            };
            expand(bytes, width, packed, codes);
            self.state.store(READY, Release);
        } else {
            while self.state.load(Acquire) != READY {
                core::hint::spin_loop();
            }
        }
    }
}

impl<T: GridPoint, const N: usize> Default for GridCells<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Each packed point's codes made its components' values: point `i`'s
/// `width` bytes at `width * i` of `bytes`.
fn expand(bytes: &mut [u8], width: usize, packed: &[u16], codes: &Codebook) {
    let mask = (1u16 << codes.bits) - 1;
    for (point, &p) in bytes.chunks_exact_mut(width).zip(packed) {
        for (k, b) in point.iter_mut().enumerate() {
            let code = (p >> (codes.bits as usize * k)) & mask;
            *b = codes.levels[usize::from(code)];
        }
    }
}
