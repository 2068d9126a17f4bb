//! The GGUF parser and the ggml dequantizers.
//!
//! * Dequantization of every type is compared bit for bit with gguf-py
//!   (tests/vectors/gen_gguf_vectors.py writes the vectors).
//! * The parser reads the small files that script wrote with gguf.GGUFWriter
//!   (the metadata values below are the script's), and the Qwen2 fixture
//!   files in tests/fixtures (see tests/fixtures/PROVENANCE.md).
//! * Corrupted files (every truncation, byte flips, and hand-built files with
//!   each kind of bad field) give errors, never panics.

use kestrel_core::gguf::{
    dequantize_row, error_tensor_name, GgmlType, Gguf, TensorInfo, Value, ValueType,
};
use kestrel_core::Error;
use kestrel_tests::f32s;
use std::panic::{catch_unwind, AssertUnwindSafe};

macro_rules! vectors {
    ($($ty:ident => $name:literal),* $(,)?) => {
        [$((
            GgmlType::$ty,
            &include_bytes!(concat!("../vectors/gguf/", $name, ".bin"))[..],
            &include_bytes!(concat!("../vectors/gguf/", $name, ".f32"))[..],
        )),*]
    };
}

static META_ALL: &[u8] = include_bytes!("../vectors/gguf/meta_all.gguf");
static ALIGN64: &[u8] = include_bytes!("../vectors/gguf/align64.gguf");
static EMPTY: &[u8] = include_bytes!("../vectors/gguf/empty.gguf");
static QWEN2_Q8_0: &[u8] = include_bytes!("../fixtures/dev_qwen2_dense/gguf/model-q8_0.gguf");
static QWEN2_Q4_0: &[u8] = include_bytes!("../fixtures/dev_qwen2_dense/gguf/model-q4_0.gguf");

/// The tensors of meta_all.gguf, as the script lists them: name, type, ne.
const TENSORS: &[(&str, GgmlType, &[u64])] = &[
    ("t.f32", GgmlType::F32, &[7]),
    ("t.f16", GgmlType::F16, &[8, 2, 2]),
    ("t.q4_0", GgmlType::Q4_0, &[64, 2]),
    ("t.q4_1", GgmlType::Q4_1, &[32, 3]),
    ("t.q5_0", GgmlType::Q5_0, &[32, 1, 2]),
    ("t.q5_1", GgmlType::Q5_1, &[96]),
    ("t.q8_0", GgmlType::Q8_0, &[64, 3]),
    ("t.q8_1", GgmlType::Q8_1, &[32, 2]),
    ("t.q2_k", GgmlType::Q2_K, &[256]),
    ("t.q3_k", GgmlType::Q3_K, &[256, 2]),
    ("t.q4_k", GgmlType::Q4_K, &[512, 1]),
    ("t.q5_k", GgmlType::Q5_K, &[256, 1, 1, 2]),
    ("t.q6_k", GgmlType::Q6_K, &[256, 2]),
    ("t.q8_k", GgmlType::Q8_K, &[256]),
    ("t.bf16", GgmlType::BF16, &[6, 5]),
];

/// The script's tensor bytes: byte j of tensor k is (j*31 + k*17 + 5) % 251.
fn pattern(k: usize, n: usize) -> Vec<u8> {
    (0..n)
        .map(|j| ((j * 31 + k * 17 + 5) % 251) as u8)
        .collect()
}

// ---- dequantization ------------------------------------------------------

#[test]
fn dequantization_matches_gguf_py_bit_for_bit() {
    let all = vectors![
        F32 => "f32", F16 => "f16", BF16 => "bf16",
        Q4_0 => "q4_0", Q4_1 => "q4_1", Q5_0 => "q5_0", Q5_1 => "q5_1", Q8_0 => "q8_0",
        Q2_K => "q2_k", Q3_K => "q3_k", Q4_K => "q4_k", Q5_K => "q5_k", Q6_K => "q6_k",
        Q8_K => "q8_k", IQ4_NL => "iq4_nl", IQ4_XS => "iq4_xs", IQ3_XXS => "iq3_xxs",
        IQ3_S => "iq3_s", IQ2_XXS => "iq2_xxs", IQ2_XS => "iq2_xs", IQ2_S => "iq2_s",
    ];
    let covered: Vec<GgmlType> = all.iter().map(|v| v.0).collect();
    for ty in GgmlType::ALL {
        assert_eq!(covered.contains(&ty), ty.can_dequantize(), "{ty:?}");
    }
    for (ty, bytes, want) in all {
        let want = f32s(want);
        let n = bytes.len() / ty.type_size() * ty.block_size();
        assert_eq!(n, want.len(), "{ty:?}");
        let mut got = vec![0f32; n];
        dequantize_row(ty, bytes, &mut got).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{ty:?} value {i}: {g} vs {w}");
        }
        // Block by block gives the same values.
        let mut one = vec![0f32; ty.block_size()];
        for (b, w) in bytes
            .chunks_exact(ty.type_size())
            .zip(want.chunks_exact(ty.block_size()))
        {
            dequantize_row(ty, b, &mut one).unwrap();
            assert!(one.iter().zip(w).all(|(g, w)| g.to_bits() == w.to_bits()));
        }
        println!(
            "{}: {n} values bit-identical to gguf-py on {}",
            ty.name(),
            std::env::consts::ARCH
        );
    }
}

#[test]
fn f16_signalling_nan_is_quieted_as_ggml_does() {
    // numpy keeps an f16 sNaN signalling when widening; ggml's
    // GGML_FP16_TO_FP32 (F16C, ARM fcvt, software path) and kestrel quiet it.
    let mut out = [0f32; 2];
    dequantize_row(GgmlType::F16, &[0x01, 0x7c, 0x00, 0x7e], &mut out).unwrap();
    assert_eq!(out[0].to_bits(), 0x7fc0_2000);
    assert_eq!(out[1].to_bits(), 0x7fc0_0000);
}

