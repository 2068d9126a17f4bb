//! x86_64 kernels: AVX2 + FMA + F16C through `core::arch` intrinsics.
//!
//! Bit-identical to the scalar references (docs/kernels.md): the per-block
//! integer sums are exact, and each block's contribution
//! `(isum as f32) * (d_w * d_a)` is formed with two separate `vmulps` and
//! added with `vaddps`, blocks in order, one output row per vector lane. No
//! fused multiply-add is used (FMA is only part of the capability so that a
//! token also stands for the usual "AVX2 machine" baseline).

use core::arch::x86_64::*;

/// Proof that the CPU executing this program implements AVX2, FMA and F16C.
/// Kernels that use those instructions take one by value.
#[derive(Clone, Copy, Debug)]
pub struct Avx2(());

impl Avx2 {
    /// `Some` when the build itself targets AVX2, FMA and F16C
    /// (`-C target-feature=+avx2,+fma,+f16c` or a target CPU that has them),
    /// so every CPU able to run this binary has them.
    pub fn new() -> Option<Self> {
        if cfg!(all(
            target_feature = "avx2",
            target_feature = "fma",
            target_feature = "f16c"
        )) {
            Some(Avx2(()))
        } else {
            None
        }
    }

    /// Detects AVX2, FMA and F16C at run time (CPUID and the OS's XSAVE state).
    #[cfg(feature = "std")]
    pub fn detect() -> Option<Self> {
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            Some(Avx2(()))
        } else {
            None
        }
    }

    /// A token without checking.
    ///
    /// # Safety
    /// The caller guarantees that the CPU implements AVX2, FMA and F16C;
    /// calling a kernel with this token on a CPU without them executes an
    /// undefined instruction.
    pub unsafe fn new_unchecked() -> Self {
        Avx2(())
    }
}

const QK: usize = 32;
const Q4X4_ROWS: usize = 4;
const Q4X4_BLOCK_BYTES: usize = 72;
const Q8X8_ROWS: usize = 8;
const Q8X8_BLOCK_BYTES: usize = 272;
/// Activation rows computed together against one pass over a weight tile.
const TILE_M: usize = 4;

/// GEMM, Q4_0x4 weights x `m` Q8_0 activation rows: `out[t][r] = W[r] . act[t]`.
///
/// * `w`: `ceil(rows / 4)` row groups of `cols / 32` 72-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
/// * `out`: `m x rows`, row-major.
///
/// Exact for every input bit pattern. Returns `false` (and writes nothing)
/// when a length does not fit.
#[allow(clippy::too_many_arguments)]
pub fn gemm_q4_0x4_q8_0(
    _cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> bool {
    let Some((nb, groups)) = crate::gemm_shape(
        Q4X4_ROWS,
        Q4X4_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    ) else {
        return false;
    };
    if m == 1 && nb <= GEMV_MAX_BLOCKS {
        // SAFETY: `w` holds `groups` row groups of `nb` 72-byte super-blocks,
        // `act_qs` `nb * 32` quants, `act_d` `nb` scales, `out` `rows`
        // floats (all checked by `gemm_shape` with m = 1); `nb` is at most
        // GEMV_MAX_BLOCKS; the token proves AVX2/FMA/F16C.
        unsafe { q4x4_gemv(w, rows, groups, nb, act_qs, act_d, out) };
        return true;
    }
    if m > GEMM_MAX_ROWS {
        // Batches of GEMM_MAX_ROWS tokens (the block-sum table's size).
        return (0..m).step_by(GEMM_MAX_ROWS).all(|t0| {
            let t1 = (t0 + GEMM_MAX_ROWS).min(m);
            gemm_q4_0x4_q8_0(
                _cpu,
                w,
                rows,
                cols,
                &act_qs[t0 * cols..t1 * cols],
                &act_d[t0 * nb..t1 * nb],
                t1 - t0,
                &mut out[t0 * rows..t1 * rows],
            )
        });
    }
    if nb > GEMV_MAX_BLOCKS {
        return false;
    }
    // `8 * sum(a)` of every activation block, once per call (the tiles
    // subtract it in i32 instead of forming it per row pair).
    let mut corr = [core::mem::MaybeUninit::<i32>::uninit(); GEMM_MAX_ROWS * GEMV_MAX_BLOCKS];
    for (i, c) in corr.iter_mut().enumerate().take(m * nb) {
        // SAFETY: block i of `act_qs` is bytes 32i..32i+32, i < m * nb, and
        // `act_qs` holds m * nb * 32 quants (checked by `gemm_shape`); the
        // token proves AVX2.
        c.write(8 * unsafe { block_sum(act_qs.as_ptr().add(i * QK)) });
    }
    // SAFETY: entries 0..m * nb were written just above; MaybeUninit<i32>
    // has the layout of i32.
    let corr: &[i32] = unsafe { core::slice::from_raw_parts(corr.as_ptr().cast(), m * nb) };
    let group_bytes = nb * Q4X4_BLOCK_BYTES;
    // Row groups in pairs (8 rows per vector); an odd last group is paired
    // with itself and only its own rows are stored.
    for pair in 0..groups.div_ceil(2) {
        let ga = 2 * pair;
        let gb = (ga + 1).min(groups - 1);
        let wa = &w[ga * group_bytes..(ga + 1) * group_bytes];
        let wb = &w[gb * group_bytes..(gb + 1) * group_bytes];
        let mut t0 = 0;
        while t0 < m {
            let tm = (m - t0).min(TILE_M);
            let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
            let d = &act_d[t0 * nb..(t0 + tm) * nb];
            let c = &corr[t0 * nb..(t0 + tm) * nb];
            let mut res = [[0.0f32; 8]; TILE_M];
            // SAFETY: `wa` and `wb` are whole row groups (`nb` super-blocks of
            // 72 bytes each, sliced above), `qs` holds `tm` rows of `cols =
            // nb * 32` quants, `d` and `c` `tm` rows of `nb` values (sliced
            // above), `res` holds `tm <= 4` rows of 8 floats; the token
            // proves AVX2/FMA/F16C.
            unsafe {
                match tm {
                    1 => q4x4_tile::<1>(wa, wb, qs, d, c, nb, &mut res),
                    2 => q4x4_tile::<2>(wa, wb, qs, d, c, nb, &mut res),
                    3 => q4x4_tile::<3>(wa, wb, qs, d, c, nb, &mut res),
                    _ => q4x4_tile::<4>(wa, wb, qs, d, c, nb, &mut res),
                }
            }
            for (t, r) in res.iter().enumerate().take(tm) {
                let row0 = 2 * pair * Q4X4_ROWS;
                let n = rows.saturating_sub(row0).min(8);
                let o = (t0 + t) * rows + row0;
                out[o..o + n].copy_from_slice(&r[..n]);
            }
            t0 += tm;
        }
    }
    true
}

/// The most activation rows the tiled Q4_0x4 GEMM takes in one call (the
/// engine's largest batch); its block-sum table lives on the stack.
const GEMM_MAX_ROWS: usize = 64;

/// `sum(a)` of one 32-byte activation block, exact in i32.
///
/// # Safety
/// `p` must point to 32 readable bytes; the CPU must implement AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn block_sum(p: *const i8) -> i32 {
    let a = _mm256_loadu_si256(p.cast());
    let s = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), a),
        _mm256_set1_epi16(1),
    );
    let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// The most 32-column blocks the GEMV's expanded activation row holds
