//! The safetensors reader on the fixture model's F32 and BF16 checkpoints
//! (names, shapes and offsets as Python's `json` reads the header), and on
//! synthetic files: every truncation, byte flips, and headers that lie.

use std::panic::{catch_unwind, AssertUnwindSafe};

use kestrel_core::safetensors::{Dtype, SafeTensors, TensorView, MAX_WORK};
use kestrel_core::Error;

static F32_FILE: &[u8] = include_bytes!("../fixtures/dev_qwen3_dense_tied/f32/model.safetensors");
static BF16_FILE: &[u8] = include_bytes!("../fixtures/dev_qwen3_dense_tied/hf/model.safetensors");

/// (name, shape, f32 data_offsets) in header order, from
/// `json.loads(open(f, 'rb').read()[8:8 + n])`; BF16 offsets are half.
const TENSORS: [(&str, &[usize], [usize; 2]); 24] = [
    ("model.embed_tokens.weight", &[576, 96], [0, 221184]),
    (
        "model.layers.0.input_layernorm.weight",
        &[96],
        [221184, 221568],
    ),
    (
        "model.layers.0.mlp.down_proj.weight",
        &[96, 256],
        [221568, 319872],
    ),
    (
        "model.layers.0.mlp.gate_proj.weight",
        &[256, 96],
        [319872, 418176],
    ),
    (
        "model.layers.0.mlp.up_proj.weight",
        &[256, 96],
        [418176, 516480],
    ),
    (
        "model.layers.0.post_attention_layernorm.weight",
        &[96],
        [516480, 516864],
    ),
    (
        "model.layers.0.self_attn.k_norm.weight",
        &[16],
        [516864, 516928],
    ),
    (
        "model.layers.0.self_attn.k_proj.weight",
        &[32, 96],
        [516928, 529216],
    ),
    (
        "model.layers.0.self_attn.o_proj.weight",
        &[96, 96],
        [529216, 566080],
    ),
    (
        "model.layers.0.self_attn.q_norm.weight",
        &[16],
        [566080, 566144],
    ),
    (
        "model.layers.0.self_attn.q_proj.weight",
        &[96, 96],
        [566144, 603008],
    ),
    (
        "model.layers.0.self_attn.v_proj.weight",
        &[32, 96],
        [603008, 615296],
    ),
    (
        "model.layers.1.input_layernorm.weight",
        &[96],
        [615296, 615680],
    ),
    (
        "model.layers.1.mlp.down_proj.weight",
        &[96, 256],
        [615680, 713984],
    ),
    (
        "model.layers.1.mlp.gate_proj.weight",
        &[256, 96],
        [713984, 812288],
    ),
    (
        "model.layers.1.mlp.up_proj.weight",
        &[256, 96],
        [812288, 910592],
    ),
    (
        "model.layers.1.post_attention_layernorm.weight",
        &[96],
        [910592, 910976],
    ),
    (
        "model.layers.1.self_attn.k_norm.weight",
        &[16],
        [910976, 911040],
    ),
    (
        "model.layers.1.self_attn.k_proj.weight",
        &[32, 96],
        [911040, 923328],
    ),
    (
        "model.layers.1.self_attn.o_proj.weight",
        &[96, 96],
        [923328, 960192],
    ),
    (
        "model.layers.1.self_attn.q_norm.weight",
        &[16],
        [960192, 960256],
    ),
    (
        "model.layers.1.self_attn.q_proj.weight",
        &[96, 96],
        [960256, 997120],
    ),
    (
        "model.layers.1.self_attn.v_proj.weight",
        &[32, 96],
        [997120, 1009408],
    ),
    ("model.norm.weight", &[96], [1009408, 1009792]),
];

fn data_addr(st: &SafeTensors, v: &TensorView) -> usize {
    v.data().as_ptr() as usize - st.data().as_ptr() as usize
}

