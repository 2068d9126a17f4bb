//! Qwen2-VL / Qwen3-VL image preprocessing, as transformers'
//! `Qwen2VLImageProcessorFast` (torchvision backend) computes it:
//! [`smart_resize`] picks the size, [`resize_bicubic`] resizes as
//! torchvision's `resize(uint8, BICUBIC, antialias=True)` does on the CPU
//! (PyTorch's separable antialiased bicubic, a = -0.5, with int16 fixed-point
//! weights, horizontal pass first, uint8 between the passes), then
//! [`pixel_values`] rescales, normalizes and cuts the patches.

use super::{check_size, filled, ImageError, Rgb8};
use crate::json;
use alloc::vec::Vec;

/// What a `preprocessor_config.json` says about images.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImageProcessorConfig {
    /// Side of a vision patch, in pixels.
    pub patch_size: u32,
    /// Frames per patch in time (a still image is repeated).
    pub temporal_patch_size: u32,
    /// Patches merged per side into one LLM token.
    pub merge_size: u32,
    /// Least pixel count after resizing (`size.shortest_edge`).
    pub min_pixels: u64,
    /// Most pixel count after resizing (`size.longest_edge`).
    pub max_pixels: u64,
    /// Per-channel mean (after rescaling).
    pub image_mean: [f32; 3],
    /// Per-channel standard deviation (after rescaling).
    pub image_std: [f32; 3],
    /// Factor from uint8 to [0, 1], normally 1/255.
    pub rescale_factor: f64,
}

fn cfg_err(what: &'static str) -> ImageError {
    ImageError::Config(what)
}

