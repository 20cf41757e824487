#!/usr/bin/env python3
"""Runs `ubfuse run` on every reference set of the whole-model fixtures and compares with them.

    /usr/bin/python3 tests/models/compare_ubfuse.py [--build build] [--models a,b] [--modes eager,graph]

For each model, set and .onnx file of its manifest (export_models.py), runs the CLI with the
set's inputs in eager and graph mode and prints the max abs difference from onnxruntime's stored
outputs, or the error ubfuse stopped at. When the import fails on an unsupported op, it also
lists every op type of the model (subgraphs included) that is not in ubfuse's supported list, so
the first error is not the only thing known. A report, not a test: the exit status is 0 unless
the CLI is missing.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REFS = os.path.join(HERE, "refs")
MODELS = ["speech_encoder", "kv_decoder", "llama_stack", "bert_stack", "vit_encoder",
          "video_encoder", "rnn_stack"]


def op_types(graph, counter):
    for n in graph.node:
        counter[n.op_type] += 1
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                op_types(a.g, counter)
            for g in a.graphs:
                op_types(g, counter)
    return counter


def unsupported(model_path, message):
    m = re.search(r"supported ops: ([A-Za-z0-9, ]+)", message)
    if not m:
        return None
    known = {s.strip() for s in m.group(1).split(",")}
    ops = op_types(onnx.load(model_path).graph, collections.Counter())
    return {op: n for op, n in sorted(ops.items()) if op not in known}


def run(cli, model_path, inputs, mode, out_dir):
    cmd = [cli, "run", model_path, "--mode", mode, "--output-dir", out_dir, "--json"]
    for n, f in inputs.items():
        cmd += ["--input", f"{n}={f}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip()).splitlines()[-1]
    return json.loads(r.stdout), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default="eager,graph")
    a = ap.parse_args()
    cli = os.path.join(a.build, "ubfuse")
    if not os.path.exists(cli):
        sys.exit(f"compare_ubfuse: {cli} not found; build first (cmake --build {a.build})")
    reported = set()
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            with open(os.path.join(REFS, name, "manifest.json")) as f:
                man = json.load(f)
            for s in man["sets"]:
                for model_file, names in sorted(s["runs"].items()):
                    path = os.path.join(HERE, model_file)
                    inputs = {n: os.path.join(REFS, name, s["name"], "in", f"{n}.npy") for n in names}
                    for mode in a.modes.split(","):
                        tag = f"{model_file} {s['name']} {mode}"
                        if model_file in reported:
                            continue
                        out = os.path.join(tmp, name, s["name"], model_file, mode)
                        rep, err = run(cli, path, inputs, mode, out)
                        if err:
                            print(f"{tag}: ERROR {err[:300]}")
                            ops = unsupported(path, err)
                            if ops:
                                print(f"  op types not supported (count): {ops}")
                            reported.add(model_file)  # the same import error for every set
                            continue
                        worst = {}
                        for o in s["outputs"]:
                            ref = np.load(os.path.join(REFS, name, s["name"], "ort", f"{o}.npy"))
                            got = np.load(os.path.join(out, f"{o}.npy"))
                            if got.shape != ref.shape:
                                worst[o] = f"shape {got.shape} vs {ref.shape}"
                            else:
                                worst[o] = float(np.max(np.abs(got.astype(np.float64) - ref)))
                        m = max((v for v in worst.values() if isinstance(v, float)), default=0.0)
                        bad = {k: v for k, v in worst.items() if not isinstance(v, float)}
                        print(f"{tag}: max abs vs onnxruntime {m:.3g}, {rep['num_kernels']} kernels"
                              f"{', specialized ' + json.dumps(rep['specialized_dims']) if rep.get('specialized_dims') else ''}"
                              f"{' ' + str(bad) if bad else ''}")


if __name__ == "__main__":
    main()