#[test]
fn fixture_checkpoints_parse_as_python_reads_them() {
    for (file, dtype, header_len, elem) in [
        (F32_FILE, Dtype::F32, 2464, 4),
        (BF16_FILE, Dtype::BF16, 2488, 2),
    ] {
        let st = SafeTensors::parse(file).unwrap();
        assert_eq!(st.len(), 24);
        assert_eq!(st.data_offset(), 8 + header_len);
        assert_eq!(st.data().len(), file.len() - 8 - header_len);
        assert!(st.metadata("format").unwrap().eq_str("pt"));
        assert_eq!(st.metadata("nope"), None);
        assert_eq!(st.metadata_object().unwrap().len(), 1);
        let listed: Vec<_> = st.tensors().collect();
        assert_eq!(listed.len(), 24);
        for ((name, view), (want, shape, offs)) in listed.iter().zip(TENSORS) {
            assert_eq!(name.as_plain(), Some(want));
            assert_eq!(view.dtype(), dtype);
            assert_eq!(view.shape(), shape);
            let begin = offs[0] / 4 * elem;
            let end = offs[1] / 4 * elem;
            assert_eq!(data_addr(&st, view), begin, "{want}");
            assert_eq!(view.data().len(), end - begin, "{want}");
            assert_eq!(st.tensor(want), Some(*view));
        }
        assert_eq!(st.tensor("lm_head.weight"), None, "tied: no lm_head");
        assert_eq!(st.tensor("__metadata__"), None);
        assert_eq!(st.tensor("model.norm"), None);
    }
}

#[test]
fn bf16_and_f32_checkpoints_hold_identical_values() {
    let a = SafeTensors::parse(F32_FILE).unwrap();
    let b = SafeTensors::parse(BF16_FILE).unwrap();
    let mut total = 0;
    for ((na, va), (nb, vb)) in a.tensors().zip(b.tensors()) {
        assert_eq!(na.raw(), nb.raw());
        assert_eq!(va.shape(), vb.shape());
        let mut fa = vec![0f32; va.numel()];
        let mut fb = vec![0f32; vb.numel()];
        va.to_f32(&mut fa).unwrap();
        vb.to_f32(&mut fb).unwrap();
        for (i, (x, y)) in fa.iter().zip(&fb).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "{} [{i}]", na.raw());
            // The f32 values are bf16 values (the fixture rounded them).
            assert_eq!(x.to_bits() & 0xffff, 0);
        }
        // Rows and single elements agree with the whole-tensor conversion.
        let (rows, cols) = (va.rows(), va.cols());
        assert_eq!(rows * cols, va.numel());
        let mut row = vec![0f32; cols];
        for r in [0, rows / 2, rows - 1] {
            vb.to_f32_row(r, &mut row).unwrap();
            assert_eq!(row, &fa[r * cols..(r + 1) * cols]);
            va.to_f32_row(r, &mut row).unwrap();
            assert_eq!(row, &fa[r * cols..(r + 1) * cols]);
        }
        for i in [0, va.numel() / 3, va.numel() - 1] {
            assert_eq!(va.f32_at(i), Some(fa[i]));
            assert_eq!(vb.f32_at(i), Some(fa[i]));
        }
        assert_eq!(va.f32_at(va.numel()), None);
        assert_eq!(vb.f32_at(vb.numel()), None);
        assert!(fa.iter().any(|&x| x != 0.0));
        total += fa.len();
    }
    assert_eq!(total, 1009792 / 4);
}

