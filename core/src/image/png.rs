//! PNG: every color type and bit depth (1-16 bits; 16-bit samples keep their
//! high byte), every filter, Adam7 interlacing. Alpha is dropped (as PIL's
//! `convert("RGB")`), `tRNS` is ignored, palette indices past the palette
//! are black. Chunk CRCs are not checked (the zlib Adler-32 is); ancillary
//! chunks are skipped. The chunk walk stops at IEND, which must be there.

use super::{check_size, filled, inflate, ImageError, Rgb8};
use alloc::vec::Vec;

fn err(what: &'static str, at: usize) -> ImageError {
    ImageError::Png { what, at }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Adam7 passes: x0, y0, dx, dy.
const ADAM7: [[u32; 4]; 7] = [
    [0, 0, 8, 8],
    [4, 0, 8, 8],
    [0, 4, 4, 8],
    [2, 0, 4, 4],
    [0, 2, 2, 4],
    [1, 0, 2, 2],
    [0, 1, 1, 2],
];

pub(crate) fn decode(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    let mut pos = 8usize;
    let mut ihdr: Option<[u8; 13]> = None;
    let mut pal: &[u8] = &[];
    let mut idat: Vec<u8> = Vec::new();
    loop {
        let head = bytes
            .get(pos..pos + 8)
            .ok_or(err("file truncated (no IEND chunk)", pos))?;
        let len = be32(head);
        if len > 0x7fff_ffff {
            return Err(err("chunk length over 2^31-1", pos));
        }
        let start = pos + 8;
        let end = start.saturating_add(len as usize);
        let data = bytes
            .get(start..end)
            .ok_or(err("chunk data truncated", pos))?;
        if bytes.len() - end < 4 {
            return Err(err("chunk CRC truncated", end));
        }
        let kind = &head[4..8];
        if ihdr.is_none() && kind != b"IHDR" {
            return Err(err("first chunk is not IHDR", pos));
        }
        match kind {
            b"IHDR" => {
                if ihdr.is_some() {
                    return Err(err("second IHDR chunk", pos));
                }
                ihdr = Some(
                    data.try_into()
                        .map_err(|_| err("IHDR length is not 13", pos))?,
                );
            }
            b"PLTE" => {
                if len == 0 || !len.is_multiple_of(3) || len > 768 {
                    return Err(err("PLTE length is not 3..=768 and a multiple of 3", pos));
                }
                pal = data;
            }
            b"IDAT" => {
                idat.try_reserve(data.len())
                    .map_err(|_| ImageError::OutOfMemory)?;
                idat.extend_from_slice(data);
            }
            b"IEND" => break,
            _ => {}
        }
        pos = end + 4;
    }
    let h = ihdr.ok_or(err("no IHDR chunk", 8))?;
    let (width, height) = (be32(&h[0..4]), be32(&h[4..8]));
    let (depth, ctype) = (h[8], h[9]);
    let npix = check_size(u64::from(width), u64::from(height))?;
    let channels: u32 = match (ctype, depth) {
        (0, 1 | 2 | 4 | 8 | 16) | (3, 1 | 2 | 4 | 8) => 1,
        (2, 8 | 16) => 3,
        (4, 8 | 16) => 2,
        (6, 8 | 16) => 4,
        _ => return Err(err("bad color type / bit depth combination", 24)),
    };
    if h[10] != 0 || h[11] != 0 {
        return Err(err("unknown compression or filter method", 26));
    }
    let passes: &[[u32; 4]] = match h[12] {
        0 => &[[0, 0, 1, 1]],
        1 => &ADAM7,
        _ => return Err(err("unknown interlace method", 28)),
    };
    if ctype == 3 && pal.is_empty() {
        return Err(err("palette image without PLTE", 8));
    }
    let bits = channels * u32::from(depth); // bits per pixel, <= 64
    let bpp = (bits as usize).div_ceil(8);
    let dims = |p: &[u32; 4]| {
        let pw = width.saturating_sub(p[0]).div_ceil(p[2]) as usize;
        let ph = height.saturating_sub(p[1]).div_ceil(p[3]) as usize;
        let stride = (pw * bits as usize).div_ceil(8) + 1;
        (pw, ph, if pw == 0 { 0 } else { stride })
    };
    // At most 2^26 pixels of 8 bytes plus a filter byte a row: no overflow.
    let raw_len: usize = passes
        .iter()
        .map(|p| {
            let (_, ph, stride) = dims(p);
            ph * stride
        })
        .sum();
    let mut raw = Vec::new();
    raw.try_reserve_exact(raw_len)
        .map_err(|_| ImageError::OutOfMemory)?;
    inflate::zlib(&idat, &mut raw, raw_len)?;
    drop(idat);
    if raw.len() != raw_len {
        return Err(err("image data shorter than the image", 0));
    }
    let mut out = filled(npix * 3, 0u8)?;
    let mut off = 0;
    let maxv = (1u32 << depth.min(8)) - 1;
    for p in passes {
        let (pw, ph, stride) = dims(p);
        if stride == 0 {
            continue;
        }
        let part = &mut raw[off..off + ph * stride];
        off += ph * stride;
        for r in 0..ph {
            let (done, rest) = part.split_at_mut(r * stride);
            let row = &mut rest[..stride];
            let prev = if r > 0 {
                done.get((r - 1) * stride + 1..)
            } else {
                None
            };
            unfilter(row, prev, bpp, off)?;
            let row = &row[1..];
            let y = p[1] as usize + r * p[3] as usize;
            for c in 0..pw {
                let sample = |k: usize| -> u32 {
                    let s = c * channels as usize + k;
                    match depth {
                        8 => u32::from(row[s]),
                        16 => u32::from(row[2 * s]),
                        d => {
                            let bit = s * usize::from(d);
                            let v = u32::from(row[bit / 8]) >> (8 - usize::from(d) - bit % 8);
                            v & maxv
                        }
                    }
                };
                let rgb = match ctype {
                    2 | 6 => [sample(0), sample(1), sample(2)],
                    3 => {
                        let i = sample(0) as usize * 3;
                        match pal.get(i..i + 3) {
                            Some(e) => [e[0].into(), e[1].into(), e[2].into()],
                            None => [0; 3],
                        }
                    }
                    _ => {
                        let g = sample(0) * 255 / maxv;
                        [g; 3]
                    }
                };
                let x = p[0] as usize + c * p[2] as usize;
                let o = (y * width as usize + x) * 3;
                for (d, v) in out[o..o + 3].iter_mut().zip(rgb) {
                    *d = v as u8;
                }
            }
        }
    }
    Ok(Rgb8 {
        width,
        height,
        data: out,
    })
}

/// Undoes the filter of `row` (filter byte first) given the previous row of
/// the pass (without its filter byte), if any.
fn unfilter(row: &mut [u8], prev: Option<&[u8]>, bpp: usize, at: usize) -> Result<(), ImageError> {
    let (f, cur) = row.split_first_mut().ok_or(err("empty row", at))?;
    if *f > 4 {
        return Err(err("bad filter type", at));
    }
    for i in 0..cur.len() {
        let a = if i >= bpp { cur[i - bpp] } else { 0 };
        let b = prev.and_then(|p| p.get(i)).copied().unwrap_or(0);
        let c = if i >= bpp {
            prev.and_then(|p| p.get(i - bpp)).copied().unwrap_or(0)
        } else {
            0
        };
        let pred = match *f {
            0 => 0,
            1 => a,
            2 => b,
            3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
            _ => {
                let (ia, ib, ic) = (i16::from(a), i16::from(b), i16::from(c));
                let p = ia + ib - ic;
                let (pa, pb, pc) = ((p - ia).abs(), (p - ib).abs(), (p - ic).abs());
                if pa <= pb && pa <= pc {
                    a
                } else if pb <= pc {
                    b
                } else {
                    c
                }
            }
        };
        cur[i] = cur[i].wrapping_add(pred);
    }
    Ok(())
}
