"""Shared helpers for the Python package's tests (run by ctest as Python.pytest, PYTHONPATH=<build>/python)."""

import json
import os
import pathlib

import numpy as np
import pytest
from onnx import TensorProto, helper

SOURCE_DIR = pathlib.Path(os.environ.get("UBFUSE_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
MODELS = SOURCE_DIR / "tests" / "models"

ONNX_TYPES = {
    "f32": TensorProto.FLOAT,
    "f16": TensorProto.FLOAT16,
    "bf16": TensorProto.BFLOAT16,
    "i64": TensorProto.INT64,
    "i32": TensorProto.INT32,
    "bool": TensorProto.BOOL,
}


def model_bytes(nodes, inputs, outputs, initializers=(), opset=17):
    """A serialized ONNX model; inputs/outputs are (name, ubfuse dtype, shape) triples."""
    g = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, ONNX_TYPES[t], s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, ONNX_TYPES[t], s) for n, t, s in outputs],
        initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="ubfuse-pytest")
    return m.SerializeToString()


def binary_model(dtype, op="Add"):
    """z = op(x, y) and w = op(z, y) over [batch, 3] of one dtype."""
    return model_bytes(
        [helper.make_node(op, ["x", "y"], ["z"], name="first"),
         helper.make_node(op, ["z", "y"], ["w"], name="second")],
        [("x", dtype, ["batch", 3]), ("y", dtype, ["batch", 3])],
        [("z", dtype, ["batch", 3]), ("w", dtype, ["batch", 3])])


def seed_block_model(hidden=64):
    """silu(layer_norm(x + residual)): the block graph mode fuses into one kernel."""
    rng = np.random.default_rng(3)
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [hidden],
                               rng.uniform(0.5, 1.5, hidden).astype(np.float32))
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [hidden],
                              rng.uniform(-0.5, 0.5, hidden).astype(np.float32))
    nodes = [
        helper.make_node("Add", ["x", "residual"], ["sum"], name="add"),
        helper.make_node("LayerNormalization", ["sum", "scale", "bias"], ["ln"], name="ln",
                         axis=-1, epsilon=1e-5),
        helper.make_node("Sigmoid", ["ln"], ["sig"], name="sigmoid"),
        helper.make_node("Mul", ["ln", "sig"], ["y"], name="silu"),
    ]
    return model_bytes(nodes,
                       [("x", "f32", ["batch", "seq", hidden]),
                        ("residual", "f32", ["batch", "seq", hidden])],
                       [("y", "f32", ["batch", "seq", hidden])], [scale, bias])


def seed_block_numpy(x, r, hidden=64):
    rng = np.random.default_rng(3)
    scale = rng.uniform(0.5, 1.5, hidden).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, hidden).astype(np.float32)
    s = (x + r).astype(np.float64)
    ln = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5) * scale + bias
    return ln / (1 + np.exp(-ln))


def reference_sets(model):
    """(set name, {.onnx file: [input names]}, folder) of tests/models/refs/<model>."""
    folder = MODELS / "refs" / model
    man = json.loads((folder / "manifest.json").read_text())
    return [(s["name"], s["runs"], folder / s["name"]) for s in man["sets"]]


def near(got, want, what):
    """onnxruntime and ubfuse differ by f32 rounding through a few layers (tests/models_test.cc)."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    err = np.abs(got.astype(np.float64) - want) / (1e-4 + 1e-3 * np.abs(want))
    assert np.all(err <= 1), f"{what}: worst element {np.argmax(err)}: " \
        f"{got.flat[np.argmax(err)]} vs {want.flat[np.argmax(err)]}"


@pytest.fixture(scope="session")
def seed_block_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("models") / "seed_block.onnx"
    p.write_bytes(seed_block_model())
    return p