#[test]
fn conversion_helpers_check_their_arguments() {
    let st = SafeTensors::parse(BF16_FILE).unwrap();
    let emb = st.tensor("model.embed_tokens.weight").unwrap();
    assert_eq!((emb.rows(), emb.cols()), (576, 96));
    let mut out = vec![0f32; 96];
    assert_eq!(
        emb.to_f32_row(576, &mut out),
        Err(Error::OutOfRange {
            what: "safetensors: tensor row",
            value: 576,
            max: 575
        })
    );
    assert_eq!(
        emb.to_f32_row(0, &mut out[..95]),
        Err(Error::SizeMismatch {
            what: "safetensors: row output",
            expected: 96,
            actual: 95
        })
    );
    assert!(emb.to_f32(&mut out).is_err());
    let norm = st.tensor("model.norm.weight").unwrap();
    assert_eq!((norm.rows(), norm.cols()), (1, 96));
    norm.to_f32_row(0, &mut out).unwrap();

    // Synthetic views: F16 decoding, scalars, other dtypes.
    let halves: Vec<u8> = [0x3c00u16, 0xc000, 0x7bff, 0x0001]
        .iter()
        .flat_map(|h| h.to_le_bytes())
        .collect();
    let v = TensorView::new(Dtype::F16, &[2, 2], &halves).unwrap();
    let mut o = [0f32; 2];
    v.to_f32_row(1, &mut o).unwrap();
    assert_eq!(o, [65504.0, 5.960_464_5e-8]);
    assert_eq!(v.f32_at(1), Some(-2.0));
    let one_and_half = 1.5f32.to_le_bytes();
    let s = TensorView::new(Dtype::F32, &[], &one_and_half).unwrap();
    assert_eq!((s.rows(), s.cols(), s.numel()), (1, 1, 1));
    assert_eq!(s.f32_at(0), Some(1.5));
    let i = TensorView::new(Dtype::I32, &[1], &[0; 4]).unwrap();
    assert_eq!(i.f32_at(0), None);
    assert_eq!(
        i.to_f32_row(0, &mut o[..1]),
        Err(Error::Unsupported {
            what: "safetensors: f32 conversion of a dtype other than F32, F16, BF16",
            value: 0
        })
    );
    assert!(TensorView::new(Dtype::F32, &[2], &[0; 4]).is_err());
    assert!(TensorView::new(Dtype::F32, &[1; 9], &[0; 4]).is_err());
    assert!(TensorView::new(Dtype::U8, &[usize::MAX, 2], &[]).is_err());
    assert!(TensorView::new(Dtype::F4, &[3], &[0; 2]).is_err());
    assert!(TensorView::new(Dtype::F4, &[4], &[0; 2]).is_ok());
    let empty = TensorView::new(Dtype::F32, &[0, 4], &[]).unwrap();
    assert_eq!((empty.rows(), empty.cols()), (0, 4));
    assert!(empty.to_f32_row(0, &mut [0f32; 4]).is_err());
}

#[test]
fn dtype_names() {
    for d in Dtype::ALL {
        assert_eq!(Dtype::from_name(d.name()), Some(d));
    }
    assert_eq!(Dtype::from_name("f32"), None);
    assert_eq!(Dtype::F8_E4M3.bits(), 8);
    assert_eq!(Dtype::F6_E3M2.bits(), 6);
    assert_eq!(Dtype::C64.bits(), 64);
}

/// A safetensors file: the header padded with spaces to a multiple of 8, as
/// the library writes it, then `data`.
fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut f = (h.len() as u64).to_le_bytes().to_vec();
    f.extend(h);
    f.extend(data);
    f
}

fn ramp(n: usize) -> Vec<u8> {
    (0..n).map(|i| i as u8).collect()
}

/// Three tensors out of data order, an escaped name, an empty tensor, metadata.
const SMALL: &str = r#"{"__metadata__":{"format":"pt","note":"a\"b"},
 "w\u00e9ight":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},
 "a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16],"extra":[1,{"x":2}]},
 "empty":{"dtype":"I8","shape":[0,5],"data_offsets":[22,22]},
 "z":{"shape":[2],"data_offsets":[22,24],"dtype":"U8"}}"#;

