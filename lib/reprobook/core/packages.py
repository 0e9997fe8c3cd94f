"""How a paper package makes its modules reachable from the one name a notebook imports:
``from reprobook.papers import angular_mean as am`` and then ``am.agreement``, ``am.config``,
and (loaded only when first used) ``am.full``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_submodules(
    package: str, exports: Mapping[str, str] | None = None
) -> Callable[[str], object]:
    """A module-level ``__getattr__`` (PEP 562) for the package named ``package``: an attribute
    the package does not define is looked up as its submodule and imported on first use, so a
    heavy module (one that imports Lightning or transformers) costs nothing until a notebook
    reaches it. ``exports`` maps names the package offers to the submodule that defines them
    (``{"train_predictor": "model"}``: ``pkg.train_predictor`` imports ``pkg.model`` on first
    use). In a paper's ``__init__.py``: ``__getattr__ = core.lazy_submodules(__name__)``."""
    exports = dict(exports or {})

    def __getattr__(name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if name in exports:
            module = importlib.import_module(f"{package}.{exports[name]}")
            value = getattr(module, name)
            setattr(sys.modules[package], name, value)  # the next look-up finds it directly
            return value
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"{package}.{name}":
                raise AttributeError(
                    f"module {package!r} has no attribute or submodule {name!r}"
                ) from None
            raise

    return __getattr__
