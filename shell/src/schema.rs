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

use crate::cli::{switch, CommandArgs};
use crate::error::Result;
use clap::{value_parser, Arg, ArgMatches, Command};
use kestrel_core::constrain::{Matcher, Schema};
use kestrel_core::json::{self, write_json_str};
use std::fmt::Write as _;
use std::path::PathBuf;

/// `kestrel schema check`'s arguments.
#[derive(Debug)]
pub struct SchemaCheckArgs {
    /// The JSON Schema file.
    pub schema: PathBuf,
    /// The JSON instance files to walk through the constraint.
    pub instances: Vec<PathBuf>,
    /// Compile as `strict: true`: refuse what the constraint cannot enforce.
    pub strict: bool,
    /// Print one JSON object.
    pub json: bool,
}

impl CommandArgs for SchemaCheckArgs {
    fn command() -> Command {
        Command::new("schema")
            .about("Check a JSON Schema against the structured-output constraint.")
            .subcommand_required(true)
            .subcommand(
                Command::new("check")
                    .about("Compile SCHEMA as a request would (refused, or accepted with the keywords left out), then walk each INSTANCE through the constraint.")
                    .args([
                        Arg::new("schema")
                            .value_name("SCHEMA")
                            .required(true)
                            .value_parser(value_parser!(PathBuf))
                            .help("The JSON Schema file."),
                        Arg::new("instances")
                            .value_name("INSTANCE")
                            .num_args(0..)
                            .value_parser(value_parser!(PathBuf))
                            .help("JSON files to check against the constraint."),
                        switch("strict", "Compile as strict: true (refuse any keyword the constraint cannot enforce)."),
                        switch("json", "Print one JSON object: compiled, error, dropped, instances."),
                    ]),
            )
    }

    fn from_matches(m: &ArgMatches) -> Self {
        let m = m.subcommand_matches("check").unwrap_or(m);
        SchemaCheckArgs {
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

/// Runs `kestrel schema check`.
#[inline(never)]
pub fn check(a: &SchemaCheckArgs) -> Result<()> {
    let read = |p: &PathBuf| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let text = read(&a.schema)?;
    let v = json::parse(&text).map_err(|e| format!("{}: invalid JSON: {e}", a.schema.display()))?;
    let compiled = if a.strict {
        Schema::compile(&v)
    } else {
        Schema::compile_lenient(&v)
    };
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
    let written = bytes.trim_ascii();
    if run(s, written).is_ok() {
        return verdict(true, None, String::new());
    }
    match run(s, &compact(written)) {
        Ok(()) => verdict(true, None, String::new()),
        Err((offset, expected)) => verdict(false, Some(offset), expected),
    }
}

/// Feeds `text` to a fresh matcher: `Err((offset, expected))` at the first
/// byte it refuses (offset `text.len()` when the text ends too early), with
/// the bytes it would have taken there.
fn run(s: &Schema, text: &[u8]) -> std::result::Result<(), (usize, String)> {
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
