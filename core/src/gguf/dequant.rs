//! Dequantization of ggml rows, bit-identical to ggml's `dequantize_row_*`
//! (ggml-quants.c) and to gguf-py's numpy ports (`gguf.quants.dequantize`).
//!
//! Every value is computed with the same f32 operations in the same order as
//! ggml's C reference: integers are converted to f32, then multiplied (and
//! the minimum subtracted or added) as separate IEEE operations. Rust never
//! fuses `a * b + c` into an FMA, so the results do not depend on the target.
//! (A C compiler allowed to contract, e.g. GCC's default `-ffp-contract=fast`
//! on an FMA target, may compute `x*d + m` fused and differ from both ggml's
//! written order and from gguf-py; this follows the written order, which
//! gguf-py matches for every type here.)
//!
//! Q8_K is not in gguf-py (neither quantize nor dequantize); its dequantizer
//! follows ggml's `dequantize_row_q8_K`: `y = d * q` with `d` an f32.

use super::tensor::{GgmlType, QK_K};
use crate::error::check_len;
use crate::quant::f16::{bf16_to_f32, f16_to_f32};
use crate::quant::{q4_0, q8_0};
use crate::Error;

/// Dequantizes `bytes`, a whole number of `ty` blocks, into `out`, which must
/// hold exactly `bytes.len() / ty.type_size() * ty.block_size()` values.
///
/// Every [`GgmlType`] but Q8_1 is supported (ggml has no Q8_1 dequantizer):
/// Q8_1 gives [`Error::Unsupported`].
pub fn dequantize_row(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<(), Error> {
    if !ty.can_dequantize() {
        return Err(Error::Unsupported {
            what: "dequantization of ggml type",
            value: ty.id().into(),
        });
    }
    let ts = ty.type_size();
    if !bytes.len().is_multiple_of(ts) {
        return Err(Error::SizeMismatch {
            what: "dequantize_row bytes (a whole number of blocks)",
            expected: bytes.len() / ts * ts,
            actual: bytes.len(),
        });
    }
    let n = crate::error::mul(
        "dequantize_row output values",
        bytes.len() / ts,
        ty.block_size(),
    )?;
    check_len("dequantize_row output values", n, out.len())?;
    match ty {
        GgmlType::F32 => blocks::<4, 1>(bytes, out, |b, o| o[0] = f32::from_le_bytes(*b)),
        GgmlType::F16 => blocks::<2, 1>(bytes, out, |b, o| {
            o[0] = f16_to_f32(u16::from_le_bytes(*b));
        }),
        GgmlType::BF16 => blocks::<2, 1>(bytes, out, |b, o| {
            o[0] = bf16_to_f32(u16::from_le_bytes(*b));
        }),
        GgmlType::Q4_0 => return q4_0::dequantize_row_bytes(bytes, out),
        GgmlType::Q8_0 => return q8_0::dequantize_row_bytes(bytes, out),
        GgmlType::Q4_1 => blocks(bytes, out, q4_1),
        GgmlType::Q5_0 => blocks(bytes, out, q5_0),
        GgmlType::Q5_1 => blocks(bytes, out, q5_1),
        GgmlType::Q2_K => blocks(bytes, out, q2_k),
        GgmlType::Q3_K => blocks(bytes, out, q3_k),
        GgmlType::Q4_K => blocks(bytes, out, q4_k),
        GgmlType::Q5_K => blocks(bytes, out, q5_k),
        GgmlType::Q6_K => blocks(bytes, out, q6_k),
        GgmlType::Q8_K => blocks(bytes, out, q8_k),
        GgmlType::IQ4_NL => blocks(bytes, out, iq4_nl),
        GgmlType::IQ4_XS => blocks(bytes, out, iq4_xs),
        GgmlType::IQ2_XXS => blocks(bytes, out, iq2_xxs),
        GgmlType::IQ2_XS => blocks(bytes, out, iq2_xs),
        GgmlType::IQ2_S => blocks(bytes, out, iq2_s),
        GgmlType::IQ3_XXS => blocks(bytes, out, iq3_xxs),
        GgmlType::IQ3_S => blocks(bytes, out, iq3_s),
        GgmlType::Q8_1 => {}
    }
    Ok(())
}

/// Applies `f` to each `TS`-byte block and its `BS` outputs (lengths checked
/// by the caller; a remainder would be ignored).
fn blocks<const TS: usize, const BS: usize>(
    bytes: &[u8],
    out: &mut [f32],
    f: impl Fn(&[u8; TS], &mut [f32; BS]),
) {
    let (bb, _) = bytes.as_chunks::<TS>();
    let (oo, _) = out.as_chunks_mut::<BS>();
    for (b, o) in bb.iter().zip(oo) {
        f(b, o);
    }
}

/// The little-endian f16 at `b[at..at + 2]`.
#[inline]
fn h(b: &[u8], at: usize) -> f32 {
    match (b.get(at), b.get(at + 1)) {
        (Some(&lo), Some(&hi)) => f16_to_f32(u16::from_le_bytes([lo, hi])),
        _ => 0.0,
    }
}

/// Q4_1: `d: f16, m: f16, qs[16]`; `x = q * d + m`.
fn q4_1(b: &[u8; 20], o: &mut [f32; 32]) {
    let d = h(b, 0);
    let m = h(b, 2);
    for j in 0..16 {
        let q = b[4 + j];
        o[j] = (q & 0x0f) as f32 * d + m;
        o[j + 16] = (q >> 4) as f32 * d + m;
    }
}

/// IQ4_NL: `d: f16, qs[16]`; `x = d * IQ4_NL_VALUES[n]`, weight `j` the
/// low nibble of byte `j`, weight `j + 16` its high nibble.
fn iq4_nl(b: &[u8; 18], o: &mut [f32; 32]) {
    use kestrel_kernels::layouts::iq4nl::IQ4_NL_VALUES;
    let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
    for j in 0..16 {
        o[j] = d * IQ4_NL_VALUES[(b[2 + j] & 15) as usize] as f32;
        o[j + 16] = d * IQ4_NL_VALUES[(b[2 + j] >> 4) as usize] as f32;
    }
}

/// IQ4_XS: `d: f16, scales_h: u16, scales_l[4], qs[128]`; sub-block `p`
/// (32 weights) has the 6-bit scale `ls` (its low nibble from `scales_l[p /
/// 2]`, its top 2 bits from `scales_h`), `x = (d * (ls - 32)) *
/// IQ4_NL_VALUES[n]`, weight `l` the low nibble of `qs[16p + l]`, weight `l
/// + 16` its high nibble.
fn iq4_xs(b: &[u8; 136], o: &mut [f32; QK_K]) {
    use kestrel_kernels::layouts::iq4nl::IQ4_NL_VALUES;
    let d = h(b, 0);
    let scales_h = u16::from_le_bytes([b[2], b[3]]);
    for p in 0..QK_K / 32 {
        let lo = (b[4 + p / 2] >> (4 * (p % 2))) & 0x0f;
        let hi = ((scales_h >> (2 * p)) & 3) as u8;
        let dl = d * ((lo | hi << 4) as i32 - 32) as f32;
        for l in 0..16 {
            let q = b[8 + 16 * p + l];
            o[32 * p + l] = dl * IQ4_NL_VALUES[(q & 15) as usize] as f32;
            o[32 * p + l + 16] = dl * IQ4_NL_VALUES[(q >> 4) as usize] as f32;
        }
    }
}

/// IQ2_XXS: `d: f16`, then per sub-block `p` (32 weights) two words: the
/// first 4 bytes index the grid points of weights `8l..8l + 8`, the second
/// `aux` holds the scale `ls` (bits 28..32) and the signs as IQ3_XXS's:
/// `x = (d * (0.5 + ls) * 0.25) * g * sign`, `g` byte `j` of point `l` for
/// weight `8l + j`.
fn iq2_xxs(b: &[u8; 66], o: &mut [f32; QK_K]) {
    let grid = kestrel_kernels::layouts::iq2xxs::iq2xxs_grid();
    use kestrel_kernels::layouts::iq3xxs::sign_word;
    let d = h(b, 0);
    for p in 0..QK_K / 32 {
        let at = 2 + 8 * p;
        let aux = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
        let signs = sign_word(aux);
        for w in 0..32 {
            let point = grid[b[at + w / 8] as usize];
            let g = ((point >> (8 * (w % 8))) & 0xff) as f32;
            let sign = if (signs >> (8 * (w / 8) + w % 8)) & 1 != 0 {
                -1.0
            } else {
                1.0
            };
            o[32 * p + w] = db * g * sign;
        }
    }
}

/// IQ2_XS: `d: f16`, 32 words `q` (per 8 weights: bits 0..9 the index of
/// their IQ2_XS grid point, bits 9..16 their signs as IQ3_XXS's 7-bit
/// fields), 8 scale bytes (per 32 weights, a nibble per 16: low first):
/// `x = (d * (0.5 + ls) * 0.25) * g * sign`, `g` byte `j` of the point of
/// word `l` for weight `8l + j`.
fn iq2_xs(b: &[u8; 74], o: &mut [f32; QK_K]) {
    let grid = kestrel_kernels::layouts::iq2xs::iq2xs_grid();
    let d = h(b, 0);
    for l in 0..QK_K / 8 {
        let q = u16::from_le_bytes([b[2 + 2 * l], b[3 + 2 * l]]);
        let ls = (b[2 + QK_K / 4 + l / 4] >> (4 * (l % 4 / 2))) & 15;
        let db = d * (0.5 + ls as f32) * 0.25;
        let signs = (q >> 9) as u32;
        let signs = signs | (signs.count_ones() & 1) << 7;
        let point = grid[(q & 511) as usize];
        for j in 0..8 {
            let g = ((point >> (8 * j)) & 0xff) as f32;
            let sign = if (signs >> j) & 1 != 0 { -1.0 } else { 1.0 };
            o[8 * l + j] = db * g * sign;
        }
    }
}

/// IQ2_S: `d: f16`, `qs[32]` (per 8 weights the low 8 bits of the index
/// of their IQ2_S grid point), `signs[32]` (per 8 weights a byte, bit `j`
/// weight `j`), `qh[8]` (per 32 weights the two high index bits of each 8,
/// bits `2l..2l + 2`), 8 scale bytes as IQ2_XS's: `x = (d * (0.5 + ls) *
/// 0.25) * g * sign`.
fn iq2_s(b: &[u8; 82], o: &mut [f32; QK_K]) {
    let grid = kestrel_kernels::layouts::iq2s::iq2s_grid();
    let d = h(b, 0);
    for l in 0..QK_K / 8 {
        let high = usize::from(b[2 + QK_K / 4 + l / 4] >> (2 * (l % 4))) & 3;
        let index = usize::from(b[2 + l]) | high << 8;
        let ls = (b[2 + QK_K / 4 + QK_K / 32 + l / 4] >> (4 * (l % 4 / 2))) & 15;
        let db = d * (0.5 + ls as f32) * 0.25;
        let signs = b[2 + QK_K / 8 + l];
        for j in 0..8 {
            let g = ((grid[index] >> (8 * j)) & 0xff) as f32;
            let sign = if (signs >> j) & 1 != 0 { -1.0 } else { 1.0 };
            o[8 * l + j] = db * g * sign;
        }
    }
}

/// IQ3_XXS: `d: f16, qs[64], words[8]`; sub-block `p` (32 weights) has the
/// word `aux` (bits 28..32 the scale `ls`, bits `7k..7k + 7` the signs of
/// weights `8k..8k + 7` but the last, which makes the minus signs even),
/// `x = (d * (0.5 + ls) * 0.5) * g * sign`, `g` byte `j` of the grid point
/// `qs[8p + c]` for weight `4c + j`.
fn iq3_xxs(b: &[u8; 98], o: &mut [f32; QK_K]) {
    use kestrel_kernels::layouts::iq3xxs::sign_word;
    let grid = kestrel_kernels::layouts::iq3xxs::iq3xxs_grid();
    let d = h(b, 0);
    for p in 0..QK_K / 32 {
        let at = 2 + QK_K / 4 + 4 * p;
        let aux = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        let signs = sign_word(aux);
        for w in 0..32 {
            let point = grid[b[2 + 8 * p + w / 4] as usize];
            let g = ((point >> (8 * (w % 4))) & 0xff) as f32;
            let sign = if (signs >> (8 * (w / 8) + w % 8)) & 1 != 0 {
                -1.0
            } else {
                1.0
            };
            o[32 * p + w] = db * g * sign;
        }
    }
}

/// IQ3_S: `d: f16, qs[64], qh[8], signs[32], scales[4]`; sub-block `p` has
/// the scale `ls` (nibble `p % 2` of `scales[p / 2]`),
/// `x = (d * (1 + 2 ls)) * g * sign`, `g` byte `j` of the grid point
/// `qs[8p + c] | (bit c of qh[p]) << 8` for weight `4c + j`, the sign bit
/// `w % 8` of `signs[4p + w / 8]` for weight `w`.
fn iq3_s(b: &[u8; 110], o: &mut [f32; QK_K]) {
    let grid = kestrel_kernels::layouts::iq3s::iq3s_grid();
    let d = h(b, 0);
    for p in 0..QK_K / 32 {
        let ls = (b[106 + p / 2] >> (4 * (p % 2))) & 15;
        let db = d * (1 + 2 * ls as u32) as f32;
        for w in 0..32 {
            let c = w / 4;
            let index = b[2 + 8 * p + c] as usize | (((b[66 + p] >> c) & 1) as usize) << 8;
            let g = ((grid[index] >> (8 * (w % 4))) & 0xff) as f32;
            let sign = if (b[74 + 4 * p + w / 8] >> (w % 8)) & 1 != 0 {
                -1.0
            } else {
                1.0
            };
            o[32 * p + w] = db * g * sign;
        }
    }
}

/// Q5_0: `d: f16, qh: u32, qs[16]`; `x = (q - 16) * d`, bit `j` of `qh` the
/// fifth bit of weight `j`.
fn q5_0(b: &[u8; 22], o: &mut [f32; 32]) {
    let d = h(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for j in 0..16 {
        let xh0 = (((qh >> j) << 4) & 0x10) as u8;
        let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
        let x0 = ((b[6 + j] & 0x0f) | xh0) as i32 - 16;
        let x1 = ((b[6 + j] >> 4) | xh1) as i32 - 16;
        o[j] = x0 as f32 * d;
        o[j + 16] = x1 as f32 * d;
    }
}

/// Q5_1: `d: f16, m: f16, qh: u32, qs[16]`; `x = q * d + m`.
fn q5_1(b: &[u8; 24], o: &mut [f32; 32]) {
    let d = h(b, 0);
    let m = h(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for j in 0..16 {
        let xh0 = (((qh >> j) << 4) & 0x10) as u8;
        let xh1 = ((qh >> (j + 12)) & 0x10) as u8;
        let x0 = (b[8 + j] & 0x0f) | xh0;
        let x1 = (b[8 + j] >> 4) | xh1;
        o[j] = x0 as f32 * d + m;
        o[j + 16] = x1 as f32 * d + m;
    }
}

/// Q2_K: `scales[16], qs[64], d: f16, dmin: f16`. Sixteen groups of 16
/// weights; group scale byte: low nibble times `d`, high nibble times `dmin`.
fn q2_k(b: &[u8; 84], o: &mut [f32; QK_K]) {
    let d = h(b, 80);
    let min = h(b, 82);
    let mut y = 0;
    let mut is = 0;
    for n in 0..2 {
        let q = 16 + 32 * n;
        for shift in [0, 2, 4, 6] {
            for half in 0..2 {
                let sc = b[is];
                is += 1;
                let dl = d * (sc & 0x0f) as f32;
                let ml = min * (sc >> 4) as f32;
                for l in 0..16 {
                    let v = (b[q + 16 * half + l] >> shift) & 3;
                    o[y] = dl * v as f32 - ml;
                    y += 1;
                }
            }
        }
    }
}

/// Q3_K: `hmask[32], qs[64], scales[12], d: f16`. Sixteen groups of 16 with
/// 6-bit signed scales (offset 32); a weight is its 2 low bits minus 4 when
/// its `hmask` bit is clear.
fn q3_k(b: &[u8; 110], o: &mut [f32; QK_K]) {
    let d_all = h(b, 108);
    let sc = |s: usize| -> i32 {
        // ggml's kmask unpacking of the 12 scale bytes, one scale at a time.
        let lo = if s < 8 {
            b[96 + s] & 0x0f
        } else {
            b[96 + s - 8] >> 4
        };
        let hi = (b[96 + 8 + s % 4] >> (2 * (s / 4))) & 3;
        (lo | (hi << 4)) as i32 - 32
    };
    let mut y = 0;
    let mut is = 0;
    for n in 0..2 {
        let q = 32 + 32 * n;
        for j in 0..4 {
            let shift = 2 * j;
            let m = 1u8 << (4 * n + j);
            for half in 0..2 {
                let dl = d_all * sc(is) as f32;
                is += 1;
                for l in 0..16 {
                    let k = 16 * half + l;
                    let low = ((b[q + k] >> shift) & 3) as i32;
                    let v = low - if b[k] & m != 0 { 0 } else { 4 };
                    o[y] = dl * v as f32;
                    y += 1;
                }
            }
        }
    }
}

/// ggml's `get_scale_min_k4`: the 6-bit scale and min of group `j` (0..8)
/// from the 12 packed bytes.
#[inline]
fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The 12 scale bytes at `b[4..16]` of a Q4_K / Q5_K block.
#[inline]
fn k4_scales(b: &[u8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    if let Some(src) = b.get(4..16) {
        s.copy_from_slice(src);
    }
    s
}

/// Q4_K: `d: f16, dmin: f16, scales[12], qs[128]`. Eight groups of 32:
/// `x = (d * sc) * q - dmin * m`.
fn q4_k(b: &[u8; 144], o: &mut [f32; QK_K]) {
    let d = h(b, 0);
    let min = h(b, 2);
    let scales = k4_scales(b);
    for k in 0..4 {
        let (sc1, m1) = scale_min_k4(2 * k, &scales);
        let (sc2, m2) = scale_min_k4(2 * k + 1, &scales);
        let d1 = d * sc1 as f32;
        let m1 = min * m1 as f32;
        let d2 = d * sc2 as f32;
        let m2 = min * m2 as f32;
        for l in 0..32 {
            let q = b[16 + 32 * k + l];
            o[64 * k + l] = d1 * (q & 0x0f) as f32 - m1;
            o[64 * k + 32 + l] = d2 * (q >> 4) as f32 - m2;
        }
    }
}

/// Q5_K: `d: f16, dmin: f16, scales[12], qh[32], qs[128]`; as Q4_K with a
/// fifth bit from `qh`.
fn q5_k(b: &[u8; 176], o: &mut [f32; QK_K]) {
    let d = h(b, 0);
    let min = h(b, 2);
    let scales = k4_scales(b);
    for k in 0..4 {
        let (sc1, m1) = scale_min_k4(2 * k, &scales);
        let (sc2, m2) = scale_min_k4(2 * k + 1, &scales);
        let d1 = d * sc1 as f32;
        let m1 = min * m1 as f32;
        let d2 = d * sc2 as f32;
        let m2 = min * m2 as f32;
        let u1 = 1u8 << (2 * k);
        let u2 = 2u8 << (2 * k);
        for l in 0..32 {
            let ql = b[48 + 32 * k + l];
            let qh = b[16 + l];
            let x1 = (ql & 0x0f) + if qh & u1 != 0 { 16 } else { 0 };
            let x2 = (ql >> 4) + if qh & u2 != 0 { 16 } else { 0 };
            o[64 * k + l] = d1 * x1 as f32 - m1;
            o[64 * k + 32 + l] = d2 * x2 as f32 - m2;
        }
    }
}

/// Q6_K: `ql[128], qh[64], scales[16]: i8, d: f16`. Sixteen groups of 16:
/// `x = (d * sc) * (q - 32)` with 6-bit `q`.
fn q6_k(b: &[u8; 210], o: &mut [f32; QK_K]) {
    let d = h(b, 208);
    for n in 0..2 {
        let ql = 64 * n;
        let qh = 128 + 32 * n;
        let sc = 192 + 8 * n;
        let y = 128 * n;
        for l in 0..32 {
            let is = l / 16;
            let h_ = b[qh + l];
            let q1 = ((b[ql + l] & 0x0f) | ((h_ & 3) << 4)) as i32 - 32;
            let q2 = ((b[ql + l + 32] & 0x0f) | (((h_ >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((b[ql + l] >> 4) | (((h_ >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((b[ql + l + 32] >> 4) | (((h_ >> 6) & 3) << 4)) as i32 - 32;
            let s = |i: usize| b[sc + is + i] as i8 as f32;
            o[y + l] = d * s(0) * q1 as f32;
            o[y + l + 32] = d * s(2) * q2 as f32;
            o[y + l + 64] = d * s(4) * q3 as f32;
            o[y + l + 96] = d * s(6) * q4 as f32;
        }
    }
}

/// Q8_K: `d: f32, qs[256]: i8, bsums[16]: i16`; `x = d * q`.
fn q8_k(b: &[u8; 292], o: &mut [f32; QK_K]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for (v, &q) in o.iter_mut().zip(&b[4..4 + QK_K]) {
        *v = d * (q as i8) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_checked() {
        let mut out = [0.0f32; 256];
        for ty in GgmlType::ALL {
            if !ty.can_dequantize() {
                assert!(matches!(
                    dequantize_row(ty, &[0; 36], &mut out[..32]),
                    Err(Error::Unsupported { value: 9, .. })
                ));
                continue;
            }
            let ts = ty.type_size();
            let bs = ty.block_size();
            let bytes = [0u8; 300];
            // One block: fine; one byte short, or a wrong output length: errors.
            assert!(dequantize_row(ty, &bytes[..ts], &mut out[..bs]).is_ok());
            assert!(dequantize_row(ty, &bytes[..ts - 1], &mut out[..bs]).is_err());
            assert!(dequantize_row(ty, &bytes[..ts], &mut out[..bs - 1]).is_err());
            assert!(dequantize_row(ty, &[], &mut []).is_ok());
        }
    }

    #[test]
    fn q4_1_and_q5_known_values() {
        // d = 1.0, m = -2.0, nibbles 0..15 and 15..0.
        let mut b = [0u8; 20];
        b[0..2].copy_from_slice(&0x3c00u16.to_le_bytes());
        b[2..4].copy_from_slice(&0xc000u16.to_le_bytes());
        for j in 0..16 {
            b[4 + j] = (j as u8) | ((15 - j as u8) << 4);
        }
        let mut o = [0.0; 32];
        dequantize_row(GgmlType::Q4_1, &b, &mut o).unwrap();
        assert_eq!(o[0], -2.0);
        assert_eq!(o[15], 13.0);
        assert_eq!(o[16], 13.0);
        // Q5_0: all qh bits set, nibbles 0: q = 16 - 16 = 0; qh clear: -16.
        let mut b = [0u8; 22];
        b[0..2].copy_from_slice(&0x3c00u16.to_le_bytes());
        b[2..6].copy_from_slice(&0x0000_ffffu32.to_le_bytes());
        dequantize_row(GgmlType::Q5_0, &b, &mut o).unwrap();
        assert_eq!(o[0], 0.0);
        assert_eq!(o[15], 0.0);
        assert_eq!(o[16], -16.0);
        assert_eq!(o[31], -16.0);
    }
}
