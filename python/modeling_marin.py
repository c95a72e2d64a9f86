# coding=utf-8
"""PyTorch implementation of the marin.cpp Mixture-of-Experts language model.

This file is copied into every `marin export --format hf` directory. It computes exactly what
marin.cpp computes (recipe.md §2, src/model/): 3:1 local/global sliding-window attention with
QK-norm, half-RoPE (interleaved pairs, local layers only), qk_mult, XSA and a head gate; GatedNorm
after every RMSNorm; depthwise causal SConv at the configured sites; a latent MoE (top-K of E
routed experts selected on router logits + QB bias, sigmoid combine weights rescaled to
combine_sum, experts in the latent space) plus full-width shared experts; dropless routing.

It needs only `torch` and `numpy`: it reads safetensors itself. When `transformers` is
importable the classes subclass `PretrainedConfig` / `PreTrainedModel`, so

    AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)

works; without it, `MarinForCausalLM.from_pretrained(DIR)` loads the export directly. Either way
`model(input_ids).logits` is [batch, seq, vocab] and `model.generate(input_ids, ...)` decodes with
a KV cache (local layers keep only their window, SConv sites their last taps).
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:  # optional: the Hugging Face integration
    from transformers import PretrainedConfig as _ConfigBase
    from transformers import PreTrainedModel as _ModelBase

    HAS_TRANSFORMERS = True
except ImportError:  # plain torch
    HAS_TRANSFORMERS = False
    _ConfigBase = object
    _ModelBase = nn.Module

# The recipe fields of config.json (formats.md), with the `tiny` preset's values as defaults.
RECIPE_FIELDS = {
    "hidden_dim": 64, "num_layers": 4, "num_heads": 8, "head_dim": 8, "kv_heads_local": 2,
    "kv_heads_global": 1, "sliding_window": 32, "global_every": 4, "rope_theta": 10000.0,
    "rope_dim": 4, "qk_mult": 1.3, "sconv_kernel": 4, "sconv_sites": ["k", "attn", "mlp"],
    "num_experts": 8, "top_k": 2, "expert_dim": 32, "latent_dim": 32, "num_shared_experts": 2,
    "shared_dim": 32, "gated_norm_rank": 16, "combine_sum": 2.5, "qb_bins": 10000,
    "capacity_factor": 1.15, "vocab_size": 512, "seq_len": 64, "z_loss": 1e-4, "init_scale": 0.5,
}
NORM_EPS = 1e-5  # learnable RMSNorms and the latent norm
QK_NORM_EPS = 1e-6
XSA_EPS = 1e-6


class MarinConfig(_ConfigBase):
    model_type = "marin"

    def __init__(self, **kwargs):
        for k, default in RECIPE_FIELDS.items():
            setattr(self, k, kwargs.pop(k, default))
        self.sconv_sites = list(self.sconv_sites)
        if HAS_TRANSFORMERS:
            kwargs.setdefault("tie_word_embeddings", False)
            super().__init__(**kwargs)
        else:
            for k, v in kwargs.items():
                setattr(self, k, v)
        # Names transformers' generic code looks for.
        self.hidden_size = self.hidden_dim
        self.num_hidden_layers = self.num_layers
        self.num_attention_heads = self.num_heads
        self.max_position_embeddings = self.seq_len

    def is_global(self, layer):
        return (layer + 1) % self.global_every == 0 or layer == self.num_layers - 1

    @classmethod
    def from_json_file(cls, path):
        with open(path, "r", encoding="utf-8") as f:
            d = json.load(f)
        if d.get("model_type") != "marin":
            raise ValueError(f"{path}: model_type is {d.get('model_type')!r}, expected 'marin'")
        return cls(**d)


class MarinOutput:
    """What forward returns without transformers: .logits [B, T, V], .past_key_values, .loss."""

    def __init__(self, logits, past_key_values=None, loss=None):
        self.logits = logits
        self.past_key_values = past_key_values
        self.loss = loss

    def __getitem__(self, i):
        return [x for x in (self.loss, self.logits, self.past_key_values) if x is not None][i]


def _output(logits, past, loss):
    if HAS_TRANSFORMERS:
        from transformers.modeling_outputs import CausalLMOutputWithPast

        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=past)
    return MarinOutput(logits, past, loss)


# ---------------------------------------------------------------- safetensors with numpy only


def read_safetensors(path):
    """{name: torch tensor} of a safetensors file (F32, F64, F16, BF16), read with numpy."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = data[base + b : base + end]
        dt = e["dtype"]
        if dt == "F32":
            a = np.frombuffer(buf, "<f4")
        elif dt == "F64":
            a = np.frombuffer(buf, "<f8")
        elif dt == "F16":
            a = np.frombuffer(buf, "<f2").astype(np.float32)
        elif dt == "BF16":
            a = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name!r} has dtype {dt}, not F32/F64/F16/BF16")
        out[name] = torch.from_numpy(a.reshape(e["shape"]).copy())
    return out


