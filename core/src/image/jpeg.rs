//! JPEG: baseline, extended (SOF1) and progressive Huffman coding, 8-bit
//! samples, 1 or 3 components, any mix of 1x / 2x sampling per axis (4:4:4,
//! 4:2:2, 4:2:0, 4:4:0), restart intervals. The output is libjpeg-turbo's
//! (what PIL uses) with its defaults: the integer "islow" IDCT, "fancy"
//! (triangle) upsampling and its fixed-point YCbCr -> RGB, in the same
//! integer arithmetic. Entropy-coded data must be complete: a marker or the
//! end of the file inside a scan is an error (libjpeg pads with zeros and
//! warns), and so is a missing EOI. Arithmetic coding, lossless,
//! hierarchical, 12-bit, 2 or 4 components (CMYK/YCCK) are `Unsupported`.

use super::{check_size, filled, ImageError, Rgb8};
use alloc::vec::Vec;

fn err(what: &'static str, at: usize) -> ImageError {
    ImageError::Jpeg { what, at }
}

/// Zigzag index -> natural (row-major) index.
const NATURAL: [u8; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

struct Bits<'a> {
    d: &'a [u8],
    pos: usize,
    acc: u8,
    n: u32,
}

impl Bits<'_> {
    fn bit(&mut self) -> Result<i32, ImageError> {
        if self.n == 0 {
            let b = *self
                .d
                .get(self.pos)
                .ok_or(err("file truncated in scan data", self.pos))?;
            if b == 0xff {
                if self.d.get(self.pos + 1) != Some(&0) {
                    return Err(err("marker or end of file inside scan data", self.pos));
                }
                self.pos += 2;
            } else {
                self.pos += 1;
            }
            self.acc = b;
            self.n = 8;
        }
        self.n -= 1;
        Ok(i32::from(self.acc >> self.n) & 1)
    }

    fn bits(&mut self, k: u8) -> Result<i32, ImageError> {
        let mut v = 0;
        for _ in 0..k {
            v = v << 1 | self.bit()?;
        }
        Ok(v)
    }

    /// A `k`-bit magnitude category value, sign-extended (JPEG's EXTEND).
    fn extend(&mut self, k: u8) -> Result<i32, ImageError> {
        let v = self.bits(k)?;
        Ok(if k > 0 && v < 1 << (k - 1) {
            v - (1 << k) + 1
        } else {
            v
        })
    }
}

/// A Huffman table as libjpeg's slow path decodes it.
#[derive(Clone)]
struct Huff {
    maxcode: [i32; 17],
    valoff: [i32; 17],
    vals: [u8; 256],
}

impl Huff {
    fn decode(&self, b: &mut Bits<'_>) -> Result<u8, ImageError> {
        let mut code = 0;
        for l in 1..17 {
            code = code << 1 | b.bit()?;
            if code <= self.maxcode[l] {
                return usize::try_from(code + self.valoff[l])
                    .ok()
                    .and_then(|i| self.vals.get(i).copied())
                    .ok_or(err("bad Huffman code", b.pos));
            }
        }
        Err(err("bad Huffman code", b.pos))
    }
}

struct Comp {
    id: u8,
    h: usize,
    v: usize,
    tq: usize,
    /// Blocks per row and per column, padded to whole MCUs.
    bw: usize,
    bh: usize,
    coefs: Vec<i16>,
    pred: i32,
    dc: usize,
    ac: usize,
}

struct Frame {
    width: usize,
    height: usize,
    progressive: bool,
    comps: Vec<Comp>,
    hmax: usize,
    vmax: usize,
    mcux: usize,
    mcuy: usize,
}