#[test]
fn type_sizes_are_ggml_s() {
    let sizes = [
        (GgmlType::F32, 0, 1, 4),
        (GgmlType::F16, 1, 1, 2),
        (GgmlType::Q4_0, 2, 32, 18),
        (GgmlType::Q4_1, 3, 32, 20),
        (GgmlType::Q5_0, 6, 32, 22),
        (GgmlType::Q5_1, 7, 32, 24),
        (GgmlType::Q8_0, 8, 32, 34),
        (GgmlType::Q8_1, 9, 32, 36),
        (GgmlType::Q2_K, 10, 256, 84),
        (GgmlType::Q3_K, 11, 256, 110),
        (GgmlType::Q4_K, 12, 256, 144),
        (GgmlType::Q5_K, 13, 256, 176),
        (GgmlType::Q6_K, 14, 256, 210),
        (GgmlType::Q8_K, 15, 256, 292),
        (GgmlType::IQ4_NL, 20, 32, 18),
        (GgmlType::IQ2_XXS, 16, 256, 66),
        (GgmlType::IQ2_XS, 17, 256, 74),
        (GgmlType::IQ2_S, 22, 256, 82),
        (GgmlType::IQ3_XXS, 18, 256, 98),
        (GgmlType::IQ3_S, 21, 256, 110),
        (GgmlType::IQ4_XS, 23, 256, 136),
        (GgmlType::BF16, 30, 1, 2),
    ];
    for (ty, id, bs, ts) in sizes {
        assert_eq!((ty.id(), ty.block_size(), ty.type_size()), (id, bs, ts));
        assert_eq!(GgmlType::from_id(id), Some(ty));
    }
    for id in [4, 5, 19, 24, 29, 31, 39, u32::MAX] {
        assert_eq!(GgmlType::from_id(id), None);
    }
}

// ---- the files gguf-py wrote -----------------------------------------------

fn exercise(g: &Gguf<'_>) {
    // Walks everything a caller can reach; must not panic whatever the file.
    for (k, v) in g.kvs() {
        assert!(g.metadata(k).is_some());
        if let Value::Array(a) = v {
            assert_eq!(a.iter().count(), a.len());
            let _ = a.get(a.len().saturating_sub(1));
            let _ = a.get(a.len());
        }
        let _ = (v.as_u32(), v.as_i64(), v.as_f32(), v.as_str());
    }
    let mut out = Vec::new();
    for t in g.tensors() {
        assert_eq!(g.tensor(t.name()).map(|u| u.index()), Some(t.index()));
        assert_eq!(t.data().len() as u64, t.n_rows() * t.row_bytes() as u64);
        if t.ggml_type().can_dequantize() {
            out.resize(t.row_len() as usize, 0.0);
            for r in 0..t.n_rows() {
                dequantize_row(t.ggml_type(), t.row(r).unwrap(), &mut out).unwrap();
            }
        }
    }
}

