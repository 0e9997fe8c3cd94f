"""Checkpoints shared between the notebooks of a chapter.

A chapter may train a model in one notebook and reuse it in the next. The runner orders a
chapter's notebooks, but a reader may open the third notebook first, and the test suite may run
two notebooks of one chapter at the same time. So a checkpoint is a cache, never a requirement:
:func:`load_or_train` loads it when a file for exactly this key exists and trains (then saves)
otherwise.

The key of a checkpoint is the caller's description of what was trained (configurations, seed,
data parameters, the key of the model it started from) plus a digest of the chapter's paper
package and of ``reprobook.core``, so a change to the training code never loads a stale model.
Files live in ``<results>/../checkpoints/<profile>/<slug>/<name>-<digest>.pt``
(``_build/checkpoints`` by default) beside a JSON file with the key, and are written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .paths import atomic_write_text, results_dir
from .training import resumable

CHECKPOINTS_ENV = "REPROBOOK_CHECKPOINTS"


def checkpoints_dir(profile: str, slug: str) -> Path:
    """``$REPROBOOK_CHECKPOINTS/<profile>/<slug>``, else ``checkpoints/<profile>/<slug>`` beside the
    results folder (``_build/checkpoints/...`` by default)."""
    env = os.environ.get(CHECKPOINTS_ENV)
    base = Path(env).expanduser().resolve() if env else results_dir().parent / "checkpoints"
    return base / profile / slug


# _code_of's result for each file content seen in this process (keyed by the content's SHA-256).
# Parsing and dumping a chapter's package and the core takes about a second, and a notebook asks
# for a checkpoint's key a dozen times; the bytes of a file decide its tree, so a file whose
# bytes changed is parsed again.
_CODE_CACHE: dict[bytes, bytes] = {}


def _code_of(path: Path) -> bytes:
    """What a module computes, without what it says: its syntax tree with docstrings dropped
    (comments and layout never reach the tree), so that rewording a comment or a docstring, or
    reformatting, keeps the chapter's trained models. A file that does not parse counts as is.
    The result is kept per file content (:data:`_CODE_CACHE`)."""
    text = path.read_bytes()
    content = hashlib.sha256(text).digest()
    if content not in _CODE_CACHE:
        _CODE_CACHE[content] = _parse_code(text)
    return _CODE_CACHE[content]


def _parse_code(text: bytes) -> bytes:
    """The syntax tree of ``text`` without docstrings, dumped (``text`` itself if it does not
    parse)."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False).encode()


def source_digest(slug: str) -> str:
    """SHA-256 over the code of ``reprobook.papers.<slug>`` and ``reprobook.core`` (each
    module's syntax tree without docstrings: a comment or docstring edit changes nothing)."""
    import importlib

    core_dir = Path(__file__).resolve().parent
    try:
        package = importlib.import_module(f"reprobook.papers.{slug}")
    except ModuleNotFoundError as err:
        raise ValueError(
            f"no paper package reprobook.papers.{slug} (chapter slug {slug!r})"
        ) from err
    paper_dir = Path(package.__file__).resolve().parent
    digest = hashlib.sha256()
    for folder in (paper_dir, core_dir):
        for path in sorted(folder.rglob("*.py")):
            digest.update(str(path.relative_to(folder)).encode())
            digest.update(_code_of(path))
    return digest.hexdigest()


