"""Merges of MLLM state dicts that touch only the LLM, and the DCAT closed form.

Paper: "Directional Cross-Modal Alignment Transfer (DCAT)" (NeurIPS 2026 submission, no arXiv
id). The abstract says that DCAT's alignment-enhancing objective has a closed-form solution in
weight space computed from a small calibration set; the objective itself is our reconstruction
(eq. `dcat-merging-objective` of notebooks/14_dcat_merging/index.md), with two readings:

* DCAT-A (:func:`dcat_closed_form`, eq. `dcat-merging-closed-form`): keep the recipient's
  processing of its modality tokens and adopt the donor's processing of text tokens;
* DCAT-B (:func:`dcat_b_closed_form`, eq. `dcat-merging-variant-b`): map the recipient's
  modality-token inputs to what the donor computes on the paired caption.

The baselines are the published merges, written on state dicts in a few lines each: averaging,
task arithmetic (Ilharco et al. 2023), TIES (Yadav et al. 2023), DARE (Yu et al. 2024) and
RegMean (Jin et al. 2023). Every merge returns a copy of the recipient's state dict whose keys
``llm.*`` are replaced: the encoder buffers and the projector stay the recipient's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from reprobook.core import checks

__all__ = [
    "llm_keys",
    "task_vector",
    "task_arithmetic",
    "average",
    "ties",
    "dare",
    "regmean_weight",
    "regmean",
    "dcat_closed_form",
    "dcat_b_closed_form",
    "dcat_isotropic",
    "dcat",
    "dcat_b",
    "layer_inputs",
    "gram",
    "vector_norm",
]

State = Mapping[str, torch.Tensor]


def llm_keys(state: State) -> list[str]:
    """The keys that merges may change: the LLM's parameters (``llm.*``)."""
    keys = [k for k in state if k.startswith("llm.")]
    if not keys:
        raise checks.InputError("state must hold LLM parameters (keys 'llm.*'), found none")
    return keys


