#!/usr/bin/env python3
"""Writes the small ONNX models tests/onnx_import_test.cc imports: features (symbolic shapes,
external data, typed fields, PyTorch-style masks) with numpy reference outputs, and broken or
unsupported models whose error messages the tests check.

    /usr/bin/python3 tests/models/make_onnx_cases.py   # rewrites tests/models/onnx_cases/
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx_cases")
rng = np.random.default_rng(0)


def save(name, nodes, inputs, outputs, inits=(), opset=17, check=True):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="make_onnx_cases")
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name + ".onnx"))
    return m


def npy(name, arr):
    np.save(os.path.join(OUT, name + ".npy"), np.ascontiguousarray(arr))


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def gemm_relu():
    w = rng.standard_normal((3, 4)).astype(np.float32)  # used transposed
    c = rng.standard_normal((3,)).astype(np.float32)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["g"], name="gemm", alpha=0.5, beta=2.0,
                              transB=1),
             helper.make_node("Relu", ["g"], ["y"], name="relu")]
    save("gemm_relu", nodes, [vi("x", TensorProto.FLOAT, ["N", 4])],
         [vi("y", TensorProto.FLOAT, ["N", 3])],
         [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")])
    npy("gemm_relu.x", x)
    npy("gemm_relu.y", np.maximum(0.5 * x @ w.T + 2.0 * c, 0))


def symbolic_reshape():
    # The exporter's view(b, s, heads, d) / transpose / reshape(b, s, h) round trip.
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    i64 = lambda n, v: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        i64("zero", 0), i64("one", 1), i64("axes0", [0]), i64("hd", [2, 4]), i64("h", [8]),
        helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "axes0"], ["s1"]),
        helper.make_node("Concat", ["b1", "s1", "hd"], ["shape4"], axis=0),
        helper.make_node("Reshape", ["x", "shape4"], ["x4"], name="view"),
        helper.make_node("Transpose", ["x4"], ["xt"], perm=[0, 2, 1, 3]),
        helper.make_node("Neg", ["xt"], ["n"]),
        helper.make_node("Transpose", ["n"], ["nt"], perm=[0, 2, 1, 3]),
        helper.make_node("Concat", ["b1", "s1", "h"], ["shape3"], axis=0),
        helper.make_node("Reshape", ["nt", "shape3"], ["y"], name="back"),
    ]
    save("symbolic_reshape", nodes, [vi("x", TensorProto.FLOAT, ["batch", "seq", 8])],
         [vi("y", TensorProto.FLOAT, ["batch", "seq", 8])])
    npy("symbolic_reshape.x", x)
    npy("symbolic_reshape.y", -x)


def kv_concat():
    # A KV-cache step's shape arithmetic: the cache grows along a symbolic axis (past + seq), and
    # the sizes sliced and reshaped to are sums and differences of symbols.
    own = np.random.default_rng(25)  # its own stream: the other cases' data stay as they were
    past = own.standard_normal((2, 3, 4)).astype(np.float32)
    x = own.standard_normal((2, 2, 4)).astype(np.float32)
    i64 = lambda n, v: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [
        i64("zero", 0), i64("one", 1), i64("two", 2), i64("four", 4), i64("axes0", [0]),
        i64("starts", [1]), i64("axes1", [1]),
        helper.make_node("Concat", ["past", "x"], ["cat"], axis=1, name="cache"),
        helper.make_node("Shape", ["cat"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["total"], axis=0),
        helper.make_node("Sub", ["total", "one"], ["end"]),
        helper.make_node("Unsqueeze", ["end", "axes0"], ["ends"]),
        helper.make_node("Slice", ["cat", "starts", "ends", "axes1"], ["inner"], name="inner"),
        helper.make_node("Sub", ["total", "two"], ["len"]),
        helper.make_node("Mul", ["len", "four"], ["flat"]),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"]),
        helper.make_node("Unsqueeze", ["flat", "axes0"], ["flat1"]),
        helper.make_node("Concat", ["b1", "flat1"], ["target"], axis=0),
        helper.make_node("Reshape", ["inner", "target"], ["r"], name="flatten"),
        helper.make_node("Neg", ["r"], ["y"]),
    ]
    save("kv_concat", nodes, [vi("past", TensorProto.FLOAT, ["batch", "past", 4]),
                              vi("x", TensorProto.FLOAT, ["batch", "seq", 4])],
         [vi("y", TensorProto.FLOAT, ["batch", "flat"])])
    npy("kv_concat.past", past)
    npy("kv_concat.x", x)
    npy("kv_concat.y", -np.concatenate([past, x], 1)[:, 1:-1, :].reshape(2, -1))


def odd_dim_params():
    # dim_params that spell arithmetic or hold a '-' are still one name each, and an exporter's
    # Where(Equal(shape - [1, 1, 0], shape), ...) prologue decides without sizes.
    own = np.random.default_rng(26)
    x = own.standard_normal((2, 3, 3)).astype(np.float32)
    i64 = lambda n, v: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [
        i64("dec", [1, 1, 0]), i64("ones", [1, 1, 1]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Sub", ["s", "dec"], ["t"]),
        helper.make_node("Equal", ["t", "s"], ["eq"]),
        helper.make_node("Where", ["eq", "ones", "s"], ["target"]),
        helper.make_node("Expand", ["x", "target"], ["e"]),
        helper.make_node("Relu", ["e"], ["y"]),
    ]
    shape = ["batch-size", "past_sequence_length + 1", 3]
    save("odd_dim_params", nodes, [vi("x", TensorProto.FLOAT, shape)], [vi("y", TensorProto.FLOAT, shape)])
    npy("odd_dim_params.x", x)
    npy("odd_dim_params.y", np.maximum(x, 0))


def head_slice():
    # x[:, :3] of a symbolic axis is min(3, seq) long, no dim expression: it needs the size.
    own = np.random.default_rng(27)
    x = own.standard_normal((2, 5, 2)).astype(np.float32)
    i64 = lambda n, v: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [i64("starts", [0]), i64("ends", [3]), i64("axes", [1]),
             helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="head")]
    save("head_slice", nodes, [vi("x", TensorProto.FLOAT, ["batch", "seq", 2])],
         [vi("y", TensorProto.FLOAT, ["batch", 3, 2])])
    npy("head_slice.x", x)
    npy("head_slice.y", x[:, :3])


def range_mask():
    # A causal mask from Range over the sequence length: needs the length at import.
    x = rng.standard_normal((2, 4, 4)).astype(np.float32)
    i64 = lambda n, v: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]), i64("two", 2), i64("z", 0), i64("o", 1),
        i64("ax0", [0]), i64("ax1", [1]),
        helper.make_node("Gather", ["shape", "two"], ["n"], axis=0),
        helper.make_node("Range", ["z", "n", "o"], ["r"], name="positions"),
        helper.make_node("Unsqueeze", ["r", "ax0"], ["row"]),
        helper.make_node("Unsqueeze", ["r", "ax1"], ["col"]),
        helper.make_node("Greater", ["row", "col"], ["future"]),
        helper.make_node("Constant", [], ["ninf"], value=numpy_helper.from_array(np.array(-np.inf, np.float32))),
        helper.make_node("Where", ["future", "ninf", "x"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["y"], axis=-1),
    ]
    save("range_mask", nodes, [vi("x", TensorProto.FLOAT, ["batch", "seq", "seq"])],
         [vi("y", TensorProto.FLOAT, ["batch", "seq", "seq"])])
    m = np.triu(np.ones((4, 4), bool), 1)
    xm = np.where(m, -np.inf, x)
    e = np.exp(xm - xm.max(-1, keepdims=True))
    npy("range_mask.x", x)
    npy("range_mask.y", (e / e.sum(-1, keepdims=True)).astype(np.float32))


def trilu_mask():
    # PyTorch's triu(full(-inf), 1) on a constant: folded at import.
    x = rng.standard_normal((3, 5, 5)).astype(np.float32)
    full = np.full((5, 5), -np.inf, np.float32)
    one = np.array(1, np.int64)
    nodes = [helper.make_node("Trilu", ["full", "k"], ["mask"], upper=1),
             helper.make_node("Add", ["x", "mask"], ["y"])]
    save("trilu_mask", nodes, [vi("x", TensorProto.FLOAT, [3, 5, 5])], [vi("y", TensorProto.FLOAT, [3, 5, 5])],
         [numpy_helper.from_array(full, "full"), numpy_helper.from_array(one, "k")])
    npy("trilu_mask.x", x)
    npy("trilu_mask.y", x + np.triu(full, 1))


def typed_fields():
    # Initializers in typed fields rather than raw_data, a DOUBLE one, and an f16 one.
    a = helper.make_tensor("a", TensorProto.FLOAT, [2], [1.5, -2.0])
    d = helper.make_tensor("d", TensorProto.DOUBLE, [2], [0.25, 4.0])
    idx = helper.make_tensor("idx", TensorProto.INT64, [2], [1, 0])
    # make_tensor stores FLOAT16 values as their bits in int32_data.
    h = helper.make_tensor("h", TensorProto.FLOAT16, [2], [0.5, 2.0])
    nodes = [helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Add", ["m", "d"], ["s"]),
             helper.make_node("Gather", ["s", "idx"], ["y"], axis=1),
             helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["y", "hf"], ["z"])]
    save("typed_fields", nodes, [vi("x", TensorProto.FLOAT, [3, 2])], [vi("z", TensorProto.FLOAT, [3, 2])],
         [a, d, idx, h], check=False)
    x = rng.standard_normal((3, 2)).astype(np.float32)
    npy("typed_fields.x", x)
    npy("typed_fields.z", ((x * [1.5, -2.0] + [0.25, 4.0])[:, [1, 0]] * [0.5, 2.0]).astype(np.float32))


def external_data():
    w = rng.standard_normal((4, 4)).astype(np.float32)
    t = numpy_helper.from_array(w, "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "external_data.bin"), ("offset", "64"), ("length", str(w.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    with open(os.path.join(OUT, "external_data.bin"), "wb") as f:
        f.write(b"\0" * 64 + w.tobytes())
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    save("external_data", nodes, [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])],
         [t], check=False)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    npy("external_data.x", x)
    npy("external_data.y", x @ w)
    # The same, pointing outside the model's folder.
    t.external_data[0].value = "../../../../../../etc/hostname"
    save("external_escape", nodes, [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])],
         [t], check=False)


def broken():
    x = [vi("x", TensorProto.FLOAT, [2, 3])]
    y = [vi("y", TensorProto.FLOAT, [2, 3])]
    save("unsupported_op", [helper.make_node("NonZero", ["x"], ["y"], name="nz")], x, y, check=False)
    save("unsupported_attr", [helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln",
                                               stash_type=0)], x, y,
         [numpy_helper.from_array(np.ones(3, np.float32), "s")], check=False)
    save("unknown_attr", [helper.make_node("Relu", ["x"], ["y"], name="r", flavor=3)], x, y, check=False)
    bad = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [0.0] * 6)
    bad.ClearField("float_data")
    bad.raw_data = b"\0" * 7
    save("bad_raw_size", [helper.make_node("Add", ["x", "w"], ["y"])], x, y, [bad], check=False)
    # Dims of 4e15 bytes with 3 values: refused before anything is allocated (fuzz_onnx).
    huge = helper.make_tensor("w", TensorProto.FLOAT, [3], [0.0] * 3)
    huge.dims[:] = [100000, 100000, 100000]
    save("huge_dims", [helper.make_node("Add", ["x", "w"], ["y"])], x, y, [huge], check=False)
    enum = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [0.0] * 6)
    enum.data_type = 99
    save("bad_dtype_enum", [helper.make_node("Add", ["x", "w"], ["y"])], x, y, [enum], check=False)
    save("bad_order", [helper.make_node("Relu", ["t"], ["y"], name="late"),
                       helper.make_node("Neg", ["x"], ["t"], name="early")], x, y, check=False)
    save("bad_axis", [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=5)], x, y, check=False)
    save("double_input", [helper.make_node("Relu", ["x"], ["y"])], [vi("x", TensorProto.DOUBLE, [2])],
         [vi("y", TensorProto.DOUBLE, [2])], check=False)
    with open(os.path.join(OUT, "not_a_model.onnx"), "wb") as f:
        f.write(b"\x08\x07\x12\xff\xff\xff\xff\x0f garbage")


def if_cache():
    # Optimum's merged decoder in miniature: one If on a bool input picks a branch that extends a
    # cache (its length from Shape in the branch) or one that starts it; both read an outer
    # initializer and outer inputs.
    own = np.random.default_rng(31)
    w = numpy_helper.from_array(own.standard_normal(4).astype(np.float32), "w")
    i64 = lambda n, v: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    then_nodes = [
        helper.make_node("Concat", ["past", "x"], ["t_present"], axis=1),
        helper.make_node("Shape", ["t_present"], ["t_shape"]),
        i64("one", [1]), i64("two", [2]),
        helper.make_node("Slice", ["t_shape", "one", "two"], ["t_len"]),
        helper.make_node("Cast", ["t_len"], ["t_lenf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["w", "t_lenf"], ["t_scale"]),
        helper.make_node("Add", ["x", "t_scale"], ["t_y"]),
    ]
    then_g = helper.make_graph(then_nodes, "with_past", [],
                               [vi("t_y", TensorProto.FLOAT, None), vi("t_present", TensorProto.FLOAT, None)])
    else_nodes = [helper.make_node("Identity", ["x"], ["e_present"]),
                  helper.make_node("Mul", ["x", "w"], ["e_y"])]
    else_g = helper.make_graph(else_nodes, "no_past", [],
                               [vi("e_y", TensorProto.FLOAT, None), vi("e_present", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("If", ["use_cache"], ["y", "present"], name="merged",
                              then_branch=then_g, else_branch=else_g)]
    save("if_cache", nodes,
         [vi("x", TensorProto.FLOAT, ["batch", "seq", 4]), vi("past", TensorProto.FLOAT, ["batch", "past_len", 4]),
          vi("use_cache", TensorProto.BOOL, [1])],
         [vi("y", TensorProto.FLOAT, ["batch", "seq", 4]), vi("present", TensorProto.FLOAT, ["batch", "total", 4])],
         [w])


def einsum_forms():
    # The Einsum forms exporters write, over symbolic dims: an outer product (rotary positions),
    # attention's scores and context, a transpose.
    own = np.random.default_rng(37)
    q = own.standard_normal((2, 2, 3, 8)).astype(np.float32)
    k = own.standard_normal((2, 2, 5, 8)).astype(np.float32)
    pos = np.arange(3, dtype=np.float32)
    freq = own.standard_normal(4).astype(np.float32)
    nodes = [helper.make_node("Einsum", ["pos", "freq"], ["outer"], equation="i,j->ij"),
             helper.make_node("Einsum", ["q", "k"], ["scores"], equation="bhqd,bhkd->bhqk"),
             helper.make_node("Einsum", ["scores", "k"], ["ctx"], equation="bhqk,bhkd->bhqd"),
             helper.make_node("Einsum", ["q"], ["tr"], equation="bhsd->bshd")]
    f = TensorProto.FLOAT
    save("einsum_forms", nodes,
         [vi("q", f, ["b", 2, "s", 8]), vi("k", f, ["b", 2, "t", 8]), vi("pos", f, ["s"]), vi("freq", f, [4])],
         [vi("outer", f, ["s", 4]), vi("scores", f, ["b", 2, "s", "t"]), vi("ctx", f, ["b", 2, "s", 8]),
          vi("tr", f, ["b", "s", 2, 8])])
    scores = np.einsum("bhqd,bhkd->bhqk", q, k)
    for name, arr in [("q", q), ("k", k), ("pos", pos), ("freq", freq), ("outer", np.outer(pos, freq)),
                      ("scores", scores), ("ctx", np.einsum("bhqk,bhkd->bhqd", scores, k)),
                      ("tr", q.transpose(0, 2, 1, 3))]:
        npy("einsum_forms." + name, arr.astype(np.float32))
    save("einsum_diagonal", [helper.make_node("Einsum", ["x"], ["y"], name="diag", equation="ii->i")],
         [vi("x", f, [3, 3])], [vi("y", f, [3])])


def trilu_runtime():
    # A lower-triangular mask over a symbolic length with k given at run time.
    f = TensorProto.FLOAT
    save("trilu_runtime", [helper.make_node("Trilu", ["x", "k"], ["y"], name="tril", upper=0)],
         [vi("x", f, ["batch", "seq", "seq"]), vi("k", TensorProto.INT64, [])], [vi("y", f, ["batch", "seq", "seq"])])


def opset18_forms():
    # Opset 18's signatures: Reduce* axes as an input, Split's num_outputs (an uneven last part).
    own = np.random.default_rng(41)
    x = own.standard_normal((2, 7, 3)).astype(np.float32)
    f = TensorProto.FLOAT
    i64 = lambda n, v: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [i64("last", [-1]), i64("outer", [0, 2]),
             helper.make_node("ReduceMean", ["x", "last"], ["mean"], keepdims=1),
             helper.make_node("ReduceSum", ["x", "outer"], ["sum"], keepdims=0),
             helper.make_node("ReduceMax", ["x"], ["max"], keepdims=1),
             helper.make_node("Split", ["x"], ["p0", "p1", "p2"], axis=1, num_outputs=3)]
    outs = {"mean": x.mean(-1, keepdims=True), "sum": x.sum((0, 2)), "max": x.max(keepdims=True),
            "p0": x[:, 0:3], "p1": x[:, 3:6], "p2": x[:, 6:7]}
    save("opset18_forms", nodes, [vi("x", f, [2, 7, 3])],
         [vi(n, f, list(v.shape)) for n, v in outs.items()], opset=18, check=False)
    npy("opset18_forms.x", x)
    for n, v in outs.items():
        npy("opset18_forms." + n, v.astype(np.float32))
def conv_gn_pad():
    # An audio front end over a symbolic length at opset 18: reflect Pad of the length axis only
    # (the axes input), a dilated Conv1d with bias, GroupNormalization with per-group scale/bias.
    rng = np.random.default_rng(25)
    x = rng.standard_normal((1, 4, 9)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3)).astype(np.float32)
    b = rng.standard_normal((6,)).astype(np.float32)
    scale = rng.standard_normal((3,)).astype(np.float32)
    shift = rng.standard_normal((3,)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array([2, 1], np.int64), "pads"),
             numpy_helper.from_array(np.array([-1], np.int64), "axes"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(shift, "shift")]
    nodes = [helper.make_node("Pad", ["x", "pads", "", "axes"], ["p"], name="pad", mode="reflect"),
             helper.make_node("Conv", ["p", "w", "b"], ["c"], name="conv", kernel_shape=[3],
                              dilations=[2], pads=[1, 1]),
             helper.make_node("GroupNormalization", ["c", "scale", "shift"], ["y"], name="gn",
                              num_groups=3, epsilon=1e-5)]
    save("conv_gn_pad", nodes, [vi("x", TensorProto.FLOAT, [1, 4, "len"])],
         [vi("y", TensorProto.FLOAT, [1, 6, "len_out"])], inits, opset=18, check=False)
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (2, 1)), mode="reflect")
    p = np.pad(p, ((0, 0), (0, 0), (1, 1)))
    out_len = p.shape[2] - 4
    c = np.zeros((1, 6, out_len))
    for t in range(out_len):
        c[0, :, t] = np.einsum("ck,mck->m", p[0, :, t:t + 5:2], w) + b
    g = c.reshape(1, 3, -1)
    g = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
    y = g.reshape(1, 3, 2, out_len) * scale[None, :, None, None] + shift[None, :, None, None]
    npy("conv_gn_pad.x", x)
    npy("conv_gn_pad.y", y.reshape(1, 6, out_len).astype(np.float32))


def expand_prologue():
    # PyTorch's cls_token.expand(b, -1, -1): the size list [b, -1] reshaped to [-1], its -1s
    # replaced by 1 through ConstantOfShape / Mul / Equal / Where, then Expand.
    rng = np.random.default_rng(26)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    cls = rng.standard_normal((1, 4)).astype(np.float32)
    i64 = lambda n, v: helper.make_node("Constant", [], [n], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        i64("zero", 0), i64("axes0", [0]), i64("minus1", [-1]), i64("flat", [-1]),
        helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"]),
        helper.make_node("Concat", ["b1", "minus1"], ["sizes"], axis=0),
        helper.make_node("Reshape", ["sizes", "flat"], ["sizes1"]),
        helper.make_node("Shape", ["sizes1"], ["n"]),
        helper.make_node("ConstantOfShape", ["n"], ["ones"],
                         value=numpy_helper.from_array(np.array([1], np.int64))),
        helper.make_node("Mul", ["ones", "minus1"], ["neg"]),
        helper.make_node("Equal", ["sizes1", "neg"], ["is_neg"]),
        helper.make_node("Where", ["is_neg", "ones", "sizes1"], ["target"]),
        helper.make_node("Expand", ["cls", "target"], ["e"]),
        helper.make_node("Add", ["x", "e"], ["y"]),
    ]
    save("expand_prologue", nodes, [vi("x", TensorProto.FLOAT, ["batch", 4])],
         [vi("y", TensorProto.FLOAT, ["batch", 4])], [numpy_helper.from_array(cls, "cls")])
    npy("expand_prologue.x", x)
    npy("expand_prologue.y", x + cls)


def main():
    os.makedirs(OUT, exist_ok=True)
    gemm_relu()
    symbolic_reshape()
    kv_concat()
    odd_dim_params()
    head_slice()
    range_mask()
    trilu_mask()
    typed_fields()
    external_data()
    broken()
    if_cache()
    einsum_forms()
    trilu_runtime()
    opset18_forms()
    conv_gn_pad()
    expand_prologue()


if __name__ == "__main__":
    main()
