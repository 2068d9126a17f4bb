//! IQ4_NLx4, the whole layout in one file: GGUF IQ4_NL blocks (the bytes
//! of Q4_0 blocks, each nibble an index into [`IQ4_NL_VALUES`]) interleaved
//! as Q4_0x4 with the nibbles unchanged, every value kept exactly
//! (docs/kernels.md, "IQ4_NLx4"). Here are its values and byte order, its
//! scalar specification ([`generic`]) and its kernels on aarch64 (the
//! Q4_0x4 texts `nibble_gemv_loop!` and `nibble_tile4!` with the nibble
//! decoding `iq4_nl_nibbles!`) and x86_64 (AVX2 tiles; with AVX512-VNNI the
//! 512-bit nibble tile's table kind), the one of the build also named
//! [`arch`]. Its repacker is Q4_0x4's with [`IQ4_NLX4_XOR`] ([`repack_iq4_nl`]).
//!
//! * IQ4_NL (GGUF): the bytes of a Q4_0 block (`d: f16 LE`, 16 nibble bytes,
//!   weight `j` in the low nibble of byte `j`, weight `j + 16` in its high
//!   nibble), each nibble an index into [`IQ4_NL_VALUES`]: `x = d *
//!   IQ4_NL_VALUES[n]`.
//! * IQ4_NLx4: the Q4_0x4 super-block (72 bytes, [`Q4X4_BLOCK_BYTES`](crate::layout::Q4X4_BLOCK_BYTES), rows
//!   in groups of [`Q4X4_ROWS`](crate::layout::Q4X4_ROWS)) with the nibbles as GGUF has them (no XOR).

/// The 16 values an IQ4_NL nibble selects (ggml's `kvalues_iq4nl`).
pub const IQ4_NL_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// What the Q4_0x4 repacker XORs each nibble byte with for this layout:
/// nothing (the nibbles stay as GGUF has them).
pub const IQ4_NLX4_XOR: u8 = 0;

/// Repacks a row-major GGUF IQ4_NL matrix (`rows x cols / 32` blocks of 18
/// bytes) into IQ4_NLx4: Q4_0x4's repacking with [`IQ4_NLX4_XOR`].
pub fn repack_iq4_nl(
    src: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [u8],
) -> Result<(), crate::shape::ShapeError> {
    crate::layouts::q4_0::repack_nibble_x4::<IQ4_NLX4_XOR>(src, rows, cols, out)
}

/// The scalar specification: every architecture's kernels match it bit for
/// bit.
pub mod generic {
    use super::IQ4_NL_VALUES;
    use crate::generic::{gemm_groups, nibble_x4_group_dot};
    use crate::layout::{Q4X4_BLOCK_BYTES, Q4X4_ROWS};

    /// The four rows of one IQ4_NLx4 row group dotted with one activation row.
    pub fn iq4_nlx4_group_dot(group: &[u8], act_qs: &[i8], act_d: &[f32]) -> [f32; Q4X4_ROWS] {
        nibble_x4_group_dot(group, act_qs, act_d, |n| IQ4_NL_VALUES[n as usize] as i32)
    }

    forwarding_entry!(
        /// GEMV, IQ4_NLx4 weights x one Q8_0 activation row (shapes as
        /// [`gemv_q4_0x4_q8_0`]).
        q8_0 gemv gemv_iq4_nlx4_q8_0 => gemm_iq4_nlx4_q8_0
    );

    forwarding_entry!(
        /// GEMM, IQ4_NLx4 weights x `m` Q8_0 activation rows (shapes as
        /// [`gemm_q4_0x4_q8_0`]).
        q8_0 gemm gemm_iq4_nlx4_q8_0 => gemm_groups [Q4X4_BLOCK_BYTES, iq4_nlx4_group_dot]
    );
}

