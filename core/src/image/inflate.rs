//! zlib / DEFLATE decompression (RFC 1950 / 1951): stored, fixed and dynamic
//! Huffman blocks, decoded bit by bit with canonical code counts (as zlib's
//! `puff`). The Adler-32 checksum is checked. The output is capped: more
//! output than `limit` bytes is an error, so a zip bomb costs nothing.

use super::ImageError;
use alloc::vec::Vec;

fn err(what: &'static str, at: usize) -> ImageError {
    ImageError::Png { what, at }
}

struct Bits<'a> {
    d: &'a [u8],
    pos: usize,
    acc: u32,
    n: u32,
}

impl Bits<'_> {
    fn bits(&mut self, k: u32) -> Result<u32, ImageError> {
        while self.n < k {
            let b = *self
                .d
                .get(self.pos)
                .ok_or(err("zlib: stream truncated", self.pos))?;
            self.pos += 1;
            self.acc |= u32::from(b) << self.n;
            self.n += 8;
        }
        let v = self.acc & ((1u32 << k) - 1);
        self.acc >>= k;
        self.n -= k;
        Ok(v)
    }
}

/// A canonical Huffman code: code counts per length and symbols in order.
struct Huff {
    count: [u16; 16],
    sym: [u16; 320],
}

impl Huff {
    fn new(lens: &[u8], at: usize) -> Result<Self, ImageError> {
        let mut h = Huff {
            count: [0; 16],
            sym: [0; 320],
        };
        for &l in lens {
            h.count[usize::from(l & 15)] += 1;
        }
        let mut left: i32 = 1;
        for &c in &h.count[1..] {
            left = (left << 1) - i32::from(c);
            if left < 0 {
                return Err(err("zlib: over-subscribed Huffman code", at));
            }
        }
        let mut offs = [0u16; 16];
        for i in 1..15 {
            offs[i + 1] = offs[i] + h.count[i];
        }
        for (s, &l) in lens.iter().enumerate() {
            if l != 0 {
                let o = &mut offs[usize::from(l & 15)];
                if let Some(slot) = h.sym.get_mut(usize::from(*o)) {
                    *slot = s as u16;
                }
                *o += 1;
            }
        }
        Ok(h)
    }

    fn decode(&self, b: &mut Bits<'_>) -> Result<usize, ImageError> {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for &c in &self.count[1..] {
            code |= b.bits(1)? as i32;
            let c = i32::from(c);
            if code - c < first {
                let i = (index + code - first) as usize;
                return Ok(usize::from(self.sym.get(i).copied().unwrap_or(0)));
            }
            index += c;
            first = (first + c) << 1;
            code <<= 1;
        }
        Err(err("zlib: invalid Huffman code", b.pos))
    }
}

const LBASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEXT: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DBASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DEXT: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];
/// Order of the code length code lengths.
const CLORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Decompresses the zlib stream `data`, appending at most `limit` bytes to
/// `out` (whose capacity the caller reserved).
pub(crate) fn zlib(data: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), ImageError> {
    let (cmf, flg) = match data {
        [a, b, ..] => (*a, *b),
        _ => return Err(err("zlib: stream truncated", 0)),
    };
    if cmf & 15 != 8 || cmf >> 4 > 7 || (u16::from(cmf) << 8 | u16::from(flg)) % 31 != 0 {
        return Err(err("zlib: bad header", 0));
    }
    if flg & 0x20 != 0 {
        return Err(err("zlib: preset dictionary", 1));
    }
    let start = out.len();
    let mut b = Bits {
        d: data,
        pos: 2,
        acc: 0,
        n: 0,
    };
    loop {
        let last = b.bits(1)?;
        match b.bits(2)? {
            0 => {
                b.acc = 0;
                b.n = 0;
                let p = b.pos;
                let h = data.get(p..p + 4).ok_or(err("zlib: stream truncated", p))?;
                let len = usize::from(u16::from_le_bytes([h[0], h[1]]));
                if u16::from_le_bytes([h[0], h[1]]) != !u16::from_le_bytes([h[2], h[3]]) {
                    return Err(err("zlib: stored block length check", p));
                }
                let src = data
                    .get(p + 4..p + 4 + len)
                    .ok_or(err("zlib: stream truncated", p))?;
                if out.len() - start + len > limit {
                    return Err(err("zlib: more data than the image holds", p));
                }
                out.extend_from_slice(src);
                b.pos = p + 4 + len;
            }
            1 => {
                let mut l = [8u8; 288];
                l[144..256].fill(9);
                l[256..280].fill(7);
                let lit = Huff::new(&l, b.pos)?;
                let dist = Huff::new(&[5; 30], b.pos)?;
                codes(&mut b, &lit, &dist, out, start, limit)?;
            }
            2 => {
                let nlen = b.bits(5)? as usize + 257;
                let ndist = b.bits(5)? as usize + 1;
                let ncode = b.bits(4)? as usize + 4;
                if nlen > 286 || ndist > 30 {
                    return Err(err("zlib: bad code counts", b.pos));
                }
                let mut lens = [0u8; 316];
                for &i in &CLORDER[..ncode] {
                    lens[i] = b.bits(3)? as u8;
                }
                let lencode = Huff::new(&lens[..19], b.pos)?;
                let mut i = 0;
                while i < nlen + ndist {
                    let s = lencode.decode(&mut b)?;
                    let (v, rep) = match s {
                        0..=15 => (s as u8, 1),
                        16 => {
                            let prev = i
                                .checked_sub(1)
                                .ok_or(err("zlib: repeat with no previous length", b.pos))?;
                            (lens[prev], 3 + b.bits(2)? as usize)
                        }
                        17 => (0, 3 + b.bits(3)? as usize),
                        _ => (0, 11 + b.bits(7)? as usize),
                    };
                    if i + rep > nlen + ndist {
                        return Err(err("zlib: too many code lengths", b.pos));
                    }
                    lens[i..i + rep].fill(v);
                    i += rep;
                }
                if lens[256] == 0 {
                    return Err(err("zlib: no end-of-block code", b.pos));
                }
                let lit = Huff::new(&lens[..nlen], b.pos)?;
                let dist = Huff::new(&lens[nlen..nlen + ndist], b.pos)?;
                codes(&mut b, &lit, &dist, out, start, limit)?;
            }
            _ => return Err(err("zlib: bad block type", b.pos)),
        }
        if last == 1 {
            break;
        }
    }
    // Adler-32 of the output, big-endian after the byte-aligned end.
    let p = b.pos;
    let want = data.get(p..p + 4).ok_or(err("zlib: stream truncated", p))?;
    let (mut s1, mut s2) = (1u32, 0u32);
    for chunk in out[start..].chunks(5552) {
        for &x in chunk {
            s1 += u32::from(x);
            s2 += s1;
        }
        s1 %= 65521;
        s2 %= 65521;
    }
    if (s2 << 16 | s1).to_be_bytes() != want {
        return Err(err("zlib: Adler-32 mismatch", p));
    }
    Ok(())
}

fn codes(
    b: &mut Bits<'_>,
    lit: &Huff,
    dist: &Huff,
    out: &mut Vec<u8>,
    start: usize,
    limit: usize,
) -> Result<(), ImageError> {
    loop {
        let s = lit.decode(b)?;
        if s < 256 {
            if out.len() - start >= limit {
                return Err(err("zlib: more data than the image holds", b.pos));
            }
            out.push(s as u8);
            continue;
        }
        if s == 256 {
            return Ok(());
        }
        let i = s - 257;
        let (base, ext) = match (LBASE.get(i), LEXT.get(i)) {
            (Some(&a), Some(&e)) => (a, e),
            _ => return Err(err("zlib: bad length code", b.pos)),
        };
        let len = usize::from(base) + b.bits(u32::from(ext))? as usize;
        let d = dist.decode(b)?;
        let (base, ext) = match (DBASE.get(d), DEXT.get(d)) {
            (Some(&a), Some(&e)) => (a, e),
            _ => return Err(err("zlib: bad distance code", b.pos)),
        };
        let dist = usize::from(base) + b.bits(u32::from(ext))? as usize;
        let have = out.len() - start;
        if dist > have {
            return Err(err("zlib: distance too far back", b.pos));
        }
        if have + len > limit {
            return Err(err("zlib: more data than the image holds", b.pos));
        }
        for _ in 0..len {
            let v = out[out.len() - dist];
            out.push(v);
        }
    }
}
