#!/usr/bin/env python3
"""Exports a small encoder-decoder speech model of Whisper's shape, in the three files Optimum
ships for Whisper, for examples/python/transcribe.py and its test.

    /usr/bin/python3 tests/models/export_whisper.py [--out DIR] [--check-deterministic]

Random weights (fixed seed), opset 17, Debian's torch 1.13; every batch and length axis dynamic.

  whisper_encoder.onnx          input_features [batch, 80, frames] (log-mel) -> last_hidden_state
                                [batch, encoder_frames, 64]: Conv1d(80->64, k3) -> GELU ->
                                Conv1d(64->64, k3, stride 2) -> GELU, plus fixed sinusoidal
                                positions sliced to the run-time length, 2 pre-norm layers
                                (2 heads of 32, GELU MLP), final LayerNorm.
  whisper_decoder.onnx          the first decoder call: input_ids [batch, seq],
                                encoder_hidden_states -> logits [batch, seq, 160],
                                present.{i}.decoder.{key,value} (self-attention K/V of the prompt)
                                and present.{i}.encoder.{key,value} (cross-attention K/V of the
                                encoder output, computed once here).
  whisper_decoder_with_past.onnx  every later call: input_ids, past_key_values.{i}.decoder.* and
                                past_key_values.{i}.encoder.* -> logits and
                                present.{i}.decoder.* (past + new rows); the cross K/V pass
                                through unchanged, so the loop keeps the first call's.

The decoder is Whisper's: token embedding plus a learned position table sliced at
[past, past + seq) (past from the cached key's shape), pre-norm layers of causal self-attention,
cross-attention and a GELU MLP, final LayerNorm, then the output projection `proj_out` to the
logits. (Whisper ties proj_out to the token embedding; with random weights a tied head makes
every step repeat its input token, so here it is a weight of its own.)
Tokens 156..159 play Whisper's specials: 156 end of text, 157 start of transcript, 158
transcribe, 159 no timestamps.
"""
import argparse
import filecmp
import math
import os
import re
import sys
import tempfile
import warnings

import onnx
import torch
from torch import nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17
SEED = 21
CONFIG = dict(n_mels=80, hidden=64, heads=2, encoder_layers=2, decoder_layers=2, mlp=256,
              vocab=160, max_source_positions=1500, max_target_positions=448)
SPECIALS = {"end": 156, "start": 157, "transcribe": 158, "no_timestamps": 159}
FILES = ("whisper_encoder.onnx", "whisper_decoder.onnx", "whisper_decoder_with_past.onnx")


