//! Image decoding (PNG, JPEG) and the Qwen3-VL preprocessing against
//! references: the dev_qwen3_vl fixture's PNGs and pixel_values
//! (transformers' Qwen2VLImageProcessor, torchvision backend), and the
//! vectors of tests/vectors/image (JPEGs decoded by Pillow/libjpeg-turbo,
//! hand-made PNGs; see gen.py there). Malformed inputs must give errors,
//! never panics.

use kestrel_core::image::{
    decode, pixel_values, resize_bicubic, smart_resize, ImageError, ImageProcessorConfig, Rgb8,
};
use kestrel_tests::{fixtures, read_npy_f32};
use std::path::{Path, PathBuf};

fn vl() -> PathBuf {
    fixtures().join("dev_qwen3_vl")
}

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors/image")
}

/// A uint8 `.npy` file: (shape, bytes).
fn read_npy_u8(path: &Path) -> (Vec<usize>, Vec<u8>) {
    kestrel_tests::read_npy(path, "|u1")
}

fn config() -> ImageProcessorConfig {
    let bytes = std::fs::read(vl().join("hf/preprocessor_config.json")).unwrap();
    ImageProcessorConfig::from_json(&bytes).unwrap()
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn fixture_pngs_decode_to_the_reference_pixels() {
    for name in ["image_a", "image_b"] {
        let img =
            decode(&std::fs::read(vl().join("ref").join(format!("{name}.png"))).unwrap()).unwrap();
        let (shape, want) = read_npy_u8(&vl().join("ref").join(format!("{name}_u8_hwc.npy")));
        assert_eq!(
            shape,
            [img.height as usize, img.width as usize, 3],
            "{name}"
        );
        assert!(img.data == want, "{name}: pixels differ");
    }
}

#[test]
fn config_from_json() {
    let c = config();
    assert_eq!(
        (
            c.patch_size,
            c.temporal_patch_size,
            c.merge_size,
            c.min_pixels,
            c.max_pixels
        ),
        (16, 2, 2, 1024, 16777216)
    );
    assert_eq!((c.image_mean, c.image_std), ([0.5; 3], [0.5; 3]));
    assert!((c.rescale_factor - 1.0 / 255.0).abs() < 1e-15);
    // Older files: min_pixels / max_pixels at the top level win over size.
    let old = br#"{"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
        "size": {"shortest_edge": 1, "longest_edge": 2}, "merge_size": 2, "temporal_patch_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}"#;
    let c = ImageProcessorConfig::from_json(old).unwrap();
    assert_eq!(
        (c.patch_size, c.min_pixels, c.max_pixels),
        (14, 3136, 12845056)
    );
    for bad in [
        &b"{"[..],
        br#"{"patch_size": 0}"#,
        br#"{"patch_size": -3}"#,
        br#"{"merge_size": 99}"#,
        br#"{"image_mean": [1, 2]}"#,
        br#"{"image_std": [1, 0, 1]}"#,
        br#"{"rescale_factor": "x"}"#,
        br#"{"do_normalize": false}"#,
    ] {
        let e = ImageProcessorConfig::from_json(bad).unwrap_err();
        assert!(matches!(e, ImageError::Config(_)), "{e}");
    }
}

#[test]
fn smart_resize_matches_transformers() {
    // (h, w, factor, min, max) -> transformers 4.57 qwen2_vl.smart_resize
    for (args, want) in [
        ((28, 90, 32, 1024, 16777216), (32, 96)),
        ((96, 64, 32, 1024, 16777216), (96, 64)),
        ((1080, 1920, 28, 3136, 1003520), (728, 1316)),
        ((1080, 1920, 32, 65536, 16777216), (1088, 1920)),
        ((4000, 3000, 32, 65536, 1048576), (1152, 864)),
        ((10, 1000, 28, 3136, 1003520), (28, 560)),
        ((42, 70, 28, 3136, 1003520), (56, 56)), // round half to even: 1.5 -> 2, 2.5 -> 2
        ((14, 14, 28, 3136, 1003520), (56, 56)),
        ((48, 16, 32, 65536, 16777216), (448, 160)),
        ((3000, 4000, 28, 3136, 12845056), (2996, 4004)),
    ] {
        let (h, w, f, lo, hi) = args;
        assert_eq!(smart_resize(h, w, f, lo, hi).unwrap(), want, "{args:?}");
    }
    // Aspect ratio over 200; transformers' (0, 64) for a 16x80 image without
    // min_pixels is an error here.
    assert!(smart_resize(1, 201, 28, 3136, 1003520).is_err());
    assert!(smart_resize(16, 80, 32, 0, 100000).is_err());
    assert!(smart_resize(0, 5, 28, 3136, 1003520).is_err());
}

#[test]
fn pixel_values_match_the_processor() {
    let cfg = config();
    let a = decode(&std::fs::read(vl().join("ref").join("image_a.png")).unwrap()).unwrap();
    let b = decode(&std::fs::read(vl().join("ref").join("image_b.png")).unwrap()).unwrap();
    let mut pa = Vec::new();
    assert_eq!(pixel_values(&a, &cfg, &mut pa).unwrap(), [1, 6, 4]);
    let mut pb = Vec::new();
    assert_eq!(pixel_values(&b, &cfg, &mut pb).unwrap(), [1, 2, 6]);
    // The two_images case's rows: image A's 24 patches (the same as the
    // `image` case's pixel_values), then image B's 12.
    let (shape, want2) = read_npy_f32(&vl().join("ref").join("two_images_pixel_values.npy"));
    assert_eq!(shape, [36, 1536]);
    let ea = max_abs(&pa, &want2[..24 * 1536]);
    let eb = max_abs(&pb, &want2[24 * 1536..]);
    println!("pixel_values max abs error: image A (not resized) {ea:e}, image B (28x90 -> 32x96 bicubic) {eb:e}");
    assert!(ea <= 1e-6, "{ea}");
    assert!(eb <= 1e-6, "{eb}");
}

#[test]
fn resize_identity_and_shapes() {
    let a = decode(&std::fs::read(vl().join("ref").join("image_a.png")).unwrap()).unwrap();
    // Downscale then check the size, a constant image stays constant.
    let small = resize_bicubic(&a, 17, 30).unwrap();
    assert_eq!(
        (small.width, small.height, small.data.len()),
        (17, 30, 17 * 30 * 3)
    );
    let flat = Rgb8 {
        width: 9,
        height: 5,
        data: vec![77; 135],
    };
    for (w, h) in [(3, 2), (40, 11), (9, 5), (1, 1), (200, 3)] {
        let r = resize_bicubic(&flat, w, h).unwrap();
        assert!(r.data.iter().all(|&x| x == 77), "{w}x{h}");
    }
    let bad = Rgb8 {
        width: 9,
        height: 5,
        data: vec![0; 10],
    };
    assert!(resize_bicubic(&bad, 3, 3).is_err());
    assert!(resize_bicubic(&flat, 0, 3).is_err());
}

fn manifest() -> Vec<(String, u32, u32)> {
    std::fs::read_to_string(vectors().join("manifest.txt"))
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn vectors_decode_as_pillow() {
    let mut worst_jpeg = 0;
    for (name, w, h) in manifest() {
        let bytes = std::fs::read(vectors().join(&name)).unwrap();
        let img = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((img.width, img.height), (w, h), "{name}");
        let want =
            std::fs::read(vectors().join(name.replace(".jpg", ".rgb").replace(".png", ".rgb")))
                .unwrap();
        let diff = img
            .data
            .iter()
            .zip(&want)
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap();
        let n = img.data.iter().zip(&want).filter(|(a, b)| a != b).count();
        if name.ends_with(".jpg") {
            println!(
                "{name}: max abs diff vs Pillow {diff} ({n} of {} samples differ)",
                want.len()
            );
            worst_jpeg = worst_jpeg.max(diff);
        } else {
            assert_eq!(diff, 0, "{name}: {n} samples differ");
        }
    }
    println!("JPEG: worst max abs diff vs Pillow {worst_jpeg}");
    assert!(worst_jpeg <= 1);
}

/// Decoding must return (Ok or Err) without panicking.
fn no_panic(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    let r = decode(bytes);
    if let Ok(img) = &r {
        assert_eq!(img.data.len(), img.width as usize * img.height as usize * 3);
    }
    r
}

#[test]
fn every_truncation_is_an_error() {
    for name in [
        "png_interlaced_rgb8.png",
        "png_pal4.png",
        "png_stored.png",
        "jpeg_progressive.jpg",
        "jpeg_restart.jpg",
        "jpeg_420_odd.jpg",
        "jpeg_gray.jpg",
    ] {
        let bytes = std::fs::read(vectors().join(name)).unwrap();
        for n in 0..bytes.len() {
            assert!(
                no_panic(&bytes[..n]).is_err(),
                "{name} truncated to {n} bytes decoded"
            );
        }
    }
}

#[test]
fn corrupted_bytes_never_panic() {
    let mut errors = 0;
    let mut total = 0;
    for name in [
        "png_rgb8.png",
        "png_interlaced_gray2.png",
        "jpeg_progressive.jpg",
        "jpeg_restart_progressive.jpg",
        "jpeg_422_odd.jpg",
    ] {
        let bytes = std::fs::read(vectors().join(name)).unwrap();
        for i in 0..bytes.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= x;
                total += 1;
                errors += no_panic(&b).is_err() as usize;
            }
            let mut b = bytes.clone();
            b[i] = 0xff;
            no_panic(&b).ok();
        }
    }
    println!("corrupted inputs: {errors} of {total} rejected, the rest decoded (no panic)");
}

