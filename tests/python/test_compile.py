"""Compiling: the generated kernels' build in Model.stats, and Ctrl-C during a compile."""

import os
import signal
import subprocess
import threading
import time

import pytest

import ubfuse
from conftest import MODELS


def test_stats_report_the_kernel_build(seed_block_path):
    opts = {"compile_jobs": "2", "progress": "off"}
    s = ubfuse.load_onnx(seed_block_path, options=opts).stats
    assert s["generated_kernels"] == 1  # the seed block is one fused kernel
    assert s["kernels_compiled"] + s["kernel_cache_hits"] == 1
    assert s["kernel_build_ms"] > 0 and s["compile_ms"] >= s["kernel_build_ms"]
    again = ubfuse.load_onnx(seed_block_path, options=opts).stats
    assert (again["kernel_cache_hits"], again["kernels_compiled"], again["compile_jobs"]) == (1, 0, 0)
    eager = ubfuse.load_onnx(seed_block_path, mode="eager").stats
    assert eager["generated_kernels"] == 0


def test_ctrl_c_stops_a_long_compile_and_its_compilers(tmp_path):
    # A fresh kernel cache: the precompiled header and 18 kernels take seconds to build.
    cache = str(tmp_path / "kernels")
    timer = threading.Timer(0.4, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        ubfuse.load_onnx(MODELS / "speech_encoder.onnx", dims={"batch": 1},
                         options={"cache_dir": cache, "progress": "off"})
    assert time.monotonic() - t0 < 3.0
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", cache], capture_output=True, text=True).stdout
    assert left == "", "compilers still running after the interrupt: " + left
    # The cache is not damaged: the next load builds and runs.
    m = ubfuse.load_onnx(MODELS / "conv_stem.onnx", options={"cache_dir": cache, "progress": "off"})
    assert m.stats["compilations"] == 1