pub(crate) fn decode(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    let mut pos = 2;
    let mut qt = [[0u16; 64]; 4];
    let mut qset = [false; 4];
    let mut huffs: [Option<Huff>; 8] = Default::default(); // DC 0..3, AC 4..7
    let mut frame: Option<Frame> = None;
    let mut restart = 0usize;
    let (mut jfif, mut adobe) = (false, None);
    let mut scans = 0usize;
    loop {
        // Skip to the next marker (libjpeg skips stray bytes too).
        while bytes.get(pos).is_some_and(|&b| b != 0xff) {
            pos += 1;
        }
        while bytes.get(pos + 1) == Some(&0xff) {
            pos += 1;
        }
        let at = pos;
        let m = *bytes
            .get(pos + 1)
            .ok_or(err("file truncated (no EOI marker)", pos))?;
        pos += 2;
        if m == 0xd9 {
            break;
        }
        match m {
            0xd0..=0xd7 => return Err(err("restart marker outside a scan", at)),
            0xd8 | 0x00 | 0x01 => return Err(err("unexpected marker", at)),
            0xc9..=0xcf => return Err(ImageError::Unsupported("jpeg: arithmetic coding")),
            0xc3 | 0xc5..=0xc7 | 0xde | 0xdf => {
                return Err(ImageError::Unsupported(
                    "jpeg: lossless or hierarchical coding",
                ))
            }
            0xdc => return Err(ImageError::Unsupported("jpeg: DNL marker")),
            _ => {}
        }
        let len = match bytes.get(pos..pos + 2) {
            Some(l) => usize::from(u16::from_be_bytes([l[0], l[1]])),
            None => return Err(err("file truncated in a marker segment", pos)),
        };
        let d = bytes
            .get(pos + 2..pos + len.max(2))
            .filter(|_| len >= 2)
            .ok_or(err("marker segment truncated or length under 2", pos))?;
        pos += len;
        match m {
            0xe0 => jfif |= d.starts_with(b"JFIF\0"),
            0xee if d.len() >= 12 && d.starts_with(b"Adobe") => adobe = Some(d[11]),
            0xdb => {
                let mut p = 0;
                while p < d.len() {
                    let (pq, tq) = (d[p] >> 4, usize::from(d[p] & 15));
                    let n = if pq == 0 { 64 } else { 128 };
                    let t = d
                        .get(p + 1..p + 1 + n)
                        .filter(|_| pq <= 1 && tq < 4)
                        .ok_or(err("bad DQT segment", at))?;
                    for (k, &z) in NATURAL.iter().enumerate() {
                        qt[tq][usize::from(z)] = if pq == 0 {
                            u16::from(t[k])
                        } else {
                            u16::from_be_bytes([t[2 * k], t[2 * k + 1]])
                        };
                    }
                    qset[tq] = true;
                    p += 1 + n;
                }
            }
            0xc4 => {
                let mut p = 0;
                while p < d.len() {
                    let (tc, th) = (d[p] >> 4, usize::from(d[p] & 15));
                    let counts = d.get(p + 1..p + 17).ok_or(err("bad DHT segment", at))?;
                    let total: usize = counts.iter().map(|&c| usize::from(c)).sum();
                    let vals = d
                        .get(p + 17..p + 17 + total)
                        .filter(|_| tc <= 1 && th < 4 && total <= 256)
                        .ok_or(err("bad DHT segment", at))?;
                    if tc == 0 && vals.iter().any(|&v| v > 15) {
                        return Err(err("DC Huffman symbol over 15", at));
                    }
                    let mut h = Huff {
                        maxcode: [-1; 17],
                        valoff: [0; 17],
                        vals: [0; 256],
                    };
                    h.vals[..total].copy_from_slice(vals);
                    let (mut code, mut k) = (0i32, 0i32);
                    for (l, &c) in counts.iter().enumerate() {
                        let c = i32::from(c);
                        h.valoff[l + 1] = k - code;
                        code += c;
                        k += c;
                        if c > 0 {
                            h.maxcode[l + 1] = code - 1;
                        }
                        if code >= 1 << (l + 1) {
                            return Err(err("bad Huffman table (code lengths overflow)", at));
                        }
                        code <<= 1;
                    }
                    huffs[usize::from(tc) * 4 + th] = Some(h);
                    p += 17 + total;
                }
            }
            0xdd => {
                let r: [u8; 2] = d.try_into().map_err(|_| err("DRI length is not 4", at))?;
                restart = usize::from(u16::from_be_bytes(r));
            }
            0xc0..=0xc2 => {
                if frame.is_some() {
                    return Err(err("second SOF marker", at));
                }
                frame = Some(sof(d, m == 0xc2, at, bytes.len())?);
            }
            0xda => {
                let f = frame.as_mut().ok_or(err("SOS before SOF", at))?;
                pos = scan(bytes, pos, d, at, f, &huffs, restart)?;
                scans += 1;
            }
            0xc5..=0xcf | 0xe0..=0xef | 0xfe => {}
            _ => return Err(err("unknown marker", at)),
        }
    }
    let f = frame.ok_or(err("no SOF marker", pos))?;
    if scans == 0 {
        return Err(err("no scan", pos));
    }
    output(&f, &qt, &qset, jfif, adobe, pos)
}