#[test]
fn synthetic_file_parses() {
    let f = file(SMALL, &ramp(24));
    let st = SafeTensors::parse(&f).unwrap();
    assert_eq!(st.len(), 4);
    assert!(st.metadata("note").unwrap().eq_str("a\"b"));
    let w = st.tensor("w\u{e9}ight").unwrap();
    assert_eq!((w.dtype(), w.shape()), (Dtype::BF16, &[3][..]));
    assert_eq!(w.data(), &ramp(24)[16..22]);
    let a = st.tensor("a").unwrap();
    assert_eq!(a.data(), &ramp(24)[..16]);
    let e = st.tensor("empty").unwrap();
    assert_eq!((e.shape(), e.data().len()), (&[0, 5][..], 0));
    assert_eq!(st.tensor("z").unwrap().data(), &[22, 23]);
    let names: Vec<String> = st.tensors().map(|(n, _)| n.chars().collect()).collect();
    assert_eq!(names, ["w\u{e9}ight", "a", "empty", "z"]);
    // Empty file and null metadata are fine.
    assert_eq!(SafeTensors::parse(&file("{}", &[])).unwrap().len(), 0);
    let null_meta = file(r#"{"__metadata__":null}"#, &[]);
    let st = SafeTensors::parse(&null_meta).unwrap();
    assert_eq!(st.metadata("format"), None);
}

#[test]
fn every_truncation_is_rejected() {
    let f = file(SMALL, &ramp(24));
    for cut in 0..f.len() {
        assert!(SafeTensors::parse(&f[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn byte_flips_never_panic() {
    let f = file(SMALL, &ramp(24));
    let mut ok = 0;
    for at in 0..f.len() {
        for mask in [0x01u8, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff] {
            let mut g = f.clone();
            g[at] ^= mask;
            let r = catch_unwind(AssertUnwindSafe(|| check_consistent(&g)));
            match r {
                Ok(true) => ok += 1,
                Ok(false) => {}
                Err(_) => panic!("panic with byte {at} ^ {mask:#x}"),
            }
        }
    }
    // Flips in the data section keep the file valid.
    assert!(ok >= 24 * 9);
}

/// Parses `f`; if accepted, every tensor lies inside the data section and
/// the tensors tile it. Returns whether it was accepted.
fn check_consistent(f: &[u8]) -> bool {
    let Ok(st) = SafeTensors::parse(f) else {
        return false;
    };
    let base = st.data().as_ptr() as usize;
    let mut ranges: Vec<(usize, usize)> = st
        .tensors()
        .map(|(name, v)| {
            let begin = v.data().as_ptr() as usize - base;
            let decoded: String = name.chars().collect();
            assert_eq!(st.tensor(&decoded), Some(v));
            (begin, begin + v.data().len())
        })
        .filter(|r| r.1 > r.0)
        .collect();
    assert_eq!(st.tensors().count(), st.len());
    ranges.sort();
    let mut at = 0;
    for (b, e) in ranges {
        assert_eq!(b, at);
        at = e;
    }
    assert_eq!(at, st.data().len());
    true
}

#[test]
fn random_header_mutations_never_panic() {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n as u64) as usize
    };
    let small = file(SMALL, &ramp(24));
    let hlen = 8 + 2488;
    let mut big = BF16_FILE.to_vec();
    for round in 0..3000 {
        // The fixture is mutated in place and its header restored afterwards.
        let fixture = round % 3 == 0;
        let mut g = if fixture {
            std::mem::take(&mut big)
        } else {
            small.clone()
        };
        let header_end = if fixture { hlen } else { small.len() - 24 };
        for _ in 0..1 + rnd(3) {
            let at = 8 + rnd(header_end - 8);
            match rnd(4) {
                0 => g[at] ^= 1 << rnd(8),
                1 => {
                    let set = b"[]{}\",:0123456789-e.\\u ";
                    g[at] = set[rnd(set.len())];
                }
                2 => g[at] = rnd(256) as u8,
                _ => {
                    // Keep N and the length consistent: swap two header bytes.
                    let other = 8 + rnd(header_end - 8);
                    g.swap(at, other);
                }
            }
        }
        if catch_unwind(AssertUnwindSafe(|| check_consistent(&g))).is_err() {
            panic!("panic on {:?}", String::from_utf8_lossy(&g[..header_end]));
        }
        if fixture {
            g[..hlen].copy_from_slice(&BF16_FILE[..hlen]);
            big = g;
        }
    }
    assert_eq!(big, BF16_FILE);
}

fn parse_err(header: &str, data: &[u8]) -> Error {
    match SafeTensors::parse(&file(header, data)) {
        Ok(_) => panic!("accepted {header}"),
        Err(e) => e,
    }
}

fn what(header: &str, data: &[u8]) -> &'static str {
    match parse_err(header, data) {
        Error::Safetensors { what, .. } | Error::Json { what, .. } => what,
        e => panic!("unexpected error {e:?}"),
    }
}

#[test]
fn lying_length_fields_are_rejected() {
    let good = file(SMALL, &ramp(24));
    let with_n = |n: u64| {
        let mut g = good.clone();
        g[..8].copy_from_slice(&n.to_le_bytes());
        g
    };
    let e = |f: &[u8]| match SafeTensors::parse(f) {
        Err(Error::Safetensors { what, .. }) => what,
        r => panic!("{r:?}"),
    };
    assert_eq!(
        e(&with_n(u64::MAX)),
        "safetensors: header length above 100 MB"
    );
    assert_eq!(
        e(&with_n(100_000_001)),
        "safetensors: header length above 100 MB"
    );
    assert_eq!(
        e(&with_n(good.len() as u64 - 7)),
        "safetensors: header length past the end of the file"
    );
    // A header swallowing the data section is not valid JSON.
    assert!(matches!(
        SafeTensors::parse(&with_n(good.len() as u64 - 8)),
        Err(Error::Json { .. })
    ));
    assert!(SafeTensors::parse(&with_n(0)).is_err());
    assert_eq!(
        e(&[1, 0, 0]),
        "safetensors: file shorter than the 8-byte header length"
    );
    assert_eq!(
        e(&[]),
        "safetensors: file shorter than the 8-byte header length"
    );
    // The header must start with '{' (the reference crate's rule).
    assert_eq!(
        e(&file(" {}", &[])),
        "safetensors: header does not start with '{'"
    );
    assert_eq!(
        e(&file("[]", &[])),
        "safetensors: header does not start with '{'"
    );
    // JSON errors are reported at their offset in the file.
    assert_eq!(
        SafeTensors::parse(&file("{\"a\":1,}", &[])).unwrap_err(),
        Error::Json {
            what: "json: expected a string key",
            offset: 8 + 7
        }
    );
    let mut bad_utf8 = file("{\"\u{e9}\":1}", &[]);
    bad_utf8[10] = 0xff;
    assert_eq!(
        SafeTensors::parse(&bad_utf8).unwrap_err(),
        Error::Json {
            what: "json: invalid UTF-8",
            offset: 10
        }
    );
}

#[test]
fn lying_headers_are_rejected() {
    let d8 = &ramp(8)[..];
    let cases: &[(&str, &[u8], &str)] = &[
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}}"#,
            d8,
            "safetensors: data_offsets past the end of the data",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}"#,
            d8,
            "safetensors: data_offsets begin after end",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: data_offsets length does not match dtype and shape",
        ),
        (
            r#"{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: data_offsets length does not match dtype and shape",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
            d8,
            "safetensors: tensors do not cover the data section (gap or trailing bytes)",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
            d8,
            "safetensors: tensors do not cover the data section (gap or trailing bytes)",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
            d8,
            "safetensors: tensors overlap",
        ),
        // Same total size, overlapping and leaving a gap: found by the slow path.
        (
            r#"{"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
            d8,
            "safetensors: tensors overlap",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[2,6]},"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"c":{"dtype":"U8","shape":[2],"data_offsets":[5,7]}}"#,
            d8,
            "safetensors: tensors overlap",
        ),
        (
            r#"{"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]},"c":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}"#,
            d8,
            "safetensors: tensors overlap",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}"#,
            d8,
            "safetensors: empty tensor inside another tensor's data",
        ),
        (
            r#"{"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: unknown dtype",
        ),
        (
            r#"{"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: unknown dtype",
        ),
        (
            r#"{"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: dtype is not a string",
        ),
        (
            r#"{"a":{"shape":[2],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: tensor entry without dtype",
        ),
        (
            r#"{"a":{"dtype":"F32","data_offsets":[0,8]}}"#,
            d8,
            "safetensors: tensor entry without shape",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2]}}"#,
            d8,
            "safetensors: tensor entry without data_offsets",
        ),
        (
            r#"{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: repeated field in a tensor entry",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"shape":[2]}}"#,
            d8,
            "safetensors: repeated field in a tensor entry",
        ),
        (
            r#"{"a":[1,2]}"#,
            d8,
            "safetensors: tensor entry is not an object",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: shape is not an array",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: shape entry is not a non-negative integer",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: shape entry is not a non-negative integer",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: shape entry is not a non-negative integer",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: shape entry is not a non-negative integer",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,2],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: more than 8 dimensions",
        ),
        (
            r#"{"a":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: tensor size overflows",
        ),
        (
            r#"{"a":{"dtype":"U8","shape":[99999999999999999999999],"data_offsets":[0,8]}}"#,
            d8,
            "safetensors: integer too large for this platform",
        ),
        (
            r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[6],"data_offsets":[2,8]}}"#,
            d8,
            "safetensors: sub-byte tensor is not a whole number of bytes",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}"#,
            d8,
            "safetensors: data_offsets must hold two integers",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}"#,
            d8,
            "safetensors: data_offsets must hold two integers",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}}"#,
            d8,
            "safetensors: data_offsets must hold two integers",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":{"0":8}}}"#,
            d8,
            "safetensors: data_offsets is not an array",
        ),
        (
            r#"{"__metadata__":{"format":1}}"#,
            &[],
            "safetensors: __metadata__ value is not a string",
        ),
        (
            r#"{"__metadata__":["pt"]}"#,
            &[],
            "safetensors: __metadata__ is not an object",
        ),
        (
            r#"{"__metadata__":{"a":"1","b":"2","a":"3"}}"#,
            &[],
            "safetensors: repeated name in the header",
        ),
    ];
    for (header, data, want) in cases {
        assert_eq!(what(header, data), *want, "{header}");
    }
}

