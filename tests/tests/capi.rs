//! The C ABI (`kestrel-capi`, include/kestrel.h) called as C calls it: the
//! same tokens as `kestrel run`'s path, pulled one at a time or generated;
//! a second turn on the kept cache; the parallel-for callback; and every
//! function given bad input (NULL pointers, lengths that do not match,
//! memory too small or misaligned, a damaged or truncated model, token ids
//! out of range, calls out of order, closed handles) returning a status
//! and a message, never crashing.

use kestrel::engine::EngineArgs;
use kestrel::generate::{chat_prompt, Session};
use kestrel_capi::*;
use kestrel_core::chat::{Message, Role};
use kestrel_core::convert::WeightMode;
use kestrel_core::sampler::SamplerConfig;
use kestrel_tests::{loader, temp_dir, tied_fixture};
use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::atomic::AtomicBool;

const PROMPT: &str = "The capital of France";

/// `len` bytes in a 64-byte aligned buffer (kept alive by the Vec).
struct Aligned {
    buf: Vec<u64>,
    at: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let buf = vec![0u64; len / 8 + 16];
        let at = buf.as_ptr().cast::<u8>().align_offset(64);
        Aligned { buf, at, len }
    }
    fn of(bytes: &[u8]) -> Aligned {
        let mut a = Aligned::new(bytes.len());
        a.bytes_mut().copy_from_slice(bytes);
        a
    }
    fn ptr(&mut self) -> *mut c_void {
        // SAFETY: `at + len` bytes lie within the buffer (16 spare words).
        unsafe { self.buf.as_mut_ptr().cast::<u8>().add(self.at).cast() }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        let (p, len) = (self.ptr().cast::<u8>(), self.len);
        // SAFETY: as `ptr`; u8 views of u64 storage, borrowed mutably once.
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }
}

