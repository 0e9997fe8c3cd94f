"""Recording what a notebook measured for its chapter's claims, and reading it back.

A notebook opens a :class:`Run`, records one value per claim it checks, and ends with the
table of those claims. Each record rewrites the notebook's results file atomically::

    <results>/<profile>/<chapter slug>/<notebook>.json

The verdict is never stored by hand: it is computed from the check in ``claims.yml`` whenever a
table or the ledger is shown. A statistical claim is recorded with its interval
(``run.record("C3", core.t_interval(per_seed))``), which is what its check compares with the bars.
Each results file keeps the digests of the claims file and the notebook it was produced under,
so a result that no longer matches them is known to be stale.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import numbers
import os
from pathlib import Path
from typing import Any

from .chapters import (
    DECIDING,
    PAPERS_TERMS,
    VERDICT_LABELS,
    Chapter,
    get_chapter,
    recorded_verdict,
    unit_verdicts,
    worst_verdict,
)
from .paths import atomic_write_text, book_root, results_dir, results_file, tagged_results_dir
from .profiles import PROFILE_NAMES, describe
from .runtime import quiet_lightning, runtime_facts, seed_everything
from .stats import as_interval


def file_sha256(path: Path) -> str | None:
    path = Path(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def source_digests(chapter: Chapter, notebook: str) -> dict[str, str | None]:
    """The digests a result is tied to: the chapter's claims file and the notebook's source."""
    return {
        "claims_sha256": file_sha256(chapter.folder / "claims.yml"),
        "notebook_sha256": file_sha256(chapter.folder / f"{notebook}.ipynb"),
    }


def stale_sources(chapter: Chapter, data: dict[str, Any]) -> list[str]:
    """The files (``claims.yml``, the notebook) that changed since the results ``data`` were
    written: their digests differ from the ones the results recorded."""
    nb = data.get("notebook")
    now = source_digests(chapter, nb)
    return [
        name
        for name, key in (("claims.yml", "claims_sha256"), (f"{nb}.ipynb", "notebook_sha256"))
        if data.get(key) != now[key]
    ]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python (NumPy scalars and arrays become floats, ints and lists)."""
    if isinstance(value, (bool, str)) or value is None:
        return value
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return plain(value.item())
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value)


def _claim_value(value: Any) -> bool | int | float:
    value = plain(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(
                f"a claim value must be finite, got {value}: a failed measurement should raise, "
                "not be recorded"
            )
        return value
    raise TypeError(f"a claim value is a number or a bool, got {type(value).__name__}: {value!r}")


OVERRIDES_ENV = "REPROBOOK_OVERRIDES"
# what a smoke run shows where a verdict would be: its sizes are cut to seconds, its inputs are
# fixtures, and its values decide nothing
SMOKE_LABEL = "smoke run: no verdict"
PROFILE_ENV = "REPROBOOK_PROFILE"


def _runner_overrides() -> dict[str, Any]:
    text = os.environ.get(OVERRIDES_ENV)
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"${OVERRIDES_ENV} is not JSON: {text!r}") from None
    return {k: v for k, v in data.items() if k not in ("profile", "seed")}


