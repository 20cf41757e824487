"""Model.explain (the `ubfuse explain` report) and `with ubfuse.profile(...)`."""

import json
import os
import subprocess
import threading

import numpy as np
import pytest

import ubfuse
from conftest import MODELS, seed_block_model


def cli(*args):
    exe = os.environ.get("UBFUSE_CLI")
    if not exe:
        pytest.fail("UBFUSE_CLI (set by ctest) names the ubfuse executable")
    return subprocess.run([exe, *args], capture_output=True, text=True, check=True).stdout


def timeless(text):
    """The report without its compile line, whose times differ from run to run."""
    lines = text.splitlines(keepends=True)
    assert sum(line.startswith("Compile: graph mode ") for line in lines) == 1
    return "".join(line for line in lines if not line.startswith("Compile: "))


def untimed(report):
    """The JSON report without the compile times and cache counts (they differ between runs)."""
    for mode in ("eager", "graph"):
        c = report[mode].pop("compile")
        assert c["kernels_compiled"] + c["kernel_cache_hits"] == c["generated_kernels"]
    return report


def test_explain_is_the_clis_report(seed_block_path, tmp_path):
    m = ubfuse.load_onnx(seed_block_path)
    r = m.explain(dims={"batch": 2, "seq": 16})
    assert isinstance(r, ubfuse.ExplainReport)
    dims = ["--dim", "batch=2", "--dim", "seq=16"]
    assert timeless(r.text) == timeless(cli("explain", str(seed_block_path), *dims))
    assert str(r) == r.text
    assert r.dict["graph"]["compile"]["generated_kernels"] == 1
    assert untimed(r.dict) == untimed(json.loads(cli("explain", str(seed_block_path), *dims,
                                                     "--json")))
    assert len(r.dict["graph"]["kernels"]) == 1 and len(r.dict["eager"]["kernels"]) == 3
    # An eager model explains the same: explain compiles both modes itself.
    assert timeless(ubfuse.load_onnx(seed_block_path, mode="eager").explain(
        dims={"batch": 2, "seq": 16}).text) == timeless(r.text)
    # With a rules file, as `ubfuse explain --rules`.
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"Switch": {"UBFusion": {"ALL": "off"}}}))
    ruled = ubfuse.load_onnx(seed_block_path, rules=str(rules)).explain(
        dims={"batch": 2, "seq": 16})
    assert timeless(ruled.text) == timeless(cli("explain", str(seed_block_path), *dims, "--rules",
                                                str(rules)))
    assert ruled.text != r.text


def test_explain_of_a_committed_model():
    m = ubfuse.load_onnx(MODELS / "bert_stack.onnx")
    dims = {s: 8 for i in m.inputs for s in i["shape"] if isinstance(s, str)}
    r = m.explain(dims=dims)
    assert r.dict["graph"]["bytes"] < r.dict["eager"]["bytes"]
    assert "bert_stack.onnx" in r.text


def test_explain_needs_values_for_symbolic_dims(seed_block_path):
    m = ubfuse.load_onnx(seed_block_path)
    with pytest.raises(ubfuse.Error, match="batch"):
        m.explain()


def test_profile_writes_a_chrome_trace(seed_block_path, tmp_path):
    m = ubfuse.load_onnx(seed_block_path)
    x = np.ones((2, 8, 64), np.float32)
    with ubfuse.profile(tmp_path / "log", name="pytest", with_bandwidth=False) as prof:
        m.run({"x": x, "residual": x})
        prof.step()
        t = threading.Thread(target=m.run, args=({"x": x, "residual": x},))
        t.start()
        t.join()
        prof.step()
    path = tmp_path / "log" / "pytest.trace.json"
    assert prof.trace_path == str(path)
    trace = json.loads(path.read_text())
    kernel = m.kernels[0]["name"]
    events = [e for e in trace["traceEvents"] if e.get("name") == kernel and e.get("ph") == "X"]
    assert len(events) == 2
    assert len({e["tid"] for e in events}) == 2  # each on the thread that ran it
    rows = {r["name"]: r for r in prof.summary()}
    assert rows[kernel]["calls"] == 2
    assert kernel in prof.table()


def test_profile_records_compiles_and_rejects_a_second_profiler(seed_block_path, tmp_path):
    m = ubfuse.load_onnx(seed_block_path)
    with ubfuse.profile(tmp_path, name="one", with_bandwidth=False) as prof:
        prof.record_compile(m, "seed")
        with pytest.raises(ubfuse.Error, match="recording"):
            with ubfuse.profile(tmp_path, name="two", with_bandwidth=False):
                pass
    trace = json.loads((tmp_path / "one.trace.json").read_text())
    assert any(e.get("cat") == "compile" for e in trace["traceEvents"])
    assert not (tmp_path / "two.trace.json").exists()
    with pytest.raises(ubfuse.Error, match="context manager"):
        ubfuse.profile(tmp_path).step()