/// The tied Qwen3 fixture (256 positions), converted once per test.
fn fixture(name: &str, mode: WeightMode) -> Vec<u8> {
    let dir = temp_dir(name);
    let bytes = std::fs::read(tied_fixture(&dir, mode)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    bytes
}

fn greedy_config() -> KestrelConfig {
    let mut c = std::mem::MaybeUninit::uninit();
    // SAFETY: writable; init fills every field.
    let mut c: KestrelConfig = unsafe {
        assert_eq!(kestrel_config_init(c.as_mut_ptr()), Status::Ok);
        c.assume_init()
    };
    c.temperature = 0.0;
    c.cpu_features = host_features();
    c
}

/// The features the shell detects, as a host states them.
fn host_features() -> u32 {
    match kestrel_tests::detected_kernels().name() {
        "aarch64-dotprod" => cpu::DOTPROD,
        "x86_64-avx2" => cpu::AVX2,
        "x86_64-avxvnni" => cpu::AVX2 | cpu::AVX_VNNI,
        "x86_64-avx512vnni" => cpu::AVX2 | cpu::AVX512_VNNI,
        _ => 0,
    }
}

/// An open engine, its model and memory kept alive.
struct Open {
    h: *mut Handle,
    _model: Aligned,
    _memory: Aligned,
}

impl Open {
    fn new(model: &[u8], cfg: &KestrelConfig) -> Open {
        let mut m = Aligned::of(model);
        let (mut size, mut err) = (0usize, [0 as c_char; 256]);
        let mut h = null_mut();
        // SAFETY: every pointer is valid for its length; the model and the
        // memory live in the returned value, beside the handle.
        unsafe {
            let st =
                kestrel_memory_size(m.ptr(), model.len(), cfg, &mut size, err.as_mut_ptr(), 256);
            assert_eq!(st, Status::Ok, "{:?}", CStr::from_ptr(err.as_ptr()));
            let mut memory = Aligned::new(size);
            let st = kestrel_open(
                m.ptr(),
                model.len(),
                cfg,
                memory.ptr(),
                size,
                &mut h,
                err.as_mut_ptr(),
                256,
            );
            assert_eq!(st, Status::Ok, "{:?}", CStr::from_ptr(err.as_ptr()));
            Open {
                h,
                _model: m,
                _memory: memory,
            }
        }
    }

    fn error(&self) -> String {
        // SAFETY: a live handle's message is NUL-terminated.
        unsafe { CStr::from_ptr(kestrel_error(self.h)) }
            .to_string_lossy()
            .into_owned()
    }

    fn chat_turn(&self, user: &str) -> Vec<u32> {
        let (mut ids, mut n) = (vec![0u32; 512], 0usize);
        // SAFETY: valid buffers for their lengths.
        let st = unsafe {
            kestrel_chat_turn(
                self.h,
                null(),
                0,
                user.as_ptr().cast(),
                user.len(),
                ids.as_mut_ptr(),
                512,
                &mut n,
            )
        };
        assert_eq!(st, Status::Ok, "{}", self.error());
        ids.truncate(n);
        ids
    }

    /// Token ids of `text` as data.
    fn tokenize(&self, text: &str) -> Vec<u32> {
        let (mut ids, mut n) = (vec![0u32; 512], 0usize);
        // SAFETY: valid buffers for their lengths.
        let st = unsafe {
            kestrel_tokenize(
                self.h,
                text.as_ptr().cast(),
                text.len(),
                0,
                ids.as_mut_ptr(),
                512,
                &mut n,
            )
        };
        assert_eq!(st, Status::Ok, "{}", self.error());
        ids.truncate(n);
        ids
    }

    fn feed(&self, ids: &[u32]) -> Status {
        // SAFETY: valid for its length.
        unsafe { kestrel_feed(self.h, ids.as_ptr(), ids.len()) }
    }

    /// Up to `n` tokens pulled one at a time, and their streamed text.
    fn pull(&self, n: usize) -> (Vec<u32>, String) {
        let (mut ids, mut text) = (Vec::new(), Vec::new());
        let mut buf = [0u8; 64];
        let mut len = 0;
        for _ in 0..n {
            let mut id = 0;
            // SAFETY: valid out-parameters and buffers.
            let st = unsafe { kestrel_next(self.h, &mut id) };
            if st == Status::End {
                break;
            }
            assert_eq!(st, Status::Ok, "{}", self.error());
            ids.push(id);
            // SAFETY: as above.
            let st = unsafe { kestrel_piece(self.h, id, buf.as_mut_ptr().cast(), 64, &mut len) };
            assert_eq!(st, Status::Ok, "{}", self.error());
            text.extend_from_slice(&buf[..len]);
        }
        // SAFETY: as above.
        let st = unsafe { kestrel_piece_end(self.h, buf.as_mut_ptr().cast(), 64, &mut len) };
        assert_eq!(st, Status::Ok);
        text.extend_from_slice(&buf[..len]);
        (ids, String::from_utf8(text).unwrap())
    }

    fn history(&self) -> Vec<u32> {
        let (mut p, mut n) = (null(), 0usize);
        // SAFETY: valid out-parameters; the ids are read before the next call.
        unsafe {
            assert_eq!(kestrel_history(self.h, &mut p, &mut n), Status::Ok);
            std::slice::from_raw_parts(p, n).to_vec()
        }
    }
}

unsafe extern "C" fn collect(user: *mut c_void, text: *const c_char, len: usize) {
    // SAFETY: `user` is the Vec<u8> the test passed; `text` valid for `len`.
    unsafe {
        let out = &mut *user.cast::<Vec<u8>>();
        out.extend_from_slice(std::slice::from_raw_parts(text.cast::<u8>(), len));
    }
}

/// The tokens and text `kestrel run -p PROMPT -n n --temp 0` gives: the
/// shell's session over the same file.
fn kestrel_run(model: &[u8], n: usize) -> (Vec<u32>, String) {
    shell_session(model, |s, prompt| {
        let mut text = String::new();
        let st = s
            .generate(prompt, n, &AtomicBool::new(false), &mut |t| {
                text.push_str(t)
            })
            .unwrap();
        let ids = s.history()[prompt.len()..prompt.len() + st.generated].to_vec();
        (ids, text)
    })
}

/// `f` on the shell's greedy session over `model` (as `kestrel run` and
/// `kestrel chat` make it) and the chat prompt of [`PROMPT`].
fn shell_session<R>(model: &[u8], f: impl FnOnce(&mut Session, &[u32]) -> R) -> R {
    let dir = temp_dir("capi-shell");
    let path = dir.join("m.vqf");
    std::fs::write(&path, model).unwrap();
    let m = loader::Model::open(&path).unwrap();
    let mut layers = Vec::new();
    let w = m.weights(true, &mut layers).unwrap();
    let (k, pool, opts) = loader::setup(&w, &EngineArgs::default(), false, 128);
    let mut arena = loader::arena(&w, &opts).unwrap();
    let state = loader::state(&w, opts, &mut arena).unwrap();
    let greedy = SamplerConfig {
        temperature: 0.0,
        ..Default::default()
    };
    let mut s = Session::new(&w, k, &pool, state, greedy).unwrap();
    let user = [Message::text(Role::User, PROMPT)];
    let prompt = s.encode_chat(&chat_prompt(&w, &user, &[], None)).unwrap();
    let r = f(&mut s, &prompt);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[test]
fn pulled_and_generated_tokens_are_kestrel_runs() {
    let model = fixture("capi-same", WeightMode::Dual);
    let (want_ids, want_text) = kestrel_run(&model, 16);
    assert_eq!(want_ids.len(), 16);
    let cfg = greedy_config();

    let a = Open::new(&model, &cfg);
    let prompt = a.chat_turn(PROMPT);
    assert_eq!(a.feed(&prompt), Status::Ok, "{}", a.error());
    assert_eq!(a.pull(16), (want_ids.clone(), want_text.clone()));

    let b = Open::new(&model, &cfg);
    assert_eq!(b.feed(&b.chat_turn(PROMPT)), Status::Ok);
    let (mut text, mut generated) = (Vec::<u8>::new(), 0u32);
    let user = (&mut text as *mut Vec<u8>).cast();
    // SAFETY: `collect` gets the Vec it expects.
    let st = unsafe { kestrel_generate(b.h, 16, Some(collect), user, &mut generated) };
    assert_eq!((st, generated), (Status::Ok, 16), "{}", b.error());
    assert_eq!(String::from_utf8(text).unwrap(), want_text);
    assert_eq!(b.history()[prompt.len()..], want_ids[..]);

    // With prompt lookup drafting (the firmware host's way): the same.
    let c = Open::new(&model, &KestrelConfig { draft: 8, ..cfg });
    assert_eq!(c.feed(&c.chat_turn(PROMPT)), Status::Ok);
    // SAFETY: no callback; a valid out-parameter.
    let st = unsafe { kestrel_generate(c.h, 16, None, null_mut(), &mut generated) };
    assert_eq!((st, generated), (Status::Ok, 16));
    assert_eq!(c.history()[prompt.len()..], want_ids[..]);
}

/// The final norm's rows of `ids` (hidden each, in order), run through
/// the shell's session state in chunks of `chunk` as a fresh conversation.
fn output_rows(s: &mut Session, ids: &[u32], chunk: usize) -> Vec<f32> {
    use kestrel_core::model::forward::{forward_observed, Input, Observer};
    struct Rows(Vec<f32>);
    impl Observer for Rows {
        fn observe(&mut self, _: usize, input: Input, rows: &[f32]) {
            if input == Input::Output {
                self.0.extend_from_slice(rows);
            }
        }
        fn observes_output(&self) -> bool {
            true
        }
    }
    s.reset();
    let mut rows = Rows(Vec::new());
    let g = &mut s.gen;
    for part in ids.chunks(chunk) {
        forward_observed(g.weights, &mut g.state, &g.kernels, g.pool, part, &mut rows).unwrap();
    }
    s.reset();
    rows.0
}

/// `kestrel_logits`: after a feed, the shell session's logits of the same
/// prompt, bit for bit, and the greedy token is their argmax; after a
/// pulled token, that token's row; out of order and short buffers refused.
/// `kestrel_embed`: the final norm's rows of the shell's forward, pooled
/// (mean or last) and scaled to unit length; the conversation forgotten;
/// the same bits whatever came before.
#[test]
fn logits_and_embeddings() {
    let model = fixture("capi-logits", WeightMode::Dual);
    let cfg = greedy_config();
    let a = Open::new(&model, &cfg);
    let prompt = a.chat_turn(PROMPT);
    let (want_logits, rows, rows_of_one, hidden) = shell_session(&model, |s, p| {
        assert_eq!(p, &prompt[..]);
        s.feed(p).unwrap();
        let logits = s.gen.last_logits().to_vec();
        let hidden = s.gen.weights.cfg.hidden_size as usize;
        (logits, output_rows(s, p, 128), output_rows(s, p, 1), hidden)
    });
    let vocab = want_logits.len();
    let logits = |h: *mut Handle, cap: usize| {
        let (mut out, mut n) = (vec![0f32; cap], 0usize);
        // SAFETY: `out` holds `cap` floats; `n` is writable.
        let st = unsafe { kestrel_logits(h, out.as_mut_ptr(), cap, &mut n) };
        (st, out, n)
    };
    assert_eq!(logits(a.h, vocab).0, Status::Order, "nothing fed yet");
    assert_eq!(a.feed(&prompt), Status::Ok);
    let (st, got, n) = logits(a.h, vocab);
    assert_eq!((st, n), (Status::Ok, vocab), "{}", a.error());
    assert_eq!(got, want_logits, "the shell's logits of the prompt");
    let (st, _, n) = logits(a.h, vocab - 1);
    assert_eq!((st, n), (Status::Buffer, vocab));
    let best = (0..vocab).fold(0, |b, i| if got[i] > got[b] { i } else { b });
    let (ids, _) = a.pull(1);
    assert_eq!(ids, [best as u32], "greedy is the argmax");
    let (st, after, _) = logits(a.h, vocab);
    assert_eq!(st, Status::Ok);
    assert_ne!(after, got, "the pulled token's row");

    let embed = |h: *mut Handle, ids: &[u32], pooling: i32, cap: usize| {
        let (mut out, mut n) = (vec![0f32; cap], 0usize);
        // SAFETY: valid buffers for their lengths.
        let st = unsafe {
            kestrel_embed(
                h,
                ids.as_ptr(),
                ids.len(),
                pooling,
                out.as_mut_ptr(),
                cap,
                &mut n,
            )
        };
        (st, out, n)
    };
    let unit = |v: &[f32]| {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect::<Vec<f32>>()
    };
    let last = unit(&rows[rows.len() - hidden..]);
    let mean_of = |rows: &[f32]| {
        let mut sum = vec![0f32; hidden];
        for row in rows.chunks_exact(hidden) {
            sum.iter_mut().zip(row).for_each(|(o, v)| *o += v);
        }
        unit(
            &sum.iter()
                .map(|v| v / prompt.len() as f32)
                .collect::<Vec<_>>(),
        )
    };
    let mean = mean_of(&rows);
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-6);
    // Refused (a size query, a bad id): the conversation is kept.
    let kept = a.history();
    assert_eq!(
        embed(a.h, &prompt, KESTREL_POOLING_LAST, 0).0,
        Status::Buffer
    );
    assert_eq!(
        embed(a.h, &[vocab as u32], KESTREL_POOLING_LAST, hidden).0,
        Status::Token
    );
    assert_eq!(a.history(), kept);
    // After a turn and a pulled token: the conversation does not matter.
    let (st, e_last, n) = embed(a.h, &prompt, KESTREL_POOLING_LAST, hidden);
    assert_eq!((st, n), (Status::Ok, hidden), "{}", a.error());
    assert!(close(&e_last, &last), "{e_last:?} / {last:?}");
    assert!(a.history().is_empty(), "the conversation is forgotten");
    let (st, e_mean, _) = embed(a.h, &prompt, KESTREL_POOLING_MEAN, hidden);
    assert_eq!(st, Status::Ok);
    assert!(close(&e_mean, &mean) && !close(&e_mean, &e_last));
    let b = Open::new(&model, &cfg);
    assert_eq!(embed(b.h, &prompt, KESTREL_POOLING_LAST, hidden).1, e_last);
    // In chunks of 1 (another config's batch: the decode copy of the
    // weights): the shell's rows of one-token steps.
    let one = Open::new(&model, &KestrelConfig { batch: 1, ..cfg });
    let e_one = embed(one.h, &prompt, KESTREL_POOLING_MEAN, hidden).1;
    assert!(close(&e_one, &mean_of(&rows_of_one)) && !close(&e_one, &mean));
    // Refusals: a short buffer says the size; no ids, a bad pooling, an id
    // past the vocabulary.
    assert_eq!(embed(b.h, &prompt, 0, hidden - 1).0, Status::Buffer);
    assert_eq!(embed(b.h, &prompt, 0, hidden - 1).2, hidden);
    assert_eq!(
        embed(b.h, &[], 0, hidden).0,
        Status::Argument,
        "{}",
        b.error()
    );
    assert_eq!(embed(b.h, &prompt, 7, hidden).0, Status::Argument);
    assert!(b.error().contains("pooling"), "{}", b.error());
    let bad = [vocab as u32 + 1000];
    assert_ne!(embed(b.h, &bad, 0, hidden).0, Status::Ok);
}

/// `kestrel_stop_strings_set`: `kestrel_generate`'s text stops before the
/// first stop string found (one split over tokens too), the call says
/// `End`; the next turn closes the cut answer; bad lists are refused with
/// nothing changed.
#[test]
fn stop_strings_end_generated_answers() {
    use std::ffi::CString;
    let model = fixture("capi-stops", WeightMode::Dual);
    let (_, want) = kestrel_run(&model, 24);
    // A stop string in the middle of the answer, and one never written.
    let at = want
        .char_indices()
        .map(|(i, _)| i)
        .nth(want.chars().count() / 2)
        .unwrap();
    let cut: String = want[at..].chars().take(3).collect();
    assert!(!cut.is_empty() && !cut.contains('\0'));
    let first = want.find(&cut).unwrap();
    let cfg = greedy_config();
    let a = Open::new(&model, &cfg);
    let set = |h: *mut Handle, stops: &[&[u8]]| {
        let owned: Vec<CString> = stops.iter().map(|s| CString::new(*s).unwrap()).collect();
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        // SAFETY: `ptrs` holds NUL-terminated strings alive for the call.
        unsafe { kestrel_stop_strings_set(h, ptrs.as_ptr(), ptrs.len()) }
    };
    assert_eq!(
        set(a.h, &[b"never written \x01", cut.as_bytes()]),
        Status::Ok
    );
    let generate = |o: &Open, n: u32| {
        let (mut text, mut generated) = (Vec::<u8>::new(), 0u32);
        let user = (&mut text as *mut Vec<u8>).cast();
        // SAFETY: `collect` gets the Vec it expects.
        let st = unsafe { kestrel_generate(o.h, n, Some(collect), user, &mut generated) };
        (st, String::from_utf8(text).unwrap(), generated)
    };
    let prompt = a.chat_turn(PROMPT);
    assert_eq!(a.feed(&prompt), Status::Ok);
    let (st, text, n) = generate(&a, 24);
    assert_eq!(st, Status::End, "{}", a.error());
    assert_eq!(text, want[..first], "the text before the stop string");
    assert!((n as usize) < 24 && a.history().len() <= prompt.len() + n as usize + 1);
    // The next turn closes the cut answer first, as after max_tokens.
    let next = a.chat_turn("Again?");
    let b = Open::new(&model, &cfg);
    let fresh_second = b.chat_turn("Again?");
    assert!(next.len() > fresh_second.len(), "{next:?}");
    assert_eq!(next[next.len() - fresh_second.len()..], fresh_second[..]);
    let mut end = [0u32; 1];
    let mut n = 0usize;
    // SAFETY: valid buffers for their lengths (special tokens read).
    let st = unsafe {
        kestrel_tokenize(
            a.h,
            c"<|im_end|>".as_ptr(),
            10,
            1,
            end.as_mut_ptr(),
            1,
            &mut n,
        )
    };
    assert_eq!((st, n), (Status::Ok, 1));
    assert_eq!(next[0], end[0], "the cut answer is closed first: {next:?}");
    // Without stop strings: the whole answer again.
    assert_eq!(set(b.h, &[cut.as_bytes()]), Status::Ok);
    assert_eq!(set(b.h, &[]), Status::Ok);
    assert_eq!(b.feed(&b.chat_turn(PROMPT)), Status::Ok);
    assert_eq!(generate(&b, 24).1, want);
    // Refused, nothing changed: too many, empty, too long, not UTF-8, NULL.
    assert_eq!(set(b.h, &[b"a", b"b", b"c", b"d", b"e"]), Status::Argument);
    assert!(b.error().contains("stop strings"), "{}", b.error());
    assert_eq!(set(b.h, &[b""]), Status::Argument);
    assert_eq!(set(b.h, &[&[b'x'; 65]]), Status::Argument);
    assert_eq!(set(b.h, &[&[b'x'; 64]]), Status::Ok);
    assert_eq!(set(b.h, &[b"\xff"]), Status::Argument);
    // SAFETY: a NULL list with a count is refused before any read.
    let st = unsafe { kestrel_stop_strings_set(b.h, null(), 1) };
    assert_eq!(st, Status::Argument);
}

/// The first index of the largest value (the greedy sampler's choice).
fn first_argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best as u32
}

