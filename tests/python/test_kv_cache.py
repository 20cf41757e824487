"""Model.kv_cache and run(..., kv_cache=): the decode loop's keys and values kept in place in
buffers of the maximum length (docs/python.md, "Decoding token by token")."""

import threading

import numpy as np
import pytest

import ubfuse
from conftest import MODELS

PAIRS = [f"present.{l}.{kv}" for l in (0, 1) for kv in ("key", "value")]


@pytest.fixture(scope="module", params=["graph", "eager"])
def decoder(request):
    first = ubfuse.load_onnx(MODELS / "kv_decoder.onnx", mode=request.param)
    step = ubfuse.load_onnx(MODELS / "kv_decoder_with_past.onnx", mode=request.param)
    return first, step


def test_cache_loop_equals_feeding_presents_back(decoder):
    first, step = decoder
    cache = step.kv_cache(13, dims={"batch_size": 1})
    assert cache.max_length == 13 and cache.length == len(cache) == 0
    assert [p["present"] for p in cache.pairs] == PAIRS
    assert cache.pairs[0] == {"past": "past_key_values.0.key", "present": "present.0.key",
                              "axis": 2, "shape": [1, 2, 13, 16]}
    out = first.run({"input_ids": np.array([[3, 141, 59, 26, 53]])})
    cache.append(out)  # the prompt's rows; logits and other entries are ignored
    assert cache.length == 5
    fed = out
    for t in range(7):
        token = fed["logits"][:, -1:].argmax(-1).astype(np.int64)
        feed = {"input_ids": token}
        for p in cache.pairs:
            feed[p["past"]] = fed[p["present"]]
        fed = step.run(feed)
        stats = {}
        got = step.run({"input_ids": token}, kv_cache=cache, stats=stats)
        assert set(got) == {"logits"}  # the presents stay in the cache
        np.testing.assert_array_equal(got["logits"], fed["logits"], err_msg=f"step {t}")
        assert cache.length == 6 + t
        assert stats["kv_rows_appended"] == 4 and stats["kv_dense_copies"] == 0
        for name in PAIRS:
            np.testing.assert_array_equal(cache.rows(name), fed[name])
    # rows() is a view of the cache (no copy): it sees the next call's row land in the buffer.
    view = cache.rows("present.1.value")
    assert not view.flags["C_CONTIGUOUS"] and view.shape == (1, 2, 12, 16)
    assert not view.flags["WRITEABLE"]  # the cache's own rows: only runs write them
    with pytest.raises(ValueError):
        view[0, 0, 0, 0] = 1.0
    assert np.shares_memory(view, cache.rows("present.1.value"))
    base = view.ctypes.data
    out_into = {"logits": np.empty((1, 1, 256), np.float32)}
    step.run_into({"input_ids": np.array([[7]])}, out_into, kv_cache=cache)
    assert cache.length == 13
    assert cache.rows("present.1.value").ctypes.data == base
    assert np.isfinite(out_into["logits"]).all()


def test_cache_is_full_reset_and_errors(decoder):
    first, step = decoder
    cache = step.kv_cache(3, dims={"batch_size": 1})
    step.run({"input_ids": np.array([[1, 2]])}, kv_cache=cache)  # a prompt from an empty past
    step.run({"input_ids": np.array([[3]])}, kv_cache=cache)
    with pytest.raises(ubfuse.Error, match="KV cache is full.*4 rows but max_length is 3"):
        step.run({"input_ids": np.array([[4]])}, kv_cache=cache)
    assert cache.length == 3
    cache.reset()
    assert cache.length == 0
    step.run({"input_ids": np.array([[4]])}, kv_cache=cache)
    with pytest.raises(ubfuse.Error, match="comes from the KV cache"):
        step.run({"input_ids": np.array([[4]]),
                  "past_key_values.0.key": np.zeros((1, 2, 1, 16), np.float32)}, kv_cache=cache)
    with pytest.raises(ubfuse.Error, match="kv_cache must be a ubfuse.KvCache"):
        step.run({"input_ids": np.array([[4]])}, kv_cache={})
    with pytest.raises(ubfuse.Error, match="another model"):
        first_cache_model = ubfuse.load_onnx(MODELS / "kv_decoder_with_past.onnx", mode="eager")
        first_cache_model.run({"input_ids": np.array([[4]])}, kv_cache=cache)
    with pytest.raises(ubfuse.Error, match="batch_size.*has no value"):
        step.kv_cache(8)
    with pytest.raises(ubfuse.Error, match="no input of the model is a past"):
        first.kv_cache(8)
    with pytest.raises(ubfuse.Error, match="no input of the model is a past"):  # Concats in If
        ubfuse.load_onnx(MODELS / "kv_decoder_merged.onnx").kv_cache(8, dims={"batch_size": 1})
    out = first.run({"input_ids": np.array([[1, 2]])})
    with pytest.raises(ubfuse.Error, match="no rows for present 'present.0.key'"):
        cache.append({"logits": out["logits"]})
    with pytest.raises(ubfuse.Error,
                       match=r"present 'present.0.key' is f32\[1,2,16\].*holds f32\[1,2,3,16\]"):
        cache.append({**out, "present.0.key": out["present.0.key"][:, 0]})
    cache.append(out)  # 1 + 2 rows: full
    assert cache.length == 3
    np.testing.assert_array_equal(cache.rows("present.1.value")[:, :, 1:], out["present.1.value"])
    with pytest.raises(ubfuse.Error, match="KV cache is full: 3 rows held and 2 to append"):
        cache.append(out)
    with pytest.raises(ubfuse.Error, match="KV cache has no present 'logits'"):
        cache.rows("logits")


def test_threads_with_their_own_caches_and_one_shared_cache():
    step = ubfuse.load_onnx(MODELS / "kv_decoder_with_past.onnx")
    tokens = [[5], [17], [99], [3], [250], [8]] * 4

    def decode(cache, out):
        for t in tokens:
            out.append(step.run({"input_ids": np.array([t])}, kv_cache=cache)["logits"])

    want = []
    decode(step.kv_cache(32, dims={"batch_size": 1}), want)
    # Two sequences at once on one model, each with its own cache: each equals the lone run.
    outs = [[], []]
    threads = [threading.Thread(target=decode, args=(step.kv_cache(32, dims={"batch_size": 1}), o))
               for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outs:
        assert len(o) == len(want)
        for a, b in zip(o, want):
            np.testing.assert_array_equal(a, b)

    # One cache for two threads: a call that finds it in use is refused, never run beside the
    # other, so the rows held are exactly the calls that succeeded.
    cache = step.kv_cache(2000, dims={"batch_size": 1})
    ok, errors = [0, 0], []

    def loop(i):
        for _ in range(900):
            try:
                step.run({"input_ids": np.array([[5]])}, kv_cache=cache)
                ok[i] += 1
            except ubfuse.Error as e:
                errors.append(str(e))

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.length == sum(ok) and sum(ok) + len(errors) == 1800
    assert all("in use by another run" in e for e in errors)
