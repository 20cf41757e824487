#!/usr/bin/env python3
"""Speech-to-text of Whisper's shape on ubfuse: audio -> log-mel -> encoder -> greedy decoder.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/transcribe.py \
        --models tests/models --audio tests/models/refs/transcribe/in/samples.npy \
        [--max-length 24] [--eos 156] [--mode eager]

The audio is float32 samples at 16 kHz (a .npy file, or a 16-bit mono .wav at 16 kHz). The
log-mel features are computed here in numpy the way Whisper computes them: 25 ms frames every
10 ms (n_fft 400, hop 160, centred, reflect-padded), periodic Hann window, power spectrum,
80 Slaney mel filters (0 to 8 kHz, area-normalized), log10 clamped at 1e-10, floored at 8 below
the maximum, then (x + 4) / 4.

The models are the three files Optimum exports for Whisper (tests/models/export_whisper.py
makes a small one with random weights): the encoder runs once over the features; the first
decoder call takes the start tokens and the encoder output and returns the self-attention
K/V of the prompt (`present.{i}.decoder.*`) and the cross-attention K/V of the audio
(`present.{i}.encoder.*`), computed this once; each later call takes one token, the self K/V of
the call before and the same cross K/V, and returns the self K/V one row longer. By default
(`--kv-cache in-place`) the self K/V live in a ubfuse.KvCache of prompt + max_length rows: the
first call's rows are appended to it once, and each later call reads it and appends its new row
in place, so no call copies the past; `--kv-cache feed` passes each call's present.*.decoder.*
back as the next past. Greedy: the argmax of the last logits row is the next token; the loop
stops at the end token (included in the result) or after `max_length` tokens.

Only the public API: ubfuse.load_onnx, Model.run, Model.kv_cache, Model.stats.
"""
import argparse
import dataclasses
import os
import sys
import time
import wave

import numpy as np

import ubfuse

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
N_MELS = 80
# Whisper's special tokens in the test model's vocabulary (tests/models/export_whisper.py).
END, START, TRANSCRIBE, NO_TIMESTAMPS = 156, 157, 158, 159
PROMPT = (START, TRANSCRIBE, NO_TIMESTAMPS)
FILES = ("whisper_encoder.onnx", "whisper_decoder.onnx", "whisper_decoder_with_past.onnx")


# ---------------------------------------------------------------------------------------------
# Frontend


def hz_to_mel(f):
    """Slaney's mel scale: linear below 1 kHz (3 mel per 200 Hz), logarithmic above."""
    f = np.asarray(f, dtype=np.float64)
    step = np.log(6.4) / 27.0
    return np.where(f < 1000.0, f * 3.0 / 200.0,
                    15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / step)


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    step = np.log(6.4) / 27.0
    return np.where(m < 15.0, m * 200.0 / 3.0, 1000.0 * np.exp(step * (m - 15.0)))


def mel_filters(n_mels=N_MELS, n_fft=N_FFT, sample_rate=SAMPLE_RATE):
    """[n_mels, n_fft // 2 + 1] triangles evenly spaced in mel from 0 Hz to Nyquist, each scaled
    to unit area in Hz (Slaney normalization) so that wide high bands do not dominate."""
    fft_hz = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - fft_hz[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling))
    return weights * (2.0 / (edges[2:] - edges[:-2]))[:, None]


def log_mel_spectrogram(samples, n_mels=N_MELS):
    """float32 samples at 16 kHz -> float32 [n_mels, len(samples) // HOP] log-mel features."""
    x = np.asarray(samples, dtype=np.float32)
    if x.ndim != 1 or x.size <= N_FFT // 2:
        raise ValueError(f"expected 1-D audio longer than {N_FFT // 2} samples, got shape {x.shape}")
    x = np.pad(x, N_FFT // 2, mode="reflect")  # centred frames, as torch.stft(center=True)
    n_frames = 1 + (x.size - N_FFT) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT)[::HOP][:n_frames]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    spectrum = np.fft.rfft(frames * window, axis=-1)
    power = (spectrum.real ** 2 + spectrum.imag ** 2)[:-1]  # Whisper drops the last frame
    mel = mel_filters(n_mels) @ power.T
    log = np.log10(np.maximum(mel, 1e-10))
    log = np.maximum(log, log.max() - 8.0)  # an 80 dB dynamic range
    return ((log + 4.0) / 4.0).astype(np.float32)


def load_audio(path):
    if path.endswith(".npy"):
        return np.load(path).astype(np.float32)
    with wave.open(path) as w:
        if w.getframerate() != SAMPLE_RATE or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise ValueError(f"{path}: need 16-bit mono at {SAMPLE_RATE} Hz")
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / 32768.0


# ---------------------------------------------------------------------------------------------
# Models and the decoding loop


@dataclasses.dataclass
class Transcription:
    tokens: list          # generated ids after the prompt, the end token included if reached
    stopped_at_eos: bool  # True when the end token ended the loop before max_length
    features: np.ndarray  # the log-mel features the encoder ran on, [n_mels, frames]
    encoder_ms: float
    step_ms: list         # wall time of each decoder call (the first one's includes the cross K/V)
    run_stats: list       # each decoder call's ubfuse RunStats dict