#[test]
fn repeated_names_are_rejected() {
    let t = |name: &str, b: usize| {
        format!(
            r#""{name}":{{"dtype":"U8","shape":[1],"data_offsets":[{b},{}]}}"#,
            b + 1
        )
    };
    let h = |names: &[&str]| {
        let parts: Vec<String> = names.iter().enumerate().map(|(i, n)| t(n, i)).collect();
        format!("{{{}}}", parts.join(","))
    };
    let data = ramp(8);
    for names in [
        &["a", "a"][..],
        &["a", "b", "a"],
        &["b", "a", "b"],
        &["c", "d", "a", "b", "e", "d"],
        &["x", "a", "y", "b", "x"],
        &["a", "\\u0061"],
        &["z", "y", "x", "w", "v", "u", "z"],
        &["__metadata__", "__metadata__"],
    ] {
        let header = h(names);
        let d = &data[..names.len()];
        let e = parse_err(&header, d);
        // "__metadata__" twice fails on the first entry's type or on the repeat.
        match e {
            Error::Safetensors { what, offset } => {
                if names[0] != "__metadata__" {
                    assert_eq!(what, "safetensors: repeated name in the header", "{header}");
                    assert!(offset > 8, "{header}");
                }
            }
            e => panic!("{e:?}"),
        }
    }
    // Distinct names in any order are fine.
    for names in [
        &["a", "b"][..],
        &["b", "a"],
        &["c", "d", "a", "b", "e", "f"],
        &["z", "y", "x", "w", "v", "u", "t"],
        &["ab", "a", "b", "aa"],
    ] {
        let header = h(names);
        let f = file(&header, &data[..names.len()]);
        let st = SafeTensors::parse(&f).unwrap();
        assert_eq!(st.len(), names.len(), "{header}");
    }
}

