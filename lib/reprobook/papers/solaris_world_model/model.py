"""A pixel-space diffusion transformer with multiplayer attention, and its two baselines.

Paper: "Solaris: Building a Multiplayer Video World Model in Minecraft" (arXiv 2602.22208).
Solaris starts from a single-player video DiT and makes it multiplayer without new layers: the
tokens of all players go through one self-attention, ordered (frame, player, patch); every
player gets the same positions; a learned player embedding, added to the residual stream at the
start of every block, tells them apart (eq. `solaris-world-model-mp-attention` of
notebooks/19_solaris_world_model/index.md). Attention is masked per frame: all frames see each
other in the bidirectional stages, a sliding causal window in the causal ones
(eq. `solaris-world-model-window`), and the teacher-forcing mask in the Self Forcing replay
(eq. `solaris-world-model-tf-mask`).

Baselines: ``concat`` stacks the players' frames and actions along channels (one network
"player" holds them all); ``independent`` is the same DiT with attention only within a player
and no player embedding, i.e. one single-player model per view.

Ours, not the paper's: pixels instead of a VAE latent (16 x 16 frames, patch 4), adaLN
conditioning on the noise level and the player's own action, a learned spatial embedding, and
rotary positions over time only (the paper rotates time, row and column).
"""

from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import nn

from reprobook.core import checks

from . import world

VARIANTS = ("multiplayer", "independent", "concat")


def causal_window_mask(T: int, window: int) -> torch.Tensor:
    """Frame-level mask (T, T): frame i sees frames j with i - window < j <= i, that is
    min(i + 1, window) frames including itself; ``window = -1`` sees every earlier frame.

    Implements eq. `solaris-world-model-window` of notebooks/19_solaris_world_model/index.md.
    """
    T = checks.integer(T, "T", minimum=1)
    window = checks.integer(window, "window", minimum=-1)
    if window == 0:
        raise checks.InputError("window must be -1 (no limit) or >= 1, got 0")
    i = torch.arange(T)[:, None]  # query frame
    j = torch.arange(T)[None, :]  # key frame
    mask = j <= i  # eq. window: causal ...
    if window > 0:
        mask &= j > i - window  # ... within the sliding window
    return mask


def teacher_forcing_mask(T: int, window: int) -> torch.Tensor:
    """Frame-level mask (2T, 2T) over [clean frames 0..T-1 | noisy frames 0..T-1]: clean sees
    clean causally in the window; noisy frame i sees clean frames i - window + 1 .. i - 1 and
    itself; clean never sees noisy; noisy never sees another noisy frame.

    Implements eq. `solaris-world-model-tf-mask` of notebooks/19_solaris_world_model/index.md.
    """
    causal = causal_window_mask(T, window)  # (T, T), diagonal included
    eye = torch.eye(T, dtype=torch.bool)
    top = torch.cat([causal, torch.zeros(T, T, dtype=torch.bool)], dim=1)  # clean rows
    bottom = torch.cat([causal & ~eye, eye], dim=1)  # noisy rows: earlier clean, own noisy
    return torch.cat([top, bottom], dim=0)


def token_mask(frame_mask: torch.Tensor, n_players: int, n_tokens: int, per_player: bool):
    """Token-level mask from a frame-level one: tokens ordered (frame, player, patch); with
    ``per_player`` a token sees only its own player's tokens (the independent baseline)."""
    group = n_players * n_tokens
    mask = frame_mask.repeat_interleave(group, 0).repeat_interleave(group, 1)
    if per_player:
        pq = torch.arange(frame_mask.shape[0] * group) // n_tokens % n_players
        pk = torch.arange(frame_mask.shape[1] * group) // n_tokens % n_players
        mask = mask & (pq[:, None] == pk[None, :])
    return mask


def rope(x: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
    """Rotary positions over time on (B, H, L, d) with one time per token (L,)."""
    d = x.shape[-1] // 2
    freq = 1.0 / (100.0 ** (torch.arange(d, dtype=x.dtype, device=x.device) / d))
    angle = times.to(x.dtype)[:, None] * freq[None, :]  # (L, d/2)
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


# Saved-tensor accounting (selfforcing.saved_bytes) tells the dense attention masks and
# probability matrices (quadratic in the tokens) from the token activations (linear).
ATTENTION_TENSORS: set[int] = set()


def attend(q, k, v, mask):
    """Masked softmax attention, softmax(q k^T / sqrt(d) + log mask) v, through torch's fused
    kernel. It announces its dense mask (queries x keys), which autograd keeps for the
    backward pass, so that :func:`.selfforcing.saved_bytes` counts it apart."""
    bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device)
    bias = bias.masked_fill(~mask, float("-inf"))  # log of the 0/1 mask
    ATTENTION_TENSORS.add(bias.untyped_storage().data_ptr())
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)


