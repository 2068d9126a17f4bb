#!/usr/bin/env python3
"""Size report for the shipped kestrel binary.

The size is the stripped release binary's file size. The breakdown comes from
an identical build that keeps its symbol table (profile `size-report`): each
symbol's size is attributed to the crate its demangled path starts with
(`<T as Trait>::f` is attributed to T's crate); symbols without a Rust path
(musl libc, compiler builtins) are grouped as C/runtime.

With --fw-bin, a second line gives the firmware host's size
(tests/firmware-host: kestrel-core and kestrel-kernels alone, no std), split
into the embedded model and the rest; it has no budget and its own history.
"""
import argparse
import datetime
import os
import re
import subprocess
import sys


def nm_symbols(path):
    nm = "aarch64-linux-gnu-nm"
    out = subprocess.run([nm, "-S", "--size-sort", "-C", path], check=True,
                         capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4:
            continue
        _, size, kind, name = parts
        if kind.lower() in ("t", "r", "d", "b", "w", "v"):
            syms.append((int(size, 16), kind, name))
    return syms


def crate_of(name):
    n = name.lstrip("<&*").replace("dyn ", "").replace("mut ", "")
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", n)
    if not m:
        return "[C/runtime]"
    crate = m.group(1)
    if crate in ("core", "alloc", "std", "compiler_builtins", "std_detect", "rustc_demangle",
                 "hashbrown", "addr2line", "gimli", "miniz_oxide", "object", "adler2"):
        return "[std] " + crate
    return crate


def git_commit():
    try:
        c = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], check=True,
                           capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return c + ("+dirty" if dirty else "")
    except Exception:
        return "unknown"


def append_history(path, header, commit, label, fields):
    """Appends one line per (commit, label) to the CSV at `path`, then prints
    its last lines. Dirty trees and CI runs are not recorded."""
    lines = []
    if os.path.exists(path):
        with open(path) as f:
            lines = f.readlines()
    if not lines:
        lines = [header + "\n"]
    cols = header.count(",")
    already = any(l.split(",")[1:3] == [commit, label] for l in lines[1:] if l.count(",") >= cols)
    if not already and not commit.endswith("+dirty") and os.environ.get("CI") != "true":
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        lines.append(f"{date},{commit},{label},{fields}\n")
        with open(path, "w") as f:
            f.writelines(lines)
    print(f"\nhistory ({path}, last 5):")
    for l in lines[-5:]:
        print("  " + l.rstrip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--symbols", required=True)
    ap.add_argument("--budget", type=int, required=True)
    ap.add_argument("--goal", type=int, required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--label", default="kestrel")
    ap.add_argument("--fw-bin", help="the firmware host (tests/firmware-host): second line, no budget")
    ap.add_argument("--fw-model", help="the VQF embedded in the firmware host")
    ap.add_argument("--fw-history", help="its history file (CSV, one line per commit)")
    a = ap.parse_args()

    size = os.path.getsize(a.bin)
    syms = nm_symbols(a.symbols)
    by_crate = {}
    for s, _, name in syms:
        c = crate_of(name)
        by_crate[c] = by_crate.get(c, 0) + s
    total_syms = sum(by_crate.values())

    print(f"== size report: {a.label} ({a.bin})")
    print(f"binary: {size:,} bytes  budget {a.budget:,} ({100 * size / a.budget:.1f}%)  "
          f"goal {a.goal:,} ({'met' if size <= a.goal else f'over by {size - a.goal:,}'})")
    if a.fw_bin:
        # The second line: tests/firmware-host, core + kernels alone (no std,
        # no libc, aarch64-unknown-none), with the model it embeds.
        fw = os.path.getsize(a.fw_bin)
        model = os.path.getsize(a.fw_model) if a.fw_model else 0
        print(f"firmware host (core + kernels alone, no std): {fw:,} bytes = {fw - model:,} "
              f"code, constants and headers + {model:,} embedded model  (no budget)")
    print(f"\nby crate (symbol sizes, {total_syms:,} bytes attributed; the rest is headers, "
          f"relocations, unwind tables, padding):")
    for c, s in sorted(by_crate.items(), key=lambda kv: -kv[1]):
        print(f"  {s:>10,}  {100 * s / size:5.1f}%  {c}")
    print("\nlargest symbols:")
    for s, kind, name in sorted(syms, key=lambda t: -t[0])[:25]:
        short = name if len(name) <= 100 else name[:97] + "..."
        print(f"  {s:>9,}  {kind}  {short}")

    commit = git_commit()
    append_history(a.history, "date,commit,label,bytes,budget,goal", commit, a.label,
                   f"{size},{a.budget},{a.goal}")
    if a.fw_bin and a.fw_history:
            append_history(a.fw_history, "date,commit,label,bytes,model_bytes,code_bytes", commit,
                           "firmware-host", f"{fw},{model},{fw - model}")
    if size > a.budget:
        print(f"FAIL: {size:,} bytes is over the hard budget of {a.budget:,}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
