//! Tools and tool calls in the prompt: `kestrel_core::chat::format` writes
//! what the Qwen2.5 and Qwen3 chat templates render through Hugging Face's
//! Jinja environment, for every case of tests/vectors/chat/chat_tools.json
//! (made by gen_chat_tools.py there: tools with and without a system
//! message, assistant turns with calls and text, consecutive tool results,
//! nested arguments with escapes, non-ASCII text). The messages are read
//! from the vectors as the server reads a request (arguments as JSON text).

use kestrel_core::chat::{self, ChatStyle, Message, Role, ToolCall};
use kestrel_core::json::{self, Value};

const VECTORS: &[u8] = include_bytes!("../vectors/chat/chat_tools.json");

/// A message's role, text and calls (name, arguments as JSON text).
type OwnedMessage = (Role, String, Vec<(String, String)>);

fn text(v: Option<Value>) -> String {
    v.and_then(|s| s.as_str())
        .map(|s| s.chars().collect())
        .unwrap_or_default()
}

#[test]
fn tools_and_calls_render_as_the_templates_do() {
    let root = json::parse(VECTORS).unwrap();
    let templates = root.get("templates").unwrap();
    let mut checked = 0;
    for case in root.get("cases").unwrap().iter_array().unwrap() {
        let name = text(case.get("name"));
        let tools: Vec<Value> = match case.get("tools") {
            Some(Value::Array(a)) => a.iter().collect(),
            _ => Vec::new(),
        };
        // Owned texts first, then the messages borrowing them.
        let raw: Vec<OwnedMessage> = case
            .get("messages")
            .unwrap()
            .iter_array()
            .unwrap()
            .map(|m| {
                let role = match text(m.get("role")).as_str() {
                    "system" => Role::System,
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    "tool" => Role::Tool,
                    r => panic!("role {r}"),
                };
                let calls = m
                    .get("tool_calls")
                    .and_then(|c| c.iter_array())
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let f = c.get("function").unwrap();
                        (text(f.get("name")), text(f.get("arguments")))
                    })
                    .collect();
                (role, text(m.get("content")), calls)
            })
            .collect();
        let calls: Vec<Vec<ToolCall>> = raw
            .iter()
            .map(|(_, _, c)| {
                c.iter()
                    .map(|(name, args)| ToolCall {
                        name,
                        arguments: json::parse(args.as_bytes()).unwrap(),
                    })
                    .collect()
            })
            .collect();
        let msgs: Vec<Message> = raw
            .iter()
            .zip(&calls)
            .map(|((role, content, _), c)| Message {
                role: *role,
                content,
                tool_calls: c,
                images: &[],
            })
            .collect();
        for family in ["qwen2.5", "qwen3"] {
            let template = text(templates.get(family));
            let style = ChatStyle::from_template(template.as_bytes());
            assert!(style.tools, "{family}");
            let mut got = kestrel::generate::ChatText::default();
            chat::format(&style, &msgs, &tools, true, None, &mut got).unwrap();
            let want = text(case.get("rendered").unwrap().get(family));
            assert_eq!(got.text, want, "{family}: {name}");
            checked += 1;
        }
    }
    assert_eq!(checked, 12);
}
