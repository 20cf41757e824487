#!/usr/bin/env python3
"""Exports the transformer layers ubfuse's ONNX tests run, with PyTorch's reference results.

    /usr/bin/python3 tests/models/export_layers.py [--out tests/models]
    /usr/bin/python3 tests/models/export_layers.py --bench --out build/bench_models

Writes, per layer, <name>.onnx (opset 17, dynamic batch and seq) and <name>.<k>.<input>.npy /
<name>.<k>.out.npy: two sets (k = 0, 1; different batch and seq) of fixed-seed inputs and
PyTorch's outputs for them. The default sizes are small
(hidden 64) so the committed files stay small; --bench writes the decoder at hidden 2048, 16 heads,
MLP 5632 (f32 and bf16) for bench/decoder_bench.py, without references.

Layers:
  llama_decoder: RMSNorm -> q/k/v projections -> rotary embeddings (cos/sin tables gathered by
    position_ids) -> causal softmax attention (mask from position_ids) -> o projection -> residual
    add -> RMSNorm -> SiLU-gated MLP -> residual add. Inputs: hidden_states [b,s,h] f32,
    position_ids [b,s] i64.
  bert_encoder: attention with a padding mask (attention_mask [b,s] i64, 1 = keep) -> residual add
    -> LayerNorm -> GELU MLP -> residual add -> LayerNorm (post-norm, as BERT).
  conv_stem: an audio front end over features [b, 16, frames]: reflect pad -> Conv1d (stride 2)
    -> GroupNorm(1 group) -> GELU -> Conv1d (stride 2) -> GroupNorm(4 groups) -> GELU. PyTorch
    exports GroupNorm as Reshape -> InstanceNormalization -> Reshape -> Mul -> Add. Written alone
    by --conv-stem (the other layers' files stay as they are).
"""
import argparse
import math
import os

import numpy as np
import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden, heads, mlp, max_pos=2048, eps=1e-6):
        super().__init__()
        self.h, self.nh, self.hd = hidden, heads, hidden // heads
        self.input_norm = RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.post_norm = RMSNorm(hidden, eps)
        self.gate_proj = nn.Linear(hidden, mlp, bias=False)
        self.up_proj = nn.Linear(hidden, mlp, bias=False)
        self.down_proj = nn.Linear(mlp, hidden, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        t = torch.arange(max_pos).float()
        emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
        self.register_buffer("cos_cached", emb.cos())
        self.register_buffer("sin_cached", emb.sin())

    def forward(self, hidden_states, position_ids):
        b, s = hidden_states.shape[0], hidden_states.shape[1]
        residual = hidden_states
        x = self.input_norm(hidden_states)
        q = self.q_proj(x).view(b, s, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.nh, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.nh, self.hd).transpose(1, 2)
        cos = self.cos_cached[position_ids].unsqueeze(1).to(q.dtype)  # [b,1,s,hd]
        sin = self.sin_cached[position_ids].unsqueeze(1).to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        # Causal: key position j is hidden from query position i when pos[j] > pos[i].
        causal = position_ids.unsqueeze(1) > position_ids.unsqueeze(2)  # [b,s,s]
        scores = scores.masked_fill(causal.unsqueeze(1), float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        attn = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, self.h)
        hidden_states = residual + self.o_proj(attn)
        residual = hidden_states
        x = self.post_norm(hidden_states)
        x = self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))
        return residual + x


class BertEncoderLayer(nn.Module):
    def __init__(self, hidden, heads, mlp, eps=1e-12):
        super().__init__()
        self.h, self.nh, self.hd = hidden, heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, mlp)
        self.output = nn.Linear(mlp, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)
        self.gelu = nn.GELU()

    def forward(self, hidden_states, attention_mask):
        b, s = hidden_states.shape[0], hidden_states.shape[1]
        q = self.query(hidden_states).view(b, s, self.nh, self.hd).permute(0, 2, 1, 3)
        k = self.key(hidden_states).view(b, s, self.nh, self.hd).permute(0, 2, 1, 3)
        v = self.value(hidden_states).view(b, s, self.nh, self.hd).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
        pad = (attention_mask == 0)[:, None, None, :]  # [b,1,1,s]
        scores = scores.masked_fill(pad, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, s, self.h)
        x = self.attn_norm(self.attn_out(ctx) + hidden_states)
        y = self.output(self.gelu(self.intermediate(x)))
        return self.out_norm(y + x)


