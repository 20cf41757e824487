"""ubfuse.load_onnx: sources, modes, options, rules, dims, and its errors."""

import json
import pathlib

import numpy as np
import pytest
from onnx import TensorProto, helper

import ubfuse
from conftest import MODELS, binary_model, model_bytes, seed_block_model, seed_block_numpy


def test_import_sets_passive_omp_wait_policy_unless_set():
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = "import os, ubfuse; print(os.environ['OMP_WAIT_POLICY'], os.environ.get('GOMP_SPINCOUNT'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["PASSIVE", "0"]
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["ACTIVE", "None"]


def test_load_from_path_str_pathlike_and_bytes(seed_block_path):
    x = np.random.default_rng(0).standard_normal((2, 5, 64), dtype=np.float32)
    r = np.random.default_rng(1).standard_normal((2, 5, 64), dtype=np.float32)
    want = seed_block_numpy(x, r)
    for src in (str(seed_block_path), pathlib.Path(seed_block_path), seed_block_model(),
                bytearray(seed_block_model()), memoryview(seed_block_model())):
        m = ubfuse.load_onnx(src)
        y = m.run({"x": x, "residual": r})["y"]
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    assert ubfuse.load_onnx(seed_block_path).name == str(seed_block_path)
    assert ubfuse.load_onnx(seed_block_model()).name == "<bytes>"


def test_model_metadata(seed_block_path):
    m = ubfuse.load_onnx(seed_block_path)
    assert m.opset == 17
    assert m.producer.startswith("ubfuse-pytest")
    assert isinstance(m.notes, list)
    assert m.stats["compilations"] == 1
    assert m.stats["compile_ms"] > 0


def test_modes_and_fusion_option(seed_block_path):
    graph = ubfuse.load_onnx(seed_block_path)
    assert graph.mode == "graph"
    eager = ubfuse.load_onnx(seed_block_path, mode="eager")
    assert eager.mode == "eager"
    # One fused kernel in graph mode; one per op in eager mode (Add, LayerNorm, and Silu, which
    # x * sigmoid(x) becomes).
    assert [k["name"] for k in graph.kernels] == ["FusedAddLayerNormSilu"]
    assert [k["op_types"] for k in graph.kernels] == [["Add", "LayerNorm", "Silu"]]
    assert [k["name"] for k in eager.kernels] == ["Add", "LayerNorm", "Silu"]
    assert graph.kernels[0]["nodes"] == ["add", "ln", "silu"]
    assert graph.kernels[0]["inputs"] == ["x", "residual", "scale", "bias"]
    assert graph.kernels[0]["variant"] == "codegen" and not graph.kernels[0]["host"]
    assert ubfuse.load_onnx(seed_block_path, options={"ge.exec.enableOperatorFusion": "0"}).mode \
        == "eager"
    assert ubfuse.load_onnx(seed_block_path, options={"fusion": False}).mode == "eager"
    assert ubfuse.load_onnx(seed_block_path, mode="eager", options={"fusion": 0}).mode == "eager"
    with pytest.raises(ubfuse.Error, match="mode='graph' but options\\['fusion'\\] is '0'"):
        ubfuse.load_onnx(seed_block_path, mode="graph", options={"fusion": 0})
    with pytest.raises(ubfuse.Error, match="mode must be 'graph' or 'eager', got 'fused'"):
        ubfuse.load_onnx(seed_block_path, mode="fused")


def test_options_reach_the_compiler(seed_block_path):
    assert ubfuse.load_onnx(seed_block_path, options={"num_threads": 1}).num_threads == 1
    assert ubfuse.load_onnx(seed_block_path, options={"num_threads": "2"}).num_threads == 2
    m = ubfuse.load_onnx(seed_block_path, options={"codegen": "interpreter"})
    assert [k["variant"] for k in m.kernels] == ["interpreter"]
    with pytest.raises(ubfuse.Error, match="unknown option 'no_such_option'") as e:
        ubfuse.load_onnx(seed_block_path, options={"no_such_option": 1})
    assert "num_threads" in str(e.value)  # the C++ message lists the valid keys
    with pytest.raises(ubfuse.Error, match="option values must be str, int, float or bool"):
        ubfuse.load_onnx(seed_block_path, options={"num_threads": [1]})


