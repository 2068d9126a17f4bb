//! `kestrel schema check SCHEMA [INSTANCE ...] [--strict] [--json]`: a
//! schema compiled as a request compiles it (the same compiler as the
//! server's `response_format` and `run --json-schema`): refused with the
//! path of what is refused, or accepted with the keywords a best-effort
//! compile leaves out; then each instance file's JSON text walked through
//! the constraint byte by byte, as written (surrounding whitespace
//! trimmed) and, when that fails, with the whitespace outside strings
//! taken out (the form the constraint writes): accepted, or rejected at a
//! byte of that compact form with the bytes the constraint would have
//! taken there. Exit 0 whenever it ran.
//!
//! `kestrel schema bench SCHEMA --model FILE INSTANCE ... [--json]`: each
//! instance's text (the form `check` accepts) tokenized with the model's
//! tokenizer, then at every token the generator's whole-vocabulary mask
//! (`generate::Constraint::mask`) timed on this thread, and the token
//! checked to be in it; prints the p50/p90/p99 microseconds.

use crate::cli::{switch, CommandArgs};
use crate::error::Result;
use clap::{value_parser, Arg, ArgMatches, Command};
use kestrel_core::constrain::{Matcher, Schema, MAX_TOKEN_BYTES};
use kestrel_core::generate::{Constraint, MaskCache, Progress, StopSet, MASK_CACHE};
use kestrel_core::json::{self, write_json_str};
use std::fmt::Write as _;
use std::path::PathBuf;

/// `kestrel schema check` and `kestrel schema bench`'s arguments.
#[derive(Debug)]
pub struct SchemaArgs {
    /// `bench`: the model whose vocabulary the mask covers; `None`: `check`.
    pub model: Option<PathBuf>,
    /// The JSON Schema file.
    pub schema: PathBuf,
    /// The JSON instance files to walk through the constraint.
    pub instances: Vec<PathBuf>,
    /// Compile as `strict: true`: refuse what the constraint cannot enforce.
    pub strict: bool,
    /// Print one JSON object.
    pub json: bool,
}

impl CommandArgs for SchemaArgs {
    fn command() -> Command {
        // `check` and `bench` take the same SCHEMA, INSTANCE list, `--strict`
        // and `--json`; `bench` needs the instances and a model.
        let sub = |name: &'static str, about: &'static str, bench: bool| {
            let mut c = Command::new(name).about(about).args([
                Arg::new("schema")
                    .value_name("SCHEMA")
                    .required(true)
                    .value_parser(value_parser!(PathBuf))
                    .help("The JSON Schema file."),
                Arg::new("instances")
                    .value_name("INSTANCE")
                    .num_args(if bench { 1.. } else { 0.. })
                    .required(bench)
                    .value_parser(value_parser!(PathBuf))
                    .help("JSON instance files."),
                switch(
                    "strict",
                    "Compile as strict: true (refuse any keyword the constraint cannot enforce).",
                ),
                switch("json", "Print one JSON object."),
            ]);
            if bench {
                c = c.arg(
                    Arg::new("model")
                        .long("model")
                        .value_name("FILE")
                        .required(true)
                        .value_parser(value_parser!(PathBuf))
                        .help("The VQF model whose vocabulary the mask covers."),
                );
            }
            c
        };
        Command::new("schema")
            .about("Check a JSON Schema against the constraint, or time its mask.")
            .subcommand_required(true)
            .subcommand(sub("check", "Compile SCHEMA as a request would, then walk each INSTANCE through the constraint.", false))
            .subcommand(sub("bench", "Time the token mask at every token of each INSTANCE (one thread): p50/p90/p99 us.", true))
    }

    fn from_matches(m: &ArgMatches) -> Self {
        let (name, m) = m.subcommand().unwrap_or(("check", m));
        SchemaArgs {
            model: (name == "bench").then(|| crate::cli::get(m, "model")),
            schema: crate::cli::get(m, "schema"),
            instances: crate::cli::all(m, "instances"),
            strict: m.get_flag("strict"),
            json: m.get_flag("json"),
        }
    }
}

