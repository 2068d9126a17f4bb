#![no_main]
//! The tokenizer, two ways on every input:
//! 1. the input as a tokenizer.json: the converter's reader
//!    (`kestrel::convert::hf::tokenizer_from_json`), the VQF tokenizer
//!    section written and parsed back, a `Tokenizer` built on it, a short
//!    text encoded and decoded;
//! 2. the fixture tokenizer (tests/fixtures/tiny_tokenizer, Qwen3's
//!    pre-tokenizer, NFC and added tokens over a small vocabulary), built
//!    once: the input as text (lossy UTF-8) encoded, with and without
//!    `split_special`, and decoded back; the input as little-endian u32 ids
//!    (modulo a little more than the table, so both valid and invalid ids
//!    occur) decoded whole and streamed. For text that is its own NFC form,
//!    decode(encode(text)) must give the text back (the fixture's added
//!    tokens strip nothing), and the streamed decode must equal the whole one.
use kestrel::convert::hf::tokenizer_from_json;
use kestrel_core::tokenizer::nfc::nfc_into;
use kestrel_core::tokenizer::{EncodeOptions, EncodeScratch, StreamDecoder, Tokenizer};
use kestrel_core::vqf::tokenizer_section::{self, TokenizerTables};
use kestrel_core::vqf::write::Sink;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

struct VecSink(Vec<u8>);

impl Sink for VecSink {
    fn write(&mut self, bytes: &[u8]) -> Result<(), kestrel_core::Error> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

fn section(json: &[u8]) -> Option<Vec<u8>> {
    let tables = tokenizer_from_json(json, "{{ messages }}").ok()?;
    let mut sink = VecSink(Vec::new());
    tables
        .with_input(|i| tokenizer_section::encode(i, &mut sink))
        .ok()?;
    Some(sink.0)
}

fn fixture() -> &'static [u8] {
    static S: OnceLock<Vec<u8>> = OnceLock::new();
    S.get_or_init(|| {
        section(include_bytes!(
            "../../tests/fixtures/tiny_tokenizer/tokenizer.json"
        ))
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

fuzz_target!(|data: &[u8]| {
    // 1. Arbitrary bytes as tokenizer.json.
    if let Some(sec) = section(data) {
        let tables = TokenizerTables::parse(&sec).expect("a written section parses");
        let tok = Tokenizer::new(tables);
        let ids = encode(&tok, "Hello, world! <|im_end|> 12 ünï", false);
        let _ = decode(&tok, &ids, false);
    }

    // 2. Arbitrary text and ids with the fixture tokenizer.
    let tok = Tokenizer::new(TokenizerTables::parse(fixture()).expect("fixture section"));
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
});