#[test]
fn logit_bias_bans_and_forces_tokens() {
    let model = fixture("capi-bias", WeightMode::F32);
    let cfg = greedy_config();
    let a = Open::new(&model, &cfg);
    let prompt = a.chat_turn(PROMPT);
    let vocab = {
        // SAFETY: a live handle.
        unsafe { kestrel_vocab(a.h) as usize }
    };
    // SAFETY: `ids` and `bias` hold `ids.len()` values each.
    let set = |o: &Open, ids: &[u32], bias: &[f32]| unsafe {
        kestrel_logit_bias_set(o.h, ids.as_ptr(), bias.as_ptr(), ids.len())
    };
    assert_eq!(a.feed(&prompt), Status::Ok);
    let mut logits = vec![0f32; vocab];
    let mut n = 0usize;
    // SAFETY: `logits` holds `vocab` floats.
    let st = unsafe { kestrel_logits(a.h, logits.as_mut_ptr(), vocab, &mut n) };
    assert_eq!((st, n), (Status::Ok, vocab));
    let first = first_argmax(&logits);

    // Banned: the greedy choice is the best of the others.
    assert_eq!(set(&a, &[first], &[-100.0]), Status::Ok, "{}", a.error());
    let mut banned = logits.clone();
    banned[first as usize] -= 100.0;
    let second = first_argmax(&banned);
    assert_ne!(second, first);
    // Refusals name the fault and change nothing: the ban holds.
    for (ids, bias, what) in [
        (vec![vocab as u32], vec![1.0], "vocabulary"),
        (vec![first], vec![100.5], "-100"),
        (vec![first], vec![f32::NAN], "-100"),
        (vec![7; 301], vec![1.0; 301], "300"),
    ] {
        assert_eq!(set(&a, &ids, &bias), Status::Argument, "{what}");
        assert!(a.error().contains(what), "{what}: {}", a.error());
    }
    // SAFETY: NULL with a count is what is tested.
    let st = unsafe { kestrel_logit_bias_set(a.h, null(), null(), 1) };
    assert_eq!(st, Status::Argument);
    assert_eq!(a.pull(1).0, vec![second]);

    // Forced: +100 on one ordinary token makes every greedy pick it.
    let forced = a.tokenize(" the")[0];
    assert_eq!(set(&a, &[forced], &[100.0]), Status::Ok);
    assert_eq!(a.pull(4).0, vec![forced; 4]);

    // Cleared (n 0): the answer is the unbiased one again.
    let b = Open::new(&model, &cfg);
    assert_eq!(b.feed(&prompt), Status::Ok);
    let (want, _) = b.pull(6);
    let c = Open::new(&model, &cfg);
    assert_eq!(c.feed(&prompt), Status::Ok);
    assert_eq!(set(&c, &[first], &[-100.0]), Status::Ok);
    assert_eq!(set(&c, &[], &[]), Status::Ok);
    assert_eq!(c.pull(6).0, want);
    assert_eq!(want[0], first);
}

#[test]
fn json_schema_answers_are_kestrel_runs_and_valid() {
    use kestrel::json_output::{schema_from_json, JsonOutput, SortedVocab};
    use kestrel_core::json;
    let model = fixture("capi-json", WeightMode::F32);
    // Small enough for the random fixture to close within the limit.
    let schema = r#"{"type":"object","properties":{"ok":{"type":"boolean"},"kind":{"enum":["cat","dog"]},"age":{"type":"integer","minimum":3,"maximum":12}},"required":["ok","kind","age"],"additionalProperties":false}"#;
    let limit = 400;
    // `kestrel run --json-schema`: the shell's session, constrained.
    let (want_ids, want) = shell_session(&model, |s, prompt| {
        let vocab = s.weights().cfg.vocab_size as usize;
        s.json = Some((
            JsonOutput::new(schema_from_json(schema.as_bytes()).unwrap(), vocab),
            SortedVocab::new(&s.gen.tokenizer, vocab),
        ));
        let mut text = String::new();
        let st = s
            .generate(prompt, limit, &AtomicBool::new(false), &mut |t| {
                text.push_str(t)
            })
            .unwrap();
        assert!(st.stopped, "the answer closed within {limit}: {text}");
        let ids = s.history()[prompt.len()..prompt.len() + st.generated].to_vec();
        (ids, text)
    });
    let v = json::parse(want.as_bytes()).unwrap_or_else(|e| panic!("{e}: {want}"));
    let age = v.get("age").and_then(|a| a.as_i64()).unwrap();
    assert!((3..=12).contains(&age), "{want}");
    let (unconstrained, _) = kestrel_run(&model, 8);
    assert_ne!(want_ids[..8], unconstrained[..], "the schema matters here");

    let cfg = greedy_config();
    let set = |o: &Open, text: &str| {
        // SAFETY: `text` is readable for its length.
        unsafe { kestrel_json_schema_set(o.h, text.as_ptr().cast(), text.len()) }
    };
    let generate = |o: &Open, n: u32| {
        let (mut text, mut generated) = (Vec::<u8>::new(), 0u32);
        let user = (&mut text as *mut Vec<u8>).cast();
        // SAFETY: `collect` gets the Vec it expects.
        let st = unsafe { kestrel_generate(o.h, n, Some(collect), user, &mut generated) };
        (st, String::from_utf8(text).unwrap(), generated)
    };
    // Generated, in two calls (an answer cut by max_tokens goes on).
    let a = Open::new(&model, &cfg);
    let prompt = a.chat_turn(PROMPT);
    assert_eq!(set(&a, schema), Status::Ok, "{}", a.error());
    assert_eq!(a.feed(&prompt), Status::Ok);
    let (st, first, n1) = generate(&a, 5);
    assert_eq!((st, n1), (Status::Ok, 5), "{}", a.error());
    // An empty feed is no new answer: the value goes on.
    assert_eq!(a.feed(&[]), Status::Ok);
    let (st, rest, n2) = generate(&a, limit as u32);
    assert_eq!(st, Status::End, "{}", a.error());
    assert_eq!(format!("{first}{rest}"), want);
    assert_eq!((n1 + n2) as usize, want_ids.len());
    // Pulled, after a feed of the same prompt: the constraint starts again.
    let b = Open::new(&model, &cfg);
    // SAFETY: a live handle.
    let restart = |o: &Open| assert_eq!(unsafe { kestrel_rollback(o.h, 0) }, Status::Ok);
    assert_eq!(set(&b, schema), Status::Ok);
    assert_eq!(b.feed(&prompt), Status::Ok);
    let (ids, text) = b.pull(limit);
    assert_eq!((ids, text), (want_ids.clone(), want.clone()));
    restart(&b);
    assert_eq!(b.feed(&prompt), Status::Ok);
    assert_eq!(b.pull(limit).0, want_ids, "a second answer, from its start");
    // Refused, naming the keyword; nothing changed.
    let strict_refusal =
        r#"{"type":"object","properties":{"s":{"type":"string","pattern":"(?=a)"}}}"#;
    assert_eq!(set(&b, strict_refusal), Status::Argument);
    assert!(
        b.error().contains("pattern") && b.error().contains("properties.s"),
        "{}",
        b.error()
    );
    assert_eq!(set(&b, "{\"type\":"), Status::Argument, "not JSON");
    restart(&b);
    assert_eq!(b.feed(&prompt), Status::Ok);
    assert_eq!(b.pull(limit).0, want_ids, "the schema set before holds");
    // Cleared (len 0): the unconstrained answer.
    assert_eq!(set(&b, ""), Status::Ok);
    restart(&b);
    assert_eq!(b.feed(&prompt), Status::Ok);
    assert_eq!(b.pull(8).0, unconstrained);
}

#[test]
fn drafting_by_a_prediction_keeps_the_answer() {
    let model = fixture("capi-drafting", WeightMode::Dual);
    let (want_ids, want) = kestrel_run(&model, 24);
    let cfg = KestrelConfig {
        draft: 8,
        ..greedy_config()
    };
    let generate = |o: &Open| {
        let (mut text, mut generated) = (Vec::<u8>::new(), 0u32);
        let user = (&mut text as *mut Vec<u8>).cast();
        // SAFETY: `collect` gets the Vec it expects.
        let st = unsafe { kestrel_generate(o.h, 24, Some(collect), user, &mut generated) };
        assert!(matches!(st, Status::Ok | Status::End), "{}", o.error());
        let (mut drafted, mut accepted) = (0u32, 0u32);
        // SAFETY: writable out-parameters.
        let st = unsafe { kestrel_draft_stats(o.h, &mut drafted, &mut accepted) };
        assert_eq!(st, Status::Ok);
        let ids = o.history()[o.history().len() - generated as usize..].to_vec();
        (String::from_utf8(text).unwrap(), ids, drafted, accepted)
    };
    // SAFETY: `ids` is readable for its length.
    let set = |o: &Open, max: u32, ids: &[u32]| unsafe {
        kestrel_drafting_set(o.h, max, ids.as_ptr(), ids.len())
    };
    let restart = |o: &Open, prompt: &[u32]| {
        // SAFETY: a live handle.
        assert_eq!(unsafe { kestrel_rollback(o.h, 0) }, Status::Ok);
        assert_eq!(o.feed(prompt), Status::Ok);
    };
    let a = Open::new(&model, &cfg);
    let prompt = a.chat_turn(PROMPT);
    // The expected answer as the prediction: the same answer, mostly drafted.
    assert_eq!(set(&a, 8, &want_ids), Status::Ok, "{}", a.error());
    restart(&a, &prompt);
    let (text, ids, drafted, accepted) = generate(&a);
    assert_eq!((&text, &ids), (&want, &want_ids));
    assert!(
        accepted as usize >= want_ids.len() / 2 && drafted >= accepted,
        "{drafted} drafted, {accepted} accepted"
    );
    // A wrong prediction: the same answer, its drafts rejected.
    let wrong: Vec<u32> = want_ids.iter().map(|&t| (t + 1) % 200).collect();
    assert_eq!(set(&a, 8, &wrong), Status::Ok);
    restart(&a, &prompt);
    let (text, _, _, accepted_wrong) = generate(&a);
    assert_eq!(text, want);
    assert!(
        accepted_wrong < accepted,
        "{accepted_wrong} of a wrong prediction kept"
    );
    // Plain decoding, with a prediction set or not: nothing drafted.
    for prediction in [&want_ids[..], &[]] {
        assert_eq!(set(&a, 0, prediction), Status::Ok);
        restart(&a, &prompt);
        let (text, _, drafted, _) = generate(&a);
        assert_eq!((text.as_str(), drafted), (want.as_str(), 0));
    }
    // Refusals: a longer draft than the config sized, a prediction longer
    // than the context, an id past the vocabulary.
    assert_eq!(set(&a, 9, &[]), Status::Argument);
    assert!(a.error().contains("max_draft"), "{}", a.error());
    assert_eq!(set(&a, 4, &vec![1; 100_000]), Status::Argument);
    assert_eq!(set(&a, 4, &[u32::MAX]), Status::Token);
    // Without drafting in the config, no prediction fits.
    let b = Open::new(&model, &greedy_config());
    assert_eq!(set(&b, 0, &want_ids), Status::Argument);
    assert_eq!(set(&b, 0, &[]), Status::Ok);
}

