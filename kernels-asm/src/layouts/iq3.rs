//! The codebook family's shared kernel text: IQ3_XXSx8 ([`super::iq3xxs`])
//! and IQ3_Sx8 ([`super::iq3s`]) store, for 8 rows of a 256-weight
//! super-block, each 4-weight chunk's index into a grid of 4-byte points
//! (256 points for IQ3_XXS, 512 for IQ3_S), a sign bit per weight (IQ3_XXS:
//! 7 bits per 8 weights, the eighth their parity) and a 4-bit scale per
//! 32-weight sub-block. Both layouts put the chunk indices in the same
//! order, `[sub-block p][chunk c (0..8)][row r]` from their `INDEX_AT`, and
//! give the kernels per sub-block and row a 32-bit word of four sign bytes
//! (byte `k` the signs of chunks `2k` and `2k + 1`, bit `j` weight `8k +
//! j`), so that only the front end (the index's ninth bit, where the signs
//! and scales come from) differs. The 2-bit members ([`super::iq2xxs`],
//! [`super::iq2xs`], [`super::iq2s`]) index 8-byte points per pair of
//! chunks, each chunk reading one half; IQ2_XS and IQ2_S have a scale per
//! 16 weights, so the sums are scaled per 16-weight run (the others give
//! a sub-block's two runs one scale: the same integer sum).
//!
//! A weight's value is `d * s * g * sign / 2^f`, `s = 2 ls + 1` (`ls` the
//! 4-bit scale), `g` the grid component, `f` 2 for IQ3_XXS (ggml's
//! `d * (0.5 + ls) * 0.5`), 0 for IQ3_S (`d * (1 + 2 ls)`), 3 for the IQ2
//! types (`d * (0.5 + ls) * 0.25`). The kernels sum `g * sign * a` exactly
//! in `i32` per 16-weight run, scale by `s`, and per super-block add `(d_w
//! * d_a) * (sumi / 2^f)` to the row's float sum, the order of
//! [`group_dot`].

use crate::generic::read_f16;
use crate::layout::QK_K;

/// Rows of a codebook layout's row group.
pub const IQ3_ROWS: usize = 8;

/// A super-block field of row `r`: a weight's signed value (weight `i`,
/// 0..256) or the scale `2 ls + 1` of a 16-weight run (run `i`, 0..16;
/// both runs of a sub-block share it but in IQ2_XS).
pub(crate) type Field = fn(&[u8], usize, usize) -> i32;

/// The scalar specification of both layouts' dot product: the eight rows
/// of one row group (`bytes`-byte super-blocks, each beginning with the 8
/// rows' `d`) dotted with one Q8_K activation row, `f` the power of two
/// the scaled sum is divided by.
pub(crate) fn group_dot(
    bytes: usize,
    (weight, scale): (Field, Field),
    f: u32,
    group: &[u8],
    act_qs: &[i8],
    act_d: &[f32],
) -> [f32; IQ3_ROWS] {
    let factor = 1.0 / (1u32 << f) as f32;
    let mut acc = [0.0f32; IQ3_ROWS];
    let blocks = group
        .chunks_exact(bytes)
        .zip(act_qs.chunks_exact(QK_K))
        .zip(act_d);
    for ((sb, a), &da) in blocks {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut sumi = 0i32;
            for h in 0..QK_K / 16 {
                let mut isum = 0i32;
                for (i, &at) in a.iter().enumerate().skip(16 * h).take(16) {
                    isum += weight(sb, r, i) * at as i32;
                }
                sumi += scale(sb, r, h) * isum;
            }
            *acc_r += (read_f16(sb, 2 * r) * da) * (sumi as f32 * factor);
        }
    }
    acc
}

/// The sign of weight `w` (0..32) of a sub-block from its sign word (byte
/// `w / 8`, bit `w % 8`): `g` or `-g`.
#[inline]
pub(crate) fn signed(word: u32, w: usize, g: i32) -> i32 {
    if (word >> (8 * (w / 8) + w % 8)) & 1 != 0 {
        -g
    } else {
        g
    }
}

/// Component `k` (0..4) of a grid point.
#[inline]
pub(crate) fn component(point: u32, k: usize) -> i32 {
    ((point >> (8 * k)) & 0xff) as i32
}

/// A super-block decoded for the aarch64 prompt path: chunk `c` of
/// sub-block `p` at `256p + 32c`, its 16 bytes of rows 0-3 (row `r`'s 4
/// signed values at `4r`) then of rows 4-7; the scales `2 ls + 1` of each
/// 16-weight run (`[h][r]`; a sub-block's two the same but in IQ2_XS) and
/// the rows' `d`.
#[cfg(target_arch = "aarch64")]
#[repr(C)]
pub(crate) struct Decoded {
    pub(crate) values: [u8; QK_K * IQ3_ROWS],
    pub(crate) scales: [i32; QK_K / 16 * IQ3_ROWS],
    pub(crate) dw: [f32; IQ3_ROWS],
}

#[cfg(target_arch = "aarch64")]
impl Decoded {
    /// All zero.
    pub(crate) const ZERO: Decoded = Decoded {
        values: [0; QK_K * IQ3_ROWS],
        scales: [0; QK_K / 16 * IQ3_ROWS],
        dw: [0.0; IQ3_ROWS],
    };
}

/// `0xff` in byte `k` of entry `n` where bit `k` of `n` is set.
#[cfg(target_arch = "aarch64")]
const NIBBLE_MASKS: [u32; 16] = {
    let mut t = [0u32; 16];
    let mut n = 0;
    while n < 16 {
        let mut k = 0;
        while k < 4 {
            if n >> k & 1 != 0 {
                t[n] |= 0xff << (8 * k);
            }
            k += 1;
        }
        n += 1;
    }
    t
};

