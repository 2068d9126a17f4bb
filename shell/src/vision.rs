//! Images for Qwen3-VL models: preprocessed pixels through the vision
//! tower, `<|image_pad|>` placeholders expanded to each image's token
//! count, and the multimodal prefill.

use crate::cli::value;
use crate::pool::Pool;
use clap::{value_parser, Arg, ArgAction};
use kestrel_core::image::preprocess::{pixel_values, ImageProcessorConfig};
use kestrel_core::image::Rgb8;
use kestrel_core::kernels::Kernels;
use kestrel_core::model::config::VisionConfig;
use kestrel_core::model::forward::{forward_multimodal, Multimodal};
use kestrel_core::model::vision::{encode_image, mrope_positions, VisionLayout, VisionState};
use kestrel_core::model::weights::Weights;
use kestrel_core::parallel::Parallel;
use kestrel_core::state::{KvType, State};
use std::path::PathBuf;
use std::time::Instant;

/// `--image PATH` (repeatable) and `--image-max-pixels N` (run, logits).
pub fn image_args() -> [Arg; 2] {
    [
        value(
            "image",
            "PATH",
            "A JPEG or PNG image for the prompt (Qwen3-VL models; repeatable, in order).",
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
) -> Result<Pixels, String> {
    let img = crate::image::load_image(path)?;
    preprocess(&img, v, max_pixels).map_err(|e| format!("{}: {e}", path.display()))
}

/// Decodes image bytes (JPEG or PNG) and preprocesses them, as
/// [`load_pixels`] does a file (for images that arrive in a request).
pub fn pixels_from_bytes(
    bytes: &[u8],
    v: &VisionConfig,
    max_pixels: Option<u32>,
) -> Result<Pixels, String> {
    let img = kestrel_core::image::decode(bytes).map_err(|e| e.to_string())?;
    preprocess(&img, v, max_pixels)
}

/// The model's preprocessing (its stored settings; `max_pixels` lowers
/// the resize bound).
fn preprocess(img: &Rgb8, v: &VisionConfig, max_pixels: Option<u32>) -> Result<Pixels, String> {
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
    let [_, grid_h, grid_w] = pixel_values(img, &cfg, &mut values).map_err(|e| e.to_string())?;
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
) -> Result<Encoded, String> {
    if paths.is_empty() {
        return Ok(Encoded::default());
    }
    let v = w.cfg.vision.ok_or(
        "this model has no vision tower (convert a Qwen3-VL model without --text-only to use --image)",
    )?;
    let t = std::time::Instant::now();
    let pixels = paths
        .iter()
        .map(|p| load_pixels(p, &v, max_pixels))
        .collect::<Result<Vec<_>, _>>()?;
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
}

/// Runs every image through the vision tower.
pub fn encode<P: Parallel>(
    w: &Weights,
    k: &Kernels,
    pool: &P,
    images: &[Pixels],
    kv: KvType,
) -> Result<Encoded, String> {
    let v = w
        .cfg
        .vision
        .ok_or("this model has no vision tower (a Qwen3-VL file converted without --text-only takes images)")?;
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
    let layout = VisionLayout::new(&v, most, kv, threads).map_err(|e| e.to_string())?;
    let mut arena = Vec::new();
    arena.try_reserve_exact(layout.total).map_err(|_| {
        format!(
            "cannot allocate {} MB for the vision tower (image too large)",
            layout.total >> 20
        )
    })?;
    arena.resize(layout.total, 0);
    let mut s = VisionState::new(layout, &mut arena).map_err(|e| e.to_string())?;
    let mut per_image = Vec::new();
    for p in images {
        let tokens = p.grid_h * p.grid_w / (merge * merge);
        let mut embeds = vec![0f32; tokens * hidden];
        let mut deep = vec![0f32; levels * tokens * hidden];
        encode_image(
            w,
            &mut s,
            k,
            pool,
            &p.values,
            p.grid_h,
            p.grid_w,
            &mut embeds,
            &mut deep,
        )
        .map_err(|e| format!("vision tower: {e}"))?;
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
) -> Result<Vec<u32>, String> {
    let found = ids.iter().filter(|&&t| t == image_token).count();
    if found != grids.len() {
        return Err(format!(
            "the prompt has {found} <|image_pad|> placeholders for {} images",
            grids.len()
        ));
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

/// Feeds an expanded prompt with images in batches of the state's
/// max_batch and moves the state's rope_delta for the tokens that follow.
/// `on_logits` gets the last batch's logits (every batch's, when the state
/// keeps all logits).
pub fn prefill(
    w: &Weights,
    s: &mut State,
    k: &Kernels,
    pool: &Pool,
    ids: &[u32],
    images: &Encoded,
    mut on_logits: impl FnMut(&[f32]),
) -> Result<(), String> {
    let v = w.cfg.vision.ok_or("this model has no vision tower")?;
    let n = ids.len();
    let (mut pos, mut rows) = (vec![[0u32; 3]; n], vec![0u32; n]);
    let delta = mrope_positions(ids, v.image_token_id, &images.grids, &mut pos, &mut rows)
        .map_err(|e| e.to_string())?;
    // Positions continue from the rotary position of the next token.
    let base = u32::try_from(s.pos as i64 + s.rope_delta[0])
        .map_err(|_| "context too long".to_string())?;
    for p in pos.iter_mut() {
        for x in p.iter_mut() {
            *x = x.checked_add(base).ok_or("context too long")?;
        }
    }
    let batch = s.opts.max_batch;
    let mut at = 0;
    while at < n {
        let end = (at + batch).min(n);
        let mm = Multimodal {
            positions: &pos[at..end],
            image_rows: &rows[at..end],
            embeds: &images.embeds,
            deepstack: &images.deepstack,
        };
        // Only the last batch's logits are read unless the state keeps all.
        let logits = end == n || s.opts.all_logits;
        let l = forward_multimodal(w, s, k, pool, &ids[at..end], &mm, logits)
            .map_err(|e| e.to_string())?;
        if logits {
            on_logits(l);
        }
        at = end;
    }
    s.rope_delta[0] += delta;
    Ok(())
}
