#!/usr/bin/env python3
"""Exports the whole-model test fixtures (and benchmark models) with their reference outputs.

    /usr/bin/python3 tests/models/export_models.py                 # test fixtures + references
    /usr/bin/python3 tests/models/export_models.py --models speech_encoder --no-refs
    /usr/bin/python3 tests/models/export_models.py --bench --out build/bench_models
    /usr/bin/python3 tests/models/export_models.py --check-deterministic

Architectures: tests/models/model_zoo.py (random weights, fixed seeds). Each model is exported by
Debian's torch 1.13 with torch.onnx.export, opset 17, dynamic batch and length axes, into
OUT/<model>.onnx; the decoder becomes three files, as Optimum ships it: kv_decoder.onnx (no past),
kv_decoder_with_past.onnx and kv_decoder_merged.onnx (both under an If on use_cache_branch, built
by merge_decoder.py); and kv_decoder_ortgenai.onnx, the same weights in the form onnxruntime-genai's
model builder saves a LLaMA (GroupQueryAttention, SimplifiedLayerNormalization, an attention_mask
input; ort_genai.py), whose sets take attention_mask (ones) and the past, within TOLERANCE.

References (not with --bench or --no-refs), per model and per input set (three lengths, and two
batch sizes):
    OUT/refs/<model>/<set>/in/<input>.npy      the inputs (fixed seed)
    OUT/refs/<model>/<set>/ort/<output>.npy    onnxruntime's outputs: the reference
    OUT/refs/<model>/<set>/torch/<output>.npy  PyTorch's outputs for the same inputs
    OUT/refs/<model>/manifest.json             sets, shapes, which .onnx files each set runs
                                               on, versions, and the max abs differences
onnxruntime runs through scripts/ort.sh (onnxruntime-node from npm, installed on demand) at
graph optimization level "disabled" on 1 thread; the manifest also records the difference of
level "all" from it and of PyTorch from it. For the decoder, every set runs on the standalone
model and on the merged one, and their onnxruntime outputs must be equal. For the models of
ORT_OPTIMIZED, OUT/<model>_ortopt.onnx is the graph onnxruntime runs at level "extended", as it
saves it (scripts/ort.sh --save-optimized): onnxruntime's contrib ops (FusedMatMul, BiasGelu,
Gelu, QuickGelu, SimplifiedLayerNormalization) and its rewrites of the shape arithmetic, as users
ship such models; every set runs on it too, its onnxruntime outputs within TOLERANCE of the
original's. For the models of ORT_FUSED, OUT/<model>_ortfused.onnx is the model in the form
onnxruntime's transformer optimizer saves it (Attention, EmbedLayerNormalization,
SkipLayerNormalization, BiasGelu; ort_fused.py), checked the same way.

--bench writes the models at the benchmark sizes of model_zoo.CONFIGS["bench"] (no references).
--check-deterministic exports every model twice into temporary folders and compares the bytes.
"""
import argparse
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ folder in the source tree
import merge_decoder  # noqa: E402
import ort_fused  # noqa: E402
import ort_genai  # noqa: E402
import model_zoo as zoo  # noqa: E402

ORT = os.path.join(ROOT, "scripts", "ort.sh")
# The longest sequence kv_decoder_ortgenai.onnx takes (its rotary caches' rows).
GENAI_POSITIONS = 4096
OPSET = 17
# Fail the export if PyTorch and onnxruntime disagree by more than this (abs, on O(1) values).
TOLERANCE = 1e-3


def export(model, args, path, input_names, output_names, dynamic_axes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings about Python ints in shapes
        torch.onnx.export(model, args, path, opset_version=OPSET, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes,
                          do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))