fn check_meta_all(g: &Gguf<'_>) {
    assert_eq!(g.alignment(), 32);
    assert_eq!(g.kv_count(), 1 + 16 + 12);
    assert_eq!(g.tensor_count(), TENSORS.len());
    assert_eq!(g.get_str("general.architecture"), Some("kestrel-test"));

    let m = |k: &str| g.metadata(k).unwrap_or_else(|| panic!("missing {k}"));
    assert_eq!(m("t.u8"), Value::U8(200));
    assert_eq!(m("t.i8"), Value::I8(-100));
    assert_eq!(m("t.u16"), Value::U16(60000));
    assert_eq!(m("t.i16"), Value::I16(-30000));
    assert_eq!(m("t.u32"), Value::U32(4_000_000_000));
    assert_eq!(m("t.i32"), Value::I32(-2_000_000_000));
    assert_eq!(m("t.u64"), Value::U64((1 << 63) + 5));
    assert_eq!(m("t.i64"), Value::I64(-(1 << 62) - 3));
    assert_eq!(m("t.f32"), Value::F32(0.1));
    assert_eq!(m("t.f64"), Value::F64(-2.5e-300));
    assert_eq!(m("t.true"), Value::Bool(true));
    assert_eq!(m("t.false"), Value::Bool(false));
    assert_eq!(m("t.str").as_str(), Some("héllo wörld ✓"));
    assert_eq!(m("t.empty_str"), Value::Str(b""));
    assert_eq!(m("t.str").value_type(), ValueType::Str);
    assert!(g.metadata("t.missing").is_none());
    assert!(g.metadata("t.u").is_none());

    // Integer accessors take any width where the value fits.
    assert_eq!(g.get_u32("t.small"), Some(7));
    assert_eq!(g.get_u64("t.small"), Some(7));
    assert_eq!(g.get_u32("t.u16"), Some(60000));
    assert_eq!(g.get_u32("t.neg"), None);
    assert_eq!(g.get_i64("t.neg"), Some(-1));
    assert_eq!(g.get_u32("t.u64"), None);
    assert_eq!(g.get_u64("t.u64"), Some((1 << 63) + 5));
    assert_eq!(g.get_i64("t.u64"), None);
    assert_eq!(g.get_i64("t.i64"), Some(-(1 << 62) - 3));
    assert_eq!(g.get_f32("t.f32"), Some(0.1));
    assert_eq!(g.get_f32("t.f64"), Some(-0.0)); // rounds to f32
    assert_eq!(g.get_f32("t.u8"), None);
    assert_eq!(g.get_bool("t.true"), Some(true));
    assert_eq!(g.get_str("t.u8"), None);
    assert_eq!(g.get_u32("t.str"), None);

    let ints = |k: &str| -> Vec<i128> {
        let a = g.get_array(k).unwrap();
        a.iter()
            .map(|v| v.as_i64().map(i128::from).or(v.as_u64().map(i128::from)))
            .map(Option::unwrap)
            .collect()
    };
    assert_eq!(ints("t.arr.u8"), [0, 1, 255]);
    assert_eq!(ints("t.arr.i8"), [-128, 0, 127]);
    assert_eq!(ints("t.arr.u16"), [0, 65535]);
    assert_eq!(ints("t.arr.i16"), [-32768, 32767]);
    assert_eq!(ints("t.arr.u32"), [0, 4294967295]);
    assert_eq!(ints("t.arr.i32"), [-2147483648, 2147483647, 0]);
    assert_eq!(ints("t.arr.u64"), [0, u64::MAX.into()]);
    assert_eq!(ints("t.arr.i64"), [i64::MIN.into(), i64::MAX.into()]);
    for (k, ty) in [
        ("t.arr.u8", ValueType::U8),
        ("t.arr.i8", ValueType::I8),
        ("t.arr.u16", ValueType::U16),
        ("t.arr.i16", ValueType::I16),
        ("t.arr.u32", ValueType::U32),
        ("t.arr.i32", ValueType::I32),
        ("t.arr.u64", ValueType::U64),
        ("t.arr.i64", ValueType::I64),
        ("t.arr.f32", ValueType::F32),
        ("t.arr.f64", ValueType::F64),
        ("t.arr.bool", ValueType::Bool),
        ("t.arr.str", ValueType::Str),
    ] {
        assert_eq!(g.get_array(k).unwrap().elem_type(), ty, "{k}");
    }
    let f: Vec<Value> = g.get_array("t.arr.f32").unwrap().iter().collect();
    assert_eq!(f, [Value::F32(0.5), Value::F32(-1.25), Value::F32(1e30)]);
    let f: Vec<Value> = g.get_array("t.arr.f64").unwrap().into_iter().collect();
    assert_eq!(f, [Value::F64(0.1), Value::F64(-1e300)]);
    let b: Vec<Value> = g.get_array("t.arr.bool").unwrap().iter().collect();
    assert_eq!(
        b,
        [Value::Bool(true), Value::Bool(false), Value::Bool(true)]
    );
    let s = g.get_array("t.arr.str").unwrap();
    let strs: Vec<&str> = s.iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(strs, ["a", "", "ünï ✓", "tab\tnl\n"]);
    assert_eq!(s.len(), 4);
    assert_eq!(s.iter().len(), 4);
    assert_eq!(s.get(2).and_then(|v| v.as_str()), Some("ünï ✓"));
    assert_eq!(s.get(4), None);
    let u = g.get_array("t.arr.u32").unwrap();
    assert_eq!(u.get(1), Some(Value::U32(u32::MAX)));
    assert_eq!(u.get(2), None);
    assert_eq!(u.bytes(), [0, 0, 0, 0, 255, 255, 255, 255]);

    // Keys in file order.
    let keys: Vec<&str> = g.kvs().map(|(k, _)| k).collect();
    assert_eq!(keys[0], "general.architecture");
    assert_eq!(keys[1], "t.u8");
    assert_eq!(keys[28], "t.arr.str");

    // Tensors: names, types, shapes, offsets, data.
    let mut prev_end = 0;
    for (k, (t, &(name, ty, ne))) in g.tensors().zip(TENSORS).enumerate() {
        assert_eq!((t.name(), t.ggml_type(), t.dims()), (name, ty, ne), "{k}");
        assert_eq!(t.index(), k);
        let n: u64 = ne.iter().product();
        assert_eq!(t.n_elements(), n);
        assert_eq!(t.row_len(), ne[0]);
        assert_eq!(t.n_rows(), n / ne[0]);
        let mut ne4 = [1u64; 4];
        ne4[..ne.len()].copy_from_slice(ne);
        assert_eq!(t.ne(), ne4);
        let nbytes = (n / ty.block_size() as u64) as usize * ty.type_size();
        assert_eq!(t.data(), pattern(k, nbytes), "{name} data");
        assert_eq!(t.offset() % 32, 0);
        assert!(t.offset() >= prev_end);
        prev_end = t.offset() + nbytes as u64;
        let start = g.data_offset() + t.offset() as usize;
        assert_eq!(t.data().as_ptr(), g.bytes()[start..].as_ptr(), "zero copy");
        assert_eq!(g.tensor(name), Some(t));
        let rb = t.row_bytes();
        assert_eq!(t.row(0), Some(&t.data()[..rb]));
        assert_eq!(t.row(t.n_rows()), None);
    }
    assert_eq!(g.data_offset() % 32, 0);
    assert!(g.tensor("t.missing").is_none());
    exercise(g);
}

#[test]
fn parses_gguf_py_files() {
    let g = Gguf::parse(META_ALL).unwrap();
    assert_eq!(g.version(), 3);
    check_meta_all(&g);

    // Version 2 has the same layout (64-bit counts and lengths).
    let mut v2 = META_ALL.to_vec();
    v2[4..8].copy_from_slice(&2u32.to_le_bytes());
    let g2 = Gguf::parse(&v2).unwrap();
    assert_eq!(g2.version(), 2);
    check_meta_all(&g2);

    let a = Gguf::parse(ALIGN64).unwrap();
    assert_eq!(a.alignment(), 64);
    assert_eq!(a.get_u32("general.alignment"), Some(64));
    assert_eq!(a.data_offset() % 64, 0);
    let names: Vec<&str> = a.tensors().map(|t| t.name()).collect();
    assert_eq!(names, ["a.f32", "a.q8_0", "a.f16"]);
    for (k, t) in a.tensors().enumerate() {
        assert_eq!(t.offset() % 64, 0);
        assert_eq!(t.data(), pattern(k, t.data().len()));
    }
    assert_eq!(a.tensor("a.q8_0").unwrap().data().len(), 34);
    exercise(&a);

    let e = Gguf::parse(EMPTY).unwrap();
    assert_eq!((e.tensor_count(), e.kv_count()), (0, 2));
    assert_eq!(e.get_u32("e.count"), Some(0));
    assert_eq!(e.get_str("general.architecture"), Some("kestrel-empty"));
    assert_eq!(e.tensors().count(), 0);
}

