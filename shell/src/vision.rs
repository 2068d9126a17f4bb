//! Images for Qwen3-VL and Qwen3.5 models: preprocessed pixels through the vision
//! tower, `<|image_pad|>` placeholders expanded to each image's token
//! count (the multimodal prefill itself is the core's
//! `generate::prefill`).

use crate::cli::value;
use crate::error::{Context, Result};
use crate::pool::Pool;
use clap::{value_parser, Arg, ArgAction};
use kestrel_core::config::VisionConfig;
use kestrel_core::generate::PromptImages;
use kestrel_core::image::preprocess::{pixel_values, ImageProcessorConfig};
use kestrel_core::image::Rgb8;
use kestrel_core::kernels::Kernels;
use kestrel_core::model::linear::Exec;
use kestrel_core::model::vision::{encode_image, Patches, VisionArenaSizes, VisionState};
use kestrel_core::model::weights::Weights;
use kestrel_core::parallel::Parallel;
use kestrel_core::state::KvType;
use std::path::PathBuf;
use std::time::Instant;

/// `--image PATH` (repeatable) and `--image-max-pixels N` (run, logits).
pub fn image_args() -> [Arg; 2] {
    [
        value(
            "image",
            "PATH",
            "A JPEG or PNG image for the prompt (Qwen3-VL and Qwen3.5 models; repeatable, in order).",
        )
        .action(ArgAction::Append)
        .value_parser(value_parser!(PathBuf)),
        value(
            "image-max-pixels",
            "N",
            "Resize images to at most N pixels (default: the model's max_pixels).",
        )
        .value_parser(value_parser!(u32)),
    ]
}

/// One preprocessed image: (patches, 3 T P P) pixel values in merge-block
/// order and its grid in patches.
pub struct Pixels {
    pub values: Vec<f32>,
    pub grid_h: usize,
    pub grid_w: usize,
}

/// Reads, decodes and preprocesses an image file for the model's vision
/// tower (its stored preprocessor settings; `max_pixels` lowers the resize
/// bound).
pub fn load_pixels(
    path: &std::path::Path,
    v: &VisionConfig,
    max_pixels: Option<u32>,
) -> Result<Pixels> {
    let img = crate::image::load_image(path)?;
    preprocess(&img, v, max_pixels).with_context(|| path.display())
}

/// Decodes image bytes (JPEG or PNG) and preprocesses them, as
/// [`load_pixels`] does a file (for images that arrive in a request).
pub fn pixels_from_bytes(
    bytes: &[u8],
    v: &VisionConfig,
    max_pixels: Option<u32>,
) -> Result<Pixels> {
    let img = kestrel_core::image::decode(bytes)?;
    preprocess(&img, v, max_pixels)
}

/// The model's preprocessing (its stored settings; `max_pixels` lowers
/// the resize bound).
fn preprocess(img: &Rgb8, v: &VisionConfig, max_pixels: Option<u32>) -> Result<Pixels> {
    let cfg = ImageProcessorConfig {
        patch_size: v.patch_size,
        temporal_patch_size: v.temporal_patch,
        merge_size: v.spatial_merge,
        min_pixels: v.min_pixels as u64,
        max_pixels: max_pixels
            .map_or(v.max_pixels, |m| m.max(v.min_pixels))
            .min(v.max_pixels) as u64,
        image_mean: v.image_mean,
        image_std: v.image_std,
        rescale_factor: v.rescale_factor as f64,
    };
    let mut values = Vec::new();
    let [_, grid_h, grid_w] = pixel_values(img, &cfg, &mut values)?;
    Ok(Pixels {
        values,
        grid_h: grid_h as usize,
        grid_w: grid_w as usize,
    })
}

/// Loads and encodes the images of `paths` for `w`'s vision tower; says
/// the encode time on stderr.
pub fn encode_files(
    w: &Weights,
    k: &Kernels,
    pool: &Pool,
    paths: &[std::path::PathBuf],
    max_pixels: Option<u32>,
    kv: KvType,
) -> Result<Encoded> {
    if paths.is_empty() {
        return Ok(Encoded::default());
    }
    let v = w.cfg.vision.ok_or(
        "this model has no vision tower (convert a Qwen3-VL or Qwen3.5 model without --text-only to use --image)",
    )?;
    let t = std::time::Instant::now();
    let mut pixels = Vec::with_capacity(paths.len());
    for p in paths {
        pixels.push(load_pixels(p, &v, max_pixels)?);
    }
    let decode_s = t.elapsed().as_secs_f64();
    let out = encode(w, k, pool, &pixels, kv)?;
    let patches: usize = pixels.iter().map(|p| p.grid_h * p.grid_w).sum();
    eprintln!(
        "[kestrel] {} image(s): {patches} patches -> {} tokens; decode+preprocess {:.0} ms, vision encode {:.0} ms",
        paths.len(),
        out.tokens(),
        decode_s * 1e3,
        out.seconds * 1e3
    );
    Ok(out)
}

