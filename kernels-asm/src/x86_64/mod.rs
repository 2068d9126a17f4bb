//! x86_64 kernels: AVX2 + FMA + F16C through `core::arch` intrinsics; the
//! Q4_0x4 and Q8_0x8 GEMM tiles also in a VNNI form (`vpdpbusd`: on 512-bit
//! registers with AVX512-VNNI, on 256-bit ones with AVX-VNNI; the same exact
//! integer sums) when the CPU has one, and so the Q5_0x4 / Q5_1x4, Q4_Kx4 /
//! Q5_Kx4 and Q6_Kx8 tiles (on 256-bit registers, EVEX or VEX).
//!
//! Bit-identical to the scalar references (docs/kernels.md): the per-block
//! integer sums are exact, and each block's contribution
//! `(isum as f32) * (d_w * d_a)` is formed with two separate `vmulps` and
//! added with `vaddps`, blocks in order, one output row per vector lane. The
//! only fused multiply-add is attention's (`vfmadd`), where the reference
//! writes one (`libm::fmaf`).
//!
//! One file per operation; every public function has the name and the
//! signature of its twin in [`crate::generic`] with the [`Avx2`] token in
//! front, and calls that twin for the shapes it has no vector code for.
//! A [`ShapeError`](crate::ShapeError) means the slices do not fit the
//! dimensions; nothing was written then.

use crate::layout::Q4X4_BLOCK_BYTES;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Defines the VNNI forms of a GEMM tile whose body takes its multiply
/// instructions as a const [`Dot`] argument: `$avx` with AVX-VNNI (the VEX
/// `vpdpbusd`) and `$avx512` with AVX512-VNNI and F/BW/VL (the EVEX form on
/// 256-bit registers), each the body inlined and compiled with its form's
/// target features, the body's `DOT` argument naming the form (the same
/// i32 sums as the AVX2 form, so the same results). Each form's contract is
/// the body's with a VNNI form, and the CPU must implement that form. The
/// `avx:` and `avx512:` arms define one form (a layout whose other form is
/// a different tile).
macro_rules! vnni_forms {
    (
        $avx:ident, $avx512:ident <$(const $g:ident: $gt:ty),*> ($($a:ident: $t:ty),* $(,)?)
        => $body:ident::<$($ba:tt),*>
    ) => {
        $crate::x86_64::vnni_forms!(avx: $avx<$(const $g: $gt),*>($($a: $t),*) => $body::<$($ba),*>);
        $crate::x86_64::vnni_forms!(avx512: $avx512<$(const $g: $gt),*>($($a: $t),*) => $body::<$($ba),*>);
    };
    (
        avx: $avx:ident <$(const $g:ident: $gt:ty),*> ($($a:ident: $t:ty),* $(,)?)
        => $body:ident::<$($ba:tt),*>
    ) => {
        /// The AVX-VNNI form of a tile (`vnni_forms!`).
        ///
        /// # Safety
        /// The body's contract with a VNNI form, and the CPU must implement
        /// AVX-VNNI.
        #[cfg_attr(
            not(kestrel_avx_vnni_as_evex),
            target_feature(enable = "avx2,fma,f16c,avxvnni")
        )]
        #[cfg_attr(
            kestrel_avx_vnni_as_evex,
            target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
        )]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $avx<$(const $g: $gt),*>($($a: $t),*) {
            const DOT: u8 = $crate::x86_64::Dot::AVX_VNNI;
            // SAFETY: the contract of this function is the body's with a
            // VNNI form; the CPU implements AVX-VNNI.
            unsafe { $body::<$($ba),*>($($a),*) }
        }
    };
    (
        avx512: $avx512:ident <$(const $g:ident: $gt:ty),*> ($($a:ident: $t:ty),* $(,)?)
        => $body:ident::<$($ba:tt),*>
    ) => {
        /// The AVX512-VNNI form of a tile (`vnni_forms!`).
        ///
        /// # Safety
        /// The body's contract with a VNNI form, and the CPU must implement
        /// AVX512-VNNI with AVX512 F/BW/VL.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $avx512<$(const $g: $gt),*>($($a: $t),*) {
            const DOT: u8 = $crate::x86_64::Dot::AVX512_VNNI;
            // SAFETY: the contract of this function is the body's with a
            // VNNI form; the CPU implements AVX512-VNNI with F/BW/VL.
            unsafe { $body::<$($ba),*>($($a),*) }
        }
    };
}
pub(crate) use vnni_forms;

mod activation;
mod attention;
mod deltanet;
pub(crate) mod gemm;
pub(crate) mod gemm_vnni;
pub(crate) mod k8;
mod matvec;
mod quantize;