#[test]
fn chat_messages_are_formatted_as_the_server_formats_them() {
    let model = fixture("capi-messages", WeightMode::F32);
    let msgs = [
        (Role::System, "You are terse. <|im_start|>user"),
        (Role::User, PROMPT),
        (Role::Assistant, "Paris."),
        (Role::User, "And of Italy?"),
        (Role::Tool, "{\"capital\": \"Rome\"}"),
    ];
    // The server's (and `kestrel run`'s) formatting of these messages.
    let want = shell_session(&model, |s, _| {
        let m: Vec<Message> = msgs.iter().map(|(r, c)| Message::text(*r, c)).collect();
        s.encode_chat(&chat_prompt(s.gen.weights, &m, &[], None))
            .unwrap()
    });
    let role = |r: Role| match r {
        Role::System => KESTREL_ROLE_SYSTEM,
        Role::User => KESTREL_ROLE_USER,
        Role::Assistant => KESTREL_ROLE_ASSISTANT,
        Role::Tool => KESTREL_ROLE_TOOL,
    };
    let given: Vec<KestrelMessage> = msgs
        .iter()
        .map(|(r, c)| KestrelMessage {
            role: role(*r),
            text: c.as_ptr().cast(),
            len: c.len(),
        })
        .collect();
    let format = |o: &Open, m: &[KestrelMessage]| {
        let (mut ids, mut n) = (vec![0u32; 512], 0usize);
        // SAFETY: valid buffers for their lengths.
        let st = unsafe {
            kestrel_chat_messages(o.h, m.as_ptr(), m.len(), ids.as_mut_ptr(), 512, &mut n)
        };
        ids.truncate(n);
        (st, ids)
    };
    let a = Open::new(&model, &greedy_config());
    let (st, ids) = format(&a, &given);
    assert_eq!(st, Status::Ok, "{}", a.error());
    assert_eq!(ids, want);
    // After cached turns: one user message is kestrel_chat_turn's turn.
    assert_eq!(a.feed(&ids), Status::Ok);
    let _ = a.pull(3);
    let (st, next) = format(&a, &given[3..4]);
    assert_eq!(st, Status::Ok);
    assert_eq!(next, a.chat_turn("And of Italy?"));
    // Refused: an unknown role, too many messages.
    let bad = [KestrelMessage {
        role: 7,
        ..given[0]
    }];
    assert_eq!(format(&a, &bad).0, Status::Argument);
    assert!(a.error().contains("role"), "{}", a.error());
    let many = vec![given[1]; 33];
    assert_eq!(format(&a, &many).0, Status::Argument);
}

/// `kestrel_context_policy(DROP_OLDEST, keep)`: a conversation longer than
/// the context goes on; each feed that would not fit first drops the
/// oldest turns after the first `keep` tokens, and the state is that of a
/// fresh engine fed the conversation kept (the same logits, bit for bit,
/// on a one-copy file); under REFUSE the same feed is a context error.
#[test]
fn a_conversation_longer_than_the_context_drops_its_oldest_turns() {
    let model = fixture("capi-keep", WeightMode::Q8);
    let cfg = KestrelConfig {
        context: 96,
        batch: 16,
        ..greedy_config()
    };
    let a = Open::new(&model, &cfg);
    let keep = 6;
    // SAFETY: a live handle.
    unsafe {
        assert_eq!(kestrel_context_policy(a.h, 7, 0), Status::Argument);
        assert_eq!(
            kestrel_context_policy(a.h, KESTREL_CONTEXT_DROP_OLDEST, keep),
            Status::Ok
        );
    }
    let logits = |o: &Open| {
        let (mut out, mut n) = (vec![0f32; 1024], 0usize);
        // SAFETY: `out` holds 1024 floats.
        let st = unsafe { kestrel_logits(o.h, out.as_mut_ptr(), 1024, &mut n) };
        assert_eq!(st, Status::Ok, "{}", o.error());
        out.truncate(n);
        out
    };
    let mut start = Vec::new();
    let mut dropped_any = false;
    for i in 0..10 {
        let before = a.history().len();
        let ids = a.chat_turn(&format!("Question number {i}, please answer briefly?"));
        assert_eq!(a.feed(&ids), Status::Ok, "turn {i}: {}", a.error());
        let h = a.history();
        if start.is_empty() {
            start = h[..keep].to_vec();
        }
        assert_eq!(h[..keep], start[..], "the first tokens stay");
        if h.len() < before + ids.len() {
            dropped_any = true;
            let (mut im_start, mut n) = (0u32, 0usize);
            let text = c"<|im_start|>";
            // SAFETY: valid buffers for their lengths (special tokens read).
            let st =
                unsafe { kestrel_tokenize(a.h, text.as_ptr(), 12, 1, &mut im_start, 1, &mut n) };
            assert_eq!((st, n), (Status::Ok, 1));
            assert_eq!(
                h[keep], im_start,
                "a whole turn follows the kept tokens: {h:?}"
            );
        }
        // A fresh engine fed the conversation kept: the same logits.
        let b = Open::new(&model, &cfg);
        assert_eq!(b.feed(&h), Status::Ok);
        assert_eq!(logits(&a), logits(&b), "turn {i}");
        a.pull(6);
    }
    assert!(dropped_any, "the conversation outgrew the context");
    // A turn that needs every turn after `keep` gone, after a cut answer:
    // its close has no answer left to close, and is not fed.
    let long = format!("Please answer: {}", "one two three ".repeat(8));
    let ids = a.chat_turn(&long);
    assert_eq!(a.feed(&ids), Status::Ok, "{}", a.error());
    let h = a.history();
    assert_eq!(h[..keep], start[..]);
    assert_eq!(
        h.len(),
        keep + ids.len() - 1,
        "every turn after keep dropped, the close too"
    );
    assert_eq!(h[keep..], ids[1..]);
    // Under REFUSE (the default) the same feed does not fit.
    let c = Open::new(&model, &cfg);
    let mut status = Status::Ok;
    for i in 0..10 {
        let ids = c.chat_turn(&format!("Question number {i}, please answer briefly?"));
        status = c.feed(&ids);
        if status != Status::Ok {
            break;
        }
        c.pull(6);
    }
    assert_eq!(status, Status::Context, "{}", c.error());
}

/// A second turn follows the first in the kept cache: its ids start after
/// the first answer, and its tokens are those of one fresh feed of the
/// whole conversation.
#[test]
fn a_second_turn_reuses_the_cache() {
    let model = fixture("capi-turns", WeightMode::F32);
    let cfg = greedy_config();
    let a = Open::new(&model, &cfg);
    let first = a.chat_turn(PROMPT);
    assert_eq!(a.feed(&first), Status::Ok);
    let _ = a.pull(6);
    let cached = a.history();
    let second = a.chat_turn("And of Italy?");
    assert!(
        second.len() < first.len() + 8,
        "no system turn again: {second:?}"
    );
    assert_eq!(a.feed(&second), Status::Ok, "{}", a.error());
    assert_eq!(a.history()[..cached.len()], cached[..]);
    let (next, _) = a.pull(6);

    let b = Open::new(&model, &cfg);
    let whole: Vec<u32> = cached.iter().chain(&second).copied().collect();
    assert_eq!(b.feed(&whole), Status::Ok);
    assert_eq!(b.pull(6).0, next);

    // Reset: a first turn again (with the system turn).
    // SAFETY: a live handle.
    assert_eq!(unsafe { kestrel_reset(a.h) }, Status::Ok);
    assert_eq!(a.chat_turn(PROMPT), first);
}

impl Open {
    /// The conversation's saved state.
    fn save(&self) -> Vec<u8> {
        let mut size = 0usize;
        // SAFETY: valid out-parameters and buffers for their lengths.
        unsafe {
            assert_eq!(kestrel_state_size(self.h, &mut size), Status::Ok);
            let mut short = vec![0u8; size - 1];
            let mut len = 0usize;
            let st = kestrel_state_save(self.h, short.as_mut_ptr().cast(), size - 1, &mut len);
            assert_eq!((st, len), (Status::Buffer, size), "the size needed");
            let mut out = vec![0u8; size];
            let st = kestrel_state_save(self.h, out.as_mut_ptr().cast(), size, &mut len);
            assert_eq!((st, len), (Status::Ok, size), "{}", self.error());
            out
        }
    }

    fn load(&self, state: &[u8]) -> Status {
        // SAFETY: readable for its length.
        unsafe { kestrel_state_load(self.h, state.as_ptr().cast(), state.len()) }
    }
}

