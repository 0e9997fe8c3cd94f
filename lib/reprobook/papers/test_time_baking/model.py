"""Decoder-only view-synthesis models: KV cache, TTT and TTB (chapter 11).

Paper: "TTB: Test-Time Baking for Large View Synthesis Models" (NeurIPS 2026, no arXiv id).
One pre-LN transformer (QK-norm attention, GELU MLP) with weights shared between the context
pass ("prefill") and the target pass ("render"), after the decoder-only LVSM with KV cache.
Every model has ``prefill(ctx_gt, ctx_render) -> state`` and ``render(state, tgt) -> RGB``:

- ``kv``: prefill runs full attention among the context ground-truth (GT) tokens and keeps each
  layer's keys and values; a target token attends to [that cache, its own view].
- ``ttt``: no cross-view attention anywhere; each layer is per-view attention, a fast-weight
  MLP written once from the context GT tokens (keys and values), and an MLP (LaCT-style).
- ``ttb_a`` / ``ttb_b``: the KV prefill stays as the teacher; camera-only context rendering
  tokens run through the fast path and, at every layer, the fast weights are baked on pairs
  (rendering-token key -> target): the GT token's state after cross-view attention (A) or the
  cross-view attention output of the rendering token against the cache (B).
- ``ttb_gt_input``: the ablation of TTB-A whose keys come from GT tokens instead.

Render cost of ``ttt`` and the ``ttb`` variants does not depend on the number of context views.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from reprobook.core import checks

from . import fast_weights

__all__ = ["VARIANTS", "LABELS", "FastWeightLayer", "ViewSynthesisModel", "count_parameters"]

VARIANTS = ("kv", "ttt", "ttb_a", "ttb_b", "ttb_gt_input")
# The variants' names in tables and figures (also ``experiments.LABELS``; here, so that the
# render-cost notebook need not import the training stack).
LABELS = {
    "kv": "KV cache",
    "ttt": "TTT",
    "ttb_a": "TTB-A (GT-state targets)",
    "ttb_b": "TTB-B (attention targets)",
    "ttb_gt_input": "TTB-A, GT-token inputs (ablation)",
}


_EXPLICIT = {"on": False}


def sdpa(q, k, v, attn_mask=None):
    """Scaled dot-product attention: the fused kernel, or (while FLOPs are counted, see
    :func:`explicit_attention`) the same computation as explicit matrix products, which
    ``FlopCounterMode`` counts on every device."""
    if not _EXPLICIT["on"]:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf"))
    return s.softmax(-1) @ v


class explicit_attention:  # noqa: N801 - used as a context manager
    """Within this context, :func:`sdpa` uses explicit matrix products."""

    def __enter__(self):
        self.prev = _EXPLICIT["on"]
        _EXPLICIT["on"] = True

    def __exit__(self, *exc):
        _EXPLICIT["on"] = self.prev


class Attention(nn.Module):
    """Multi-head attention with RMS-normalised queries and keys (QK-norm)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv_proj = nn.Linear(dim, 3 * dim, bias=False)
        self.q_norm, self.k_norm = nn.RMSNorm(dim // heads), nn.RMSNorm(dim // heads)
        self.out = nn.Linear(dim, dim)

    def qkv(self, h):
        q, k, v = rearrange(self.qkv_proj(h), "b n (s h d) -> s b h n d", s=3, h=self.heads)
        return self.q_norm(q), self.k_norm(k), v

    def merge(self, o):
        return self.out(rearrange(o, "b h n d -> b n (h d)"))


class FastWeightLayer(nn.Module):
    """A multi-head SwiGLU fast-weight MLP with learned initial weights W^0, its projections
    (queries, keys, values through silu, queries and keys L2-normalised), per-token learning
    rates eta = softplus(w.x + softplus^-1(base_lr)) and an output projection."""

    def __init__(self, dim, heads, hidden, base_lr, muon_steps, renorm, loss="dot"):
        super().__init__()
        self.heads, self.loss = heads, loss
        self.muon_steps, self.renorm = muon_steps, renorm
        dh, hh = dim // heads, hidden // heads
        self.norm = nn.LayerNorm(dim)
        self.q, self.k, self.v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.lr = nn.Linear(dim, heads)
        self.lr_bias = float(torch.log(torch.expm1(torch.tensor(base_lr))))
        self.out = nn.Linear(dim, dim)
        self.W0 = nn.Parameter(torch.randn(heads, dh, hh) / dh**0.5)
        self.W1 = nn.Parameter(torch.randn(heads, hh, dh) / hh**0.5)
        self.W2 = nn.Parameter(torch.randn(heads, dh, hh) / dh**0.5)

    def _heads(self, x):
        return rearrange(x, "b n (h d) -> b h n d", h=self.heads)

    def initial(self, batch: int):
        """W^0 for ``batch`` scenes, (batch, heads, ., .): a broadcast view of the learned
        weights (no copy; gradients flow back summed over the scenes)."""
        return tuple(w.expand(batch, -1, -1, -1) for w in (self.W0, self.W1, self.W2))

    def pairs(self, key_src, value_src):
        """Keys, values and learning rates (per head) from the two token sources (B, n, D)."""
        zk, zv = self.norm(key_src), self.norm(value_src)
        k = F.normalize(self._heads(F.silu(self.k(zk))), dim=-1)
        v = self._heads(F.silu(self.v(zv)))
        eta = F.softplus(self.lr(zk) + self.lr_bias)
        return k, v, rearrange(eta, "b n h -> b h n 1")

    def bake(self, W, key_src, value_src):
        """W' after one large-chunk update on the pairs of ``key_src`` -> ``value_src``."""
        k, v, eta = self.pairs(key_src, value_src)
        return fast_weights.update(
            W, k, v, eta, loss=self.loss, muon_steps=self.muon_steps, renorm=self.renorm
        )

    def query(self, x):
        return F.normalize(self._heads(F.silu(self.q(self.norm(x)))), dim=-1)

    def apply(self, W, x):
        """out(f_W(q(x))) for tokens x (B, n, D)."""
        o = fast_weights.swiglu(W, self.query(x))
        return self.out(rearrange(o, "b h n d -> b n (h d)"))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_hidden, fw: FastWeightLayer | None):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_hidden), nn.GELU(), nn.Linear(mlp_hidden, dim))
        self.fw = fw

    def view_attention(self, x):
        """x + per-view self-attention, x (B, V, T, D)."""
        B = x.shape[0]
        xf = x.flatten(0, 1)
        xf = xf + self.attn.merge(sdpa(*self.attn.qkv(self.ln1(xf))))
        return xf.unflatten(0, (B, -1))


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


