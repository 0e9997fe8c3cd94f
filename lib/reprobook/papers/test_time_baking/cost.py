"""Render cost against the number of context views (chapter 11).

Paper: "TTB: Test-Time Baking for Large View Synthesis Models" (NeurIPS 2026, no arXiv id).
Timing needs no trained weights: models with random weights at the profile's shapes, context
and target tokens drawn at random. Prefill (building the scene state) and rendering (one target
view from that state) are timed and counted apart, with ``torch.utils.flop_counter``.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from reprobook.core import checks

from .model import ViewSynthesisModel, explicit_attention

__all__ = ["random_model", "random_tokens", "render_flops", "time_call", "cost_table"]


def random_model(variant: str, cfg, device="cpu") -> ViewSynthesisModel:
    torch.manual_seed(0)
    m = ViewSynthesisModel(
        variant, patch=cfg.patch, dim=cfg.dim, depth=cfg.depth, heads=cfg.heads,
        mlp_hidden=2 * cfg.dim, fw_hidden=cfg.fw_hidden,
    )  # fmt: skip
    dtype = torch.bfloat16 if cfg.bf16 else torch.float32
    return m.to(device=device, dtype=dtype).eval()


def random_tokens(cfg, n_views: int, device="cpu", seed: int = 0):
    """Random raw tokens: context GT (1, N, T, 9p^2), context rendering, one target view."""
    n_views = checks.integer(n_views, "n_views", minimum=1)
    T, c = (cfg.size // cfg.patch) ** 2, 9 * cfg.patch**2
    g = torch.Generator().manual_seed(seed)
    dtype = torch.bfloat16 if cfg.bf16 else torch.float32
    make = lambda v: torch.randn(1, v, T, c, generator=g).to(device, dtype)  # noqa: E731
    return make(n_views), make(n_views), make(1)


@torch.no_grad()
def render_flops(model: ViewSynthesisModel, ctx_gt, ctx_rd, tgt) -> tuple[int, int]:
    """(prefill FLOPs, render FLOPs of one target view) counted by FlopCounterMode."""
    with explicit_attention(), FlopCounterMode(display=False) as fc:
        state = model.prefill(ctx_gt, ctx_rd)
    prefill = fc.get_total_flops()
    with explicit_attention(), FlopCounterMode(display=False) as fc:
        model.render(state, tgt)
    return int(prefill), int(fc.get_total_flops())


def _sync(device) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


@torch.no_grad()
def time_call(fn, *, repeats: int, warmup: int, device="cpu") -> np.ndarray:
    """Wall times (s) of ``repeats`` calls of ``fn()`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    _sync(device)
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        out.append(time.perf_counter() - t0)
    return np.array(out)


def cost_table(cfg, variants=("kv", "ttt", "ttb_a"), device="cpu") -> list[dict]:
    """For each variant and each N of ``cfg.n_views``: prefill and render FLOPs, and the
    median prefill and render times."""
    rows = []
    for variant in variants:
        model = random_model(variant, cfg, device)
        for n in cfg.n_views:
            ctx_gt, ctx_rd, tgt = random_tokens(cfg, n, device)
            fp, fr = render_flops(model, ctx_gt, ctx_rd, tgt)
            state = model.prefill(ctx_gt, ctx_rd)
            kw = dict(repeats=cfg.repeats, warmup=cfg.warmup, device=device)
            tp = time_call(functools.partial(model.prefill, ctx_gt, ctx_rd), **kw)
            tr = time_call(functools.partial(model.render, state, tgt), **kw)
            rows.append(dict(variant=variant, n_views=n, prefill_flops=fp, render_flops=fr,
                             prefill_s=float(np.median(tp)), render_s=float(np.median(tr)),
                             render_times=tr.tolist()))  # fmt: skip
    return rows
