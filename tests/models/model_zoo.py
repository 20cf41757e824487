"""PyTorch definitions of the whole-model architectures ubfuse is tested and benchmarked on.

Random weights, written the way the public implementations write them, so that torch.onnx.export
(Debian's torch 1.13, opset 17) emits the graphs users ship: run-time shapes from Shape/Gather,
rotary cos/sin computed in the graph from Range over the run-time length, causal masks from
Range comparisons or Trilu, GroupNorm as InstanceNormalization, grouped-query K/V by Expand.
Sizes come from CONFIGS: "test" (small, committed under tests/models/) and "bench" (the sizes of
`make bench-models`). Used by export_models.py.

  speech_encoder  Conv1d(80->h, k3, s2) -> GroupNorm(1 group) -> GELU -> Conv1d(h->h, k3, s2) ->
                  GELU over [batch, n_mels=80, frames]; pre-norm transformer layers whose attention
                  uses interleaved (GPT-J: even/odd lanes) rotary on the first `rotary_dims` of each
                  head's dims (the rest pass through), cos/sin from arange(frames') in the graph;
                  GELU MLP; final LayerNorm.
  kv_decoder      LLaMA-style decoder with input_ids, past_key_values.{i}.{key,value} inputs and
                  logits, present.{i}.{key,value} outputs; positions arange(past, past + seq) with
                  past from the past key's shape; rotate_half rotary from inv_freq @ positions;
                  causal mask by comparing key and query positions; grouped-query K/V; SwiGLU MLP.
  llama_stack     LLaMA-style layer stack over hidden_states [batch, seq, hidden]: RMSNorm,
                  rotate_half rotary with cos/sin from arange(seq), causal mask from Trilu,
                  grouped-query K/V, SwiGLU.
  bert_stack      BERT-style encoder from input_ids and attention_mask [batch, seq]: word +
                  position embeddings, post-norm layers, padding mask (1 - mask) * min, GELU (erf).
  vit_encoder     ViT-style encoder over pixel_values [batch, 3, H, W]: Conv2d patch embedding,
                  class token, learned position embeddings sliced to the run-time patch count,
                  pre-norm layers with GELU, final LayerNorm.
  rnn_stack       Recurrent layers over features [batch, frames, n_in] as torch exports them: a
                  2-layer bidirectional LSTM (batch first), a bidirectional GRU (ONNX's
                  linear_before_reset = 1) and a Relu RNN, their initial states from the batch
                  size (ConstantOfShape).
  video_encoder   VideoMAE-style encoder over pixel_values [batch, 3, frames, H, W]: Conv3d tubelet
                  embedding (2 frames of patch x patch pixels each), learned position embeddings
                  sliced to the run-time tubelet count, the ViT layers, final LayerNorm.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

# hidden/heads give the head size; kv_heads < heads is grouped-query attention.
CONFIGS = {
    "test": {
        "speech_encoder": dict(n_mels=80, hidden=144, heads=4, layers=2, mlp=288, rotary_dims=32),
        "kv_decoder": dict(vocab=256, hidden=64, heads=4, kv_heads=2, layers=2, mlp=172),
        "llama_stack": dict(hidden=64, heads=4, kv_heads=2, layers=2, mlp=172),
        "bert_stack": dict(vocab=128, max_pos=128, hidden=64, heads=4, layers=2, mlp=256),
        "vit_encoder": dict(patch=8, max_patches=64, hidden=64, heads=4, layers=2, mlp=256),
        "video_encoder": dict(tubelet=2, patch=8, max_patches=96, hidden=64, heads=4, layers=2,
                              mlp=256),
        "rnn_stack": dict(n_in=16, hidden=32, n_out=16),
    },
    "bench": {
        # The speech encoder at the size of the pretrained model in issue 26: 8 heads of 36,
        # interleaved rotary on 32 of each head's 36 dims.
        "speech_encoder": dict(n_mels=80, hidden=288, heads=8, layers=6, mlp=1152, rotary_dims=32),
        "kv_decoder": dict(vocab=8192, hidden=1024, heads=16, kv_heads=4, layers=4, mlp=2816),
        "llama_stack": dict(hidden=1024, heads=16, kv_heads=4, layers=4, mlp=2816),
        "bert_stack": dict(vocab=8192, max_pos=2048, hidden=768, heads=12, layers=4, mlp=3072),
        "vit_encoder": dict(patch=16, max_patches=2048, hidden=768, heads=12, layers=4, mlp=3072),
        "video_encoder": dict(tubelet=2, patch=16, max_patches=2048, hidden=768, heads=12,
                              layers=4, mlp=3072),
        "rnn_stack": dict(n_in=80, hidden=256, n_out=128),
    },
}


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def rotate_every_two(x):
    """GPT-J's rotation: lanes (2i, 2i+1) -> (-x[2i+1], x[2i])."""
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def repeat_kv(x, n_rep):
    """[b, kv_heads, s, d] -> [b, kv_heads * n_rep, s, d], as LLaMA's reference code does."""
    if n_rep == 1:
        return x
    b, kvh, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kvh, n_rep, s, d).reshape(b, kvh * n_rep, s, d)


