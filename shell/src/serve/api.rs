//! The OpenAI request bodies `kestrel serve` accepts, parsed with the core's
//! strict JSON reader (`kestrel_core::json`), and the JSON it answers with,
//! written by hand. [`parse_chat`] and [`parse_completion`] are pure
//! functions over bytes (fuzzed): any input gives a request or a message
//! for a 400 answer.

use super::scheduler::MAX_TOP_LOGPROBS;
use crate::error::{Context, Result};
use crate::generate::ChatText;
use kestrel_core::chat::Role;
use kestrel_core::json::{self, Value};
use kestrel_core::sampler::{LogitBias, SamplerConfig, MAX_LOGIT_BIAS};
use std::fmt::Write;

/// Most messages in one chat request.
pub const MAX_MESSAGES: usize = 1024;
/// Most images in one chat request.
pub const MAX_IMAGES: usize = 16;
/// Most stop strings (OpenAI allows 4).
pub const MAX_STOPS: usize = 4;

/// Generation settings common to both endpoints. Defaults are `kestrel
/// run`'s, so a request and `kestrel run` with the same settings give the
/// same text.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `max_tokens` or `max_completion_tokens` (None: until the context is full).
    pub max_tokens: Option<usize>,
    pub sampler: SamplerConfig,
    pub stop: Vec<String>,
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// Log-probabilities asked for, with this many alternatives per token
    /// (chat: `logprobs: true` and `top_logprobs`; completions: `logprobs: N`).
    pub logprobs: Option<usize>,
    /// `response_format`: JSON output, any object (`json_object`) or valid
    /// under a schema (`json_schema`, its text; compiled when parsed).
    pub json: Option<JsonFormat>,
    /// `prediction` (OpenAI's predicted outputs): text the answer is
    /// expected to resemble, drafted from (empty: plain decoding).
    pub prediction: String,
    /// `logit_bias`: (token id, bias in -100 ..= 100) added to the token's
    /// logit before each sampling (ids checked against the vocabulary when
    /// the request is admitted).
    pub logit_bias: Vec<(u32, f32)>,
    /// A best-effort `response_format` schema's keywords the constraint
    /// leaves out, by path (`response_format.json_schema.schema.properties.
    /// s.pattern`): the answer says them (`dropped_keywords`).
    pub dropped: Vec<String>,
}

/// The JSON `response_format`s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonFormat {
    Object,
    /// The schema's JSON text, and whether it is `strict` (a keyword the
    /// constraint cannot enforce was refused; else it is left out).
    Schema(String, bool),
    /// A tool call: each function it may call, with its parameters' JSON
    /// text (`{"type":"object"}` where the constraint cannot follow them).
    Call(Vec<(String, String)>),
}

impl JsonFormat {
    /// The compiled schema.
    pub fn schema(&self) -> Result<kestrel_core::constrain::Schema> {
        match self {
            JsonFormat::Object => Ok(kestrel_core::constrain::Schema::any_object()),
            JsonFormat::Schema(text, strict) => {
                let v = json::parse(text.as_bytes()).map_err(|e| format!("invalid JSON: {e}"))?;
                // Only `json_schema`'s can be strict (and a keyword refused).
                let (compiled, at) = match strict {
                    true => (
                        kestrel_core::constrain::Schema::compile(&v),
                        "response_format.json_schema.schema",
                    ),
                    false => (
                        kestrel_core::constrain::Schema::compile_lenient(&v),
                        "response_format",
                    ),
                };
                compiled.map_err(|e| schema_error(at, &v, &e).into())
            }
            JsonFormat::Call(functions) => {
                let mut parsed = Vec::with_capacity(functions.len());
                for (name, params) in functions {
                    let p = json::parse(params.as_bytes())
                        .map_err(|e| format!("tool parameters: {e}"))?;
                    parsed.push((name.as_str(), p));
                }
                // Too much for the tables together is a 400, never calls
                // without their constraint.
                kestrel_core::constrain::Schema::compile_call(&parsed).map_err(|e| {
                    format!(
                        "the tools' parameters, as one tool-call constraint: {e} (offer fewer functions or smaller parameters)"
                    )
                    .into()
                })
            }
        }
    }
}

/// `response_format`: `text`, `json_object`, or `json_schema` with a
/// schema the constraint supports (else a 400 naming what it does not);
/// with the keywords a best-effort schema leaves out, by path.
fn response_format(v: &Value) -> Result<(Option<JsonFormat>, Vec<String>)> {
    let Some(f) = v.get("response_format").filter(|f| !f.is_null()) else {
        return Ok((None, Vec::new()));
    };
    // The schema and where it stands, for the left-out keywords' paths.
    let mut place = None;
    if f.as_object().is_none() {
        return Err("'response_format' must be an object".into());
    }
    let kind = f.get("type").ok_or("'response_format' needs a 'type'")?;
    let at = "response_format.";
    let format = if kind.str_eq("text") {
        check_fields_at(&f, at, &[("type", Used)], &[])?;
        return Ok((None, Vec::new()));
    } else if kind.str_eq("json_object") {
        // A schema beside it (llama-server's extension) is enforced too.
        check_fields_at(&f, at, &[("type", Used), ("schema", Used)], &[])?;
        match f.get("schema").filter(|s| !s.is_null()) {
            None => JsonFormat::Object,
            Some(s) => {
                let schema = s
                    .as_object()
                    .ok_or("'response_format.schema' must be an object")?;
                place = Some(("response_format.schema", s));
                JsonFormat::Schema(schema.raw().to_string(), false)
            }
        }
    } else if kind.str_eq("json_schema") {
        check_fields_at(&f, at, &[("type", Used), ("json_schema", Used)], &[])?;
        let j = f
            .get("json_schema")
            .filter(|j| j.as_object().is_some())
            .ok_or("'response_format.json_schema' must be an object")?;
        // OpenAI's rule: `strict: true` makes a keyword the constraint
        // cannot enforce a 400 (below); without it that keyword is left
        // out and the rest enforced.
        let fields = [
            ("name", Unused),
            ("description", Unused),
            ("strict", Used),
            ("schema", Used),
        ];
        check_fields_at(&j, "response_format.json_schema.", &fields, &[])?;
        let schema = j
            .get("schema")
            .and_then(|s| s.as_object())
            .ok_or("'response_format.json_schema.schema' must be an object")?;
        let strict = match j.get("strict") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err("'response_format.json_schema.strict' must be a boolean".into()),
        };
        if !strict {
            place = j
                .get("schema")
                .map(|s| ("response_format.json_schema.schema", s));
        }
        JsonFormat::Schema(schema.raw().to_string(), strict)
    } else {
        return Err("'response_format.type' must be text, json_object or json_schema".into());
    };
    let compiled = format.schema()?;
    let dropped = place.map_or_else(Vec::new, |(at, schema)| {
        dropped_paths(&compiled, at, &schema)
    });
    Ok((Some(format), dropped))
}

/// Most tools in one chat request.
pub const MAX_TOOLS: usize = 64;
/// Most calls in one assistant message.
pub const MAX_TOOL_CALLS: usize = 16;

/// One turn of a chat request.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    /// The text; multi-part text contents joined (data: never control
    /// tokens).
    pub content: String,
    /// An assistant turn's calls: (function name, arguments as JSON text).
    pub tool_calls: Vec<(String, String)>,
    /// Where each of its images stood among the parts: byte offsets into
    /// `content`.
    pub images: Vec<usize>,
}

/// `tool_choice`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// No call: the tools are left out of the prompt.
    None,
    /// The model decides.
    Auto,
    /// The answer starts with a call.
    Required,
    /// The answer starts with a call of this function.
    Function(String),
}

/// A parsed `/v1/chat/completions` body.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    /// Each tool's JSON object as the request gave it (checked: a function
    /// with a name), and the functions' names.
    pub tools: Vec<(String, String)>,
    pub tool_choice: ToolChoice,
    /// `parallel_tool_calls` (default true): several calls in one answer;
    /// `false` ends the answer after its first call.
    pub parallel_tool_calls: bool,
    /// The decoded bytes of every `image_url` data URI, in order; each
    /// stands at an offset of its message's `images` (the prompt writes
    /// `<|vision_start|><|image_pad|><|vision_end|>` there). A model
    /// without a vision tower answers 400.
    pub images: Vec<Vec<u8>>,
    pub params: Params,
}

