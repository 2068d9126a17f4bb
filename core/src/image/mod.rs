//! Image input for vision models (feature `alloc`): PNG and JPEG decoding to
//! 8-bit RGB, and the Qwen2-VL / Qwen3-VL preprocessing ([`preprocess`]).
//!
//! Every decoder reads untrusted bytes: sizes are checked before anything is
//! allocated (at most [`MAX_SIDE`] pixels a side and [`MAX_PIXELS`] pixels),
//! allocations are fallible (`try_reserve`), and any malformed input is an
//! [`ImageError`] naming what is wrong, never a panic.

use alloc::vec::Vec;
use core::fmt;

mod inflate;
mod jpeg;
mod png;
pub mod preprocess;

pub use preprocess::{pixel_values, resize_bicubic, smart_resize, ImageProcessorConfig};

/// Largest width or height accepted.
pub const MAX_SIDE: u32 = 16384;
/// Largest number of pixels accepted (64 Mpixel).
pub const MAX_PIXELS: u64 = 64 << 20;

/// An 8-bit RGB image, rows top to bottom, `(height, width, 3)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgb8 {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `height * width * 3` bytes, R G B per pixel.
    pub data: Vec<u8>,
}

/// What is wrong with an image or a preprocessing request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageError {
    /// The bytes start with neither the PNG nor the JPEG signature.
    UnknownFormat,
    /// A malformed PNG file.
    Png {
        /// What is wrong.
        what: &'static str,
        /// Byte offset in the file (for zlib errors: in the zlib stream).
        at: usize,
    },
    /// A malformed JPEG file.
    Jpeg {
        /// What is wrong.
        what: &'static str,
        /// Byte offset in the file.
        at: usize,
    },
    /// A valid file using a feature this decoder does not implement.
    Unsupported(&'static str),
    /// Width or height is zero, above [`MAX_SIDE`], or the pixel count is
    /// above [`MAX_PIXELS`].
    BadSize {
        /// Width declared.
        width: u64,
        /// Height declared.
        height: u64,
    },
    /// An allocation failed.
    OutOfMemory,
    /// A bad preprocessing configuration or request.
    Config(&'static str),
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownFormat => f.write_str("image: not a PNG or JPEG file"),
            Self::Png { what, at } => write!(f, "png: {what} (at byte {at})"),
            Self::Jpeg { what, at } => write!(f, "jpeg: {what} (at byte {at})"),
            Self::Unsupported(what) => write!(f, "unsupported image: {what}"),
            Self::BadSize { width, height } => write!(
                f,
                "image: size {width}x{height} is outside 1..={MAX_SIDE} a side and {MAX_PIXELS} pixels"
            ),
            Self::OutOfMemory => f.write_str("image: out of memory"),
            Self::Config(what) => write!(f, "image preprocessing: {what}"),
        }
    }
}

/// Decodes a PNG or JPEG file (sniffed by its signature) to RGB.
pub fn decode(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png::decode(bytes)
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        jpeg::decode(bytes)
    } else {
        Err(ImageError::UnknownFormat)
    }
}

/// Checks a declared size against the limits; returns the pixel count.
pub(crate) fn check_size(width: u64, height: u64) -> Result<usize, ImageError> {
    let max = u64::from(MAX_SIDE);
    if width == 0 || height == 0 || width > max || height > max || width * height > MAX_PIXELS {
        return Err(ImageError::BadSize { width, height });
    }
    // At most 2^26 pixels: fits any usize of 32 bits or more, times 3 too.
    usize::try_from(width * height).map_err(|_| ImageError::BadSize { width, height })
}

/// A vector of `n` copies of `v`, or `OutOfMemory`.
pub(crate) fn filled<T: Clone>(n: usize, v: T) -> Result<Vec<T>, ImageError> {
    let mut out = Vec::new();
    out.try_reserve_exact(n)
        .map_err(|_| ImageError::OutOfMemory)?;
    out.resize(n, v);
    Ok(out)
}