pub use activation::{
    exp_minus, gelu_tanh_in_place, softmax_rows, softmax_rows_online, swiglu_runs,
};
pub use attention::{
    attn_scores_f16, attn_scores_f16_heads, attn_scores_f32, attn_scores_f32_heads,
    attn_values_f16, attn_values_f16_heads, attn_values_f32, attn_values_f32_heads,
};
pub use deltanet::delta_rule;
pub use matvec::{matvec_f16, matvec_f32};
pub use quantize::{quantize_acts_q8_0, quantize_acts_q8_k};

/// How far ahead of a weight stream the decode kernels prefetch. The
/// hardware prefetcher alone left the one-stream Q4_0x4 GEMV at 12 GB/s on
/// an Intel Xeon VM whose read probe gives 19 (2026-12-02: 4 KB ahead, 19-20
/// GB/s; 512 B, 1 KB and 2 KB ahead less, 8 and 16 KB no more).
const PREFETCH_AHEAD: usize = 4096;

/// Prefetches the `bytes` that lie [`PREFETCH_AHEAD`] bytes past `p` (one
/// prefetch per 64 bytes), for a kernel that reads its weights as one
/// stream from `p` on: the bytes a later iteration reads. A prefetch never
/// faults, and `wrapping_add` keeps the address arithmetic defined, so `p`
/// may be any address (past the weights, the prefetches are wasted).
#[inline(always)]
pub(crate) fn prefetch_ahead(p: *const u8, bytes: usize) {
    let pf = p.wrapping_add(PREFETCH_AHEAD);
    for k in 0..bytes.div_ceil(64) {
        // SAFETY: a prefetch of any address is defined (it never faults);
        // SSE is part of the x86_64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64 * k).cast()) };
    }
}

/// At block `b` of a pair of Q4_0x4 row groups whose second is `wb` (`nb`
/// blocks each), prefetches the next pair's bytes (they follow `wb`) at the
/// rate this pair is read: short rows otherwise pay the memory latency at
/// the start of every pair. A prefetch never faults, and `wrapping_add`
/// keeps the address arithmetic defined.
#[inline(always)]
pub(crate) fn prefetch_next_pair(wb: &[u8], nb: usize, b: usize) {
    let pf = wb
        .as_ptr()
        .wrapping_add(nb * Q4X4_BLOCK_BYTES + 2 * b * Q4X4_BLOCK_BYTES);
    for k in 0..3 {
        // SAFETY: a prefetch of any address is defined (it never faults).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(64 * k).cast()) };
    }
}

/// `sum(a)` of one 32-byte activation block, exact in i32.
///
/// # Safety
/// `p` must point to 32 readable bytes; the CPU must implement AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn block_sum(p: *const i8) -> i32 {
    // SAFETY: `p` points to 32 readable bytes and the CPU implements AVX2 (the
    // function contract).
    unsafe {
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
}

/// The quants one Q6_K scale covers (a run of the activation row).
pub(crate) const RUN: usize = 16;

/// `-128 *` the sum of each 16-quant run of `qs` (in order), written to
/// the front of `table` and returned: the `vpdpbusd` tile's unsigned
/// weights are `4 * (q - 32) + 128`, so each run's sum starts from this
/// (this tile's and the 512-bit one's in `gemm_vnni.rs`).
/// Panics unless `table` holds `qs.len() / 16` entries.
pub(crate) fn offset_table<'t>(qs: &[i8], table: &'t mut [MaybeUninit<i32>]) -> &'t [i32] {
    let runs = qs.len() / RUN;
    assert!(table.len() >= runs);
    for (entry, run) in table.iter_mut().zip(qs.chunks_exact(RUN)) {
        entry.write(-128 * run.iter().map(|&q| i32::from(q)).sum::<i32>());
    }
    // SAFETY: entries 0..runs were written just above (`qs` has `runs`
    // whole runs); MaybeUninit<i32> has the layout of i32.
    unsafe { core::slice::from_raw_parts(table.as_ptr().cast(), runs) }
}

