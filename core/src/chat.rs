//! The Qwen chat format (ChatML): `<|im_start|>role\ncontent<|im_end|>\n`,
//! an optional default system prompt, Qwen3's thinking switch, and tool
//! calls (the tools in the system turn, `<tool_call>` blocks in assistant
//! turns, `<tool_response>` blocks in the user turn that follows).
//!
//! The VQF keeps the model's Jinja chat template; Kestrel does not run
//! Jinja. It reads three facts from the template text: the default system
//! prompt Qwen2.5 templates insert when a conversation has none, whether
//! the template knows `enable_thinking` (Qwen3), and whether it renders
//! tools (`<tool_call>`), then writes what the Qwen2.5 and Qwen3 templates
//! produce (tests/vectors/chat_tools.json: both templates rendered by
//! Jinja as Hugging Face's `apply_chat_template` does).
//!
//! Message text is data: [`format`] writes the template's own text with
//! `write_str` and everything that came from the messages and the tools
//! (content, tool results, tool names and arguments, the tools' JSON) with
//! [`ChatWrite::data`], so a tokenizer given the data ranges
//! ([`crate::tokenizer::Tokenizer::encode_each_data`]) never reads
//! `<|im_start|>` typed in a message as a control token: a message cannot
//! forge a turn. Only the template's markers, and the image placeholders a
//! message's `images` places, are control tokens.

use crate::json::{write_python_json, Value};
use core::fmt::{self, Write};
use core::ops::Range;

/// Where an image stands in a prompt (Qwen3-VL's chat template): the tokens
/// the server and `kestrel run` expand to the image's tokens.
pub const IMAGE_PLACEHOLDER: &str = "<|vision_start|><|image_pad|><|vision_end|>";

/// Where [`format`] writes: the template's text through `fmt::Write`, the
/// messages' text through [`ChatWrite::data`].
pub trait ChatWrite: Write {
    /// Text from a message or a tool: data, never control tokens.
    fn data(&mut self, s: &str) -> fmt::Result;
}

/// `fmt::Write` into a [`ChatWrite`]'s data (for `write!` and JSON).
struct Data<'w>(&'w mut dyn ChatWrite);

impl Write for Data<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.data(s)
    }
}

/// Adds the byte range `at..at + len` to `ranges[..*n]`, merged into the
/// last range when it continues it; false when there is no room.
pub fn push_range(ranges: &mut [Range<usize>], n: &mut usize, at: usize, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    if let Some(last) = n.checked_sub(1).and_then(|i| ranges.get_mut(i)) {
        if last.end == at {
            last.end = at + len;
            return true;
        }
    }
    match ranges.get_mut(*n) {
        Some(r) => {
            *r = at..at + len;
            *n += 1;
            true
        }
        None => false,
    }
}

/// Who speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Instructions.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's answer to the model's call.
    Tool,
}

impl Role {
    /// The role's name in the format.
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// A function call the model made (in an assistant turn).
#[derive(Clone, Copy, Debug)]
pub struct ToolCall<'a> {
    /// The function's name.
    pub name: &'a str,
    /// Its arguments: a JSON value (an object), written as the template's
    /// `tojson` writes it.
    pub arguments: Value<'a>,
}

/// One turn.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    /// Speaker.
    pub role: Role,
    /// Text (data: never control tokens).
    pub content: &'a str,
    /// The calls of an assistant turn (empty otherwise).
    pub tool_calls: &'a [ToolCall<'a>],
    /// Where the turn's images stand: byte offsets into `content`, in
    /// order (an offset past the end or inside a character: at the end),
    /// each written as [`IMAGE_PLACEHOLDER`].
    pub images: &'a [usize],
}

impl<'a> Message<'a> {
    /// A turn of text.
    pub fn text(role: Role, content: &'a str) -> Message<'a> {
        Message {
            role,
            content,
            tool_calls: &[],
            images: &[],
        }
    }
}

/// Writes a message's content as data, with its image placeholders.
fn content(out: &mut dyn ChatWrite, m: &Message) -> fmt::Result {
    let mut done = 0;
    for &at in m.images {
        let at = at.clamp(done, m.content.len());
        let at = (at..=m.content.len())
            .find(|&i| m.content.is_char_boundary(i))
            .unwrap_or(m.content.len());
        // `get`, not indexing: both ends are char boundaries, and no
        // panicking slice pulls core's slice-error formatting (2.9 KB of
        // the freestanding C host) in.
        out.data(m.content.get(done..at).unwrap_or_default())?;
        out.write_str(IMAGE_PLACEHOLDER)?;
        done = at;
    }
    out.data(m.content.get(done..).unwrap_or_default())
}

/// What the chat template implies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChatStyle<'t> {
    /// Inserted as the system turn when the conversation has none.
    pub default_system: Option<&'t str>,
    /// The template handles `enable_thinking` (Qwen3).
    pub thinking_switch: bool,
    /// The template renders tools and tool calls.
    pub tools: bool,
}