class ConvStem(nn.Module):
    def __init__(self, n_mels=16, hidden=32):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, hidden, 3, stride=2, padding=1)
        self.norm1 = nn.GroupNorm(1, hidden)
        self.conv2 = nn.Conv1d(hidden, hidden, 3, stride=2, padding=1)
        self.norm2 = nn.GroupNorm(4, hidden)

    def forward(self, features):
        x = nn.functional.pad(features, (2, 1), mode="reflect")
        x = nn.functional.gelu(self.norm1(self.conv1(x)))
        return nn.functional.gelu(self.norm2(self.conv2(x)))


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 1:  # norm weights near 1
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
    return model


def export(model, args, input_names, output_names, dynamic, path):
    torch.onnx.export(model, args, path, opset_version=17, input_names=input_names,
                      output_names=output_names, dynamic_axes=dynamic, do_constant_folding=True)


def save_npy(out, name, tensor_name, t):
    np.save(os.path.join(out, f"{name}.{tensor_name}.npy"), t.detach().numpy())


def llama(hidden, heads, mlp, dtype=torch.float32, seed=0, max_pos=2048):
    torch.manual_seed(seed)
    m = randomize(LlamaDecoderLayer(hidden, heads, mlp, max_pos), seed).eval().to(dtype)
    return m


def bert(hidden, heads, mlp, seed=1):
    torch.manual_seed(seed)
    return randomize(BertEncoderLayer(hidden, heads, mlp), seed).eval()


DYN = {"batch", "seq"}


def llama_inputs(g, b, s, hidden, offset):
    x = torch.randn(b, s, hidden, generator=g)
    pos = torch.arange(s).unsqueeze(0).repeat(b, 1)
    if b > 1:
        pos[1] += offset  # a second sequence that starts later (as after a prompt)
    return x, pos


def bert_inputs(g, b, s, hidden, pad_from):
    x = torch.randn(b, s, hidden, generator=g)
    mask = torch.ones(b, s, dtype=torch.int64)
    if b > 1:
        mask[1, pad_from:] = 0  # the second sequence is padded
    return x, mask


def write_small(out):
    """Each layer plus two reference sets (different batch and seq) for the dynamic axes."""
    g = torch.Generator().manual_seed(42)
    layers = [
        ("llama_decoder", llama(64, 4, 172, max_pos=64), ["hidden_states", "position_ids"],
         [llama_inputs(g, 2, 7, 64, 3), llama_inputs(g, 1, 11, 64, 0)]),
        ("bert_encoder", bert(64, 4, 256), ["hidden_states", "attention_mask"],
         [bert_inputs(g, 2, 7, 64, 4), bert_inputs(g, 3, 5, 64, 2)]),
    ]
    for name, m, in_names, sets in layers:
        dyn = {n: {0: "batch", 1: "seq"} for n in in_names + ["out"]}
        export(m, sets[0], in_names, ["out"], dyn, os.path.join(out, f"{name}.onnx"))
        for k, args in enumerate(sets):
            with torch.no_grad():
                y = m(*args)
            for n, t in zip(in_names, args):
                save_npy(out, f"{name}.{k}", n, t)
            save_npy(out, f"{name}.{k}", "out", y)


def write_conv_stem(out):
    g = torch.Generator().manual_seed(43)
    torch.manual_seed(2)
    m = ConvStem().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    sets = [(torch.randn(2, 16, 37, generator=g),), (torch.randn(1, 16, 20, generator=g),)]
    dyn = {"features": {0: "batch", 2: "frames"}, "out": {0: "batch", 2: "frames_out"}}
    export(m, sets[0], ["features"], ["out"], dyn, os.path.join(out, "conv_stem.onnx"))
    for k, args in enumerate(sets):
        with torch.no_grad():
            y = m(*args)
        save_npy(out, f"conv_stem.{k}", "features", args[0])
        save_npy(out, f"conv_stem.{k}", "out", y)


def write_bench(out, hidden=2048, heads=16, mlp=5632):
    for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        m = llama(hidden, heads, mlp, dtype)
        x = torch.randn(1, 8, hidden).to(dtype)
        pos = torch.arange(8).unsqueeze(0)
        dyn = {"hidden_states": {0: "batch", 1: "seq"}, "position_ids": {0: "batch", 1: "seq"},
               "out": {0: "batch", 1: "seq"}}
        export(m, (x, pos), ["hidden_states", "position_ids"], ["out"], dyn,
               os.path.join(out, f"llama_decoder_{hidden}_{tag}.onnx"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bench", action="store_true", help="write the benchmark-sized decoder")
    ap.add_argument("--conv-stem", action="store_true", help="write the conv_stem layer only")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.bench:
        write_bench(a.out)
    elif a.conv_stem:
        write_conv_stem(a.out)
    else:
        write_small(a.out)


if __name__ == "__main__":
    main()
