"""`kestrel serve` driven by the official `openai` Python client.

Usage: python test_openai.py KESTREL_BINARY MODEL.vqf [REAL_MODEL.vqf]

Starts the server on a loopback port chosen by the OS, then checks models,
chat (whole and streamed), completions (whole and streamed), usage, and a
wrong API key; every answer must equal `kestrel run` with the same seed and
settings (its stdout, without the final newline); then unsupported
parameters, log-probabilities and /metrics. With REAL_MODEL (a Qwen2.5
file, whose chat template renders tools): tool calls, whole and streamed,
and a tool result fed back. Exits non-zero on any failure. Bounded: each
request has a timeout.
"""

import json
import re
import subprocess
import sys

import openai

KEY = "test-key-123"


def kestrel_run(binary, model, prompt, n, temp, seed, raw=False):
    args = [binary, "run", model, "-p", prompt, "-n", str(n), "--temp", str(temp),
            "--seed", str(seed), "-t", "1", "--no-pin"]
    if raw:
        args.append("--raw")
    out = subprocess.run(args, capture_output=True, timeout=600, check=True)
    text = out.stdout.decode("utf-8")
    assert text.endswith("\n"), repr(text)
    return text[:-1]


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"}}, "required": ["city"]}}}


def start(binary, model, *extra):
    """A `kestrel serve` on a free port: the process and its address."""
    server = subprocess.Popen(
        [binary, "serve", model, "--port", "0", "--parallel", "2", "-t", "2", "--no-pin",
         "--ctx", "1024", *extra], stderr=subprocess.PIPE, text=True)
    for line in server.stderr:
        m = re.search(r"listening on http://(\S+)", line)
        if m:
            return server, m.group(1)
    raise AssertionError("the server did not start")


def validate(value, schema):
    """The subset of JSON Schema the server's constraint supports."""
    if "enum" in schema:
        assert value in schema["enum"], (value, schema)
        return
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), value
    elif kind == "number":
        assert isinstance(value, (int, float)) and not isinstance(value, bool), value
    elif kind:
        assert isinstance(value, types[kind]), (value, kind)
    if kind in ("integer", "number"):
        assert schema.get("minimum", value) <= value <= schema.get("maximum", value), (value, schema)
        assert value > schema.get("exclusiveMinimum", value - 1), (value, schema)
        assert value < schema.get("exclusiveMaximum", value + 1), (value, schema)
    if kind == "object":
        props = schema.get("properties", {})
        assert set(schema.get("required", [])) <= set(value), (value, schema)
        extra = schema.get("additionalProperties", True)
        assert extra is not False or set(value) <= set(props), (value, schema)
        for k, v in value.items():
            validate(v, props.get(k, extra if isinstance(extra, dict) else {}))
    if kind == "array":
        assert len(value) <= schema.get("maxItems", len(value)), value
        for v in value:
            validate(v, schema.get("items", {}))