def attention(q, k, v, bias=None):
    """q [b, h, s, d], k/v [b, h, t, d]; bias broadcasts to [b, h, s, t]."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    return torch.matmul(torch.softmax(scores, dim=-1), v)


# ---------------------------------------------------------------------------------------------
# Speech encoder


class SpeechLayer(nn.Module):
    def __init__(self, hidden, heads, mlp, rotary_dims):
        super().__init__()
        self.nh, self.hd, self.rot = heads, hidden // heads, rotary_dims
        self.attn_norm = nn.LayerNorm(hidden)
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.o_proj = nn.Linear(hidden, hidden)
        self.mlp_norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, mlp)
        self.fc2 = nn.Linear(mlp, hidden)

    def rotary(self, x, cos, sin):
        # Partial: the first `rot` dims rotate, the rest pass through.
        xr, xp = x[..., :self.rot], x[..., self.rot:]
        xr = xr * cos + rotate_every_two(xr) * sin
        return torch.cat((xr, xp), dim=-1)

    def forward(self, x, cos, sin):
        b, s = x.shape[0], x.shape[1]
        h = self.attn_norm(x)
        q = self.q_proj(h).view(b, s, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(b, s, self.nh, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(b, s, self.nh, self.hd).transpose(1, 2)
        q, k = self.rotary(q, cos, sin), self.rotary(k, cos, sin)
        a = attention(q, k, v).transpose(1, 2).reshape(b, s, self.nh * self.hd)
        x = x + self.o_proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.mlp_norm(x))))


class SpeechEncoder(nn.Module):
    input_names = ["input_features"]
    output_names = ["last_hidden_state"]
    dynamic_axes = {"input_features": {0: "batch", 2: "frames"},
                    "last_hidden_state": {0: "batch", 1: "encoder_frames"}}

    def __init__(self, n_mels, hidden, heads, layers, mlp, rotary_dims, base=10000.0):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, hidden, kernel_size=3, stride=2, padding=1)
        self.conv_norm = nn.GroupNorm(1, hidden)
        self.conv2 = nn.Conv1d(hidden, hidden, kernel_size=3, stride=2, padding=1)
        self.layers = nn.ModuleList(
            SpeechLayer(hidden, heads, mlp, rotary_dims) for _ in range(layers))
        self.final_norm = nn.LayerNorm(hidden)
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dims, 2).float() / rotary_dims))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_features):
        x = F.gelu(self.conv_norm(self.conv1(input_features)))
        x = F.gelu(self.conv2(x)).transpose(1, 2)  # [b, frames', hidden]
        # cos/sin in the graph: arange over the run-time length, outer product with inv_freq,
        # each frequency repeated for its even/odd lane pair (interleaved layout).
        pos = torch.arange(x.shape[1], dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        freqs = torch.stack((freqs, freqs), dim=-1).flatten(-2)  # [frames', rotary_dims]
        cos, sin = freqs.cos(), freqs.sin()
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.final_norm(x)

    def example_inputs(self, g, batch, frames):
        return (torch.randn(batch, self.conv1.in_channels, frames, generator=g),)


# ---------------------------------------------------------------------------------------------
# LLaMA-style layers (shared by kv_decoder and llama_stack)


class LlamaLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, mlp, eps=1e-6):
        super().__init__()
        self.nh, self.kvh, self.hd = heads, kv_heads, hidden // heads
        self.input_norm = RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(hidden, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, hidden, bias=False)
        self.post_norm = RMSNorm(hidden, eps)
        self.gate_proj = nn.Linear(hidden, mlp, bias=False)
        self.up_proj = nn.Linear(hidden, mlp, bias=False)
        self.down_proj = nn.Linear(mlp, hidden, bias=False)

    def forward(self, x, cos, sin, bias, past_k=None, past_v=None):
        """Returns the new hidden states and this layer's K/V (past + new, before repeat_kv)."""
        b, s = x.shape[0], x.shape[1]
        h = self.input_norm(x)
        q = self.q_proj(h).view(b, s, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(b, s, self.kvh, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_k is not None:
            k = torch.cat((past_k, k), dim=2)
            v = torch.cat((past_v, v), dim=2)
        rep = self.nh // self.kvh
        a = attention(q, repeat_kv(k, rep), repeat_kv(v, rep), bias)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, self.nh * self.hd))
        h = self.post_norm(x)
        x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return x, k, v