/// (12,288 columns; wider rows take the tiled path).
const GEMV_MAX_BLOCKS: usize = 384;
/// Row groups (of 4 rows) one GEMV iteration reads.
const GEMV_GROUPS: usize = 4;

/// GEMV, Q4_0x4 weights x one Q8_0 activation row, 16 rows per iteration.
///
/// The activation row is expanded once per call: per block, the four
/// dword patterns each 32-byte weight load needs (`vpermd`, as in
/// [`q4x4_tile`]) and `8 * sum(a)`. The inner loop then reads only weights:
/// `sum (n - 8) a = sum n a - 8 sum a` is formed exactly in i32 after the
/// `vpmaddubsw`/`vpmaddwd` sums (|sum n a| <= 32 * 15 * 127 per row, no i16
/// lane exceeds 4 * 2 * 15 * 127 = 15,240).
///
/// # Safety
/// `w.len() >= groups * nb * 72`, `qs.len() >= nb * 32`, `d.len() >= nb`,
/// `out.len() >= rows`, `rows <= groups * 4`, `1 <= nb <= GEMV_MAX_BLOCKS`,
/// and the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4x4_gemv(
    w: &[u8],
    rows: usize,
    groups: usize,
    nb: usize,
    qs: &[i8],
    d: &[f32],
    out: &mut [f32],
) {
    debug_assert!((1..=GEMV_MAX_BLOCKS).contains(&nb) && qs.len() >= nb * QK && d.len() >= nb);
    debug_assert!(w.len() >= groups * nb * Q4X4_BLOCK_BYTES && rows <= groups * Q4X4_ROWS);
    let idx = [
        _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
        _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
        _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5),
        _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7),
    ];
    // The expanded activations: blocks 0..nb of `av` and `corr` are written
    // here and only those are read below.
    let mut av = [core::mem::MaybeUninit::<[__m256i; 4]>::uninit(); GEMV_MAX_BLOCKS];
    let mut corr = [0i32; GEMV_MAX_BLOCKS];
    let ones8 = _mm256_set1_epi8(1);
    let ones16 = _mm256_set1_epi16(1);
    for b in 0..nb {
        let a = _mm256_loadu_si256(qs.as_ptr().add(b * QK).cast());
        av[b].write([
            _mm256_permutevar8x32_epi32(a, idx[0]),
            _mm256_permutevar8x32_epi32(a, idx[1]),
            _mm256_permutevar8x32_epi32(a, idx[2]),
            _mm256_permutevar8x32_epi32(a, idx[3]),
        ]);
        // sum(a) in i32: pairs with vpmaddubsw(1, a), then vpmaddwd.
        let s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, a), ones16);
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        corr[b] = 8 * _mm_cvtsi128_si32(s);
    }
    let m4 = _mm256_set1_epi8(0x0F);
    let x88 = _mm256_set1_epi8(0x88u8 as i8);
    let group_bytes = nb * Q4X4_BLOCK_BYTES;
    let step = GEMV_GROUPS * Q4X4_BLOCK_BYTES;
    let mut g0 = 0;
    while g0 < groups {
        // Groups past the end repeat the last one; only real rows are stored.
        let base: [*const u8; GEMV_GROUPS] =
            core::array::from_fn(|i| w.as_ptr().add((g0 + i).min(groups - 1) * group_bytes));
        // The next iteration's groups follow these ones: prefetch them at
        // the rate this iteration reads (4.5 lines per block). A prefetch
        // never faults; `wrapping_add` keeps the arithmetic defined.
        let next = w.as_ptr().wrapping_add((g0 + GEMV_GROUPS) * group_bytes);
        let mut acc = [_mm256_setzero_ps(); GEMV_GROUPS / 2];
        for b in 0..nb {
            let pf = next.wrapping_add(b * step);
            _mm_prefetch::<_MM_HINT_T0>(pf.cast());
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64).cast());
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(128).cast());
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(192).cast());
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(256).cast());
            // SAFETY: block b < nb was written above.
            let a = unsafe { av[b].assume_init_ref() };
            let c = _mm256_set1_epi32(corr[b]);
            let da = _mm256_set1_ps(*d.get_unchecked(b));
            // sum n a of one group: lanes 0-3 even chunks, 4-7 odd chunks.
            let group_sum = |p: *const u8| {
                // SAFETY: p + 8 .. p + 72 is one super-block of a group.
                let (x0, x1) = unsafe {
                    (
                        _mm256_xor_si256(_mm256_loadu_si256(p.add(8).cast()), x88),
                        _mm256_xor_si256(_mm256_loadu_si256(p.add(40).cast()), x88),
                    )
                };
                let lo = _mm256_add_epi16(
                    _mm256_maddubs_epi16(_mm256_and_si256(x0, m4), a[0]),
                    _mm256_maddubs_epi16(_mm256_and_si256(x1, m4), a[1]),
                );
                let hi = _mm256_add_epi16(
                    _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(x0, 4), m4), a[2]),
                    _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(x1, 4), m4), a[3]),
                );
                _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones16)
            };
            for (pair, acc_p) in acc.iter_mut().enumerate() {
                let pa = base[2 * pair].add(b * Q4X4_BLOCK_BYTES);
                let pb = base[2 * pair + 1].add(b * Q4X4_BLOCK_BYTES);
                let (ia, ib) = (group_sum(pa), group_sum(pb));
                // [a rows, b rows]: sum n a, exact i32, then - 8 sum a.
                let isum = _mm256_sub_epi32(
                    _mm256_add_epi32(
                        _mm256_permute2x128_si256::<0x20>(ia, ib),
                        _mm256_permute2x128_si256::<0x31>(ia, ib),
                    ),
                    c,
                );
                let sw = _mm256_cvtph_ps(_mm_unpacklo_epi64(
                    _mm_loadl_epi64(pa.cast()),
                    _mm_loadl_epi64(pb.cast()),
                ));
                let v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(sw, da));
                *acc_p = _mm256_add_ps(*acc_p, v);
            }
        }
        for (pair, a) in acc.iter().enumerate() {
            let row0 = (g0 + 2 * pair) * Q4X4_ROWS;
            let n = rows.saturating_sub(row0).min(8);
            if n == 0 {
                break;
            }
            let mut r = [0.0f32; 8];
            _mm256_storeu_ps(r.as_mut_ptr(), *a);
            out[row0..row0 + n].copy_from_slice(&r[..n]);
        }
        g0 += GEMV_GROUPS;
    }
}

