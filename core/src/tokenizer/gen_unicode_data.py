#!/usr/bin/env python3
"""Generates core/src/tokenizer/unicode_data.rs, the Unicode data of the tokenizer.

Two Unicode versions, because Hugging Face `tokenizers` (0.23.3) uses two:

* the pre-tokenizer regex runs on the Oniguruma bundled in that wheel, whose
  \\p{L}, \\p{N} and \\s are those of **Unicode 16.0** (probed on every code
  point). Character classes therefore come from the `unicodedata2` package,
  version 16.0.0 (`pip install unicodedata2==16.0.0`).
* the NFC normalizer is the crate `unicode-normalization-alignments` 0.1.12,
  whose tables are **Unicode 9.0**. Canonical decompositions, combining classes
  and composition exclusions therefore come from Python 3.6's `unicodedata`
  (unidata_version 9.0.0), run as a subprocess: set PY_UNICODE9 to a Python 3.6
  interpreter (default `python3.6`).

Both choices were checked against `tokenizers` 0.23.3 on every code point:
the classes by probing its Split pre-tokenizer (kept as a test:
tests/fixtures/gen_tokenizer_extra.py writes the probe), the normalization
data by a one-off probe of its NFD on each character and of combining-class
ordering against U+0300 / U+0334 (NFC vectors are kept as a test).

Run from anywhere:  python3 core/src/tokenizer/gen_unicode_data.py
"""
import json
import os
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "unicode_data.rs"

# White_Space (PropList.txt); unchanged since Unicode 6.3.
WHITE_SPACE = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680} | set(range(0x2000, 0x200B)) | {
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000}
# Symbols (So) that are Other_Alphabetic, hence in the regex crate's \w
# (used only for the single_word flag of added tokens).
ALPHABETIC_SYMBOLS = set(range(0x24B6, 0x24EA)) | set(range(0x1F130, 0x1F14A)) | set(
    range(0x1F150, 0x1F16A)) | set(range(0x1F170, 0x1F18A))

# Class ids (keep in sync with unicode.rs).
OTHER, LETTER, DIGIT, OTHER_NUMBER, SPACE, MARK, CONNECTOR, ALPHA_SYMBOL = range(8)


def dump_nfc_data():
    """Runs under Python 3.6 (Unicode 9.0): prints the NFC data as JSON."""
    import unicodedata as u
    assert u.unidata_version == "9.0.0", u.unidata_version
    dec, ccc, qc_no = {}, {}, []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000 or 0xAC00 <= cp <= 0xD7A3:
            continue
        c = chr(cp)
        d = u.decomposition(c)
        if d and not d.startswith("<"):
            dec[cp] = [int(x, 16) for x in d.split()]
        k = u.combining(c)
        if k:
            ccc[cp] = k
        if u.normalize("NFC", c) != c:
            qc_no.append(cp)
    print(json.dumps({"version": u.unidata_version, "dec": dec, "ccc": ccc, "qc_no": qc_no}))


def runs(values, bits):
    """Run-length table over all code points: entries (start << bits) | value."""
    out, prev = [], None
    for cp in range(0x110000):
        v = values(cp)
        if v != prev:
            out.append((cp << bits) | v)
            prev = v
    return out


