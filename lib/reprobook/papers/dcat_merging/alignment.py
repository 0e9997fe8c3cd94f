"""Cross-modal alignment and the InfoNCE mutual-information lower bound, per layer.

Paper: "Directional Cross-Modal Alignment Transfer (DCAT)" (NeurIPS 2026 submission, no arXiv
id). The abstract derives a mutual-information lower bound that is monotonic in alignment and
tracks downstream performance; its form is not known to us. We use the InfoNCE bound
(van den Oord et al. 2018), eq. `dcat-merging-infonce` of notebooks/14_dcat_merging/index.md,
on pooled hidden states of the modality tokens and of the paired caption tokens.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from reprobook.core import checks

from . import data

__all__ = ["info_nce_bound", "alignment", "pooled_states", "layer_bounds"]


def _cosines(m, t) -> np.ndarray:
    m = checks.array(m, "m", ndim=2)
    t = checks.array(t, "t", ndim=2, shape=m.shape)
    if m.shape[0] < 2:
        raise checks.InputError(f"m and t must hold at least 2 pairs, got {m.shape[0]}")
    mn = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    tn = t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
    return mn @ tn.T  # s_ij = cos(m_i, t_j)


def info_nce_bound(m, t, tau: float) -> float:
    """I(M; T) >= log N - L_NCE with L_NCE = -(1/N) sum_i log softmax_j(s_ij / tau)_i and
    s_ij = cos(m_i, t_j), for N pairs (m_i, t_i) (rows of ``m`` and ``t``). At most log N.

    Implements eq. `dcat-merging-infonce` of notebooks/14_dcat_merging/index.md.
    """
    tau = checks.real(tau, "tau", above=0)
    s = _cosines(m, t) / tau  # (N, N) critic scores
    log_softmax = s - s.max(1, keepdims=True)
    log_softmax -= np.log(np.exp(log_softmax).sum(1, keepdims=True))
    l_nce = -float(np.mean(np.diag(log_softmax)))  # eq. infonce: the contrastive loss
    return math.log(s.shape[0]) - l_nce  # eq. infonce: log N - L_NCE


def alignment(m, t) -> dict[str, float]:
    """The alignment quantities: the mean cosine of paired states, the mean cosine of mismatched
    ones (pairs of different classes are not told apart here: all i != j), and their gap."""
    s = _cosines(m, t)
    n = s.shape[0]
    pos = float(np.trace(s) / n)
    neg = float((s.sum() - np.trace(s)) / (n * (n - 1)))
    return {"positive": pos, "negative": neg, "gap": pos - neg}


@torch.no_grad()
def pooled_states(model, split: data.Split) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each layer (embeddings, then each block) the pooled states (m, t), each (N, d):
    m_i the mean over the soft-token positions of sample i's prompt, t_i the mean over the
    caption positions ("this is a <k>") of its paired caption, both in the same model."""
    model.eval()
    pos = torch.as_tensor(data.SOFT_POSITIONS)
    x = torch.as_tensor(split.x, dtype=torch.float32)
    prompts = torch.as_tensor(data.prompt_ids(split.y))[:, :-1]
    captions = torch.as_tensor(data.caption_ids(split.y))[:, :-1]
    _, hm = model(x, prompts, hidden=True)
    _, ht = model.llm.run(model.llm.tok(captions), hidden=True)
    return [
        (a[:, pos].mean(1).double().numpy(), b[:, pos].mean(1).double().numpy())
        for a, b in zip(hm, ht)
    ]


def layer_bounds(model, split: data.Split, tau: float) -> np.ndarray:
    """The InfoNCE bound at every layer (L + 1 values: embeddings, then each block)."""
    return np.array([info_nce_bound(m, t, tau) for m, t in pooled_states(model, split)])
