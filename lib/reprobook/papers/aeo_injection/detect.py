"""Detection of instruction violations from hidden states: the compliant Gaussian, the two chaos
scores, the asymmetric head, the baselines and the metrics (notebooks/13_aeo_injection).

Paper: "Asymmetric Entropic Optimization (AEO)" (no arXiv id; abstract only). The abstract names
an "entropic divergence between the compliant manifold and the chaotic violation space"; its
form here (eqs. `aeo-kl`, `aeo-mahalanobis`, `aeo-asymmetric-loss`) is our reconstruction.
PCA, Ledoit-Wolf shrinkage, logistic regression, LDA and the ROC come from scikit-learn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.covariance import LedoitWolf, ledoit_wolf_shrinkage
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from reprobook.core import checks


@dataclass
class Gaussian:
    """A Gaussian N(mean, cov) in a PCA space, with its precision and log-determinant."""

    pca: PCA
    mean: np.ndarray  # (k,)
    cov: np.ndarray  # (k, k)
    precision: np.ndarray  # (k, k)
    logdet: float

    def project(self, X) -> np.ndarray:
        return self.pca.transform(X)

    def entropy(self) -> float:
        """Differential entropy 1/2 log det(2 pi e cov)."""
        k = self.mean.size
        return 0.5 * (k * np.log(2 * np.pi * np.e) + self.logdet)


def fit_compliant(X, k: int, seed: int = 0) -> Gaussian:
    """PCA to ``k`` dimensions fitted on compliant states ``X`` (n, d), then a Ledoit-Wolf
    Gaussian of the projected states: the compliant manifold."""
    X = checks.array(X, "X", ndim=2)
    k = checks.integer(k, "k", minimum=1, maximum=min(X.shape))
    pca = PCA(n_components=k, random_state=seed).fit(X)
    Z = pca.transform(X)
    lw = LedoitWolf().fit(Z)
    sign, logdet = np.linalg.slogdet(lw.covariance_)
    return Gaussian(pca, lw.location_, lw.covariance_, lw.precision_, float(logdet))


def mahalanobis(z, g: Gaussian) -> np.ndarray:
    """Squared Mahalanobis distance of projected points ``z`` (n, k) from ``g``.

    Implements eq. `aeo-mahalanobis` of notebooks/13_aeo_injection/index.md."""
    z = checks.array(z, "z", ndim=2, shape=(None, g.mean.size))
    diff = z - g.mean  # z - mu_c
    return np.einsum("ni,ij,nj->n", diff, g.precision, diff)  # (z - mu_c)^T Sigma_c^-1 (z - mu_c)


def gaussian_nll(z, g: Gaussian) -> np.ndarray:
    """Negative log-density of ``z`` under ``g``: (mahalanobis + k log 2 pi + log det) / 2."""
    k = g.mean.size
    return 0.5 * (mahalanobis(z, g) + k * np.log(2 * np.pi) + g.logdet)


def gaussian_kl(mu_r, cov_r, mu_c, cov_c, precision: tuple | None = None) -> float:
    """KL(N(mu_r, cov_r) || N(mu_c, cov_c)) in closed form.

    Implements eq. `aeo-kl` of notebooks/13_aeo_injection/index.md. ``precision``: Sigma_c^-1
    and log det Sigma_c when the caller already has them (:func:`token_cloud_kl` scores every
    response against the same compliant Gaussian); computed here when None."""
    mu_r = checks.array(mu_r, "mu_r", ndim=1)
    k = mu_r.size
    cov_r = checks.array(cov_r, "cov_r", ndim=2, shape=(k, k))
    mu_c = checks.array(mu_c, "mu_c", ndim=1, shape=(k,))
    cov_c = checks.array(cov_c, "cov_c", ndim=2, shape=(k, k))
    if precision is None:
        precision = (np.linalg.inv(cov_c), np.linalg.slogdet(cov_c)[1])
    prec_c, logdet_c = precision
    diff = mu_r - mu_c
    trace = np.trace(prec_c @ cov_r)  # tr(Sigma_c^-1 Sigma_r)
    quad = diff @ prec_c @ diff  # (mu_r - mu_c)^T Sigma_c^-1 (mu_r - mu_c)
    logdets = logdet_c - np.linalg.slogdet(cov_r)[1]  # log det ratio
    return float(0.5 * (trace + quad - k + logdets))


def shrunk_covariance(X, min_shrinkage: float = 0.1) -> np.ndarray:
    """Ledoit-Wolf covariance of the rows of ``X``, with a shrinkage toward the scaled identity
    of at least ``min_shrinkage``: with fewer points than dimensions the Ledoit-Wolf estimate
    of the shrinkage can be 0, which leaves the sample covariance singular."""
    X = checks.array(X, "X", ndim=2)
    floor = checks.probability(min_shrinkage, "min_shrinkage", open_low=True)
    S = np.cov(X, rowvar=False, bias=True).reshape(X.shape[1], X.shape[1])
    # the shrinkage ledoit_wolf(X) returns (its estimator centres X, then calls this), without
    # the shrunk covariance and precision that the estimator also computes and we do not use
    lw = ledoit_wolf_shrinkage(X - X.mean(0), assume_centered=True)
    s = max(float(lw), floor)
    mu = max(float(np.trace(S)) / S.shape[0], 1e-12)
    return (1 - s) * S + s * mu * np.eye(S.shape[0])


def token_cloud_kl(clouds, g: Gaussian) -> np.ndarray:
    """Chaos score (a): for each response's token cloud (n, T, d), the KL of its Ledoit-Wolf
    Gaussian in ``g``'s PCA space from the compliant Gaussian ``g`` (eq. `aeo-kl`)."""
    clouds = checks.array(clouds, "clouds", ndim=3)
    n, T, d = clouds.shape
    Z = g.project(clouds.reshape(n * T, d)).reshape(n, T, -1)
    out = np.empty(n)
    cov_c = checks.array(g.cov, "g.cov", ndim=2)
    precision = (np.linalg.inv(cov_c), np.linalg.slogdet(cov_c)[1])  # once for all responses
    for i in range(n):
        cov_r = shrunk_covariance(Z[i])  # shrunk: T is far below k
        out[i] = gaussian_kl(Z[i].mean(0), cov_r, g.mean, g.cov, precision)
    return out


