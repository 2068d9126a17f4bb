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
    let dir = std::env::temp_dir().join(format!("kestrel-vl-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
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
    let _ = std::fs::remove_dir_all(&dir);
}