fn sof(d: &[u8], progressive: bool, at: usize, file_len: usize) -> Result<Frame, ImageError> {
    let h = d.get(..6).ok_or(err("SOF segment too short", at))?;
    if h[0] != 8 {
        return Err(ImageError::Unsupported(
            "jpeg: sample precision other than 8 bits",
        ));
    }
    let height = usize::from(u16::from_be_bytes([h[1], h[2]]));
    let width = usize::from(u16::from_be_bytes([h[3], h[4]]));
    if height == 0 {
        return Err(ImageError::Unsupported("jpeg: height set by a DNL marker"));
    }
    check_size(width as u64, height as u64)?;
    let nc = usize::from(h[5]);
    if nc != 1 && nc != 3 {
        return Err(ImageError::Unsupported(
            "jpeg: components other than 1 or 3 (CMYK?)",
        ));
    }
    if d.len() != 6 + 3 * nc {
        return Err(err("SOF length does not match its components", at));
    }
    let mut comps = Vec::new();
    for c in d[6..].chunks_exact(3) {
        let (h, v, tq) = (
            usize::from(c[1] >> 4),
            usize::from(c[1] & 15),
            usize::from(c[2]),
        );
        if !(1..=4).contains(&h) || !(1..=4).contains(&v) || tq > 3 {
            return Err(err("bad component sampling factor or table", at));
        }
        comps.push(Comp {
            id: c[0],
            h,
            v,
            tq,
            bw: 0,
            bh: 0,
            coefs: Vec::new(),
            pred: 0,
            dc: 0,
            ac: 0,
        });
    }
    let hmax = comps.iter().map(|c| c.h).max().unwrap_or(1);
    let vmax = comps.iter().map(|c| c.v).max().unwrap_or(1);
    let (mcux, mcuy) = (width.div_ceil(8 * hmax), height.div_ceil(8 * vmax));
    // Every block's DC coefficient is coded at least once with at least one
    // bit: a file too short for that is rejected before allocating.
    let blocks: usize = comps
        .iter()
        .map(|c| (width * c.h).div_ceil(8 * hmax) * (height * c.v).div_ceil(8 * vmax))
        .sum();
    if blocks / 8 > file_len {
        return Err(err("file too short for the image size it declares", at));
    }
    for c in &mut comps {
        if hmax % c.h != 0 || vmax % c.v != 0 || hmax / c.h > 2 || vmax / c.v > 2 {
            return Err(ImageError::Unsupported(
                "jpeg: chroma subsampling other than 4:4:4, 4:2:2, 4:2:0, 4:4:0",
            ));
        }
        c.bw = mcux * c.h;
        c.bh = mcuy * c.v;
        c.coefs = filled(c.bw * c.bh * 64, 0i16)?;
    }
    Ok(Frame {
        width,
        height,
        progressive,
        comps,
        hmax,
        vmax,
        mcux,
        mcuy,
    })
}

