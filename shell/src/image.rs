//! Image files for vision models: read a PNG or JPEG and decode it to RGB
//! with the core's decoders (`kestrel_core::image`).

use crate::error::{Context, Result};
use kestrel_core::image::{decode, Rgb8};
use std::io::Read;
use std::path::Path;

/// Largest image file read (256 MiB): far above any image within the
/// decoders' 64 Mpixel limit, it keeps a wrong path (a device, a model
/// file) from being read whole.
pub const MAX_IMAGE_FILE: u64 = 256 << 20;

/// Reads and decodes the image at `path`. The error names the file and what
/// is wrong with it, on one line.
pub fn load_image(path: &Path) -> Result<Rgb8> {
    let shown = path.display();
    let file = std::fs::File::open(path).with_context(|| shown.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_IMAGE_FILE + 1)
        .read_to_end(&mut bytes)
        .with_context(|| shown.to_string())?;
    if bytes.len() as u64 > MAX_IMAGE_FILE {
        return Err(format!("{shown}: image file over {MAX_IMAGE_FILE} bytes").into());
    }
    decode(&bytes).with_context(|| shown.to_string())
}