impl ChatRequest {
    /// The chat-formatted prompt in `style`: the messages with their calls
    /// and, unless `tool_choice` is `none`, the tools (a forced call's
    /// start is the caller's).
    pub fn prompt(&self, style: &kestrel_core::chat::ChatStyle) -> Result<ChatText> {
        use kestrel_core::chat::{self, Message, ToolCall};
        // The JSON texts were checked when parsed; parsed again to borrow.
        let bad = |what: &str| format!("invalid JSON in {what}");
        let offered = self.tool_choice != ToolChoice::None;
        // Plain loops (a `collect` into a `Result` is code per element
        // type).
        let mut tools: Vec<Value> = Vec::new();
        for (t, _) in self.tools.iter().filter(|_| offered) {
            tools.push(json::parse(t.as_bytes()).map_err(|_| bad("a tool"))?);
        }
        let mut calls: Vec<Vec<ToolCall>> = Vec::with_capacity(self.messages.len());
        for m in &self.messages {
            let mut turn = Vec::with_capacity(m.tool_calls.len());
            for (name, args) in &m.tool_calls {
                let arguments =
                    json::parse(args.as_bytes()).map_err(|_| bad("tool call arguments"))?;
                turn.push(ToolCall { name, arguments });
            }
            calls.push(turn);
        }
        let msgs: Vec<Message> = self
            .messages
            .iter()
            .zip(&calls)
            .map(|(m, c)| Message {
                role: m.role,
                content: &m.content,
                tool_calls: c,
                images: &m.images,
            })
            .collect();
        let mut text = ChatText::default();
        chat::format(style, &msgs, &tools, true, None, &mut text)
            .map_err(|_| "the prompt could not be written")?;
        Ok(text)
    }
}

impl ChatRequest {
    /// For `tool_choice` `required` or a named function: the constraint
    /// the call's JSON follows, `{"name": one of the functions,
    /// "arguments": that function's parameters}` (a union keyed on the
    /// name). A keyword the constraint cannot enforce (`pattern`,
    /// `format`, ...) is left out, the rest of the parameters enforced
    /// (`strict: true` refused it when the request was read).
    pub fn call_schema(&self) -> Option<JsonFormat> {
        let names: Vec<&str> = match &self.tool_choice {
            ToolChoice::Required => self.tools.iter().map(|(_, n)| n.as_str()).collect(),
            ToolChoice::Function(f) => vec![f.as_str()],
            _ => return None,
        };
        Some(self.call_format(&names))
    }

    /// For `tool_choice` `auto` with tools: the constraint a call follows
    /// once the model opens one (`<tool_call>`), the union of every
    /// offered function, as [`ChatRequest::call_schema`]'s.
    pub fn auto_call_schema(&self) -> Option<JsonFormat> {
        if self.tool_choice != ToolChoice::Auto || self.tools.is_empty() {
            return None;
        }
        let names: Vec<&str> = self.tools.iter().map(|(_, n)| n.as_str()).collect();
        Some(self.call_format(&names))
    }

    /// `{"name": one of `names`, "arguments": that function's parameters}`
    /// (any object for a function without parameters; parameters the
    /// constraint cannot hold make [`JsonFormat::schema`] an error).
    fn call_format(&self, names: &[&str]) -> JsonFormat {
        let functions = names
            .iter()
            .map(|&name| {
                let params = self
                    .tools
                    .iter()
                    .find(|(_, n)| n == name)
                    .and_then(|(text, _)| {
                        let v = json::parse(text.as_bytes()).ok()?;
                        let p = v.get("function")?.get("parameters")?;
                        p.as_object().map(|o| o.raw().to_string())
                    })
                    .unwrap_or_else(|| "{\"type\":\"object\"}".to_string());
                (name.to_string(), params)
            })
            .collect();
        JsonFormat::Call(functions)
    }
}

/// A schema error's message, led by the place of the schema at fault: the
/// schema's own path `at`, and for a keyword the constraint cannot enforce
/// in a subschema, that subschema's path below it
/// (`'tools[1].function.parameters.properties.q': unsupported JSON schema
/// keyword 'pattern'`).
pub fn schema_error(at: &str, schema: &Value, e: &kestrel_core::constrain::SchemaError) -> String {
    e.at(at, schema).to_string()
}

/// A `/v1/completions` prompt.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    Text(String),
    Ids(Vec<u32>),
}

/// A parsed `/v1/completions` body.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletionRequest {
    pub prompt: Prompt,
    pub params: Params,
}

/// What the server does with a request field.
#[derive(Clone, Copy)]
enum Field {
    /// Read by the parsers below.
    Used,
    /// Does not change the answer (`user`, `metadata`, ...): accepted, unused.
    Unused,
    /// Would change the answer and is not implemented: accepted only when
    /// absent, null, or holding the value that changes nothing.
    OnlyNeutral(fn(&Value) -> bool),
}

use Field::{OnlyNeutral, Unused, Used};

/// Fields both endpoints take.
const COMMON_FIELDS: &[(&str, Field)] = &[
    ("model", Unused),
    ("user", Unused),
    ("metadata", Unused),
    ("store", Unused),
    ("service_tier", Unused),
    // llama.cpp's switch for prefix reuse, which is always on here.
    ("cache_prompt", Unused),
    ("max_tokens", Used),
    ("temperature", Used),
    ("top_p", Used),
    ("top_k", Used),
    ("min_p", Used),
    ("repeat_penalty", Used),
    ("seed", Used),
    ("stop", Used),
    ("stream", Used),
    ("stream_options", Used),
    ("n", Used),
    ("logprobs", Used),
    ("prediction", Used),
    ("presence_penalty", OnlyNeutral(is_zero)),
    ("frequency_penalty", OnlyNeutral(is_zero)),
    ("logit_bias", Used),
];

/// Fields only `/v1/chat/completions` takes.
const CHAT_FIELDS: &[(&str, Field)] = &[
    ("messages", Used),
    ("max_completion_tokens", Used),
    ("top_logprobs", Used),
    ("parallel_tool_calls", Used),
    ("tools", Used),
    ("tool_choice", Used),
    ("response_format", Used),
    ("modalities", OnlyNeutral(is_text_modality)),
];

/// Fields only `/v1/completions` takes.
const COMPLETION_FIELDS: &[(&str, Field)] = &[
    ("prompt", Used),
    ("echo", OnlyNeutral(is_false)),
    ("suffix", OnlyNeutral(is_empty_string)),
    ("best_of", OnlyNeutral(is_one)),
];

/// A message's fields. What clients echo back from an earlier answer is
/// accepted where it changes nothing; `name` (a participant's name, which
/// Qwen's templates do not render) and anything else are refused.
/// The fields of a content part: `{"type": "text", "text"}` or `{"type":
/// "image_url", "image_url": {"url", "detail"}}`.
const TEXT_PART_FIELDS: &[(&str, Field)] = &[("type", Used), ("text", Used)];
const IMAGE_PART_FIELDS: &[(&str, Field)] = &[("type", Used), ("image_url", Used)];
/// `detail` chooses a resolution the server does not offer but its own.
const IMAGE_URL_FIELDS: &[(&str, Field)] = &[("url", Used), ("detail", OnlyNeutral(is_auto))];

fn is_auto(v: &Value) -> bool {
    v.str_eq("auto")
}

const MESSAGE_FIELDS: &[(&str, Field)] = &[
    ("role", Used),
    ("content", Used),
    ("tool_calls", Used),
    // The call a tool result answers: Qwen's templates do not render it.
    ("tool_call_id", Unused),
    ("name", OnlyNeutral(is_null)),
    ("refusal", OnlyNeutral(is_null)),
    ("annotations", OnlyNeutral(is_empty_array)),
    ("audio", OnlyNeutral(is_null)),
    ("function_call", OnlyNeutral(is_null)),
];

/// A tool's and its function's fields (the tool is rendered into the
/// prompt as the request gave it).
const TOOL_FIELDS: &[(&str, Field)] = &[("type", Used), ("function", Used)];
const FUNCTION_FIELDS: &[(&str, Field)] = &[
    ("name", Used),
    ("description", Used),
    ("parameters", Used),
    ("strict", Used),
];

/// An assistant message's call and its function.
const CALL_FIELDS: &[(&str, Field)] = &[("id", Unused), ("type", Used), ("function", Used)];
const CALL_FUNCTION_FIELDS: &[(&str, Field)] = &[("name", Used), ("arguments", Used)];

fn is_null(v: &Value) -> bool {
    v.is_null()
}
fn is_empty_array(v: &Value) -> bool {
    v.as_array().is_some_and(|a| a.is_empty())
}
fn is_zero(v: &Value) -> bool {
    v.as_f64() == Some(0.0)
}
fn is_one(v: &Value) -> bool {
    v.as_u64() == Some(1)
}
fn is_false(v: &Value) -> bool {
    v.as_bool() == Some(false)
}
fn is_empty_string(v: &Value) -> bool {
    v.str_eq("")
}
fn is_text_modality(v: &Value) -> bool {
    v.as_array()
        .is_some_and(|a| a.len() == 1 && a.get(0).is_some_and(|m| m.str_eq("text")))
}

