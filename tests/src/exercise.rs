//! One function per cargo-fuzz target (fuzz/fuzz_targets/TARGET.rs):
//! what the target does with an input, shared by the target itself and by
//! `tests/tests/regressions.rs`, which replays every kept input
//! (tests/vectors/fuzz/TARGET/: the campaigns' minimised corpora and any
//! crasher) through it on every `cargo test`. Each function must return
//! (an error is fine) and never panic; the asserts in them are properties
//! of valid results.

use crate::VecSink;
use kestrel::convert::hf::{config_from_json, config_from_json_vl, tokenizer_from_json};
use kestrel_core::config::MAX_LAYERS;
use kestrel_core::gguf::{dequantize_row, Gguf};
use kestrel_core::image::{decode as decode_image, pixel_values, ImageProcessorConfig};
use kestrel_core::json::{self, Value};
use kestrel_core::model::weights::{LayerWeights, Weights};
use kestrel_core::safetensors::SafeTensors;
use kestrel_core::state::{ArenaSizes, KvType, Options};
use kestrel_core::tensors;
use kestrel_core::tokenizer::nfc::nfc_into;
use kestrel_core::tokenizer::{EncodeOptions, EncodeScratch, StreamDecoder, Tokenizer};
use kestrel_core::vqf::tokenizer_section::{self, TokenizerTables};
use kestrel_core::vqf::{config_section, Vqf};
use std::sync::OnceLock;

/// What a target does with one input.
pub type Exercise = fn(&[u8]);

/// Every target, by name, with its function.
pub const TARGETS: &[(&str, Exercise)] = &[
    ("capi_open", capi_open),
    ("config", config),
    ("gguf", gguf),
    ("http", http),
    ("image", image),
    ("json", json),
    ("safetensors", safetensors),
    ("schema", schema),
    ("serve_api", serve_api),
    ("tokenizer", tokenizer),
    ("vqf", vqf),
];

/// The C ABI's open over the input as a model file (copied to a 64-byte
/// aligned buffer), and when it opens (in at most 64 MiB): a chat turn,
/// a feed, a few greedy tokens with their text, a detokenize, a close.
/// Every call returns a status; none may panic.
pub fn capi_open(data: &[u8]) {
    use kestrel_capi::*;
    use std::ptr::{null, null_mut};
    let mut model = vec![0u64; data.len().div_ceil(8) + 8];
    let skip = model.as_ptr().cast::<u8>().align_offset(64);
    let bytes = &mut bytemuck_bytes(&mut model)[skip..skip + data.len()];
    bytes.copy_from_slice(data);
    let mut cfg = std::mem::MaybeUninit::<KestrelConfig>::uninit();
    // SAFETY: `cfg` is writable; init fills it.
    let mut cfg = unsafe {
        assert_eq!(kestrel_config_init(cfg.as_mut_ptr()), Status::Ok);
        cfg.assume_init()
    };
    cfg.temperature = 0.0;
    cfg.context = 64;
    cfg.text_bytes = 64;
    let (mut size, mut err) = (0usize, [0u8; 128]);
    let (m, len) = (bytes.as_ptr().cast(), bytes.len());
    let e = err.as_mut_ptr().cast();
    // SAFETY: every pointer is valid for its length.
    let st = unsafe { kestrel_memory_size(m, len, &cfg, &mut size, e, err.len()) };
    if st != Status::Ok || size > 64 << 20 {
        return;
    }
    let mut memory = vec![0u64; size / 8 + 16];
    let at = memory.as_ptr().cast::<u8>().align_offset(64);
    let block = bytemuck_bytes(&mut memory)[at..].as_mut_ptr().cast();
    let mut h = null_mut();
    // SAFETY: as above; the model and the block outlive the handle.
    if unsafe { kestrel_open(m, len, &cfg, block, size, &mut h, e, err.len()) } != Status::Ok {
        return;
    }
    let (mut ids, mut n, mut text, mut tlen) = ([0u32; 64], 0usize, [0u8; 64], 0usize);
    let user = "hi";
    // SAFETY: `h` is open; every buffer is valid for its length.
    unsafe {
        let st = kestrel_chat_turn(
            h,
            null(),
            0,
            user.as_ptr().cast(),
            user.len(),
            ids.as_mut_ptr(),
            64,
            &mut n,
        );
        if st == Status::Ok && kestrel_feed(h, ids.as_ptr(), n) == Status::Ok {
            for _ in 0..3 {
                let mut id = 0;
                if kestrel_next(h, &mut id) != Status::Ok {
                    break;
                }
                let _ = kestrel_piece(h, id, text.as_mut_ptr().cast(), text.len(), &mut tlen);
            }
        }
        let _ = kestrel_detokenize(
            h,
            ids.as_ptr(),
            n.min(64),
            text.as_mut_ptr().cast(),
            64,
            &mut tlen,
        );
        assert_eq!(kestrel_close(h), Status::Ok);
    }
}