/// aarch64: the Q4_0x4 texts with this layout's nibble decoding (a `tbl`
/// lookup).
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    use super::IQ4_NL_VALUES;
    use crate::aarch64::gemm::{entry_points, nibble_tile4, GemmKernels};
    use crate::aarch64::gemv::nibble_gemv_loop;
    use crate::layout::{Q4X4_BLOCK_BYTES, Q4X4_ROWS};

    /// IQ4_NLx4 (raw nibbles, `v30` = 0x0f, `v31` = [`IQ4_NL_VALUES`] loaded
    /// from `{kv}`): `and`/`ushr` split the nibbles, `tbl` looks their values
    /// up.
    #[rustfmt::skip]
    macro_rules! iq4_nl_nibbles {
        (setup) => { "movi v30.16b, #0x0f\nld1 {{v31.16b}}, [{kv}]" };
        (fbits) => { "" };
        ($lo:literal, $hi:literal, $src:literal) => { concat!(
            "and ", $lo, ".16b, ", $src, ".16b, v30.16b\n",
            "ushr ", $hi, ".16b, ", $src, ".16b, #4\n",
            "tbl ", $lo, ".16b, {{v31.16b}}, ", $lo, ".16b\n",
            "tbl ", $hi, ".16b, {{v31.16b}}, ", $hi, ".16b",
        ) };
    }

    /// The IQ4_NL values where the kernels load them from.
    pub(super) static IQ4_NL_TABLE: [i8; 16] = IQ4_NL_VALUES;

    nibble_gemv_loop!(
        gemv_iq4x4_groups,
        iq4_nl_nibbles,
        [kv = in(reg) IQ4_NL_TABLE.as_ptr(), out("v30") _,]
    );

    nibble_tile4!(
        gemm_iq4x4_tile4,
        iq4_nl_nibbles,
        [kv = in(reg) IQ4_NL_TABLE.as_ptr(), out("v30") _,]
    );

    entry_points!(
        q8_0[super::generic],
        gemv_iq4_nlx4_q8_0,
        gemm_iq4_nlx4_q8_0,
        GemmKernels {
            group_rows: Q4X4_ROWS,
            block_bytes: Q4X4_BLOCK_BYTES,
            row: gemv_iq4x4_groups,
            tile4: Some(gemm_iq4x4_tile4),
            small_tiles: None,
            strided: true,
        }
    );
}

/// x86_64: AVX2 tiles of one row group (4 rows) x up to 4 activation rows,
/// the nibbles looked up with `vpshufb`; with AVX512-VNNI the 512-bit tile
/// of `gemm_vnni.rs` (`gemm_nib4`'s table kind, the values offset by 128).
#[cfg(target_arch = "x86_64")]
pub mod x86_64 {
    use super::{generic, IQ4_NL_VALUES};
    use crate::layout::{Q4X4_BLOCK_BYTES, Q4X4_ROWS, QK};
    use crate::shape::{gemm_shape, GemmShape, ShapeError};
    use crate::x86_64::gemm::{gemm_run, Grid, Pass, TILE_M};
    use crate::x86_64::gemm_vnni::{
        self,
        avx512::{gemm_nib4, Nib4},
    };
    use crate::x86_64::{act_patterns, Avx2, Vnni};
    use core::arch::x86_64::*;

    /// The low 7 bits of each IQ4_NL value's `v + 128` for a negative value,
    /// else the value itself: `v = low - 128 * negative`, `low` in 1..=118, so
    /// `vpmaddubsw(low, a)` pair sums fit i16 for every `a` (<= 2 * 118 * 128).
    const LOW: [i8; 16] = {
        let mut t = [0i8; 16];
        let mut i = 0;
        while i < 16 {
            let v = IQ4_NL_VALUES[i] as i16;
            t[i] = if v < 0 { v + 128 } else { v } as i8;
            i += 1;
        }
        t
    };

    /// 1 where the IQ4_NL value is negative (the first 8), else 0.
    const NEGATIVE: [i8; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0];

    forwarding_entry!(
        /// GEMV, IQ4_NLx4 weights x one Q8_0 activation row: [`gemm_iq4_nlx4_q8_0`]
        /// with `m = 1`; the contract of [`generic::gemv_iq4_nlx4_q8_0`].
        q8_0 gemv gemv_iq4_nlx4_q8_0 (cpu: Avx2) => gemm_iq4_nlx4_q8_0
    );