def _merged(recipient: State, new: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {k: v.clone() for k, v in recipient.items()}
    for k, v in new.items():
        if k not in out or out[k].shape != v.shape:
            raise checks.InputError(f"merged parameter {k} does not match the recipient's")
        out[k] = v.to(out[k].dtype)
    return out


def task_vector(state: State, base: State) -> dict[str, torch.Tensor]:
    """tau = W - W0 on the LLM's parameters."""
    return {k: state[k] - base[k] for k in llm_keys(state)}


def vector_norm(vector: Mapping[str, torch.Tensor]) -> float:
    """The Frobenius norm of a task vector over all of its tensors."""
    return float(torch.sqrt(sum((v.double() ** 2).sum() for v in vector.values())))


def task_arithmetic(recipient: State, vector: Mapping[str, torch.Tensor], alpha: float) -> dict:
    """W_T + alpha tau on the LLM (tau: a donor's task vector); alpha = 0 is the recipient.

    Implements eq. `dcat-merging-ta` of notebooks/14_dcat_merging/index.md.
    """
    alpha = checks.real(alpha, "alpha")
    for k, v in vector.items():
        if k not in recipient or recipient[k].shape != v.shape:
            raise checks.InputError(f"task-vector entry {k} does not match the recipient's")
    return _merged(recipient, {k: recipient[k] + alpha * v for k, v in vector.items()})


def average(recipient: State, donor: State) -> dict:
    """(W_T + W_S) / 2 on the LLM."""
    return _merged(recipient, {k: 0.5 * (recipient[k] + donor[k]) for k in llm_keys(recipient)})


def ties(
    recipient: State,
    base: State,
    vectors: Sequence[Mapping[str, torch.Tensor]],
    density: float,
    scale: float,
) -> dict:
    """TIES-merging: W0 + scale * tau_m, where each task vector keeps its top ``density``
    fraction of entries by magnitude (per tensor), the sign of each entry is elected as the
    sign of the sum of the trimmed vectors, and tau_m is the mean of the trimmed entries that
    agree with it. With one vector and density 1 it is task arithmetic from W0."""
    density = checks.real(density, "density", above=0, maximum=1)
    scale = checks.real(scale, "scale")
    if len(vectors) < 1:
        raise checks.InputError("vectors must hold at least one task vector, got none")
    new = {}
    for k in vectors[0]:
        trimmed = []
        for tau in vectors:
            v = tau[k]
            keep = max(1, int(round(density * v.numel())))
            cut = v.abs().flatten().kthvalue(v.numel() - keep + 1).values
            trimmed.append(torch.where(v.abs() >= cut, v, torch.zeros_like(v)))
        t = torch.stack(trimmed)  # (n, ...)
        sign = torch.sign(t.sum(0))
        agree = (torch.sign(t) == sign) & (t != 0)
        count = agree.sum(0).clamp(min=1)
        new[k] = base[k] + scale * (t * agree).sum(0) / count
    return _merged(recipient, new)


def dare(vector: Mapping[str, torch.Tensor], drop: float, seed: int) -> dict:
    """DARE: drop each entry of a task vector with probability ``drop`` and rescale the kept
    ones by 1 / (1 - drop) (unbiased); the mask is drawn from ``seed``."""
    drop = checks.real(drop, "drop", minimum=0, below=1)
    g = torch.Generator().manual_seed(checks.integer(seed, "seed", minimum=0))
    out = {}
    for k, v in vector.items():
        keep = torch.rand(v.shape, generator=g) >= drop
        out[k] = torch.where(keep, v / (1 - drop), torch.zeros_like(v))
    return out


def _shrink(G: torch.Tensor, scale: float) -> torch.Tensor:
    """RegMean's G~ = scale G + (1 - scale) diag(G)."""
    return scale * G + (1 - scale) * torch.diag(torch.diagonal(G))


def _right_solve(B: torch.Tensor, A: torch.Tensor, ridge: bool, remedy: str) -> torch.Tensor:
    """B A^{-1} for a symmetric positive semi-definite A (d, d), by ``torch.linalg.solve``.

    With a ridge (``ridge``: A >= gamma I, gamma a fixed share of A's mean diagonal) A is
    well conditioned and nothing is checked. Without one, A may be singular (fewer calibration
    rows than inputs, an input that is always zero), and then B A^{-1} is whatever the
    machine's rounding makes of it: an A whose smallest eigenvalue is at most d eps times its
    largest is refused with an error that names ``remedy``."""
    if not ridge:
        lam = torch.linalg.eigvalsh(A)  # ascending
        if not lam[0] > A.shape[0] * torch.finfo(A.dtype).eps * lam[-1].abs():
            raise checks.InputError(
                f"the {A.shape[0]} x {A.shape[0]} Gram system is singular to working precision "
                f"(eigenvalues from {float(lam[0]):.3g} to {float(lam[-1]):.3g}): {remedy}"
            )
    return torch.linalg.solve(A, B.T).T  # B A^{-1}, A symmetric


def regmean_weight(weights: Sequence[torch.Tensor], grams: Sequence[torch.Tensor], scale=1.0):
    """RegMean for one linear layer: W* = (sum_i W_i G~_i)(sum_i G~_i)^{-1}, the minimiser of
    sum_i ||W X_i - W_i X_i||^2 (G_i = X_i X_i^T, off-diagonals shrunk by ``scale``).

    With ``scale`` < 1 the shrunk Grams are positive definite when every input has some
    energy (a positive diagonal); a singular system (``scale`` = 1 with fewer calibration
    rows than inputs, or an input that is zero on every row) raises an error."""
    scale = checks.real(scale, "scale", minimum=0, maximum=1)
    Gs = [_shrink(G.double(), scale) for G in grams]
    num = sum(W.double() @ G for W, G in zip(weights, Gs))
    A = sum(Gs)
    diag = torch.diagonal(A)
    ridge = scale < 1 and bool(diag.min() > 1e-12 * diag.max())  # (1 - scale) diag(G) holds
    W = _right_solve(num, A, ridge, "use scale < 1, or more calibration samples")
    return W.to(weights[0].dtype)


def regmean(recipient: State, donor: State, grams_t: Mapping, grams_s: Mapping, scale: float):
    """RegMean of recipient and donor: each linear weight with Gram matrices from its own model's
    calibration inputs (:func:`regmean_weight`); the other LLM parameters averaged."""
    new = {}
    for k in llm_keys(recipient):
        if k in grams_t:
            new[k] = regmean_weight([recipient[k], donor[k]], [grams_t[k], grams_s[k]], scale)
        else:
            new[k] = 0.5 * (recipient[k] + donor[k])
    return _merged(recipient, new)


def dcat_closed_form(W_T, W_S, G_m, G_t, lam: float, gamma: float) -> torch.Tensor:
    """DCAT-A for one linear layer (our reconstruction), the minimiser of
    ||(W - W_T) X_m||^2 + lam ||(W - W_S) X_t||^2 + gamma ||W - W_T||^2:
    W* = [W_T (G_m + gamma I) + lam W_S G_t] (G_m + lam G_t + gamma I)^{-1}.

    gamma > 0 bounds the condition number of the system by (trace + gamma) / gamma, so the
    solve is accurate on any machine (about 1e6 with the notebooks' gamma); with gamma = 0
    the Gram matrices are often singular (fewer calibration rows than inputs), and then a
    system singular to working precision raises an error instead of returning noise.

    Implements eq. `dcat-merging-closed-form` of notebooks/14_dcat_merging/index.md.
    """
    lam = checks.real(lam, "lam", minimum=0)
    gamma = checks.real(gamma, "gamma", minimum=0)
    W_T, W_S, G_m, G_t = (torch.as_tensor(a).double() for a in (W_T, W_S, G_m, G_t))
    eye = torch.eye(G_m.shape[0], dtype=torch.float64)
    A = G_m + lam * G_t + gamma * eye  # (d_in, d_in): the objective's curvature
    B = W_T @ (G_m + gamma * eye) + lam * W_S @ G_t  # (d_out, d_in): its linear term
    return _right_solve(B, A, gamma > 0, "give gamma > 0")  # B A^{-1}, A symmetric


def dcat_isotropic(W_T, W_S, lam: float, gamma: float) -> torch.Tensor:
    """DCAT-A for one linear layer when nothing is known of its inputs (G_m = G_t = I): the
    closed form of :func:`dcat_closed_form` then reduces to
    W* = [(1 + gamma) W_T + lam W_S] / (1 + lam + gamma)
       = W_T + lam / (1 + lam + gamma) (W_S - W_T),
    a step from the recipient toward the donor. It needs no calibration data and no solve, so
    it applies to layers of any width (ModelCompose's LoRAs on Vicuna-7B, whose modality tokens
    cannot be formed here); returned in the dtype and on the device of ``W_T``.

    Implements eq. `dcat-merging-closed-form` of notebooks/14_dcat_merging/index.md with
    G_m = G_t = I.
    """
    lam = checks.real(lam, "lam", minimum=0)
    gamma = checks.real(gamma, "gamma", minimum=0)
    W_T, W_S = torch.as_tensor(W_T), torch.as_tensor(W_S)
    checks.same_shape("W_T", W_T, "W_S", W_S)
    step = lam / (1.0 + lam + gamma)  # eq. closed-form with G_m = G_t = I
    return W_T + step * (W_S.to(W_T.dtype) - W_T)


def dcat_b_closed_form(W_TA, W_S, G_m, C_tm, gamma: float) -> torch.Tensor:
    """DCAT-B for one linear layer (our second reading): the minimiser of
    ||W X_m - W_S X_t||^2 + gamma ||W - W_TA||^2, whose targets are the donor's outputs on the
    caption tokens paired with the modality tokens:
    W* = (W_S C + gamma W_TA)(G_m + gamma I)^{-1}, C = X_t X_m^T, G_m = X_m X_m^T.

    Implements eq. `dcat-merging-variant-b` of notebooks/14_dcat_merging/index.md.
    """
    gamma = checks.real(gamma, "gamma", above=0)
    W_TA, W_S, G_m, C_tm = (torch.as_tensor(a).double() for a in (W_TA, W_S, G_m, C_tm))
    A = G_m + gamma * torch.eye(G_m.shape[0], dtype=torch.float64)  # eq. variant-b: curvature
    B = W_S @ C_tm + gamma * W_TA  # Y_t X_m^T + gamma W_TA
    return _right_solve(B, A, True, "")  # gamma > 0: A >= gamma I


def dcat(
    recipient: State,
    donor: State,
    vector: Mapping[str, torch.Tensor],
    grams_m: Mapping,
    grams_t: Mapping,
    lam: float,
    gamma_rel: float,
    alpha: float,
) -> dict:
    """DCAT-A on a whole LLM: every linear weight by :func:`dcat_closed_form` with the
    recipient's Gram matrices at modality (G_m) and text (G_t) positions and
    gamma = gamma_rel * mean diag(G_m + G_t); the other LLM parameters (embeddings, norms,
    biases) by task arithmetic W_T + alpha tau_S."""
    gamma_rel = checks.real(gamma_rel, "gamma_rel", minimum=0)
    new = {}
    for k in llm_keys(recipient):
        if k in grams_m:
            G_m, G_t = grams_m[k], grams_t[k]
            gamma = gamma_rel * float(torch.diagonal(G_m + G_t).mean())
            W = dcat_closed_form(recipient[k], donor[k], G_m, G_t, lam, gamma)
            new[k] = W.to(recipient[k].dtype)
        else:
            new[k] = recipient[k] + alpha * vector[k]
    return _merged(recipient, new)


def dcat_b(ta_state: State, donor: State, grams_m: Mapping, cross: Mapping, gamma_rel: float):
    """DCAT-B on a whole LLM, around the task-arithmetic merge ``ta_state``: every linear
    weight by :func:`dcat_b_closed_form` with gamma = gamma_rel * mean diag(G_m); the other
    parameters stay those of ``ta_state``."""
    gamma_rel = checks.real(gamma_rel, "gamma_rel", above=0)
    new = {}
    for k in grams_m:
        gamma = gamma_rel * float(torch.diagonal(grams_m[k]).mean())
        W = dcat_b_closed_form(ta_state[k], donor[k], grams_m[k], cross[k], gamma)
        new[k] = W.to(ta_state[k].dtype)
    return _merged(ta_state, new)


@torch.no_grad()
def layer_inputs(module: nn.Module, forward: Callable[[], object]) -> dict[str, torch.Tensor]:
    """The inputs (N, L, d_in) of every ``nn.Linear`` under ``module.llm`` during ``forward()``,
    keyed by the name of its weight in the state dict (``llm.blocks.0.qkv.weight``...),
    gathered with forward hooks (removed afterwards)."""
    found: dict[str, list[torch.Tensor]] = {}
    handles = []
    for name, sub in module.llm.named_modules():
        if isinstance(sub, nn.Linear):
            key = f"llm.{name}.weight"

            def hook(_m, args, _out, key=key):
                found.setdefault(key, []).append(args[0].detach().double())

            handles.append(sub.register_forward_hook(hook))
    try:
        forward()
    finally:
        for h in handles:
            h.remove()
    return {k: torch.cat(v) for k, v in found.items()}


def gram(X: torch.Tensor, positions) -> torch.Tensor:
    """G = sum over samples and the given positions of x x^T, for inputs X (N, L, d_in)."""
    idx = torch.as_tensor(np.asarray(positions), dtype=torch.long)
    Z = X[:, idx].reshape(-1, X.shape[-1])
    return Z.T @ Z
