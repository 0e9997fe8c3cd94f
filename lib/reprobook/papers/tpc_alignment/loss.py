"""The TPC objective of "Text as Partial Constraint: Core-Residual Alignment for Robust
Vision-Language Learning" (arXiv 2607.03143), Sections 4.1-4.5.

For an image embedding v_i (unit) and K caption-view embeddings t_{i,k} (unit):

* consensus core       c_i = norm(sum_k t_{i,k})                        (Sec. 4.1, eq. tpc-core)
* disagreement         u_i = (1/K) sum_k (1 - (t_{i,k} . c_i)^2) in [0, 1]              (Sec. 4.1)
* core filter          c_hat_{i,k} = norm(W_c t_{i,k} + b_c), W_c = I, b_c = 0 at init
                                                                        (Sec. 4.2, eq. tpc-filter)
* unsaid residual      r_{i,k} = t_{i,k} - (t_{i,k} . c_hat_{i,k}) c_hat_{i,k}          (Sec. 4.2)
* temperature          tau_i = clip(tau0 (1 + gamma u_i), tau0, 3 tau0)  (Sec. 4.3, eq. tpc-temp)
* L_core               symmetric InfoNCE of v against c with row i using tau_i
                                                                         (Sec. 4.3, eq. tpc-lcore)
* L_agree              (1/BK) sum_{i,k} ||c_hat_{i,k} - c_i||^2                         (Sec. 4.4)
* L_nc                 (1/BK) sum_{i,k} (v_i . r_{i,k})^2                               (Sec. 4.4)
* L = L_core + lambda_agree L_agree + lambda_nc L_nc                    (Sec. 4.5, eq. tpc-loss)

The equations are labelled on the chapter's page, notebooks/04_tpc_alignment/index.md.

norm(z) = z / max(||z||, 1e-12) (``F.normalize``) throughout; the paper writes z / (||z|| + eps),
but the clamped form is idempotent, which makes the K = 1 reduction to CLIP exact. CLIP's loss is
the same InfoNCE with one caption and a scalar temperature (:func:`clip_loss`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from reprobook.core import checks

__all__ = [
    "OBJECTIVES",
    "TPCConfig",
    "consensus_core",
    "disagreement",
    "CoreFilter",
    "residual",
    "instance_temperature",
    "info_nce",
    "clip_loss",
    "draw_views",
    "core_target",
    "tpc_loss",
]

OBJECTIVES = ("tpc", "clip")


@dataclass(frozen=True)
class TPCConfig:
    """Hyperparameters of the objective (paper, Appendix B.4: tau0 0.07, gamma 1, lambda_agree 1,
    lambda_nc 0.1, K' in {3, 4, 5}).

    objective: "tpc" (the paper's loss) or "clip" (InfoNCE against one random caption view).
    consensus: False is the ablation "w/o consensus core": one random view replaces c_i.
    views: the numbers of views K' among which one is drawn at each training step.
    """

    objective: str = "tpc"
    tau0: float = 0.07
    gamma: float = 1.0
    tau_max_factor: float = 3.0
    lambda_agree: float = 1.0
    lambda_nc: float = 0.1
    consensus: bool = True
    views: tuple[int, ...] = (3, 4, 5)

    def __post_init__(self) -> None:
        checks.choice(self.objective, "objective", OBJECTIVES)
        checks.real(self.tau0, "tau0", above=0)
        checks.real(self.gamma, "gamma", minimum=0)
        # tau is clipped to [tau0, tau_max_factor * tau0]
        checks.real(self.tau_max_factor, "tau_max_factor", minimum=1)
        checks.real(self.lambda_agree, "lambda_agree", minimum=0)
        checks.real(self.lambda_nc, "lambda_nc", minimum=0)
        checks.boolean(self.consensus, "consensus")
        views = tuple(self.views)
        if not views:
            raise checks.InputError("views must be a non-empty tuple of integers >= 1, got ()")
        for k in views:
            checks.integer(k, "views", minimum=1)
        object.__setattr__(self, "views", views)


def _check_views(t: torch.Tensor, name: str = "t") -> None:
    if t.dim() != 3:
        raise ValueError(f"{name} must have shape (N, K, d), got {tuple(t.shape)}")


def consensus_core(t: torch.Tensor) -> torch.Tensor:
    """c_i = norm(sum_k t_{i,k}): (N, K, d) -> (N, d).

    Implements eq. `tpc-core` of notebooks/04_tpc_alignment/index.md (its left half)."""
    _check_views(t)
    return F.normalize(t.sum(dim=1), dim=-1)


def disagreement(t: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """u_i = (1/K) sum_k (1 - (t_{i,k} . c_i)^2): t (N, K, d), c (N, d) -> (N,), in [0, 1] for unit
    vectors; 0 exactly when every view is parallel to c_i.

    Implements eq. `tpc-core` of notebooks/04_tpc_alignment/index.md (its right half)."""
    _check_views(t)
    if c.shape != (t.shape[0], t.shape[2]):
        raise ValueError(
            f"c must have shape (N, d) = {(t.shape[0], t.shape[2])}, got {tuple(c.shape)}"
        )
    dots = torch.einsum("nkd,nd->nk", t, c)  # (N, K)
    return (1.0 - dots.square()).mean(dim=1).clamp(0.0, 1.0)


class CoreFilter(nn.Module):
    """The single-view core filter psi(t) = W_c t + b_c (Sec. 4.2), W_c = I and b_c = 0 at init.

    ``forward(t)`` returns c_hat = norm(psi(t)) for any leading shape (..., d). Implements
    eq. `tpc-filter` of notebooks/04_tpc_alignment/index.md (its left half)."""

    def __init__(self, dim: int):
        super().__init__()
        checks.integer(dim, "dim", minimum=1)
        self.linear = nn.Linear(dim, dim)  # eq. tpc-filter: psi(t) = W_c t + b_c, (d, d) and (d,)
        self.reset_identity()  # W_c = I, b_c = 0: at the start c_hat = t

    def reset_identity(self) -> None:
        """W_c = I, b_c = 0."""
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(self.linear.in_features))  # W_c = I
            self.linear.bias.zero_()  # b_c = 0

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.linear(t), dim=-1)  # eq. tpc-filter: c_hat = norm(W_c t + b_c)


def residual(t: torch.Tensor, c_hat: torch.Tensor) -> torch.Tensor:
    """r = t - (t . c_hat) c_hat, the part of t the core does not explain (orthogonal to a unit
    c_hat). Any leading shape (..., d). Implements eq. `tpc-filter` of
    notebooks/04_tpc_alignment/index.md (its right half)."""
    checks.same_shape("t", t, "c_hat", c_hat)
    return t - (t * c_hat).sum(dim=-1, keepdim=True) * c_hat


def instance_temperature(
    u: torch.Tensor, tau0: float, gamma: float, tau_max_factor: float = 3.0
) -> torch.Tensor:
    """tau_i = clamp(tau0 (1 + gamma u_i), tau0, tau_max_factor * tau0) (Sec. 4.3); same shape as
    u. Implements eq. `tpc-temp` of notebooks/04_tpc_alignment/index.md."""
    checks.real(tau0, "tau0", above=0)
    checks.real(tau_max_factor, "tau_max_factor", minimum=1)
    return (tau0 * (1.0 + gamma * u)).clamp(min=tau0, max=tau_max_factor * tau0)


def info_nce(v: torch.Tensor, c: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
    """Symmetric InfoNCE with a per-row temperature (L_core, Sec. 4.3):

        L = -(1/B) sum_i log softmax_j(v_i . c_j / tau_i)[i]
            - (1/B) sum_i log softmax_j(c_i . v_j / tau_i)[i]

    v, c (B, d); tau a scalar or (B,). The sum (not the mean) of the two directions, as the paper
    writes L_core; with a scalar tau this is CLIP's loss times 2. Implements eq. `tpc-lcore` of
    notebooks/04_tpc_alignment/index.md."""
    if v.dim() != 2 or v.shape != c.shape:
        raise ValueError(
            f"v and c must both have shape (B, d), got {tuple(v.shape)} and {tuple(c.shape)}"
        )
    b = v.shape[0]
    tau = torch.as_tensor(tau, dtype=v.dtype, device=v.device)
    if tau.dim() == 0:
        tau = tau.expand(b)
    if tau.shape != (b,):
        raise ValueError(
            f"tau must be a scalar or have shape (B,) = ({b},), got {tuple(tau.shape)}"
        )
    sim = v @ c.T  # (B, B): sim[i, j] = v_i . c_j
    target = torch.arange(b, device=v.device)
    image_to_text = F.cross_entropy(sim / tau[:, None], target)
    text_to_image = F.cross_entropy(sim.T / tau[:, None], target)
    return image_to_text + text_to_image


def clip_loss(v: torch.Tensor, t_single: torch.Tensor, tau0: float) -> torch.Tensor:
    """CLIP's symmetric InfoNCE against one caption per image: info_nce(v, t, tau0)."""
    return info_nce(v, t_single, tau0)


def draw_views(
    n: int, k: int, *, generator: torch.Generator | None = None, device=None
) -> torch.Tensor:
    """LongTensor (n,): one view index k* in [0, k) per instance, drawn uniformly with ``generator``
    (on the CPU, then moved to ``device``)."""
    return torch.randint(0, k, (n,), generator=generator).to(device)


def core_target(
    t: torch.Tensor,
    cfg: TPCConfig,
    *,
    view_index: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The target of the alignment term, the disagreement and the temperature for views t
    (B, K, d).

    target (B, d): c_i (TPC), or t_{i,k*} (objective "clip", or ``consensus=False``; k* from
    ``view_index`` when given, else drawn with ``generator``). u (B,) is always measured against
    the consensus and is detached in the temperature (a weighting, not a quantity the encoders
    should move to lower the loss: the paper does not say; see the chapter). tau (B,): tau_i for
    "tpc", tau0 for "clip". Implements eqs. `tpc-core` and `tpc-temp` of
    notebooks/04_tpc_alignment/index.md."""
    _check_views(t)
    b, k = t.shape[:2]  # B images, K views each
    c = consensus_core(t)  # eq. tpc-core: c_i = norm(sum_k t_ik), (B, d)
    u = disagreement(t, c)  # eq. tpc-core: u_i = mean_k (1 - (t_ik . c_i)^2), (B,)
    if cfg.objective == "clip" or not cfg.consensus:  # CLIP, or the ablation without consensus:
        if view_index is None:  # one view k* per image, drawn uniformly
            view_index = draw_views(b, k, generator=generator, device=t.device)
        target = t[torch.arange(b, device=t.device), view_index]  # t_{i,k*} replaces c_i
    else:
        target = c  # TPC aligns each image with its consensus core
    if cfg.objective == "clip":
        tau = torch.full((b,), cfg.tau0, dtype=t.dtype, device=t.device)  # CLIP: one tau0
    else:  # eq. tpc-temp: tau_i = clip(tau0 (1 + gamma u_i), tau0, 3 tau0), u_i held constant
        tau = instance_temperature(u.detach(), cfg.tau0, cfg.gamma, cfg.tau_max_factor)
    return target, u, tau


def tpc_loss(
    v: torch.Tensor,
    t: torch.Tensor,
    core_filter: nn.Module,
    cfg: TPCConfig,
    *,
    generator: torch.Generator | None = None,
    view_index: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """L = L_core + lambda_agree L_agree + lambda_nc L_nc (Sec. 4.5) for v (B, d) and t (B, K, d).

    Returns tensors ``loss``, ``core``, ``agree``, ``nc`` (scalars), ``u`` (B,), ``tau`` (B,) and
    ``cos_chat_c`` (mean c_hat_{i,k} . c_i). With ``cfg.consensus`` False the target c_i of
    L_core and L_agree is one random view t_{i,k*}. With ``cfg.objective == "clip"`` the loss is
    info_nce(v, t_{i,k*}, tau0) and ``agree`` and ``nc`` are 0 (``u`` and ``cos_chat_c`` are
    still reported, measured without gradient). Implements eq. `tpc-loss` of
    notebooks/04_tpc_alignment/index.md."""
    _check_views(t)
    if v.dim() != 2 or v.shape[0] != t.shape[0] or v.shape[1] != t.shape[2]:
        raise ValueError(
            f"v must have shape (B, d) = {(t.shape[0], t.shape[2])}, got {tuple(v.shape)}"
        )
    # eqs. tpc-core and tpc-temp: the alignment target c_i, the disagreement u_i and tau_i
    target, u, tau = core_target(t, cfg, view_index=view_index, generator=generator)
    zero = v.new_zeros(())
    if cfg.objective == "clip":  # CLIP's loss: InfoNCE against one view at tau0, nothing else
        loss = info_nce(v, target, tau)
        with torch.no_grad():  # reported only: how close the (untrained) filter comes to c_i
            cos = torch.einsum("nkd,nd->nk", core_filter(t), consensus_core(t)).mean()
        return {
            "loss": loss,
            "core": loss,
            "agree": zero,
            "nc": zero,
            "u": u.detach(),
            "tau": tau,
            "cos_chat_c": cos,
        }
    c_hat = core_filter(t)  # eq. tpc-filter: c_hat_ik = norm(W_c t_ik + b_c), (B, K, d)
    l_core = info_nce(v, target, tau)  # eq. tpc-lcore: InfoNCE of v_i against c_i at tau_i
    # eq. tpc-loss, L_agree = 1/(BK) sum_ik ||c_hat_ik - c_i||^2: one view's filter meets the core
    l_agree = (c_hat - target[:, None, :]).square().sum(dim=-1).mean()
    r = residual(t, c_hat)  # eq. tpc-filter: r_ik = t_ik - (t_ik . c_hat_ik) c_hat_ik
    # eq. tpc-loss, L_nc = 1/(BK) sum_ik (v_i . r_ik)^2: the image ignores what was left unsaid
    l_nc = torch.einsum("nd,nkd->nk", v, r).square().mean()
    loss = l_core + cfg.lambda_agree * l_agree + cfg.lambda_nc * l_nc  # eq. tpc-loss: the sum
    with torch.no_grad():  # reported: mean cos(c_hat_ik, c_i), with c_i the consensus
        cos = torch.einsum("nkd,nd->nk", c_hat, consensus_core(t)).mean()
    return {
        "loss": loss,
        "core": l_core,
        "agree": l_agree,
        "nc": l_nc,
        "u": u.detach(),
        "tau": tau,
        "cos_chat_c": cos,
    }
