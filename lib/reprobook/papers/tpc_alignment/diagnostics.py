"""Diagnostics and evaluation metrics of chapter 04 (Section 3's preliminary study, Appendix B).

Paper: "Text as Partial Constraint: Core-Residual Alignment for Robust Vision-Language Learning",
arXiv 2607.03143.

Everything here works on plain tensors, never on a model: image embeddings v (N, d), caption
embeddings q (N, K, d) (the raw views t, or the filtered cores c_hat), all L2-normalised, and an
optional semantic relevance matrix (N*K, N) bool whose row i*K + k marks the images that caption
(i, k) correctly describes (``None``: only image i). Query (i, k) is row i*K + k of
q.reshape(N*K, d).

* Section 3 diagnostics: view dispersion, consensus residual leakage (v . r)^2, rank volatility,
  hard-negative mass, confident error, hard-negative accuracy.
* Appendix B retrieval: text->image and image->text R@{1,5,10}, mean-over-captions and
  worst-caption R@1, caption sensitivity (std of the rank across a image's captions).
* Appendix B calibration: candidate sets (ground truth + top-100 hard negatives + 300 random
  negatives), retrieval calibration (ECE with 15 equal-width bins, NLL, Brier) under a per-query
  temperature, zero-shot classification calibration, reliability bins, risk-coverage curves and
  AURC, and the AUROC of an uncertainty score for predicting errors.

ECE, AUROC come from torchmetrics. Conventions chosen here (the paper does not fix them): ranks
count only strictly higher-scoring irrelevant items (ties resolved in the query's favour); all
standard deviations are population standard deviations (divide by K).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics.functional.classification import binary_auroc, binary_calibration_error

from reprobook.core import checks

__all__ = [
    "view_dispersion",
    "consensus_leakage",
    "default_relevance",
    "text_to_image_ranks",
    "image_to_text_ranks",
    "rank_volatility",
    "caption_retrieval",
    "hard_negative_mass",
    "confident_error",
    "hard_negative_accuracy",
    "candidate_sets",
    "expected_calibration_error",
    "retrieval_calibration",
    "zero_shot_calibration",
    "reliability_bins",
    "risk_coverage",
    "aurc",
    "auroc",
]

#: Rows of a score matrix computed at once (bounds memory at CHUNK x N floats).
CHUNK = 4096


# ----------------------------------------------------------------------------- validation helpers


def _check_v(v: torch.Tensor) -> torch.Tensor:
    if not isinstance(v, torch.Tensor) or v.ndim != 2 or not v.is_floating_point():
        raise ValueError(f"v must be a float tensor of shape (N, d), got {_shape(v)}")
    if v.shape[0] < 1:
        raise ValueError("v must hold at least one image embedding")
    return v


def _check_q(v: torch.Tensor, q: torch.Tensor, name: str = "q") -> torch.Tensor:
    """q (N, K, d) matching v (N, d)."""
    _check_v(v)
    if not isinstance(q, torch.Tensor) or q.ndim != 3 or not q.is_floating_point():
        raise ValueError(f"{name} must be a float tensor of shape (N, K, d), got {_shape(q)}")
    if q.shape[0] != v.shape[0] or q.shape[2] != v.shape[1]:
        raise ValueError(
            f"{name} must have shape (N, K, d) = ({v.shape[0]}, K, {v.shape[1]}) to match v, "
            f"got {tuple(q.shape)}"
        )
    if q.shape[1] < 1:
        raise ValueError(f"{name} must hold at least one caption per image (K >= 1)")
    return q


def _shape(x) -> str:
    return str(tuple(x.shape)) if isinstance(x, torch.Tensor) else type(x).__name__


def _check_pair(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    """a and b must be non-empty vectors of one shape."""
    if a.ndim != 1 or b.shape != a.shape or a.numel() == 0:
        raise ValueError(
            f"{name_a} and {name_b} must be non-empty vectors of one shape, "
            f"got {_shape(a)} and {_shape(b)}"
        )


def default_relevance(N: int, K: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The relevance (N*K, N) bool where caption (i, k) is relevant to image i only."""
    own = torch.arange(N, device=device).repeat_interleave(K)  # (N*K,) image of each caption
    return F.one_hot(own, N).bool()


