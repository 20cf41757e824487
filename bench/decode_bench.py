#!/usr/bin/env python3
"""Per-token decode latency at batch 1: ubfuse graph and eager against onnxruntime, in one run.

    make bench-decode [BENCH_DECODE_ARGS="--threads 2 --repeat 20"]
    PYTHONPATH=build/python /usr/bin/python3 bench/decode_bench.py [--build build]
        [--threads 2,1] [--repeat 10] [--rounds 2] [--workloads generate,generate64,transcribe]
        [--no-ort] [--json out.json]

The greedy loops of the Python examples, on the test models of tests/models:

  generate     the LLaMA-style decoder (kv_decoder.onnx for the prompt, kv_decoder_with_past.onnx
               for each later token), the prompt and token count of refs/generate/manifest.json
  generate64   the same decoder and prompt, 64 new tokens, no end token
  transcribe   the Whisper-shaped encoder-decoder (whisper_*.onnx) on refs/transcribe/in: the
               encoder once, the decoder with the prompt, then one call per token with the self-
               and cross-attention caches, the manifest's token count, no end token

Engines, each with the same thread count: ubfuse graph and eager with the self-attention cache in
place (a ubfuse.KvCache), ubfuse graph with each present fed back as the next past ("graph
feed"), all through generate.generate() and transcribe.transcribe() from examples/python
(option num_threads, with OMP_NUM_THREADS and UBFUSE_NUM_THREADS set to the same count for
oneDNN's OpenMP threads), onnxruntime-node at
optimization levels all and disabled (tests/models/ort_decode.mjs --repeat, intra-op threads,
installed on first use by scripts/ort.sh). Each engine runs in a fresh process of its own: one
warm-up loop, then --repeat timed loops; rounds alternate the engines' order and each engine
keeps its round with the lowest median.

Timed: each decoder call's wall time (Python's perf_counter around Model.run, Node's
process.hrtime around session.run; making the feeds and the argmax are outside). The per-token
figures (median, p90) cover the with-past calls of the timed loops; the first call (the prompt,
which for transcribe also computes the cross-attention K/V) and the encoder are reported apart.
`1st loop` is the median with-past call of the warm-up loop, the first after loading, where
ubfuse plans each new past length once; the timed loops reuse those plans. ubfuse's split comes from the run
stats (model.run(feed, stats=st)): plan_us (binding shapes, finding or building the plan),
kernels_us, and overhead = total_us - plan_us - kernels_us (outputs, workspace, launches).

Every loop of every engine must produce the reference tokens (refs/*/manifest.json, made by
onnxruntime); generate64 checks its first tokens against the manifest and all 64 against
onnxruntime at level disabled. A mismatch is marked in the table and the exit status is 1.
Exit status 3: the ubfuse module, node, npm or onnxruntime-node is missing (--no-ort skips
onnxruntime).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = os.path.join(ROOT, "tests", "models")
REFS = os.path.join(MODELS, "refs")
ORT_SH = os.path.join(ROOT, "scripts", "ort.sh")
ORT_DECODE = os.path.join(MODELS, "ort_decode.mjs")
# "graph" and "eager" keep the self-attention cache in place (ubfuse.KvCache); "graph feed" passes
# each call's present.* back as the next past, as the loops did before the cache existed.
ENGINES = ["graph", "graph feed", "eager", "ort_all", "ort_disabled"]
UBFUSE_ENGINES = {"graph": ("graph", "in-place"), "graph feed": ("graph", "feed"),
                  "eager": ("eager", "in-place")}
WORKLOADS = ["generate", "generate64", "transcribe"]
sys.dont_write_bytecode = True  # no __pycache__ folder in the source tree


def fail(msg, status):
    print(f"decode_bench: {msg}", file=sys.stderr)
    sys.exit(status)


def manifest(name):
    with open(os.path.join(REFS, name, "manifest.json")) as f:
        return json.load(f)


def cpu_name():
    """The model name and, since a VM may say only "AMD EPYC", the family and model numbers."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor is enough
                k, _, v = line.partition(":")
                info[k.strip()] = v.strip()
    except OSError:
        return "unknown CPU"
    name = info.get("model name", "unknown CPU")
    if "cpu family" in info and "model" in info:
        name += f" (family {info['cpu family']} model {info['model']})"
    return f"{name}, {os.cpu_count()} logical CPUs"


