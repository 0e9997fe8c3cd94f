"""The Markov-language experiments shared by notebooks 3-5: data, trained networks cached
between notebooks (:func:`reprobook.core.load_or_train`), and a callback that scores a network
while it trains.

Paper: "Spherical Flows for Sampling Categorical Data" (arXiv 2605.05629; full text not read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import lightning.pytorch as pl
import numpy as np
import torch

from reprobook.core import to_accelerator

from .config import Language, Net
from .data import MarkovChain
from .model import PosteriorTransformer, train_posterior
from .paths import check_path

__all__ = [
    "LanguageTask",
    "language_task",
    "language_network",
    "train_network",
    "ScoreDuringTraining",
    "to_accelerator",
]

SLUG = "vmf_sphere_flow"


class LanguageTask(NamedTuple):
    chain: MarkovChain
    W: torch.Tensor  # (V, V) one-hot embeddings, float64
    train: np.ndarray  # (n_train, L) training sequences
    target: float  # the expected NLL per token of a real sequence of length L


def language_task(language: Language, net: Net) -> LanguageTask:
    """The chain, its one-hot embeddings and ``net.n_train`` training sequences (seeded by
    ``net.data_seed``)."""
    chain = MarkovChain(language.V, language.chain_seed, language.concentration)
    seqs = chain.sample(net.n_train, language.L, np.random.default_rng([net.data_seed]))
    return LanguageTask(
        chain,
        torch.eye(language.V, dtype=torch.float64),
        seqs,
        chain.expected_nll_per_token(language.L),
    )


def language_network(
    task: LanguageTask,
    language: Language,
    net: Net,
    *,
    profile: str,
    path: str = "vmf",
    time_conditioned: bool = False,
    seed: int = 0,
    callbacks=(),
    always_train: bool = False,
) -> tuple[PosteriorTransformer, bool]:
    """The posterior network for the Markov language on ``path``, trained with ``net`` and
    ``seed``: loaded from the chapter's checkpoint cache when an earlier notebook trained it,
    trained (and cached) otherwise. ``always_train`` trains even when a checkpoint exists (a
    notebook that watches the training through ``callbacks``); the cache then still records it.
    Returns ``(network in eval mode, loaded)``."""
    from reprobook.core import load_or_train

    check_path(path)
    key = {
        "language": language,
        "net": net,
        "path": path,
        "time_conditioned": bool(time_conditioned),
        "seed": int(seed),
    }

    def fit() -> PosteriorTransformer:
        return train_network(
            task.train,
            task.W,
            net,
            kappa_max=language.kappa_max,
            path=path,
            time_conditioned=time_conditioned,
            seed=seed,
            callbacks=callbacks,
        )

    def build() -> PosteriorTransformer:
        return PosteriorTransformer(
            task.W.float(),
            language.L,
            kappa_max=language.kappa_max,
            width=net.width,
            depth=net.depth,
            heads=net.heads,
            lr=net.lr,
            time_conditioned=time_conditioned,
            path=path,
            warmup_steps=net.warmup_steps,
            total_steps=net.train_steps,
            warp=net.warp,
            seed=seed,
        )

    tags = ("-tc" if time_conditioned else "") + ("-warp" if net.warp else "")
    name = f"language-{path}{tags}-s{int(seed)}"
    if always_train:
        trained = fit()
        load_or_train(
            SLUG,
            name,
            profile=profile,
            key=key,
            build=build,
            train=lambda m: (m.load_state_dict(trained.state_dict()), m)[1],
        )
        return to_accelerator(trained), False
    model, loaded = load_or_train(
        SLUG, name, profile=profile, key=key, build=build, train=lambda m: fit()
    )
    return to_accelerator(model), loaded


def train_network(
    tokens: np.ndarray,
    W: torch.Tensor,
    net: Net,
    *,
    kappa_max: float,
    path: str = "vmf",
    time_conditioned: bool = False,
    clues: np.ndarray | None = None,
    n_clue_tokens: int | None = None,
    seed: int = 0,
    callbacks=(),
) -> PosteriorTransformer:
    """:func:`.model.train_posterior` with the architecture and training budget of ``net``."""
    return train_posterior(
        tokens,
        W.float(),
        kappa_max=kappa_max,
        width=net.width,
        depth=net.depth,
        heads=net.heads,
        lr=net.lr,
        warmup_steps=net.warmup_steps,
        batch_size=net.batch_size,
        train_steps=net.train_steps,
        path=path,
        time_conditioned=time_conditioned,
        clues=clues,
        n_clue_tokens=n_clue_tokens,
        warp=net.warp,
        seed=seed,
        callbacks=callbacks,
    )


class ScoreDuringTraining(pl.Callback):
    """Scores the network while it trains: after each training step whose global step count is
    in ``at``, ``score(module)`` runs with the module in eval mode (then back to training), and
    the row ``{"step": step, **score(module)}`` is appended to :attr:`rows`."""

    def __init__(self, score: Callable[[Any], dict], at: Iterable[int]):
        if not callable(score):
            raise TypeError(f"score must be a callable score(module) -> dict, got {score!r}")
        self.score, self.at = score, {int(s) for s in at}
        self.rows: list[dict] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step not in self.at:
            return
        module.eval()
        self.rows.append({"step": step, **self.score(module)})
        module.train()
