#!/usr/bin/env python3
"""Generates the image decoder test vectors in this directory.

JPEGs are written by Pillow (libjpeg-turbo); the expected RGB is Pillow's
decode, `Image.open(f).convert("RGB")`. PNGs are written by the small encoder
below (every filter type, bit depths 1-16, every color type, Adam7) and the
expected RGB is computed from the pixels: 16-bit samples keep the high byte,
gray below 8 bits is scaled to 0-255, alpha is dropped (Pillow agrees on all
8-bit and sub-byte files, checked here; for 16-bit gray Pillow clips to 255
instead, a documented difference).

Each vector is NAME.{png,jpg} and NAME.rgb (height x width x 3 bytes), listed
in manifest.txt as `NAME.EXT WIDTH HEIGHT`. Run: python3 gen.py (needs numpy,
Pillow). Output is deterministic for a given Pillow/libjpeg-turbo.
"""
import io
import os
import struct
import zlib

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(2024)


def picture(w, h):
    """Smooth gradients plus noise and a hard edge: exercises every DCT band."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / 5.0) * np.cos(y / 7.0)
    g = 255 * x / max(w - 1, 1)
    b = np.where((x // 4 + y // 4) % 2 == 0, 30, 220).astype(np.float64)
    img = np.stack([r, g, b], -1) + rng.normal(0, 12, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


manifest = []


def emit(name, ext, data, rgb):
    with open(os.path.join(HERE, f"{name}.{ext}"), "wb") as f:
        f.write(data)
    h, w, _ = rgb.shape
    with open(os.path.join(HERE, f"{name}.rgb"), "wb") as f:
        f.write(np.ascontiguousarray(rgb, dtype=np.uint8).tobytes())
    manifest.append(f"{name}.{ext} {w} {h}")


def jpeg(name, img, **kw):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", **kw)
    data = buf.getvalue()
    rgb = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    emit(name, "jpg", data, rgb)


# JPEG
jpeg("jpeg_444", picture(48, 32), quality=90, subsampling=0)
jpeg("jpeg_422", picture(48, 32), quality=90, subsampling=1)
jpeg("jpeg_420", picture(48, 32), quality=85, subsampling=2)
jpeg("jpeg_420_odd", picture(33, 17), quality=80, subsampling=2)
jpeg("jpeg_422_odd", picture(17, 33), quality=80, subsampling=1)
jpeg("jpeg_444_odd", picture(13, 9), quality=95, subsampling=0)
jpeg("jpeg_420_tiny", picture(3, 2), quality=90, subsampling=2)
jpeg("jpeg_420_w4", picture(4, 5), quality=90, subsampling=2)
jpeg("jpeg_gray", picture(33, 17)[:, :, 0], quality=90)
jpeg("jpeg_progressive", picture(40, 24), quality=85, subsampling=2, progressive=True)
jpeg("jpeg_progressive_444", picture(33, 17), quality=92, subsampling=0, progressive=True)
jpeg("jpeg_progressive_gray", picture(21, 19)[:, :, 1], quality=75, progressive=True)
jpeg("jpeg_restart", picture(64, 40), quality=85, subsampling=2, restart_marker_blocks=1)
jpeg("jpeg_restart_rows", picture(33, 17), quality=85, subsampling=0, restart_marker_rows=1)
jpeg("jpeg_restart_progressive", picture(48, 32), quality=85, progressive=True, restart_marker_blocks=3)
jpeg("jpeg_optimized", picture(48, 32), quality=70, optimize=True)
jpeg("jpeg_q100", picture(16, 16), quality=100, subsampling=0)


# PNG
def chunk(kind, data):
    c = kind + data
    return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c))


def filt(raw_rows, bpp, row0):
    """Filters each row with type (row0 + i) % 5."""
    out = bytearray()
    prev = bytes(len(raw_rows[0])) if raw_rows else b""
    for i, row in enumerate(raw_rows):
        t = (row0 + i) % 5
        out.append(t)
        for j, x in enumerate(row):
            a = row[j - bpp] if j >= bpp else 0
            b = prev[j]
            c = prev[j - bpp] if j >= bpp else 0
            if t == 0:
                p = 0
            elif t == 1:
                p = a
            elif t == 2:
                p = b
            elif t == 3:
                p = (a + b) // 2
            else:
                pp = a + b - c
                pa, pb, pc = abs(pp - a), abs(pp - b), abs(pp - c)
                p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            out.append((x - p) & 255)
        prev = row
    return bytes(out)


def pack(samples, depth):
    """One row of samples (ints) to bytes at `depth` bits."""
    if depth == 16:
        return b"".join(struct.pack(">H", int(s)) for s in samples)
    if depth == 8:
        return bytes(int(s) for s in samples)
    bits = "".join(format(int(s), f"0{depth}b") for s in samples)
    bits += "0" * (-len(bits) % 8)
    return bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8))


def png(name, samples, ctype, depth, palette=None, interlace=False, level=6, extra=b""):
    h, w, ch = samples.shape
    bpp = max(1, ch * depth // 8)
    raw = b""
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    for k, (x0, y0, dx, dy) in enumerate(passes if interlace else [(0, 0, 1, 1)]):
        sub = samples[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        rows = [pack(r.reshape(-1), depth) for r in sub]
        raw += filt(rows, bpp, k)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    if palette is not None:
        data += chunk(b"PLTE", palette.astype(np.uint8).tobytes())
    data += extra
    z = zlib.compress(raw, level)
    # Split IDAT in two to exercise concatenation.
    half = len(z) // 2
    data += chunk(b"IDAT", z[:half]) + chunk(b"IDAT", z[half:]) + chunk(b"IEND", b"")
    # Expected RGB
    s = samples.astype(np.int64)
    if depth == 16:
        s = s >> 8
    if ctype == 3:
        pal = np.zeros((256, 3), np.int64)
        pal[: len(palette)] = palette
        rgb = pal[s[:, :, 0]]
    elif ctype in (0, 4):
        g = s[:, :, 0] * 255 // ((1 << min(depth, 8)) - 1)
        rgb = np.stack([g, g, g], -1)
    else:
        rgb = s[:, :, :3]
    rgb = rgb.astype(np.uint8)
    if depth <= 8 and not (ctype == 3 and palette is not None and len(palette) < 2 ** depth and s.max() >= len(palette)):
        pil = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        assert (pil == rgb).all(), name
    emit(name, "png", data, rgb)


pic = picture(23, 13).astype(np.int64)
png("png_rgb8", pic, 2, 8)
png("png_rgba8", np.concatenate([pic, rng.integers(0, 256, (13, 23, 1))], -1), 6, 8)
png("png_gray8", pic[:, :, :1], 0, 8)
png("png_graya8", pic[:, :, :2], 4, 8)
png("png_rgb16", pic * 256 + rng.integers(0, 256, pic.shape), 2, 16)
png("png_rgba16", np.concatenate([pic, pic[:, :, :1]], -1) * 256 + 7, 6, 16)
png("png_gray16", pic[:, :, :1] * 256 + 255, 0, 16)
png("png_graya16", pic[:, :, :2] * 256, 4, 16)
for d in (1, 2, 4):
    png(f"png_gray{d}", pic[:, :, :1] >> (8 - d), 0, d)
pal = rng.integers(0, 256, (16, 3))
png("png_pal4", pic[:, :, :1] >> 4, 3, 4, palette=pal)
png("png_pal1", pic[:, :, :1] >> 7, 3, 1, palette=pal[:2])
png("png_pal8", pic[:, :, :1] % 16, 3, 8, palette=pal, extra=chunk(b"tRNS", bytes(range(16))))
png("png_pal8_short", pic[:, :, :1] % 20, 3, 8, palette=pal)  # indices past the palette: black
png("png_interlaced_rgb8", pic, 2, 8, interlace=True)
png("png_interlaced_gray2", pic[:, :, :1] >> 6, 0, 2, interlace=True)
png("png_interlaced_tiny", pic[:3, :2], 2, 8, interlace=True)
png("png_stored", pic[:5, :7], 2, 8, level=0)
png("png_1x1", pic[:1, :1], 2, 8)

with open(os.path.join(HERE, "manifest.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")
print(f"{len(manifest)} vectors")