def rope_inv_freq(head_dim, base=10000.0):
    return 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))


class KVDecoder(nn.Module):
    """One module, two exports: without past (decoder) and with past (decoder_with_past)."""

    def __init__(self, vocab, hidden, heads, kv_heads, layers, mlp):
        super().__init__()
        self.n_layers, self.kvh, self.hd = layers, kv_heads, hidden // heads
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, kv_heads, mlp) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.register_buffer("inv_freq", rope_inv_freq(self.hd), persistent=False)

    def past_names(self):
        return [f"past_key_values.{i}.{t}" for i in range(self.n_layers) for t in ("key", "value")]

    def present_names(self):
        return [f"present.{i}.{t}" for i in range(self.n_layers) for t in ("key", "value")]

    def io(self, with_past):
        """(input names, output names, dynamic axes) of one of the two exports."""
        ins = ["input_ids"] + (self.past_names() if with_past else [])
        outs = ["logits"] + self.present_names()
        dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
               "logits": {0: "batch_size", 1: "sequence_length"}}
        for n in self.past_names():
            dyn[n] = {0: "batch_size", 2: "past_sequence_length"}
        # Optimum's names for the present length; merge_decoder.py gives both branches the
        # with-past ones.
        present_len = "past_sequence_length + 1" if with_past else "sequence_length"
        for n in self.present_names():
            dyn[n] = {0: "batch_size", 2: present_len}
        return ins, outs, dyn

    def forward(self, input_ids, *past):
        b, s = input_ids.shape[0], input_ids.shape[1]
        past_len = past[0].shape[2] if past else 0
        pos = torch.arange(past_len, past_len + s)  # Shape -> Gather -> Range in the export
        freqs = torch.matmul(self.inv_freq[:, None], pos[None, :].float()).transpose(0, 1)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        # Query at position p sees keys 0..p.
        key_pos = torch.arange(past_len + s)
        hidden_mask = key_pos[None, :] > pos[:, None]  # [s, past + s]
        bias = torch.zeros(hidden_mask.shape).masked_fill(hidden_mask, torch.finfo(torch.float32).min)
        x = self.embed(input_ids)
        present = []
        for i, layer in enumerate(self.layers):
            pk, pv = (past[2 * i], past[2 * i + 1]) if past else (None, None)
            x, k, v = layer(x, cos, sin, bias, pk, pv)
            present += [k, v]
        return (self.lm_head(self.norm(x)), *present)

    def example_inputs(self, g, batch, seq, past_len=None):
        ids = torch.randint(0, self.embed.num_embeddings, (batch, seq), generator=g)
        if past_len is None:
            return (ids,)
        past = [torch.randn(batch, self.kvh, past_len, self.hd, generator=g)
                for _ in range(2 * self.n_layers)]
        return (ids, *past)