def export_model(name, size, out):
    """Writes the .onnx file(s) of one model; returns {file: (module, with_past)}."""
    m = zoo.build(name, size)
    g = torch.Generator().manual_seed(0)
    if name == "kv_decoder":
        files = {}
        for with_past, fname in ((False, "kv_decoder.onnx"), (True, "kv_decoder_with_past.onnx")):
            ins, outs, dyn = m.io(with_past)
            args = m.example_inputs(g, 2, 3, 4 if with_past else None)
            export(m, args, os.path.join(out, fname), ins, outs, dyn)
            files[fname] = with_past
        merged = merge_decoder.merge(onnx.load(os.path.join(out, "kv_decoder.onnx")),
                                     onnx.load(os.path.join(out, "kv_decoder_with_past.onnx")))
        onnx.save(merged, os.path.join(out, "kv_decoder_merged.onnx"))
        files["kv_decoder_merged.onnx"] = None
        cfg = zoo.CONFIGS[size][name]
        ort_genai.genai_decoder(os.path.join(out, "kv_decoder_with_past.onnx"),
                                os.path.join(out, "kv_decoder_ortgenai.onnx"), cfg["heads"],
                                cfg["kv_heads"], GENAI_POSITIONS)
        files["kv_decoder_ortgenai.onnx"] = None
        return m, files
    # Export-time sizes; every axis named in dynamic_axes stays symbolic.
    shape_args = {"speech_encoder": (2, 37), "llama_stack": (2, 5), "bert_stack": (2, 6),
                  "rnn_stack": (2, 7)}
    if name == "vit_encoder":
        shape_args[name] = (2, 4 * m.patch, 2 * m.patch)
    if name == "video_encoder":
        shape_args[name] = (2, 2 * m.tubelet, 2 * m.patch, 3 * m.patch)
    args = m.example_inputs(g, *shape_args[name])
    fname = f"{name}.onnx"
    export(m, args, os.path.join(out, fname), m.input_names, m.output_names, m.dynamic_axes)
    return m, {fname: None}


# ---------------------------------------------------------------------------------------------
# Input sets


def input_sets(name, m):
    """[(set name, {input: tensor})] for the references; decoder sets also carry the past."""
    g = torch.Generator().manual_seed(100 + zoo.SEEDS[name])
    if name == "speech_encoder":
        # 24 / 61 / 128 frames -> 6 / 16 / 32 encoder frames; 61 is odd at both convs.
        spec = [(1, 24), (1, 61), (1, 128), (2, 61)]
        return [(f"b{b}_f{f}", dict(zip(m.input_names, m.example_inputs(g, b, f)))) for b, f in spec]
    if name == "llama_stack":
        spec = [(1, 1), (1, 17), (1, 64), (2, 17)]
        return [(f"b{b}_s{s}", dict(zip(m.input_names, m.example_inputs(g, b, s)))) for b, s in spec]
    if name == "bert_stack":
        spec = [(1, 8), (1, 17), (1, 64), (3, 17)]
        return [(f"b{b}_s{s}", dict(zip(m.input_names, m.example_inputs(g, b, s)))) for b, s in spec]
    if name == "vit_encoder":
        p = m.patch
        spec = [(1, 4, 4), (1, 5, 7), (1, 8, 8), (2, 5, 7)]  # in patches: 16, 35, 64 (+ class)
        return [(f"b{b}_{h * p}x{w * p}", dict(zip(m.input_names, m.example_inputs(g, b, h * p, w * p))))
                for b, h, w in spec]
    if name == "rnn_stack":
        spec = [(1, 1), (1, 13), (1, 40), (3, 13)]
        return [(f"b{b}_f{f}", dict(zip(m.input_names, m.example_inputs(g, b, f)))) for b, f in spec]
    if name == "video_encoder":
        t, p = m.tubelet, m.patch
        # in tubelets (frames / 2 x rows x columns): 4, 3 x 2 x 3 = 18, 2 x 4 x 4 = 32
        spec = [(1, 1, 2, 2), (1, 3, 2, 3), (1, 2, 4, 4), (2, 3, 2, 3)]
        return [(f"b{b}_{f * t}x{h * p}x{w * p}",
                 dict(zip(m.input_names, m.example_inputs(g, b, f * t, h * p, w * p))))
                for b, f, h, w in spec]
    if name == "kv_decoder":
        return decoder_sets(m, g)
    raise KeyError(name)


def decoder_sets(m, g):
    """First steps without a cache, then steps whose past is a real earlier step's present."""
    def empty_past(b):
        return {n: torch.zeros(b, m.kvh, 0, m.hd) for n in m.past_names()}

    def mask(b, total):  # kv_decoder_ortgenai.onnx's attention_mask: every key kept
        return {"attention_mask": torch.ones(b, total, dtype=torch.int64)}

    def step(ids, past=None):
        with torch.no_grad():
            outs = m(ids, *(past.values() if past else ()))
        return dict(zip(m.past_names(), outs[1:]))

    sets = []
    prompts = {}
    for b, s in ((1, 5), (2, 13)):
        ids = m.example_inputs(g, b, s)[0]
        prompts[(b, s)] = ids
        sets.append((f"nocache_b{b}_s{s}", {"input_ids": ids, **empty_past(b),
                                            "use_cache_branch": torch.tensor([False]),
                                            **mask(b, s)}))
    long_prompt = m.example_inputs(g, 1, 16)[0]
    for (b, p, s), prompt in (((1, 5, 1), prompts[(1, 5)]), ((2, 13, 1), prompts[(2, 13)]),
                              ((1, 16, 4), long_prompt)):
        past = step(prompt)
        ids = m.example_inputs(g, b, s)[0]
        sets.append((f"past_b{b}_p{p}_s{s}", {"input_ids": ids, **past,
                                              "use_cache_branch": torch.tensor([True]),
                                              **mask(b, p + s)}))
        # The cache path must equal recomputing the whole sequence.
        with torch.no_grad():
            full = m(torch.cat((prompt, ids), dim=1))[0][:, -s:]
            cached = m(ids, *past.values())[0]
        assert torch.allclose(full, cached, atol=1e-4), (b, p, s, (full - cached).abs().max())
    return sets