def _canonical(value: Any) -> Any:
    """A JSON-able form of a key: dataclasses as dicts, tuples as lists, sorted mappings."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__class__": type(value).__name__, **_canonical(dataclasses.asdict(value))}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise TypeError(
        "a checkpoint key holds only dataclasses, mappings, sequences, str, int, float, bool "
        "or None; "
        f"got {type(value).__name__}"
    )


def checkpoint_key(slug: str, name: str, key: Mapping[str, Any]) -> tuple[str, dict]:
    """The digest and the canonical key of checkpoint ``name`` of chapter ``slug``."""
    import torch

    full = {
        "slug": slug,
        "name": name,
        "key": _canonical(key),
        "source": source_digest(slug),
        "torch": torch.__version__,
    }
    text = json.dumps(full, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16], full


def checkpoint_path(slug: str, name: str, *, profile: str, key: Mapping[str, Any]) -> Path:
    """Where :func:`load_or_train` keeps checkpoint ``name`` of chapter ``slug`` for ``key``
    (the file exists once a model has been trained for it), so that a notebook can tell which
    models still need training before it trains them side by side."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise ValueError(f"checkpoint name {name!r}: use letters, digits, '-' and '_' only")
    digest, _ = checkpoint_key(slug, name, key)
    return checkpoints_dir(profile, slug) / f"{name}-{digest}.pt"


def _loads_into_a_fresh_build(build: Callable[[], Any], state: Mapping[str, Any]) -> None:
    """Load ``state`` into a fresh ``build()`` (strict), leaving the random generators of
    Python, NumPy and torch as they were; raises what ``load_state_dict`` raises."""
    import random

    import numpy as np
    import torch

    py, npy = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            build().load_state_dict(state)
    finally:
        random.setstate(py)
        np.random.set_state(npy)


def atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save(obj, path)`` written whole or not at all: into a temporary file beside
    ``path`` (its folder made when missing), then renamed over it; the temporary file is removed
    if saving fails."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def load_or_train(
    slug: str,
    name: str,
    *,
    profile: str,
    key: Mapping[str, Any],
    build: Callable[[], Any],
    train: Callable[[Any], Any],
) -> tuple[Any, bool]:
    """A trained ``torch.nn.Module``: loaded from its checkpoint when one exists for ``key``,
    otherwise ``build()``, trained by ``train(module)`` (which trains in place or returns the
    trained module) and saved. The Trainers ``train`` makes with ``core.make_trainer`` save
    their last checkpoint now and then, and resume from it after a pre-emption.

    Returns ``(module, loaded)``. The module is in eval mode. ``name`` is a file-name stem
    (letters, digits, ``-``, ``_``); ``key`` must describe everything that decides the trained
    weights. An unreadable checkpoint file is trained again, from a fresh ``build()``, and
    replaced, not trusted. A trained module whose state does not load into a fresh
    ``build()`` is refused with an error before it is saved: it could never be loaded.
    """
    import torch

    path = checkpoint_path(slug, name, profile=profile, key=key)
    digest, full = checkpoint_key(slug, name, key)
    folder = path.parent
    module = build()
    if path.is_file():
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            module.load_state_dict(state)
            module.eval()
            return module, True
        except Exception as exc:  # noqa: BLE001 - a damaged cache is retrained, never trusted
            warnings.warn(
                f"checkpoint {path} could not be loaded ({type(exc).__name__}: {exc}); "
                "training again",
                stacklevel=2,
            )
            # load_state_dict copies the entries that fit before it raises: start again from
            # a fresh module, never from a half-loaded one.
            module = build()
    # A pre-empted training leaves its last Lightning checkpoint in this folder and the next
    # attempt resumes from it (core.training.resumable); a finished one removes it.
    with resumable(folder / f".{name}-{digest}.resume"):
        trained = train(module)
    module = trained if trained is not None else module
    module.eval()
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    try:
        _loads_into_a_fresh_build(build, state)
    except Exception as exc:  # noqa: BLE001 - reported with the reason
        # A model whose state does not fit what build() makes (a buffer sized at training
        # time, say) could never be loaded: it would train again in every notebook.
        raise RuntimeError(
            f"checkpoint {name!r}: the trained module's state does not load into what "
            f"build() makes ({type(exc).__name__}: {exc}); make build() create every "
            "parameter and buffer at its trained shape"
        ) from exc
    atomic_torch_save(state, path)
    atomic_write_text(path.with_suffix(".json"), json.dumps(full, indent=1, sort_keys=True))
    return module, False
