#!/usr/bin/env python3
"""Compile files into the binary as C data.

embed.py SYMBOL IN OUT
    writes a C file defining `const char SYMBOL[]` with IN's bytes (and
    SYMBOL_len).  Used to compile docs/openapi.json into the binary, so
    `GET /openapi.json` serves exactly the document kept in the repository.

embed.py --assets SYMBOL OUT FILE...
    writes a C file defining `const struct fg_ui_asset SYMBOL[]` (api/ui.h)
    and its count SYMBOL_n: each FILE under its base name, its
    bytes, and an ETag made from their SHA-256.  Used for the dashboard's
    web/ files, so `forged serve` needs no file at run time.  Names must be
    plain file names ([A-Za-z0-9._-], not starting with a dot) and unique.
"""
import hashlib
import os
import re
import sys


def c_bytes(out, data):
    for i in range(0, len(data), 16):
        out.write("\t" + ", ".join(str(b) for b in data[i:i + 16]) + ",\n")
    out.write("\t0\n")


def embed_one(sym, src, dst):
    data = open(src, "rb").read()
    with open(dst, "w") as out:
        out.write(f"/* generated from {src} by tests/embed.py; do not edit */\n")
        out.write("#include <stddef.h>\n")
        out.write(f"const char {sym}[] = {{\n")
        c_bytes(out, data)
        out.write("};\n")
        out.write(f"const size_t {sym}_len = {len(data)};\n")


def embed_assets(sym, dst, files):
    names = [os.path.basename(f) for f in files]
    for n in names:
        if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]*", n) or len(n) >= 64:
            sys.exit(f"embed.py: '{n}' is not a plain file name under 64 bytes")
    if len(set(names)) != len(names):
        sys.exit("embed.py: two assets have the same name")
    tmp = dst + ".tmp"
    with open(tmp, "w") as out:
        out.write(f"/* generated from {' '.join(files)} by tests/embed.py; do not edit */\n")
        out.write('#include "api/ui.h"\n')
        for i, f in enumerate(files):
            out.write(f"static const unsigned char asset_{i}[] = {{\n")
            c_bytes(out, open(f, "rb").read())
            out.write("};\n")
        out.write(f"const struct fg_ui_asset {sym}[] = {{\n")
        for i, (f, n) in enumerate(zip(files, names)):
            data = open(f, "rb").read()
            etag = '\\"' + hashlib.sha256(data).hexdigest()[:32] + '\\"'
            out.write(f'\t{{ "{n}", asset_{i}, {len(data)}, "{etag}" }},\n')
        out.write("\t{ 0, 0, 0, 0 }\n};\n")
        out.write(f"const size_t {sym}_n = {len(files)};\n")
    os.replace(tmp, dst)


if sys.argv[1:2] == ["--assets"]:
    embed_assets(sys.argv[2], sys.argv[3], sys.argv[4:])
else:
    embed_one(*sys.argv[1:4])