/// One instance's verdict: accepted, or rejected at `offset` of its
/// compact form (`None`: the file is not JSON: `expected` says why), with
/// what was expected there.
struct Verdict {
    accepted: bool,
    offset: Option<usize>,
    expected: String,
}

fn read(p: &PathBuf) -> Result<Vec<u8>> {
    Ok(std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?)
}

/// Runs `kestrel schema check` or `kestrel schema bench`.
#[inline(never)]
pub fn run(a: &SchemaArgs) -> Result<()> {
    let text = read(&a.schema)?;
    let v = json::parse(&text).map_err(|e| format!("{}: invalid JSON: {e}", a.schema.display()))?;
    let compiled = if a.strict {
        Schema::compile(&v)
    } else {
        Schema::compile_lenient(&v)
    };
    if let Some(model) = &a.model {
        let s = compiled.map_err(|e| {
            let why = crate::serve::api::schema_error("schema", &v, &e);
            format!("{}: refused: {why}", a.schema.display())
        })?;
        return crate::engine::with_tokenizer(model, |tok, cfg| bench(a, &s, tok, cfg));
    }
    let (schema, error, dropped) = match compiled {
        Ok(s) => {
            let dropped = crate::serve::api::dropped_paths(&s, "schema", &v);
            (Some(s), None, dropped)
        }
        Err(e) => (
            None,
            Some(crate::serve::api::schema_error("schema", &v, &e)),
            Vec::new(),
        ),
    };
    let mut verdicts = Vec::new();
    if let Some(s) = &schema {
        for path in &a.instances {
            verdicts.push((path, walk(s, &read(path)?)));
        }
    }
    let out = if a.json {
        report_json(error.as_deref(), &dropped, &verdicts)
    } else {
        report_text(error.as_deref(), &dropped, &verdicts)
    };
    println!("{out}");
    Ok(())
}

/// The text report: the schema's line, then one line per instance.
fn report_text(
    error: Option<&str>,
    dropped: &[String],
    verdicts: &[(&PathBuf, Verdict)],
) -> String {
    let mut o = String::new();
    match error {
        Some(e) => {
            o.push_str("refused: ");
            o.push_str(e);
        }
        None => {
            o.push_str("accepted");
            if !dropped.is_empty() {
                o.push_str(", not enforced: ");
                o.push_str(&dropped.join(", "));
            }
        }
    }
    for (path, v) in verdicts {
        let _ = write!(o, "\n{}: ", path.display());
        match (v.accepted, v.offset) {
            (true, _) => o.push_str("accepted"),
            (false, Some(n)) => {
                let _ = write!(
                    o,
                    "rejected at byte {n} of its compact form (expected {})",
                    v.expected
                );
            }
            (false, None) => {
                o.push_str("rejected: ");
                o.push_str(&v.expected);
            }
        }
    }
    o
}

/// Walks an instance's text through the constraint: as written (trimmed),
/// then compact.
fn walk(s: &Schema, bytes: &[u8]) -> Verdict {
    let verdict = |accepted, offset, expected| Verdict {
        accepted,
        offset,
        expected,
    };
    if let Err(e) = json::parse(bytes) {
        return verdict(false, None, format!("not JSON: {e}"));
    }
    if accepted_form(s, bytes).is_some() {
        return verdict(true, None, String::new());
    }
    match feed(s, &compact(bytes.trim_ascii())) {
        Ok(()) => verdict(true, None, String::new()),
        Err((offset, expected)) => verdict(false, Some(offset), expected),
    }
}

/// Feeds `text` to a fresh matcher: `Err((offset, expected))` at the first
/// byte it refuses (offset `text.len()` when the text ends too early), with
/// the bytes it would have taken there.
fn feed(s: &Schema, text: &[u8]) -> std::result::Result<(), (usize, String)> {
    let mut m = Matcher::new(s);
    let mut scratch = Matcher::new(s);
    let mut i = 0;
    while i < text.len() && m.advance(s, text[i]) {
        i += 1;
    }
    if i == text.len() && m.can_end(s) {
        return Ok(());
    }
    // Replay the accepted bytes for the state before the refused one.
    let mut before = Matcher::new(s);
    for &b in &text[..i] {
        before.advance(s, b);
    }
    Err((i, expected(s, &before, &mut scratch)))
}