// Inputs the image fuzz target kept (and any crasher) are replayed by
// tests/tests/regressions.rs from tests/vectors/fuzz/image/.

fn png_chunk(kind: &[u8], data: &[u8]) -> Vec<u8> {
    let mut v = (data.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(kind);
    v.extend_from_slice(data);
    v.extend_from_slice(&[0; 4]); // CRCs are not checked
    v
}

fn png_with(ihdr: &[u8], idat: &[u8]) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend(png_chunk(b"IHDR", ihdr));
    v.extend(png_chunk(b"IDAT", idat));
    v.extend(png_chunk(b"IEND", b""));
    v
}

fn ihdr(w: u32, h: u32, depth: u8, ctype: u8, interlace: u8) -> Vec<u8> {
    let mut v = w.to_be_bytes().to_vec();
    v.extend(h.to_be_bytes());
    v.extend([depth, ctype, 0, 0, interlace]);
    v
}

fn expect_err(bytes: &[u8], needle: &str) {
    let e = no_panic(bytes)
        .err()
        .unwrap_or_else(|| panic!("decoded; wanted an error with {needle:?}"));
    let s = e.to_string();
    assert!(s.contains(needle), "{s:?} lacks {needle:?}");
}

#[test]
fn hostile_png_headers() {
    // A valid 1x1 RGB zlib stream: filter 0 and three bytes, stored.
    let z = [
        0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff, 0, 1, 2, 3, 0x00, 0x0e, 0x00, 0x07,
    ];
    assert_eq!(
        no_panic(&png_with(&ihdr(1, 1, 8, 2, 0), &z)).unwrap().data,
        [1, 2, 3]
    );
    expect_err(&png_with(&ihdr(0, 1, 8, 2, 0), &z), "size 0x1");
    expect_err(&png_with(&ihdr(1, 0, 8, 2, 0), &z), "size 1x0");
    expect_err(&png_with(&ihdr(16385, 1, 8, 2, 0), &z), "size 16385x1");
    expect_err(
        &png_with(&ihdr(16384, 16384, 8, 2, 0), &z),
        "size 16384x16384",
    );
    expect_err(&png_with(&ihdr(u32::MAX, u32::MAX, 8, 2, 0), &z), "outside");
    expect_err(&png_with(&ihdr(1, 1, 3, 2, 0), &z), "bit depth");
    expect_err(&png_with(&ihdr(1, 1, 8, 7, 0), &z), "color type");
    expect_err(&png_with(&ihdr(1, 1, 8, 2, 2), &z), "interlace");
    expect_err(&png_with(&ihdr(1, 1, 8, 3, 0), &z), "without PLTE");
    expect_err(
        &png_with(&ihdr(2, 1, 8, 2, 0), &z),
        "shorter than the image",
    );
    expect_err(
        &png_with(&ihdr(1, 1, 8, 0, 0), &z),
        "more data than the image",
    );
    expect_err(
        &png_with(&ihdr(1, 1, 8, 2, 0)[..12], &z),
        "IHDR length is not 13",
    );
    // Bad zlib: header check, block type 3, Adler-32, distance too far back.
    expect_err(
        &png_with(&ihdr(1, 1, 8, 2, 0), &[0x78, 0x02, 0, 0]),
        "zlib: bad header",
    );
    expect_err(
        &png_with(&ihdr(1, 1, 8, 2, 0), &[0x78, 0x01, 0x07, 0, 0, 0, 0]),
        "bad block type",
    );
    let mut bad_adler = z;
    bad_adler[14] ^= 1;
    expect_err(&png_with(&ihdr(1, 1, 8, 2, 0), &bad_adler), "Adler-32");
    // Fixed Huffman block whose first code is a match (length 3, distance 1).
    expect_err(
        &png_with(&ihdr(1, 1, 8, 2, 0), &[0x78, 0x01, 0x03, 0x02, 0, 0, 0, 0]),
        "distance too far",
    );
    // Dynamic block with every code length code zero: no end-of-block / bad code.
    assert!(no_panic(&png_with(
        &ihdr(1, 1, 8, 2, 0),
        &[0x78, 0x01, 0x05, 0, 0, 0, 0, 0, 0, 0, 0]
    ))
    .is_err());
    // Bad filter type 9.
    let z9 = [
        0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff, 9, 1, 2, 3, 0x00, 0x32, 0x00, 0x10,
    ];
    expect_err(&png_with(&ihdr(1, 1, 8, 2, 0), &z9), "filter type");
    // Chunk length over 2^31 and past the end; first chunk not IHDR.
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend([0xff, 0xff, 0xff, 0xf0]);
    v.extend(b"IHDR");
    expect_err(&v, "chunk length over");
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend([0x7f, 0xff, 0xff, 0xf0]);
    v.extend(b"IHDR");
    expect_err(&v, "chunk data truncated");
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    v.extend(png_chunk(b"IDAT", &z));
    expect_err(&v, "first chunk is not IHDR");
    expect_err(b"GIF89a", "not a PNG or JPEG");
}

