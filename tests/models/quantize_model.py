"""Quantizes a float model the way onnxruntime's dynamic quantizer writes it, and makes its references.

Every MatMul whose B is a 2-D float initializer becomes

    A -> DynamicQuantizeLinear -> (A_q u8, A_scale, A_zp)
    MatMulInteger(A_q, W_q, A_zp, W_zp) -> Cast(float) -> Mul(A_scale * W_scale)

with one DynamicQuantizeLinear per activation, read by every MatMul of it (a layer's q, k and v
projections share one, as in onnxruntime's quantizer), and W_q int8, symmetric (zero points 0):
per tensor for even-numbered MatMuls and per output column (per axis 1: a scale and a zero point
per column) for odd ones, so one model has both forms. Whatever followed the MatMul (a bias
Add, the rest of the graph) is unchanged. The references are onnxruntime's outputs on the float
model's stored inputs (refs/<model>/<set>/in), written to refs/<model>_int8/ in the same layout
(tests/models/README.md).

    /usr/bin/python3 tests/models/quantize_model.py bert_stack      # writes bert_stack_int8.onnx
    /usr/bin/python3 tests/models/quantize_model.py bert_stack --no-refs
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ORT = os.path.join(HERE, "..", "..", "scripts", "ort.sh")


def quantize_weight(w, per_column):
    """Symmetric int8: scale = max|w| / 127 per tensor or per column; zero points 0."""
    amax = np.abs(w).max(axis=0) if per_column else np.array(np.abs(w).max())
    scale = (np.maximum(amax, 1e-8) / 127.0).astype(np.float32)
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale, np.zeros(scale.shape, np.int8)


def quantize(model):
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    nodes, k = [], 0
    quantized = {}  # activation -> its DynamicQuantizeLinear's outputs, shared by its MatMuls
    for n in g.node:
        w = inits.get(n.input[1]) if n.op_type == "MatMul" else None
        if w is None or len(w.dims) != 2 or w.data_type != TensorProto.FLOAT:
            nodes.append(n)
            continue
        per_column = k % 2 == 1
        p = f"{n.name or n.output[0]}_q"
        q, scale, zp = quantize_weight(numpy_helper.to_array(w), per_column)
        g.initializer.extend([numpy_helper.from_array(q, p + "_W"),
                              numpy_helper.from_array(scale, p + "_W_scale"),
                              numpy_helper.from_array(zp, p + "_W_zp")])
        if n.input[0] not in quantized:
            quantized[n.input[0]] = a = [p + "_A", p + "_A_scale", p + "_A_zp"]
            nodes.append(helper.make_node("DynamicQuantizeLinear", [n.input[0]], a,
                                          name=p + "_dql"))
        a_q, a_scale, a_zp = quantized[n.input[0]]
        nodes += [
            helper.make_node("MatMulInteger", [a_q, p + "_W", a_zp, p + "_W_zp"],
                             [p + "_int"], name=p + "_mmi"),
            helper.make_node("Cast", [p + "_int"], [p + "_f"], name=p + "_cast",
                             to=TensorProto.FLOAT),
            helper.make_node("Mul", [a_scale, p + "_W_scale"], [p + "_scale"],
                             name=p + "_scale_mul"),
            helper.make_node("Mul", [p + "_f", p + "_scale"], [n.output[0]], name=p + "_rescale"),
        ]
        k += 1
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.checker.check_model(model)
    return model, k


def run_ort(model_path, inputs, out_dir):
    cmd = [ORT, model_path, "--opt", "disabled", "--threads", "1", "--json", "--out-dir", out_dir]
    for n, f in inputs.items():
        cmd += ["--in", f"{n}={f}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"quantize_model: onnxruntime failed on {model_path}:\n{r.stderr}")
    return json.loads(r.stdout)


def write_refs(name, out):
    """refs/<name>_int8: the float model's sets and inputs, onnxruntime's int8 outputs."""
    src = os.path.join(out, "refs", name)
    root = os.path.join(out, "refs", name + "_int8")
    if os.path.isdir(root):
        shutil.rmtree(root)
    with open(os.path.join(src, "manifest.json")) as f:
        fman = json.load(f)
    file = f"{name}_int8.onnx"
    man = {"model": name + "_int8", "from": name, "files": [file], "ort_opt": "disabled",
           "ort_threads": 1, "sets": []}
    for s in fman["sets"]:
        d = os.path.join(root, s["name"])
        names = s["runs"][f"{name}.onnx"]
        os.makedirs(os.path.join(d, "in"))
        ins = {}
        for n in names:
            ins[n] = os.path.join(d, "in", f"{n}.npy")
            shutil.copy(os.path.join(src, s["name"], "in", f"{n}.npy"), ins[n])
        rep = run_ort(os.path.join(out, file), ins, os.path.join(d, "ort"))
        man["onnxruntime"] = rep["onnxruntime"]
        # How far quantization moves the outputs from the float model's (onnxruntime's, stored).
        moved = {}
        for o, p in rep["written"].items():
            fl = np.load(os.path.join(src, s["name"], "ort", f"{o}.npy"))
            moved[o] = float(np.abs(np.load(p).astype(np.float64) - fl).max())
        man["sets"].append({"name": s["name"], "runs": {file: names}, "inputs": s["inputs"],
                            "outputs": s["outputs"], "max_abs_int8_vs_float": moved})
        print(f"  {name}_int8/{s['name']}: int8 vs float max abs {max(moved.values()):.3g}",
              file=sys.stderr)
    with open(os.path.join(root, "manifest.json"), "w") as f:
        f.write(json.dumps(man, indent=1) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="a float model of this folder, e.g. bert_stack")
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--no-refs", action="store_true")
    a = ap.parse_args()
    m, count = quantize(onnx.load(os.path.join(a.out, f"{a.model}.onnx")))
    path = os.path.join(a.out, f"{a.model}_int8.onnx")
    onnx.save(m, path)
    print(f"quantize_model: {path}: {count} MatMuls quantized", file=sys.stderr)
    if not a.no_refs:
        write_refs(a.model, a.out)


if __name__ == "__main__":
    main()