/// A saved conversation restored into another engine goes on as the first
/// would have: after an answer cut by `max_tokens` (its logits waiting),
/// after a whole turn, and sampled (the generator's state kept); a
/// rollback to the end of turn 1 then a new turn gives the tokens of a
/// fresh feed of turn 1 and the new turn; a state of another model file,
/// another KV type, a longer context than the engine's, or damaged bytes
/// is refused and changes nothing.
#[test]
fn saved_state_restores_rolls_back_and_is_checked() {
    let model = fixture("capi-state", WeightMode::F32);
    let cfg = greedy_config();
    let a = Open::new(&model, &cfg);
    let first = a.chat_turn(PROMPT);
    assert_eq!(a.feed(&first), Status::Ok);
    let (head, _) = a.pull(5);
    let cut = a.save();
    let (tail, _) = a.pull(5);
    let b = Open::new(&model, &cfg);
    assert_eq!(b.load(&cut), Status::Ok, "{}", b.error());
    assert_eq!(b.history(), [&first[..], &head[..]].concat());
    assert_eq!(b.pull(5).0, tail, "the cut answer goes on");

    // A whole turn, then the next one from the restored state.
    let turn1_end = a.history().len();
    let at_turn1 = a.save();
    let second = a.chat_turn("And of Italy?");
    assert_eq!(a.feed(&second), Status::Ok);
    let (answer2, _) = a.pull(6);
    let c = Open::new(&model, &cfg);
    assert_eq!(c.load(&at_turn1), Status::Ok, "{}", c.error());
    assert_eq!(c.feed(&c.chat_turn("And of Italy?")), Status::Ok);
    assert_eq!(c.pull(6).0, answer2);

    // Rollback to the end of turn 1, a different turn 2: as a fresh feed.
    // SAFETY: a live handle.
    assert_eq!(unsafe { kestrel_rollback(a.h, turn1_end) }, Status::Ok);
    assert_eq!(a.history().len(), turn1_end);
    let other = a.chat_turn("And of Spain?");
    assert_eq!(a.feed(&other), Status::Ok);
    let (answer3, _) = a.pull(6);
    let d = Open::new(&model, &cfg);
    let whole: Vec<u32> = at_turn1_history(&at_turn1, &c, turn1_end)
        .iter()
        .chain(&other)
        .copied()
        .collect();
    assert_eq!(d.feed(&whole), Status::Ok);
    assert_eq!(d.pull(6).0, answer3);
    let past = a.history().len() + 1;
    // SAFETY: a live handle; more than cached.
    let st = unsafe { kestrel_rollback(a.h, past) };
    assert_eq!(st, Status::Argument);

    // Sampled: the generator's state travels with the rows.
    let sampled = KestrelConfig {
        temperature: 0.9,
        seed: 7,
        ..cfg
    };
    let s = Open::new(&model, &sampled);
    assert_eq!(s.feed(&first), Status::Ok);
    let _ = s.pull(3);
    let mid = s.save();
    let (rest, _) = s.pull(8);
    let t = Open::new(&model, &sampled);
    assert_eq!(t.load(&mid), Status::Ok);
    assert_eq!(t.pull(8).0, rest);

    // Refusals leave the conversation as it was.
    let e = Open::new(&model, &cfg);
    assert_eq!(e.feed(&first), Status::Ok);
    let before = e.history();
    let other_model = fixture("capi-state-q8", WeightMode::Dual);
    let f = Open::new(&other_model, &cfg);
    assert_eq!(f.load(&cut), Status::State);
    assert!(f.error().contains("another model file"), "{}", f.error());
    let g = Open::new(&model, &KestrelConfig { kv_f32: 1, ..cfg });
    assert_eq!(g.load(&cut), Status::State);
    assert!(g.error().contains("KV element"), "{}", g.error());
    let short = Open::new(&model, &KestrelConfig { context: 8, ..cfg });
    assert_eq!(short.load(&cut), Status::Context);
    for damaged in [
        cut[..cut.len() - 1].to_vec(),
        cut[..10].to_vec(),
        [&b"XSTATE\0\0"[..], &cut[8..]].concat(),
        [&cut[..60], &[1u8, 0, 0, 0][..], &cut[64..]].concat(),
    ] {
        assert_eq!(e.load(&damaged), Status::State, "{}", e.error());
        assert_eq!(e.history(), before);
    }
    // A token id past the vocabulary in the saved history.
    let mut bad = cut.clone();
    bad[64..68].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(e.load(&bad), Status::State, "{}", e.error());
    assert_eq!(e.history(), before);
    // NULL with a length.
    // SAFETY: a live handle; NULL is what is tested.
    let st = unsafe { kestrel_state_load(e.h, null(), 4) };
    assert_eq!(st, Status::Argument);
}