#[test]
fn parses_the_qwen2_fixtures() {
    for (file, ty, ftype) in [
        (QWEN2_Q8_0, GgmlType::Q8_0, 7),
        (QWEN2_Q4_0, GgmlType::Q4_0, 2),
    ] {
        let g = Gguf::parse(file).unwrap();
        assert_eq!(g.version(), 3);
        assert_eq!(g.get_str("general.architecture"), Some("qwen2"));
        assert_eq!(g.get_u32("qwen2.block_count"), Some(2));
        assert_eq!(g.get_u32("qwen2.embedding_length"), Some(128));
        assert_eq!(g.get_u32("qwen2.feed_forward_length"), Some(320));
        assert_eq!(g.get_u32("qwen2.attention.head_count"), Some(4));
        assert_eq!(g.get_u32("qwen2.attention.head_count_kv"), Some(2));
        assert_eq!(g.get_f32("qwen2.rope.freq_base"), Some(1_000_000.0));
        assert_eq!(g.get_u32("general.file_type"), Some(ftype));
        assert_eq!(g.get_u32("tokenizer.ggml.eos_token_id"), Some(472));
        assert_eq!(g.get_bool("tokenizer.ggml.add_bos_token"), Some(false));
        let tokens = g.get_array("tokenizer.ggml.tokens").unwrap();
        assert_eq!(tokens.elem_type(), ValueType::Str);
        assert_eq!(tokens.len(), 640);
        assert_eq!(tokens.iter().filter(|v| v.as_str().is_some()).count(), 640);
        let types = g.get_array("tokenizer.ggml.token_type").unwrap();
        assert_eq!((types.elem_type(), types.len()), (ValueType::I32, 640));
        assert_eq!(g.get_array("tokenizer.ggml.merges").unwrap().len(), 214);

        assert_eq!(g.tensor_count(), 26);
        let emb = g.tensor("token_embd.weight").unwrap();
        // Debug prints sizes, not the file's bytes.
        assert!(format!("{g:?} {emb:?} {tokens:?} {:?}", g.tensors()).len() < 400);
        assert_eq!((emb.dims(), emb.ggml_type()), (&[128u64, 640][..], ty));
        let norm = g.tensor("output_norm.weight").unwrap();
        assert_eq!(
            (norm.dims(), norm.ggml_type()),
            (&[128u64][..], GgmlType::F32)
        );
        let mut n_values = 0;
        for t in g.tensors() {
            assert!(t.ggml_type() == ty || t.ggml_type() == GgmlType::F32);
            let mut out = vec![0f32; t.row_len() as usize];
            for r in 0..t.n_rows() {
                dequantize_row(t.ggml_type(), t.row(r).unwrap(), &mut out).unwrap();
                assert!(out.iter().all(|v| v.is_finite()), "{}", t.name());
                n_values += out.len();
            }
        }
        println!("{}: 26 tensors, {n_values} weights dequantized", ty.name());
        exercise(&g);
    }
}

// ---- corrupted files -----------------------------------------------------

/// Parses `bytes` and walks the result, turning a panic into a test failure
/// that names `what`.
fn parse_no_panic(bytes: &[u8], what: &dyn Fn() -> String) -> Result<(), Error> {
    match catch_unwind(AssertUnwindSafe(|| {
        // Walking big files in full after every flip is slow under qemu;
        // their metadata and tensor infos are still walked.
        Gguf::parse(bytes).map(|g| {
            if bytes.len() < 100_000 {
                exercise(&g)
            } else {
                let _ = (g.kvs().count(), g.tensors().count());
            }
        })
    })) {
        Ok(r) => r,
        Err(_) => panic!("panic on {}", what()),
    }
}

/// Where the data the file needs ends: everything after it is padding.
fn needed_len(bytes: &[u8]) -> usize {
    let g = Gguf::parse(bytes).unwrap();
    g.tensors()
        .map(|t| g.data_offset() + t.offset() as usize + t.data().len())
        .max()
        .unwrap_or(0)
}

#[test]
fn every_truncation_is_an_error() {
    for (name, file) in [
        ("meta_all", META_ALL),
        ("align64", ALIGN64),
        ("empty", EMPTY),
    ] {
        let need = needed_len(file);
        let mut first_ok = None;
        for cut in 0..file.len() {
            let r = parse_no_panic(&file[..cut], &|| format!("{name} cut at {cut}"));
            match (r, first_ok) {
                (Ok(()), None) => first_ok = Some(cut),
                (Err(_), Some(ok)) => panic!("{name}: cut at {cut} fails but {ok} parses"),
                _ => {}
            }
        }
        // Only the trailing padding may go (the header needs no padding
        // when there are no tensors).
        match first_ok {
            Some(ok) if need > 0 => assert_eq!(ok, need, "{name}"),
            Some(ok) => assert!(ok + 32 > file.len() && ok > 24, "{name}: {ok}"),
            None => assert_eq!(need, file.len(), "{name}"),
        }
        println!("{name}: all {} truncations handled", file.len());
    }
    let need = needed_len(QWEN2_Q4_0);
    for cut in (0..QWEN2_Q4_0.len()).step_by(7) {
        let r = parse_no_panic(&QWEN2_Q4_0[..cut], &|| format!("qwen2 cut at {cut}"));
        assert_eq!(r.is_ok(), cut >= need, "qwen2 cut at {cut}");
    }
}

