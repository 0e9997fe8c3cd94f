"""Offline graphs for chapter 17 (notebooks/17_spectral_reverse_prompt).

Paper: "Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting"
(arXiv 2609.32143). The paper's benchmarks (Planetoid, OGB, Flickr, TU) are downloaded at run
time and cannot be had offline; this module builds what the chapter uses instead:

- a contextual stochastic block model (CSBM) whose class means lie either in the
  high-variance feature subspace ("aligned") or in a low-variance one ("weak"), with a
  rotation angle between the two for the constructed shift (eq. `spectral-reverse-prompt-csbm`);
- scikit-learn's bundled digits as a node graph (a 10-NN graph on 4 x 4 downsampled images,
  64 pixel features) and as 1,797 grid graphs (one 8-neighbour 8 x 8 grid per image).
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from reprobook.core import checks

from .config import CSBMSpec

__all__ = [
    "csbm",
    "edge_homophily",
    "digits_node_graph",
    "digits_grid_graphs",
    "graph_by_name",
    "load_benchmark",
    "BENCHMARKS",
]

BENCHMARKS = ("Cora", "CiteSeer", "PubMed", "ogbn-arxiv", "Flickr", "ENZYMES", "DD", "NCI1")


def _basis(dim: int, seed: int) -> np.ndarray:
    """A random orthogonal basis of R^dim (QR of a Gaussian matrix, signs fixed)."""
    g = np.random.default_rng([seed, 7919]).normal(size=(dim, dim))
    q, r = np.linalg.qr(g)
    return q * np.sign(np.diag(r))


def _edges(y: np.ndarray, n_edges: int, homophily: float, rng) -> torch.Tensor:
    """About ``n_edges`` undirected edges, a share ``homophily`` of them inside a class."""
    n = y.size
    n_in = int(round(homophily * n_edges))
    order = np.argsort(y, kind="stable")  # nodes grouped by class
    sizes = np.bincount(y)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    src_in = rng.integers(0, n, size=n_in)
    pick = np.floor(rng.random(n_in) * sizes[y[src_in]]).astype(np.int64)
    dst_in = order[starts[y[src_in]] + pick]  # a uniform node of the same class
    n_out = n_edges - n_in
    src_out = rng.integers(0, n, size=4 * n_out + 16)
    dst_out = rng.integers(0, n, size=4 * n_out + 16)
    keep = y[src_out] != y[dst_out]
    src_out, dst_out = src_out[keep][:n_out], dst_out[keep][:n_out]
    ei = torch.from_numpy(np.stack([np.r_[src_in, src_out], np.r_[dst_in, dst_out]]))
    ei, _ = remove_self_loops(ei.long())
    return coalesce(to_undirected(ei, num_nodes=n), num_nodes=n)


def csbm(spec: CSBMSpec, angle: float, seed: int) -> Data:
    """A contextual SBM (eq. `spectral-reverse-prompt-csbm` of
    notebooks/17_spectral_reverse_prompt/index.md, our construction).

    Features x_i = signal * u_{y_i}(angle) + noise, noise ~ N(0, Q diag(s^2) Q^T) with a fixed
    random basis Q (``spec.basis_seed``): ``spec.nuisance_dim`` coordinates of standard
    deviation ``nuisance_std``, ``n_classes`` coordinates of ``weak_std``, the rest 1. The class
    direction u_c = cos(angle) q_{a_c} + sin(angle) q_{b_c} turns from the high-variance block
    (angle 0: "aligned") to the low-variance block (angle 90 degrees: "weak"). Edges: about
    n * degree / 2 undirected edges, a share ``homophily`` inside a class. ``angle`` in degrees.
    """
    angle = checks.real(angle, "angle", minimum=0.0, maximum=90.0)
    seed = checks.integer(seed, "seed", minimum=0)
    rng = np.random.default_rng([seed, spec.basis_seed])
    n, c, d = spec.n, spec.n_classes, spec.dim
    q = _basis(d, spec.basis_seed)
    std = np.ones(d)
    std[: spec.nuisance_dim] = spec.nuisance_std  # high-variance nuisance block
    weak = np.arange(spec.nuisance_dim, spec.nuisance_dim + c)
    std[weak] = spec.weak_std  # low-variance block
    t = np.deg2rad(angle)
    u = np.cos(t) * q[:, :c].T + np.sin(t) * q[:, weak].T  # (C, d) class directions
    y = rng.integers(0, c, size=n)
    x = spec.signal * u[y] + (rng.normal(size=(n, d)) * std) @ q.T
    ei = _edges(y, int(round(n * spec.degree / 2)), spec.homophily, rng)
    return Data(
        x=torch.tensor(x, dtype=torch.float32),
        edge_index=ei,
        y=torch.from_numpy(y).long(),
        num_nodes=n,
    )


def edge_homophily(edge_index: torch.Tensor, y: torch.Tensor) -> float:
    """The share of edges whose two ends have the same label."""
    if edge_index.numel() == 0:
        raise checks.InputError("edge_index must hold at least one edge, got none")
    return float((y[edge_index[0]] == y[edge_index[1]]).float().mean())


def digits_node_graph(k: int = 5) -> Data:
    """scikit-learn's 1,797 digits as one graph: 64 pixel features (scaled to [0, 1]) and a
    symmetrised k-NN graph built on a different view, the 4 x 4 block means of each image."""
    from sklearn.datasets import load_digits
    from sklearn.neighbors import NearestNeighbors

    k = checks.integer(k, "k", minimum=1, maximum=100)
    digits = load_digits()
    img = digits.images / 16.0  # (1797, 8, 8)
    small = img.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4)).reshape(len(img), 16)
    _, nbr = NearestNeighbors(n_neighbors=k + 1).fit(small).kneighbors(small)
    src = np.repeat(np.arange(len(img)), k)
    ei = torch.from_numpy(np.stack([src, nbr[:, 1:].reshape(-1)])).long()
    ei = coalesce(to_undirected(ei, num_nodes=len(img)), num_nodes=len(img))
    return Data(
        x=torch.tensor(img.reshape(len(img), 64), dtype=torch.float32),
        edge_index=ei,
        y=torch.from_numpy(digits.target).long(),
        num_nodes=len(img),
    )


def digits_grid_graphs() -> list[Data]:
    """scikit-learn's 1,797 digits as graph-classification data: each image is a 64-node
    8-neighbour grid with node features [intensity, row, column, 3 x 3 mean intensity]."""
    from scipy.ndimage import uniform_filter
    from sklearn.datasets import load_digits

    digits = load_digits()
    rows, cols = np.divmod(np.arange(64), 8)
    pairs = [
        (8 * r + c, 8 * (r + dr) + c + dc)
        for r in range(8)
        for c in range(8)
        for dr, dc in ((0, 1), (1, -1), (1, 0), (1, 1))
        if 0 <= r + dr < 8 and 0 <= c + dc < 8
    ]
    ei = to_undirected(torch.tensor(pairs, dtype=torch.long).T, num_nodes=64)
    out = []
    for img, label in zip(digits.images / 16.0, digits.target):
        mean3 = uniform_filter(img, size=3, mode="constant")
        feats = np.stack([img.reshape(-1), rows / 7, cols / 7, mean3.reshape(-1)], axis=1)
        out.append(Data(x=torch.tensor(feats, dtype=torch.float32), edge_index=ei, y=int(label)))
    return out


def load_benchmark(name: str) -> Data:
    """The paper's benchmarks are fetched over the network by PyG and OGB; this book runs
    offline, so every one of them raises an error that says so."""
    name = checks.choice(name, "name", BENCHMARKS)
    raise RuntimeError(
        f"the benchmark {name!r} is downloaded at run time by PyTorch Geometric or OGB and "
        "cannot be had offline; this chapter uses the generated CSBM graphs and scikit-learn's "
        "digits instead (data.graph_by_name: 'csbm-aligned', 'csbm-weak', 'digits')"
    )


GRAPHS = ("csbm-aligned", "csbm-weak", "digits")


def graph_by_name(name: str, spec: CSBMSpec, seed: int) -> Data:
    """One of the chapter's downstream graphs: ``csbm-aligned`` (angle 0), ``csbm-weak``
    (angle 90 degrees), ``digits`` (the digits node graph); a benchmark name raises."""
    if name in BENCHMARKS:
        return load_benchmark(name)
    name = checks.choice(name, "graph name", GRAPHS + BENCHMARKS)
    if name == "digits":
        return digits_node_graph()
    return csbm(spec, 0.0 if name == "csbm-aligned" else 90.0, seed)
