//! The JSON reader against hand-written JSONTestSuite-style cases (`y_` must
//! be accepted, `n_` rejected), the tiny fixture model's real config and
//! tokenizer files (expected values read with Python's `json`), a 151k-entry
//! tokenizer-sized document, and thousands of mutated fixture files (no
//! panic, and every accepted document re-serializes to a fixed point).

use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};

use kestrel_core::json::{self, write_json_str, Value, MAX_DEPTH};
use kestrel_core::Error;

static CONFIG: &[u8] = include_bytes!("../fixtures/dev_qwen3_dense_tied/hf/config.json");
static CONFIG5: &[u8] =
    include_bytes!("../fixtures/dev_qwen3_dense_tied/hf/config.transformers5.json");
static TOKENIZER: &[u8] = include_bytes!("../fixtures/dev_qwen3_dense_tied/hf/tokenizer.json");
static TOKENIZER_CONFIG: &[u8] =
    include_bytes!("../fixtures/dev_qwen3_dense_tied/hf/tokenizer_config.json");

fn nested(n: usize) -> Vec<u8> {
    let mut v = vec![b'['; n];
    v.extend(std::iter::repeat_n(b']', n));
    v
}

/// (name, input, accepted?)
fn cases() -> Vec<(&'static str, Vec<u8>, bool)> {
    let y: &[(&str, &[u8])] = &[
        ("y_array_empty", b"[]"),
        ("y_array_nested_empty", b"[[[]]]"),
        ("y_array_with_spaces", b" [ 1 , 2 ] "),
        (
            "y_array_heterogeneous",
            b"[null, true, false, 1, \"a\", [], {}]",
        ),
        ("y_object_empty", b"{}"),
        ("y_object_basic", b"{\"a\":1}"),
        ("y_object_duplicated_key", b"{\"a\":1,\"a\":2}"),
        ("y_object_empty_key", b"{\"\":0}"),
        ("y_object_escaped_key", b"{\"\\u0061\":1}"),
        ("y_object_nested", b"{\"a\":{\"b\":[{\"c\":null}]}}"),
        ("y_number_0", b"[0]"),
        ("y_number_negative_zero", b"[-0]"),
        ("y_number_int", b"[123]"),
        ("y_number_negative_int", b"[-123]"),
        ("y_number_real", b"[1.5]"),
        ("y_number_exp", b"[1e5]"),
        ("y_number_capital_e_plus", b"[1E+2]"),
        ("y_number_neg_exp", b"[1e-2]"),
        ("y_number_zero_exp", b"[0e0]"),
        ("y_number_real_exp", b"[123.456e78]"),
        ("y_number_huge_exp", b"[1e999]"),
        (
            "y_number_very_long",
            b"[1234567890123456789012345678901234567890]",
        ),
        ("y_string_empty", b"[\"\"]"),
        (
            "y_string_all_short_escapes",
            b"[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
        ),
        ("y_string_unicode_escape", b"[\"\\u0041\"]"),
        ("y_string_uppercase_hex", b"[\"\\u00E9\"]"),
        ("y_string_surrogate_pair", b"[\"\\ud83d\\ude00\"]"),
        ("y_string_escaped_nul", b"[\"\\u0000\"]"),
        ("y_string_escaped_backslash_u", b"[\"\\u005c\"]"),
        ("y_string_utf8", "[\"é€😀\"]".as_bytes()),
        ("y_string_raw_del", b"[\"\x7f\"]"),
        ("y_string_u2028_raw", "[\"\u{2028}\"]".as_bytes()),
        ("y_string_noncharacter_ffff", b"[\"\xef\xbf\xbf\"]"),
        ("y_string_max_code_point", b"[\"\xf4\x8f\xbf\xbf\"]"),
        ("y_string_brackets_inside", b"[\"[{]}\\\"\"]"),
        ("y_structure_lonely_true", b"true"),
        ("y_structure_lonely_false", b"false"),
        ("y_structure_lonely_null", b"null"),
        ("y_structure_lonely_string", b"\"x\""),
        ("y_structure_lonely_negative", b"-1"),
        (
            "y_structure_all_whitespace",
            b" \t\n\r[ \t\n\r1 \t\n\r] \t\n\r",
        ),
        ("y_structure_trailing_newline", b"[1]\n"),
    ];
    let n: &[(&str, &[u8])] = &[
        ("n_array_trailing_comma", b"[1,]"),
        ("n_array_double_comma", b"[1,,2]"),
        ("n_array_leading_comma", b"[,1]"),
        ("n_array_only_comma", b"[,]"),
        ("n_array_unclosed", b"[1"),
        ("n_array_unclosed_after_comma", b"[1,"),
        ("n_array_extra_close", b"[1]]"),
        ("n_array_colon", b"[1:2]"),
        ("n_array_missing_comma", b"[1 2]"),
        ("n_object_trailing_comma", b"{\"a\":1,}"),
        ("n_object_unquoted_key", b"{a:1}"),
        ("n_object_single_quotes", b"{'a':1}"),
        ("n_object_missing_colon", b"{\"a\" 1}"),
        ("n_object_missing_value", b"{\"a\":}"),
        ("n_object_number_key", b"{1:1}"),
        ("n_object_array_key", b"{[]:1}"),
        ("n_object_unclosed", b"{\"a\":1"),
        ("n_object_double_colon", b"{\"a\"::1}"),
        ("n_object_missing_comma", b"{\"a\":1 \"b\":2}"),
        ("n_number_leading_zero", b"[01]"),
        ("n_number_neg_leading_zero", b"[-01]"),
        ("n_number_plus", b"[+1]"),
        ("n_number_dot_start", b"[.5]"),
        ("n_number_dot_end", b"[1.]"),
        ("n_number_dot_exp", b"[1.e5]"),
        ("n_number_exp_empty", b"[1e]"),
        ("n_number_exp_sign_only", b"[1e+]"),
        ("n_number_hex", b"[0x1]"),
        ("n_number_nan", b"[NaN]"),
        ("n_number_infinity", b"[Infinity]"),
        ("n_number_minus_infinity", b"[-Infinity]"),
        ("n_number_minus_space", b"[- 1]"),
        ("n_number_minus_alone", b"[-]"),
        ("n_number_fullwidth_digit", "[１]".as_bytes()),
        ("n_string_unterminated", b"[\"abc]"),
        ("n_string_single_quotes", b"['a']"),
        ("n_string_bad_escape", b"[\"\\x\"]"),
        ("n_string_escaped_quote_apostrophe", b"[\"\\'\"]"),
        ("n_string_capital_u_escape", b"[\"\\U0041\"]"),
        ("n_string_short_u", b"[\"\\u12\"]"),
        ("n_string_bad_hex", b"[\"\\u00G0\"]"),
        ("n_string_raw_tab", b"[\"\t\"]"),
        ("n_string_raw_newline", b"[\"\n\"]"),
        ("n_string_raw_nul", b"[\"\x00\"]"),
        ("n_string_raw_unit_separator", b"[\"\x1f\"]"),
        ("n_string_lone_high_surrogate", b"[\"\\ud800\"]"),
        ("n_string_lone_low_surrogate", b"[\"\\udc00\"]"),
        ("n_string_reversed_surrogates", b"[\"\\udc00\\ud800\"]"),
        ("n_string_high_then_bmp", b"[\"\\ud800\\u0041\"]"),
        ("n_string_high_then_raw", b"[\"\\ud800abcdef\"]"),
        ("n_utf8_lone_continuation", b"[\"\x80\"]"),
        ("n_utf8_overlong_slash", b"[\"\xc0\xaf\"]"),
        ("n_utf8_overlong_3byte", b"[\"\xe0\x80\xaf\"]"),
        ("n_utf8_encoded_surrogate", b"[\"\xed\xa0\x80\"]"),
        ("n_utf8_above_max", b"[\"\xf4\x90\x80\x80\"]"),
        ("n_utf8_truncated", b"[\"\xe2\x82\"]"),
        ("n_utf8_byte_ff", b"[\"\xff\"]"),
        ("n_utf8_latin1_outside_string", b"[1]\xe9"),
        ("n_structure_empty", b""),
        ("n_structure_only_whitespace", b"  \n"),
        ("n_structure_bom", b"\xef\xbb\xbf{}"),
        ("n_structure_two_values", b"1 2"),
        ("n_structure_two_arrays", b"[][]"),
        ("n_structure_trailing_garbage", b"[1]x"),
        ("n_structure_extra_close_brace", b"{}}"),
        ("n_structure_comment", b"[1]//"),
        ("n_structure_block_comment", b"/**/[1]"),
        ("n_structure_capital_true", b"[True]"),
        ("n_structure_truncated_literal", b"[tru]"),
        ("n_structure_nul_after", b"[1]\x00"),
        ("n_structure_formfeed_whitespace", b"[\x0c1]"),
        ("n_structure_vertical_tab_whitespace", b"[\x0b1]"),
        ("n_structure_nbsp_whitespace", b"[\xc2\xa01]"),
        ("n_structure_unclosed_deep", b"[[["),
        ("n_structure_close_only", b"]"),
        ("n_structure_object_key_object", b"{{}:1}"),
        ("n_structure_angle_brackets", b"<>"),
    ];
    let mut all: Vec<(&'static str, Vec<u8>, bool)> = Vec::new();
    all.extend(y.iter().map(|(name, s)| (*name, s.to_vec(), true)));
    all.extend(n.iter().map(|(name, s)| (*name, s.to_vec(), false)));
    all.push(("y_structure_max_depth_128", nested(MAX_DEPTH), true));
    all.push(("n_structure_depth_129", nested(MAX_DEPTH + 1), false));
    all.push(("n_structure_open_100000_arrays", vec![b'['; 100_000], false));
    all.push(("n_structure_depth_100000", nested(100_000), false));
    all
}

#[test]
fn jsontestsuite_style_cases() {
    let cases = cases();
    let (mut ys, mut ns) = (0, 0);
    for (name, input, accept) in &cases {
        let got = json::parse(input);
        match (got, accept) {
            (Ok(v), true) => {
                ys += 1;
                // Accepted text re-serializes to a fixed point.
                let c = canon(v);
                assert_eq!(canon(json::parse(c.as_bytes()).unwrap()), c, "{name}");
            }
            (Err(Error::Json { .. }), false) => ns += 1,
            (got, _) => panic!("{name}: got {got:?}"),
        }
    }
    println!("{ys} y_ cases accepted, {ns} n_ cases rejected");
    assert!(ys >= 30 && ns >= 60);
}

#[test]
fn errors_name_the_place() {
    let e = json::parse(b"{\"a\": [1, 2,]}").unwrap_err();
    assert_eq!(
        e,
        Error::Json {
            what: "json: expected a value",
            offset: 12
        }
    );
    assert_eq!(e.to_string(), "json: expected a value (at byte 12)");
    let e = json::parse(&nested(200)).unwrap_err();
    assert_eq!(e.to_string(), "json: nesting deeper than 128 (at byte 128)");
}

/// Re-serializes a value compactly, decoding and re-escaping strings, and
/// exercises every accessor on the way.
fn canon(v: Value) -> String {
    let mut out = String::new();
    canon_into(v, &mut out);
    out
}

fn canon_into(v: Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Value::Number(n) => {
            out.push_str(n.raw());
            let _ = (n.as_f64(), n.as_f32(), n.as_i64(), n.as_u64());
            if let Some(i) = n.as_i64() {
                assert_eq!(Some(i as f64), n.as_f64().map(|x| x.round()), "{}", n.raw());
            }
        }
        Value::String(s) => {
            let decoded: String = s.chars().collect();
            assert_eq!(decoded.len(), s.decoded_len());
            assert_eq!(s.bytes().collect::<Vec<u8>>(), decoded.as_bytes());
            let mut buf = vec![0u8; decoded.len()];
            assert_eq!(s.unescape_into(&mut buf), Ok(decoded.len()));
            assert_eq!(buf, decoded.as_bytes());
            assert!(s.eq_str(&decoded));
            assert!(v.str_eq(&decoded));
            write_json_str(out, &decoded).unwrap();
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canon_into(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let key: String = k.chars().collect();
                assert!(o.get(&key).is_some());
                write_json_str(out, &key).unwrap();
                out.push(':');
                canon_into(x, out);
            }
            out.push('}');
        }
    }
}