class ViewSynthesisModel(nn.Module):
    """One of :data:`VARIANTS`; raw tokens (B, V, T, p*p*9) in, RGB patches (B, Vt, T, p*p*3)
    out. ``mlp_hidden`` is the MLP width of the fast-weight variants; the ``kv`` variant, which
    has no fast-weight layer, widens its MLP so that parameter counts match."""

    def __init__(
        self,
        variant,
        *,
        patch=8,
        dim=64,
        depth=4,
        heads=4,
        mlp_hidden=128,
        fw_heads=1,
        fw_hidden=128,
        base_lr=0.01,
        muon_steps=5,
        renorm=True,
    ):
        super().__init__()
        self.variant = checks.choice(variant, "variant", VARIANTS)
        self.patch = checks.integer(patch, "patch", minimum=1)
        for name, val in (("dim", dim), ("heads", heads), ("fw_heads", fw_heads)):
            checks.integer(val, name, minimum=1)
        if dim % heads or dim % fw_heads or fw_hidden % fw_heads:
            raise checks.InputError(
                f"dim={dim} must be divisible by heads={heads} and fw_heads={fw_heads}, "
                f"and fw_hidden={fw_hidden} by fw_heads"
            )
        loss = "mse" if variant == "ttb_b" else "dot"
        make_fw = lambda: FastWeightLayer(  # noqa: E731
            dim, fw_heads, fw_hidden, base_lr, muon_steps, renorm, loss
        )
        if variant == "kv":
            extra = count_parameters(make_fw())
            mlp_hidden = mlp_hidden + round(extra / (2 * dim + 1))
        self.embed = nn.Linear(patch * patch * 9, dim)
        self.blocks = nn.ModuleList(
            Block(dim, heads, mlp_hidden, None if variant == "kv" else make_fw())
            for _ in range(depth)
        )
        self.head_norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, patch * patch * 3)

    # -- the KV-cache decoder -------------------------------------------------------------
    def kv_prefill(self, ctx_gt):
        """Full attention among the context GT tokens: per layer the cache (K, V), the
        post-attention GT states m_l (B, N*T, D) and the attention inputs."""
        g = self.embed(ctx_gt).flatten(1, 2)
        cache, states = [], []
        for blk in self.blocks:
            q, k, v = blk.attn.qkv(blk.ln1(g))
            cache.append((k, v))
            g = g + blk.attn.merge(sdpa(q, k, v))
            states.append(g)
            g = g + blk.mlp(blk.ln2(g))
        return cache, states

    def kv_render(self, cache, tgt):
        """Target tokens (B, Vt, T, 9p^2), each view attending to [cache, its own tokens]: eq.
        `test-time-baking-kv` of notebooks/11_test_time_baking/index.md."""
        B, Vt = tgt.shape[:2]
        x = self.embed(tgt).flatten(0, 1)
        for blk, (kc, vc) in zip(self.blocks, cache):
            q, k, v = blk.attn.qkv(blk.ln1(x))
            K = torch.cat([kc.repeat_interleave(Vt, 0), k], dim=2)
            V = torch.cat([vc.repeat_interleave(Vt, 0), v], dim=2)
            x = x + blk.attn.merge(sdpa(q, K, V))
            x = x + blk.mlp(blk.ln2(x))
        return x.unflatten(0, (B, Vt))

    def kv_masked_forward(self, ctx_gt, tgt):
        """The KV decoder as one masked forward over [context; targets] (for tests): context
        tokens see the context, a target token sees the context and its own view."""
        B, N, T, _ = ctx_gt.shape
        Vt = tgt.shape[1]
        x = self.embed(torch.cat([ctx_gt, tgt], 1)).flatten(1, 2)
        view = torch.arange(N + Vt).repeat_interleave(T)
        is_ctx = view < N
        mask = is_ctx[None, :] | (view[:, None] == view[None, :])
        for blk in self.blocks:
            q, k, v = blk.attn.qkv(blk.ln1(x))
            x = x + blk.attn.merge(sdpa(q, k, v, attn_mask=mask))
            x = x + blk.mlp(blk.ln2(x))
        return self.decode(x[:, N * T :].unflatten(1, (Vt, T)))

    # -- the fast path (TTT and TTB) ---------------------------------------------------------
    def fast_layer(self, blk, x, W):
        """Per-view attention, the fast-weight MLP f_W in place of cross-view attention, MLP."""
        x = blk.view_attention(x)
        x = x + blk.fw.apply(W, x.flatten(1, 2)).unflatten(1, x.shape[1:3])
        return x + blk.mlp(blk.ln2(x))

    def ttt_prefill(self, ctx_gt):
        """TTT: the context GT tokens write each layer's fast weights (keys and values both
        from them) and go on through the same fast path."""
        g = self.embed(ctx_gt)
        weights = []
        for blk in self.blocks:
            a = blk.view_attention(g)
            W = blk.fw.bake(blk.fw.initial(g.shape[0]), a.flatten(1, 2), a.flatten(1, 2))
            weights.append(W)
            g = self.fast_layer(blk, g, W)
        return weights

    def ttb_prefill(self, ctx_gt, ctx_render):
        """TTB: eq. `test-time-baking-pairs` of notebooks/11_test_time_baking/index.md. The KV
        prefill (the teacher) runs on the GT tokens; the camera-only context rendering tokens
        run through the fast path, and each layer's weights are baked from their keys to the
        targets before the layer is applied."""
        cache, states = self.kv_prefill(ctx_gt)  # teacher: full cross-view attention
        r = self.embed(ctx_render)
        weights = []
        for blk, (kc, vc), m in zip(self.blocks, cache, states):
            a = blk.view_attention(r).flatten(1, 2)  # rendering tokens after per-view attn
            if self.variant == "ttb_b":  # target: cross-view attention output (variant B)
                q = blk.attn.qkv(blk.ln1(r.flatten(1, 2)))[0]
                target = blk.attn.merge(sdpa(q, kc, vc))
            else:  # target: the GT token's state after cross-view attention (variant A)
                target = m
            keys = m if self.variant == "ttb_gt_input" else a  # ablation: GT-token inputs
            W = blk.fw.bake(blk.fw.initial(r.shape[0]), keys, target)
            weights.append(W)
            r = self.fast_layer(blk, r, W)
        return weights

    def fast_render(self, weights, tgt):
        x = self.embed(tgt)
        for blk, W in zip(self.blocks, weights):
            x = self.fast_layer(blk, x, W)
        return x

    # -- the common interface ----------------------------------------------------------------
    def decode(self, x):
        return torch.sigmoid(self.head(self.head_norm(x)))

    def prefill(self, ctx_gt, ctx_render=None):
        """The scene state: the KV cache (``kv``) or the per-layer fast weights."""
        if self.variant == "kv":
            return self.kv_prefill(ctx_gt)[0]
        if self.variant == "ttt":
            return self.ttt_prefill(ctx_gt)
        if ctx_render is None:
            raise checks.InputError("a TTB variant needs ctx_render, the camera-only tokens")
        return self.ttb_prefill(ctx_gt, ctx_render)

    def render(self, state, tgt):
        """RGB patches (B, Vt, T, 3p^2) of the target views from the scene state."""
        x = self.kv_render(state, tgt) if self.variant == "kv" else self.fast_render(state, tgt)
        return self.decode(x)

    def forward(self, ctx_gt, ctx_render, tgt):
        return self.render(self.prefill(ctx_gt, ctx_render), tgt)