/// The vision tower's output for the images of one prompt.
#[derive(Default)]
pub struct Encoded {
    /// Each image's merged token grid (rows, cols).
    pub grids: Vec<(usize, usize)>,
    /// (image tokens, hidden), all images in order.
    pub embeds: Vec<f32>,
    /// (levels, image tokens, hidden).
    pub deepstack: Vec<f32>,
    /// Seconds spent in the vision tower.
    pub seconds: f64,
}

impl Encoded {
    /// Image tokens over all images.
    pub fn tokens(&self) -> usize {
        self.grids.iter().map(|(r, c)| r * c).sum()
    }

    /// The images for the core's prefill of a prompt of `n` tokens (None
    /// without images), with `scratch` sized for its M-RoPE rows.
    pub fn for_prompt<'a>(
        &'a self,
        n: usize,
        scratch: &'a mut MropeScratch,
    ) -> Option<PromptImages<'a>> {
        if self.grids.is_empty() {
            return None;
        }
        scratch.positions.resize(n, [0; 3]);
        scratch.image_rows.resize(n, 0);
        Some(PromptImages {
            grids: &self.grids,
            embeds: &self.embeds,
            deepstack: &self.deepstack,
            positions: &mut scratch.positions,
            image_rows: &mut scratch.image_rows,
        })
    }
}

/// Memory for a prompt's M-RoPE positions and image rows.
#[derive(Default)]
pub struct MropeScratch {
    positions: Vec<[u32; 3]>,
    image_rows: Vec<u32>,
}

/// Runs every image through the vision tower.
pub fn encode<P: Parallel>(
    w: &Weights,
    k: &Kernels,
    pool: &P,
    images: &[Pixels],
    kv: KvType,
) -> Result<Encoded> {
    let v = w
        .cfg
        .vision
        .ok_or("this model has no vision tower (a Qwen3-VL or Qwen3.5 file converted without --text-only takes images)")?;
    let t = Instant::now();
    let hidden = v.out_hidden as usize;
    let levels = v.deepstack().len();
    let merge = v.spatial_merge as usize;
    let most = images
        .iter()
        .map(|p| p.grid_h * p.grid_w)
        .max()
        .unwrap_or(0);
    let mut out = Encoded::default();
    if most == 0 {
        return Ok(out);
    }
    let threads = pool.threads();
    let layout = VisionArenaSizes::new(&v, most, kv, threads)?;
    let mut arena = Vec::new();
    arena.try_reserve_exact(layout.total).map_err(|_| {
        format!(
            "cannot allocate {} MB for the vision tower (image too large)",
            layout.total >> 20
        )
    })?;
    arena.resize(layout.total, 0);
    let mut s = VisionState::new(layout, &mut arena)?;
    let cx = Exec { kernels: k, pool };
    let mut per_image = Vec::new();
    for p in images {
        let tokens = p.grid_h * p.grid_w / (merge * merge);
        let mut embeds = vec![0f32; tokens * hidden];
        let mut deep = vec![0f32; levels * tokens * hidden];
        let image = Patches {
            values: &p.values,
            grid_h: p.grid_h,
            grid_w: p.grid_w,
        };
        encode_image(w, &mut s, &cx, image, &mut embeds, &mut deep).context("vision tower")?;
        out.grids.push((p.grid_h / merge, p.grid_w / merge));
        out.embeds.extend_from_slice(&embeds);
        per_image.push(deep);
    }
    // DeepStack as (levels, all image tokens, hidden).
    for l in 0..levels {
        for d in &per_image {
            let tokens = d.len() / levels.max(1) / hidden;
            out.deepstack
                .extend_from_slice(&d[l * tokens * hidden..(l + 1) * tokens * hidden]);
        }
    }
    out.seconds = t.elapsed().as_secs_f64();
    Ok(out)
}

/// `ids` with the `k`-th `<|image_pad|>` repeated to image `k`'s token count.
pub fn expand_placeholders(
    ids: &[u32],
    image_token: u32,
    grids: &[(usize, usize)],
) -> Result<Vec<u32>> {
    let found = ids.iter().filter(|&&t| t == image_token).count();
    if found != grids.len() {
        return Err(format!(
            "the prompt has {found} <|image_pad|> placeholders for {} images",
            grids.len()
        )
        .into());
    }
    let mut out = Vec::with_capacity(ids.len() + grids.iter().map(|(r, c)| r * c).sum::<usize>());
    let mut k = 0;
    for &t in ids {
        if t == image_token {
            let (r, c) = grids[k];
            out.extend(std::iter::repeat_n(image_token, r * c));
            k += 1;
        } else {
            out.push(t);
        }
    }
    Ok(out)
}