/// One Q4_0x4 weight tile (row groups `wa` and `wb`, 8 rows) against `T`
/// activation rows: `res[t]` = the 4 rows of `wa` then the 4 rows of `wb`.
///
/// Per super-block and group: two 32-byte loads (chunks 0-1 and 2-3), the
/// XOR 0x88 undone, nibbles `n` (0..15) split out with `and`/`srli`, and
/// `vpmaddubsw(n, a)` against the activation dwords each chunk needs
/// (`vpermd`). The four `vpmaddubsw` sums fit i16 (|.| <= 4 * 2 * 15 * 127
/// = 15,240), `vpmaddwd` with ones makes them i32, the two 128-bit halves
/// (even and odd chunks) are added, and `sum (n - 8) a = sum n a - 8 sum a`
/// subtracts `corr` (`8 sum a` per token and block, computed once per call)
/// in i32: exact.
///
/// # Safety
/// `wa.len()` and `wb.len()` must be at least `nb * 72`, `qs.len()` at least
/// `T * nb * 32`, `d.len()` and `corr.len()` at least `T * nb`, `T <= 4`,
/// and the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4x4_tile<const T: usize>(
    wa: &[u8],
    wb: &[u8],
    qs: &[i8],
    d: &[f32],
    corr: &[i32],
    nb: usize,
    res: &mut [[f32; 8]; TILE_M],
) {
    debug_assert!(T <= TILE_M && wa.len() >= nb * 72 && wb.len() >= nb * 72);
    debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb);
    let cols = nb * QK;
    let m4 = _mm256_set1_epi8(0x0F);
    let x88 = _mm256_set1_epi8(0x88u8 as i8);
    let ones = _mm256_set1_epi16(1);
    let idx = [
        _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
        _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
        _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5),
        _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7),
    ];
    let mut acc = [_mm256_setzero_ps(); T];
    for b in 0..nb {
        let pa = wa.as_ptr().add(b * Q4X4_BLOCK_BYTES);
        let pb = wb.as_ptr().add(b * Q4X4_BLOCK_BYTES);
        // Prefetch the bytes after `wb` (the next pair of row groups) at the
        // rate this pair is read: short rows otherwise pay the memory
        // latency at the start of every pair. A prefetch never faults, and
        // `wrapping_add` keeps the address arithmetic defined.
        let pf = wb
            .as_ptr()
            .wrapping_add(nb * Q4X4_BLOCK_BYTES + 2 * b * Q4X4_BLOCK_BYTES);
        _mm_prefetch::<_MM_HINT_T0>(pf.cast());
        _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64).cast());
        _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(128).cast());
        // Nibbles, per group: [lo chunks 0-1, lo chunks 2-3, hi 0-1, hi 2-3].
        let nib = |p: *const u8| {
            // SAFETY: p points to a 72-byte super-block (caller's contract):
            // bytes 8..40 and 40..72 are in bounds; unaligned loads.
            let (x0, x1) = unsafe {
                (
                    _mm256_xor_si256(_mm256_loadu_si256(p.add(8).cast()), x88),
                    _mm256_xor_si256(_mm256_loadu_si256(p.add(40).cast()), x88),
                )
            };
            [
                _mm256_and_si256(x0, m4),
                _mm256_and_si256(x1, m4),
                _mm256_and_si256(_mm256_srli_epi16(x0, 4), m4),
                _mm256_and_si256(_mm256_srli_epi16(x1, 4), m4),
            ]
        };
        let na = nib(pa);
        let nbb = nib(pb);
        // Scales of the 8 rows: 4 f16 of group a, then 4 of group b.
        let sw = _mm256_cvtph_ps(_mm_unpacklo_epi64(
            _mm_loadl_epi64(pa.cast()),
            _mm_loadl_epi64(pb.cast()),
        ));
        for (t, acc_t) in acc.iter_mut().enumerate() {
            let a = _mm256_loadu_si256(qs.as_ptr().add(t * cols + b * QK).cast());
            let av = [
                _mm256_permutevar8x32_epi32(a, idx[0]),
                _mm256_permutevar8x32_epi32(a, idx[1]),
                _mm256_permutevar8x32_epi32(a, idx[2]),
                _mm256_permutevar8x32_epi32(a, idx[3]),
            ];
            let dot = |n: &[__m256i; 4]| {
                let s = _mm256_add_epi16(
                    _mm256_add_epi16(
                        _mm256_maddubs_epi16(n[0], av[0]),
                        _mm256_maddubs_epi16(n[1], av[1]),
                    ),
                    _mm256_add_epi16(
                        _mm256_maddubs_epi16(n[2], av[2]),
                        _mm256_maddubs_epi16(n[3], av[3]),
                    ),
                );
                _mm256_madd_epi16(s, ones)
            };
            let ia = dot(&na);
            let ib = dot(&nbb);
            // [a even chunks + a odd chunks, b even + b odd]: sum n a, exact
            // i32; then - 8 sum a.
            let isum = _mm256_sub_epi32(
                _mm256_add_epi32(
                    _mm256_permute2x128_si256(ia, ib, 0x20),
                    _mm256_permute2x128_si256(ia, ib, 0x31),
                ),
                _mm256_set1_epi32(*corr.get_unchecked(t * nb + b)),
            );
            let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
            let scale = _mm256_mul_ps(sw, da);
            let v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), scale);
            *acc_t = _mm256_add_ps(*acc_t, v);
        }
    }
    for (r, a) in res.iter_mut().zip(acc) {
        _mm256_storeu_ps(r.as_mut_ptr(), a);
    }
}

