"""The Python examples (examples/python) against the token ids the same greedy loops produce on
onnxruntime (tests/models/refs/{generate,transcribe}, made by tests/models/make_example_refs.py),
in graph and eager mode; each decoder compiles once and plans each new length once."""

import json
import sys

import numpy as np
import pytest

import ubfuse
from conftest import MODELS, SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "examples" / "python"))
import generate  # noqa: E402
import transcribe  # noqa: E402

MODES = ["graph", "eager"]


def manifest(name):
    return json.loads((MODELS / "refs" / name / "manifest.json").read_text())


GEN = manifest("generate")
TR = manifest("transcribe")
SAMPLES = MODELS / "refs" / "transcribe" / "in" / "samples.npy"


def check_compiled_once(model, plans):
    assert model.stats["compilations"] == 1
    assert model.stats["plan_builds"] == plans


# ---------------------------------------------------------------------------------------------
# generate.py


def check_cache_use(run_stats, in_place, mode, pairs):
    """Each call after the first appended its row to each pair in place (graph mode: no dense
    copy), or fed the presents back (nothing appended)."""
    for s in run_stats[1:]:
        assert s["kv_rows_appended"] == (pairs if in_place else 0)
        if mode == "graph" or not in_place:
            assert s["kv_dense_copies"] == 0


@pytest.mark.parametrize("kv_cache", ["in-place", "feed"])
@pytest.mark.parametrize("mode", MODES)
def test_generate_matches_onnxruntime_and_plans_each_length_once(mode, kv_cache):
    dec = generate.KVDecoder([MODELS / f for f in GEN["models"]["split"]], mode=mode,
                             kv_cache=kv_cache)
    assert dec.in_place == (kv_cache == "in-place")
    n = GEN["max_new_tokens"]
    g = generate.generate(dec, GEN["prompt"], n)
    assert g.tokens == GEN["tokens"] and not g.stopped_at_eos
    assert len(g.step_ms) == len(g.run_stats) == n
    check_cache_use(g.run_stats, dec.in_place, mode, 4)
    if dec.in_place:  # prompt + every token but the last
        assert dec.cache.length == len(GEN["prompt"]) + n - 1
    # The prompt ran once on the no-past model; every later token on the with-past model, whose
    # past grew by one each call: one compile, one plan per past length.
    check_compiled_once(dec.first_model, 1)
    check_compiled_once(dec.step_model, n - 1)
    assert all(s["plan_built"] for s in g.run_stats)

    # With the end token the reference emits first at step k, the loop stops right there, and
    # reuses the plans of those lengths.
    eos = GEN["eos"]
    assert eos["token"] not in GEN["tokens"][:eos["step"]]
    g = generate.generate(dec, GEN["prompt"], n, eos=eos["token"])
    assert g.stopped_at_eos and g.tokens == eos["tokens"] and len(g.tokens) == eos["step"] + 1
    assert len(g.run_stats) == eos["step"] + 1
    assert not any(s["plan_built"] for s in g.run_stats)
    check_compiled_once(dec.step_model, n - 1)


@pytest.mark.parametrize("mode", MODES)
def test_generate_with_the_merged_decoder(mode):
    dec = generate.KVDecoder(MODELS / GEN["models"]["merged"][0], mode=mode)
    assert dec.merged and dec.first_model is dec.step_model
    assert not dec.in_place  # its Concats sit inside the If: the presents are fed back
    n = GEN["max_new_tokens"]
    g = generate.generate(dec, GEN["prompt"], n)
    assert g.tokens == GEN["tokens"] and not g.stopped_at_eos
    # One model for both branches: the prompt's shape and then each past length, planned once.
    check_compiled_once(dec.step_model, n)
    eos = GEN["eos"]
    g = generate.generate(dec, GEN["prompt"], n, eos=eos["token"])
    assert g.stopped_at_eos and g.tokens == eos["tokens"]
    check_compiled_once(dec.step_model, n)


def test_generate_stops_at_max_new_tokens_before_the_end_token():
    dec = generate.KVDecoder([MODELS / f for f in GEN["models"]["split"]], mode="eager")
    eos = GEN["eos"]
    g = generate.generate(dec, GEN["prompt"], eos["step"], eos=eos["token"])
    assert g.tokens == GEN["tokens"][:eos["step"]] and not g.stopped_at_eos


def test_generate_refuses_bad_arguments():
    with pytest.raises(ValueError, match="has no use_cache_branch input"):
        generate.KVDecoder(MODELS / "kv_decoder.onnx", mode="eager")
    dec = generate.KVDecoder([MODELS / f for f in GEN["models"]["split"]], mode="eager")
    with pytest.raises(ValueError, match="at least one token"):
        generate.generate(dec, [], 4)
    with pytest.raises(ValueError, match="kv_cache is 'in-place' or 'feed'"):
        generate.KVDecoder([MODELS / f for f in GEN["models"]["split"]], kv_cache="copy")
    with pytest.raises(ubfuse.Error):  # a token id past the vocabulary: the runtime's error
        generate.generate(dec, [GEN["prompt"][0], 100000], 2)


