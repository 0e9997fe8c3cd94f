"""Profiles of the notebooks of the spherical-flows chapter (vMF paths for categorical data).

Paper: "Spherical Flows for Sampling Categorical Data" (arXiv 2605.05629; full text not read).

Notebooks: ``01_vmf_path`` (C1: the cosine ODE carries the uniform law to vMF),
``02_perfect_posterior`` (C2, and C3/C4 with exact posteriors), ``03_learning_the_posterior``
(C5, and C3 with a learned posterior), ``04_three_paths`` (C4 with learned posteriors),
``05_time_conditioning`` (C6) and ``06_shidoku_puzzles`` (C7, and C4 on puzzles). Notebooks 3-5
train the same vMF network; it is cached
(:func:`reprobook.core.load_or_train`) so that a later notebook loads what an earlier one trained.

Data. Everything is generated: a first-order Markov-chain language (exact likelihood and exact
posteriors by forward-backward) and the 288 Shidoku (4x4 Sudoku) grids (exact posteriors by
enumeration). The paper's data, "sudoku-extreme" and LM1B, live on a model hub that the book's
machines cannot reach; the full profile therefore scales the generated tasks instead. The full
profile has not been run (no GPU was available when the chapter was written): its sizes are
our plan, not measured.

``PROFILES`` is keyed by the notebooks' file stems; a notebook resolves its configuration with
``core.start(vf, "<notebook stem>", profile, seed, **overrides)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from reprobook.core.resources import Resources

__all__ = [
    "PathConfig",
    "OracleConfig",
    "Language",
    "Net",
    "LearnConfig",
    "PathsConfig",
    "TimeConfig",
    "PuzzleConfig",
    "SudokuConfig",
    "PROFILES",
]


@dataclass(frozen=True)
class PathConfig:
    """C1: the push-forward of the uniform law by the cosine ODE, per dimension d."""

    dims: tuple[int, ...] = (3, 16, 64)  # ambient dimensions d (the sphere is S^{d-1})
    kappa_max: tuple[float, ...] = (10.0, 72.0, 320.0)  # final concentration per d: A_d ~ 0.9
    n: int = 4000  # uniform cosines pushed forward per d
    steps: int = 128  # RK4 steps of ds/dkappa = psi (1 - s^2) from 0 to kappa_max
    n_kappa: int = 121  # psi table: grid points in kappa
    n_s: int = 201  # psi table: grid points in s
    n_quantiles: int = 199  # deterministic check: quantile levels u = 1/200 .. 199/200
    fractions: tuple[float, ...] = (0.25, 0.5, 1.0)  # C1: checked at kappa = fraction * kappa_max
    alpha: float = 0.05  # KS level, split over the dimensions (Bonferroni)
    quantile_tol: float = 1e-3  # allowed |transported quantile - vMF quantile|


@dataclass(frozen=True)
class OracleConfig:
    """C2 (and C3, C4 at the oracle level): samplers driven by exact posteriors."""

    V: int = 16  # Markov language: vocabulary (one-hot embeddings, d = V)
    L: int = 16  # sequence length
    concentration: float = 0.3  # Dirichlet concentration of the transition rows (sparse)
    chain_seed: int = 0  # the language is MarkovChain(V, chain_seed, concentration)
    kappa_max: float = 60.0  # vMF path end, A_16(60) = 0.882
    n: int = 500  # sequences per sampler run
    n_final: int = 2000  # C2: sequences of the run with the most ODE steps (the scored gap)
    ode_steps: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
    # (predictor steps, correctors)
    pc: tuple[tuple[int, int], ...] = ((4, 1), (4, 3), (8, 1), (8, 3), (16, 1), (32, 1), (64, 1))
    sde_sigma2: tuple[float, ...] = (0.25, 1.0)  # SDE noise levels sigma^2 (in units of t)
    eps0: float = 0.01  # corrector step size at the start (the code's default)
    shidoku_kappa_max: float = 40.0  # Shidoku: one-hot d = V = 5 (blank, 4 digits), A_5(40) = 0.95
    shidoku_n: int = 1440  # unconditional samples (5 per grid on average)
    shidoku_steps: int = 32


@dataclass(frozen=True)
class Language:
    """The Markov-chain language of notebooks 2-5, and its vMF path."""

    V: int = 16  # vocabulary; one-hot embeddings, d = V
    L: int = 16  # sequence length
    concentration: float = 0.3  # Dirichlet concentration of the transition rows (sparse)
    chain_seed: int = 0  # the language is MarkovChain(V, chain_seed, concentration)
    kappa_max: float = 60.0  # vMF path end, A_16(60) = 0.882


@dataclass(frozen=True)
class Net:
    """The posterior network and its training (the same on every path)."""

    width: int = 64  # transformer width
    depth: int = 2  # transformer blocks
    heads: int = 4
    lr: float = 6e-3  # AdamW peak learning rate (the paper's code: 3e-4 over 100k steps)
    warmup_steps: int = 100  # linear warm-up, then cosine decay to 0.1 lr at train_steps
    batch_size: int = 64
    train_steps: int = 500  # reduced (1,000 until a slower machine; see C3's revisions)
    n_train: int = 50_000  # training sequences drawn once from the chain
    data_seed: int = 1  # seeds the training sequences
    warp: bool = False  # draw training levels through the learned warp (eq. vmf-warp)


@dataclass(frozen=True)
class LearnConfig:
    """C5 and C3 with a learned posterior, on the Markov language."""

    language: Language = Language()
    net: Net = Net()
    eval_at: tuple[int, ...] = (250, 500)  # training steps at which it is scored
    n_eval: int = 500  # sequences per evaluation
    eval_kappas: tuple[float, ...] = (0.0, 2.5, 5.0, 10.0, 20.0, 40.0)  # test CE against kappa
    sample_steps: int = 32  # ODE steps for the learned-versus-oracle samples
    pc: tuple[tuple[int, int], ...] = ((32, 0), (16, 1), (8, 3))  # (steps, correctors): 33 NFE
    eps0: float = 0.01  # corrector step size at the start (the code's default)
    sample_seeds: int = 3  # sampling seeds per sampler for C3
    # C5: network initialisations (offsets of the notebook's seed); the first drives C3
    train_seeds: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class PathsConfig:
    """C4: the same network trained on the vMF, geodesic and Euclidean paths, sampled at matched
    NFE."""

    language: Language = Language()
    net: Net = Net()
    n_eval: int = 500
    steps: tuple[int, ...] = (8, 32)  # Euler steps per sampler; NFE = steps + 1 on every path
    pc: tuple[int, int] = (16, 1)  # every path's PC setting at 33 NFE (correctors on all paths)
    sample_seeds: int = 2
    train_seeds: tuple[int, ...] = (0,)  # network initialisations per path (offsets of the seed)


@dataclass(frozen=True)
class TimeConfig:
    """C6: a time-conditioned network against the unconditioned one, same budget."""

    language: Language = Language()
    net: Net = Net()
    n_eval: int = 500
    sample_steps: int = 32
    sample_seeds: int = 3
    train_seeds: tuple[int, ...] = (0,)  # network initialisations of each kind (seed offsets)


@dataclass(frozen=True)
class PuzzleConfig:
    """C7 (and C4 on a second task): clue-conditioned Shidoku puzzles, three paths and vMF with
    PC."""

    # n_train unused: the puzzles come from the training grids
    net: Net = Net(train_steps=500, n_train=0)
    kappa_max: float = 40.0  # one-hot d = V = 5 (blank + 4 digits), A_5(40) = 0.95
    test_fraction: float = 0.2  # grids held out for the test puzzles (58 of 288)
    blanks: tuple[int, int] = (8, 12)  # blanked cells per puzzle, inclusive range
    copies: int = 40  # training puzzles per training grid (fresh blanks each)
    n_eval: int = 256  # test puzzles per training seed, from the held-out grids (fresh per seed)
    steps: int = 32  # Euler steps of the ODE samplers: 33 NFE with the read-out
    pc: tuple[tuple[int, int], ...] = ((16, 1), (8, 3))  # vMF PC settings at the same NFE
    eps0: float = 0.01
    sample_seeds: int = 1  # sampling seeds per puzzle and method (averaged per puzzle)
    train_seeds: tuple[int, ...] = (0,)  # network initialisations per path (seed offsets)


@dataclass(frozen=True)
class SudokuConfig:
    """C8: clue-conditioned 9x9 Sudoku puzzles with unique solutions, three paths with PC."""

    net: Net = Net(width=64, depth=2, heads=4, train_steps=300, n_train=2000)
    kappa_max: float = 50.0  # one-hot d = V = 10 (blank + 9 digits), the code's Sudoku default
    clues: int = 30  # clues kept per test puzzle (fewer only where uniqueness allows)
    train_blanks: tuple[int, int] = (30, 55)  # blanks of a training puzzle (no uniqueness check)
    n_test: int = 24  # test puzzles, each with a unique solution (checked by the solver)
    steps: int = 32
    pc: tuple[tuple[int, int], ...] = ((16, 1), (8, 3))
    eps0: float = 0.01
    paths: tuple[str, ...] = ("vmf",)  # paths trained (all three at the full profile)
    train_seeds: tuple[int, ...] = (0,)


# Wall time of each notebook at the reduced sizes: see each notebook's cost line (timed cold by
# `reprobook run --jobs 1` with the chapter alone, kernel start included). A training step of the
# width-64 network took about 20 ms on one thread when the chapter was sized and 26-40 ms on this
# machine's slower days; the language networks then moved from 1,000 to 500 steps and the puzzle
# networks from 700 to 500 (C3's revisions keep what 1,000 steps gave). The full profile is much
# larger (networks of the paper's size, 20,000 steps, five training seeds per path and of the
# time-conditioned network, thousands of samples): many hours on one GPU by our estimate; it has
# not been run.
_FULL_SEEDS = (0, 1, 2, 3, 4)  # C4-C7 compare trained networks: intervals over 5 training seeds
# The puzzle networks of notebooks 6 (Shidoku, puzzles generated on the fly: n_train 0) and 7
# (9x9, a fixed training set).
_FULL_PUZZLE_NET = Net(
    width=256,
    depth=6,
    heads=8,
    lr=3e-4,
    warmup_steps=1000,
    batch_size=512,
    train_steps=20_000,
    n_train=0,
)
_FULL_NET = dataclasses.replace(_FULL_PUZZLE_NET, n_train=1_000_000)  # the language networks
_FULL_PATH = PathConfig(
    dims=(3, 16, 64, 256),
    kappa_max=(10.0, 72.0, 320.0, 1300.0),
    n=100_000,
    steps=512,
    n_kappa=1000,
    n_s=1000,
)
_FULL_ORACLE = OracleConfig(
    n=5000,
    n_final=20_000,
    ode_steps=(4, 8, 16, 32, 64, 128, 256, 512),
    pc=((4, 1), (4, 3), (8, 1), (8, 3), (16, 1), (16, 3), (32, 1), (32, 3), (64, 1), (128, 1)),
    sde_sigma2=(0.1, 0.25, 1.0, 4.0),
    shidoku_n=14_400,
    shidoku_steps=128,
)
_FULL_LEARN = LearnConfig(
    net=_FULL_NET,
    eval_at=(1000, 2000, 5000, 10_000, 20_000),
    n_eval=5000,
    sample_seeds=5,
    pc=((128, 0), (64, 1), (32, 3)),
    sample_steps=128,
    train_seeds=_FULL_SEEDS,
)
_FULL_PATHS = PathsConfig(
    net=_FULL_NET, n_eval=5000, steps=(8, 32, 128), sample_seeds=5, train_seeds=_FULL_SEEDS
)
_FULL_PUZZLES = PuzzleConfig(
    net=_FULL_PUZZLE_NET, copies=400, n_eval=2000, sample_seeds=5, train_seeds=_FULL_SEEDS
)
_FULL_SUDOKU = SudokuConfig(
    net=dataclasses.replace(_FULL_PUZZLE_NET, n_train=200_000),
    clues=25,
    n_test=2000,
    paths=("vmf", "geodesic", "euclidean"),
    train_seeds=_FULL_SEEDS,
)
_FULL_TIME = TimeConfig(
    net=_FULL_NET, n_eval=5000, sample_steps=128, sample_seeds=5, train_seeds=_FULL_SEEDS
)

# The smoke profile: the full profile's code path (the paper-shaped networks' code, every path,
# several training seeds) with every size cut to seconds on one CPU thread. Two training seeds,
# so that the intervals over training seeds the full profile scores can still be formed.
_SMOKE_SEEDS = (0, 1)
_SMOKE_NET = dict(width=16, depth=1, heads=2, warmup_steps=2, batch_size=16, train_steps=8)
_SMOKE_LANGUAGE_NET = dataclasses.replace(_FULL_NET, **_SMOKE_NET, n_train=512)

PROFILES: dict[str, dict[str, Any]] = {
    "01_vmf_path": {
        "reduced": PathConfig(),
        "full": _FULL_PATH,
        "smoke": dataclasses.replace(
            _FULL_PATH, n=500, steps=32, n_kappa=41, n_s=61, n_quantiles=19
        ),
    },
    "02_perfect_posterior": {
        "reduced": OracleConfig(),
        "full": _FULL_ORACLE,
        # ODE runs at 17, 33 and 65 NFE, which the notebook compares the other samplers at
        "smoke": dataclasses.replace(
            _FULL_ORACLE,
            n=40,
            n_final=80,
            ode_steps=(4, 16, 32, 64),
            pc=((4, 1), (16, 1), (32, 1)),
            sde_sigma2=(0.25,),
            shidoku_n=64,
            shidoku_steps=8,
        ),
    },
    "03_learning_the_posterior": {
        "reduced": LearnConfig(),
        "full": _FULL_LEARN,
        "smoke": dataclasses.replace(
            _FULL_LEARN,
            net=_SMOKE_LANGUAGE_NET,
            eval_at=(4, 8),
            n_eval=40,
            sample_seeds=2,
            pc=((8, 0), (4, 1), (2, 3)),
            sample_steps=8,
            train_seeds=_SMOKE_SEEDS,
        ),
    },
    "04_three_paths": {
        "reduced": PathsConfig(),
        "full": _FULL_PATHS,
        "smoke": dataclasses.replace(
            _FULL_PATHS,
            net=_SMOKE_LANGUAGE_NET,
            n_eval=40,
            steps=(4, 8),
            pc=(4, 1),
            sample_seeds=2,
            train_seeds=_SMOKE_SEEDS,
        ),
    },
    "06_shidoku_puzzles": {
        "reduced": PuzzleConfig(),
        "full": _FULL_PUZZLES,
        "smoke": dataclasses.replace(
            _FULL_PUZZLES,
            net=dataclasses.replace(_FULL_PUZZLE_NET, **_SMOKE_NET),
            copies=2,
            n_eval=16,
            steps=8,
            pc=((4, 1), (2, 3)),
            sample_seeds=2,
            train_seeds=_SMOKE_SEEDS,
        ),
    },
    "07_sudoku_9x9": {
        "reduced": SudokuConfig(),
        "full": _FULL_SUDOKU,
        "smoke": dataclasses.replace(
            _FULL_SUDOKU,
            net=dataclasses.replace(_FULL_SUDOKU.net, **_SMOKE_NET, n_train=64),
            n_test=4,
            steps=8,
            pc=((4, 1), (2, 3)),
            train_seeds=_SMOKE_SEEDS,
        ),
    },
    "05_time_conditioning": {
        "reduced": TimeConfig(),
        "full": _FULL_TIME,
        "smoke": dataclasses.replace(
            _FULL_TIME,
            net=_SMOKE_LANGUAGE_NET,
            n_eval=40,
            sample_steps=8,
            sample_seeds=2,
            train_seeds=_SMOKE_SEEDS,
        ),
    },
}


# What one run of the chapter needs (read by `reprobook list` and the Slurm executor).
# full, an estimate (the full profile has not been run): five training seeds of a 6-layer
# transformer per path: several hours (estimated).
RESOURCES = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=8, hours=0.15),
    "full": Resources(gpus=1, cpus=8, mem_gb=64, hours=8.0),
}