def tool_checks(binary, model):
    """Tool calls with the real Qwen2.5-Coder model (its template renders
    tools): a forced call parsed into tool_calls, whole and streamed; the
    tool's result fed back; bad tool definitions are 400s. Then a JSON
    schema answer, greedy and sampled, whole and streamed: it parses and
    validates."""
    server, addr = start(binary, model)
    checks = 0
    try:
        client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key="x", max_retries=0, timeout=600)
        question = [{"role": "user", "content": "What is the weather like in Paris today?"}]
        for choice in ["required", {"type": "function", "function": {"name": "get_weather"}}]:
            r = client.chat.completions.create(model="m", messages=question, tools=[WEATHER],
                                               tool_choice=choice, temperature=0, max_tokens=64)
            c = r.choices[0]
            assert c.finish_reason == "tool_calls", r
            call = c.message.tool_calls[0]
            assert call.type == "function" and call.function.name == "get_weather", call
            assert json.loads(call.function.arguments)["city"] == "Paris", call
            checks += 1
        # Several tools, required: a call of one of them, with an object of arguments.
        now = {"type": "function", "function": {"name": "now", "parameters": {
            "type": "object", "properties": {"zone": {"type": "string", "pattern": "^[A-Z]"}}}}}
        r = client.chat.completions.create(model="m", messages=question, tools=[WEATHER, now],
                                           tool_choice="required", temperature=0, max_tokens=64)
        call2 = r.choices[0].message.tool_calls[0]
        assert r.choices[0].finish_reason == "tool_calls", r
        assert call2.function.name in ("get_weather", "now"), call2
        # The arguments follow the called function's parameters, its `pattern` too.
        validate(json.loads(call2.function.arguments),
                 {"get_weather": WEATHER, "now": now}[call2.function.name]["function"]["parameters"])
        checks += 1
        # Number bounds: the value lands in range, sampled answers too.
        thermostat = {"type": "function", "function": {"name": "set_thermostat", "parameters": {
            "type": "object", "properties": {
                "celsius": {"type": "number", "exclusiveMinimum": 5, "maximum": 30.5},
                "steps": {"type": "integer", "minimum": 10, "maximum": 250}},
            "required": ["celsius", "steps"]}}}
        heat = [{"role": "user", "content": "Make it very hot in here: set the thermostat to 90 degrees."}]
        for seed in range(3):
            r = client.chat.completions.create(
                model="m", messages=heat, tools=[thermostat], tool_choice="required",
                temperature=1.0, seed=seed, max_tokens=64)
            assert r.choices[0].finish_reason == "tool_calls", r
            validate(json.loads(r.choices[0].message.tool_calls[0].function.arguments),
                     thermostat["function"]["parameters"])
        checks += 1
        # Several tools: the arguments follow the called function's own
        # parameters (a union keyed on the name), sampled answers too.
        unit = {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {
                "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"]}}}
        count = {"type": "function", "function": {"name": "count", "parameters": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}
        for seed in range(4):
            r = client.chat.completions.create(
                model="m", messages=question, tools=[unit, count], tool_choice="required",
                temperature=1.0, seed=seed, max_tokens=64)
            c = r.choices[0]
            assert c.finish_reason == "tool_calls", r
            call3 = c.message.tool_calls[0]
            params = {"get_weather": unit, "count": count}[call3.function.name]
            validate(json.loads(call3.function.arguments), params["function"]["parameters"])
        checks += 1
        # parallel_tool_calls: false: the answer ends with its first call.
        r = client.chat.completions.create(
            model="m", messages=question, tools=[unit, count], tool_choice="required",
            parallel_tool_calls=False, temperature=0, max_tokens=64)
        assert r.choices[0].finish_reason == "tool_calls", r
        assert len(r.choices[0].message.tool_calls) == 1, r
        checks += 1
        calls, finish = {}, None
        for chunk in client.chat.completions.create(
                model="m", messages=question, tools=[WEATHER], tool_choice="required",
                temperature=0, max_tokens=64, stream=True):
            for ch in chunk.choices:
                for d in ch.delta.tool_calls or []:
                    entry = calls.setdefault(d.index, {"name": "", "arguments": ""})
                    entry["name"] += d.function.name or ""
                    entry["arguments"] += d.function.arguments or ""
                finish = ch.finish_reason or finish
        assert finish == "tool_calls" and calls[0]["name"] == "get_weather", (calls, finish)
        assert json.loads(calls[0]["arguments"]) == json.loads(call.function.arguments)
        checks += 1
        # The call and its result go back in; the answer is text (or another call).
        follow = question + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": "get_weather", "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": "{\"temperature_c\": 21, \"sky\": \"sunny\"}"}]
        r = client.chat.completions.create(model="m", messages=follow, tools=[WEATHER],
                                           temperature=0, max_tokens=48)
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls"), r
        assert r.usage.prompt_tokens_details.cached_tokens > 0, r.usage
        # auto: the model decides; the answer is well formed either way.
        r = client.chat.completions.create(model="m", messages=question, tools=[WEATHER],
                                           temperature=0, max_tokens=48)
        assert r.choices[0].finish_reason in ("stop", "length", "tool_calls"), r
        checks += 2
        # auto, a call the model opens (logit_bias on `<tool_call>`, id
        # 151657, makes it open one at once): from there the arguments follow
        # the called function's parameters, sampled answers too; with
        # parallel_tool_calls false the answer ends with that call.
        opener = {"151657": 100}
        for seed in range(4):
            r = client.chat.completions.create(
                model="m", messages=question, tools=[unit, count], temperature=1.0, seed=seed,
                max_tokens=64, parallel_tool_calls=False, logit_bias=opener)
            c = r.choices[0]
            assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1, r
            call4 = c.message.tool_calls[0]
            params = {"get_weather": unit, "count": count}[call4.function.name]
            validate(json.loads(call4.function.arguments), params["function"]["parameters"])
        checks += 1
        # parallel_tool_calls (true by default): several calls in one answer
        # (the bias opens another after each), every one following its
        # function's parameters; the last, cut by max_tokens, is text.
        r = client.chat.completions.create(
            model="m", messages=question, tools=[unit, count], tool_choice="required",
            temperature=1.0, seed=5, max_tokens=120, logit_bias=opener)
        c = r.choices[0]
        assert c.finish_reason == "length" and len(c.message.tool_calls) >= 2, r
        for call5 in c.message.tool_calls:
            params = {"get_weather": unit, "count": count}[call5.function.name]
            validate(json.loads(call5.function.arguments), params["function"]["parameters"])
        checks += 1
        # Structured output: the answer parses and validates, whole and streamed.
        person = {"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"},
            "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "level": {"enum": ["junior", "senior"]}},
            "required": ["name", "age", "languages", "level"],
            # Only these keys (OpenAI's strict mode asks for it; without it
            # JSON Schema lets the model add keys of its own).
            "additionalProperties": False}
        fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": person, "strict": True}}
        ask = [{"role": "user", "content": "Describe a fictional Python developer."}]
        for temp in [0, 0.9]:
            r = client.chat.completions.create(model="m", messages=ask, response_format=fmt,
                                               temperature=temp, seed=3, max_tokens=200)
            assert r.choices[0].finish_reason == "stop", r
            validate(json.loads(r.choices[0].message.content), person)
            text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
                model="m", messages=ask, response_format=fmt, temperature=temp, seed=3,
                max_tokens=200, stream=True) if c.choices)
            assert text == r.choices[0].message.content, (text, r)
            checks += 1
        try:
            client.chat.completions.create(model="m", messages=ask, response_format={
                "type": "json_schema", "json_schema": {"name": "p", "strict": True, "schema": {
                    "type": "string", "format": "ipv6"}}})
            raise AssertionError("an unsupported keyword was accepted under strict")
        except openai.BadRequestError as e:
            assert "'format'" in str(e), e
            checks += 1
        # Without strict the keyword is left out and the rest enforced.
        r = client.chat.completions.create(model="m", messages=ask, response_format={
            "type": "json_schema", "json_schema": {"name": "p", "schema": {
                "type": "string", "format": "email", "maxLength": 40}}},
            temperature=0, max_tokens=60)
        if r.choices[0].finish_reason == "stop":
            value = json.loads(r.choices[0].message.content)
            assert isinstance(value, str) and len(value) <= 40, r
        checks += 1
        for bad in [[{"type": "function", "function": {"name": "bad name"}}],
                    [{"type": "code_interpreter"}]]:
            try:
                client.chat.completions.create(model="m", messages=question, tools=bad)
                raise AssertionError(f"{bad} was accepted")
            except openai.BadRequestError as e:
                assert "tools[0]" in str(e), e
                checks += 1
    finally:
        server.terminate()
        server.wait(timeout=10)
    return checks


