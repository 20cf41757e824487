"""Committed models (tests/models) against onnxruntime's stored outputs, in both modes, and a
decode step fed with the cache a previous step returned."""

import numpy as np
import pytest

import ubfuse
from conftest import MODELS, near, reference_sets


def inputs_of(folder, names):
    return {n: np.load(folder / "in" / f"{n}.npy") for n in names}


@pytest.mark.parametrize("model", ["bert_stack", "llama_stack", "bert_stack_int8"])
def test_model_matches_onnxruntime_in_both_modes(model):
    for mode in ("graph", "eager"):
        m = ubfuse.load_onnx(MODELS / f"{model}.onnx", mode=mode)
        for name, runs, folder in reference_sets(model):
            out = m.run(inputs_of(folder, runs[f"{model}.onnx"]))
            for o in m.outputs:
                near(out[o["name"]], np.load(folder / "ort" / f"{o['name']}.npy"),
                     f"{model} {name} {o['name']} {mode}")
        # Symbolic dims: one compiled model served every set, planning each new shape once.
        assert m.stats["compilations"] == 1
        assert m.stats["plan_builds"] == len(reference_sets(model))


def test_onnxruntime_optimizer_form_matches_the_original():
    # bert_stack as onnxruntime's transformer optimizer saves it (com.microsoft Attention,
    # EmbedLayerNormalization, SkipLayerNormalization, BiasGelu), against the original's
    # references; graph mode runs each Attention as one flash-attention kernel.
    for mode in ("graph", "eager"):
        m = ubfuse.load_onnx(MODELS / "bert_stack_ortfused.onnx", mode=mode)
        for name, runs, folder in reference_sets("bert_stack"):
            out = m.run(inputs_of(folder, runs["bert_stack_ortfused.onnx"]))
            near(out["last_hidden_state"], np.load(folder / "ort" / "last_hidden_state.npy"),
                 f"bert_stack_ortfused {name} {mode}")
        if mode == "graph":
            assert sum(k["variant"] == "flash attention" for k in m.kernels) == 2


def test_graph_and_eager_agree():
    graph = ubfuse.load_onnx(MODELS / "llama_stack.onnx")
    eager = ubfuse.load_onnx(MODELS / "llama_stack.onnx", mode="eager")
    assert len(graph.kernels) < len(eager.kernels)
    x = np.random.default_rng(5).standard_normal((2, 9, 64), dtype=np.float32)
    a = graph.run({"hidden_states": x})
    b = eager.run({"hidden_states": x})
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-4)


def test_decode_step_on_the_cache_of_the_previous_step():
    # Step 1 without a cache (5 tokens), then one token with the presents step 1 returned as the
    # past: the references' past set of length 5 continues the same sequence.
    first = ubfuse.load_onnx(MODELS / "kv_decoder.onnx")
    step = ubfuse.load_onnx(MODELS / "kv_decoder_with_past.onnx")
    (_, runs0, f0), = [s for s in reference_sets("kv_decoder") if s[0] == "nocache_b1_s5"]
    (_, runs1, f1), = [s for s in reference_sets("kv_decoder") if s[0] == "past_b1_p5_s1"]
    out0 = first.run(inputs_of(f0, runs0["kv_decoder.onnx"]))
    near(out0["logits"], np.load(f0 / "ort" / "logits.npy"), "step 1 logits")
    feed = {"input_ids": np.load(f1 / "in" / "input_ids.npy")}
    for name in runs1["kv_decoder_with_past.onnx"]:
        if name.startswith("past_key_values."):
            present = "present." + name[len("past_key_values."):]
            np.testing.assert_allclose(out0[present], np.load(f1 / "in" / f"{name}.npy"),
                                       rtol=1e-3, atol=1e-4)
            feed[name] = out0[present]  # ubfuse's own output, passed back without a copy
    assert set(feed) == set(runs1["kv_decoder_with_past.onnx"])
    out1 = step.run(feed)
    for o in step.outputs:
        near(out1[o["name"]], np.load(f1 / "ort" / f"{o['name']}.npy"), f"step 2 {o['name']}")


