//! `kestrel run --image` and `kestrel logits --image` on the Qwen3-VL dev
//! fixture: the greedy continuation of the one-image and two-image cases
//! equals the Hugging Face reference, bad images and mismatched
//! placeholders fail cleanly.

use std::path::PathBuf;

mod common;
use common::kestrel;

fn fixture(rel: &str) -> PathBuf {
    common::fixture(&format!("dev_qwen3_vl/{rel}"))
}

/// The VL fixture converted once (f32 weights and, for the tests, an f32
/// KV cache: greedy decoding reproduces the reference exactly).
fn model() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| common::convert_f32("dev_qwen3_vl/hf", "vl"))
        .clone()
}

/// The greedy ids of a reference case.
fn greedy(case: &str) -> String {
    let b = std::fs::read(fixture("ref/ref.json")).unwrap();
    let root = kestrel_core::json::parse(&b).unwrap();
    let ids: Vec<String> = root
        .get("cases")
        .and_then(|c| c.get(case))
        .and_then(|c| c.get("greedy_ids"))
        .unwrap()
        .iter_array()
        .unwrap()
        .map(|v| v.as_u64().unwrap().to_string())
        .collect();
    format!("[{}]", ids.join(", "))
}

fn run(images: &[&str], prompt: &str) -> std::process::Output {
    let mut c = kestrel();
    c.arg("run").arg(model());
    for i in images {
        c.arg("--image").arg(fixture(i));
    }
    c.args([
        "-p", prompt, "-n", "8", "--temp", "0", "--ids", "--kv-f32", "-t", "1",
    ])
    .output()
    .unwrap()
}

#[test]
fn run_with_one_image_gives_the_reference_greedy_ids() {
    let out = run(&["ref/image_a.png"], "Describe the colours you see.");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.trim_end().ends_with(&greedy("image")), "{stdout}");
    assert!(stderr.contains("vision encode"), "{stderr}");
}

/// Speculative decoding after an image: the verify rows keep the
/// sequence's M-RoPE positions (the slot's `rope_delta`), so prompt lookup
/// and a draft model (the file itself, which reads the image placeholders
/// as text) give plain decoding's tokens.
#[test]
fn speculation_after_an_image_gives_plain_decodings_tokens() {
    let run_with = |extra: &[&str]| {
        let mut c = kestrel();
        c.arg("run").arg(model());
        c.arg("--image").arg(fixture("ref/image_a.png"));
        c.args([
            "-p",
            "Describe the colours you see, colour by colour.",
            "-n",
            "32",
            "--temp",
            "0",
            "--ids",
            "--kv-f32",
            "-t",
            "1",
        ])
        .args(extra);
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{extra:?}: {err}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), err)
    };
    let (plain, _) = run_with(&[]);
    let m = model();
    for extra in [&["--lookup"][..], &["--draft", m.to_str().unwrap()][..]] {
        let (spec, err) = run_with(extra);
        assert_eq!(spec, plain, "{extra:?}");
        assert!(err.contains("speculative: drafted"), "{extra:?}: {err}");
    }
}