def test_rules_file_switches_a_fusion_off(seed_block_path, tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"Switch": {"UBFusion": {"ALL": "off"}}}))
    fused = ubfuse.load_onnx(seed_block_path)
    split = ubfuse.load_onnx(seed_block_path, rules=str(rules))
    assert len(split.kernels) > len(fused.kernels)
    with pytest.raises(ubfuse.Error, match="missing.json"):
        ubfuse.load_onnx(seed_block_path, rules=str(tmp_path / "missing.json"))


def test_static_dims_at_import(seed_block_path):
    m = ubfuse.load_onnx(seed_block_path, dims={"batch": 2})
    assert m.inputs[0]["shape"] == [2, "seq", 64]
    with pytest.raises(ubfuse.Error, match="dims must map symbol names"):
        ubfuse.load_onnx(seed_block_path, dims={"batch": "two"})


def test_bad_path_is_an_error_with_the_cpp_message(tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(ubfuse.Error) as e:
        ubfuse.load_onnx(missing)
    assert str(e.value) == f"ONNX model '{missing}': cannot open the file"
    assert isinstance(e.value, RuntimeError)
    assert not isinstance(e.value, ubfuse.OnnxUnsupportedError)
    with pytest.raises(ubfuse.Error, match="expects a path .* or the model's bytes, got int"):
        ubfuse.load_onnx(42)


def test_malformed_bytes_are_an_error():
    with pytest.raises(ubfuse.Error) as e:
        ubfuse.load_onnx(b"this is not a protobuf")
    assert not isinstance(e.value, ubfuse.OnnxUnsupportedError)


def test_unsupported_op_raises_onnx_unsupported_error():
    b = model_bytes([helper.make_node("NoSuchOp", ["x"], ["y"], name="weird")],
                    [("x", "f32", [2])], [("y", "f32", [2])])
    with pytest.raises(ubfuse.OnnxUnsupportedError) as e:
        ubfuse.load_onnx(b)
    assert isinstance(e.value, ubfuse.Error)
    assert "NoSuchOp" in str(e.value) and "weird" in str(e.value)
    assert "NoSuchOp" not in ubfuse.onnx_supported_ops()
    assert "LayerNormalization" in ubfuse.onnx_supported_ops()


def test_model_needing_static_dims_names_them_and_loads_with_dims():
    # Splitting a symbolic axis into equal parts: the parts' sizes are the axis' size over two,
    # so the importer needs it. (Sizes given, as constants or at run time, would not need it.)
    nodes = [helper.make_node("Split", ["x"], ["y", "z"], name="split", axis=0)]
    b = model_bytes(nodes, [("x", "f32", ["n", 2])], [("y", "f32", [1, 2]), ("z", "f32", [1, 2])])
    try:
        ubfuse.load_onnx(b)
    except ubfuse.OnnxNeedsStaticDimsError as e:
        assert isinstance(e, ubfuse.OnnxUnsupportedError)
        assert e.symbols == ["n"]
        assert "'n'" in str(e)
        m = ubfuse.load_onnx(b, dims={"n": 2})
        out = m.run({"x": np.array([[1.5, 2.5], [3.5, 4.5]], np.float32)})
        np.testing.assert_array_equal(out["y"], [[1.5, 2.5]])
        np.testing.assert_array_equal(out["z"], [[3.5, 4.5]])
    else:
        pytest.fail("the model loaded without static dims; pick a graph that needs them")


def test_committed_model_inputs_and_outputs():
    m = ubfuse.load_onnx(MODELS / "bert_stack.onnx")
    ins = {i["name"]: i for i in m.inputs}
    assert set(ins) == {"input_ids", "attention_mask"}
    assert ins["input_ids"]["dtype"] == "i64"
    assert all(isinstance(d, (int, str)) for d in ins["input_ids"]["shape"])
    assert len(ins["input_ids"]["shape"]) == 2
    assert [o["name"] for o in m.outputs] == ["last_hidden_state"]
    assert m.outputs[0]["dtype"] == "f32"
    assert m.outputs[0]["shape"][-1] == 64


def test_binary_model_is_symbolic():
    m = ubfuse.load_onnx(binary_model("f32"))
    assert m.inputs == [{"name": "x", "dtype": "f32", "shape": ["batch", 3]},
                        {"name": "y", "dtype": "f32", "shape": ["batch", 3]}]
    assert [o["name"] for o in m.outputs] == ["z", "w"]