def sinusoids(length, channels, max_timescale=10000):
    """Whisper's fixed encoder positions: sin on the first half of the channels, cos on the rest."""
    inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class Attention(nn.Module):
    """Whisper's attention: the key projection has no bias."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.nh, self.hd = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden, bias=False)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def heads(self, x):
        return x.view(x.shape[0], x.shape[1], self.nh, self.hd).transpose(1, 2)

    def kv(self, x):
        return self.heads(self.key(x)), self.heads(self.value(x))

    def forward(self, x, k, v, bias=None):
        q = self.heads(self.query(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
        if bias is not None:
            s = s + bias
        a = torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2)
        return self.out(a.reshape(x.shape[0], x.shape[1], self.nh * self.hd))


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, mlp):
        super().__init__()
        self.attn_ln = nn.LayerNorm(hidden)
        self.attn = Attention(hidden, heads)
        self.mlp_ln = nn.LayerNorm(hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, mlp), nn.Linear(mlp, hidden)

    def forward(self, x):
        h = self.attn_ln(x)
        k, v = self.attn.kv(h)
        x = x + self.attn(h, k, v)
        return x + self.fc2(F.gelu(self.fc1(self.mlp_ln(x))))


class Encoder(nn.Module):
    def __init__(self, n_mels, hidden, heads, encoder_layers, mlp, max_source_positions, **_):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, hidden, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(hidden, hidden, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positions", sinusoids(max_source_positions, hidden))
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, mlp) for _ in range(encoder_layers))
        self.ln_post = nn.LayerNorm(hidden)

    def forward(self, input_features):
        x = F.gelu(self.conv1(input_features))
        x = F.gelu(self.conv2(x)).transpose(1, 2)  # [batch, frames / 2, hidden]
        # Whisper fixes 1500 frames (30 s); here the table is sliced to the run-time length.
        x = x + self.positions[: x.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.ln_post(x)


class DecoderLayer(nn.Module):
    def __init__(self, hidden, heads, mlp):
        super().__init__()
        self.self_ln, self.self_attn = nn.LayerNorm(hidden), Attention(hidden, heads)
        self.cross_ln, self.cross_attn = nn.LayerNorm(hidden), Attention(hidden, heads)
        self.mlp_ln = nn.LayerNorm(hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, mlp), nn.Linear(mlp, hidden)

    def forward(self, x, bias, past_k, past_v, cross_k, cross_v):
        """Returns the new hidden states and the self-attention K/V including the new rows."""
        h = self.self_ln(x)
        k, v = self.self_attn.kv(h)
        if past_k is not None:
            k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        x = x + self.self_attn(h, k, v, bias)
        x = x + self.cross_attn(self.cross_ln(x), cross_k, cross_v)
        return x + self.fc2(F.gelu(self.fc1(self.mlp_ln(x)))), k, v


class Decoder(nn.Module):
    def __init__(self, hidden, heads, decoder_layers, mlp, vocab, max_target_positions, **_):
        super().__init__()
        self.n_layers = decoder_layers
        self.token_embedding = nn.Embedding(vocab, hidden)
        self.positions = nn.Parameter(torch.zeros(max_target_positions, hidden))
        self.layers = nn.ModuleList(DecoderLayer(hidden, heads, mlp) for _ in range(decoder_layers))
        self.ln = nn.LayerNorm(hidden)
        self.proj_out = nn.Linear(hidden, vocab, bias=False)

    def cross_kv(self, encoder_hidden_states):
        return [layer.cross_attn.kv(encoder_hidden_states) for layer in self.layers]

    def forward(self, input_ids, self_past, cross):
        """self_past: [(k, v)] per layer or None; cross: [(k, v)] per layer."""
        seq = input_ids.shape[1]
        past = self_past[0][0].shape[2] if self_past else 0
        x = self.token_embedding(input_ids) + self.positions[past: past + seq]
        # Causal: the query at position p sees keys 0..p (a chunk of several new tokens works too).
        q_pos = torch.arange(past, past + seq)
        k_pos = torch.arange(past + seq)
        hidden = k_pos[None, :] > q_pos[:, None]
        bias = torch.zeros(hidden.shape).masked_fill(hidden, torch.finfo(torch.float32).min)
        presents = []
        for i, layer in enumerate(self.layers):
            pk, pv = self_past[i] if self_past else (None, None)
            x, k, v = layer(x, bias, pk, pv, *cross[i])
            presents += [k, v]
        return self.proj_out(self.ln(x)), presents


def self_names(prefix, n):
    return [f"{prefix}.{i}.decoder.{t}" for i in range(n) for t in ("key", "value")]


def cross_names(prefix, n):
    return [f"{prefix}.{i}.encoder.{t}" for i in range(n) for t in ("key", "value")]


class DecoderInit(nn.Module):
    """The first call: computes the cross K/V once and returns them with the prompt's self K/V."""

    def __init__(self, dec):
        super().__init__()
        self.dec = dec

    def forward(self, input_ids, encoder_hidden_states):
        cross = self.dec.cross_kv(encoder_hidden_states)
        logits, presents = self.dec(input_ids, None, cross)
        return (logits, *presents, *[t for kv in cross for t in kv])


class DecoderWithPast(nn.Module):
    def __init__(self, dec):
        super().__init__()
        self.dec = dec

    def forward(self, input_ids, *past):
        n = self.dec.n_layers
        self_past = [(past[2 * i], past[2 * i + 1]) for i in range(n)]
        cross = [(past[2 * n + 2 * i], past[2 * n + 2 * i + 1]) for i in range(n)]
        logits, presents = self.dec(input_ids, self_past, cross)
        return (logits, *presents)