/// Decodes one scan whose header is `d`; the entropy-coded data starts at
/// `pos`. Returns the position after it.
fn scan(
    bytes: &[u8],
    pos: usize,
    d: &[u8],
    at: usize,
    f: &mut Frame,
    huffs: &[Option<Huff>; 8],
    restart: usize,
) -> Result<usize, ImageError> {
    let ns = usize::from(*d.first().ok_or(err("SOS segment too short", at))?);
    if ns == 0 || ns > f.comps.len() || d.len() != 4 + 2 * ns {
        return Err(err("bad SOS segment length or component count", at));
    }
    let mut ids = [0usize; 4];
    for (i, c) in d[1..1 + 2 * ns].chunks_exact(2).enumerate() {
        let ci = f
            .comps
            .iter()
            .position(|x| x.id == c[0])
            .ok_or(err("SOS names an unknown component", at))?;
        if ids[..i].contains(&ci) {
            return Err(err("SOS names a component twice", at));
        }
        ids[i] = ci;
        let comp = &mut f.comps[ci];
        comp.dc = usize::from(c[1] >> 4);
        comp.ac = 4 + usize::from(c[1] & 15);
        if comp.dc > 3 || comp.ac > 7 {
            return Err(err("SOS Huffman table index over 3", at));
        }
        comp.pred = 0;
    }
    let ids = &ids[..ns];
    let t = &d[1 + 2 * ns..];
    let (ss, se, ah, al) = (usize::from(t[0]), usize::from(t[1]), t[2] >> 4, t[2] & 15);
    let ok = if f.progressive {
        ss <= se
            && se < 64
            && (ss == 0) == (se == 0)
            && (ss == 0 || ns == 1)
            && ah <= 13
            && al <= 13
    } else {
        ss == 0 && se == 63 && ah == 0 && al == 0
    };
    if !ok {
        return Err(err(
            "bad spectral selection or successive approximation",
            at,
        ));
    }
    if ns > 1
        && ids
            .iter()
            .map(|&i| f.comps[i].h * f.comps[i].v)
            .sum::<usize>()
            > 10
    {
        return Err(err("more than 10 blocks per MCU", at));
    }
    for &i in ids {
        let c = &f.comps[i];
        let need_dc = ss == 0 && ah == 0;
        if (need_dc && huffs[c.dc].is_none()) || (se > 0 && huffs[c.ac].is_none()) {
            return Err(err("scan uses an undefined Huffman table", at));
        }
    }
    let (ux, uy) = if ns == 1 {
        let c = &f.comps[ids[0]];
        (
            (f.width * c.h).div_ceil(f.hmax).div_ceil(8),
            (f.height * c.v).div_ceil(f.vmax).div_ceil(8),
        )
    } else {
        (f.mcux, f.mcuy)
    };
    let mut b = Bits {
        d: bytes,
        pos,
        acc: 0,
        n: 0,
    };
    let mut eobrun = 0u32;
    for m in 0..ux * uy {
        if restart != 0 && m > 0 && m % restart == 0 {
            b.n = 0;
            while bytes.get(b.pos) == Some(&0xff) && bytes.get(b.pos + 1) == Some(&0xff) {
                b.pos += 1;
            }
            match bytes.get(b.pos..b.pos + 2) {
                Some([0xff, 0xd0..=0xd7]) => b.pos += 2,
                _ => return Err(err("expected a restart marker", b.pos)),
            }
            eobrun = 0;
            for &i in ids {
                f.comps[i].pred = 0;
            }
        }
        let (mx, my) = (m % ux, m / ux);
        for &i in ids {
            let c = &mut f.comps[i];
            let (nh, nv) = if ns == 1 { (1, 1) } else { (c.h, c.v) };
            for by in 0..nv {
                for bx in 0..nh {
                    let blk = ((my * nv + by) * c.bw + mx * nh + bx) * 64;
                    let blk = c
                        .coefs
                        .get_mut(blk..blk + 64)
                        .ok_or(err("block outside the image", b.pos))?;
                    let dc = huffs[c.dc].as_ref();
                    let ac = huffs[c.ac].as_ref();
                    block(
                        &mut b,
                        blk,
                        &mut c.pred,
                        dc,
                        ac,
                        (ss, se, ah, al),
                        f.progressive,
                        &mut eobrun,
                    )?;
                }
            }
        }
    }
    Ok(b.pos)
}