/// The form of an instance the constraint takes: as written (trimmed), or
/// compact; `None` when it takes neither.
fn accepted_form(s: &Schema, bytes: &[u8]) -> Option<Vec<u8>> {
    let written = bytes.trim_ascii();
    if feed(s, written).is_ok() {
        return Some(written.to_vec());
    }
    let compact = compact(written);
    feed(s, &compact).is_ok().then_some(compact)
}

/// Runs `kestrel schema bench` on the model's tokenizer: every mask timed.
fn bench(
    a: &SchemaArgs,
    s: &Schema,
    tok: &kestrel_core::tokenizer::Tokenizer,
    cfg: &kestrel_core::config::Config,
) -> Result<()> {
    let vocab = cfg.vocab_size as usize;
    let sorted = crate::json_output::SortedVocab::new(tok, vocab);
    let view = sorted.view();
    let stops = StopSet::new(cfg, Some(tok));
    let mut states = vec![Matcher::new(s); MAX_TOKEN_BYTES + 1];
    let mut bits = vec![0u64; vocab.div_ceil(64) * (MASK_CACHE + 1)];
    // Nanoseconds of each mask; instances the constraint does not take;
    // tokens of an instance the mask left out (a disagreement between the
    // mask and the matcher: must stay 0).
    let (mut times, mut skipped, mut refused, mut hits) = (Vec::new(), 0usize, 0usize, 0usize);
    for path in &a.instances {
        let Some(text) = accepted_form(s, &read(path)?) else {
            skipped += 1;
            continue;
        };
        let text = String::from_utf8(text).map_err(|_| format!("{}: not UTF-8", path.display()))?;
        let ids = crate::generate::encode(tok, &text)?;
        // A fresh answer: its own progress and cache.
        let mut progress = Progress::new(s);
        let mut cache = MaskCache::new(s);
        let mut c = Constraint {
            schema: s,
            vocab: &view,
            progress: &mut progress,
            states: &mut states,
            bits: &mut bits,
            cache: &mut cache,
        };
        // One mask per token, and one after the last (where the end is taken).
        for i in 0..=ids.len() {
            let start = std::time::Instant::now();
            c.mask(vocab, &stops);
            times.push(start.elapsed().as_nanos() as u64);
            let next = ids.get(i).copied().or(stops.ids().first().copied());
            let Some(id) = next else { break };
            if c.bits
                .get(id as usize / 64)
                .is_none_or(|w| w >> (id % 64) & 1 == 0)
            {
                refused += 1;
                break;
            }
            c.accept(id);
        }
        hits += cache.hits;
    }
    if times.is_empty() {
        return Err(format!("{}: no instance the constraint takes", a.schema.display()).into());
    }
    kestrel_core::sort::sort_by(&mut times, |a, b| a.cmp(b));
    let instances = a.instances.len() - skipped;
    let n = times.len();
    let mut o = String::new();
    let _ = if a.json {
        write!(o, "{{\"masks\":{n},\"instances\":{instances},\"skipped\":{skipped},\"refused_tokens\":{refused},\"cached\":{hits},\"vocab\":{vocab}")
    } else {
        write!(o, "{n} masks of {vocab} tokens, {instances} instances ({skipped} skipped, {hits} cached, {refused} tokens outside their mask):")
    };
    for (name, p) in [("p50", 50), ("p90", 90), ("p99", 99), ("max", 100)] {
        let us = times[(n * p).div_ceil(100).max(1) - 1] as f64 / 1e3;
        let _ = if a.json {
            write!(o, ",\"{name}_us\":{us:.1}")
        } else {
            write!(o, " {name} {us:.1} us")
        };
    }
    if a.json {
        // Every time, in nanoseconds, ascending.
        o.push_str(",\"times_ns\":[");
        for (i, t) in times.iter().enumerate() {
            let _ = write!(o, "{}{t}", if i > 0 { "," } else { "" });
        }
        o.push_str("]}");
    }
    println!("{o}");
    Ok(())
}