/// Sampling settings change between calls on one handle (the prompt
/// stays cached): after a feed, a handle opened greedy and set to sampling
/// with a reseed gives the tokens of a handle opened with those settings;
/// set back to greedy, the greedy tokens. Out-of-range settings (NaN
/// included), a bad `reseed` and a `struct_size` of another version are
/// refused by name and change nothing.
/// Qwen3.5 (the dense fixture) through the C ABI: the tokens `kestrel run`
/// gives; a state saved mid-answer goes on in another engine; a rollback
/// to the end of the prompt (the Gated DeltaNet snapshot) then a new turn
/// answers as a fresh feed of both; a rollback the recurrent state cannot
/// go back to is `Argument` with a message, the conversation unchanged.
#[test]
fn qwen35_through_the_abi() {
    let dir = temp_dir("capi-qwen35");
    let path = dir.join("m.vqf");
    let hf = kestrel_tests::fixtures().join("dev_qwen35_dense/hf_bf16");
    kestrel::convert::convert(&hf, &path, WeightMode::F32, Some(256), false).unwrap();
    let model = std::fs::read(&path).unwrap();
    let (want_ids, want_text) = kestrel_run(&model, 12);
    let cfg = greedy_config();
    let a = Open::new(&model, &cfg);
    let prompt = a.chat_turn(PROMPT);
    assert_eq!(a.feed(&prompt), Status::Ok, "{}", a.error());
    let (head, _) = a.pull(5);
    let cut = a.save();
    let (tail, _) = a.pull(7);
    assert_eq!([&head[..], &tail[..]].concat(), want_ids);
    let b = Open::new(&model, &cfg);
    assert_eq!(b.load(&cut), Status::Ok, "{}", b.error());
    assert_eq!(b.pull(7).0, tail, "the restored answer goes on");
    assert!(!want_text.is_empty());

    // Back to 3 tokens before the prompt's end: refused, nothing changed.
    let before = a.history();
    // SAFETY: a live handle.
    let st = unsafe { kestrel_rollback(a.h, prompt.len() - 3) };
    assert_eq!(st, Status::Argument);
    assert!(a.error().contains("Gated DeltaNet"), "{}", a.error());
    assert_eq!(a.history(), before);
    // Back to the prompt's end, then another turn: a fresh feed's answer.
    // SAFETY: a live handle.
    let st = unsafe { kestrel_rollback(a.h, prompt.len()) };
    assert_eq!(st, Status::Ok, "{}", a.error());
    let second = a.chat_turn("And of Italy?");
    assert_eq!(a.feed(&second), Status::Ok, "{}", a.error());
    let (answer, _) = a.pull(6);
    let d = Open::new(&model, &cfg);
    assert_eq!(d.feed(&[&prompt[..], &second[..]].concat()), Status::Ok);
    assert_eq!(d.pull(6).0, answer);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sampling_settings_change_between_calls() {
    let model = fixture("capi-sampling", WeightMode::F32);
    let greedy = greedy_config();
    let sampled = KestrelConfig {
        temperature: 0.9,
        top_k: 20,
        seed: 11,
        ..greedy
    };
    let get = |o: &Open| {
        let mut s = std::mem::MaybeUninit::<KestrelSampling>::zeroed();
        // SAFETY: writable; struct_size set before the call.
        unsafe {
            (*s.as_mut_ptr()).struct_size = std::mem::size_of::<KestrelSampling>() as u32;
            assert_eq!(kestrel_sampling_get(o.h, s.as_mut_ptr()), Status::Ok);
            s.assume_init()
        }
    };
    // SAFETY: a live handle and a readable struct.
    let set = |o: &Open, s: &KestrelSampling| unsafe { kestrel_sampling_set(o.h, s) };

    let want = Open::new(&model, &sampled);
    let prompt = want.chat_turn(PROMPT);
    assert_eq!(want.feed(&prompt), Status::Ok);
    let (want_sampled, _) = want.pull(8);
    let g = Open::new(&model, &greedy);
    assert_eq!(g.feed(&prompt), Status::Ok);
    let (want_greedy, _) = g.pull(8);
    assert_ne!(want_sampled, want_greedy, "the settings matter here");

    let a = Open::new(&model, &greedy);
    let s0 = get(&a);
    assert_eq!((s0.temperature, s0.top_k, s0.reseed), (0.0, 40, 0));
    assert_eq!(a.feed(&prompt), Status::Ok);
    let s1 = KestrelSampling {
        temperature: 0.9,
        top_k: 20,
        seed: 11,
        reseed: 1,
        ..s0
    };
    assert_eq!(set(&a, &s1), Status::Ok, "{}", a.error());
    assert_eq!(get(&a).temperature, 0.9);
    assert_eq!(a.pull(8).0, want_sampled);

    let b = Open::new(&model, &sampled);
    assert_eq!(b.feed(&prompt), Status::Ok);
    assert_eq!(set(&b, &s0), Status::Ok);
    assert_eq!(b.pull(8).0, want_greedy);

    for (bad, field) in [
        (
            KestrelSampling {
                temperature: f32::NAN,
                ..s0
            },
            "temperature",
        ),
        (
            KestrelSampling {
                temperature: -1.0,
                ..s0
            },
            "temperature",
        ),
        (KestrelSampling { top_p: 7.0, ..s0 }, "top_p"),
        (KestrelSampling { min_p: -3.0, ..s0 }, "min_p"),
        (
            KestrelSampling {
                repeat_penalty: f32::NAN,
                ..s0
            },
            "repeat_penalty",
        ),
        (KestrelSampling { reseed: 2, ..s0 }, "reseed"),
        (
            KestrelSampling {
                struct_size: 8,
                ..s0
            },
            "struct_size",
        ),
    ] {
        assert_eq!(set(&a, &bad), Status::Argument, "{field}");
        assert!(a.error().contains(field), "{field}: {}", a.error());
        assert_eq!(get(&a).temperature, 0.9, "unchanged");
    }
    // SAFETY: NULL is what is tested.
    let st = unsafe { kestrel_sampling_set(a.h, null()) };
    assert_eq!(st, Status::Argument);
}

/// The history saved in `state` (its first `n` tokens), read back through
/// an engine `via` that restored it.
fn at_turn1_history(state: &[u8], via: &Open, n: usize) -> Vec<u32> {
    assert_eq!(via.load(state), Status::Ok);
    let h = via.history();
    assert_eq!(h.len(), n);
    h
}

/// `kestrel chat`'s way with two turns, the first cut at `n` tokens: the
/// shell's session generates, formats the next turn after the cached ones
/// (`chat::format_turn` closing the cut answer with `END_OF_TURN` first)
/// and generates again (shell/src/generate.rs, `chat_on`); the whole
/// conversation's tokens.
fn kestrel_chat_two_turns(model: &[u8], second: &str, n: usize) -> Vec<u32> {
    shell_session(model, |s, first| {
        let no = AtomicBool::new(false);
        let st = s.generate(first, n, &no, &mut |_| {}).unwrap();
        assert!(!st.stopped, "the first answer is cut at {n} tokens");
        let mut text = kestrel::generate::ChatText::default();
        let style = kestrel::generate::chat_style(s.gen.weights);
        let user = Message::text(Role::User, second);
        kestrel_core::chat::format_turn(&style, None, &user, false, true, None, &mut text).unwrap();
        let next = text.encode(&s.gen.tokenizer).unwrap();
        s.generate(&next, n, &no, &mut |_| {}).unwrap();
        s.history().to_vec()
    })
}

/// After an answer cut by its token limit, the next turn is closed and
/// formatted as `kestrel chat` does it: the same tokens, pulled or
/// generated.
#[test]
fn a_turn_after_a_cut_answer_is_kestrel_chats() {
    let model = fixture("capi-cut", WeightMode::F32);
    let want = kestrel_chat_two_turns(&model, "And of Italy?", 6);
    for generate in [false, true] {
        let a = Open::new(&model, &greedy_config());
        assert_eq!(a.feed(&a.chat_turn(PROMPT)), Status::Ok);
        let second_turn = |a: &Open| {
            let second = a.chat_turn("And of Italy?");
            assert_eq!(a.feed(&second), Status::Ok, "{}", a.error());
        };
        if generate {
            // SAFETY: no callback; NULL out-parameter.
            let st = unsafe { kestrel_generate(a.h, 6, None, null_mut(), null_mut()) };
            assert_eq!(st, Status::Ok, "cut at 6");
            second_turn(&a);
            // SAFETY: as above.
            let st = unsafe { kestrel_generate(a.h, 6, None, null_mut(), null_mut()) };
            assert!(matches!(st, Status::Ok | Status::End));
        } else {
            let _ = a.pull(6);
            second_turn(&a);
            let _ = a.pull(6);
        }
        assert_eq!(a.history(), want, "generated: {generate}");
    }
}

/// The host's parallel for: every index on a scoped thread of its own.
unsafe extern "C" fn threads(_pool: *mut c_void, n: usize, task_fn: TaskFn, task: *mut c_void) {
    let task = task as usize;
    std::thread::scope(|s| {
        for i in 0..n {
            // SAFETY: the library's task, each index once, all joined
            // before returning.
            s.spawn(move || unsafe { task_fn(task as *mut c_void, i) });
        }
    });
}

#[test]
fn the_parallel_callback_gives_the_same_tokens() {
    let model = fixture("capi-threads", WeightMode::Dual);
    let serial = greedy_config();
    let pooled = KestrelConfig {
        threads: 3,
        parallel: Some(threads),
        ..serial
    };
    let mut got = Vec::new();
    for cfg in [serial, pooled] {
        let e = Open::new(&model, &cfg);
        assert_eq!(e.feed(&e.chat_turn(PROMPT)), Status::Ok);
        got.push(e.pull(8).0);
    }
    assert_eq!(got[0], got[1]);
}

/// The host's parallel for that counts its calls and cancels the handle
/// at call `at` (from inside the library's work, as another thread would).
struct CancelAt {
    h: std::sync::atomic::AtomicPtr<Handle>,
    calls: std::sync::atomic::AtomicUsize,
    at: usize,
}

unsafe extern "C" fn cancelling(pool: *mut c_void, n: usize, task_fn: TaskFn, task: *mut c_void) {
    use std::sync::atomic::Ordering::SeqCst;
    // SAFETY: `pool` is the test's `CancelAt`, alive while the handle is.
    let c = unsafe { &*(pool as *const CancelAt) };
    if c.calls.fetch_add(1, SeqCst) + 1 == c.at {
        // SAFETY: a live handle; cancel is allowed from any thread, any time.
        unsafe { kestrel_cancel(c.h.load(SeqCst)) };
    }
    for i in 0..n {
        // SAFETY: the library's task, each index once.
        unsafe { task_fn(task, i) };
    }
}

/// A cancel that arrives inside a prompt chunk stops the feed within that
/// chunk's layer: the chunks completed stay, the one stopped does not
/// count, and the message says how many ran (it waited for the chunk's
/// end before, and counted it).
#[test]
fn a_cancelled_feed_stops_inside_its_chunk() {
    use std::sync::atomic::Ordering::SeqCst;
    let model = fixture("capi-cancel-chunk", WeightMode::Dual);
    let count = |at: usize, feed: &dyn Fn(&Open) -> Status| {
        let c = Box::new(CancelAt {
            h: std::sync::atomic::AtomicPtr::new(null_mut()),
            calls: std::sync::atomic::AtomicUsize::new(0),
            at,
        });
        let cfg = KestrelConfig {
            context: 64,
            batch: 8,
            threads: 2,
            parallel: Some(cancelling),
            parallel_ctx: &*c as *const CancelAt as *mut c_void,
            ..greedy_config()
        };
        let o = Open::new(&model, &cfg);
        c.h.store(o.h, SeqCst);
        let st = feed(&o);
        (st, c.calls.load(SeqCst), o.error(), o.history().len())
    };
    let prompt: Vec<u32> = (0..39).map(|i| 40 + i).collect();
    // One chunk of 8 tokens: the calls it takes.
    let (st, per_chunk, _, _) = count(0, &|o| o.feed(&prompt[..8]));
    assert_eq!(st, Status::Ok);
    assert!(per_chunk >= 4, "{per_chunk}");
    // Cancelled two calls into the third chunk.
    let at = 2 * per_chunk + 2;
    let (st, calls, err, cached) = count(at, &|o| o.feed(&prompt));
    assert_eq!(st, Status::Cancelled, "{err}");
    assert!(
        err.contains("cancelled after 16 of 39 prompt tokens"),
        "{err}"
    );
    assert_eq!(cached, 16);
    assert!(
        calls < 3 * per_chunk,
        "the third chunk did not run to its end: {calls}"
    );
}

/// Opens with `model[..len]` in `memory` (at `offset` from 64-byte
/// alignment); the status and the error buffer's text.
fn try_open(
    model: &[u8],
    cfg: &KestrelConfig,
    memory_len: Option<usize>,
    offset: usize,
) -> (Status, String) {
    let mut m = Aligned::of(model);
    let (mut size, mut err) = (0usize, [0 as c_char; 256]);
    let mut h = null_mut();
    // SAFETY: valid buffers for their lengths.
    unsafe {
        let st = kestrel_memory_size(m.ptr(), model.len(), cfg, &mut size, err.as_mut_ptr(), 256);
        if st != Status::Ok {
            return (
                st,
                CStr::from_ptr(err.as_ptr()).to_string_lossy().into_owned(),
            );
        }
        let len = memory_len.unwrap_or(size);
        let mut memory = Aligned::new(len + offset);
        let at = memory.ptr().cast::<u8>().add(offset).cast();
        let st = kestrel_open(
            m.ptr(),
            model.len(),
            cfg,
            at,
            len,
            &mut h,
            err.as_mut_ptr(),
            256,
        );
        let msg = CStr::from_ptr(err.as_ptr()).to_string_lossy().into_owned();
        if st == Status::Ok {
            assert_eq!(kestrel_close(h), Status::Ok);
        } else {
            assert!(h.is_null(), "a failed open leaves *out NULL");
            assert!(!msg.is_empty(), "a failed open says why");
        }
        (st, msg)
    }
}

#[test]
fn bad_input_through_the_abi_gives_a_status_and_a_message() {
    let model = fixture("capi-misuse", WeightMode::Dual);
    let cfg = greedy_config();
    let mut m = Aligned::of(&model);
    let (mut size, mut err) = (0usize, [0 as c_char; 256]);
    let mut h = null_mut();
    let mp = m.ptr();
    let n = model.len();
    // SAFETY: every call below gets NULL or valid pointers, as the tests
    // intend; nothing is read through a bad pointer.
    unsafe {
        // NULL everywhere the open path takes a pointer.
        assert_eq!(kestrel_config_init(null_mut()), Status::Argument);
        assert_eq!(
            kestrel_memory_size(null(), n, &cfg, &mut size, err.as_mut_ptr(), 256),
            Status::Model
        );
        assert_eq!(
            kestrel_memory_size(mp, n, null(), &mut size, err.as_mut_ptr(), 256),
            Status::Argument
        );
        assert_eq!(
            kestrel_memory_size(mp, n, &cfg, null_mut(), null_mut(), 0),
            Status::Argument
        );
        assert_eq!(
            kestrel_memory_size(mp, 0, &cfg, &mut size, err.as_mut_ptr(), 256),
            Status::Model
        );
        assert_eq!(
            kestrel_memory_size(mp, n, &cfg, &mut size, null_mut(), 0),
            Status::Ok
        );
        let mut memory = Aligned::new(size);
        let mem = memory.ptr();
        assert_eq!(
            kestrel_open(mp, n, &cfg, mem, size, null_mut(), null_mut(), 0),
            Status::Argument
        );
        assert_eq!(
            kestrel_open(mp, n, &cfg, null_mut(), size, &mut h, null_mut(), 0),
            Status::Memory
        );
        assert_eq!(
            kestrel_open(null(), n, &cfg, mem, size, &mut h, null_mut(), 0),
            Status::Model
        );
        assert_eq!(
            kestrel_open(mp, n, null(), mem, size, &mut h, null_mut(), 0),
            Status::Argument
        );
        assert!(h.is_null());
        // A message cut to a tiny buffer stays NUL-terminated.
        let mut tiny = [1 as c_char; 4];
        assert_eq!(
            kestrel_open(mp, n, &cfg, null_mut(), size, &mut h, tiny.as_mut_ptr(), 4),
            Status::Memory
        );
        assert_eq!(tiny[3], 0);
    }

    // Memory too small, misaligned; the model truncated, damaged, misaligned.
    assert_eq!(try_open(&model, &cfg, Some(size - 1), 0).0, Status::Memory);
    assert_eq!(try_open(&model, &cfg, None, 8).0, Status::Memory);
    assert_eq!(try_open(&model, &cfg, None, 0).0, Status::Ok);
    for cut in [0, 7, 64, 4096, model.len() / 2, model.len() - 1] {
        let (st, msg) = try_open(&model[..cut], &cfg, None, 0);
        assert_eq!(st, Status::Model, "truncated at {cut}: {msg}");
    }
    let mut damaged = model.clone();
    damaged[0] ^= 0xff;
    assert_eq!(try_open(&damaged, &cfg, None, 0).0, Status::Model);
    // SAFETY: `mp + 1` is readable for `n - 1` bytes.
    let st = unsafe {
        kestrel_memory_size(
            mp.cast::<u8>().add(1).cast(),
            n - 1,
            &cfg,
            &mut size,
            err.as_mut_ptr(),
            256,
        )
    };
    assert_eq!(st, Status::Model);
    let mut misaligned = Aligned::new(n + 1);
    misaligned.bytes_mut()[1..].copy_from_slice(&model);
    let mut aligned_size = 0;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            kestrel_memory_size(mp, n, &cfg, &mut aligned_size, null_mut(), 0),
            Status::Ok
        );
        let mut memory = Aligned::new(aligned_size);
        let p = misaligned.ptr().cast::<u8>().add(1).cast();
        let st = kestrel_open(
            p,
            n,
            &cfg,
            memory.ptr(),
            aligned_size,
            &mut h,
            err.as_mut_ptr(),
            256,
        );
        assert_eq!(st, Status::Model);
        assert!(CStr::from_ptr(err.as_ptr())
            .to_string_lossy()
            .contains("64-byte aligned"));
    }

    // Settings out of range.
    for bad in [
        KestrelConfig {
            struct_size: 8,
            ..cfg
        },
        KestrelConfig {
            cpu_features: 1 << 9,
            ..cfg
        },
        KestrelConfig { kv_f32: 2, ..cfg },
        KestrelConfig { threads: 2, ..cfg },
        KestrelConfig { threads: 0, ..cfg },
        KestrelConfig { draft: 99, ..cfg },
        KestrelConfig { context: 0, ..cfg },
        KestrelConfig { batch: 0, ..cfg },
    ] {
        let (st, msg) = try_open(&model, &bad, None, 0);
        assert!(
            matches!(st, Status::Argument | Status::Model),
            "{bad:?}: {st:?} {msg}"
        );
        assert!(!msg.is_empty());
    }
    // Sampling settings out of range: E_ARGUMENT naming the setting (they
    // opened, and NaN changed the first token, before the core's check).
    for (bad, name) in [
        (
            KestrelConfig {
                temperature: f32::NAN,
                ..cfg
            },
            "temperature",
        ),
        (
            KestrelConfig {
                temperature: -1.0,
                ..cfg
            },
            "temperature",
        ),
        (KestrelConfig { top_p: 7.0, ..cfg }, "top_p"),
        (KestrelConfig { min_p: -3.0, ..cfg }, "min_p"),
        (
            KestrelConfig {
                repeat_penalty: 0.0,
                ..cfg
            },
            "repeat_penalty",
        ),
    ] {
        let (st, msg) = try_open(&model, &bad, None, 0);
        assert_eq!(st, Status::Argument, "{bad:?}: {msg}");
        assert!(msg.contains(name), "{msg}");
    }

    // Handle calls: NULL and closed handles.
    let mut buf = [0u8; 64];
    let (mut len, mut id, mut ids) = (0usize, 0u32, [0u32; 64]);
    let out = buf.as_mut_ptr().cast::<c_char>();
    let calls = |h: *mut Handle| -> Vec<Status> {
        let (mut len, mut id, mut ids, mut p) = (0usize, 0u32, [0u32; 8], null());
        let mut buf = [0u8; 8];
        let out = buf.as_mut_ptr().cast::<c_char>();
        // SAFETY: all-zero is a valid KestrelSampling (integers and floats).
        let mut sampling: KestrelSampling = unsafe { std::mem::zeroed() };
        sampling.struct_size = std::mem::size_of::<KestrelSampling>() as u32;
        // SAFETY: NULL or a closed handle (its block still the test's).
        unsafe {
            vec![
                kestrel_tokenize(h, c"a".as_ptr(), 1, 0, ids.as_mut_ptr(), 8, &mut len),
                kestrel_chat_turn(
                    h,
                    null(),
                    0,
                    c"a".as_ptr(),
                    1,
                    ids.as_mut_ptr(),
                    8,
                    &mut len,
                ),
                kestrel_detokenize(h, ids.as_ptr(), 1, out, 8, &mut len),
                kestrel_feed(h, ids.as_ptr(), 1),
                kestrel_next(h, &mut id),
                kestrel_piece(h, 1, out, 8, &mut len),
                kestrel_piece_end(h, out, 8, &mut len),
                kestrel_generate(h, 1, None, null_mut(), null_mut()),
                kestrel_history(h, &mut p, &mut len),
                kestrel_cancel(h),
                kestrel_cancel_clear(h),
                kestrel_reset(h),
                kestrel_state_size(h, &mut len),
                kestrel_state_save(h, buf.as_mut_ptr().cast(), 8, &mut len),
                kestrel_state_load(h, buf.as_ptr().cast(), 8),
                kestrel_rollback(h, 0),
                kestrel_sampling_get(h, &mut sampling),
                kestrel_sampling_set(h, &sampling),
                kestrel_close(h),
            ]
        }
    };
    assert!(calls(null_mut()).iter().all(|&s| s == Status::Argument));
    // SAFETY: NULL handles.
    unsafe {
        assert!(!CStr::from_ptr(kestrel_error(null())).to_bytes().is_empty());
        assert_eq!(kestrel_vocab(null()), 0);
        assert_eq!(kestrel_is_running(null()), 0);
        // Every status has its line; any other value one too.
        let lines: Vec<&[u8]> = (-11..=2)
            .map(|st| CStr::from_ptr(kestrel_status_string(st)).to_bytes())
            .collect();
        for (st, line) in (-11..=2).zip(&lines) {
            let known = (-10..=1).contains(&st);
            assert_eq!(*line == b"unknown status", !known, "{st}");
            assert!(!line.is_empty());
        }
        let mut distinct = lines.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 13, "12 statuses and the unknown");
        assert!(CStr::from_ptr(kestrel_status_string(Status::Order as i32))
            .to_str()
            .unwrap()
            .contains("another call is running"));
        assert_eq!(CStr::from_ptr(kestrel_kernels(null())).to_bytes(), b"");
    }
    let closed = Open::new(&model, &cfg);
    // SAFETY: a live handle, closed once.
    assert_eq!(unsafe { kestrel_close(closed.h) }, Status::Ok);
    assert!(calls(closed.h).iter().all(|&s| s == Status::Argument));

    // Calls out of order, ids out of range, buffers too small, bad text.
    let e = Open::new(&model, &KestrelConfig { context: 32, ..cfg });
    // SAFETY: a live handle and valid buffers (NULL where tested).
    unsafe {
        let vocab = kestrel_vocab(e.h);
        assert!(vocab > 0);
        assert_eq!(kestrel_next(e.h, &mut id), Status::Order);
        assert!(e.error().contains("out of order"), "{}", e.error());
        assert_eq!(
            kestrel_generate(e.h, 4, None, null_mut(), null_mut()),
            Status::Order
        );
        assert_eq!(kestrel_next(e.h, null_mut()), Status::Argument);
        assert_eq!(e.feed(&[vocab]), Status::Token);
        assert!(
            e.error().contains("outside the vocabulary"),
            "{}",
            e.error()
        );
        assert_eq!(kestrel_piece(e.h, vocab, out, 64, &mut len), Status::Token);
        assert_eq!(
            kestrel_detokenize(e.h, [vocab].as_ptr(), 1, out, 64, &mut len),
            Status::Token
        );
        assert_eq!(kestrel_feed(e.h, null(), 3), Status::Argument);
        assert_eq!(kestrel_feed(e.h, null(), 0), Status::Ok);
        // Buffers too small report the size needed, and change nothing.
        let text = "hello world, hello again";
        let st = kestrel_tokenize(
            e.h,
            text.as_ptr().cast(),
            text.len(),
            0,
            ids.as_mut_ptr(),
            1,
            &mut len,
        );
        assert_eq!(st, Status::Buffer);
        let need = len;
        assert!(need > 1);
        let st = kestrel_tokenize(
            e.h,
            text.as_ptr().cast(),
            text.len(),
            0,
            ids.as_mut_ptr(),
            64,
            &mut len,
        );
        assert_eq!((st, len), (Status::Ok, need));
        assert_eq!(
            kestrel_detokenize(e.h, ids.as_ptr(), need, out, 2, &mut len),
            Status::Buffer
        );
        assert_eq!(len, text.len());
        assert_eq!(
            kestrel_tokenize(
                e.h,
                text.as_ptr().cast(),
                text.len(),
                2,
                ids.as_mut_ptr(),
                64,
                &mut len
            ),
            Status::Argument
        );
        assert_eq!(
            kestrel_tokenize(e.h, null(), 5, 0, ids.as_mut_ptr(), 64, &mut len),
            Status::Argument
        );
        assert_eq!(
            kestrel_tokenize(
                e.h,
                text.as_ptr().cast(),
                text.len(),
                0,
                null_mut(),
                64,
                &mut len
            ),
            Status::Argument
        );
        let bad = [0xffu8, 0xfe];
        assert_eq!(
            kestrel_tokenize(
                e.h,
                bad.as_ptr().cast(),
                2,
                0,
                ids.as_mut_ptr(),
                64,
                &mut len
            ),
            Status::Argument
        );
        assert!(e.error().contains("UTF-8"));
        let long = "x".repeat(4097);
        len = 7;
        assert_eq!(
            kestrel_tokenize(
                e.h,
                long.as_ptr().cast(),
                long.len(),
                0,
                ids.as_mut_ptr(),
                64,
                &mut len
            ),
            Status::Argument
        );
        assert_eq!(len, 7, "a text over text_bytes reports no size");
        assert_eq!(
            kestrel_chat_turn(
                e.h,
                null(),
                3,
                c"a".as_ptr(),
                1,
                ids.as_mut_ptr(),
                64,
                &mut len
            ),
            Status::Argument
        );
        // The context (32) full.
        let prompt = e.chat_turn(PROMPT);
        let many: Vec<u32> = prompt.iter().cycle().take(40).copied().collect();
        assert_eq!(e.feed(&many), Status::Context);
        assert!(e.error().contains("context full"));
        // A cancel stops the next call, once.
        assert_eq!(kestrel_cancel(e.h), Status::Ok);
        assert_eq!(e.feed(&prompt), Status::Cancelled);
        assert_eq!(e.feed(&prompt), Status::Ok, "{}", e.error());
        assert_eq!(e.error(), "");
        // A piece that does not fit changes nothing and says its size.
        let st = kestrel_tokenize(e.h, c"a".as_ptr(), 1, 0, ids.as_mut_ptr(), 64, &mut len);
        assert_eq!((st, len), (Status::Ok, 1), "{:?}", &ids[..len]);
        assert_eq!(kestrel_piece(e.h, ids[0], out, 0, &mut len), Status::Buffer);
        assert_eq!(len, 1);
        let st = kestrel_piece(e.h, ids[0], out, 64, &mut len);
        assert_eq!((st, &buf[..len]), (Status::Ok, &b"a"[..]));
        assert_eq!(kestrel_next(e.h, &mut id), Status::Ok);
        // Pull until the context is full: an error, then the order error.
        let mut last = Status::Ok;
        for _ in 0..64 {
            last = kestrel_next(e.h, &mut id);
            if last != Status::Ok {
                break;
            }
        }
        assert!(matches!(last, Status::Context | Status::End), "{last:?}");
        assert_eq!(kestrel_close(e.h), Status::Ok);
    }
}