def test_greedy_decode_loop_plans_each_length_once_and_matches_the_full_recompute():
    # A prompt through the no-cache model, then 8 greedy tokens one at a time through the
    # with-past model, each step fed the presents of the step before. The step model compiles
    # once and builds one plan per new past length; each step's logits equal the last row of the
    # no-cache model run over the whole sequence so far.
    first = ubfuse.load_onnx(MODELS / "kv_decoder.onnx")
    step = ubfuse.load_onnx(MODELS / "kv_decoder_with_past.onnx")
    ids = np.array([[3, 141, 59, 26, 53]], dtype=np.int64)
    out = first.run({"input_ids": ids})
    layers = sorted({k.split(".")[1] for k in out if k.startswith("present.")})
    runs = []
    for t in range(8):
        token = out["logits"][:, -1:].argmax(-1).astype(np.int64)
        ids = np.concatenate([ids, token], axis=1)
        feed = {"input_ids": token}
        for l in layers:
            for kv in ("key", "value"):
                feed[f"past_key_values.{l}.{kv}"] = out[f"present.{l}.{kv}"]
        stats = {}
        out = step.run(feed, stats=stats)
        runs.append(stats)
        full = first.run({"input_ids": ids})
        np.testing.assert_allclose(out["logits"][:, -1], full["logits"][:, -1], rtol=1e-4,
                                   atol=1e-4, err_msg=f"step {t}")
        assert out["present.0.key"].shape[2] == ids.shape[1]
    assert step.stats["compilations"] == 1
    assert step.stats["plan_builds"] == 8  # past lengths 5..12, one plan each
    assert all(r["plan_built"] for r in runs)
    for r in runs:
        assert r["total_us"] >= r["plan_us"] + r["kernels_us"] - 1e-6
        assert r["overhead_us"] >= -1e-6
        # Positions, rotary cos/sin and the causal mask depend on lengths alone: the plan ran
        # their kernels once when it was built.
        assert r["kernels_precomputed"] > 0
        assert r["kernels_launched"] + r["kernels_precomputed"] == len(step.kernels)
    # The same length again reuses its plan.
    again = {}
    step.run(feed, stats=again)
    assert not again["plan_built"] and step.stats["plan_builds"] == 8
    with pytest.raises(ubfuse.Error, match="stats must be a dict"):
        step.run(feed, stats=[])


def test_onnxruntime_genai_form_decodes_as_the_original():
    # kv_decoder as onnxruntime-genai's model builder saves a LLaMA (one GroupQueryAttention per
    # layer with rotary inside, SimplifiedLayerNormalization, an attention_mask input; one file for
    # the prompt and the steps): every reference set in both modes, then greedy steps each fed the
    # presents of the step before, against the original no-cache model over the whole sequence.
    for mode in ("graph", "eager"):
        m = ubfuse.load_onnx(MODELS / "kv_decoder_ortgenai.onnx", mode=mode)
        for name, runs, folder in reference_sets("kv_decoder"):
            out = m.run(inputs_of(folder, runs["kv_decoder_ortgenai.onnx"]))
            for o in m.outputs:
                near(out[o["name"]], np.load(folder / "ort" / f"{o['name']}.npy"),
                     f"kv_decoder_ortgenai {name} {o['name']} {mode}")
        if mode == "graph":
            assert sum(k["variant"] == "flash attention" for k in m.kernels) == 2
    m = ubfuse.load_onnx(MODELS / "kv_decoder_ortgenai.onnx")  # graph mode
    full_model = ubfuse.load_onnx(MODELS / "kv_decoder.onnx")
    ids = np.array([[3, 141, 59, 26, 53]], dtype=np.int64)
    past = {f"past_key_values.{l}.{kv}": np.zeros((1, 2, 0, 16), np.float32)
            for l in (0, 1) for kv in ("key", "value")}
    feed = {"input_ids": ids, "attention_mask": np.ones(ids.shape, np.int64), **past}
    for t in range(4):
        out = m.run(feed)
        full = full_model.run({"input_ids": ids})
        np.testing.assert_allclose(out["logits"][:, -1], full["logits"][:, -1], rtol=1e-4,
                                   atol=1e-4, err_msg=f"step {t}")
        token = out["logits"][:, -1:].argmax(-1).astype(np.int64)
        ids = np.concatenate([ids, token], axis=1)
        feed = {"input_ids": token, "attention_mask": np.ones(ids.shape, np.int64)}
        for name in past:
            feed[name] = out["present." + name[len("past_key_values."):]]
    assert m.stats["compilations"] == 1
    # The same steps with the cache in place (ubfuse.KvCache finds GroupQueryAttention's Concats):
    # the same logits, and no dense copy of the cache.
    cache = m.kv_cache(16, dims={"batch_size": 1})
    assert [p["present"] for p in cache.pairs] == [f"present.{l}.{kv}" for l in (0, 1)
                                                   for kv in ("key", "value")]
    ids = ids[:, :5]
    out = m.run({"input_ids": ids, "attention_mask": np.ones(ids.shape, np.int64), **past})
    cache.append(out)
    for t in range(3):
        token = out["logits"][:, -1:].argmax(-1).astype(np.int64)
        ids = np.concatenate([ids, token], axis=1)
        stats = {}
        out = m.run({"input_ids": token, "attention_mask": np.ones(ids.shape, np.int64)},
                    kv_cache=cache, stats=stats)
        full = full_model.run({"input_ids": ids})
        np.testing.assert_allclose(out["logits"][:, -1], full["logits"][:, -1], rtol=1e-4,
                                   atol=1e-4, err_msg=f"cached step {t}")
        assert stats["kv_dense_copies"] == 0