/// Refuses a field the server does not know, and an unimplemented field
/// that would change the answer, naming it: never silently ignored.
fn check_fields(v: &Value, endpoint: &[(&str, Field)]) -> Result<()> {
    check_fields_at(v, "", COMMON_FIELDS, endpoint)
}

/// [`check_fields`] of an object at `path` (`"response_format."`, ...)
/// against the fields of `a` and `b`; errors name the field's path.
fn check_fields_at(v: &Value, path: &str, a: &[(&str, Field)], b: &[(&str, Field)]) -> Result<()> {
    for (key, value) in v.iter_object().into_iter().flatten() {
        let field = a
            .iter()
            .chain(b)
            .find(|(name, _)| key.eq_str(name))
            .map(|&(_, f)| f);
        let name: String = path.chars().chain(key.chars()).collect();
        match field {
            None => return Err(format!("unsupported parameter '{name}'").into()),
            Some(OnlyNeutral(neutral)) if !value.is_null() && !neutral(&value) => {
                return Err(format!(
                    "'{name}' is not supported by this server (only its default value)"
                )
                .into())
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn string_of(v: &Value, what: &str) -> Result<String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("'{what}' must be a string"))?;
    Ok(s.chars().collect())
}

fn object_of<'a>(body: &'a [u8]) -> Result<Value<'a>> {
    let v = json::parse(body).context("invalid JSON body")?;
    if v.as_object().is_none() {
        return Err("the body must be a JSON object".into());
    }
    unique_keys(&v, &mut String::new())?;
    Ok(v)
}

/// Refuses an object with a key twice, anywhere in `v` (`path` is where
/// `v` stands): a proxy and this server could read different values of it.
/// Each object's keys are sorted once: O(n log n) in its size.
fn unique_keys(v: &Value, path: &mut String) -> Result<()> {
    let len = path.len();
    let dot = if path.is_empty() { "" } else { "." };
    match v {
        Value::Object(o) => {
            let mut keys: Vec<String> = o.iter().map(|(k, _)| k.chars().collect()).collect();
            // The project's sort (std's would add its own code to the binary).
            kestrel_core::sort::sort_by(&mut keys, |a, b| a.cmp(b));
            if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
                let key = &w[0];
                return Err(format!("duplicate key '{path}{dot}{key}' in the request body").into());
            }
            for (k, x) in o.iter() {
                path.push_str(dot);
                path.extend(k.chars());
                unique_keys(&x, path)?;
                path.truncate(len);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let _ = write!(path, "[{i}]");
                unique_keys(&x, path)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// A field that must be a number in `[lo, hi]` when present (null: absent).
fn number(v: &Value, key: &str, lo: f64, hi: f64) -> Result<Option<f64>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => {
            let n = x
                .as_f64()
                .filter(|n| n.is_finite())
                .ok_or_else(|| format!("'{key}' must be a number"))?;
            if n < lo || n > hi {
                return Err(format!("'{key}' must be between {lo} and {hi}").into());
            }
            Ok(Some(n))
        }
    }
}

/// A field that must be a non-negative integer when present.
fn count(v: &Value, key: &str) -> Result<Option<u64>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("'{key}' must be a non-negative integer").into()),
    }
}

fn params(v: &Value) -> Result<Params> {
    let mut s = SamplerConfig::default();
    if let Some(t) = number(v, "temperature", 0.0, 2.0)? {
        s.temperature = t as f32;
    }
    if let Some(p) = number(v, "top_p", 0.0, 1.0)? {
        s.top_p = p as f32;
    }
    if let Some(p) = number(v, "min_p", 0.0, 1.0)? {
        s.min_p = p as f32;
    }
    if let Some(p) = number(v, "repeat_penalty", 0.0, 10.0)? {
        s.repeat_penalty = p as f32;
    }
    if let Some(k) = count(v, "top_k")? {
        s.top_k = usize::try_from(k).unwrap_or(usize::MAX);
    }
    match v.get("seed") {
        None | Some(Value::Null) => {}
        Some(x) => {
            s.seed = match (x.as_u64(), x.as_i64()) {
                (Some(u), _) => u,
                // Negative seeds: their two's complement bits.
                (None, Some(i)) => i as u64,
                _ => return Err("'seed' must be an integer".into()),
            }
        }
    }
    let max_tokens = match count(v, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => count(v, "max_tokens")?,
    }
    .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    if let Some(n) = count(v, "n")? {
        if n != 1 {
            return Err("only 'n': 1 is supported".into());
        }
    }
    let stop = match v.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(x @ Value::String(_)) => vec![string_of(&x, "stop")?],
        Some(Value::Array(a)) => {
            if a.len() > MAX_STOPS {
                return Err(format!("at most {MAX_STOPS} stop strings").into());
            }
            let mut all = Vec::with_capacity(a.len());
            for x in a.iter() {
                all.push(string_of(&x, "stop")?);
            }
            all
        }
        Some(_) => return Err("'stop' must be a string or an array of strings".into()),
    };
    let stop: Vec<String> = stop.into_iter().filter(|s| !s.is_empty()).collect();
    let stream = match v.get("stream") {
        None | Some(Value::Null) => false,
        Some(x) => x.as_bool().ok_or("'stream' must be a boolean")?,
    };
    let options = v.get("stream_options").filter(|o| !o.is_null());
    if let Some(o) = &options {
        if o.as_object().is_none() {
            return Err("'stream_options' must be an object".into());
        }
        check_fields_at(o, "stream_options.", &[("include_usage", Used)], &[])?;
    }
    let include_usage = match options.and_then(|o| o.get("include_usage")) {
        None | Some(Value::Null) => false,
        Some(b) => b
            .as_bool()
            .ok_or("'stream_options.include_usage' must be a boolean")?,
    };
    Ok(Params {
        max_tokens,
        sampler: s,
        stop,
        stream,
        include_usage,
        logprobs: None,
        json: None,
        prediction: prediction(v)?,
        logit_bias: logit_bias(v)?,
        dropped: Vec::new(),
    })
}

/// The keywords the best-effort compile `compiled` of `schema` (which
/// stands at `at`) left out, each by its path; "...and N more" past the
/// first 8.
pub fn dropped_paths(
    compiled: &kestrel_core::constrain::Schema,
    at: &str,
    schema: &Value,
) -> Vec<String> {
    let mut out: Vec<String> = compiled
        .dropped()
        .map(|(name, offset)| {
            let path = kestrel_core::constrain::SchemaPath::new(schema, offset);
            format!("{at}{path}.{name}")
        })
        .collect();
    let more = compiled.dropped_count().saturating_sub(out.len());
    if more > 0 {
        out.push(format!("...and {more} more"));
    }
    out
}

/// `logit_bias`: an object from token ids (decimal strings) to numbers in
/// -100 ..= 100, at most `MAX_LOGIT_BIAS` of them (the core's limits,
/// `sampler::LogitBias`, named here by the request's field).
fn logit_bias(v: &Value) -> Result<Vec<(u32, f32)>> {
    let obj = match v.get("logit_bias") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(o) => o
            .iter_object()
            .ok_or("'logit_bias' must be an object from token ids to numbers")?,
    };
    let mut bias = Vec::new();
    for (key, value) in obj {
        let key: String = key.chars().collect();
        let id = key
            .parse::<u32>()
            .ok()
            // Plain decimal, no leading zero: one key per id (keys are
            // unique, so every id is biased once).
            .filter(|_| key.bytes().all(|b| b.is_ascii_digit()))
            .filter(|_| key == "0" || !key.starts_with('0'))
            .ok_or_else(|| format!("'logit_bias' keys must be token ids, not '{key}'"))?;
        let b = value
            .as_f64()
            .map(|b| b as f32)
            .filter(|&b| LogitBias::in_range(b))
            .ok_or_else(|| format!("'logit_bias.{key}' must be a number in -100 ..= 100"))?;
        if bias.len() == MAX_LOGIT_BIAS {
            return Err(format!("at most {MAX_LOGIT_BIAS} 'logit_bias' entries").into());
        }
        bias.push((id, b));
    }
    Ok(bias)
}

