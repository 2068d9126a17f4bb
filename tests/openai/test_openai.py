"""`kestrel serve` driven by the official `openai` Python client.

Usage: python test_openai.py KESTREL_BINARY MODEL.vqf

Starts the server on a loopback port chosen by the OS, then checks models,
chat (whole and streamed), completions (whole and streamed), usage, and a
wrong API key; every answer must equal `kestrel run` with the same seed and
settings (its stdout, without the final newline). Exits non-zero on any
failure. Bounded: each request has a 60 s timeout, the whole run < 2 min.
"""

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
    out = subprocess.run(args, capture_output=True, timeout=60, check=True)
    text = out.stdout.decode("utf-8")
    assert text.endswith("\n"), repr(text)
    return text[:-1]


def main():
    binary, model = sys.argv[1], sys.argv[2]
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
        client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key=KEY, max_retries=0, timeout=60)
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
            checks += 2

        want = kestrel_run(binary, model, "Once upon a time", 20, 0.9, 5, raw=True)
        r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=20,
                                      temperature=0.9, seed=5)
        assert r.choices[0].text == want, (r.choices[0].text, want)
        text = "".join(c.choices[0].text for c in client.completions.create(
            model="m", prompt="Once upon a time", max_tokens=20, temperature=0.9, seed=5,
            stream=True) if c.choices)
        assert text == want, (text, want)
        checks += 2

        bad = openai.OpenAI(base_url=f"http://{addr}/v1", api_key="wrong", max_retries=0, timeout=60)
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
        print(f"openai client ({openai.__version__}): {checks} checks passed against {addr}")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