/// GEMM, Q8_0x8 weights x `m` Q8_0 activation rows: `out[t][r] = W[r] . act[t]`.
///
/// * `w`: `ceil(rows / 8)` row groups of `cols / 32` 272-byte super-blocks;
/// * `act_qs`: `m x cols` quants; `act_d`: `m x cols / 32` scales;
/// * `out`: `m x rows`, row-major.
///
/// Returns `false` (and writes nothing) when a length does not fit, or when
/// an activation quant is -128 (the quantizer never makes one: its quants
/// are in -127..=127; the sign trick this kernel uses needs that).
#[allow(clippy::too_many_arguments)]
pub fn gemm_q8_0x8_q8_0(
    _cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    act_qs: &[i8],
    act_d: &[f32],
    m: usize,
    out: &mut [f32],
) -> bool {
    let Some((nb, groups)) = crate::gemm_shape(
        Q8X8_ROWS,
        Q8X8_BLOCK_BYTES,
        w,
        rows,
        cols,
        act_qs,
        act_d,
        m,
        out,
    ) else {
        return false;
    };
    if act_qs.contains(&i8::MIN) {
        return false;
    }
    let group_bytes = nb * Q8X8_BLOCK_BYTES;
    for g in 0..groups {
        let wg = &w[g * group_bytes..(g + 1) * group_bytes];
        let mut t0 = 0;
        while t0 < m {
            let tm = (m - t0).min(TILE_M);
            let qs = &act_qs[t0 * cols..(t0 + tm) * cols];
            let d = &act_d[t0 * nb..(t0 + tm) * nb];
            let mut res = [[0.0f32; 8]; TILE_M];
            // SAFETY: `wg` is a whole row group (`nb` super-blocks of 272
            // bytes, sliced above), `qs` holds `tm` rows of `nb * 32` quants
            // and `d` `tm` rows of `nb` scales (sliced above), `res` holds
            // `tm <= 4` rows of 8 floats; the token proves AVX2/FMA/F16C.
            unsafe {
                match tm {
                    1 => q8x8_tile::<1>(wg, qs, d, nb, &mut res),
                    2 => q8x8_tile::<2>(wg, qs, d, nb, &mut res),
                    3 => q8x8_tile::<3>(wg, qs, d, nb, &mut res),
                    _ => q8x8_tile::<4>(wg, qs, d, nb, &mut res),
                }
            }
            for (t, r) in res.iter().enumerate().take(tm) {
                let row0 = g * Q8X8_ROWS;
                let n = (rows - row0).min(8);
                let o = (t0 + t) * rows + row0;
                out[o..o + n].copy_from_slice(&r[..n]);
            }
            t0 += tm;
        }
    }
    true
}

