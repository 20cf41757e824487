"""Model.run and Model.run_into: every dtype, zero-copy inputs, conversions, caller-owned outputs
and the errors of each."""

import gc
import tracemalloc

import numpy as np
import pytest

import ubfuse
from conftest import binary_model

NUMPY = {"f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32}


def rand(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype in ("i64", "i32"):
        return rng.integers(-1000, 1000, shape).astype(NUMPY[dtype])
    return rng.uniform(-4, 4, shape).astype(NUMPY[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16", "i64", "i32"])
@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_add_in_every_numeric_dtype(dtype, mode):
    m = ubfuse.load_onnx(binary_model(dtype), mode=mode)
    x, y = rand(dtype, (5, 3), 1), rand(dtype, (5, 3), 2)
    out = m.run({"x": x, "y": y})
    assert list(out) == ["z", "w"]
    for name, want in (("z", x + y), ("w", x + y + y)):
        assert out[name].dtype == NUMPY[dtype]
        assert out[name].shape == (5, 3)
        if dtype == "f16":  # each add rounds to f16 once, as numpy's
            np.testing.assert_array_equal(out["z"], x + y)
            np.testing.assert_allclose(out[name], want, rtol=2e-3)
        else:
            np.testing.assert_array_equal(out[name], want)


def test_bool():
    m = ubfuse.load_onnx(binary_model("bool", op="Xor"))
    x = np.array([[True, False, True], [False, False, True]])
    y = np.array([[True, True, False], [False, True, True]])
    out = m.run({"x": x, "y": y})
    assert out["z"].dtype == np.bool_
    np.testing.assert_array_equal(out["z"], x ^ y)
    np.testing.assert_array_equal(out["w"], x)


def test_bf16_travels_as_uint16_bits():
    m = ubfuse.load_onnx(binary_model("bf16"))
    assert m.inputs[0]["dtype"] == "bf16"
    xf = np.array([[1.0, 2.5, -3.0], [0.25, 100.0, -0.5]], np.float32)
    yf = np.array([[0.5, 0.5, 0.5], [1.0, 28.0, 0.5]], np.float32)
    x, y = ubfuse.to_bf16(xf), ubfuse.to_bf16(yf)
    assert x.dtype == np.uint16
    np.testing.assert_array_equal(ubfuse.from_bf16(x), xf)  # all exact in bf16
    out = m.run({"x": x, "y": y})
    assert out["z"].dtype == np.uint16
    np.testing.assert_array_equal(ubfuse.from_bf16(out["z"]), xf + yf)
    # 1 + 2^-9 is halfway between two bf16 values: ties round to even.
    assert ubfuse.from_bf16(ubfuse.to_bf16(np.float32(1 + 2**-9)))[()] == 1.0
    assert ubfuse.from_bf16(ubfuse.to_bf16(np.float32(1 + 3 * 2**-9)))[()] == 1 + 2**-7
    # float32 is a dtype of ubfuse's: passed on, and the runtime reports the mismatch.
    with pytest.raises(ubfuse.Error, match="^input 'x' has dtype f32 but the model expects bf16$"):
        m.run({"x": xf, "y": y})
    # float64 is not: it is never converted to bf16 implicitly.
    with pytest.raises(ubfuse.Error, match="input 'x' is a numpy array of dtype float64, which "
                       "ubfuse does not convert to the bf16 the model expects; hint: pass bf16 as "
                       "its raw bits in uint16"):
        m.run({"x": xf.astype(np.float64), "y": y})


def test_outputs_own_their_memory():
    m = ubfuse.load_onnx(binary_model("f32"))
    x, y = rand("f32", (4, 3), 1), rand("f32", (4, 3), 2)
    out = m.run({"x": x, "y": y})
    z = out["z"]
    assert z.flags.writeable and z.flags.c_contiguous
    assert not np.shares_memory(z, x) and not np.shares_memory(z, y)
    del m, out
    gc.collect()
    x[:] = 0  # the caller's input changes afterwards: the output does not
    np.testing.assert_array_equal(z, rand("f32", (4, 3), 1) + y)
    z += 1  # and the output is the caller's to change
    # Two runs give two arrays.
    m = ubfuse.load_onnx(binary_model("f32"))
    a, b = m.run({"x": x, "y": y})["z"], m.run({"x": x, "y": y})["z"]
    assert not np.shares_memory(a, b)


def test_contiguous_inputs_are_not_copied():
    # numpy reports its allocations to tracemalloc; ubfuse's own (the output) it does not see.
    m = ubfuse.load_onnx(binary_model("f32"))
    n = 1 << 20
    x, y = np.ones((n, 3), np.float32), np.ones((n, 3), np.float32)
    m.run({"x": x, "y": y})  # plans this shape
    tracemalloc.start()
    out = m.run({"x": x, "y": y})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < x.nbytes // 4, f"run allocated {peak} bytes through numpy"
    np.testing.assert_array_equal(out["w"][:2], 3)
    # A float64 input is converted once: that copy shows.
    x64 = np.ones((n, 3), np.float64)
    tracemalloc.start()
    m.run({"x": x64, "y": y})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak >= x.nbytes


def test_inputs_of_other_dtypes_and_layouts_are_converted():
    m = ubfuse.load_onnx(binary_model("f32"))
    y = np.ones((2, 3), np.float32)
    want = np.array([[1, 2, 3], [4, 5, 6]], np.float32) + 1
    for x in ([[1, 2, 3], [4, 5, 6]],                                    # a list
              np.array([[1, 2, 3], [4, 5, 6]], np.float64),                # float64
              np.array([[1, 2, 3], [4, 5, 6]], np.int8),                   # int8
              np.array([[1, 2, 3], [4, 5, 6]], ">f4"),                     # big-endian
              np.asfortranarray(np.array([[1, 2, 3], [4, 5, 6]], np.float32)),
              np.array([[1, 0, 2, 0, 3, 0], [4, 0, 5, 0, 6, 0]], np.float32)[:, ::2]):
        np.testing.assert_array_equal(m.run({"x": x, "y": y})["z"], want)
    # Unaligned float32 (inside a byte buffer): copied to an aligned array first.
    buf = np.zeros(2 * 3 * 4 + 1, np.uint8)
    x = buf[1:].view(np.float32).reshape(2, 3)
    x[:] = [[1, 2, 3], [4, 5, 6]]
    assert not x.flags.aligned
    np.testing.assert_array_equal(m.run({"x": x, "y": y})["z"], want)


def test_int_model_converts_small_ints_but_not_floats():
    m = ubfuse.load_onnx(binary_model("i64"))
    y = np.zeros((1, 3), np.int64)
    np.testing.assert_array_equal(m.run({"x": np.array([[1, 2, 3]], np.uint8), "y": y})["z"],
                                  [[1, 2, 3]])
    with pytest.raises(ubfuse.Error, match="input 'x' is a numpy array of dtype float64, which "
                       "ubfuse does not convert to the i64 the model expects; hint: convert it "
                       "with .astype"):
        m.run({"x": np.ones((1, 3)), "y": y})
    # A list takes the input's dtype where numpy's same_kind casting allows, so ints become i64
    # and floats stay an error; an int32 array is ubfuse's, and the runtime reports it.
    np.testing.assert_array_equal(m.run({"x": [[1, 2, 3]], "y": y})["z"], [[1, 2, 3]])
    with pytest.raises(ubfuse.Error, match="dtype float64, which ubfuse does not convert"):
        m.run({"x": [[1.5, 2, 3]], "y": y})
    with pytest.raises(ubfuse.Error, match="^input 'x' has dtype i32 but the model expects i64$"):
        m.run({"x": np.ones((1, 3), np.int32), "y": y})
    # A Python scalar for a 0-d input would go the same way; a rank mismatch is the runtime's.
    with pytest.raises(ubfuse.Error, match="input 'x' has shape \\[\\] but the model expects rank 2"):
        m.run({"x": 7, "y": y})


def test_torch_tensors_through_dlpack_without_a_copy():
    import torch  # python3-torch, from scripts/install-deps.sh
    m = ubfuse.load_onnx(binary_model("f32"))
    x, y = torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.ones(2, 3)
    z = m.run({"x": x, "y": y})["z"]
    np.testing.assert_array_equal(torch.from_numpy(z), x + y)
    # Outputs go to torch through DLPack without a copy: the tensor is the output's memory.
    tz = torch.from_dlpack(z)
    assert tz.data_ptr() == z.ctypes.data and tz.dtype == torch.float32
    tz[0, 0] = 42
    assert z[0, 0] == 42
    # A large contiguous tensor: no numpy copy shows in tracemalloc (torch's own memory does not).
    big = torch.ones(1 << 20, 3)
    m.run({"x": big, "y": big})
    tracemalloc.start()
    out = m.run({"x": big, "y": big})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < big.numel() * 4 // 4, f"run allocated {peak} bytes through numpy"
    np.testing.assert_array_equal(out["w"][-1], 3)
    # A transposed tensor is strided: copied once into C order. Other dtypes follow the rules of
    # arrays: float64 is converted, int32 is reported by the runtime.
    t = torch.arange(6, dtype=torch.float32).reshape(3, 2).T
    np.testing.assert_array_equal(m.run({"x": t, "y": y})["z"], t.numpy() + 1)
    np.testing.assert_array_equal(m.run({"x": x.double(), "y": y})["z"], (x + y).numpy())
    with pytest.raises(ubfuse.Error, match="^input 'x' has dtype i32 but the model expects f32$"):
        m.run({"x": x.int(), "y": y})
    # DLPack has no bool: such tensors come through numpy.asarray instead.
    b = ubfuse.load_onnx(binary_model("bool", op="Or"))
    tb = torch.tensor([[True, False, False]])
    np.testing.assert_array_equal(b.run({"x": tb, "y": ~tb})["z"], [[True, True, True]])
    # bf16 tensors as their bits, without a copy.
    h = ubfuse.load_onnx(binary_model("bf16"))
    tbf = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.bfloat16)
    bits = tbf.view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(ubfuse.from_bf16(h.run({"x": bits, "y": bits})["w"]),
                                  [[3.0, 6.0, 9.0]])


def test_zero_sized_batch():
    m = ubfuse.load_onnx(binary_model("f32"))
    out = m.run({"x": np.zeros((0, 3), np.float32), "y": np.zeros((0, 3), np.float32)})
    assert out["w"].shape == (0, 3)


def test_run_errors_carry_the_cpp_messages():
    m = ubfuse.load_onnx(binary_model("f32"))
    x = np.ones((2, 3), np.float32)

    def err(inputs):
        with pytest.raises(ubfuse.Error) as e:
            m.run(inputs)
        assert isinstance(e.value, RuntimeError)
        return str(e.value)

    assert err({"x": x, "y": x, "q": x}) == "unknown input 'q'; the model's inputs are: x, y"
    # An unknown name is reported first even when its value is something ubfuse does not take.
    assert err({"x": x, "y": x, "q": "text"}) == "unknown input 'q'; the model's inputs are: x, y"
    assert err({"x": x}) == "missing input 'y' (f32[batch,3])"
    assert err({"x": x, "y": np.ones((2, 3), np.int32)}) == \
        "input 'y' has dtype i32 but the model expects f32"
    assert err({"x": x, "y": np.ones((2, 3, 1), np.float32)}) == \
        "input 'y' has shape [2,3,1] but the model expects rank 2 [batch,3]"
    assert err({"x": x, "y": np.ones((2, 4), np.float32)}) == \
        "input 'y' dim 1 is 4 but the model expects 3 (shape [batch,3])"
    assert "symbol 'batch' is 2 in input 'x' dim 0 but 5 in input 'y' dim 0" in \
        err({"x": x, "y": np.ones((5, 3), np.float32)})
    assert err({1: x, "y": x}) == "input names must be strings, got 1"
    with pytest.raises(TypeError):
        m.run([x, x])


def test_run_into_writes_into_the_callers_arrays():
    m = ubfuse.load_onnx(binary_model("f32"))
    x, y = rand("f32", (2, 3), 1), rand("f32", (2, 3), 2)
    z, w = np.empty((2, 3), np.float32), np.empty((2, 3), np.float32)
    outputs = {"z": z, "w": w}
    assert m.run_into({"x": x, "y": y}, outputs) is None
    assert outputs["z"] is z and outputs["w"] is w
    np.testing.assert_array_equal(z, x + y)
    np.testing.assert_array_equal(w, x + y + y)
    # Again with new inputs: the same arrays.
    m.run_into({"x": y, "y": y}, outputs)
    np.testing.assert_array_equal(z, y + y)
    # Outputs the dict does not name are allocated and added, as in C++.
    partial = {"w": w}
    m.run_into({"x": x, "y": y}, partial)
    assert partial["w"] is w and set(partial) == {"w", "z"}
    np.testing.assert_array_equal(partial["z"], x + y)


def test_run_into_bf16_and_bool_buffers():
    m = ubfuse.load_onnx(binary_model("bf16"))
    x = ubfuse.to_bf16(np.ones((1, 3), np.float32))
    z, w = np.empty((1, 3), np.uint16), np.empty((1, 3), np.uint16)
    m.run_into({"x": x, "y": x}, {"z": z, "w": w})
    np.testing.assert_array_equal(ubfuse.from_bf16(w), 3)
    m = ubfuse.load_onnx(binary_model("bool", op="Or"))
    z, w = np.empty((1, 3), np.bool_), np.empty((1, 3), np.bool_)
    m.run_into({"x": np.array([[True, False, False]]), "y": np.array([[False, False, True]])},
               {"z": z, "w": w})
    np.testing.assert_array_equal(z, [[True, False, True]])


def test_run_into_errors():
    m = ubfuse.load_onnx(binary_model("f32"))
    x = np.ones((2, 3), np.float32)
    ok = np.empty((2, 3), np.float32)

    def err(outputs):
        with pytest.raises(ubfuse.Error) as e:
            m.run_into({"x": x, "y": x}, outputs)
        return str(e.value)

    assert err({"z": np.empty((3, 3), np.float32), "w": ok}) == \
        "output buffer 'z' is f32[3,3] but this call produces f32[2,3]"
    assert err({"z": np.empty((2, 3), np.int32), "w": ok}) == \
        "output buffer 'z' is i32[2,3] but this call produces f32[2,3]"
    assert err({"z": np.empty((2, 3), np.float64)}) == \
        "output buffer 'z' has numpy dtype float64; this output is f32 (numpy float32)"
    assert err({"z": np.empty((2, 6), np.float32)[:, ::2]}).startswith(
        "output buffer 'z' must be a writable, C-contiguous, aligned array")
    ro = np.empty((2, 3), np.float32)
    ro.flags.writeable = False
    assert err({"z": ro}).startswith("output buffer 'z' must be a writable")
    assert err({"zz": ok}) == "unknown output 'zz'; the model's outputs are: z, w"
    assert err({"z": [[0.0] * 3] * 2}) == \
        "output buffer 'z' must be a numpy array of f32 (numpy float32), got list"
    # Input errors come first, with the runtime's message.
    with pytest.raises(ubfuse.Error, match="missing input 'y'"):
        m.run_into({"x": x}, {"z": ok})
