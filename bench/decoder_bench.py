#!/usr/bin/env python3
"""Decoder layer benchmark: ubfuse graph vs ubfuse eager vs PyTorch eager, f32 and bf16, in one run.

    /usr/bin/python3 bench/decoder_bench.py [--build build] [--iters 5] [--json out.json]

The layer is tests/models/export_layers.py's LLaMA-style decoder at hidden 2048, 16 heads, MLP
5632, batch 1, seq 512 (exported once into BUILD/bench_models). PyTorch runs with 2 threads
(torch.set_num_threads) and torch.profiler splits its time into matmul ops (aten::mm, bmm, addmm,
matmul kernels) and the rest. ubfuse's numbers come from BUILD/bench_decoder_bench
(bench/decoder_bench.cc), whose profiler splits kernels containing a MatMul from the memory-bound
ones, and which also times the layer's matmuls called directly through oneDNN.

Prints the four figures of issue 5: ubfuse's matmul time vs oneDNN called directly (target >= 90%
efficiency), ubfuse graph f32 vs PyTorch f32 eager (target >= 1.1x), ubfuse graph bf16 vs PyTorch
bf16 eager (target >= 1.3x), and graph vs eager within ubfuse.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))

SEQ, HIDDEN, HEADS, MLP = 512, 2048, 16, 5632


def torch_eager(dtype_name, iters):
    import torch
    import export_layers as ex
    torch.set_num_threads(2)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    m = ex.llama(HIDDEN, HEADS, MLP, dtype)
    x = torch.randn(1, SEQ, HIDDEN).to(dtype)
    pos = torch.arange(SEQ).unsqueeze(0)
    with torch.no_grad():
        for _ in range(2):
            m(x, pos)
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            m(x, pos)
            times.append((time.perf_counter() - t0) * 1e3)
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            m(x, pos)
    total = mm = 0.0
    for e in prof.key_averages():
        total += e.self_cpu_time_total
        if any(k in e.key for k in ("aten::mm", "aten::bmm", "aten::addmm", "matmul", "linear")):
            mm += e.self_cpu_time_total
    med = statistics.median(times)
    share = mm / total if total else 0.0
    return {"ms": med, "matmul_ms": med * share, "memory_bound_ms": med * (1 - share)}


def ubfuse_bench(build, model_dir):
    exe = os.path.join(build, "bench_decoder_bench")
    env = dict(os.environ, UBFUSE_DECODER_DIR=model_dir, OMP_NUM_THREADS="2")
    out = subprocess.run([exe, "--benchmark_filter=Decoder", "--benchmark_format=json"], env=env,
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("error_occurred"):
            # e.g. no bf16 oneDNN matmul on this CPU: that row and its figure read n/a.
            print(f"{b['name']}: {b.get('error_message')}", flush=True)
            continue
        res[b["label"]] = {"ms": b["real_time"], "matmul_ms": b.get("matmul_ms"),
                           "memory_bound_ms": b.get("memory_bound_ms"),
                           "kernels": b.get("kernels"), "gflops": b.get("GFLOP/s")}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    model_dir = os.path.join(a.build, "bench_models")
    if not all(os.path.exists(os.path.join(model_dir, f"llama_decoder_2048_{t}.onnx"))
               for t in ("f32", "bf16")):
        print(f"exporting the decoder layer to {model_dir} ...", flush=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "export_layers.py"),
                        "--bench", "--out", model_dir], check=True)
    u = ubfuse_bench(a.build, model_dir)
    t = {d: torch_eager(d, a.iters) for d in ("f32", "bf16")}
    r = {"pytorch": t, "ubfuse": u}
    print(f"\nLLaMA-style decoder layer, batch 1, seq {SEQ}, hidden {HIDDEN}, {HEADS} heads, "
          f"MLP {MLP}, 2 threads")
    print(f"{'engine':28} {'ms':>9} {'matmul ms':>10} {'memory-bound ms':>16}")
    for d in ("f32", "bf16"):
        rows = [(f"PyTorch eager {d}", t[d]), (f"ubfuse eager {d}", u.get(f"eager {d}")),
                (f"ubfuse graph {d}", u.get(f"graph {d}")),
                (f"oneDNN matmuls only {d}", u.get(f"oneDNN {d}"))]
        for name, v in rows:
            if v is None:
                print(f"{name:28} {'n/a':>9}")
                continue
            mm = v.get("matmul_ms")
            mb = v.get("memory_bound_ms")
            print(f"{name:28} {v['ms']:9.1f} {mm if mm is not None else v['ms']:10.1f} "
                  f"{mb if mb is not None else 0:16.1f}")
    fig = {}
    for d in ("f32", "bf16"):
        g, e, o = u.get(f"graph {d}"), u.get(f"eager {d}"), u.get(f"oneDNN {d}")
        fig[f"matmul_efficiency_{d}"] = o["ms"] / g["matmul_ms"] if o and g else None
        fig[f"graph_vs_pytorch_{d}"] = t[d]["ms"] / g["ms"] if g else None
        fig[f"graph_vs_eager_{d}"] = e["ms"] / g["ms"] if e and g else None
    r["figures"] = fig
    print("\nfigures:")
    def fmt(x, spec):
        return "n/a" if x is None else format(x, spec)

    for d, target in (("f32", 1.1), ("bf16", 1.3)):
        eff = fig[f"matmul_efficiency_{d}"]
        pct = "n/a" if eff is None else f"{eff * 100:.0f}%"
        print(f"  {d}: ubfuse matmuls at {pct} of oneDNN "
              f"called directly (target >= 90%); graph vs PyTorch eager "
              f"{fmt(fig[f'graph_vs_pytorch_{d}'], '.2f')}x (target >= {target}x); graph vs "
              f"ubfuse eager {fmt(fig[f'graph_vs_eager_{d}'], '.2f')}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=2)


if __name__ == "__main__":
    main()
