"""The long-tail baselines' losses and heads for chapter 08 (TailCon, NeurIPS 2026): the
logit-adjusted loss and post-hoc adjustment (Menon et al., ICLR 2021), LDAM with deferred
re-weighting (Cao et al., NeurIPS 2019), and the learnable weight scaling of the decoupled
classifier (Kang et al., ICLR 2020). These are the baselines, not the paper's contribution.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from reprobook.core import checks


def log_prior(counts) -> torch.Tensor:
    """``log pi_c`` of the training counts, as a float tensor."""
    counts = checks.array(counts, "counts", ndim=1)
    if np.any(counts <= 0):
        raise checks.InputError("counts must all be positive")
    return torch.log(torch.as_tensor(counts / counts.sum(), dtype=torch.float32))


def la_loss(logits: torch.Tensor, y: torch.Tensor, logprior: torch.Tensor, tau: float = 1.0):
    """The logit-adjusted loss ``CE(z + tau * log pi, y)``; ``tau = 0`` is plain CE.

    Implements eq. `tailcon-la` of notebooks/08_tailcon/index.md (left).
    """
    tau = checks.real(tau, "tau", minimum=0.0)
    return F.cross_entropy(logits + tau * logprior.to(logits), y)


def posthoc_adjust(logits: torch.Tensor, logprior: torch.Tensor, tau: float = 1.0):
    """Post-hoc logit adjustment: ``z - tau * log pi``.

    Implements eq. `tailcon-la` of notebooks/08_tailcon/index.md (right).
    """
    tau = checks.real(tau, "tau", minimum=0.0)
    return logits - tau * logprior.to(logits)


def ldam_margins(counts, max_margin: float = 0.5) -> torch.Tensor:
    """LDAM's margins ``m_c proportional to n_c^(-1/4)``, scaled so the largest is
    ``max_margin``."""
    counts = checks.array(counts, "counts", ndim=1)
    max_margin = checks.real(max_margin, "max_margin", above=0.0)
    if np.any(counts <= 0):
        raise checks.InputError("counts must all be positive")
    m = counts**-0.25
    return torch.as_tensor(m * (max_margin / m.max()), dtype=torch.float32)


def drw_weights(counts, beta: float = 0.9999) -> torch.Tensor:
    """Class weights from the effective number ``(1 - beta^n) / (1 - beta)``, inverted and
    normalised to sum to the number of classes."""
    counts = checks.array(counts, "counts", ndim=1)
    beta = checks.real(beta, "beta", minimum=0.0, below=1.0)
    w = (1.0 - beta) / (1.0 - beta**counts)
    return torch.as_tensor(w * counts.size / w.sum(), dtype=torch.float32)


def ldam_loss(cosine_logits, y, margins, scale: float = 30.0, weight=None):
    """LDAM: ``CE(s * (z - m_y e_y), y)`` on cosine logits, optionally class-weighted (DRW).

    Implements eq. `tailcon-ldam` of notebooks/08_tailcon/index.md.
    """
    shifted = (
        cosine_logits - F.one_hot(y, cosine_logits.shape[1]) * margins.to(cosine_logits)[y, None]
    )
    return F.cross_entropy(
        scale * shifted, y, weight=None if weight is None else weight.to(shifted)
    )


class CosineHead(nn.Module):
    """Cosine classifier ``z_c = <h/|h|, w_c/|w_c|>``, LDAM's head."""

    def __init__(self, dim: int, n_classes: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_classes, dim).uniform_(-1, 1) * 1e-2)

    def forward(self, h):
        return F.normalize(h, dim=1) @ F.normalize(self.weight, dim=1).T


class LWS(nn.Module):
    """Learnable weight scaling: ``z'_c = s_c z_c + b_c`` (identity at ``s = 1, b = 0``).
    Also TailCon's first low-capacity surrogate, eq. `tailcon-surrogate`."""

    def __init__(self, n_classes: int):
        super().__init__()
        n_classes = checks.integer(n_classes, "n_classes", minimum=2)
        self.scale = nn.Parameter(torch.ones(n_classes))
        self.bias = nn.Parameter(torch.zeros(n_classes))

    def forward(self, z, h=None):
        return self.scale * z + self.bias