class LlamaStack(nn.Module):
    input_names = ["hidden_states"]
    output_names = ["last_hidden_state"]
    dynamic_axes = {"hidden_states": {0: "batch", 1: "seq"},
                    "last_hidden_state": {0: "batch", 1: "seq"}}

    def __init__(self, hidden, heads, kv_heads, layers, mlp):
        super().__init__()
        self.hidden = hidden
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, kv_heads, mlp) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.register_buffer("inv_freq", rope_inv_freq(hidden // heads), persistent=False)

    def forward(self, hidden_states):
        s = hidden_states.shape[1]
        pos = torch.arange(s, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        # The causal mask as many exports write it: a [s, s] fill, upper triangle kept (Trilu).
        bias = torch.full((s, s), torch.finfo(torch.float32).min).triu(1)
        x = hidden_states
        for layer in self.layers:
            x = layer(x, cos, sin, bias)[0]
        return self.norm(x)

    def example_inputs(self, g, batch, seq):
        return (torch.randn(batch, seq, self.hidden, generator=g),)


# ---------------------------------------------------------------------------------------------
# BERT and ViT encoders


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, mlp, eps=1e-12):
        super().__init__()
        self.nh, self.hd = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, mlp)
        self.output = nn.Linear(mlp, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x, bias):
        b, s = x.shape[0], x.shape[1]
        q = self.query(x).view(b, s, self.nh, self.hd).permute(0, 2, 1, 3)
        k = self.key(x).view(b, s, self.nh, self.hd).permute(0, 2, 1, 3)
        v = self.value(x).view(b, s, self.nh, self.hd).permute(0, 2, 1, 3)
        ctx = attention(q, k, v, bias).permute(0, 2, 1, 3).reshape(b, s, self.nh * self.hd)
        x = self.attn_norm(self.attn_out(ctx) + x)
        return self.out_norm(self.output(F.gelu(self.intermediate(x))) + x)


class BertEncoder(nn.Module):
    input_names = ["input_ids", "attention_mask"]
    output_names = ["last_hidden_state"]
    dynamic_axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                    "last_hidden_state": {0: "batch", 1: "seq"}}

    def __init__(self, vocab, max_pos, hidden, heads, layers, mlp):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_pos, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, mlp) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.shape[1])
        x = self.emb_norm(self.word(input_ids) + self.position(pos)[None])
        # HF's extended mask: 0 where kept, the dtype's minimum where padded.
        bias = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, bias)
        return x

    def example_inputs(self, g, batch, seq):
        ids = torch.randint(0, self.word.num_embeddings, (batch, seq), generator=g)
        mask = torch.ones(batch, seq, dtype=torch.int64)
        for i in range(1, batch):  # later sequences padded at the end, shorter each
            mask[i, max(1, seq - 3 * i):] = 0
        return ids, mask


class VitLayer(nn.Module):
    def __init__(self, hidden, heads, mlp):
        super().__init__()
        self.nh, self.hd = heads, hidden // heads
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, mlp)
        self.fc2 = nn.Linear(mlp, hidden)

    def forward(self, x):
        b, s = x.shape[0], x.shape[1]
        # timm's layout: one qkv projection, split by a reshape and a permute.
        qkv = self.qkv(self.norm1(x)).reshape(b, s, 3, self.nh, self.hd).permute(2, 0, 3, 1, 4)
        a = attention(qkv[0], qkv[1], qkv[2]).transpose(1, 2).reshape(b, s, self.nh * self.hd)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class VitEncoder(nn.Module):
    input_names = ["pixel_values"]
    output_names = ["last_hidden_state"]
    dynamic_axes = {"pixel_values": {0: "batch", 2: "height", 3: "width"},
                    "last_hidden_state": {0: "batch", 1: "tokens"}}

    def __init__(self, patch, max_patches, hidden, heads, layers, mlp):
        super().__init__()
        self.patch = patch
        self.patch_embed = nn.Conv2d(3, hidden, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.pos_embed = nn.Parameter(torch.zeros(1, max_patches + 1, hidden))
        self.layers = nn.ModuleList(VitLayer(hidden, heads, mlp) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, pixel_values):
        x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)  # [b, patches, hidden]
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1)
        x = x + self.pos_embed[:, :x.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)

    def example_inputs(self, g, batch, height, width):
        return (torch.randn(batch, 3, height, width, generator=g),)


