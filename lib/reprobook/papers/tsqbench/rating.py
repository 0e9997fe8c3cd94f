"""From pairwise judgements to quality scores, and data selection with them.

Paper: "TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning"
(arXiv 2606.03629), which inherits its rater from TSRating. The agent's verdict on a pair becomes
a soft label (eq. `tsqbench-soft-label`); confident labels are kept; a scorer is fitted with the
Bradley-Terry cross-entropy (eq. `tsqbench-bt`); the top half of a training pool by score is
kept. Here the scorer is an MLP on catch22 features (pycatch22) instead of MOMENT embeddings, and
the downstream tasks are CBF classification (a 1-D CNN) and CO2 forecasting (a linear model).
"""

from __future__ import annotations

import numpy as np
import pycatch22
import torch
from sklearn.linear_model import Ridge
from torch import nn

from reprobook.core import checks

from . import bench
from .tools import fill_missing

__all__ = [
    "soft_label",
    "keep_label",
    "bt_loss",
    "Rater",
    "train_rater",
    "catch22_features",
    "cbf",
    "co2_series",
    "blocks",
    "corrupt_pool",
    "top_k",
    "CNN",
    "cnn_accuracy",
    "forecast_rmse",
]


def soft_label(winner: str, confidence: float) -> float:
    """p = P(B is better): (1 - c) / 2 when A wins with confidence c, (1 + c) / 2 when B wins,
    1/2 for anything else (a tie).

    Implements eq. `tsqbench-soft-label` of notebooks/12_tsqbench/index.md."""
    c = checks.probability(confidence, "confidence")
    if winner == "A":
        return (1 - c) / 2  # eq. tsqbench-soft-label: A better
    if winner == "B":
        return (1 + c) / 2  # eq. tsqbench-soft-label: B better
    return 0.5  # eq. tsqbench-soft-label: tie


def keep_label(p: float, threshold: float = 0.5) -> bool:
    """The confidence filter |2p - 1| >= threshold (boundary included)."""
    p = checks.probability(p, "p")
    return bool(abs(2 * p - 1) >= checks.real(threshold, "threshold", minimum=0, maximum=1))


def bt_loss(s_a, s_b, p) -> torch.Tensor:
    """Mean Bradley-Terry cross-entropy -[p log sigma(s_B - s_A) + (1 - p) log sigma(s_A - s_B)]
    with soft labels p = P(B better), computed with logsigmoid (no overflow at large margins).

    Implements eq. `tsqbench-bt` of notebooks/12_tsqbench/index.md."""
    s_a, s_b, p = (torch.as_tensor(v, dtype=torch.float32) for v in (s_a, s_b, p))
    diff = s_b - s_a  # eq. tsqbench-bt: s_B - s_A
    f = nn.functional.logsigmoid
    return -(p * f(diff) + (1 - p) * f(-diff)).mean()  # eq. tsqbench-bt


class Rater(nn.Module):
    """s(x): an MLP with two hidden layers on standardised features, one score per series."""

    def __init__(self, n_in: int = 22, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_in, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )
        self.register_buffer("mu", torch.zeros(n_in))
        self.register_buffer("sd", torch.ones(n_in))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (n, 22) -> (n,)
        return self.net((x - self.mu) / self.sd).squeeze(-1)