#[test]
fn byte_flips_never_panic() {
    let mut n_ok = 0;
    let mut n_err = 0;
    for file in [META_ALL, ALIGN64, EMPTY] {
        let header_end = Gguf::parse(file).unwrap().data_offset().min(file.len());
        for at in 0..file.len() {
            for op in 0..6 {
                let mut b = file.to_vec();
                b[at] = match op {
                    0 => b[at] ^ 0xff,
                    1 => b[at] ^ 0x01,
                    2 => b[at] ^ 0x80,
                    3 => 0x00,
                    4 => 0xff,
                    _ => b[at].wrapping_add(1),
                };
                let r = parse_no_panic(&b, &|| format!("flip {op} at {at}"));
                if at >= header_end {
                    // Tensor data and padding are not interpreted.
                    assert!(r.is_ok(), "flip {op} at {at} in the data: {r:?}");
                }
                if r.is_ok() {
                    n_ok += 1
                } else {
                    n_err += 1
                }
            }
        }
    }
    // The qwen2 header (its tokenizer strings) with a coarser stride.
    let header_end = Gguf::parse(QWEN2_Q8_0).unwrap().data_offset();
    for at in (0..header_end).step_by(3) {
        let mut b = QWEN2_Q8_0.to_vec();
        b[at] ^= 0xff;
        if parse_no_panic(&b, &|| format!("qwen2 flip at {at}")).is_ok() {
            n_ok += 1
        } else {
            n_err += 1
        }
    }
    println!("byte flips: {n_ok} parsed (harmless), {n_err} rejected");
    assert!(n_err > 0 && n_ok > 0);
}

#[test]
fn rejects_bad_versions_and_magic() {
    let mut b = META_ALL.to_vec();
    b[0] = b'g';
    assert_eq!(
        Gguf::parse(&b).unwrap_err(),
        Error::Malformed {
            what: "magic is not \"GGUF\"",
            at: 0
        }
    );
    for v in [0u32, 1, 4, 0x0300_0000, u32::MAX] {
        let mut b = META_ALL.to_vec();
        b[4..8].copy_from_slice(&v.to_le_bytes());
        match Gguf::parse(&b) {
            Err(Error::Unsupported { value, what }) => {
                assert_eq!(value, v as u64);
                assert!(what.starts_with("GGUF version"));
            }
            r => panic!("version {v}: {r:?}"),
        }
    }
    assert!(Gguf::parse(b"").is_err());
    assert!(Gguf::parse(b"GGUF").is_err());
    assert!(Gguf::parse(b"GGUF\x03\x00\x00\x00").is_err());
}

/// Builds GGUF files field by field, so each check can be hit on its own.
#[derive(Clone)]
struct Builder {
    version: u32,
    n_kv: u64,
    kvs: Vec<u8>,
    n_tensors: u64,
    infos: Vec<u8>,
    align: usize,
    data: Vec<u8>,
}

fn gstr(out: &mut Vec<u8>, s: &[u8]) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s);
}

impl Builder {
    fn new() -> Builder {
        Builder {
            version: 3,
            n_kv: 0,
            kvs: Vec::new(),
            n_tensors: 0,
            infos: Vec::new(),
            align: 32,
            data: Vec::new(),
        }
    }

    /// A metadata entry with a raw type id and raw value bytes.
    fn kv(mut self, key: &[u8], ty: u32, value: &[u8]) -> Builder {
        gstr(&mut self.kvs, key);
        self.kvs.extend(ty.to_le_bytes());
        self.kvs.extend(value);
        self.n_kv += 1;
        self
    }

    fn kv_u32(self, key: &str, v: u32) -> Builder {
        self.kv(key.as_bytes(), 4, &v.to_le_bytes())
    }

    /// A tensor info with raw fields.
    fn tensor(mut self, name: &[u8], ne: &[u64], ty: u32, offset: u64) -> Builder {
        gstr(&mut self.infos, name);
        self.infos.extend((ne.len() as u32).to_le_bytes());
        for d in ne {
            self.infos.extend(d.to_le_bytes());
        }
        self.infos.extend(ty.to_le_bytes());
        self.infos.extend(offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }

    fn data(mut self, n: usize) -> Builder {
        self.data = pattern(9, n);
        self
    }

    fn build(&self) -> Vec<u8> {
        let mut f = b"GGUF".to_vec();
        f.extend(self.version.to_le_bytes());
        f.extend(self.n_tensors.to_le_bytes());
        f.extend(self.n_kv.to_le_bytes());
        f.extend(&self.kvs);
        f.extend(&self.infos);
        while !f.len().is_multiple_of(self.align) {
            f.push(0);
        }
        f.extend(&self.data);
        f
    }
}

/// A small valid file: two metadata entries and two F32 tensors of 8 weights.
fn valid() -> Builder {
    Builder::new()
        .kv_u32("a.count", 3)
        .kv(
            b"a.name",
            8,
            &[5, 0, 0, 0, 0, 0, 0, 0, b'h', b'e', b'l', b'l', b'o'],
        )
        .tensor(b"w0", &[8], 0, 0)
        .tensor(b"w1", &[4, 2], 0, 32)
        .data(64)
}

fn err(b: &Builder) -> Error {
    let f = b.build();
    match parse_no_panic(&f, &|| "a built file".into()) {
        Ok(()) => panic!("parsed"),
        Err(e) => e,
    }
}

fn malformed(b: &Builder) -> &'static str {
    match err(b) {
        Error::Malformed { what, .. } => what,
        e => panic!("not Malformed: {e:?}"),
    }
}

