//! The `kestrel` binary as a user runs it: exit codes, one-line errors,
//! clap's usage errors, and conversions killed part-way leaving nothing
//! behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

mod common;
use common::{kestrel, temp, Temp};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(rel)
}

#[test]
fn errors_are_one_line_with_exit_code_1() {
    let dir = temp("errors");
    let junk = dir.join("junk.vqf");
    std::fs::write(&junk, b"\x89VQF\r\n\x1a\nshort").unwrap();
    for args in [
        vec!["inspect".to_string(), junk.display().to_string()],
        vec!["verify".to_string(), junk.display().to_string()],
        vec![
            "convert".to_string(),
            junk.display().to_string(),
            "-o".into(),
            dir.join("o.vqf").display().to_string(),
        ],
        vec![
            "inspect".to_string(),
            dir.join("missing.vqf").display().to_string(),
        ],
    ] {
        let out = kestrel().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("kestrel: "), "{err}");
        assert!(!err.contains("panicked"));
    }
}

/// A usage error (clap's): on stderr, naming the flag or argument, with exit
/// code 2 and nothing on stdout.
fn usage_error(args: &[&str]) -> String {
    let out = kestrel().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}");
    err
}

#[test]
fn usage_errors_name_the_flag_with_exit_code_2() {
    for (args, says) in [
        (
            &["run", "m.vqf", "-p", "hi", "--bogus"][..],
            "unexpected argument '--bogus'",
        ),
        (
            &["run", "m.vqf", "--prompt"],
            "a value is required for '--prompt <TEXT>'",
        ),
        (
            &["run", "m.vqf"],
            "required arguments were not provided:\n  --prompt <TEXT>",
        ),
        (
            &["run", "m.vqf", "-p", "hi", "-t", "two"],
            "invalid value 'two' for '--threads <N>'",
        ),
        (
            &["run", "m.vqf", "-p", "hi", "-t", "0"],
            "invalid value '0' for '--threads <N>': must be at least 1",
        ),
        (
            &["run", "m.vqf", "-p", "hi", "--think", "--no-think"],
            "'--think' cannot be used with '--no-think'",
        ),
        (
            &["run", "m.vqf", "-p", "hi", "--prefill-q8", "no"],
            "invalid value 'no' for '--prefill-q8 <BOOL>'",
        ),
        (
            &["serve", "m.vqf", "--prefill-q8", "no"],
            "invalid value 'no' for '--prefill-q8 <BOOL>'",
        ),
        (
            &["convert", "x", "-o", "y", "--wmode=q5"],
            "invalid value 'q5' for '--wmode <MODE>'",
        ),
        (
            &["detokenize", "m.vqf", "1,x"],
            "invalid value 'x' for '[IDS]...'",
        ),
        (
            &["inspect"],
            "required arguments were not provided:\n  <FILE>",
        ),
        (&["verify", "a", "b"], "unexpected argument 'b'"),
        (&["frobnicate"], "unrecognized subcommand 'frobnicate'"),
    ] {
        let err = usage_error(args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // No command at all: the help, on stderr.
    let out = kestrel().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Commands:"));
}

#[test]
fn mistyped_commands_and_flags_get_a_suggestion() {
    let err = usage_error(&["chta", "m.vqf"]);
    assert!(err.contains("unrecognized subcommand 'chta'"), "{err}");
    // clap lists every close name ('schema' is close too).
    let tip = err.lines().find(|l| l.contains("tip: ")).unwrap_or("");
    assert!(
        tip.contains("similar subcommand") && tip.contains("'chat'"),
        "{err}"
    );
    let err = usage_error(&["run", "m.vqf", "-p", "hi", "--temperature", "0"]);
    assert!(err.contains("unexpected argument '--temperature'"), "{err}");
    assert!(
        err.contains("tip: a similar argument exists: '--temp'"),
        "{err}"
    );
    let err = usage_error(&["serve", "m.vqf", "--prefil-q8", "false"]);
    assert!(
        err.contains("tip: a similar argument exists: '--prefill-q8'"),
        "{err}"
    );
}

#[test]
fn help_and_version() {
    let stdout = |args: &[&str]| {
        let out = kestrel().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        stdout(&["--version"]),
        format!("kestrel {}\n", env!("CARGO_PKG_VERSION"))
    );
    let top = stdout(&["--help"]);
    for c in [
        "cpu",
        "bench",
        "run",
        "chat",
        "tokenize",
        "detokenize",
        "convert",
        "inspect",
        "logits",
        "verify",
    ] {
        assert!(top.contains(&format!("\n  {c} ")), "{c}: {top}");
        assert!(stdout(&[c, "--help"]).contains(&format!("Usage: kestrel {c}")));
    }
    let run = stdout(&["run", "-h"]);
    for line in [
        "-p, --prompt <TEXT>",
        "-n, --n-predict <N>",
        "--temp <F>",
        "[default: 0.8]",
        "-t, --threads <N>",
        "--prefill-q8 <BOOL>",
        "[default: true]",
        "Usage: kestrel run [OPTIONS] --prompt <TEXT> <MODEL>",
    ] {
        assert!(run.contains(line), "{line}: {run}");
    }
    assert_eq!(stdout(&["help", "run"]), run);
}

#[test]
fn convert_inspect_verify_round_trip() {
    let dir = temp("roundtrip");
    let out = dir.join("m.vqf");
    let st = kestrel()
        .args([
            "convert",
            fixture("dev_qwen2_dense/gguf/model-q8_0.gguf")
                .to_str()
                .unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--wmode",
            "dual",
        ])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&st.stderr);
    assert!(st.status.success(), "{log}");
    let wrote = log.lines().find(|l| l.starts_with("[VQF] wrote")).unwrap();
    let memsum = wrote
        .split("memsum=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let file_sum = wrote.split("file_sum=").nth(1).unwrap().trim();
    assert_eq!(memsum, file_sum);
    let v = kestrel()
        .args(["verify", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(v.status.success());
    assert!(String::from_utf8_lossy(&v.stdout).contains(file_sum));
    let j = kestrel()
        .args(["inspect", "--json", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&j.stdout).to_string();
    let doc = kestrel_core::json::parse(text.trim().as_bytes())
        .expect("inspect --json prints one JSON object");
    let tensors = doc.get("tensors").unwrap().as_array().unwrap();
    // Per layer: attn_norm, qkv x2, qkv_bias, attn_output x2, ffn_norm,
    // gate_up x2, down x2 (11); then token_embd, output x2, output_norm.
    assert_eq!(tensors.len(), 2 * 11 + 4);
    let first = tensors.get(0).unwrap();
    for key in ["name", "dtype", "layout", "shape", "offset", "nbytes"] {
        assert!(first.get(key).is_some(), "{key}");
    }
    let t = kestrel()
        .args(["inspect", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(
        text.contains("bit 1 Q4_4X4      yes") && text.contains("(ok)"),
        "{text}"
    );
    // A damaged byte in the data: verify fails, exit 1.
    let mut b = std::fs::read(&out).unwrap();
    let n = b.len();
    b[n - 10] ^= 0x40;
    std::fs::write(&out, b).unwrap();
    let v = kestrel()
        .args(["verify", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&v.stderr).contains("checksum mismatch"));
}

/// A synthetic Hugging Face checkpoint large enough that converting it takes
/// a while (about 70 MB of f32 weights).
fn big_checkpoint(dir: &Path) {
    let (h, ffn, layers, vocab, heads, kv) =
        (512usize, 2048usize, 6usize, 4096usize, 8usize, 4usize);
    let hd = h / heads;
    let mut tensors: Vec<(String, Vec<usize>)> = vec![
        ("model.embed_tokens.weight".into(), vec![vocab, h]),
        ("model.norm.weight".into(), vec![h]),
        ("lm_head.weight".into(), vec![vocab, h]),
    ];
    for l in 0..layers {
        let p = format!("model.layers.{l}.");
        tensors.push((format!("{p}input_layernorm.weight"), vec![h]));
        tensors.push((format!("{p}post_attention_layernorm.weight"), vec![h]));
        tensors.push((format!("{p}self_attn.q_proj.weight"), vec![h, h]));
        tensors.push((format!("{p}self_attn.k_proj.weight"), vec![kv * hd, h]));
        tensors.push((format!("{p}self_attn.v_proj.weight"), vec![kv * hd, h]));
        tensors.push((format!("{p}self_attn.o_proj.weight"), vec![h, h]));
        tensors.push((format!("{p}self_attn.q_norm.weight"), vec![hd]));
        tensors.push((format!("{p}self_attn.k_norm.weight"), vec![hd]));
        tensors.push((format!("{p}mlp.gate_proj.weight"), vec![ffn, h]));
        tensors.push((format!("{p}mlp.up_proj.weight"), vec![ffn, h]));
        tensors.push((format!("{p}mlp.down_proj.weight"), vec![h, ffn]));
    }
    let mut header = String::from("{");
    let mut off = 0usize;
    for (i, (n, s)) in tensors.iter().enumerate() {
        let len = s.iter().product::<usize>() * 4;
        let dims: Vec<String> = s.iter().map(|d| d.to_string()).collect();
        header += &format!(
            "{}\"{n}\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{off},{}]}}",
            if i > 0 { "," } else { "" },
            dims.join(","),
            off + len
        );
        off += len;
    }
    header.push('}');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    let mut x = 1u32;
    out.extend((0..off / 4).flat_map(|_| {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        ((x >> 9) as f32 / (1 << 23) as f32 - 0.5).to_le_bytes()
    }));
    std::fs::write(dir.join("model.safetensors"), out).unwrap();
    std::fs::write(
        dir.join("config.json"),
        format!(
            "{{\"model_type\":\"qwen3\",\"vocab_size\":{vocab},\"hidden_size\":{h},\"num_hidden_layers\":{layers},\"num_attention_heads\":{heads},\"num_key_value_heads\":{kv},\"head_dim\":{hd},\"intermediate_size\":{ffn},\"rope_theta\":1000000.0,\"rms_norm_eps\":1e-6,\"max_position_embeddings\":4096,\"tie_word_embeddings\":false}}"
        ),
    )
    .unwrap();
}

/// The names in `dir`, sorted.
/// A temporary folder `name` holding `src` (a 70 MB checkpoint,
/// [`big_checkpoint`]) and an empty `out`.
fn checkpoint_and_output_dir(name: &str) -> (Temp, PathBuf, PathBuf) {
    let dir = temp(name);
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    big_checkpoint(&src);
    let outdir = dir.join("out");
    std::fs::create_dir_all(&outdir).unwrap();
    (dir, src, outdir)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// SIGKILL at pseudo-random points (fixed seed) of a conversion whose
/// target already holds a VQF: the old file stays byte for byte until the
/// new one replaces it whole, and no other name ever appears (the output is
/// written unnamed with O_TMPFILE and linked in at the end).
#[test]
fn killed_conversions_leave_nothing_and_keep_the_old_output() {
    let (_dir, src, outdir) = checkpoint_and_output_dir("kill");
    let dir = src.parent().unwrap().to_owned();
    let out = outdir.join("m.vqf");
    let convert = |from: &Path, to: &Path| {
        let st = kestrel()
            .args([
                "convert",
                from.to_str().unwrap(),
                "-o",
                to.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
    };
    // The previous output: a real VQF (of another model).
    convert(&fixture("dev_qwen2_dense/gguf/model-q8_0.gguf"), &out);
    let old = std::fs::read(&out).unwrap();
    // What the conversion gives when left alone, and how long it takes.
    let reference = dir.join("reference.vqf");
    let t0 = std::time::Instant::now();
    convert(&src, &reference);
    let full_ms = (t0.elapsed().as_millis() as u64).max(20);
    let new = std::fs::read(&reference).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut killed = 0;
    for run in 0..10 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Delays over the whole conversion and a little past it.
        let delay_ms = x % (full_ms + full_ms / 5);
        let mut child = kestrel()
            .args([
                "convert",
                src.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        killed += !finished as usize;
        let names = names_in(&outdir);
        assert_eq!(
            names,
            vec!["m.vqf".to_string()],
            "run {run}, killed after {delay_ms} ms"
        );
        let now = std::fs::read(&out).unwrap();
        assert!(
            now == old || now == new,
            "run {run}, killed after {delay_ms} ms: the output is neither the old nor the new file"
        );
        if now == new {
            // Replaced: put the old one back for the next run.
            std::fs::write(&out, &old).unwrap();
        }
    }
    assert!(
        killed >= 3,
        "only {killed} of 10 runs were killed before the end"
    );
    // Left alone, the conversion completes and replaces the old output.
    convert(&src, &out);
    assert_eq!(names_in(&outdir), vec!["m.vqf".to_string()]);
    assert!(std::fs::read(&out).unwrap() == new);
    assert!(kestrel()
        .args(["verify", out.to_str().unwrap()])
        .output()
        .unwrap()
        .status
        .success());
}

/// A conversion the file system refuses part-way (here the file-size limit,
/// as a full disk would): one line with the operating system's reason and
/// the output's path, exit code 1, and nothing left behind.
#[test]
fn a_refused_write_names_the_reason_and_leaves_nothing() {
    let (_dir, src, outdir) = checkpoint_and_output_dir("refused");
    let out = outdir.join("m.vqf");
    let kestrel_cmd = kestrel();
    let mut argv = vec![kestrel_cmd.get_program().to_owned()];
    argv.extend(kestrel_cmd.get_args().map(|a| a.to_owned()));
    // SIGXFSZ ignored (an ignored signal stays ignored across exec), so the
    // write past 2 MiB (while the core streams tensors out, past the output's
    // buffer) fails with EFBIG instead of killing the process.
    let st = std::process::Command::new("bash")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 2048; exec \"$@\"")
        .arg("bash")
        .args(&argv)
        .args(["convert"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&st.stderr);
    assert_eq!(st.status.code(), Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("kestrel: converting "), "{err}");
    assert!(
        last.contains(&format!("writing {}", out.display())),
        "{err}"
    );
    assert!(last.contains("too large"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(names_in(&outdir).is_empty(), "{:?}", names_in(&outdir));
}

/// A model file truncated while `kestrel chat` has it mapped: the next
/// access to a vanished page raises SIGBUS, which the shell turns into one
/// line naming the file and exit code 1 (no core dump, no signal death).
#[test]
fn model_truncated_while_in_use_is_a_clean_exit() {
    use std::io::{BufRead, Write};
    let dir = temp("sigbus");
    let model = dir.join("m.vqf");
    let st = kestrel()
        .args([
            "convert",
            fixture("dev_qwen3_dense_tied/hf").to_str().unwrap(),
            "-o",
            model.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(st.status.success());
    let mut child = kestrel()
        .args([
            "chat",
            model.to_str().unwrap(),
            "-t",
            "2",
            "--no-pin",
            "--temp",
            "0",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Loaded (mapped, validated, arena ready) once the banner is out.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut banner = String::new();
    err.read_line(&mut banner).unwrap();
    assert!(banner.starts_with("kestrel chat:"), "{banner}");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&model)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(b"Hello, who are you?\n/exit\n");
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{status:?}: {rest}");
    assert!(
        rest.contains("m.vqf: the file changed while in use"),
        "{rest}"
    );
    assert!(!rest.contains("panicked"), "{rest}");
}

/// The arena (KV cache and activations) cannot be allocated: a clear
/// one-line error and exit code 1, under an address-space limit that the
/// rest of the program fits in.
#[test]
#[cfg_attr(
    target_arch = "aarch64",
    ignore = "aarch64 tests run under qemu user mode, whose address-space limit is not the program's"
)]
fn arena_out_of_memory_is_reported() {
    let dir = temp("oom");
    let model = dir.join("m.vqf");
    let st = kestrel()
        .args([
            "convert",
            fixture("dev_qwen3_dense_tied/hf").to_str().unwrap(),
            "-o",
            model.to_str().unwrap(),
            "--max-seq",
            "1048576",
        ])
        .output()
        .unwrap();
    assert!(st.status.success());
    let run = |ctx: &str| {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v 200000 && exec \"$0\" run \"$1\" --ctx {ctx} -t 1 --no-pin -p hi -n 2 --temp 0"
            ))
            .arg(env!("CARGO_BIN_EXE_kestrel"))
            .arg(&model)
            .output()
            .unwrap()
    };
    // 1M positions: 320 MB of KV cache and activations, over the 200 MB limit.
    let out = run("1048576");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("kestrel: cannot allocate 320 MB for the KV cache and activations (try a smaller --ctx)"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // The same limit with a 4096 context: it runs.
    let out = run("4096");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `inspect --memory` on a Hugging Face directory and on the VQF made from
/// it: the same arena figures, and the q4 estimate equals the file's tensors.
#[test]
fn inspect_memory_from_config_and_from_file() {
    let dir = temp("memory");
    let src = fixture("dev_qwen3_dense_tied/hf");
    let model = dir.join("m.vqf");
    let st = kestrel()
        .args([
            "convert",
            src.to_str().unwrap(),
            "-o",
            model.to_str().unwrap(),
            "--wmode",
            "q4",
        ])
        .output()
        .unwrap();
    assert!(st.status.success());
    let report = |p: &Path| {
        let out = kestrel()
            .args(["inspect", "--memory", p.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let from_dir = report(&src);
    let from_json = report(&src.join("config.json"));
    let from_file = report(&model);
    let value = |text: &str, key: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no {key:?} in\n{text}"));
        line.split_once(": ").unwrap().1.to_string()
    };
    assert_eq!(
        value(&from_dir, "weights if converted --wmode q4"),
        value(&from_file, "of which tensors")
    );
    for ctx in ["--ctx 512", "--ctx 4096", "--ctx 32768"] {
        assert_eq!(value(&from_dir, ctx), value(&from_file, ctx), "{ctx}");
        assert_eq!(value(&from_dir, ctx), value(&from_json, ctx), "{ctx}");
    }
}

#[test]
fn keep_q8_is_checked_and_only_for_mix_and_small() {
    let src = fixture("dev_qwen2_dense/gguf/model-q8_0.gguf");
    let dir = std::env::temp_dir().join(format!("kestrel-keep-q8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("m.vqf");
    for (args, says) in [
        (
            vec!["--keep-q8", "attn_v"],
            "--keep-q8 applies to --wmode mix and small only",
        ),
        (
            vec!["--wmode", "dual", "--keep-q8", "attn_v"],
            "--keep-q8 applies to --wmode mix and small only",
        ),
        (
            vec!["--wmode", "small", "--keep-q8", "attn_z"],
            "unknown matrix \"attn_z\"",
        ),
        (
            vec!["--wmode", "mix", "--keep-q8", "attn_z"],
            "unknown matrix \"attn_z\"",
        ),
        (
            vec!["--wmode", "mix", "--keep-q8", "ffn_down@last2"],
            "after @, endsN",
        ),
    ] {
        let o = kestrel()
            .arg("convert")
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .args(&args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} left a file");
    }
    let o = kestrel()
        .arg("convert")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .args([
            "--wmode",
            "mix",
            "--keep-q8",
            "attn_k,attn_v",
            "--quantizer",
            "search",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.exists());
    // The same recipe as one copy: a smaller file that answers.
    let small = dir.join("small.vqf");
    let o = kestrel()
        .arg("convert")
        .arg(&src)
        .arg("-o")
        .arg(&small)
        .args(["--wmode", "small", "--keep-q8", "attn_k,attn_v"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let size = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    assert!(size(&small) < size(&out));
    let o = kestrel().arg("inspect").arg(&small).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("COPY_TAGS"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `convert` says what the file holds by copy and, for a two-copy mode, the
/// size of its one-copy alternative; `--wmode exact` then writes that size.
#[test]
fn convert_says_the_size_of_each_copy_and_of_the_one_copy_file() {
    let dir = temp("sizes");
    let src = fixture("dev_qwen2_kquant/gguf/model-q2_k.gguf");
    let convert = |mode: &str, out: &Path| -> String {
        let st = kestrel()
            .args([
                "convert",
                src.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ])
            .args(["--wmode", mode])
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&st.stderr).to_string();
        assert!(st.status.success(), "{log}");
        let line = log.lines().find(|l| l.starts_with("[VQF] size "));
        line.unwrap_or_else(|| panic!("no size line: {log}"))
            .to_string()
    };
    let two = convert("source", &dir.join("source.vqf"));
    assert!(two.contains("prefill-only copy"), "{two}");
    let about: f64 = two
        .split("--wmode exact keeps one copy: about ")
        .nth(1)
        .and_then(|s| s.strip_suffix(" MB"))
        .unwrap_or_else(|| panic!("{two}"))
        .parse()
        .unwrap();
    let one = convert("exact", &dir.join("exact.vqf"));
    assert!(!one.contains("keeps one copy"), "{one}");
    let written = std::fs::metadata(dir.join("exact.vqf")).unwrap().len() as f64 / 1e6;
    assert!(
        (about - written).abs() <= 0.051,
        "{about} MB said, {written} MB written"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `inspect --memory --board SIZE`: the longest context that fits beside
/// the weights, or how far over they are; a size that is not one is a usage
/// error.
#[test]
fn inspect_memory_says_what_a_board_leaves_for_the_context() {
    let model = fixture("dev_qwen2_kquant/gguf/model-q2_k.gguf");
    let dir = temp("board");
    let vqf = dir.join("m.vqf");
    let st = kestrel()
        .args([
            "convert",
            model.to_str().unwrap(),
            "-o",
            vqf.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(st.status.success());
    let board = |size: &str| {
        let out = kestrel()
            .args([
                "inspect",
                "--memory",
                vqf.to_str().unwrap(),
                "--board",
                size,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{size}");
        String::from_utf8(out.stdout).unwrap()
    };
    let big = board("16GB");
    assert!(
        big.contains("a board of 14.90 GiB (16000000000 bytes)"),
        "{big}"
    );
    assert!(big.contains("--ctx up to 32768 (max_seq)"), "{big}");
    let mid = board("20MiB");
    let ctx: usize = mid
        .split("--ctx up to ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or_else(|| panic!("{mid}"))
        .parse()
        .unwrap();
    assert!(ctx > 512 && ctx < 32768, "{mid}");
    assert!(board("1MB").contains("does not fit"));
    usage_error(&[
        "inspect",
        "--memory",
        vqf.to_str().unwrap(),
        "--board",
        "2XB",
    ]);
    usage_error(&["inspect", vqf.to_str().unwrap(), "--board", "2GB"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `convert --fit SIZE`: the plan is printed, the file is at most SIZE,
/// more bytes buy less measured error, the file runs; a size below the
/// smallest types, or --fit beside another mode, is refused by name.
#[test]
fn fit_writes_at_most_the_size_asked_and_spends_it_on_error() {
    let dir = temp("fit");
    // A k-quant GGUF (rows of 256): requantized from its own values.
    let src = fixture("dev_qwen2_kquant/gguf/model-kquant-mix.gguf");
    let convert = |out: &str, args: &[&str]| -> (bool, String) {
        let st = kestrel()
            .args(["convert", src.to_str().unwrap(), "-o"])
            .arg(dir.join(out))
            .args(args)
            .output()
            .unwrap();
        (
            st.status.success(),
            String::from_utf8_lossy(&st.stderr).to_string(),
        )
    };
    let size = |out: &str| std::fs::metadata(dir.join(out)).unwrap().len();
    let error_sum = |log: &str| -> f64 {
        let line = log
            .lines()
            .find(|l| l.starts_with("[fit] planned matrices:"))
            .unwrap_or_else(|| panic!("no plan: {log}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    // The extremes: every class pinned to q2_k, and every matrix in q8_0.
    let all_q2 = "token_embd=q2_k,output=q2_k,attn_q=q2_k,attn_k=q2_k,attn_v=q2_k,attn_output=q2_k,ffn_gate_up=q2_k,ffn_down=q2_k";
    let (ok, log) = convert("q2.vqf", &["--tensor-type", all_q2]);
    assert!(ok, "{log}");
    let (ok, log) = convert("q8.vqf", &["--tensor-type", "output=q8_0"]);
    assert!(ok, "{log}");
    let (small, large) = (size("q2.vqf"), size("q8.vqf"));
    assert!(small < large / 2, "{small} {large}");
    let mut last_error = f64::MAX;
    for (i, budget) in [small + (large - small) / 4, small + (large - small) * 3 / 4]
        .into_iter()
        .enumerate()
    {
        let out = format!("fit{i}.vqf");
        let (ok, log) = convert(&out, &["--fit", &budget.to_string()]);
        assert!(ok, "{log}");
        assert!(log.contains("[fit] tensor"), "{log}");
        assert!(log.contains("[fit] class ffn_gate_up"), "{log}");
        assert!(size(&out) <= budget, "{} > {budget}", size(&out));
        assert!(size(&out) >= small, "{} < {small}", size(&out));
        let e = error_sum(&log);
        assert!(e < last_error, "{e} not below {last_error}");
        last_error = e;
        let st = kestrel()
            .args(["run"])
            .arg(dir.join(&out))
            .args(["-p", "hi", "-n", "4", "--temp", "0"])
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        let v = kestrel()
            .arg("verify")
            .arg(dir.join(&out))
            .output()
            .unwrap();
        assert!(v.status.success());
    }
    // --bpw: the matrices' bits per weight.
    let (ok, log) = convert("bpw.vqf", &["--bpw", "4"]);
    assert!(ok, "{log}");
    let bpw: f64 = log
        .lines()
        .find(|l| l.starts_with("[fit] planned matrices:"))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|s| s.strip_suffix(" bits per weight"))
        .unwrap_or_else(|| panic!("{log}"))
        .parse()
        .unwrap();
    assert!(bpw <= 4.0 && bpw > 3.0, "{bpw}");
    // --fit-types: the plan chooses among those types only.
    let (ok, log) = convert("types.vqf", &["--bpw", "5", "--fit-types", "q2_k,q8_0"]);
    assert!(ok, "{log}");
    for l in log.lines().filter(|l| l.starts_with("[fit] class")) {
        assert!(l.contains(" q2_k ") || l.contains(" q8_0 "), "{l}");
    }
    let (ok, log) = convert("no.vqf", &["--fit-types", "q2_k"]);
    assert!(!ok && log.contains("--fit-types applies with"), "{log}");
    // Refusals, by name, leaving nothing.
    let (ok, log) = convert("no.vqf", &["--fit", &(small / 2).to_string()]);
    assert!(!ok && log.contains("smallest types"), "{log}");
    let (ok, log) = convert("no.vqf", &["--fit", "1GB", "--wmode", "dual"]);
    assert!(!ok && log.contains("not --wmode dual"), "{log}");
    let (ok, log) = convert("no.vqf", &["--fit", "1GB", "--bpw", "3"]);
    assert!(!ok && log.contains("--fit and --bpw"), "{log}");
    let (ok, log) = convert("no.vqf", &["--fit", "12 parsecs"]);
    assert!(!ok && log.contains("unknown unit"), "{log}");
    let (ok, log) = convert("no.vqf", &["--tensor-type", "output=q9_k"]);
    assert!(!ok && log.contains("unknown type"), "{log}");
    assert!(!dir.join("no.vqf").exists());
}

/// `--fit-decode`: the plan reads at most the bytes asked per decoded
/// token and still fits the file's budget; `--dry-run` prints the plan and
/// the memory and writes nothing, from a GGUF or from a config.json alone
/// (Gaussian rows); a MoE's experts count at their routed share.
#[test]
fn fit_bounds_decode_bytes_and_plans_dry() {
    let dir = temp("fit-decode");
    let src = fixture("dev_qwen2_kquant/gguf/model-kquant-mix.gguf");
    let dry = |src: &Path, args: &[&str]| -> (bool, String) {
        let st = kestrel()
            .arg("convert")
            .arg(src)
            .arg("--dry-run")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        let out =
            String::from_utf8_lossy(&st.stdout).to_string() + &String::from_utf8_lossy(&st.stderr);
        (st.status.success(), out)
    };
    // "[fit] planned matrices: B bytes, X bits per weight, R bytes read
    // per decoded token, weighted error sum E"
    let planned = |log: &str| -> (u64, u64, f64) {
        let line = log
            .lines()
            .find(|l| l.starts_with("[fit] planned matrices:"))
            .unwrap_or_else(|| panic!("no plan: {log}"));
        let field = |i: usize| line.split(", ").nth(i).unwrap().split(' ');
        let bytes = line
            .trim_start_matches("[fit] planned matrices: ")
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let read = field(2).next().unwrap().parse().unwrap();
        let error = field(3).next_back().unwrap().parse().unwrap();
        (bytes, read, error)
    };
    let (ok, log) = dry(&src, &["--bpw", "4"]);
    assert!(ok, "{log}");
    assert!(log.contains("[fit] memory at --ctx 512"), "{log}");
    assert!(log.contains("--dry-run: nothing written"), "{log}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    let (bytes, read, error) = planned(&log);
    // The embedding is read one row per token: the unbounded plan reads
    // less than its file, and a bound below that moves bytes into the
    // embedding, for more error.
    assert!(read < bytes, "{log}");
    let bound = read * 9 / 10;
    let (ok, log) = dry(&src, &["--bpw", "4", "--fit-decode", &bound.to_string()]);
    assert!(ok, "{log}");
    let (bytes2, read2, error2) = planned(&log);
    assert!(read2 <= bound, "{read2} > {bound}: {log}");
    assert!(bytes2 <= bytes, "{bytes2} > {bytes}");
    assert!(error2 >= error, "{error2} < {error}");
    // A bound below the smallest types is refused by name.
    let (ok, log) = dry(&src, &["--bpw", "4", "--fit-decode", "1000"]);
    assert!(
        !ok && log.contains("--fit-decode: a decoded token reads at least"),
        "{log}"
    );
    let (ok, log) = dry(&src, &["--fit-decode", "1MB"]);
    assert!(
        !ok && log.contains("--fit-decode applies with --fit or --bpw"),
        "{log}"
    );
    let (ok, log) = dry(&src, &[]);
    assert!(
        !ok && log.contains("--dry-run applies with --fit or --bpw"),
        "{log}"
    );
    // A config.json alone: a MoE plan from the shapes; a token reads the
    // routed experts' share of the experts' bytes.
    let config = fixture("dev_qwen3_moe/hf/config.json");
    let (ok, log) = dry(&config, &["--bpw", "5"]);
    assert!(ok, "{log}");
    let (bytes, read, _) = planned(&log);
    // What a token reads: one row of the 544-row embedding, 2 of the 6
    // experts' rows, every other planned matrix whole.
    let of = |what: &str| -> u64 {
        log.lines()
            .filter(|l| l.starts_with("[fit] ") && l.contains(what))
            .map(|l| {
                let after_type = l.split(" x6 ").last().unwrap();
                let mut f = after_type.split_whitespace();
                if !l.contains(" x6 ") {
                    f.next(); // "[fit]"
                    f.next(); // the name
                }
                f.nth(1).unwrap().parse::<u64>().unwrap()
            })
            .sum()
    };
    let (embedding, experts) = (of("token_embd.weight"), of("_exps.weight"));
    assert!(embedding > 0 && experts > 0, "{log}");
    let expected = (bytes - embedding - experts) as f64
        + embedding as f64 / 544.0
        + experts as f64 * 2.0 / 6.0;
    assert!(
        (read as f64 - expected).abs() <= 2.0,
        "{read} against {expected}: {log}"
    );
    assert!(log.contains("[fit] memory at --ctx 4096"), "{log}");
    // The same plan again: the Gaussian rows are reproducible.
    let (_, again) = dry(&config, &["--bpw", "5"]);
    assert_eq!(planned(&again), planned(&log));
    // Without --dry-run a config.json is refused: it holds no weights.
    let st = kestrel()
        .arg("convert")
        .arg(&config)
        .arg("-o")
        .arg(dir.join("no.vqf"))
        .args(["--bpw", "5"])
        .output()
        .unwrap();
    assert!(!st.status.success());
    assert!(String::from_utf8_lossy(&st.stderr).contains("holds no weights"));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `convert SRC --bpw 6` into `dir`, checked to succeed and to run; its
/// log.
fn fit_and_run(dir: &Path, src: &str) -> String {
    let out = dir.join("fit.vqf");
    let st = kestrel()
        .args(["convert", fixture(src).to_str().unwrap(), "-o"])
        .arg(&out)
        .args(["--bpw", "6"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&st.stderr).to_string();
    assert!(st.status.success(), "{log}");
    let st = kestrel()
        .arg("run")
        .arg(&out)
        .args(["-p", "hi", "-n", "4", "--temp", "0"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    log
}

/// `--fit` of a model whose head is its embedding: one planned matrix for
/// both, read whole every token, and the file runs.
#[test]
fn fit_plans_a_tied_embedding_once() {
    let dir = temp("fit-tied");
    let log = fit_and_run(&dir, "dev_qwen3_dense_tied/gguf/model-f32.gguf");
    assert!(log.contains("[fit] class token_embd"), "{log}");
    assert!(!log.contains("[fit] class output"), "{log}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--fit` on a MoE model whose rows are not a multiple of 256 (Q4_0 and
/// Q8_0 only): every expert of a layer takes one type, and the file runs.
#[test]
fn fit_plans_moe_experts_and_narrow_rows() {
    let dir = temp("fit-moe");
    let log = fit_and_run(&dir, "dev_qwen3_moe/gguf/model-f32.gguf");
    assert!(
        log.lines()
            .any(|l| l.contains("ffn_gate_exps") && l.contains(" x")),
        "{log}"
    );
    assert!(log.contains("q4_0") && log.contains("q8_0"), "{log}");
}

#[test]
fn schema_check_compiles_and_walks_instances() {
    let dir = temp("schema-check");
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("s.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"n":{"type":"integer","maximum":5},"s":{"type":"string","format":"ipv6"}},"required":["n"]}"#,
    )
    .unwrap();
    let (good, bad) = (dir.join("good.json"), dir.join("bad.json"));
    std::fs::write(&good, "{\n  \"n\": 3\n}\n").unwrap();
    std::fs::write(&bad, r#"{"n":9}"#).unwrap();
    let run = |extra: &[&str]| {
        let out = kestrel()
            .args(["schema", "check"])
            .arg(&schema)
            .args([&good, &bad])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    // Best effort: `format` is left out (and said), the instances walked.
    let text = run(&["--json"]);
    assert!(text.starts_with(r#"{"compiled":true,"error":null,"dropped":["schema.properties.s.format"],"instances":[{"file":"#), "{text}");
    assert!(
        text.contains(r#"good.json","accepted":true,"offset":null}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"bad.json","accepted":false,"offset":5}"#),
        "{text}"
    );
    // Strict: refused with the path; still exit 0.
    let text = run(&["--strict", "--json"]);
    assert_eq!(
        text.trim(),
        r#"{"compiled":false,"error":"'schema.properties.s': unsupported JSON schema keyword 'format'","dropped":[],"instances":[]}"#
    );
    let text = run(&[]);
    assert!(
        text.contains("bad.json: rejected at byte 5 of its compact form (expected"),
        "{text}"
    );
}

/// `kestrel schema bench`: a mask timed at every token of each instance
/// and after its last (where the end is taken), every token of a valid
/// instance inside its mask; a refused schema is an error.
#[test]
fn schema_bench_times_the_mask_at_every_token() {
    let dir = temp("schema-bench");
    let model = dir.join("m.vqf");
    let st = kestrel()
        .args(["convert"])
        .arg(fixture("dev_qwen2_dense/gguf/model-q4_0.gguf"))
        .arg("-o")
        .arg(&model)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let schema = dir.join("s.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"name":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"type":"string"}},"n":{"type":"integer"}},"required":["name"]}"#,
    )
    .unwrap();
    let (good, bad) = (dir.join("good.json"), dir.join("bad.json"));
    std::fs::write(&good, r#"{"name": "Ana é", "tags": ["a", "bb"], "n": 12}"#).unwrap();
    std::fs::write(&bad, r#"{"n": 1}"#).unwrap();
    let bench = |schema: &Path| {
        kestrel()
            .args(["schema", "bench"])
            .arg(schema)
            .arg("--model")
            .arg(&model)
            .args([&good, &bad])
            .args(["--json", "--strict"])
            .output()
            .unwrap()
    };
    let out = bench(&schema);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let field = |name: &str| -> u64 {
        let at = text.find(&format!("\"{name}\":")).unwrap() + name.len() + 3;
        text[at..]
            .split([',', '}'])
            .next()
            .unwrap()
            .parse::<f64>()
            .unwrap() as u64
    };
    // The instance missing `name` is skipped; the other's tokens all pass.
    assert_eq!(
        (
            field("instances"),
            field("skipped"),
            field("refused_tokens")
        ),
        (1, 1, 0),
        "{text}"
    );
    let times = text.split("\"times_ns\":[").nth(1).unwrap();
    assert_eq!(
        times.trim_end_matches([']', '}', '\n']).split(',').count() as u64,
        field("masks"),
        "{text}"
    );
    assert!(field("masks") > 10, "{text}");
    let ipv6 = dir.join("ipv6.json");
    std::fs::write(&ipv6, r#"{"type":"string","format":"ipv6"}"#).unwrap();
    let out = bench(&ipv6);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ipv6.json: refused: 'schema': unsupported JSON schema keyword 'format'"),
        "{err}"
    );
}
