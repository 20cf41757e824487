#!/usr/bin/env python3
"""Greedy text generation with a decoder exported with past_key_values, on ubfuse.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/generate.py \
        tests/models/kv_decoder.onnx tests/models/kv_decoder_with_past.onnx \
        --prompt 3,141,59,26,53 --max-new-tokens 16 [--eos ID] [--mode eager]
    PYTHONPATH=build/python /usr/bin/python3 examples/python/generate.py \
        tests/models/kv_decoder_merged.onnx --prompt 3,141,59,26,53

The decoder comes as Optimum exports it: two files (the first call without a cache, then one
call per token with the cache), or one merged file that takes both paths under an `If` on
`use_cache_branch`. Each call after the prompt takes the one token chosen last (argmax of the
last logits row) and the keys and values of every earlier position, so the decoder computes only
the new row. The prompt runs once on the first model. With two files the cache is then kept in
place (`--kv-cache in-place`, the default): a ubfuse.KvCache of prompt + max_new_tokens rows,
filled with the prompt's `present.*` once, that the with-past decoder reads and appends each
call's new row to, so no call copies the past. With `--kv-cache feed` (and always with the
merged file) each call's `present.*` outputs are passed back as the next call's
`past_key_values.*`.
Generation stops after `max_new_tokens` tokens or when the end token is produced (it is
included in the result).

Only the public API: ubfuse.load_onnx, Model.run, Model.kv_cache, Model.stats, Model.inputs.
"""
import argparse
import dataclasses
import sys
import time

import numpy as np

import ubfuse

PAST, PRESENT = "past_key_values.", "present."


@dataclasses.dataclass
class Generation:
    tokens: list          # the generated token ids, the end token included when it stopped there
    stopped_at_eos: bool  # True when the end token ended the loop before max_new_tokens
    step_ms: list         # wall time of each decoder call from Python (the prompt's first)
    run_stats: list       # each call's ubfuse RunStats dict (plan_us, kernels_us, plan_built, ...)


class KVDecoder:
    """A decoder's ONNX file(s) loaded once: (no-past, with-past) or a single merged file."""

    def __init__(self, paths, mode="graph", options=None, kv_cache="in-place"):
        if isinstance(paths, (str, bytes)) or not hasattr(paths, "__len__"):
            paths = [paths]
        if len(paths) not in (1, 2):
            raise ValueError("give the merged decoder, or the decoder and the decoder with past")
        self.models = [ubfuse.load_onnx(p, mode=mode, options=options) for p in paths]
        self.first_model, self.step_model = self.models[0], self.models[-1]
        names = {i["name"] for i in self.step_model.inputs}
        self.merged = "use_cache_branch" in names
        if len(paths) == 1 and not self.merged:
            raise ValueError(f"{paths[0]} has no use_cache_branch input: give the decoder with "
                             "past as a second file")
        self.past_inputs = [i for i in self.step_model.inputs if i["name"].startswith(PAST)]
        if not self.past_inputs:
            raise ValueError(f"{paths[-1]} has no {PAST}* inputs")
        if kv_cache not in ("in-place", "feed"):
            raise ValueError(f"kv_cache is 'in-place' or 'feed', not {kv_cache!r}")
        # The merged file's Concats sit inside its If: its presents are fed back.
        self.in_place = kv_cache == "in-place" and not self.merged
        self.cache = None  # the in-place ubfuse.KvCache, made for the first sequence

    def _empty_past(self, batch):
        # The merged model's first call still takes past tensors: length 0, ignored by its
        # no-cache branch. Their fixed dims (heads, head size) come from the declared shape.
        feed = {}
        for i in self.past_inputs:
            s = i["shape"]
            feed[i["name"]] = np.zeros([batch, s[1], 0, s[3]], dtype=np.float32)
        return feed

    def first(self, ids, stats, max_length):
        feed = {"input_ids": ids}
        if self.merged:
            feed.update(self._empty_past(ids.shape[0]))
            feed["use_cache_branch"] = np.array([False])
        out = self.first_model.run(feed, stats=stats)
        if self.in_place:  # the prompt's keys and values become the cache's first rows
            batch = ids.shape[0]
            if (self.cache is None or self.cache.max_length < max_length
                    or self.cache.pairs[0]["shape"][0] != batch):
                self.cache = self.step_model.kv_cache(max_length, dims={"batch_size": batch})
            self.cache.reset()
            self.cache.append(out)
        return out

    def step(self, ids, previous, stats):
        if self.in_place:  # the cache holds every earlier row; this call appends the new one
            return self.step_model.run({"input_ids": ids}, stats=stats, kv_cache=self.cache)
        # Each present.{layer}.{key,value} becomes the next call's past_key_values.{...}: the
        # arrays ubfuse returned are passed back as they are, without a copy.
        feed = {"input_ids": ids}
        for i in self.past_inputs:
            feed[i["name"]] = previous[PRESENT + i["name"][len(PAST):]]
        if self.merged:
            feed["use_cache_branch"] = np.array([True])
        return self.step_model.run(feed, stats=stats)


