//! The Qwen chat format (ChatML): `<|im_start|>role\ncontent<|im_end|>\n`,
//! an optional default system prompt, and Qwen3's thinking switch.
//!
//! The VQF keeps the model's Jinja chat template; Kestrel does not run
//! Jinja. It reads two facts from the template text: the default system
//! prompt Qwen2.5 templates insert when a conversation has none, and whether
//! the template knows `enable_thinking` (Qwen3), then writes the format the
//! template produces for plain text conversations.

use core::fmt::{self, Write};

/// Who speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Instructions.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The role's name in the format.
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One turn.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    /// Speaker.
    pub role: Role,
    /// Text.
    pub content: &'a str,
}

/// What the chat template implies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChatStyle<'t> {
    /// Inserted as the system turn when the conversation has none.
    pub default_system: Option<&'t str>,
    /// The template handles `enable_thinking` (Qwen3).
    pub thinking_switch: bool,
}

const QWEN25_SYSTEM: &str = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

impl<'t> ChatStyle<'t> {
    /// Reads the style from a chat template's text.
    pub fn from_template(template: &'t [u8]) -> ChatStyle<'t> {
        let text = core::str::from_utf8(template).unwrap_or("");
        ChatStyle {
            default_system: text.contains(QWEN25_SYSTEM).then_some(QWEN25_SYSTEM),
            thinking_switch: text.contains("enable_thinking"),
        }
    }
}

/// Writes `messages` in ChatML and, when `generation_prompt`, opens the
/// assistant's turn. `think = Some(false)` on a thinking model adds the
/// empty `<think>\n\n</think>\n\n` block (thinking off), as Qwen3's template
/// does for `enable_thinking=false`.
pub fn format(
    style: &ChatStyle,
    messages: &[Message],
    generation_prompt: bool,
    think: Option<bool>,
    out: &mut dyn Write,
) -> fmt::Result {
    let has_system = messages.first().is_some_and(|m| m.role == Role::System);
    if !has_system {
        if let Some(sys) = style.default_system {
            write!(out, "<|im_start|>system\n{sys}<|im_end|>\n")?;
        }
    }
    for m in messages {
        write!(
            out,
            "<|im_start|>{}\n{}<|im_end|>\n",
            m.role.name(),
            m.content
        )?;
    }
    if generation_prompt {
        out.write_str("<|im_start|>assistant\n")?;
        if style.thinking_switch && think == Some(false) {
            out.write_str("<think>\n\n</think>\n\n")?;
        }
    }
    Ok(())
}

/// A `fmt::Write` into a byte buffer; fails when full.
pub struct BufWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> BufWriter<'b> {
    /// Writes into `buf`.
    pub fn new(buf: &'b mut [u8]) -> Self {
        BufWriter { buf, len: 0 }
    }

    /// The text written.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen25_default_system_and_qwen3_thinking() {
        let mut buf = [0u8; 512];
        let style = ChatStyle::from_template(b"{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}");
        let mut w = BufWriter::new(&mut buf);
        format(
            &style,
            &[Message {
                role: Role::User,
                content: "hi",
            }],
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
        let mut w = BufWriter::new(&mut buf);
        let msgs = [
            Message {
                role: Role::System,
                content: "be brief",
            },
            Message {
                role: Role::User,
                content: "2+2?",
            },
        ];
        format(&style, &msgs, true, Some(false), &mut w).unwrap();
        assert_eq!(
            w.as_str(),
            "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        );
        let mut tiny = [0u8; 8];
        assert!(format(&style, &msgs, true, None, &mut BufWriter::new(&mut tiny)).is_err());
    }
}