class Block(nn.Module):
    """Pre-norm transformer block with adaLN-Zero modulation from a per-token condition."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width, elementwise_affine=False)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width, elementwise_affine=False)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )
        self.mod = nn.Linear(width, 6 * width)
        nn.init.zeros_(self.mod.weight)
        nn.init.zeros_(self.mod.bias)

    def forward(self, h, cond, mask, times, cache=None):
        """h (B, L, width); cond (B, G, width), one per group of L / G tokens (a player's
        frame); mask (L, Lc + L); cache (k, v) of earlier tokens or None. Returns the new h
        and this call's (k, v) with rotary positions applied."""
        per = h.shape[1] // cond.shape[1]
        mods = self.mod(cond).repeat_interleave(per, dim=1)
        s1, b1, g1, s2, b2, g2 = mods.chunk(6, dim=-1)
        y = self.norm1(h) * (1 + s1) + b1
        q, k, v = rearrange(self.qkv(y), "b l (n h d) -> n b h l d", n=3, h=self.heads)
        q, k = rope(q, times), rope(k, times)
        kv = (k, v)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        a = rearrange(attend(q, k, v, mask), "b h l d -> b l (h d)")
        h = h + g1 * self.proj(a)
        h = h + g2 * self.mlp(self.norm2(h) * (1 + s2) + b2)
        return h, kv


def sigma_embedding(sigma: torch.Tensor, width: int) -> torch.Tensor:
    """Sinusoidal features of 1000 sigma (the paper's integer noise level)."""
    half = width // 2
    freq = torch.exp(-math.log(1000.0) * torch.arange(half, device=sigma.device) / half)
    angle = 1000.0 * sigma[..., None].to(freq.dtype) * freq
    return torch.cat([angle.cos(), angle.sin()], dim=-1).to(sigma.dtype)


class WorldModel(nn.Module):
    """The DiT for P players: ``forward(x, sigma, actions, frame_mask, times)`` predicts the
    flow-matching velocity of frames x (B, P, T, 3, 16, 16) at noise levels sigma (B, P, T)
    given actions (B, P, T, 7). ``variant`` is one of ``VARIANTS``; ``concat`` fixes the number
    of players to ``concat_players``."""

    def __init__(
        self,
        variant: str = "multiplayer",
        width: int = 48,
        depth: int = 3,
        heads: int = 4,
        patch: int = 4,
        concat_players: int = 2,
    ):
        super().__init__()
        self.variant = checks.choice(variant, "variant", VARIANTS)
        width = checks.integer(width, "width", minimum=8)
        heads = checks.integer(heads, "heads", minimum=1)
        if width % (2 * heads):
            raise checks.InputError(f"width must be a multiple of 2 * heads, got {width}")
        self.patch = checks.integer(patch, "patch", minimum=1)
        self.stack = concat_players if self.variant == "concat" else 1
        self.n_tokens = (world.FRAME // patch) ** 2
        chans = 3 * self.stack
        self.embed = nn.Linear(chans * patch * patch, width)
        self.pos = nn.Parameter(0.02 * torch.randn(self.n_tokens, width))
        self.player = nn.Embedding(world.MAX_PLAYERS, width)
        nn.init.normal_(self.player.weight, std=0.02)
        self.act = nn.Sequential(nn.Linear(world.ACTION_DIM * self.stack, width), nn.SiLU())
        self.sig = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, width))
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(width, elementwise_affine=False)
        self.final_mod = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, chans * patch * patch)
        for layer in (self.final_mod, self.out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        self.width = width

    def _stack(self, x, sigma, actions):
        """Concat baseline: players into channels (the network sees one player)."""
        if x.shape[1] != self.stack:
            raise checks.InputError(
                f"the concat model was built for {self.stack} players, got {x.shape[1]}"
            )
        x = rearrange(x, "b p t c h w -> b 1 t (p c) h w")
        actions = rearrange(actions, "b p t a -> b 1 t (p a)")
        return x, sigma[:, :1], actions

    def forward(self, x, sigma, actions, frame_mask, times, cache=None):
        """Velocity (B, P, T, 3, 16, 16), and each block's (k, v) of these tokens.

        ``frame_mask`` (T, Tc + T) says which frames (cached, then these) each frame sees;
        ``times`` (T,) are the frames' time positions; ``cache`` per block (k, v) or None."""
        B, P, T = x.shape[:3]
        if self.variant == "concat":
            x, sigma, actions = self._stack(x, sigma, actions)
        Pn, N = x.shape[1], self.n_tokens
        tok = rearrange(x, "b p t c (h i) (w j) -> b (t p h w) (i j c)", i=self.patch, j=self.patch)
        h = self.embed(tok) + self.pos.repeat(T * Pn, 1)  # identical positions per player
        cond = self.sig(sigma_embedding(sigma, self.width)) + self.act(actions)  # (B, P, T, w)
        cond = rearrange(cond, "b p t w -> b (t p) w")  # one condition per player-frame
        pid = torch.arange(Pn, device=x.device).repeat_interleave(N).repeat(T)
        t_tok = times.to(x.device).repeat_interleave(Pn * N)
        mask = token_mask(frame_mask, Pn, N, self.variant == "independent").to(x.device)
        new_cache = []
        for i, block in enumerate(self.blocks):
            if self.variant == "multiplayer":
                h = h + self.player(pid)  # eq. mp-attention: player embedding every block
            h, kv = block(h, cond, mask, t_tok, None if cache is None else cache[i])
            new_cache.append(kv)
        s, b = self.final_mod(cond).repeat_interleave(N, dim=1).chunk(2, dim=-1)
        out = self.out(self.norm(h) * (1 + s) + b)
        out = rearrange(
            out,
            "b (t p h w) (i j c) -> b p t c (h i) (w j)",
            t=T,
            p=Pn,
            h=world.FRAME // self.patch,
            i=self.patch,
            j=self.patch,
        )
        if self.variant == "concat":
            out = rearrange(out, "b 1 t (p c) h w -> b p t c h w", p=P)
        return out, new_cache