#[allow(clippy::too_many_arguments)]
fn block(
    b: &mut Bits<'_>,
    blk: &mut [i16],
    pred: &mut i32,
    dc: Option<&Huff>,
    ac: Option<&Huff>,
    (ss, se, ah, al): (usize, usize, u8, u8),
    progressive: bool,
    eobrun: &mut u32,
) -> Result<(), ImageError> {
    let bad = || err("scan uses an undefined Huffman table", 0);
    if ss == 0 {
        if ah == 0 {
            let t = dc.ok_or_else(bad)?.decode(b)?;
            *pred = pred.wrapping_add(b.extend(t)?);
            blk[0] = pred.wrapping_shl(u32::from(al)) as i16;
        } else if b.bit()? == 1 {
            blk[0] |= 1 << al;
        }
        if progressive {
            return Ok(());
        }
    }
    let ac = ac.ok_or_else(bad)?;
    let mut k = ss.max(1);
    if ah == 0 {
        if *eobrun > 0 {
            *eobrun -= 1;
            return Ok(());
        }
        while k <= se {
            let rs = ac.decode(b)?;
            let (r, s) = (usize::from(rs >> 4), rs & 15);
            if s == 0 {
                if r < 15 {
                    if progressive {
                        *eobrun = (1 << r) - 1 + b.bits(r as u8)? as u32;
                    }
                    break;
                }
                k += 16;
                continue;
            }
            k += r;
            let z = *NATURAL
                .get(k)
                .filter(|_| k <= se)
                .ok_or(err("AC coefficient index past the block", b.pos))?;
            blk[usize::from(z)] = b.extend(s)?.wrapping_shl(u32::from(al)) as i16;
            k += 1;
        }
        return Ok(());
    }
    // Progressive AC refinement (libjpeg's decode_mcu_AC_refine).
    let p1 = 1i16 << al;
    let m1 = -1i16 << al;
    let refine = |b: &mut Bits<'_>, c: &mut i16| -> Result<(), ImageError> {
        if b.bit()? == 1 && *c & p1 == 0 {
            *c = c.wrapping_add(if *c >= 0 { p1 } else { m1 });
        }
        Ok(())
    };
    if *eobrun == 0 {
        while k <= se {
            let rs = ac.decode(b)?;
            let (mut r, s) = (i32::from(rs >> 4), rs & 15);
            let mut val = 0;
            if s != 0 {
                val = if b.bit()? == 1 { p1 } else { m1 };
            } else if r != 15 {
                *eobrun = (1 << r) + b.bits(r as u8)? as u32;
                break;
            }
            while k <= se {
                let c = &mut blk[usize::from(NATURAL[k])];
                if *c != 0 {
                    refine(b, c)?;
                } else {
                    r -= 1;
                    if r < 0 {
                        break;
                    }
                }
                k += 1;
            }
            if val != 0 && k <= se {
                blk[usize::from(NATURAL[k])] = val;
            }
            k += 1;
        }
    }
    if *eobrun > 0 {
        while k <= se {
            let c = &mut blk[usize::from(NATURAL[k])];
            if *c != 0 {
                refine(b, c)?;
            }
            k += 1;
        }
        *eobrun -= 1;
    }
    Ok(())
}

/// libjpeg's `jpeg_idct_islow` (8-bit): dequantizes `coef` with `q` and
/// writes the 8x8 samples at `out[0..]` with row stride `stride`.
fn idct(coef: &[i16], q: &[u16; 64], out: &mut [u8], stride: usize) {
    const F: [i64; 12] = [
        2446, 3196, 4433, 6270, 7373, 9633, 12299, 15137, 16069, 16819, 20995, 25172,
    ];
    // One 1-D pass over 8 values at in[i * s]; returns 8 outputs before descaling.
    fn pass(x: [i64; 8]) -> [i64; 8] {
        let z1 = (x[2] + x[6]) * F[2];
        let tmp2 = z1 - x[6] * F[7];
        let tmp3 = z1 + x[2] * F[3];
        let tmp0 = (x[0] + x[4]) << 13;
        let tmp1 = (x[0] - x[4]) << 13;
        let (t10, t13, t11, t12) = (tmp0 + tmp3, tmp0 - tmp3, tmp1 + tmp2, tmp1 - tmp2);
        let (o0, o1, o2, o3) = (x[7], x[5], x[3], x[1]);
        let (z1, z2, z3, z4) = (o0 + o3, o1 + o2, o0 + o2, o1 + o3);
        let z5 = (z3 + z4) * F[5];
        let (z1, z2) = (z1 * -F[4], z2 * -F[10]);
        let (z3, z4) = (z3 * -F[8] + z5, z4 * -F[1] + z5);
        let t0 = o0 * F[0] + z1 + z3;
        let t1 = o1 * F[9] + z2 + z4;
        let t2 = o2 * F[11] + z2 + z3;
        let t3 = o3 * F[6] + z1 + z4;
        [
            t10 + t3,
            t11 + t2,
            t12 + t1,
            t13 + t0,
            t13 - t0,
            t12 - t1,
            t11 - t2,
            t10 - t3,
        ]
    }
    let mut ws = [0i64; 64];
    for col in 0..8 {
        let x = core::array::from_fn(|r| i64::from(coef[r * 8 + col]) * i64::from(q[r * 8 + col]));
        for (r, v) in pass(x).into_iter().enumerate() {
            ws[r * 8 + col] = (v + (1 << 10)) >> 11;
        }
    }
    for (r, row) in ws.chunks_exact(8).enumerate() {
        let y = pass(core::array::from_fn(|c| row[c]));
        for (c, v) in y.into_iter().enumerate() {
            if let Some(o) = out.get_mut(r * stride + c) {
                *o = (((v + (1 << 17)) >> 18) + 128).clamp(0, 255) as u8;
            }
        }
    }
}

