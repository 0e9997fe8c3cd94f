"""The LaCT-style SwiGLU fast-weight layer (chapter 11, notebooks/11_test_time_baking).

Paper: "TTB: Test-Time Baking for Large View Synthesis Models" (NeurIPS 2026, no arXiv id).
TTB repurposes the fast-weight MLP of large-chunk test-time training (LaCT, arXiv 2505.23884):
one update over one large chunk of (key, value, learning-rate) triples, written here from the
equations of the chapter's page: the SwiGLU map, the manual gradient of the dot-product (or
squared-error) fitting loss, the optional Newton-Schulz orthogonalisation (Muon) and the
renormalisation to the initial column norms.
Weights are triples (W0, W1, W2) with shapes (..., d, h), (..., h, d), (..., d, h); the
leading dimensions (scenes, heads) broadcast.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from reprobook.core import checks

__all__ = ["swiglu", "fit_gradient", "newton_schulz", "renormalise", "update"]

NS_COEFFS = (3.4445, -4.7750, 2.0315)  # the quintic Newton-Schulz iteration of Muon


def swiglu(W, x: torch.Tensor) -> torch.Tensor:
    """f_W(x) = [silu(x W0) * (x W2)] W1 for x (b, n, d): eq. `test-time-baking-swiglu` of
    notebooks/11_test_time_baking/index.md."""
    W0, W1, W2 = W
    return (F.silu(x @ W0) * (x @ W2)) @ W1  # eq. test-time-baking-swiglu


def fit_gradient(W, k, v, eta, loss: str = "dot"):
    """The gradient (dW0, dW1, dW2) of the fitting loss over one chunk, by hand: eq.
    `test-time-baking-loss` (``loss="dot"``: -sum_i eta_i <f_W(k_i), v_i>; ``"mse"``:
    sum_i eta_i |f_W(k_i) - v_i|^2 / 2) of notebooks/11_test_time_baking/index.md.
    k, v: (b, n, d); eta: (b, n, 1)."""
    checks.choice(loss, "loss", ("dot", "mse"))
    W0, W1, W2 = W
    a, c = k @ W0, k @ W2  # pre-activations (b, n, h)
    s = F.silu(a)
    u = s * c  # hidden (b, n, h)
    if loss == "dot":
        g = -eta * v  # dL/df for the dot-product loss
    else:
        g = eta * (u @ W1 - v)  # dL/df for the squared error
    dW1 = u.transpose(-1, -2) @ g  # (b, h, d)
    du = g @ W1.transpose(-1, -2)  # (b, n, h)
    sig = torch.sigmoid(a)
    da = du * c * sig * (1 + a * (1 - sig))  # silu'(a) = sig(a) (1 + a (1 - sig(a)))
    dc = du * s
    kt = k.transpose(-1, -2)
    return kt @ da, dW1, kt @ dc  # dW0, dW1, dW2


def newton_schulz(G: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """An approximate orthogonalisation U V^T of G = U S V^T (..., m, n) by the quintic
    Newton-Schulz iteration X <- aX + (b A + c A^2) X, A = X X^T, from X = G / |G|_F: eq.
    `test-time-baking-muon` of notebooks/11_test_time_baking/index.md. Singular values end
    near 1 (roughly 0.7 to 1.2), not exactly 1."""
    steps = checks.integer(steps, "steps", minimum=1)
    a, b, c = NS_COEFFS
    tall = G.shape[-2] > G.shape[-1]
    X = G.transpose(-1, -2) if tall else G
    fro = (X * X).sum(dim=(-2, -1), keepdim=True).sqrt()  # Frobenius norm (see _column_norms)
    X = X / (fro + eps)  # eq. test-time-baking-muon: scale
    for _ in range(steps):
        A = X @ X.transpose(-1, -2)
        X = a * X + (b * A + c * A @ A) @ X  # the quintic step
    return X.transpose(-1, -2) if tall else X


def _column_norms(W: torch.Tensor) -> torch.Tensor:
    """The Euclidean norm of each column of W (over dim -2), kept as a row. Written as a sum
    of squares because ``Tensor.norm`` over a non-last dimension takes a slow path on CPU
    (about 20 times slower at the chapter's shapes)."""
    return (W * W).sum(dim=-2, keepdim=True).sqrt()


def renormalise(W_new: torch.Tensor, W_ref: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """W_new with each column rescaled to the norm of the same column of W_ref (norms over the
    input dimension, -2): eq. `test-time-baking-update` of the chapter's index.md."""
    ref = _column_norms(W_ref)
    return W_new / (_column_norms(W_new) + eps) * ref  # eq. ...-update: renorm


def update(W, k, v, eta, *, loss: str = "dot", muon_steps: int = 5, renorm: bool = True):
    """One large-chunk step W' = W - M(grad L(W)) (M = Newton-Schulz when ``muon_steps`` > 0,
    the identity otherwise), each matrix then renormalised to W's column norms when
    ``renorm``: eq. `test-time-baking-update` of notebooks/11_test_time_baking/index.md."""
    muon_steps = checks.integer(muon_steps, "muon_steps", minimum=0)
    renorm = checks.boolean(renorm, "renorm")
    grads = fit_gradient(W, k, v, eta, loss)  # eq. test-time-baking-loss
    out = []
    for w, g in zip(W, grads):
        step = newton_schulz(g, muon_steps) if muon_steps else g  # Muon, optional
        w_new = w - step  # eq. test-time-baking-update: one descent step
        out.append(renormalise(w_new, w) if renorm else w_new)  # keep column norms
    return tuple(out)