#[test]
fn run_with_two_images_in_raw_mode_gives_the_reference_greedy_ids() {
    // The two-image prompt places its images mid-text: --raw with the
    // placeholders written out (each expanded to its image's tokens).
    let prompt = "<|im_start|>user\nHere is one <|vision_start|><|image_pad|><|vision_end|> and another <|vision_start|><|image_pad|><|vision_end|>; which is brighter?<|im_end|>\n<|im_start|>assistant\n";
    let mut c = kestrel();
    c.arg("run").arg(model());
    for i in ["ref/image_a.png", "ref/image_b.png"] {
        c.arg("--image").arg(fixture(i));
    }
    let out = c
        .args([
            "--raw", "-p", prompt, "-n", "8", "--temp", "0", "--ids", "--kv-f32", "-t", "1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.trim_end().ends_with(&greedy("two_images")),
        "{stdout}"
    );
}

#[test]
fn bad_images_and_placeholders_are_clear_errors() {
    let dir = common::temp("vl-bad");
    let png = std::fs::read(fixture("ref/image_a.png")).unwrap();
    let cases: [(&str, Vec<u8>); 3] = [
        ("truncated.png", png[..png.len() / 2].to_vec()),
        ("text.jpg", b"not an image at all".to_vec()),
        ("empty.png", Vec::new()),
    ];
    for (name, bytes) in cases {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = kestrel()
            .arg("run")
            .arg(model())
            .arg("--image")
            .arg(&p)
            .args(["-p", "x", "-n", "1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains(name) && !err.contains("panicked"),
            "{name}: {err}"
        );
    }
    // One image, two placeholders (raw prompt).
    let out = kestrel()
        .arg("run")
        .arg(model())
        .arg("--image")
        .arg(fixture("ref/image_a.png"))
        .args(["--raw", "-p", "<|image_pad|> and <|image_pad|>", "-n", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("placeholders"), "{err}");
}

/// `kestrel chat` with a piped conversation: stdout, stderr, success.
fn chat(model: &std::path::Path, args: &[&str], input: &str) -> (String, String, bool) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = kestrel()
        .arg("chat")
        .arg(model)
        .args(args)
        .args(["-n", "8", "--temp", "0", "--kv-f32", "-t", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// `kestrel chat --image` and `/image PATH` put the image in the next
/// message as `kestrel run --image` does (the same answer); a later turn
/// takes an image after the conversation so far; a bad image is reported
/// and the chat goes on; a model without a vision tower refuses `--image`.
#[test]
fn chat_takes_images_as_run_does() {
    let prompt = "Describe the colours you see.";
    let out = kestrel()
        .arg("run")
        .arg(model())
        .arg("--image")
        .arg(fixture("ref/image_a.png"))
        .args([
            "-p", prompt, "-n", "8", "--temp", "0", "--kv-f32", "-t", "1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let want = String::from_utf8_lossy(&out.stdout);
    let want = want.strip_suffix('\n').unwrap();
    let image_a = fixture("ref/image_a.png");
    let image_a = image_a.to_str().unwrap();
    let (got, err, ok) = chat(
        &model(),
        &["--image", image_a],
        &format!("{prompt}\n/exit\n"),
    );
    assert!(ok, "{err}");
    assert_eq!(got, want, "{err}");
    let (got, err, ok) = chat(
        &model(),
        &[],
        &format!("/image {image_a}\n{prompt}\n/exit\n"),
    );
    assert!(ok, "{err}");
    assert_eq!(got, want, "{err}");
    assert!(err.contains("(image 1 for the next message"), "{err}");
    // Three answers: text, then an image after the first turn, then a
    // message whose image cannot be read (not sent), then text again.
    let image_b = fixture("ref/image_b.png");
    let input = format!(
        "Hello\n/image {}\nWhich colour?\n/image /nonexistent/x.png\nagain\nWhich colour?\n/exit\n",
        image_b.display()
    );
    let (_, err, ok) = chat(&model(), &[], &input);
    assert!(ok, "{err}");
    assert!(
        err.contains("(images not used, message not sent:") && err.contains("x.png"),
        "{err}"
    );
    let prefills = common::prefills(&err);
    assert_eq!(prefills.len(), 3, "{err}");
    // The image turn fed the image's tokens on top of the same text.
    assert!(prefills[1] > prefills[2], "{prefills:?}");
    // A text-only model: --image is refused, /image explained.
    let text_model = common::convert_f32("dev_qwen3_dense_tied/hf", "dense-for-chat");
    let (_, err, ok) = chat(&text_model, &["--image", image_a], "hi\n/exit\n");
    assert!(!ok && err.contains("no vision tower"), "{err}");
    let (_, err, ok) = chat(&text_model, &[], "/image x.png\n/exit\n");
    assert!(
        ok && err.contains("/image needs a Qwen3-VL or Qwen3.5 file"),
        "{err}"
    );
    if let Some(dir) = text_model.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The fixture as llama.cpp's converter writes it (tests/fixtures/
/// gen_vl_gguf.py): a `qwen3vl` text GGUF and an mmproj GGUF, converted
/// with `--mmproj` (f32) into `name`, with `extra` options.
fn convert_gguf(name: &str, extra: &[&str]) -> (std::process::Output, PathBuf) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kestrel-vl-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    let st = kestrel()
        .arg("convert")
        .arg(fixture("gguf/model-f32.gguf"))
        .arg("-o")
        .arg(&out)
        .args(["--wmode", "f32"])
        .args(extra)
        .output()
        .unwrap();
    (st, out)
}

/// Every position's logits of the one-image case (one placeholder, which
/// the image expands) and 4 greedy steps, as bytes.
fn image_logits(model: &std::path::Path) -> Vec<u8> {
    let b = std::fs::read(fixture("ref/ref.json")).unwrap();
    let root = kestrel_core::json::parse(&b).unwrap();
    let mut ids: Vec<u64> = Vec::new();
    for v in root
        .get("cases")
        .and_then(|c| c.get("image"))
        .and_then(|c| c.get("input_ids"))
        .unwrap()
        .iter_array()
        .unwrap()
    {
        let id = v.as_u64().unwrap();
        // The reference expands <|image_pad|> (482) to the image's tokens.
        if !(id == 482 && ids.last() == Some(&482)) {
            ids.push(id);
        }
    }
    let tokens: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    let out = kestrel()
        .arg("logits")
        .arg(model)
        .args(["--tokens", &tokens.join(",")])
        .arg("--image")
        .arg(fixture("ref/image_a.png"))
        .args(["--greedy", "4", "--kv-f32", "-t", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
    out.stdout
}

/// Qwen3-VL from a GGUF and its mmproj (llama.cpp's layout): with the
/// checkpoint's image limits, the same logits as the Hugging Face
/// directory's conversion, bit for bit, and the reference's greedy ids;
/// by default llama.cpp's limits (8 to 4096 image tokens).
#[test]
fn gguf_and_mmproj_give_the_checkpoints_logits() {
    let mmproj = fixture("gguf/mmproj-f32.gguf");
    // The checkpoint's preprocessor: shortest_edge 1024 pixels, longest
    // 16777216; an image token is 2 x 2 patches of 16 x 16 = 1024 pixels.
    let (st, file) = convert_gguf(
        "vl.vqf",
        &[
            "--mmproj",
            mmproj.to_str().unwrap(),
            "--image-min-tokens",
            "1",
            "--image-max-tokens",
            "16384",
        ],
    );
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    assert_eq!(image_logits(&file), image_logits(&model()));
    let out = kestrel()
        .arg("run")
        .arg(&file)
        .arg("--image")
        .arg(fixture("ref/image_a.png"))
        .args([
            "-p",
            "Describe the colours you see.",
            "-n",
            "8",
            "--temp",
            "0",
            "--ids",
            "--kv-f32",
            "-t",
            "1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.trim_end().ends_with(&greedy("image")), "{stdout}");
    // llama.cpp's limits when none is given.
    let (st, file) = convert_gguf("vl-default.vqf", &["--mmproj", mmproj.to_str().unwrap()]);
    assert!(st.status.success());
    let info = kestrel().arg("inspect").arg(&file).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("min_pixels           8192"), "{info}");
    assert!(info.contains("max_pixels           4194304"), "{info}");
}

/// A qwen3vl GGUF without its mmproj converts as the text model (the same
/// logits as the checkpoint's `--text-only` conversion); misuses of
/// --mmproj are refused by name.
#[test]
fn a_qwen3vl_gguf_alone_is_the_text_model_and_mmproj_misuse_is_refused() {
    let (st, file) = convert_gguf("text.vqf", &[]);
    let log = String::from_utf8_lossy(&st.stderr);
    assert!(st.status.success(), "{log}");
    assert!(log.contains("--mmproj FILE"), "{log}");
    let logits = |m: &std::path::Path| {
        let out = kestrel()
            .arg("logits")
            .arg(m)
            .args([
                "--tokens",
                "471,327,270,198,35,279,66",
                "--greedy",
                "4",
                "--kv-f32",
                "-t",
                "1",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    // The text model of the full conversion reads the same weights.
    assert_eq!(logits(&file), logits(&model()));
    let mmproj = fixture("gguf/mmproj-f32.gguf");
    let refused = |args: &[&str], says: &str| {
        let (st, _) = convert_gguf("no.vqf", args);
        let log = String::from_utf8_lossy(&st.stderr);
        assert!(
            !st.status.success() && log.contains(says),
            "{args:?}: {log}"
        );
    };
    refused(
        &["--mmproj", mmproj.to_str().unwrap(), "--text-only"],
        "--mmproj gives a vision tower",
    );
    refused(&["--image-min-tokens", "4"], "apply with --mmproj");
    let text_gguf = fixture("gguf/model-f32.gguf");
    refused(
        &["--mmproj", text_gguf.to_str().unwrap()],
        "not an mmproj file",
    );
    // Beside another source: a text GGUF of another model, a checkpoint.
    for (src, says) in [
        (
            "dev_qwen3_dense_tied/gguf/model-f32.gguf",
            "qwen35moe expected",
        ),
        // Qwen3.5 takes an mmproj, but not Qwen3-VL's (DeepStack).
        (
            "dev_qwen35_dense/gguf/model-q8_0.gguf",
            "2 DeepStack layers, the text file's qwen35.n_deepstack_layers is 0",
        ),
        ("dev_qwen3_vl/hf", "--mmproj applies to a GGUF"),
    ] {
        let st = kestrel()
            .arg("convert")
            .arg(common::fixture(src))
            .arg("-o")
            .arg(std::env::temp_dir().join("kestrel-no-vl.vqf"))
            .arg("--mmproj")
            .arg(&mmproj)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&st.stderr);
        assert!(!st.status.success() && log.contains(says), "{src}: {log}");
    }
}

/// Damaged mmproj files never crash the converter: each of a few hundred
/// single-byte changes to its header, metadata and tensor infos (and the
/// file cut short at many lengths) converts or is refused with an error,
/// never a panic or a signal.
#[test]
fn damaged_mmproj_files_are_errors_not_crashes() {
    let good = std::fs::read(fixture("gguf/mmproj-f32.gguf")).unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kestrel-vl-damaged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("mmproj.gguf");
    let out = dir.join("out.vqf");
    // The metadata and tensor infos: everything before the first tensor's
    // data (aligned to 32 bytes after them).
    let header_end = 4096.min(good.len());
    let mut cases: Vec<Vec<u8>> = Vec::new();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..240 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let at = (state % header_end as u64) as usize;
        let mut b = good.clone();
        b[at] = match (state >> 32) % 4 {
            0 => 0,
            1 => 0xff,
            2 => b[at].wrapping_add(1),
            _ => b[at] ^ 0x80,
        };
        cases.push(b);
    }
    for cut in (0..header_end).step_by(97) {
        cases.push(good[..cut].to_vec());
    }
    for (i, b) in cases.iter().enumerate() {
        std::fs::write(&bad, b).unwrap();
        let st = kestrel()
            .arg("convert")
            .arg(fixture("gguf/model-f32.gguf"))
            .arg("--mmproj")
            .arg(&bad)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let code = st.status.code();
        assert!(
            code == Some(0) || code == Some(1),
            "case {i}: exit {code:?}: {}",
            String::from_utf8_lossy(&st.stderr)
        );
        if code == Some(1) {
            assert!(!String::from_utf8_lossy(&st.stderr).contains("panicked"));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Qwen3.5 (hybrid layers; its tower is Qwen3-VL's without DeepStack):
/// `kestrel run --image` on the dense fixture converted with its tower
/// gives transformers' 16 greedy ids for the fixture's image prompt (the
/// chat template renders it as the reference does), and `kestrel chat`
/// gives the same answer, then a second turn on top of the image's
/// recurrent state (only the new turn runs).
#[test]
fn qwen35_run_and_chat_take_an_image() {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let model = ONCE
        .get_or_init(|| common::convert_f32("dev_qwen35_dense/hf_bf16", "q35-vision"))
        .clone();
    let b = std::fs::read(common::fixture("dev_qwen35_dense/ref/ref.json")).unwrap();
    let root = kestrel_core::json::parse(&b).unwrap();
    let ids: Vec<String> = root
        .get("image")
        .and_then(|c| c.get("greedy_tokens"))
        .unwrap()
        .iter_array()
        .unwrap()
        .map(|v| v.as_u64().unwrap().to_string())
        .collect();
    let want_ids = format!("[{}]", ids.join(", "));
    let image = common::fixture("dev_qwen35_dense/image/test_image_64x64.png");
    let run = |extra: &[&str]| {
        let out = kestrel()
            .arg("run")
            .arg(&model)
            .arg("--image")
            .arg(&image)
            .args([
                "-p",
                "Describe this image.",
                "--temp",
                "0",
                "--kv-f32",
                "-t",
                "1",
            ])
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("16 patches -> 4 tokens"), "{stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let stdout = run(&["-n", "16", "--ids"]);
    assert!(stdout.trim_end().ends_with(&want_ids), "{stdout}");
    let answer = run(&["-n", "8"]);
    let answer = answer.strip_suffix('\n').unwrap();
    let image = image.to_str().unwrap();
    let (got, err, ok) = chat(&model, &["--image", image], "Describe this image.\n/exit\n");
    assert!(ok, "{err}");
    assert_eq!(got, answer, "{err}");
    let (got, err, ok) = chat(
        &model,
        &["--image", image],
        "Describe this image.\nAnd again?\n/exit\n",
    );
    assert!(ok, "{err}");
    assert!(got.starts_with(answer), "{got:?} {err}");
    let prefills = common::prefills(&err);
    assert_eq!(prefills.len(), 2, "{err}");
    // The second turn goes on from the state the first left: only the
    // new turn's tokens run.
    assert!(prefills[1] < prefills[0], "{prefills:?}");
}
