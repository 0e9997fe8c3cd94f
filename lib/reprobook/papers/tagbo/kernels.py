"""The task-aware covariance of TagBO as a gpytorch kernel, and the "direct score" mean.

:class:`TaskAwareKernel` takes inputs whose categorical columns hold level indices (as floats,
the botorch convention) and looks each pair up in a per-variable Gram matrix

    K_j = w_j exp(-beta_j L_j) (unit diagonal) + (1 - w_j) K_desc,j        eq. `tagbo-mix`

with learnable beta_j > 0 and w_j in [0, 1]; the variables combine by a product (eq.
`tagbo-cat`), and continuous columns join through CoCaBO's mixture with a Matern-5/2 ARD kernel
and a learnable lambda in [0, 1] (eq. `tagbo-cocabo`). Fixing w = 0 gives the descriptor-only
baseline, w = 1 the graph-only ablation; identity descriptor Grams with a mean over variables
give the CoCaBO-style overlap kernel.

:class:`TierMean` puts the prior's tiers into the GP's mean instead (eq. `tagbo-tiermean`), the
use of the prior that the paper argues against. All of it is our reconstruction from the
abstract (notebooks/09_tagbo/index.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import Kernel, MaternKernel
from gpytorch.means import Mean

from reprobook.core import checks

from .similarity import diffusion_eigen, normalized_laplacian, tier_graph

__all__ = ["TaskAwareKernel", "TierMean", "diffusion_gram_torch"]


def diffusion_gram_torch(lam: torch.Tensor, V: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """exp(-beta L), rescaled to unit diagonal, from the eigenpairs ``lam``, ``V`` of
    :func:`.similarity.diffusion_eigen` (per connected component, each component's smallest
    eigenvalue shifted to 0, which the rescaling cancels); differentiable in beta, and exact
    for any beta: levels in different components get similarity 0.

    Implements eq. `tagbo-diffusion` of notebooks/09_tagbo/index.md.
    """
    K = (V * torch.exp(-beta * lam)) @ V.T  # V diag(exp(-beta lam)) V^T
    s = torch.sqrt(torch.diagonal(K))  # K's diagonal, positive (>= the Perron vector squared)
    return K / s[:, None] / s[None, :]  # unit diagonal


class TaskAwareKernel(Kernel):
    """The categorical kernel of eqs. `tagbo-mix` and `tagbo-cat`, joined to a Matern kernel on
    the continuous columns by eq. `tagbo-cocabo`.

    ``desc_grams[j]``: the (L_j, L_j) descriptor Gram of variable j; ``tiers[j]``: the prior's
    ordinal tiers of its levels, or None for no graph (then w_j = 0); ``w``: "learn" or a fixed
    weight in [0, 1]; ``combine``: "product" over variables, or "mean" (CoCaBO's overlap sum).
    """

    has_lengthscale = False

    def __init__(
        self,
        cat_dims: Sequence[int],
        desc_grams: Sequence[np.ndarray],
        tiers: Sequence[np.ndarray | None] | None = None,
        cont_dims: Sequence[int] = (),
        w: str | float = "learn",
        combine: str = "product",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.cat_dims = [int(d) for d in cat_dims]
        self.cont_dims = [int(d) for d in cont_dims]
        m = len(self.cat_dims)
        if len(desc_grams) != m:
            raise checks.InputError(
                f"desc_grams must hold {m} Gram matrices, got {len(desc_grams)}"
            )
        tiers = list(tiers) if tiers is not None else [None] * m
        if len(tiers) != m:
            raise checks.InputError(f"tiers must hold {m} entries (or None), got {len(tiers)}")
        self.combine = checks.choice(combine, "combine", ("product", "mean"))
        self.has_graph = [t is not None for t in tiers]
        for j, (G, t) in enumerate(zip(desc_grams, tiers, strict=True)):
            G = torch.as_tensor(np.asarray(G, dtype=float))
            self.register_buffer(f"desc_{j}", G)
            n = G.shape[0]
            L = normalized_laplacian(tier_graph(t)) if t is not None else np.zeros((n, n))
            if t is not None and len(t) != n:
                raise checks.InputError(f"tiers[{j}] has {len(t)} levels, its Gram has {n}")
            lam, V = diffusion_eigen(L)  # per component, shifted (see diffusion_gram_torch)
            self.register_buffer(f"lam_{j}", torch.as_tensor(lam))
            self.register_buffer(f"vec_{j}", torch.as_tensor(V))
        self.register_parameter("raw_beta", torch.nn.Parameter(torch.zeros(m)))
        self.register_constraint("raw_beta", Positive())
        self.learn_w = w == "learn"
        if self.learn_w:
            self.register_parameter("raw_w", torch.nn.Parameter(torch.zeros(m)))
            self.register_constraint("raw_w", Interval(0.0, 1.0))
        else:
            w = checks.probability(w, "w")
            fixed = torch.tensor([w if g else 0.0 for g in self.has_graph], dtype=torch.float64)
            self.register_buffer("fixed_w", fixed)
        if self.cont_dims:
            self.cont_kernel = MaternKernel(nu=2.5, ard_num_dims=len(self.cont_dims))
            self.register_parameter("raw_lam", torch.nn.Parameter(torch.zeros(1)))
            self.register_constraint("raw_lam", Interval(0.0, 1.0))

    @property
    def beta(self) -> torch.Tensor:
        return self.raw_beta_constraint.transform(self.raw_beta)

    @property
    def w(self) -> torch.Tensor:
        if self.learn_w:
            w = self.raw_w_constraint.transform(self.raw_w)
            return w * torch.tensor(self.has_graph, dtype=w.dtype)  # no graph: w = 0
        return self.fixed_w

    @property
    def lam(self) -> torch.Tensor:
        return self.raw_lam_constraint.transform(self.raw_lam)

    def gram(self, j: int) -> torch.Tensor:
        """The (L_j, L_j) Gram of variable j, eq. `tagbo-mix`."""
        desc = getattr(self, f"desc_{j}")
        if not self.has_graph[j]:
            return desc
        graph = diffusion_gram_torch(
            getattr(self, f"lam_{j}"), getattr(self, f"vec_{j}"), self.beta[j]
        )
        return self.w[j] * graph + (1 - self.w[j]) * desc  # eq. tagbo-mix

    def forward(self, x1, x2, diag: bool = False, last_dim_is_batch: bool = False, **params):
        parts = []
        for j, d in enumerate(self.cat_dims):
            G = self.gram(j).to(x1)
            a, b = x1[..., d].round().long(), x2[..., d].round().long()
            parts.append(G[a, b] if diag else G[a.unsqueeze(-1), b.unsqueeze(-2)])
        if self.combine == "product":
            k_cat = torch.stack(parts).prod(0)  # eq. tagbo-cat
        else:
            k_cat = torch.stack(parts).mean(0)
        if not self.cont_dims:
            return k_cat
        u1, u2 = x1[..., self.cont_dims], x2[..., self.cont_dims]
        k_cont = self.cont_kernel(u1, u2, diag=diag).to_dense()
        lam = self.lam.to(x1)
        return (1 - lam) * (k_cat + k_cont) + lam * k_cat * k_cont  # eq. tagbo-cocabo


class TierMean(Mean):
    """m(x) = c + a sum_j (o_j[x_j] - 2): the prior's tiers as a prior mean, a and c learned.

    Implements eq. `tagbo-tiermean` of notebooks/09_tagbo/index.md.
    """

    def __init__(self, cat_dims: Sequence[int], tiers: Sequence[np.ndarray]):
        super().__init__()
        self.cat_dims = [int(d) for d in cat_dims]
        for j, t in enumerate(tiers):
            self.register_buffer(f"score_{j}", torch.as_tensor(np.asarray(t, dtype=float) - 2.0))
        self.a = torch.nn.Parameter(torch.zeros(1))
        self.c = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        s = 0.0
        for j, d in enumerate(self.cat_dims):
            s = s + getattr(self, f"score_{j}").to(x)[x[..., d].round().long()]
        return self.c + self.a * s  # eq. tagbo-tiermean