class Run:
    """One execution of one notebook: its seed, profile and configuration, and the claims it
    has measured so far. Create it with :func:`start`."""

    def __init__(
        self,
        chapter: Chapter,
        notebook: str,
        profile: str,
        seed: int,
        config: Any,
        root: Path,
        threads: int,
        stand_ins: dict[str, str] | None = None,
    ):
        self.chapter = chapter
        self.notebook = notebook
        self.profile = profile
        self.seed = seed
        self.config = config
        self.root = root
        self.threads = threads
        self.path = results_file(profile, chapter.slug, notebook, root)
        if seed != 0 and not os.environ.get("REPROBOOK_RESULTS"):
            # run by hand (Jupyter, papermill) at another seed: kept apart from the book's own
            # results, where `reprobook run -p seed=N` puts them too
            self.path = (
                tagged_results_dir(root, f"seed{seed}")
                / profile
                / chapter.slug
                / f"{notebook}.json"
            )
        self._data: dict[str, Any] = {
            "chapter": chapter.slug,
            "notebook": notebook,
            "profile": profile,
            "seed": seed,
            "config": plain(describe(config)) if config is not None else None,
            # parameters the runner injected besides profile and seed (say n_instances=5): the
            # ledger shows them, so a value measured off the profile's sizes is never mistaken
            "overrides": _runner_overrides(),
            # deliberate stand-ins for full-profile inputs (a parameter such as llm=emulated):
            # the ledger shows them beside the verdict
            "stand_ins": dict(stand_ins or {}),
            "started": _now(),
            "facts": runtime_facts(root),
            "torch_threads": threads,
            # what the values were produced under: a result whose claims file or notebook has
            # changed since is stale, and the book refuses it
            **source_digests(chapter, notebook),
            "claims": {},
        }
        self._write()

    def _write(self) -> None:
        atomic_write_text(self.path, json.dumps(self._data, indent=2, sort_keys=False) + "\n")

    @property
    def claims(self) -> list:
        """The chapter's claims that this notebook checks (``notebook:`` in claims.yml)."""
        return [c for c in self.chapter.claims if c.notebook == self.notebook]

    def record(self, claim_id: str, value: Any, **details: Any) -> str:
        """Record the measured ``value`` of ``claim_id`` (with optional details such as the
        number of instances) and return the verdict its check gives at this profile.

        A statistical claim (``evidence: statistical``) is recorded with its interval: pass a
        :class:`~reprobook.core.stats.Interval` (``core.t_interval`` over seeds,
        ``core.proportion_interval``, ``core.bootstrap_interval``, ...) as ``value``. An exact
        claim or an illustration takes a number or a bool.

        ``value`` may be None only for a claim whose check is ``needs_full`` at this profile, or
        ``not_checkable`` (one that cannot be measured here); the details should then say why."""
        claim = self.chapter.claim(claim_id)
        if claim.notebook != self.notebook:
            raise ValueError(
                f"claim {claim_id} belongs to notebook {claim.notebook} in claims.yml, "
                f"not to {self.notebook}"
            )
        if "interval" in details:
            raise ValueError(
                "'interval' is not a detail: pass the interval itself as the value "
                "(core.t_interval, core.proportion_interval, core.bootstrap_interval)"
            )
        if claim.aggregate == "each" and claim.evidence == "statistical" and value is not None:
            return self._record_units(claim, value, details)
        if isinstance(value, dict):
            raise ValueError(
                f"claim {claim_id} is decided on one value: a mapping of units is for a claim "
                "with aggregate: each and its units in claims.yml"
            )
        interval = as_interval(value)
        if interval is not None:
            _check_design(claim, interval)
            if claim.evidence != "statistical":
                raise ValueError(
                    f"claim {claim_id} is {claim.evidence} in claims.yml: record its value alone; "
                    "intervals are for statistical claims"
                )
            low, high = _claim_value(interval.low), _claim_value(interval.high)
            if not low <= high:
                raise ValueError(
                    f"claim {claim_id}: the interval's low end {low} lies above its high end {high}"
                )
            value = interval.estimate
        if value is None:
            if claim.verdict(None, self.profile) not in ("needs_full", "not_checkable"):
                raise ValueError(
                    f"claim {claim_id} is checked at profile {self.profile!r}: "
                    "record the measured value, not None "
                    "(None is for claims whose check is needs_full at this profile, "
                    "or not_checkable)"
                )
        elif claim.verdict(None, self.profile) == "not_checkable":
            raise ValueError(
                f"claim {claim_id} is not_checkable in claims.yml: record None, "
                "with details that say what was done instead"
            )
        else:
            value = _claim_value(value)
            if (
                claim.evidence == "statistical"
                and interval is None
                and claim.verdict(None, self.profile) == "not_run"
            ):
                raise ValueError(
                    f"claim {claim_id} is statistical: record it with an interval "
                    "(core.t_interval over seeds, core.proportion_interval, "
                    "core.bootstrap_interval), or mark its check needs_full "
                    "at this profile when the budget cannot afford the seeds"
                )
        entry: dict[str, Any] = {"value": value, "details": plain(details), "recorded": _now()}
        if interval is not None:
            entry["interval"] = [float(interval.low), float(interval.high)]
            entry["interval_method"] = interval.method
            entry["interval_n"] = int(interval.n)
        self._data["claims"][claim_id] = entry
        self._write()
        return claim.verdict(value, self.profile, entry.get("interval"))

    def _record_units(self, claim, value: Any, details: dict[str, Any]) -> str:
        """A claim about each of several units: one interval per unit, decided unit by unit;
        the claim takes the worst unit's verdict, and its value and interval are that unit's."""
        if not isinstance(value, dict):
            raise ValueError(
                f"claim {claim.id} is decided on each of its units ({', '.join(claim.units)}): "
                "record a mapping unit -> interval, not one pooled value"
            )
        names = [str(k) for k in value]
        if sorted(names) != sorted(claim.units):
            raise ValueError(
                f"claim {claim.id}: recorded units {', '.join(names) or 'none'}; claims.yml "
                f"names {', '.join(claim.units)}: record each of them, and only them"
            )
        units: dict[str, dict[str, Any]] = {}
        for name in claim.units:
            interval = as_interval(value[name])
            if interval is None:
                raise ValueError(
                    f"claim {claim.id}, unit {name}: record an interval "
                    "(core.t_interval, core.proportion_interval, core.bootstrap_interval)"
                )
            _check_design(claim, interval, unit=name)
            low, high = _claim_value(interval.low), _claim_value(interval.high)
            if not low <= high:
                raise ValueError(
                    f"claim {claim.id}, unit {name}: the interval's low end {low} lies above "
                    f"its high end {high}"
                )
            units[name] = {
                "value": _claim_value(interval.estimate),
                "interval": [float(low), float(high)],
                "interval_method": interval.method,
                "interval_n": int(interval.n),
            }
        verdicts = unit_verdicts(claim, units, self.profile)
        worst = worst_verdict(list(verdicts.values()))
        deciding = deciding_unit(claim, units, verdicts, worst, self.profile)
        entry: dict[str, Any] = {
            "value": units[deciding]["value"],
            "details": plain({**details, "deciding_unit": deciding}),
            "recorded": _now(),
            "interval": units[deciding]["interval"],
            "interval_method": f"worst of {len(units)} units ({deciding}): "
            + units[deciding]["interval_method"],
            "interval_n": units[deciding]["interval_n"],
            "units": units,
        }
        self._data["claims"][claim.id] = entry
        self._write()
        return worst

    def value(self, claim_id: str) -> Any:
        entry = self._data["claims"].get(claim_id)
        return None if entry is None else entry["value"]

    def interval(self, claim_id: str) -> tuple[float, float] | None:
        entry = self._data["claims"].get(claim_id)
        return None if entry is None or entry.get("interval") is None else tuple(entry["interval"])

    def verdict(self, claim_id: str) -> str:
        """The verdict of a claim this notebook has recorded (``not_run`` before it records)."""
        entry = self._data["claims"].get(claim_id)
        claim = self.chapter.claim(claim_id)
        if entry is None:
            return claim.verdict(None, self.profile)
        return recorded_verdict(
            claim, entry["value"], self.profile, entry.get("interval"), entry.get("units")
        )[0]

    def verdict_label(self, claim_id: str) -> str:
        """The verdict as the book words it ("partially reproduced"), for prose. A smoke run
        decides nothing: its label says so."""
        if self.profile == "smoke":
            return SMOKE_LABEL
        return verdict_label(self.verdict(claim_id), self.chapter.claim(claim_id))

    def describe(self, claim_id: str) -> str:
        """'0.086 [0.02, 0.15] (reproduced)': the recorded value with its interval and verdict,
        for prose made from results."""
        entry = self._data["claims"].get(claim_id) or {}
        value = format_estimate(entry.get("value"), entry.get("interval")) or "nothing recorded"
        return f"{value} ({self.verdict_label(claim_id)})"

    def claims_table(self, whole_chapter: bool = False):
        """The claims of this notebook (or of the whole chapter, from every notebook's results
        at this profile): paper value, our value, verdict."""
        import pandas as pd

        entries = dict(load_records(self.chapter, self.profile, self.root)) if whole_chapter else {}
        entries.update(self._data["claims"])
        rows = []
        for c in self.chapter.claims if whole_chapter else self.claims:
            entry = entries.get(c.id) or {}
            value, interval = entry.get("value"), entry.get("interval")
            verdict = recorded_verdict(c, value, self.profile, interval, entry.get("units"))[0]
            rows.append(
                {
                    "claim": c.id,
                    "metric": c.metric,
                    "paper": c.paper_value,
                    "ours": format_estimate(value, interval),
                    "rests on": c.basis,
                    "evidence": c.evidence + (" (revised)" if c.revised else ""),
                    "verdict": SMOKE_LABEL
                    if self.profile == "smoke"
                    else verdict_label(verdict, c),
                }
            )
        columns = ["claim", "metric", "paper", "ours", "rests on", "evidence", "verdict"]
        return pd.DataFrame(rows, columns=columns).set_index("claim")


