"""What one run of a chapter needs from a machine: GPUs, CPU cores, memory and wall time.

Each chapter's ``config.py`` declares it next to its sizes::

    RESOURCES = {
        "reduced": core.Resources(gpus=0, cpus=2, mem_gb=8, hours=0.25),
        "full": core.Resources(gpus=1, cpus=8, mem_gb=64, hours=6),
    }

The runner reads this table from the file's text (it imports no paper package) to size a
cluster job and to sum the book's GPU-hours. A chapter without one gets :data:`DEFAULTS`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from . import checks


@dataclass(frozen=True)
class Resources:
    gpus: int = 0  # GPUs on one node
    cpus: int = 2  # CPU cores
    mem_gb: float = 8.0  # memory, GiB
    hours: float = 0.5  # wall time of the whole chapter, hours

    def __post_init__(self) -> None:
        for name in ("gpus", "cpus"):
            checks.integer(
                getattr(self, name), f"Resources.{name}", minimum=1 if name == "cpus" else 0
            )
        for name in ("mem_gb", "hours"):
            checks.real(getattr(self, name), f"Resources.{name}", above=0)

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.hours

    def describe(self) -> str:
        gpus = f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}, " if self.gpus else "no GPU, "
        return f"{gpus}{self.cpus} cores, {self.mem_gb:g} GiB, {self.hours:g} h"


DEFAULTS = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=8, hours=0.5),
    "full": Resources(gpus=1, cpus=8, mem_gb=32, hours=4),
}


def read_resources(config_py: Path, profile: str) -> Resources:
    """The ``RESOURCES[profile]`` a chapter's ``config.py`` declares (read from its text, with
    literal arguments only), else the default for the profile. A malformed table is an error
    that names the file."""
    if profile not in DEFAULTS:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(DEFAULTS)}")
    path = Path(config_py)
    if not path.is_file():
        return DEFAULTS[profile]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        value = None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "RESOURCES" for t in node.targets
        ):
            value = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "RESOURCES"
        ):
            value = node.value
        if value is None:
            continue
        if not isinstance(value, ast.Dict):
            raise ValueError(
                f"{path}: RESOURCES must be a dict literal "
                "{'reduced': Resources(...), 'full': ...}"
            )
        for key, call in zip(value.keys, value.values):
            if not (isinstance(key, ast.Constant) and key.value == profile):
                continue
            if not (
                isinstance(call, ast.Call)
                and (
                    getattr(call.func, "attr", None) == "Resources"
                    or getattr(call.func, "id", None) == "Resources"
                )
            ):
                raise ValueError(f"{path}: RESOURCES[{profile!r}] must be a Resources(...) call")
            try:
                kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
            except ValueError:
                raise ValueError(
                    f"{path}: RESOURCES[{profile!r}] takes literal keyword arguments only"
                ) from None
            try:
                return Resources(**kwargs)
            except TypeError as err:
                raise ValueError(
                    f"{path}: RESOURCES[{profile!r}]: {err}; fields: gpus, cpus, mem_gb, hours"
                ) from None
        return DEFAULTS[profile]
    return DEFAULTS[profile]
