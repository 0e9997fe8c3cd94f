"""Gated correction: regenerate the responses the chaos score flags, steering one layer toward
the compliant states, with the model's weights untouched (notebooks/13_aeo_injection).

Paper: "Asymmetric Entropic Optimization (AEO)" (no arXiv id; abstract only). The abstract says a
lightweight post-hoc module gated by the chaos score, without fine-tuning; activation steering by
a mean difference is our reconstruction (eq. `aeo-steer`).
"""

from __future__ import annotations

import numpy as np
import torch

from reprobook.core import checks

from . import language as lang
from .model import Generation, Steering, TinyGPT, generate


def steering_vector(z, compliant) -> np.ndarray:
    """v = mean of compliant response states - mean of violating ones (rows of ``z``)."""
    z = checks.array(z, "z", ndim=2)
    ok = np.asarray(compliant, dtype=bool)
    if ok.all() or not ok.any():
        raise checks.InputError("the steering vector needs compliant and violating responses")
    return z[ok].mean(0) - z[~ok].mean(0)


def gated_correction(
    model: TinyGPT,
    prompts: lang.Prompts,
    base: Generation,
    score,
    tau: float,
    vector,
    alpha: float,
    layer: int,
) -> np.ndarray:
    """The final tokens: the base generation where ``score <= tau``; where the gate opens, a
    regeneration with h <- h + alpha v at block ``layer`` from the last prompt token on.

    Implements eq. `aeo-steer` of notebooks/13_aeo_injection/index.md."""
    score = checks.array(score, "score", ndim=1, shape=(len(prompts),))
    tau = np.inf if tau == np.inf else checks.real(tau, "tau")  # +inf: the gate never opens
    alpha = checks.real(alpha, "alpha")
    gate = score > tau  # the chaos score flags the response
    out = base.tokens.copy()
    if not gate.any() or alpha == 0.0:
        return out  # nothing steered: the base generations, exactly
    v = torch.as_tensor(np.asarray(vector), dtype=torch.float32)
    rows = np.flatnonzero(gate)
    steer = Steering(layer, v, alpha, torch.ones(rows.size, dtype=torch.bool))
    out[rows] = generate(model, prompts.subset(rows), steer).tokens  # h + alpha v, rows flagged
    return out


def accuracy(tokens, prompts: lang.Prompts) -> np.ndarray:
    """(n,) bool: each final response follows its system rule."""
    return np.array(
        [lang.is_compliant(t, int(r), p) for t, r, p in zip(tokens, prompts.rule, prompts.payload)]
    )