def verdict_label(verdict: str, claim) -> str:
    """The verdict as the book words it, with what it rests on where that is not the paper's
    own terms: "not reproduced (our reconstruction)"."""
    text = VERDICT_LABELS[verdict]
    if verdict in DECIDING and claim.basis not in PAPERS_TERMS:
        text += f" (our {claim.basis})" if claim.basis != "own code" else " (our own code)"
    return text


def deciding_unit(claim, units, verdicts, worst: str, profile: str) -> str:
    """The unit that decides a claim about each unit: among those with the worst verdict, the
    one whose estimate lies farthest on the wrong side of the reproduced bar (the lowest for a
    lower bar, the highest for an upper one; the first listed when the bar is two-sided)."""
    tied = [n for n in claim.units if verdicts[n] == worst]
    check = claim.check_for(profile)
    bar = check.get("reproduced") or {}
    if "min" in bar and "max" not in bar:
        return min(tied, key=lambda n: units[n]["value"])
    if "max" in bar and "min" not in bar:
        return max(tied, key=lambda n: units[n]["value"])
    return tied[0]


_SIMULTANEOUS = ("Bonferroni", "permutation", "simultaneous", "Holm")


def _check_design(claim, interval, unit: str | None = None) -> None:
    """Refuse an interval that cannot decide this claim the way claims.yml says it is decided:
    a claim about trained models over training seeds needs a Student-t interval over per-seed
    values; a minimum or maximum over comparisons needs a simultaneous interval."""
    at = f"claim {claim.id}" + (f", unit {unit}" if unit else "")
    method = str(interval.method)
    if claim.replicates == "training seeds" and "Student-t" not in method:
        raise ValueError(
            f"{at} is decided over training seeds (replicates: training seeds): record a "
            "Student-t interval of the per-seed values (core.t_interval, or "
            f"core.worst_group_interval over seeds), not {method!r}; test items may be nested "
            "inside each seed, never stand in for seeds"
        )
    if claim.aggregate in ("min", "max") and not any(w in method for w in _SIMULTANEOUS):
        raise ValueError(
            f"{at} takes the {claim.aggregate} over several comparisons (aggregate: "
            f"{claim.aggregate}): record a simultaneous interval (core.worst_group_interval, "
            f"Bonferroni, or a permutation null), not {method!r}"
        )


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_estimate(value: Any, interval: Any = None) -> str:
    """``0.1234 [0.05, 0.19]``: the value with its interval when it has one ('' when None)."""
    if value is None:
        return ""
    if interval is None:
        return format_value(value)
    return f"{format_value(value)} [{float(interval[0]):.3g}, {float(interval[1]):.3g}]"


