//! Image decoding (PNG / JPEG), then on success the Qwen-VL preprocessing
//! with the dev_qwen3_vl fixture's config (patch 16, merge 2, min 1024 and
//! max 16 Mpixel), capped so one input stays fast: images above 1 Mpixel skip
//! the preprocessing, and max_pixels is lowered to 1 Mpixel.
#![no_main]

use kestrel_core::image::{decode, pixel_values, ImageProcessorConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(img) = decode(data) else { return };
    assert_eq!(img.data.len(), img.width as usize * img.height as usize * 3);
    if u64::from(img.width) * u64::from(img.height) > 1 << 20 {
        return;
    }
    let cfg = ImageProcessorConfig {
        patch_size: 16,
        temporal_patch_size: 2,
        merge_size: 2,
        min_pixels: 1024,
        max_pixels: 1 << 20,
        image_mean: [0.5; 3],
        image_std: [0.5; 3],
        rescale_factor: 1.0 / 255.0,
    };
    let mut out = Vec::new();
    if let Ok(grid) = pixel_values(&img, &cfg, &mut out) {
        let n = grid.iter().map(|&g| g as usize).product::<usize>();
        assert_eq!(out.len(), n * 3 * 2 * 16 * 16);
    }
});