/// The bytes of a `u64` buffer (for 64-byte aligned copies).
fn bytemuck_bytes(v: &mut [u64]) -> &mut [u8] {
    let len = std::mem::size_of_val(v);
    // SAFETY: u64 has no invalid bit patterns and u8 no alignment; the
    // slice covers exactly the buffer's bytes, borrowed mutably once.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), len) }
}

/// VQF parsing plus building the model views over whatever parses: every
/// entry's data and matrix, the layers in both copies, the embedding, the
/// decode bytes, the tokenizer's tokens and a merge.
pub fn vqf(data: &[u8]) {
    if let Ok(v) = Vqf::parse(data) {
        for e in v.entries() {
            let _ = v.data(&e);
            let _ = v.matrix(&e, 0);
        }
        let mut layers = vec![LayerWeights::EMPTY; Weights::layer_slots(v.config())];
        if let Ok(w) = Weights::new(v, true, &mut layers) {
            for l in 0..w.cfg.num_layers as usize {
                let _ = w.layer(l, w.routing.decode);
                let _ = w.layer(l, w.routing.prefill);
            }
            let _ = w.embedding();
            let _ = w.decode_bytes();
        }
        if let Some(t) = v.tokenizer() {
            for id in 0..t.n_tokens.min(1000) {
                let _ = t.token_bytes(id);
            }
            let _ = t.merge(t.byte_id(b'a'), t.byte_id(b'b'));
        }
    }
}

/// GGUF header, metadata, tensor infos, and dequantization of every row of
/// every tensor (up to 2^20 values per input; rows longer than 4096 values
/// are skipped).
pub fn gguf(data: &[u8]) {
    if let Ok(g) = Gguf::parse(data) {
        for (_k, v) in g.kvs() {
            let _ = v.as_str();
            if let Some(a) = v.as_array() {
                for x in a.iter().take(64) {
                    let _ = x.as_str();
                }
            }
        }
        let mut row = vec![0f32; 4096];
        let mut budget = 1usize << 20;
        for t in g.tensors() {
            let n = t.row_len() as usize;
            if n == 0 || n > row.len() {
                continue;
            }
            for i in 0..t.n_rows() {
                if budget < n {
                    break;
                }
                budget -= n;
                if let Some(bytes) = t.row(i) {
                    let _ = dequantize_row(t.ggml_type(), bytes, &mut row[..n]);
                }
            }
            // Past the last row: no bytes.
            assert!(t.row(t.n_rows()).is_none(), "row past the end");
        }
    }
}

/// safetensors parsing and row conversion (first and last rows).
pub fn safetensors(data: &[u8]) {
    if let Ok(st) = SafeTensors::parse(data) {
        let mut row = [0f32; 64];
        for (_, t) in st.tensors() {
            let cols = t.cols();
            if cols > 0 && cols <= row.len() && t.rows() > 0 {
                let _ = t.to_f32_row(0, &mut row[..cols]);
                let _ = t.to_f32_row(t.rows() - 1, &mut row[..cols]);
            }
        }
        let _ = st.metadata("format");
    }
}

fn walk(v: &Value, depth: usize) {
    if depth > 200 {
        return;
    }
    let _ = v.as_f64();
    let _ = v.as_u64();
    let mut buf = [0u8; 256];
    let _ = v.unescape_into(&mut buf);
    if let Some(it) = v.iter_array() {
        for x in it {
            walk(&x, depth + 1);
        }
    }
    if let Some(it) = v.iter_object() {
        for (k, x) in it {
            let _ = k.chars().count();
            walk(&x, depth + 1);
        }
    }
}