def load_results(
    profile: str, root: Path | None = None, slug: str | None = None, results: Path | None = None
) -> list[dict[str, Any]]:
    """Every results file at ``profile`` (of one chapter when ``slug`` is given), from the
    results folder ``results`` (default: :func:`~reprobook.core.paths.results_dir`)."""
    base = (Path(results) if results is not None else results_dir(root)) / profile
    pattern = f"{slug}/*.json" if slug else "*/*.json"
    out = []
    for path in sorted(base.glob(pattern)):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"unreadable results file {path}: {err}") from None
    return out


def load_records(
    chapter: Chapter, profile: str, root: Path | None = None, results: Path | None = None
) -> dict[str, dict[str, Any]]:
    """claim id -> what was recorded for it at ``profile``: value, seed, notebook, overrides,
    details and the run's facts, its interval, and ``stale``: the files (claims.yml, the
    notebook) that changed since the value was produced. A value counts only from the notebook
    its claims.yml entry names (a file left by a renamed notebook is ignored)."""
    owner = {c.id: c.notebook for c in chapter.claims}
    records: dict[str, dict[str, Any]] = {}
    for data in load_results(profile, root, chapter.slug, results):
        nb = data.get("notebook")
        stale = stale_sources(chapter, data)
        for cid, entry in data.get("claims", {}).items():
            if owner.get(cid) != nb:
                continue
            records[cid] = {
                "value": entry["value"],
                "interval": entry.get("interval"),
                "interval_method": entry.get("interval_method"),
                "units": entry.get("units"),
                "details": entry.get("details", {}),
                "seed": data.get("seed"),
                "notebook": nb,
                "overrides": data.get("overrides") or {},
                "stand_ins": data.get("stand_ins") or {},
                "facts": data.get("facts", {}),
                "stale": stale,
            }
    return records


