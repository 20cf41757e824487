"""ubfuse.GraphBuilder and ubfuse.compile: graphs built in Python, as with the C++ builder."""

import numpy as np
import pytest

import ubfuse
from conftest import seed_block_numpy


def seed_block(hidden=64):
    rng = np.random.default_rng(3)
    scale = rng.uniform(0.5, 1.5, hidden).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, hidden).astype(np.float32)
    b = ubfuse.GraphBuilder()
    x = b.input("x", "f32", ["batch", "seq", hidden])
    r = b.input("residual", "f32", ["batch", "seq", hidden])
    y = b.silu(b.layer_norm(x + r, b.constant(scale, "scale"), b.constant(bias, "bias"), 1e-5))
    b.output("y", y)
    return b.build()


def test_seed_block_fuses_and_matches_numpy():
    g = seed_block()
    assert g.inputs[0] == {"name": "x", "dtype": "f32", "shape": ["batch", "seq", 64]}
    assert [o["name"] for o in g.outputs] == ["y"]
    assert "LayerNorm" in str(g)
    graph = ubfuse.compile(g)
    eager = ubfuse.compile(g, mode="eager", options={"num_threads": 1})
    assert [k["op_types"] for k in graph.kernels] == [["Add", "LayerNorm", "Silu"]]
    assert len(eager.kernels) == 3 and eager.num_threads == 1
    x = np.random.default_rng(0).standard_normal((2, 5, 64), dtype=np.float32)
    r = np.random.default_rng(1).standard_normal((2, 5, 64), dtype=np.float32)
    for m in (graph, eager):
        np.testing.assert_allclose(m.run({"x": x, "residual": r})["y"], seed_block_numpy(x, r),
                                   rtol=1e-4, atol=1e-5)
    # explain works on a built graph as on an imported one.
    rep = graph.explain(dims={"batch": 2, "seq": 5})
    assert len(rep.dict["graph"]["kernels"]) == 1 and rep.dict["model"] == "graph"


def test_operators_numbers_and_math_rows():
    b = ubfuse.GraphBuilder()
    x = b.input("x", "f32", [4])
    w = b.input("w", "f32", [4, 2])
    v = (2.0 * x + 1 - x / 4) * x
    b.output("v", -v)
    b.output("e", b.exp(x))
    b.output("m", b.max(x, 0.5))
    b.output("mm", b.reshape(x, [1, 4]) @ w)
    b.output("sel", b.where(b.less(x, b.scalar(0.0)), b.neg(x), x))
    b.output("i", b.cast(x, "i32"))
    m = ubfuse.compile(b.build())
    xv = np.array([-1.5, 0.0, 2.0, 3.25], np.float32)
    wv = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = m.run({"x": xv, "w": wv})
    np.testing.assert_allclose(out["v"], -((2 * xv + 1 - xv / 4) * xv), rtol=1e-6)
    np.testing.assert_allclose(out["e"], np.exp(xv), rtol=1e-6)
    np.testing.assert_array_equal(out["m"], np.maximum(xv, 0.5))
    np.testing.assert_allclose(out["mm"], xv.reshape(1, 4) @ wv, rtol=1e-6)
    np.testing.assert_array_equal(out["sel"], np.abs(xv))
    assert out["i"].dtype == np.int32
    np.testing.assert_array_equal(out["i"], xv.astype(np.int32))