/// The JSON reader: parse, then walk everything lazily.
pub fn json(data: &[u8]) {
    if let Ok(v) = json::parse(data) {
        walk(&v, 0);
        // Written again as Python's json.dumps: still JSON, of the same type.
        let mut again = String::new();
        json::write_python_json(&mut again, &v).unwrap();
        let w = json::parse(again.as_bytes()).unwrap();
        assert_eq!(w.type_name(), v.type_name());
        // As a schema: compiled or refused; a compiled one matches the
        // input's own bytes without panicking.
        if let Ok(schema) = kestrel_core::constrain::Schema::compile(&v) {
            let mut m = kestrel_core::constrain::Matcher::new(&schema);
            for &b in data {
                if !m.advance(&schema, b) {
                    break;
                }
            }
            let _ = m.can_end(&schema);
        }
    }
}

/// The structured-output path: a JSON Schema and an instance (the input
/// split at its first NUL byte) compiled as a request compiles them,
/// strict and best effort, with the refusal's path or the left-out
/// keywords' paths written as the server writes them; then the instance's
/// bytes walked through the constraint. Properties: no prefix the
/// constraint takes is a dead end (some byte goes on, or the value is
/// complete: else an answer would stop there, invalid), and every complete
/// output it takes is JSON. (The probe of every byte runs on the first
/// 256 bytes of the instance.)
pub fn schema(data: &[u8]) {
    use kestrel::serve::api::{dropped_paths, schema_error};
    use kestrel_core::constrain::{Matcher, Schema};
    let (text, instance) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(v) = json::parse(text) else {
        return;
    };
    for strict in [true, false] {
        let compiled = if strict {
            Schema::compile(&v)
        } else {
            Schema::compile_lenient(&v)
        };
        let s = match compiled {
            Ok(s) => s,
            Err(e) => {
                assert!(!schema_error("schema", &v, &e).is_empty());
                continue;
            }
        };
        let _ = dropped_paths(&s, "schema", &v);
        let (mut m, mut scratch) = (Matcher::new(&s), Matcher::new(&s));
        for (i, &b) in instance.iter().enumerate() {
            if !m.advance(&s, b) {
                break;
            }
            let done = m.can_end(&s);
            if i < 256 {
                assert!(
                    done || (0..=255u8).any(|c| m.accepts(&s, &[c], &mut scratch)),
                    "a dead end after {} bytes",
                    i + 1
                );
            }
            if done {
                assert!(
                    json::parse(&instance[..=i]).is_ok(),
                    "a complete output that is not JSON"
                );
            }
        }
    }
}

/// Image decoding (PNG / JPEG), then on success the Qwen-VL preprocessing
/// with the dev_qwen3_vl fixture's config (patch 16, merge 2), capped so
/// one input stays fast: images above 1 Mpixel skip the preprocessing, and
/// max_pixels is 1 Mpixel.
pub fn image(data: &[u8]) {
    let Ok(img) = decode_image(data) else { return };
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
}

/// config.json (hub and transformers-5 formats) through the converter's
/// reader, the input also read as generation_config.json and (Qwen3-VL) as
/// preprocessor_config.json; then everything a valid config drives: the
/// config section round trip, the tensor list and the arena layout at a
/// few context lengths.
pub fn config(data: &[u8]) {
    const PRE: &[u8] = include_bytes!("../fixtures/dev_qwen3_vl/hf/preprocessor_config.json");
    let configs = [
        config_from_json(data, None),
        config_from_json(data, Some(data)),
        config_from_json_vl(data, None, Some(PRE)),
        config_from_json_vl(data, None, Some(data)),
    ];
    for cfg in configs {
        let Ok(cfg) = cfg else {
            continue;
        };
        // What the converter writes, the parser reads back unchanged.
        let mut sink = VecSink::default();
        config_section::encode(&cfg, &mut sink).expect("encode a validated config");
        let back = config_section::decode(&sink.0).expect("decode what encode wrote");
        // mlp_only_layers entries past the last layer have no effect and
        // are not written (docs/vqf.md).
        let mut want = cfg;
        if let Some(m) = want.moe.as_mut() {
            for l in cfg.num_layers as usize..MAX_LAYERS {
                m.mlp_only_layers[l / 64] &= !(1 << (l % 64));
            }
        }
        assert_eq!(back, want, "config section round trip");
        let _ = tensors::for_each(&cfg, &mut |_spec| Ok(()));
        for (max_seq, max_batch, kv) in [
            (1, 1, KvType::F16),
            (4096, 256, KvType::F32),
            (1 << 20, 128, KvType::F16),
        ] {
            let _ = ArenaSizes::new(
                &cfg,
                &Options {
                    max_seq,
                    max_batch,
                    kv,
                    all_logits: max_batch == 1,
                    slots: 1,
                    draft: 0,
                },
            );
        }
    }
}

