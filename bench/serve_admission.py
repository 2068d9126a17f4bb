"""A long prompt admitted beside running streams (Python standard library only).

Usage: python3 serve_admission.py HOST:PORT PROMPT_WORDS STREAMS

Against a `kestrel serve --parallel STREAMS+1` on loopback:
1. alone: a long prompt (PROMPT_WORDS words; max_tokens 1) on the idle
   server: its time to first token is its prefill alone;
2. STREAMS streaming answers (greedy, 400 tokens) start; once each has sent
   a few tokens, another long prompt of the same length (other words, so
   nothing is reused) is sent, streaming, max_tokens 1;
3. prints: the prompt's tokens, its prefill alone, its time to first token
   beside the streams (and the ratio), the streams' median gap between
   tokens before the admission (one decode step), and their longest gap
   while the prompt was admitted, against one chunk's share of the prefill
   alone plus one step.
"""

import http.client
import json
import statistics
import sys
import threading
import time

CHUNK = 128  # kestrel_core::generate::PREFILL_CHUNK


def long_prompt(words, salt):
    vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
    return f"Text {salt}: " + " ".join(vocab[(i * 7 + salt) % len(vocab)] for i in range(words))


def request(addr, body, on_event=None):
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=600)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.status
    usage = None
    if body.get("stream"):
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                usage = ev["usage"]
            for ch in ev.get("choices", []):
                if ch.get("delta", {}).get("content") and on_event:
                    on_event(time.monotonic())
    else:
        usage = json.loads(r.read())["usage"]
    c.close()
    return usage


def main():
    addr, words, streams = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    opts = {"model": "m", "temperature": 0, "stream_options": {"include_usage": True}}

    # A warm-up (the model's pages, the arena), then 1. alone.
    request(addr, dict(opts, max_tokens=4, messages=[{"role": "user", "content": "Hi"}]))
    t0 = time.monotonic()
    usage = request(addr, dict(opts, max_tokens=1,
                               messages=[{"role": "user", "content": long_prompt(words, 1)}]))
    alone = time.monotonic() - t0
    tokens = usage["prompt_tokens"]

    # 2. Beside the streams.
    times = [[] for _ in range(streams)]
    started = threading.Barrier(streams + 1)

    def stream(i):
        first = [True]

        def on(t):
            times[i].append(t)
            if len(times[i]) == 5 and first[0]:
                first[0] = False
                started.wait()
        request(addr, dict(opts, stream=True, max_tokens=400,
                           messages=[{"role": "user", "content": f"Count from {i} to 1000, one per line."}]),
                on)

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    started.wait()
    sent = time.monotonic()
    first = []
    request(addr, dict(opts, stream=True, max_tokens=1,
                       messages=[{"role": "user", "content": long_prompt(words, 2)}]),
            lambda t: first.append(t))
    ttft = first[0] - sent
    for t in threads:
        t.join()

    before = [b - a for ts in times for a, b in zip(ts, ts[1:]) if b < sent]
    step = statistics.median(before)
    during = [b - a for ts in times for a, b in zip(ts, ts[1:]) if b >= sent and a <= first[0] + step]
    longest = max(during) if during else float("nan")
    chunks = -(-tokens // CHUNK)
    bound = alone / chunks + step
    print(f"prompt: {tokens} tokens ({chunks} chunks of {CHUNK}); {streams} streams beside it")
    print(f"prefill alone: {alone:.2f} s; time to first token beside the streams: {ttft:.2f} s "
          f"({ttft / alone:.2f}x)")
    print(f"streams: median gap {step * 1e3:.0f} ms before; longest gap while the prompt was "
          f"admitted {longest * 1e3:.0f} ms, against the mean chunk ({alone / chunks * 1e3:.0f} ms) "
          f"+ one step = {bound * 1e3:.0f} ms ({longest / bound:.2f}x)")
    # Each stream waits once per chunk: its gaps longer than 3 steps.
    waits = sorted(g for g in during if g > 3 * step)
    if waits:
        print(f"gaps over 3 steps per stream: {len(waits) / streams:.1f} (chunks: {chunks}); "
              f"their median {statistics.median(waits) * 1e3:.0f} ms, shortest {waits[0] * 1e3:.0f} ms, "
              f"longest {waits[-1] * 1e3:.0f} ms (later chunks attend to more positions)")


if __name__ == "__main__":
    main()