def main():
    binary, model = sys.argv[1], sys.argv[2]
    real_model = sys.argv[3] if len(sys.argv) > 3 else None
    server = subprocess.Popen(
        [binary, "serve", model, "--port", "0", "--parallel", "2", "-t", "2", "--no-pin",
         "--api-key", KEY, "--ctx", "512"],
        stderr=subprocess.PIPE, text=True)
    try:
        addr = None
        for line in server.stderr:
            m = re.search(r"listening on http://(\S+)", line)
            if m:
                addr = m.group(1)
                break
        assert addr, "the server did not start"
        client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=KEY, max_retries=0, timeout=600)
        checks = 0

        models = client.models.list()
        assert [m.id for m in models.data] == ["m"], models
        checks += 1

        for prompt, temp, seed, n in [("The capital of France", 0.0, 1, 16),
                                      ("Write a haiku about rust.", 0.8, 7, 24),
                                      ("1, 2, 3,", 1.1, 12345, 20)]:
            want = kestrel_run(binary, model, prompt, n, temp, seed)
            r = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}],
                temperature=temp, seed=seed, max_tokens=n)
            got = r.choices[0].message.content
            assert got == want, (prompt, got, want)
            assert r.choices[0].finish_reason in ("stop", "length")
            assert r.usage.completion_tokens <= n and r.usage.prompt_tokens > 0, r.usage
            stream = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}],
                temperature=temp, seed=seed, max_completion_tokens=n, stream=True,
                stream_options={"include_usage": True})
            parts, finish, usage = [], None, None
            for chunk in stream:
                if chunk.usage:
                    usage = chunk.usage
                for c in chunk.choices:
                    if c.delta.content:
                        parts.append(c.delta.content)
                    if c.finish_reason:
                        finish = c.finish_reason
            assert "".join(parts) == want, (prompt, parts, want)
            assert finish == r.choices[0].finish_reason
            assert usage.completion_tokens == r.usage.completion_tokens
            # OpenAI's predicted outputs: the answer itself as the
            # prediction; the same text, the drafts counted in the usage.
            r = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": prompt}],
                temperature=temp, seed=seed, max_tokens=n,
                prediction={"type": "content", "content": want})
            assert r.choices[0].message.content == want, (prompt, r.choices[0].message.content)
            details = r.usage.completion_tokens_details
            assert details.accepted_prediction_tokens > 0 or len(want) < 4, r.usage
            assert details.rejected_prediction_tokens >= 0, r.usage
            checks += 3

        want = kestrel_run(binary, model, "Once upon a time", 20, 0.9, 5, raw=True)
        r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=20,
                                      temperature=0.9, seed=5)
        assert r.choices[0].text == want, (r.choices[0].text, want)
        text = "".join(c.choices[0].text for c in client.completions.create(
            model="m", prompt="Once upon a time", max_tokens=20, temperature=0.9, seed=5,
            stream=True) if c.choices)
        assert text == want, (text, want)
        checks += 2

        bad = openai.OpenAI(base_url=f"http://{addr}/v1", api_key="wrong", max_retries=0, timeout=600)
        try:
            bad.models.list()
            raise AssertionError("a wrong API key was accepted")
        except openai.AuthenticationError:
            checks += 1
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], n=2)
            raise AssertionError("n=2 was accepted")
        except openai.BadRequestError:
            checks += 1
        # logit_bias: +100 on id 11 (",") makes it the greedy answer; a bias
        # out of -100 ..= 100 or an id past the vocabulary is a 400.
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=1,
            temperature=0, logit_bias={"11": 100})
        assert r.choices[0].message.content == ",", r
        checks += 1
        for kwargs, name in [({"logit_bias": {"5": 101}}, "logit_bias"),
                             ({"logit_bias": {"999999": 1}}, "logit_bias"),
                             ({"presence_penalty": 0.5}, "presence_penalty"),
                             ({"extra_body": {"mirostat": 2}}, "mirostat")]:
            try:
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}], **kwargs)
                raise AssertionError(f"{name} was accepted")
            except openai.BadRequestError as e:
                assert name in str(e), e
                checks += 1
        # Parameters that do not change the answer are accepted as clients send them.
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
            user="u1", metadata={"k": "v"}, presence_penalty=0, logit_bias={})
        assert r.choices[0].finish_reason in ("stop", "length")
        checks += 1

        # Log-probabilities: typed by the client, each token's first
        # alternative itself at temperature 0, the same streamed.
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "1, 2, 3,"}], max_tokens=6,
            temperature=0, logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content
        assert len(content) == r.usage.completion_tokens, content
        assert b"".join(bytes(t.bytes) for t in content).decode("utf-8", "replace") == \
            r.choices[0].message.content
        for t in content:
            assert t.logprob <= 0 and len(t.top_logprobs) == 3, t
            assert t.top_logprobs[0].token == t.token and t.top_logprobs[0].logprob == t.logprob
            assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob
        streamed = [t for c in client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "1, 2, 3,"}], max_tokens=6,
            temperature=0, logprobs=True, top_logprobs=3, stream=True)
            for ch in c.choices if ch.logprobs for t in ch.logprobs.content]
        assert [(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in content]
        r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=4,
                                      temperature=0, logprobs=2)
        lp = r.choices[0].logprobs
        assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4, lp
        assert all(len(alts) == 2 and max(alts.values()) == x
                   for alts, x in zip(lp.top_logprobs, lp.token_logprobs)), lp
        checks += 3
        # /metrics: Prometheus text, every sample line `name{labels} value`.
        import urllib.request
        text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=600).read().decode()
        samples = {}
        for line in text.splitlines():
            if line.startswith("#"):
                assert re.match(r"# (HELP|TYPE) kestrel_\w+ ", line), line
                continue
            m = re.fullmatch(r'(kestrel_\w+(?:\{[^}]*\})?) (\S+)', line)
            assert m, line
            samples[m.group(1)] = float(m.group(2))
        assert samples['kestrel_requests_total{endpoint="/v1/chat/completions",status="200"}'] >= 9, samples
        assert samples['kestrel_requests_total{endpoint="/v1/chat/completions",status="400"}'] >= 4
        ttft = samples["kestrel_time_to_first_token_seconds_count"]
        assert ttft >= 12 and samples['kestrel_time_to_first_token_seconds_bucket{le="+Inf"}'] == ttft
        assert samples["kestrel_generated_tokens_total"] == \
            ttft + samples["kestrel_time_between_tokens_seconds_count"]
        assert samples["kestrel_slots"] == 2 and samples["kestrel_kv_positions"] == 1024
        checks += 1
        # Persistent connections: a fresh client's session of 20 requests
        # (whole answers, and /v1/models) rides one connection: the
        # accepted-connections counter moves by 1 (and 2 for the two
        # scrapes' own connections).
        def connections():
            text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=600).read().decode()
            return float(re.search(r"^kestrel_connections_accepted_total (\S+)$", text, re.M).group(1))
        before = connections()
        session = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=KEY, max_retries=0, timeout=600)
        for i in range(20):
            if i % 5 == 4:
                session.models.list()
            else:
                session.completions.create(model="m", prompt="Hi", max_tokens=2, temperature=0)
        session.close()
        after = connections()
        assert after - before == 2, (before, after)
        checks += 1
        if real_model:
            checks += tool_checks(binary, real_model)
        print(f"openai client ({openai.__version__}): {checks} checks passed against {addr}")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
