"""What one run of a chapter needs from a machine: GPUs, CPU cores, memory, wall time, and
the inputs that are not part of the book's locked environment (data, weights, packages).

Each chapter's ``config.py`` declares it next to its sizes::

    RESOURCES = {
        "reduced": core.Resources(gpus=0, cpus=2, mem_gb=8, hours=0.25),
        "full": core.Resources(
            gpus=1, cpus=8, mem_gb=64, hours=6,
            inputs=(
                core.Input(name="CIFAR-10", kind="dataset", find="hf-dataset:uoft-cs/cifar10",
                           get="datasets.load_dataset('uoft-cs/cifar10') with network",
                           licence="MIT", size_gb=0.13),
            ),
        ),
    }

The runner reads this table from the file's text (it imports no paper package) to size a
cluster job, to sum the book's GPU-hours and, before a run at the full profile starts, to check
that every input is present (:func:`missing_inputs`). A chapter without one gets
:data:`DEFAULTS`.

The smoke profile needs the full profile's inputs in fixture form: ``RESOURCES["smoke"]`` (or
the default) sizes its job, and its inputs are always the full profile's, found among the
chapter's fixtures (:mod:`reprobook.core.fixtures`). A chapter's code loads an input from
:func:`locate`, which answers the hub id (or the path) at full and the fixture at smoke.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from . import checks

INPUT_KINDS = ("package", "dataset", "weights", "data")
# how an input's presence is checked: "<way>:<what>"
FIND_WAYS = {
    "module": "an importable Python module (module:transformers)",
    "hf-dataset": "a dataset in the Hugging Face caches (hf-dataset:uoft-cs/cifar10)",
    "hf-model": "a model repository in the Hugging Face hub cache (hf-model:Qwen/Qwen3-4B)",
    "env-path": "a file or folder named by an environment variable (env-path:IHEVAL_DIR)",
}


@dataclass(frozen=True)
class Input:
    """One input a profile needs beyond the locked environment: a dataset, model weights, a
    package, or other data. ``find`` says how its presence is checked (:data:`FIND_WAYS`),
    ``get`` how a reader gets it, ``unless`` names a notebook parameter setting that does
    without it (a deliberate stand-in, ``"llm=emulated"``)."""

    name: str
    kind: str
    find: str
    get: str
    licence: str = "unknown"
    size_gb: float | None = None
    unless: str | None = None
    notebooks: tuple[str, ...] = ()  # the notebooks (file stems) that use it; () for all

    def __post_init__(self) -> None:
        for field in ("name", "get"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Input.{field} must be a non-empty string, got {value!r}")
        checks.choice(self.kind, "Input.kind", INPUT_KINDS)
        way, _, what = str(self.find).partition(":")
        if way not in FIND_WAYS or not what:
            raise ValueError(
                f"Input.find must be '<way>:<what>' with way one of {', '.join(FIND_WAYS)}, "
                f"got {self.find!r}"
            )
        if self.size_gb is not None:
            checks.real(self.size_gb, "Input.size_gb", above=0)
        if self.unless is not None and (not isinstance(self.unless, str) or "=" not in self.unless):
            raise ValueError(f"Input.unless must be 'parameter=value', got {self.unless!r}")
        if not isinstance(self.notebooks, tuple) or not all(
            isinstance(n, str) and n for n in self.notebooks
        ):
            raise ValueError(
                f"Input.notebooks must be a tuple of notebook file stems, got {self.notebooks!r}"
            )

    def used_by(self, notebook: str) -> bool:
        """Whether the notebook (file stem) uses this input."""
        return not self.notebooks or notebook in self.notebooks

    def describe(self) -> str:
        size = f", {self.size_gb:g} GB" if self.size_gb is not None else ""
        return f"{self.name} ({self.kind}, {self.licence}{size})"

    def waived_by(self, params: Mapping[str, object]) -> bool:
        """Whether the run's parameters choose the stand-in that does without this input."""
        if self.unless is None:
            return False
        key, _, value = self.unless.partition("=")
        return key in params and str(params[key]) == value


def _hf_home() -> Path:
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))