/// One Q8_0x8 row group (8 rows) against `T` activation rows.
///
/// Chunk `c` of a super-block (32 bytes) is one register whose 32-bit lanes
/// are the 8 rows' weights `4c..4c+3`; the activation dword `c` is
/// broadcast. `vpmaddubsw(|w|, sign(a, w))` (|w| <= 128 unsigned, |a| <= 127)
/// gives exact i16 pair sums (<= 2 * 128 * 127), `vpmaddwd` with ones the
/// exact per-row i32 of the chunk.
///
/// # Safety
/// `w.len()` must be at least `nb * 272`, `qs.len()` at least `T * nb * 32`
/// with no quant equal to -128, `d.len()` at least `T * nb`, `T <= 4`, and
/// the CPU must implement AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8x8_tile<const T: usize>(
    w: &[u8],
    qs: &[i8],
    d: &[f32],
    nb: usize,
    res: &mut [[f32; 8]; TILE_M],
) {
    debug_assert!(T <= TILE_M && w.len() >= nb * Q8X8_BLOCK_BYTES);
    debug_assert!(qs.len() >= T * nb * QK && d.len() >= T * nb);
    let cols = nb * QK;
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    for b in 0..nb {
        let p = w.as_ptr().add(b * Q8X8_BLOCK_BYTES);
        // Prefetch the next row group (the bytes after `w`) at the rate this
        // one is read; a prefetch never faults, `wrapping_add` keeps the
        // address arithmetic defined.
        let pf = p.wrapping_add(nb * Q8X8_BLOCK_BYTES);
        for k in 0..5 {
            _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64 * k).cast());
        }
        // Chunks outer, tokens inner: one weight chunk and its |w| live in
        // registers at a time next to the T integer sums (no spills).
        let mut isum = [_mm256_setzero_si256(); T];
        for c in 0..8 {
            let wv = _mm256_loadu_si256(p.add(16 + 32 * c).cast());
            let wabs = _mm256_sign_epi8(wv, wv);
            for (t, isum_t) in isum.iter_mut().enumerate() {
                let ap = qs.as_ptr().add(t * cols + b * QK + 4 * c);
                let a = _mm256_set1_epi32(ap.cast::<i32>().read_unaligned());
                let prod = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, wv));
                *isum_t = _mm256_add_epi32(*isum_t, _mm256_madd_epi16(prod, ones));
            }
        }
        let sw = _mm256_cvtph_ps(_mm_loadu_si128(p.cast()));
        for (t, acc_t) in acc.iter_mut().enumerate() {
            let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
            let scale = _mm256_mul_ps(sw, da);
            let v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[t]), scale);
            *acc_t = _mm256_add_ps(*acc_t, v);
        }
    }
    for (r, a) in res.iter_mut().zip(acc) {
        _mm256_storeu_ps(r.as_mut_ptr(), a);
    }
}

/// Quantizes activations to Q8_0 content, the same bytes as
/// `kestrel_core::quant::q8_0::quantize_acts`: per 32-value block,
/// `amax = max |x|` (NaN ignored, as `f32::max` does), `d = amax / 127`,
/// `id = d != 0 ? 1 / d : 0`, `q = roundf(x * id)` (halves away from zero)
/// saturated to i8 with NaN giving 0, and `d` rounded to f16 (nearest even)
/// and widened back.
///
/// Returns `false` (and writes nothing) unless `x.len()` is a multiple of
/// 32, `qs.len() == x.len()` and `d.len() == x.len() / 32`.
pub fn quantize_acts(_cpu: Avx2, x: &[f32], qs: &mut [i8], d: &mut [f32]) -> bool {
    if !x.len().is_multiple_of(QK) || qs.len() != x.len() || d.len() != x.len() / QK {
        return false;
    }
    for ((xb, qb), db) in x
        .chunks_exact(QK)
        .zip(qs.chunks_exact_mut(QK))
        .zip(d.iter_mut())
    {
        // SAFETY: each chunk is exactly 32 values / 32 quants (chunks_exact);
        // the token proves AVX2/FMA/F16C.
        *db = unsafe { quantize_block(xb, qb) };
    }
    true
}

/// One 32-value block; returns the f16-rounded scale as f32.
///
/// # Safety
/// `x.len()` and `q.len()` must be at least 32, and the CPU must implement
/// AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_block(x: &[f32], q: &mut [i8]) -> f32 {
    debug_assert!(x.len() >= QK && q.len() >= QK);
    let sign = _mm256_set1_ps(-0.0);
    let v = [
        _mm256_loadu_ps(x.as_ptr()),
        _mm256_loadu_ps(x.as_ptr().add(8)),
        _mm256_loadu_ps(x.as_ptr().add(16)),
        _mm256_loadu_ps(x.as_ptr().add(24)),
    ];
    // max_ps(a, b) returns b when a is NaN: NaN lanes never enter `m`.
    let mut m = _mm256_setzero_ps();
    for vi in v {
        m = _mm256_max_ps(_mm256_andnot_ps(sign, vi), m);
    }
    let m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    let m1 = _mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1));
    let amax = _mm_cvtss_f32(m1);
    let dv = amax / 127.0;
    let id = if dv != 0.0 { 1.0 / dv } else { 0.0 };
    let idv = _mm256_set1_ps(id);
    let half = _mm256_set1_ps(0.5);
    let one = _mm256_set1_ps(1.0);
    let lo = _mm256_set1_ps(-128.0);
    let hi = _mm256_set1_ps(127.0);
    let mut iv = [_mm256_setzero_si256(); 4];
    for (o, vi) in iv.iter_mut().zip(v) {
        let p = _mm256_mul_ps(vi, idv);
        // roundf: truncate, then step away from zero when the (exact)
        // fraction is at least one half.
        let t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(p, t));
        let step = _mm256_or_ps(one, _mm256_and_ps(p, sign));
        let up = _mm256_cmp_ps(frac, half, _CMP_GE_OQ);
        let r = _mm256_add_ps(t, _mm256_and_ps(up, step));
        // `as i8`: saturate (NaN -> -128 here) and then NaN -> 0.
        let r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
        let r = _mm256_and_ps(r, _mm256_cmp_ps(p, p, _CMP_ORD_Q));
        *o = _mm256_cvttps_epi32(r);
    }
    let s01 = _mm256_packs_epi32(iv[0], iv[1]);
    let s23 = _mm256_packs_epi32(iv[2], iv[3]);
    let bytes = _mm256_packs_epi16(s01, s23);
    let bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(q.as_mut_ptr().cast(), bytes);
    let h = _mm_cvtps_ph(_mm_set_ss(dv), _MM_FROUND_TO_NEAREST_INT);
    _mm_cvtss_f32(_mm_cvtph_ps(h))
}