fn output(
    f: &Frame,
    qt: &[[u16; 64]; 4],
    qset: &[bool; 4],
    jfif: bool,
    adobe: Option<u8>,
    at: usize,
) -> Result<Rgb8, ImageError> {
    // Sample planes, whole blocks.
    let mut planes = Vec::new();
    for c in &f.comps {
        if !qset[c.tq] {
            return Err(err("component uses an undefined quantization table", at));
        }
        let pw = c.bw * 8;
        let mut p = filled(pw * c.bh * 8, 0u8)?;
        for (i, blk) in c.coefs.chunks_exact(64).enumerate() {
            let (bx, by) = (i % c.bw, i / c.bw);
            let o = by * 8 * pw + bx * 8;
            idct(blk, &qt[c.tq], &mut p[o..], pw);
        }
        planes.push(p);
    }
    let (w, h) = (f.width, f.height);
    let ids: Vec<u8> = f.comps.iter().map(|c| c.id).collect();
    let rgb = f.comps.len() == 3
        && if jfif {
            false
        } else if let Some(t) = adobe {
            t == 0
        } else {
            ids == b"RGB"
        };
    let mut out = filled(w * h * 3, 0u8)?;
    for (i, px) in out.chunks_exact_mut(3).enumerate() {
        let (x, y) = (i % w, i / w);
        let mut s = [0i32; 3];
        for ((c, p), s) in f.comps.iter().zip(&planes).zip(&mut s) {
            *s = sample(f, c, p, x, y);
        }
        let v = if f.comps.len() == 1 {
            [s[0]; 3]
        } else if rgb {
            s
        } else {
            let (y, cb, cr) = (s[0], s[1] - 128, s[2] - 128);
            [
                y + ((91881 * cr + 32768) >> 16),
                y + ((-22554 * cb - 46802 * cr + 32768) >> 16),
                y + ((116130 * cb + 32768) >> 16),
            ]
        };
        for (o, v) in px.iter_mut().zip(v) {
            *o = v.clamp(0, 255) as u8;
        }
    }
    Ok(Rgb8 {
        width: w as u32,
        height: h as u32,
        data: out,
    })
}

/// The component's sample at output pixel (x, y), upsampled as
/// libjpeg-turbo's fancy upsampling does (edges replicate the last real
/// sample; widths of 1-2 samples fall back to plain replication).
fn sample(f: &Frame, c: &Comp, p: &[u8], x: usize, y: usize) -> i32 {
    let (fx, fy) = (f.hmax / c.h, f.vmax / c.v);
    let cw = (f.width * c.h).div_ceil(f.hmax);
    let ch = (f.height * c.v).div_ceil(f.vmax);
    let pw = c.bw * 8;
    let at = |i: usize, j: usize| i32::from(p[j.min(ch - 1) * pw + i.min(cw - 1)]);
    let (i, j) = (x / fx, y / fy);
    // The neighbouring sample row (column) the triangle filter mixes in.
    let nj = if y.is_multiple_of(2) {
        j.saturating_sub(1)
    } else {
        j + 1
    };
    let ni = if x.is_multiple_of(2) {
        i.saturating_sub(1)
    } else {
        i + 1
    };
    match (fx, fy, cw > 2) {
        (1, 1, _) => at(i, j),
        (2, 1, true) => (3 * at(i, j) + at(ni, j) + 1 + (x as i32 & 1)) >> 2,
        (1, 2, _) => (3 * at(i, j) + at(i, nj) + 1 + (y as i32 & 1)) >> 2,
        (2, 2, true) => {
            let cs = |i| 3 * at(i, j) + at(i, nj);
            (3 * cs(i) + cs(ni) + 8 - (x as i32 & 1)) >> 4
        }
        _ => at(i, j),
    }
}
