#!/usr/bin/env python3
"""Makes the reference token ids of the Python examples with onnxruntime-node.

    /usr/bin/python3 tests/models/make_example_refs.py [--examples generate,transcribe]

For each example the same greedy loop runs on onnxruntime (tests/models/ort_decode.mjs, level
disabled, 1 thread) on the same models and inputs, and the tokens go to
tests/models/refs/<example>/manifest.json; tests/python/test_examples.py checks ubfuse's loops
against them.

Random weights can leave the two largest logits of a step nearly equal, and then float rounding
picks the token. Candidate inputs (prompts for `generate`, synthetic audio for `transcribe`) are
tried in seed order until every step's margin between the top two logits is at least
MIN_RELATIVE_MARGIN of the top one; the margins are recorded. The loop must also give the same
tokens at onnxruntime's level `all` (and, for the decoder, on the merged model).

The end token: the loop is run a second time with `eos` set to a token the first run emits for
the first time at a known step (past the middle, before the last step), so that the test sees
the loop stop exactly there.

Needs node >= 18 with onnxruntime-node installed by `scripts/ort.sh --install`; `make test`
never runs this.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
sys.dont_write_bytecode = True
MIN_RELATIVE_MARGIN = 5e-3
TRIES = 40
SCRIPT = os.path.join(HERE, "ort_decode.mjs")


def ort(cmd, args, opt="disabled"):
    r = subprocess.run(["node", SCRIPT, cmd, *args, "--opt", opt, "--threads", "1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"make_example_refs: ort_decode.mjs failed:\n{r.stderr}")
    return json.loads(r.stdout)


def ids(xs):
    return ",".join(map(str, xs))


def pick_eos(tokens):
    """(step, token): the first step past the middle whose token appears there for the first time."""
    for k in range(len(tokens) // 2, len(tokens) - 1):
        if tokens[k] not in tokens[:k]:
            return k, tokens[k]
    return None


def search(name, candidates, run):
    """The first candidate whose run has clear margins and a usable end token."""
    for seed, inputs in candidates:
        r = run(inputs, None, "disabled")
        worst = min(r["relative_margins"])
        eos = pick_eos(r["tokens"])
        print(f"  {name} seed {seed}: min relative margin {worst:.2e}, tokens {r['tokens']}",
              file=sys.stderr)
        if worst >= MIN_RELATIVE_MARGIN and eos:
            return seed, inputs, r, eos
    raise SystemExit(f"make_example_refs: no {name} input among {TRIES} seeds has margins "
                     f">= {MIN_RELATIVE_MARGIN}")


def check_same(what, a, b):
    if a["tokens"] != b["tokens"]:
        raise SystemExit(f"make_example_refs: {what} gives {b['tokens']}, expected {a['tokens']}")


def manifest(example, models, seed, ref, eos_step, eos, stopped, extra):
    return {
        "example": f"examples/python/{example}.py", "models": models,
        "onnxruntime": ref["onnxruntime"], "ort_opt": ref["opt"], "ort_threads": ref["threads"],
        "also_checked": extra, "seed": seed, "prompt": ref["prompt"],
        "max_new_tokens": ref["max_new"], "tokens": ref["tokens"],
        "eos": {"token": eos, "step": eos_step, "tokens": stopped["tokens"]},
        "min_margin": min(ref["margins"]), "min_relative_margin": min(ref["relative_margins"]),
        "margins": [round(m, 6) for m in ref["margins"]],
    }


def write(folder, man):
    os.makedirs(folder, exist_ok=True)
    text = json.dumps(man, indent=1)
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]",  # lists of numbers or names on one line
                  lambda g: "[" + ", ".join(x.strip() for x in g.group(1).split(",")) + "]", text)
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        f.write(text + "\n")


def make_generate(out):
    split = [os.path.join(HERE, f) for f in ("kv_decoder.onnx", "kv_decoder_with_past.onnx")]
    merged = [os.path.join(HERE, "kv_decoder_merged.onnx")]
    max_new = 16
    vocab = 256  # model_zoo.CONFIGS["test"]["kv_decoder"]

    def run(prompt, eos, opt, models=split):
        args = [a for m in models for a in ("--model", m)]
        args += ["--prompt", ids(prompt), "--max-new", str(max_new)]
        return ort("generate", args + (["--eos", str(eos)] if eos is not None else []), opt)

    candidates = ((s, np.random.default_rng(s).integers(0, vocab, 6).tolist()) for s in range(TRIES))
    seed, prompt, ref, (step, eos) = search("generate", candidates, run)
    check_same("level all", ref, run(prompt, None, "all"))
    check_same("the merged decoder", ref, run(prompt, None, "disabled", merged))
    stopped = run(prompt, eos, "disabled")
    assert stopped["stopped_at_eos"] and stopped["tokens"] == ref["tokens"][:step + 1], stopped
    check_same("the merged decoder with eos", stopped, run(prompt, eos, "disabled", merged))
    man = manifest("generate", {"split": ["kv_decoder.onnx", "kv_decoder_with_past.onnx"],
                                "merged": ["kv_decoder_merged.onnx"]},
                   seed, ref, step, eos, stopped, ["opt all", "merged decoder"])
    man["prompt_rule"] = "numpy.random.default_rng(seed).integers(0, 256, 6)"
    write(os.path.join(out, "generate"), man)
    return man


def synth_audio(seed, seconds=1.3, rate=16000):
    """A voiced, speech-like test signal: a gliding pitch with decaying harmonics, a syllable-rate
    amplitude envelope and a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = rng.uniform(100, 140) + rng.uniform(20, 60) * np.sin(2 * np.pi * rng.uniform(0.5, 1.5) * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(h * phase) / h for h in range(1, 12))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(3, 5) * t + rng.uniform(0, np.pi)) ** 2
    x = 0.1 * envelope * voiced + 0.01 * rng.standard_normal(t.size)
    return x.astype(np.float32)