/// The element type of a plain (unquantized) weight matrix.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Float {
    F32,
    F16,
}

/// `out[r] = W[r] . x` for a row-major f32 weight (`rows x cols`, little
/// endian bytes, any alignment), summed in column order in f32 with a
/// separate multiply and add per column: bit-identical to the reference
/// `matvec_float`.
///
/// Returns `false` (and writes nothing) unless `w.len() == rows * cols * 4`,
/// `x.len() == cols` and `out.len() == rows`.
pub fn matvec_f32(
    _cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> bool {
    matvec(Float::F32, w, rows, cols, x, out)
}

/// As [`matvec_f32`] for an f16 weight (`w.len() == rows * cols * 2`); each
/// weight is widened to f32 exactly before the multiply.
pub fn matvec_f16(
    _cpu: Avx2,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    out: &mut [f32],
) -> bool {
    matvec(Float::F16, w, rows, cols, x, out)
}

fn matvec(kind: Float, w: &[u8], rows: usize, cols: usize, x: &[f32], out: &mut [f32]) -> bool {
    let esize = if kind == Float::F32 { 4 } else { 2 };
    let row_bytes = cols.checked_mul(esize);
    if !(crate::len_ok(row_bytes.and_then(|b| b.checked_mul(rows)), w.len())
        && x.len() == cols
        && out.len() == rows)
    {
        return false;
    }
    if cols == 0 {
        out.fill(0.0);
        return true;
    }
    let row_bytes = cols * esize;
    for (g, o) in out.chunks_mut(8).enumerate() {
        let r0 = 8 * g;
        // Rows past the end repeat the last row; only real rows are stored.
        let rp: [&[u8]; 8] = core::array::from_fn(|i| {
            let r = (r0 + i).min(rows - 1);
            &w[r * row_bytes..(r + 1) * row_bytes]
        });
        let mut res = [0.0f32; 8];
        // SAFETY: each of the 8 row slices holds `cols` elements of `kind`
        // (sliced above from a buffer of rows * cols elements), `x` holds
        // `cols` floats (checked), `res` 8; the token proves AVX2/FMA/F16C.
        let next = w.as_ptr().wrapping_add((r0 + 8) * row_bytes);
        unsafe { matvec_rows8(kind, &rp, next, x, &mut res) };
        o.copy_from_slice(&res[..o.len()]);
    }
    true
}

/// 8 rows (one per lane) dotted with `x`, columns in order.
///
/// # Safety
/// Every `rows[i]` must hold `x.len()` elements of `kind` (4 or 2 bytes
/// each), and the CPU must implement AVX2, FMA and F16C. `next` is only
/// prefetched, never read: any address.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn matvec_rows8(
    kind: Float,
    rows: &[&[u8]; 8],
    next: *const u8,
    x: &[f32],
    res: &mut [f32; 8],
) {
    let cols = x.len();
    debug_assert!(rows
        .iter()
        .all(|r| r.len() >= cols * if kind == Float::F32 { 4 } else { 2 }));
    let mut acc = _mm256_setzero_ps();
    let full = cols / 8;
    for j8 in 0..full {
        let load = |r: &[u8]| -> __m256 {
            // SAFETY: elements 8 * j8 .. 8 * j8 + 8 are inside the row
            // (j8 < cols / 8); unaligned loads.
            unsafe {
                match kind {
                    Float::F32 => _mm256_loadu_ps(r.as_ptr().add(32 * j8).cast()),
                    Float::F16 => _mm256_cvtph_ps(_mm_loadu_si128(r.as_ptr().add(16 * j8).cast())),
                }
            }
        };
        // Prefetch the next 8 rows (the bytes at `next`) at the rate these
        // are read: 8 rows x 8 elements per step. A prefetch never faults,
        // `wrapping_add` keeps the address arithmetic defined.
        let esize = if kind == Float::F32 { 4 } else { 2 };
        for k in 0..esize {
            _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * (esize * j8 + k)).cast());
        }
        let v: [__m256; 8] = core::array::from_fn(|i| load(rows[i]));
        // 8 x 8 transpose: c[k] = column 8 * j8 + k of the 8 rows.
        let t0 = _mm256_unpacklo_ps(v[0], v[1]);
        let t1 = _mm256_unpackhi_ps(v[0], v[1]);
        let t2 = _mm256_unpacklo_ps(v[2], v[3]);
        let t3 = _mm256_unpackhi_ps(v[2], v[3]);
        let t4 = _mm256_unpacklo_ps(v[4], v[5]);
        let t5 = _mm256_unpackhi_ps(v[4], v[5]);
        let t6 = _mm256_unpacklo_ps(v[6], v[7]);
        let t7 = _mm256_unpackhi_ps(v[6], v[7]);
        let s0 = _mm256_shuffle_ps(t0, t2, 0x44);
        let s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        let s2 = _mm256_shuffle_ps(t1, t3, 0x44);
        let s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        let s4 = _mm256_shuffle_ps(t4, t6, 0x44);
        let s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
        let s6 = _mm256_shuffle_ps(t5, t7, 0x44);
        let s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        let c = [
            _mm256_permute2f128_ps(s0, s4, 0x20),
            _mm256_permute2f128_ps(s1, s5, 0x20),
            _mm256_permute2f128_ps(s2, s6, 0x20),
            _mm256_permute2f128_ps(s3, s7, 0x20),
            _mm256_permute2f128_ps(s0, s4, 0x31),
            _mm256_permute2f128_ps(s1, s5, 0x31),
            _mm256_permute2f128_ps(s2, s6, 0x31),
            _mm256_permute2f128_ps(s3, s7, 0x31),
        ];
        for (k, ck) in c.iter().enumerate() {
            let xj = _mm256_set1_ps(*x.get_unchecked(8 * j8 + k));
            acc = _mm256_add_ps(acc, _mm256_mul_ps(*ck, xj));
        }
    }
    for j in 8 * full..cols {
        let e: [f32; 8] = core::array::from_fn(|i| match kind {
            Float::F32 => {
                let b = &rows[i][4 * j..4 * j + 4];
                f32::from_le_bytes([b[0], b[1], b[2], b[3]])
            }
            Float::F16 => {
                let h = u16::from_le_bytes([rows[i][2 * j], rows[i][2 * j + 1]]);
                // Exact widening (F16C, enabled on this function).
                _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
            }
        });
        let col = _mm256_loadu_ps(e.as_ptr());
        acc = _mm256_add_ps(acc, _mm256_mul_ps(col, _mm256_set1_ps(x[j])));
    }
    _mm256_storeu_ps(res.as_mut_ptr(), acc);
}

