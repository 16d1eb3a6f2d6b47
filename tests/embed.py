#!/usr/bin/env python3
"""embed.py SYMBOL IN OUT: writes a C file defining `const char SYMBOL[]` with IN's bytes.

Used to compile docs/openapi.json into the binary, so `GET /openapi.json`
serves exactly the document kept in the repository.
"""
import sys

sym, src, dst = sys.argv[1:4]
data = open(src, "rb").read()
with open(dst, "w") as out:
    out.write(f"/* generated from {src} by tests/embed.py; do not edit */\n")
    out.write("#include <stddef.h>\n")
    out.write(f"const char {sym}[] = {{\n")
    for i in range(0, len(data), 16):
        out.write("\t" + ", ".join(str(b) for b in data[i:i + 16]) + ",\n")
    out.write("\t0\n};\n")
    out.write(f"const size_t {sym}_len = {len(data)};\n")