# The models also written as onnxruntime optimizes and saves them (<model>_ortopt.onnx).
ORT_OPTIMIZED = ("bert_stack", "llama_stack", "speech_encoder", "vit_encoder")


def save_ort_optimized(name, out):
    """<name>_ortopt.onnx: the graph onnxruntime runs at level "extended" (1 thread)."""
    fname = f"{name}_ortopt.onnx"
    cmd = [ORT, os.path.join(out, f"{name}.onnx"), "--opt", "extended", "--threads", "1",
           "--save-optimized", os.path.join(out, fname), "--list"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"export_models: onnxruntime could not optimize {name}.onnx:\n{r.stderr}")
    return fname


# The models also written in the form onnxruntime's transformer optimizer saves
# (<model>_ortfused.onnx: ort_fused.py), with its attention ops.
ORT_FUSED = {"bert_stack": ort_fused.fuse_bert}


def save_ort_fused(name, out):
    fname = f"{name}_ortfused.onnx"
    ORT_FUSED[name](os.path.join(out, f"{name}.onnx"), os.path.join(out, fname),
                    zoo.CONFIGS["test"][name]["heads"])
    return fname


def runs_for(name, files, inputs):
    """{onnx file: [input names it takes]} for one set."""
    if name != "kv_decoder":
        return {f: list(inputs) for f in files}
    with_past = bool(inputs["use_cache_branch"][0])
    own = "kv_decoder_with_past.onnx" if with_past else "kv_decoder.onnx"
    past = [n for n in inputs if n.startswith("past_key_values.")]
    return {own: ["input_ids"] + (past if with_past else []),
            "kv_decoder_merged.onnx": ["input_ids"] + past + ["use_cache_branch"],
            "kv_decoder_ortgenai.onnx": ["input_ids", "attention_mask"] + past}


def torch_outputs(name, m, inputs):
    with torch.no_grad():
        if name == "kv_decoder":
            past = [inputs[n] for n in m.past_names()] if bool(inputs["use_cache_branch"][0]) else []
            outs = m(inputs["input_ids"], *past)
            return dict(zip(["logits"] + m.present_names(), outs))
        outs = m(*[inputs[n] for n in m.input_names])
        return dict(zip(m.output_names, outs if isinstance(outs, tuple) else (outs,)))


