#!/usr/bin/env python3
"""Several `kestrel serve` replicas behind HAProxy, as boards behind a load
balancer (scripts/lb-test.sh; README "Many boards behind a load balancer").

Usage: lb_test.py KESTREL_BINARY MODEL.vqf [REPLICAS]

Starts the replicas on loopback and HAProxy in front of them (health checks
on /health; one conversation kept on one replica by its X-Session-Id header
or, without it, the request's `user` field), then shows:
  1. a session's requests all reach one replica, and its second turn reuses
     the first turn's cached prefix there (usage.prompt_tokens_details);
  2. a replica killed while streams are in flight: how many of those
     streams failed (only the killed replica's), and that every new request,
     including the dead replica's sessions, is answered by the others.
Standard library only. Exits non-zero when a check fails.
"""
import http.client
import json
import os
import re
import socket
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HAPROXY_CFG = """
global
    maxconn 512
defaults
    mode http
    timeout connect 1s
    timeout client 600s
    timeout server 600s
    # A request sent to a replica that is down is sent to another.
    retries 2
    option redispatch
frontend kestrel
    bind 127.0.0.1:{front}
    # The session key: X-Session-Id, else the JSON body's "user" field.
    option http-buffer-request
    http-request set-var(txn.session) req.hdr(X-Session-Id)
    http-request set-var(txn.session) req.body,json_query('$.user') unless {{ var(txn.session) -m found }}
    default_backend replicas
backend replicas
    # Consistent hashing on the session key: a conversation stays on one
    # replica (its KV cache holds the prefix), and losing a replica moves
    # only that replica's sessions.
    balance hash var(txn.session)
    hash-type consistent
    option httpchk GET /health
    http-check expect status 200
    http-response set-header X-Replica %[srv_name]
{servers}
"""


