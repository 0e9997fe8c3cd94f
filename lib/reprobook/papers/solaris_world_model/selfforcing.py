"""Checkpointed Self Forcing: the paper's final training stage, and the activation count.

Paper: "Solaris: Building a Multiplayer Video World Model in Minecraft" (arXiv 2602.22208).
Self Forcing trains the causal student on its own rollouts with a distribution-matching loss
against a bidirectional teacher. Solaris lets the teacher see L_t frames, more than the
student's window L_s, without keeping L_t rollout steps' graphs alive: the rollout runs without
gradients, then one parallel pass over [clean x0 | inputs at the exit level] under the
teacher-forcing mask recomputes the exit-step predictions with gradients
(eq. `solaris-world-model-replay` of notebooks/19_solaris_world_model/index.md). The DMD loss
is eq. `solaris-world-model-dmd`.

:func:`naive_exit` is the comparison: the same exit-step predictions computed frame by frame
through the key-value cache with gradients kept through every model call.
:func:`saved_bytes` counts what autograd keeps for the backward pass.
"""

from __future__ import annotations

import torch

from reprobook.core import checks

from . import flow
from . import model as model_lib


def replay(student, X0, Xs, sigma_s: float, actions, window: int):
    """x0-hat (B, P, T-1, ...) of frames 1..T-1 at the exit level, with gradients, from one
    forward over the 2T frames [X0 | Xs] (no gradient into them) under the teacher-forcing
    mask; clean frame i and noisy frame i share the time position i.

    Implements eq. `solaris-world-model-replay` of notebooks/19_solaris_world_model/index.md.
    """
    X0, Xs = X0.detach(), Xs.detach()  # stop-gradient on the rollout's values
    B, P, T = X0.shape[:3]
    x = torch.cat([X0, Xs], dim=2)  # (B, P, 2T, ...): clean half, then noisy half
    sigma = torch.cat([X0.new_zeros(B, P, T), X0.new_full((B, P, T), float(sigma_s))], dim=2)
    acts = torch.cat([actions, actions], dim=2)  # each frame keeps its own action
    times = torch.cat([torch.arange(T), torch.arange(T)])  # shared time positions
    mask = model_lib.teacher_forcing_mask(T, window)  # eq. tf-mask
    v, _ = student(x, sigma, acts, mask, times)  # one parallel pass
    x0 = flow.x0_from_v(Xs, sigma[:, :, T:], v[:, :, T:])  # noisy half -> x0-hat
    return x0[:, :, 1:]  # frame 0 is the given context


def naive_exit(student, X0, Xs, sigma_s: float, actions, window: int):
    """The same x0-hat computed sequentially through the key-value cache, with gradients
    through every call (each cache pass on X0[i] and each exit call on Xs[i])."""
    X0, Xs = X0.detach(), Xs.detach()
    B, P, T = X0.shape[:3]
    per_frame = student.n_tokens * (1 if student.variant == "concat" else P)
    keep = per_frame * (window - 1)
    zero = X0.new_zeros(B, P, 1)
    one = torch.ones(1, 1, dtype=torch.bool)
    _, cache = student(X0[:, :, :1], zero, actions[:, :, :1], one, torch.tensor([0]))
    cache = flow._trim(cache, keep)
    outs = []
    for i in range(1, T):
        sl, t = slice(i, i + 1), torch.tensor([i])
        mask = torch.ones(1, cache[0][0].shape[2] // per_frame + 1, dtype=torch.bool)
        sig = X0.new_full((B, P, 1), float(sigma_s))
        v, _ = student(Xs[:, :, sl], sig, actions[:, :, sl], mask, t, cache)
        outs.append(flow.x0_from_v(Xs[:, :, sl], sig, v))
        _, kv = student(X0[:, :, sl], zero, actions[:, :, sl], mask, t, cache)
        cache = flow._trim(flow._append(cache, kv), keep)
    return torch.cat(outs, dim=2)


def bidirectional_x0(net, x, sigma_shared, actions, eps):
    """x0 predicted by a bidirectional model for x (B, P, T, ...) noised at one level per
    clip (frame 0 kept clean as context)."""
    B, P, T = x.shape[:3]
    sig = sigma_shared.view(B, 1, 1).expand(B, P, T).clone()
    sig[:, :, 0] = 0.0
    xt = flow.noisy(x, sig, eps)
    v, _ = net(xt, sig, actions, torch.ones(T, T, dtype=torch.bool), torch.arange(T))
    return flow.x0_from_v(xt, sig, v)


def dmd_loss(x0_hat, context, actions, teacher, critic, generator: torch.Generator):
    """Distribution-matching loss of the student's x0-hat (B, P, T-1, ...):
    g = (fake x0 - real x0) / mean |x0-hat - real x0| (per clip, clipped to +-10), and
    loss = 1/2 mean (x0-hat - stopgrad(x0-hat - g))^2, whose gradient in x0-hat is g / n.

    Implements eq. `solaris-world-model-dmd` of notebooks/19_solaris_world_model/index.md.
    """
    x = torch.cat([context, x0_hat], dim=2)  # the whole L_t-frame clip
    B = x.shape[0]
    sigma = torch.rand(B, generator=generator, dtype=x.dtype)  # one fresh level per clip
    eps = torch.randn(x.shape, generator=generator, dtype=x.dtype)
    with torch.no_grad():
        real = bidirectional_x0(teacher, x.detach(), sigma, actions, eps)[:, :, 1:]  # teacher
        fake = bidirectional_x0(critic, x.detach(), sigma, actions, eps)[:, :, 1:]  # critic
        scale = (x0_hat - real).abs().mean(dim=(1, 2, 3, 4, 5), keepdim=True)
        g = torch.nan_to_num((fake - real) / scale).clamp(-10.0, 10.0)  # eq. dmd: direction
        target = (x0_hat - g).detach()
    return 0.5 * ((x0_hat - target) ** 2).mean()  # eq. dmd: its gradient is g / n


def critic_loss(critic, x0, actions, generator: torch.Generator):
    """Flow matching of the critic on the student's (detached) clips, standard noise, frame 0
    clean."""
    B, P, T = x0.shape[:3]
    sig = flow.noise_levels(B, P, T, "standard", generator)
    sig[:, :, 0] = 0.0
    eps = torch.randn(x0.shape, generator=generator)
    v, _ = critic(
        flow.noisy(x0, sig, eps), sig, actions, torch.ones(T, T, dtype=torch.bool), torch.arange(T)
    )
    weight = torch.ones(B, P, T)
    weight[:, :, 0] = 0.0
    return flow.flow_matching_loss(v, x0.detach(), eps, weight)


def saved_bytes(fn, params=()) -> dict:
    """Bytes autograd saves for backward while ``fn()`` runs, each storage counted once and
    the weights in ``params`` left out: token activations (``structural``) apart from the dense
    attention masks the attention calls announce (``attention``: queries x keys, which a
    block-sparse kernel would not store). Returns the two counts and ``fn``'s output."""
    model_lib.ATTENTION_TENSORS.clear()
    weights = {p.untyped_storage().data_ptr() for p in params}
    seen: dict = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights:
            seen[ptr] = max(seen.get(ptr, 0), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    attn = sum(size for ptr, size in seen.items() if ptr in model_lib.ATTENTION_TENSORS)
    return {"structural": sum(seen.values()) - attn, "attention": attn, "output": out}


def check_window(window: int, T: int) -> int:
    """The student's window must be at least 1 and at most the clip."""
    return checks.integer(window, "window", minimum=1, maximum=T)