def randomize(module, seed):
    """Fixed-seed weights that keep activations O(1): fan-in scaled projections and convs, norms
    near identity, N(0, 1) token embeddings. Two choices keep greedy decoding from settling on
    one token whatever the audio: a decoder position table of std 2 (each step's position moves
    the hidden state), and cross-attention query/key weights at 6x the fan-in scale, so that
    attention picks out frames of the audio instead of averaging them all alike."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mname, m in module.named_modules():
            for pname, p in m.named_parameters(recurse=False):
                r = torch.randn(p.shape, generator=g)
                if isinstance(m, nn.LayerNorm):
                    p.copy_((1.0 if pname == "weight" else 0.0) + 0.1 * r)
                elif isinstance(m, nn.Embedding):
                    p.copy_(r)
                elif pname == "positions":  # the decoder's learned position table
                    p.copy_(2.0 * r)
                elif re.search(r"cross_attn\.(query|key)$", mname) and pname == "weight":
                    p.copy_(6.0 * r / math.sqrt(p[0].numel()))
                elif pname == "bias":
                    p.copy_(0.1 * r)
                else:
                    p.copy_(r / math.sqrt(p[0].numel()))
    return module


def build():
    torch.manual_seed(SEED)
    enc = randomize(Encoder(**CONFIG), SEED).eval()
    dec = randomize(Decoder(**CONFIG), SEED + 1).eval()
    return enc, dec


def export(module, args, path, input_names, output_names, dynamic_axes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings about Python ints in shapes
        torch.onnx.export(module, args, path, opset_version=OPSET, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes,
                          do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))


def export_all(out):
    enc, dec = build()
    n = dec.n_layers
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(2, CONFIG["n_mels"], 37, generator=g)  # odd length: 37 -> 19 frames
    export(enc, (feats,), os.path.join(out, FILES[0]), ["input_features"], ["last_hidden_state"],
           {"input_features": {0: "batch_size", 2: "feature_frames"},
            "last_hidden_state": {0: "batch_size", 1: "encoder_sequence_length"}})

    with torch.no_grad():
        hidden = enc(feats)
    ids = torch.randint(0, CONFIG["vocab"], (2, 3), generator=g)
    dyn = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
           "encoder_hidden_states": {0: "batch_size", 1: "encoder_sequence_length"},
           "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    for name in self_names("present", n):
        dyn[name] = {0: "batch_size", 2: "decoder_sequence_length"}
    for name in cross_names("present", n):
        dyn[name] = {0: "batch_size", 2: "encoder_sequence_length"}
    export(DecoderInit(dec), (ids, hidden), os.path.join(out, FILES[1]),
           ["input_ids", "encoder_hidden_states"],
           ["logits"] + self_names("present", n) + cross_names("present", n), dyn)

    with torch.no_grad():
        first = DecoderInit(dec)(ids, hidden)
    past = list(first[1:])  # self K/V of 3 tokens, then cross K/V
    step = torch.randint(0, CONFIG["vocab"], (2, 2), generator=g)  # 2 new tokens: not fixed at 1
    dyn = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
           "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    for name in self_names("past_key_values", n):
        dyn[name] = {0: "batch_size", 2: "past_decoder_sequence_length"}
    for name in cross_names("past_key_values", n):
        dyn[name] = {0: "batch_size", 2: "encoder_sequence_length"}
    for name in self_names("present", n):
        dyn[name] = {0: "batch_size", 2: "past_decoder_sequence_length + decoder_sequence_length"}
    export(DecoderWithPast(dec), (step, *past), os.path.join(out, FILES[2]),
           ["input_ids"] + self_names("past_key_values", n) + cross_names("past_key_values", n),
           ["logits"] + self_names("present", n), dyn)

    # The cached path must equal running the decoder over the whole sequence at once.
    with torch.no_grad():
        full = DecoderInit(dec)(torch.cat((ids, step), dim=1), hidden)[0][:, -2:]
        cached = DecoderWithPast(dec)(step, *past)[0]
    assert torch.allclose(full, cached, atol=1e-4), (full - cached).abs().max()
    return enc, dec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", default=HERE, help="output folder (default: tests/models)")
    ap.add_argument("--check-deterministic", action="store_true",
                    help="export twice into temporary folders and compare the bytes")
    a = ap.parse_args()
    torch.set_num_threads(2)
    if a.check_deterministic:
        with tempfile.TemporaryDirectory() as x, tempfile.TemporaryDirectory() as y:
            export_all(x)
            export_all(y)
            same = [filecmp.cmp(os.path.join(x, f), os.path.join(y, f), shallow=False) for f in FILES]
            for f, s in zip(FILES, same):
                print(f"{f}: {'identical bytes' if s else 'DIFFERENT'} in two exports")
            sys.exit(0 if all(same) else 1)
    os.makedirs(a.out, exist_ok=True)
    export_all(a.out)
    for f in FILES:
        print(f"{f}: {os.path.getsize(os.path.join(a.out, f)) / 1e6:.2f} MB", file=sys.stderr)


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    main()