def load_average():
    """The 1-minute load average: on a shared machine, how busy the cores were around the run."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def percentile(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


# ---------------------------------------------------------------------------------------------
# Workloads


def workload(name):
    gen, tr = manifest("generate"), manifest("transcribe")
    if name in ("generate", "generate64"):
        n = gen["max_new_tokens"] if name == "generate" else 64
        return {"name": name, "kind": "generate", "prompt": gen["prompt"], "max_new": n,
                "models": [os.path.join(MODELS, f) for f in gen["models"]["split"]],
                "ref": gen["tokens"][:n], "ref_source": "refs/generate/manifest.json"}
    m = tr["models"]
    return {"name": name, "kind": "transcribe", "prompt": tr["prompt"], "max_new": tr["max_new_tokens"],
            "models": [os.path.join(MODELS, m[k]) for k in ("encoder", "decoder", "decoder_with_past")],
            "samples": os.path.join(REFS, "transcribe", "in", "samples.npy"),
            "features": os.path.join(REFS, "transcribe", "in", "features.npy"),
            "ref": tr["tokens"], "ref_source": "refs/transcribe/manifest.json"}


def summarize(loops, warmup, stats=None):
    """loops: each timed loop's per-call us (the first call at index 0). Returns the figures."""
    steps = [t for loop in loops for t in loop["step_us"][1:]]
    firsts = [loop["step_us"][0] for loop in loops]
    warm = warmup["step_us"][1:]
    r = {"median_us": statistics.median(steps), "p90_us": percentile(steps, 0.9), "steps": len(steps),
         "first_us": statistics.median(firsts),
         "first_loop_median_us": statistics.median(warm) if warm else None}
    enc = [loop["encoder_us"] for loop in loops if loop.get("encoder_us") is not None]
    if enc:
        r["encoder_us"] = statistics.median(enc)
    if stats is not None:
        with_past = [s for loop in stats for s in loop[1:]]
        r["plan_us"] = statistics.median(s["plan_us"] for s in with_past)
        r["kernels_us"] = statistics.median(s["kernels_us"] for s in with_past)
        r["overhead_us"] = statistics.median(
            s["total_us"] - s["plan_us"] - s["kernels_us"] for s in with_past)
        # Python's own share of the wall time: the call minus what ubfuse measured inside it.
        r["outside_run_us"] = statistics.median(
            t - s["total_us"]
            for loop, sl in zip(loops, stats) for t, s in zip(loop["step_us"][1:], sl[1:]))
        r["new_plans"] = sum(bool(s["plan_built"]) for loop in stats for s in loop)
    return r


# ---------------------------------------------------------------------------------------------
# ubfuse


def load_ubfuse(build):
    py = os.path.join(build, "python")
    if os.path.isdir(py):
        sys.path.insert(0, py)
    sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
    try:
        import numpy  # noqa: F401
        import generate
        import transcribe
        import ubfuse  # noqa: F401
    except ImportError as e:
        fail(f"cannot import the ubfuse Python module ({e}); build it first (make build) or give "
             f"--build (looked in {py})", 3)
    return generate, transcribe


