"""Load test client for `kestrel serve` (Python standard library only).

Usage: python3 serve_load.py HOST:PORT REQUESTS CONCURRENCY MAX_TOKENS

Fires REQUESTS streaming chat requests, CONCURRENCY at a time, and prints
one line: requests/s, time to first token (median, p90), decode tok/s per
stream (mean: completion tokens after the first over the time after the
first), and aggregate decode tok/s (all completion tokens over the wall time).
"""

import http.client
import json
import statistics
import sys
import threading
import time

PROMPTS = [
    "Write a Python function that checks whether a number is prime, with comments.",
    "Explain how a hash map works, step by step.",
    "Write a bash script that backs up a directory with a timestamp.",
    "Describe the differences between TCP and UDP in detail.",
]


def one(addr, i, max_tokens, out):
    host, port = addr.rsplit(":", 1)
    body = json.dumps({
        "model": "m", "stream": True, "max_tokens": max_tokens, "temperature": 0,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
    })
    t0 = time.monotonic()
    c = http.client.HTTPConnection(host, int(port), timeout=600)
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        out.append({"status": r.status})
        return
    first = last = None
    tokens = 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            tokens = ev["usage"]["completion_tokens"]
        for ch in ev.get("choices", []):
            if ch.get("delta", {}).get("content"):
                now = time.monotonic()
                first = first or now
                last = now
    c.close()
    out.append({"status": 200, "ttft": (first or t0) - t0, "tokens": tokens,
                "decode": (tokens - 1) / (last - first) if first and last > first else 0.0})


def main():
    addr, n, k, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    results, lock, next_i = [], threading.Lock(), [0]

    def worker():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= n:
                return
            one(addr, i, max_tokens, results)

    t = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(k)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - t
    ok = [r for r in results if r["status"] == 200]
    ttft = sorted(r["ttft"] * 1e3 for r in ok)
    print(f"| {k} | {len(ok)}/{n} | {wall:.1f} | {len(ok) / wall:.3f} | "
          f"{statistics.median(ttft):.0f} / {ttft[int(0.9 * (len(ttft) - 1))]:.0f} | "
          f"{statistics.mean(r['decode'] for r in ok):.2f} | "
          f"{sum(r['tokens'] for r in ok) / wall:.2f} |")


if __name__ == "__main__":
    main()
