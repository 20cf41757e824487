#!/usr/bin/env python3
"""Whole-model benchmark: ubfuse graph and eager against onnxruntime (all, disabled), in one run.

    make bench-models [BENCH_MODELS_ARGS="--quick"]
    /usr/bin/python3 bench/models_bench.py [--build build] [--models a,b] [--lengths 16,512]
        [--batches 1,8] [--runs 5] [--min-ms 1000] [--rounds 2] [--threads 2] [--quick] [--no-ort]
        [--prompt] [--json out.json]

Exports the benchmark-sized models once into BUILD/bench_models (tests/models/export_models.py
--bench; re-exported when the export scripts change), makes fixed-seed inputs for each model,
batch and sequence length, and times each engine on them with the same thread count:
ubfuse through `BUILD/ubfuse run --mode both --iters N --json` (graph and eager in one process, in
alternating blocks of runs; median ms of each, and their ratio per round), onnxruntime-node
through scripts/ort.sh --time N at levels all and disabled (median ms), N the same for every
engine: --runs, or more where a 3-run probe of graph mode says that many take under --min-ms.
Prints one table with each engine's best round, the ratios (graph over eager: the median over the
rounds of the ratio within each `--mode both` call), the kernel count per engine (onnxruntime: the
nodes of the graph it runs after its optimizations) and N. A model ubfuse cannot load shows the error it stops at.

Sequence length means: tokens for bert_stack and llama_stack, encoder frames for speech_encoder
(its input has 4x as many mel frames), patches for vit_encoder (plus the class token), tubelets
for video_encoder (8 x 2 frames from 32 on), frames for rnn_stack and the past length of a
one-token step for kv_decoder and kv_decoder_ortgenai (these four not in the default set), or with
--prompt the prompt's tokens (no past). A model name with
`_int8` (`bert_stack_int8`, ...) is that model quantized as onnxruntime's dynamic quantizer writes
it (tests/models/quantize_model.py), and `bert_stack_ortfused` that model as onnxruntime's
transformer optimizer saves it (Attention, EmbedLayerNormalization, SkipLayerNormalization,
BiasGelu: tests/models/ort_fused.py; onnxruntime then runs its own attention kernel), timed on
the same inputs; `kv_decoder_ortgenai` is kv_decoder as onnxruntime-genai's model builder saves a
LLaMA (GroupQueryAttention with rotary inside, an attention_mask input: tests/models/ort_genai.py;
written by export_models.py with kv_decoder), and `kv_decoder_ortgenai_int4` that model with its
MatMuls' weights in 4 bits (com.microsoft.MatMulNBits, blocks of 32 with zero points:
tests/models/quantize_nbits.py), as onnxruntime-genai's int4 CPU models ship.

A benchmark, not a test: onnxruntime needs node and npm (scripts/ort.sh installs it on first
use); without them its columns say why and ubfuse still runs.
"""
import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS_DIR = os.path.join(ROOT, "tests", "models")
sys.path.insert(0, MODELS_DIR)
sys.dont_write_bytecode = True  # no __pycache__ folder in the source tree
import model_zoo as zoo  # noqa: E402
import ort_fused  # noqa: E402
import quantize_model  # noqa: E402
import quantize_nbits  # noqa: E402

ORT = os.path.join(ROOT, "scripts", "ort.sh")
DEFAULT_MODELS = ["bert_stack", "llama_stack", "speech_encoder", "vit_encoder"]
EXPORT_SOURCES = [
    "model_zoo.py", "export_models.py", "merge_decoder.py", "quantize_model.py", "ort_fused.py",
    "ort_genai.py", "quantize_nbits.py"]
INT8 = "_int8"  # <model>_int8: the model as onnxruntime's dynamic quantizer writes it
# <model>_ortfused: the model as onnxruntime's transformer optimizer saves it
FUSED = "_ortfused"
GENAI = "_ortgenai"  # kv_decoder as onnxruntime-genai's model builder saves it (export_models.py)
GENAI4 = "_ortgenai_int4"  # the same with 4-bit weights (MatMulNBits)
VARIANTS = (INT8, FUSED, GENAI4, GENAI)