class UbfuseEngine:
    """One workload's models on ubfuse in one mode and thread count, loaded once."""

    def __init__(self, mods, w, mode, threads, kv_cache):
        import numpy as np
        self.gen, self.tr, self.w, self.kv_cache = mods[0], mods[1], w, kv_cache
        opts = {"num_threads": threads}
        if w["kind"] == "generate":
            self.model = self.gen.KVDecoder(w["models"], mode=mode, options=opts, kv_cache=kv_cache)
        else:
            self.model = self.tr.Whisper(w["models"], mode=mode, options=opts)
            self.samples = np.load(w["samples"])
            # The same features onnxruntime's encoder runs on (features.npy), made here from the
            # samples by the example's frontend.
            feats = self.tr.log_mel_spectrogram(self.samples)
            if not np.array_equal(feats, np.load(w["features"])):
                fail("transcribe.log_mel_spectrogram(samples.npy) differs from features.npy; "
                     "remake the references (tests/models/make_example_refs.py)", 1)

    def loop(self):
        w = self.w
        if w["kind"] == "generate":
            g = self.gen.generate(self.model, w["prompt"], w["max_new"])
            enc = None
        else:
            g = self.tr.transcribe(self.model, self.samples, w["max_new"], eos=None, prompt=w["prompt"],
                                   kv_cache=self.kv_cache)
            enc = g.encoder_ms * 1e3
        return {"step_us": [t * 1e3 for t in g.step_ms], "encoder_us": enc, "tokens": g.tokens}, g.run_stats

    def run(self, repeat):
        warm, warm_stats = self.loop()  # the first loop after loading: plans for new lengths
        loops, stats = zip(*(self.loop() for _ in range(repeat)))
        r = summarize(list(loops), warm, list(stats))
        r["first_loop_new_plans"] = sum(bool(s["plan_built"]) for s in warm_stats)
        r["token_runs"] = [warm["tokens"]] + [x["tokens"] for x in loops]
        return r


def worker(spec):
    """The child process of run_ubfuse: one engine's loops, the result as JSON on stdout."""
    a = json.loads(spec)
    mods = load_ubfuse(a["build"])
    r = UbfuseEngine(mods, workload(a["workload"]), a["mode"], a["threads"],
                     a["kv_cache"]).run(a["repeat"])
    print(json.dumps(r))
    return 0


def run_ubfuse(build, w, engine, threads, repeat, omp_threads=None):
    """Each run in a fresh process: oneDNN's OpenMP team is sized once per process, from
    OMP_NUM_THREADS; without it, it takes every core whatever num_threads says."""
    mode, kv_cache = UBFUSE_ENGINES[engine]
    spec = json.dumps({"build": build, "workload": w["name"], "mode": mode, "threads": threads,
                       "repeat": repeat, "kv_cache": kv_cache})
    env = dict(os.environ, OMP_NUM_THREADS=str(omp_threads or threads), UBFUSE_NUM_THREADS=str(threads))
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", spec],
                       capture_output=True, text=True, env=env)
    if r.returncode == 3:
        fail((r.stderr.strip().splitlines() or ["the ubfuse module does not load"])[-1], 3)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:200]}
    return json.loads(r.stdout)


# ---------------------------------------------------------------------------------------------
# onnxruntime-node


def ort_install():
    """Installs onnxruntime-node if needed; returns its folder, or exits 3 with ort.sh's reason."""
    try:
        r = subprocess.run(["bash", ORT_SH, "--install"], capture_output=True, text=True)
    except OSError as e:
        fail(f"cannot run scripts/ort.sh ({e})", 3)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or [f"scripts/ort.sh --install exited {r.returncode}"])[-1]
        fail(f"onnxruntime-node is not available: {why}\n(--no-ort runs ubfuse alone)", 3)
    line = r.stdout.strip().splitlines()[-1]
    folder, _, version = line.rpartition(" onnxruntime-node ")
    return folder, version


def run_ort(ort_dir, w, opt, threads, repeat):
    cmd = ["node", ORT_DECODE, w["kind"], "--prompt", ",".join(map(str, w["prompt"])),
           "--max-new", str(w["max_new"]), "--opt", opt, "--threads", str(threads), "--repeat", str(repeat)]
    if w["kind"] == "generate":
        for m in w["models"]:
            cmd += ["--model", m]
    else:
        cmd += ["--encoder", w["models"][0], "--decoder", w["models"][1], "--decoder-with-past",
                w["models"][2], "--features", w["features"]]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, UBFUSE_ORT_DIR=ort_dir))
    if r.returncode == 3:
        fail((r.stderr.strip().splitlines() or ["onnxruntime-node does not load"])[-1], 3)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:200]}
    j = json.loads(r.stdout)
    res = summarize(j["loops"], j["warmup"])
    res["token_runs"] = [j["warmup"]["tokens"]] + [x["tokens"] for x in j["loops"]]
    res["version"] = j["onnxruntime"]
    return res