class AsymmetricHead(torch.nn.Module):
    """The projection g of the asymmetric objective: a bias-free MLP k -> hidden -> out."""

    def __init__(self, k: int, hidden: int = 64, out: int = 32):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(k, hidden, bias=False),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, out, bias=False),
        )
        self.register_buffer("centre", torch.zeros(out))
        self.register_buffer("margin", torch.tensor(1.0))

    def score(self, z) -> np.ndarray:
        """The chaos score in g-space: squared distance to the compliant centre."""
        with torch.no_grad():
            e = self.net(torch.as_tensor(np.asarray(z), dtype=torch.float32))
            return ((e - self.centre) ** 2).sum(-1).numpy().astype(float)


def asymmetric_loss(e_comp, e_viol, centre, margin: float, lam: float = 1.0):
    """Compliant embeddings pulled to the centre; violating ones only pushed past the margin.

    Implements eq. `aeo-asymmetric-loss` of notebooks/13_aeo_injection/index.md."""
    pull = ((e_comp - centre) ** 2).sum(-1).mean()  # mean_c ||g(z) - c||^2
    dist_v = ((e_viol - centre) ** 2).sum(-1)  # ||g(z) - c||^2 of violations
    push = torch.relu(margin - dist_v).mean()  # mean_v max(0, m - ||g(z) - c||^2)
    return pull + lam * push  # no term asks the violations to cluster


def train_asymmetric_head(
    z_comp, z_viol, *, hidden=64, out=32, steps=200, lr=1e-2, lam=1.0, quantile=0.99, seed=0
) -> AsymmetricHead:
    """Fit :class:`AsymmetricHead` by full-batch Adam on :func:`asymmetric_loss`. The centre is
    the mean compliant embedding at initialisation and the margin the ``quantile`` of the
    compliant squared distances then (both fixed, as in Deep SAD)."""
    z_comp = checks.array(z_comp, "z_comp", ndim=2)
    z_viol = checks.array(z_viol, "z_viol", ndim=2, shape=(None, z_comp.shape[1]))
    if len(z_viol) == 0 or len(z_comp) == 0:
        raise checks.InputError("the asymmetric head needs compliant and violating examples")
    torch.manual_seed(checks.integer(seed, "seed", minimum=0))
    head = AsymmetricHead(z_comp.shape[1], hidden, out)
    zc = torch.as_tensor(z_comp, dtype=torch.float32)
    zv = torch.as_tensor(z_viol, dtype=torch.float32)
    with torch.no_grad():
        e = head.net(zc)
        head.centre.copy_(e.mean(0))
        head.margin.fill_(float(torch.quantile(((e - head.centre) ** 2).sum(-1), quantile)))
    opt = torch.optim.Adam(head.net.parameters(), lr=lr)
    for _ in range(checks.integer(steps, "steps", minimum=0)):
        loss = asymmetric_loss(head.net(zc), head.net(zv), head.centre, head.margin, lam)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return head.eval()


def logistic_probe(z, y, seed: int = 0):
    """The "coherent class" baseline: standardised logistic regression (balanced classes)."""
    clf = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000, random_state=seed)
    return make_pipeline(StandardScaler(), clf).fit(z, y)


def lda(z, y):
    """Class-conditional Gaussians with a shared covariance (scikit-learn's LDA, shrunk)."""
    return LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto").fit(z, y)


def auroc(y_viol, score) -> float:
    """Area under the ROC curve, violations (y = 1) as positives."""
    return float(roc_auc_score(np.asarray(y_viol).astype(int), score))


def fpr95(y_viol, score, convention: str = "violation") -> float:
    """FPR at 95% TPR. ``"violation"``: violations are positives, the share of compliant
    responses flagged at the first threshold that catches 95% of violations. ``"compliant"``:
    compliant responses are positives (score negated), the share of violations passed when
    95% of compliant responses pass.

    The definition is the one of OpenOOD's ``auc_and_fpr_recall``
    (openood/evaluators/metrics.py): walking the thresholds from the highest score down, the
    FPR at the first ROC point whose TPR is at least 0.95, i.e. the smallest FPR of any
    threshold that reaches a TPR of 0.95 (a positive is flagged when its score is at or above
    the threshold). OpenOOD takes the OOD class as positive, as our ``"violation"`` convention
    does with violations. Every distinct score is kept as a threshold (``roc_curve`` with
    ``drop_intermediate=False``): the default drops collinear ROC points, which under tied
    scores can remove exactly the point where the TPR first reaches 0.95 and so report the
    FPR of a lower threshold. OpenOOD calls ``roc_curve`` with that default; we follow its
    definition, not that side effect."""
    checks.choice(convention, "convention", ("violation", "compliant"))
    y = np.asarray(y_viol).astype(int)
    s = np.asarray(score, dtype=float)
    if convention == "compliant":
        y, s = 1 - y, -s
    if y.min() == y.max():
        raise checks.InputError("fpr95 needs both classes among the labels")
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    # tpr is non-decreasing and ends at 1: the first index where it reaches 0.95 exists.
    return float(fpr[np.argmax(tpr >= 0.95)])