/// Decodes super-block `sb` of 8 rows into `out`: `front(r, p)` gives
/// sub-block `p` of row `r`'s sign word and the scales `2 ls + 1` of its
/// two 16-weight runs, `point(r,
/// p, c)` the grid point of its chunk `c`. Each value is negated bytewise
/// where its sign is set (`~g + 1`: `g >= 1`, so no carry leaves the byte).
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub(crate) fn decode_super_block(
    sb: &[u8],
    out: &mut Decoded,
    front: impl Fn(usize, usize) -> (u32, [i32; 2]),
    point: impl Fn(usize, usize, usize) -> u32,
) {
    for r in 0..IQ3_ROWS {
        out.dw[r] = read_f16(sb, 2 * r);
        for p in 0..QK_K / 32 {
            let (signs, scales) = front(r, p);
            out.scales[IQ3_ROWS * 2 * p + r] = scales[0];
            out.scales[IQ3_ROWS * (2 * p + 1) + r] = scales[1];
            for c in 0..8 {
                let mask = NIBBLE_MASKS[(signs >> (4 * c)) as usize & 15];
                let v = (point(r, p, c) ^ mask).wrapping_add(mask & 0x0101_0101);
                let at = 256 * p + 32 * c + 16 * (r / 4) + 4 * (r % 4);
                out.values[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// aarch64: the sub-block text both GEMV loops run. Per chunk, 8 grid
/// points are looked up (`$lookup`: 3 instructions each, a byte or
/// halfword index, `ldr` of the point, `mov` into its lane), into `v6`
/// (rows 0-3) and `v7` (rows 4-7); the chunk's sign bits are spread over
/// its bytes by `tbl` (the sign words of rows 0-3 in `v0`, 4-7 in `v1`,
/// `v16` the pair's byte index) and `cmtst` against the chunk's bit masks,
/// the values negated where set (`eor`, `sub`), then `sdot` by lane with
/// the chunk's 4 activations into `v4` / `v5`.
#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64 {
    /// The constants the loops load into `v30` (the sign-byte index of
    /// pair 0: byte `4r + k` is `4r`) and `v31` (weight `k`'s bit `1 << k`,
    /// chunks of even number; `v23` = `v31 << 4` for odd ones).
    pub(crate) static IQ3_CONSTANTS: [u8; 32] = [
        0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, //
        1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8,
    ];

    /// Loads the constants (`{kc}`: [`IQ3_CONSTANTS`]): `v30`, `v31`,
    /// `v23` as above, `v22` = 1 (the next pair's index step), `v24` =
    /// 0x7f.
    #[rustfmt::skip]
    macro_rules! iq3_setup {
        () => { concat!(
            "ld1 {{v30.16b, v31.16b}}, [{kc}]\n",
            "shl v23.16b, v31.16b, #4\n",
            "movi v22.16b, #1\n",
            "movi v24.16b, #0x7f\n",
        ) };
    }
    pub(crate) use iq3_setup;

    /// IQ3_XXS's and IQ2_XXS's sign-and-scale words of 4 rows (`$v`) made sign words: the four
    /// 7-bit fields moved to bytes (`sli`), bit 7 cleared (`v24` = 0x7f),
    /// then set to the byte's parity (`cnt`, `shl #7`); `v10`..`v12`
    /// scratch.
    #[rustfmt::skip]
    macro_rules! xxs_signs {
        ($v:literal) => { concat!(
            "ushr v10.4s, ", $v, ".4s, #7\n",
            "ushr v11.4s, ", $v, ".4s, #14\n",
            "ushr v12.4s, ", $v, ".4s, #21\n",
            "sli ", $v, ".4s, v10.4s, #8\n",
            "sli ", $v, ".4s, v11.4s, #16\n",
            "sli ", $v, ".4s, v12.4s, #24\n",
            "and ", $v, ".16b, ", $v, ".16b, v24.16b\n",
            "cnt v10.16b, ", $v, ".16b\n",
            "shl v10.16b, v10.16b, #7\n",
            "orr ", $v, ".16b, ", $v, ".16b, v10.16b\n",
        ) };
    }
    pub(crate) use xxs_signs;

    /// One chunk: its 8 points by `$lookup!(src, dst, lane, index lane)`
    /// (`$src` the register holding the chunk's indices, if any), signed
    /// and dotted by [`iq3_sign_dot!`].
    #[rustfmt::skip]
    macro_rules! iq3_chunk {
        ($lookup:ident, $src:literal, $bits:literal, $act:literal, $lane:literal) => { concat!(
            $lookup!($src, "v6", "0", "0"),
            $lookup!($src, "v6", "1", "1"),
            $lookup!($src, "v6", "2", "2"),
            $lookup!($src, "v6", "3", "3"),
            $lookup!($src, "v7", "0", "4"),
            $lookup!($src, "v7", "1", "5"),
            $lookup!($src, "v7", "2", "6"),
            $lookup!($src, "v7", "3", "7"),
            $crate::layouts::iq3::aarch64::iq3_sign_dot!("v6", "v7", $bits, $act, $lane),
        ) };
    }
    pub(crate) use iq3_chunk;

    /// A chunk's 32 values looked up (rows 0-3 in `$lo`, 4-7 in `$hi`):
    /// its sign bits spread over its bytes by `tbl` (the sign words of
    /// rows 0-3 in `v0`, 4-7 in `v1`, `v16` the pair's byte index) and
    /// `cmtst` against the chunk's bit masks `$bits`, the values negated
    /// where set (`eor`, `sub`), then `sdot` with lane `$lane` of `$act`
    /// into `v4` / `v5`.
    #[rustfmt::skip]
    macro_rules! iq3_sign_dot {
        ($lo:literal, $hi:literal, $bits:literal, $act:literal, $lane:literal) => { concat!(
            "tbl v8.16b, {{v0.16b}}, v16.16b\n",
            "tbl v9.16b, {{v1.16b}}, v16.16b\n",
            "cmtst v8.16b, v8.16b, ", $bits, ".16b\n",
            "cmtst v9.16b, v9.16b, ", $bits, ".16b\n",
            "eor ", $lo, ".16b, ", $lo, ".16b, v8.16b\n",
            "eor ", $hi, ".16b, ", $hi, ".16b, v9.16b\n",
            "sub ", $lo, ".16b, ", $lo, ".16b, v8.16b\n",
            "sub ", $hi, ".16b, ", $hi, ".16b, v9.16b\n",
            "sdot v4.4s, ", $lo, ".16b, ", $act, ".4b[", $lane, "]\n",
            "sdot v5.4s, ", $hi, ".16b, ", $act, ".4b[", $lane, "]\n",
        ) };
    }
    pub(crate) use iq3_sign_dot;

    /// A chunk pair of a layout of 8-byte grid points (the IQ2 ones): per
    /// row `r`, `$addr!(r)` puts its point's address in `x15`, and one
    /// `ld2` loads the point's first half (chunk `2j`) into lane `r % 4` of
    /// `v6` (rows 0-3) / `$h0` (4-7) and its second half (chunk `2j + 1`)
    /// into `v7` / `$h1` (`$h0`, `$h1` consecutive registers): 3
    /// instructions a row where two 4-byte lookups took 6. Then both chunks
    /// signed and dotted ([`iq3_sign_dot!`]).
    #[rustfmt::skip]
    macro_rules! iq2_pair {
        ($addr:ident, [$h0:literal, $h1:literal], $act:literal, $lane0:literal, $lane1:literal) => { concat!(
            $addr!("0"), "ld2 {{v6.s, v7.s}}[0], [x15]\n",
            $addr!("1"), "ld2 {{v6.s, v7.s}}[1], [x15]\n",
            $addr!("2"), "ld2 {{v6.s, v7.s}}[2], [x15]\n",
            $addr!("3"), "ld2 {{v6.s, v7.s}}[3], [x15]\n",
            $addr!("4"), "ld2 {{", $h0, ".s, ", $h1, ".s}}[0], [x15]\n",
            $addr!("5"), "ld2 {{", $h0, ".s, ", $h1, ".s}}[1], [x15]\n",
            $addr!("6"), "ld2 {{", $h0, ".s, ", $h1, ".s}}[2], [x15]\n",
            $addr!("7"), "ld2 {{", $h0, ".s, ", $h1, ".s}}[3], [x15]\n",
            $crate::layouts::iq3::aarch64::iq3_sign_dot!("v6", $h0, "v31", $act, $lane0),
            $crate::layouts::iq3::aarch64::iq3_sign_dot!("v7", $h1, "v23", $act, $lane1),
        ) };
    }
    pub(crate) use iq2_pair;

    /// [`iq3_sub_block!`] for a layout of 8-byte grid points: per chunk
    /// pair `$prep!(j)` then [`iq2_pair!`] with `$addr` and the rows 4-7
    /// registers `$h`; `$mid` between the halves as there.
    #[rustfmt::skip]
    macro_rules! iq2_sub_block {
        ($addr:ident, $prep:ident, $h:tt) => {
            $crate::layouts::iq3::aarch64::iq2_sub_block!($addr, $prep, $h, "")
        };
        ($addr:ident, $prep:ident, $h:tt, $mid:expr) => { concat!(
            "movi v4.16b, #0\n",
            "movi v5.16b, #0\n",
            "mov v16.16b, v30.16b\n",
            $prep!("0"),
            $crate::layouts::iq3::aarch64::iq2_pair!($addr, $h, "v18", "0", "1"),
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("1"),
            $crate::layouts::iq3::aarch64::iq2_pair!($addr, $h, "v18", "2", "3"),
            $mid,
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("2"),
            $crate::layouts::iq3::aarch64::iq2_pair!($addr, $h, "v19", "0", "1"),
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("3"),
            $crate::layouts::iq3::aarch64::iq2_pair!($addr, $h, "v19", "2", "3"),
            "mla v26.4s, v4.4s, v2.4s\n",
            "mla v25.4s, v5.4s, v3.4s\n",
        ) };
    }
    pub(crate) use iq2_sub_block;

    /// A sub-block's 8 chunks (the sign words in `v0` / `v1`, the 32
    /// activations in `v18`, `v19`), then the isums scaled by `v2` / `v3`
    /// (`2 ls + 1` of rows 0-3 / 4-7) into `v26` / `v25`. Before chunk pair
    /// `j` (chunks `2j`, `2j + 1`) comes `$prep!(j)`, which may leave their
    /// indices in `v10` and `v11` for `$lookup`; between the two 16-weight
    /// halves `$mid` (IQ2_XS: the first half's sums scaled, the second
    /// half's scales into `v2` / `v3`).
    #[rustfmt::skip]
    macro_rules! iq3_sub_block {
        ($lookup:ident, $prep:ident) => {
            $crate::layouts::iq3::aarch64::iq3_sub_block!($lookup, $prep, "")
        };
        ($lookup:ident, $prep:ident, $mid:expr) => { concat!(
            "movi v4.16b, #0\n",
            "movi v5.16b, #0\n",
            "mov v16.16b, v30.16b\n",
            $prep!("0"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v10", "v31", "v18", "0"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v11", "v23", "v18", "1"),
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("1"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v10", "v31", "v18", "2"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v11", "v23", "v18", "3"),
            $mid,
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("2"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v10", "v31", "v19", "0"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v11", "v23", "v19", "1"),
            "add v16.16b, v16.16b, v22.16b\n",
            $prep!("3"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v10", "v31", "v19", "2"),
            $crate::layouts::iq3::aarch64::iq3_chunk!($lookup, "v11", "v23", "v19", "3"),
            "mla v26.4s, v4.4s, v2.4s\n",
            "mla v25.4s, v5.4s, v3.4s\n",
        ) };
    }
    pub(crate) use iq3_sub_block;

    /// The end of a super-block: `d_a` from `x10`, the rows' `d` in `v29`,
    /// `sumi / 2^f` (`scvtf` with `$f` = `", #f"` fraction bits, or `""`
    /// for none; one rounding) times
    /// `d_w * d_a` added to the float sums `v28` / `v27`.
    #[rustfmt::skip]
    macro_rules! iq3_finish {
        ($f:literal) => { concat!(
            "ld1r {{v4.4s}}, [x10], #4\n",
            "fcvtl v5.4s, v29.4h\n",
            "fcvtl2 v6.4s, v29.8h\n",
            "scvtf v26.4s, v26.4s", $f, "\n",
            "scvtf v25.4s, v25.4s", $f, "\n",
            "fmul v5.4s, v5.4s, v4.4s\n",
            "fmul v6.4s, v6.4s, v4.4s\n",
            "fmul v26.4s, v5.4s, v26.4s\n",
            "fmul v25.4s, v6.4s, v25.4s\n",
            "fadd v28.4s, v28.4s, v26.4s\n",
            "fadd v27.4s, v27.4s, v25.4s\n",
        ) };
    }
    pub(crate) use iq3_finish;

    /// One decoded chunk (its 32 values from `{v}`: rows 0-3 in `v4`, 4-7
    /// in `v5`) against lane `$lane` of the 4 activation rows' registers.
    #[rustfmt::skip]
    macro_rules! decoded_chunk {
        ($a0:literal, $a1:literal, $a2:literal, $a3:literal, $lane:literal) => { concat!(
            "ld1 {{v4.16b, v5.16b}}, [{v}], #32\n",
            "sdot v24.4s, v4.16b, ", $a0, ".4b[", $lane, "]\n",
            "sdot v25.4s, v5.16b, ", $a0, ".4b[", $lane, "]\n",
            "sdot v26.4s, v4.16b, ", $a1, ".4b[", $lane, "]\n",
            "sdot v27.4s, v5.16b, ", $a1, ".4b[", $lane, "]\n",
            "sdot v28.4s, v4.16b, ", $a2, ".4b[", $lane, "]\n",
            "sdot v29.4s, v5.16b, ", $a2, ".4b[", $lane, "]\n",
            "sdot v30.4s, v4.16b, ", $a3, ".4b[", $lane, "]\n",
            "sdot v31.4s, v5.16b, ", $a3, ".4b[", $lane, "]\n",
        ) };
    }
    /// The scales of the 16-weight runs just summed (`x9`: their `[h][r]`
    /// entries) times the 4 activation rows' isums (`v24`..`v31`) into
    /// their sums (`v8`..`v15`).
    #[rustfmt::skip]
    macro_rules! decoded_scale {
        () => { concat!(
            "ld1 {{v6.4s, v7.4s}}, [x9], #32\n",
            "mla v8.4s, v24.4s, v6.4s\n", "mla v9.4s, v25.4s, v7.4s\n",
            "mla v10.4s, v26.4s, v6.4s\n", "mla v11.4s, v27.4s, v7.4s\n",
            "mla v12.4s, v28.4s, v6.4s\n", "mla v13.4s, v29.4s, v7.4s\n",
            "mla v14.4s, v30.4s, v6.4s\n", "mla v15.4s, v31.4s, v7.4s\n",
        ) };
    }

    /// Zeroes the isums `v24`..`v31`.
    #[rustfmt::skip]
    macro_rules! decoded_isums_zero {
        () => { concat!(
            "movi v24.16b, #0\n", "movi v25.16b, #0\n", "movi v26.16b, #0\n", "movi v27.16b, #0\n",
            "movi v28.16b, #0\n", "movi v29.16b, #0\n", "movi v30.16b, #0\n", "movi v31.16b, #0\n",
        ) };
    }

    /// `$name`: the integer sums of 4 activation rows against a decoded
    /// super-block: `sumi[8t + r]` of activation row `t` (`qs` and 3 more
    /// `stride` bytes apart, the super-block's 256 quants each) and weight
    /// row `r`. Per sub-block 4 loads of activations, per chunk one load of
    /// its 32 values and 8 `sdot` by lane, then 8 `mla` by the scales
    /// (`$mid` between the halves, `$end` after: per sub-block, the first
    /// half's scale taken for both, or per half): about 95 instructions for
    /// 8 x 4 x 32 (112 per half).
    macro_rules! decoded_tile4 {
        ($name:ident, $mid:expr, $end:expr) => {
            /// The integer sums of 4 activation rows against a decoded
            /// super-block (`decoded_tile4!`).
            ///
            /// # Safety
            /// `dec` a whole [`Decoded`](super::Decoded), `qs` 4 rows of 256
            /// readable quants `stride` apart, `sumi` 32 writable `i32`; dotprod.
            #[inline(never)]
            #[target_feature(enable = "neon,dotprod")]
            unsafe fn $name(
                dec: *const super::Decoded,
                qs: *const i8,
                stride: usize,
                sumi: *mut i32,
            ) {
                // SAFETY: per the function contract: the loop reads the 2048
                // value bytes and the 512 scale bytes of `dec`, 256 bytes of
                // each activation row, and stores 128 bytes at `sumi`. Only
                // the listed registers are written; no stack is used.
                unsafe {
                    core::arch::asm!(
                        "movi v8.16b, #0", "movi v9.16b, #0", "movi v10.16b, #0", "movi v11.16b, #0",
                        "movi v12.16b, #0", "movi v13.16b, #0", "movi v14.16b, #0", "movi v15.16b, #0",
                        "add x9, {v}, #2048", // the scales
                        "mov x12, #8",
                        "2:",
                        "ld1 {{v16.16b, v17.16b}}, [{q0}], #32",
                        "ld1 {{v18.16b, v19.16b}}, [{q1}], #32",
                        "ld1 {{v20.16b, v21.16b}}, [{q2}], #32",
                        "ld1 {{v22.16b, v23.16b}}, [{q3}], #32",
                        decoded_isums_zero!(),
                        decoded_chunk!("v16", "v18", "v20", "v22", "0"),
                        decoded_chunk!("v16", "v18", "v20", "v22", "1"),
                        decoded_chunk!("v16", "v18", "v20", "v22", "2"),
                        decoded_chunk!("v16", "v18", "v20", "v22", "3"),
                        $mid,
                        decoded_chunk!("v17", "v19", "v21", "v23", "0"),
                        decoded_chunk!("v17", "v19", "v21", "v23", "1"),
                        decoded_chunk!("v17", "v19", "v21", "v23", "2"),
                        decoded_chunk!("v17", "v19", "v21", "v23", "3"),
                        $end,
                        "subs x12, x12, #1",
                        "b.ne 2b",
                        "st1 {{v8.4s, v9.4s, v10.4s, v11.4s}}, [{s}], #64",
                        "st1 {{v12.4s, v13.4s, v14.4s, v15.4s}}, [{s}]",
                        v = inout(reg) dec => _,
                        q0 = inout(reg) qs => _,
                        q1 = inout(reg) qs.wrapping_add(stride) => _,
                        q2 = inout(reg) qs.wrapping_add(2 * stride) => _,
                        q3 = inout(reg) qs.wrapping_add(3 * stride) => _,
                        s = inout(reg) sumi => _,
                        out("x9") _, out("x12") _,
                        out("v4") _, out("v5") _, out("v6") _, out("v7") _,
                        out("v8") _, out("v9") _, out("v10") _, out("v11") _, out("v12") _,
                        out("v13") _, out("v14") _, out("v15") _, out("v16") _, out("v17") _,
                        out("v18") _, out("v19") _, out("v20") _, out("v21") _, out("v22") _,
                        out("v23") _, out("v24") _, out("v25") _, out("v26") _, out("v27") _,
                        out("v28") _, out("v29") _, out("v30") _, out("v31") _,
                        options(nostack),
                    );
                }
            }
        };
    }

    decoded_tile4!(
        decoded_tile4,
        "",
        concat!(decoded_scale!(), "add x9, x9, #32\n")
    );
    decoded_tile4!(
        decoded_tile4_halves,
        concat!(decoded_scale!(), decoded_isums_zero!()),
        decoded_scale!()
    );

    /// A layout's decoder of one super-block for the prompt path.
    pub(crate) type DecodeFn = fn(&[u8], &mut super::Decoded);

    /// The prompt GEMM of a codebook layout (`m >= 2` activation rows): per
    /// row group and super-block, the super-block decoded once
    /// (`decode`), then the activation rows 4 at a time through
    /// `decoded_tile4` (`decoded_tile4_halves` for a scale per 16-weight
    /// run: `halves`), each row's `(d_w * d_a) * (sumi * factor)` added
    /// to its float sum in `out` (zeroed first: the GEMV loop's order); the
    /// last `m % 4` rows through the GEMV loop `row`.
    ///
    /// # Safety
    /// The layout's shape check accepted the arguments (`groups` row groups
    /// of `nb >= 1` super-blocks of `bytes`, `rows, m >= 1`); `row` is the
    /// layout's GEMV loop; the CPU implements dotprod.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn decoded_gemm(
        (decode, bytes, factor, halves): (DecodeFn, usize, f32, bool),
        row: crate::aarch64::gemm::LoopFn,
        w: &[u8],
        rows: usize,
        (groups, nb): (usize, usize),
        act_qs: &[i8],
        act_d: &[f32],
        m: usize,
        out: &mut [f32],
    ) {
        use super::IQ3_ROWS;
        use crate::layout::QK_K;
        let cols = nb * QK_K;
        let group_bytes = nb * bytes;
        let m4 = m - m % 4;
        let mut dec = super::Decoded::ZERO;
        let tile4 = if halves {
            decoded_tile4_halves
        } else {
            decoded_tile4
        };
        for g in 0..groups {
            let wg = &w[g * group_bytes..(g + 1) * group_bytes];
            let row0 = g * IQ3_ROWS;
            let n = (rows - row0).min(IQ3_ROWS);
            for t in 0..m4 {
                out[t * rows + row0..][..n].fill(0.0);
            }
            if m4 > 0 {
                for b in 0..nb {
                    decode(&wg[b * bytes..(b + 1) * bytes], &mut dec);
                    for t0 in (0..m4).step_by(4) {
                        let mut sumi = [0i32; 4 * IQ3_ROWS];
                        let qs = act_qs[t0 * cols + b * QK_K..].as_ptr();
                        // SAFETY: rows t0..t0 + 4 <= m of `act_qs` hold the
                        // super-block's 256 quants `cols` apart; dotprod
                        // (the function contract).
                        unsafe { tile4(&dec, qs, cols, sumi.as_mut_ptr()) };
                        for t in 0..4 {
                            let da = act_d[(t0 + t) * nb + b];
                            let o = &mut out[(t0 + t) * rows + row0..][..n];
                            for (r, o_r) in o.iter_mut().enumerate() {
                                let s = sumi[IQ3_ROWS * t + r] as f32 * factor;
                                *o_r += (dec.dw[r] * da) * s;
                            }
                        }
                    }
                }
            }
            for t in m4..m {
                let mut tail = [0.0f32; IQ3_ROWS];
                // SAFETY: one row group and activation row t < m (the
                // function contract); `tail` holds 8 floats.
                unsafe {
                    row(
                        wg.as_ptr(),
                        act_qs[t * cols..].as_ptr(),
                        act_d[t * nb..].as_ptr(),
                        core::ptr::null(),
                        nb,
                        tail.as_mut_ptr(),
                        1,
                    )
                };
                out[t * rows + row0..][..n].copy_from_slice(&tail[..n]);
            }
        }
    }

    /// A codebook layout's aarch64 entry points, `$gemv` and `$gemm` (the
    /// generic twins' names and contracts): the GEMV through the driver with
    /// the GEMV loop `$loop` (no tile: the driver's GEMM serves one row
    /// here), and the GEMM of
    /// 2 or more rows through [`decoded_gemm`] with `$decode`, `$bytes`-byte
    /// super-blocks and the factor `$factor` (`1 / 2^f`); `$halves`: a
    /// scale per 16-weight run.
    macro_rules! iq3_entry {
        ($gemv:ident, $gemm:ident, $loop:ident, $decode:ident, $bytes:expr, $factor:expr) => {
            $crate::layouts::iq3::aarch64::iq3_entry!(
                $gemv, $gemm, $loop, $decode, $bytes, $factor, false
            );
        };
        ($gemv:ident, $gemm:ident, $loop:ident, $decode:ident, $bytes:expr, $factor:expr, $halves:expr) => {
            /// The GEMV, and the driver's GEMM (of one row here).
            mod tiles {
                use super::*;

                $crate::aarch64::gemm::entry_points!(
                    q8_k[super::super::generic],
                    $gemv,
                    $gemm,
                    $crate::aarch64::gemm::GemmKernels {
                        group_rows: $crate::layouts::iq3::IQ3_ROWS,
                        block_bytes: $bytes,
                        row: $loop,
                        tile4: None,
                        small_tiles: None,
                        strided: false,
                    }
                );
            }

            pub use tiles::$gemv;

            /// GEMM, `m` Q8_K activation rows: one row through the GEMV loop,
            /// more with each super-block decoded once for all of them
            /// (`iq3::aarch64::decoded_gemm`); the contract of the generic
            /// twin.
            #[allow(clippy::too_many_arguments)]
            pub fn $gemm(
                cpu: $crate::aarch64::Dotprod,
                w: &[u8],
                rows: usize,
                cols: usize,
                act_qs: &[i8],
                act_d: &[f32],
                act_sums: &[i16],
                m: usize,
                out: &mut [f32],
            ) -> Result<(), $crate::shape::ShapeError> {
                let shape = $crate::shape::gemm_k_shape(
                    $crate::layouts::iq3::IQ3_ROWS,
                    $bytes,
                    w,
                    rows,
                    cols,
                    act_qs,
                    act_d,
                    act_sums,
                    m,
                    out,
                )?;
                if m < 2 || shape.nb == 0 || rows == 0 {
                    return tiles::$gemm(cpu, w, rows, cols, act_qs, act_d, act_sums, m, out);
                }
                let decode: $crate::layouts::iq3::aarch64::DecodeFn = $decode;
                // SAFETY: the shape check accepted the arguments, nb, rows >=
                // 1, m >= 2; the GEMV loop is this layout's; the token proves
                // dotprod.
                unsafe {
                    $crate::layouts::iq3::aarch64::decoded_gemm(
                        (decode, $bytes, $factor, $halves),
                        $loop,
                        w,
                        rows,
                        (shape.groups, shape.nb),
                        act_qs,
                        act_d,
                        m,
                        out,
                    )
                };
                Ok(())
            }
        };
    }
    pub(crate) use iq3_entry;
}

/// x86_64: the body of the family's tiles (one row group, a row per
/// 32-bit lane, x up to 4 activation rows), `F` choosing the front end
/// (`FRONT_XXS`, `FRONT_S`, `FRONT_IQ2_XXS`): per chunk one `vpgatherdd` fetches the 8 rows' grid points, the
/// signs spread over the bytes by `vpshufb` and compared with the chunk's
/// bit masks; AVX2 multiplies `|v|` by the signed activations
/// (`vpmaddubsw`, then `vpmaddwd`), the VNNI forms take `v + 128` as the
/// unsigned byte of `vpdpbusd` and start each 16 weights from their run's
/// `offsets` entry (`-128 * sum(a)`).
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64 {
    use super::IQ3_ROWS;
    use crate::layout::QK_K;
    use crate::shape::{gemm_k_shape, GemmKShape, ShapeError};
    use crate::x86_64::gemm::{gemm_run, Grid, Pass};
    use crate::x86_64::k8::TILE_M;
    use crate::x86_64::{Avx2, Dot, Vnni, RUN};
    use core::arch::x86_64::*;

    /// A layout's generic GEMM (the fallback of [`decoded_gemm`]).
    pub(crate) type GenericGemm =
        fn(&[u8], usize, usize, &[i8], &[f32], &[i16], usize, &mut [f32]) -> Result<(), ShapeError>;

    /// The front ends: IQ3_XXS's (a byte index per chunk, sign-and-scale
    /// words), IQ3_S's (a ninth index bit, sign words, scale nibbles) and
    /// IQ2_XXS's (IQ3_XXS's words; a byte index per pair of chunks into a
    /// grid of 8-byte points, the pair's first chunk its low half).
    pub(crate) const FRONT_XXS: u8 = 0;
    pub(crate) const FRONT_S: u8 = 1;
    pub(crate) const FRONT_IQ2_XXS: u8 = 2;
    /// IQ2_XS's: per row and pair of chunks a high byte (the sign bits
    /// above the index's ninth bit, IQ2_XXS's words' 7-bit fields) and a
    /// low byte of the index into 512 points of 8 bytes; a scale per
    /// 16-weight run.
    pub(crate) const FRONT_IQ2_XS: u8 = 3;
    /// IQ2_S's: per row and pair of chunks a sign byte, a low index byte
    /// and two high bits (a byte per row and sub-block) into 1024 points of
    /// 8 bytes; a scale per 16-weight run.
    pub(crate) const FRONT_IQ2_S: u8 = 4;

    /// Whether front end `f` has a scale per 16-weight run.
    const fn halves(f: u8) -> bool {
        f == FRONT_IQ2_XS || f == FRONT_IQ2_S
    }

    /// Where a layout keeps its parts: its super-block bytes, the chunk
    /// indices, the per-row sign (or IQ3_XXS's sign-and-scale) words, and
    /// for IQ3_S the ninth index bits and the scales; its grid, and `f`.
    pub(crate) struct Front {
        pub(crate) bytes: usize,
        pub(crate) index_at: usize,
        pub(crate) words_at: usize,
        pub(crate) high_at: usize,
        pub(crate) scales_at: usize,
        pub(crate) grid: *const i32,
        pub(crate) factor: f32,
    }

    /// The signs of IQ3_XXS's sign-and-scale words made sign words: byte
    /// `k` of each lane the 7 bits at `7k` and their parity in bit 7.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn xxs_sign_words(aux: __m256i) -> __m256i {
        // SAFETY: register operations; the CPU implements AVX2 (the caller's).
        unsafe {
            let m7 = _mm256_set1_epi32(0x7f);
            let mut t = _mm256_and_si256(aux, m7);
            t = _mm256_or_si256(
                t,
                _mm256_slli_epi32::<8>(_mm256_and_si256(_mm256_srli_epi32::<7>(aux), m7)),
            );
            t = _mm256_or_si256(
                t,
                _mm256_slli_epi32::<16>(_mm256_and_si256(_mm256_srli_epi32::<14>(aux), m7)),
            );
            t = _mm256_or_si256(
                t,
                _mm256_slli_epi32::<24>(_mm256_and_si256(_mm256_srli_epi32::<21>(aux), m7)),
            );
            with_parity(t)
        }
    }

    /// Seven sign bits in each byte of `t` (bit 7 clear) completed by
    /// their parity in bit 7.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn with_parity(t: __m256i) -> __m256i {
        // SAFETY: register operations; the CPU implements AVX2 (the caller's).
        unsafe {
            let nibble = _mm256_set1_epi8(15);
            let count = _mm256_setr_epi8(
                0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3,
                2, 3, 3, 4,
            );
            let lo = _mm256_shuffle_epi8(count, _mm256_and_si256(t, nibble));
            let hi =
                _mm256_shuffle_epi8(count, _mm256_and_si256(_mm256_srli_epi16::<4>(t), nibble));
            let parity = _mm256_and_si256(_mm256_add_epi8(lo, hi), _mm256_set1_epi8(1));
            _mm256_or_si256(t, _mm256_slli_epi16::<7>(parity))
        }
    }

    /// The per-sub-block front end of super-block `sb`, sub-block `p`: the
    /// scales `2 ls + 1` of its two 16-weight runs (the same but in
    /// IQ2_XS), the sign words and (IQ3_S, IQ2_XS) the rows' ninth index
    /// bits, a row per lane.
    ///
    /// # Safety
    /// `sb` points to a whole super-block of `front`'s layout; AVX2.
    #[inline(always)]
    unsafe fn sub_block_front<const F: u8>(
        front: &Front,
        sb: *const u8,
        p: usize,
    ) -> ([__m256i; 2], __m256i, __m256i) {
        // SAFETY: the loads read the sub-block's words, scales and ninth
        // bits inside the super-block (the function contract); unaligned.
        unsafe {
            let word = _mm256_loadu_si256(sb.add(front.words_at + 32 * p).cast());
            let (scale, signs, high) = if F == FRONT_S {
                let four = sb
                    .add(front.scales_at + 4 * p)
                    .cast::<i32>()
                    .read_unaligned();
                let s = _mm256_cvtepu8_epi32(_mm_set1_epi32(four));
                let s = _mm256_and_si256(
                    _mm256_srlv_epi32(s, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                    _mm256_set1_epi32(15),
                );
                let high =
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64(sb.add(front.high_at + 8 * p).cast()));
                ([s, s], word, high)
            } else if halves(F) {
                let two =
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64(sb.add(front.scales_at + 8 * p).cast()));
                let s = [
                    _mm256_and_si256(two, _mm256_set1_epi32(15)),
                    _mm256_srli_epi32::<4>(two),
                ];
                if F == FRONT_IQ2_S {
                    let high =
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64(sb.add(front.high_at + 8 * p).cast()));
                    (s, word, high)
                } else {
                    let signs =
                        _mm256_and_si256(_mm256_srli_epi32::<1>(word), _mm256_set1_epi8(0x7f));
                    (s, with_parity(signs), word)
                }
            } else {
                let s = _mm256_srli_epi32::<28>(word);
                ([s, s], xxs_sign_words(word), _mm256_setzero_si256())
            };
            let one = _mm256_set1_epi32(1);
            let scale = scale.map(|s| _mm256_or_si256(_mm256_slli_epi32::<1>(s), one));
            (scale, signs, high)
        }
    }

    /// Chunk `c` (0..8) of sub-block `p` of an IQ3 layout (4-byte grid
    /// points): the 8 rows' grid points (`g`, unsigned; `GATHER`: by one
    /// `vpgatherdd`, else by eight plain loads) and the mask of their
    /// negative weights (`0xff` bytes).
    ///
    /// # Safety
    /// As [`sub_block_front`], `signs` and `high` its results.
    #[inline(always)]
    unsafe fn chunk_points<const F: u8, const GATHER: bool>(
        front: &Front,
        sb: *const u8,
        (p, c): (usize, usize),
        signs: __m256i,
        high: __m256i,
    ) -> (__m256i, __m256i) {
        // SAFETY: the chunk's 8 index bytes are inside the super-block, the
        // indices below the grid's length (a byte, or a byte and one bit
        // for IQ3_S's 512 points); AVX2.
        unsafe {
            let bytes = sb.add(front.index_at + 64 * p + 8 * c);
            if GATHER {
                let mut idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(bytes.cast()));
                if F == FRONT_S {
                    let hb = _mm256_and_si256(
                        _mm256_srl_epi32(high, _mm_cvtsi32_si128(c as i32)),
                        _mm256_set1_epi32(1),
                    );
                    idx = _mm256_or_si256(idx, _mm256_slli_epi32::<8>(hb));
                }
                let g = _mm256_i32gather_epi32::<4>(front.grid, idx);
                return (g, chunk_signs(signs, c));
            }
            let mut at = [0u32; 8];
            if F == FRONT_S {
                let hb = _mm256_and_si256(
                    _mm256_srl_epi32(high, _mm_cvtsi32_si128(c as i32)),
                    _mm256_set1_epi32(1),
                );
                let idx = _mm256_or_si256(
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64(bytes.cast())),
                    _mm256_slli_epi32::<8>(hb),
                );
                _mm256_storeu_si256(at.as_mut_ptr().cast(), idx);
            } else {
                let word = bytes.cast::<u64>().read_unaligned();
                for (r, at_r) in at.iter_mut().enumerate() {
                    *at_r = (word >> (8 * r)) as u8 as u32;
                }
            }
            // Eight plain loads: the GEMV's (a `vpgatherdd` took longer
            // there on the AMD EPYC measured; the prompt's decoder, which
            // runs once per super-block for many rows, was faster with it).
            let point = |r: usize| front.grid.add(at[r] as usize).read();
            let g = _mm256_setr_epi32(
                point(0),
                point(1),
                point(2),
                point(3),
                point(4),
                point(5),
                point(6),
                point(7),
            );
            (g, chunk_signs(signs, c))
        }
    }

    /// Chunks `c` and `c + 1` (`c` even) of sub-block `p`: each as
    /// [`chunk_points`]. An IQ2 layout (8-byte grid points, a pair of
    /// chunks per point) loads each row's whole point once, its halves the
    /// two chunks' (`vshufps`), where a gather per chunk read the halves
    /// apart.
    ///
    /// # Safety
    /// As [`chunk_points`].
    #[inline(always)]
    unsafe fn pair_points<const F: u8, const GATHER: bool>(
        front: &Front,
        sb: *const u8,
        (p, c): (usize, usize),
        signs: __m256i,
        high: __m256i,
    ) -> [(__m256i, __m256i); 2] {
        // SAFETY: the pair's 8 index bytes (and IQ2_XS's high bytes,
        // IQ2_S's qh) are inside the super-block; an index is below the
        // grid's points (a byte into 256; a byte and one bit into 512; a
        // byte and two bits into 1024), and each of its 8 bytes is read;
        // AVX2.
        unsafe {
            if !(halves(F) || F == FRONT_IQ2_XXS) {
                return [
                    chunk_points::<F, GATHER>(front, sb, (p, c), signs, high),
                    chunk_points::<F, GATHER>(front, sb, (p, c + 1), signs, high),
                ];
            }
            // The pair's 8 low index bytes; IQ2_XS's ninth bit from bit 0
            // of the pair's high byte, IQ2_S's two from bits `2l..2l + 2`
            // of the row's `qh`.
            let mut idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                sb.add(front.index_at + 32 * p + 4 * c).cast(),
            ));
            if halves(F) {
                let (shift, mask) = if F == FRONT_IQ2_S { (c, 3) } else { (4 * c, 1) };
                let hb = _mm256_and_si256(
                    _mm256_srl_epi32(high, _mm_cvtsi32_si128(shift as i32)),
                    _mm256_set1_epi32(mask),
                );
                idx = _mm256_or_si256(idx, _mm256_slli_epi32::<8>(hb));
            }
            let mut at = [0u32; 8];
            _mm256_storeu_si256(at.as_mut_ptr().cast(), idx);
            let grid = front.grid.cast::<i64>();
            // (Plain loads: no intrinsic, so no feature is needed.)
            let point = |r: usize| grid.add(at[r] as usize).read_unaligned();
            // Rows 0, 1, 4, 5 and 2, 3, 6, 7 by 64-bit lane: `vshufps`
            // picks, per 128-bit lane, the rows' first (or second) halves in
            // row order.
            let a = _mm256_castsi256_ps(_mm256_setr_epi64x(point(0), point(1), point(4), point(5)));
            let b = _mm256_castsi256_ps(_mm256_setr_epi64x(point(2), point(3), point(6), point(7)));
            let first = _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(a, b));
            let second = _mm256_castps_si256(_mm256_shuffle_ps::<0b11_01_11_01>(a, b));
            [
                (first, chunk_signs(signs, c)),
                (second, chunk_signs(signs, c + 1)),
            ]
        }
    }

    /// The mask of chunk `c`'s negative weights (`0xff` bytes), a row per
    /// lane, from the sign words.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn chunk_signs(signs: __m256i, c: usize) -> __m256i {
        // SAFETY: register operations; the CPU implements AVX2 (the caller's).
        unsafe {
            let bit = if c.is_multiple_of(2) {
                _mm256_set1_epi32(0x0804_0201)
            } else {
                _mm256_set1_epi32(0x8040_2010_u32 as i32)
            };
            let k = (c / 2) as i32;
            let pattern = _mm256_add_epi8(
                _mm256_setr_epi32(
                    0,
                    0x0404_0404,
                    0x0808_0808,
                    0x0c0c_0c0c,
                    0,
                    0x0404_0404,
                    0x0808_0808,
                    0x0c0c_0c0c,
                ),
                _mm256_set1_epi32(0x0101_0101 * k),
            );
            _mm256_cmpeq_epi8(
                _mm256_and_si256(_mm256_shuffle_epi8(signs, pattern), bit),
                bit,
            )
        }
    }

    /// The body of the family's tiles, inlined into each so that it is
    /// compiled with its caller's features (`DOT`: a [`Dot`] constant;
    /// `F`: the front end).
    ///
    /// # Safety
    /// `wg` holds `nb` super-blocks of `front.bytes`, `qs` `T` rows of `nb *
    /// 256` quants and `d` of `nb` scales; with a VNNI form `offsets` holds
    /// `T * nb * 16` entries (row `t`'s run `k` at `t * nb * 16 + k`); the
    /// CPU implements AVX2, FMA, F16C and the `DOT` form.
    #[inline(always)]
    pub(crate) unsafe fn iq3_tile_body<const T: usize, const DOT: u8, const F: u8>(
        front: &Front,
        wg: &[u8],
        qs: &[i8],
        d: &[f32],
        offsets: &[i32],
        nb: usize,
        res: &mut [[f32; IQ3_ROWS]; TILE_M],
    ) {
        // SAFETY: the loads read super-block `b < nb` of `wg` at the
        // front's offsets inside `front.bytes`, grid points at indices
        // below 256 (IQ3_XXS: a byte) or 512 (IQ3_S: a byte and one bit),
        // block `b` of rows `t < T` of `qs`, `d` and (VNNI) `offsets` (the
        // function contract); unaligned; the CPU implements AVX2, FMA,
        // F16C and the `DOT` form.
        unsafe {
            debug_assert!(wg.len() >= nb * front.bytes && qs.len() >= T * nb * QK_K);
            debug_assert!(DOT == Dot::MADDUBS || offsets.len() >= T * nb * QK_K / RUN);
            let cols = nb * QK_K;
            let mut acc = [_mm256_setzero_ps(); T];
            for b in 0..nb {
                let sb = wg.as_ptr().add(b * front.bytes);
                let mut sumi = [_mm256_setzero_si256(); T];
                for p in 0..QK_K / 32 {
                    let (scale, signs, high) = sub_block_front::<F>(front, sb, p);
                    let mut isum = [_mm256_setzero_si256(); T];
                    // The two 16-weight runs written out (a loop kept
                    // rolled made the index shifts variable).
                    let run = Run {
                        sb,
                        b,
                        p,
                        cols,
                        signs,
                        high,
                    };
                    iq3_run::<T, DOT, F, 0>(
                        front, &run, qs, offsets, scale[0], &mut sumi, &mut isum,
                    );
                    iq3_run::<T, DOT, F, 1>(
                        front, &run, qs, offsets, scale[1], &mut sumi, &mut isum,
                    );
                    if DOT != Dot::MADDUBS && !halves(F) {
                        for (sumi_t, isum_t) in sumi.iter_mut().zip(isum) {
                            *sumi_t =
                                _mm256_add_epi32(*sumi_t, _mm256_mullo_epi32(scale[0], isum_t));
                        }
                    }
                }
                let dw = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
                let factor = _mm256_set1_ps(front.factor);
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    let da = _mm256_set1_ps(*d.get_unchecked(t * nb + b));
                    let sum = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi[t]), factor);
                    let v = _mm256_mul_ps(_mm256_mul_ps(dw, da), sum);
                    *acc_t = _mm256_add_ps(*acc_t, v);
                }
            }
            for (r, a) in res.iter_mut().zip(acc) {
                _mm256_storeu_ps(r.as_mut_ptr(), a);
            }
        }
    }

    /// Where a 16-weight run of the body is: super-block `sb` (column
    /// `b`), sub-block `p`, the activation rows' length `cols`, and the
    /// sub-block's sign words and high index bits.
    struct Run {
        sb: *const u8,
        b: usize,
        p: usize,
        cols: usize,
        signs: __m256i,
        high: __m256i,
    }

    /// Run `H` (0, 1) of a sub-block: its four chunks' dot products with
    /// the `T` activation rows, added to `sumi` times `scale` (AVX2; the
    /// VNNI forms with a scale per run, else to `isum`, scaled per
    /// sub-block by the caller). AVX2 adds two chunks' `vpmaddubsw` pairs
    /// in 16 bits (at most 2 x 2 x 62 x 127 = 31,496: grid values are at
    /// most 62 and the activations above -128, `avx2_no_min`) and scales
    /// them in the `vpmaddwd`, a scale `2 ls + 1` in each 16-bit half.
    ///
    /// # Safety
    /// As [`iq3_tile_body`]; `run` names one of its sub-blocks, `signs` and
    /// `high` its [`sub_block_front`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn iq3_run<const T: usize, const DOT: u8, const F: u8, const H: usize>(
        front: &Front,
        run: &Run,
        qs: &[i8],
        offsets: &[i32],
        scale: __m256i,
        sumi: &mut [__m256i; T],
        isum: &mut [__m256i; T],
    ) {
        // SAFETY: as the body's: chunks `4H..4H + 4` of the run's
        // sub-block and the activations at their columns of rows `t < T`
        // (and their run's `offsets` entry), inside the slices (the
        // function contract); the CPU implements the `DOT` form.
        unsafe {
            let Run {
                sb,
                b,
                p,
                cols,
                signs,
                high,
            } = *run;
            let c0 = pair_points::<F, false>(front, sb, (p, 4 * H), signs, high);
            let c1 = pair_points::<F, false>(front, sb, (p, 4 * H + 2), signs, high);
            let chunks = [c0[0], c0[1], c1[0], c1[1]];
            // (Plain loads: no intrinsic in the closure.)
            let act4 = |t: usize, cc: usize| {
                let a = qs
                    .as_ptr()
                    .add(t * cols + b * QK_K + 32 * p + 4 * (4 * H + cc));
                a.cast::<i32>().read_unaligned()
            };
            if DOT == Dot::MADDUBS {
                let one8 = _mm256_set1_epi8(1);
                let scale16 = _mm256_or_si256(scale, _mm256_slli_epi32::<16>(scale));
                let mut pairs = [_mm256_setzero_si256(); T];
                for (cc, (g, m)) in chunks.into_iter().enumerate() {
                    let sign = _mm256_or_si256(m, one8);
                    for (t, (pair_t, sumi_t)) in pairs.iter_mut().zip(sumi.iter_mut()).enumerate() {
                        let pr = _mm256_maddubs_epi16(
                            g,
                            _mm256_sign_epi8(_mm256_set1_epi32(act4(t, cc)), sign),
                        );
                        if cc % 2 == 0 {
                            *pair_t = pr;
                        } else {
                            let both = _mm256_add_epi16(*pair_t, pr);
                            *sumi_t = _mm256_add_epi32(*sumi_t, _mm256_madd_epi16(both, scale16));
                        }
                    }
                }
                return;
            }
            let bias = _mm256_set1_epi8(i8::MIN);
            let mut s = [_mm256_setzero_si256(); T];
            for (t, s_t) in s.iter_mut().enumerate() {
                let k = (t * cols + b * QK_K + 32 * p + 16 * H) / RUN;
                *s_t = _mm256_set1_epi32(*offsets.get_unchecked(k));
            }
            for (cc, (g, m)) in chunks.into_iter().enumerate() {
                let v = _mm256_sub_epi8(_mm256_xor_si256(g, m), m);
                let u = _mm256_xor_si256(v, bias);
                for (t, s_t) in s.iter_mut().enumerate() {
                    *s_t = if DOT == Dot::AVX_VNNI {
                        crate::x86_64::dpbusd_vex(*s_t, u, _mm256_set1_epi32(act4(t, cc)))
                    } else {
                        _mm256_dpbusd_epi32(*s_t, u, _mm256_set1_epi32(act4(t, cc)))
                    };
                }
            }
            if halves(F) {
                for (sumi_t, s_t) in sumi.iter_mut().zip(s) {
                    *sumi_t = _mm256_add_epi32(*sumi_t, _mm256_mullo_epi32(scale, s_t));
                }
            } else {
                for (isum_t, s_t) in isum.iter_mut().zip(s) {
                    *isum_t = _mm256_add_epi32(*isum_t, s_t);
                }
            }
        }
    }

    /// A super-block decoded once for every activation row of a prompt:
    /// chunk `8p + c`'s signed values (row `r`'s 4 in lane `r`), per
    /// 16-weight run `h` `128 *` the sum of each row's 16 values and the
    /// scales `2 ls + 1` (IQ2_XS; the others: per sub-block `p`, at `2p`),
    /// and the rows' `d`.
    struct Decoded {
        values: [__m256i; 64],
        sums: [__m256i; 16],
        scales: [__m256i; 16],
        dw: __m256,
    }

    /// Decodes super-block `sb` (the tiles' front end, once).
    ///
    /// # Safety
    /// As [`sub_block_front`]; F16C.
    #[inline(always)]
    unsafe fn decode<const F: u8>(front: &Front, sb: *const u8) -> Decoded {
        // SAFETY: the front end's loads (its contract); the 16 bytes of `d`
        // begin the super-block.
        unsafe {
            let ones8 = _mm256_set1_epi8(1);
            let ones16 = _mm256_set1_epi16(1);
            let mut dec = Decoded {
                values: [_mm256_setzero_si256(); 64],
                sums: [_mm256_setzero_si256(); 16],
                scales: [_mm256_setzero_si256(); 16],
                dw: _mm256_cvtph_ps(_mm_loadu_si128(sb.cast())),
            };
            for p in 0..QK_K / 32 {
                let (scale, signs, high) = sub_block_front::<F>(front, sb, p);
                let mut sum = [_mm256_setzero_si256(); 2];
                let c0 = pair_points::<F, true>(front, sb, (p, 0), signs, high);
                let c1 = pair_points::<F, true>(front, sb, (p, 2), signs, high);
                let c2 = pair_points::<F, true>(front, sb, (p, 4), signs, high);
                let c3 = pair_points::<F, true>(front, sb, (p, 6), signs, high);
                let chunks = [c0[0], c0[1], c1[0], c1[1], c2[0], c2[1], c3[0], c3[1]];
                for (c, (g, m)) in chunks.into_iter().enumerate() {
                    let v = _mm256_sub_epi8(_mm256_xor_si256(g, m), m);
                    dec.values[8 * p + c] = v;
                    let pairs = _mm256_maddubs_epi16(ones8, v);
                    let h = usize::from(c >= 4 && halves(F));
                    sum[h] = _mm256_add_epi32(sum[h], _mm256_madd_epi16(pairs, ones16));
                }
                for h in 0..2 {
                    dec.scales[2 * p + h] = scale[h];
                    dec.sums[2 * p + h] = _mm256_slli_epi32::<7>(sum[h]);
                }
            }
            dec
        }
    }

    /// `T` activation rows (`qs`: the super-block's 256 quants of the
    /// first, the others `cols` apart; `da` their scales) against a decoded
    /// super-block: each row's `(d_w * d_a) * (sumi * factor)`, as the
    /// tiles. AVX2: `vpmaddubsw(|v|, a sign(v))` (no -128 activation);
    /// VNNI: `vpdpbusd(a + 128, v)`, less `128 * sum(v)`.
    ///
    /// # Safety
    /// `qs` holds `T` rows at stride `cols` of 256 quants; the CPU
    /// implements AVX2 and the `DOT` form.
    #[inline(always)]
    unsafe fn decoded_tile<const T: usize, const DOT: u8, const F: u8>(
        dec: &Decoded,
        qs: *const i8,
        cols: usize,
        da: [f32; T],
        factor: f32,
        res: &mut [[f32; IQ3_ROWS]; TILE_M],
    ) {
        // SAFETY: 4-byte loads of the quants inside the `T` rows (the
        // function contract); unaligned.
        unsafe {
            let bias = _mm256_set1_epi8(i8::MIN);
            let mut sumi = [_mm256_setzero_si256(); T];
            if DOT == Dot::MADDUBS {
                for p in 0..QK_K / 32 {
                    for h in 0..2 {
                        // As the tiles' runs: two chunks' pairs added in 16
                        // bits, scaled in the `vpmaddwd`.
                        let scale = dec.scales[2 * p + h];
                        let scale16 = _mm256_or_si256(scale, _mm256_slli_epi32::<16>(scale));
                        for c in (4 * h..4 * h + 4).step_by(2) {
                            let v0 = dec.values[8 * p + c];
                            let v1 = dec.values[8 * p + c + 1];
                            let (abs0, abs1) = (_mm256_sign_epi8(v0, v0), _mm256_sign_epi8(v1, v1));
                            for (t, sumi_t) in sumi.iter_mut().enumerate() {
                                let a = qs.add(t * cols + 32 * p + 4 * c).cast::<i32>();
                                let a0 = _mm256_set1_epi32(a.read_unaligned());
                                let a1 = _mm256_set1_epi32(a.add(1).read_unaligned());
                                let pr0 = _mm256_maddubs_epi16(abs0, _mm256_sign_epi8(a0, v0));
                                let pr1 = _mm256_maddubs_epi16(abs1, _mm256_sign_epi8(a1, v1));
                                let both = _mm256_add_epi16(pr0, pr1);
                                *sumi_t =
                                    _mm256_add_epi32(*sumi_t, _mm256_madd_epi16(both, scale16));
                            }
                        }
                    }
                }
            } else {
                for p in 0..QK_K / 32 {
                    let mut isum = [_mm256_setzero_si256(); T];
                    for c in 0..8 {
                        if c == 4 && halves(F) {
                            scale_run(&mut sumi, &mut isum, dec, 2 * p, DOT);
                        }
                        let v = dec.values[8 * p + c];
                        for (t, isum_t) in isum.iter_mut().enumerate() {
                            let a = qs
                                .add(t * cols + 32 * p + 4 * c)
                                .cast::<i32>()
                                .read_unaligned();
                            let au = _mm256_xor_si256(_mm256_set1_epi32(a), bias);
                            *isum_t = if DOT == Dot::AVX_VNNI {
                                crate::x86_64::dpbusd_vex(*isum_t, au, v)
                            } else {
                                _mm256_dpbusd_epi32(*isum_t, au, v)
                            };
                        }
                    }
                    let h = if halves(F) { 2 * p + 1 } else { 2 * p };
                    scale_run(&mut sumi, &mut isum, dec, h, DOT);
                }
            }
            let f = _mm256_set1_ps(factor);
            for t in 0..T {
                let dd = _mm256_mul_ps(dec.dw, _mm256_set1_ps(da[t]));
                let v = _mm256_mul_ps(dd, _mm256_mul_ps(_mm256_cvtepi32_ps(sumi[t]), f));
                _mm256_storeu_ps(res[t].as_mut_ptr(), v);
            }
        }
    }

    /// `sumi += scale * exact isum` for the decoded run (or sub-block) `h`
    /// (VNNI: less `128 * sum(v)`), the isums zeroed.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn scale_run<const T: usize>(
        sumi: &mut [__m256i; T],
        isum: &mut [__m256i; T],
        dec: &Decoded,
        h: usize,
        dot: u8,
    ) {
        // SAFETY: register operations; the CPU implements AVX2 (the caller's).
        unsafe {
            for (sumi_t, isum_t) in sumi.iter_mut().zip(isum.iter_mut()) {
                let exact = if dot == Dot::MADDUBS {
                    *isum_t
                } else {
                    _mm256_sub_epi32(*isum_t, dec.sums[h])
                };
                *sumi_t = _mm256_add_epi32(*sumi_t, _mm256_mullo_epi32(dec.scales[h], exact));
                *isum_t = _mm256_setzero_si256();
            }
        }
    }

    /// The activation rows of a call of the prompt GEMM: quants and scales
    /// of all `m` rows, the first row and how many the call takes.
    #[derive(Clone, Copy)]
    struct CallActs<'a> {
        qs: &'a [i8],
        d: &'a [f32],
        first: usize,
        rows_in: usize,
    }

    /// One tile of the prompt GEMM: row group `wg` (`nb` super-blocks)
    /// against a call's activation rows: per super-block, the super-block
    /// decoded once, then the rows in tiles of 4; the rows' float sums kept
    /// in `sums` (zeroed first, then one addition per super-block in order:
    /// the tiles' and the generic sums).
    ///
    /// # Safety
    /// `wg` holds `nb >= 1` super-blocks of `front`'s layout, `a.qs` and
    /// `a.d` rows `a.first..a.first + a.rows_in` of `nb * 256` quants and
    /// `nb` scales, `a.rows_in <= DECODED_ROWS`; the CPU implements AVX2,
    /// FMA, F16C and the `DOT` form; with AVX2 alone no quant is -128.
    #[inline(always)]
    unsafe fn decoded_unit_body<const DOT: u8, const F: u8>(
        front: &Front,
        wg: &[u8],
        nb: usize,
        a: CallActs,
        sums: &mut [[f32; IQ3_ROWS]; DECODED_ROWS],
    ) {
        let cols = nb * QK_K;
        let CallActs {
            qs: act_qs,
            d: act_d,
            first,
            rows_in,
        } = a;
        for r in sums.iter_mut().take(rows_in) {
            *r = [0.0; IQ3_ROWS];
        }
        for b in 0..nb {
            let sb = &wg[b * front.bytes..][..front.bytes];
            // SAFETY: `sb` is a whole super-block (the contract).
            let dec = unsafe { decode::<F>(front, sb.as_ptr()) };
            for t0 in (first..first + rows_in).step_by(TILE_M) {
                let tm = (first + rows_in - t0).min(TILE_M);
                let qs = act_qs[t0 * cols + b * QK_K..].as_ptr();
                let da = |t: usize| act_d[(t0 + t.min(tm - 1)) * nb + b];
                let mut res = [[0.0f32; IQ3_ROWS]; TILE_M];
                let f = front.factor;
                // SAFETY: rows t0..t0 + tm of `act_qs` hold the
                // super-block's quants at stride `cols` (the contract).
                unsafe {
                    match tm {
                        4 => {
                            let d = [0, 1, 2, 3].map(da);
                            decoded_tile::<4, DOT, F>(&dec, qs, cols, d, f, &mut res)
                        }
                        3 => {
                            let d = [0, 1, 2].map(da);
                            decoded_tile::<3, DOT, F>(&dec, qs, cols, d, f, &mut res)
                        }
                        2 => {
                            let d = [0, 1].map(da);
                            decoded_tile::<2, DOT, F>(&dec, qs, cols, d, f, &mut res)
                        }
                        _ => {
                            let d = [da(0)];
                            decoded_tile::<1, DOT, F>(&dec, qs, cols, d, f, &mut res)
                        }
                    }
                }
                for (t, r) in res.iter().enumerate().take(tm) {
                    for (s, v) in sums[t0 - first + t].iter_mut().zip(r) {
                        *s += *v;
                    }
                }
            }
        }
    }

    /// [`decoded_unit_body`] with AVX2 alone.
    ///
    /// # Safety
    /// Its contract with `DOT` the AVX2 form.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn decoded_unit_avx2<const F: u8>(
        front: &Front,
        wg: &[u8],
        nb: usize,
        a: CallActs,
        sums: &mut [[f32; IQ3_ROWS]; DECODED_ROWS],
    ) {
        // SAFETY: the contract of this function is the body's.
        unsafe { decoded_unit_body::<{ Dot::MADDUBS }, F>(front, wg, nb, a, sums) }
    }

    crate::x86_64::vnni_forms!(decoded_unit_avx_vnni, decoded_unit_avx512_vnni<const F: u8>(
        front: &Front,
        wg: &[u8],
        nb: usize,
        a: CallActs,
        sums: &mut [[f32; IQ3_ROWS]; DECODED_ROWS],
    ) => decoded_unit_body::<DOT, F>);

    /// Activation rows per call of the prompt GEMM (the default prefill
    /// batch): each super-block is decoded once per call.
    const DECODED_ROWS: usize = 128;

    /// A codebook layout's GEMM of 2 or more activation rows (`F`: its front end)
    /// on the driver [`gemm_run`] (calls of up to [`DECODED_ROWS`] rows, one
    /// tile per row group and call), each super-block decoded once per call; the contract of its
    /// generic twin `generic`, to which empty shapes go, and activations
    /// with a -128 quant on a CPU without VNNI.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decoded_gemm<const F: u8>(
        cpu: Avx2,
        front: &Front,
        generic: GenericGemm,
        w: &[u8],
        rows: usize,
        cols: usize,
        act_qs: &[i8],
        act_d: &[f32],
        act_sums: &[i16],
        m: usize,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        let GemmKShape { nb, groups } = gemm_k_shape(
            IQ3_ROWS,
            front.bytes,
            w,
            rows,
            cols,
            act_qs,
            act_d,
            act_sums,
            m,
            out,
        )?;
        if nb == 0 || rows == 0 || m == 0 {
            return generic(w, rows, cols, act_qs, act_d, act_sums, m, out);
        }
        type UnitFn =
            unsafe fn(&Front, &[u8], usize, CallActs, &mut [[f32; IQ3_ROWS]; DECODED_ROWS]);
        let unit: UnitFn = match cpu.vnni() {
            Vnni::No if act_qs.contains(&i8::MIN) => {
                return generic(w, rows, cols, act_qs, act_d, act_sums, m, out)
            }
            Vnni::No => decoded_unit_avx2::<F>,
            Vnni::Avx => decoded_unit_avx_vnni::<F>,
            Vnni::Avx512 => decoded_unit_avx512_vnni::<F>,
        };
        let group_bytes = nb * front.bytes;
        let grid = Grid {
            rows,
            units: groups,
            m,
            call_rows: DECODED_ROWS,
        };
        gemm_run(grid, out, |pass: Pass<'_, IQ3_ROWS, DECODED_ROWS>| {
            pass.tiles(|g, first, rows_in, sums| {
                let wg = &w[g * group_bytes..(g + 1) * group_bytes];
                let a = CallActs {
                    qs: act_qs,
                    d: act_d,
                    first,
                    rows_in,
                };
                // SAFETY: `wg` is a whole row group and `act_qs`, `act_d`
                // hold `m` rows of `cols` quants and `nb` scales (the shape
                // check above; nb, rows, m >= 1), rows_in <= DECODED_ROWS
                // (the grid's calls); the token proves AVX2/FMA/F16C and the
                // VNNI form it names; without one, no -128 (checked above).
                unsafe { unit(front, wg, nb, a, sums) };
            });
        });
        Ok(())
    }

    /// A codebook layout's x86 entry points (`$name` its name): `$body`,
    /// the family's body with the layout's places (its `front()`) and front
    /// end `$front`; `k8_entry!`'s GEMV, tiles and table `$table` over it,
    /// the tiles' GEMM `$tiles` for one row, and the GEMM `$gemm` of 2 or
    /// more rows through [`decoded_gemm`].
    macro_rules! iq3_entry {
        (
            $name:literal, $gemv:ident, $gemm:ident, $tiles:ident, $table:ident,
            [$tile:ident, $avx:ident, $avx512:ident], $body:ident, $bytes:expr, $front:expr
        ) => {
            #[doc = concat!("The family's body with ", $name, "'s front end.")]
            ///
            /// # Safety
            /// The contract of `iq3::x86_64::iq3_tile_body`.
            #[inline(always)]
            unsafe fn $body<const T: usize, const DOT: u8>(
                wg: &[u8],
                qs: &[i8],
                d: &[f32],
                offsets: &[i32],
                nb: usize,
                res: &mut [[f32; $crate::layouts::iq3::IQ3_ROWS]; $crate::x86_64::k8::TILE_M],
            ) {
                let front = front();
                // SAFETY: the contract of this function is the body's.
                unsafe {
                    $crate::layouts::iq3::x86_64::iq3_tile_body::<T, DOT, { $front }>(
                        &front, wg, qs, d, offsets, nb, res,
                    )
                }
            }

            $crate::x86_64::k8::k8_entry!(
                $name,
                $gemv,
                $tiles,
                $table,
                [$tile, $avx, $avx512],
                $body,
                $bytes,
                true,
                super::generic::$gemm
            );

            #[doc = concat!("GEMM, ", $name, " weights x `m` Q8_K activation rows: the tiles for one row, else each super-block decoded once for all rows (`iq3::x86_64::decoded_gemm`); the generic twin's contract.")]
            #[allow(clippy::too_many_arguments)]
            pub fn $gemm(
                cpu: $crate::x86_64::Avx2,
                w: &[u8],
                rows: usize,
                cols: usize,
                act_qs: &[i8],
                act_d: &[f32],
                act_sums: &[i16],
                m: usize,
                out: &mut [f32],
            ) -> Result<(), $crate::shape::ShapeError> {
                if m < 2 {
                    return $tiles(cpu, w, rows, cols, act_qs, act_d, act_sums, m, out);
                }
                let generic: $crate::layouts::iq3::x86_64::GenericGemm = super::generic::$gemm;
                $crate::layouts::iq3::x86_64::decoded_gemm::<{ $front }>(
                    cpu, &front(), generic, w, rows, cols, act_qs, act_d, act_sums, m, out,
                )
            }
        };
    }
    pub(crate) use iq3_entry;
}