def test_data_movement_and_int_constants():
    b = ubfuse.GraphBuilder()
    x = b.input("x", "f32", ["n", 3])
    ids = b.constant(np.array([2, 0], np.int64))
    t = b.transpose(x, [1, 0])
    g = b.gather(t, ids, axis=0)
    b.output("g", g)
    b.output("s", b.slice(x, [1], [3], [1]))
    b.output("c", b.concat([x, x], axis=0))
    b.output("sum", b.reduce_sum(x, keepdims=False))
    b.output("sm", b.softmax(x))
    m = ubfuse.compile(b.build())
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = m.run({"x": xv})
    np.testing.assert_array_equal(out["g"], xv.T[[2, 0]])
    np.testing.assert_array_equal(out["s"], xv[:, 1:3])
    np.testing.assert_array_equal(out["c"], np.concatenate([xv, xv]))
    np.testing.assert_allclose(out["sum"], xv.sum(-1), rtol=1e-6)
    e = np.exp(xv - xv.max(-1, keepdims=True))
    np.testing.assert_allclose(out["sm"], e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_builder_errors():
    b = ubfuse.GraphBuilder()
    x = b.input("x", "f32", [2, 3])
    y = b.input("y", "f32", [4])
    with pytest.raises(ubfuse.Error, match=r"\[2,3\].*\[4\]"):
        b.add(x, y)  # the C++ builder's message names the op and the shapes
    with pytest.raises(ubfuse.Error, match="unknown dtype|f33"):
        b.input("z", "f33", [1])
    with pytest.raises(ubfuse.Error, match="a dim is an int or a symbol name"):
        b.input("z", "f32", [1.5])
    with pytest.raises(ubfuse.Error, match="at least one operand must be a GraphBuilder value"):
        b.add(1, 2)
    other = ubfuse.GraphBuilder()
    with pytest.raises(ubfuse.Error, match="belongs to another GraphBuilder"):
        other.relu(x)
    b.output("x2", x * 2)
    assert x.name == "x" and x.shape == [2, 3] and x.dtype == "f32"
    b.build()  # the graph is dropped at once: its values must not be followed
    for use in (lambda: b.relu(x), lambda: x.name, lambda: x + 1, lambda: other.relu(x)):
        with pytest.raises(ubfuse.Error, match="already built"):
            use()
    assert repr(x) == "<ubfuse.Value (built)>"
    # The builder starts a new graph after build().
    z = b.input("z", "f32", [2])
    b.output("w", b.relu(z))
    np.testing.assert_array_equal(
        ubfuse.compile(b.build()).run({"z": np.array([-1, 2], np.float32)})["w"], [0, 2])
    with pytest.raises(ubfuse.Error, match="numpy dtype float64"):
        ubfuse.GraphBuilder().constant(np.ones(2))


def test_bf16_constant_from_bits():
    b = ubfuse.GraphBuilder()
    x = b.input("x", "bf16", [3])
    c = b.constant(ubfuse.to_bf16(np.array([1.0, 2.0, 3.0], np.float32)), dtype="bf16")
    b.output("y", x * c)
    m = ubfuse.compile(b.build())
    out = m.run({"x": ubfuse.to_bf16(np.array([2.0, 0.5, -1.0], np.float32))})
    np.testing.assert_array_equal(ubfuse.from_bf16(out["y"]), [2.0, 1.0, -3.0])


def test_int8_and_uint8_arrays_in_and_out():
    b = ubfuse.GraphBuilder()
    q = b.input("q", "u8", [2, 3])
    b.output("t", b.transpose(q, [1, 0]))
    b.output("f", b.cast(q, "f32"))
    b.output("s", b.cast(b.input("x", "f32", [3]), "int8"))
    g = b.build()
    assert g.inputs[0]["dtype"] == "u8"
    q_in = np.array([[0, 1, 255], [7, 128, 200]], np.uint8)
    x_in = np.array([-300.0, 1.9, 127.5], np.float32)
    for mode in ("graph", "eager"):
        out = ubfuse.compile(g, mode=mode).run({"q": q_in, "x": x_in})
        assert out["t"].dtype == np.uint8 and out["s"].dtype == np.int8
        np.testing.assert_array_equal(out["t"], q_in.T)
        np.testing.assert_array_equal(out["f"], q_in.astype(np.float32))
        np.testing.assert_array_equal(out["s"], np.array([-128, 1, 127], np.int8))


@pytest.mark.parametrize("interleaved,rotary_dims", [(False, 0), (True, 0), (False, 12), (True, 12)])
def test_rotate_half_forms_match_numpy(interleaved, rotary_dims):
    b = ubfuse.GraphBuilder()
    x = b.input("x", "f32", ["rows", 16])
    b.output("y", b.rotate_half(b.abs(x), interleaved=interleaved, rotary_dims=rotary_dims))
    g = b.build()
    xv = np.abs(np.random.default_rng(5).standard_normal((3, 16), dtype=np.float32))
    r = rotary_dims or 16
    want = np.zeros_like(xv)
    if interleaved:
        want[:, 0:r:2] = -xv[:, 1:r:2]
        want[:, 1:r:2] = xv[:, 0:r:2]
    else:
        want[:, : r // 2] = -xv[:, r // 2 : r]
        want[:, r // 2 : r] = xv[:, : r // 2]
    for mode in ("graph", "eager"):
        np.testing.assert_array_equal(ubfuse.compile(g, mode=mode).run({"x": xv})["y"], want)
    with pytest.raises(Exception, match="got rotary_dims 5"):
        b2 = ubfuse.GraphBuilder()
        b2.rotate_half(b2.input("x", "f32", [2, 8]), rotary_dims=5)