def input_present(
    item: Input, profile: str = "full", root: Path | None = None, slug: str | None = None
) -> bool:
    """Whether ``item`` is on this machine, by its ``find`` (nothing is downloaded). At the
    smoke profile a dataset or weights input is present when chapter ``slug``'s fixture of it
    is built (book at ``root``); a package must be importable at every profile."""
    way, _, what = item.find.partition(":")
    if profile == "smoke" and way != "module":
        if root is None or slug is None:
            raise ValueError("input_present at the smoke profile needs the book root and slug")
        from .fixtures import fixture_path

        return fixture_path(root, slug, item.find).exists()
    if way == "module":
        try:
            return importlib.util.find_spec(what) is not None
        except (ImportError, ValueError):
            return False
    if way == "env-path":
        value = os.environ.get(what)
        return bool(value) and Path(value).exists()
    hub = Path(os.environ.get("HF_HUB_CACHE", _hf_home() / "hub"))
    if way == "hf-model":
        return any((hub / f"models--{what.replace('/', '--')}" / "snapshots").glob("*/config.json"))
    datasets_cache = Path(os.environ.get("HF_DATASETS_CACHE", _hf_home() / "datasets"))
    snapshots = hub / f"datasets--{what.replace('/', '--')}" / "snapshots"
    prepared = datasets_cache / what.replace("/", "___")
    return any(snapshots.glob("*/*")) or prepared.is_dir()


def needed_inputs(
    resources: Resources,
    params: Mapping[str, object] | None = None,
    notebooks: Iterable[str] | None = None,
) -> list[Input]:
    """The inputs of ``resources`` that a run needs: less those a parameter waives and, given
    ``notebooks`` (file stems), those none of them uses."""
    params = params or {}
    stems = None if notebooks is None else list(notebooks)
    return [
        i
        for i in resources.inputs
        if (stems is None or any(i.used_by(n) for n in stems)) and not i.waived_by(params)
    ]


def missing_inputs(
    resources: Resources,
    params: Mapping[str, object] | None = None,
    notebooks: Iterable[str] | None = None,
    profile: str = "full",
    root: Path | None = None,
    slug: str | None = None,
) -> list[Input]:
    """The inputs of ``resources`` that this machine lacks, less those a parameter waives and,
    given ``notebooks`` (file stems), those none of them uses (``profile``, ``root`` and
    ``slug`` as :func:`input_present` takes them)."""
    return [
        i
        for i in needed_inputs(resources, params, notebooks)
        if not input_present(i, profile, root, slug)
    ]


def locate(chapter: str, find: str, profile: str, root: Path | None = None) -> str:
    """Where chapter ``chapter``'s code loads the input checked as ``find`` from: at the full
    profile the hub id (``hf-model:``, ``hf-dataset:``), the module name (``module:``) or the
    path the environment variable names (``env-path:``); at the smoke profile the local folder
    of the chapter's fixture of it (a package is the real one at both). The reduced profile
    uses no inputs, and a ValueError says so, as it does for a ``find`` the chapter's full
    profile does not declare."""
    way, _, what = str(find).partition(":")
    if way not in FIND_WAYS or not what:
        raise ValueError(f"find must be '<way>:<what>' with way one of {', '.join(FIND_WAYS)}")
    if profile not in ("full", "smoke"):
        raise ValueError(
            f"the {profile} profile uses no inputs; locate({find!r}) is for the full and smoke "
            "profiles"
        )
    from .paths import book_root

    root = Path(root) if root is not None else book_root()
    declared = [i.find for i in chapter_resources(root, chapter, "full").inputs]
    if find not in declared:
        raise ValueError(
            f"chapter {chapter} declares no input {find!r} in RESOURCES['full']; declared: "
            f"{', '.join(declared) or 'none'}"
        )
    if way == "module":
        return what
    if profile == "smoke":
        from .fixtures import ensure

        return str(ensure(root, chapter, [find])[find])
    if way == "env-path":
        value = os.environ.get(what)
        if not value:
            raise MissingInputs(f"${what} is not set: it names the folder of {find}")
        return value
    return what


def load_hf_dataset(chapter: str, find: str, profile: str, root: Path | None = None, **kwargs):
    """The hub dataset checked as ``find`` (``"hf-dataset:uoft-cs/cifar10"``): at the full
    profile ``datasets.load_dataset(id, **kwargs)`` (from the caches when offline), at smoke
    the chapter's fixture, saved with ``save_to_disk`` (``kwargs`` ``split`` picks a split
    there too; the others are for the hub only)."""
    import datasets

    where = locate(chapter, find, profile, root)
    if profile == "smoke":
        data = datasets.load_from_disk(where)
        split = kwargs.get("split")
        return data[split] if split is not None and isinstance(data, datasets.DatasetDict) else data
    return datasets.load_dataset(where, **kwargs)


class MissingInputs(RuntimeError):
    """A profile's inputs that this machine lacks; the message lists each with how to get it."""