/// `prediction`: `{"type": "content", "content": TEXT}`, the content a
/// string or an array of `{"type": "text", "text": ...}` parts (joined);
/// anything else is a 400 naming the field.
fn prediction(v: &Value) -> Result<String> {
    let p = match v.get("prediction") {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(p) => p,
    };
    let obj = p
        .iter_object()
        .ok_or("'prediction' must be an object with 'type' and 'content'")?;
    for (key, _) in obj {
        if !key.eq_str("type") && !key.eq_str("content") {
            let name: String = key.chars().collect();
            return Err(format!("unsupported parameter 'prediction.{name}'").into());
        }
    }
    if !p.get("type").is_some_and(|t| t.str_eq("content")) {
        return Err("'prediction.type' must be \"content\"".into());
    }
    match p.get("content") {
        Some(x @ Value::String(_)) => string_of(&x, "prediction.content"),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts.iter() {
                let ok = part.iter_object().is_some_and(|o| {
                    o.into_iter()
                        .all(|(k, _)| k.eq_str("type") || k.eq_str("text"))
                }) && part.get("type").is_some_and(|t| t.str_eq("text"));
                let t = part.get("text").filter(|_| ok).ok_or(
                    "'prediction.content' parts must be {\"type\": \"text\", \"text\": ...}",
                )?;
                text.push_str(&string_of(&t, "prediction.content")?);
            }
            Ok(text)
        }
        _ => Err("'prediction.content' must be a string or an array of text parts".into()),
    }
}

/// Chat's `logprobs` (a boolean) and `top_logprobs` (0 ..= 20, only with it).
fn chat_logprobs(v: &Value) -> Result<Option<usize>> {
    let on = match v.get("logprobs") {
        None | Some(Value::Null) => false,
        Some(x) => x.as_bool().ok_or("'logprobs' must be a boolean")?,
    };
    let top = number(v, "top_logprobs", 0.0, MAX_TOP_LOGPROBS as f64)?;
    match (on, top) {
        (false, Some(_)) => Err("'top_logprobs' needs 'logprobs': true".into()),
        (false, None) => Ok(None),
        (true, top) => match top {
            Some(t) if t.fract() != 0.0 => Err("'top_logprobs' must be an integer".into()),
            t => Ok(Some(t.unwrap_or(0.0) as usize)),
        },
    }
}

/// Completions' `logprobs`: how many alternatives, 0 ..= 5 (null: none).
fn completion_logprobs(v: &Value) -> Result<Option<usize>> {
    match count(v, "logprobs")? {
        Some(n) if n > 5 => Err("'logprobs' must be between 0 and 5".into()),
        n => Ok(n.map(|n| n as usize)),
    }
}

/// The bytes of a `data:[<type>][;base64],<data>` URI.
pub fn data_uri_bytes(uri: &str) -> Result<Vec<u8>> {
    let rest = uri
        .strip_prefix("data:")
        .ok_or("only data: URIs are supported for images")?;
    let (meta, data) = rest.split_once(',').ok_or("a data: URI without ','")?;
    if !meta.ends_with(";base64") {
        return Err("image data URIs must be base64".into());
    }
    base64_decode(data.as_bytes()).ok_or_else(|| "invalid base64 in an image data URI".into())
}

/// Standard base64 (padding optional; no whitespace). None on a bad character or length.
pub fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let s = match s {
        [rest @ .., b'=', b'='] => rest,
        [rest @ .., b'='] => rest,
        _ => s,
    };
    if s.len() % 4 == 1 {
        return None;
    }
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// A message's content: a string, null, or an array of text and image
/// parts: its text, and where each image stood in it (byte offsets).
/// `path`: the message's (`messages[i].`), for errors naming a field.
fn content(
    v: Option<Value>,
    path: &str,
    images: &mut Vec<Vec<u8>>,
) -> Result<(String, Vec<usize>)> {
    match v {
        None | Some(Value::Null) => Ok((String::new(), Vec::new())),
        Some(s @ Value::String(_)) => Ok((string_of(&s, "content")?, Vec::new())),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            let mut at = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                let at_part = format!("{path}content[{j}].");
                let kind = p.get("type").ok_or("a content part without 'type'")?;
                if kind.str_eq("text") {
                    check_fields_at(&p, &at_part, TEXT_PART_FIELDS, &[])?;
                    let t = p.get("text").ok_or("a text part without 'text'")?;
                    text.push_str(&string_of(&t, "text")?);
                } else if kind.str_eq("image_url") {
                    check_fields_at(&p, &at_part, IMAGE_PART_FIELDS, &[])?;
                    let iu = p
                        .get("image_url")
                        .ok_or("an image part without 'image_url'")?;
                    if iu.as_object().is_some() {
                        check_fields_at(
                            &iu,
                            &format!("{at_part}image_url."),
                            IMAGE_URL_FIELDS,
                            &[],
                        )?;
                    }
                    let url = match iu.get("url") {
                        Some(u) => string_of(&u, "image_url.url")?,
                        None => string_of(&iu, "image_url")?,
                    };
                    if images.len() >= MAX_IMAGES {
                        return Err(format!("at most {MAX_IMAGES} images per request").into());
                    }
                    images.push(data_uri_bytes(&url)?);
                    // Where Qwen3-VL's chat template puts the image.
                    at.push(text.len());
                } else {
                    return Err("content parts must be of type 'text' or 'image_url'".into());
                }
            }
            Ok((text, at))
        }
        Some(_) => Err("'content' must be a string or an array of parts".into()),
    }
}

/// A function name as OpenAI allows it: 1 to 64 of `a-zA-Z0-9_-`.
fn function_name(v: Option<Value>, what: &str) -> Result<String> {
    let name = v
        .as_ref()
        .and_then(|n| n.as_str())
        .and_then(|n| n.as_plain())
        .filter(|n| {
            (1..=64).contains(&n.len())
                && n.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        })
        .ok_or_else(|| format!("'{what}' must be 1 to 64 letters, digits, '_' or '-'"))?;
    Ok(name.to_string())
}

/// `tools`: each `{"type": "function", "function": {"name", "description"?,
/// "parameters"?}}`, kept as its JSON text, with its name.
fn tools(v: &Value) -> Result<Vec<(String, String)>> {
    let list = v.as_array().ok_or("'tools' must be an array")?;
    if list.len() > MAX_TOOLS {
        return Err(format!("at most {MAX_TOOLS} tools").into());
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let Value::Object(obj) = t else {
            return Err(format!("tools[{i}] must be an object").into());
        };
        let f = t
            .get("function")
            .filter(|f| f.as_object().is_some())
            .filter(|_| t.get("type").is_some_and(|k| k.str_eq("function")))
            .ok_or_else(|| {
                format!("tools[{i}] must be {{\"type\": \"function\", \"function\": {{...}}}}")
            })?;
        check_fields_at(&t, &format!("tools[{i}]."), TOOL_FIELDS, &[])?;
        check_fields_at(&f, &format!("tools[{i}].function."), FUNCTION_FIELDS, &[])?;
        let name = function_name(f.get("name"), &format!("tools[{i}].function.name"))?;
        if let Some(d) = f.get("description").filter(|d| !d.is_null()) {
            d.as_str()
                .ok_or_else(|| format!("tools[{i}].function.description must be a string"))?;
        }
        if let Some(p) = f.get("parameters").filter(|p| !p.is_null()) {
            p.as_object()
                .ok_or_else(|| format!("tools[{i}].function.parameters must be an object"))?;
            // A call's arguments are an object (the template's and
            // OpenAI's): parameters of another type could not be called.
            if p.get("type").is_some_and(|t| !t.str_eq("object")) {
                return Err(format!(
                    "'tools[{i}].function.parameters.type' must be \"object\" (a call's arguments are an object)"
                )
                .into());
            }
            // OpenAI's rule: with `strict: true` the parameters must be
            // enforceable, else a 400 naming what is not; without it the
            // constraint follows what it can (any object otherwise).
            let strict = match f.get("strict") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => b,
                Some(_) => {
                    return Err(format!("'tools[{i}].function.strict' must be a boolean").into())
                }
            };
            if strict {
                kestrel_core::constrain::Schema::compile(&p).map_err(|e| {
                    schema_error(&format!("tools[{i}].function.parameters"), &p, &e)
                })?;
            }
        }
        if out.iter().any(|(_, n)| *n == name) {
            return Err(format!("tools[{i}]: a second function named '{name}'").into());
        }
        out.push((obj.raw().to_string(), name));
    }
    Ok(out)
}