class Whisper:
    def __init__(self, folder_or_paths, mode="graph", options=None):
        paths = folder_or_paths
        if isinstance(paths, (str, os.PathLike)):
            paths = [os.path.join(paths, f) for f in FILES]
        self.encoder, self.decoder, self.decoder_with_past = (
            ubfuse.load_onnx(p, mode=mode, options=options) for p in paths)
        self.self_past = [i["name"] for i in self.decoder_with_past.inputs
                          if i["name"].startswith("past_key_values.") and ".decoder." in i["name"]]
        self.cross_past = [i["name"] for i in self.decoder_with_past.inputs
                           if i["name"].startswith("past_key_values.") and ".encoder." in i["name"]]


def present_of(past_name):
    return "present." + past_name[len("past_key_values."):]


def transcribe(model, samples, max_length=24, eos=END, prompt=PROMPT, kv_cache="in-place"):
    """Greedy decoding of one utterance; returns a Transcription. kv_cache: "in-place" keeps the
    self-attention K/V in a ubfuse.KvCache, "feed" passes each call's present back."""
    if kv_cache not in ("in-place", "feed"):
        raise ValueError(f"kv_cache is 'in-place' or 'feed', not {kv_cache!r}")
    features = log_mel_spectrogram(samples)
    t0 = time.perf_counter()
    hidden = model.encoder.run({"input_features": features[None]})["last_hidden_state"]
    encoder_ms = (time.perf_counter() - t0) * 1e3

    tokens, step_ms, run_stats = [], [], []
    ids = np.asarray(prompt, dtype=np.int64).reshape(1, -1)
    cross = None
    out = None
    cache = None
    while len(tokens) < max_length:
        stats = {}
        t0 = time.perf_counter()
        if out is None:
            out = model.decoder.run({"input_ids": ids, "encoder_hidden_states": hidden},
                                    stats=stats)
            # The cross-attention K/V depend on the audio only: kept for every later call.
            cross = {n: out[present_of(n)] for n in model.cross_past}
            if kv_cache == "in-place":
                cache = model.decoder_with_past.kv_cache(ids.shape[1] + max_length,
                                                         dims={"batch_size": 1})
                cache.append(out)  # the prompt's self K/V; the cross K/V stay inputs
        elif cache is not None:
            out = model.decoder_with_past.run({"input_ids": ids, **cross}, stats=stats,
                                              kv_cache=cache)
        else:
            feed = {"input_ids": ids, **cross}
            for n in model.self_past:
                feed[n] = out[present_of(n)]
            out = model.decoder_with_past.run(feed, stats=stats)
        step_ms.append((time.perf_counter() - t0) * 1e3)
        run_stats.append(stats)
        token = int(np.argmax(out["logits"][0, -1]))
        tokens.append(token)
        if eos is not None and token == eos:
            return Transcription(tokens, True, features, encoder_ms, step_ms, run_stats)
        ids = np.array([[token]], dtype=np.int64)
    return Transcription(tokens, False, features, encoder_ms, step_ms, run_stats)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--models", default="tests/models", help="folder with the three .onnx files")
    ap.add_argument("--audio", required=True, help=".npy float32 samples or 16-bit .wav, 16 kHz")
    ap.add_argument("--max-length", type=int, default=24, help="most tokens to generate")
    ap.add_argument("--eos", type=int, default=END, help=f"end token id (default {END})")
    ap.add_argument("--mode", choices=("graph", "eager"), default="graph")
    ap.add_argument("--threads", type=int, help="ubfuse's num_threads option")
    ap.add_argument("--kv-cache", choices=("in-place", "feed"), default="in-place",
                    help="keep the self K/V in a ubfuse.KvCache, or feed present.* back")
    a = ap.parse_args(argv)
    options = {"num_threads": a.threads} if a.threads else None
    t0 = time.perf_counter()
    model = Whisper(a.models, mode=a.mode, options=options)
    print(f"loaded and compiled in {(time.perf_counter() - t0) * 1e3:.0f} ms ({a.mode} mode)")
    samples = load_audio(a.audio)
    r = transcribe(model, samples, a.max_length, a.eos, kv_cache=a.kv_cache)
    print(f"{len(samples) / SAMPLE_RATE:.2f} s of audio -> features {list(r.features.shape)}, "
          f"encoder {r.encoder_ms:.3f} ms")
    print(f"{'step':>4} {'token':>6} {'ms':>8} {'plan us':>8} {'kernels us':>10}")
    for i, (tok, ms, st) in enumerate(zip(r.tokens, r.step_ms, r.run_stats)):
        print(f"{i:>4} {tok:>6} {ms:>8.3f} {st['plan_us']:>8.1f} {st['kernels_us']:>10.1f}")
    print("tokens:", " ".join(map(str, r.tokens)))
    print(f"stopped at the end token {a.eos}" if r.stopped_at_eos else
          f"stopped at the maximum length {a.max_length}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
