"""A follow-up turn after a long conversation (Python standard library only).

Usage: python3 serve_followup.py HOST:PORT PROMPT_WORDS ROUNDS

Against a `kestrel serve --parallel 1` on loopback, ROUNDS times:
1. a conversation's first turn: a long user message (PROMPT_WORDS words),
   16 greedy tokens;
2. the follow-up: the same messages, the answer, a short new question;
   streamed, max_tokens 1: its time to first token and its cached tokens
   (what the server reused: for Qwen3.5 the slot's Gated DeltaNet state);
3. a cold prompt of the follow-up's length that shares nothing (other
   words): its time to first token is a prefill of the whole conversation.
Prints each round and the medians, with the ratio follow-up / cold.
"""

import http.client
import json
import statistics
import sys
import time

from serve_admission import long_prompt, request


def ttft(addr, messages):
    t0 = time.monotonic()
    first = []
    usage = request(
        addr,
        {"messages": messages, "max_tokens": 1, "temperature": 0, "stream": True,
         "stream_options": {"include_usage": True}},
        lambda t: first.append(t),
    )
    return (first[0] if first else time.monotonic()) - t0, usage


def answer_of(addr, messages):
    """One greedy answer of 16 tokens: its usage and its text, as the
    client has it."""
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=600)
    c.request("POST", "/v1/chat/completions",
              json.dumps({"messages": messages, "max_tokens": 16, "temperature": 0}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.status
    body = json.loads(r.read())
    c.close()
    return body["usage"], body["choices"][0]["message"]["content"]


def main():
    addr, words, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    warm, cold = [], []
    for r in range(rounds):
        conv = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": long_prompt(words, 10 + r)}]
        first, answer = answer_of(addr, conv)
        follow = conv + [{"role": "assistant", "content": answer},
                         {"role": "user", "content": "And then?"}]
        t_warm, u_warm = ttft(addr, follow)
        other = [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": long_prompt(words, 100 + r)},
                 {"role": "assistant", "content": answer},
                 {"role": "user", "content": "And then?"}]
        t_cold, u_cold = ttft(addr, other)
        warm.append(t_warm)
        cold.append(t_cold)
        print(f"round {r}: conversation {first['prompt_tokens']} + 16 tokens; follow-up "
              f"{u_warm['prompt_tokens']} tokens, {u_warm['prompt_tokens_details']['cached_tokens']} "
              f"cached, first token {t_warm * 1e3:.1f} ms; cold {u_cold['prompt_tokens']} tokens, "
              f"{u_cold['prompt_tokens_details']['cached_tokens']} cached, {t_cold * 1e3:.1f} ms")
    w, c = statistics.median(warm), statistics.median(cold)
    print(f"median: follow-up {w * 1e3:.1f} ms, cold {c * 1e3:.1f} ms, ratio 1/{c / w:.1f}")


if __name__ == "__main__":
    main()
