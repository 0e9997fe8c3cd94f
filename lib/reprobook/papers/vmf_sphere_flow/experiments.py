"""The experiments shared by notebooks 3-6: the Markov-language data, trained networks cached
between notebooks (:func:`reprobook.core.load_or_train`), a callback that scores a network while
it trains, and the side-by-side runs (:func:`reprobook.core.side_by_side`) that train the
networks not cached yet and sample every network, one process per core at the reduced profile.
Each training seeds itself and each sampler run draws from its own seeded generator, so a run
in another process gives what it gives in the notebook's.

Paper: "Spherical Flows for Sampling Categorical Data" (arXiv 2605.05629; full text not read).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import lightning as L
import numpy as np
import torch

from reprobook import core
from reprobook.core import to_accelerator

from . import evaluate as ev
from .config import Language, Net
from .data import MarkovChain
from .geometry import PsiTable
from .model import PosteriorTransformer, as_posterior, posterior_network, train_posterior
from .paths import check_path

__all__ = [
    "LanguageTask",
    "language_task",
    "language_network",
    "language_checkpoint",
    "language_samples",
    "PuzzleData",
    "puzzle_network",
    "puzzle_samples",
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

    name, key = _language_name_key(language, net, path, time_conditioned, seed)

    shape = dict(kappa_max=language.kappa_max, path=path, time_conditioned=time_conditioned)

    def fit() -> PosteriorTransformer:
        W = task.W.float()
        return train_posterior(task.train, W, net, **shape, seed=seed, callbacks=callbacks)

    def build() -> PosteriorTransformer:
        return posterior_network(task.W.float(), language.L, net, **shape, seed=seed)

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


def _language_name_key(
    language: Language, net: Net, path: str, time_conditioned: bool, seed: int
) -> tuple[str, dict]:
    """The checkpoint name and key of a Markov-language network (:func:`language_network`)."""
    check_path(path)
    key = {
        "language": language,
        "net": net,
        "path": path,
        "time_conditioned": bool(time_conditioned),
        "seed": int(seed),
    }
    tags = ("-tc" if time_conditioned else "") + ("-warp" if net.warp else "")
    return f"language-{path}{tags}-s{int(seed)}", key


class ScoreDuringTraining(L.Callback):
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


# --- side by side: train what is not cached yet, and sample, one process per core -------------


def _side_by_side(fn: Callable, jobs: Mapping, first: set, profile: str) -> dict:
    """``{name: fn(*args)}`` for ``jobs`` ``{name: args}``, computed side by side at the reduced
    profile (:func:`reprobook.core.side_by_side`, which runs them in this process where it is
    given one core) and one after the other otherwise. The jobs named in ``first`` (those that
    train a network, the longest) are started first."""
    names = sorted(jobs, key=lambda k: k not in first)  # stable: the trainings first
    out = core.side_by_side(fn, [jobs[k] for k in names], profile=profile)
    done = dict(zip(names, out))
    return {k: done[k] for k in jobs}


def _untrained(networks: dict, path_of: Callable[[Mapping], Any]) -> set:
    """The names of the jobs whose network has no checkpoint yet; refuses two jobs that would
    both train the same network."""
    todo: dict = {}
    for name, network in networks.items():
        if "exact" not in network and not path_of(network).is_file():
            todo.setdefault(path_of(network), []).append(name)
    twice = [names for names in todo.values() if len(names) > 1]
    if twice:
        raise ValueError(
            f"jobs {twice[0]} would each train the same uncached network: give all of its "
            "runs to one job"
        )
    return {names[0] for names in todo.values()}


@functools.lru_cache(maxsize=8)
def _psi_table(d: int, kappa_max: float) -> PsiTable:
    """One psi table per (d, kappa_max) and process: the jobs of a worker share it."""
    return PsiTable(d, kappa_max)


def _run_key(run: Mapping) -> tuple[str, int, int, list, dict]:
    """(sampler, n, steps, seeds, keywords) of a run, with the settings the sampler ignores
    dropped, so that runs that draw the same sequences share their cached scores ("pc" without
    correctors is the ODE; a corrector step size without correctors is unused)."""
    run = dict(run)
    sampler, n, steps, seeds = (run.pop(k) for k in ("sampler", "n", "steps", "seeds"))
    if run.get("correctors"):
        run.setdefault("eps0", 0.01)  # evaluate.generate's default
    else:
        run.pop("correctors", None)
        run.pop("eps0", None)
        sampler = "ode" if sampler == "pc" else sampler
    return sampler, int(n), int(steps), [int(s) for s in seeds], run


def _language_source(language: Language, net: Net, network: Mapping, profile: str):
    """The checkpoint file that names the posterior of a job (for an exact posterior, a name
    that only keys the cached scores): its digest covers the language, the network's key and
    the chapter's code."""
    if "exact" in network:
        key = {"language": language, "path": check_path(network["exact"])}
        return core.checkpoint_path(SLUG, f"exact-{network['exact']}", profile=profile, key=key)
    return language_checkpoint(language, net, profile=profile, **network)