/// What closes an answer that did not end on its own (cut by a token
/// limit, cancelled, or the context) before the next turn: the end-of-turn
/// marker the model would have written, written by [`format_turn`] (the
/// one place: `kestrel chat` and the embedding facade's `chat_turn`).
pub const END_OF_TURN: &str = "<|im_end|>";

const QWEN25_SYSTEM: &str = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

/// The tools section of the system turn, around the tools' JSON lines.
const TOOLS_HEAD: &str = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>";
const TOOLS_TAIL: &str = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

impl<'t> ChatStyle<'t> {
    /// Reads the style from a chat template's text.
    pub fn from_template(template: &'t [u8]) -> ChatStyle<'t> {
        let has = |s: &str| template.windows(s.len()).any(|w| w == s.as_bytes());
        ChatStyle {
            default_system: has(QWEN25_SYSTEM).then_some(QWEN25_SYSTEM),
            thinking_switch: has("enable_thinking"),
            tools: has("<tool_call>"),
        }
    }
}

/// Writes `messages` in ChatML and, when `generation_prompt`, opens the
/// assistant's turn. `tools` (each a tool's JSON object, as the request
/// gave it) go in the system turn; the caller checks `style.tools` first.
/// `think = Some(false)` on a thinking model adds the empty
/// `<think>\n\n</think>\n\n` block (thinking off), as Qwen3's template does
/// for `enable_thinking=false`.
pub fn format(
    style: &ChatStyle,
    messages: &[Message],
    tools: &[Value],
    generation_prompt: bool,
    think: Option<bool>,
    out: &mut dyn ChatWrite,
) -> fmt::Result {
    let first_system = messages.first().filter(|m| m.role == Role::System);
    if !tools.is_empty() {
        out.write_str("<|im_start|>system\n")?;
        match first_system {
            Some(m) => {
                content(out, m)?;
                out.write_str("\n\n")?;
            }
            None => {
                if let Some(sys) = style.default_system {
                    write!(out, "{sys}\n\n")?;
                }
            }
        }
        out.write_str(TOOLS_HEAD)?;
        for t in tools {
            out.write_char('\n')?;
            write_python_json(&mut Data(out), t)?;
        }
        out.write_str(TOOLS_TAIL)?;
    } else if first_system.is_none() {
        if let Some(sys) = style.default_system {
            write!(out, "<|im_start|>system\n{sys}<|im_end|>\n")?;
        }
    }
    for (i, m) in messages.iter().enumerate() {
        let is_tool = |j: Option<usize>| {
            j.and_then(|j| messages.get(j))
                .is_some_and(|m| m.role == Role::Tool)
        };
        match m.role {
            // Written in the tools' system turn.
            Role::System if i == 0 && !tools.is_empty() => {}
            Role::Tool => {
                if !is_tool(i.checked_sub(1)) {
                    out.write_str("<|im_start|>user")?;
                }
                out.write_str("\n<tool_response>\n")?;
                content(out, m)?;
                out.write_str("\n</tool_response>")?;
                if !is_tool(Some(i + 1)) {
                    out.write_str("<|im_end|>\n")?;
                }
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                out.write_str("<|im_start|>assistant\n")?;
                if !m.content.is_empty() {
                    content(out, m)?;
                    out.write_char('\n')?;
                }
                for (j, call) in m.tool_calls.iter().enumerate() {
                    if j > 0 {
                        out.write_char('\n')?;
                    }
                    out.write_str("<tool_call>\n{\"name\": \"")?;
                    out.data(call.name)?;
                    out.write_str("\", \"arguments\": ")?;
                    write_python_json(&mut Data(out), &call.arguments)?;
                    out.write_str("}\n</tool_call>")?;
                }
                out.write_str("<|im_end|>\n")?;
            }
            _ => {
                writeln!(out, "<|im_start|>{}", m.role.name())?;
                content(out, m)?;
                out.write_str("<|im_end|>\n")?;
            }
        }
    }
    if generation_prompt {
        out.write_str("<|im_start|>assistant\n")?;
        if style.thinking_switch && think == Some(false) {
            out.write_str("<think>\n\n</think>\n\n")?;
        }
    }
    Ok(())
}

/// One user turn of a conversation, the one place its shape is decided
/// (`kestrel chat`, the embedding API): on an empty conversation
/// (`first`) the system turn (`system`, else the template's default) and
/// the message; after earlier turns, the last answer closed with
/// [`END_OF_TURN`] when it did not end on its own (`answer_open`: cut by a
/// token limit or cancelled), ChatML's newline and the message with no
/// system turn; then the opened assistant turn (`think` as [`format`]
/// takes it). The first turn is what [`format`] writes for `[system,
/// user]` (`kestrel run`).
pub fn format_turn(
    style: &ChatStyle,
    system: Option<&str>,
    user: &Message,
    first: bool,
    answer_open: bool,
    think: Option<bool>,
    out: &mut dyn ChatWrite,
) -> fmt::Result {
    let both = [Message::text(Role::System, system.unwrap_or("")), *user];
    let msgs = match system.filter(|_| first) {
        Some(_) => &both[..],
        None => &both[1..],
    };
    format_turns(style, msgs, first, answer_open, think, out)
}

/// [`format_turn`] for any messages (system, user, assistant, tool; no
/// tools' schemas): on an empty conversation (`first`) as [`format`]
/// writes them (the template's default system turn when the first is not
/// one); after earlier turns, the last answer closed when `answer_open`,
/// ChatML's newline and the messages; then the opened assistant turn.
pub fn format_turns(
    style: &ChatStyle,
    messages: &[Message],
    first: bool,
    answer_open: bool,
    think: Option<bool>,
    out: &mut dyn ChatWrite,
) -> fmt::Result {
    if !first {
        if answer_open {
            out.write_str(END_OF_TURN)?;
        }
        out.write_str("\n")?;
    }
    let style = ChatStyle {
        default_system: style.default_system.filter(|_| first),
        ..*style
    };
    format(&style, messages, &[], true, think, out)
}

/// A [`ChatWrite`] into a byte buffer, the data's byte ranges into a
/// range buffer; fails when either is full.
pub struct BufWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
    data: &'b mut [Range<usize>],
    n_data: usize,
}