/// `kestrel serve`'s HTTP request-head parser and API-key comparison.
pub fn http(data: &[u8]) {
    if let Ok(h) = kestrel::serve::http::parse_head(data) {
        assert!(h.path.starts_with('/'));
    }
    let _ = kestrel::serve::http::constant_time_eq(data, b"sekrit");
    http_connection(data);
}

/// The input as everything a client sent on one persistent connection
/// (then it closed its side): requests are read one after another as the
/// server's connection thread reads them (pipelined bytes carried over),
/// until the end of the stream or the first error, which is a 4xx (or a
/// 505 for an HTTP version other than 1.x). The bytes are written before
/// the reading starts, as many as the loopback socket takes without a
/// reader (no thread per input: the fuzzer's leak check counts a
/// thread's teardown).
fn http_connection(data: &[u8]) {
    use kestrel::serve::http::{read_body, read_head, Conn};
    use std::io::Write;
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::time::Duration;
    static LISTENER: OnceLock<TcpListener> = OnceLock::new();
    let listener =
        LISTENER.get_or_init(|| TcpListener::bind("127.0.0.1:0").expect("a loopback port"));
    let mut client =
        TcpStream::connect(listener.local_addr().unwrap()).expect("connect to loopback");
    let (server, _) = listener.accept().expect("accept on loopback");
    client.set_nonblocking(true).unwrap();
    let mut sent = 0;
    while sent < data.len() {
        match client.write(&data[sent..]) {
            Ok(n) if n > 0 => sent += n,
            _ => break,
        }
    }
    let _ = client.shutdown(Shutdown::Write);
    let mut conn = Conn::new(server);
    let wait = Duration::from_secs(30);
    for n in 0..1000 {
        let read = read_head(&mut conn, wait, (n > 0).then_some(wait)).and_then(|r| {
            r.map(|r| read_body(&mut conn, r, wait, 1 << 16))
                .transpose()
        });
        match read {
            Ok(Some((head, body))) => {
                assert!(head.path.starts_with('/'));
                let nonzero = |l: usize| l > 0;
                assert_eq!(
                    Some(body.len()).filter(|&l| nonzero(l)),
                    head.content_length.filter(|&l| nonzero(l))
                );
            }
            Ok(None) => break,
            Err(e) => {
                // A client's fault, or a version it cannot speak (505).
                assert!(
                    (400..500).contains(&e.status) || e.status == 505,
                    "{}",
                    e.status
                );
                break;
            }
        }
    }
}

/// `kestrel serve`'s request-body parsers (chat and completions, data
/// URIs, base64) and the stop-string scan.
pub fn serve_api(data: &[u8]) {
    use kestrel::serve::api;
    if let Ok(req) = api::parse_chat(data) {
        // The prompt the server would write, with its tools and calls.
        let style = kestrel_core::chat::ChatStyle {
            tools: true,
            ..Default::default()
        };
        req.prompt(&style).unwrap();
        // A forced call's constraint (the union over the functions) and
        // the response format's schema (strict or best effort): compiled
        // or refused; a compiled one walks the input's bytes.
        let formats = [req.call_schema(), req.params.json.clone()];
        for schema in formats.iter().flatten().filter_map(|f| f.schema().ok()) {
            let mut m = kestrel_core::constrain::Matcher::new(&schema);
            for &b in data {
                if !m.advance(&schema, b) {
                    break;
                }
            }
            let _ = m.can_end(&schema);
        }
    }
    let _ = api::parse_completion(data);
    let _ = api::base64_decode(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = api::data_uri_bytes(s);
        let stops = ["\n\n".to_string(), "é!".to_string(), "<|im".to_string()];
        let (send, _) = kestrel::serve::stop_scan(s, &stops);
        assert!(s.is_char_boundary(send));
    }
}