/// The `what` and `value` of a BadTensor error, checking it names `name`.
fn bad_tensor(b: &Builder, name: &str) -> (&'static str, u64) {
    let f = b.build();
    let e = err(b);
    assert_eq!(error_tensor_name(&f, &e), Some(name), "{e}");
    match e {
        Error::BadTensor { what, value, .. } => (what, value),
        e => panic!("not BadTensor: {e:?}"),
    }
}

#[test]
fn builder_files_parse() {
    let f = valid().build();
    let g = Gguf::parse(&f).unwrap();
    assert_eq!(g.get_u32("a.count"), Some(3));
    assert_eq!(g.get_str("a.name"), Some("hello"));
    let w1: TensorInfo = g.tensor("w1").unwrap();
    assert_eq!((w1.dims(), w1.data().len()), (&[4u64, 2][..], 32));
    // Gaps between tensors are allowed (llama.cpp requires none); the data
    // only has to fit; n_dims 0 is a one-weight tensor; empty arrays, empty
    // keys and a uint32 alignment are fine.
    let f = Builder::new()
        .kv(b"", 4, &[0; 4])
        .kv(b"empty", 9, &[[4, 0, 0, 0], [0; 4], [0; 4]].concat())
        .kv_u32("general.alignment", 16)
        .tensor(b"s", &[], 0, 0)
        .tensor(b"v", &[4], 1, 48)
        .data(56);
    let mut f16 = f.clone();
    f16.align = 16;
    let bytes = f16.build();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.alignment(), 16);
    assert_eq!(g.tensor("s").unwrap().n_elements(), 1);
    assert_eq!(g.tensor("s").unwrap().dims(), &[] as &[u64]);
    assert_eq!(g.tensor("v").unwrap().data().len(), 8);
    let empty = g.get_array("empty").unwrap();
    assert!(empty.is_empty() && empty.iter().next().is_none());
    assert_eq!(g.get_u32(""), Some(0));
    exercise(&g);
}

#[test]
fn rejects_bad_counts_and_lengths() {
    let mut b = valid();
    for n in [u64::MAX, 1 << 40, 1 << 20, 100] {
        b.n_kv = n;
        assert!(matches!(err(&b), Error::Malformed { .. }), "n_kv {n}");
    }
    b.n_kv = 0; // the entries are then read as tensor infos: garbage
    assert!(Gguf::parse(&b.build()).is_err());
    let mut b = valid();
    for n in [u64::MAX, 1 << 40, 1 << 20, 100, 3] {
        b.n_tensors = n;
        assert!(Gguf::parse(&b.build()).is_err(), "n_tensors {n}");
    }
    assert_eq!(
        malformed(&Builder {
            n_kv: u64::MAX,
            ..Builder::new()
        }),
        "metadata count is larger than the file can hold"
    );
    assert_eq!(
        malformed(&Builder {
            n_tensors: 1 << 60,
            ..Builder::new()
        }),
        "tensor count is larger than the file can hold"
    );

    // Huge string lengths: a key, a string value, a string in an array.
    for len in [u64::MAX, u64::MAX / 2, 1 << 32, 1000] {
        let mut b = Builder::new();
        b.kvs.extend(len.to_le_bytes());
        b.kvs.extend(b"abcdefghijklmnop");
        b.n_kv = 1;
        assert!(malformed(&b).contains("key"), "key length {len}");
        let v = [len.to_le_bytes().as_slice(), b"abc"].concat();
        assert!(malformed(&Builder::new().kv(b"k", 8, &v)).contains("string"));
        let v = [
            &8u32.to_le_bytes()[..],
            &1u64.to_le_bytes(),
            &len.to_le_bytes(),
        ]
        .concat();
        assert!(malformed(&Builder::new().kv(b"k", 9, &v)).contains("string"));
    }
    // Huge array counts, whose byte size overflows or exceeds the file.
    for (elem, n) in [
        (4u32, u64::MAX),
        (4, u64::MAX / 4 + 1),
        (10, 1 << 61),
        (0, 1 << 40),
        (8, u64::MAX),
        (8, 3),
        (12, 2),
    ] {
        let v = [&elem.to_le_bytes()[..], &n.to_le_bytes(), &[0; 9]].concat();
        assert_eq!(
            malformed(&Builder::new().kv(b"k", 9, &v)),
            "array length exceeds the file",
            "elem {elem} n {n}"
        );
    }
}

#[test]
fn rejects_bad_metadata() {
    for ty in [13u32, 100, u32::MAX] {
        assert_eq!(
            malformed(&Builder::new().kv(b"k", ty, &[0; 8])),
            "unknown metadata value type"
        );
        let v = [&ty.to_le_bytes()[..], &1u64.to_le_bytes(), &[0; 8]].concat();
        assert_eq!(
            malformed(&Builder::new().kv(b"k", 9, &v)),
            "unknown array element type"
        );
    }
    let nested = [
        &9u32.to_le_bytes()[..],
        &1u64.to_le_bytes(),
        &4u32.to_le_bytes(),
        &0u64.to_le_bytes(),
    ]
    .concat();
    assert_eq!(
        malformed(&Builder::new().kv(b"k", 9, &nested)),
        "nested arrays are not supported"
    );
    assert_eq!(
        malformed(&Builder::new().kv(b"k", 7, &[2])),
        "bool value is neither 0 nor 1"
    );
    let bools = [&7u32.to_le_bytes()[..], &3u64.to_le_bytes(), &[1, 0, 7]].concat();
    assert_eq!(
        malformed(&Builder::new().kv(b"k", 9, &bools)),
        "bool value is neither 0 nor 1"
    );
    assert_eq!(
        malformed(&Builder::new().kv(b"k\xff", 4, &[0; 4])),
        "string is not valid UTF-8"
    );
    // Non-UTF-8 string values are kept (as bytes).
    let f = Builder::new()
        .kv(b"k", 8, &[[1, 0, 0, 0, 0, 0, 0, 0, 0xff]].concat())
        .build();
    let g = Gguf::parse(&f).unwrap();
    assert_eq!(g.metadata("k"), Some(Value::Str(b"\xff")));
    assert_eq!(g.get_str("k"), None);
    // A value cut short by the end of the file.
    let b = Builder::new().kv(b"k", 10, &[0; 7]);
    let mut f = b.build();
    f.truncate(24 + b.kvs.len()); // no alignment padding to read instead
    match Gguf::parse(&f) {
        Err(Error::Malformed { what, at }) => {
            assert_eq!(
                (what, at),
                ("metadata value runs past the end of the file", 37)
            )
        }
        r => panic!("{r:?}"),
    }
    // Duplicate keys, near and far apart (past the 64-name chunk).
    let dup = Builder::new().kv_u32("a", 1).kv_u32("a", 2);
    assert_eq!(malformed(&dup), "duplicate metadata key");
    let mut b = Builder::new();
    for i in 0..150 {
        b = b.kv_u32(&format!("k{i}"), i);
    }
    assert!(Gguf::parse(&b.build()).is_ok());
    assert_eq!(
        malformed(&b.clone().kv_u32("k3", 0)),
        "duplicate metadata key"
    );
    assert_eq!(malformed(&b.kv_u32("k149", 0)), "duplicate metadata key");
}

