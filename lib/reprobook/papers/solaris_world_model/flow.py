"""Flow matching for the world model: noise levels, the loss, and the samplers.

Paper: "Solaris: Building a Multiplayer Video World Model in Minecraft" (arXiv 2602.22208).
The network predicts the velocity v of the straight path x_sigma = (1 - sigma) x + sigma eps
and is regressed on eps - x (eq. `solaris-world-model-flow` of
notebooks/19_solaris_world_model/index.md). Bidirectional stages draw one sigma per clip,
shared by every player and frame; diffusion forcing draws one per (player, frame)
(eq. `solaris-world-model-noise`). Samplers predict x0 = x_sigma - sigma v and re-noise it with
fresh noise to the next level; the rollout runs frame by frame with a key-value cache of the
last ``window`` frames (eq. `solaris-world-model-window`).
"""

from __future__ import annotations

import torch

from reprobook.core import checks

from . import model as model_lib

NOISE_MODES = ("standard", "diffusion_forcing")
STUDENT_SCHEDULE = (1.0, 0.75, 0.5, 0.25)  # the 4-step schedule of the released generator


def noise_levels(B: int, P: int, T: int, mode: str, generator: torch.Generator) -> torch.Tensor:
    """sigma (B, P, T) = t / 1000 with integer t uniform on 0..1000: one per clip
    (``standard``) or one per (player, frame) (``diffusion_forcing``).

    Implements eq. `solaris-world-model-noise` of notebooks/19_solaris_world_model/index.md.
    """
    mode = checks.choice(mode, "mode", NOISE_MODES)
    if mode == "standard":
        t = torch.randint(0, 1001, (B, 1, 1), generator=generator).expand(B, P, T)
    else:
        t = torch.randint(0, 1001, (B, P, T), generator=generator)
    return t.float() / 1000.0


def noisy(x, sigma, eps):
    """x_sigma = (1 - sigma) x + sigma eps, sigma (B, P, T) broadcast over pixels."""
    s = sigma[..., None, None, None]
    return (1 - s) * x + s * eps


def flow_matching_loss(v_pred, x, eps, weight=None):
    """Mean squared error of the velocity against eps - x, over the frames with ``weight``
    (B, P, T) (all frames when None).

    Implements eq. `solaris-world-model-flow` of notebooks/19_solaris_world_model/index.md.
    """
    err = ((v_pred - (eps - x)) ** 2).mean(dim=(-3, -2, -1))  # per (b, p, t)
    if weight is None:
        return err.mean()
    return (err * weight).sum() / weight.sum().clamp_min(1.0)


def x0_from_v(x_sigma, sigma, v):
    """x0 = x_sigma - sigma v."""
    return x_sigma - sigma[..., None, None, None] * v


def sample_bidirectional(net, context, actions, steps: int, generator: torch.Generator):
    """Frames (B, P, T, 3, 16, 16) from the clean first frame ``context`` (B, P, 1, ...) and
    actions (B, P, T, 7): all later frames denoised together, ``steps`` levels 1 .. 1/steps,
    predicting x0 and re-noising with fresh noise."""
    B, P, T = actions.shape[:3]
    shape = (B, P, T - 1) + tuple(context.shape[3:])
    full = torch.ones(T, T, dtype=torch.bool)
    times = torch.arange(T)
    levels = torch.linspace(1.0, 0.0, steps + 1)
    x = torch.randn(shape, generator=generator)
    with torch.no_grad():
        for k in range(steps):
            sig = torch.full((B, P, T), float(levels[k]))
            sig[:, :, 0] = 0.0
            v, _ = net(torch.cat([context, x], dim=2), sig, actions, full, times)
            x0 = x0_from_v(x, sig[:, :, 1:], v[:, :, 1:])
            nxt = float(levels[k + 1])
            x = (1 - nxt) * x0 + nxt * torch.randn(shape, generator=generator)
    return torch.cat([context, x0], dim=2)