/// A JPEG from parts (SOI and EOI added).
fn jpeg(parts: &[&[u8]]) -> Vec<u8> {
    let mut v = vec![0xff, 0xd8];
    for p in parts {
        v.extend_from_slice(p);
    }
    v.extend([0xff, 0xd9]);
    v
}

#[test]
fn hostile_jpeg_headers() {
    let sof = |m: u8, p: u8, h: u16, w: u16, comps: &[[u8; 3]]| {
        let mut v = vec![0xff, m];
        v.extend((8 + 3 * comps.len() as u16).to_be_bytes());
        v.push(p);
        v.extend(h.to_be_bytes());
        v.extend(w.to_be_bytes());
        v.push(comps.len() as u8);
        for c in comps {
            v.extend(c);
        }
        v
    };
    let y = [[1, 0x11, 0]];
    expect_err(&jpeg(&[&sof(0xc0, 12, 8, 8, &y)]), "precision");
    expect_err(&jpeg(&[&sof(0xc0, 8, 0, 8, &y)]), "DNL");
    expect_err(&jpeg(&[&sof(0xc0, 8, 8, 0, &y)]), "size 0x8");
    expect_err(&jpeg(&[&sof(0xc0, 8, 65535, 65535, &y)]), "outside");
    // 8000x8000 declared in a 20-byte file: refused before allocating.
    expect_err(
        &jpeg(&[&sof(0xc0, 8, 8000, 8000, &y)]),
        "too short for the image size",
    );
    expect_err(
        &jpeg(&[&sof(
            0xc0,
            8,
            8,
            8,
            &[[1, 0x11, 0], [2, 0x11, 0], [3, 0x11, 0], [4, 0x11, 0]],
        )]),
        "CMYK",
    );
    expect_err(
        &jpeg(&[&sof(
            0xc0,
            8,
            8,
            8,
            &[[1, 0x41, 0], [2, 0x11, 0], [3, 0x11, 0]],
        )]),
        "subsampling",
    );
    expect_err(
        &jpeg(&[&sof(0xc0, 8, 8, 8, &[[1, 0x01, 0]])]),
        "sampling factor",
    );
    expect_err(&jpeg(&[&sof(0xc3, 8, 8, 8, &y)]), "lossless");
    expect_err(&jpeg(&[&sof(0xc9, 8, 8, 8, &y)]), "arithmetic");
    expect_err(&jpeg(&[&sof(0xc0, 8, 8, 8, &y)]), "no scan");
    expect_err(
        &jpeg(&[&sof(0xc0, 8, 8, 8, &y), &sof(0xc0, 8, 8, 8, &y)]),
        "second SOF",
    );
    expect_err(
        &jpeg(&[&[0xff, 0xda, 0, 8, 1, 1, 0, 0, 63, 0]]),
        "SOS before SOF",
    );
    // Huffman table with 3 codes of length 1: overflows.
    let mut dht = vec![0xff, 0xc4, 0, 22, 0x00, 3];
    dht.extend([0; 15]);
    dht.extend([0, 1, 2]);
    expect_err(&jpeg(&[&dht]), "bad Huffman table");
    // Counts promising more symbols than the segment holds.
    let mut dht = vec![0xff, 0xc4, 0, 19, 0x00, 0, 0, 200];
    dht.extend([0; 13]);
    expect_err(&jpeg(&[&dht]), "bad DHT");
    // DC symbol over 15.
    let mut dht = vec![0xff, 0xc4, 0, 20, 0x00, 1];
    dht.extend([0; 15]);
    dht.push(16);
    expect_err(&jpeg(&[&dht]), "DC Huffman symbol");
    expect_err(&jpeg(&[&[0xff, 0xdb, 0, 4, 0x05, 1]]), "bad DQT");
    expect_err(&jpeg(&[&[0xff, 0xdd, 0, 5, 0, 1, 0]]), "DRI length");
    expect_err(&jpeg(&[&[0xff, 0xe1, 0, 1]]), "length under 2");
    expect_err(&jpeg(&[&[0xff, 0xe1, 0xff, 0xff, 1, 2]]), "truncated");
    expect_err(&jpeg(&[&[0xff, 0xd3]]), "restart marker outside");
    expect_err(&[0xff, 0xd8], "no EOI");
    // A scan with an undefined table, and one naming an unknown component.
    let base = std::fs::read(vectors().join("jpeg_gray.jpg")).unwrap();
    let sos = base.windows(2).position(|w| w == [0xff, 0xda]).unwrap();
    let mut v = base.clone();
    v[sos + 6] = 0x33; // table selectors 3/3
    expect_err(&v, "undefined Huffman table");
    let mut v = base.clone();
    v[sos + 5] = 9;
    expect_err(&v, "unknown component");
    // An Adobe RGB-transform JPEG is not an error (decoded without YCbCr).
    let mut v = base;
    let adobe = [
        0xff, 0xee, 0, 14, b'A', b'd', b'o', b'b', b'e', 0, 100, 0, 0, 0, 0, 0,
    ];
    v.splice(2..2, adobe);
    assert!(no_panic(&v).is_ok());
}

