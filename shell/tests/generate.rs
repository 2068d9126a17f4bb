//! `kestrel run`, `chat`, `tokenize`, `detokenize` on the tiny Qwen3 fixture.

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;

mod common;
use common::kestrel;

fn fixture(rel: &str) -> PathBuf {
    common::fixture(rel)
}

/// The tied Qwen3 fixture converted once per test binary (f32 weights, so
/// greedy decoding reproduces the reference exactly).
fn model() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| common::convert_f32("dev_qwen3_dense_tied/hf", "gen"))
        .clone()
}

fn reference() -> (String, Vec<u32>, String) {
    let b = std::fs::read(fixture("dev_qwen3_dense_tied/ref/ref.json")).unwrap();
    let root = kestrel_core::json::parse(&b).unwrap();
    let s = |k: &str| {
        root.get(k)
            .unwrap()
            .as_str()
            .unwrap()
            .chars()
            .collect::<String>()
    };
    let ids = root
        .get("greedy_ids")
        .unwrap()
        .iter_array()
        .unwrap()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    (s("prompt_text"), ids, s("greedy_text"))
}

fn stdout_of(args: &[&str]) -> String {
    let out = kestrel().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn greedy_run_reproduces_the_reference_text() {
    let (prompt, ids, text) = reference();
    let m = model();
    let n = ids.len().to_string();
    let out = stdout_of(&[
        "run",
        m.to_str().unwrap(),
        "--raw",
        "-p",
        &prompt,
        "-n",
        &n,
        "--temp",
        "0",
        "--kv-f32",
    ]);
    assert_eq!(out.strip_suffix('\n').unwrap(), text);
    // tokenize of the prompt gives the reference prompt ids.
    let b = std::fs::read(fixture("dev_qwen3_dense_tied/ref/ref.json")).unwrap();
    let root = kestrel_core::json::parse(&b).unwrap();
    let want: Vec<String> = root
        .get("prompt_ids")
        .unwrap()
        .iter_array()
        .unwrap()
        .map(|v| v.as_u64().unwrap().to_string())
        .collect();
    let got = stdout_of(&["tokenize", m.to_str().unwrap(), &prompt]);
    assert_eq!(got.trim(), format!("[{}]", want.join(", ")));
    // detokenize of the greedy ids gives the reference text.
    let list: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let back = stdout_of(&["detokenize", m.to_str().unwrap(), &list.join(",")]);
    assert_eq!(back.strip_suffix('\n').unwrap(), text);
}

#[test]
fn run_ids_prints_the_reference_greedy_ids_after_the_text() {
    let (prompt, ids, text) = reference();
    let m = model();
    let n = ids.len().to_string();
    let out = stdout_of(&[
        "run",
        m.to_str().unwrap(),
        "--raw",
        "-p",
        &prompt,
        "-n",
        &n,
        "--temp",
        "0",
        "--kv-f32",
        "--ids",
    ]);
    assert_eq!(out, format!("{text}\n{ids:?}\n"));
}

#[test]
fn the_same_seed_gives_the_same_text() {
    let m = model();
    let run = |seed: &str| {
        stdout_of(&[
            "run",
            m.to_str().unwrap(),
            "-p",
            "Why is the sky blue?",
            "-n",
            "24",
            "--temp",
            "0.9",
            "--seed",
            seed,
        ])
    };
    assert_eq!(run("7"), run("7"));
    assert_ne!(run("7"), run("8"));
}

#[test]
fn chat_keeps_the_conversation_and_resets() {
    let m = model();
    let mut child = kestrel()
        .args(["chat", m.to_str().unwrap(), "-n", "8", "--temp", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Why is the sky blue?\nAnd the sea?\n/reset\nWhy is the sky blue?\n/exit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("(conversation reset)"), "{err}");
    // Three answers were generated; the second turn's prompt sits after the
    // first turn in the cache (its prefill is only the new turn's tokens).
    let p = common::prefills(&err);
    assert_eq!(p.len(), 3, "{err}");
    assert!(p[1] < p[0], "{err}");
    assert_eq!(p[2], p[0], "after /reset the first turn is fed again");
}

/// `kestrel chat` with `input` on stdin: (stdout, stderr).
fn chat_with(model: &std::path::Path, input: &str) -> (String, String) {
    chat_args(model, &[], input)
}

/// [`chat_with`] with `extra` arguments.
fn chat_args(model: &std::path::Path, extra: &[&str], input: &str) -> (String, String) {
    let mut child = kestrel()
        .arg("chat")
        .arg(model)
        .args(["-n", "8", "--temp", "0"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8(out.stdout).unwrap(), err)
}

/// `/save FILE` after a turn (cut by `-n`, so closed first), then in a new
/// process `/load FILE` and the next turn: the same answer as the first
/// process's second turn, and only the new turn prefilled; the messages
/// on stderr, stdout only the answers. A state of another model file, a
/// damaged one and a missing file are refused, the conversation kept.
#[test]
fn chat_saves_and_loads_the_conversation() {
    let m = model();
    let dir = common::temp("chat-state");
    let state = dir.join("turn1.kstate");
    let st = state.to_str().unwrap();
    let (whole, err) = chat_with(
        &m,
        &format!("Why is the sky blue?\n/save {st}\nAnd the sea?\n/exit\n"),
    );
    assert!(err.contains(&format!("tokens to {st})")), "{err}");
    let (loaded, err2) = chat_with(&m, &format!("/load {st}\nAnd the sea?\n/exit\n"));
    assert!(err2.contains(&format!("tokens from {st})")), "{err2}");
    let (first, _) = chat_with(&m, "Why is the sky blue?\n/exit\n");
    assert!(
        !first.is_empty() && whole.starts_with(&first),
        "{whole:?} / {first:?}"
    );
    assert_eq!(
        &whole[first.len()..],
        loaded,
        "the turn after /load is the whole chat's"
    );
    assert_eq!(
        common::prefills(&err2)[0],
        common::prefills(&err)[1],
        "only the new turn is prefilled"
    );

    // Refusals keep the conversation: the answer is the fresh first turn's.
    let other = common::convert_f32("dev_qwen3_dense_untied/hf", "other");
    let (_, err3) = chat_with(&other, &format!("/load {st}\n/exit\n"));
    assert!(err3.contains("another model file"), "{err3}");
    let bad = dir.join("bad.kstate");
    let mut bytes = std::fs::read(&state).unwrap();
    bytes.truncate(bytes.len() - 1);
    std::fs::write(&bad, &bytes).unwrap();
    let missing = dir.join("missing.kstate");
    let (out, err4) = chat_with(
        &m,
        &format!(
            "/load {}\n/load {}\nWhy is the sky blue?\n/exit\n",
            bad.display(),
            missing.display()
        ),
    );
    assert_eq!(out, first, "{err4}");
    assert!(
        err4.contains("bad.kstate") && err4.contains("missing.kstate"),
        "{err4}"
    );
    assert_eq!(err4.matches("tokens from").count(), 0, "{err4}");
}

/// `run --json-schema`: the answer is JSON valid under the schema (the
/// fixture is a random model: the constraint alone makes it so); a missing
/// file and an unsupported keyword are one-line errors naming them.
#[test]
fn run_with_a_json_schema_answers_valid_json() {
    let m = model();
    let dir = common::temp("json");
    let schema = dir.join("s.json");
    std::fs::write(
        &schema,
        // No other key: the fixture (a random model) would write keys
        // without end.
        r#"{"type":"object","properties":{"ok":{"type":"boolean"},"kind":{"enum":["cat","dog"]}},"required":["ok","kind"],"additionalProperties":false}"#,
    )
    .unwrap();
    let out = kestrel()
        .args([
            "run",
            m.to_str().unwrap(),
            "-p",
            "A pet as JSON",
            "-n",
            "300",
            "--temp",
            "0.8",
        ])
        .arg("--json-schema")
        .arg(&schema)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let v =
        kestrel_core::json::parse(text.trim().as_bytes()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(v.get("ok").and_then(|b| b.as_bool()).is_some(), "{text}");
    assert!(
        v.get("kind")
            .is_some_and(|k| k.str_eq("cat") || k.str_eq("dog")),
        "{text}"
    );
    // Speculative decoding under the constraint: drafts the schema
    // refuses are rejected, the answer is the same text.
    for extra in [vec!["--lookup"], vec!["--draft", m.to_str().unwrap()]] {
        let out = kestrel()
            .args([
                "run",
                m.to_str().unwrap(),
                "-p",
                "A pet as JSON",
                "-n",
                "300",
                "--temp",
                "0.8",
            ])
            .args(&extra)
            .arg("--json-schema")
            .arg(&schema)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{extra:?}: {err}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), text, "{extra:?}");
        assert!(err.contains("speculative: drafted"), "{extra:?}: {err}");
    }
    std::fs::write(&schema, r#"{"type":"string","format":"ipv6"}"#).unwrap();
    for (path, says) in [
        (schema.clone(), "'format'"),
        (dir.join("none.json"), "none.json"),
    ] {
        let out = kestrel()
            .args([
                "run",
                m.to_str().unwrap(),
                "-p",
                "x",
                "-n",
                "1",
                "--json-schema",
            ])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says) && !err.contains("panicked"), "{err}");
    }
}

/// `kestrel bench MODEL --lookup` and `--draft FILE`: one greedy answer
/// decoded plain and with speculation, both timed, the drafting counts
/// reported (the reference prompt twice, so lookup finds n-grams; a draft
/// model equal to the target drafts what the target then samples).
#[test]
fn bench_times_speculation_against_plain_decoding() {
    let (prompt, _, _) = reference();
    let m = model();
    let dir = common::temp("bench-spec");
    let prompt_file = dir.join("prompt.txt");
    std::fs::write(&prompt_file, format!("{prompt}{prompt}")).unwrap();
    for extra in [vec!["--lookup"], vec!["--draft", m.to_str().unwrap()]] {
        let mut args = vec![
            "bench",
            m.to_str().unwrap(),
            "-n",
            "24",
            "-r",
            "1",
            "-t",
            "1",
            "--json",
            "--prompt-file",
            prompt_file.to_str().unwrap(),
        ];
        args.extend(&extra);
        let text = stdout_of(&args);
        let v = kestrel_core::json::parse(text.trim().as_bytes())
            .unwrap_or_else(|e| panic!("{extra:?}: {e}: {text}"));
        let spec = v.get("speculation").unwrap_or_else(|| panic!("{text}"));
        let num = |k: &str| spec.get(k).and_then(|x| x.as_f64()).unwrap_or(-1.0);
        assert!(num("plain_ts") > 0.0 && num("spec_ts") > 0.0, "{text}");
        assert!(num("drafted") > 0.0 && num("steps") > 0.0, "{text}");
        assert!(num("accepted") <= num("drafted"), "{text}");
        if extra[0] == "--draft" {
            // The draft is the target: every drafted token is accepted.
            assert_eq!(num("accepted"), num("drafted"), "{text}");
        }
    }
}

/// `kestrel chat --keep N`: a conversation longer than `--ctx` goes on,
/// the oldest turns after the first N tokens dropped (said on stderr);
/// without it the chat says the context is full.
#[test]
fn chat_keep_drops_the_oldest_turns_when_the_context_is_full() {
    let m = model();
    let turns: String = (0..12)
        .map(|i| format!("Tell me about the number {i}.\n"))
        .collect();
    let run = |extra: &[&str]| {
        let args: Vec<&str> = ["--ctx", "160"].iter().chain(extra).copied().collect();
        chat_args(&m, &args, &turns).1
    };
    let answers = |err: &str| common::prefills(err).len();
    let refused = run(&[]);
    assert!(
        refused.contains("(context full: /reset to start over"),
        "{refused}"
    );
    assert!(answers(&refused) < 12, "{refused}");
    let kept = run(&["--keep", "4"]);
    assert!(kept.contains("tokens after the first 4 dropped)"), "{kept}");
    assert!(!kept.contains("/reset to start over"), "{kept}");
    assert_eq!(answers(&kept), 12, "{kept}");
}