def free_ports(n):
    """`n` distinct free loopback ports: every socket stays bound until all
    are chosen (one at a time, the kernel may hand out a port twice)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_listening(port, proc, what, log=None, timeout=600):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            said = open(log).read()[-2000:] if log else ""
            raise SystemExit(f"{what} exited with {proc.returncode}\n{said}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not listen on {port}")


def chat(port, messages, session=None, user=None, max_tokens=8, stream=False):
    """Status, replica name, and the parsed body (or the SSE text)."""
    body = {"model": "m", "messages": messages, "max_tokens": max_tokens,
            "temperature": 0, "stream": stream}
    headers = {"Content-Type": "application/json"}
    if session:
        headers["X-Session-Id"] = session
    if user:
        body["user"] = user
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", json.dumps(body), headers)
    r = c.getresponse()
    data = r.read().decode()
    return r.status, r.getheader("X-Replica"), (data if stream else json.loads(data))


def main():
    binary, model = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    procs = []
    tmp = tempfile.mkdtemp(prefix="kestrel-lb-")
    try:
        *ports, front = free_ports(n + 1)
        replicas = {}
        for i, port in enumerate(ports):
            p = subprocess.Popen(
                [binary, "serve", model, "--port", str(port), "--parallel", "2", "-t", "1",
                 "--no-pin", "--ctx", "1024"],
                stderr=open(os.path.join(tmp, f"r{i + 1}.log"), "w"))
            procs.append(p)
            replicas[f"r{i + 1}"] = p
        for i, (port, p) in enumerate(zip(ports, procs)):
            log = os.path.join(tmp, f"r{i + 1}.log")
            wait_listening(port, p, f"kestrel serve on {port}", log)
        servers = "\n".join(
            f"    server r{i + 1} 127.0.0.1:{port} check inter 200 fall 2 rise 2"
            for i, port in enumerate(ports))
        cfg = os.path.join(tmp, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(HAPROXY_CFG.format(front=front, servers=servers))
        subprocess.run(["haproxy", "-c", "-q", "-f", cfg], check=True)
        lb = subprocess.Popen(["haproxy", "-db", "-f", cfg], stderr=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL)
        procs.append(lb)
        wait_listening(front, lb, "haproxy")
        time.sleep(1.0)  # the first health checks pass (rise 2, every 200 ms)

        # 1. Sticky sessions, by header and by the `user` field.
        placement = {}
        for key in ["alice", "bob", "carol", "dave", "erin", "frank"]:
            seen = set()
            for _ in range(3):
                st, rep, _ = chat(front, [{"role": "user", "content": "Hi"}], session=key)
                assert st == 200, st
                seen.add(rep)
            st, rep, _ = chat(front, [{"role": "user", "content": "Hi"}], user=key)
            assert st == 200, st
            assert len(seen) == 1, (key, seen)
            placement[key] = seen.pop()
            assert rep == placement[key], ("user field routed elsewhere", key, rep, placement[key])
        used = sorted(set(placement.values()))
        print(f"lb: {len(placement)} sessions over replicas {used}: each session's 4 requests "
              f"(X-Session-Id, then the user field) reached one replica")
        assert len(used) >= 2, placement

        # The second turn of a conversation reuses its first turn's cache.
        turn1 = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
        st, rep1, a = chat(front, turn1, session="zoe", max_tokens=16)
        assert st == 200
        turn2 = turn1 + [{"role": "assistant", "content": a["choices"][0]["message"]["content"]},
                         {"role": "user", "content": "Now make it multiply."}]
        st, rep2, b = chat(front, turn2, session="zoe", max_tokens=16)
        cached = b["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert st == 200 and rep1 == rep2 and cached > 0, (rep1, rep2, b["usage"])
        print(f"lb: turn 2 of session zoe on {rep2} reused {cached} of "
              f"{b['usage']['prompt_tokens']} prompt tokens")

        # 2. Kill a replica while streams are in flight.
        victim = placement["alice"]
        sessions = list(placement)
        results = {}
        first_chunk = {k: threading.Event() for k in sessions}

        def stream(key):
            body = {"model": "m", "max_tokens": 96, "temperature": 0, "stream": True,
                    "messages": [{"role": "user", "content": "Count from 1 to 200, one per line."}]}
            try:
                c = http.client.HTTPConnection("127.0.0.1", front, timeout=600)
                c.request("POST", "/v1/chat/completions", json.dumps(body),
                          {"Content-Type": "application/json", "X-Session-Id": key})
                r = c.getresponse()
                text = b""
                while True:
                    line = r.readline()
                    if not line:
                        break
                    text += line
                    if b'"content"' in line:
                        first_chunk[key].set()
                results[key] = (r.status, r.getheader("X-Replica"), b"data: [DONE]" in text)
            except Exception as e:  # a stream cut mid-way
                results[key] = (None, placement[key], False, repr(e))
            finally:
                first_chunk[key].set()

        threads = [threading.Thread(target=stream, args=(k,)) for k in sessions]
        for t in threads:
            t.start()
        for k in sessions:
            first_chunk[k].wait(120)
        still_running = [k for k in sessions if k not in results]
        replicas[victim].kill()
        replicas[victim].wait()
        for t in threads:
            t.join(180)
        failed = [k for k in sessions if not results[k][2]]
        in_flight_victim = [k for k in still_running if placement[k] == victim]
        print(f"lb: killed {victim} with {len(still_running)} streams in flight "
              f"({len(in_flight_victim)} on {victim}); failed: {len(failed)} {failed}; "
              f"completed: {len(sessions) - len(failed)}")
        # Only streams in flight on the killed replica may fail (one that
        # ended in the instant before the kill completes).
        assert in_flight_victim, ("nothing was in flight on the victim", results)
        assert set(failed) <= set(in_flight_victim), (failed, in_flight_victim, results)

        # New requests, including the dead replica's sessions, are answered.
        answered = {}
        for key in sessions:
            st, rep, _ = chat(front, [{"role": "user", "content": "Hi again"}], session=key)
            assert st == 200 and rep != victim, (key, st, rep)
            answered[key] = rep
        moved = sorted(k for k in sessions if placement[k] == victim)
        print(f"lb: after the kill, all {len(sessions)} sessions answered (200) by "
              f"{sorted(set(answered.values()))}; {victim}'s sessions {moved} moved, "
              f"the others stayed: {all(answered[k] == placement[k] for k in sessions if k not in moved)}")
        assert all(answered[k] == placement[k] for k in sessions if k not in moved)
        print("lb: all checks passed")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