/// Attention scores over an f16 key cache: `scores[j] = dot8(q, K_j) * scale`
/// for `j < scores.len()`, where `K_j` is the `q.len()` halves at
/// `keys[j * stride ..]` and `dot8` is the 8-lane dot product of
/// docs/kernels.md (lane `i % 8` accumulates `q[i] * k[i]` in order, then
/// `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))`): bit-identical to the
/// scalar reference.
///
/// Returns `false` (and writes nothing) unless `q.len()` is a non-zero
/// multiple of 8, `stride >= q.len()` and every row lies inside `keys`.
pub fn attn_scores_f16(
    _cpu: Avx2,
    q: &[f32],
    keys: &[u16],
    stride: usize,
    scale: f32,
    scores: &mut [f32],
) -> bool {
    if !crate::attn_rows_ok(q.len(), scores.len(), stride, keys.len()) {
        return false;
    }
    // SAFETY: rows `j < scores.len()` of `q.len()` halves at `j * stride`
    // lie inside `keys` (checked above); `q.len()` is a multiple of 8; the
    // token proves AVX2/FMA/F16C.
    unsafe { scores_f16(q, keys, stride, scale, scores) };
    true
}

/// # Safety
/// As checked by [`attn_scores_f16`]; the CPU must implement AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scores_f16(q: &[f32], keys: &[u16], stride: usize, scale: f32, scores: &mut [f32]) {
    let hd = q.len();
    let row = |j: usize| keys.as_ptr().add(j * stride);
    let dot = |acc: __m256, k: *const u16, c: usize| {
        // SAFETY: `k + c .. k + c + 8` is inside a checked row, `q` holds
        // `c + 8` floats (c < hd, hd a multiple of 8).
        unsafe {
            let kv = _mm256_cvtph_ps(_mm_loadu_si128(k.add(c).cast()));
            let qv = _mm256_loadu_ps(q.as_ptr().add(c));
            _mm256_add_ps(acc, _mm256_mul_ps(qv, kv))
        }
    };
    // Four rows at a time: four independent add chains.
    let mut j = 0;
    let n = scores.len();
    while j + 4 <= n {
        let (k0, k1, k2, k3) = (row(j), row(j + 1), row(j + 2), row(j + 3));
        let mut acc = [_mm256_setzero_ps(); 4];
        for c in (0..hd).step_by(8) {
            acc[0] = dot(acc[0], k0, c);
            acc[1] = dot(acc[1], k1, c);
            acc[2] = dot(acc[2], k2, c);
            acc[3] = dot(acc[3], k3, c);
        }
        for (i, a) in acc.iter().enumerate() {
            *scores.get_unchecked_mut(j + i) = reduce8(*a) * scale;
        }
        j += 4;
    }
    while j < n {
        let k = row(j);
        let mut acc = _mm256_setzero_ps();
        for c in (0..hd).step_by(8) {
            acc = dot(acc, k, c);
        }
        *scores.get_unchecked_mut(j) = reduce8(acc) * scale;
        j += 1;
    }
}

/// `((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))` of the 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn reduce8(acc: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(acc);
    let hi = _mm256_extractf128_ps::<1>(acc);
    let v = _mm_add_ps(lo, hi);
    let w = _mm_add_ps(v, _mm_movehl_ps(v, v));
    _mm_cvtss_f32(_mm_add_ss(w, _mm_shuffle_ps::<1>(w, w)))
}

/// Attention output over an f16 value cache: `out[i] = sum_j probs[j] *
/// V_j[i]`, `j` in order from `out[i] = 0`, where `V_j` is the `out.len()`
/// halves at `values[j * stride ..]`; bit-identical to the scalar reference.
///
/// Returns `false` (and writes nothing) unless `out.len()` is a non-zero
/// multiple of 8, `stride >= out.len()` and every row lies inside `values`.
pub fn attn_values_f16(
    _cpu: Avx2,
    probs: &[f32],
    values: &[u16],
    stride: usize,
    out: &mut [f32],
) -> bool {
    if !crate::attn_rows_ok(out.len(), probs.len(), stride, values.len()) {
        return false;
    }
    // SAFETY: rows `j < probs.len()` of `out.len()` halves at `j * stride`
    // lie inside `values` (checked above); `out.len()` is a multiple of 8;
    // the token proves AVX2/FMA/F16C.
    unsafe { values_f16(probs, values, stride, out) };
    true
}