def missing_message(profile: str, missing_by_place: Mapping[str, list[Input]]) -> str:
    """One message listing every missing input, grouped by chapter or notebook; ``""`` when
    nothing is missing."""
    lines = []
    for place, missing in missing_by_place.items():
        if not missing:
            continue
        lines.append(f"  {place}:")
        for item in missing:
            waiver = f" (or run the stand-in: -p {item.unless})" if item.unless else ""
            lines.append(f"    - {item.describe()}, checked as {item.find}: {item.get}{waiver}")
    if not lines:
        return ""
    head = f"the {profile} profile needs inputs this machine lacks; nothing was run:"
    return "\n".join([head, *lines])


@dataclass(frozen=True)
class Resources:
    gpus: int = 0  # GPUs on one node
    cpus: int = 2  # CPU cores
    mem_gb: float = 8.0  # memory, GiB
    hours: float = 0.5  # wall time of the whole chapter, hours
    inputs: tuple[Input, ...] = ()  # what the profile needs beyond the locked environment

    def __post_init__(self) -> None:
        for name in ("gpus", "cpus"):
            checks.integer(
                getattr(self, name), f"Resources.{name}", minimum=1 if name == "cpus" else 0
            )
        for name in ("mem_gb", "hours"):
            checks.real(getattr(self, name), f"Resources.{name}", above=0)
        if not isinstance(self.inputs, tuple) or not all(isinstance(i, Input) for i in self.inputs):
            raise ValueError(f"Resources.inputs must be a tuple of Input, got {self.inputs!r}")

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.hours

    def describe(self) -> str:
        gpus = f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}, " if self.gpus else "no GPU, "
        return f"{gpus}{self.cpus} cores, {self.mem_gb:g} GiB, {self.hours:g} h"


DEFAULTS = {
    "reduced": Resources(gpus=0, cpus=2, mem_gb=8, hours=0.5),
    "full": Resources(gpus=1, cpus=8, mem_gb=32, hours=4),
    "smoke": Resources(gpus=0, cpus=2, mem_gb=8, hours=0.1),
}


def read_resources(config_py: Path, profile: str) -> Resources:
    """The ``RESOURCES[profile]`` a chapter's ``config.py`` declares (read from its text, with
    literal arguments only), else the default for the profile. At the smoke profile the inputs
    are always the full profile's (in fixture form). A malformed table is an error that names
    the file."""
    if profile not in DEFAULTS:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(DEFAULTS)}")
    if profile == "smoke":
        own = _read_resources(Path(config_py), "smoke")
        return replace(own, inputs=_read_resources(Path(config_py), "full").inputs)
    return _read_resources(Path(config_py), profile)


def _read_resources(path: Path, profile: str) -> Resources:
    path = Path(path)
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
            where = f"{path}: RESOURCES[{profile!r}]"
            kwargs = {}
            for kw in call.keywords:
                if kw.arg == "inputs":
                    kwargs["inputs"] = _literal_inputs(kw.value, where)
                    continue
                try:
                    kwargs[kw.arg] = ast.literal_eval(kw.value)
                except ValueError:
                    raise ValueError(f"{where} takes literal keyword arguments only") from None
            try:
                return Resources(**kwargs)
            except TypeError as err:
                raise ValueError(
                    f"{where}: {err}; fields: gpus, cpus, mem_gb, hours, inputs"
                ) from None
        return DEFAULTS[profile]
    return DEFAULTS[profile]


def chapter_resources(root: Path, slug: str, profile: str) -> Resources:
    """The ``RESOURCES[profile]`` of the chapter ``slug`` of the book at ``root``."""
    return read_resources(root / "lib" / "reprobook" / "papers" / slug / "config.py", profile)


def _literal_inputs(node: ast.expr, where: str) -> tuple[Input, ...]:
    """``inputs=(Input(...), ...)`` read from the text: a tuple or list of ``Input`` calls
    with literal keyword arguments."""
    if not isinstance(node, ast.Tuple | ast.List):
        raise ValueError(f"{where}: inputs must be a tuple of Input(...) calls")
    out = []
    for call in node.elts:
        if not (
            isinstance(call, ast.Call)
            and not call.args
            and (
                getattr(call.func, "attr", None) == "Input"
                or getattr(call.func, "id", None) == "Input"
            )
        ):
            raise ValueError(f"{where}: inputs must be Input(...) calls with keyword arguments")
        try:
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
        except ValueError:
            raise ValueError(f"{where}: Input takes literal keyword arguments only") from None
        try:
            out.append(Input(**kwargs))
        except TypeError as err:
            raise ValueError(
                f"{where}: Input: {err}; fields: name, kind, find, get, licence, size_gb, unless, "
                "notebooks"
            ) from None
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    return tuple(out)
