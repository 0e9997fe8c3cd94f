"""The learned noise-level warp of the training loss (following the paper's code: a "CDCD-style"
piecewise-linear warp, fitted to the observed cross-entropy over the noise level, that draws
the training levels through it, with the loss importance-weighted).

Paper: "Spherical Flows for Sampling Categorical Data" (arXiv 2605.05629; full text not read).
The code has the warp as an option; the details below are our reconstruction of it and
implement eq. `vmf-warp` of notebooks/16_vmf_sphere_flow/index.md.

The level (kappa on the vMF path, t on the baselines) is written u * level_max with u in
[0, 1]. The warp keeps a running mean (an exponential moving average) of the cross-entropy of
training sequences in ``bins`` equal bins of u. The cross-entropy falls as the level rises; the
warp's CDF at the bin centres c_j is the fraction of the total fall reached by then,

    G(c_j) = (m_0 - m_j) / (m_0 - m_{n-1}),   m_j = min_{i <= j} (running mean of bin i),

linear between the centres (and flat before c_0 and after c_{n-1}), mixed with the uniform law,
F(u) = (1 - mix) G(u) + mix u, so that every level keeps a density of at least ``mix``. Levels
are drawn as u = F^{-1}(v), v ~ U(0, 1); the loss of a sequence drawn at u is weighted by
1 / F'(u), so that its expectation is still the uniform-level loss of eq. `vmf-ce` (the
importance weight). Until every bin has been seen, or when the curve does not fall, F is
uniform. The mixing weight and the bin count are our choices.
"""

from __future__ import annotations

import numpy as np
import torch

from reprobook.core import checks

__all__ = ["NoiseWarp"]


class NoiseWarp(torch.nn.Module):
    """Running cross-entropy per level bin, its piecewise-linear CDF, draws and weights."""

    def __init__(self, bins: int = 20, *, mix: float = 0.1, decay: float = 0.95):
        super().__init__()
        self.bins = checks.integer(bins, "bins", minimum=2)
        self.mix = checks.real(mix, "mix", above=0, maximum=1)
        self.decay = checks.real(decay, "decay", minimum=0, below=1)
        self.register_buffer("ce", torch.zeros(self.bins, dtype=torch.float64))
        self.register_buffer("seen", torch.zeros(self.bins, dtype=torch.float64))

    def knots(self) -> tuple[np.ndarray, np.ndarray]:
        """(u knots, F at the knots) of the current piecewise-linear CDF, both increasing from 0
        to 1 (eq. `vmf-warp`)."""
        n = self.bins
        centres = (np.arange(n) + 0.5) / n
        u = np.concatenate([[0.0], centres, [1.0]])
        m = np.minimum.accumulate(self.ce.cpu().numpy())
        fall = m[0] - m[-1]
        if (self.seen.cpu().numpy() == 0).any() or not fall > 1e-9:
            return u, u.copy()
        g = np.concatenate([[0.0], (m[0] - m) / fall, [1.0]])
        return u, (1.0 - self.mix) * g + self.mix * u

    def density(self, u) -> np.ndarray:
        """F'(u), piecewise constant, at levels u in [0, 1]."""
        uk, fk = self.knots()
        u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
        j = np.clip(np.searchsorted(uk, u, side="right") - 1, 0, len(uk) - 2)
        return (fk[j + 1] - fk[j]) / (uk[j + 1] - uk[j])

    def draw(
        self, n: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """n levels u = F^{-1}(v), v ~ U(0, 1), and their importance weights 1 / F'(u) (both
        (n,) float64 on the CPU)."""
        n = checks.integer(n, "n", minimum=0)
        v = torch.rand(n, generator=generator, dtype=torch.float64).numpy()
        uk, fk = self.knots()
        u = np.interp(v, fk, uk)  # F is strictly increasing (mix > 0), so this inverts it
        return torch.from_numpy(u), torch.from_numpy(1.0 / self.density(u))

    @torch.no_grad()
    def update(self, u: torch.Tensor, ce: torch.Tensor) -> None:
        """Fold per-sequence cross-entropies ``ce`` at levels ``u`` (both (B,)) into the running
        mean of their bins (the first observation of a bin sets it)."""
        u = torch.as_tensor(u, dtype=torch.float64).reshape(-1).cpu()
        ce = torch.as_tensor(ce, dtype=torch.float64).reshape(-1).cpu()
        if u.shape != ce.shape:
            raise ValueError(
                f"u and ce must have the same length, got {u.numel()} and {ce.numel()}"
            )
        j = (u * self.bins).long().clamp(0, self.bins - 1)
        for b in torch.unique(j).tolist():
            x = ce[j == b].mean()
            if self.seen[b] == 0:
                self.ce[b] = x
            else:
                self.ce[b] = self.decay * self.ce[b] + (1 - self.decay) * x
            self.seen[b] += 1