# ---------------------------------------------------------------------------------------------
# Table


def fmt(x, digits=0):
    return "-" if x is None else f"{x:.{digits}f}"


def print_table(rows):
    head = ["workload", "engine", "thr", "first call", "median", "p90", "vs ort all", "1st loop",
            "plan", "kernels", "overhead", "new plans", "tokens"]
    table = [head]
    for r in rows:
        e = r["result"]
        if "error" in e:
            table.append([r["workload"], r["engine"], str(r["threads"]), "n/a: " + e["error"][:60]]
                         + [""] * (len(head) - 4))
            continue
        base = next((x["result"] for x in rows
                     if (x["workload"], x["threads"], x["engine"]) == (r["workload"], r["threads"], "ort_all")
                     and "median_us" in x["result"]), None)
        ratio = f"{base['median_us'] / e['median_us']:.2f}x" if base else "-"
        first = fmt(e["first_us"])
        if "encoder_us" in e:
            first += f" (+enc {e['encoder_us']:.0f})"
        plans = (f"{e['new_plans']} / {e['first_loop_new_plans']}" if "new_plans" in e else "-")
        table.append([r["workload"], r["engine"], str(r["threads"]), first, fmt(e["median_us"]),
                      fmt(e["p90_us"]), ratio, fmt(e["first_loop_median_us"]), fmt(e.get("plan_us"), 1),
                      fmt(e.get("kernels_us")), fmt(e.get("overhead_us"), 1), plans, r["tokens_ok"]])
    widths = [max(len(row[i]) for row in table if len(row) > i) for i in range(len(head))]
    for k, row in enumerate(table):
        if len(row) > 3 and row[3].startswith("n/a"):
            print("  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
        else:
            print("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), type=os.path.abspath,
                    help="the build folder (its python/ holds the ubfuse module)")
    ap.add_argument("--threads", default="2,1", help="thread counts, each a block of rows")
    ap.add_argument("--repeat", type=int, default=10, help="timed loops per engine and round")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds over the engines, in alternating order; each keeps its best")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--omp-threads", type=int,
                    help="OMP_NUM_THREADS for ubfuse (oneDNN's OpenMP team); default: the row's threads")
    ap.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    ap.add_argument("--json", help="also write all measurements to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker)
    try:
        threads_list = [int(t) for t in a.threads.split(",") if t]
    except ValueError:
        ap.error(f"--threads wants numbers like 2,1, got {a.threads!r}")
    if not threads_list or min(threads_list) < 1 or a.repeat < 1 or a.rounds < 1:
        ap.error("--threads, --repeat and --rounds want positive numbers")
    names = [n for n in a.workloads.split(",") if n]
    for n in names:
        if n not in WORKLOADS:
            ap.error(f"unknown workload {n}; known: {', '.join(WORKLOADS)}")

    load_ubfuse(a.build)  # fails early, with exit status 3, when the module is missing
    ort_dir = ort_version = None
    if not a.no_ort:
        if not any(os.access(os.path.join(p, "node"), os.X_OK)
                   for p in os.environ.get("PATH", "").split(os.pathsep)):
            fail("node not found: onnxruntime-node needs Node.js >= 18 and npm (Debian: apt-get "
                 "install nodejs npm); --no-ort runs ubfuse alone", 3)
        ort_dir, ort_version = ort_install()

    load_before = load_average()
    rows = []
    for threads in threads_list:
        for name in names:
            w = workload(name)
            got, token_runs, round_medians = {}, {}, {}
            for rnd in range(a.rounds):
                for eng in ENGINES if rnd % 2 == 0 else ENGINES[::-1]:
                    if eng in UBFUSE_ENGINES:
                        res = run_ubfuse(a.build, w, eng, threads, a.repeat, a.omp_threads)
                    elif a.no_ort:
                        continue
                    else:
                        res = run_ort(ort_dir, w, eng[4:], threads, a.repeat)
                    print(f"  {name} {eng}, {threads} threads, round {rnd + 1}: " +
                          (res["error"] if "error" in res else
                           f"median {res['median_us']:.0f} us, p90 {res['p90_us']:.0f} us"),
                          file=sys.stderr, flush=True)
                    # Every round's tokens are checked; the figures are the best round's.
                    token_runs.setdefault(eng, []).extend(res.pop("token_runs", []))
                    if "median_us" in res:
                        round_medians.setdefault(eng, []).append(round(res["median_us"], 1))
                    old = got.get(eng)
                    if old is None or "error" in old or (
                            "error" not in res and res["median_us"] < old["median_us"]):
                        got[eng] = res
            for eng in ENGINES:
                if eng in got:
                    if "error" not in got[eng]:
                        got[eng]["token_runs"] = token_runs[eng]
                        got[eng]["round_medians_us"] = round_medians[eng]
                    rows.append({"workload": name, "threads": threads, "engine": eng, "result": got[eng]})

    # Tokens: every loop of every engine against the stored references; generate64 beyond the
    # manifest against onnxruntime at level disabled (the level the references come from).
    failed = []
    for r in rows:
        e = r["result"]
        if "error" in e:
            r["tokens_ok"] = "-"
            continue
        w = workload(r["workload"])
        ref, note = w["ref"], ""
        if len(ref) < w["max_new"]:
            ort_ref = next((x["result"]["token_runs"][0] for x in rows
                            if x["workload"] == r["workload"] and x["engine"] == "ort_disabled"
                            and "token_runs" in x["result"]), None)
            if ort_ref is not None and ort_ref[:len(ref)] == ref:
                ref = ort_ref
            else:
                note = f" (first {len(ref)})"
        ok = all(t[:len(ref)] == ref and len(t) == w["max_new"] for t in e["token_runs"])
        r["tokens_ok"] = ("ok" if ok else "MISMATCH") + note
        e["tokens"] = e["token_runs"][0]
        e["loops_checked"] = len(e.pop("token_runs"))
        if not ok:
            failed.append(f"{r['workload']} {r['engine']} {r['threads']} threads")

    load_after = load_average()
    omp = f" (OMP_NUM_THREADS={a.omp_threads} for ubfuse)" if a.omp_threads else ""
    print(f"\nPer-token decode latency at batch 1, {cpu_name()}, load average {load_before} before, "
          f"{load_after} after; threads {a.threads}{omp}; median and p90 over the with-past calls "
          f"of {a.repeat} loops after a warm-up loop, best of {a.rounds} rounds; onnxruntime-node "
          f"{ort_version or '(not run)'}. Times in us per call.")
    print_table(rows)
    print("first call: the prompt (transcribe: + the encoder, apart). vs ort all: how many times\n"
          "faster than onnxruntime at level all (> 1 is faster). 1st loop: median with-past call of\n"
          "the warm-up loop, the first after loading. plan, kernels, overhead (= total - plan -\n"
          "kernels): medians of ubfuse's run stats. new plans: in the timed loops / in the warm-up.")
    for n in names:
        w = workload(n)
        print(f"{n}: {os.path.relpath(w['models'][-1], ROOT)} and co., prompt of {len(w['prompt'])} "
              f"tokens, {w['max_new']} new; tokens checked against {w['ref_source']}"
              + (" and onnxruntime (disabled)" if len(w["ref"]) < w["max_new"] and not a.no_ort else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_name(), "load_average": [load_before, load_after], "threads": threads_list,
                       "omp_threads": a.omp_threads, "repeat": a.repeat, "rounds": a.rounds,
                       "onnxruntime": ort_version, "rows": rows}, f, indent=1)
    if failed:
        print("tokens differ from the references: " + "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
