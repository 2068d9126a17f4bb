//! Inputs the fuzz campaigns kept, replayed forever: every file under
//! `tests/vectors/fuzz/TARGET/` (a minimised corpus of the campaign, and
//! any crasher) goes through `kestrel_tests::exercise::TARGET`, the very
//! function the cargo-fuzz target runs (fuzz/fuzz_targets/TARGET.rs), and
//! must return, never panic. A folder that is missing or empty fails: the
//! test cannot pass having run nothing. A new crasher is added by copying
//! `fuzz/artifacts/TARGET/crash-*` there (docs/reliability.md).

use kestrel_tests::exercise::TARGETS;
use std::path::PathBuf;

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("vectors/fuzz")
        .join(target);
    let rd = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut v: Vec<(PathBuf, Vec<u8>)> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "{}: no kept inputs", dir.display());
    v
}

#[test]
fn every_fuzz_target_has_kept_inputs_and_none_panics() {
    let mut total = 0;
    for (target, exercise) in TARGETS {
        let inputs = inputs(target);
        for (path, data) in &inputs {
            let run = std::panic::catch_unwind(|| exercise(data));
            assert!(run.is_ok(), "{target}: {} panicked", path.display());
        }
        println!("{target}: {} inputs", inputs.len());
        total += inputs.len();
    }
    println!("{total} inputs in all");
}

#[test]
fn every_fuzz_target_is_listed() {
    // The targets fuzz/Cargo.toml builds are the ones replayed here.
    let toml = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/Cargo.toml"),
    )
    .unwrap();
    let built: Vec<&str> = toml
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "kestrel-fuzz")
        .collect();
    let mut listed: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    let mut built_sorted = built.clone();
    built_sorted.sort();
    listed.sort();
    assert_eq!(built_sorted, listed);
}