def make_transcribe(out):
    import transcribe as tr  # examples/python: its frontend makes the features both loops use
    files = [os.path.join(HERE, f) for f in tr.FILES]
    folder = os.path.join(out, "transcribe")
    os.makedirs(os.path.join(folder, "in"), exist_ok=True)
    features_path = os.path.join(folder, "in", "features.npy")
    max_new = 24

    def run(samples, eos, opt):
        np.save(features_path, tr.log_mel_spectrogram(samples))
        args = ["--encoder", files[0], "--decoder", files[1], "--decoder-with-past", files[2],
                "--features", features_path, "--prompt", ids(tr.PROMPT), "--max-new", str(max_new)]
        return ort("transcribe", args + (["--eos", str(eos)] if eos is not None else []), opt)

    candidates = ((s, synth_audio(s)) for s in range(TRIES))
    seed, samples, ref, (step, eos) = search("transcribe", candidates, run)
    check_same("level all", ref, run(samples, None, "all"))
    stopped = run(samples, eos, "disabled")
    assert stopped["stopped_at_eos"] and stopped["tokens"] == ref["tokens"][:step + 1], stopped
    np.save(os.path.join(folder, "in", "samples.npy"), samples)  # features.npy: the last run's
    man = manifest("transcribe", {"encoder": tr.FILES[0], "decoder": tr.FILES[1],
                                  "decoder_with_past": tr.FILES[2]},
                   seed, ref, step, eos, stopped, ["opt all"])
    man.update({"audio": "in/samples.npy: float32 at 16 kHz, make_example_refs.synth_audio(seed)",
                "features": "in/features.npy: transcribe.log_mel_spectrogram(samples), the input "
                            "onnxruntime's encoder ran on",
                "features_shape": list(np.load(features_path).shape),
                "encoder_frames": ref["encoder_frames"]})
    write(folder, man)
    return man


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--examples", default="generate,transcribe")
    ap.add_argument("--out", default=os.path.join(HERE, "refs"))
    a = ap.parse_args()
    makers = {"generate": make_generate, "transcribe": make_transcribe}
    for name in a.examples.split(","):
        man = makers[name](a.out)
        print(f"{name}: seed {man['seed']}, tokens {man['tokens']}, end token {man['eos']['token']} "
              f"at step {man['eos']['step']}, min margin {man['min_margin']:.3g} "
              f"(relative {man['min_relative_margin']:.3g})", file=sys.stderr)


if __name__ == "__main__":
    main()