#[test]
fn rejects_bad_alignment() {
    for a in [0u32, 3, 48, 100, u32::MAX] {
        assert_eq!(
            malformed(&valid().kv_u32("general.alignment", a)),
            "general.alignment is not a nonzero power of two",
            "{a}"
        );
    }
    assert_eq!(
        malformed(&valid().kv(b"general.alignment", 10, &32u64.to_le_bytes())),
        "general.alignment is not a uint32"
    );
    assert_eq!(
        malformed(&valid().kv(b"general.alignment", 8, &[0; 8])),
        "general.alignment is not a uint32"
    );
    // A valid alignment the offsets do not respect.
    let (what, value) = bad_tensor(&valid().kv_u32("general.alignment", 64), "w1");
    assert_eq!(
        (what, value),
        ("data offset is not a multiple of the alignment", 32)
    );
}

#[test]
fn rejects_bad_tensors() {
    let one = |name: &[u8], ne: &[u64], ty: u32, off: u64| {
        Builder::new().tensor(name, ne, ty, off).data(4096)
    };
    let cases: Vec<(Builder, &str, &str, u64)> = vec![
        (
            one(b"a", &[1, 1, 1, 1, 1], 0, 0),
            "a",
            "more than 4 dimensions",
            5,
        ),
        (one(b"a", &[8, 0], 0, 0), "a", "a dimension is zero", 0),
        (
            one(b"a", &[u64::MAX], 0, 0),
            "a",
            "a dimension is negative or too large",
            u64::MAX,
        ),
        (
            one(b"a", &[1 << 63], 0, 0),
            "a",
            "a dimension is negative or too large",
            1 << 63,
        ),
        (
            one(b"a", &[1 << 32, 1 << 32], 0, 0),
            "a",
            "element count overflows",
            1 << 32,
        ),
        (
            one(b"a", &[1 << 62, 2], 0, 0),
            "a",
            "element count overflows",
            2,
        ),
        (
            one(b"a", &[1 << 40], 0, 0),
            "a",
            "data runs past the end of the file",
            0,
        ),
        (
            one(b"a", &[1 << 62], 0, 0),
            "a",
            "byte size overflows",
            1 << 62,
        ),
        (
            one(b"a", &[8], 4, 0),
            "a",
            "unknown or unsupported ggml type",
            4,
        ),
        (
            one(b"a", &[8], 19, 0),
            "a",
            "unknown or unsupported ggml type",
            19,
        ),
        (
            one(b"a", &[8], u32::MAX, 0),
            "a",
            "unknown or unsupported ggml type",
            u32::MAX as u64,
        ),
        (
            one(b"a", &[33], 2, 0),
            "a",
            "row length ne[0] is not a multiple of the type's block size",
            33,
        ),
        (
            one(b"a", &[128], 12, 0),
            "a",
            "row length ne[0] is not a multiple of the type's block size",
            128,
        ),
        (
            one(b"a", &[8], 0, 16),
            "a",
            "data offset is not a multiple of the alignment",
            16,
        ),
        (
            one(b"a", &[8], 0, 4096),
            "a",
            "data runs past the end of the file",
            4096,
        ),
        (
            one(b"a", &[8], 0, u64::MAX - 31),
            "a",
            "data end overflows",
            u64::MAX - 31,
        ),
        (
            one(b"a", &[8], 0, 1 << 62),
            "a",
            "data runs past the end of the file",
            1 << 62,
        ),
        (
            one(&[b'x'; 64], &[8], 0, 0),
            "",
            "name is longer than ggml's 63 bytes",
            64,
        ),
        (
            valid().tensor(b"w2", &[8], 0, 32),
            "w2",
            "data overlaps the previous tensor's (offsets must ascend)",
            32,
        ),
        (
            valid().tensor(b"w2", &[8], 0, 0),
            "w2",
            "data overlaps the previous tensor's (offsets must ascend)",
            0,
        ),
        (
            Builder::new()
                .tensor(b"a", &[16], 0, 0)
                .tensor(b"b", &[8], 0, 32)
                .data(96),
            "b",
            "data overlaps the previous tensor's (offsets must ascend)",
            32,
        ),
        (
            valid().tensor(b"w0", &[8], 0, 64).data(96),
            "w0",
            "duplicate tensor name (the value is the first one's index)",
            0,
        ),
    ];
    for (b, name, what, value) in cases {
        let f = b.build();
        let e = err(&b);
        match e {
            Error::BadTensor {
                what: w, value: v, ..
            } => {
                assert_eq!((w, v), (what, value), "{name}: {e}")
            }
            e => panic!("{what}: got {e:?}"),
        }
        if !name.is_empty() {
            assert_eq!(error_tensor_name(&f, &e), Some(name), "{what}");
        }
        // The message names the problem.
        assert!(e.to_string().contains(what));
    }
    // A name that is not UTF-8, and a record cut short.
    let (what, _) = match err(&one(b"\xc3", &[8], 0, 0)) {
        Error::BadTensor { what, value, .. } => (what, value),
        e => panic!("{e:?}"),
    };
    assert_eq!(what, "name is not valid UTF-8");
    let mut b = valid();
    b.infos.truncate(b.infos.len() - 3);
    b.data.clear();
    assert!(matches!(
        err(&b),
        Error::BadTensor { .. } | Error::Malformed { .. }
    ));
    // The data section itself past the end (no data at all).
    let mut b = valid();
    b.data.clear();
    let (what, _) = bad_tensor(&b, "w0");
    assert_eq!(what, "data runs past the end of the file");
    // Only the second tensor does not fit: it is the one named.
    let b = valid().data(40);
    assert_eq!(bad_tensor(&b, "w1").0, "data runs past the end of the file");
}