/// The 4 row sums of one Q4_0x4 / Q5_0x4 / Q5_1x4 row group over `nb`
/// blocks taken in pairs, the GEMVs' shared traversal: `pair(b, b1)` gives
/// the 8 lanes [block `b`'s 4 rows, block `b1`'s 4 rows] (`b1 == b` for an
/// odd last block); the low half is added before the high half (dropped
/// when `b1 == b`), the reference's block order.
///
/// # Safety
/// The CPU must implement AVX2, FMA and F16C; `pair` must be safe to call
/// for every `b < nb`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn sum_block_pairs(
    nb: usize,
    mut pair: impl FnMut(usize, usize) -> __m256,
) -> __m128 {
    let mut acc = _mm_setzero_ps();
    let mut b = 0;
    while b < nb {
        let b1 = if b + 1 < nb { b + 1 } else { b };
        let v = pair(b, b1);
        acc = _mm_add_ps(acc, _mm256_castps256_ps128(v));
        if b1 != b {
            acc = _mm_add_ps(acc, _mm256_extractf128_ps::<1>(v));
        }
        b += 2;
    }
    acc
}

/// [rows of `ia`, rows of `ib`]: each block's even- and odd-chunk lanes
/// (the two 128-bit halves of a per-block `vpmaddwd` result) added, exact.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn pair_rows(ia: __m256i, ib: __m256i) -> __m256i {
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(ia, ib),
        _mm256_permute2x128_si256::<0x31>(ia, ib),
    )
}

/// [rows of `sa`, rows of `sb`] in i32 from two Q4_0x4 row groups' i16
/// sums (dword `r` of each 128-bit half: row `r`'s two pair sums, even
/// chunks in the low half, odd in the high): the halves are added in i16
/// (each lane of a nibble sum is at most 15,360 in magnitude, two 30,720),
/// then `vpmaddwd` with ones adds each dword's pair in i32. Exact, and one
/// `vpmaddwd` instead of two.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn pair_rows16(sa: __m256i, sb: __m256i) -> __m256i {
    // [sa low, sb high] + [sa high, sb low].
    let halves = _mm256_add_epi16(
        _mm256_blend_epi32::<0xF0>(sa, sb),
        _mm256_permute2x128_si256::<0x21>(sa, sb),
    );
    _mm256_madd_epi16(halves, _mm256_set1_epi16(1))
}

/// The four activation patterns a Q4_0x4 / Q5_0x4 / Q5_1x4 super-block's
/// 32-byte weight loads need, from the 32-byte activation block at `p`:
/// pattern `k` holds dword `2k` in its low 128-bit half and dword `2k + 1`
/// in its high half, each repeated 4 times (one per interleaved row).
///
/// # Safety
/// `p` must point to 32 readable bytes; the CPU must implement AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn act_patterns(p: *const i8) -> [__m256i; 4] {
    // SAFETY: `p` points to 32 readable bytes (the function contract);
    // unaligned load.
    let a = unsafe { _mm256_loadu_si256(p.cast()) };
    [
        _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
        _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3)),
        _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5)),
        _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)),
    ]
}

/// This architecture's capability token under the name every architecture
/// module exports.
pub type Cpu = Avx2;

/// Which `vpdpbusd` the Q4_0x4 and Q8_0x8 GEMM tiles use ([`gemm_vnni`]),
/// and the Q5_0x4 / Q5_1x4 (`q5`), Q4_Kx4 / Q5_Kx4 (`layouts::q4k`) and
/// 8-row K (`k8`, `layouts`) tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vnni {
    /// None: the AVX2 tiles (`vpmaddubsw` / `vpmaddwd`).
    No,
    /// AVX512-VNNI with AVX512 F/BW/VL: the EVEX form on 512-bit registers.
    Avx512,
    /// AVX-VNNI: the VEX form (`{vex} vpdpbusd`).
    Avx,
}

/// `vpdpbusd` on 256-bit registers as the AVX-VNNI tiles use it: the VEX form
/// (`{vex} vpdpbusd`, AVX-VNNI). A test build with `--cfg
/// kestrel_avx_vnni_as_evex` (scripts/test.sh, on a CPU with AVX512-VNNI and
/// no AVX-VNNI) compiles those tiles with AVX512-VNNI and VL instead and this
/// is the EVEX form of the same instruction (the same sums), so their code
/// runs where only AVX512-VNNI exists; only the encoding is not the shipped one.
#[cfg(not(kestrel_avx_vnni_as_evex))]
pub(crate) use core::arch::x86_64::_mm256_dpbusd_avx_epi32 as dpbusd_vex;
#[cfg(kestrel_avx_vnni_as_evex)]
pub(crate) use core::arch::x86_64::_mm256_dpbusd_epi32 as dpbusd_vex;

/// Which instructions multiply a tile's bytes: `vpmaddubsw` / `vpmaddwd`
/// (AVX2), or `vpdpbusd` in its VEX (AVX-VNNI) or EVEX (AVX512-VNNI with
/// VL, on 256-bit registers) form (the Q5, K-quant and Q6_Kx8 tiles' const
/// parameter: one body, compiled once per form).
pub(crate) struct Dot;