fn fnv1a(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}
const FNV0: u64 = 0xcbf29ce484222325;

#[test]
fn fixture_files_match_python_json() {
    // Python: json.dumps(json.loads(raw), ensure_ascii=False, separators=(',', ':')).
    for (name, raw, len, hash) in [
        ("config.json", CONFIG, 596, 0x1203b832e19330ea),
        (
            "config.transformers5.json",
            CONFIG5,
            682,
            0xd0d2301fb9df90d1,
        ),
        ("tokenizer.json", TOKENIZER, 10868, 0x785080872748c7ca),
        (
            "tokenizer_config.json",
            TOKENIZER_CONFIG,
            3859,
            0xede10774f12b0b2f,
        ),
    ] {
        let c = canon(json::parse(raw).unwrap());
        assert_eq!((c.len(), fnv1a(c.as_bytes(), FNV0)), (len, hash), "{name}");
    }
}

#[test]
fn config_json() {
    let c = json::parse(CONFIG).unwrap();
    assert_eq!(c.get("hidden_size").unwrap().as_u64(), Some(96));
    assert_eq!(c.get("intermediate_size").unwrap().as_usize(), Some(256));
    assert_eq!(c.get("num_hidden_layers").unwrap().as_i64(), Some(2));
    assert_eq!(c.get("num_attention_heads").unwrap().as_u64(), Some(6));
    assert_eq!(c.get("num_key_value_heads").unwrap().as_u64(), Some(2));
    assert_eq!(c.get("head_dim").unwrap().as_u64(), Some(16));
    assert_eq!(c.get("vocab_size").unwrap().as_u64(), Some(576));
    assert_eq!(c.get("bos_token_id").unwrap().as_u64(), Some(470));
    assert_eq!(c.get("eos_token_id").unwrap().as_u64(), Some(472));
    assert_eq!(c.get("rope_theta").unwrap().as_f64(), Some(1_000_000.0));
    assert_eq!(c.get("rope_theta").unwrap().as_u64(), Some(1_000_000));
    assert_eq!(c.get("rms_norm_eps").unwrap().as_f64(), Some(1e-6));
    assert_eq!(c.get("rms_norm_eps").unwrap().as_f32(), Some(1e-6f32));
    assert_eq!(c.get("rms_norm_eps").unwrap().as_u64(), None);
    assert_eq!(
        c.get("max_position_embeddings").unwrap().as_u64(),
        Some(40960)
    );
    assert_eq!(c.get("tie_word_embeddings").unwrap().as_bool(), Some(true));
    assert_eq!(c.get("attention_bias").unwrap().as_bool(), Some(false));
    assert!(c.get("rope_scaling").unwrap().is_null());
    assert!(c.get("sliding_window").unwrap().is_null());
    assert!(c.get("model_type").unwrap().str_eq("qwen3"));
    assert!(c.get("torch_dtype").unwrap().str_eq("float32"));
    assert!(c.get("hidden_act").unwrap().str_eq("silu"));
    let arch = c.get("architectures").unwrap().as_array().unwrap();
    assert_eq!(arch.len(), 1);
    assert!(arch.get(0).unwrap().str_eq("Qwen3ForCausalLM"));
    assert_eq!(c.get("rope_parameters"), None);
    assert_eq!(c.as_object().unwrap().len(), 26);
}