def _relevance(
    relevance: torch.Tensor | None, N: int, K: int, device: torch.device
) -> torch.Tensor:
    """Validate a relevance matrix (N*K, N) bool (or build the default); every caption must be
    relevant to its own image."""
    if relevance is None:
        return default_relevance(N, K, device)
    if (
        not isinstance(relevance, torch.Tensor)
        or relevance.dtype != torch.bool
        or relevance.shape != (N * K, N)
    ):
        got = f"{_shape(relevance)} {getattr(relevance, 'dtype', '')}".strip()
        raise ValueError(
            f"relevance must be a bool tensor of shape (N*K, N) = ({N * K}, {N}), got {got}"
        )
    relevance = relevance.to(device)
    own = torch.arange(N, device=device).repeat_interleave(K)
    if not bool(relevance[torch.arange(N * K, device=device), own].all()):
        raise ValueError("relevance must mark every caption (i, k) as relevant to its own image i")
    return relevance


def _scores(q_flat: torch.Tensor, v: torch.Tensor, rows: slice) -> torch.Tensor:
    """S[rows] = q_flat[rows] @ v^T: the (chunk, N) query-image similarities."""
    return q_flat[rows] @ v.T


# ------------------------------------------------------------------------- Section 3 diagnostics


def view_dispersion(t: torch.Tensor) -> torch.Tensor:
    """d_i = (2 / (K (K - 1))) sum_{k < l} (1 - t_ik . t_il), the mean pairwise cosine distance
    of the views: t (N, K, d) -> (N,). Needs K >= 2."""
    if not isinstance(t, torch.Tensor) or t.ndim != 3 or t.shape[1] < 2:
        raise ValueError(f"t must have shape (N, K, d) with K >= 2, got {_shape(t)}")
    K = t.shape[1]
    gram = t @ t.transpose(1, 2)  # (N, K, K)
    iu = torch.triu_indices(K, K, offset=1, device=t.device)
    return (1.0 - gram[:, iu[0], iu[1]]).mean(dim=1)