def read_export_weights(directory):
    """Every tensor of an export directory (one model.safetensors or the index's shards)."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, "r", encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for fn in files:
        for k, v in read_safetensors(os.path.join(directory, fn)).items():
            if k in weights:
                raise ValueError(f"{directory}: tensor {k!r} appears in two shards")
            weights[k] = v
    return weights


# ---------------------------------------------------------------- modules


def _rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + 1e-5) ⊙ g, computed in fp32 at least."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        dt = x.dtype
        if dt in (torch.float16, torch.bfloat16):
            x = x.float()
        return (_rms(x, NORM_EPS) * self.weight.to(x.dtype)).to(dt)


class GatedNorm(nn.Module):
    """GN(x) = x ⊙ σ(silu(x @ Wd) @ Wu), applied after every learnable RMSNorm."""

    def __init__(self, dim, rank):
        super().__init__()
        self.down_proj = nn.Linear(dim, rank, bias=False)
        self.up_proj = nn.Linear(rank, dim, bias=False)

    def forward(self, x):
        return x * torch.sigmoid(self.up_proj(F.silu(self.down_proj(x))))


class SConv(nn.Module):
    """Depthwise causal convolution, weight [k, C]: out_t = Σ_j w_j ⊙ x_{t−j}; taps before the row
    start or from another document (segment ids) are zero. `state` holds the previous k−1 inputs
    when decoding with a cache."""

    def __init__(self, kernel, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(kernel, channels))

    def forward(self, x, seg=None, state=None):
        k = self.weight.shape[0]
        B, T, C = x.shape
        prev = state if state is not None else x.new_zeros(B, 0, C)
        full = torch.cat([prev, x], dim=1)  # [B, P + T, C]
        P = prev.shape[1]
        w = self.weight.to(x.dtype)
        out = w[0] * x
        for j in range(1, k):
            lo = P - j  # source index of position 0 in `full`
            if lo >= 0:
                src = full[:, lo : lo + T]
            else:  # zero before the row start
                src = torch.cat([x.new_zeros(B, -lo, C), full[:, : T + lo]], dim=1)
            if seg is not None:
                same = torch.zeros(B, T, dtype=torch.bool, device=x.device)
                if T > j:
                    same[:, j:] = seg[:, j:] == seg[:, :-j]
                src = src * same.unsqueeze(-1).to(x.dtype)
            out = out + w[j] * src
        new_state = full[:, max(0, P + T - (k - 1)) :] if k > 1 else full[:, :0]
        return out, new_state


def _rope(x, pos, rope_dim, theta):
    """Half-RoPE on interleaved pairs of the first rope_dim dims of each head; x [B, T, h, hd],
    pos [T] absolute positions. Angles in float64, as marin's table is."""
    half = rope_dim // 2
    if half <= 0:
        return x
    i = torch.arange(half, dtype=torch.float64, device=x.device)
    inv = theta ** (-2.0 * i / rope_dim)
    phi = pos.to(torch.float64)[:, None] * inv[None, :]  # [T, half]
    c = torch.cos(phi).to(x.dtype)[None, :, None, :]
    s = torch.sin(phi).to(x.dtype)[None, :, None, :]
    rot = x[..., :rope_dim].reshape(*x.shape[:-1], half, 2)
    x0, x1 = rot[..., 0], rot[..., 1]
    r = torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1).reshape(*x.shape[:-1], rope_dim)
    return torch.cat([r, x[..., rope_dim:]], dim=-1)