#[test]
fn config_transformers5_json() {
    let c = json::parse(CONFIG5).unwrap();
    assert_eq!(c.get("hidden_size").unwrap().as_u64(), Some(96));
    assert_eq!(c.get("rope_theta"), None);
    let rope = c.get("rope_parameters").unwrap();
    assert_eq!(rope.get("rope_theta").unwrap().as_f64(), Some(1_000_000.0));
    assert!(rope.get("rope_type").unwrap().str_eq("default"));
    assert!(c.get("dtype").unwrap().str_eq("float32"));
    assert!(c.get("pad_token_id").unwrap().is_null());
    let layers: Vec<Value> = c
        .get("layer_types")
        .unwrap()
        .iter_array()
        .unwrap()
        .collect();
    assert_eq!(layers.len(), 2);
    assert!(layers.iter().all(|l| l.str_eq("full_attention")));
    assert!(c.get("transformers_version").unwrap().str_eq("5.24.0"));
}

#[test]
fn tokenizer_json() {
    let t = json::parse(TOKENIZER).unwrap();
    let model = t.get("model").unwrap();
    assert!(model.get("type").unwrap().str_eq("BPE"));
    assert_eq!(model.get("byte_fallback").unwrap().as_bool(), Some(false));
    assert!(model.get("unk_token").unwrap().is_null());
    assert!(t
        .get("normalizer")
        .unwrap()
        .get("type")
        .unwrap()
        .str_eq("NFC"));

    // Vocab: 470 entries; Python gives the FNV-1a of "key\0id\n" in order.
    let vocab = model.get("vocab").unwrap().as_object().unwrap();
    let mut h = FNV0;
    let mut n = 0;
    let mut buf = [0u8; 64];
    for (k, v) in vocab.iter() {
        let key = k.unescape_to_str(&mut buf).unwrap();
        let id = v.as_u64().unwrap();
        h = fnv1a(key.as_bytes(), h);
        h = fnv1a(format!("\0{id}\n").as_bytes(), h);
        n += 1;
    }
    assert_eq!(n, 470);
    assert_eq!(h, 0x2a6311c5514b55b9);
    // Escaped keys are found by their decoded text.
    assert_eq!(vocab.get("\"").unwrap().as_u64(), Some(1));
    assert_eq!(vocab.get("\\").unwrap().as_u64(), Some(59));
    assert_eq!(vocab.get(".\"").unwrap().as_u64(), Some(441));
    assert_eq!(vocab.get("\u{120}").unwrap().as_u64(), Some(220));
    assert_eq!(vocab.get("Paris").unwrap().as_u64(), Some(469));
    assert_eq!(vocab.get("nope"), None);

    // Merges: 214 pairs ["a", "b"]; FNV-1a of "a b\n" in order.
    let merges = model.get("merges").unwrap().as_array().unwrap();
    let mut h = FNV0;
    let mut n = 0;
    for m in merges.iter() {
        let pair: Vec<Value> = m.iter_array().unwrap().collect();
        assert_eq!(pair.len(), 2);
        let a: String = pair[0].as_str().unwrap().chars().collect();
        let b: String = pair[1].as_str().unwrap().chars().collect();
        h = fnv1a(format!("{a} {b}\n").as_bytes(), h);
        n += 1;
    }
    assert_eq!(n, 214);
    assert_eq!(h, 0x68a7085bfc644920);
    assert!(merges.get(0).unwrap().get("0").is_none(), "get on an array");
    let first = merges.get(0).unwrap().as_array().unwrap();
    assert!(first.get(0).unwrap().str_eq("\u{120}"));
    assert!(first.get(1).unwrap().str_eq("t"));

    let added: Vec<Value> = t
        .get("added_tokens")
        .unwrap()
        .iter_array()
        .unwrap()
        .collect();
    assert_eq!(added.len(), 26);
    for (i, a) in added.iter().enumerate() {
        assert_eq!(a.get("id").unwrap().as_u64(), Some(470 + i as u64));
    }
    assert!(added[0].get("content").unwrap().str_eq("<|endoftext|>"));
    assert_eq!(added[0].get("special").unwrap().as_bool(), Some(true));
    assert!(added[25].get("content").unwrap().str_eq("</think>"));
    assert_eq!(added[25].get("special").unwrap().as_bool(), Some(false));

    // The pre-tokenizer regex, with its escaped backslashes decoded.
    let split = t
        .get("pre_tokenizer")
        .unwrap()
        .get("pretokenizers")
        .unwrap()
        .as_array()
        .unwrap()
        .get(0)
        .unwrap();
    let re = split.get("pattern").unwrap().get("Regex").unwrap();
    assert!(re.str_eq(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ));
}

