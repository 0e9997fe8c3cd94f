"""The chapter's experiments, shared by its notebooks: trained stages (cached), judged
generations, validation losses, rollout drift, the exactness and memory checks, and timing.

Paper: "Solaris: Building a Multiplayer Video World Model in Minecraft" (arXiv 2602.22208).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch
from torchmetrics.functional.image import (
    peak_signal_noise_ratio,
    structural_similarity_index_measure,
)

from reprobook.core import checks

from . import flow, judges, selfforcing, stages, world
from .model import WorldModel, causal_window_mask


def _arch(cfg) -> dict:
    return dataclasses.asdict(cfg.arch)


def variant(cfg, name: str, seed: int, profile: str):
    """Stage 2 of variant ``name`` trained from scratch (C1; the multiplayer one is also
    C2's scratch run)."""
    name = checks.choice(name, "name", ("multiplayer", "independent", "concat"))
    return stages.train_stage(
        f"bi-{name}-s{seed}", name, _arch(cfg), cfg.multiplayer, seed, profile
    )[0]


def staged(cfg, seed: int, profile: str):
    """Stage 1 (single player) then stage 2 (two players): C2's staged run."""
    arch = _arch(cfg)
    single, _ = stages.train_stage(
        f"single-s{seed}", "multiplayer", arch, cfg.single, seed, profile
    )
    key = {"stage": cfg.single, "seed": seed}
    return stages.train_stage(
        f"staged-s{seed}",
        "multiplayer",
        arch,
        cfg.staged,
        seed,
        profile,
        start=single,
        start_key=key,
    )[0]


def _as_tensors(e: dict):
    x = torch.from_numpy(e["frames"]).permute(0, 1, 2, 5, 3, 4) * 2 - 1
    return x.contiguous(), torch.from_numpy(e["actions"])


def _as_frames(x: torch.Tensor) -> np.ndarray:
    return ((x.permute(0, 1, 2, 4, 5, 3) + 1) / 2).clamp(0, 1).numpy()


def judged_accuracy(net, n: int, steps: int, seed: int) -> dict:
    """Judge accuracy of ``net``'s generations (4-frame clips from the true first frame and
    all actions) on each judged evaluation set, with held-out episode seeds."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for kind in judges.JUDGED_KINDS:
        e = world.episodes(kind, n, 2, 4, 1000 + seed)
        x, a = _as_tensors(e)
        video = flow.sample_bidirectional(net, x[:, :, :1], a, steps, gen)
        out[kind] = judges.accuracy(kind, _as_frames(video), e["labels"])
    return out


def validation_loss(net, clips: int, seed: int) -> float:
    """Flow-matching loss on held-out two-player clips, with fixed noise (the same draws for
    every model of a seed)."""
    d = world.training_set(clips, 2, 4, 5000 + seed, (0.4, 0.15, 0.15, 0.15, 0.15))
    x, a = torch.from_numpy(d["x"]), torch.from_numpy(d["actions"])
    gen = torch.Generator().manual_seed(seed)
    B, P, T = x.shape[:3]
    sig = flow.noise_levels(B, P, T, "standard", gen)
    sig[:, :, 0] = 0.0
    eps = torch.randn(x.shape, generator=gen)
    weight = torch.ones(B, P, T)
    weight[:, :, 0] = 0.0
    with torch.no_grad():
        v, _ = net(flow.noisy(x, sig, eps), sig, a, torch.ones(T, T).bool(), torch.arange(T))
    return float(flow.flow_matching_loss(v, x, eps, weight))


def causal(cfg, seed: int, profile: str):
    """Stage 3: diffusion forcing from the staged stage-2 model."""
    start = staged(cfg.variants, seed, profile)
    key = {"stage2": cfg.variants.staged, "stage1": cfg.variants.single, "seed": seed}
    return stages.train_stage(
        f"causal-s{seed}",
        "multiplayer",
        _arch(cfg.variants),
        cfg.causal,
        seed,
        profile,
        start=start,
        start_key=key,
    )[0]


def self_forced(cfg, seed: int, profile: str):
    """Stage 4: Checkpointed Self Forcing from stage 3, teacher and critic from stage 2."""
    teacher = staged(cfg.variants, seed, profile)
    student = causal(cfg, seed, profile)
    key = {"causal": cfg.causal, "stage2": cfg.variants.staged, "seed": seed}
    return stages.train_self_forcing(
        _arch(cfg.variants), cfg.sf, seed, profile, student, teacher, key
    )[0]


def drift(net, frames: int, episodes: int, window: int, schedule, seed: int, kernel: int):
    """Per-frame SSIM and PSNR (torchmetrics) of rollouts of ``frames`` frames from the true
    first frame and actions of explore episodes, against the true frames: arrays (frames-1,)."""
    e = world.episodes("explore", episodes, 2, frames, 3000 + seed)
    x, a = _as_tensors(e)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        X0, _ = flow.rollout(net, x[:, :, :1], a, window, schedule, gen)
    fake = ((X0 + 1) / 2).clamp(0, 1)[:, :, 1:]
    real = ((x + 1) / 2)[:, :, 1:]
    ssim, psnr = [], []
    for t in range(frames - 1):
        f, r = fake[:, :, t].flatten(0, 1), real[:, :, t].flatten(0, 1)
        ssim.append(
            float(structural_similarity_index_measure(f, r, data_range=1.0, kernel_size=kernel))
        )
        psnr.append(float(peak_signal_noise_ratio(f, r, data_range=1.0)))
    return np.array(ssim), np.array(psnr)


def exactness(net: WorldModel, T: int, window: int, seed: int) -> dict:
    """C3(a), in float64: the replay against the no-grad rollout's exit-step x0 and against
    the naive cached computation (outputs and parameter gradients); the cached forward
    against one causal forward."""
    net = net.double()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 2, T, 3, 16, 16, generator=gen, dtype=torch.float64).clamp(-1, 1)
    a = (torch.rand(2, 2, T, 7, generator=gen) < 0.3).double()
    s = torch.rand(2, 2, T, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        full, _ = net(x, s, a, causal_window_mask(T, window), torch.arange(T))
        cached = flow.cached_forward(net, x, s, a, window)
    out = {"cache_vs_full": float((full - cached).abs().max())}
    worst = {"outputs": 0.0, "gradients": 0.0}
    for exit_step in range(len(flow.STUDENT_SCHEDULE)):
        with torch.no_grad():
            X0, Xs = flow.rollout(
                net, x[:, :, :1], a, window, flow.STUDENT_SCHEDULE, gen, exit_step
            )
        sig = flow.STUDENT_SCHEDULE[exit_step]
        rep = selfforcing.replay(net, X0, Xs, sig, a, window)
        nai = selfforcing.naive_exit(net, X0, Xs, sig, a, window)
        w = torch.randn(rep.shape, generator=gen, dtype=torch.float64)
        params = [p for p in net.parameters() if p.requires_grad]
        g_rep = torch.autograd.grad((rep * w).sum(), params, allow_unused=True)
        g_nai = torch.autograd.grad((nai * w).sum(), params, allow_unused=True)
        diffs = [(p - q).abs().max() for p, q in zip(g_rep, g_nai) if p is not None]
        worst["outputs"] = max(
            worst["outputs"],
            float((rep - X0[:, :, 1:]).abs().max()),
            float((rep - nai).abs().max()),
        )
        worst["gradients"] = max(worst["gradients"], float(max(diffs)))
    net.float()
    return {**out, **worst}


def memory(net: WorldModel, horizons, windows, fixed_window: int, fixed_horizon: int):
    """Saved bytes of the replay and of the naive computation, against the teacher horizon
    L_t (window fixed) and against the window L_s (horizon fixed): a list of rows."""
    rows = []
    gen = torch.Generator().manual_seed(0)
    for Lt, Ls in [(h, fixed_window) for h in horizons] + [(fixed_horizon, w) for w in windows]:
        X0 = torch.randn(1, 2, Lt, 3, 16, 16, generator=gen)
        Xs, a = torch.randn(X0.shape, generator=gen), torch.zeros(1, 2, Lt, 7)
        for name, fn in (("checkpointed", selfforcing.replay), ("naive", selfforcing.naive_exit)):
            m = selfforcing.saved_bytes(
                lambda fn=fn, X0=X0, Xs=Xs, a=a, Ls=Ls: fn(net, X0, Xs, 0.5, a, Ls),
                list(net.parameters()),
            )
            rows.append(
                {
                    "method": name,
                    "L_t": Lt,
                    "L_s": Ls,
                    "structural": m["structural"],
                    "attention": m["attention"],
                }
            )
    return rows


def time_players(net: WorldModel, players, frames: int, calls: int) -> dict:
    """Seconds per forward pass of one ``frames``-frame clip at each number of players
    (bidirectional attention over all P x 16 x frames tokens)."""
    out = {}
    mask, times = torch.ones(frames, frames).bool(), torch.arange(frames)
    for P in players:
        x = torch.zeros(1, P, frames, 3, 16, 16)
        s, a = torch.full((1, P, frames), 0.5), torch.zeros(1, P, frames, 7)
        with torch.no_grad():
            net(x, s, a, mask, times)
            start = time.perf_counter()
            for _ in range(calls):
                net(x, s, a, mask, times)
        out[int(P)] = (time.perf_counter() - start) / calls
    return out