impl ImageProcessorConfig {
    /// Reads a `preprocessor_config.json`. Missing keys take transformers'
    /// defaults for `Qwen2VLImageProcessor`; `min_pixels` / `max_pixels` at
    /// the top level (older files) override `size`.
    #[allow(clippy::excessive_precision)] // transformers' OPENAI_CLIP_MEAN / _STD, as written
    pub fn from_json(bytes: &[u8]) -> Result<Self, ImageError> {
        let v = json::parse(bytes).map_err(|_| cfg_err("preprocessor config is not valid JSON"))?;
        let size = v.get("size");
        let int = |k: &str, d: u64| match v.get(k) {
            None => Ok(d),
            Some(x) => x
                .as_u64()
                .ok_or(cfg_err("an integer key is not an integer")),
        };
        let pick = |top: &str, a: &str, b: &str, d: u64| -> Result<u64, ImageError> {
            let s = size.and_then(|s| s.get(a).or_else(|| s.get(b)));
            match v.get(top).or(s) {
                None => Ok(d),
                Some(x) => x
                    .as_u64()
                    .ok_or(cfg_err("min/max pixels is not an integer")),
            }
        };
        let three = |k: &str, d: [f32; 3]| -> Result<[f32; 3], ImageError> {
            let Some(a) = v.get(k) else { return Ok(d) };
            let a = a.as_array().filter(|a| a.len() == 3);
            let mut out = [0.0; 3];
            for (i, o) in out.iter_mut().enumerate() {
                *o = a
                    .and_then(|a| a.get(i))
                    .and_then(|x| x.as_f64())
                    .ok_or(cfg_err("image_mean / image_std is not 3 numbers"))?
                    as f32;
            }
            Ok(out)
        };
        for k in ["do_rescale", "do_normalize", "do_resize"] {
            if v.get(k).and_then(|x| x.as_bool()) == Some(false) {
                return Err(cfg_err(
                    "do_rescale, do_normalize and do_resize must be true",
                ));
            }
        }
        let small = |x: u64| u32::try_from(x).map_err(|_| cfg_err("patch size over u32"));
        let cfg = Self {
            patch_size: small(int("patch_size", 14)?)?,
            temporal_patch_size: small(int("temporal_patch_size", 2)?)?,
            merge_size: small(int("merge_size", 2)?)?,
            min_pixels: pick("min_pixels", "shortest_edge", "min_pixels", 56 * 56)?,
            max_pixels: pick("max_pixels", "longest_edge", "max_pixels", 28 * 28 * 1280)?,
            image_mean: three("image_mean", [0.48145466, 0.4578275, 0.40821073])?,
            image_std: three("image_std", [0.26862954, 0.26130258, 0.27577711])?,
            rescale_factor: match v.get("rescale_factor") {
                None => 1.0 / 255.0,
                Some(x) => x
                    .as_f64()
                    .ok_or(cfg_err("rescale_factor is not a number"))?,
            },
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the values are usable: patch 1..=1024, merge 1..=16, temporal
    /// 1..=16, finite mean, nonzero finite std, positive rescale factor.
    pub fn validate(&self) -> Result<(), ImageError> {
        let ok = (1..=1024).contains(&self.patch_size)
            && (1..=16).contains(&self.merge_size)
            && (1..=16).contains(&self.temporal_patch_size)
            && self.image_mean.iter().all(|m| m.is_finite())
            && self.image_std.iter().all(|s| s.is_finite() && *s != 0.0)
            && self.rescale_factor.is_finite()
            && self.rescale_factor > 0.0;
        if ok {
            Ok(())
        } else {
            Err(cfg_err(
                "patch/merge/temporal size, mean, std or rescale factor out of range",
            ))
        }
    }
}

/// transformers' `qwen2_vl.smart_resize`: the (height, width) closest to the
/// input's, multiples of `factor`, with a pixel count in
/// `min_pixels..=max_pixels` (Python's round-half-even, floor and ceil in
/// f64). Errors on an aspect ratio over 200 and on a result that is empty or
/// over the decoder limits.
pub fn smart_resize(
    height: u32,
    width: u32,
    factor: u32,
    min_pixels: u64,
    max_pixels: u64,
) -> Result<(u32, u32), ImageError> {
    if height == 0 || width == 0 || factor == 0 {
        return Err(cfg_err("zero image size or factor"));
    }
    let (h, w, f) = (f64::from(height), f64::from(width), f64::from(factor));
    if h.max(w) / h.min(w) > 200.0 {
        return Err(cfg_err("aspect ratio over 200"));
    }
    let mut hb = libm::rint(h / f) * f;
    let mut wb = libm::rint(w / f) * f;
    if hb * wb > max_pixels as f64 {
        let beta = libm::sqrt(h * w / max_pixels as f64);
        hb = f.max(libm::floor(h / beta / f) * f);
        wb = f.max(libm::floor(w / beta / f) * f);
    } else if hb * wb < min_pixels as f64 {
        let beta = libm::sqrt(min_pixels as f64 / (h * w));
        hb = libm::ceil(h * beta / f) * f;
        wb = libm::ceil(w * beta / f) * f;
    }
    // A NaN or an out-of-range size fails here (casts saturate).
    check_size(wb as u64, hb as u64).map_err(|_| cfg_err("resized size empty or too large"))?;
    Ok((hb as u32, wb as u32))
}

/// Fixed-point weights of one axis: per output, the first input index and
/// `k` int16 weights; and the precision in bits.
struct Axis {
    first: Vec<usize>,
    w: Vec<i16>,
    k: usize,
    bits: u32,
}

/// PyTorch's `_compute_indices_min_size_weights_aa` for the antialiased
/// bicubic filter (a = -0.5), then `compute_index_ranges_int16_weights`.
fn axis(insz: usize, outsz: usize) -> Result<Axis, ImageError> {
    let filter = |x: f64| {
        let (a, x) = (-0.5, libm::fabs(x));
        if x < 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        } else {
            0.0
        }
    };
    let scale = insz as f64 / outsz as f64;
    let (support, inv) = if scale >= 1.0 {
        (2.0 * scale, 1.0 / scale)
    } else {
        (2.0, 1.0)
    };
    let k = libm::ceil(support) as usize * 2 + 1;
    let mut wf = filled(outsz.checked_mul(k).ok_or(ImageError::OutOfMemory)?, 0f64)?;
    let mut first = filled(outsz, 0usize)?;
    let mut wmax = 0f64;
    for (i, (ws, first)) in wf.chunks_exact_mut(k).zip(&mut first).enumerate() {
        let center = scale * (i as f64 + 0.5);
        let xmin = ((center - support + 0.5) as i64).max(0);
        let xsize = ((center + support + 0.5) as i64).min(insz as i64) - xmin;
        let xsize = xsize.clamp(0, k as i64) as usize;
        let mut total = 0.0;
        for (j, w) in ws[..xsize].iter_mut().enumerate() {
            *w = filter(((j as i64 + xmin) as f64 - center + 0.5) * inv);
            total += *w;
        }
        if total != 0.0 {
            for w in &mut ws[..xsize] {
                *w /= total;
                wmax = wmax.max(*w);
            }
        }
        *first = xmin as usize;
    }
    let mut bits = 0;
    while bits < 22 && ((0.5 + wmax * f64::from(2u32 << bits)) as i32) < 1 << 15 {
        bits += 1;
    }
    let bits = bits.max(1);
    let scale = f64::from(1u32 << bits);
    let mut w = filled(wf.len(), 0i16)?;
    for (o, &x) in w.iter_mut().zip(&wf) {
        let v = x * scale;
        *o = if v < 0.0 {
            (v - 0.5) as i32
        } else {
            (v + 0.5) as i32
        } as i16;
    }
    Ok(Axis { first, w, k, bits })
}

/// One separable pass over `lines` lines, resampled along each line: line
/// `l`, sample `i` is at `l * line.0 + i * step.0` in `src` (`.1`: `dst`).
fn pass(
    src: &[u8],
    dst: &mut [u8],
    ax: &Axis,
    lines: usize,
    line: (usize, usize),
    step: (usize, usize),
) {
    for l in 0..lines {
        for (o, (&first, ws)) in ax.first.iter().zip(ax.w.chunks_exact(ax.k)).enumerate() {
            let mut acc = 1i32 << (ax.bits - 1);
            for (j, &w) in ws.iter().enumerate() {
                let s = l * line.0 + (first + j) * step.0;
                if let Some(&x) = src.get(s) {
                    if w != 0 {
                        acc = acc.wrapping_add(i32::from(x) * i32::from(w));
                    }
                }
            }
            if let Some(d) = dst.get_mut(l * line.1 + o * step.1) {
                *d = (acc >> ax.bits).clamp(0, 255) as u8;
            }
        }
    }
}

/// Resizes to `width` x `height` as torchvision's
/// `resize(uint8 tensor, BICUBIC, antialias=True)` on the CPU.
pub fn resize_bicubic(img: &Rgb8, width: u32, height: u32) -> Result<Rgb8, ImageError> {
    let npix = check_size(u64::from(width), u64::from(height))?;
    let (iw, ih) = (img.width as usize, img.height as usize);
    if img.data.len() != iw * ih * 3 {
        return Err(cfg_err("image data length is not width * height * 3"));
    }
    let (ow, oh) = (width as usize, height as usize);
    let mut cur = img.data.clone();
    if ow != iw {
        let ax = axis(iw, ow)?;
        let mut next = filled(ih * ow * 3, 0u8)?;
        for c in 0..3 {
            pass(&cur[c..], &mut next[c..], &ax, ih, (iw * 3, ow * 3), (3, 3));
        }
        cur = next;
    }
    if oh != ih {
        let ax = axis(ih, oh)?;
        let mut next = filled(npix * 3, 0u8)?;
        // Lines are columns: one per (x, channel).
        pass(&cur, &mut next, &ax, ow * 3, (1, 1), (ow * 3, ow * 3));
        cur = next;
    }
    Ok(Rgb8 {
        width,
        height,
        data: cur,
    })
}

/// Qwen-VL `pixel_values` of one still image: resized by [`smart_resize`]
/// (factor `patch_size * merge_size`) with [`resize_bicubic`], then
/// `(x - mean / r) / (std / r)` in f32 (`r` the rescale factor, fused as
/// transformers does), cut into `grid_h * grid_w` rows of
/// `3 * temporal_patch_size * patch_size^2` floats, the rows in merge-block
/// order (block row, block column, row in block, column in block) and each
/// row as (channel, time, y, x), the image repeated in time. Replaces `out`;
/// returns the grid `[t, h, w]` in patches.
pub fn pixel_values(
    img: &Rgb8,
    cfg: &ImageProcessorConfig,
    out: &mut Vec<f32>,
) -> Result<[u32; 3], ImageError> {
    cfg.validate()?;
    let (p, m, t) = (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size);
    let factor = p * m;
    let (rh, rw) = smart_resize(
        img.height,
        img.width,
        factor,
        cfg.min_pixels,
        cfg.max_pixels,
    )?;
    let resized;
    let img = if (rh, rw) == (img.height, img.width) {
        img
    } else {
        resized = resize_bicubic(img, rw, rh)?;
        &resized
    };
    let (p, m, t) = (p as usize, m as usize, t as usize);
    let (w, h) = (img.width as usize, img.height as usize);
    if img.data.len() != w * h * 3 {
        return Err(cfg_err("image data length is not width * height * 3"));
    }
    let (gh, gw) = (h / p, w / p);
    let cols = 3 * t * p * p;
    let len = (gh * gw).checked_mul(cols).ok_or(ImageError::OutOfMemory)?;
    out.clear();
    out.try_reserve_exact(len)
        .map_err(|_| ImageError::OutOfMemory)?;
    out.resize(len, 0.0);
    let inv = (1.0 / cfg.rescale_factor) as f32;
    let mean = cfg.image_mean.map(|x| x * inv);
    let std = cfg.image_std.map(|x| x * inv);
    for (i, px) in img.data.chunks_exact(3).enumerate() {
        let (y, x) = (i / w, i % w);
        let (pr, pc) = (y / p, x / p);
        let row = ((pr / m * (gw / m) + pc / m) * m + pr % m) * m + pc % m;
        for (c, &v) in px.iter().enumerate() {
            let v = (f32::from(v) - mean[c]) / std[c];
            for tt in 0..t {
                let o = row * cols + ((c * t + tt) * p + y % p) * p + x % p;
                if let Some(d) = out.get_mut(o) {
                    *d = v;
                }
            }
        }
    }
    Ok([1, gh as u32, gw as u32])
}
