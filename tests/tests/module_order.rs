//! The core's modules depend one way: the order written in
//! docs/architecture/core.md (between the `module-order` markers, lowest
//! first, one module a line; the markers are looked for in
//! docs/architecture.md and every docs/architecture/*.md) is read here, and
//! every `crate::` and `super::` path in the core's sources (test modules
//! aside) must name a module of an earlier line or its own. A new module must be placed in the order; an import
//! against it fails with the file, the line and both modules named.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The architecture docs: docs/architecture.md (the index) and every
/// docs/architecture/*.md (one per subsystem), each as its path from the
/// repository root and its text.
fn architecture_docs() -> Vec<(String, String)> {
    let mut paths = vec![repo().join("docs/architecture.md")];
    let dir = repo().join("docs/architecture");
    let mut subsystems: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("docs/architecture/: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "md"))
        .collect();
    subsystems.sort();
    assert!(!subsystems.is_empty(), "docs/architecture/ has no .md file");
    paths.extend(subsystems);
    paths
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let rel = p
                .strip_prefix(repo())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, text)
        })
        .collect()
}

/// An order from the architecture docs (the block between `<!-- MARKER -->`
/// and `<!-- /MARKER -->`, in docs/architecture.md or whichever
/// docs/architecture/*.md holds it; exactly one may): module paths, lowest
/// first.
fn declared_order(marker: &str) -> Vec<String> {
    let open = format!("<!-- {marker} -->");
    let close = format!("<!-- /{marker} -->");
    let holders: Vec<(String, String)> = architecture_docs()
        .into_iter()
        .filter(|(_, text)| text.contains(&open))
        .collect();
    assert!(
        holders.len() <= 1,
        "more than one {open} block in docs/architecture.md and docs/architecture/*.md: {:?}",
        holders.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    let (path, doc) = holders.into_iter().next().unwrap_or_else(|| {
        panic!("neither docs/architecture.md nor docs/architecture/*.md has a {open} block")
    });
    let start = doc.find(&open).unwrap();
    assert!(
        !doc[start + open.len()..].contains(&open),
        "{path} has more than one {open} block"
    );
    let end = doc[start..]
        .find(&close)
        .unwrap_or_else(|| panic!("{path}: the {marker} block is not closed"))
        + start;
    let order: Vec<String> = doc[start..end]
        .lines()
        .skip(1)
        .map(|l| l.trim().trim_start_matches('`'))
        .filter(|l| !l.is_empty() && !l.starts_with("```") && !l.starts_with("<!--"))
        .map(|l| {
            l.split_whitespace()
                .next()
                .unwrap()
                .trim_end_matches('`')
                .to_string()
        })
        .collect();
    assert!(order.len() > 10, "module order too short: {order:?}");
    order
}

/// Every `.rs` file below `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file (`model/forward.rs` -> `model::forward`,
/// `vqf/mod.rs` -> `vqf`, `lib.rs` -> ``).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and without its test modules.
fn code(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in src.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        out.push((i + 1, code.to_string()));
    }
    out
}

fn ident_end(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
        i += 1;
    }
    i
}

/// The paths starting at byte `i` of `s` (just after `crate::` or
/// `super::`), with `{a, b::c}` groups expanded; each as its segments.
fn paths_at(s: &[u8], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut segs = prefix;
    loop {
        if i < s.len() && s[i] == b'{' {
            i += 1;
            loop {
                while i < s.len() && (s[i] == b' ' || s[i] == b',' || s[i] == b'\n') {
                    i += 1;
                }
                if i >= s.len() || s[i] == b'}' {
                    return i + 1;
                }
                i = paths_at(s, i, segs.clone(), out);
                // Skip `as name` and anything up to the next item.
                while i < s.len() && s[i] != b',' && s[i] != b'}' {
                    i += 1;
                }
            }
        }
        let end = ident_end(s, i);
        if end == i {
            out.push(segs);
            return i;
        }
        segs.push(String::from_utf8_lossy(&s[i..end]).into_owned());
        i = end;
        if s[i..].starts_with(b"::") {
            i += 2;
        } else {
            out.push(segs);
            return i;
        }
    }
}