def export_stamp():
    h = hashlib.sha256()
    for f in EXPORT_SOURCES:
        with open(os.path.join(MODELS_DIR, f), "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


def ensure_models(out, models):
    """Exports the models whose files are missing or were made by other export scripts."""
    stamp = export_stamp()

    def fresh(m):
        p = os.path.join(out, f"{m}.stamp")
        return os.path.exists(model_file(out, m)) and os.path.exists(p) and open(p).read().strip() == stamp

    need = [m for m in models if not fresh(m)]
    # The float model's export also writes its _ortgenai form.
    floats = sorted({base_name(m) for m in need
                     if not m.endswith((INT8, FUSED, GENAI4)) or not fresh(base_name(m))})
    if floats:
        print(f"exporting {', '.join(floats)} into {out} (once)", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(MODELS_DIR, "export_models.py"), "--bench",
                        "--out", out, "--models", ",".join(floats)], check=True)
    for m in need:
        if m.endswith(INT8):
            subprocess.run([sys.executable, os.path.join(MODELS_DIR, "quantize_model.py"),
                            base_name(m), "--out", out, "--no-refs"], check=True)
        if m.endswith(GENAI4):
            quantize_nbits.quantize_model(os.path.join(out, f"{base_name(m)}{GENAI}.onnx"),
                                          os.path.join(out, f"{m}.onnx"))
        if m.endswith(FUSED):
            b = base_name(m)
            ort_fused.fuse_bert(os.path.join(out, f"{b}.onnx"), os.path.join(out, f"{m}.onnx"),
                                zoo.CONFIGS["bench"][b]["heads"])
    for m in set(need) | set(floats):
        with open(os.path.join(out, f"{m}.stamp"), "w") as f:
            f.write(stamp + "\n")


def base_name(name):
    for v in VARIANTS:
        if name.endswith(v):
            return name[: -len(v)]
    return name


def model_file(out, name):
    return os.path.join(out, "kv_decoder_with_past.onnx" if name == "kv_decoder" else f"{name}.onnx")


