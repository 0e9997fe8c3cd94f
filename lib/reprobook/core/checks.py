"""Input checks shared by every chapter: one function per kind of argument, one wording.

Each check returns the value in the form the caller computes with (a Python ``int``, a
``float``, a float array) and raises :class:`InputError` otherwise. The message names the
argument, what is allowed and what was given::

    n = checks.integer(n, "n", minimum=1)            # n must be an integer >= 1, got 0
    eta = checks.real(eta, "eta", minimum=0, below=0.5)
    X = checks.array(X, "X", ndim=2, finite=True)

:class:`InputError` is both a ``ValueError`` and a ``TypeError``: a caller (or a test) may catch
either, whatever the wrong thing was (a bool where an integer belongs, or an integer out of
range).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Iterable
from typing import Any

import numpy as np

__all__ = [
    "InputError",
    "array",
    "boolean",
    "choice",
    "generator",
    "integer",
    "probability",
    "real",
    "same_shape",
]


class InputError(ValueError, TypeError):
    """An argument that is not what a function accepts; the message says what is allowed."""


def _fail(name: str, allowed: str, value: Any) -> InputError:
    shown = value if isinstance(value, str) and len(value) > 80 else repr(value)
    if len(shown) > 80:
        shown = f"{type(value).__name__} {shown[:60]}..."
    return InputError(f"{name} must be {allowed}, got {shown}")


def _range_words(minimum=None, maximum=None, above=None, below=None) -> str:
    parts = []
    if minimum is not None:
        parts.append(f">= {minimum}")
    if above is not None:
        parts.append(f"> {above}")
    if maximum is not None:
        parts.append(f"<= {maximum}")
    if below is not None:
        parts.append(f"< {below}")
    return " and ".join(parts)


def integer(
    value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as an ``int`` (NumPy integers accepted, bools and floats refused), within
    ``[minimum, maximum]`` where given."""
    bounds = _range_words(minimum, maximum)
    allowed = f"an integer {bounds}".rstrip()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise _fail(name, allowed, value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _fail(name, allowed, value)
    return int(value)


def real(
    value: Any,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    below: float | None = None,
) -> float:
    """``value`` as a finite ``float`` (ints and NumPy scalars accepted, bools and strings
    refused). ``minimum``/``maximum`` are inclusive bounds, ``above``/``below`` strict ones."""
    bounds = _range_words(minimum, maximum, above, below)
    allowed = f"a finite real number {bounds}".rstrip()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _fail(name, allowed, value)
    x = float(value)
    if not math.isfinite(x):
        raise _fail(name, allowed, value)
    if (
        (minimum is not None and x < minimum)
        or (maximum is not None and x > maximum)
        or (above is not None and x <= above)
        or (below is not None and x >= below)
    ):
        raise _fail(name, allowed, value)
    return x


def probability(value: Any, name: str, *, open_low: bool = False, open_high: bool = False) -> float:
    """A probability in [0, 1] (``open_low``/``open_high`` exclude an end)."""
    return real(
        value,
        name,
        minimum=None if open_low else 0,
        above=0 if open_low else None,
        maximum=None if open_high else 1,
        below=1 if open_high else None,
    )


def boolean(value: Any, name: str) -> bool:
    """``True`` or ``False`` (NumPy bools accepted; 0 and 1 refused: they are usually a slip)."""
    if not isinstance(value, (bool, np.bool_)):
        raise _fail(name, "True or False", value)
    return bool(value)


def choice(value: Any, name: str, allowed: Iterable[Any]) -> Any:
    """``value`` if it is one of ``allowed``."""
    options = list(allowed)
    if value not in options:
        raise _fail(name, "one of " + ", ".join(repr(o) for o in options), value)
    return value


def generator(rng: Any, name: str = "rng") -> np.random.Generator:
    """A ``numpy.random.Generator`` (build one with ``numpy.random.default_rng(seed)``)."""
    if not isinstance(rng, np.random.Generator):
        raise InputError(
            f"{name} must be a numpy.random.Generator (numpy.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    return rng


def array(
    value: Any,
    name: str,
    *,
    ndim: int | Collection[int] | None = None,
    shape: tuple[int | None, ...] | None = None,
    finite: bool = True,
    dtype: Any = float,
    what: str = "",
) -> np.ndarray:
    """``value`` as a NumPy array of ``dtype`` (torch tensors are moved to the CPU first).

    ``ndim`` is the allowed number of dimensions (one or several); ``shape`` the allowed shape,
    ``None`` standing for any size on that axis; ``finite`` refuses NaN and infinities.
    ``what`` names the axes in messages ("(n, d)", say).
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    label = f"{name} {what}".rstrip()
    try:
        out = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError):
        raise _fail(label, f"an array of {np.dtype(dtype).name} values", value) from None
    if ndim is not None:
        dims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if out.ndim not in dims:
            words = " or ".join(f"{d}-D" for d in dims)
            raise InputError(f"{label} must be a {words} array, got shape {out.shape}")
    if shape is not None:
        fits = out.ndim == len(shape) and all(s is None or s == o for s, o in zip(shape, out.shape))
        if not fits:
            sizes = ["any" if s is None else str(s) for s in shape]
            wanted = f"({sizes[0]},)" if len(sizes) == 1 else "(" + ", ".join(sizes) + ")"
            raise InputError(f"{label} must have shape {wanted}, got shape {out.shape}")
    if finite and out.dtype.kind in "fc" and not np.all(np.isfinite(out)):
        raise InputError(f"{label} must be finite, got NaN or infinite entries")
    return out


def same_shape(name_a: str, a: Any, name_b: str, b: Any) -> None:
    """Two arrays or tensors of one shape (elementwise partners)."""
    sa, sb = tuple(np.shape(a)), tuple(np.shape(b))
    if sa != sb:
        raise InputError(f"{name_a} and {name_b} must have the same shape, got {sa} and {sb}")