def _trim(cache, keep_tokens: int):
    """Keep the last ``keep_tokens`` tokens of every block's keys and values (0: none)."""
    out = []
    for k, v in cache:
        start = max(k.shape[2] - keep_tokens, 0)  # a short cache is kept whole
        out.append((k[:, :, start:], v[:, :, start:]))
    return out


def _append(cache, kv):
    if cache is None:
        return kv
    return [(torch.cat([c[0], n[0]], 2), torch.cat([c[1], n[1]], 2)) for c, n in zip(cache, kv)]


def frame_tokens(net) -> int:
    """Tokens one frame of all players takes in the cache (P x patches, or patches for concat)."""
    return net.n_tokens


def cached_forward(net, x, sigma, actions, window: int):
    """The causal forward of frames x (B, P, T, ...) run one frame at a time with a key-value
    cache of the previous ``window - 1`` frames: equals one forward with the causal window
    mask (eq. `solaris-world-model-window`). Returns the velocities (B, P, T, ...)."""
    T, P = x.shape[2], x.shape[1]
    per_frame = net.n_tokens * (1 if net.variant == "concat" else P)
    cache, outs = None, []
    for i in range(T):
        n_cached = 0 if cache is None else cache[0][0].shape[2] // per_frame
        mask = torch.ones(1, n_cached + 1, dtype=torch.bool)
        sl = slice(i, i + 1)
        v, kv = net(x[:, :, sl], sigma[:, :, sl], actions[:, :, sl], mask, torch.tensor([i]), cache)
        outs.append(v)
        cache = _trim(_append(cache, kv), per_frame * (window - 1))
    return torch.cat(outs, dim=2)


def rollout(net, context, actions, window: int, schedule, generator, exit_step=None):
    """Autoregressive generation with a rolling key-value cache (eq. `solaris-world-model-window`).

    ``context`` (B, P, 1, ...) is the given clean frame 0; frames 1..T-1 each start from noise
    and follow ``schedule`` (levels, e.g. 1, .75, .5, .25), predicting x0 and re-noising. With
    ``exit_step`` s, a frame stops at level s and the x0 predicted there is its value. After a
    frame is done, one pass at sigma = 0 writes its keys and values into the cache, which keeps
    the last ``window - 1`` frames. Returns (x0 frames, inputs at the exit level), both
    (B, P, T, ...); frame 0 of both is the context."""
    B, P, T = actions.shape[:3]
    per_frame = net.n_tokens * (1 if net.variant == "concat" else P)
    keep = per_frame * (window - 1)
    last = len(schedule) - 1 if exit_step is None else exit_step
    zero = context.new_zeros(B, P, 1)
    _, cache = net(
        context, zero, actions[:, :, :1], torch.ones(1, 1, dtype=torch.bool), torch.tensor([0])
    )
    cache = _trim(cache, keep)
    X0, Xs = [context], [context]
    for i in range(1, T):
        a = actions[:, :, i : i + 1]
        t = torch.tensor([i])
        mask = torch.ones(1, cache[0][0].shape[2] // per_frame + 1, dtype=torch.bool)
        x = torch.randn(context.shape, generator=generator, dtype=context.dtype)
        for k in range(last + 1):
            sig = context.new_full((B, P, 1), float(schedule[k]))
            v, _ = net(x, sig, a, mask, t, cache)
            x0 = x0_from_v(x, sig, v)
            if k < last:  # re-noise to the next level with fresh noise
                nxt = float(schedule[k + 1])
                x = (1 - nxt) * x0 + nxt * torch.randn(
                    context.shape, generator=generator, dtype=context.dtype
                )
        X0.append(x0)
        Xs.append(x)
        _, kv = net(x0, zero, a, mask, t, cache)  # the finished frame enters the cache
        cache = _trim(_append(cache, kv), keep)
    return torch.cat(X0, dim=2), torch.cat(Xs, dim=2)


def causal_mask_for(T: int, window: int) -> torch.Tensor:
    """Shortcut for the model's sliding-window mask."""
    return model_lib.causal_window_mask(T, window)
