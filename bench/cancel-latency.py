"""How long a cancelled feed takes to return, through the C ABI (ctypes, one thread):
python3 bench/cancel-latency.py LIBRARY MODEL [ROUNDS] [BATCH]
(LIBRARY: target/capi/libkestrel-x86_64-linux.so from `bash scripts/capi.sh build`; MODEL: a VQF file.)

Per round: a fresh engine feeds a prompt of about 1,000 tokens (source text) in chunks of BATCH tokens
(default 128, the config's default) on a thread of its own; the main thread calls kestrel_cancel at a
delay that moves through the rounds (0.30 s, 0.37 s, ... so the cancel lands at different places of a
chunk), then waits for the feed to return. Prints, per round, the delay, the time from the cancel to the
feed's return and the prompt tokens the feed kept (from kestrel_error); then the median and the largest
latency, and the time one chunk takes (a whole feed's time over its chunks), for comparison."""
import ctypes as C, os, statistics, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capi_engine import Engines, U, Z  # noqa: E402

lib, path = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
batch = int(sys.argv[4]) if len(sys.argv) > 4 else 128
engines = Engines(lib, path, context=2048, batch=batch, threads=1)
k, engine = engines.k, engines.open


def tokens(e, text):
    ids, n = (U * 8192)(), Z()
    b = text.encode()
    assert k.kestrel_tokenize(e, b, Z(len(b)), 0, ids, Z(8192), C.byref(n)) == 0, k.kestrel_error(e)
    return list(ids[: n.value])


source = open(__file__.replace("bench/cancel-latency.py", "core/src/generate.rs")).read()
e = engine()
ids = tokens(e, source[:6000])[:1000]
arr = (U * len(ids))(*ids)
t = time.perf_counter()
assert k.kestrel_feed(e, arr, Z(len(ids))) == 0, k.kestrel_error(e)
chunk = (time.perf_counter() - t) / -(-len(ids) // batch)
k.kestrel_close(e)
engines.release()
latencies = []
for r in range(rounds):
    e = engine()
    done = {}

    def run():
        done["status"] = k.kestrel_feed(e, arr, Z(len(ids)))
        done["at"] = time.perf_counter()

    th = threading.Thread(target=run)
    delay = 0.30 + 0.07 * r
    th.start()
    time.sleep(delay)
    cancelled_at = time.perf_counter()
    k.kestrel_cancel(e)
    th.join()
    latency = done["at"] - cancelled_at
    latencies.append(latency)
    print(f"delay {delay:.2f} s: returned {1e3 * latency:7.1f} ms after the cancel, status {done['status']}: "
          f"{k.kestrel_error(e).decode()}")
    k.kestrel_close(e)
    engines.release()
print(f"cancel to return: median {1e3 * statistics.median(latencies):.1f} ms, largest {1e3 * max(latencies):.1f} ms; "
      f"one chunk of {batch} tokens: {1e3 * chunk:.0f} ms ({len(ids)} tokens, one thread)")