class VideoEncoder(nn.Module):
    input_names = ["pixel_values"]
    output_names = ["last_hidden_state"]
    dynamic_axes = {"pixel_values": {0: "batch", 2: "frames", 3: "height", 4: "width"},
                    "last_hidden_state": {0: "batch", 1: "tubelets"}}

    def __init__(self, tubelet, patch, max_patches, hidden, heads, layers, mlp):
        super().__init__()
        self.tubelet, self.patch = tubelet, patch
        self.patch_embed = nn.Conv3d(3, hidden, kernel_size=(tubelet, patch, patch),
                                     stride=(tubelet, patch, patch))
        self.pos_embed = nn.Parameter(torch.zeros(1, max_patches, hidden))
        self.layers = nn.ModuleList(VitLayer(hidden, heads, mlp) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, pixel_values):
        x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)  # [b, tubelets, hidden]
        x = x + self.pos_embed[:, :x.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)

    def example_inputs(self, g, batch, frames, height, width):
        return (torch.randn(batch, 3, frames, height, width, generator=g),)


class RnnStack(nn.Module):
    input_names = ["features"]
    output_names = ["out", "gru_state"]
    dynamic_axes = {"features": {0: "batch", 1: "frames"}, "out": {0: "frames", 1: "batch"},
                    "gru_state": {1: "batch"}}

    def __init__(self, n_in, hidden, n_out):
        super().__init__()
        self.lstm = nn.LSTM(n_in, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(2 * hidden, hidden, bidirectional=True)
        self.rnn = nn.RNN(2 * hidden, n_out, nonlinearity="relu")

    def forward(self, features):
        y, _ = self.lstm(features)         # [batch, frames, 2 hidden]
        y, h = self.gru(y.transpose(0, 1))  # [frames, batch, 2 hidden], [2, batch, hidden]
        out, _ = self.rnn(y)                # [frames, batch, n_out]
        return out, h

    def example_inputs(self, g, batch, frames):
        return (torch.randn(batch, frames, self.lstm.input_size, generator=g),)


# ---------------------------------------------------------------------------------------------


def randomize(model, seed):
    """Fixed-seed weights at a scale that keeps activations O(1) through the layers."""
    g = torch.Generator().manual_seed(seed)
    norms = (nn.LayerNorm, nn.GroupNorm, RMSNorm)
    with torch.no_grad():
        for mname, m in model.named_modules():
            for pname, p in m.named_parameters(recurse=False):
                r = torch.randn(p.shape, generator=g)
                if isinstance(m, norms):  # scale near 1, shift near 0
                    p.copy_((1.0 if pname == "weight" else 0.0) + 0.1 * r)
                elif isinstance(m, nn.Embedding) or p.dim() == 3:  # tables, cls/pos embeddings
                    p.copy_(r)
                elif pname.startswith("bias"):  # Linear/Conv bias, LSTM bias_ih_l0, ...
                    p.copy_(0.1 * r)
                else:  # Linear and Conv weights: scaled by fan-in
                    p.copy_(r / math.sqrt(p[0].numel()))
    return model


BUILDERS = {
    "speech_encoder": SpeechEncoder,
    "kv_decoder": KVDecoder,
    "llama_stack": LlamaStack,
    "bert_stack": BertEncoder,
    "vit_encoder": VitEncoder,
    "video_encoder": VideoEncoder,
    "rnn_stack": RnnStack,
}
SEEDS = {"speech_encoder": 11, "kv_decoder": 12, "llama_stack": 13, "bert_stack": 14,
         "vit_encoder": 15, "video_encoder": 16, "rnn_stack": 17}


def build(name, size="test"):
    torch.manual_seed(SEEDS[name])
    return randomize(BUILDERS[name](**CONFIGS[size][name]), SEEDS[name]).eval()