def make_inputs(name, batch, length, folder, prompt=False):
    """Writes fixed-seed inputs for one configuration; returns {input name: file}. prompt: a
    decoder's input is `length` tokens and no past, else one token after a past that long."""
    genai = name.endswith((GENAI, GENAI4))
    name = base_name(name)  # an int8 or fused model takes its float model's inputs
    cfg = zoo.CONFIGS["bench"][name]
    rng = np.random.default_rng(1000 * batch + length)
    if name == "speech_encoder":
        arrays = {"input_features": rng.standard_normal((batch, cfg["n_mels"], 4 * length))}
    elif name == "llama_stack":
        arrays = {"hidden_states": rng.standard_normal((batch, length, cfg["hidden"]))}
    elif name == "bert_stack":
        arrays = {"input_ids": rng.integers(0, cfg["vocab"], (batch, length)),
                  "attention_mask": np.ones((batch, length), dtype=np.int64)}
    elif name == "vit_encoder":
        gh = 2 ** (int(math.log2(length)) // 2)  # patch grid gh x gw with gh * gw == length
        gw = length // gh
        if gh * gw != length:
            raise SystemExit(f"models_bench: vit_encoder wants a power-of-two length, got {length}")
        p = cfg["patch"]
        arrays = {"pixel_values": rng.standard_normal((batch, 3, gh * p, gw * p))}
    elif name == "rnn_stack":
        arrays = {"features": rng.standard_normal((batch, length, cfg["n_in"]))}
    elif name == "video_encoder":
        # 8 tubelets of time (16 frames) where the length allows, the rest a patch grid as vit's
        t = 8 if length % 8 == 0 and length >= 32 else 1
        gh = 2 ** (int(math.log2(length // t)) // 2)
        gw = length // t // gh
        if t * gh * gw != length:
            raise SystemExit(f"models_bench: video_encoder wants a power-of-two length, got {length}")
        p, tf = cfg["patch"], cfg["tubelet"]
        arrays = {"pixel_values": rng.standard_normal((batch, 3, t * tf, gh * p, gw * p))}
    elif name == "kv_decoder":
        hd = cfg["hidden"] // cfg["heads"]
        tokens, past = (length, 0) if prompt else (1, length)
        arrays = {"input_ids": rng.integers(0, cfg["vocab"], (batch, tokens))}
        if genai:
            arrays["attention_mask"] = np.ones((batch, past + tokens), dtype=np.int64)
        for i in range(cfg["layers"]):
            for t in ("key", "value"):
                arrays[f"past_key_values.{i}.{t}"] = rng.standard_normal((batch, cfg["kv_heads"], past, hd))
    else:
        raise KeyError(name)
    os.makedirs(folder, exist_ok=True)
    files = {}
    for n, a in arrays.items():
        files[n] = os.path.join(folder, f"{n}.npy")
        np.save(files[n], a.astype(np.float32) if a.dtype == np.float64 else a.astype(np.int64))
    return files


def short_error(text):
    line = (text.strip().splitlines() or ["(no output)"])[-1]
    line = line.split("; supported ops:")[0]
    return line.replace("ubfuse: error: ", "")[:160]


def time_ubfuse(cli, model, inputs, mode, runs, threads):
    """Times one mode, or with mode "both" graph and eager in alternating runs of one process
    (then returns {"graph": ..., "eager": ...})."""
    cmd = [cli, "run", model, "--mode", mode, "--iters", str(runs), "--json",
           "--option", f"num_threads={threads}"]
    for n, f in inputs.items():
        cmd += ["--input", f"{n}={f}"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), UBFUSE_NUM_THREADS=str(threads))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        err = {"error": short_error(r.stderr or r.stdout)}
        return {"graph": err, "eager": dict(err)} if mode == "both" else err
    j = json.loads(r.stdout)
    if mode == "both":
        return {m: {"ms": v["median_ms"], "best_ms": v["min_ms"], "kernels": v["num_kernels"]}
                for m, v in j["modes"].items()}
    return {"ms": j["median_ms"], "best_ms": j["min_ms"], "kernels": j["num_kernels"]}


def keep_best(r, eng, res):
    """Keeps the faster of engine eng's result in r and res (its kernel count from either)."""
    old = r.get(eng)
    if old and "ms" in old and "kernels" in old and "kernels" not in res:
        res["kernels"] = old["kernels"]
    if not old or "ms" not in old or ("ms" in res and res["ms"] < old["ms"]):
        r[eng] = res


def count_nodes(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    return sum(1 for n in m.graph.node if n.op_type != "Constant")


def time_ort(model, inputs, opt, runs, threads, want_nodes):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [ORT, model, "--opt", opt, "--threads", str(threads), "--time", str(runs),
               "--warmup", "1", "--json"]
        if want_nodes:
            cmd += ["--save-optimized", os.path.join(tmp, "opt.onnx")]
        for n, f in inputs.items():
            cmd += ["--in", f"{n}={f}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 3:
            return {"error": r.stderr.strip().splitlines()[-1], "unavailable": True}
        if r.returncode != 0:
            return {"error": short_error(r.stderr)}
        j = json.loads(r.stdout)
        out = {"ms": j["median_ms"], "best_ms": j["best_ms"], "version": j["onnxruntime"]}
        if want_nodes:
            out["kernels"] = count_nodes(os.path.join(tmp, "opt.onnx"))
        return out


def cell(r):
    if r is None:
        return "-"
    if "error" in r:
        return "n/a"
    return f"{r['ms']:.2f}" + (f" ({r['kernels']})" if r.get("kernels") is not None else "")


def ratio(a, b):
    if not a or not b or "ms" not in a or "ms" not in b:
        return "-"
    return f"{b['ms'] / a['ms']:.2f}x"


def paired_ratio(r):
    """Graph over eager: the median over the rounds of each round's eager / graph (the two modes
    timed in one process), not a ratio of two rounds' best times."""
    p = sorted(r.get("paired", []))
    if not p:
        return ratio(r["graph"], r["eager"])
    mid = len(p) // 2
    return f"{(p[mid] if len(p) % 2 else (p[mid - 1] + p[mid]) / 2):.2f}x"


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--lengths", default="16,64,512,2048")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--runs", type=int, default=5,
                    help="timed runs per engine and round (median), at least")
    ap.add_argument("--min-ms", type=float, default=1000,
                    help="more runs where a model is fast: enough for about this many ms per "
                         "engine and round (at most 500 runs), from a 3-run graph-mode probe")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds over the engines, in alternating order; each keeps its best")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="lengths 16,512 at batch 1, 3 runs")
    ap.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    ap.add_argument("--prompt", action="store_true",
                    help="decoders: a prompt of the sequence length (no past), not one token after it")
    ap.add_argument("--json", help="also write all measurements to this file")
    a = ap.parse_args()
    if a.quick:
        a.lengths, a.batches, a.runs, a.rounds, a.min_ms = "16,512", "1", 3, 1, 300
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if base_name(m) not in zoo.BUILDERS:
            ap.error(f"unknown model {m}; known: {', '.join(zoo.BUILDERS)}, and each with {INT8} "
                     f"(quantized as onnxruntime's dynamic quantizer writes it), and "
                     f"bert_stack{FUSED}, kv_decoder{GENAI}, kv_decoder{GENAI4}")
        if m.endswith(FUSED) and base_name(m) not in ("bert_stack",):
            ap.error(f"{m}: only bert_stack has a {FUSED} form")
        if m.endswith((GENAI, GENAI4)) and base_name(m) != "kv_decoder":
            ap.error(f"{m}: only kv_decoder has the {GENAI} forms")
    lengths = [int(x) for x in a.lengths.split(",")]
    batches = [int(x) for x in a.batches.split(",")]
    cli = os.path.join(a.build, "ubfuse")
    if not os.path.exists(cli):
        sys.exit(f"models_bench: {cli} not found; build first (make build)")
    out = os.path.join(a.build, "bench_models")
    os.makedirs(out, exist_ok=True)
    ensure_models(out, models)

    rows, ort_down, ort_version = [], None, None
    nodes_seen = set()
    for name in models:
        path = model_file(out, name)
        for batch in batches:
            for length in lengths:
                folder = os.path.join(out, "inputs", name,
                                      f"b{batch}_l{length}" + ("_prompt" if a.prompt else ""))
                inputs = make_inputs(name, batch, length, folder, a.prompt)
                r = {"model": name, "batch": batch, "length": length}
                # A 4 ms model timed 5 times is 20 ms of samples, which one burst of load on a
                # shared machine decides: fast ones get more runs (the same for every engine).
                runs = a.runs
                probe = time_ubfuse(cli, path, inputs, "graph", 3, a.threads)
                if "ms" in probe and probe["ms"] > 0:
                    runs = max(a.runs, min(500, math.ceil(a.min_ms / probe["ms"])))
                r["runs"] = runs
                # Rounds alternate the engines' order; each engine keeps its fastest round, so a
                # burst of load on a shared machine costs one round, not one engine's figure.
                # ubfuse's two modes run in one process, in alternating runs: their ratio does
                # not depend on how fast the machine was in one mode's turn.
                engines = ["ubfuse", "ort_all", "ort_disabled"]
                for rnd in range(a.rounds):
                    for eng in engines if rnd % 2 == 0 else engines[::-1]:
                        if eng == "ubfuse":
                            both = time_ubfuse(cli, path, inputs, "both", runs, a.threads)
                            if "ms" in both["graph"] and "ms" in both["eager"]:
                                r.setdefault("paired", []).append(both["eager"]["ms"] / both["graph"]["ms"])
                            for mode in ("graph", "eager"):
                                keep_best(r, mode, both[mode])
                            continue
                        if a.no_ort or ort_down:
                            r[eng] = None
                            continue
                        else:
                            opt = eng[4:]
                            want = (name, opt) not in nodes_seen
                            res = time_ort(path, inputs, opt, runs, a.threads, want)
                            if res.get("unavailable"):
                                ort_down = res["error"]
                                r[eng] = None
                                continue
                            if want and "kernels" in res:
                                nodes_seen.add((name, opt))
                            ort_version = res.get("version", ort_version)
                        keep_best(r, eng, res)
                rows.append(r)
                print(f"  {name} b{batch} l{length}: graph {cell(r['graph'])}, eager {cell(r['eager'])}, "
                      f"ort all {cell(r.get('ort_all'))}, disabled {cell(r.get('ort_disabled'))}",
                      file=sys.stderr)

    print(f"\nWhole-model benchmark, {a.threads} threads, median of the runs (at least {a.runs}, "
          f"enough for {a.min_ms:g} ms), best of {a.rounds} rounds, {cpu_name()}; "
          f"onnxruntime-node {ort_version or '(not run)'}. Times in ms (kernels).")
    head = ["model", "batch", "len", "ubfuse graph", "ubfuse eager", "ort all", "ort disabled",
            "graph vs eager", "graph vs ort all", "runs"]
    table = [head]
    for r in rows:
        table.append([r["model"], str(r["batch"]), str(r["length"]), cell(r["graph"]), cell(r["eager"]),
                      cell(r.get("ort_all")), cell(r.get("ort_disabled")),
                      paired_ratio(r), ratio(r["graph"], r.get("ort_all")), str(r["runs"])])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for k, row in enumerate(table):
        print("  ".join(c.rjust(w) if i >= 1 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    print("(ratios: how many times faster ubfuse graph is; > 1 is faster. Graph vs eager: the median\n"
          " over the rounds of the two modes' ratio in one process; graph vs ort: of the best times)")
    errors = {}
    for r in rows:
        for eng in ("graph", "eager", "ort_all", "ort_disabled"):
            e = r.get(eng)
            if e and "error" in e:
                errors.setdefault((r["model"], eng, e["error"]), []).append(f"b{r['batch']} l{r['length']}")
    for (model, eng, err), where in errors.items():
        print(f"{model} {eng}: {err} ({', '.join(where)})")
    if ort_down:
        print(f"onnxruntime not run: {ort_down}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_name(), "threads": a.threads, "runs": a.runs, "min_ms": a.min_ms,
                       "rounds": a.rounds,
                       "onnxruntime": ort_version, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