def main():
    import unicodedata2 as ud
    assert ud.unidata_version == "16.0.0", ud.unidata_version
    py9 = os.environ.get("PY_UNICODE9", "python3.6")
    nfc = json.loads(subprocess.check_output([py9, __file__, "--dump-nfc"]))
    dec = {int(k): v for k, v in nfc["dec"].items()}
    ccc = {int(k): v for k, v in nfc["ccc"].items()}
    qc_no = set(nfc["qc_no"])

    def cls(cp):
        if cp in WHITE_SPACE:
            return SPACE
        if 0xD800 <= cp < 0xE000:
            return OTHER
        cat = ud.category(chr(cp))
        if cat[0] == "L":
            return LETTER
        if cat in ("Nd", "Nl"):
            return DIGIT
        if cat == "No":
            return OTHER_NUMBER
        if cat[0] == "M":
            return MARK
        if cat == "Pc":
            return CONNECTOR
        if cp in ALPHABETIC_SYMBOLS:
            return ALPHA_SYMBOL
        return OTHER

    class_runs = runs(cls, 3)

    # Primary composites: two-code-point canonical decompositions that NFC keeps.
    compose = []
    for cp, d in dec.items():
        if len(d) == 2 and cp not in qc_no:
            a, b = d
            assert len(chr(cp).encode()) <= len(chr(a).encode()) + len(chr(b).encode())
            compose.append((a, b, cp))
    compose.sort()
    # NFC_QC: No (never in NFC) or Maybe (may compose with what precedes).
    maybe = {b for _, b, _ in compose} | set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))

    def qc(cp):
        return 2 if cp in qc_no else 1 if cp in maybe else 0

    norm_runs = runs(lambda cp: (qc(cp) << 8) | ccc.get(cp, 0), 10)
    decomp = sorted((cp << 42) | (d[0] << 21) | (d[1] if len(d) > 1 else 0) for cp, d in dec.items())
    assert all(len(d) <= 2 for d in dec.values())

    def full(cp):
        return [x for y in dec[cp] for x in (full(y) if y in dec else [y])] if cp in dec else [cp]
    assert max(len(full(cp)) for cp in dec) <= 4  # unicode.rs decomposes into a [char; 4]
    # COMPOSE: for each primary composite, its entry's index in DECOMP, in
    # (first, second) order (unicode.rs binary-searches it through DECOMP).
    decomp_index = {e >> 42: i for i, e in enumerate(decomp)}
    comp = [decomp_index[c] for _, _, c in compose]
    assert max(comp) < 1 << 16

    # DECOMP split in three tables, 6 bytes an entry: the code point and
    # the second's index in one u32 key (with the first's top 2 bits), the
    # first's low 16 bits, the distinct seconds (unicode.rs rebuilds the
    # (cp << 42) | (first << 21) | second entries).
    M = (1 << 21) - 1
    seconds = sorted({e & M for e in decomp} | {0})
    assert len(seconds) <= 128 and seconds[0] == 0
    second_index = {v: i for i, v in enumerate(seconds)}
    keys, firsts = [], []
    for e in decomp:
        cp, first, second = e >> 42, (e >> 21) & M, e & M
        assert cp < 1 << 18 and first < 1 << 18
        keys.append((cp << 14) | (second_index[second] << 2) | (first >> 16))
        firsts.append(first & 0xFFFF)

    def arr(name, ty, vals, doc, per=8, fmt="0x{:x}"):
        lines = [f"/// {doc}", f"pub(crate) static {name}: [{ty}; {len(vals)}] = ["]
        for i in range(0, len(vals), per):
            lines.append("    " + ", ".join(fmt.format(v) for v in vals[i:i + per]) + ",")
        lines.append("];")
        return "\n".join(lines)

    src = [
        "// @generated by gen_unicode_data.py; do not edit.",
        "//! Unicode data of the tokenizer (see gen_unicode_data.py and docs/tokenizer.md).",
        "//! Character classes: Unicode 16.0.0 (as Oniguruma in `tokenizers` 0.23.3).",
        "//! Normalization: Unicode 9.0.0 (as `unicode-normalization-alignments` 0.1.12).",
        "",
        arr("CLASS_RUNS", "u8", [v >> k & 255 for v in class_runs for k in (0, 8, 16)],
            "Runs of character classes: `(first code point << 3) | class`, sorted,\n"
            "/// 3 little-endian bytes each.", per=16),
        "",
        arr("NORM_RUNS", "u32", norm_runs,
            "Runs of `(first code point << 10) | (NFC_QC << 8) | ccc`, sorted; QC 0 yes, 1 maybe, 2 no."),
        "",
        arr("DECOMP_KEYS", "u32", keys,
            "Canonical decompositions (one level, Hangul excluded), sorted by code point: `(cp << 14) | (second's index in DECOMP_SECONDS << 2) | (first >> 16)`."),
        "",
        arr("DECOMP_FIRSTS", "u16", firsts,
            "The low 16 bits of each decomposition's first code point.", per=12),
        "",
        arr("DECOMP_SECONDS", "u32", seconds,
            "The decompositions' second code points, sorted (0: none, a singleton)."),
        "",
        arr("COMPOSE", "u16", comp,
            "Primary composites (Hangul excluded): indexes into `DECOMP_KEYS` of the two-code-point decompositions NFC recomposes, sorted by `(first, second)`.",
            per=12, fmt="{}"),
        "",
    ]
    OUT.write_text("\n".join(src))
    assert all(v < 1 << 24 for v in class_runs)
    size = 3 * len(class_runs) + 4 * len(norm_runs) + 6 * len(decomp) + 4 * len(seconds) + 2 * len(comp)
    print(f"{OUT}: CLASS_RUNS {len(class_runs)}, NORM_RUNS {len(norm_runs)}, DECOMP {len(decomp)}, "
          f"COMPOSE {len(comp)}; {size} bytes")


if __name__ == "__main__":
    if sys.argv[1:] == ["--dump-nfc"]:
        dump_nfc_data()
    else:
        main()