/// The listed module a path belongs to: the longest listed prefix.
fn listed<'o>(order: &'o [String], segs: &[String]) -> Option<(usize, &'o str)> {
    order
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            let parts: Vec<&str> = m.split("::").collect();
            parts.len() <= segs.len() && parts.iter().zip(segs).all(|(a, b)| a == b)
        })
        .max_by_key(|(_, m)| m.len())
        .map(|(i, m)| (i, m.as_str()))
}

#[test]
fn core_modules_import_only_modules_below_them() {
    check_order("core/src", "module-order", &[("Error", "error")]);
}

#[test]
fn kernel_modules_import_only_modules_below_them() {
    check_order(
        "kernels-asm/src",
        "kernel-module-order",
        &[("ShapeError", "shape")],
    );
}

/// Every `crate::`/`super::` path in `dir`'s sources (test modules aside)
/// names a module of the order `marker` at or below its own;
/// `root_items` maps items re-exported at the crate root to their module.
fn check_order(dir: &str, marker: &str, root_items: &[(&str, &str)]) {
    let order = declared_order(marker);
    let src_dir = repo().join(dir);
    let mut files = Vec::new();
    sources(&src_dir, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut edges = 0;
    for file in &files {
        let rel = file.strip_prefix(&src_dir).unwrap();
        let module = module_of(rel);
        if module.is_empty() {
            continue; // lib.rs: declares the modules
        }
        let text = std::fs::read_to_string(file).unwrap();
        let namespace = order
            .iter()
            .any(|m| m.starts_with(&format!("{}::", module.join("::"))));
        if namespace && listed(&order, &module).is_none() {
            // A folder's mod.rs that only declares its listed submodules.
            if text.contains("crate::") || text.contains("super::") {
                wrong.push(format!(
                    "{}: namespace module {} imports: list it in the order",
                    rel.display(),
                    module.join("::")
                ));
            }
            continue;
        }
        let Some((rank, name)) = listed(&order, &module) else {
            wrong.push(format!(
                "{}: module {} is not in the {marker} block (docs/architecture/*.md)",
                rel.display(),
                module.join("::")
            ));
            continue;
        };
        for (line_no, segs) in imports(&module, &text) {
            // Items re-exported at the crate root.
            let root = root_items
                .iter()
                .find(|(item, _)| segs.first().is_some_and(|s| s == item));
            let segs = match root {
                Some((_, module)) => vec![module.to_string()],
                None => segs,
            };
            let Some((target_rank, target)) = listed(&order, &segs) else {
                wrong.push(format!(
                    "{}:{line_no}: {} names {}, which is not in the {marker} block",
                    rel.display(),
                    name,
                    segs.join("::")
                ));
                continue;
            };
            edges += 1;
            if target_rank > rank {
                wrong.push(format!(
                    "{}:{line_no}: {name} imports {target}, which comes after it in the order",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        edges > 50,
        "{dir}: too few imports found ({edges}): is the scanner broken?"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The `crate::` and `super::` paths of a source file of `module` (test
/// modules aside), each with its line number and as absolute segments.
fn imports(module: &[String], text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (line_no, line) in code(text) {
        let b = line.as_bytes();
        let mut at = 0;
        while at < b.len() {
            let rest = &line[at..];
            let (skip, base) = if rest.starts_with("crate::") {
                (7, Vec::new())
            } else if rest.starts_with("super::") {
                (7, module[..module.len().saturating_sub(1)].to_vec())
            } else {
                at += 1;
                continue;
            };
            // A word boundary before the keyword.
            if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
                at += 1;
                continue;
            }
            let mut paths = Vec::new();
            let mut base = base;
            let mut i = at + skip;
            // `super::super::`
            while line[i..].starts_with("super::") {
                base.pop();
                i += 7;
            }
            let end = paths_at(b, i, base, &mut paths);
            out.extend(paths.into_iter().map(|p| (line_no, p)));
            at = end.max(at + 1);
        }
    }
    out
}

/// The shell has no declared order, but its modules import one another
/// without a cycle (a command module owns its arguments; the command
/// table, `commands.rs`, imports the commands, never the reverse).
#[test]
fn shell_modules_import_without_a_cycle() {
    let src_dir = repo().join("shell/src");
    let mut files = Vec::new();
    sources(&src_dir, &mut files);
    files.sort();
    let mut modules: Vec<(String, String)> = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src_dir).unwrap();
        // The binaries (main.rs, bin/) use the library by its name.
        if rel.starts_with("bin") || rel == Path::new("main.rs") {
            continue;
        }
        let module = module_of(rel);
        if module.is_empty() {
            continue; // lib.rs: declares the modules
        }
        modules.push((module.join("::"), std::fs::read_to_string(file).unwrap()));
    }
    let names: Vec<&str> = modules.iter().map(|(m, _)| m.as_str()).collect();
    // The module a path lands in: its longest prefix that is a module.
    let target = |segs: &[String]| {
        (1..=segs.len())
            .rev()
            .find_map(|k| names.iter().position(|n| *n == segs[..k].join("::")))
    };
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); names.len()];
    let mut count = 0;
    for (i, (module, text)) in modules.iter().enumerate() {
        let module: Vec<String> = module.split("::").map(String::from).collect();
        for (_, segs) in imports(&module, text) {
            if let Some(t) = target(&segs).filter(|&t| t != i) {
                if !edges[i].contains(&t) {
                    edges[i].push(t);
                    count += 1;
                }
            }
        }
    }
    assert!(
        count > 30,
        "too few imports found ({count}): is the scanner broken?"
    );
    // Depth-first search; a back edge closes a cycle, printed in full.
    fn visit(
        v: usize,
        edges: &[Vec<usize>],
        state: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        state[v] = 1;
        stack.push(v);
        for &w in &edges[v] {
            if state[w] == 1 {
                let at = stack.iter().position(|&x| x == w).unwrap();
                return Some(stack[at..].to_vec());
            }
            if state[w] == 0 {
                if let Some(c) = visit(w, edges, state, stack) {
                    return Some(c);
                }
            }
        }
        stack.pop();
        state[v] = 2;
        None
    }
    let mut state = vec![0u8; names.len()];
    for v in 0..names.len() {
        if state[v] == 0 {
            if let Some(cycle) = visit(v, &edges, &mut state, &mut Vec::new()) {
                let path: Vec<&str> = cycle.iter().map(|&i| names[i]).collect();
                panic!("shell import cycle: {} -> {}", path.join(" -> "), path[0]);
            }
        }
    }
}

/// The scanner finds grouped, nested and `super` imports, so the test
/// above cannot pass by seeing nothing.
#[test]
fn the_scanner_sees_imports() {
    let mut out = Vec::new();
    let s = b"{model::{forward, weights::Weights}, state as st}; x";
    paths_at(s, 0, Vec::new(), &mut out);
    let joined: Vec<String> = out.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        joined,
        ["model::forward", "model::weights::Weights", "state"],
        "{joined:?}"
    );
    let order: Vec<String> = ["state", "model::forward", "model::weights"]
        .map(String::from)
        .to_vec();
    let segs: Vec<String> = ["model", "weights", "Weights"].map(String::from).to_vec();
    assert_eq!(listed(&order, &segs), Some((2, "model::weights")));
    assert_eq!(listed(&order, &["model".to_string()]), None);
    assert_eq!(
        module_of(Path::new("model/forward.rs")),
        ["model", "forward"]
    );
    assert_eq!(module_of(Path::new("vqf/mod.rs")), ["vqf"]);
}

/// The "Source files" blocks of the architecture docs (docs/architecture.md
/// and docs/architecture/*.md, one block per subsystem) list every Rust
/// source file of the repository, each once, and only files that exist.
#[test]
fn the_architecture_doc_lists_every_source_file() {
    let docs = architecture_docs();
    let open = "<!-- source-files -->";
    let close = "<!-- /source-files -->";
    // (listed path, the doc that lists it)
    let mut listed: Vec<(&str, &str)> = Vec::new();
    let mut blocks = 0;
    for (path, doc) in &docs {
        let mut rest = doc.as_str();
        while let Some(start) = rest.find(open) {
            let end = rest[start..]
                .find(close)
                .unwrap_or_else(|| panic!("{path}: a source-files block is not closed"))
                + start;
            let block = &rest[start + open.len()..end];
            assert!(
                !block.contains(open),
                "{path}: a source-files block opens inside another"
            );
            listed.extend(
                block
                    .lines()
                    .filter_map(|l| l.split_whitespace().next())
                    .filter(|w| w.ends_with(".rs"))
                    .map(|w| (w, path.as_str())),
            );
            blocks += 1;
            rest = &rest[end + close.len()..];
        }
    }
    assert!(
        blocks > 0,
        "neither docs/architecture.md nor docs/architecture/*.md has a {open} block"
    );
    assert!(listed.len() > 100, "too few files listed: {}", listed.len());
    let mut wrong: Vec<String> = listed
        .iter()
        .filter(|(p, _)| !repo().join(p).is_file())
        .map(|(p, doc)| format!("{p}: listed in {doc} but not in the repository"))
        .collect();
    for (i, (p, doc)) in listed.iter().enumerate() {
        if let Some((_, first)) = listed[..i].iter().find(|(q, _)| q == p) {
            wrong.push(format!("{p}: listed twice (in {first} and in {doc})"));
        }
    }
    for dir in [
        "core/src",
        "kernels-asm/src",
        "shell/src",
        "pool/src",
        "capi/src",
        "tests/src",
        "tests/tests",
        "tests/firmware-host/src",
        "fuzz/fuzz_targets",
    ] {
        let mut files = Vec::new();
        sources(&repo().join(dir), &mut files);
        for f in files {
            let rel = f
                .strip_prefix(repo())
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let rel = rel.trim_start_matches("./").to_string();
            if !listed.iter().any(|(p, _)| *p == rel) {
                wrong.push(format!(
                    "{rel}: not listed in the Source files of docs/architecture/*.md"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The shipped binary is built with `-Z fmt-debug=none`
/// (scripts/build-shipped.sh): `{:?}` writes nothing there, so no text a
/// user reads may come from `Debug`. A `{...:?}` format spec in the code of
/// the crates it links (test modules and files, assertions and panics
/// aside) fails here with its file and line: write it with `Display`
/// (`kestrel::error::quoted` for a string, `listed` for numbers).
#[test]
fn shipped_code_formats_nothing_with_debug() {
    let mut found = Vec::new();
    for dir in ["core/src", "shell/src", "kernels-asm/src", "pool/src"] {
        let mut files = Vec::new();
        sources(&repo().join(dir), &mut files);
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.contains("tests") {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            for (n, line) in code(&text) {
                let checks = ["assert", "panic!", "unreachable!", "expect("];
                if checks.iter().any(|c| line.contains(c)) {
                    continue;
                }
                // A `{`, then a spec without braces that ends in `?}`.
                let debug = line.match_indices("?}").any(|(at, _)| {
                    let spec = &line[..at];
                    spec.rfind('{').is_some_and(|open| {
                        let inner = &spec[open + 1..];
                        !inner.contains('}') && inner.contains(':')
                    })
                });
                if debug {
                    found.push(format!("{}:{n}: {}", f.display(), line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Debug formatting in shipped code:\n{}",
        found.join("\n")
    );
}