def train_rater(
    features,
    idx_a,
    idx_b,
    p,
    *,
    hidden: int = 64,
    epochs: int = 200,
    lr: float = 1e-2,
    seed: int = 0,
) -> Rater:
    """Fit a :class:`Rater` to soft-labelled pairs (rows ``idx_a`` against ``idx_b``) by
    full-batch Adam on eq. `tsqbench-bt`."""
    F = checks.array(features, "features", ndim=2)
    ia = np.asarray(idx_a, int)
    ib = np.asarray(idx_b, int)
    torch.manual_seed(checks.integer(seed, "seed", minimum=0))
    model = Rater(F.shape[1], hidden)
    model.mu.copy_(torch.as_tensor(F.mean(0), dtype=torch.float32))
    model.sd.copy_(torch.as_tensor(F.std(0) + 1e-6, dtype=torch.float32))
    Ft = torch.as_tensor(F, dtype=torch.float32)
    pt = torch.as_tensor(np.asarray(p, float), dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    for _ in range(checks.integer(epochs, "epochs", minimum=1)):
        s = model(Ft)
        loss = bt_loss(s[ia], s[ib], pt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def catch22_features(X) -> np.ndarray:
    """The 22 catch22 features of each row (missing values interpolated first); non-finite
    features become 0."""
    rows = [pycatch22.catch22_all(list(fill_missing(x)))["values"] for x in X]
    return np.nan_to_num(np.asarray(rows, float), nan=0.0, posinf=0.0, neginf=0.0)


def cbf(n: int, length: int = 128, rng=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Saito's Cylinder-Bell-Funnel: class 0 flat, 1 rising, 2 falling, (6 + eta) times the
    shape on [a, b], a ~ U{16..32}, b - a ~ U{32..96}, plus N(0, 1) noise. Returns (X, y,
    onsets (n, 2))."""
    n = checks.integer(n, "n", minimum=1)
    length = checks.integer(length, "length", minimum=128)
    rng = checks.generator(rng if rng is not None else np.random.default_rng(0))
    y = rng.integers(0, 3, n)
    t = np.arange(length)
    X = np.empty((n, length))
    on = np.empty((n, 2), int)
    for i in range(n):
        a = int(rng.integers(16, 33))
        b = a + int(rng.integers(32, 97))
        inside = ((t >= a) & (t <= b)).astype(float)
        ramp = (t - a) / (b - a)
        shape = inside * (1.0, ramp, 1 - ramp)[y[i]]
        X[i] = (6 + rng.standard_normal()) * shape + rng.standard_normal(length)
        on[i] = a, b
    return X, y, on


def co2_series() -> np.ndarray:
    """Mauna Loa weekly CO2 (statsmodels' bundled copy), gaps interpolated."""
    from statsmodels.datasets import co2

    v = co2.load_pandas().data["co2"].to_numpy(float)
    return fill_missing(v)


def blocks(x, length: int, stride: int) -> np.ndarray:
    """Overlapping windows of ``length`` every ``stride`` points, (n_blocks, length)."""
    x = checks.array(x, "x", ndim=1)
    length = checks.integer(length, "length", minimum=2, maximum=x.size)
    stride = checks.integer(stride, "stride", minimum=1)
    starts = np.arange(0, x.size - length + 1, stride)
    return np.stack([x[s : s + length] for s in starts])


def corrupt_pool(X, share: float, rng, boundaries=None) -> tuple[np.ndarray, np.ndarray]:
    """A copy of the pool with 1-2 random defects (TSQBench-lite's injectors, heavy or light
    with equal odds) in a random ``share`` of its rows. Returns (pool, defect load per row:
    heavy 2, light 1)."""
    X = checks.array(X, "X", ndim=2)
    share = checks.probability(share, "share")
    rng = checks.generator(rng)
    bounds = boundaries or bench.default_boundaries()
    out = X.copy()
    load = np.zeros(len(X))
    chosen = rng.choice(len(X), size=int(round(share * len(X))), replace=False)
    for i in chosen:
        base = {"signal": X[i], "scale": float(np.std(X[i])) or 1.0, "period": None}
        for _ in range(int(rng.integers(1, 3))):
            d = bench.DIMENSIONS[int(rng.integers(len(bench.DIMENSIONS)))]
            m = list(bench.INJECTORS[d])[int(rng.integers(len(bench.INJECTORS[d])))]
            b = bounds[(d, m)]
            heavy = rng.random() < 0.5
            s = rng.uniform(b, 1.0) if heavy else rng.uniform(bench.LIGHT_LOW, b)
            out[i] = bench.inject(out[i], base, d, m, s, rng)
            load[i] += 2.0 if heavy else 1.0
    return out, load


def top_k(scores, k: int) -> np.ndarray:
    """Indices of the k highest scores, ties broken by the lower index (a stable sort), so
    the selection is deterministic."""
    s = checks.array(scores, "scores", ndim=1)
    k = checks.integer(k, "k", minimum=0, maximum=s.size)
    return np.sort(np.argsort(-s, kind="stable")[:k])


class CNN(nn.Module):
    """A small 1-D CNN classifier: two conv layers (kernel 7), global average pooling."""

    def __init__(self, channels: int = 16, n_classes: int = 3):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, channels, 7, padding=3),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 7, padding=3),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
            nn.Linear(channels, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (n, L) -> (n, classes)
        return self.net(x.unsqueeze(1))


def _znorm(X) -> np.ndarray:
    X = np.array([fill_missing(x) for x in X])
    return (X - X.mean(1, keepdims=True)) / (X.std(1, keepdims=True) + 1e-8)


def cnn_accuracy(
    Xtr, ytr, Xte, yte, *, channels: int = 16, epochs: int = 30, seed: int = 0
) -> float:
    """Test accuracy of :class:`CNN` trained on (Xtr, ytr) (series z-normalised, gaps
    interpolated) with Adam, batches of 32."""
    torch.manual_seed(seed)
    model = CNN(channels)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    Xt = torch.as_tensor(_znorm(Xtr), dtype=torch.float32)
    yt = torch.as_tensor(np.asarray(ytr), dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(Xt), generator=gen).split(32):
            loss = nn.functional.cross_entropy(model(Xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        pred = model(torch.as_tensor(_znorm(Xte), dtype=torch.float32)).argmax(1).numpy()
    return float(np.mean(pred == np.asarray(yte)))


def forecast_rmse(
    train_blocks,
    test_series,
    *,
    seq_len: int = 96,
    pred_len: int = 32,
    alpha: float = 1.0,
    stride: int = 8,
) -> float:
    """RMSE of a linear forecaster (ridge, last-value normalised as in NLinear) fitted on the
    training blocks (each split into seq_len inputs and pred_len targets, gaps interpolated)
    and scored on every window of the clean test series, stride ``stride``."""
    B = np.array([fill_missing(b) for b in train_blocks])
    Xtr = B[:, :seq_len] - B[:, seq_len - 1 : seq_len]
    Ytr = B[:, seq_len : seq_len + pred_len] - B[:, seq_len - 1 : seq_len]
    model = Ridge(alpha=alpha).fit(Xtr, Ytr)
    T = blocks(test_series, seq_len + pred_len, stride)
    last = T[:, seq_len - 1 : seq_len]
    pred = model.predict(T[:, :seq_len] - last) + last
    return float(np.sqrt(np.mean((pred - T[:, seq_len:]) ** 2)))
