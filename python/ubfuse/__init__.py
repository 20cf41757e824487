"""ubfuse: buffer-level operator fusion for transformer inference, from Python.

    import numpy as np, ubfuse
    model = ubfuse.load_onnx("model.onnx")               # graph mode (fused kernels)
    out = model.run({"x": np.ones((1, 8, 64), np.float32)})

See docs/python.md for the whole API.
"""

import json as _json
import os as _os

# oneDNN runs on OpenMP (libgomp), whose idle threads spin for about a millisecond after every
# parallel region unless OMP_WAIT_POLICY says otherwise; they then take the cores ubfuse's own
# pool needs (docs/performance.md). libgomp reads the variable once, when it is loaded, so it must
# be set before the extension (which links it) is imported. A value the user set is kept.
# GOMP_SPINCOUNT=0: no spin at all before sleeping (src/util/omp_env.h).
if "OMP_WAIT_POLICY" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    _os.environ.setdefault("GOMP_SPINCOUNT", "0")

from ._ubfuse import (  # noqa: E402
    Error,
    Graph,
    GraphBuilder,
    Model,
    OnnxNeedsStaticDimsError,
    OnnxUnsupportedError,
    Value,
    from_bf16,
    onnx_supported_ops,
    to_bf16,
)
from . import _ubfuse  # noqa: E402

# Tracebacks name the package users import, not the extension inside it.
for _t in (Error, Graph, GraphBuilder, Model, OnnxNeedsStaticDimsError, OnnxUnsupportedError,
           Value):
    _t.__module__ = "ubfuse"

__all__ = [
    "Error",
    "ExplainReport",
    "Graph",
    "GraphBuilder",
    "Model",
    "OnnxNeedsStaticDimsError",
    "OnnxUnsupportedError",
    "from_bf16",
    "load_onnx",
    "onnx_supported_ops",
    "profile",
    "to_bf16",
    "Value",
    "compile",
]


def load_onnx(path_or_bytes, mode=None, options=None, rules=None, dims=None,
              external_data_dir=""):
    """Imports an ONNX model and compiles it; returns a Model.

    path_or_bytes: a path (str or os.PathLike) or the model's serialized bytes.
    mode: "graph" (fused kernels, the default) or "eager" (one kernel per op).
    options: compile options, {key: str|int|bool} (docs/options.md), e.g. {"num_threads": 1}.
    rules: a fusion rules file (docs/fusion-rules.md).
    dims: symbolic dims fixed at import, {name: size}, for models whose shape arithmetic
        needs them (OnnxNeedsStaticDimsError names them).
    external_data_dir: where external data files are looked up for a model given as bytes.
    """
    return _ubfuse._load_onnx(path_or_bytes, mode, dict(options or {}), rules, dict(dims or {}),
                              external_data_dir)


class ExplainReport:
    """The `ubfuse explain` report of a model: .text as the CLI prints it, .dict as its --json."""

    def __init__(self, text, json_text):
        self.text = text
        self.dict = _json.loads(json_text)

    def __str__(self):
        return self.text

    def __repr__(self):
        return "<ubfuse.ExplainReport %s>" % self.dict.get("model", "")


def _explain(self, dims=None):
    """What graph mode fused and why not elsewhere, with predicted traffic (`ubfuse explain`).

    dims: values for the model's symbolic dims, {name: size}, as `ubfuse explain --dim`.
    """
    text, json_text = self._explain(dict(dims or {}))
    return ExplainReport(text, json_text)


Model.explain = _explain


class profile:
    """Records the kernels of every model run inside it, from any thread, and writes a Chrome
    trace (chrome://tracing, Perfetto) to <trace_dir>/<name>.trace.json on exit.

        with ubfuse.profile("log") as prof:
            model.run(inputs)
            prof.step()
        print(prof.table())

    with_bandwidth: measure the machine's memory bandwidth (once, cached) for the % of
    bandwidth column; False leaves that column at 0.
    """

    def __init__(self, trace_dir="./log", name="ubfuse", record_shapes=True,
                 with_bandwidth=True):
        self._args = (_os.fspath(trace_dir), name, record_shapes, with_bandwidth)
        self._p = None

    def __enter__(self):
        self._p = _ubfuse._Profiler(*self._args)
        return self

    def __exit__(self, exc_type, exc, tb):
        self._p.stop()
        return False

    def _profiler(self):
        if self._p is None:
            raise Error("ubfuse.profile: use it as a context manager (with ubfuse.profile(...):)")
        return self._p

    def step(self):
        """Ends a step (torch.profiler's prof.step()): steps show as ProfilerStep#N."""
        self._profiler().step()

    def record_compile(self, model, label=""):
        """Adds the compile events of a model compiled before the profile started."""
        self._profiler().record_compile(model, label)

    @property
    def trace_path(self):
        return self._profiler().trace_path

    def table(self):
        """Per-kernel summary like torch.profiler's key_averages().table()."""
        return self._profiler().summary_table()

    def summary(self):
        """The summary's rows as dicts (name, calls, total_us, gb_per_s, ...), longest first."""
        return self._profiler().summary_rows()


def compile(graph, mode=None, options=None, rules=None):  # noqa: A001 - mirrors ubfuse::compile
    """Compiles a Graph from GraphBuilder.build(); returns a Model (mode, options and rules as in
    load_onnx)."""
    return _ubfuse._compile(graph, mode, dict(options or {}), rules)