/// An assistant message's `tool_calls`: each `{"type": "function",
/// "function": {"name", "arguments"}}`, `arguments` a JSON text (as OpenAI
/// sends it) or an object.
fn message_tool_calls(v: &Value, at: &str) -> Result<Vec<(String, String)>> {
    let list = v
        .as_array()
        .ok_or_else(|| format!("'{at}' must be an array"))?;
    if list.len() > MAX_TOOL_CALLS {
        return Err(format!("'{at}' has more than {MAX_TOOL_CALLS} calls").into());
    }
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let f = c
            .get("function")
            .ok_or_else(|| format!("'{at}[{i}]' has no 'function'"))?;
        check_fields_at(&c, &format!("{at}[{i}]."), CALL_FIELDS, &[])?;
        check_fields_at(
            &f,
            &format!("{at}[{i}].function."),
            CALL_FUNCTION_FIELDS,
            &[],
        )?;
        let name = function_name(f.get("name"), &format!("{at}[{i}].function.name"))?;
        let not_object = || format!("'{at}[{i}].function.arguments' must be a JSON object");
        let arguments = match f.get("arguments") {
            Some(a @ Value::String(_)) => {
                let text = string_of(&a, "arguments")?;
                json::parse(text.as_bytes())
                    .ok()
                    .filter(|v| v.as_object().is_some())
                    .ok_or_else(not_object)?;
                text
            }
            Some(Value::Object(o)) => o.raw().to_string(),
            _ => return Err(not_object().into()),
        };
        out.push((name, arguments));
    }
    Ok(out)
}

/// Parses a chat completion request body.
pub fn parse_chat(body: &[u8]) -> Result<ChatRequest> {
    let v = object_of(body)?;
    check_fields(&v, CHAT_FIELDS)?;
    let msgs = v
        .get("messages")
        .and_then(|m| m.as_array())
        .ok_or("'messages' must be an array")?;
    if msgs.is_empty() {
        return Err("'messages' must not be empty".into());
    }
    if msgs.len() > MAX_MESSAGES {
        return Err(format!("at most {MAX_MESSAGES} messages").into());
    }
    let mut images = Vec::new();
    let mut messages = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        if m.as_object().is_none() {
            return Err(format!("messages[{i}] must be an object").into());
        }
        check_fields_at(&m, &format!("messages[{i}]."), MESSAGE_FIELDS, &[])?;
        let role = m.get("role").ok_or("a message without 'role'")?;
        let role = if role.str_eq("system") || role.str_eq("developer") {
            Role::System
        } else if role.str_eq("user") {
            Role::User
        } else if role.str_eq("assistant") {
            Role::Assistant
        } else if role.str_eq("tool") {
            Role::Tool
        } else {
            return Err("message roles must be system, user, assistant or tool".into());
        };
        let tool_calls = match (role, m.get("tool_calls")) {
            (_, None | Some(Value::Null)) => Vec::new(),
            (Role::Assistant, Some(calls)) => {
                message_tool_calls(&calls, &format!("messages[{i}].tool_calls"))?
            }
            _ => {
                return Err(
                    format!("messages[{i}]: only assistant messages have 'tool_calls'").into(),
                )
            }
        };
        let (content, at) = content(m.get("content"), &format!("messages[{i}]."), &mut images)?;
        messages.push(ChatMessage {
            role,
            content,
            tool_calls,
            images: at,
        });
    }
    let tools = match v.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(t) => tools(&t)?,
    };
    let tool_choice = match v.get("tool_choice") {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(c) if c.str_eq("none") => ToolChoice::None,
        Some(c) if c.str_eq("auto") => ToolChoice::Auto,
        Some(c) if c.str_eq("required") => ToolChoice::Required,
        Some(c) => {
            if let Some(f) = c.get("function").filter(|_| c.as_object().is_some()) {
                check_fields_at(&c, "tool_choice.", TOOL_FIELDS, &[])?;
                check_fields_at(&f, "tool_choice.function.", &[("name", Used)], &[])?;
            }
            let name = c
                .get("function")
                .and_then(|f| f.get("name"))
                .filter(|_| c.get("type").is_some_and(|t| t.str_eq("function")))
                .ok_or("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}")?;
            ToolChoice::Function(string_of(&name, "tool_choice.function.name")?)
        }
    };
    match &tool_choice {
        ToolChoice::Required if tools.is_empty() => {
            return Err("'tool_choice' is 'required' but there are no 'tools'".into())
        }
        ToolChoice::Function(f) if !tools.iter().any(|(_, n)| n == f) => {
            return Err(format!("'tool_choice' names '{f}', which is not in 'tools'").into())
        }
        _ => {}
    }
    let parallel_tool_calls = match v.get("parallel_tool_calls") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err("'parallel_tool_calls' must be a boolean".into()),
    };
    let (json, dropped) = response_format(&v)?;
    Ok(ChatRequest {
        messages,
        tools,
        tool_choice,
        parallel_tool_calls,
        images,
        params: Params {
            logprobs: chat_logprobs(&v)?,
            json,
            dropped,
            ..params(&v)?
        },
    })
}

/// Parses a (legacy) completion request body: `prompt` is a string, an
/// array of one string, or an array of token ids.
pub fn parse_completion(body: &[u8]) -> Result<CompletionRequest> {
    let v = object_of(body)?;
    check_fields(&v, COMPLETION_FIELDS)?;
    let prompt = match v.get("prompt") {
        Some(s @ Value::String(_)) => Prompt::Text(string_of(&s, "prompt")?),
        Some(Value::Array(a)) if a.len() == 1 && a.get(0).is_some_and(|x| x.as_str().is_some()) => {
            Prompt::Text(string_of(&a.get(0).unwrap_or(Value::Null), "prompt")?)
        }
        Some(Value::Array(a)) if !a.is_empty() => {
            let mut ids = Vec::with_capacity(a.len());
            for x in a.iter() {
                let id = x.as_u64().and_then(|n| u32::try_from(n).ok());
                ids.push(id.ok_or("'prompt' must be a string, [string] or token ids")?);
            }
            Prompt::Ids(ids)
        }
        _ => return Err("'prompt' must be a string, [string] or token ids".into()),
    };
    Ok(CompletionRequest {
        prompt,
        params: Params {
            logprobs: completion_logprobs(&v)?,
            ..params(&v)?
        },
    })
}

/// A parsed `/v1/embeddings` body: each input (a text, or token ids) and
/// how its rows are pooled.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingRequest {
    pub inputs: Vec<Prompt>,
    pub pooling: kestrel_core::embed::Pooling,
}

/// `/v1/embeddings`' fields: OpenAI's, and `pooling` ("mean", the
/// default, or "last": Qwen3-Embedding's, its texts ending in
/// `<|endoftext|>`).
const EMBEDDING_FIELDS: &[(&str, Field)] = &[
    ("model", Unused),
    ("user", Unused),
    ("input", Used),
    ("pooling", Used),
    ("encoding_format", OnlyNeutral(is_float_format)),
];

fn is_float_format(v: &Value) -> bool {
    v.str_eq("float")
}

/// Parses an embeddings request: `input` is a string, token ids, or an
/// array of either (at most 256 inputs, none empty).
pub fn parse_embeddings(body: &[u8]) -> Result<EmbeddingRequest> {
    let v = object_of(body)?;
    check_fields_at(&v, "", EMBEDDING_FIELDS, &[])?;
    let bad = "'input' must be a string, token ids, or an array of strings or of token ids";
    let one = |x: &Value| -> Result<Prompt> {
        if let Some(t) = x.as_str() {
            return Ok(Prompt::Text(t.chars().collect()));
        }
        let ids: Option<Vec<u32>> = x.iter_array().and_then(|a| {
            a.map(|i| i.as_u64().and_then(|n| u32::try_from(n).ok()))
                .collect()
        });
        ids.map(Prompt::Ids).ok_or_else(|| bad.into())
    };
    let inputs = match v.get("input") {
        Some(Value::Array(a)) if a.get(0).is_some_and(|x| x.as_u64().is_none()) => {
            a.iter().map(|x| one(&x)).collect::<Result<Vec<_>>>()?
        }
        Some(x) => vec![one(&x)?],
        None => return Err("'input' is required".into()),
    };
    let empty = |p: &Prompt| match p {
        Prompt::Text(t) => t.is_empty(),
        Prompt::Ids(ids) => ids.is_empty(),
    };
    if inputs.is_empty() || inputs.len() > 256 || inputs.iter().any(empty) {
        return Err("'input' must hold 1 to 256 inputs, none empty".into());
    }
    let pooling = match v.get("pooling") {
        None | Some(Value::Null) => kestrel_core::embed::Pooling::Mean,
        Some(p) if p.str_eq("mean") => kestrel_core::embed::Pooling::Mean,
        Some(p) if p.str_eq("last") => kestrel_core::embed::Pooling::Last,
        Some(_) => return Err("'pooling' must be \"mean\" or \"last\"".into()),
    };
    Ok(EmbeddingRequest { inputs, pooling })
}