class MarinAttention(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        c = config
        self.c = c
        self.is_global = c.is_global(layer)
        self.H, self.hd, self.KV = c.num_heads, c.head_dim, c.kv_heads_local
        self.kv_used = c.kv_heads_global if self.is_global else c.kv_heads_local
        self.q_proj = nn.Linear(c.hidden_dim, self.H * self.hd, bias=False)
        self.k_proj = nn.Linear(c.hidden_dim, self.KV * self.hd, bias=False)
        self.v_proj = nn.Linear(c.hidden_dim, self.KV * self.hd, bias=False)
        self.o_proj = nn.Linear(self.H * self.hd, c.hidden_dim, bias=False)
        self.head_gate = nn.Linear(c.hidden_dim, self.H, bias=False)
        self.sconv_k = SConv(c.sconv_kernel, self.KV * self.hd) if "k" in c.sconv_sites else None

    def forward(self, x, pos, seg, cache):
        B, T, _ = x.shape
        H, hd, KV = self.H, self.hd, self.KV
        q = self.q_proj(x).view(B, T, H, hd)
        k = self.k_proj(x)
        v = self.v_proj(x).view(B, T, KV, hd)
        if self.sconv_k is not None:
            k, st = self.sconv_k(k, seg, cache.get("sconv_k") if cache is not None else None)
            if cache is not None:
                cache["sconv_k"] = st
        k = k.view(B, T, KV, hd)
        q = _rms(q, QK_NORM_EPS)
        k = _rms(k, QK_NORM_EPS)
        if not self.is_global and self.c.rope_dim > 0:
            q = _rope(q, pos, self.c.rope_dim, self.c.rope_theta)
            k = _rope(k, pos, self.c.rope_dim, self.c.rope_theta)
        q = q * self.c.qk_mult
        kpos = pos
        if cache is not None and "k" in cache:  # keys and values of earlier steps
            k = torch.cat([cache["k"], k], dim=1)
            v = torch.cat([cache["v"], v], dim=1)
            kpos = torch.cat([cache["pos"], pos])
        n = self.kv_used
        group = H // n
        kk = k[:, :, :n].repeat_interleave(group, dim=2)  # [B, S, H, hd]
        vv = v[:, :, :n].repeat_interleave(group, dim=2)
        scores = torch.einsum("bthd,bshd->bhts", q, kk) / math.sqrt(hd)
        visible = kpos[None, :] <= pos[:, None]  # causal
        if not self.is_global:
            visible &= kpos[None, :] > pos[:, None] - self.c.sliding_window
        mask = visible[None, None]
        if seg is not None:  # no attention across documents of a packed row (no cache)
            mask = mask & (seg[:, None, :, None] == seg[:, None, None, :])
        scores = scores.masked_fill(~mask, float("-inf"))
        p = torch.softmax(scores.float() if scores.dtype in (torch.float16, torch.bfloat16)
                          else scores, dim=-1).to(q.dtype)
        y = torch.einsum("bhts,bshd->bthd", p, vv)
        # XSA with the value vector of the KV head this query head reads, at its own position.
        vt = vv[:, -T:]
        coef = (y * vt).sum(-1, keepdim=True) / ((vt * vt).sum(-1, keepdim=True) + XSA_EPS)
        y = y - coef * vt
        y = 2.0 * torch.sigmoid(self.head_gate(x)).unsqueeze(-1) * y
        if cache is not None:
            keep = k.shape[1] if self.is_global else self.c.sliding_window - 1
            start = max(0, k.shape[1] - keep)  # local layers: what later queries can still see
            cache["k"], cache["v"], cache["pos"] = k[:, start:], v[:, start:], kpos[start:]
        return self.o_proj(y.reshape(B, T, H * hd))


class SwiGLU(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MarinExperts(nn.Module):
    """The E routed experts of a layer, stacked [E, in, out] and applied as x @ W_e."""

    def __init__(self, E, latent, hidden):
        super().__init__()
        self.gate_proj = nn.Parameter(torch.empty(E, latent, hidden))
        self.up_proj = nn.Parameter(torch.empty(E, latent, hidden))
        self.down_proj = nn.Parameter(torch.empty(E, hidden, latent))

    def forward(self, z, experts, weights):
        """z [N, ℓ]; experts, weights [N, K] → Σ_k w_k · FFN_{e_k}(z) [N, ℓ] (dropless)."""
        N, K = experts.shape
        out = torch.zeros_like(z)
        flat = experts.reshape(-1)
        rows = torch.arange(N, device=z.device).repeat_interleave(K)
        w = weights.reshape(-1)
        for e in torch.unique(flat).tolist():
            sel = (flat == e).nonzero(as_tuple=True)[0]
            t = rows[sel]
            x = z[t]
            h = F.silu(x @ self.gate_proj[e]) * (x @ self.up_proj[e])
            out.index_add_(0, t, (h @ self.down_proj[e]) * w[sel, None])
        return out


class MarinMoE(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        self.c = c
        self.router = nn.Linear(c.hidden_dim, c.num_experts, bias=False)
        self.register_buffer("router_bias", torch.zeros(c.num_experts))  # QB state
        self.latent_down = nn.Linear(c.hidden_dim, c.latent_dim, bias=False)
        self.latent_norm = RMSNorm(c.latent_dim)
        self.latent_up = nn.Linear(c.latent_dim, c.hidden_dim, bias=False)
        self.experts = MarinExperts(c.num_experts, c.latent_dim, c.expert_dim)

    def route(self, x):
        """Top-K experts on router logits + bias (ties: lower index) and their combine weights."""
        s = self.router(x)
        if s.dtype in (torch.float16, torch.bfloat16):
            s = s.float()  # fp32 router logits
        biased = s + self.router_bias.to(s.dtype)
        order = torch.sort(biased, dim=-1, descending=True, stable=True).indices
        experts = order[:, : self.c.top_k]
        p = torch.sigmoid(s.gather(1, experts))
        w = p * self.c.combine_sum / (p.sum(-1, keepdim=True) + 1e-9)
        return experts, w

    def forward(self, x):
        B, T, d = x.shape
        x2 = x.reshape(B * T, d)
        experts, w = self.route(x2)
        z = self.latent_norm(self.latent_down(x2))
        r = self.experts(z, experts, w.to(z.dtype))
        return self.latent_up(r).view(B, T, d)


class MarinBlock(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        c = config
        d, r = c.hidden_dim, c.gated_norm_rank
        self.attn_norm, self.attn_gnorm = RMSNorm(d), GatedNorm(d, r)
        self.self_attn = MarinAttention(c, layer)
        self.sconv_attn = SConv(c.sconv_kernel, d) if "attn" in c.sconv_sites else None
        self.mlp_norm, self.mlp_gnorm = RMSNorm(d), GatedNorm(d, r)
        self.moe = MarinMoE(c)
        self.shared_experts = nn.ModuleList(
            [SwiGLU(d, c.shared_dim) for _ in range(c.num_shared_experts)])
        self.sconv_mlp = SConv(c.sconv_kernel, d) if "mlp" in c.sconv_sites else None

    def _conv(self, conv, x, seg, cache, key):
        if conv is None:
            return x
        y, st = conv(x, seg, cache.get(key) if cache is not None else None)
        if cache is not None:
            cache[key] = st
        return y

    def forward(self, h, pos, seg, cache):
        a = self.self_attn(self.attn_gnorm(self.attn_norm(h)), pos, seg, cache)
        h = h + self._conv(self.sconv_attn, a, seg, cache, "sconv_attn")
        m_in = self.mlp_gnorm(self.mlp_norm(h))
        m = self.moe(m_in)
        for s in self.shared_experts:
            m = m + s(m_in)
        return h + self._conv(self.sconv_mlp, m, seg, cache, "sconv_mlp")


class MarinModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        d, r = c.hidden_dim, c.gated_norm_rank
        self.embed_tokens = nn.Embedding(c.vocab_size, d)
        self.embed_norm, self.embed_gnorm = RMSNorm(d), GatedNorm(d, r)
        self.layers = nn.ModuleList([MarinBlock(c, i) for i in range(c.num_layers)])
        self.norm, self.final_gnorm = RMSNorm(d), GatedNorm(d, r)

    def forward(self, input_ids, segment_ids=None, cache=None):
        T = input_ids.shape[1]
        start = cache.length if cache is not None else 0
        pos = torch.arange(start, start + T, device=input_ids.device)
        h = self.embed_gnorm(self.embed_norm(self.embed_tokens(input_ids)))
        for i, layer in enumerate(self.layers):
            h = layer(h, pos, segment_ids, cache.layers[i] if cache is not None else None)
        if cache is not None:
            cache.length += T
        return self.final_gnorm(self.norm(h))


class MarinCache:
    """Per-layer decoding state: keys/values (local layers: the last sliding_window − 1), their
    positions, and the last sconv_kernel − 1 inputs of each SConv site."""

    def __init__(self, num_layers):
        self.layers = [dict() for _ in range(num_layers)]
        self.length = 0

    def get_seq_length(self, layer=0):
        return self.length


class MarinForCausalLM(_ModelBase):
    config_class = MarinConfig
    base_model_prefix = "model"
    _no_split_modules = ["MarinBlock"]

    def __init__(self, config):
        if HAS_TRANSFORMERS:
            super().__init__(config)
        else:
            super().__init__()
            self.config = config
        self.model = MarinModel(config)
        self.lm_head = nn.Linear(config.hidden_dim, config.vocab_size, bias=False)
        if HAS_TRANSFORMERS:
            self.post_init()

    def _init_weights(self, module):  # weights always come from a marin.cpp checkpoint
        pass

    @classmethod
    def from_pretrained(cls, directory, *args, torch_dtype=None, **kwargs):
        """Loads an export directory. With transformers installed this is transformers' loader
        unless use_marin_loader=True; without it (or with that flag), the numpy reader here.
        torch_dtype: torch.float32 (default), torch.float64, torch.bfloat16, or "auto"."""
        use_own = kwargs.pop("use_marin_loader", not HAS_TRANSFORMERS)
        if not use_own:
            return super().from_pretrained(directory, *args, torch_dtype=torch_dtype, **kwargs)
        config = MarinConfig.from_json_file(os.path.join(directory, "config.json"))
        if torch_dtype == "auto":
            torch_dtype = {"bfloat16": torch.bfloat16}.get(
                getattr(config, "torch_dtype", "float32"), torch.float32)
        model = cls(config)
        weights = read_export_weights(directory)
        missing, unexpected = [], []
        own = model.state_dict()
        for k in own:
            if k not in weights:
                missing.append(k)
        for k in weights:
            if k not in own:
                unexpected.append(k)
            elif tuple(weights[k].shape) != tuple(own[k].shape):
                raise ValueError(f"{directory}: tensor {k!r} has shape {list(weights[k].shape)}, "
                                 f"expected {list(own[k].shape)}")
        if missing or unexpected:
            raise ValueError(f"{directory}: missing tensors {missing}, unexpected {unexpected}")
        model.load_state_dict(weights, strict=True)
        model.to(torch_dtype or torch.float32)
        model.eval()
        return model

    def forward(self, input_ids, segment_ids=None, past_key_values=None, use_cache=False,
                labels=None, attention_mask=None, **kwargs):
        """input_ids [B, T] → output with .logits [B, T, V]. segment_ids [B, T] (optional):
        document ids of a packed row, as marin.cpp's loader makes them (no cache then).
        labels: HF convention, shifted inside, -100 ignored."""
        if attention_mask is not None and not bool(torch.all(attention_mask != 0)):
            raise NotImplementedError("marin: padding masks are not supported; pass unpadded rows")
        cache = past_key_values
        if cache is None and use_cache:
            cache = MarinCache(self.config.num_layers)
        if cache is not None and segment_ids is not None:
            raise ValueError("marin: segment_ids cannot be combined with a KV cache")
        h = self.model(input_ids, segment_ids, cache)
        logits = self.lm_head(h)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                                   labels[:, 1:].reshape(-1), ignore_index=-100)
        return _output(logits, cache, loss)

    @torch.no_grad()
    def generate(self, input_ids, max_new_tokens=32, do_sample=False, temperature=1.0,
                 top_k=0, top_p=1.0, eos_token_id=None, generator=None, **kwargs):
        """Greedy (default) or sampled decoding with a KV cache. Returns [B, T + new] ids."""
        if eos_token_id is None:
            eos_token_id = getattr(self.config, "eos_token_id", None)
        cache = MarinCache(self.config.num_layers)
        out = self(input_ids, past_key_values=cache, use_cache=True)
        seq = input_ids
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for _ in range(max_new_tokens):
            logits = out.logits[:, -1].float()
            if do_sample:
                logits = logits / max(temperature, 1e-6)
                if top_k and top_k > 0:
                    kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                if top_p < 1.0:
                    sl, si = torch.sort(logits, descending=True)
                    cum = torch.softmax(sl, -1).cumsum(-1)
                    drop = cum - torch.softmax(sl, -1) > top_p
                    sl = sl.masked_fill(drop, float("-inf"))
                    logits = torch.full_like(logits, float("-inf")).scatter(1, si, sl)
                nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)
            else:
                nxt = logits.argmax(-1, keepdim=True)
            if eos_token_id is not None:
                nxt = torch.where(done[:, None], torch.full_like(nxt, eos_token_id), nxt)
                done |= nxt[:, 0] == eos_token_id
            seq = torch.cat([seq, nxt], dim=1)
            if eos_token_id is not None and bool(done.all()):
                break
            out = self(nxt, past_key_values=cache, use_cache=True)
        return seq


if HAS_TRANSFORMERS:  # AutoConfig / AutoModelForCausalLM registration for local use
    try:
        from transformers import AutoConfig, AutoModelForCausalLM

        AutoConfig.register("marin", MarinConfig)
        AutoModelForCausalLM.register(MarinConfig, MarinForCausalLM)
    except Exception:  # already registered, or an older transformers
        pass