def consensus_leakage(v: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """l_ik = (v_i . r_ik)^2 with the consensus residual r_ik = t_ik - (t_ik . c_i) c_i and
    c_i = norm(sum_k t_ik) (the paper's diagnostic uses the multi-caption consensus, not psi).
    v (N, d), t (N, K, d) -> (N, K). Implements eq. `tpc-leak` of
    notebooks/04_tpc_alignment/index.md."""
    _check_q(v, t, "t")
    c = F.normalize(t.sum(dim=1), dim=-1)  # (N, d)
    dots = (t * c[:, None, :]).sum(-1, keepdim=True)  # (N, K, 1)
    r = t - dots * c[:, None, :]  # (N, K, d)
    return (r * v[:, None, :]).sum(-1).pow(2)


def text_to_image_ranks(
    v: torch.Tensor, q: torch.Tensor, relevance: torch.Tensor | None = None
) -> torch.Tensor:
    """Rank of the best relevant image for each query: rank_ik = 1 + #{j irrelevant :
    q_ik . v_j > max_{j' relevant} q_ik . v_j'} over all N images. v (N, d), q (N, K, d),
    relevance (N*K, N) or None -> LongTensor (N, K) (1 = best)."""
    _check_q(v, q)
    N, K, d = q.shape
    rel = _relevance(relevance, N, K, v.device)
    q_flat = q.reshape(N * K, d)
    out = []
    for s in range(0, N * K, CHUNK):
        rows = slice(s, s + CHUNK)
        S = _scores(q_flat, v, rows)  # (chunk, N)
        r = rel[rows]
        best = S.masked_fill(~r, float("-inf")).amax(dim=1, keepdim=True)  # (chunk, 1)
        out.append(1 + ((S > best) & ~r).sum(dim=1))
    return torch.cat(out).reshape(N, K)


def image_to_text_ranks(
    v: torch.Tensor, q: torch.Tensor, relevance: torch.Tensor | None = None
) -> torch.Tensor:
    """Rank of the best relevant caption for each image among all N*K captions:
    rank_i = 1 + #{captions m irrelevant to i : v_i . q_m > max_{m' relevant} v_i . q_m'}, where
    m is relevant to i iff relevance[m, i]. -> LongTensor (N,)."""
    _check_q(v, q)
    N, K, d = q.shape
    rel_t = _relevance(relevance, N, K, v.device).T  # (N, N*K)
    q_flat = q.reshape(N * K, d)
    out = []
    for s in range(0, N, CHUNK):
        rows = slice(s, s + CHUNK)
        S = v[rows] @ q_flat.T  # (chunk, N*K)
        r = rel_t[rows]
        best = S.masked_fill(~r, float("-inf")).amax(dim=1, keepdim=True)
        out.append(1 + ((S > best) & ~r).sum(dim=1))
    return torch.cat(out)


def rank_volatility(ranks: torch.Tensor) -> torch.Tensor:
    """Section 3: std over captions of log(1 + rank) (population std). ranks (N, K) -> (N,)."""
    if not isinstance(ranks, torch.Tensor) or ranks.ndim != 2:
        raise ValueError(f"ranks must have shape (N, K), got {_shape(ranks)}")
    if ranks.numel() and int(ranks.min()) < 1:
        raise ValueError("ranks must be >= 1")
    return torch.log1p(ranks.double()).std(dim=1, correction=0)


def caption_retrieval(
    v: torch.Tensor,
    q: torch.Tensor,
    relevance: torch.Tensor | None = None,
    *,
    ranks: torch.Tensor | None = None,
) -> dict[str, float]:
    """Appendix B retrieval metrics.

    * ``t2i_r1``, ``t2i_r5``, ``t2i_r10``: fraction of the N*K queries with rank <= k
      (:func:`text_to_image_ranks`); ``mean_caption_r1`` = R@1 averaged over captions
      (= ``t2i_r1``).
    * ``worst_caption_r1``: fraction of images all of whose K captions have rank 1.
    * ``caption_sensitivity``: mean over images of the (population) std over k of rank_ik.
    * ``rank_volatility``: mean over images of :func:`rank_volatility`.
    * ``i2t_r1``, ``i2t_r5``, ``i2t_r10``: fraction of images whose best relevant caption
      (relevance[:, i]) ranks within the top k of all N*K captions (:func:`image_to_text_ranks`).

    ``ranks``: ``text_to_image_ranks(v, q, relevance)`` when the caller has it already (it is
    not computed again; the caller vouches that it belongs to these inputs).
    """
    if ranks is None:
        ranks = text_to_image_ranks(v, q, relevance)  # (N, K)
    elif not isinstance(ranks, torch.Tensor) or ranks.shape != q.shape[:2]:
        raise ValueError(
            f"ranks must have shape (N, K) = {tuple(q.shape[:2])}, got {_shape(ranks)}"
        )
    i2t = image_to_text_ranks(v, q, relevance)  # (N,)
    out = {f"t2i_r{k}": float((ranks <= k).double().mean()) for k in (1, 5, 10)}
    out["mean_caption_r1"] = out["t2i_r1"]
    out["worst_caption_r1"] = float((ranks == 1).all(dim=1).double().mean())
    out["caption_sensitivity"] = float(ranks.double().std(dim=1, correction=0).mean())
    out["rank_volatility"] = float(rank_volatility(ranks).mean())
    out.update({f"i2t_r{k}": float((i2t <= k).double().mean()) for k in (1, 5, 10)})
    return out


def _posteriors(S: torch.Tensor, tau) -> torch.Tensor:
    return torch.softmax(S / tau, dim=1)


def _tau_rows(tau, n_rows: int, device) -> torch.Tensor | float:
    """A temperature as a float or an (n_rows, 1) column (from shape (n_rows,) or (N, K))."""
    if isinstance(tau, torch.Tensor) and tau.numel() != 1:
        if tau.numel() != n_rows:
            raise ValueError(
                f"tau must be a scalar or hold one value per query ({n_rows}), "
                f"got {tuple(tau.shape)}"
            )
        tau = tau.reshape(n_rows, 1).to(device)
        if not bool((tau > 0).all()):
            raise ValueError("tau must be > 0")
        return tau
    tau = float(tau)
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    return tau


def _posterior_chunks(v: torch.Tensor, q: torch.Tensor, tau, relevance: torch.Tensor | None):
    """Yield, in chunks of CHUNK queries, the text-to-image posteriors softmax_j(q_ik . v_j / tau)
    (rows, N) and the relevance rows of the same queries."""
    _check_q(v, q)
    N, K, d = q.shape
    rel = _relevance(relevance, N, K, v.device)
    tau = _tau_rows(tau, N * K, v.device)
    q_flat = q.reshape(N * K, d)
    for s in range(0, N * K, CHUNK):
        rows = slice(s, s + CHUNK)
        t_rows = tau[rows] if isinstance(tau, torch.Tensor) else tau
        yield _posteriors(_scores(q_flat, v, rows), t_rows), rel[rows]


def hard_negative_mass(
    v: torch.Tensor, q: torch.Tensor, tau0: float, relevance: torch.Tensor | None = None
) -> torch.Tensor:
    """Section 3: m_i = (1/K) sum_k max_{j irrelevant} softmax_j(q_ik . v_j / tau0), the largest
    posterior a wrong image receives, averaged over captions. -> (N,)."""
    N, K = q.shape[:2]
    out = [
        P.masked_fill(rel, 0.0).amax(dim=1) for P, rel in _posterior_chunks(v, q, tau0, relevance)
    ]
    return torch.cat(out).reshape(N, K).mean(dim=1)


def confident_error(
    v: torch.Tensor, q: torch.Tensor, tau, relevance: torch.Tensor | None = None
) -> torch.Tensor:
    """Section 3: o_ik = max_j p_j x 1[argmax_j p_j is irrelevant],
    p = softmax_j(q_ik . v_j / tau); tau a scalar or per query ((N, K) or (N*K,)). -> (N, K)."""
    N, K = q.shape[:2]
    out = []
    for P, rel in _posterior_chunks(v, q, tau, relevance):
        pmax, top = P.max(dim=1)
        out.append(pmax * ~rel.gather(1, top[:, None]).squeeze(1))
    return torch.cat(out).reshape(N, K)


def hard_negative_accuracy(v: torch.Tensor, q: torch.Tensor, q_neg: torch.Tensor) -> float:
    """Fraction of (i, k) with v_i . q_ik > v_i . q_neg_ik (a caption beats its one-attribute
    swap)."""
    _check_q(v, q)
    _check_q(v, q_neg, "q_neg")
    if q_neg.shape != q.shape:
        raise ValueError(
            f"q_neg must have the shape of q {tuple(q.shape)}, got {tuple(q_neg.shape)}"
        )
    pos = (q * v[:, None, :]).sum(-1)
    neg = (q_neg * v[:, None, :]).sum(-1)
    return float((pos > neg).double().mean())


# ----------------------------------------------------------------------------- calibration


def candidate_sets(
    v: torch.Tensor,
    q: torch.Tensor,
    relevance: torch.Tensor | None,
    n_top: int = 100,
    n_random: int = 300,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Appendix B candidate sets for retrieval calibration: LongTensor
    (N*K, 1 + n_top' + n_random').

    Row i*K + k: column 0 is the ground-truth image i; then the n_top' highest-scoring images that
    are NOT relevant to the query (in decreasing score); then n_random' irrelevant images drawn
    uniformly without replacement (with ``generator``) from those not already chosen. Images
    relevant to the query other than i are left out, so "top-1 is the ground truth" is well
    defined. Sizes are capped by what exists for every row: with m = the smallest number of
    irrelevant images of any query, n_top' = min(n_top, m) and
    n_random' = min(n_random, m - n_top').
    """
    _check_q(v, q)
    checks.integer(n_top, "n_top", minimum=0)
    checks.integer(n_random, "n_random", minimum=0)
    N, K, d = q.shape
    rel = _relevance(relevance, N, K, v.device)
    m = int((~rel).sum(dim=1).min())
    n_top_ = min(n_top, m)
    n_rand_ = min(n_random, m - n_top_)
    q_flat = q.reshape(N * K, d)
    own = torch.arange(N, device=v.device).repeat_interleave(K)
    out = []
    for s in range(0, N * K, CHUNK):
        rows = slice(s, s + CHUNK)
        r = rel[rows]
        S = _scores(q_flat, v, rows).masked_fill(r, float("-inf"))
        top = S.topk(n_top_, dim=1).indices  # (chunk, n_top_)
        keys = torch.rand(S.shape, generator=generator, dtype=torch.float64).to(v.device)
        keys = keys.masked_fill(r, -1.0).scatter(1, top, -1.0)  # taken or relevant -> never drawn
        rand = keys.topk(n_rand_, dim=1).indices  # uniform sample without replacement
        out.append(torch.cat([own[rows, None], top, rand], dim=1))
    return torch.cat(out)


def expected_calibration_error(
    confidence: torch.Tensor, correct: torch.Tensor, n_bins: int = 15
) -> float:
    """Top-label ECE = sum_b (|B_b| / n) |acc(B_b) - conf(B_b)| over n_bins equal-width bins of
    [0, 1], through torchmetrics' ``binary_calibration_error(confidence, correct, norm="l1")``:
    eq. `tpc-ece` of notebooks/04_tpc_alignment/index.md.

    torchmetrics bins with [lo, hi) and would put a confidence of exactly 1.0 in a bin of its own;
    confidences are therefore clamped to the largest float below 1 so that the last bin is
    [1 - 1/n_bins, 1] as usual (this moves a confidence by at most 6e-8).
    """
    confidence, correct = _check_conf(confidence, correct)
    below_one = torch.nextafter(
        torch.ones((), dtype=confidence.dtype), torch.zeros((), dtype=confidence.dtype)
    )
    conf = confidence.clamp(max=below_one)
    return float(binary_calibration_error(conf, correct.long(), n_bins=n_bins, norm="l1"))


def _check_conf(
    confidence: torch.Tensor, correct: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    confidence = torch.as_tensor(confidence)
    correct = torch.as_tensor(correct)
    _check_pair("confidence", confidence, "correct", correct)
    if (
        not confidence.is_floating_point()
        or float(confidence.min()) < 0
        or float(confidence.max()) > 1
    ):
        raise ValueError("confidence must be floats in [0, 1]")
    return confidence, correct.bool()


def retrieval_calibration(
    v: torch.Tensor, q: torch.Tensor, tau_q, candidates: torch.Tensor
) -> dict:
    """Appendix B retrieval calibration on candidate sets (:func:`candidate_sets`).

    For query m = (i, k) with candidates j_0 = i, j_1, ..., j_{M-1}:
    p_m = softmax_l(q_m . v_{j_l} / tau_m) over its M candidates (tau_q a scalar, or per query
    (N*K,) / (N, K): TPC's tau(y) = tau0 (1 + gamma u_hat(y))). Returns

    * ``confidence`` (N*K,) = max_l p_ml and ``correct`` (N*K,) bool = [argmax_l p_ml == 0];
    * ``accuracy`` (mean of ``correct``), ``nll`` = mean_m -log p_m0,
      ``brier`` = mean_m sum_l (p_ml - 1[l = 0])^2,
      ``ece`` = :func:`expected_calibration_error` (15 equal-width bins, top-label).

    Implements eq. `tpc-ece` of notebooks/04_tpc_alignment/index.md on the candidate sets.
    """
    _check_q(v, q)
    N, K, d = q.shape
    if (
        not isinstance(candidates, torch.Tensor)
        or candidates.ndim != 2
        or candidates.shape[0] != N * K
    ):
        raise ValueError(
            f"candidates must have shape (N*K, M) = ({N * K}, M), got {_shape(candidates)}"
        )
    if candidates.shape[1] < 2:
        raise ValueError("candidates must hold the ground truth and at least one negative (M >= 2)")
    own = torch.arange(N, device=candidates.device).repeat_interleave(K)
    if not bool((candidates[:, 0] == own).all()):
        raise ValueError("column 0 of candidates must be each query's ground-truth image")
    tau = _tau_rows(tau_q, N * K, v.device)
    q_flat = q.reshape(N * K, d)
    logp = []
    for s in range(0, N * K, CHUNK):
        rows = slice(s, s + CHUNK)
        t_rows = tau[rows] if isinstance(tau, torch.Tensor) else tau
        S = _scores(q_flat, v, rows).gather(1, candidates[rows].to(v.device))  # (chunk, M)
        logp.append(torch.log_softmax(S / t_rows, dim=1))
    logp = torch.cat(logp)
    p = logp.exp()
    confidence, top = p.max(dim=1)
    correct = top == 0
    onehot = torch.zeros_like(p)
    onehot[:, 0] = 1.0
    return {
        "confidence": confidence,
        "correct": correct,
        "accuracy": float(correct.double().mean()),
        "nll": float(-logp[:, 0].double().mean()),
        "brier": float((p - onehot).pow(2).sum(dim=1).double().mean()),
        "ece": expected_calibration_error(confidence, correct),
    }


def zero_shot_calibration(logits: torch.Tensor, labels: torch.Tensor, n_bins: int = 15) -> dict:
    """Zero-shot classification calibration: p = softmax(logits) (B, C), labels (B,).

    ``accuracy`` = mean 1[argmax p = y]; ``ece`` = top-label ECE with ``n_bins`` equal-width bins
    (the quantity torchmetrics' ``multiclass_calibration_error`` computes, via
    :func:`expected_calibration_error`); ``nll`` = mean -log p_y;
    ``brier`` = mean sum_c (p_c - 1[c = y])^2; plus ``confidence`` and ``correct`` per example.
    """
    if not (
        isinstance(logits, torch.Tensor)
        and logits.ndim == 2
        and logits.is_floating_point()
        and len(logits)
    ):
        raise ValueError(
            f"logits must be a non-empty float tensor of shape (B, C), got {_shape(logits)}"
        )
    labels = torch.as_tensor(labels, device=logits.device)
    if labels.shape != (logits.shape[0],) or labels.is_floating_point():
        raise ValueError(
            f"labels must be integers of shape ({logits.shape[0]},), got {_shape(labels)}"
        )
    C = logits.shape[1]
    if int(labels.min()) < 0 or int(labels.max()) >= C:
        raise ValueError(f"labels must lie in [0, {C - 1}]")
    logp = torch.log_softmax(logits.double(), dim=1)
    p = logp.exp()
    confidence, pred = p.max(dim=1)
    correct = pred == labels
    return {
        "accuracy": float(correct.double().mean()),
        "ece": expected_calibration_error(confidence.float(), correct, n_bins),
        "nll": float(-logp.gather(1, labels[:, None].long()).mean()),
        "brier": float((p - F.one_hot(labels.long(), C).double()).pow(2).sum(dim=1).mean()),
        "confidence": confidence.float(),
        "correct": correct,
    }


def reliability_bins(
    confidence: torch.Tensor, correct: torch.Tensor, n_bins: int = 15
) -> dict[str, torch.Tensor]:
    """Per-bin mean confidence, accuracy and count for reliability diagrams (n_bins equal-width
    bins [b/n, (b+1)/n), the last one closed, as :func:`expected_calibration_error`); empty bins
    have confidence and accuracy NaN. ECE = sum_b count_b / n |accuracy_b - confidence_b|
    (non-empty b). Returns ``edges`` (n_bins + 1,), ``confidence``, ``accuracy``, ``count``
    (n_bins,)."""
    confidence, correct = _check_conf(confidence, correct)
    checks.integer(n_bins, "n_bins", minimum=1)
    conf = confidence.double()
    edges = torch.linspace(0.0, 1.0, n_bins + 1, dtype=torch.float64)
    idx = (torch.bucketize(conf, edges, right=True) - 1).clamp(max=n_bins - 1)
    count = torch.zeros(n_bins, dtype=torch.float64).scatter_add_(0, idx, torch.ones_like(conf))
    s_conf = torch.zeros(n_bins, dtype=torch.float64).scatter_add_(0, idx, conf)
    s_acc = torch.zeros(n_bins, dtype=torch.float64).scatter_add_(0, idx, correct.double())
    empty = count == 0
    return {
        "edges": edges,
        "confidence": (s_conf / count).masked_fill(empty, float("nan")),
        "accuracy": (s_acc / count).masked_fill(empty, float("nan")),
        "count": count.long(),
    }


# ----------------------------------------------------------------------------- selective prediction


def risk_coverage(
    uncertainty: torch.Tensor, error: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Risk-coverage curve: sort by uncertainty ascending (stable: ties keep their input order);
    at coverage m / n the risk is (errors among the m most certain) / m, m = 1..n.
    -> (coverage, risk), both (n,) float64."""
    uncertainty = torch.as_tensor(uncertainty)
    error = torch.as_tensor(error)
    _check_pair("uncertainty", uncertainty, "error", error)
    if bool(torch.isnan(uncertainty.double()).any()):
        raise ValueError("uncertainty must not contain NaN")
    order = torch.sort(uncertainty, stable=True).indices
    err = error.double()[order]
    m = torch.arange(1, len(err) + 1, dtype=torch.float64)
    return m / len(err), err.cumsum(0) / m


def aurc(coverage: torch.Tensor, risk: torch.Tensor) -> float:
    """Area under the risk-coverage curve as the step sum
    sum_m risk_m (coverage_m - coverage_{m-1}), coverage_0 = 0; for :func:`risk_coverage` it is
    the mean risk over the n coverage levels."""
    coverage = torch.as_tensor(coverage, dtype=torch.float64)
    risk = torch.as_tensor(risk, dtype=torch.float64)
    _check_pair("coverage", coverage, "risk", risk)
    widths = torch.diff(coverage, prepend=torch.zeros(1, dtype=torch.float64))
    if bool((widths < 0).any()):
        raise ValueError("coverage must be non-decreasing")
    return float((risk * widths).sum())


def auroc(score: torch.Tensor, error: torch.Tensor) -> float:
    """AUROC of ``score`` (higher = more likely wrong, e.g. u_hat) for predicting ``error`` (bool),
    through torchmetrics' ``binary_auroc``; 0.5 = no better than chance. Scores outside [0, 1] are
    rescaled affinely to [0, 1] first (torchmetrics would apply a sigmoid, which can merge ties)."""
    score = torch.as_tensor(score, dtype=torch.float64)
    error = torch.as_tensor(error)
    _check_pair("score", score, "error", error)
    error = error.bool()
    if bool(error.all()) or not bool(error.any()):
        raise ValueError("auroc needs both errors and non-errors in `error`")
    lo, hi = float(score.min()), float(score.max())
    if lo < 0 or hi > 1:
        score = (score - lo) / (hi - lo) if hi > lo else torch.zeros_like(score)
    return float(binary_auroc(score, error.long()))