    /// GEMM, IQ4_NLx4 weights x `m` Q8_0 activation rows: the contract of
    /// [`generic::gemm_iq4_nlx4_q8_0`], exact for every input bit pattern; empty
    /// shapes go to the generic code.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_iq4_nlx4_q8_0(
        cpu: Avx2,
        w: &[u8],
        rows: usize,
        cols: usize,
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        let block = Q4X4_BLOCK_BYTES;
        let GemmShape { nb, groups } =
            gemm_shape(Q4X4_ROWS, block, w, rows, cols, act_qs, act_d, m, out)?;
        if nb == 0 || rows == 0 || m == 0 {
            return generic::gemm_iq4_nlx4_q8_0(w, rows, cols, act_qs, act_d, m, out);
        }
        if cpu.vnni() == Vnni::Avx512 && nb <= gemm_vnni::MAX_BLOCKS {
            let (a, o) = ((act_qs, act_d), out);
            // SAFETY: `gemm_shape` checked `w` (`groups` row groups of `nb`
            // 72-byte super-blocks, rows <= 4 * groups), `act_qs`, `act_d` and
            // `out` for `m` rows; nb, rows, m >= 1; the token says AVX512-VNNI.
            unsafe {
                gemm_nib4::<{ Nib4::TABLE }>(
                    cpu,
                    &IQ4_NL_VALUES,
                    w,
                    rows,
                    groups,
                    nb,
                    a.0,
                    a.1,
                    m,
                    o,
                )
            };
            return Ok(());
        }
        let tiles = [iq4_tile::<1>, iq4_tile::<2>, iq4_tile::<3>, iq4_tile::<4>];
        let grid = Grid {
            rows,
            units: groups,
            m,
            call_rows: m,
        };
        gemm_run(grid, out, |pass: Pass<'_, Q4X4_ROWS, TILE_M>| {
            pass.tiles(|g, t0, tm, res| {
                let wg = &w[g * nb * block..(g + 1) * nb * block];
                let (qs, d) = (&act_qs[t0 * cols..], &act_d[t0 * nb..]);
                // SAFETY: `wg` is one row group of `nb` super-blocks, `qs` and
                // `d` hold `tm` rows of `cols` quants and `nb` scales from row
                // `t0` (`gemm_shape` checked `m` rows); the token proves AVX2.
                unsafe { tiles[tm - 1](wg, qs, d, nb, res) };
            });
        });
        Ok(())
    }

    /// One IQ4_NLx4 row group `wg` against `T` activation rows: `res[t]` its 4
    /// rows' dots with row `t`.
    ///
    /// Per super-block: two 32-byte loads (chunks 0-1 and 2-3), nibbles split
    /// with `and`/`srli`, looked up in [`LOW`] and [`NEGATIVE`] (`vpshufb`);
    /// against the activation dwords each chunk needs ([`act_patterns`]),
    /// `sum v a = sum low a - 128 sum_negative a`, each `vpmaddubsw` widened by
    /// `vpmaddwd` before it is added: exact in i32. The halves (even and odd
    /// chunks) are added, then `acc + isum * (d_w * d_a)` per row, the
    /// reference's order.
    ///
    /// # Safety
    /// `wg.len() >= nb * 72`, `qs.len() >= (T - 1) * nb * 32 + nb * 32`,
    /// `d.len() >= T * nb`, `1 <= T <= 4`, and the CPU must implement AVX2,
    /// FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn iq4_tile<const T: usize>(
        wg: &[u8],
        qs: &[i8],
        d: &[f32],
        nb: usize,
        res: &mut [[f32; Q4X4_ROWS]; TILE_M],
    ) {
        // SAFETY: the loads read super-block `b < nb` of `wg` and block `b` of
        // rows `t < T` of `qs` and `d` (the function contract); unaligned.
        unsafe {
            debug_assert!(wg.len() >= nb * Q4X4_BLOCK_BYTES && qs.len() >= T * nb * QK);
            let table =
                |t: &[i8; 16]| _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast()));
            let (low, neg) = (table(&LOW), table(&NEGATIVE));
            let m4 = _mm256_set1_epi8(0x0F);
            let ones = _mm256_set1_epi16(1);
            let mut acc = [_mm_setzero_ps(); T];
            for b in 0..nb {
                let p = wg.as_ptr().add(b * Q4X4_BLOCK_BYTES);
                let x0 = _mm256_loadu_si256(p.add(8).cast());
                let x1 = _mm256_loadu_si256(p.add(40).cast());
                let n = [
                    _mm256_and_si256(x0, m4),
                    _mm256_and_si256(x1, m4),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(x0), m4),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(x1), m4),
                ];
                let lo = n.map(|n| _mm256_shuffle_epi8(low, n));
                let ng = n.map(|n| _mm256_shuffle_epi8(neg, n));
                let sw = _mm_cvtph_ps(_mm_loadl_epi64(p.cast()));
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let a = act_patterns(qs.as_ptr().add(t * nb * QK + b * QK));
                    let mut s = _mm256_setzero_si256();
                    for k in 0..4 {
                        let l = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[k], a[k]), ones);
                        let g = _mm256_madd_epi16(_mm256_maddubs_epi16(ng[k], a[k]), ones);
                        s = _mm256_add_epi32(s, _mm256_sub_epi32(l, _mm256_slli_epi32::<7>(g)));
                    }
                    let isum =
                        _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
                    let da = _mm_set1_ps(*d.get_unchecked(t * nb + b));
                    let v = _mm_mul_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(sw, da));
                    *acc_t = _mm_add_ps(*acc_t, v);
                }
            }
            for (r, a) in res.iter_mut().zip(acc) {
                _mm_storeu_ps(r.as_mut_ptr(), a);
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub use aarch64 as arch;
#[cfg(target_arch = "x86_64")]
pub use x86_64 as arch;