/// Calls back into the handle from its own text callback: refused
/// (`KESTREL_E_ORDER`), but for `kestrel_cancel`, which stops the answer.
unsafe extern "C" fn call_back_in(user: *mut c_void, _: *const c_char, _: usize) {
    // SAFETY: `user` is the test's `Reentry`.
    let r = unsafe { &mut *user.cast::<Reentry>() };
    let (mut p, mut n) = (null(), 0usize);
    // SAFETY: the handle of the running call; valid out-parameters.
    unsafe {
        r.running.push(kestrel_is_running(r.h));
        r.nested.push(kestrel_history(r.h, &mut p, &mut n));
        r.nested.push(kestrel_reset(r.h));
        r.nested.push(kestrel_close(r.h));
        r.calls += 1;
        if r.calls == 3 {
            r.nested.push(kestrel_cancel(r.h));
        }
    }
}

struct Reentry {
    h: *mut Handle,
    calls: usize,
    nested: Vec<Status>,
    /// `kestrel_is_running` from inside the call.
    running: Vec<std::ffi::c_int>,
}

/// `kestrel_generate` and `kestrel_feed` at their edges: a cancel pending
/// before the call, zero tokens, a cancel from the callback, a full
/// context, a cancelled prompt; out-parameters misaligned.
#[test]
fn generate_and_feed_at_their_edges() {
    let model = fixture("capi-edges", WeightMode::Dual);
    let cfg = greedy_config();
    let e = Open::new(&model, &KestrelConfig { context: 40, ..cfg });
    let prompt = e.chat_turn(PROMPT);
    assert_eq!(e.feed(&prompt), Status::Ok);
    let mut generated = 99u32;
    // SAFETY: a live handle; valid (or deliberately misaligned) pointers.
    unsafe {
        // A pending cancel: nothing runs, and the prompt's logits still wait.
        assert_eq!(kestrel_cancel(e.h), Status::Ok);
        let st = kestrel_generate(e.h, 4, None, null_mut(), &mut generated);
        assert_eq!(st, Status::Cancelled);
        assert_eq!(e.history().len(), prompt.len());
        // A cancel taken back stops nothing: the next call runs.
        assert_eq!(kestrel_cancel(e.h), Status::Ok);
        assert_eq!(kestrel_cancel_clear(e.h), Status::Ok);
        let st = kestrel_generate(e.h, 0, None, null_mut(), &mut generated);
        assert_eq!((st, generated), (Status::Ok, 0));
        assert_eq!(kestrel_cancel(e.h), Status::Ok);
        let st = kestrel_generate(e.h, 0, None, null_mut(), &mut generated);
        assert_eq!(
            st,
            Status::Cancelled,
            "a pending cancel stops even a call of zero tokens"
        );
        // Zero tokens: nothing runs either.
        let st = kestrel_generate(e.h, 0, None, null_mut(), &mut generated);
        assert_eq!((st, generated), (Status::Ok, 0));
        // A misaligned out-parameter is refused before anything runs.
        let mut words = [0u32; 2];
        let odd = words.as_mut_ptr().cast::<u8>().add(1).cast::<u32>();
        assert_eq!(
            kestrel_generate(e.h, 4, None, null_mut(), odd),
            Status::Argument
        );
        assert_eq!(kestrel_next(e.h, odd), Status::Argument);
        assert_eq!(e.history().len(), prompt.len());
        // The callback calls back in: refused; its cancel stops the answer
        // after the third piece of text.
        let mut r = Reentry {
            h: e.h,
            calls: 0,
            nested: Vec::new(),
            running: Vec::new(),
        };
        let user = (&mut r as *mut Reentry).cast();
        let st = kestrel_generate(e.h, 30, Some(call_back_in), user, &mut generated);
        assert_eq!(st, Status::Cancelled, "{}", e.error());
        assert!(
            r.calls >= 3 && (3..30).contains(&generated),
            "{} {generated}",
            r.calls
        );
        // Running inside the call, not after it.
        assert!(
            r.running.len() >= 3 && r.running.iter().all(|&x| x == 1),
            "{:?}",
            r.running
        );
        assert_eq!(kestrel_is_running(e.h), 0);
        let refused = r.nested.iter().filter(|&&s| s == Status::Order).count();
        assert_eq!(refused, 3 * r.calls, "{:?}", r.nested);
        assert!(r.nested.contains(&Status::Ok), "the cancel went through");
        // Cancelled mid-answer: the tokens produced are cached (the last
        // one run), so the answer can go on.
        assert_eq!(e.history().len(), prompt.len() + generated as usize);
        assert_eq!(kestrel_next(e.h, &mut words[0]), Status::Ok);
        // A cancelled prompt: nothing waits either.
        assert_eq!(kestrel_reset(e.h), Status::Ok);
        let long: Vec<u32> = prompt.iter().cycle().take(39).copied().collect();
        let c = Open::new(
            &model,
            &KestrelConfig {
                context: 40,
                batch: 8,
                ..cfg
            },
        );
        assert_eq!(kestrel_cancel(c.h), Status::Ok);
        assert_eq!(c.feed(&long), Status::Cancelled);
        // It says what ran (nothing: the cancel came first).
        assert!(
            c.error().contains("cancelled after 0 of 39 prompt tokens"),
            "{}",
            c.error()
        );
        assert_eq!(kestrel_next(c.h, &mut words[0]), Status::Order);
        assert!(c.error().contains("the last feed stopped"), "{}", c.error());
        // The context fills during an answer: KESTREL_E_CONTEXT, with the
        // tokens produced counted.
        assert_eq!(c.feed(&long[..36]), Status::Ok);
        let st = kestrel_generate(c.h, 30, None, null_mut(), &mut generated);
        assert_eq!(st, Status::Context, "{}", c.error());
        assert_eq!(
            generated, 5,
            "4 positions of room, and the token sampled at the last"
        );
        assert_eq!(c.history().len(), 40);
        assert_eq!(
            kestrel_generate(c.h, 30, None, null_mut(), &mut generated),
            Status::Order
        );
    }
}

