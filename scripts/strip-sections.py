"""Drops the section headers of a static ELF64 little-endian executable
(what `sstrip` does): the loader reads only the program headers, so the
file ends with its last segment's data; the header says it has no
sections. Used on the shipped binary (scripts/build-shipped.sh): the
section header table, `.shstrtab` and `.comment` are about 1.5 KB.

    python3 scripts/strip-sections.py FILE
"""
import os
import struct
import sys

path = sys.argv[1]
with open(path, "rb") as f:
    elf = bytearray(f.read())
if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
    sys.exit(f"{path}: not a little-endian ELF64 file")
(e_type,) = struct.unpack_from("<H", elf, 0x10)
(phoff,) = struct.unpack_from("<Q", elf, 0x20)
phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
if e_type != 2 or phentsize < 56 or phnum in (0, 0xFFFF):
    sys.exit(f"{path}: not a static executable with program headers")
end = phoff + phentsize * phnum
for i in range(phnum):
    _, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
    end = max(end, offset + filesz)
if end > len(elf):
    sys.exit(f"{path}: a segment ends past the file")
struct.pack_into("<Q", elf, 0x28, 0)  # e_shoff
struct.pack_into("<HH", elf, 0x3C, 0, 0)  # e_shnum, e_shstrndx
# Written beside it, then renamed over it: never a half-written binary.
tmp = path + ".strip"
with open(tmp, "wb") as f:
    f.write(elf[:end])
os.chmod(tmp, os.stat(path).st_mode)
os.replace(tmp, path)