/// The bytes the constraint takes after `m`, as printable ranges (`"0"-"9"`,
/// `"\""`, `0x80-0xbf`), or "the end" when none.
fn expected(s: &Schema, m: &Matcher, scratch: &mut Matcher) -> String {
    let mut out = String::new();
    let mut b = 0usize;
    while b < 256 {
        if !m.accepts(s, &[b as u8], scratch) {
            b += 1;
            continue;
        }
        let start = b;
        while b + 1 < 256 && m.accepts(s, &[b as u8 + 1], scratch) {
            b += 1;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        push_byte(&mut out, start as u8);
        if b > start {
            out.push('-');
            push_byte(&mut out, b as u8);
        }
        b += 1;
    }
    if out.is_empty() {
        out.push_str("the end");
    }
    out
}

/// A byte as `'c'` when printable ASCII, else `0xNN`.
fn push_byte(out: &mut String, b: u8) {
    if b.is_ascii_graphic() || b == b' ' {
        let _ = write!(out, "'{}'", b as char);
    } else {
        let _ = write!(out, "0x{b:02x}");
    }
}

/// The JSON text without whitespace outside strings.
fn compact(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

/// `--json`: `{"compiled", "error", "dropped", "instances": [{"file",
/// "accepted", "offset"}]}`.
fn report_json(
    error: Option<&str>,
    dropped: &[String],
    verdicts: &[(&PathBuf, Verdict)],
) -> String {
    let mut o = String::new();
    let _ = write!(o, "{{\"compiled\":{},\"error\":", error.is_none());
    match error {
        Some(e) => {
            let _ = write_json_str(&mut o, e);
        }
        None => o.push_str("null"),
    }
    o.push_str(",\"dropped\":[");
    for (i, d) in dropped.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let _ = write_json_str(&mut o, d);
    }
    o.push_str("],\"instances\":[");
    for (i, (path, v)) in verdicts.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str("{\"file\":");
        let _ = write_json_str(&mut o, &path.display().to_string());
        let _ = write!(o, ",\"accepted\":{},\"offset\":", v.accepted);
        match v.offset {
            Some(n) => {
                let _ = write!(o, "{n}");
            }
            None => o.push_str("null"),
        }
        o.push('}');
    }
    o.push_str("]}");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(text: &str) -> Schema {
        Schema::compile(&json::parse(text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn instances_are_walked_as_written_then_compact() {
        let s = schema(
            r#"{"type":"object","properties":{"n":{"type":"integer","maximum":5}},"required":["n"],"additionalProperties":false}"#,
        );
        let ok = walk(&s, b"{\"n\": 3}\n");
        assert!(ok.accepted);
        let pretty = walk(&s, b"{\n            \"n\":\n                    3\n}");
        assert!(pretty.accepted, "the compact form is accepted");
        let over = walk(&s, br#"{"n":7}"#);
        assert_eq!((over.accepted, over.offset), (false, Some(5)));
        assert!(over.expected.contains("'0'-'5'"), "{}", over.expected);
        let short = walk(&s, br#"{}"#);
        assert_eq!((short.accepted, short.offset), (false, Some(1)));
        let not_json = walk(&s, b"{\"n\":");
        assert_eq!((not_json.accepted, not_json.offset), (false, None));
    }

    #[test]
    fn compact_keeps_strings_whole() {
        assert_eq!(
            compact(br#"{ "a b" : [ 1 , "\" x" ] }"#),
            br#"{"a b":[1,"\" x"]}"#
        );
    }

    #[test]
    fn the_json_report_has_every_field() {
        let p = PathBuf::from("a \"q\".json");
        let v = Verdict {
            accepted: false,
            offset: Some(3),
            expected: String::new(),
        };
        let r = report_json(None, &["schema.format".into()], &[(&p, v)]);
        assert_eq!(
            r,
            r#"{"compiled":true,"error":null,"dropped":["schema.format"],"instances":[{"file":"a \"q\".json","accepted":false,"offset":3}]}"#
        );
        let r = report_json(Some("'schema': x"), &[], &[]);
        assert_eq!(
            r,
            r#"{"compiled":false,"error":"'schema': x","dropped":[],"instances":[]}"#
        );
    }
}