/// A header of one-byte U8 tensors: `(name, begin)` in header order.
fn header_of(entries: &[(String, usize)]) -> String {
    let parts: Vec<String> = entries
        .iter()
        .map(|(name, b)| {
            format!(
                r#""{name}":{{"dtype":"U8","shape":[1],"data_offsets":[{b},{}]}}"#,
                b + 1
            )
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

fn one_byte_file(entries: &[(String, usize)]) -> Vec<u8> {
    file(&header_of(entries), &vec![0u8; entries.len()])
}

/// A deterministic permutation of 0..n.
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut s = seed | 1;
    for i in (1..n).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

#[test]
fn shuffled_headers_take_the_slow_paths() {
    // Names and data order both shuffled (sorted blocks for both checks).
    let n = 1000;
    let perm = shuffled(n, 7);
    let entries: Vec<(String, usize)> = perm
        .iter()
        .zip(shuffled(n, 11))
        .map(|(&name, off)| (format!("t{name:04}"), off))
        .collect();
    let f = one_byte_file(&entries);
    assert_eq!(SafeTensors::parse(&f).unwrap().len(), n);
    assert!(check_consistent(&f));
    // One repeated name, anywhere.
    for (i, j) in [(0, n - 1), (500, 501), (999, 3), (130, 260)] {
        let mut e = entries.clone();
        e[j].0 = e[i].0.clone();
        assert_eq!(
            what_file(&one_byte_file(&e)),
            "safetensors: repeated name in the header",
            "{i} {j}"
        );
    }
    // One overlap (two tensors at the same offset, so one byte is uncovered
    // too: the sizes still add up).
    for (i, j) in [(0, n - 1), (500, 501), (999, 3), (130, 260)] {
        let mut e = entries.clone();
        e[j].1 = e[i].1;
        assert_eq!(
            what_file(&one_byte_file(&e)),
            "safetensors: tensors overlap",
            "{i} {j}"
        );
    }
    // An empty tensor inside a 2-byte tensor, both far from the others.
    let e: Vec<(String, usize)> = entries.iter().filter(|x| x.1 < n - 2).cloned().collect();
    let mut h = header_of(&e);
    h.pop();
    h.push_str(&format!(
        r#","zz_empty":{{"dtype":"U8","shape":[0],"data_offsets":[{0},{0}]}},"zz_two":{{"dtype":"U8","shape":[2],"data_offsets":[{1},{2}]}}}}"#,
        n - 1,
        n - 2,
        n
    ));
    let f = file(&h, &vec![0u8; n]);
    assert_eq!(
        what_file(&f),
        "safetensors: empty tensor inside another tensor's data"
    );
    // The same empty tensor on a boundary is fine.
    let f = file(
        &h.replace(&format!("[{0},{0}]", n - 1), &format!("[{0},{0}]", n)),
        &vec![0u8; n],
    );
    assert!(check_consistent(&f));
}

#[test]
fn names_in_a_few_sorted_runs() {
    // 300 names in 3 sorted runs (t000 t003 .. | t001 t004 .. | t002 ..):
    // 3 runs <= 3 blocks, so the runs are merged pairwise.
    let mut names: Vec<usize> = Vec::new();
    for r in 0..3 {
        names.extend((0..300).filter(|i| i % 3 == r));
    }
    let entries: Vec<(String, usize)> = names
        .iter()
        .enumerate()
        .map(|(i, &k)| (format!("t{k:03}"), i))
        .collect();
    assert!(check_consistent(&one_byte_file(&entries)));
    // t149 (run 3) becomes t150, which run 1 holds; run 3 stays sorted.
    let mut e = entries.clone();
    let at = e.iter().position(|x| x.0 == "t149").unwrap();
    e[at].0 = "t150".into();
    assert_eq!(
        what_file(&one_byte_file(&e)),
        "safetensors: repeated name in the header"
    );
    // Same across runs 2 and 3, at the ends.
    let mut e = entries.clone();
    let last = e.len() - 1; // t299 in run 3
    e[last].0 = "t298".into(); // run 2 holds t298 (298 % 3 == 1)
    assert_eq!(
        what_file(&one_byte_file(&e)),
        "safetensors: repeated name in the header"
    );
}

#[test]
fn worst_order_headers_are_bounded() {
    // 3000 tensors, names and data both in reverse order: fine.
    let rev = |n: usize, names_sorted: bool| {
        let entries: Vec<(String, usize)> = (0..n)
            .map(|i| {
                let name = if names_sorted { i } else { n - 1 - i };
                (format!("t{name:05}"), n - 1 - i)
            })
            .collect();
        one_byte_file(&entries)
    };
    let f = rev(3000, false);
    let st = SafeTensors::parse(&f).unwrap();
    assert_eq!(st.len(), 3000);
    assert_eq!(st.tensor("t01234").unwrap().data().len(), 1);
    // 50,000 out of order would need 50000^2 / 128 > MAX_WORK entry visits:
    // refused, quickly, rather than taking quadratic time.
    assert!(50_000usize.div_ceil(128) * 50_000 > MAX_WORK);
    assert_eq!(
        what_file(&rev(50_000, false)),
        "safetensors: header too costly to check for repeated names"
    );
    assert_eq!(
        what_file(&rev(50_000, true)),
        "safetensors: header too costly to validate (too many tensors out of data order)"
    );
    // Sorted names in data order have no such limit.
    let entries: Vec<(String, usize)> = (0..50_000).map(|i| (format!("t{i:05}"), i)).collect();
    assert_eq!(
        SafeTensors::parse(&one_byte_file(&entries)).unwrap().len(),
        50_000
    );
}

fn what_file(f: &[u8]) -> &'static str {
    match SafeTensors::parse(f) {
        Err(Error::Safetensors { what, .. }) => what,
        r => panic!("{r:?}"),
    }
}

/// Random headers against a brute-force reference (a hash set for names, a
/// sort for ranges): sorted, few-run and shuffled names; in-order, shuffled
/// and perturbed offsets; sizes 0..3 so empty tensors occur.
#[test]
fn slow_paths_agree_with_a_brute_force_reference() {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % n.max(1) as u64) as usize
    };
    let (mut accepted, mut rejected) = (0, 0);
    for trial in 0..400 {
        let n = 1 + rnd(if trial % 4 == 0 { 400 } else { 150 });
        // Names: distinct, then maybe one repeated.
        let mut names: Vec<String> = (0..n).map(|i| format!("n{i:04}")).collect();
        match rnd(3) {
            0 => {} // sorted
            1 => {
                // a few sorted runs
                let k = 2 + rnd(4);
                let mut v = Vec::new();
                for r in 0..k {
                    v.extend(
                        names
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| i % k == r)
                            .map(|(_, x)| x.clone()),
                    );
                }
                names = v;
            }
            _ => {
                let p = shuffled(n, rnd(1 << 30) as u64);
                names = p.iter().map(|&i| names[i].clone()).collect();
            }
        }
        if n > 1 && rnd(3) == 0 {
            let (i, j) = (rnd(n), rnd(n));
            if i != j {
                names[j] = names[i].clone();
            }
        }
        // Sizes and a layout order.
        let sizes: Vec<usize> = (0..n).map(|_| rnd(3)).collect();
        let layout = if rnd(2) == 0 {
            (0..n).collect()
        } else {
            shuffled(n, rnd(1 << 30) as u64)
        };
        let mut begins = vec![0usize; n];
        let mut at = 0;
        for &t in &layout {
            begins[t] = at;
            at += sizes[t];
        }
        let mut data_len = at;
        match rnd(4) {
            0 => {
                let (i, j) = (rnd(n), rnd(n));
                begins[j] = begins[i];
            }
            1 => {
                let i = rnd(n);
                begins[i] = rnd(data_len + 1);
            }
            2 if rnd(4) == 0 => data_len += 1,
            _ => {}
        }
        let mut h = String::from("{");
        for i in 0..n {
            if i > 0 {
                h.push(',');
            }
            h.push_str(&format!(
                r#""{}":{{"dtype":"U8","shape":[{}],"data_offsets":[{},{}]}}"#,
                names[i],
                sizes[i],
                begins[i],
                begins[i] + sizes[i]
            ));
        }
        h.push('}');
        let f = file(&h, &vec![0u8; data_len]);

        let unique = names.iter().collect::<std::collections::HashSet<_>>().len() == n;
        let in_bounds = (0..n).all(|i| begins[i] + sizes[i] <= data_len);
        let mut ranges: Vec<(usize, usize)> = (0..n)
            .filter(|&i| sizes[i] > 0)
            .map(|i| (begins[i], begins[i] + sizes[i]))
            .collect();
        ranges.sort();
        let mut cur = 0;
        let mut tiles = true;
        for &(b, e) in &ranges {
            tiles &= b == cur;
            cur = e;
        }
        tiles &= cur == data_len;
        let empties_ok = (0..n)
            .filter(|&i| sizes[i] == 0)
            .all(|i| !ranges.iter().any(|&(b, e)| b < begins[i] && begins[i] < e));
        let want = unique && in_bounds && tiles && empties_ok;
        let got = SafeTensors::parse(&f);
        assert_eq!(got.is_ok(), want, "trial {trial}: {h} -> {got:?}");
        // Names are checked before entries: a repeat is always what is reported.
        if !unique {
            assert!(matches!(
                got,
                Err(Error::Safetensors {
                    what: "safetensors: repeated name in the header",
                    ..
                })
            ));
        }
        if want {
            accepted += 1;
        } else {
            rejected += 1;
        }
    }
    println!("{accepted} accepted, {rejected} rejected, as the reference says");
    assert!(accepted > 50 && rejected > 50);
}
