//! Structured output for `kestrel run --json-schema` and the server's
//! `response_format`: the vocabulary sorted by bytes (built once per model)
//! and what one constrained answer owns. The matching and the mask are the
//! core's (`kestrel_core::constrain`, `generate::Constraint`).

use crate::error::Result;
pub use kestrel_core::constrain::sorted::{JsonOutput, SortedVocab};
use kestrel_core::constrain::Schema;
use kestrel_core::json;
use std::path::Path;

/// A schema from a JSON text (a file's or a request's).
pub fn schema_from_json(text: &[u8]) -> Result<Schema> {
    let v = json::parse(text).map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(Schema::compile(&v).map_err(|e| e.to_string())?)
}

/// `--json-schema FILE`.
pub fn schema_from_file(path: &Path) -> Result<Schema> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    schema_from_json(&text).map_err(|e| format!("{}: {e}", path.display()).into())
}