#[test]
fn tokenizer_config_json() {
    let t = json::parse(TOKENIZER_CONFIG).unwrap();
    assert_eq!(
        t.get("added_tokens_decoder")
            .unwrap()
            .as_object()
            .unwrap()
            .len(),
        26
    );
    let d470 = t.get("added_tokens_decoder").unwrap().get("470").unwrap();
    assert!(d470.get("content").unwrap().str_eq("<|endoftext|>"));
    assert!(t.get("eos_token").unwrap().str_eq("<|im_end|>"));
    assert!(t.get("pad_token").unwrap().str_eq("<|endoftext|>"));
    assert!(t.get("bos_token").unwrap().is_null());
    assert_eq!(t.get("add_bos_token").unwrap().as_bool(), Some(false));
    assert_eq!(t.get("model_max_length").unwrap().as_u64(), Some(40960));
    assert!(t.get("chat_template").unwrap().str_eq(
        r"{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    ));
}

/// A document the size of the real Qwen3 tokenizer.json's model section:
/// 151,643 vocab entries and 151,387 merges.
#[test]
fn tokenizer_sized_document() {
    const VOCAB: usize = 151_643;
    const MERGES: usize = 151_387;
    let mut s = String::with_capacity(8 << 20);
    s.push_str("{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for i in 0..VOCAB {
        if i > 0 {
            s.push(',');
        }
        // Some keys need escapes, some are non-ASCII.
        match i % 3 {
            0 => write!(s, "\"t{i}\":{i}").unwrap(),
            1 => write!(s, "\"\\u0120\\\"{i}\":{i}").unwrap(),
            _ => write!(s, "\"é{i}\":{i}").unwrap(),
        }
    }
    s.push_str("},\"merges\":[");
    for i in 0..MERGES {
        if i > 0 {
            s.push(',');
        }
        write!(s, "[\"a{i}\",\"b{i}\"]").unwrap();
    }
    s.push_str("]}}");
    let t = json::parse(s.as_bytes()).unwrap();
    let model = t.get("model").unwrap();
    let vocab = model.get("vocab").unwrap().as_object().unwrap();
    let mut n = 0;
    for (k, v) in vocab.iter() {
        assert_eq!(v.as_usize(), Some(n));
        if n % 3 == 1 {
            assert!(k.as_plain().is_none());
        }
        n += 1;
    }
    assert_eq!(n, VOCAB);
    assert_eq!(
        model.get("merges").unwrap().as_array().unwrap().len(),
        MERGES
    );
    let last = VOCAB - 1; // 151642 % 3 == 1
    assert_eq!(
        vocab.get(&format!("\u{120}\"{last}")).unwrap().as_usize(),
        Some(last)
    );
    println!("parsed a {} byte tokenizer-sized document", s.len());
}

/// xorshift64*: deterministic pseudo-random numbers.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, src: &[u8]) -> Vec<u8> {
    let mut v = src.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if at < v.len() => v[at] ^= 1 << rng.below(8),
            1 if at < v.len() => v[at] = rng.next() as u8,
            2 => v.truncate(at),
            3 => v.insert(at, b"[{\"\\"[rng.below(4)]),
            4 if at < v.len() => {
                v.remove(at);
            }
            5 => {
                let chunk: Vec<u8> = b"[{\"\\]},:0-e.u\xc3\xed\xf0"
                    .iter()
                    .copied()
                    .filter(|_| rng.below(2) == 0)
                    .collect();
                v.splice(at..at, chunk);
            }
            _ => {
                // Duplicate a short slice somewhere else.
                let from = rng.below(v.len());
                let len = rng.below(16).min(v.len() - from.min(v.len()));
                let piece = v[from..from + len].to_vec();
                let at = at.min(v.len());
                v.splice(at..at, piece);
            }
        }
    }
    v
}

#[test]
fn mutated_fixtures_never_panic() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let (mut accepted, mut rejected) = (0, 0);
    for (src, rounds) in [
        (CONFIG, 3000),
        (CONFIG5, 3000),
        (TOKENIZER_CONFIG, 1000),
        (TOKENIZER, 600),
    ] {
        for _ in 0..rounds {
            let input = mutate(&mut rng, src);
            let outcome = catch_unwind(AssertUnwindSafe(|| match json::parse(&input) {
                Ok(v) => {
                    let c = canon(v);
                    let again = json::parse(c.as_bytes()).expect("canonical form parses");
                    assert_eq!(canon(again), c);
                    true
                }
                Err(Error::Json { offset, .. }) => {
                    assert!(offset <= input.len());
                    false
                }
                Err(e) => panic!("unexpected error kind {e:?}"),
            }));
            match outcome {
                Ok(true) => accepted += 1,
                Ok(false) => rejected += 1,
                Err(_) => panic!("panic on input {:?}", String::from_utf8_lossy(&input)),
            }
        }
    }
    println!("mutations: {accepted} accepted, {rejected} rejected, no panic");
    assert!(accepted > 0 && rejected > 0);
}