def run_ort(model_path, input_files, out_dir, opt, threads=1):
    cmd = [ORT, model_path, "--opt", opt, "--threads", str(threads), "--json", "--out-dir", out_dir]
    for n, f in input_files.items():
        cmd += ["--in", f"{n}={f}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"export_models: onnxruntime failed on {model_path}:\n{r.stderr}")
    return json.loads(r.stdout)


def max_abs(a, b):
    if a.shape != b.shape:
        raise SystemExit(f"export_models: shapes differ: {a.shape} vs {b.shape}")
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


def write_refs(name, m, files, out):
    root = os.path.join(out, "refs", name)
    if os.path.isdir(root):
        shutil.rmtree(root)
    manifest = {"model": name, "config": zoo.CONFIGS["test"][name], "seed": zoo.SEEDS[name],
                "files": sorted(files), "torch": torch.__version__, "opset": OPSET,
                "ort_opt": "disabled", "ort_threads": 1, "sets": []}
    with tempfile.TemporaryDirectory() as tmp:
        for set_name, inputs in input_sets(name, m):
            d = os.path.join(root, set_name)
            in_files = {}
            os.makedirs(os.path.join(d, "in"))
            for n, t in inputs.items():
                in_files[n] = os.path.join(d, "in", f"{n}.npy")
                np.save(in_files[n], t.numpy())
            ref = torch_outputs(name, m, inputs)
            os.makedirs(os.path.join(d, "torch"))
            for n, t in ref.items():
                np.save(os.path.join(d, "torch", f"{n}.npy"), t.numpy())
            runs = runs_for(name, files, inputs)
            entry = {"name": set_name, "runs": runs,
                     "inputs": {n: list(t.shape) for n, t in inputs.items()},
                     "outputs": {n: list(t.shape) for n, t in ref.items()},
                     "max_abs_torch_vs_ort": {}, "max_abs_ort_all_vs_disabled": {}}
            stored = None
            for k, (f, names) in enumerate(sorted(runs.items())):
                fin = {n: in_files[n] for n in names}
                odir = os.path.join(d, "ort") if stored is None else os.path.join(tmp, f"{set_name}.{k}")
                rep = run_ort(os.path.join(out, f), fin, odir, "disabled")
                manifest["onnxruntime"] = rep["onnxruntime"]
                got = {n: np.load(p) for n, p in rep["written"].items()}
                if stored is None:
                    stored = got
                else:  # the merged model must give what the standalone one gives
                    for n in stored:
                        diff = max_abs(stored[n], got[n])
                        # onnxruntime's optimized graph computes in another order
                        if f.endswith(("_ortopt.onnx", "_ortfused.onnx", "_ortgenai.onnx")):
                            if diff > TOLERANCE * max(1.0, float(np.abs(stored[n]).max())):
                                raise SystemExit(f"export_models: {f} differs from {name}.onnx "
                                                 f"on {set_name}/{n} by {diff}")
                        elif diff != 0.0:
                            raise SystemExit(f"export_models: {f} differs from {sorted(runs)[0]} "
                                             f"on {set_name}/{n} by {diff}")
                rep_all = run_ort(os.path.join(out, f), fin, os.path.join(tmp, f"{set_name}.{k}.all"), "all")
                for n, p in rep_all["written"].items():
                    entry["max_abs_ort_all_vs_disabled"][n] = max(
                        entry["max_abs_ort_all_vs_disabled"].get(n, 0.0), max_abs(stored[n], np.load(p)))
            for n, t in ref.items():
                diff = max_abs(stored[n], t.numpy())
                entry["max_abs_torch_vs_ort"][n] = diff
                if diff > TOLERANCE * max(1.0, float(np.abs(t.numpy()).max())):
                    raise SystemExit(f"export_models: {name}/{set_name}/{n}: torch and onnxruntime "
                                     f"differ by {diff}")
            manifest["sets"].append(entry)
            print(f"  {name}/{set_name}: torch vs ort max abs "
                  f"{max(entry['max_abs_torch_vs_ort'].values()):.3g}, ort all vs disabled "
                  f"{max(entry['max_abs_ort_all_vs_disabled'].values()):.3g}", file=sys.stderr)
    text = json.dumps(manifest, indent=1)
    # Lists of numbers or names on one line each.
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]",
                  lambda g: "[" + ", ".join(x.strip() for x in g.group(1).split(",")) + "]", text)
    with open(os.path.join(root, "manifest.json"), "w") as f:
        f.write(text + "\n")


def check_deterministic(names, size):
    ok = True
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        for name in names:
            _, files = export_model(name, size, a)
            export_model(name, size, b)
            for f in files:
                same = filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False)
                print(f"{f}: {'identical bytes' if same else 'DIFFERENT'} in two exports")
                ok &= same
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", help="output folder (default: tests/models, or build/bench_models with --bench)")
    ap.add_argument("--models", default=",".join(zoo.BUILDERS), help="comma-separated subset")
    ap.add_argument("--bench", action="store_true", help="benchmark sizes, no references")
    ap.add_argument("--no-refs", action="store_true", help="only the .onnx files")
    ap.add_argument("--check-deterministic", action="store_true")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    names = [n for n in a.models.split(",") if n]
    for n in names:
        if n not in zoo.BUILDERS:
            ap.error(f"unknown model {n}; known: {', '.join(zoo.BUILDERS)}")
    size = "bench" if a.bench else "test"
    if a.check_deterministic:
        sys.exit(0 if check_deterministic(names, size) else 1)
    out = a.out or (os.path.join(ROOT, "build", "bench_models") if a.bench else HERE)
    os.makedirs(out, exist_ok=True)
    for name in names:
        m, files = export_model(name, size, out)
        sizes = ", ".join(f"{f} {os.path.getsize(os.path.join(out, f)) / 1e6:.2f} MB" for f in files)
        print(f"{name}: {sizes}", file=sys.stderr)
        if name in ORT_OPTIMIZED and not a.bench:
            files[save_ort_optimized(name, out)] = None
        if name in ORT_FUSED and not a.bench:
            files[save_ort_fused(name, out)] = None
        if not (a.bench or a.no_refs):
            write_refs(name, m, files, out)


if __name__ == "__main__":
    main()
