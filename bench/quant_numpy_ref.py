#!/usr/bin/python3
"""numpy baseline for bench/bench_quant.c: the same algorithms on the same bytes.

Reads the tensors bench_quant --dump DIR wrote (BF16 weights, FP8 codes and
their scale_inv grid), times single-threaded numpy on a prefix of them in
bands of rows, the way a Python converter would stream a large tensor, and
checks its results against the first outputs forged dumped (so the two really
compute the same thing).

  affine  MLX affine 4-bit, group 64, in float32 numpy (docs/domain.md section 5),
          nibbles packed into uint32 words, scales/biases rounded to BF16;
  fp8     E4M3 codes through a 256-entry table, times the 128 x 128 block
          scale, rounded to BF16.

Usage: quant_numpy_ref.py DIR [--mib N]   (N MiB of BF16 input, default 256)
Prints human-readable lines, "result KEY VALUE" lines (GB/s of input) and
"sample CASE reference wall|cpu VALUE" lines (ms per GiB of input; CPU time
from time.process_time(), one thread) for bench/benchlib.py samples.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

F32 = np.float32
BAND_ROWS = 512  # rows per band: 4 MiB of BF16 at 4096 columns


def bf16_rne(x32):
    """float32 -> BF16 bits, round to nearest even (finite values, and the NaNs here are quiet)."""
    u = x32.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)


def affine_4bit_g64(w16):
    """BF16 bits [rows, cols] -> (packed uint32 [rows, cols/8], scales, biases as BF16 bits)."""
    rows, cols = w16.shape
    w = (w16.astype(np.uint32) << 16).view(F32).reshape(rows, cols // 64, 64)
    n_bins = F32(15)
    wmax = w.max(axis=2)
    wmin = w.min(axis=2)
    mask = np.abs(wmin) > np.abs(wmax)
    s0 = np.maximum((wmax - wmin) / n_bins, F32(1e-7))
    scale = np.where(mask, s0, -s0)
    edge = np.where(mask, wmin, wmax)
    q0 = np.rint(edge / scale)
    nz = q0 != 0
    scale = np.where(nz, edge / np.where(nz, q0, F32(1)), scale)
    bias = np.where(nz, edge, F32(0))
    q = np.rint((w - bias[:, :, None]) / scale[:, :, None])
    q = np.clip(q, F32(0), n_bins).astype(np.uint8).reshape(rows, cols)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).view(np.uint32)
    return packed, bf16_rne(scale.astype(F32)), bf16_rne(bias.astype(F32))


def e4m3_lut():
    b = np.arange(256)
    e, m = (b >> 3) & 15, b & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e - 7))
    v = np.where(b & 0x80, -mag, mag)
    v[(b & 0x7F) == 0x7F] = np.nan
    return v.astype(F32)


def fp8_to_bf16(codes, si_band, lut):
    rows, cols = codes.shape
    v = lut[codes]
    s = np.repeat(np.repeat(si_band, 128, axis=0), 128, axis=1)[:rows, :cols]
    return bf16_rne(v * s)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--mib", type=int, default=256)
    args = ap.parse_args(argv[1:])
    meta = json.load(open(os.path.join(args.dir, "meta.json")))
    rows, cols, dump_rows = meta["rows"], meta["cols"], meta["dump_rows"]
    sr, sc = -(-rows // 128), cols // 128
    w16 = np.memmap(os.path.join(args.dir, "w.bf16"), dtype="<u2", mode="r", shape=(rows, cols))
    f8 = np.memmap(os.path.join(args.dir, "w.fp8"), dtype=np.uint8, mode="r", shape=(rows, cols))
    si = np.fromfile(os.path.join(args.dir, "scale_inv.f32"), dtype="<f4").reshape(sr, sc)
    use_rows = min(rows, (args.mib << 20) // (2 * cols)) // BAND_ROWS * BAND_ROWS
    lut = e4m3_lut()

    # Cross-check on the rows forged dumped.
    packed, s16, b16 = affine_4bit_g64(np.asarray(w16[:dump_rows]))
    same_affine = (
        np.array_equal(packed.ravel(), np.fromfile(os.path.join(args.dir, "affine_packed.u32"), dtype="<u4"))
        and np.array_equal(s16.ravel(), np.fromfile(os.path.join(args.dir, "affine_scales.bf16"), dtype="<u2"))
        and np.array_equal(b16.ravel(), np.fromfile(os.path.join(args.dir, "affine_biases.bf16"), dtype="<u2")))
    out = fp8_to_bf16(np.asarray(f8[:dump_rows]), si[: -(-dump_rows // 128)], lut)
    same_fp8 = np.array_equal(out.ravel(), np.fromfile(os.path.join(args.dir, "fp8_out.bf16"), dtype="<u2"))

    t, c = time.perf_counter(), time.process_time()
    for r in range(0, use_rows, BAND_ROWS):
        affine_4bit_g64(np.asarray(w16[r:r + BAND_ROWS]))
    t_aff, c_aff = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    for r in range(0, use_rows, BAND_ROWS):
        fp8_to_bf16(np.asarray(f8[r:r + BAND_ROWS]), si[r // 128:(r + BAND_ROWS) // 128], lut)
    t_fp8, c_fp8 = time.perf_counter() - t, time.process_time() - c

    gb = use_rows * cols * 2 / 1e9
    gb8 = use_rows * cols / 1e9
    print("numpy %s, %d MiB of BF16 (%d rows) in bands of %d rows, single thread" % (
        np.__version__, use_rows * cols * 2 >> 20, use_rows, BAND_ROWS))
    print("numpy matches forged on the first %d rows: affine %s, fp8 %s" % (
        dump_rows, "yes" if same_affine else "NO", "yes" if same_fp8 else "NO"))
    print("numpy affine 4-bit g64:    %.3f GB/s in" % (gb / t_aff))
    print("numpy fp8 dequant -> BF16: %.3f GB/s in" % (gb8 / t_fp8))
    print("result numpy_affine_gbs %.4f" % (gb / t_aff))
    print("result numpy_fp8_gbs %.4f" % (gb8 / t_fp8))
    print("result numpy_matches %d" % (1 if same_affine and same_fp8 else 0))
    per_gib = 1e3 * (1 << 30) / 1e9  # seconds per GB -> ms per GiB
    for case, secs, cpu, g in (("affine_4bit_g64", t_aff, c_aff, gb), ("fp8_to_bf16", t_fp8, c_fp8, gb8)):
        print("sample %s reference wall %.4f" % (case, secs / g * per_gib))
        print("sample %s reference cpu %.4f" % (case, cpu / g * per_gib))
        print("name %s reference numpy %s under %s, 1 thread" % (case, np.__version__, sys.executable))
    print("extra affine_4bit_g64 reference_mib %d" % (use_rows * cols * 2 >> 20))
    print("extra fp8_to_bf16 reference_mib %d" % (use_rows * cols >> 20))
    return 0 if same_affine and same_fp8 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