def test_generate_main_prints_tokens_and_latency(capsys):
    eos = GEN["eos"]
    args = [str(MODELS / f) for f in GEN["models"]["split"]]
    args += ["--prompt", ",".join(map(str, GEN["prompt"])), "--max-new-tokens",
             str(GEN["max_new_tokens"]), "--eos", str(eos["token"]), "--mode", "eager"]
    assert generate.main(args) == 0
    out = capsys.readouterr().out
    assert f"tokens: {' '.join(map(str, eos['tokens']))}\n" in out
    assert f"stopped at the end token {eos['token']}" in out
    assert "per-token latency" in out


# ---------------------------------------------------------------------------------------------
# transcribe.py


def test_log_mel_frontend():
    samples = np.load(SAMPLES)
    feats = transcribe.log_mel_spectrogram(samples)
    assert feats.dtype == np.float32 and list(feats.shape) == TR["features_shape"]
    assert feats.shape[1] == len(samples) // transcribe.HOP
    # The features onnxruntime's encoder ran on came from this same frontend.
    np.testing.assert_allclose(feats, np.load(SAMPLES.parent / "features.npy"), atol=1e-5)
    # Whisper's normalization: at most 8 (log10 units) below the peak, then (x + 4) / 4.
    assert feats.max() - feats.min() <= 2.0 + 1e-6

    # The Slaney mel scale is linear to 1 kHz (15 mel) and logarithmic above.
    np.testing.assert_allclose(transcribe.hz_to_mel([0, 200, 1000, 6400]), [0, 3, 15, 42])
    f = np.array([50.0, 999.0, 1000.0, 4321.0, 8000.0])
    np.testing.assert_allclose(transcribe.mel_to_hz(transcribe.hz_to_mel(f)), f)
    # Triangles of unit area in Hz; sampled every 40 Hz, the narrow ones are off by up to 8%.
    fb = transcribe.mel_filters()
    assert fb.shape == (80, 201) and fb.min() >= 0
    np.testing.assert_allclose(fb.sum(axis=1) * 40.0, 1.0, rtol=0.1)
    assert np.all(np.diff(fb.argmax(axis=1)) >= 0)  # centres ascend

    torch = pytest.importorskip("torch")
    # The framing, window and power spectrum against torch.stft, as Whisper computes them.
    x = torch.from_numpy(samples)
    spec = torch.stft(x, transcribe.N_FFT, transcribe.HOP, window=torch.hann_window(transcribe.N_FFT),
                      return_complex=True)
    power = (spec[:, :-1].abs() ** 2).double().numpy()
    log = np.log10(np.maximum(fb @ power, 1e-10))
    want = (np.maximum(log, log.max() - 8.0) + 4.0) / 4.0
    np.testing.assert_allclose(feats, want, atol=1e-4)


@pytest.mark.parametrize("kv_cache", ["in-place", "feed"])
@pytest.mark.parametrize("mode", MODES)
def test_transcribe_matches_onnxruntime_and_plans_each_length_once(mode, kv_cache):
    model = transcribe.Whisper(MODELS, mode=mode)
    samples = np.load(SAMPLES)
    n = TR["max_new_tokens"]
    assert tuple(TR["prompt"]) == transcribe.PROMPT
    r = transcribe.transcribe(model, samples, max_length=n, eos=None, kv_cache=kv_cache)
    assert r.tokens == TR["tokens"] and not r.stopped_at_eos
    check_cache_use(r.run_stats, kv_cache == "in-place", mode, 4)
    check_compiled_once(model.encoder, 1)
    check_compiled_once(model.decoder, 1)  # the prompt and the cross K/V, once
    check_compiled_once(model.decoder_with_past, n - 1)  # self past 3, 4, ...; audio fixed

    eos = TR["eos"]
    assert eos["token"] not in TR["tokens"][:eos["step"]]
    r = transcribe.transcribe(model, samples, max_length=n, eos=eos["token"], kv_cache=kv_cache)
    assert r.stopped_at_eos and r.tokens == eos["tokens"] and len(r.run_stats) == eos["step"] + 1
    assert not any(s["plan_built"] for s in r.run_stats)
    check_compiled_once(model.decoder_with_past, n - 1)


def test_transcribe_main_prints_tokens(capsys):
    eos = TR["eos"]
    args = ["--models", str(MODELS), "--audio", str(SAMPLES), "--max-length",
            str(TR["max_new_tokens"]), "--eos", str(eos["token"]), "--mode", "eager"]
    assert transcribe.main(args) == 0
    out = capsys.readouterr().out
    assert f"tokens: {' '.join(map(str, eos['tokens']))}\n" in out
    assert f"stopped at the end token {eos['token']}" in out


def test_transcribe_reads_wav(tmp_path):
    import wave
    samples = np.load(SAMPLES)
    pcm = np.clip(np.round(samples * 32768), -32768, 32767).astype("<i2")
    path = tmp_path / "a.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(transcribe.SAMPLE_RATE)
        w.writeframes(pcm.tobytes())
    np.testing.assert_allclose(transcribe.load_audio(str(path)), samples, atol=1 / 32768)
    with pytest.raises(ValueError, match="1-D audio"):
        transcribe.log_mel_spectrogram(samples[:100])
