"""Profiles: each chapter declares a ``reduced``, a ``full`` and a ``smoke`` configuration per
notebook.

A configuration is a frozen dataclass whose fields are every size the notebook uses. A notebook
resolves its profile once, with optional overrides, and reads every knob from the result::

    cfg = resolve({"reduced": Sizes(n=100), "full": Sizes(n=10_000)}, "reduced", n=50)

``reduced`` is the default everywhere (2 CPU cores, about a minute a notebook); ``full`` is the
paper's scale on one GPU. ``smoke`` runs the full profile's code path (its models, loaders,
Trainer settings and evaluation) with every size cut to seconds on CPU, fed by tiny offline
fixtures of the full profile's inputs (:mod:`reprobook.core.fixtures`); its values are never
verdicts. A smoke configuration differs from the full one in sizes only (numbers, and tuples
cut to a part of the full one's), which ``tests/test_smoke_profile.py`` holds every chapter to.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")

PROFILE_NAMES = ("reduced", "full", "smoke")
# profiles that run the full profile's code path (the smoke profile is the full one, cut small)
FULL_PATH_PROFILES = ("full", "smoke")


class ProfileError(ValueError):
    """An unknown profile, an unknown override key or an override of the wrong type."""


def runs_full_path(profile: str) -> bool:
    """Whether ``profile`` runs the full profile's code path (``full`` and ``smoke``): the branch
    a notebook or library function takes for the paper's models, data and loaders. Raises
    :class:`ProfileError` for an unknown profile."""
    if profile not in PROFILE_NAMES:
        valid = ", ".join(PROFILE_NAMES)
        raise ProfileError(f"unknown profile {profile!r}; valid profiles: {valid}")
    return profile in FULL_PATH_PROFILES


def _accepts(value: Any, annotation: Any) -> bool:
    """Whether ``value`` fits a field annotation (the simple cases configurations use)."""
    if annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(value, arm) for arm in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            return False
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return not args or all(_accepts(v, args[0]) for v in value)
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True


def _coerce(value: Any, annotation: Any) -> Any:
    """Lists become tuples for tuple fields and ints become floats for float fields."""
    if typing.get_origin(annotation) is tuple and isinstance(value, list):
        return tuple(value)
    if annotation is float and isinstance(value, int):
        return float(value)
    return value


def resolve(profiles: Mapping[str, T], profile: str, /, **overrides: Any) -> T:
    """The configuration of ``profile`` with ``overrides`` applied.

    ``profiles`` maps profile names to dataclass instances of one type. Overrides whose value is
    ``None`` are ignored, so a notebook can pass its optional parameters straight through.
    Raises :class:`ProfileError` naming the valid profiles, or the valid keys, or the expected
    type, when the request does not fit.
    """
    if profile not in profiles:
        if profile == "smoke" and "full" in profiles:
            raise ProfileError(
                "this configuration has no smoke profile: declare one beside 'full' "
                "(the full configuration with its sizes cut to seconds on CPU)"
            )
        raise ProfileError(
            f"unknown profile {profile!r}; valid profiles: {', '.join(sorted(profiles))}"
        )
    base = profiles[profile]
    if not dataclasses.is_dataclass(base):
        raise TypeError(f"profile {profile!r} is a {type(base).__name__}, not a dataclass instance")
    return _replace(base, overrides)


def _replace(base: T, overrides: Mapping[str, Any]) -> T:
    """``base`` with ``overrides`` applied, checked against its fields; ``outer__inner`` keys go
    to the nested configuration in field ``outer``."""
    nested: dict[str, dict[str, Any]] = {}
    flat: dict[str, Any] = {}
    for key, value in overrides.items():
        outer, sep, inner = key.partition("__")
        if sep and value is not None:
            nested.setdefault(outer, {})[inner] = value
        elif not sep:
            flat[key] = value
    for outer, inner in nested.items():
        field = getattr(base, outer, None)
        if not dataclasses.is_dataclass(field):
            raise ProfileError(
                f"override {outer}__...: {type(base).__name__} has no nested configuration "
                f"{outer!r}"
            )
        flat[outer] = _replace(field, inner)
    overrides = flat
    hints = typing.get_type_hints(type(base))
    names = [f.name for f in dataclasses.fields(base)]
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ProfileError(
            f"unknown override key(s) {', '.join(unknown)} for {type(base).__name__}; "
            f"valid keys: {', '.join(names)}"
        )
    for key, value in given.items():
        if not _accepts(value, hints[key]):
            raise ProfileError(
                f"override {key}={value!r} does not fit the field's type {hints[key]}"
            )
        given[key] = _coerce(value, hints[key])
    return dataclasses.replace(base, **given)


def resolve_notebook(
    table: Mapping[str, Mapping[str, T]], notebook: str, profile: str, /, **overrides: Any
) -> T:
    """The configuration of one notebook of a chapter: ``table`` maps notebook names to their
    ``{"reduced": ..., "full": ...}`` profiles (a chapter's ``config.PROFILES``). Raises
    :class:`ProfileError` naming the chapter's notebooks for an unknown one, and otherwise as
    :func:`resolve` does."""
    if notebook not in table:
        raise ProfileError(f"unknown notebook {notebook!r}; valid notebooks: {', '.join(table)}")
    return resolve(table[notebook], profile, **overrides)


def describe(config: Any) -> dict[str, Any]:
    """The configuration as a plain dict (for the results file and for display)."""
    return dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
