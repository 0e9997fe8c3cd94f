"""Profiles of the notebooks of chapter 17 (Spectral Reverse Prompt for frozen GNNs).

Paper: "Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting"
(arXiv 2609.32143). Notebooks: ``01_spectral_bias`` (C1, C2), ``02_srp_vs_baselines`` (C3) and
``03_ablations_shift`` (C4, C5). They share the GraphCL-pretrained encoders through
:func:`reprobook.core.load_or_train`: the key of an encoder is its graph, its
:class:`Encoder` and :class:`Pretrain` settings and its seed, so a notebook that runs after
another with the same profile loads what the first trained.

Data. The paper's benchmarks cannot be had offline (``data.load_benchmark`` says so); both
profiles use the generated CSBM graphs and scikit-learn's digits. The full profile scales the
CSBM to the Cora shape (n = 20,000, 1,433 features, 7 classes) with the paper's GCN (hidden 128)
and training length; it has not been run here, so its sizes are our plan.

:data:`PROFILES` is keyed by the notebooks' file stems. A notebook resolves its configuration
with ``core.start(srp, "<notebook>", profile, seed, **overrides)``; an override of a downstream
setting names its field inside ``downstream`` (``downstream__shots=shots``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reprobook.core.resources import Resources

__all__ = [
    "CSBMSpec",
    "Encoder",
    "Pretrain",
    "Downstream",
    "BiasConfig",
    "CompareConfig",
    "AblationConfig",
    "PROFILES",
    "RESOURCES",
]


@dataclass(frozen=True)
class CSBMSpec:
    """The contextual SBM of eq. `spectral-reverse-prompt-csbm` (our construction)."""

    n: int = 1000  # nodes
    n_classes: int = 5  # classes C
    dim: int = 256  # feature dimension
    homophily: float = 0.8  # share of edges inside a class
    degree: float = 6.0  # average degree
    nuisance_dim: int = 32  # coordinates of the high-variance nuisance block
    nuisance_std: float = 2.0  # their standard deviation
    weak_std: float = 0.5  # standard deviation of the low-variance block (C coordinates)
    signal: float = 1.0  # length of a class mean
    basis_seed: int = 17  # the feature basis Q, shared by every graph (and graph A and B)


@dataclass(frozen=True)
class Encoder:
    """The frozen GCN (the paper's node encoder: 2 GCNConv layers)."""

    hidden: int = 32  # hidden and output width (the paper: 128)
    layers: int = 2  # GCNConv layers
    dropout: float = 0.5  # dropout after every layer (the paper's code)


@dataclass(frozen=True)
class Pretrain:
    """GraphCL pretraining: two augmented views, NT-Xent between node embeddings."""

    epochs: int = 40  # full-graph steps
    lr: float = 0.01  # Adam learning rate
    edge_drop: float = 0.1  # share of edges dropped per view
    feature_mask: float = 0.2  # share of feature columns zeroed per view
    temperature: float = 0.2  # NT-Xent temperature
    anchors: int = 256  # nodes per step entering the NT-Xent loss


@dataclass(frozen=True)
class Downstream:
    """Few-shot prompting on 2-hop ego subgraphs (the paper's node protocol)."""

    shots: int = 5  # labelled training nodes per class
    val_per_class: int = 5  # validation nodes per class (ours: the paper has no validation)
    n_test: int = 100  # test nodes (the paper: 20 % of the rest)
    hops: int = 2  # ego-subgraph radius
    epochs: int = 40  # full-batch Adam steps on the training subgraphs
    eval_every: int = 10  # validation and test are scored every this many steps
    lrs: tuple[float, ...] = (0.01,)  # learning rates tried by every method (picked on val)
    rank: int = 32  # SRP bottleneck r (the paper's adapter_dim)
    null_dim: int = 16  # SRP null-space dimension m (the paper's pca_dim)
    gpf_plus_basis: int = 10  # GPF-plus basis vectors
    aio_tokens: int = 10  # All-in-One prompt tokens


@dataclass(frozen=True)
class BiasConfig:
    """Notebook 01: spectral bias (C1) and what the directions carry (C2)."""

    spec: CSBMSpec = CSBMSpec()
    encoder: Encoder = Encoder()
    pretrain: Pretrain = Pretrain()
    graphs: tuple[str, ...] = ("csbm-aligned", "csbm-weak", "digits")  # C1: >= 2 graphs
    n_seeds: int = 3  # pretraining seeds per graph (C1 needs >= 3)
    top_fraction: float = 0.1  # C1: share of the largest-sigma directions in the top share
    probe_dirs: int = 8  # C2: directions in the top and in the bottom probe
    probe_shots: int = 10  # C2: labelled nodes per class for the logistic probes
    probe_test: int = 500  # C2: test nodes of the probes
    null_dim: int = 16  # C2: null-space directions m


@dataclass(frozen=True)
class CompareConfig:
    """Notebook 02: SRP against the baselines (C3)."""

    spec: CSBMSpec = CSBMSpec()
    encoder: Encoder = Encoder()
    pretrain: Pretrain = Pretrain()
    downstream: Downstream = Downstream()
    graphs: tuple[str, ...] = ("csbm-aligned", "csbm-weak", "digits")
    methods: tuple[str, ...] = (
        "linear",
        "gpf",
        "gpf_plus",
        "graphprompt",
        "all_in_one",
        "finetune",
        "srp",
    )
    n_seeds: int = 3  # downstream seeds (each on its own pretraining seed)


@dataclass(frozen=True)
class AblationConfig:
    """Notebook 03: the ablations (C4) and the constructed shift (C5)."""

    spec: CSBMSpec = CSBMSpec()
    encoder: Encoder = Encoder()
    pretrain: Pretrain = Pretrain()
    downstream: Downstream = Downstream()
    ablation_graphs: tuple[str, ...] = ("csbm-weak", "digits")  # C4
    variants: tuple[str, ...] = ("srp", "srp_nm", "srp_ns", "srp_nr", "srp_bi")
    angles: tuple[float, ...] = (0.0, 45.0, 90.0)  # C5: rotation of graph B's class block
    shift_source: str = "csbm-aligned"  # C5: graph A, where the encoder is pretrained
    n_seeds: int = 3


_FULL_SPEC = CSBMSpec(n=20_000, n_classes=7, dim=1433, nuisance_dim=128)
_FULL_ENCODER = Encoder(hidden=128)
_FULL_PRETRAIN = Pretrain(epochs=200, anchors=2048, lr=0.001)
_FULL_DOWN = Downstream(
    val_per_class=20, n_test=2000, epochs=200, eval_every=1, lrs=(0.001, 0.005, 0.01)
)
_FULL = dict(spec=_FULL_SPEC, encoder=_FULL_ENCODER, pretrain=_FULL_PRETRAIN)

_FULL_BIAS = replace(BiasConfig(), n_seeds=5, **_FULL)
_FULL_COMPARE = replace(CompareConfig(), n_seeds=5, downstream=_FULL_DOWN, **_FULL)
_FULL_ABLATION = replace(AblationConfig(), n_seeds=5, downstream=_FULL_DOWN, **_FULL)

# The smoke profile: the full profile's code path (every graph, method and variant, the GCN and
# its training loops, scoring at every step) with every size cut to seconds on one CPU thread;
# two seeds, so that the intervals over seeds can still be formed.
_SMOKE = dict(
    spec=replace(_FULL_SPEC, n=300, dim=96, nuisance_dim=16),
    encoder=replace(_FULL_ENCODER, hidden=32),
    pretrain=replace(_FULL_PRETRAIN, epochs=3, anchors=64),
    n_seeds=2,
)
_SMOKE_DOWN = replace(_FULL_DOWN, val_per_class=2, n_test=40, epochs=4, lrs=(0.001, 0.01))

PROFILES = {
    "01_spectral_bias": {
        "reduced": BiasConfig(),
        "full": _FULL_BIAS,
        "smoke": replace(_FULL_BIAS, **_SMOKE, probe_shots=5, probe_test=100),
    },
    "02_srp_vs_baselines": {
        "reduced": CompareConfig(),
        "full": _FULL_COMPARE,
        "smoke": replace(
            _FULL_COMPARE, **_SMOKE, downstream=replace(_SMOKE_DOWN, rank=8, null_dim=8)
        ),
    },
    "03_ablations_shift": {
        "reduced": AblationConfig(),
        "full": _FULL_ABLATION,
        "smoke": replace(
            _FULL_ABLATION, **_SMOKE, downstream=replace(_SMOKE_DOWN, rank=8, null_dim=8)
        ),
    },
}

# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=2, hours=0.05),
    "full": Resources(gpus=1, cpus=8, mem_gb=32, hours=1.0),
}
