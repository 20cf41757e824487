#!/usr/bin/env python3
"""A model's MatMuls by constant [K, N] weights as com.microsoft.MatMulNBits: 4-bit codes in
blocks of 32 along K with a zero point and a scale per block and column (round to nearest, the
range widened to hold 0), packed as onnxruntime's 4-bit quantizer and onnxruntime-genai's model
builder write them (B [N, blocks, 16] low nibble first, zero points [N, ceil(blocks / 2)]). For
benchmarks of int4 decoders (bench/models_bench.py's `_ortgenai_int4`); onnxruntime's own
quantizer is a PyPI package.

    /usr/bin/python3 tests/models/quantize_nbits.py SRC.onnx DST.onnx [--block 32]
"""
import argparse

import numpy as np
import onnx
from onnx import helper, numpy_helper


def pack_rows(codes):
    """[N, blocks, bs] codes 0..15 -> [N, blocks, bs / 2] bytes, element 2j low, 2j + 1 high."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def quantize(w, bs):
    """w [K, N] f32 -> (B, scales, zero points) as MatMulNBits takes them."""
    K, N = w.shape
    blocks = (K + bs - 1) // bs
    padded = np.zeros((blocks * bs, N), np.float32)
    padded[:K] = w
    cols = padded.T.reshape(N, blocks, bs)  # [N, blocks, bs]
    lo = np.minimum(cols.min(-1), 0.0)
    hi = np.maximum(cols.max(-1), 0.0)
    scale = (hi - lo) / 15.0
    scale[scale == 0] = 1.0
    zero = np.clip(np.round(-lo / scale), 0, 15).astype(np.int64)
    codes = np.clip(np.round(cols / scale[..., None]) + zero[..., None], 0, 15).astype(np.int64)
    zp = zero
    if blocks % 2:
        zp = np.concatenate([zp, np.zeros((N, 1), np.int64)], 1)
    zpacked = (zp[:, 0::2] | (zp[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    return pack_rows(codes), scale.astype(np.float32).reshape(-1), zpacked


def quantize_model(src, dst, bs=32):
    m = onnx.load(src)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    nodes, drop = [], set()
    for n in g.node:
        w = inits.get(n.input[1]) if n.op_type == "MatMul" and len(n.input) == 2 else None
        if w is None or len(w.dims) != 2 or w.data_type != onnx.TensorProto.FLOAT:
            nodes.append(n)
            continue
        a = numpy_helper.to_array(w)
        b, s, z = quantize(a, bs)
        base = n.input[1]
        g.initializer.extend([numpy_helper.from_array(b, base + "_q4"),
                              numpy_helper.from_array(s, base + "_scales"),
                              numpy_helper.from_array(z, base + "_zp")])
        drop.add(base)
        nodes.append(helper.make_node("MatMulNBits", [n.input[0], base + "_q4", base + "_scales",
                                                      base + "_zp"], list(n.output), name=n.name,
                                      domain="com.microsoft", K=a.shape[0], N=a.shape[1], bits=4,
                                      block_size=bs, accuracy_level=0))
    keep = [i for i in g.initializer if i.name not in drop]
    del g.initializer[:]
    g.initializer.extend(keep)
    del g.node[:]
    g.node.extend(nodes)
    if not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, dst)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--block", type=int, default=32)
    a = ap.parse_args()
    quantize_model(a.src, a.dst, a.block)
