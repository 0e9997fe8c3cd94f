"""How a paper package makes its modules reachable from the one name a notebook imports:
``from reprobook.papers import angular_mean as am`` and then ``am.agreement``, ``am.config``,
and (loaded only when first used) ``am.full``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType


def lazy_submodules(package: str) -> Callable[[str], ModuleType]:
    """A module-level ``__getattr__`` (PEP 562) for the package named ``package``: an attribute
    the package does not define is looked up as its submodule and imported on first use, so a
    heavy optional module (one that imports transformers) costs nothing until a notebook reaches
    it. In a paper's ``__init__.py``: ``__getattr__ = core.lazy_submodules(__name__)``."""

    def __getattr__(name: str) -> ModuleType:
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"{package}.{name}":
                raise AttributeError(
                    f"module {package!r} has no attribute or submodule {name!r}"
                ) from None
            raise

    return __getattr__