def generate(decoder, prompt_ids, max_new_tokens, eos=None):
    """Greedy decoding of one sequence; returns a Generation."""
    ids = np.asarray(prompt_ids, dtype=np.int64).reshape(1, -1)
    if ids.shape[1] == 0:
        raise ValueError("the prompt needs at least one token")
    tokens, step_ms, run_stats = [], [], []
    out = None
    while len(tokens) < max_new_tokens:
        stats = {}
        t0 = time.perf_counter()
        if out is None:
            out = decoder.first(ids, stats, ids.shape[1] + max_new_tokens)
        else:
            out = decoder.step(ids, out, stats)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        run_stats.append(stats)
        token = int(np.argmax(out["logits"][0, -1]))
        tokens.append(token)
        if eos is not None and token == eos:
            return Generation(tokens, True, step_ms, run_stats)
        ids = np.array([[token]], dtype=np.int64)
    return Generation(tokens, False, step_ms, run_stats)


def parse_ids(text):
    return [int(t) for t in text.replace(",", " ").split()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("models", nargs="+", help="decoder.onnx decoder_with_past.onnx, or merged.onnx")
    ap.add_argument("--prompt", type=parse_ids, required=True, help="token ids, e.g. 3,141,59")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--eos", type=int, help="end token id: stop once it is generated")
    ap.add_argument("--mode", choices=("graph", "eager"), default="graph")
    ap.add_argument("--threads", type=int, help="ubfuse's num_threads option")
    ap.add_argument("--kv-cache", choices=("in-place", "feed"), default="in-place",
                    help="keep the cache in a ubfuse.KvCache, or feed present.* back as the past")
    a = ap.parse_args(argv)
    options = {"num_threads": a.threads} if a.threads else None
    t0 = time.perf_counter()
    decoder = KVDecoder(a.models, mode=a.mode, options=options, kv_cache=a.kv_cache)
    print(f"loaded and compiled in {(time.perf_counter() - t0) * 1e3:.0f} ms ({a.mode} mode, "
          f"{len(decoder.step_model.kernels)} kernels per step, KV cache "
          f"{'in place' if decoder.in_place else 'fed back'})")
    g = generate(decoder, a.prompt, a.max_new_tokens, a.eos)
    print(f"{'step':>4} {'token':>6} {'ms':>8} {'plan us':>8} {'kernels us':>10}  new plan")
    for i, (tok, ms, st) in enumerate(zip(g.tokens, g.step_ms, g.run_stats)):
        print(f"{i:>4} {tok:>6} {ms:>8.3f} {st['plan_us']:>8.1f} {st['kernels_us']:>10.1f}  "
              f"{'yes' if st['plan_built'] else 'no'}")
    print("tokens:", " ".join(map(str, g.tokens)))
    if g.stopped_at_eos:
        print(f"stopped at the end token {a.eos} after {len(g.tokens)} tokens")
    if len(g.step_ms) > 1:
        print(f"per-token latency (cached steps): median {np.median(g.step_ms[1:]):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