#[test]
fn pixel_values_errors() {
    let cfg = config();
    let mut out = Vec::new();
    let wide = Rgb8 {
        width: 201 * 4,
        height: 4,
        data: vec![0; 201 * 4 * 4 * 3],
    };
    assert!(matches!(
        pixel_values(&wide, &cfg, &mut out),
        Err(ImageError::Config(_))
    ));
    let bad = Rgb8 {
        width: 64,
        height: 96,
        data: vec![0; 3],
    };
    assert!(pixel_values(&bad, &cfg, &mut out).is_err());
    let mut c = cfg;
    c.patch_size = 0;
    assert!(pixel_values(
        &Rgb8 {
            width: 1,
            height: 1,
            data: vec![0; 3]
        },
        &c,
        &mut out
    )
    .is_err());
    // A 1x1 image is upscaled to min_pixels (32x32): one merged token.
    assert_eq!(
        pixel_values(
            &Rgb8 {
                width: 1,
                height: 1,
                data: vec![9; 3]
            },
            &cfg,
            &mut out
        )
        .unwrap(),
        [1, 2, 2]
    );
    assert_eq!(out.len(), 4 * 1536);
}

#[test]
fn shell_load_image() {
    let img = kestrel::image::load_image(&vectors().join("jpeg_420.jpg")).unwrap();
    assert_eq!((img.width, img.height), (48, 32));
    let e = kestrel::image::load_image(&vectors().join("missing.png"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.png"), "{e}");
    let e = kestrel::image::load_image(&vectors().join("manifest.txt"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("manifest.txt: image: not a PNG or JPEG file"),
        "{e}"
    );
}
