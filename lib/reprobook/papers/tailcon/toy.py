"""The erosion toy of chapter 08 (TailCon, NeurIPS 2026): a linear softmax head trained by
online SGD on three Gaussian classes, two frequent and one rare (rate ``rho``), the first
frequent class's mean at cosine ``kappa`` from the rare one's (the conflict), with and without
TailCon's memory and FOCUS. Our construction to illustrate the paper's local analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from reprobook.core import checks

from . import memory

TAIL = 2  # the rare class; 0 conflicts with it, 1 does not


def toy_means(dim: int, kappa: float, radius: float) -> np.ndarray:
    """Class means ``(3, dim)``: the tail on e1, class 0 at cosine ``kappa`` from it, class 1
    on -e2 (orthogonal to the tail)."""
    dim = checks.integer(dim, "dim", minimum=3)
    kappa = checks.real(kappa, "kappa", minimum=0.0, maximum=1.0)
    mu = np.zeros((3, dim))
    mu[TAIL, 0] = 1.0
    mu[0, 0], mu[0, 1] = kappa, np.sqrt(1.0 - kappa**2)
    mu[1, 2] = 1.0
    return radius * mu


def toy_stream(n: int, rho: float, means: np.ndarray, rng, balanced: bool = False):
    """``n`` draws ``x = mu_y + N(0, I)``: the tail with probability ``rho`` and the two frequent
    classes with ``(1 - rho) / 2`` each, or every class equally (``balanced``)."""
    rho = checks.probability(rho, "rho")
    rng = checks.generator(rng)
    p = np.full(3, 1 / 3) if balanced else np.array([(1 - rho) / 2, (1 - rho) / 2, rho])
    y = rng.choice(3, size=n, p=p)
    return means[y] + rng.standard_normal((n, means.shape[1])), y


@dataclass
class ToyRun:
    tail_recall: float  # on a balanced test set, at the end
    margins: np.ndarray  # mean tail margin on the test tail items, every `trace_every` steps


def train_toy(
    x,
    y,
    x_test,
    y_test,
    *,
    lr=0.05,
    tailcon=False,
    capacity=16,
    focus_every=200,
    focus_steps=50,
    k=5,
    T=0.1,
    trace_every=20,
    seed=0,
) -> ToyRun:
    """Online SGD (one item a step) of a linear softmax head ``z = W x + b``; with ``tailcon``
    the rare or low-margin items enter the memory and FOCUS (LWS surrogate) runs every
    ``focus_every`` steps and after the last. The erosion it shows is eq. `tailcon-erosion` of
    notebooks/08_tailcon/index.md."""
    d = x.shape[1]
    W, b = np.zeros((3, d)), np.zeros(3)
    mem = memory.EpisodicMemory(3, capacity, d) if tailcon else None
    rare = (False, False, True)
    tail = y_test == TAIL
    margins = []
    for t in range(len(y)):
        z = W @ x[t] + b
        p = np.exp(z - z.max())
        p /= p.sum()
        margin = z[y[t]] - np.delete(z, y[t]).max()  # eq. tailcon-insert, as insert_mask
        if mem is not None and (rare[y[t]] or margin < 0.0):
            mem.add(
                torch.tensor(x[t][None], dtype=torch.float32),
                torch.tensor([y[t]]),
                torch.tensor([t]),
            )
        p[y[t]] -= 1.0  # gradient of CE with respect to z
        W -= lr * np.outer(p, x[t])
        b -= lr * p
        last = t == len(y) - 1
        if mem is not None and ((t + 1) % focus_every == 0 or last):
            W, b = _focus_numpy(W, b, mem, focus_steps, k, T, seed + t)
        if (t + 1) % trace_every == 0:
            zt = x_test[tail] @ W.T + b
            margins.append(np.mean(zt[:, TAIL] - np.delete(zt, TAIL, axis=1).max(axis=1)))
    pred = (x_test @ W.T + b).argmax(axis=1)
    return ToyRun(float(np.mean(pred[tail] == TAIL)), np.asarray(margins))


def _focus_numpy(W, b, mem, steps, k, T, seed):
    H, labels, _ = mem.read()
    head = nn.Linear(W.shape[1], 3)
    with torch.no_grad():
        head.weight.copy_(torch.as_tensor(W))
        head.bias.copy_(torch.as_tensor(b))
    memory.focus(head, H, labels, kind="lws", steps=steps, k=k, T=T, seed=seed)
    return head.weight.detach().double().numpy(), head.bias.detach().double().numpy()


def erosion_grid(cfg, seeds) -> dict:
    """Tail recall with and without TailCon over ``(rho, kappa)`` of the grid ``cfg.rhos`` x
    ``cfg.kappas`` for each seed, the same stream for both. ``cfg`` is notebook 4's
    :class:`~reprobook.papers.tailcon.config.ErosionConfig` (stream and test sizes, the toy's
    geometry, the SGD step and TailCon's memory and FOCUS knobs). Returns arrays
    ``(seed, rho, kappa)`` and the margin traces."""
    rhos, kappas = cfg.rhos, cfg.kappas
    shape = (len(seeds), len(rhos), len(kappas))
    out = {"plain": np.zeros(shape), "tailcon": np.zeros(shape), "traces": {}}
    for s, seed in enumerate(seeds):
        for i, rho in enumerate(rhos):
            for j, kappa in enumerate(kappas):
                rng = np.random.default_rng([seed, i, j])
                mu = toy_means(cfg.dim, kappa, cfg.radius)
                x, y = toy_stream(cfg.n_steps, rho, mu, rng)
                xt, yt = toy_stream(cfg.n_test, rho, mu, rng, balanced=True)
                kw = dict(
                    lr=cfg.lr,
                    capacity=cfg.capacity,
                    focus_every=cfg.focus_every,
                    focus_steps=cfg.focus_steps,
                    seed=seed,
                )
                for name in ("plain", "tailcon"):
                    r = train_toy(x, y, xt, yt, tailcon=name == "tailcon", **kw)
                    out[name][s, i, j] = r.tail_recall
                    out["traces"][(name, seed, rho, kappa)] = r.margins
    out["gain"] = out["tailcon"] - out["plain"]
    return out


def c3_score(gain: np.ndarray, tolerance: float = 0.05) -> np.ndarray:
    """Per seed, the smallest of three margins of C3 on a ``(seed, rho, kappa)`` gain array
    with ``rho`` falling along axis 1 and ``kappa`` rising along axis 2: the gain at the rarest,
    most conflicting cell over (a) the most frequent rho at that kappa and (b) kappa = 0 at that
    rho, and (c) ``tolerance`` minus the largest absolute gain at kappa = 0. Positive means all
    three hold."""
    g = checks.array(gain, "gain", ndim=3)
    corner = g[:, -1, -1]
    grows_rho = corner - g[:, 0, -1]
    grows_kappa = corner - g[:, -1, 0]
    vanishes = tolerance - np.abs(g[:, :, 0]).max(axis=1)
    return np.minimum(np.minimum(grows_rho, grows_kappa), vanishes)