def load_values(chapter: Chapter, profile: str, root: Path | None = None) -> dict[str, Any]:
    """claim id -> the value recorded at ``profile`` for ``chapter``."""
    return {cid: r["value"] for cid, r in load_records(chapter, profile, root).items()}


def _check_inputs(ch, notebook: str, profile: str, config: Any, root: Path) -> dict[str, str]:
    """Stop a notebook run by hand (Jupyter, papermill, Colab) before any work when its
    chapter's RESOURCES declare inputs for ``profile`` that this notebook uses and this
    machine lacks; the configuration's fields are the parameters that may waive one. At the
    smoke profile the chapter's fixtures of those inputs are built first. Returns the
    deliberate stand-ins the configuration chose (``{"llm": "emulated"}``): the parameters
    that waive a full-profile input this notebook would otherwise use."""
    import dataclasses
    from collections.abc import Mapping

    from .fixtures import ensure
    from .resources import (
        MissingInputs,
        chapter_resources,
        missing_inputs,
        missing_message,
        needed_inputs,
    )

    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        params = dataclasses.asdict(config)
    else:
        params = dict(config) if isinstance(config, Mapping) else {}
    stand_ins = {}
    for item in chapter_resources(root, ch.slug, "full").inputs:
        if item.used_by(notebook) and item.waived_by(params):
            key, _, value = item.unless.partition("=")
            stand_ins[key] = value
    res = chapter_resources(root, ch.slug, profile)
    if not res.inputs or profile == "reduced":
        return stand_ins
    if profile == "smoke":
        ensure(root, ch.slug, [i.find for i in needed_inputs(res, params, [notebook])])
    missing = missing_inputs(res, params, [notebook], profile, root, ch.slug)
    if missing:
        raise MissingInputs(missing_message(profile, {f"notebook {ch.slug}/{notebook}": missing}))
    return stand_ins


PAPERS_PACKAGE = "reprobook.papers."