/// # Safety
/// As checked by [`attn_values_f16`]; the CPU must implement AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn values_f16(probs: &[f32], values: &[u16], stride: usize, out: &mut [f32]) {
    let hd = out.len();
    let mut c = 0;
    // Up to 32 outputs (4 vectors) stay in registers over all rows.
    while c < hd {
        let w = (hd - c).min(32) / 8;
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut v = values.as_ptr().add(c);
        for &p in probs {
            let pv = _mm256_set1_ps(p);
            for (i, a) in acc.iter_mut().enumerate().take(w) {
                let x = _mm256_cvtph_ps(_mm_loadu_si128(v.add(8 * i).cast()));
                *a = _mm256_add_ps(*a, _mm256_mul_ps(pv, x));
            }
            v = v.wrapping_add(stride);
        }
        for (i, a) in acc.iter().enumerate().take(w) {
            _mm256_storeu_ps(out.as_mut_ptr().add(c + 8 * i), *a);
        }
        c += 8 * w;
    }
}

/// `e^x` of 8 lanes: the same operations, in the same order, as
/// `kestrel_core::model::ops::exp` applies to each value, so the bits are
/// the same (NaN lanes stay NaN).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn exp8(x: __m256) -> __m256 {
    const ROUND: f32 = 12_582_912.0;
    const MIN: f32 = -87.336_55;
    let round = _mm256_set1_ps(ROUND);
    // clamp: max/min return their second operand when one is NaN, so
    // NaN lanes pass through as the scalar `clamp` lets them.
    let xc = _mm256_min_ps(_mm256_set1_ps(88.0), _mm256_max_ps(_mm256_set1_ps(MIN), x));
    let t = _mm256_add_ps(
        _mm256_mul_ps(xc, _mm256_set1_ps(core::f32::consts::LOG2_E)),
        round,
    );
    let n = _mm256_sub_ps(t, round);
    let r = _mm256_sub_ps(
        _mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(0.693_359_4))),
        _mm256_mul_ps(n, _mm256_set1_ps(-2.121_944_4e-4)),
    );
    let mut p = _mm256_set1_ps(1.987_569_2e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(c));
    }
    let y = _mm256_add_ps(
        _mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r),
        _mm256_set1_ps(1.0),
    );
    let n_bits = _mm256_sub_epi32(
        _mm256_castps_si256(t),
        _mm256_set1_epi32(ROUND.to_bits() as i32),
    );
    let scale = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        n_bits,
        _mm256_set1_epi32(127),
    )));
    let e = _mm256_mul_ps(y, scale);
    let below = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(MIN));
    _mm256_andnot_ps(below, e)
}

/// SwiGLU over fused gate/up runs: `out[8r + i] = silu(g) * u` with
/// `g = gate_up[16r + i]`, `u = gate_up[16r + 8 + i]`, `silu(g) = g / (1 +
/// e^-g)`; the bits of `kestrel_core::model::ops::swiglu_runs`.
///
/// Returns `false` (and writes nothing) unless `out.len()` is a multiple of
/// 8 and `gate_up.len() == 2 * out.len()`.
pub fn swiglu_runs(_cpu: Avx2, out: &mut [f32], gate_up: &[f32]) -> bool {
    if !out.len().is_multiple_of(8) || gate_up.len() != 2 * out.len() {
        return false;
    }
    // SAFETY: `out` holds 8 floats per run and `gate_up` 16 (checked
    // above); the token proves AVX2/FMA/F16C.
    unsafe { swiglu_avx2(out, gate_up) };
    true
}

/// # Safety
/// `out.len() * 2 == gate_up.len()`, `out.len() % 8 == 0`; AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn swiglu_avx2(out: &mut [f32], gate_up: &[f32]) {
    let sign = _mm256_set1_ps(-0.0);
    let one = _mm256_set1_ps(1.0);
    for (o, gu) in out.chunks_exact_mut(8).zip(gate_up.chunks_exact(16)) {
        let g = _mm256_loadu_ps(gu.as_ptr());
        let u = _mm256_loadu_ps(gu.as_ptr().add(8));
        let silu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_xor_ps(g, sign))));
        _mm256_storeu_ps(o.as_mut_ptr(), _mm256_mul_ps(silu, u));
    }
}

/// `x[i] = e^(x[i] - max)` (the exponentials of a softmax), the bits of
/// `kestrel_core::model::ops::exp` lane by lane; any length.
pub fn exp_minus(_cpu: Avx2, x: &mut [f32], max: f32) {
    // SAFETY: the token proves AVX2/FMA/F16C; the function only touches
    // `x` through its chunks.
    unsafe { exp_minus_avx2(x, max) }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn exp_minus_avx2(x: &mut [f32], max: f32) {
    let m = _mm256_set1_ps(max);
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: `c` is 8 floats (chunks_exact); unaligned load and store.
        unsafe {
            let v = exp8(_mm256_sub_ps(_mm256_loadu_ps(c.as_ptr()), m));
            _mm256_storeu_ps(c.as_mut_ptr(), v);
        }
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let n = rest.len();
        let mut lanes = [0.0f32; 8];
        lanes[..n].copy_from_slice(rest);
        // SAFETY: `lanes` is 8 floats; unaligned load and store.
        unsafe {
            let v = exp8(_mm256_sub_ps(_mm256_loadu_ps(lanes.as_ptr()), m));
            _mm256_storeu_ps(lanes.as_mut_ptr(), v);
        }
        rest.copy_from_slice(&lanes[..n]);
    }
}
