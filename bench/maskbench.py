"""MaskBench's schemas and instances through `kestrel schema check --strict`.

For each schema file of the chosen families (JSONSchemaBench's
`maskbench/data/`, one JSON file per schema with its `tests`), writes the
schema and each test's instance to a temporary folder, runs
`kestrel schema check SCHEMA INSTANCE... --strict --json`, and counts per
family: schemas compiled and refused, valid instances rejected and invalid
instances accepted by a compiled schema (the count that must stay 0).
Prints one line per family and the total; with --findings FILE, writes the
rejected valid and accepted invalid instances' file names there.

With --bench MODEL, also times the token mask over MODEL's vocabulary
(`kestrel schema bench SCHEMA --model MODEL VALID... --strict --json`: one
mask at every token of every valid instance a compiled schema takes, one
thread) and prints the p50/p90/p99 microseconds over all masks, per family
and in total (--bench-every N: every Nth compiled schema only).

The data: a checkout of the public repository guidance-ai/jsonschemabench
(`git clone --depth 1` of it; the files used are under `maskbench/data/`).
Only the families Github_*, Glaiveai2K* and BFCL_* are for development; the
others stay unseen.

    python3 bench/maskbench.py --data PATH/maskbench/data \
        --kestrel target/release/kestrel 'BFCL_*' 'Glaiveai2K' 'Github_trivial'
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

ALLOWED = ("Github_", "Glaiveai2K", "BFCL_")


def family(name):
    """`Github_easy---o123.json` -> Github_easy; `BFCL_java_0.json` -> BFCL_java."""
    if "---" in name:
        return name.split("---")[0]
    return name.rsplit("_", 1)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="maskbench/data of a jsonschemabench checkout")
    ap.add_argument("--kestrel", default="target/release/kestrel")
    ap.add_argument("--findings", help="write the instances counted as errors here (JSON)")
    ap.add_argument("--bench", metavar="MODEL", help="also time the mask over MODEL's vocabulary")
    ap.add_argument("--bench-every", type=int, default=1, help="time every Nth compiled schema")
    ap.add_argument("families", nargs="+", help="family names; a trailing * matches a prefix")
    a = ap.parse_args()
    for f in a.families:
        if not f.startswith(ALLOWED):
            sys.exit(f"{f}: only the Github_*, Glaiveai2K* and BFCL_* families are for development")

    def chosen(fam):
        return any(fam == f or (f.endswith("*") and fam.startswith(f[:-1])) for f in a.families)

    stats = collections.defaultdict(collections.Counter)
    times = collections.defaultdict(list)
    findings = []
    tmp = tempfile.mkdtemp()
    for name in sorted(os.listdir(a.data)):
        fam = family(name)
        if not chosen(fam):
            continue
        with open(os.path.join(a.data, name)) as f:
            d = json.load(f)
        schema = os.path.join(tmp, "schema.json")
        with open(schema, "w") as f:
            json.dump(d["schema"], f)
        instances = []
        for i, t in enumerate(d.get("tests", [])):
            p = os.path.join(tmp, f"instance{i}.json")
            with open(p, "w") as f:
                json.dump(t["data"], f)
            instances.append((p, t["valid"]))
        out = subprocess.run([a.kestrel, "schema", "check", schema, "--strict", "--json"]
                             + [p for p, _ in instances], capture_output=True, text=True)
        st = stats[fam]
        st["schemas"] += 1
        if out.returncode != 0:
            st["failed to run"] += 1
            findings.append((name, "failed to run", out.stderr.strip()[:300]))
            continue
        r = json.loads(out.stdout)
        if not r["compiled"]:
            st["refused"] += 1
            continue
        st["compiled"] += 1
        if a.bench and st["compiled"] % a.bench_every == 0:
            valid = [p for (p, v), inst in zip(instances, r["instances"]) if v and inst["accepted"]]
            if valid:
                b = subprocess.run([a.kestrel, "schema", "bench", schema, "--model", a.bench,
                                    "--strict", "--json"] + valid, capture_output=True, text=True)
                if b.returncode != 0:
                    st["bench failed"] += 1
                    findings.append((name, "bench failed", b.stderr.strip()[:300]))
                else:
                    br = json.loads(b.stdout)
                    times[fam] += br["times_ns"]
                    st["refused tokens"] += br["refused_tokens"]
        for (_, valid), inst in zip(instances, r["instances"]):
            st["valid" if valid else "invalid"] += 1
            if valid and not inst["accepted"]:
                st["valid rejected"] += 1
                findings.append((name, "valid rejected", inst["offset"]))
            if not valid and inst["accepted"]:
                st["invalid accepted"] += 1
                findings.append((name, "invalid accepted", None))
    total = collections.Counter()
    cols = ["schemas", "compiled", "refused", "valid", "valid rejected", "invalid",
            "invalid accepted", "failed to run"]
    print("family".ljust(24) + "".join(c.rjust(17) for c in cols))
    for fam, st in sorted(stats.items()):
        total.update(st)
        print(fam.ljust(24) + "".join(str(st[c]).rjust(17) for c in cols))
    print("total".ljust(24) + "".join(str(total[c]).rjust(17) for c in cols))
    if total["schemas"]:
        print(f"compiled {100 * total['compiled'] / total['schemas']:.1f}%, valid rejected "
              f"{100 * total['valid rejected'] / max(total['valid'], 1):.2f}%, invalid accepted "
              f"{total['invalid accepted']}")
    if a.bench:
        def pct(t, p):
            t = sorted(t)
            return t[max(-(-len(t) * p // 100), 1) - 1] / 1e3
        print("mask time (us)".ljust(24) + "".join(c.rjust(12) for c in
                                                   ["masks", "p50", "p90", "p99", "max"]))
        everything = []
        for fam, t in sorted(times.items()):
            everything += t
            print(fam.ljust(24) + str(len(t)).rjust(12) + "".join(
                f"{pct(t, p):12.1f}" for p in (50, 90, 99, 100)))
        if everything:
            print("total".ljust(24) + str(len(everything)).rjust(12) + "".join(
                f"{pct(everything, p):12.1f}" for p in (50, 90, 99, 100)))
        print(f"tokens of valid instances outside the mask: {total['refused tokens']}, "
              f"bench failures: {total['bench failed']}")
    if a.findings:
        with open(a.findings, "w") as f:
            json.dump(findings, f, indent=0)
    sys.exit(1 if total["invalid accepted"] or total["failed to run"] or total["refused tokens"]
             or total["bench failed"] else 0)


if __name__ == "__main__":
    main()