impl Dot {
    pub(crate) const MADDUBS: u8 = 0;
    pub(crate) const AVX_VNNI: u8 = 1;
    pub(crate) const AVX512_VNNI: u8 = 2;
}

/// Proof that the CPU executing this program implements AVX2, FMA and F16C,
/// and which VNNI encoding it also implements ([`Vnni`]): AVX512-VNNI with
/// AVX512 F/BW/VL, or else AVX-VNNI. Kernels that use those instructions take one
/// by value.
#[derive(Clone, Copy, Debug)]
pub struct Avx2 {
    vnni: Vnni,
}

impl Avx2 {
    /// `Some` when the build itself targets AVX2, FMA and F16C
    /// (`-C target-feature=+avx2,+fma,+f16c` or a target CPU that has them),
    /// so every CPU able to run this binary has them (and VNNI when the
    /// build targets AVX512-VNNI with AVX512 F/BW/VL, or AVX-VNNI, too).
    pub fn new() -> Option<Self> {
        if cfg!(all(
            target_feature = "avx2",
            target_feature = "fma",
            target_feature = "f16c"
        )) {
            let vnni = if cfg!(all(
                target_feature = "avx512vnni",
                target_feature = "avx512f",
                target_feature = "avx512bw",
                target_feature = "avx512vl"
            )) {
                Vnni::Avx512
            } else if cfg!(target_feature = "avxvnni") {
                Vnni::Avx
            } else {
                Vnni::No
            };
            Some(Avx2 { vnni })
        } else {
            None
        }
    }

    /// Detects AVX2, FMA and F16C at run time (CPUID and the OS's XSAVE
    /// state), and AVX512-VNNI with AVX512 F/BW/VL, or else AVX-VNNI.
    #[cfg(any(feature = "std", test))]
    pub fn detect() -> Option<Self> {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") && has!("f16c") {
            let vnni =
                if has!("avx512vnni") && has!("avx512f") && has!("avx512bw") && has!("avx512vl") {
                    Vnni::Avx512
                } else if has!("avxvnni") && !cfg!(kestrel_avx_vnni_as_evex) {
                    // (A `kestrel_avx_vnni_as_evex` test build compiles the
                    // AVX-VNNI tiles for AVX512: not for this CPU.)
                    Vnni::Avx
                } else {
                    Vnni::No
                };
            Some(Avx2 { vnni })
        } else {
            None
        }
    }

    /// The same token with the AVX-VNNI tiles, when the CPU has AVX-VNNI
    /// (to test and compare them where it also has AVX512-VNNI); in a build
    /// with `--cfg kestrel_avx_vnni_as_evex`, when it has AVX512-VNNI with
    /// AVX512 F/BW/VL (those tiles then use the EVEX form: [`dpbusd_vex`]).
    #[cfg(any(feature = "std", test))]
    pub fn with_avx_vnni(self) -> Option<Self> {
        use std::arch::is_x86_feature_detected as has;
        let runs = if cfg!(kestrel_avx_vnni_as_evex) {
            has!("avx512vnni") && has!("avx512f") && has!("avx512bw") && has!("avx512vl")
        } else {
            has!("avxvnni")
        };
        runs.then_some(Avx2 { vnni: Vnni::Avx })
    }

    /// A token without checking (no VNNI).
    ///
    /// # Safety
    /// The caller guarantees that the CPU implements AVX2, FMA and F16C;
    /// calling a kernel with this token on a CPU without them executes an
    /// undefined instruction.
    pub unsafe fn new_unchecked() -> Self {
        Avx2 { vnni: Vnni::No }
    }

    /// The same token with the VNNI form `vnni`, without checking.
    ///
    /// # Safety
    /// The caller guarantees that the CPU implements that form:
    /// AVX512-VNNI with AVX512 F/BW/VL for [`Vnni::Avx512`], AVX-VNNI for
    /// [`Vnni::Avx`].
    pub unsafe fn with_vnni_unchecked(self, vnni: Vnni) -> Self {
        Avx2 { vnni }
    }

    /// Whether the GEMM tiles use a VNNI form.
    pub fn has_vnni(self) -> bool {
        self.vnni != Vnni::No
    }

    /// Which VNNI form the GEMM tiles use.
    pub fn vnni(self) -> Vnni {
        self.vnni
    }

    /// The same token with the AVX2 tiles only (to compare the two sets;
    /// `KESTREL_KERNELS=avx2`).
    pub fn without_vnni(self) -> Self {
        Avx2 { vnni: Vnni::No }
    }
}

/// The 8 x 8 transpose: lane `g` of result `j` is lane `j` of `r[g]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}