fn section(json: &[u8]) -> Option<Vec<u8>> {
    let tables = tokenizer_from_json(json, "{{ messages }}").ok()?;
    let mut sink = VecSink::default();
    tables
        .with_input(|i| tokenizer_section::encode(i, &mut sink))
        .ok()?;
    Some(sink.0)
}

fn fixture_tokenizer() -> &'static [u8] {
    static S: OnceLock<Vec<u8>> = OnceLock::new();
    S.get_or_init(|| {
        section(include_bytes!("../fixtures/tiny_tokenizer/tokenizer.json"))
            .expect("the fixture tokenizer builds")
    })
}

fn encode(tok: &Tokenizer<'_>, text: &str, split_special: bool) -> Vec<u32> {
    let mut buf = vec![0u8; 4 * text.len() + 64];
    let mut work = vec![0u32; EncodeScratch::work_len_for(4 * text.len() + 64)];
    let mut scratch = EncodeScratch::new(&mut buf, &mut work);
    let mut out = vec![0u32; text.len() + 8];
    let n = tok
        .encode_with(
            text,
            EncodeOptions { split_special },
            &mut out,
            &mut scratch,
        )
        .expect("encode with buffers sized for the text");
    out.truncate(n);
    out
}

fn decode(tok: &Tokenizer<'_>, ids: &[u32], skip_special: bool) -> Option<String> {
    let raw: usize = ids
        .iter()
        .map(|&id| tok.tables().token_bytes(id).map_or(0, |b| b.len()))
        .sum();
    let mut out = vec![0u8; 3 * raw + 16];
    let n = tok.decode_into(ids, skip_special, &mut out).ok()?;
    out.truncate(n);
    Some(String::from_utf8(out).expect("decode gives UTF-8"))
}

fn stream(tok: &Tokenizer<'_>, ids: &[u32], skip_special: bool) -> Option<String> {
    let mut d = StreamDecoder::new(skip_special);
    let mut text = String::new();
    for &id in ids {
        d.step_with(tok, id, &mut |s| text.push_str(s)).ok()?;
    }
    d.finish_with(&mut |s| text.push_str(s));
    Some(text)
}

/// The tokenizer, two ways on every input:
/// 1. the input as a tokenizer.json: the converter's reader, the VQF
///    tokenizer section written and parsed back, a `Tokenizer` built on it,
///    a short text encoded and decoded;
/// 2. the fixture tokenizer (tests/fixtures/tiny_tokenizer: Qwen3's
///    pre-tokenizer, NFC and added tokens over a small vocabulary): the
///    input as text (lossy UTF-8) encoded, with and without
///    `split_special`, and decoded back; the input as little-endian u32
///    ids (modulo a little more than the table, so both valid and invalid
///    ids occur) decoded whole and streamed. For text that is its own NFC
///    form, decode(encode(text)) must give the text back, and the streamed
///    decode must equal the whole one.
pub fn tokenizer(data: &[u8]) {
    if let Some(sec) = section(data) {
        let tables = TokenizerTables::parse(&sec).expect("a written section parses");
        let tok = Tokenizer::new(tables);
        let ids = encode(&tok, "Hello, world! <|im_end|> 12 ünï", false);
        let _ = decode(&tok, &ids, false);
    }
    let tok = Tokenizer::new(TokenizerTables::parse(fixture_tokenizer()).expect("fixture section"));
    let text = String::from_utf8_lossy(data);
    for split_special in [false, true] {
        let ids = encode(&tok, &text, split_special);
        let whole = decode(&tok, &ids, false).expect("encoded ids decode");
        assert_eq!(stream(&tok, &ids, false).as_deref(), Some(whole.as_str()));
        let mut nfc = vec![0u8; 4 * text.len() + 16];
        let mut work = vec![0u32; text.len() + 16];
        if let Ok(n) = nfc_into(&text, &mut nfc, &mut work) {
            if nfc[..n] == *text.as_bytes() {
                assert_eq!(whole, *text, "decode(encode(text)) for NFC text");
            }
        }
        let _ = decode(&tok, &ids, true);
    }
    let n = tok.tables().n_tokens + 8;
    let ids: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) % n)
        .collect();
    for skip in [false, true] {
        let whole = decode(&tok, &ids, skip);
        let streamed = stream(&tok, &ids, skip);
        if let Some(w) = whole {
            assert_eq!(
                streamed.as_deref(),
                Some(w.as_str()),
                "stream decode equals decode"
            );
        }
    }
}
