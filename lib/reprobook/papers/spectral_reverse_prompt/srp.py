"""The Spectral Reverse Prompt (SRP) layer and its ablations.

Paper: "Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting"
(arXiv 2609.32143). The layer was re-implemented from the method's description (the released
code has no licence); what the description leaves open is marked as our reconstruction in
notebooks/17_spectral_reverse_prompt/index.md. For the frozen weight W (d_out x d_in) of one
encoder layer with SVD W = U diag(sigma) V^T, the prompt p(h) (d_out) is added to that layer's
output:

- the reverse mask (eq. `spectral-reverse-prompt-mask`);
- the dual channel when d_in > k + m (eq. `spectral-reverse-prompt-dual`), with the null-space
  basis N of eq. `spectral-reverse-prompt-null`;
- the projective fallback otherwise (eq. `spectral-reverse-prompt-fallback`);
- the output map and, for GIN, the degree gate (eq. `spectral-reverse-prompt-out`).

Ablations (``variant``), with the semantics of the released code's ``node/prompt_ablation.py``
(classes ``SRP_NM``, ``SRP_NS``, ``SRP_NR``, ``SRP_Bi``): ``srp_nm`` drops the null channel of a
dual layer (a fallback layer keeps its masked projection); ``srp_ns`` drops the spectral
channel of a dual layer and makes a fallback layer the plain projection z = h P, with no mask
and no threshold parameter at all; ``srp_nr`` sets the mask to 1 and has no threshold;
``srp_bi`` uses the U-shaped mask of eq. `spectral-reverse-prompt-bimask`, capped at 1.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from reprobook.core import checks

__all__ = [
    "VARIANTS",
    "reverse_mask",
    "bimodal_mask",
    "use_decomposition",
    "null_space_basis",
    "SRPPrompt",
    "srp_parameter_count",
]

VARIANTS = ("srp", "srp_nm", "srp_ns", "srp_nr", "srp_bi")
_UNMASKED = ("srp_nr", "srp_ns")  # no threshold, no mask (the code's SRP_NR and SRP_NS)


def reverse_mask(sigma: torch.Tensor, tau: torch.Tensor, sharpness: float = 10.0) -> torch.Tensor:
    """mask_j = sigmoid(sharpness (tau sigma_max - sigma_j)): about 1 for the weak directions
    (sigma_j below tau sigma_max), about 0 for the dominant ones.

    Implements eq. `spectral-reverse-prompt-mask` of
    notebooks/17_spectral_reverse_prompt/index.md.
    """
    sigma_max = sigma.max()  # the largest singular value of W
    return torch.sigmoid(sharpness * (tau * sigma_max - sigma))  # eq. mask: one weight per j


def bimodal_mask(
    sigma: torch.Tensor, tau_low: torch.Tensor, tau_high: torch.Tensor, sharpness: float = 10.0
) -> torch.Tensor:
    """The U-shaped mask of the Bi ablation: the weak (sigma_j < tau_low sigma_max) and the
    strong (sigma_j > tau_high sigma_max) directions pass, the middle is suppressed.

    mask_j = min(1, g_low_j + g_high_j): the sum of the two one-sided gates is capped at 1, as
    in ``SRP_Bi.get_prompt`` of the released code (``node/prompt_ablation.py``). The cap acts
    where the gates overlap, above all once the learned low threshold passes the high one.

    Implements eq. `spectral-reverse-prompt-bimask` of
    notebooks/17_spectral_reverse_prompt/index.md.
    """
    sigma_max = sigma.max()  # the largest singular value of W
    low = torch.sigmoid(sharpness * (tau_low * sigma_max - sigma))  # weak side
    high = torch.sigmoid(sharpness * (sigma - tau_high * sigma_max))  # strong side
    return (low + high).clamp(max=1.0)  # eq. bimask: the two gates added, capped at 1


def use_decomposition(d_in: int, d_out: int, m: int) -> bool:
    """True when the layer has room for a null space: d_in > k + m with k = min(d_in, d_out).

    Implements the switch of eq. `spectral-reverse-prompt-dual` of
    notebooks/17_spectral_reverse_prompt/index.md.
    """
    d_in = checks.integer(d_in, "d_in", minimum=1)
    d_out = checks.integer(d_out, "d_out", minimum=1)
    m = checks.integer(m, "m", minimum=1)
    return d_in > min(d_in, d_out) + m  # eq. dual: the mode switch


def null_space_basis(x: torch.Tensor, v: torch.Tensor, m: int) -> torch.Tensor:
    """N (d_in x m): the top-m principal directions of the features x (n x d_in) after
    projecting them off span(V) (V: d_in x k, orthonormal columns), so V^T N = 0, N^T N = I.
    Computed in the dtype of ``x``; pass float64 for exact orthogonality.

    Implements eq. `spectral-reverse-prompt-null` of
    notebooks/17_spectral_reverse_prompt/index.md.
    """
    if x.ndim != 2 or v.ndim != 2 or x.shape[1] != v.shape[0]:
        raise checks.InputError(
            f"x must be (n, d_in) and V (d_in, k) with the same d_in, got {tuple(x.shape)} "
            f"and {tuple(v.shape)}"
        )
    m = checks.integer(m, "m", minimum=1, maximum=x.shape[1] - v.shape[1])
    v = v.to(x.dtype)
    resid = x - (x @ v) @ v.T  # eq. null: X - X V V^T, the part W cannot see
    resid = resid - resid.mean(dim=0, keepdim=True)  # centred
    _, _, vt = torch.linalg.svd(resid, full_matrices=False)  # principal directions
    n_basis = vt[:m].T  # (d_in, m): top-m directions of the residual
    n_basis = n_basis - v @ (v.T @ n_basis)  # re-project: removes rounding along V
    q, _ = torch.linalg.qr(n_basis)  # orthonormal columns
    return q  # eq. null: N


def _glorot(rows: int, cols: int) -> nn.Parameter:
    """A (rows x cols) weight drawn from N(0, 2 / (rows + cols))."""
    return nn.Parameter(torch.randn(rows, cols) * math.sqrt(2.0 / (rows + cols)))


class SRPPrompt(nn.Module):
    """The SRP prompt of one frozen layer with weight ``weight`` (d_out x d_in).

    ``features`` (n x d_in, the layer's inputs on the downstream graph, every node) are needed
    only in the dual mode, for the null-space basis N. ``rank`` is the bottleneck r (capped at
    d_out), ``null_dim`` the m of the mode switch. ``degree_gate`` adds the GIN hook's layer
    norm and degree gate. ``theta0`` initialises theta (tau = sigmoid(theta)); ``bi_theta0``
    the two thresholds of the ``srp_bi`` variant. ``srp_nr`` and ``srp_ns`` have no threshold
    (as the released code's ``SRP_NR`` and ``SRP_NS``), so no ``theta``.
    """

    def __init__(
        self,
        weight: torch.Tensor,
        features: torch.Tensor | None = None,
        *,
        rank: int = 32,
        null_dim: int = 16,
        variant: str = "srp",
        degree_gate: bool = False,
        sharpness: float = 10.0,
        theta0: float = 0.5,
        bi_theta0: tuple[float, float] = (0.3, 0.7),
    ) -> None:
        super().__init__()
        self.variant = checks.choice(variant, "variant", VARIANTS)
        self.sharpness = checks.real(sharpness, "sharpness", above=0)
        rank = checks.integer(rank, "rank", minimum=1)
        d_out, d_in = weight.shape
        self.d_in, self.d_out = int(d_in), int(d_out)
        self.null_dim = checks.integer(null_dim, "null_dim", minimum=1)
        _, s, vt = torch.linalg.svd(weight.detach().double(), full_matrices=False)
        self.register_buffer("sigma", s.float())  # (k,) frozen singular values
        self.register_buffer("V", vt.T.float())  # (d_in, k) frozen right singular vectors
        self.dual = use_decomposition(self.d_in, self.d_out, self.null_dim)
        r = min(rank, self.d_out)
        if self.variant == "srp_bi":
            self.theta = nn.Parameter(torch.tensor([float(t) for t in bi_theta0]))
        elif self.variant not in _UNMASKED:
            self.theta = nn.Parameter(torch.tensor(float(theta0)))
        k = s.numel()
        if self.dual:
            self.A = _glorot(k, r) if self.variant != "srp_ns" else None
            if self.variant != "srp_nm":
                if features is None:
                    raise checks.InputError(
                        f"features must be given for a dual-channel layer (d_in = {d_in} > "
                        f"k + m = {k + self.null_dim}); got None"
                    )
                x = checks.array(features, "features", ndim=2, shape=(None, self.d_in))
                basis = null_space_basis(torch.as_tensor(x).double(), vt.T, self.null_dim)
                self.register_buffer("N", basis.float())  # (d_in, m)
                self.B = _glorot(self.null_dim, r)
        else:
            self.P = _glorot(self.d_in, r)
        self.Q = _glorot(r, self.d_out)
        self.b = nn.Parameter(torch.zeros(self.d_out))
        self.degree_gate = checks.boolean(degree_gate, "degree_gate")
        if self.degree_gate:
            self.gate_w = nn.Parameter(torch.zeros(()))
            self.gate_b = nn.Parameter(torch.zeros(()))

    def tau(self) -> torch.Tensor:
        """tau = sigmoid(theta) (two values for ``srp_bi``; none for ``srp_nr``, ``srp_ns``)."""
        if not hasattr(self, "theta"):
            raise checks.InputError(
                f"variant {self.variant!r} has no threshold; tau exists for "
                f"{[v for v in VARIANTS if v not in _UNMASKED]}"
            )
        return torch.sigmoid(self.theta)

    def mask(self) -> torch.Tensor:
        """The current mask over the k singular directions (eqs. mask and bimask); 1 for the
        unmasked variants ``srp_nr`` and ``srp_ns``, whose fallback is then z = h P."""
        if self.variant in _UNMASKED:
            return torch.ones_like(self.sigma)
        if self.variant == "srp_bi":
            lo, hi = self.tau()
            return bimodal_mask(self.sigma, lo, hi, self.sharpness)
        return reverse_mask(self.sigma, self.tau(), self.sharpness)

    def forward(self, h: torch.Tensor, deg: torch.Tensor | None = None) -> torch.Tensor:
        """The prompt p(h), (n x d_out), added to the frozen layer's output.

        Implements eqs. `spectral-reverse-prompt-dual`, `spectral-reverse-prompt-fallback` and
        `spectral-reverse-prompt-out` of notebooks/17_spectral_reverse_prompt/index.md.
        """
        if self.dual:
            z = h.new_zeros(h.shape[0], self.Q.shape[0])  # (n, r)
            if getattr(self, "A", None) is not None:
                coeff = h @ self.V  # (n, k): coordinates along the right singular vectors
                z = z + (coeff * self.mask()) @ self.A  # eq. dual: spectral channel
            if hasattr(self, "B"):
                z = z + (h @ self.N) @ self.B  # eq. dual: null-space channel
        elif self.variant in _UNMASKED:
            z = h @ self.P  # NR and NS: no spectral filtering (the code's SRP_NR, SRP_NS)
        else:
            coeff = h @ self.V  # (n, k): coordinates along the right singular vectors
            h_weak = h - (coeff * (1 - self.mask())) @ self.V.T  # eq. fallback: dominant out
            z = h_weak @ self.P  # eq. fallback: projection to r
        p = z @ self.Q + self.b  # eq. out: back to d_out
        if self.degree_gate:
            if deg is None:
                raise checks.InputError("deg must be given when degree_gate is on, got None")
            gate = torch.sigmoid(self.gate_w * torch.log(deg.float() + 1) + self.gate_b)
            p = F.layer_norm(p, (self.d_out,)) * gate[:, None]  # eq. out: GIN hook
        return p


def srp_parameter_count(
    dims: tuple[int, ...],
    rank: int = 32,
    null_dim: int = 16,
    degree_gate: bool = False,
    variant: str = "srp",
) -> int:
    """Trainable parameters of SRP (or the ablation ``variant``) on an encoder with layer widths
    ``dims`` (d_0 -> d_1 -> ...), counted from the formulas. A dual layer has A (k r) unless
    ``srp_ns`` and B (m r) unless ``srp_nm``; a fallback layer has P (d_in r); each layer has
    Q (r d_out) and b (d_out), thresholds theta (1; 2 for ``srp_bi``; none for ``srp_nr`` and
    ``srp_ns``), and 2 gate scalars with ``degree_gate``. The thresholds follow the released
    code's ``SRP``, ``SRP_NM``, ``SRP_NS``, ``SRP_NR`` and ``SRP_Bi``."""
    variant = checks.choice(variant, "variant", VARIANTS)
    thetas = {"srp_bi": 2, "srp_nr": 0, "srp_ns": 0}.get(variant, 1)
    total = 0
    for d_in, d_out in zip(dims[:-1], dims[1:]):
        k, r = min(d_in, d_out), min(rank, d_out)
        if use_decomposition(d_in, d_out, null_dim):
            first = (k * r if variant != "srp_ns" else 0) + (
                null_dim * r if variant != "srp_nm" else 0
            )
        else:
            first = d_in * r
        total += first + r * d_out + d_out + thetas + (2 if degree_gate else 0)
    return total