/// A character split across tokens streams whole with its last token; an
/// unfinished one ends as U+FFFD.
#[test]
fn streamed_text_holds_a_split_character() {
    let model = fixture("capi-utf8", WeightMode::Dual);
    let e = Open::new(&model, &greedy_config());
    let text = "é€";
    let ids = e.tokenize(text);
    assert!(
        ids.len() >= 3,
        "the fixture's byte-level vocabulary splits them: {ids:?}"
    );
    let (mut buf, mut len) = ([0u8; 16], 0usize);
    let out = buf.as_mut_ptr().cast::<c_char>();
    let (mut streamed, mut sizes) = (Vec::new(), Vec::new());
    // SAFETY: a live handle; valid buffers for their lengths.
    unsafe {
        for &id in &ids {
            assert_eq!(kestrel_piece(e.h, id, out, 16, &mut len), Status::Ok);
            sizes.push(len);
            streamed.extend_from_slice(&buf[..len]);
        }
        assert_eq!(streamed, text.as_bytes(), "pieces {sizes:?}");
        assert!(
            sizes.contains(&0),
            "some token completes no character: {sizes:?}"
        );
        // The first token of "€" alone, then the end: U+FFFD.
        let euro = e.tokenize("€");
        assert!(euro.len() > 1, "{euro:?}");
        assert_eq!(kestrel_piece(e.h, euro[0], out, 16, &mut len), Status::Ok);
        assert_eq!(len, 0);
        assert_eq!(kestrel_piece_end(e.h, out, 2, &mut len), Status::Buffer);
        assert_eq!(kestrel_piece_end(e.h, out, 16, &mut len), Status::Ok);
        assert_eq!(&buf[..len], "\u{fffd}".as_bytes());
        // The whole text back through detokenize.
        let st = kestrel_detokenize(e.h, ids.as_ptr(), ids.len(), out, 16, &mut len);
        assert_eq!((st, &buf[..len]), (Status::Ok, text.as_bytes()));
    }
}

/// The seed the capi_open fuzz target starts from opens and generates (so
/// the target reaches past the parser).
#[test]
fn the_fuzz_seed_opens_and_generates() {
    let seed = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("vectors/fuzz/capi_open/seed-dev-qwen2-dense-q4.vqf"),
    )
    .unwrap();
    let e = Open::new(&seed, &greedy_config());
    assert_eq!(e.feed(&e.chat_turn("hi")), Status::Ok, "{}", e.error());
    assert_eq!(e.pull(3).0.len(), 3);
}