def _score_files(language: Language, net: Net, network: Mapping, run: Mapping, profile: str):
    """One cache file per sampling seed of ``run``: the scores of its sequences."""
    sampler, n, steps, seeds, kw = _run_key(run)
    source = _language_source(language, net, network, profile).name
    folder = core.checkpoints_dir(profile, SLUG) / "scores"
    files = []
    for s in seeds:
        key = dict(source=source, sampler=sampler, n=n, steps=steps, seed=s, kw=kw)
        text = json.dumps(key, sort_keys=True, default=str)
        files.append(folder / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.npz")
    return files


def _language_job(
    language: Language, net: Net, network: Mapping, runs: list, profile: str
) -> list[ev.SampleScores]:
    """The scores of ``runs``, each sampling seed's read from the cache when an earlier run
    drew the same sequences (the same posterior, sampler, settings and seed), computed and
    cached otherwise; the network is loaded (or trained) only when something is computed."""
    task = language_task(language, net)
    psi = _psi_table(language.V, language.kappa_max)
    post = None
    out = []
    for run in runs:
        sampler, n, steps, seeds, kw = _run_key(run)
        nll, ent, nfe = [], [], 0
        for s, file in zip(seeds, _score_files(language, net, network, run, profile)):
            if file.is_file():
                with np.load(file) as f:
                    got = ev.SampleScores(f["nll"], f["entropy"], int(f["nfe"]))
            else:
                if post is None:
                    if "exact" in network:
                        post = ev.markov_oracle(task.chain, task.W, network["exact"])
                    else:
                        model, _ = language_network(task, language, net, profile=profile, **network)
                        post = as_posterior(model)
                args = (task.chain, sampler, post, task.W, language.L, n, steps)
                extra = dict(kappa_max=language.kappa_max, psi=psi, **kw)
                got = ev.language_scores(*args, seeds=[s], **extra)
                file.parent.mkdir(parents=True, exist_ok=True)
                tmp = file.with_suffix(f".{os.getpid()}.tmp.npz")
                np.savez(tmp, nll=got.nll, entropy=got.entropy, nfe=got.nfe)
                os.replace(tmp, file)
            nll.append(got.nll)
            ent.append(got.entropy)
            nfe = got.nfe
        if not nll:
            raise ValueError("seeds must name at least one sampling seed")
        out.append(ev.SampleScores(np.concatenate(nll), np.concatenate(ent), nfe))
    return out


def language_checkpoint(
    language: Language,
    net: Net,
    *,
    profile: str,
    path: str = "vmf",
    time_conditioned: bool = False,
    seed: int = 0,
):
    """Where :func:`language_network` caches that network (the file exists once it is
    trained)."""
    name, key = _language_name_key(language, net, path, time_conditioned, seed)
    return core.checkpoint_path(SLUG, name, profile=profile, key=key)


def language_samples(
    language: Language, net: Net, jobs: Mapping, *, profile: str
) -> dict[Any, list[ev.SampleScores]]:
    """Sampler runs of Markov-language posteriors, side by side (:func:`_side_by_side`).

    ``jobs`` maps a name to ``(network, runs)``. ``network`` is either the keywords of
    :func:`language_network` (``path``, ``time_conditioned``, ``seed``): that network, loaded
    from the cache, or trained (and cached) first when no earlier notebook trained it; or
    ``{"exact": path}``: the path's exact posterior (:func:`.evaluate.markov_oracle`). ``runs``
    is a list of dicts with the ``sampler``, ``n``, ``steps`` and ``seeds`` of
    :func:`.evaluate.language_scores` and any keywords of :func:`.evaluate.generate`
    (``correctors``, ``eps0``); ``kappa_max`` and the path's psi table are added. Returns
    ``{name: [SampleScores of each run]}``: the values the notebook gets by running the same
    loops itself. The scores of each sampling seed are cached beside the checkpoints, so
    that a run an earlier notebook made (the same posterior, sampler, settings and seed) is read,
    not drawn again; jobs with nothing left to draw run in this process. A network not cached
    yet may appear in one job only."""

    def path_of(network: Mapping):
        return language_checkpoint(language, net, profile=profile, **network)

    first = _untrained({k: nw for k, (nw, _) in jobs.items()}, path_of)
    args = {k: (language, net, dict(nw), list(runs), profile) for k, (nw, runs) in jobs.items()}
    cached = {  # every score cached: read here, not sent to another process
        k: a
        for k, a in args.items()
        if all(f.is_file() for r in a[3] for f in _score_files(language, net, a[2], r, profile))
    }
    done = {k: _language_job(*a) for k, a in cached.items()}
    todo = {k: a for k, a in args.items() if k not in cached}
    done.update(_side_by_side(_language_job, todo, first, profile) if todo else {})
    return {k: done[k] for k in jobs}


# --- Shidoku puzzles (notebook 6) ----------------------------------------------------------------


class PuzzleData(NamedTuple):
    """What a puzzle network is trained on: solved grids (N, L), their puzzles (N, L; 0 = blank),
    the one-hot embeddings (d, V), the clue vocabulary and the vMF path's end."""

    tokens: np.ndarray
    clues: np.ndarray
    W: torch.Tensor
    n_clue_tokens: int
    kappa_max: float


def _puzzle_name_key(data: PuzzleData, net: Net, path: str, seed: int) -> tuple[str, dict]:
    check_path(path)
    digest = hashlib.sha256()
    for a in (data.tokens, data.clues):
        a = np.ascontiguousarray(a, dtype=np.int64)
        digest.update(str(a.shape).encode() + a.tobytes())
    key = {
        "data": digest.hexdigest(),
        "W": data.W.tolist(),
        "n_clue_tokens": int(data.n_clue_tokens),
        "kappa_max": float(data.kappa_max),
        "net": net,
        "path": path,
        "seed": int(seed),
    }
    return f"shidoku-{path}{'-warp' if net.warp else ''}-s{int(seed)}", key


def puzzle_network(
    data: PuzzleData, net: Net, *, path: str, seed: int, profile: str
) -> tuple[PosteriorTransformer, bool]:
    """The clue-conditioned posterior network of ``path`` trained on ``data`` with ``net`` and
    ``seed`` (:func:`.model.train_posterior`), loaded from the chapter's checkpoint cache when
    it was trained before, trained and cached otherwise. Returns ``(network in eval mode,
    loaded)``."""
    name, key = _puzzle_name_key(data, net, path, seed)
    W = data.W.float()

    shape = dict(kappa_max=data.kappa_max, path=path, n_clue_tokens=data.n_clue_tokens)

    def build() -> PosteriorTransformer:
        return posterior_network(W, np.shape(data.tokens)[1], net, **shape, seed=seed)

    def fit(_) -> PosteriorTransformer:
        return train_posterior(data.tokens, W, net, **shape, clues=data.clues, seed=seed)

    model, loaded = core.load_or_train(SLUG, name, profile=profile, key=key, build=build, train=fit)
    return to_accelerator(model), loaded


def _puzzle_job(
    data: PuzzleData, net: Net, network: Mapping, runs: list, eps0: float, profile: str
) -> list[tuple[np.ndarray, int]]:
    if "exact" in network:
        path = network["exact"]

        def posterior(clues):
            return ev.grid_oracle(data.W, path, clues=np.asarray(clues))

    else:
        model, _ = puzzle_network(data, net, profile=profile, **network)

        def posterior(clues):
            return as_posterior(model, torch.as_tensor(clues), forbid=0)

    psi = _psi_table(data.W.shape[0], float(data.kappa_max))
    out = []
    for run in runs:
        run = dict(run)
        sampler, clues, steps = (run.pop(k) for k in ("sampler", "clues", "steps"))
        kw = dict(kappa_max=data.kappa_max, psi=psi, eps0=eps0, **run)
        out.append(ev.puzzle_solve_rates(sampler, posterior(clues), data.W, clues, steps, **kw))
    return out


def puzzle_samples(
    data: PuzzleData, net: Net, jobs: Mapping, *, eps0: float, profile: str
) -> dict[Any, list[tuple[np.ndarray, int]]]:
    """Puzzle-solving runs, side by side, as :func:`language_samples` for the Shidoku networks.

    ``jobs`` maps a name to ``(network, runs)``: ``network`` is ``{"path", "seed"}`` of
    :func:`puzzle_network` (loaded, or trained and cached first) or ``{"exact": path}`` (the
    exact posterior given each run's clues, :func:`.evaluate.grid_oracle`); each run is a dict
    with the ``sampler``, ``clues`` and ``steps`` of :func:`.evaluate.puzzle_solve_rates` and
    its keywords (``seeds``, ``correctors``); ``kappa_max``, the psi table and ``eps0`` are
    added. Returns ``{name: [(per-puzzle solve rates, NFE) of each run]}``."""

    def path_of(network: Mapping):
        name, key = _puzzle_name_key(data, net, network["path"], network["seed"])
        return core.checkpoint_path(SLUG, name, profile=profile, key=key)

    first = _untrained({k: nw for k, (nw, _) in jobs.items()}, path_of)
    args = {k: (data, net, dict(nw), list(r), eps0, profile) for k, (nw, r) in jobs.items()}
    return _side_by_side(_puzzle_job, args, first, profile)