impl<'b> BufWriter<'b> {
    /// Writes into `buf`, the data ranges into `data` (adjacent data is
    /// one range: a turn takes one per text between images).
    pub fn new(buf: &'b mut [u8], data: &'b mut [Range<usize>]) -> Self {
        BufWriter {
            buf,
            len: 0,
            data,
            n_data: 0,
        }
    }

    /// The text written.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }

    /// The byte ranges of the text that are data.
    pub fn data_ranges(&self) -> &[Range<usize>] {
        &self.data[..self.n_data]
    }
}

impl Write for BufWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self
            .len
            .checked_add(s.len())
            .filter(|&e| e <= self.buf.len())
            .ok_or(fmt::Error)?;
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl ChatWrite for BufWriter<'_> {
    fn data(&mut self, s: &str) -> fmt::Result {
        let at = self.len;
        if !push_range(self.data, &mut self.n_data, at, s.len()) {
            return Err(fmt::Error);
        }
        self.write_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_turn_has_the_system_turn_and_a_later_one_follows_the_answer() {
        let style = ChatStyle {
            default_system: Some("S"),
            ..ChatStyle::default()
        };
        let user = Message::text(Role::User, "hi");
        let turn = |system, first| {
            let mut buf = [0u8; 256];
            let mut ranges: [Range<usize>; 4] = core::array::from_fn(|_| 0..0);
            let mut w = BufWriter::new(&mut buf, &mut ranges);
            format_turn(&style, system, &user, first, false, None, &mut w).unwrap();
            let mut out = [0u8; 256];
            let n = w.as_str().len();
            out[..n].copy_from_slice(w.as_str().as_bytes());
            (out, n)
        };
        let (a, n) = turn(None, true);
        assert_eq!(
            core::str::from_utf8(&a[..n]).unwrap(),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        let (a, n) = turn(Some("T"), true);
        assert!(core::str::from_utf8(&a[..n])
            .unwrap()
            .starts_with("<|im_start|>system\nT<|im_end|>"));
        let (a, n) = turn(Some("T"), false);
        assert_eq!(
            core::str::from_utf8(&a[..n]).unwrap(),
            "\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn qwen25_default_system_and_qwen3_thinking() {
        let mut buf = [0u8; 512];
        let mut ranges: [Range<usize>; 8] = core::array::from_fn(|_| 0..0);
        let style = ChatStyle::from_template(b"{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}");
        let mut w = BufWriter::new(&mut buf, &mut ranges);
        format(
            &style,
            &[Message::text(Role::User, "hi")],
            &[],
            true,
            None,
            &mut w,
        )
        .unwrap();
        assert_eq!(
            w.as_str(),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        let style = ChatStyle::from_template(
            b"{%- if enable_thinking is defined and enable_thinking is false %}",
        );
        let mut buf = [0u8; 512];
        let mut ranges: [Range<usize>; 8] = core::array::from_fn(|_| 0..0);
        let mut w = BufWriter::new(&mut buf, &mut ranges);
        let msgs = [
            Message::text(Role::System, "be brief"),
            Message::text(Role::User, "2+2?"),
        ];
        format(&style, &msgs, &[], true, Some(false), &mut w).unwrap();
        assert_eq!(
            w.as_str(),
            "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        );
        // The two contents are data.
        let text = w.as_str();
        let data: [&str; 2] = core::array::from_fn(|i| &text[w.data_ranges()[i].clone()]);
        assert_eq!(data, ["be brief", "2+2?"]);
        // No room for the text, or for the data ranges (never unmarked
        // data): an error.
        let mut ranges: [Range<usize>; 8] = core::array::from_fn(|_| 0..0);
        for (text_room, range_room) in [(8, 8), (512, 0)] {
            let mut buf = [0u8; 512];
            let mut w = BufWriter::new(&mut buf[..text_room], &mut ranges[..range_room]);
            assert!(format(&style, &msgs, &[], true, None, &mut w).is_err());
        }
    }
}
