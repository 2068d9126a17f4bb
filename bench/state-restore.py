"""Restoring a saved conversation against prefilling it again, through the C ABI (ctypes, one thread):
python3 bench/state-restore.py LIBRARY MODEL [TOKENS] [ROUNDS]
(LIBRARY: target/capi/libkestrel-x86_64-linux.so from `bash scripts/capi.sh build`; MODEL: a VQF file.)

Per round: engine A feeds a conversation of about TOKENS tokens (one user turn of source text) and answers
it (16 tokens, greedy), then saves its state (kestrel_state_save). Engine B restores it (kestrel_state_load)
and answers a next turn; engine C prefills the whole conversation again and answers the same next turn
(the same ids: B's, which close A's answer cut by its 16 tokens first).
The answers (16 tokens) must be the same tokens. Prints the medians of: A's prefill, the save, the
restore, B's next turn to its first token (the turn's feed and one token), C's prefill of the
conversation and its next turn to its first token; and the time to the next turn's first token after a
restore against after a prefill again."""
import ctypes as C, os, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capi_engine import Engines, P, U, Z  # noqa: E402

lib, path = sys.argv[1], sys.argv[2]
want = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
engines = Engines(lib, path, context=4096, temperature=0.0)
k, engine = engines.k, engines.open


def ok(e, st, allowed=(0,)):
    assert st in allowed, (st, k.kestrel_error(e))


def turn(e, text):
    ids, n = (U * 8192)(), Z()
    b = text.encode()
    ok(e, k.kestrel_chat_turn(e, None, Z(0), b, Z(len(b)), ids, Z(8192), C.byref(n)))
    return list(ids[: n.value])


def feed(e, ids):
    arr = (U * len(ids))(*ids)
    ok(e, k.kestrel_feed(e, arr, Z(len(ids))))


def answer(e, n=16):
    gen = U()
    ok(e, k.kestrel_generate(e, U(n), None, None, C.byref(gen)), (0, 1))
    return gen.value


def history(e):
    p, n = C.POINTER(U)(), Z()
    ok(e, k.kestrel_history(e, C.byref(p), C.byref(n)))
    return p[: n.value]


# About `want` tokens of source text: this script's own repository's core.
source = open(__file__.replace("bench/state-restore.py", "core/src/generate.rs")).read()
probe = engine()
text = source[: 4 * want]
while len(turn(probe, "Explain this code:\n" + text)) > want and len(text) > 100:
    text = text[: int(len(text) * 0.97)]
first_turn = "Explain this code:\n" + text
next_turn = "Now summarize it in one sentence."
times = {k_: [] for k_ in ("prefill", "save", "restore", "next turn after restore", "prefill again", "next turn after prefill again")}
for _ in range(rounds):
    a, b, c = engine(), engine(), engine()
    ids = turn(a, first_turn)
    t = time.perf_counter(); feed(a, ids); times["prefill"].append(time.perf_counter() - t)
    answer(a)
    st_size = Z()
    ok(a, k.kestrel_state_size(a, C.byref(st_size)))
    buf, wrote = C.create_string_buffer(st_size.value), Z()
    t = time.perf_counter()
    ok(a, k.kestrel_state_save(a, buf, st_size, C.byref(wrote)))
    times["save"].append(time.perf_counter() - t)
    conversation = history(a)
    t = time.perf_counter(); ok(b, k.kestrel_state_load(b, buf, wrote)); times["restore"].append(time.perf_counter() - t)
    t = time.perf_counter()
    # The next turn as B formats it (it closes A's cut answer first); C is
    # fed the same ids.
    next_ids = turn(b, next_turn)
    feed(b, next_ids); nb = answer(b, 1)
    times["next turn after restore"].append(time.perf_counter() - t)
    nb += answer(b, 15)
    t = time.perf_counter(); feed(c, conversation); times["prefill again"].append(time.perf_counter() - t)
    t = time.perf_counter()
    feed(c, next_ids); nc = answer(c, 1)
    times["next turn after prefill again"].append(time.perf_counter() - t)
    nc += answer(c, 15)
    hb, hc = history(b), history(c)
    assert hb == hc and nb == nc, "the restored answer differs from the re-prefilled one"
    for e in (a, b, c, probe) if _ == rounds - 1 else (a, b, c):
        k.kestrel_close(e)
    engines.release() if _ < rounds - 1 else None
print(f"conversation: {len(conversation)} tokens ({len(ids)} of the first turn, then a 16-token answer); "
      f"state: {wrote.value:,} bytes; kernels: {engines.kernels}, 1 thread; {rounds} rounds")
med = {k_: statistics.median(v) for k_, v in times.items()}
for k_, v in med.items():
    print(f"{k_:32s} {v * 1000:10.2f} ms")
print(f"restore / prefill of the conversation: 1/{med['prefill again'] / med['restore']:.0f}")
print(f"first token of the next turn, restore + turn / prefill again + turn: "
      f"1/{(med['prefill again'] + med['next turn after prefill again']) / (med['restore'] + med['next turn after restore']):.1f}")
