#!/usr/bin/env python3
"""Writes the hostile safetensors corpus: one hand-made file per rejection reason.

Every file is spelled out here byte for byte (a header string and a data
section), with no safetensors library, so the reader is tested against bytes
our own writer never produced.  expected.tsv pairs each file with the phrase
forged's rejection must contain.  Run from anywhere; writes beside this script.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def st(header, data=b"", length=None):
    """A file: 8-byte LE length (the header's own unless forced), header, data."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    n = len(header) if length is None else length
    return struct.pack("<Q", n) + header + data


F32_2 = b"\x00\x00\x80\x3f\x00\x00\x00\x40"  # 1.0, 2.0

CASES = [
    ("empty", b"", "file is empty"),
    ("short_length", b"\x10\x00\x00\x00\x00", "too short for the 8-byte header length"),
    ("length_beyond_file", st('{"a":1}', length=1000), "runs past the end of the file"),
    ("length_over_cap", st("{}", length=200_000_000), "exceeds the cap of 100000000 bytes"),
    ("header_too_short", st("{", length=1), "too short for a JSON object"),
    ("invalid_utf8", st(b'{"a\xff":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', F32_2),
     "not valid UTF-8"),
    ("nul_in_header", st(b'{}\x00                 '), "NUL byte"),
    ("invalid_json", st('{"a":{"dtype":"F32","shape":[2],'), "not valid JSON"),
    ("not_object", st("[1,2,3]"), "header is not a JSON object"),
    ("entry_not_object", st('{"a":[1]}'), "entry is not a JSON object"),
    ("missing_dtype", st('{"a":{"shape":[2],"data_offsets":[0,8]}}', F32_2),
     "missing or non-string \"dtype\""),
    ("unknown_dtype", st('{"a":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}}', F32_2),
     "unknown dtype 'F128'"),
    ("negative_shape", st('{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', F32_2),
     "shape[0] is negative"),
    ("noninteger_shape", st('{"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}', F32_2),
     "shape[0] is not an integer"),
    ("string_shape", st('{"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}', F32_2),
     "shape[0] is not a number"),
    ("rank_over_cap", st('{"a":{"dtype":"F32","shape":[' + ",".join(["1"] * 17) +
                         '],"data_offsets":[0,4]}}', F32_2[:4]), "shape rank exceeds the cap"),
    ("element_overflow",
     st('{"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}}', F32_2),
     "element count of its shape overflows"),
    ("extent_mismatch", st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', F32_2[:4]),
     "data_offsets span 4 bytes but F32 x 2 elements need 8"),
    ("offsets_reversed", st('{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}', F32_2),
     "end before they begin"),
    ("offsets_not_pair", st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}', F32_2),
     "is not a [begin, end] pair"),
    ("offsets_past_data", st('{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', F32_2),
     "runs past the 8-byte data section"),
    ("overlap", st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                   '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', F32_2 + F32_2[:4]),
     "overlaps tensor"),
    ("gap", st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
               '"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}', F32_2 + F32_2[:4]),
     "gap of 4 unused bytes"),
    ("trailing_bytes", st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', F32_2 + b"\0" * 4),
     "4 trailing bytes after the last tensor"),
    ("duplicate_name", st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                          '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', F32_2),
     "duplicate tensor name 'a'"),
    ("metadata_not_string", st('{"__metadata__":{"format":1},'
                               '"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', F32_2),
     "metadata value for key 'format' is not a string"),
    ("metadata_not_object", st('{"__metadata__":"mlx",'
                               '"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', F32_2),
     "\"__metadata__\" is not a JSON object"),
]


def main():
    lines = []
    for name, data, phrase in CASES:
        with open(os.path.join(HERE, name + ".safetensors"), "wb") as f:
            f.write(data)
        lines.append(f"{name}.safetensors\t{phrase}\n")
    with open(os.path.join(HERE, "expected.tsv"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