/// Appends `s` as a JSON string literal.
pub fn push_json_str(out: &mut String, s: &str) {
    let _ = json::write_json_str(out, s);
}

/// An OpenAI-style error body.
pub fn error_body(status: u16, message: &str) -> String {
    let kind = match status {
        401 => "authentication_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    };
    let mut s = String::from("{\"error\":{\"message\":");
    push_json_str(&mut s, message);
    let _ = write!(s, ",\"type\":\"{kind}\",\"param\":");
    match param_of(status, message) {
        Some(param) => push_json_str(&mut s, param),
        None => s.push_str("null"),
    }
    let _ = write!(
        s,
        ",\"code\":{}}}}}",
        match status {
            401 => "\"invalid_api_key\"",
            _ => "null",
        }
    );
    s
}

/// The request field a 400 is about (OpenAI's `error.param`): the first
/// quoted name in its message when that is a field path (`top_p`,
/// `messages[1].prefix`, `tools[0].function.foo`); every message about a
/// field quotes its path first.
fn param_of(status: u16, message: &str) -> Option<&str> {
    if status != 400 {
        return None;
    }
    let (_, rest) = message.split_once('\'')?;
    let (name, _) = rest.split_once('\'')?;
    let is_path = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']'));
    is_path.then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field is used, harmless, or neutral; anything else is a 400
    /// naming it.
    #[test]
    fn unknown_and_unimplemented_fields_are_refused_by_name() {
        let chat = |extra: &str| {
            parse_chat(
                format!(r#"{{"messages":[{{"role":"user","content":"x"}}]{extra}}}"#).as_bytes(),
            )
        };
        for ok in [
            r#","user":"u","metadata":{"a":"b"},"store":false,"model":"m""#,
            r#","tools":[],"tool_choice":"none","parallel_tool_calls":true"#,
            r#","presence_penalty":0,"frequency_penalty":0.0,"logit_bias":{}"#,
            r#","response_format":{"type":"text"},"modalities":["text"]"#,
            r#","logit_bias":null,"tools":null,"response_format":null"#,
            r#","stream_options":{"include_usage":false},"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{}}}"#,
        ] {
            assert!(chat(ok).is_ok(), "{ok}");
        }
        // Fields of messages: what clients echo back is accepted where it
        // changes nothing; anything else is named with its path.
        let echo = r#"{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","refusal":null,"annotations":[],"audio":null,"function_call":null},{"role":"user","content":"z","name":null}]}"#;
        assert!(parse_chat(echo.as_bytes()).is_ok());
        for (msgs, named) in [
            (
                r#"[{"role":"user","content":"x","prefix":true}]"#,
                "'messages[0].prefix'",
            ),
            (
                r#"[{"role":"system","content":"s"},{"role":"user","content":"x","name":"bob"}]"#,
                "'messages[1].name'",
            ),
            (
                r#"[{"role":"assistant","content":"x","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}","z":1}}]}]"#,
                "'messages[0].tool_calls[0].function.z'",
            ),
        ] {
            let body = format!(r#"{{"messages":{msgs}}}"#);
            let err = parse_chat(body.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(named), "{msgs}: {err}");
        }
        // A key twice, at any depth, is a 400 naming it.
        for (body, named) in [
            (
                r#"{"messages":[{"role":"user","content":"x"}],"temperature":0,"temperature":1}"#,
                "'temperature'",
            ),
            (
                r#"{"messages":[{"role":"user","content":"x","role":"system"}]}"#,
                "'messages[0].role'",
            ),
        ] {
            let err = parse_chat(body.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(named) && err.contains("duplicate"), "{err}");
        }
        // json_object's schema is enforced, not ignored (best effort: a
        // keyword it cannot enforce is left out).
        assert!(
            chat(r#","response_format":{"type":"json_object","schema":{"pattern":"x"}}"#).is_ok()
        );
        let c = chat(r#","response_format":{"type":"json_object","schema":{"type":"object"}}"#)
            .unwrap();
        assert_eq!(
            c.params.json,
            Some(JsonFormat::Schema(r#"{"type":"object"}"#.into(), false))
        );
        for (bad, named) in [
            (r#","foo":1"#, "'foo'"),
            (r#","tools":[{"type":"function"}]"#, "tools[0]"),
            (r#","tools":{}"#, "'tools'"),
            (r#","tool_choice":"required""#, "'tool_choice'"),
            (r#","tool_choice":"sometimes""#, "'tool_choice'"),
            (
                r#","response_format":{"type":"yaml"}"#,
                "'response_format.type'",
            ),
            (
                r#","response_format":{"type":"json_schema","json_schema":{"strict":true,"schema":{"$ref":"x"}}}"#,
                "'$ref'",
            ),
            (
                r#","response_format":{"type":"json_schema","json_schema":{"strict":true,"schema":{"properties":{"a":{"type":"object","properties":{"b":{"type":"string","format":"ipv6"}}}}}}}"#,
                "'response_format.json_schema.schema.properties.a.properties.b': unsupported JSON schema keyword 'format'",
            ),
            (
                r#","response_format":{"type":"json_schema","json_schema":{"strict":1,"schema":{}}}"#,
                "'response_format.json_schema.strict'",
            ),
            (
                r#","response_format":{"type":"json_object","foo":1}"#,
                "'response_format.foo'",
            ),
            (
                r#","response_format":{"type":"json_schema","json_schema":{"schema":{},"bar":1}}"#,
                "'response_format.json_schema.bar'",
            ),
            (
                r#","stream_options":{"include_usage":true,"x":1}"#,
                "'stream_options.x'",
            ),
            (
                r#","tools":[{"type":"function","function":{"name":"f","foo":1}}]"#,
                "'tools[0].function.foo'",
            ),
            (
                r#","tools":[{"type":"function","function":{"name":"f"},"x":2}]"#,
                "'tools[0].x'",
            ),
            (
                r#","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f","y":1}}"#,
                "'tool_choice.function.y'",
            ),
            (
                r#","stream_options":{"include_usage":1}"#,
                "'stream_options.include_usage'",
            ),
            (r#","logit_bias":{"42":101}"#, "'logit_bias.42'"),
            (r#","logit_bias":{"x":1}"#, "'logit_bias'"),
            (r#","logit_bias":{"-1":1}"#, "'logit_bias'"),
            (r#","logit_bias":{"+7":1}"#, "'logit_bias'"),
            (r#","logit_bias":{"7":1,"07":1}"#, "'logit_bias'"),
            (r#","logit_bias":{"7":"1"}"#, "'logit_bias.7'"),
            (r#","logit_bias":[1]"#, "'logit_bias'"),
            (r#","presence_penalty":0.5"#, "'presence_penalty'"),
            (r#","frequency_penalty":-1"#, "'frequency_penalty'"),
            (r#","modalities":["text","audio"]"#, "'modalities'"),
            (r#","top_logprobs":2"#, "'top_logprobs'"),
            (r#","logprobs":true,"top_logprobs":21"#, "'top_logprobs'"),
            (r#","logprobs":true,"top_logprobs":1.5"#, "'top_logprobs'"),
            (r#","logprobs":3"#, "'logprobs'"),
            (r#","echo":false"#, "'echo'"),
        ] {
            let e = chat(bad).unwrap_err().to_string();
            assert!(e.contains(named), "{bad}: {e}");
        }
        assert_eq!(
            chat(r#","logit_bias":{"42":5,"7":-100}"#)
                .unwrap()
                .params
                .logit_bias,
            vec![(42, 5.0), (7, -100.0)]
        );
        assert_eq!(
            chat(r#","response_format":{"type":"json_object"}"#)
                .unwrap()
                .params
                .json,
            Some(JsonFormat::Object)
        );
        assert!(matches!(
            chat(r#","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}"#)
                .unwrap()
                .params
                .json,
            Some(JsonFormat::Schema(_, false))
        ));
        let lp = |extra: &str| chat(extra).unwrap().params.logprobs;
        assert_eq!(lp(r#","logprobs":true,"top_logprobs":3"#), Some(3));
        assert_eq!(lp(r#","logprobs":true"#), Some(0));
        assert_eq!(lp(r#","logprobs":false"#), None);
        let completion =
            |extra: &str| parse_completion(format!(r#"{{"prompt":"x"{extra}}}"#).as_bytes());
        assert!(completion(r#","echo":false,"suffix":"","best_of":1,"user":"u""#).is_ok());
        for (bad, named) in [
            (r#","echo":true"#, "'echo'"),
            (r#","suffix":"end""#, "'suffix'"),
            (r#","best_of":2"#, "'best_of'"),
            (r#","logprobs":6"#, "'logprobs'"),
            (r#","messages":[]"#, "'messages'"),
            (r#","tools":[]"#, "'tools'"),
        ] {
            let e = completion(bad).unwrap_err().to_string();
            assert!(e.contains(named), "{bad}: {e}");
        }
    }

    #[test]
    fn tools_tool_choice_and_tool_messages() {
        let weather = r#"{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{}}}}"#;
        let body = format!(
            r#"{{"messages":[{{"role":"user","content":"q"}},{{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","type":"function","function":{{"name":"get_weather","arguments":"{{\"city\": \"Oslo\"}}"}}}}]}},{{"role":"tool","tool_call_id":"c1","content":"3 C"}}],"tools":[{weather},{{"type":"function","function":{{"name":"now"}}}}],"tool_choice":{{"type":"function","function":{{"name":"now"}}}}}}"#
        );
        let c = parse_chat(body.as_bytes()).unwrap();
        assert_eq!(c.tools.len(), 2);
        assert_eq!(c.tools[0], (weather.to_string(), "get_weather".to_string()));
        assert_eq!(c.tool_choice, ToolChoice::Function("now".into()));
        assert_eq!(c.messages[1].content, "");
        assert_eq!(
            c.messages[1].tool_calls,
            vec![(
                "get_weather".to_string(),
                "{\"city\": \"Oslo\"}".to_string()
            )]
        );
        assert_eq!(c.messages[2].role, Role::Tool);
        let chat = |extra: &str| {
            parse_chat(
                format!(r#"{{"messages":[{{"role":"user","content":"x"}}]{extra}}}"#).as_bytes(),
            )
        };
        assert_eq!(
            chat(&format!(r#","tools":[{weather}],"tool_choice":"required""#))
                .unwrap()
                .tool_choice,
            ToolChoice::Required
        );
        assert_eq!(
            chat(r#","tool_choice":"none""#).unwrap().tool_choice,
            ToolChoice::None
        );
        for (bad, says) in [
            (
                r#","tools":[{"type":"function","function":{"name":"a b"}}]"#,
                "tools[0].function.name",
            ),
            (
                r#","tools":[{"type":"function","function":{"name":""}}]"#,
                "tools[0].function.name",
            ),
            (r#","tools":[{"type":"retrieval"}]"#, "tools[0]"),
            (r#","tools":[1]"#, "tools[0]"),
            (
                r#","tools":[{"type":"function","function":{"name":"f","parameters":[]}}]"#,
                "parameters",
            ),
            (
                r#","tools":[{"type":"function","function":{"name":"f","description":3}}]"#,
                "description",
            ),
            (
                r#","tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]"#,
                "second function named 'f'",
            ),
            (
                r#","tool_choice":{"type":"function","function":{"name":"g"}}"#,
                "not in 'tools'",
            ),
            (r#","tool_choice":"required""#, "no 'tools'"),
        ] {
            let e = chat(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let msg = |m: &str| parse_chat(format!(r#"{{"messages":[{m}]}}"#).as_bytes());
        for (bad, says) in [
            (
                r#"{"role":"user","content":"x","tool_calls":[]}"#,
                "only assistant",
            ),
            (
                r#"{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{oops"}}]}"#,
                "JSON object",
            ),
            (
                r#"{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]}"#,
                "JSON object",
            ),
            (
                r#"{"role":"assistant","tool_calls":[{"type":"function"}]}"#,
                "no 'function'",
            ),
            (r#"{"role":"assistant","tool_calls":{}}"#, "array"),
        ] {
            let e = msg(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // Arguments given as an object (not OpenAI's text) are taken too.
        let c = msg(
            r#"{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}"#,
        )
        .unwrap();
        assert_eq!(c.messages[0].tool_calls[0].1, r#"{"a":1}"#);
    }

    /// A best-effort schema's left-out keywords are listed by path (the
    /// answer says them); a strict one lists none (it refuses them).
    #[test]
    fn a_best_effort_schema_says_what_it_leaves_out() {
        let body = |format: &str| {
            format!(
                r#"{{"messages":[{{"role":"user","content":"x"}}],"response_format":{format}}}"#
            )
        };
        let schema = r#"{"type":"object","properties":{"s":{"type":"string","pattern":"(?=a)"},"t":{"type":"string","format":"ipv6"}}}"#;
        let r = parse_chat(
            body(&format!(
                r#"{{"type":"json_schema","json_schema":{{"name":"n","schema":{schema}}}}}"#
            ))
            .as_bytes(),
        )
        .unwrap();
        let mut dropped = r.params.dropped.clone();
        dropped.sort();
        assert_eq!(
            dropped,
            vec![
                "response_format.json_schema.schema.properties.s.pattern".to_string(),
                "response_format.json_schema.schema.properties.t.format".to_string()
            ]
        );
        let r =
            parse_chat(body(&format!(r#"{{"type":"json_object","schema":{schema}}}"#)).as_bytes())
                .unwrap();
        assert!(r
            .params
            .dropped
            .contains(&"response_format.schema.properties.s.pattern".to_string()));
        let r = parse_chat(body(r#"{"type":"json_object"}"#).as_bytes()).unwrap();
        assert!(r.params.dropped.is_empty());
        let strict = format!(
            r#"{{"type":"json_schema","json_schema":{{"strict":true,"schema":{schema}}}}}"#
        );
        assert!(parse_chat(body(&strict).as_bytes()).is_err());
    }

    /// Parameters that describe something other than an object are
    /// refused: a call's arguments are an object.
    #[test]
    fn parameters_that_are_not_an_object_are_refused() {
        for params in [
            r#"{"type":"array"}"#,
            r#"{"type":"string"}"#,
            r#"{"type":["object","null"]}"#,
        ] {
            for strict in ["true", "false"] {
                let body = format!(
                    r#"{{"messages":[{{"role":"user","content":"x"}}],"tools":[{{"type":"function","function":{{"name":"f","strict":{strict},"parameters":{params}}}}}]}}"#
                );
                let err = parse_chat(body.as_bytes()).unwrap_err().to_string();
                assert!(
                    err.contains("parameters.type' must be \"object\""),
                    "{params}: {err}"
                );
            }
        }
    }

    /// Strict functions that each fit the constraint alone but not together
    /// are refused (the request's error), never answered unconstrained.
    #[test]
    fn tools_the_constraint_cannot_hold_together_are_an_error() {
        let function = |n: usize| {
            // 64 properties each (the most of one object): 16 functions
            // need more than the 1024 nodes of one schema.
            let props: Vec<String> = (0..64)
                .map(|k| format!(r#""p{k}":{{"type":"string","enum":["qx{k}"]}}"#))
                .collect();
            format!(
                r#"{{"type":"function","function":{{"name":"f{n}","strict":true,"parameters":{{"type":"object","properties":{{{}}}}}}}}}"#,
                props.join(",")
            )
        };
        let tools: Vec<String> = (0..16).map(function).collect();
        for choice in [r#""required""#, r#""auto""#] {
            let r = parse_chat(
                format!(
                    r#"{{"messages":[{{"role":"user","content":"x"}}],"tools":[{}],"tool_choice":{choice}}}"#,
                    tools.join(",")
                )
                .as_bytes(),
            )
            .unwrap();
            let format = r.call_schema().or_else(|| r.auto_call_schema()).unwrap();
            let err = format.schema().unwrap_err().to_string();
            assert!(err.contains("as one tool-call constraint"), "{err}");
        }
        // One of them alone is held.
        let one = parse_chat(
            format!(
                r#"{{"messages":[{{"role":"user","content":"x"}}],"tools":[{}],"tool_choice":"required"}}"#,
                tools[0]
            )
            .as_bytes(),
        )
        .unwrap();
        one.call_schema().unwrap().schema().unwrap();
    }

    #[test]
    fn a_required_call_follows_its_function_s_parameters() {
        let weather = r#"{"type":"function","function":{"name":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}"#;
        let odd = r#"{"type":"function","function":{"name":"s","parameters":{"type":"object","properties":{"q":{"type":"string","pattern":"(?=a)"}}}}}"#;
        let req = |tools: &str, choice: &str| {
            parse_chat(
                format!(r#"{{"messages":[{{"role":"user","content":"x"}}],"tools":[{tools}],"tool_choice":{choice}}}"#)
                    .as_bytes(),
            )
            .unwrap()
        };
        let named = |n: &str| format!(r#"{{"type":"function","function":{{"name":"{n}"}}}}"#);
        let call = |r: ChatRequest| match r.call_schema() {
            Some(JsonFormat::Call(f)) => f,
            other => panic!("{other:?}"),
        };
        let w_params =
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#;
        assert_eq!(
            call(req(weather, &named("w"))),
            vec![("w".to_string(), w_params.to_string())]
        );
        // Parameters with a keyword the constraint cannot follow (without
        // `strict`): kept, the rest enforced.
        let odd_params =
            r#"{"type":"object","properties":{"q":{"type":"string","pattern":"(?=a)"}}}"#;
        let any = odd_params.to_string();
        assert_eq!(
            call(req(odd, &named("s"))),
            vec![("s".to_string(), any.clone())]
        );
        // Several functions: each keeps its own parameters.
        let both = req(&format!("{weather},{odd}"), "\"required\"");
        assert_eq!(
            call(both.clone()),
            vec![
                ("w".to_string(), w_params.to_string()),
                ("s".to_string(), any)
            ]
        );
        // The union: `w`'s arguments need its `city`; `s`'s `q` is a string
        // (its `pattern` left out).
        let schema = both.call_schema().unwrap().schema().unwrap();
        let ok = |out: &str| {
            let mut m = kestrel_core::constrain::Matcher::new(&schema);
            out.bytes().all(|b| m.advance(&schema, b)) && m.can_end(&schema)
        };
        assert!(ok(r#"{"name":"w","arguments":{"city":"Paris"}}"#));
        assert!(!ok(r#"{"name":"w","arguments":{"town":"Paris"}}"#));
        assert!(ok(r#"{"name":"s","arguments":{"q":"zebra"}}"#));
        assert!(!ok(r#"{"name":"s","arguments":{"q":3}}"#));
        assert_eq!(req(weather, "\"auto\"").call_schema(), None);
        // Every call schema compiles.
        for r in [req(weather, &named("w")), req(odd, "\"required\"")] {
            r.call_schema().unwrap().schema().unwrap();
        }
        // `strict: true` on parameters the constraint cannot enforce: a 400
        // naming the function's parameters and the keyword.
        let strict_odd = odd.replace(r#""name":"s","#, r#""name":"s","strict":true,"#);
        let body = format!(
            r#"{{"messages":[{{"role":"user","content":"x"}}],"tools":[{weather},{strict_odd}]}}"#
        );
        let err = parse_chat(body.as_bytes()).unwrap_err().to_string();
        assert!(
            err.contains("'tools[1].function.parameters.properties.q': unsupported")
                && err.contains("'pattern'"),
            "{err}"
        );
    }

    #[test]
    fn bodies() {
        let c = parse_chat(br#"{"model":"m","messages":[{"role":"system","content":"be \"brief\""},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAEC/w=="}},{"type":"text","text":"b"}]}],"max_tokens":5,"temperature":0,"seed":-1,"stop":["x"],"stream":true}"#).unwrap();
        let turn = |m: &ChatMessage| (m.role, m.content.clone());
        assert_eq!(
            turn(&c.messages[0]),
            (Role::System, "be \"brief\"".to_string())
        );
        // The image stands where it was among the parts.
        assert_eq!(turn(&c.messages[1]), (Role::User, "ab".to_string()));
        assert_eq!(c.messages[1].images, vec![1]);
        assert_eq!(c.images, vec![vec![0, 1, 2, 255]]);
        assert_eq!(c.params.max_tokens, Some(5));
        assert_eq!(c.params.sampler.seed, u64::MAX);
        assert_eq!(c.params.sampler.temperature, 0.0);
        assert!(c.params.stream);
        for bad in [
            &b"{"[..],
            b"[]",
            b"{}",
            br#"{"messages":[]}"#,
            br#"{"messages":[{"role":"robot","content":"x"}]}"#,
            br#"{"messages":[{"role":"user","content":1}]}"#,
            br#"{"messages":[{"role":"user","content":"x"}],"n":2}"#,
            br#"{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#,
            br#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}]}"#,
        ] {
            assert!(parse_chat(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        let p = parse_completion(br#"{"prompt":["hi"],"max_tokens":3}"#).unwrap();
        assert_eq!(p.params.logprobs, None);
        assert_eq!(p.prompt, Prompt::Text("hi".into()));
        let p = parse_completion(br#"{"prompt":[1,2,3]}"#).unwrap();
        assert_eq!(p.prompt, Prompt::Ids(vec![1, 2, 3]));
        assert_eq!(base64_decode(b"aGVsbG8"), Some(b"hello".to_vec()));
        assert_eq!(
            parse_completion(br#"{"prompt":"x","logprobs":2}"#)
                .unwrap()
                .params
                .logprobs,
            Some(2)
        );
        assert_eq!(base64_decode(b"a"), None);
        assert_eq!(
            error_body(401, "no"),
            r#"{"error":{"message":"no","type":"authentication_error","param":null,"code":"invalid_api_key"}}"#
        );
    }

    /// What the duplicate-key check costs beside the parse (a timing, not
    /// a check): `cargo test --release -p kestrel unique_key_check_time
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore = "a timing, not a check"]
    fn unique_key_check_time() {
        let many_keys = {
            let mut b = String::from(r#"{"messages":[{"role":"user","content":"x"}],"metadata":{"#);
            for i in 0..200_000 {
                let _ = write!(b, "{}\"k{i}\":{i}", if i > 0 { "," } else { "" });
            }
            b.push_str("}}");
            b
        };
        let long_text = format!(
            r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "word ".repeat(1_600_000)
        );
        for (what, body) in [("200,000 keys", many_keys), ("8 MB of text", long_text)] {
            let t = std::time::Instant::now();
            let v = json::parse(body.as_bytes()).unwrap();
            let parse = t.elapsed();
            let t = std::time::Instant::now();
            unique_keys(&v, &mut String::new()).unwrap();
            let check = t.elapsed();
            println!(
                "{what} ({} bytes): parse {parse:?}, unique keys {check:?}",
                body.len()
            );
        }
    }

    /// `parallel_tool_calls` is read (true unless false), and a boolean.
    #[test]
    fn parallel_tool_calls_is_a_boolean() {
        let with = |extra: &str| {
            parse_chat(
                format!(r#"{{"messages":[{{"role":"user","content":"x"}}]{extra}}}"#).as_bytes(),
            )
        };
        assert!(with("").unwrap().parallel_tool_calls);
        assert!(
            with(r#","parallel_tool_calls":true"#)
                .unwrap()
                .parallel_tool_calls
        );
        assert!(
            !with(r#","parallel_tool_calls":false"#)
                .unwrap()
                .parallel_tool_calls
        );
        let err = with(r#","parallel_tool_calls":1"#).unwrap_err().to_string();
        assert!(err.contains("'parallel_tool_calls'"), "{err}");
    }

    /// `error.param` is the path a 400 names first, else null.
    #[test]
    fn error_param_is_the_field_path() {
        let param = |status, m: &str| {
            let body = error_body(status, m);
            let v = json::parse(body.as_bytes()).unwrap();
            let p = v.get("error").unwrap().get("param").unwrap();
            p.as_str().map(|s| s.chars().collect::<String>())
        };
        for (message, want) in [
            ("unsupported parameter 'messages[1].prefix'", Some("messages[1].prefix")),
            ("unsupported parameter 'tools[0].function.foo'", Some("tools[0].function.foo")),
            ("'top_p' must be a number", Some("top_p")),
            (
                "'messages[0].tool_calls[0].function.name' must be 1 to 64 letters, digits, '_' or '-'",
                Some("messages[0].tool_calls[0].function.name"),
            ),
            ("invalid JSON body", None),
            ("a message without 'role'", Some("role")),
        ] {
            assert_eq!(param(400, message).as_deref(), want, "{message}");
        }
        assert_eq!(param(401, "'x' y"), None);
        // Through the parser: a nested unknown field names its path.
        let err = parse_chat(br#"{"messages":[{"role":"user","content":"x","prefix":true}]}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(param(400, &err).as_deref(), Some("messages[0].prefix"));
        // In a content part too, and in an image part's `image_url`.
        for (body, path) in [
            (
                r#"{"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}]}"#,
                "messages[0].content[0].cache_control",
            ),
            (
                r#"{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="},"foo":1}]}]}"#,
                "messages[1].content[1].foo",
            ),
            (
                r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA==","detail":"high"}}]}]}"#,
                "messages[0].content[0].image_url.detail",
            ),
        ] {
            let err = parse_chat(body.as_bytes()).unwrap_err().to_string();
            assert_eq!(param(400, &err).as_deref(), Some(path), "{err}");
        }
        let auto = br#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA==","detail":"auto"}}]}]}"#;
        assert!(parse_chat(auto).is_ok());
    }
}