#[test]
fn duplicate_names_far_apart_and_many_tensors() {
    // 3000 tensors (past several 64-name chunks), then a repeat of #5.
    let mut b = Builder::new();
    for i in 0..3000u64 {
        b = b.tensor(format!("blk.{i}.w").as_bytes(), &[8], 0, i * 32);
    }
    b = b.data(3000 * 32);
    let f = b.build();
    let t = std::time::Instant::now();
    let g = Gguf::parse(&f).unwrap();
    println!("3000 tensors parsed in {:?}", t.elapsed());
    assert_eq!(g.tensor("blk.2999.w").unwrap().index(), 2999);
    let b = b.tensor(b"blk.5.w", &[8], 0, 3000 * 32).data(3001 * 32);
    match err(&b) {
        Error::BadTensor { index, value, .. } => assert_eq!((index, value), (3000, 5)),
        e => panic!("{e:?}"),
    }
}

#[test]
fn counts_are_capped() {
    use kestrel_core::gguf::{MAX_KV, MAX_TENSORS};
    // Room for the declared entries, but more than kestrel accepts.
    let mut b = Builder::new();
    b.n_tensors = MAX_TENSORS as u64 + 1;
    b.infos = vec![0; (MAX_TENSORS + 1) * 24];
    assert_eq!(
        err(&b),
        Error::OutOfRange {
            what: "GGUF tensor count",
            value: MAX_TENSORS + 1,
            max: MAX_TENSORS
        }
    );
    let mut b = Builder::new();
    b.n_kv = MAX_KV as u64 + 1;
    b.kvs = vec![0; (MAX_KV + 1) * 13];
    assert!(matches!(err(&b), Error::OutOfRange { .. }));
}

/// The duplicate-name check's worst case: MAX_TENSORS tensors whose 63-byte
/// names differ only in their last bytes. Run with `--ignored --nocapture`
/// (in release for a realistic time).
#[test]
#[ignore = "a timing, not a check: run with --ignored --nocapture"]
fn worst_case_duplicate_check_time() {
    use kestrel_core::gguf::MAX_TENSORS;
    let mut b = Builder::new();
    b.align = 1;
    b = b.kv_u32("general.alignment", 1);
    for i in 0..MAX_TENSORS as u64 {
        let name = format!("{i:>63}");
        b = b.tensor(name.as_bytes(), &[1], 1, i * 2);
    }
    let f = b.data(MAX_TENSORS * 2).build();
    let t = std::time::Instant::now();
    let g = Gguf::parse(&f).unwrap();
    println!(
        "{} tensors with 63-byte names: parsed in {:?}",
        g.tensor_count(),
        t.elapsed()
    );
}

/// Model metadata integers beyond u32 are errors naming the key, never a
/// wrapped value (a 2^32 + 2 KV-head count once read as 2).
#[test]
fn model_metadata_out_of_u32_range_is_an_error() {
    let model = |key: &str, v: u64| {
        let mut b = Builder::new().kv(
            b"general.architecture",
            8,
            &[5, 0, 0, 0, 0, 0, 0, 0, b'q', b'w', b'e', b'n', b'2'],
        );
        for (k, x) in [
            ("qwen2.embedding_length", 64u64),
            ("qwen2.attention.head_count", 4),
            ("qwen2.block_count", 1),
            ("qwen2.context_length", 4096),
            ("qwen2.feed_forward_length", 128),
            ("qwen2.attention.head_count_kv", 2),
        ] {
            let x = if k == key { v } else { x };
            b = b.kv(k.as_bytes(), 10, &x.to_le_bytes());
        }
        b.tensor(b"token_embd.weight", &[64, 32], 0, 0)
            .data(64 * 32 * 4)
            .build()
    };
    for key in [
        "qwen2.attention.head_count_kv",
        "qwen2.feed_forward_length",
        "qwen2.embedding_length",
    ] {
        let bytes = model(key, (1u64 << 32) + 2);
        let g = Gguf::parse(&bytes).unwrap();
        let err = kestrel::convert::gguf::config(&g)
            .err()
            .unwrap_or_else(|| panic!("{key} = 2^32 + 2 accepted"))
            .to_string();
        assert!(err.contains(key), "{key}: {err}");
    }
    // In range, the same builder gives a config.
    let bytes = model("qwen2.attention.head_count_kv", 2);
    let cfg = kestrel::convert::gguf::config(&Gguf::parse(&bytes).unwrap()).unwrap();
    assert_eq!(
        (cfg.num_kv_heads, cfg.ffn_size, cfg.vocab_size),
        (2, 128, 32)
    );
}