def start(
    paper: Any,
    notebook: str,
    profile: str = "reduced",
    seed: int = 0,
    /,
    *,
    one_thread: bool = False,
    threads: int | None = None,
    **overrides: Any,
) -> tuple[Run, Any]:
    """A notebook's one set-up call: ``run, cfg = core.start(am, "02_per_batch_ip", profile,
    seed, n_batches=n_batches)``.

    ``paper`` is the chapter's paper package (``from reprobook.papers import angular_mean as
    am``); ``notebook`` is the notebook's file stem, which is also its key in the package's
    ``config.PROFILES``. The configuration is that notebook's ``profile`` with ``overrides``
    (the notebook's optional parameters; None keeps the profile's value, ``net__warp=True``
    sets a field of a nested configuration). Then, as :func:`begin`: seed everything, set
    torch's threads, quiet Lightning, record the machine's facts, and set the plotting theme.
    Returns the :class:`Run` that records the claims and the frozen configuration.

    ``one_thread=True`` runs torch on one thread except at the full profile: for notebooks that
    train small models (one thread gives the same weights in every run, and small models are no
    faster on two) or run many small torch operations. ``threads`` sets the count outright;
    with neither, torch takes the machine's default (``$REPROBOOK_THREADS`` under the runner).

    Raises a ValueError naming the valid choices for an unknown profile, notebook or override."""
    from .plotting import set_theme
    from .profiles import resolve

    name = getattr(paper, "__name__", "")
    table = getattr(getattr(paper, "config", None), "PROFILES", None)
    if not name.startswith(PAPERS_PACKAGE) or table is None:
        raise ValueError(
            f"paper must be a paper package with a config.PROFILES table "
            f"(from reprobook.papers import <slug>), got {paper!r}"
        )
    slug = name[len(PAPERS_PACKAGE) :].split(".")[0]
    if notebook not in table:
        raise ValueError(
            f"{slug}.config.PROFILES has no notebook {notebook!r}; "
            f"its notebooks: {', '.join(table)}"
        )
    cfg = resolve(table[notebook], profile, **overrides)
    if one_thread and threads is None and profile != "full":
        threads = 1
    run = begin(slug, notebook, profile, seed, cfg, threads)
    set_theme()
    return run, cfg


def begin(
    chapter: str,
    notebook: str,
    profile: str = "reduced",
    seed: int = 0,
    config: Any = None,
    threads: int | None = None,
) -> Run:
    """Begin a notebook's run with a configuration already made (what :func:`start` does after
    resolving the profile; tests and chapters without a paper package call it directly): seed
    everything, set torch's threads, quiet Lightning, record the machine's facts, and return the
    :class:`Run` that records claims.

    ``chapter`` is the paper's slug (``"spr_ldp"``), ``notebook`` the notebook's file stem
    (``"01_lp_check"``). Raises a ValueError naming the valid choices for an unknown profile,
    chapter or notebook.
    """
    if profile not in PROFILE_NAMES:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILE_NAMES)}")
    expected = os.environ.get(PROFILE_ENV)
    if expected and expected != profile:
        raise ValueError(
            f"the runner executes this notebook at profile {expected!r} "
            "but its profile parameter is "
            f"{profile!r}: choose the profile with `reprobook run --profile`, not with -p"
        )
    root = book_root()
    try:
        ch = get_chapter(chapter, root)
    except KeyError as err:
        raise ValueError(err.args[0]) from None
    if notebook not in ch.notebook_stems():
        raise ValueError(
            f"chapter {ch.slug} has no notebook {notebook!r}; "
            f"its notebooks: {', '.join(ch.notebook_stems())}"
        )
    stand_ins = _check_inputs(ch, notebook, profile, config, root)
    quiet_lightning()
    used = seed_everything(seed, threads)
    run = Run(ch, notebook, profile, seed, config, root, used, stand_ins)
    try:  # say where the results go, so a run by hand (Jupyter, papermill) knows where to look
        where = run.path.relative_to(root)
    except ValueError:
        where = run.path
    print(f"{ch.slug}/{notebook} at the {profile} profile, seed {seed}: results in {where}")
    return run
